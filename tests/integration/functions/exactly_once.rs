//! Exactly-once launches with the real adapters on moto (the simulator's tests do the same over
//! in-memory ports, at larger scale): a crash at every port call of a provisioning run, every
//! doorbell delivered three times, two provisioners and a sweeper at once. Afterwards every live
//! instance belongs to exactly one live claim, no claim got two successful CreateFleet calls, and
//! as many claims cover the pods as in a run without faults.

use std::sync::Arc;
use std::time::Duration;

use dovetail_aws::{DynamoStore, Ec2Cloud, SqsQueue};
use dovetail_core::reconcile::{Deadline, Reconciler};
use dovetail_runtime::handlers;
use dovetail_sim::faults::{Faults, FaultyCloud, FaultyStore};
use dovetail_sim::world::{SimClock, SimKube};

use super::{doorbell, Rig};

type Faulty = Reconciler<SimKube, FaultyCloud<Ec2Cloud>, FaultyStore<DynamoStore>, SqsQueue, SimClock>;

/// A new process's reconciler (fresh caches), its cloud and store calls counted and crashable.
fn faulty(rig: &Rig, faults: &Arc<Faults>, holder: &str) -> Faulty {
    rig.reconciler_with(FaultyCloud(rig.aws.cloud(), faults.clone()), FaultyStore(rig.store(), faults.clone()), holder)
}

fn assert_one_launch_each(faults: &Faults, context: &str) {
    for (claim, n) in faults.launches() {
        assert_eq!(n, 1, "{context}: claim {claim} got {n} successful CreateFleet calls");
    }
}

/// The run every faulty one is compared with: claims launched, port calls made.
async fn clean_run() -> (usize, i64) {
    let rig = Rig::new(&["on-demand"]).await;
    let faults = Faults::never();
    faulty(&rig, &faults, "a").provision().await.unwrap();
    rig.assert_exactly_once("clean run").await;
    (rig.live_claims().await.len(), faults.calls())
}

#[tokio::test]
async fn a_crash_at_any_port_call_never_launches_twice() {
    let (claims, calls) = clean_run().await;
    assert!(calls >= 8, "{calls}");
    for n in 0..calls {
        let rig = Rig::new(&["on-demand"]).await;
        let faults = Faults::crash_after(n);
        let crashed = faulty(&rig, &faults, "a").provision().await;
        assert!(crashed.is_err() || n >= calls - 1, "crash at call {n} surfaced: {crashed:?}");
        faults.disarm();
        // The crashed process may still hold the lease; it lapses, then SQS redelivers.
        rig.cluster.advance(rig.cluster.now().plus(Duration::from_secs(130)));
        faulty(&rig, &faults, "b").provision().await.expect("the redelivery runs clean");
        let context = format!("crash at call {n} of {calls}");
        rig.assert_exactly_once(&context).await;
        assert_one_launch_each(&faults, &context);
        assert_eq!(rig.live_claims().await.len(), claims, "{context}: demand covered once");
    }
}

#[tokio::test]
async fn every_doorbell_three_times_and_concurrent_invocations_launch_once() {
    let (claims, _) = clean_run().await;

    let rig = Rig::new(&["on-demand"]).await;
    let faults = Faults::never();
    let bodies: Vec<String> = (0..6).flat_map(|i| std::iter::repeat_n(doorbell(&format!("ledger-{i}")), 3)).collect();
    rig.send(&rig.doorbell_url, &bodies).await;
    let (a, b, sweeper) = (faulty(&rig, &faults, "a"), faulty(&rig, &faults, "b"), faulty(&rig, &faults, "s"));
    // Two provisioners take batches of the same doorbells while the sweeper runs.
    let first = rig.receive(&rig.doorbell_url).await;
    let second = rig.receive(&rig.doorbell_url).await;
    // Boxed: three handlers' states side by side overflow a debug build's 2 MiB test stack.
    let (x, y, z) = tokio::join!(
        Box::pin(handlers::doorbells("provisioner", &a, &first, Deadline::NONE)),
        Box::pin(handlers::doorbells("provisioner", &b, &second, Deadline::NONE)),
        Box::pin(handlers::sweep("sweeper", &sweeper, Deadline::NONE))
    );
    assert!(x.response.batch_item_failures.is_empty() && y.response.batch_item_failures.is_empty());
    z.expect("the sweep ran");
    rig.delete_succeeded(&rig.doorbell_url, &first, &[]).await;
    rig.delete_succeeded(&rig.doorbell_url, &second, &[]).await;
    // The rest of the triplicated doorbells, one batch after another.
    loop {
        let batch = rig.receive(&rig.doorbell_url).await;
        if batch.records.is_empty() {
            break;
        }
        let handled = handlers::doorbells("provisioner", &a, &batch, Deadline::NONE).await;
        assert!(handled.response.batch_item_failures.is_empty(), "{:?}", handled.report.errors);
        rig.delete_succeeded(&rig.doorbell_url, &batch, &[]).await;
    }
    rig.assert_exactly_once("triple delivery, concurrent invocations").await;
    assert_one_launch_each(&faults, "triple delivery, concurrent invocations");
    assert_eq!(rig.live_claims().await.len(), claims, "demand covered once");
}
