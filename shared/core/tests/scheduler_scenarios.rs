//! Scenario tests: small, hand-built clusters whose plan is asserted precisely, each also passed
//! through the independent checker in `checker/`.
//!
//! Tests named `bug_*` reproduce scheduler bugs found by the checker and the property tests. Those
//! fixed in this change pin the fix; those still open fail on purpose, with a message starting
//! "KNOWN BUG" that says what is wrong (they are not weakened to pass).

mod checker;
mod synthetic;

use std::collections::{BTreeMap, BTreeSet};

use dovetail_core::benchmark;
use dovetail_core::catalog::{self, CapacityType, Catalog, InstanceType, OfferingKey};
use dovetail_core::labels;
use dovetail_core::model::{
    HostPort, InclusionPolicy, LabelSelector, NamespaceScope, Node, NodeClass, NodeKind, NodePool, OwnerKind, Pod,
    PodAffinityTerm, Taint, TaintEffect, Toleration, TolerationOp, TopologySpread, Weighted, WhenUnsatisfiable,
    LIMIT_NODES,
};
use dovetail_core::requirements::{MinValuesPolicy, Operator, Requirement, Requirements};
use dovetail_core::resources::{self, Resources, NVIDIA_GPU};
use dovetail_core::scheduler::{schedule, Plan, PlannedClaim};
use dovetail_core::snapshot::{CostLimit, Snapshot};

use synthetic::{daemonset, fixed_catalog, fixed_type, req, reqs};

const MIB: i64 = 1 << 20;
const TEAM: &str = "example.com/team";

// ---------------------------------------------------------------------------------------------
// Builders.

fn karpenter() -> Catalog {
    benchmark::karpenter_catalog(400)
}

fn pod(name: &str, cpu_m: i64, mem_mi: i64) -> Pod {
    let mut p = Pod::new("default", name, Resources::new(cpu_m, mem_mi * MIB));
    p.owner = OwnerKind::ReplicaSet;
    p
}

fn pods(prefix: &str, n: usize, cpu_m: i64, mem_mi: i64) -> Vec<Pod> {
    (0..n).map(|i| pod(&format!("{prefix}-{i}"), cpu_m, mem_mi)).collect()
}

fn class() -> NodeClass {
    NodeClass { name: "default".into(), ..NodeClass::default() }
}

/// A pool that allows both capacity types and any type.
fn pool(name: &str) -> NodePool {
    let mut p = NodePool::new(name, "default");
    p.requirements.add(req(labels::CAPACITY_TYPE, Operator::In, &["spot", "on-demand"]));
    p
}

fn snapshot(pods: Vec<Pod>, pools: Vec<NodePool>) -> Snapshot {
    Snapshot { pods, nodepools: pools, nodeclasses: vec![class()], ..Default::default() }
}

/// Schedules and checks; every scenario goes through here.
fn run(snap: &Snapshot, catalog: &Catalog) -> Plan {
    let plan = schedule(snap, catalog);
    checker::assert_valid(snap, catalog, &plan);
    plan
}

fn claim_of<'a>(plan: &'a Plan, pod: &str) -> Option<&'a PlannedClaim> {
    let key = format!("default/{pod}");
    plan.nodeclaims.iter().find(|c| c.pods.contains(&key))
}

fn existing_of<'a>(plan: &'a Plan, pod: &str) -> Option<&'a str> {
    let key = format!("default/{pod}");
    plan.existing.iter().find(|e| e.pods.contains(&key)).map(|e| e.node.as_str())
}

fn reason_of<'a>(plan: &'a Plan, pod: &str) -> Option<&'a str> {
    let key = format!("default/{pod}");
    plan.unschedulable.iter().find(|u| u.pod == key).map(|u| u.reason.as_str())
}

fn placed(plan: &Plan) -> usize {
    plan.nodeclaims.iter().map(|c| c.pods.len()).sum::<usize>()
        + plan.existing.iter().map(|e| e.pods.len()).sum::<usize>()
}

/// A node of a catalog type, labelled as a launched one would be.
fn node(catalog: &Catalog, name: &str, type_name: &str, zone: &str, capacity: CapacityType, pool: &str) -> Node {
    let t = catalog.get(type_name).expect("type in catalog");
    let mut labels: BTreeMap<String, String> =
        t.requirements.iter().filter_map(|r| r.single_value().map(|v| (r.key.clone(), v.to_string()))).collect();
    labels.insert(labels::ZONE.into(), zone.into());
    labels.insert(labels::CAPACITY_TYPE.into(), capacity.as_str().into());
    labels.insert(labels::HOSTNAME.into(), name.into());
    labels.insert(labels::NODEPOOL.into(), pool.into());
    Node::new(name, labels, t.allocatable(&Default::default()))
}

fn selector_term(key: &str, label: (&str, &str)) -> PodAffinityTerm {
    PodAffinityTerm {
        selector: LabelSelector::from_labels(&[label]),
        namespaces: NamespaceScope::List(vec![]),
        topology_key: key.into(),
    }
}

fn spread(key: &str, skew: i32, when: WhenUnsatisfiable, label: (&str, &str)) -> TopologySpread {
    TopologySpread {
        max_skew: skew,
        topology_key: key.into(),
        when_unsatisfiable: when,
        selector: LabelSelector::from_labels(&[label]),
        min_domains: None,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
    }
}

fn tolerate(key: &str) -> Toleration {
    Toleration { key: key.into(), operator: TolerationOp::Exists, value: String::new(), effect: None }
}

fn zone_counts(plan: &Plan, prefix: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for c in &plan.nodeclaims {
        let n = c.pods.iter().filter(|p| p.starts_with(&format!("default/{prefix}"))).count();
        if n > 0 {
            *out.entry(c.zone.clone()).or_insert(0) += n;
        }
    }
    out
}

fn arm64(mut t: InstanceType) -> InstanceType {
    t.requirements = t
        .requirements
        .iter()
        .filter(|r| r.key != labels::ARCH)
        .cloned()
        .chain([Requirement::single(labels::ARCH, "arm64")])
        .collect();
    t
}

// ---------------------------------------------------------------------------------------------
// Existing capacity, pools, capacity types.

#[test]
fn existing_node_capacity_is_used_before_new_claims() {
    let catalog = karpenter();
    // fake-it-3: 4 vCPU, 8 GiB.
    let n = node(&catalog, "node-1", "fake-it-3", "test-zone-1", CapacityType::OnDemand, "default");
    let mut snap = snapshot(pods("web", 5, 1000, 512), vec![pool("default")]);
    snap.nodes.push(n);
    let plan = run(&snap, &catalog);
    let on_node: usize = plan.existing.iter().filter(|e| e.node == "node-1").map(|e| e.pods.len()).sum();
    assert_eq!(on_node, 4, "the node holds four 1-CPU pods:\n{}", checker::summary(&plan));
    assert_eq!(plan.nodeclaims.len(), 1);
    assert_eq!(plan.nodeclaims[0].pods.len(), 1);
    assert_eq!(plan.nodeclaims[0].instance_type, "fake-it-0", "1 CPU requested: the 1-vCPU type has exactly that");
    assert!(plan.unschedulable.is_empty());
}

#[test]
fn in_flight_claims_take_pods() {
    let catalog = karpenter();
    let mut n = node(&catalog, "claim-in-flight", "fake-it-7", "test-zone-2", CapacityType::Spot, "default");
    n.kind = NodeKind::InFlight;
    let mut snap = snapshot(pods("batch", 3, 2000, 1024), vec![pool("default")]);
    snap.nodes.push(n);
    let plan = run(&snap, &catalog);
    assert!(plan.nodeclaims.is_empty(), "{}", checker::summary(&plan));
    for i in 0..3 {
        assert_eq!(existing_of(&plan, &format!("batch-{i}")), Some("claim-in-flight"));
    }
    assert_eq!(plan.cost_per_hour, 0.0);
}

#[test]
fn cordoned_nodes_take_nothing() {
    let catalog = karpenter();
    let mut n = node(&catalog, "draining", "fake-it-7", "test-zone-1", CapacityType::OnDemand, "default");
    n.unschedulable = true;
    let mut snap = snapshot(pods("web", 2, 500, 256), vec![pool("default")]);
    snap.nodes.push(n);
    let plan = run(&snap, &catalog);
    assert!(plan.existing.is_empty());
    assert_eq!(placed(&plan), 2);
}

#[test]
fn pools_are_tried_by_weight() {
    let catalog = karpenter();
    let cheap = pool("general");
    let mut preferred = pool("reserved");
    preferred.weight = 10;
    preferred.requirements.add(req(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]));
    let snap = snapshot(pods("app", 2, 500, 512), vec![cheap, preferred]);
    let plan = run(&snap, &catalog);
    assert_eq!(plan.nodeclaims.len(), 1);
    let c = &plan.nodeclaims[0];
    assert_eq!(c.nodepool, "reserved", "the heavier pool wins although spot in `general` would be preferred");
    assert_eq!(c.capacity_type, CapacityType::OnDemand);
    assert_eq!(c.labels.get(labels::NODEPOOL).map(String::as_str), Some("reserved"));
}

#[test]
fn the_lower_bound_honours_pool_weights() {
    // The heavier pool may use only the dear family; the other, the cheap one, six times cheaper
    // per core. Every pod fits the heavier pool, so every plan that honours the weights buys the
    // dear family: a bound priced on the cheap one (what it was) says nothing of such a plan.
    let catalog = fixed_catalog(vec![
        fixed_type("dear.xlarge", 4, 16, 0.60, None, &["zone-a"]),
        fixed_type("cheap.xlarge", 4, 16, 0.10, None, &["zone-a"]),
    ]);
    let mut preferred = pool("preferred");
    preferred.weight = 10;
    preferred.requirements.add(req(labels::INSTANCE_FAMILY, Operator::In, &["dear"]));
    let snap = snapshot(pods("app", 8, 1000, 2048), vec![pool("general"), preferred]);
    let plan = run(&snap, &catalog);
    assert!(plan.nodeclaims.iter().all(|c| c.nodepool == "preferred"), "{}", checker::summary(&plan));
    assert!(
        plan.lower_bound_per_hour <= plan.cost_per_hour + 1e-9 && plan.lower_bound_per_hour >= 0.9 * plan.cost_per_hour,
        "bound ${:.4}/h against a cost of ${:.4}/h:\n{}",
        plan.lower_bound_per_hour,
        plan.cost_per_hour,
        checker::summary(&plan)
    );
}

#[test]
fn pool_limits_leave_later_pods_unschedulable_with_a_reason() {
    let catalog = karpenter();
    let mut p = pool("capped");
    p.limits.insert("cpu".into(), 4000);
    let snap = snapshot(pods("job", 3, 1500, 256), vec![p]);
    let plan = run(&snap, &catalog);
    // 4 vCPU in all: one 4-vCPU node (or two 2-vCPU ones) holds two 1.5-CPU pods, never three.
    assert_eq!(placed(&plan), 2, "{}", checker::summary(&plan));
    assert_eq!(plan.unschedulable.len(), 1);
    let reason = &plan.unschedulable[0].reason;
    assert!(reason.contains("NodePool \"capped\"") && reason.contains("limit"), "{reason}");
    let cores: i64 =
        plan.nodeclaims.iter().map(|c| catalog.get(&c.instance_type).unwrap().capacity(&Default::default()).cpu).sum();
    assert!(cores <= 4000);
}

/// A limit on nodes holds the plan to that many claims, and the checker counts claims against it:
/// the same plan judged under a lower limit is reported.
#[test]
fn node_limit_caps_claims_and_the_checker_counts_them() {
    let catalog = karpenter();
    let mut p = pool("capped");
    p.limits.insert(LIMIT_NODES.into(), 2);
    // Host ports keep each pod on its own claim.
    let ps: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = pod(&format!("web-{i}"), 500, 512);
            p.host_ports.push(HostPort { port: 8080, protocol: "TCP".into(), ip: String::new() });
            p
        })
        .collect();
    let mut snap = snapshot(ps, vec![p]);
    let plan = schedule(&snap, &catalog);
    checker::assert_valid(&snap, &catalog, &plan);
    assert_eq!(plan.nodeclaims.len(), 2, "{}", checker::summary(&plan));
    assert_eq!(plan.unschedulable.len(), 1, "{}", checker::summary(&plan));
    assert!(plan.unschedulable[0].reason.contains("limit on nodes"), "{}", checker::summary(&plan));
    snap.nodepools[0].limits.insert(LIMIT_NODES.into(), 1);
    let errors = checker::check(&snap, &catalog, &plan);
    assert!(errors.iter().any(|e| e.contains("limit on nodes is 1")), "{errors:#?}");
}

/// A spot pool allowed three nodes and 53 GiB, and six pods of which two need the 2-vCPU type's
/// memory: the pass fills three claims and has one pod left to grow a claim for.
fn three_nodes_for_six_pods() -> (Catalog, Snapshot) {
    let catalog = fixed_catalog(vec![
        fixed_type("f2.small", 1, 4, 0.043, Some(0.01763), &["zone-a"]),
        fixed_type("f2.medium", 2, 8, 0.116, Some(0.04292), &["zone-a"]),
    ]);
    let mut p = NodePool::new("capped", "default");
    p.requirements.add(req(labels::CAPACITY_TYPE, Operator::In, &["spot"]));
    p.limits.insert(LIMIT_NODES.into(), 3);
    p.limits.insert(resources::MEMORY.into(), 53 << 30);
    let mut all = pods("small", 4, 1000, 2048);
    all.extend(pods("large", 2, 1000, 6144));
    (catalog, snapshot(all, vec![p]))
}

/// A pool at its limit on nodes grows a claim to a larger type for a pod it would turn away: the
/// pass sized the third claim for one pod on the 1-vCPU type, and the last pod fits beside it on
/// the 2-vCPU one, still three nodes. Found by `tests/exact_optimum.rs` (with limits).
#[test]
fn a_pool_at_its_limit_grows_a_claim_for_the_pod_it_would_turn_away() {
    let (catalog, snap) = three_nodes_for_six_pods();
    let plan = run(&snap, &catalog);
    assert!(plan.unschedulable.is_empty(), "{}", checker::summary(&plan));
    assert_eq!(plan.nodeclaims.len(), 3, "{}", checker::summary(&plan));
}

/// Growing a claim for a pod the pool's limits turn away, and repacking, stay within the
/// cluster-wide cost limit too: each holds its claims at the price it is planned against. Found by
/// `tests/scheduler_properties.rs` once claim growing and cost limits met.
#[test]
fn a_grown_or_repacked_claim_stays_within_the_cluster_wide_cost_limit() {
    let (catalog, mut snap) = three_nodes_for_six_pods();
    let unlimited = run(&snap, &catalog);
    assert!(unlimited.unschedulable.is_empty(), "{}", checker::summary(&unlimited));
    // Just under what that plan costs: some pod must wait, and no claim may grow past the limit.
    let limit = dovetail_core::model::cost_micros(unlimited.cost_per_hour) - 1;
    snap.cost_limit = Some(CostLimit { limit, usage: 0 });
    let plan = run(&snap, &catalog);
    assert!(!plan.unschedulable.is_empty(), "{}", checker::summary(&plan));
    assert!(
        dovetail_core::model::cost_micros(plan.cost_per_hour) <= limit,
        "{} > {limit}:\n{}",
        plan.cost_per_hour,
        checker::summary(&plan)
    );
}

/// Repacking covers pools with limits: three small pods on two 1-vCPU nodes cost more than one
/// 2-vCPU node, which the limits have room for. Found by `tests/exact_optimum.rs` (with limits).
#[test]
fn repacking_covers_pools_with_limits() {
    let catalog = fixed_catalog(vec![
        fixed_type("f1.large", 2, 16, 0.06, Some(0.0426), &["zone-a"]),
        fixed_type("f1.small", 1, 8, 0.036, Some(0.0108), &["zone-a"]),
        fixed_type("f2.small", 1, 4, 0.044, Some(0.0198), &["zone-a"]),
    ]);
    let mut p = NodePool::new("capped", "default");
    p.requirements.add(req(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]));
    p.limits.insert(resources::CPU.into(), 13_000);
    p.limits.insert(resources::MEMORY.into(), 61 << 30);
    let mut all = pods("quarter", 1, 250, 256);
    all.extend(pods("half", 2, 500, 256));
    let plan = run(&snapshot(all, vec![p]), &catalog);
    assert!(plan.unschedulable.is_empty(), "{}", checker::summary(&plan));
    assert!(plan.cost_per_hour <= 0.06 + 1e-9, "one 2-vCPU node holds them:\n{}", checker::summary(&plan));
}

#[test]
fn pool_usage_counts_against_limits() {
    let catalog = karpenter();
    let mut p = pool("capped");
    p.limits.insert("cpu".into(), 8000);
    p.usage.cpu = 7000;
    let snap = snapshot(pods("job", 1, 1500, 256), vec![p]);
    let plan = run(&snap, &catalog);
    assert!(plan.nodeclaims.is_empty());
    assert!(reason_of(&plan, "job-0").is_some_and(|r| r.contains("limit on cpu")), "{}", checker::summary(&plan));
}

#[test]
fn spot_is_preferred_and_on_demand_only_when_required() {
    let catalog = karpenter();
    let plan = run(&snapshot(vec![pod("any", 500, 256)], vec![pool("default")]), &catalog);
    let any = claim_of(&plan, "any").unwrap();
    assert_eq!(any.capacity_type, CapacityType::Spot);
    assert_eq!(any.requirements.get(labels::CAPACITY_TYPE).and_then(|r| r.single_value()), Some("spot"));
    let mut od = pod("needs-od", 500, 256);
    od.node_affinity = vec![reqs(vec![Requirement::single(labels::CAPACITY_TYPE, "on-demand")])];
    let plan = run(&snapshot(vec![od], vec![pool("default")]), &catalog);
    let od = claim_of(&plan, "needs-od").unwrap();
    assert_eq!(od.capacity_type, CapacityType::OnDemand);
    assert_eq!(od.labels.get(labels::CAPACITY_TYPE).map(String::as_str), Some("on-demand"));
}

#[test]
fn unavailable_offerings_are_avoided() {
    let catalog = karpenter();
    let mut snap = snapshot(vec![pod("tiny", 100, 128)], vec![pool("default")]);
    for zone in ["test-zone-1", "test-zone-2"] {
        snap.unavailable.insert(OfferingKey {
            instance_type: "fake-it-0".into(),
            zone: zone.into(),
            capacity_type: CapacityType::Spot,
        });
    }
    let plan = run(&snap, &catalog);
    let c = &plan.nodeclaims[0];
    // fake-it-0 is now on-demand only; spot is still preferred, on the next size.
    assert_eq!(
        (c.instance_type.as_str(), c.capacity_type),
        ("fake-it-1", CapacityType::Spot),
        "{}",
        checker::summary(&plan)
    );
    assert!(!c.instance_types.contains(&"fake-it-0".to_string()));
}

#[test]
fn catalog_offerings_marked_unavailable_are_avoided() {
    let mut catalog = karpenter();
    for t in catalog.types.iter_mut().take(3) {
        for o in &mut t.offerings {
            o.available = false;
        }
    }
    let snap = snapshot(vec![pod("tiny", 100, 128)], vec![pool("default")]);
    let plan = run(&snap, &catalog);
    assert_eq!(plan.nodeclaims[0].instance_type, "fake-it-3");
}

// ---------------------------------------------------------------------------------------------
// Node selection: architecture, GPUs, taints, affinity.

#[test]
fn arm64_only_pod_gets_an_arm64_type() {
    let catalog = catalog::embedded();
    let mut p = pod("arm", 500, 512);
    p.node_affinity = vec![reqs(vec![Requirement::single(labels::ARCH, "arm64")])];
    let snap = snapshot(vec![p, pod("any", 500, 512)], vec![pool("default")]);
    let plan = run(&snap, catalog);
    let c = claim_of(&plan, "arm").unwrap();
    assert_eq!(c.labels.get(labels::ARCH).map(String::as_str), Some("arm64"));
    for t in &c.instance_types {
        let arch = catalog.get(t).unwrap().requirements.get(labels::ARCH).and_then(|r| r.single_value());
        assert_eq!(arch, Some("arm64"), "{t} among the candidates");
    }
    assert!(c.instance_types.len() > 1 && c.instance_types.len() <= 60);
}

#[test]
fn gpu_pod_lands_in_the_tainted_gpu_pool() {
    let catalog = catalog::embedded();
    let mut gpu_pool = pool("gpu");
    gpu_pool.weight = 10;
    gpu_pool.requirements.add(req(labels::INSTANCE_CATEGORY, Operator::In, &["g", "p"]));
    gpu_pool.taints.push(Taint::new(NVIDIA_GPU, "true", TaintEffect::NoSchedule));
    let mut trainer = pod("trainer", 2000, 8192);
    trainer.requests.set(NVIDIA_GPU, 1);
    trainer.tolerations.push(tolerate(NVIDIA_GPU));
    let snap = snapshot(vec![trainer, pod("web", 500, 512)], vec![pool("default"), gpu_pool]);
    let plan = run(&snap, catalog);
    let c = claim_of(&plan, "trainer").unwrap();
    assert_eq!(c.nodepool, "gpu");
    assert!(c.taints.contains(&Taint::new(NVIDIA_GPU, "true", TaintEffect::NoSchedule)));
    assert!(c.allocatable.get(NVIDIA_GPU).is_some_and(|g| g != "0"), "{:?}", c.allocatable);
    for t in &c.instance_types {
        let family = catalog.get(t).unwrap().requirements.get(labels::INSTANCE_CATEGORY).and_then(|r| r.single_value());
        assert!(matches!(family, Some("g") | Some("p")), "{t}");
    }
    // The web pod does not tolerate the taint: it goes to the default pool, on a type without GPUs.
    let web = claim_of(&plan, "web").unwrap();
    assert_eq!(web.nodepool, "default");
    assert!(!web.allocatable.contains_key(NVIDIA_GPU));
}

#[test]
fn untolerated_taint_keeps_a_pod_out_of_a_pool() {
    let catalog = karpenter();
    let mut tainted = pool("dedicated");
    tainted.weight = 5;
    tainted.taints.push(Taint::new("dedicated", "batch", TaintEffect::NoExecute));
    let mut batch = pod("batch", 500, 256);
    batch.tolerations.push(tolerate("dedicated"));
    let snap = snapshot(vec![batch, pod("web", 500, 256)], vec![pool("general"), tainted]);
    let plan = run(&snap, &catalog);
    assert_eq!(claim_of(&plan, "batch").unwrap().nodepool, "dedicated");
    assert_eq!(claim_of(&plan, "web").unwrap().nodepool, "general");
}

#[test]
fn prefer_no_schedule_taints_do_not_block() {
    let catalog = karpenter();
    let mut soft = pool("soft");
    soft.taints.push(Taint::new("spot-only", "", TaintEffect::PreferNoSchedule));
    let snap = snapshot(vec![pod("web", 500, 256)], vec![soft]);
    let plan = run(&snap, &catalog);
    assert_eq!(claim_of(&plan, "web").unwrap().nodepool, "soft");
}

#[test]
fn startup_taints_do_not_block_but_are_applied() {
    let catalog = karpenter();
    let mut p = pool("cilium");
    let startup = Taint::new("node.cilium.io/agent-not-ready", "true", TaintEffect::NoExecute);
    p.startup_taints.push(startup.clone());
    let snap = snapshot(vec![pod("web", 500, 256)], vec![p]);
    let plan = run(&snap, &catalog);
    let c = claim_of(&plan, "web").expect("placed despite the startup taint");
    assert!(c.taints.contains(&startup), "the launcher must still apply it: {:?}", c.taints);
}

#[test]
fn required_node_affinity_takes_the_second_term_when_the_first_is_impossible() {
    let catalog = karpenter();
    let mut p = pod("picky", 500, 256);
    p.node_affinity = vec![
        reqs(vec![Requirement::single(labels::ZONE, "mars-1a")]),
        reqs(vec![
            Requirement::single(labels::CAPACITY_TYPE, "on-demand"),
            Requirement::single(labels::ZONE, "test-zone-3"),
        ]),
    ];
    let snap = snapshot(vec![p], vec![pool("default")]);
    let plan = run(&snap, &catalog);
    let c = claim_of(&plan, "picky").unwrap();
    assert_eq!((c.zone.as_str(), c.capacity_type), ("test-zone-3", CapacityType::OnDemand));
}

#[test]
fn preferred_node_affinity_is_honoured_when_possible_and_relaxed_when_not() {
    let catalog = karpenter();
    let prefer = |name: &str, zone: &str| {
        let mut p = pod(name, 500, 256);
        p.preferred_node_affinity
            .push(Weighted { weight: 10, term: reqs(vec![Requirement::single(labels::ZONE, zone)]) });
        p
    };
    let snap = snapshot(vec![prefer("likes-2", "test-zone-2"), prefer("likes-mars", "mars-1a")], vec![pool("default")]);
    let plan = run(&snap, &catalog);
    assert_eq!(claim_of(&plan, "likes-2").unwrap().zone, "test-zone-2", "{}", checker::summary(&plan));
    assert!(claim_of(&plan, "likes-mars").is_some() || existing_of(&plan, "likes-mars").is_some());
    assert!(plan.unschedulable.is_empty());
}

#[test]
fn pvc_zone_pins_the_claim() {
    let catalog = karpenter();
    let mut db = pod("db", 1000, 2048);
    db.volume_requirements.add(Requirement::single(labels::ZONE, "test-zone-2"));
    let snap = snapshot(vec![db], vec![pool("default")]);
    let plan = run(&snap, &catalog);
    let c = claim_of(&plan, "db").unwrap();
    assert_eq!(c.zone, "test-zone-2");
    assert_eq!(c.requirements.get(labels::ZONE).and_then(|r| r.single_value()), Some("test-zone-2"));
}

#[test]
fn pvc_zone_without_any_offering_is_explained() {
    let catalog = karpenter();
    let mut db = pod("db", 1000, 2048);
    db.volume_requirements.add(Requirement::single(labels::ZONE, "test-zone-9"));
    let snap = snapshot(vec![db], vec![pool("default")]);
    let plan = run(&snap, &catalog);
    let reason = reason_of(&plan, "db").expect("unschedulable");
    assert!(reason.contains("NodePool \"default\"") && reason.contains(labels::ZONE), "{reason}");
}

// ---------------------------------------------------------------------------------------------
// Topology: anti-affinity, spreads, affinity, host ports.

#[test]
fn hostname_anti_affinity_puts_one_pod_per_claim() {
    let catalog = karpenter();
    let ps: Vec<Pod> = (0..4)
        .map(|i| {
            let mut p = pod(&format!("nginx-{i}"), 250, 256).with_labels(&[("app", "nginx")]);
            p.pod_anti_affinity.push(selector_term(labels::HOSTNAME, ("app", "nginx")));
            p
        })
        .collect();
    let snap = snapshot(ps, vec![pool("default")]);
    let plan = run(&snap, &catalog);
    assert_eq!(plan.nodeclaims.len(), 4);
    assert!(plan.nodeclaims.iter().all(|c| c.pods.len() == 1));
}

#[test]
fn anti_affinity_of_a_running_pod_repels_pending_ones() {
    let catalog = karpenter();
    let mut n = node(&catalog, "node-1", "fake-it-15", "test-zone-1", CapacityType::OnDemand, "default");
    let mut loner = pod("loner", 100, 64);
    loner.pod_anti_affinity.push(selector_term(labels::ZONE, ("app", "noisy")));
    n.pods.push(loner.into());
    let noisy: Vec<Pod> =
        (0..2).map(|i| pod(&format!("noisy-{i}"), 500, 256).with_labels(&[("app", "noisy")])).collect();
    let mut snap = snapshot(noisy, vec![pool("default")]);
    snap.nodes.push(n);
    let plan = run(&snap, &catalog);
    assert!(plan.existing.is_empty(), "{}", checker::summary(&plan));
    assert!(plan.nodeclaims.iter().all(|c| c.zone != "test-zone-1"));
    assert_eq!(placed(&plan), 2);
}

#[test]
fn zone_spread_over_three_zones_is_balanced() {
    let catalog = karpenter();
    let ps: Vec<Pod> = (0..6)
        .map(|i| {
            let mut p = pod(&format!("spread-{i}"), 500, 512).with_labels(&[("app", "spread")]);
            p.topology_spread.push(spread(labels::ZONE, 1, WhenUnsatisfiable::DoNotSchedule, ("app", "spread")));
            p
        })
        .collect();
    let snap = snapshot(ps, vec![pool("default")]);
    let plan = run(&snap, &catalog);
    let counts = zone_counts(&plan, "spread");
    let expected: BTreeMap<String, usize> =
        ["test-zone-1", "test-zone-2", "test-zone-3"].iter().map(|z| (z.to_string(), 2)).collect();
    assert_eq!(counts, expected, "{}", checker::summary(&plan));
}

#[test]
fn do_not_schedule_spread_leaves_pods_pending_that_schedule_anyway_places() {
    let catalog = karpenter();
    // Pods that must run in zone 1 but spread over every zone (nodeAffinityPolicy Ignore counts
    // zones their affinity excludes): a hard spread admits one pod, a soft one all three.
    let make = |prefix: &str, when| -> Vec<Pod> {
        (0..3)
            .map(|i| {
                let mut p = pod(&format!("{prefix}-{i}"), 500, 512).with_labels(&[("app", prefix)]);
                p.node_affinity = vec![reqs(vec![Requirement::single(labels::ZONE, "test-zone-1")])];
                let mut s = spread(labels::ZONE, 1, when, ("app", prefix));
                s.node_affinity_policy = InclusionPolicy::Ignore;
                p.topology_spread.push(s);
                p
            })
            .collect()
    };
    let hard = run(&snapshot(make("hard", WhenUnsatisfiable::DoNotSchedule), vec![pool("default")]), &catalog);
    assert_eq!(placed(&hard), 1, "{}", checker::summary(&hard));
    assert_eq!(hard.unschedulable.len(), 2);
    assert!(hard.unschedulable.iter().all(|u| u.reason.contains("topology spread")), "{:?}", hard.unschedulable);
    let soft = run(&snapshot(make("soft", WhenUnsatisfiable::ScheduleAnyway), vec![pool("default")]), &catalog);
    assert_eq!(placed(&soft), 3, "{}", checker::summary(&soft));
    assert!(soft.nodeclaims.iter().all(|c| c.zone == "test-zone-1"));
}

#[test]
fn zonal_self_affinity_keeps_a_group_in_one_zone() {
    let catalog = karpenter();
    let mut p = pool("four-cpu");
    p.requirements.add(Requirement::single(labels::INSTANCE_TYPE, "fake-it-3"));
    let ps: Vec<Pod> = (0..5)
        .map(|i| {
            let mut p = pod(&format!("cache-{i}"), 1500, 1024).with_labels(&[("app", "cache")]);
            p.pod_affinity.push(selector_term(labels::ZONE, ("app", "cache")));
            p
        })
        .collect();
    let snap = snapshot(ps, vec![p]);
    let plan = run(&snap, &catalog);
    assert_eq!(placed(&plan), 5);
    assert_eq!(plan.nodeclaims.len(), 3, "two 1.5-CPU pods per 4-vCPU node");
    let zones: BTreeSet<&str> = plan.nodeclaims.iter().map(|c| c.zone.as_str()).collect();
    assert_eq!(zones.len(), 1, "{}", checker::summary(&plan));
}

#[test]
fn host_port_conflict_forces_two_nodes() {
    let catalog = karpenter();
    let ps: Vec<Pod> = (0..2)
        .map(|i| {
            let mut p = pod(&format!("exporter-{i}"), 100, 64);
            p.host_ports.push(HostPort { port: 9100, protocol: "TCP".into(), ip: String::new() });
            p
        })
        .collect();
    let mut all = ps;
    let mut udp = pod("udp", 100, 64);
    udp.host_ports.push(HostPort { port: 9100, protocol: "UDP".into(), ip: String::new() });
    all.push(udp);
    let snap = snapshot(all, vec![pool("default")]);
    let plan = run(&snap, &catalog);
    assert_eq!(plan.nodeclaims.len(), 2, "{}", checker::summary(&plan));
    assert_ne!(claim_of(&plan, "exporter-0").unwrap().name, claim_of(&plan, "exporter-1").unwrap().name);
}

// ---------------------------------------------------------------------------------------------
// DaemonSets, minValues, explanations, determinism.

#[test]
fn daemonset_overhead_pushes_a_pod_to_a_bigger_type() {
    let catalog = karpenter();
    let mut snap = snapshot(vec![pod("almost-2-cpu", 1900, 1024)], vec![pool("default")]);
    let bare = run(&snap, &catalog);
    assert_eq!(bare.nodeclaims[0].instance_type, "fake-it-1", "fits 2 vCPU as is");
    snap.daemonsets.push(daemonset("agent", 200, 128));
    let with_ds = run(&snap, &catalog);
    assert_eq!(with_ds.nodeclaims[0].instance_type, "fake-it-2", "1.9 + 0.2 CPU needs 3 vCPU");
    assert!(!with_ds.nodeclaims[0].instance_types.contains(&"fake-it-1".to_string()));
}

#[test]
fn daemonsets_that_do_not_run_on_a_pool_cost_nothing_there() {
    let catalog = karpenter();
    let mut snap = snapshot(vec![pod("almost-2-cpu", 1900, 1024)], vec![pool("default")]);
    let mut ds = daemonset("arm-agent", 500, 128);
    ds.pod.node_affinity = vec![reqs(vec![Requirement::single(labels::ARCH, "arm64")])];
    snap.daemonsets.push(ds);
    let mut gpu_only = daemonset("gpu-agent", 500, 128);
    gpu_only.pod.tolerations.clear();
    snap.daemonsets.push(gpu_only);
    snap.nodepools[0].taints.push(Taint::new("team", "a", TaintEffect::NoSchedule));
    snap.pods[0].tolerations.push(tolerate("team"));
    let plan = run(&snap, &catalog);
    assert_eq!(plan.nodeclaims[0].instance_type, "fake-it-1");
}

#[test]
fn min_values_keeps_enough_instance_families() {
    let catalog = catalog::embedded();
    let mut p = pool("flexible");
    p.requirements.add(req(labels::INSTANCE_FAMILY, Operator::Exists, &[] as &[&str]).with_min_values(Some(5)));
    let snap = snapshot(pods("web", 3, 500, 1024), vec![p]);
    let plan = run(&snap, catalog);
    for c in &plan.nodeclaims {
        let families: BTreeSet<&str> = c
            .instance_types
            .iter()
            .filter_map(|t| catalog.get(t)?.requirements.get(labels::INSTANCE_FAMILY)?.single_value())
            .collect();
        assert!(families.len() >= 5, "{}: {families:?}", c.name);
        assert!(c.instance_types.len() <= 60);
    }
}

#[test]
fn min_values_over_sixty_candidates_still_keeps_enough_families() {
    let catalog = catalog::embedded();
    let mut p = pool("flexible");
    p.requirements.add(req(labels::INSTANCE_FAMILY, Operator::Exists, &[] as &[&str]).with_min_values(Some(40)));
    let snap = snapshot(vec![pod("tiny", 100, 128)], vec![p]);
    let plan = run(&snap, catalog);
    let c = &plan.nodeclaims[0];
    assert_eq!(c.instance_types.len(), 60);
}

#[test]
fn a_pod_no_pool_can_take_is_explained_pool_by_pool() {
    let catalog = karpenter();
    let mut tainted = pool("tainted");
    tainted.taints.push(Taint::new("dedicated", "ml", TaintEffect::NoSchedule));
    let mut arm = pool("arm");
    arm.requirements.add(Requirement::single(labels::ARCH, "arm64"));
    let mut small = pool("small");
    small.requirements.add(Requirement::single(labels::INSTANCE_TYPE, "fake-it-0"));
    let mut teams = pool("teams");
    teams.requirements.add(Requirement::single(labels::ZONE, "test-zone-3"));
    let mut p = pod("big", 2000, 1024);
    p.node_affinity = vec![reqs(vec![Requirement::single(labels::ZONE, "test-zone-1")])];
    let snap = snapshot(vec![p], vec![tainted, arm, small, teams]);
    let plan = run(&snap, &catalog);
    let reason = reason_of(&plan, "big").expect("no pool can take it");
    for (pool, why) in [
        ("tainted", "taint dedicated=ml:NoSchedule"),
        ("arm", "no instance type satisfies"),
        ("small", "cpu"),
        ("teams", labels::ZONE),
    ] {
        let part = reason.split("; ").find(|p| p.starts_with(&format!("NodePool \"{pool}\""))).unwrap_or("");
        assert!(part.contains(why), "pool {pool} should be blamed for {why:?}: {reason}");
    }
}

#[test]
fn missing_node_class_is_explained() {
    let catalog = karpenter();
    let snap = snapshot(vec![pod("web", 100, 64)], vec![NodePool::new("orphan", "nope")]);
    let plan = run(&snap, &catalog);
    let reason = reason_of(&plan, "web").unwrap();
    assert!(reason.contains("orphan") && reason.contains("\"nope\" does not exist"), "{reason}");
}

#[test]
fn plans_are_deterministic() {
    let catalog = karpenter();
    let mut ps = benchmark::karpenter_pods(60, benchmark::SEED);
    ps.extend(pods("extra", 5, 700, 900));
    let mut snap = snapshot(ps, vec![pool("a"), pool("b")]);
    snap.daemonsets = benchmark::eks_daemonsets();
    snap.nodes.push(node(&catalog, "node-1", "fake-it-9", "test-zone-2", CapacityType::OnDemand, "a"));
    let first = serde_json::to_string(&schedule(&snap, &catalog)).unwrap();
    let second = serde_json::to_string(&schedule(&snap, &catalog)).unwrap();
    assert_eq!(first, second);
    // The plan reads back from its JSON form (`dovetail plan -o json`). Prices may move in the last
    // bit: serde_json parses floats exactly only with its `float_roundtrip` feature.
    let plan = schedule(&snap, &catalog);
    let back: Plan = serde_json::from_str(&first).unwrap();
    assert_eq!(back.nodeclaims.len(), plan.nodeclaims.len());
    for (a, b) in back.nodeclaims.iter().zip(&plan.nodeclaims) {
        assert_eq!(
            (&a.name, &a.instance_types, &a.pods, &a.requirements),
            (&b.name, &b.instance_types, &b.pods, &b.requirements)
        );
        assert!((a.price_per_hour - b.price_per_hour).abs() <= 1e-12 * b.price_per_hour);
    }
    assert_eq!((back.existing, back.unschedulable), (plan.existing, plan.unschedulable));
}

#[test]
fn karpenter_benchmark_mix_passes_the_checker() {
    // Karpenter's mix, with each spread's own label set to its selector so that only pods carrying
    // a spread match it (the checker judges spreads on the final state; see its notes).
    let catalog = karpenter();
    let mut ps = benchmark::karpenter_pods(100, benchmark::SEED);
    for p in &mut ps {
        if let Some(s) = p.topology_spread.first() {
            let v = s.selector.match_labels["my-label"].clone();
            let key = if s.topology_key == labels::ZONE { "zone-spread" } else { "host-spread" };
            p.labels = [(key.to_string(), v.clone())].into();
            p.topology_spread[0].selector = LabelSelector::from_labels(&[(key, &v)]);
        }
    }
    let mut snap = benchmark::snapshot(ps);
    snap.daemonsets = benchmark::eks_daemonsets();
    let plan = run(&snap, &catalog);
    assert!(plan.unschedulable.is_empty(), "{}", checker::summary(&plan));
}

#[test]
fn real_catalog_generic_pods_pass_the_checker() {
    let catalog = catalog::embedded();
    let snap = benchmark::eks_snapshot(benchmark::generic_pods(40, benchmark::SEED));
    let plan = run(&snap, catalog);
    assert!(plan.unschedulable.is_empty());
    assert!(plan.cost_per_hour >= plan.lower_bound_per_hour);
}

// ---------------------------------------------------------------------------------------------
// Bugs found by the checker. Fixed ones pin the fix; open ones fail with "KNOWN BUG".

/// Fixed: DaemonSet host ports were ignored on new claims, so a pod wanting the same port was
/// planned beside the DaemonSet pod and one of the two could never run.
#[test]
fn bug_daemonset_host_ports_are_taken_on_new_nodes() {
    let catalog = catalog::embedded();
    let mut snap = snapshot(vec![], vec![pool("default")]);
    let mut exporter = daemonset("node-exporter", 50, 64);
    exporter.pod.host_ports.push(HostPort { port: 9100, protocol: "TCP".into(), ip: String::new() });
    exporter.pod.node_affinity = vec![reqs(vec![Requirement::single(labels::ARCH, "amd64")])];
    snap.daemonsets.push(exporter);
    let mut p = pod("wants-9100", 250, 256);
    p.host_ports.push(HostPort { port: 9100, protocol: "TCP".into(), ip: String::new() });
    snap.pods.push(p);
    let plan = run(&snap, catalog);
    // The exporter runs only on amd64: the pod gets an arm64 node, every candidate arm64.
    let c = claim_of(&plan, "wants-9100").expect("placed on arm64");
    assert_eq!(c.labels.get(labels::ARCH).map(String::as_str), Some("arm64"), "{}", checker::summary(&plan));

    // Where the DaemonSet runs on every type, the pod is explained, not planned.
    let karpenter = karpenter();
    snap.daemonsets[0].pod.node_affinity = vec![Requirements::new()];
    let plan = run(&snap, &karpenter);
    let reason = reason_of(&plan, "wants-9100").expect("no type is free of the port");
    assert!(reason.contains("host port"), "{reason}");
}

/// Fixed: a spread's domains were those of the one required term and the preferred terms being
/// tried, not of the pod's required affinity as kube-scheduler counts them (nodeAffinityPolicy
/// Honor): a preferred zone put every replica there, and kube-scheduler then refused all but one.
#[test]
fn bug_zone_spread_counts_zones_a_preference_excludes() {
    let catalog = karpenter();
    let ps: Vec<Pod> = (0..4)
        .map(|i| {
            let mut p = pod(&format!("s-{i}"), 500, 512).with_labels(&[("app", "s")]);
            p.preferred_node_affinity
                .push(Weighted { weight: 10, term: reqs(vec![Requirement::single(labels::ZONE, "test-zone-1")]) });
            p.topology_spread.push(spread(labels::ZONE, 1, WhenUnsatisfiable::DoNotSchedule, ("app", "s")));
            p
        })
        .collect();
    let plan = run(&snapshot(ps, vec![pool("default")]), &catalog);
    let counts = zone_counts(&plan, "s-");
    assert_eq!(counts.get("test-zone-1"), Some(&2), "the preference still wins the spare one: {counts:?}");
    assert_eq!(counts.values().sum::<usize>(), 4);
    assert!(counts.values().all(|&n| n >= 1), "{counts:?}");
}

/// Fixed: the same with ORed required terms, of which the first names one zone.
#[test]
fn bug_zone_spread_counts_the_zones_of_every_required_term() {
    let catalog = karpenter();
    let ps: Vec<Pod> = (0..2)
        .map(|i| {
            let mut p = pod(&format!("s-{i}"), 500, 512).with_labels(&[("app", "s")]);
            p.node_affinity = vec![reqs(vec![Requirement::single(labels::ZONE, "test-zone-1")]), Requirements::new()];
            p.topology_spread.push(spread(labels::ZONE, 1, WhenUnsatisfiable::DoNotSchedule, ("app", "s")));
            p
        })
        .collect();
    let plan = run(&snapshot(ps, vec![pool("default")]), &catalog);
    let counts = zone_counts(&plan, "s-");
    assert_eq!(counts.values().sum::<usize>(), 2);
    assert!(counts.values().all(|&n| n == 1), "one per zone: {counts:?}");
}

/// Fixed: a custom key a pool allows several values of (`team In [a, b]`) was left off the node,
/// so a pod requiring `team Exists` (or `In [a, b]`) was planned where it could not run.
#[test]
fn bug_custom_keys_left_open_get_a_label() {
    let catalog = karpenter();
    let mut p = pool("teams");
    p.requirements.add(req(TEAM, Operator::In, &["a", "b"]));
    let mut any_team = pod("any-team", 500, 256);
    any_team.node_affinity = vec![reqs(vec![req(TEAM, Operator::Exists, &[] as &[&str])])];
    let mut either = pod("either", 500, 256);
    either.node_affinity = vec![reqs(vec![req(TEAM, Operator::In, &["a", "b"])])];
    let plan = run(&snapshot(vec![any_team, either], vec![p]), &catalog);
    for name in ["any-team", "either"] {
        let c = claim_of(&plan, name).unwrap();
        assert_eq!(c.labels.get(TEAM).map(String::as_str), Some("a"), "{name}: {:?}", c.labels);
        assert_eq!(c.requirements.get(TEAM).and_then(|r| r.single_value()), Some("a"));
    }
    // A key the pool does not define stays off the node.
    let mut not_b = pod("not-b", 500, 256);
    not_b.node_affinity = vec![reqs(vec![req(TEAM, Operator::NotIn, &["b"])])];
    let plan = run(&snapshot(vec![not_b], vec![pool("plain")]), &catalog);
    assert!(!plan.nodeclaims[0].labels.contains_key(TEAM));
}

/// Fixed: target types came only from the price frontier, worked out without topology pins or
/// limits; when a zone pin ruled out every frontier type, the pod was reported unschedulable
/// ("no instance type with an offering in zone=…") although dearer types were offered there.
#[test]
fn bug_a_zone_pin_may_need_a_type_off_the_price_frontier() {
    let catalog = fixed_catalog(vec![
        fixed_type("cheap.large", 2, 4, 0.10, Some(0.03), &["zone-a", "zone-b"]),
        fixed_type("dear.large", 2, 4, 0.20, None, &["zone-a", "zone-b", "zone-c"]),
    ]);
    let ps: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = pod(&format!("s-{i}"), 1500, 1024).with_labels(&[("app", "s")]);
            p.topology_spread.push(spread(labels::ZONE, 1, WhenUnsatisfiable::DoNotSchedule, ("app", "s")));
            p
        })
        .collect();
    let plan = run(&snapshot(ps, vec![pool("default")]), &catalog);
    assert!(plan.unschedulable.is_empty(), "{}", checker::summary(&plan));
    let c = plan.nodeclaims.iter().find(|c| c.zone == "zone-c").expect("a claim in zone-c");
    assert_eq!(c.instance_type, "dear.large");
}

/// Fixed: the same with a pool limit that only a dominated (smaller, dearer per unit) type fits.
#[test]
fn bug_a_limit_may_need_a_type_off_the_price_frontier() {
    let catalog = fixed_catalog(vec![
        fixed_type("big.xlarge", 8, 16, 0.20, None, &["zone-a"]),
        fixed_type("small.large", 2, 4, 0.08, None, &["zone-a"]),
    ]);
    let mut p = pool("capped");
    p.limits.insert("cpu".into(), 4000);
    let plan = run(&snapshot(vec![pod("web", 500, 256)], vec![p]), &catalog);
    assert_eq!(
        claim_of(&plan, "web").map(|c| c.instance_type.as_str()),
        Some("small.large"),
        "{}",
        checker::summary(&plan)
    );
}

/// Fixed: minValues was not checked when a claim was opened, and spot was kept even when its
/// types alone could not keep minValues.
#[test]
fn bug_min_values_is_kept_or_explained() {
    // Only one family fits: Karpenter leaves the pod pending.
    let catalog = fixed_catalog(vec![
        fixed_type("m5.large", 2, 8, 0.10, Some(0.04), &["zone-a"]),
        fixed_type("m5.xlarge", 4, 16, 0.20, Some(0.08), &["zone-a"]),
    ]);
    let mut p = pool("flexible");
    p.requirements.add(req(labels::INSTANCE_FAMILY, Operator::Exists, &[] as &[&str]).with_min_values(Some(2)));
    let plan = run(&snapshot(vec![pod("web", 500, 256)], vec![p.clone()]), &catalog);
    let reason = reason_of(&plan, "web").expect("minValues cannot be kept");
    assert!(reason.contains("minValues"), "{reason}");

    // Two families on demand, one on spot: on demand it is.
    let catalog = fixed_catalog(vec![
        fixed_type("m5.large", 2, 8, 0.10, Some(0.04), &["zone-a"]),
        fixed_type("c5.large", 2, 4, 0.09, None, &["zone-a"]),
    ]);
    let plan = run(&snapshot(vec![pod("web", 500, 256)], vec![p]), &catalog);
    let c = claim_of(&plan, "web").unwrap();
    assert_eq!(c.capacity_type, CapacityType::OnDemand, "{}", checker::summary(&plan));
    assert_eq!(c.instance_types.len(), 2);
}

/// Karpenter's `--min-values-policy BestEffort`: a pod whose pool cannot keep `minValues` is
/// launched for with the values there are, where `Strict` leaves it pending; where enough values
/// exist, both keep them.
#[test]
fn min_values_best_effort_launches_with_the_values_there_are() {
    let one_family = fixed_catalog(vec![
        fixed_type("m5.large", 2, 8, 0.10, Some(0.04), &["zone-a"]),
        fixed_type("m5.xlarge", 4, 16, 0.20, Some(0.08), &["zone-a"]),
    ]);
    let mut p = pool("flexible");
    p.requirements.add(req(labels::INSTANCE_FAMILY, Operator::Exists, &[] as &[&str]).with_min_values(Some(2)));
    let mut snap = snapshot(vec![pod("web", 500, 256)], vec![p]);
    assert!(reason_of(&run(&snap, &one_family), "web").is_some_and(|r| r.contains("minValues")));
    snap.min_values_policy = MinValuesPolicy::BestEffort;
    let plan = run(&snap, &one_family);
    let c = claim_of(&plan, "web").unwrap_or_else(|| panic!("launched for: {}", checker::summary(&plan)));
    assert_eq!(c.instance_types, ["m5.large", "m5.xlarge"]);

    // Five families: both policies keep the five.
    let catalog = catalog::embedded();
    snap.nodepools[0]
        .requirements
        .add(req(labels::INSTANCE_FAMILY, Operator::Exists, &[] as &[&str]).with_min_values(Some(5)));
    for policy in [MinValuesPolicy::Strict, MinValuesPolicy::BestEffort] {
        snap.min_values_policy = policy;
        let plan = run(&snap, catalog);
        let c = claim_of(&plan, "web").unwrap();
        let families: BTreeSet<&str> = c
            .instance_types
            .iter()
            .filter_map(|t| catalog.get(t)?.requirements.get(labels::INSTANCE_FAMILY)?.single_value())
            .collect();
        assert!(families.len() >= 5, "{policy:?}: {families:?}");
    }
}

/// Fixed: the relaxation ladder gave up the first required node-affinity term before any
/// preference, so a pod whose first term works only without its preferences, and whose second
/// term cannot work at all, was left pending.
#[test]
fn bug_required_terms_are_retried_with_preferences_relaxed() {
    let catalog = karpenter();
    let mut p = pod("picky", 500, 256);
    p.node_affinity = vec![Requirements::new(), reqs(vec![Requirement::single(TEAM, "a")])];
    p.preferred_node_affinity
        .push(Weighted { weight: 1, term: reqs(vec![Requirement::single(labels::ZONE, "mars-1a")]) });
    let plan = run(&snapshot(vec![p], vec![pool("default")]), &catalog);
    assert!(claim_of(&plan, "picky").is_some(), "{}", checker::summary(&plan));
}

/// Regression (was open when found): a well-known label an instance type does not define (gpu name, hypervisor, local NVMe,
/// …) is treated as compatible with any requirement on it: `Requirements::intersects` skips keys
/// one side lacks and the catalog does not record absent labels as `DoesNotExist` (Karpenter's
/// provider does). A pod requiring `instance-gpu-name In [a10g]` is planned on the cheapest type
/// of all (t3a.small spot), and the claim even reports the label `instance-gpu-name=a10g`.
/// The fix belongs in the catalog (or `requirements`), outside the scheduler.
#[test]
fn bug_absent_well_known_labels_are_not_wildcards() {
    let catalog = catalog::embedded();
    let mut p = pod("needs-a10g", 500, 1024);
    p.node_affinity = vec![reqs(vec![Requirement::single(labels::INSTANCE_GPU_NAME, "a10g")])];
    let snap = snapshot(vec![p], vec![pool("default")]);
    let plan = schedule(&snap, catalog);
    let c = claim_of(&plan, "needs-a10g").expect("g5 types exist");
    for t in &c.instance_types {
        let gpu = catalog.get(t).unwrap().requirements.get(labels::INSTANCE_GPU_NAME).and_then(|r| r.single_value());
        assert_eq!(gpu, Some("a10g"), "{t} has no a10g GPU (claim {} type {})", c.name, c.instance_type);
    }
    checker::assert_valid(&snap, catalog, &plan);
}

/// Regression (was open when found): a spread counts matching pods on nodes its pod's node affinity excludes. Kube-scheduler
/// (nodeAffinityPolicy Honor) and Karpenter (its topology node filter) count only pods on nodes
/// the pod could use. Here an arm64 node in zone a runs a matching pod; the amd64-only replicas
/// count it, see zone a as ahead and crowd zones b and c (3 + 2 + 0 with maxSkew 2 is fine when
/// zone a counts 1, but kube-scheduler counts 0 there and refuses the third pod in zone b).
#[test]
fn bug_spread_counts_only_pods_on_nodes_the_pod_could_use() {
    let catalog = fixed_catalog(vec![
        fixed_type("x86.large", 2, 4, 0.10, None, &["zone-a", "zone-b", "zone-c"]),
        arm64(fixed_type("arm.large", 2, 4, 0.08, None, &["zone-a"])),
    ]);
    let mut arm = node(&catalog, "arm-1", "arm.large", "zone-a", CapacityType::OnDemand, "default");
    arm.pods.push(pod("old", 100, 64).with_labels(&[("app", "s")]).into());
    let ps: Vec<Pod> = (0..5)
        .map(|i| {
            let mut p = pod(&format!("s-{i}"), 100, 64).with_labels(&[("app", "s")]);
            p.node_affinity = vec![reqs(vec![Requirement::single(labels::ARCH, "amd64")])];
            p.topology_spread.push(spread(labels::ZONE, 2, WhenUnsatisfiable::DoNotSchedule, ("app", "s")));
            p
        })
        .collect();
    let mut snap = snapshot(ps, vec![pool("default")]);
    snap.nodes.push(arm);
    let plan = schedule(&snap, &catalog);
    let errors = checker::check(&snap, &catalog, &plan);
    assert!(errors.is_empty(), "{errors:#?}\n{}", checker::summary(&plan));
}

/// Regression (was open when found): a hostname self-affinity group is split when its first pod's claim is sized for that
/// pod (the target type) and then filled with unconstrained pods: the rest of the group no longer
/// fits and, bound to that one node, stays pending — although the group fits one node together.
#[test]
fn bug_hostname_affinity_group_stays_together() {
    let catalog = fixed_catalog(vec![
        fixed_type("small.large", 1, 2, 0.03, None, &["zone-a"]),
        fixed_type("big.xlarge", 4, 8, 0.20, None, &["zone-a"]),
    ]);
    let mut ps: Vec<Pod> = (0..4)
        .map(|i| {
            let mut p = pod(&format!("aff-{i}"), 300, 256).with_labels(&[("app", "aff")]);
            p.pod_affinity.push(selector_term(labels::HOSTNAME, ("app", "aff")));
            p
        })
        .collect();
    ps.extend(pods("filler", 3, 200, 128));
    let snap = snapshot(ps, vec![pool("default")]);
    let plan = schedule(&snap, &catalog);
    checker::assert_valid(&snap, &catalog, &plan);
    assert!(
        plan.unschedulable.is_empty(),
        "pods left pending although the group fits one node together:\n{}",
        checker::summary(&plan)
    );
}

/// Regression (was open when found): when a claim's candidates are cut by the pool's limits in the final pass (each earlier
/// claim holds its largest candidate against the limit), minValues can fall short of what the pool
/// asks although every pod was admitted with enough families.
#[test]
fn bug_min_values_survives_limits() {
    let catalog = fixed_catalog(vec![
        fixed_type("c5.large", 1, 2, 0.03, None, &["zone-a"]),
        fixed_type("m5.xlarge", 8, 16, 0.30, None, &["zone-a"]),
        fixed_type("r5.large", 1, 8, 0.05, None, &["zone-a"]),
    ]);
    let mut p = pool("flexible");
    p.requirements.add(req(labels::INSTANCE_FAMILY, Operator::Exists, &[] as &[&str]).with_min_values(Some(3)));
    p.limits.insert("cpu".into(), 12_000);
    // Host ports keep the two pods on separate claims.
    let ps: Vec<Pod> = (0..2)
        .map(|i| {
            let mut p = pod(&format!("web-{i}"), 500, 512);
            p.host_ports.push(HostPort { port: 8080, protocol: "TCP".into(), ip: String::new() });
            p
        })
        .collect();
    let snap = snapshot(ps, vec![p]);
    let plan = schedule(&snap, &catalog);
    let errors = checker::check(&snap, &catalog, &plan);
    assert!(errors.is_empty(), "{errors:#?}\n{}", checker::summary(&plan));
}

/// Regression (was open when found): the reason for a pod whose node requirements no pool can meet, when it also matches a
/// spread selector (its own ScheduleAnyway spread), blames "pod anti-affinity" — which it does
/// not have — instead of the requirement: a topology key with no possible domain falls through
/// to the anti-affinity wording, and only the last rung's reason is kept.
#[test]
fn bug_unschedulable_reason_names_the_real_constraint() {
    let catalog = karpenter();
    let mut p = pod("lost", 500, 256).with_labels(&[("app", "lost")]);
    p.node_affinity = vec![reqs(vec![Requirement::single(TEAM, "a")])];
    p.topology_spread.push(spread(labels::ZONE, 1, WhenUnsatisfiable::ScheduleAnyway, ("app", "lost")));
    let plan = run(&snapshot(vec![p], vec![pool("default")]), &catalog);
    let reason = reason_of(&plan, "lost").expect("no pool defines the team label");
    assert!(reason.contains(TEAM) && !reason.contains("anti-affinity"), "the reason should name {TEAM}, got: {reason}");
}

/// OPEN (also `nodepool_selector_picks_the_pool`, ignored, in cli/tests/plan_golden.rs): a pod
/// selecting a pool by `karpenter.sh/nodepool` / `dovetail.dev/nodepool` is planned in whichever
/// pool comes first, since no pool states its own name as a requirement; the node then carries
/// the other pool's name and the pod cannot run there. The checker catches it.
#[test]
fn bug_nodepool_selector_picks_the_pool() {
    let catalog = karpenter();
    let mut first = pool("first");
    first.weight = 10;
    let mut p = pod("wants-second", 500, 256);
    p.node_affinity = vec![reqs(vec![Requirement::single("karpenter.sh/nodepool", "second")])];
    let snap = snapshot(vec![p], vec![first, pool("second")]);
    let plan = schedule(&snap, &catalog);
    let errors = checker::check(&snap, &catalog, &plan);
    assert!(errors.is_empty(), "{errors:#?}\n{}", checker::summary(&plan));
    assert_eq!(claim_of(&plan, "wants-second").map(|c| c.nodepool.as_str()), Some("second"));
}

/// Repacking mixes types: four 2-vCPU pods fill the 8-vCPU type exactly, and the three 4 GiB
/// pods go on two small memory nodes; a second 8-vCPU node (what one type for all, or merging
/// whole claims, gives) costs more. Found by `tests/exact_optimum.rs`.
#[test]
fn repacking_mixes_types_when_that_is_cheaper() {
    let catalog = fixed_catalog(vec![
        fixed_type("mem.small", 1, 8, 0.03, Some(0.009), &["zone-a"]),
        fixed_type("cpu.large", 8, 16, 0.24, Some(0.072), &["zone-a"]),
    ]);
    let mut all = pods("memory", 3, 250, 4096);
    all.extend(pods("compute", 4, 2000, 256));
    let plan = run(&snapshot(all, vec![pool("default")]), &catalog);
    assert_eq!(placed(&plan), 7);
    assert!((plan.cost_per_hour - (0.072 + 2.0 * 0.009)).abs() < 1e-9, "{}", checker::summary(&plan));
}

/// Repacking splits a claim when smaller nodes hold its pods for less: three 2-vCPU 4 GiB nodes,
/// one pod each, cost less than the one 8-vCPU node that holds all three.
#[test]
fn repacking_splits_a_claim_when_smaller_nodes_cost_less() {
    let catalog = fixed_catalog(vec![
        fixed_type("small.large", 2, 4, 0.068, Some(0.02312), &["zone-a"]),
        fixed_type("big.2xlarge", 8, 32, 0.272, Some(0.08976), &["zone-a"]),
    ]);
    let mut all = pods("memory", 2, 250, 4096);
    all.extend(pods("compute", 1, 1500, 256));
    let plan = run(&snapshot(all, vec![pool("default")]), &catalog);
    assert_eq!(placed(&plan), 3);
    assert!((plan.cost_per_hour - 3.0 * 0.02312).abs() < 1e-9, "{}", checker::summary(&plan));
}

/// Pods of the heavier pool ride on a node of another pool when that holds them for less: the
/// two 1-vCPU pods open a node in the heavier pool (its type holds them), the 6 GiB pod one in
/// the other pool (only its type holds it) with room for both; the plan keeps only the second.
/// Found by `tests/exact_optimum.rs`.
#[test]
fn pods_ride_on_another_pools_claim_when_that_is_cheaper() {
    let catalog = fixed_catalog(vec![
        fixed_type("heavy.large", 2, 4, 0.072, None, &["zone-a"]),
        fixed_type("light.xlarge", 4, 8, 0.196, Some(0.0921), &["zone-a"]),
    ]);
    let mut preferred = pool("preferred");
    preferred.weight = 2;
    preferred.requirements.add(req(labels::INSTANCE_FAMILY, Operator::In, &["heavy"]));
    let mut general = pool("general");
    general.requirements.add(req(labels::INSTANCE_FAMILY, Operator::In, &["light"]));
    let mut all = pods("small", 2, 1000, 1024);
    all.push(pod("memory", 500, 6144));
    let plan = run(&snapshot(all.clone(), vec![preferred.clone(), general.clone()]), &catalog);
    assert_eq!(placed(&plan), 3);
    assert_eq!(plan.nodeclaims.len(), 1, "{}", checker::summary(&plan));
    assert_eq!(plan.nodeclaims[0].nodepool, "general");
    assert!((plan.cost_per_hour - 0.0921).abs() < 1e-9, "{}", checker::summary(&plan));

    // Not onto a node whose taint the pods do not tolerate.
    general.taints.push(Taint::new("dedicated", "memory", TaintEffect::NoSchedule));
    all[2].tolerations.push(tolerate("dedicated"));
    let plan = run(&snapshot(all, vec![preferred, general]), &catalog);
    assert_eq!(placed(&plan), 3);
    assert_eq!(
        claim_of(&plan, "small-0").map(|c| c.nodepool.as_str()),
        Some("preferred"),
        "{}",
        checker::summary(&plan)
    );
}

/// Repacking never opens a node in a pool for pods only whose home is a heavier pool: the small
/// pods' home is `preferred` (its type holds them); they may ride on `general`'s node, but a
/// `general` node of small pods alone (cheaper than the `preferred` one) goes against the weights.
/// Found by `tests/exact_optimum.rs` (the plan came out cheaper than the optimum).
#[test]
fn repacking_keeps_a_pod_at_home_on_every_node() {
    let catalog = fixed_catalog(vec![
        fixed_type("small.medium", 1, 2, 0.03, Some(0.009), &["zone-a"]),
        fixed_type("big.2xlarge", 8, 32, 0.24, Some(0.072), &["zone-a"]),
    ]);
    let mut preferred = pool("preferred");
    preferred.weight = 1;
    preferred.requirements.add(req(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]));
    preferred.requirements.add(req(labels::INSTANCE_FAMILY, Operator::In, &["small"]));
    let mut general = pool("general");
    general.requirements.add(req(labels::CAPACITY_TYPE, Operator::In, &["spot"]));
    let mut all = pods("compute", 5, 1500, 256);
    all.extend(pods("small", 3, 250, 2048));
    let plan = run(&snapshot(all, vec![preferred, general]), &catalog);
    assert_eq!(placed(&plan), 8);
    for c in plan.nodeclaims.iter().filter(|c| c.nodepool == "general") {
        assert!(c.pods.iter().any(|p| p.contains("compute")), "{}", checker::summary(&plan));
    }
}
