//! The forwarder (`functions/forwarder`) as the real kube-apiserver calls it: registered by the
//! webhook configuration of `infra/k8s/forwarder/webhook.yaml` (pointed at
//! `https://127.0.0.1:<port>` by `url:` instead of the Service, and narrowed to the test's own
//! namespace and nodes since the control plane is shared), its `caBundle` patched by the
//! forwarder itself at start.
//!
//! The forwarder runs as a process of its own — this test binary run again with only
//! [`forwarder_process`] selected — so it can be hung and killed like a pod.
//!
//! Doorbells are read from the forwarder's debug log (one line per doorbell, with its body) until
//! the moto harness is on main; the SQS sending itself (batches, retries, bounds) is tested in
//! the forwarder's unit tests against an in-memory sink.

use std::io::Read as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use dovetail_tests::controlplane::ControlPlane;
use k8s_openapi::api::admissionregistration::v1::{ValidatingWebhookConfiguration, WebhookClientConfig};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::controlplane::eventually;
use crate::kube::{create_pod, test_node, test_pod, unschedulable};

/// Set in the child's environment: [`forwarder_process`] runs the forwarder only then.
const CHILD: &str = "DOVETAIL_FORWARDER_TEST_CHILD";
const DOORBELL_TIMEOUT: Duration = Duration::from_secs(20);

/// Not a test: the forwarder process the tests below start (this binary run again with
/// `--exact forwarder::forwarder_process --ignored`). Exits with the forwarder's status.
#[test]
#[ignore = "the forwarder process the forwarder tests start; not a test of its own"]
fn forwarder_process() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let code = match dovetail_forwarder::run_process() {
        Ok(()) => 0,
        Err(_) => 1,
    };
    std::process::exit(code);
}

/// A forwarder process, killed when dropped.
struct Forwarder {
    child: Child,
    log: PathBuf,
}

impl Forwarder {
    /// Starts a forwarder for webhook configuration `configuration`, listening on 127.0.0.1:`port`
    /// and reaching the API server with `kubeconfig`.
    fn start(
        control_plane: &ControlPlane,
        kubeconfig: &Path,
        configuration: &str,
        namespace: &str,
        port: u16,
    ) -> Result<Forwarder> {
        let log = control_plane.dir().join(format!("forwarder-{configuration}.log"));
        let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        // Nothing listens there until the moto harness is on main: sends fail and are counted.
        let sqs = format!("http://127.0.0.1:{}", closed_port()?);
        let mut command = Command::new(std::env::current_exe()?);
        command
            .args(["--exact", "forwarder::forwarder_process", "--ignored", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .env("KUBECONFIG", kubeconfig)
            .env("DOVETAIL_DOORBELL_QUEUE_URL", format!("{sqs}/000000000000/doorbells"))
            .env("DOVETAIL_ENDPOINT_URL", &sqs)
            .env("DOVETAIL_WEBHOOK_CONFIGURATION", configuration)
            .env("DOVETAIL_SERVICE_NAME", "dovetail-forwarder")
            .env("DOVETAIL_SERVICE_NAMESPACE", namespace)
            .env("DOVETAIL_LISTEN_ADDRESS", format!("127.0.0.1:{port}"))
            .env("DOVETAIL_EXTRA_SANS", "127.0.0.1")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("RUST_LOG", "info,dovetail_forwarder=debug")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        // SAFETY: prctl is async-signal-safe; it only asks the kernel to kill the child when the
        // thread that started it ends, so a test that panics or is killed leaves no forwarder.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command.spawn().context("starting the forwarder")?;
        Ok(Forwarder { child, log })
    }

    fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = std::fs::File::open(&self.log) {
            let _ = file.read_to_string(&mut text);
        }
        text
    }

    /// Fails with the forwarder's log when it has exited.
    fn check_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("the forwarder exited ({status}); its log:\n{}", self.log());
        }
        Ok(())
    }

    /// Every doorbell the forwarder rang so far, from its debug log.
    fn doorbells(&self) -> Vec<Value> {
        self.log()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|line| line["fields"]["message"] == "doorbell")
            .filter_map(|line| serde_json::from_str(line["fields"]["body"].as_str()?).ok())
            .collect()
    }

    /// Waits for a doorbell that has every field of `expected`.
    async fn doorbell(&mut self, expected: Value) -> Result<Value> {
        let deadline = Instant::now() + DOORBELL_TIMEOUT;
        loop {
            self.check_running()?;
            if let Some(found) = self.doorbells().into_iter().find(|d| matches(d, &expected)) {
                return Ok(found);
            }
            if Instant::now() > deadline {
                bail!("no doorbell {expected} within {DOORBELL_TIMEOUT:?}; the forwarder's log:\n{}", self.log());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: a plain kill(2) of our own child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `doorbell` has every field of `expected` with the same value.
fn matches(doorbell: &Value, expected: &Value) -> bool {
    expected.as_object().is_some_and(|fields| fields.iter().all(|(k, v)| &doorbell[k] == v))
}

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The manifest's webhook configuration, renamed, pointed at `https://127.0.0.1:<port>` and
/// narrowed to the test's namespace (pods) and to nodes labelled `dovetail.dev/test=<namespace>`,
/// its own selectors kept.
fn test_configuration(name: &str, port: u16, namespace: &str) -> Result<ValidatingWebhookConfiguration> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/k8s/forwarder/webhook.yaml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut configuration: ValidatingWebhookConfiguration = serde_yaml_ng::from_str(&text)?;
    configuration.metadata.name = Some(name.to_string());
    for webhook in configuration.webhooks.iter_mut().flatten() {
        assert!(webhook.client_config.ca_bundle.is_none(), "the forwarder sets the caBundle, the manifest does not");
        webhook.client_config =
            WebhookClientConfig { url: Some(format!("https://127.0.0.1:{port}/admission")), ..Default::default() };
        let (selector, key) = if webhook.name.starts_with("pods.") {
            (webhook.namespace_selector.get_or_insert_with(Default::default), "kubernetes.io/metadata.name")
        } else {
            (webhook.object_selector.get_or_insert_with(Default::default), "dovetail.dev/test")
        };
        selector.match_expressions.get_or_insert_with(Vec::new).push(LabelSelectorRequirement {
            key: key.into(),
            operator: "In".into(),
            values: Some(vec![namespace.to_string()]),
        });
    }
    Ok(configuration)
}

/// The documents of a manifest under `infra/k8s/forwarder/`.
fn manifest(file: &str) -> Result<Vec<Value>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/k8s/forwarder").join(file);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut documents = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        documents.push(serde::Deserialize::deserialize(document)?);
    }
    Ok(documents)
}

/// Runs the forwarder as its ServiceAccount would: `rbac.yaml` applied for the test's
/// configuration and namespace, and a kubeconfig that impersonates
/// `system:serviceaccount:<namespace>:dovetail-forwarder` (returned).
async fn service_account_kubeconfig(
    control_plane: &ControlPlane,
    admin: &Client,
    namespace: &str,
    configuration: &str,
) -> Result<PathBuf> {
    let params = PatchParams::apply("dovetail-tests").force();
    for mut document in manifest("rbac.yaml")? {
        document["metadata"]["name"] = json!(configuration);
        match document["kind"].as_str() {
            Some("ClusterRole") => {
                let rules = document["rules"].as_array_mut().context("rules")?;
                assert_eq!(rules.len(), 1, "one rule: its own webhook configuration");
                assert_eq!(rules[0]["resourceNames"], json!(["dovetail-forwarder"]));
                rules[0]["resourceNames"] = json!([configuration]);
                let role: ClusterRole = serde_json::from_value(document)?;
                Api::<ClusterRole>::all(admin.clone()).patch(configuration, &params, &Patch::Apply(&role)).await?;
            }
            Some("ClusterRoleBinding") => {
                document["roleRef"]["name"] = json!(configuration);
                document["subjects"][0]["namespace"] = json!(namespace);
                let binding: ClusterRoleBinding = serde_json::from_value(document)?;
                Api::<ClusterRoleBinding>::all(admin.clone())
                    .patch(configuration, &params, &Patch::Apply(&binding))
                    .await?;
            }
            other => bail!("rbac.yaml: unexpected kind {other:?}"),
        }
    }
    let user = format!("system:serviceaccount:{namespace}:dovetail-forwarder");
    let groups = vec!["system:serviceaccounts".to_string(), format!("system:serviceaccounts:{namespace}")];

    // The authorizer learns of a new binding through its informers: wait until it has.
    let mut config = control_plane.config().clone();
    config.auth_info.impersonate = Some(user.clone());
    config.auth_info.impersonate_groups = Some(groups.clone());
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(Client::try_from(config)?);
    let configurations = &configurations;
    eventually("the forwarder's ClusterRoleBinding to take effect", Duration::from_secs(10), || async move {
        match configurations.get(configuration).await {
            Ok(_) => Ok(Some(())),
            Err(kube::Error::Api(s)) if s.code == 403 => Ok(None),
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    // And nothing else: not even its neighbours' configurations, nor pods.
    let forbidden = |result: Result<_, kube::Error>| matches!(result, Err(kube::Error::Api(s)) if s.code == 403);
    assert!(forbidden(configurations.list(&Default::default()).await.map(|_| ())));
    let mut config = control_plane.config().clone();
    config.auth_info.impersonate = Some(user.clone());
    config.auth_info.impersonate_groups = Some(groups.clone());
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(Client::try_from(config)?, namespace);
    assert!(forbidden(pods.list(&Default::default()).await.map(|_| ())));

    let mut kubeconfig: Value = serde_json::from_slice(&std::fs::read(control_plane.kubeconfig())?)?;
    let entry = &mut kubeconfig["users"][0]["user"];
    entry["as"] = json!(user);
    entry["as-groups"] = json!(groups);
    let path = control_plane.dir().join(format!("forwarder-{namespace}.kubeconfig"));
    std::fs::write(&path, serde_json::to_vec_pretty(&kubeconfig)?)?;
    Ok(path)
}

/// Waits until every webhook of `name` has a caBundle (the forwarder patched it).
async fn ca_bundle_set(client: &Client, name: &str, forwarder: &mut Forwarder) -> Result<()> {
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        forwarder.check_running()?;
        let configuration = configurations.get(name).await?;
        let webhooks = configuration.webhooks.unwrap_or_default();
        if webhooks.iter().all(|w| w.client_config.ca_bundle.as_ref().is_some_and(|b| !b.0.is_empty())) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the forwarder did not set the caBundle of {name}; its log:\n{}", forwarder.log());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn forwarder_rings_for_pods_and_nodes_and_the_cluster_outlives_it() -> Result<()> {
    let control_plane = ControlPlane::shared();
    let admin = control_plane.client();
    let ns = control_plane.namespace(&admin, "forwarder").await?;
    let port = closed_port()?;
    let name = format!("dovetail-forwarder-{ns}");
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    configurations.create(&PostParams::default(), &test_configuration(&name, port, &ns)?).await?;
    // As its ServiceAccount, with only what rbac.yaml grants.
    let kubeconfig = service_account_kubeconfig(control_plane, &admin, &ns, &name).await?;
    let mut forwarder = Forwarder::start(control_plane, &kubeconfig, &name, &ns, port)?;
    ca_bundle_set(&admin, &name, &mut forwarder).await?;

    // A DaemonSet's pod (by the label its controller sets) is left out by the objectSelector;
    // the scheduler's status update reaches the API server before `unschedulable` returns, so
    // the webhook, had it been called, has logged by then.
    let daemon_pod = json!({"metadata": {"labels": {"pod-template-generation": "1"}}});
    create_pod(&admin, &test_pod(&ns, "daemon", "64", daemon_pod)?).await?;
    unschedulable(&admin, &ns, "daemon").await?;

    // A pod no node can run: the scheduler marks it Unschedulable, the webhook rings.
    create_pod(&admin, &test_pod(&ns, "huge", "64", json!({}))?).await?;
    unschedulable(&admin, &ns, "huge").await?;
    let bell = forwarder.doorbell(json!({"pod": format!("{ns}/huge")})).await?;
    let at = bell["unschedulableAt"].as_str().context("unschedulableAt")?;
    at.parse::<k8s_openapi::jiff::Timestamp>().with_context(|| format!("unschedulableAt {at:?} is not RFC 3339"))?;
    assert!(
        !forwarder.doorbells().iter().any(|d| d["pod"] == format!("{ns}/daemon")),
        "a DaemonSet pod rang: {:?}",
        forwarder.doorbells()
    );

    // A node registers and turns Ready (the harness acts as its kubelet), heartbeats, and goes.
    let node = test_node(&admin, &ns, "n1", json!([])).await?;
    let node_name = node.metadata.name.clone().context("a node without a name")?;
    forwarder.doorbell(json!({"node": node_name, "event": "registered"})).await?;
    forwarder.doorbell(json!({"node": node_name, "event": "ready"})).await?;
    let nodes: Api<Node> = Api::all(admin.clone());
    let heartbeat = json!({"status": {"conditions": [{
        "type": "Ready", "status": "True", "reason": "KubeletReady",
        "lastHeartbeatTime": k8s_openapi::jiff::Timestamp::now().to_string(),
    }]}});
    nodes.patch_status(&node_name, &PatchParams::default(), &Patch::Strategic(&heartbeat)).await?;
    nodes.delete(&node_name, &DeleteParams::default()).await?;
    forwarder.doorbell(json!({"node": node_name, "event": "gone"})).await?;
    let readies =
        forwarder.doorbells().iter().filter(|d| d["node"] == node_name.as_str() && d["event"] == "ready").count();
    assert_eq!(readies, 1, "a heartbeat that changes nothing does not ring");

    // A hung forwarder: the API server waits for the webhook's timeout (2 s), then admits.
    forwarder.signal(libc::SIGSTOP);
    let started = Instant::now();
    let hung = test_node(&admin, &ns, "hung", json!([])).await?;
    let waited = started.elapsed();
    eprintln!("node registered (create + status) with the forwarder hung in {waited:.2?}");
    assert!(hung.metadata.uid.is_some());
    assert!(
        (Duration::from_millis(1900)..Duration::from_secs(15)).contains(&waited),
        "registering a node with the forwarder hung took {waited:?}: expected the webhook's 2 s timeouts, then success"
    );

    // A dead forwarder: calls fail at once and the API server carries on.
    forwarder.signal(libc::SIGKILL);
    let _ = forwarder.child.wait();
    let started = Instant::now();
    create_pod(&admin, &test_pod(&ns, "after", "64", json!({}))?).await?;
    unschedulable(&admin, &ns, "after").await?;
    let gone = test_node(&admin, &ns, "after", json!([])).await?;
    nodes.delete(gone.metadata.name.as_deref().unwrap_or_default(), &DeleteParams::default()).await?;
    nodes.delete(hung.metadata.name.as_deref().unwrap_or_default(), &DeleteParams::default()).await?;
    let waited = started.elapsed();
    eprintln!("pod scheduled as unschedulable, node registered and two deleted without the forwarder in {waited:.2?}");
    assert!(waited < Duration::from_secs(10), "the API server took {waited:?} without the forwarder");

    configurations.delete(&name, &DeleteParams::default()).await?;
    Api::<ClusterRoleBinding>::all(admin.clone()).delete(&name, &DeleteParams::default()).await?;
    Api::<ClusterRole>::all(admin.clone()).delete(&name, &DeleteParams::default()).await?;
    Ok(())
}

/// What the forwarder says when it cannot start: a missing webhook configuration is named, and
/// the process exits with an error instead of serving a certificate nobody trusts.
#[tokio::test]
async fn forwarder_without_its_webhook_configuration_stops_and_says_why() -> Result<()> {
    let control_plane = ControlPlane::shared();
    let admin = control_plane.client();
    let ns = control_plane.namespace(&admin, "forwarder-missing").await?;
    let kubeconfig = control_plane.kubeconfig();
    let mut forwarder = Forwarder::start(control_plane, kubeconfig, "no-such-configuration", &ns, closed_port()?)?;
    let status = eventually("the forwarder to exit", Duration::from_secs(30), || {
        let status = forwarder.child.try_wait();
        async move { Ok(status?) }
    })
    .await?;
    assert!(!status.success());
    let log = forwarder.log();
    assert!(log.contains("no-such-configuration") && log.contains("does not exist"), "{log}");
    Ok(())
}

/// Every manifest in `infra/k8s/forwarder/` passes the real API server's validation (a
/// server-side dry run, in the test's namespace), and the Deployment's environment is a complete
/// forwarder configuration.
#[tokio::test]
async fn forwarder_manifests_are_valid() -> Result<()> {
    let control_plane = ControlPlane::shared();
    let admin = control_plane.client();
    let ns = control_plane.namespace(&admin, "forwarder-manifests").await?;
    let kustomization = &manifest("kustomization.yaml")?[0];
    let files: Vec<&str> =
        kustomization["resources"].as_array().context("resources")?.iter().filter_map(Value::as_str).collect();
    let mut kinds = Vec::new();
    let dry_run = PostParams { dry_run: true, ..PostParams::default() };
    for file in files {
        for mut document in manifest(file)? {
            let kind = document["kind"].as_str().context("kind")?.to_string();
            let (group, version) = match document["apiVersion"].as_str().context("apiVersion")?.split_once('/') {
                Some((group, version)) => (group.to_string(), version.to_string()),
                None => (String::new(), document["apiVersion"].as_str().unwrap_or_default().to_string()),
            };
            let gvk = kube::api::GroupVersionKind::gvk(&group, &version, &kind);
            let (resource, capabilities) = kube::discovery::pinned_kind(&admin, &gvk).await?;
            let api: Api<kube::api::DynamicObject> = if capabilities.scope == kube::discovery::Scope::Namespaced {
                document["metadata"]["namespace"] = json!(ns);
                Api::namespaced_with(admin.clone(), &ns, &resource)
            } else {
                Api::all_with(admin.clone(), &resource)
            };
            if kind == "Deployment" {
                check_forwarder_environment(&document)?;
            }
            let object: kube::api::DynamicObject = serde_json::from_value(document)?;
            api.create(&dry_run, &object).await.with_context(|| format!("{file}: {kind} refused"))?;
            kinds.push(kind);
        }
    }
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "Namespace",
            "Service",
            "ServiceAccount",
            "ValidatingWebhookConfiguration"
        ]
    );
    Ok(())
}

/// The Deployment's container environment (fieldRefs read as the pod would) makes a forwarder
/// configuration that reaches its Service by the names the webhook dials.
fn check_forwarder_environment(deployment: &Value) -> Result<()> {
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let mut env = std::collections::HashMap::new();
    for var in container["env"].as_array().context("env")? {
        let name = var["name"].as_str().context("name")?.to_string();
        let value = match (&var["value"], &var["valueFrom"]["fieldRef"]["fieldPath"]) {
            (Value::String(value), _) => value.clone(),
            (_, Value::String(path)) if path == "metadata.namespace" => "dovetail".to_string(),
            other => bail!("{name}: unexpected {other:?}"),
        };
        env.insert(name, value);
    }
    let config = dovetail_forwarder::Config::from_lookup(|k| env.get(k).cloned())?;
    let webhooks = &manifest("webhook.yaml")?[0]["webhooks"];
    for webhook in webhooks.as_array().context("webhooks")? {
        let service = &webhook["clientConfig"]["service"];
        let dialled = format!(
            "{}.{}.svc",
            service["name"].as_str().unwrap_or_default(),
            service["namespace"].as_str().unwrap_or_default()
        );
        assert!(config.sans().contains(&dialled), "{dialled} not in {:?}", config.sans());
        assert_eq!(service["path"], dovetail_forwarder::server::ADMISSION_PATH);
    }
    let port = container["ports"][0]["containerPort"].as_u64().context("containerPort")?;
    assert_eq!(u64::from(config.listen.port()), port);
    Ok(())
}
