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
//! launches nothing (delete) or one claim (replace) — and when the next provisioning pass agrees:
//! the scheduler over exactly the snapshot that pass will see ([`after`]'s: the whole cluster in
//! its own node order, pending and moved pods together, the replacement in flight) launches
//! nothing for those pods. That check is what rules out flapping; the simulations before it only
//! find moves worth checking.
//!
//! Scaling to thousands of nodes: the scheduler is not run on the whole cluster per candidate.
//! For pods whose constraints are per node (resources, labels, taints, host ports, node affinity)
//! a first fit over an index of every node's free room — each pod to the first node in node order
//! with room, as the scheduler places pods on existing capacity — proposes the few nodes the pods
//! go to, and the scheduler runs on a snapshot of only those (plus some slack), kept in node
//! order. That answer is not the whole cluster's: first fit is not monotone, and nodes left out
//! can take a pod first and leave a later one no room. So the move found is then checked once
//! on the whole cluster (stripped to what the scheduler looks at: `Work::next_pass`).
//! Pods with topology spread or pod (anti-)affinity — and any pod while some pod in the cluster
//! has zonal anti-affinity — are simulated on that whole-cluster view directly. Whole-cluster
//! runs are bounded per pass ([`Options::max_full_simulations`]); a move without one waits.
//!
//! Decisions taken in a pass are applied to a working copy at once (pods placed where the
//! scheduler put them, replacements added as in-flight nodes), so later candidates see the room
//! earlier ones used, PDB allowances already spent and per-pool budgets already consumed.

mod first_fit;
pub mod quiet;
mod synthetic;

use first_fit::FirstFit;

pub use synthetic::synthetic_cluster;

use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::catalog::{CapacityType, Catalog};
use crate::cluster::{vacate_leaving, Cluster};
use crate::decision::{launch_once, Action, Decision};
use crate::labels;
use crate::model::{tolerates_all, ConsolidationPolicy, DaemonSet, Node, NodePool, OwnerKind, Pod};
use crate::nodeclaim::{Disruption, NodeClaim, Phase, Reason};
use crate::protection::{do_not_disrupt, eviction_cost, pod_protected};
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
    /// Whole-cluster scheduler runs per pass: simulations of pods with topology constraints, and
    /// the check of each move found against the next provisioning pass.
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

/// Multi-node consolidation gives up after this many of its answers fail the next-pass check.
const MULTI_VERIFY_ATTEMPTS: usize = 3;

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

/// A simulation's outcome, and whether it already is the next provisioning pass's own answer.
struct Simulated {
    outcome: Outcome,
    /// Simulated on [`Work::next_pass`] itself (so `verify` has nothing to add).
    exact: bool,
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
    /// Node indices by free cpu, most first (where slack for a simulation comes from).
    order: Vec<usize>,
    /// The first node in node order with room for a pod: the scheduler's own first fit.
    fit: FirstFit,
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
    if !w.place_pending(allowed) {
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
        let one = std::slice::from_ref(c);
        match w.simulate(one).and_then(|sim| w.verify(one, sim)) {
            Ok(outcome) => w.commit(one, outcome),
            Err(why) => w
                .decisions
                .push(Decision::note(Some(&cluster.claims[c.claim].name), format!("not consolidated: {why}"))),
        }
    }
    w.decisions
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
        // Nodes of claims already being disrupted are leaving (see `vacate_leaving`); their pods
        // get room first, like pending ones (`place_pending`). Seen as capacity, a leaving node
        // would receive the pods of a node consolidated now, and an empty node a drifted node's
        // pods were planned onto could be deleted under them.
        let mut nodes = cluster.nodes.clone();
        let mut pods = cluster.pending.clone();
        pods.extend(vacate_leaving(cluster, &mut nodes));
        let snap = Snapshot {
            pods,
            nodes,
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
            fit: FirstFit::default(),
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
        self.fit = FirstFit::new(
            (0..self.snap.nodes.len())
                .map(|i| (!self.gone[i] && !self.snap.nodes[i].unschedulable).then(|| FirstFit::key(&self.free[i]))),
        );
    }

    /// Pods already waiting take their room first: the provisioning pass places them where the
    /// scheduler says, and consolidation must not take that room away. When some of them need new
    /// capacity anyway, underutilized consolidation waits (the moved pods would compete with them
    /// for the room, and could end up on that new capacity); empty nodes the scheduler did not
    /// want for them may still go, within the budgets like any other empty node. Returns whether
    /// the pass goes on.
    fn place_pending(&mut self, allowed: Allowed<'_>) -> bool {
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
            // Within the budgets like any empty node: a backlog of pending pods is no reason to
            // let every empty node of a pool go at once.
            for c in self.candidates() {
                if self.movable(&c.node).is_empty() {
                    self.delete_empty(&c, allowed);
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
        let mut claim: NodeClaim = self.cluster.claims[c.claim].next_version();
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
    fn simulate(&mut self, nodes: &[Candidate]) -> Result<Simulated, String> {
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
        let full = self.wide_anti || pods.iter().any(|p| p.has_topology());
        let plan = if full {
            self.spend_full_simulation("its pods have topology constraints and ")?;
            schedule_cached(&self.next_pass(&names, None), self.catalog, &self.types)
        } else {
            let Some(sub) = self.subset(&names, &pods, total) else {
                return Err("its pods fit neither the other nodes nor a cheaper node".into());
            };
            let nodes: Vec<Node> = sub.iter().map(|&i| self.snap.nodes[i].clone()).collect();
            let snap = Snapshot { pods, nodes, ..self.context() };
            schedule_cached(&snap, self.catalog, &self.types)
        };
        if let Some(u) = plan.unschedulable.first() {
            return Err(format!("pod {} would not schedule elsewhere: {}", u.pod, u.reason));
        }
        match plan.nodeclaims.len() {
            0 => Ok(Simulated { outcome: Outcome::Delete(plan), exact: full }),
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
                // Even on the exact view the replacement is only a plan: the next pass sees it in
                // flight (`verify`), and places the pods its own way.
                Ok(Simulated { outcome: Outcome::Replace(plan), exact: false })
            }
            n => Err(format!("its pods would need {n} new nodes")),
        }
    }

    /// Counts a whole-cluster scheduler run against [`Options::max_full_simulations`].
    fn spend_full_simulation(&mut self, why: &str) -> Result<(), String> {
        if self.full_sims >= self.opts.max_full_simulations {
            return Err(format!(
                "{why}this pass's {} whole-cluster simulations are spent; next pass",
                self.opts.max_full_simulations
            ));
        }
        self.full_sims += 1;
        Ok(())
    }

    /// No flapping: a move stands only if the provisioning pass after it — the scheduler over
    /// exactly the cluster that pass will see ([`Work::next_pass`]: the whole cluster in its own
    /// node order, pending and moved pods together, the replacement in flight) — launches nothing
    /// and leaves nothing unscheduled. A simulation on a subset of the nodes cannot promise that:
    /// the scheduler places pods first fit in node order, and packing is not monotone — nodes the
    /// subset left out can take a pod first and leave a later one no room anywhere. For a delete
    /// the plan returned is the next pass's own.
    fn verify(&mut self, nodes: &[Candidate], sim: Simulated) -> Result<Outcome, String> {
        if sim.exact {
            return Ok(sim.outcome);
        }
        self.spend_full_simulation("checking the move against the next provisioning pass needs a run, but ")?;
        let names: FxHashSet<&str> = nodes.iter().map(|c| c.node.as_str()).collect();
        let (outcome, next) = match sim.outcome {
            Outcome::Delete(_) => {
                let next = schedule_cached(&self.next_pass(&names, None), self.catalog, &self.types);
                if next.nodeclaims.is_empty() && next.unschedulable.is_empty() {
                    return Ok(Outcome::Delete(next));
                }
                ("its pods fit the other nodes only when packed", next)
            }
            Outcome::Replace(mut plan) => {
                // Named as it will be launched: the next pass sees it under that name.
                let claim = &mut plan.nodeclaims[0];
                claim.name = format!("{}-consolidation", self.cluster.claims[nodes[0].claim].name);
                claim.labels.insert(labels::NODECLAIM.into(), claim.name.clone());
                let next = schedule_cached(&self.next_pass(&names, Some(claim)), self.catalog, &self.types);
                if next.nodeclaims.is_empty() && next.unschedulable.is_empty() {
                    return Ok(Outcome::Replace(plan));
                }
                ("its pods fit the replacement and the other nodes only when packed", next)
            }
        };
        let stray = next
            .nodeclaims
            .iter()
            .flat_map(|c| c.pods.first())
            .chain(next.unschedulable.iter().map(|u| &u.pod))
            .next()
            .cloned()
            .unwrap_or_default();
        Err(format!(
            "{outcome} the simulation's way; the next provisioning pass, placing them first fit over the \
             whole cluster, would need new capacity for pod {stray} (it would flap)"
        ))
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

    /// What the provisioning pass after taking `names` away schedules — [`after`]'s snapshot
    /// (the cluster as it was, minus the nodes gone this pass and `names`; the replacement in
    /// flight at the end; the pending pods, then the moved pods in node order) — made cheap
    /// without changing its answer: pods the scheduler cannot tell apart from plain requests
    /// (no host ports, no anti-affinity, selected by no topology term of a pod to place) are
    /// dropped and their requests taken off the node's allocatable, so every node keeps its free
    /// room, its order, its taints, the labels the scheduler reads and the pods topology counts.
    fn next_pass(&self, names: &FxHashSet<&str>, replacement: Option<&PlannedClaim>) -> Snapshot {
        // One move per pass: no replacement of an earlier move is in flight in the working copy,
        // so the cluster's own nodes, minus those gone, are all the next pass sees.
        debug_assert_eq!(self.moves, 0);
        let leaving = crate::cluster::leaving(self.cluster);
        let live = |(i, n): &(usize, &Node)| !self.gone[*i] && !names.contains(n.name.as_str());
        // Pending pods, then those of nodes already leaving (as `Work::new` takes them: room is
        // kept for them, see `vacate_leaving`), then the moved ones — `after`'s order.
        let mut pods = self.cluster.pending.clone();
        for (_, n) in self.cluster.nodes.iter().enumerate().filter(live) {
            if crate::cluster::is_leaving(n, &leaving) {
                pods.extend(unbound(n));
            }
        }
        for n in self.cluster.nodes.iter().filter(|n| names.contains(n.name.as_str())) {
            pods.extend(unbound(n));
        }
        let mut selectors: Vec<&crate::model::LabelSelector> = Vec::new();
        for p in &pods {
            let terms = p.pod_affinity.iter().chain(&p.pod_anti_affinity).map(|t| &t.selector);
            let preferred =
                p.preferred_pod_affinity.iter().chain(&p.preferred_pod_anti_affinity).map(|w| &w.term.selector);
            for s in p.topology_spread.iter().map(|t| &t.selector).chain(terms).chain(preferred) {
                if !selectors.contains(&s) {
                    selectors.push(s); // replicas share selectors: each is matched against every pod
                }
            }
        }
        // With no topology in play, the scheduler reads an existing node's labels only through the
        // pods' node requirements (and the hostname, the domain of existing pods' anti-affinity):
        // copying just those keeps the check cheap where it runs most, on pods without topology.
        let label_keys: Option<FxHashSet<&str>> = (selectors.is_empty() && !self.wide_anti).then(|| {
            pods.iter()
                .flat_map(|p| {
                    p.node_affinity
                        .iter()
                        .chain(p.preferred_node_affinity.iter().map(|w| &w.term))
                        .chain(std::iter::once(&p.volume_requirements))
                })
                .flat_map(|r| r.keys())
                .chain(std::iter::once(labels::HOSTNAME))
                .collect()
        });
        let mut nodes = Vec::with_capacity(self.cluster.nodes.len() + 1);
        for (_, n) in self.cluster.nodes.iter().enumerate().filter(live) {
            let is_leaving = crate::cluster::is_leaving(n, &leaving);
            let mut allocatable = n.allocatable.clone();
            let mut kept = Vec::new();
            for p in &n.pods {
                if is_leaving && !p.is_daemon() && !p.is_mirror() {
                    continue; // pending above
                }
                if !p.host_ports.is_empty()
                    || !p.pod_anti_affinity.is_empty()
                    || selectors.iter().any(|s| s.matches(&p.labels))
                {
                    kept.push(p.clone());
                } else {
                    allocatable.sub(&p.requests);
                }
            }
            let labels = match &label_keys {
                None => n.labels.clone(),
                Some(keys) => n
                    .labels
                    .iter()
                    .filter(|(k, _)| keys.contains(k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            };
            nodes.push(Node {
                name: n.name.clone(),
                kind: n.kind,
                labels,
                annotations: BTreeMap::new(),
                taints: n.taints.clone(),
                allocatable,
                pods: kept,
                unschedulable: n.unschedulable || is_leaving,
                price: n.price,
                provider_id: None,
                ready: n.ready,
            });
        }
        if let Some(r) = replacement {
            nodes.push(planned_node(r, &self.cluster.nodepools, &self.cluster.daemonsets));
        }
        Snapshot { pods, nodes, ..self.context() }
    }

    /// The nodes a subset simulation gets, in node order: where a first fit of the pods (largest
    /// first, each to the first node in node order with room — the scheduler's own order, so the
    /// subset usually packs as the whole cluster would) puts them, plus `slack_nodes` of the
    /// roomiest others. `None` when some pods fit nowhere and no type could hold them for less
    /// than `total`.
    fn subset(&self, names: &FxHashSet<&str>, pods: &[Pod], total: f64) -> Option<Vec<usize>> {
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
            // Named by `verify`, which checked the next pass with it in flight under that name.
            Outcome::Replace(mut plan) => {
                let claim = plan.nodeclaims.remove(0);
                (plan, Some(claim))
            }
        };
        // A delete's plan is the next pass's own, pending pods included: count the moved ones.
        let targets = plan.existing.iter().filter(|e| e.pods.iter().any(|k| by_key.contains_key(k))).count();
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
            let owner = &self.cluster.claims[nodes[0].claim].name;
            self.decisions.push(launch_once(self.cluster, Some(owner), r, why.clone()));
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
/// pods in `pods` — after the pods of nodes already leaving, cordoned, which consolidation keeps
/// room for too. What the next provisioning pass would see; tests run the scheduler on it, and
/// consolidation checks each move on the same snapshot (`Work::next_pass`).
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
    let mut moved = vec![];
    for n in &cluster.nodes {
        if gone.contains(&n.name) {
            moved.extend(unbound(n));
        } else {
            snap.nodes.push(n.clone());
        }
    }
    // Nodes already leaving are cordoned and their pods need room too, as consolidation saw them.
    snap.pods.extend(vacate_leaving(cluster, &mut snap.nodes));
    snap.pods.extend(moved);
    for r in launched {
        let node = planned_node(r, &cluster.nodepools, &cluster.daemonsets);
        snap.nodes.push(node);
    }
    snap
}

/// A node's pods that need a new home when it goes (DaemonSet and mirror pods go with it),
/// unbound.
fn unbound(n: &Node) -> impl Iterator<Item = Pod> + '_ {
    n.pods.iter().filter(|p| !p.is_daemon() && !p.is_mirror()).cloned().map(|mut p| {
        p.node_name = None;
        p
    })
}

/// A planned replacement as an in-flight node (its DaemonSet pods included, its own pods not).
fn planned_node(r: &PlannedClaim, pools: &[NodePool], daemonsets: &[DaemonSet]) -> Node {
    let allocatable =
        Resources::from_quantities(r.allocatable.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap_or_default();
    let pool = pools.iter().find(|p| p.name == r.nodepool);
    provisioning::inflight_node(&r.name, &r.labels, allocatable, Some(r.price_per_hour), pool, daemonsets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchmark;
    use crate::catalog::embedded;
    use crate::scheduler::ExistingPlacement;
    use crate::time::Time;
    use std::time::Duration;

    /// `no_flapping`'s shrunk case (the `the_next_pass_packs_in_node_order` scenario): n0, n1
    /// and n4 hold 898m, 1517m, 2415m, 1161m and 1114m; n2 and n3 have 2414m and 5587m free and
    /// pods without a controller, so they stay.
    fn cluster() -> Cluster {
        let (mut pool, class) = benchmark::default_pool();
        pool.requirements = benchmark::general_purpose_pool().requirements;
        let now = Time::from_secs(1_750_000_000);
        let mut c = Cluster {
            now,
            nodepools: vec![pool],
            nodeclasses: vec![class],
            daemonsets: benchmark::eks_daemonsets(),
            ..Default::default()
        };
        type Pods = &'static [(&'static str, i64)];
        let nodes: [(&str, &str, Pods); 5] = [
            ("n0", "m5.2xlarge", &[("web-0", 898), ("web-1", 1517), ("web-2", 2415)]),
            ("n1", "m5.large", &[("web-3", 1161)]),
            ("n2", "m5.xlarge", &[("solo-0", 1351)]),
            ("n3", "m5.2xlarge", &[("web-4", 2109), ("solo-1", 59)]),
            ("n4", "m5.large", &[("web-5", 1114)]),
        ];
        for (name, itype, pods) in nodes {
            let t = embedded().get(itype).expect("type");
            let mut l = t.requirements.single_valued_labels();
            l.insert(labels::HOSTNAME.into(), name.into());
            l.insert(labels::ZONE.into(), t.cheapest().map(|o| o.zone.clone()).unwrap_or_default());
            l.insert(labels::CAPACITY_TYPE.into(), labels::CAPACITY_ON_DEMAND.into());
            let mut node = Node::new(name, l, t.allocatable(&Default::default()));
            node.price = t.cheapest().map(|o| o.price);
            node.pods.extend(c.daemonsets.iter().map(|ds| ds.pod.clone()));
            for &(pod, cpu) in pods {
                let mut p = Pod::new("shop", pod, Resources::new(cpu, 64 << 20));
                p.owner = if pod.starts_with("solo") { OwnerKind::None } else { OwnerKind::ReplicaSet };
                p.labels.insert("app".into(), pod.split('-').next().unwrap_or(pod).into());
                p.node_name = Some(name.into());
                node.pods.push(p);
            }
            let mut claim = NodeClaim::launching(name, "default", "default", now.minus(Duration::from_secs(86_400)));
            claim.phase = Phase::Initialized;
            claim.node_name = Some(name.into());
            claim.initialized_at = Some(claim.created_at);
            c.nodes.push(node);
            c.claims.push(claim);
        }
        c
    }

    /// The gate itself: "all five pods fit n2 and n3" was the subset simulation's answer when it
    /// packed roomiest node first; the next pass, first fit in node order, strands web-0.
    #[test]
    fn verify_refuses_a_move_only_another_packing_allows() {
        let c = cluster();
        let opts = Options::default();
        let mut w = Work::new(&c, embedded(), &opts);
        let candidates = w.candidates();
        let pick = |names: &[&str]| -> Vec<Candidate> {
            names.iter().map(|n| candidates.iter().find(|c| c.node == *n).expect("candidate").clone()).collect()
        };
        let claimed = || Simulated { outcome: Outcome::Delete(Plan::default()), exact: false };
        let err = w.verify(&pick(&["n1", "n4", "n0"]), claimed()).err().expect("refused");
        assert!(err.contains("pod shop/web-0") && err.contains("flap"), "{err}");
        // The subset the simulation gets is in node order, so it packs the way that pass does.
        let names: FxHashSet<&str> = ["n1", "n4", "n0"].into_iter().collect();
        let pods: Vec<Pod> = ["n1", "n4", "n0"].iter().flat_map(|n| w.movable(n)).cloned().collect();
        assert_eq!(w.subset(&names, &pods, f64::INFINITY), Some(vec![2, 3]));
        // n1 and n4 alone do go: the plan is that pass's own, both pods on n0, first in order.
        let Ok(Outcome::Delete(plan)) = w.verify(&pick(&["n1", "n4"]), claimed()) else { panic!("n1 and n4 fit n0") };
        let on_n0 = ExistingPlacement { node: "n0".into(), pods: vec!["shop/web-3".into(), "shop/web-5".into()] };
        assert_eq!(plan.existing, vec![on_n0]);
    }

    /// `next_pass` leaves out pods and labels the scheduler cannot see, for speed: its answer must
    /// still be the one the next pass gives on `after`'s full snapshot — with and without
    /// topology in play, and with a node already leaving.
    #[test]
    fn next_pass_answers_as_after_does() {
        for (spread, leaving) in [(false, false), (true, false), (false, true)] {
            let mut c = cluster();
            if leaving {
                c.claims[3].phase = Phase::Draining; // n3: its web-4 and solo-1 need room again
            }
            if spread {
                let web3 = c.nodes[1].pods.last_mut().expect("web-3");
                web3.topology_spread.push(crate::model::TopologySpread {
                    max_skew: 1,
                    topology_key: labels::ZONE.into(),
                    when_unsatisfiable: crate::model::WhenUnsatisfiable::DoNotSchedule,
                    selector: crate::model::LabelSelector::from_labels(&[("app", "web")]),
                    min_domains: None,
                    node_affinity_policy: crate::model::InclusionPolicy::Honor,
                    node_taints_policy: crate::model::InclusionPolicy::Ignore,
                });
            }
            let opts = Options::default();
            let w = Work::new(&c, embedded(), &opts);
            for gone in [&["n1", "n4"][..], &["n1", "n4", "n0"], &["n0"]] {
                let names: FxHashSet<&str> = gone.iter().copied().collect();
                let decisions: Vec<Decision> = gone
                    .iter()
                    .map(|n| {
                        let mut claim = c.claims.iter().find(|x| x.name == *n).expect("claim").clone();
                        claim.disruption = Some(Disruption {
                            reason: Reason::Underutilized,
                            since: c.now,
                            replacements: vec![],
                            message: String::new(),
                        });
                        Decision::act(Some(n), Action::WriteClaim(Box::new(claim)), "")
                    })
                    .collect();
                let mut full = crate::scheduler::schedule(&after(&c, &decisions), embedded());
                // Cached plans (consolidation's simulations) carry no lower bound.
                full.lower_bound_per_hour = 0.0;
                let view = schedule_cached(&w.next_pass(&names, None), embedded(), &w.types);
                assert_eq!(view, full, "spread: {spread}, leaving: {leaving}, gone: {gone:?}");
            }
        }
    }
}
