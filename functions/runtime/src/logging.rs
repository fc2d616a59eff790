//! JSON logs for CloudWatch: one line per decision, with its sentence and claim, so "why did
//! Dovetail do that?" is a Logs Insights query away.

use dovetail_core::disruption::Action;
use dovetail_core::reconcile::Report;

/// JSON lines on stdout, level from `RUST_LOG` (default `info`), no ANSI colours, no timestamps
/// of our own (Lambda adds them).
pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_ansi(false)
        .without_time()
        .with_current_span(false)
        .with_target(false)
        .try_init();
}

/// Logs every decision (actions at `info`, notes at `debug`) and every error (`warn`).
pub fn log_report(report: &Report) {
    for d in &report.decisions {
        let claim = d.claim.as_deref().unwrap_or("");
        match &d.action {
            Some(a) => tracing::info!(claim, action = action_name(a), why = %d.why, "decision"),
            None => tracing::debug!(claim, why = %d.why, "note"),
        }
    }
    for e in &report.errors {
        tracing::warn!(error = %e, "error");
    }
}

/// The action's kind, a stable field to filter logs on.
pub fn action_name(action: &Action) -> &'static str {
    match action {
        Action::Launch(_) => "Launch",
        Action::WriteClaim(_) => "WriteClaim",
        Action::DeleteClaim { .. } => "DeleteClaim",
        Action::TaintNode { .. } => "TaintNode",
        Action::RemoveTaint { .. } => "RemoveTaint",
        Action::Evict { .. } => "Evict",
        Action::DeletePod { .. } => "DeletePod",
        Action::DeleteNode { .. } => "DeleteNode",
        Action::TerminateInstance { .. } => "TerminateInstance",
        Action::MarkUnavailable { .. } => "MarkUnavailable",
        Action::Event { .. } => "Event",
        Action::RequeueAfter { .. } => "RequeueAfter",
    }
}
