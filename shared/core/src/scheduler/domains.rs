//! Topology domains: the values of each topology key a class may take (its universes), the
//! combinations open to a pod under its spreads and pod (anti-)affinity, best first, and the
//! private counts of spreads that count only the nodes the pod could use. The counting itself
//! is `topology.rs`.

use rustc_hash::FxHashMap;

use super::classes::taints_block;
use super::pools::{OfferingFilter, PreparedPool};
use super::Scheduler;
use crate::catalog::Catalog;
use crate::labels;
use crate::requirements::Requirements;
use crate::snapshot::Snapshot;

impl<'a> Scheduler<'a> {
    /// Works out, once per distinct (key, policies, requirements, tolerations), the domain values
    /// each class level can take on its domain keys and the domains each spread counts.
    pub(super) fn fill_universes(&mut self) {
        type Key = (String, bool, bool, Requirements, Vec<crate::model::Toleration>);
        let mut cache: FxHashMap<Key, Vec<String>> = FxHashMap::default();
        for c in 0..self.classes.len() {
            let pod = self.classes[c].rep(self.snap);
            for l in 0..self.classes[c].levels.len() {
                let level = &self.classes[c].levels[l];
                let mut get = |key: &str, ha: bool, ht: bool, reqs: &Requirements| {
                    cache
                        .entry((key.to_string(), ha, ht, reqs.clone(), pod.tolerations.clone()))
                        .or_insert_with(|| universe(self.snap, self.catalog, &self.pools, pod, reqs, key, ha, ht))
                        .clone()
                };
                let universes: Vec<Vec<String>> =
                    level.domain_keys.iter().map(|k| get(k, true, true, &level.reqs)).collect();
                // A spread's nodeAffinityPolicy (Honor) counts the domains of every node the pod's
                // *required* node affinity allows — any of its terms — as kube-scheduler does, not
                // just those of the term and preferred terms this rung tries: counting fewer domains
                // lets the rung crowd one of them beyond maxSkew.
                let any = [Requirements::new()];
                let required: &[Requirements] = if pod.node_affinity.is_empty() { &any } else { &pod.node_affinity };
                let counted: Vec<Vec<String>> = level
                    .spreads
                    .iter()
                    .map(|sp| {
                        let g = &self.topo.groups[sp.group as usize];
                        if g.hostname {
                            return vec![];
                        }
                        let mut all: Vec<String> = required
                            .iter()
                            .flat_map(|t| get(&g.key.topology_key, sp.honor_affinity, sp.honor_taints, t))
                            .collect();
                        all.sort();
                        all.dedup();
                        all
                    })
                    .collect();
                let level = &mut self.classes[c].levels[l];
                level.universes = universes;
                for (sp, u) in level.spreads.iter_mut().zip(counted) {
                    sp.counted = u;
                }
            }
        }
    }

    /// The combinations of domain values (indices into the level's universes, one per domain
    /// key) the pod may take, best first.
    pub(super) fn domain_choices(&self, c: usize, l: usize) -> Result<Vec<Vec<u16>>, String> {
        let class = &self.classes[c];
        let level = &class.levels[l];
        let mut per_key: Vec<Vec<u16>> = Vec::with_capacity(level.domain_keys.len());
        for (key, universe) in level.domain_keys.iter().zip(&level.universes) {
            let mut allowed: Vec<(u32, u16)> = Vec::new();
            'values: for (vi, v) in universe.iter().enumerate() {
                let mut score = 0u32;
                for s in &level.spreads {
                    let g = &self.topo.groups[s.group as usize];
                    if g.key.topology_key != *key {
                        continue;
                    }
                    let count = |d: &str| match s.private {
                        Some(i) => self.private_counts[i as usize].1.get(d).copied().unwrap_or(0),
                        None => g.count(d),
                    };
                    // Fewer eligible domains than minDomains: the global minimum counts as 0.
                    let min = if s.min_domains.is_some_and(|m| m > s.counted.len() as u32) {
                        0
                    } else {
                        s.counted.iter().map(|u| count(u)).min().unwrap_or(0)
                    };
                    if count(v) + 1 > min + s.max_skew {
                        continue 'values;
                    }
                    score += count(v);
                }
                for &(a, self_match) in &level.affinity {
                    let g = &self.topo.groups[a as usize];
                    if g.key.topology_key == *key && g.count(v) == 0 && !(g.total == 0 && self_match) {
                        continue 'values;
                    }
                }
                for &a in level.anti.iter().chain(class.repelled.iter()) {
                    let g = &self.topo.groups[a as usize];
                    if g.key.topology_key == *key && g.count(v) > 0 {
                        continue 'values;
                    }
                }
                for &e in &class.effects {
                    let g = &self.topo.groups[e as usize];
                    if g.key.topology_key == *key && !g.key.owners {
                        score += g.count(v);
                    }
                }
                allowed.push((score, vi as u16));
            }
            if allowed.is_empty() {
                return Err(self.topology_reason(c, l, key));
            }
            allowed.sort_unstable();
            per_key.push(allowed.into_iter().map(|(_, v)| v).collect());
        }
        // Cartesian product, keys in order; bounded so pathological inputs stay fast.
        let mut out: Vec<Vec<u16>> = vec![vec![]];
        for values in per_key {
            let mut next = Vec::with_capacity(out.len() * values.len());
            for prefix in &out {
                for &v in &values {
                    let mut p = prefix.clone();
                    p.push(v);
                    next.push(p);
                }
            }
            next.truncate(64);
            out = next;
        }
        Ok(out)
    }

    /// `(key, value)` pins for a domain choice.
    pub(super) fn pins(&self, c: usize, l: usize, choice: &[u16]) -> Vec<(&str, &str)> {
        let level = &self.classes[c].levels[l];
        level
            .domain_keys
            .iter()
            .zip(&level.universes)
            .zip(choice)
            .map(|((k, u), &i)| (k.as_str(), u[i as usize].as_str()))
            .collect()
    }

    fn topology_reason(&self, c: usize, l: usize, key: &str) -> String {
        let level = &self.classes[c].levels[l];
        if let Some(s) = level.spreads.iter().find(|s| self.topo.groups[s.group as usize].key.topology_key == key) {
            return format!(
                "topology spread on {key} (maxSkew {}) cannot be satisfied in any {key} domain",
                s.max_skew
            );
        }
        if level.affinity.iter().any(|(g, _)| self.topo.groups[*g as usize].key.topology_key == key) {
            return format!("pod affinity on {key}: no {key} domain holds a matching pod");
        }
        format!("pod anti-affinity on {key}: every {key} domain already holds a conflicting pod")
    }

    /// Gives spreads with nodeAffinityPolicy Honor and node requirements their own counts, from
    /// the existing nodes the pod could use.
    pub(super) fn setup_private_counts(&mut self) {
        for c in 0..self.classes.len() {
            for l in 0..self.classes[c].levels.len() {
                for si in 0..self.classes[c].levels[l].spreads.len() {
                    let terms = &self.classes[c].rep(self.snap).node_affinity;
                    let level = &self.classes[c].levels[l];
                    let sp = &level.spreads[si];
                    let g = &self.topo.groups[sp.group as usize];
                    let constrained = !(terms.len() == 1 && terms[0].is_empty());
                    if !sp.honor_affinity || !constrained || g.hostname {
                        continue;
                    }
                    let mut counts: FxHashMap<String, u32> = FxHashMap::default();
                    for n in &self.snap.nodes {
                        if !terms.iter().any(|t| t.matches_labels(&n.labels)) {
                            continue;
                        }
                        let Some(v) = n.labels.get(&g.key.topology_key) else { continue };
                        let k = n
                            .pods
                            .iter()
                            .filter(|p| self.topo.effects_of(p, &self.snap.namespaces).contains(&sp.group))
                            .count() as u32;
                        if k > 0 {
                            *counts.entry(v.clone()).or_insert(0) += k;
                        }
                    }
                    let group = sp.group;
                    let i = self.private_counts.len() as u32;
                    self.private_counts.push((group, counts));
                    self.private_owner.push((c, l));
                    self.classes[c].levels[l].spreads[si].private = Some(i);
                }
            }
        }
    }

    /// Whether bin `b` is a node the pods behind private count `i` could use: one that satisfies a
    /// term of their required node affinity (nodeSelector included; preferences do not count).
    pub(super) fn bin_eligible(&self, b: usize, i: usize) -> bool {
        let (c, _) = self.private_owner[i];
        let terms = &self.classes[c].rep(self.snap).node_affinity;
        let bin = &self.bins[b];
        match bin.node {
            Some(n) => terms.iter().any(|t| t.matches_labels(&self.snap.nodes[n].labels)),
            None => {
                let treqs = self.pools[bin.pool].types[bin.target].requirements(self.catalog);
                terms.iter().any(|t| bin.reqs.overlaps(t) && treqs.overlaps(t))
            }
        }
    }
}

/// Values a non-hostname topology key can take: what existing nodes carry and what pools can
/// launch. `honor_affinity` / `honor_taints` are the spread policies: whether the pod's node
/// requirements and tolerations narrow the domains that count.
#[allow(clippy::too_many_arguments)]
fn universe(
    snap: &Snapshot,
    catalog: &Catalog,
    pools: &[PreparedPool<'_>],
    pod: &crate::model::Pod,
    level_reqs: &Requirements,
    key: &str,
    honor_affinity: bool,
    honor_taints: bool,
) -> Vec<String> {
    let mut values: Vec<String> = Vec::new();
    let mut push = |v: &str| {
        if !values.iter().any(|x| x == v) {
            values.push(v.to_string());
        }
    };
    for n in snap.nodes.iter().filter(|n| !n.unschedulable) {
        let Some(v) = n.labels.get(key) else { continue };
        if honor_affinity && !level_reqs.matches_labels(&n.labels) {
            continue;
        }
        if honor_taints && taints_block(pod, &n.taints, false).is_some() {
            continue;
        }
        push(v);
    }
    for pool in pools {
        if honor_taints && taints_block(pod, &pool.pool.taints, false).is_some() {
            continue;
        }
        let reqs = if honor_affinity {
            if pool.requirements.compatible(level_reqs).is_err() {
                continue;
            }
            pool.requirements.intersection(level_reqs)
        } else {
            pool.requirements.clone()
        };
        let allowed = OfferingFilter::new(&reqs);
        for t in pool.types.iter() {
            let treqs = t.requirements(catalog);
            if !treqs.overlaps(&reqs) {
                continue;
            }
            match key {
                labels::ZONE | labels::CAPACITY_TYPE | labels::ZONE_ID => {
                    for o in t.offerings.iter().filter(|o| allowed.allows(o)) {
                        push(match key {
                            labels::ZONE => &o.zone,
                            labels::ZONE_ID => &o.zone_id,
                            _ => o.capacity_type.as_str(),
                        });
                    }
                }
                _ => match (treqs.get(key).and_then(|r| r.single_value()), reqs.get(key)) {
                    (Some(v), r) if r.is_none_or(|r| r.has(v)) => push(v),
                    (None, Some(r)) if !r.complement => r.values.iter().for_each(|v| push(v)),
                    _ => {}
                },
            }
        }
    }
    values.sort();
    values
}
