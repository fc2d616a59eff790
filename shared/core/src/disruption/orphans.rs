//! The sweeper's safety net: capacity and records that lost their counterpart.
//!
//! 1. **Instances without a claim.** An instance tagged `dovetail.dev/nodeclaim` whose claim does
//!    not exist (or records a different instance: a duplicate launch) is terminated once it is
//!    older than [`ORPHAN_GRACE`]. The grace covers the window between CreateFleet returning and
//!    the claim write recording the instance, and EC2's eventually consistent reads; a claim
//!    still `Launching` owns any instance with its tag (the launch step adopts it by tag).
//! 2. **Claims whose instance vanished.** A claim past Launching (and not yet Terminating, whose
//!    machine expects the instance to go) whose instance is absent from the cloud's list, or
//!    `terminated`, for longer than the grace, is written Terminated; its Node is deleted so the
//!    pods bound to it are released (pod garbage collection removes them and their controllers
//!    recreate them as pending pods), and an Event says so.
//! 3. **Nodes with our label but no claim.** A Node labelled `dovetail.dev/nodeclaim` or
//!    `dovetail.dev/nodepool` that no live claim owns (by the Node's name, its claim label, or the
//!    claim tag of the instance its providerID names): if its instance is gone the Node is deleted
//!    (releasing its pods); if the instance still runs, it is an orphan instance of rule 1, so the
//!    Node is tainted `dovetail.dev/disrupted:NoSchedule` to keep new pods off until the instance
//!    is terminated, and an Event on the Node reports it. Dovetail does not adopt such nodes: the
//!    claim that would carry their drain state is the very thing that is missing.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::decision::{Action, Decision};

use crate::cluster::{instance_of_node, Cluster, Described, Instance};
use crate::labels;
use crate::model::{Node, Taint, TaintEffect};
use crate::nodeclaim::{NodeClaim, Phase};
use crate::time::format_duration;

/// How old an unowned instance, or a claim's missing instance, must be before acting on it.
/// Five minutes: well past CreateFleet-to-claim-write latency and EC2's read-after-write lag, and
/// short enough that a leaked instance costs little.
pub const ORPHAN_GRACE: Duration = Duration::from_secs(5 * 60);

/// The tag that ties an instance to its claim.
pub const CLAIM_TAG: &str = labels::NODECLAIM;

fn gone(instance: &Instance) -> bool {
    matches!(instance.state.as_str(), "shutting-down" | "terminated")
}

/// All orphan decisions for a sweep, with [`ORPHAN_GRACE`].
pub fn orphans(cluster: &Cluster) -> Vec<Decision> {
    orphans_with_grace(cluster, ORPHAN_GRACE)
}

/// All orphan decisions for a sweep: instances, then claims, then nodes. Only from a read that
/// described every instance of the cluster ([`Described::All`]): in a partial one, every claim and
/// node whose instance was not asked for would look orphaned.
pub fn orphans_with_grace(cluster: &Cluster, grace: Duration) -> Vec<Decision> {
    if cluster.described != Described::All {
        return vec![Decision::note(None, "no orphan pass: this read described only some of the cluster's instances")];
    }
    let claims: BTreeMap<&str, &NodeClaim> = cluster.claims.iter().map(|c| (c.name.as_str(), c)).collect();
    let mut out = orphan_instances(cluster, &claims, grace);
    out.extend(vanished_instances(cluster, grace));
    out.extend(unowned_nodes(cluster));
    out
}

fn orphan_instances(cluster: &Cluster, claims: &BTreeMap<&str, &NodeClaim>, grace: Duration) -> Vec<Decision> {
    let mut out = vec![];
    for inst in &cluster.instances {
        let Some(tag) = inst.tags.get(CLAIM_TAG) else { continue };
        if gone(inst) {
            continue;
        }
        let problem = match claims.get(tag.as_str()) {
            None => format!("its nodeclaim {tag} does not exist"),
            Some(c) if c.phase == Phase::Launching => continue,
            Some(c) => match &c.launch {
                Some(l) if l.instance_id == inst.id => continue,
                Some(l) => format!("its nodeclaim {tag} records instance {} instead", l.instance_id),
                None => format!("its nodeclaim {tag} records no instance"),
            },
        };
        let age = cluster.now.since(inst.launched_at);
        if age >= grace {
            out.push(Decision::act(
                None,
                Action::TerminateInstance { instance_id: inst.id.clone() },
                format!(
                    "orphan instance {} ({}, launched {}): {problem}; terminated after a {} grace period",
                    inst.id,
                    inst.instance_type,
                    inst.launched_at,
                    format_duration(grace)
                ),
            ));
        } else {
            // Worth a line: someone looking at EC2 sees an instance no claim explains.
            out.push(Decision::note(
                None,
                format!(
                    "instance {} looks orphaned ({problem}); it is terminated at {} unless a claim adopts it",
                    inst.id,
                    inst.launched_at.plus(grace)
                ),
            ));
        }
    }
    out
}

fn vanished_instances(cluster: &Cluster, grace: Duration) -> Vec<Decision> {
    let mut out = vec![];
    for claim in &cluster.claims {
        if !matches!(claim.phase, Phase::Launched | Phase::Registered | Phase::Initialized | Phase::Draining) {
            continue;
        }
        let Some(launch) = &claim.launch else { continue };
        let instance = cluster.instances.iter().find(|i| i.id == launch.instance_id);
        let state = match instance {
            None => "no longer exists",
            Some(i) if i.state == "terminated" => "is terminated",
            Some(_) => continue,
        };
        if cluster.now.since(launch.launched_at) < grace {
            continue; // EC2 may simply not list a fresh instance yet.
        }
        let node = claim.node_name.as_ref().and_then(|n| cluster.nodes.iter().find(|x| &x.name == n));
        let pods = node.map(|n| n.pods.iter().map(|p| p.key()).collect::<Vec<_>>()).unwrap_or_default();
        let released = match pods.len() {
            0 => String::new(),
            n if n <= 5 => format!("; releasing pods {}", pods.join(", ")),
            n => format!("; releasing {n} pods ({}, …)", pods[..5].join(", ")),
        };
        let message = format!("instance {} of nodeclaim {} {state}{released}", launch.instance_id, claim.name);
        let mut next = claim.next_version();
        next.phase = Phase::Terminated;
        out.push(Decision::act(Some(&claim.name), Action::WriteClaim(Box::new(next)), message.clone()));
        if let Some(node) = node {
            out.push(Decision::act(Some(&claim.name), Action::DeleteNode { node: node.name.clone() }, message.clone()));
        }
        let object = match &claim.node_name {
            Some(n) => format!("Node/{n}"),
            None => format!("NodePool/{}", claim.nodepool),
        };
        out.push(Decision::act(
            Some(&claim.name),
            Action::Event { object, reason: "InstanceVanished".into(), message: message.clone() },
            message,
        ));
    }
    out
}

/// Whether a live claim owns the Node: by the name it recorded, the Node's claim label, or the
/// claim tag of the Node's instance. The last covers a Node that registered before its claim
/// recorded the instance (a launch whose record write failed, finished later by the claim's
/// repair): the Node carries only the pool's label, and the claim, still Launching, no instance.
fn owned(cluster: &Cluster, node: &Node, instance: Option<&Instance>) -> bool {
    let label = node.labels.get(labels::NODECLAIM);
    let tag = instance.and_then(|i| i.tags.get(CLAIM_TAG));
    cluster.claims.iter().filter(|c| c.phase != Phase::Terminated).any(|c| {
        c.node_name.as_deref() == Some(&node.name)
            || Some(&c.name) == label
            || (Some(&c.name) == tag
                && c.launch.as_ref().is_none_or(|l| instance.is_some_and(|i| i.id == l.instance_id)))
    })
}

fn unowned_nodes(cluster: &Cluster) -> Vec<Decision> {
    let mut out = vec![];
    for node in &cluster.nodes {
        if node.kind != crate::model::NodeKind::Existing {
            continue;
        }
        let ours = node.labels.contains_key(labels::NODECLAIM) || node.labels.contains_key(labels::NODEPOOL);
        if !ours {
            continue;
        }
        // The Node's instance by its providerID; for a Node without one yet, by its claim label.
        let instance = instance_of_node(node, cluster)
            .or_else(|| {
                let tag = node.labels.get(labels::NODECLAIM)?;
                cluster.instances.iter().find(|i| i.tags.get(CLAIM_TAG) == Some(tag) && !gone(i))
            })
            .filter(|i| !gone(i));
        if owned(cluster, node, instance) {
            continue;
        }
        match instance {
            None => {
                let message = format!(
                    "node {} carries Dovetail's labels but has no nodeclaim and no running instance; deleting it \
                     releases its {} pod(s)",
                    node.name,
                    node.pods.len()
                );
                out.push(Decision::act(None, Action::DeleteNode { node: node.name.clone() }, message.clone()));
                out.push(Decision::event(None, format!("Node/{}", node.name), "OrphanNode", message));
            }
            Some(inst) => {
                let message = format!(
                    "node {} carries Dovetail's labels but has no nodeclaim; its instance {} is an orphan and is \
                     terminated after the grace period, so the node is tainted to keep new pods off",
                    node.name, inst.id
                );
                let taint = Taint::new(labels::TAINT_DISRUPTED, "", TaintEffect::NoSchedule);
                if !node.taints.contains(&taint) {
                    out.push(Decision::act(
                        None,
                        Action::TaintNode { node: node.name.clone(), taint },
                        message.clone(),
                    ));
                }
                out.push(Decision::event(None, format!("Node/{}", node.name), "OrphanNode", message));
            }
        }
    }
    out
}
