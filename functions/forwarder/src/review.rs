//! Decoding `admission.k8s.io/v1` AdmissionReview requests into doorbells, and the response,
//! which always allows. Pure — no I/O, no clock (the caller passes the time) — so recorded
//! payloads from a real kube-apiserver test it (`fixtures/`).
//!
//! What rings:
//! - **pods/status UPDATE** where the new pod is *provisionable* and the old one was not. A pod is
//!   provisionable as Karpenter counts it: `PodScheduled=False` with reason `Unschedulable`, not
//!   owned by a DaemonSet or a Node (mirror pods), and not preempting (no `nominatedNodeName`).
//!   Comparing the whole predicate, not just the condition, also rings when a pod that was
//!   nominated for preemption loses its nomination and is left unschedulable.
//! - **pods CREATE** of a pod that is already provisionable. The API server resets a new pod's
//!   status before validating admission runs, so in practice this never rings; it is decoded so
//!   that the rule is the same for every pod request the webhook may be sent.
//! - **nodes CREATE** → `registered`; **nodes/status UPDATE** where `Ready` turns `True` →
//!   `ready`; **nodes DELETE** → `gone`.
//!
//! Dry-run requests never ring (nothing is stored). Everything else — other resources and
//! operations, heartbeats that change nothing — is allowed without a doorbell.
//!
//! Only the few fields the rules read are decoded; the rest of each object (often kilobytes of
//! pod spec) is skipped by the parser without being allocated.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::doorbell::{Doorbell, NodeEvent};

/// The decoded request: the response to send, and what it meant.
#[derive(Debug)]
pub struct Reviewed {
    /// The AdmissionReview response body (always `allowed: true`).
    pub response: Vec<u8>,
    pub outcome: Outcome,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Doorbell(Doorbell),
    /// A well-formed request that changes nothing we ring for.
    Ignored,
    /// A dry run of something that would have rung.
    DryRun,
    /// The body did not decode; allowed anyway (with the request's uid when it could be read, so
    /// the API server accepts the answer; without one it counts a webhook error and, under
    /// `failurePolicy: Ignore`, admits the request all the same).
    Malformed(String),
}

impl Outcome {
    /// A stable label for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Doorbell(Doorbell::Pod { .. }) => "pod_doorbell",
            Outcome::Doorbell(Doorbell::Node { .. }) => "node_doorbell",
            Outcome::Ignored => "ignored",
            Outcome::DryRun => "dry_run",
            Outcome::Malformed(_) => "malformed",
        }
    }
}

/// Decodes an AdmissionReview request body seen at `now`.
pub fn review(body: &[u8], now: Timestamp) -> Reviewed {
    match serde_json::from_slice::<ReviewIn>(body) {
        Ok(ReviewIn { request: Some(request) }) => {
            let outcome = decide(&request, now);
            Reviewed { response: allow(&request.uid), outcome }
        }
        Ok(ReviewIn { request: None }) => {
            Reviewed { response: allow(""), outcome: Outcome::Malformed("no request in the AdmissionReview".into()) }
        }
        Err(error) => {
            // Answer with the uid if only the objects were off, so the API server takes the answer.
            let uid = serde_json::from_slice::<UidOnly>(body).ok().and_then(|r| r.request).map(|r| r.uid);
            Reviewed { response: allow(uid.as_deref().unwrap_or("")), outcome: Outcome::Malformed(error.to_string()) }
        }
    }
}

fn decide(request: &RequestIn, now: Timestamp) -> Outcome {
    if !request.resource.group.is_empty() {
        return Outcome::Ignored;
    }
    let sub = request.sub_resource.as_deref().unwrap_or("");
    let doorbell = match (request.resource.resource.as_str(), sub, request.operation.as_str()) {
        ("pods", "status", "UPDATE") | ("pods", "", "CREATE") => pod_doorbell(request, now),
        ("nodes", "", "CREATE") => node_doorbell(request, NodeEvent::Registered, now),
        ("nodes", "status", "UPDATE") => {
            let became_ready =
                request.object.as_ref().is_some_and(node_ready) && !request.old_object.as_ref().is_some_and(node_ready);
            became_ready.then(|| node_doorbell(request, NodeEvent::Ready, now)).flatten()
        }
        ("nodes", "", "DELETE") => node_doorbell(request, NodeEvent::Gone, now),
        _ => None,
    };
    match doorbell {
        Some(_) if request.dry_run.unwrap_or(false) => Outcome::DryRun,
        Some(doorbell) => Outcome::Doorbell(doorbell),
        None => Outcome::Ignored,
    }
}

fn pod_doorbell(request: &RequestIn, now: Timestamp) -> Option<Doorbell> {
    let pod = request.object.as_ref()?;
    if !provisionable(pod) || request.old_object.as_ref().is_some_and(provisionable) {
        return None;
    }
    // `name` can be empty on CREATE (generateName); the object has the generated one by then.
    let name = non_empty(&request.name).or(pod.metadata.name.as_deref())?;
    let namespace = request.namespace.as_deref().or(pod.metadata.namespace.as_deref())?;
    Some(Doorbell::Pod { namespace: namespace.to_string(), name: name.to_string(), at: now })
}

fn node_doorbell(request: &RequestIn, event: NodeEvent, now: Timestamp) -> Option<Doorbell> {
    // DELETE sends the node as `oldObject` and no `object`.
    let from_object = |o: &Option<ObjectIn>| o.as_ref().and_then(|o| o.metadata.name.clone());
    let name = non_empty(&request.name)
        .map(str::to_string)
        .or_else(|| from_object(&request.object))
        .or_else(|| from_object(&request.old_object))?;
    Some(Doorbell::Node { name, event, at: now })
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

/// Karpenter's provisionable pod (see the module documentation).
fn provisionable(pod: &ObjectIn) -> bool {
    let unschedulable = condition(pod, "PodScheduled")
        .is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"));
    let owned_by_daemon_or_node =
        pod.metadata.owner_references.iter().flatten().any(|o| o.kind == "DaemonSet" || o.kind == "Node");
    let preempting = pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).is_some_and(|n| !n.is_empty());
    unschedulable && !owned_by_daemon_or_node && !preempting
}

fn node_ready(node: &ObjectIn) -> bool {
    condition(node, "Ready").is_some_and(|c| c.status == "True")
}

fn condition<'a>(object: &'a ObjectIn, type_: &str) -> Option<&'a ConditionIn> {
    object.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

/// The always-allowing response for request `uid`.
fn allow(uid: &str) -> Vec<u8> {
    let review = ReviewOut {
        api_version: "admission.k8s.io/v1",
        kind: "AdmissionReview",
        response: ResponseOut { uid, allowed: true },
    };
    serde_json::to_vec(&review).expect("string fields always serialize")
}

// The decoded subset. Optional fields are `Option` rather than `#[serde(default)]` where the API
// server may send `null`.

#[derive(Deserialize)]
struct ReviewIn {
    request: Option<RequestIn>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestIn {
    uid: String,
    resource: ResourceIn,
    sub_resource: Option<String>,
    operation: String,
    #[serde(default)]
    name: String,
    namespace: Option<String>,
    dry_run: Option<bool>,
    object: Option<ObjectIn>,
    old_object: Option<ObjectIn>,
}

#[derive(Deserialize)]
struct ResourceIn {
    #[serde(default)]
    group: String,
    resource: String,
}

#[derive(Deserialize)]
struct ObjectIn {
    #[serde(default)]
    metadata: MetaIn,
    status: Option<StatusIn>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct MetaIn {
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerIn>>,
}

#[derive(Deserialize)]
struct OwnerIn {
    kind: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusIn {
    conditions: Option<Vec<ConditionIn>>,
    nominated_node_name: Option<String>,
}

#[derive(Deserialize)]
struct ConditionIn {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    reason: Option<String>,
}

#[derive(Deserialize)]
struct UidOnly {
    request: Option<UidIn>,
}

#[derive(Deserialize)]
struct UidIn {
    uid: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReviewOut<'a> {
    api_version: &'static str,
    kind: &'static str,
    response: ResponseOut<'a>,
}

#[derive(Serialize)]
struct ResponseOut<'a> {
    uid: &'a str,
    allowed: bool,
}
