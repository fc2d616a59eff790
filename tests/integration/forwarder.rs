//! The forwarder (`functions/forwarder`) as the real kube-apiserver calls it: registered by the
//! webhook configuration of `infra/k8s/forwarder/webhook.yaml` (pointed at
//! `https://127.0.0.1:<port>` by `url:` instead of the Service, and narrowed to the test's own
//! namespace and nodes since the control plane is shared), its `caBundle` patched by the
//! forwarder itself at start.
//!
//! The forwarder runs as a process of its own — this test binary run again with only
//! [`forwarder_process`] selected — so it can be hung and killed like a pod.
//!
//! The process, the webhook configuration and the manifests come from the harness
//! (`tests/harness/forwarder.rs`). Doorbells are read from the SQS queue they were sent to, on
//! the local moto server; the sending's edge cases (batches, retries, bounds) are tested in the
//! forwarder's unit tests against an in-memory sink.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use dovetail_tests::controlplane::{resource_of, ControlPlane};
use dovetail_tests::forwarder::{connect, free_port, manifest, request, webhook_configuration, Forwarder, Settings};
use dovetail_tests::moto::{Moto, Session};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
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

/// The doorbell queue on moto, and what has been received from it so far.
pub(crate) struct Doorbells {
    sqs: aws_sdk_sqs::Client,
    pub(crate) url: String,
    received: Vec<Value>,
}

impl Doorbells {
    pub(crate) async fn new(moto: &Session) -> Result<Doorbells> {
        let sqs = aws_sdk_sqs::Client::new(&moto.sdk_config().await);
        let url = sqs.create_queue().queue_name("dovetail-doorbells").send().await?;
        let url = url.queue_url().context("a queue url")?.to_string();
        Ok(Doorbells { sqs, url, received: vec![] })
    }

    /// Receives (and deletes) every message waiting; returns every doorbell received so far.
    async fn drain(&mut self) -> Result<&[Value]> {
        loop {
            let got = self.sqs.receive_message().queue_url(&self.url).max_number_of_messages(10).send().await?;
            if got.messages().is_empty() {
                return Ok(&self.received);
            }
            for m in got.messages() {
                self.received.push(serde_json::from_str(m.body().unwrap_or_default())?);
                let handle = m.receipt_handle().unwrap_or_default();
                self.sqs.delete_message().queue_url(&self.url).receipt_handle(handle).send().await?;
            }
        }
    }
}

/// Starts the forwarder (this binary, running [`forwarder_process`]) for configuration
/// `configuration`, sending to the queue `queue_url` at `sqs_endpoint`.
pub fn start_forwarder(
    control_plane: &ControlPlane,
    kubeconfig: &Path,
    configuration: &str,
    namespace: &str,
    port: u16,
    sqs: (&str, &str),
) -> Result<Forwarder> {
    let settings = settings(control_plane, kubeconfig, configuration, namespace, port, sqs);
    let mut command = Command::new(std::env::current_exe()?);
    command
        .args(["--exact", "forwarder::forwarder_process", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1");
    Forwarder::start(command, &settings)
}

/// A test forwarder's settings: its log in the control plane's directory, debug logs of its own.
pub(crate) fn settings(
    control_plane: &ControlPlane,
    kubeconfig: &Path,
    configuration: &str,
    namespace: &str,
    port: u16,
    (sqs_endpoint, queue_url): (&str, &str),
) -> Settings {
    Settings {
        kubeconfig: kubeconfig.to_path_buf(),
        configuration: configuration.to_string(),
        namespace: namespace.to_string(),
        port,
        queue_url: queue_url.to_string(),
        sqs_endpoint: sqs_endpoint.to_string(),
        log: control_plane.dir().join(format!("forwarder-{configuration}.log")),
        rust_log: "info,dovetail_forwarder=debug".into(),
    }
}

/// Waits for a doorbell in the queue that has every field of `expected`.
pub(crate) async fn doorbell(forwarder: &mut Forwarder, doorbells: &mut Doorbells, expected: Value) -> Result<Value> {
    let deadline = Instant::now() + DOORBELL_TIMEOUT;
    loop {
        forwarder.check_running()?;
        if let Some(found) = doorbells.drain().await?.iter().find(|d| matches(d, &expected)) {
            return Ok(found.clone());
        }
        if Instant::now() > deadline {
            bail!("no doorbell {expected} within {DOORBELL_TIMEOUT:?}; the forwarder's log:\n{}", forwarder.log());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether `doorbell` has every field of `expected` with the same value.
fn matches(doorbell: &Value, expected: &Value) -> bool {
    expected.as_object().is_some_and(|fields| fields.iter().all(|(k, v)| &doorbell[k] == v))
}

/// Runs the forwarder as its ServiceAccount would: `rbac.yaml` applied for the test's
/// configuration and namespace, and a kubeconfig that impersonates
/// `system:serviceaccount:<namespace>:dovetail-forwarder` (returned).
pub async fn service_account_kubeconfig(
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
    forwarder_kubeconfig(control_plane, namespace, configuration).await
}

/// A kubeconfig for the forwarder's ServiceAccount `dovetail-forwarder` in `namespace` (the admin,
/// impersonating it), once the RBAC that lets it read and patch webhook configuration
/// `configuration` has taken effect; checks it may do nothing else.
pub async fn forwarder_kubeconfig(
    control_plane: &ControlPlane,
    namespace: &str,
    configuration: &str,
) -> Result<PathBuf> {
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

/// A test's own forwarder registration on the shared control plane: a namespace, the webhook
/// configuration `dovetail-forwarder-<namespace>` pointed at a free loopback port and narrowed to
/// that namespace, and a kubeconfig acting as the forwarder's ServiceAccount with only what
/// rbac.yaml grants.
pub(crate) struct Registration {
    pub(crate) ns: String,
    pub(crate) port: u16,
    pub(crate) name: String,
    pub(crate) kubeconfig: PathBuf,
}

impl Registration {
    pub(crate) async fn new(control_plane: &ControlPlane, admin: &Client, prefix: &str) -> Result<Registration> {
        let ns = control_plane.namespace(admin, prefix).await?;
        let port = free_port()?;
        let name = format!("dovetail-forwarder-{ns}");
        let configuration = webhook_configuration(&name, port, Some(&ns))?;
        Api::<ValidatingWebhookConfiguration>::all(admin.clone())
            .create(&PostParams::default(), &configuration)
            .await?;
        let kubeconfig = service_account_kubeconfig(control_plane, admin, &ns, &name).await?;
        Ok(Registration { ns, port, name, kubeconfig })
    }

    /// Deletes the webhook configuration and the forwarder's RBAC (the namespace goes with the
    /// control plane).
    pub(crate) async fn remove(&self, admin: &Client) -> Result<()> {
        let name = &self.name;
        Api::<ValidatingWebhookConfiguration>::all(admin.clone()).delete(name, &DeleteParams::default()).await?;
        Api::<ClusterRoleBinding>::all(admin.clone()).delete(name, &DeleteParams::default()).await?;
        Api::<ClusterRole>::all(admin.clone()).delete(name, &DeleteParams::default()).await?;
        Ok(())
    }
}

#[tokio::test]
async fn forwarder_rings_for_pods_and_nodes_and_the_cluster_outlives_it() -> Result<()> {
    let control_plane = ControlPlane::shared();
    let admin = control_plane.client();
    let registration = Registration::new(control_plane, &admin, "forwarder").await?;
    let (ns, port, name) = (registration.ns.clone(), registration.port, registration.name.clone());
    let kubeconfig = &registration.kubeconfig;
    let moto = Moto::session()?;
    let mut doorbells = Doorbells::new(&moto).await?;
    let mut forwarder = start_forwarder(control_plane, kubeconfig, &name, &ns, port, (&moto.endpoint, &doorbells.url))?;
    let ca = forwarder.ca_bundle(&admin, &name).await?;

    // A DaemonSet's pod (by the label its controller sets) is left out by the objectSelector;
    // the scheduler's status update reaches the API server before `unschedulable` returns, so
    // the webhook, had it been called, has logged by then.
    let daemon_pod = json!({"metadata": {"labels": {"pod-template-generation": "1"}}});
    create_pod(&admin, &test_pod(&ns, "daemon", "64", daemon_pod)?).await?;
    unschedulable(&admin, &ns, "daemon").await?;

    // A pod no node can run: the scheduler marks it Unschedulable, the webhook rings.
    create_pod(&admin, &test_pod(&ns, "huge", "64", json!({}))?).await?;
    unschedulable(&admin, &ns, "huge").await?;
    let bell = doorbell(&mut forwarder, &mut doorbells, json!({"pod": format!("{ns}/huge")})).await?;
    let at = bell["unschedulableAt"].as_str().context("unschedulableAt")?;
    at.parse::<k8s_openapi::jiff::Timestamp>().with_context(|| format!("unschedulableAt {at:?} is not RFC 3339"))?;
    let received = doorbells.drain().await?;
    assert!(!received.iter().any(|d| d["pod"] == format!("{ns}/daemon")), "a DaemonSet pod rang: {received:?}");

    // Prometheus scrapes `/metrics` on the webhook's own HTTPS port: the review that rang was
    // timed and its doorbell counted as sent.
    let mut scrape = connect(port, &ca).await?;
    let (status, text) = request(&mut scrape, "GET", "/metrics", hyper::body::Bytes::new()).await?;
    let text = String::from_utf8(text.to_vec())?;
    assert_eq!(status, 200, "{text}");
    let sample = |series: &str| -> Result<f64> {
        let line = text.lines().find(|l| l.starts_with(series)).with_context(|| format!("{series} in:\n{text}"))?;
        Ok(line[series.len()..].trim().parse()?)
    };
    let reviews = sample("dovetail_forwarder_request_duration_seconds_count{result=\"pod_doorbell\"}")?;
    assert!(reviews >= 1.0, "the pod's review is timed:\n{text}");
    let seconds = sample("dovetail_forwarder_request_duration_seconds_sum{result=\"pod_doorbell\"}")?;
    assert!(seconds > 0.0 && seconds < reviews * 2.0, "{seconds} s for {reviews} reviews:\n{text}");
    assert!(sample("dovetail_forwarder_messages_sent_total")? >= 1.0, "the doorbell is counted:\n{text}");

    // A node registers and turns Ready (the harness acts as its kubelet), heartbeats, and goes.
    let node = test_node(&admin, &ns, "n1", json!([])).await?;
    let node_name = node.metadata.name.clone().context("a node without a name")?;
    doorbell(&mut forwarder, &mut doorbells, json!({"node": node_name, "event": "registered"})).await?;
    doorbell(&mut forwarder, &mut doorbells, json!({"node": node_name, "event": "ready"})).await?;
    let nodes: Api<Node> = Api::all(admin.clone());
    let heartbeat = json!({"status": {"conditions": [{
        "type": "Ready", "status": "True", "reason": "KubeletReady",
        "lastHeartbeatTime": k8s_openapi::jiff::Timestamp::now().to_string(),
    }]}});
    nodes.patch_status(&node_name, &PatchParams::default(), &Patch::Strategic(&heartbeat)).await?;
    nodes.delete(&node_name, &DeleteParams::default()).await?;
    doorbell(&mut forwarder, &mut doorbells, json!({"node": node_name, "event": "gone"})).await?;
    let readies =
        doorbells.drain().await?.iter().filter(|d| d["node"] == node_name.as_str() && d["event"] == "ready").count();
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

    registration.remove(&admin).await
}

/// What the forwarder says when it cannot start: a missing webhook configuration is named, and
/// the process exits with an error instead of serving a certificate nobody trusts.
#[tokio::test]
async fn forwarder_without_its_webhook_configuration_stops_and_says_why() -> Result<()> {
    let control_plane = ControlPlane::shared();
    let admin = control_plane.client();
    let ns = control_plane.namespace(&admin, "forwarder-missing").await?;
    let kubeconfig = control_plane.kubeconfig();
    // It stops before sending anything: SQS is a port nothing listens on.
    let unused = format!("http://127.0.0.1:{}", free_port()?);
    let queue = format!("{unused}/000000000000/doorbells");
    let mut forwarder =
        start_forwarder(control_plane, kubeconfig, "no-such-configuration", &ns, free_port()?, (&unused, &queue))?;
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
            let (resource, capabilities) = resource_of(&admin, &document).await?;
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
            "PodDisruptionBudget",
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
