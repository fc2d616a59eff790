//! The snapshot's assembly: the kept objects turned into the core's [`KubeState`] (converted by
//! dovetail-api's converters when they arrived: the same ones `dovetail plan` uses on files),
//! with the cross-references no single object holds: pods on their nodes, volumes' zones, the
//! attachments that hold a termination.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use dovetail_api::convert::{ConvertError, NotProvisionable, StorageIndex};
use dovetail_api::crd::{
    self, EC2NodeClass, EC2NodeClassStatus, NodeOverlay, NodeOverlayStatus, NodePool, NodePoolStatus,
};
use dovetail_core::labels;
use dovetail_core::model::{tolerates_all, Node, Pod, Taint, TaintEffect};
use dovetail_core::reconcile::ports::{Invalid, KubeState};
use serde_json::Value;
use tracing::debug;

use crate::snapshot::{Converted, Kind, Snapshot};

/// What the adapter remembers from its last read, for the writes that follow in the same pass.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Seen {
    /// uid of each Pod, Node and NodePool, by the name Events use (`Pod/ns/x`, `Node/x`,
    /// `NodePool/x`): Events point at the exact object without a GET each, and evictions carry
    /// the pod's uid as a precondition.
    pub uids: HashMap<String, String>,
    pub pools: HashMap<String, ObservedPool>,
    pub classes: HashMap<String, ObservedClass>,
    pub overlays: HashMap<String, ObservedOverlay>,
}

/// A NodeOverlay's generation and status as last read, for its status write.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct ObservedOverlay {
    pub generation: Option<i64>,
    pub status: NodeOverlayStatus,
}

/// An EC2NodeClass's generation and status as last read, for its status write.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct ObservedClass {
    pub generation: Option<i64>,
    pub status: EC2NodeClassStatus,
    /// Why the class's AMI family should be left behind (AL2), shown on its `AMIsReady`.
    pub deprecation: Option<&'static str>,
}

/// A NodePool's generation and status as last read, so a status write keeps the conditions'
/// transition times and is skipped when nothing changed.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct ObservedPool {
    pub generation: Option<i64>,
    pub status: NodePoolStatus,
}

/// Turns the snapshot into the core's view. Nothing here fails the read: an object that cannot be
/// converted goes to `invalid` with its field and is left out, and everything else carries on.
pub(crate) fn assemble(snapshot: &Snapshot) -> (KubeState, Seen) {
    let mut state = KubeState::default();
    let mut seen = Seen::default();

    let mut storage = StorageIndex::new();
    for (key, c) in &snapshot.claims.objects {
        note(storage.add_claim(c), key, &mut state.invalid);
    }
    for (key, v) in &snapshot.volumes.objects {
        note(storage.add_volume(v), key, &mut state.invalid);
    }
    for (key, c) in &snapshot.classes.objects {
        note(storage.add_class(c), key, &mut state.invalid);
    }

    let mut nodes: Vec<Node> = Vec::with_capacity(snapshot.nodes.objects.len());
    let mut node_index: HashMap<String, usize> = HashMap::new();
    let mut deleting: BTreeSet<String> = BTreeSet::new();
    for (key, n) in &snapshot.nodes.objects {
        remember_uid(&mut seen, key, &n.uid);
        match &n.node {
            Ok(node) => {
                if n.deleting {
                    deleting.insert(node.name.clone());
                }
                node_index.insert(node.name.clone(), nodes.len());
                nodes.push(node.clone());
            }
            Err(e) => state.invalid.push(unusable(key, e)),
        }
    }

    // Pods that will not leave their node when it drains: their volumes never detach, so a
    // termination waiting on those attachments would only burn its grace period (Karpenter
    // leaves them out the same way).
    let disrupted = [Taint::new(labels::TAINT_DISRUPTED, "", TaintEffect::NoSchedule)];
    let mut staying_claims: BTreeSet<(String, String)> = BTreeSet::new();

    for (key, p) in &snapshot.pods.objects {
        if let Some(phase) = &p.finished {
            debug!(pod = %key, phase, "finished pod holds nothing");
            continue;
        }
        remember_uid(&mut seen, key, &p.uid);
        // Shared with the snapshot, not copied: bound pods are most of what a read holds.
        let pod = match (&p.pod, &p.volumes) {
            (Ok(pod), None) => Arc::clone(pod),
            (Ok(pod), Some(spec)) => Arc::new(Pod {
                volume_requirements: storage.pod_requirements(&pod.namespace, &pod.name, spec, &[]),
                ..Pod::clone(pod)
            }),
            (Err(e), _) => {
                state.invalid.push(unusable(key, e));
                continue;
            }
        };
        match &p.verdict {
            Ok(()) => state.pending.push(Arc::unwrap_or_clone(pod)),
            Err(NotProvisionable::Bound(node)) => {
                let Some(&i) = node_index.get(node) else {
                    debug!(pod = %key, node, "bound to a node that is not listed");
                    continue;
                };
                if pod.is_mirror() || tolerates_all(&pod.tolerations, &disrupted).is_ok() {
                    for v in p.volumes.iter().flat_map(|s| s.volumes.iter().flatten()) {
                        if let Some(c) = &v.persistent_volume_claim {
                            staying_claims.insert((pod.namespace.clone(), c.claim_name.clone()));
                        }
                    }
                }
                if deleting.contains(node) && p.displaced {
                    state.pending.push(Pod { node_name: None, ..Pod::clone(&pod) });
                }
                // A pod present was bound about when it started: its node's latest pod event is
                // at least that (Karpenter reads PodScheduled's time; the start follows it within
                // a moment).
                if pod.marks_pod_event() {
                    nodes[i].last_pod_event = nodes[i].last_pod_event.max(pod.started_at);
                }
                nodes[i].pods.push(pod);
            }
            Err(reason) => debug!(pod = %key, %reason, "not provisionable"),
        }
    }
    // Pods that left, as this process's watches saw them go.
    for (node, &at) in &snapshot.pods.departed {
        if let Some(&i) = node_index.get(node) {
            nodes[i].last_pod_event = nodes[i].last_pod_event.max(Some(at));
        }
    }
    state.nodes = nodes;

    for (key, o) in &snapshot.claim_objects.objects {
        remember_uid(&mut seen, key, &o.uid);
        state.claim_objects.push(o.observed.clone());
    }

    state.daemonsets = converted(&snapshot.daemonsets, &mut state.invalid);
    state.pdbs = converted(&snapshot.pdbs, &mut state.invalid);

    // The PV each staying pod's claim is bound to.
    let staying_volumes: BTreeSet<String> = snapshot
        .claims
        .objects
        .values()
        .filter(|c| {
            let name = c.metadata.name.clone().unwrap_or_default();
            staying_claims.contains(&(c.metadata.namespace.clone().unwrap_or_default(), name))
        })
        .filter_map(|c| c.spec.as_ref().and_then(|s| s.volume_name.clone()))
        .collect();
    let mut attachments: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for a in snapshot.attachments.objects.values() {
        if a.volume.as_ref().is_some_and(|pv| staying_volumes.contains(pv)) {
            continue;
        }
        let shown = a.volume.clone().unwrap_or_else(|| a.name.clone());
        attachments.entry(a.node.clone()).or_default().push(shown);
    }
    state.volume_attachments = attachments;

    for ns in snapshot.namespaces.objects.values() {
        state.namespaces.insert(ns.name.clone(), ns.labels.clone());
    }

    for (object, v) in &snapshot.nodepools.objects {
        let v = &v.0;
        let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
        if let Some(uid) = v.pointer("/metadata/uid").and_then(Value::as_str) {
            seen.uids.insert(object.clone(), uid.to_string());
        }
        seen.pools.insert(
            name.clone(),
            ObservedPool {
                generation: v.pointer("/metadata/generation").and_then(Value::as_i64),
                // A status this version cannot read is rewritten whole by the next status write.
                status: v.get("status").and_then(|s| serde_json::from_value(s.clone()).ok()).unwrap_or_default(),
            },
        );
        match crd::from_value::<NodePool>("NodePool", v).and_then(|np| np.to_core()) {
            Ok(pool) => state.nodepools.push(pool),
            Err(errors) => {
                for e in errors {
                    state.invalid.push(Invalid { object: object.clone(), field: e.field, message: e.message });
                }
            }
        }
    }
    for (object, v) in &snapshot.nodeclasses.objects {
        let name = v.0.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
        let typed = crd::from_value::<EC2NodeClass>(crd::EC2_NODE_CLASS_KIND, &v.0);
        seen.classes.insert(
            name,
            ObservedClass {
                generation: v.0.pointer("/metadata/generation").and_then(Value::as_i64),
                status: v.0.get("status").and_then(|s| serde_json::from_value(s.clone()).ok()).unwrap_or_default(),
                deprecation: typed.as_ref().ok().and_then(|c| c.ami_family().deprecation()),
            },
        );
        match typed.and_then(|c| c.to_core()) {
            Ok(class) => state.nodeclasses.push(class),
            Err(errors) => {
                for e in errors {
                    state.invalid.push(Invalid { object: object.clone(), field: e.field, message: e.message });
                }
            }
        }
    }
    // An invalid overlay is left out with its fields; the others still price the catalog.
    for (object, v) in &snapshot.overlays.objects {
        let name = v.0.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
        seen.overlays.insert(
            name,
            ObservedOverlay {
                generation: v.0.pointer("/metadata/generation").and_then(Value::as_i64),
                status: v.0.get("status").and_then(|s| serde_json::from_value(s.clone()).ok()).unwrap_or_default(),
            },
        );
        match crd::from_value::<NodeOverlay>("NodeOverlay", &v.0).and_then(|o| o.to_core()) {
            Ok(overlay) => state.overlays.push(overlay),
            Err(errors) => {
                for e in errors {
                    state.invalid.push(Invalid { object: object.clone(), field: e.field, message: e.message });
                }
            }
        }
    }
    (state, seen)
}

fn unusable(key: &str, e: &ConvertError) -> Invalid {
    Invalid { object: key.to_string(), field: e.path.clone(), message: e.kind.to_string() }
}

fn note(result: Result<(), ConvertError>, key: &str, invalid: &mut Vec<Invalid>) {
    if let Err(e) = result {
        invalid.push(unusable(key, &e));
    }
}

/// The objects of a kind kept in the core's form, listing the ones that failed as invalid.
fn converted<T: Clone>(kind: &Kind<Converted<T>>, invalid: &mut Vec<Invalid>) -> Vec<T> {
    let mut out = Vec::with_capacity(kind.objects.len());
    for (key, kept) in &kind.objects {
        match &kept.0 {
            Ok(t) => out.push(t.clone()),
            Err(e) => invalid.push(unusable(key, e)),
        }
    }
    out
}

fn remember_uid(seen: &mut Seen, key: &str, uid: &Option<String>) {
    if let Some(uid) = uid {
        seen.uids.insert(key.to_string(), uid.clone());
    }
}

#[cfg(test)]
mod tests;
