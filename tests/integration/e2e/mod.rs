//! End to end: a private control plane (etcd, kube-apiserver, kube-scheduler, and
//! kube-controller-manager's Deployment, ReplicaSet, StatefulSet and PodDisruptionBudget
//! controllers), moto, the forwarder registered as the cluster's admission webhook and sending
//! doorbells to moto's SQS, and the three functions' handlers run in-process with the real
//! adapters — fed the way Lambda feeds them: the provisioner by two concurrent SQS pollers with
//! the deployed batching window, the interruption function by a poller of the queue EventBridge
//! rules fill, the sweeper on a schedule. A test kubelet ([`kubelet`]) turns every instance moto
//! launched into a Node from the user data Dovetail generated, and runs the pods the real
//! kube-scheduler binds to it.
//!
//! Every scenario starts its own control plane (NodePools are cluster-wide, and the provisioner
//! reads every pending pod) and holds moto alone for its length (see `tests/harness/moto.rs`).
//! Scenarios apply the repository's `infra/examples/` manifests, so what the README shows is what runs.
//! The cluster side comes from the kustomize base (`infra/k8s`), or, for one scenario, from the Helm
//! chart (`infra/helm/dovetail`, [`Install::Helm`]).
//!
//! Each scenario records, for every pod the forwarder rang for, the time from "marked
//! unschedulable" (the forwarder's `unschedulableAt`: when the API server admitted the scheduler's
//! status update) to the CreateFleet call that launched the capacity it was nominated to, and
//! writes them to `$CARGO_TARGET_TMPDIR/e2e-latency/<scenario>.json`; `cargo run -p
//! dovetail-tests --example e2e-latency` summarises them (a measurement, not an assertion). The
//! provisioner is measured warm — a provisioner receiving doorbells is — so its first run in
//! the process (reading the catalog and prices, seconds on moto) happens before the workload.

mod capacity;
mod chaos;
mod day2;
mod delivery;
mod disruption;
mod kubelet;
mod lambda;
mod provisioning;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, ensure, Context, Result};
use aws_sdk_ec2::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_ec2::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::box_error::BoxError;
use dovetail_aws::dynamo::create_table;
use dovetail_aws::{DynamoStore, Ec2Cloud, SqsQueue};
use dovetail_core::nodeclaim::{NodeClaim, Phase};
use dovetail_core::reconcile::ports::Store;
use dovetail_core::reconcile::{Ports, Reconciler, Settings};
use dovetail_kube::KubeAdapter;
use dovetail_runtime::aws::AwsReconciler;
use dovetail_runtime::clock::SystemClock;
use dovetail_tests::controlplane::{resource_of, ControlPlane, WORKLOAD_CONTROLLERS};
use dovetail_tests::forwarder::{free_port, served_locally, webhook_configuration, Forwarder};
use dovetail_tests::helm::{documents, kind_name, Helm};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::Scope;
use kube::Client;
use serde_json::Value;

use crate::aws::{World, CLUSTER, DISCOVERY, TABLE};
use crate::forwarder::{forwarder_kubeconfig, service_account_kubeconfig, start_forwarder};
use crate::functions::{assert_exactly_once, cluster_instances, queue_arn};

/// The webhook configuration the forwarder patches.
const WEBHOOK: &str = "dovetail-forwarder";
/// The forwarder's namespace (the Helm release's).
const FORWARDER_NAMESPACE: &str = "dovetail-system";
/// Field manager of what the scenarios apply.
const MANAGER: &str = "dovetail-e2e";
/// How long a scenario waits for one step (launch, registration, scheduling, drain).
pub const STEP: Duration = Duration::from_secs(90);

/// How the functions are fed.
#[derive(Debug, Clone)]
pub struct Options {
    /// Every batch handed to this many execution environments of a function at once (duplicate
    /// delivery and concurrent invocations together).
    pub deliveries: usize,
    /// The sweeper's schedule (`rate(1 minute)` when deployed); `None`: never on its own.
    pub sweep_every: Option<Duration>,
    /// Whether the forwarder runs.
    pub forwarder: bool,
    /// Every doorbell batch handed over last message first (SQS standard queues keep no order).
    pub reorder: bool,
    /// How the cluster side is installed.
    pub install: Install,
}

impl Default for Options {
    fn default() -> Options {
        Options { deliveries: 1, sweep_every: None, forwarder: true, reorder: false, install: Install::Kustomize }
    }
}

/// Where the cluster side's objects come from. Either way the CRDs are the control plane's (the
/// harness installs `infra/k8s/crds`, the same files as the chart's), the forwarder runs as a
/// local process (the test kubelet runs no images) and its webhook configuration reaches it by
/// `url:` instead of the Service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Install {
    /// The kustomize base's manifests: the admission policy, the forwarder's webhook configuration
    /// and RBAC, the functions' RBAC.
    Kustomize,
    /// `helm template` of the chart, applied whole: the same objects, and the forwarder's
    /// Deployment (at 0 replicas), Service, ServiceAccount and PodDisruptionBudget. The forwarder
    /// and the functions run under the chart's RBAC alone.
    Helm,
}

/// A CreateFleet call: the claim it launches (from its ClientToken) and when it was made.
#[derive(Debug, Clone)]
pub struct FleetCall {
    pub claim: String,
    pub at: SystemTime,
}

/// What the rig does to the functions' EC2 calls, as they leave the SDK: it records every
/// CreateFleet, and it refuses DescribeSpotPriceHistory. moto answers that with one placeholder
/// price ($0.00001) for every type in every zone; with every price tied, "cheapest first"
/// degenerates (it launched a c6a.12xlarge for one 500m pod, and holding such claims against the
/// pool's limits left pods for a later pass). Refused, the functions take their documented
/// fallback for an unavailable price source: the embedded catalog's spot prices
/// (`dovetail_aws::ec2::pricing::PriceBook`).
#[derive(Debug, Clone, Default)]
struct Ec2Calls {
    fleets: Arc<Mutex<Vec<FleetCall>>>,
    outage: Arc<Outage>,
}

impl Intercept for Ec2Calls {
    fn name(&self) -> &'static str {
        "Ec2Calls"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let body = String::from_utf8_lossy(context.request().body().bytes().unwrap_or_default());
        if body.contains("Action=DescribeSpotPriceHistory") {
            return Err("moto's spot prices are placeholders: the functions use the embedded ones".into());
        }
        if body.contains("Action=CreateFleet") {
            let token = body.split('&').find_map(|p| p.strip_prefix("ClientToken=")).unwrap_or_default();
            // `<claim>-<8 hex>` (see `dovetail_aws::ec2::fleet::client_token`).
            let claim = token.get(..token.len().saturating_sub(9)).unwrap_or_default().to_string();
            self.fleets.lock().unwrap().push(FleetCall { claim, at: SystemTime::now() });
            self.outage.launched();
        }
        Ok(())
    }
}

/// The AWS endpoint going down for the functions, as if moto were restarted under them: armed
/// with a length, the outage starts as the next CreateFleet leaves (that one gets through and
/// launches its instance; nothing after it does: not the claim's record of the instance, not
/// SQS), and until it ends every call of the functions' SDK clients fails as a refused connection
/// does (a dispatch failure: the request never reached the service).
#[derive(Debug, Default)]
pub struct Outage {
    armed: Mutex<Option<Duration>>,
    until: Mutex<Option<Instant>>,
    /// Calls refused so far.
    pub refused: std::sync::atomic::AtomicUsize,
}

impl Outage {
    pub fn after_next_launch(&self, length: Duration) {
        *self.armed.lock().unwrap() = Some(length);
    }

    fn launched(&self) {
        if let Some(length) = self.armed.lock().unwrap().take() {
            *self.until.lock().unwrap() = Some(Instant::now() + length);
        }
    }
}

/// [`Outage`] as an interceptor, on every SDK client the functions use.
#[derive(Debug, Clone, Default)]
struct Outages(Arc<Outage>);

impl Intercept for Outages {
    fn name(&self) -> &'static str {
        "Outage"
    }

    fn read_before_transmit(
        &self,
        _: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if self.0.until.lock().unwrap().is_some_and(|until| Instant::now() < until) {
            self.0.refused.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            return Err("connection refused: the AWS endpoint is down (injected)".into());
        }
        Ok(())
    }
}

/// What the background tasks share with the test.
#[derive(Default)]
pub struct Shared {
    /// Failures of the background tasks (a scenario fails on the first it sees).
    pub failures: Mutex<Vec<String>>,
    /// Per pod (`namespace/name`), the earliest `unschedulableAt` of the doorbells delivered.
    pub rung: Mutex<BTreeMap<String, SystemTime>>,
    /// Batches each function was handed.
    pub batches: Mutex<BTreeMap<&'static str, usize>>,
    /// Doorbells received more than once (a visibility timeout ran out before they were deleted).
    pub redelivered: std::sync::atomic::AtomicUsize,
    /// AWS events (EventBridge messages, by `detail-type`) handed to the functions, counted once
    /// per execution environment: one redelivered after a visibility timeout, or reported failed
    /// so that it comes back, counts again. Dovetail's own messages are not counted.
    pub events_delivered: Mutex<BTreeMap<String, usize>>,
    /// The EMF documents the provisioner's and the interruption function's invocations published,
    /// in order (what CloudWatch would make metrics of).
    pub metrics: Mutex<Vec<serde_json::Value>>,
    /// Until when the background tasks' failures are expected (the test took the API server
    /// down): logged, not counted.
    pub expect_failures_until: Mutex<Option<Instant>>,
}

impl Shared {
    pub fn fail(&self, what: String) {
        if self.expect_failures_until.lock().unwrap().is_some_and(|until| Instant::now() < until) {
            eprintln!("e2e background failure, expected: {what}");
            return;
        }
        eprintln!("e2e background failure: {what}");
        self.failures.lock().unwrap().push(what);
    }
}

/// One scenario's world.
pub struct EndToEnd {
    pub scenario: &'static str,
    pub control_plane: ControlPlane,
    pub admin: Client,
    pub aws: World,
    pub doorbell_url: String,
    pub interruption_url: String,
    pub options: Options,
    forwarder: Mutex<Option<Forwarder>>,
    /// The forwarder's port and ServiceAccount kubeconfig, to start it again after a kill.
    forwarder_setup: Option<(u16, std::path::PathBuf)>,
    /// The port the chart's webhook configuration was pointed at ([`Install::Helm`]).
    chart_forwarder_port: Option<u16>,
    pub shared: Arc<Shared>,
    ec2_calls: Ec2Calls,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for EndToEnd {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl EndToEnd {
    /// Starts everything; the functions and the kubelet run in the background until dropped.
    pub async fn start(scenario: &'static str, options: Options) -> Result<EndToEnd> {
        // moto first: its session bounds how many scenarios (each with a control plane) run at
        // once (`dovetail_tests::moto::sessions`).
        let aws = World::new().await;
        let control_plane = ControlPlane::start_with_controllers(WORKLOAD_CONTROLLERS)?;
        let admin = control_plane.client();
        let network = aws.network().await;
        // A third zone: the examples spread over three.
        let subnets = aws.clients.ec2.describe_subnets().subnet_ids(&network.b).send().await?;
        let vpc = subnets.subnets().first().and_then(|s| s.vpc_id()).context("the network's VPC")?;
        aws.clients
            .ec2
            .create_subnet()
            .vpc_id(vpc)
            .cidr_block("10.0.5.0/24")
            .availability_zone("us-east-1c")
            .tag_specifications(dovetail_tests::moto::fixtures::tags(
                aws_sdk_ec2::types::ResourceType::Subnet,
                &[(DISCOVERY, CLUSTER)],
            ))
            .send()
            .await?;
        let (amd64, arm64) = aws.images().await;
        // The gpu example's GPU types boot the alias's nvidia build.
        aws.gpu_images(&amd64, &arm64).await;
        create_table(&aws.clients.dynamodb, TABLE).await?;
        let sqs = &aws.clients.sqs;
        let doorbell_url =
            sqs.create_queue().queue_name("dovetail-doorbells").send().await?.queue_url().context("url")?.to_string();
        let interruption_url = sqs
            .create_queue()
            .queue_name("dovetail-interruptions")
            .send()
            .await?
            .queue_url()
            .context("url")?
            .to_string();
        crate::functions::interruption::route_interruptions(&aws.sdk, &queue_arn(sqs, &interruption_url).await).await;

        let mut e2e = EndToEnd {
            scenario,
            control_plane,
            admin,
            aws,
            doorbell_url,
            interruption_url,
            options,
            forwarder: Mutex::new(None),
            forwarder_setup: None,
            chart_forwarder_port: None,
            shared: Arc::new(Shared::default()),
            ec2_calls: Ec2Calls::default(),
            tasks: vec![],
        };
        match e2e.options.install {
            // Everything `infra/k8s` installs besides the CRDs (the control plane installed those)
            // and the forwarder (started below): the admission policy for NodeClaims.
            Install::Kustomize => e2e.apply_file("infra/k8s/policy/nodeclaims.yaml").await?,
            Install::Helm => e2e.install_chart().await?,
        }
        if e2e.options.forwarder {
            e2e.start_forwarder().await?;
        }
        e2e.spawn_functions().await?;
        Ok(e2e)
    }

    /// The cluster side as `helm install dovetail infra/helm/dovetail -n dovetail-system
    /// --create-namespace` installs it, from `helm template` of the chart: the doorbell queue is
    /// moto's, the forwarder's Deployment has no replicas (its process runs locally), and the
    /// webhook configuration is pointed at that process's loopback port.
    async fn install_chart(&mut self) -> Result<()> {
        let port = free_port()?;
        let queue = format!("forwarder.doorbellQueueUrl={}", self.doorbell_url);
        let rendered = Helm::locate()?.template(
            "dovetail",
            FORWARDER_NAMESPACE,
            self.control_plane.version(),
            &["--set", &queue, "--set", "forwarder.replicas=0"],
        )?;
        self.apply(&format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {FORWARDER_NAMESPACE}\n")).await?;
        for mut document in documents(&rendered)? {
            let name = kind_name(&document);
            match document["kind"].as_str() {
                Some("ValidatingWebhookConfiguration") => {
                    ensure!(name == format!("ValidatingWebhookConfiguration/{WEBHOOK}"), "the chart rendered {name}");
                    let mut configuration: ValidatingWebhookConfiguration = serde_json::from_value(document)?;
                    served_locally(&mut configuration, port).context("the chart's webhook configuration")?;
                    document = serde_json::to_value(configuration)?;
                }
                // The forwarder process is started with the webhook configuration's name: the
                // chart's Deployment must give it the same.
                Some("Deployment") => {
                    let env = &document["spec"]["template"]["spec"]["containers"][0]["env"];
                    let configuration = env
                        .as_array()
                        .and_then(|env| env.iter().find(|e| e["name"] == "DOVETAIL_WEBHOOK_CONFIGURATION"))
                        .map(|e| e["value"].clone());
                    ensure!(
                        configuration == Some(Value::from(WEBHOOK)),
                        "{name}: DOVETAIL_WEBHOOK_CONFIGURATION {configuration:?}"
                    );
                }
                _ => {}
            }
            self.apply_value(&document).await.with_context(|| format!("applying the chart's {name}"))?;
        }
        self.chart_forwarder_port = Some(port);
        Ok(())
    }

    /// The forwarder, as its ServiceAccount, registered by the kustomize base's webhook
    /// configuration (pointed at its loopback port) or the chart's (already so pointed).
    async fn start_forwarder(&mut self) -> Result<()> {
        let namespace = FORWARDER_NAMESPACE;
        let (port, kubeconfig) = match self.options.install {
            Install::Kustomize => {
                let port = free_port()?;
                let configurations: Api<ValidatingWebhookConfiguration> = Api::all(self.admin.clone());
                configurations.create(&PostParams::default(), &webhook_configuration(WEBHOOK, port, None)?).await?;
                self.apply(&format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n")).await?;
                (port, service_account_kubeconfig(&self.control_plane, &self.admin, namespace, WEBHOOK).await?)
            }
            Install::Helm => {
                let port = self.chart_forwarder_port.context("the chart was not installed")?;
                (port, forwarder_kubeconfig(&self.control_plane, namespace, WEBHOOK).await?)
            }
        };
        self.forwarder_setup = Some((port, kubeconfig));
        self.restart_forwarder().await
    }

    /// Starts the forwarder's process (again, after [`EndToEnd::kill_forwarder`]: a new pod of
    /// its Deployment), and waits until the webhook configuration trusts its certificate.
    pub async fn restart_forwarder(&self) -> Result<()> {
        let (port, kubeconfig) = self.forwarder_setup.as_ref().context("the forwarder was never set up")?;
        let endpoint = self.aws.config.endpoint_url.clone().context("moto's endpoint")?;
        let mut forwarder = start_forwarder(
            &self.control_plane,
            kubeconfig,
            WEBHOOK,
            FORWARDER_NAMESPACE,
            *port,
            (&endpoint, &self.doorbell_url),
        )?;
        forwarder.ca_bundle(&self.admin, WEBHOOK).await?;
        *self.forwarder.lock().unwrap() = Some(forwarder);
        Ok(())
    }

    /// The AWS outage the functions can be put through ([`Outage`]).
    pub fn outage(&self) -> &Outage {
        &self.ec2_calls.outage
    }

    /// Stops the forwarder as a failed pod would (killed).
    pub fn kill_forwarder(&self) {
        if let Some(mut f) = self.forwarder.lock().unwrap().take() {
            f.signal(libc::SIGKILL);
            let _ = f.child.wait();
        }
    }

    /// A function's reconciler with the real adapters: the Kubernetes adapter as a member of
    /// `dovetail:functions` (only what `infra/k8s/rbac` grants, or the chart's ClusterRole),
    /// EC2 through [`Ec2Calls`] (CreateFleet recorded, moto's placeholder spot prices refused),
    /// DynamoDB, SQS.
    pub async fn reconciler(&self, function: &str) -> Result<AwsReconciler> {
        let client = match self.options.install {
            Install::Kustomize => crate::kube::functions_client(&self.control_plane, &self.admin).await?,
            Install::Helm => crate::kube::functions_group_client(&self.control_plane).await?,
        };
        let kube = KubeAdapter::new(client).with_reporting_instance(function);
        let mut clients = self.aws.clients.clone();
        // The outage first: the CreateFleet that starts one still goes through itself.
        let outage = Outages(self.ec2_calls.outage.clone());
        clients.ec2 = aws_sdk_ec2::Client::from_conf(
            aws_sdk_ec2::config::Builder::from(&self.aws.sdk)
                .interceptor(outage.clone())
                .interceptor(self.ec2_calls.clone())
                .build(),
        );
        clients.dynamodb = aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(&self.aws.sdk).interceptor(outage.clone()).build(),
        );
        clients.sqs = aws_sdk_sqs::Client::from_conf(
            aws_sdk_sqs::config::Builder::from(&self.aws.sdk).interceptor(outage).build(),
        );
        let cloud = Ec2Cloud::new(&clients, &self.aws.config, World::facts());
        let ports = Ports {
            kube,
            cloud,
            store: DynamoStore::new(clients.dynamodb.clone(), TABLE, CLUSTER, self.aws.config.terminated_ttl),
            queue: SqsQueue::new(clients.sqs.clone(), &self.interruption_url),
            clock: SystemClock,
        };
        Ok(Reconciler::new(ports, Settings::new(CLUSTER, function)))
    }

    /// `deliveries` execution environments of `function` for one poller (`poller`: which of the
    /// function's concurrent pollers): reconcilers with lease holders of their own, as concurrent
    /// Lambda environments have.
    async fn environments(&self, function: &str, poller: usize) -> Result<Vec<Arc<AwsReconciler>>> {
        let mut environments = vec![];
        for i in 0..self.options.deliveries {
            environments.push(Arc::new(self.reconciler(&format!("{function}/{poller}.{i}")).await?));
        }
        Ok(environments)
    }

    async fn spawn_functions(&mut self) -> Result<()> {
        let sqs = self.aws.clients.sqs.clone();
        let provisioner = lambda::Poller {
            function: "dovetail-provisioner",
            sqs: sqs.clone(),
            arn: queue_arn(&sqs, &self.doorbell_url).await,
            url: self.doorbell_url.clone(),
            batch_size: lambda::PROVISIONER_BATCH,
            window: lambda::PROVISIONER_WINDOW,
            reorder: self.options.reorder,
        };
        let interruption = lambda::Poller {
            function: "dovetail-interruption",
            sqs: sqs.clone(),
            arn: queue_arn(&sqs, &self.interruption_url).await,
            url: self.interruption_url.clone(),
            batch_size: lambda::INTERRUPTION_BATCH,
            window: Duration::ZERO,
            reorder: false,
        };
        for poller in 0..lambda::PROVISIONER_CONCURRENCY {
            let p = self.environments(provisioner.function, poller).await?;
            // Warm functions, as provisioners receiving doorbells are: the first run in a process
            // reads the instance-type catalog and prices from EC2 (seconds on moto), later runs
            // reuse them for their TTL.
            for r in &p {
                r.provision().await?;
            }
            self.tasks.push(tokio::spawn(provisioner.clone().doorbells(p, self.shared.clone())));
        }
        let i = self.environments(interruption.function, 0).await?;
        self.tasks.push(tokio::spawn(interruption.interruptions(i, self.shared.clone())));
        if let Some(every) = self.options.sweep_every {
            let s = self.environments("dovetail-sweeper", 0).await?;
            self.tasks.push(tokio::spawn(lambda::sweeper(s, every, self.shared.clone())));
        }
        let kubelet =
            kubelet::Kubelet::new(self.admin.clone(), self.aws.clients.ec2.clone(), self.aws.clients.ssm.clone());
        self.tasks.push(tokio::spawn(kubelet.run(self.shared.clone())));
        Ok(())
    }

    pub fn store(&self) -> DynamoStore {
        DynamoStore::new(self.aws.clients.dynamodb.clone(), TABLE, CLUSTER, self.aws.config.terminated_ttl)
    }

    /// Server-side applies every document of `yaml` (any kind the API server knows, CRDs'
    /// included).
    pub async fn apply(&self, yaml: &str) -> Result<()> {
        for document in documents(yaml)? {
            self.apply_value(&document).await?;
        }
        Ok(())
    }

    /// Server-side applies one object.
    async fn apply_value(&self, value: &Value) -> Result<()> {
        let (api, name) = self.api_for(value).await?;
        api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(value))
            .await
            .with_context(|| format!("applying {} {name}", value["kind"]))?;
        Ok(())
    }

    /// Applies `infra/examples/<path>`.
    pub async fn apply_example(&self, path: &str) -> Result<()> {
        self.apply_file(&format!("infra/examples/{path}")).await
    }

    /// Applies a file of the repository (`path` from its root).
    pub async fn apply_file(&self, path: &str) -> Result<()> {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
        let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        self.apply(&text).await.with_context(|| format!("applying {}", file.display()))
    }

    async fn api_for(&self, value: &Value) -> Result<(Api<DynamicObject>, String)> {
        let (resource, capabilities) = resource_of(&self.admin, value).await?;
        let name = value["metadata"]["name"].as_str().context("metadata.name")?.to_string();
        let api = match (capabilities.scope, value["metadata"]["namespace"].as_str()) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(self.admin.clone(), ns, &resource),
            (Scope::Namespaced, None) => Api::default_namespaced_with(self.admin.clone(), &resource),
            (Scope::Cluster, _) => Api::all_with(self.admin.clone(), &resource),
        };
        Ok((api, name))
    }

    /// Polls `check` every 250 ms until it gives a value; fails after `timeout`, when a
    /// background task failed, or when the forwarder died — saying what it waited for.
    pub async fn until<T, F, Fut>(&self, what: &str, timeout: Duration, mut check: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<Option<T>>>,
    {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(f) = self.shared.failures.lock().unwrap().first() {
                bail!("while waiting for {what}: {f}");
            }
            if let Some(forwarder) = self.forwarder.lock().unwrap().as_mut() {
                forwarder.check_running()?;
            }
            if let Some(value) = check().await? {
                return Ok(value);
            }
            if Instant::now() > deadline {
                bail!(
                    "{}: no {what} within {timeout:?}\n{}--- kube-scheduler:\n{}",
                    self.scenario,
                    self.diagnose().await.unwrap_or_else(|e| format!("(no diagnosis: {e:#})\n")),
                    self.control_plane.log_tail("kube-scheduler", 15),
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// What a timed-out wait reports: pods not running with the last Event about each, the
    /// claims and the nodes.
    pub async fn diagnose(&self) -> Result<String> {
        use std::fmt::Write as _;
        let mut out = String::from("--- pods not running:\n");
        for pod in Api::<Pod>::all(self.admin.clone()).list(&ListParams::default()).await?.items {
            if phase(&pod) == "Running" {
                continue;
            }
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let mut events = self.events(&namespace, "Pod", &name).await?;
            events.sort_by_key(|e| e.last_timestamp.clone().map(|t| t.0));
            let last = events.last().map(|e| format!("{:?}: {:?}", e.reason, e.message)).unwrap_or_default();
            writeln!(out, "  {namespace}/{name} on {:?}: {last}", node_of(&pod))?;
        }
        writeln!(out, "--- claims:")?;
        for c in self.store().claims().await? {
            let launch =
                c.launch.map(|l| format!("{} {} {}", l.instance_id, l.instance_type, l.zone)).unwrap_or_default();
            writeln!(out, "  {} {:?} {launch}", c.name, c.phase)?;
        }
        writeln!(out, "--- instances:")?;
        let described = self
            .aws
            .clients
            .ec2
            .describe_instances()
            .filters(aws_sdk_ec2::types::Filter::builder().name("tag:dovetail.dev/cluster").values(CLUSTER).build())
            .send()
            .await?;
        for i in described.reservations().iter().flat_map(|r| r.instances()) {
            let state = i.state().and_then(|s| s.name()).map(|s| s.as_str().to_string()).unwrap_or_default();
            let claim =
                i.tags().iter().find(|t| t.key() == Some(dovetail_aws::ec2::TAG_NODECLAIM)).and_then(|t| t.value());
            writeln!(
                out,
                "  {} {state} {:?} {:?} claim {claim:?}",
                i.instance_id().unwrap_or_default(),
                i.private_dns_name(),
                i.launch_time()
            )?;
        }
        writeln!(out, "--- nodes:")?;
        for n in self.nodes().await? {
            let taints: Vec<String> =
                n.spec.and_then(|s| s.taints).unwrap_or_default().into_iter().map(|t| t.key).collect();
            writeln!(out, "  {:?} taints {taints:?}", n.metadata.name)?;
        }
        Ok(out)
    }

    /// Pods in `namespace` matching `selector` (`key=value`).
    pub async fn pods(&self, namespace: &str, selector: &str) -> Result<Vec<Pod>> {
        let pods: Api<Pod> = Api::namespaced(self.admin.clone(), namespace);
        Ok(pods.list(&ListParams::default().labels(selector)).await?.items)
    }

    /// Waits until `count` pods in `namespace` matching `selector` run (bound by the scheduler,
    /// started by the test kubelet, not terminating); returns them.
    pub async fn running(&self, namespace: &str, selector: &str, count: usize) -> Result<Vec<Pod>> {
        let admin = self.admin.clone();
        let what = format!("{count} running pods {selector} in {namespace}");
        self.until(&what, STEP, || {
            let pods: Api<Pod> = Api::namespaced(admin.clone(), namespace);
            async move {
                let running: Vec<Pod> =
                    pods.list(&ListParams::default().labels(selector)).await?.items.into_iter().filter(runs).collect();
                Ok((running.len() == count).then_some(running))
            }
        })
        .await
    }

    pub async fn nodes(&self) -> Result<Vec<Node>> {
        Ok(Api::<Node>::all(self.admin.clone()).list(&ListParams::default()).await?.items)
    }

    /// The Node named `name`, if it exists.
    pub async fn node(&self, name: &str) -> Result<Node> {
        Ok(Api::<Node>::all(self.admin.clone()).get(name).await?)
    }

    /// Live (not Terminated) NodeClaims.
    pub async fn live_claims(&self) -> Result<Vec<NodeClaim>> {
        Ok(self.store().claims().await?.into_iter().filter(|c| c.phase != Phase::Terminated).collect())
    }

    /// Instances of the cluster in moto, pending or running: (id, claim tag, lifecycle).
    pub async fn instances(&self) -> Vec<(String, String, Option<String>)> {
        cluster_instances(&self.aws.clients.ec2).await
    }

    /// Every live instance has exactly one live claim and the reverse. A scheduled sweep may be
    /// launching at that moment (a consolidation replacement, capacity for pods a slow
    /// Deployment created late): its claim is written before its CreateFleet and records the
    /// instance after. So this first waits, for one step at most, until no claim is mid-launch;
    /// a claim that never records its instance still fails the check.
    pub async fn assert_exactly_once(&self, context: &str) -> Result<()> {
        let what = format!("{context}: every live claim recording its instance");
        let launched = self.until(&what, STEP, || async {
            let claims = self.live_claims().await?;
            Ok(claims.iter().all(|c| c.launch.is_some()).then_some(claims))
        });
        let claims = match launched.await {
            Ok(claims) => claims,
            // Checked anyway, so the failure names the claim.
            Err(_) => self.live_claims().await?,
        };
        assert_exactly_once(&claims, &self.instances().await, context);
        Ok(())
    }

    /// A NodeClaim made by hand (by the admin, not `dovetail:functions`) is refused by the
    /// admission policy, which says why.
    pub async fn assert_hand_made_nodeclaim_refused(&self) -> Result<()> {
        let resource = kube::api::ApiResource::erase::<dovetail_api::crd::NodeClaim>(&());
        let claims: Api<DynamicObject> = Api::all_with(self.admin.clone(), &resource);
        let by_hand = serde_json::from_value(serde_json::json!({
            "apiVersion": "dovetail.dev/v1", "kind": "NodeClaim", "metadata": {"name": "by-hand"},
            "spec": {"nodeClassRef": {"group": "dovetail.dev", "kind": "EC2NodeClass", "name": "default"}},
        }))?;
        match claims.create(&PostParams::default(), &by_hand).await {
            Ok(_) => bail!("a hand-made NodeClaim was admitted"),
            Err(kube::Error::Api(s)) => {
                ensure!(s.message.contains("NodeClaims are created by Dovetail"), "{}", s.message);
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Events about `kind/name` (in `namespace` for namespaced objects, `default` otherwise: the
    /// adapter writes cluster-scoped objects' Events there, as kubectl expects).
    pub async fn events(&self, namespace: &str, kind: &str, name: &str) -> Result<Vec<Event>> {
        let events: Api<Event> = Api::namespaced(self.admin.clone(), namespace);
        let fields = format!("involvedObject.kind={kind},involvedObject.name={name}");
        Ok(events.list(&ListParams::default().fields(&fields)).await?.items)
    }

    /// Every pod's latency from "marked unschedulable" to the CreateFleet of the claim it was
    /// nominated to; written for the summary and printed. Pods nominated to capacity launched
    /// before they were marked are left out (nothing was launched for them).
    /// The sum of `metric` over the EMF documents `function` published whose dimensions include
    /// every `(name, value)` of `on`.
    pub fn metric_sum(&self, function: &str, metric: &dovetail_runtime::metrics::Metric, on: &[(&str, &str)]) -> f64 {
        let docs = self.shared.metrics.lock().unwrap();
        docs.iter()
            .filter(|d| d["Function"] == function)
            .filter(|d| on.iter().all(|(k, v)| d[*k] == *v))
            .filter_map(|d| d.get(metric.name).and_then(serde_json::Value::as_f64))
            .sum()
    }

    pub async fn report_latency(&self) -> Result<()> {
        let rung = self.shared.rung.lock().unwrap().clone();
        let calls = self.ec2_calls.fleets.lock().unwrap().clone();
        let mut samples = vec![];
        let mut earlier = 0;
        for (pod, marked) in &rung {
            let (namespace, name) = pod.split_once('/').context("namespace/name")?;
            let claims: Vec<String> = self
                .events(namespace, "Pod", name)
                .await?
                .iter()
                .filter(|e| e.reason.as_deref() == Some("Nominated"))
                .filter_map(|e| e.message.as_deref()?.split("nodeclaim/").nth(1)?.split(' ').next().map(String::from))
                .collect();
            let launched = calls.iter().filter(|c| claims.contains(&c.claim)).map(|c| c.at).min();
            match launched.map(|at| at.duration_since(*marked)) {
                Some(Ok(latency)) => samples.push(latency),
                Some(Err(_)) => earlier += 1,
                None => {}
            }
        }
        samples.sort();
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("e2e-latency");
        std::fs::create_dir_all(&dir)?;
        let millis: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        std::fs::write(dir.join(format!("{}.json", self.scenario)), serde_json::to_vec(&millis)?)?;
        let pick = |q: f64| samples.get(((samples.len() as f64 * q).ceil() as usize).saturating_sub(1)).copied();
        eprintln!(
            "{}: unschedulable → CreateFleet over {} pods: p50 {:?}, p99 {:?} ({earlier} served by capacity already launching)",
            self.scenario,
            samples.len(),
            pick(0.5),
            pick(0.99)
        );
        Ok(())
    }
}

/// Whether Dovetail wrote `event` (kube-scheduler writes FailedScheduling Events too).
pub fn by_dovetail(event: &Event) -> bool {
    event.source.as_ref().and_then(|s| s.component.as_deref()) == Some(dovetail_kube::SOURCE_COMPONENT)
}

/// Started by the kubelet and not being deleted.
pub fn runs(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && phase(pod) == "Running"
}

pub fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default()
}

pub fn node_of(pod: &Pod) -> String {
    pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default()
}

pub fn label<'a>(node: &'a Node, key: &str) -> &'a str {
    node.metadata.labels.as_ref().and_then(|l| l.get(key)).map(String::as_str).unwrap_or_default()
}

/// `aws:///<zone>/<instance-id>` → the instance id.
pub fn instance_of(node: &Node) -> String {
    let provider = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).unwrap_or_default();
    provider.rsplit('/').next().unwrap_or_default().to_string()
}
