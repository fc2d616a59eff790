//! Instance choice: the type a new claim is filled up to. Dovetail's picks the type that buys the
//! most value per dollar once filled with the pods still waiting; first-fit-decreasing's (the
//! baseline) the roomiest.

use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

use super::bound;
use super::pools::{OfferingFilter, PoolFit};
use super::Scheduler;
use crate::resources::Resources;

/// Candidate target types: (the unit-price frontier, the best buys by size beyond it).
pub(super) type TargetCandidates = (Vec<u32>, Vec<u32>);

impl<'a> Scheduler<'a> {
    /// First-fit-decreasing's bin: the roomiest type the pod may use (a Karpenter claim keeps
    /// accepting pods while its largest candidate still fits them).
    pub(super) fn largest_target(&self, c: usize, l: usize, p: usize, pins: &[(String, String)]) -> Option<usize> {
        let fit = self.fit_cached(c, l, p)?.as_ref().ok()?;
        let pins: Vec<(&str, &str)> = pins.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let pool = &self.pools[p];
        let allowed = [OfferingFilter::new(&fit.reqs)];
        fit.types
            .iter()
            .map(|&ti| ti as usize)
            .filter(|&ti| {
                let t = &pool.types[ti];
                let treqs = t.requirements(self.catalog);
                !pins.iter().any(|(k, v)| treqs.get(k).is_some_and(|r| !r.has(v)))
                    && t.best_offering_all(&allowed, &pins).is_some()
                    && pool.within_limits(&t.capacity, &self.spend).is_ok()
            })
            .max_by_key(|&ti| (pool.types[ti].free.cpu, pool.types[ti].free.memory))
    }

    /// How many more pods of class `c` (rung `l`) a claim opened for one of them must hold: the
    /// first pod of a group with hostname affinity to itself takes the whole group along (the
    /// pods still waiting), else none.
    pub(super) fn together(&self, c: usize, l: usize) -> i64 {
        let level = &self.classes[c].levels[l];
        let own_group = level.affinity.iter().any(|&(g, own)| {
            let g = &self.topo.groups[g as usize];
            g.hostname && own && g.total == 0
        });
        if own_group {
            (self.classes[c].pods.len() - self.next[c]) as i64
        } else {
            0
        }
    }

    /// Picks the type a new claim is filled up to: the one that buys the most value per dollar
    /// when filled with this pod and the compatible pods still waiting (each worth its share of the
    /// lower bound), the way `fill` will fill it.
    pub(super) fn choose_target(&mut self, c: usize, l: usize, p: usize, pins: &[(String, String)]) -> Option<usize> {
        let key = (c as u32, l as u16, p as u32);
        if !self.targets.contains_key(&key) {
            let fit = self.fit_cached(c, l, p)?.as_ref().ok()?;
            // First the types cheapest per unit of some mix of resources (what the lower bound
            // says an optimal plan would use), then the best buys by size (for pods too coarse for
            // those: see `best_buys`). Both at the prices of what is bought: a reservation with
            // instances left takes its claims before a target is chosen (`open_claim`), and
            // beyond its count it sells nothing.
            let frontier = bound::bought_frontier(self, p, fit).types.clone();
            let buys = fit.buys.get_or_init(|| best_buys(self, p, fit));
            let extra: Vec<u32> = buys.iter().copied().filter(|t| !frontier.contains(t)).collect();
            let types = (frontier, extra);
            // Classes that could ever share a claim this class opens in this pool.
            let joiners: Vec<u32> = (0..self.classes.len())
                .filter(|&o| matches!(self.fit_cached(o, 0, p), Some(Ok(f)) if fit.reqs.overlaps(&f.reqs)))
                .map(|o| o as u32)
                .collect();
            self.targets.insert(key, types);
            self.joiners.insert(key, joiners);
        }
        let pins: Vec<(&str, &str)> = pins.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let fit = self.fit_cached(c, l, p)?.as_ref().ok()?;
        let pool = &self.pools[p];
        let pod = &self.classes[c].rep(self.snap).requests;
        // Pods still waiting that could share this claim, merged by shape (requests and the
        // types they may use) so the simulation below stays short: (representative class, count,
        // average value). Pods with topology constraints count too: `fill` leaves them out, but
        // they join later, first fit.
        let mut shapes: Vec<(usize, i64, f64)> = Vec::new();
        let mut index: FxHashMap<u32, usize> = FxHashMap::default();
        for &o in &self.joiners[&key] {
            let o = o as usize;
            let left = (self.classes[o].pods.len() - self.next[o]) as i64;
            if left == 0 {
                continue;
            }
            let Some(Ok(f)) = self.fit_cached(o, 0, p) else { continue };
            if !pins.iter().all(|(k, v)| f.reqs.get(k).is_none_or(|r| r.has(v))) {
                continue;
            }
            let i = *index.entry(self.shape_of[o][p]).or_insert_with(|| {
                shapes.push((o, 0, 0.0));
                shapes.len() - 1
            });
            let value = self.values[o];
            let s = &mut shapes[i];
            s.2 = (s.2 * s.1 as f64 + value * left as f64) / (s.1 + left) as f64;
            s.1 += left;
        }
        let together = self.together(c, l);
        let mut scored: Vec<(f64, f64, usize, bool)> = Vec::new();
        let (frontier, extra) = &self.targets[&key];
        // Both lists are worked out without pins or limits: when those rule out all of them, the
        // other types that fit get their turn (a dominated type beats no node at all).
        let rest: Vec<u32> =
            fit.types.iter().copied().filter(|t| !frontier.contains(t) && !extra.contains(t)).collect();
        let allowed = [OfferingFilter::new(&fit.reqs)];
        for (round, candidates) in [frontier, extra, &rest].into_iter().enumerate() {
            if round == 2 && !scored.is_empty() {
                break;
            }
            // Frontier types that fill to within 30% of their worth are as good as it gets; only when
            // the pods are too coarse for them is it worth looking at other sizes.
            // (At the tail, where the waiting pods cannot fill any type, a frontier type is kept
            // and re-priced smaller at the end, which is cheaper than starting small.)
            let best = scored.iter().max_by(|a, b| a.0.total_cmp(&b.0));
            if round == 1 && best.is_some_and(|b| b.0 >= COARSE_PODS || !b.3) {
                break;
            }
            for &ti in candidates {
                let t = &pool.types[ti as usize];
                let treqs = t.requirements(self.catalog);
                if pins.iter().any(|(k, v)| treqs.get(k).is_some_and(|r| !r.has(v))) {
                    continue;
                }
                let Some(offer) = t.best_bought_offering(&allowed, &pins) else { continue };
                if pool.within_limits(&t.capacity, &self.spend).is_err() {
                    continue;
                }
                let mut room = t.free.minus(pod);
                let mut value = self.values[c];
                // The first pod of a group with hostname affinity to itself: the whole group has to
                // fit on this node.
                if together > 0 {
                    let group = (0..together).fold(Resources::default(), |acc, _| acc.plus(pod));
                    if !group.fits(&room) {
                        continue;
                    }
                    room.sub(&group);
                    value += self.values[c] * together as f64;
                }
                // Simulate the fill (see `fill`): repeatedly the class whose shape best matches the
                // room left, as many of it as fit.
                let mut left: Vec<(usize, i64)> = shapes
                    .iter()
                    .enumerate()
                    .filter(|(_, sh)| matches!(self.fit_cached(sh.0, 0, p), Some(Ok(f)) if f.has_type(ti as usize)))
                    .map(|(i, sh)| (i, sh.1))
                    .collect();
                let requests = |i: usize| &self.classes[shapes[i].0].rep(self.snap).requests;
                let mut pods_left_over = false;
                while let Some((i, _)) = best_shape(&left, &room, &t.free, requests) {
                    let (sh, n) = left[i];
                    let r = requests(sh);
                    let k = how_many(r, &room).min(n);
                    pods_left_over |= k < n;
                    room.cpu -= r.cpu * k;
                    room.memory -= r.memory * k;
                    room.pods -= r.pods * k;
                    room.ephemeral -= r.ephemeral * k;
                    value += shapes[sh].2 * k as f64;
                    left.swap_remove(i);
                }
                pods_left_over |= !left.is_empty();
                scored.push((value / offer.price.max(1e-12), offer.price, ti as usize, pods_left_over));
            }
        }
        // Every node costs more than its price says (a root volume, IP addresses, DaemonSets, one
        // more thing to drain), so among buys within 1% of the best value per dollar, the roomiest
        // wins. With no value at all (pods requesting nothing), the cheapest.
        let top = scored.iter().map(|s| s.0).fold(0.0, f64::max);
        if top <= 0.0 {
            return scored.iter().min_by(|a, b| a.1.total_cmp(&b.1)).map(|s| s.2);
        }
        scored
            .iter()
            .filter(|s| s.0 >= top * (1.0 - NODE_COUNT_TOLERANCE))
            .max_by_key(|s| (pool.types[s.2].free.cpu, pool.types[s.2].free.memory))
            .map(|s| s.2)
    }
}

/// The types worth trying as a new claim's target. A type that another beats on price (bought)
/// and room at once is never one (more room for less money always fills at least as well) — but unit
/// prices alone would be wrong: a type can be cheapest per vCPU and still hold one pod. To keep
/// the choice fast, the survivors are bucketed by size (powers of two of vCPUs) and each bucket
/// keeps its cheapest type and its cheapest per vCPU, per GiB and per pod slot.
fn best_buys(s: &Scheduler<'_>, p: usize, fit: &PoolFit) -> Vec<u32> {
    let pool = &s.pools[p];
    let allowed = [OfferingFilter::new(&fit.reqs)];
    let mut all: Vec<(f64, u32)> = fit
        .types
        .iter()
        .filter_map(|&ti| pool.types[ti as usize].best_bought_offering(&allowed, &[]).map(|o| (o.price, ti)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut kept: Vec<(f64, u32)> = Vec::new();
    // Only the roomiest of the kept types need checking: types come cheapest first, so one with
    // room for another kept type dominates whatever that one dominates.
    let mut roomiest: Vec<(f64, &Resources)> = Vec::new();
    for (price, ti) in all {
        let f = &pool.types[ti as usize].free;
        let dominated = roomiest.iter().any(|&(kp, k)| kp <= price && f.fits(k));
        if !dominated {
            roomiest.retain(|&(_, k)| !k.fits(f));
            roomiest.push((price, f));
            kept.push((price, ti));
        }
    }
    let mut buckets: BTreeMap<u32, [Option<(f64, u32)>; 4]> = BTreeMap::new();
    for (price, ti) in kept {
        let f = &pool.types[ti as usize].free;
        let bucket = (f.cpu.max(1000) / 1000).ilog2();
        let per = |x: i64| if x > 0 { price / x as f64 } else { f64::INFINITY };
        let scores = [price, per(f.cpu), per(f.memory), per(f.pods)];
        let best = buckets.entry(bucket).or_default();
        for (slot, score) in best.iter_mut().zip(scores) {
            if slot.is_none_or(|(s, _)| score < s) {
                *slot = Some((score, ti));
            }
        }
    }
    let mut out: Vec<u32> = buckets.values().flatten().flatten().map(|&(_, t)| t).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Value per dollar below which a frontier type is considered badly filled (coarse pods).
const COARSE_PODS: f64 = 0.7;

/// How much value per dollar a larger target may give up for fewer nodes.
const NODE_COUNT_TOLERANCE: f64 = 0.01;

/// How many pods with requests `r` fit in `room`.
fn how_many(r: &Resources, room: &Resources) -> i64 {
    let fits = |need: i64, have: i64| if need > 0 { (have / need).max(0) } else { i64::MAX };
    if !r.extended.is_empty() {
        return 0;
    }
    fits(r.cpu, room.cpu)
        .min(fits(r.memory, room.memory))
        .min(fits(r.pods, room.pods))
        .min(fits(r.ephemeral, room.ephemeral))
}

/// Among `(class, count)` candidates, the one that fits `room` and whose requests point most
/// in the direction of the room left (dot product, both relative to the type's `size`).
pub(super) fn best_shape<'a>(
    candidates: &[(usize, i64)],
    room: &Resources,
    size: &Resources,
    requests: impl Fn(usize) -> &'a Resources,
) -> Option<(usize, f64)> {
    let rel = |x: i64, of: i64| if of > 0 { x as f64 / of as f64 } else { 0.0 };
    let (rc, rm, rp) = (rel(room.cpu, size.cpu), rel(room.memory, size.memory), rel(room.pods, size.pods));
    let mut best: Option<(usize, f64)> = None;
    for (i, &(o, _)) in candidates.iter().enumerate() {
        let r = requests(o);
        if how_many(r, room) == 0 {
            continue;
        }
        let score = rel(r.cpu, size.cpu) * rc + rel(r.memory, size.memory) * rm + rel(r.pods, size.pods) * rp;
        if best.is_none_or(|(_, s)| score > s) {
            best = Some((i, score));
        }
    }
    best
}
