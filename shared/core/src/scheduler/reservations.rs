//! Reserved capacity in a pass: how many instances each capacity reservation still takes, and
//! which reserved offering a claim goes into.
//!
//! A reserved instance is paid for whether it runs or not, so a pod one holds opens its claim in
//! the reservation before anything is bought, and the claim is filled up to the reservation's
//! type (`claims.rs`); before the pass proper, too, so that claims bought for larger pods are not
//! filled with the pods a reservation holds ([`Scheduler::run_reserved`]). The plan launches
//! such a claim into its reservation (`finalize.rs`). Both count instances from what
//! is left here, so a reservation never takes more claims than it has instances — whichever
//! pools and classes share it (Karpenter's scheduler keeps one count per reservation too).

use rustc_hash::FxHashMap;

use super::pools::{PoolOffering, PoolType};
use super::Scheduler;
use crate::snapshot::Snapshot;

/// Why a claim that may launch nothing but reserved capacity cannot be opened: the reservations
/// it could use are taken.
pub(super) const NO_INSTANCE_LEFT: &str = "the capacity reservations its requirements allow have no instance left";

/// The instances each reservation the classes select still takes, by id (a reservation several
/// classes select has one count: see [`crate::reservations::open`]).
pub(super) fn instances_left(snap: &Snapshot) -> FxHashMap<&str, u32> {
    snap.reservations.values().flatten().map(|r| (r.id.as_str(), r.available)).collect()
}

/// The reserved offering a claim of pool `pool` goes into: among the types `usable` takes, the
/// offerings `offered` allows, by Karpenter's preference (ODCRs, then Capacity Blocks, then
/// interruptible ODCRs), then price, then type name; with the type's index in the pool.
pub(super) fn best_reserved<'s>(
    s: &'s Scheduler<'_>,
    pool: usize,
    usable: impl Fn(usize, &PoolType) -> bool,
    offered: impl Fn(&PoolOffering) -> bool,
) -> Option<(usize, &'s PoolOffering)> {
    let types = &s.pools[pool].types;
    let mut best: Option<((u8, f64, &str), usize, &PoolOffering)> = None;
    // Types with a reservation are few: those first, before the costlier checks.
    for (i, t) in types.iter().enumerate().filter(|(_, t)| t.has_reserved()) {
        if !usable(i, t) {
            continue;
        }
        for o in t.offerings.iter().filter(|o| offered(o)) {
            let Some(r) = &o.reservation else { continue };
            let key = (r.preference(), o.price, s.catalog.types[t.catalog].name.as_str());
            if best.as_ref().is_none_or(|(k, _, _)| key < *k) {
                best = Some((key, i, o));
            }
        }
    }
    best.map(|(_, i, o)| (i, o))
}

impl Scheduler<'_> {
    /// Whether no reservation the classes select has an instance left (or none is selected).
    pub(super) fn no_instance_left(&self) -> bool {
        self.reservations_left.values().all(|&n| n == 0)
    }

    /// The pass's first round: pods, class by class in the pass's order and at their first rung,
    /// onto capacity already paid for. A pod that no existing capacity takes goes on a claim
    /// opened in a reservation of the first pool that runs it, filled as the pass fills a claim,
    /// while one has an instance left (or on such a claim with room). The class's other pods wait
    /// for the pass proper, and so does a pod existing capacity takes (larger pods get their turn
    /// at that first, as in the pass). Without this round, a claim bought early in the pass for
    /// pods no reservation holds is filled with smaller pods a reservation would hold for nothing.
    pub(super) fn run_reserved(&mut self) {
        if self.no_instance_left() {
            return;
        }
        for c in 0..self.classes.len() {
            while self.next[c] < self.classes[c].pods.len() {
                let pod = self.classes[c].pods[self.next[c]];
                // As in the pass: a pod is no longer waiting while its claim is chosen.
                self.next[c] += 1;
                let Some((b, choice, opened)) = self.place_reserved(c) else {
                    self.next[c] -= 1;
                    break;
                };
                self.commit(b, c, 0, &choice, pod);
                if opened {
                    self.fill_opened(b, c, 0);
                }
            }
        }
    }

    /// Where [`Scheduler::run_reserved`] puts the next pod of class `c`: a claim in a reservation
    /// (whether it opened it) and the domain choice, or `None` when it leaves the pod to the pass.
    fn place_reserved(&mut self, c: usize) -> Option<(usize, Vec<u16>, bool)> {
        let choices = self.domain_choices(c, 0).ok()?;
        let found = choices.iter().find_map(|ch| self.find_bin(c, 0, ch).map(|b| (b, ch.clone())));
        match found {
            Some((b, choice)) => self.in_reservation.contains_key(&b).then_some((b, choice, false)),
            None => self.open_claim(c, 0, &choices, true).ok().map(|(b, choice)| (b, choice, true)),
        }
    }
}
