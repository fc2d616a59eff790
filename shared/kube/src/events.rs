//! Kubernetes Events (core/v1) for the decisions' sentences.
//!
//! Repeats are folded into one Event: its name is a hash of the object, reason and message, so
//! the second "FailedScheduling" for the same pod and reason finds the first (409) and bumps its
//! `count` and `lastTimestamp`, as client-go's event correlator does in-process. A warm function
//! does not even send a repeat within its window (the core's `events::Recent`); a cold start keeps
//! nothing, so across invocations the correlation lives in the name.

use dovetail_core::reconcile::ports::{PortError, PortResult};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

/// `reportingComponent` of every Event Dovetail writes.
pub const REPORTING_CONTROLLER: &str = "dovetail.dev";
/// `source.component`, what `kubectl get events` shows in its SOURCE column.
pub const SOURCE_COMPONENT: &str = "dovetail";

/// Events are cut to client-go's limit for a note, so a long plan sentence never fails validation.
const MESSAGE_LIMIT: usize = 1024;

/// Reasons that say something went wrong or is about to (`kubectl get events --field-selector
/// type=Warning` shows them); everything else is Normal.
const WARNINGS: &[&str] = &[
    dovetail_core::events::FAILED_SCHEDULING,
    // A pool's cost limit, or the cluster-wide one, turned pods away.
    dovetail_core::events::COST_LIMIT_REACHED,
    "ValidationFailed",
    "LaunchTimeout",
    "RegistrationTimeout",
    "InstanceVanished",
    "OrphanNode",
    "SpotInterrupted",
    "InstanceStateChange",
    "ScheduledChange",
    "CapacityReservationInterrupted",
    // Pods evicted despite do-not-disrupt, or deleted despite their PDB, as an interrupted node went.
    dovetail_core::termination::PROTECTION_OVERRIDDEN,
    // A drain held too long, naming what holds it.
    dovetail_core::events::FAILED_DRAINING,
    // Node repair: a node replaced for a failed condition, or a pool too unhealthy to repair.
    dovetail_core::disruption::repair::UNHEALTHY,
    dovetail_core::disruption::repair::NODE_REPAIR_BLOCKED,
    // A class that cannot launch (its pools take no pods), and a launch that failed.
    dovetail_core::reconcile::NODECLASS_NOT_READY,
    dovetail_core::reconcile::INSTANCE_PROFILE_FAILED,
    "LaunchFailed",
];

/// The object an Event is about, from the core's `Kind/name` or `Kind/namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl Target {
    pub fn parse(object: &str) -> PortResult<Target> {
        let parts: Vec<&str> = object.split('/').collect();
        let (kind, namespace, name) = match parts.as_slice() {
            [kind, name] => (*kind, None, *name),
            [kind, ns, name] => (*kind, Some(ns.to_string()), *name),
            _ => {
                return Err(PortError::Rejected(format!(
                    "event target {object:?} is not Kind/name or Kind/namespace/name"
                )))
            }
        };
        if kind.is_empty() || name.is_empty() || namespace.as_deref() == Some("") {
            return Err(PortError::Rejected(format!("event target {object:?} has an empty part")));
        }
        Ok(Target { kind: kind.to_string(), namespace, name: name.to_string() })
    }

    /// Core objects are `v1`; Dovetail's own kinds (NodePool, EC2NodeClass, NodeClaim) are
    /// `dovetail.dev/v1`.
    pub fn api_version(&self) -> &'static str {
        match self.kind.as_str() {
            "Pod" | "Node" | "Namespace" => "v1",
            _ => dovetail_api::crd::API_VERSION,
        }
    }

    /// The Event's own namespace: the object's, or `default` for cluster-scoped objects (the API
    /// server requires one of the two).
    pub fn event_namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or("default")
    }
}

pub(crate) fn event_type(reason: &str) -> &'static str {
    if WARNINGS.contains(&reason) {
        "Warning"
    } else {
        "Normal"
    }
}

/// `<object name>.<hash>`: the same for the same object (uid included, so a recreated pod starts
/// its own series), reason and message.
pub(crate) fn event_name(target: &Target, uid: Option<&str>, reason: &str, message: &str) -> String {
    let key = format!(
        "{}/{}/{}/{}\n{reason}\n{message}",
        target.kind,
        target.event_namespace(),
        target.name,
        uid.unwrap_or("")
    );
    // The core's stable hash: the same in every function and version, as std's hasher is not.
    let suffix = format!(".{:016x}", dovetail_core::hash::fnv1a64(key.as_bytes()));
    // A name is a DNS subdomain: at most 253 characters.
    let mut base: String = target.name.chars().take(253 - suffix.len()).collect();
    while base.ends_with(['.', '-']) {
        base.pop();
    }
    base + &suffix
}

fn truncate(message: &str) -> String {
    if message.len() <= MESSAGE_LIMIT {
        return message.to_string();
    }
    let mut end = MESSAGE_LIMIT - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}

/// A new Event (count 1) about `target`.
pub(crate) fn new_event(
    target: &Target,
    uid: Option<&str>,
    reason: &str,
    message: &str,
    instance: &str,
    now: Time,
) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(event_name(target, uid, reason, message)),
            namespace: Some(target.event_namespace().to_string()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some(target.api_version().to_string()),
            kind: Some(target.kind.clone()),
            name: Some(target.name.clone()),
            namespace: target.namespace.clone(),
            uid: uid.map(str::to_string),
            ..Default::default()
        },
        reason: Some(reason.to_string()),
        message: Some(truncate(message)),
        type_: Some(event_type(reason).to_string()),
        source: Some(EventSource { component: Some(SOURCE_COMPONENT.to_string()), host: None }),
        reporting_component: Some(REPORTING_CONTROLLER.to_string()),
        reporting_instance: Some(instance.to_string()),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Time {
        Time("2025-06-01T12:00:00Z".parse().unwrap())
    }

    #[test]
    fn targets() {
        let pod = Target::parse("Pod/shop/web-1").unwrap();
        assert_eq!((pod.api_version(), pod.event_namespace()), ("v1", "shop"));
        let pool = Target::parse("NodePool/default").unwrap();
        assert_eq!(
            (pool.api_version(), pool.event_namespace(), pool.namespace.as_deref()),
            ("dovetail.dev/v1", "default", None)
        );
        assert_eq!(Target::parse("Node/ip-10-0-1-7.ec2.internal").unwrap().api_version(), "v1");
        for bad in ["Node", "Pod/a/b/c", "Node/", "/x", "Pod//x"] {
            assert!(matches!(Target::parse(bad), Err(PortError::Rejected(_))), "{bad}");
        }
    }

    #[test]
    fn repeats_share_a_name() {
        let t = Target::parse("Pod/shop/web-1").unwrap();
        let a = event_name(&t, Some("u1"), "FailedScheduling", "no pool fits");
        assert_eq!(a, event_name(&t, Some("u1"), "FailedScheduling", "no pool fits"));
        assert!(a.starts_with("web-1.") && a.len() == "web-1.".len() + 16, "{a}");
        assert_ne!(a, event_name(&t, Some("u2"), "FailedScheduling", "no pool fits"), "a recreated pod");
        assert_ne!(a, event_name(&t, Some("u1"), "FailedScheduling", "limits reached"));
        let long = Target::parse(&format!("Node/{}", "a".repeat(300))).unwrap();
        assert_eq!(event_name(&long, None, "Drifted", "x").len(), 253);
    }

    #[test]
    fn event_fields() {
        let t = Target::parse("Node/n1").unwrap();
        let e = new_event(&t, Some("uid-1"), "OrphanNode", &"x".repeat(2000), "sweeper", at());
        assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(e.involved_object.uid.as_deref(), Some("uid-1"));
        assert_eq!(e.involved_object.namespace, None);
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(e.reporting_component.as_deref(), Some("dovetail.dev"));
        assert_eq!(e.message.as_ref().map(String::len), Some(1024));
        assert_eq!(e.count, Some(1));
        let n = new_event(&Target::parse("Pod/a/b").unwrap(), None, "Nominated", "é".repeat(600).as_str(), "p", at());
        assert_eq!(n.type_.as_deref(), Some("Normal"));
        assert!(n.message.unwrap().ends_with("..."));
        assert_eq!(event_type("ProtectionOverridden"), "Warning");
        assert_eq!((event_type("Unhealthy"), event_type("NodeRepairBlocked")), ("Warning", "Warning"));
        assert_eq!(event_type("FailedDraining"), "Warning");
        for failed in ["NodeClassNotReady", "InstanceProfileFailed", "LaunchFailed"] {
            assert_eq!(event_type(failed), "Warning", "{failed}");
        }
        // Karpenter's disruption Events are Normal: they explain, nothing failed.
        for normal in ["DisruptionBlocked", "Unconsolidatable", "DisruptionLaunching", "DisruptionTerminating"] {
            assert_eq!(event_type(normal), "Normal", "{normal}");
        }
    }
}
