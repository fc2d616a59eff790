//! `dovetail bench`'s distance to the exact optimum, on the built binary: given where the model
//! and the solver reach, and why not elsewhere.

mod common;

use common::{dovetail, text};

/// `dovetail bench <args> -o json`'s rows, one sample each and no timing budget.
fn rows(args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["bench", "--samples", "1", "--seconds", "0", "-o", "json"];
    all.extend(args);
    let out = dovetail(&all, None);
    assert_eq!(out.status.code(), Some(0), "dovetail {}: {}", all.join(" "), text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    report["rows"].as_array().expect("rows").clone()
}

#[test]
fn bench_reports_the_distance_to_the_exact_optimum_where_the_solver_reaches() {
    let rows = rows(&["--suite", "real-catalog", "--sizes", "1,1000", "--optimum-seconds", "60"]);
    let (one, thousand) = (&rows[0], &rows[1]);
    // One pod: the cheapest type that holds it, which the plan buys too.
    let best = one["optimum_per_hour"].as_f64().unwrap_or_else(|| panic!("no optimum: {one}"));
    let cost = one["cost_per_hour"].as_f64().expect("cost");
    assert!(best > 0.0 && best <= cost + 1e-9, "{one}");
    assert!((one["cost_to_optimum"].as_f64().expect("distance") - cost / best).abs() < 1e-9, "{one}");
    assert!(one["optimum_missing"].is_null(), "{one}");
    // A thousand pods over the real catalog: far past what the solver takes on, and said so.
    assert!(thousand["cost_to_optimum"].is_null(), "{thousand}");
    let why = thousand["optimum_missing"].as_str().expect("why not");
    assert!(why.contains("too large for the solver"), "{why}");
}

#[test]
fn bench_says_why_a_row_has_no_distance_to_the_optimum() {
    // Ten pods of the Karpenter mix spread and (anti-)affine: outside what the model describes.
    let mix = rows(&["--suite", "karpenter-mix", "--sizes", "10"]);
    let why = mix[0]["optimum_missing"].as_str().expect("why not");
    assert!(why.contains("out of the exact model's scope") && why.contains("pod default/pod-"), "{why}");
    let untried = rows(&["--suite", "karpenter-mix", "--sizes", "1", "--optimum-seconds", "0"]);
    assert_eq!(untried[0]["optimum_missing"], "not tried (--optimum-seconds 0)");
    let table = text(
        &dovetail(&["bench", "--suite", "karpenter-mix", "--sizes", "1", "--samples", "1", "--seconds", "0"], None)
            .stdout,
    );
    assert!(table.contains("optimum $") && table.contains("1.000x"), "{table}");
}
