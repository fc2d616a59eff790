//! The snapshot read: every list at once, then one pass that turns the objects into the core's
//! [`KubeState`] through dovetail-api's converters (the same ones `dovetail plan` uses on files).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use dovetail_api::convert::{
    daemonset_from_k8s, displaced_by_node_deletion, node_from_k8s, pdb_from_k8s, pod_from_k8s, provisionable,
    ConvertError, NotProvisionable, StorageIndex,
};
use dovetail_api::crd::{self, EC2NodeClass, NodePool, NodePoolStatus};
use dovetail_core::labels;
use dovetail_core::model::{tolerates_all, Node, Taint, TaintEffect};
use dovetail_core::reconcile::ports::{Invalid, KubeState, PortResult};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::{Client, Resource};
use serde_json::Value;
use tracing::debug;

use crate::error::port_error;
use crate::list::list_all;

/// Everything one read lists, as the API server returned it.
#[derive(Debug, Default)]
pub(crate) struct Listed {
    pub nodes: Vec<k8s_openapi::api::core::v1::Node>,
    pub pods: Vec<Pod>,
    pub daemonsets: Vec<DaemonSet>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub claims: Vec<PersistentVolumeClaim>,
    pub volumes: Vec<PersistentVolume>,
    pub classes: Vec<StorageClass>,
    pub attachments: Vec<VolumeAttachment>,
    pub namespaces: Vec<Namespace>,
    /// NodePools and EC2NodeClasses stay JSON until each is typed on its own (see `crd::from_value`).
    pub nodepools: Vec<Value>,
    pub nodeclasses: Vec<Value>,
}

/// What the adapter remembers from its last read, for the writes that follow in the same pass.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Seen {
    /// uid of each Pod, Node and NodePool, by the name Events use (`Pod/ns/x`, `Node/x`,
    /// `NodePool/x`): Events point at the exact object without a GET each, and evictions carry
    /// the pod's uid as a precondition.
    pub uids: HashMap<String, String>,
    pub pools: HashMap<String, ObservedPool>,
}

/// A NodePool's generation and status as last read, so a status write keeps the conditions'
/// transition times and is skipped when nothing changed.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct ObservedPool {
    pub generation: Option<i64>,
    pub status: NodePoolStatus,
}

/// Lists everything concurrently. Finished pods are left out by the server (a field selector):
/// on clusters running Jobs they can outnumber the live ones.
pub(crate) async fn fetch(client: &Client, page: u32) -> PortResult<Listed> {
    let all = ListParams::default();
    let live_pods = ListParams::default().fields("status.phase!=Succeeded,status.phase!=Failed");
    let pools = Api::<DynamicObject>::all_with(client.clone(), &ApiResource::erase::<NodePool>(&()));
    let classes = Api::<DynamicObject>::all_with(client.clone(), &ApiResource::erase::<EC2NodeClass>(&()));
    let (
        nodes,
        pods,
        daemonsets,
        pdbs,
        claims,
        volumes,
        storage_classes,
        attachments,
        namespaces,
        nodepools,
        nodeclasses,
    ) = tokio::try_join!(
        list(Api::all(client.clone()), &all, page, "nodes"),
        list(Api::all(client.clone()), &live_pods, page, "pods"),
        list(Api::all(client.clone()), &all, page, "daemonsets"),
        list(Api::all(client.clone()), &all, page, "poddisruptionbudgets"),
        list(Api::all(client.clone()), &all, page, "persistentvolumeclaims"),
        list(Api::all(client.clone()), &all, page, "persistentvolumes"),
        list(Api::all(client.clone()), &all, page, "storageclasses"),
        list(Api::all(client.clone()), &all, page, "volumeattachments"),
        list(Api::all(client.clone()), &all, page, "namespaces"),
        list(pools, &all, page, "nodepools"),
        list(classes, &all, page, "ec2nodeclasses"),
    )?;
    Ok(Listed {
        nodes,
        pods,
        daemonsets,
        pdbs,
        claims,
        volumes,
        classes: storage_classes,
        attachments,
        namespaces,
        nodepools: nodepools.into_iter().map(|o| typed_json(o, crd::API_VERSION, "NodePool")).collect(),
        nodeclasses: nodeclasses
            .into_iter()
            .map(|o| typed_json(o, crd::API_VERSION, crd::EC2_NODE_CLASS_KIND))
            .collect(),
    })
}

async fn list<K>(api: Api<K>, params: &ListParams, page: u32, what: &str) -> PortResult<Vec<K>>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    list_all(&api, params, page).await.map_err(|e| port_error(&format!("list {what}"), e))
}

/// A listed custom object as JSON with its apiVersion and kind (list items may omit them).
fn typed_json(o: DynamicObject, api_version: &str, kind: &str) -> Value {
    let mut v = serde_json::to_value(o).unwrap_or(Value::Null);
    if let Some(map) = v.as_object_mut() {
        map.insert("apiVersion".into(), api_version.into());
        map.insert("kind".into(), kind.into());
    }
    v
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// `Kind/name` or `Kind/namespace/name`, as `Invalid` and Events name objects.
fn object_name<K: Resource<DynamicType = ()>>(o: &K) -> String {
    let name = name_of(o.meta());
    match o.meta().namespace.as_deref() {
        Some(ns) => format!("{}/{ns}/{name}", K::kind(&())),
        None => format!("{}/{name}", K::kind(&())),
    }
}

fn unusable<K: Resource<DynamicType = ()>>(o: &K, e: ConvertError) -> Invalid {
    Invalid { object: object_name(o), field: e.path, message: e.kind.to_string() }
}

/// Converts every object, listing the ones that fail as invalid (with the field at fault).
fn each<K: Resource<DynamicType = ()>, T>(
    objects: &[K],
    invalid: &mut Vec<Invalid>,
    mut convert: impl FnMut(&K) -> Result<T, ConvertError>,
) -> Vec<T> {
    objects.iter().filter_map(|o| convert(o).map_err(|e| invalid.push(unusable(o, e))).ok()).collect()
}

/// Turns the lists into the core's view. Nothing here fails the read: an object that cannot be
/// converted goes to `invalid` with its field and is left out, and everything else carries on.
pub(crate) fn assemble(listed: Listed) -> (KubeState, Seen) {
    let mut state = KubeState::default();
    let mut seen = Seen::default();

    let mut storage = StorageIndex::new();
    each(&listed.claims, &mut state.invalid, |c| storage.add_claim(c));
    each(&listed.volumes, &mut state.invalid, |v| storage.add_volume(v));
    each(&listed.classes, &mut state.invalid, |c| storage.add_class(c));

    let mut nodes: Vec<Node> = Vec::with_capacity(listed.nodes.len());
    let mut node_index: HashMap<String, usize> = HashMap::new();
    let mut deleting: BTreeSet<String> = BTreeSet::new();
    for n in &listed.nodes {
        let name = name_of(&n.metadata);
        remember_uid(&mut seen, object_name(n), &n.metadata);
        match node_from_k8s(n) {
            Ok(node) => {
                if n.metadata.deletion_timestamp.is_some() {
                    deleting.insert(name.clone());
                }
                node_index.insert(name, nodes.len());
                nodes.push(node);
            }
            Err(e) => state.invalid.push(unusable(n, e)),
        }
    }

    // Pods that will not leave their node when it drains: their volumes never detach, so a
    // termination waiting on those attachments would only burn its grace period (Karpenter
    // leaves them out the same way).
    let disrupted = [Taint::new(labels::TAINT_DISRUPTED, "", TaintEffect::NoSchedule)];
    let mut staying_claims: BTreeSet<(String, String)> = BTreeSet::new();

    for p in &listed.pods {
        let key = object_name(p);
        if let Some(phase @ ("Succeeded" | "Failed")) = p.status.as_ref().and_then(|s| s.phase.as_deref()) {
            debug!(pod = %key, phase, "finished pod holds nothing");
            continue;
        }
        remember_uid(&mut seen, key.clone(), &p.metadata);
        let mut pod = match pod_from_k8s(p) {
            Ok(pod) => pod,
            Err(e) => {
                state.invalid.push(unusable(p, e));
                continue;
            }
        };
        let spec = p.spec.as_ref().expect("pod_from_k8s checked the spec");
        pod.volume_requirements = storage.pod_requirements(&pod.namespace, &pod.name, spec, &[]);
        match provisionable(p) {
            Ok(()) => state.pending.push(pod),
            Err(NotProvisionable::Bound(node)) => {
                let Some(&i) = node_index.get(&node) else {
                    debug!(pod = %key, node, "bound to a node that is not listed");
                    continue;
                };
                if pod.is_mirror() || tolerates_all(&pod.tolerations, &disrupted).is_ok() {
                    for v in spec.volumes.iter().flatten() {
                        if let Some(c) = &v.persistent_volume_claim {
                            staying_claims.insert((pod.namespace.clone(), c.claim_name.clone()));
                        }
                    }
                }
                if deleting.contains(&node) && displaced_by_node_deletion(p).is_ok() {
                    let mut moving = pod.clone();
                    moving.node_name = None;
                    state.pending.push(moving);
                }
                nodes[i].pods.push(pod);
            }
            Err(reason) => debug!(pod = %key, %reason, "not provisionable"),
        }
    }
    state.nodes = nodes;

    state.daemonsets = each(&listed.daemonsets, &mut state.invalid, daemonset_from_k8s);
    state.pdbs = each(&listed.pdbs, &mut state.invalid, pdb_from_k8s);

    // The PV each staying pod's claim is bound to.
    let staying_volumes: BTreeSet<String> = listed
        .claims
        .iter()
        .filter(|c| staying_claims.contains(&(c.metadata.namespace.clone().unwrap_or_default(), name_of(&c.metadata))))
        .filter_map(|c| c.spec.as_ref().and_then(|s| s.volume_name.clone()))
        .collect();
    let mut attachments: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for a in &listed.attachments {
        let pv = a.spec.source.persistent_volume_name.clone();
        if pv.as_ref().is_some_and(|pv| staying_volumes.contains(pv)) {
            continue;
        }
        let shown = pv.unwrap_or_else(|| name_of(&a.metadata));
        attachments.entry(a.spec.node_name.clone()).or_default().push(shown);
    }
    state.volume_attachments = attachments;

    for ns in &listed.namespaces {
        let name = name_of(&ns.metadata);
        let mut l = ns.metadata.labels.clone().unwrap_or_default();
        // The API server sets it on every namespace; a selector on it must match even if a
        // namespace predates the label.
        l.entry("kubernetes.io/metadata.name".into()).or_insert_with(|| name.clone());
        state.namespaces.insert(name, l);
    }

    for v in &listed.nodepools {
        let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
        let object = format!("NodePool/{name}");
        if let Some(uid) = v.pointer("/metadata/uid").and_then(Value::as_str) {
            seen.uids.insert(object.clone(), uid.to_string());
        }
        seen.pools.insert(
            name.clone(),
            ObservedPool {
                generation: v.pointer("/metadata/generation").and_then(Value::as_i64),
                // A status this version cannot read is rewritten whole by the next status write.
                status: v.get("status").and_then(|s| serde_json::from_value(s.clone()).ok()).unwrap_or_default(),
            },
        );
        match crd::from_value::<NodePool>("NodePool", v).map_err(|e| vec![e]).and_then(|np| np.to_core()) {
            Ok(pool) => state.nodepools.push(pool),
            Err(errors) => {
                for e in errors {
                    state.invalid.push(Invalid { object: object.clone(), field: e.field, message: e.message });
                }
            }
        }
    }
    for v in &listed.nodeclasses {
        let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let object = format!("{}/{name}", crd::EC2_NODE_CLASS_KIND);
        match crd::from_value::<EC2NodeClass>(crd::EC2_NODE_CLASS_KIND, v)
            .map_err(|e| vec![e])
            .and_then(|c| c.to_core())
        {
            Ok(class) => state.nodeclasses.push(class),
            Err(errors) => {
                for e in errors {
                    state.invalid.push(Invalid { object: object.clone(), field: e.field, message: e.message });
                }
            }
        }
    }
    (state, seen)
}

fn remember_uid(seen: &mut Seen, key: String, meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
    if let Some(uid) = meta.uid.as_ref().filter(|u| !u.is_empty()) {
        seen.uids.insert(key, uid.clone());
    }
}

#[cfg(test)]
mod tests;
