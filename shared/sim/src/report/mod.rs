//! What a run did, summed up: pending times, nodes, spot share, cost, allocation and disruption,
//! as a terminal table ([`table`]), JSON ([`json`]) or a self-contained HTML page ([`html`]);
//! two runs of one scenario (Dovetail and the Cluster Autoscaler baseline) side by side.
//!
//! Every figure is computed from the run's record in a fixed order, so the same run always prints
//! the same bytes.

mod html;
#[cfg(test)]
mod screenshot;
mod svg;
mod table;
// Whole runs of both policies, checked through their reports.
#[cfg(test)]
mod runs;

pub use html::html;
pub use table::table;

use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::driver::{Run, Sample, CLUSTER_COST_LIMIT};
use crate::world::Stats;

/// Pending time of pods, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Pending {
    /// Pods that were bound, plus those still waiting at the end (counted with the wait so far).
    pub pods: usize,
    pub p50_s: f64,
    pub p99_s: f64,
    pub max_s: f64,
    pub still_pending: usize,
}

/// One NodePool's (or node group's) share of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PoolSummary {
    pub name: String,
    pub launched: usize,
    pub peak_nodes: u32,
    pub node_hours: f64,
    pub spot_share: f64,
    pub cost: f64,
    /// The instance types launched, most node-hours first.
    pub instance_types: Vec<String>,
}

/// A cost limit the run was under, and whether it held: the most the capacity under it cost at
/// any simulated minute.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CostLimitSummary {
    /// A NodePool's name, or [`CLUSTER_COST_LIMIT`].
    pub name: String,
    /// $/h.
    pub limit: f64,
    /// $/h at the dearest minute.
    pub peak: f64,
    pub held: bool,
}

/// What the run's capacity cost against what the catalog asks, and what discounts and capacity
/// reservations made of the difference.
///
/// A reservation is paid for whether nodes run in it or not, so its fee is no cost of the run:
/// a reserved node is billed at Karpenter's nominal price (on-demand / 10,000,000), and what the
/// reservation saved is the on-demand equivalent of the hours served from it, what those hours
/// would have cost bought on demand. The hours it held unused are shown beside them, the part of
/// the fee the run did not put to work.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Savings {
    /// $ at list prices: every node-hour at the catalog's price before NodeOverlays, a reserved
    /// one at the on-demand price of its type and zone.
    pub list_cost: f64,
    /// $ billed (the summary's `cost`); `list_cost - cost = discounts + reservations`.
    pub cost: f64,
    /// $ NodeOverlays took off (a Savings Plan's discount; negative for a surcharge).
    pub discounts: f64,
    /// Node-hours served from capacity reservations.
    pub reserved_hours: f64,
    /// $ those hours would have cost on demand, less their nominal price.
    pub reservations: f64,
    /// Instance-hours the reservations held during the run that no node used.
    pub reserved_unused_hours: f64,
}

impl Savings {
    /// The figures of `run`'s instances; none when nothing was discounted or reserved.
    fn of(run: &Run) -> Option<Savings> {
        let saved = |reserved: bool| {
            total(run.instances.iter().filter(|i| i.reserved == reserved).map(|i| (i.list_price - i.price) * i.hours))
        };
        let reserved_hours = total(run.instances.iter().filter(|i| i.reserved).map(|i| i.hours));
        let out = Savings {
            list_cost: total(run.instances.iter().map(|i| i.list_price * i.hours)),
            cost: total(run.instances.iter().map(|i| i.price * i.hours)),
            discounts: saved(false),
            reserved_hours,
            reservations: saved(true),
            reserved_unused_hours: (run.reservation_hours - reserved_hours).max(0.0),
        };
        (out.discounts != 0.0 || run.reservation_hours > 0.0).then_some(out)
    }
}

/// The headline figures of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    pub policy: String,
    pub scenario: String,
    pub seed: u64,
    pub hours: f64,
    pub pods_created: u64,
    pub pending: Pending,
    pub nodes_launched: usize,
    pub nodes_terminated: usize,
    pub peak_nodes: u32,
    pub average_nodes: f64,
    /// Spot node-hours over all node-hours.
    pub spot_share: f64,
    pub cost: f64,
    pub cost_per_hour: f64,
    pub cpu_allocation: f64,
    pub memory_allocation: f64,
    pub spot_warnings: u64,
    pub spot_reclaimed: u64,
    pub rebalance_recommendations: u64,
    /// Interruption events acted on: drains started for an interruption, state change, health
    /// event or rebalance.
    pub interruptions_handled: u64,
    pub consolidations: u64,
    pub drifts: u64,
    pub expirations: u64,
    /// Nodes taken away for any reason, voluntary or not.
    pub disruptions: u64,
    pub evictions: u64,
    /// Pods that went down with their node without being evicted first.
    pub pods_lost: u64,
    pub jobs_submitted: u64,
    pub jobs_finished: usize,
    pub job_time_avg_s: f64,
    pub capacity_errors: u64,
    pub pools: Vec<PoolSummary>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cost_limits: Vec<CostLimitSummary>,
    /// Against list prices, when a NodeOverlay changed a price paid or the account holds
    /// capacity reservations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub savings: Option<Savings>,
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

fn disruption_count(stats: &Stats, reasons: &[&str]) -> u64 {
    reasons.iter().map(|r| stats.disruptions.get(*r).copied().unwrap_or(0)).sum()
}

/// A sum that is 0.0 when empty (`Iterator::sum` of floats starts at -0.0, which prints as "-0").
fn total(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(0.0, |a, b| a + b)
}

/// Time-weighted average of a sampled value (samples are evenly spaced).
fn average(samples: &[Sample], value: impl Fn(&Sample) -> Option<f64>) -> f64 {
    let values: Vec<f64> = samples.iter().filter_map(value).collect();
    if values.is_empty() {
        0.0
    } else {
        total(values.iter().copied()) / values.len() as f64
    }
}

pub fn summarize(run: &Run) -> Summary {
    let hours = run.duration.as_secs_f64() / 3600.0;
    let mut waits: Vec<u64> = run.stats.waits_ms.iter().chain(run.still_pending_ms.iter()).copied().collect();
    waits.sort_unstable();
    let secs = |ms: u64| ms as f64 / 1000.0;
    let pending = Pending {
        pods: waits.len(),
        p50_s: secs(percentile(&waits, 50.0)),
        p99_s: secs(percentile(&waits, 99.0)),
        max_s: secs(waits.last().copied().unwrap_or(0)),
        still_pending: run.still_pending_ms.len(),
    };
    let node_hours = total(run.instances.iter().map(|i| i.hours));
    let spot_hours = total(run.instances.iter().filter(|i| i.spot).map(|i| i.hours));
    let cost = total(run.instances.iter().map(|i| i.price * i.hours));
    let live_at_end = run.samples.last().map_or(0, |s| (s.nodes_spot + s.nodes_on_demand) as usize);

    let (consolidations, interruptions_handled, disruptions) = match (&run.functions, &run.baseline) {
        (_, Some(b)) => {
            (b.empty_removed + b.drained_removed, 0, b.empty_removed + b.drained_removed + run.stats.spot_reclaimed)
        }
        _ => {
            let all: u64 = run.stats.disruptions.values().sum();
            let handled = disruption_count(
                &run.stats,
                &[
                    "SpotInterrupted",
                    "Rebalance",
                    "InstanceStateChange",
                    "ScheduledChange",
                    "CapacityReservationInterrupted",
                ],
            );
            (disruption_count(&run.stats, &["Empty", "Underutilized"]), handled, all)
        }
    };
    let jobs = &run.stats.jobs_finished;
    Summary {
        policy: run.policy.name().to_string(),
        scenario: run.scenario.clone(),
        seed: run.seed,
        hours,
        pods_created: run.stats.pods_created,
        pending,
        nodes_launched: run.instances.len(),
        nodes_terminated: run.instances.len().saturating_sub(live_at_end),
        peak_nodes: run.samples.iter().map(|s| s.nodes_spot + s.nodes_on_demand).max().unwrap_or(0),
        average_nodes: average(&run.samples, |s| Some(f64::from(s.nodes_spot + s.nodes_on_demand))),
        spot_share: if node_hours > 0.0 { spot_hours / node_hours } else { 0.0 },
        cost,
        cost_per_hour: if hours > 0.0 { cost / hours } else { 0.0 },
        cpu_allocation: average(&run.samples, |s| (s.nodes_spot + s.nodes_on_demand > 0).then_some(s.cpu_allocated)),
        memory_allocation: average(&run.samples, |s| {
            (s.nodes_spot + s.nodes_on_demand > 0).then_some(s.memory_allocated)
        }),
        spot_warnings: run.stats.spot_warnings,
        spot_reclaimed: run.stats.spot_reclaimed,
        rebalance_recommendations: run.stats.rebalance_recommendations,
        interruptions_handled,
        consolidations,
        drifts: disruption_count(&run.stats, &["Drifted"]),
        expirations: disruption_count(&run.stats, &["Expired"]),
        disruptions,
        evictions: run.stats.evictions,
        pods_lost: run.stats.pods_lost,
        jobs_submitted: run.stats.jobs_submitted,
        jobs_finished: jobs.len(),
        job_time_avg_s: if jobs.is_empty() {
            0.0
        } else {
            total(jobs.iter().map(Duration::as_secs_f64)) / jobs.len() as f64
        },
        capacity_errors: run.stats.capacity_errors,
        pools: pools(run),
        cost_limits: cost_limits(run),
        savings: Savings::of(run),
    }
}

fn cost_limits(run: &Run) -> Vec<CostLimitSummary> {
    run.cost_limits
        .iter()
        .map(|(name, &limit)| {
            let cost = |s: &Sample| match name.as_str() {
                CLUSTER_COST_LIMIT => s.cost_per_hour,
                pool => s.group_cost.get(pool).copied().unwrap_or(0.0),
            };
            let peak = run.samples.iter().map(cost).fold(0.0, f64::max);
            // Prices add up in floating point; a cent's millionth is not a breach.
            CostLimitSummary { name: name.clone(), limit, peak, held: peak <= limit + 1e-9 }
        })
        .collect()
}

fn pools(run: &Run) -> Vec<PoolSummary> {
    let mut by: BTreeMap<&str, PoolSummary> = BTreeMap::new();
    let mut types: BTreeMap<&str, BTreeMap<&str, f64>> = BTreeMap::new();
    for i in &run.instances {
        let p = by.entry(&i.group).or_insert_with(|| PoolSummary { name: i.group.clone(), ..PoolSummary::default() });
        p.launched += 1;
        p.node_hours += i.hours;
        p.cost += i.price * i.hours;
        if i.spot {
            p.spot_share += i.hours;
        }
        *types.entry(&i.group).or_default().entry(&i.instance_type).or_default() += i.hours;
    }
    for (name, p) in &mut by {
        p.spot_share = if p.node_hours > 0.0 { p.spot_share / p.node_hours } else { 0.0 };
        p.peak_nodes = run.samples.iter().filter_map(|s| s.groups.get(*name)).copied().max().unwrap_or(0);
        let mut t: Vec<(&str, f64)> = types[name].iter().map(|(k, v)| (*k, *v)).collect();
        t.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        p.instance_types = t.into_iter().map(|(k, _)| k.to_string()).collect();
    }
    by.into_values().collect()
}

/// `-o json`: each run's summary, per-pool table and time series.
pub fn json(runs: &[Run]) -> serde_json::Value {
    let out: Vec<serde_json::Value> = runs
        .iter()
        .map(|r| {
            let s = &r.samples;
            serde_json::json!({
                "summary": summarize(r),
                "series": {
                    "t_s": s.iter().map(|x| x.at_s).collect::<Vec<_>>(),
                    "nodes_spot": s.iter().map(|x| x.nodes_spot).collect::<Vec<_>>(),
                    "nodes_on_demand": s.iter().map(|x| x.nodes_on_demand).collect::<Vec<_>>(),
                    "cost_per_hour": s.iter().map(|x| round(x.cost_per_hour, 4)).collect::<Vec<_>>(),
                    "cost_total": s.iter().map(|x| round(x.cost_total, 4)).collect::<Vec<_>>(),
                    "pending": s.iter().map(|x| x.pending).collect::<Vec<_>>(),
                    "cpu_allocated": s.iter().map(|x| round(x.cpu_allocated, 4)).collect::<Vec<_>>(),
                    "memory_allocated": s.iter().map(|x| round(x.memory_allocated, 4)).collect::<Vec<_>>(),
                },
                "functions": r.functions.as_ref().map(|f| serde_json::json!({
                    "provision": f.provision_invocations,
                    "interrupt": f.interrupt_invocations,
                    "sweep": f.sweep_invocations,
                    "doorbells": f.doorbells,
                    "interruption_messages": f.interruption_messages,
                    "failed_messages": f.failed_messages,
                    "actions": f.actions,
                    "errors": f.errors,
                    "first_errors": f.first_errors.iter().map(|(t, e)| format!("{t} {e}")).collect::<Vec<_>>(),
                })),
                "cluster_autoscaler": r.baseline.as_ref().map(|b| serde_json::json!({
                    "scans": b.scans,
                    "scale_ups": b.scale_ups,
                    "nodes_requested": b.nodes_requested,
                    "empty_removed": b.empty_removed,
                    "drained_removed": b.drained_removed,
                    "drains_blocked": b.drains_blocked,
                    "launch_failures": b.launch_failures,
                })),
                "events": r.events,
            })
        })
        .collect();
    serde_json::json!({
        "scenario": runs.first().map(|r| r.scenario.clone()),
        "runs": out,
    })
}

fn round(v: f64, digits: i32) -> f64 {
    let m = 10f64.powi(digits);
    (v * m).round() / m
}

/// `1m05s`, `42s`, `3h10m`: short, for tables.
pub fn short_duration(secs: f64) -> String {
    let s = secs.round() as u64;
    match s {
        0..=59 if secs < 10.0 && secs.fract() != 0.0 => format!("{secs:.1}s"),
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// `1,234`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_formats() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!((percentile(&v, 50.0), percentile(&v, 99.0), percentile(&v, 100.0)), (50, 99, 100));
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
        assert_eq!(short_duration(42.0), "42s");
        assert_eq!(short_duration(2.5), "2.5s");
        assert_eq!(short_duration(65.0), "1m05s");
        assert_eq!(short_duration(3.0 * 3600.0 + 600.0), "3h10m");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(12), "12");
    }
}
