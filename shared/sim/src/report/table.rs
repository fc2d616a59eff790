//! The terminal summary: one column per run, then each run's NodePools (or node groups).

use std::fmt::Write;

use super::{short_duration, summarize, thousands, Run, Summary};

fn pct(v: f64) -> String {
    // `+ 0.0` turns a negative zero into zero.
    format!("{:.0}%", (v * 100.0).round() + 0.0)
}

fn money(v: f64) -> String {
    if v >= 1000.0 {
        format!("${}", thousands(v.round() as u64))
    } else {
        format!("${v:.2}")
    }
}

/// The rows every summary has: (label, value per summary).
pub(super) fn rows(sums: &[Summary]) -> Vec<(&'static str, Vec<String>)> {
    let col = |f: &dyn Fn(&Summary) -> String| sums.iter().map(f).collect::<Vec<_>>();
    vec![
        ("Pods created", col(&|s| thousands(s.pods_created))),
        (
            "Pending p50 / p99 / max",
            col(&|s| {
                format!(
                    "{} / {} / {}",
                    short_duration(s.pending.p50_s),
                    short_duration(s.pending.p99_s),
                    short_duration(s.pending.max_s)
                )
            }),
        ),
        ("Still pending at the end", col(&|s| thousands(s.pending.still_pending as u64))),
        ("Nodes launched / terminated", col(&|s| format!("{} / {}", s.nodes_launched, s.nodes_terminated))),
        ("Nodes peak / average", col(&|s| format!("{} / {:.1}", s.peak_nodes, s.average_nodes))),
        ("Spot share (node-hours)", col(&|s| pct(s.spot_share))),
        ("Cost", col(&|s| format!("{} ({}/h)", money(s.cost), money(s.cost_per_hour)))),
        ("CPU / memory allocated", col(&|s| format!("{} / {}", pct(s.cpu_allocation), pct(s.memory_allocation)))),
        ("Spot warnings / reclaimed", col(&|s| format!("{} / {}", s.spot_warnings, s.spot_reclaimed))),
        ("Rebalance recommendations", col(&|s| s.rebalance_recommendations.to_string())),
        ("Interruptions handled", col(&|s| s.interruptions_handled.to_string())),
        ("Consolidations", col(&|s| s.consolidations.to_string())),
        ("Drifts / expirations", col(&|s| format!("{} / {}", s.drifts, s.expirations))),
        ("Disruptions (nodes)", col(&|s| s.disruptions.to_string())),
        ("Evictions / pods lost", col(&|s| format!("{} / {}", thousands(s.evictions), thousands(s.pods_lost)))),
        (
            "Jobs finished (avg time)",
            col(&|s| {
                if s.jobs_submitted == 0 {
                    "-".to_string()
                } else {
                    format!("{}/{} ({})", s.jobs_finished, s.jobs_submitted, short_duration(s.job_time_avg_s))
                }
            }),
        ),
        ("Capacity errors", col(&|s| s.capacity_errors.to_string())),
    ]
}

/// The verdict line for a comparison: Dovetail's cost and p99 against the baseline's.
pub(super) fn verdict(sums: &[Summary]) -> Option<String> {
    let [d, b] = sums else { return None };
    let change = if b.cost > 0.0 { (d.cost - b.cost) / b.cost * 100.0 } else { 0.0 };
    let word = if change <= 0.0 { "less" } else { "more" };
    Some(format!(
        "{} vs {}: {:.0}% {word} cost ({} vs {}), pending p99 {} vs {}",
        d.policy,
        b.policy,
        change.abs(),
        money(d.cost),
        money(b.cost),
        short_duration(d.pending.p99_s),
        short_duration(b.pending.p99_s)
    ))
}

/// The summary of one run, or of several side by side.
pub fn table(runs: &[Run]) -> String {
    let sums: Vec<Summary> = runs.iter().map(summarize).collect();
    let mut out = String::new();
    let Some(first) = runs.first() else { return out };
    let _ = writeln!(
        out,
        "Scenario {}: {} simulated, seed {}",
        first.scenario,
        short_duration(first.duration.as_secs_f64()),
        first.seed
    );
    if let Some(line) = first.description.lines().next() {
        let _ = writeln!(out, "{line}…");
    }
    out.push('\n');
    let rows = rows(&sums);
    let label_w = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0) + 2;
    let widths: Vec<usize> = (0..sums.len())
        .map(|i| rows.iter().map(|(_, v)| v[i].chars().count()).chain([sums[i].policy.len()]).max().unwrap_or(0) + 3)
        .collect();
    let _ = write!(out, "{:label_w$}", "");
    for (s, w) in sums.iter().zip(&widths) {
        let _ = write!(out, "{:<w$}", s.policy, w = *w);
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    for (label, values) in &rows {
        let _ = write!(out, "{label:label_w$}");
        for (v, w) in values.iter().zip(&widths) {
            let _ = write!(out, "{v:<w$}", w = *w);
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    }
    if let Some(v) = verdict(&sums) {
        let _ = writeln!(out, "\n{v}");
    }
    for s in sums.iter().filter(|s| !s.cost_limits.is_empty()) {
        let _ = writeln!(out, "\n{} — cost limits (the dearest simulated minute)", s.policy);
        for l in &s.cost_limits {
            let scope = if l.name == crate::driver::CLUSTER_COST_LIMIT {
                l.name.clone()
            } else {
                format!("NodePool {}", l.name)
            };
            let verdict = if l.held { "held" } else { "BROKEN" };
            let _ = writeln!(out, "  {scope}: peak ${:.4}/h of ${:.4}/h: {verdict}", l.peak, l.limit);
        }
    }
    for s in &sums {
        let Some(v) = &s.savings else { continue };
        let _ = writeln!(out, "\n{} — against list prices", s.policy);
        let _ = writeln!(out, "  at list prices {}, billed {}", money(v.list_cost), money(v.cost));
        let _ = writeln!(out, "  NodeOverlay discounts saved {}", money(v.discounts));
        let _ = writeln!(
            out,
            "  reservations served {:.1} node-hours, worth {} on demand ({:.1} reserved hours unused; their fee is paid either way)",
            v.reserved_hours,
            money(v.reservations),
            v.reserved_unused_hours
        );
    }
    for s in &sums {
        let _ = writeln!(out, "\n{} — {}", s.policy, if s.policy == "dovetail" { "NodePools" } else { "node groups" });
        let header = ["name", "launched", "peak", "node-hours", "spot", "cost", "instance types"];
        let mut lines: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
        for p in &s.pools {
            let mut types = p.instance_types.iter().take(4).cloned().collect::<Vec<_>>().join(", ");
            if p.instance_types.len() > 4 {
                let _ = write!(types, " +{}", p.instance_types.len() - 4);
            }
            lines.push(vec![
                p.name.clone(),
                p.launched.to_string(),
                p.peak_nodes.to_string(),
                format!("{:.1}", p.node_hours),
                pct(p.spot_share),
                money(p.cost),
                types,
            ]);
        }
        let widths: Vec<usize> =
            (0..header.len()).map(|i| lines.iter().map(|l| l[i].chars().count()).max().unwrap_or(0) + 2).collect();
        for l in lines {
            out.push_str("  ");
            for (v, w) in l.iter().zip(&widths) {
                let _ = write!(out, "{v:<w$}", w = *w);
            }
            out.truncate(out.trim_end().len());
            out.push('\n');
        }
    }
    out
}
