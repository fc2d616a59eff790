//! Capacity reservations through the reconciler the functions run, over the in-memory world: the
//! provisioner fills the reservation its class selects before it buys on demand, never puts more
//! instances in it than it holds, and the nodes say which reservation they run in.

// Shared by the simulator's test binaries, each using a part of it.
#[allow(dead_code)]
mod common;

use common::{later, reconciler};
use dovetail_core::catalog::{CapacityType, ReservationKind};
use dovetail_core::labels;
use dovetail_core::model::{NodeClass, NodePool, OwnerKind, Pod};
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

#[test]
fn the_provisioner_fills_the_reservation_first_and_never_over_fills_it() {
    let mut config = WorldConfig { interruption_multiplier: 0.0, ..WorldConfig::default() };
    config.reservations.push(SimReservation {
        id: RESERVATION.into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        count: 2,
        kind: ReservationKind::Default,
        tags: Default::default(),
        start: None,
        end: None,
    });
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
        // 1.5 CPU each: one pod per m5.large, five nodes for two reserved slots.
        let mut web = Pod::new("shop", "web", Resources::new(1500, 2 << 30));
        web.owner = OwnerKind::ReplicaSet;
        s.add_workload("shop/web", Workload::replicas(ReplicaKind::Deployment, web, 5));
        s.settle();
    }
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
