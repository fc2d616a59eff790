//! How many instances each capacity reservation still takes: EC2's count when the class was
//! resolved, less the live claims headed for it that EC2 had not counted yet. The plan draws
//! these down as it gives claims a reservation ([`crate::scheduler`]), and a launch checks its
//! reservation again against the other claims ([`for_launch`]), so no claim is planned or
//! launched into a full reservation. Karpenter keeps the same count in memory between describes;
//! here it is worked out from the claims, which persist across invocations.

use std::collections::BTreeMap;

use crate::catalog::{CapacityType, Reservation};
use crate::cluster::Cluster;
use crate::labels;
use crate::nodeclaim::NodeClaim;
use crate::time::Time;

/// The reservation a claim is headed for or launched into: its single
/// `karpenter.k8s.aws/capacity-reservation-id` requirement (what the plan gives a reserved claim).
pub fn claim_reservation(claim: &NodeClaim) -> Option<&str> {
    claim.requirements.get(labels::CAPACITY_RESERVATION_ID).and_then(|r| r.single_value())
}

/// The reservation a launched claim's instance runs in: its [`claim_reservation`] when it
/// launched as `reserved` (a claim planned for a reservation that fell back to spot or on-demand
/// runs in none, and EC2 reclaiming the reservation does not touch it).
pub fn running_in(claim: &NodeClaim) -> Option<&str> {
    claim.launch.as_ref().filter(|l| l.capacity_type == CapacityType::Reserved).and_then(|_| claim_reservation(claim))
}

/// The reservation a launched claim's instance runs in while that reservation still pays for it:
/// [`running_in`], among the reservations its class lists, not ended. Such an instance is paid
/// for whether it runs or not (an ODCR bills its instances either way, a Capacity Block was paid
/// up front), so taking it away saves nothing; once the reservation ends or is no longer listed,
/// the instance is billed as any other.
pub fn paid_for<'c>(cluster: &'c Cluster, claim: &NodeClaim) -> Option<&'c Reservation> {
    let id = running_in(claim)?;
    cluster
        .resolved
        .iter()
        .flat_map(|r| r.reservations.iter())
        .find(|r| r.id == id && r.end.is_none_or(|end| cluster.now < end))
}

/// How many more instances each reservation takes at `now`: EC2's count less the live claims
/// headed for it that EC2 had not counted when it answered (not launched yet, or launched after
/// `observed_at`). A reservation that is closed ([`Reservation::open_at`]) takes none.
pub fn remaining<'c>(
    reservations: &[Reservation],
    claims: impl IntoIterator<Item = &'c NodeClaim>,
    now: Time,
) -> BTreeMap<String, u32> {
    let mut left: BTreeMap<String, u32> =
        reservations.iter().map(|r| (r.id.clone(), if r.open_at(now) { r.available } else { 0 })).collect();
    for c in claims.into_iter().filter(|c| c.is_live()) {
        let Some(id) = claim_reservation(c) else { continue };
        let Some(r) = reservations.iter().find(|r| r.id == id) else { continue };
        let uncounted = c.launch.as_ref().is_none_or(|l| l.launched_at >= r.observed_at);
        if uncounted {
            if let Some(n) = left.get_mut(id) {
                *n = n.saturating_sub(1);
            }
        }
    }
    left
}

/// Per class, the reservations it selects that take another instance now, with what each has
/// left once the live claims headed for it are counted. A reservation several classes select is
/// one count: the scheduler draws them down by id.
pub fn open(cluster: &Cluster) -> BTreeMap<String, Vec<Reservation>> {
    let mut all: Vec<Reservation> = cluster.resolved.iter().flat_map(|r| r.reservations.iter().cloned()).collect();
    all.sort_by(|a, b| a.id.cmp(&b.id));
    all.dedup_by(|a, b| a.id == b.id);
    let left = remaining(&all, &cluster.claims, cluster.now);
    cluster
        .resolved
        .iter()
        .filter_map(|r| {
            let open: Vec<Reservation> = r
                .reservations
                .iter()
                .filter_map(|res| {
                    let available = left.get(&res.id).copied().filter(|n| *n > 0)?;
                    Some(Reservation { available, ..res.clone() })
                })
                .collect();
            (!open.is_empty()).then(|| (r.name.clone(), open))
        })
        .collect()
}

/// The class's reservations as a launch of `claim` may use them: each `available` is EC2's count
/// less the other live claims headed for it that EC2 had not counted yet (the claim itself was
/// counted when it was planned), and none of a reservation that is full, ended or expiring.
pub fn for_launch(claim: &NodeClaim, reservations: &[Reservation], cluster: &Cluster) -> Vec<Reservation> {
    let left = remaining(reservations, cluster.claims.iter().filter(|c| c.name != claim.name), cluster.now);
    reservations.iter().map(|r| Reservation { available: left.get(&r.id).copied().unwrap_or(0), ..r.clone() }).collect()
}
