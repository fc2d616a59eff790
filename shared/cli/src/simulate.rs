//! `dovetail simulate [SCENARIO.yaml | --scenario NAME]`: the whole event-driven pipeline over
//! virtual time — the same reconcilers the Lambdas run, against an in-memory AWS and cluster —
//! with a cost and latency report, optionally side by side with a Cluster Autoscaler baseline.
//!
//! Exit codes: 0 after a run, 2 when the scenario is bad (the message names the file, the
//! object and the field; nothing is printed on stdout), 1 for anything else.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use dovetail_core::decision::{Action, Decision};
use dovetail_core::time::Time;
use dovetail_sim::driver::{self, Options, Policy};
use dovetail_sim::report;
use dovetail_sim::scenario::{builtin, Scenario};

use crate::Format;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Baseline {
    ClusterAutoscaler,
}

#[derive(clap::Args)]
pub struct Args {
    /// A scenario file (YAML); without one, the built-in `default` scenario runs.
    #[arg(conflicts_with = "scenario")]
    file: Option<PathBuf>,
    /// A built-in scenario by name (`--list` shows them).
    #[arg(long)]
    scenario: Option<String>,
    /// Also run the scenario under a Cluster Autoscaler-like policy and print both.
    #[arg(long, value_enum)]
    compare: Option<Baseline>,
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    output: Format,
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

fn bad_input(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("dovetail: {e}");
    ExitCode::from(2)
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.list {
        for name in builtin::NAMES {
            let s = Scenario::builtin(name).with_context(|| format!("built-in scenario {name}"))?;
            let first = s.description.lines().next().unwrap_or_default();
            println!("{name:16} {first}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let loaded = match (&args.file, &args.scenario) {
        (Some(path), _) => Scenario::load(path),
        (None, Some(name)) => Scenario::builtin(name),
        (None, None) => Scenario::builtin(builtin::NAMES[0]),
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
    let show_progress = std::io::stderr().is_terminal();
    for policy in policies {
        let mut bar = Progress::new(policy.name(), show_progress);
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
        bar.finish();
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
    match args.output {
        Format::Table => print!("{}", report::table(&runs)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&report::json(&runs))?),
    }
    Ok(ExitCode::SUCCESS)
}

/// A one-line progress bar on stderr, drawn only on a terminal and only when it changes.
struct Progress {
    label: &'static str,
    enabled: bool,
    shown: Option<usize>,
}

impl Progress {
    const WIDTH: usize = 30;

    fn new(label: &'static str, enabled: bool) -> Self {
        Progress { label, enabled, shown: None }
    }

    fn update(&mut self, fraction: f64) {
        if !self.enabled {
            return;
        }
        let percent = (fraction.clamp(0.0, 1.0) * 100.0) as usize;
        if self.shown == Some(percent) {
            return;
        }
        self.shown = Some(percent);
        let filled = percent * Self::WIDTH / 100;
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{:<20} [{}{}] {percent:3}%",
            self.label,
            "#".repeat(filled),
            ".".repeat(Self::WIDTH - filled)
        );
        let _ = err.flush();
    }

    fn finish(&mut self) {
        if self.enabled && self.shown.is_some() {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{}\r", " ".repeat(20 + Self::WIDTH + 8));
            let _ = err.flush();
        }
    }
}
