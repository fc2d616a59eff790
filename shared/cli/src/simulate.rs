//! `dovetail simulate [-f SCENARIO.yaml | --scenario NAME]`: the whole event-driven pipeline over
//! virtual time — the same reconcilers the Lambdas run, against an in-memory AWS and cluster —
//! with a cost and latency report, optionally side by side with a Cluster Autoscaler baseline.
//!
//! Exit codes: 0 after a run, 2 when the scenario is bad (the message names the file, the
//! object and the field; nothing is printed on stdout), 1 for anything else.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use dovetail_api::manifest;
use dovetail_core::decision::{Action, Decision};
use dovetail_core::time::Time;
use dovetail_sim::driver::{self, Options, Policy};
use dovetail_sim::report;
use dovetail_sim::scenario::{builtin, Scenario};

use crate::progress::Progress;
use crate::{bad_input, output, Format, OutputArgs};

pub const EXAMPLES: &str = "\
Examples:
  dovetail simulate                                   # the built-in default day
  dovetail simulate --list
  dovetail simulate --scenario black-friday --compare cluster-autoscaler --html report.html
  dovetail simulate -f my-scenario.yaml --hours 2 -o json
  cat my-scenario.yaml | dovetail simulate -f - --decisions decisions.jsonl";

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Baseline {
    ClusterAutoscaler,
}

#[derive(clap::Args)]
pub struct Args {
    /// A scenario file (YAML), `-` for stdin; without one, the built-in `default` scenario runs.
    #[arg(short = 'f', long = "filename", value_name = "FILE", conflicts_with_all = ["scenario", "file"])]
    filename: Option<PathBuf>,
    /// The scenario file, as an argument (the same as `-f`).
    #[arg(value_name = "FILE", conflicts_with = "scenario")]
    file: Option<PathBuf>,
    /// A built-in scenario by name (`--list` shows them).
    #[arg(long)]
    scenario: Option<String>,
    /// Also run the scenario under a Cluster Autoscaler-like policy and print both.
    #[arg(long, value_enum)]
    compare: Option<Baseline>,
    #[command(flatten)]
    output: OutputArgs,
    /// Also write a self-contained HTML report (charts and tables) to this file.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Writes every decision Dovetail's functions make to this file, one JSON object a line
    /// (time, function, claim, action, why).
    #[arg(long)]
    decisions: Option<PathBuf>,
    /// Overrides the scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Overrides the scenario's duration, in simulated hours.
    #[arg(long)]
    hours: Option<f64>,
    /// Lists the built-in scenarios and exits.
    #[arg(long)]
    list: bool,
}

/// One built-in scenario in `--list`.
#[derive(serde::Serialize)]
struct Listed {
    name: &'static str,
    description: String,
}

/// A scenario file, or stdin for `-` (its `manifestFiles` are then relative to the current
/// directory).
fn load(path: &Path) -> Result<Scenario, String> {
    if path != Path::new("-") {
        return Scenario::load(path).map_err(|e| e.to_string());
    }
    let read = manifest::read_paths(&[path]).map_err(|e| e.to_string())?;
    let (name, text) = read.into_iter().next().expect("one path read");
    Scenario::parse(&name, &text, None).map_err(|e| e.to_string())
}

pub fn run(args: Args) -> Result<ExitCode> {
    let format = args.output.format.unwrap_or(Format::Table);
    if args.list {
        let mut listed = Vec::new();
        for name in builtin::NAMES {
            let s = Scenario::builtin(name).with_context(|| format!("built-in scenario {name}"))?;
            listed.push(Listed { name, description: s.description });
        }
        let table = || {
            let first = |l: &Listed| l.description.lines().next().unwrap_or_default().to_owned();
            listed.iter().map(|l| format!("{:16} {}\n", l.name, first(l))).collect()
        };
        output::print(&output::render(format, &listed, table)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let loaded = match (args.filename.as_ref().or(args.file.as_ref()), &args.scenario) {
        (Some(path), _) => load(path),
        (None, Some(name)) => Scenario::builtin(name).map_err(|e| e.to_string()),
        (None, None) => Scenario::builtin(builtin::NAMES[0]).map_err(|e| e.to_string()),
    };
    let scenario = match loaded {
        Ok(s) => s,
        Err(e) => return Ok(bad_input(&e)),
    };
    let duration = match args.hours {
        Some(h) if h.is_finite() && h > 0.0 && h <= 24.0 * 366.0 => Some(Duration::from_secs_f64(h * 3600.0)),
        Some(h) => return Ok(bad_input(&format!("--hours {h}: expected a number of hours between 0 and 8784"))),
        None => None,
    };
    let mut policies = vec![Policy::Dovetail];
    if args.compare.is_some() {
        if scenario.cluster_autoscaler.is_none() {
            return Ok(bad_input(&driver::RunError::NoNodeGroups(scenario.name.clone())));
        }
        policies.push(Policy::ClusterAutoscaler);
    }

    let mut log = match &args.decisions {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => None,
    };
    let mut log_error = None;
    let mut runs = Vec::new();
    for policy in policies {
        let mut bar = Progress::stderr(policy.name());
        let mut progress = |f: f64| bar.update(f);
        let mut write = |t: Time, function: &str, d: &Decision| {
            let Some(out) = log.as_mut() else { return };
            let line = serde_json::json!({
                "time": t.to_string(),
                "function": function,
                "claim": d.claim,
                "action": d.action.as_ref().map(Action::kind),
                "why": d.why,
            });
            if let Err(e) = writeln!(out, "{line}") {
                log_error.get_or_insert(e);
            }
        };
        let opts = Options {
            duration,
            seed: args.seed,
            progress: Some(&mut progress),
            decisions: if policy == Policy::Dovetail && args.decisions.is_some() { Some(&mut write) } else { None },
            ..Options::new(policy)
        };
        let run = driver::run(&scenario, opts)?;
        bar.clear();
        runs.push(run);
    }
    if let Some(path) = &args.decisions {
        if let Some(e) = log_error {
            return Err(e).with_context(|| format!("writing {}", path.display()));
        }
        if let Some(mut w) = log.take() {
            w.flush().with_context(|| format!("writing {}", path.display()))?;
        }
        eprintln!("dovetail: decisions written to {}", path.display());
    }

    if let Some(path) = &args.html {
        std::fs::write(path, report::html(&runs)).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("dovetail: HTML report written to {}", path.display());
    }
    output::print(&output::render(format, &report::json(&runs), || report::table(&runs))?)?;
    Ok(ExitCode::SUCCESS)
}
