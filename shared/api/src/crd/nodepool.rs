//! `NodePool` (`dovetail.dev/v1`): which nodes Dovetail may launch for pending pods, and when it
//! may take them away again. Field for field Karpenter v1's `karpenter.sh/v1` `NodePool`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::{KubeDuration, NillableDuration};
use super::open_enum::open_enum;

/// Desired state of a NodePool. A NodePool launches nodes for pods that cannot be scheduled; the
/// node's shape comes from the pool's template narrowed by the pods' own scheduling constraints.
// kube repeats `type_ = ...` in each printcolumn(...), which clippy mistakes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "dovetail.dev",
    version = "v1",
    kind = "NodePool",
    plural = "nodepools",
    singular = "nodepool",
    shortname = "np",
    category = "dovetail",
    status = "NodePoolStatus",
    derive = "PartialEq",
    doc = "NodePool tells Dovetail which nodes it may launch for pending pods and how it may \
           disrupt them. Same fields and meaning as Karpenter v1's karpenter.sh/v1 NodePool.",
    printcolumn(name = "NodeClass", type_ = "string", json_path = ".spec.template.spec.nodeClassRef.name"),
    printcolumn(name = "Nodes", type_ = "string", json_path = ".status.resources.nodes"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "Weight", type_ = "integer", json_path = ".spec.weight", priority = 1),
    printcolumn(name = "CPU", type_ = "string", json_path = ".status.resources.cpu", priority = 1),
    printcolumn(name = "Memory", type_ = "string", json_path = ".status.resources.memory", priority = 1)
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = super::schema::tidy)]
#[schemars(transform = super::refused::nodepool_spec)]
pub struct NodePoolSpec {
    /// Template of the NodeClaims this pool launches. A launched NodeClaim is usually narrower
    /// than the template: pods' constraints pick among the possibilities it allows.
    pub template: NodeClaimTemplate,

    /// How Dovetail may voluntarily disrupt this pool's nodes (consolidation and budgets).
    #[serde(default)]
    pub disruption: Disruption,

    /// Upper bounds on the total resources of this pool's nodes (e.g. `cpu: 1000`,
    /// `memory: 1000Gi`, `nodes: 50`); no new node is launched once a bound is reached.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "super::schema::quantity_map")]
    pub limits: BTreeMap<String, Quantity>,

    /// Priority among pools: a pod that several pools could serve goes to the one with the
    /// highest weight. An unset weight counts as 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub weight: Option<i32>,
}

/// Template of a NodeClaim: the labels, annotations, taints and constraints every node launched
/// from the pool gets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodeClaimTemplate {
    /// Labels and annotations copied to every node.
    #[serde(default)]
    #[schemars(transform = drop_default)]
    pub metadata: NodeClaimTemplateMetadata,
    /// Constraints and settings of the nodes.
    pub spec: NodeClaimTemplateSpec,
}

/// The part of object metadata a NodePool template may set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodeClaimTemplateMetadata {
    /// Labels applied to every node. Keys in restricted domains (`kubernetes.io`, `k8s.io`,
    /// `karpenter.sh`, `karpenter.k8s.aws`, `dovetail.dev`) are refused unless well known.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations applied to every node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Desired shape of the NodeClaims a pool launches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    /// Taints put on every node; only pods tolerating them are provisioned for by this pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,

    /// Taints present when a node starts and expected to be removed shortly by some other agent
    /// (typically a DaemonSet). Pods need not tolerate them to be provisioned for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,

    /// Constraints on the node labels (instance type, zone, capacity type, ...), layered with
    /// the pods' own constraints.
    #[schemars(length(max = 100))]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,

    /// The node class holding the cloud-specific settings. Dovetail only knows `EC2NodeClass`;
    /// the group may be `dovetail.dev` or, so converted Karpenter manifests work unchanged,
    /// `karpenter.k8s.aws` (both name a `dovetail.dev/v1` EC2NodeClass).
    pub node_class_ref: NodeClassReference,

    /// How long a node may live before it is replaced, counted from its creation: `720h` by
    /// default, `Never` to disable. Expiration is forceful and ignores disruption budgets.
    #[serde(default = "default_expire_after")]
    pub expire_after: NillableDuration,

    /// Longest time a node may take to drain once its deletion starts. Past it, pods are deleted
    /// even if a PodDisruptionBudget or a do-not-disrupt annotation blocks eviction; a pod is
    /// deleted early enough to get its own terminationGracePeriodSeconds. Unset: wait forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(s|m|h))+$"))]
    pub termination_grace_period: Option<KubeDuration>,
}

/// A node selector requirement with an optional minimum number of distinct values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.operator != 'In' || (has(self.values) && size(self.values) > 0)",
        "message": "requirements with operator 'In' must have a value defined",
    },
    {
        "rule": "!(self.operator in ['Gt', 'Lt', 'Gte', 'Lte']) || (has(self.values) && size(self.values) == 1 && self.values[0].matches('^[0-9]+$'))",
        "message": "requirements with operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single non-negative integer value",
    },
    {
        "rule": "!has(self.minValues) || self.operator != 'In' || (has(self.values) && size(self.values) >= self.minValues)",
        "message": "requirements with 'minValues' must have at least that many values specified in the 'values' field",
    },
]))]
pub struct NodeSelectorRequirementWithMinValues {
    /// The node label the requirement constrains.
    #[schemars(length(max = 316))]
    pub key: String,
    /// How the label relates to the values.
    pub operator: Operator,
    /// Values for `In` and `NotIn` (at least one for `In`); a single integer for `Gt`, `Lt`,
    /// `Gte` and `Lte`; empty for `Exists` and `DoesNotExist`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(length(max = 63)))]
    pub values: Vec<String>,
    /// Minimum number of distinct values of `key` the candidate instance types must span, so a
    /// launch keeps enough flexibility (e.g. at least 5 instance families for spot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 50))]
    pub min_values: Option<i64>,
}

impl NodeSelectorRequirementWithMinValues {
    /// A requirement without `minValues`.
    pub fn new(key: impl Into<String>, operator: Operator, values: &[&str]) -> Self {
        Self { key: key.into(), operator, values: values.iter().map(|v| (*v).to_owned()).collect(), min_values: None }
    }
}

open_enum! {
    /// Relation between a label and a requirement's values.
    pub enum Operator {
        /// The label's value is one of the values.
        In = "In",
        /// The label is absent or its value is none of the values.
        NotIn = "NotIn",
        /// The label is present.
        Exists = "Exists",
        /// The label is absent.
        DoesNotExist = "DoesNotExist",
        /// The label's value is an integer greater than the single value.
        Gt = "Gt",
        /// The label's value is an integer less than the single value.
        Lt = "Lt",
        /// The label's value is an integer greater than or equal to the single value.
        Gte = "Gte",
        /// The label's value is an integer less than or equal to the single value.
        Lte = "Lte",
    }
}

/// A taint as on a Node (`key`, optional `value`, `effect`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// Taint key, a qualified name such as `nvidia.com/gpu`.
    #[schemars(length(min = 1))]
    pub key: String,
    /// Taint value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// What happens to pods that do not tolerate the taint.
    pub effect: TaintEffect,
    /// When the taint was added; only meaningful for NoExecute taints on live nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<Time>,
}

open_enum! {
    /// Effect of a taint on pods that do not tolerate it.
    pub enum TaintEffect {
        /// New pods are not scheduled on the node.
        NoSchedule = "NoSchedule",
        /// The scheduler avoids the node when it can.
        PreferNoSchedule = "PreferNoSchedule",
        /// New pods are not scheduled and running ones are evicted.
        NoExecute = "NoExecute",
    }
}

impl From<&Taint> for k8s_openapi::api::core::v1::Taint {
    fn from(taint: &Taint) -> Self {
        Self {
            key: taint.key.clone(),
            value: taint.value.clone(),
            effect: taint.effect.to_string(),
            time_added: taint.time_added.clone(),
        }
    }
}

/// Reference to the node class of a pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeClassReference {
    /// API group of the node class: `dovetail.dev`, or `karpenter.k8s.aws` as written in
    /// Karpenter manifests (both accepted).
    #[schemars(length(min = 1), regex(pattern = r"^[^/]*$"))]
    pub group: String,
    /// Kind of the node class; only `EC2NodeClass` is supported.
    #[schemars(length(min = 1))]
    pub kind: String,
    /// Name of the node class.
    #[schemars(length(min = 1))]
    pub name: String,
}

impl NodeClassReference {
    /// A reference to the `dovetail.dev` EC2NodeClass `name`.
    pub fn ec2_node_class(name: impl Into<String>) -> Self {
        Self { group: super::GROUP.to_owned(), kind: super::EC2_NODE_CLASS_KIND.to_owned(), name: name.into() }
    }

    /// Whether this names an EC2NodeClass under a group Dovetail accepts for it.
    pub fn is_ec2_node_class(&self) -> bool {
        self.kind == super::EC2_NODE_CLASS_KIND
            && (self.group == super::GROUP || self.group == super::KARPENTER_AWS_GROUP)
    }
}

/// Voluntary disruption settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// How long a node must have been a consolidation candidate (empty, or underutilized under
    /// `WhenEmptyOrUnderutilized`) since its last pod change before it is consolidated; `Never`
    /// disables consolidation. Karpenter requires it explicitly when `disruption` is given;
    /// Dovetail defaults it to `0s` like Karpenter's default for the whole block.
    #[serde(default = "default_consolidate_after")]
    pub consolidate_after: NillableDuration,

    /// Which nodes consolidation may remove or replace.
    #[serde(default)]
    pub consolidation_policy: ConsolidationPolicy,

    /// Limits on how many nodes may be disrupted at once; the most restrictive active budget
    /// wins. Defaults to one budget of `10%`.
    #[serde(default = "default_budgets")]
    #[schemars(length(max = 50))]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.all(b, has(b.schedule) == has(b.duration))",
        "message": "'schedule' must be set with 'duration'",
    }]))]
    pub budgets: Vec<Budget>,
}

impl Default for Disruption {
    fn default() -> Self {
        Self {
            consolidate_after: default_consolidate_after(),
            consolidation_policy: ConsolidationPolicy::default(),
            budgets: default_budgets(),
        }
    }
}

open_enum! {
    /// Which nodes consolidation considers.
    #[derive(Default)]
    pub enum ConsolidationPolicy {
        /// Only nodes without (non-daemon) pods.
        WhenEmpty = "WhenEmpty",
        /// Empty nodes, and nodes whose pods fit elsewhere or on a cheaper replacement.
        #[default]
        WhenEmptyOrUnderutilized = "WhenEmptyOrUnderutilized",
    }
}

/// A limit on simultaneous voluntary disruptions, optionally active only in a time window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Budget {
    /// Disruption reasons the budget applies to; unset means all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50))]
    pub reasons: Option<Vec<DisruptionReason>>,

    /// Most nodes of the pool that may be disrupting at once: a count (`5`) or a percentage of
    /// the pool's nodes (`10%`, rounded up).
    #[serde(default = "default_budget_nodes")]
    #[schemars(regex(pattern = r"^((100|[0-9]{1,2})%|[0-9]+)$"))]
    pub nodes: String,

    /// When the budget becomes active: a 5-field cron expression or macro such as `@daily`, in
    /// UTC, with Karpenter's (robfig/cron's) semantics. Requires `duration`. Unset: always active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
    ))]
    pub schedule: Option<String>,

    /// How long the budget stays active after each `schedule` hit, in hours and minutes
    /// (`8h`, `30m`, `1h30m`). Requires `schedule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"))]
    pub duration: Option<KubeDuration>,
}

impl Budget {
    /// An always-active budget of `nodes` (a count or a percentage).
    pub fn new(nodes: impl Into<String>) -> Self {
        Self { reasons: None, nodes: nodes.into(), schedule: None, duration: None }
    }

    /// Whether this budget limits disruptions for `reason`.
    pub fn applies_to(&self, reason: &DisruptionReason) -> bool {
        self.reasons.as_ref().is_none_or(|r| r.contains(reason))
    }

    /// Parses `nodes`.
    pub fn parse_nodes(&self) -> Result<BudgetNodes, String> {
        BudgetNodes::parse(&self.nodes)
    }
}

/// A budget's `nodes` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetNodes {
    /// At most this many nodes.
    Count(u32),
    /// At most this percentage (0-100) of the pool's nodes, rounded up.
    Percent(u8),
}

impl BudgetNodes {
    /// Parses `5` or `10%`.
    pub fn parse(value: &str) -> Result<Self, String> {
        let bad = || format!("{value:?} is neither an integer nor a percentage");
        let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if let Some(percent) = value.strip_suffix('%') {
            if !all_digits(percent) {
                return Err(bad());
            }
            match percent.parse::<u32>() {
                Ok(p) if p <= 100 => Ok(Self::Percent(p as u8)),
                _ => Err(format!("{value:?} is more than 100%")),
            }
        } else if all_digits(value) {
            value.parse().map(Self::Count).map_err(|_| bad())
        } else {
            Err(bad())
        }
    }

    /// How many of `total` nodes may be disrupting at once.
    pub fn allowed(self, total: u32) -> u32 {
        match self {
            Self::Count(n) => n,
            Self::Percent(p) => (u64::from(total) * u64::from(p)).div_ceil(100) as u32,
        }
    }
}

open_enum! {
    /// Reasons for voluntary disruption a budget can be restricted to.
    pub enum DisruptionReason {
        /// Consolidation of underutilized nodes.
        Underutilized = "Underutilized",
        /// Removal of empty nodes.
        Empty = "Empty",
        /// Replacement of nodes that no longer match their pool or class.
        Drifted = "Drifted",
    }
}

/// Observed state of a NodePool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// Resources of the pool's nodes added up, including a `nodes` count.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "super::schema::quantity_map")]
    pub resources: BTreeMap<String, Quantity>,
    /// Generation of the node class last seen healthy for this pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
    /// Health and readiness (`Ready`, `ValidationSucceeded`, `NodeClassReady`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

fn default_expire_after() -> NillableDuration {
    NillableDuration::new("720h")
}

fn default_consolidate_after() -> NillableDuration {
    NillableDuration::new("0s")
}

fn default_budget_nodes() -> String {
    "10%".to_owned()
}

fn default_budgets() -> Vec<Budget> {
    vec![Budget::new(default_budget_nodes())]
}

/// An empty template metadata block is not worth a `default: {}` in the CRD.
fn drop_default(schema: &mut schemars::Schema) {
    schema.remove("default");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_nodes() {
        assert_eq!(BudgetNodes::parse("10%"), Ok(BudgetNodes::Percent(10)));
        assert_eq!(BudgetNodes::parse("0"), Ok(BudgetNodes::Count(0)));
        assert!(BudgetNodes::parse("ten%").is_err());
        assert!(BudgetNodes::parse("101%").is_err());
        assert!(BudgetNodes::parse("-1").is_err());
        assert!(BudgetNodes::parse("").is_err());
        assert_eq!(BudgetNodes::Percent(10).allowed(15), 2);
        assert_eq!(BudgetNodes::Percent(10).allowed(0), 0);
        assert_eq!(BudgetNodes::Count(3).allowed(1), 3);
    }

    #[test]
    fn budget_reasons() {
        let all = Budget::new("1");
        assert!(all.applies_to(&DisruptionReason::Drifted));
        let some = Budget { reasons: Some(vec![DisruptionReason::Empty]), ..Budget::new("1") };
        assert!(some.applies_to(&DisruptionReason::Empty));
        assert!(!some.applies_to(&DisruptionReason::Drifted));
    }
}
