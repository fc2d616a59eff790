//! `dovetail`: explain what Dovetail would do, before it does it.

mod bench;
mod import;
mod plan;
mod simulate;

use clap::{Parser, Subcommand, ValueEnum};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "dovetail", version, about = "Serverless, event-driven node autoscaling for Amazon EKS")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Plan capacity for the pending pods in Kubernetes manifests: which NodeClaims Dovetail would
    /// launch, which pods go to existing nodes, and why the rest cannot be placed.
    Plan(plan::Args),
    /// Time the scheduler on Karpenter's published benchmark mix and on the real EC2 catalog.
    Bench(bench::Args),
    /// Run Dovetail's functions over a simulated day (or a scenario file): an in-memory AWS and
    /// cluster, virtual time, a cost and latency report, optionally against Cluster Autoscaler.
    Simulate(simulate::Args),
    /// Convert Karpenter v1 NodePools and EC2NodeClasses (files, or `kubectl get -o yaml` on
    /// stdin) into Dovetail's, warning about everything that does not carry over exactly.
    Import(import::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plan(args) => plan::run(args),
        Command::Bench(args) => bench::run(args).map(|()| ExitCode::SUCCESS),
        Command::Simulate(args) => simulate::run(args),
        Command::Import(args) => import::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("dovetail: {e:#}");
            ExitCode::FAILURE
        }
    }
}
