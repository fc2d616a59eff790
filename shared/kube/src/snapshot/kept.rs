//! What the snapshot keeps of each object: the core's form, converted once when the object
//! arrives, and the few facts the assembly needs beside it. The raw object is dropped as soon as
//! it is kept, so the snapshot's memory follows the cluster in the core's terms, not in JSON.
//!
//! A conversion error is kept too (the object stays listed as invalid, with its field, until it
//! changes), so one bad object is reported on every read, as a fresh list would.

use super::lean::Lean;
use dovetail_api::convert::{
    self, daemonset_from_k8s, displaced_by_node_deletion, node_from_k8s, pdb_from_k8s, pod_from_k8s, provisionable,
    ConvertError, NotProvisionable,
};
use dovetail_api::crd;
use dovetail_core::model::{DaemonSet, Node, Pdb, Pod};
use dovetail_core::nodeclaim::object::{Observed, VERSION_ANNOTATION};
use dovetail_core::time::Time;
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

/// One kind of object as the snapshot keeps it.
pub(crate) trait Keep: Sized + Clone + Debug + PartialEq + Send + Sync {
    /// The object as the API server sends it.
    type Object: Clone + DeserializeOwned + Debug + Send + 'static;
    /// The object's name as `Invalid` and Events give it (`Kind/name`, `Kind/namespace/name`):
    /// unique within a kind, and in the API server's list order.
    fn key(o: &Self::Object) -> String;
    fn keep(o: &Self::Object) -> Self;

    /// The node a pod left, and when, if a watch replacing this kept version by `after` (`None`:
    /// the object is gone) takes it off that node; `o` is the object as the watch delivered it,
    /// `now` when the change is applied. Nothing for other kinds.
    fn departure(&self, _after: Option<&Self>, _o: &Self::Object, _now: Time) -> Option<(String, Time)> {
        None
    }

    /// The same for an object a relist no longer shows (its departure only known to be before
    /// `now`, the list's time): a kind small enough to be listed again at each read sees its
    /// pods leave this way, not through a watch.
    fn vanished(&self, _now: Time) -> Option<(String, Time)> {
        None
    }
}

fn name_of(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// `Kind/name` or `Kind/namespace/name`.
pub(crate) fn object_name<K: Resource<DynamicType = ()>>(o: &K) -> String {
    let name = name_of(o.meta());
    match o.meta().namespace.as_deref() {
        Some(ns) => format!("{}/{ns}/{name}", K::kind(&())),
        None => format!("{}/{name}", K::kind(&())),
    }
}

fn uid_of(meta: &ObjectMeta) -> Option<String> {
    meta.uid.clone().filter(|u| !u.is_empty())
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeptNode {
    pub uid: Option<String>,
    pub node: Result<Node, ConvertError>,
    /// `deletionTimestamp` is set: its pods need a home elsewhere.
    pub deleting: bool,
}

impl Keep for KeptNode {
    type Object = Lean<k8s::Node>;
    fn key(o: &Lean<k8s::Node>) -> String {
        object_name(o)
    }
    fn keep(Lean(n): &Lean<k8s::Node>) -> Self {
        KeptNode { uid: uid_of(&n.metadata), node: node_from_k8s(n), deleting: n.metadata.deletion_timestamp.is_some() }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeptPod {
    pub uid: Option<String>,
    /// Shared with every read's state that places it (most pods never change between reads).
    pub pod: Result<Arc<Pod>, ConvertError>,
    /// `Succeeded` or `Failed`: the pod holds nothing. Lists leave such pods out (a field
    /// selector); this is for one that finished between a page and the next.
    pub finished: Option<String>,
    /// Karpenter's verdict: `Ok` waits for capacity, `Bound(node)` runs there.
    pub verdict: Result<(), NotProvisionable>,
    /// It needs a new home if its node is deleted (not a DaemonSet or mirror pod).
    pub displaced: bool,
    /// The pod's volumes that name a claim (`None` when none does: most pods have only their
    /// service account's projected volume, and a spec kept for each would be most of what the
    /// snapshot holds): claims, PVs and classes change on their own, so the storage index
    /// resolves them at each assembly.
    pub volumes: Option<Box<k8s::PodSpec>>,
}

impl Keep for KeptPod {
    type Object = Lean<k8s::Pod>;
    fn key(o: &Lean<k8s::Pod>) -> String {
        object_name(o)
    }
    fn keep(Lean(p): &Lean<k8s::Pod>) -> Self {
        let finished = p.status.as_ref().and_then(|s| s.phase.clone()).filter(|ph| ph == "Succeeded" || ph == "Failed");
        let claims: Vec<k8s::Volume> = p
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some())
            .map(|v| k8s::Volume {
                name: v.name.clone(),
                persistent_volume_claim: v.persistent_volume_claim.clone(),
                ephemeral: v.ephemeral.clone(),
                ..k8s::Volume::default()
            })
            .collect();
        let volumes =
            (!claims.is_empty()).then(|| Box::new(k8s::PodSpec { volumes: Some(claims), ..k8s::PodSpec::default() }));
        KeptPod {
            uid: uid_of(&p.metadata),
            pod: pod_from_k8s(p).map(Arc::new),
            finished,
            verdict: provisionable(p),
            displaced: displaced_by_node_deletion(p).is_ok(),
            volumes,
        }
    }

    /// A running pod that is deleted or finishes (the live-pods selector reports that as a
    /// deletion) leaves its node: at its deletionTimestamp when it has one (when it was due to be
    /// gone at the latest; the watch may apply the deletion minutes later), else when the watch
    /// delivered it.
    fn departure(&self, after: Option<&Self>, Lean(p): &Lean<k8s::Pod>, now: Time) -> Option<(String, Time)> {
        let due = p.metadata.deletion_timestamp.as_ref().map(convert::time);
        self.leaves(after, due, now)
    }

    fn vanished(&self, now: Time) -> Option<(String, Time)> {
        self.leaves(None, None, now)
    }
}

impl KeptPod {
    /// The node this pod leaves and when, if it is a pod whose comings and goings count (not a
    /// DaemonSet or mirror pod) and it leaves: it is gone (`after` is `None`) or now finished.
    fn leaves(&self, after: Option<&Self>, due: Option<Time>, now: Time) -> Option<(String, Time)> {
        let Err(NotProvisionable::Bound(node)) = &self.verdict else { return None };
        let counts = self.pod.as_ref().is_ok_and(|pod| pod.marks_pod_event());
        if !counts || self.finished.is_some() || after.is_some_and(|a| a.finished.is_none()) {
            return None;
        }
        Some((node.clone(), due.map_or(now, |d| d.min(now))))
    }
}

/// A DaemonSet or PodDisruptionBudget: only its core form matters.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Converted<T>(pub Result<T, ConvertError>);

impl Keep for Converted<DaemonSet> {
    type Object = apps::DaemonSet;
    fn key(o: &apps::DaemonSet) -> String {
        object_name(o)
    }
    fn keep(o: &apps::DaemonSet) -> Self {
        Converted(daemonset_from_k8s(o))
    }
}

impl Keep for Converted<Pdb> {
    type Object = PodDisruptionBudget;
    fn key(o: &PodDisruptionBudget) -> String {
        object_name(o)
    }
    fn keep(o: &PodDisruptionBudget) -> Self {
        Converted(pdb_from_k8s(o))
    }
}

/// Storage objects are kept as they are, without `managedFields` (their largest part): the
/// storage index reads them together at each assembly, since a pod's zone depends on all three.
macro_rules! kept_whole {
    ($($t:ty),*) => {$(
        impl Keep for $t {
            type Object = $t;
            fn key(o: &$t) -> String {
                object_name(o)
            }
            fn keep(o: &$t) -> Self {
                let mut o = o.clone();
                o.metadata.managed_fields = None;
                o
            }
        }
    )*};
}
kept_whole!(k8s::PersistentVolumeClaim, k8s::PersistentVolume, StorageClass);

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeptAttachment {
    pub node: String,
    /// The attached PersistentVolume, if the attachment names one.
    pub volume: Option<String>,
    pub name: String,
}

impl Keep for KeptAttachment {
    type Object = VolumeAttachment;
    fn key(o: &VolumeAttachment) -> String {
        object_name(o)
    }
    fn keep(a: &VolumeAttachment) -> Self {
        KeptAttachment {
            node: a.spec.node_name.clone(),
            volume: a.spec.source.persistent_volume_name.clone(),
            name: name_of(&a.metadata),
        }
    }
}

/// A namespace's labels, with `kubernetes.io/metadata.name` always there (the API server sets
/// it; a selector on it must match a namespace that predates the label too).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeptNamespace {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

impl Keep for KeptNamespace {
    type Object = k8s::Namespace;
    fn key(o: &k8s::Namespace) -> String {
        object_name(o)
    }
    fn keep(ns: &k8s::Namespace) -> Self {
        let name = name_of(&ns.metadata);
        let mut labels = ns.metadata.labels.clone().unwrap_or_default();
        labels.entry("kubernetes.io/metadata.name".into()).or_insert_with(|| name.clone());
        KeptNamespace { name, labels }
    }
}

/// A listed custom object as JSON with its apiVersion and kind (list items may omit them), and
/// without `managedFields`. NodePools, EC2NodeClasses and NodeOverlays stay JSON until each is
/// typed on its own (see `crd::from_value`); they are few.
fn typed_json(o: &DynamicObject, api_version: &str, kind: &str) -> Value {
    let mut o = o.clone();
    o.metadata.managed_fields = None;
    let mut v = serde_json::to_value(o).unwrap_or(Value::Null);
    if let Some(map) = v.as_object_mut() {
        map.insert("apiVersion".into(), api_version.into());
        map.insert("kind".into(), kind.into());
    }
    v
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeptPool(pub Value);

impl Keep for KeptPool {
    type Object = DynamicObject;
    fn key(o: &DynamicObject) -> String {
        format!("NodePool/{}", name_of(&o.metadata))
    }
    fn keep(o: &DynamicObject) -> Self {
        KeptPool(typed_json(o, crd::API_VERSION, "NodePool"))
    }
}

/// A NodeClaim object: only what tells it in step with its claim, and whether it is being deleted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeptClaimObject {
    pub uid: Option<String>,
    pub observed: Observed,
}

impl Keep for KeptClaimObject {
    type Object = DynamicObject;
    fn key(o: &DynamicObject) -> String {
        format!("NodeClaim/{}", name_of(&o.metadata))
    }
    fn keep(o: &DynamicObject) -> Self {
        let version =
            o.metadata.annotations.as_ref().and_then(|a| a.get(VERSION_ANNOTATION)).and_then(|v| v.parse().ok());
        KeptClaimObject {
            uid: uid_of(&o.metadata),
            observed: Observed {
                name: name_of(&o.metadata),
                version,
                deleting: o.metadata.deletion_timestamp.is_some(),
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeptClass(pub Value);

impl Keep for KeptClass {
    type Object = DynamicObject;
    fn key(o: &DynamicObject) -> String {
        format!("{}/{}", crd::EC2_NODE_CLASS_KIND, name_of(&o.metadata))
    }
    fn keep(o: &DynamicObject) -> Self {
        KeptClass(typed_json(o, crd::API_VERSION, crd::EC2_NODE_CLASS_KIND))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeptOverlay(pub Value);

impl Keep for KeptOverlay {
    type Object = DynamicObject;
    fn key(o: &DynamicObject) -> String {
        format!("NodeOverlay/{}", name_of(&o.metadata))
    }
    fn keep(o: &DynamicObject) -> Self {
        KeptOverlay(typed_json(o, crd::OVERLAY_API_VERSION, "NodeOverlay"))
    }
}
