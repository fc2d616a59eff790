//! A NodePool as the decision core uses it: validated, durations parsed, labels folded into
//! requirements.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

use super::taint::Taint;
use crate::requirements::Requirements;
use crate::resources::Resources;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConsolidationPolicy {
    WhenEmpty,
    WhenEmptyOrUnderutilized,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DisruptionReason {
    Empty,
    Underutilized,
    Drifted,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum BudgetNodes {
    Count(u32),
    Percent(u32),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    pub nodes: BudgetNodes,
    /// Cron schedule (UTC) during which the budget is active, with `duration`.
    pub schedule: Option<String>,
    pub duration: Option<Duration>,
    /// Reasons this budget limits; empty = all.
    pub reasons: Vec<DisruptionReason>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DisruptionSpec {
    pub consolidation_policy: ConsolidationPolicy,
    /// `None` = Never.
    pub consolidate_after: Option<Duration>,
    pub budgets: Vec<Budget>,
}

impl Default for DisruptionSpec {
    fn default() -> Self {
        DisruptionSpec {
            consolidation_policy: ConsolidationPolicy::WhenEmptyOrUnderutilized,
            consolidate_after: Some(Duration::ZERO),
            budgets: vec![Budget { nodes: BudgetNodes::Percent(10), schedule: None, duration: None, reasons: vec![] }],
        }
    }
}

/// What to do on an EC2 rebalance recommendation for the pool's spot nodes. Set with the NodePool
/// annotation `dovetail.dev/rebalance-policy: Ignore | Replace`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RebalancePolicy {
    /// Record an Event only (Karpenter's behaviour).
    #[default]
    Ignore,
    /// Launch a replacement first, then drain the node gracefully within budgets.
    Replace,
}

/// The `limits` key that counts nodes rather than a resource (Karpenter's `limits.nodes`).
pub const LIMIT_NODES: &str = "nodes";

/// The `limits` key that caps what the pool's capacity costs, in dollars per hour at effective
/// prices (`"12.5"` is $12.50/h). A key in `spec.limits` rather than a field of its own: the limits
/// are Karpenter's `ResourceList`, which takes any resource name, so a pool keeps Karpenter's shape
/// and the cost is checked wherever a resource limit is (see [`limit_share`]).
pub const LIMIT_COST: &str = "dovetail.dev/cost-per-hour";

/// Cost is counted in whole micro-dollars per hour, so a pool's usage adds up and gives back
/// exactly, as the other resources do (prices are quoted to a hundredth of a cent and below).
const MICROS_PER_DOLLAR: f64 = 1_000_000.0;

/// `price` dollars per hour as the micro-dollars [`LIMIT_COST`] is counted in, rounded up so
/// counting never comes out under what is paid.
pub fn cost_micros(price: f64) -> i64 {
    (price.max(0.0) * MICROS_PER_DOLLAR).ceil() as i64
}

/// Micro-dollars per hour as a person reads them (`$12.5000/h`).
pub fn format_cost(micros: i64) -> String {
    format!("${:.4}/h", micros as f64 / MICROS_PER_DOLLAR)
}

/// What one node of `capacity` costing `price` $/h counts against its pool's `limits`: its
/// capacity, 1 toward `limits.nodes` and its price toward [`LIMIT_COST`]. Usage, a new claim's
/// reservation and a replacement's give-back all go through this, so the node count and the cost
/// move with the resources and are never kept beside them.
pub fn limit_share(capacity: &Resources, price: f64) -> Resources {
    let mut share = capacity.clone();
    share.set(LIMIT_NODES, 1);
    share.set(LIMIT_COST, cost_micros(price));
    share
}

/// The NodePool annotation that selects the [`RebalancePolicy`].
pub const REBALANCE_POLICY_ANNOTATION: &str = "dovetail.dev/rebalance-policy";

/// The NodePool annotation that turns node repair on for the pool (`"true"`; see
/// [`crate::disruption::repair`]). An annotation rather than a field: the pool's `spec` stays
/// Karpenter's, whose node repair is a controller-wide feature gate.
pub const NODE_REPAIR_ANNOTATION: &str = "dovetail.dev/node-repair";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodePool {
    pub name: String,
    /// Higher weight is tried first.
    pub weight: i32,
    /// Template requirements with the template labels folded in as `In` requirements.
    pub requirements: Requirements,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    pub node_class: String,
    /// Resource name → limit (cpu in millicores, memory in bytes, …; [`LIMIT_NODES`] in nodes,
    /// [`LIMIT_COST`] in micro-dollars per hour).
    pub limits: BTreeMap<String, i64>,
    /// The [`limit_share`]s of the pool's current nodes and in-flight claims, counted against
    /// `limits`.
    pub usage: Resources,
    /// `None` = Never.
    pub expire_after: Option<Duration>,
    pub termination_grace_period: Option<Duration>,
    pub disruption: DisruptionSpec,
    pub rebalance: RebalancePolicy,
    /// The pool's [`NODE_REPAIR_ANNOTATION`] says `"true"`: its unhealthy nodes are replaced
    /// ([`crate::disruption::repair`]), as every pool's are when node repair is on for the whole
    /// cluster ([`crate::cluster::Cluster::node_repair`]). Off by default, as in Karpenter.
    #[serde(default)]
    pub node_repair: bool,
    /// The NodePool has a `deletionTimestamp`: it launches nothing more, and its nodes are drained
    /// and terminated under its budgets before it is released ([`crate::deletion`]).
    #[serde(default)]
    pub deleting: bool,
    /// It carries Dovetail's termination finalizer, so its deletion waits for that cascade.
    #[serde(default)]
    pub termination_finalizer: bool,
}

impl NodePool {
    /// A pool with Karpenter's defaults and no constraints; builders and tests start here.
    pub fn new(name: &str, node_class: &str) -> Self {
        NodePool {
            name: name.to_string(),
            weight: 0,
            requirements: Requirements::new(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            taints: vec![],
            startup_taints: vec![],
            node_class: node_class.to_string(),
            limits: BTreeMap::new(),
            usage: Resources::default(),
            expire_after: Some(Duration::from_secs(720 * 3600)),
            termination_grace_period: None,
            disruption: DisruptionSpec::default(),
            rebalance: RebalancePolicy::Ignore,
            node_repair: false,
            deleting: false,
            termination_finalizer: false,
        }
    }
}
