//! Each handler stopped by its deadline in the middle of real work, at every point it can stop:
//! the answer loses nothing (what was not done comes back or is handed on), the next invocation
//! starts at once (the lease is free), and once the functions have caught up the world is the
//! same as without a deadline — every claim launched once, every instance owned by one claim,
//! no pod left pending.
//!
//! Time is what moves a deadline, and the in-memory ports take none, so here each EC2 or
//! DynamoDB call takes one second of the handler's clock: a deadline `k` seconds after the start
//! passes after the `k`-th call.

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;
use dovetail_core::nodeclaim::Phase;
use dovetail_core::reconcile::ports::Clock;
use dovetail_core::reconcile::{Deadline, Reconciler};
use dovetail_core::time::Time;
use dovetail_runtime::handlers;
use dovetail_sim::block_on;
use dovetail_sim::faults::{self, Faults, FaultyCloud, FaultyStore};
use dovetail_sim::world::{SimClock, SimCloud, SimKube, SimQueue, SimStore, World};
use dovetail_sim::{fixtures, invariants};

/// The world's clock, one second later for every cloud or store call made so far.
#[derive(Clone)]
struct Slow {
    clock: SimClock,
    faults: Arc<Faults>,
}

impl Clock for Slow {
    fn now(&self) -> Time {
        self.clock.now().plus(Duration::from_secs(self.faults.calls().max(0) as u64))
    }
}

type Counted<T> = Reconciler<SimKube, FaultyCloud<SimCloud>, FaultyStore<SimStore>, SimQueue, T>;

fn slow(w: &World, faults: &Arc<Faults>, holder: &str) -> Counted<Slow> {
    faults::crashable(w, faults, holder, |clock| Slow { clock, faults: faults.clone() })
}

fn plain(w: &World, faults: &Arc<Faults>, holder: &str) -> Counted<SimClock> {
    faults::crashable(w, faults, holder, |clock| clock)
}

fn sqs(bodies: &[(String, String)]) -> SqsEvent {
    let records: Vec<serde_json::Value> = bodies
        .iter()
        .map(|(id, body)| {
            serde_json::json!({"messageId": id, "body": body, "receiptHandle": format!("r-{id}"),
                "attributes": {}, "messageAttributes": {}, "eventSource": "aws:sqs"})
        })
        .collect();
    serde_json::from_value(serde_json::json!({ "Records": records })).expect("an SQS event")
}

fn doorbell() -> SqsEvent {
    sqs(&[("d1".into(), r#"{"pod":"shop/web-0"}"#.into())])
}

fn failed(response: &aws_lambda_events::event::sqs::SqsBatchResponse) -> Vec<String> {
    response.batch_item_failures.iter().map(|f| f.item_identifier.clone()).collect()
}

fn live_claims(w: &World) -> usize {
    w.lock().store.claims.values().filter(|c| c.phase != Phase::Terminated).count()
}

fn after(start: Time, secs: i64) -> Deadline {
    Deadline::at(start.plus(Duration::from_secs(secs.max(0) as u64)))
}

const PODS: usize = 12;

#[test]
fn the_provisioner_stopped_anywhere_fails_its_batch_frees_the_lease_and_the_next_invocation_finishes() {
    // Without a deadline: how many calls the invocation makes, how many claims it leaves.
    let w = fixtures::pending(PODS);
    let faults = Faults::never();
    let (r, event) = (plain(&w, &faults, "a"), doorbell());
    let clean = block_on(handlers::doorbells("provisioner", &r, &event, Deadline::NONE));
    assert!(failed(&clean.response).is_empty(), "{:?}", clean.report.errors);
    let calls = faults.calls();
    invariants::catch_up(&w, &plain(&w, &faults, "a"), 5);
    invariants::assert_hold(&w, &faults, "without a deadline");
    let claims = live_claims(&w);
    assert!(claims >= 2, "the scenario needs several claims, got {claims}");

    let mut cut_mid_launch = 0;
    for k in 0..=calls {
        let context = format!("deadline after {k} of {calls} calls");
        let w = fixtures::pending(PODS);
        let faults = Faults::never();
        let start = w.now();
        let cut = block_on(handlers::doorbells("provisioner", &slow(&w, &faults, "a"), &doorbell(), after(start, k)));
        if cut.report.unfinished {
            assert_eq!(failed(&cut.response), vec!["d1".to_string()], "{context}: the doorbell comes back");
            if cut.report.launches().count() > 0 {
                cut_mid_launch += 1;
            }
        } else {
            assert!(failed(&cut.response).is_empty(), "{context}: {:?}", cut.report.errors);
        }
        // The redelivered doorbell, at once: the lease is free, not left to expire.
        let next = block_on(handlers::doorbells("provisioner", &plain(&w, &faults, "b"), &doorbell(), Deadline::NONE));
        assert!(failed(&next.response).is_empty(), "{context}: {:?}", next.report.errors);
        assert!(!next.report.unfinished, "{context}");
        assert!(
            !next.report.decisions.iter().any(|d| d.why.contains("another invocation is provisioning")),
            "{context}: the stopped invocation kept the lease"
        );
        invariants::catch_up(&w, &plain(&w, &faults, "b"), 5);
        invariants::assert_hold(&w, &faults, &context);
        assert_eq!(live_claims(&w), claims, "{context}: demand covered once");
    }
    assert!(cut_mid_launch > 0, "some deadline fell between two launches of one invocation");
}

/// A settled world of [`PODS`] pods, and spot warnings for three of its instances.
fn interrupted() -> (World, Arc<Faults>, Vec<String>, SqsEvent) {
    let w = fixtures::pending(PODS);
    let faults = Faults::never();
    invariants::catch_up(&w, &plain(&w, &faults, "settle"), 5);
    let victims: Vec<(String, String)> = {
        let s = w.lock();
        s.store
            .claims
            .values()
            .filter(|c| c.phase == Phase::Initialized)
            .take(3)
            .map(|c| (c.name.clone(), c.launch.as_ref().expect("launched").instance_id.clone()))
            .collect()
    };
    assert_eq!(victims.len(), 3, "three initialized claims");
    let bodies: Vec<(String, String)> = victims
        .iter()
        .enumerate()
        .map(|(i, (_, instance))| (format!("w{i}"), fixtures::spot_warning(instance)))
        .collect();
    (w, faults, victims.into_iter().map(|(claim, _)| claim).collect(), sqs(&bodies))
}

/// Each victim was drained and ended, and the invariants hold. Returns the names of every claim
/// there ever was, which a run without a deadline must match: nothing replaced twice.
fn assert_interruptions_done(w: &World, faults: &Faults, victims: &[String], context: &str) -> Vec<String> {
    invariants::assert_hold(w, faults, context);
    let s = w.lock();
    for v in victims {
        let claim = &s.store.claims[v];
        assert!(claim.disruption.is_some(), "{context}: {v} was never disrupted");
        assert_eq!(claim.phase, Phase::Terminated, "{context}: {v}'s drain never finished");
    }
    s.store.claims.keys().cloned().collect()
}

#[test]
fn the_interruption_function_stopped_anywhere_returns_what_it_did_not_reach_and_hands_drains_on() {
    let (w, faults, victims, event) = interrupted();
    let before = faults.calls();
    let clean = block_on(handlers::interruptions("interruption", &plain(&w, &faults, "i"), &event, Deadline::NONE));
    assert!(failed(&clean.response).is_empty(), "{:?}", clean.report.errors);
    let calls = faults.calls() - before;
    invariants::catch_up(&w, &plain(&w, &faults, "i"), 10);
    let all = assert_interruptions_done(&w, &faults, &victims, "without a deadline");

    let mut returned = 0;
    for k in 0..=calls {
        let context = format!("deadline after {k} of {calls} calls");
        let (w, faults, victims, event) = interrupted();
        let start = w.now().plus(Duration::from_secs(faults.calls() as u64));
        let cut = block_on(handlers::interruptions("interruption", &slow(&w, &faults, "i"), &event, after(start, k)));
        let back = failed(&cut.response);
        assert!(
            !back.is_empty()
                || !cut.report.unfinished
                || cut.report.decisions.iter().any(|d| d.why.contains("drain goes on")),
            "{context}: stopped, yet nothing came back or was handed on: {:?}",
            cut.report.decisions
        );
        returned += back.len();
        // What came back is delivered again (after the visibility timeout, here at once).
        let again: Vec<(String, String)> = event
            .records
            .iter()
            .filter(|r| back.contains(r.message_id.as_ref().expect("an id")))
            .map(|r| (r.message_id.clone().unwrap(), r.body.clone().unwrap()))
            .collect();
        if !again.is_empty() {
            let redelivered = block_on(handlers::interruptions(
                "interruption",
                &plain(&w, &faults, "j"),
                &sqs(&again),
                Deadline::NONE,
            ));
            assert!(failed(&redelivered.response).is_empty(), "{context}: {:?}", redelivered.report.errors);
        }
        invariants::catch_up(&w, &plain(&w, &faults, "j"), 10);
        assert_eq!(assert_interruptions_done(&w, &faults, &victims, &context), all, "{context}: the same claims");
    }
    assert!(returned > 0, "some deadline left messages unreached");
}

#[test]
fn the_sweeper_stopped_anywhere_leaves_the_rest_to_its_next_tick() {
    // A settled world whose workload then shrinks: the sweep has empty nodes to consolidate.
    let shrunk = || {
        let w = fixtures::pending(PODS);
        let faults = Faults::never();
        invariants::catch_up(&w, &plain(&w, &faults, "settle"), 5);
        {
            let mut s = w.lock();
            for i in 3..PODS {
                s.stop_pod(&format!("shop/web-{i}"), 0);
            }
            s.settle();
        }
        w.advance(w.now().plus(Duration::from_secs(60)));
        (w, faults)
    };
    let (w, faults) = shrunk();
    let before = (faults.calls(), live_claims(&w));
    let clean = block_on(handlers::sweep("sweeper", &plain(&w, &faults, "s"), Deadline::NONE)).expect("a sweep");
    assert!(clean.terminations() + clean.decisions.iter().filter(|d| d.action.is_some()).count() > 0);
    let calls = faults.calls() - before.0;
    invariants::catch_up(&w, &plain(&w, &faults, "s"), 10);
    invariants::assert_hold(&w, &faults, "without a deadline");
    let claims = live_claims(&w);
    assert!(claims < before.1, "the sweep consolidated: {} → {claims}", before.1);

    let mut stopped = 0;
    for k in 0..=calls {
        let context = format!("deadline after {k} of {calls} calls");
        let (w, faults) = shrunk();
        let start = w.now().plus(Duration::from_secs(faults.calls() as u64));
        let cut = block_on(handlers::sweep("sweeper", &slow(&w, &faults, "s"), after(start, k))).expect("a sweep");
        stopped += usize::from(cut.unfinished);
        invariants::catch_up(&w, &plain(&w, &faults, "t"), 10);
        invariants::assert_hold(&w, &faults, &context);
        assert_eq!(live_claims(&w), claims, "{context}: the same consolidation in the end");
    }
    assert!(stopped > 0, "some deadline stopped the sweep");
}
