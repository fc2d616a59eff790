//! Node repair: unhealthy nodes of pools that opted in are replaced after their toleration, never
//! more than 20% of a pool's nodes, forcefully (no budgets, no waiting for the drain).

use std::collections::BTreeMap;
use std::time::Duration;

use dovetail_core::catalog::{self, CapacityType};
use dovetail_core::cluster::{Cluster, Instance};
use dovetail_core::decision::{Action, Decision};
use dovetail_core::disruption::repair::{repairs, NODE_REPAIR_BLOCKED, UNHEALTHY};
use dovetail_core::disruption::sweep::sweep;
use dovetail_core::labels;
use dovetail_core::lifecycle;
use dovetail_core::model::{
    Budget, BudgetNodes, LabelSelector, Node, NodeCondition, NodePool, Pdb, Pod, NODE_REPAIR_ANNOTATION,
};
use dovetail_core::nodeclaim::{Disruption, Launch, NodeClaim, Phase, Reason};
use dovetail_core::resources::Resources;
use dovetail_core::time::Time;

/// 2026-10-22T09:00:00Z: the nodes' conditions turn here.
const TURNED: i64 = 1_792_659_600;

fn t(minutes: i64) -> Time {
    Time::from_secs(TURNED + minutes * 60)
}

fn claim(name: &str, pool: &str) -> NodeClaim {
    let mut c = NodeClaim::launching(name, pool, "default", t(-600));
    c.phase = Phase::Initialized;
    c.version = 3;
    c.node_name = Some(format!("node-{name}"));
    c.initialized_at = Some(t(-590));
    c.launch = Some(Launch {
        instance_id: format!("i-{name}"),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: CapacityType::OnDemand,
        image_id: "ami-1".into(),
        subnet_id: "subnet-a".into(),
        security_groups: vec![],
        price: 0.096,
        launched_at: t(-600),
    });
    c
}

fn node(name: &str, pool: &str) -> Node {
    let labels = BTreeMap::from([
        (labels::NODEPOOL.to_string(), pool.to_string()),
        (labels::NODECLAIM.to_string(), name.to_string()),
    ]);
    let mut n = Node::new(&format!("node-{name}"), labels, Resources::new(2000, 8 << 30));
    n.conditions = vec![NodeCondition::new("Ready", "True", Some(t(-590)))];
    n
}

fn instance(name: &str) -> Instance {
    Instance {
        id: format!("i-{name}"),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        state: "running".into(),
        launched_at: t(-600),
        tags: BTreeMap::from([(labels::NODECLAIM.to_string(), name.to_string())]),
        image_id: "ami-1".into(),
        subnet_id: "subnet-a".into(),
        security_groups: vec![],
    }
}

fn repairing(pool: &str) -> NodePool {
    let mut p = NodePool::new(pool, "default");
    p.annotations.insert(NODE_REPAIR_ANNOTATION.into(), "true".into());
    p.node_repair = true;
    p
}

/// `n` healthy nodes `a0…` of pool `pool`, at `now`.
fn cluster(pools: Vec<NodePool>, per_pool: usize, now: Time) -> Cluster {
    let mut c = Cluster { now, ..Cluster::default() };
    for p in &pools {
        for i in 0..per_pool {
            let name = format!("{}{i}", p.name);
            c.claims.push(claim(&name, &p.name));
            c.nodes.push(node(&name, &p.name));
            c.instances.push(instance(&name));
        }
    }
    c.nodepools = pools;
    c
}

fn set(c: &mut Cluster, node: usize, kind: &str, status: &str, since: Time) {
    let n = &mut c.nodes[node];
    n.conditions.retain(|x| x.kind != kind);
    n.conditions.push(NodeCondition::new(kind, status, Some(since)));
    n.ready = n.condition("Ready").is_none_or(|r| r.status == "True");
}

fn repaired(decisions: &[Decision]) -> Vec<(String, Reason)> {
    decisions
        .iter()
        .filter_map(|d| match &d.action {
            Some(Action::WriteClaim(c)) => c.disruption.as_ref().map(|x| (c.name.clone(), x.reason)),
            _ => None,
        })
        .collect()
}

/// Nothing done: no claim written, no Event (notes may say when a repair will come).
fn acts(decisions: &[Decision]) -> bool {
    decisions.iter().any(|d| d.action.is_some())
}

fn events(decisions: &[Decision]) -> Vec<(String, String, String)> {
    decisions
        .iter()
        .filter_map(|d| match &d.action {
            Some(Action::Event { object, reason, message }) => Some((object.clone(), reason.clone(), message.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn healthy_nodes_are_untouched() {
    let mut c = cluster(vec![repairing("gpu")], 3, t(120));
    // Watched conditions in their healthy status, and one no policy watches, unhealthy for hours.
    set(&mut c, 0, "KernelReady", "True", t(-500));
    set(&mut c, 1, "MemoryPressure", "True", t(-500));
    assert!(repairs(&c).is_empty());
}

#[test]
fn ready_false_is_tolerated_for_30_minutes_then_repaired_with_an_event() {
    let mut c = cluster(vec![repairing("default")], 5, t(29));
    set(&mut c, 0, "Ready", "False", t(0));
    let decisions = repairs(&c);
    assert!(!acts(&decisions), "29 minutes: within the toleration");
    assert_eq!(
        decisions[0].why,
        "node node-default0 has Ready=False since 2026-10-22T09:00:00Z: repaired at 2026-10-22T09:30:00Z unless it \
         recovers (30m toleration)"
    );

    c.now = t(31);
    let decisions = repairs(&c);
    assert_eq!(repaired(&decisions), [("default0".to_string(), Reason::Unhealthy)]);
    let Some(Action::WriteClaim(next)) = &decisions[0].action else { unreachable!() };
    let d = next.disruption.as_ref().unwrap();
    assert_eq!((next.version, d.since, d.replacements.len(), d.reclaim_at), (4, t(31), 0, None));
    let [(object, reason, message)] = &events(&decisions)[..] else { panic!("{decisions:#?}") };
    assert_eq!((object.as_str(), reason.as_str()), ("Node/node-default0", UNHEALTHY));
    assert_eq!(
        message,
        "unhealthy: node node-default0 has Ready=False since 2026-10-22T09:00:00Z (31m), past its 30m toleration: \
         terminating instance i-default0 without waiting for its pods (node repair)"
    );

    // Unknown (the kubelet stopped reporting) is tolerated as long.
    set(&mut c, 0, "Ready", "Unknown", t(2));
    assert!(!acts(&repairs(&c)), "29 minutes Unknown");
}

#[test]
fn accelerated_hardware_is_tolerated_for_10_minutes() {
    let mut c = cluster(vec![repairing("gpu")], 10, t(9));
    set(&mut c, 2, "AcceleratedHardwareReady", "False", t(0));
    set(&mut c, 3, "KernelReady", "False", t(0));
    assert!(!acts(&repairs(&c)));
    c.now = t(10);
    let decisions = repairs(&c);
    assert_eq!(repaired(&decisions), [("gpu2".to_string(), Reason::Unhealthy)]);
    assert!(events(&decisions)[0].2.contains("AcceleratedHardwareReady=False since"), "{decisions:#?}");
    // A condition that does not say since when is never due: how long it lasted is unknown.
    c.nodes[3].conditions.iter_mut().for_each(|x| x.since = None);
    c.now = t(600);
    let decisions = repairs(&c);
    assert_eq!(repaired(&decisions), [("gpu2".to_string(), Reason::Unhealthy)]);
    assert!(decisions.iter().any(|d| d.why.contains("KernelReady=False with no lastTransitionTime")), "{decisions:#?}");
}

#[test]
fn a_pool_without_the_opt_in_is_untouched() {
    let mut c = cluster(vec![NodePool::new("default", "default")], 5, t(60));
    set(&mut c, 0, "Ready", "False", t(0));
    assert!(repairs(&c).is_empty());
    // The annotation alone says nothing to the core: the pool's converted flag does.
    c.nodepools[0].annotations.insert(NODE_REPAIR_ANNOTATION.into(), "false".into());
    assert!(repairs(&c).is_empty());
}

#[test]
fn the_global_setting_applies_to_every_pool() {
    let mut c = cluster(vec![NodePool::new("a", "default"), NodePool::new("b", "default")], 5, t(60));
    set(&mut c, 0, "Ready", "False", t(0));
    set(&mut c, 5, "NetworkingReady", "False", t(0));
    assert!(repairs(&c).is_empty());
    c.node_repair = true;
    assert_eq!(repaired(&repairs(&c)), [("a0".to_string(), Reason::Unhealthy), ("b0".to_string(), Reason::Unhealthy)]);
}

#[test]
fn more_than_20_percent_unhealthy_blocks_the_pools_repair() {
    let mut c = cluster(vec![repairing("default"), repairing("other")], 10, t(60));
    for i in 0..3 {
        set(&mut c, i, "Ready", "False", t(0));
    }
    // The other pool is judged on its own nodes: 2 of 10 may be repaired.
    set(&mut c, 10, "Ready", "Unknown", t(0));
    set(&mut c, 11, "KernelReady", "False", t(50)); // unhealthy, not yet due: counts all the same
    let decisions = repairs(&c);
    assert_eq!(repaired(&decisions), [("other0".to_string(), Reason::Unhealthy)]);
    let blocked: Vec<_> = events(&decisions).into_iter().filter(|e| e.1 == NODE_REPAIR_BLOCKED).collect();
    let [(object, _, message)] = &blocked[..] else { panic!("{decisions:#?}") };
    assert_eq!(object, "NodePool/default");
    assert_eq!(
        message,
        "node repair blocked: 3 of the 10 nodes of nodepool default are unhealthy (node-default0, node-default1, \
         node-default2), more than 20% (2); a failure that wide is not one node's, so none is replaced until enough \
         recover"
    );

    // One recovers: 2 of 10 is within the threshold, and both are repaired.
    set(&mut c, 2, "Ready", "True", t(59));
    assert_eq!(
        repaired(&repairs(&c)),
        [
            ("default0".to_string(), Reason::Unhealthy),
            ("default1".to_string(), Reason::Unhealthy),
            ("other0".to_string(), Reason::Unhealthy)
        ]
    );
}

#[test]
fn a_repair_under_way_counts_toward_the_threshold_and_is_left_alone() {
    let mut c = cluster(vec![repairing("default")], 10, t(60));
    set(&mut c, 0, "Ready", "False", t(0));
    set(&mut c, 1, "Ready", "False", t(0));
    c.claims[0].disruption = Some(Disruption {
        reason: Reason::Unhealthy,
        since: t(31),
        replacements: vec![],
        message: "unhealthy".into(),
        reclaim_at: None,
    });
    c.claims[0].phase = Phase::Terminating;
    // Another claim being consolidated, with an unhealthy node: left to that disruption.
    set(&mut c, 2, "Ready", "False", t(0));
    c.claims[2].disruption = Some(Disruption {
        reason: Reason::Underutilized,
        since: t(40),
        replacements: vec![],
        message: "underutilized".into(),
        reclaim_at: None,
    });
    // 3 unhealthy of 10: the two already leaving still count, so the third waits.
    let decisions = repairs(&c);
    assert!(repaired(&decisions).is_empty(), "{decisions:#?}");
    assert_eq!(events(&decisions)[0].1, NODE_REPAIR_BLOCKED);
    // Once the repaired node is gone (its claim Terminated), the third is repaired.
    c.claims[0].phase = Phase::Terminated;
    c.nodes.remove(0);
    assert_eq!(repaired(&repairs(&c)), [("default1".to_string(), Reason::Unhealthy)]);
}

#[test]
fn the_drain_does_not_wait_for_protected_pods() {
    let mut c = cluster(vec![repairing("default")], 5, t(31));
    set(&mut c, 0, "Ready", "False", t(0));
    let mut pod = Pod::new("shop", "db-0", Resources::new(500, 1 << 30));
    pod.labels.insert("app".into(), "db".into());
    pod.annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    pod.node_name = Some("node-default0".into());
    c.nodes[0].pods.push(std::sync::Arc::new(pod));
    c.pdbs.push(Pdb {
        namespace: "shop".into(),
        name: "db".into(),
        selector: LabelSelector::from_labels(&[("app", "db")]),
        disruptions_allowed: 0,
    });
    c.volume_attachments.insert("node-default0".into(), vec!["csi-1".into()]);
    for d in repairs(&c) {
        if let Some(Action::WriteClaim(next)) = &d.action {
            c.record(next);
        }
    }
    let step = lifecycle::advance(&c.claims[0], &c);
    let kinds: Vec<&str> = step.decisions.iter().filter_map(|d| d.action.as_ref().map(Action::kind)).collect();
    assert_eq!(kinds, ["TerminateInstance"], "{:#?}", step.decisions);
    assert_eq!(step.claim.unwrap().phase, Phase::Terminating);
}

#[test]
fn the_sweep_repairs_outside_budgets_and_before_expiration() {
    let mut pool = repairing("default");
    pool.disruption.budgets =
        vec![Budget { nodes: BudgetNodes::Count(0), schedule: None, duration: None, reasons: vec![] }];
    pool.expire_after = Some(Duration::from_secs(3600));
    let mut c = cluster(vec![pool], 5, t(31));
    for claim in &mut c.claims {
        claim.expire_after = Some(Duration::from_secs(3600));
    }
    set(&mut c, 0, "Ready", "False", t(0));
    let decisions = sweep(&c, catalog::embedded());
    let reasons = repaired(&decisions);
    // Node 0 is repaired (not expired, though its hour is up too); the others expire.
    assert_eq!(reasons[0], ("default0".to_string(), Reason::Unhealthy));
    assert!(reasons[1..].iter().all(|(n, r)| n != "default0" && *r == Reason::Expired), "{reasons:?}");
    assert_eq!(reasons.len(), 5);
}
