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

/// How each invocation's figures grow from the smallest run of `runs` to the largest: the same
/// script at two sizes, row for row (a row is matched by its place, function and start). For a
/// warm invocation the goal is near flat.
pub fn growth(runs: &[Run]) -> String {
    let mut out = String::new();
    let (Some(small), Some(large)) =
        (runs.iter().min_by_key(|r| r.size.nodes), runs.iter().max_by_key(|r| r.size.nodes))
    else {
        return out;
    };
    let _ = writeln!(
        out,
        "From {} to {} ({}× the nodes): small → large (×growth)",
        small.size,
        large.size,
        large.size.nodes / small.size.nodes.max(1)
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| function | start | after (large) | → first action: own ms | of it kube ms | kube requests | kube MB read | \
         DynamoDB items | EC2 calls | heap peak MiB | heap held MiB |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
    let pairs = small.rows.iter().zip(&large.rows).filter(|(a, b)| a.function == b.function && a.start == b.start);
    for (a, b) in pairs {
        let first = |r: &super::Row| *r.first_create_fleet.as_ref().or(r.first_eviction.as_ref()).unwrap_or(&r.total);
        let (fa, fb) = (first(a), first(b));
        let ec2 = |r: &super::Row| r.ec2_calls.values().sum::<u64>() as f64;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            b.function,
            b.start,
            b.after,
            grew(fa.own_ms(), fb.own_ms(), 0),
            grew(fa.kube_ms, fb.kube_ms, 0),
            grew(a.kube_requests as f64, b.kube_requests as f64, 0),
            grew(a.kube_bytes_read as f64 / 1e6, b.kube_bytes_read as f64 / 1e6, 2),
            grew(a.dynamodb_items_read as f64, b.dynamodb_items_read as f64, 0),
            grew(ec2(a), ec2(b), 0),
            grew(a.heap_peak_mib.unwrap_or(0.0), b.heap_peak_mib.unwrap_or(0.0), 0),
            grew(a.heap_held_mib.unwrap_or(0.0), b.heap_held_mib.unwrap_or(0.0), 0),
        );
    }
    out
}

/// `a → b (×r)`, with `decimals`; the factor is left out where `a` is zero.
fn grew(a: f64, b: f64, decimals: usize) -> String {
    if a > 0.0 {
        format!("{a:.decimals$} → {b:.decimals$} (×{:.1})", b / a)
    } else {
        format!("{a:.decimals$} → {b:.decimals$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saved(json: &str) -> Run {
        let mut v: serde_json::Value = serde_json::from_str(json).expect("the rig's --json");
        serde_json::from_value(v["runs"][0].take()).expect("a run")
    }

    #[test]
    fn growth_pairs_the_same_invocations_of_two_sizes() {
        let small = saved(include_str!("../../bench/results/scale-500-10000-release.json"));
        let large = saved(include_str!("../../bench/results/scale-2000-40000-release.json"));
        // In either order: the smaller size is the start.
        let table = growth(&[large.clone(), small.clone()]);
        assert!(table.starts_with("From 500 nodes"), "{table}");
        let row = |function: &str, start: &str| {
            let i = small.rows.iter().position(|r| r.function == function && r.start == start).expect("a row");
            (&small.rows[i], &large.rows[i])
        };
        let (a, b) = row("provisioner", "warm");
        let requests = format!(
            "| {} → {} (×{:.1}) |",
            a.kube_requests,
            b.kube_requests,
            b.kube_requests as f64 / a.kube_requests as f64
        );
        let line = table.lines().find(|l| l.starts_with("| provisioner | warm |")).expect("the warm provisioner");
        assert!(line.contains(&requests), "{line} has {requests}");
        // Every row of the script is there once, header and separator aside.
        assert_eq!(
            table.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| function")).count(),
            small.rows.len()
        );
    }
}
