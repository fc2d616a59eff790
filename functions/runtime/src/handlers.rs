//! The three functions' handlers, over any ports: the Lambda mains call them with the AWS and
//! Kubernetes adapters ([`crate::aws`]), the tests with moto and an in-memory cluster. Each runs
//! one reconciler, logs its decisions, publishes its metrics and answers in Lambda's shape.
//!
//! Each is given its invocation's [`Deadline`] (Lambda's, less a reserve for finishing) and stops
//! starting work when it passes, answering so that nothing is lost: see
//! [`dovetail_core::reconcile::deadline`].

use std::time::Instant;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use dovetail_core::ceilings::QUEUE_MESSAGE_BYTES;
use dovetail_core::reconcile::ports::{Clock, Cloud, Kube, PortError, Queue, Store};
use dovetail_core::reconcile::{Deadline, Reconciler, Report};

use crate::{logging, metrics, sqs};

/// What a handler answered, what its reconciler did and the EMF documents it published (the
/// report is logged and the documents printed already; tests and benchmarks read them).
#[derive(Debug, Clone)]
pub struct Handled<R> {
    pub response: R,
    pub report: Report,
    pub metrics: Vec<serde_json::Value>,
}

/// The provisioner: a batch of doorbells. Their content does not matter — any doorbell means
/// "look again", and the reconcile re-reads the whole cluster — so the batch succeeds or fails as
/// one: when the reconcile could not run (the store or the cluster unreachable), every message
/// is reported failed and comes back after the visibility timeout. A doorbell that is not JSON
/// is logged, naming the message, and consumed: the reconcile it rang has run. Stopped at its
/// deadline with work left, the batch fails too: the doorbells come back for it.
pub async fn doorbells<K: Kube, C: Cloud, S: Store, Q: Queue, T: Clock>(
    function: &str,
    reconciler: &Reconciler<K, C, S, Q, T>,
    event: &SqsEvent,
    deadline: Deadline,
) -> Handled<SqsBatchResponse> {
    let started = Instant::now();
    for m in sqs::messages(event) {
        if let Err(over) = QUEUE_MESSAGE_BYTES.check(m.body.len() as u64) {
            tracing::warn!(message = %m.id, %over, "doorbell not parsed; consumed (the reconcile re-reads the cluster)");
        } else if let Err(e) = serde_json::from_str::<serde_json::Value>(&m.body) {
            tracing::warn!(message = %m.id, error = %e, "doorbell is not JSON; consumed (the reconcile re-reads the cluster)");
        }
    }
    let (report, response) = match reconciler.provision_by(deadline).await {
        Ok(report) if report.unfinished => (report, sqs::all_failed(event)),
        Ok(report) => (report, sqs::response(&[])),
        Err(e) => (could_not_run(e), sqs::all_failed(event)),
    };
    let metrics = finish(function, &reconciler.settings.cluster, &report, started);
    Handled { response, report, metrics }
}

/// The interruption function: EventBridge events and `{"resume": …}` messages, each standing
/// alone — a malformed one fails by itself (and reaches the DLQ after its retries).
pub async fn interruptions<K: Kube, C: Cloud, S: Store, Q: Queue, T: Clock>(
    function: &str,
    reconciler: &Reconciler<K, C, S, Q, T>,
    event: &SqsEvent,
    deadline: Deadline,
) -> Handled<SqsBatchResponse> {
    let started = Instant::now();
    let batch = reconciler.interrupt_by(&sqs::messages(event), deadline).await;
    let metrics = finish(function, &reconciler.settings.cluster, &batch.report, started);
    Handled { response: sqs::response(&batch.failed), report: batch.report, metrics }
}

/// The sweeper (a scheduled event, whatever its payload). An error means the sweep could not
/// read the cluster at all; the next schedule tick tries again.
pub async fn sweep<K: Kube, C: Cloud, S: Store, Q: Queue, T: Clock>(
    function: &str,
    reconciler: &Reconciler<K, C, S, Q, T>,
    deadline: Deadline,
) -> Result<Report, PortError> {
    let started = Instant::now();
    let result = reconciler.sweep_by(deadline).await;
    let report = match &result {
        Ok(report) => report.clone(),
        Err(e) => could_not_run(e.clone()),
    };
    let _ = finish(function, &reconciler.settings.cluster, &report, started);
    result
}

/// A report saying the reconcile did not run, for the logs and the error metric.
fn could_not_run(e: PortError) -> Report {
    Report { errors: vec![format!("the reconcile could not run: {e}")], ..Report::default() }
}

fn finish(function: &str, cluster: &str, report: &Report, started: Instant) -> Vec<serde_json::Value> {
    logging::log_report(report);
    metrics::publish(function, cluster, report, started.elapsed())
}
