//! Cost of the embedded catalog: a Lambda cold start pays the first call, the scheduler pays
//! allocatable for every candidate type.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Instant;

use dovetail_core::catalog::{embedded, embedded_with_zones, Zone, DEFAULT_ZONES};
use dovetail_core::model::KubeletConfig;

fn catalog(c: &mut Criterion) {
    // Only the first call parses the TSV, so time it once, before anything else touches it.
    let started = Instant::now();
    let n = embedded().types.len();
    eprintln!("first embedded() call (parse + build {n} types): {:?}", started.elapsed());

    let zones: Vec<Zone> =
        DEFAULT_ZONES.iter().map(|(name, id)| Zone { name: name.to_string(), id: id.to_string() }).collect();
    c.bench_function("embedded_with_zones (3 zones, parsed rows cached)", |b| {
        b.iter(|| embedded_with_zones(black_box(&zones)))
    });

    let kubelet = KubeletConfig::default();
    let types = &embedded().types;
    c.bench_function("allocatable, every type", |b| {
        b.iter(|| types.iter().map(|t| t.allocatable(black_box(&kubelet)).memory).sum::<i64>())
    });
}

criterion_group!(benches, catalog);
criterion_main!(benches);
