//! A NodePool as the decision core uses it: validated, durations parsed, labels folded into
//! requirements.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

use super::taint::Taint;
use crate::requirements::Requirements;
use crate::resources::{parse_milli, QuantityError, Resources};

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

/// A [`LIMIT_COST`] quantity (`"12.5"`, `"250"`, `"1500m"`: dollars per hour, as Kubernetes writes
/// quantities) in micro-dollars per hour. Precise to a tenth of a cent per hour (quantities are
/// read in thousandths, finer fractions rounded up); negative amounts are refused.
pub fn parse_cost(quantity: &str) -> Result<i64, QuantityError> {
    let err = |why| QuantityError { input: quantity.to_string(), why };
    let milli = parse_milli(quantity)?;
    if milli < 0 {
        return Err(err("a cost cannot be negative"));
    }
    i64::try_from(milli * 1000).map_err(|_| err("too large"))
}

/// Micro-dollars per hour as the decimal quantity of dollars a status shows (`12.5`, `0.0052`).
pub fn cost_quantity(micros: i64) -> String {
    let (sign, micros) = if micros < 0 { ("-", micros.unsigned_abs()) } else { ("", micros as u64) };
    let fraction = format!("{:06}", micros % 1_000_000);
    let fraction = fraction.trim_end_matches('0');
    let whole = micros / 1_000_000;
    if fraction.is_empty() {
        format!("{sign}{whole}")
    } else {
        format!("{sign}{whole}.{fraction}")
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_are_read_as_dollars_per_hour_and_shown_back_the_same() {
        assert_eq!(parse_cost("12.5"), Ok(12_500_000));
        assert_eq!(parse_cost("250"), Ok(250_000_000));
        assert_eq!(parse_cost("1500m"), Ok(1_500_000));
        assert_eq!(parse_cost("0"), Ok(0));
        // Finer than a tenth of a cent rounds up, as Kubernetes rounds quantities.
        assert_eq!(parse_cost("0.0052"), Ok(6_000));
        assert_eq!(parse_cost("-1").unwrap_err().why, "a cost cannot be negative");
        assert!(parse_cost("ten").is_err());
        for (micros, shown) in
            [(12_500_000, "12.5"), (250_000_000, "250"), (5_200, "0.0052"), (0, "0"), (1, "0.000001")]
        {
            assert_eq!(cost_quantity(micros), shown);
            assert_eq!(parse_cost(shown).map(|m| m >= micros), Ok(true), "{shown}");
        }
        assert_eq!(format_cost(12_500_000), "$12.5000/h");
        // A share counts one node and its price, rounded up to the micro-dollar.
        let share = limit_share(&Resources::new(2000, 8 << 30), 0.0960001);
        assert_eq!((share.get(LIMIT_NODES), share.get(LIMIT_COST), share.cpu), (1, 96_001, 2000));
    }
}
