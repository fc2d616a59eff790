//! Events over the in-memory world, through the same reconciler the Lambdas run: empty nodes that
//! consolidation would take but a do-not-disrupt annotation protects say so on the Node and its
//! NodeClaim once per dedupe window, however often the sweeper passes; once the annotation goes,
//! their disruption says so on both.

// Shared by the simulator's test binaries, each using a part of it.
#[allow(dead_code)]
mod common;

use common::{later, provisioned, reconciler};
use dovetail_core::events::{DEFAULT_WINDOW, DISRUPTION_BLOCKED, DISRUPTION_TERMINATING};
use dovetail_core::model::NodePool;
use dovetail_core::nodeclaim::Phase;
use dovetail_core::reconcile::Settings;
use dovetail_sim::block_on;
use dovetail_sim::world::World;

/// Events written with this reason on this object, in order.
fn written(w: &World, object: &str, reason: &str) -> Vec<String> {
    let s = w.lock();
    s.kube.events.iter().filter(|e| e.object == object && e.reason == reason).map(|e| e.message.clone()).collect()
}

#[test]
fn blocked_nodes_say_so_once_per_window_and_their_disruption_says_so_on_node_and_claim() {
    let w = provisioned(NodePool::new("default", "default"), 6);
    let r = reconciler(&w, Settings::new("sim", "sweeper"));
    // Every node protected, then emptied: consolidation would delete them all.
    let (node, claim) = {
        let mut s = w.lock();
        for n in s.kube.nodes.values_mut() {
            n.node.annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
        }
        assert!(s.scale("shop/web", 0));
        let c = s.store.claims.values().find(|c| c.phase == Phase::Initialized).expect("an initialized claim");
        (c.node_name.clone().expect("registered"), c.name.clone())
    };
    later(&w, 60);

    // Ten sweeps, 30 s apart: the Event is written at the first and once per window after it.
    for _ in 0..10 {
        block_on(r.sweep()).expect("a clean sweep");
        later(&w, 30);
    }
    let expected = (10 * 30) / DEFAULT_WINDOW.as_secs() as usize + 1;
    for object in [format!("Node/{node}"), format!("NodeClaim/{claim}")] {
        let blocked = written(&w, &object, DISRUPTION_BLOCKED);
        assert_eq!(blocked.len(), expected, "{object}: {blocked:?}");
        assert!(
            blocked[0].contains(&format!("node {node} has karpenter.sh/do-not-disrupt=true")),
            "{object}: {}",
            blocked[0]
        );
    }

    // The protection goes: the next sweeps disrupt the empty nodes, each saying so on both objects.
    {
        let mut s = w.lock();
        for n in s.kube.nodes.values_mut() {
            n.node.annotations.clear();
        }
    }
    for _ in 0..3 {
        block_on(r.sweep()).expect("a clean sweep");
        later(&w, 30);
    }
    let disrupted: Vec<String> = {
        let s = w.lock();
        s.store.claims.values().filter(|c| c.disruption.is_some()).map(|c| c.name.clone()).collect()
    };
    assert!(disrupted.contains(&claim), "{claim} is disrupted: {disrupted:?}");
    let on_claim = written(&w, &format!("NodeClaim/{claim}"), DISRUPTION_TERMINATING);
    assert_eq!(on_claim.len(), 1, "{on_claim:?}");
    assert!(on_claim[0].starts_with("disrupting for Empty: deleting empty node"), "{}", on_claim[0]);
    assert_eq!(written(&w, &format!("Node/{node}"), DISRUPTION_TERMINATING), on_claim);
}
