//! Finding a move: simulating the removal of some nodes (the scheduler on the few nodes a first
//! fit proposes, or on the whole cluster when topology is in play) and multi-node consolidation's
//! binary search for the longest prefix of candidates that can go. What a simulation finds still
//! has to pass `verify.rs`.

use rustc_hash::{FxHashMap, FxHashSet};

use super::candidates::Candidate;
use super::first_fit::FirstFit;
use super::money;
use super::work::{NotTaken, Work};
use super::Allowed;
use crate::catalog::CapacityType;
use crate::labels;
use crate::model::{tolerates_all, Node, Pod};
use crate::nodeclaim::Reason;
use crate::resources::Resources;
use crate::scheduler::{self, Plan, PlannedClaim};
use crate::snapshot::Snapshot;

/// Multi-node consolidation gives up after this many of its answers fail the next-pass check.
const MULTI_VERIFY_ATTEMPTS: usize = 3;

/// The outcome of simulating the removal of some nodes.
pub(super) enum Outcome {
    /// Every pod fits the other nodes: pod key → node.
    Delete(Plan),
    /// The other nodes plus this one claim.
    Replace(Plan),
}

/// A simulation's outcome, and whether it already is the next provisioning pass's own answer.
pub(super) struct Simulated {
    pub(super) outcome: Outcome,
    /// Simulated on [`Work::next_pass`] itself (so `verify` has nothing to add).
    pub(super) exact: bool,
}

/// Whether a pod is free of node constraints beyond resources (the common case, checked in O(1)).
fn unconstrained(p: &Pod) -> bool {
    p.node_affinity.len() == 1 && p.node_affinity[0].is_empty() && p.volume_requirements.is_empty()
}

impl<'a> Work<'a> {
    /// Multi-node consolidation: the longest prefix of the candidates (within budgets, at most
    /// `max_multi_nodes`) that the other nodes plus at most one cheaper claim can absorb, found by
    /// binary search as Karpenter does (success is close enough to monotone in the prefix length
    /// that the search finds a good prefix in log₂ n simulations).
    pub(super) fn multi(&mut self, rest: &[Candidate], allowed: Allowed<'_>) {
        let mut picked: Vec<Candidate> = Vec::new();
        let mut taken: FxHashMap<&str, usize> = FxHashMap::default();
        for c in rest {
            if picked.len() >= self.opts.max_multi_nodes {
                break;
            }
            let t = taken.entry(c.pool.as_str()).or_default();
            if *t < self.left(&c.pool, Reason::Underutilized, allowed) && c.price.is_some() {
                *t += 1;
                picked.push(c.clone());
            }
        }
        if picked.len() < 2 {
            return;
        }
        // The search runs on the cheap simulations; only its answer is checked against the whole
        // cluster (`verify`). When that check fails, the prefixes shorter than it get another
        // search, a few times at most: each check is a whole-cluster scheduler run.
        let mut hi = picked.len();
        for _ in 0..MULTI_VERIFY_ATTEMPTS {
            if self.full_sims >= self.opts.max_full_simulations {
                return; // nothing found could be checked
            }
            let mut lo = 2usize;
            let mut best: Option<(usize, Simulated)> = None;
            while lo <= hi {
                let mid = (lo + hi) / 2;
                match self.simulate(&picked[..mid]) {
                    Ok(o) => {
                        best = Some((mid, o));
                        lo = mid + 1;
                    }
                    Err(_) => hi = mid - 1,
                }
            }
            let Some((n, sim)) = best else { return };
            match self.verify(&picked[..n], sim) {
                Ok(outcome) => return self.commit(&picked[..n], outcome),
                Err(_) => hi = n - 1,
            }
        }
    }

    /// Simulates taking these nodes away. `Ok` when their pods fit the rest (delete) or the rest
    /// plus one claim cheaper than all of them (replace); otherwise why not. Pods with topology
    /// constraints are simulated on the next provisioning pass's own view of the cluster
    /// ([`Work::next_pass`]); the others on the few nodes a first fit proposes, an answer
    /// [`Work::verify`] must confirm on that view before it counts.
    pub(super) fn simulate(&mut self, nodes: &[Candidate]) -> Result<Simulated, NotTaken> {
        let names: FxHashSet<&str> = nodes.iter().map(|c| c.node.as_str()).collect();
        let pods: Vec<Pod> = nodes.iter().flat_map(|c| self.movable(&c.node)).cloned().collect();
        if let Some(why) = pods.iter().find_map(|p| self.pod_blocked(p)) {
            return Err(NotTaken::Blocked(why));
        }
        self.pdbs_allow(&pods).map_err(NotTaken::Blocked)?;
        if self.sims >= self.opts.max_simulations {
            return Err(NotTaken::Later(format!(
                "this pass's {} simulations are spent; next pass",
                self.opts.max_simulations
            )));
        }
        self.sims += 1;
        let total: f64 = nodes.iter().filter_map(|c| c.price).sum();
        let full = self.wide_anti || pods.iter().any(|p| p.has_topology());
        let plan = if full {
            self.spend_full_simulation("its pods have topology constraints and ").map_err(NotTaken::Later)?;
            scheduler::simulate(&self.next_pass(&names, None), self.catalog, &self.types)
        } else {
            let Some(sub) = self.subset(&names, &pods, total) else {
                return Err(NotTaken::Unconsolidatable(
                    "its pods fit neither the other nodes nor a cheaper node".into(),
                ));
            };
            let nodes: Vec<Node> = sub.iter().map(|&i| self.snap.nodes[i].clone()).collect();
            let snap = Snapshot { pods, nodes, ..self.context() };
            scheduler::simulate(&snap, self.catalog, &self.types)
        };
        if let Some(u) = plan.unschedulable.first() {
            let why = format!("pod {} would not schedule elsewhere: {}", u.pod, u.reason);
            return Err(NotTaken::Unconsolidatable(why));
        }
        match plan.nodeclaims.len() {
            0 => Ok(Simulated { outcome: Outcome::Delete(plan), exact: full }),
            1 => {
                let new = &plan.nodeclaims[0];
                if nodes.iter().any(|c| c.price.is_none()) {
                    let why = "its price is unknown, so a replacement cannot be shown to be cheaper";
                    return Err(NotTaken::Unconsolidatable(why.into()));
                }
                if new.price_per_hour >= total {
                    return Err(NotTaken::Unconsolidatable(format!(
                        "its pods need a new {} {} at {}, no cheaper than {}",
                        new.instance_type,
                        new.capacity_type.as_str(),
                        money(new.price_per_hour),
                        money(total)
                    )));
                }
                let mut plan = plan;
                self.keep_cheaper(&mut plan.nodeclaims[0], total, nodes.iter().all(|c| c.spot))
                    .map_err(NotTaken::Unconsolidatable)?;
                // Even on the exact view the replacement is only a plan: the next pass sees it in
                // flight (`verify`), and places the pods its own way.
                Ok(Simulated { outcome: Outcome::Replace(plan), exact: false })
            }
            n => Err(NotTaken::Unconsolidatable(format!("its pods would need {n} new nodes"))),
        }
    }

    /// Counts a whole-cluster scheduler run against
    /// [`Options::max_full_simulations`](super::Options::max_full_simulations).
    pub(super) fn spend_full_simulation(&mut self, why: &str) -> Result<(), String> {
        if self.full_sims >= self.opts.max_full_simulations {
            return Err(format!(
                "{why}this pass's {} whole-cluster simulations are spent; next pass",
                self.opts.max_full_simulations
            ));
        }
        self.full_sims += 1;
        Ok(())
    }

    /// The nodes a subset simulation gets, in node order: where a first fit of the pods (largest
    /// first, each to the first node in node order with room — the scheduler's own order, so the
    /// subset usually packs as the whole cluster would) puts them, plus `slack_nodes` of the
    /// roomiest others. `None` when some pods fit nowhere and no type could hold them for less
    /// than `total`.
    pub(super) fn subset(&self, names: &FxHashSet<&str>, pods: &[Pod], total: f64) -> Option<Vec<usize>> {
        let mut sorted: Vec<&Pod> = pods.iter().collect();
        sorted.sort_by(|a, b| b.requests.cpu.cmp(&a.requests.cpu).then(b.requests.memory.cmp(&a.requests.memory)));
        let mut room: FxHashMap<usize, Resources> = FxHashMap::default();
        let mut chosen: Vec<usize> = Vec::new();
        let mut unplaced = Resources::default();
        for p in sorted {
            let mut placed = false;
            let mut from = 0;
            while let Some(i) = self.fit.first(from, FirstFit::key(&p.requests)) {
                from = i + 1;
                let n = &self.snap.nodes[i];
                if names.contains(n.name.as_str()) {
                    continue;
                }
                let r = room.get(&i).unwrap_or(&self.free[i]);
                if !p.requests.fits(r) || !self.compatible(p, n) {
                    continue;
                }
                let r = r.minus(&p.requests);
                room.insert(i, r);
                if !chosen.contains(&i) {
                    chosen.push(i);
                }
                placed = true;
                break;
            }
            if !placed {
                unplaced.add(&p.requests);
            }
        }
        if !unplaced.is_zero() {
            // Some pods need a new node: worth simulating only if some type could hold them for
            // less than the nodes cost (daemon overhead ignored: this is a lower bound).
            let floor = self.price_floor.iter().find(|(_, a)| unplaced.fits(a)).map(|(p, _)| *p);
            if floor.is_none_or(|f| f >= total) {
                return None;
            }
        }
        let mut extra = 0;
        for &i in &self.order {
            if extra >= self.opts.slack_nodes {
                break;
            }
            if !chosen.contains(&i) && !names.contains(self.snap.nodes[i].name.as_str()) {
                chosen.push(i);
                extra += 1;
            }
        }
        // The scheduler fills existing nodes first fit in snapshot order: the subset keeps the
        // cluster's order, or it would pack the pods in an order the next pass never uses.
        chosen.sort_unstable();
        Some(chosen)
    }

    /// The scheduler's node predicates that do not depend on other pods, for proposing targets.
    fn compatible(&self, p: &Pod, n: &Node) -> bool {
        tolerates_all(&p.tolerations, &n.taints).is_ok()
            && (unconstrained(p)
                || (p.node_affinity.iter().any(|r| r.matches_labels(&n.labels))
                    && p.volume_requirements.matches_labels(&n.labels)))
    }

    /// Narrows a replacement to instance types cheaper than what it replaces (so the launch cannot
    /// pick a dearer one); spot-to-spot needs `min_spot_alternatives` of them (Karpenter's rule:
    /// with few cheap spot pools the replacement is likely the next one interrupted).
    fn keep_cheaper(&self, claim: &mut PlannedClaim, total: f64, all_spot: bool) -> Result<(), String> {
        // A claim opened in a reservation launches into it only (its requirements name it), at
        // the price `simulate` already found cheaper: there is nothing dearer it could become.
        if claim.capacity_type == CapacityType::Reserved {
            return Ok(());
        }
        let zones = claim.requirements.get(labels::ZONE).cloned();
        let ct = claim.capacity_type;
        let class = self.cluster.nodepools.iter().find(|p| p.name == claim.nodepool).map(|p| p.node_class.as_str());
        let os = class.map(|c| self.cluster.kubelet_of(c).os).unwrap_or_default();
        let price = |name: &str| -> Option<f64> {
            let t = &self.catalog.types[*self.type_index.get(name)?];
            t.offerings
                .iter()
                .filter(|o| o.available && o.capacity_type == ct && zones.as_ref().is_none_or(|z| z.has(&o.zone)))
                .map(|o| t.price(o, os))
                .min_by(f64::total_cmp)
        };
        let cheaper: Vec<String> =
            claim.instance_types.iter().filter(|t| price(t).is_some_and(|p| p < total)).cloned().collect();
        if all_spot && ct == CapacityType::Spot && cheaper.len() < self.opts.min_spot_alternatives {
            return Err(format!(
                "a spot replacement would have only {} cheaper spot types ({} needed, so it is not the next one interrupted)",
                cheaper.len(),
                self.opts.min_spot_alternatives
            ));
        }
        if cheaper.is_empty() {
            return Err("no instance type of the replacement is cheaper".into());
        }
        claim.instance_types = cheaper;
        Ok(())
    }
}
