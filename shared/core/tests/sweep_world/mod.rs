//! A small world for whole-sweep tests: clusters of real instance types built in a few lines, and
//! [`World`], which carries decisions out the way the adapters and the cloud would — conditional
//! claim writes, launches that become instances and then Ready nodes, evictions that respect PDBs,
//! evicted pods that come back pending and are bound first fit. A test fixture, kept obviously
//! correct rather than complete: no DaemonSets, no topology, one instance per launch.

#![allow(dead_code)] // each test binary uses a different part

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use dovetail_core::catalog::{embedded, CapacityType};
use dovetail_core::cluster::{Cluster, Instance};
use dovetail_core::decision::{Action, Decision};
use dovetail_core::hash::nodepool_hash;
use dovetail_core::labels;
use dovetail_core::model::{Budget, BudgetNodes, LabelSelector, Node, NodePool, OwnerKind, Pdb, Pod};
use dovetail_core::nodeclaim::{Hashes, Launch, NodeClaim, Phase, Reason};
use dovetail_core::requirements::{Operator, Requirement};
use dovetail_core::resources::Resources;
use dovetail_core::scheduler::PlannedClaim;
use dovetail_core::time::Time;

pub const MIB: i64 = 1 << 20;

/// 2024-01-01T00:00:00Z, a Monday.
pub const MONDAY: i64 = 1_704_067_200;

pub fn at(day: i64, hour: i64, minute: i64) -> Time {
    Time::from_secs(MONDAY + day * 86_400 + hour * 3600 + minute * 60)
}

pub fn minutes(m: u64) -> Duration {
    Duration::from_secs(m * 60)
}

pub fn budget(nodes: BudgetNodes) -> Budget {
    Budget { nodes, schedule: None, duration: None, reasons: vec![] }
}

/// An on-demand pool of m5 / c5 / r5 types (small enough for fast simulations), consolidating
/// immediately, with these budgets.
pub fn pool(name: &str, budgets: Vec<Budget>) -> NodePool {
    let mut p = NodePool::new(name, "default");
    p.requirements.add(Requirement::new(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]).unwrap());
    p.requirements.add(Requirement::new(labels::INSTANCE_FAMILY, Operator::In, &["m5", "c5", "r5"]).unwrap());
    p.disruption.budgets = budgets;
    p.disruption.consolidate_after = Some(Duration::ZERO);
    p
}

/// A cluster at `now` with these pools and no capacity yet.
pub fn cluster(now: Time, pools: Vec<NodePool>) -> Cluster {
    Cluster {
        now,
        nodepools: pools,
        nodeclasses: vec![dovetail_core::model::NodeClass { name: "default".into(), ..Default::default() }],
        ..Cluster::default()
    }
}

/// A replicated app pod (`app` label from the name's first segment).
pub fn pod(name: &str, cpu_m: i64, mem_mi: i64) -> Pod {
    let mut p = Pod::new("shop", name, Resources::new(cpu_m, mem_mi * MIB));
    p.owner = OwnerKind::ReplicaSet;
    p.labels.insert("app".into(), name.split('-').next().unwrap_or(name).into());
    p
}

/// The pod only runs on `itype` (a required node affinity).
pub fn pinned(mut p: Pod, itype: &str) -> Pod {
    p.node_affinity[0].add(Requirement::single(labels::INSTANCE_TYPE, itype));
    p
}

pub fn do_not_disrupt(mut p: Pod) -> Pod {
    p.annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    p
}

pub fn pdb(app: &str, allowed: i32) -> Pdb {
    Pdb {
        namespace: "shop".into(),
        name: app.into(),
        selector: LabelSelector::from_labels(&[("app", app)]),
        disruptions_allowed: allowed,
    }
}

/// The labels a node of this type, zone and claim carries.
fn node_labels(itype: &str, zone: &str, pool: &str, claim: &str, node: &str) -> BTreeMap<String, String> {
    let t = embedded().get(itype).expect("type in the catalog");
    let mut l = t.requirements.single_valued_labels();
    l.insert(labels::ZONE.into(), zone.into());
    l.insert(labels::CAPACITY_TYPE.into(), "on-demand".into());
    l.insert(labels::NODEPOOL.into(), pool.into());
    l.insert(labels::NODECLAIM.into(), claim.into());
    l.insert(labels::HOSTNAME.into(), node.into());
    l
}

/// An Initialized claim `name` of `pool` running `itype`, launched at `launched`, with its
/// instance and its Ready node `node-<name>` carrying `pods`. Its hashes are the pool's current
/// ones (not drifted) and it never expires unless the test says so.
pub fn add_node(c: &mut Cluster, name: &str, pool: &str, itype: &str, launched: Time, pods: Vec<Pod>) {
    let catalog = embedded();
    let t = catalog.get(itype).expect("type in the catalog");
    let offer = t.offerings.iter().find(|o| o.capacity_type == CapacityType::OnDemand).expect("on-demand offering");
    let node_name = format!("node-{name}");
    let np = c.nodepools.iter().find(|p| p.name == pool).expect("pool");
    let mut claim = NodeClaim::launching(name, pool, &np.node_class, launched);
    claim.phase = Phase::Initialized;
    claim.version = 3;
    claim.hashes = Hashes { nodepool: nodepool_hash(np), nodeclass: String::new() };
    claim.termination_grace_period = np.termination_grace_period;
    claim.node_name = Some(node_name.clone());
    claim.registered_at = Some(launched.plus(Duration::from_secs(60)));
    claim.initialized_at = Some(launched.plus(Duration::from_secs(90)));
    let launch = Launch {
        instance_id: format!("i-{name}"),
        instance_type: itype.into(),
        zone: offer.zone.clone(),
        capacity_type: CapacityType::OnDemand,
        image_id: String::new(),
        subnet_id: String::new(),
        security_groups: vec![],
        price: offer.price,
        launched_at: launched,
    };
    let mut node = Node::new(
        &node_name,
        node_labels(itype, &offer.zone, pool, name, &node_name),
        t.allocatable(&Default::default()),
    );
    node.price = Some(offer.price);
    node.provider_id = Some(launch.provider_id());
    node.pods = pods
        .into_iter()
        .map(|mut p| {
            p.node_name = Some(node_name.clone());
            p.started_at.get_or_insert(launched);
            Arc::new(p)
        })
        .collect();
    c.instances.push(instance(name, itype, &offer.zone, launched));
    claim.launch = Some(launch);
    c.nodes.push(node);
    c.claims.push(claim);
}

fn instance(claim: &str, itype: &str, zone: &str, launched: Time) -> Instance {
    Instance {
        id: format!("i-{claim}"),
        instance_type: itype.into(),
        zone: zone.into(),
        state: "running".into(),
        launched_at: launched,
        tags: BTreeMap::from([(labels::NODECLAIM.to_string(), claim.to_string())]),
        image_id: String::new(),
        subnet_id: String::new(),
        security_groups: vec![],
    }
}

pub fn claim<'a>(c: &'a Cluster, name: &str) -> &'a NodeClaim {
    c.claims.iter().find(|x| x.name == name).unwrap_or_else(|| panic!("no claim {name}"))
}

pub fn claim_mut<'a>(c: &'a mut Cluster, name: &str) -> &'a mut NodeClaim {
    c.claims.iter_mut().find(|x| x.name == name).unwrap_or_else(|| panic!("no claim {name}"))
}

/// Makes a claim drifted (its pool template hash is no longer the one it was launched from).
pub fn drift(c: &mut Cluster, name: &str) {
    claim_mut(c, name).hashes.nodepool = "stale-template".into();
}

/// Makes a claim expire `ago` before `now`.
pub fn expire(c: &mut Cluster, name: &str, ago: Duration) {
    let now = c.now;
    let cl = claim_mut(c, name);
    let born = cl.launch.as_ref().map_or(cl.created_at, |l| l.launched_at);
    cl.expire_after = Some(now.minus(ago).since(born));
}

// ---------------------------------------------------------------------------------------------
// Reading decisions.

pub fn launches(ds: &[Decision]) -> Vec<String> {
    ds.iter()
        .filter_map(|d| match &d.action {
            Some(Action::Launch(p)) => Some(p.name.clone()),
            _ => None,
        })
        .collect()
}

/// Claims a decision list starts disrupting, with the reason.
pub fn disrupted(ds: &[Decision]) -> Vec<(String, Reason)> {
    ds.iter()
        .filter_map(|d| match &d.action {
            Some(Action::WriteClaim(c)) => c.disruption.as_ref().map(|x| (c.name.clone(), x.reason)),
            _ => None,
        })
        .collect()
}

/// The sentences that explain without changing anything: notes, and Events (DisruptionBlocked,
/// Unconsolidatable, …), whose sentence is their message.
pub fn notes(ds: &[Decision]) -> Vec<String> {
    explanations(ds).map(|d| d.why.clone()).collect()
}

pub fn explanations(ds: &[Decision]) -> impl Iterator<Item = &Decision> {
    ds.iter().filter(|d| matches!(d.action, None | Some(Action::Event { .. })))
}

/// The first explanation about `claim`.
pub fn note_on<'a>(ds: &'a [Decision], claim: &str) -> Option<&'a Decision> {
    explanations(ds).find(|d| d.claim.as_deref() == Some(claim))
}

pub fn action_count(ds: &[Decision]) -> usize {
    ds.iter().filter(|d| d.action.is_some()).count()
}

// ---------------------------------------------------------------------------------------------
// The world.

/// The cluster plus what the cloud and the store need to remember.
#[derive(Debug, Clone)]
pub struct World {
    pub cluster: Cluster,
    /// Every claim name that ever existed: a `Launch` of one of these is a duplicate replacement.
    pub names: BTreeSet<String>,
    /// Launched claims the cloud has not started yet, with their plans.
    plans: BTreeMap<String, PlannedClaim>,
    /// Each PDB's allowance with none of its pods pending.
    pdb_base: Vec<i32>,
    /// Pods removed by an eviction or a deletion: (pod, claim of the decision, when).
    pub removed: Vec<(String, Option<String>, Time)>,
}

impl World {
    pub fn new(cluster: Cluster) -> World {
        let names = cluster.claims.iter().map(|c| c.name.clone()).collect();
        let pdb_base = cluster.pdbs.iter().map(|p| p.disruptions_allowed).collect();
        World { cluster, names, plans: BTreeMap::new(), pdb_base, removed: vec![] }
    }

    /// Carries out the first `limit` actions of `decisions` in order (a crash after that), as the
    /// adapters would. An error is something an adapter would have to refuse: a claim write whose
    /// version is not the next one, or a launch of a claim name that already existed.
    pub fn apply(&mut self, decisions: &[Decision], limit: usize) -> Result<(), String> {
        let now = self.cluster.now;
        for d in decisions.iter().filter(|d| d.action.is_some()).take(limit) {
            match d.action.as_ref().expect("filtered") {
                Action::Launch(p) => {
                    if !self.names.insert(p.name.clone()) {
                        return Err(format!("second launch of {}: {}", p.name, d.why));
                    }
                    let pool = self.cluster.nodepools.iter().find(|x| x.name == p.nodepool).expect("pool");
                    let mut c = NodeClaim::launching(&p.name, &p.nodepool, &pool.node_class, now);
                    c.hashes = Hashes { nodepool: nodepool_hash(pool), nodeclass: String::new() };
                    c.expire_after = pool.expire_after;
                    c.termination_grace_period = pool.termination_grace_period;
                    c.instance_types = p.instance_types.clone();
                    c.labels = p.labels.clone();
                    c.pods = p.pods.clone();
                    self.cluster.claims.push(c);
                    self.plans.insert(p.name.clone(), (**p).clone());
                }
                Action::WriteClaim(c) => {
                    let stored = self.cluster.claims.iter_mut().find(|x| x.name == c.name);
                    match stored {
                        Some(s) if s.version + 1 == c.version => *s = (**c).clone(),
                        Some(s) => {
                            return Err(format!(
                                "conflict writing {} as version {} over version {}: {}",
                                c.name, c.version, s.version, d.why
                            ))
                        }
                        None => return Err(format!("write of unknown claim {}: {}", c.name, d.why)),
                    }
                }
                Action::DeleteClaim { name } => self.cluster.claims.retain(|c| &c.name != name),
                Action::TaintNode { node, taint } => {
                    if let Some(n) = self.node_mut(node) {
                        if !n.taints.contains(taint) {
                            n.taints.push(taint.clone());
                        }
                    }
                }
                Action::RemoveTaint { node, key } => {
                    if let Some(n) = self.node_mut(node) {
                        n.taints.retain(|t| &t.key != key);
                    }
                }
                Action::AdoptNode { node, labels, .. } => {
                    if let Some(n) = self.node_mut(node) {
                        n.labels.extend(labels.clone());
                        n.termination_finalizer = true;
                    }
                }
                Action::Evict { namespace, name } => {
                    let key = format!("{namespace}/{name}");
                    let Some(p) = self.cluster.nodes.iter().flat_map(|n| &n.pods).find(|p| p.key() == key).cloned()
                    else {
                        continue;
                    };
                    // The Eviction API: refused (429) while a covering PDB has nothing left.
                    let covering: Vec<usize> =
                        (0..self.cluster.pdbs.len()).filter(|&i| self.cluster.pdbs[i].covers(&p)).collect();
                    if covering.iter().any(|&i| self.cluster.pdbs[i].disruptions_allowed <= 0) {
                        continue;
                    }
                    for i in covering {
                        self.cluster.pdbs[i].disruptions_allowed -= 1;
                    }
                    self.remove_pod(&key, d.claim.clone());
                }
                Action::DeletePod { namespace, name, .. } => {
                    self.remove_pod(&format!("{namespace}/{name}"), d.claim.clone());
                }
                Action::DeleteNode { node } => {
                    if let Some(i) = self.cluster.nodes.iter().position(|n| &n.name == node) {
                        let n = self.cluster.nodes.remove(i);
                        self.pend(n.pods);
                    }
                }
                Action::TerminateInstance { instance_id } => {
                    for i in self.cluster.instances.iter_mut().filter(|i| &i.id == instance_id) {
                        if i.state != "terminated" {
                            i.state = "shutting-down".into();
                        }
                    }
                }
                Action::MarkUnavailable { offering, .. } => {
                    self.cluster.unavailable.insert(offering.clone());
                }
                Action::AddFinalizer { object } => self.cluster.hold(object, true),
                Action::RemoveFinalizer { object } => self.cluster.hold(object, false),
                Action::Event { .. } | Action::RequeueAfter { .. } => {}
            }
        }
        Ok(())
    }

    fn node_mut(&mut self, name: &str) -> Option<&mut Node> {
        self.cluster.nodes.iter_mut().find(|n| n.name == name)
    }

    fn remove_pod(&mut self, key: &str, by: Option<String>) {
        let mut gone = vec![];
        for n in &mut self.cluster.nodes {
            if let Some(i) = n.pods.iter().position(|p| p.key() == key) {
                gone.push(n.pods.remove(i));
            }
        }
        if !gone.is_empty() {
            self.removed.push((key.to_string(), by, self.cluster.now));
        }
        self.pend(gone);
    }

    /// Pods whose node went: their controllers recreate them, pending.
    fn pend(&mut self, pods: Vec<Arc<Pod>>) {
        for p in pods.into_iter().filter(|p| p.owner != OwnerKind::DaemonSet && p.owner != OwnerKind::Node) {
            self.cluster.pending.push(Pod { node_name: None, started_at: None, ..Arc::unwrap_or_clone(p) });
        }
    }

    /// Time passes: instances being terminated are gone, launches become instances, instances
    /// become Ready nodes, pending pods are bound first fit, PDBs recover.
    pub fn tick(&mut self, dt: Duration) {
        let now = self.cluster.now.plus(dt);
        self.cluster.now = now;
        for i in &mut self.cluster.instances {
            if i.state == "shutting-down" {
                i.state = "terminated".into();
            }
        }
        // A Launched claim's node registers (Ready) one tick after its instance started.
        for c in self.cluster.claims.iter().filter(|c| c.phase == Phase::Launched) {
            let Some(plan) = self.plans.get(&c.name) else { continue };
            let name = format!("node-{}", c.name);
            if self.cluster.nodes.iter().any(|n| n.name == name) {
                continue;
            }
            let allocatable =
                Resources::from_quantities(plan.allocatable.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
            let mut node = Node::new(
                &name,
                node_labels(&plan.instance_type, &plan.zone, &c.nodepool, &c.name, &name),
                allocatable,
            );
            node.price = Some(plan.price_per_hour);
            node.provider_id = c.provider_id();
            self.cluster.nodes.push(node);
        }
        // The launcher records the instance of each claim still Launching.
        for c in self.cluster.claims.iter_mut().filter(|c| c.phase == Phase::Launching) {
            let Some(plan) = self.plans.get(&c.name) else { continue };
            let launch = Launch {
                instance_id: format!("i-{}", c.name),
                instance_type: plan.instance_type.clone(),
                zone: plan.zone.clone(),
                capacity_type: plan.capacity_type,
                image_id: String::new(),
                subnet_id: String::new(),
                security_groups: vec![],
                price: plan.price_per_hour,
                launched_at: now,
            };
            self.cluster.instances.push(instance(&c.name, &plan.instance_type, &plan.zone, now));
            c.launch = Some(launch);
            c.phase = Phase::Launched;
            c.version += 1;
        }
        self.bind();
        for (i, pdb) in self.cluster.pdbs.iter_mut().enumerate() {
            let pending = self.cluster.pending.iter().filter(|p| pdb.covers(p)).count() as i32;
            pdb.disruptions_allowed = self.pdb_base[i] - pending;
        }
    }

    /// Binds pending pods, in name order, to the first node (by name) that is Ready, not being
    /// disrupted and has room.
    fn bind(&mut self) {
        let usable: BTreeSet<String> = self
            .cluster
            .claims
            .iter()
            .filter(|c| c.phase == Phase::Initialized && c.disruption.is_none())
            .filter_map(|c| c.node_name.clone())
            .collect();
        let mut pending = std::mem::take(&mut self.cluster.pending);
        pending.sort_by_key(|p| p.key());
        let now = self.cluster.now;
        for mut p in pending {
            let target = self.cluster.nodes.iter_mut().filter(|n| usable.contains(&n.name)).find(|n| {
                n.ready
                    && !n.unschedulable
                    && !n.taints.iter().any(|t| t.key == labels::TAINT_DISRUPTED)
                    && p.requests.fits(&n.allocatable.minus(&n.requested()))
            });
            match target {
                Some(n) => {
                    p.node_name = Some(n.name.clone());
                    p.started_at = Some(now);
                    n.pods.push(p.into());
                }
                None => self.cluster.pending.push(p),
            }
        }
    }
}
