//! Summarises the latencies the end-to-end tests measured (`tests/integration/e2e`): from "pod
//! marked unschedulable" to the CreateFleet call for its capacity, batching window included, per
//! scenario and over all of them. Run after the tests:
//!
//! ```text
//! cargo test -p dovetail-tests --test integration -- e2e::
//! cargo run -p dovetail-tests --example e2e-latency [DIR]
//! ```
//!
//! DIR defaults to `<target>/tmp/e2e-latency`, where the tests write one JSON array of
//! milliseconds per scenario.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};

fn main() -> Result<()> {
    let dir = match std::env::args_os().nth(1) {
        Some(dir) => PathBuf::from(dir),
        // This binary is <target>/<profile>/examples/e2e-latency; the tests write under
        // <target>/tmp (their CARGO_TARGET_TMPDIR).
        None => std::env::current_exe()?
            .ancestors()
            .nth(3)
            .context("the target directory above this binary")?
            .join("tmp/e2e-latency"),
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {} (run the e2e tests first)", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "json"));
    files.sort();
    if files.is_empty() {
        bail!("no measurements in {}: run the e2e tests first", dir.display());
    }
    let mut all = vec![];
    println!("{:<24} {:>6} {:>9} {:>9} {:>9}", "scenario", "pods", "p50", "p99", "max");
    for file in &files {
        let mut samples: Vec<f64> = serde_json::from_slice(&std::fs::read(file)?)
            .with_context(|| format!("{} is not a JSON array of milliseconds", file.display()))?;
        let name = file.file_stem().unwrap_or_default().to_string_lossy().into_owned();
        print_row(&name, &mut samples);
        all.extend(samples);
    }
    print_row("all scenarios", &mut all);
    Ok(())
}

fn print_row(name: &str, samples: &mut [f64]) {
    samples.sort_by(f64::total_cmp);
    let pick = |q: f64| {
        let rank = ((samples.len() as f64 * q).ceil() as usize).saturating_sub(1);
        samples.get(rank).map(|ms| format!("{:.2} s", ms / 1000.0)).unwrap_or_else(|| "-".into())
    };
    println!("{:<24} {:>6} {:>9} {:>9} {:>9}", name, samples.len(), pick(0.5), pick(0.99), pick(1.0));
}
