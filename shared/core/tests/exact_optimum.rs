//! Plans against the exact optimum. For small random cases — a few pod shapes, one to three
//! NodePools with weights and instance-family and capacity-type requirements, spot and on-demand
//! offerings — a MILP solver (good_lp over microlp) finds the cheapest set of new nodes that holds
//! every pod under the rules the scheduler follows, and the plan must be valid (the independent
//! checker), place every pod the optimum places, and cost at most [`CEILING`] times as much.
//!
//! The rules the optimum is held to are the scheduler's: pools are tried by weight (then name)
//! and a pod opens a node only in the first pool that can run it, though it may ride on a node of
//! another pool that another pod opened; a node is one offering (type, capacity type, zone) and holds pods up to its allocatable
//! CPU, memory and pod count. These cases have no limits, topology or existing nodes.
//!
//! Issue 20 asks for at most 2% above the optimum on every case; the scheduler is not there yet.
//! Its repacking (`scheduler/repack.rs`, `mix.rs`, `rides.rs`) packs one type, merges whole
//! claims, re-packs a few claims at a time over a mix of types (first fit, largest first), and
//! moves a claim onto another pool's; what it still misses are exact fits first fit does not find
//! (two 3-vCPU and two 1-vCPU pods filling one 8-vCPU node, four 1.5-vCPU and two 1-vCPU the
//! other) and pods of one claim shared out over several claims of another pool. Until it is, the
//! ceiling below is the worst ratio measured, so a change that makes plans worse fails here, and
//! the run prints how many cases miss 2% (`DOVETAIL_OPTIMUM_SHOW=1`, with `--nocapture`, prints
//! each such case, the plan and the optimum's nodes). Lower [`CEILING`] as the packing improves.
//!
//! The cases are the same on every run (seed 1). `DOVETAIL_OPTIMUM_CASES` sets their number (256
//! by default), `DOVETAIL_OPTIMUM_SEED` another seed, `DOVETAIL_OPTIMUM_CEILING` another ceiling;
//! the run prints the worst and mean
//! plan/optimum ratio.

mod checker;
mod synthetic;

use std::sync::Mutex;

use dovetail_core::catalog::{CapacityType, Catalog};
use dovetail_core::labels;
use dovetail_core::model::{NodeClass, NodePool, OwnerKind, Pod};
use dovetail_core::requirements::Operator;
use dovetail_core::resources::Resources;
use dovetail_core::scheduler::schedule;
use dovetail_core::snapshot::Snapshot;
use good_lp::{constraint, default_solver, variable, Expression, ProblemVariables, Solution, SolverModel, Variable};
use proptest::prelude::*;
use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};
use synthetic::{fixed_catalog, fixed_type, req, GIB};

const MIB: i64 = 1 << 20;
const FAMILIES: [&str; 3] = ["f0", "f1", "f2"];
const ZONES: [&str; 2] = ["zone-a", "zone-b"];

#[derive(Debug, Clone)]
struct TypeSpec {
    cores: i64,
    gib_per_core: i64,
    family: usize,
    /// Per-core on-demand price in tenths of a cent per hour.
    per_core: u32,
    /// Spot price as a percentage of on-demand.
    spot_pct: u32,
}

#[derive(Debug, Clone)]
struct PoolSpec {
    weight: i32,
    /// 0: both capacity types, 1: on-demand only, 2: spot only.
    capacity: u8,
    /// Bit f set: family f allowed.
    families: u8,
}

#[derive(Debug, Clone)]
struct ShapeSpec {
    cpu_m: i64,
    mem_mib: i64,
    count: usize,
}

#[derive(Debug, Clone)]
struct Case {
    types: Vec<TypeSpec>,
    pools: Vec<PoolSpec>,
    shapes: Vec<ShapeSpec>,
}

fn case() -> impl Strategy<Value = Case> {
    let ty = (
        prop::sample::select(vec![1i64, 2, 4, 8]),
        prop::sample::select(vec![2i64, 4, 8]),
        0..3usize,
        30..60u32,
        30..80u32,
    )
        .prop_map(|(cores, gib_per_core, family, per_core, spot_pct)| TypeSpec {
            cores,
            gib_per_core,
            family,
            per_core,
            spot_pct,
        });
    let pool =
        (0..3i32, 0..3u8, 1..8u8).prop_map(|(weight, capacity, families)| PoolSpec { weight, capacity, families });
    let shape = (
        prop::sample::select(vec![250i64, 500, 1000, 1500, 2000, 3000]),
        prop::sample::select(vec![256i64, 512, 1024, 2048, 4096, 6144]),
        1..5usize,
    )
        .prop_map(|(cpu_m, mem_mib, count)| ShapeSpec { cpu_m, mem_mib, count });
    (prop::collection::vec(ty, 2..6), prop::collection::vec(pool, 1..4), prop::collection::vec(shape, 1..4))
        .prop_map(|(types, pools, shapes)| Case { types, pools, shapes })
}

fn type_name(i: usize, t: &TypeSpec) -> String {
    format!("{}.t{i}", FAMILIES[t.family])
}

fn catalog(case: &Case) -> Catalog {
    let types = case
        .types
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let od = t.cores as f64 * t.per_core as f64 / 1000.0;
            let spot = od * t.spot_pct as f64 / 100.0;
            // The second zone a little dearer: the plan and the optimum both take the first.
            let mut ty = fixed_type(&type_name(i, t), t.cores, t.cores * t.gib_per_core, od, Some(spot), &ZONES);
            for o in ty.offerings.iter_mut().filter(|o| o.zone == ZONES[1]) {
                o.price *= 1.1;
            }
            ty
        })
        .collect();
    fixed_catalog(types)
}

fn pools(case: &Case) -> Vec<NodePool> {
    case.pools
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut pool = NodePool::new(&format!("pool-{i}"), "default");
            pool.weight = p.weight;
            let capacity: &[&str] = match p.capacity {
                0 => &["spot", "on-demand"],
                1 => &["on-demand"],
                _ => &["spot"],
            };
            pool.requirements.add(req(labels::CAPACITY_TYPE, Operator::In, capacity));
            let families: Vec<&str> =
                FAMILIES.iter().enumerate().filter(|(f, _)| p.families & (1 << f) != 0).map(|(_, n)| *n).collect();
            pool.requirements.add(req(labels::INSTANCE_FAMILY, Operator::In, &families));
            pool
        })
        .collect()
}

fn snapshot(case: &Case) -> Snapshot {
    let mut pods = Vec::new();
    for (s, shape) in case.shapes.iter().enumerate() {
        for i in 0..shape.count {
            let mut p = Pod::new("default", &format!("s{s}-{i}"), Resources::new(shape.cpu_m, shape.mem_mib * MIB));
            p.owner = OwnerKind::ReplicaSet;
            pods.push(p);
        }
    }
    Snapshot {
        pods,
        nodepools: pools(case),
        nodeclasses: vec![NodeClass { name: "default".into(), ..NodeClass::default() }],
        ..Default::default()
    }
}

/// A node the optimum may buy: one type, capacity type and zone of one pool.
struct Candidate {
    pool: usize,
    name: String,
    price: f64,
    cpu: i64,
    memory: i64,
    pods: i64,
}

/// The pools in the order the scheduler tries them: weight, highest first, then name.
fn pool_order(case: &Case) -> Vec<usize> {
    let mut order: Vec<usize> = (0..case.pools.len()).collect();
    order.sort_by(|&a, &b| case.pools[b].weight.cmp(&case.pools[a].weight).then(a.cmp(&b)));
    order
}

/// The cheapest cost of new nodes holding every pod that some pool can run, how many pods that
/// is, and the nodes bought (pool and type, for the report of a case above the target); `None`
/// when the solver fails.
fn optimum(case: &Case, catalog: &Catalog) -> Option<(f64, usize, Vec<String>)> {
    let mut candidates = Vec::new();
    for (p, pool) in case.pools.iter().enumerate() {
        for (i, t) in case.types.iter().enumerate() {
            if pool.families & (1 << t.family) == 0 {
                continue;
            }
            let ty = catalog.get(&type_name(i, t)).expect("in the catalog");
            let allowed = |ct: CapacityType| match pool.capacity {
                0 => true,
                1 => ct == CapacityType::OnDemand,
                _ => ct == CapacityType::Spot,
            };
            let Some(price) =
                ty.offerings.iter().filter(|o| allowed(o.capacity_type)).map(|o| o.price).min_by(f64::total_cmp)
            else {
                continue;
            };
            let r = ty.allocatable(&Default::default());
            candidates.push(Candidate {
                pool: p,
                name: type_name(i, t),
                price,
                cpu: r.cpu,
                memory: r.memory,
                pods: r.pods,
            });
        }
    }
    // Each shape is bound to the first pool, by weight, with a candidate that holds one pod.
    let fits = |s: &ShapeSpec, c: &Candidate| s.cpu_m <= c.cpu && s.mem_mib * MIB <= c.memory && c.pods >= 1;
    let order = pool_order(case);
    let home: Vec<Option<usize>> = case
        .shapes
        .iter()
        .map(|s| order.iter().copied().find(|&p| candidates.iter().any(|c| c.pool == p && fits(s, c))))
        .collect();
    let placeable: usize = case.shapes.iter().zip(&home).filter(|(_, h)| h.is_some()).map(|(s, _)| s.count).sum();
    if placeable == 0 {
        return Some((0.0, 0, Vec::new()));
    }

    let mut vars = ProblemVariables::new();
    let mut cost = Expression::from(0.0);
    // Per shape, the terms of its placement; per node, its open variable.
    let mut placed: Vec<Expression> = case.shapes.iter().map(|_| Expression::from(0.0)).collect();
    let mut opened: Vec<(String, Variable)> = Vec::new();
    let mut constraints = Vec::new();
    for c in &candidates {
        // Any pod may ride on a node it fits, but a node is opened by a pod whose first pool is
        // the node's: at least one of its pods has that home.
        let shapes: Vec<usize> =
            (0..case.shapes.len()).filter(|&s| home[s].is_some() && fits(&case.shapes[s], c)).collect();
        if !shapes.iter().any(|&s| home[s] == Some(c.pool)) {
            continue;
        }
        // Never more nodes of one candidate than pods that could go on it.
        let copies: usize = shapes.iter().map(|&s| case.shapes[s].count).sum();
        let mut previous: Option<Variable> = None;
        for _ in 0..copies {
            let open = vars.add(variable().binary());
            opened.push((format!("pool-{}/{}", c.pool, c.name), open));
            cost += c.price * open;
            let mut cpu = Expression::from(0.0);
            let mut memory = Expression::from(0.0);
            let mut count = Expression::from(0.0);
            let mut openers = Expression::from(0.0);
            for &s in &shapes {
                let shape = &case.shapes[s];
                let x = vars.add(variable().integer().min(0).max(shape.count as f64));
                placed[s] += x;
                cpu += (shape.cpu_m as f64) * x;
                memory += ((shape.mem_mib * MIB) as f64 / GIB as f64) * x;
                count += x;
                if home[s] == Some(c.pool) {
                    openers += x;
                }
            }
            constraints.push(constraint!(openers >= open));
            constraints.push(constraint!(cpu <= (c.cpu as f64) * open));
            constraints.push(constraint!(memory <= (c.memory as f64 / GIB as f64) * open));
            constraints.push(constraint!(count <= (c.pods as f64) * open));
            // Copies of a candidate are interchangeable: open them in order.
            if let Some(p) = previous {
                constraints.push(constraint!(p >= open));
            }
            previous = Some(open);
        }
    }
    for (s, shape) in case.shapes.iter().enumerate() {
        if home[s].is_some() {
            constraints.push(constraint!(placed[s].clone() == shape.count as f64));
        }
    }
    let mut model = vars.minimise(cost.clone()).using(default_solver);
    for c in constraints {
        model = model.with(c);
    }
    let solution = model.solve().ok()?;
    let nodes = opened.iter().filter(|(_, v)| solution.value(*v) > 0.5).map(|(n, _)| n.clone()).collect();
    Some((solution.eval(&cost), placeable, nodes))
}

/// The worst plan/optimum ratio of the default cases (256, seed 1) as measured: issue 20's
/// target is 1.02. Over 10,000 cases (`DOVETAIL_OPTIMUM_CASES=10000 DOVETAIL_OPTIMUM_CEILING=100`)
/// the worst was 1.8876 and the mean 1.0008, with 38 of 9,101 cases needing new nodes above 1.02
/// (before the mixed repacking and rides: 1.89, 1.0036 and 174).
const CEILING: f64 = 1.064;

/// [`CEILING`], or `DOVETAIL_OPTIMUM_CEILING` (to measure the distribution past it).
fn ceiling() -> f64 {
    env("DOVETAIL_OPTIMUM_CEILING", CEILING)
}

/// What issue 20 asks of every case.
const TARGET: f64 = 1.02;

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One case: the plan is valid, places every placeable pod, and costs at most [`ceiling`] times
/// the optimum; returns plan/optimum (`None` when nothing needs a new node).
fn check(case: &Case) -> Result<Option<f64>, TestCaseError> {
    let catalog = catalog(case);
    let snap = snapshot(case);
    let plan = schedule(&snap, &catalog);
    let errors = checker::check(&snap, &catalog, &plan);
    prop_assert!(errors.is_empty(), "invalid plan: {errors:#?}\n{}", checker::summary(&plan));
    let (best, placeable, nodes) = optimum(case, &catalog).expect("the solver finishes");
    let placed: usize = plan.nodeclaims.iter().map(|c| c.pods.len()).sum();
    prop_assert_eq!(placed, placeable, "pods placed against pods placeable:\n{}", checker::summary(&plan));
    if best <= 0.0 {
        return Ok(None);
    }
    let ratio = plan.cost_per_hour / best;
    // No valid plan is cheaper than the optimum: one that is says the model misses a rule.
    prop_assert!(
        ratio >= 1.0 - 1e-6,
        "plan ${:.4}/h below the optimum ${best:.4}/h: the model of the rules is wrong\n{}",
        plan.cost_per_hour,
        checker::summary(&plan)
    );
    if ratio > TARGET + 1e-9 && std::env::var_os("DOVETAIL_OPTIMUM_SHOW").is_some() {
        eprintln!("{ratio:.4} {case:?}\n{}  optimum ${best:.4}/h: {nodes:?}", checker::summary(&plan));
    }
    prop_assert!(
        ratio <= ceiling() + 1e-9,
        "plan ${:.4}/h is {:.2}% above the optimum ${best:.4}/h:\n{}",
        plan.cost_per_hour,
        (ratio - 1.0) * 100.0,
        checker::summary(&plan)
    );
    Ok(Some(ratio))
}

#[test]
fn plans_against_the_exact_optimum() {
    let config = ProptestConfig { cases: env("DOVETAIL_OPTIMUM_CASES", 256), ..ProptestConfig::default() };
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&env("DOVETAIL_OPTIMUM_SEED", 1u64).to_le_bytes());
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
    let ratios = Mutex::new(Vec::new());
    let result = runner.run(&case(), |case| {
        if let Some(r) = check(&case)? {
            ratios.lock().unwrap().push(r);
        }
        Ok(())
    });
    let ratios = ratios.into_inner().unwrap();
    if let Some(worst) = ratios.iter().copied().max_by(f64::total_cmp) {
        let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
        let over = ratios.iter().filter(|&&r| r > TARGET + 1e-9).count();
        eprintln!(
            "exact optimum: {} cases with new nodes, plan/optimum worst {worst:.4}, mean {mean:.4}, {over} above {TARGET}",
            ratios.len()
        );
    }
    if let Err(e) = result {
        panic!("{e}");
    }
}
