//! Doorbells: what the forwarder sends to SQS. A doorbell names what changed, never the object:
//! the provisioner re-reads the whole cluster on any doorbell, so the body is only for logs and
//! metrics (and a lost one only delays until the next doorbell or sweep).
//!
//! Bodies (one SQS message each):
//! - `{"pod": "<namespace>/<name>", "unschedulableAt": "<RFC 3339>"}` — the simulator's shape;
//! - `{"node": "<name>", "event": "registered" | "ready" | "gone", "at": "<RFC 3339>"}`;
//! - `{"nodeclaim": "<name>", "event": "deleted", "at": "<RFC 3339>"}` — someone asked for a
//!   NodeClaim's deletion (`kubectl delete nodeclaim`), which Dovetail carries out as a drain;
//! - `{"nodepool": "<name>", "event": "deleted", "at": "<RFC 3339>"}` — a NodePool's deletion,
//!   which drains its nodes under its budgets before the pool goes.
//!
//! Times are when the forwarder saw the change, in UTC with milliseconds: admission happens just
//! before the API server stores the change, and a condition's `lastTransitionTime` only has
//! seconds, too coarse to measure "unschedulable → launch" latencies.

use jiff::Timestamp;
use serde::Serialize;

/// What happened to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeEvent {
    /// The Node object was created (a kubelet registered).
    Registered,
    /// Its `Ready` condition turned `True`.
    Ready,
    /// The Node's deletion was asked for (Dovetail's nodes then stay, held by its finalizer,
    /// until they are drained).
    Gone,
}

impl NodeEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeEvent::Registered => "registered",
            NodeEvent::Ready => "ready",
            NodeEvent::Gone => "gone",
        }
    }
}

/// A Dovetail object whose deletion Dovetail carries out (it holds them with its finalizer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Deleted {
    NodeClaim,
    NodePool,
}

impl Deleted {
    /// The body's key, and the doorbell's kind: `nodeclaim`, `nodepool`.
    pub fn as_str(self) -> &'static str {
        match self {
            Deleted::NodeClaim => "nodeclaim",
            Deleted::NodePool => "nodepool",
        }
    }
}

/// One doorbell, before it is serialized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Doorbell {
    /// A pod became unschedulable (provisionable, see [`crate::review`]).
    Pod {
        namespace: String,
        name: String,
        at: Timestamp,
    },
    Node {
        name: String,
        event: NodeEvent,
        at: Timestamp,
    },
    /// A NodeClaim object's or NodePool's deletion was asked for.
    Deleted {
        kind: Deleted,
        name: String,
        at: Timestamp,
    },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PodBody<'a> {
    pod: &'a str,
    unschedulable_at: String,
}

#[derive(Serialize)]
struct NodeBody<'a> {
    node: &'a str,
    event: NodeEvent,
    at: String,
}

/// RFC 3339 in UTC with milliseconds, e.g. `2025-06-01T12:00:00.123Z`.
fn rfc3339(at: Timestamp) -> String {
    format!("{at:.3}")
}

impl Doorbell {
    /// The message body (see the module documentation).
    pub fn body(&self) -> String {
        let json = match self {
            Doorbell::Pod { namespace, name, at } => {
                serde_json::to_string(&PodBody { pod: &format!("{namespace}/{name}"), unschedulable_at: rfc3339(*at) })
            }
            Doorbell::Node { name, event, at } => {
                serde_json::to_string(&NodeBody { node: name, event: *event, at: rfc3339(*at) })
            }
            Doorbell::Deleted { kind, name, at } => serde_json::to_string(
                &serde_json::json!({ kind.as_str(): name, "event": "deleted", "at": rfc3339(*at) }),
            ),
        };
        json.expect("string fields always serialize")
    }

    /// Doorbells with the same key within one coalescing window say the same thing twice: only the
    /// first is sent.
    pub fn key(&self) -> DoorbellKey {
        match self {
            Doorbell::Pod { namespace, name, .. } => DoorbellKey::Pod(namespace.clone(), name.clone()),
            Doorbell::Node { name, event, .. } => DoorbellKey::Node(name.clone(), *event),
            Doorbell::Deleted { kind, name, .. } => DoorbellKey::Deleted(*kind, name.clone()),
        }
    }

    /// `pod`, `node`, `nodeclaim` or `nodepool`, a stable field for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Doorbell::Pod { .. } => "pod",
            Doorbell::Node { .. } => "node",
            Doorbell::Deleted { kind, .. } => kind.as_str(),
        }
    }
}

/// See [`Doorbell::key`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DoorbellKey {
    /// Namespace and name.
    Pod(String, String),
    Node(String, NodeEvent),
    Deleted(Deleted, String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Timestamp {
        "2025-06-01T12:00:00.123456Z".parse().unwrap()
    }

    #[test]
    fn pod_body_is_the_simulators_shape() {
        let bell = Doorbell::Pod { namespace: "shop".into(), name: "web-0".into(), at: at() };
        let body: serde_json::Value = serde_json::from_str(&bell.body()).unwrap();
        assert_eq!(body, serde_json::json!({"pod": "shop/web-0", "unschedulableAt": "2025-06-01T12:00:00.123Z"}));
    }

    #[test]
    fn deletion_bodies() {
        for (kind, word) in [(Deleted::NodeClaim, "nodeclaim"), (Deleted::NodePool, "nodepool")] {
            let bell = Doorbell::Deleted { kind, name: "default-abc12".into(), at: at() };
            let body: serde_json::Value = serde_json::from_str(&bell.body()).unwrap();
            assert_eq!(
                body,
                serde_json::json!({word: "default-abc12", "event": "deleted", "at": "2025-06-01T12:00:00.123Z"})
            );
            assert_eq!(bell.kind(), word);
        }
    }

    #[test]
    fn node_bodies() {
        for (event, word) in
            [(NodeEvent::Registered, "registered"), (NodeEvent::Ready, "ready"), (NodeEvent::Gone, "gone")]
        {
            let bell = Doorbell::Node { name: "ip-10-0-1-2".into(), event, at: at() };
            let body: serde_json::Value = serde_json::from_str(&bell.body()).unwrap();
            assert_eq!(
                body,
                serde_json::json!({"node": "ip-10-0-1-2", "event": word, "at": "2025-06-01T12:00:00.123Z"})
            );
            assert_eq!(event.as_str(), word);
        }
    }

    #[test]
    fn whole_seconds_keep_three_digits() {
        let bell =
            Doorbell::Node { name: "n".into(), event: NodeEvent::Gone, at: "2025-06-01T12:00:00Z".parse().unwrap() };
        assert!(bell.body().contains("\"2025-06-01T12:00:00.000Z\""), "{}", bell.body());
    }

    #[test]
    fn keys_ignore_the_time() {
        let a = Doorbell::Pod { namespace: "a".into(), name: "p".into(), at: at() };
        let b = Doorbell::Pod { namespace: "a".into(), name: "p".into(), at: Timestamp::UNIX_EPOCH };
        assert_eq!(a.key(), b.key());
        let ready = Doorbell::Node { name: "n".into(), event: NodeEvent::Ready, at: at() };
        let gone = Doorbell::Node { name: "n".into(), event: NodeEvent::Gone, at: at() };
        assert_ne!(ready.key(), gone.key());
    }
}
