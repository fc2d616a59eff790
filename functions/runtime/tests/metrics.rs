//! The EMF documents the handlers publish describe the cluster after their actions: a
//! provisioner pass that launches counts its claims among the NodeClaims and their cost in the
//! same invocation's metrics, and an interruption is counted by kind and by disruption reason.

use aws_lambda_events::event::sqs::SqsEvent;
use dovetail_core::nodeclaim::Phase;
use dovetail_core::reconcile::{Deadline, Ports, Reconciler, Settings};
use dovetail_runtime::handlers;
use dovetail_runtime::metrics::{self, value};
use dovetail_sim::world::{SimClock, SimCloud, SimKube, SimQueue, SimStore, World};
use dovetail_sim::{block_on, fixtures};
use serde_json::json;

fn reconciler(w: &World) -> Reconciler<SimKube, SimCloud, SimStore, SimQueue, SimClock> {
    let p = w.ports();
    let ports = Ports { kube: p.kube, cloud: p.cloud, store: p.store, queue: p.queue, clock: p.clock };
    Reconciler::new(ports, Settings::new("prod", "test"))
}

fn sqs(id: &str, body: &str) -> SqsEvent {
    serde_json::from_value(json!({"Records": [{"messageId": id, "body": body, "receiptHandle": "r",
        "attributes": {}, "messageAttributes": {}, "eventSource": "aws:sqs"}]}))
    .expect("an SQS event")
}

fn as_f64(v: Option<&serde_json::Value>) -> f64 {
    v.and_then(serde_json::Value::as_f64).expect("a numeric metric")
}

#[test]
fn a_launch_counts_in_its_own_invocations_claims_and_cost() {
    let w = fixtures::pending(12);
    // The pods were created at the world's start; the provisioner wakes 90 s later.
    let created = w.lock().now;
    w.advance(created.plus(std::time::Duration::from_secs(90)));
    let handled =
        block_on(handlers::doorbells("provisioner", &reconciler(&w), &sqs("d1", r#"{"pod":"a/b"}"#), Deadline::NONE));
    assert!(handled.report.errors.is_empty(), "{:?}", handled.report.errors);
    let docs = &handled.metrics;
    let launched = handled.report.launches().count();
    assert!(launched >= 2, "the scenario launches several claims, got {launched}");
    let (claims, price): (usize, f64) = {
        let s = w.lock();
        let live: Vec<_> = s.store.claims.values().filter(|c| c.phase == Phase::Launched).collect();
        (live.len(), live.iter().map(|c| c.launch.as_ref().expect("launched").price).sum())
    };
    assert_eq!(claims, launched, "every launch recorded");
    let pool = handled.report.launches().next().expect("a launch").nodepool.clone();
    assert_eq!(value(docs, &metrics::NODECLAIMS_CREATED, &[("NodePool", &pool)]), Some(&json!(launched)));
    assert_eq!(value(docs, &metrics::NODECLAIMS, &[("State", "Launched")]), Some(&json!(launched)));
    assert_eq!(value(docs, &metrics::NODECLAIMS, &[("State", "Launching")]), Some(&json!(0)));
    let cost = as_f64(value(docs, &metrics::FLEET_COST, &[]));
    assert!(price > 0.0 && (cost - price).abs() < 1e-9, "$/h after the launches: {cost}, launched {price}");
    // The pods stay pending until their nodes register (as Kubernetes shows them).
    assert_eq!(value(docs, &metrics::PODS_PENDING, &[]), Some(&json!(12)));
    assert_eq!(value(docs, &metrics::PODS_UNBOUND_TIME, &[]), Some(&json!(90.0)), "the oldest pending pod's age");
    assert_eq!(value(docs, &metrics::LAUNCH_FAILURES, &[("Error", "InsufficientInstanceCapacity")]), Some(&json!(0)));
}

#[test]
fn a_spot_interruption_is_counted_by_kind_and_disruption_reason() {
    let w = fixtures::pending(12);
    let r = reconciler(&w);
    dovetail_sim::invariants::catch_up(&w, &r, 5);
    let instance = {
        let s = w.lock();
        let c = s.store.claims.values().find(|c| c.phase == Phase::Initialized).expect("an initialized claim");
        c.launch.as_ref().expect("launched").instance_id.clone()
    };
    let event = sqs("w1", &fixtures::spot_warning(&instance));
    let handled = block_on(handlers::interruptions("interruption", &r, &event, Deadline::NONE));
    assert!(handled.response.batch_item_failures.is_empty(), "{:?}", handled.report.errors);
    let docs = &handled.metrics;
    assert_eq!(value(docs, &metrics::INTERRUPTIONS, &[("MessageType", "spot_interrupted")]), Some(&json!(1)));
    assert_eq!(value(docs, &metrics::NODECLAIMS_DISRUPTED, &[("Reason", "SpotInterrupted")]), Some(&json!(1)));
    let draining =
        w.lock().store.claims.values().filter(|c| c.disruption.is_some() && c.phase != Phase::Terminated).count();
    let shown: u64 = ["Draining", "Terminating"]
        .iter()
        .map(|s| value(docs, &metrics::NODECLAIMS, &[("State", s)]).and_then(|v| v.as_u64()).unwrap_or(0))
        .sum();
    assert_eq!(shown as usize, draining, "the disrupted claim is shown in its state after the invocation");
    assert!(draining >= 1);
}
