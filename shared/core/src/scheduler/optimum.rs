//! The exact optimum of a small provisioning problem, to judge the scheduler's plans by: a MILP
//! (good_lp over microlp) finds the cheapest set of new nodes that holds as many of the pending
//! pods as can be held, under the rules the scheduler follows. Behind the `optimum` feature: the
//! exact-optimum property test and `dovetail bench` use it; nothing that decides does.
//!
//! The rules: pools are tried by weight (then name) and a pod opens a node only in the first pool
//! that can run it, though it may ride on a node of another pool that another pod opened. A pool
//! with limits opens no node that would take it past them (a node counts its
//! [`limit_share`](crate::model::limit_share)), and once it can open no node of any type that
//! holds a pod, the pod opens one in the next pool by weight. A node is one instance type of one
//! pool, at the cheapest offering the pool allows (the scheduler prefers spot; where on-demand is
//! cheaper the optimum takes it), and holds pods up to what its type has free after the DaemonSets
//! that run there. A node of a pool with limits is a type no cheaper type of the pool could be
//! instead (the pods would not fit it, or it would take the pool past a limit), as a plan launches
//! a claim as the cheapest type that holds it within the limits: the optimum does not buy a
//! larger node than its pods need to use up a pool's limits. What each pool can launch, at what
//! price and with what free, is the scheduler's own preparation of the pools: the optimum differs
//! from a plan in the packing only.
//!
//! Only the problems the rules above describe are in scope: pending pods with requests and
//! tolerations only (no node or pod affinity, preferences, spreads, host ports or volume
//! constraints), no existing nodes, pools without `minValues` or PreferNoSchedule taints.
//! [`exact`] says why not otherwise, and also when the model would be too large to try.

use std::time::Duration;

use good_lp::{
    constraint, default_solver, variable, Constraint, Expression, ProblemVariables, ResolutionError, Solution,
    SolutionStatus, SolverModel, Variable, WithTimeLimit,
};
use thiserror::Error;

use super::pools::{self, ClusterSpend, PreparedPool};
use crate::catalog::Catalog;
use crate::model::{tolerates_all, Pod, TaintEffect, Toleration};
use crate::resources::{Resources, CPU, EPHEMERAL_STORAGE, MEMORY, PODS};
use crate::snapshot::Snapshot;

/// Above this many variables the model is not tried: microlp would not finish in any useful time.
pub const MAX_VARIABLES: usize = 20_000;

/// The cheapest set of new nodes for a snapshot's pending pods.
#[derive(Debug, Clone, PartialEq)]
pub struct Optimum {
    /// What the nodes cost per hour.
    pub cost_per_hour: f64,
    /// Pods the nodes hold: every pending pod but those no pool can take (no type, or its limits).
    pub placed: usize,
    /// The nodes, as `pool/type`, for a report.
    pub nodes: Vec<String>,
}

/// Why there is no exact optimum to compare with.
#[derive(Debug, Error, PartialEq)]
pub enum NoOptimum {
    #[error("out of the exact model's scope: {0}")]
    OutOfScope(String),
    #[error("too large for the solver: {0} variables (at most {MAX_VARIABLES})")]
    TooLarge(usize),
    #[error("the solver did not prove an optimum within {0:?}")]
    TimedOut(Duration),
    #[error("the solver failed: {0}")]
    Failed(String),
}

/// Pods with the same requests and tolerations: interchangeable to the model.
struct Shape<'a> {
    requests: &'a Resources,
    tolerations: &'a [Toleration],
    count: usize,
}

/// A node the optimum may buy: one type of one pool (indices into the pools in the order the
/// scheduler tries them, and into that pool's prepared types).
struct Candidate {
    pool: usize,
    price: f64,
    free: Resources,
    /// What a node counts against the pool's limits.
    share: Resources,
    name: String,
}

/// What bounds a solve.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bounds {
    /// The solver's time limit (`None`: until it proves the optimum).
    pub time: Option<Duration>,
    /// A cost per hour the optimum does not exceed, known from a plan that places every pod: no
    /// node dearer than it, and no more copies of a type than it pays for, are considered — what
    /// keeps a catalog of hundreds of types within the solver's reach.
    pub cost: Option<f64>,
}

/// The exact optimum for `snap`'s pending pods, or why there is none.
pub fn exact(snap: &Snapshot, catalog: &Catalog, bounds: Bounds) -> Result<Optimum, NoOptimum> {
    in_scope(snap)?;
    let shapes = shapes(&snap.pods);
    let prepared = pools::prepare(&snap.nodepools, |_, pool, requirements| {
        let kubelet = snap.nodeclasses.iter().find(|c| c.name == pool.node_class).map(|c| &c.kubelet);
        pools::pool_types(pool, requirements, kubelet, &snap.daemonsets, catalog, &snap.unavailable, &[])
    });
    // A little over the bound, so the plan that gave it stays a solution despite rounding.
    let cost_bound = bounds.cost.map(|c| c * (1.0 + 1e-9) + 1e-12);
    let mut candidates = candidates(&prepared, catalog);
    if let Some(bound) = cost_bound {
        candidates.retain(|c| c.price <= bound);
    }
    let tolerated = |s: &Shape, p: usize| tolerates_all(s.tolerations, &prepared[p].pool.taints).is_ok();
    let fits = |s: &Shape, c: &Candidate| tolerated(s, c.pool) && s.requests.fits(&c.free);
    // Per shape, the pools (in order) with a node that holds one of its pods.
    let runs: Vec<Vec<usize>> = shapes
        .iter()
        .map(|s| (0..prepared.len()).filter(|&p| candidates.iter().any(|c| c.pool == p && fits(s, c))).collect())
        .collect();
    // Per shape and pool it runs in: the earlier pools that must be full before it may open a node
    // there (`None`: never, an earlier pool has no limits).
    let must_fill = |s: usize, p: usize| -> Option<Vec<usize>> {
        let earlier: Vec<usize> = runs[s].iter().copied().take_while(|&q| q != p).collect();
        earlier.iter().all(|&q| prepared[q].remaining.is_some()).then_some(earlier)
    };
    let names = resource_names(&shapes);
    let limited: Vec<Vec<(String, f64)>> = prepared
        .iter()
        .map(|p| p.remaining.iter().flatten().map(|(n, left)| (n.clone(), scaled(n, *left))).collect())
        .collect();

    // Copies of each candidate: never more than pods could open or ride on it, nor than its
    // pool's limits leave room for.
    let copies: Vec<usize> = candidates
        .iter()
        .map(|c| {
            let opens = (0..shapes.len()).any(|s| fits(&shapes[s], c) && must_fill(s, c.pool).is_some());
            if !opens {
                return 0;
            }
            let pods: usize = shapes.iter().filter(|s| fits(s, c)).map(|s| s.count).sum();
            let affordable =
                cost_bound.map_or(usize::MAX, |b| if c.price > 0.0 { (b / c.price) as usize } else { usize::MAX });
            limited[c.pool]
                .iter()
                .fold(pods, |n, (name, left)| match scaled(name, c.share.get(name)) {
                    share if share > 0.0 => n.min((left / share + 1e-9).floor() as usize),
                    _ => n,
                })
                .min(affordable)
        })
        .collect();
    // Per copy: whether it is open, and per shape it holds, how many and whether one opens it;
    // in a limited pool, per earlier type, why the node is not that type (see `kept` below).
    let variables: usize = candidates
        .iter()
        .zip(&copies)
        .map(|(c, &k)| {
            let earlier = if limited[c.pool].is_empty() {
                0
            } else {
                candidates.iter().filter(|e| e.pool == c.pool && e.price <= c.price).count()
            };
            k * (1 + 2 * shapes.iter().filter(|s| fits(s, c)).count() + earlier * (names.len() + limited[c.pool].len()))
        })
        .sum();
    if variables > MAX_VARIABLES {
        return Err(NoOptimum::TooLarge(variables));
    }

    let mut vars = ProblemVariables::new();
    let mut constraints: Vec<Constraint> = Vec::new();
    let mut cost = Expression::from(0.0);
    let mut placed: Vec<Expression> = shapes.iter().map(|_| Expression::from(0.0)).collect();
    // Per pool and limited resource, what its new nodes take.
    let mut used: Vec<Vec<Expression>> =
        limited.iter().map(|l| l.iter().map(|_| Expression::from(0.0)).collect()).collect();
    // Per (shape, pool) it may open only once earlier pools are full: whether they are.
    let mut allowed: Vec<((usize, usize), Variable)> = Vec::new();
    let mut opened: Vec<(usize, Variable)> = Vec::new();
    // Nodes of limited pools, with what their pods request: each must be a type the plan keeps.
    let mut kept: Vec<(usize, Variable, Vec<Expression>)> = Vec::new();
    for (ci, c) in candidates.iter().enumerate() {
        let riders: Vec<usize> = (0..shapes.len()).filter(|&s| fits(&shapes[s], c)).collect();
        let mut previous: Option<Variable> = None;
        for _ in 0..copies[ci] {
            let open = vars.add(variable().binary());
            opened.push((ci, open));
            cost += c.price * open;
            for (r, (name, _)) in limited[c.pool].iter().enumerate() {
                used[c.pool][r] += scaled(name, c.share.get(name)) * open;
            }
            let mut load: Vec<Expression> = names.iter().map(|_| Expression::from(0.0)).collect();
            let mut openers = Expression::from(0.0);
            for &s in &riders {
                let shape = &shapes[s];
                let x = vars.add(variable().integer().min(0).max(shape.count as f64));
                placed[s] += x;
                for (n, name) in names.iter().enumerate() {
                    load[n] += scaled(name, shape.requests.get(name)) * x;
                }
                match must_fill(s, c.pool) {
                    Some(earlier) if earlier.is_empty() => openers += x,
                    Some(_) => {
                        // This shape opens the node only if it is on it and the earlier pools are full.
                        let opener = vars.add(variable().binary());
                        let a = match allowed.iter().find(|(k, _)| *k == (s, c.pool)) {
                            Some((_, a)) => *a,
                            None => {
                                let a = vars.add(variable().binary());
                                allowed.push(((s, c.pool), a));
                                a
                            }
                        };
                        constraints.push(constraint!(opener <= x));
                        constraints.push(constraint!(opener <= a));
                        openers += opener;
                    }
                    None => {}
                }
            }
            constraints.push(constraint!(openers >= open));
            for (n, name) in names.iter().enumerate() {
                let free = scaled(name, c.free.get(name));
                constraints.push(constraint!(load[n].clone() <= free * open));
            }
            if !limited[c.pool].is_empty() {
                kept.push((ci, open, load));
            }
            // Copies of a candidate are interchangeable: open them in order.
            if let Some(p) = previous {
                constraints.push(constraint!(p >= open));
            }
            previous = Some(open);
        }
    }
    // A plan launches a claim as the first type, in price order, that holds its pods within what
    // the limits leave beside the other claims (`finalize.rs`): it never buys a limited pool a
    // larger node than its pods need, to use up the pool's limits so that pods may open nodes in
    // the next pool. So a node of a limited pool is of a type no earlier one could be instead:
    // for each earlier type of the pool, its pods do not fit it, or it would take the pool past a
    // limit.
    for (ci, open, load) in &kept {
        let c = &candidates[*ci];
        let earlier = |e: &Candidate| e.price < c.price || (e.price == c.price && e.name < c.name);
        for e in candidates.iter().filter(|e| e.pool == c.pool && earlier(e)) {
            let mut reasons = Expression::from(0.0);
            for (n, name) in names.iter().enumerate() {
                let w = vars.add(variable().binary());
                reasons += w;
                let past = scaled(name, e.free.get(name)) + 1e-3;
                constraints.push(constraint!(load[n].clone() >= past * w));
            }
            for (r, (name, left)) in limited[c.pool].iter().enumerate() {
                let w = vars.add(variable().binary());
                reasons += w;
                // Whole units (see `scaled`): past the limit means at least half a unit over.
                let past = left + scaled(name, c.share.get(name)) - scaled(name, e.share.get(name)) + 0.5;
                constraints.push(constraint!(used[c.pool][r].clone() >= past * w));
            }
            constraints.push(constraint!(reasons >= *open));
        }
    }
    for (p, resources) in limited.iter().enumerate() {
        for (r, (_, left)) in resources.iter().enumerate() {
            constraints.push(constraint!(used[p][r].clone() <= *left));
        }
    }
    // A pool is full for a shape when no type of it that holds the shape's pod fits under what its
    // limits leave: for each such type, some limited resource would go past its limit.
    let mut full: Vec<((usize, usize), Variable)> = Vec::new();
    for &((s, p), a) in &allowed {
        for q in must_fill(s, p).expect("allowed only when earlier pools have limits") {
            let f = match full.iter().find(|(k, _)| *k == (s, q)) {
                Some((_, f)) => *f,
                None => {
                    let f = vars.add(variable().binary());
                    for c in candidates.iter().filter(|c| c.pool == q && fits(&shapes[s], c)) {
                        let mut past = Expression::from(0.0);
                        for (r, (name, left)) in limited[q].iter().enumerate() {
                            let w = vars.add(variable().binary());
                            past += w;
                            // Quantities are whole units (see `scaled`): going past means at
                            // least half a unit over.
                            let threshold = left - scaled(name, c.share.get(name)) + 0.5;
                            constraints.push(constraint!(used[q][r].clone() >= threshold * w));
                        }
                        constraints.push(constraint!(past >= f));
                    }
                    full.push(((s, q), f));
                    f
                }
            };
            constraints.push(constraint!(a <= f));
        }
    }
    // Every pod that can be placed is: without limits, every pod some pool runs; with them, as
    // many as possible first (one more pod outweighs any cost), then the cheapest.
    let limits = limited.iter().any(|l| !l.is_empty());
    let mut objective = cost.clone();
    let worth: f64 = candidates.iter().zip(&copies).map(|(c, &k)| c.price * k as f64).sum::<f64>() + 1.0;
    for (s, shape) in shapes.iter().enumerate() {
        if runs[s].is_empty() {
            continue;
        }
        if limits {
            constraints.push(constraint!(placed[s].clone() <= shape.count as f64));
            objective -= worth * placed[s].clone();
        } else {
            constraints.push(constraint!(placed[s].clone() == shape.count as f64));
        }
    }
    if opened.is_empty() {
        return Ok(Optimum { cost_per_hour: 0.0, placed: 0, nodes: vec![] });
    }
    if let Some(bound) = cost_bound {
        constraints.push(constraint!(cost.clone() <= bound));
    }
    let time_limit = bounds.time;
    let mut model = vars.minimise(objective).using(default_solver);
    if let Some(limit) = time_limit {
        model = model.with_time_limit(limit.as_secs_f64());
    }
    for c in constraints {
        model = model.with(c);
    }
    let solution = match model.solve() {
        Ok(s) => s,
        Err(ResolutionError::Other(_)) if time_limit.is_some() => {
            return Err(NoOptimum::TimedOut(time_limit.unwrap_or_default()))
        }
        Err(e) => return Err(NoOptimum::Failed(e.to_string())),
    };
    if !matches!(solution.status(), SolutionStatus::Optimal) {
        return Err(NoOptimum::TimedOut(time_limit.unwrap_or_default()));
    }
    let placed = placed.iter().map(|p| solution.eval(p).round() as usize).sum();
    let nodes = opened
        .iter()
        .filter(|(_, v)| solution.value(*v) > 0.5)
        .map(|(c, _)| format!("{}/{}", prepared[candidates[*c].pool].pool.name, candidates[*c].name))
        .collect();
    Ok(Optimum { cost_per_hour: solution.eval(&cost), placed, nodes })
}

/// Whether the rules the model follows are all that decides `snap`'s plan.
fn in_scope(snap: &Snapshot) -> Result<(), NoOptimum> {
    let out = |why: String| Err(NoOptimum::OutOfScope(why));
    if !snap.nodes.is_empty() {
        return out(format!("the cluster has {} node(s) or claim(s) already", snap.nodes.len()));
    }
    // A limit shared by every pool is not in the model (each pool's own limits are), nor are
    // capacity reservations and their counts.
    if snap.cost_limit.is_some() {
        return out("a cluster-wide cost limit is set".to_string());
    }
    if snap.reservations.values().any(|r| !r.is_empty()) {
        return out("the classes select capacity reservations".to_string());
    }
    for pod in &snap.pods {
        let constrained = !pod.node_affinity.iter().any(|t| t.is_empty())
            || !pod.preferred_node_affinity.is_empty()
            || !pod.topology_spread.is_empty()
            || !pod.pod_affinity.is_empty()
            || !pod.pod_anti_affinity.is_empty()
            || !pod.preferred_pod_affinity.is_empty()
            || !pod.preferred_pod_anti_affinity.is_empty()
            || !pod.host_ports.is_empty()
            || !pod.volume_requirements.is_empty();
        if constrained {
            return out(format!(
                "pod {} has node or pod affinity, a preference, a spread, host ports or a volume's zone",
                pod.key()
            ));
        }
    }
    for pool in &snap.nodepools {
        if pool.requirements.iter().any(|r| r.min_values.is_some()) {
            return out(format!("NodePool {} has minValues", pool.name));
        }
        if pool.taints.iter().any(|t| t.effect == TaintEffect::PreferNoSchedule) {
            return out(format!("NodePool {} has a PreferNoSchedule taint", pool.name));
        }
    }
    Ok(())
}

/// The pending pods grouped by requests and tolerations, in order of first appearance.
fn shapes(pods: &[Pod]) -> Vec<Shape<'_>> {
    let mut shapes: Vec<Shape<'_>> = Vec::new();
    for pod in pods {
        match shapes.iter_mut().find(|s| *s.requests == pod.requests && s.tolerations == pod.tolerations.as_slice()) {
            Some(s) => s.count += 1,
            None => shapes.push(Shape { requests: &pod.requests, tolerations: &pod.tolerations, count: 1 }),
        }
    }
    shapes
}

/// Every type each pool can launch within what its limits leave, at its cheapest offering, less
/// those another type of the pool beats on every count (no dearer, at least as much free, no more
/// against the limits): the optimum never needs them, nor does a pool need them to be open.
fn candidates(prepared: &[PreparedPool<'_>], catalog: &Catalog) -> Vec<Candidate> {
    let mut all = Vec::new();
    for (p, pool) in prepared.iter().enumerate() {
        if pool.broken.is_some() {
            continue;
        }
        let mut mine: Vec<Candidate> = Vec::new();
        for t in pool.types.iter().filter(|t| pool.within_limits(&t.capacity, &ClusterSpend::default()).is_ok()) {
            let Some(price) = t.offerings.iter().map(|o| o.price).min_by(f64::total_cmp) else { continue };
            mine.push(Candidate {
                pool: p,
                price,
                free: t.free.clone(),
                share: t.capacity.clone(),
                name: catalog.types[t.catalog].name.clone(),
            });
        }
        let limited: Vec<&str> = pool.remaining.iter().flatten().map(|(n, _)| n.as_str()).collect();
        let beats = |a: usize, b: usize| {
            let (a, b) = (&mine[a], &mine[b]);
            a.price <= b.price && b.free.fits(&a.free) && limited.iter().all(|n| a.share.get(n) <= b.share.get(n))
        };
        let kept: Vec<usize> = pools::undominated(mine.len(), beats).collect();
        all.extend(mine.into_iter().enumerate().filter(|(i, _)| kept.contains(i)).map(|(_, c)| c));
    }
    all
}

/// The resources the shapes request (pods always): what each node's load is checked in.
fn resource_names(shapes: &[Shape<'_>]) -> Vec<String> {
    let mut names: Vec<String> = [CPU, MEMORY, EPHEMERAL_STORAGE, PODS].map(String::from).into();
    for s in shapes {
        for n in s.requests.names() {
            if !names.iter().any(|m| m == n) {
                names.push(n.to_string());
            }
        }
    }
    names
}

/// A quantity in the unit the model counts it in: MiB for bytes (so the solver's numbers stay
/// small), as they are for the rest (millicores, pods, nodes, devices).
fn scaled(name: &str, value: i64) -> f64 {
    match name {
        MEMORY | EPHEMERAL_STORAGE => value as f64 / (1u64 << 20) as f64,
        _ => value as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchmark::{default_pool, karpenter_catalog, karpenter_pods};
    use crate::model::{NodePool, LIMIT_NODES};

    /// Pools `a` (weight 10, with `limits`) and `b`, and `n` pods of 1.5 vCPU.
    fn two_pools(limits: &[(&str, i64)], n: usize) -> Snapshot {
        let (pool, class) = default_pool();
        let mut a = NodePool { name: "a".into(), weight: 10, ..pool.clone() };
        a.limits = limits.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let b = NodePool { name: "b".into(), ..pool };
        let pods = (0..n).map(|i| Pod::new("default", &format!("p{i}"), Resources::new(1500, 1 << 30))).collect();
        Snapshot { pods, nodepools: vec![a, b], nodeclasses: vec![class], ..Default::default() }
    }

    fn pools_of(o: &Optimum) -> Vec<&str> {
        let mut pools: Vec<&str> = o.nodes.iter().map(|n| n.split('/').next().unwrap_or_default()).collect();
        pools.sort_unstable();
        pools
    }

    #[test]
    fn pods_open_nodes_in_the_first_pool_until_its_limits_stop_it() {
        // Up to 4 vCPU: a node holds two of the pods at most.
        let catalog = karpenter_catalog(4);
        let free = exact(&two_pools(&[], 4), &catalog, Bounds::default()).expect("solves");
        assert_eq!(free.placed, 4);
        assert!(pools_of(&free).iter().all(|p| *p == "a"), "{free:?}");
        let one_node = exact(&two_pools(&[(LIMIT_NODES, 1)], 4), &catalog, Bounds::default()).expect("solves");
        assert_eq!(one_node.placed, 4);
        assert_eq!(pools_of(&one_node).iter().filter(|p| **p == "a").count(), 1, "{one_node:?}");
        assert!(pools_of(&one_node).contains(&"b"), "{one_node:?}");
        // Two vCPU left under the limit: a 2-vCPU node in `a` for one pod, the rest in `b`.
        let two_cpu = exact(&two_pools(&[(CPU, 2000)], 4), &catalog, Bounds::default()).expect("solves");
        assert_eq!(two_cpu.placed, 4);
        assert!(two_cpu.nodes.contains(&"a/fake-it-1".to_string()), "{two_cpu:?}");
        assert!(pools_of(&two_cpu).iter().filter(|p| **p == "a").count() == 1, "{two_cpu:?}");
    }

    #[test]
    fn pods_no_pool_can_take_are_left_out() {
        let catalog = karpenter_catalog(4);
        let mut snap = two_pools(&[(LIMIT_NODES, 1)], 4);
        snap.nodepools.truncate(1);
        let o = exact(&snap, &catalog, Bounds::default()).expect("solves");
        assert_eq!(o.nodes.len(), 1, "{o:?}");
        assert_eq!(o.placed, 2, "one node of at most 4 vCPU: {o:?}");
    }

    #[test]
    fn what_the_model_cannot_judge_is_said() {
        let catalog = karpenter_catalog(8);
        let mut snap = two_pools(&[], 1);
        snap.pods = karpenter_pods(10, 1);
        assert!(matches!(exact(&snap, &catalog, Bounds::default()), Err(NoOptimum::OutOfScope(_))));
        let big = two_pools(&[], 2000);
        assert!(matches!(exact(&big, &karpenter_catalog(400), Bounds::default()), Err(NoOptimum::TooLarge(_))));
    }
}
