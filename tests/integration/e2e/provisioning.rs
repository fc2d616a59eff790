//! Scale-up end to end: the examples' workloads become Running pods on nodes Dovetail launched,
//! bound by the real kube-scheduler.

use std::collections::BTreeMap;

use anyhow::{ensure, Context, Result};
use dovetail_core::labels;
use dovetail_core::reconcile::ports::Store;
use dovetail_core::resources::parse_cpu_millis;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::{instance_of, label, node_of, EndToEnd, Install, Options, STEP};

/// Checks that every pod runs on a Node of a live claim, registered as Dovetail registers nodes
/// (claim and pool labels set, the unregistered taint gone); returns each pod's Node.
pub(super) async fn on_dovetail_nodes(e2e: &EndToEnd, pods: &[Pod]) -> Result<Vec<Node>> {
    let claims = e2e.live_claims().await?;
    let mut nodes = vec![];
    for pod in pods {
        let node = e2e.node(&node_of(pod)).await?;
        let instance = instance_of(&node);
        let claim = claims
            .iter()
            .find(|c| c.launch.as_ref().is_some_and(|l| l.instance_id == instance))
            .with_context(|| format!("pod {:?} runs on {instance}, which no live claim launched", pod.metadata.name))?;
        ensure!(label(&node, labels::NODECLAIM) == claim.name, "{instance} is labelled with its claim");
        ensure!(label(&node, labels::NODEPOOL) == claim.nodepool, "{instance} is labelled with its pool");
        let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
        ensure!(!taints.iter().any(|t| t.key == labels::TAINT_UNREGISTERED), "{instance} was registered");
        nodes.push(node);
    }
    Ok(nodes)
}

/// The EMF documents of the first provisioner invocation that launched, checked value by value
/// against what happened, read as soon as they are published (before consolidation can change the
/// claims). Which claims it launched is taken from the CreateFleet calls moto was sent before the
/// documents' timestamp: nothing launches before the first launching pass (nothing to replace),
/// and one execution environment takes one batch at a time. Its N launches are N
/// `NodeClaimsCreated` by pool, its `NodeClaims` are those N, up (launched, registered or
/// initialized) and none launching or going, its
/// `FleetCostPerHour` is exactly what DynamoDB records those N cost — the state after the
/// launches, not the read before — and `PodsUnboundTime` is the age of a pod of `selector`.
async fn launch_metrics_describe_the_state_after_the_launch(
    e2e: &EndToEnd,
    namespace: &str,
    selector: &str,
) -> Result<()> {
    use dovetail_runtime::metrics::{
        value, FLEET_COST, NODECLAIMS, NODECLAIMS_CREATED, PODS_PENDING, PODS_UNBOUND_TIME,
    };
    let invocation: Vec<serde_json::Value> = e2e
        .until("a provisioner invocation that launched", STEP, || async move {
            let docs = e2e.shared.metrics.lock().unwrap().clone();
            let provisioner: Vec<serde_json::Value> =
                docs.into_iter().filter(|d| d["Function"] == "dovetail-provisioner").collect();
            let Some(launching) = provisioner
                .iter()
                .find(|d| d.get(NODECLAIMS_CREATED.name).and_then(serde_json::Value::as_u64).unwrap_or(0) > 0)
            else {
                return Ok(None);
            };
            // One invocation's documents share its timestamp.
            let stamp = launching["_aws"]["Timestamp"].clone();
            Ok(Some(provisioner.into_iter().filter(|d| d["_aws"]["Timestamp"] == stamp).collect()))
        })
        .await?;
    let stamp = invocation[0]["_aws"]["Timestamp"].as_i64().context("the documents' timestamp")?;
    let published = std::time::UNIX_EPOCH + std::time::Duration::from_millis(stamp as u64);
    let launched: std::collections::BTreeSet<String> =
        e2e.ec2_calls.fleets.lock().unwrap().iter().filter(|f| f.at <= published).map(|f| f.claim.clone()).collect();
    let claims: Vec<_> = e2e.store().claims().await?.into_iter().filter(|c| launched.contains(&c.name)).collect();
    ensure!(claims.len() == launched.len(), "every launched claim is in DynamoDB: {launched:?}");
    let mut by_pool: BTreeMap<&str, u64> = BTreeMap::new();
    for c in &claims {
        *by_pool.entry(c.nodepool.as_str()).or_default() += 1;
    }
    let created: u64 = invocation.iter().filter_map(|d| d.get(NODECLAIMS_CREATED.name)?.as_u64()).sum();
    ensure!(
        created == launched.len() as u64,
        "{created} NodeClaimsCreated for {} launches: {invocation:?}",
        launched.len()
    );
    for (pool, n) in &by_pool {
        let shown = value(&invocation, &NODECLAIMS_CREATED, &[("NodePool", pool)]).and_then(|v| v.as_u64());
        ensure!(shown == Some(*n), "NodeClaimsCreated{{NodePool={pool}}} is {shown:?}, launched {n}");
    }
    // The pass may see its nodes register and initialize before it ends (the test kubelet is quick).
    let in_state = |state: &str| value(&invocation, &NODECLAIMS, &[("State", state)]).and_then(|v| v.as_u64());
    let up: Option<u64> = ["Launched", "Registered", "Initialized"].iter().map(|s| in_state(s)).sum();
    ensure!(up == Some(launched.len() as u64), "NodeClaims up {up:?}, launched {}: {invocation:?}", launched.len());
    for state in ["Launching", "Draining", "Terminating", "Terminated"] {
        ensure!(in_state(state) == Some(0), "NodeClaims{{State={state}}} is {:?}: {invocation:?}", in_state(state));
    }
    let price: f64 = claims.iter().map(|c| c.launch.as_ref().map_or(0.0, |l| l.price)).sum();
    let cost = value(&invocation, &FLEET_COST, &[]).and_then(|v| v.as_f64()).context("FleetCostPerHour")?;
    ensure!(price > 0.0 && (cost - price).abs() < 1e-9, "FleetCostPerHour {cost}, the launched claims cost {price}");
    let pending = value(&invocation, &PODS_PENDING, &[]).and_then(|v| v.as_u64()).context("PodsPending")?;
    let pods = e2e.pods(namespace, selector).await?;
    ensure!((1..=pods.len() as u64).contains(&pending), "PodsPending {pending} of {} pods", pods.len());
    // creationTimestamp has whole seconds: the oldest pod waited at most this long.
    let first = pods
        .iter()
        .filter_map(|p| p.metadata.creation_timestamp.as_ref())
        .map(|t| t.0.as_millisecond())
        .min()
        .context("the pods' creationTimestamp")?;
    let waited = value(&invocation, &PODS_UNBOUND_TIME, &[]).and_then(|v| v.as_f64()).context("PodsUnboundTime")?;
    let most = (stamp - first) as f64 / 1000.0 + 1.0;
    ensure!(waited > 0.0 && waited <= most, "PodsUnboundTime {waited} s, the first pod was created {most} s before");
    Ok(())
}

#[tokio::test]
async fn a_zone_spread_deployment_runs_on_nodes_dovetail_launched() -> Result<()> {
    let e2e = EndToEnd::start("zone-spread", Options::default()).await?;
    e2e.apply_example("web-zone-spread/nodepool.yaml").await?;
    e2e.apply_example("web-zone-spread/web.yaml").await?;
    launch_metrics_describe_the_state_after_the_launch(&e2e, "web", "app.kubernetes.io/name=frontend").await?;
    let pods = e2e.running("web", "app.kubernetes.io/name=frontend", 9).await?;
    let nodes = on_dovetail_nodes(&e2e, &pods).await?;
    // The scheduler spreads over the zones that have nodes when it binds; Dovetail planned for
    // all three the class has subnets in (a node that comes up after the others took the pods
    // is consolidated later).
    let mut per_zone: BTreeMap<&str, usize> = BTreeMap::new();
    for node in &nodes {
        *per_zone.entry(label(node, labels::ZONE)).or_default() += 1;
    }
    let (least, most) = (per_zone.values().min().unwrap(), per_zone.values().max().unwrap());
    assert!(most - least <= 1, "maxSkew 1: {per_zone:?}");
    let launched: std::collections::BTreeSet<String> =
        e2e.live_claims().await?.into_iter().filter_map(|c| c.launch.map(|l| l.zone)).collect();
    assert_eq!(launched.len(), 3, "capacity launched in the three zones: {launched:?}");
    e2e.assert_exactly_once("zone spread").await?;
    e2e.report_latency().await?;
    Ok(())
}

#[tokio::test]
async fn gpu_pods_get_tainted_gpu_nodes_and_others_stay_off_them() -> Result<()> {
    let e2e = EndToEnd::start("gpu", Options::default()).await?;
    e2e.apply_example("gpu/nodepools.yaml").await?;
    e2e.apply_example("gpu/workloads.yaml").await?;
    // A pod that does not tolerate the GPU taint, next to them.
    e2e.apply(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: plain, namespace: ml, labels: {app: plain}}\n\
         spec: {containers: [{name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: '1', memory: 1Gi}}}]}\n",
    )
    .await?;
    let inference = e2e.running("ml", "app.kubernetes.io/name=llm-inference", 3).await?;
    let finetune = e2e.running("ml", "job-name=finetune", 1).await?;
    let plain = e2e.running("ml", "app=plain", 1).await?;
    for pod in inference.iter().chain(&finetune) {
        let node = &on_dovetail_nodes(&e2e, std::slice::from_ref(pod)).await?[0];
        let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
        assert!(taints.iter().any(|t| t.key == "nvidia.com/gpu" && t.effect == "NoSchedule"), "GPU node tainted");
        let gpus = node.status.as_ref().and_then(|s| s.allocatable.as_ref()).and_then(|a| a.get("nvidia.com/gpu"));
        assert!(gpus.is_some_and(|q| q.0 != "0"), "{} has GPUs: {gpus:?}", label(node, labels::INSTANCE_TYPE));
        assert_eq!(label(node, "workload-type"), "gpu", "the pool's template label, from the user data");
    }
    let node = &on_dovetail_nodes(&e2e, &plain).await?[0];
    assert_eq!(label(node, labels::NODEPOOL), "general", "a pod without the toleration gets a general node");
    // The notebook asks for a GPU without tolerating the taint: no pool can serve it, and it is
    // told so.
    let told = e2e
        .until("the notebook told why it gets no node", STEP, || {
            let e2e = &e2e;
            async move {
                let events = e2e.events("ml", "Pod", "notebook").await?;
                Ok(events
                    .into_iter()
                    .find(|e| super::by_dovetail(e) && e.reason.as_deref() == Some("FailedScheduling")))
            }
        })
        .await?;
    assert!(told.message.as_deref().is_some_and(|m| m.contains("gpu")), "{:?}", told.message);
    e2e.assert_exactly_once("gpu").await?;
    e2e.report_latency().await?;
    Ok(())
}

/// Installed through the Helm chart instead of the kustomize base (the only scenario that is): the
/// forwarder and the functions run under the chart's RBAC, the forwarder patches the chart's
/// webhook configuration, and the chart's admission policy holds the NodeClaims.
#[tokio::test]
async fn arm64_only_pods_get_graviton_nodes() -> Result<()> {
    let e2e = EndToEnd::start("arm64-only", Options { install: Install::Helm, ..Options::default() }).await?;
    e2e.apply_example("arm64-only/nodepool.yaml").await?;
    e2e.apply_example("arm64-only/workload.yaml").await?;
    let pods = e2e.running("payments", "app.kubernetes.io/name=ledger", 6).await?;
    for node in on_dovetail_nodes(&e2e, &pods).await? {
        // The test kubelet takes the architecture from the image Dovetail chose for the type.
        assert_eq!(label(&node, labels::ARCH), "arm64", "{}", label(&node, labels::INSTANCE_TYPE));
    }
    e2e.assert_hand_made_nodeclaim_refused().await?;
    e2e.assert_exactly_once("arm64").await?;
    e2e.report_latency().await?;
    Ok(())
}

#[tokio::test]
async fn hostname_anti_affinity_gives_every_replica_a_node_of_its_own() -> Result<()> {
    let e2e = EndToEnd::start("hostname-anti-affinity", Options::default()).await?;
    e2e.apply_example("hostname-anti-affinity/nodepool.yaml").await?;
    e2e.apply(ANTI_AFFINE).await?;
    let pods = e2e.running("coordination", "app=quorum", 3).await?;
    let nodes = on_dovetail_nodes(&e2e, &pods).await?;
    let mut names: Vec<String> = nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 3, "one node per replica: {names:?}");
    e2e.assert_exactly_once("anti-affinity").await?;
    e2e.report_latency().await?;
    Ok(())
}

/// The example's StatefulSet asks for volumes a CSI driver would provision; this is its
/// scheduling constraint alone.
pub const ANTI_AFFINE: &str = "
apiVersion: v1
kind: Namespace
metadata: {name: coordination}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: quorum, namespace: coordination}
spec:
  replicas: 3
  selector: {matchLabels: {app: quorum}}
  template:
    metadata: {labels: {app: quorum}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector: {matchLabels: {app: quorum}}
              topologyKey: kubernetes.io/hostname
      containers:
        - name: c
          image: registry.k8s.io/pause:3.10
          resources: {requests: {cpu: 500m, memory: 512Mi}}
";

/// NodePools' status is the sweeper's to write: these scenarios run it, on a faster schedule
/// than the deployed one-minute rate.
pub(super) const SWEEPING: Options = Options {
    deliveries: 1,
    sweep_every: Some(std::time::Duration::from_secs(10)),
    forwarder: true,
    reorder: false,
    install: Install::Kustomize,
};

/// The limits example's 10 analytics workers once each either runs or was told, in an Event whose
/// message contains `limit`, why it waits (and some run): the running pods, and the waiting ones'
/// (name, Event reason, message).
async fn workers_running_or_told(e2e: &EndToEnd, limit: &str) -> Result<(Vec<Pod>, Vec<(String, String, String)>)> {
    e2e.until("the analytics pool full and the others told why", STEP, || async move {
        let all = e2e.pods("analytics", "app.kubernetes.io/name=spark-worker").await?;
        let running: Vec<Pod> = all.iter().filter(|p| super::phase(p) == "Running").cloned().collect();
        let mut told = vec![];
        for p in all.iter().filter(|p| node_of(p).is_empty()) {
            let name = p.metadata.name.clone().unwrap_or_default();
            let said = e2e.events("analytics", "Pod", &name).await?;
            if let Some(e) = said.iter().find(|e| e.message.as_deref().is_some_and(|m| m.contains(limit))) {
                told.push((name, e.reason.clone().unwrap_or_default(), e.message.clone().unwrap_or_default()));
            }
        }
        let done = !running.is_empty() && running.len() + told.len() == all.len() && all.len() == 10;
        Ok(done.then_some((running, told)))
    })
    .await
}

#[tokio::test]
async fn a_pool_at_its_limit_says_so_on_the_pods_it_cannot_serve() -> Result<()> {
    let e2e = EndToEnd::start("limits", SWEEPING).await?;
    e2e.apply_example("limits/nodepools.yaml").await?;
    e2e.apply_example("limits/workload.yaml").await?;
    // 10 workers of 2 CPUs, a pool limited to 16 CPUs: some run, the rest are told why not.
    let (running, told) = workers_running_or_told(&e2e, "limit on cpu").await?;
    let mut nodes = on_dovetail_nodes(&e2e, &running).await?;
    nodes.sort_by_key(|n| n.metadata.name.clone());
    nodes.dedup_by_key(|n| n.metadata.name.clone());
    let used: i64 = nodes
        .iter()
        .map(|n| {
            let cpu = n.status.as_ref().and_then(|s| s.capacity.as_ref()).and_then(|c| c.get("cpu"));
            cpu.and_then(|q| parse_cpu_millis(&q.0).ok()).expect("a Node's cpu capacity")
        })
        .sum::<i64>()
        / 1000;
    assert!(used <= 16, "the analytics pool stays within 16 CPUs: {used}");
    assert!(!told.is_empty());
    for (pod, reason, message) in &told {
        assert_eq!(reason, "FailedScheduling", "{pod}: {message}");
        assert!(message.contains("analytics"), "{pod}: the message names the pool: {message}");
    }
    // The pool's status counts what it holds (the sweeper writes it).
    let pools = super::super::kube::nodepools(&e2e.admin);
    let status = e2e
        .until("the analytics pool's status", STEP, || {
            let pools = pools.clone();
            async move {
                let status = pools.get("analytics").await?.data["status"].clone();
                Ok(status["resources"]["nodes"].is_string().then_some(status))
            }
        })
        .await?;
    let counted: usize = status["resources"]["nodes"].as_str().and_then(|n| n.parse().ok()).unwrap_or_default();
    assert!(counted >= nodes.len(), "status.resources.nodes counts the pool's nodes: {status}");
    assert!(status["resources"]["cpu"].is_string(), "{status}");
    e2e.assert_exactly_once("limits").await?;
    e2e.report_latency().await?;
    Ok(())
}

/// The limits example with the analytics pool's budget in dollars instead of vCPUs
/// (`limits[dovetail.dev/cost-per-hour]: "0.4"`): the workers its $0.40/h buys run, the others wait
/// naming the limit, the pool says its limit binds (an Event, its `CostLimitReached` condition) and
/// shows what its nodes cost.
#[tokio::test]
async fn a_pool_at_its_cost_limit_launches_what_its_budget_buys_and_says_so() -> Result<()> {
    let e2e = EndToEnd::start("cost-limit", SWEEPING).await?;
    e2e.apply_example("limits/nodepools.yaml").await?;
    let pools = super::super::kube::nodepools(&e2e.admin);
    let budget = json!({"spec": {"limits": {"cpu": null, "dovetail.dev/cost-per-hour": "0.4"}}});
    pools.patch("analytics", &PatchParams::default(), &Patch::Merge(&budget)).await?;
    e2e.apply_example("limits/workload.yaml").await?;
    let (running, told) = workers_running_or_told(&e2e, "limit on dovetail.dev/cost-per-hour reached").await?;
    assert!(!told.is_empty() && told.iter().all(|(_, reason, _)| reason == "FailedScheduling"), "{told:?}");
    // What the pool's claims were launched at stays within its $0.40/h.
    let nodes = on_dovetail_nodes(&e2e, &running).await?;
    let claims = e2e.live_claims().await?;
    let spent: f64 =
        claims.iter().filter(|c| c.nodepool == "analytics").map(|c| c.launch.as_ref().map_or(0.0, |l| l.price)).sum();
    assert!(spent > 0.0 && spent <= 0.4 + 1e-9, "the analytics pool's claims cost ${spent}/h");
    assert!(nodes.iter().all(|n| label(n, labels::NODEPOOL) == "analytics"), "the team's pods stay on their pool");
    // The pool is told, and says so in its status.
    let events = e2e.events("default", "NodePool", "analytics").await?;
    assert!(
        events.iter().any(|e| e.reason.as_deref() == Some("CostLimitReached")
            && e.type_.as_deref() == Some("Warning")
            && e.message.as_deref().is_some_and(|m| m.contains("dovetail.dev/cost-per-hour"))),
        "a CostLimitReached Event on the NodePool: {events:?}"
    );
    // Its condition: True once not even its cheapest node fits in what is left, False (with what
    // it spends) while a smaller node still would, though the workers' did not.
    let status = e2e
        .until("the analytics pool's CostLimitReached condition", STEP, || {
            let pools = pools.clone();
            async move {
                let status = pools.get("analytics").await?.data["status"].clone();
                let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
                let written = conditions.iter().any(|c| c["type"] == "CostLimitReached");
                Ok((written && status["resources"]["dovetail.dev/cost-per-hour"].is_string()).then_some(status))
            }
        })
        .await?;
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    let condition = conditions.iter().find(|c| c["type"] == "CostLimitReached").expect("found above");
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(message.contains("of its limit $0.4000/h"), "{condition}");
    let shown: f64 =
        status["resources"]["dovetail.dev/cost-per-hour"].as_str().and_then(|v| v.parse().ok()).unwrap_or(-1.0);
    assert!((shown - spent).abs() < 1e-5, "status.resources shows ${shown}/h, the claims cost ${spent}/h: {status}");
    e2e.assert_exactly_once("cost limit").await?;
    e2e.report_latency().await?;
    Ok(())
}

#[tokio::test]
async fn an_invalid_nodepool_gets_a_condition_and_an_event_and_the_others_carry_on() -> Result<()> {
    let e2e = EndToEnd::start("invalid-nodepool", SWEEPING).await?;
    e2e.apply_example("arm64-only/nodepool.yaml").await?;
    // Passes the CRD's schema, fails Dovetail's validation: a class of a kind Dovetail does not
    // know. Its weight would make it the first choice.
    e2e.apply(
        "apiVersion: dovetail.dev/v1\nkind: NodePool\nmetadata: {name: broken}\nspec:\n  weight: 100\n  template:\n    spec:\n\
         \x20     nodeClassRef: {group: example.com, kind: OtherNodeClass, name: default}\n      requirements: []\n",
    )
    .await?;
    e2e.apply_example("arm64-only/workload.yaml").await?;
    let pods = e2e.running("payments", "app.kubernetes.io/name=ledger", 6).await?;
    for node in on_dovetail_nodes(&e2e, &pods).await? {
        assert_eq!(label(&node, labels::NODEPOOL), "default");
    }
    let pools = super::super::kube::nodepools(&e2e.admin);
    let condition = e2e
        .until("the broken pool's ValidationSucceeded condition", STEP, || {
            let pools = pools.clone();
            async move {
                let pool = pools.get("broken").await?;
                let conditions = pool.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
                Ok(conditions.into_iter().find(|c| c["type"] == "ValidationSucceeded"))
            }
        })
        .await?;
    assert_eq!(condition["status"], "False", "{condition}");
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(message.contains("spec.template.spec.nodeClassRef"), "the condition names the field: {message}");
    let events = e2e.events("default", "NodePool", "broken").await?;
    assert!(
        events.iter().any(|e| e.reason.as_deref() == Some("ValidationFailed")
            && e.message.as_deref().is_some_and(|m| m.contains("spec.template.spec.nodeClassRef"))),
        "an Event on the NodePool: {events:?}"
    );
    e2e.assert_exactly_once("invalid pool").await?;
    e2e.report_latency().await?;
    Ok(())
}

/// A Windows pool (`windows2022@latest`, `kubernetes.io/os In [windows]`) scales a Windows
/// Deployment: amd64 instances of the Windows image with the PowerShell bootstrap, registered by
/// the test kubelet as Windows nodes with their build, the pods bound by the scheduler. Beside it,
/// a `windows2019@latest` class on a Kubernetes version AWS publishes no Windows 2019 image for
/// says so on its `AMIsReady` and in a `NodeClassNotReady` Event; its pool takes no pods (as
/// Karpenter leaves a NodePool that is not Ready alone), so the pod only it could serve waits with
/// a `FailedScheduling` Event naming the pool and why, and the 2022 pool carries on.
#[tokio::test]
async fn a_windows_deployment_runs_on_windows_nodes() -> Result<()> {
    use base64::Engine as _;
    use dovetail_aws::ec2::userdata::windows_bootstrap_args;

    let e2e = EndToEnd::start("windows", SWEEPING).await?;
    let image = e2e.aws.windows_image("2022", crate::aws::K8S_VERSION).await;
    let class = |name: &str, alias: &str| {
        format!(
            "apiVersion: dovetail.dev/v1
kind: EC2NodeClass
metadata: {{name: {name}}}
spec:
  role: DovetailNodeRole-demo-cluster
  amiSelectorTerms: [{{alias: {alias}}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo-cluster}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo-cluster}}}}]
  userData: |
    Write-Host \"joining {name}\"
"
        )
    };
    let pool = |name: &str, class: &str| {
        format!(
            "apiVersion: dovetail.dev/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  template:
    spec:
      nodeClassRef: {{group: dovetail.dev, kind: EC2NodeClass, name: {class}}}
      requirements:
        - {{key: kubernetes.io/os, operator: In, values: [windows]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
        - {{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}}
"
        )
    };
    e2e.apply(&class("windows", "windows2022@latest")).await?;
    e2e.apply(&pool("windows", "windows")).await?;
    e2e.apply(&class("legacy", "windows2019@latest")).await?;
    // Untainted and heavier: were it used, the 2022 pods would be planned onto its claims.
    e2e.apply(&pool("legacy", "legacy").replace("spec:\n  template:", "spec:\n  weight: 10\n  template:")).await?;
    e2e.apply(
        "apiVersion: v1
kind: Namespace
metadata: {name: dotnet}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: shop, namespace: dotnet}
spec:
  replicas: 4
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec:
      nodeSelector: {kubernetes.io/os: windows}
      containers:
        - {name: c, image: mcr.microsoft.com/windows/servercore:ltsc2022, resources: {requests: {cpu: 500m, memory: 1Gi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: legacy, namespace: dotnet}
spec:
  nodeSelector: {kubernetes.io/os: windows, node.kubernetes.io/windows-build: 10.0.17763}
  containers:
    - {name: c, image: mcr.microsoft.com/windows/servercore:ltsc2019, resources: {requests: {cpu: 500m, memory: 1Gi}}}
",
    )
    .await?;
    let pods = e2e.running("dotnet", "app=shop", 4).await?;
    let ec2 = &e2e.aws.clients.ec2;
    for node in on_dovetail_nodes(&e2e, &pods).await? {
        let instance = instance_of(&node);
        assert_eq!(label(&node, labels::NODEPOOL), "windows");
        assert_eq!(label(&node, labels::OS), "windows", "{instance}");
        assert_eq!(label(&node, labels::WINDOWS_BUILD), "10.0.20348", "{instance}: Windows Server 2022's build");
        assert_eq!(label(&node, labels::ARCH), "amd64", "{instance}");
        let described = ec2.describe_instances().instance_ids(&instance).send().await?;
        let launched = &described.reservations()[0].instances()[0];
        assert_eq!(launched.image_id(), Some(image.as_str()), "{instance} runs the Windows image");
        let attribute = ec2
            .describe_instance_attribute()
            .instance_id(&instance)
            .attribute(aws_sdk_ec2::types::InstanceAttributeName::UserData)
            .send()
            .await?;
        let encoded = attribute.user_data().and_then(|u| u.value()).context("user data")?;
        let user_data = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(encoded)?)?;
        ensure!(user_data.starts_with("<powershell>\nWrite-Host \"joining windows\""), "{instance}: {user_data}");
        let args = windows_bootstrap_args(&user_data).with_context(|| format!("{instance}: {user_data}"))?;
        ensure!(args["KubeletExtraArgs"].contains("--max-pods=110"), "{instance}: {args:?}");
        // Allocatable from the core's Windows overhead: 110 pods, whatever the type's ENIs.
        let pods = node.status.as_ref().and_then(|s| s.allocatable.as_ref()).and_then(|a| a.get("pods"));
        assert_eq!(pods.map(|q| q.0.as_str()), Some("110"), "{instance}");
    }
    for claim in e2e.live_claims().await?.iter().filter(|c| c.nodepool == "windows") {
        assert_eq!(claim.labels.get(labels::OS).map(String::as_str), Some("windows"), "{}", claim.name);
    }

    // The 2019 class: AMIsReady False saying what is missing, on the class the sweeper writes;
    // the 2022 class's True.
    let classes = super::super::kube::nodeclasses(&e2e.admin);
    let amis_ready = |name: &'static str| {
        let classes = classes.clone();
        async move {
            let class = classes.get(name).await?;
            let conditions = class.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
            anyhow::Ok(conditions.into_iter().find(|c| c["type"] == "AMIsReady"))
        }
    };
    let (legacy, windows) = e2e
        .until("both classes' AMIsReady conditions", STEP, || async {
            Ok(amis_ready("legacy").await?.zip(amis_ready("windows").await?))
        })
        .await?;
    assert_eq!(windows["status"], "True", "{windows}");
    assert_eq!(legacy["status"], "False", "{legacy}");
    let message = legacy["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("amiSelectorTerms")
            && message.contains("windows2019@latest")
            && message.contains("Windows_Server-2019-English-Core-EKS_Optimized"),
        "the condition names the field, the alias and the parameter: {message}"
    );
    // Only its images are missing: its other parts resolved, and say so.
    let conditions = classes.get("legacy").await?.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
    for part in ["SubnetsReady", "SecurityGroupsReady", "InstanceProfileReady"] {
        let c = conditions.iter().find(|c| c["type"] == part);
        assert!(c.is_some_and(|c| c["status"] == "True"), "{part}: {conditions:?}");
    }
    let not_ready = e2e
        .until("a NodeClassNotReady Event on the legacy class", STEP, || {
            let e2e = &e2e;
            async move {
                let events = e2e.events("default", "EC2NodeClass", "legacy").await?;
                Ok(events.into_iter().find(|e| e.reason.as_deref() == Some("NodeClassNotReady")))
            }
        })
        .await?;
    assert_eq!(not_ready.type_.as_deref(), Some("Warning"));
    assert!(not_ready.message.as_deref().is_some_and(|m| m.contains("windows2019@latest")), "{not_ready:?}");
    let waiting = e2e
        .until("Dovetail's FailedScheduling Event on the 2019 pod naming its pool", STEP, || {
            let e2e = &e2e;
            async move {
                // The kube-scheduler writes its own under the same reason.
                let events = e2e.events("dotnet", "Pod", "legacy").await?;
                Ok(events.into_iter().find(|e| {
                    e.reason.as_deref() == Some("FailedScheduling")
                        && e.message.as_deref().is_some_and(|m| m.starts_with("Dovetail"))
                }))
            }
        })
        .await?;
    let message = waiting.message.unwrap_or_default();
    assert!(message.contains("NodePool legacy is not used while its EC2NodeClass legacy is not ready"), "{message}");
    let legacy = Api::<Pod>::namespaced(e2e.admin.clone(), "dotnet").get("legacy").await?;
    assert_eq!(node_of(&legacy), "", "nothing can run the 2019 pod");
    assert!(
        e2e.store().claims().await?.iter().all(|c| c.nodepool != "legacy"),
        "no claim was ever planned for a pool whose class is not ready"
    );
    e2e.assert_exactly_once("windows").await?;
    e2e.report_latency().await?;
    Ok(())
}
