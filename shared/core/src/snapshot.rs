//! What a decision is made from: the cluster and the autoscaler's own state at one instant.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::{OfferingKey, Reservation};
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
    /// The cluster-wide limit on what every pool's capacity costs, when one is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_limit: Option<CostLimit>,
    /// Per EC2NodeClass, the capacity reservations it selects that still take instances, each
    /// `available` being what is left once in-flight claims are counted
    /// ([`crate::reservations::remaining`]): the scheduler plans no more claims into one than that.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reservations: BTreeMap<String, Vec<Reservation>>,
}

/// A limit on what capacity costs across every NodePool, and what it costs now, both in
/// micro-dollars per hour at effective prices (as [`crate::model::LIMIT_COST`] counts them): the
/// cluster-wide counterpart of a pool's `limits[dovetail.dev/cost-per-hour]`. A new launch, or a
/// replacement, that would take the usage past the limit is not planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostLimit {
    pub limit: i64,
    pub usage: i64,
}
