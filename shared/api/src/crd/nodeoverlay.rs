//! `NodeOverlay` (`dovetail.dev/v1alpha1`): what a user knows about the prices and resources of
//! the instance types Dovetail buys that EC2 does not say (a Savings Plan's discount, a licensed
//! image's surcharge, a device plugin's extended resource). Field for field Karpenter's
//! `karpenter.sh/v1alpha1` `NodeOverlay`; `dovetail_core::overlay` applies it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::nodepool::Operator;

/// Desired state of a NodeOverlay: which offerings it selects and what it changes about them.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "dovetail.dev",
    version = "v1alpha1",
    kind = "NodeOverlay",
    plural = "nodeoverlays",
    singular = "nodeoverlay",
    shortname = "overlays",
    category = "dovetail",
    status = "NodeOverlayStatus",
    derive = "PartialEq",
    doc = "NodeOverlay changes the price Dovetail assumes for the instance types and offerings it \
           selects, or adds extended resources to them. Same fields and meaning as Karpenter's \
           karpenter.sh/v1alpha1 NodeOverlay.",
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "Weight", type_ = "integer", json_path = ".spec.weight", priority = 1)
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = super::schema::tidy)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.price) || !has(self.priceAdjustment)",
    "message": "cannot set both 'price' and 'priceAdjustment'",
}]))]
pub struct NodeOverlaySpec {
    /// Which offerings the overlay applies to: requirements on well-known labels of the instance
    /// type (`node.kubernetes.io/instance-type`, `karpenter.k8s.aws/instance-family`, ...) and of
    /// the offering (`karpenter.sh/capacity-type`, `topology.kubernetes.io/zone`,
    /// `topology.k8s.aws/zone-id`). All must hold; an empty list selects every offering.
    #[schemars(length(max = 100))]
    pub requirements: Vec<NodeOverlayRequirement>,

    /// A change to the price of the selected offerings: a signed amount in USD per hour
    /// (`+0.02`, `-0.5`) or a signed percentage (`-28%`, `+10%`; a decrease is at most 100%).
    /// The result is never below zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$"))]
    pub price_adjustment: Option<String>,

    /// The price of the selected offerings in USD per hour, whatever the catalog says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^\d+(\.\d+)?$"))]
    pub price: Option<String>,

    /// Extended resources the selected instance types' nodes advertise (added, or replacing the
    /// catalog's count of the same resource). `cpu`, `memory`, `ephemeral-storage` and `pods`
    /// cannot be set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "super::schema::quantity_map")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))",
        "message": "invalid resource restricted",
    }]))]
    pub capacity: BTreeMap<String, Quantity>,

    /// Precedence: where overlays overlap, the higher weight wins; among equal weights the name
    /// later in the alphabet is taken first, and an overlay that would change the same price or
    /// resource as it conflicts and is not applied. Unset counts as 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub weight: Option<i32>,
}

/// A requirement on a label of the offerings an overlay selects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeOverlayRequirement {
    /// The label the requirement constrains.
    #[schemars(length(max = 316))]
    pub key: String,
    /// How the label relates to the values.
    pub operator: Operator,
    /// Values for `In` and `NotIn` (at least one); a single integer for `Gt`/`Lt`; empty for
    /// `Exists` and `DoesNotExist`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(length(max = 63)))]
    pub values: Vec<String>,
}

/// Observed state of a NodeOverlay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodeOverlayStatus {
    /// `ValidationSucceeded` (False with reason `RuntimeValidation` for an invalid field, or
    /// `Conflict` when an overlay of the same weight changes the same price or resource) and
    /// `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
