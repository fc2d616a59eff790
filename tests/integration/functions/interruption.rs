//! EventBridge rules deliver the six interruption event types to the interruption queue (moto
//! runs the rules), and the interruption handler takes them as Lambda delivers them: a malformed
//! message in the same batch fails alone.

use aws_sdk_eventbridge::types::{PutEventsRequestEntry, Target};
use aws_sdk_sqs::types::QueueAttributeName;
use dovetail_core::reconcile::Deadline;
use dovetail_runtime::handlers;
use serde_json::Value;

use super::{doorbell, Rig};

/// The rules that route interruption events to the queue, one per event type (the deployment
/// templates create the same).
pub fn rules() -> Vec<(&'static str, Value)> {
    let ec2 = |detail_type: &str| serde_json::json!({"source": ["aws.ec2"], "detail-type": [detail_type]});
    vec![
        ("dovetail-spot-interruption", ec2("EC2 Spot Instance Interruption Warning")),
        ("dovetail-rebalance", ec2("EC2 Instance Rebalance Recommendation")),
        ("dovetail-state-change", ec2("EC2 Instance State-change Notification")),
        ("dovetail-capacity-reservation", ec2("EC2 Capacity Reservation Instance Interruption Warning")),
        (
            "dovetail-capacity-block-expiry",
            serde_json::json!({
                "source": ["aws.ec2"],
                "detail-type": ["Capacity Block Expiration Warning", "Capacity Block Reservation Expiration Warning"]
            }),
        ),
        (
            "dovetail-scheduled-change",
            serde_json::json!({
                "source": ["aws.health"], "detail-type": ["AWS Health Event"],
                "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]}
            }),
        ),
    ]
}

/// Puts [`rules`] on moto's default event bus, each targeting the queue `queue_arn`.
pub async fn route_interruptions(sdk: &aws_config::SdkConfig, queue_arn: &str) {
    let events = aws_sdk_eventbridge::Client::new(sdk);
    for (name, pattern) in rules() {
        events.put_rule().name(name).event_pattern(pattern.to_string()).send().await.unwrap();
        let target = Target::builder().id("interruption-queue").arn(queue_arn).build().unwrap();
        events.put_targets().rule(name).targets(target).send().await.unwrap();
    }
}

/// The recorded fixture `name`, about `instance` instead of the instances it names, as a
/// PutEvents entry.
pub fn entry(name: &str, instance: &str) -> PutEventsRequestEntry {
    let path = format!("{}/../shared/core/tests/fixtures/eventbridge/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut event: Value = serde_json::from_str(&text).unwrap();
    let ids: Vec<String> = {
        let mut found = vec![];
        let mut rest = text.as_str();
        while let Some(at) = rest.find("i-0") {
            let id: String = rest[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            rest = &rest[at + id.len()..];
            found.push(id);
        }
        found
    };
    let mut detail = serde_json::to_string(&event["detail"]).unwrap();
    let mut resources = serde_json::to_string(&event["resources"]).unwrap();
    for id in &ids {
        detail = detail.replace(id, instance);
        resources = resources.replace(id, instance);
    }
    event["resources"] = serde_json::from_str(&resources).unwrap();
    PutEventsRequestEntry::builder()
        .source(event["source"].as_str().unwrap())
        .detail_type(event["detail-type"].as_str().unwrap())
        .detail(detail)
        .set_resources(Some(
            event["resources"].as_array().unwrap().iter().map(|r| r.as_str().unwrap().to_string()).collect(),
        ))
        .build()
}

#[tokio::test]
async fn eventbridge_delivers_the_six_types_and_a_malformed_message_fails_alone() {
    let rig = Rig::new(&["spot"]).await;
    rig.send(&rig.doorbell_url, &[doorbell("ledger-0")]).await;
    let event = rig.receive(&rig.doorbell_url).await;
    handlers::doorbells("provisioner", &rig.reconciler("p"), &event, Deadline::NONE).await;
    rig.join_nodes().await;
    let claims = rig.live_claims().await;
    let victim = claims.first().expect("a claim launched").clone();
    let instance = victim.launch.as_ref().unwrap().instance_id.clone();

    let events = aws_sdk_eventbridge::Client::new(&rig.aws.sdk);
    route_interruptions(&rig.aws.sdk, &rig.queue_arn(&rig.interruption_url).await).await;
    let fixtures = [
        "spot-interruption",
        "rebalance-recommendation",
        "state-change-stopping",
        "capacity-reservation-interruption",
        "capacity-block-expiration-warning",
        "health-scheduled-change",
    ];
    let out = events
        .put_events()
        .set_entries(Some(fixtures.iter().map(|f| entry(f, &instance)).collect()))
        .send()
        .await
        .unwrap();
    assert_eq!(out.failed_entry_count(), 0, "{:?}", out.entries());
    rig.send(&rig.interruption_url, &["{\"detail-type\": ".to_string()]).await;

    // Lambda's poller may need several receives for seven messages; they make one batch here.
    let mut batch = rig.receive(&rig.interruption_url).await;
    for _ in 0..5 {
        if batch.records.len() >= 7 {
            break;
        }
        batch.records.extend(rig.receive(&rig.interruption_url).await.records);
    }
    assert_eq!(batch.records.len(), 7, "six routed events and the malformed message");
    let delivered: Vec<Value> =
        batch.records.iter().filter_map(|r| serde_json::from_str(r.body.as_deref()?).ok()).collect();
    for detail_type in [
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
        "EC2 Capacity Reservation Instance Interruption Warning",
        "Capacity Block Reservation Expiration Warning",
        "AWS Health Event",
    ] {
        assert!(delivered.iter().any(|e| e["detail-type"] == detail_type), "{detail_type} delivered");
    }

    let handled = handlers::interruptions("interruption", &rig.reconciler("i"), &batch, Deadline::NONE).await;
    let malformed = batch.records.iter().find(|r| r.body.as_deref() == Some("{\"detail-type\": ")).unwrap();
    let failed: Vec<String> = handled.response.batch_item_failures.iter().map(|f| f.item_identifier.clone()).collect();
    assert_eq!(failed, vec![malformed.message_id.clone().unwrap()], "{:?}", handled.report.errors);
    rig.delete_succeeded(&rig.interruption_url, &batch, &failed).await;

    for kind in [
        "spot interruption warning",
        "rebalance recommendation",
        "instance state change to stopping",
        "capacity reservation interruption warning",
        "AWS Health scheduled change",
    ] {
        let about = format!("for {instance}");
        assert!(
            handled.report.decisions.iter().any(|d| d.why.contains(kind) && d.why.contains(&about)),
            "a decision about the {kind}: {:#?}",
            handled.report.decisions
        );
    }
    // The block's warning names no instance, and no claim runs in the block.
    let block = "cr-0b1234567890abcde";
    let ignored = format!("ignored: Capacity Block expiration warning for {block}: no NodeClaim runs in {block}");
    assert!(handled.report.decisions.iter().any(|d| d.why == ignored), "{:#?}", handled.report.decisions);
    // One replacement, launched through moto, however many events named the instance.
    let after = rig.live_claims().await;
    let replacements: Vec<&String> =
        after.iter().map(|c| &c.name).filter(|n| n.starts_with(&format!("{}-r", victim.name))).collect();
    assert!(!replacements.is_empty(), "{:#?}", handled.report.decisions);
    assert!(replacements.iter().all(|r| r.ends_with("-r1")), "{replacements:?}");
    rig.assert_exactly_once("after the interruption batch").await;

    // Only the failed message is left in the queue, in flight until its visibility timeout.
    let attrs = rig
        .aws
        .clients
        .sqs
        .get_queue_attributes()
        .queue_url(&rig.interruption_url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .unwrap();
    let count = |name: QueueAttributeName| attrs.attributes().unwrap()[&name].parse::<u32>().unwrap();
    assert_eq!(count(QueueAttributeName::ApproximateNumberOfMessagesNotVisible), 1);
}
