//! The small traits the reconcilers drive: everything that is I/O. AWS adapters (`shared/aws`),
//! the Kubernetes adapter (`shared/kube`) and the simulator's in-memory world (`shared/sim`)
//! implement them; the reconcilers and every decision they run are the same in all three.
//!
//! Methods return `impl Future + Send` so Lambda runtimes can spawn them on a multi-threaded
//! executor; an implementation may simply write `async fn`. Nothing here names a runtime.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, Offer, OfferingKey};
use crate::cluster::{Instance, InstanceQuery, ResolvedClass};
use crate::instance_profile;
use crate::model::{DaemonSet, Node, NodeClass, NodePool, Pdb, Pod, Taint};
use crate::nodeclaim::drain::EvictionResult;
use crate::nodeclaim::object::{ClaimObject, Observed};
use crate::nodeclaim::{Launch, NodeClaim};
use crate::time::Time;

/// Why a port call failed, sorted by what the caller should do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// A conditional write lost to another writer: re-read and decide again.
    #[error("conflict: {0}")]
    Conflict(String),
    /// Throttled, unreachable or failed in a way a retry may fix: the message is retried.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// Refused for a reason a retry will not fix (permissions, invalid request): logged, and the
    /// rest of the work carries on.
    #[error("rejected: {0}")]
    Rejected(String),
}

pub type PortResult<T> = Result<T, PortError>;

/// Virtual in the simulator, the wall clock in Lambda.
pub trait Clock: Send + Sync {
    fn now(&self) -> Time;
}

/// An object the cluster holds that Dovetail could not use, with the field at fault. The object
/// is skipped; everything else carries on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invalid {
    /// `NodePool/default`, `EC2NodeClass/gpu`, `Pod/shop/web-1`.
    pub object: String,
    /// JSON path of the offending field (`spec.template.spec.requirements[0].operator`).
    pub field: String,
    pub message: String,
}

/// What the Kubernetes API shows right now, already in the core's model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KubeState {
    /// Registered nodes with the pods bound to them (DaemonSet and mirror pods included).
    pub nodes: Vec<Node>,
    /// Provisionable pods (brief §2): unschedulable, not daemon, not mirror, not preempting.
    pub pending: Vec<Pod>,
    pub daemonsets: Vec<DaemonSet>,
    /// Valid NodePools and EC2NodeClasses only (NodeOverlays likewise); the rest are in `invalid`.
    pub nodepools: Vec<NodePool>,
    pub nodeclasses: Vec<NodeClass>,
    /// Valid NodeOverlays; the catalog is priced with them before any decision.
    #[serde(default)]
    pub overlays: Vec<crate::overlay::NodeOverlay>,
    pub pdbs: Vec<Pdb>,
    /// VolumeAttachments still present, by node name.
    pub volume_attachments: BTreeMap<String, Vec<String>>,
    /// Namespace labels.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// NodeClaim objects (`nodeclaims.dovetail.dev`), as the cluster holds them.
    pub claim_objects: Vec<Observed>,
    pub invalid: Vec<Invalid>,
}

/// The cluster's API: snapshot reads and the writes that disruption and registration need.
/// Every write is idempotent (tainting a tainted node, deleting a deleted pod succeed).
pub trait Kube: Send + Sync {
    fn read(&self) -> impl Future<Output = PortResult<KubeState>> + Send;
    fn taint(&self, node: &str, taint: &Taint) -> impl Future<Output = PortResult<()>> + Send;
    /// Removes every taint with `key`.
    fn remove_taint(&self, node: &str, key: &str) -> impl Future<Output = PortResult<()>> + Send;
    /// Makes a registered node the claim's: sets `labels` (others stay), adds Dovetail's
    /// termination finalizer ([`crate::nodeclaim::object::FINALIZER`]) and makes the claim's
    /// object its owner (when that object exists). A node that is gone is not an error.
    fn adopt_node(
        &self,
        node: &str,
        claim: &str,
        labels: &BTreeMap<String, String>,
    ) -> impl Future<Output = PortResult<()>> + Send;
    /// Adds Dovetail's termination finalizer to `object` (`NodePool/x` or `EC2NodeClass/x`),
    /// keeping any others. An object that is gone is not an error.
    fn add_finalizer(&self, object: &str) -> impl Future<Output = PortResult<()>> + Send;
    /// Removes Dovetail's termination finalizer from `object`; absent (object or finalizer) is
    /// success.
    fn remove_finalizer(&self, object: &str) -> impl Future<Output = PortResult<()>> + Send;
    /// Through the Eviction subresource; a PDB refusal (HTTP 429) is `Ok(Refused)`, not an error.
    fn evict(&self, namespace: &str, name: &str) -> impl Future<Output = PortResult<EvictionResult>> + Send;
    fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        grace_seconds: i64,
    ) -> impl Future<Output = PortResult<()>> + Send;
    /// Deletes the Node and removes Dovetail's finalizer from it: a node Dovetail deletes is
    /// drained already, or was never a node of its (an orphan), or its deletion was someone
    /// else's and is now carried out.
    fn delete_node(&self, node: &str) -> impl Future<Output = PortResult<()>> + Send;
    /// Creates or updates a claim's NodeClaim object (metadata, spec and status). Idempotent.
    fn write_claim_object(&self, object: &ClaimObject) -> impl Future<Output = PortResult<()>> + Send;
    /// Removes Dovetail's finalizer from a claim's object and deletes it; absent is success.
    fn delete_claim_object(&self, name: &str) -> impl Future<Output = PortResult<()>> + Send;
    /// A Kubernetes Event on `object` (`Node/x`, `Pod/ns/x`, `NodePool/x`).
    fn event(&self, object: &str, reason: &str, message: &str) -> impl Future<Output = PortResult<()>> + Send;
    /// Publishes a NodePool's status subresource (the sweeper does, every pass).
    fn pool_status(&self, status: &PoolStatus) -> impl Future<Output = PortResult<()>> + Send;
    /// Publishes an EC2NodeClass's status subresource (the sweeper does, every pass).
    fn class_status(&self, status: &ClassStatus) -> impl Future<Output = PortResult<()>> + Send;
    /// Publishes a NodeOverlay's status subresource (the sweeper does, every pass).
    fn overlay_status(&self, status: &OverlayStatus) -> impl Future<Output = PortResult<()>> + Send;
}

/// What a NodeOverlay's `status` shows: that it applies, or why it does not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverlayStatus {
    pub name: String,
    /// `None` when it applies; else why not, for the `ValidationSucceeded=False` condition.
    pub problem: Option<OverlayProblem>,
}

/// Why a NodeOverlay does not apply (Karpenter's reasons for `ValidationSucceeded=False`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OverlayProblem {
    /// A field Dovetail cannot use (`RuntimeValidation`): every `field: message`, joined.
    Invalid(String),
    /// An overlay of the same weight already sets the same price or resource (`Conflict`): its name.
    Conflict(String),
}

/// What an EC2NodeClass's `status` shows: what it resolves to (subnets with their zones,
/// security groups, images per architecture), or why it does not (a resolution that failed, a
/// spec that is invalid).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassStatus {
    pub name: String,
    pub resolved: Result<ResolvedClass, String>,
    /// The class was deleted but pools or claims still use it (`DeletionBlocked`): who.
    #[serde(default)]
    pub deletion_blocked: Option<String>,
}

/// What a NodePool's `status` shows: its nodes, the resources they provide (counted against
/// `limits`; their `nodes` entry, when not zero, is the same count as `nodes`), and whether its
/// spec is valid (`ValidationSucceeded`, with the reason if not).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolStatus {
    pub name: String,
    pub nodes: usize,
    pub resources: crate::resources::Resources,
    /// `None` when valid; else the readable message for the `ValidationSucceeded=False` condition.
    pub invalid: Option<String>,
    /// Whether its EC2NodeClass can launch (`NodeClassReady`), else why not.
    pub node_class: Result<(), String>,
    /// Whether a node of the pool has registered (`NodeRegistrationHealthy`).
    pub registered: bool,
    /// Where the pool stands against the cost limits on it (`CostLimitReached`); `None` when
    /// neither it nor the cluster has one.
    #[serde(default)]
    pub cost_limit: Option<CostLimitStatus>,
}

/// Whether a cost limit binds on a pool: not even the cheapest node it could launch fits in what
/// its own limit, or the cluster-wide one, leaves. With the sentence its condition shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostLimitStatus {
    pub reached: bool,
    pub message: String,
}

/// Everything a launch needs: the claim (its name is the client token and a tag), its class as
/// written and as resolved now, and the offerings to choose from, cheapest first, all of one
/// capacity type (spot is tried before on-demand by the caller).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchRequest {
    pub claim: NodeClaim,
    pub class: NodeClass,
    pub resolved: ResolvedClass,
    pub offers: Vec<Offer>,
}

/// What came of a launch that reached the cloud.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum LaunchOutcome {
    Launched(Launch),
    /// Capacity errors (`InsufficientInstanceCapacity`, `MaxSpotInstanceCountExceeded`,
    /// `VcpuLimitExceeded`, `UnfulfillableCapacity`): these offerings are unavailable for now.
    NoCapacity {
        offerings: Vec<OfferingKey>,
        message: String,
    },
}

/// EC2 and what EC2NodeClasses resolve to.
pub trait Cloud: Send + Sync {
    /// Instance types, offerings and prices; refreshed by the adapter, the embedded catalog being
    /// the fallback.
    fn catalog(&self) -> impl Future<Output = PortResult<Arc<Catalog>>> + Send;
    /// Instances tagged for this cluster (terminated ones while EC2 still lists them): the
    /// sweeper's full reconciliation, once a minute. Work in proportion to the cluster's size.
    fn instances(&self) -> impl Future<Output = PortResult<Vec<Instance>>> + Send;
    /// Only the instances `query` asks for, among those tagged for this cluster (terminated ones
    /// while EC2 still lists them): those whose id is in `query.ids`, and those whose
    /// `dovetail.dev/nodeclaim` tag is in `query.claims`. An id that is unknown or not the
    /// cluster's is absent from the answer, never an error. The provisioner's and the interruption
    /// function's reads use this, so their work follows the claims they step and the instances
    /// their events name, not the cluster's size; an empty query should cost no call.
    fn instances_of(&self, query: &InstanceQuery) -> impl Future<Output = PortResult<Vec<Instance>>> + Send;
    /// What a class resolves to now: its hash, images, subnets, security groups and instance
    /// profile — for a `role`, the one [`instance_profile::wanted`] names, made or brought in line
    /// ([`instance_profile::steps`]) here. A profile that cannot be made leaves
    /// `instance_profile` empty with the reason, not an error: the class's other parts still show.
    fn resolve(&self, class: &NodeClass) -> impl Future<Output = PortResult<ResolvedClass>> + Send;
    /// The instance profiles made for this cluster's classes (under
    /// [`instance_profile::cluster_path`]), each with its class ([`instance_profile::class_of`]):
    /// the sweeper's clean-up reads them.
    fn instance_profiles(&self) -> impl Future<Output = PortResult<Vec<instance_profile::Listed>>> + Send;
    /// Deletes one of them (its role taken out first); absent is success.
    fn delete_instance_profile(&self, name: &str) -> impl Future<Output = PortResult<()>> + Send;
    /// One instance for one claim (CreateFleet instant, one unit, client token = claim name).
    fn launch(&self, request: &LaunchRequest) -> impl Future<Output = PortResult<LaunchOutcome>> + Send;
    /// The instance launched for `claim`, found by its `dovetail.dev/nodeclaim` tag: repairs a
    /// crash between CreateFleet and the claim write.
    fn find_launched(&self, claim: &str) -> impl Future<Output = PortResult<Option<Launch>>> + Send;
    fn terminate(&self, instance_id: &str) -> impl Future<Output = PortResult<()>> + Send;
}

/// What became of a lease request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    /// Ours until released or expired.
    Acquired,
    /// Someone else holds it; it is now marked dirty so the holder reconciles once more.
    Busy,
}

/// NodeClaims, the unavailable-offerings cache and the provisioning lease (DynamoDB in AWS).
pub trait Store: Send + Sync {
    /// The claims that are not Terminated, by name. Terminated claims are history: every decision
    /// reads live claims only (what a Terminated claim still owned — a lingering Node, a stray
    /// instance — the sweeper's orphan rules find without it), so a store may keep them out of
    /// this read and its cost.
    fn claims(&self) -> impl Future<Output = PortResult<Vec<NodeClaim>>> + Send;
    /// Any claim by name, Terminated ones included.
    fn claim(&self, name: &str) -> impl Future<Output = PortResult<Option<NodeClaim>>> + Send;
    /// Writes `claim` only if the stored version is `claim.version − 1`, or, for version 0, only
    /// if no claim of that name exists; otherwise `Conflict`.
    fn put_claim(&self, claim: &NodeClaim) -> impl Future<Output = PortResult<()>> + Send;
    /// Deletes only if the stored version is `version`; absent is success.
    fn delete_claim(&self, name: &str, version: u64) -> impl Future<Output = PortResult<()>> + Send;
    /// Offerings marked unavailable whose time has not yet passed.
    fn unavailable(&self, now: Time) -> impl Future<Output = PortResult<BTreeSet<OfferingKey>>> + Send;
    fn mark_unavailable(&self, offering: &OfferingKey, until: Time) -> impl Future<Output = PortResult<()>> + Send;
    /// The per-cluster provisioning lease for `holder`, expiring at `now + ttl` unless released.
    fn lease(&self, holder: &str, now: Time, ttl: Duration) -> impl Future<Output = PortResult<Lease>> + Send;
    /// Releases the lease unless it was marked dirty meanwhile: then the flag is cleared, the
    /// lease stays ours (renewed to `now + ttl`) and the answer is `true` — reconcile once more.
    fn release(&self, holder: &str, now: Time, ttl: Duration) -> impl Future<Output = PortResult<bool>> + Send;
}

/// Delayed work: come back for a claim later (a delayed SQS message in AWS).
pub trait Queue: Send + Sync {
    fn requeue(&self, claim: &str, after: Duration) -> impl Future<Output = PortResult<()>> + Send;
}
