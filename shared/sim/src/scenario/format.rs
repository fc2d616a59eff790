//! The scenario file as written: plain serde structs, unknown fields refused, every value still a
//! string where it needs parsing (durations, cron schedules) so the loader can name the field of
//! a bad one. `docs/cli.md` ("Scenario format") documents the format from these.

use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct File {
    pub name: Option<String>,
    #[serde(default)]
    pub description: String,
    pub seed: Option<u64>,
    /// How much virtual time to run (`24h`).
    pub duration: Option<String>,
    /// RFC 3339 UTC instant the run starts at.
    pub start: Option<String>,
    #[serde(default)]
    pub world: WorldFile,
    /// Multi-document YAML: NodePools, EC2NodeClasses and workloads.
    #[serde(default)]
    pub manifests: String,
    /// Manifest files or directories, relative to the scenario file.
    #[serde(default)]
    pub manifest_files: Vec<String>,
    #[serde(default)]
    pub timeline: Vec<Entry>,
    pub cluster_autoscaler: Option<ClusterAutoscalerFile>,
    /// The cluster-wide cost limit in dollars per hour, as the functions' `DOVETAIL_COST_LIMIT`.
    pub cost_limit: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorldFile {
    pub boot_time: Option<BootTime>,
    /// Multiplier on every spot type's Spot Advisor interruption rate.
    pub interruption_rate: Option<f64>,
    /// Share of spot interruptions preceded by a rebalance recommendation.
    pub rebalance_share: Option<f64>,
    /// Chance that any CreateFleet call fails for capacity.
    pub capacity_error_rate: Option<f64>,
    /// Chance that SQS delivers a message twice.
    pub duplicate_rate: Option<f64>,
    /// Zone names (ids from the default us-east-1 zones), or `name=zone-id`.
    #[serde(default)]
    pub zones: Vec<String>,
    #[serde(default)]
    pub capacity_errors: Vec<CapacityErrorFile>,
    /// Capacity reservations the account holds.
    #[serde(default)]
    pub reservations: Vec<ReservationFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReservationFile {
    /// `cr-…`, as a class's `capacityReservationSelectorTerms` name it.
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// Instances it holds.
    pub count: u32,
    /// `default` (an On-Demand Capacity Reservation) or `capacity-block`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Offsets from the start: when it becomes active and when it ends (a block's window).
    pub start: Option<String>,
    pub end: Option<String>,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BootTime {
    pub min: String,
    pub max: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CapacityErrorFile {
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub capacity_type: Option<String>,
    /// Offset from the start.
    pub at: String,
    /// How long the offerings stay out of capacity.
    #[serde(rename = "for")]
    pub lasts: String,
}

/// One timeline entry: when (`at`, optionally repeated `every` until `until`, or on a `cron`
/// schedule) and exactly one action.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Entry {
    pub at: Option<String>,
    pub every: Option<String>,
    pub until: Option<String>,
    pub cron: Option<String>,
    pub scale: Option<Scale>,
    pub submit: Option<Submit>,
    /// A new EKS-optimized AMI is published: every class resolves to new images (drift).
    pub release_ami: Option<serde_yaml_ng::Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scale {
    pub deployment: Option<String>,
    pub stateful_set: Option<String>,
    pub replica_set: Option<String>,
    pub replicas: usize,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Submit {
    /// `namespace/name` of a Job in the manifests, used as a template.
    pub job: String,
    /// How long each pod runs once started; defaults to the Job's `sim.dovetail.dev/duration`.
    pub duration: Option<String>,
    /// Pods run between `duration` and this (uniformly).
    pub duration_max: Option<String>,
    pub parallelism: Option<usize>,
    pub completions: Option<usize>,
    /// Jobs submitted at once.
    pub count: Option<usize>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterAutoscalerFile {
    pub scan_interval: Option<String>,
    pub scale_down_utilization_threshold: Option<f64>,
    pub scale_down_unneeded_time: Option<String>,
    pub scale_down_delay_after_add: Option<String>,
    pub max_empty_bulk_delete: Option<usize>,
    #[serde(default)]
    pub node_groups: Vec<NodeGroupFile>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeGroupFile {
    pub name: String,
    pub instance_types: Vec<String>,
    /// `on-demand` (default) or `spot`.
    pub capacity_type: Option<String>,
    #[serde(default)]
    pub zones: Vec<String>,
    #[serde(default)]
    pub min_size: usize,
    pub max_size: usize,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub taints: Vec<TaintFile>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TaintFile {
    pub key: String,
    #[serde(default)]
    pub value: String,
    pub effect: String,
}
