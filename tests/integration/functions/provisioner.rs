//! The provisioner's handler on moto: doorbells in, one CreateFleet per claim, claims recorded.

use std::time::Duration;

use dovetail_core::catalog::CapacityType;
use dovetail_core::reconcile::Deadline;
use dovetail_runtime::handlers;

use super::{doorbell, Rig};

/// Doorbells for the example's pods, delivered as Lambda would, then the handler.
async fn ring(rig: &Rig) -> handlers::Handled<aws_lambda_events::event::sqs::SqsBatchResponse> {
    let bodies: Vec<String> = (0..3).map(|i| doorbell(&format!("ledger-{i}"))).collect();
    rig.send(&rig.doorbell_url, &bodies).await;
    let event = rig.receive(&rig.doorbell_url).await;
    assert_eq!(event.records.len(), 3);
    let handled = handlers::doorbells("provisioner", &rig.reconciler("provisioner-1"), &event, Deadline::NONE).await;
    rig.delete_succeeded(&rig.doorbell_url, &event, &[]).await;
    handled
}

#[tokio::test]
async fn doorbells_launch_on_demand_capacity_and_record_it() {
    let rig = Rig::new(&["on-demand"]).await;
    let handled = ring(&rig).await;
    assert!(handled.response.batch_item_failures.is_empty(), "{:?}", handled.report.errors);
    assert!(handled.report.errors.is_empty(), "{:?}", handled.report.errors);
    assert_eq!(handled.report.pending_pods, 6);
    let launched = handled.report.launches().count();
    assert!(launched >= 1, "{:?}", handled.report.decisions);

    let claims = rig.live_claims().await;
    assert_eq!(claims.len(), launched, "one claim per launch decision");
    let instances = rig.instances().await;
    assert_eq!(instances.len(), claims.len(), "one instance per claim: {instances:?}");
    for c in &claims {
        let launch = c.launch.as_ref().expect("instance recorded");
        assert_eq!(launch.capacity_type, CapacityType::OnDemand, "{}", c.name);
        assert!(launch.instance_type.contains('g'), "an arm64 (Graviton) type: {}", launch.instance_type);
    }
    for (id, _, lifecycle) in &instances {
        assert_eq!(lifecycle, &None, "{id} is on demand");
    }
    rig.assert_exactly_once("on-demand launch").await;

    // A second batch of doorbells finds the capacity on its way: nothing more is launched.
    let again = ring(&rig).await;
    assert_eq!(again.report.launches().count(), 0, "{:?}", again.report.decisions);
    assert_eq!(rig.instances().await.len(), instances.len());
}

#[tokio::test]
async fn a_spot_pool_launches_spot_instances() {
    let rig = Rig::new(&["spot"]).await;
    let handled = ring(&rig).await;
    assert!(handled.report.errors.is_empty(), "{:?}", handled.report.errors);
    let claims = rig.live_claims().await;
    assert!(!claims.is_empty());
    for c in &claims {
        assert_eq!(c.launch.as_ref().unwrap().capacity_type, CapacityType::Spot, "{}", c.name);
    }
    let instances = rig.instances().await;
    assert_eq!(instances.len(), claims.len());
    for (id, _, lifecycle) in &instances {
        assert_eq!(lifecycle.as_deref(), Some("spot"), "{id} is a spot instance");
    }
    rig.assert_exactly_once("spot launch").await;
}

#[tokio::test]
async fn a_batch_fails_whole_when_the_table_is_missing_and_succeeds_once_it_exists() {
    let rig = Rig::new(&["on-demand"]).await;
    rig.aws.clients.dynamodb.delete_table().table_name(crate::aws::TABLE).send().await.unwrap();
    rig.send(&rig.doorbell_url, &[doorbell("ledger-0"), "not json".to_string()]).await;
    let event = rig.receive(&rig.doorbell_url).await;
    let handled = handlers::doorbells("provisioner", &rig.reconciler("provisioner-1"), &event, Deadline::NONE).await;
    let failed: Vec<String> = handled.response.batch_item_failures.iter().map(|f| f.item_identifier.clone()).collect();
    assert_eq!(failed.len(), 2, "every message comes back: {failed:?}");
    assert!(handled.report.errors.iter().any(|e| e.contains("could not run")), "{:?}", handled.report.errors);
    assert!(rig.instances().await.is_empty(), "nothing launched without a place to record it");

    dovetail_aws::dynamo::create_table(&rig.aws.clients.dynamodb, crate::aws::TABLE).await.unwrap();
    let handled = handlers::doorbells("provisioner", &rig.reconciler("provisioner-1"), &event, Deadline::NONE).await;
    assert!(handled.response.batch_item_failures.is_empty(), "{:?}", handled.report.errors);
    assert!(handled.report.launches().count() >= 1);
    rig.assert_exactly_once("after the table came back").await;
}

/// A warm provisioner — the same process, its store's view of the claims kept — reads the claim
/// items that changed since its last read, not the table: its next invocation reads what its
/// first one wrote, the one after reads nothing.
#[tokio::test]
async fn a_warm_provisioner_reads_only_the_claims_that_changed() {
    let rig = Rig::new(&["on-demand"]).await;
    // Everything here is written within a second on one clock: no margin, so that a read of changes
    // counts what changed since the last read and not the whole last minute (see
    // `dovetail_aws::dynamo::kept::CHANGE_MARGIN`).
    let store = rig.store().with_change_margin(Duration::ZERO);
    let provisioner = rig.reconciler_with(rig.aws.cloud(), store.clone(), "provisioner-1");
    let pause = || tokio::time::sleep(Duration::from_millis(20));

    let first = provisioner.provision().await.unwrap();
    let launched = first.launches().count() as u64;
    assert!(launched >= 1, "{:?}", first.decisions);
    let mut read = store.items_read();
    pause().await;

    let second = provisioner.provision().await.unwrap();
    assert_eq!(second.launches().count(), 0, "{:?}", second.decisions);
    let warm = store.items_read() - read;
    assert_eq!(warm, launched, "the claims the first invocation wrote, once each");
    read = store.items_read();
    pause().await;

    provisioner.provision().await.unwrap();
    assert_eq!(store.items_read() - read, 0, "nothing changed, nothing read");
    assert_eq!(rig.live_claims().await.len() as u64, launched);
    eprintln!("warm provisioner: {warm} items read after {launched} claims written, then 0");
}
