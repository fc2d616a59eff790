//! Exactly-once launches, end to end over the in-memory world: the reconcilers the Lambdas run,
//! crashed at every port call, fed every message three times, and run two at a time. Afterwards
//! every live instance has exactly one live claim (and the other way round), no claim ever got a
//! second successful CreateFleet, and the pods' demand was covered once: as many claims as a run
//! without faults launches.

// Shared by the simulator's test binaries, each using a part of it.
#[allow(dead_code)]
mod common;

use std::sync::Arc;

use common::{later, reconciler, Plain};
use dovetail_core::nodeclaim::Phase;
use dovetail_core::reconcile::{QueueMessage, Reconciler, Settings};
use dovetail_sim::block_on;
use dovetail_sim::faults::{self, Faults, FaultyCloud, FaultyStore};
use dovetail_sim::fixtures::spot_warning;
use dovetail_sim::world::{SimClock, SimCloud, SimKube, SimQueue, SimStore, World};
use dovetail_sim::{fixtures, invariants};

type Faulty = Reconciler<SimKube, FaultyCloud<SimCloud>, FaultyStore<SimStore>, SimQueue, SimClock>;

fn faulty(w: &World, faults: &Arc<Faults>, holder: &str) -> Faulty {
    faults::crashable(w, faults, holder, |clock| clock)
}

fn plain(w: &World, holder: &str) -> Plain {
    reconciler(w, Settings::new("sim", holder))
}

/// Boots, registers and binds: the world runs while the provisioner handles node doorbells.
fn settle_cluster(w: &World) {
    let r = plain(w, "settle");
    for _ in 0..8 {
        later(w, 30);
        block_on(r.provision()).expect("a clean provisioning pass");
    }
}

fn live_claims(w: &World) -> usize {
    w.lock().store.claims.values().filter(|c| c.phase != Phase::Terminated).count()
}

/// The clean run every faulty one is compared with: how many claims, and how many port calls.
fn clean_run(pods: usize) -> (usize, i64) {
    let w = fixtures::pending(pods);
    let faults = Faults::never();
    block_on(faulty(&w, &faults, "a").provision()).unwrap();
    let calls = faults.calls();
    settle_cluster(&w);
    invariants::assert_hold(&w, &faults, "clean run");
    (live_claims(&w), calls)
}

#[test]
fn a_crash_at_any_port_call_never_launches_twice() {
    let pods = 12;
    let (claims, calls) = clean_run(pods);
    assert!(claims >= 2, "the scenario needs several claims, got {claims}");
    assert!(calls >= 10, "{calls}");
    for n in 0..calls {
        let w = fixtures::pending(pods);
        let faults = Faults::crash_after(n);
        let crashed = block_on(faulty(&w, &faults, "a").provision());
        assert!(crashed.is_err() || n >= calls - 1, "crash at call {n} surfaced: {crashed:?}");
        faults.disarm();
        // The crashed invocation may still hold the lease; it expires, then SQS redelivers.
        later(&w, 130);
        block_on(faulty(&w, &faults, "b").provision()).expect("the redelivery runs clean");
        settle_cluster(&w);
        invariants::assert_hold(&w, &faults, &format!("crash at call {n}"));
        assert_eq!(live_claims(&w), claims, "crash at call {n}: demand covered once");
    }
}

#[test]
fn every_doorbell_delivered_three_times_changes_nothing() {
    let pods = 12;
    let (claims, _) = clean_run(pods);
    let w = fixtures::pending(pods);
    let faults = Faults::never();
    for _ in 0..3 {
        block_on(faulty(&w, &faults, "a").provision()).unwrap();
    }
    later(&w, 1);
    for _ in 0..3 {
        block_on(faulty(&w, &faults, "a").provision()).unwrap();
    }
    settle_cluster(&w);
    invariants::assert_hold(&w, &faults, "triple delivery");
    assert_eq!(live_claims(&w), claims);
}

#[test]
fn concurrent_invocations_launch_once() {
    let pods = 24;
    let (claims, _) = clean_run(pods);
    for round in 0..5 {
        let w = fixtures::pending(pods);
        let faults = Faults::never();
        let (a, b, c) = (faulty(&w, &faults, "a"), faulty(&w, &faults, "b"), faulty(&w, &faults, "c"));
        std::thread::scope(|s| {
            s.spawn(|| block_on(a.provision()).unwrap());
            s.spawn(|| block_on(b.provision()).unwrap());
            s.spawn(|| block_on(c.sweep()).unwrap());
        });
        settle_cluster(&w);
        invariants::assert_hold(&w, &faults, &format!("concurrent round {round}"));
        assert_eq!(live_claims(&w), claims, "round {round}");
    }
}

#[test]
fn a_spot_warning_delivered_three_times_gets_one_replacement() {
    let w = fixtures::pending(8);
    block_on(plain(&w, "a").provision()).unwrap();
    settle_cluster(&w);
    let (victim, instance) = {
        let s = w.lock();
        let c = s.store.claims.values().find(|c| c.phase == Phase::Initialized).expect("an initialized claim").clone();
        (c.name.clone(), c.launch.unwrap().instance_id)
    };
    let before = live_claims(&w);
    let body = spot_warning(&instance);
    let batch: Vec<QueueMessage> = (0..3).map(|i| QueueMessage { id: format!("m{i}"), body: body.clone() }).collect();
    let out = block_on(plain(&w, "i").interrupt(&batch));
    assert!(out.failed.is_empty(), "{:?}", out.report.errors);
    let again = block_on(plain(&w, "i").interrupt(&batch[..1]));
    assert!(again.failed.is_empty(), "{:?}", again.report.errors);
    let s = w.lock();
    let replacements: Vec<&String> = s.store.claims.keys().filter(|k| k.starts_with(&format!("{victim}-r"))).collect();
    assert!(!replacements.is_empty(), "a replacement was launched: {:?}", out.report.decisions);
    assert!(replacements.iter().all(|r| r.ends_with("-r1")), "one replacement set, not three: {replacements:?}");
    let victim_claim = &s.store.claims[&victim];
    assert!(victim_claim.disruption.is_some() && victim_claim.phase >= Phase::Draining);
    assert_eq!(s.store.claims.len(), before + replacements.len());
}

#[test]
fn a_malformed_message_fails_alone() {
    let w = fixtures::pending(2);
    block_on(plain(&w, "a").provision()).unwrap();
    let batch = vec![
        QueueMessage { id: "bad".into(), body: "{\"detail-type\": ".into() },
        QueueMessage { id: "unknown".into(), body: spot_warning("i-not-ours") },
    ];
    let out = block_on(plain(&w, "i").interrupt(&batch));
    assert_eq!(out.failed, vec!["bad".to_string()], "{:?}", out.report);
    assert!(out.report.errors.iter().any(|e| e.contains("message bad")), "{:?}", out.report.errors);
    assert!(out.report.decisions.iter().any(|d| d.why.contains("i-not-ours") && d.why.contains("not Dovetail's")));
}
