//! Cost limits over the in-memory world: a pool's `limits[dovetail.dev/cost-per-hour]`, and the
//! cluster-wide limit the functions read from `DOVETAIL_COST_LIMIT`, stop growth at the budget;
//! the pods the money does not cover stay pending, the pool gets a `CostLimitReached` Event, and
//! the sweeper's status for it says the limit binds and what the pool costs.

// Shared by the simulator's test binaries, each using a part of it.
#[allow(dead_code)]
mod common;

use common::{later, provisioned, provisioned_with, reconciler};
use dovetail_core::events::COST_LIMIT_REACHED;
use dovetail_core::labels;
use dovetail_core::model::{cost_micros, NodePool, LIMIT_COST};
use dovetail_core::nodeclaim::Phase;
use dovetail_core::reconcile::Settings;
use dovetail_core::requirements::{Operator, Requirement};
use dovetail_sim::block_on;
use dovetail_sim::world::{State, World};

/// On-demand m5.large only ($0.096/h in the catalog): each 1.5-CPU pod takes a node of its own.
fn m5_large_pool() -> NodePool {
    let mut pool = NodePool::new("default", "default");
    pool.requirements.add(Requirement::new(labels::INSTANCE_TYPE, Operator::In, &["m5.large"]).unwrap());
    pool.requirements.add(Requirement::new(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]).unwrap());
    pool
}

fn live_claims(w: &World) -> usize {
    w.lock().store.claims.values().filter(|c| c.phase != Phase::Terminated).count()
}

/// What the live claims were launched at, in $/h.
fn spent(s: &State) -> f64 {
    let live = s.store.claims.values().filter(|c| c.phase != Phase::Terminated);
    live.filter_map(|c| c.launch.as_ref()).map(|l| l.price).sum()
}

/// Sweeps once, a minute on, with `settings`.
fn sweep(w: &World, settings: Settings) {
    later(w, 60);
    block_on(reconciler(w, settings).sweep()).expect("a clean sweep");
}

#[test]
fn a_pool_stops_at_its_cost_limit_and_says_so() {
    let mut pool = m5_large_pool();
    // Two nodes and a bit: the six pods want six.
    pool.limits.insert(LIMIT_COST.into(), cost_micros(0.2));
    let w = provisioned(pool, 6);
    sweep(&w, Settings::new("sim", "sweeper"));
    assert_eq!(live_claims(&w), 2);
    let s = w.lock();
    assert!(spent(&s) <= 0.2, "${}/h", spent(&s));
    assert_eq!(s.kube.provisionable().count(), 4, "the pods the budget does not cover wait");
    let event = s.kube.events.iter().find(|e| e.reason == COST_LIMIT_REACHED).expect("a CostLimitReached Event");
    assert_eq!(event.object, "NodePool/default");
    assert!(event.message.contains("limit on dovetail.dev/cost-per-hour reached"), "{}", event.message);
    let status = &s.kube.pool_status["default"];
    assert_eq!(status.resources.get(LIMIT_COST), cost_micros(spent(&s)));
    let cost = status.cost_limit.as_ref().expect("a cost limit applies");
    assert!(cost.reached, "{cost:?}");
    assert!(cost.message.starts_with("the pool's capacity costs $0.1920/h of its limit $0.2000/h"), "{cost:?}");
}

#[test]
fn the_cluster_wide_cost_limit_stops_every_pool_and_a_raise_lets_them_grow() {
    let limited = |dollars: f64| Settings { cost_limit: Some(cost_micros(dollars)), ..Settings::new("sim", "sweeper") };
    let w = provisioned_with(m5_large_pool(), 6, limited(0.3));
    sweep(&w, limited(0.3));
    assert_eq!(live_claims(&w), 3, "three nodes fit in $0.30/h");
    {
        let s = w.lock();
        assert_eq!(s.kube.provisionable().count(), 3);
        let cost = s.kube.pool_status["default"].cost_limit.clone().expect("the cluster-wide limit applies");
        assert!(cost.reached && cost.message.contains("of the cluster-wide limit $0.3000/h"), "{cost:?}");
        assert!(spent(&s) <= 0.3, "${}/h", spent(&s));
    }
    // Raised: the pods that waited get their nodes, and the condition says the limit no longer binds.
    let r = reconciler(&w, limited(1.0));
    for _ in 0..8 {
        later(&w, 30);
        block_on(r.provision()).expect("a clean provisioning pass");
    }
    sweep(&w, limited(1.0));
    assert_eq!(live_claims(&w), 6);
    let s = w.lock();
    let cost = s.kube.pool_status["default"].cost_limit.clone().expect("the cluster-wide limit applies");
    assert!(!cost.reached, "{cost:?}");
}
