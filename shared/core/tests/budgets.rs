//! Disruption budgets: activity windows, percent rounding, the most restrictive budget, reasons,
//! nodes already disrupting, and the sentences.

use std::collections::BTreeMap;
use std::time::Duration;

use dovetail_core::cluster::Cluster;
use dovetail_core::disruption::budgets::{activity, allowance, allowance_for, scaled, Activity};
use dovetail_core::model::{Budget, BudgetNodes, DisruptionReason, Node, NodePool};
use dovetail_core::nodeclaim::drain::DrainState;
use dovetail_core::nodeclaim::{Disruption, NodeClaim, Phase, Reason};
use dovetail_core::resources::Resources;
use dovetail_core::time::Time;
use proptest::prelude::*;

/// 2024-01-01T00:00:00Z, a Monday.
const MONDAY: i64 = 1_704_067_200;

fn at(day: i64, hour: i64, minute: i64) -> Time {
    Time::from_secs(MONDAY + day * 86_400 + hour * 3600 + minute * 60)
}

fn hours(h: u64) -> Duration {
    Duration::from_secs(h * 3600)
}

fn budget(nodes: BudgetNodes) -> Budget {
    Budget { nodes, schedule: None, duration: None, reasons: vec![] }
}

fn scheduled(nodes: BudgetNodes, schedule: &str, duration: Duration) -> Budget {
    Budget { nodes, schedule: Some(schedule.into()), duration: Some(duration), reasons: vec![] }
}

fn pool(budgets: Vec<Budget>) -> NodePool {
    let mut p = NodePool::new("default", "default");
    p.disruption.budgets = budgets;
    p
}

#[test]
fn default_is_ten_percent_and_already_disrupting_counts() {
    let p = pool(vec![]);
    let a = allowance_for(&p, Reason::Drifted, at(0, 12, 0), 20, 0);
    assert_eq!((a.limit, a.allowed), (Some(2), 2));
    assert_eq!(a.why, "budget 10% of 20 nodes allows 2; 0 already disrupting, so 2 more may start for Drifted");
    let a = allowance_for(&p, Reason::Drifted, at(0, 12, 0), 20, 2);
    assert_eq!(a.allowed, 0);
    assert!(a.why.contains("2 already disrupting, so Drifted is blocked until some of them finish"), "{}", a.why);
    // More disrupting than the budget (forceful expirations) floors at zero.
    assert_eq!(allowance_for(&p, Reason::Empty, at(0, 12, 0), 20, 7).allowed, 0);
    // The explicit default behaves the same as none at all.
    let explicit = pool(vec![budget(BudgetNodes::Percent(10))]);
    assert_eq!(allowance_for(&explicit, Reason::Empty, at(0, 0, 0), 20, 1).allowed, 1);
}

#[test]
fn percentages_round_up_like_karpenter() {
    assert_eq!(scaled(BudgetNodes::Percent(5), 10), 1, "0.5 rounds up: a small pool is not blocked forever");
    assert_eq!(scaled(BudgetNodes::Percent(10), 20), 2);
    assert_eq!(scaled(BudgetNodes::Percent(10), 21), 3);
    assert_eq!(scaled(BudgetNodes::Percent(34), 3), 2);
    assert_eq!(scaled(BudgetNodes::Percent(10), 0), 0);
    assert_eq!(scaled(BudgetNodes::Percent(0), 50), 0);
    assert_eq!(scaled(BudgetNodes::Percent(100), 7), 7);
    assert_eq!(scaled(BudgetNodes::Count(3), 1), 3, "counts are not capped by the pool size");
    let p = pool(vec![budget(BudgetNodes::Percent(5))]);
    assert_eq!(allowance_for(&p, Reason::Underutilized, at(0, 0, 0), 10, 0).allowed, 1);
}

#[test]
fn most_restrictive_active_budget_wins() {
    let p =
        pool(vec![budget(BudgetNodes::Percent(50)), budget(BudgetNodes::Count(3)), budget(BudgetNodes::Percent(20))]);
    let a = allowance_for(&p, Reason::Empty, at(0, 0, 0), 10, 0);
    assert_eq!((a.limit, a.allowed), (Some(2), 2));
    assert!(a.why.starts_with("budget 20% of 10 nodes allows 2"), "{}", a.why);
    // An inactive stricter budget does not count.
    let p = pool(vec![budget(BudgetNodes::Count(4)), scheduled(BudgetNodes::Count(0), "0 9 * * mon-fri", hours(8))]);
    assert_eq!(allowance_for(&p, Reason::Empty, at(5, 10, 0), 10, 0).allowed, 4, "Saturday: window closed");
    assert_eq!(allowance_for(&p, Reason::Empty, at(0, 10, 0), 10, 0).allowed, 0, "Monday 10:00: window open");
}

#[test]
fn reasons_select_budgets() {
    let drift_only = Budget { reasons: vec![DisruptionReason::Drifted], ..budget(BudgetNodes::Count(0)) };
    let p = pool(vec![drift_only, budget(BudgetNodes::Count(5))]);
    let now = at(0, 0, 0);
    assert_eq!(allowance_for(&p, Reason::Drifted, now, 10, 0).allowed, 0);
    assert_eq!(allowance_for(&p, Reason::Empty, now, 10, 0).allowed, 5);
    assert_eq!(allowance_for(&p, Reason::Underutilized, now, 10, 0).allowed, 5);
    // A rebalance replacement is voluntary but none of the three reasons: reason-less budgets only.
    assert_eq!(allowance_for(&p, Reason::Rebalance, now, 10, 0).allowed, 5);

    // Budgets exist, but none limits Empty: Karpenter leaves it unbounded.
    let only_drift = pool(vec![Budget { reasons: vec![DisruptionReason::Drifted], ..budget(BudgetNodes::Count(1)) }]);
    let a = allowance_for(&only_drift, Reason::Empty, now, 10, 3);
    assert_eq!((a.limit, a.allowed), (None, usize::MAX));
    assert!(a.why.contains("no budget of nodepool default applies to Empty"), "{}", a.why);
}

#[test]
fn forceful_reasons_ignore_budgets() {
    let p = pool(vec![budget(BudgetNodes::Count(0))]);
    for r in [Reason::Expired, Reason::SpotInterrupted, Reason::InstanceStateChange, Reason::RegistrationTimeout] {
        let a = allowance_for(&p, r, at(0, 0, 0), 10, 10);
        assert_eq!(a.allowed, usize::MAX, "{r}");
        assert!(a.why.contains("forceful"), "{}", a.why);
    }
}

#[test]
fn weekday_business_hours_window() {
    let b = scheduled(BudgetNodes::Count(0), "0 9 * * mon-fri", hours(8));
    assert!(matches!(activity(&b, at(0, 8, 59)), Activity::Inactive), "before it fires");
    let Activity::Window(w) = activity(&b, at(0, 9, 0)) else { panic!("open at the firing minute") };
    assert_eq!((w.opened, w.ends, w.open_ended), (at(0, 9, 0), at(0, 17, 0), false));
    assert!(matches!(activity(&b, at(0, 16, 59)), Activity::Window(_)));
    assert!(matches!(activity(&b, at(0, 17, 0)), Activity::Inactive), "the window ends exclusive");
    assert!(matches!(activity(&b, at(4, 12, 0)), Activity::Window(_)), "Friday");
    assert!(matches!(activity(&b, at(5, 12, 0)), Activity::Inactive), "Saturday");

    let p = pool(vec![b, budget(BudgetNodes::Percent(10))]);
    let a = allowance_for(&p, Reason::Drifted, at(0, 10, 30), 20, 2);
    assert_eq!(a.allowed, 0);
    assert_eq!(
        a.why,
        "budget 0 of 20 nodes allows 0; 2 already disrupting, so Drifted is blocked until the schedule \
         \"0 9 * * mon-fri\" window (opened 2024-01-01T09:00:00Z, 8h) ends at 2024-01-01T17:00:00Z"
    );
}

#[test]
fn window_spanning_midnight() {
    let b = scheduled(BudgetNodes::Count(1), "0 22 * * *", hours(4));
    assert!(matches!(activity(&b, at(0, 21, 59)), Activity::Inactive));
    assert!(matches!(activity(&b, at(0, 23, 30)), Activity::Window(_)));
    let Activity::Window(w) = activity(&b, at(1, 1, 59)) else { panic!("still open after midnight") };
    assert_eq!((w.opened, w.ends), (at(0, 22, 0), at(1, 2, 0)));
    assert!(matches!(activity(&b, at(1, 2, 0)), Activity::Inactive));
}

#[test]
fn daily_macro_and_overlapping_firings() {
    let b = scheduled(BudgetNodes::Count(1), "@daily", hours(1));
    assert!(matches!(activity(&b, at(3, 0, 0)), Activity::Window(_)));
    assert!(matches!(activity(&b, at(3, 0, 59)), Activity::Window(_)));
    assert!(matches!(activity(&b, at(3, 1, 0)), Activity::Inactive));
    assert!(matches!(activity(&b, at(2, 23, 59)), Activity::Inactive));

    // A firing inside the window extends it.
    let twice = scheduled(BudgetNodes::Count(0), "0 9,10 * * *", Duration::from_secs(90 * 60));
    let Activity::Window(w) = activity(&twice, at(0, 9, 30)) else { panic!() };
    assert_eq!((w.opened, w.ends), (at(0, 9, 0), at(0, 11, 30)));
    // A schedule that always re-fires within its duration never closes.
    let always = scheduled(BudgetNodes::Count(0), "* * * * *", hours(1));
    let Activity::Window(w) = activity(&always, at(0, 9, 30)) else { panic!() };
    assert!(w.open_ended);
    let a = allowance_for(&pool(vec![always]), Reason::Empty, at(0, 9, 30), 5, 0);
    assert!(a.why.contains("at least until"), "{}", a.why);
}

#[test]
fn unevaluable_budgets_fail_closed() {
    let bad_cron = scheduled(BudgetNodes::Count(5), "0 25 * * *", hours(1));
    let a = allowance_for(&pool(vec![bad_cron]), Reason::Empty, at(0, 0, 0), 10, 0);
    assert_eq!(a.allowed, 0);
    assert!(a.why.contains("cannot be evaluated") && a.why.contains("failing closed"), "{}", a.why);
    let no_duration = Budget { schedule: Some("@daily".into()), ..budget(BudgetNodes::Count(5)) };
    assert!(matches!(activity(&no_duration, at(0, 0, 0)), Activity::Invalid(_)));
}

fn claim(name: &str, pool: &str, phase: Phase, disrupting: bool) -> NodeClaim {
    let mut c = NodeClaim::launching(name, pool, "default", at(0, 0, 0));
    c.phase = phase;
    if phase >= Phase::Initialized {
        c.initialized_at = Some(at(0, 0, 5));
    }
    if disrupting {
        c.disruption = Some(Disruption {
            reason: Reason::Expired,
            since: at(0, 0, 0),
            replacements: vec![],
            message: "expired".into(),
            reclaim_at: None,
        });
    }
    c
}

/// Adds `claim` to the cluster with a Node (Ready or not) named after it.
fn add(cluster: &mut Cluster, mut claim: NodeClaim, ready: bool) {
    let node = format!("node-{}", claim.name);
    claim.node_name = Some(node.clone());
    let mut n = Node::new(&node, BTreeMap::new(), Resources::default());
    n.ready = ready;
    cluster.nodes.push(n);
    cluster.claims.push(claim);
}

#[test]
fn cluster_counts_initialized_nodes_of_the_pool_only() {
    let mut cluster = Cluster { now: at(0, 12, 0), ..Default::default() };
    let p = pool(vec![budget(BudgetNodes::Percent(50))]);
    for i in 0..5 {
        add(&mut cluster, claim(&format!("ok-{i}"), "default", Phase::Initialized, false), true);
    }
    add(&mut cluster, claim("expiring", "default", Phase::Initialized, true), true);
    add(&mut cluster, claim("draining", "default", Phase::Draining, false), true);
    add(&mut cluster, claim("terminating", "default", Phase::Terminating, false), true);
    // Not the pool's nodes for budgets (Karpenter counts initialized Nodes whose instance is not
    // already being terminated): …
    let mut requested = claim("terminate-requested", "default", Phase::Terminating, false);
    requested.drain = Some(DrainState { terminate_requested_at: Some(at(0, 11, 0)), ..DrainState::default() });
    add(&mut cluster, requested, true);
    add(&mut cluster, claim("gone", "default", Phase::Terminated, true), true);
    add(&mut cluster, claim("registered", "default", Phase::Registered, false), true);
    cluster.claims.push(claim("launching", "default", Phase::Launching, false));
    let mut nodeless = claim("nodeless", "default", Phase::Initialized, false);
    nodeless.node_name = Some("deleted-node".into());
    cluster.claims.push(nodeless);
    add(&mut cluster, claim("other-pool", "other", Phase::Draining, false), true);

    let a = allowance(&cluster, &p, Reason::Underutilized);
    assert_eq!((a.total, a.disrupting, a.limit, a.allowed), (8, 3, Some(4), 1), "{}", a.why);
}

#[test]
fn not_ready_nodes_use_up_budget_but_stay_in_the_total() {
    let mut cluster = Cluster { now: at(0, 12, 0), ..Default::default() };
    for i in 0..20 {
        add(&mut cluster, claim(&format!("n-{i}"), "default", Phase::Initialized, false), i >= 2);
    }
    // 20% of 20 (NotReady nodes included) is 4; the 2 NotReady ones use 2 of them.
    let a = allowance(&cluster, &pool(vec![budget(BudgetNodes::Percent(20))]), Reason::Drifted);
    assert_eq!((a.total, a.disrupting, a.limit, a.allowed), (20, 2, Some(4), 2));
    assert_eq!(
        a.why,
        "budget 20% of 20 nodes allows 4; 2 already disrupting (2 of them NotReady), so 2 more may start for Drifted"
    );
    // The default 10% (2 nodes) is used up by the nodes that are down already.
    let a = allowance(&cluster, &pool(vec![]), Reason::Empty);
    assert_eq!(a.allowed, 0, "{}", a.why);
    // A node being disrupted that is also NotReady counts once.
    cluster.claims[0].disruption = claim("x", "default", Phase::Initialized, true).disruption;
    let a = allowance(&cluster, &pool(vec![budget(BudgetNodes::Percent(20))]), Reason::Drifted);
    assert_eq!((a.total, a.disrupting), (20, 2));
}

#[test]
fn replacements_still_booting_do_not_round_the_budget_up() {
    // Ten nodes, one drifting with its replacement launched but not initialized: 10% of 10 is 1,
    // used by the drifting node. Counting the replacement would make it 10% of 11 = 2 and let a
    // second node go before the first one's replacement is up.
    let mut cluster = Cluster { now: at(0, 12, 0), ..Default::default() };
    for i in 0..10 {
        add(&mut cluster, claim(&format!("n-{i}"), "default", Phase::Initialized, i == 0), true);
    }
    let mut repl = claim("n-0-r1", "default", Phase::Registered, false);
    repl.node_name = Some("node-n-0-r1".into());
    cluster.nodes.push(Node::new("node-n-0-r1", BTreeMap::new(), Resources::default()));
    cluster.claims.push(repl);
    let a = allowance(&cluster, &pool(vec![]), Reason::Drifted);
    assert_eq!((a.total, a.disrupting, a.limit, a.allowed), (10, 1, Some(1), 0), "{}", a.why);
    // Once initialized it is one of the pool's nodes.
    cluster.claims[10].phase = Phase::Initialized;
    let a = allowance(&cluster, &pool(vec![]), Reason::Drifted);
    assert_eq!((a.total, a.allowed), (11, 1));
}

fn arb_budget() -> impl Strategy<Value = Budget> {
    let nodes = prop_oneof![(0u32..20).prop_map(BudgetNodes::Count), (0u32..=100).prop_map(BudgetNodes::Percent)];
    let schedule = prop_oneof![
        Just(None),
        Just(Some("0 9 * * mon-fri")),
        Just(Some("@daily")),
        Just(Some("0 22 * * *")),
        Just(Some("*/30 * * * *")),
        Just(Some("0 0 1 * *")),
    ];
    let reasons = proptest::sample::subsequence(
        vec![DisruptionReason::Empty, DisruptionReason::Underutilized, DisruptionReason::Drifted],
        0..=3,
    );
    (nodes, schedule, 1u64..48 * 60, reasons).prop_map(|(nodes, schedule, minutes, reasons)| Budget {
        nodes,
        duration: schedule.map(|_| Duration::from_secs(minutes * 60)),
        schedule: schedule.map(str::to_string),
        reasons,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever the budgets, the allowance never exceeds what any active, applicable budget leaves.
    #[test]
    fn allowance_never_exceeds_an_active_budget(
        budgets in proptest::collection::vec(arb_budget(), 0..4),
        minutes in 0i64..(14 * 24 * 60),
        total in 0usize..200,
        disrupting_share in 0usize..=100,
        reason in prop_oneof![Just(Reason::Empty), Just(Reason::Underutilized), Just(Reason::Drifted)],
    ) {
        let disrupting = total * disrupting_share / 100;
        let now = Time::from_secs(MONDAY + minutes * 60);
        let p = pool(budgets.clone());
        let a = allowance_for(&p, reason, now, total, disrupting);
        let as_budget = match reason {
            Reason::Empty => DisruptionReason::Empty,
            Reason::Underutilized => DisruptionReason::Underutilized,
            _ => DisruptionReason::Drifted,
        };
        let effective = if budgets.is_empty() { vec![budget(BudgetNodes::Percent(10))] } else { budgets };
        for b in &effective {
            if !(b.reasons.is_empty() || b.reasons.contains(&as_budget)) {
                continue;
            }
            match activity(b, now) {
                Activity::Inactive => {}
                Activity::Invalid(_) => prop_assert_eq!(a.allowed, 0),
                _ => prop_assert!(a.allowed <= scaled(b.nodes, total).saturating_sub(disrupting)),
            }
        }
        if a.allowed != usize::MAX {
            prop_assert!(a.permits(a.allowed) && !a.permits(a.allowed + 1));
        }
    }
}
