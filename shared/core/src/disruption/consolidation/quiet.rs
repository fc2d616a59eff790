//! Skipping consolidation passes that cannot find anything new.
//!
//! A consolidation pass over a large cluster simulates hundreds of moves; the sweeper runs one
//! every minute, and on a steady cluster almost every pass finds nothing. Like Karpenter (which
//! marks the cluster "consolidated" until its state changes), the sweeper remembers a pass that
//! decided nothing by a fingerprint of everything that pass read — nodes and their pods, pending
//! pods, claims (any write bumps a claim's version), pools, classes, DaemonSets, budgets, PDB
//! allowances, unavailable offerings — and of what time alone changes: which claims have been idle
//! for their pool's `consolidateAfter`, which nodes and pods a `do-not-disrupt` duration protects,
//! what the budgets allow now. While the fingerprint is unchanged the pass would decide the same
//! nothing, so it is skipped.
//!
//! One thing time changes is left out: the order candidates are tried in, which weighs eviction
//! cost by the node's remaining lifetime. It only matters once a move exists, and an expiring node
//! is taken away by expiration anyway.
//!
//! The memory lives in the process (a warm Lambda keeps it; a cold start simply runs a full pass),
//! so it needs no storage and can never be stale across deployments.

use std::hash::{Hash, Hasher};
use std::sync::{Mutex, PoisonError};

use rustc_hash::{FxHashMap, FxHasher};

use super::Allowed;
use crate::cluster::Cluster;
use crate::decision::{Action, Decision};
use crate::nodeclaim::Reason;
use crate::protection::{do_not_disrupt, pod_protected};

/// The fingerprint of the last pass that decided nothing, with the Events it left (DisruptionBlocked,
/// Unconsolidatable): a skipped pass says them again, so they are written again once their dedupe
/// window has passed (see [`crate::events`]), as a pass that ran would.
#[derive(Debug, Default)]
pub struct Quiet(Mutex<Option<(u64, Vec<Decision>)>>);

impl Quiet {
    pub const fn new() -> Quiet {
        Quiet(Mutex::new(None))
    }

    /// The Events of the last pass, when a pass over inputs with this fingerprint is already known
    /// to decide nothing else.
    pub fn known(&self, fingerprint: u64) -> Option<Vec<Decision>> {
        match &*self.0.lock().unwrap_or_else(PoisonError::into_inner) {
            Some((f, events)) if *f == fingerprint => Some(events.clone()),
            _ => None,
        }
    }

    /// Records the outcome of a pass: quiet when its only actions are Events, which are kept.
    pub fn record(&self, fingerprint: u64, decisions: &[Decision]) {
        let quiet = decisions.iter().all(|d| matches!(d.action, None | Some(Action::Event { .. })));
        let kept = quiet.then(|| {
            let events = decisions.iter().filter(|d| d.action.is_some()).cloned().collect();
            (fingerprint, events)
        });
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = kept;
    }
}

/// A fingerprint of everything a consolidation pass over `cluster` depends on (never 0).
/// FxHasher is unkeyed and fast: equal inputs give equal fingerprints, and two different states
/// in a row colliding on 64 bits (which would skip one pass) is not a practical concern.
pub fn fingerprint(cluster: &Cluster, allowed: Allowed<'_>) -> u64 {
    let mut h = FxHasher::default();
    let now = cluster.now;
    let nodes: FxHashMap<&str, &crate::model::Node> = cluster.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    for n in &cluster.nodes {
        (&n.name, &n.labels, &n.annotations, &n.taints, &n.allocatable, n.unschedulable, n.ready).hash(&mut h);
        h.write_usize(n.pods.len());
        for p in &n.pods {
            // A pod's spec is immutable; its identity, metadata and requests say what changed.
            (&p.namespace, &p.name, &p.labels, &p.annotations, &p.requests).hash(&mut h);
            pod_protected(p, now).is_some().hash(&mut h);
        }
    }
    h.write_usize(cluster.pending.len());
    for p in &cluster.pending {
        (&p.namespace, &p.name, &p.requests).hash(&mut h);
    }
    for c in &cluster.claims {
        (&c.name, c.version, c.phase, &c.node_name).hash(&mut h);
        let pool = cluster.nodepools.iter().find(|p| p.name == c.nodepool);
        let node = c.node_name.as_deref().and_then(|n| nodes.get(n)).copied();
        let since = c.idle_since(node);
        let idle = pool.and_then(|p| p.disruption.consolidate_after).map(|after| now.since(since) >= after);
        idle.hash(&mut h);
        let protected = node.and_then(|n| do_not_disrupt(&n.annotations, c.initialized_at.or(c.registered_at), now));
        protected.is_some().hash(&mut h);
        // A node stops being paid for by its reservation when that ends: time alone changes it.
        crate::reservations::paid_for(cluster, c).is_some().hash(&mut h);
    }
    for p in &cluster.nodepools {
        serde_json::to_string(p).unwrap_or_default().hash(&mut h);
        (allowed(&p.name, Reason::Empty), allowed(&p.name, Reason::Underutilized)).hash(&mut h);
    }
    for c in &cluster.nodeclasses {
        (&c.name, &c.kubelet).hash(&mut h);
    }
    for d in &cluster.daemonsets {
        serde_json::to_string(&d.pod).unwrap_or_default().hash(&mut h);
    }
    for p in &cluster.pdbs {
        (&p.namespace, &p.name, &p.selector, p.disruptions_allowed).hash(&mut h);
    }
    cluster.unavailable.hash(&mut h);
    // A reservation's instance left is somewhere to move pods to.
    for (class, open) in crate::reservations::open(cluster) {
        class.hash(&mut h);
        for r in open {
            (r.id, r.available).hash(&mut h);
        }
    }
    h.finish().max(1)
}
