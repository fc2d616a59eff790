//! `cargo bench -p dovetail-core --bench scheduler`: Karpenter's benchmark mix (400 synthetic
//! types) and generic pods over the embedded catalog (general-purpose pool, EKS DaemonSets), at the
//! sizes Karpenter publishes; and 5,000 generic pods against a pool whose cpu limit turns most of
//! them away (the pass then tries to grow a claim for each, and repacks the limited pool).

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

fn limited_pool(c: &mut Criterion) {
    let catalog = benchmark::karpenter_catalog(400);
    let mut group = c.benchmark_group("limited-pool");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    // 5,000 pods ask for about 3,400 vCPU: the limits hold a few nodes, a third, and all of them.
    for cores in [200i64, 2_000, 20_000] {
        let mut snap = benchmark::snapshot(benchmark::generic_pods(5_000, benchmark::SEED));
        snap.nodepools[0].limits.insert("cpu".into(), cores * 1000);
        group.bench_with_input(BenchmarkId::from_parameter(format!("{cores}-cpu")), &snap, |b, snap| {
            b.iter(|| schedule(snap, &catalog))
        });
    }
    group.finish();
}

criterion_group!(benches, karpenter_mix, real_catalog_generic, limited_pool);
criterion_main!(benches);
