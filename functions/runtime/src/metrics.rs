//! CloudWatch Embedded Metric Format: a JSON log line that CloudWatch turns into metrics, so the
//! functions publish metrics without a PutMetricData call (or its latency and IAM permission).

use serde_json::{json, Value};
use std::time::Duration;

use dovetail_core::reconcile::Report;

pub const NAMESPACE: &str = "Dovetail";

/// The metrics of one invocation as one EMF document, dimensioned by function and cluster.
pub fn emf(function: &str, cluster: &str, report: &Report, latency: Duration, timestamp_ms: i64) -> Value {
    let metrics = [
        ("PendingPods", "Count", json!(report.pending_pods)),
        ("ClaimsLaunched", "Count", json!(report.launches().count())),
        ("ClaimsTerminated", "Count", json!(report.terminations())),
        ("Errors", "Count", json!(report.errors.len())),
        ("DecisionLatency", "Milliseconds", json!(latency.as_secs_f64() * 1000.0)),
        ("FleetCostPerHour", "None", json!(report.fleet_cost_per_hour)),
    ];
    let mut doc = json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [["Function", "Cluster"]],
                "Metrics": metrics.iter().map(|(n, u, _)| json!({"Name": n, "Unit": u})).collect::<Vec<_>>(),
            }],
        },
        "Function": function,
        "Cluster": cluster,
    });
    for (name, _, value) in metrics {
        doc[name] = value;
    }
    doc
}

/// Prints the document on its own stdout line, where the Lambda log agent picks EMF up.
pub fn publish(function: &str, cluster: &str, report: &Report, latency: Duration) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    println!("{}", emf(function, cluster, report, latency, now.as_millis() as i64));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_is_declared_and_valued() {
        let report = Report { pending_pods: 7, fleet_cost_per_hour: 1.25, ..Report::default() };
        let doc = emf("provisioner", "prod", &report, Duration::from_millis(42), 1_700_000_000_000);
        let declared = doc["_aws"]["CloudWatchMetrics"][0]["Metrics"].as_array().unwrap();
        assert_eq!(declared.len(), 6);
        for m in declared {
            let name = m["Name"].as_str().unwrap();
            assert!(doc.get(name).is_some_and(Value::is_number), "{name} has a value");
        }
        assert_eq!(doc["PendingPods"], 7);
        assert_eq!(doc["DecisionLatency"], 42.0);
        assert_eq!(doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0], json!(["Function", "Cluster"]));
        assert_eq!(doc["Cluster"], "prod");
    }
}
