//! The working copy of the cluster one pass changes: nodes with their free room (indexed for the
//! first fit and for slack), pods already pending placed first, nodes taken away, PDB allowances
//! and budgets spent. Every decision is applied to it at once, so later candidates see it.

use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

use super::first_fit::FirstFit;
use super::{Allowed, Options};
use crate::catalog::{CapacityType, Catalog, InstanceType};
use crate::cluster::{vacate_leaving, Cluster};
use crate::decision::Decision;
use crate::labels;
use crate::model::{KubeletConfig, Node, NodeOs, Pod};
use crate::nodeclaim::Reason;
use crate::resources::Resources;
use crate::scheduler::{Plan, SolveCache};
use crate::snapshot::Snapshot;

/// Why nodes are not consolidated, sorted by what their owner is told (see [`Work::not_taken`]).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum NotTaken {
    /// Something protects them (do-not-disrupt, a pod without a controller, a PDB): DisruptionBlocked.
    Blocked(String),
    /// No cheaper way to run their pods was found: Unconsolidatable.
    Unconsolidatable(String),
    /// This pass ran out of simulations before it could tell; the next pass looks again.
    Later(String),
}

/// The cluster as this pass has changed it.
pub(super) struct Work<'a> {
    pub(super) cluster: &'a Cluster,
    pub(super) catalog: &'a Catalog,
    pub(super) opts: &'a Options,
    /// Live nodes (pods pending from before the pass already placed), no pending pods.
    pub(super) snap: Snapshot,
    pub(super) index: FxHashMap<String, usize>,
    /// Nodes taken away this pass. They stay in `snap.nodes` so indices are stable.
    pub(super) gone: Vec<bool>,
    /// Free room of each node in `snap.nodes`.
    pub(super) free: Vec<Resources>,
    /// Node indices by free cpu, most first (where slack for a simulation comes from).
    pub(super) order: Vec<usize>,
    /// The first node in node order with room for a pod: the scheduler's own first fit.
    pub(super) fit: FirstFit,
    /// Some pod has required anti-affinity over a topology wider than one node.
    pub(super) wide_anti: bool,
    pub(super) full_sims: usize,
    /// What the simulations of the pass prepare (pool types, fits, priced types), shared by all.
    pub(super) types: SolveCache<'a>,
    /// Underutilized moves committed this pass (at most one: see `consolidate_with`).
    pub(super) moves: usize,
    pub(super) sims: usize,
    /// PDB index → disruptions still allowed this pass.
    pub(super) pdb_left: Vec<i32>,
    /// Nodes removed or receiving pods this pass: not candidates any more.
    pub(super) touched: FxHashSet<String>,
    pub(super) used: FxHashMap<String, usize>,
    /// Pools whose budget ran out for a reason this pass, already said once on the pool.
    pub(super) exhausted: FxHashSet<(String, Reason)>,
    /// Cheapest available price per (cpu, memory, pods) allocatable: a lower bound for replacements.
    pub(super) price_floor: Vec<(f64, Resources)>,
    pub(super) type_index: FxHashMap<&'a str, usize>,
    pub(super) decisions: Vec<Decision>,
}

impl<'a> Work<'a> {
    pub(super) fn new(cluster: &'a Cluster, catalog: &'a Catalog, opts: &'a Options) -> Self {
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
            min_values_policy: cluster.min_values_policy,
            // Like the pools' usage, what the removed nodes cost stays counted: a replacement must
            // fit beside them, as it does under the pools' resource limits.
            cost_limit: crate::provisioning::cost_limit(cluster, catalog),
            reservations: crate::reservations::open(cluster),
        };
        let wide_anti = snap
            .nodes
            .iter()
            .flat_map(|n| n.pods.iter().map(Arc::as_ref))
            .chain(snap.pods.iter())
            .flat_map(|p| p.pod_anti_affinity.iter())
            .any(|t| t.topology_key != labels::HOSTNAME);
        // A lower bound must hold for every class: each type at its roomiest allocatable under any
        // class's kubelet (classes differ, Windows ones most), at the catalog's Linux price, which
        // no class's price is below (Windows adds its licence).
        let mut kubelets: Vec<&KubeletConfig> = cluster.nodeclasses.iter().map(|c| &c.kubelet).collect();
        let linux = KubeletConfig::default();
        if kubelets.is_empty() {
            kubelets.push(&linux);
        }
        let roomiest =
            |t: &InstanceType| kubelets.iter().map(|k| t.allocatable(k)).reduce(|a, b| a.max(&b)).unwrap_or_default();
        let mut price_floor: Vec<(f64, Resources)> =
            catalog.types.iter().filter_map(|t| t.cheapest().map(|o| (o.price, roomiest(t)))).collect();
        // A reservation with an instance left holds pods for its token price: the pods of an
        // on-demand or spot node that fit its type are worth simulating there.
        for r in snap.reservations.values().flatten() {
            let Some(t) = catalog.get(&r.instance_type) else { continue };
            let price = catalog.offering_price(&t.name, &r.zone, CapacityType::Reserved, NodeOs::Linux);
            price_floor.push((price.unwrap_or(0.0), roomiest(t)));
        }
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
            types: SolveCache::new(),
            moves: 0,
            sims: 0,
            pdb_left: cluster.pdbs.iter().map(|p| p.disruptions_allowed).collect(),
            touched: FxHashSet::default(),
            exhausted: FxHashSet::default(),
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
    pub(super) fn refresh(&mut self, changed: &[usize]) {
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
    pub(super) fn place_pending(&mut self, allowed: Allowed<'_>) -> bool {
        if self.snap.pods.is_empty() {
            return true;
        }
        let plan = crate::scheduler::simulate(&self.snap, self.catalog, &self.types);
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
    pub(super) fn place(&mut self, plan: &Plan, pods: &FxHashMap<String, Pod>) {
        let mut changed = vec![];
        for e in &plan.existing {
            let Some(&i) = self.index.get(&e.node) else { continue };
            for key in &e.pods {
                if let Some(p) = pods.get(key) {
                    let mut p = p.clone();
                    p.node_name = Some(e.node.clone());
                    self.snap.nodes[i].pods.push(Arc::new(p));
                }
            }
            self.touched.insert(e.node.clone());
            changed.push(i);
        }
        self.refresh(&changed);
    }

    pub(super) fn node(&self, name: &str) -> Option<&Node> {
        self.index.get(name).filter(|&&i| !self.gone[i]).map(|&i| &self.snap.nodes[i])
    }

    /// Pods that need a new home when the node goes (DaemonSet and mirror pods go with it).
    pub(super) fn movable(&self, node: &str) -> Vec<&Pod> {
        self.node(node)
            .map(|n| n.pods.iter().map(Arc::as_ref).filter(|p| !p.is_daemon() && !p.is_mirror()).collect())
            .unwrap_or_default()
    }

    pub(super) fn left(&self, pool: &str, reason: Reason, allowed: Allowed<'_>) -> usize {
        allowed(pool, reason).saturating_sub(self.used.get(pool).copied().unwrap_or(0))
    }

    pub(super) fn remove_nodes(&mut self, names: &[String]) {
        for n in names {
            if let Some(&i) = self.index.get(n) {
                self.gone[i] = true;
            }
        }
        self.sort_order();
    }

    /// A snapshot of everything but nodes and pods.
    pub(super) fn context(&self) -> Snapshot {
        Snapshot {
            pods: vec![],
            nodes: vec![],
            daemonsets: self.snap.daemonsets.clone(),
            nodepools: self.snap.nodepools.clone(),
            nodeclasses: self.snap.nodeclasses.clone(),
            unavailable: self.snap.unavailable.clone(),
            namespaces: self.snap.namespaces.clone(),
            min_values_policy: self.snap.min_values_policy,
            cost_limit: self.snap.cost_limit,
            reservations: self.snap.reservations.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{embedded, Reservation, ReservationKind};
    use crate::cluster::ResolvedClass;
    use crate::time::Time;

    /// The lower bound that decides whether a removal is worth simulating counts a reservation
    /// with an instance left at its token price: without it, a node already of the cheapest type
    /// for its pods is never simulated, though the reservation would hold them for nothing.
    #[test]
    fn a_free_reservation_is_the_cheapest_place_worth_simulating() {
        let (pool, class) = crate::benchmark::default_pool();
        let now = Time::from_secs(1_750_000_000);
        let reservation = Reservation {
            id: "cr-1".into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            owner_id: String::new(),
            instance_match_criteria: "targeted".into(),
            kind: ReservationKind::Default,
            interruptible: false,
            available: 1,
            observed_at: now,
            end: None,
        };
        let mut c = Cluster { now, nodepools: vec![pool], nodeclasses: vec![class], ..Default::default() };
        let need = Resources::new(1000, 1 << 30);
        let floor = |c: &Cluster| {
            let opts = Options::default();
            let w = Work::new(c, embedded(), &opts);
            w.price_floor.iter().find(|(_, a)| need.fits(a)).map(|(p, _)| *p).expect("some type fits")
        };
        let bought = floor(&c);
        assert!(bought > 0.001, "{bought}");
        c.resolved =
            vec![ResolvedClass { name: "default".into(), reservations: vec![reservation], ..Default::default() }];
        let reserved = floor(&c);
        assert!(reserved < bought / 1000.0, "{reserved} vs {bought}");
        // None left: no such floor.
        c.resolved[0].reservations[0].available = 0;
        assert_eq!(floor(&c), bought);
    }
}
