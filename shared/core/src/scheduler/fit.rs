//! Pool fits: whether a NodePool can run a class at a rung and with which of its instance types,
//! worked out lazily once per (class, rung, pool), and why not when it cannot.

use std::sync::Arc;

use super::classes::taints_block;
use super::pools::{self, FitResult, OfferingFilter, PoolFit, PoolType};
use super::Scheduler;
use crate::resources::Resources;

impl<'a> Scheduler<'a> {
    /// Lazily computed compatibility of a class level with a pool: from the solve cache when a
    /// class with the same fit key (this pass or an earlier one) asked already.
    pub(crate) fn fit(&mut self, c: usize, l: usize, p: usize) -> Result<&Arc<PoolFit>, &str> {
        if self.fits[c][l][p].is_none() {
            let pod = self.classes[c].rep(self.snap);
            let level = &self.classes[c].levels[l];
            let key = (
                p as u32,
                level.reqs.clone(),
                pod.requests.clone(),
                pod.tolerations.clone(),
                pod.host_ports.clone(),
                level.strict_prefer,
                pod.node_affinity.is_empty(),
            );
            let r = self.cache.fit(key, || self.compute_fit(c, l, p));
            self.fits[c][l][p] = Some(r);
        }
        match self.fits[c][l][p].as_ref().unwrap() {
            Ok(f) => Ok(f),
            Err(e) => Err(e.as_str()),
        }
    }

    /// A pool fit if it was computed during the pass.
    pub(crate) fn fit_cached(&self, c: usize, l: usize, p: usize) -> Option<&FitResult> {
        self.fits[c][l][p].as_ref()
    }

    fn compute_fit(&self, c: usize, l: usize, p: usize) -> Result<PoolFit, String> {
        let pool = &self.pools[p];
        let pod = self.classes[c].rep(self.snap);
        let level = &self.classes[c].levels[l];
        if let Some(why) = &pool.broken {
            return Err(why.clone());
        }
        if pod.node_affinity.is_empty() {
            // Every required node-affinity term was empty, and an empty term matches no node.
            return Err("its required node affinity has no term that can match a node".to_string());
        }
        if let Some(t) = taints_block(pod, &pool.pool.taints, level.strict_prefer) {
            return Err(format!("taint {t} is not tolerated"));
        }
        pool.requirements.compatible(&level.reqs).map_err(|e| format!("requirement {e}"))?;
        let reqs = pool.requirements.intersection(&level.reqs);
        let allowed = OfferingFilter::new(&reqs);
        let mut matched = 0usize;
        let mut offered = 0usize;
        let mut types = Vec::new();
        let mut largest: Option<&PoolType> = None;
        let mut port_clash = false;
        for (i, t) in pool.types.iter().enumerate() {
            if !t.requirements(self.catalog).overlaps(&reqs) {
                continue;
            }
            matched += 1;
            if !t.has_offering(&allowed) {
                continue;
            }
            offered += 1;
            if !t.ports_free(&pod.host_ports) {
                port_clash = true;
                continue;
            }
            if pod.requests.fits(&t.free) {
                types.push(i as u32);
            } else if largest.is_none_or(|l| t.free.cpu > l.free.cpu) {
                largest = Some(t);
            }
        }
        if types.is_empty() {
            return Err(if matched == 0 {
                format!("no instance type matches {reqs}")
            } else if offered == 0 {
                format!("no available offering of the {matched} matching instance types in the allowed zones and capacity types")
            } else if port_clash && largest.is_none() {
                "its host ports are held by DaemonSet pods on every matching instance type".to_string()
            } else {
                let biggest = largest.map(|t| {
                    let name = &self.catalog.types[t.catalog].name;
                    let r = pod.requests.exceeds(&t.free).unwrap_or("resources");
                    format!(
                        " ({r} is the limit: the roomiest, {name}, has {} free after DaemonSets)",
                        pools::fmt_resource(r, t.free.get(r))
                    )
                });
                format!(
                    "no instance type has room for requests {}{}",
                    describe_requests(&pod.requests),
                    biggest.unwrap_or_default()
                )
            });
        }
        // minValues: the types that can take the pod must keep enough distinct values, or no
        // claim for it can (Karpenter leaves such a pod pending, unless its policy is BestEffort).
        let strict = self.snap.min_values_policy.is_strict();
        for m in pool.pool.requirements.iter().filter(|r| strict && r.min_values.is_some()) {
            let want = m.min_values.unwrap_or(0);
            let mut values: Vec<&str> = types
                .iter()
                .filter_map(|&i| pool.types[i as usize].requirements(self.catalog).get(&m.key))
                .filter_map(|r| r.single_value())
                .filter(|v| reqs.get(&m.key).is_none_or(|r| r.has(v)))
                .collect();
            values.sort_unstable();
            values.dedup();
            if values.len() < want {
                return Err(format!(
                    "requirement {} has minValues {want}, but the instance types that fit offer {} value(s)",
                    m.key,
                    values.len()
                ));
            }
        }
        Ok(PoolFit::new(reqs, types))
    }

    /// Why no pool can take a class at a level, if none can (`None` when some pool can).
    pub(super) fn no_pool_fits(&mut self, c: usize, l: usize) -> Option<String> {
        if self.pools.is_empty() {
            return Some("no NodePool exists".to_string());
        }
        let mut reasons = Vec::new();
        for p in 0..self.pools.len() {
            let name = self.pools[p].pool.name.clone();
            match self.fit(c, l, p) {
                Ok(_) => return None,
                Err(e) => reasons.push(format!("NodePool {name:?}: {e}")),
            }
        }
        Some(reasons.join("; "))
    }
}

pub(crate) fn describe_requests(r: &Resources) -> String {
    let mut parts = vec![
        format!("cpu {}", crate::resources::format_cpu(r.cpu)),
        format!("memory {}", crate::resources::format_bytes(r.memory)),
    ];
    if r.ephemeral > 0 {
        parts.push(format!("ephemeral-storage {}", crate::resources::format_bytes(r.ephemeral)));
    }
    for (n, v) in &r.extended {
        parts.push(format!("{n} {v}"));
    }
    parts.join(", ")
}
