//! Deleting a NodePool and its EC2NodeClass over the in-memory world, through the reconciler the
//! functions run: the sweeper holds both with Dovetail's finalizer; the deleted class is kept
//! while the pool uses it (its status says so); the deleted pool's nodes leave one at a time (its
//! budget), then pool and class are released.

// Shared by the simulator's test binaries, each using a part of it.
#[allow(dead_code)]
mod common;

use common::{later, provisioned, reconciler};
use dovetail_core::model::{Budget, BudgetNodes, NodePool};
use dovetail_core::nodeclaim::{Phase, Reason};
use dovetail_core::reconcile::Settings;
use dovetail_sim::block_on;
use dovetail_sim::world::World;

/// Claims of the pool being drained now: disrupted, not yet past their drain.
fn draining(w: &World) -> usize {
    let s = w.lock();
    s.store.claims.values().filter(|c| c.disruption.is_some() && c.phase < Phase::Terminating).count()
}

#[test]
fn a_deleted_pool_drains_within_its_budget_and_its_class_waits_for_it() {
    let mut pool = NodePool::new("default", "default");
    pool.disruption.budgets =
        vec![Budget { nodes: BudgetNodes::Count(1), schedule: None, duration: None, reasons: vec![] }];
    let w = provisioned(pool, 12);
    let r = reconciler(&w, Settings::new("sim", "sweeper"));
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
