//! `cargo bench -p dovetail-core --bench consolidation`: one consolidation pass over the synthetic
//! 5,000-node / 100,000-pod cluster (real embedded types, mixed utilisation, EKS DaemonSets, PDBs,
//! do-not-disrupt and zonally spread pods) under Karpenter's default 10% budgets.

use criterion::{criterion_group, criterion_main, Criterion};
use dovetail_core::disruption::consolidation::{consolidate, synthetic_cluster};
use std::time::Duration;

fn pass(c: &mut Criterion) {
    let catalog = dovetail_core::catalog::embedded();
    let mut group = c.benchmark_group("consolidation");
    group.sample_size(10).measurement_time(Duration::from_secs(30));
    for (nodes, pods) in [(500usize, 10_000usize), (5_000, 100_000)] {
        let cluster = synthetic_cluster(catalog, nodes, pods, 42);
        let per_pool = |pool: &str| cluster.claims.iter().filter(|c| c.nodepool == pool).count().div_ceil(10);
        group.bench_function(format!("{nodes}-nodes-{pods}-pods"), |b| {
            b.iter(|| consolidate(&cluster, catalog, &|pool, _| per_pool(pool)))
        });
    }
    group.finish();
}

criterion_group!(benches, pass);
criterion_main!(benches);
