//! Node repair (Karpenter's `NodeRepair`): a node whose `Ready`, or a condition the EKS node
//! monitoring agent reports, stays unhealthy past its toleration is taken away and its pods
//! provisioned for elsewhere.
//!
//! Opt-in, as in Karpenter: per NodePool with the annotation `dovetail.dev/node-repair: "true"`
//! ([`crate::model::NODE_REPAIR_ANNOTATION`]), or for every pool with the functions' setting
//! ([`Cluster::node_repair`]).
//!
//! Semantics, after Karpenter's node health controller and the AWS provider's repair policies:
//! - a condition is unhealthy when its status is the one a [`POLICIES`] row names, and due for
//!   repair once it has been so for the row's toleration, counted from its `lastTransitionTime`
//!   (a condition that does not say when it changed is never due: how long is unknown);
//! - only a live claim is repaired: Initialized and not already being taken away;
//! - **a pool with more than 20% of its nodes unhealthy is not repaired at all**
//!   ([`UNHEALTHY_THRESHOLD`], rounded up as budgets are: one node of three may be repaired), and
//!   an Event on the NodePool says why: that many failing together points at something wider (a
//!   zone, an image, the network) that replacing nodes would not fix and could make worse. The
//!   pool's nodes are the Nodes of its claims that have not ended; a node counts as unhealthy from
//!   the moment a watched condition turns, toleration or not, and for as long as its Node stays —
//!   a repair under way counts until its node is gone, so repairs never exceed the 20% at once;
//! - forceful: not subject to disruption budgets, and [`Reason::Unhealthy`] drains do not wait for
//!   the node's pods (PDBs and do-not-disrupt do not hold; see [`Reason::skips_drain`]), as
//!   Karpenter's repair stamps the claim's termination time with "now";
//! - no launch-first replacement (Karpenter's repair deletes the claim and provisions for the
//!   pods once they are pending, like expiration): the node is terminated at once, its pods are
//!   released when its Node goes, and the provisioner launches for them as for any pending pod.

use std::time::Duration;

use crate::cluster::{node_of, Cluster};
use crate::decision::{Action, Decision};
use crate::model::{BudgetNodes, Node, NodeCondition, NodePool};
use crate::nodeclaim::{Disruption, NodeClaim, Phase, Reason};
use crate::time::{format_duration, Time};

use super::budgets::scaled;

/// A node condition that makes a node unhealthy, and how long it is tolerated before repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// The condition type (`Ready`, `KernelReady`, …).
    pub condition: &'static str,
    /// The status that is unhealthy (`False`, `Unknown`).
    pub status: &'static str,
    pub toleration: Duration,
}

const fn policy(condition: &'static str, status: &'static str, minutes: u64) -> Policy {
    Policy { condition, status, toleration: Duration::from_secs(minutes * 60) }
}

/// Karpenter's AWS repair policies: the kubelet's `Ready`, and the conditions the EKS node
/// monitoring agent sets. Accelerators get the shortest toleration: a GPU that failed is not
/// coming back, and its node is costly to keep.
pub const POLICIES: &[Policy] = &[
    policy("Ready", "False", 30),
    policy("Ready", "Unknown", 30),
    policy("AcceleratedHardwareReady", "False", 10),
    policy("StorageReady", "False", 30),
    policy("NetworkingReady", "False", 30),
    policy("KernelReady", "False", 30),
    policy("ContainerRuntimeReady", "False", 30),
];

/// More unhealthy nodes than this share of a pool (rounded up) block its repair.
pub const UNHEALTHY_THRESHOLD: BudgetNodes = BudgetNodes::Percent(20);

/// The Event reason on a Node that is repaired.
pub const UNHEALTHY: &str = "Unhealthy";
/// The Event reason on a NodePool whose repair is blocked (Karpenter's).
pub const NODE_REPAIR_BLOCKED: &str = "NodeRepairBlocked";

/// Whether a condition type is one some policy watches: the ones a Node keeps
/// ([`Node::conditions`]).
pub fn watched(condition: &str) -> bool {
    POLICIES.iter().any(|p| p.condition == condition)
}

/// Whether node repair is on for `pool`: its annotation, or the cluster-wide setting.
pub fn enabled(cluster: &Cluster, pool: &NodePool) -> bool {
    cluster.node_repair || pool.node_repair
}

/// The node's conditions in an unhealthy status, each with its policy.
pub fn unhealthy(node: &Node) -> impl Iterator<Item = (&'static Policy, &NodeCondition)> + '_ {
    POLICIES.iter().filter_map(|p| node.condition(p.condition).filter(|c| c.status == p.status).map(|c| (p, c)))
}

/// The unhealthy condition that made the node due for repair at `now` (the one due first), with
/// since when it has been unhealthy.
pub fn due(node: &Node, now: Time) -> Option<(&'static Policy, &NodeCondition, Time)> {
    unhealthy(node)
        .filter_map(|(p, c)| c.since.map(|since| (p, c, since)))
        .filter(|(p, _, since)| since.plus(p.toleration) <= now)
        .min_by_key(|(p, _, since)| since.plus(p.toleration))
}

/// The sentence for a repair: "Ready=False since 2026-10-22T09:00:00Z (31m), past its 30m
/// toleration".
fn explain(policy: &Policy, condition: &NodeCondition, since: Time, now: Time) -> String {
    format!(
        "{}={} since {since} ({}), past its {} toleration",
        condition.kind,
        condition.status,
        format_duration(now.since(since)),
        format_duration(policy.toleration)
    )
}

/// The sentence for a node unhealthy but not due yet.
fn waiting(node: &Node, policy: &Policy, condition: &NodeCondition) -> String {
    match condition.since {
        Some(since) => format!(
            "node {} has {}={} since {since}: repaired at {} unless it recovers ({} toleration)",
            node.name,
            condition.kind,
            condition.status,
            since.plus(policy.toleration),
            format_duration(policy.toleration)
        ),
        None => format!(
            "node {} has {}={} with no lastTransitionTime: not repaired, since how long it lasted is unknown",
            node.name, condition.kind, condition.status
        ),
    }
}

/// Decisions for every node due for repair in a pool with repair on: the claim written with an
/// `Unhealthy` disruption and an Event on its Node; or, for a pool with too many unhealthy nodes,
/// one Event on the NodePool and no repair. A node unhealthy but not due yet gets a note saying
/// when it will be; healthy pools decide nothing.
pub fn repairs(cluster: &Cluster) -> Vec<Decision> {
    let now = cluster.now;
    let mut out = Vec::new();
    for pool in cluster.nodepools.iter().filter(|p| enabled(cluster, p)) {
        let members: Vec<(&NodeClaim, &Node)> = cluster
            .claims
            .iter()
            .filter(|c| c.nodepool == pool.name && c.phase != Phase::Terminated)
            .filter_map(|c| node_of(c, cluster).map(|n| (c, n)))
            .collect();
        let candidates = members.iter().filter(|(c, _)| c.phase == Phase::Initialized && c.disruption.is_none());
        let mut due_now = Vec::new();
        for (claim, node) in candidates {
            match due(node, now) {
                Some((p, cond, since)) => due_now.push((*claim, *node, p, cond, since)),
                // Worth a line in `dovetail plan` and the logs: when the repair will come.
                None => out.extend(
                    unhealthy(node).next().map(|(p, c)| Decision::note(Some(&claim.name), waiting(node, p, c))),
                ),
            }
        }
        if due_now.is_empty() {
            continue;
        }
        let sick: Vec<&str> =
            members.iter().filter(|(_, n)| unhealthy(n).next().is_some()).map(|(_, n)| n.name.as_str()).collect();
        let allowed = scaled(UNHEALTHY_THRESHOLD, members.len());
        if sick.len() > allowed {
            let message = format!(
                "node repair blocked: {} of the {} nodes of nodepool {} are unhealthy ({}), more than 20% ({allowed}); \
                 a failure that wide is not one node's, so none is replaced until enough recover",
                sick.len(),
                members.len(),
                pool.name,
                sick.join(", ")
            );
            out.push(Decision::event(None, format!("NodePool/{}", pool.name), NODE_REPAIR_BLOCKED, message));
            continue;
        }
        for (claim, node, policy, condition, since) in due_now {
            let message = format!(
                "unhealthy: node {} has {}: terminating instance {} without waiting for its pods (node repair)",
                node.name,
                explain(policy, condition, since, now),
                claim.launch.as_ref().map_or("(none recorded)", |l| l.instance_id.as_str())
            );
            let mut next = claim.next_version();
            next.disruption = Some(Disruption {
                reason: Reason::Unhealthy,
                since: now,
                replacements: vec![],
                message: message.clone(),
                reclaim_at: None,
            });
            out.push(Decision::act(Some(&claim.name), Action::WriteClaim(Box::new(next)), message.clone()));
            out.push(Decision::event(Some(&claim.name), format!("Node/{}", node.name), UNHEALTHY, message));
        }
    }
    out
}
