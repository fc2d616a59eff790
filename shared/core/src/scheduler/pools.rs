//! NodePools prepared for one scheduling pass: which instance types each can launch, what they
//! offer after DaemonSet overhead, where they can be bought and for how much.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use crate::catalog::{CapacityType, Catalog, OfferingKey, Reservation};
use crate::labels;
use crate::model::{
    format_cost, limit_share, tolerates_all, DaemonSet, HostPort, KubeletConfig, NodePool, Pod, LIMIT_COST,
};
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;
use crate::snapshot::CostLimit;

/// An offering a pool may use: zone, capacity type, price. The zone's name and id are shared by
/// every offering in the zone (a pool has thousands of offerings, a catalog a few zones).
#[derive(Debug, Clone)]
pub(crate) struct PoolOffering {
    pub zone: Arc<str>,
    pub zone_id: Arc<str>,
    pub capacity_type: CapacityType,
    pub price: f64,
    /// The reservation a `reserved` offering launches into, with what it has left.
    pub reservation: Option<Arc<Reservation>>,
}

/// What a requirement set says about offerings: its zone, capacity-type and zone-id requirements,
/// looked up once (offerings are checked by the thousand, and a lookup by label key costs more
/// than the check).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OfferingFilter<'r> {
    zone: Option<&'r Requirement>,
    capacity_type: Option<&'r Requirement>,
    zone_id: Option<&'r Requirement>,
    /// The reservation labels' requirements (id, type, interruptible), in [`labels::RESERVATION_LABELS`]' order.
    reservation: [Option<&'r Requirement>; 3],
}

impl<'r> OfferingFilter<'r> {
    pub fn new(reqs: &'r Requirements) -> Self {
        OfferingFilter {
            zone: reqs.get(labels::ZONE),
            capacity_type: reqs.get(labels::CAPACITY_TYPE),
            zone_id: reqs.get(labels::ZONE_ID),
            reservation: labels::RESERVATION_LABELS.map(|k| reqs.get(k)),
        }
    }

    /// Whether the requirements allow this offering's zone, capacity type, zone id and
    /// reservation (its id, type and interruptibility). An offering outside any reservation has
    /// none of the reservation labels, which a requirement listing values (`In`) rules out, as
    /// Karpenter's `DoesNotExist` on such offerings.
    pub fn allows(&self, o: &PoolOffering) -> bool {
        self.zone.is_none_or(|r| r.has(&o.zone))
            && self.capacity_type.is_none_or(|r| r.has(o.capacity_type.as_str()))
            && self.zone_id.is_none_or(|r| r.has(&o.zone_id))
            && (self.reservation.iter().all(Option::is_none) || self.allows_reservation(o.reservation.as_deref()))
    }

    fn allows_reservation(&self, reservation: Option<&Reservation>) -> bool {
        let values = reservation.map(|r| r.labels());
        self.reservation.iter().enumerate().all(|(i, req)| {
            req.is_none_or(|req| match &values {
                Some(v) => req.has(&v[i].1),
                None => req.complement || req.values.is_empty(),
            })
        })
    }
}

impl PoolOffering {
    /// Whether topology pins (`key = value`) allow this offering.
    pub fn allowed_by_pins(&self, pins: &[(&str, &str)]) -> bool {
        pins.iter().all(|(k, v)| match *k {
            labels::ZONE => &*self.zone == *v,
            labels::ZONE_ID => &*self.zone_id == *v,
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
    /// The type's requirements under the pool's class where they differ from the catalog's (a
    /// Windows class: its OS and build; a class with reservations of the type: `reserved` among
    /// its capacity types); read them through [`PoolType::requirements`].
    pub os_requirements: Option<Arc<Requirements>>,
    /// Allocatable minus the DaemonSet pods that would run on it: what pending pods can use.
    pub free: Resources,
    /// Full allocatable (what the plan reports).
    pub allocatable: Resources,
    /// What a node of this type counts against the pool's limits (its [`limit_share`]).
    pub capacity: Resources,
    pub offerings: Vec<PoolOffering>,
    /// Host ports the DaemonSet pods that would run on it hold: no pending pod may use them there.
    pub ports: Vec<HostPort>,
}

impl PoolType {
    /// The labels a node of this type and pool carries, as requirements (what pods are matched
    /// against and the claim is labelled with).
    pub fn requirements<'c>(&'c self, catalog: &'c Catalog) -> &'c Requirements {
        self.os_requirements.as_deref().unwrap_or(&catalog.types[self.catalog].requirements)
    }

    /// Whether pods with these host ports can run beside the type's DaemonSet pods.
    pub fn ports_free(&self, ports: &[HostPort]) -> bool {
        !ports.iter().any(|p| self.ports.iter().any(|q| p.conflicts(q)))
    }

    pub fn has_offering(&self, allowed: &OfferingFilter<'_>) -> bool {
        self.offerings.iter().any(|o| allowed.allows(o))
    }

    /// Cheapest offering allowed by several requirement sets and pins at once (reserved, then
    /// spot, then on-demand: Karpenter's launch order), without building their intersection.
    pub fn best_offering_all(&self, allowed: &[OfferingFilter<'_>], pins: &[(&str, &str)]) -> Option<&PoolOffering> {
        self.best_offering_where(allowed, pins, |_| true)
    }

    /// [`PoolType::best_offering_all`] among the offerings that are bought (spot, then on-demand):
    /// what a claim costs when no reservation takes it. The pass chooses what to buy at these
    /// prices; a reserved offering's nominal price says nothing about that once its reservation
    /// is taken (see `reservations.rs`).
    pub fn best_bought_offering(&self, allowed: &[OfferingFilter<'_>], pins: &[(&str, &str)]) -> Option<&PoolOffering> {
        self.best_offering_where(allowed, pins, |o| o.reservation.is_none())
    }

    fn best_offering_where(
        &self,
        allowed: &[OfferingFilter<'_>],
        pins: &[(&str, &str)],
        keep: impl Fn(&PoolOffering) -> bool,
    ) -> Option<&PoolOffering> {
        let rank = |o: &PoolOffering| launch_rank(o.capacity_type);
        self.offerings
            .iter()
            .filter(|o| keep(o) && o.allowed_by_pins(pins) && allowed.iter().all(|f| f.allows(o)))
            .min_by(|a, b| rank(a).cmp(&rank(b)).then(a.price.total_cmp(&b.price)))
    }

    /// Whether the type has offerings in a capacity reservation.
    pub fn has_reserved(&self) -> bool {
        self.offerings.iter().any(|o| o.reservation.is_some())
    }
}

/// The indices of `n` items that no other beats (`beats(a, b)`: `a` is at least as good as `b` on
/// every count), in order; of items that beat each other, the first is kept. Lazy: callers that
/// want the first few stop there.
pub(crate) fn undominated(n: usize, beats: impl Fn(usize, usize) -> bool) -> impl Iterator<Item = usize> {
    (0..n).filter(move |&i| !(0..n).any(|j| j != i && beats(j, i) && (j < i || !beats(i, j))))
}

/// The order capacity types are launched in when a claim allows several.
pub(crate) fn launch_rank(ct: CapacityType) -> u8 {
    match ct {
        CapacityType::Reserved => 0,
        CapacityType::Spot => 1,
        CapacityType::OnDemand => 2,
    }
}

pub(crate) struct PreparedPool<'a> {
    pub pool: &'a NodePool,
    /// The pool's requirements plus `dovetail.dev/nodepool In [name]`, so pods selecting a pool by
    /// name (either spelling) go to that pool only.
    pub requirements: Requirements,
    /// Why the pool cannot launch anything at all (missing EC2NodeClass, no types), if so.
    pub broken: Option<String>,
    /// Shared with the [`SolveCache`](super::SolveCache) that prepared them.
    pub types: Arc<Vec<PoolType>>,
    /// Limits minus current usage; `None` for resources without a limit.
    pub remaining: Option<Vec<(String, i64)>>,
    /// Reserved by claims opened in this pass.
    pub reserved: Resources,
    /// Whether any requirement carries `minValues` (then filling checks type diversity).
    pub has_min_values: bool,
}

impl PreparedPool<'_> {
    /// Whether `capacity` still fits under the pool's limits after what is reserved, and under the
    /// cluster-wide cost limit beside what every pool reserved (`spend`).
    pub fn within_limits(&self, capacity: &Resources, spend: &ClusterSpend) -> Result<(), LimitRefusal> {
        if let Some(remaining) = &self.remaining {
            for (name, left) in remaining {
                let want = self.reserved.get(name) + capacity.get(name);
                if want > *left {
                    let message = format!(
                        "limit on {name} reached ({} of {} left)",
                        fmt_resource(name, (*left - self.reserved.get(name)).max(0)),
                        fmt_resource(name, self.pool.limits.get(name).copied().unwrap_or(0))
                    );
                    return Err(LimitRefusal { cost: name == LIMIT_COST, message });
                }
            }
        }
        // Checked for every candidate type: without a cluster-wide limit, not even the cost is read.
        if spend.limit.is_none() {
            return Ok(());
        }
        spend.allows(capacity.get(LIMIT_COST)).map_err(|message| LimitRefusal { cost: true, message })
    }
}

/// A launch a limit refuses: whether it is a cost limit (the pool's or the cluster-wide one, which
/// the pool is told of: see [`super::Plan::cost_limited`]), and the sentence a waiting pod is told.
#[derive(Debug, Clone)]
pub(crate) struct LimitRefusal {
    pub cost: bool,
    pub message: String,
}

/// The cluster-wide cost limit ([`crate::snapshot::CostLimit`]) through one pass: what the claims
/// the pass opens hold against it, in every pool. A pool's own limits are its
/// [`PreparedPool::remaining`]; this one is shared, so it lives beside the pools.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClusterSpend {
    limit: Option<CostLimit>,
    /// Micro-dollars per hour the pass's new claims hold.
    pub reserved: i64,
}

impl ClusterSpend {
    pub fn new(limit: Option<CostLimit>) -> Self {
        ClusterSpend { limit, reserved: 0 }
    }

    /// Whether a cluster-wide cost limit is set.
    pub fn is_limited(&self) -> bool {
        self.limit.is_some()
    }

    /// Whether `cost` more micro-dollars per hour fit under the limit beside what is running and
    /// what the pass holds; if not, the sentence a waiting pod is told.
    pub fn allows(&self, cost: i64) -> Result<(), String> {
        let Some(l) = self.limit else { return Ok(()) };
        let left = l.limit - l.usage - self.reserved;
        if cost > left {
            return Err(format!(
                "the cluster-wide cost limit is reached ({} of {} left)",
                format_cost(left.max(0)),
                format_cost(l.limit)
            ));
        }
        Ok(())
    }
}

pub(crate) fn fmt_resource(name: &str, v: i64) -> String {
    match name {
        crate::resources::CPU => crate::resources::format_cpu(v),
        crate::resources::MEMORY | crate::resources::EPHEMERAL_STORAGE => crate::resources::format_bytes(v),
        LIMIT_COST => format_cost(v),
        _ => v.to_string(),
    }
}

/// Whether a DaemonSet's pods would run on a node of this pool and type.
fn daemon_runs_on(ds: &Pod, pool: &NodePool, pool_reqs: &Requirements, type_reqs: &Requirements) -> bool {
    tolerates_all(&ds.tolerations, &pool.taints).is_ok()
        && ds.node_affinity.iter().any(|term| pool_reqs.overlaps(term) && type_reqs.overlaps(term))
}

/// A pool's prepared types: (why it cannot launch anything, if so; its types).
pub(crate) type CachedPool = (Option<String>, Arc<Vec<PoolType>>);

/// What a pool fit depends on besides the pool (its index in the pass's pool order): the rung's
/// node requirements, the pod's requests, tolerations and host ports, whether PreferNoSchedule
/// taints still count, and whether the pod's required node affinity can match anything at all.
pub(crate) type FitKey =
    (u32, Requirements, Resources, Vec<crate::model::Toleration>, Vec<crate::model::HostPort>, bool, bool);

/// The pools in the order a pass tries them (highest weight first, then name, so the order never
/// depends on input order), each with its types from `types_of` (given the pool and its
/// requirements with the pool's name added) and what is left under its limits.
pub(crate) fn prepare<'a>(
    pools: &'a [NodePool],
    mut types_of: impl FnMut(usize, &NodePool, &Requirements) -> CachedPool,
) -> Vec<PreparedPool<'a>> {
    let mut order: Vec<&NodePool> = pools.iter().collect();
    order.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.name.cmp(&b.name)));
    order
        .into_iter()
        .enumerate()
        .map(|(index, pool)| {
            let remaining = (!pool.limits.is_empty())
                .then(|| pool.limits.iter().map(|(n, l)| (n.clone(), l - pool.usage.get(n))).collect::<Vec<_>>());
            let mut requirements = pool.requirements.clone();
            requirements.add(Requirement::single(labels::NODEPOOL, &pool.name));
            let has_min_values = pool.requirements.iter().any(|r| r.min_values.is_some());
            let (broken, types) = types_of(index, pool, &requirements);
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
pub(crate) fn pool_types(
    pool: &NodePool,
    requirements: &Requirements,
    kubelet: Option<&KubeletConfig>,
    daemonsets: &[DaemonSet],
    catalog: &Catalog,
    unavailable: &BTreeSet<OfferingKey>,
    reservations: &[Reservation],
) -> CachedPool {
    let Some(kubelet) = kubelet else {
        return (Some(format!("its EC2NodeClass {:?} does not exist", pool.node_class)), Arc::new(vec![]));
    };
    let allowed = OfferingFilter::new(requirements);
    let mut zones: Vec<(Arc<str>, Arc<str>)> = Vec::new();
    let mut zone = |name: &str| -> (Arc<str>, Arc<str>) {
        if let Some(z) = zones.iter().find(|(n, _)| &**n == name) {
            return z.clone();
        }
        let z: (Arc<str>, Arc<str>) = (name.into(), catalog.zone_id(name).unwrap_or_default().into());
        zones.push(z.clone());
        z
    };
    let mut types = Vec::new();
    for (i, t) in catalog.types.iter().enumerate() {
        // As the class's OS runs on the type; a type its OS does not run on is not offered.
        let Some(type_reqs) = t.requirements_for(kubelet.os) else { continue };
        // The class's reservations of this type add its `reserved` offerings (in their zones).
        let own: Vec<&Reservation> = reservations.iter().filter(|r| r.instance_type == t.name).collect();
        let type_reqs = if own.is_empty() { type_reqs } else { Cow::Owned(with_reserved(&type_reqs, &own)) };
        if !requirements.overlaps(&type_reqs) {
            continue;
        }
        // This type's offerings marked unavailable (the set is ordered by type first; no key is
        // built while the set is empty, as it nearly always is).
        let down: Vec<&OfferingKey> = if unavailable.is_empty() {
            vec![]
        } else {
            let first =
                OfferingKey { instance_type: t.name.clone(), zone: String::new(), capacity_type: CapacityType::Spot };
            unavailable.range(first..).take_while(|k| k.instance_type == t.name).collect()
        };
        let mut offerings: Vec<PoolOffering> = t
            .offerings
            .iter()
            .filter(|o| o.available)
            .filter(|o| !down.iter().any(|k| k.zone == o.zone && k.capacity_type == o.capacity_type))
            .map(|o| {
                let (zone, zone_id) = zone(&o.zone);
                let price = t.price(o, kubelet.os);
                PoolOffering { zone, zone_id, capacity_type: o.capacity_type, price, reservation: None }
            })
            .filter(|o| allowed.allows(o))
            .collect();
        // The class's reservations of this type (each with instances left: the snapshot holds no
        // other), priced from the type's on-demand price in the reservation's zone.
        for r in own {
            if down.iter().any(|k| k.zone == r.zone && k.capacity_type == CapacityType::Reserved) {
                continue;
            }
            let price = catalog.offering_price(&t.name, &r.zone, CapacityType::Reserved, kubelet.os);
            let (zone, zone_id) = zone(&r.zone);
            let o = PoolOffering {
                zone,
                zone_id,
                capacity_type: CapacityType::Reserved,
                // Without an on-demand price to derive it from, free (as Karpenter leaves it).
                price: price.unwrap_or(0.0),
                reservation: Some(Arc::new(r.clone())),
            };
            if allowed.allows(&o) {
                offerings.push(o);
            }
        }
        if offerings.is_empty() {
            continue;
        }
        let allocatable = t.allocatable(kubelet);
        let mut free = allocatable.clone();
        let mut ports = Vec::new();
        for ds in daemonsets {
            if daemon_runs_on(&ds.pod, pool, requirements, &type_reqs) {
                free.sub(&ds.pod.requests);
                ports.extend(ds.pod.host_ports.iter().cloned());
            }
        }
        if free.cpu <= 0 || free.memory <= 0 || free.pods <= 0 {
            continue;
        }
        // Held at its dearest offering here: the claim may be launched as any of them.
        let dearest = offerings.iter().map(|o| o.price).fold(0.0, f64::max);
        let capacity = limit_share(&t.capacity(kubelet), dearest);
        let os_requirements = match type_reqs {
            Cow::Owned(r) => Some(Arc::new(r)),
            Cow::Borrowed(_) => None,
        };
        types.push(PoolType { catalog: i, os_requirements, free, allocatable, capacity, offerings, ports });
    }
    let broken =
        types.is_empty().then(|| "no instance type satisfies its requirements with an available offering".to_string());
    (broken, Arc::new(types))
}

/// A type's requirements with its reserved offerings added: `reserved` among its capacity
/// types, the reservations' zones among its zones.
fn with_reserved(reqs: &Requirements, reservations: &[&Reservation]) -> Requirements {
    let mut out = reqs.clone();
    let mut widen = |key: &str, extra: Vec<&str>| {
        let Some(r) = out.get(key).filter(|r| !r.complement) else { return };
        let mut values: Vec<&str> = r.values.iter().map(String::as_str).collect();
        values.extend(extra);
        let widened = Requirement::new(key, crate::requirements::Operator::In, &values).expect("at least one value");
        out.remove(key);
        out.add(widened);
    };
    widen(labels::CAPACITY_TYPE, vec![CapacityType::Reserved.as_str()]);
    widen(labels::ZONE, reservations.iter().map(|r| r.zone.as_str()).collect());
    out
}

/// A pool fit, or why the pool cannot take the class at that level. Shared: classes with the same
/// fit key, and later solves over the same inputs, use one.
pub(crate) type FitResult = Result<Arc<PoolFit>, String>;

/// Per (class, level, pool): the pool's requirements narrowed by the pod's and the types that fit,
/// with what is worked out from those alone, once (`bound::frontier`, `targets::best_buys`).
#[derive(Debug)]
pub(crate) struct PoolFit {
    pub reqs: Requirements,
    /// Indices into the pool's prepared types, ascending.
    pub types: Vec<u32>,
    pub frontier: OnceLock<Frontier>,
    /// The frontier at the prices of offerings that are bought (see `bound::bought_frontier`);
    /// `None` when no type of the fit has a reserved offering, so the one above is it.
    pub bought: OnceLock<Option<Frontier>>,
    /// The best buys by size (indices into the pool's types, ascending).
    pub buys: OnceLock<Vec<u32>>,
}

/// A fit's types as unit prices `[per cpu, per memory, per pod]`, dominated ones dropped, and
/// the cheapest price of any of them.
#[derive(Debug)]
pub(crate) struct Frontier {
    pub units: Vec<[f64; 3]>,
    /// The pool type index of each entry of `units`.
    pub types: Vec<u32>,
    pub cheapest: f64,
}

impl PoolFit {
    pub fn new(reqs: Requirements, types: Vec<u32>) -> PoolFit {
        PoolFit { reqs, types, frontier: OnceLock::new(), bought: OnceLock::new(), buys: OnceLock::new() }
    }

    pub fn has_type(&self, t: usize) -> bool {
        self.types.binary_search(&(t as u32)).is_ok()
    }
}
