//! What the driver records about a run: the fleet every simulated minute, every instance, and what
//! the functions or the baseline did. The report sums it up.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use dovetail_core::time::Time;

use super::functions::Tally;
use super::Policy;
use crate::baseline::Tally as BaselineTally;
use crate::world::{InstanceRecord, Stats};

/// The state of the fleet at one instant (every simulated minute).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Sample {
    /// Seconds since the start.
    pub at_s: u64,
    pub nodes_spot: u32,
    pub nodes_on_demand: u32,
    /// $/h of the instances running now.
    pub cost_per_hour: f64,
    /// $ spent so far.
    pub cost_total: f64,
    /// Pods not bound to a node.
    pub pending: u32,
    /// Requests over allocatable on Ready nodes.
    pub cpu_allocated: f64,
    pub memory_allocated: f64,
    /// Instances running now, by NodePool or node group.
    pub groups: BTreeMap<String, u32>,
    /// $/h of the instances running now, by NodePool or node group.
    pub group_cost: BTreeMap<String, f64>,
}

/// The key of the cluster-wide limit in [`Run::cost_limits`] (no NodePool has a name with spaces).
pub const CLUSTER_COST_LIMIT: &str = "whole cluster";

/// Everything recorded about one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub policy: Policy,
    pub scenario: String,
    pub description: String,
    pub seed: u64,
    pub start: Time,
    pub duration: Duration,
    pub samples: Vec<Sample>,
    pub instances: Vec<InstanceRecord>,
    pub stats: Stats,
    /// How long each pod still unbound at the end had waited, in ms.
    pub still_pending_ms: Vec<u64>,
    /// Dovetail's functions, when they ran.
    pub functions: Option<Tally>,
    /// The baseline's, when it ran.
    pub baseline: Option<BaselineTally>,
    /// Kubernetes Events by reason.
    pub events: BTreeMap<String, u64>,
    pub dead_letters: u64,
    pub duplicates: u64,
    pub claim_conflicts: u64,
    /// The cost limits the run was under, in $/h: NodePools' by name, the cluster-wide one under
    /// [`CLUSTER_COST_LIMIT`].
    pub cost_limits: BTreeMap<String, f64>,
    /// Instance-hours the scenario's capacity reservations held during the run, used or not.
    pub reservation_hours: f64,
}
