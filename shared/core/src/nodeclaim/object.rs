//! The NodeClaim object in the cluster (`nodeclaims.dovetail.dev`): what `kubectl get nodeclaims`
//! and `kubectl describe nodeclaim` show of a claim whose truth lives in the store.
//!
//! The store stays the source of truth; the object follows it. Whoever writes a claim writes its
//! object once after (the reconciler does it for every claim a pass wrote, see
//! `reconcile::objects`), a claim that ends (Terminated, or deleted before it launched) has its
//! object deleted, and the sweeper puts right whatever a failed write left behind: work per
//! change, never a resync of every claim per invocation.
//!
//! Everything an object shows is a function of the claim (conditions take their times from the
//! claim's own timestamps), so writing it twice writes the same thing.

use serde::{Deserialize, Serialize};

use super::{NodeClaim, Phase, Reason};
use crate::resources::Resources;
use crate::time::Time;

/// The finalizer Dovetail puts on the Nodes it launches and on NodeClaim objects: their deletion
/// (`kubectl delete node`, `kubectl delete nodeclaim`) waits until Dovetail has drained the node
/// and terminated its instance.
pub const FINALIZER: &str = "dovetail.dev/termination";

/// The object's annotation holding the claim version it shows, by which the sweeper tells a
/// current object from one a failed write left behind.
pub const VERSION_ANNOTATION: &str = "dovetail.dev/claim-version";

pub const LAUNCHED: &str = "Launched";
pub const REGISTERED: &str = "Registered";
pub const INITIALIZED: &str = "Initialized";
pub const READY: &str = "Ready";
pub const DRIFTED: &str = "Drifted";
pub const CONSOLIDATABLE: &str = "Consolidatable";
pub const DISRUPTING: &str = "Disrupting";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    True,
    False,
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }
}

/// One `status.conditions` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Condition {
    pub type_: String,
    pub status: Status,
    /// CamelCase, as metav1.Condition requires.
    pub reason: String,
    pub message: String,
    /// `lastTransitionTime`.
    pub since: Time,
}

/// What the object of one claim shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimObject {
    pub claim: NodeClaim,
    pub conditions: Vec<Condition>,
    /// The launched (or planned cheapest) type's capacity and allocatable, when the catalog knows it.
    pub capacity: Option<Resources>,
    pub allocatable: Option<Resources>,
}

/// A NodeClaim object as the cluster holds it (from the read).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    pub name: String,
    /// The claim version it shows ([`VERSION_ANNOTATION`]); `None` when it has none (made by hand).
    pub version: Option<u64>,
    /// Someone asked for its deletion (`kubectl delete nodeclaim`).
    pub deleting: bool,
}

/// Whether a claim has an object in the cluster: from its launch until it ends. A claim still
/// Launching gets none: its first object is written once CreateFleet answered, so the object
/// never holds up a launch (the pass writes objects after all its launches).
pub fn shown(claim: &NodeClaim) -> bool {
    claim.launch.is_some() && claim.phase != Phase::Terminated
}

/// The conditions Karpenter's NodeClaims carry, from the claim's own times: Launched, Registered
/// and Initialized as the claim passes them, Ready once all three hold, and while the claim is
/// being taken away, Disrupting (with Drifted or Consolidatable when that is why).
pub fn conditions(claim: &NodeClaim) -> Vec<Condition> {
    let cond = |type_: &str, status, reason: &str, message: String, since| Condition {
        type_: type_.to_string(),
        status,
        reason: reason.to_string(),
        message,
        since,
    };
    let launched_at = claim.launch.as_ref().map(|l| l.launched_at);
    let mut out = vec![match &claim.launch {
        Some(l) => cond(LAUNCHED, Status::True, LAUNCHED, format!("instance {}", l.instance_id), l.launched_at),
        None => cond(
            LAUNCHED,
            Status::Unknown,
            "Launching",
            format!("CreateFleet attempt {}", claim.launch_attempts.max(1)),
            claim.created_at,
        ),
    }];
    let waiting_since = launched_at.unwrap_or(claim.created_at);
    out.push(match (claim.registered_at, &claim.node_name) {
        (Some(at), Some(node)) => cond(REGISTERED, Status::True, REGISTERED, format!("node {node}"), at),
        _ => cond(
            REGISTERED,
            Status::Unknown,
            "AwaitingRegistration",
            match claim.provider_id() {
                Some(pid) => format!("no Node with providerID {pid} yet"),
                None => "not launched yet".to_string(),
            },
            waiting_since,
        ),
    });
    let initialized = claim.initialized_at;
    out.push(match initialized {
        Some(at) => {
            cond(INITIALIZED, Status::True, INITIALIZED, "node is Ready and its startup taints are gone".into(), at)
        }
        None => cond(
            INITIALIZED,
            Status::Unknown,
            "AwaitingInitialization",
            "node not Ready yet, or startup taints still present".into(),
            claim.registered_at.unwrap_or(waiting_since),
        ),
    });
    out.push(match initialized {
        Some(at) => cond(READY, Status::True, READY, String::new(), at),
        None => {
            let missing: Vec<&str> =
                out.iter().filter(|c| c.status != Status::True).map(|c| c.type_.as_str()).collect();
            cond(READY, Status::Unknown, "NotReady", format!("waiting for {}", missing.join(", ")), waiting_since)
        }
    });
    if let Some(d) = &claim.disruption {
        match d.reason {
            Reason::Drifted => out.push(cond(DRIFTED, Status::True, DRIFTED, d.message.clone(), d.since)),
            Reason::Empty | Reason::Underutilized => {
                out.push(cond(CONSOLIDATABLE, Status::True, &d.reason.to_string(), d.message.clone(), d.since))
            }
            _ => {}
        }
        // A drain held too long says on what, where `kubectl describe nodeclaim` shows it.
        let message = match claim.drain.as_ref().and_then(|x| x.waiting_on.as_deref()) {
            Some(what) => format!("{}; the drain is held by {what}", d.message),
            None => d.message.clone(),
        };
        out.push(cond(DISRUPTING, Status::True, &d.reason.to_string(), message, d.since));
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::catalog::CapacityType;
    use crate::nodeclaim::{Disruption, Launch};

    /// A claim Launched as `name`, at `version` (also for the object repair's tests).
    pub(crate) fn launched(name: &str, version: u64) -> NodeClaim {
        let mut c = NodeClaim::launching(name, "default", "default", Time::from_secs(100));
        c.version = version;
        c.phase = Phase::Launched;
        c.launch = Some(Launch {
            instance_id: format!("i-{name}"),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
            image_id: "ami-1".into(),
            subnet_id: "subnet-1".into(),
            security_groups: vec![],
            price: 0.04,
            launched_at: Time::from_secs(110),
        });
        c
    }

    fn status_of(conditions: &[Condition], type_: &str) -> Option<(Status, String)> {
        conditions.iter().find(|c| c.type_ == type_).map(|c| (c.status, c.reason.clone()))
    }

    #[test]
    fn conditions_follow_the_claim_through_its_life() {
        let mut c = launched("a", 2);
        let cs = conditions(&c);
        assert_eq!(status_of(&cs, LAUNCHED), Some((Status::True, "Launched".into())));
        assert_eq!(status_of(&cs, REGISTERED), Some((Status::Unknown, "AwaitingRegistration".into())));
        assert_eq!(status_of(&cs, READY).map(|s| s.0), Some(Status::Unknown));
        assert!(cs.iter().find(|c| c.type_ == READY).unwrap().message.contains("Registered, Initialized"));
        assert_eq!(cs.iter().find(|c| c.type_ == LAUNCHED).unwrap().since, Time::from_secs(110));

        c.phase = Phase::Initialized;
        c.node_name = Some("n1".into());
        c.registered_at = Some(Time::from_secs(150));
        c.initialized_at = Some(Time::from_secs(170));
        let cs = conditions(&c);
        for t in [LAUNCHED, REGISTERED, INITIALIZED, READY] {
            assert_eq!(status_of(&cs, t).map(|s| s.0), Some(Status::True), "{t}");
        }
        assert_eq!(cs.iter().find(|c| c.type_ == READY).unwrap().since, Time::from_secs(170));
        assert!(status_of(&cs, DISRUPTING).is_none() && status_of(&cs, DRIFTED).is_none());

        c.disruption = Some(Disruption {
            reason: Reason::Drifted,
            since: Time::from_secs(500),
            replacements: vec![],
            message: "drifted: NodePool template changed".into(),
            reclaim_at: None,
        });
        let cs = conditions(&c);
        assert_eq!(status_of(&cs, DRIFTED), Some((Status::True, "Drifted".into())));
        assert_eq!(status_of(&cs, DISRUPTING), Some((Status::True, "Drifted".into())));
        c.disruption.as_mut().unwrap().reason = Reason::Underutilized;
        assert_eq!(status_of(&conditions(&c), CONSOLIDATABLE), Some((Status::True, "Underutilized".into())));
        // The same claim always shows the same conditions: writing an object twice is a no-op.
        assert_eq!(conditions(&c), conditions(&c.clone()));
    }
}
