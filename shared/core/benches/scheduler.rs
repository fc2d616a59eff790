//! `cargo bench -p dovetail-core --bench scheduler`: Karpenter's benchmark mix (400 synthetic
//! types) and generic pods over the embedded catalog (general-purpose pool, EKS DaemonSets), at the
//! sizes Karpenter publishes.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dovetail_core::benchmark;
use dovetail_core::scheduler::schedule;
use std::time::Duration;

fn karpenter_mix(c: &mut Criterion) {
    let catalog = benchmark::karpenter_catalog(400);
    let mut group = c.benchmark_group("karpenter-mix");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    for n in [1usize, 100, 1_000, 5_000, 20_000] {
        let snap = benchmark::snapshot(benchmark::karpenter_pods(n, benchmark::SEED));
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &snap, |b, snap| b.iter(|| schedule(snap, &catalog)));
    }
    group.finish();
}

fn real_catalog_generic(c: &mut Criterion) {
    let catalog = dovetail_core::catalog::embedded();
    let mut group = c.benchmark_group("real-catalog-generic");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    for n in [1usize, 100, 1_000, 5_000, 20_000] {
        let snap = benchmark::general_purpose_snapshot(benchmark::generic_pods(n, benchmark::SEED));
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &snap, |b, snap| b.iter(|| schedule(snap, catalog)));
    }
    group.finish();
}

criterion_group!(benches, karpenter_mix, real_catalog_generic);
criterion_main!(benches);
