//! The Kubernetes adapter (`shared/kube`) against the real control plane, running as the
//! functions do: a client impersonating a member of `dovetail:functions`, allowed only what
//! `infra/k8s/rbac/functions-clusterrole.yaml` grants. Every test has a namespace and nodes of its
//! own (the control plane is shared), and pods select their test's nodes by label.

mod import;
mod overlays;
mod read;
mod snapshot;
mod writes;

use crate::controlplane::{eventually, pod_scheduled, SCHEDULING_TIMEOUT};

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use dovetail_kube::{adapter_settings, KubeAdapter};
use dovetail_tests::controlplane::ControlPlane;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

/// The user the functions' IAM role maps to, as far as RBAC is concerned.
pub const FUNCTIONS_GROUP: &str = "dovetail:functions";

/// Applies the functions' ClusterRole and binding from `infra/k8s/rbac/` (server-side apply, so
/// every test may do it).
pub async fn apply_rbac(admin: &Client) -> Result<()> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/k8s/rbac/functions-clusterrole.yaml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let params = PatchParams::apply("dovetail-tests").force();
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let value: Value = serde::Deserialize::deserialize(document)?;
        match value["kind"].as_str() {
            Some("ClusterRole") => {
                let role: ClusterRole = serde_json::from_value(value)?;
                let name = role.metadata.name.clone().context("a ClusterRole without a name")?;
                Api::<ClusterRole>::all(admin.clone()).patch(&name, &params, &Patch::Apply(&role)).await?;
            }
            Some("ClusterRoleBinding") => {
                let binding: ClusterRoleBinding = serde_json::from_value(value)?;
                let name = binding.metadata.name.clone().context("a ClusterRoleBinding without a name")?;
                Api::<ClusterRoleBinding>::all(admin.clone()).patch(&name, &params, &Patch::Apply(&binding)).await?;
            }
            other => bail!("{}: unexpected kind {other:?}", path.display()),
        }
    }
    Ok(())
}

/// A client that is a member of `dovetail:functions` and nothing else (the admin impersonates a
/// user in that group), with the adapter's settings.
pub async fn functions_client(control_plane: &ControlPlane, admin: &Client) -> Result<Client> {
    apply_rbac(admin).await?;
    functions_group_client(control_plane).await
}

/// [`functions_client`] under whatever RBAC the cluster already has for `dovetail:functions` (the
/// Helm chart's, when it installed the cluster side), once it has taken effect.
pub async fn functions_group_client(control_plane: &ControlPlane) -> Result<Client> {
    let mut config = control_plane.config().clone();
    config.auth_info.impersonate = Some("dovetail-functions-test".into());
    config.auth_info.impersonate_groups = Some(vec![FUNCTIONS_GROUP.into()]);
    let client = Client::try_from(adapter_settings(config))?;
    // The authorizer learns of a new binding through its informers: wait until it has.
    let nodes: Api<Node> = Api::all(client.clone());
    let nodes = &nodes;
    eventually("the functions' ClusterRoleBinding to take effect", Duration::from_secs(10), || async move {
        match nodes.list(&ListParams::default().limit(1)).await {
            Ok(_) => Ok(Some(())),
            Err(kube::Error::Api(s)) if s.code == 403 => Ok(None),
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    Ok(client)
}

/// The adapter as a function runs it.
pub async fn functions_adapter(control_plane: &ControlPlane, admin: &Client) -> Result<KubeAdapter> {
    Ok(KubeAdapter::new(functions_client(control_plane, admin).await?).with_reporting_instance("integration-test"))
}

/// What every adapter test starts from: the shared control plane's admin client, a namespace of
/// the test's own and the adapter running as the functions do.
pub struct Fixture {
    pub admin: Client,
    pub ns: String,
    pub adapter: KubeAdapter,
}

pub async fn fixture(prefix: &str) -> Result<Fixture> {
    let control_plane = ControlPlane::shared();
    let admin = control_plane.client();
    let ns = control_plane.namespace(&admin, prefix).await?;
    let adapter = functions_adapter(control_plane, &admin).await?;
    Ok(Fixture { admin, ns, adapter })
}

/// A Ready node `<namespace>-<suffix>` labelled `dovetail.dev/test=<namespace>`, with `taints`.
pub async fn test_node(admin: &Client, namespace: &str, suffix: &str, taints: Value) -> Result<Node> {
    crate::controlplane::test_node(
        admin,
        namespace,
        suffix,
        taints,
        &[("cpu", "2"), ("memory", "4Gi"), ("pods", "110")],
    )
    .await
}

/// A pod that only this test's nodes can run.
pub fn test_pod(namespace: &str, name: &str, cpu: &str, extra: Value) -> Result<Pod> {
    let mut pod = json!({
        "metadata": { "name": name, "namespace": namespace, "labels": { "app": name } },
        "spec": {
            "nodeSelector": { "dovetail.dev/test": namespace },
            "containers": [{
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "resources": { "requests": { "cpu": cpu, "memory": "64Mi" } },
            }],
        },
    });
    merge(&mut pod, extra);
    Ok(serde_json::from_value(pod)?)
}

/// JSON merge of `extra` into `base` (objects merge, anything else replaces).
fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, e) => *b = e,
    }
}

pub async fn create_pod(admin: &Client, pod: &Pod) -> Result<Pod> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    Ok(Api::<Pod>::namespaced(admin.clone(), &namespace).create(&PostParams::default(), pod).await?)
}

/// Waits for the real scheduler to bind the pod; returns its node.
pub async fn bound(admin: &Client, namespace: &str, name: &str) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), namespace);
    let pods = &pods;
    eventually(&format!("the scheduler to bind {namespace}/{name}"), SCHEDULING_TIMEOUT, || async move {
        Ok(pods.get(name).await?.spec.and_then(|s| s.node_name))
    })
    .await
    .with_context(|| ControlPlane::shared().log_tail("kube-scheduler", 30))
}

/// Waits for the real scheduler to mark the pod `PodScheduled=False` (reason Unschedulable).
pub async fn unschedulable(admin: &Client, namespace: &str, name: &str) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), namespace);
    let pods = &pods;
    eventually(&format!("{namespace}/{name} to be marked Unschedulable"), SCHEDULING_TIMEOUT, || async move {
        let pod = pods.get(name).await?;
        Ok(pod_scheduled(&pod)
            .filter(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
            .map(|_| ()))
    })
    .await
    .with_context(|| ControlPlane::shared().log_tail("kube-scheduler", 30))
}

pub fn nodepools(admin: &Client) -> Api<DynamicObject> {
    Api::all_with(admin.clone(), &ApiResource::erase::<dovetail_api::crd::NodePool>(&()))
}

pub fn nodeclasses(admin: &Client) -> Api<DynamicObject> {
    Api::all_with(admin.clone(), &ApiResource::erase::<dovetail_api::crd::EC2NodeClass>(&()))
}

/// A NodePool that passes the CRD's schema; `class_kind` other than `EC2NodeClass` makes it one
/// Dovetail rejects (field `spec.template.spec.nodeClassRef`).
pub async fn create_nodepool(admin: &Client, name: &str, class_kind: &str) -> Result<DynamicObject> {
    let group = if class_kind == "EC2NodeClass" { "dovetail.dev" } else { "example.com" };
    let pool: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "dovetail.dev/v1",
        "kind": "NodePool",
        "metadata": { "name": name },
        "spec": {
            "template": { "spec": {
                "nodeClassRef": { "group": group, "kind": class_kind, "name": name },
                "requirements": [{ "key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"] }],
            }},
            "limits": { "cpu": "100" },
        },
    }))?;
    Ok(nodepools(admin).create(&PostParams::default(), &pool).await?)
}

pub async fn create_nodeclass(admin: &Client, name: &str) -> Result<DynamicObject> {
    let class: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "dovetail.dev/v1",
        "kind": "EC2NodeClass",
        "metadata": { "name": name },
        "spec": {
            "role": "DovetailNodeRole-test",
            "amiSelectorTerms": [{ "alias": "al2023@latest" }],
            "subnetSelectorTerms": [{ "tags": { "dovetail.dev/discovery": "test" } }],
            "securityGroupSelectorTerms": [{ "tags": { "dovetail.dev/discovery": "test" } }],
        },
    }))?;
    Ok(nodeclasses(admin).create(&PostParams::default(), &class).await?)
}
