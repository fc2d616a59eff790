//! What a decision is made from: the cluster and the autoscaler's own state at one instant.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::OfferingKey;
use crate::model::{DaemonSet, Node, NodeClass, NodePool, Pod};
use crate::requirements::MinValuesPolicy;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Pods waiting for capacity (provisionable: unschedulable, not daemon, not mirror).
    pub pods: Vec<Pod>,
    /// Registered nodes and in-flight NodeClaims, with the pods on them.
    pub nodes: Vec<Node>,
    pub daemonsets: Vec<DaemonSet>,
    pub nodepools: Vec<NodePool>,
    pub nodeclasses: Vec<NodeClass>,
    /// Offerings that recently failed with a capacity error.
    pub unavailable: BTreeSet<OfferingKey>,
    /// Namespace labels, for affinity terms with a `namespaceSelector`.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// Whether `minValues` is a hard constraint (Karpenter's `--min-values-policy`).
    #[serde(default)]
    pub min_values_policy: MinValuesPolicy,
}
