//! AdmissionReview requests as kube-apiserver sends them to the forwarder: the generator. The
//! oracle is in the forwarder's unit tests (`functions/forwarder/src/review/fuzz.rs`), so that
//! this crate does not link the forwarder's Kubernetes client and AWS SDK.

use arbitrary::Arbitrary;
use serde_json::{json, Map, Value};

use crate::tree::{Choice, Fragment, Tree, Word};

/// The target's name, seed directories and vocabulary (its `Target` is built in the forwarder).
pub const NAME: &str = "admission_review";
pub const FIXTURES: &[&str] = &["functions/forwarder/fixtures"];
pub const VOCABULARY: &[&str] = &[
    "apiVersion",
    "kind",
    "request",
    "uid",
    "resource",
    "subResource",
    "operation",
    "name",
    "namespace",
    "dryRun",
    "object",
    "oldObject",
    "metadata",
    "status",
    "conditions",
    "type",
    "reason",
    "message",
    "ownerReferences",
    "nominatedNodeName",
    "generateName",
    "PodScheduled",
    "Ready",
    "True",
    "False",
    "Unknown",
    "Unschedulable",
    "DaemonSet",
    "Node",
    "ReplicaSet",
    "admission.k8s.io/v1",
    "AdmissionReview",
    "",
];

const GROUPS: [&str; 4] = ["", "dovetail.dev", "apps", "karpenter.sh"];
const RESOURCES: [&str; 6] = ["pods", "nodes", "nodeclaims", "nodepools", "ec2nodeclasses", "services"];
const SUBRESOURCES: [&str; 3] = ["status", "eviction", "binding"];
const OPERATIONS: [&str; 4] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];
const CONDITIONS: [&str; 3] = ["PodScheduled", "Ready", "Initialized"];
const STATUSES: [&str; 3] = ["True", "False", "Unknown"];
const REASONS: [&str; 3] = ["Unschedulable", "SchedulerError", "KubeletReady"];
const OWNERS: [&str; 4] = ["DaemonSet", "Node", "ReplicaSet", "Job"];

/// A request for the resources, subresources and operations the forwarder handles (mostly),
/// with objects carrying the fields its rules read.
#[derive(Debug, Arbitrary)]
pub struct Input {
    uid: Option<Fragment>,
    group: Option<Choice>,
    resource: Option<Choice>,
    sub_resource: Option<Option<Choice>>,
    operation: Option<Choice>,
    name: Option<Word>,
    namespace: Option<Option<Word>>,
    dry_run: Option<Option<bool>>,
    object: Option<Option<Object>>,
    old_object: Option<Option<Object>>,
    /// Other request fields (userInfo, options, …).
    extra: Tree,
    /// No `request` at all, or not an object.
    request: Option<Fragment>,
}

#[derive(Debug, Arbitrary)]
pub struct Object {
    name: Option<Word>,
    namespace: Option<Word>,
    owners: Option<Vec<Choice>>,
    nominated: Option<Word>,
    conditions: Option<Vec<Condition>>,
    extra: Tree,
}

#[derive(Debug, Arbitrary)]
pub struct Condition {
    type_: Choice,
    status: Choice,
    reason: Option<Choice>,
    message: Option<Word>,
}

fn object(o: &Object, vocabulary: &[&str]) -> Value {
    let mut value = o.extra.value(vocabulary);
    let mut metadata = Map::new();
    if let Some(name) = &o.name {
        metadata.insert("name".into(), name.resolve(vocabulary).into());
    }
    if let Some(ns) = &o.namespace {
        metadata.insert("namespace".into(), ns.resolve(vocabulary).into());
    }
    if let Some(owners) = &o.owners {
        let refs: Vec<Value> =
            owners.iter().map(|k| json!({"kind": k.resolve(&OWNERS, vocabulary), "name": "x"})).collect();
        metadata.insert("ownerReferences".into(), refs.into());
    }
    let mut status = Map::new();
    if let Some(n) = &o.nominated {
        status.insert("nominatedNodeName".into(), n.resolve(vocabulary).into());
    }
    if let Some(conditions) = &o.conditions {
        let list: Vec<Value> = conditions
            .iter()
            .map(|c| {
                let mut v = json!({"type": c.type_.resolve(&CONDITIONS, vocabulary), "status": c.status.resolve(&STATUSES, vocabulary)});
                if let Some(r) = &c.reason {
                    v["reason"] = r.resolve(&REASONS, vocabulary).into();
                }
                if let Some(m) = &c.message {
                    v["message"] = m.resolve(vocabulary).into();
                }
                v
            })
            .collect();
        status.insert("conditions".into(), list.into());
    }
    if let Some(map) = value.as_object_mut() {
        map.insert("metadata".into(), Value::Object(metadata));
        map.insert("status".into(), Value::Object(status));
    }
    value
}

pub fn render(input: &Input, vocabulary: &[&str]) -> String {
    let mut request = input.extra.value(vocabulary);
    let map = request.as_object_mut().expect("a tree is an object");
    if let Some(uid) = &input.uid {
        map.insert("uid".into(), uid.value(vocabulary));
    }
    let mut resource = Map::new();
    if let Some(group) = &input.group {
        resource.insert("group".into(), group.resolve(&GROUPS, vocabulary).into());
    }
    if let Some(r) = &input.resource {
        resource.insert("resource".into(), r.resolve(&RESOURCES, vocabulary).into());
    }
    map.insert("resource".into(), Value::Object(resource));
    match &input.sub_resource {
        Some(Some(sub)) => {
            map.insert("subResource".into(), sub.resolve(&SUBRESOURCES, vocabulary).into());
        }
        Some(None) => {
            map.insert("subResource".into(), Value::Null);
        }
        None => {}
    }
    if let Some(op) = &input.operation {
        map.insert("operation".into(), op.resolve(&OPERATIONS, vocabulary).into());
    }
    if let Some(name) = &input.name {
        map.insert("name".into(), name.resolve(vocabulary).into());
    }
    if let Some(ns) = &input.namespace {
        map.insert("namespace".into(), ns.as_ref().map_or(Value::Null, |w| w.resolve(vocabulary).into()));
    }
    if let Some(dry) = &input.dry_run {
        map.insert("dryRun".into(), dry.map_or(Value::Null, Value::Bool));
    }
    for (key, o) in [("object", &input.object), ("oldObject", &input.old_object)] {
        if let Some(o) = o {
            map.insert(key.into(), o.as_ref().map_or(Value::Null, |o| object(o, vocabulary)));
        }
    }
    let request = match &input.request {
        Some(other) => other.value(vocabulary),
        None => request,
    };
    json!({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": request}).to_string()
}
