//! `dovetail bench`: the scheduler on Karpenter's published benchmark mix (400 synthetic types,
//! five kinds of pods) and on generic pods over the real embedded catalog with EKS's default
//! DaemonSets — once with Karpenter's documented general-purpose NodePool (c/m/r, generation > 2),
//! once with every type allowed (burstable micro types included) — at Karpenter's published sizes.
//!
//! Each size is timed twice: cold, every solve preparing the pools' instance types, offerings and
//! fits afresh (a process's first solve), and warm, every solve reusing what the previous one
//! prepared through one kept `SolveCache` (a warm provisioner's next solve); the two plans must be
//! the same. Each is warmed up once, then timed repeatedly (at least `--samples` runs and about
//! `--seconds` of wall time); the median is reported with the spread, so one noisy run on a
//! shared machine does not decide the figure. `cargo bench -p dovetail-core` runs the same
//! workloads under criterion. `--overlays` prices the catalogs with NodeOverlays first, as `plan`
//! and the functions do.
//!
//! Each row also gives the plan's distance to the exact optimum
//! (`dovetail_core::scheduler::optimum`, the model the exact-optimum property test uses) where
//! the workload is in the model's scope and the solver proves the optimum within
//! `--optimum-seconds`; otherwise the row says why not (topology in the Karpenter mix, a model too
//! large for the solver, the time limit).

use std::borrow::Cow;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use std::process::ExitCode;

use anyhow::{ensure, Result};
use dovetail_api::manifest;
use dovetail_core::benchmark;
use dovetail_core::catalog::Catalog;
use dovetail_core::scheduler::optimum;
use dovetail_core::scheduler::{schedule, schedule_cached, schedule_with, Plan, SolveCache, Strategy};
use dovetail_core::snapshot::Snapshot;
use serde::Serialize;

use crate::progress::Progress;
use crate::{bad_input, output, overlays, Format, OutputArgs};

pub const EXAMPLES: &str = "\
Examples:
  dovetail bench                                       # every suite at 1 to 20,000 pods
  dovetail bench --suite karpenter-mix --sizes 100,1000 --samples 3 --seconds 1
  dovetail bench --sizes 5000 -o json > bench.json
  dovetail bench --suite real-catalog --sizes 1000 --overlays infra/examples/savings-plan";

#[derive(clap::Args)]
pub struct Args {
    /// Pod counts to run.
    #[arg(long, value_delimiter = ',', default_value = "1,100,1000,5000,20000")]
    sizes: Vec<usize>,
    /// Minimum timed runs per size (at least 1).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..))]
    samples: u16,
    /// Target wall time per size, in seconds (more runs are made while time remains).
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Time limit, in seconds, for the exact optimum of each row (0: not tried).
    #[arg(long, default_value_t = 10.0)]
    optimum_seconds: f64,
    /// Which workloads: the Karpenter mix, generic pods on the real catalog with a general-purpose
    /// pool (c/m/r, generation > 2), the same with every instance type allowed, or all three.
    #[arg(long, value_enum, default_value = "all")]
    suite: Suite,
    /// Manifest files or directories whose NodeOverlays price the catalogs (as `dovetail plan`
    /// reads them; their other objects are not used).
    #[arg(long, num_args = 1..)]
    overlays: Vec<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Suite {
    All,
    KarpenterMix,
    RealCatalog,
    RealCatalogAnyType,
}

/// One workload at one size.
#[derive(Serialize)]
struct Row {
    suite: &'static str,
    pods: usize,
    /// Cold: a fresh solve cache every run.
    runs: usize,
    median_ms: f64,
    min_ms: f64,
    max_ms: f64,
    pods_per_second: f64,
    /// Warm: one solve cache kept between runs.
    warm_runs: usize,
    warm_median_ms: f64,
    warm_min_ms: f64,
    warm_max_ms: f64,
    nodes: usize,
    unschedulable: usize,
    cost_per_hour: f64,
    lower_bound_per_hour: f64,
    cost_to_bound: f64,
    /// The same pods packed first-fit-decreasing (Karpenter's way), for comparison.
    ffd_cost_per_hour: f64,
    ffd_nodes: usize,
    /// The exact optimum, where the solver proved it in time.
    optimum_per_hour: Option<f64>,
    /// Plan cost over the optimum's, where both place the same pods.
    cost_to_optimum: Option<f64>,
    /// Why there is no distance to the optimum, when there is none.
    optimum_missing: Option<String>,
}

#[derive(Serialize)]
struct Report {
    rows: Vec<Row>,
    /// Median time at the largest size over the median at 1,000 pods, per suite.
    growth_1k_to_largest: Vec<(String, f64)>,
}

/// Times `solve` (after one warm-up run, whose plan is returned) until `samples` runs and `budget`
/// are both spent (at most 1,000 runs); the durations come sorted.
fn time(samples: u16, budget: Duration, mut solve: impl FnMut() -> Plan) -> (Vec<Duration>, Plan) {
    let plan = solve();
    let started = Instant::now();
    let mut runs = Vec::new();
    while runs.len() < usize::from(samples) || (started.elapsed() < budget && runs.len() < 1000) {
        let t = Instant::now();
        let p = solve();
        runs.push(t.elapsed());
        std::hint::black_box(p);
    }
    runs.sort();
    (runs, plan)
}

/// One workload at one size, cold and warm, and first-fit-decreasing's plan for comparison.
fn measure(suite: &'static str, snap: &Snapshot, catalog: &Catalog, args: &Args) -> Result<Row> {
    let budget = Duration::from_secs_f64(args.seconds.max(0.0));
    let (cold, plan) = time(args.samples, budget, || schedule(snap, catalog));
    let cache = SolveCache::new();
    let (warm, _) = time(args.samples, budget, || schedule_cached(snap, catalog, &cache));
    let warm_plan = schedule_cached(snap, catalog, &cache);
    ensure!(warm_plan == plan, "{suite}, {} pods: the warm plan differs from the cold one", snap.pods.len());
    ensure!(cache.starts() == 1, "{suite}, {} pods: the kept cache was started afresh", snap.pods.len());
    let ffd = schedule_with(snap, catalog, Strategy::FirstFitDecreasing);
    let mut row = row(suite, snap.pods.len(), &cold, &warm, &plan, &ffd);
    match distance_to_optimum(snap, catalog, &plan, args.optimum_seconds) {
        Ok((best, ratio)) => (row.optimum_per_hour, row.cost_to_optimum) = (Some(best), Some(ratio)),
        Err(why) => row.optimum_missing = Some(why),
    }
    Ok(row)
}

/// The optimum's cost and plan/optimum, or why there is none to compare with.
fn distance_to_optimum(snap: &Snapshot, catalog: &Catalog, plan: &Plan, seconds: f64) -> Result<(f64, f64), String> {
    if seconds == 0.0 {
        return Err("not tried (--optimum-seconds 0)".to_string());
    }
    let limit = Duration::try_from_secs_f64(seconds).map_err(|e| format!("--optimum-seconds {seconds}: {e}"))?;
    // A plan that places every pod bounds the optimum's cost.
    let cost = plan.unschedulable.is_empty().then_some(plan.cost_per_hour);
    let best = optimum::exact(snap, catalog, optimum::Bounds { time: Some(limit), cost }).map_err(|e| e.to_string())?;
    let placed: usize = plan.nodeclaims.iter().map(|c| c.pods.len()).sum();
    if placed != best.placed {
        return Err(format!("the plan places {placed} pods, the optimum {}", best.placed));
    }
    let ratio = if best.cost_per_hour > 0.0 { plan.cost_per_hour / best.cost_per_hour } else { 1.0 };
    Ok((best.cost_per_hour, ratio))
}

fn row(suite: &'static str, pods: usize, runs: &[Duration], warm: &[Duration], plan: &Plan, ffd: &Plan) -> Row {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let median = ms(runs[runs.len() / 2]);
    Row {
        suite,
        pods,
        runs: runs.len(),
        median_ms: median,
        min_ms: ms(runs[0]),
        max_ms: ms(runs[runs.len() - 1]),
        pods_per_second: pods as f64 / (median / 1e3),
        warm_runs: warm.len(),
        warm_median_ms: ms(warm[warm.len() / 2]),
        warm_min_ms: ms(warm[0]),
        warm_max_ms: ms(warm[warm.len() - 1]),
        nodes: plan.nodeclaims.len(),
        unschedulable: plan.unschedulable.len(),
        cost_per_hour: plan.cost_per_hour,
        lower_bound_per_hour: plan.lower_bound_per_hour,
        cost_to_bound: if plan.lower_bound_per_hour > 0.0 {
            plan.cost_per_hour / plan.lower_bound_per_hour
        } else {
            1.0
        },
        ffd_cost_per_hour: ffd.cost_per_hour,
        ffd_nodes: ffd.nodeclaims.len(),
        optimum_per_hour: None,
        cost_to_optimum: None,
        optimum_missing: None,
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    let format = args.output.format.unwrap_or(Format::Table);
    let overlays = if args.overlays.is_empty() {
        vec![]
    } else {
        match manifest::load(&args.overlays).and_then(|i| i.overlays()) {
            Ok(o) => o,
            Err(e) => return Ok(bad_input(&e)),
        }
    };
    let workloads = [
        (Suite::KarpenterMix, "karpenter-mix"),
        (Suite::RealCatalog, "real-catalog-generic"),
        (Suite::RealCatalogAnyType, "real-catalog-any-type"),
    ];
    let chosen: Vec<_> = workloads.into_iter().filter(|(s, _)| args.suite == Suite::All || args.suite == *s).collect();
    let total = chosen.len() * args.sizes.len();
    let mut bar = Progress::stderr("bench");
    if format == Format::Table {
        output::print(
            "suite                   size         cold: median time                             warm: median time        throughput  result\n",
        )?;
    }
    let mut rows = Vec::new();
    for (suite, name) in chosen {
        let base = if suite == Suite::KarpenterMix {
            Cow::Owned(benchmark::karpenter_catalog(400))
        } else {
            Cow::Borrowed(dovetail_core::catalog::embedded())
        };
        let catalog = if overlays.is_empty() { base } else { Cow::Owned(overlays::priced(&base, &overlays)) };
        let catalog = catalog.as_ref();
        for &n in &args.sizes {
            bar.relabel(format!("{name} {n} pods"));
            bar.update(rows.len() as f64 / total as f64);
            let snap = match suite {
                Suite::KarpenterMix => benchmark::snapshot(benchmark::karpenter_pods(n, benchmark::SEED)),
                Suite::RealCatalog => benchmark::general_purpose_snapshot(benchmark::generic_pods(n, benchmark::SEED)),
                Suite::RealCatalogAnyType | Suite::All => {
                    benchmark::eks_snapshot(benchmark::generic_pods(n, benchmark::SEED))
                }
            };
            let row = measure(name, &snap, catalog, &args)?;
            bar.clear();
            if format == Format::Table {
                output::print(&table_row(&row))?;
            }
            rows.push(row);
        }
    }
    let mut growth = Vec::new();
    for (_, suite) in workloads {
        let of = |n: usize| rows.iter().find(|r| r.suite == suite && r.pods == n);
        let largest = rows.iter().filter(|r| r.suite == suite).map(|r| r.pods).max();
        if let (Some(k), Some(l)) = (of(1000), largest.and_then(of)) {
            if l.pods > 1000 {
                growth.push((suite.to_string(), l.median_ms / k.median_ms));
            }
        }
    }
    let report = Report { rows, growth_1k_to_largest: growth };
    // The table's rows went out as they were measured; only the growth lines are left.
    let growth_lines = || {
        let lines = report.growth_1k_to_largest.iter();
        lines.map(|(suite, g)| format!("{suite}: time grows {g:.1}x from 1,000 pods to the largest size\n")).collect()
    };
    output::print(&output::render(format, &report, growth_lines)?)?;
    Ok(ExitCode::SUCCESS)
}

/// One measured row of the table.
fn table_row(r: &Row) -> String {
    format!(
        "{:<21} {:>6} pods  {:>9.2} ms (min {:>8.2}, max {:>8.2}, {:>4} runs)  {:>9.2} ms (min {:>8.2})  {:>8.0} pods/s  {:>5} nodes ${:>9.3}/h  bound ${:>9.3}/h  {:.3}x  FFD {:>5} nodes ${:>9.3}/h ({:.3}x ours)  {}{}\n",
        r.suite,
        r.pods,
        r.median_ms,
        r.min_ms,
        r.max_ms,
        r.runs,
        r.warm_median_ms,
        r.warm_min_ms,
        r.pods_per_second,
        r.nodes,
        r.cost_per_hour,
        r.lower_bound_per_hour,
        r.cost_to_bound,
        r.ffd_nodes,
        r.ffd_cost_per_hour,
        if r.cost_per_hour > 0.0 { r.ffd_cost_per_hour / r.cost_per_hour } else { 1.0 },
        match (r.optimum_per_hour, r.cost_to_optimum, &r.optimum_missing) {
            (Some(best), Some(ratio), _) => format!("optimum ${best:>9.3}/h {ratio:.3}x"),
            (_, _, Some(why)) => format!("no optimum: {why}"),
            _ => String::new(),
        },
        if r.unschedulable > 0 { format!("  ({} unschedulable)", r.unschedulable) } else { String::new() }
    )
}
