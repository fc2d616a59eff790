//! NodePools prepared for one scheduling pass: which instance types each can launch, what they
//! offer after DaemonSet overhead, where they can be bought and for how much.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use crate::catalog::{CapacityType, Catalog, OfferingKey};
use crate::labels;
use crate::model::{tolerates_all, DaemonSet, HostPort, KubeletConfig, NodePool, Pod};
use crate::requirements::Requirements;
use crate::resources::Resources;

/// An offering a pool may use: zone, capacity type, price.
#[derive(Debug, Clone)]
pub(crate) struct PoolOffering {
    pub zone: String,
    pub zone_id: String,
    pub capacity_type: CapacityType,
    pub price: f64,
}

impl PoolOffering {
    /// Whether requirements on zone, zone id and capacity type allow this offering.
    pub fn allowed_by(&self, reqs: &Requirements) -> bool {
        reqs.get(labels::ZONE).is_none_or(|r| r.has(&self.zone))
            && reqs.get(labels::CAPACITY_TYPE).is_none_or(|r| r.has(self.capacity_type.as_str()))
            && reqs.get(labels::ZONE_ID).is_none_or(|r| r.has(&self.zone_id))
    }

    /// Whether topology pins (`key = value`) allow this offering.
    pub fn allowed_by_pins(&self, pins: &[(&str, &str)]) -> bool {
        pins.iter().all(|(k, v)| match *k {
            labels::ZONE => self.zone == *v,
            labels::ZONE_ID => self.zone_id == *v,
            labels::CAPACITY_TYPE => self.capacity_type.as_str() == *v,
            _ => true,
        })
    }
}

/// An instance type as a pool would launch it.
#[derive(Debug, Clone)]
pub(crate) struct PoolType {
    /// Index into the catalog.
    pub catalog: usize,
    /// Allocatable minus the DaemonSet pods that would run on it: what pending pods can use.
    pub free: Resources,
    /// Full allocatable (what the plan reports).
    pub allocatable: Resources,
    /// Capacity, counted against the pool's limits.
    pub capacity: Resources,
    pub offerings: Vec<PoolOffering>,
    /// Host ports the DaemonSet pods that would run on it hold: no pending pod may use them there.
    pub ports: Vec<HostPort>,
}

impl PoolType {
    /// Whether pods with these host ports can run beside the type's DaemonSet pods.
    pub fn ports_free(&self, ports: &[HostPort]) -> bool {
        !ports.iter().any(|p| self.ports.iter().any(|q| p.conflicts(q)))
    }

    /// Cheapest offering the requirements allow, preferring spot when it is allowed at all.
    pub fn best_offering(&self, reqs: &Requirements) -> Option<&PoolOffering> {
        let rank = |o: &PoolOffering| o.capacity_type != CapacityType::Spot;
        self.offerings
            .iter()
            .filter(|o| o.allowed_by(reqs))
            .min_by(|a, b| rank(a).cmp(&rank(b)).then(a.price.total_cmp(&b.price)))
    }

    pub fn has_offering(&self, reqs: &Requirements) -> bool {
        self.offerings.iter().any(|o| o.allowed_by(reqs))
    }

    /// Cheapest offering allowed by several requirement sets and pins at once (spot first), without
    /// building their intersection.
    pub fn best_offering_all(&self, reqs: &[&Requirements], pins: &[(&str, &str)]) -> Option<&PoolOffering> {
        let rank = |o: &PoolOffering| o.capacity_type != CapacityType::Spot;
        self.offerings
            .iter()
            .filter(|o| o.allowed_by_pins(pins) && reqs.iter().all(|r| o.allowed_by(r)))
            .min_by(|a, b| rank(a).cmp(&rank(b)).then(a.price.total_cmp(&b.price)))
    }
}

pub(crate) struct PreparedPool<'a> {
    pub pool: &'a NodePool,
    /// The pool's requirements plus `dovetail.dev/nodepool In [name]`, so pods selecting a pool by
    /// name (either spelling) go to that pool only.
    pub requirements: Requirements,
    /// Why the pool cannot launch anything at all (missing EC2NodeClass, no types), if so.
    pub broken: Option<String>,
    /// Shared with a [`TypeCache`] when the caller plans many times over the same pools.
    pub types: Rc<Vec<PoolType>>,
    /// Limits minus current usage; `None` for resources without a limit.
    pub remaining: Option<Vec<(String, i64)>>,
    /// Reserved by claims opened in this pass.
    pub reserved: Resources,
    /// Whether any requirement carries `minValues` (then filling checks type diversity).
    pub has_min_values: bool,
}

impl PreparedPool<'_> {
    /// Whether `capacity` still fits under the pool's limits after what is reserved.
    pub fn within_limits(&self, capacity: &Resources) -> Result<(), String> {
        let Some(remaining) = &self.remaining else { return Ok(()) };
        for (name, left) in remaining {
            let want = self.reserved.get(name) + capacity.get(name);
            if want > *left {
                return Err(format!(
                    "limit on {name} reached ({} of {} left)",
                    fmt_resource(name, (*left - self.reserved.get(name)).max(0)),
                    fmt_resource(name, self.pool.limits.get(name).copied().unwrap_or(0))
                ));
            }
        }
        Ok(())
    }
}

pub(crate) fn fmt_resource(name: &str, v: i64) -> String {
    match name {
        crate::resources::CPU => crate::resources::format_cpu(v),
        crate::resources::MEMORY | crate::resources::EPHEMERAL_STORAGE => crate::resources::format_bytes(v),
        _ => v.to_string(),
    }
}

/// Whether a DaemonSet's pods would run on a node of this pool and type.
fn daemon_runs_on(ds: &Pod, pool: &NodePool, pool_reqs: &Requirements, type_reqs: &Requirements) -> bool {
    tolerates_all(&ds.tolerations, &pool.taints).is_ok()
        && ds.node_affinity.iter().any(|term| pool_reqs.overlaps(term) && type_reqs.overlaps(term))
}

/// The instance types each pool can launch, worked out once and reused by every scheduling pass
/// over the same pools, DaemonSets and unavailable offerings (consolidation simulates hundreds of
/// small passes; matching 1,363 types against each pool every time would dominate them).
#[derive(Default)]
pub struct TypeCache {
    entries: RefCell<BTreeMap<String, CachedPool>>,
    /// Pool fits of pods by everything a fit depends on (see `FitKey`).
    pub(crate) fits: RefCell<rustc_hash::FxHashMap<FitKey, FitResult>>,
}

/// A pool's prepared types: (why it cannot launch anything, if so; its types).
type CachedPool = (Option<String>, Rc<Vec<PoolType>>);

/// What a pool fit depends on: the pool, the rung's node requirements, the pod's requests,
/// tolerations and host ports, whether PreferNoSchedule taints still count, and whether the pod's
/// required node affinity can match anything at all.
pub(crate) type FitKey =
    (String, Requirements, Resources, Vec<crate::model::Toleration>, Vec<crate::model::HostPort>, bool, bool);

impl TypeCache {
    pub fn new() -> Self {
        TypeCache::default()
    }
}

pub(crate) fn prepare<'a>(
    pools: &'a [NodePool],
    kubelets: impl Fn(&str) -> Option<KubeletConfig>,
    daemonsets: &[DaemonSet],
    catalog: &Catalog,
    unavailable: &BTreeSet<OfferingKey>,
    cache: Option<&TypeCache>,
) -> Vec<PreparedPool<'a>> {
    let mut order: Vec<&NodePool> = pools.iter().collect();
    // Highest weight first, then name, so the order never depends on input order.
    order.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.name.cmp(&b.name)));
    order
        .into_iter()
        .map(|pool| {
            let remaining = (!pool.limits.is_empty())
                .then(|| pool.limits.iter().map(|(n, l)| (n.clone(), l - pool.usage.get(n))).collect::<Vec<_>>());
            let mut requirements = pool.requirements.clone();
            requirements.add(crate::requirements::Requirement::single(labels::NODEPOOL, &pool.name));
            let has_min_values = pool.requirements.iter().any(|r| r.min_values.is_some());
            let cached = cache.and_then(|c| c.entries.borrow().get(&pool.name).cloned());
            let (broken, types) = cached.unwrap_or_else(|| {
                let prepared = pool_types(pool, &requirements, &kubelets, daemonsets, catalog, unavailable);
                if let Some(c) = cache {
                    c.entries.borrow_mut().insert(pool.name.clone(), prepared.clone());
                }
                prepared
            });
            PreparedPool {
                pool,
                requirements,
                broken,
                types,
                remaining,
                reserved: Resources::default(),
                has_min_values,
            }
        })
        .collect()
}

/// The instance types a pool can launch, and why it cannot launch anything when so.
fn pool_types(
    pool: &NodePool,
    requirements: &Requirements,
    kubelets: &impl Fn(&str) -> Option<KubeletConfig>,
    daemonsets: &[DaemonSet],
    catalog: &Catalog,
    unavailable: &BTreeSet<OfferingKey>,
) -> CachedPool {
    let Some(kubelet) = kubelets(&pool.node_class) else {
        return (Some(format!("its EC2NodeClass {:?} does not exist", pool.node_class)), Rc::new(vec![]));
    };
    let mut types = Vec::new();
    for (i, t) in catalog.types.iter().enumerate() {
        if !requirements.overlaps(&t.requirements) {
            continue;
        }
        let offerings: Vec<PoolOffering> = t
            .offerings
            .iter()
            .filter(|o| o.available)
            .filter(|o| {
                !unavailable.contains(&OfferingKey {
                    instance_type: t.name.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type,
                })
            })
            .map(|o| PoolOffering {
                zone: o.zone.clone(),
                zone_id: catalog.zone_id(&o.zone).unwrap_or_default().to_string(),
                capacity_type: o.capacity_type,
                price: o.price,
            })
            .filter(|o| o.allowed_by(requirements))
            .collect();
        if offerings.is_empty() {
            continue;
        }
        let allocatable = t.allocatable(&kubelet);
        let mut free = allocatable.clone();
        let mut ports = Vec::new();
        for ds in daemonsets {
            if daemon_runs_on(&ds.pod, pool, requirements, &t.requirements) {
                free.sub(&ds.pod.requests);
                ports.extend(ds.pod.host_ports.iter().cloned());
            }
        }
        if free.cpu <= 0 || free.memory <= 0 || free.pods <= 0 {
            continue;
        }
        types.push(PoolType { catalog: i, free, allocatable, capacity: t.capacity(&kubelet), offerings, ports });
    }
    let broken =
        types.is_empty().then(|| "no instance type satisfies its requirements with an available offering".to_string());
    (broken, Rc::new(types))
}

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
