//! Counters the world keeps as things happen, for the report.

use std::collections::BTreeMap;
use std::time::Duration;

/// One instance's bill and fate, read off the cloud at the end of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceRecord {
    pub id: String,
    pub instance_type: String,
    pub group: String,
    pub spot: bool,
    /// Ran in a capacity reservation (billed at its nominal price; see [`Self::list_price`]).
    pub reserved: bool,
    /// $/h paid: the effective price (a NodeOverlay's, or a reservation's nominal one).
    pub price: f64,
    /// $/h the catalog asks before NodeOverlays; a reserved instance's on-demand equivalent.
    pub list_price: f64,
    /// Hours billed (launch to shutdown, or to the end of the run).
    pub hours: f64,
    pub reclaimed: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// How long each pod waited from creation to binding, in milliseconds, in binding order.
    pub waits_ms: Vec<u64>,
    pub pods_created: u64,
    pub pods_succeeded: u64,
    /// Pods that went with their node without being evicted first.
    pub pods_lost: u64,
    pub evictions: u64,
    /// Evictions answered 429 because of a PodDisruptionBudget.
    pub evictions_refused: u64,
    pub launches: u64,
    pub capacity_errors: u64,
    pub nodes_registered: u64,
    pub nodes_deleted: u64,
    pub spot_warnings: u64,
    pub spot_reclaimed: u64,
    pub rebalance_recommendations: u64,
    pub eventbridge_sent: u64,
    /// Claims that started being disrupted, by reason (`SpotInterrupted`, `Underutilized`, …).
    pub disruptions: BTreeMap<String, u64>,
    pub jobs_submitted: u64,
    /// How long each finished Job took from submission to its last completion.
    pub jobs_finished: Vec<Duration>,
}

impl Stats {
    pub fn record_wait(&mut self, waited: Duration) {
        self.waits_ms.push(waited.as_millis() as u64);
    }
}
