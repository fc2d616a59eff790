//! Chaos end to end (issue 18, point 3): the world misbehaving around the functions, on the real
//! API server, scheduler and moto. Each scenario ends with every pod bound and running on nodes
//! Dovetail launched, instances equal to claims, and nothing leaked.
//!
//! - the API server killed and restarted in the middle of a drain, then the forwarder killed
//!   under a burst of pods and started again;
//! - a burst of 1,000 pods whose doorbells reach two execution environments each, every batch
//!   in reverse order, with a visibility timeout so short that a doorbell comes back while the
//!   invocation it started still runs;
//! - the AWS endpoint going down for fifteen seconds right after a CreateFleet left: the
//!   instance runs, its record on the claim is not written, and the Node registers before the
//!   claim knows its instance.
//!
//! moto itself is not restarted: it keeps its state in memory, which the scenarios beside share.
//! Its outage is every SDK client of the functions refusing its calls for the length of it
//! ([`super::Outage`]), which is what a restarting endpoint looks like from the functions.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Result;
use aws_sdk_sqs::types::QueueAttributeName;

use super::disruption::{pool, workload};
use super::{instance_of, node_of, EndToEnd, Options, STEP};

/// `replicas` small pods of `name` in `namespace` (0.05 CPU, 32 MiB).
fn burst(namespace: &str, name: &str, replicas: usize) -> String {
    format!(
        "apiVersion: v1
kind: Namespace
metadata: {{name: {namespace}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
        - {{name: c, image: registry.k8s.io/pause:3.10, resources: {{requests: {{cpu: 50m, memory: 32Mi}}}}}}
"
    )
}

/// Every running pod of `selector` is on a node of an instance the cluster's claims own.
async fn on_dovetail_nodes(e2e: &EndToEnd, namespace: &str, selector: &str, count: usize) -> Result<()> {
    let pods = e2e.running(namespace, selector, count).await?;
    let claimed: Vec<String> =
        e2e.live_claims().await?.into_iter().filter_map(|c| c.launch.map(|l| l.instance_id)).collect();
    for p in &pods {
        let instance = instance_of(&e2e.node(&node_of(p)).await?);
        assert!(claimed.contains(&instance), "{} runs on {instance}, which no live claim owns", node_of(p));
    }
    Ok(())
}

#[tokio::test]
async fn the_api_server_restarted_mid_drain_and_the_forwarder_killed_under_load() -> Result<()> {
    let options = Options { sweep_every: Some(Duration::from_secs(5)), ..Options::default() };
    let mut e2e = EndToEnd::start("chaos-restarts", options).await?;
    e2e.apply(&pool("spot", "", "{consolidationPolicy: WhenEmpty, consolidateAfter: Never}")).await?;
    e2e.apply(&workload(3)).await?;
    let pods = e2e.running("shop", "app=api", 3).await?;
    let victim = instance_of(&e2e.node(&node_of(&pods[0])).await?);

    // A spot warning starts a drain; once the victim's claim is being disrupted, and while its
    // instance still runs, the API server is killed and comes back five seconds later.
    let events = aws_sdk_eventbridge::Client::new(&e2e.aws.sdk);
    let entry = crate::functions::interruption::entry("spot-interruption", &victim);
    assert_eq!(events.put_events().entries(entry).send().await?.failed_entry_count(), 0);
    e2e.until("the victim's drain under way", STEP, || async {
        let claims = e2e.live_claims().await?;
        let draining =
            claims.iter().any(|c| c.disruption.is_some() && c.launch.as_ref().is_some_and(|l| l.instance_id == victim));
        Ok(draining.then_some(()))
    })
    .await?;
    assert!(e2e.instances().await.iter().any(|(id, ..)| id == &victim), "restarted before the drain ended");
    // The test kubelet's calls fail while the API server is down, as a kubelet's would.
    *e2e.shared.expect_failures_until.lock().unwrap() = Some(Instant::now() + Duration::from_secs(30));
    e2e.control_plane.restart("kube-apiserver", Duration::from_secs(5)).await?;
    super::disruption::replaced(&e2e, &victim, 3).await?;
    e2e.assert_exactly_once("after the API server's restart").await?;

    // Under a burst of 200 pods, the forwarder's pod dies, and a new one starts ten seconds
    // later: the doorbells it missed are made up by the new one's and the sweeper's passes.
    e2e.apply(&burst("load", "burst", 200)).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    e2e.kill_forwarder();
    tokio::time::sleep(Duration::from_secs(10)).await;
    e2e.restart_forwarder().await?;
    on_dovetail_nodes(&e2e, "load", "app=burst", 200).await?;
    on_dovetail_nodes(&e2e, "shop", "app=api", 3).await?;
    e2e.assert_exactly_once("after the forwarder's restart").await?;
    Ok(())
}

/// Pods in the burst.
const FLOOD: usize = 1000;

#[tokio::test]
async fn a_burst_of_pods_doubled_reordered_and_redelivered_while_running() -> Result<()> {
    let options =
        Options { deliveries: 2, sweep_every: Some(Duration::from_secs(10)), reorder: true, ..Options::default() };
    let e2e = EndToEnd::start("chaos-burst", options).await?;
    // Doorbells come back after one second unless deleted: an invocation reading and launching
    // for the burst takes longer, so its batch is redelivered to the other poller meanwhile.
    e2e.aws
        .clients
        .sqs
        .set_queue_attributes()
        .queue_url(&e2e.doorbell_url)
        .attributes(QueueAttributeName::VisibilityTimeout, "1")
        .send()
        .await?;
    e2e.apply(&pool("on-demand", "", "{consolidationPolicy: WhenEmpty, consolidateAfter: Never}")).await?;
    e2e.apply(&burst("flood", "flood", FLOOD)).await?;
    let settled = e2e.until("the flood running", STEP * 6, || async {
        let running = e2e.pods("flood", "app=flood").await?.into_iter().filter(super::runs).count();
        Ok((running == FLOOD).then_some(()))
    });
    if let Err(e) = settled.await {
        anyhow::bail!("{e:#}\n{}", e2e.diagnose().await?);
    }
    on_dovetail_nodes(&e2e, "flood", "app=flood", FLOOD).await?;
    e2e.assert_exactly_once("after the burst").await?;
    let redelivered = e2e.shared.redelivered.load(Ordering::SeqCst);
    assert!(redelivered > 0, "no doorbell came back while its invocation ran");
    eprintln!("chaos-burst: {redelivered} doorbells redelivered");
    Ok(())
}

/// Pods launched for while the AWS endpoint goes down. Found by this scenario: the sweeper took
/// the Node of such a launch, labelled only with its pool, for an orphan and deleted it (its claim,
/// still Launching, recorded no instance), and the claim, once it did, waited for good.
const THROUGH_OUTAGE: usize = 40;

#[tokio::test]
async fn a_launch_cut_off_by_an_aws_outage_is_finished_once() -> Result<()> {
    let options = Options { sweep_every: Some(Duration::from_secs(10)), ..Options::default() };
    let e2e = EndToEnd::start("chaos-outage", options).await?;
    e2e.apply(&pool("on-demand", "", "{consolidationPolicy: WhenEmpty, consolidateAfter: Never}")).await?;
    e2e.outage().after_next_launch(Duration::from_secs(15));
    // The functions fail while the endpoint is down (logged, not counted).
    *e2e.shared.expect_failures_until.lock().unwrap() = Some(Instant::now() + Duration::from_secs(45));
    e2e.apply(&burst("outage", "outage", THROUGH_OUTAGE)).await?;
    let settled = e2e.until("the pods running", STEP * 4, || async {
        let running = e2e.pods("outage", "app=outage").await?.into_iter().filter(super::runs).count();
        Ok((running == THROUGH_OUTAGE).then_some(()))
    });
    if let Err(e) = settled.await {
        anyhow::bail!("{e:#}\n{}", e2e.diagnose().await?);
    }
    let refused = e2e.outage().refused.load(Ordering::SeqCst);
    assert!(refused > 0, "the outage refused no call: it never started");
    on_dovetail_nodes(&e2e, "outage", "app=outage", THROUGH_OUTAGE).await?;
    e2e.assert_exactly_once("after the outage").await?;
    eprintln!("chaos-outage: {refused} calls refused");
    Ok(())
}
