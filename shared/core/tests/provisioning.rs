//! Provisioning decisions over the live cluster: in-flight claims absorb their pods, names never
//! repeat, pool limits count claims, and CreateFleet offers come spot first, cheapest first.

mod lifecycle_support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use dovetail_core::catalog::{self, CapacityType, OfferingKey};
use dovetail_core::cluster::{Cluster, ResolvedClass};
use dovetail_core::decision::{Action, Decision};
use dovetail_core::labels;
use dovetail_core::model::{
    cost_micros, format_cost, NodeClass, NodeOs, NodePool, Pod, Taint, TaintEffect, LIMIT_COST,
};
use dovetail_core::nodeclaim::{launched_labels, NodeClaim, Phase, Reason};
use dovetail_core::provisioning::{self, claim_name, intent, offers, plan, plan_cached, pool_usage};
use dovetail_core::requirements::{Operator, Requirement};
use dovetail_core::resources::Resources;
use dovetail_core::scheduler::SolveCache;
use lifecycle_support::*;

fn pending(name: &str, cpu: i64, mem_mib: i64) -> Pod {
    let mut p = Pod::new("shop", name, Resources::new(cpu, mem_mib << 20));
    p.owner = dovetail_core::model::OwnerKind::ReplicaSet;
    p
}

fn base(now_s: u64) -> Cluster {
    let mut pool = NodePool::new("default", "default");
    pool.startup_taints = vec![Taint::new("example.com/cni-not-ready", "", TaintEffect::NoSchedule)];
    pool.expire_after = Some(Duration::from_secs(3600));
    Cluster {
        now: T0.plus(secs(now_s)),
        nodepools: vec![pool],
        nodeclasses: vec![NodeClass { name: "default".into(), ..Default::default() }],
        ..Cluster::default()
    }
}

/// What a class that can launch resolves to: an image, a subnet, a security group, a profile.
fn ready(class: &str) -> ResolvedClass {
    ResolvedClass {
        name: class.into(),
        images: [("amd64".to_string(), "ami-1".to_string())].into(),
        subnets: vec!["subnet-1".into()],
        security_groups: vec!["sg-1".into()],
        instance_profile: Some("profile".into()),
        ..Default::default()
    }
}

fn events(ds: &[Decision], reason: &str) -> Vec<String> {
    ds.iter()
        .filter_map(|d| match &d.action {
            Some(Action::Event { object, reason: r, .. }) if r == reason => Some(object.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn pending_pods_get_uniquely_named_claims_and_nominated_events() {
    let mut c = base(0);
    c.pending = (0..3).map(|i| pending(&format!("web-{i}"), 3500, 4096)).collect();
    let ds = plan(&c, catalog::embedded());
    let p = planned(&ds);
    assert!(!p.is_empty());
    let names: BTreeSet<&str> = p.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names.len(), p.len(), "names are unique: {names:?}");
    for x in &p {
        assert!(x.name.starts_with("default-") && x.name.len() == "default-".len() + 6, "{}", x.name);
        assert_eq!(x.labels.get(labels::NODECLAIM), Some(&x.name));
    }
    let mut nominated = events(&ds, "Nominated");
    nominated.sort();
    assert_eq!(nominated, vec!["Pod/shop/web-0", "Pod/shop/web-1", "Pod/shop/web-2"]);
    // Same input, same decisions: the simulator is reproducible.
    assert_eq!(plan(&c, catalog::embedded()), ds);
}

#[test]
fn a_second_pass_over_the_same_pods_launches_nothing_while_their_claims_are_in_flight() {
    let mut c = base(0);
    c.pending = (0..5).map(|i| pending(&format!("web-{i}"), 1000, 1024)).collect();
    let first = planned(&plan(&c, catalog::embedded()));
    assert!(!first.is_empty());
    for p in &first {
        c.claims.push(intent(p, &c, c.now));
    }
    c.now = c.now.plus(secs(5));
    let again = plan(&c, catalog::embedded());
    assert!(planned(&again).is_empty(), "{again:?}");

    // Launched (not yet registered) with the type EC2 chose: still in flight.
    for claim in &mut c.claims {
        let mut l = launch(&claim.name, c.now);
        l.instance_type = claim.instance_types[0].clone();
        claim.launch = Some(l);
        claim.phase = Phase::Launched;
    }
    assert!(planned(&plan(&c, catalog::embedded())).is_empty());
}

#[test]
fn a_registering_node_takes_its_pods_before_it_sheds_its_taints_or_reports_its_allocatable() {
    let mut c = base(0);
    c.pending = vec![pending("web-0", 1000, 1024)];
    let p = planned(&plan(&c, catalog::embedded())).remove(0);
    let mut claim = intent(&p, &c, c.now);
    let mut l = launch(&claim.name, c.now);
    l.instance_type = p.instance_type.clone();
    claim.launch = Some(l);
    claim.phase = Phase::Launched;
    let mut n = node(&claim.name);
    n.labels = p.labels.clone();
    n.labels.insert(labels::HOSTNAME.into(), n.name.clone());
    n.allocatable = Resources::from_quantities(p.allocatable.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
    n.taints = provisioning::registration_taints(&claim);
    // The API server taints every new Node not-ready until the node lifecycle controller sees
    // it Ready.
    n.taints.push(Taint::new("node.kubernetes.io/not-ready", "", TaintEffect::NoSchedule));
    n.ready = false;
    // Created, its status (allocatable included) not yet reported.
    n.allocatable = Resources::default();
    c.claims.push(claim);
    c.nodes.push(n);
    let ds = plan(&c, catalog::embedded());
    assert!(planned(&ds).is_empty(), "no second node for a pod about to land: {ds:?}");
    // Once Initialized, a taint that stays is the node's: a pod that does not tolerate it waits
    // for new capacity.
    c.claims[0].phase = Phase::Initialized;
    c.nodes[0].ready = true;
    c.nodes[0].allocatable =
        Resources::from_quantities(p.allocatable.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
    c.nodes[0].taints = vec![Taint::new("node.kubernetes.io/not-ready", "", TaintEffect::NoSchedule)];
    assert_eq!(planned(&plan(&c, catalog::embedded())).len(), 1);
}

#[test]
fn leaving_capacity_takes_no_pods() {
    let mut c = base(0);
    let mut old = disrupted("old", Reason::Drifted, c.now);
    old.phase = Phase::Draining;
    let mut n = node("old");
    n.allocatable = Resources::new(8000, 32 << 30);
    n.labels.insert(labels::NODEPOOL.into(), "default".into());
    c.claims.push(old);
    c.nodes.push(n);
    c.instances.push(instance("old", "running"));
    c.pending = vec![pending("web-0", 1000, 1024)];
    assert_eq!(planned(&plan(&c, catalog::embedded())).len(), 1);
}

/// A warm provisioner keeps one solve cache (the reconciler owns it): pass after pass it decides
/// what a fresh solve decides, reusing the cache while pending pods and claims come and go, and
/// starting it afresh when the class's subnets (the zones its pools may use) or the unavailable
/// offerings change.
#[test]
fn a_kept_solve_cache_decides_what_a_fresh_solve_decides() {
    let catalog = Arc::new(catalog::embedded().clone());
    let cache = SolveCache::new();
    let mut c = base(0);
    let pass = |c: &Cluster| {
        let decisions = plan_cached(c, &catalog, &cache);
        assert_eq!(decisions, plan(c, &catalog));
        decisions
    };
    c.pending = (0..3).map(|i| pending(&format!("web-{i}"), 1500, 2048)).collect();
    let first = planned(&pass(&c));
    assert_eq!(cache.starts(), 1);
    for p in &first {
        c.claims.push(intent(p, &c, c.now));
    }
    c.now = c.now.plus(secs(5));
    c.pending.push(pending("api-0", 3000, 8192));
    assert!(!planned(&pass(&c)).is_empty());
    assert_eq!(cache.starts(), 1, "pods and claims are not what the cache depends on");

    c.resolved = vec![ResolvedClass { zones: vec!["us-east-1b".into()], ..ready("default") }];
    let narrowed = planned(&pass(&c));
    assert_eq!(cache.starts(), 2, "the pools' zones follow the class's subnets");
    assert!(narrowed.iter().all(|p| p.zone == "us-east-1b"), "{narrowed:?}");

    let chosen = &narrowed[0];
    c.unavailable.insert(OfferingKey {
        instance_type: chosen.instance_type.clone(),
        zone: chosen.zone.clone(),
        capacity_type: chosen.capacity_type,
    });
    let after = planned(&pass(&c));
    assert_eq!(cache.starts(), 3);
    assert_ne!(after[0].instance_type, chosen.instance_type);
}

/// As Karpenter leaves a NodePool alone while its NodeClass is not Ready, a pool whose class does
/// not resolve (or resolves to no image) takes no pods: they go to the next pool by weight, or
/// wait with a FailedScheduling Event saying which pool is left out and why. A class nothing was
/// resolved for (`dovetail plan`) is not held against its pools.
#[test]
fn a_pool_whose_class_is_not_ready_takes_no_pods() {
    let mut c = base(0);
    let mut preferred = NodePool::new("preferred", "broken");
    preferred.weight = 10;
    c.nodepools.push(preferred);
    c.nodeclasses.push(NodeClass { name: "broken".into(), ..Default::default() });
    c.pending = vec![pending("web-0", 1000, 1024)];
    let pools = |c: &Cluster| -> Vec<String> {
        planned(&plan(c, catalog::embedded())).into_iter().map(|p| p.nodepool).collect()
    };
    assert_eq!(pools(&c), ["preferred"], "nothing known against the class: the heavier pool wins");

    // Its resolution failed; or it resolved, to no image.
    for unresolved in [true, false] {
        let mut c = c.clone();
        c.resolved = vec![ready("default")];
        if unresolved {
            c.unresolved.insert("broken".into(), "alias windows2019@latest: no such image".into());
        } else {
            c.resolved.push(ResolvedClass { images: Default::default(), ..ready("broken") });
        }
        assert_eq!(pools(&c), ["default"], "unresolved {unresolved}: the pods go to the next pool");
        assert!(c.class_not_ready("broken").is_some() && c.class_not_ready("default").is_none());

        // Only the broken pool can run it: it waits, and its Event says why.
        let mut only = c.clone();
        only.nodepools.retain(|p| p.name == "preferred");
        let decisions = plan(&only, catalog::embedded());
        assert!(planned(&decisions).is_empty());
        let message = decisions
            .iter()
            .find_map(|d| match &d.action {
                Some(Action::Event { reason, message, .. }) if reason == "FailedScheduling" => Some(message.clone()),
                _ => None,
            })
            .expect("a FailedScheduling Event");
        let why = if unresolved { "no such image" } else { "no AMI matches amiSelectorTerms" };
        assert!(
            message.contains("NodePool preferred is not used while its EC2NodeClass broken is not ready")
                && message.contains(why),
            "{message}"
        );
    }
}

#[test]
fn pool_limits_count_claims_in_flight() {
    let mut c = base(0);
    c.nodepools[0].limits.insert("cpu".into(), 4000);
    c.pending = vec![pending("web-0", 3000, 1024)];
    let first = planned(&plan(&c, catalog::embedded())).remove(0);
    let claim = intent(&first, &c, c.now);
    c.claims.push(claim.clone());
    let usage = pool_usage(&c, catalog::embedded());
    assert!(usage["default"].cpu >= 2000, "{usage:?}");
    // More pods than the limit leaves room for: they are reported, not launched.
    c.pending.push(pending("web-1", 3000, 1024));
    c.pending.push(pending("web-2", 3000, 1024));
    let ds = plan(&c, catalog::embedded());
    assert!(planned(&ds).is_empty(), "{:?}", planned(&ds));
    let failed = events(&ds, "FailedScheduling");
    assert!(!failed.is_empty(), "{ds:?}");
    // Terminated claims no longer count.
    c.claims[0].phase = Phase::Terminated;
    assert!(pool_usage(&c, catalog::embedded()).get("default").is_none_or(|r| r.cpu == 0));
}

#[test]
fn a_node_limit_launches_what_it_allows_and_says_why_the_rest_waits() {
    // One 1.5-CPU pod per 2-vCPU node: three pods need three nodes, the pool allows two.
    let mut c = base(0);
    c.nodepools[0].limits.insert("nodes".into(), 2);
    c.nodepools[0].requirements.add(Requirement::new(labels::INSTANCE_CPU, Operator::In, &["2"]).unwrap());
    c.pending = (0..3).map(|i| pending(&format!("job-{i}"), 1500, 256)).collect();
    let ds = plan(&c, catalog::embedded());
    let launched = planned(&ds);
    assert_eq!(launched.len(), 2, "{launched:?}");
    let waiting: Vec<&str> = ds
        .iter()
        .filter_map(|d| match &d.action {
            Some(Action::Event { reason, message, .. }) if reason == "FailedScheduling" => Some(message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        waiting,
        vec!["Dovetail cannot launch capacity for it: NodePool \"default\": limit on nodes reached (0 of 2 left)"]
    );

    // Once launched, the two claims count one node each, and nothing more is launched.
    for p in &launched {
        c.claims.push(intent(p, &c, c.now));
    }
    c.pending.retain(|p| !launched.iter().any(|l| l.pods.contains(&p.key())));
    assert_eq!(pool_usage(&c, catalog::embedded())["default"].get("nodes"), 2);
    assert!(planned(&plan(&c, catalog::embedded())).is_empty());
    // A node of the pool that no claim owns counts as well.
    c.claims.pop();
    let mut stray = dovetail_core::model::Node::new("stray", Default::default(), Resources::new(2000, 4 << 30));
    stray.labels.insert(labels::NODEPOOL.into(), "default".into());
    c.nodes.push(stray);
    assert_eq!(pool_usage(&c, catalog::embedded())["default"].get("nodes"), 2);
}

/// A pool of on-demand m5.large only, and pods that take one node each: what a node costs is then
/// one known price.
fn m5_large_pool(name: &str) -> (NodePool, f64) {
    let mut pool = NodePool::new(name, "default");
    pool.requirements.add(Requirement::new(labels::INSTANCE_TYPE, Operator::In, &["m5.large"]).unwrap());
    pool.requirements.add(Requirement::new(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]).unwrap());
    let t = catalog::embedded().get("m5.large").expect("m5.large in the catalog");
    let dearest = t
        .offerings
        .iter()
        .filter(|o| o.available && o.capacity_type == CapacityType::OnDemand)
        .map(|o| t.price(o, NodeOs::Linux))
        .fold(0.0, f64::max);
    (pool, dearest)
}

/// The messages of the FailedScheduling Events among `ds`.
fn waiting_because(ds: &[Decision]) -> Vec<String> {
    ds.iter()
        .filter_map(|d| match &d.action {
            Some(Action::Event { reason, message, .. }) if reason == "FailedScheduling" => Some(message.clone()),
            _ => None,
        })
        .collect()
}

fn whole_node_pods(n: usize) -> Vec<Pod> {
    (0..n).map(|i| pending(&format!("job-{i}"), 1500, 256)).collect()
}

#[test]
fn a_cost_limit_launches_what_it_allows_and_says_why_the_rest_waits() {
    let mut c = base(0);
    let (pool, price) = m5_large_pool("default");
    c.nodepools = vec![pool];
    // Room for two nodes and a half: two launch, the third pod waits naming the limit.
    c.nodepools[0].limits.insert(LIMIT_COST.into(), cost_micros(price * 2.5));
    c.pending = whole_node_pods(3);
    let ds = plan(&c, catalog::embedded());
    let launched = planned(&ds);
    assert_eq!(launched.len(), 2, "{launched:?}");
    let waiting = waiting_because(&ds);
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert!(waiting[0].contains("NodePool \"default\": limit on dovetail.dev/cost-per-hour reached"), "{waiting:?}");
    assert!(waiting[0].contains(&format!("of {} left", format_cost(cost_micros(price * 2.5)))), "{waiting:?}");
    // The pool is told its limit binds.
    assert_eq!(events(&ds, "CostLimitReached"), vec!["NodePool/default".to_string()]);

    // In flight, each claim counts the dearest offering it may still be launched as; launched,
    // the price it was launched at.
    // (Their pods stay pending until the nodes register, and the claims absorb them.)
    for p in &launched {
        c.claims.push(intent(p, &c, c.now));
    }
    assert_eq!(pool_usage(&c, catalog::embedded())["default"].get(LIMIT_COST), 2 * cost_micros(price));
    let ds = plan(&c, catalog::embedded());
    assert!(planned(&ds).is_empty() && waiting_because(&ds).len() == 1, "{ds:#?}");
    c.claims[0].launch = Some(dovetail_core::nodeclaim::Launch {
        instance_id: "i-1".into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: CapacityType::OnDemand,
        image_id: "ami-1".into(),
        subnet_id: "subnet-1".into(),
        security_groups: vec![],
        price: 0.04,
        launched_at: c.now,
    });
    c.claims[0].phase = Phase::Launched;
    assert_eq!(pool_usage(&c, catalog::embedded())["default"].get(LIMIT_COST), 40_000 + cost_micros(price));
    // Its launch price left room for the third node.
    assert_eq!(planned(&plan(&c, catalog::embedded())).len(), 1);
    // A node of the pool that no claim owns counts at its type's price there.
    let mut stray = dovetail_core::model::Node::new("stray", Default::default(), Resources::new(2000, 8 << 30));
    let at = [(labels::INSTANCE_TYPE, "m5.large"), (labels::ZONE, "us-east-1b"), (labels::CAPACITY_TYPE, "on-demand")];
    stray.labels.extend(at.iter().chain(&[(labels::NODEPOOL, "default")]).map(|(k, v)| (k.to_string(), v.to_string())));
    c.nodes.push(stray);
    let t = catalog::embedded().get("m5.large").unwrap();
    let there =
        t.offerings.iter().find(|o| o.zone == "us-east-1b" && o.capacity_type == CapacityType::OnDemand).unwrap();
    let counted = pool_usage(&c, catalog::embedded())["default"].get(LIMIT_COST);
    assert_eq!(counted, 40_000 + cost_micros(price) + cost_micros(t.price(there, NodeOs::Linux)));
}

/// `dovetail plan`'s snapshot has nodes and no claims: [`provisioning::count_nodes`] counts them
/// as the functions count the same nodes in a cluster, against each pool's limits and the
/// cluster-wide cost limit (nodes of a pool since deleted included, nodes of no pool not).
#[test]
fn a_snapshot_counts_its_nodes_as_the_cluster_does() {
    let mut c = base(0);
    c.cost_limit = Some(cost_micros(10.0));
    let node = |name: &str, pool: Option<&str>, zone: &str| {
        let mut n = dovetail_core::model::Node::new(name, Default::default(), Resources::new(2000, 8 << 30));
        let at = [(labels::INSTANCE_TYPE, "m5.large"), (labels::ZONE, zone), (labels::CAPACITY_TYPE, "on-demand")];
        n.labels.extend(at.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        n.labels.extend(pool.map(|p| (labels::NODEPOOL.to_string(), p.to_string())));
        n
    };
    c.nodes = vec![
        node("a", Some("default"), "us-east-1a"),
        node("b", Some("default"), "us-east-1b"),
        node("c", Some("deleted"), "us-east-1a"),
        node("d", None, "us-east-1a"),
    ];
    c.nodes[1].price = Some(0.05);
    let mut snap = dovetail_core::snapshot::Snapshot {
        nodes: c.nodes.clone(),
        nodepools: c.nodepools.clone(),
        ..Default::default()
    };
    // Whatever the snapshot held before is replaced, not added to.
    snap.nodepools[0].usage = Resources::new(64_000, 1 << 40);
    provisioning::count_nodes(&mut snap, catalog::embedded(), c.cost_limit);

    let usage = pool_usage(&c, catalog::embedded());
    assert_eq!(snap.nodepools[0].usage, usage["default"]);
    assert_eq!(snap.nodepools[0].usage.get("nodes"), 2);
    assert_eq!(snap.cost_limit, provisioning::cost_limit(&c, catalog::embedded()));
    let m5 = catalog::embedded().offering_price("m5.large", "us-east-1a", CapacityType::OnDemand, NodeOs::Linux);
    let expected = 2 * cost_micros(m5.expect("m5.large on demand in us-east-1a")) + cost_micros(0.05);
    assert_eq!(snap.cost_limit.map(|l| (l.limit, l.usage)), Some((cost_micros(10.0), expected)));
    // No cluster-wide limit, none in the snapshot; the pools still count their nodes.
    provisioning::count_nodes(&mut snap, catalog::embedded(), None);
    assert_eq!((snap.cost_limit, &snap.nodepools[0].usage), (None, &usage["default"]));
}

#[test]
fn pods_a_cost_limit_turns_away_go_to_the_next_pool_by_weight() {
    let mut c = base(0);
    let (mut capped, price) = m5_large_pool("capped");
    capped.weight = 10;
    capped.limits.insert(LIMIT_COST.into(), cost_micros(price * 1.5));
    let (overflow, _) = m5_large_pool("overflow");
    c.nodepools = vec![capped, overflow];
    c.pending = whole_node_pods(3);
    let ds = plan(&c, catalog::embedded());
    let launched = planned(&ds);
    let by_pool = |name: &str| launched.iter().filter(|p| p.nodepool == name).count();
    assert_eq!((by_pool("capped"), by_pool("overflow")), (1, 2), "{launched:?}");
    assert!(waiting_because(&ds).is_empty());
    assert_eq!(events(&ds, "CostLimitReached"), vec!["NodePool/capped".to_string()]);
}

#[test]
fn the_cluster_wide_cost_limit_holds_across_pools() {
    let mut c = base(0);
    let (mut first, price) = m5_large_pool("first");
    first.weight = 10;
    let (second, _) = m5_large_pool("second");
    c.nodepools = vec![first, second];
    c.pending = whole_node_pods(3);
    // Neither pool has a limit of its own; together they may cost two nodes and a half.
    c.cost_limit = Some(cost_micros(price * 2.5));
    let ds = plan(&c, catalog::embedded());
    assert_eq!(planned(&ds).len(), 2, "{:?}", planned(&ds));
    let waiting = waiting_because(&ds);
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert!(waiting[0].contains("the cluster-wide cost limit is reached"), "{waiting:?}");
    // Both pools are told: the third pod was turned away from each.
    assert_eq!(events(&ds, "CostLimitReached"), vec!["NodePool/first".to_string(), "NodePool/second".to_string()]);
    // What runs counts, in whichever pool: with two nodes of the second pool up, nothing more.
    for p in planned(&ds) {
        let mut p = p.clone();
        p.nodepool = "second".into();
        c.claims.push(intent(&p, &c, c.now));
    }
    let ds = plan(&c, catalog::embedded());
    assert!(planned(&ds).is_empty(), "{:?}", planned(&ds));
    assert!(waiting_because(&ds)[0].contains("the cluster-wide cost limit is reached"), "{ds:#?}");
    assert_eq!(provisioning::cost_limit(&c, catalog::embedded()).map(|l| l.usage), Some(2 * cost_micros(price)));
}

#[test]
fn an_intent_carries_what_launch_and_drift_need() {
    let mut c = base(0);
    c.pending = vec![pending("web-0", 1000, 1024)];
    c.resolved = vec![ResolvedClass { hash: "class-hash".into(), ..ready("default") }];
    let p = planned(&plan(&c, catalog::embedded())).remove(0);
    let claim: NodeClaim = intent(&p, &c, c.now);
    assert_eq!((claim.phase, claim.version, claim.launch_attempts), (Phase::Launching, 0, 0));
    assert_eq!(claim.nodeclass, "default");
    assert_eq!(claim.hashes.nodeclass, "class-hash");
    assert_eq!(claim.hashes.nodepool, dovetail_core::hash::nodepool_hash(&c.nodepools[0]));
    assert_eq!(claim.startup_taints, c.nodepools[0].startup_taints);
    assert_eq!(claim.expire_after, Some(Duration::from_secs(3600)));
    assert_eq!(claim.pods, vec!["shop/web-0".to_string()]);
    let taints = provisioning::registration_taints(&claim);
    assert!(taints.iter().any(|t| t.key == labels::TAINT_UNREGISTERED && t.effect == TaintEffect::NoExecute));
}

#[test]
fn offers_come_spot_first_cheapest_first_without_unavailable_ones() {
    let mut claim = NodeClaim::launching("x", "default", "default", T0);
    claim.instance_types = vec!["m7i.large".into(), "m6i.large".into(), "c7i.xlarge".into()];
    let groups = offers(&claim, catalog::embedded(), &BTreeSet::new(), &[], NodeOs::Linux, &[]);
    assert_eq!(groups.len(), 2);
    assert!(groups[0].iter().all(|o| o.capacity_type == CapacityType::Spot));
    assert!(groups[1].iter().all(|o| o.capacity_type == CapacityType::OnDemand));
    for g in &groups {
        assert!(g.windows(2).all(|w| w[0].price <= w[1].price));
    }
    // Only on-demand, only one zone, and one offering ruled out.
    claim.requirements.add(Requirement::single(labels::CAPACITY_TYPE, "on-demand"));
    claim.requirements.add(Requirement::new(labels::ZONE, Operator::In, &["us-east-1b"]).unwrap());
    let gone = OfferingKey {
        instance_type: "m6i.large".into(),
        zone: "us-east-1b".into(),
        capacity_type: CapacityType::OnDemand,
    };
    let groups = offers(&claim, catalog::embedded(), &BTreeSet::from([gone.clone()]), &[], NodeOs::Linux, &[]);
    assert_eq!(groups.len(), 1);
    assert!(groups[0].iter().all(|o| o.zone == "us-east-1b" && o.capacity_type == CapacityType::OnDemand));
    assert!(!groups[0].iter().any(|o| o.key() == gone));
    assert_eq!(groups[0].len(), 2);
}

#[test]
fn offers_stay_in_the_zones_the_class_has_subnets_in() {
    let mut claim = NodeClaim::launching("x", "default", "default", T0);
    claim.instance_types = vec!["m7i.large".into(), "m6i.large".into()];
    let class_zones = ["us-east-1a".to_string(), "us-east-1c".to_string()];
    let groups = offers(&claim, catalog::embedded(), &BTreeSet::new(), &class_zones, NodeOs::Linux, &[]);
    assert_eq!(groups.len(), 2);
    for g in &groups {
        assert!(!g.is_empty() && g.iter().all(|o| class_zones.contains(&o.zone)), "{g:?}");
    }
    // Every spot offering in those zones ruled out: on-demand is next, not spot elsewhere.
    let spot_gone: BTreeSet<OfferingKey> = groups[0].iter().map(|o| o.key()).collect();
    let groups = offers(&claim, catalog::embedded(), &spot_gone, &class_zones, NodeOs::Linux, &[]);
    assert_eq!(groups.len(), 1);
    assert!(groups[0].iter().all(|o| o.capacity_type == CapacityType::OnDemand));
}

#[test]
fn a_launch_relabels_the_claim_for_the_type_zone_and_capacity_the_fleet_chose() {
    let catalog = catalog::embedded();
    // Planned on its cheapest candidate, m7i.large on demand in us-east-1a…
    let mut planned = catalog.get("m7i.large").unwrap().requirements.single_valued_labels();
    planned.insert(labels::ZONE.into(), "us-east-1a".into());
    planned.insert(labels::CAPACITY_TYPE.into(), "on-demand".into());
    planned.insert("team".into(), "payments".into());
    // …launched as m6i.xlarge spot in us-east-1b.
    let got = launched_labels(&planned, "m6i.xlarge", "us-east-1b", CapacityType::Spot, catalog);
    assert_eq!(got[labels::INSTANCE_TYPE], "m6i.xlarge");
    assert_eq!(got[labels::ZONE], "us-east-1b");
    assert_eq!(got[labels::CAPACITY_TYPE], "spot");
    assert_eq!(got["team"], "payments");
    assert_eq!(got.get(labels::ZONE_ID).map(String::as_str), catalog.zone_id("us-east-1b"));
    for (k, v) in catalog.get("m6i.xlarge").unwrap().requirements.single_valued_labels() {
        assert_eq!(got.get(&k), Some(&v), "{k}");
    }
}

#[test]
fn windows_offers_and_launch_labels_are_the_classes_os() {
    let catalog = catalog::embedded();
    let mut claim = NodeClaim::launching("x", "win", "win", T0);
    claim.instance_types = vec!["m5.large".into(), "c5.xlarge".into()];
    claim.requirements.add(Requirement::single(labels::CAPACITY_TYPE, "on-demand"));
    let linux = offers(&claim, catalog, &BTreeSet::new(), &[], NodeOs::Linux, &[]);
    let windows = offers(&claim, catalog, &BTreeSet::new(), &[], NodeOs::Windows2022, &[]);
    let price = |groups: &[Vec<dovetail_core::catalog::Offer>], t: &str| {
        groups[0].iter().find(|o| o.instance_type == t).map(|o| o.price).unwrap()
    };
    // The licence is 0.046 $/vCPU-hour: m5.large 0.096 + 2 x 0.046, c5.xlarge 0.17 + 4 x 0.046.
    assert!((price(&windows, "m5.large") - 0.188).abs() < 1e-9);
    assert!((price(&windows, "c5.xlarge") - 0.354).abs() < 1e-9);
    assert!((price(&linux, "m5.large") - 0.096).abs() < 1e-9);

    // A Windows claim planned on m5.large and launched as c5.xlarge stays Windows of its build.
    let mut planned =
        catalog.get("m5.large").unwrap().requirements_for(NodeOs::Windows2019).unwrap().single_valued_labels();
    planned.insert(labels::ZONE.into(), "us-east-1a".into());
    let got = launched_labels(&planned, "c5.xlarge", "us-east-1a", CapacityType::OnDemand, catalog);
    assert_eq!(got[labels::INSTANCE_TYPE], "c5.xlarge");
    assert_eq!(got[labels::INSTANCE_CPU], "4");
    assert_eq!(got[labels::OS], "windows");
    assert_eq!(got[labels::WINDOWS_BUILD], "10.0.17763");
    // Planned labels that name no OS (claims written by hand) take the type's, Linux.
    planned.remove(labels::OS);
    planned.remove(labels::WINDOWS_BUILD);
    let linux = launched_labels(&planned, "c5.xlarge", "us-east-1a", CapacityType::OnDemand, catalog);
    assert_eq!((linux[labels::OS].as_str(), linux.get(labels::WINDOWS_BUILD)), ("linux", None));

    // An instance found again by its tag comes priced at the list (Linux) price: recorded for a
    // Windows class, it costs the licence on top, the same as the offer it was launched from.
    let found = dovetail_core::nodeclaim::Launch {
        instance_type: "c5.xlarge".into(),
        zone: "us-east-1a".into(),
        capacity_type: CapacityType::OnDemand,
        price: 0.17,
        instance_id: "i-1".into(),
        image_id: "ami-1".into(),
        subnet_id: "subnet-1".into(),
        security_groups: vec![],
        launched_at: T0,
    };
    let price = |os| provisioning::launch_price(catalog, &found, os).unwrap();
    assert!((price(NodeOs::Windows2022) - 0.354).abs() < 1e-9);
    assert!((price(NodeOs::Linux) - 0.17).abs() < 1e-9);
    let elsewhere = dovetail_core::nodeclaim::Launch { zone: "mars-1a".into(), ..found };
    assert_eq!(provisioning::launch_price(catalog, &elsewhere, NodeOs::Linux), None);
}

#[test]
fn offers_are_capped_at_sixty() {
    let mut claim = NodeClaim::launching("x", "default", "default", T0);
    claim.instance_types = catalog::embedded().types.iter().map(|t| t.name.clone()).take(200).collect();
    for g in offers(&claim, catalog::embedded(), &BTreeSet::new(), &[], NodeOs::Linux, &[]) {
        assert_eq!(g.len(), provisioning::MAX_OFFERS);
    }
}

#[test]
fn claim_names_skip_taken_ones() {
    let pods = vec!["shop/a".to_string()];
    let first = claim_name("default", T0, &pods, 0, &BTreeSet::new());
    let second = claim_name("default", T0, &pods, 0, &BTreeSet::from([first.clone()]));
    assert_ne!(first, second);
    assert_ne!(first, claim_name("default", T0, &pods, 1, &BTreeSet::new()));
    assert_eq!(first, claim_name("default", T0, &pods, 0, &BTreeSet::new()));
}
