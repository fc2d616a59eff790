//! A Cluster Autoscaler-like policy to compare Dovetail against, on the same world and scenario.
//!
//! [`policy`] is the autoscaler's decision function (pure); [`ClusterAutoscaler`] runs it every
//! scan and plays the autoscaling groups: it keeps each group at its desired capacity, launching
//! the first instance type of the group's list that has capacity, in the zone with the fewest of
//! the group's instances (an ASG's AZ balancing), and replacing instances EC2 took away. There is
//! no interruption handling: a reclaimed spot node's pods are lost with it and come back pending,
//! as with Cluster Autoscaler alone.

mod config;
pub mod policy;

pub use config::{Config, NodeGroup};

use std::collections::{BTreeMap, BTreeSet};

use dovetail_core::catalog::OfferingKey;
use dovetail_core::labels;
use dovetail_core::model::{Node, Taint, TaintEffect};

use crate::world::{subnet_of, LaunchSpec, State, World, GROUP_TAG, SECURITY_GROUP};
use policy::{Decision, GroupState, Input, Memory};

/// The taint Cluster Autoscaler puts on a node it is removing.
pub const TO_BE_DELETED: &str = "ToBeDeletedByClusterAutoscaler";

/// What the baseline did over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub scans: u64,
    pub scale_ups: u64,
    pub nodes_requested: u64,
    pub empty_removed: u64,
    pub drained_removed: u64,
    /// Drains given up because an eviction was refused.
    pub drains_blocked: u64,
    /// Launch attempts in which no listed type had capacity in any of the group's zones.
    pub launch_failures: u64,
}

#[derive(Debug, Clone, Default)]
struct Asg {
    desired: usize,
    instances: BTreeSet<String>,
}

pub struct ClusterAutoscaler {
    config: Config,
    groups: Vec<Asg>,
    memory: Memory,
    pub tally: Tally,
}

impl ClusterAutoscaler {
    pub fn new(config: Config) -> Self {
        let groups =
            config.node_groups.iter().map(|g| Asg { desired: g.min_size, instances: BTreeSet::new() }).collect();
        ClusterAutoscaler { config, groups, memory: Memory::default(), tally: Tally::default() }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// One scan: the autoscaling groups catch up, the autoscaler decides, the decisions are
    /// carried out, and the groups launch what was asked for.
    pub fn scan(&mut self, world: &World) {
        let mut s = world.lock();
        self.tally.scans += 1;
        self.reconcile_groups(&mut s);
        let decisions = {
            let input_nodes = self.nodes(&s);
            let node_group: BTreeMap<String, usize> = input_nodes.iter().map(|(gi, n)| (n.name.clone(), *gi)).collect();
            let nodes: Vec<Node> = input_nodes.into_iter().map(|(_, n)| n).collect();
            let registered: BTreeSet<&str> = s.kube.nodes.values().map(|n| n.instance_id.as_str()).collect();
            let groups: Vec<GroupState> = self
                .groups
                .iter()
                .map(|a| GroupState {
                    desired: a.desired,
                    upcoming: a.instances.iter().filter(|i| !registered.contains(i.as_str())).count(),
                })
                .collect();
            let pending: Vec<_> = s.kube.provisionable().map(|p| p.pod.clone()).collect();
            let pdbs = s.kube.pdbs_now();
            let input = Input {
                now: s.now,
                config: &self.config,
                catalog: &s.catalog,
                nodes: &nodes,
                node_group: &node_group,
                pending: &pending,
                groups: &groups,
                daemonsets: &s.kube.daemonsets,
                pdbs: &pdbs,
                namespaces: &s.kube.namespaces,
            };
            policy::decide(&input, &mut self.memory)
        };
        for d in decisions {
            self.carry_out(&mut s, d);
        }
        self.reconcile_groups(&mut s);
        s.settle();
    }

    /// Registered, Ready nodes of the groups, with their pods, and each one's group.
    fn nodes(&self, s: &State) -> Vec<(usize, Node)> {
        let mut out = Vec::new();
        for sim in s.kube.nodes.values().filter(|n| n.node.ready) {
            let Some(gi) = self.groups.iter().position(|a| a.instances.contains(&sim.instance_id)) else { continue };
            if let Some(mut node) = s.kube.node_view(&sim.node.name) {
                node.unschedulable = node.taints.iter().any(|t| t.key == TO_BE_DELETED);
                out.push((gi, node));
            }
        }
        out
    }

    fn carry_out(&mut self, s: &mut State, d: Decision) {
        match d {
            Decision::ScaleUp { group, by, .. } => {
                let g = &self.config.node_groups[group];
                let a = &mut self.groups[group];
                a.desired = (a.desired + by).min(g.max_size);
                self.tally.scale_ups += 1;
                self.tally.nodes_requested += by as u64;
            }
            Decision::RemoveEmpty { nodes, .. } => {
                for n in nodes {
                    if self.remove(s, &n) {
                        self.tally.empty_removed += 1;
                    }
                }
            }
            Decision::Drain { node, .. } => {
                let taint = Taint::new(TO_BE_DELETED, "", TaintEffect::NoSchedule);
                s.kube.taint(&node, &taint);
                let pods: Vec<(String, String)> = s
                    .kube
                    .node_view(&node)
                    .map(|n| {
                        n.pods
                            .iter()
                            .filter(|p| !p.is_daemon() && !p.is_mirror())
                            .map(|p| (p.namespace.clone(), p.name.clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                let refused = pods
                    .iter()
                    .filter(|(ns, name)| s.evict(ns, name) == dovetail_core::nodeclaim::drain::EvictionResult::Refused)
                    .count();
                if refused > 0 {
                    // Cluster Autoscaler gives the node back and tries again later.
                    s.kube.remove_taint(&node, TO_BE_DELETED);
                    self.tally.drains_blocked += 1;
                } else if self.remove(s, &node) {
                    self.tally.drained_removed += 1;
                }
            }
        }
    }

    /// TerminateInstanceInAutoScalingGroup with the desired capacity decremented.
    fn remove(&mut self, s: &mut State, node: &str) -> bool {
        let Some(id) = s.kube.nodes.get(node).map(|n| n.instance_id.clone()) else { return false };
        let Some(a) = self.groups.iter_mut().find(|a| a.instances.contains(&id)) else { return false };
        a.instances.remove(&id);
        a.desired = a.desired.saturating_sub(1);
        s.kube.taint(node, &Taint::new(TO_BE_DELETED, "", TaintEffect::NoSchedule));
        s.terminate_instance(&id);
        true
    }

    /// Each group drops the instances that are gone and launches up to its desired capacity.
    fn reconcile_groups(&mut self, s: &mut State) {
        for (gi, g) in self.config.node_groups.iter().enumerate() {
            let a = &mut self.groups[gi];
            a.instances.retain(|id| {
                s.cloud.instances.get(id).is_some_and(|i| matches!(i.instance.state.as_str(), "pending" | "running"))
            });
            while a.instances.len() < a.desired {
                match launch(s, g, &a.instances) {
                    Some(id) => {
                        a.instances.insert(id);
                    }
                    None => {
                        self.tally.launch_failures += 1;
                        break;
                    }
                }
            }
        }
    }
}

/// One instance for a group: the zone with the fewest of its instances first, the first type
/// with capacity there. `None` when no zone has any.
fn launch(s: &mut State, g: &NodeGroup, current: &BTreeSet<String>) -> Option<String> {
    let mut zones: Vec<(usize, usize, &String)> = g
        .zones
        .iter()
        .enumerate()
        .map(|(i, z)| {
            let n =
                current.iter().filter(|id| s.cloud.instances.get(*id).is_some_and(|x| x.instance.zone == *z)).count();
            (n, i, z)
        })
        .collect();
    zones.sort();
    // The account's discounts (a Savings Plan, as NodeOverlays say) are on its bill whoever
    // launches: the baseline's instances are billed at the prices Dovetail's are.
    let catalog = if s.kube.overlays.is_empty() {
        s.catalog.clone()
    } else {
        std::sync::Arc::new(dovetail_core::overlay::apply(&s.catalog, &s.kube.overlays).catalog)
    };
    for (_, _, zone) in zones {
        for t in &g.instance_types {
            let key = OfferingKey { instance_type: t.clone(), zone: zone.clone(), capacity_type: g.capacity_type };
            let Some(it) = catalog.get(t) else { continue };
            let Some(price) =
                it.offerings.iter().find(|o| o.zone == *zone && o.capacity_type == g.capacity_type).map(|o| o.price)
            else {
                continue;
            };
            if s.capacity_error(&key) {
                continue;
            }
            let arch = it.requirements.get(labels::ARCH).and_then(|r| r.single_value()).unwrap_or("amd64").to_string();
            let image = s.cloud.images().get(&arch).cloned().unwrap_or_default();
            let mut tags = BTreeMap::new();
            tags.insert("aws:autoscaling:groupName".to_string(), g.name.clone());
            tags.insert(GROUP_TAG.to_string(), g.name.clone());
            let spec = LaunchSpec {
                instance_type: t.clone(),
                zone: zone.clone(),
                capacity_type: g.capacity_type,
                price,
                tags,
                image_id: image,
                subnet_id: subnet_of(zone),
                security_groups: vec![SECURITY_GROUP.to_string()],
                labels: g.labels.clone(),
                taints: g.taints.clone(),
                startup_taints: vec![],
                kubelet: Default::default(),
                unregistered_taint: false,
                reservation: None,
            };
            return Some(s.launch_instance(spec, &g.name));
        }
    }
    None
}
