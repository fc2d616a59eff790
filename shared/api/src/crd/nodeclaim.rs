//! `NodeClaim` (`dovetail.dev/v1`): the in-cluster view of one claim, for `kubectl get nodeclaims`
//! and `kubectl describe nodeclaim`, with the fields, printer columns and conditions of Karpenter
//! v1's `karpenter.sh/v1` `NodeClaim`.
//!
//! Dovetail writes these objects; nobody else creates them (the admission policy under
//! `infra/k8s/policy/` refuses a NodeClaim made by hand). The claim's truth lives in Dovetail's
//! store (DynamoDB); the object follows it (see `dovetail_core::nodeclaim::object`). Deleting one
//! (`kubectl delete nodeclaim`) drains and terminates its node, as in Karpenter.

use std::collections::BTreeMap;

use dovetail_core::nodeclaim::object::{ClaimObject, FINALIZER, VERSION_ANNOTATION};
use dovetail_core::requirements::Operator as CoreOperator;
use dovetail_core::resources::Resources;
use dovetail_core::time::{format_duration, Time as CoreTime};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::nodepool::{NodeClassReference, NodeSelectorRequirementWithMinValues, Operator, Taint, TaintEffect};

/// What a NodeClaim asked for: the constraints and settings its instance was launched with.
// kube repeats `type_ = ...` in each printcolumn(...), which clippy mistakes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "dovetail.dev",
    version = "v1",
    kind = "NodeClaim",
    plural = "nodeclaims",
    singular = "nodeclaim",
    category = "dovetail",
    status = "NodeClaimStatus",
    derive = "PartialEq",
    doc = "NodeClaim is Dovetail's record of one node it launched, written by Dovetail (never by hand). \
           Deleting one drains and terminates its node. Same fields and meaning as Karpenter v1's \
           karpenter.sh/v1 NodeClaim.",
    printcolumn(name = "Type", type_ = "string", json_path = ".metadata.labels.node\\.kubernetes\\.io/instance-type"),
    printcolumn(name = "Capacity", type_ = "string", json_path = ".metadata.labels.karpenter\\.sh/capacity-type"),
    printcolumn(name = "Zone", type_ = "string", json_path = ".metadata.labels.topology\\.kubernetes\\.io/zone"),
    printcolumn(name = "Node", type_ = "string", json_path = ".status.nodeName"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "ID", type_ = "string", json_path = ".status.providerID", priority = 1),
    printcolumn(
        name = "NodePool",
        type_ = "string",
        json_path = ".metadata.labels.dovetail\\.dev/nodepool",
        priority = 1
    ),
    printcolumn(name = "NodeClass", type_ = "string", json_path = ".spec.nodeClassRef.name", priority = 1),
    printcolumn(
        name = "Drifted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Drifted\")].status",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = super::schema::tidy)]
pub struct NodeClaimSpec {
    /// Taints of the node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints the node starts with and some other agent removes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// Constraints on the node's labels: the pool's narrowed by the pods it was launched for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// The node class of its pool.
    pub node_class_ref: NodeClassReference,
    /// How long the node may live (copied from the pool at launch); unset: never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<String>,
    /// Longest drain once its deletion starts (copied from the pool at launch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<String>,
}

/// What became of a NodeClaim.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    /// The Node its instance registered as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// `aws:///<zone>/<instance id>`.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "providerID")]
    pub provider_id: Option<String>,
    /// The image the instance runs.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "imageID")]
    pub image_id: Option<String>,
    /// The instance type's capacity.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "super::schema::quantity_map")]
    pub capacity: BTreeMap<String, Quantity>,
    /// What pods can use of it (capacity less kubelet reservations and eviction thresholds).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "super::schema::quantity_map")]
    pub allocatable: BTreeMap<String, Quantity>,
    /// Launched, Registered, Initialized, Ready; Drifted, Consolidatable and Disrupting while it
    /// is being taken away.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// When a pod was last bound to or removed from its node (consolidateAfter counts from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pod_event_time: Option<Time>,
}

/// The object to apply for `object`, owned by its NodePool when `pool_uid` is known (so
/// `kubectl tree`-style tools and garbage collection see the NodePool → NodeClaim link).
pub fn claim_object(object: &ClaimObject, pool_uid: Option<&str>) -> NodeClaim {
    let claim = &object.claim;
    let owner = pool_uid.map(|uid| OwnerReference {
        api_version: super::API_VERSION.to_string(),
        kind: "NodePool".to_string(),
        name: claim.nodepool.clone(),
        uid: uid.to_string(),
        block_owner_deletion: None,
        controller: None,
    });
    let metadata = ObjectMeta {
        name: Some(claim.name.clone()),
        labels: Some(claim.labels.clone()),
        annotations: Some(BTreeMap::from([(VERSION_ANNOTATION.to_string(), claim.version.to_string())])),
        finalizers: Some(vec![FINALIZER.to_string()]),
        owner_references: owner.map(|o| vec![o]),
        ..ObjectMeta::default()
    };
    let spec = NodeClaimSpec {
        taints: claim.taints.iter().map(taint).collect(),
        startup_taints: claim.startup_taints.iter().map(taint).collect(),
        requirements: requirements(&claim.requirements),
        node_class_ref: NodeClassReference::ec2_node_class(claim.nodeclass.clone()),
        expire_after: claim.expire_after.map(format_duration),
        termination_grace_period: claim.termination_grace_period.map(format_duration),
    };
    let status = NodeClaimStatus {
        node_name: claim.node_name.clone(),
        provider_id: claim.provider_id(),
        image_id: claim.launch.as_ref().map(|l| l.image_id.clone()),
        capacity: quantities(object.capacity.as_ref()),
        allocatable: quantities(object.allocatable.as_ref()),
        conditions: object
            .conditions
            .iter()
            .map(|c| Condition {
                type_: c.type_.clone(),
                status: c.status.as_str().to_string(),
                reason: c.reason.clone(),
                message: c.message.clone(),
                last_transition_time: time(c.since),
                observed_generation: None,
            })
            .collect(),
        last_pod_event_time: claim.last_pod_event.map(time),
    };
    NodeClaim { metadata, spec, status: Some(status) }
}

/// A core time (milliseconds) as a Kubernetes one; metav1.Time is written in whole seconds.
fn time(t: CoreTime) -> Time {
    let seconds = t.millis().div_euclid(1000);
    Time(k8s_openapi::jiff::Timestamp::from_second(seconds).unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH))
}

fn quantities(r: Option<&Resources>) -> BTreeMap<String, Quantity> {
    r.map(|r| r.to_quantities().into_iter().map(|(k, v)| (k, Quantity(v))).collect()).unwrap_or_default()
}

fn taint(t: &dovetail_core::model::Taint) -> Taint {
    let effect = match t.effect {
        dovetail_core::model::TaintEffect::NoSchedule => TaintEffect::NoSchedule,
        dovetail_core::model::TaintEffect::PreferNoSchedule => TaintEffect::PreferNoSchedule,
        dovetail_core::model::TaintEffect::NoExecute => TaintEffect::NoExecute,
    };
    Taint { key: t.key.clone(), value: (!t.value.is_empty()).then(|| t.value.clone()), effect, time_added: None }
}

/// The claim's requirements as a NodeSelector would write them; a range (Gt and Lt on one key)
/// becomes two entries.
fn requirements(reqs: &dovetail_core::requirements::Requirements) -> Vec<NodeSelectorRequirementWithMinValues> {
    let mut out = Vec::new();
    for r in reqs.iter() {
        let entry = |operator, values: Vec<String>| NodeSelectorRequirementWithMinValues {
            key: r.key.clone(),
            operator,
            values,
            min_values: r.min_values.map(|m| m as i64),
        };
        let values = || r.values.iter().cloned().collect::<Vec<_>>();
        match r.operator() {
            CoreOperator::In => out.push(entry(Operator::In, values())),
            CoreOperator::NotIn => out.push(entry(Operator::NotIn, values())),
            CoreOperator::DoesNotExist => out.push(entry(Operator::DoesNotExist, vec![])),
            CoreOperator::Gt | CoreOperator::Lt | CoreOperator::Exists => {
                let bounds = [(r.greater_than, Operator::Gt), (r.less_than, Operator::Lt)];
                let mut any = false;
                for (bound, op) in bounds {
                    if let Some(b) = bound {
                        out.push(entry(op, vec![b.to_string()]));
                        any = true;
                    }
                }
                if !any {
                    out.push(entry(Operator::Exists, vec![]));
                }
            }
        }
    }
    out
}
