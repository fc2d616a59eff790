//! kube-scheduler's part: bind pending pods to registered nodes that can run them.
//!
//! The predicates are the core scheduler's (requests, selectors and affinities, taints, topology
//! spread, host ports, volume zones) — the same ones every Dovetail decision honours — run with no
//! NodePools, so it only places pods on nodes that exist and opens nothing. Pods it cannot place
//! are marked Unschedulable, which is what the forwarder's webhook reports as a doorbell.

use dovetail_core::model::Node;
use dovetail_core::scheduler::schedule;
use dovetail_core::snapshot::Snapshot;

use super::State;

/// Binds what can be bound; returns the pods that have just become unschedulable.
pub(super) fn bind(s: &mut State) -> Vec<String> {
    if !s.kube.bind_needed {
        return vec![];
    }
    s.kube.bind_needed = false;
    let pending: Vec<_> = s.kube.unbound().filter(|p| !p.pod.is_daemon()).map(|p| p.pod.clone()).collect();
    if pending.is_empty() {
        return vec![];
    }
    let keys: Vec<String> = pending.iter().map(|p| p.key()).collect();
    // Nodes whose kubelet stopped are NotReady: kube-scheduler skips them (their taint says so).
    let nodes: Vec<Node> = s
        .kube
        .nodes
        .values()
        .filter(|n| n.node.ready && !n.node.unschedulable)
        .filter_map(|n| s.kube.node_view(&n.node.name))
        .collect();
    let mut newly = Vec::new();
    if !nodes.is_empty() {
        let snap = Snapshot { pods: pending, nodes, namespaces: s.kube.namespaces.clone(), ..Snapshot::default() };
        let plan = schedule(&snap, &s.catalog);
        for placement in plan.existing {
            for pod in placement.pods {
                s.bind_pod(&pod, &placement.node);
            }
        }
    }
    for key in keys {
        let Some(p) = s.kube.pods.get_mut(&key) else { continue };
        if p.pod.node_name.is_none() && !p.terminating && !p.unschedulable {
            p.unschedulable = true;
            newly.push(key);
        }
    }
    newly
}
