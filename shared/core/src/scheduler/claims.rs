//! New claims: opening one in the first NodePool that can run the pod, and filling it with the
//! pods still waiting, the way its target type was chosen to be filled; and, when the pools'
//! limits turn a pod away, growing a claim of a limited pool to a larger type that holds it too.

use super::bins::Bin;
use super::finalize::{claim_price, min_values_met, priced};
use super::pools::{LimitRefusal, OfferingFilter, PoolFit, PoolOffering, PoolType};
use super::reservations;
use super::targets::best_shape;
use super::{Scheduler, Strategy};
use crate::labels;
use crate::model::LIMIT_COST;
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;

impl<'a> Scheduler<'a> {
    /// Opens a new claim for a pod in the first pool (by weight) that can run it; when
    /// `reserved_only`, only a claim in a reservation of that pool (see `reservations.rs`).
    pub(super) fn open_claim(
        &mut self,
        c: usize,
        l: usize,
        choices: &[Vec<u16>],
        reserved_only: bool,
    ) -> Result<(usize, Vec<u16>), String> {
        let mut reasons: Vec<String> = Vec::new();
        if self.pools.is_empty() {
            return Err("no NodePool exists".to_string());
        }
        'pools: for p in 0..self.pools.len() {
            let name = self.pools[p].pool.name.clone();
            let fit = match self.fit(c, l, p) {
                Ok(f) => f.clone(),
                Err(e) => {
                    reasons.push(format!("NodePool {name:?}: {e}"));
                    continue;
                }
            };
            // A fresh node has zero pods of every hostname group.
            let level = &self.classes[c].levels[l];
            for &(a, self_match) in &level.affinity {
                let g = &self.topo.groups[a as usize];
                if g.hostname && !(g.total == 0 && self_match) {
                    reasons.push(format!(
                        "NodePool {name:?}: pod affinity on {} needs a node that already runs a matching pod, and none has room",
                        labels::HOSTNAME
                    ));
                    continue 'pools;
                }
            }
            // A reservation with an instance left before anything is bought: it is paid for.
            if self.strategy == Strategy::LowestCost {
                if let Some(opened) = self.open_in_reservation(c, l, p, &fit, choices) {
                    return Ok(opened);
                }
            }
            if reserved_only {
                return Err(format!("NodePool {name:?}: no capacity reservation with an instance left holds the pod"));
            }
            let mut last = String::new();
            for choice in choices {
                let pins = self.pins(c, l, choice);
                if pins.iter().any(|(k, v)| fit.reqs.get(k).is_some_and(|r| !r.has(v))) {
                    continue;
                }
                let owned: Vec<(String, String)> = pins.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
                let best = match self.strategy {
                    Strategy::LowestCost => self.choose_target(c, l, p, &owned),
                    Strategy::FirstFitDecreasing => self.largest_target(c, l, p, &owned),
                };
                if best.is_none() {
                    let all = 0..self.pools[p].types.len();
                    last = self.limit_refusal(p, all).map(|r| r.message).unwrap_or_default();
                }
                let Some(target) = best else {
                    if last.is_empty() && self.reserved_offered(p, &fit, &owned) {
                        last = reservations::NO_INSTANCE_LEFT.to_string();
                    } else if last.is_empty() {
                        let where_: Vec<String> = owned.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        last = format!("no instance type with an offering in {}", where_.join(", "));
                    }
                    continue;
                };
                if let Some(why) = self.min_values_short(p, &fit, &owned) {
                    last = why;
                    continue;
                }
                let mut reqs = fit.reqs.clone();
                for (k, v) in &owned {
                    reqs.add(Requirement::single(k, v));
                }
                return Ok((self.push_claim(p, target, reqs), choice.clone()));
            }
            reasons.push(format!("NodePool {name:?}: {last}"));
        }
        Err(reasons.join("; "))
    }

    /// Why pool `p`'s limits refuse the first of `types` (indices into its types) they refuse, if
    /// any; a refusal by a cost limit is told to the pool too (see [`super::Plan::cost_limited`]).
    pub(super) fn limit_refusal(&mut self, p: usize, types: impl IntoIterator<Item = usize>) -> Option<LimitRefusal> {
        let pool = &self.pools[p];
        let refusal = types.into_iter().find_map(|t| pool.within_limits(&pool.types[t].capacity, &self.spend).err());
        if let Some(r) = refusal.as_ref().filter(|r| r.cost) {
            self.cost_limited.entry(pool.pool.name.clone()).or_insert_with(|| r.message.clone());
        }
        refusal
    }

    /// A new, empty claim of pool `p` filled up to type `target` under `reqs`, held against the
    /// pool's limits at that type; its index.
    fn push_claim(&mut self, p: usize, target: usize, reqs: Requirements) -> usize {
        let t = &self.pools[p].types[target];
        let free = t.free.clone();
        let capacity = t.capacity.clone();
        self.reserve(p, &capacity);
        self.bins.push(Bin {
            node: None,
            pool: p,
            target,
            reqs,
            free,
            used: Resources::default(),
            pods: vec![],
            ports: vec![],
            counts: vec![],
            offers: vec![],
        });
        self.bins.len() - 1
    }

    /// Opens a claim for class `c` (rung `l`) of pool `p` in a capacity reservation with an
    /// instance left, under the first domain choice that allows one: a reservation the fit's
    /// requirements and the pins allow, of a type that holds the pod within the pool's limits
    /// (and keeps its minValues, as the plan requires of a reserved claim). The claim is filled up
    /// to the reservation's type and required to launch there (capacity type, id and zone, as the
    /// plan will require it), so only pods that may run in the reservation join it; it holds one
    /// of the reservation's instances from now on.
    fn open_in_reservation(
        &mut self,
        c: usize,
        l: usize,
        p: usize,
        fit: &PoolFit,
        choices: &[Vec<u16>],
    ) -> Option<(usize, Vec<u16>)> {
        if self.no_instance_left() {
            return None;
        }
        let allowed = OfferingFilter::new(&fit.reqs);
        // The pod and the group it takes along, if any (see `together`).
        let pod = &self.classes[c].rep(self.snap).requests;
        let group = (0..self.together(c, l)).fold(pod.clone(), |acc, _| acc.plus(pod));
        for choice in choices {
            let pins = self.pins(c, l, choice);
            if pins.iter().any(|(k, v)| fit.reqs.get(k).is_some_and(|r| !r.has(v))) {
                continue;
            }
            let pool = &self.pools[p];
            let usable = |i: usize, t: &PoolType| {
                let treqs = t.requirements(self.catalog);
                fit.has_type(i)
                    && group.fits(&t.free)
                    && !pins.iter().any(|(k, v)| treqs.get(k).is_some_and(|r| !r.has(v)))
                    && pool.within_limits(&t.capacity, &self.spend).is_ok()
                    && (!pool.has_min_values || min_values_met(self, p, [t]))
            };
            let offered = |o: &PoolOffering| {
                allowed.allows(o)
                    && o.allowed_by_pins(&pins)
                    && o.reservation
                        .as_ref()
                        .is_some_and(|r| self.reservations_left.get(r.id.as_str()).is_some_and(|&n| n > 0))
            };
            let Some((target, offering)) = reservations::best_reserved(self, p, usable, offered) else { continue };
            let r = offering.reservation.clone().expect("a reserved offering");
            let mut reqs = fit.reqs.clone();
            for (k, v) in &pins {
                reqs.add(Requirement::single(k, v));
            }
            reqs.add(Requirement::single(labels::CAPACITY_TYPE, labels::CAPACITY_RESERVED));
            reqs.add(Requirement::single(labels::CAPACITY_RESERVATION_ID, &r.id));
            reqs.add(Requirement::single(labels::ZONE, &r.zone));
            let (&id, _) = self.reservations_left.get_key_value(r.id.as_str()).expect("counted above");
            self.reservations_left.entry(id).and_modify(|n| *n -= 1);
            let b = self.push_claim(p, target, reqs);
            self.in_reservation.insert(b, id);
            return Some((b, choice.clone()));
        }
        None
    }

    /// Whether a type of the fit has a reserved offering the fit's requirements and `pins` allow
    /// (when nothing can be bought there, the reservations are what was left: all taken).
    fn reserved_offered(&self, p: usize, fit: &PoolFit, pins: &[(String, String)]) -> bool {
        let pins: Vec<(&str, &str)> = pins.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let allowed = OfferingFilter::new(&fit.reqs);
        let types = &self.pools[p].types;
        fit.types.iter().map(|&t| &types[t as usize]).filter(|t| t.has_reserved()).any(|t| {
            t.offerings.iter().any(|o| o.reservation.is_some() && allowed.allows(o) && o.allowed_by_pins(&pins))
        })
    }

    /// With `minValues` on the pool: why a new claim under these pins could not keep enough
    /// distinct values among the types that fit the pod, are offered there and stay within limits.
    fn min_values_short(&self, p: usize, fit: &PoolFit, pins: &[(String, String)]) -> Option<String> {
        let pool = &self.pools[p];
        if !pool.has_min_values || !self.snap.min_values_policy.is_strict() {
            return None;
        }
        let pins: Vec<(&str, &str)> = pins.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let allowed = [OfferingFilter::new(&fit.reqs)];
        let usable: Vec<&Requirements> = fit
            .types
            .iter()
            .map(|&i| &pool.types[i as usize])
            .filter(|t| {
                t.best_offering_all(&allowed, &pins).is_some() && pool.within_limits(&t.capacity, &self.spend).is_ok()
            })
            .map(|t| t.requirements(self.catalog))
            .filter(|r| pins.iter().all(|(k, v)| r.get(k).is_none_or(|x| x.has(v))))
            .collect();
        for m in pool.pool.requirements.iter().filter(|r| r.min_values.is_some()) {
            let mut values: Vec<&str> = usable.iter().filter_map(|r| r.get(&m.key)?.single_value()).collect();
            values.sort_unstable();
            values.dedup();
            let want = m.min_values.unwrap_or(0);
            if values.len() < want {
                return Some(format!(
                    "requirement {} has minValues {want}, but only {} value(s) can be launched there within limits",
                    m.key,
                    values.len()
                ));
            }
        }
        None
    }

    /// Fills a claim just opened with the unconstrained pods still waiting: each time the class
    /// whose shape best matches the room left (largest dot product of its requests and the free
    /// capacity, both relative to the type), so cpu-heavy and memory-heavy pods share nodes
    /// instead of one resource running out while the other idles. This is the packing the
    /// target type was chosen for (see `choose_target`).
    pub(super) fn fill(&mut self, b: usize) {
        let (p, t) = (self.bins[b].pool, self.bins[b].target);
        let mut candidates: Vec<(usize, i64)> = (0..self.classes.len())
            .filter(|&o| self.generic[o])
            .filter(|&o| matches!(self.fit_cached(o, 0, p), Some(Ok(f)) if f.has_type(t)))
            .map(|o| (o, (self.classes[o].pods.len() - self.next[o]) as i64))
            .filter(|&(_, n)| n > 0)
            .collect();
        let size = self.pools[p].types[t].free.clone();
        loop {
            let room = self.bins[b].free.clone();
            let Some((i, _)) = best_shape(&candidates, &room, &size, |o| &self.classes[o].rep(self.snap).requests)
            else {
                break;
            };
            let o = candidates[i].0;
            let placed = self
                .domain_choices(o, 0)
                .ok()
                .and_then(|choices| choices.into_iter().find(|ch| self.accepts(b, o, 0, ch)));
            match placed {
                Some(choice) if self.next[o] < self.classes[o].pods.len() => {
                    let pod = self.classes[o].pods[self.next[o]];
                    self.next[o] += 1;
                    self.commit(b, o, 0, &choice, pod);
                    candidates[i].1 -= 1;
                    if candidates[i].1 == 0 {
                        candidates.swap_remove(i);
                    }
                }
                // Fits by resources but not otherwise (a zone pin, a port): not for this claim.
                _ => {
                    candidates.swap_remove(i);
                }
            }
        }
    }

    /// Puts the pods of the class that opened a claim into it while they fit: the claim's target
    /// was chosen with them in mind (and a group with hostname affinity must stay together).
    pub(super) fn fill_class(&mut self, b: usize, c: usize, l: usize) {
        while self.next[c] < self.classes[c].pods.len() {
            let Ok(choices) = self.domain_choices(c, l) else { break };
            let Some(choice) = choices.into_iter().find(|ch| self.accepts(b, c, l, ch)) else { break };
            let pod = self.classes[c].pods[self.next[c]];
            self.next[c] += 1;
            self.commit(b, c, l, &choice, pod);
        }
    }

    /// When no pool can open a claim for the pod (class `c`, rung `l`) within its limits: grows a
    /// new claim of a limited pool to a larger type that holds its pods and this one, within the
    /// limits once the claim gives back its own type's share — the claim whose price grows least
    /// — and returns it. Karpenter's claims keep every type that fits their pods; the pass points
    /// each at one type, so without this a pool at its limits leaves pending a pod that one of its
    /// claims, a size up, would hold. Only for unconstrained pods, and claims without host ports
    /// or hostname counts (where they run stays what it was: the claim keeps its requirements).
    /// The claim as it was comes back too.
    pub(super) fn grow_claim(&mut self, c: usize, l: usize) -> Option<(usize, Bin)> {
        if !self.generic[c] || self.ungrowable.contains(&(c, l)) {
            return None;
        }
        let requests = self.classes[c].rep(self.snap).requests.clone();
        let mut best: Option<(f64, usize, usize)> = None;
        for b in 0..self.bins.len() {
            let bin = &self.bins[b];
            // Existing nodes and in-flight claims have no pool index.
            if bin.node.is_some() || bin.pods.is_empty() || !bin.ports.is_empty() || !bin.counts.is_empty() {
                continue;
            }
            let pool = &self.pools[bin.pool];
            let Some(remaining) = &pool.remaining else { continue };
            let Some(Ok(fit)) = self.fit_cached(c, l, bin.pool) else { continue };
            if pool.has_min_values {
                continue;
            }
            let used = bin.used.plus(&requests);
            let own = &pool.types[bin.target].capacity;
            let within = |t: usize| {
                let capacity = &pool.types[t].capacity;
                remaining.iter().all(|(n, left)| pool.reserved.get(n) - own.get(n) + capacity.get(n) <= *left)
                    && self.spend.allows(capacity.get(LIMIT_COST) - own.get(LIMIT_COST)).is_ok()
            };
            // The plan's order (spot first, then price): the first that holds them is what it
            // costs. The limits are checked first: at its limits, a pool has room for few types.
            let priced = priced(self, bin.pool, &bin.reqs);
            let grown = priced
                .0
                .iter()
                .chain(&priced.1)
                .find(|x| within(x.0) && used.fits(&pool.types[x.0].free) && fit.has_type(x.0));
            let Some(&(t, _, price, _)) = grown else { continue };
            if !fit.reqs.overlaps(&bin.reqs) {
                continue;
            }
            let Some((now, _)) = claim_price(self, bin.pool, &priced, &bin.used) else { continue };
            if best.is_none_or(|(extra, _, _)| price - now < extra) {
                best = Some((price - now, b, t));
            }
        }
        let Some((_, b, t)) = best else {
            self.ungrowable.insert((c, l));
            return None;
        };
        let p = self.bins[b].pool;
        let (old, new) =
            (self.pools[p].types[self.bins[b].target].capacity.clone(), self.pools[p].types[t].capacity.clone());
        self.pools[p].reserved.sub(&old);
        self.pools[p].reserved.add(&new);
        self.spend.reserved += new.get(LIMIT_COST) - old.get(LIMIT_COST);
        let target = &self.pools[p].types[t];
        let allowed = OfferingFilter::new(&self.bins[b].reqs);
        let offers =
            (0..target.offerings.len()).filter(|&i| allowed.allows(&target.offerings[i])).map(|i| i as u8).collect();
        let free = target.free.minus(&self.bins[b].used);
        let before = self.bins[b].clone();
        let bin = &mut self.bins[b];
        bin.target = t;
        bin.free = free;
        bin.offers = offers;
        Some((b, before))
    }
}
