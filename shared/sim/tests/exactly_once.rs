//! Exactly-once launches, end to end over the in-memory world: the reconcilers the Lambdas run,
//! crashed at every port call, fed every message three times, and run two at a time. Afterwards
//! every live instance has exactly one live claim (and the other way round), no claim ever got a
//! second successful CreateFleet, and the pods' demand was covered once: as many claims as a run
//! without faults launches.

// Shared by the simulator's test binaries, each using a part of it.
#[allow(dead_code)]
mod common;

use std::sync::Arc;

use common::{later, reconciler, spot_warning, Plain};
use dovetail_core::model::{NodeClass, NodePool, OwnerKind, Pod};
use dovetail_core::nodeclaim::{NodeClaim, Phase};
use dovetail_core::reconcile::{Ports, QueueMessage, Reconciler, Settings};
use dovetail_core::resources::Resources;
use dovetail_sim::block_on;
use dovetail_sim::faults::{Faults, FaultyCloud, FaultyStore};
use dovetail_sim::world::{SimClock, SimCloud, SimKube, SimQueue, SimStore, World, WorldConfig};

const GIB: i64 = 1 << 30;

type Faulty = Reconciler<SimKube, FaultyCloud<SimCloud>, FaultyStore<SimStore>, SimQueue, SimClock>;

fn faulty(w: &World, faults: &Arc<Faults>, holder: &str) -> Faulty {
    let p = w.ports();
    let ports = Ports {
        kube: p.kube,
        cloud: FaultyCloud(p.cloud, faults.clone()),
        store: FaultyStore(p.store, faults.clone()),
        queue: p.queue,
        clock: p.clock,
    };
    Reconciler::new(ports, Settings::new("sim", holder))
}

fn plain(w: &World, holder: &str) -> Plain {
    reconciler(w, Settings::new("sim", holder))
}

/// A quiet world (no spot interruptions) with one pool and `pods` pending pods of mixed sizes.
fn world(pods: usize) -> World {
    let w = World::new(WorldConfig { interruption_multiplier: 0.0, ..WorldConfig::default() });
    {
        let mut s = w.lock();
        s.kube.nodepools.push(NodePool::new("default", "default"));
        s.kube.nodeclasses.push(NodeClass { name: "default".into(), ..NodeClass::default() });
        for i in 0..pods {
            let cpu = [250, 500, 1000, 2000][i % 4];
            let mut p = Pod::new("shop", &format!("web-{i}"), Resources::new(cpu, (1 + (i as i64 % 3)) * GIB));
            p.owner = OwnerKind::ReplicaSet;
            s.create_pod(p, None, None);
        }
        s.settle();
    }
    w
}

/// Boots, registers and binds: the world runs while the provisioner handles node doorbells.
fn settle_cluster(w: &World) {
    let r = plain(w, "settle");
    for _ in 0..8 {
        later(w, 30);
        block_on(r.provision()).expect("a clean provisioning pass");
    }
}

/// Live instances and live claims pair up one to one; no claim had two successful launches.
fn assert_exactly_once(w: &World, faults: &Faults, context: &str) {
    for (claim, n) in faults.launches() {
        assert_eq!(n, 1, "{context}: claim {claim} got {n} successful CreateFleet calls");
    }
    let s = w.lock();
    let live: Vec<&NodeClaim> = s.store.claims.values().filter(|c| c.phase != Phase::Terminated).collect();
    let running: Vec<_> =
        s.cloud.instances.values().filter(|i| matches!(i.instance.state.as_str(), "pending" | "running")).collect();
    for i in &running {
        let owners: Vec<&&NodeClaim> =
            live.iter().filter(|c| c.launch.as_ref().is_some_and(|l| l.instance_id == i.instance.id)).collect();
        assert_eq!(owners.len(), 1, "{context}: instance {} is owned by {} claims", i.instance.id, owners.len());
    }
    for c in &live {
        assert!(c.launch.is_some(), "{context}: claim {} never recorded its instance", c.name);
        let id = &c.launch.as_ref().unwrap().instance_id;
        assert!(running.iter().any(|i| &i.instance.id == id), "{context}: claim {} has no running instance", c.name);
    }
    let pending = s.kube.provisionable().count();
    assert_eq!(pending, 0, "{context}: {pending} pods still pending");
}

fn live_claims(w: &World) -> usize {
    w.lock().store.claims.values().filter(|c| c.phase != Phase::Terminated).count()
}

/// The clean run every faulty one is compared with: how many claims, and how many port calls.
fn clean_run(pods: usize) -> (usize, i64) {
    let w = world(pods);
    let faults = Faults::never();
    block_on(faulty(&w, &faults, "a").provision()).unwrap();
    let calls = faults.calls();
    settle_cluster(&w);
    assert_exactly_once(&w, &faults, "clean run");
    (live_claims(&w), calls)
}

#[test]
fn a_crash_at_any_port_call_never_launches_twice() {
    let pods = 12;
    let (claims, calls) = clean_run(pods);
    assert!(claims >= 2, "the scenario needs several claims, got {claims}");
    assert!(calls >= 10, "{calls}");
    for n in 0..calls {
        let w = world(pods);
        let faults = Faults::crash_after(n);
        let crashed = block_on(faulty(&w, &faults, "a").provision());
        assert!(crashed.is_err() || n >= calls - 1, "crash at call {n} surfaced: {crashed:?}");
        faults.disarm();
        // The crashed invocation may still hold the lease; it expires, then SQS redelivers.
        later(&w, 130);
        block_on(faulty(&w, &faults, "b").provision()).expect("the redelivery runs clean");
        settle_cluster(&w);
        assert_exactly_once(&w, &faults, &format!("crash at call {n}"));
        assert_eq!(live_claims(&w), claims, "crash at call {n}: demand covered once");
    }
}

#[test]
fn every_doorbell_delivered_three_times_changes_nothing() {
    let pods = 12;
    let (claims, _) = clean_run(pods);
    let w = world(pods);
    let faults = Faults::never();
    for _ in 0..3 {
        block_on(faulty(&w, &faults, "a").provision()).unwrap();
    }
    later(&w, 1);
    for _ in 0..3 {
        block_on(faulty(&w, &faults, "a").provision()).unwrap();
    }
    settle_cluster(&w);
    assert_exactly_once(&w, &faults, "triple delivery");
    assert_eq!(live_claims(&w), claims);
}

#[test]
fn concurrent_invocations_launch_once() {
    let pods = 24;
    let (claims, _) = clean_run(pods);
    for round in 0..5 {
        let w = world(pods);
        let faults = Faults::never();
        let (a, b, c) = (faulty(&w, &faults, "a"), faulty(&w, &faults, "b"), faulty(&w, &faults, "c"));
        std::thread::scope(|s| {
            s.spawn(|| block_on(a.provision()).unwrap());
            s.spawn(|| block_on(b.provision()).unwrap());
            s.spawn(|| block_on(c.sweep()).unwrap());
        });
        settle_cluster(&w);
        assert_exactly_once(&w, &faults, &format!("concurrent round {round}"));
        assert_eq!(live_claims(&w), claims, "round {round}");
    }
}

#[test]
fn a_spot_warning_delivered_three_times_gets_one_replacement() {
    let w = world(8);
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
    let w = world(2);
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
