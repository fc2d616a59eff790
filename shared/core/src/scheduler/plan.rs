//! The scheduler's output. Its JSON form is `dovetail plan -o json`'s stable interface.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::catalog::CapacityType;
use crate::model::Taint;
use crate::requirements::Requirements;

/// A new NodeClaim to launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedClaim {
    pub name: String,
    pub nodepool: String,
    /// The cheapest candidate: what the plan's price, labels and allocatable describe.
    pub instance_type: String,
    /// Up to 60 candidates, cheapest first, every one able to run all of `pods`.
    pub instance_types: Vec<String>,
    pub capacity_type: CapacityType,
    /// Zone of the cheapest offering (the claim may allow others: see `requirements`).
    pub zone: String,
    /// What the plan pays per hour: the effective price, after NodeOverlays.
    pub price_per_hour: f64,
    /// The catalog's price of the same offering, present only when a NodeOverlay changed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_price_per_hour: Option<f64>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub allocatable: BTreeMap<String, String>,
    pub pods: Vec<String>,
    /// The claim's full requirements (pool ∩ pods ∩ topology), for the launcher.
    pub requirements: Requirements,
}

/// Pods nominated to capacity that already exists or is already on its way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExistingPlacement {
    pub node: String,
    pub pods: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unschedulable {
    pub pod: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub nodeclaims: Vec<PlannedClaim>,
    pub existing: Vec<ExistingPlacement>,
    pub unschedulable: Vec<Unschedulable>,
    pub cost_per_hour: f64,
    pub lower_bound_per_hour: f64,
    /// Pools whose cost limit, or the cluster-wide one, kept a pod from a claim there (it went to
    /// another pool or waits), with the limit's sentence: where provisioning says the limit binds.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cost_limited: BTreeMap<String, String>,
}
