//! kube-scheduler's part: bind pending pods to registered nodes that can run them.
//!
//! The predicates are the core scheduler's (requests, selectors and affinities, taints, topology
//! spread, host ports, volume zones) — the same ones every Dovetail decision honours — run with no
//! NodePools, so it only places pods on nodes that exist and opens nothing. Pods it cannot place
//! are marked Unschedulable, which is what the forwarder's webhook reports as a doorbell.

use dovetail_core::labels::HOSTNAME;
use dovetail_core::model::{Node, Pod};
use dovetail_core::resources::Resources;
use dovetail_core::scheduler::schedule;
use dovetail_core::snapshot::Snapshot;

use super::{SimNode, State};

/// Whether where a pod may go depends on pods of other nodes (spreads, pod affinities).
fn topological(p: &Pod) -> bool {
    !p.topology_spread.is_empty()
        || !p.pod_affinity.is_empty()
        || !p.pod_anti_affinity.is_empty()
        || !p.preferred_pod_affinity.is_empty()
        || !p.preferred_pod_anti_affinity.is_empty()
}

/// Room left on a node, from its pods' requests.
fn free(s: &State, n: &SimNode) -> Resources {
    let mut free = n.node.allocatable.clone();
    for p in n.pods.iter().filter_map(|k| s.kube.pods.get(k)) {
        free.sub(&p.pod.requests);
    }
    free
}

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
    // A full node can take none of these pods, so leaving it out changes nothing — unless a
    // pod's placement counts pods elsewhere (spreads, affinities), or a pod already running
    // repels others across a zone. Most binds are of plain pods, on clusters that are mostly
    // full: this keeps them from copying every node.
    let all_nodes = pending.iter().any(topological)
        || s.kube.pods.values().any(|p| p.pod.pod_anti_affinity.iter().any(|t| t.topology_key != HOSTNAME));
    let mut smallest = pending[0].requests.clone();
    for p in &pending[1..] {
        smallest.cpu = smallest.cpu.min(p.requests.cpu);
        smallest.memory = smallest.memory.min(p.requests.memory);
        smallest.pods = smallest.pods.min(p.requests.pods);
    }
    // Nodes whose kubelet stopped are NotReady: kube-scheduler skips them (their taint says so).
    let nodes: Vec<Node> = s
        .kube
        .nodes
        .values()
        .filter(|n| n.node.ready && !n.node.unschedulable)
        .filter(|n| {
            all_nodes || {
                let f = free(s, n);
                f.cpu >= smallest.cpu && f.memory >= smallest.memory && f.pods >= smallest.pods
            }
        })
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
