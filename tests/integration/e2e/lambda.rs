//! What Lambda does around the functions, as `infra/sam/template.yaml` configures it: an SQS
//! poller per queue (batch size, batching window, partial batch responses: messages not reported
//! failed are deleted, the others come back after the visibility timeout) and the sweeper's
//! schedule. Handlers are the functions' own (`dovetail_runtime::handlers`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use dovetail_core::reconcile::Deadline;
use dovetail_runtime::aws::AwsReconciler;
use dovetail_runtime::handlers;
use futures_util::future::join_all;

use super::Shared;
use crate::functions::{delete_succeeded, receive, sqs_event};

/// The provisioner's event source mapping: `BatchSize: 100`, `MaximumBatchingWindowInSeconds: 1`,
/// `ScalingConfig.MaximumConcurrency: 2` (two batches in flight at once: one reconciles, the
/// other finds the lease held and asks the holder to look once more).
pub const PROVISIONER_BATCH: usize = 100;
pub const PROVISIONER_WINDOW: Duration = Duration::from_secs(1);
pub const PROVISIONER_CONCURRENCY: usize = 2;
/// The interruption function's: `BatchSize: 10`, no window. Lambda would run several of its
/// batches at once; one at a time here, as the scenarios send one interruption at a time.
pub const INTERRUPTION_BATCH: usize = 10;

/// One of Lambda's SQS pollers for a function (a function with `MaximumConcurrency` n has n of
/// them, each handing its batches to execution environments of its own).
#[derive(Clone)]
pub struct Poller {
    pub function: &'static str,
    pub sqs: aws_sdk_sqs::Client,
    pub url: String,
    pub arn: String,
    pub batch_size: usize,
    pub window: Duration,
    /// Hands each batch over last message first.
    pub reorder: bool,
}

impl Poller {
    /// The next batch: long-polls for a first message, then gathers more until the batching
    /// window has passed since it or the batch is full.
    async fn batch(&self) -> SqsEvent {
        let mut messages = receive(&self.sqs, &self.url, 10, 1).await;
        if messages.is_empty() {
            return sqs_event(messages, &self.arn);
        }
        let since = Instant::now();
        while messages.len() < self.batch_size && since.elapsed() < self.window {
            let room = (self.batch_size - messages.len()).min(10) as i32;
            let more = receive(&self.sqs, &self.url, room, 0).await;
            if more.is_empty() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            messages.extend(more);
        }
        if self.reorder {
            messages.reverse();
        }
        sqs_event(messages, &self.arn)
    }

    /// Hands `event` to every execution environment at once (one each, unless duplicates are
    /// asked for); the failures are the union of what the invocations reported.
    async fn deliver<F, Fut>(&self, event: &SqsEvent, shared: &Shared, environments: usize, handle: F)
    where
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = SqsBatchResponse>,
    {
        *shared.batches.lock().unwrap().entry(self.function).or_default() += 1;
        for record in &event.records {
            let body: Option<serde_json::Value> = record.body.as_deref().and_then(|b| serde_json::from_str(b).ok());
            if let Some(kind) = body.as_ref().and_then(|b| b["detail-type"].as_str()) {
                *shared.events_delivered.lock().unwrap().entry(kind.to_string()).or_default() += environments;
            }
        }
        let responses = join_all((0..environments).map(handle)).await;
        let failed: BTreeSet<String> =
            responses.iter().flat_map(|r| r.batch_item_failures.iter().map(|f| f.item_identifier.clone())).collect();
        if !failed.is_empty() {
            eprintln!("{}: {} messages reported failed; they come back", self.function, failed.len());
        }
        delete_succeeded(&self.sqs, &self.url, event, &failed.into_iter().collect::<Vec<_>>()).await;
    }

    /// The provisioner: doorbells (their `unschedulableAt` noted for the latency figures). Each
    /// reconciler is one execution environment (its own lease holder, as each has its own log
    /// stream); every batch goes to all of them at once.
    pub async fn doorbells(self, environments: Vec<Arc<AwsReconciler>>, shared: Arc<Shared>) {
        loop {
            let event = self.batch().await;
            if event.records.is_empty() {
                continue;
            }
            note_rung(&event, &shared);
            let again = event
                .records
                .iter()
                .filter(|r| r.attributes.get("ApproximateReceiveCount").and_then(|n| n.parse::<u32>().ok()) > Some(1))
                .count();
            shared.redelivered.fetch_add(again, std::sync::atomic::Ordering::SeqCst);
            self.deliver(&event, &shared, environments.len(), |i| {
                let (reconciler, event, shared) = (&environments[i], &event, &shared);
                async move {
                    let handled = handlers::doorbells(self.function, reconciler, event, Deadline::NONE).await;
                    shared.metrics.lock().unwrap().extend(handled.metrics);
                    handled.response
                }
            })
            .await;
        }
    }

    /// The interruption function (environments as for [`Poller::doorbells`]).
    pub async fn interruptions(self, environments: Vec<Arc<AwsReconciler>>, shared: Arc<Shared>) {
        loop {
            let event = self.batch().await;
            if event.records.is_empty() {
                continue;
            }
            self.deliver(&event, &shared, environments.len(), |i| {
                let (reconciler, event, shared) = (&environments[i], &event, &shared);
                async move {
                    let handled = handlers::interruptions(self.function, reconciler, event, Deadline::NONE).await;
                    shared.metrics.lock().unwrap().extend(handled.metrics);
                    handled.response
                }
            })
            .await;
        }
    }
}

/// The sweeper on its schedule (each tick one invocation per environment, at once).
pub async fn sweeper(environments: Vec<Arc<AwsReconciler>>, every: Duration, shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(every).await;
        *shared.batches.lock().unwrap().entry("dovetail-sweeper").or_default() += 1;
        let sweeps =
            join_all(environments.iter().map(|r| handlers::sweep("dovetail-sweeper", r, Deadline::NONE))).await;
        for s in sweeps {
            if let Err(e) = s {
                // The next tick tries again, as the schedule would; a scenario that needs the
                // sweep notices when its outcome does not come.
                eprintln!("dovetail-sweeper: {e}");
            }
        }
    }
}

/// Records each rung pod's earliest `unschedulableAt`.
fn note_rung(event: &SqsEvent, shared: &Shared) {
    let mut rung = shared.rung.lock().unwrap();
    for r in &event.records {
        let Some(body) = r.body.as_deref().and_then(|b| serde_json::from_str::<serde_json::Value>(b).ok()) else {
            continue;
        };
        let (Some(pod), Some(at)) = (body["pod"].as_str(), body["unschedulableAt"].as_str()) else { continue };
        let Ok(at) = at.parse::<k8s_openapi::jiff::Timestamp>() else { continue };
        let at = SystemTime::UNIX_EPOCH + Duration::from_nanos(at.as_nanosecond() as u64);
        rung.entry(pod.to_string()).and_modify(|t| *t = (*t).min(at)).or_insert(at);
    }
}
