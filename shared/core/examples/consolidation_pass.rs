//! One consolidation pass over the synthetic 5,000-node / 100,000-pod cluster, printing wall time
//! and peak RSS (`VmHWM`): `cargo run --release -p dovetail-core --example consolidation_pass
//! [nodes] [pods]`.

use dovetail_core::decision::Action;
use dovetail_core::disruption::consolidation::{consolidate, synthetic_cluster};
use std::time::Instant;

fn vm_hwm() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM")).map(|l| l.split_whitespace().skip(1).collect()))
        .unwrap_or_else(|| "n/a".into())
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().expect("a number"));
    let nodes = args.next().unwrap_or(5_000);
    let pods = args.next().unwrap_or(100_000);
    let catalog = dovetail_core::catalog::embedded();
    let t0 = Instant::now();
    let cluster = synthetic_cluster(catalog, nodes, pods, 42);
    println!(
        "generated {} nodes, {} pods in {:.2?} (VmHWM {})",
        cluster.nodes.len(),
        cluster.nodes.iter().map(|n| n.pods.len()).sum::<usize>(),
        t0.elapsed(),
        vm_hwm()
    );
    // Karpenter's default budget: 10% of each pool's nodes.
    let per_pool = |pool: &str| cluster.claims.iter().filter(|c| c.nodepool == pool).count().div_ceil(10);
    let allowed = |pool: &str, _| per_pool(pool);
    let t = Instant::now();
    let decisions = consolidate(&cluster, catalog, &allowed);
    let elapsed = t.elapsed();
    let count = |f: &dyn Fn(&Action) -> bool| decisions.iter().filter(|d| d.action.as_ref().is_some_and(f)).count();
    let writes = count(&|a| matches!(a, Action::WriteClaim(_)));
    let launches = count(&|a| matches!(a, Action::Launch(_)));
    let notes = decisions.iter().filter(|d| d.action.is_none()).count();
    println!("one pass: {elapsed:.2?}; {writes} nodes disrupted, {launches} replacements, {notes} notes; peak RSS (VmHWM) {}", vm_hwm());
    for d in decisions.iter().filter(|d| d.action.is_some()).step_by(97).take(8) {
        println!("  {}", d.why);
    }
    for d in decisions.iter().filter(|d| d.action.is_none()).step_by(53).take(6) {
        println!("  {}", d.why);
    }
}
