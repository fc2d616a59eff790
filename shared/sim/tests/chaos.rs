//! The seeded fault runs (see `dovetail_sim::chaos`): every seed's world, faulted at every
//! port for ten minutes and then left to catch up, ends with every invariant holding. CI runs
//! these seeds; the soak (`cargo run --release -p dovetail-sim --example fault-soak`) thousands.

use std::collections::BTreeMap;

use dovetail_sim::chaos::run;

/// Seeds per test run: enough that every kind of fault is met many times.
const SEEDS: u64 = 200;
const RATE: f64 = 0.1;

#[test]
fn every_seed_ends_with_the_invariants_holding_and_every_kind_of_fault_was_met() {
    let mut kinds: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut failures = Vec::new();
    for seed in 0..SEEDS {
        let outcome = run(seed, RATE);
        for (k, n) in &outcome.injected {
            *kinds.entry(k).or_default() += n;
        }
        if !outcome.violations.is_empty() {
            failures.push(format!("seed {seed}:\n    {}", outcome.violations.join("\n    ")));
        }
    }
    assert!(failures.is_empty(), "{} of {SEEDS} seeds broke invariants:\n  {}", failures.len(), failures.join("\n  "));
    for kind in [
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "ConditionalCheckFailedException",
        "429 Too Many Requests",
        "409 Conflict",
        "410 Gone (watch expired)",
        "500 Internal Server Error",
        "ThrottlingException (SQS)",
        "InsufficientInstanceCapacity",
        "connection reset after the request took effect",
        "timeout before the request took effect",
    ] {
        assert!(kinds.get(kind).copied().unwrap_or(0) > 0, "{kind} was never injected: {kinds:?}");
    }
}

#[test]
fn the_checker_sees_an_instance_without_its_claim_a_pod_left_pending_and_a_budget_broken() {
    use dovetail_core::model::Pod;
    use dovetail_core::reconcile::ports::Kube;
    use dovetail_core::reconcile::{Ports, Reconciler, Settings};
    use dovetail_core::resources::Resources;
    use dovetail_sim::block_on;
    use dovetail_sim::faults::Faults;
    use dovetail_sim::{fixtures, invariants};

    let w = fixtures::pending(4);
    let p = w.ports();
    let ports = Ports { kube: p.kube, cloud: p.cloud, store: p.store, queue: p.queue, clock: p.clock };
    invariants::catch_up(&w, &Reconciler::new(ports, Settings::new("sim", "check")), 5);
    let faults = Faults::never();
    assert_eq!(invariants::violations(&w, &faults), Vec::<String>::new());
    {
        let mut s = w.lock();
        let name = s.store.claims.keys().next().expect("a claim").clone();
        s.store.claims.remove(&name);
        s.create_pod(Pod::new("shop", "huge", Resources::new(1_000_000, 1 << 40)), None, None);
        s.settle();
    }
    // A pod under a budget that allows no disruption, deleted with no drain behind it.
    fixtures::under_budget(&w, 0);
    block_on(w.ports().kube.delete_pod("shop", "web-1", 30)).expect("deleted");
    let v = invariants::violations(&w, &faults);
    assert!(v.iter().any(|v| v.contains("owned by 0 live claims")), "{v:?}");
    assert!(v.iter().any(|v| v.contains("pod shop/web-1 was removed") && v.contains("PodDisruptionBudget")), "{v:?}");
    assert!(v.iter().any(|v| v.contains("pods still pending") && v.contains("shop/huge")), "{v:?}");
}
