//! Expiration: a claim older than its `expireAfter` is taken away, forcefully.
//!
//! Karpenter v1 semantics: expiration is not subject to disruption budgets, and do-not-disrupt
//! and PDBs only hold the drain until the claim's `terminationGracePeriod` runs out (the
//! termination machine enforces that). There is no launch-first replacement: the drained pods
//! go pending and the provisioner launches for them as for any other pending pod.
//!
//! The age is counted from the instance's launch (from the claim's creation while no instance is
//! recorded), and `expireAfter` is the one copied onto the claim at launch, so editing the pool
//! later is drift, not a retroactive change of every node's lifetime.

use crate::decision::{Action, Decision};

use crate::cluster::Cluster;
use crate::nodeclaim::{Disruption, NodeClaim, Phase, Reason};
use crate::time::{format_duration, Time};

/// When a claim expires, if it ever does.
pub fn expires_at(claim: &NodeClaim) -> Option<Time> {
    let after = claim.expire_after?;
    Some(born(claim).plus(after))
}

fn born(claim: &NodeClaim) -> Time {
    claim.launch.as_ref().map_or(claim.created_at, |l| l.launched_at)
}

/// The sentence for an expired claim: "expired: launched 2026-10-22T09:00:00Z, expireAfter 720h".
pub fn explain(claim: &NodeClaim) -> String {
    let verb = if claim.launch.is_some() { "launched" } else { "created" };
    let after = claim.expire_after.map_or_else(|| "Never".to_string(), format_duration);
    format!("expired: {verb} {}, expireAfter {after}", born(claim))
}

/// Decisions for every expired claim: the claim written (as the next version of the one read, see
/// [`Action::WriteClaim`]) with an `Expired` disruption, and an Event on its node. Claims still
/// launching (the launch timeout owns them), already disrupting, or past Initialized are left
/// alone. Unexpired claims are not news and get no note.
pub fn expirations(cluster: &Cluster) -> Vec<Decision> {
    let mut out = vec![];
    for claim in &cluster.claims {
        if !matches!(claim.phase, Phase::Launched | Phase::Registered | Phase::Initialized)
            || claim.disruption.is_some()
        {
            continue;
        }
        let Some(at) = expires_at(claim) else { continue };
        if cluster.now < at {
            continue;
        }
        let message = explain(claim);
        let mut next = claim.next_version();
        next.disruption = Some(Disruption {
            reason: Reason::Expired,
            since: cluster.now,
            replacements: vec![],
            message: message.clone(),
            reclaim_at: None,
        });
        out.push(Decision::act(Some(&claim.name), Action::WriteClaim(Box::new(next)), message.clone()));
        if let Some(node) = &claim.node_name {
            out.push(Decision::event(Some(&claim.name), format!("Node/{node}"), "Expired", message));
        }
    }
    out
}
