//! Provisioning: the live cluster in, launches for its pending pods out.
//!
//! The provisioner Lambda (and the sweeper's safety net) call [`plan`] on what they just read.
//! Capacity already on its way counts: claims that have not registered a Node yet are in-flight
//! nodes the scheduler fills first, so a redelivered doorbell or a second pass over the same
//! pending pods plans nothing new for them. Pool usage for `limits` counts every claim that is not
//! Terminated. Every function here is pure; [`crate::reconcile`] carries the launches out.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::catalog::{CapacityType, Catalog, Offer, OfferingKey, Reservation};
use crate::cluster::{is_leaving, leaving, node_of, Cluster};
use crate::decision::{Action, Decision};
use crate::events;
use crate::hash::{fnv1a64, nodepool_hash};
use crate::labels;
use crate::model::{limit_share, DaemonSet, Node, NodeKind, NodeOs, NodePool, Taint, LIMIT_COST};
use crate::nodeclaim::{Hashes, NodeClaim, Phase};
use crate::requirements::{Operator, Requirement};
use crate::reservations::{self, claim_reservation};
use crate::resources::Resources;
use crate::scheduler::{schedule_cached, CatalogRef, PlannedClaim, SolveCache};
use crate::snapshot::{CostLimit, Snapshot};
use crate::time::Time;

/// CreateFleet takes at most this many overrides; the cheapest offers go first.
pub const MAX_OFFERS: usize = 60;

/// The instance type a claim stands for: what it launched as, else its cheapest candidate.
pub fn claim_type<'a>(claim: &NodeClaim, catalog: &'a Catalog) -> Option<&'a crate::catalog::InstanceType> {
    let name =
        claim.launch.as_ref().map(|l| l.instance_type.as_str()).or(claim.instance_types.first().map(String::as_str));
    name.and_then(|n| catalog.get(n))
}

/// Capacity that is coming but has no Node yet, as the scheduler sees it: the pool's taints
/// (startup taints go away once it is up), the DaemonSet pods that will land on it, nothing else.
pub fn inflight_node(
    name: &str,
    labels_of: &BTreeMap<String, String>,
    allocatable: Resources,
    price: Option<f64>,
    pool: Option<&NodePool>,
    daemonsets: &[DaemonSet],
) -> Node {
    let mut labels = labels_of.clone();
    labels.insert(labels::HOSTNAME.into(), name.to_string());
    let mut node = Node::new(name, labels, allocatable);
    node.kind = NodeKind::InFlight;
    node.price = price;
    node.taints = pool.map(|p| p.taints.clone()).unwrap_or_default();
    for ds in daemonsets {
        if crate::model::tolerates_all(&ds.pod.tolerations, &node.taints).is_ok()
            && ds.pod.node_affinity.iter().any(|a| a.matches_labels(&node.labels))
        {
            let mut p = ds.pod.clone();
            p.name = format!("{}-{}", ds.name, name);
            p.node_name = Some(name.to_string());
            node.pods.push(Arc::new(p));
        }
    }
    node
}

/// The labels a claim's node will carry: the planned ones, corrected by what EC2 actually gave.
fn claim_labels(claim: &NodeClaim) -> BTreeMap<String, String> {
    let mut labels = claim.labels.clone();
    if let Some(l) = &claim.launch {
        labels.insert(labels::INSTANCE_TYPE.into(), l.instance_type.clone());
        labels.insert(labels::ZONE.into(), l.zone.clone());
        labels.insert(labels::CAPACITY_TYPE.into(), l.capacity_type.as_str().into());
    }
    labels.insert(labels::NODECLAIM.into(), claim.name.clone());
    labels.insert(labels::NODEPOOL.into(), claim.nodepool.clone());
    labels
}

/// Each pool's usage for its `limits`: the [`limit_share`] (capacity and one node) of every claim
/// of the pool that is not Terminated (Karpenter counts nodes being deleted until they are gone),
/// plus registered nodes of the pool that no claim owns (adopted or hand-made).
pub fn pool_usage(cluster: &Cluster, catalog: &Catalog) -> BTreeMap<String, Resources> {
    let mut usage: BTreeMap<String, Resources> = BTreeMap::new();
    let mut counted: BTreeSet<&str> = BTreeSet::new();
    for c in cluster.claims.iter().filter(|c| c.phase != Phase::Terminated) {
        usage.entry(c.nodepool.clone()).or_default().add(&claim_limit_share(c, cluster, catalog));
        counted.insert(c.name.as_str());
        counted.extend(c.node_name.as_deref());
    }
    let unowned = cluster.nodes.iter().filter(|n| {
        let claim = n.labels.get(labels::NODECLAIM).map(String::as_str);
        !counted.contains(n.name.as_str()) && !claim.is_some_and(|c| counted.contains(c))
    });
    add_unowned_nodes(&mut usage, unowned, catalog);
    usage
}

/// Adds to `usage` what registered nodes that no claim owns count against the limits of the pool
/// their `dovetail.dev/nodepool` label names: the [`limit_share`] of their allocatable at their
/// [`node_price`]. Nodes without the label are not a pool's.
fn add_unowned_nodes<'a>(
    usage: &mut BTreeMap<String, Resources>,
    nodes: impl IntoIterator<Item = &'a Node>,
    catalog: &Catalog,
) {
    for n in nodes {
        if let Some(pool) = n.labels.get(labels::NODEPOOL) {
            usage.entry(pool.clone()).or_default().add(&limit_share(&n.allocatable, node_price(n, catalog)));
        }
    }
}

/// Counts the nodes of a snapshot made without claims (`dovetail plan`'s, read from manifests: a
/// cluster dump has Nodes, and Dovetail's NodeClaims live outside the cluster) against the limits,
/// with the functions' rule for a node no claim owns (see [`pool_usage`]): each pool's `usage`,
/// and the cluster-wide cost limit `limit` (none when `None`) with what every node costs, nodes of
/// pools not in the snapshot included. `catalog` prices them, NodeOverlays applied.
pub fn count_nodes(snap: &mut Snapshot, catalog: &Catalog, limit: Option<i64>) {
    let mut usage = BTreeMap::new();
    add_unowned_nodes(&mut usage, &snap.nodes, catalog);
    for pool in &mut snap.nodepools {
        pool.usage = usage.get(&pool.name).cloned().unwrap_or_default();
    }
    snap.cost_limit = cost_limit_of(limit, &usage);
}

/// The cluster-wide cost limit as the scheduler checks it: the setting and what every pool's
/// capacity costs now (the sum of their [`pool_usage`], pools since deleted included: their nodes
/// are still paid for). `None` when no cluster-wide limit is set.
pub fn cost_limit(cluster: &Cluster, catalog: &Catalog) -> Option<CostLimit> {
    cluster.cost_limit?;
    cost_limit_of(cluster.cost_limit, &pool_usage(cluster, catalog))
}

/// The cluster-wide cost limit `limit` against the pools' usage already counted.
fn cost_limit_of(limit: Option<i64>, usage: &BTreeMap<String, Resources>) -> Option<CostLimit> {
    Some(CostLimit { limit: limit?, usage: usage.values().map(|u| u.get(LIMIT_COST)).sum() })
}

/// What a claim counts against its pool's limits: its type's capacity (what it launched as, else
/// its cheapest candidate; none when the catalog does not know the type), its one node, which
/// counts whatever the type, and its [`claim_price`].
pub fn claim_limit_share(claim: &NodeClaim, cluster: &Cluster, catalog: &Catalog) -> Resources {
    let os = cluster.kubelet_of(&claim.nodeclass).os;
    let capacity = claim_type(claim, catalog).map(|t| t.capacity(&cluster.kubelet_of(&claim.nodeclass)));
    limit_share(&capacity.unwrap_or_default(), claim_price(claim, catalog, os))
}

/// What a claim costs per hour as the cost limits count it: the price it launched at, recorded by
/// the launch; before that, the dearest offering CreateFleet may still pick for it (any of its
/// candidate types, in the zones and capacity types its requirements allow), so no launch can
/// come out above what was held for it.
pub fn claim_price(claim: &NodeClaim, catalog: &Catalog, os: NodeOs) -> f64 {
    if let Some(l) = &claim.launch {
        return l.price;
    }
    let zones = claim.requirements.get(labels::ZONE);
    let capacity = claim.requirements.get(labels::CAPACITY_TYPE);
    claim
        .instance_types
        .iter()
        .filter_map(|n| catalog.get(n))
        .flat_map(|t| t.offerings.iter().map(move |o| (t, o)))
        .filter(|(_, o)| zones.is_none_or(|z| z.has(&o.zone)))
        .filter(|(_, o)| capacity.is_none_or(|c| c.has(o.capacity_type.as_str())))
        .map(|(t, o)| t.price(o, os))
        .fold(0.0, f64::max)
}

/// What a Node no claim owns costs per hour: its own price when known, else the catalog's for its
/// type, zone and capacity type labels (at the Linux price: the class that made it is unknown);
/// nothing when neither says.
fn node_price(n: &Node, catalog: &Catalog) -> f64 {
    if let Some(price) = n.price {
        return price;
    }
    let label = |k: &str| n.labels.get(k).map(String::as_str);
    let (Some(instance_type), Some(zone), Some(capacity)) =
        (label(labels::INSTANCE_TYPE), label(labels::ZONE), label(labels::CAPACITY_TYPE))
    else {
        return 0.0;
    };
    let Some(capacity) = CapacityType::parse(capacity) else { return 0.0 };
    catalog.offering_price(instance_type, zone, capacity, NodeOs::Linux).unwrap_or(0.0)
}

/// What a claim's node offers pods once up: its type's allocatable under its class's kubelet.
fn claim_allocatable(claim: &NodeClaim, cluster: &Cluster, catalog: &Catalog) -> Option<Resources> {
    claim_type(claim, catalog).map(|t| t.allocatable(&cluster.kubelet_of(&claim.nodeclass)))
}

/// What the scheduler plans from: pending pods; registered nodes (leaving ones unschedulable);
/// live claims without a Node as in-flight nodes; pools with their usage.
pub fn snapshot(cluster: &Cluster, catalog: &Catalog) -> Snapshot {
    let leaving = leaving(cluster);
    // A claim's node that is still coming up sheds `dovetail.dev/unregistered`, its startup
    // taints and the control plane's not-ready (every new Node gets it) within seconds, and may
    // not have reported its allocatable yet: planning around what it shows now would launch a
    // second node for pods that are about to land on this one. Until Initialized it offers what
    // its claim's type offers (as Karpenter's state node takes its NodeClaim's allocatable).
    let coming_up: BTreeMap<&str, &NodeClaim> = cluster
        .claims
        .iter()
        .filter(|c| c.phase < Phase::Initialized)
        .filter_map(|c| node_of(c, cluster).map(|n| (n.name.as_str(), c)))
        .collect();
    let mut nodes: Vec<Node> = cluster
        .nodes
        .iter()
        .map(|n| {
            let mut n = n.clone();
            n.unschedulable |= is_leaving(&n, &leaving);
            if let Some(c) = coming_up.get(n.name.as_str()) {
                n.taints.retain(|t| {
                    t.key != labels::TAINT_UNREGISTERED
                        && !t.is_ephemeral()
                        && !c.startup_taints.iter().any(|s| s.key == t.key && s.effect == t.effect)
                });
                if let Some(allocatable) = claim_allocatable(c, cluster, catalog) {
                    n.allocatable = allocatable;
                }
            }
            n
        })
        .collect();
    for c in cluster.claims.iter().filter(|c| c.is_live() && node_of(c, cluster).is_none()) {
        let Some(allocatable) = claim_allocatable(c, cluster, catalog) else { continue };
        let pool = cluster.nodepools.iter().find(|p| p.name == c.nodepool);
        let price = c.launch.as_ref().map(|l| l.price);
        nodes.push(inflight_node(&c.name, &claim_labels(c), allocatable, price, pool, &cluster.daemonsets));
    }
    let usage = pool_usage(cluster, catalog);
    let nodepools = cluster
        .launchable_pools()
        .map(|p| {
            let mut pool = NodePool { usage: usage.get(&p.name).cloned().unwrap_or_default(), ..p.clone() };
            // A pool launches only where its class has subnets (Karpenter narrows offerings the
            // same way): planning elsewhere would pick offerings no launch can use.
            if let Some(zones) = class_zones(cluster, &p.node_class) {
                pool.requirements.add(Requirement::new(labels::ZONE, Operator::In, zones).expect("zone names"));
            }
            pool
        })
        .collect();
    Snapshot {
        pods: cluster.pending.clone(),
        nodes,
        daemonsets: cluster.daemonsets.clone(),
        nodepools,
        nodeclasses: cluster.nodeclasses.clone(),
        unavailable: cluster.unavailable.clone(),
        namespaces: cluster.namespaces.clone(),
        min_values_policy: cluster.min_values_policy,
        cost_limit: cost_limit_of(cluster.cost_limit, &usage),
        reservations: reservations::open(cluster),
    }
}

/// The zones the resolved class `name` has subnets in, when known.
fn class_zones<'a>(cluster: &'a Cluster, name: &str) -> Option<&'a [String]> {
    cluster.resolved.iter().find(|r| r.name == name).map(|r| r.zones.as_slice()).filter(|z| !z.is_empty())
}

/// A claim name no earlier decision used: the pool's name and a short hash of the moment and the
/// pods it is for (Karpenter uses `<pool>-<random>`; a hash keeps the simulator reproducible).
pub fn claim_name(pool: &str, now: Time, pods: &[String], index: usize, taken: &BTreeSet<String>) -> String {
    let mut salt = 0u64;
    loop {
        let text = format!("{}|{}|{}|{}", now.millis(), index, salt, pods.join(","));
        let h = fnv1a64(text.as_bytes());
        let name = format!("{pool}-{}", base36(h, 6));
        if !taken.contains(&name) {
            return name;
        }
        salt += 1;
    }
}

fn base36(mut v: u64, len: usize) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::with_capacity(len);
    for _ in 0..len {
        out.push(DIGITS[(v % 36) as usize]);
        v /= 36;
    }
    String::from_utf8(out).expect("ascii")
}

/// Launches for the pending pods, with an Event for each pod they are for and for each pod no
/// pool can run.
pub fn plan(cluster: &Cluster, catalog: &Catalog) -> Vec<Decision> {
    plan_cached(cluster, catalog, &SolveCache::new())
}

/// [`plan`], reusing what earlier solves with `cache` prepared from the same pools, classes,
/// DaemonSets, unavailable offerings and catalog (a warm provisioner keeps one: see
/// [`SolveCache`]).
pub fn plan_cached<'c>(cluster: &Cluster, catalog: impl Into<CatalogRef<'c>>, cache: &SolveCache<'c>) -> Vec<Decision> {
    // The snapshot's pods are the pending ones: with none, skip copying every node into it (the
    // sweeper asks every minute, mostly with nothing pending).
    if cluster.pending.is_empty() {
        return vec![];
    }
    let catalog = catalog.into();
    let snap = snapshot(cluster, catalog.get());
    let plan = schedule_cached(&snap, catalog, cache);
    let mut taken: BTreeSet<String> = cluster.claims.iter().map(|c| c.name.clone()).collect();
    let mut out = Vec::new();
    for (i, planned) in plan.nodeclaims.iter().enumerate() {
        let mut p = planned.clone();
        p.name = claim_name(&planned.nodepool, cluster.now, &planned.pods, i, &taken);
        taken.insert(p.name.clone());
        p.labels.insert(labels::NODECLAIM.into(), p.name.clone());
        let why = format!(
            "launch {} ({} {} in {}, ${:.4}/h, {} candidate types) for {} pending pod{}",
            p.name,
            p.instance_type,
            p.capacity_type,
            p.zone,
            p.price_per_hour,
            p.instance_types.len(),
            p.pods.len(),
            if p.pods.len() == 1 { "" } else { "s" }
        );
        let nominated: Vec<Decision> = p
            .pods
            .iter()
            .map(|pod| {
                Decision::event(
                    Some(&p.name),
                    format!("Pod/{pod}"),
                    events::NOMINATED,
                    format!(
                        "Pod should schedule on: nodeclaim/{} ({} {} in {})",
                        p.name, p.instance_type, p.capacity_type, p.zone
                    ),
                )
            })
            .collect();
        out.push(Decision::act(Some(&p.name.clone()), Action::Launch(Box::new(p)), why));
        out.extend(nominated);
    }
    // Pools left out for their class are not in the scheduler's reasons: say so beside them.
    let unready: Vec<String> = cluster
        .nodepools
        .iter()
        .filter(|p| !p.deleting)
        .filter_map(|p| {
            let why = cluster.class_not_ready(&p.node_class)?;
            Some(format!("NodePool {} is not used while its EC2NodeClass {} is not ready: {why}", p.name, p.node_class))
        })
        .collect();
    for u in &plan.unschedulable {
        let mut message = format!("Dovetail cannot launch capacity for it: {}", u.reason);
        for why in &unready {
            message.push_str("; ");
            message.push_str(why);
        }
        out.push(Decision::event(None, format!("Pod/{}", u.pod), events::FAILED_SCHEDULING, message));
    }
    for (pool, why) in &plan.cost_limited {
        let message = format!("pods go to another pool or wait: {why}");
        out.push(Decision::event(None, format!("NodePool/{pool}"), events::COST_LIMIT_REACHED, message));
    }
    out
}

/// The claim intent written before CreateFleet: everything the launch and later drift checks need,
/// copied from the plan, the pool and the class as they are now.
pub fn intent(planned: &PlannedClaim, cluster: &Cluster, now: Time) -> NodeClaim {
    let pool = cluster.nodepools.iter().find(|p| p.name == planned.nodepool);
    let class = pool.map(|p| p.node_class.clone()).unwrap_or_default();
    let mut c = NodeClaim::launching(&planned.name, &planned.nodepool, &class, now);
    c.requirements = planned.requirements.clone();
    c.instance_types = planned.instance_types.clone();
    c.labels = planned.labels.clone();
    c.taints = pool.map(|p| p.taints.clone()).unwrap_or_else(|| planned.taints.clone());
    c.startup_taints = pool.map(|p| p.startup_taints.clone()).unwrap_or_default();
    c.pods = planned.pods.clone();
    c.hashes = Hashes {
        nodepool: pool
            .map(|p| cluster.nodepool_hashes.get(&p.name).cloned().unwrap_or_else(|| nodepool_hash(p)))
            .unwrap_or_default(),
        nodeclass: cluster.resolved.iter().find(|r| r.name == class).map(|r| r.hash.clone()).unwrap_or_default(),
    };
    c.expire_after = pool.and_then(|p| p.expire_after);
    c.termination_grace_period = pool.and_then(|p| p.termination_grace_period);
    c
}

/// What an instance EC2 launched costs per hour on a node of `os`: the catalog's offering for its
/// type, zone and capacity type, priced for the OS ([`crate::catalog::InstanceType::price`]);
/// `None` when the catalog has no such offering. A launch found again by its tag after a crash is
/// priced by the cloud adapter, which knows the instance but not its class, so the Windows licence
/// is added here.
pub fn launch_price(catalog: &Catalog, launch: &crate::nodeclaim::Launch, os: NodeOs) -> Option<f64> {
    catalog.offering_price(&launch.instance_type, &launch.zone, launch.capacity_type, os)
}

/// What CreateFleet may choose from for a claim, in the order to try: one group per capacity type
/// the claim allows (reserved, then spot, then on-demand), each cheapest first and at most
/// [`MAX_OFFERS`] long. Offerings marked unavailable, and those in zones where the class has no
/// subnet (`class_zones`, when known), are left out — so once capacity errors rule out a capacity
/// type in the class's zones, the next group is tried rather than offers no launch could use.
/// Prices are those of the class's OS (`os`).
///
/// The reserved group is the one reservation the plan gave the claim, if it is among
/// `reservations` (the class's, each `available` counting what is left for this claim: see
/// [`reservations::for_launch`]) with an instance left: a full, ended or expiring reservation is
/// never launched into.
pub fn offers(
    claim: &NodeClaim,
    catalog: &Catalog,
    unavailable: &BTreeSet<OfferingKey>,
    class_zones: &[String],
    os: NodeOs,
    reservations: &[Reservation],
) -> Vec<Vec<Offer>> {
    let zones = claim.requirements.get(labels::ZONE);
    let in_class = |zone: &str| class_zones.is_empty() || class_zones.iter().any(|z| z == zone);
    let capacity = claim.requirements.get(labels::CAPACITY_TYPE);
    let mut groups = Vec::new();
    let reserved = claim_reservation(claim)
        .filter(|_| capacity.is_none_or(|r| r.has(CapacityType::Reserved.as_str())))
        .and_then(|id| reservations.iter().find(|r| r.id == id && r.available > 0))
        .filter(|r| zones.is_none_or(|z| z.has(&r.zone)) && in_class(&r.zone))
        .filter(|r| claim.instance_types.contains(&r.instance_type))
        .and_then(|r| {
            catalog.get(&r.instance_type)?;
            let offer = Offer {
                instance_type: r.instance_type.clone(),
                zone: r.zone.clone(),
                capacity_type: CapacityType::Reserved,
                price: catalog.offering_price(&r.instance_type, &r.zone, CapacityType::Reserved, os).unwrap_or(0.0),
                reservation: Some(r.clone()),
            };
            (!unavailable.contains(&offer.key())).then_some(offer)
        });
    groups.extend(reserved.map(|o| vec![o]));
    for ct in [CapacityType::Spot, CapacityType::OnDemand] {
        if capacity.is_some_and(|r| !r.has(ct.as_str())) {
            continue;
        }
        let mut group: Vec<Offer> = claim
            .instance_types
            .iter()
            .filter_map(|n| catalog.get(n))
            .flat_map(|t| t.offerings.iter().map(move |o| (t, o)))
            .filter(|(_, o)| o.available && o.capacity_type == ct && zones.is_none_or(|z| z.has(&o.zone)))
            .filter(|(_, o)| in_class(&o.zone))
            .map(|(t, o)| Offer {
                instance_type: t.name.clone(),
                zone: o.zone.clone(),
                capacity_type: ct,
                price: t.price(o, os),
                reservation: None,
            })
            .filter(|o| !unavailable.contains(&o.key()))
            .collect();
        group.sort_by(|a, b| {
            a.price
                .total_cmp(&b.price)
                .then_with(|| a.instance_type.cmp(&b.instance_type))
                .then_with(|| a.zone.cmp(&b.zone))
        });
        group.truncate(MAX_OFFERS);
        if !group.is_empty() {
            groups.push(group);
        }
    }
    groups
}

/// The taints a claim's node registers with: the pool's, its startup taints, and
/// `dovetail.dev/unregistered:NoExecute` until Dovetail matches the Node to the claim.
pub fn registration_taints(claim: &NodeClaim) -> Vec<Taint> {
    let mut taints = claim.taints.clone();
    taints.extend(claim.startup_taints.iter().cloned());
    taints.push(Taint::new(labels::TAINT_UNREGISTERED, "", crate::model::TaintEffect::NoExecute));
    taints
}
