//! Deleting a NodePool and its EC2NodeClass over the in-memory world, through the reconciler the
//! functions run: the sweeper holds both with Dovetail's finalizer; the deleted class is kept
//! while the pool uses it (its status says so); the deleted pool's nodes leave one at a time (its
//! budget), then pool and class are released.

// Shared by the simulator's test binaries; this one needs only the clock.
#[allow(dead_code)]
mod common;

use common::later;
use dovetail_core::model::{Budget, BudgetNodes, NodeClass, NodePool, OwnerKind, Pod};
use dovetail_core::nodeclaim::{Phase, Reason};
use dovetail_core::reconcile::{Ports, Reconciler, Settings};
use dovetail_core::resources::Resources;
use dovetail_sim::block_on;
use dovetail_sim::world::{ReplicaKind, SimClock, SimCloud, SimKube, SimQueue, SimStore, Workload, World, WorldConfig};

type Plain = Reconciler<SimKube, SimCloud, SimStore, SimQueue, SimClock>;

fn reconciler(w: &World) -> Plain {
    let p = w.ports();
    let ports = Ports { kube: p.kube, cloud: p.cloud, store: p.store, queue: p.queue, clock: p.clock };
    Reconciler::new(ports, Settings::new("sim", "sweeper"))
}

/// Claims of the pool being drained now: disrupted, not yet past their drain.
fn draining(w: &World) -> usize {
    let s = w.lock();
    s.store.claims.values().filter(|c| c.disruption.is_some() && c.phase < Phase::Terminating).count()
}

#[test]
fn a_deleted_pool_drains_within_its_budget_and_its_class_waits_for_it() {
    let w = World::new(WorldConfig { interruption_multiplier: 0.0, ..WorldConfig::default() });
    {
        let mut s = w.lock();
        let mut pool = NodePool::new("default", "default");
        pool.disruption.budgets =
            vec![Budget { nodes: BudgetNodes::Count(1), schedule: None, duration: None, reasons: vec![] }];
        s.kube.nodepools.push(pool);
        s.kube.nodeclasses.push(NodeClass { name: "default".into(), ..NodeClass::default() });
        let mut web = Pod::new("shop", "web", Resources::new(1500, 2 << 30));
        web.owner = OwnerKind::ReplicaSet;
        s.add_workload("shop/web", Workload::replicas(ReplicaKind::Deployment, web, 12));
        s.settle();
    }
    let r = reconciler(&w);
    for _ in 0..8 {
        later(&w, 30);
        block_on(r.provision()).expect("a clean provisioning pass");
    }
    later(&w, 60);
    block_on(r.sweep()).expect("a clean sweep");
    let nodes = {
        let s = w.lock();
        assert!(s.kube.nodepools[0].termination_finalizer, "the sweeper holds the pool");
        assert!(s.kube.nodeclasses[0].termination_finalizer, "and the class");
        s.store.claims.values().filter(|c| c.phase == Phase::Initialized).count()
    };
    assert!(nodes >= 3, "{nodes} nodes");

    // The class first: refused while the pool uses it.
    w.lock().kube.nodeclasses[0].deleting = true;
    later(&w, 60);
    block_on(r.sweep()).expect("a clean sweep");
    {
        let s = w.lock();
        assert_eq!(s.kube.nodeclasses.len(), 1, "the class is kept");
        let blocked = s.kube.class_status["default"].deletion_blocked.clone().expect("DeletionBlocked");
        assert!(blocked.contains("NodePool default"), "{blocked}");
    }

    // Then the pool: one node at a time, then both go.
    w.lock().kube.nodepools[0].deleting = true;
    let mut most = 0;
    for _ in 0..60 {
        later(&w, 60);
        block_on(r.sweep()).expect("a clean sweep");
        most = most.max(draining(&w));
        if w.lock().kube.nodepools.is_empty() {
            break;
        }
    }
    let s = w.lock();
    assert!(s.kube.nodepools.is_empty(), "the pool was released");
    assert!(s.kube.nodeclasses.is_empty(), "and then its class");
    assert_eq!(most, 1, "one node at a time");
    let ended: Vec<_> = s.store.claims.values().filter(|c| c.launch.is_some()).collect();
    assert!(ended.len() >= nodes);
    for c in ended {
        assert_eq!(c.phase, Phase::Terminated, "{}", c.name);
        assert_eq!(c.disruption.as_ref().map(|d| d.reason), Some(Reason::NodePoolDeleted), "{}", c.name);
    }
    assert!(s.kube.nodes.is_empty(), "no node is left");
}
