use super::*;

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::parse("test.yaml", text, None)
}

/// The EC2NodeClass every test scenario's manifests start with (indented for `manifests: |`).
pub(crate) const NODECLASS: &str = r#"  apiVersion: dovetail.dev/v1
  kind: EC2NodeClass
  metadata: {name: default}
  spec:
    role: R
    amiSelectorTerms: [{alias: al2023@latest}]
    subnetSelectorTerms: [{tags: {a: b}}]
    securityGroupSelectorTerms: [{tags: {a: b}}]
  ---
"#;

/// A minimal valid scenario, to break one field at a time.
fn base() -> String {
    format!("name: t\nmanifests: |\n{NODECLASS}{BASE_REST}")
}

const BASE_REST: &str = r#"  apiVersion: dovetail.dev/v1
  kind: NodePool
  metadata: {name: default}
  spec:
    template:
      spec:
        nodeClassRef: {group: dovetail.dev, kind: EC2NodeClass, name: default}
        requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]
  ---
  apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, namespace: shop}
  spec:
    replicas: 0
    selector: {matchLabels: {app: web}}
    template:
      metadata: {labels: {app: web}}
      spec:
        containers: [{name: web, image: x, resources: {requests: {cpu: 500m, memory: 1Gi}}}]
  ---
  apiVersion: batch/v1
  kind: Job
  metadata: {name: etl, namespace: shop}
  spec:
    parallelism: 3
    template:
      spec:
        restartPolicy: Never
        containers: [{name: etl, image: x, resources: {requests: {cpu: "1"}}}]
timeline:
  - {at: 1h, scale: {deployment: shop/web, replicas: 4}}
  - {at: 2h, every: 30m, until: 4h, submit: {job: shop/etl, duration: 10m}}
"#;

fn err(text: &str) -> String {
    parse(text).expect_err("should be rejected").to_string()
}

#[test]
fn every_builtin_scenario_loads() {
    for name in builtin::NAMES {
        let s = Scenario::builtin(name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.name, name);
        assert!(!s.description.is_empty(), "{name}");
        assert!(s.cluster_autoscaler.is_some(), "{name} compares against Cluster Autoscaler");
        assert!(!s.timeline.is_empty(), "{name}");
    }
    let e = Scenario::builtin("nope").unwrap_err().to_string();
    assert!(e.contains("nope") && e.contains("black-friday"), "{e}");
}

#[test]
fn templates_come_from_the_controllers() {
    let s = parse(&base()).unwrap();
    let web = &s.cluster.replicas["Deployment/shop/web"];
    assert_eq!(web.replicas, 0);
    assert_eq!(web.template.requests.cpu, 500);
    assert!(web.template.name.starts_with("web-"), "{}", web.template.name);
    assert!(!web.template.annotations.contains_key("sim.dovetail.dev/workload"));
    let etl = &s.cluster.jobs["shop/etl"];
    assert_eq!((etl.parallelism, etl.completions), (3, 3));
    let events = timeline::expand(&s.timeline, s.world.start, s.duration);
    assert_eq!(events.len(), 5, "one scale and four submissions");
}

/// NodeOverlays in a scenario's manifests reach the simulated cluster (the functions price with
/// them); a bad one is refused naming its field.
#[test]
fn overlays_come_from_the_manifests() {
    let overlay = "  apiVersion: dovetail.dev/v1alpha1\n  kind: NodeOverlay\n  metadata: {name: deal}\n  spec:\n    priceAdjustment: \"-28%\"\n    requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]\n  ---\n";
    let s = parse(&format!("name: t\nmanifests: |\n{NODECLASS}{overlay}{BASE_REST}")).unwrap();
    let names: Vec<&str> = s.cluster.overlays.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["deal"]);
    assert_eq!(s.cluster.overlays[0].price, Some(dovetail_core::overlay::PriceChange::Percent(-28.0)));
    let bad = err(&format!("name: t\nmanifests: |\n{NODECLASS}{}{BASE_REST}", overlay.replace("-28%", "28%")));
    assert!(bad.contains("NodeOverlay deal") && bad.contains("spec.priceAdjustment"), "{bad}");
}

#[test]
fn errors_name_the_field() {
    let cases = [
        (base().replace("at: 1h,", "at: 1x,"), "test.yaml: timeline[0].at: \"1x\" is not a valid duration"),
        (base().replace("deployment: shop/web", "deployment: shop/api"), "timeline[0].scale.deployment: no Deployment shop/api"),
        (base().replace("job: shop/etl, duration: 10m", "job: shop/etl"), "timeline[1].submit.duration: missing"),
        (base().replace("every: 30m,", "every: 30m, cron: \"* * * * *\","), "timeline[1]: every and cron are exclusive"),
        (base().replace("{at: 1h, scale: {deployment: shop/web, replicas: 4}}", "{at: 1h}"), "timeline[0]: needs exactly one action"),
        (format!("{}world: {{bootTime: {{min: 60s, max: 30s}}}}\n", base()), "world.bootTime.max: 30s is shorter than min 60s"),
        (format!("{}world: {{interruptionRate: -1}}\n", base()), "world.interruptionRate: -1 is not between 0"),
        (format!("{}world: {{zones: [mars-1a]}}\n", base()), "world.zones[0]: \"mars-1a\""),
        (format!("{}start: yesterday\n", base()), "start: \"yesterday\" is not a UTC time"),
        (
            format!("{}clusterAutoscaler: {{nodeGroups: [{{name: a, instanceTypes: [m5.large, c9.huge], maxSize: 3}}]}}\n", base()),
            "clusterAutoscaler.nodeGroups[0].instanceTypes[1]: \"c9.huge\" is not an EC2 instance type",
        ),
        (
            format!("{}clusterAutoscaler: {{nodeGroups: [{{name: a, instanceTypes: [m5.large], maxSize: 3, capacityType: cheap}}]}}\n", base()),
            "clusterAutoscaler.nodeGroups[0].capacityType: \"cheap\" is neither spot nor on-demand",
        ),
        (
            format!("{}clusterAutoscaler: {{nodeGroups: [{{name: a, instanceTypes: [m5.large], maxSize: 0}}]}}\n", base()),
            "clusterAutoscaler.nodeGroups[0].maxSize",
        ),
        (base().replace("name: t\n", "name: t\nspeed: 3\n"), "unknown field `speed`"),
        (base().replace("replicas: 4}", "replicas: many}"), "timeline[0].scale.replicas: invalid type"),
        (base().replace("cpu: 500m", "cpu: 500x"), "manifests: document 3 (Deployment shop/web): spec.template.spec.containers[0].resources.requests.cpu"),
        (base().replace("kind: NodePool", "kind: Nodepool"), "no NodePool"),
        (
            base().replace("replicas: 4}", "replicas: 100000000}"),
            "test.yaml: timeline[0].scale.replicas: 100000000 pods is more than the supported 1000000 pods per plan",
        ),
        (
            base().replace("duration: 10m}", "duration: 10m, count: 1000, parallelism: 2000}"),
            "test.yaml: timeline[1].submit: count × parallelism: 2000000 pods is more than the supported 1000000 pods per plan",
        ),
        (
            base().replace("replicas: 0\n", "replicas: 100000000\n"),
            "test.yaml: manifests: document 3 (Deployment shop/web): spec.replicas: 100000000 pods is more than",
        ),
        (
            base().replace("kind: EC2NodeClass, name: default}", "kind: EC2NodeClass, name: gpu}"),
            "manifests: NodePool default: spec.template.spec.nodeClassRef.name: EC2NodeClass \"gpu\" is not in the manifests (there are: default)",
        ),
        (base().replace("  parallelism: 3\n", "  parallelism: 3\n    completions: x\n"), "manifests"),
    ];
    for (text, want) in cases {
        let got = err(&text);
        assert!(got.contains(want), "expected {want:?} in:\n{got}");
    }
}

#[test]
fn jobs_without_a_duration_are_refused_when_the_timeline_does_not_submit_them() {
    let text = base().replace("  - {at: 2h, every: 30m, until: 4h, submit: {job: shop/etl, duration: 10m}}\n", "");
    let e = err(&text);
    assert!(e.contains("Job shop/etl: metadata.annotations[sim.dovetail.dev/duration]: missing"), "{e}");
}

#[test]
fn scenario_files_over_the_ceiling_are_refused_before_reading() {
    let dir = std::env::temp_dir().join(format!("dovetail-scenario-ceiling-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("huge.yaml");
    // Sparse: 17 MiB long, nothing written.
    std::fs::File::create(&path).unwrap().set_len(17 << 20).unwrap();
    let e = Scenario::load(&path).unwrap_err().to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(e, format!("{}: 17 MiB is more than the supported 16 MiB per scenario file", path.display()));
}

#[test]
fn reservations_are_read_and_bad_ones_named_by_field() {
    let with = |r: &str| format!("{}world: {{reservations: [{r}]}}\n", base());
    let s = parse(&with(
        "{id: cr-0a1, instanceType: p5.48xlarge, zone: us-east-1b, count: 2, type: capacity-block, start: 6h, end: 18h, tags: {team: ml}}",
    ))
    .unwrap();
    let r = &s.world.reservations[0];
    let start = s.world.start;
    assert_eq!(
        (r.id.as_str(), r.instance_type.as_str(), r.zone.as_str(), r.count),
        ("cr-0a1", "p5.48xlarge", "us-east-1b", 2)
    );
    assert_eq!(r.kind, ReservationKind::CapacityBlock);
    assert_eq!(
        (r.start, r.end),
        (Some(start.plus(Duration::from_secs(6 * 3600))), Some(start.plus(Duration::from_secs(18 * 3600))))
    );
    assert_eq!(r.tags.get("team").map(String::as_str), Some("ml"));
    let odcr = parse(&with("{id: cr-0b2, instanceType: m5.large, zone: us-east-1a, count: 1}")).unwrap();
    assert_eq!((odcr.world.reservations[0].kind, odcr.world.reservations[0].end), (ReservationKind::Default, None));

    for (r, wanted) in [
        ("{id: r-1, instanceType: m5.large, zone: us-east-1a, count: 1}", "world.reservations[0].id: \"r-1\" is not a capacity reservation id"),
        ("{id: cr-1, instanceType: m5.huge, zone: us-east-1a, count: 1}", "world.reservations[0].instanceType: \"m5.huge\""),
        ("{id: cr-1, instanceType: m5.large, zone: mars-1a, count: 1}", "world.reservations[0].zone: \"mars-1a\" is not one of the world's zones"),
        ("{id: cr-1, instanceType: m5.large, zone: us-east-1a, count: 0}", "world.reservations[0].count: must be at least 1"),
        ("{id: cr-1, instanceType: m5.large, zone: us-east-1a, count: 1, type: spot}", "world.reservations[0].type: \"spot\" is neither"),
        ("{id: cr-1, instanceType: m5.large, zone: us-east-1a, count: 1, type: capacity-block}", "world.reservations[0].end: missing"),
        ("{id: cr-1, instanceType: m5.large, zone: us-east-1a, count: 1, start: 2h, end: 1h}", "world.reservations[0].end: must come after start"),
        ("{id: cr-1, instanceType: m5.large, zone: us-east-1a, count: 1}, {id: cr-1, instanceType: m5.large, zone: us-east-1a, count: 1}", "world.reservations[1].id: cr-1 is used twice"),
    ] {
        let e = err(&with(r));
        assert!(e.contains(wanted), "{r}: {e}");
    }
}
