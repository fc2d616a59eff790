//! What a solve prepares before it places a pod — each NodePool's instance types with their
//! offerings and DaemonSet overhead, pool fits (with their price frontiers and best buys), the
//! priced type lists claims are finalised from — kept for the next solve over the same inputs.
//!
//! A warm process keeps one [`SolveCache`] and passes it to every solve: the provisioner between
//! invocations (the reconciler owns one), consolidation across the simulations of a pass. It is
//! just a cache: every solve first checks it against its own inputs and starts it afresh when any
//! of them differs, so a cached plan is always the plan a fresh solve makes. The inputs, and how
//! each is checked:
//! - the catalog, by identity. The cache holds the catalog it was prepared against — borrowed, so
//!   the cache cannot outlive it, or a clone of its `Arc` — so that catalog can neither change nor
//!   be freed while cached, and an object at the same address is that same catalog, unchanged. A
//!   catalog with new prices or offerings is a new object, and the cache starts afresh.
//! - each NodePool's name, weight, requirements, taints and EC2NodeClass, and that class's kubelet
//!   settings: compared field by field. The pools' usage and limits are left out: every solve reads
//!   them afresh, nothing cached depends on them.
//! - the DaemonSets, the unavailable offerings and the open reservations with their counts,
//!   compared whole.
//!
//! The comparisons are exact (no fingerprint two different states could share) and cost a walk
//! over the pools and DaemonSets: microseconds, against the milliseconds the preparation takes.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::finalize::PricedTypes;
use super::pools::{CachedPool, FitKey, FitResult, PoolFit};
use crate::catalog::{Catalog, OfferingKey, Reservation};
use crate::model::{DaemonSet, KubeletConfig, NodePool};
use crate::requirements::{MinValuesPolicy, Requirements};
use crate::snapshot::Snapshot;

/// Past this many pool fits or priced lists, a solve starts those afresh (pool types are kept):
/// a warm process meets new pod shapes all day, and what old ones prepared should not pile up.
const MAX_ENTRIES: usize = 4096;

/// The catalog a solve uses, as a [`SolveCache`] holds it: borrowed, or shared through an `Arc`
/// (what a process that keeps its cache across catalog refreshes passes).
#[derive(Debug, Clone)]
pub enum CatalogRef<'c> {
    Borrowed(&'c Catalog),
    Shared(Arc<Catalog>),
}

impl CatalogRef<'_> {
    pub fn get(&self) -> &Catalog {
        match self {
            CatalogRef::Borrowed(c) => c,
            CatalogRef::Shared(c) => c,
        }
    }
}

impl<'c> From<&'c Catalog> for CatalogRef<'c> {
    fn from(catalog: &'c Catalog) -> Self {
        CatalogRef::Borrowed(catalog)
    }
}

impl From<&Arc<Catalog>> for CatalogRef<'_> {
    fn from(catalog: &Arc<Catalog>) -> Self {
        CatalogRef::Shared(catalog.clone())
    }
}

impl From<Arc<Catalog>> for CatalogRef<'_> {
    fn from(catalog: Arc<Catalog>) -> Self {
        CatalogRef::Shared(catalog)
    }
}

/// What solves prepared, and the inputs they prepared it from. `'c` is how long a borrowed
/// catalog lives; a cache kept for the life of a process is a `SolveCache<'static>` and is given
/// the catalog as an `Arc`.
#[derive(Default)]
pub struct SolveCache<'c> {
    inputs: RefCell<Option<Inputs<'c>>>,
    prepared: Prepared,
    starts: Cell<u64>,
}

impl<'c> SolveCache<'c> {
    pub fn new() -> Self {
        SolveCache::default()
    }

    /// How many times solves started the cache afresh: once for the first, then once for each
    /// change of its inputs. Tests and benchmarks read it.
    pub fn starts(&self) -> u64 {
        self.starts.get()
    }

    /// What earlier solves prepared, if `snap` and `catalog` are what they prepared it from;
    /// otherwise emptied and keyed by these inputs.
    pub(super) fn check(&self, snap: &Snapshot, catalog: &CatalogRef<'c>) -> &Prepared {
        let mut inputs = self.inputs.borrow_mut();
        if inputs.as_ref().is_some_and(|i| i.matches(snap, catalog.get())) {
            self.prepared.trim();
        } else {
            // Emptied before the new key is set: whatever happens in between, no entry outlives
            // the inputs it was prepared from.
            self.prepared.clear();
            *inputs = Some(Inputs::of(snap, catalog.clone()));
            self.starts.set(self.starts.get() + 1);
        }
        &self.prepared
    }
}

/// The inputs everything prepared depends on.
struct Inputs<'c> {
    catalog: CatalogRef<'c>,
    /// In the snapshot's order, each with its class's kubelet settings (`None`: no such class).
    pools: Vec<(NodePool, Option<KubeletConfig>)>,
    daemonsets: Vec<DaemonSet>,
    unavailable: BTreeSet<OfferingKey>,
    /// Pool fits refuse too few distinct values only under `Strict`.
    min_values_policy: MinValuesPolicy,
    reservations: BTreeMap<String, Vec<Reservation>>,
}

impl<'c> Inputs<'c> {
    fn of(snap: &Snapshot, catalog: CatalogRef<'c>) -> Self {
        Inputs {
            catalog,
            pools: snap.nodepools.iter().map(|p| (p.clone(), class_kubelet(snap, p).cloned())).collect(),
            daemonsets: snap.daemonsets.clone(),
            unavailable: snap.unavailable.clone(),
            min_values_policy: snap.min_values_policy,
            reservations: snap.reservations.clone(),
        }
    }

    fn matches(&self, snap: &Snapshot, catalog: &Catalog) -> bool {
        std::ptr::eq(self.catalog.get(), catalog)
            && self.pools.len() == snap.nodepools.len()
            && self.pools.iter().zip(&snap.nodepools).all(|((was, kubelet_was), now)| {
                same_spec(was, now) && kubelet_was.as_ref() == class_kubelet(snap, now)
            })
            && self.daemonsets == snap.daemonsets
            && self.unavailable == snap.unavailable
            && self.min_values_policy == snap.min_values_policy
            && self.reservations == snap.reservations
    }
}

/// The kubelet settings of the pool's EC2NodeClass, as a solve finds them.
pub(super) fn class_kubelet<'s>(snap: &'s Snapshot, pool: &NodePool) -> Option<&'s KubeletConfig> {
    snap.nodeclasses.iter().find(|c| c.name == pool.node_class).map(|c| &c.kubelet)
}

/// Whether two NodePools prepare the same: the same name and weight (the order pools are tried
/// in, by which prepared entries are indexed), requirements, taints (which DaemonSets run on their
/// nodes, which pods they take) and class. Spelled out field by field so that a new field is a
/// decision: read by something cached, or not.
fn same_spec(a: &NodePool, b: &NodePool) -> bool {
    let NodePool {
        name,
        weight,
        requirements,
        taints,
        node_class,
        labels: _,
        annotations: _,
        startup_taints: _,
        limits: _,
        usage: _,
        expire_after: _,
        termination_grace_period: _,
        disruption: _,
        rebalance: _,
        node_repair: _,
        // Deleting pools are left out of the pass before it prepares anything.
        deleting: _,
        termination_finalizer: _,
    } = a;
    *name == b.name
        && *weight == b.weight
        && *requirements == b.requirements
        && *taints == b.taints
        && *node_class == b.node_class
}

/// The prepared entries, valid for the inputs their [`SolveCache`] was last checked against.
/// Pools are indexed by their place in the pass's order.
#[derive(Default)]
pub(crate) struct Prepared {
    pools: RefCell<Vec<Option<CachedPool>>>,
    fits: RefCell<FxHashMap<FitKey, FitResult>>,
    priced: RefCell<FxHashMap<(usize, Requirements), Arc<PricedTypes>>>,
}

impl Prepared {
    fn clear(&self) {
        self.pools.borrow_mut().clear();
        self.fits.borrow_mut().clear();
        self.priced.borrow_mut().clear();
    }

    fn trim(&self) {
        if self.fits.borrow().len() > MAX_ENTRIES {
            self.fits.borrow_mut().clear();
        }
        if self.priced.borrow().len() > MAX_ENTRIES {
            self.priced.borrow_mut().clear();
        }
    }

    /// The types of the pool at `index` in the pass's order.
    pub(super) fn pool(&self, index: usize, prepare: impl FnOnce() -> CachedPool) -> CachedPool {
        if let Some(Some(known)) = self.pools.borrow().get(index) {
            return known.clone();
        }
        let prepared = prepare();
        let mut pools = self.pools.borrow_mut();
        if pools.len() <= index {
            pools.resize(index + 1, None);
        }
        pools[index] = Some(prepared.clone());
        prepared
    }

    /// A pool fit by everything it depends on.
    pub(super) fn fit(&self, key: FitKey, compute: impl FnOnce() -> Result<PoolFit, String>) -> FitResult {
        if let Some(known) = self.fits.borrow().get(&key) {
            return known.clone();
        }
        let fit = compute().map(Arc::new);
        self.fits.borrow_mut().insert(key, fit.clone());
        fit
    }

    /// The priced types the pool at `pool` offers under `reqs`.
    pub(super) fn priced(
        &self,
        pool: usize,
        reqs: &Requirements,
        compute: impl FnOnce() -> PricedTypes,
    ) -> Arc<PricedTypes> {
        let key = (pool, reqs.clone());
        if let Some(known) = self.priced.borrow().get(&key) {
            return known.clone();
        }
        let priced = Arc::new(compute());
        self.priced.borrow_mut().insert(key, priced.clone());
        priced
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::benchmark;
    use crate::catalog::{CapacityType, Catalog};
    use crate::labels;
    use crate::model::{DaemonSet, OwnerKind, Pod};
    use crate::requirements::{Operator, Requirement};
    use crate::resources::Resources;
    use crate::scheduler::{schedule, schedule_cached, Plan};

    const GIB: i64 = 1 << 30;

    /// A warm function keeps the cache in its reconciler, which Lambda's runtime shares across
    /// the awaits of a handler: behind a mutex it must be both.
    #[test]
    fn a_cache_behind_a_mutex_is_send_and_sync() {
        fn shared<T: Send + Sync>() {}
        shared::<std::sync::Mutex<SolveCache<'static>>>();
    }

    /// The general-purpose m5 and c5 types of the embedded catalog: few enough for a debug build,
    /// with allocatable worked out from the kubelet settings (the synthetic catalog's is fixed).
    fn catalog() -> Catalog {
        let all = crate::catalog::embedded();
        let types = all.types.iter().filter(|t| t.name.starts_with("m5.") || t.name.starts_with("c5.")).cloned();
        Catalog { types: types.collect(), zones: all.zones.clone() }
    }

    fn snapshot() -> Snapshot {
        benchmark::snapshot(vec![Pod::new("default", "web", Resources::new(1500, 2 * GIB))])
    }

    /// Plans `snap` with the kept cache and afresh; they must agree. Returns the plan and whether
    /// the cache started afresh for it.
    fn solve(snap: &Snapshot, catalog: &Arc<Catalog>, cache: &SolveCache<'static>) -> (Plan, bool) {
        let starts = cache.starts();
        let cached = schedule_cached(snap, catalog, cache);
        assert_eq!(cached, schedule(snap, catalog), "the cached plan differs from a fresh one");
        (cached, cache.starts() > starts)
    }

    fn chosen(plan: &Plan) -> (String, String, CapacityType) {
        let c = &plan.nodeclaims[0];
        (c.instance_type.clone(), c.zone.clone(), c.capacity_type)
    }

    /// Each input the cache depends on, changed so the plan changes: the cache starts afresh and
    /// plans what a fresh solve plans. What it does not depend on (pods, usage, limits) reuses it.
    #[test]
    fn every_input_it_depends_on_starts_it_afresh() {
        let mut catalog = Arc::new(catalog());
        let cache = SolveCache::new();
        let mut snap = snapshot();
        let (mut last, fresh) = solve(&snap, &catalog, &cache);
        assert!(fresh);
        let step = |what: &str, snap: &Snapshot, catalog: &Arc<Catalog>, last: &mut Plan, restarts: bool| {
            let (plan, fresh) = solve(snap, catalog, &cache);
            assert_eq!(fresh, restarts, "{what}: started afresh {fresh}");
            if restarts {
                assert_ne!(chosen(&plan), chosen(last), "{what}: the change should change the plan");
            }
            *last = plan;
        };
        step("same inputs", &snap, &catalog, &mut last, false);

        snap.pods[0].requests.memory = 3 * GIB;
        step("other pods", &snap, &catalog, &mut last, false);
        snap.nodepools[0].limits.insert("cpu".into(), 1000 * 1000);
        snap.nodepools[0].usage.cpu = 8000;
        step("limits and usage", &snap, &catalog, &mut last, false);

        let (t, zone, ct) = chosen(&last);
        snap.unavailable.insert(OfferingKey { instance_type: t.clone(), zone: zone.clone(), capacity_type: ct });
        step("an unavailable offering", &snap, &catalog, &mut last, true);

        let (t, _, _) = chosen(&last);
        snap.nodepools[0].requirements.add(Requirement::new(labels::INSTANCE_TYPE, Operator::NotIn, &[t]).unwrap());
        step("a pool's requirements", &snap, &catalog, &mut last, true);

        snap.nodeclasses[0].kubelet.kube_reserved = Some(Resources::new(1000, GIB));
        step("the class's kubelet", &snap, &catalog, &mut last, true);

        let mut pod = Pod::new("kube-system", "agent", Resources::new(2000, GIB));
        pod.owner = OwnerKind::DaemonSet;
        snap.daemonsets.push(DaemonSet { namespace: "kube-system".into(), name: "agent".into(), pod });
        step("a DaemonSet", &snap, &catalog, &mut last, true);

        let (t, _, _) = chosen(&last);
        let mut repriced = (*catalog).clone();
        let ty = repriced.types.iter_mut().find(|x| x.name == t).unwrap();
        ty.offerings.iter_mut().for_each(|o| o.price *= 10.0);
        catalog = Arc::new(repriced);
        step("a price", &snap, &catalog, &mut last, true);

        let same = Arc::new((*catalog).clone());
        let (_, fresh) = solve(&snap, &same, &cache);
        assert!(fresh, "an equal catalog that is another object starts it afresh too");
    }

    /// Pools are indexed by their place in the pass's order: reordered or re-weighted pools start
    /// the cache afresh rather than reuse one pool's types for another.
    #[test]
    fn pools_in_another_order_start_it_afresh() {
        let catalog = Arc::new(catalog());
        let cache = SolveCache::new();
        let mut snap = snapshot();
        let mut spot = snap.nodepools[0].clone();
        spot.name = "spot".into();
        spot.requirements.add(Requirement::single(labels::CAPACITY_TYPE, labels::CAPACITY_SPOT));
        let mut on_demand = snap.nodepools[0].clone();
        on_demand.name = "on-demand".into();
        on_demand.requirements.add(Requirement::single(labels::CAPACITY_TYPE, labels::CAPACITY_ON_DEMAND));
        snap.nodepools = vec![spot, on_demand];
        solve(&snap, &catalog, &cache);
        snap.nodepools[1].weight = 10;
        let (plan, fresh) = solve(&snap, &catalog, &cache);
        assert!(fresh);
        assert_eq!(plan.nodeclaims[0].nodepool, "on-demand");
        snap.nodepools.reverse();
        assert!(solve(&snap, &catalog, &cache).1);
    }

    /// A borrowed catalog is held for as long as the cache lives: solves against it reuse the
    /// cache, and it cannot change under it (the borrow checker refuses a `&mut` while the cache
    /// holds the `&`).
    #[test]
    fn a_borrowed_catalog_is_reused_while_borrowed() {
        let catalog = catalog();
        let cache = SolveCache::new();
        let snap = snapshot();
        let first = schedule_cached(&snap, &catalog, &cache);
        let second = schedule_cached(&snap, &catalog, &cache);
        assert_eq!(first, second);
        assert_eq!(cache.starts(), 1);
        let other = catalog.clone();
        assert_eq!(schedule_cached(&snap, &other, &cache), first);
        assert_eq!(cache.starts(), 2, "another catalog object starts it afresh");
    }

    /// The reconciler keeps one in a `Mutex` across awaits: it must be `Send`.
    #[test]
    fn a_kept_cache_can_move_between_threads() {
        fn send<T: Send>() {}
        send::<SolveCache<'static>>();
    }
}
