//! Pods grouped into classes of identical scheduling constraints, and each class's relaxation
//! ladder (Karpenter's order of giving up preferences).
//!
//! Replicas of one controller are identical to the scheduler, so constraint work (pool
//! compatibility, candidate types, topology domains) is done once per class, not once per pod.

use rustc_hash::FxHashMap;

use super::topology::Topology;
use crate::labels;
use crate::model::{Pod, TaintEffect, WhenUnsatisfiable};
use crate::requirements::Requirements;
use crate::snapshot::Snapshot;

/// A spread constraint in force at a level.
#[derive(Debug, Clone)]
pub(crate) struct Spread {
    pub group: u32,
    pub max_skew: u32,
    pub min_domains: Option<u32>,
    /// nodeAffinityPolicy: Honor — only domains the pod's node requirements allow count.
    pub honor_affinity: bool,
    /// nodeTaintsPolicy: Honor — only domains of nodes whose taints the pod tolerates count.
    pub honor_taints: bool,
    /// The domains that count towards the skew (non-hostname keys), filled once pools are known.
    pub counted: Vec<String>,
    /// With nodeAffinityPolicy Honor and node requirements, only pods on nodes the pod could use
    /// count: such a spread keeps its own counts (an index into the scheduler's private counts).
    pub private: Option<u32>,
}

/// One rung of the ladder: the constraints a pod is placed under.
#[derive(Debug)]
pub(crate) struct Level {
    /// Node requirements: one required term ∩ the heaviest remaining preferred term ∩ volumes.
    pub reqs: Requirements,
    pub spreads: Vec<Spread>,
    /// Match groups the pod must share a domain with; `bool` = the pod matches the term itself
    /// (then the first such pod may go anywhere, as in kube-scheduler).
    pub affinity: Vec<(u32, bool)>,
    /// Match groups whose domains the pod must avoid.
    pub anti: Vec<u32>,
    /// PreferNoSchedule taints keep the pod off until the last rung.
    pub strict_prefer: bool,
    /// Topology keys other than hostname on which a bin must be pinned to place the pod.
    pub domain_keys: Vec<String>,
    /// Per domain key, the values the pod could take there (sorted), filled once pools are known.
    pub universes: Vec<Vec<String>>,
}

#[derive(Debug)]
pub(crate) struct Class {
    /// Indices into the snapshot's pending pods.
    pub pods: Vec<usize>,
    pub levels: Vec<Level>,
    /// Groups the class's pods add to when placed.
    pub effects: Vec<u32>,
    /// Owner groups (others' required anti-affinity) that repel the class.
    pub repelled: Vec<u32>,
}

impl Class {
    pub fn rep<'a>(&self, snap: &'a Snapshot) -> &'a Pod {
        &snap.pods[self.pods[0]]
    }
}

/// The fields that decide where a pod can go: everything except its name.
type ClassKey<'a> = (
    &'a str,
    &'a std::collections::BTreeMap<String, String>,
    &'a crate::resources::Resources,
    &'a Vec<Requirements>,
    &'a Vec<crate::model::Weighted<Requirements>>,
    &'a Vec<crate::model::Toleration>,
    &'a Vec<crate::model::TopologySpread>,
    (&'a Vec<crate::model::PodAffinityTerm>, &'a Vec<crate::model::PodAffinityTerm>),
    (
        &'a Vec<crate::model::Weighted<crate::model::PodAffinityTerm>>,
        &'a Vec<crate::model::Weighted<crate::model::PodAffinityTerm>>,
    ),
    &'a Vec<crate::model::HostPort>,
    &'a Requirements,
);

fn class_key(p: &Pod) -> ClassKey<'_> {
    (
        &p.namespace,
        &p.labels,
        &p.requests,
        &p.node_affinity,
        &p.preferred_node_affinity,
        &p.tolerations,
        &p.topology_spread,
        (&p.pod_affinity, &p.pod_anti_affinity),
        (&p.preferred_pod_affinity, &p.preferred_pod_anti_affinity),
        &p.host_ports,
        &p.volume_requirements,
    )
}

/// Groups pods into classes (first-seen order).
pub(crate) fn group(snap: &Snapshot) -> Vec<Vec<usize>> {
    let mut index: FxHashMap<ClassKey<'_>, usize> = FxHashMap::default();
    let mut classes: Vec<Vec<usize>> = Vec::new();
    for (i, p) in snap.pods.iter().enumerate() {
        let next = classes.len();
        let c = *index.entry(class_key(p)).or_insert(next);
        if c == next {
            classes.push(vec![]);
        }
        classes[c].push(i);
    }
    classes
}

/// Builds a class's ladder, interning its topology groups.
pub(crate) fn ladder(pod: &Pod, topo: &mut Topology, prefer_taints_exist: bool) -> Vec<Level> {
    // Relaxable preferences, heaviest first within each kind (Karpenter drops the heaviest first
    // so lighter alternatives get a chance).
    let mut pref_aff: Vec<_> = pod.preferred_pod_affinity.iter().collect();
    pref_aff.sort_by_key(|w| std::cmp::Reverse(w.weight));
    let mut pref_anti: Vec<_> = pod.preferred_pod_anti_affinity.iter().collect();
    pref_anti.sort_by_key(|w| std::cmp::Reverse(w.weight));
    let mut pref_node: Vec<_> = pod.preferred_node_affinity.iter().collect();
    pref_node.sort_by_key(|w| std::cmp::Reverse(w.weight));
    let soft_spreads: Vec<_> =
        pod.topology_spread.iter().filter(|s| s.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway).collect();

    // State of the ladder: how much of each list has been dropped.
    #[derive(Clone, Copy)]
    struct State {
        term: usize,
        aff: usize,
        anti: usize,
        node: usize,
        soft: usize,
        tolerate_prefer: bool,
    }
    let terms = pod.node_affinity.len().max(1);
    let mut states = vec![(State { term: 0, aff: 0, anti: 0, node: 0, soft: 0, tolerate_prefer: false }, None)];
    let mut s = states[0].0;
    loop {
        let relaxed;
        if s.aff < pref_aff.len() {
            s.aff += 1;
            relaxed = "a preferred pod affinity term".to_string();
        } else if s.anti < pref_anti.len() {
            s.anti += 1;
            relaxed = "a preferred pod anti-affinity term".to_string();
        } else if s.node < pref_node.len() {
            s.node += 1;
            relaxed = "a preferred node affinity term".to_string();
        } else if s.soft < soft_spreads.len() {
            s.soft += 1;
            relaxed = format!("the ScheduleAnyway topology spread on {}", soft_spreads[s.soft - 1].topology_key);
        } else if !s.tolerate_prefer && prefer_taints_exist {
            s.tolerate_prefer = true;
            relaxed = "avoiding PreferNoSchedule taints".to_string();
        } else {
            break;
        }
        states.push((s, Some(relaxed)));
    }
    // Required node-affinity terms are alternatives of equal standing (kube-scheduler takes any
    // of them): every rung of preferences is tried with each term before a preference is given
    // up, so a term that only works once preferences are relaxed is still tried.
    let states: Vec<(State, Option<String>)> = states
        .into_iter()
        .flat_map(|(s, relaxed)| (0..terms).map(move |term| (State { term, ..s }, relaxed.clone())))
        .collect();

    let empty = Requirements::new();
    states
        .into_iter()
        .map(|(s, _relaxed)| {
            let term = pod.node_affinity.get(s.term).unwrap_or(&empty);
            let mut reqs = term.intersection(&pod.volume_requirements);
            if let Some(pref) = pref_node.get(s.node) {
                reqs = reqs.intersection(&pref.term);
            }
            let mut spreads = Vec::new();
            for sp in &pod.topology_spread {
                let soft_index = soft_spreads.iter().position(|x| std::ptr::eq(*x, sp));
                if soft_index.is_some_and(|i| i < s.soft) {
                    continue;
                }
                let group = topo.intern(super::topology::GroupKey {
                    owners: false,
                    topology_key: labels::normalize_key(&sp.topology_key).to_string(),
                    selector: sp.selector.clone(),
                    namespaces: super::topology::NsFilter::List(vec![pod.namespace.clone()]),
                });
                spreads.push(Spread {
                    group,
                    max_skew: sp.max_skew.max(1) as u32,
                    min_domains: sp.min_domains.map(|m| m.max(1) as u32),
                    honor_affinity: sp.node_affinity_policy == crate::model::InclusionPolicy::Honor,
                    honor_taints: sp.node_taints_policy == crate::model::InclusionPolicy::Honor,
                    counted: vec![],
                    private: None,
                });
            }
            let mut affinity = Vec::new();
            let mut anti = Vec::new();
            let self_match = |t: &crate::model::PodAffinityTerm| {
                t.namespaces.contains(&pod.namespace, &pod.namespace, None) && t.selector.matches(&pod.labels)
            };
            for t in pod.pod_affinity.iter().chain(pref_aff.iter().skip(s.aff).map(|w| &w.term)) {
                affinity.push((topo.match_group(t, &pod.namespace), self_match(t)));
            }
            for t in pod.pod_anti_affinity.iter().chain(pref_anti.iter().skip(s.anti).map(|w| &w.term)) {
                anti.push(topo.match_group(t, &pod.namespace));
            }
            // Required anti-affinity also registers the owner group, so later pods it selects
            // keep away from this one.
            for t in &pod.pod_anti_affinity {
                topo.owner_group(t, &pod.namespace);
            }
            Level {
                reqs,
                spreads,
                affinity,
                anti,
                strict_prefer: !s.tolerate_prefer,
                domain_keys: vec![],
                universes: vec![],
            }
        })
        .collect()
}

/// Fills in what depends on every group being known: effects, repulsion, keys to pin.
pub(crate) fn finish(class: &mut Class, snap: &Snapshot, topo: &Topology) {
    let rep = class.rep(snap);
    class.effects = topo.effects_of(rep, &snap.namespaces);
    class.repelled = topo.repelled_by(rep, &snap.namespaces);
    for level in &mut class.levels {
        let mut keys: Vec<String> = Vec::new();
        let groups = level
            .spreads
            .iter()
            .map(|s| s.group)
            .chain(level.affinity.iter().map(|a| a.0))
            .chain(level.anti.iter().copied())
            .chain(class.repelled.iter().copied())
            .chain(class.effects.iter().copied());
        for g in groups {
            let g = &topo.groups[g as usize];
            if !g.hostname && !keys.contains(&g.key.topology_key) {
                keys.push(g.key.topology_key.clone());
            }
        }
        keys.sort();
        level.domain_keys = keys;
    }
}

/// Whether a taint list blocks the pod at a level (PreferNoSchedule counts until relaxed).
pub(crate) fn taints_block(pod: &Pod, taints: &[crate::model::Taint], strict_prefer: bool) -> Option<String> {
    for t in taints {
        if t.effect == TaintEffect::PreferNoSchedule && !strict_prefer {
            continue;
        }
        if !pod.tolerations.iter().any(|tol| tol.tolerates(t)) {
            return Some(t.to_string());
        }
    }
    None
}
