//! Plans against the exact optimum. For small random cases — a few pod shapes, one to three
//! NodePools with weights, instance-family and capacity-type requirements and, in some, limits on
//! cpu, memory or nodes; spot and on-demand offerings — a MILP solver finds the cheapest set of
//! new nodes that holds as many pods as can be held under the rules the scheduler follows
//! (`dovetail_core::scheduler::optimum`, the model `dovetail bench` uses too), and the plan must be
//! valid (the independent checker, limits included), place no pod the rules forbid, and cost at
//! most [`CEILING`] times the optimum.
//!
//! The rules are in `scheduler/optimum.rs`: pools are tried by weight (then name), a pod opens a
//! node only in the first pool that can run it unless the pools before it are at their limits,
//! though it may ride on a node of another pool that another pod opened; a node is one type of one
//! pool and holds pods up to what it has free.
//!
//! Issue 20 asks for at most 2% above the optimum on every case, and no pod left pending that the
//! optimum places: [`CEILING`] and [`SHORT_CEILING`] hold the plans to that. These batches meet
//! it because the scheduler packs small batches exactly (`scheduler/exact.rs`, a search under the
//! same rules); repacking (`repack.rs`, `mix.rs`, `rides.rs`) is what larger ones get, and
//! `dovetail bench` measures those against the optimum. `DOVETAIL_OPTIMUM_SHOW=1`, with
//! `--nocapture`, prints each case above 2% or left short, the plan and the optimum's nodes.
//! [`regressions`] keeps cases that were above 2% before exact packing.
//!
//! The cases are the same on every run (seed 1). `DOVETAIL_OPTIMUM_CASES` sets their number (256
//! by default), `DOVETAIL_OPTIMUM_SEED` another seed, `DOVETAIL_OPTIMUM_CEILING` and
//! `DOVETAIL_OPTIMUM_SHORT_CEILING` other ceilings; the run prints the worst and mean
//! plan/optimum ratio and the cases left short.

mod checker;
mod synthetic;

use std::sync::Mutex;

use dovetail_core::catalog::Catalog;
use dovetail_core::labels;
use dovetail_core::model::{NodeClass, NodePool, OwnerKind, Pod, LIMIT_NODES};
use dovetail_core::requirements::Operator;
use dovetail_core::resources::{self, Resources};
use dovetail_core::scheduler::optimum;
use dovetail_core::scheduler::schedule;
use dovetail_core::snapshot::Snapshot;
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
    /// Limits, if any: cores, GiB of memory, nodes (each maybe).
    limits: Option<(Option<i64>, Option<i64>, Option<i64>)>,
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
    let limits = prop::option::weighted(
        0.4,
        (prop::option::of(2..17i64), prop::option::of(8..65i64), prop::option::of(1..5i64)),
    );
    let pool = (0..3i32, 0..3u8, 1..8u8, limits).prop_map(|(weight, capacity, families, limits)| PoolSpec {
        weight,
        capacity,
        families,
        limits,
    });
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
            if let Some((cores, gib, nodes)) = p.limits {
                let named = [
                    (resources::CPU, cores.map(|c| c * 1000)),
                    (resources::MEMORY, gib.map(|g| g * GIB)),
                    (LIMIT_NODES, nodes),
                ];
                pool.limits = named.into_iter().filter_map(|(n, l)| Some((n.to_string(), l?))).collect();
            }
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

/// The most a plan may cost over the optimum: issue 20's target. Over the default cases (256,
/// seed 1), and over 10,000 (`DOVETAIL_OPTIMUM_CASES=10000`, 116 s), every plan is at the
/// optimum; before exact packing, 171 of those 10,000 were above 1.02 (worst 3.0096, mean
/// 1.0050).
const CEILING: f64 = TARGET;

/// [`CEILING`], or `DOVETAIL_OPTIMUM_CEILING` (to measure the distribution past it).
fn ceiling() -> f64 {
    env("DOVETAIL_OPTIMUM_CEILING", CEILING)
}

/// The share of cases whose plan may leave pods pending that the optimum places: none. Over
/// 10,000 cases, none does (before exact packing, 212 cases left 327 pods pending).
const SHORT_CEILING: f64 = 0.0;

/// What issue 20 asks of every case.
const TARGET: f64 = 1.02;

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// What one case measured.
struct Measured {
    /// Plan/optimum over the pods the plan placed; `None` when nothing needs a new node.
    ratio: Option<f64>,
    /// Pods the optimum places that the plan leaves pending (a pool's limits reached).
    short: usize,
}

/// One case: the plan is valid, places no more pods than the optimum, and costs at most
/// [`ceiling`] times the optimum for the pods it placed.
///
/// Where limits leave pods pending, the plan and the optimum may place different pods (the
/// scheduler places the largest first; the optimum places as many as it can, and with as many
/// placed, the cheapest ones), so the cost is compared with the optimum for the pods the plan
/// placed, and the pods it leaves pending that the optimum places are counted apart.
fn check(case: &Case) -> Result<Measured, TestCaseError> {
    let catalog = catalog(case);
    let snap = snapshot(case);
    let plan = schedule(&snap, &catalog);
    let errors = checker::check(&snap, &catalog, &plan);
    prop_assert!(errors.is_empty(), "invalid plan: {errors:#?}\n{}", checker::summary(&plan));
    let optimum = optimum::exact(&snap, &catalog, optimum::Bounds::default()).expect("the solver finishes");
    let placed: Vec<&String> = plan.nodeclaims.iter().flat_map(|c| &c.pods).collect();
    prop_assert!(
        placed.len() <= optimum.placed,
        "the plan places {} pods, the optimum only {}: the model of the rules is wrong\n{}",
        placed.len(),
        optimum.placed,
        checker::summary(&plan)
    );
    let short = optimum.placed - placed.len();
    // With pods left pending, the optimum may hold others in their place: judge the cost against
    // the optimum for the pods the plan placed.
    let optimum = if placed.len() == snap.pods.len() {
        optimum
    } else {
        let mut just_placed = snap.clone();
        just_placed.pods.retain(|p| placed.contains(&&p.key()));
        optimum::exact(&just_placed, &catalog, optimum::Bounds::default()).expect("the solver finishes")
    };
    let optimum::Optimum { cost_per_hour: best, nodes, .. } = optimum;
    if short > 0 && std::env::var_os("DOVETAIL_OPTIMUM_SHOW").is_some() {
        eprintln!(
            "{short} pod(s) short {case:?}\n{}  optimum for them ${best:.4}/h: {nodes:?}",
            checker::summary(&plan)
        );
    }
    if best <= 0.0 {
        return Ok(Measured { ratio: None, short });
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
    Ok(Measured { ratio: Some(ratio), short })
}

#[test]
fn plans_against_the_exact_optimum() {
    let config = ProptestConfig { cases: env("DOVETAIL_OPTIMUM_CASES", 256), ..ProptestConfig::default() };
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&env("DOVETAIL_OPTIMUM_SEED", 1u64).to_le_bytes());
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
    let measured = Mutex::new(Vec::new());
    let result = runner.run(&case(), |case| {
        let m = check(&case)?;
        measured.lock().unwrap().push(m);
        Ok(())
    });
    let measured = measured.into_inner().unwrap();
    let ratios: Vec<f64> = measured.iter().filter_map(|m| m.ratio).collect();
    let short: Vec<usize> = measured.iter().map(|m| m.short).filter(|&n| n > 0).collect();
    if let Some(worst) = ratios.iter().copied().max_by(f64::total_cmp) {
        let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
        let over = ratios.iter().filter(|&&r| r > TARGET + 1e-9).count();
        eprintln!(
            "exact optimum: {} cases with new nodes, plan/optimum worst {worst:.4}, mean {mean:.4}, {over} above {TARGET}",
            ratios.len()
        );
    }
    eprintln!(
        "exact optimum: {} of {} cases leave pending {} pod(s) the optimum places",
        short.len(),
        measured.len(),
        short.iter().sum::<usize>()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    let allowed = env("DOVETAIL_OPTIMUM_SHORT_CEILING", SHORT_CEILING) * measured.len() as f64;
    assert!(
        short.len() as f64 <= allowed + 1e-9,
        "{} cases leave pods pending that the optimum places, more than {allowed:.1} ({SHORT_CEILING} of the cases)",
        short.len()
    );
}

/// Cases the default run found above 2%, or leaving pods pending the optimum places, before small
/// batches were packed exactly: each now at the optimum, placing what it places.
#[test]
fn regressions() {
    let ty =
        |cores, gib_per_core, family, per_core, spot_pct| TypeSpec { cores, gib_per_core, family, per_core, spot_pct };
    let pool = |weight, capacity, families, limits| PoolSpec { weight, capacity, families, limits };
    let shape = |cpu_m, mem_mib, count| ShapeSpec { cpu_m, mem_mib, count };
    let cases = [
        // 3.9% above: pods of the heaviest pool ride on a third node of the next pool, opened by
        // the one pod it alone runs, instead of on four small nodes of their own.
        Case {
            types: vec![ty(4, 8, 0, 34, 60), ty(1, 4, 1, 57, 40), ty(1, 2, 2, 47, 42)],
            pools: vec![
                pool(0, 1, 2, Some((None, Some(58), None))),
                pool(2, 0, 2, Some((None, Some(17), None))),
                pool(1, 0, 5, None),
            ],
            shapes: vec![shape(500, 256, 3), shape(1000, 4096, 4), shape(2000, 2048, 3)],
        },
        // 11.8% above: the limited pool's two nodes are cut differently, so that the pod left over
        // opens a small node in the next pool.
        Case {
            types: vec![
                ty(1, 4, 2, 48, 53),
                ty(8, 2, 1, 33, 67),
                ty(4, 8, 0, 32, 55),
                ty(1, 4, 0, 49, 72),
                ty(4, 8, 1, 58, 37),
            ],
            pools: vec![
                pool(1, 2, 2, Some((None, Some(54), Some(2)))),
                pool(0, 0, 3, Some((Some(3), None, None))),
                pool(0, 2, 1, None),
            ],
            shapes: vec![shape(2000, 6144, 3), shape(500, 4096, 1), shape(1500, 2048, 4)],
        },
        // A pod left pending: the only pool's cpu limit holds three 4-vCPU nodes, which the pass
        // gave one 3-vCPU pod each; two of those pods and the two 1.5-vCPU ones place four.
        Case {
            types: vec![ty(4, 2, 2, 49, 56), ty(1, 8, 2, 36, 58)],
            pools: vec![pool(0, 0, 1, Some((Some(5), None, Some(1)))), pool(1, 1, 5, Some((Some(15), None, None)))],
            shapes: vec![shape(1500, 2048, 1), shape(3000, 256, 3), shape(1500, 256, 1)],
        },
    ];
    for case in cases {
        let measured = check(&case).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(measured.short, 0, "pods left pending that the optimum places: {case:?}");
        let ratio = measured.ratio.expect("the case needs new nodes");
        assert!(ratio <= TARGET + 1e-9, "plan/optimum {ratio:.4}: {case:?}");
    }
}
