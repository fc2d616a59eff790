//! The local control plane (real etcd, kube-apiserver and kube-scheduler from
//! `tests/controlplane/build.sh`): Dovetail's CRDs are served and validated, and the real
//! scheduler binds Pods to Nodes that a test registers as a kubelet would.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use dovetail_tests::controlplane::{self, Binaries, ControlPlane};
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde::Deserialize as _;
use serde_json::json;

pub(crate) const SCHEDULING_TIMEOUT: Duration = Duration::from_secs(30);

/// Polls `check` every 100 ms until it returns `Some`, for at most `timeout`.
pub(crate) async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A Ready Node `<namespace>-<suffix>` labelled `dovetail.dev/test=<namespace>` so that the
/// test's Pods select it alone (the control plane is shared by every test in the process).
pub(crate) async fn test_node(
    client: &Client,
    namespace: &str,
    suffix: &str,
    taints: serde_json::Value,
    allocatable: &[(&str, &str)],
) -> Result<Node> {
    let name = format!("{namespace}-{suffix}");
    let node: Node = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": "us-east-1a",
                "dovetail.dev/test": namespace,
            },
        },
        "spec": { "providerID": format!("aws:///us-east-1a/i-{name}"), "taints": taints },
    }))?;
    controlplane::register_ready_node(client, node, allocatable).await
}

fn test_pod(name: &str, namespace: &str, cpu: &str, memory: &str) -> Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": namespace },
        "spec": {
            "nodeSelector": { "dovetail.dev/test": namespace },
            "containers": [{
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "resources": { "requests": { "cpu": cpu, "memory": memory } },
            }],
        },
    }))?)
}

pub(crate) fn pod_scheduled(pod: &Pod) -> Option<&PodCondition> {
    pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "PodScheduled")
}

#[tokio::test]
async fn scheduler_binds_a_pod_to_a_ready_node() -> Result<()> {
    let control_plane = ControlPlane::shared();
    let client = control_plane.client();
    let namespace = control_plane.namespace(&client, "bind").await?;
    let node =
        test_node(&client, &namespace, "node", json!([]), &[("cpu", "4"), ("memory", "16Gi"), ("pods", "110")]).await?;
    let node_name = node.metadata.name.clone().unwrap();
    let ready = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    assert!(
        ready.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
        "the Node's status keeps the Ready condition: {:?}",
        node.status
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    pods.create(&PostParams::default(), &test_pod("web", &namespace, "500m", "512Mi")?).await?;
    let pods = &pods;
    let bound = eventually("the scheduler to bind pod web", SCHEDULING_TIMEOUT, || async move {
        let pod = pods.get("web").await?;
        Ok(pod.spec.as_ref().and_then(|s| s.node_name.clone()).map(|node| (node, pod)))
    })
    .await
    .with_context(|| control_plane.log_tail("kube-scheduler", 30))?;
    assert_eq!(bound.0, node_name);
    let condition = pod_scheduled(&bound.1).expect("a bound pod has PodScheduled");
    assert_eq!(condition.status, "True");
    Ok(())
}

#[tokio::test]
async fn a_pod_that_fits_nowhere_is_unschedulable() -> Result<()> {
    let control_plane = ControlPlane::shared();
    let client = control_plane.client();
    let namespace = control_plane.namespace(&client, "nofit").await?;
    test_node(&client, &namespace, "node", json!([]), &[("cpu", "2"), ("memory", "4Gi"), ("pods", "110")]).await?;

    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    pods.create(&PostParams::default(), &test_pod("huge", &namespace, "64", "1Ti")?).await?;
    let pods = &pods;
    let condition = eventually("PodScheduled=False on pod huge", SCHEDULING_TIMEOUT, || async move {
        let pod = pods.get("huge").await?;
        Ok(pod_scheduled(&pod).filter(|c| c.status == "False").cloned())
    })
    .await
    .with_context(|| control_plane.log_tail("kube-scheduler", 30))?;
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    let message = condition.message.unwrap_or_default();
    assert!(message.contains("Insufficient cpu") && message.contains("Insufficient memory"), "{message}");
    let pod = pods.get("huge").await?;
    assert_eq!(pod.spec.and_then(|s| s.node_name), None);
    Ok(())
}

/// Dovetail's kinds by name, from the installed CRDs: kind → (group, version, plural).
async fn dovetail_kinds(client: &Client) -> Result<BTreeMap<String, ApiResource>> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut kinds = BTreeMap::new();
    for crd in crds.list(&Default::default()).await? {
        if crd.spec.group != "dovetail.dev" {
            continue;
        }
        assert!(
            controlplane::crd_established(&crd),
            "CRD {:?} is not Established: {:?}",
            crd.metadata.name,
            crd.status
        );
        let version = crd.spec.versions.iter().find(|v| v.storage).context("a CRD without a storage version")?;
        let gvk = GroupVersionKind::gvk(&crd.spec.group, &version.name, &crd.spec.names.kind);
        kinds.insert(crd.spec.names.kind.clone(), ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural));
    }
    Ok(kinds)
}

#[tokio::test]
async fn crds_are_established_and_validate_nodepools() -> Result<()> {
    let control_plane = ControlPlane::shared();
    let client = control_plane.client();
    let kinds = dovetail_kinds(&client).await?;
    assert_eq!(
        kinds.keys().map(String::as_str).collect::<Vec<_>>(),
        ["EC2NodeClass", "NodeClaim", "NodeOverlay", "NodePool"]
    );

    // An example's manifests go through the real schema (with its CEL rules) and defaulting.
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/examples/gpu/nodepools.yaml");
    let text = std::fs::read_to_string(&example)?;
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let object: DynamicObject = serde_yaml_ng::from_value(serde_yaml_ng::Value::deserialize(document)?)?;
        let kind = object.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
        let resource = kinds.get(&kind).with_context(|| format!("unknown kind {kind}"))?;
        let name = object.metadata.name.clone().unwrap();
        Api::<DynamicObject>::all_with(client.clone(), resource)
            .patch(&name, &PatchParams::apply("dovetail-tests").force(), &Patch::Apply(&object))
            .await
            .with_context(|| format!("applying {kind} {name} from {}", example.display()))?;
    }
    let nodepools = Api::<DynamicObject>::all_with(client.clone(), &kinds["NodePool"]);
    let gpu = nodepools.get("gpu").await?;
    assert_eq!(gpu.data["spec"]["template"]["spec"]["taints"][0]["key"], "nvidia.com/gpu");
    let general = nodepools.get("general").await?;
    assert_eq!(
        general.data["spec"]["disruption"]["consolidationPolicy"], "WhenEmptyOrUnderutilized",
        "the CRD's defaults are applied by the apiserver: {}",
        general.data["spec"]
    );

    // An invalid spec is refused by the apiserver.
    let mut invalid = gpu.clone();
    invalid.metadata = kube::api::ObjectMeta { name: Some("invalid".into()), ..Default::default() };
    invalid.data["spec"]["disruption"]["consolidationPolicy"] = json!("Sometimes");
    let error = nodepools
        .create(&PostParams::default(), &invalid)
        .await
        .expect_err("an unknown consolidationPolicy is refused");
    match error {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert!(status.message.contains("consolidationPolicy"), "{}", status.message);
        }
        other => panic!("expected an API error, got {other}"),
    }
    Ok(())
}

#[test]
fn missing_binaries_are_named_with_the_build_script() {
    let empty = std::env::temp_dir().join(format!("dovetail-empty-cache-{}", std::process::id()));
    let error = Binaries::in_cache(&empty, "v1.34.0").unwrap_err().to_string();
    for needle in ["kube-apiserver", "kube-scheduler", "etcd", "v1.34.0", "tests/controlplane/build.sh"] {
        assert!(error.contains(needle), "{needle} not in: {error}");
    }
}

/// A private control plane starts, serves the built version, and leaves no process or
/// directory behind when dropped.
#[tokio::test]
async fn a_private_control_plane_stops_cleanly() -> Result<()> {
    let control_plane = ControlPlane::start()?;
    eprintln!("control plane {} started in {:.2?}", control_plane.version(), control_plane.startup_time());
    let version = control_plane.client().apiserver_version().await?;
    assert_eq!(version.git_version, control_plane.version());
    assert!(control_plane.kubeconfig().is_file());

    let pids = control_plane.pids();
    let dir = control_plane.dir().to_path_buf();
    assert_eq!(pids.len(), 3);
    let stopping = Instant::now();
    drop(control_plane);
    eprintln!("control plane stopped in {:.2?}", stopping.elapsed());
    for pid in pids {
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "process {pid} outlived the control plane");
    }
    assert!(!dir.exists(), "{} outlived the control plane", dir.display());
    Ok(())
}
