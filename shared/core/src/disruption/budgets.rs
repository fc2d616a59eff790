//! NodePool disruption budgets: how many more of a pool's nodes may start a voluntary disruption
//! now, and the sentence that says why.
//!
//! Semantics follow Karpenter v1:
//! - a budget applies to a reason when its `reasons` list is empty or names the reason;
//! - a budget without a schedule is always active; one with `schedule` + `duration` is active for
//!   `duration` after each time the cron fires (UTC), i.e. when some firing `f` satisfies
//!   `now - duration < f <= now`;
//! - `nodes` is a count or a percentage of the pool's nodes, rounded **up** (Karpenter, like
//!   Kubernetes' `maxUnavailable`, prefers letting one node go over blocking a small pool forever:
//!   5% of 10 nodes allows 1);
//! - the most restrictive active budget wins; when budgets exist but none is active, disruption
//!   for that reason is unbounded (Karpenter's behaviour); a pool with no budgets at all gets the
//!   default `nodes: 10%`;
//! - a budget that cannot be evaluated (bad cron, schedule without duration) fails closed: 0;
//! - the pool's nodes the percentage is taken of are its **initialized** claims that still have a
//!   Node and whose instance termination has not been requested yet (Karpenter's
//!   `BuildDisruptionBudgetMapping`): a replacement still launching or registering does not count,
//!   or a 10% budget of 10 nodes would let a second node go while the first one's replacement
//!   boots (11 nodes round up to 2); a node whose instance is already being terminated has left;
//! - of those, the ones that are not healthy capacity count as disrupting whatever their reason —
//!   being disrupted (`disruption` set, Draining, Terminating) or **NotReady** — so the allowance
//!   is `limit - disrupting`. A NotReady node stays in the total (as in Karpenter) but uses up
//!   budget, so nodes that are down already are not joined by voluntary disruptions.
//!
//! Forceful reasons (expiration, interruptions, timeouts) are not subject to budgets; asking for
//! them returns an unbounded allowance that says so.

use std::time::Duration;

use crate::cluster::node_of;
use crate::cluster::Cluster;
use crate::model::{Budget, BudgetNodes, DisruptionReason, NodePool};
use crate::nodeclaim::{NodeClaim, Phase, Reason};
use crate::time::cron::CronSchedule;
use crate::time::{format_duration, Time};

/// Karpenter's default budget when a pool defines none.
pub const DEFAULT_BUDGET: BudgetNodes = BudgetNodes::Percent(10);

/// How far forward to follow overlapping firings when saying when a window ends. Schedules that
/// keep re-firing within their own duration (`* * * * *` with `1h`) never end; the sentence then
/// says "at least until".
const WINDOW_END_SEARCH: Duration = Duration::from_secs(7 * 24 * 3600);

const MINUTE_MS: i64 = 60_000;

/// The budget-relevant reason of a claim-level [`Reason`]: `None` for forceful reasons (not
/// subject to budgets). A rebalance replacement, and a node leaving with its deleted NodePool, are
/// none of Karpenter's three budget reasons, so only budgets without `reasons` limit them.
pub fn budget_reason(reason: Reason) -> Option<Option<DisruptionReason>> {
    match reason {
        Reason::Empty => Some(Some(DisruptionReason::Empty)),
        Reason::Underutilized => Some(Some(DisruptionReason::Underutilized)),
        Reason::Drifted => Some(Some(DisruptionReason::Drifted)),
        Reason::Rebalance | Reason::NodePoolDeleted => Some(None),
        _ => None,
    }
}

/// When a scheduled budget's current window opened and (at least) when it closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub opened: Time,
    /// `opened + duration`, extended by later firings that fall inside the window.
    pub ends: Time,
    /// The window keeps being extended beyond the search horizon: `ends` is a lower bound.
    pub open_ended: bool,
}

/// Whether a budget is active at `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activity {
    /// No schedule: always active.
    Always,
    /// Inside a scheduled window.
    Window(Window),
    /// Scheduled, and `now` is outside every window.
    Inactive,
    /// The budget cannot be evaluated; it fails closed (allows nothing).
    Invalid(String),
}

/// Whether `budget` is active at `now`. Scans back minute by minute over at most `duration`
/// (cron resolution is one minute; 720h is 43,200 cheap checks).
pub fn activity(budget: &Budget, now: Time) -> Activity {
    let Some(schedule) = &budget.schedule else {
        return Activity::Always;
    };
    let Some(duration) = budget.duration else {
        return Activity::Invalid(format!("schedule {schedule:?} has no duration"));
    };
    let cron = match CronSchedule::parse(schedule) {
        Ok(c) => c,
        Err(e) => return Activity::Invalid(e.to_string()),
    };
    match last_firing(&cron, now, duration) {
        Some(opened) => {
            let (ends, open_ended) = window_end(&cron, opened, duration);
            Activity::Window(Window { opened, ends, open_ended })
        }
        None => Activity::Inactive,
    }
}

/// The most recent minute `f` the cron fired with `now - duration < f <= now`.
fn last_firing(cron: &CronSchedule, now: Time, duration: Duration) -> Option<Time> {
    let earliest = now.minus(duration);
    let mut t = Time(now.0.div_euclid(MINUTE_MS) * MINUTE_MS);
    while t > earliest {
        if cron.fires_at(t) {
            return Some(t);
        }
        t = Time(t.0 - MINUTE_MS);
    }
    None
}

/// When a window opened at `opened` closes, following firings that land inside it (each one
/// pushes the end to its own `f + duration`).
fn window_end(cron: &CronSchedule, opened: Time, duration: Duration) -> (Time, bool) {
    let horizon = opened.plus(WINDOW_END_SEARCH);
    let mut end = opened.plus(duration);
    let mut t = Time(opened.0 + MINUTE_MS);
    while t < end {
        if t >= horizon {
            return (end, true);
        }
        if cron.fires_at(t) {
            end = t.plus(duration);
        }
        t = Time(t.0 + MINUTE_MS);
    }
    (end, false)
}

/// The node count a budget's `nodes` stands for in a pool of `total` nodes (percent rounded up).
pub fn scaled(nodes: BudgetNodes, total: usize) -> usize {
    match nodes {
        BudgetNodes::Count(n) => n as usize,
        BudgetNodes::Percent(p) => (total * p as usize).div_ceil(100),
    }
}

fn describe_nodes(nodes: BudgetNodes) -> String {
    match nodes {
        BudgetNodes::Count(n) => format!("{n}"),
        BudgetNodes::Percent(p) => format!("{p}%"),
    }
}

/// What the budgets allow for one pool and reason at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowance {
    pub pool: String,
    pub reason: Reason,
    /// The pool's nodes the percentages are taken of (see [`standing`]).
    pub total: usize,
    /// Of those, already being disrupted (for any reason) or NotReady.
    pub disrupting: usize,
    /// The most restrictive active budget in nodes; `None` = unbounded.
    pub limit: Option<usize>,
    /// How many more may start now: `limit - disrupting`, floored at 0; `usize::MAX` if unbounded.
    pub allowed: usize,
    /// The sentence for logs, Events and `dovetail plan`.
    pub why: String,
}

impl Allowance {
    /// Whether `n` more nodes may start disrupting.
    pub fn permits(&self, n: usize) -> bool {
        n <= self.allowed
    }
}

/// How a claim stands toward its pool's budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Not one of the pool's nodes for budgets: Terminated, never initialized, without a Node, or
    /// its instance termination already requested.
    Uncounted,
    /// Healthy capacity: counts toward the total only.
    Healthy,
    /// Counts toward the total and uses up budget: being disrupted (for any reason), or its Node is
    /// NotReady.
    Disrupting { not_ready: bool },
}

/// How `claim` counts for its pool's budgets in `cluster` (Karpenter's accounting, see the module
/// documentation).
pub fn standing(claim: &NodeClaim, cluster: &Cluster) -> Standing {
    // Initialized once: the phase, or (for claims being taken away) the recorded time.
    let initialized = claim.phase == Phase::Initialized || claim.initialized_at.is_some();
    let terminate_requested =
        claim.phase == Phase::Terminating && claim.drain.as_ref().is_some_and(|d| d.terminate_requested_at.is_some());
    if claim.phase == Phase::Terminated || !initialized || terminate_requested {
        return Standing::Uncounted;
    }
    let Some(node) = node_of(claim, cluster) else { return Standing::Uncounted };
    let leaving = claim.disruption.is_some() || matches!(claim.phase, Phase::Draining | Phase::Terminating);
    if leaving || !node.ready {
        Standing::Disrupting { not_ready: !node.ready }
    } else {
        Standing::Healthy
    }
}

/// The allowance for `pool` and `reason` in `cluster` (nodes and disrupting counted from its
/// claims and their Nodes, see [`standing`]).
pub fn allowance(cluster: &Cluster, pool: &NodePool, reason: Reason) -> Allowance {
    let (mut total, mut disrupting, mut not_ready) = (0, 0, 0);
    for c in cluster.claims.iter().filter(|c| c.nodepool == pool.name) {
        match standing(c, cluster) {
            Standing::Uncounted => {}
            Standing::Healthy => total += 1,
            Standing::Disrupting { not_ready: n } => {
                total += 1;
                disrupting += 1;
                not_ready += usize::from(n);
            }
        }
    }
    allowance_counted(pool, reason, cluster.now, total, disrupting, not_ready)
}

/// The allowance from explicit counts (what [`allowance`] uses; handy for simulations and
/// properties).
pub fn allowance_for(pool: &NodePool, reason: Reason, now: Time, total: usize, disrupting: usize) -> Allowance {
    allowance_counted(pool, reason, now, total, disrupting, 0)
}

/// [`allowance_for`], with how many of the disrupting nodes are NotReady (for the sentence).
fn allowance_counted(
    pool: &NodePool,
    reason: Reason,
    now: Time,
    total: usize,
    disrupting: usize,
    not_ready: usize,
) -> Allowance {
    let base = |limit: Option<usize>, allowed: usize, why: String| Allowance {
        pool: pool.name.clone(),
        reason,
        total,
        disrupting,
        limit,
        allowed,
        why,
    };
    let Some(budget_reason) = budget_reason(reason) else {
        return base(None, usize::MAX, format!("{reason} is forceful: disruption budgets do not apply"));
    };
    let default;
    let budgets: &[Budget] = if pool.disruption.budgets.is_empty() {
        default = [Budget { nodes: DEFAULT_BUDGET, schedule: None, duration: None, reasons: vec![] }];
        &default
    } else {
        &pool.disruption.budgets
    };

    // The most restrictive applicable, active budget; ties go to the first listed.
    let mut winner: Option<(usize, &Budget, Activity)> = None;
    let mut any_applicable = false;
    for b in budgets {
        let applies = b.reasons.is_empty() || budget_reason.is_some_and(|r| b.reasons.contains(&r));
        if !applies {
            continue;
        }
        any_applicable = true;
        let act = activity(b, now);
        let limit = match &act {
            Activity::Inactive => continue,
            Activity::Invalid(_) => 0,
            Activity::Always | Activity::Window(_) => scaled(b.nodes, total),
        };
        if winner.as_ref().is_none_or(|(l, _, _)| limit < *l) {
            winner = Some((limit, b, act));
        }
    }

    let Some((limit, budget, act)) = winner else {
        let why = if any_applicable {
            format!("no budget of nodepool {} limiting {reason} is active now: disruption is not limited", pool.name)
        } else {
            format!("no budget of nodepool {} applies to {reason}: disruption is not limited", pool.name)
        };
        return base(None, usize::MAX, why);
    };
    let allowed = limit.saturating_sub(disrupting);

    let mut why = match &act {
        Activity::Invalid(e) => format!("budget of nodepool {} cannot be evaluated ({e}); failing closed", pool.name),
        _ => format!(
            "budget {} of {total} node{} allows {limit}",
            describe_nodes(budget.nodes),
            if total == 1 { "" } else { "s" }
        ),
    };
    why.push_str(&format!("; {disrupting} already disrupting"));
    if not_ready > 0 {
        why.push_str(&format!(" ({not_ready} of them NotReady)"));
    }
    if allowed == 0 {
        match (&act, &budget.schedule) {
            (Activity::Window(w), Some(s)) => {
                let bound = if w.open_ended { "at least until" } else { "until" };
                why.push_str(&format!(
                    ", so {reason} is blocked {bound} the schedule {s:?} window (opened {}, {}) ends at {}",
                    w.opened,
                    format_duration(budget.duration.unwrap_or_default()),
                    w.ends
                ));
            }
            _ => why.push_str(&format!(", so {reason} is blocked until some of them finish")),
        }
    } else {
        why.push_str(&format!(", so {allowed} more may start for {reason}"));
        if let (Activity::Window(w), Some(s)) = (&act, &budget.schedule) {
            why.push_str(&format!(" while the schedule {s:?} window lasts (until {})", w.ends));
        }
    }
    base(Some(limit), allowed, why)
}
