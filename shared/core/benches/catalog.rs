//! Cost of the embedded catalog: a Lambda cold start pays the first call, the scheduler pays
//! allocatable for every candidate type, and a read whose NodeOverlays changed pays pricing the
//! catalog with them.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Instant;

use dovetail_core::catalog::{embedded, embedded_with_zones, Zone, DEFAULT_ZONES};
use dovetail_core::labels;
use dovetail_core::model::KubeletConfig;
use dovetail_core::overlay::{self, NodeOverlay, PriceChange};
use dovetail_core::requirements::{Operator, Requirement};

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

    // The examples' two overlays: a Savings Plan on four families' on-demand offerings and a
    // licence fee on every amd64 offering.
    let req = |key: &str, values: &[&str]| Requirement::new(key, Operator::In, values).unwrap();
    let overlays = [
        NodeOverlay {
            name: "compute-savings-plan".into(),
            requirements: [
                req(labels::INSTANCE_FAMILY, &["m6i", "m7i", "c6i", "c7i"]),
                req(labels::CAPACITY_TYPE, &["on-demand"]),
            ]
            .into_iter()
            .collect(),
            weight: 10,
            price: Some(PriceChange::Percent(-28.0)),
            capacity: vec![],
        },
        NodeOverlay {
            name: "licensed-ami".into(),
            requirements: [req(labels::ARCH, &["amd64"])].into_iter().collect(),
            weight: 0,
            price: Some(PriceChange::Add(0.08)),
            capacity: vec![],
        },
    ];
    // What any priced copy costs at least: the copy itself.
    c.bench_function("clone of the embedded catalog", |b| b.iter(|| black_box(embedded()).clone().types.len()));
    c.bench_function("overlay::apply, 2 overlays, every type", |b| {
        b.iter(|| overlay::apply(black_box(embedded()), black_box(&overlays)).catalog.types.len())
    });
}

criterion_group!(benches, catalog);
criterion_main!(benches);
