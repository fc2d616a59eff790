//! `dovetail`: explain what Dovetail would do, before it does it.

mod bench;
mod import;
mod output;
mod overlays;
mod plan;
mod progress;
mod simulate;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

pub use output::{Format, OutputArgs};

/// The exit codes, for every command's help and the docs (docs/cli.md).
const EXIT_CODES: &str = "\
Exit codes:
  0  success (a plan that cannot place some pods is still a success: it says why)
  1  failure (a file cannot be written, a run failed)
  2  bad input: invalid arguments, unreadable or invalid manifests or scenarios";

const EXAMPLES: &str = "\
Examples:
  dovetail plan -f infra/examples/web-zone-spread
  kubectl get nodepools,pods -A -o yaml | dovetail plan -f - -o json
  dovetail simulate --scenario black-friday --compare cluster-autoscaler
  dovetail import karpenter.yaml --output-file dovetail.yaml
  source <(dovetail completion bash)";

#[derive(Parser)]
#[command(
    name = "dovetail",
    version,
    about = "Serverless, event-driven node autoscaling for Amazon EKS",
    after_help = format!("{EXAMPLES}\n\n{EXIT_CODES}")
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Plan capacity for the pending pods in Kubernetes manifests: which NodeClaims Dovetail would
    /// launch, which pods go to existing nodes, and why the rest cannot be placed.
    #[command(after_help = format!("{}\n\n{EXIT_CODES}", plan::EXAMPLES))]
    Plan(plan::Args),
    /// Time the scheduler on Karpenter's published benchmark mix and on the real EC2 catalog.
    #[command(after_help = format!("{}\n\n{EXIT_CODES}", bench::EXAMPLES))]
    Bench(bench::Args),
    /// Run Dovetail's functions over a simulated day (or a scenario file): an in-memory AWS and
    /// cluster, virtual time, a cost and latency report, optionally against Cluster Autoscaler.
    #[command(after_help = format!("{}\n\n{EXIT_CODES}", simulate::EXAMPLES))]
    Simulate(simulate::Args),
    /// Convert Karpenter v1 NodePools and EC2NodeClasses (files, or `kubectl get -o yaml` on
    /// stdin) into Dovetail's, warning about everything that does not carry over exactly.
    #[command(
        after_help = format!("{}\n\n{EXIT_CODES}", import::EXAMPLES),
        after_long_help = format!("{}\n\n{}\n\n{EXIT_CODES}", import::HELP, import::EXAMPLES)
    )]
    Import(import::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish or powershell).
    #[command(after_help = COMPLETION_EXAMPLES)]
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

const COMPLETION_EXAMPLES: &str = "\
Examples:
  source <(dovetail completion bash)                       # this bash session
  dovetail completion bash > /etc/bash_completion.d/dovetail
  dovetail completion zsh > \"${fpath[1]}/_dovetail\"
  dovetail completion fish > ~/.config/fish/completions/dovetail.fish";

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plan(args) => plan::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Import(args) => import::run(args),
        Command::Completion { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "dovetail", &mut script);
            output::print(&String::from_utf8_lossy(&script)).map(|()| ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("dovetail: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Bad input (exit code 2): the message names what is wrong; nothing else is printed.
pub fn bad_input(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("dovetail: {e}");
    ExitCode::from(2)
}
