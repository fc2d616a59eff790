//! The fault soak: many seeds of `dovetail_sim::chaos`, each a world faulted at every port
//! and then checked, summed up.
//!
//! ```sh
//! cargo run --release -p dovetail-sim --example fault-soak -- [--seeds 10000] [--from 0] [--rate 0.1]
//! ```
//!
//! Exits 1 if any seed broke an invariant, printing which and how.

use std::collections::BTreeMap;
use std::time::Instant;

use dovetail_sim::chaos::run;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: &str| -> String {
        args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or_else(|| default.into())
    };
    let seeds: u64 = arg("--seeds", "10000").parse().expect("--seeds: a count");
    let from: u64 = arg("--from", "0").parse().expect("--from: a seed");
    let rate: f64 = arg("--rate", "0.1").parse().expect("--rate: a probability");
    let started = Instant::now();
    let mut kinds: BTreeMap<&'static str, u64> = BTreeMap::new();
    let (mut calls, mut most, mut claims, mut warnings, mut ended, mut dead) = (0i64, 0i64, 0usize, 0usize, 0usize, 0);
    let mut overrides = 0;
    let mut broken = Vec::new();
    for seed in from..from + seeds {
        let o = run(seed, rate);
        for (k, n) in &o.injected {
            *kinds.entry(k).or_default() += n;
        }
        calls += o.calls;
        most = most.max(o.most_calls_in_an_invocation);
        claims += o.claims;
        warnings += o.warnings;
        ended += o.ended;
        dead += o.dead_letters.len();
        overrides += o.pdb_overrides;
        if !o.violations.is_empty() {
            println!("seed {seed}:\n    {}", o.violations.join("\n    "));
            broken.push(seed);
        }
    }
    let injected: u64 = kinds.values().sum();
    println!("seeds {from}..{}, fault rate {rate}: {:.1} s", from + seeds, started.elapsed().as_secs_f64());
    println!("  port calls {calls}, faults injected {injected}; most calls in one invocation {most}");
    println!("  claims {claims} ({ended} ended), spot warnings {warnings}, dead letters {dead}");
    println!("  pods removed past their budget at a drain's deadline {overrides}");
    for (k, n) in &kinds {
        println!("    {n:>9}  {k}");
    }
    println!("  seeds that broke an invariant: {} {:?}", broken.len(), broken);
    if !broken.is_empty() {
        std::process::exit(1);
    }
}
