//! The Cluster Autoscaler setup a scenario compares against: node groups (autoscaling groups with
//! fixed instance-type lists) and the autoscaler's main flags.

use std::collections::BTreeMap;
use std::time::Duration;

use dovetail_core::catalog::CapacityType;
use dovetail_core::model::Taint;

/// One autoscaling group.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeGroup {
    pub name: String,
    /// In priority order: the group launches the first type that has capacity.
    pub instance_types: Vec<String>,
    pub capacity_type: CapacityType,
    /// Zones the group spans (launches go round them for balance).
    pub zones: Vec<String>,
    pub min_size: usize,
    pub max_size: usize,
    /// The nodes' `--node-labels` (the instance type's and zone's labels are added).
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
}

/// Cluster Autoscaler's flags that matter here, with its defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `--scan-interval`.
    pub scan_interval: Duration,
    /// `--scale-down-utilization-threshold`: a node below this (the larger of its cpu and memory
    /// requests over allocatable) is a scale-down candidate.
    pub utilization_threshold: f64,
    /// `--scale-down-unneeded-time`.
    pub unneeded_time: Duration,
    /// `--scale-down-delay-after-add`.
    pub delay_after_add: Duration,
    /// `--max-empty-bulk-delete`: empty nodes removed in one go; non-empty ones go one at a time.
    pub max_empty_bulk_delete: usize,
    pub node_groups: Vec<NodeGroup>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            scan_interval: Duration::from_secs(10),
            utilization_threshold: 0.5,
            unneeded_time: Duration::from_secs(600),
            delay_after_add: Duration::from_secs(600),
            max_empty_bulk_delete: 10,
            node_groups: vec![],
        }
    }
}
