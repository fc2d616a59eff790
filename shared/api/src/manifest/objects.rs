//! Documents into typed Kubernetes objects: which kinds are read, under which API versions.

use serde::de::DeserializeOwned;
use serde_json::Value;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::error::LoadErrorKind;
use super::read::Doc;
use crate::crd::meta::NameRule;

/// An object the loader reads.
#[derive(Debug, Clone)]
pub(crate) enum Object {
    Pod(Box<core::Pod>),
    Deployment(Box<apps::Deployment>),
    ReplicaSet(Box<apps::ReplicaSet>),
    StatefulSet(Box<apps::StatefulSet>),
    DaemonSet(Box<apps::DaemonSet>),
    Job(Box<batch::Job>),
    CronJob(Box<batch::CronJob>),
    Node(Box<core::Node>),
    Claim(Box<core::PersistentVolumeClaim>),
    Volume(Box<core::PersistentVolume>),
    StorageClass(Box<StorageClass>),
    Pdb(Box<PodDisruptionBudget>),
    Namespace(Box<core::Namespace>),
    PriorityClass(Box<PriorityClass>),
    /// NodePool / EC2NodeClass: kept raw, their typed form lives in the `crd` module.
    NodePool(Value),
    NodeClass(Value),
    /// NodeOverlay (`dovetail.dev/v1alpha1` or Karpenter's `karpenter.sh/v1alpha1`), kept raw too.
    NodeOverlay(Value),
}

impl Object {
    /// The metadata the loader checks itself, with its kind's name rule: every typed kind but
    /// those whose conversion checks it (Pod, Node, DaemonSet, PodDisruptionBudget) and the
    /// NodePools and EC2NodeClasses their validation checks.
    pub fn unconverted_metadata(&self) -> Option<(&ObjectMeta, NameRule)> {
        let subdomain = |m| Some((m, NameRule::Subdomain));
        match self {
            Object::Deployment(o) => subdomain(&o.metadata),
            Object::ReplicaSet(o) => subdomain(&o.metadata),
            Object::StatefulSet(o) => subdomain(&o.metadata),
            Object::Job(o) => subdomain(&o.metadata),
            Object::CronJob(o) => subdomain(&o.metadata),
            Object::Claim(o) => subdomain(&o.metadata),
            Object::Volume(o) => subdomain(&o.metadata),
            Object::StorageClass(o) => subdomain(&o.metadata),
            Object::PriorityClass(o) => subdomain(&o.metadata),
            Object::Namespace(o) => Some((&o.metadata, NameRule::Label)),
            Object::Pod(_)
            | Object::Node(_)
            | Object::DaemonSet(_)
            | Object::Pdb(_)
            | Object::NodePool(_)
            | Object::NodeClass(_)
            | Object::NodeOverlay(_) => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pod,
    Deployment,
    ReplicaSet,
    StatefulSet,
    DaemonSet,
    Job,
    CronJob,
    Node,
    Claim,
    Volume,
    StorageClass,
    Pdb,
    Namespace,
    PriorityClass,
    NodePool,
    NodeClass,
    NodeOverlay,
}

/// (kind, API group, accepted apiVersions, groups that once served the kind, our Kind, namespaced)
type Entry = (&'static str, &'static str, &'static [&'static str], &'static [&'static str], Kind, bool);

const KINDS: &[Entry] = &[
    ("Pod", "", &["v1"], &[], Kind::Pod, true),
    ("Node", "", &["v1"], &[], Kind::Node, false),
    ("PersistentVolumeClaim", "", &["v1"], &[], Kind::Claim, true),
    ("PersistentVolume", "", &["v1"], &[], Kind::Volume, false),
    ("Namespace", "", &["v1"], &[], Kind::Namespace, false),
    ("Deployment", "apps", &["apps/v1"], &["extensions"], Kind::Deployment, true),
    ("ReplicaSet", "apps", &["apps/v1"], &["extensions"], Kind::ReplicaSet, true),
    ("StatefulSet", "apps", &["apps/v1"], &[], Kind::StatefulSet, true),
    ("DaemonSet", "apps", &["apps/v1"], &["extensions"], Kind::DaemonSet, true),
    ("Job", "batch", &["batch/v1"], &[], Kind::Job, true),
    ("CronJob", "batch", &["batch/v1"], &[], Kind::CronJob, true),
    ("StorageClass", "storage.k8s.io", &["storage.k8s.io/v1"], &[], Kind::StorageClass, false),
    ("PodDisruptionBudget", "policy", &["policy/v1"], &[], Kind::Pdb, true),
    ("PriorityClass", "scheduling.k8s.io", &["scheduling.k8s.io/v1"], &[], Kind::PriorityClass, false),
    ("NodePool", "dovetail.dev", &["dovetail.dev/v1"], &[], Kind::NodePool, false),
    ("NodePool", "karpenter.sh", &["karpenter.sh/v1"], &[], Kind::NodePool, false),
    ("EC2NodeClass", "dovetail.dev", &["dovetail.dev/v1"], &[], Kind::NodeClass, false),
    ("EC2NodeClass", "karpenter.k8s.aws", &["karpenter.k8s.aws/v1"], &[], Kind::NodeClass, false),
    ("NodeOverlay", "dovetail.dev", &["dovetail.dev/v1alpha1"], &[], Kind::NodeOverlay, false),
    ("NodeOverlay", "karpenter.sh", &["karpenter.sh/v1alpha1"], &[], Kind::NodeOverlay, false),
];

fn group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// What a document is, before decoding it.
#[derive(Debug, Clone)]
pub(crate) struct Header {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    /// `Kind namespace/name`, `Kind name` for cluster-scoped kinds.
    pub label: String,
    /// `None`: a kind the loader does not read.
    known: Option<Kind>,
}

impl Header {
    pub fn is_known(&self) -> bool {
        self.known.is_some()
    }

    /// Identity for duplicate detection: NodePools of both API groups share one namespace.
    pub fn identity(&self) -> Option<(String, String, String)> {
        let kind = format!("{:?}", self.known?);
        Some((kind, self.namespace.clone().unwrap_or_default(), self.name.clone()))
    }
}

/// Reads apiVersion, kind and name, and checks the API version of kinds the loader reads.
pub(crate) fn header(doc: &Doc) -> Result<Header, (Option<String>, LoadErrorKind)> {
    let str_field = |k: &str| doc.value.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    let meta = doc.value.get("metadata");
    let meta_str = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str).filter(|s| !s.is_empty());
    let name = meta_str("name").or_else(|| meta_str("generateName")).unwrap_or_default().to_string();
    let kind = str_field("kind");
    let api_version = str_field("apiVersion");
    let early_label = match &kind {
        Some(k) if !name.is_empty() => Some(format!("{k} {name}")),
        Some(k) => Some(k.clone()),
        None => (!name.is_empty()).then(|| name.clone()),
    };
    let Some(api_version) = api_version else {
        return Err((early_label, LoadErrorKind::MissingApiVersion));
    };
    let Some(kind) = kind else {
        return Err((early_label, LoadErrorKind::MissingKind));
    };

    let mut known = None;
    let mut namespaced = meta_str("namespace").is_some();
    for &(k, g, versions, legacy, ours, ns) in KINDS {
        if k != kind {
            continue;
        }
        let grp = group(&api_version);
        if grp == g && versions.contains(&api_version.as_str()) {
            known = Some(ours);
            namespaced = ns;
            break;
        }
        if grp == g || legacy.contains(&grp) {
            let label = format!("{kind} {name}");
            return Err((
                Some(label),
                LoadErrorKind::UnsupportedVersion { kind: kind.clone(), api_version, expected: versions[0] },
            ));
        }
    }
    let namespace =
        namespaced.then(|| meta_str("namespace").unwrap_or(crate::convert::pod::DEFAULT_NAMESPACE).to_string());
    let shown_name = if name.is_empty() { "<unnamed>" } else { name.as_str() };
    let label = match &namespace {
        Some(ns) => format!("{kind} {ns}/{shown_name}"),
        None => format!("{kind} {shown_name}"),
    };
    if known.is_some() && name.is_empty() {
        return Err((Some(label), LoadErrorKind::Schema("metadata.name: missing".into())));
    }
    Ok(Header { api_version, kind, namespace, name, label, known })
}

/// Decodes a document into its typed object; the error names the field (see [`crate::decode`]).
pub(super) fn decode<T: DeserializeOwned>(value: &Value) -> Result<T, LoadErrorKind> {
    crate::decode::with_path(value).map_err(LoadErrorKind::Schema)
}

/// The typed object of a known kind.
pub(crate) fn object(header: &Header, doc: &Doc) -> Result<Object, LoadErrorKind> {
    let Some(kind) = header.known else {
        return Err(LoadErrorKind::Invalid(format!("{} is not a kind the loader reads", header.kind)));
    };
    let v = &doc.value;
    Ok(match kind {
        Kind::Pod => Object::Pod(decode(v)?),
        Kind::Deployment => Object::Deployment(decode(v)?),
        Kind::ReplicaSet => Object::ReplicaSet(decode(v)?),
        Kind::StatefulSet => Object::StatefulSet(decode(v)?),
        Kind::DaemonSet => Object::DaemonSet(decode(v)?),
        Kind::Job => Object::Job(decode(v)?),
        Kind::CronJob => Object::CronJob(decode(v)?),
        Kind::Node => Object::Node(decode(v)?),
        Kind::Claim => Object::Claim(decode(v)?),
        Kind::Volume => Object::Volume(decode(v)?),
        Kind::StorageClass => Object::StorageClass(decode(v)?),
        Kind::Pdb => Object::Pdb(decode(v)?),
        Kind::Namespace => Object::Namespace(decode(v)?),
        Kind::PriorityClass => Object::PriorityClass(decode(v)?),
        Kind::NodePool => Object::NodePool(v.clone()),
        Kind::NodeClass => Object::NodeClass(v.clone()),
        Kind::NodeOverlay => Object::NodeOverlay(v.clone()),
    })
}
