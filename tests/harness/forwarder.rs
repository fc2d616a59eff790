//! The forwarder (`functions/forwarder`) as a process of its own, configured for a local control
//! plane: listening on a loopback port, registered by the webhook configuration of
//! `infra/k8s/forwarder/webhook.yaml` pointed at it by `url:`, and patching that configuration's
//! `caBundle` itself. Used by the integration tests (which run the forwarder from the test binary)
//! and the benchmark (which runs the release binary).

use std::io::Read as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use k8s_openapi::api::admissionregistration::v1::{ValidatingWebhookConfiguration, WebhookClientConfig};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
use kube::{Api, Client};
use serde_json::Value;

/// Where a forwarder listens, what it patches, where it sends.
#[derive(Debug, Clone)]
pub struct Settings {
    pub kubeconfig: PathBuf,
    /// The ValidatingWebhookConfiguration whose `caBundle` it sets.
    pub configuration: String,
    /// Its "Service" namespace (only the certificate's names depend on it).
    pub namespace: String,
    pub port: u16,
    /// SQS endpoint (`http://127.0.0.1:<port>`) and queue URL.
    pub sqs_endpoint: String,
    pub queue_url: String,
    pub log: PathBuf,
    pub rust_log: String,
}

/// A forwarder process, killed when dropped.
pub struct Forwarder {
    pub child: Child,
    log: PathBuf,
}

impl Forwarder {
    /// Runs `command` (the forwarder binary, or a binary that runs the forwarder) with the
    /// environment `settings` describe and dummy AWS credentials, its output in `settings.log`.
    pub fn start(mut command: Command, settings: &Settings) -> Result<Forwarder> {
        let log = settings.log.clone();
        let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        command
            .env("KUBECONFIG", &settings.kubeconfig)
            .env("DOVETAIL_DOORBELL_QUEUE_URL", &settings.queue_url)
            .env("DOVETAIL_ENDPOINT_URL", &settings.sqs_endpoint)
            .env("DOVETAIL_WEBHOOK_CONFIGURATION", &settings.configuration)
            .env("DOVETAIL_SERVICE_NAME", "dovetail-forwarder")
            .env("DOVETAIL_SERVICE_NAMESPACE", &settings.namespace)
            .env("DOVETAIL_LISTEN_ADDRESS", format!("127.0.0.1:{}", settings.port))
            .env("DOVETAIL_EXTRA_SANS", "127.0.0.1")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("RUST_LOG", &settings.rust_log)
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

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = std::fs::File::open(&self.log) {
            let _ = file.read_to_string(&mut text);
        }
        text
    }

    /// Fails with the forwarder's log when it has exited.
    pub fn check_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("the forwarder exited ({status}); its log:\n{}", self.log());
        }
        Ok(())
    }

    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: a plain kill(2) of our own child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
    }

    /// Waits until every webhook of configuration `name` has a `caBundle` (the forwarder set it)
    /// and returns it.
    pub async fn ca_bundle(&mut self, client: &Client, name: &str) -> Result<Vec<u8>> {
        let configurations: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            self.check_running()?;
            let webhooks = configurations.get(name).await?.webhooks.unwrap_or_default();
            let bundles: Vec<&[u8]> =
                webhooks.iter().filter_map(|w| w.client_config.ca_bundle.as_ref()).map(|b| b.0.as_slice()).collect();
            if bundles.len() == webhooks.len() && bundles.iter().all(|b| !b.is_empty() && *b == bundles[0]) {
                return Ok(bundles[0].to_vec());
            }
            if Instant::now() > deadline {
                bail!("the forwarder did not set the caBundle of {name}; its log:\n{}", self.log());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nothing listens on (bound, then released).
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The documents of a manifest under `infra/k8s/forwarder/`.
pub fn manifest(file: &str) -> Result<Vec<Value>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/k8s/forwarder").join(file);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut documents = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        documents.push(serde::Deserialize::deserialize(document)?);
    }
    Ok(documents)
}

/// The manifest's webhook configuration, renamed `name` and pointed at
/// `https://127.0.0.1:<port>/admission`, its own selectors kept. With `Some(namespace)` (a shared
/// control plane serves other tests) it is also narrowed to pods in `namespace` and nodes
/// labelled `dovetail.dev/test=<namespace>`; a private control plane takes it whole (`None`).
pub fn webhook_configuration(name: &str, port: u16, namespace: Option<&str>) -> Result<ValidatingWebhookConfiguration> {
    let mut configuration: ValidatingWebhookConfiguration =
        serde_json::from_value(manifest("webhook.yaml")?.into_iter().next().context("webhook.yaml is empty")?)?;
    configuration.metadata.name = Some(name.to_string());
    for webhook in configuration.webhooks.iter_mut().flatten() {
        if webhook.client_config.ca_bundle.is_some() {
            bail!("webhook.yaml sets a caBundle for {}: the forwarder sets it", webhook.name);
        }
        webhook.client_config =
            WebhookClientConfig { url: Some(format!("https://127.0.0.1:{port}/admission")), ..Default::default() };
        let Some(namespace) = namespace else { continue };
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

pub type Sender = hyper::client::conn::http1::SendRequest<http_body_util::Full<hyper::body::Bytes>>;

/// A keep-alive HTTPS connection to the forwarder, trusting only `ca_pem`.
pub async fn connect(port: u16, ca_pem: &[u8]) -> Result<Sender> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(ca_pem) {
        roots.add(cert?)?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    tcp.set_nodelay(true)?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1")?;
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)).connect(name, tcp).await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

/// One request on `sender`: the status and the body.
pub async fn request(
    sender: &mut Sender,
    method: &str,
    path: &str,
    body: hyper::body::Bytes,
) -> Result<(u16, hyper::body::Bytes)> {
    sender.ready().await?;
    let request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(body))?;
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    Ok((status, http_body_util::BodyExt::collect(response.into_body()).await?.to_bytes()))
}
