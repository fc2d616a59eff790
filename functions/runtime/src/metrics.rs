//! CloudWatch Embedded Metric Format: JSON log lines that CloudWatch turns into metrics, so the
//! functions publish metrics without a PutMetricData call (or its latency and IAM permission).
//!
//! Names follow Karpenter's Prometheus metrics where one exists, in CloudWatch's CamelCase
//! (`karpenter_nodeclaims_created_total{nodepool}` is `NodeClaimsCreated` by `NodePool`), and
//! dimensions are Karpenter's labels that stay few: pool, reason, state, message type — never a
//! pod's or a node's name. [`METRICS`] is the one list of them: the documents below, the
//! dashboards' tests and docs/operations.md's table are checked against it.
//!
//! Gauges ([`Kind::State`]) describe the cluster after the invocation's actions (see
//! [`dovetail_core::reconcile::View::measure`]); counts ([`Kind::Count`]) what the invocation did.

use serde_json::{json, Map, Value};
use std::time::Duration;

use dovetail_core::nodeclaim::Phase;
use dovetail_core::reconcile::{LaunchFailure, Report};

pub const NAMESPACE: &str = "Dovetail";

/// Whether a metric is a level (read it with `Maximum`/`Average`) or a count of events (`Sum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    State,
    Count,
}

/// One metric the functions emit: its CloudWatch name, unit, dimensions (besides none), and the
/// Karpenter metric a Karpenter user knows it by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    pub name: &'static str,
    pub unit: &'static str,
    pub dimensions: &'static [&'static str],
    pub kind: Kind,
    /// Also aggregated over the cluster alone (a second EMF dimension set), for alarms: they
    /// cannot search across a dimension's values.
    pub rollup: bool,
    pub karpenter: &'static str,
}

const FUNCTION: &[&str] = &["Function", "Cluster"];
const CLUSTER: &[&str] = &["Cluster"];

pub const PODS_PENDING: Metric = Metric {
    name: "PodsPending",
    unit: "Count",
    dimensions: CLUSTER,
    kind: Kind::State,
    rollup: false,
    karpenter: "karpenter_pods_state{phase=\"Pending\"}",
};
pub const PODS_UNBOUND_TIME: Metric = Metric {
    name: "PodsUnboundTime",
    unit: "Seconds",
    dimensions: CLUSTER,
    kind: Kind::State,
    rollup: false,
    karpenter: "karpenter_pods_unbound_time_seconds (its largest)",
};
pub const NODECLAIMS: Metric = Metric {
    name: "NodeClaims",
    unit: "Count",
    dimensions: &["Cluster", "State"],
    kind: Kind::State,
    rollup: false,
    karpenter: "operator_nodeclaim_status_condition_count",
};
pub const FLEET_COST: Metric = Metric {
    name: "FleetCostPerHour",
    unit: "None",
    dimensions: CLUSTER,
    kind: Kind::State,
    rollup: false,
    karpenter: "(none)",
};
pub const NODECLAIMS_CREATED: Metric = Metric {
    name: "NodeClaimsCreated",
    unit: "Count",
    dimensions: &["Cluster", "NodePool"],
    kind: Kind::Count,
    rollup: true,
    karpenter: "karpenter_nodeclaims_created_total{nodepool}",
};
pub const NODECLAIMS_TERMINATED: Metric = Metric {
    name: "NodeClaimsTerminated",
    unit: "Count",
    dimensions: CLUSTER,
    kind: Kind::Count,
    rollup: false,
    karpenter: "karpenter_nodeclaims_terminated_total",
};
pub const NODECLAIMS_DISRUPTED: Metric = Metric {
    name: "NodeClaimsDisrupted",
    unit: "Count",
    dimensions: &["Cluster", "Reason"],
    kind: Kind::Count,
    rollup: false,
    karpenter: "karpenter_nodeclaims_disrupted_total{reason}",
};
pub const LAUNCH_FAILURES: Metric = Metric {
    name: "CloudProviderErrors",
    unit: "Count",
    dimensions: &["Cluster", "Error"],
    kind: Kind::Count,
    rollup: true,
    karpenter: "karpenter_cloudprovider_errors_total{method=\"Create\",error}",
};
pub const INTERRUPTIONS: Metric = Metric {
    name: "InterruptionReceivedMessages",
    unit: "Count",
    dimensions: &["Cluster", "MessageType"],
    kind: Kind::Count,
    rollup: false,
    karpenter: "karpenter_interruption_received_messages_total{message_type}",
};
pub const ERRORS: Metric = Metric {
    name: "ReconcileErrors",
    unit: "Count",
    dimensions: FUNCTION,
    kind: Kind::Count,
    rollup: false,
    karpenter: "controller_runtime_reconcile_errors_total",
};
pub const DURATION: Metric = Metric {
    name: "ReconcileDuration",
    unit: "Milliseconds",
    dimensions: FUNCTION,
    kind: Kind::State,
    rollup: false,
    karpenter:
        "controller_runtime_reconcile_time_seconds (provisioner: karpenter_provisioner_scheduling_duration_seconds)",
};

/// Every metric the functions emit.
pub const METRICS: [Metric; 11] = [
    PODS_PENDING,
    PODS_UNBOUND_TIME,
    NODECLAIMS,
    FLEET_COST,
    NODECLAIMS_CREATED,
    NODECLAIMS_TERMINATED,
    NODECLAIMS_DISRUPTED,
    LAUNCH_FAILURES,
    INTERRUPTIONS,
    ERRORS,
    DURATION,
];

/// Every phase, so a state that emptied reads 0 rather than its last value.
const PHASES: [Phase; 7] = [
    Phase::Launching,
    Phase::Launched,
    Phase::Registered,
    Phase::Initialized,
    Phase::Draining,
    Phase::Terminating,
    Phase::Terminated,
];

/// Metric values sharing one set of dimension values: one EMF document.
struct Document<'a> {
    dimensions: Vec<(&'static str, String)>,
    values: Vec<(&'a Metric, Value)>,
}

/// The metrics of one invocation as EMF documents, one per set of dimension values.
pub fn documents(function: &str, cluster: &str, report: &Report, latency: Duration, timestamp_ms: i64) -> Vec<Value> {
    let on = |extra: Option<(&'static str, String)>| {
        let mut d = vec![("Cluster", cluster.to_string())];
        d.extend(extra);
        d
    };
    let mut docs = vec![
        Document {
            dimensions: vec![("Function", function.to_string()), ("Cluster", cluster.to_string())],
            values: vec![(&ERRORS, json!(report.errors.len())), (&DURATION, json!(latency.as_secs_f64() * 1000.0))],
        },
        Document {
            dimensions: on(None),
            values: vec![
                (&PODS_PENDING, json!(report.pending_pods)),
                (&PODS_UNBOUND_TIME, json!(report.oldest_pending_seconds)),
                (&FLEET_COST, json!(report.fleet_cost_per_hour)),
                (&NODECLAIMS_TERMINATED, json!(report.terminations())),
            ],
        },
    ];
    for phase in PHASES {
        let n = report.claims_by_phase.get(&phase).copied().unwrap_or(0);
        docs.push(Document {
            dimensions: on(Some(("State", phase.to_string()))),
            values: vec![(&NODECLAIMS, json!(n))],
        });
    }
    let mut created: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for launch in report.launches() {
        *created.entry(launch.nodepool.as_str()).or_default() += 1;
    }
    for (pool, n) in created {
        docs.push(Document {
            dimensions: on(Some(("NodePool", pool.to_string()))),
            values: vec![(&NODECLAIMS_CREATED, json!(n))],
        });
    }
    // Every reason, zeros included: a failure-rate alarm needs its denominator's periods.
    for why in LaunchFailure::ALL {
        let n = report.launch_failures.get(why.as_str()).copied().unwrap_or(0);
        docs.push(Document {
            dimensions: on(Some(("Error", why.as_str().to_string()))),
            values: vec![(&LAUNCH_FAILURES, json!(n))],
        });
    }
    for (reason, n) in &report.disruptions {
        docs.push(Document {
            dimensions: on(Some(("Reason", format!("{reason:?}")))),
            values: vec![(&NODECLAIMS_DISRUPTED, json!(n))],
        });
    }
    for (kind, n) in &report.interruptions {
        docs.push(Document {
            dimensions: on(Some(("MessageType", kind.clone()))),
            values: vec![(&INTERRUPTIONS, json!(n))],
        });
    }
    // Every document names its function as a plain field (a dimension only where declared), so
    // Logs Insights and tests can tell whose invocation wrote it.
    docs.into_iter()
        .map(|d| {
            let mut doc = emf(d, timestamp_ms);
            doc["Function"] = Value::String(function.to_string());
            doc
        })
        .collect()
}

fn emf(doc: Document<'_>, timestamp_ms: i64) -> Value {
    let names: Vec<&str> = doc.dimensions.iter().map(|(k, _)| *k).collect();
    let mut sets = vec![names.clone()];
    if doc.values.iter().any(|(m, _)| m.rollup) && names != CLUSTER {
        sets.push(CLUSTER.to_vec());
    }
    let mut out = Map::new();
    out.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": sets,
                "Metrics": doc.values.iter().map(|(m, _)| json!({"Name": m.name, "Unit": m.unit})).collect::<Vec<_>>(),
            }],
        }),
    );
    for (k, v) in doc.dimensions {
        out.insert(k.into(), Value::String(v));
    }
    for (m, v) in doc.values {
        debug_assert_eq!(m.dimensions, names.as_slice(), "{} is declared with its dimensions", m.name);
        out.insert(m.name.into(), v);
    }
    Value::Object(out)
}

/// Prints each document on its own stdout line, where the Lambda log agent picks EMF up, and
/// returns them (the handlers hand them to their callers, which is how tests read them).
pub fn publish(function: &str, cluster: &str, report: &Report, latency: Duration) -> Vec<Value> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let docs = documents(function, cluster, report, latency, now.as_millis() as i64);
    for d in &docs {
        println!("{d}");
    }
    docs
}

/// The value of `metric` in `docs` whose dimensions include every `(name, value)` of `on`: for
/// tests and benchmarks reading what a handler published.
pub fn value<'a>(docs: &'a [Value], metric: &Metric, on: &[(&str, &str)]) -> Option<&'a Value> {
    docs.iter().filter(|d| on.iter().all(|(k, v)| d[*k] == *v)).find_map(|d| d.get(metric.name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_core::nodeclaim::Reason;

    #[test]
    fn every_metric_is_declared_with_its_dimensions_and_valued() {
        let mut report =
            Report { pending_pods: 7, oldest_pending_seconds: 95.5, fleet_cost_per_hour: 1.25, ..Report::default() };
        report.claims_by_phase.insert(Phase::Launched, 3);
        report.disruptions.insert(Reason::SpotInterrupted, 1);
        report.interruptions.insert("spot_interrupted".into(), 1);
        report.launch_failures.insert("InsufficientInstanceCapacity".into(), 2);
        let docs = documents("provisioner", "prod", &report, Duration::from_millis(42), 1_700_000_000_000);
        let mut seen = std::collections::BTreeSet::new();
        for doc in &docs {
            let directive = &doc["_aws"]["CloudWatchMetrics"][0];
            assert_eq!(directive["Namespace"], NAMESPACE);
            let sets: Vec<Vec<&str>> = directive["Dimensions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|set| set.as_array().unwrap().iter().map(|d| d.as_str().unwrap()).collect())
                .collect();
            let dims = sets[0].clone();
            for d in &dims {
                assert!(doc[*d].is_string(), "dimension {d} has a value in {doc}");
            }
            for m in directive["Metrics"].as_array().unwrap() {
                let name = m["Name"].as_str().unwrap();
                let def = METRICS.iter().find(|x| x.name == name).unwrap_or_else(|| panic!("{name} is in METRICS"));
                assert_eq!(def.dimensions, dims.as_slice(), "{name}");
                let rolled = if def.rollup { vec![dims.clone(), CLUSTER.to_vec()] } else { vec![dims.clone()] };
                assert_eq!(sets, rolled, "{name}'s dimension sets");
                assert_eq!(m["Unit"], def.unit);
                assert!(doc[name].is_number(), "{name} has a value");
                seen.insert(name);
            }
        }
        // Created needs a launch; the rest are all here.
        assert_eq!(seen.len(), METRICS.len() - 1, "{seen:?}");
        assert_eq!(value(&docs, &PODS_PENDING, &[]), Some(&json!(7)));
        assert_eq!(value(&docs, &PODS_UNBOUND_TIME, &[]), Some(&json!(95.5)));
        assert_eq!(value(&docs, &DURATION, &[("Function", "provisioner")]), Some(&json!(42.0)));
        assert_eq!(value(&docs, &NODECLAIMS, &[("State", "Launched")]), Some(&json!(3)));
        assert_eq!(value(&docs, &NODECLAIMS, &[("State", "Draining")]), Some(&json!(0)));
        assert_eq!(value(&docs, &NODECLAIMS_DISRUPTED, &[("Reason", "SpotInterrupted")]), Some(&json!(1)));
        assert_eq!(value(&docs, &INTERRUPTIONS, &[("MessageType", "spot_interrupted")]), Some(&json!(1)));
        assert_eq!(value(&docs, &LAUNCH_FAILURES, &[("Error", "InsufficientInstanceCapacity")]), Some(&json!(2)));
        assert_eq!(value(&docs, &LAUNCH_FAILURES, &[("Error", "CloudError")]), Some(&json!(0)));
        assert!(docs.iter().all(|d| d["Cluster"] == "prod" && d["Function"] == "provisioner"));
    }

    #[test]
    fn the_operations_guide_lists_every_metric_with_its_karpenter_name() {
        let guide = include_str!("../../../docs/operations.md");
        for m in METRICS {
            let row = format!("| `{}` | {} |", m.name, m.dimensions.join(", "));
            let line = guide.lines().find(|l| l.starts_with(&format!("| `{}` |", m.name)));
            let line = line.unwrap_or_else(|| panic!("docs/operations.md has a row for {}", m.name));
            assert!(line.starts_with(&row) || line.contains(" (and Cluster alone) |"), "{row}… in {line}");
            let karpenter = m.karpenter.split(' ').next().unwrap_or_default().split('{').next().unwrap_or_default();
            assert!(line.contains(karpenter), "{}'s row names {karpenter}: {line}", m.name);
        }
    }
}
