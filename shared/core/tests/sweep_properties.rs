//! Property test over whole sweeps: random small clusters (pools with budgets and schedules,
//! claims drifted, expiring or healthy, nodes NotReady or protected, pods with do-not-disrupt,
//! PDBs) are swept once a minute, with interruption messages arriving between sweeps and
//! crashes part-way through carrying a sweep out. Every decision is carried out on
//! `sweep_world::World`, and after every sweep:
//!
//! - a voluntary disruption only starts while its pool's active budget has room (forceful ones
//!   excepted), the count taken as Karpenter takes it (see `budget_counts`);
//! - no pod with do-not-disrupt is evicted or deleted for a voluntary disruption before the
//!   claim's terminationGracePeriod says so, and no voluntary drain starts on a protected node;
//! - every `Launch` names a claim that never existed (no second replacement, even after a crash),
//!   and every claim write is the next version of the stored claim;
//! - the same state swept twice gives the same decisions.
//!
//! `DOVETAIL_PROPERTY_CASES=N` runs N cases (a soak); `DOVETAIL_PROPERTY_STATS=1` prints what
//! each case did.

mod sweep_world;

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

use dovetail_core::catalog::embedded;
use dovetail_core::cluster::Cluster;
use dovetail_core::decision::{Action, Decision};
use dovetail_core::disruption::budgets::{activity, scaled, Activity};
use dovetail_core::disruption::sweep::sweep;
use dovetail_core::interruption::{decide, Message};
use dovetail_core::model::{
    Budget, BudgetNodes, ConsolidationPolicy, DisruptionReason, NodePool, Pod, RebalancePolicy,
};
use dovetail_core::nodeclaim::{NodeClaim, Phase, Reason};
use dovetail_core::time::Time;
use sweep_world as w;

const SWEEPS: usize = 8;
const TYPES: [&str; 5] = ["m5.large", "m5.xlarge", "c5.large", "c5.xlarge", "r5.large"];
const APPS: [&str; 3] = ["web", "api", "db"];
const PROTECTED_FOR: Duration = Duration::from_secs(30 * 60);

fn config(cases: u32) -> Config {
    let cases = std::env::var("DOVETAIL_PROPERTY_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(cases);
    Config { cases, failure_persistence: Some(Box::new(FileFailurePersistence::Off)), ..Config::default() }
}

// ---------------------------------------------------------------------------------------------
// Specs.

#[derive(Debug, Clone)]
struct PoolSpec {
    budgets: Vec<Budget>,
    policy: ConsolidationPolicy,
    consolidate_after: Option<Duration>,
    grace: Option<Duration>,
    rebalance: RebalancePolicy,
}

#[derive(Debug, Clone)]
enum Protection {
    None,
    True,
    /// `dovetail.dev/do-not-disrupt: 30m`, started this many minutes before the first sweep.
    For30m(u64),
}

#[derive(Debug, Clone)]
struct PodSpec {
    app: usize,
    cpu_m: i64,
    mem_mi: i64,
    protection: Protection,
}

#[derive(Debug, Clone)]
struct NodeSpec {
    pool: usize,
    itype: usize,
    age_hours: u64,
    drifted: bool,
    /// Expires this many minutes after the first sweep (negative: already expired).
    expires_in: Option<i64>,
    ready: bool,
    protected: bool,
    pods: Vec<PodSpec>,
}

#[derive(Debug, Clone, Copy)]
enum Event {
    Spot,
    Stopping,
    Rebalance,
}

#[derive(Debug, Clone)]
struct Case {
    pools: Vec<PoolSpec>,
    nodes: Vec<NodeSpec>,
    pdbs: Vec<i32>,
    start_minute: i64,
    /// Per sweep: an interruption for the node with this index, and the share (in percent) of the
    /// sweep's actions carried out before a crash.
    events: Vec<Option<(usize, Event)>>,
    crashes: Vec<Option<usize>>,
}

fn budget_spec() -> impl Strategy<Value = Budget> {
    let nodes = prop_oneof![
        (0u32..3).prop_map(BudgetNodes::Count),
        prop::sample::select(vec![0u32, 10, 25, 50, 100]).prop_map(BudgetNodes::Percent),
    ];
    let schedule = prop::sample::select(vec![
        None,
        Some(("0 9 * * mon-fri", 8 * 60)),
        Some(("@daily", 6 * 60)),
        Some(("30 * * * *", 20)),
    ]);
    let reasons = prop::sample::subsequence(
        vec![DisruptionReason::Empty, DisruptionReason::Underutilized, DisruptionReason::Drifted],
        0..=2,
    );
    (nodes, schedule, reasons).prop_map(|(nodes, schedule, reasons)| Budget {
        nodes,
        schedule: schedule.map(|(s, _)| s.to_string()),
        duration: schedule.map(|(_, m)| w::minutes(m)),
        reasons,
    })
}

fn pool_spec() -> impl Strategy<Value = PoolSpec> {
    (
        prop::collection::vec(budget_spec(), 0..=2),
        prop::bool::ANY,
        prop::sample::select(vec![None, Some(0u64), Some(5)]),
        prop::sample::select(vec![None, Some(10u64)]),
        prop::bool::ANY,
    )
        .prop_map(|(budgets, underutilized, after, grace, replace)| PoolSpec {
            budgets,
            policy: if underutilized {
                ConsolidationPolicy::WhenEmptyOrUnderutilized
            } else {
                ConsolidationPolicy::WhenEmpty
            },
            consolidate_after: after.map(w::minutes),
            grace: grace.map(w::minutes),
            rebalance: if replace { RebalancePolicy::Replace } else { RebalancePolicy::Ignore },
        })
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    let protection = prop_oneof![
        6 => Just(Protection::None),
        1 => Just(Protection::True),
        1 => (0u64..40).prop_map(Protection::For30m),
    ];
    (0..APPS.len(), prop::sample::select(vec![100i64, 250, 500, 1000, 1500]), 64i64..2048, protection)
        .prop_map(|(app, cpu_m, mem_mi, protection)| PodSpec { app, cpu_m, mem_mi, protection })
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        0usize..2,
        0..TYPES.len(),
        1u64..400,
        prop::bool::weighted(0.3),
        prop::option::weighted(0.2, -5i64..10),
        prop::bool::weighted(0.9),
        prop::bool::weighted(0.1),
        prop::collection::vec(pod_spec(), 0..=3),
    )
        .prop_map(|(pool, itype, age_hours, drifted, expires_in, ready, protected, pods)| NodeSpec {
            pool,
            itype,
            age_hours,
            drifted,
            expires_in,
            ready,
            protected,
            pods,
        })
}

fn case() -> impl Strategy<Value = Case> {
    let event = prop::option::weighted(
        0.2,
        (0usize..8, prop::sample::select(vec![Event::Spot, Event::Stopping, Event::Rebalance])),
    );
    (
        prop::collection::vec(pool_spec(), 1..=2),
        prop::collection::vec(node_spec(), 2..=7),
        prop::collection::vec(0i32..3, APPS.len()),
        0i64..7 * 24 * 60,
        prop::collection::vec(event, SWEEPS),
        prop::collection::vec(prop::option::weighted(0.2, 0usize..100), SWEEPS),
    )
        .prop_map(|(pools, nodes, pdbs, start_minute, events, crashes)| Case {
            pools,
            nodes,
            pdbs,
            start_minute,
            events,
            crashes,
        })
}

fn build(case: &Case) -> Cluster {
    let now = Time::from_secs(w::MONDAY + case.start_minute * 60);
    let pools: Vec<NodePool> = case
        .pools
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut p = w::pool(&format!("pool{i}"), s.budgets.clone());
            p.disruption.consolidation_policy = s.policy;
            p.disruption.consolidate_after = s.consolidate_after;
            p.termination_grace_period = s.grace;
            p.rebalance = s.rebalance;
            p
        })
        .collect();
    let mut c = w::cluster(now, pools);
    for (i, app) in APPS.iter().enumerate() {
        c.pdbs.push(w::pdb(app, case.pdbs[i]));
    }
    for (i, n) in case.nodes.iter().enumerate() {
        let name = format!("n{i}");
        let pool = format!("pool{}", n.pool % case.pools.len());
        let launched = now.minus(Duration::from_secs(n.age_hours * 3600));
        let pods: Vec<Pod> = n
            .pods
            .iter()
            .enumerate()
            .map(|(j, p)| {
                let mut pod = w::pod(&format!("{}-{i}-{j}", APPS[p.app]), p.cpu_m, p.mem_mi);
                pod.started_at = Some(launched);
                match p.protection {
                    Protection::None => {}
                    Protection::True => pod = w::do_not_disrupt(pod),
                    Protection::For30m(ago) => {
                        pod.annotations.insert("dovetail.dev/do-not-disrupt".into(), "30m".into());
                        pod.started_at = Some(now.minus(w::minutes(ago)));
                    }
                }
                pod
            })
            .collect();
        w::add_node(&mut c, &name, &pool, TYPES[n.itype], launched, pods);
        // Pods bigger than the node stay pending instead.
        let node = c.nodes.last_mut().expect("just added");
        while !node.requested().fits(&node.allocatable) {
            let p = node.pods.pop().expect("an empty node fits");
            c.pending.push(Pod { node_name: None, ..Arc::unwrap_or_clone(p) });
        }
        if n.drifted {
            w::drift(&mut c, &name);
        }
        if let Some(m) = n.expires_in {
            let cl = w::claim_mut(&mut c, &name);
            let born = cl.launch.as_ref().expect("launched").launched_at;
            cl.expire_after = Some(Time(now.0 + m * 60_000).since(born));
        }
        let node = c.nodes.last_mut().expect("just added");
        node.ready = n.ready;
        if n.protected {
            node.annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
        }
    }
    c
}

// ---------------------------------------------------------------------------------------------
// Oracles, written from the rules rather than from the code.

/// A claim's pool's nodes and how many of them use up budget, as Karpenter counts them: initialized
/// claims with a Node whose instance is not yet being terminated; disrupting when being taken away
/// or NotReady.
fn budget_counts(claims: &[NodeClaim], before: &Cluster, pool: &str) -> (usize, usize) {
    let (mut total, mut disrupting) = (0, 0);
    for c in claims.iter().filter(|c| c.nodepool == pool && c.phase != Phase::Terminated) {
        let initialized = c.phase == Phase::Initialized || c.initialized_at.is_some();
        let terminating = c.drain.as_ref().is_some_and(|d| d.terminate_requested_at.is_some());
        let Some(node) = before.nodes.iter().find(|n| Some(&n.name) == c.node_name.as_ref()) else { continue };
        if !initialized || terminating {
            continue;
        }
        total += 1;
        if c.disruption.is_some() || c.phase >= Phase::Draining || !node.ready {
            disrupting += 1;
        }
    }
    (total, disrupting)
}

/// The most restrictive active budget for `reason`, in nodes (`None`: unbounded).
fn limit(pool: &NodePool, reason: Reason, now: Time, total: usize) -> Option<usize> {
    let wanted = match reason {
        Reason::Empty => Some(DisruptionReason::Empty),
        Reason::Underutilized => Some(DisruptionReason::Underutilized),
        Reason::Drifted => Some(DisruptionReason::Drifted),
        _ => None,
    };
    let default = [w::budget(BudgetNodes::Percent(10))];
    let budgets = if pool.disruption.budgets.is_empty() { &default[..] } else { &pool.disruption.budgets[..] };
    budgets
        .iter()
        .filter(|b| b.reasons.is_empty() || wanted.is_some_and(|r| b.reasons.contains(&r)))
        .filter_map(|b| match activity(b, now) {
            Activity::Inactive => None,
            Activity::Invalid(_) => Some(0),
            _ => Some(scaled(b.nodes, total)),
        })
        .min()
}

/// Every voluntary disruption the decisions start finds its pool's budget with room, counting
/// the decisions before it.
fn budgets_hold(before: &Cluster, ds: &[Decision]) -> Result<(), String> {
    let mut claims = before.claims.clone();
    for d in ds {
        match &d.action {
            Some(Action::WriteClaim(c)) => {
                let was = claims.iter().position(|x| x.name == c.name);
                let fresh = was.is_none_or(|i| claims[i].disruption.is_none());
                match was {
                    Some(i) => claims[i] = (**c).clone(),
                    None => claims.push((**c).clone()),
                }
                let Some(reason) = c.disruption.as_ref().map(|x| x.reason) else { continue };
                if !fresh || !reason.is_voluntary() {
                    continue;
                }
                let pool = before.nodepools.iter().find(|p| p.name == c.nodepool).expect("pool");
                let (total, disrupting) = budget_counts(&claims, before, &pool.name);
                if let Some(l) = limit(pool, reason, before.now, total) {
                    if disrupting > l {
                        return Err(format!(
                            "{} started for {reason} with {disrupting} of {total} nodes of {} disrupting, \
                             budget {l} ({})",
                            c.name, pool.name, d.why
                        ));
                    }
                }
            }
            Some(Action::DeleteClaim { name }) => claims.retain(|x| &x.name != name),
            _ => {}
        }
    }
    Ok(())
}

fn pod_protected(p: &Pod, now: Time) -> bool {
    p.annotations.get("karpenter.sh/do-not-disrupt").is_some_and(|v| v == "true")
        || (p.annotations.get("dovetail.dev/do-not-disrupt").is_some_and(|v| v == "30m")
            && p.started_at.is_some_and(|s| now < s.plus(PROTECTED_FOR)))
}

/// No protected pod is evicted or deleted for a voluntary disruption before the claim's grace
/// period allows, and no voluntary drain starts on a protected node.
fn protection_holds(before: &Cluster, ds: &[Decision]) -> Result<(), String> {
    let now = before.now;
    // The claim as this pass leaves it.
    let last = |name: &str| -> Option<NodeClaim> {
        ds.iter()
            .rev()
            .find_map(|d| match &d.action {
                Some(Action::WriteClaim(c)) if c.name == name => Some((**c).clone()),
                _ => None,
            })
            .or_else(|| before.claims.iter().find(|c| c.name == name).cloned())
    };
    let voluntary = |c: &NodeClaim| c.disruption.as_ref().is_some_and(|d| d.reason.is_voluntary());
    for d in ds {
        let (key, deleted) = match &d.action {
            Some(Action::Evict { namespace, name }) => (format!("{namespace}/{name}"), false),
            Some(Action::DeletePod { namespace, name, .. }) => (format!("{namespace}/{name}"), true),
            Some(Action::WriteClaim(c)) => {
                let started = c.drain.is_some()
                    && before.claims.iter().find(|x| x.name == c.name).is_none_or(|x| x.drain.is_none());
                if started && voluntary(c) {
                    let node = before.nodes.iter().find(|n| Some(&n.name) == c.node_name.as_ref());
                    if let Some(n) = node {
                        if n.annotations.contains_key("karpenter.sh/do-not-disrupt") {
                            return Err(format!("voluntary drain of {} started on protected node {}", c.name, n.name));
                        }
                        if let Some(p) = n.pods.iter().find(|p| pod_protected(p, now)) {
                            return Err(format!(
                                "voluntary drain of {} started with protected pod {}",
                                c.name,
                                p.key()
                            ));
                        }
                    }
                }
                continue;
            }
            _ => continue,
        };
        let Some(claim) = d.claim.as_deref().and_then(last) else { continue };
        if !voluntary(&claim) {
            continue;
        }
        let Some(pod) = before.nodes.iter().flat_map(|n| &n.pods).find(|p| p.key() == key) else { continue };
        if !pod_protected(pod, now) {
            continue;
        }
        let grace_over = match (claim.termination_grace_period, claim.drain.as_ref()) {
            (Some(g), Some(drain)) => {
                now >= drain.started_at.plus(g).minus(Duration::from_secs(pod.termination_grace_seconds as u64))
            }
            _ => false,
        };
        if !(deleted && grace_over) {
            return Err(format!("protected pod {key} removed for {} ({:?}): {}", claim.name, claim.disruption, d.why));
        }
    }
    Ok(())
}

fn message(event: Event, instance_id: String) -> Message {
    match event {
        Event::Spot => Message::SpotInterruption { instance_id, action: "terminate".into(), time: None },
        Event::Stopping => Message::StateChange { instance_id, state: "stopping".into() },
        Event::Rebalance => Message::RebalanceRecommendation { instance_id },
    }
}

/// What a case did, for `DOVETAIL_PROPERTY_STATS=1`: a property that holds because nothing
/// happened proves little.
fn stats(ds: &[Decision], into: &mut std::collections::BTreeMap<String, usize>) {
    for d in ds {
        let key = match &d.action {
            Some(Action::WriteClaim(c)) => match &c.disruption {
                Some(x) => format!("write {}", x.reason),
                None => format!("write {}", c.phase),
            },
            Some(Action::Launch(_)) => "launch".into(),
            Some(Action::Evict { .. }) => "evict".into(),
            Some(Action::DeletePod { .. }) => "delete pod".into(),
            Some(Action::TerminateInstance { .. }) => "terminate".into(),
            Some(_) => continue,
            None if d.why.contains("already exists") => "adopted".into(),
            None if d.why.contains("budget") => "budget note".into(),
            None => continue,
        };
        *into.entry(key).or_default() += 1;
    }
}

fn check(before: &Cluster, ds: &[Decision], what: &str) -> Result<(), TestCaseError> {
    budgets_hold(before, ds).map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
    protection_holds(before, ds).map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
    Ok(())
}

proptest! {
    #![proptest_config(config(32))]

    #[test]
    fn sweeps_keep_budgets_protection_and_exactly_once_launches(case in case()) {
        let catalog = embedded();
        let mut world = w::World::new(build(&case));
        let mut seen = std::collections::BTreeMap::new();
        for i in 0..SWEEPS {
            if let Some((n, event)) = case.events[i] {
                let msg = message(event, format!("i-n{}", n % case.nodes.len()));
                let before = world.cluster.clone();
                let ds = decide(&msg, &before, catalog);
                prop_assert_eq!(&ds, &decide(&msg, &before, catalog));
                check(&before, &ds, &format!("interruption before sweep {i}"))?;
                stats(&ds, &mut seen);
                world.apply(&ds, usize::MAX).map_err(|e| TestCaseError::fail(format!("interruption: {e}")))?;
            }
            let before = world.cluster.clone();
            let ds = sweep(&before, catalog);
            prop_assert_eq!(&ds, &sweep(&before, catalog), "sweep {} is not deterministic", i);
            check(&before, &ds, &format!("sweep {i}"))?;
            stats(&ds, &mut seen);
            let carried = case.crashes[i].map_or(usize::MAX, |share| w::action_count(&ds) * share / 100);
            world
                .apply(&ds, carried)
                .map_err(|e| TestCaseError::fail(format!("sweep {i}: {e}")))?;
            world.tick(Duration::from_secs(60));
        }
        if std::env::var_os("DOVETAIL_PROPERTY_STATS").is_some() {
            eprintln!("{} nodes: {seen:?}", case.nodes.len());
        }
    }
}
