//! Mixed repacking: the last step of repacking (`repack.rs`), a bounded local search that packs
//! the pods of a few claims of one group afresh over a mix of the pool's types.
//!
//! Packing a group into nodes of one type, or merging whole claims, misses the plans whose nodes
//! differ: four 2-vCPU pods fill an 8-vCPU node exactly, and the three 4 GiB pods left over go
//! on two small memory nodes for less than a second large node costs (`tests/exact_optimum.rs`
//! finds such cases), and so do the plans where one claim's pods cost less on several smaller
//! nodes. So for a set of claims — the whole group when it is small (one claim, say), and pairs
//! of claims (whose packing may split one) — the search tries each type as the first node,
//! filled largest pod first, with the rest packed into nodes of the one type that costs least (in
//! a whole group of at most [`MAX_DEEP_PODS`] pods, each type as the second node too); the set is
//! replaced when that is cheaper than it is, priced as the plan prices a claim. Rounds repeat
//! while one saves.
//!
//! The work is bounded: only the types the plan could ever price a claim as (the group's
//! `Shelf`), at most [`MAX_TYPES`] of them; the pairs of a large group are each claim with its
//! [`WINDOW`] neighbours by size and with the emptiest claims; at most [`MAX_ROUNDS`] rounds, each
//! after the first over the sets the last one changed; sets of at most [`MAX_SET_PODS`] pods. So a
//! group of n claims costs O(n · types² · pods of a pair) per round, and a small group
//! O(types³ · its pods).

use super::finalize::PricedTypes;
use super::repack::{Node, Shelf};
use super::Scheduler;
use crate::requirements::Requirements;
use crate::resources::Resources;

/// The most types a set is packed over (the cheapest the plan could price a claim as).
const MAX_TYPES: usize = 8;
/// Groups of at most this many claims try every pair; larger ones a window of neighbours.
const ALL_PAIRS: usize = 6;
/// Each claim of a large group is paired with this many next claims by size, and with this
/// many of the emptiest.
const WINDOW: usize = 2;
/// The whole group, when it holds at most this many pods, tries two first nodes of any types
/// before the rest of one type.
const MAX_DEEP_PODS: usize = 16;
/// The most rounds over a group's sets.
const MAX_ROUNDS: usize = 4;
/// The most pods a set holds (the whole group is a set when it holds no more).
const MAX_SET_PODS: usize = 32;

impl Scheduler<'_> {
    /// Replaces sets of the group's claims (`bins`, all of `pool` under `reqs`) by cheaper mixed
    /// packings while the search finds them; `home` is each pod's home pool (see `repack`).
    pub(super) fn mix(
        &mut self,
        pool: usize,
        reqs: &Requirements,
        priced: &PricedTypes,
        shelf: &Shelf,
        home: &[usize],
        mut bins: Vec<usize>,
    ) {
        let useful: Vec<usize> = shelf.types().take(MAX_TYPES).collect();
        let cost = |s: &Self, used: &Resources| shelf.price(s, pool, used);
        // The claims a round changed: the next round looks only at sets holding one of them (the
        // others were looked at already and found no saving). All of them at first.
        let mut changed: Vec<bool> = vec![false; self.bins.len()];
        for &b in &bins {
            changed[b] = true;
        }
        for _ in 0..MAX_ROUNDS {
            bins.retain(|&b| !self.bins[b].pods.is_empty());
            if bins.is_empty() {
                break;
            }
            bins.sort_by(|&a, &b| {
                let (a, b) = (&self.bins[a].used, &self.bins[b].used);
                b.cpu.cmp(&a.cpu).then(b.memory.cmp(&a.memory))
            });
            let pods: usize = bins.iter().map(|&b| self.bins[b].pods.len()).sum();
            // Each set with the levels of its search.
            let mut sets: Vec<(Vec<usize>, usize)> = Vec::new();
            if pods <= MAX_SET_PODS {
                sets.push((bins.clone(), if pods <= MAX_DEEP_PODS { 2 } else { 1 }));
            }
            let n = bins.len();
            for i in 0..n {
                for j in i + 1..n {
                    let near = j <= i + WINDOW || j + WINDOW >= n;
                    if n <= ALL_PAIRS || near {
                        sets.push((vec![bins[i], bins[j]], 1));
                    }
                }
            }
            sets.retain(|(set, _)| set.iter().any(|&b| changed[b]));
            changed = vec![false; self.bins.len()];
            let mut saved = false;
            for (set, levels) in sets {
                // An earlier set of this round may have emptied one of these claims.
                if set.iter().any(|&b| self.bins[b].pods.is_empty()) {
                    continue;
                }
                let mut pods: Vec<usize> = set.iter().flat_map(|&b| self.bins[b].pods.iter().copied()).collect();
                if pods.len() > MAX_SET_PODS {
                    continue;
                }
                self.largest_first(&mut pods);
                let Some(now) = set.iter().map(|&b| cost(self, &self.bins[b].used)).sum::<Option<f64>>() else {
                    continue;
                };
                let Some((total, nodes)) = self.pack_mixed(pool, shelf, home, &useful, &pods, levels) else { continue };
                if total < now - 1e-9 {
                    let added = self.replace(pool, reqs, priced, &set, nodes);
                    changed.resize(self.bins.len(), false);
                    for &b in set.iter().chain(&added) {
                        changed[b] = true;
                    }
                    bins.extend(added);
                    saved = true;
                }
            }
            if !saved {
                break;
            }
        }
    }

    /// The cheapest packing of `pods` (largest first) the search finds: into nodes of one type,
    /// or a first node of any type filled largest first and the rest packed the same way with
    /// one level fewer (at the last level, into nodes of one type).
    fn pack_mixed(
        &self,
        pool: usize,
        shelf: &Shelf,
        home: &[usize],
        types: &[usize],
        pods: &[usize],
        levels: usize,
    ) -> Option<(f64, Vec<Node>)> {
        let one_type = |pods: &[usize]| {
            types
                .iter()
                .filter_map(|&t| self.pack_one_type(pool, shelf, home, t, pods, usize::MAX))
                .min_by(|a, b| a.0.total_cmp(&b.0))
        };
        let mut best = one_type(pods);
        // Types of much the same shape fill the first node alike: each fill is tried once.
        let mut tried: Vec<Vec<usize>> = Vec::new();
        for &t in types {
            let free = &self.pools[pool].types[t].free;
            let mut first: Node = (Resources::default(), Vec::new());
            let mut rest = Vec::new();
            for &p in pods {
                let with = first.0.plus(&self.snap.pods[p].requests);
                if with.fits(free) {
                    first.0 = with;
                    first.1.push(p);
                } else {
                    rest.push(p);
                }
            }
            // Every node holds a pod at home in the pool (see `repack`).
            let opened = first.1.iter().any(|&p| home[p] == pool);
            if !opened || rest.is_empty() || tried.contains(&first.1) {
                continue;
            }
            tried.push(first.1.clone());
            let Some(price) = shelf.price(self, pool, &first.0) else { continue };
            // The rest costs something: a first node dearer than the best packing cannot win.
            if best.as_ref().is_some_and(|(b, _)| price >= *b) {
                continue;
            }
            let packed =
                if levels > 1 { self.pack_mixed(pool, shelf, home, types, &rest, levels - 1) } else { one_type(&rest) };
            let Some((more, mut nodes)) = packed else { continue };
            if best.as_ref().is_none_or(|(b, _)| price + more < *b - 1e-9) {
                nodes.insert(0, first);
                best = Some((price + more, nodes));
            }
        }
        best
    }

    /// Puts `nodes` on the claims of `set` (emptying those left over) and on new claims of the
    /// group when there are more nodes than claims; returns the new claims.
    fn replace(
        &mut self,
        pool: usize,
        reqs: &Requirements,
        priced: &PricedTypes,
        set: &[usize],
        nodes: Vec<Node>,
    ) -> Vec<usize> {
        let mut added = Vec::new();
        let template = set[0];
        let mut nodes = nodes.into_iter();
        for &b in set {
            let (used, on) = nodes.next().unwrap_or_default();
            let bin = &mut self.bins[b];
            bin.pods = on;
            bin.used = used;
            if !bin.pods.is_empty() {
                self.retarget(pool, priced, b);
            }
        }
        for (used, on) in nodes {
            let offers = self.bins[template].offers.clone();
            let target = self.bins[template].target;
            self.bins.push(super::bins::Bin {
                node: None,
                pool,
                target,
                reqs: reqs.clone(),
                free: Resources::default(),
                used,
                pods: on,
                ports: vec![],
                counts: vec![],
                offers,
            });
            let b = self.bins.len() - 1;
            self.retarget(pool, priced, b);
            // A new claim holds its type against the pool as one the pass opens does.
            let capacity = self.pools[pool].types[self.bins[b].target].capacity.clone();
            self.reserve(pool, &capacity);
            added.push(b);
        }
        added
    }
}
