//! Cluster Autoscaler's decisions as a pure function of what it sees at one scan.
//!
//! - **Scale-up**: pods still unschedulable once upcoming nodes are counted are packed onto
//!   template nodes of each group (the group's first instance type: the one its autoscaling group
//!   launches first); the group that helps the most pods wins (ties go to the group listed first,
//!   the priority expander), scaled up by the nodes the packing used.
//! - **Scale-down**: not for `delay_after_add` after a scale-up; a node whose requests (the larger
//!   of cpu and memory, DaemonSet pods included) are under the threshold, and whose pods can all
//!   move to the other nodes, is unneeded; unneeded for `unneeded_time`, empty nodes go in bulk
//!   (up to `max_empty_bulk_delete`), otherwise one non-empty node per scan. Pods that are not
//!   replicated, kube-system pods without a PodDisruptionBudget, and budgets with no disruption
//!   left keep a node (Cluster Autoscaler's defaults).
//!
//! Placement checks use the core scheduler with no NodePools: the predicates kube-scheduler and
//! Dovetail use.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use dovetail_core::catalog::Catalog;
use dovetail_core::labels;
use dovetail_core::model::{DaemonSet, KubeletConfig, Node, NodeKind, OwnerKind, Pdb, Pod};
use dovetail_core::scheduler::schedule;
use dovetail_core::snapshot::Snapshot;
use dovetail_core::time::Time;

use super::{Config, NodeGroup};
use crate::world::{daemon_pods, registration, LaunchSpec};

/// One group as the autoscaler sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupState {
    /// The autoscaling group's desired capacity.
    pub desired: usize,
    /// Instances launched whose nodes have not registered yet.
    pub upcoming: usize,
}

/// Everything one scan decides from.
pub struct Input<'a> {
    pub now: Time,
    pub config: &'a Config,
    pub catalog: &'a Catalog,
    /// Registered, Ready nodes of the groups, with their pods.
    pub nodes: &'a [Node],
    /// Node name → index of its group in `config.node_groups`.
    pub node_group: &'a BTreeMap<String, usize>,
    /// Pods kube-scheduler could not place.
    pub pending: &'a [Pod],
    /// Per group, in `config.node_groups` order.
    pub groups: &'a [GroupState],
    pub daemonsets: &'a [DaemonSet],
    pub pdbs: &'a [Pdb],
    pub namespaces: &'a BTreeMap<String, BTreeMap<String, String>>,
}

/// What the autoscaler remembers between scans.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Memory {
    /// Since when each node has been unneeded.
    pub unneeded_since: BTreeMap<String, Time>,
    pub last_scale_up: Option<Time>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Raise the group's desired capacity by `by`.
    ScaleUp { group: usize, by: usize, why: String },
    /// Terminate these empty nodes, decrementing their groups.
    RemoveEmpty { nodes: Vec<String>, why: String },
    /// Drain this node, then terminate it, decrementing its group.
    Drain { node: String, why: String },
}

/// A node of `group` that does not exist yet, as the autoscaler imagines it for simulations: the
/// group's first instance type in its first zone, with its labels, taints and DaemonSet pods.
pub fn template_node(group: &NodeGroup, name: &str, catalog: &Catalog, daemonsets: &[DaemonSet]) -> Option<Node> {
    let t = catalog.get(group.instance_types.first()?)?;
    let zone = group.zones.first()?.clone();
    let spec = LaunchSpec {
        instance_type: t.name.clone(),
        zone,
        capacity_type: group.capacity_type,
        price: 0.0,
        tags: BTreeMap::new(),
        image_id: String::new(),
        subnet_id: String::new(),
        security_groups: vec![],
        labels: group.labels.clone(),
        taints: group.taints.clone(),
        startup_taints: vec![],
        kubelet: KubeletConfig::default(),
        unregistered_taint: false,
        reservation: None,
    };
    let reg = registration(catalog, &spec, &catalog.zones, name.to_string());
    let mut node = Node::new(name, reg.labels.clone(), reg.allocatable.clone());
    node.kind = NodeKind::Existing;
    node.taints = reg.taints.clone();
    node.pods = daemon_pods(daemonsets, &reg).into_iter().map(Arc::new).collect();
    Some(node)
}

fn snapshot(pods: Vec<Pod>, nodes: Vec<Node>, input: &Input<'_>) -> Snapshot {
    Snapshot { pods, nodes, namespaces: input.namespaces.clone(), ..Snapshot::default() }
}

/// The larger of a node's cpu and memory requests over its allocatable.
pub fn utilization(node: &Node) -> f64 {
    let r = node.requested();
    let a = &node.allocatable;
    let frac = |used: i64, total: i64| if total > 0 { used as f64 / total as f64 } else { 1.0 };
    frac(r.cpu, a.cpu).max(frac(r.memory, a.memory))
}

/// One scan's decisions.
pub fn decide(input: &Input<'_>, memory: &mut Memory) -> Vec<Decision> {
    let mut out = Vec::new();
    if let Some(d) = scale_up(input) {
        memory.last_scale_up = Some(input.now);
        out.push(d);
    }
    let cooling = memory.last_scale_up.is_some_and(|t| input.now < t.plus(input.config.delay_after_add));
    if cooling {
        // Scale-down is not even evaluated during the cool-down, so nothing accrues unneeded time.
        memory.unneeded_since.clear();
        return out;
    }
    out.extend(scale_down(input, memory));
    out
}

fn scale_up(input: &Input<'_>) -> Option<Decision> {
    if input.pending.is_empty() {
        return None;
    }
    let groups = &input.config.node_groups;
    // Nodes on their way count as capacity: pods that fit them wait for them.
    let mut base: Vec<Node> = input.nodes.iter().filter(|n| !n.unschedulable).cloned().collect();
    for (gi, g) in groups.iter().enumerate() {
        for i in 0..input.groups[gi].upcoming {
            base.extend(template_node(g, &format!("upcoming-{}-{i}", g.name), input.catalog, input.daemonsets));
        }
    }
    let plan = schedule(&snapshot(input.pending.to_vec(), base.clone(), input), input.catalog);
    let waiting: BTreeSet<&str> = plan.unschedulable.iter().map(|u| u.pod.as_str()).collect();
    let remaining: Vec<Pod> = input.pending.iter().filter(|p| waiting.contains(p.key().as_str())).cloned().collect();
    if remaining.is_empty() {
        return None;
    }
    // The options below are tried with the room those pods take already taken.
    let by_key: BTreeMap<String, &Pod> = input.pending.iter().map(|p| (p.key(), p)).collect();
    for placement in &plan.existing {
        let Some(node) = base.iter_mut().find(|n| n.name == placement.node) else { continue };
        for key in &placement.pods {
            if let Some(p) = by_key.get(key) {
                let mut p = (*p).clone();
                p.node_name = Some(node.name.clone());
                node.pods.push(Arc::new(p));
            }
        }
    }

    let mut best: Option<(usize, usize, usize)> = None; // (pods helped, group, nodes)
    for (gi, g) in groups.iter().enumerate() {
        let size = input.groups[gi].desired;
        let room = g.max_size.saturating_sub(size).min(remaining.len());
        if room == 0 {
            continue;
        }
        let prefix = format!("template-{}-", g.name);
        let mut nodes = base.clone();
        for i in 0..room {
            match template_node(g, &format!("{prefix}{i}"), input.catalog, input.daemonsets) {
                Some(n) => nodes.push(n),
                None => break,
            }
        }
        let plan = schedule(&snapshot(remaining.clone(), nodes, input), input.catalog);
        let mut used = 0;
        let mut helped = 0;
        for e in plan.existing.iter().filter(|e| e.node.starts_with(&prefix)) {
            used += 1;
            helped += e.pods.len();
        }
        if helped > 0 && best.is_none_or(|(h, _, _)| helped > h) {
            best = Some((helped, gi, used));
        }
    }
    let (helped, group, by) = best?;
    let g = &groups[group];
    Some(Decision::ScaleUp {
        group,
        by,
        why: format!(
            "{} pod(s) unschedulable; {helped} fit {by} new {} node(s) of group {}",
            remaining.len(),
            g.instance_types[0],
            g.name
        ),
    })
}

/// Why a node's pods cannot simply be evicted, if they cannot.
fn blocker(node: &Node, input: &Input<'_>) -> Option<String> {
    let mut covered: BTreeMap<(&str, &str), i32> = BTreeMap::new();
    for p in node.pods.iter().filter(|p| !p.is_daemon() && !p.is_mirror()) {
        if p.owner == OwnerKind::None {
            return Some(format!("pod {} is not replicated", p.key()));
        }
        let pdbs: Vec<&Pdb> = input.pdbs.iter().filter(|b| b.covers(p)).collect();
        if p.namespace == "kube-system" && pdbs.is_empty() {
            return Some(format!("kube-system pod {} has no PodDisruptionBudget", p.key()));
        }
        for b in pdbs {
            let n = covered.entry((&b.namespace, &b.name)).or_default();
            *n += 1;
            if *n > b.disruptions_allowed {
                return Some(format!("PodDisruptionBudget {}/{} allows no more disruptions", b.namespace, b.name));
            }
        }
    }
    None
}

fn scale_down(input: &Input<'_>, memory: &mut Memory) -> Vec<Decision> {
    let groups = &input.config.node_groups;
    // Nodes each group may still lose without going under its minimum.
    let mut spare: Vec<usize> = groups
        .iter()
        .enumerate()
        .map(|(gi, g)| {
            let size = input.nodes.iter().filter(|n| input.node_group.get(&n.name) == Some(&gi)).count()
                + input.groups[gi].upcoming;
            size.saturating_sub(g.min_size)
        })
        .collect();
    let mut candidates: Vec<(f64, &Node)> = input
        .nodes
        .iter()
        .filter(|n| !n.unschedulable && input.node_group.contains_key(&n.name))
        .map(|n| (utilization(n), n))
        .filter(|(u, _)| *u < input.config.utilization_threshold)
        .collect();
    candidates.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));

    let mut unneeded: Vec<(&Node, bool)> = Vec::new();
    let mut removed: BTreeSet<&str> = BTreeSet::new();
    for (_, node) in candidates {
        let movable: Vec<Pod> = node
            .pods
            .iter()
            .filter(|p| !p.is_daemon() && !p.is_mirror())
            .map(|p| Pod { node_name: None, ..Pod::clone(p) })
            .collect();
        let empty = movable.is_empty();
        let fits = empty || {
            blocker(node, input).is_none() && {
                let others: Vec<Node> = input
                    .nodes
                    .iter()
                    .filter(|n| n.name != node.name && !removed.contains(n.name.as_str()) && !n.unschedulable)
                    .cloned()
                    .collect();
                schedule(&snapshot(movable, others, input), input.catalog).unschedulable.is_empty()
            }
        };
        if fits {
            // Later candidates must not count on a node that may go too.
            removed.insert(node.name.as_str());
            unneeded.push((node, empty));
        }
    }
    let now = input.now;
    memory.unneeded_since.retain(|n, _| unneeded.iter().any(|(u, _)| u.name == *n));
    for (n, _) in &unneeded {
        memory.unneeded_since.entry(n.name.clone()).or_insert(now);
    }
    let ripe =
        |n: &Node| memory.unneeded_since.get(&n.name).is_some_and(|t| now.since(*t) >= input.config.unneeded_time);

    let mut out = Vec::new();
    let mut empties = Vec::new();
    for (n, _) in unneeded.iter().filter(|(n, empty)| *empty && ripe(n)) {
        let gi = input.node_group[&n.name];
        if spare[gi] > 0 && empties.len() < input.config.max_empty_bulk_delete {
            spare[gi] -= 1;
            empties.push(n.name.clone());
        }
    }
    if !empties.is_empty() {
        let why = format!(
            "{} empty node(s) unneeded for {} or more",
            empties.len(),
            dovetail_core::time::format_duration(input.config.unneeded_time)
        );
        for n in &empties {
            memory.unneeded_since.remove(n);
        }
        out.push(Decision::RemoveEmpty { nodes: empties, why });
        return out;
    }
    if let Some((n, _)) = unneeded.iter().find(|(n, empty)| !*empty && ripe(n) && spare[input.node_group[&n.name]] > 0)
    {
        let why = format!(
            "node {} ({}) is {:.0}% requested and its pods fit elsewhere",
            n.name,
            n.labels.get(labels::INSTANCE_TYPE).map_or("?", String::as_str),
            utilization(n) * 100.0
        );
        memory.unneeded_since.remove(&n.name);
        out.push(Decision::Drain { node: n.name.clone(), why });
    }
    out
}

#[cfg(test)]
mod tests;
