use std::time::Duration;

use dovetail_core::catalog::CapacityType;
use dovetail_core::catalog::Offer;
use dovetail_core::labels;
use dovetail_core::model::{LabelSelector, NodeClass, Pod};
use dovetail_core::nodeclaim::drain::EvictionResult;
use dovetail_core::nodeclaim::NodeClaim;
use dovetail_core::reconcile::ports::{Cloud, Kube, LaunchOutcome, LaunchRequest, Queue};
use dovetail_core::resources::Resources;

use super::*;
use crate::block_on;

const GIB: i64 = 1 << 30;

fn world(config: WorldConfig) -> World {
    World::new(config)
}

/// No spot interruptions: tests that are about something else stay about it.
fn quiet() -> WorldConfig {
    WorldConfig { interruption_multiplier: 0.0, ..WorldConfig::default() }
}

fn request(w: &World, claim: &str, offers: &[(&str, &str, CapacityType, f64)]) -> LaunchRequest {
    let class = NodeClass { name: "default".into(), ..NodeClass::default() };
    let resolved = block_on(w.ports().cloud.resolve(&class)).unwrap();
    let mut c = NodeClaim::launching(claim, "default", "default", w.now());
    c.labels.insert(labels::NODEPOOL.into(), "default".into());
    c.labels.insert(labels::NODECLAIM.into(), claim.into());
    LaunchRequest {
        claim: c,
        class,
        resolved,
        offers: offers
            .iter()
            .map(|(t, z, ct, p)| Offer {
                instance_type: t.to_string(),
                zone: z.to_string(),
                capacity_type: *ct,
                price: *p,
                reservation: None,
            })
            .collect(),
    }
}

/// Launches one instance for claim `claim`, lets it boot and register, and removes the
/// unregistered taint as the reconciler would; returns the node's name.
fn running_node(w: &World, claim: &str, (instance_type, capacity, price): (&str, CapacityType, f64)) -> String {
    let ports = w.ports();
    let req = request(w, claim, &[(instance_type, "us-east-1a", capacity, price)]);
    launched(block_on(ports.cloud.launch(&req)).unwrap());
    w.advance(w.now().plus(Duration::from_secs(61)));
    let node = w.lock().kube.nodes.keys().next().cloned().unwrap();
    block_on(ports.kube.remove_taint(&node, labels::TAINT_UNREGISTERED)).unwrap();
    node
}

fn launched(outcome: LaunchOutcome) -> dovetail_core::nodeclaim::Launch {
    match outcome {
        LaunchOutcome::Launched(l) => l,
        other => panic!("expected a launch, got {other:?}"),
    }
}

#[test]
fn launch_is_idempotent_and_picks_the_cheapest_offer() {
    let w = world(WorldConfig::default());
    let cloud = w.ports().cloud;
    let req = request(
        &w,
        "default-00001",
        &[
            ("m5.large", "us-east-1a", CapacityType::OnDemand, 0.096),
            ("m5.large", "us-east-1b", CapacityType::Spot, 0.03),
        ],
    );
    let a = launched(block_on(cloud.launch(&req)).unwrap());
    assert_eq!((a.zone.as_str(), a.capacity_type), ("us-east-1b", CapacityType::Spot));
    let b = launched(block_on(cloud.launch(&req)).unwrap());
    assert_eq!(a.instance_id, b.instance_id, "the client token makes CreateFleet idempotent");
    assert_eq!(block_on(cloud.find_launched("default-00001")).unwrap().unwrap().instance_id, a.instance_id);
    assert_eq!(w.lock().cloud.instances.len(), 1);
}

#[test]
fn capacity_windows_fail_the_launch_with_the_offerings() {
    let mut config = WorldConfig::default();
    config.capacity_windows.push(CapacityWindow {
        instance_type: Some("m5.large".into()),
        zone: None,
        capacity_type: Some(CapacityType::Spot),
        from: config.start,
        until: config.start.plus(Duration::from_secs(600)),
    });
    let w = world(config);
    let req = request(&w, "c1", &[("m5.large", "us-east-1a", CapacityType::Spot, 0.03)]);
    match block_on(w.ports().cloud.launch(&req)).unwrap() {
        LaunchOutcome::NoCapacity { offerings, message } => {
            assert_eq!(offerings.len(), 1);
            assert!(message.contains("InsufficientInstanceCapacity"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    w.advance(w.now().plus(Duration::from_secs(601)));
    launched(block_on(w.ports().cloud.launch(&req)).unwrap());
}

#[test]
fn booted_instances_register_tainted_and_pods_bind_once_untainted() {
    let w = world(quiet());
    let ports = w.ports();
    {
        let mut s = w.lock();
        for i in 0..3 {
            s.create_pod(Pod::new("default", &format!("p{i}"), Resources::new(500, GIB)), None, None);
        }
        s.settle();
        assert_eq!(s.queues.doorbells.len(), 3, "one doorbell per newly unschedulable pod");
        assert_eq!(s.kube.provisionable().count(), 3);
    }
    let req = request(&w, "c1", &[("m5.xlarge", "us-east-1a", CapacityType::OnDemand, 0.192)]);
    let l = launched(block_on(ports.cloud.launch(&req)).unwrap());
    w.advance(w.now().plus(Duration::from_secs(61)));
    let state = block_on(ports.kube.read()).unwrap();
    assert_eq!(state.nodes.len(), 1);
    let node = &state.nodes[0];
    assert_eq!(node.provider_id.as_deref(), Some(l.provider_id().as_str()));
    assert_eq!(node.labels[labels::INSTANCE_TYPE], "m5.xlarge");
    assert_eq!(node.labels[labels::CAPACITY_TYPE], "on-demand");
    // As from a real launch template: the pool's labels, not the claim's name (registration adds it).
    assert_eq!(node.labels.get(labels::NODECLAIM), None);
    assert_eq!(node.labels[labels::NODEPOOL], "default");
    assert!(node.taints.iter().any(|t| t.key == labels::TAINT_UNREGISTERED));
    assert_eq!(state.pending.len(), 3, "the unregistered taint keeps pods off");
    {
        let s = w.lock();
        // A node doorbell for the provisioner, and a resume for its claim.
        assert_eq!(s.queues.doorbells.len(), 4);
        assert_eq!(s.queues.interruptions.len(), 1);
    }
    block_on(ports.kube.remove_taint(&node.name, labels::TAINT_UNREGISTERED)).unwrap();
    w.lock().settle();
    let state = block_on(ports.kube.read()).unwrap();
    assert!(state.pending.is_empty());
    assert_eq!(state.nodes[0].pods.len(), 3);
    let s = w.lock();
    assert_eq!(s.stats.waits_ms.len(), 3);
    assert!(s.stats.waits_ms.iter().all(|w| (30_000..=61_000).contains(w)), "{:?}", s.stats.waits_ms);
}

#[test]
fn evictions_honour_budgets_and_controllers_replace_pods() {
    let w = world(quiet());
    let ports = w.ports();
    let node = running_node(&w, "c1", ("m5.2xlarge", CapacityType::OnDemand, 0.384));
    {
        let mut s = w.lock();
        let template = Pod::new("shop", "web-abc", Resources::new(500, GIB)).with_labels(&[("app", "web")]);
        s.add_workload("Deployment/shop/web", Workload::replicas(ReplicaKind::Deployment, template, 3));
        s.kube.pdbs.push(PdbSpec {
            namespace: "shop".into(),
            name: "web".into(),
            selector: LabelSelector::from_labels(&[("app", "web")]),
            min_available: Some(IntOrPercent::Int(2)),
            max_unavailable: None,
        });
        s.settle();
        assert_eq!(s.kube.nodes[&node].pods.len(), 3);
    }
    assert_eq!(block_on(ports.kube.evict("shop", "web-abc-0")).unwrap(), EvictionResult::Accepted);
    // One of three gone, its replacement pending: two healthy is the minimum.
    assert_eq!(block_on(ports.kube.evict("shop", "web-abc-1")).unwrap(), EvictionResult::Refused);
    assert_eq!(block_on(ports.kube.evict("shop", "nope")).unwrap(), EvictionResult::NotFound);
    {
        let mut s = w.lock();
        s.settle();
        assert!(s.kube.names.contains_key("shop/web-abc-3"), "the ReplicaSet replaced the evicted pod");
    }
    w.advance(w.now().plus(Duration::from_secs(10)));
    let s = w.lock();
    assert!(!s.kube.names.contains_key("shop/web-abc-0"), "the evicted pod stopped");
    assert_eq!(s.kube.workloads["Deployment/shop/web"].pods.len(), 3);
    assert_eq!((s.stats.evictions, s.stats.evictions_refused), (1, 1));
}

#[test]
fn a_nodes_last_pod_event_follows_binds_and_removals_in_virtual_time() {
    let w = world(quiet());
    let ports = w.ports();
    let node = running_node(&w, "c1", ("m5.2xlarge", CapacityType::OnDemand, 0.384));
    let last = || {
        let state = block_on(ports.kube.read()).unwrap();
        state.nodes.iter().find(|n| n.name == node).expect("node").last_pod_event
    };
    // Registration is not a pod event.
    assert_eq!(last(), None);

    // A Job pod binds, then finishes five minutes later: both move the time.
    let bound = {
        let mut s = w.lock();
        s.create_pod(Pod::new("batch", "job-1", Resources::new(500, GIB)), None, Some(Duration::from_secs(300)));
        s.settle();
        s.now
    };
    assert_eq!(w.lock().kube.pod("batch/job-1").and_then(|p| p.pod.node_name.clone()), Some(node.clone()));
    assert_eq!(last(), Some(bound));
    w.advance(bound.plus(Duration::from_secs(600)));
    assert_eq!(last(), Some(bound.plus(Duration::from_secs(300))), "the Job pod left when it succeeded");

    // A pod being deleted leaves at its deletion, not when it has finished stopping.
    let deleted = {
        let mut s = w.lock();
        s.create_pod(Pod::new("shop", "web-1", Resources::new(500, GIB)), None, None);
        s.settle();
        s.now
    };
    assert_eq!(last(), Some(deleted));
    w.advance(deleted.plus(Duration::from_secs(60)));
    let stopping = w.now();
    w.lock().stop_pod("shop/web-1", 30);
    assert_eq!(last(), Some(stopping));
    w.advance(stopping.plus(Duration::from_secs(60)));
    assert!(w.lock().kube.pod("shop/web-1").is_none(), "stopped and gone");
    assert_eq!(last(), Some(stopping));
}

#[test]
fn spot_instances_get_a_warning_then_go_and_their_pods_come_back_pending() {
    let w = world(WorldConfig { interruption_multiplier: 5_000.0, rebalance_share: 1.0, ..WorldConfig::default() });
    running_node(&w, "c1", ("m5.xlarge", CapacityType::Spot, 0.07));
    {
        let mut s = w.lock();
        let template = Pod::new("batch", "sim", Resources::new(1000, GIB));
        s.add_workload("Deployment/batch/sim", Workload::replicas(ReplicaKind::Deployment, template, 2));
        s.settle();
    }
    w.advance(w.now().plus(Duration::from_secs(6 * 3600)));
    let mut s = w.lock();
    assert_eq!(s.stats.spot_warnings, 1);
    assert_eq!(s.stats.spot_reclaimed, 1);
    assert_eq!(s.stats.pods_lost, 2, "nobody drained the node");
    assert!(s.kube.nodes.is_empty(), "the node lifecycle controller deleted the Node");
    assert_eq!(s.kube.provisionable().count(), 2);
    let now = s.now;
    let bodies: Vec<String> = s.queues.interruptions.receive(now, 100).into_iter().map(|m| m.body).collect();
    let kinds: Vec<String> = bodies
        .iter()
        .filter_map(|b| serde_json::from_str::<serde_json::Value>(b).ok())
        .filter_map(|v| v.get("detail-type").and_then(|d| d.as_str()).map(str::to_string))
        .collect();
    assert_eq!(
        kinds,
        [
            dovetail_core::interruption::REBALANCE_RECOMMENDATION,
            dovetail_core::interruption::SPOT_INTERRUPTION,
            dovetail_core::interruption::STATE_CHANGE
        ]
    );
    for b in bodies.iter().filter(|b| b.contains("detail-type")) {
        dovetail_core::interruption::parse(b).expect("EventBridge bodies parse");
    }
}

#[test]
fn jobs_run_to_completion_and_requeue_sends_a_delayed_resume() {
    let w = world(quiet());
    let ports = w.ports();
    running_node(&w, "c1", ("c5.xlarge", CapacityType::OnDemand, 0.17));
    {
        let mut s = w.lock();
        let now = s.now;
        let spec = JobSpec {
            parallelism: 2,
            completions: 4,
            duration: Duration::from_secs(600),
            duration_max: None,
            succeeded: 0,
            submitted_at: now,
            finished_at: None,
        };
        s.add_workload("Job/batch/sim-1", Workload::job(Pod::new("batch", "sim-1", Resources::new(1000, GIB)), spec));
        s.settle();
    }
    w.advance(w.now().plus(Duration::from_secs(1201)));
    {
        let s = w.lock();
        assert_eq!(s.stats.pods_succeeded, 4);
        assert_eq!(s.stats.jobs_finished, [Duration::from_secs(1200)]);
    }
    block_on(ports.queue.requeue("c1", Duration::from_secs(10))).unwrap();
    let mut s = w.lock();
    let now = s.now;
    s.queues.interruptions.receive(now, 100); // the registration resume
    assert!(s.queues.interruptions.receive(now, 10).is_empty());
    let later = s.queues.interruptions.receive(now.plus(Duration::from_secs(10)), 10);
    assert_eq!(later[0].body, r#"{"resume":"c1"}"#);
}

#[test]
fn same_seed_same_world() {
    let run = || {
        let w = world(WorldConfig { interruption_multiplier: 500.0, ..WorldConfig::default() });
        for i in 0..5 {
            let req = request(&w, &format!("c{i}"), &[("m5.large", "us-east-1a", CapacityType::Spot, 0.03)]);
            launched(block_on(w.ports().cloud.launch(&req)).unwrap());
        }
        w.advance(w.now().plus(Duration::from_secs(24 * 3600)));
        let s = w.lock();
        (s.instance_records(), s.stats.clone())
    };
    assert_eq!(run(), run());
}

/// A class that selects reservations by id and by the tag `team: ml`.
fn reserving_class() -> NodeClass {
    let spec = serde_json::json!({"capacityReservationSelectorTerms": [{"id": "cr-0a1"}, {"tags": {"team": "ml"}}]});
    NodeClass { name: "default".into(), spec, ..NodeClass::default() }
}

fn reservation(id: &str, count: u32, kind: dovetail_core::catalog::ReservationKind) -> SimReservation {
    SimReservation {
        id: id.into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        count,
        kind,
        tags: Default::default(),
        start: None,
        end: None,
    }
}

/// A reserved launch of m5.large into `id` as the provisioner would ask for it: the offer names
/// the reservation as the class resolved it.
fn reserved_request(w: &World, claim: &str, id: &str) -> LaunchRequest {
    let class = reserving_class();
    let resolved = block_on(w.ports().cloud.resolve(&class)).unwrap();
    let res = resolved.reservations.iter().find(|r| r.id == id).cloned().expect("the class selects it");
    let mut req = request(w, claim, &[("m5.large", "us-east-1a", CapacityType::Reserved, 0.096 / 1e7)]);
    req.offers[0].reservation = Some(res);
    LaunchRequest { class, resolved, ..req }
}

fn available(w: &World, id: &str) -> Option<u32> {
    let resolved = block_on(w.ports().cloud.resolve(&reserving_class())).unwrap();
    resolved.reservations.iter().find(|r| r.id == id).map(|r| r.available)
}

#[test]
fn reserved_launches_take_the_reservation_until_full_and_give_it_back_when_they_end() {
    use dovetail_core::catalog::ReservationKind;
    let mut config = quiet();
    config.reservations.push(reservation("cr-0a1", 2, ReservationKind::Default));
    let mut other = reservation("cr-0b2", 1, ReservationKind::Default);
    other.tags.insert("team".into(), "web".into());
    config.reservations.push(other);
    let w = world(config);
    let cloud = w.ports().cloud;
    // Selected by id; the one tagged for another team is not listed.
    let resolved = block_on(cloud.resolve(&reserving_class())).unwrap();
    let ids: Vec<&str> = resolved.reservations.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["cr-0a1"]);
    assert_eq!(resolved.reservations[0].available, 2);
    assert_eq!(resolved.reservations[0].instance_match_criteria, MATCH_CRITERIA);

    let first = launched(block_on(cloud.launch(&reserved_request(&w, "c1", "cr-0a1"))).unwrap());
    assert_eq!(first.capacity_type, CapacityType::Reserved);
    assert_eq!(available(&w, "cr-0a1"), Some(1), "AvailableInstanceCount counts the running instance");
    launched(block_on(cloud.launch(&reserved_request(&w, "c2", "cr-0a1"))).unwrap());
    assert_eq!(available(&w, "cr-0a1"), Some(0));
    {
        let s = w.lock();
        let i = &s.cloud.instances[&first.instance_id];
        assert_eq!(i.reservation.as_deref(), Some("cr-0a1"));
        // Billed at the nominal price; its list price is the on-demand one it stands in for.
        assert_eq!((i.price, i.list_price), (0.096 / 1e7, 0.096));
    }

    // A third launch finds it full, as EC2 answers ReservationCapacityExceeded.
    let mut full = reserved_request(&w, "c3", "cr-0a1");
    full.offers[0].reservation.as_mut().unwrap().available = 1; // a stale count changes nothing
    match block_on(cloud.launch(&full)).unwrap() {
        LaunchOutcome::NoCapacity { offerings, message } => {
            assert_eq!(offerings[0].capacity_type, CapacityType::Reserved);
            assert!(message.contains("ReservationCapacityExceeded: cr-0a1 is full"), "{message}");
        }
        other => panic!("launched into a full reservation: {other:?}"),
    }
    assert_eq!(w.lock().cloud.instances.len(), 2);

    // The instance ends: the reservation takes one again.
    block_on(cloud.terminate(&first.instance_id)).unwrap();
    assert_eq!(available(&w, "cr-0a1"), Some(1));
    launched(block_on(cloud.launch(&full)).unwrap());
    assert_eq!(available(&w, "cr-0a1"), Some(0));
}

#[test]
fn a_capacity_block_is_listed_only_in_its_window_and_takes_its_instances_back_at_its_end() {
    use dovetail_core::catalog::ReservationKind;
    let mut config = quiet();
    let mut block = reservation("cr-0c3", 1, ReservationKind::CapacityBlock);
    block.tags.insert("team".into(), "ml".into());
    block.start = Some(config.start.plus(Duration::from_secs(3600)));
    block.end = Some(config.start.plus(Duration::from_secs(3 * 3600)));
    config.reservations.push(block.clone());
    let w = world(config);
    assert_eq!(available(&w, "cr-0c3"), None, "not active before its start");
    assert_eq!(
        w.lock().reservation_refusal("cr-0c3", "m5.large", "us-east-1a").as_deref(),
        Some("ReservationCapacityExceeded: cr-0c3 is not active")
    );
    w.advance(w.now().plus(Duration::from_secs(3600)));
    let resolved = block_on(w.ports().cloud.resolve(&reserving_class())).unwrap();
    let listed = &resolved.reservations[0];
    assert_eq!((listed.id.as_str(), listed.kind, listed.available), ("cr-0c3", ReservationKind::CapacityBlock, 1));
    assert_eq!(listed.end, block.end);
    let start = w.lock().config.start;
    let now = w.now();
    assert_eq!(block.hours_within(start, now.plus(Duration::from_secs(24 * 3600))), 2.0);
    assert_eq!(block.hours_within(start, now.plus(Duration::from_secs(1800))), 0.5, "clipped to the run");
    let launch = launched(block_on(w.ports().cloud.launch(&reserved_request(&w, "c1", "cr-0c3"))).unwrap());
    // EC2's expiration warning, 40 minutes before the end, names the block.
    let warned = |w: &World| {
        let mut s = w.lock();
        let now = s.now;
        let bodies: Vec<String> = s.queues.interruptions.receive(now, 10).iter().map(|m| m.body.clone()).collect();
        bodies.iter().any(|b| b.contains("Capacity Block Reservation Expiration Warning") && b.contains("cr-0c3"))
    };
    w.advance(block.end.unwrap().minus(Duration::from_secs(40 * 60 + 1)));
    assert!(!warned(&w), "no warning before the block's last 40 minutes");
    w.advance(block.end.unwrap().minus(Duration::from_secs(40 * 60)));
    assert!(warned(&w), "the expiration warning went to the interruption queue");
    w.advance(block.end.unwrap().minus(Duration::from_secs(1)));
    assert!(w.lock().cloud.instances[&launch.instance_id].ended_at.is_none(), "running to the block's end");
    w.advance(w.now().plus(Duration::from_secs(1)));
    assert_eq!(available(&w, "cr-0c3"), None, "gone once it ended");
    let mut s = w.lock();
    assert_eq!(s.cloud.instances[&launch.instance_id].ended_at, block.end, "EC2 took the instance back at the end");
    let now = s.now;
    let told = s.queues.interruptions.receive(now, 10).iter().any(|m| m.body.contains(&launch.instance_id));
    assert!(told, "a state-change event went to the interruption queue");
}
