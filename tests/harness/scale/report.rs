//! The rows as a Markdown table, one line per invocation, and each size's load. Times are the
//! function's own ([`super::Row::own_ms`]: the wall time less the AWS time), with the part spent
//! waiting on the API server; moto's time, which says nothing of EC2's, stands apart.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{Run, Until};

fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_string(), |v| format!("{v:.0}"))
}

/// `own (kube)`, or `–` for a moment the invocation never reached.
fn own(until: Option<&Until>) -> String {
    until.map_or_else(|| "–".to_string(), |u| format!("{:.0} ({:.0})", u.own_ms(), u.kube_ms))
}

fn mb(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / 1e6)
}

/// `Name n, Other m`, largest first.
fn calls(counts: &BTreeMap<String, u64>) -> String {
    let mut sorted: Vec<(&String, &u64)> = counts.iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let text: Vec<String> = sorted.iter().map(|(k, v)| format!("{k} {v}")).collect();
    if text.is_empty() {
        "–".into()
    } else {
        text.join(", ")
    }
}

/// Kubernetes requests by verb: `list 21, get 3, patch 1`.
fn verbs(requests: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (key, n) in requests {
        *out.entry(key.split(' ').next().unwrap_or_default().to_string()).or_default() += n;
    }
    out
}

/// The loads and the invocations of `runs`.
pub fn markdown(runs: &[Run]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| size | load: AWS s | nodes s | pods s | one full list of pods and nodes |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    for run in runs {
        let l = &run.load;
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.1} | {:.1} | {} requests, {} MB |",
            run.size,
            l.aws_seconds,
            l.nodes_seconds,
            l.pods_seconds,
            l.full_list_requests,
            mb(l.full_list_bytes)
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| size | function | start | after | init ms | → CreateFleet: own ms (kube) | → eviction: own ms (kube) | \
         total: own ms (kube) | AWS ms (moto) | kube requests | kube MB read | DynamoDB items | read units | write units | \
         EC2 calls | other AWS calls | RSS before MiB | peak RSS MiB | function heap: peak (held) MiB | claims added |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for run in runs {
        for r in &run.rows {
            let _ = writeln!(
                out,
                "| {} / {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {} ({}) | {} | {} | {:.1} | {:.0} | {} | {} | {:.0} | {:.0} | {} | {} |",
                r.nodes,
                r.pods,
                r.function,
                r.start,
                r.after,
                ms(r.init_ms),
                own(r.first_create_fleet.as_ref()),
                own(r.first_eviction.as_ref()),
                own(Some(&r.total)),
                r.total.aws_ms,
                r.kube_requests,
                calls(&verbs(&r.kube_by_request)),
                mb(r.kube_bytes_read),
                r.dynamodb_items_read,
                r.dynamodb_read_units,
                r.dynamodb_write_units,
                calls(&r.ec2_calls),
                calls(&r.other_aws_calls),
                r.rss_before_mib,
                r.peak_rss_mib,
                r.heap_peak_mib.zip(r.heap_held_mib).map_or_else(|| "–".into(), |(p, h)| format!("{p:.0} ({h:.0})")),
                r.claims_added,
            );
        }
    }
    out
}
