//! Disruption end to end: a spot interruption warning through EventBridge, expiration, drift and
//! consolidation — each replaces or removes nodes by draining them through the Eviction API
//! (PodDisruptionBudgets kept by the API server, their status kept by kube-controller-manager)
//! before the instance is terminated and the Node deleted.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Result;
use dovetail_core::labels;
use kube::api::{Api, DynamicObject, Patch, PatchParams};

use super::{instance_of, label, node_of, EndToEnd, Options, STEP};

/// A pool and class for the disruption scenarios (`{capacity}`, `{extra}` under
/// `spec.template.spec`, `{disruption}` as `spec.disruption`).
pub(super) fn pool(capacity: &str, extra: &str, disruption: &str) -> String {
    format!(
        "apiVersion: dovetail.dev/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      nodeClassRef: {{group: dovetail.dev, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [{capacity}]}}
        - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}
        - {{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}}
{extra}
  disruption: {disruption}
---
apiVersion: dovetail.dev/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: DovetailNodeRole-demo-cluster
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo-cluster}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo-cluster}}}}]
"
    )
}

/// `replicas` pods of 1 CPU, one per node (hostname anti-affinity), and a budget that lets one
/// be unavailable at a time.
pub(super) fn workload(replicas: usize) -> String {
    annotated_workload(replicas, "{}")
}

/// [`workload`] with `annotations` (a YAML flow map) on its pods.
fn annotated_workload(replicas: usize, annotations: &str) -> String {
    format!(
        "apiVersion: v1
kind: Namespace
metadata: {{name: shop}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: api, namespace: shop}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: api}}}}
  template:
    metadata: {{labels: {{app: api}}, annotations: {annotations}}}
    spec:
      terminationGracePeriodSeconds: 5
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - {{labelSelector: {{matchLabels: {{app: api}}}}, topologyKey: kubernetes.io/hostname}}
      containers:
        - {{name: c, image: registry.k8s.io/pause:3.10, resources: {{requests: {{cpu: '1', memory: 1Gi}}}}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: api, namespace: shop}}
spec:
  maxUnavailable: 1
  selector: {{matchLabels: {{app: api}}}}
"
    )
}

pub(super) const DISRUPTION_OPTIONS: Options = Options {
    deliveries: 1,
    sweep_every: Some(Duration::from_secs(5)),
    forwarder: true,
    reorder: false,
    install: super::Install::Kustomize,
};

/// Waits until the instance `gone` is terminated, its Node deleted, and `replicas` pods run
/// again, on other nodes; while waiting, at most one replica is ever unavailable (the budget).
/// Returns the pods' nodes.
pub(super) async fn replaced(
    e2e: &EndToEnd,
    gone: &str,
    replicas: usize,
) -> Result<Vec<k8s_openapi::api::core::v1::Node>> {
    let fewest = std::sync::Mutex::new(replicas);
    let pods = e2e
        .until(&format!("{gone} drained, terminated and replaced"), STEP * 2, || {
            let fewest = &fewest;
            async move {
                let pods = e2e.pods("shop", "app=api").await?;
                let running: Vec<_> = pods.into_iter().filter(super::runs).collect();
                let live = e2e.instances().await.iter().any(|(id, ..)| id == gone);
                let node_left = e2e.nodes().await?.iter().any(|n| instance_of(n) == gone);
                let mut f = fewest.lock().unwrap();
                *f = (*f).min(running.len());
                Ok((!live && !node_left && running.len() == replicas).then_some(running))
            }
        })
        .await?;
    let fewest = *fewest.lock().unwrap();
    assert!(
        fewest + 1 >= replicas,
        "the budget allows one unavailable replica; {fewest} of {replicas} ran at one point"
    );
    let mut nodes = vec![];
    for p in &pods {
        let node = e2e.node(&node_of(p)).await?;
        assert_ne!(instance_of(&node), gone);
        nodes.push(node);
    }
    Ok(nodes)
}

/// The instance behind a node running one of the pods.
async fn some_instance(e2e: &EndToEnd, replicas: usize) -> Result<String> {
    let pods = e2e.running("shop", "app=api", replicas).await?;
    Ok(instance_of(&e2e.node(&node_of(&pods[0])).await?))
}

/// The pods carry do-not-disrupt: the node goes in two minutes whatever they say, so they are
/// evicted all the same, and an Event on the node says whose protection was overridden.
#[tokio::test]
async fn a_spot_interruption_warning_replaces_and_drains_the_node_then_terminates_it() -> Result<()> {
    let e2e = EndToEnd::start("spot-interruption", DISRUPTION_OPTIONS).await?;
    e2e.apply(&pool("spot", "", "{consolidationPolicy: WhenEmpty, consolidateAfter: Never}")).await?;
    e2e.apply(&annotated_workload(3, "{karpenter.sh/do-not-disrupt: 'true'}")).await?;
    let pods = e2e.running("shop", "app=api", 3).await?;
    let node_name = node_of(&pods[0]);
    let victim = instance_of(&e2e.node(&node_name).await?);
    let spot = e2e.instances().await.into_iter().find(|(id, ..)| id == &victim).and_then(|(.., l)| l);
    assert_eq!(spot.as_deref(), Some("spot"));

    // EC2 warns through EventBridge; the rule routes it to the interruption queue.
    let events = aws_sdk_eventbridge::Client::new(&e2e.aws.sdk);
    let entry = crate::functions::interruption::entry("spot-interruption", &victim);
    let out = events.put_events().entries(entry).send().await?;
    assert_eq!(out.failed_entry_count(), 0);
    let nodes = replaced(&e2e, &victim, 3).await?;
    e2e.assert_exactly_once("after the replacement").await?;
    assert_eq!(nodes.iter().map(|n| n.metadata.name.clone()).collect::<BTreeSet<_>>().len(), 3);
    let batches = e2e.shared.batches.lock().unwrap().get("dovetail-interruption").copied().unwrap_or(0);
    assert!(batches >= 1, "the interruption function was invoked");
    // Its metrics: the spot warning counted each time it was received (once, unless the queue
    // handed it back because a visibility timeout ran out on a loaded machine), and one NodeClaim
    // disrupted for it however often it came.
    use dovetail_runtime::metrics::{INTERRUPTIONS, NODECLAIMS_DISRUPTED};
    let interruption = "dovetail-interruption";
    // A delivery is counted before its invocation publishes, so wait until the two agree.
    let received = e2e
        .until("a spot warning counted per delivery", STEP, || async {
            let delivered = e2e.shared.events_delivered.lock().unwrap();
            let received = delivered.get("EC2 Spot Instance Interruption Warning").copied().unwrap_or(0) as f64;
            drop(delivered);
            let counted = e2e.metric_sum(interruption, &INTERRUPTIONS, &[("MessageType", "spot_interrupted")]);
            Ok((received >= 1.0 && counted == received).then_some(received))
        })
        .await?;
    assert_eq!(e2e.metric_sum(interruption, &INTERRUPTIONS, &[]), received, "no other message counted");
    assert_eq!(e2e.metric_sum(interruption, &NODECLAIMS_DISRUPTED, &[("Reason", "SpotInterrupted")]), 1.0);
    let overridden = e2e
        .until("the ProtectionOverridden Event on the interrupted node", STEP, || async {
            let events = e2e.events("default", "Node", &node_name).await?;
            Ok(events.into_iter().find(|e| e.reason.as_deref() == Some("ProtectionOverridden")))
        })
        .await?;
    let message = overridden.message.unwrap_or_default();
    let pod = pods[0].metadata.name.clone().unwrap_or_default();
    assert!(message.contains(&pod) && message.contains("do-not-disrupt"), "{message}");
    Ok(())
}

#[tokio::test]
async fn an_expired_node_is_replaced_then_terminated() -> Result<()> {
    let e2e = EndToEnd::start("expiration", DISRUPTION_OPTIONS).await?;
    let expire = "      expireAfter: 45s";
    e2e.apply(&pool("on-demand", expire, "{consolidationPolicy: WhenEmpty, consolidateAfter: Never}")).await?;
    e2e.apply(&workload(2)).await?;
    let first = some_instance(&e2e, 2).await?;
    // Its replacement expires too, 45 s after its launch: claims and instances may be mid-way
    // through that, so there is no exactly-once check at an arbitrary moment here.
    replaced(&e2e, &first, 2).await?;
    Ok(())
}

#[tokio::test]
async fn a_changed_nodepool_drifts_its_nodes() -> Result<()> {
    let e2e = EndToEnd::start("drift", DISRUPTION_OPTIONS).await?;
    let never = "{consolidationPolicy: WhenEmpty, consolidateAfter: Never}";
    e2e.apply(&pool("on-demand", "", never)).await?;
    e2e.apply(&workload(2)).await?;
    let before: BTreeSet<String> = e2e.instances().await.into_iter().map(|(id, ..)| id).collect();
    some_instance(&e2e, 2).await?;

    // A label in the pool's template: every node of the pool is now drifted.
    let pools: Api<DynamicObject> = super::super::kube::nodepools(&e2e.admin);
    let patch = serde_json::json!({"spec": {"template": {"metadata": {"labels": {"tier": "blue"}}}}});
    pools.patch("default", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let nodes = e2e
        .until("every pod on a node of the changed template", STEP * 3, || async {
            let pods = e2e.running("shop", "app=api", 2).await?;
            let mut nodes = vec![];
            for p in &pods {
                nodes.push(e2e.node(&node_of(p)).await?);
            }
            let live: BTreeSet<String> = e2e.instances().await.into_iter().map(|(id, ..)| id).collect();
            let done = nodes.iter().all(|n| label(n, "tier") == "blue") && live.is_disjoint(&before);
            Ok(done.then_some(nodes))
        })
        .await?;
    for n in &nodes {
        assert!(!before.contains(&instance_of(n)));
    }
    e2e.assert_exactly_once("drift").await?;
    Ok(())
}

#[tokio::test]
async fn an_emptied_node_is_consolidated_away() -> Result<()> {
    let e2e = EndToEnd::start("consolidation", DISRUPTION_OPTIONS).await?;
    e2e.apply(&pool("on-demand", "", "{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}")).await?;
    e2e.apply(&workload(2)).await?;
    e2e.running("shop", "app=api", 2).await?;
    assert_eq!(e2e.live_claims().await?.len(), 2);

    // One replica fewer: one node runs nothing of the workload any more.
    e2e.apply(&workload(1)).await?;
    let kept = e2e
        .until("one claim left, its node the one running the replica", STEP * 2, || async {
            let claims = e2e.live_claims().await?;
            let instances = e2e.instances().await;
            let nodes = e2e.nodes().await?;
            Ok((claims.len() == 1 && instances.len() == 1 && nodes.len() == 1).then_some(nodes))
        })
        .await?;
    let pods = e2e.running("shop", "app=api", 1).await?;
    assert_eq!(Some(node_of(&pods[0])), kept[0].metadata.name.clone());
    assert_eq!(label(&kept[0], labels::NODEPOOL), "default");
    e2e.assert_exactly_once("consolidation").await?;
    Ok(())
}
