//! Consolidation: take away nodes whose pods the rest of the cluster (plus at most one cheaper
//! node) can run, without ever creating work for the next provisioning pass.
//!
//! Karpenter's methods, in Karpenter's order:
//! 1. **empty nodes** — only DaemonSet / mirror pods, idle for `consolidateAfter` → delete (Empty);
//! 2. **multi-node** — the longest prefix (binary search, at most [`Options::max_multi_nodes`])
//!    of the candidates in disruption-cost order whose pods fit the other nodes plus at most one
//!    new claim cheaper than all of them → delete them, launching that claim first (Underutilized);
//! 3. **single-node** — each remaining candidate in order: delete it when its pods fit the other
//!    nodes, else replace it when they fit the others plus one cheaper claim (Underutilized).
//!
//! Every answer comes from the core scheduler run on the cluster as it would be: nodes removed,
//! their movable pods pending, every NodePool available. A move counts only when the scheduler
//! launches nothing (delete) or one claim (replace), so the next provisioning pass — the same
//! scheduler over the same state — has nothing to launch for those pods: no flapping.
//!
//! Scaling to thousands of nodes: the scheduler is never run on the whole cluster per candidate.
//! A first-fit index of every node's free room proposes the few nodes the candidate's pods could
//! go to, and the scheduler runs on a snapshot of only those (plus some slack). For pods whose
//! constraints are per node (resources, labels, taints, host ports, node affinity) a subset of
//! the nodes can only find fewer placements than the whole, so a success there is a success in the
//! full cluster; a failure just leaves the node for a later pass. Pods with topology spread or pod
//! (anti-)affinity — and any pod while some pod in the cluster has zonal anti-affinity — depend on
//! nodes outside the subset, so those candidates are simulated against the whole cluster, a
//! bounded number of times per pass ([`Options::max_full_simulations`]).
//!
//! Decisions taken in a pass are applied to a working copy at once (pods placed where the
//! scheduler put them, replacements added as in-flight nodes), so later candidates see the room
//! earlier ones used, PDB allowances already spent and per-pool budgets already consumed.

mod synthetic;

pub use synthetic::synthetic_cluster;

use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::protection::{do_not_disrupt, eviction_cost, pod_protected};
use super::{Action, Cluster, Decision};
use crate::catalog::{CapacityType, Catalog};
use crate::labels;
use crate::model::{tolerates_all, ConsolidationPolicy, DaemonSet, Node, NodePool, OwnerKind, Pod};
use crate::nodeclaim::{Disruption, NodeClaim, Phase, Reason};
use crate::provisioning;
use crate::resources::Resources;
use crate::scheduler::{schedule_cached, Plan, PlannedClaim, TypeCache};
use crate::snapshot::Snapshot;

/// Bounds on the work of one pass.
#[derive(Debug, Clone)]
pub struct Options {
    /// Candidates multi-node consolidation considers at once (Karpenter: 100).
    pub max_multi_nodes: usize,
    /// Spot-to-spot replacement needs at least this many spot types cheaper than what it replaces
    /// (Karpenter: 15), so the replacement is not the one cheap pool about to be interrupted.
    pub min_spot_alternatives: usize,
    /// Whole-cluster simulations per pass (for pods with topology constraints).
    pub max_full_simulations: usize,
    /// Nodes beyond the first-fit proposal given to each subset simulation as slack.
    pub slack_nodes: usize,
    /// Scheduler simulations per pass (Karpenter bounds single-node consolidation by time, 3 min);
    /// a count keeps passes deterministic. Candidates beyond it wait for the next pass.
    pub max_simulations: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_multi_nodes: 100,
            min_spot_alternatives: 15,
            max_full_simulations: 64,
            slack_nodes: 4,
            max_simulations: 1_000,
        }
    }
}

/// How many more nodes of a pool may be disrupted now for a reason (the budgets module's answer,
/// already net of nodes disrupting). Consolidation counts its own decisions against it.
pub type Allowed<'a> = &'a dyn Fn(&str, Reason) -> usize;

/// One consolidation pass with the default [`Options`].
pub fn consolidate(cluster: &Cluster, catalog: &Catalog, allowed: Allowed<'_>) -> Vec<Decision> {
    consolidate_with(cluster, catalog, allowed, &Options::default())
}

/// A node consolidation may take away.
#[derive(Debug, Clone)]
struct Candidate {
    claim: usize,
    node: String,
    pool: String,
    policy: ConsolidationPolicy,
    price: Option<f64>,
    /// `m5.2xlarge spot`, for sentences.
    what: String,
    spot: bool,
    cost: f64,
}

/// The outcome of simulating the removal of some nodes.
enum Outcome {
    /// Every pod fits the other nodes: pod key → node.
    Delete(Plan),
    /// The other nodes plus this one claim.
    Replace(Plan),
}

/// The cluster as this pass has changed it.
struct Work<'a> {
    cluster: &'a Cluster,
    catalog: &'a Catalog,
    opts: &'a Options,
    /// Live nodes (pods pending from before the pass already placed), no pending pods.
    snap: Snapshot,
    index: FxHashMap<String, usize>,
    /// Nodes taken away this pass. They stay in `snap.nodes` so indices are stable.
    gone: Vec<bool>,
    /// Free room of each node in `snap.nodes`.
    free: Vec<Resources>,
    /// Node indices by free cpu, most first (the first-fit order).
    order: Vec<usize>,
    /// Some pod has required anti-affinity over a topology wider than one node.
    wide_anti: bool,
    full_sims: usize,
    /// The pools' instance types, shared by every simulation of the pass.
    types: TypeCache,
    /// Underutilized moves committed this pass (at most one: see `consolidate_with`).
    moves: usize,
    sims: usize,
    /// PDB index → disruptions still allowed this pass.
    pdb_left: Vec<i32>,
    /// Nodes removed or receiving pods this pass: not candidates any more.
    touched: FxHashSet<String>,
    used: FxHashMap<String, usize>,
    /// Cheapest available price per (cpu, memory, pods) allocatable: a lower bound for replacements.
    price_floor: Vec<(f64, Resources)>,
    type_index: FxHashMap<&'a str, usize>,
    decisions: Vec<Decision>,
}

/// One pass: see the module documentation. Decisions come in the order to carry them out (a
/// replacement's `Launch` before the claim write that starts the drain); notes explain nodes a user
/// would expect to go but that stay.
pub fn consolidate_with(cluster: &Cluster, catalog: &Catalog, allowed: Allowed<'_>, opts: &Options) -> Vec<Decision> {
    let mut w = Work::new(cluster, catalog, opts);
    if !w.place_pending() {
        return w.decisions;
    }
    let candidates = w.candidates();
    // 1. Empty nodes: no simulation needed, their pods are only DaemonSet and mirror pods.
    let mut rest = Vec::new();
    for c in candidates {
        if w.movable(&c.node).is_empty() {
            w.delete_empty(&c, allowed);
        } else if c.policy == ConsolidationPolicy::WhenEmptyOrUnderutilized {
            rest.push(c);
        }
    }
    // 2. Multi-node, 3. single-node — one move per pass, as Karpenter runs one consolidation
    // command at a time: moves are simulated one by one, but the provisioning pass after them
    // re-places all their pods together, so a second move could undo what the first relied on.
    let one_move_note = |w: &mut Work<'_>| {
        w.decisions.push(Decision::note(
            None,
            "other underutilized nodes wait for the next pass: one consolidation move at a time, so the \
             next provisioning pass sees exactly the move that was simulated"
                .to_string(),
        ))
    };
    w.multi(&rest, allowed);
    if w.moves > 0 {
        one_move_note(&mut w);
        return w.decisions;
    }
    let mut exhausted: FxHashSet<String> = FxHashSet::default();
    for c in &rest {
        if w.moves > 0 {
            one_move_note(&mut w);
            break;
        }
        if w.touched.contains(&c.node) {
            continue;
        }
        if w.left(&c.pool, Reason::Underutilized, allowed) == 0 {
            if exhausted.insert(c.pool.clone()) {
                let why = format!(
                    "not consolidated further: the disruption budget of NodePool {} allows no more nodes now",
                    c.pool
                );
                w.decisions.push(Decision::note(None, why));
            }
            continue;
        }
        match w.simulate(std::slice::from_ref(c)) {
            Ok(outcome) => w.commit(std::slice::from_ref(c), outcome),
            Err(why) => w
                .decisions
                .push(Decision::note(Some(&cluster.claims[c.claim].name), format!("not consolidated: {why}"))),
        }
    }
    w.decisions
}

fn is_topological(p: &Pod) -> bool {
    !p.topology_spread.is_empty()
        || !p.pod_affinity.is_empty()
        || !p.pod_anti_affinity.is_empty()
        || !p.preferred_pod_affinity.is_empty()
        || !p.preferred_pod_anti_affinity.is_empty()
}

/// Whether a pod is free of node constraints beyond resources (the common case, checked in O(1)).
fn unconstrained(p: &Pod) -> bool {
    p.node_affinity.len() == 1 && p.node_affinity[0].is_empty() && p.volume_requirements.is_empty()
}

fn money(x: f64) -> String {
    format!("${x:.3}/h")
}

impl<'a> Work<'a> {
    fn new(cluster: &'a Cluster, catalog: &'a Catalog, opts: &'a Options) -> Self {
        let snap = Snapshot {
            pods: cluster.pending.clone(),
            nodes: cluster.nodes.clone(),
            daemonsets: cluster.daemonsets.clone(),
            nodepools: cluster.nodepools.clone(),
            nodeclasses: cluster.nodeclasses.clone(),
            unavailable: cluster.unavailable.clone(),
            namespaces: cluster.namespaces.clone(),
        };
        let wide_anti = snap
            .nodes
            .iter()
            .flat_map(|n| n.pods.iter())
            .chain(snap.pods.iter())
            .flat_map(|p| p.pod_anti_affinity.iter())
            .any(|t| t.topology_key != labels::HOSTNAME);
        let kubelet = cluster.nodeclasses.first().map(|c| c.kubelet.clone()).unwrap_or_default();
        let mut price_floor: Vec<(f64, Resources)> =
            catalog.types.iter().filter_map(|t| t.cheapest().map(|o| (o.price, t.allocatable(&kubelet)))).collect();
        price_floor.sort_by(|a, b| a.0.total_cmp(&b.0));
        let type_index = catalog.types.iter().enumerate().map(|(i, t)| (t.name.as_str(), i)).collect();
        let mut w = Work {
            cluster,
            catalog,
            opts,
            snap,
            index: FxHashMap::default(),
            gone: vec![],
            free: vec![],
            order: vec![],
            wide_anti,
            full_sims: 0,
            types: TypeCache::new(),
            moves: 0,
            sims: 0,
            pdb_left: cluster.pdbs.iter().map(|p| p.disruptions_allowed).collect(),
            touched: FxHashSet::default(),
            used: FxHashMap::default(),
            price_floor,
            type_index,
            decisions: vec![],
        };
        w.reindex();
        w
    }

    fn reindex(&mut self) {
        self.index = self.snap.nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect();
        self.gone = vec![false; self.snap.nodes.len()];
        self.free = self.snap.nodes.iter().map(|n| n.allocatable.minus(&n.requested())).collect();
        self.sort_order();
    }

    /// Recomputes the free room of changed nodes (and of nodes added at the end).
    fn refresh(&mut self, changed: &[usize]) {
        for i in self.free.len()..self.snap.nodes.len() {
            self.index.insert(self.snap.nodes[i].name.clone(), i);
            self.gone.push(false);
            self.free.push(Resources::default());
            self.free[i] = self.snap.nodes[i].allocatable.minus(&self.snap.nodes[i].requested());
        }
        for &i in changed {
            self.free[i] = self.snap.nodes[i].allocatable.minus(&self.snap.nodes[i].requested());
        }
        self.sort_order();
    }

    fn sort_order(&mut self) {
        let mut order: Vec<usize> =
            (0..self.snap.nodes.len()).filter(|&i| !self.gone[i] && !self.snap.nodes[i].unschedulable).collect();
        order.sort_by(|&a, &b| self.free[b].cpu.cmp(&self.free[a].cpu).then(a.cmp(&b)));
        self.order = order;
    }

    /// Live nodes (not taken away this pass).
    fn live(&self) -> impl Iterator<Item = (usize, &Node)> {
        self.snap.nodes.iter().enumerate().filter(|(i, _)| !self.gone[*i])
    }

    /// Pods already waiting take their room first: the provisioning pass places them where the
    /// scheduler says, and consolidation must not take that room away. When some of them need new
    /// capacity anyway, underutilized consolidation waits (the moved pods would compete with them
    /// for the room, and could end up on that new capacity); empty nodes the scheduler did not
    /// want for them may still go. Returns whether the pass goes on.
    fn place_pending(&mut self) -> bool {
        if self.snap.pods.is_empty() {
            return true;
        }
        let plan = crate::scheduler::schedule(&self.snap, self.catalog);
        let pending = std::mem::take(&mut self.snap.pods);
        let by_key: FxHashMap<String, Pod> = pending.into_iter().map(|p| (p.key(), p)).collect();
        self.place(&plan, &by_key);
        let waiting = plan.unschedulable.len() + plan.nodeclaims.iter().map(|c| c.pods.len()).sum::<usize>();
        if waiting > 0 {
            self.decisions.push(Decision::note(
                None,
                format!(
                    "underutilized nodes not consolidated: {waiting} pending pods need new capacity; waiting for it first"
                ),
            ));
            let candidates = self.candidates();
            let allowed_all = |_: &str, _: Reason| usize::MAX;
            for c in candidates {
                if self.movable(&c.node).is_empty() {
                    self.delete_empty(&c, &allowed_all);
                }
            }
            return false;
        }
        true
    }

    /// Puts pods where a plan placed them on existing nodes (moving the `Pod`s out of `pods`).
    fn place(&mut self, plan: &Plan, pods: &FxHashMap<String, Pod>) {
        let mut changed = vec![];
        for e in &plan.existing {
            let Some(&i) = self.index.get(&e.node) else { continue };
            for key in &e.pods {
                if let Some(p) = pods.get(key) {
                    let mut p = p.clone();
                    p.node_name = Some(e.node.clone());
                    self.snap.nodes[i].pods.push(p);
                }
            }
            self.touched.insert(e.node.clone());
            changed.push(i);
        }
        self.refresh(&changed);
    }

    fn node(&self, name: &str) -> Option<&Node> {
        self.index.get(name).filter(|&&i| !self.gone[i]).map(|&i| &self.snap.nodes[i])
    }

    /// Pods that need a new home when the node goes (DaemonSet and mirror pods go with it).
    fn movable(&self, node: &str) -> Vec<&Pod> {
        self.node(node)
            .map(|n| n.pods.iter().filter(|p| !p.is_daemon() && !p.is_mirror()).collect())
            .unwrap_or_default()
    }

    fn left(&self, pool: &str, reason: Reason, allowed: Allowed<'_>) -> usize {
        allowed(pool, reason).saturating_sub(self.used.get(pool).copied().unwrap_or(0))
    }

    /// Claims whose nodes consolidation may take away, cheapest to disrupt first; a note for each
    /// node a user would expect to go that is protected.
    fn candidates(&mut self) -> Vec<Candidate> {
        let cluster = self.cluster;
        let now = cluster.now;
        let pools: FxHashMap<&str, &NodePool> = cluster.nodepools.iter().map(|p| (p.name.as_str(), p)).collect();
        let mut out = Vec::new();
        let mut notes = Vec::new();
        for (ci, claim) in cluster.claims.iter().enumerate() {
            if claim.phase != Phase::Initialized || claim.disruption.is_some() {
                continue;
            }
            let Some(node_name) = claim.node_name.as_deref() else { continue };
            if self.touched.contains(node_name) {
                continue;
            }
            let Some(node) = self.node(node_name) else { continue };
            if node.unschedulable {
                continue;
            }
            let Some(pool) = pools.get(claim.nodepool.as_str()) else { continue };
            let Some(after) = pool.disruption.consolidate_after else { continue };
            let since = claim.last_pod_event.max(claim.initialized_at).unwrap_or(claim.created_at);
            let idle = now.since(since);
            if idle < after {
                continue;
            }
            let note = |why: String| Decision::note(Some(&claim.name), format!("not consolidated: {why}"));
            if let Some(why) = do_not_disrupt(&node.annotations, claim.initialized_at.or(claim.registered_at), now) {
                notes.push(note(format!("node {} has {why}", node.name)));
                continue;
            }
            let movable: Vec<&Pod> = node.pods.iter().filter(|p| !p.is_daemon() && !p.is_mirror()).collect();
            if !movable.is_empty() && pool.disruption.consolidation_policy == ConsolidationPolicy::WhenEmpty {
                continue;
            }
            if let Some(why) = movable.iter().find_map(|p| self.pod_blocked(p)) {
                notes.push(note(why));
                continue;
            }
            // Karpenter's disruption cost: what evicting costs, scaled by how much of the node's
            // life is left (a node about to expire goes anyway, so disrupting it costs little).
            let lifetime = match claim.expire_after {
                Some(e) if !e.is_zero() => {
                    let age = now.since(claim.created_at).as_secs_f64();
                    (1.0 - age / e.as_secs_f64()).clamp(0.0, 1.0)
                }
                _ => 1.0,
            };
            let cost = movable.iter().map(|p| eviction_cost(p)).sum::<f64>() * lifetime;
            let price = claim.launch.as_ref().map(|l| l.price).or(node.price);
            let itype = claim
                .launch
                .as_ref()
                .map(|l| l.instance_type.clone())
                .or_else(|| node.labels.get(labels::INSTANCE_TYPE).cloned())
                .unwrap_or_else(|| "unknown type".into());
            let ct = node.labels.get(labels::CAPACITY_TYPE).cloned().unwrap_or_default();
            out.push(Candidate {
                claim: ci,
                node: node.name.clone(),
                pool: pool.name.clone(),
                policy: pool.disruption.consolidation_policy,
                price,
                what: format!("{itype} {ct}").trim().to_string(),
                spot: ct == labels::CAPACITY_SPOT,
                cost,
            });
        }
        self.decisions.extend(notes);
        out.sort_by(|a, b| a.cost.total_cmp(&b.cost).then_with(|| a.node.cmp(&b.node)));
        out
    }

    /// Why a pod keeps its node: do-not-disrupt, no controller to recreate it, or a PDB that
    /// allows no eviction now.
    fn pod_blocked(&self, p: &Pod) -> Option<String> {
        if let Some(why) = pod_protected(p, self.cluster.now) {
            return Some(why);
        }
        if p.owner == OwnerKind::None {
            return Some(format!("pod {} has no controller to recreate it elsewhere", p.key()));
        }
        for (i, pdb) in self.cluster.pdbs.iter().enumerate() {
            if pdb.covers(p) && self.pdb_left[i] <= 0 {
                return Some(format!(
                    "pod {} is covered by PodDisruptionBudget {}/{}, which allows no more disruptions now",
                    p.key(),
                    pdb.namespace,
                    pdb.name
                ));
            }
        }
        None
    }

    /// Whether evicting all these pods together stays within every PDB's allowance.
    fn pdbs_allow(&self, pods: &[Pod]) -> Result<(), String> {
        for (i, pdb) in self.cluster.pdbs.iter().enumerate() {
            let n = pods.iter().filter(|p| pdb.covers(p)).count() as i32;
            if n > self.pdb_left[i] {
                return Err(format!(
                    "PodDisruptionBudget {}/{} allows {} more disruptions, the move would evict {n}",
                    pdb.namespace, pdb.name, self.pdb_left[i]
                ));
            }
        }
        Ok(())
    }

    fn delete_empty(&mut self, c: &Candidate, allowed: Allowed<'_>) {
        let claim = &self.cluster.claims[c.claim];
        if self.left(&c.pool, Reason::Empty, allowed) == 0 {
            let why = format!(
                "not consolidated: node {} is empty but NodePool {}'s disruption budget allows no more nodes now",
                c.node, c.pool
            );
            self.decisions.push(Decision::note(Some(&claim.name), why));
            return;
        }
        let since = claim.last_pod_event.max(claim.initialized_at).unwrap_or(claim.created_at);
        let idle = crate::time::format_duration(self.cluster.now.since(since));
        let saving = c.price.map(|p| format!(", saving {}", money(p))).unwrap_or_default();
        let why = format!("deleting empty node {} ({}): only DaemonSet pods for {idle}{saving}", c.node, c.what);
        self.disrupt(c, Reason::Empty, vec![], why);
        self.remove_nodes(std::slice::from_ref(&c.node));
    }

    /// Records the claim write (and an Event) that starts the drain.
    fn disrupt(&mut self, c: &Candidate, reason: Reason, replacements: Vec<String>, why: String) {
        let mut claim: NodeClaim = self.cluster.claims[c.claim].clone();
        claim.disruption = Some(Disruption { reason, since: self.cluster.now, replacements, message: why.clone() });
        *self.used.entry(c.pool.clone()).or_default() += 1;
        self.touched.insert(c.node.clone());
        let name = claim.name.clone();
        self.decisions.push(Decision::act(Some(&name), Action::WriteClaim(Box::new(claim)), why.clone()));
        self.decisions.push(Decision::event(
            Some(&name),
            format!("Node/{}", c.node),
            format!("Disruption{reason}"),
            why,
        ));
    }

    fn remove_nodes(&mut self, names: &[String]) {
        for n in names {
            if let Some(&i) = self.index.get(n) {
                self.gone[i] = true;
            }
        }
        self.sort_order();
    }

    /// Multi-node consolidation: the longest prefix of the candidates (within budgets, at most
    /// `max_multi_nodes`) that the other nodes plus at most one cheaper claim can absorb, found by
    /// binary search as Karpenter does (success is close enough to monotone in the prefix length
    /// that the search finds a good prefix in log₂ n simulations).
    fn multi(&mut self, rest: &[Candidate], allowed: Allowed<'_>) {
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
        let (mut lo, mut hi) = (2usize, picked.len());
        let mut best: Option<(usize, Outcome)> = None;
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
        if let Some((n, outcome)) = best {
            self.commit(&picked[..n], outcome);
        }
    }

    /// Simulates taking these nodes away. `Ok` when their pods fit the rest (delete) or the rest
    /// plus one claim cheaper than all of them (replace); otherwise why not.
    fn simulate(&mut self, nodes: &[Candidate]) -> Result<Outcome, String> {
        let names: FxHashSet<&str> = nodes.iter().map(|c| c.node.as_str()).collect();
        let pods: Vec<Pod> = nodes.iter().flat_map(|c| self.movable(&c.node)).cloned().collect();
        if let Some(why) = pods.iter().find_map(|p| self.pod_blocked(p)) {
            return Err(why);
        }
        self.pdbs_allow(&pods)?;
        if self.sims >= self.opts.max_simulations {
            return Err(format!("this pass's {} simulations are spent; next pass", self.opts.max_simulations));
        }
        self.sims += 1;
        let total: f64 = nodes.iter().filter_map(|c| c.price).sum();
        let full = self.wide_anti || pods.iter().any(is_topological);
        let plan = if full {
            if self.full_sims >= self.opts.max_full_simulations {
                return Err(format!(
                    "its pods have topology constraints and this pass's {} whole-cluster simulations are spent; next pass",
                    self.opts.max_full_simulations
                ));
            }
            self.full_sims += 1;
            let snap = Snapshot { nodes: self.context_nodes(&names, &pods), pods, ..self.context() };
            let plan = schedule_cached(&snap, self.catalog, &self.types);
            (plan, snap)
        } else {
            let Some(sub) = self.subset(&names, &pods, total) else {
                return Err("its pods fit neither the other nodes nor a cheaper node".into());
            };
            let nodes: Vec<Node> = sub.iter().map(|&i| self.snap.nodes[i].clone()).collect();
            let snap = Snapshot { pods, nodes, ..self.context() };
            let plan = schedule_cached(&snap, self.catalog, &self.types);
            (plan, snap)
        };
        let (plan, simulated) = plan;
        if let Some(u) = plan.unschedulable.first() {
            return Err(format!("pod {} would not schedule elsewhere: {}", u.pod, u.reason));
        }
        match plan.nodeclaims.len() {
            0 => Ok(Outcome::Delete(plan)),
            1 => {
                let new = &plan.nodeclaims[0];
                if nodes.iter().any(|c| c.price.is_none()) {
                    return Err("its price is unknown, so a replacement cannot be shown to be cheaper".into());
                }
                if new.price_per_hour >= total {
                    return Err(format!(
                        "its pods need a new {} {} at {}, no cheaper than {}",
                        new.instance_type,
                        new.capacity_type.as_str(),
                        money(new.price_per_hour),
                        money(total)
                    ));
                }
                let mut plan = plan;
                self.keep_cheaper(&mut plan.nodeclaims[0], total, nodes.iter().all(|c| c.spot))?;
                if !self.next_pass_holds(simulated, &plan.nodeclaims[0]) {
                    return Err("the next provisioning pass would not fit its pods on the replacement and the other nodes (it would flap)".into());
                }
                Ok(Outcome::Replace(plan))
            }
            n => Err(format!("its pods would need {n} new nodes")),
        }
    }

    /// No flapping: the provisioning pass after this move sees the replacement as an in-flight
    /// claim and the moved pods pending, and places them first fit — not the way the simulation
    /// that chose the replacement packed them. The move only stands if that pass launches nothing.
    fn next_pass_holds(&self, mut simulated: Snapshot, claim: &PlannedClaim) -> bool {
        let startup: Vec<&crate::model::Taint> = self
            .snap
            .nodepools
            .iter()
            .find(|p| p.name == claim.nodepool)
            .map(|p| p.startup_taints.iter().collect())
            .unwrap_or_default();
        let Ok(allocatable) =
            Resources::from_quantities(claim.allocatable.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        else {
            return false;
        };
        let mut node = Node::new(&claim.name, claim.labels.clone(), allocatable);
        node.kind = crate::model::NodeKind::InFlight;
        node.taints = claim.taints.iter().filter(|t| !startup.contains(t)).cloned().collect();
        simulated.nodes.push(node);
        let plan = schedule_cached(&simulated, self.catalog, &self.types);
        plan.nodeclaims.is_empty() && plan.unschedulable.is_empty()
    }

    /// A snapshot of everything but nodes and pods.
    fn context(&self) -> Snapshot {
        Snapshot {
            pods: vec![],
            nodes: vec![],
            daemonsets: self.snap.daemonsets.clone(),
            nodepools: self.snap.nodepools.clone(),
            nodeclasses: self.snap.nodeclasses.clone(),
            unavailable: self.snap.unavailable.clone(),
            namespaces: self.snap.namespaces.clone(),
        }
    }

    /// The whole cluster as topology sees it, cheaply: nodes a first fit proposes (see `subset`)
    /// as they are, and every other live node with only the pods topology counts (those a moved
    /// pod's spread or affinity terms select, and those with anti-affinity of their own) and no
    /// room left, so domains and counts are exact but nothing is placed there. Nodes without room
    /// could not take a pod in the full simulation either, so the result is the whole cluster's
    /// except that pods only go where the proposal allows — a failure there is just a missed move.
    fn context_nodes(&self, names: &FxHashSet<&str>, pods: &[Pod]) -> Vec<Node> {
        let chosen: FxHashSet<usize> =
            self.subset(names, pods, f64::INFINITY).unwrap_or_default().into_iter().collect();
        let selectors: Vec<&crate::model::LabelSelector> = pods
            .iter()
            .flat_map(|p| {
                p.topology_spread
                    .iter()
                    .map(|t| &t.selector)
                    .chain(p.pod_affinity.iter().chain(&p.pod_anti_affinity).map(|t| &t.selector))
                    .chain(
                        p.preferred_pod_affinity.iter().chain(&p.preferred_pod_anti_affinity).map(|w| &w.term.selector),
                    )
            })
            .collect();
        let mut out = Vec::with_capacity(self.snap.nodes.len());
        for (i, n) in self.live() {
            if names.contains(n.name.as_str()) {
                continue;
            }
            if chosen.contains(&i) {
                out.push(n.clone());
                continue;
            }
            let kept: Vec<Pod> = n
                .pods
                .iter()
                .filter(|p| !p.pod_anti_affinity.is_empty() || selectors.iter().any(|s| s.matches(&p.labels)))
                .cloned()
                .collect();
            let mut allocatable = Resources::default();
            for p in &kept {
                allocatable.add(&p.requests);
            }
            out.push(Node {
                name: n.name.clone(),
                kind: n.kind,
                labels: n.labels.clone(),
                annotations: BTreeMap::new(),
                taints: n.taints.clone(),
                allocatable,
                pods: kept,
                unschedulable: n.unschedulable,
                price: n.price,
                provider_id: n.provider_id.clone(),
                ready: n.ready,
            });
        }
        out
    }

    /// The nodes a subset simulation gets: where a first fit of the pods (largest first, over the
    /// nodes with most free cpu first) puts them, plus `slack_nodes` of the roomiest others.
    /// `None` when some pods fit nowhere and no type could hold them for less than `total`.
    fn subset(&self, names: &FxHashSet<&str>, pods: &[Pod], total: f64) -> Option<Vec<usize>> {
        let mut sorted: Vec<&Pod> = pods.iter().collect();
        sorted.sort_by(|a, b| b.requests.cpu.cmp(&a.requests.cpu).then(b.requests.memory.cmp(&a.requests.memory)));
        let mut room: FxHashMap<usize, Resources> = FxHashMap::default();
        let mut chosen: Vec<usize> = Vec::new();
        let mut unplaced = Resources::default();
        for p in sorted {
            let mut placed = false;
            for &i in &self.order {
                if self.free[i].cpu < p.requests.cpu {
                    break; // sorted by free cpu: nothing further has room
                }
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
        let zones = claim.requirements.get(labels::ZONE).cloned();
        let ct = claim.capacity_type;
        let price = |name: &str| -> Option<f64> {
            let t = &self.catalog.types[*self.type_index.get(name)?];
            t.offerings
                .iter()
                .filter(|o| o.available && o.capacity_type == ct && zones.as_ref().is_none_or(|z| z.has(&o.zone)))
                .map(|o| o.price)
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

    /// Applies a successful simulation: decisions out, working state updated.
    fn commit(&mut self, nodes: &[Candidate], outcome: Outcome) {
        self.moves += 1;
        let pods: Vec<Pod> = nodes.iter().flat_map(|c| self.movable(&c.node)).cloned().collect();
        for (i, pdb) in self.cluster.pdbs.iter().enumerate() {
            self.pdb_left[i] -= pods.iter().filter(|p| pdb.covers(p)).count() as i32;
        }
        let by_key: FxHashMap<String, Pod> = pods.into_iter().map(|p| (p.key(), p)).collect();
        let total: f64 = nodes.iter().filter_map(|c| c.price).sum();
        let names: Vec<String> = nodes.iter().map(|c| c.node.clone()).collect();
        let mut list = String::new();
        for (i, c) in nodes.iter().enumerate() {
            let _ = write!(list, "{}{} ({})", if i > 0 { ", " } else { "" }, c.node, c.what);
        }
        self.remove_nodes(&names);
        let (plan, replacement) = match outcome {
            Outcome::Delete(plan) => (plan, None),
            Outcome::Replace(mut plan) => {
                let mut claim = plan.nodeclaims.remove(0);
                claim.name = format!("{}-consolidation", self.cluster.claims[nodes[0].claim].name);
                claim.labels.insert(labels::NODECLAIM.into(), claim.name.clone());
                (plan, Some(claim))
            }
        };
        let targets = plan.existing.len();
        self.place(&plan, &by_key);
        let why = match &replacement {
            None => format!(
                "deleting underutilized {} {list}: {} pods fit on {targets} other nodes, saving {}",
                if nodes.len() == 1 { "node" } else { "nodes" },
                by_key.len(),
                money(total)
            ),
            Some(r) => format!(
                "replaced {list} by {} {}, saving {} ({} pods: {} to the new node, the rest to {targets} other nodes)",
                r.instance_type,
                r.capacity_type.as_str(),
                money(total - r.price_per_hour),
                by_key.len(),
                r.pods.len()
            ),
        };
        let mut replacements = vec![];
        if let Some(r) = replacement {
            replacements.push(r.name.clone());
            self.add_inflight(&r, &by_key);
            self.decisions.push(Decision::act(
                Some(&self.cluster.claims[nodes[0].claim].name),
                Action::Launch(Box::new(r)),
                why.clone(),
            ));
        }
        for c in nodes {
            self.disrupt(c, Reason::Underutilized, replacements.clone(), why.clone());
        }
        self.refresh(&[]);
    }

    /// The replacement as an in-flight node carrying its pods and the DaemonSet pods that will
    /// run on it, so later candidates see what room it has left.
    fn add_inflight(&mut self, r: &PlannedClaim, pods: &FxHashMap<String, Pod>) {
        let mut node = planned_node(r, &self.snap.nodepools, &self.snap.daemonsets);
        for key in &r.pods {
            if let Some(p) = pods.get(key) {
                let mut p = p.clone();
                p.node_name = Some(r.name.clone());
                node.pods.push(p);
            }
        }
        self.touched.insert(r.name.clone());
        self.snap.nodes.push(node);
        self.refresh(&[]);
    }
}

/// The cluster as it is once `decisions` are carried out and the moved pods are pending again:
/// nodes whose claims consolidation disrupts gone, replacements in flight, and their non-daemon
/// pods in `pods`. What the next provisioning pass would see; tests run the scheduler on it.
pub fn after(cluster: &Cluster, decisions: &[Decision]) -> Snapshot {
    let mut gone: FxHashSet<String> = FxHashSet::default();
    let mut launched: Vec<&PlannedClaim> = vec![];
    for d in decisions {
        match &d.action {
            Some(Action::WriteClaim(c)) if c.disruption.is_some() => {
                if let Some(n) = &c.node_name {
                    gone.insert(n.clone());
                }
            }
            Some(Action::Launch(p)) => launched.push(p),
            _ => {}
        }
    }
    let mut snap = Snapshot {
        pods: cluster.pending.clone(),
        nodes: vec![],
        daemonsets: cluster.daemonsets.clone(),
        nodepools: cluster.nodepools.clone(),
        nodeclasses: cluster.nodeclasses.clone(),
        unavailable: cluster.unavailable.clone(),
        namespaces: cluster.namespaces.clone(),
    };
    for n in &cluster.nodes {
        if gone.contains(&n.name) {
            snap.pods.extend(n.pods.iter().filter(|p| !p.is_daemon() && !p.is_mirror()).cloned().map(|mut p| {
                p.node_name = None;
                p
            }));
        } else {
            snap.nodes.push(n.clone());
        }
    }
    for r in launched {
        let node = planned_node(r, &cluster.nodepools, &cluster.daemonsets);
        snap.nodes.push(node);
    }
    snap
}

/// A planned replacement as an in-flight node (its DaemonSet pods included, its own pods not).
fn planned_node(r: &PlannedClaim, pools: &[NodePool], daemonsets: &[DaemonSet]) -> Node {
    let allocatable =
        Resources::from_quantities(r.allocatable.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap_or_default();
    let pool = pools.iter().find(|p| p.name == r.nodepool);
    provisioning::inflight_node(&r.name, &r.labels, allocatable, Some(r.price_per_hour), pool, daemonsets)
}
