//! Kubernetes Events: the reasons Dovetail's decisions leave on the objects a user looks at, the
//! Events every decision implies without each module writing them ([`complete`]), and how often an
//! identical Event is written ([`Recent`]).
//!
//! **Implied Events.** Two rules, applied to every batch of decisions before it is carried out, so
//! no concept writes them itself:
//! - an Event on a claim's Node is also an Event on its NodeClaim (`kubectl describe nodeclaim`
//!   shows the same story as `kubectl describe node`);
//! - a claim write that starts a disruption brings `DisruptionTerminating` on its Node and NodeClaim
//!   and `DisruptionLaunching` on each replacement it waits for — whichever stage decided it
//!   (consolidation, drift, expiration, interruption, repair), since they all start the same way.
//!
//! **Repeats.** The sweeper decides from scratch every minute, and a drain steps every few
//! seconds, so a node that stays blocked would have its Event written again at every pass: at
//! 5,000 nodes, thousands of API writes a minute for nothing new. The adapter already folds an
//! identical Event into one object (its name is a hash of object, reason and message; a repeat
//! bumps `count` and `lastTimestamp`), but each fold is still two or three requests. [`Recent`]
//! drops an identical Event (same object, reason and message) written less than its window ago
//! ([`window`]), as Karpenter's recorder does with its dedupe cache. A warm function keeps it
//! between invocations; a cold start forgets it, which costs one write per Event — which the
//! folding then counts. It lives in the core so the Lambdas and the simulator behave the same.
//!
//! Unlike Karpenter, whose dedupe key is the object and reason (and the disruption reason for
//! some), ours includes the message: a node blocked by another pod than a minute ago says so at
//! once. That bounds writes only if messages are stable while nothing changes, so messages of
//! repeated Events carry no times or counters.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::cluster::Cluster;
use crate::decision::{Action, Decision};
use crate::nodeclaim::NodeClaim;
use crate::time::Time;

/// On a pod capacity is launched for, naming the NodeClaim.
pub const NOMINATED: &str = "Nominated";
/// On a pod no NodePool can serve, with each pool's reason (a Warning).
pub const FAILED_SCHEDULING: &str = "FailedScheduling";
/// On a NodePool whose cost limit, or the cluster-wide one, kept pods from a new claim there (a
/// Warning), naming the limit; the pool's `CostLimitReached` condition says whether it still binds.
pub const COST_LIMIT_REACHED: &str = "CostLimitReached";
/// On a Node and its NodeClaim that a disruption would take but cannot (do-not-disrupt, a PDB, the
/// budget), and on a NodePool whose budget allows no disruption for a reason.
pub const DISRUPTION_BLOCKED: &str = "DisruptionBlocked";
/// On a Node and its NodeClaim that consolidation looked at and found no cheaper way to run.
pub const UNCONSOLIDATABLE: &str = "Unconsolidatable";
/// On a NodeClaim launched to replace one being disrupted.
pub const DISRUPTION_LAUNCHING: &str = "DisruptionLaunching";
/// On a Node and its NodeClaim when their disruption starts.
pub const DISRUPTION_TERMINATING: &str = "DisruptionTerminating";
/// On a Node and its NodeClaim whose drain has been held too long (a Warning), naming what holds it.
pub const FAILED_DRAINING: &str = "FailedDraining";

/// How long an identical Event is not written again (Karpenter's recorder default).
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(2 * 60);
/// Unconsolidatable says the same thing at every pass over a steady cluster (Karpenter: 15 min).
pub const UNCONSOLIDATABLE_WINDOW: Duration = Duration::from_secs(15 * 60);
/// A pool's budget can change every minute with its schedule (Karpenter: 1 min).
pub const POOL_BLOCKED_WINDOW: Duration = Duration::from_secs(60);
/// Every provisioning pass (each doorbell, each sweep) says again why a pod waits (Karpenter: 5 min).
pub const FAILED_SCHEDULING_WINDOW: Duration = Duration::from_secs(5 * 60);

/// The window within which an identical Event on `object` is dropped.
pub fn window(object: &str, reason: &str) -> Duration {
    match reason {
        UNCONSOLIDATABLE => UNCONSOLIDATABLE_WINDOW,
        FAILED_SCHEDULING => FAILED_SCHEDULING_WINDOW,
        DISRUPTION_BLOCKED if object.starts_with("NodePool/") => POOL_BLOCKED_WINDOW,
        _ => DEFAULT_WINDOW,
    }
}

/// An Event on `Node/<node>` for `claim` (the NodeClaim gets it too, by [`complete`]).
pub fn on_node(claim: &str, node: &str, reason: &str, message: String) -> Decision {
    Decision::event(Some(claim), format!("Node/{node}"), reason, message)
}

/// `decisions` with the Events they imply (see the module documentation), each right after the
/// decision that implies it. `cluster` is the state the decisions were made from: it tells which
/// claim a Node belongs to and whether a claim write starts its disruption or only continues it.
pub fn complete(decisions: Vec<Decision>, cluster: &Cluster) -> Vec<Decision> {
    // A stage that words its own DisruptionTerminating (a deletion: "node x was deleted") keeps it.
    let worded: BTreeSet<String> = decisions
        .iter()
        .filter(|d| matches!(&d.action, Some(Action::Event { reason, .. }) if reason == DISRUPTION_TERMINATING))
        .filter_map(|d| d.claim.clone())
        .collect();
    // Claims as the batch leaves them so far: a second write of the same claim starts nothing.
    let mut disrupted: BTreeSet<String> =
        cluster.claims.iter().filter(|c| c.disruption.is_some()).map(|c| c.name.clone()).collect();
    let nodes: HashMap<&str, &str> =
        cluster.claims.iter().filter_map(|c| Some((c.name.as_str(), c.node_name.as_deref()?))).collect();
    let mut out = Vec::with_capacity(decisions.len());
    for d in decisions {
        let implied = match (&d.action, d.claim.as_deref()) {
            (Some(Action::Event { object, reason, message }), Some(claim))
                if object.strip_prefix("Node/").is_some_and(|n| nodes.get(claim) == Some(&n)) =>
            {
                vec![Decision::event(Some(claim), format!("NodeClaim/{claim}"), reason.as_str(), message.clone())]
            }
            (Some(Action::WriteClaim(c)), _) if c.disruption.is_some() && disrupted.insert(c.name.clone()) => {
                started(c, !worded.contains(&c.name))
            }
            _ => vec![],
        };
        out.push(d);
        out.extend(implied);
    }
    out
}

/// The Events of a disruption that starts with this write of `claim`.
fn started(claim: &NodeClaim, terminating: bool) -> Vec<Decision> {
    let Some(d) = &claim.disruption else { return vec![] };
    let mut out = vec![];
    if terminating {
        let message = format!("disrupting for {}: {}", d.reason, d.message);
        if let Some(node) = &claim.node_name {
            out.push(Decision::event(
                Some(&claim.name),
                format!("Node/{node}"),
                DISRUPTION_TERMINATING,
                message.clone(),
            ));
        }
        out.push(Decision::event(
            Some(&claim.name),
            format!("NodeClaim/{}", claim.name),
            DISRUPTION_TERMINATING,
            message,
        ));
    }
    for r in &d.replacements {
        let message = format!("launching to replace {} ({})", claim.name, d.reason);
        out.push(Decision::event(Some(&claim.name), format!("NodeClaim/{r}"), DISRUPTION_LAUNCHING, message));
    }
    out
}

/// Identical Events written recently, by object, reason and message, each with when it was
/// written and for how long it drops repeats. See the module documentation.
#[derive(Debug, Default)]
pub struct Recent {
    written: Mutex<Written>,
}

#[derive(Debug, Default)]
struct Written {
    events: HashMap<(String, String, String), (Time, Duration)>,
    pruned_at: Time,
}

/// How often entries past their window are forgotten: often enough that a warm function holds
/// only the Events of the last windows, rarely enough that the scan costs nothing per Event.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

impl Recent {
    pub fn new() -> Recent {
        Recent::default()
    }

    /// Whether to write this Event at `now`: `false` for a repeat within its window. Admitting
    /// counts as written; [`Recent::forget`] undoes that when the write fails.
    pub fn admit(&self, object: &str, reason: &str, message: &str, now: Time) -> bool {
        let mut w = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        if now.since(w.pruned_at) >= PRUNE_EVERY {
            w.events.retain(|_, (at, window)| now < at.plus(*window));
            w.pruned_at = now;
        }
        let key = (object.to_string(), reason.to_string(), message.to_string());
        if w.events.get(&key).is_some_and(|(at, window)| now < at.plus(*window)) {
            return false;
        }
        w.events.insert(key, (now, window(object, reason)));
        true
    }

    /// The Event was not written after all: the next identical one is.
    pub fn forget(&self, object: &str, reason: &str, message: &str) {
        let mut w = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        w.events.remove(&(object.to_string(), reason.to_string(), message.to_string()));
    }

    /// Events remembered (for tests: pruning keeps this to the last windows' Events).
    pub fn len(&self) -> usize {
        self.written.lock().unwrap_or_else(PoisonError::into_inner).events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodeclaim::{Disruption, Reason};

    fn claim(name: &str, node: Option<&str>) -> NodeClaim {
        let mut c = NodeClaim::launching(name, "default", "default", Time::from_secs(0));
        c.node_name = node.map(str::to_string);
        c
    }

    fn disruption(reason: Reason, replacements: &[&str]) -> Option<Disruption> {
        Some(Disruption {
            reason,
            since: Time::from_secs(10),
            replacements: replacements.iter().map(|r| r.to_string()).collect(),
            message: "drifted: AMI ami-1 is no longer selected".into(),
            reclaim_at: None,
        })
    }

    fn events(ds: &[Decision]) -> Vec<(&str, &str, &str)> {
        ds.iter()
            .filter_map(|d| match &d.action {
                Some(Action::Event { object, reason, message }) => {
                    Some((object.as_str(), reason.as_str(), message.as_str()))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn node_events_are_also_on_the_claims_nodeclaim() {
        let cluster = Cluster { claims: vec![claim("a", Some("n-a")), claim("b", None)], ..Cluster::default() };
        let decisions = vec![
            on_node("a", "n-a", "Drifted", "drifted".into()),
            // Not a's node, a pod, a claim without a node, an Event without a claim: left as they are.
            on_node("a", "n-other", "Drifted", "drifted".into()),
            Decision::event(Some("a"), "Pod/shop/web-1", "Nominated", "x".into()),
            on_node("b", "n-b", "Drifted", "drifted".into()),
            Decision::event(None, "Node/n-a", "OrphanNode", "orphan".into()),
        ];
        let out = complete(decisions, &cluster);
        assert_eq!(
            events(&out),
            vec![
                ("Node/n-a", "Drifted", "drifted"),
                ("NodeClaim/a", "Drifted", "drifted"),
                ("Node/n-other", "Drifted", "drifted"),
                ("Pod/shop/web-1", "Nominated", "x"),
                ("Node/n-b", "Drifted", "drifted"),
                ("Node/n-a", "OrphanNode", "orphan"),
            ]
        );
        assert_eq!(out[1].claim.as_deref(), Some("a"));
    }

    #[test]
    fn a_write_that_starts_a_disruption_says_so_on_node_claim_and_replacements() {
        let mut old = claim("a", Some("n-a"));
        let mut already = claim("b", Some("n-b"));
        already.disruption = disruption(Reason::Expired, &[]);
        let cluster = Cluster { claims: vec![old.clone(), already.clone()], ..Cluster::default() };
        old.disruption = disruption(Reason::Drifted, &["a-r1"]);
        let write = |c: &NodeClaim| Decision::act(Some(&c.name), Action::WriteClaim(Box::new(c.clone())), "w");
        // a starts (written twice: said once); b was disrupting already.
        let out = complete(vec![write(&old), write(&old), write(&already)], &cluster);
        let says = "disrupting for Drifted: drifted: AMI ami-1 is no longer selected";
        assert_eq!(
            events(&out),
            vec![
                ("Node/n-a", DISRUPTION_TERMINATING, says),
                ("NodeClaim/a", DISRUPTION_TERMINATING, says),
                ("NodeClaim/a-r1", DISRUPTION_LAUNCHING, "launching to replace a (Drifted)"),
            ]
        );
        assert!(matches!(out[0].action, Some(Action::WriteClaim(_))), "the write comes first");
    }

    #[test]
    fn a_stage_that_words_its_own_terminating_event_keeps_it() {
        let mut c = claim("a", Some("n-a"));
        let cluster = Cluster { claims: vec![c.clone()], ..Cluster::default() };
        c.disruption = disruption(Reason::Deleted, &[]);
        let decisions = vec![
            Decision::act(Some("a"), Action::WriteClaim(Box::new(c)), "w"),
            on_node("a", "n-a", DISRUPTION_TERMINATING, "node n-a was deleted".into()),
        ];
        assert_eq!(
            events(&complete(decisions, &cluster)),
            vec![
                ("Node/n-a", DISRUPTION_TERMINATING, "node n-a was deleted"),
                ("NodeClaim/a", DISRUPTION_TERMINATING, "node n-a was deleted"),
            ]
        );
    }

    #[test]
    fn repeats_within_the_window_are_dropped_and_come_back_after_it() {
        let recent = Recent::new();
        let t0 = Time::from_secs(1_000);
        assert!(recent.admit("Node/n", DISRUPTION_BLOCKED, "pod x has do-not-disrupt", t0));
        assert!(!recent.admit("Node/n", DISRUPTION_BLOCKED, "pod x has do-not-disrupt", t0.plus(DEFAULT_WINDOW / 2)));
        // Something new to say, or the same on another object, is written at once.
        assert!(recent.admit("Node/n", DISRUPTION_BLOCKED, "pod y has do-not-disrupt", t0));
        assert!(recent.admit("NodeClaim/c", DISRUPTION_BLOCKED, "pod x has do-not-disrupt", t0));
        // The window counts from the write, not from the last repeat.
        let later = t0.plus(DEFAULT_WINDOW - Duration::from_millis(1));
        assert!(!recent.admit("Node/n", DISRUPTION_BLOCKED, "pod x has do-not-disrupt", later));
        assert!(recent.admit("Node/n", DISRUPTION_BLOCKED, "pod x has do-not-disrupt", t0.plus(DEFAULT_WINDOW)));

        // Unconsolidatable waits 15 minutes, a pool's DisruptionBlocked one.
        assert!(recent.admit("Node/n", UNCONSOLIDATABLE, "no cheaper", t0));
        assert!(!recent.admit("Node/n", UNCONSOLIDATABLE, "no cheaper", t0.plus(Duration::from_secs(14 * 60))));
        assert!(recent.admit("Node/n", UNCONSOLIDATABLE, "no cheaper", t0.plus(UNCONSOLIDATABLE_WINDOW)));
        assert!(recent.admit("NodePool/p", DISRUPTION_BLOCKED, "budget", t0));
        assert!(recent.admit("NodePool/p", DISRUPTION_BLOCKED, "budget", t0.plus(POOL_BLOCKED_WINDOW)));
        assert_eq!(window("Pod/shop/web-1", "FailedScheduling"), FAILED_SCHEDULING_WINDOW);
        assert_eq!(window("Node/n", DISRUPTION_BLOCKED), DEFAULT_WINDOW);

        // A write that failed is forgotten: the next try goes through.
        assert!(recent.admit("Node/m", FAILED_DRAINING, "held", t0));
        recent.forget("Node/m", FAILED_DRAINING, "held");
        assert!(recent.admit("Node/m", FAILED_DRAINING, "held", t0));
    }

    #[test]
    fn a_warm_function_remembers_only_the_last_windows() {
        let recent = Recent::new();
        let t0 = Time::from_secs(1_000);
        for i in 0..100 {
            assert!(recent.admit(&format!("Node/n{i}"), DISRUPTION_BLOCKED, "x", t0));
        }
        assert_eq!(recent.len(), 100);
        // Past every window, the next admission prunes them all.
        assert!(recent.admit("Node/other", DISRUPTION_BLOCKED, "x", t0.plus(UNCONSOLIDATABLE_WINDOW)));
        assert_eq!(recent.len(), 1);
    }
}
