//! How events reach the functions: without the forwarder the sweeper's safety net still
//! provisions; every message delivered three times to concurrent invocations launches nothing
//! extra.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;

use super::{instance_of, node_of, EndToEnd, Options};

#[tokio::test]
async fn with_the_forwarder_stopped_the_sweeper_still_provisions() -> Result<()> {
    let options = Options { sweep_every: Some(Duration::from_secs(10)), ..Options::default() };
    let e2e = EndToEnd::start("forwarder-stopped", options).await?;
    e2e.apply_example("arm64-only/nodepool.yaml").await?;
    // The forwarder's pod dies: the API server carries on (failurePolicy Ignore), nobody rings.
    e2e.kill_forwarder();
    e2e.apply_example("arm64-only/workload.yaml").await?;
    e2e.running("payments", "app.kubernetes.io/name=ledger", 6).await?;
    let batches = e2e.shared.batches.lock().unwrap().clone();
    assert_eq!(batches.get("dovetail-provisioner"), None, "no doorbell was delivered: {batches:?}");
    assert!(batches.get("dovetail-sweeper").is_some_and(|n| *n >= 1));
    e2e.assert_exactly_once("sweeper only").await?;
    Ok(())
}

#[tokio::test]
async fn every_message_three_times_to_concurrent_invocations_launches_nothing_extra() -> Result<()> {
    let options = Options { deliveries: 3, sweep_every: Some(Duration::from_secs(10)), ..Options::default() };
    let e2e = EndToEnd::start("triple-delivery", options).await?;
    // One replica per node (hostname anti-affinity): the right number of instances is exactly
    // the number of replicas, whatever size each instance is.
    e2e.apply_example("hostname-anti-affinity/nodepool.yaml").await?;
    e2e.apply(&super::provisioning::ANTI_AFFINE.replace("replicas: 3", "replicas: 5")).await?;
    let pods = e2e.running("coordination", "app=quorum", 5).await?;
    e2e.assert_exactly_once("triple delivery").await?;
    let mut per_instance: BTreeMap<String, usize> = BTreeMap::new();
    for p in &pods {
        *per_instance.entry(instance_of(&e2e.node(&node_of(p)).await?)).or_default() += 1;
    }
    let instances = e2e.instances().await;
    assert_eq!(instances.len(), 5, "one instance per replica: {per_instance:?}\n{}", e2e.diagnose().await?);
    assert_eq!(per_instance.len(), 5, "{per_instance:?}");
    e2e.report_latency().await?;
    Ok(())
}
