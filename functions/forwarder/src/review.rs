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
//!   status before validating admission runs (`fixtures/pod-create-with-status.json`: the client
//!   sent the condition, the webhook saw none), so this never rings and the manifest does not
//!   register pods CREATE; it is decoded all the same so that a configuration that does send it
//!   gets the same rule.
//! - **nodes CREATE** → `registered`; **nodes/status UPDATE** where `Ready` turns `True` →
//!   `ready`; **nodes DELETE** → `gone`.
//! - **nodeclaims.dovetail.dev DELETE** → a `nodeclaim` doorbell: `kubectl delete nodeclaim`
//!   asks Dovetail to drain and terminate that node; **nodepools.dovetail.dev DELETE** → a
//!   `nodepool` doorbell: the pool's nodes are drained under its budgets, then it goes.
//!
//! Dry-run requests never ring (nothing is stored). Requests for the resources and operations
//! above that change nothing we ring for (heartbeats) are allowed without a doorbell. Requests
//! for any other resource or operation are *unhandled*: the webhook configuration should not send
//! them, so they are allowed (the forwarder never blocks the cluster) without a doorbell, and
//! counted apart so a misconfigured rule shows. A body that is not an `admission.k8s.io/v1`
//! AdmissionReview with a request uid at all is *not a review*: nothing the API server sends, so
//! it is answered 400 rather than with an AdmissionReview.
//!
//! Only the few fields the rules read are decoded; the rest of each object (often kilobytes of
//! pod spec) is skipped by the parser without being allocated.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::doorbell::{Deleted, Doorbell, NodeEvent};

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
    /// A well-formed request for a resource we handle that changes nothing we ring for.
    Ignored,
    /// A request for a resource or operation the forwarder does not handle: allowed, no
    /// doorbell.
    Unhandled,
    /// A dry run of something that would have rung.
    DryRun,
    /// The request's objects did not decode; allowed anyway, with the request's uid so the API
    /// server accepts the answer.
    Malformed(String),
    /// Not an AdmissionReview (not JSON, another kind or version, no request uid): the response
    /// is empty and the server answers 400.
    NotReview(String),
}

impl Outcome {
    /// A stable label for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Doorbell(Doorbell::Pod { .. }) => "pod_doorbell",
            Outcome::Doorbell(Doorbell::Node { .. }) => "node_doorbell",
            Outcome::Doorbell(Doorbell::Deleted { kind: Deleted::NodeClaim, .. }) => "nodeclaim_doorbell",
            Outcome::Doorbell(Doorbell::Deleted { kind: Deleted::NodePool, .. }) => "nodepool_doorbell",
            Outcome::Ignored => "ignored",
            Outcome::Unhandled => "unhandled",
            Outcome::DryRun => "dry_run",
            Outcome::Malformed(_) => "malformed",
            Outcome::NotReview(_) => "not_admission_review",
        }
    }
}

/// The envelope every request the API server sends has (`admissionReviewVersions: [v1]`).
const API_VERSION: &str = "admission.k8s.io/v1";
const KIND: &str = "AdmissionReview";

/// Decodes an AdmissionReview request body seen at `now`. One pass over the body when it decodes;
/// a second, for the envelope alone, when it does not.
pub fn review(body: &[u8], now: Timestamp) -> Reviewed {
    match serde_json::from_slice::<ReviewIn>(body) {
        Ok(ReviewIn { api_version, kind, request }) => match (envelope(api_version, kind), request) {
            (Err(why), _) => not_review(why),
            (Ok(()), None) => not_review("an AdmissionReview without a request".into()),
            (Ok(()), Some(request)) => Reviewed { response: allow(&request.uid), outcome: decide(&request, now) },
        },
        Err(error) => match serde_json::from_slice::<Envelope>(body) {
            Err(_) => not_review(format!("not an AdmissionReview: {error}")),
            Ok(Envelope { api_version, kind, request }) => match (envelope(api_version, kind), request) {
                (Err(why), _) => not_review(why),
                (Ok(()), None) => not_review(format!("an AdmissionReview without a request uid: {error}")),
                // Only the objects were off: answer with the uid, so the API server takes the answer.
                (Ok(()), Some(UidIn { uid })) => {
                    Reviewed { response: allow(&uid), outcome: Outcome::Malformed(error.to_string()) }
                }
            },
        },
    }
}

/// `Ok` for the `admission.k8s.io/v1` AdmissionReview envelope.
fn envelope(api_version: Option<String>, kind: Option<String>) -> Result<(), String> {
    if api_version.as_deref() == Some(API_VERSION) && kind.as_deref() == Some(KIND) {
        return Ok(());
    }
    let found = format!("{}/{}", api_version.unwrap_or_default(), kind.unwrap_or_default());
    Err(format!("expected {API_VERSION} {KIND}, found {found:?}"))
}

fn not_review(reason: String) -> Reviewed {
    Reviewed { response: Vec::new(), outcome: Outcome::NotReview(reason) }
}

/// The API group of Dovetail's NodeClaim objects.
const DOVETAIL_GROUP: &str = "dovetail.dev";

/// The requests the forwarder handles, as `(group, resource, subresource, operation)`: what
/// `infra/k8s/forwarder/webhook.yaml` registers (and pods CREATE, see the module documentation).
const HANDLED: &[(&str, &str, &str, &str)] = &[
    ("", "pods", "status", "UPDATE"),
    ("", "pods", "", "CREATE"),
    ("", "nodes", "", "CREATE"),
    ("", "nodes", "status", "UPDATE"),
    ("", "nodes", "", "DELETE"),
    (DOVETAIL_GROUP, "nodeclaims", "", "DELETE"),
    (DOVETAIL_GROUP, "nodepools", "", "DELETE"),
];

fn decide(request: &RequestIn, now: Timestamp) -> Outcome {
    let group = request.resource.group.as_str();
    let resource = request.resource.resource.as_str();
    let sub = request.sub_resource.as_deref().unwrap_or("");
    let operation = request.operation.as_str();
    if !HANDLED.contains(&(group, resource, sub, operation)) {
        return Outcome::Unhandled;
    }
    let doorbell = match (group, resource) {
        (DOVETAIL_GROUP, "nodeclaims") => {
            object_name(request).map(|name| Doorbell::Deleted { kind: Deleted::NodeClaim, name, at: now })
        }
        (DOVETAIL_GROUP, _) => {
            object_name(request).map(|name| Doorbell::Deleted { kind: Deleted::NodePool, name, at: now })
        }
        _ => core_doorbell(request, resource, sub, operation, now),
    };
    match doorbell {
        Some(_) if request.dry_run.unwrap_or(false) => Outcome::DryRun,
        Some(doorbell) => Outcome::Doorbell(doorbell),
        None => Outcome::Ignored,
    }
}

/// Doorbells for core (`v1`) resources.
fn core_doorbell(request: &RequestIn, resource: &str, sub: &str, operation: &str, now: Timestamp) -> Option<Doorbell> {
    match (resource, sub, operation) {
        ("pods", "status", "UPDATE") | ("pods", "", "CREATE") => pod_doorbell(request, now),
        ("nodes", "", "CREATE") => node_doorbell(request, NodeEvent::Registered, now),
        ("nodes", "status", "UPDATE") => {
            let became_ready =
                request.object.as_ref().is_some_and(node_ready) && !request.old_object.as_ref().is_some_and(node_ready);
            became_ready.then(|| node_doorbell(request, NodeEvent::Ready, now)).flatten()
        }
        ("nodes", "", "DELETE") => node_doorbell(request, NodeEvent::Gone, now),
        _ => None,
    }
}

/// Rings when a pod becomes provisionable, and again when the scheduler re-marks it with a new
/// verdict (its `PodScheduled` message: it tried again after the cluster changed and still
/// found no room) — capacity it was nominated to may have gone to other pods, and without a
/// ring it would wait for the sweeper. The scheduler writes the condition only when it
/// changes, so this rings once per pod per change of the cluster, not per attempt.
fn pod_doorbell(request: &RequestIn, now: Timestamp) -> Option<Doorbell> {
    let pod = request.object.as_ref()?;
    let verdict = |p: &ObjectIn| condition(p, "PodScheduled").and_then(|c| c.message.clone());
    let rung_before = request.old_object.as_ref().is_some_and(|old| provisionable(old) && verdict(old) == verdict(pod));
    if !provisionable(pod) || rung_before {
        return None;
    }
    // `name` can be empty on CREATE (generateName); the object has the generated one by then.
    let name = non_empty(&request.name).or(pod.metadata.name.as_deref())?;
    let namespace = request.namespace.as_deref().or(pod.metadata.namespace.as_deref())?;
    Some(Doorbell::Pod { namespace: namespace.to_string(), name: name.to_string(), at: now })
}

fn node_doorbell(request: &RequestIn, event: NodeEvent, now: Timestamp) -> Option<Doorbell> {
    object_name(request).map(|name| Doorbell::Node { name, event, at: now })
}

/// The request's object name: from the request, else from its object (DELETE sends the object as
/// `oldObject` and no `object`).
fn object_name(request: &RequestIn) -> Option<String> {
    let from_object = |o: &Option<ObjectIn>| o.as_ref().and_then(|o| o.metadata.name.clone());
    non_empty(&request.name)
        .map(str::to_string)
        .or_else(|| from_object(&request.object))
        .or_else(|| from_object(&request.old_object))
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
#[serde(rename_all = "camelCase")]
struct ReviewIn {
    api_version: Option<String>,
    kind: Option<String>,
    request: Option<RequestIn>,
}

/// What makes a body an AdmissionReview, decoded before the rest.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    api_version: Option<String>,
    kind: Option<String>,
    request: Option<UidIn>,
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
    message: Option<String>,
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

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    /// AdmissionReview bodies as kube-apiserver v1.34.10 sent them to a webhook registered like
    /// `infra/k8s/forwarder/webhook.yaml` (recorded with the test control plane, unedited).
    fn fixture(name: &str) -> Vec<u8> {
        let path = format!("{}/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn edited(name: &str, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
        let mut review: Value = serde_json::from_slice(&fixture(name)).unwrap();
        edit(&mut review);
        serde_json::to_vec(&review).unwrap()
    }

    fn now() -> Timestamp {
        "2026-11-21T15:04:47.250Z".parse().unwrap()
    }

    fn uid_of(body: &[u8]) -> String {
        let review: Value = serde_json::from_slice(body).unwrap();
        review["request"]["uid"].as_str().unwrap().to_string()
    }

    /// The response allows, echoes the uid, and has the v1 envelope.
    fn assert_allows(reviewed: &Reviewed, uid: &str) {
        let response: Value = serde_json::from_slice(&reviewed.response).unwrap();
        assert_eq!(
            response,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": uid, "allowed": true}})
        );
    }

    fn outcome(body: &[u8]) -> Outcome {
        let reviewed = review(body, now());
        assert_allows(&reviewed, &uid_of(body));
        reviewed.outcome
    }

    #[test]
    fn pod_marked_unschedulable_rings() {
        let body = fixture("pod-status-unschedulable");
        assert_eq!(
            outcome(&body),
            Outcome::Doorbell(Doorbell::Pod { namespace: "rec-1".into(), name: "huge".into(), at: now() })
        );
    }

    #[test]
    fn pod_still_unschedulable_does_not_ring() {
        // Another condition added to a pod that was already Unschedulable.
        assert_eq!(outcome(&fixture("pod-status-still-unschedulable")), Outcome::Ignored);
    }

    #[test]
    fn pod_re_marked_with_a_new_verdict_rings_again() {
        // The scheduler tried again after a node joined and still found no room for it.
        let retried = edited("pod-status-still-unschedulable", |r| {
            r["request"]["object"]["status"]["conditions"][1]["message"] =
                json!("0/1 nodes are available: 1 Insufficient cpu.");
        });
        assert!(matches!(outcome(&retried), Outcome::Doorbell(Doorbell::Pod { .. })));
    }

    #[test]
    fn daemonset_and_mirror_pods_do_not_ring() {
        assert_eq!(outcome(&fixture("pod-status-unschedulable-daemonset")), Outcome::Ignored);
        let mirror = edited("pod-status-unschedulable", |r| {
            r["request"]["object"]["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "1"}]);
        });
        assert_eq!(outcome(&mirror), Outcome::Ignored);
    }

    #[test]
    fn preempting_pod_rings_when_its_nomination_goes() {
        let nominated = |r: &mut Value, key: &str| r["request"][key]["status"]["nominatedNodeName"] = json!("n1");
        let preempting = edited("pod-status-unschedulable", |r| nominated(r, "object"));
        assert_eq!(outcome(&preempting), Outcome::Ignored);
        // The pod the scheduler nominated is still pending and the nomination is cleared.
        let cleared = edited("pod-status-still-unschedulable", |r| nominated(r, "oldObject"));
        assert!(matches!(outcome(&cleared), Outcome::Doorbell(Doorbell::Pod { .. })));
    }

    #[test]
    fn pod_created_with_a_status_does_not_ring() {
        // The client sent PodScheduled=False/Unschedulable; the API server reset the status
        // before admission, which is why the manifest does not register pods CREATE.
        let body = fixture("pod-create-with-status");
        let review: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(review["request"]["object"]["status"], json!({"phase": "Pending", "qosClass": "Burstable"}));
        assert_eq!(outcome(&body), Outcome::Ignored);
        // Were it to come with the condition, it would ring like the status update.
        let unschedulable = edited("pod-create-with-status", |r| {
            r["request"]["object"]["status"]["conditions"] =
                json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]);
        });
        assert!(matches!(outcome(&unschedulable), Outcome::Doorbell(Doorbell::Pod { .. })));
    }

    #[test]
    fn node_lifecycle_rings() {
        let node = |event| Outcome::Doorbell(Doorbell::Node { name: "rec-1-n1".into(), event, at: now() });
        assert_eq!(outcome(&fixture("node-create")), node(NodeEvent::Registered));
        assert_eq!(outcome(&fixture("node-status-ready")), node(NodeEvent::Ready));
        assert_eq!(outcome(&fixture("node-delete")), node(NodeEvent::Gone));
    }

    #[test]
    fn a_nodeclaim_or_nodepool_deletion_rings() {
        let claim = edited("node-delete", |r| {
            r["request"]["resource"] = json!({"group": "dovetail.dev", "version": "v1", "resource": "nodeclaims"});
            r["request"]["kind"] = json!({"group": "dovetail.dev", "version": "v1", "kind": "NodeClaim"});
            r["request"]["name"] = json!("default-x7k2p");
        });
        assert_eq!(
            outcome(&claim),
            Outcome::Doorbell(Doorbell::Deleted { kind: Deleted::NodeClaim, name: "default-x7k2p".into(), at: now() })
        );
        let pool = edited("node-delete", |r| {
            r["request"]["resource"] = json!({"group": "dovetail.dev", "version": "v1", "resource": "nodepools"});
            r["request"]["kind"] = json!({"group": "dovetail.dev", "version": "v1", "kind": "NodePool"});
            r["request"]["name"] = json!("web");
        });
        assert_eq!(
            outcome(&pool),
            Outcome::Doorbell(Doorbell::Deleted { kind: Deleted::NodePool, name: "web".into(), at: now() })
        );
        let created = edited("node-create", |r| {
            r["request"]["resource"] = json!({"group": "dovetail.dev", "version": "v1", "resource": "nodeclaims"})
        });
        assert_eq!(outcome(&created), Outcome::Unhandled);
    }

    #[test]
    fn node_heartbeat_does_not_ring() {
        assert_eq!(outcome(&fixture("node-status-heartbeat")), Outcome::Ignored);
        // Nor does a node going NotReady: the provisioner learns of that from its own reads.
        let not_ready = edited("node-status-heartbeat", |r| {
            r["request"]["object"]["status"]["conditions"][0]["status"] = json!("False");
        });
        assert_eq!(outcome(&not_ready), Outcome::Ignored);
    }

    #[test]
    fn dry_runs_do_not_ring() {
        assert_eq!(outcome(&fixture("node-create-dry-run")), Outcome::DryRun);
    }

    #[test]
    fn node_name_comes_from_the_object_when_the_request_has_none() {
        let unnamed = edited("node-delete", |r| r["request"]["name"] = json!(""));
        assert!(matches!(outcome(&unnamed), Outcome::Doorbell(Doorbell::Node { name, .. }) if name == "rec-1-n1"));
    }

    #[test]
    fn resources_and_operations_not_handled_are_allowed_without_a_doorbell() {
        let service = edited("node-create", |r| r["request"]["resource"]["resource"] = json!("services"));
        assert_eq!(outcome(&service), Outcome::Unhandled);
        let other_group = edited("node-create", |r| r["request"]["resource"]["group"] = json!("example.com"));
        assert_eq!(outcome(&other_group), Outcome::Unhandled);
        // Of Dovetail's own group only deletions of NodeClaims and NodePools ring.
        let class = edited("node-delete", |r| {
            r["request"]["resource"] = json!({"group": "dovetail.dev", "version": "v1", "resource": "ec2nodeclasses"})
        });
        assert_eq!(outcome(&class), Outcome::Unhandled);
        let node_update = edited("node-status-ready", |r| r["request"]["subResource"] = Value::Null);
        assert_eq!(outcome(&node_update), Outcome::Unhandled);
        let pod_delete = edited("pod-status-unschedulable", |r| {
            r["request"]["operation"] = json!("DELETE");
            r["request"]["subResource"] = Value::Null;
        });
        assert_eq!(outcome(&pod_delete), Outcome::Unhandled, "even a pod that looks unschedulable");
    }

    #[test]
    fn reviews_with_undecodable_objects_are_still_allowed() {
        // The objects do not decode, the uid does: the answer carries it.
        let odd = edited("node-status-ready", |r| r["request"]["object"]["status"]["conditions"] = json!("Ready"));
        let reviewed = review(&odd, now());
        assert_allows(&reviewed, &uid_of(&odd));
        assert!(
            matches!(&reviewed.outcome, Outcome::Malformed(why) if why.contains("conditions") || why.contains("invalid type"))
        );
    }

    #[test]
    fn bodies_that_are_not_admission_reviews_get_no_review_back() {
        let v1beta1 = edited("node-create", |r| r["apiVersion"] = json!("admission.k8s.io/v1beta1"));
        let no_request = edited("node-create", |r| r["request"] = Value::Null);
        let no_uid = edited("node-create", |r| r["request"]["uid"] = json!(7));
        let cases: [(&[u8], &str); 6] = [
            (b"not json", "not an AdmissionReview: expected ident"),
            (b"", "not an AdmissionReview: EOF"),
            (
                br#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}"#,
                "expected admission.k8s.io/v1 AdmissionReview, found \"v1/Pod\"",
            ),
            (&v1beta1, "found \"admission.k8s.io/v1beta1/AdmissionReview\""),
            (&no_request, "an AdmissionReview without a request"),
            (&no_uid, "not an AdmissionReview: invalid type: integer `7`, expected a string"),
        ];
        for (body, why) in cases {
            let reviewed = review(body, now());
            assert!(reviewed.response.is_empty());
            assert!(
                matches!(&reviewed.outcome, Outcome::NotReview(reason) if reason.contains(why)),
                "{why}: {:?}",
                reviewed.outcome
            );
        }
    }

    #[test]
    fn outcome_labels() {
        let labels: Vec<&str> = [
            outcome(&fixture("pod-status-unschedulable")),
            outcome(&fixture("node-create")),
            Outcome::Ignored,
            Outcome::Unhandled,
            Outcome::DryRun,
            Outcome::Malformed(String::new()),
            Outcome::NotReview(String::new()),
        ]
        .iter()
        .map(Outcome::label)
        .collect();
        assert_eq!(
            labels,
            ["pod_doorbell", "node_doorbell", "ignored", "unhandled", "dry_run", "malformed", "not_admission_review"]
        );
    }
}

#[cfg(test)]
mod fuzz;
