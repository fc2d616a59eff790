//! The Kubernetes API in memory: Nodes, Pods, DaemonSets, PodDisruptionBudgets, Events, the
//! Eviction subresource (HTTP 429 when a budget has no disruption left), and what the kubelet,
//! the DaemonSet controller and pod garbage collection do around them.

use std::collections::{BTreeMap, BTreeSet};
use std::future::{ready, Future};
use std::sync::Arc;
use std::time::Duration;

use dovetail_core::labels::{NODECLAIM, TAINT_UNREGISTERED};
use dovetail_core::model::{
    hold, tolerates_all, DaemonSet, LabelSelector, Node, NodeClass, NodeCondition, NodeKind, NodePool, Pdb, Pod, Taint,
};
use dovetail_core::nodeclaim::drain::EvictionResult;
use dovetail_core::nodeclaim::object::{ClaimObject, Observed};
use dovetail_core::overlay::NodeOverlay;
use dovetail_core::reconcile::ports::{
    ClassStatus, Invalid, Kube, KubeState, OverlayStatus, PoolStatus, PortError, PortResult,
};
use dovetail_core::time::Time;

use super::cloud::Registration;
use super::{Happening, State, World};

/// How many Events are kept word for word (all are counted by reason).
const EVENTS_KEPT: usize = 2_000;

/// `minAvailable` / `maxUnavailable`: a count or a percentage of the expected pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOrPercent {
    Int(i32),
    Percent(i32),
}

impl IntOrPercent {
    /// The absolute number for `total` pods, rounding up as the disruption controller does.
    pub fn of(self, total: i32) -> i32 {
        match self {
            IntOrPercent::Int(n) => n,
            IntOrPercent::Percent(p) => {
                (i64::from(p) * i64::from(total)).div_euclid(100) as i32
                    + i32::from((i64::from(p) * i64::from(total)).rem_euclid(100) != 0)
            }
        }
    }
}

/// A PodDisruptionBudget as written; its allowance is computed from the pods at each read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdbSpec {
    pub namespace: String,
    pub name: String,
    pub selector: LabelSelector,
    pub min_available: Option<IntOrPercent>,
    pub max_unavailable: Option<IntOrPercent>,
}

/// A pod removed past its PodDisruptionBudget, when, from which node, with what grace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdbOverride {
    /// What removed it: `DeletePod`, `DeleteNode` or `TerminateInstances`.
    pub by: &'static str,
    pub pod: String,
    pub node: String,
    pub at: Time,
    /// The drain deadline of the node's claim then, if it had one.
    pub deadline: Option<Time>,
    pub grace_seconds: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimNode {
    /// The Node object; its `pods` stay empty here (see `SimNode::pods`).
    pub node: Node,
    /// Uids of the pods bound to it.
    pub pods: BTreeSet<u64>,
    pub instance_id: String,
    pub registered_at: Time,
    /// Taints it registered with that its agents remove once they are running.
    pub startup_taints: Vec<Taint>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimPod {
    /// `node_name` set once bound, `started_at` when it started.
    pub pod: Pod,
    /// Tells this pod from a later one of the same name.
    pub uid: u64,
    pub bound_at: Option<Time>,
    /// Has a deletion timestamp: stopping, still on its node.
    pub terminating: bool,
    /// kube-scheduler found no node for it (`PodScheduled=False`, reason `Unschedulable`).
    pub unschedulable: bool,
    /// The controller (workload key) that owns it.
    pub workload: Option<String>,
    /// Runs to completion this long after starting (Job pods).
    pub runs_for: Option<Duration>,
}

impl SimPod {
    /// When the pod was created: every pod the world creates carries its creation time.
    pub fn created_at(&self) -> Time {
        self.pod.created_at.unwrap_or_default()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeEvent {
    pub time: Time,
    pub object: String,
    pub reason: String,
    pub message: String,
}

#[derive(Debug, Default)]
pub struct KubeSim {
    pub nodes: BTreeMap<String, SimNode>,
    /// By uid: creation order, and cheap lookups from nodes and controllers.
    pub pods: BTreeMap<u64, SimPod>,
    /// `namespace/name` → uid, for the API's lookups by name.
    pub names: BTreeMap<String, u64>,
    pub daemonsets: Vec<DaemonSet>,
    pub nodepools: Vec<NodePool>,
    pub nodeclasses: Vec<NodeClass>,
    pub overlays: Vec<NodeOverlay>,
    pub pdbs: Vec<PdbSpec>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pub invalid: Vec<Invalid>,
    pub workloads: BTreeMap<String, super::Workload>,
    /// The first Events, word for word.
    pub events: Vec<KubeEvent>,
    pub event_counts: BTreeMap<String, u64>,
    /// NodePool status subresources, as last published.
    pub pool_status: BTreeMap<String, PoolStatus>,
    /// NodeOverlay status subresources, as last published.
    pub overlay_status: BTreeMap<String, OverlayStatus>,
    /// EC2NodeClass status subresources, as last published.
    pub class_status: BTreeMap<String, ClassStatus>,
    /// NodeClaim objects, as last written (`kubectl get nodeclaims`).
    pub claim_objects: BTreeMap<String, ClaimObject>,
    /// Pods Dovetail removed past a PodDisruptionBudget (deleted, or their node deleted or its
    /// instance terminated, while a covering budget allowed no disruption): each must have been
    /// at its drain's deadline (see `crate::invariants`).
    pub pdb_overrides: Vec<PdbOverride>,
    next_uid: u64,
    /// Something changed that may let a pending pod be bound.
    pub(super) bind_needed: bool,
}

impl KubeSim {
    /// A Node as the API shows it, with its pods.
    pub fn node_view(&self, name: &str) -> Option<Node> {
        let n = self.nodes.get(name)?;
        let mut node = n.node.clone();
        node.pods = n.pods.iter().filter_map(|uid| self.pods.get(uid)).map(|p| Arc::new(p.pod.clone())).collect();
        Some(node)
    }

    /// A pod by `namespace/name`.
    pub fn pod(&self, key: &str) -> Option<&SimPod> {
        self.names.get(key).and_then(|uid| self.pods.get(uid))
    }

    pub fn pod_mut(&mut self, key: &str) -> Option<&mut SimPod> {
        let uid = *self.names.get(key)?;
        self.pods.get_mut(&uid)
    }

    /// Whether a budget covering `p` allows no disruption now.
    pub fn pdb_blocks(&self, p: &SimPod) -> bool {
        self.pdbs
            .iter()
            .filter(|s| s.namespace == p.pod.namespace && s.selector.matches(&p.pod.labels))
            .any(|s| self.disruptions_allowed(s) <= 0)
    }

    /// Pending pods the forwarder would report: unschedulable, not daemon, not mirror.
    pub fn provisionable(&self) -> impl Iterator<Item = &SimPod> {
        self.pods.values().filter(|p| {
            p.pod.node_name.is_none() && !p.terminating && p.unschedulable && !p.pod.is_daemon() && !p.pod.is_mirror()
        })
    }

    /// Unbound pods that are not going away, scheduled or not yet.
    pub fn unbound(&self) -> impl Iterator<Item = &SimPod> {
        self.pods.values().filter(|p| p.pod.node_name.is_none() && !p.terminating)
    }

    /// `status.disruptionsAllowed` now: healthy pods beyond what the budget must keep.
    pub fn disruptions_allowed(&self, spec: &PdbSpec) -> i32 {
        let mut expected = 0;
        let mut healthy = 0;
        for p in self.pods.values() {
            if p.terminating || p.pod.namespace != spec.namespace || !spec.selector.matches(&p.pod.labels) {
                continue;
            }
            expected += 1;
            let ready = p.pod.node_name.as_ref().and_then(|n| self.nodes.get(n)).is_some_and(|n| n.node.ready);
            if ready {
                healthy += 1;
            }
        }
        let desired = match (spec.min_available, spec.max_unavailable) {
            (Some(m), _) => m.of(expected),
            (None, Some(u)) => expected - u.of(expected),
            (None, None) => expected,
        };
        (healthy - desired).max(0)
    }

    /// The budgets with their `status.disruptionsAllowed` now.
    pub fn pdbs_now(&self) -> Vec<Pdb> {
        self.pdbs
            .iter()
            .map(|s| Pdb {
                namespace: s.namespace.clone(),
                name: s.name.clone(),
                selector: s.selector.clone(),
                disruptions_allowed: self.disruptions_allowed(s),
            })
            .collect()
    }

    pub fn read(&self) -> KubeState {
        let mut nodes = Vec::with_capacity(self.nodes.len());
        nodes.extend(self.nodes.keys().filter_map(|n| self.node_view(n)));
        let pending = self.provisionable().map(|p| p.pod.clone()).collect();
        let pdbs = self.pdbs_now();
        KubeState {
            nodes,
            pending,
            daemonsets: self.daemonsets.clone(),
            nodepools: self.nodepools.clone(),
            nodeclasses: self.nodeclasses.clone(),
            overlays: self.overlays.clone(),
            pdbs,
            volume_attachments: BTreeMap::new(),
            namespaces: self.namespaces.clone(),
            claim_objects: self
                .claim_objects
                .values()
                .map(|o| Observed { name: o.claim.name.clone(), version: Some(o.claim.version), deleting: false })
                .collect(),
            invalid: self.invalid.clone(),
        }
    }

    pub fn record_event(&mut self, time: Time, object: &str, reason: &str, message: &str) {
        *self.event_counts.entry(reason.to_string()).or_default() += 1;
        if self.events.len() < EVENTS_KEPT {
            self.events.push(KubeEvent {
                time,
                object: object.to_string(),
                reason: reason.to_string(),
                message: message.to_string(),
            });
        }
    }

    pub(super) fn next_uid(&mut self) -> u64 {
        self.next_uid += 1;
        self.next_uid
    }

    /// Sets one of a node's conditions as of `since`, as its kubelet, the node lifecycle controller
    /// or the node monitoring agent would (a failure to inject: a kubelet that stops reporting is
    /// `Ready=Unknown`, a broken GPU `AcceleratedHardwareReady=False`). A `Ready` condition also
    /// sets whether the node is Ready. `false` when there is no such node.
    pub fn set_condition(&mut self, node: &str, kind: &str, status: &str, since: Time) -> bool {
        let Some(n) = self.nodes.get_mut(node) else { return false };
        n.node.conditions.retain(|c| c.kind != kind);
        n.node.conditions.push(NodeCondition::new(kind, status, Some(since)));
        if kind == "Ready" {
            n.node.ready = status == "True";
            self.bind_needed = true;
        }
        true
    }

    pub(super) fn kubelet_stopped(&mut self, node: &str) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.node.ready = false;
        }
    }

    pub(super) fn remove_startup_taints(&mut self, node: &str) {
        let Some(n) = self.nodes.get_mut(node) else { return };
        let before = n.node.taints.len();
        let startup = &n.startup_taints;
        n.node.taints.retain(|t| !startup.contains(t));
        self.bind_needed |= n.node.taints.len() != before;
    }

    /// Taints a node; `Ok(false)` when there is no such node.
    pub fn taint(&mut self, node: &str, taint: &Taint) -> bool {
        let Some(n) = self.nodes.get_mut(node) else { return false };
        if !n.node.taints.iter().any(|t| t.key == taint.key && t.effect == taint.effect) {
            n.node.taints.push(taint.clone());
        }
        true
    }

    pub fn remove_taint(&mut self, node: &str, key: &str) {
        if let Some(n) = self.nodes.get_mut(node) {
            let before = n.node.taints.len();
            n.node.taints.retain(|t| t.key != key);
            self.bind_needed |= n.node.taints.len() != before;
        }
    }
}

/// The pods the DaemonSet controller puts on a node that registers as `reg`, bound to it.
/// DaemonSet pods tolerate the node's own startup and registration taints (their agents are what
/// removes them), so only the pool's taints and the pod's node affinity decide.
pub fn daemon_pods(daemonsets: &[DaemonSet], reg: &Registration) -> Vec<Pod> {
    let lasting: Vec<Taint> =
        reg.taints.iter().filter(|t| t.key != TAINT_UNREGISTERED && !reg.startup_taints.contains(t)).cloned().collect();
    daemonsets
        .iter()
        .filter(|ds| {
            ds.pod.node_affinity.iter().any(|r| r.matches_labels(&reg.labels))
                && tolerates_all(&ds.pod.tolerations, &lasting).is_ok()
        })
        .map(|ds| {
            let mut pod = ds.pod.clone();
            pod.name = format!("{}-{}", ds.name, reg.node_name.split('.').next().unwrap_or(&reg.node_name));
            pod.node_name = Some(reg.node_name.clone());
            pod
        })
        .collect()
}

impl State {
    /// Records the pods of `uids` that Dovetail's `by` removes now past a budget, with the drain
    /// deadline their node's claim has at this moment (see [`PdbOverride`]).
    pub fn note_overrides(&mut self, uids: &[u64], by: &'static str) {
        for uid in uids {
            let Some(p) = self.kube.pods.get(uid) else { continue };
            // A pod on a node whose kubelet stopped is not running: removing it breaks no budget.
            let node = p.pod.node_name.clone().unwrap_or_default();
            let running = self.kube.nodes.get(&node).is_some_and(|n| n.node.ready);
            if p.terminating || !running || p.pod.is_daemon() || p.pod.is_mirror() || !self.kube.pdb_blocks(p) {
                continue;
            }
            let deadline = self
                .store
                .claims
                .values()
                .find(|c| c.node_name.as_deref() == Some(node.as_str()))
                .and_then(dovetail_core::termination::deadline_of);
            let o = PdbOverride {
                by,
                pod: p.pod.key(),
                node,
                at: self.now,
                deadline,
                grace_seconds: p.pod.termination_grace_seconds,
            };
            self.kube.pdb_overrides.push(o);
        }
    }

    /// The kubelet registers a booted instance's Node, Ready, and the DaemonSet controller puts a
    /// pod of every DaemonSet that can run there on it.
    pub(super) fn register_node(&mut self, reg: &Registration, provider_id: String, instance_id: &str, price: f64) {
        let now = self.now;
        let mut node = Node::new(&reg.node_name, reg.labels.clone(), reg.allocatable.clone());
        node.kind = NodeKind::Existing;
        node.taints = reg.taints.clone();
        node.provider_id = Some(provider_id);
        node.price = Some(price);
        let sim = SimNode {
            node,
            pods: BTreeSet::new(),
            instance_id: instance_id.to_string(),
            registered_at: now,
            startup_taints: reg.startup_taints.clone(),
        };
        self.kube.nodes.insert(reg.node_name.clone(), sim);
        for mut pod in daemon_pods(&self.kube.daemonsets, reg) {
            let key = pod.key();
            let uid = self.kube.next_uid();
            pod.started_at = Some(now);
            pod.created_at = Some(now);
            self.kube.names.insert(key, uid);
            let sim = SimPod {
                pod,
                uid,
                bound_at: Some(now),
                terminating: false,
                unschedulable: false,
                workload: None,
                runs_for: None,
            };
            self.kube.pods.insert(uid, sim);
            if let Some(n) = self.kube.nodes.get_mut(&reg.node_name) {
                n.pods.insert(uid);
            }
        }
        self.kube.bind_needed = true;
        self.stats.nodes_registered += 1;
    }

    /// A Node joins for an instance launched outside this world (on moto, in the functions'
    /// tests): the kubelet registers it as the world's own instances do, and the forwarder rings.
    pub fn join(&mut self, reg: &Registration, zone: &str, instance_id: &str, price: f64) {
        self.register_node(reg, format!("aws:///{zone}/{instance_id}"), instance_id, price);
        self.node_registered(reg, reg.labels.get(NODECLAIM).cloned());
    }

    /// The forwarder's node doorbell, and a resume for the node's claim (`claim`: its instance's
    /// tag) so registration is recorded (and the unregistered taint removed) without waiting for
    /// the sweeper.
    pub(super) fn node_registered(&mut self, reg: &Registration, claim: Option<String>) {
        let Some(claim) = claim else { return };
        let body = serde_json::json!({"node": reg.node_name, "registeredAt": self.now.to_string()}).to_string();
        self.send_doorbell(body);
        self.send_interruption(serde_json::json!({ "resume": claim }).to_string(), Duration::ZERO);
    }

    /// Creates a pod (a controller's, or a bare one); kube-scheduler sees it at the next settle.
    pub fn create_pod(&mut self, mut pod: Pod, workload: Option<String>, runs_for: Option<Duration>) -> String {
        pod.node_name = None;
        pod.started_at = None;
        pod.created_at = Some(self.now);
        let key = pod.key();
        // A name still taken by a pod that is going (or a scenario reusing one) goes to the new pod.
        if let Some(old) = self.kube.names.get(&key).copied() {
            self.remove_pod(old);
        }
        let uid = self.kube.next_uid();
        let sim = SimPod {
            pod,
            uid,
            bound_at: None,
            terminating: false,
            unschedulable: false,
            workload: workload.clone(),
            runs_for,
        };
        self.kube.pods.insert(uid, sim);
        self.kube.names.insert(key.clone(), uid);
        if let Some(w) = workload.and_then(|w| self.kube.workloads.get_mut(&w)) {
            w.pods.insert(uid);
        }
        self.kube.bind_needed = true;
        self.stats.pods_created += 1;
        key
    }

    /// Binds a pending pod to a node: it starts now; a Job pod's completion is scheduled.
    pub(super) fn bind_pod(&mut self, key: &str, node: &str) {
        let now = self.now;
        let Some(p) = self.kube.pod_mut(key) else { return };
        if p.pod.node_name.is_some() || p.terminating {
            return;
        }
        p.pod.node_name = Some(node.to_string());
        p.pod.started_at = Some(now);
        p.bound_at = Some(now);
        p.unschedulable = false;
        let (uid, runs_for, waited) = (p.uid, p.runs_for, now.since(p.created_at()));
        let counts = p.pod.marks_pod_event();
        if let Some(n) = self.kube.nodes.get_mut(node) {
            n.pods.insert(uid);
            if counts {
                n.node.last_pod_event = Some(now);
            }
        }
        self.stats.record_wait(waited);
        if let Some(d) = runs_for {
            self.schedule(d, Happening::PodSucceeded { uid });
        }
    }

    /// Starts deleting a pod: it stops within its grace period (the world's `pod_stop`, capped by
    /// the grace) and its controller replaces it meanwhile.
    pub fn stop_pod(&mut self, key: &str, grace_seconds: i64) {
        let stop = self.config.pod_stop.min(Duration::from_secs(grace_seconds.max(0) as u64));
        let Some(p) = self.kube.pod_mut(key) else { return };
        if p.terminating {
            return;
        }
        p.terminating = true;
        let uid = p.uid;
        let workload = p.workload.clone();
        let bound = p.pod.node_name.clone();
        let left = bound.clone().filter(|_| p.pod.marks_pod_event());
        // Its deletion timestamp is when it started leaving the node.
        if let Some(n) = left.and_then(|n| self.kube.nodes.get_mut(&n)) {
            n.node.last_pod_event = Some(self.now);
        }
        if bound.is_none() || stop.is_zero() {
            self.remove_pod(uid);
        } else {
            self.schedule(stop, Happening::PodStopped { uid });
        }
        if let Some(w) = workload {
            self.reconcile_workload(&w);
        }
    }

    /// The pod is gone from the API (and from its node).
    fn remove_pod(&mut self, uid: u64) -> Option<SimPod> {
        let p = self.kube.pods.remove(&uid)?;
        if self.kube.names.get(&p.pod.key()) == Some(&uid) {
            self.kube.names.remove(&p.pod.key());
        }
        if let Some(n) = p.pod.node_name.as_ref().and_then(|n| self.kube.nodes.get_mut(n)) {
            n.pods.remove(&uid);
            // A pod that was stopping left when its deletion began (`stop_pod`); any other (a
            // finished Job pod, one replaced by name) leaves now.
            if !p.terminating && p.pod.marks_pod_event() {
                n.node.last_pod_event = Some(self.now);
            }
        }
        if let Some(w) = p.workload.as_ref().and_then(|w| self.kube.workloads.get_mut(w)) {
            w.pods.remove(&uid);
        }
        self.kube.bind_needed = true;
        Some(p)
    }

    pub(super) fn pod_stopped(&mut self, uid: u64) {
        if let Some(w) = self.remove_pod(uid).and_then(|p| p.workload) {
            self.reconcile_workload(&w);
        }
    }

    pub(super) fn pod_succeeded(&mut self, uid: u64) {
        if self.kube.pods.get(&uid).is_none_or(|p| p.terminating) {
            return;
        }
        let Some(p) = self.remove_pod(uid) else { return };
        self.stats.pods_succeeded += 1;
        if let Some(w) = p.workload {
            if let Some(super::workloads::WorkloadKind::Job(j)) = self.kube.workloads.get_mut(&w).map(|w| &mut w.kind) {
                j.succeeded += 1;
            }
            self.reconcile_workload(&w);
        }
    }

    /// The Eviction subresource: 429 (`Refused`) when a covering budget allows no disruption.
    pub fn evict(&mut self, namespace: &str, name: &str) -> EvictionResult {
        let key = format!("{namespace}/{name}");
        let Some(p) = self.kube.pod(&key) else { return EvictionResult::NotFound };
        if p.terminating {
            return EvictionResult::Accepted;
        }
        if self.kube.pdb_blocks(p) {
            self.stats.evictions_refused += 1;
            return EvictionResult::Refused;
        }
        let grace = p.pod.termination_grace_seconds;
        self.stats.evictions += 1;
        self.stop_pod(&key, grace);
        EvictionResult::Accepted
    }

    /// A Node object deleted: its pods are gone with it (pod garbage collection) and their
    /// controllers recreate them as pending pods. Pods that were not already stopping were lost
    /// without a graceful eviction.
    pub fn delete_node(&mut self, node: &str) {
        let Some(n) = self.kube.nodes.remove(node) else { return };
        let mut owners = BTreeSet::new();
        for uid in &n.pods {
            let Some(p) = self.kube.pods.get(uid) else { continue };
            if !p.terminating && !p.pod.is_daemon() && !p.pod.is_mirror() {
                self.stats.pods_lost += 1;
            }
            if let Some(p) = self.remove_pod(*uid) {
                owners.extend(p.workload);
            }
        }
        for w in owners {
            self.reconcile_workload(&w);
        }
        self.stats.nodes_deleted += 1;
    }
}

/// The `Kube` port over the world.
#[derive(Clone)]
pub struct SimKube(pub World);

impl Kube for SimKube {
    fn read(&self) -> impl Future<Output = PortResult<KubeState>> + Send {
        ready(Ok(self.0.lock().kube.read()))
    }

    fn taint(&self, node: &str, taint: &Taint) -> impl Future<Output = PortResult<()>> + Send {
        let found = self.0.lock().kube.taint(node, taint);
        ready(if found { Ok(()) } else { Err(PortError::Rejected(format!("nodes \"{node}\" not found"))) })
    }

    fn remove_taint(&self, node: &str, key: &str) -> impl Future<Output = PortResult<()>> + Send {
        self.0.lock().kube.remove_taint(node, key);
        ready(Ok(()))
    }

    fn adopt_node(
        &self,
        node: &str,
        _claim: &str,
        labels: &BTreeMap<String, String>,
    ) -> impl Future<Output = PortResult<()>> + Send {
        if let Some(n) = self.0.lock().kube.nodes.get_mut(node) {
            n.node.labels.extend(labels.clone());
            n.node.termination_finalizer = true;
        }
        ready(Ok(()))
    }

    fn add_finalizer(&self, object: &str) -> impl Future<Output = PortResult<()>> + Send {
        let mut s = self.0.lock();
        let kube = &mut s.kube;
        hold(&mut kube.nodepools, &mut kube.nodeclasses, object, true);
        ready(Ok(()))
    }

    fn remove_finalizer(&self, object: &str) -> impl Future<Output = PortResult<()>> + Send {
        let mut s = self.0.lock();
        let kube = &mut s.kube;
        hold(&mut kube.nodepools, &mut kube.nodeclasses, object, false);
        ready(Ok(()))
    }

    fn evict(&self, namespace: &str, name: &str) -> impl Future<Output = PortResult<EvictionResult>> + Send {
        ready(Ok(self.0.lock().evict(namespace, name)))
    }

    fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        grace_seconds: i64,
    ) -> impl Future<Output = PortResult<()>> + Send {
        let mut s = self.0.lock();
        let key = format!("{namespace}/{name}");
        if let Some(uid) = s.kube.names.get(&key).copied() {
            s.note_overrides(&[uid], "DeletePod");
        }
        s.stop_pod(&key, grace_seconds);
        ready(Ok(()))
    }

    fn delete_node(&self, node: &str) -> impl Future<Output = PortResult<()>> + Send {
        let mut s = self.0.lock();
        let pods: Vec<u64> = s.kube.nodes.get(node).map(|n| n.pods.iter().copied().collect()).unwrap_or_default();
        s.note_overrides(&pods, "DeleteNode");
        s.delete_node(node);
        ready(Ok(()))
    }

    fn event(&self, object: &str, reason: &str, message: &str) -> impl Future<Output = PortResult<()>> + Send {
        let mut s = self.0.lock();
        let now = s.now;
        s.kube.record_event(now, object, reason, message);
        ready(Ok(()))
    }

    fn write_claim_object(&self, object: &ClaimObject) -> impl Future<Output = PortResult<()>> + Send {
        self.0.lock().kube.claim_objects.insert(object.claim.name.clone(), object.clone());
        ready(Ok(()))
    }

    fn delete_claim_object(&self, name: &str) -> impl Future<Output = PortResult<()>> + Send {
        self.0.lock().kube.claim_objects.remove(name);
        ready(Ok(()))
    }

    fn class_status(&self, status: &ClassStatus) -> impl Future<Output = PortResult<()>> + Send {
        self.0.lock().kube.class_status.insert(status.name.clone(), status.clone());
        ready(Ok(()))
    }

    fn pool_status(&self, status: &PoolStatus) -> impl Future<Output = PortResult<()>> + Send {
        self.0.lock().kube.pool_status.insert(status.name.clone(), status.clone());
        ready(Ok(()))
    }

    fn overlay_status(&self, status: &OverlayStatus) -> impl Future<Output = PortResult<()>> + Send {
        self.0.lock().kube.overlay_status.insert(status.name.clone(), status.clone());
        ready(Ok(()))
    }
}
