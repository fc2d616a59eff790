//! The NodeClaim: Dovetail's record of one decision to run one instance, persisted (DynamoDB in
//! AWS, memory in the simulator) and advanced by short, idempotent steps.
//!
//! Plain data with a `version` for optimistic concurrency: a store accepts a write only when the
//! version it holds is the one the writer read, so concurrent invocations and redeliveries never
//! act twice on one claim.

pub mod drain;
pub mod object;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::catalog::{CapacityType, Catalog};
use crate::labels;
use crate::model::{Node, Taint};
use crate::requirements::Requirements;
use crate::time::Time;

/// Where a claim is in its life. Transitions only go forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Phase {
    /// Intent written; CreateFleet not yet known to have succeeded.
    Launching,
    /// The instance exists (`launch` is set).
    Launched,
    /// A Node with the claim's providerID joined the cluster.
    Registered,
    /// The Node is Ready and its startup taints are gone.
    Initialized,
    /// Tainted and being drained (`drain` is set).
    Draining,
    /// Drained (or forced); waiting for volumes to detach and the instance to terminate.
    Terminating,
    /// The instance is gone; the record remains until its TTL.
    Terminated,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// What the cloud gave us.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    pub instance_id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub image_id: String,
    pub subnet_id: String,
    pub security_groups: Vec<String>,
    /// USD per hour at launch.
    pub price: f64,
    pub launched_at: Time,
}

impl Launch {
    /// The Node's `spec.providerID` for this instance.
    pub fn provider_id(&self) -> String {
        format!("aws:///{}/{}", self.zone, self.instance_id)
    }
}

/// Hashes of the NodePool template and EC2NodeClass spec the claim was launched from (drift).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hashes {
    pub nodepool: String,
    pub nodeclass: String,
}

/// Why a claim is being taken away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Reason {
    Expired,
    Drifted,
    Empty,
    Underutilized,
    /// Spot interruption warning.
    SpotInterrupted,
    /// Rebalance recommendation under a `Replace` policy.
    Rebalance,
    /// The instance is stopping, stopped, shutting down or terminated.
    InstanceStateChange,
    /// AWS Health scheduled change.
    ScheduledChange,
    /// Capacity reservation interruption warning.
    CapacityReservationInterrupted,
    LaunchTimeout,
    RegistrationTimeout,
    /// Someone deleted the Node or the NodeClaim object (`kubectl delete`): drained like any
    /// other disruption (PDBs and do-not-disrupt hold pods until the terminationGracePeriod),
    /// but not subject to budgets — the deletion was asked for.
    Deleted,
    /// Its NodePool was deleted: the pool's nodes are drained like [`Reason::Deleted`] ones, but
    /// a few at a time, as the pool's disruption budgets allow (those that name no reason), so
    /// deleting a pool does not take all its capacity at once (`crate::deletion`).
    NodePoolDeleted,
    /// Node repair: a condition the repair policies watch stayed unhealthy past its toleration
    /// ([`crate::disruption::repair`]). Forceful, as Karpenter's repair is: not subject to
    /// budgets, and the drain does not wait for the node's pods ([`Reason::skips_drain`]).
    Unhealthy,
}

impl Reason {
    /// Voluntary disruptions respect budgets, PDBs (before the grace deadline) and do-not-disrupt.
    pub fn is_voluntary(self) -> bool {
        matches!(self, Reason::Drifted | Reason::Empty | Reason::Underutilized | Reason::Rebalance)
    }

    /// Whether the instance goes away whatever the drain does: EC2 has warned that it takes it
    /// back in two minutes (a spot or capacity-reservation interruption), or it is already
    /// stopping or gone (a state change). do-not-disrupt exists to keep a pod running where it is,
    /// which it can no longer do: the drain evicts such pods so they restart elsewhere instead of
    /// dying with the node. An AWS Health scheduled change is not among these: it comes days
    /// ahead, so the pod's owner has time to act, and terminationGracePeriod bounds the wait as it
    /// does for expiry.
    pub fn loses_instance(self) -> bool {
        matches!(self, Reason::SpotInterrupted | Reason::CapacityReservationInterrupted | Reason::InstanceStateChange)
    }

    /// Whether the drain's deadline is the disruption itself, so the node is terminated without
    /// waiting for evictions, PDBs, do-not-disrupt or volume detachment (Karpenter's repair stamps
    /// the claim's termination time with "now" the same way). Only node repair: a node unhealthy
    /// for its whole toleration cannot be trusted to finish a graceful drain — a kubelet that has
    /// not reported Ready for 30 minutes never confirms an eviction, so the drain would wait until
    /// the terminationGracePeriod, which by default never comes.
    pub fn skips_drain(self) -> bool {
        matches!(self, Reason::Unhealthy)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A decision to take the claim away, kept on the claim so a crash resumes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Disruption {
    pub reason: Reason,
    pub since: Time,
    /// Claims launched to take over its pods (launch first, then drain).
    pub replacements: Vec<String>,
    /// The sentence a person reads in Events and logs.
    pub message: String,
    /// When EC2 takes the instance back whatever the drain does (an interruption warning's time
    /// plus its two-minute notice): the drain's deadline when earlier than its
    /// terminationGracePeriod's.
    #[serde(default)]
    pub reclaim_at: Option<Time>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeClaim {
    /// Deterministic from the decision that created it; also the CreateFleet client token.
    pub name: String,
    pub nodepool: String,
    pub nodeclass: String,
    pub phase: Phase,
    /// Incremented by every write.
    pub version: u64,
    pub created_at: Time,
    pub requirements: Requirements,
    /// Candidates, cheapest first (CreateFleet overrides).
    pub instance_types: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    /// Pods the claim was launched for (`namespace/name`).
    pub pods: Vec<String>,
    pub launch: Option<Launch>,
    /// CreateFleet calls made for this claim, and when the last one was: whoever bumps the count
    /// (a conditional write) owns the next call; a claim still without an instance some time
    /// after its last attempt (a crash mid-launch) is looked up by tag, then launched again.
    #[serde(default)]
    pub launch_attempts: u32,
    #[serde(default)]
    pub launch_attempted_at: Option<Time>,
    pub node_name: Option<String>,
    pub registered_at: Option<Time>,
    pub initialized_at: Option<Time>,
    /// When a non-DaemonSet, non-mirror pod was last bound to or removed from the claim's node
    /// (Karpenter's `lastPodEventTime`), as last written: the lifecycle step copies the Node's
    /// [`crate::model::Node::last_pod_event`] here when it is later (see
    /// [`crate::lifecycle::POD_EVENT_DEDUPE`]), so a cold function that never saw a pod leave
    /// still knows when it did. `None` = none recorded. Read through [`NodeClaim::idle_since`].
    #[serde(default)]
    pub last_pod_event: Option<Time>,
    pub hashes: Hashes,
    /// Copied from the pool at launch: later pool edits are drift, not retroactive.
    pub expire_after: Option<Duration>,
    pub termination_grace_period: Option<Duration>,
    pub disruption: Option<Disruption>,
    /// Drain progress while Draining / Terminating.
    pub drain: Option<drain::DrainState>,
}

/// The labels of the Node a launch becomes: `labels` (the pool's, custom ones, the claim's name,
/// and the planned cheapest candidate's instance-type labels) with the candidate's instance-type
/// labels replaced by those of the type the fleet launched, and the zone (with its id) and
/// capacity type it launched in. The OS and Windows build are the class's image's, not the type's:
/// planned labels that name an OS keep it (a Windows claim's node stays Windows of its build). A
/// launch template carries only what every instance of a pool shares, so registration puts these
/// on the Node, as Karpenter does; the simulator's kubelets register with them.
pub fn launched_labels(
    labels: &BTreeMap<String, String>,
    instance_type: &str,
    zone: &str,
    capacity_type: CapacityType,
    catalog: &Catalog,
) -> BTreeMap<String, String> {
    let mut out = labels.clone();
    if let Some(t) = catalog.get(instance_type) {
        let planned = |k: &str| (k == labels::OS || k == labels::WINDOWS_BUILD) && labels.contains_key(labels::OS);
        for k in t.requirements.keys().filter(|k| !planned(k)) {
            out.remove(k);
        }
        out.extend(t.requirements.single_valued_labels().into_iter().filter(|(k, _)| !planned(k)));
    }
    out.insert(labels::ZONE.into(), zone.to_string());
    match catalog.zone_id(zone) {
        Some(id) => out.insert(labels::ZONE_ID.into(), id.to_string()),
        None => out.remove(labels::ZONE_ID),
    };
    out.insert(labels::CAPACITY_TYPE.into(), capacity_type.as_str().into());
    // The plan's reservation labels hold only if the instance runs in the reservation (as
    // Karpenter drops them from a node whose reservation turned it on-demand).
    if capacity_type != CapacityType::Reserved {
        for k in labels::RESERVATION_LABELS {
            out.remove(k);
        }
    }
    out
}

impl NodeClaim {
    /// A fresh intent, before CreateFleet.
    pub fn launching(name: &str, nodepool: &str, nodeclass: &str, now: Time) -> NodeClaim {
        NodeClaim {
            name: name.to_string(),
            nodepool: nodepool.to_string(),
            nodeclass: nodeclass.to_string(),
            phase: Phase::Launching,
            version: 0,
            created_at: now,
            requirements: Requirements::new(),
            instance_types: vec![],
            labels: BTreeMap::new(),
            taints: vec![],
            startup_taints: vec![],
            pods: vec![],
            launch: None,
            launch_attempts: 0,
            launch_attempted_at: None,
            node_name: None,
            registered_at: None,
            initialized_at: None,
            last_pod_event: None,
            hashes: Hashes::default(),
            expire_after: None,
            termination_grace_period: None,
            disruption: None,
            drain: None,
        }
    }

    pub fn provider_id(&self) -> Option<String> {
        self.launch.as_ref().map(Launch::provider_id)
    }

    /// A copy to modify and write back: `version` is already the next one, as
    /// [`crate::decision::Action::WriteClaim`] and the store's conditional write expect.
    pub fn next_version(&self) -> NodeClaim {
        NodeClaim { version: self.version + 1, ..self.clone() }
    }

    /// Since when the claim's node has been idle, for `consolidateAfter`: the latest of its last
    /// pod event as the claim stores it and as its Node shows it, and its initialization (its
    /// creation, before that). Every consolidation check reads idleness through this.
    pub fn idle_since(&self, node: Option<&Node>) -> Time {
        self.last_pod_event.max(node.and_then(|n| n.last_pod_event)).max(self.initialized_at).unwrap_or(self.created_at)
    }

    /// Still counts as capacity (not on its way out).
    pub fn is_live(&self) -> bool {
        self.phase < Phase::Draining && self.disruption.is_none()
    }
}
