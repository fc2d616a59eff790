//! The simulator's benchmark: 24 simulated hours of the built-in `large-cluster` scenario (about
//! 500 nodes at the daily peak) under Dovetail's functions, timed.
//!
//! ```sh
//! cargo run --release -p dovetail-sim --example simulate_day            # large-cluster, 24 h
//! cargo run --release -p dovetail-sim --example simulate_day -- black-friday 24 --compare
//! ```
//!
//! Prints the wall time, the simulated-to-real speed-up, and the run's headline figures. Wall time
//! is measured here, never in the report, so the report stays byte-identical for a seed.

use std::time::{Duration, Instant};

use dovetail_sim::driver::{run, Options, Policy};
use dovetail_sim::report;
use dovetail_sim::scenario::Scenario;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = args.first().map_or("large-cluster", String::as_str);
    let hours: f64 = args.get(1).map_or(24.0, |h| h.parse().expect("hours: a number"));
    let compare = args.iter().any(|a| a == "--compare");
    let scenario = Scenario::builtin(name).unwrap_or_else(|e| panic!("{e}"));
    let mut policies = vec![Policy::Dovetail];
    if compare {
        policies.push(Policy::ClusterAutoscaler);
    }
    let mut runs = Vec::new();
    for policy in policies {
        let started = Instant::now();
        let opts =
            Options { policy, duration: Some(Duration::from_secs_f64(hours * 3600.0)), seed: None, progress: None };
        let r = run(&scenario, opts).unwrap_or_else(|e| panic!("{e}"));
        let wall = started.elapsed();
        let s = report::summarize(&r);
        println!(
            "{name} under {}: {hours} simulated hours in {:.1} s wall ({:.0}× real time); peak {} nodes, \
             {} launched, {} pods, pending p99 {:.0} s, ${:.2}",
            s.policy,
            wall.as_secs_f64(),
            hours * 3600.0 / wall.as_secs_f64(),
            s.peak_nodes,
            s.nodes_launched,
            s.pods_created,
            s.pending.p99_s,
            s.cost
        );
        runs.push(r);
    }
    if compare {
        print!("{}", report::table(&runs));
    }
}
