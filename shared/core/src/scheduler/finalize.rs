//! Turns filled bins into the plan: each new claim is re-priced to the cheapest instance types
//! that hold all of its pods, with the labels, taints and allocatable of the cheapest.

use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;
use std::sync::Arc;

use super::bins::Bin;
use super::plan::{ExistingPlacement, Plan, PlannedClaim, Unschedulable};
use super::pools::{OfferingFilter, PoolOffering, PoolType};
use super::reservations;
use super::Scheduler;
use crate::catalog::{CapacityType, Reservation};
use crate::labels;
use crate::model::LIMIT_COST;
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;

/// CreateFleet takes at most this many overrides per claim (Karpenter's cap).
pub const MAX_INSTANCE_TYPES: usize = 60;

pub(crate) fn plan(s: &Scheduler<'_>) -> Plan {
    let mut plan = Plan::default();
    let mut seq = vec![0usize; s.pools.len()];
    // Claims release their provisional reservation as they are finalised, so a claim can
    // only pick types that still fit under the pool's limits next to the others.
    let mut reserved: Vec<Resources> = s.pools.iter().map(|p| p.reserved.clone()).collect();
    let mut spend = s.spend.clone();
    let mut cache: HashMap<(usize, &Requirements), Arc<PricedTypes>> = HashMap::default();
    // What each reservation still takes once the claims the pass opened in one hold their
    // instances, drawn down as other claims are given one (by id: classes may share a
    // reservation).
    let mut reservations_left = s.reservations_left.clone();
    for (b, bin) in s.bins.iter().enumerate() {
        if bin.pods.is_empty() {
            continue;
        }
        let pod_names: Vec<String> = bin.pods.iter().map(|&i| s.snap.pods[i].key()).collect();
        if let Some(n) = bin.node {
            plan.existing.push(ExistingPlacement { node: s.snap.nodes[n].name.clone(), pods: pod_names });
            continue;
        }
        let pool = &s.pools[bin.pool];
        let target = &pool.types[bin.target];
        reserved[bin.pool].sub(&target.capacity);
        spend.reserved -= target.capacity.get(LIMIT_COST);
        let within = |t: &PoolType| {
            let pool_ok = match &pool.remaining {
                None => true,
                Some(rem) => rem.iter().all(|(n, left)| reserved[bin.pool].get(n) + t.capacity.get(n) <= *left),
            };
            pool_ok && spend.allows(t.capacity.get(LIMIT_COST)).is_ok()
        };
        // Types the claim's requirements allow, priced, spot first then price: worked out once
        // per distinct (pool, requirements), since most claims of a pass share them (and kept in
        // the solve cache for the next pass).
        let priced = cache.entry((bin.pool, &bin.reqs)).or_insert_with(|| priced(s, bin.pool, &bin.reqs));
        let fitting = |list: &[Priced]| -> Vec<Candidate<'_>> {
            let limit = if pool.has_min_values { usize::MAX } else { MAX_INSTANCE_TYPES };
            list.iter()
                .filter(|c| {
                    let t = &pool.types[c.0];
                    bin.used.fits(&t.free) && within(t) && t.ports_free(&bin.ports)
                })
                .take(limit)
                .map(|c| (&pool.types[c.0], c.1, c.2, c.3.clone()))
                .collect()
        };
        // A reservation first: the one the pass opened the claim in, else one the claim may use
        // that has an instance left.
        let opened_in = s.in_reservation.get(&b).copied();
        let reservation = reserved_offering(s, bin.pool, bin, &within, &reservations_left, opened_in);
        let (candidates, spot) = match &reservation {
            Some((c, _)) => (vec![c.clone()], false),
            None => {
                // Spot first, unless its types alone cannot keep the pool's minValues.
                let candidates = fitting(&priced.0);
                if !candidates.is_empty() && min_values_met(s, bin.pool, candidates.iter().map(|c| c.0)) {
                    (candidates, true)
                } else {
                    (fitting(&priced.1), false)
                }
            }
        };
        let candidates = keep_min_values(s, bin.pool, candidates);
        // The limits, held at each earlier claim's largest candidate, can leave this one with
        // fewer distinct values than the pool's minValues: then it cannot be launched as asked
        // (under BestEffort, it is launched with the values there are).
        let strict = s.snap.min_values_policy.is_strict();
        if strict
            && pool.has_min_values
            && !candidates.is_empty()
            && !min_values_met(s, bin.pool, candidates.iter().map(|c| c.0))
        {
            for &i in &bin.pods {
                plan.unschedulable.push(Unschedulable {
                    pod: s.snap.pods[i].key(),
                    reason: format!(
                        "NodePool {:?}: its limits leave too few instance types for its minValues",
                        pool.pool.name
                    ),
                });
            }
            continue;
        }
        let Some((cheapest, capacity_type, price, zone)) = candidates.first().cloned() else {
            // Only when the claim may launch nothing but reserved capacity and the reservations
            // it could use are taken by earlier claims; else the target type always holds the
            // pods it was filled to.
            let full = target.offerings.iter().any(|o| o.reservation.is_some());
            for &i in &bin.pods {
                plan.unschedulable.push(Unschedulable {
                    pod: s.snap.pods[i].key(),
                    reason: if full {
                        format!("NodePool {:?}: {}", pool.pool.name, reservations::NO_INSTANCE_LEFT)
                    } else {
                        format!("NodePool {:?}: no instance type holds the pods packed with it", pool.pool.name)
                    },
                });
            }
            continue;
        };
        // CreateFleet may launch any candidate: hold the largest against the limits.
        let held = candidates.iter().fold(Resources::default(), |acc, c| acc.max(&c.0.capacity));
        reserved[bin.pool].add(&held);
        spend.reserved += held.get(LIMIT_COST);
        seq[bin.pool] += 1;
        let name = format!("{}-{:05}", pool.pool.name, seq[bin.pool]);
        let ctype = &s.catalog.types[cheapest.catalog];
        let mut labels_out: BTreeMap<String, String> = pool.pool.labels.clone();
        labels_out.extend(bin.reqs.single_valued_labels());
        labels_out.extend(cheapest.requirements(s.catalog).single_valued_labels());
        labels_out.insert(labels::ZONE.to_string(), zone.to_string());
        if let Some(id) = s.catalog.zone_id(&zone) {
            labels_out.insert(labels::ZONE_ID.to_string(), id.to_string());
        }
        labels_out.insert(labels::CAPACITY_TYPE.to_string(), capacity_type.as_str().to_string());
        if let Some((_, r)) = &reservation {
            labels_out.extend(r.labels().into_iter().map(|(k, v)| (k.to_string(), v)));
        }
        labels_out.insert(labels::NODEPOOL.to_string(), pool.pool.name.clone());
        // Karpenter's spelling too, so pods written for Karpenter select these nodes unchanged.
        labels_out.insert(labels::KARPENTER_NODEPOOL.to_string(), pool.pool.name.clone());
        labels_out.insert(labels::NODECLAIM.to_string(), name.clone());
        let mut requirements = bin.reqs.clone();
        requirements.add(
            Requirement::new(
                labels::INSTANCE_TYPE,
                crate::requirements::Operator::In,
                &candidates.iter().map(|c| s.catalog.types[c.0.catalog].name.as_str()).collect::<Vec<_>>(),
            )
            .expect("at least one candidate"),
        );
        if spot {
            requirements.add(Requirement::single(labels::CAPACITY_TYPE, labels::CAPACITY_SPOT));
        }
        // A reserved claim launches into its reservation only (Karpenter tightens the claim the
        // same way), so two claims never count on the same last instance of a reservation.
        if let Some((_, r)) = &reservation {
            if opened_in != Some(r.id.as_str()) {
                if let Some(n) = reservations_left.get_mut(r.id.as_str()) {
                    *n = n.saturating_sub(1);
                }
            }
            requirements.add(Requirement::single(labels::CAPACITY_TYPE, labels::CAPACITY_RESERVED));
            requirements.add(Requirement::single(labels::CAPACITY_RESERVATION_ID, &r.id));
            requirements.add(Requirement::single(labels::ZONE, &r.zone));
        }
        // Like Karpenter, label the node with one value of every custom key the pool defines but
        // leaves open (`In` several values, `Exists`, bounds): a pod that requires the key, or one
        // of several values, must find it on the node. Keys the pool does not define stay off.
        for r in bin.reqs.iter().filter(|r| !labels::is_well_known(&r.key)) {
            if labels_out.contains_key(&r.key) || !pool.pool.requirements.has_key(&r.key) {
                continue;
            }
            if let Some(v) = label_value(r) {
                labels_out.insert(r.key.clone(), v.clone());
                requirements.add(Requirement::single(&r.key, &v));
            }
        }
        // The catalog's price where a NodeOverlay changed it: the claim's price less what the
        // overlay changed (an OS licence the class adds stays in both).
        let list_price_per_hour = ctype
            .offerings
            .iter()
            .find(|o| o.zone == *zone && o.capacity_type == capacity_type)
            .and_then(|o| o.list_price.map(|list| price - o.price + list));
        let mut taints = pool.pool.taints.clone();
        taints.extend(pool.pool.startup_taints.iter().cloned());
        plan.cost_per_hour += price;
        plan.nodeclaims.push(PlannedClaim {
            name,
            nodepool: pool.pool.name.clone(),
            instance_type: ctype.name.clone(),
            instance_types: candidates.iter().map(|c| s.catalog.types[c.0.catalog].name.clone()).collect(),
            capacity_type,
            zone: zone.to_string(),
            price_per_hour: price,
            list_price_per_hour,
            labels: labels_out,
            taints,
            allocatable: cheapest.allocatable.to_quantities(),
            pods: pod_names,
            requirements,
        });
    }
    for (i, reason) in &s.unschedulable {
        plan.unschedulable.push(Unschedulable { pod: s.snap.pods[*i].key(), reason: reason.clone() });
    }
    plan.unschedulable.sort_by(|a, b| a.pod.cmp(&b.pod));
    plan.cost_limited = s.cost_limited.clone();
    plan
}

/// A value a requirement allows, for labelling: the smallest of a finite set; for a complement
/// (`Exists`, `NotIn`, `Gt`/`Lt`) the smallest integer within the bounds that is not excluded
/// (Karpenter picks a random such integer). `None` for `DoesNotExist` or an empty range.
fn label_value(r: &Requirement) -> Option<String> {
    if !r.complement {
        return r.values.iter().next().cloned();
    }
    let low = r.greater_than.map_or(0, |g| g.saturating_add(1));
    let high = r.less_than.unwrap_or(i64::MAX);
    (low..high).take(r.values.len() + 1).map(|v| v.to_string()).find(|v| !r.values.contains(v))
}

type Candidate<'a> = (&'a PoolType, CapacityType, f64, Arc<str>);

/// The reserved offering claim `bin` launches into: the reservation the pass opened it in
/// (`held`), else one its requirements allow that has an instance left (`left`, by id), on a type
/// that holds its pods within the pool's limits (`within`) and keeps its minValues; by
/// Karpenter's preference (see [`reservations::best_reserved`]).
fn reserved_offering<'s>(
    s: &'s Scheduler<'_>,
    pool: usize,
    bin: &Bin,
    within: &dyn Fn(&PoolType) -> bool,
    left: &HashMap<&str, u32>,
    held: Option<&str>,
) -> Option<(Candidate<'s>, Arc<Reservation>)> {
    if left.is_empty() {
        return None;
    }
    let p = &s.pools[pool];
    let allowed = OfferingFilter::new(&bin.reqs);
    let usable = |_: usize, t: &PoolType| {
        t.requirements(s.catalog).overlaps(&bin.reqs)
            && bin.used.fits(&t.free)
            && within(t)
            && t.ports_free(&bin.ports)
            && (!p.has_min_values || min_values_met(s, pool, [t]))
    };
    let offered = |o: &PoolOffering| {
        allowed.allows(o)
            && o.reservation.as_ref().is_some_and(|r| {
                let id = r.id.as_str();
                held == Some(id) || left.get(id).is_some_and(|&n| n > 0)
            })
    };
    let (t, o) = reservations::best_reserved(s, pool, usable, offered)?;
    let reservation = o.reservation.clone()?;
    Some(((&p.types[t], CapacityType::Reserved, o.price, o.zone.clone()), reservation))
}

/// (index into the pool's types, capacity type, price, zone) of a type's best offering.
type Priced = (usize, CapacityType, f64, Arc<str>);

/// Priced spot and on-demand candidates.
pub(crate) type PricedTypes = (Vec<Priced>, Vec<Priced>);

/// [`priced_types`], kept in the solve cache.
pub(super) fn priced(s: &Scheduler<'_>, pool: usize, reqs: &Requirements) -> Arc<PricedTypes> {
    s.cache.priced(pool, reqs, || priced_types(s, pool, reqs))
}

/// What [`plan`] makes a claim of a pool without limits or `minValues` cost: the cheapest spot
/// type that holds `used`, else the cheapest on-demand one; with that type's index.
pub(super) fn claim_price(
    s: &Scheduler<'_>,
    pool: usize,
    priced: &PricedTypes,
    used: &Resources,
) -> Option<(f64, usize)> {
    let types = &s.pools[pool].types;
    let first = |list: &[Priced]| list.iter().find(|c| used.fits(&types[c.0].free)).map(|c| (c.2, c.0));
    first(&priced.0).or_else(|| first(&priced.1))
}

/// A pool's types the requirements allow, as (spot, on-demand) lists sorted by price then name.
fn priced_types(s: &Scheduler<'_>, pool: usize, reqs: &Requirements) -> PricedTypes {
    let p = &s.pools[pool];
    let mut spot = Vec::new();
    let mut on_demand = Vec::new();
    let allowed = OfferingFilter::new(reqs);
    for (i, t) in p.types.iter().enumerate() {
        if !t.requirements(s.catalog).overlaps(reqs) {
            continue;
        }
        let cheapest = |ct: CapacityType| {
            t.offerings
                .iter()
                .filter(|o| o.capacity_type == ct && allowed.allows(o))
                .min_by(|a, b| a.price.total_cmp(&b.price))
                .map(|o| (i, ct, o.price, o.zone.clone()))
        };
        spot.extend(cheapest(CapacityType::Spot));
        on_demand.extend(cheapest(CapacityType::OnDemand));
    }
    let by_price = |a: &Priced, b: &Priced| {
        a.2.total_cmp(&b.2)
            .then_with(|| s.catalog.types[p.types[a.0].catalog].name.cmp(&s.catalog.types[p.types[b.0].catalog].name))
    };
    spot.sort_by(by_price);
    on_demand.sort_by(by_price);
    (spot, on_demand)
}

/// Whether the candidate types keep enough distinct values for every `minValues` requirement.
pub(super) fn min_values_met<'t>(
    s: &Scheduler<'_>,
    pool: usize,
    types: impl IntoIterator<Item = &'t PoolType> + Clone,
) -> bool {
    s.pools[pool].pool.requirements.iter().filter(|r| r.min_values.is_some()).all(|m| {
        let mut values: Vec<&str> = types
            .clone()
            .into_iter()
            .filter_map(|t| t.requirements(s.catalog).get(&m.key).and_then(|r| r.single_value()))
            .collect();
        values.sort_unstable();
        values.dedup();
        values.len() >= m.min_values.unwrap_or(0)
    })
}

/// Cuts the list to [`MAX_INSTANCE_TYPES`], cheapest first, keeping enough distinct values for
/// every `minValues` requirement of the pool: the cheapest type of each value needed is kept
/// first, then the cheapest of the rest fill the remaining places.
fn keep_min_values<'a>(s: &Scheduler<'_>, pool: usize, candidates: Vec<Candidate<'a>>) -> Vec<Candidate<'a>> {
    if candidates.len() <= MAX_INSTANCE_TYPES {
        return candidates;
    }
    let mut keep = vec![false; candidates.len()];
    let mut kept = 0;
    for m in s.pools[pool].requirements.iter().filter(|r| r.min_values.is_some()) {
        let want = m.min_values.unwrap_or(0);
        let mut seen: Vec<&str> = Vec::new();
        for (i, c) in candidates.iter().enumerate() {
            let Some(v) = c.0.requirements(s.catalog).get(&m.key).and_then(|r| r.single_value()) else {
                continue;
            };
            if seen.len() < want && !seen.contains(&v) {
                seen.push(v);
                if !keep[i] && kept < MAX_INSTANCE_TYPES {
                    keep[i] = true;
                    kept += 1;
                }
            }
        }
    }
    for k in keep.iter_mut() {
        if kept >= MAX_INSTANCE_TYPES {
            break;
        }
        if !*k {
            *k = true;
            kept += 1;
        }
    }
    // `candidates` is sorted by price, so the kept ones stay in price order.
    candidates.into_iter().zip(keep).filter(|(_, k)| *k).map(|(c, _)| c).collect()
}
