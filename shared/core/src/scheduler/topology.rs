//! Topology bookkeeping for spread constraints and pod (anti-)affinity.
//!
//! A *group* counts pods per topology domain: either pods matching a selector (used by spreads,
//! affinity and a pod's own anti-affinity), or pods that *own* a required anti-affinity term
//! (so an incoming pod matching that term avoids them: the symmetric half of anti-affinity).
//! Hostname-keyed groups count per bin (every node is its own domain); others per label value.

use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;

use crate::labels;
use crate::model::{LabelSelector, NamespaceScope, Pod, PodAffinityTerm};

/// Which namespaces a group counts pods in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum NsFilter {
    All,
    List(Vec<String>),
    Selector(LabelSelector, Vec<String>),
}

impl NsFilter {
    pub fn of_term(scope: &NamespaceScope, own: &str) -> NsFilter {
        match scope {
            NamespaceScope::All => NsFilter::All,
            NamespaceScope::List(l) if l.is_empty() => NsFilter::List(vec![own.to_string()]),
            NamespaceScope::List(l) => {
                let mut l = l.clone();
                l.sort();
                l.dedup();
                NsFilter::List(l)
            }
            NamespaceScope::Selector(s, l) => NsFilter::Selector(s.clone(), l.clone()),
        }
    }

    fn contains(&self, ns: &str, namespaces: &BTreeMap<String, BTreeMap<String, String>>) -> bool {
        match self {
            NsFilter::All => true,
            NsFilter::List(l) => l.iter().any(|n| n == ns),
            NsFilter::Selector(sel, l) => {
                l.iter().any(|n| n == ns) || namespaces.get(ns).is_some_and(|labels| sel.matches(labels))
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct GroupKey {
    /// Counts owners of an anti-affinity term rather than pods matching the selector.
    pub owners: bool,
    pub topology_key: String,
    pub selector: LabelSelector,
    pub namespaces: NsFilter,
}

impl GroupKey {
    /// The group a term of a pod in `owner_ns` counts in: pods the term selects, or (`owners`)
    /// the pods that carry it.
    fn of_term(owners: bool, term: &PodAffinityTerm, owner_ns: &str) -> GroupKey {
        GroupKey {
            owners,
            topology_key: labels::normalize_key(&term.topology_key).to_string(),
            selector: term.selector.clone(),
            namespaces: NsFilter::of_term(&term.namespaces, owner_ns),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Group {
    pub key: GroupKey,
    pub hostname: bool,
    /// Pods per domain value (non-hostname groups).
    pub counts: HashMap<String, u32>,
    /// Bins with a non-zero count (hostname groups), in the order they got one.
    pub bins: Vec<usize>,
    pub total: u32,
}

impl Group {
    pub fn count(&self, domain: &str) -> u32 {
        self.counts.get(domain).copied().unwrap_or(0)
    }
}

#[derive(Debug, Default)]
pub(crate) struct Topology {
    pub groups: Vec<Group>,
    index: HashMap<GroupKey, u32>,
    /// The groups counting pods that match a selector (the rest count owners). Kept apart so a
    /// pod's effects cost the match groups plus a look-up per anti-affinity term it carries, not
    /// a scan of every group: existing pods' terms make an owner group each, and with a selector
    /// per workload that is thousands of groups times every pod of the cluster.
    match_groups: Vec<u32>,
}

impl Topology {
    pub fn intern(&mut self, key: GroupKey) -> u32 {
        if let Some(&id) = self.index.get(&key) {
            return id;
        }
        let id = self.groups.len() as u32;
        if !key.owners {
            self.match_groups.push(id);
        }
        let hostname = key.topology_key == labels::HOSTNAME;
        self.groups.push(Group { key: key.clone(), hostname, counts: HashMap::default(), bins: vec![], total: 0 });
        self.index.insert(key, id);
        id
    }

    pub fn match_group(&mut self, term: &PodAffinityTerm, owner_ns: &str) -> u32 {
        self.intern(GroupKey::of_term(false, term, owner_ns))
    }

    pub fn owner_group(&mut self, term: &PodAffinityTerm, owner_ns: &str) -> u32 {
        self.intern(GroupKey::of_term(true, term, owner_ns))
    }

    /// Groups whose counts a pod adds to when placed, in group order, each once: match groups
    /// selecting it, and owner groups of the required anti-affinity terms it carries.
    pub fn effects_of(&self, pod: &Pod, namespaces: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .match_groups
            .iter()
            .copied()
            .filter(|&i| {
                let g = &self.groups[i as usize];
                g.key.namespaces.contains(&pod.namespace, namespaces) && g.key.selector.matches(&pod.labels)
            })
            .collect();
        for t in &pod.pod_anti_affinity {
            out.extend(self.index.get(&GroupKey::of_term(true, t, &pod.namespace)));
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Owner groups whose term selects `pod`: it must stay out of their domains.
    pub fn repelled_by(&self, pod: &Pod, namespaces: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<u32> {
        self.groups
            .iter()
            .enumerate()
            .filter(|(_, g)| {
                g.key.owners
                    && g.key.namespaces.contains(&pod.namespace, namespaces)
                    && g.key.selector.matches(&pod.labels)
            })
            .map(|(i, _)| i as u32)
            .collect()
    }

    pub fn record(&mut self, group: u32, domain: Option<&str>, bin: usize, bin_counts: &mut Vec<(u32, u32)>) {
        let g = &mut self.groups[group as usize];
        g.total += 1;
        if g.hostname {
            match bin_counts.iter_mut().find(|(id, _)| *id == group) {
                Some((_, c)) => *c += 1,
                None => {
                    bin_counts.push((group, 1));
                    g.bins.push(bin);
                }
            }
        } else if let Some(d) = domain {
            *g.counts.entry(d.to_string()).or_insert(0) += 1;
        }
    }
}

/// A bin's count for a hostname group.
pub(crate) fn bin_count(bin_counts: &[(u32, u32)], group: u32) -> u32 {
    bin_counts.iter().find(|(id, _)| *id == group).map_or(0, |(_, c)| *c)
}
