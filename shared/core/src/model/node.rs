//! Capacity that already exists or is on its way: registered Nodes and launched NodeClaims.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

use super::pod::Pod;
use super::taint::Taint;
use crate::resources::Resources;
use crate::time::Time;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeKind {
    /// A registered Node.
    Existing,
    /// A NodeClaim launched (or launching) whose Node has not registered yet; pods nominated to
    /// it count as placed so the next pass does not launch for them again.
    InFlight,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    pub kind: NodeKind,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Taints that keep pods off (startup taints of an in-flight claim excluded: they go away).
    pub taints: Vec<Taint>,
    pub allocatable: Resources,
    /// Pods bound (or nominated) to it, DaemonSet pods included.
    pub pods: Vec<Arc<Pod>>,
    /// Cordoned, or being deleted: nothing new lands here and its pods need a new home.
    pub unschedulable: bool,
    /// $/hour of the capacity, when known.
    pub price: Option<f64>,
    /// `spec.providerID` (`aws:///<zone>/<instance-id>`): how a NodeClaim finds the Node its
    /// instance registered as. Labels could be forged or copied by a user; the providerID is set
    /// by the kubelet from the instance itself.
    #[serde(default)]
    pub provider_id: Option<String>,
    /// The `Ready` condition is `True`. Defaults to true so hand-written and simulated nodes,
    /// which describe running capacity, need not say so.
    #[serde(default = "ready_default")]
    pub ready: bool,
    /// Someone asked for the Node's deletion (`kubectl delete node`): it has a
    /// `deletionTimestamp` and stays until its finalizers are removed.
    #[serde(default)]
    pub deleting: bool,
    /// The Node carries Dovetail's termination finalizer ([`crate::nodeclaim::object::FINALIZER`]):
    /// its deletion waits for Dovetail to drain it and terminate its instance.
    #[serde(default)]
    pub termination_finalizer: bool,
    /// The latest time a pod other than a DaemonSet or mirror pod ([`Pod::marks_pod_event`]) was
    /// bound to this node or left it, as the adapter that watches pods knows it (a cold read knows
    /// only the pods present).
    /// Consolidation measures idleness from it (see [`crate::nodeclaim::NodeClaim::idle_since`]).
    #[serde(default)]
    pub last_pod_event: Option<Time>,
    /// The Node's conditions that node repair watches ([`crate::disruption::repair::POLICIES`]),
    /// with their status and when it last changed; other conditions are not kept. Empty for
    /// hand-written and simulated nodes unless they say otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<NodeCondition>,
}

/// One condition from a Node's `status.conditions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeCondition {
    /// `Ready`, `KernelReady`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When `status` last changed (`lastTransitionTime`): how long the node has been in it.
    /// `None` when the kubelet or agent did not say.
    #[serde(default)]
    pub since: Option<Time>,
}

impl NodeCondition {
    pub fn new(kind: &str, status: &str, since: Option<Time>) -> NodeCondition {
        NodeCondition { kind: kind.to_string(), status: status.to_string(), since }
    }
}

fn ready_default() -> bool {
    true
}

impl Node {
    pub fn new(name: &str, labels: BTreeMap<String, String>, allocatable: Resources) -> Self {
        Node {
            name: name.to_string(),
            kind: NodeKind::Existing,
            labels,
            annotations: BTreeMap::new(),
            taints: vec![],
            allocatable,
            pods: vec![],
            unschedulable: false,
            price: None,
            provider_id: None,
            ready: true,
            deleting: false,
            termination_finalizer: false,
            last_pod_event: None,
            conditions: vec![],
        }
    }

    /// The condition of type `kind`, if the node reports it.
    pub fn condition(&self, kind: &str) -> Option<&NodeCondition> {
        self.conditions.iter().find(|c| c.kind == kind)
    }

    /// Sum of the requests of the pods on it.
    pub fn requested(&self) -> Resources {
        let mut r = Resources::default();
        for p in &self.pods {
            r.add(&p.requests);
        }
        r
    }
}

/// A DaemonSet: its pod template decides on which new nodes it runs and how much it takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonSet {
    pub namespace: String,
    pub name: String,
    pub pod: Pod,
}
