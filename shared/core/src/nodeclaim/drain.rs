//! Drain progress persisted on a claim ([`super::NodeClaim::drain`]): which evictions were tried,
//! what the Eviction API answered, and when to try again. The termination machine reads and
//! advances it; it lives with the claim because it is part of the record a crash resumes from.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

use crate::time::Time;

/// First retry after a refused (HTTP 429) eviction; doubled per attempt up to [`MAX_BACKOFF`].
pub const MIN_BACKOFF: Duration = Duration::from_millis(100);

pub const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// What the Eviction API answered, as the adapter reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EvictionResult {
    /// 200/201: the pod is terminating; do not evict it again.
    Accepted,
    /// 429: a PodDisruptionBudget blocks; retry after the backoff.
    Refused,
    /// 404: the pod is already gone.
    NotFound,
    /// Any other error: retried like a refusal.
    Failed,
}

/// Eviction bookkeeping for one pod (`namespace/name`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodEviction {
    /// Evictions emitted so far.
    pub attempts: u32,
    /// Times the eviction was held back because a covering PDB had no disruption left: a 429
    /// predicted without asking. Counts toward the backoff like a refusal, so a long-blocked pod
    /// is looked at every 10 s, not ten times a second.
    #[serde(default)]
    pub pdb_waits: u32,
    pub last_attempt: Option<Time>,
    /// Not evicted again before this instant. Set at emission as though the eviction were
    /// refused: an eviction whose answer never got recorded (a crash) is then simply retried.
    pub next_retry: Option<Time>,
    /// The Eviction API accepted it; the pod is terminating and is not evicted again.
    pub accepted_at: Option<Time>,
    /// Deleted outright at the grace deadline.
    pub deleted_at: Option<Time>,
}

/// Drain progress persisted on the claim (`NodeClaim::drain`). Plain data: see the module notes
/// for which facts live here and which are re-read from the cluster each step.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainState {
    pub started_at: Time,
    /// `started_at + terminationGracePeriod`: from here on nothing blocks termination, and each
    /// pod still present is deleted at `deadline − its terminationGracePeriodSeconds`.
    pub deadline: Option<Time>,
    /// When the disrupted taint was first seen on the Node (evictions start only after that).
    pub tainted_at: Option<Time>,
    /// Per pod, by `namespace/name`.
    pub pods: BTreeMap<String, PodEviction>,
    /// When TerminateInstance was last emitted.
    pub terminate_requested_at: Option<Time>,
    /// Pods whose protections the drain overrode because the instance goes away regardless
    /// ([`crate::nodeclaim::Reason::loses_instance`]), by `namespace/name`, each with those
    /// protections (`karpenter.sh/do-not-disrupt=true`: evicted rather than held;
    /// `PodDisruptionBudget shop/db`: deleted while it held the eviction). Kept after the pod is
    /// gone: the Event that ends the drain lists them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub overridden: BTreeMap<String, Vec<String>>,
    /// What has held the drain for longer than the termination machine's `STUCK_DRAIN` ("pod
    /// shop/db-0 (PodDisruptionBudget shop/db)"), for the claim's Disrupting condition; `None`
    /// while the drain is moving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_on: Option<String>,
}

impl DrainState {
    pub fn new(started_at: Time, grace: Option<Duration>) -> DrainState {
        DrainState { started_at, deadline: grace.map(|g| started_at.plus(g)), ..DrainState::default() }
    }

    /// Records what the Eviction API answered for `pod` (`namespace/name`) at `now`. The adapter
    /// calls this after carrying out a step's Evict actions and before persisting the claim; a
    /// result it never records is treated as a refusal (retried after the backoff).
    pub fn record(&mut self, pod: &str, result: EvictionResult, now: Time) {
        let entry = self.pods.entry(pod.to_string()).or_default();
        match result {
            EvictionResult::Accepted | EvictionResult::NotFound => entry.accepted_at = Some(now),
            EvictionResult::Refused | EvictionResult::Failed => {
                entry.accepted_at = None;
                entry.next_retry = Some(now.plus(backoff((entry.attempts + entry.pdb_waits).max(1))));
            }
        }
    }
}

/// Wait before the retry that follows `attempts` evictions: 100 ms, 200 ms, 400 ms, … 10 s.
pub fn backoff(attempts: u32) -> Duration {
    let exp = attempts.saturating_sub(1).min(16);
    (MIN_BACKOFF * (1u32 << exp)).min(MAX_BACKOFF)
}
