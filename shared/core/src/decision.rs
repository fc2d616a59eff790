//! What every decision produces: [`Action`]s for an adapter to carry out, each with the sentence
//! that explains it ([`Decision`]), and the short [`Step`] a claim advances by.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

use crate::catalog::OfferingKey;
use crate::cluster::Cluster;
use crate::model::Taint;
use crate::nodeclaim::NodeClaim;
use crate::scheduler::PlannedClaim;
use crate::time::Time;

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
    /// Make a registered Node the claim's (registration): set these labels (what the launch
    /// template could not carry), hold it with Dovetail's termination finalizer so a deletion
    /// waits for the drain, and make the claim's NodeClaim object its owner. Safe to repeat.
    AdoptNode {
        node: String,
        claim: String,
        labels: BTreeMap<String, String>,
    },
    /// Hold a NodePool or EC2NodeClass (`NodePool/x`, `EC2NodeClass/x`) with Dovetail's
    /// termination finalizer, so that deleting it waits for what depends on it. Safe to repeat.
    AddFinalizer {
        object: String,
    },
    /// Let a NodePool or EC2NodeClass whose deletion was waiting go: remove Dovetail's finalizer.
    /// An object already gone, or without the finalizer, is success.
    RemoveFinalizer {
        object: String,
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
            Action::AdoptNode { .. } => "AdoptNode",
            Action::AddFinalizer { .. } => "AddFinalizer",
            Action::RemoveFinalizer { .. } => "RemoveFinalizer",
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

/// One short step for one claim.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The claim to persist, with `version` already incremented; `None` when unchanged (also
    /// when the claim is deleted: see [`Action::DeleteClaim`] in `decisions`).
    pub claim: Option<NodeClaim>,
    /// Actions in the order to carry them out, and notes, each with its sentence.
    pub decisions: Vec<Decision>,
    /// Come back for this claim after this wait (never more than 10 s).
    pub requeue: Option<Duration>,
}

impl Step {
    pub fn actions(&self) -> impl Iterator<Item = &Action> {
        self.decisions.iter().filter_map(|d| d.action.as_ref())
    }

    /// Nothing to write and nothing to do.
    pub fn is_quiet(&self) -> bool {
        self.claim.is_none() && self.actions().next().is_none()
    }

    /// The step for a claim whose instance the read did not describe (see
    /// [`Cluster::knows_instance_of`]): nothing is decided — its instance may be running or gone —
    /// and the claim is looked at again after `after`, by a read that asks for it.
    pub fn instance_not_described(claim: &NodeClaim, after: Duration) -> Step {
        let instance = claim.launch.as_ref().map_or_else(
            || format!("the instance tagged for {}", claim.name),
            |l| format!("instance {}", l.instance_id),
        );
        let why = format!("{} not stepped: this read did not describe {instance}; looking again", claim.name);
        Step { claim: None, decisions: vec![Decision::note(Some(&claim.name), why)], requeue: Some(after) }
    }
}
