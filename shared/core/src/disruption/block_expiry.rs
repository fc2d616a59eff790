//! Capacity Blocks for ML end at a fixed time, and EC2 starts reclaiming their instances 30
//! minutes before that. Like Karpenter's capacity-reservation expiration controller, a claim
//! launched into a block is disrupted once the block is expiring (its last 40 minutes,
//! [`BLOCK_EXPIRY_LEAD`]): forcefully, as EC2 will take the instance whatever the drain does, and
//! with ten minutes to drain before EC2 begins. Its pods go pending and are planned elsewhere (the
//! expiring block itself takes no new claim). EC2's expiration warning on the interruption queue,
//! sent at the same moment, drains the same claims with replacements ([`crate::interruption`]);
//! whichever comes first disrupts a claim, the other finds it disrupted already. A claim that was
//! planned for the block but launched as spot or on-demand does not run in it and is left alone.

use crate::catalog::{Reservation, BLOCK_EXPIRY_LEAD};
use crate::cluster::Cluster;
use crate::decision::{Action, Decision};
use crate::nodeclaim::{Disruption, Phase, Reason};
use crate::reservations::running_in;

/// How long before a block's end EC2 begins terminating its instances.
pub const BLOCK_RECLAIM_LEAD: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// Decisions for every running claim whose Capacity Block is expiring: the claim written with a
/// `CapacityReservationInterrupted` disruption due when EC2 starts reclaiming, and an Event on its
/// node. Claims already disrupting or still launching are left alone.
pub fn expiring_blocks(cluster: &Cluster) -> Vec<Decision> {
    let mut out = vec![];
    let blocks: Vec<&Reservation> =
        cluster.resolved.iter().flat_map(|r| &r.reservations).filter(|r| r.expiring(cluster.now)).collect();
    if blocks.is_empty() {
        return out;
    }
    for claim in &cluster.claims {
        if !matches!(claim.phase, Phase::Launched | Phase::Registered | Phase::Initialized)
            || claim.disruption.is_some()
        {
            continue;
        }
        let Some(id) = running_in(claim) else { continue };
        let Some(block) = blocks.iter().find(|b| b.id == id) else { continue };
        let Some(end) = block.end else { continue };
        let message = format!(
            "capacity block {id} ends at {end}: its instances are reclaimed from {}, so the node is drained \
             {} minutes before the end",
            end.minus(BLOCK_RECLAIM_LEAD),
            BLOCK_EXPIRY_LEAD.as_secs() / 60
        );
        let mut next = claim.next_version();
        next.disruption = Some(Disruption {
            reason: Reason::CapacityReservationInterrupted,
            since: cluster.now,
            replacements: vec![],
            message: message.clone(),
            reclaim_at: Some(end.minus(BLOCK_RECLAIM_LEAD)),
        });
        out.push(Decision::act(Some(&claim.name), Action::WriteClaim(Box::new(next)), message.clone()));
        if let Some(node) = &claim.node_name {
            out.push(Decision::event(
                Some(&claim.name),
                format!("Node/{node}"),
                "CapacityReservationInterrupted",
                message,
            ));
        }
    }
    out
}
