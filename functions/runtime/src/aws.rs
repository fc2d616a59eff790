//! The functions on AWS: what a Lambda builds during init — the SDK clients, the adapters behind
//! every port, the Kubernetes client — and the handlers it then serves events with.
//!
//! Init reaches EKS (DescribeCluster), DynamoDB and SQS once, concurrently, so the first event
//! finds warm connections and a wrong table, queue or cluster name stops the function at init
//! with a message naming it. The Kubernetes client carries a bearer token that EKS honours for
//! 15 minutes; a warm function builds a new client from a fresh token before the old one lapses.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::SystemTime;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use dovetail_aws::{load_sdk_config, AwsError, Clients, Config, DynamoStore, Ec2Cloud, Eks, SqsQueue};
use dovetail_core::reconcile::ports::{Clock, PortError};
use dovetail_core::reconcile::{Deadline, Ports, Reconciler, Report};
use dovetail_kube::{adapter_settings, eks_client, ClientError, KubeAdapter};
use lambda_runtime::{service_fn, LambdaEvent};
use tokio::sync::{Mutex, MutexGuard};

use crate::clock::SystemClock;
use crate::handlers;

/// The variable naming a kubeconfig file to reach the cluster with instead of EKS tokens.
pub const KUBECONFIG_VAR: &str = "DOVETAIL_KUBECONFIG";

pub type AwsReconciler = Reconciler<KubeAdapter, Ec2Cloud, DynamoStore, SqsQueue, SystemClock>;

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error(transparent)]
    Aws(#[from] AwsError),
    #[error("Kubernetes client: {0}")]
    Client(#[from] ClientError),
    #[error("{KUBECONFIG_VAR}={path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error(transparent)]
    Port(#[from] PortError),
    #[error(transparent)]
    Setting(#[from] crate::settings::SettingError),
}

/// How the functions reach the cluster's API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterAuth {
    /// EKS bearer tokens minted from the function's role (its access entry maps it to the
    /// `dovetail:functions` group).
    Eks,
    /// A kubeconfig file: a function run outside Lambda, or tests against a local API server.
    /// Cluster facts for user data still come from DescribeCluster.
    Kubeconfig(PathBuf),
}

impl ClusterAuth {
    /// [`KUBECONFIG_VAR`] when set, EKS otherwise.
    pub fn from_env() -> ClusterAuth {
        match std::env::var_os(KUBECONFIG_VAR).filter(|v| !v.is_empty()) {
            Some(path) => ClusterAuth::Kubeconfig(path.into()),
            None => ClusterAuth::Eks,
        }
    }
}

/// One function's process: its name (in logs, metrics and Events), the reconciler it runs and
/// when its Kubernetes token is due for renewal.
pub struct Function {
    name: String,
    eks: Eks,
    auth: ClusterAuth,
    /// Lambda sends one event at a time to a process; the lock only orders token renewal.
    live: Mutex<Live>,
}

struct Live {
    reconciler: AwsReconciler,
    /// `None` with a kubeconfig: its own credentials, nothing to renew here.
    token_due: Option<SystemTime>,
}

impl Function {
    /// From the environment: [`Config::from_env`]'s variables and [`KUBECONFIG_VAR`].
    pub async fn from_env(name: &str) -> Result<Function, InitError> {
        Function::new(name, Config::from_env()?, ClusterAuth::from_env()).await
    }

    pub async fn new(name: &str, config: Config, auth: ClusterAuth) -> Result<Function, InitError> {
        let sdk = load_sdk_config(&config).await;
        let clients = Clients::new(&sdk, &config);
        Function::with_clients(name, config, clients, auth).await
    }

    /// [`Function::new`] with SDK clients the caller built: the scale rig's
    /// (`tests/harness/scale`), which carry an interceptor counting every AWS call the function
    /// makes. Everything else — the adapters, the checks at init, the handlers — is the Lambda's.
    pub async fn with_clients(
        name: &str,
        config: Config,
        clients: Clients,
        auth: ClusterAuth,
    ) -> Result<Function, InitError> {
        let eks = Eks::new(clients.eks.clone(), &clients.sdk, &config.cluster_name);
        let store =
            DynamoStore::new(clients.dynamodb.clone(), &config.table_name, &config.cluster_name, config.terminated_ttl);
        let queue = SqsQueue::new(clients.sqs.clone(), &config.resume_queue_url);
        let (facts, table, resume_queue) = tokio::join!(eks.facts(), store.check(), queue.check());
        let facts = facts?;
        table?;
        resume_queue?;
        let (client, token_due) = kube_client(&eks, &auth).await?;
        let kube = KubeAdapter::new(client).with_reporting_instance(name);
        let cloud = Ec2Cloud::new(&clients, &config, facts);
        // The decisions' own settings (node repair) come from the process environment here, for
        // the scale rig's functions as for the Lambdas.
        let settings = crate::settings::from_lookup(&config.cluster_name, &holder(name), |k| std::env::var(k).ok())?;
        let reconciler = Reconciler::new(Ports { kube, cloud, store, queue, clock: SystemClock }, settings);
        Ok(Function { name: name.to_string(), eks, auth, live: Mutex::new(Live { reconciler, token_due }) })
    }

    /// The reconciler, with a new Kubernetes client when the token is due.
    async fn reconciler(&self) -> Result<MutexGuard<'_, Live>, InitError> {
        let mut live = self.live.lock().await;
        if live.token_due.is_some_and(|due| SystemTime::now() >= due) {
            // The adapter, and the cluster snapshot it keeps warm, stay: only the client changes.
            let (client, due) = kube_client(&self.eks, &self.auth).await?;
            live.reconciler.ports.kube.set_client(client);
            live.token_due = due;
        }
        Ok(live)
    }

    /// The provisioner's handler. An error (no token could be minted) fails the whole batch.
    pub async fn doorbells(&self, event: SqsEvent, deadline: Deadline) -> Result<SqsBatchResponse, InitError> {
        let live = self.reconciler().await?;
        Ok(handlers::doorbells(&self.name, &live.reconciler, &event, deadline).await.response)
    }

    /// The interruption function's handler.
    pub async fn interruptions(&self, event: SqsEvent, deadline: Deadline) -> Result<SqsBatchResponse, InitError> {
        let live = self.reconciler().await?;
        Ok(handlers::interruptions(&self.name, &live.reconciler, &event, deadline).await.response)
    }

    /// The sweeper's handler: a summary of what it did (the decisions themselves are logged).
    pub async fn sweep(&self, deadline: Deadline) -> Result<Summary, InitError> {
        let live = self.reconciler().await?;
        let report = handlers::sweep(&self.name, &live.reconciler, deadline).await?;
        Ok(Summary::of(&report))
    }
}

/// The three functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Provisioner,
    Interruption,
    Sweeper,
}

impl Kind {
    /// The name in logs, metrics and Events.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Provisioner => "provisioner",
            Kind::Interruption => "interruption",
            Kind::Sweeper => "sweeper",
        }
    }
}

/// A function's whole life, what its `main` runs: JSON logs, init from the environment, then
/// Lambda's event loop with the function's handler.
pub async fn run(kind: Kind) -> Result<(), lambda_runtime::Error> {
    crate::logging::init();
    let function = Function::from_env(kind.name()).await?;
    let function = &function;
    match kind {
        Kind::Provisioner => {
            lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
                let deadline = deadline(&event.context);
                boxed(function.doorbells(event.payload, deadline)).await.map_err(lambda_runtime::Error::from)
            }))
            .await
        }
        Kind::Interruption => {
            lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
                let deadline = deadline(&event.context);
                boxed(function.interruptions(event.payload, deadline)).await.map_err(lambda_runtime::Error::from)
            }))
            .await
        }
        Kind::Sweeper => {
            lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| async move {
                boxed(function.sweep(deadline(&event.context))).await.map_err(lambda_runtime::Error::from)
            }))
            .await
        }
    }
}

/// When this invocation stops starting work (see [`crate::clock::lambda_deadline`]).
fn deadline(context: &lambda_runtime::Context) -> Deadline {
    crate::clock::lambda_deadline(context.deadline, SystemClock.now())
}

/// A handler's future behind a pointer. Inline, Lambda's event loop, the handler, a pass and its
/// reads nest deeper than the compiler's query depth limit allows when it lays out `main`.
fn boxed<'a, T>(f: impl Future<Output = T> + Send + 'a) -> Pin<Box<dyn Future<Output = T> + Send + 'a>> {
    Box::pin(f)
}

/// What the sweeper answers its scheduler.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub actions: usize,
    pub errors: usize,
    pub pending_pods: usize,
}

impl Summary {
    pub fn of(report: &Report) -> Summary {
        Summary {
            actions: report.decisions.iter().filter(|d| d.action.is_some()).count(),
            errors: report.errors.len(),
            pending_pods: report.pending_pods,
        }
    }
}

/// The Kubernetes client for `auth`, and when its token must be renewed.
async fn kube_client(eks: &Eks, auth: &ClusterAuth) -> Result<(kube::Client, Option<SystemTime>), InitError> {
    let (client, due) = match auth {
        ClusterAuth::Eks => {
            let access = eks.access().await?;
            (eks_client(&access.endpoint, access.ca_pem.as_bytes(), &access.token)?, Some(access.expires_at))
        }
        ClusterAuth::Kubeconfig(path) => {
            let failed = |message: String| InitError::Kubeconfig { path: path.display().to_string(), message };
            let file = kube::config::Kubeconfig::read_from(path).map_err(|e| failed(e.to_string()))?;
            let options = kube::config::KubeConfigOptions::default();
            let config =
                kube::Config::from_custom_kubeconfig(file, &options).await.map_err(|e| failed(e.to_string()))?;
            let client = kube::Client::try_from(adapter_settings(config)).map_err(ClientError::from)?;
            (client, None)
        }
    };
    Ok((client, due))
}

/// Who holds the provisioning lease: this process. Lambda runs one event at a time per process
/// and names each process's log stream uniquely; elsewhere, the function, host process id and
/// start time.
fn holder(name: &str) -> String {
    if let Some(stream) = std::env::var("AWS_LAMBDA_LOG_STREAM_NAME").ok().filter(|s| !s.is_empty()) {
        return format!("{name}/{stream}");
    }
    let started = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    format!("{name}/{}-{}", std::process::id(), started.as_millis())
}
