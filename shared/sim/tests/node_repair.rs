//! Node repair end to end over the in-memory world: the sweeper replaces a node whose kubelet
//! stopped reporting once its 30-minute toleration is up, in a pool that opted in (or with repair
//! on for the whole cluster), and its pods run again on new capacity; a pool that did not opt in
//! keeps the node.

// Shared by the simulator's test binaries, each using a part of it.
#[allow(dead_code)]
mod common;

use common::{later, provisioned, reconciler, Plain};
use dovetail_core::disruption::repair::UNHEALTHY;
use dovetail_core::model::{NodePool, NODE_REPAIR_ANNOTATION};
use dovetail_core::nodeclaim::{Phase, Reason};
use dovetail_core::reconcile::Settings;
use dovetail_sim::block_on;
use dovetail_sim::world::World;

fn repairing(w: &World, everywhere: bool) -> Plain {
    reconciler(w, Settings { node_repair: everywhere, ..Settings::new("sim", "sweeper") })
}

/// A world with one pool (annotated for repair when `opted_in`) and pods enough for a few nodes,
/// provisioned and running.
fn world(opted_in: bool) -> World {
    let mut pool = NodePool::new("default", "default");
    if opted_in {
        pool.annotations.insert(NODE_REPAIR_ANNOTATION.into(), "true".into());
        pool.node_repair = true;
    }
    provisioned(pool, 12)
}

/// The node of the first Initialized claim, made `Ready=Unknown` now (its kubelet stopped
/// reporting); returns the node and its claim.
fn fail_a_node(w: &World) -> (String, String) {
    let mut s = w.lock();
    let claim = s.store.claims.values().find(|c| c.phase == Phase::Initialized).expect("an initialized claim").clone();
    let node = claim.node_name.clone().unwrap();
    assert!(!s.kube.nodes[&node].pods.is_empty(), "the failed node runs pods");
    let now = s.now;
    assert!(s.kube.set_condition(&node, "Ready", "Unknown", now));
    (node, claim.name)
}

/// Sweeps every minute for `minutes`.
fn sweep_for(w: &World, r: &Plain, minutes: u64) {
    for _ in 0..minutes {
        later(w, 60);
        block_on(r.sweep()).expect("a clean sweep");
    }
}

fn live_claims(w: &World) -> usize {
    w.lock().store.claims.values().filter(|c| c.phase != Phase::Terminated).count()
}

fn assert_replaced(w: &World, node: &str, claim: &str, before: usize) {
    let s = w.lock();
    let c = &s.store.claims[claim];
    assert_eq!(c.phase, Phase::Terminated, "{c:#?}");
    assert_eq!(c.disruption.as_ref().map(|d| d.reason), Some(Reason::Unhealthy));
    assert!(!s.kube.nodes.contains_key(node), "node {node} is still there");
    let event = s.kube.events.iter().find(|e| e.reason == UNHEALTHY).expect("an Unhealthy Event");
    assert_eq!(event.object, format!("Node/{node}"));
    assert!(event.message.contains("Ready=Unknown since"), "{}", event.message);
    // Its pods went pending when the node went and run again elsewhere (room the provisioner
    // launched, or room there was: no launch-first replacement).
    assert_eq!(s.kube.provisionable().count(), 0, "every pod runs again");
    let running = s.kube.pods.values().filter(|p| p.pod.node_name.is_some()).count();
    assert!(running >= 12, "{running} pods running");
    drop(s);
    assert!(live_claims(w) + 1 >= before, "the pool did not shrink by more than the node");
}

#[test]
fn an_unhealthy_node_of_a_pool_with_repair_is_replaced_after_its_toleration() {
    let w = world(true);
    let r = repairing(&w, false);
    let before = live_claims(&w);
    assert!(before >= 3, "{before} claims");
    let (node, claim) = fail_a_node(&w);
    sweep_for(&w, &r, 29);
    assert!(w.lock().store.claims[&claim].disruption.is_none(), "29 minutes: within the toleration");
    sweep_for(&w, &r, 10);
    assert_replaced(&w, &node, &claim, before);
}

#[test]
fn repair_on_for_the_cluster_covers_a_pool_without_the_annotation() {
    let w = world(false);
    let r = repairing(&w, true);
    let before = live_claims(&w);
    let (node, claim) = fail_a_node(&w);
    sweep_for(&w, &r, 40);
    assert_replaced(&w, &node, &claim, before);
}

#[test]
fn an_unhealthy_node_of_a_pool_without_repair_stays() {
    let w = world(false);
    let r = repairing(&w, false);
    let (node, claim) = fail_a_node(&w);
    sweep_for(&w, &r, 60);
    let s = w.lock();
    assert!(s.kube.nodes.contains_key(&node));
    assert_eq!(s.store.claims[&claim].phase, Phase::Initialized);
    assert!(s.kube.events.iter().all(|e| e.reason != UNHEALTHY));
}
