//! Repacking: after the pass, new claims whose pods could share one cheaper node are merged.
//!
//! The pass fills one claim at a time, choosing its type by value per dollar for the pods still
//! waiting; it never reconsiders. That leaves two kinds of waste an exact packing avoids (see
//! `tests/exact_optimum.rs`): a tail of small nodes that one larger node would hold for less
//! (five 2-vCPU nodes of 1.5-vCPU pods where one 8-vCPU node holds them all), and nodes filled in
//! the wrong direction. Repacking takes the claims of one pool and one set of requirements whose
//! pods have no topology, affinity or host ports (so where they run matters only by the
//! requirements, which the merged claim keeps), packs their pods afresh, largest first, into nodes
//! of the one type that costs least, and then repeatedly merges the set of claims, packed largest
//! first into one type, that saves the most — each kept only when cheaper than before, priced as
//! the plan prices a claim. Last, a few claims at a time are packed afresh over a mix of types
//! (`mix.rs`), a group of one claim too; and a claim whose pods can all ride on another pool's
//! claim for less moves there (`rides.rs`).
//!
//! Pools with `minValues` are left alone (a merged claim keeps other values), and so are groups of
//! more than [`MAX_GROUP`] claims: large plans are packed well by the pass, and the search is
//! quadratic in the group. Pools with limits are repacked too, and the result kept only when every
//! limited pool's claims, each at the type it is priced as, still fit under its limits (a cheaper
//! packing may use a larger type) and every claim is still one the pass could have opened (room
//! freed in a pool must not be room a later pool's claim was opened for want of); otherwise the
//! plan is repacked again with those pools left as the pass filled them.

use rustc_hash::FxHashMap as HashMap;

use super::finalize::{claim_price, priced, PricedTypes};
use super::Scheduler;
use crate::model::LIMIT_COST;
use crate::requirements::Requirements;
use crate::resources::Resources;

/// The largest group of claims repacked.
const MAX_GROUP: usize = 64;

/// A node of a fresh packing: what its pods request, and the pods.
pub(super) type Node = (Resources, Vec<usize>);

/// The most pods of a group packed afresh (beyond, only whole claims are merged).
const MAX_PODS: usize = 256;

impl Scheduler<'_> {
    pub(super) fn repack(&mut self) {
        let cluster_limit = self.spend.is_limited();
        if !cluster_limit && self.pools.iter().all(|p| p.remaining.is_none()) {
            return self.repack_pools(true);
        }
        let before = self.bins.clone();
        let reserved: Vec<Resources> = self.pools.iter().map(|p| p.reserved.clone()).collect();
        self.repack_pools(true);
        if self.reserve_repacked() {
            return;
        }
        self.bins = before.clone();
        for (pool, r) in self.pools.iter_mut().zip(reserved) {
            pool.reserved = r;
        }
        self.repack_pools(false);
        // A repacked claim is held at its new type's dearest offering, which a cluster-wide cost
        // limit may not leave room for, though the packing is cheaper at the prices it plans.
        if cluster_limit && !self.spend_holds() {
            self.bins = before;
        }
    }

    /// Whether the new claims, each at the type it is priced as, fit under the cluster-wide cost
    /// limit; if so, that is what the pass now holds against it.
    fn spend_holds(&mut self) -> bool {
        let held: i64 = self
            .bins
            .iter()
            .filter(|b| b.node.is_none() && !b.pods.is_empty())
            .map(|b| self.pools[b.pool].types[b.target].capacity.get(LIMIT_COST))
            .sum();
        let mut fresh = self.spend.clone();
        fresh.reserved = 0;
        if fresh.allows(held).is_err() {
            return false;
        }
        self.spend.reserved = held;
        true
    }

    /// Re-counts what each limited pool's new claims hold against its limits (each at its target,
    /// the type it is priced as; emptied claims hold nothing), as the plan will count them;
    /// whether all stay within the limits and every claim is still one the pass could open. A
    /// claim whose pods all have an earlier home was opened because the pools before were at
    /// their limits; once repacking frees room there, a pod of it would open its claim there
    /// instead, so such a claim needs one pod every earlier pool that runs it is still full for.
    /// Left as it was when not.
    fn reserve_repacked(&mut self) -> bool {
        let reserved = self.held_at_targets(|_| true);
        let within =
            self.pools.iter().zip(&reserved).all(|(pool, r)| {
                pool.remaining.as_ref().is_none_or(|rem| rem.iter().all(|(n, left)| r.get(n) <= *left))
            });
        if !within {
            return false;
        }
        let spend = self.spend.reserved;
        if !self.spend_holds() {
            return false;
        }
        let class_of = self.class_of();
        // Whether pool `p` could still open a claim for class `c` within its limits.
        let has_room = |c: usize, p: usize| match self.fit_cached(c, 0, p) {
            Some(Ok(fit)) => self.pools[p].remaining.as_ref().is_none_or(|rem| {
                fit.types.iter().any(|&t| {
                    let capacity = &self.pools[p].types[t as usize].capacity;
                    rem.iter().all(|(n, left)| reserved[p].get(n) + capacity.get(n) <= *left)
                })
            }),
            _ => false,
        };
        let openable = self.bins.iter().filter(|b| b.node.is_none() && !b.pods.is_empty()).all(|bin| {
            bin.pods
                .iter()
                .any(|&pod| class_of[pod] != usize::MAX && (0..bin.pool).all(|p| !has_room(class_of[pod], p)))
        });
        if openable {
            for (pool, r) in self.pools.iter_mut().zip(reserved) {
                if pool.remaining.is_some() {
                    pool.reserved = r;
                }
            }
        } else {
            self.spend.reserved = spend;
        }
        openable
    }

    /// What each pool's new claims that hold pods (those `counted` takes, by index) hold against
    /// its limits, each at its target: the type it is priced as, as the plan will count it.
    pub(super) fn held_at_targets(&self, counted: impl Fn(usize) -> bool) -> Vec<Resources> {
        let mut held = vec![Resources::default(); self.pools.len()];
        for (b, bin) in self.bins.iter().enumerate() {
            if bin.node.is_none() && !bin.pods.is_empty() && counted(b) {
                held[bin.pool].add(&self.pools[bin.pool].types[bin.target].capacity);
            }
        }
        held
    }

    /// Each pending pod's class (`usize::MAX` for a pod in none).
    pub(super) fn class_of(&self) -> Vec<usize> {
        let mut class_of = vec![usize::MAX; self.snap.pods.len()];
        for (c, class) in self.classes.iter().enumerate() {
            for &p in &class.pods {
                class_of[p] = c;
            }
        }
        class_of
    }

    /// Repacks the plan's repackable claims, those of limited pools only when `limited`.
    fn repack_pools(&mut self, limited: bool) {
        let class_of = self.class_of();
        // Each pod's home: the first pool, by weight, that runs it as it is, where it would open a
        // claim. A node of a pool holds at least one pod at home there, or the plan would have
        // opened it against the weights (a pod may only ride on another pool's node).
        let home_of: Vec<usize> = (0..self.classes.len())
            .map(|c| {
                (0..self.pools.len()).find(|&p| matches!(self.fit_cached(c, 0, p), Some(Ok(_)))).unwrap_or(usize::MAX)
            })
            .collect();
        let home: Vec<usize> =
            class_of.iter().map(|&c| if c == usize::MAX { usize::MAX } else { home_of[c] }).collect();
        let mut groups: HashMap<(usize, Requirements), Vec<usize>> = HashMap::default();
        for b in 0..self.bins.len() {
            if self.movable(b, &class_of, limited) {
                let bin = &self.bins[b];
                groups.entry((bin.pool, bin.reqs.clone())).or_default().push(b);
            }
        }
        let mut groups: Vec<((usize, Requirements), Vec<usize>)> = groups.into_iter().collect();
        // The same plan whatever the hash order.
        groups.sort_by_key(|(_, bins)| bins[0]);
        for ((pool, reqs), bins) in groups {
            if bins.len() <= MAX_GROUP {
                self.repack_group(pool, &reqs, bins, &home);
            }
        }
        let movable: Vec<usize> = (0..self.bins.len()).filter(|&b| self.movable(b, &class_of, limited)).collect();
        if movable.len() <= MAX_GROUP {
            self.ride(&movable, &class_of);
        }
    }

    /// Whether new claim `b` may be repacked: it holds pods, all of them without topology,
    /// affinity or host ports, in a pool without `minValues`, and without limits unless `limited`;
    /// and it was not opened in a capacity reservation.
    pub(super) fn movable(&self, b: usize, class_of: &[usize], limited: bool) -> bool {
        let bin = &self.bins[b];
        if bin.node.is_some() {
            return false;
        }
        let pool = &self.pools[bin.pool];
        // A claim the pass opened in a capacity reservation keeps it: its instance is paid for.
        !bin.pods.is_empty()
            && !self.in_reservation.contains_key(&b)
            && bin.ports.is_empty()
            && bin.counts.is_empty()
            && (limited || pool.remaining.is_none())
            && !pool.has_min_values
            && bin.pods.iter().all(|&p| class_of[p] != usize::MAX && self.generic[class_of[p]])
    }

    fn repack_group(&mut self, pool: usize, reqs: &Requirements, mut bins: Vec<usize>, home: &[usize]) {
        let priced = priced(self, pool, reqs);
        // Every type the claims may be, once, cheapest first (spot before on-demand, as priced).
        let mut types: Vec<usize> = priced.0.iter().chain(&priced.1).map(|c| c.0).collect();
        let mut seen = vec![false; self.pools[pool].types.len()];
        types.retain(|&t| !std::mem::replace(&mut seen[t], true));
        let shelf = Shelf::new(self, pool, &priced);
        let cost = |s: &Self, used: &Resources| shelf.price(s, pool, used);

        // First the pods themselves: all of the group's, largest first, first fit into nodes of
        // one type, for the type that costs least (each node then priced as the plan prices it,
        // so the last, emptier one may shrink). Taken when it beats the claims as they are.
        let pods: usize = bins.iter().map(|&b| self.bins[b].pods.len()).sum();
        if pods <= MAX_PODS {
            let mut all: Vec<usize> = bins.iter().flat_map(|&b| self.bins[b].pods.iter().copied()).collect();
            self.largest_first(&mut all);
            let now: Option<f64> = bins.iter().map(|&b| cost(self, &self.bins[b].used)).sum();
            let best = types
                .iter()
                .filter_map(|&t| self.pack_one_type(pool, &shelf, home, t, &all, bins.len()))
                .min_by(|a, b| a.0.total_cmp(&b.0));
            if let (Some(now), Some((total, nodes))) = (now, best) {
                if total < now - 1e-9 {
                    let mut nodes = nodes.into_iter();
                    for &b in &bins {
                        let (used, on) = nodes.next().unwrap_or_default();
                        let bin = &mut self.bins[b];
                        bin.pods = on;
                        bin.used = used;
                    }
                    bins.retain(|&b| !self.bins[b].pods.is_empty());
                    for &b in &bins {
                        self.retarget(pool, &priced, b);
                    }
                }
            }
        }

        // Then whole claims merged into one node, while that saves.
        loop {
            // Largest first, so each container takes the claims that are hardest to place.
            bins.sort_by(|&a, &b| {
                let (a, b) = (&self.bins[a].used, &self.bins[b].used);
                b.cpu.cmp(&a.cpu).then(b.memory.cmp(&a.memory))
            });
            let mut best: Option<(f64, Vec<usize>)> = None;
            for &t in &types {
                let free = &self.pools[pool].types[t].free;
                let mut used = Resources::default();
                let mut chosen = Vec::new();
                let mut before = 0.0;
                for &b in &bins {
                    let with = used.plus(&self.bins[b].used);
                    if with.fits(free) {
                        let Some(price) = cost(self, &self.bins[b].used) else { continue };
                        used = with;
                        before += price;
                        chosen.push(b);
                    }
                }
                if chosen.len() < 2 {
                    continue;
                }
                let Some(after) = cost(self, &used) else { continue };
                let saving = before - after;
                if saving > 1e-9 && best.as_ref().is_none_or(|(s, _)| saving > *s) {
                    best = Some((saving, chosen));
                }
            }
            let Some((_, chosen)) = best else { break };
            let (into, rest) = chosen.split_first().expect("at least two");
            for &b in rest {
                let pods = std::mem::take(&mut self.bins[b].pods);
                let used = std::mem::take(&mut self.bins[b].used);
                let bin = &mut self.bins[*into];
                bin.pods.extend(pods);
                bin.used = bin.used.plus(&used);
            }
            self.retarget(pool, &priced, *into);
            bins.retain(|b| !rest.contains(b));
        }

        self.mix(pool, reqs, &priced, &shelf, home, bins);
    }

    /// Sorts pods largest first (cpu, then memory, then pod slots): the order every packing here
    /// fills nodes in.
    pub(super) fn largest_first(&self, pods: &mut [usize]) {
        pods.sort_by(|&a, &b| {
            let (a, b) = (&self.snap.pods[a].requests, &self.snap.pods[b].requests);
            b.cpu.cmp(&a.cpu).then(b.memory.cmp(&a.memory)).then(b.pods.cmp(&a.pods))
        });
    }

    /// `pods` (largest first) first fit into at most `max_nodes` nodes of type `t`, and what
    /// those nodes cost as the plan prices them (so an emptier node may shrink to a cheaper
    /// type); `None` when they do not fit, or a node holds no pod at `home` in the pool.
    pub(super) fn pack_one_type(
        &self,
        pool: usize,
        shelf: &Shelf,
        home: &[usize],
        t: usize,
        pods: &[usize],
        max_nodes: usize,
    ) -> Option<(f64, Vec<Node>)> {
        let free = &self.pools[pool].types[t].free;
        let mut nodes: Vec<Node> = Vec::new();
        for &p in pods {
            let r = &self.snap.pods[p].requests;
            if let Some((used, on)) = nodes.iter_mut().find(|(used, _)| used.plus(r).fits(free)) {
                used.add(r);
                on.push(p);
            } else if r.fits(free) && nodes.len() < max_nodes {
                nodes.push((r.clone(), vec![p]));
            } else {
                return None;
            }
        }
        if !nodes.iter().all(|(_, on)| on.iter().any(|&p| home[p] == pool)) {
            return None;
        }
        let total = nodes.iter().map(|(used, _)| shelf.price(self, pool, used)).sum::<Option<f64>>()?;
        Some((total, nodes))
    }

    /// Points a repacked claim at the type the plan will price it as.
    pub(super) fn retarget(&mut self, pool: usize, priced: &PricedTypes, b: usize) {
        let used = &self.bins[b].used;
        let (_, target) = claim_price(self, pool, priced, used).expect("the repacked claim was priced");
        let free = self.pools[pool].types[target].free.minus(used);
        let bin = &mut self.bins[b];
        bin.target = target;
        bin.free = free;
    }
}

/// The types a claim of one group can be priced as, with their prices, in the plan's order (spot
/// first, then price): the plan takes the first type that holds a claim, so a type whose room an
/// earlier one covers is never taken and is left out. The first that holds a claim here is the
/// plan's choice, found without walking the pool's whole list.
pub(super) struct Shelf(Vec<(usize, f64)>);

impl Shelf {
    pub(super) fn new(s: &Scheduler<'_>, pool: usize, priced: &PricedTypes) -> Self {
        let types = &s.pools[pool].types;
        let mut kept: Vec<(usize, f64)> = Vec::new();
        for c in priced.0.iter().chain(&priced.1) {
            let free = &types[c.0].free;
            if !kept.iter().any(|&(u, _)| free.fits(&types[u].free)) {
                kept.push((c.0, c.2));
            }
        }
        Shelf(kept)
    }

    /// What the plan makes a claim holding `used` cost ([`claim_price`]'s price).
    pub(super) fn price(&self, s: &Scheduler<'_>, pool: usize, used: &Resources) -> Option<f64> {
        self.choose(s, pool, used).map(|(_, price)| price)
    }

    /// The type the plan launches a claim holding `used` as, and its price ([`claim_price`]).
    pub(super) fn choose(&self, s: &Scheduler<'_>, pool: usize, used: &Resources) -> Option<(usize, f64)> {
        let types = &s.pools[pool].types;
        self.0.iter().find(|&&(t, _)| used.fits(&types[t].free)).copied()
    }

    /// The types, cheapest first.
    pub(super) fn types(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().map(|&(t, _)| t)
    }
}
