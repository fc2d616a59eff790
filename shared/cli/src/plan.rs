//! `dovetail plan -f FILE…`: what Dovetail would launch for the pending pods in some manifests.
//!
//! Exit codes: 0 with a plan (even when some pods cannot be placed: the plan says why), 2 when
//! the input is bad (the message names file, document, object and field; nothing else is
//! printed), 1 for anything else.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use dovetail_api::manifest;
use dovetail_core::catalog::{self, Zone};
use dovetail_core::model::parse_cost;
use dovetail_core::provisioning;
use dovetail_core::requirements::MinValuesPolicy;
use dovetail_core::scheduler::{schedule, Plan};

use crate::{bad_input, output, overlays, Format, OutputArgs};

pub const EXAMPLES: &str = "\
Examples:
  dovetail plan -f infra/examples/web-zone-spread
  dovetail plan -f nodepools.yaml -f pods/ -o yaml
  kubectl get nodepools.dovetail.dev,ec2nodeclasses.dovetail.dev,nodeoverlays.dovetail.dev,nodes,pods -A -o yaml | dovetail plan -f -
  dovetail plan -f infra/examples/gpu --zones us-east-1a,us-east-1b -o json
  dovetail plan -f infra/examples/savings-plan                # NodeOverlays price the catalog";

#[derive(clap::Args)]
pub struct Args {
    /// Manifest files or directories (their *.yaml, *.yml, *.json); `-` reads stdin.
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
    /// Availability zones offerings are priced in, as `name` or `name=zone-id`.
    #[arg(long, value_delimiter = ',')]
    zones: Vec<String>,
    /// What a pool's minValues means, as Karpenter's --min-values-policy: Strict (a claim that
    /// cannot keep it is not launched) or BestEffort (launched with the values there are). The
    /// functions read DOVETAIL_MIN_VALUES_POLICY.
    #[arg(long, value_name = "POLICY", default_value = "Strict", value_parser = parse_min_values_policy)]
    min_values_policy: MinValuesPolicy,
    /// The cluster-wide cost limit, in USD per hour (`250`, `12.5`): what the manifests' Nodes and
    /// the plan's new capacity may cost at most together, across every NodePool (the functions
    /// read DOVETAIL_COST_LIMIT). A Node labelled dovetail.dev/nodepool counts, as the functions
    /// count it, at its type's price in its zone and capacity type, NodeOverlays applied.
    #[arg(long, value_name = "USD_PER_HOUR", value_parser = parse_cost_limit)]
    cost_limit: Option<i64>,
}

fn parse_cost_limit(value: &str) -> Result<i64, String> {
    parse_cost(value)
        .map_err(|_| format!("{value:?} is not a non-negative number of dollars per hour, e.g. 250 or 12.5"))
}

fn parse_min_values_policy(value: &str) -> Result<MinValuesPolicy, String> {
    MinValuesPolicy::parse(value).ok_or_else(|| format!("{value:?} is not Strict or BestEffort"))
}

pub fn run(args: Args) -> Result<ExitCode> {
    let inputs = match manifest::load(&args.files) {
        Ok(i) => i,
        Err(e) => return Ok(bad_input(&e)),
    };
    let mut snap = match inputs.snapshot() {
        Ok(s) => s,
        Err(e) => return Ok(bad_input(&e)),
    };
    snap.min_values_policy = args.min_values_policy;
    let overlays = match inputs.overlays() {
        Ok(o) => o,
        Err(e) => return Ok(bad_input(&e)),
    };
    let zones = parse_zones(&args.zones);
    let custom;
    let base = if zones.is_empty() {
        catalog::embedded()
    } else {
        custom = catalog::embedded_with_zones(&zones);
        &custom
    };
    for s in &inputs.skipped {
        eprintln!("dovetail: note: {}: {} {} is not used for planning", s.source, s.kind, s.name);
    }
    let overlaid;
    let catalog = if overlays.is_empty() {
        base
    } else {
        overlaid = overlays::priced(base, &overlays);
        &overlaid
    };
    // The manifests' nodes count against the pools' limits and the cluster-wide one, at the
    // prices just made, as the functions count a cluster's.
    provisioning::count_nodes(&mut snap, catalog, args.cost_limit);
    let plan = schedule(&snap, catalog);
    output::print(&output::render(args.output.format.unwrap_or(Format::Table), &plan, || table(&plan))?)?;
    Ok(ExitCode::SUCCESS)
}

/// `us-east-1a` or `us-east-1a=use1-az1`; a bare name gets its id from the default zones, or
/// the name itself.
fn parse_zones(specs: &[String]) -> Vec<Zone> {
    specs
        .iter()
        .map(|s| match s.split_once('=') {
            Some((name, id)) => Zone { name: name.to_string(), id: id.to_string() },
            None => {
                let id = catalog::DEFAULT_ZONES.iter().find(|(n, _)| n == s).map_or(s.as_str(), |(_, id)| id);
                Zone { name: s.clone(), id: id.to_string() }
            }
        })
        .collect()
}

/// The plan for a person: new claims, pods on existing capacity, pods that cannot be placed.
pub fn table(plan: &Plan) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if plan.nodeclaims.is_empty() {
        out.push_str("No new capacity needed.\n");
    } else {
        let rows: Vec<[String; 7]> = plan
            .nodeclaims
            .iter()
            .map(|c| {
                [
                    c.name.clone(),
                    c.nodepool.clone(),
                    c.instance_type.clone(),
                    c.capacity_type.to_string(),
                    c.zone.clone(),
                    format!("{:.4}", c.price_per_hour),
                    c.pods.len().to_string(),
                ]
            })
            .collect();
        let header = ["NODECLAIM", "NODEPOOL", "INSTANCE TYPE", "CAPACITY", "ZONE", "$/HOUR", "PODS"];
        let widths: Vec<usize> =
            (0..7).map(|i| rows.iter().map(|r| r[i].len()).chain([header[i].len()]).max().unwrap_or(0)).collect();
        let line = |cells: &[&str]| {
            let mut l = String::new();
            for (i, c) in cells.iter().enumerate() {
                let _ = write!(l, "{:<w$}  ", c, w = widths[i]);
            }
            l.trim_end().to_string() + "\n"
        };
        out.push_str(&line(&header));
        for (r, c) in rows.iter().zip(&plan.nodeclaims) {
            out.push_str(&line(&r.iter().map(String::as_str).collect::<Vec<_>>()));
            let others = c.instance_types.len() - 1;
            if others > 0 {
                let shown: Vec<&str> = c.instance_types.iter().skip(1).take(4).map(String::as_str).collect();
                let more =
                    if others > shown.len() { format!(", … {} more", others - shown.len()) } else { String::new() };
                let _ = writeln!(out, "    or: {}{more}", shown.join(", "));
            }
            if let Some(list) = c.list_price_per_hour {
                let _ = writeln!(out, "    list price: {list:.4} $/hour (a NodeOverlay changed it)");
            }
            let _ = writeln!(out, "    pods: {}", c.pods.join(", "));
        }
    }
    if !plan.existing.is_empty() {
        out.push_str("\nOn existing capacity:\n");
        for e in &plan.existing {
            let _ = writeln!(out, "  {}: {}", e.node, e.pods.join(", "));
        }
    }
    if !plan.unschedulable.is_empty() {
        out.push_str("\nCannot be placed:\n");
        for u in &plan.unschedulable {
            let _ = writeln!(out, "  {}: {}", u.pod, u.reason);
        }
    }
    let ratio = if plan.lower_bound_per_hour > 0.0 {
        format!(", {:.2}x", plan.cost_per_hour / plan.lower_bound_per_hour)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "\n{} new node(s), ${:.4}/hour (lower bound ${:.4}/hour{ratio}); {} pod(s) on existing capacity, {} cannot be placed.",
        plan.nodeclaims.len(),
        plan.cost_per_hour,
        plan.lower_bound_per_hour,
        plan.existing.iter().map(|e| e.pods.len()).sum::<usize>(),
        plan.unschedulable.len()
    );
    out
}
