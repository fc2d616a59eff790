//! Rides: a claim of one pool whose pods all go on a claim of another pool, for less than the
//! two cost apart.
//!
//! A pod opens a claim only in the first pool, by weight, that can run it, but it may ride on a
//! claim another pod opened in another pool (the pass puts it on the first bin that takes it).
//! The pass fills claims in pod order, so a pod placed early opens a claim in its own pool that
//! a claim opened later, in another pool, had room for: two 2-vCPU pods on their own node in the
//! heavier pool, and a 6 GiB pod alone on a 4-vCPU node of a lighter pool, where one node of the
//! lighter pool holds all three (`tests/exact_optimum.rs` finds such cases). The weights still
//! hold: the claim ridden on keeps the pods that opened it.
//!
//! Only whole claims of pools without taints move (a tainted pool is capacity set aside for the
//! pods that tolerate it, which stay there), onto claims of repackable groups (see `repack.rs`), and only pods
//! the other pool runs under the claim's requirements as they are (so the claim's requirements,
//! and its candidate types, stay what they were). The search is over pairs of the plan's
//! repackable claims, which `repack` calls only for plans of at most its `MAX_GROUP` of them.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use super::finalize::{claim_price, priced, PricedTypes};
use super::Scheduler;
use crate::requirements::Requirements;

impl Scheduler<'_> {
    /// Moves claims among `bins` (repackable claims; `class_of` maps a pod to its class) onto
    /// claims of other pools while that saves, the biggest saving first.
    pub(super) fn ride(&mut self, bins: &[usize], class_of: &[usize]) {
        if bins.iter().all(|&b| self.bins[b].pool == self.bins[bins[0]].pool) {
            return;
        }
        let mut prices: HashMap<(usize, Requirements), Arc<PricedTypes>> = HashMap::default();
        for &b in bins {
            let bin = &self.bins[b];
            prices.entry((bin.pool, bin.reqs.clone())).or_insert_with(|| priced(self, bin.pool, &bin.reqs));
        }
        let cost = |s: &Self, b: usize, used: &crate::resources::Resources| {
            let bin = &s.bins[b];
            claim_price(s, bin.pool, &prices[&(bin.pool, bin.reqs.clone())], used).map(|(price, _)| price)
        };
        loop {
            let mut best: Option<(f64, usize, usize)> = None;
            for &from in bins {
                // A pool with taints is capacity set aside for the pods that tolerate them: its
                // pods stay.
                if self.bins[from].pods.is_empty() || !self.pools[self.bins[from].pool].pool.taints.is_empty() {
                    continue;
                }
                let Some(alone) = cost(self, from, &self.bins[from].used) else { continue };
                for &onto in bins {
                    let (a, b) = (&self.bins[from], &self.bins[onto]);
                    if b.pool == a.pool || b.pods.is_empty() {
                        continue;
                    }
                    let Some(before) = cost(self, onto, &b.used) else { continue };
                    let Some(after) = cost(self, onto, &b.used.plus(&a.used)) else { continue };
                    let saving = alone + before - after;
                    if saving > 1e-9 && best.is_none_or(|(s, _, _)| saving > s) && self.can_ride(from, onto, class_of) {
                        best = Some((saving, from, onto));
                    }
                }
            }
            let Some((_, from, onto)) = best else { break };
            let pods = std::mem::take(&mut self.bins[from].pods);
            let used = std::mem::take(&mut self.bins[from].used);
            let bin = &mut self.bins[onto];
            bin.pods.extend(pods);
            bin.used.add(&used);
            let (pool, reqs) = (bin.pool, bin.reqs.clone());
            self.retarget(pool, &prices[&(pool, reqs)], onto);
        }
    }

    /// Whether every pod on claim `from` runs on claim `onto` as its requirements stand: its
    /// class fits `onto`'s pool (taints, requirements) and adds nothing to `onto`'s requirements.
    fn can_ride(&self, from: usize, onto: usize, class_of: &[usize]) -> bool {
        let target = &self.bins[onto];
        self.bins[from].pods.iter().all(|&p| match self.fit_cached(class_of[p], 0, target.pool) {
            Some(Ok(fit)) => fit.reqs.intersection(&target.reqs) == target.reqs,
            _ => false,
        })
    }
}
