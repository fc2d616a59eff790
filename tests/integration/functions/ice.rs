//! Capacity errors: moto never reports them, so an SDK interceptor answers every spot CreateFleet
//! as EC2 does when spot capacity is short (HTTP 200, no instance, an `errorSet` of
//! `InsufficientInstanceCapacity`) — the request itself is swapped for a harmless one, so moto
//! launches nothing behind the adapter's back. The adapter reads the answer, the reconciler marks
//! the offerings unavailable in DynamoDB and falls back to on-demand.

use dovetail_aws::Ec2Cloud;
use dovetail_core::catalog::CapacityType;
use dovetail_core::decision::Action;
use dovetail_core::reconcile::Deadline;
use dovetail_runtime::handlers;

use super::{doorbell, Rig};
use crate::aws::canned::{CannedFleet, FleetError};
use crate::aws::World;

/// EC2's answer to an instant fleet it could not fill.
const NO_SPOT_CAPACITY: FleetError = FleetError {
    code: "InsufficientInstanceCapacity",
    message: "There is no Spot capacity available that matches your request.",
    lifecycle: "spot",
};

#[tokio::test]
async fn spot_capacity_errors_mark_offerings_unavailable_and_fall_back_to_on_demand() {
    // A pool of three types in two zones: six spot offerings, all short.
    let rig = Rig::with_types(&["spot", "on-demand"], &["m6g.large", "m6g.xlarge", "c6g.xlarge"]).await;
    // Every spot CreateFleet is refused.
    let injector = CannedFleet::new(NO_SPOT_CAPACITY, |body, _| body.contains("DefaultTargetCapacityType=spot"));
    let mut clients = rig.aws.clients.clone();
    clients.ec2 = injector.client(&rig.aws.sdk);
    let cloud = Ec2Cloud::new(&clients, &rig.aws.config, World::facts());

    rig.send(&rig.doorbell_url, &[doorbell("ledger-0")]).await;
    let event = rig.receive(&rig.doorbell_url).await;
    let handled =
        handlers::doorbells("provisioner", &rig.reconciler_with(cloud, rig.store(), "p"), &event, Deadline::NONE).await;
    assert!(handled.response.batch_item_failures.is_empty(), "{:?}", handled.report.errors);
    assert!(handled.report.errors.is_empty(), "{:?}", handled.report.errors);

    let refused = injector.refusals();
    assert!(refused >= 1, "spot was tried first");
    let marked: Vec<_> = handled
        .report
        .decisions
        .iter()
        .filter_map(|d| match &d.action {
            Some(Action::MarkUnavailable { offering, .. }) => Some(offering.clone()),
            _ => None,
        })
        .collect();
    assert!(!marked.is_empty() && marked.iter().all(|o| o.capacity_type == CapacityType::Spot), "{marked:?}");

    // The marks are in DynamoDB, where the next invocation (any function) reads them.
    let stored = dovetail_core::reconcile::ports::Store::unavailable(&rig.store(), super::now()).await.unwrap();
    for o in &marked {
        assert!(stored.contains(o), "{o:?} stored");
    }

    let claims = rig.live_claims().await;
    assert!(!claims.is_empty(), "{:#?}", handled.report.decisions);
    for c in &claims {
        assert_eq!(c.launch.as_ref().unwrap().capacity_type, CapacityType::OnDemand, "{} fell back", c.name);
    }
    let instances = rig.instances().await;
    assert!(instances.iter().all(|(_, _, lifecycle)| lifecycle.is_none()), "no spot instance: {instances:?}");
    rig.assert_exactly_once("after capacity errors").await;
}
