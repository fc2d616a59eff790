//! The scale rig: the functions' own handlers, in-process, against a real kube-apiserver loaded
//! with thousands of Nodes and pods and moto loaded with their instances and NodeClaims, driven
//! through a scripted stream of changes — and what each invocation cost: wall time (to the first
//! CreateFleet, and in all), Kubernetes requests and bytes read, DynamoDB items and read units,
//! EC2 calls by API, peak RSS. Issue 16 asks for it; `tests/bench/scale.rs` runs it at the sizes
//! of the issue, `tests/integration/scale.rs` in a short form that asserts on counts.
//!
//! - [`world`]: starting moto and a control plane, loading them ([`World::load`]).
//! - [`pods`]: Karpenter's benchmark mix as Kubernetes pods.
//! - [`proxy`]: the counting proxy the functions reach the API server through.
//! - [`aws`]: the interceptor counting the functions' AWS calls.
//! - [`busy`]: the wall time with an AWS call or a Kubernetes request in flight.
//! - [`memory`]: the process's RSS and its peak per invocation, and each function's heap.
//! - [`report`]: the rows as a Markdown table.
//! - [`costs`]: what a month of Dovetail costs, from the rows (docs/costs.md).
//!
//! A function is `dovetail_runtime::aws::Function`, what a Lambda builds at init, given the rig's
//! counting clients (`Function::with_clients`) and a kubeconfig through the proxy. A *cold* row is
//! a function's first invocation, init included (as a fresh execution environment runs it); a
//! *warm* row is a later invocation of the same function. One thing stays warm across functions
//! in one process: the embedded instance catalog, parsed once (a cold row in a fresh process would
//! parse it too).

pub mod aws;
pub mod busy;
pub mod costs;
pub mod memory;
pub mod pods;
pub mod proxy;
pub mod report;
pub mod world;

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use aws_lambda_events::event::sqs::SqsEvent;
use dovetail_core::reconcile::Deadline;
use dovetail_runtime::aws::{ClusterAuth, Function, Kind};
use serde::{Deserialize, Serialize};
use serde_json::json;

pub use aws::{AwsCounter, AwsTally};
pub use proxy::{KubeTally, Proxy};
pub use world::{LoadStats, World};

/// Nodes and bound pods loaded before the stream starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Size {
    pub nodes: usize,
    pub pods: usize,
}

impl Size {
    /// The short form CI runs.
    pub const CI: Size = Size { nodes: 200, pods: 4_000 };
    /// The issue's sizes.
    pub const ISSUE: [Size; 3] =
        [Size { nodes: 500, pods: 10_000 }, Size { nodes: 2_000, pods: 40_000 }, Size { nodes: 5_000, pods: 100_000 }];
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} nodes / {} pods", self.nodes, self.pods)
    }
}

/// Which execution environment an invocation runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Env {
    /// The function kept for the whole stream: cold on its first invocation, warm after.
    Kept,
    /// A new function, for this invocation only: cold.
    Fresh,
}

/// One step of the stream: a change the rig makes, or an invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `n` new pods of the mix, marked Unschedulable.
    Pending(usize),
    /// `n` bound pods deleted (no invocation: a deletion rings no doorbell; the next sweep sees it).
    Delete(usize),
    /// A node's claim made to look launched from an older NodePool template.
    Drift,
    /// The provisioner, with a doorbell for each pod made pending since its last invocation — the
    /// first batch Lambda hands over ([`DOORBELL_BATCH`] at most); later batches would find the
    /// burst planned.
    Provision(Env),
    /// The interruption function, with a spot interruption warning for a spot node's instance.
    Interrupt(Env),
    /// The sweeper.
    Sweep(Env),
}

/// The provisioner's SQS batch size (the deployed event source's, and the end-to-end tests').
pub const DOORBELL_BATCH: usize = 100;

/// A stream of steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    pub steps: Vec<Step>,
}

impl Script {
    /// The issue's stream: pending bursts of 1, 100 and 1,000 pods, deletions, two spot
    /// interruptions, two drifts, sweeps — each function cold and warm.
    pub fn full(size: Size) -> Script {
        Script::with_bursts(size, &[1, 100, 1_000])
    }

    /// [`Script::full`] without the 1,000-pod burst (hundreds of launches on moto): what CI runs.
    pub fn short(size: Size) -> Script {
        Script::with_bursts(size, &[1, 100])
    }

    /// The stream with these burst sizes: the first burst's provisioner is the kept one (cold,
    /// then warm on a second burst of the same size); each later size runs once fresh (cold) and
    /// once on the kept function (warm).
    pub fn with_bursts(size: Size, bursts: &[usize]) -> Script {
        use Env::{Fresh, Kept};
        // A cold sweep, then a warm one with nothing changed: most of a month's sweeps.
        let mut steps = vec![Step::Sweep(Kept), Step::Sweep(Kept)];
        for (i, &n) in bursts.iter().enumerate() {
            let first = if i == 0 { Kept } else { Fresh };
            steps.extend([Step::Pending(n), Step::Provision(first), Step::Pending(n), Step::Provision(Kept)]);
        }
        steps.extend([
            Step::Delete(size.pods / 20),
            Step::Sweep(Kept),
            Step::Interrupt(Kept),
            Step::Interrupt(Kept),
            Step::Drift,
            Step::Sweep(Kept),
            Step::Drift,
            Step::Sweep(Fresh),
        ]);
        Script { steps }
    }
}

/// What one invocation cost.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    pub nodes: usize,
    pub pods: usize,
    /// `provisioner`, `interruption` or `sweeper`.
    pub function: String,
    /// `cold` or `warm`.
    pub start: String,
    /// The changes since the previous invocation, e.g. `100 pods pending` ([`pending_change`]).
    pub after: String,
    /// Building the function (cold only): SDK clients, DescribeCluster, the table and queue checks.
    pub init_ms: Option<f64>,
    /// Until the invocation's first CreateFleet.
    pub first_create_fleet: Option<Until>,
    /// Until its first eviction.
    pub first_eviction: Option<Until>,
    /// Until it returned.
    pub total: Until,
    pub kube_requests: u64,
    pub kube_bytes_read: u64,
    pub kube_bytes_written: u64,
    /// Requests by `verb resource`.
    pub kube_by_request: BTreeMap<String, u64>,
    pub dynamodb_items_read: u64,
    pub dynamodb_read_units: f64,
    /// At least (see [`aws`]).
    pub dynamodb_write_units: f64,
    pub dynamodb_calls: BTreeMap<String, u64>,
    pub ec2_calls: BTreeMap<String, u64>,
    /// SQS, EKS, SSM, Pricing, as `Service.Operation`.
    pub other_aws_calls: BTreeMap<String, u64>,
    /// The process's RSS just before the invocation, and its peak during it, in MiB: all three
    /// functions and the rig ([`memory`]).
    pub rss_before_mib: f64,
    pub peak_rss_mib: f64,
    /// This function's heap in MiB, had it a process of its own ([`memory::Counting`]; `None`
    /// without it): what it holds between invocations (its warm snapshot, caches and clients)
    /// after this one, and its peak during this one. A process adds its binary, stacks and the
    /// allocator's slack to these.
    pub heap_held_mib: Option<f64>,
    pub heap_peak_mib: Option<f64>,
    /// Live NodeClaims after the invocation less before.
    pub claims_added: i64,
    /// Messages reported failed, or the sweeper's errors.
    pub failures: usize,
}

impl Row {
    pub fn create_fleets(&self) -> u64 {
        self.ec2_calls.get("CreateFleet").copied().unwrap_or(0)
    }

    pub fn kube_lists(&self, resource: &str) -> u64 {
        self.kube_by_request.get(&format!("list {resource}")).copied().unwrap_or(0)
    }
}

/// The wall time from an invocation's start (init included) to a moment of it, and of that the
/// time spent waiting ([`busy`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Until {
    pub ms: f64,
    /// With an AWS call in flight (moto's answers: see [`aws`]).
    pub aws_ms: f64,
    /// With a Kubernetes request in flight.
    pub kube_ms: f64,
    /// With either.
    pub waiting_ms: f64,
}

impl Until {
    fn of(started: Instant, at: Instant, waited: &busy::Waited) -> Until {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        Until {
            ms: ms(at.saturating_duration_since(started)),
            aws_ms: ms(waited.aws),
            kube_ms: ms(waited.kube),
            waiting_ms: ms(waited.any),
        }
    }

    /// The wall time less the AWS time no Kubernetes request overlapped: the function's own work
    /// and its waits on the API server. What a real region's answers add is an assumption per
    /// call (`costs::Allowance`).
    pub fn own_ms(&self) -> f64 {
        (self.ms - (self.waiting_ms - self.kube_ms)).max(0.0)
    }
}

/// One size's load and rows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub size: Size,
    pub load: LoadStats,
    pub rows: Vec<Row>,
}

/// Loads `size` and runs `script` on it.
pub async fn run(size: Size, script: &Script) -> Result<Run> {
    let mut world = World::load(size).await.with_context(|| format!("loading {size}"))?;
    tracing::info!(%size, load = ?world.stats, "loaded");
    let mut rig = Rig {
        counter: AwsCounter::new(world.proxy.busy().clone()),
        kept: BTreeMap::new(),
        doorbells: vec![],
        changes: vec![],
        held: BTreeMap::new(),
    };
    let mut rows = Vec::new();
    for (i, step) in script.steps.iter().enumerate() {
        let row = rig.step(&mut world, *step).await.with_context(|| format!("{size}, step {}: {step:?}", i + 1))?;
        if let Some(row) = row {
            tracing::info!(function = row.function, start = row.start, after = %row.after, total_ms = row.total.ms, "invoked");
            rows.push(row);
        }
    }
    Ok(Run { size, load: world.stats.clone(), rows })
}

/// What the stream keeps between steps.
struct Rig {
    counter: AwsCounter,
    /// The kept function of each kind, by name.
    kept: BTreeMap<&'static str, Function>,
    /// Pods made pending since the provisioner last ran.
    doorbells: Vec<String>,
    /// Changes since the last invocation, for the next row.
    changes: Vec<String>,
    /// The heap bytes each kept function holds between invocations.
    held: BTreeMap<&'static str, i64>,
}

impl Rig {
    async fn step(&mut self, world: &mut World, step: Step) -> Result<Option<Row>> {
        match step {
            Step::Pending(n) => {
                self.doorbells.extend(world.pending(n).await?);
                self.changes.push(pending_change(n));
                Ok(None)
            }
            Step::Delete(n) => {
                world.delete(n).await?;
                self.changes.push(format!("{n} pods deleted"));
                Ok(None)
            }
            Step::Drift => {
                let claim = world.drift().await?;
                self.changes.push(format!("{claim} drifted"));
                Ok(None)
            }
            Step::Provision(env) => {
                let batch: Vec<String> =
                    self.doorbells.drain(..).take(DOORBELL_BATCH).map(|pod| doorbell(&pod)).collect();
                self.invoke(world, Kind::Provisioner, env, Invocation::Sqs(sqs_event(&batch))).await.map(Some)
            }
            Step::Interrupt(env) => {
                let body = world.spot_interruption()?;
                self.changes.push("a spot interruption warning".into());
                self.invoke(world, Kind::Interruption, env, Invocation::Sqs(sqs_event(&[body]))).await.map(Some)
            }
            Step::Sweep(env) => self.invoke(world, Kind::Sweeper, env, Invocation::Sweep).await.map(Some),
        }
    }

    async fn invoke(&mut self, world: &World, kind: Kind, env: Env, invocation: Invocation) -> Result<Row> {
        let name = kind.name();
        let claims_before = world.live_claims().await? as i64;
        let after = if self.changes.is_empty() { "nothing".to_string() } else { self.changes.join(", ") };
        self.changes.clear();
        let cold = env == Env::Fresh || !self.kept.contains_key(name);

        memory::reset_peak().context("resetting the peak RSS (/proc/self/clear_refs)")?;
        memory::reset_heap_peak();
        let memory_before = memory::now();
        let heap_before = memory::heap();
        let (kube_before, aws_before) = (world.proxy.tally(), self.counter.tally());
        let started = Instant::now();
        let waited_before = world.proxy.busy().at(started);
        let mut fresh = None;
        let mut init_ms = None;
        if cold {
            let clients = self.counter.instrument(&world.clients);
            let auth = ClusterAuth::Kubeconfig(world.kubeconfig.clone());
            let function = Function::with_clients(name, world.config.clone(), clients, auth)
                .await
                .map_err(|e| anyhow!("{name} init: {e}"))?;
            init_ms = Some(started.elapsed().as_secs_f64() * 1e3);
            fresh = Some(function);
        }
        let function = match &fresh {
            Some(f) => f,
            None => &self.kept[name],
        };
        let failures = match invocation {
            Invocation::Sqs(event) => {
                let response = match kind {
                    Kind::Provisioner => function.doorbells(event, Deadline::NONE).await,
                    _ => function.interruptions(event, Deadline::NONE).await,
                };
                response.map_err(|e| anyhow!("{name}: {e}"))?.batch_item_failures.len()
            }
            Invocation::Sweep => function.sweep(Deadline::NONE).await.map_err(|e| anyhow!("{name}: {e}"))?.errors,
        };
        let ended = Instant::now();
        let waited = world.proxy.busy().at(ended).since(&waited_before);
        let memory_after = memory::now();
        let heap_after = memory::heap();
        let kube = world.proxy.tally().since(&kube_before);
        let aws = self.counter.tally().since(&aws_before);
        let until = |(at, w): &(Instant, busy::Waited)| Until::of(started, *at, &w.since(&waited_before));
        if let Some(function) = fresh.take() {
            if env == Env::Kept {
                self.kept.insert(name, function);
            }
        }
        let mib = |kib: u64| kib as f64 / 1024.0;
        // The function's heap: what it held before (nothing when new), plus what the invocation
        // added to the process's heap, at its peak and at its end.
        let heap = heap_before.zip(heap_after).map(|(before, after)| {
            let held_before = if cold { 0 } else { self.held.get(name).copied().unwrap_or(0) };
            let grown = |bytes: usize| held_before + bytes as i64 - before.in_use as i64;
            if env == Env::Kept {
                self.held.insert(name, grown(after.in_use));
            }
            let mib = |bytes: i64| bytes as f64 / f64::from(1 << 20);
            (mib(grown(after.in_use)), mib(grown(after.peak)))
        });
        Ok(Row {
            nodes: world.size.nodes,
            pods: world.size.pods,
            function: name.to_string(),
            start: if cold { "cold" } else { "warm" }.to_string(),
            after,
            init_ms,
            first_create_fleet: aws.create_fleets.first().map(until),
            first_eviction: kube.evictions.first().map(until),
            total: Until::of(started, ended, &waited),
            kube_requests: kube.total(),
            kube_bytes_read: kube.bytes_read,
            kube_bytes_written: kube.bytes_written,
            dynamodb_items_read: aws.dynamodb_items,
            dynamodb_read_units: aws.dynamodb_read_units,
            dynamodb_write_units: aws.dynamodb_write_units,
            dynamodb_calls: aws.service("DynamoDB"),
            ec2_calls: aws.service("EC2"),
            other_aws_calls: aws.others(),
            kube_by_request: kube.requests,
            rss_before_mib: mib(memory_before.rss_kib),
            peak_rss_mib: mib(memory_after.peak_kib.max(memory_after.rss_kib)),
            heap_held_mib: heap.map(|(held, _)| held),
            heap_peak_mib: heap.map(|(_, peak)| peak),
            claims_added: world.live_claims().await? as i64 - claims_before,
            failures,
        })
    }
}

enum Invocation {
    Sqs(SqsEvent),
    Sweep,
}

/// How a row's `after` names a burst of `n` pending pods.
pub fn pending_change(n: usize) -> String {
    if n == 1 {
        "1 pod pending".into()
    } else {
        format!("{n} pods pending")
    }
}

/// A doorbell for pod `name` of the rig's namespace, as the forwarder rings it.
fn doorbell(name: &str) -> String {
    let at = k8s_openapi::jiff::Timestamp::now();
    dovetail_forwarder::doorbell::Doorbell::Pod { namespace: world::NAMESPACE.into(), name: name.into(), at }.body()
}

/// `bodies` as Lambda's SQS poller hands them to a function.
fn sqs_event(bodies: &[String]) -> SqsEvent {
    let sent = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis().to_string())
        .unwrap_or_default();
    let records: Vec<serde_json::Value> = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| {
            json!({
                "messageId": format!("scale-{sent}-{i}"),
                "receiptHandle": format!("scale-{sent}-{i}"),
                "body": body,
                "attributes": { "ApproximateReceiveCount": "1", "SentTimestamp": sent },
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": format!("arn:aws:sqs:{}:123456789012:dovetail", crate::moto::REGION),
                "awsRegion": crate::moto::REGION,
            })
        })
        .collect();
    serde_json::from_value(json!({ "Records": records })).expect("Lambda's SQS event shape")
}
