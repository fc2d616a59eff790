//! What the functions describe of EC2 with 200 more instances of the cluster in the account:
//! the provisioner and the interruption function only the instances of the claims they step and
//! those their events name; the sweeper, whose orphan pass needs them all, every one. Counted by
//! an SDK interceptor on the adapter's EC2 client: DescribeInstances calls and the instances they
//! returned (counts, never times).

use dovetail_aws::ec2::TAG_CLUSTER;
use dovetail_aws::Ec2Cloud;
use dovetail_core::model::{OwnerKind, Pod};
use dovetail_core::reconcile::Deadline;
use dovetail_core::resources::Resources;
use dovetail_runtime::handlers;

use super::{doorbell, Rig};
use crate::aws::describes::{tally, Call, Describes, Kind};
use crate::aws::{World, CLUSTER};

/// Instances tagged for the cluster that no claim steps now: the rest of a big cluster, as far as
/// a per-event read is concerned.
const CROWD: usize = 200;

/// An EC2 event as EventBridge puts it on the interruption queue.
fn ec2_event(detail_type: &str, detail: serde_json::Value) -> String {
    let instance = detail["instance-id"].as_str().unwrap().to_string();
    serde_json::json!({
        "version": "0", "id": format!("{detail_type}-{instance}"), "detail-type": detail_type,
        "source": "aws.ec2", "account": "123456789012", "time": "2026-11-25T20:00:00Z", "region": "us-east-1",
        "resources": [format!("arn:aws:ec2:us-east-1:123456789012:instance/{instance}")],
        "detail": detail,
    })
    .to_string()
}

fn state_change(instance: &str, state: &str) -> String {
    ec2_event("EC2 Instance State-change Notification", serde_json::json!({"instance-id": instance, "state": state}))
}

fn returned(calls: &[Call]) -> usize {
    calls.iter().map(|c| c.returned).sum()
}

#[tokio::test]
async fn per_event_reads_describe_only_the_instances_they_step() {
    let rig = Rig::new(&["on-demand"]).await;
    let mut crowd = Vec::new();
    for _ in 0..4 {
        crowd.extend(rig.aws.run_instances(CROWD as i32 / 4, &[(TAG_CLUSTER, CLUSTER)]).await);
    }
    assert_eq!(crowd.len(), CROWD);
    let describes = Describes::default();
    let counted = |holder: &str| {
        let cloud = Ec2Cloud::new(&describes.clients(&rig.aws), &rig.aws.config, World::facts());
        rig.reconciler_with(cloud, rig.store(), holder)
    };

    // 1. Doorbells for the six pending pods, no claim yet: no instance to describe by id; each
    //    launch looks its claim's tag up once before CreateFleet (exactly-once), finding nothing.
    rig.send(&rig.doorbell_url, &[doorbell("ledger-0")]).await;
    let event = rig.receive(&rig.doorbell_url).await;
    let handled = handlers::doorbells("provisioner", &counted("p1"), &event, Deadline::NONE).await;
    rig.delete_succeeded(&rig.doorbell_url, &event, &[]).await;
    assert!(handled.report.errors.is_empty(), "{:?}", handled.report.errors);
    let launches = handled.report.launches().count();
    assert!(launches >= 1);
    let calls = describes.take();
    println!("provisioner, 6 pending pods, {CROWD} other instances: {calls:?}");
    assert_eq!(tally(&calls, Kind::Launched), (launches, 0), "{calls:?}");
    assert_eq!(calls.len(), launches, "nothing else described: {calls:?}");

    // 2. A node doorbell while those instances boot: the provisioner registers their claims, so
    //    it describes their instances, by id, in one call — and nothing else.
    let claims = rig.live_claims().await;
    assert_eq!(claims.len(), launches);
    rig.send(&rig.doorbell_url, &[doorbell("ledger-1")]).await;
    let event = rig.receive(&rig.doorbell_url).await;
    let handled = handlers::doorbells("provisioner", &counted("p2"), &event, Deadline::NONE).await;
    rig.delete_succeeded(&rig.doorbell_url, &event, &[]).await;
    assert!(handled.report.errors.is_empty(), "{:?}", handled.report.errors);
    assert_eq!(handled.report.launches().count(), 0);
    let calls = describes.take();
    println!("provisioner, {launches} claims registering: {calls:?}");
    assert_eq!(calls, vec![Call { kind: Kind::ById, returned: launches }]);

    // 3. The nodes joined (every claim Initialized); one more pod needs a new node: one
    //    DescribeInstances (the new claim's tag look-up), no instance returned.
    rig.join_nodes().await;
    {
        let mut s = rig.cluster.lock();
        let mut pod = Pod::new("payments", "batch-0", Resources::new(7000, 8 << 30));
        pod.owner = OwnerKind::ReplicaSet;
        s.create_pod(pod, None, None);
        s.settle();
    }
    rig.send(&rig.doorbell_url, &[doorbell("batch-0")]).await;
    let event = rig.receive(&rig.doorbell_url).await;
    let handled = handlers::doorbells("provisioner", &counted("p3"), &event, Deadline::NONE).await;
    rig.delete_succeeded(&rig.doorbell_url, &event, &[]).await;
    assert!(handled.report.errors.is_empty(), "{:?}", handled.report.errors);
    assert_eq!(handled.report.pending_pods, 1);
    assert_eq!(handled.report.launches().count(), 1, "{:#?}", handled.report.decisions);
    let calls = describes.take();
    println!("provisioner, 1 pending pod, {} instances in the account: {calls:?}", CROWD + launches);
    assert_eq!(calls, vec![Call { kind: Kind::Launched, returned: 0 }]);

    // 4. An interruption batch: a state change (stopping) of one claim's instance, a state change
    //    of an instance tagged for the cluster that no claim owns, an event about an instance EC2
    //    never knew, and one drain step of another claim. One DescribeInstances by id for the
    //    three instances that exist; the replacement's launch looks its tag up.
    let claims = rig.live_claims().await;
    let (victim, resumed) = (&claims[0], claims.last().unwrap());
    let id = |c: &dovetail_core::nodeclaim::NodeClaim| c.launch.as_ref().unwrap().instance_id.clone();
    let bodies = vec![
        state_change(&id(victim), "stopping"),
        state_change(&crowd[7], "stopping"),
        state_change("i-0fff0000aaaa11112", "stopping"),
        serde_json::json!({ "resume": resumed.name }).to_string(),
    ];
    rig.send(&rig.interruption_url, &bodies).await;
    let event = rig.receive(&rig.interruption_url).await;
    assert_eq!(event.records.len(), bodies.len());
    let handled = handlers::interruptions("interruption", &counted("i"), &event, Deadline::NONE).await;
    assert!(handled.response.batch_item_failures.is_empty(), "{:?}", handled.report.errors);
    let calls = describes.take();
    println!("interruption, 4 messages: {calls:?}");
    let named = if victim.name == resumed.name { 2 } else { 3 };
    assert_eq!(tally(&calls, Kind::ById), (1, named), "{calls:?}");
    assert_eq!(tally(&calls, Kind::All), (0, 0), "{calls:?}");
    let replacements = handled.report.launches().count();
    assert_eq!(tally(&calls, Kind::Launched), (replacements, 0), "{calls:?}");
    let said = |text: &str| handled.report.decisions.iter().any(|d| d.why.contains(text));
    assert!(said(&format!("ignored: instance {} is tagged for this cluster but no NodeClaim owns it", crowd[7])));
    assert!(said("ignored: instance i-0fff0000aaaa11112 is not Dovetail's"));
    assert!(said(&format!("for {}", id(victim))), "{:#?}", handled.report.decisions);

    // 5. The sweeper, for contrast: every instance of the cluster.
    handlers::sweep("sweeper", &counted("s"), Deadline::NONE).await.expect("the sweep ran");
    let calls = describes.take();
    let (full, all) = tally(&calls, Kind::All);
    println!("sweeper: {full} full DescribeInstances returning {all} instances ({} in all calls)", returned(&calls));
    assert!(full >= 1 && all >= CROWD + launches, "{calls:?}");
}
