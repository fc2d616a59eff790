//! Dovetail's Kubernetes adapter: the core's [`Kube`] port over kube-rs.
//!
//! - [`KubeAdapter::read`]: nodes, pods, DaemonSets, PDBs, storage, VolumeAttachments, namespaces,
//!   NodePools, EC2NodeClasses and NodeClaim objects from a snapshot kept between reads ([`snapshot`]): the first
//!   read lists them (concurrently, page by page), later ones catch up with what changed. Objects
//!   are converted by dovetail-api (the converters `dovetail plan` uses on files); those that
//!   cannot be used go to [`KubeState::invalid`] with their field; one bad object never hides
//!   the others.
//! - writes: taints (a compare-and-swap on the taint list), node adoption (labels, Dovetail's
//!   termination finalizer and the NodeClaim as owner, one strategic merge patch), evictions
//!   (policy/v1 Eviction; a PDB's 429 is `Refused`), pod and node deletion (a node's finalizer
//!   removed once deleted), NodeClaim objects (server-side apply of object and status; deleted
//!   finalizer first), the termination finalizer of NodePools and EC2NodeClasses, Events (repeats folded into one), NodePool status (server-side apply on
//!   the status subresource, skipped when unchanged). Every write is idempotent: a node, pod,
//!   claim or pool that is already gone is success where that was the goal.
//! - [`eks_client`]: the client for an EKS endpoint, CA and bearer token.
//!
//! The functions' RBAC is `infra/k8s/rbac/functions-clusterrole.yaml`: exactly the verbs used here.

mod client;
mod error;
mod events;
mod read;
mod snapshot;
mod status;
mod taints;

use std::collections::BTreeMap;
use std::sync::Mutex;

use dovetail_api::crd::{self, NodePool, API_VERSION};
use dovetail_core::model::{Held, Taint};
use dovetail_core::nodeclaim::drain::EvictionResult;
use dovetail_core::nodeclaim::object::{ClaimObject, FINALIZER};
use dovetail_core::reconcile::ports::{ClassStatus, Kube, KubeState, OverlayStatus, PoolStatus, PortError, PortResult};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions};
use kube::Client;
use serde_json::{json, Value};
use tracing::{debug, info, warn};

pub use client::{adapter_settings, eks_client, eks_config, ClientError, CONNECT_TIMEOUT, REQUEST_TIMEOUT};
pub use events::{REPORTING_CONTROLLER, SOURCE_COMPONENT};
pub use snapshot::{Counts, Reading, CATCH_UP_SECONDS, LIVE_PODS, PAGE_SIZE};
pub use status::{READY, VALIDATION_SUCCEEDED};

use error::{is_conflict, is_not_found, port_error, status_code};
use read::{ObservedClass, ObservedOverlay, ObservedPool, Seen};
use snapshot::Snapshot;

/// Field manager of the NodePool status Dovetail applies.
pub const FIELD_MANAGER: &str = "dovetail";

/// Compare-and-swap attempts on a node's taints or an object's finalizers before giving up with `Conflict`.
const PATCH_ATTEMPTS: usize = 5;

/// The [`Kube`] port on a live cluster.
pub struct KubeAdapter {
    client: Client,
    /// `reportingInstance` of Events: which function (or process) wrote them.
    instance: String,
    reading: Reading,
    /// From the last read: uids for Events and eviction preconditions, NodePools' statuses.
    seen: Mutex<Seen>,
    /// What the core needs of the cluster, kept between reads (and across client renewals), and
    /// what its last sync asked of the API server.
    snapshot: tokio::sync::Mutex<(Snapshot, Counts)>,
}

impl KubeAdapter {
    /// An adapter on `client`. The client should be built with [`adapter_settings`] (as
    /// [`eks_client`] is): with kube-rs's default retry layer, a PDB-blocked eviction would be
    /// retried inside the client for minutes instead of coming back as `Refused`.
    pub fn new(client: Client) -> Self {
        KubeAdapter {
            client,
            instance: SOURCE_COMPONENT.to_string(),
            reading: Reading::default(),
            seen: Mutex::default(),
            snapshot: tokio::sync::Mutex::default(),
        }
    }

    /// Names the writer in Events' `reportingInstance` (the function name, say).
    pub fn with_reporting_instance(mut self, instance: impl Into<String>) -> Self {
        self.instance = instance.into();
        self
    }

    /// Objects per list page (default [`PAGE_SIZE`]).
    pub fn with_page_size(mut self, page_size: u32) -> Self {
        self.reading.page = page_size.max(1);
        self
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Swaps in a new client (a renewed token) and keeps the snapshot: the next read still only
    /// catches up.
    pub fn set_client(&mut self, client: Client) {
        self.client = client;
    }

    /// Forgets the snapshot: the next read lists everything again, as a new process would.
    pub async fn forget(&self) {
        self.snapshot.lock().await.0.clear();
    }

    /// Kinds that held fewer than `objects` objects at the last read are listed again instead of
    /// caught up (default [`PAGE_SIZE`]; 0 catches every kind up).
    pub fn with_relist_below(mut self, objects: usize) -> Self {
        self.reading.relist_below = objects;
        self
    }

    /// Fault injection for tests: every catch-up watch is dropped after `events` events, as if
    /// its connection broke.
    pub fn with_watch_drops(mut self, events: usize) -> Self {
        self.reading.drop_watch_after = Some(events);
        self
    }

    /// Tests: every kept kind resumes from `version`. An old one is answered 410 Gone, as after
    /// etcd's compaction, and the kind is listed again.
    pub async fn set_versions(&self, version: &str) {
        self.snapshot.lock().await.0.set_versions(version);
    }

    /// What the last read asked of the API server.
    pub async fn last_read(&self) -> Counts {
        self.snapshot.lock().await.1
    }

    fn uid(&self, object: &str) -> Option<String> {
        self.seen.lock().expect("seen lock").uids.get(object).cloned()
    }

    fn nodes(&self) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &ApiResource::erase::<Node>(&()))
    }

    /// NodeClaim objects (`nodeclaims.dovetail.dev`).
    fn claim_objects(&self) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &ApiResource::erase::<crd::NodeClaim>(&()))
    }

    fn nodepools(&self) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &ApiResource::erase::<NodePool>(&()))
    }

    /// The API of a NodePool or EC2NodeClass named as the core names them (`NodePool/x`), and
    /// the name.
    fn held<'a>(&self, object: &'a str) -> PortResult<(Api<DynamicObject>, &'a str)> {
        let resource = match Held::parse(object) {
            Some(Held::NodePool(name)) => (ApiResource::erase::<NodePool>(&()), name),
            Some(Held::NodeClass(name)) => (ApiResource::erase::<crd::EC2NodeClass>(&()), name),
            None => return Err(PortError::Rejected(format!("{object:?} is not NodePool/name or EC2NodeClass/name"))),
        };
        Ok((Api::all_with(self.client.clone(), &resource.0), resource.1))
    }

    /// Reads the node, computes its new taint list with `change`, and swaps it in if the list is
    /// still what was read; a lost race reads again. `Ok(false)`: the node does not exist.
    async fn change_taints(&self, node: &str, change: impl Fn(&[Value]) -> Option<Vec<Value>>) -> PortResult<bool> {
        let api = self.nodes();
        let mut last_failure: Option<(Value, kube::Error)> = None;
        for _ in 0..PATCH_ATTEMPTS {
            let current = match api.get(node).await {
                Ok(n) => n,
                Err(e) if is_not_found(&e) => return Ok(false),
                Err(e) => return Err(port_error(&format!("get node {node}"), e)),
            };
            let list = current.data.pointer("/spec/taints").and_then(Value::as_array);
            let Some(next) = change(list.map(Vec::as_slice).unwrap_or_default()) else {
                return Ok(true);
            };
            let rv = current.metadata.resource_version.clone().unwrap_or_default();
            let patch = taints::swap(list.map(Vec::as_slice), &rv, next);
            // Same patch as the failed one: the node did not change, so the failure was not a
            // lost race but a real refusal.
            if let Some((previous, e)) = last_failure.take() {
                if previous == patch {
                    return Err(port_error(&format!("patch taints of node {node}"), e));
                }
            }
            let json_patch: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| PortError::Rejected(format!("taint patch for node {node}: {e}")))?;
            match api.patch(node, &PatchParams::default(), &Patch::Json::<()>(json_patch)).await {
                Ok(_) => return Ok(true),
                Err(e) if is_not_found(&e) => return Ok(false),
                // A failed `test` comes back as 422, a moved resourceVersion as 409.
                Err(e) if matches!(status_code(&e), Some(409 | 422)) => {
                    debug!(node, error = %e, "taints changed under us; reading again");
                    last_failure = Some((patch, e));
                }
                Err(e) => return Err(port_error(&format!("patch taints of node {node}"), e)),
            }
        }
        Err(PortError::Conflict(format!("the taints of node {node} kept changing over {PATCH_ATTEMPTS} attempts")))
    }

    /// The uid an Event points at: from the last read, else looked up. A missing object is fine
    /// (the Event still lands, without a uid): Events often outlive what they describe.
    async fn resolve_uid(&self, object: &str, target: &events::Target) -> PortResult<Option<String>> {
        if let Some(uid) = self.uid(object) {
            return Ok(Some(uid));
        }
        let found = match (target.kind.as_str(), target.namespace.as_deref()) {
            ("Pod", Some(ns)) => Api::<Pod>::namespaced(self.client.clone(), ns)
                .get_opt(&target.name)
                .await
                .map(|p| p.and_then(|p| p.metadata.uid)),
            ("Node", None) => self.nodes().get_opt(&target.name).await.map(|n| n.and_then(|n| n.metadata.uid)),
            ("NodePool", None) => self.nodepools().get_opt(&target.name).await.map(|n| n.and_then(|n| n.metadata.uid)),
            ("NodeClaim", None) => {
                self.claim_objects().get_opt(&target.name).await.map(|n| n.and_then(|n| n.metadata.uid))
            }
            // Other kinds are not looked up.
            _ => return Ok(None),
        };
        found.map_err(|e| port_error(&format!("get {object}"), e))
    }

    /// The pool as it stands, from the last read or the API server; `None` when it is gone.
    /// Applies `status` to the status subresource of the `K` called `name` (server-side apply,
    /// Dovetail's fields forced, through a dynamic object). Whether it was written: an object
    /// deleted meanwhile has no status to write, which is no error.
    async fn apply_status<K: kube::Resource<DynamicType = ()>>(
        &self,
        name: &str,
        status: &impl serde::Serialize,
    ) -> PortResult<bool> {
        let resource = ApiResource::erase::<K>(&());
        let apply = json!({
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": { "name": name },
            "status": status,
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let api = Api::<DynamicObject>::all_with(self.client.clone(), &resource);
        match api.patch_status(name, &params, &Patch::Apply(&apply)).await {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(port_error(&format!("status of {} {name}", resource.kind), e)),
        }
    }

    async fn observed_pool(&self, name: &str) -> PortResult<Option<ObservedPool>> {
        if let Some(p) = self.seen.lock().expect("seen lock").pools.get(name).cloned() {
            return Ok(Some(p));
        }
        let found = self.nodepools().get_opt(name).await.map_err(|e| port_error(&format!("get NodePool {name}"), e))?;
        Ok(found.map(|o| ObservedPool {
            generation: o.metadata.generation,
            status: o.data.get("status").and_then(|s| serde_json::from_value(s.clone()).ok()).unwrap_or_default(),
        }))
    }
}

/// Adds Dovetail's finalizer to an object (a NodePool or an EC2NodeClass) that lacks it: the
/// whole list written back as read plus ours, on the condition that the object is still the
/// version read (a merge patch carrying `resourceVersion`), read again when it moved meanwhile. A
/// patch never creates, so an object deleted meanwhile stays gone; gone is success.
async fn hold(api: &Api<DynamicObject>, name: &str) -> PortResult<()> {
    for _ in 0..PATCH_ATTEMPTS {
        let current = match api.get_opt(name).await {
            Ok(Some(o)) => o,
            Ok(None) => return Ok(()),
            Err(e) => return Err(port_error(&format!("get {name}"), e)),
        };
        let mut finalizers = current.metadata.finalizers.unwrap_or_default();
        // A deleted object accepts no new finalizer (and needs none: it is going).
        if finalizers.iter().any(|f| f == FINALIZER) || current.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        finalizers.push(FINALIZER.to_string());
        let patch =
            json!({ "metadata": { "finalizers": finalizers, "resourceVersion": current.metadata.resource_version } });
        match api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => {
                info!(name, "added finalizer {FINALIZER}");
                return Ok(());
            }
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) if is_conflict(&e) => debug!(name, error = %e, "changed since read"),
            Err(e) => return Err(port_error(&format!("add finalizer to {name}"), e)),
        }
    }
    Err(PortError::Conflict(format!("{name} kept changing over {PATCH_ATTEMPTS} attempts")))
}

/// Removes Dovetail's finalizer from an object (a Node, a NodeClaim object, a NodePool or an
/// EC2NodeClass), if it has it: a test-and-remove at the finalizer's index, read again when the
/// list moved meanwhile. Gone is success.
async fn release(api: &Api<DynamicObject>, name: &str) -> PortResult<()> {
    for _ in 0..PATCH_ATTEMPTS {
        let current = match api.get_opt(name).await {
            Ok(Some(o)) => o,
            Ok(None) => return Ok(()),
            Err(e) => return Err(port_error(&format!("get {name}"), e)),
        };
        let finalizers = current.metadata.finalizers.unwrap_or_default();
        let Some(i) = finalizers.iter().position(|f| f == FINALIZER) else { return Ok(()) };
        let patch = json!([
            { "op": "test", "path": format!("/metadata/finalizers/{i}"), "value": FINALIZER },
            { "op": "remove", "path": format!("/metadata/finalizers/{i}") },
        ]);
        let patch: json_patch::Patch = serde_json::from_value(patch)
            .map_err(|e| PortError::Rejected(format!("finalizer patch of {name}: {e}")))?;
        match api.patch(name, &PatchParams::default(), &Patch::Json::<()>(patch)).await {
            Ok(_) => {
                info!(name, "removed finalizer {FINALIZER}");
                return Ok(());
            }
            Err(e) if is_not_found(&e) => return Ok(()),
            // The list changed under us (a failed `test`): read again.
            Err(e) if matches!(status_code(&e), Some(409 | 422)) => debug!(name, error = %e, "finalizers moved"),
            Err(e) => return Err(port_error(&format!("remove finalizer of {name}"), e)),
        }
    }
    Err(PortError::Conflict(format!("the finalizers of {name} kept changing over {PATCH_ATTEMPTS} attempts")))
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

impl Kube for KubeAdapter {
    async fn read(&self) -> PortResult<KubeState> {
        // One read at a time: a second waits and then only catches up with what the first left.
        let mut kept = self.snapshot.lock().await;
        let (snapshot, last) = &mut *kept;
        *last = Counts::default();
        *last = snapshot.sync(&self.client, &self.reading).await?;
        let (state, seen) = read::assemble(snapshot);
        debug!(
            nodes = state.nodes.len(),
            pending = state.pending.len(),
            nodepools = state.nodepools.len(),
            overlays = state.overlays.len(),
            invalid = state.invalid.len(),
            requests = last.requests,
            objects = last.objects,
            events = last.events,
            relists = last.relists,
            "read the cluster"
        );
        *self.seen.lock().expect("seen lock") = seen;
        Ok(state)
    }

    async fn taint(&self, node: &str, taint: &Taint) -> PortResult<()> {
        if self.change_taints(node, |current| taints::with_taint(current, taint)).await? {
            Ok(())
        } else {
            Err(PortError::Rejected(format!("taint node {node} with {taint}: the node does not exist")))
        }
    }

    async fn remove_taint(&self, node: &str, key: &str) -> PortResult<()> {
        // A node that is gone has no taints left to remove.
        self.change_taints(node, |current| taints::without_key(current, key)).await.map(|_| ())
    }

    async fn adopt_node(&self, node: &str, claim: &str, labels: &BTreeMap<String, String>) -> PortResult<()> {
        let uid = match self.uid(&format!("NodeClaim/{claim}")) {
            Some(uid) => Some(uid),
            None => self
                .claim_objects()
                .get_opt(claim)
                .await
                .map_err(|e| port_error(&format!("get NodeClaim {claim}"), e))?
                .and_then(|o| o.metadata.uid),
        };
        // A strategic merge patch: labels, finalizers and owner references are merged into what
        // the node has (owner references by uid), never replaced.
        let mut metadata = json!({ "labels": labels, "finalizers": [FINALIZER] });
        if let Some(uid) = uid {
            metadata["ownerReferences"] =
                json!([{ "apiVersion": API_VERSION, "kind": "NodeClaim", "name": claim, "uid": uid }]);
        }
        let patch = json!({ "metadata": metadata });
        match self.nodes().patch(node, &PatchParams::default(), &Patch::Strategic(&patch)).await {
            Ok(_) => Ok(()),
            // A node that is gone needs no adopting.
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(port_error(&format!("adopt node {node}"), e)),
        }
    }

    async fn add_finalizer(&self, object: &str) -> PortResult<()> {
        let (api, name) = self.held(object)?;
        hold(&api, name).await
    }

    async fn remove_finalizer(&self, object: &str) -> PortResult<()> {
        let (api, name) = self.held(object)?;
        release(&api, name).await
    }

    async fn evict(&self, namespace: &str, name: &str) -> PortResult<EvictionResult> {
        let uid = self.uid(&format!("Pod/{namespace}/{name}"));
        // policy/v1 Eviction spelled out (kube-rs's helper sends its delete options under a key the
        // server ignores). The uid precondition keeps a drain from evicting a same-named pod that
        // replaced the one it decided about (a StatefulSet's), as Karpenter's does. Its price: the
        // API server retries a failed precondition as a conflict for ~10 s before answering 409,
        // which only happens when a pod was replaced between the read and the eviction.
        let mut body = json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": { "name": name, "namespace": namespace },
        });
        if let Some(uid) = &uid {
            body["deleteOptions"] = json!({ "preconditions": { "uid": uid } });
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match pods.create_subresource::<_, Value>("eviction", name, &PostParams::default(), &body).await {
            Ok(_) => Ok(EvictionResult::Accepted),
            Err(e) => match status_code(&e) {
                Some(429) => {
                    debug!(namespace, name, error = %e, "eviction refused");
                    Ok(EvictionResult::Refused)
                }
                Some(404) => Ok(EvictionResult::NotFound),
                // The precondition failed: the pod that was decided about is gone.
                Some(409) if uid.is_some() => Ok(EvictionResult::NotFound),
                // Any other answer (500 when several PDBs cover the pod, 403, …) is this pod's
                // problem: the drain backs off on it like on a refusal and goes on with the others.
                Some(_) => {
                    warn!(namespace, name, error = %e, "eviction failed");
                    Ok(EvictionResult::Failed)
                }
                None => Err(port_error(&format!("evict pod {namespace}/{name}"), e)),
            },
        }
    }

    async fn delete_pod(&self, namespace: &str, name: &str, grace_seconds: i64) -> PortResult<()> {
        let uid = self.uid(&format!("Pod/{namespace}/{name}"));
        let params = DeleteParams {
            grace_period_seconds: Some(grace_seconds.clamp(0, i64::from(u32::MAX)) as u32),
            preconditions: uid.map(|uid| Preconditions { uid: Some(uid), resource_version: None }),
            ..Default::default()
        };
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match pods.delete(name, &params).await {
            Ok(_) => Ok(()),
            // Gone already, or replaced by a same-named pod (the precondition): either way the pod
            // this was about no longer runs.
            Err(e) if is_not_found(&e) || is_conflict(&e) => Ok(()),
            Err(e) => Err(port_error(&format!("delete pod {namespace}/{name}"), e)),
        }
    }

    async fn delete_node(&self, node: &str) -> PortResult<()> {
        let params = DeleteParams {
            preconditions: self
                .uid(&format!("Node/{node}"))
                .map(|uid| Preconditions { uid: Some(uid), resource_version: None }),
            ..Default::default()
        };
        match self.nodes().delete(node, &params).await {
            Ok(_) => info!(node, "deleted node"),
            Err(e) if is_not_found(&e) => return Ok(()),
            // Replaced by a same-named node: not the one this was about.
            Err(e) if is_conflict(&e) => return Ok(()),
            Err(e) => return Err(port_error(&format!("delete node {node}"), e)),
        }
        // Held by our finalizer, the node stays until it is removed: the deletion is complete.
        release(&self.nodes(), node).await
    }

    async fn write_claim_object(&self, object: &ClaimObject) -> PortResult<()> {
        let name = object.claim.name.clone();
        let pool_uid = self.uid(&format!("NodePool/{}", object.claim.nodepool));
        let mut whole = serde_json::to_value(crd::claim_object(object, pool_uid.as_deref()))
            .map_err(|e| PortError::Rejected(format!("NodeClaim {name}: {e}")))?;
        let status = whole.as_object_mut().and_then(|o| o.remove("status"));
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let api = self.claim_objects();
        let what = || format!("apply NodeClaim {name}");
        let applied = api.patch(&name, &params, &Patch::Apply(&whole)).await.map_err(|e| port_error(&what(), e))?;
        if let Some(uid) = applied.metadata.uid {
            self.seen.lock().expect("seen lock").uids.insert(format!("NodeClaim/{name}"), uid);
        }
        if let Some(status) = status {
            let body = json!({ "apiVersion": API_VERSION, "kind": "NodeClaim", "metadata": { "name": name }, "status": status });
            api.patch_status(&name, &params, &Patch::Apply(&body)).await.map_err(|e| port_error(&what(), e))?;
        }
        Ok(())
    }

    async fn delete_claim_object(&self, name: &str) -> PortResult<()> {
        let api = self.claim_objects();
        release(&api, name).await?;
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(port_error(&format!("delete NodeClaim {name}"), e)),
        }
    }

    async fn event(&self, object: &str, reason: &str, message: &str) -> PortResult<()> {
        let target = events::Target::parse(object)?;
        let uid = self.resolve_uid(object, &target).await?;
        let time = now();
        let event = events::new_event(&target, uid.as_deref(), reason, message, &self.instance, time.clone());
        let name = event.metadata.name.clone().unwrap_or_default();
        let api: Api<Event> = Api::namespaced(self.client.clone(), target.event_namespace());
        let what = || format!("event {reason} on {object}");
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => return Ok(()),
            Err(e) if is_conflict(&e) => {}
            Err(e) => return Err(port_error(&what(), e)),
        }
        // The same event again: count it on the existing one.
        let existing = match api.get_opt(&name).await.map_err(|e| port_error(&what(), e))? {
            Some(existing) => existing,
            // Expired between the two calls: write it anew.
            None => {
                return api.create(&PostParams::default(), &event).await.map(|_| ()).map_err(|e| port_error(&what(), e))
            }
        };
        let patch = json!({ "count": existing.count.unwrap_or(1) + 1, "lastTimestamp": time });
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| port_error(&what(), e))
    }

    async fn pool_status(&self, s: &PoolStatus) -> PortResult<()> {
        let Some(observed) = self.observed_pool(&s.name).await? else {
            debug!(pool = %s.name, "NodePool is gone; no status to write");
            return Ok(());
        };
        let desired = status::desired(s, &observed, &now());
        if status::unchanged(&desired, &observed.status) {
            return Ok(());
        }
        // Applied through a dynamic object: the answer is not decoded into the typed NodePool, so
        // a pool whose spec the types reject still gets its `ValidationSucceeded=False`.
        if !self.apply_status::<NodePool>(&s.name, &desired).await? {
            return Ok(());
        }
        let mut seen = self.seen.lock().expect("seen lock");
        seen.pools.insert(s.name.clone(), ObservedPool { generation: observed.generation, status: desired });
        Ok(())
    }

    async fn overlay_status(&self, s: &OverlayStatus) -> PortResult<()> {
        // Overlays are only ever read by the snapshot: one not seen by the last read is gone.
        let Some(observed) = self.seen.lock().expect("seen lock").overlays.get(&s.name).cloned() else {
            debug!(overlay = %s.name, "NodeOverlay not seen by the last read; no status to write");
            return Ok(());
        };
        let desired = status::desired_overlay(s, &observed, &now());
        if desired == observed.status {
            return Ok(());
        }
        if !self.apply_status::<crd::NodeOverlay>(&s.name, &desired).await? {
            return Ok(());
        }
        let mut seen = self.seen.lock().expect("seen lock");
        seen.overlays.insert(s.name.clone(), ObservedOverlay { generation: observed.generation, status: desired });
        Ok(())
    }

    async fn class_status(&self, s: &ClassStatus) -> PortResult<()> {
        // Classes are only ever read by the snapshot: one not seen by the last read is gone.
        let Some(observed) = self.seen.lock().expect("seen lock").classes.get(&s.name).cloned() else {
            debug!(class = %s.name, "EC2NodeClass not seen by the last read; no status to write");
            return Ok(());
        };
        let desired = status::desired_class(s, &observed, &now());
        if desired == observed.status {
            return Ok(());
        }
        if !self.apply_status::<crd::EC2NodeClass>(&s.name, &desired).await? {
            return Ok(());
        }
        let mut seen = self.seen.lock().expect("seen lock");
        seen.classes.insert(s.name.clone(), ObservedClass { status: desired, ..observed });
        Ok(())
    }
}
