//! The Helm chart `infra/helm/dovetail`, checked with the Helm that `tests/helm/install.sh` builds:
//!
//! - `helm lint --strict`, with the default values and with every optional feature on
//!   (`ci/all-features-values.yaml`), and its values schema refusing bad values by name;
//! - `helm template` applied to the real kube-apiserver as a server-side dry run (kubectl's strict
//!   field validation): default values, every feature on, every optional object off;
//! - the chart and the kustomize base (`infra/k8s`) install the same objects with the default
//!   settings, field for field (see [`chart_renders_what_the_kustomize_base_applies`]);
//! - the chart's version is the workspace's.
//!
//! One end-to-end scenario installs the cluster side through the chart instead of kustomize
//! (`e2e::provisioning`, `Install::Helm`).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{ensure, Context, Result};
use dovetail_tests::controlplane::{Binaries, ControlPlane};
use dovetail_tests::helm::{documents, kind_name, Helm, CHART};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::{json, Value};

use crate::infra::{differences, dry_run_objects, kubectl, repo, run};

/// The value the chart requires (any queue URL renders).
const QUEUE: &str = "https://sqs.us-east-1.amazonaws.com/111122223333/dovetail-doorbells";
const ALL_FEATURES: &str = "infra/helm/dovetail/ci/all-features-values.yaml";
/// The namespace the dry runs install into (a real install creates it: `--create-namespace`).
const NAMESPACE: &str = "dovetail-chart";

fn queue_value() -> String {
    format!("forwarder.doorbellQueueUrl={QUEUE}")
}

#[test]
fn chart_passes_helm_lint_strict_and_its_schema_names_bad_values() -> Result<()> {
    let helm = Helm::locate()?;
    let kube_version = Binaries::locate()?.version;
    let lint = |args: &[&str]| {
        let mut all = vec!["lint", "--strict", CHART, "--kube-version", &kube_version];
        all.extend(args);
        helm.run(&all)
    };
    lint(&["--set", &queue_value()])?;
    lint(&["-f", ALL_FEATURES])?;

    // The one value without a default, missing; a misspelt key; a wrong type: each refused, naming
    // the value.
    for (args, expected) in [
        (vec![], "at '/forwarder/doorbellQueueUrl'"),
        (
            vec!["--set".to_string(), queue_value(), "--set".into(), "forwarder.replica=2".into()],
            "'replica' not allowed",
        ),
        (vec!["--set".to_string(), queue_value(), "--set".into(), "forwarder.port=https".into()], "/forwarder/port"),
        (vec!["--set".to_string(), queue_value(), "--set".into(), "functions.group=it's".into()], "/functions/group"),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let refused = helm.template("dovetail", NAMESPACE, &kube_version, &args);
        let message = format!("{:#}", refused.err().with_context(|| format!("helm template {args:?} rendered"))?);
        ensure!(message.contains(expected), "helm template {args:?}: expected {expected:?} in:\n{message}");
    }
    Ok(())
}

/// The chart's version and appVersion are the workspace's (Cargo.toml), as is the forwarder
/// image's default tag.
#[test]
fn chart_version_is_the_workspace_version() -> Result<()> {
    let chart: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(repo().join(CHART).join("Chart.yaml"))?)?;
    let version = env!("CARGO_PKG_VERSION");
    ensure!(chart["version"] == json!(version), "Chart.yaml version {} is not {version}", chart["version"]);
    ensure!(chart["appVersion"] == json!(version), "Chart.yaml appVersion {} is not {version}", chart["appVersion"]);
    Ok(())
}

/// `helm template` of three value sets, applied to the API server as a server-side dry run: every
/// object passes its schema (the CRDs', the built-in kinds', the webhook configuration's and
/// admission policy's rules), and each set gives the objects it should.
#[tokio::test]
async fn chart_applies_on_the_api_server_with_defaults_every_feature_and_none() -> Result<()> {
    let control_plane = ControlPlane::shared();
    let helm = Helm::locate()?;
    // The chart's CRDs for real (the control plane installed the same files from infra/k8s/crds),
    // and a stand-in for prometheus-operator's ServiceMonitor CRD: a dry run of a custom resource
    // needs its CRD established.
    let crds = format!("{CHART}/crds");
    kubectl(control_plane, &["apply", "--server-side", "--force-conflicts", "-f", &crds])?;
    kubectl(control_plane, &["apply", "--server-side", "-f", "tests/fixtures/helm/servicemonitor-crd.yaml"])?;
    kubectl(
        control_plane,
        &["wait", "--for", "condition=established", "--timeout=30s", "crd/servicemonitors.monitoring.coreos.com"],
    )?;
    // A dry run does not keep the Namespace `--create-namespace` would make.
    let namespaces: Api<Namespace> = Api::all(control_plane.client());
    if namespaces.get_opt(NAMESPACE).await?.is_none() {
        let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
        match namespaces.create(&PostParams::default(), &namespace).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => return Err(e).context("creating the chart's namespace"),
        }
    }

    let queue = queue_value();
    let off = [
        "--set",
        &queue,
        "--set",
        "forwarder.serviceAccount.create=false",
        "--set",
        "forwarder.serviceAccount.name=existing-forwarder",
        "--set",
        "forwarder.podDisruptionBudget.enabled=false",
        "--set",
        "functions.rbac.create=false",
        "--set",
        "policy.enabled=false",
    ];
    let always = [
        "CustomResourceDefinition/ec2nodeclasses.dovetail.dev",
        "CustomResourceDefinition/nodeclaims.dovetail.dev",
        "CustomResourceDefinition/nodeoverlays.dovetail.dev",
        "CustomResourceDefinition/nodepools.dovetail.dev",
        "ClusterRole/dovetail-forwarder",
        "ClusterRoleBinding/dovetail-forwarder",
        "Deployment/dovetail-forwarder",
        "Service/dovetail-forwarder",
        "ValidatingWebhookConfiguration/dovetail-forwarder",
    ];
    let optional = [
        "ServiceAccount/dovetail-forwarder",
        "PodDisruptionBudget/dovetail-forwarder",
        "ClusterRole/dovetail-functions",
        "ClusterRoleBinding/dovetail-functions",
        "ValidatingAdmissionPolicy/dovetail-nodeclaims",
        "ValidatingAdmissionPolicyBinding/dovetail-nodeclaims",
    ];
    let cases: [(&str, Vec<&str>, Vec<&str>); 3] = [
        ("default values", vec!["--set", &queue], optional.to_vec()),
        (
            "every feature on",
            vec!["-f", ALL_FEATURES],
            [&optional[..], &["ServiceMonitor/dovetail-forwarder"]].concat(),
        ),
        ("every optional object off", off.to_vec(), vec![]),
    ];
    for (case, args, extra) in cases {
        let rendered = helm.template("dovetail", NAMESPACE, control_plane.version(), &args)?;
        let objects: BTreeSet<String> = documents(&rendered)?.iter().map(kind_name).collect();
        let expected: BTreeSet<String> = always.iter().chain(&extra).map(|s| s.to_string()).collect();
        ensure!(objects == expected, "{case}: the chart rendered {objects:?}, expected {expected:?}");

        let file = control_plane.dir().join(format!("chart-{}.yaml", case.replace(' ', "-")));
        std::fs::write(&file, &rendered)?;
        let out = kubectl(control_plane, &["apply", "--dry-run=server", "-f", &file.display().to_string()])?;
        let applied = dry_run_objects(&out);
        ensure!(applied.len() == objects.len(), "{case}: kubectl applied {applied:?}, rendered {objects:?}:\n{out}");
    }
    Ok(())
}

/// The kustomize base and the chart at its default values install the same objects, field for
/// field: every object of `kubectl kustomize infra/k8s` but its Namespace (Helm's is the release's,
/// made by `--create-namespace`) is in `helm template` and the reverse, and, labels and label
/// selectors aside (the chart's are Helm's `app.kubernetes.io/*` set), each pair is equal:
/// CRDs, RBAC rules and subjects, the webhooks' rules, selectors and client configuration, the
/// admission policy's CEL, the Deployment's pod spec (image, env, probes, resources, security
/// contexts), the Service's ports, the PodDisruptionBudget's budget. The two settings a deployment
/// must make, the doorbell queue URL and the forwarder's IAM role annotation, are given to the
/// chart as the base has them; any other difference is drift, and fails here. Each rendering's
/// label selectors must select its own forwarder pods.
#[test]
fn chart_renders_what_the_kustomize_base_applies() -> Result<()> {
    let kubectl = Binaries::locate()?.kubectl()?;
    let base = run(std::process::Command::new(kubectl).current_dir(repo()).args(["kustomize", "infra/k8s"]))?;
    let base = by_kind_name(documents(&base)?);

    let deployment = base.get("Deployment/dovetail-forwarder").context("the base's Deployment")?;
    let env = &deployment["spec"]["template"]["spec"]["containers"][0]["env"];
    let queue = env
        .as_array()
        .and_then(|env| env.iter().find(|e| e["name"] == "DOVETAIL_DOORBELL_QUEUE_URL"))
        .and_then(|e| e["value"].as_str())
        .context("the base's DOVETAIL_DOORBELL_QUEUE_URL")?;
    let service_account = base.get("ServiceAccount/dovetail-forwarder").context("the base's ServiceAccount")?;
    let role = service_account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"]
        .as_str()
        .context("the base's IRSA annotation")?;
    let helm = Helm::locate()?;
    let chart = helm.template(
        "dovetail",
        "dovetail",
        &Binaries::locate()?.version,
        &[
            "--set",
            &format!("forwarder.doorbellQueueUrl={queue}"),
            "--set-string",
            &format!("forwarder.serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn={role}"),
        ],
    )?;
    let chart = by_kind_name(documents(&chart)?);

    let base_names: BTreeSet<&String> = base.keys().filter(|k| k.as_str() != "Namespace/dovetail").collect();
    let chart_names: BTreeSet<&String> = chart.keys().collect();
    ensure!(base_names == chart_names, "kustomize has {base_names:?}, the chart {chart_names:?}");
    for (name, rendering) in [("kustomize", &base), ("the chart", &chart)] {
        forwarder_selectors_select_its_pods(rendering).with_context(|| name.to_string())?;
    }
    for (name, object) in &chart {
        let is_crd = object["kind"] == "CustomResourceDefinition";
        let labels = &object["metadata"]["labels"];
        ensure!(
            is_crd
                || (labels["app.kubernetes.io/managed-by"] == "Helm"
                    && labels["app.kubernetes.io/part-of"] == "dovetail"),
            "{name}: the chart's labels are missing: {labels}"
        );
    }
    let mut found = Vec::new();
    for name in chart_names {
        differences(&comparable(&base[name]), &comparable(&chart[name]), name, &mut found);
    }
    ensure!(found.is_empty(), "the chart and the kustomize base differ (kustomize / chart):\n{}", found.join("\n"));
    Ok(())
}

fn by_kind_name(documents: Vec<Value>) -> BTreeMap<String, Value> {
    documents.into_iter().map(|d| (kind_name(&d), d)).collect()
}

/// An object without its labels and the label selectors that pick the forwarder's pods, its
/// numbers compared by value (`kubectl kustomize` writes the CRDs' `maximum: 100.0` as `100`;
/// Helm copies the files as they are).
fn comparable(object: &Value) -> Value {
    fn numbers_by_value(value: &mut Value) {
        match value {
            Value::Number(n) => {
                if let Some(whole) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 1e15) {
                    *value = json!(whole as i64);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(numbers_by_value),
            Value::Object(fields) => fields.values_mut().for_each(numbers_by_value),
            _ => {}
        }
    }
    let mut object = object.clone();
    numbers_by_value(&mut object);
    if let Some(metadata) = object["metadata"].as_object_mut() {
        metadata.remove("labels");
    }
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    if let Some(spec) = object["spec"].as_object_mut() {
        match kind.as_str() {
            "Deployment" | "PodDisruptionBudget" | "Service" => {
                spec.remove("selector");
            }
            _ => {}
        }
        if let Some(template) = spec.get_mut("template").and_then(|t| t["metadata"].as_object_mut()) {
            template.remove("labels");
        }
    }
    object
}

/// The Deployment's, the Service's and the PodDisruptionBudget's selectors all select the
/// Deployment's pods.
fn forwarder_selectors_select_its_pods(objects: &BTreeMap<String, Value>) -> Result<()> {
    let deployment = objects.get("Deployment/dovetail-forwarder").context("no forwarder Deployment")?;
    let pod_labels = deployment["spec"]["template"]["metadata"]["labels"].as_object().context("pod labels")?;
    let selects = |selector: &Value| {
        selector.as_object().is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| pod_labels.get(k) == Some(v)))
    };
    let object = |name: &str| objects.get(name).with_context(|| format!("no {name}"));
    ensure!(selects(&deployment["spec"]["selector"]["matchLabels"]), "the Deployment's selector");
    ensure!(selects(&object("Service/dovetail-forwarder")?["spec"]["selector"]), "the Service's selector");
    ensure!(
        selects(&object("PodDisruptionBudget/dovetail-forwarder")?["spec"]["selector"]["matchLabels"]),
        "the PodDisruptionBudget's selector"
    );
    Ok(())
}
