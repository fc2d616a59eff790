//! A tiny world for lifecycle and termination tests: builders for claims, nodes, pods and
//! instances, and `World::apply`, which carries a step's actions out against the cluster the way
//! the adapters would (Eviction API with PDB accounting, taints, instance termination).

#![allow(dead_code)] // each test binary uses a different part

use std::collections::BTreeMap;
use std::time::Duration;

use dovetail_core::catalog::CapacityType;
use dovetail_core::cluster::{Cluster, Instance};
use dovetail_core::decision::Step;
use dovetail_core::decision::{Action, Decision};
use dovetail_core::events::DISRUPTION_BLOCKED;
use dovetail_core::labels::{NODECLAIM, TAINT_DISRUPTED, TAINT_UNREGISTERED};
use dovetail_core::model::{LabelSelector, Node, OwnerKind, Pdb, Pod, Taint, TaintEffect, Toleration, TolerationOp};
use dovetail_core::nodeclaim::drain::EvictionResult;
use dovetail_core::nodeclaim::{Disruption, Launch, NodeClaim, Phase, Reason};
use dovetail_core::resources::Resources;
use dovetail_core::scheduler::PlannedClaim;
use dovetail_core::time::Time;

pub const T0: Time = Time(1_800_000_000_000);

/// The claims a plan launches.
pub fn planned(ds: &[Decision]) -> Vec<PlannedClaim> {
    ds.iter()
        .filter_map(|d| match &d.action {
            Some(Action::Launch(p)) => Some((**p).clone()),
            _ => None,
        })
        .collect()
}

pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

pub fn launch(name: &str, at: Time) -> Launch {
    Launch {
        instance_id: format!("i-{name}"),
        instance_type: "m7i.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: CapacityType::OnDemand,
        image_id: "ami-1".into(),
        subnet_id: "subnet-1".into(),
        security_groups: vec!["sg-1".into()],
        price: 0.1008,
        launched_at: at,
    }
}

/// A claim whose instance launched at T0 (phase Launched).
pub fn launched(name: &str) -> NodeClaim {
    let mut c = NodeClaim::launching(name, "default", "default", T0);
    c.phase = Phase::Launched;
    c.version = 1;
    c.launch = Some(launch(name, T0));
    c
}

/// A claim running on node `node-<name>` (phase Initialized).
pub fn running(name: &str) -> NodeClaim {
    let mut c = launched(name);
    c.phase = Phase::Initialized;
    c.node_name = Some(format!("node-{name}"));
    c.registered_at = Some(T0.plus(secs(60)));
    c.initialized_at = Some(T0.plus(secs(70)));
    c
}

/// A running claim with a disruption decided at `since`.
pub fn disrupted(name: &str, reason: Reason, since: Time) -> NodeClaim {
    let mut c = running(name);
    c.disruption = Some(Disruption { reason, since, replacements: vec![], message: String::new(), reclaim_at: None });
    c
}

pub fn instance(name: &str, state: &str) -> Instance {
    Instance {
        id: format!("i-{name}"),
        instance_type: "m7i.large".into(),
        zone: "us-east-1a".into(),
        state: state.into(),
        launched_at: T0,
        tags: BTreeMap::from([(NODECLAIM.to_string(), name.to_string())]),
        image_id: "ami-1".into(),
        subnet_id: "subnet-1".into(),
        security_groups: vec!["sg-1".into()],
    }
}

/// The Node of claim `name`, Ready, with the providerID of its instance.
pub fn node(name: &str) -> Node {
    let mut n = Node::new(&format!("node-{name}"), BTreeMap::new(), Resources::default());
    n.provider_id = Some(launch(name, T0).provider_id());
    n
}

pub fn pod(ns: &str, name: &str) -> Pod {
    let mut p = Pod::new(ns, name, Resources::default());
    p.owner = OwnerKind::ReplicaSet;
    p.started_at = Some(T0);
    p
}

pub fn critical(mut p: Pod) -> Pod {
    p.priority_class = "system-node-critical".into();
    p
}

pub fn daemon(mut p: Pod) -> Pod {
    p.owner = OwnerKind::DaemonSet;
    p
}

pub fn mirror(mut p: Pod) -> Pod {
    p.owner = OwnerKind::Node;
    p
}

pub fn tolerating(mut p: Pod) -> Pod {
    p.tolerations.push(Toleration {
        key: TAINT_DISRUPTED.into(),
        operator: TolerationOp::Exists,
        value: String::new(),
        effect: None,
    });
    p
}

pub fn do_not_disrupt(mut p: Pod) -> Pod {
    p.annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    p
}

pub fn pdb(ns: &str, name: &str, app: &str, allowed: i32) -> Pdb {
    Pdb {
        namespace: ns.into(),
        name: name.into(),
        selector: LabelSelector::from_labels(&[("app", app)]),
        disruptions_allowed: allowed,
    }
}

pub fn unregistered_taint() -> Taint {
    Taint::new(TAINT_UNREGISTERED, "", TaintEffect::NoExecute)
}

/// A cluster at `now` holding one claim, its instance and (when given) its node.
pub fn cluster(now: Time, claim: &NodeClaim, instance_state: &str, node: Option<Node>) -> Cluster {
    Cluster {
        now,
        claims: vec![claim.clone()],
        nodes: node.into_iter().collect(),
        instances: vec![instance(&claim.name, instance_state)],
        ..Cluster::default()
    }
}

/// Every action of a step, for exact assertions.
pub fn actions(step: &Step) -> Vec<Action> {
    step.actions().cloned().collect()
}

/// A step's actions other than Events.
pub fn actions_but_events(step: &Step) -> Vec<Action> {
    step.actions().filter(|a| !matches!(a, Action::Event { .. })).cloned().collect()
}

/// The step changes nothing: no claim write, and no action but a DisruptionBlocked Event saying why.
pub fn only_blocked(step: &Step) -> bool {
    step.claim.is_none()
        && step.actions().all(|a| matches!(a, Action::Event { reason, .. } if reason == DISRUPTION_BLOCKED))
}

/// Every sentence of a step.
pub fn sentences(step: &Step) -> Vec<String> {
    step.decisions.iter().map(|d| d.why.clone()).collect()
}

/// How the world answers an eviction the PDBs allow.
pub type Answer<'a> = &'a mut dyn FnMut(&Pod) -> EvictionResult;

/// Applies a step to a cluster the way the adapters do, returning the claim to persist (None
/// when the claim was deleted). Evictions go through PDB accounting: a pod whose PDB has no
/// disruption left is refused (429); otherwise `answer` decides (e.g. a random 429), and an
/// accepted eviction removes the pod (its termination is instant here).
pub fn apply(cluster: &mut Cluster, claim: &NodeClaim, step: &Step, answer: Answer<'_>) -> Option<NodeClaim> {
    let mut next = step.claim.clone().unwrap_or_else(|| claim.clone());
    for action in step.actions() {
        match action {
            Action::TaintNode { node, taint } => {
                if let Some(n) = cluster.nodes.iter_mut().find(|n| &n.name == node) {
                    if !n.taints.contains(taint) {
                        n.taints.push(taint.clone());
                    }
                }
            }
            Action::RemoveTaint { node, key } => {
                if let Some(n) = cluster.nodes.iter_mut().find(|n| &n.name == node) {
                    n.taints.retain(|t| &t.key != key);
                }
            }
            Action::AdoptNode { node, labels, .. } => {
                if let Some(n) = cluster.nodes.iter_mut().find(|n| &n.name == node) {
                    n.labels.extend(labels.clone());
                    n.termination_finalizer = true;
                }
            }
            Action::Evict { namespace, name } => {
                let key = format!("{namespace}/{name}");
                let found = cluster.nodes.iter().flat_map(|n| &n.pods).find(|p| p.key() == key).cloned();
                let result = match found {
                    None => EvictionResult::NotFound,
                    Some(p) => {
                        let blocked = cluster.pdbs.iter().any(|b| b.covers(&p) && b.disruptions_allowed <= 0);
                        let result = if blocked { EvictionResult::Refused } else { answer(&p) };
                        if result == EvictionResult::Accepted {
                            for b in cluster.pdbs.iter_mut().filter(|b| b.covers(&p)) {
                                b.disruptions_allowed -= 1;
                            }
                            for n in &mut cluster.nodes {
                                n.pods.retain(|q| q.key() != key);
                            }
                        }
                        result
                    }
                };
                if let Some(d) = next.drain.as_mut() {
                    d.record(&key, result, cluster.now);
                }
            }
            Action::DeletePod { namespace, name, .. } => {
                for n in &mut cluster.nodes {
                    n.pods.retain(|q| !(q.namespace == *namespace && q.name == *name));
                }
            }
            Action::TerminateInstance { instance_id } => {
                for i in cluster.instances.iter_mut().filter(|i| &i.id == instance_id) {
                    if i.state != "terminated" {
                        i.state = "shutting-down".into();
                    }
                }
            }
            Action::DeleteNode { node } => cluster.nodes.retain(|n| &n.name != node),
            Action::DeleteClaim { .. } => return None,
            _ => {}
        }
    }
    cluster.claims = vec![next.clone()];
    Some(next)
}
