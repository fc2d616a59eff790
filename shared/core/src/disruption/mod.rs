//! Voluntary and involuntary disruption: what to take away, when, and why.
//!
//! Every function here is a pure decision over a [`Cluster`] — the live state the sweeper and the
//! interruption function read (or the simulator holds) — and returns [`Decision`]s: actions with
//! the sentence a person would want to read about them. Adapters carry the actions out.

pub mod budgets;
pub mod consolidation;
pub mod drift;
pub mod expiration;
pub mod orphans;
pub mod protection;
pub mod sweep;

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::catalog::OfferingKey;
use crate::model::{DaemonSet, Node, NodeClass, NodePool, Pdb, Pod, Taint};
use crate::nodeclaim::NodeClaim;
use crate::scheduler::PlannedClaim;
use crate::time::Time;

/// An EC2 instance as the cloud reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// `pending`, `running`, `stopping`, `stopped`, `shutting-down`, `terminated`.
    pub state: String,
    pub launched_at: Time,
    pub tags: BTreeMap<String, String>,
    pub image_id: String,
    pub subnet_id: String,
    pub security_groups: Vec<String>,
}

/// What an EC2NodeClass currently resolves to, for drift.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResolvedClass {
    pub name: String,
    /// Hash of the class spec (minus selector terms), see `drift`.
    pub hash: String,
    /// Image per instance type architecture (`amd64` / `arm64`) or per type name.
    pub images: BTreeMap<String, String>,
    pub subnets: Vec<String>,
    pub security_groups: Vec<String>,
    /// Zones the subnets are in: where a launch can go (empty when unknown: anywhere).
    #[serde(default)]
    pub zones: Vec<String>,
}

/// The live state disruption decisions are made from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    pub now: Time,
    pub claims: Vec<NodeClaim>,
    /// Registered nodes with their pods.
    pub nodes: Vec<Node>,
    /// Pods waiting for capacity (consolidation must not remove room they need).
    pub pending: Vec<Pod>,
    pub daemonsets: Vec<DaemonSet>,
    pub nodepools: Vec<NodePool>,
    pub nodeclasses: Vec<NodeClass>,
    /// Current resolution of each class (hash, images, subnets, security groups).
    pub resolved: Vec<ResolvedClass>,
    /// Hash of each pool's template, by pool name.
    pub nodepool_hashes: BTreeMap<String, String>,
    pub pdbs: Vec<Pdb>,
    /// Instances tagged for this cluster.
    pub instances: Vec<Instance>,
    /// VolumeAttachments still present, by node name.
    pub volume_attachments: BTreeMap<String, Vec<String>>,
    pub unavailable: BTreeSet<OfferingKey>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
}

impl Cluster {
    /// Puts a claim's new state into this working copy, for the decisions that follow to read.
    pub fn record(&mut self, claim: &NodeClaim) {
        match self.claims.iter_mut().find(|c| c.name == claim.name) {
            Some(c) => *c = claim.clone(),
            None => self.claims.push(claim.clone()),
        }
    }
}

/// Something to do, for an adapter to carry out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Action {
    /// Launch replacement capacity.
    Launch(Box<PlannedClaim>),
    /// Persist a claim, conditional on its previous version: the claim carries the version it is
    /// written as, one more than the version read (the store's `put_claim` contract), so a write
    /// decided from a stale read is refused instead of overwriting a newer one.
    WriteClaim(Box<NodeClaim>),
    DeleteClaim {
        name: String,
    },
    TaintNode {
        node: String,
        taint: Taint,
    },
    /// Remove every taint with this key (e.g. `dovetail.dev/unregistered` once the Node is matched
    /// to its claim). Removing an absent taint is a no-op, so the action is safe to repeat.
    RemoveTaint {
        node: String,
        key: String,
    },
    /// Evict through the Eviction API (a 429 means a PDB blocks: retry later).
    Evict {
        namespace: String,
        name: String,
    },
    /// Delete outright (terminationGracePeriod reached).
    DeletePod {
        namespace: String,
        name: String,
        grace_period_seconds: i64,
    },
    DeleteNode {
        node: String,
    },
    TerminateInstance {
        instance_id: String,
    },
    /// Keep this offering out of plans until `until`.
    MarkUnavailable {
        offering: OfferingKey,
        until: Time,
    },
    /// A Kubernetes Event on an object (`Node/x`, `Pod/ns/x`, `NodePool/x`).
    Event {
        object: String,
        reason: String,
        message: String,
    },
    /// Come back for this claim after a short wait (a delayed message).
    RequeueAfter {
        claim: String,
        after: Duration,
    },
}

impl Action {
    /// The action's kind (`Launch`, `Evict`, …): a stable name for logs, metrics and reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Launch(_) => "Launch",
            Action::WriteClaim(_) => "WriteClaim",
            Action::DeleteClaim { .. } => "DeleteClaim",
            Action::TaintNode { .. } => "TaintNode",
            Action::RemoveTaint { .. } => "RemoveTaint",
            Action::Evict { .. } => "Evict",
            Action::DeletePod { .. } => "DeletePod",
            Action::DeleteNode { .. } => "DeleteNode",
            Action::TerminateInstance { .. } => "TerminateInstance",
            Action::MarkUnavailable { .. } => "MarkUnavailable",
            Action::Event { .. } => "Event",
            Action::RequeueAfter { .. } => "RequeueAfter",
        }
    }
}

/// An action and the sentence that explains it; `action: None` records a non-decision a user
/// would ask about ("not consolidated: pod shop/cart-7 has do-not-disrupt").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub claim: Option<String>,
    pub action: Option<Action>,
    pub why: String,
}

/// The `Launch` of a replacement, unless a claim of that name already exists. Replacement names
/// are deterministic per decision (`<claim>-r<N>`, `<claim>-consolidation`), so an existing one was
/// launched for this same decision by a pass that stopped before it recorded the disruption (a
/// crash, a lost write): it is adopted with a note, never launched a second time. (The store would
/// refuse the second intent anyway; not emitting it keeps every `Launch` a new claim, which is what
/// the plan, the simulator and the property tests count on.)
pub(crate) fn launch_once(cluster: &Cluster, claim: Option<&str>, planned: PlannedClaim, why: String) -> Decision {
    match cluster.claims.iter().find(|c| c.name == planned.name) {
        Some(existing) => Decision::note(
            claim,
            format!(
                "{} already exists ({}): launched for this decision by an earlier pass, adopted instead of \
                 launching again",
                existing.name, existing.phase
            ),
        ),
        None => Decision::act(claim, Action::Launch(Box::new(planned)), why),
    }
}

/// Capacity already on its way out: marks the nodes of claims being taken away (disruption set,
/// or Draining and later) unschedulable, as they are once tainted, and takes their movable pods
/// off them, returned unbound — they need room elsewhere just like pending pods, and a plan made
/// now must leave it to them. DaemonSet and mirror pods stay: they go with the node.
pub(crate) fn vacate_leaving(cluster: &Cluster, nodes: &mut [Node]) -> Vec<Pod> {
    let leaving = crate::provisioning::leaving(cluster);
    let mut moving = Vec::new();
    for n in nodes.iter_mut() {
        if !crate::provisioning::is_leaving(n, &leaving) {
            continue;
        }
        n.unschedulable = true;
        let (go, stay): (Vec<Pod>, Vec<Pod>) = n.pods.drain(..).partition(|p| !p.is_daemon() && !p.is_mirror());
        n.pods = stay;
        moving.extend(go.into_iter().map(|mut p| {
            p.node_name = None;
            p
        }));
    }
    moving
}

impl Decision {
    pub fn act(claim: Option<&str>, action: Action, why: impl Into<String>) -> Decision {
        Decision { claim: claim.map(str::to_string), action: Some(action), why: why.into() }
    }

    /// A Kubernetes Event whose message is the decision's sentence.
    pub fn event(
        claim: Option<&str>,
        object: impl Into<String>,
        reason: impl Into<String>,
        message: String,
    ) -> Decision {
        let action = Action::Event { object: object.into(), reason: reason.into(), message: message.clone() };
        Decision::act(claim, action, message)
    }

    pub fn note(claim: Option<&str>, why: impl Into<String>) -> Decision {
        Decision { claim: claim.map(str::to_string), action: None, why: why.into() }
    }
}
