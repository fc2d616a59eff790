//! The provisioning scheduler: places pending pods on existing capacity first, then on as few
//! dollars of new NodeClaims as it can.
//!
//! Shape of the algorithm (first-fit-decreasing, with three changes that make it cheaper and
//! faster than Karpenter's):
//! - pods with identical constraints form a *class*; compatibility, candidate types and topology
//!   domains are worked out once per class, and a per-class cursor skips bins that can never take
//!   that class again (bins only fill up, so a rejection is final) — near-linear time;
//! - a new claim is filled up to a *target* instance type: the one that buys the pool's remaining
//!   demand most cheaply (price × nodes needed), instead of growing until only the largest types
//!   fit; at the end each claim is re-priced to the cheapest type that holds its pods;
//! - preferences are relaxed per pod in Karpenter's order only when a pod cannot otherwise go.

mod bound;
mod classes;
mod finalize;
mod plan;
mod pools;
mod topology;

pub use plan::{ExistingPlacement, Plan, PlannedClaim, Unschedulable};
pub use pools::TypeCache;

use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

use classes::{taints_block, Class, Level};
use pools::{PoolType, PreparedPool};
use topology::{bin_count, Topology};

use crate::catalog::Catalog;
use crate::labels;
use crate::model::{HostPort, TaintEffect};
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;
use crate::snapshot::Snapshot;

/// Computes the plan for a snapshot.
pub fn schedule(snap: &Snapshot, catalog: &Catalog) -> Plan {
    schedule_with(snap, catalog, Strategy::LowestCost)
}

/// How new claims are packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Dovetail's: target types chosen for value per dollar, claims filled by shape.
    LowestCost,
    /// Karpenter's first-fit-decreasing: a new claim keeps every type that still fits and grows
    /// until only the largest would; pods go to the first claim with room. Kept as the baseline the
    /// benchmarks compare against.
    FirstFitDecreasing,
}

/// Computes the plan with a given packing strategy (constraints are honoured the same way).
pub fn schedule_with(snap: &Snapshot, catalog: &Catalog, strategy: Strategy) -> Plan {
    plan_with(snap, catalog, strategy, None)
}

/// Computes the plan reusing the pools' instance types from `cache`. Only for snapshots with the
/// same NodePools, EC2NodeClasses, DaemonSets and unavailable offerings as the first one planned
/// with that cache (pool usage and limits may differ): consolidation's many small simulations.
pub fn schedule_cached(snap: &Snapshot, catalog: &Catalog, cache: &TypeCache) -> Plan {
    plan_with(snap, catalog, Strategy::LowestCost, Some(cache))
}

fn plan_with<'a>(snap: &'a Snapshot, catalog: &'a Catalog, strategy: Strategy, cache: Option<&'a TypeCache>) -> Plan {
    let mut s = Scheduler::new(snap, catalog, cache);
    s.strategy = strategy;
    s.run();
    let mut plan = finalize::plan(&s);
    plan.lower_bound_per_hour = bound::lower_bound(&s, &plan);
    plan
}

/// Capacity pods can be placed on: an existing node, an in-flight claim, or a claim this pass opens.
#[derive(Debug)]
pub(crate) struct Bin {
    /// Index into `snap.nodes` for existing capacity.
    pub node: Option<usize>,
    /// Prepared pool and its target type for new claims.
    pub pool: usize,
    pub target: usize,
    /// New claims: pool requirements ∩ the requirements of every pod on it ∩ topology pins.
    pub reqs: Requirements,
    pub free: Resources,
    pub used: Resources,
    /// Indices into `snap.pods`.
    pub pods: Vec<usize>,
    pub ports: Vec<HostPort>,
    /// Counts of hostname-keyed topology groups.
    pub counts: Vec<(u32, u32)>,
    /// New claims: the target type's offerings (indices) that `reqs` still allows.
    pub offers: Vec<u8>,
}

/// Candidate target types: (the unit-price frontier, the best buys by size beyond it).
type TargetCandidates = (Vec<u32>, Vec<u32>);

/// A pool fit, or why the pool cannot take the class at that level.
pub(crate) type FitResult = Result<PoolFit, String>;

/// Per (class, level, pool): the pool's requirements narrowed by the pod's and the types that fit.
#[derive(Debug, Clone)]
pub(crate) struct PoolFit {
    pub reqs: Requirements,
    /// Indices into the pool's prepared types, ascending.
    pub types: Vec<u32>,
}

impl PoolFit {
    pub fn has_type(&self, t: usize) -> bool {
        self.types.binary_search(&(t as u32)).is_ok()
    }
}

pub(crate) struct Scheduler<'a> {
    pub snap: &'a Snapshot,
    pub catalog: &'a Catalog,
    pub pools: Vec<PreparedPool<'a>>,
    pub classes: Vec<Class>,
    pub topo: Topology,
    pub bins: Vec<Bin>,
    /// Lazily computed pool fits, indexed [class][level][pool].
    fits: Vec<Vec<Vec<Option<FitResult>>>>,
    /// Per (class, level, domain choice): bins before this index never take that class again.
    cursors: FxHashMap<(u32, u16, u128), usize>,
    pub unschedulable: Vec<(usize, String)>,
    /// Per class: what one pod is worth in $/h (its share of the lower bound), pods not yet
    /// placed, and whether it has no topology or host-port constraints (so it can fill any claim
    /// whose requirements and taints it is compatible with).
    values: Vec<f64>,
    /// Per class: index of the next pod to place (pods of a class are interchangeable).
    next: Vec<usize>,
    generic: Vec<bool>,
    /// Candidate target types per (class, level, pool): the unit-price frontier, and the best buys
    /// by size beyond it (see `best_buys`).
    targets: FxHashMap<(u32, u16, u32), TargetCandidates>,
    /// Per (class, level, pool): the classes whose pods could share a claim it opens there.
    joiners: FxHashMap<(u32, u16, u32), Vec<u32>>,
    /// Per [class][pool]: an id shared by classes with the same requests and pool fit.
    shape_of: Vec<Vec<u32>>,
    /// Spread counts restricted to nodes a class could use: (group, counts per domain), and the
    /// (class, rung) each belongs to.
    private_counts: Vec<(u32, FxHashMap<String, u32>)>,
    private_owner: Vec<(usize, usize)>,
    strategy: Strategy,
    /// Pool types and fits shared across passes (consolidation's simulations).
    cache: Option<&'a TypeCache>,
}

impl<'a> Scheduler<'a> {
    fn new(snap: &'a Snapshot, catalog: &'a Catalog, cache: Option<&'a TypeCache>) -> Self {
        let kubelets = |name: &str| snap.nodeclasses.iter().find(|c| c.name == name).map(|c| c.kubelet.clone());
        let pools = pools::prepare(&snap.nodepools, kubelets, &snap.daemonsets, catalog, &snap.unavailable, cache);
        let prefer_taints_exist = snap
            .nodepools
            .iter()
            .flat_map(|p| p.taints.iter())
            .chain(snap.nodes.iter().flat_map(|n| n.taints.iter()))
            .any(|t| t.effect == TaintEffect::PreferNoSchedule);

        let mut topo = Topology::default();
        let mut classes: Vec<Class> = classes::group(snap)
            .into_iter()
            .map(|pods| {
                let levels = classes::ladder(&snap.pods[pods[0]], &mut topo, prefer_taints_exist);
                Class { pods, levels, effects: vec![], repelled: vec![] }
            })
            .collect();
        // Existing pods' required anti-affinity repels pending pods too.
        for n in &snap.nodes {
            for p in &n.pods {
                for t in &p.pod_anti_affinity {
                    topo.owner_group(t, &p.namespace);
                }
            }
        }
        for c in &mut classes {
            classes::finish(c, snap, &topo);
        }
        // Largest first (cpu, then memory), the FFD order; ties keep first-seen order.
        classes.sort_by(|a, b| {
            let (ra, rb) = (&snap.pods[a.pods[0]].requests, &snap.pods[b.pods[0]].requests);
            rb.cpu.cmp(&ra.cpu).then(rb.memory.cmp(&ra.memory))
        });

        let fits = classes.iter().map(|c| c.levels.iter().map(|_| vec![None; pools.len()]).collect()).collect();
        let mut s = Scheduler {
            snap,
            catalog,
            pools,
            classes,
            topo,
            bins: vec![],
            fits,
            cursors: FxHashMap::default(),
            unschedulable: vec![],
            values: vec![],
            next: vec![],
            generic: vec![],
            targets: FxHashMap::default(),
            joiners: FxHashMap::default(),
            shape_of: vec![],
            private_counts: vec![],
            private_owner: vec![],
            strategy: Strategy::LowestCost,
            cache,
        };
        s.fill_universes();
        s.add_existing();
        s.setup_private_counts();
        // Every class's fit with every pool at its first rung: the pod values below need them.
        for c in 0..s.classes.len() {
            for p in 0..s.pools.len() {
                let _ = s.fit(c, 0, p);
            }
        }
        let mut shape_ids: FxHashMap<(&crate::resources::Resources, &Requirements, &[u32]), u32> = FxHashMap::default();
        let mut shape_of = vec![vec![u32::MAX; s.pools.len()]; s.classes.len()];
        for (c, row) in shape_of.iter_mut().enumerate() {
            for (p, id) in row.iter_mut().enumerate() {
                if let Some(Ok(f)) = &s.fits[c][0][p] {
                    let key = (&s.snap.pods[s.classes[c].pods[0]].requests, &f.reqs, f.types.as_slice());
                    let next = shape_ids.len() as u32;
                    *id = *shape_ids.entry(key).or_insert(next);
                }
            }
        }
        drop(shape_ids);
        s.shape_of = shape_of;
        let counts: Vec<(usize, f64)> = s.classes.iter().enumerate().map(|(c, k)| (c, k.pods.len() as f64)).collect();
        s.values = bound::dual(&s, &counts).values;
        s.next = vec![0; s.classes.len()];
        s.generic = s
            .classes
            .iter()
            .map(|k| {
                // Node requirements and tolerations are fine: joining a claim checks them. Topology
                // and host ports depend on where others land, so such pods only go the long way.
                let l = &k.levels[0];
                l.spreads.is_empty()
                    && l.affinity.is_empty()
                    && l.anti.is_empty()
                    && k.repelled.is_empty()
                    && k.rep(snap).host_ports.is_empty()
            })
            .collect();
        s
    }

    /// First-fit-decreasing's bin: the roomiest type the pod may use (a Karpenter claim keeps
    /// accepting pods while its largest candidate still fits them).
    fn largest_target(&self, c: usize, l: usize, p: usize, pins: &[(String, String)]) -> Option<usize> {
        let fit = self.fit_cached(c, l, p)?.as_ref().ok()?;
        let pins: Vec<(&str, &str)> = pins.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let pool = &self.pools[p];
        fit.types
            .iter()
            .map(|&ti| ti as usize)
            .filter(|&ti| {
                let t = &pool.types[ti];
                let treqs = &self.catalog.types[t.catalog].requirements;
                !pins.iter().any(|(k, v)| treqs.get(k).is_some_and(|r| !r.has(v)))
                    && t.best_offering_all(&[&fit.reqs], &pins).is_some()
                    && pool.within_limits(&t.capacity).is_ok()
            })
            .max_by_key(|&ti| (pool.types[ti].free.cpu, pool.types[ti].free.memory))
    }

    /// Picks the type a new claim is filled up to: the one that buys the most value per dollar
    /// when filled with this pod and the compatible pods still waiting (each worth its share of the
    /// lower bound), the way `fill` will fill it.
    fn choose_target(&mut self, c: usize, l: usize, p: usize, pins: &[(String, String)]) -> Option<usize> {
        let key = (c as u32, l as u16, p as u32);
        if !self.targets.contains_key(&key) {
            let fit = self.fit_cached(c, l, p)?.as_ref().ok()?;
            // First the types cheapest per unit of some mix of resources (what the lower bound
            // says an optimal plan would use), then the best buys by size (for pods too coarse for
            // those: see `best_buys`).
            let frontier = bound::frontier(self, p, fit).types;
            let extra: Vec<u32> = best_buys(self, p, fit).into_iter().filter(|t| !frontier.contains(t)).collect();
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
        let level = &self.classes[c].levels[l];
        let together = if level.affinity.iter().any(|&(g, own)| {
            let g = &self.topo.groups[g as usize];
            g.hostname && own && g.total == 0
        }) {
            (self.classes[c].pods.len() - self.next[c]) as i64
        } else {
            0
        };
        let mut scored: Vec<(f64, f64, usize, bool)> = Vec::new();
        let (frontier, extra) = &self.targets[&key];
        // Both lists are worked out without pins or limits: when those rule out all of them, the
        // other types that fit get their turn (a dominated type beats no node at all).
        let rest: Vec<u32> =
            fit.types.iter().copied().filter(|t| !frontier.contains(t) && !extra.contains(t)).collect();
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
                let treqs = &self.catalog.types[t.catalog].requirements;
                if pins.iter().any(|(k, v)| treqs.get(k).is_some_and(|r| !r.has(v))) {
                    continue;
                }
                let Some(offer) = t.best_offering_all(&[&fit.reqs], &pins) else { continue };
                if pool.within_limits(&t.capacity).is_err() {
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

    /// Existing nodes and in-flight claims become the first bins, their pods counted.
    fn add_existing(&mut self) {
        for (i, n) in self.snap.nodes.iter().enumerate() {
            let used = n.requested();
            let mut bin = Bin {
                node: Some(i),
                pool: usize::MAX,
                target: usize::MAX,
                reqs: Requirements::new(),
                free: n.allocatable.minus(&used),
                used,
                pods: vec![],
                ports: n.pods.iter().flat_map(|p| p.host_ports.iter().cloned()).collect(),
                counts: vec![],
                offers: vec![],
            };
            let b = self.bins.len();
            for p in &n.pods {
                for g in self.topo.effects_of(p, &self.snap.namespaces) {
                    let key = self.topo.groups[g as usize].key.topology_key.clone();
                    self.topo.record(g, n.labels.get(&key).map(String::as_str), b, &mut bin.counts);
                }
            }
            self.bins.push(bin);
        }
    }

    fn run(&mut self) {
        for c in 0..self.classes.len() {
            while self.next[c] < self.classes[c].pods.len() {
                let pod = self.classes[c].pods[self.next[c]];
                self.next[c] += 1;
                match self.place(c, pod) {
                    Ok(Some((b, l))) if self.strategy == Strategy::LowestCost => {
                        // A pod placed with preferences relaxed says nothing about its siblings:
                        // they try their preferences again on their own.
                        // (Unconstrained siblings are left to `fill`, which mixes shapes.)
                        if l == 0 && !self.generic[c] {
                            self.fill_class(b, c, l);
                        }
                        self.fill(b);
                    }
                    Ok(_) => {}
                    Err(reason) => self.unschedulable.push((pod, reason)),
                }
            }
        }
    }

    /// Fills a claim just opened with the unconstrained pods still waiting: each time the class
    /// whose shape best matches the room left (largest dot product of its requests and the free
    /// capacity, both relative to the type), so cpu-heavy and memory-heavy pods share nodes
    /// instead of one resource running out while the other idles. This is the packing the
    /// target type was chosen for (see `choose_target`).
    fn fill(&mut self, b: usize) {
        let (p, t) = (self.bins[b].pool, self.bins[b].target);
        let mut candidates: Vec<(usize, i64)> = (0..self.classes.len())
            .filter(|&o| self.generic[o])
            .filter(|&o| matches!(self.fit_cached(o, 0, p), Some(Ok(f)) if f.has_type(t)))
            .map(|o| (o, (self.classes[o].pods.len() - self.next[o]) as i64))
            .filter(|&(_, n)| n > 0)
            .collect();
        let size = self.pools[p].types[t].free.clone();
        loop {
            let room = self.bins[b].free.clone();
            let Some((i, _)) = best_shape(&candidates, &room, &size, |o| &self.classes[o].rep(self.snap).requests)
            else {
                break;
            };
            let o = candidates[i].0;
            let placed = self
                .domain_choices(o, 0)
                .ok()
                .and_then(|choices| choices.into_iter().find(|ch| self.accepts(b, o, 0, ch)));
            match placed {
                Some(choice) if self.next[o] < self.classes[o].pods.len() => {
                    let pod = self.classes[o].pods[self.next[o]];
                    self.next[o] += 1;
                    self.commit(b, o, 0, &choice, pod);
                    candidates[i].1 -= 1;
                    if candidates[i].1 == 0 {
                        candidates.swap_remove(i);
                    }
                }
                // Fits by resources but not otherwise (a zone pin, a port): not for this claim.
                _ => {
                    candidates.swap_remove(i);
                }
            }
        }
    }

    /// Puts the pods of the class that opened a claim into it while they fit: the claim's target
    /// was chosen with them in mind (and a group with hostname affinity must stay together).
    fn fill_class(&mut self, b: usize, c: usize, l: usize) {
        while self.next[c] < self.classes[c].pods.len() {
            let Ok(choices) = self.domain_choices(c, l) else { break };
            let Some(choice) = choices.into_iter().find(|ch| self.accepts(b, c, l, ch)) else { break };
            let pod = self.classes[c].pods[self.next[c]];
            self.next[c] += 1;
            self.commit(b, c, l, &choice, pod);
        }
    }

    /// Places one pod, relaxing preferences rung by rung; `Some((bin, rung))` when it opened a new
    /// claim.
    fn place(&mut self, c: usize, pod: usize) -> Result<Option<(usize, usize)>, String> {
        let mut last_reason = String::new();
        for l in 0..self.classes[c].levels.len() {
            let choices = match self.domain_choices(c, l) {
                Ok(ch) => ch,
                Err(e) => {
                    // No topology domain at all usually means no pool can take the pod: say why.
                    last_reason = self.no_pool_fits(c, l).unwrap_or(e);
                    continue;
                }
            };
            for choice in &choices {
                if let Some(b) = self.find_bin(c, l, choice) {
                    self.commit(b, c, l, choice, pod);
                    return Ok(None);
                }
            }
            match self.open_claim(c, l, &choices) {
                Ok((b, choice)) => {
                    self.commit(b, c, l, &choice, pod);
                    return Ok(Some((b, l)));
                }
                Err(e) => last_reason = e,
            }
        }
        Err(last_reason)
    }

    /// Why no pool can take a class at a level, if none can (`None` when some pool can).
    fn no_pool_fits(&mut self, c: usize, l: usize) -> Option<String> {
        if self.pools.is_empty() {
            return Some("no NodePool exists".to_string());
        }
        let mut reasons = Vec::new();
        for p in 0..self.pools.len() {
            let name = self.pools[p].pool.name.clone();
            match self.fit(c, l, p) {
                Ok(_) => return None,
                Err(e) => reasons.push(format!("NodePool {name:?}: {e}")),
            }
        }
        Some(reasons.join("; "))
    }

    /// Lazily computed compatibility of a class level with a pool.
    pub(crate) fn fit(&mut self, c: usize, l: usize, p: usize) -> Result<&PoolFit, &str> {
        if self.fits[c][l][p].is_none() {
            let r = match self.cache {
                Some(cache) => {
                    let pod = self.classes[c].rep(self.snap);
                    let level = &self.classes[c].levels[l];
                    let key = (
                        self.pools[p].pool.name.clone(),
                        level.reqs.clone(),
                        pod.requests.clone(),
                        pod.tolerations.clone(),
                        pod.host_ports.clone(),
                        level.strict_prefer,
                        pod.node_affinity.is_empty(),
                    );
                    let known = cache.fits.borrow().get(&key).cloned();
                    match known {
                        Some(r) => r,
                        None => {
                            let r = self.compute_fit(c, l, p);
                            cache.fits.borrow_mut().insert(key, r.clone());
                            r
                        }
                    }
                }
                None => self.compute_fit(c, l, p),
            };
            self.fits[c][l][p] = Some(r);
        }
        match self.fits[c][l][p].as_ref().unwrap() {
            Ok(f) => Ok(f),
            Err(e) => Err(e.as_str()),
        }
    }

    /// A pool fit if it was computed during the pass.
    pub(crate) fn fit_cached(&self, c: usize, l: usize, p: usize) -> Option<&FitResult> {
        self.fits[c][l][p].as_ref()
    }

    fn compute_fit(&self, c: usize, l: usize, p: usize) -> FitResult {
        let pool = &self.pools[p];
        let pod = self.classes[c].rep(self.snap);
        let level = &self.classes[c].levels[l];
        if let Some(why) = &pool.broken {
            return Err(why.clone());
        }
        if pod.node_affinity.is_empty() {
            // Every required node-affinity term was empty, and an empty term matches no node.
            return Err("its required node affinity has no term that can match a node".to_string());
        }
        if let Some(t) = taints_block(pod, &pool.pool.taints, level.strict_prefer) {
            return Err(format!("taint {t} is not tolerated"));
        }
        pool.requirements.compatible(&level.reqs).map_err(|e| format!("requirement {e}"))?;
        let reqs = pool.requirements.intersection(&level.reqs);
        let mut matched = 0usize;
        let mut offered = 0usize;
        let mut types = Vec::new();
        let mut largest: Option<&PoolType> = None;
        let mut port_clash = false;
        for (i, t) in pool.types.iter().enumerate() {
            if !self.catalog.types[t.catalog].requirements.overlaps(&reqs) {
                continue;
            }
            matched += 1;
            if !t.has_offering(&reqs) {
                continue;
            }
            offered += 1;
            if !t.ports_free(&pod.host_ports) {
                port_clash = true;
                continue;
            }
            if pod.requests.fits(&t.free) {
                types.push(i as u32);
            } else if largest.is_none_or(|l| t.free.cpu > l.free.cpu) {
                largest = Some(t);
            }
        }
        if types.is_empty() {
            return Err(if matched == 0 {
                format!("no instance type matches {reqs}")
            } else if offered == 0 {
                format!("no available offering of the {matched} matching instance types in the allowed zones and capacity types")
            } else if port_clash && largest.is_none() {
                "its host ports are held by DaemonSet pods on every matching instance type".to_string()
            } else {
                let biggest = largest.map(|t| {
                    let name = &self.catalog.types[t.catalog].name;
                    let r = pod.requests.exceeds(&t.free).unwrap_or("resources");
                    format!(
                        " ({r} is the limit: the roomiest, {name}, has {} free after DaemonSets)",
                        pools::fmt_resource(r, t.free.get(r))
                    )
                });
                format!(
                    "no instance type has room for requests {}{}",
                    describe_requests(&pod.requests),
                    biggest.unwrap_or_default()
                )
            });
        }
        // minValues: the types that can take the pod must keep enough distinct values, or no
        // claim for it can (Karpenter leaves such a pod pending).
        for m in pool.pool.requirements.iter().filter(|r| r.min_values.is_some()) {
            let want = m.min_values.unwrap_or(0);
            let mut values: Vec<&str> = types
                .iter()
                .filter_map(|&i| self.catalog.types[pool.types[i as usize].catalog].requirements.get(&m.key))
                .filter_map(|r| r.single_value())
                .filter(|v| reqs.get(&m.key).is_none_or(|r| r.has(v)))
                .collect();
            values.sort_unstable();
            values.dedup();
            if values.len() < want {
                return Err(format!(
                    "requirement {} has minValues {want}, but the instance types that fit offer {} value(s)",
                    m.key,
                    values.len()
                ));
            }
        }
        Ok(PoolFit { reqs, types })
    }

    /// Works out, once per distinct (key, policies, requirements, tolerations), the domain values
    /// each class level can take on its domain keys and the domains each spread counts.
    fn fill_universes(&mut self) {
        type Key = (String, bool, bool, Requirements, Vec<crate::model::Toleration>);
        let mut cache: FxHashMap<Key, Vec<String>> = FxHashMap::default();
        for c in 0..self.classes.len() {
            let pod = self.classes[c].rep(self.snap);
            for l in 0..self.classes[c].levels.len() {
                let level = &self.classes[c].levels[l];
                let mut get = |key: &str, ha: bool, ht: bool, reqs: &Requirements| {
                    cache
                        .entry((key.to_string(), ha, ht, reqs.clone(), pod.tolerations.clone()))
                        .or_insert_with(|| universe(self.snap, self.catalog, &self.pools, pod, reqs, key, ha, ht))
                        .clone()
                };
                let universes: Vec<Vec<String>> =
                    level.domain_keys.iter().map(|k| get(k, true, true, &level.reqs)).collect();
                // A spread's nodeAffinityPolicy (Honor) counts the domains of every node the pod's
                // *required* node affinity allows — any of its terms — as kube-scheduler does, not
                // just those of the term and preferred terms this rung tries: counting fewer domains
                // lets the rung crowd one of them beyond maxSkew.
                let any = [Requirements::new()];
                let required: &[Requirements] = if pod.node_affinity.is_empty() { &any } else { &pod.node_affinity };
                let counted: Vec<Vec<String>> = level
                    .spreads
                    .iter()
                    .map(|sp| {
                        let g = &self.topo.groups[sp.group as usize];
                        if g.hostname {
                            return vec![];
                        }
                        let mut all: Vec<String> = required
                            .iter()
                            .flat_map(|t| get(&g.key.topology_key, sp.honor_affinity, sp.honor_taints, t))
                            .collect();
                        all.sort();
                        all.dedup();
                        all
                    })
                    .collect();
                let level = &mut self.classes[c].levels[l];
                level.universes = universes;
                for (sp, u) in level.spreads.iter_mut().zip(counted) {
                    sp.counted = u;
                }
            }
        }
    }

    /// The combinations of domain values (indices into the level's universes, one per domain
    /// key) the pod may take, best first.
    fn domain_choices(&self, c: usize, l: usize) -> Result<Vec<Vec<u16>>, String> {
        let class = &self.classes[c];
        let level = &class.levels[l];
        let mut per_key: Vec<Vec<u16>> = Vec::with_capacity(level.domain_keys.len());
        for (key, universe) in level.domain_keys.iter().zip(&level.universes) {
            let mut allowed: Vec<(u32, u16)> = Vec::new();
            'values: for (vi, v) in universe.iter().enumerate() {
                let mut score = 0u32;
                for s in &level.spreads {
                    let g = &self.topo.groups[s.group as usize];
                    if g.key.topology_key != *key {
                        continue;
                    }
                    let count = |d: &str| match s.private {
                        Some(i) => self.private_counts[i as usize].1.get(d).copied().unwrap_or(0),
                        None => g.count(d),
                    };
                    // Fewer eligible domains than minDomains: the global minimum counts as 0.
                    let min = if s.min_domains.is_some_and(|m| m > s.counted.len() as u32) {
                        0
                    } else {
                        s.counted.iter().map(|u| count(u)).min().unwrap_or(0)
                    };
                    if count(v) + 1 > min + s.max_skew {
                        continue 'values;
                    }
                    score += count(v);
                }
                for &(a, self_match) in &level.affinity {
                    let g = &self.topo.groups[a as usize];
                    if g.key.topology_key == *key && g.count(v) == 0 && !(g.total == 0 && self_match) {
                        continue 'values;
                    }
                }
                for &a in level.anti.iter().chain(class.repelled.iter()) {
                    let g = &self.topo.groups[a as usize];
                    if g.key.topology_key == *key && g.count(v) > 0 {
                        continue 'values;
                    }
                }
                for &e in &class.effects {
                    let g = &self.topo.groups[e as usize];
                    if g.key.topology_key == *key && !g.key.owners {
                        score += g.count(v);
                    }
                }
                allowed.push((score, vi as u16));
            }
            if allowed.is_empty() {
                return Err(self.topology_reason(c, l, key));
            }
            allowed.sort_unstable();
            per_key.push(allowed.into_iter().map(|(_, v)| v).collect());
        }
        // Cartesian product, keys in order; bounded so pathological inputs stay fast.
        let mut out: Vec<Vec<u16>> = vec![vec![]];
        for values in per_key {
            let mut next = Vec::with_capacity(out.len() * values.len());
            for prefix in &out {
                for &v in &values {
                    let mut p = prefix.clone();
                    p.push(v);
                    next.push(p);
                }
            }
            next.truncate(64);
            out = next;
        }
        Ok(out)
    }

    /// `(key, value)` pins for a domain choice.
    fn pins(&self, c: usize, l: usize, choice: &[u16]) -> Vec<(&str, &str)> {
        let level = &self.classes[c].levels[l];
        level
            .domain_keys
            .iter()
            .zip(&level.universes)
            .zip(choice)
            .map(|((k, u), &i)| (k.as_str(), u[i as usize].as_str()))
            .collect()
    }

    fn topology_reason(&self, c: usize, l: usize, key: &str) -> String {
        let level = &self.classes[c].levels[l];
        if let Some(s) = level.spreads.iter().find(|s| self.topo.groups[s.group as usize].key.topology_key == key) {
            return format!(
                "topology spread on {key} (maxSkew {}) cannot be satisfied in any {key} domain",
                s.max_skew
            );
        }
        if level.affinity.iter().any(|(g, _)| self.topo.groups[*g as usize].key.topology_key == key) {
            return format!("pod affinity on {key}: no {key} domain holds a matching pod");
        }
        format!("pod anti-affinity on {key}: every {key} domain already holds a conflicting pod")
    }

    /// First bin that takes the pod under `choice`, starting from the class's cursor.
    fn find_bin(&mut self, c: usize, l: usize, choice: &[u16]) -> Option<usize> {
        // Hostname affinity to pods already placed: only their bins can qualify (and a bin can
        // start qualifying later, so no cursor here).
        let host_affinity = self.classes[c].levels[l].affinity.iter().find_map(|&(g, _)| {
            let g = &self.topo.groups[g as usize];
            (g.hostname && g.total > 0).then(|| g.bins.clone())
        });
        if let Some(bins) = host_affinity {
            return bins.into_iter().find(|&b| self.accepts(b, c, l, choice));
        }
        // Up to eight domain keys pack into the cursor key; beyond that, scan from the start.
        let packed = (choice.len() <= 8).then(|| choice.iter().fold(0u128, |acc, &v| (acc << 16) | (v as u128 + 1)));
        let key = packed.map(|p| (c as u32, l as u16, p));
        let start = key.and_then(|k| self.cursors.get(&k).copied()).unwrap_or(0);
        let mut cursor = start;
        let mut found = None;
        for b in start..self.bins.len() {
            if self.accepts(b, c, l, choice) {
                found = Some(b);
                break;
            }
            // Bins only fill up and narrow, so a bin that refuses this class now always will.
            if cursor == b {
                cursor = b + 1;
            }
        }
        if let Some(k) = key {
            self.cursors.insert(k, cursor);
        }
        found
    }

    /// Whether bin `b` takes a pod of class `c` at level `l` in domain `choice`.
    fn accepts(&mut self, b: usize, c: usize, l: usize, choice: &[u16]) -> bool {
        if self.bins[b].node.is_none() && self.fit(c, l, self.bins[b].pool).is_err() {
            return false;
        }
        let pod = self.classes[c].rep(self.snap);
        let bin = &self.bins[b];
        if !pod.requests.fits(&bin.free) {
            return false;
        }
        if pod.host_ports.iter().any(|p| bin.ports.iter().any(|q| p.conflicts(q))) {
            return false;
        }
        let level = &self.classes[c].levels[l];
        // Hostname-keyed topology: counts on this bin.
        for s in &level.spreads {
            let g = &self.topo.groups[s.group as usize];
            if g.hostname && bin_count(&bin.counts, s.group) + 1 > s.max_skew {
                return false;
            }
        }
        for &(a, self_match) in &level.affinity {
            let g = &self.topo.groups[a as usize];
            if g.hostname && bin_count(&bin.counts, a) == 0 && !(g.total == 0 && self_match) {
                return false;
            }
        }
        for &a in level.anti.iter().chain(self.classes[c].repelled.iter()) {
            if self.topo.groups[a as usize].hostname && bin_count(&bin.counts, a) > 0 {
                return false;
            }
        }
        let pins = self.pins(c, l, choice);
        if pod.node_affinity.is_empty() {
            return false;
        }
        if let Some(n) = bin.node {
            let node = &self.snap.nodes[n];
            return !node.unschedulable
                && taints_block(pod, &node.taints, level.strict_prefer).is_none()
                && level.reqs.matches_labels(&node.labels)
                && pins.iter().all(|(k, v)| node.labels.get(*k).is_some_and(|x| x == v));
        }
        let Some(Ok(fit)) = &self.fits[c][l][bin.pool] else { return false };
        // The target type must stay usable for this pod: in the class's fit list, and with an
        // offering every requirement and pin allows.
        if !fit.has_type(bin.target) {
            return false;
        }
        if pins.iter().any(|(k, v)| !is_offering_key(k) && bin.reqs.get(k).is_some_and(|r| !r.has(v))) {
            return false;
        }
        if !level.reqs.is_empty() && !bin.reqs.overlaps(&level.reqs) {
            return false;
        }
        let t = &self.pools[bin.pool].types[bin.target];
        let offered = bin.offers.iter().any(|&i| {
            let o = &t.offerings[i as usize];
            o.allowed_by_pins(&pins) && (level.reqs.is_empty() || o.allowed_by(&level.reqs))
        });
        if !offered {
            return false;
        }
        if !self.pools[bin.pool].has_min_values {
            return true;
        }
        let mut merged = bin.reqs.intersection(&level.reqs);
        for (k, v) in pins {
            merged.add(Requirement::single(k, v));
        }
        self.min_values_ok(b, &pod.requests, &merged)
    }

    /// With `minValues` on the pool, adding the pod must leave enough distinct values among the
    /// types that still fit.
    fn min_values_ok(&self, b: usize, add: &Resources, reqs: &Requirements) -> bool {
        let bin = &self.bins[b];
        let pool = &self.pools[bin.pool];
        let mins: Vec<&Requirement> = pool.requirements.iter().filter(|r| r.min_values.is_some()).collect();
        let used = bin.used.plus(add);
        // Within limits next to the other claims (this one's reservation is what it would replace).
        let own = &pool.types[bin.target].capacity;
        let within = |t: &PoolType| {
            pool.remaining.as_ref().is_none_or(|rem| {
                rem.iter().all(|(n, left)| pool.reserved.get(n) - own.get(n) + t.capacity.get(n) <= *left)
            })
        };
        let fitting: Vec<&PoolType> = pool
            .types
            .iter()
            .filter(|t| used.fits(&t.free) && within(t))
            .filter(|t| self.catalog.types[t.catalog].requirements.overlaps(reqs) && t.has_offering(reqs))
            .collect();
        mins.iter().all(|m| {
            let mut distinct: Vec<&str> = fitting
                .iter()
                .filter_map(|t| self.catalog.types[t.catalog].requirements.get(&m.key).and_then(|r| r.single_value()))
                .filter(|v| m.has(v))
                .collect();
            distinct.sort_unstable();
            distinct.dedup();
            distinct.len() >= m.min_values.unwrap_or(0)
        })
    }

    /// With `minValues` on the pool: why a new claim under these pins could not keep enough
    /// distinct values among the types that fit the pod, are offered there and stay within limits.
    fn min_values_short(&self, p: usize, fit: &PoolFit, pins: &[(String, String)]) -> Option<String> {
        let pool = &self.pools[p];
        if !pool.has_min_values {
            return None;
        }
        let pins: Vec<(&str, &str)> = pins.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let usable: Vec<&Requirements> = fit
            .types
            .iter()
            .map(|&i| &pool.types[i as usize])
            .filter(|t| t.best_offering_all(&[&fit.reqs], &pins).is_some() && pool.within_limits(&t.capacity).is_ok())
            .map(|t| &self.catalog.types[t.catalog].requirements)
            .filter(|r| pins.iter().all(|(k, v)| r.get(k).is_none_or(|x| x.has(v))))
            .collect();
        for m in pool.pool.requirements.iter().filter(|r| r.min_values.is_some()) {
            let mut values: Vec<&str> = usable.iter().filter_map(|r| r.get(&m.key)?.single_value()).collect();
            values.sort_unstable();
            values.dedup();
            let want = m.min_values.unwrap_or(0);
            if values.len() < want {
                return Some(format!(
                    "requirement {} has minValues {want}, but only {} value(s) can be launched there within limits",
                    m.key,
                    values.len()
                ));
            }
        }
        None
    }

    /// Opens a new claim for a pod in the first pool (by weight) that can run it.
    fn open_claim(&mut self, c: usize, l: usize, choices: &[Vec<u16>]) -> Result<(usize, Vec<u16>), String> {
        let mut reasons: Vec<String> = Vec::new();
        if self.pools.is_empty() {
            return Err("no NodePool exists".to_string());
        }
        'pools: for p in 0..self.pools.len() {
            let name = self.pools[p].pool.name.clone();
            let fit = match self.fit(c, l, p) {
                Ok(f) => f.clone(),
                Err(e) => {
                    reasons.push(format!("NodePool {name:?}: {e}"));
                    continue;
                }
            };
            // A fresh node has zero pods of every hostname group.
            let level = &self.classes[c].levels[l];
            for &(a, self_match) in &level.affinity {
                let g = &self.topo.groups[a as usize];
                if g.hostname && !(g.total == 0 && self_match) {
                    reasons.push(format!(
                        "NodePool {name:?}: pod affinity on {} needs a node that already runs a matching pod, and none has room",
                        labels::HOSTNAME
                    ));
                    continue 'pools;
                }
            }
            let mut last = String::new();
            for choice in choices {
                let pins = self.pins(c, l, choice);
                if pins.iter().any(|(k, v)| fit.reqs.get(k).is_some_and(|r| !r.has(v))) {
                    continue;
                }
                let owned: Vec<(String, String)> = pins.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
                let best = match self.strategy {
                    Strategy::LowestCost => self.choose_target(c, l, p, &owned),
                    Strategy::FirstFitDecreasing => self.largest_target(c, l, p, &owned),
                };
                if best.is_none() {
                    last = self.pools[p]
                        .types
                        .iter()
                        .find_map(|t| self.pools[p].within_limits(&t.capacity).err())
                        .unwrap_or_default();
                }
                let Some(target) = best else {
                    if last.is_empty() {
                        let where_: Vec<String> = owned.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        last = format!("no instance type with an offering in {}", where_.join(", "));
                    }
                    continue;
                };
                if let Some(why) = self.min_values_short(p, &fit, &owned) {
                    last = why;
                    continue;
                }
                let mut reqs = fit.reqs.clone();
                for (k, v) in &owned {
                    reqs.add(Requirement::single(k, v));
                }
                let t = &self.pools[p].types[target];
                let free = t.free.clone();
                let capacity = t.capacity.clone();
                self.pools[p].reserved.add(&capacity);
                self.bins.push(Bin {
                    node: None,
                    pool: p,
                    target,
                    reqs,
                    free,
                    used: Resources::default(),
                    pods: vec![],
                    ports: vec![],
                    counts: vec![],
                    offers: vec![],
                });
                return Ok((self.bins.len() - 1, choice.clone()));
            }
            reasons.push(format!("NodePool {name:?}: {last}"));
        }
        Err(reasons.join("; "))
    }

    fn commit(&mut self, b: usize, c: usize, l: usize, choice: &[u16], pod: usize) {
        let p = &self.snap.pods[pod];
        let pins: Vec<(String, String)> =
            self.pins(c, l, choice).into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let level: &Level = &self.classes[c].levels[l];
        let bin = &mut self.bins[b];
        bin.free.sub(&p.requests);
        bin.used.add(&p.requests);
        bin.pods.push(pod);
        bin.ports.extend(p.host_ports.iter().cloned());
        if bin.node.is_none() {
            if !level.reqs.is_empty() {
                bin.reqs = bin.reqs.intersection(&level.reqs);
            }
            for (k, v) in &pins {
                bin.reqs.add(Requirement::single(k, v));
            }
            let t = &self.pools[bin.pool].types[bin.target];
            bin.offers =
                (0..t.offerings.len()).filter(|&i| t.offerings[i].allowed_by(&bin.reqs)).map(|i| i as u8).collect();
        }
        let domains: Vec<(u32, Option<String>)> = self.classes[c]
            .effects
            .iter()
            .map(|&g| {
                let key = &self.topo.groups[g as usize].key.topology_key;
                let v = match bin.node {
                    Some(n) => self.snap.nodes[n].labels.get(key).cloned(),
                    None => bin.reqs.get(key).and_then(|r| r.single_value()).map(str::to_string),
                };
                (g, v)
            })
            .collect();
        let mut counts = std::mem::take(&mut bin.counts);
        for (g, v) in &domains {
            self.topo.record(*g, v.as_deref(), b, &mut counts);
        }
        self.bins[b].counts = counts;
        // Spreads that count only nodes their pods could use.
        for (g, v) in domains {
            let Some(v) = v else { continue };
            for i in 0..self.private_counts.len() {
                let (group, _) = &self.private_counts[i];
                if *group == g && self.bin_eligible(b, i) {
                    *self.private_counts[i].1.entry(v.clone()).or_insert(0) += 1;
                }
            }
        }
    }

    /// Whether bin `b` is a node the pods behind private count `i` could use: one that satisfies a
    /// term of their required node affinity (nodeSelector included; preferences do not count).
    fn bin_eligible(&self, b: usize, i: usize) -> bool {
        let (c, _) = self.private_owner[i];
        let terms = &self.classes[c].rep(self.snap).node_affinity;
        let bin = &self.bins[b];
        match bin.node {
            Some(n) => terms.iter().any(|t| t.matches_labels(&self.snap.nodes[n].labels)),
            None => {
                let ty = &self.catalog.types[self.pools[bin.pool].types[bin.target].catalog];
                terms.iter().any(|t| bin.reqs.overlaps(t) && ty.requirements.overlaps(t))
            }
        }
    }

    /// Gives spreads with nodeAffinityPolicy Honor and node requirements their own counts, from
    /// the existing nodes the pod could use.
    fn setup_private_counts(&mut self) {
        for c in 0..self.classes.len() {
            for l in 0..self.classes[c].levels.len() {
                for si in 0..self.classes[c].levels[l].spreads.len() {
                    let terms = &self.classes[c].rep(self.snap).node_affinity;
                    let level = &self.classes[c].levels[l];
                    let sp = &level.spreads[si];
                    let g = &self.topo.groups[sp.group as usize];
                    let constrained = !(terms.len() == 1 && terms[0].is_empty());
                    if !sp.honor_affinity || !constrained || g.hostname {
                        continue;
                    }
                    let mut counts: FxHashMap<String, u32> = FxHashMap::default();
                    for n in &self.snap.nodes {
                        if !terms.iter().any(|t| t.matches_labels(&n.labels)) {
                            continue;
                        }
                        let Some(v) = n.labels.get(&g.key.topology_key) else { continue };
                        let k = n
                            .pods
                            .iter()
                            .filter(|p| self.topo.effects_of(p, &self.snap.namespaces).contains(&sp.group))
                            .count() as u32;
                        if k > 0 {
                            *counts.entry(v.clone()).or_insert(0) += k;
                        }
                    }
                    let group = sp.group;
                    let i = self.private_counts.len() as u32;
                    self.private_counts.push((group, counts));
                    self.private_owner.push((c, l));
                    self.classes[c].levels[l].spreads[si].private = Some(i);
                }
            }
        }
    }
}

/// The types worth trying as a new claim's target. A type that another beats on price and room
/// at once is never one (more room for less money always fills at least as well) — but unit
/// prices alone would be wrong: a type can be cheapest per vCPU and still hold one pod. To keep
/// the choice fast, the survivors are bucketed by size (powers of two of vCPUs) and each bucket
/// keeps its cheapest type and its cheapest per vCPU, per GiB and per pod slot.
fn best_buys(s: &Scheduler<'_>, p: usize, fit: &PoolFit) -> Vec<u32> {
    let pool = &s.pools[p];
    let mut all: Vec<(f64, u32)> = fit
        .types
        .iter()
        .filter_map(|&ti| pool.types[ti as usize].best_offering(&fit.reqs).map(|o| (o.price, ti)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut kept: Vec<(f64, u32)> = Vec::new();
    for (price, ti) in all {
        let f = &pool.types[ti as usize].free;
        let dominated = kept.iter().any(|&(kp, ki)| kp <= price && f.fits(&pool.types[ki as usize].free));
        if !dominated {
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
fn best_shape<'a>(
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

/// Keys whose pins the target's offerings check (zone, zone id, capacity type).
fn is_offering_key(k: &str) -> bool {
    matches!(k, labels::ZONE | labels::ZONE_ID | labels::CAPACITY_TYPE)
}

/// Values a non-hostname topology key can take: what existing nodes carry and what pools can
/// launch. `honor_affinity` / `honor_taints` are the spread policies: whether the pod's node
/// requirements and tolerations narrow the domains that count.
#[allow(clippy::too_many_arguments)]
fn universe(
    snap: &Snapshot,
    catalog: &Catalog,
    pools: &[PreparedPool<'_>],
    pod: &crate::model::Pod,
    level_reqs: &Requirements,
    key: &str,
    honor_affinity: bool,
    honor_taints: bool,
) -> Vec<String> {
    let mut values: Vec<String> = Vec::new();
    let mut push = |v: &str| {
        if !values.iter().any(|x| x == v) {
            values.push(v.to_string());
        }
    };
    for n in snap.nodes.iter().filter(|n| !n.unschedulable) {
        let Some(v) = n.labels.get(key) else { continue };
        if honor_affinity && !level_reqs.matches_labels(&n.labels) {
            continue;
        }
        if honor_taints && taints_block(pod, &n.taints, false).is_some() {
            continue;
        }
        push(v);
    }
    for pool in pools {
        if honor_taints && taints_block(pod, &pool.pool.taints, false).is_some() {
            continue;
        }
        let reqs = if honor_affinity {
            if pool.requirements.compatible(level_reqs).is_err() {
                continue;
            }
            pool.requirements.intersection(level_reqs)
        } else {
            pool.requirements.clone()
        };
        for t in pool.types.iter() {
            let treqs = &catalog.types[t.catalog].requirements;
            if !treqs.overlaps(&reqs) {
                continue;
            }
            match key {
                labels::ZONE | labels::CAPACITY_TYPE | labels::ZONE_ID => {
                    for o in t.offerings.iter().filter(|o| o.allowed_by(&reqs)) {
                        push(match key {
                            labels::ZONE => o.zone.as_str(),
                            labels::ZONE_ID => o.zone_id.as_str(),
                            _ => o.capacity_type.as_str(),
                        });
                    }
                }
                _ => match (treqs.get(key).and_then(|r| r.single_value()), reqs.get(key)) {
                    (Some(v), r) if r.is_none_or(|r| r.has(v)) => push(v),
                    (None, Some(r)) if !r.complement => r.values.iter().for_each(|v| push(v)),
                    _ => {}
                },
            }
        }
    }
    values.sort();
    values
}

pub(crate) fn describe_requests(r: &Resources) -> String {
    let mut parts = vec![
        format!("cpu {}", crate::resources::format_cpu(r.cpu)),
        format!("memory {}", crate::resources::format_bytes(r.memory)),
    ];
    if r.ephemeral > 0 {
        parts.push(format!("ephemeral-storage {}", crate::resources::format_bytes(r.ephemeral)));
    }
    for (n, v) in &r.extended {
        parts.push(format!("{n} {v}"));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests;
