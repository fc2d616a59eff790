//! Consolidation scenarios (every method, every protection, ordering, budgets) and properties: no
//! flapping (the next provisioning pass launches nothing for the moved pods) and no decision that
//! breaks a PDB, a budget or do-not-disrupt.

use dovetail_core::benchmark;
use dovetail_core::catalog::{embedded, CapacityType, Reservation, ReservationKind};
use dovetail_core::cluster::{Cluster, ResolvedClass};
use dovetail_core::decision::{Action, Decision};
use dovetail_core::disruption::consolidation::{after, consolidate, consolidate_with, Options};
use dovetail_core::events::{DISRUPTION_BLOCKED, UNCONSOLIDATABLE};
use dovetail_core::labels;
use dovetail_core::model::{ConsolidationPolicy, LabelSelector, Node, NodeOs, OwnerKind, Pdb, Pod};
use dovetail_core::nodeclaim::{Launch, NodeClaim, Phase, Reason};
use dovetail_core::requirements::{Operator, Requirement, Requirements};
use dovetail_core::resources::Resources;
use dovetail_core::scheduler::{schedule, PlannedClaim};
use dovetail_core::time::Time;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const NOW: i64 = 1_750_000_000;

fn cluster() -> Cluster {
    let (mut pool, class) = benchmark::default_pool();
    pool.requirements = benchmark::general_purpose_pool().requirements;
    Cluster {
        now: Time::from_secs(NOW),
        nodepools: vec![pool],
        nodeclasses: vec![class],
        daemonsets: benchmark::eks_daemonsets(),
        ..Default::default()
    }
}

/// A node of a real type (with its DaemonSet pods) and its initialized claim, idle for an hour.
fn add_node(c: &mut Cluster, name: &str, itype: &str, ct: CapacityType) {
    let catalog = embedded();
    let t = catalog.get(itype).expect("type");
    let offer = t.offerings.iter().find(|o| o.capacity_type == ct).expect("offering");
    let mut l: BTreeMap<String, String> = t.requirements.single_valued_labels();
    l.insert(labels::ZONE.into(), offer.zone.clone());
    l.insert(labels::CAPACITY_TYPE.into(), ct.as_str().into());
    l.insert(labels::NODEPOOL.into(), "default".into());
    l.insert(labels::HOSTNAME.into(), name.into());
    let mut node = Node::new(name, l, t.allocatable(&Default::default()));
    node.price = Some(offer.price);
    for ds in &c.daemonsets {
        let mut p = ds.pod.clone();
        p.name = format!("{}-{name}", ds.name);
        node.pods.push(p.into());
    }
    let created = Time::from_secs(NOW - 86_400);
    let mut claim = NodeClaim::launching(name, "default", "default", created);
    claim.phase = Phase::Initialized;
    claim.node_name = Some(name.into());
    claim.initialized_at = Some(created);
    claim.last_pod_event = Some(Time::from_secs(NOW - 3_600));
    claim.expire_after = Some(Duration::from_secs(720 * 3600));
    claim.launch = Some(Launch {
        instance_id: format!("i-{name}"),
        instance_type: itype.into(),
        zone: offer.zone.clone(),
        capacity_type: ct,
        image_id: String::new(),
        subnet_id: String::new(),
        security_groups: vec![],
        price: offer.price,
        launched_at: created,
    });
    c.nodes.push(node);
    c.claims.push(claim);
}

fn pod(name: &str, cpu: i64, mem_mi: i64) -> Pod {
    let mut p = Pod::new("shop", name, Resources::new(cpu, mem_mi << 20));
    p.owner = OwnerKind::ReplicaSet;
    p.labels.insert("app".into(), name.split('-').next().unwrap_or(name).into());
    p
}

fn put(c: &mut Cluster, node: &str, p: Pod) {
    let n = c.nodes.iter_mut().find(|n| n.name == node).expect("node");
    let mut p = p;
    p.node_name = Some(node.into());
    n.pods.push(p.into());
}

fn unlimited(_: &str, _: Reason) -> usize {
    usize::MAX
}

fn disrupted(ds: &[Decision]) -> Vec<(String, Reason)> {
    ds.iter()
        .filter_map(|d| match &d.action {
            Some(Action::WriteClaim(c)) => c.disruption.as_ref().map(|x| (c.name.clone(), x.reason)),
            _ => None,
        })
        .collect()
}

fn launches(ds: &[Decision]) -> usize {
    ds.iter().filter(|d| matches!(d.action, Some(Action::Launch(_)))).count()
}

fn notes(ds: &[Decision]) -> Vec<String> {
    ds.iter().filter(|d| d.action.is_none()).map(|d| d.why.clone()).collect()
}

/// The Events of this reason: (object, message).
fn events(ds: &[Decision], reason: &str) -> Vec<(String, String)> {
    ds.iter()
        .filter_map(|d| match &d.action {
            Some(Action::Event { object, reason: r, message }) if r == reason => {
                Some((object.clone(), message.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The next provisioning pass over the post-consolidation cluster launches nothing.
fn assert_no_flap(c: &Cluster, ds: &[Decision]) {
    let snap = after(c, ds);
    let plan = schedule(&snap, embedded());
    assert!(plan.nodeclaims.is_empty(), "next pass launches {:?} for {:?}", plan.nodeclaims, ds);
    assert!(plan.unschedulable.is_empty(), "next pass cannot place {:?}", plan.unschedulable);
}

#[test]
fn empty_node_is_deleted_after_consolidate_after() {
    let mut c = cluster();
    add_node(&mut c, "a", "m5.xlarge", CapacityType::OnDemand);
    add_node(&mut c, "b", "m5.xlarge", CapacityType::OnDemand);
    put(&mut c, "a", pod("web-1", 500, 512));
    let ds = consolidate(&c, embedded(), &unlimited);
    assert_eq!(disrupted(&ds)[0], ("b".to_string(), Reason::Empty), "{ds:?}");
    assert!(ds.iter().any(|d| d.why.contains("deleting empty node b")));
    // Idle for less than consolidateAfter: not yet.
    c.nodepools[0].disruption.consolidate_after = Some(Duration::from_secs(7_200));
    assert!(disrupted(&consolidate(&c, embedded(), &unlimited)).is_empty());
    // Never.
    c.nodepools[0].disruption.consolidate_after = None;
    assert!(disrupted(&consolidate(&c, embedded(), &unlimited)).is_empty());
}

#[test]
fn a_pod_that_left_a_minute_ago_keeps_the_node_for_consolidate_after() {
    let mut c = cluster();
    c.nodepools[0].disruption.consolidate_after = Some(Duration::from_secs(300));
    // Only empty nodes go: a keeps its pod, b is the one in question.
    c.nodepools[0].disruption.consolidation_policy = ConsolidationPolicy::WhenEmpty;
    add_node(&mut c, "a", "m5.xlarge", CapacityType::OnDemand);
    add_node(&mut c, "b", "m5.xlarge", CapacityType::OnDemand);
    put(&mut c, "a", pod("web-1", 500, 512));
    // The claim's stored event is an hour old, but the watch saw b's last pod go a minute ago.
    let left = Time::from_secs(NOW - 60);
    c.nodes[1].last_pod_event = Some(left);
    assert_eq!(c.claims[1].idle_since(Some(&c.nodes[1])), left);
    let ds = consolidate(&c, embedded(), &unlimited);
    assert!(disrupted(&ds).is_empty(), "{ds:?}");
    // Five minutes after the pod left, b is consolidated, and says how long it was idle.
    c.now = left.plus(Duration::from_secs(300));
    let ds = consolidate(&c, embedded(), &unlimited);
    assert_eq!(disrupted(&ds), vec![("b".to_string(), Reason::Empty)], "{ds:?}");
    assert!(ds.iter().any(|d| d.why.contains("only DaemonSet pods for 5m")), "{ds:?}");
    // Whichever of the claim and the node knows the later event wins.
    c.nodes[1].last_pod_event = None;
    c.claims[1].last_pod_event = Some(left.plus(Duration::from_secs(60)));
    assert!(disrupted(&consolidate(&c, embedded(), &unlimited)).is_empty());
}

#[test]
fn when_empty_pools_only_lose_empty_nodes() {
    let mut c = cluster();
    c.nodepools[0].disruption.consolidation_policy = ConsolidationPolicy::WhenEmpty;
    for n in ["a", "b", "c"] {
        add_node(&mut c, n, "m5.xlarge", CapacityType::OnDemand);
    }
    put(&mut c, "a", pod("web-1", 500, 512));
    put(&mut c, "b", pod("web-2", 500, 512));
    let ds = consolidate(&c, embedded(), &unlimited);
    assert_eq!(disrupted(&ds), vec![("c".to_string(), Reason::Empty)]);
}

#[test]
fn single_node_delete_when_pods_fit_elsewhere() {
    let mut c = cluster();
    add_node(&mut c, "a", "m5.2xlarge", CapacityType::OnDemand);
    add_node(&mut c, "b", "m5.2xlarge", CapacityType::OnDemand);
    put(&mut c, "a", pod("web-1", 3000, 4096));
    put(&mut c, "a", pod("web-2", 2000, 4096));
    put(&mut c, "b", pod("api-1", 500, 512));
    // Multi-node off: with it, a and b merge into one cheaper spot node (see the multi-node test).
    let single = Options { max_multi_nodes: 1, ..Options::default() };
    let ds = consolidate_with(&c, embedded(), &unlimited, &single);
    assert_eq!(disrupted(&ds), vec![("b".to_string(), Reason::Underutilized)], "{ds:?}");
    assert_eq!(launches(&ds), 0);
    assert!(ds.iter().any(|d| d.why.contains("1 pods fit on 1 other nodes")));
    assert_no_flap(&c, &ds);
}

#[test]
fn single_node_replace_with_a_cheaper_node() {
    let mut c = cluster();
    add_node(&mut c, "big", "m5.4xlarge", CapacityType::OnDemand);
    put(&mut c, "big", pod("web-1", 1000, 1024));
    let ds = consolidate(&c, embedded(), &unlimited);
    assert_eq!(launches(&ds), 1, "{ds:?}");
    let first = ds.iter().position(|d| matches!(d.action, Some(Action::Launch(_)))).unwrap();
    let write = ds.iter().position(|d| matches!(d.action, Some(Action::WriteClaim(_)))).unwrap();
    assert!(first < write, "launch first, then drain");
    let Some(Action::WriteClaim(claim)) = &ds[write].action else { unreachable!() };
    let d = claim.disruption.as_ref().unwrap();
    assert_eq!(d.reason, Reason::Underutilized);
    assert_eq!(d.replacements.len(), 1);
    assert!(d.message.starts_with("replaced big (m5.4xlarge on-demand) by "), "{}", d.message);
    assert!(d.message.contains("saving $"));
    assert_no_flap(&c, &ds);
}

/// A Windows class's node is priced, and replaced, as Windows: the replacement is a Windows node
/// of the class's build (amd64), priced and compared at Windows prices (the Linux price plus
/// 0.046 $/h per vCPU), not the Linux ones.
#[test]
fn a_windows_node_is_replaced_by_a_cheaper_windows_node() {
    let mut c = cluster();
    c.nodeclasses[0].kubelet.os = NodeOs::Windows2022;
    // The benchmark pool asks for Linux; this one is the Windows class's. It allows both
    // architectures; a Windows class still never gets Graviton.
    c.nodepools[0].requirements.remove(labels::OS);
    let price = |itype: &str, ct: CapacityType, zone: &str| {
        let t = embedded().get(itype).unwrap();
        let o = t.offerings.iter().find(|o| o.capacity_type == ct && o.zone == zone).unwrap();
        o.price + 0.046 * t.vcpus() as f64
    };
    add_node(&mut c, "big", "m5.4xlarge", CapacityType::OnDemand);
    let zone = c.claims[0].launch.as_ref().unwrap().zone.clone();
    let big = price("m5.4xlarge", CapacityType::OnDemand, &zone);
    {
        let t = embedded().get("m5.4xlarge").unwrap();
        let node = c.nodes.iter_mut().find(|n| n.name == "big").unwrap();
        node.labels.insert(labels::OS.into(), "windows".into());
        node.labels.insert(labels::WINDOWS_BUILD.into(), "10.0.20348".into());
        node.allocatable = t.allocatable(&c.nodeclasses[0].kubelet);
        node.price = Some(big);
        // As the launch recorded it: the offer's (Windows) price.
        c.claims[0].launch.as_mut().unwrap().price = big;
        // The EKS DaemonSets select Linux nodes: none runs here.
        node.pods.clear();
    }
    for ds in &mut c.daemonsets {
        ds.pod.node_affinity = vec![Requirements::from_iter([Requirement::single(labels::OS, "linux")])];
    }
    let mut iis = pod("iis-1", 1000, 1024);
    iis.node_affinity = vec![Requirements::from_iter([Requirement::single(labels::OS, "windows")])];
    put(&mut c, "big", iis);

    let ds = consolidate(&c, embedded(), &unlimited);
    let launched: Vec<&PlannedClaim> = ds
        .iter()
        .filter_map(|d| match &d.action {
            Some(Action::Launch(claim)) => Some(claim.as_ref()),
            _ => None,
        })
        .collect();
    assert_eq!(launched.len(), 1, "{ds:?}");
    let r = launched[0];
    assert_eq!(r.labels[labels::OS], "windows");
    assert_eq!(r.labels[labels::WINDOWS_BUILD], "10.0.20348");
    let new = price(&r.instance_type, r.capacity_type, &r.zone);
    assert!((r.price_per_hour - new).abs() < 1e-9, "{} is not {new}", r.price_per_hour);
    for t in &r.instance_types {
        let arch = embedded().get(t).unwrap().requirements.get(labels::ARCH).unwrap();
        assert!(arch.has("amd64"), "{t}: Windows runs on amd64 only");
    }
    let write = ds
        .iter()
        .find_map(|d| match &d.action {
            Some(Action::WriteClaim(claim)) if claim.name == "big" => claim.disruption.clone(),
            _ => None,
        })
        .expect("big is disrupted");
    let want = format!(
        "replaced big (m5.4xlarge on-demand) by {} {}, saving ${:.3}/h",
        r.instance_type,
        r.capacity_type.as_str(),
        big - new
    );
    assert!(write.message.starts_with(&want), "{}\nwant {want}", write.message);
    assert_no_flap(&c, &ds);
}

#[test]
fn spot_to_spot_needs_enough_cheaper_types() {
    let mut c = cluster();
    add_node(&mut c, "s", "m5.2xlarge", CapacityType::Spot);
    put(&mut c, "s", pod("web-1", 500, 512));
    let strict = Options { min_spot_alternatives: 10_000, ..Options::default() };
    let ds = consolidate_with(&c, embedded(), &unlimited, &strict);
    assert!(disrupted(&ds).is_empty());
    let unconsolidatable = events(&ds, UNCONSOLIDATABLE);
    assert!(
        unconsolidatable.iter().any(|(o, m)| o == "Node/s" && m.contains("cheaper spot types")),
        "{unconsolidatable:?}"
    );
    let ds = consolidate(&c, embedded(), &unlimited);
    assert_eq!(launches(&ds), 1, "an m5.2xlarge spot holding half a cpu has many cheaper spot types: {ds:?}");
    let Some(Action::Launch(r)) = &ds.iter().find(|d| matches!(d.action, Some(Action::Launch(_)))).unwrap().action
    else {
        unreachable!()
    };
    assert!(r.instance_types.len() >= 15);
}

#[test]
fn multi_node_merges_several_into_one() {
    let mut c = cluster();
    for n in ["a", "b", "c"] {
        add_node(&mut c, n, "m5.2xlarge", CapacityType::OnDemand);
        put(&mut c, n, pod(&format!("web-{n}"), 2500, 2048));
    }
    let ds = consolidate(&c, embedded(), &unlimited);
    let gone = disrupted(&ds);
    assert!(gone.len() >= 2, "{ds:?}");
    assert!(launches(&ds) <= 1);
    assert!(ds.iter().any(|d| d.why.contains("replaced a (m5.2xlarge on-demand), b")), "{ds:?}");
    assert_no_flap(&c, &ds);
}

#[test]
fn protections_block_and_explain() {
    type Protect = fn(&mut Cluster);
    let cases: Vec<(Protect, &str)> = vec![
        (
            |c| {
                Arc::make_mut(c.nodes[1].pods.last_mut().unwrap())
                    .annotations
                    .insert("karpenter.sh/do-not-disrupt".into(), "true".into());
            },
            "pod shop/api-1 has karpenter.sh/do-not-disrupt=true",
        ),
        (
            |c| Arc::make_mut(c.nodes[1].pods.last_mut().unwrap()).owner = OwnerKind::None,
            "pod shop/api-1 has no controller",
        ),
        (
            |c| {
                c.pdbs.push(Pdb {
                    namespace: "shop".into(),
                    name: "api".into(),
                    selector: LabelSelector::from_labels(&[("app", "api")]),
                    disruptions_allowed: 0,
                })
            },
            "covered by PodDisruptionBudget shop/api",
        ),
        (
            |c| {
                c.nodes[1].annotations.insert("dovetail.dev/do-not-disrupt".into(), "true".into());
            },
            "node b has dovetail.dev/do-not-disrupt=true",
        ),
    ];
    for (protect, expected) in cases {
        let mut c = cluster();
        add_node(&mut c, "a", "m5.2xlarge", CapacityType::OnDemand);
        add_node(&mut c, "b", "m5.2xlarge", CapacityType::OnDemand);
        put(&mut c, "a", pod("web-1", 3000, 4096));
        put(&mut c, "a", pod("web-2", 3000, 4096));
        put(&mut c, "b", pod("api-1", 500, 512));
        protect(&mut c);
        let ds = consolidate(&c, embedded(), &unlimited);
        assert!(!disrupted(&ds).iter().any(|(n, _)| n == "b"), "{expected}: {ds:?}");
        let blocked = events(&ds, DISRUPTION_BLOCKED);
        assert!(
            blocked.iter().any(|(o, m)| o == "Node/b" && m.starts_with("not consolidated: ") && m.contains(expected)),
            "{blocked:?}"
        );
    }
}

/// Under WhenEmpty, a node with pods is no candidate, so its do-not-disrupt blocks nothing and
/// goes unsaid; an empty protected node says why it stays.
#[test]
fn when_empty_says_only_what_blocks_empty_nodes() {
    let mut c = cluster();
    c.nodepools[0].disruption.consolidation_policy = ConsolidationPolicy::WhenEmpty;
    add_node(&mut c, "busy", "m5.2xlarge", CapacityType::OnDemand);
    add_node(&mut c, "idle", "m5.large", CapacityType::OnDemand);
    put(&mut c, "busy", pod("web-1", 500, 512));
    for n in c.nodes.iter_mut() {
        n.annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    }
    let ds = consolidate(&c, embedded(), &unlimited);
    assert!(disrupted(&ds).is_empty(), "{ds:?}");
    let blocked = events(&ds, DISRUPTION_BLOCKED);
    assert_eq!(
        blocked,
        vec![("Node/idle".to_string(), "not consolidated: node idle has karpenter.sh/do-not-disrupt=true".to_string())]
    );
}

#[test]
fn candidates_in_disruption_cost_order_within_budget() {
    let mut c = cluster();
    for n in ["a", "b", "c"] {
        add_node(&mut c, n, "m5.2xlarge", CapacityType::OnDemand);
    }
    put(&mut c, "a", pod("web-1", 3000, 4096));
    put(&mut c, "a", pod("web-2", 1000, 1024));
    // b's pods are dearer to evict (high priority), c's are cheap: c goes first.
    let mut p = pod("api-1", 300, 256);
    p.priority = 100_000_000;
    put(&mut c, "b", p);
    put(&mut c, "c", pod("api-2", 300, 256));
    let one = |_: &str, _: Reason| 1usize;
    let ds = consolidate(&c, embedded(), &one);
    assert_eq!(disrupted(&ds), vec![("c".to_string(), Reason::Underutilized)], "{ds:?}");
    // b waits: one move per pass (and the budget of 1 is spent anyway).
    assert!(notes(&ds).iter().any(|n| n.contains("one consolidation move at a time")), "{ds:?}");
}

#[test]
fn budgets_limit_empty_deletions() {
    let mut c = cluster();
    for i in 0..5 {
        add_node(&mut c, &format!("e{i}"), "m5.large", CapacityType::OnDemand);
    }
    let two = |_: &str, r: Reason| if r == Reason::Empty { 2 } else { 0 };
    let ds = consolidate(&c, embedded(), &two);
    assert_eq!(disrupted(&ds).len(), 2);
    let blocked = events(&ds, DISRUPTION_BLOCKED);
    let (pools, nodes): (Vec<_>, Vec<_>) = blocked.iter().partition(|(o, _)| o.starts_with("NodePool/"));
    assert_eq!(nodes.iter().filter(|(o, m)| o.starts_with("Node/e") && m.contains("budget")).count(), 3, "{nodes:?}");
    // The pool says it once, naming the reason its budget blocks.
    assert_eq!(pools.len(), 1, "{pools:?}");
    assert!(pools[0].1.contains("for reason Empty"), "{pools:?}");
}

#[test]
fn pending_pods_keep_the_room_they_need() {
    let mut c = cluster();
    add_node(&mut c, "a", "m5.2xlarge", CapacityType::OnDemand);
    add_node(&mut c, "b", "m5.2xlarge", CapacityType::OnDemand);
    put(&mut c, "a", pod("web-1", 3000, 4096));
    c.pending.push(pod("new-1", 5000, 4096));
    let ds = consolidate(&c, embedded(), &unlimited);
    assert!(!disrupted(&ds).iter().any(|(n, _)| n == "b"), "b is the only room for new-1: {ds:?}");
    assert_no_flap(&c, &ds);
}

/// The node names disrupted and the launches of a pass, sorted, for comparing with a list.
fn moved(ds: &[Decision]) -> (Vec<String>, usize) {
    let mut gone: Vec<String> = disrupted(ds).into_iter().map(|(n, _)| n).collect();
    gone.sort();
    (gone, launches(ds))
}

/// `no_flapping`'s shrunk case. n0, n1 and n4 hold five pods (2415m, 1517m, 1161m, 1114m, 898m)
/// and n2 and n3 have 2414m and 5587m free: packed roomiest node first, they fit. But the next
/// provisioning pass places them first fit in node order — 2415m to n3 (n2 is 1m short), 1517m to
/// n2, 1161m and 1114m to n3 — and 898m finds 897m left on each. Deleting the three flaps; they
/// go only with a small replacement that pass fills.
#[test]
fn the_next_pass_packs_in_node_order() {
    let mut c = cluster();
    for (n, t) in
        [("n0", "m5.2xlarge"), ("n1", "m5.large"), ("n2", "m5.xlarge"), ("n3", "m5.2xlarge"), ("n4", "m5.large")]
    {
        add_node(&mut c, n, t, CapacityType::OnDemand);
    }
    let pinned = |name: &str, cpu| {
        let mut p = pod(name, cpu, 64);
        p.owner = OwnerKind::None; // keeps n2 and n3 where they are
        p
    };
    put(&mut c, "n0", pod("web-0", 898, 64));
    put(&mut c, "n0", pod("web-1", 1517, 64));
    put(&mut c, "n0", pod("web-2", 2415, 64));
    put(&mut c, "n1", pod("web-3", 1161, 64));
    put(&mut c, "n2", pinned("solo-0", 1351));
    put(&mut c, "n3", pod("web-4", 2109, 64));
    put(&mut c, "n3", pinned("solo-1", 59));
    put(&mut c, "n4", pod("web-5", 1114, 64));
    let free = |c: &Cluster, n: usize| c.nodes[n].allocatable.minus(&c.nodes[n].requested()).cpu;
    assert_eq!((free(&c, 2), free(&c, 3)), (2414, 5587));

    let ds = consolidate(&c, embedded(), &unlimited);
    assert_no_flap(&c, &ds);
    assert_eq!(moved(&ds), (vec!["n0".into(), "n1".into(), "n4".into()], 1), "{ds:?}");
    let plan = schedule(&after(&c, &ds), embedded());
    let on_new = plan.existing.iter().find(|e| e.node == "n1-consolidation").expect("the replacement is used");
    assert_eq!(on_new.pods, vec!["shop/web-0".to_string()]);
}

/// The same with memory: n3 has the most free cpu but 832Mi of memory. Packed roomiest-cpu
/// first, 1279m goes to n3 and 186m/896Mi to n2; the next pass puts 1279m on n2 (first in node
/// order), and 186m/896Mi then fits neither: n0 and n1 go only with a replacement.
#[test]
fn the_next_pass_packs_in_node_order_memory_too() {
    let mut c = cluster();
    for (n, t) in [("n0", "m5.large"), ("n1", "m5.large"), ("n2", "m5.xlarge"), ("n3", "c5.xlarge")] {
        add_node(&mut c, n, t, CapacityType::OnDemand);
    }
    let mut solo = pod("solo-0", 590, 64);
    solo.owner = OwnerKind::None;
    put(&mut c, "n0", pod("web-0", 186, 896));
    put(&mut c, "n1", pod("web-1", 1279, 64));
    put(&mut c, "n2", pod("web-2", 1200, 64));
    put(&mut c, "n2", pod("web-3", 511, 64));
    put(&mut c, "n2", solo);
    let mut solo = pod("solo-1", 50, 1088);
    solo.owner = OwnerKind::None;
    put(&mut c, "n3", solo);
    put(&mut c, "n3", pod("web-4", 50, 2176));
    put(&mut c, "n3", pod("web-5", 50, 2368));
    let ds = consolidate(&c, embedded(), &unlimited);
    assert_no_flap(&c, &ds);
    assert_eq!(moved(&ds), (vec!["n0".into(), "n1".into()], 1), "{ds:?}");
}

/// The ODCR the reserved-capacity tests use: `available` m5.large in the zone `add_node` puts an
/// on-demand m5.large in, as EC2 counted it an hour ago. The class selects it and the pool
/// launches reserved and on-demand capacity (the simulator's `savings` scenario's pool).
const CR: &str = "cr-0a5b1e55c0ffee001";

fn with_reservation(c: &mut Cluster, available: u32) {
    let t = embedded().get("m5.large").expect("type");
    let zone = t.offerings.iter().find(|o| o.capacity_type == CapacityType::OnDemand).expect("offering").zone.clone();
    let pool = &mut c.nodepools[0];
    pool.requirements.remove(labels::CAPACITY_TYPE);
    pool.requirements.add(
        Requirement::new(labels::CAPACITY_TYPE, Operator::In, &[labels::CAPACITY_RESERVED, labels::CAPACITY_ON_DEMAND])
            .unwrap(),
    );
    let reservation = Reservation {
        id: CR.into(),
        instance_type: "m5.large".into(),
        zone,
        owner_id: "123456789012".into(),
        instance_match_criteria: "targeted".into(),
        kind: ReservationKind::Default,
        interruptible: false,
        available,
        observed_at: Time::from_secs(NOW - 3_600),
        end: None,
    };
    c.resolved = vec![ResolvedClass { name: "default".into(), reservations: vec![reservation], ..Default::default() }];
}

/// An m5.large launched into [`CR`] `launched` seconds before now (EC2's count includes it when
/// that was before the reservation was described).
fn add_reserved_node(c: &mut Cluster, name: &str, launched: i64) {
    add_node(c, name, "m5.large", CapacityType::OnDemand);
    let price = embedded().offering_price(
        "m5.large",
        &c.resolved[0].reservations[0].zone,
        CapacityType::Reserved,
        NodeOs::Linux,
    );
    let node = c.nodes.last_mut().unwrap();
    node.labels.insert(labels::CAPACITY_TYPE.into(), labels::CAPACITY_RESERVED.into());
    node.labels.extend(c.resolved[0].reservations[0].labels().map(|(k, v)| (k.to_string(), v)));
    node.price = price;
    let claim = c.claims.last_mut().unwrap();
    claim.requirements.add(Requirement::single(labels::CAPACITY_RESERVATION_ID, CR));
    let launch = claim.launch.as_mut().unwrap();
    launch.capacity_type = CapacityType::Reserved;
    launch.price = price.unwrap();
    launch.launched_at = Time::from_secs(NOW - launched);
}

/// The claims a pass launches into [`CR`].
fn into_reservation(ds: &[Decision]) -> Vec<&PlannedClaim> {
    ds.iter()
        .filter_map(|d| match &d.action {
            Some(Action::Launch(p)) => Some(p.as_ref()),
            _ => None,
        })
        .filter(|p| p.capacity_type == CapacityType::Reserved)
        .filter(|p| p.labels.get(labels::CAPACITY_RESERVATION_ID).map(String::as_str) == Some(CR))
        .collect()
}

/// Issue 20, point 1: reserved capacity is used before on-demand by consolidation too. An
/// on-demand m5.2xlarge holding one small pod is replaced by an m5.large in the reservation, at
/// the reservation's token price, launched into it only.
#[test]
fn an_on_demand_node_whose_pods_fit_a_free_reservation_is_replaced_into_it() {
    let mut c = cluster();
    with_reservation(&mut c, 1);
    add_node(&mut c, "a", "m5.2xlarge", CapacityType::OnDemand);
    put(&mut c, "a", pod("web-1", 1000, 1024));
    let ds = consolidate(&c, embedded(), &unlimited);
    assert_eq!(disrupted(&ds), vec![("a".to_string(), Reason::Underutilized)], "{ds:?}");
    let into = into_reservation(&ds);
    assert_eq!(into.len(), 1, "{ds:?}");
    assert_eq!(into[0].instance_types, vec!["m5.large".to_string()]);
    assert!(into[0].price_per_hour < 0.001, "{}", into[0].price_per_hour);
    let reqs = &into[0].requirements;
    assert_eq!(reqs.get(labels::CAPACITY_TYPE).and_then(|r| r.single_value()), Some(labels::CAPACITY_RESERVED));
    assert!(ds.iter().any(|d| d.why.contains("replaced a (m5.2xlarge on-demand) by m5.large reserved")), "{ds:?}");
    assert_no_flap(&c, &ds);
}

/// A node in a reservation costs nothing to keep (the reservation is paid for either way):
/// neither an empty one nor one whose pod fits elsewhere is taken away for a "saving" of the
/// reserved offering's token price, and each says why.
#[test]
fn a_reserved_node_is_not_taken_away_for_a_saving_of_nothing() {
    let mut c = cluster();
    with_reservation(&mut c, 0);
    add_reserved_node(&mut c, "r-empty", 86_400);
    add_reserved_node(&mut c, "r-small", 86_400);
    put(&mut c, "r-small", pod("api-1", 300, 256));
    // Room for api-1, and a pod no reserved m5.large (full anyway) could hold.
    add_node(&mut c, "a", "m5.2xlarge", CapacityType::OnDemand);
    put(&mut c, "a", pod("web-1", 6000, 4096));
    let ds = consolidate(&c, embedded(), &unlimited);
    let gone = disrupted(&ds);
    assert!(!gone.iter().any(|(n, _)| n.starts_with("r-")), "{ds:?}");
    let said = events(&ds, UNCONSOLIDATABLE);
    for n in ["r-empty", "r-small"] {
        assert!(
            said.iter().any(|(o, m)| o == &format!("Node/{n}") && m.contains(CR) && m.contains("saves nothing")),
            "{n}: {said:?}"
        );
    }
    // Once the reservation has ended, the instance is billed like any other: the empty one goes.
    c.resolved[0].reservations[0].end = Some(Time::from_secs(NOW - 60));
    let ds = consolidate(&c, embedded(), &unlimited);
    assert!(disrupted(&ds).contains(&("r-empty".to_string(), Reason::Empty)), "{ds:?}");
}

/// One instance left: one replacement goes into it; once that replacement runs there (launched
/// after EC2's count, so counted by the claims), another node that would fit it is not replaced
/// into the reservation.
#[test]
fn a_full_reservation_is_not_over_used_by_replacements() {
    let mut c = cluster();
    with_reservation(&mut c, 1);
    // Each pod needs most of an m5.large: neither fits beside the other, and the reservation
    // takes only one of them.
    for n in ["a", "b"] {
        add_node(&mut c, n, "m5.large", CapacityType::OnDemand);
        put(&mut c, n, pod(&format!("web-{n}"), 1200, 1024));
    }
    let ds = consolidate(&c, embedded(), &unlimited);
    assert_eq!(into_reservation(&ds).len(), 1, "{ds:?}");
    assert_eq!(disrupted(&ds).len(), 1, "{ds:?}");
    assert_no_flap(&c, &ds);
    // The next pass: a's replacement runs in the reservation, launched after EC2 counted it.
    let replaced = disrupted(&ds)[0].0.clone();
    let stays = if replaced == "a" { "b" } else { "a" };
    let mut next = cluster();
    with_reservation(&mut next, 1);
    add_reserved_node(&mut next, "replacement", 60);
    put(&mut next, "replacement", pod(&format!("web-{replaced}"), 1200, 1024));
    add_node(&mut next, stays, "m5.large", CapacityType::OnDemand);
    put(&mut next, stays, pod(&format!("web-{stays}"), 1200, 1024));
    let ds = consolidate(&next, embedded(), &unlimited);
    assert_eq!(into_reservation(&ds), Vec::<&PlannedClaim>::new(), "{ds:?}");
    assert_no_flap(&next, &ds);
}

/// A random node: its type index and its pods as (cpu, memory, app) seeds.
type NodeSpec = (u8, Vec<(u16, u8, u8)>);

fn random_cluster(spec: &[NodeSpec], pdb_allowed: i32) -> Cluster {
    const TYPES: [&str; 4] = ["m5.large", "m5.xlarge", "m5.2xlarge", "c5.xlarge"];
    let mut c = cluster();
    c.pdbs.push(Pdb {
        namespace: "shop".into(),
        name: "p0".into(),
        selector: LabelSelector::from_labels(&[("app", "p0")]),
        disruptions_allowed: pdb_allowed,
    });
    for (i, (t, pods)) in spec.iter().enumerate() {
        let name = format!("n{i}");
        let ct = if t % 2 == 0 { CapacityType::OnDemand } else { CapacityType::Spot };
        add_node(&mut c, &name, TYPES[(*t as usize / 2) % TYPES.len()], ct);
        let mut room = c.nodes[i].allocatable.minus(&c.nodes[i].requested());
        for (j, (cpu, kind, mem)) in pods.iter().enumerate() {
            let mut p = pod(&format!("p{}-{i}-{j}", kind % 3), *cpu as i64 + 50, (*mem as i64 + 1) * 64);
            match kind {
                7 => p.owner = OwnerKind::None,
                8 => {
                    p.annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
                }
                _ => {}
            }
            if p.requests.fits(&room) {
                room.sub(&p.requests);
                put(&mut c, &name, p);
            }
        }
    }
    c
}

fn spec() -> impl Strategy<Value = Vec<NodeSpec>> {
    prop::collection::vec((0u8..8, prop::collection::vec((0u16..2500, 0u8..10, 0u8..40), 0..6)), 1..6)
}

/// 48 cases per property, or `DOVETAIL_PROPERTY_CASES` for a soak (failures still land in
/// `consolidation.proptest-regressions`, replayed first on every run).
fn config() -> ProptestConfig {
    let cases = std::env::var("DOVETAIL_PROPERTY_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48);
    ProptestConfig { cases, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config())]

    /// Nodes only go when their pods fit elsewhere: the next provisioning pass, with the moved
    /// pods pending, launches nothing and leaves nothing unscheduled.
    #[test]
    fn no_flapping(spec in spec()) {
        let c = random_cluster(&spec, 5);
        let ds = consolidate(&c, embedded(), &unlimited);
        assert_no_flap(&c, &ds);
    }

    /// No decision disrupts a node holding a do-not-disrupt or controller-less pod, evicts more
    /// pods of a PDB than it allows, or exceeds a pool's budget.
    #[test]
    fn no_protection_or_budget_violated(spec in spec(), budget in 0usize..4, pdb in 0i32..3) {
        let c = random_cluster(&spec, pdb);
        let allowed = move |_: &str, _: Reason| budget;
        let ds = consolidate(&c, embedded(), &allowed);
        let gone = disrupted(&ds);
        prop_assert!(gone.len() <= budget);
        let mut evicted = 0;
        for (name, _) in &gone {
            let node = c.nodes.iter().find(|n| &n.name == name).unwrap();
            for p in node.pods.iter().filter(|p| !p.is_daemon()) {
                prop_assert!(p.owner != OwnerKind::None, "{} has no controller", p.key());
                prop_assert!(!p.annotations.contains_key("karpenter.sh/do-not-disrupt"), "{}", p.key());
                if p.labels.get("app").is_some_and(|a| a == "p0") {
                    evicted += 1;
                }
            }
        }
        prop_assert!(evicted <= pdb, "{evicted} pods of a PDB allowing {pdb}");
    }
}
