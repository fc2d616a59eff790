//! The scale rig (issue 16): the three functions' own handlers, in-process, against a real
//! kube-apiserver (with etcd; no scheduler) loaded with Nodes and bound pods of Karpenter's
//! benchmark mix, and moto loaded with their instances and NodeClaims; driven through a stream of
//! pending bursts (1, 100, 1,000 pods), deletions, spot interruptions, drifts and sweeps. Per
//! invocation, cold and warm: wall time to the first CreateFleet and in all, Kubernetes requests
//! and bytes read, DynamoDB items and read units, EC2 calls by API, peak RSS and each function's
//! heap. A benchmark, not a test (`tests/integration/scale.rs` asserts on a short form's counts).
//!
//! ```sh
//! cargo run -p dovetail-tests --release --example scale -- --nodes 5000 --pods 100000
//! cargo run -p dovetail-tests --release --example scale -- --issue --json scale.json --markdown scale.md
//! cargo run -p dovetail-tests --release --example scale -- --costs scale.json,scale-small.json
//! cargo run -p dovetail-tests --release --example scale -- --growth scale-500.json,scale-5000.json
//! ```
//!
//! Options: `--nodes N --pods M` one size (default 200 / 4,000, the CI form); `--issue` the issue's
//! three sizes (500 / 10k, 2k / 40k, 5k / 100k) instead; `--short` leaves the 1,000-pod burst out;
//! `--json FILE` and `--markdown FILE` write the results (the table is printed too); `--costs
//! FILE,FILE…` runs nothing and prints docs/costs.md's tables from results written before
//! (`dovetail_tests::scale::costs`: one run per size, short or full); `--growth FILE,FILE` prints
//! how each invocation's figures grow from the smallest size given to the largest. Progress goes
//! to stderr (`RUST_LOG` filters it); the functions' CloudWatch metric lines go to stdout, as in
//! Lambda, before the table.
//!
//! Needs what the end-to-end tests need: the control plane built by `tests/controlplane/build.sh`
//! and moto in `$HOME/.cache/dovetail/venv` (`tests/run-all.sh` installs both). Counts and bytes do
//! not depend on the machine; times do (moto answers in about a millisecond, a region in a few).

use anyhow::{Context, Result};
use dovetail_tests::scale::{self, Run, Script, Size};

/// Counts the heap, so each function's memory can be told apart from the others' in one process.
#[global_allocator]
static HEAP: scale::memory::Counting = scale::memory::Counting;

/// What `--json` writes.
#[derive(serde::Deserialize)]
struct Results {
    runs: Vec<Run>,
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

fn number(name: &str, default: usize) -> Result<usize> {
    arg(name).map_or(Ok(default), |v| v.replace('_', "").parse().with_context(|| format!("{name} {v}")))
}

/// The runs in results written before by `--json`, in the order given.
fn saved(files: &str) -> Result<Vec<Run>> {
    let mut runs: Vec<Run> = Vec::new();
    for path in files.split(',') {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
        let results: Results = serde_json::from_str(&text).with_context(|| format!("{path}: not the rig's --json"))?;
        runs.extend(results.runs);
    }
    Ok(runs)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("dovetail_tests=info,warn")),
        )
        .init();
    if let Some(files) = arg("--costs") {
        println!("{}", scale::costs::markdown(&saved(&files)?)?);
        return Ok(());
    }
    if let Some(files) = arg("--growth") {
        println!("{}", scale::report::growth(&saved(&files)?));
        return Ok(());
    }
    let sizes = if flag("--issue") {
        Size::ISSUE.to_vec()
    } else {
        vec![Size { nodes: number("--nodes", Size::CI.nodes)?, pods: number("--pods", Size::CI.pods)? }]
    };
    let mut runs = Vec::new();
    for size in sizes {
        let script = if flag("--short") { Script::short(size) } else { Script::full(size) };
        eprintln!("scale rig: {size}, {} steps", script.steps.len());
        runs.push(scale::run(size, &script).await?);
        // Written after every size: a later size that fails keeps the earlier ones.
        if let Some(path) = arg("--json") {
            std::fs::write(&path, serde_json::to_vec_pretty(&serde_json::json!({ "runs": runs }))?)
                .with_context(|| format!("writing {path}"))?;
        }
    }
    let table = scale::report::markdown(&runs);
    if let Some(path) = arg("--markdown") {
        std::fs::write(&path, &table).with_context(|| format!("writing {path}"))?;
    }
    println!("\n{table}");
    Ok(())
}
