//! What a month of Dovetail costs, from the rig's measured invocations: the tables of
//! docs/costs.md are this module's output (`--costs` of `tests/bench/scale.rs`).
//!
//! Measured, per cluster size: each kind of warm invocation's wall time on the rig less the time
//! it waited on moto, DynamoDB read and write units, and the AWS and Kubernetes calls it made;
//! what a cold start adds. Assumed, and stated in the output: how often things happen
//! ([`Activity`]), how long a region's AWS APIs and EKS's API server take to answer
//! ([`Allowance`]), and list prices ([`Prices`]). The bill is then counts × units × prices, line
//! by line.

use std::fmt::Write as _;

use anyhow::{anyhow, Result};

use super::{Row, Run};

/// Prices, us-east-1, on-demand, no free tier.
#[derive(Debug, Clone, Copy)]
pub struct Prices {
    /// Lambda on arm64, per GB-second.
    pub lambda_gb_second: f64,
    pub lambda_request: f64,
    /// SQS standard queues.
    pub sqs_request: f64,
    /// DynamoDB on-demand.
    pub dynamodb_read_unit: f64,
    pub dynamodb_write_unit: f64,
    /// A CloudWatch custom metric (EMF metrics are), per month, prorated by the hours it gets data.
    pub metric_month: f64,
    /// CloudWatch Logs ingestion, per GB.
    pub log_gb: f64,
    /// On-demand price per vCPU-hour of the instance an always-on controller displaces:
    /// m7g.large ($0.0816/h) and m6i.large ($0.096/h), 2 vCPUs each.
    pub vcpu_hour_m7g: f64,
    pub vcpu_hour_m6i: f64,
}

/// The list prices the tables use, as AWS published them after DynamoDB's on-demand price cut of
/// November 2024 (the last time this project checked them; they are inputs, not measurements).
pub const PRICES: Prices = Prices {
    lambda_gb_second: 0.000_013_333_4,
    lambda_request: 0.20e-6,
    sqs_request: 0.40e-6,
    dynamodb_read_unit: 0.125e-6,
    dynamodb_write_unit: 0.625e-6,
    metric_month: 0.30,
    log_gb: 0.50,
    vcpu_hour_m7g: 0.0408,
    vcpu_hour_m6i: 0.048,
};

/// The functions' memory as the stack deploys them (1,769 MB: one vCPU), in GB.
pub const MEMORY_GB: f64 = 1769.0 / 1024.0;
/// Hours and days in the month the tables bill.
const HOURS: f64 = 720.0;
const DAYS: f64 = 30.0;
/// The sweeper's schedule: once a minute.
const SWEEPS_PER_DAY: f64 = 1440.0;
/// CloudWatch Logs per invocation (the platform lines, the invocation's summary and its decisions).
const LOG_BYTES_PER_INVOCATION: f64 = 2048.0;
/// EMF metrics: six per function. The sweeper's get data every hour.
const METRICS_PER_FUNCTION: f64 = 6.0;
/// The forwarder's requests (10m CPU, 32 MiB), billed as CPU share of an m7g.large.
const FORWARDER_VCPU: f64 = 0.01;

/// Time a region's AWS APIs take to answer, in place of moto's (which grows with the instances it
/// holds: seconds a call at thousands), and EKS's API server beyond the rig's local one: added per
/// call, as if every call were made one after the other. Assumed, not measured.
#[derive(Debug, Clone, Copy)]
pub struct Allowance {
    pub kube_request_ms: f64,
    pub dynamodb_call_ms: f64,
    pub create_fleet_ms: f64,
    /// Any other EC2, SQS, SSM, EKS or Pricing call.
    pub other_aws_call_ms: f64,
}

pub const ALLOWANCE: Allowance =
    Allowance { kube_request_ms: 15.0, dynamodb_call_ms: 10.0, create_fleet_ms: 1500.0, other_aws_call_ms: 100.0 };

/// How busy a cluster is.
#[derive(Debug, Clone, Copy)]
pub struct Activity {
    pub name: &'static str,
    /// A node's average life: launches (and terminations) a day are nodes × 24 h / this.
    pub node_lifetime_hours: f64,
    /// Whether pending pods come in bursts (a Deployment scaled, a batch of Jobs: one invocation
    /// plans a 100-pod burst's claims) or a few at a time (an invocation per launch, costed as the
    /// 1-pod invocation).
    pub bursts: bool,
    /// The share of hours in which the provisioner and interruption functions run (their metrics
    /// are billed for those hours only).
    pub active_hours: f64,
    /// SQS pollers Lambda keeps on the interruption queue (5 on the doorbell queue, always).
    pub interruption_pollers: f64,
}

pub const QUIET: Activity =
    Activity { name: "quiet", node_lifetime_hours: 48.0, bursts: false, active_hours: 0.4, interruption_pollers: 2.0 };
pub const BUSY: Activity =
    Activity { name: "busy", node_lifetime_hours: 8.0, bursts: true, active_hours: 1.0, interruption_pollers: 5.0 };

/// Per launch: the provisioner once more when the Node registers (labels, the start-up taint).
/// Per termination: three interruption messages (two EC2 state changes, and a drain's resume
/// message or a spot warning). Execution environments: each function's replaced every two hours
/// (Lambda does not promise how long one lives): 12 cold starts a day each.
const INTERRUPTIONS_PER_TERMINATION: f64 = 3.0;
const COLD_STARTS_PER_DAY: f64 = 12.0;
/// Doorbell queue pollers (AWS keeps five on an SQS trigger), each receiving three times a minute
/// (20 s long polls).
const DOORBELL_POLLERS: f64 = 5.0;
const RECEIVES_PER_POLLER_MINUTE: f64 = 3.0;

/// One kind of invocation at one size: the rig's measurement and the allowance on top.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Invocation {
    /// The rig's wall time less its AWS time ([`super::Until::own_ms`]).
    pub rig_ms: f64,
    pub allowance_ms: f64,
    pub read_units: f64,
    pub write_units: f64,
}

impl Invocation {
    fn of(row: &Row, allowance: &Allowance) -> Invocation {
        let fleets = row.create_fleets() as f64;
        let other_ec2: u64 = row.ec2_calls.values().sum::<u64>() - row.create_fleets();
        let others: u64 = row.other_aws_calls.values().sum();
        let dynamodb: u64 = row.dynamodb_calls.values().sum();
        Invocation {
            rig_ms: row.total.own_ms(),
            allowance_ms: row.kube_requests as f64 * allowance.kube_request_ms
                + dynamodb as f64 * allowance.dynamodb_call_ms
                + fleets * allowance.create_fleet_ms
                + (other_ec2 + others) as f64 * allowance.other_aws_call_ms,
            read_units: row.dynamodb_read_units,
            write_units: row.dynamodb_write_units,
        }
    }

    pub fn seconds(&self) -> f64 {
        (self.rig_ms + self.allowance_ms) / 1e3
    }

    /// What `self` costs more than `warm` (a cold start's extra), never below zero.
    fn beyond(&self, warm: &Invocation) -> Invocation {
        Invocation {
            rig_ms: (self.rig_ms - warm.rig_ms).max(0.0),
            allowance_ms: (self.allowance_ms - warm.allowance_ms).max(0.0),
            read_units: (self.read_units - warm.read_units).max(0.0),
            write_units: (self.write_units - warm.write_units).max(0.0),
        }
    }
}

/// One size's invocations, as the bill uses them.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    pub nodes: usize,
    pub pods: usize,
    /// A warm sweep with nothing to do: most of a month's sweeps.
    pub idle_sweep: Invocation,
    /// A warm sweep that replaces a drifted node.
    pub acting_sweep: Invocation,
    /// A warm provisioner with one pod pending.
    pub provision_one: Invocation,
    /// A warm provisioner with a 100-pod burst pending, and the claims it launched.
    pub burst: Invocation,
    pub burst_claims: f64,
    /// A warm interruption invocation (a spot interruption warning).
    pub interruption: Invocation,
    /// What a cold start adds to each function's invocation.
    pub cold_provisioner: Invocation,
    pub cold_sweeper: Invocation,
    pub cold_interruption: Invocation,
    /// The highest peak RSS of any invocation at this size (the rig's process, all of it).
    pub peak_rss_mib: f64,
}

fn find<'a>(run: &'a Run, function: &str, start: &str, after: impl Fn(&str) -> bool) -> Result<&'a Row> {
    run.rows.iter().find(|r| r.function == function && r.start == start && after(&r.after)).ok_or_else(|| {
        anyhow!("{}: no {start} {function} row of that kind (the rig's short or full script has one)", run.size)
    })
}

impl Figures {
    pub fn of(run: &Run, allowance: &Allowance) -> Result<Figures> {
        let inv = |r: &Row| Invocation::of(r, allowance);
        let idle_sweep = inv(find(run, "sweeper", "warm", |a| a == "nothing")?);
        let acting_sweep = inv(find(run, "sweeper", "warm", |a| a.ends_with("drifted"))?);
        let provision_one = inv(find(run, "provisioner", "warm", |a| a == "1 pod pending")?);
        let burst = find(run, "provisioner", "warm", |a| a == "100 pods pending")?;
        let burst_claims = burst.claims_added.max(1) as f64;
        let interruption = inv(find(run, "interruption", "warm", |_| true)?);
        let cold_provisioner = inv(find(run, "provisioner", "cold", |a| a == "1 pod pending")?).beyond(&provision_one);
        let cold_sweeper = inv(find(run, "sweeper", "cold", |a| a == "nothing")?).beyond(&idle_sweep);
        let cold_interruption = inv(find(run, "interruption", "cold", |_| true)?).beyond(&interruption);
        Ok(Figures {
            nodes: run.size.nodes,
            pods: run.size.pods,
            idle_sweep,
            acting_sweep,
            provision_one,
            burst: inv(burst),
            burst_claims,
            interruption,
            cold_provisioner,
            cold_sweeper,
            cold_interruption,
            peak_rss_mib: run.rows.iter().map(|r| r.peak_rss_mib).fold(0.0, f64::max),
        })
    }
}

/// A month's bill, in dollars, and the counts behind it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bill {
    pub launches_per_day: f64,
    pub invocations: f64,
    pub lambda_seconds: f64,
    pub lambda: f64,
    pub sqs_requests: f64,
    pub sqs: f64,
    pub read_units: f64,
    pub write_units: f64,
    pub dynamodb: f64,
    pub metrics: f64,
    pub logs: f64,
    pub forwarder: f64,
}

impl Bill {
    pub fn total(&self) -> f64 {
        self.lambda + self.sqs + self.dynamodb + self.metrics + self.logs + self.forwarder
    }
}

/// A month of `activity` on the cluster `figures` measured.
pub fn month(figures: &Figures, activity: &Activity, prices: &Prices) -> Bill {
    let launches = figures.nodes as f64 * 24.0 / activity.node_lifetime_hours;
    // The pending pods: an invocation each, or one per burst of claims.
    let pending = if activity.bursts {
        (launches / figures.burst_claims, figures.burst)
    } else {
        (launches, figures.provision_one)
    };
    // Invocations a day, and what each costs.
    let invoked = [
        (SWEEPS_PER_DAY - launches.min(SWEEPS_PER_DAY), figures.idle_sweep),
        (launches.min(SWEEPS_PER_DAY), figures.acting_sweep),
        pending,
        // The Node registering.
        (launches, figures.provision_one),
        (launches * INTERRUPTIONS_PER_TERMINATION, figures.interruption),
    ];
    // What cold starts add to invocations already counted (no requests of their own).
    let cold = [
        (COLD_STARTS_PER_DAY, figures.cold_provisioner),
        (COLD_STARTS_PER_DAY, figures.cold_sweeper),
        (COLD_STARTS_PER_DAY, figures.cold_interruption),
    ];
    let all = || invoked.iter().chain(&cold);
    let seconds = DAYS * all().map(|(n, i)| n * i.seconds()).sum::<f64>();
    let read_units = DAYS * all().map(|(n, i)| n * i.read_units).sum::<f64>();
    let write_units = DAYS * all().map(|(n, i)| n * i.write_units).sum::<f64>();
    let invocations = DAYS * invoked.iter().map(|(n, _)| n).sum::<f64>();

    let pods_per_node = figures.pods as f64 / figures.nodes.max(1) as f64;
    let doorbells = DAYS * launches * (pods_per_node + 2.0);
    let interruption_messages = DAYS * launches * INTERRUPTIONS_PER_TERMINATION;
    let receives = (DOORBELL_POLLERS + activity.interruption_pollers) * RECEIVES_PER_POLLER_MINUTE * 60.0 * HOURS;
    let sqs_requests = receives + 2.0 * (doorbells + interruption_messages);

    let metrics = prices.metric_month * METRICS_PER_FUNCTION * (1.0 + 2.0 * activity.active_hours);
    Bill {
        launches_per_day: launches,
        invocations,
        lambda_seconds: seconds,
        lambda: seconds * MEMORY_GB * prices.lambda_gb_second + invocations * prices.lambda_request,
        sqs_requests,
        sqs: sqs_requests * prices.sqs_request,
        read_units,
        write_units,
        dynamodb: read_units * prices.dynamodb_read_unit + write_units * prices.dynamodb_write_unit,
        metrics,
        logs: invocations * LOG_BYTES_PER_INVOCATION / 1e9 * prices.log_gb,
        forwarder: FORWARDER_VCPU * HOURS * prices.vcpu_hour_m7g,
    }
}

/// Karpenter's controller as deployed: two replicas of 1 vCPU (and 1 GiB, which fits in the memory
/// a vCPU's share of these 1:4 instances leaves), on on-demand capacity, per month.
pub fn karpenter(vcpu_hour: f64) -> f64 {
    2.0 * HOURS * vcpu_hour
}

/// docs/costs.md's tables from the rig's `runs` (one per size, short or full script).
pub fn markdown(runs: &[Run]) -> Result<String> {
    let mut sizes: Vec<Figures> = runs.iter().map(|r| Figures::of(r, &ALLOWANCE)).collect::<Result<_>>()?;
    sizes.sort_by_key(|f| f.nodes);
    let mut out = String::new();
    let _ = writeln!(out, "Per invocation, ms: the rig's wall time less its time waiting on moto (release build, 2-core machine, local API server), + the allowance for a region's AWS and EKS answers:\n");
    let _ = writeln!(
        out,
        "| nodes / pods | idle sweep | sweep replacing a node | provisioner, 1 pod | 100-pod burst (claims) | interruption | cold start adds (provisioner, sweeper, interruption) | peak RSS MiB |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    let ms = |i: &Invocation| format!("{:.0} + {:.0}", i.rig_ms, i.allowance_ms);
    for f in &sizes {
        let _ = writeln!(
            out,
            "| {} / {} | {} | {} | {} | {} ({:.0}) | {} | {}, {}, {} | {:.0} |",
            f.nodes,
            f.pods,
            ms(&f.idle_sweep),
            ms(&f.acting_sweep),
            ms(&f.provision_one),
            ms(&f.burst),
            f.burst_claims,
            ms(&f.interruption),
            ms(&f.cold_provisioner),
            ms(&f.cold_sweeper),
            ms(&f.cold_interruption),
            f.peak_rss_mib
        );
    }
    let _ = writeln!(out, "\nDynamoDB units per invocation (read / write), measured:\n");
    let _ = writeln!(
        out,
        "| nodes | idle sweep | sweep replacing a node | provisioner, 1 pod | 100-pod burst | interruption |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    let units = |i: &Invocation| format!("{:.1} / {:.0}", i.read_units, i.write_units);
    for f in &sizes {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            f.nodes,
            units(&f.idle_sweep),
            units(&f.acting_sweep),
            units(&f.provision_one),
            units(&f.burst),
            units(&f.interruption)
        );
    }
    let k7 = karpenter(PRICES.vcpu_hour_m7g);
    let k6 = karpenter(PRICES.vcpu_hour_m6i);
    let _ = writeln!(out, "\nA month ($), by cluster size and activity; Karpenter's controller costs {k7:.2} on m7g and {k6:.2} on m6i at every size:\n");
    let _ = writeln!(
        out,
        "| nodes | activity | launches a day | invocations | Lambda | SQS | DynamoDB | CloudWatch metrics | logs | forwarder | **total** | Karpenter (m7g) less Dovetail |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for f in &sizes {
        for activity in [QUIET, BUSY] {
            let b = month(f, &activity, &PRICES);
            let _ = writeln!(
                out,
                "| {} | {} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | **{:.2}** | {:+.2} |",
                f.nodes,
                activity.name,
                b.launches_per_day,
                b.invocations,
                b.lambda,
                b.sqs,
                b.dynamodb,
                b.metrics,
                b.logs,
                b.forwarder,
                b.total(),
                k7 - b.total()
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(sweep_ms: f64) -> Figures {
        let i = |rig_ms: f64, read_units: f64, write_units: f64| Invocation {
            rig_ms,
            allowance_ms: 0.0,
            read_units,
            write_units,
        };
        Figures {
            nodes: 24,
            pods: 480,
            idle_sweep: i(sweep_ms, 1.0, 0.0),
            acting_sweep: i(2000.0, 10.0, 20.0),
            provision_one: i(500.0, 1.0, 8.0),
            burst: i(2000.0, 20.0, 160.0),
            burst_claims: 20.0,
            interruption: i(200.0, 2.0, 4.0),
            cold_provisioner: i(0.0, 0.0, 0.0),
            cold_sweeper: i(0.0, 0.0, 0.0),
            cold_interruption: i(0.0, 0.0, 0.0),
            peak_rss_mib: 100.0,
        }
    }

    #[test]
    fn a_month_is_counts_times_units_times_prices() {
        // 24 nodes living 48 h: 12 launches a day.
        let b = month(&figures(1000.0), &QUIET, &PRICES);
        assert_eq!(b.launches_per_day, 12.0);
        // Sweeps 1,440 a day; provisioner 12 (registrations) + 12 (pods); interruption 36.
        assert_eq!(b.invocations, 30.0 * (1440.0 + 24.0 + 36.0));
        let seconds_a_day = 1428.0 * 1.0 + 12.0 * 2.0 + 24.0 * 0.5 + 36.0 * 0.2;
        assert!((b.lambda_seconds - 30.0 * seconds_a_day).abs() < 1e-6);
        let reads_a_day = 1428.0 + 12.0 * 10.0 + 24.0 + 36.0 * 2.0;
        assert!((b.read_units - 30.0 * reads_a_day).abs() < 1e-6);
        assert!((b.write_units - 30.0 * (12.0 * 20.0 + 24.0 * 8.0 + 36.0 * 4.0)).abs() < 1e-6);
        assert!((b.dynamodb - (b.read_units * 0.125e-6 + b.write_units * 0.625e-6)).abs() < 1e-9);
        // 7 pollers × 3 a minute, and a send and a delete per message: 12 × (20 + 2) + 36 a day.
        assert!((b.sqs_requests - (7.0 * 3.0 * 60.0 * 720.0 + 2.0 * 30.0 * (12.0 * 22.0 + 36.0))).abs() < 1e-6);
        // The sweeper's six metrics all month, the others' in 40% of the hours.
        assert!((b.metrics - 0.30 * 6.0 * 1.8).abs() < 1e-9);
    }

    #[test]
    fn bursts_share_an_invocation_and_slower_sweeps_cost_more() {
        let quiet = month(&figures(1000.0), &BUSY, &PRICES);
        // 24 nodes living 8 h: 72 launches a day, in bursts of 20 claims: 3.6 burst invocations.
        assert_eq!(quiet.launches_per_day, 72.0);
        assert!((quiet.invocations - 30.0 * (1440.0 + 72.0 + 216.0 + 3.6)).abs() < 1e-6);
        let slower = month(&figures(2000.0), &BUSY, &PRICES);
        assert!(slower.lambda > quiet.lambda);
        assert!((karpenter(0.0408) - 58.752).abs() < 1e-9);
    }
}
