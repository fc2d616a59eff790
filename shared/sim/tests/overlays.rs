//! NodeOverlays through the reconciler the functions run, over the in-memory world: the
//! provisioner buys by the effective price, the instance is billed at it, and an overlay that
//! conflicts with another is reported and left out while the other applies; the sweeper publishes
//! each overlay's status, an invalid one's included.

// Shared by the simulator's test binaries, each using a part of it.
#[allow(dead_code)]
mod common;

use common::{later, reconciler};
use dovetail_core::catalog::CapacityType;
use dovetail_core::labels;
use dovetail_core::model::{NodeClass, NodePool, OwnerKind, Pod};
use dovetail_core::overlay::{NodeOverlay, PriceChange};
use dovetail_core::reconcile::ports::{Invalid, OverlayProblem, OverlayStatus};
use dovetail_core::reconcile::Settings;
use dovetail_core::requirements::{Operator, Requirement};
use dovetail_core::resources::Resources;
use dovetail_sim::block_on;
use dovetail_sim::world::{ReplicaKind, Workload, World, WorldConfig};

fn family(name: &str, weight: i32, families: &[&str], price: PriceChange) -> NodeOverlay {
    NodeOverlay {
        name: name.into(),
        requirements: [Requirement::new(labels::INSTANCE_FAMILY, Operator::In, families).unwrap()]
            .into_iter()
            .collect(),
        weight,
        price: Some(price),
        capacity: vec![],
    }
}

#[test]
fn the_functions_buy_and_bill_at_the_effective_price() {
    let w = World::new(WorldConfig { interruption_multiplier: 0.0, ..WorldConfig::default() });
    {
        let mut s = w.lock();
        let mut pool = NodePool::new("default", "default");
        pool.requirements.add(Requirement::single(labels::CAPACITY_TYPE, "on-demand"));
        pool.requirements
            .add(Requirement::new(labels::INSTANCE_TYPE, Operator::In, &["c5.large", "m6i.large"]).unwrap());
        s.kube.nodepools.push(pool);
        s.kube.nodeclasses.push(NodeClass { name: "default".into(), ..NodeClass::default() });
        // 60% off m6i makes it cheaper than c5; two overlays of one weight on c5 conflict, and
        // only the one taken first (the later name) applies.
        s.kube.overlays = vec![
            family("m6i-deal", 5, &["m6i"], PriceChange::Percent(-60.0)),
            family("a-c5", 1, &["c5"], PriceChange::Add(1.0)),
            family("b-c5", 1, &["c5"], PriceChange::Add(2.0)),
        ];
        s.kube.invalid.push(Invalid {
            object: "NodeOverlay/typo".into(),
            field: "spec.priceAdjustment".into(),
            message: "\"28%\" is not a price adjustment".into(),
        });
        let mut pod = Pod::new("shop", "web", Resources::new(500, 1 << 30));
        pod.owner = OwnerKind::ReplicaSet;
        s.add_workload("shop/web", Workload::replicas(ReplicaKind::Deployment, pod, 2));
        s.settle();
    }
    let r = reconciler(&w, Settings::new("sim", "provisioner"));
    let mut errors = Vec::new();
    for _ in 0..6 {
        later(&w, 30);
        errors.extend(block_on(r.provision()).expect("a provisioning pass").errors);
    }
    assert!(
        errors.iter().any(|e| e == "NodeOverlay/a-c5 is not applied: NodeOverlay/b-c5 has the same weight and changes the same price or resource"),
        "{errors:?}"
    );

    let s = w.lock();
    assert!(!s.kube.nodes.is_empty(), "nothing registered");
    for n in s.kube.nodes.values() {
        let instance = &s.cloud.instances[&n.instance_id];
        assert_eq!(n.node.labels[labels::INSTANCE_TYPE], "m6i.large", "{}", n.node.name);
        let list = s
            .catalog
            .get("m6i.large")
            .unwrap()
            .offerings
            .iter()
            .find(|o| o.zone == instance.instance.zone && o.capacity_type == CapacityType::OnDemand)
            .unwrap()
            .price;
        assert!(
            (instance.price - list * 0.4).abs() < 1e-9,
            "{}: billed {} for a list price of {list}",
            n.node.name,
            instance.price
        );
    }

    drop(s);

    block_on(reconciler(&w, Settings::new("sim", "sweeper")).sweep()).expect("a sweep");
    let s = w.lock();
    let status = |name: &str| s.kube.overlay_status.get(name).cloned();
    let applied = |name: &str| Some(OverlayStatus { name: name.into(), problem: None });
    assert_eq!(status("m6i-deal"), applied("m6i-deal"));
    assert_eq!(status("b-c5"), applied("b-c5"));
    assert_eq!(status("a-c5").and_then(|o| o.problem), Some(OverlayProblem::Conflict("b-c5".into())));
    assert_eq!(
        status("typo").and_then(|o| o.problem),
        Some(OverlayProblem::Invalid("spec.priceAdjustment: \"28%\" is not a price adjustment".into()))
    );
}
