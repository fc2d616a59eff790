//! One scheduling pass: the scheduler's state, its setup (classes, pools, topology, existing
//! capacity, what each pod is worth), and the loop that places pods class by class, largest first,
//! relaxing a pod's preferences rung by rung only when it cannot otherwise go.
//!
//! Each placement tries the bins that exist (`bins.rs`), then opens a claim (`claims.rs`).

use rustc_hash::FxHashMap;

use super::bins::Bin;
use super::cache::{class_kubelet, Prepared};
use super::classes::{self, Class};
use super::pools::{self, ClusterSpend, FitResult, PreparedPool};
use super::reservations;
use super::targets::TargetCandidates;
use super::topology::Topology;
use super::{bound, Strategy};
use crate::catalog::Catalog;
use crate::model::TaintEffect;
use crate::requirements::Requirements;
use crate::snapshot::Snapshot;

/// The state of one pass. Its `impl` is split by concept across the files of this module.
pub(crate) struct Scheduler<'a> {
    pub snap: &'a Snapshot,
    pub catalog: &'a Catalog,
    pub pools: Vec<PreparedPool<'a>>,
    pub classes: Vec<Class>,
    pub topo: Topology,
    pub bins: Vec<Bin>,
    /// Lazily computed pool fits, indexed [class][level][pool].
    pub(super) fits: Vec<Vec<Vec<Option<FitResult>>>>,
    /// Per (class, level, domain choice): bins before this index never take that class again.
    pub(super) cursors: FxHashMap<(u32, u16, u128), usize>,
    pub unschedulable: Vec<(usize, String)>,
    /// Per class: what one pod is worth in $/h (its share of the lower bound), pods not yet
    /// placed, and whether it has no topology or host-port constraints (so it can fill any claim
    /// whose requirements and taints it is compatible with).
    pub(super) values: Vec<f64>,
    /// Per class: index of the next pod to place (pods of a class are interchangeable).
    pub(super) next: Vec<usize>,
    pub(super) generic: Vec<bool>,
    /// (class, rung) for which no claim could be grown (`claims.rs`, `grow_claim`). Claims only
    /// fill and reservations only grow during the pass, so none will be for its later pods.
    pub(super) ungrowable: rustc_hash::FxHashSet<(usize, usize)>,
    /// Candidate target types per (class, level, pool): the unit-price frontier, and the best buys
    /// by size beyond it (see `best_buys`).
    pub(super) targets: FxHashMap<(u32, u16, u32), TargetCandidates>,
    /// Per (class, level, pool): the classes whose pods could share a claim it opens there.
    pub(super) joiners: FxHashMap<(u32, u16, u32), Vec<u32>>,
    /// Per [class][pool]: an id shared by classes with the same requests and pool fit.
    pub(super) shape_of: Vec<Vec<u32>>,
    /// Spread counts restricted to nodes a class could use: (group, counts per domain), and the
    /// (class, rung) each belongs to.
    pub(super) private_counts: Vec<(u32, FxHashMap<String, u32>)>,
    pub(super) private_owner: Vec<(usize, usize)>,
    pub(super) strategy: Strategy,
    /// What this pass and earlier ones over the same inputs prepared (see `cache.rs`).
    pub(super) cache: &'a Prepared,
    /// What the pass's new claims hold against the cluster-wide cost limit.
    pub(super) spend: ClusterSpend,
    /// Pools a cost limit turned pods away from, with why (see [`super::Plan::cost_limited`]).
    pub(super) cost_limited: std::collections::BTreeMap<String, String>,
    /// The instances each capacity reservation still takes, by id, less the claims this pass
    /// opened in it (`reservations.rs`).
    pub(super) reservations_left: FxHashMap<&'a str, u32>,
    /// The claims (indices into `bins`) this pass opened in a reservation, with its id: each
    /// holds one of its instances, which the plan launches it into.
    pub(super) in_reservation: FxHashMap<usize, &'a str>,
}

impl<'a> Scheduler<'a> {
    /// Holds a new claim's `share` against pool `p`'s limits and the cluster-wide cost limit.
    pub(super) fn reserve(&mut self, p: usize, share: &crate::resources::Resources) {
        self.pools[p].reserved.add(share);
        self.spend.reserved += share.get(crate::model::LIMIT_COST);
    }

    pub(super) fn new(snap: &'a Snapshot, catalog: &'a Catalog, cache: &'a Prepared) -> Self {
        let pools = pools::prepare(&snap.nodepools, |index, pool, requirements| {
            cache.pool(index, || {
                let kubelet = class_kubelet(snap, pool);
                let reservations = snap.reservations.get(&pool.node_class).map_or(&[][..], Vec::as_slice);
                pools::pool_types(
                    pool,
                    requirements,
                    kubelet,
                    &snap.daemonsets,
                    catalog,
                    &snap.unavailable,
                    reservations,
                )
            })
        });
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
            ungrowable: Default::default(),
            targets: FxHashMap::default(),
            joiners: FxHashMap::default(),
            shape_of: vec![],
            private_counts: vec![],
            private_owner: vec![],
            strategy: Strategy::LowestCost,
            cache,
            spend: ClusterSpend::new(snap.cost_limit),
            cost_limited: Default::default(),
            reservations_left: reservations::instances_left(snap),
            in_reservation: FxHashMap::default(),
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

    pub(super) fn run(&mut self) {
        if self.strategy == Strategy::LowestCost {
            // Capacity already paid for before anything is bought (`reservations.rs`).
            self.run_reserved();
        }
        for c in 0..self.classes.len() {
            while self.next[c] < self.classes[c].pods.len() {
                let pod = self.classes[c].pods[self.next[c]];
                self.next[c] += 1;
                match self.place(c, pod) {
                    Ok(Some((b, l))) if self.strategy == Strategy::LowestCost => self.fill_opened(b, c, l),
                    Ok(_) => {}
                    Err(reason) => self.unschedulable.push((pod, reason)),
                }
            }
        }
    }

    /// Fills claim `b`, just opened for a pod of class `c` at rung `l`, with the pods waiting.
    pub(super) fn fill_opened(&mut self, b: usize, c: usize, l: usize) {
        // A pod placed with preferences relaxed says nothing about its siblings: they try their
        // preferences again on their own. (Unconstrained siblings are left to `fill`, which
        // mixes shapes.)
        if l == 0 && !self.generic[c] {
            self.fill_class(b, c, l);
        }
        self.fill(b);
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
            match self.open_claim(c, l, &choices, false) {
                Ok((b, choice)) => {
                    self.commit(b, c, l, &choice, pod);
                    return Ok(Some((b, l)));
                }
                Err(e) => last_reason = e,
            }
            // Limits turned it away everywhere: a claim grown a size may still hold it.
            if self.strategy == Strategy::LowestCost {
                let reserved: Vec<_> = self.pools.iter().map(|p| p.reserved.clone()).collect();
                if let Some((b, before)) = self.grow_claim(c, l) {
                    if let Some(choice) = choices.iter().find(|ch| self.accepts(b, c, l, ch)) {
                        self.commit(b, c, l, choice, pod);
                        return Ok(None);
                    }
                    // Grown for nothing (a pin or a rung the claim cannot take): as it was.
                    self.bins[b] = before;
                    for (pool, r) in self.pools.iter_mut().zip(reserved) {
                        pool.reserved = r;
                    }
                }
            }
        }
        Err(last_reason)
    }
}
