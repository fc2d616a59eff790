//! Bins: the capacity pods are placed on (existing nodes and in-flight claims first, then the
//! claims this pass opens), whether a bin takes a pod, and putting it there.

use super::classes::{taints_block, Level};
use super::pools::{OfferingFilter, PoolType};
use super::topology::bin_count;
use super::Scheduler;
use crate::labels;
use crate::model::{HostPort, LIMIT_COST};
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;

/// Capacity pods can be placed on: an existing node, an in-flight claim, or a claim this pass opens.
#[derive(Debug, Clone)]
pub(crate) struct Bin {
    /// Index into `snap.nodes` for existing capacity.
    pub node: Option<usize>,
    /// Prepared pool and its target type for new claims.
    pub pool: usize,
    pub target: usize,
    /// New claims: pool requirements ∩ the requirements of every pod on it ∩ topology pins.
    pub reqs: Requirements,
    pub free: Resources,
    pub used: Resources,
    /// Indices into `snap.pods`.
    pub pods: Vec<usize>,
    pub ports: Vec<HostPort>,
    /// Counts of hostname-keyed topology groups.
    pub counts: Vec<(u32, u32)>,
    /// New claims: the target type's offerings (indices) that `reqs` still allows.
    pub offers: Vec<u8>,
}

impl<'a> Scheduler<'a> {
    /// Existing nodes and in-flight claims become the first bins, their pods counted.
    pub(super) fn add_existing(&mut self) {
        for (i, n) in self.snap.nodes.iter().enumerate() {
            let used = n.requested();
            let mut bin = Bin {
                node: Some(i),
                pool: usize::MAX,
                target: usize::MAX,
                reqs: Requirements::new(),
                free: n.allocatable.minus(&used),
                used,
                pods: vec![],
                ports: n.pods.iter().flat_map(|p| p.host_ports.iter().cloned()).collect(),
                counts: vec![],
                offers: vec![],
            };
            let b = self.bins.len();
            for p in &n.pods {
                for g in self.topo.effects_of(p, &self.snap.namespaces) {
                    let key = self.topo.groups[g as usize].key.topology_key.clone();
                    self.topo.record(g, n.labels.get(&key).map(String::as_str), b, &mut bin.counts);
                }
            }
            self.bins.push(bin);
        }
    }

    /// First bin that takes the pod under `choice`, starting from the class's cursor.
    pub(super) fn find_bin(&mut self, c: usize, l: usize, choice: &[u16]) -> Option<usize> {
        // Hostname affinity to pods already placed: only their bins can qualify (and a bin can
        // start qualifying later, so no cursor here).
        let host_affinity = self.classes[c].levels[l].affinity.iter().find_map(|&(g, _)| {
            let g = &self.topo.groups[g as usize];
            (g.hostname && g.total > 0).then(|| g.bins.clone())
        });
        if let Some(bins) = host_affinity {
            return bins.into_iter().find(|&b| self.accepts(b, c, l, choice));
        }
        // Up to eight domain keys pack into the cursor key; beyond that, scan from the start.
        let packed = (choice.len() <= 8).then(|| choice.iter().fold(0u128, |acc, &v| (acc << 16) | (v as u128 + 1)));
        let key = packed.map(|p| (c as u32, l as u16, p));
        let start = key.and_then(|k| self.cursors.get(&k).copied()).unwrap_or(0);
        let mut cursor = start;
        let mut found = None;
        for b in start..self.bins.len() {
            if self.accepts(b, c, l, choice) {
                found = Some(b);
                break;
            }
            // Bins only fill up and narrow, so a bin that refuses this class now always will.
            if cursor == b {
                cursor = b + 1;
            }
        }
        if let Some(k) = key {
            self.cursors.insert(k, cursor);
        }
        found
    }

    /// Whether bin `b` takes a pod of class `c` at level `l` in domain `choice`.
    pub(super) fn accepts(&mut self, b: usize, c: usize, l: usize, choice: &[u16]) -> bool {
        if self.bins[b].node.is_none() && self.fit(c, l, self.bins[b].pool).is_err() {
            return false;
        }
        let pod = self.classes[c].rep(self.snap);
        let bin = &self.bins[b];
        if !pod.requests.fits(&bin.free) {
            return false;
        }
        if pod.host_ports.iter().any(|p| bin.ports.iter().any(|q| p.conflicts(q))) {
            return false;
        }
        let level = &self.classes[c].levels[l];
        // Hostname-keyed topology: counts on this bin.
        for s in &level.spreads {
            let g = &self.topo.groups[s.group as usize];
            if g.hostname && bin_count(&bin.counts, s.group) + 1 > s.max_skew {
                return false;
            }
        }
        for &(a, self_match) in &level.affinity {
            let g = &self.topo.groups[a as usize];
            if g.hostname && bin_count(&bin.counts, a) == 0 && !(g.total == 0 && self_match) {
                return false;
            }
        }
        for &a in level.anti.iter().chain(self.classes[c].repelled.iter()) {
            if self.topo.groups[a as usize].hostname && bin_count(&bin.counts, a) > 0 {
                return false;
            }
        }
        let pins = self.pins(c, l, choice);
        if pod.node_affinity.is_empty() {
            return false;
        }
        if let Some(n) = bin.node {
            let node = &self.snap.nodes[n];
            return !node.unschedulable
                && taints_block(pod, &node.taints, level.strict_prefer).is_none()
                && level.reqs.matches_labels(&node.labels)
                && pins.iter().all(|(k, v)| node.labels.get(*k).is_some_and(|x| x == v));
        }
        let Some(Ok(fit)) = &self.fits[c][l][bin.pool] else { return false };
        // The target type must stay usable for this pod: in the class's fit list, and with an
        // offering every requirement and pin allows.
        if !fit.has_type(bin.target) {
            return false;
        }
        if pins.iter().any(|(k, v)| !is_offering_key(k) && bin.reqs.get(k).is_some_and(|r| !r.has(v))) {
            return false;
        }
        if !level.reqs.is_empty() && !bin.reqs.overlaps(&level.reqs) {
            return false;
        }
        let t = &self.pools[bin.pool].types[bin.target];
        let allowed = OfferingFilter::new(&level.reqs);
        let offered = bin.offers.iter().any(|&i| {
            let o = &t.offerings[i as usize];
            o.allowed_by_pins(&pins) && (level.reqs.is_empty() || allowed.allows(o))
        });
        if !offered {
            return false;
        }
        // Under BestEffort, too few distinct values never keeps a pod off a claim.
        if !self.pools[bin.pool].has_min_values || !self.snap.min_values_policy.is_strict() {
            return true;
        }
        let mut merged = bin.reqs.intersection(&level.reqs);
        for (k, v) in pins {
            merged.add(Requirement::single(k, v));
        }
        self.min_values_ok(b, &pod.requests, &merged)
    }

    /// With `minValues` on the pool, adding the pod must leave enough distinct values among the
    /// types that still fit.
    fn min_values_ok(&self, b: usize, add: &Resources, reqs: &Requirements) -> bool {
        let bin = &self.bins[b];
        let pool = &self.pools[bin.pool];
        let mins: Vec<&Requirement> = pool.requirements.iter().filter(|r| r.min_values.is_some()).collect();
        let used = bin.used.plus(add);
        // Within limits next to the other claims (this one's reservation is what it would replace).
        let own = &pool.types[bin.target].capacity;
        let within = |t: &PoolType| {
            pool.remaining.as_ref().is_none_or(|rem| {
                rem.iter().all(|(n, left)| pool.reserved.get(n) - own.get(n) + t.capacity.get(n) <= *left)
            }) && self.spend.allows(t.capacity.get(LIMIT_COST) - own.get(LIMIT_COST)).is_ok()
        };
        let allowed = OfferingFilter::new(reqs);
        let fitting: Vec<&PoolType> = pool
            .types
            .iter()
            .filter(|t| used.fits(&t.free) && within(t))
            .filter(|t| t.requirements(self.catalog).overlaps(reqs) && t.has_offering(&allowed))
            .collect();
        mins.iter().all(|m| {
            let mut distinct: Vec<&str> = fitting
                .iter()
                .filter_map(|t| t.requirements(self.catalog).get(&m.key).and_then(|r| r.single_value()))
                .filter(|v| m.has(v))
                .collect();
            distinct.sort_unstable();
            distinct.dedup();
            distinct.len() >= m.min_values.unwrap_or(0)
        })
    }

    pub(super) fn commit(&mut self, b: usize, c: usize, l: usize, choice: &[u16], pod: usize) {
        let p = &self.snap.pods[pod];
        let pins: Vec<(String, String)> =
            self.pins(c, l, choice).into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let level: &Level = &self.classes[c].levels[l];
        let bin = &mut self.bins[b];
        bin.free.sub(&p.requests);
        bin.used.add(&p.requests);
        bin.pods.push(pod);
        bin.ports.extend(p.host_ports.iter().cloned());
        if bin.node.is_none() {
            if !level.reqs.is_empty() {
                bin.reqs = bin.reqs.intersection(&level.reqs);
            }
            for (k, v) in &pins {
                bin.reqs.add(Requirement::single(k, v));
            }
            let t = &self.pools[bin.pool].types[bin.target];
            let allowed = OfferingFilter::new(&bin.reqs);
            bin.offers = (0..t.offerings.len()).filter(|&i| allowed.allows(&t.offerings[i])).map(|i| i as u8).collect();
        }
        let domains: Vec<(u32, Option<String>)> = self.classes[c]
            .effects
            .iter()
            .map(|&g| {
                let key = &self.topo.groups[g as usize].key.topology_key;
                let v = match bin.node {
                    Some(n) => self.snap.nodes[n].labels.get(key).cloned(),
                    None => bin.reqs.get(key).and_then(|r| r.single_value()).map(str::to_string),
                };
                (g, v)
            })
            .collect();
        let mut counts = std::mem::take(&mut bin.counts);
        for (g, v) in &domains {
            self.topo.record(*g, v.as_deref(), b, &mut counts);
        }
        self.bins[b].counts = counts;
        // Spreads that count only nodes their pods could use.
        for (g, v) in domains {
            let Some(v) = v else { continue };
            for i in 0..self.private_counts.len() {
                let (group, _) = &self.private_counts[i];
                if *group == g && self.bin_eligible(b, i) {
                    *self.private_counts[i].1.entry(v.clone()).or_insert(0) += 1;
                }
            }
        }
    }
}

/// Keys whose pins the target's offerings check (zone, zone id, capacity type).
fn is_offering_key(k: &str) -> bool {
    matches!(k, labels::ZONE | labels::ZONE_ID | labels::CAPACITY_TYPE)
}
