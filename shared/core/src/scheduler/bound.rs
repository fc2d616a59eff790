//! A lower bound on the cost of the new capacity, to judge the plan against.
//!
//! For any weights w (cpu, memory, pods) summing to one, a node of type t holding pods S costs
//! price_t ≥ price_t · Σ_r w_r · (Σ_{p∈S} req_{p,r} / free_{t,r}), because each resource's share
//! is at most one. Charging every pod its cheapest such share over the types it may use therefore
//! never exceeds the cost of any packing: this is the LP dual of fractional covering, maximised
//! over a grid of weights. At least one node is needed too, so the cheapest type that fits the
//! most demanding pod is a bound as well. Pods the plan puts on existing capacity are excluded
//! (the bound is for the new capacity given those placements).

use rustc_hash::FxHashMap as HashMap;

use crate::requirements::Requirements;

use super::plan::Plan;
use super::pools::{Frontier, OfferingFilter, PoolFit};
use super::Scheduler;

pub(crate) fn lower_bound(s: &Scheduler<'_>, plan: &Plan) -> f64 {
    // Pods on new claims, with the pool each went to; not those the plan leaves pending after
    // all (a claim its limits or minValues leave no type for), which it pays nothing for.
    let pending: std::collections::HashSet<&str> = plan.unschedulable.iter().map(|u| u.pod.as_str()).collect();
    let on_new: HashMap<usize, usize> = s
        .bins
        .iter()
        .filter(|b| b.node.is_none())
        .flat_map(|b| b.pods.iter().map(move |&p| (p, b.pool)))
        .filter(|&(p, _)| pending.is_empty() || !pending.contains(s.snap.pods[p].key().as_str()))
        .collect();
    if on_new.is_empty() || plan.nodeclaims.is_empty() {
        return 0.0;
    }
    // Per class, the pods on new claims and the last pool (in the order pools are tried, by
    // weight) that holds one. Pools further down are left out of the class's shares: pods go to
    // the first pool that can run them, so a plan that honours NodePool weights never buys a
    // lower-weight pool's cheaper capacity for them. Pools up to that one stay in (limits, or no
    // offering left, may have moved pods past a pool), so the bound stays below this plan's cost.
    let mut counts = Vec::new();
    let mut last_pool = vec![usize::MAX; s.classes.len()];
    for (c, class) in s.classes.iter().enumerate() {
        let pools: Vec<usize> = class.pods.iter().filter_map(|p| on_new.get(p).copied()).collect();
        if let Some(&last) = pools.iter().max() {
            counts.push((c, pools.len() as f64));
            last_pool[c] = last;
        }
    }
    // At the prices claims launch at, reserved ones included: the plan's reserved claims cost
    // next to nothing, and the bound must stay below the plan.
    let d = dual_within(s, &counts, &last_pool, false);
    d.total.max(d.single)
}

/// The best bound over the weight grid, the weights that gave it, and each class's per-pod
/// share at those weights (what a pod is "worth" in dollars when packing).
pub(crate) struct Dual {
    pub total: f64,
    pub single: f64,
    pub values: Vec<f64>,
}

/// Evaluates the dual bound for `counts` (class, number of pods) over every pool fit computed so
/// far for those classes, at the prices of what is bought (see [`bought_frontier`]): what a pod
/// is worth when the pass chooses what to buy for it.
pub(crate) fn dual(s: &Scheduler<'_>, counts: &[(usize, f64)]) -> Dual {
    dual_within(s, counts, &vec![usize::MAX; s.classes.len()], true)
}

/// [`dual`], counting for each class `c` only the pools up to `last_pool[c]` (in the order pools
/// are tried), at bought prices or, when not `bought`, at the prices claims launch at.
fn dual_within(s: &Scheduler<'_>, counts: &[(usize, f64)], last_pool: &[usize], bought: bool) -> Dual {
    // Per class: the usable types' prices per unit of cpu, memory and pods. Types are pruned to
    // the Pareto frontier of those three unit prices (a dominated type never gives the minimum),
    // and frontiers are shared between classes with the same pool fit.
    let mut frontiers: Vec<&Frontier> = Vec::new();
    // Keyed by the fit's types too: classes with the same requirements but larger requests fit fewer types.
    let mut index: HashMap<(usize, &Requirements, &[u32]), usize> = HashMap::default();
    let mut classes: Vec<(usize, f64, [f64; 3], Vec<usize>)> = Vec::new();
    for &(c, n) in counts {
        let class = &s.classes[c];
        let req = &class.rep(s.snap).requests;
        let mut fits = Vec::new();
        for l in 0..class.levels.len() {
            for p in 0..s.pools.len().min(last_pool[c].saturating_add(1)) {
                let Some(Ok(fit)) = s.fit_cached(c, l, p) else { continue };
                let f = *index.entry((p, &fit.reqs, &fit.types)).or_insert_with(|| {
                    frontiers.push(if bought { bought_frontier(s, p, fit) } else { frontier(s, p, fit) });
                    frontiers.len() - 1
                });
                if !fits.contains(&f) {
                    fits.push(f);
                }
            }
        }
        classes.push((c, n, [req.cpu as f64, req.memory as f64, req.pods as f64], fits));
    }
    let mut single = 0.0f64;
    for (_, _, _, fits) in &classes {
        // Cheapest type that fits one pod of the class: at least one node is bought.
        let min_price = fits.iter().map(|f| frontiers[*f].cheapest).fold(f64::INFINITY, f64::min);
        if min_price.is_finite() {
            single = single.max(min_price);
        }
    }
    let share = |fits: &[usize], req: &[f64; 3], w: [f64; 3]| {
        let min = fits
            .iter()
            .flat_map(|&f| frontiers[f].units.iter())
            .map(|u| w[0] * u[0] * req[0] + w[1] * u[1] * req[1] + w[2] * u[2] * req[2])
            .fold(f64::INFINITY, f64::min);
        if min.is_finite() {
            min
        } else {
            0.0
        }
    };
    let mut best = (0.0f64, [1.0, 0.0, 0.0]);
    for wp in [0.0, 0.1, 0.2] {
        for step in 0..=20 {
            let wc = (1.0 - wp) * step as f64 / 20.0;
            let w = [wc, 1.0 - wp - wc, wp];
            let total: f64 = classes.iter().map(|(_, n, req, fits)| n * share(fits, req, w)).sum();
            if total > best.0 {
                best = (total, w);
            }
        }
    }
    let mut values = vec![0.0; s.classes.len()];
    for (c, _, req, fits) in &classes {
        values[*c] = share(fits, req, best.1);
    }
    Dual { total: best.0, single, values }
}

/// The fit's unit-price frontier (see [`Frontier`]) at the prices claims launch at (a reserved
/// offering's when it has one), worked out the first time it is asked for.
pub(crate) fn frontier<'f>(s: &Scheduler<'_>, p: usize, fit: &'f PoolFit) -> &'f Frontier {
    fit.frontier.get_or_init(|| compute_frontier(s, p, fit, false))
}

/// The fit's unit-price frontier at the prices of offerings that are bought (spot, on-demand):
/// what new capacity costs once the reservations are taken. Reserved capacity is nearly free, so
/// at launch prices a reserved type is all the frontier there is; the pass opens claims in
/// reservations on its own (`claims.rs`) and chooses what to buy at these prices. The same as
/// [`frontier`] when no type of the fit has a reserved offering.
pub(crate) fn bought_frontier<'f>(s: &Scheduler<'_>, p: usize, fit: &'f PoolFit) -> &'f Frontier {
    let bought = fit.bought.get_or_init(|| {
        // No reservation at all (nearly always): no type to look at.
        let types = &s.pools[p].types;
        let reserved = !s.reservations_left.is_empty() && fit.types.iter().any(|&t| types[t as usize].has_reserved());
        reserved.then(|| compute_frontier(s, p, fit, true))
    });
    bought.as_ref().unwrap_or_else(|| frontier(s, p, fit))
}

fn compute_frontier(s: &Scheduler<'_>, p: usize, fit: &PoolFit, bought: bool) -> Frontier {
    let pool = &s.pools[p];
    let allowed = [OfferingFilter::new(&fit.reqs)];
    let mut cheapest = f64::INFINITY;
    let mut units: Vec<([f64; 3], u32)> = fit
        .types
        .iter()
        .filter_map(|&ti| {
            let t = &pool.types[ti as usize];
            let offer = if bought { t.best_bought_offering(&allowed, &[]) } else { t.best_offering_all(&allowed, &[]) };
            let price = offer?.price;
            cheapest = cheapest.min(price);
            let per = |f: i64| if f > 0 { price / f as f64 } else { f64::INFINITY };
            Some(([per(t.free.cpu), per(t.free.memory), per(t.free.pods)], ti))
        })
        .collect();
    units.sort_by(|(a, _), (b, _)| a[0].total_cmp(&b[0]).then(a[1].total_cmp(&b[1])).then(a[2].total_cmp(&b[2])));
    let mut kept: Vec<[f64; 3]> = Vec::new();
    let mut types = Vec::new();
    for (u, t) in units {
        if !kept.iter().any(|k| k[0] <= u[0] && k[1] <= u[1] && k[2] <= u[2]) {
            kept.push(u);
            types.push(t);
        }
    }
    Frontier { units: kept, types, cheapest }
}
