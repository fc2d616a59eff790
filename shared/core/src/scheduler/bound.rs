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
use super::Scheduler;

pub(crate) fn lower_bound(s: &Scheduler<'_>, plan: &Plan) -> f64 {
    // Pods on new claims, counted per class.
    let on_new: rustc_hash::FxHashSet<usize> =
        s.bins.iter().filter(|b| b.node.is_none()).flat_map(|b| b.pods.iter().copied()).collect();
    if on_new.is_empty() || plan.nodeclaims.is_empty() {
        return 0.0;
    }
    let mut per_class: Vec<(usize, f64)> = Vec::new();
    for (c, class) in s.classes.iter().enumerate() {
        let n = class.pods.iter().filter(|p| on_new.contains(p)).count();
        if n > 0 {
            per_class.push((c, n as f64));
        }
    }
    // Per class: the usable types' prices per unit of cpu, memory and pods. Types are pruned to
    // the Pareto frontier of those three unit prices (a dominated type never gives the minimum),
    // and frontiers are shared between classes with the same pool fit.
    let mut frontiers: Vec<Frontier> = Vec::new();
    let mut index: HashMap<(usize, &Requirements), usize> = HashMap::default();
    let mut classes: Vec<(f64, [f64; 3], Vec<usize>)> = Vec::new();
    for &(c, n) in &per_class {
        let class = &s.classes[c];
        let req = &class.rep(s.snap).requests;
        let mut fits = Vec::new();
        for l in 0..class.levels.len() {
            for p in 0..s.pools.len() {
                let Some(Ok(fit)) = s.fit_cached(c, l, p) else { continue };
                let f = *index.entry((p, &fit.reqs)).or_insert_with(|| {
                    frontiers.push(frontier(s, p, fit));
                    frontiers.len() - 1
                });
                if !fits.contains(&f) {
                    fits.push(f);
                }
            }
        }
        classes.push((n, [req.cpu as f64, req.memory as f64, req.pods as f64], fits));
    }
    let mut single = 0.0f64;
    for (_, _, fits) in &classes {
        // Cheapest type that fits one pod of the class: at least one node is bought.
        let min_price = fits.iter().map(|f| frontiers[*f].cheapest).fold(f64::INFINITY, f64::min);
        if min_price.is_finite() {
            single = single.max(min_price);
        }
    }
    let mut best = 0.0f64;
    for wp in [0.0, 0.1, 0.2] {
        for step in 0..=20 {
            let wc = (1.0 - wp) * step as f64 / 20.0;
            let wm = 1.0 - wp - wc;
            let total: f64 = classes
                .iter()
                .map(|(n, req, fits)| {
                    let min = fits
                        .iter()
                        .flat_map(|&f| frontiers[f].units.iter())
                        .map(|u| wc * u[0] * req[0] + wm * u[1] * req[1] + wp * u[2] * req[2])
                        .fold(f64::INFINITY, f64::min);
                    if min.is_finite() {
                        n * min
                    } else {
                        0.0
                    }
                })
                .sum();
            best = best.max(total);
        }
    }
    best.max(single)
}

/// A fit's types as unit prices `[per cpu, per memory, per pod]`, dominated ones dropped, and
/// the cheapest price of any of them.
struct Frontier {
    units: Vec<[f64; 3]>,
    cheapest: f64,
}

fn frontier(s: &Scheduler<'_>, p: usize, fit: &super::PoolFit) -> Frontier {
    let pool = &s.pools[p];
    let mut cheapest = f64::INFINITY;
    let mut units: Vec<[f64; 3]> = fit
        .types
        .iter()
        .filter_map(|&ti| {
            let t = &pool.types[ti as usize];
            let price = t.best_offering(&fit.reqs)?.price;
            cheapest = cheapest.min(price);
            let per = |f: i64| if f > 0 { price / f as f64 } else { f64::INFINITY };
            Some([per(t.free.cpu), per(t.free.memory), per(t.free.pods)])
        })
        .collect();
    units.sort_by(|a, b| a[0].total_cmp(&b[0]).then(a[1].total_cmp(&b[1])).then(a[2].total_cmp(&b[2])));
    let mut kept: Vec<[f64; 3]> = Vec::new();
    for u in units {
        if !kept.iter().any(|k| k[0] <= u[0] && k[1] <= u[1] && k[2] <= u[2]) {
            kept.push(u);
        }
    }
    Frontier { units: kept, cheapest }
}
