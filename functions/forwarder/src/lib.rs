//! Dovetail's forwarder: an in-cluster admission webhook that always allows, and turns "a pod
//! became unschedulable" and "a node registered / became Ready / went away" into compact SQS
//! doorbells for the provisioner (brief §1: doorbells, not payloads). See `README.md` for the
//! doorbell shapes, configuration, credentials and deployment.
//!
//! - [`review`]: AdmissionReview → doorbell and response (pure);
//! - [`dispatch`]: bounded queue, coalescing, SendMessageBatch batches, retries;
//! - [`sqs`]: the SQS sink and client; [`server`]: HTTPS; [`tls`]: the serving certificate;
//!   [`webhook`]: the `caBundle` patch; [`rotation`]: a new certificate every week, trusted
//!   before it is served; [`config`]: environment variables.
//!
//! It runs on Tokio's current-thread runtime: the work per request is a few microseconds of
//! JSON, so one thread keeps up with thousands of requests a second, and every extra thread
//! would cost a stack and an allocator arena.

pub mod config;
pub mod dispatch;
pub mod doorbell;
pub mod metrics;
pub mod review;
pub mod rotation;
pub mod server;
pub mod sqs;
pub mod tls;
pub mod webhook;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::watch;

pub use config::{Config, ConfigError};

/// Why the forwarder could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("listening on {address}: {source}")]
    Listen {
        address: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("Kubernetes client (in-cluster configuration, or KUBECONFIG outside a cluster): {0}")]
    Kube(#[source] kube::Error),
    #[error(transparent)]
    Webhook(#[from] webhook::WebhookError),
    #[error(transparent)]
    Sqs(#[from] sqs::SqsSetupError),
    #[error("starting the Tokio runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl From<rotation::RotationError> for Error {
    fn from(error: rotation::RotationError) -> Error {
        match error {
            rotation::RotationError::Tls(e) => Error::Tls(e),
            rotation::RotationError::Trust(e) => Error::Webhook(e),
        }
    }
}

/// How often the `caBundle` is checked again after start (and a due rotation made).
const CA_BUNDLE_CHECK: Duration = Duration::from_secs(60);
/// How long start-up keeps trying to patch the `caBundle` while the API server does not answer.
const CA_BUNDLE_START_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the counters are logged (when they moved).
const COUNTERS_EVERY: Duration = Duration::from_secs(60);
/// How long queued doorbells may take to leave after a shutdown signal (the pod's grace period
/// must be longer).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The process: JSON logs, configuration from the environment, a current-thread runtime, and
/// [`run`] until SIGTERM or SIGINT.
pub fn run_process() -> Result<(), Error> {
    init_logging();
    let result = Config::from_env().map_err(Error::from).and_then(|config| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(Error::Runtime)?;
        runtime.block_on(run(config, shutdown_signal()))
    });
    if let Err(error) = &result {
        tracing::error!(error = %error, "dovetail-forwarder stopped");
    }
    result
}

/// JSON lines on stdout, level from `RUST_LOG` (default `info`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_current_span(false)
        .with_target(false)
        .try_init();
}

/// Completes on SIGTERM (the kubelet stopping the pod) or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::warn!("cannot listen for signals: only a kill stops the forwarder");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
}

/// Starts serving, points the webhook configuration at this process's CA, and forwards doorbells
/// until `shutdown` completes; then sends what is queued (for at most [`DRAIN_TIMEOUT`]).
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
    let sans = config.sans();
    let cert = tls::generate(&sans)?;
    let serving = tls::ServingKey::new(&cert)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls::server_config(Arc::clone(&serving))?);
    let mut rotation = rotation::Rotation::new(sans.clone(), cert, serving, Instant::now());
    let kube = kube::Client::try_default().await.map_err(Error::Kube)?;
    let sqs = sqs::client(&config.queue_url, config.endpoint_url.as_deref()).await?;
    let listener =
        TcpListener::bind(config.listen).await.map_err(|source| Error::Listen { address: config.listen, source })?;
    let address = listener.local_addr().map_err(|source| Error::Listen { address: config.listen, source })?;

    let metrics = Arc::new(metrics::Metrics::default());
    let (doorbells, queue) = dispatch::queue(config.queue_capacity, Arc::clone(&metrics));
    let (stop, stopping) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let settings = dispatch::Settings { coalesce: config.coalesce, ..dispatch::Settings::default() };
    let sink = Arc::new(sqs::SqsSink::new(sqs, &config.queue_url));
    let dispatcher =
        tokio::spawn(dispatch::run(queue, sink, settings, Arc::clone(&metrics), stopped(stopping.clone())));
    let state = Arc::new(server::State::new(doorbells, Arc::clone(&metrics)));
    let server = tokio::spawn(server::serve(listener, acceptor, state, stopped(stopping.clone())));
    tracing::info!(%address, path = server::ADMISSION_PATH, ?sans, queue = %config.queue_url, "serving");

    // Serving first, so that the API server can reach us the moment it trusts our CA.
    let ca_bundle = webhook::CaBundle::new(kube, &config.webhook_configuration);
    let started = tokio::time::Instant::now();
    loop {
        match rotation.check(&ca_bundle, Instant::now()).await {
            Ok(checked) => {
                tracing::info!(configuration = %config.webhook_configuration, ?checked, "caBundle set");
                break;
            }
            Err(rotation::RotationError::Trust(error))
                if error.is_transient() && started.elapsed() < CA_BUNDLE_START_TIMEOUT =>
            {
                tracing::warn!(%error, "caBundle not set yet; trying again");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Err(error) => return Err(error.into()),
        }
    }
    let upkeep = tokio::spawn(upkeep(rotation, ca_bundle, Arc::clone(&metrics)));

    shutdown.await;
    let _ = stop.send(true);
    upkeep.abort();
    let _ = server.await;
    if tokio::time::timeout(DRAIN_TIMEOUT, dispatcher).await.is_err() {
        tracing::warn!("doorbells still queued at exit were dropped");
    }
    metrics.log();
    Ok(())
}

/// Periodic work: the `caBundle` check with the certificate's rotation, and the counters' log
/// line.
async fn upkeep(mut rotation: rotation::Rotation, ca_bundle: webhook::CaBundle, metrics: Arc<metrics::Metrics>) {
    let mut ca_check = tokio::time::interval(CA_BUNDLE_CHECK);
    let mut counters = tokio::time::interval(COUNTERS_EVERY);
    // Both fire at once first; start was just checked and nothing has been counted.
    ca_check.tick().await;
    counters.tick().await;
    let mut last = metrics.snapshot();
    loop {
        tokio::select! {
            _ = ca_check.tick() => match rotation.check(&ca_bundle, Instant::now()).await {
                Ok(rotation::Checked::Unchanged) => {}
                Ok(rotation::Checked::BundleSet) => tracing::warn!("caBundle had changed; set it again"),
                Ok(rotation::Checked::NextTrusted) => {
                    tracing::info!("rotating the serving certificate: the caBundle trusts the next CA too")
                }
                Ok(rotation::Checked::Rotated) => {
                    tracing::info!("serving certificate rotated; the caBundle trusts its CA alone")
                }
                Err(error) => tracing::warn!(%error, "checking the caBundle"),
            },
            _ = counters.tick() => {
                let now = metrics.snapshot();
                if now != last {
                    metrics.log();
                    last = now;
                }
            }
        }
    }
}
