//! Capacity reservations through the reconciler the functions run, over the in-memory world: the
//! provisioner fills the reservation its class selects before it buys on demand, never puts more
//! instances in it than it holds, and the nodes say which reservation they run in; the
//! interruption function drains a Capacity Block's nodes on EC2's expiration warning and replaces
//! them outside the block.

// Shared by the simulator's test binaries, each using a part of it.
#[allow(dead_code)]
mod common;

use std::time::Duration;

use common::{later, reconciler};
use dovetail_core::catalog::{CapacityType, ReservationKind};
use dovetail_core::labels;
use dovetail_core::model::{NodeClass, NodePool, OwnerKind, Pod};
use dovetail_core::nodeclaim::{Phase, Reason};
use dovetail_core::reconcile::QueueMessage;
use dovetail_core::reconcile::Settings;
use dovetail_core::requirements::{Operator, Requirement};
use dovetail_core::resources::Resources;
use dovetail_sim::block_on;
use dovetail_sim::world::{ReplicaKind, SimReservation, State, Workload, World, WorldConfig};

const RESERVATION: &str = "cr-0a1b2c3d4e5f60001";

/// Live instances in the reservation.
fn in_reservation(s: &State) -> Vec<&str> {
    let live = s.cloud.instances.values().filter(|i| i.ended_at.is_none());
    live.filter(|i| i.reservation.as_deref() == Some(RESERVATION)).map(|i| i.instance.id.as_str()).collect()
}

/// A quiet world holding `reservation`, whose one pool may launch m5.large `reserved` (in it) or
/// on-demand, with `replicas` pods of 1.5 CPU (one per node) under a Deployment.
fn world(reservation: SimReservation, replicas: usize) -> World {
    let mut config = WorldConfig { interruption_multiplier: 0.0, ..WorldConfig::default() };
    config.reservations.push(reservation);
    let w = World::new(config);
    {
        let mut s = w.lock();
        let mut pool = NodePool::new("default", "default");
        pool.requirements.add(Requirement::new(labels::INSTANCE_TYPE, Operator::In, &["m5.large"]).unwrap());
        pool.requirements
            .add(Requirement::new(labels::CAPACITY_TYPE, Operator::In, &["reserved", "on-demand"]).unwrap());
        s.kube.nodepools.push(pool);
        let spec = serde_json::json!({"capacityReservationSelectorTerms": [{"id": RESERVATION}]});
        s.kube.nodeclasses.push(NodeClass { name: "default".into(), spec, ..NodeClass::default() });
        // 1.5 CPU each: one pod per m5.large.
        let mut web = Pod::new("shop", "web", Resources::new(1500, 2 << 30));
        web.owner = OwnerKind::ReplicaSet;
        s.add_workload("shop/web", Workload::replicas(ReplicaKind::Deployment, web, replicas));
        s.settle();
    }
    w
}

#[test]
fn the_provisioner_fills_the_reservation_first_and_never_over_fills_it() {
    let odcr = SimReservation {
        id: RESERVATION.into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        count: 2,
        kind: ReservationKind::Default,
        tags: Default::default(),
        start: None,
        end: None,
    };
    // Five nodes for two reserved slots.
    let w = world(odcr, 5);
    let r = reconciler(&w, Settings::new("sim", "provisioner"));
    for _ in 0..8 {
        later(&w, 30);
        block_on(r.provision()).expect("a clean provisioning pass");
        let s = w.lock();
        assert!(in_reservation(&s).len() <= 2, "over-filled: {:?}", in_reservation(&s));
    }

    let s = w.lock();
    assert_eq!(in_reservation(&s).len(), 2, "the reservation is filled before anything is bought");
    assert_eq!(s.reservation_available(RESERVATION), 0);
    let live: Vec<_> = s.cloud.instances.values().filter(|i| i.ended_at.is_none()).collect();
    assert_eq!(live.len(), 5, "the rest on demand");
    for i in &live {
        let reserved = i.reservation.is_some();
        assert_eq!(i.capacity_type == CapacityType::Reserved, reserved, "{}", i.instance.id);
        // Billed at the nominal price when reserved; the list price is on demand either way.
        assert_eq!(i.list_price, 0.096, "{}", i.instance.id);
        assert!(if reserved { i.price < 1e-6 } else { i.price == 0.096 }, "{} at ${}", i.instance.id, i.price);
    }
    assert_eq!(s.kube.provisionable().count(), 0, "every pod has a node");
    let reserved_nodes: Vec<_> = s
        .kube
        .nodes
        .values()
        .filter(|n| n.node.labels.get(labels::CAPACITY_TYPE).map(String::as_str) == Some(labels::CAPACITY_RESERVED))
        .collect();
    assert_eq!(reserved_nodes.len(), 2);
    for n in reserved_nodes {
        assert_eq!(n.node.labels.get(labels::CAPACITY_RESERVATION_ID).map(String::as_str), Some(RESERVATION));
    }
}

#[test]
fn a_capacity_block_expiration_warning_drains_its_nodes_and_replaces_them_outside_the_block() {
    // A block of three ending in two hours, two of them used.
    let start = World::new(WorldConfig::default()).now();
    let end = start.plus(Duration::from_secs(2 * 3600));
    let block = SimReservation {
        id: RESERVATION.into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        count: 3,
        kind: ReservationKind::CapacityBlock,
        tags: Default::default(),
        start: None,
        end: Some(end),
    };
    let w = world(block, 2);
    let r = reconciler(&w, Settings::new("sim", "functions"));
    for _ in 0..8 {
        later(&w, 30);
        block_on(r.provision()).expect("a clean provisioning pass");
    }
    let in_block: Vec<String> = in_reservation(&w.lock()).into_iter().map(str::to_string).collect();
    assert_eq!(in_block.len(), 2, "both pods' nodes in the block");

    // The simulated EC2's warning, 40 minutes before the end, names the block and not its
    // instances; it is in the interruption queue's next batch (with the provisioner's resumes).
    w.advance(end.minus(Duration::from_secs(40 * 60)));
    let batch: Vec<QueueMessage> = {
        let mut s = w.lock();
        let now = s.now;
        let received = s.queues.interruptions.receive(now, 10);
        received.into_iter().map(|m| QueueMessage { id: m.id, body: m.body }).collect()
    };
    let warnings = batch.iter().filter(|m| m.body.contains("Capacity Block Reservation Expiration Warning"));
    assert_eq!(warnings.filter(|m| m.body.contains(RESERVATION)).count(), 1, "{batch:?}");
    let out = block_on(r.interrupt(&batch));
    assert!(out.failed.is_empty(), "{:?}", out.report.errors);
    assert_eq!(out.report.interruptions.get("capacity_block_expiring"), Some(&1), "{:?}", out.report.interruptions);

    let s = w.lock();
    let drained: Vec<_> = s
        .store
        .claims
        .values()
        .filter(|c| c.launch.as_ref().is_some_and(|l| in_block.contains(&l.instance_id)))
        .collect();
    assert_eq!(drained.len(), 2);
    let mut replacements = vec![];
    for c in &drained {
        assert_eq!(c.phase, Phase::Draining, "{}", c.name);
        let d = c.disruption.as_ref().expect("disrupted");
        assert_eq!(d.reason, Reason::CapacityReservationInterrupted);
        // EC2 starts terminating the block's instances 30 minutes before its end.
        assert_eq!(d.reclaim_at, Some(end.minus(Duration::from_secs(30 * 60))));
        assert_eq!(d.replacements.len(), 1, "{}: {d:?}", c.name);
        replacements.extend(d.replacements.iter().cloned());
    }
    // The replacements were launched in the same invocation, on demand: the block's third
    // instance is no home for them.
    for name in &replacements {
        let claim = s.store.claims.get(name).unwrap_or_else(|| panic!("replacement {name} written"));
        let launch = claim.launch.as_ref().unwrap_or_else(|| panic!("replacement {name} launched"));
        assert_eq!(launch.capacity_type, CapacityType::OnDemand, "{name}");
        assert!(!in_reservation(&s).contains(&launch.instance_id.as_str()), "{name}");
    }
    // The drain began at once: the block's pods were asked to leave.
    assert!(s.stats.evictions >= 2, "{:#?}", out.report.decisions);
}
