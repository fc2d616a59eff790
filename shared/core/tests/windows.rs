//! Windows classes in the scheduler: the OS of a pool's class decides which pods its nodes take,
//! which DaemonSets run on them, what they are labelled and what they cost. Every plan also goes
//! through the independent checker in `checker/`.

mod checker;
mod synthetic;

use dovetail_core::catalog::{self, CapacityType, Catalog};
use dovetail_core::labels;
use dovetail_core::model::{DaemonSet, KubeletConfig, NodeClass, NodeOs, NodePool, OwnerKind, Pod};
use dovetail_core::requirements::{Operator, Requirement};
use dovetail_core::resources::Resources;
use dovetail_core::scheduler::{schedule, Plan, PlannedClaim};
use dovetail_core::snapshot::Snapshot;

use synthetic::{daemonset, req, reqs};

const MIB: i64 = 1 << 20;

fn class(name: &str, os: NodeOs) -> NodeClass {
    NodeClass { name: name.into(), kubelet: KubeletConfig { os, ..KubeletConfig::default() }, ..NodeClass::default() }
}

/// A pool of class `class` (named as the pool) allowing `types`, on demand only (so the price
/// compared is the on-demand one).
fn pool(name: &str, types: &[&str]) -> NodePool {
    let mut p = NodePool::new(name, name);
    p.requirements.add(req(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]));
    if !types.is_empty() {
        p.requirements.add(req(labels::INSTANCE_TYPE, Operator::In, types));
    }
    p
}

/// A pod selecting `os` with a nodeSelector, as Windows workloads must.
fn pod(name: &str, os: &str, cpu_m: i64, mem_mi: i64) -> Pod {
    let mut p = Pod::new("default", name, Resources::new(cpu_m, mem_mi * MIB));
    p.owner = OwnerKind::ReplicaSet;
    p.node_affinity = vec![reqs(vec![Requirement::single(labels::OS, os)])];
    p
}

/// A node agent that runs on nodes of `os` only (its pods select it, as EKS's own agents do).
fn agent(name: &str, os: &str, cpu_m: i64) -> DaemonSet {
    let mut ds = daemonset(name, cpu_m, 64);
    ds.pod.node_affinity = vec![reqs(vec![Requirement::single(labels::OS, os)])];
    ds
}

fn snapshot(pods: Vec<Pod>, pools: Vec<NodePool>) -> Snapshot {
    let classes = pools
        .iter()
        .map(|p| class(&p.name, if p.name.starts_with("windows") { NodeOs::Windows2022 } else { NodeOs::Linux }))
        .collect();
    Snapshot { pods, nodepools: pools, nodeclasses: classes, ..Default::default() }
}

fn run(snap: &Snapshot, catalog: &Catalog) -> Plan {
    let plan = schedule(snap, catalog);
    checker::assert_valid(snap, catalog, &plan);
    plan
}

fn claim_of<'a>(plan: &'a Plan, pod: &str) -> &'a PlannedClaim {
    let key = format!("default/{pod}");
    plan.nodeclaims.iter().find(|c| c.pods.contains(&key)).unwrap_or_else(|| panic!("{pod} has no claim: {plan:?}"))
}

/// The catalog's (Linux) on-demand price of a type in a zone.
fn linux_price(catalog: &Catalog, t: &str, zone: &str) -> f64 {
    let t = catalog.get(t).unwrap();
    t.offerings.iter().find(|o| o.zone == zone && o.capacity_type == CapacityType::OnDemand).unwrap().price
}

#[test]
fn windows_pods_go_to_the_windows_pool_and_linux_pods_to_the_linux_one() {
    let catalog = catalog::embedded();
    let snap = snapshot(
        vec![pod("iis", "windows", 500, 1024), pod("nginx", "linux", 500, 1024)],
        vec![pool("linux", &[]), pool("windows", &[])],
    );
    let plan = run(&snap, catalog);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);

    let win = claim_of(&plan, "iis");
    assert_eq!(win.nodepool, "windows");
    assert_eq!(win.labels[labels::OS], "windows");
    assert_eq!(win.labels[labels::WINDOWS_BUILD], "10.0.20348");
    assert_eq!(win.labels[labels::ARCH], "amd64");
    for t in &win.instance_types {
        let arch = catalog.get(t).unwrap().requirements.get(labels::ARCH).unwrap();
        assert!(arch.has("amd64"), "{t} is not amd64: Windows images are amd64 only");
    }
    // Priced with the licence: the Linux price plus 0.046 $/h per vCPU.
    let vcpus: f64 = win.labels[labels::INSTANCE_CPU].parse().unwrap();
    let want = linux_price(catalog, &win.instance_type, &win.zone) + vcpus * 0.046;
    assert!((win.price_per_hour - want).abs() < 1e-9, "{} != {want}", win.price_per_hour);

    let lin = claim_of(&plan, "nginx");
    assert_eq!(lin.nodepool, "linux");
    assert_eq!(lin.labels[labels::OS], "linux");
    assert!(!lin.labels.contains_key(labels::WINDOWS_BUILD));
    assert!((lin.price_per_hour - linux_price(catalog, &lin.instance_type, &lin.zone)).abs() < 1e-12);
}

#[test]
fn a_pool_of_the_other_os_takes_nothing() {
    let catalog = catalog::embedded();
    let only_linux = snapshot(vec![pod("iis", "windows", 500, 1024)], vec![pool("linux", &[])]);
    let plan = run(&only_linux, catalog);
    assert!(plan.nodeclaims.is_empty(), "a Linux pool must not launch for a Windows pod");
    assert_eq!(plan.unschedulable.len(), 1);

    let only_windows = snapshot(vec![pod("nginx", "linux", 500, 1024)], vec![pool("windows", &[])]);
    let plan = run(&only_windows, catalog);
    assert!(plan.nodeclaims.is_empty(), "a Windows pool must not launch for a Linux pod");
    assert_eq!(plan.unschedulable.len(), 1);

    // A pod that names a build must match the class's release.
    let mut old = pod("legacy", "windows", 500, 1024);
    old.node_affinity[0].add(Requirement::single(labels::WINDOWS_BUILD, "10.0.17763"));
    let plan = run(&snapshot(vec![old], vec![pool("windows", &[])]), catalog);
    assert!(plan.nodeclaims.is_empty(), "Windows Server 2022 nodes are not build 10.0.17763");
}

#[test]
fn windows_never_gets_an_arm64_type() {
    let catalog = catalog::embedded();
    let mut win = pool("windows", &[]);
    win.requirements.add(req(labels::ARCH, Operator::In, &["arm64"]));
    let plan = run(&snapshot(vec![pod("iis", "windows", 500, 1024)], vec![win]), catalog);
    assert!(plan.nodeclaims.is_empty());
    assert_eq!(plan.unschedulable.len(), 1, "{plan:?}");
}

/// m5.large has 1930m allocatable on either OS: a 1800m pod fits unless a 500m DaemonSet runs
/// beside it, and then it needs m5.xlarge. Only the DaemonSets of the pool's OS count.
#[test]
fn only_daemonsets_of_the_nodes_os_count_as_overhead() {
    let catalog = catalog::embedded();
    let types = ["m5.large", "m5.xlarge"];
    for (os, pool_name) in [("windows", "windows"), ("linux", "linux")] {
        let other = if os == "windows" { "linux" } else { "windows" };
        let mut snap = snapshot(vec![pod("app", os, 1800, 1024)], vec![pool(pool_name, &types)]);
        snap.daemonsets.push(agent(&format!("{other}-agent"), other, 500));
        let plan = run(&snap, catalog);
        assert_eq!(claim_of(&plan, "app").instance_type, "m5.large", "{other} DaemonSet counted on {os} nodes");

        snap.daemonsets.push(agent(&format!("{os}-agent"), os, 500));
        let plan = run(&snap, catalog);
        assert_eq!(claim_of(&plan, "app").instance_type, "m5.xlarge", "{os} DaemonSet not counted on {os} nodes");
    }
}

/// The licence is per vCPU, so it can turn the choice: z1d.large (2 vCPU, $0.186) costs more than
/// m5a.xlarge (4 vCPU, $0.172) on Linux, less on Windows ($0.278 against $0.356). Both hold the pod.
#[test]
fn the_licence_favours_fewer_vcpus() {
    let catalog = catalog::embedded();
    let types = ["m5a.xlarge", "z1d.large"];
    let linux = run(&snapshot(vec![pod("app", "linux", 1000, 8192)], vec![pool("linux", &types)]), catalog);
    let claim = claim_of(&linux, "app");
    assert_eq!(claim.instance_type, "m5a.xlarge");
    assert!((claim.price_per_hour - 0.172).abs() < 1e-9, "{}", claim.price_per_hour);

    let windows = run(&snapshot(vec![pod("app", "windows", 1000, 8192)], vec![pool("windows", &types)]), catalog);
    let claim = claim_of(&windows, "app");
    assert_eq!(claim.instance_type, "z1d.large");
    assert!((claim.price_per_hour - (0.186 + 2.0 * 0.046)).abs() < 1e-9, "{}", claim.price_per_hour);
    assert!((windows.cost_per_hour - claim.price_per_hour).abs() < 1e-12);
    assert_eq!(claim.instance_types, vec!["z1d.large".to_string(), "m5a.xlarge".to_string()], "cheapest first");
}

/// A Windows node's allocatable is Windows's: 110 pods on m5.large (29 on Linux), less memory.
#[test]
fn windows_claims_report_windows_allocatable() {
    let catalog = catalog::embedded();
    let plan = run(&snapshot(vec![pod("iis", "windows", 500, 1024)], vec![pool("windows", &["m5.large"])]), catalog);
    let claim = claim_of(&plan, "iis");
    assert_eq!(claim.allocatable["pods"], "110");
    assert_eq!(claim.allocatable["vpc.amazonaws.com/PrivateIPv4Address"], "9");
}
