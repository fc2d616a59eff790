//! The HTML report: one self-contained page (inline CSS and SVG, no scripts, nothing fetched)
//! with the summary, the charts over time and the per-NodePool tables.

use std::fmt::Write;

use super::svg::{lines, stacked, Series};
use super::table::{rows, verdict};
use super::{short_duration, summarize, thousands, Run, Summary};

const STYLE: &str = r#"
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:#111827;background:#f9fafb;margin:0;line-height:1.45}
main{max-width:1180px;margin:0 auto;padding:28px 32px 48px}
h1{font-size:26px;margin:0 0 6px}
h2{font-size:19px;margin:32px 0 10px;border-bottom:1px solid #e5e7eb;padding-bottom:4px}
h3{font-size:16px;margin:18px 0 6px}
p.meta{color:#4b5563;margin:0 0 14px}
p.desc{max-width:900px}
.verdict{background:#ecfdf5;border:1px solid #a7f3d0;border-radius:8px;padding:12px 16px;font-size:17px;font-weight:600}
table{border-collapse:collapse;background:#fff;font-size:14.5px}
th,td{padding:6px 14px;text-align:left;border-bottom:1px solid #e5e7eb}
th{background:#f3f4f6;font-weight:600}
td.num{font-variant-numeric:tabular-nums}
.grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:18px}
figure{margin:0;background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:8px 10px}
figcaption{font-size:13px;color:#4b5563;padding:2px 4px 0}
svg.chart{width:100%;height:auto;display:block}
svg .ct{font-size:14px;font-weight:600;fill:#111827}
svg .yt{font-size:11px;fill:#4b5563;text-anchor:end}
svg .xt{font-size:11px;fill:#4b5563;text-anchor:middle}
svg .lg{font-size:12px;fill:#111827}
ul.notes{color:#4b5563;font-size:13.5px;max-width:900px}
"#;

/// Colours per policy (lines) and per capacity type (areas).
fn policy_color(policy: &str) -> &'static str {
    if policy == "dovetail" {
        "#2563eb"
    } else {
        "#ea580c"
    }
}
const SPOT: &str = "#16a34a";
const ON_DEMAND: &str = "#64748b";

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn hours(run: &Run, f: impl Fn(&super::Sample) -> f64) -> Vec<(f64, f64)> {
    run.samples.iter().map(|s| (s.at_s as f64 / 3600.0, f(s))).collect()
}

fn figure(out: &mut String, svg: &str, caption: &str) {
    let _ = write!(out, "<figure>{svg}<figcaption>{}</figcaption></figure>", esc(caption));
}

pub fn html(runs: &[Run]) -> String {
    let sums: Vec<Summary> = runs.iter().map(summarize).collect();
    let Some(first) = runs.first() else { return String::new() };
    let x_max = first.duration.as_secs_f64() / 3600.0;
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
         content=\"width=device-width,initial-scale=1\"><title>Dovetail simulation: {}</title><style>{STYLE}</style></head><body><main>",
        esc(&first.scenario)
    );
    let _ = write!(out, "<h1>Dovetail simulation: {}</h1>", esc(&first.scenario));
    let policies: Vec<&str> = sums.iter().map(|s| s.policy.as_str()).collect();
    let _ = write!(
        out,
        "<p class=\"meta\">{} simulated from {} · seed {} · {}</p>",
        short_duration(first.duration.as_secs_f64()),
        first.start,
        first.seed,
        esc(&policies.join(" vs "))
    );
    if !first.description.is_empty() {
        let _ = write!(out, "<p class=\"desc\">{}</p>", esc(&first.description.replace('\n', " ")));
    }
    if let Some(v) = verdict(&sums) {
        let _ = write!(out, "<p class=\"verdict\">{}</p>", esc(&v));
    }

    out.push_str("<h2>Summary</h2><table><tr><th></th>");
    for s in &sums {
        let _ = write!(out, "<th>{}</th>", esc(&s.policy));
    }
    out.push_str("</tr>");
    for (label, values) in rows(&sums) {
        let _ = write!(out, "<tr><th>{}</th>", esc(label));
        for v in values {
            let _ = write!(out, "<td class=\"num\">{}</td>", esc(&v));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");

    out.push_str("<h2>Over time</h2><div class=\"grid\">");
    // Nodes: one stacked chart per policy, on one scale.
    let node_max = runs
        .iter()
        .flat_map(|r| r.samples.iter().map(|s| f64::from(s.nodes_spot + s.nodes_on_demand)))
        .fold(0.0, f64::max);
    for (run, sum) in runs.iter().zip(&sums) {
        let layers = [
            Series { name: "spot", color: SPOT, dashed: false, points: hours(run, |s| f64::from(s.nodes_spot)) },
            Series {
                name: "on-demand",
                color: ON_DEMAND,
                dashed: false,
                points: hours(run, |s| f64::from(s.nodes_on_demand)),
            },
        ];
        let svg =
            stacked(&format!("Nodes by capacity type — {}", sum.policy), &layers, x_max, Some(node_max), &|v| {
                format!("{v:.0}")
            });
        figure(
            &mut out,
            &svg,
            &format!(
                "Instances running, spot below, on-demand on top. Spot share {:.0}% of node-hours.",
                sum.spot_share * 100.0
            ),
        );
    }
    let by_policy = |f: &dyn Fn(&super::Sample) -> f64| -> Vec<Series<'_>> {
        runs.iter()
            .zip(&sums)
            .map(|(r, s)| Series {
                name: policy_name(&s.policy),
                color: policy_color(&s.policy),
                dashed: false,
                points: hours(r, f),
            })
            .collect()
    };
    let money = |v: f64| if v >= 100.0 { format!("${v:.0}") } else { format!("${v:.2}") };
    let costs: Vec<String> = sums.iter().map(|s| format!("{} ${:.2}", s.policy, s.cost)).collect();
    figure(
        &mut out,
        &lines("Spend so far ($)", &by_policy(&|s| s.cost_total), x_max, None, &money),
        &format!("Cumulative cost of every instance, billed per second: {}.", costs.join(", ")),
    );
    figure(
        &mut out,
        &lines("Fleet cost rate ($/h)", &by_policy(&|s| s.cost_per_hour), x_max, None, &money),
        "What the instances running at each minute cost per hour.",
    );
    let p99: Vec<String> =
        sums.iter().map(|s| format!("{} p99 {}", s.policy, short_duration(s.pending.p99_s))).collect();
    figure(
        &mut out,
        &lines("Pending pods", &by_policy(&|s| f64::from(s.pending)), x_max, None, &|v| format!("{v:.0}")),
        &format!("Pods not yet bound to a node, each minute: {}.", p99.join(", ")),
    );
    let mut alloc = Vec::new();
    for (r, s) in runs.iter().zip(&sums) {
        let color = policy_color(&s.policy);
        alloc.push(Series {
            name: if s.policy == "dovetail" { "dovetail cpu" } else { "CA cpu" },
            color,
            dashed: false,
            points: hours(r, |x| x.cpu_allocated * 100.0),
        });
        alloc.push(Series {
            name: if s.policy == "dovetail" { "dovetail memory" } else { "CA memory" },
            color,
            dashed: true,
            points: hours(r, |x| x.memory_allocated * 100.0),
        });
    }
    let utilization: Vec<String> = sums
        .iter()
        .map(|s| {
            format!("{} cpu {:.0}% / memory {:.0}%", s.policy, s.cpu_allocation * 100.0, s.memory_allocation * 100.0)
        })
        .collect();
    figure(
        &mut out,
        &lines("Allocation (% of allocatable requested)", &alloc, x_max, Some(100.0), &|v| format!("{v:.0}%")),
        &format!(
            "Requests over allocatable on Ready nodes (solid cpu, dashed memory); averages {}.",
            utilization.join("; ")
        ),
    );
    out.push_str("</div>");

    for s in &sums {
        let _ = write!(
            out,
            "<h2>{} — {}</h2><table><tr><th>name</th><th>launched</th><th>peak nodes</th><th>node-hours</th>\
             <th>spot</th><th>cost</th><th>instance types (most used first)</th></tr>",
            esc(&s.policy),
            if s.policy == "dovetail" { "NodePools" } else { "node groups" }
        );
        for p in &s.pools {
            let _ = write!(
                out,
                "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.1}</td>\
                 <td class=\"num\">{:.0}%</td><td class=\"num\">${:.2}</td><td>{}</td></tr>",
                esc(&p.name),
                p.launched,
                p.peak_nodes,
                p.node_hours,
                p.spot_share * 100.0,
                p.cost,
                esc(&p.instance_types.join(", "))
            );
        }
        out.push_str("</table>");
    }
    for run in runs {
        if let Some(f) = &run.functions {
            let actions: Vec<String> = f.actions.iter().map(|(k, v)| format!("{k} {}", thousands(*v))).collect();
            let _ = write!(
                out,
                "<h3>Dovetail's functions</h3><p>{} provisioner invocations ({} doorbells), {} interruption \
                 invocations ({} messages, {} retried), {} sweeps; {} errors. Actions: {}.</p>",
                thousands(f.provision_invocations),
                thousands(f.doorbells),
                thousands(f.interrupt_invocations),
                thousands(f.interruption_messages),
                thousands(f.failed_messages),
                thousands(f.sweep_invocations),
                thousands(f.errors),
                esc(&actions.join(", "))
            );
        }
        if let Some(b) = &run.baseline {
            let _ = write!(
                out,
                "<h3>Cluster Autoscaler</h3><p>{} scans, {} scale-ups ({} nodes), {} empty and {} drained nodes \
                 removed, {} drains blocked by a PodDisruptionBudget, {} launches with no capacity in any zone.</p>",
                thousands(b.scans),
                thousands(b.scale_ups),
                thousands(b.nodes_requested),
                thousands(b.empty_removed),
                thousands(b.drained_removed),
                thousands(b.drains_blocked),
                thousands(b.launch_failures)
            );
        }
    }
    out.push_str(
        "<h2>How to read this</h2><ul class=\"notes\">\
         <li>Pending time: from a pod's creation to its binding; pods still waiting at the end count with the wait so far.</li>\
         <li>Cost: every instance's on-demand list price or Spot Advisor average spot price (us-east-1), per second from launch to shutdown.</li>\
         <li>Spot instances are interrupted at their Spot Advisor band's rate (times the scenario's multiplier), with the two-minute warning first.</li>\
         <li>The Cluster Autoscaler baseline has no interruption handling: a reclaimed node's pods are lost and come back pending.</li>\
         </ul></main></body></html>\n",
    );
    out
}

fn policy_name(policy: &str) -> &'static str {
    if policy == "dovetail" {
        "dovetail"
    } else {
        "cluster-autoscaler"
    }
}
