use std::time::Duration;

use crate::driver::*;
use crate::report;
use crate::scenario::tests::NODECLASS;
use crate::scenario::Scenario;

fn both(scenario: &Scenario, hours: u64, seed: Option<u64>) -> Vec<Run> {
    [Policy::Dovetail, Policy::ClusterAutoscaler]
        .into_iter()
        .map(|policy| {
            let opts = Options { duration: Some(Duration::from_secs(hours * 3600)), seed, ..Options::new(policy) };
            run(scenario, opts).expect("the scenario has node groups")
        })
        .collect()
}

fn outputs(runs: &[Run]) -> (String, String, String) {
    (report::table(runs), report::json(runs).to_string(), report::html(runs))
}

#[test]
fn same_seed_gives_byte_identical_output() {
    let scenario = Scenario::builtin("batch-from-zero").unwrap();
    let a = outputs(&both(&scenario, 3, None));
    let b = outputs(&both(&scenario, 3, None));
    assert!(a.0 == b.0, "tables differ:\n{}\n---\n{}", a.0, b.0);
    assert!(a.1 == b.1, "JSON differs");
    assert!(a.2 == b.2, "HTML differs");
    let c = outputs(&both(&scenario, 3, Some(7)));
    assert_ne!(a.1, c.1, "another seed samples other boot times, run times and interruptions");
}

#[test]
fn dovetail_provisions_consolidates_and_explains() {
    let scenario = Scenario::builtin("eight-pods").unwrap();
    let runs = both(&scenario, 2, None);
    let (d, ca) = (report::summarize(&runs[0]), report::summarize(&runs[1]));
    // Every pod ran, the job finished, nothing was left behind.
    for s in [&d, &ca] {
        assert_eq!((s.pods_created, s.pending.still_pending, s.jobs_finished), (8, 0, 1), "{s:?}");
        assert_eq!(s.nodes_terminated, s.nodes_launched, "{} left nodes running", s.policy);
    }
    // Right-sized nodes: fewer than one per pod, and the empty ones go once the job is done.
    assert!(d.nodes_launched < 8 && d.consolidations >= 1, "{d:?}");
    assert!(d.cost < ca.cost, "dovetail ${} vs cluster-autoscaler ${}", d.cost, ca.cost);
    // Pods wait for a boot (30-60 s) plus the batching window, never much more.
    assert!(d.pending.p99_s < 75.0, "{:?}", d.pending);
    let f = runs[0].functions.as_ref().unwrap();
    assert_eq!(f.errors, 0, "{:?}", f.first_errors);
    assert!(f.actions.get("Launch").is_some_and(|n| *n >= 1));
    assert_eq!(runs[0].claim_conflicts, 0);
}

/// One spot instance type for both policies, so both meet interruptions at the same rate.
fn spot_only() -> String {
    format!("{SPOT_HEAD}{NODECLASS}{SPOT_REST}")
}

const SPOT_HEAD: &str = r#"
name: spot-only
seed: 3
world: {interruptionRate: 2000}
manifests: |
"#;

const SPOT_REST: &str = r#"  apiVersion: dovetail.dev/v1
  kind: NodePool
  metadata: {name: spot}
  spec:
    template:
      spec:
        nodeClassRef: {group: dovetail.dev, kind: EC2NodeClass, name: default}
        requirements:
          - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
          - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}
    disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 1m}
  ---
  apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, namespace: default}
  spec:
    replicas: 6
    selector: {matchLabels: {app: web}}
    template:
      metadata: {labels: {app: web}}
      spec:
        containers: [{name: web, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
clusterAutoscaler:
  nodeGroups:
    - {name: spot, instanceTypes: [m5.xlarge], capacityType: spot, maxSize: 10}
"#;

#[test]
fn spot_interruptions_are_drained_before_the_instance_goes() {
    let scenario = Scenario::parse("spot-only.yaml", &spot_only(), None).unwrap();
    let runs = both(&scenario, 6, None);
    let (d, ca) = (report::summarize(&runs[0]), report::summarize(&runs[1]));
    assert!(d.spot_warnings > 0 && d.interruptions_handled > 0, "{d:?}");
    assert!(d.evictions > 0, "the interrupted nodes were drained through the Eviction API");
    assert!(
        ca.spot_reclaimed > 0 && ca.pods_lost > 0,
        "without interruption handling, pods go down with their node: {ca:?}"
    );
    assert!(d.pods_lost < ca.pods_lost, "dovetail lost {} pods, cluster-autoscaler {}", d.pods_lost, ca.pods_lost);
    let f = runs[0].functions.as_ref().unwrap();
    assert_eq!(f.errors, 0, "{:?}", f.first_errors);
}

#[test]
fn compare_needs_node_groups() {
    let mut scenario = Scenario::builtin("eight-pods").unwrap();
    scenario.cluster_autoscaler = None;
    let e = run(&scenario, Options::new(Policy::ClusterAutoscaler)).unwrap_err().to_string();
    assert!(e.contains("clusterAutoscaler"), "{e}");
}

#[test]
fn the_cost_limits_hold_through_the_peak_and_the_report_says_so() {
    // The scenario's day to 12:00, three hours into its peak: the whole day takes long in a debug
    // build, and the peak is where the limits bind.
    let scenario = Scenario::builtin("cost-cap").unwrap();
    let opts = Options { duration: Some(Duration::from_secs(12 * 3600)), ..Options::new(Policy::Dovetail) };
    let run = run(&scenario, opts).expect("a Dovetail run");
    let s = report::summarize(&run);
    let limits: Vec<(&str, f64, bool)> = s.cost_limits.iter().map(|l| (l.name.as_str(), l.limit, l.held)).collect();
    assert_eq!(limits, [("burst", 1.0, true), ("web", 2.0, true), (CLUSTER_COST_LIMIT, 2.5, true)], "{s:#?}");
    // They bound: the peak wants more than $2.50/h buys, so the capacity came within a node's price
    // of the web pool's and the cluster's limits, the pools were told, and pods still wait.
    let peak = |name: &str| s.cost_limits.iter().find(|l| l.name == name).unwrap().peak;
    assert!(peak(CLUSTER_COST_LIMIT) > 2.3 && peak("web") > 1.8, "{:#?}", s.cost_limits);
    assert!(run.events.get("CostLimitReached").is_some_and(|n| *n > 0), "{:?}", run.events);
    assert!(s.pending.still_pending > 0, "{:?}", s.pending);
    let f = run.functions.as_ref().unwrap();
    assert_eq!(f.errors, 0, "{:?}", f.first_errors);
    let table = report::table(std::slice::from_ref(&run));
    assert!(table.contains("NodePool web: peak $") && table.contains("of $2.0000/h: held"), "{table}");
    assert!(table.contains("whole cluster: peak $") && table.contains("of $2.5000/h: held"), "{table}");
}

#[test]
fn the_savings_day_serves_from_the_reservation_buys_at_the_discount_and_keeps_to_its_limits() {
    // To 14:00, six hours into the peak (the whole day takes long in a debug build).
    let scenario = Scenario::builtin("savings").unwrap();
    let opts = Options { duration: Some(Duration::from_secs(14 * 3600)), ..Options::new(Policy::Dovetail) };
    let run = run(&scenario, opts).expect("a Dovetail run");
    let s = report::summarize(&run);
    let v = s.savings.clone().unwrap_or_else(|| panic!("no savings section: {s:#?}"));
    let f = run.functions.as_ref().unwrap();
    assert_eq!(f.errors, 0, "{:?}", f.first_errors);

    // The reservation (four m6i.xlarge) served nodes, never more than it holds, and what it saved
    // is those hours at the on-demand price ($0.192/h), less their nominal price.
    let reserved: Vec<_> = run.instances.iter().filter(|i| i.reserved).collect();
    assert!(!reserved.is_empty(), "{:#?}", run.instances);
    assert!(reserved.iter().all(|i| i.instance_type == "m6i.xlarge" && i.list_price == 0.192), "{reserved:#?}");
    assert!(v.reserved_hours > 0.0 && v.reserved_hours <= 4.0 * 14.0, "{v:?}");
    assert!((v.reserved_hours + v.reserved_unused_hours - 4.0 * 14.0).abs() < 1e-6, "{v:?}");
    // The night's eight pods run in the reservation from the first minute (three m6i.xlarge hold
    // them, though the plan would buy other types for them): only the fourth instance idles,
    // until the 08:00 peak takes it.
    assert!(v.reserved_unused_hours < 8.1, "{v:?}");
    let on_demand_equivalent: f64 = reserved.iter().map(|i| (0.192 - i.price) * i.hours).sum();
    assert!((v.reservations - on_demand_equivalent).abs() < 1e-9 && v.reservations > 0.0, "{v:?}");

    // The overflow was bought under the Savings Plan: 28% off the list price of what it covers.
    let covered = |t: &str| ["m6i.", "m7i.", "c6i.", "c7i."].iter().any(|f| t.starts_with(f));
    let bought: Vec<_> = run.instances.iter().filter(|i| !i.reserved).collect();
    assert!(bought.iter().any(|i| covered(&i.instance_type)), "{bought:#?}");
    for i in &bought {
        let expected = if covered(&i.instance_type) { i.list_price * 0.72 } else { i.list_price };
        assert!((i.price - expected).abs() < 1e-9, "{} at ${} of ${}", i.instance_type, i.price, i.list_price);
    }
    let discounts: f64 = bought.iter().map(|i| (i.list_price - i.price) * i.hours).sum();
    assert!((v.discounts - discounts).abs() < 1e-9 && v.discounts > 0.0, "{v:?}");
    assert!((v.list_cost - v.cost - v.discounts - v.reservations).abs() < 1e-9, "{v:?}");
    assert!((v.cost - s.cost).abs() < 1e-12, "{v:?} vs {}", s.cost);

    // The limits held at every simulated minute.
    let limits: Vec<(&str, f64, bool)> = s.cost_limits.iter().map(|l| (l.name.as_str(), l.limit, l.held)).collect();
    assert_eq!(limits, [("payments", 1.0, true), (CLUSTER_COST_LIMIT, 1.5, true)], "{:#?}", s.cost_limits);
    assert!(run.events.get("CostLimitReached").is_some_and(|n| *n > 0), "the pool's cap binds: {:?}", run.events);

    let table = report::table(std::slice::from_ref(&run));
    assert!(table.contains("dovetail — against list prices"), "{table}");
    assert!(table.contains(&format!("NodeOverlay discounts saved ${:.2}", v.discounts)), "{table}");
    let json = report::json(std::slice::from_ref(&run));
    assert_eq!(json["runs"][0]["summary"]["savings"]["reserved_hours"], serde_json::json!(v.reserved_hours));
}

#[test]
fn after_the_peak_the_reservation_keeps_the_pods_and_what_was_bought_goes() {
    // The savings day with its peak moved to 01:00–02:00 (a whole day takes long in a debug
    // build), then an hour of night. Consolidation keeps the reserved nodes (deleting one saves
    // nothing: the reservation is paid for either way) and takes away the on-demand ones, so the
    // reservation idles only in the first hour, when the night's eight pods need three of its four.
    let mut scenario = Scenario::builtin("savings").unwrap();
    scenario.timeline[0].at = Duration::from_secs(3600);
    scenario.timeline[1].at = Duration::from_secs(2 * 3600);
    let opts = Options { duration: Some(Duration::from_secs(3 * 3600)), ..Options::new(Policy::Dovetail) };
    let run = run(&scenario, opts).expect("a Dovetail run");
    let f = run.functions.as_ref().unwrap();
    assert_eq!(f.errors, 0, "{:?}", f.first_errors);
    let v = report::summarize(&run).savings.expect("a savings section");
    assert!((v.reserved_hours + v.reserved_unused_hours - 4.0 * 3.0).abs() < 1e-6, "{v:?}");
    assert!(v.reserved_unused_hours < 1.1, "{v:?}");
    let bought: Vec<_> = run.instances.iter().filter(|i| !i.reserved).collect();
    assert!(!bought.is_empty(), "{:#?}", run.instances);
    assert!(bought.iter().all(|i| i.hours < 1.25), "on-demand kept after the peak: {bought:#?}");
}

#[test]
fn the_baseline_is_billed_at_the_accounts_discounted_prices() {
    // A Savings Plan discounts the bill whoever launches: the Cluster Autoscaler's m6i.xlarge
    // group pays the NodeOverlay's price, and never runs in the reservation Dovetail targets.
    let scenario = Scenario::builtin("savings").unwrap();
    let opts = Options { duration: Some(Duration::from_secs(10 * 3600)), ..Options::new(Policy::ClusterAutoscaler) };
    let run = run(&scenario, opts).expect("the scenario has node groups");
    assert!(!run.instances.is_empty());
    for i in &run.instances {
        assert_eq!(i.instance_type, "m6i.xlarge");
        assert!(!i.reserved);
        assert!((i.list_price - 0.192).abs() < 1e-12 && (i.price - 0.192 * 0.72).abs() < 1e-9, "{i:?}");
    }
    let v = report::summarize(&run).savings.expect("a savings section");
    assert!(v.discounts > 0.0 && v.reserved_hours == 0.0 && (v.reserved_unused_hours - 40.0).abs() < 1e-9, "{v:?}");
}
