//! Interruption handling: parsing of every EventBridge fixture and the decisions for each path
//! (spot warning, state change, Health scheduled change, capacity reservation warning, Capacity
//! Block expiration warning, rebalance under both policies), including duplicate delivery and
//! instances that are not Dovetail's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dovetail_core::catalog::{self, CapacityType, Catalog, OfferingKey, Reservation, ReservationKind};
use dovetail_core::cluster::{Cluster, Instance, ResolvedClass};
use dovetail_core::decision::{Action, Decision};
use dovetail_core::interruption::{decide, parse, Message, ParseError};
use dovetail_core::labels;
use dovetail_core::model::{cost_micros, Node, NodeClass, NodePool, OwnerKind, Pod, RebalancePolicy, LIMIT_COST};
use dovetail_core::nodeclaim::{Disruption, Launch, NodeClaim, Phase, Reason};
use dovetail_core::requirements::{Operator, Requirement};
use dovetail_core::resources::Resources;
use dovetail_core::scheduler::PlannedClaim;
use dovetail_core::time::Time;

const MIB: i64 = 1 << 20;
const INSTANCE: &str = "i-0abc1234def567890";
const NOW: Time = Time(1_773_480_413_000); // 2026-03-14T09:26:53Z, the spot fixture's time

// ---------------------------------------------------------------------------------------------
// Fixtures.

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/eventbridge")
}

fn fixture(name: &str) -> String {
    let path = fixture_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn parsed(name: &str) -> Message {
    parse(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Cluster builders.

fn catalog() -> &'static Catalog {
    catalog::embedded()
}

fn pool(name: &str) -> NodePool {
    let mut p = NodePool::new(name, "default");
    p.requirements.add(Requirement::new(labels::CAPACITY_TYPE, Operator::In, &["spot", "on-demand"]).unwrap());
    p.requirements.add(Requirement::new(labels::INSTANCE_FAMILY, Operator::In, &["m5", "c5", "r5"]).unwrap());
    p
}

fn app_pod(name: &str, cpu_m: i64, mem_mi: i64) -> Pod {
    let mut p = Pod::new("shop", name, Resources::new(cpu_m, mem_mi * MIB));
    p.owner = OwnerKind::ReplicaSet;
    p
}

fn daemon_pod(name: &str) -> Pod {
    let mut p = Pod::new("kube-system", name, Resources::new(50, 64 * MIB));
    p.owner = OwnerKind::DaemonSet;
    p
}

/// A registered node for a claim, labelled as the scheduler labels Dovetail's nodes.
fn node_for(claim: &NodeClaim, pods: Vec<Pod>) -> Node {
    let launch = claim.launch.as_ref().unwrap();
    let t = catalog().get(&launch.instance_type).unwrap();
    let mut labels: BTreeMap<String, String> = t.requirements.single_valued_labels();
    labels.insert(labels::ZONE.into(), launch.zone.clone());
    labels.insert(labels::CAPACITY_TYPE.into(), launch.capacity_type.as_str().into());
    labels.insert(labels::NODEPOOL.into(), claim.nodepool.clone());
    labels.insert(labels::KARPENTER_NODEPOOL.into(), claim.nodepool.clone());
    labels.insert(labels::NODECLAIM.into(), claim.name.clone());
    let name = claim.node_name.clone().unwrap();
    labels.insert(labels::HOSTNAME.into(), name.clone());
    let mut node = Node::new(&name, labels, t.allocatable(&Default::default()));
    node.pods = pods
        .into_iter()
        .map(|mut p| {
            p.node_name = Some(name.clone());
            Arc::new(p)
        })
        .collect();
    node
}

fn claim(name: &str, instance_id: &str, instance_type: &str, zone: &str, capacity: CapacityType) -> NodeClaim {
    let mut c = NodeClaim::launching(name, "default", "default", Time(NOW.0 - 3_600_000));
    c.phase = Phase::Initialized;
    c.version = 4;
    c.node_name = Some(format!("node-{name}"));
    c.launch = Some(Launch {
        instance_id: instance_id.into(),
        instance_type: instance_type.into(),
        zone: zone.into(),
        capacity_type: capacity,
        image_id: "ami-0123456789abcdef0".into(),
        subnet_id: "subnet-0a".into(),
        security_groups: vec!["sg-0a".into()],
        price: 0.04,
        launched_at: c.created_at,
    });
    c
}

/// One spot m5.large node in us-east-1a running three app pods and a daemon pod.
fn cluster() -> Cluster {
    let c = claim("default-00001", INSTANCE, "m5.large", "us-east-1a", CapacityType::Spot);
    let pods = vec![
        app_pod("cart-0", 500, 1024),
        app_pod("cart-1", 500, 1024),
        app_pod("web-0", 400, 512),
        daemon_pod("kube-proxy-x1"),
    ];
    let node = node_for(&c, pods);
    Cluster {
        now: NOW,
        claims: vec![c],
        nodes: vec![node],
        nodepools: vec![pool("default")],
        nodeclasses: vec![NodeClass { name: "default".into(), ..Default::default() }],
        ..Default::default()
    }
}

fn with_policy(mut cluster: Cluster, policy: RebalancePolicy) -> Cluster {
    cluster.nodepools[0].rebalance = policy;
    cluster
}

fn launches(ds: &[Decision]) -> Vec<&PlannedClaim> {
    ds.iter()
        .filter_map(|d| match &d.action {
            Some(Action::Launch(p)) => Some(p.as_ref()),
            _ => None,
        })
        .collect()
}

fn written(ds: &[Decision]) -> Vec<&NodeClaim> {
    ds.iter()
        .filter_map(|d| match &d.action {
            Some(Action::WriteClaim(c)) => Some(c.as_ref()),
            _ => None,
        })
        .collect()
}

fn position(ds: &[Decision], f: impl Fn(&Action) -> bool) -> Option<usize> {
    ds.iter().position(|d| d.action.as_ref().is_some_and(&f))
}

fn the_disruption(ds: &[Decision]) -> (&NodeClaim, &Disruption) {
    let w = written(ds);
    assert_eq!(w.len(), 1, "one claim write expected: {ds:#?}");
    (w[0], w[0].disruption.as_ref().expect("disruption set"))
}

/// The app pods of the interrupted node are all on planned replacement claims, daemon pods are not.
fn assert_pods_covered(ds: &[Decision], expected: &[&str]) {
    let mut covered: Vec<String> = launches(ds).iter().flat_map(|p| p.pods.iter().cloned()).collect();
    covered.sort();
    let mut expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(covered, expected, "{ds:#?}");
}

fn spot_message() -> Message {
    Message::SpotInterruption { instance_id: INSTANCE.into(), action: "terminate".into(), time: Some(NOW) }
}

const APP_PODS: [&str; 3] = ["shop/cart-0", "shop/cart-1", "shop/web-0"];

const BLOCK: &str = "cr-0b1234567890abcde";

/// The spot cluster's node running in capacity reservation `id` instead (as a reserved claim is
/// planned: capacity type `reserved` and the reservation's id among its requirements), with the
/// class selecting that reservation and `other` with one instance left, of the same type and zone.
fn in_reservation(id: &str, kind: ReservationKind, other: &str) -> Cluster {
    let mut cluster = cluster();
    let c = &mut cluster.claims[0];
    c.launch.as_mut().unwrap().capacity_type = CapacityType::Reserved;
    c.requirements.add(Requirement::single(labels::CAPACITY_TYPE, labels::CAPACITY_RESERVED));
    c.requirements.add(Requirement::single(labels::CAPACITY_RESERVATION_ID, id));
    cluster.nodes[0].labels.insert(labels::CAPACITY_TYPE.into(), labels::CAPACITY_RESERVED.into());
    cluster.nodes[0].labels.insert(labels::CAPACITY_RESERVATION_ID.into(), id.into());
    let pool = &mut cluster.nodepools[0].requirements;
    pool.remove(labels::CAPACITY_TYPE);
    pool.add(Requirement::new(labels::CAPACITY_TYPE, Operator::In, &["reserved", "spot", "on-demand"]).unwrap());
    let reservation = |id: &str, available| Reservation {
        id: id.into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        owner_id: "111122223333".into(),
        instance_match_criteria: "targeted".into(),
        kind,
        interruptible: kind == ReservationKind::Default,
        available,
        observed_at: NOW,
        end: (kind == ReservationKind::CapacityBlock).then(|| NOW.plus(Duration::from_secs(24 * 3600))),
    };
    cluster.resolved = vec![ResolvedClass {
        name: "default".into(),
        images: [("amd64".to_string(), "ami-1".to_string())].into(),
        subnets: vec!["subnet-1".into()],
        security_groups: vec!["sg-1".into()],
        instance_profile: Some("profile".into()),
        // EC2 still counts instances free in the one being reclaimed.
        reservations: vec![reservation(id, 5), reservation(other, 1)],
        ..Default::default()
    }];
    cluster
}

fn block_warning() -> Message {
    Message::CapacityBlockExpiry {
        reservation_id: BLOCK.into(),
        end: Some(NOW.plus(Duration::from_secs(40 * 60))),
        time: Some(NOW),
    }
}

fn reservation_of(p: &PlannedClaim) -> Option<&str> {
    p.labels.get(labels::CAPACITY_RESERVATION_ID).map(String::as_str)
}

// ---------------------------------------------------------------------------------------------
// Parsing.

#[test]
fn parses_spot_interruption_warning() {
    assert_eq!(
        parsed("spot-interruption.json"),
        Message::SpotInterruption { instance_id: INSTANCE.into(), action: "terminate".into(), time: Some(NOW) }
    );
}

#[test]
fn parses_rebalance_recommendation() {
    assert_eq!(
        parsed("rebalance-recommendation.json"),
        Message::RebalanceRecommendation { instance_id: INSTANCE.into() }
    );
}

#[test]
fn parses_state_changes() {
    for (file, state) in [
        ("state-change-stopping.json", "stopping"),
        ("state-change-terminated.json", "terminated"),
        ("state-change-running.json", "running"),
    ] {
        assert_eq!(parsed(file), Message::StateChange { instance_id: INSTANCE.into(), state: state.into() }, "{file}");
    }
}

#[test]
fn parses_capacity_reservation_interruption() {
    assert_eq!(
        parsed("capacity-reservation-interruption.json"),
        Message::CapacityReservationInterruption {
            instance_id: INSTANCE.into(),
            time: dovetail_core::interruption::parse_rfc3339("2026-03-14T10:00:00Z")
        }
    );
}

#[test]
fn parses_capacity_block_expiration_warning_in_both_spellings() {
    let want = Message::CapacityBlockExpiry {
        reservation_id: BLOCK.into(),
        end: dovetail_core::interruption::parse_rfc3339("2026-03-14T11:30:00Z"),
        time: dovetail_core::interruption::parse_rfc3339("2026-03-14T10:50:00Z"),
    };
    assert_eq!(parsed("capacity-block-expiration-warning.json"), want);
    // The EventBridge event list's spelling, without "Reservation".
    let body = fixture("capacity-block-expiration-warning.json")
        .replace("Capacity Block Reservation Expiration Warning", "Capacity Block Expiration Warning");
    assert_eq!(parse(&body), Ok(want.clone()));
    assert_eq!(want.instance_ids(), Vec::<&str>::new());
    assert_eq!(want.reservation_id(), Some(BLOCK));
    assert_eq!(want.kind(), "capacity_block_expiring");
    // An unreadable end or time is not an error: the drain then counts from what is known.
    let body = fixture("capacity-block-expiration-warning.json").replace("2026-03-14T11:30:00Z", "soon");
    assert!(matches!(parse(&body), Ok(Message::CapacityBlockExpiry { end: None, time: Some(_), .. })));
    // The block's other events are not warnings Dovetail acts on.
    let body = fixture("capacity-block-expiration-warning.json")
        .replace("Capacity Block Reservation Expiration Warning", "Capacity Block Reservation Delivered");
    assert!(matches!(parse(&body), Ok(Message::Unknown { .. })));
}

#[test]
fn a_capacity_block_warning_without_a_reservation_id_names_the_message_and_the_field() {
    let e = parse(&fixture("malformed-capacity-block-missing-reservation-id.json")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "EventBridge message 7f2c1a3e-5b1d-4c0a-9e2f-0a1b2c3d4e0d: field `detail.capacity-reservation-id` is missing"
    );
    let body = fixture("capacity-block-expiration-warning.json").replace(
        "\"capacity-reservation-id\": \"cr-0b1234567890abcde\"",
        "\"capacity-reservation-id\": \"i-0abc1234def567890\"",
    );
    assert_eq!(
        parse(&body).unwrap_err().to_string(),
        "EventBridge message 7f2c1a3e-5b1d-4c0a-9e2f-0a1b2c3d4e0c: field `detail.capacity-reservation-id` is not a \
         capacity reservation id (cr-…)"
    );
}

#[test]
fn parses_health_scheduled_change_with_every_affected_instance() {
    assert_eq!(
        parsed("health-scheduled-change.json"),
        Message::ScheduledChange {
            instance_ids: vec![INSTANCE.into(), "i-0fff0000aaaa11112".into()],
            event_type_code: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED".into(),
            start_time: Some("Sat, 21 Mar 2026 08:00:00 GMT".into()),
        }
    );
}

#[test]
fn health_events_of_other_services_or_categories_are_unknown() {
    assert_eq!(
        parsed("health-issue-other-service.json"),
        Message::Unknown { source: "aws.health".into(), detail_type: "AWS Health Event".into() }
    );
    // EC2, but an issue rather than a scheduled change: nothing to drain for.
    let body = fixture("health-scheduled-change.json").replace("\"scheduledChange\"", "\"issue\"");
    assert!(matches!(parse(&body), Ok(Message::Unknown { .. })));
}

#[test]
fn unknown_sources_and_detail_types_are_not_errors() {
    assert_eq!(
        parsed("unknown-autoscaling.json"),
        Message::Unknown { source: "aws.autoscaling".into(), detail_type: "EC2 Instance Launch Successful".into() }
    );
    // The exact strings matter: a near miss is unknown, not a spot warning.
    let body = fixture("spot-interruption.json")
        .replace("EC2 Spot Instance Interruption Warning", "EC2 Spot Instance Interruption");
    assert!(matches!(parse(&body), Ok(Message::Unknown { .. })));
    let body = fixture("spot-interruption.json").replace("\"aws.ec2\"", "\"custom.ec2\"");
    assert!(matches!(parse(&body), Ok(Message::Unknown { .. })));
}

#[test]
fn malformed_json_is_an_error_for_that_message() {
    let e = parse(&fixture("malformed-truncated.json")).unwrap_err();
    assert!(matches!(e, ParseError::Json(_)), "{e:?}");
    assert!(e.to_string().contains("not a JSON EventBridge event"), "{e}");
    assert!(matches!(parse("[1, 2]"), Err(ParseError::Json(_))));
    assert!(matches!(parse(""), Err(ParseError::Json(_))));
}

#[test]
fn missing_instance_id_names_the_message_and_the_field() {
    let e = parse(&fixture("malformed-spot-missing-instance-id.json")).unwrap_err();
    assert_eq!(
        e,
        ParseError::Field {
            id: Some("7f2c1a3e-5b1d-4c0a-9e2f-0a1b2c3d4e0a".into()),
            field: "detail.instance-id",
            problem: "missing"
        }
    );
    assert_eq!(
        e.to_string(),
        "EventBridge message 7f2c1a3e-5b1d-4c0a-9e2f-0a1b2c3d4e0a: field `detail.instance-id` is missing"
    );
}

#[test]
fn every_known_type_requires_its_fields() {
    let cases = [
        ("rebalance-recommendation.json", "\"instance-id\"", "detail.instance-id"),
        ("state-change-stopping.json", "\"state\"", "detail.state"),
        ("state-change-stopping.json", "\"instance-id\"", "detail.instance-id"),
        ("capacity-reservation-interruption.json", "\"instance-id\"", "detail.instance-id"),
        ("capacity-block-expiration-warning.json", "\"capacity-reservation-id\"", "detail.capacity-reservation-id"),
        ("spot-interruption.json", "\"instance-action\"", "detail.instance-action"),
        ("health-scheduled-change.json", "\"affectedEntities\"", "detail.affectedEntities"),
        ("health-scheduled-change.json", "\"entityValue\"", "detail.affectedEntities[].entityValue"),
        ("spot-interruption.json", "\"source\"", "source"),
        ("spot-interruption.json", "\"detail-type\"", "detail-type"),
    ];
    for (file, key, field) in cases {
        // Renaming the key makes it absent while keeping the JSON valid.
        let body = fixture(file).replacen(key, "\"renamed\"", 1);
        match parse(&body) {
            Err(ParseError::Field { id: Some(_), field: f, .. }) => assert_eq!(f, field, "{file}"),
            other => panic!("{file} without {key}: {other:?}"),
        }
    }
    // Wrong type and empty values are errors too, and a message without an id still says which field.
    let body =
        fixture("spot-interruption.json").replace("\"instance-id\": \"i-0abc1234def567890\"", "\"instance-id\": 42");
    assert!(matches!(parse(&body), Err(ParseError::Field { problem: "not a string", .. })), "{:?}", parse(&body));
    let body = r#"{"source": "aws.ec2", "detail-type": "EC2 Instance Rebalance Recommendation", "detail": {"instance-id": ""}}"#;
    let e = parse(body).unwrap_err();
    assert_eq!(e.to_string(), "EventBridge message (no id): field `detail.instance-id` is empty");
    let body = fixture("health-scheduled-change.json")
        .replace("\"affectedEntities\": [", "\"affectedEntities\": [] , \"x\": [");
    assert!(matches!(parse(&body), Err(ParseError::Field { problem: "empty", .. })));
}

#[test]
fn every_fixture_parses_or_fails_as_its_name_says() {
    let mut n = 0;
    for entry in std::fs::read_dir(fixture_dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let result = parse(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(result.is_err(), name.starts_with("malformed-"), "{name}: {result:?}");
        n += 1;
    }
    assert!(n >= 13, "fixtures missing: {n}");
}

// ---------------------------------------------------------------------------------------------
// Decisions.

#[test]
fn spot_warning_marks_offering_plans_replacement_and_starts_drain() {
    let cluster = cluster();
    let ds = decide(&spot_message(), &cluster, catalog());
    // `cargo test -- --nocapture` shows what a person reads in the log.
    for d in &ds {
        eprintln!("{}", d.why);
    }

    // The reclaimed offering is out for 3 minutes, and the replacement does not use it.
    let offering =
        OfferingKey { instance_type: "m5.large".into(), zone: "us-east-1a".into(), capacity_type: CapacityType::Spot };
    let mark = position(&ds, |a| matches!(a, Action::MarkUnavailable { .. })).expect("marked");
    assert_eq!(
        ds[mark].action,
        Some(Action::MarkUnavailable { offering: offering.clone(), until: NOW.plus(Duration::from_secs(180)) })
    );
    let planned = launches(&ds);
    assert!(!planned.is_empty());
    for p in &planned {
        assert!(
            !(p.instance_type == "m5.large" && p.zone == "us-east-1a" && p.capacity_type == CapacityType::Spot),
            "replacement bought the reclaimed offering: {p:?}"
        );
        assert!(p.name.starts_with("default-00001-r"), "deterministic replacement name: {}", p.name);
        assert_eq!(p.labels.get(labels::NODECLAIM), Some(&p.name));
    }
    assert_pods_covered(&ds, &APP_PODS);

    // The claim is marked disrupting in the same pass: the drain starts within the notice.
    let (claim, disruption) = the_disruption(&ds);
    assert_eq!(claim.phase, Phase::Draining);
    assert_eq!(claim.version, 5);
    assert_eq!(disruption.reason, Reason::SpotInterrupted);
    assert_eq!(disruption.since, NOW);
    // EC2 takes the instance back two minutes after it sent the warning: the drain's deadline.
    assert_eq!(disruption.reclaim_at, Some(NOW.plus(Duration::from_secs(120))));
    assert_eq!(disruption.replacements, planned.iter().map(|p| p.name.clone()).collect::<Vec<_>>());
    assert_eq!(
        disruption.message,
        format!(
            "spot interruption warning for {INSTANCE} (m5.large spot in us-east-1a): replacing with {} node{}, \
             draining within the 2-minute notice",
            planned.len(),
            if planned.len() == 1 { "" } else { "s" }
        )
    );
    // Launches come before the claim write, so a crash in between leaves capacity, not a gap.
    let write = position(&ds, |a| matches!(a, Action::WriteClaim(_))).unwrap();
    assert!(position(&ds, |a| matches!(a, Action::Launch(_))).unwrap() < write);
    assert!(mark < write);
    assert!(ds.iter().any(|d| matches!(&d.action, Some(Action::Event { object, reason, .. })
        if object == &format!("Node/{}", cluster.nodes[0].name) && reason == "SpotInterrupted")));
    assert!(ds.iter().all(|d| !d.why.is_empty()));
}

#[test]
fn spot_warning_decisions_are_deterministic_for_redelivery_before_the_write_lands() {
    let cluster = cluster();
    assert_eq!(decide(&spot_message(), &cluster, catalog()), decide(&spot_message(), &cluster, catalog()));
}

#[test]
fn duplicate_spot_warning_gets_no_second_replacement() {
    let mut cluster = cluster();
    let first = decide(&spot_message(), &cluster, catalog());
    let (claim, _) = the_disruption(&first);
    cluster.claims[0] = claim.clone();

    let again = decide(&spot_message(), &cluster, catalog());
    assert!(launches(&again).is_empty(), "{again:#?}");
    assert!(written(&again).is_empty(), "{again:#?}");
    assert!(
        again.iter().any(|d| d.action.is_none() && d.why.contains("already being disrupted (SpotInterrupted")),
        "{again:#?}"
    );
}

#[test]
fn instances_that_are_not_ours_are_ignored_with_a_note() {
    let mut cluster = cluster();
    let msg =
        Message::SpotInterruption { instance_id: "i-0ffffffffffffffff".into(), action: "terminate".into(), time: None };
    let ds = decide(&msg, &cluster, catalog());
    assert_eq!(ds, vec![Decision::note(None, "ignored: instance i-0ffffffffffffffff is not Dovetail's")]);

    // Tagged for the cluster but with no claim: an orphan, which the sweeper owns.
    cluster.instances.push(Instance {
        id: "i-0ffffffffffffffff".into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1b".into(),
        state: "running".into(),
        launched_at: NOW,
        tags: BTreeMap::new(),
        image_id: String::new(),
        subnet_id: String::new(),
        security_groups: vec![],
    });
    let ds = decide(&msg, &cluster, catalog());
    assert_eq!(ds.len(), 1);
    assert!(ds[0].action.is_none() && ds[0].why.contains("orphan"), "{ds:?}");
}

#[test]
fn unknown_messages_and_harmless_states_are_notes() {
    let cluster = cluster();
    let ds =
        decide(&Message::Unknown { source: "aws.autoscaling".into(), detail_type: "X".into() }, &cluster, catalog());
    assert_eq!(ds.len(), 1);
    assert!(ds[0].action.is_none() && ds[0].why.starts_with("ignored: event \"X\""));
    for state in ["pending", "running"] {
        let msg = Message::StateChange { instance_id: INSTANCE.into(), state: state.into() };
        let ds = decide(&msg, &cluster, catalog());
        assert_eq!(ds.len(), 1);
        assert!(ds[0].action.is_none() && ds[0].why.contains(state), "{ds:?}");
    }
}

#[test]
fn state_changes_drain_and_replace() {
    for state in ["stopping", "stopped", "shutting-down", "terminated"] {
        let cluster = cluster();
        let msg = Message::StateChange { instance_id: INSTANCE.into(), state: state.into() };
        let ds = decide(&msg, &cluster, catalog());
        // Not a spot reclaim: the offering stays available.
        assert!(position(&ds, |a| matches!(a, Action::MarkUnavailable { .. })).is_none(), "{state}");
        assert_pods_covered(&ds, &APP_PODS);
        let (claim, d) = the_disruption(&ds);
        assert_eq!((claim.phase, d.reason), (Phase::Draining, Reason::InstanceStateChange), "{state}");
        assert!(d.message.contains(&format!("instance state change to {state}")), "{}", d.message);
        if state == "terminated" {
            assert!(d.message.ends_with("the instance is already gone; releasing its pods"), "{}", d.message);
        }
    }
}

#[test]
fn health_scheduled_change_drains_ours_and_notes_the_rest() {
    let cluster = cluster();
    let ds = decide(&parsed("health-scheduled-change.json"), &cluster, catalog());
    assert_pods_covered(&ds, &APP_PODS);
    let (_, d) = the_disruption(&ds);
    assert_eq!(d.reason, Reason::ScheduledChange);
    assert!(d.message.contains("AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED starting Sat, 21 Mar 2026 08:00:00 GMT"));
    assert!(ds
        .iter()
        .any(|x| x.action.is_none() && x.why == "ignored: instance i-0fff0000aaaa11112 is not Dovetail's"));
}

#[test]
fn capacity_reservation_warning_drains_and_replaces() {
    let mut cluster = cluster();
    let launch = cluster.claims[0].launch.as_mut().unwrap();
    launch.capacity_type = CapacityType::OnDemand;
    let ds = decide(&parsed("capacity-reservation-interruption.json"), &cluster, catalog());
    assert_pods_covered(&ds, &APP_PODS);
    let (_, d) = the_disruption(&ds);
    assert_eq!(d.reason, Reason::CapacityReservationInterrupted);
    assert!(d.message.ends_with("draining within the 2-minute notice"), "{}", d.message);
    let sent = dovetail_core::interruption::parse_rfc3339("2026-03-14T10:00:00Z").unwrap();
    assert_eq!(d.reclaim_at, Some(sent.plus(Duration::from_secs(120))));
}

#[test]
fn capacity_reservation_warning_replaces_outside_the_reclaimed_reservation() {
    let cluster = in_reservation("cr-0a", ReservationKind::Default, "cr-0c");
    let ds = decide(&parsed("capacity-reservation-interruption.json"), &cluster, catalog());
    assert_pods_covered(&ds, &APP_PODS);
    let planned = launches(&ds);
    assert!(planned.iter().all(|p| reservation_of(p) != Some("cr-0a")), "{planned:#?}");
    // The other reservation is still free capacity, and preferred.
    assert!(planned.iter().any(|p| reservation_of(p) == Some("cr-0c")), "{planned:#?}");
    assert_eq!(the_disruption(&ds).1.reason, Reason::CapacityReservationInterrupted);
}

#[test]
fn capacity_block_warning_drains_and_replaces_every_node_of_the_block_elsewhere() {
    let mut cluster = in_reservation(BLOCK, ReservationKind::CapacityBlock, "cr-0c");
    // A second node in the block, one planned for it that launched on-demand, and one in another
    // reservation.
    let mut second = claim("default-00002", "i-0bbbbbbbbbbbbbbbb", "m5.large", "us-east-1a", CapacityType::Reserved);
    second.requirements = cluster.claims[0].requirements.clone();
    let mut fell_back = claim("default-00003", "i-0cccccccccccccccc", "m5.large", "us-east-1a", CapacityType::OnDemand);
    fell_back.requirements = cluster.claims[0].requirements.clone();
    let mut other = claim("default-00004", "i-0dddddddddddddddd", "m5.large", "us-east-1a", CapacityType::Reserved);
    other.requirements.add(Requirement::single(labels::CAPACITY_RESERVATION_ID, "cr-0c"));
    for c in [&second, &fell_back, &other] {
        cluster.nodes.push(node_for(c, vec![app_pod(&format!("{}-app", c.name), 1800, 1024)]));
    }
    cluster.claims.extend([second, fell_back, other]);

    let ds = decide(&block_warning(), &cluster, catalog());
    for d in &ds {
        eprintln!("{}", d.why);
    }
    let drained: Vec<&str> = written(&ds).iter().map(|c| c.name.as_str()).collect();
    assert_eq!(drained, ["default-00001", "default-00002"], "{ds:#?}");
    for w in written(&ds) {
        assert_eq!(w.phase, Phase::Draining);
        let d = w.disruption.as_ref().unwrap();
        assert_eq!(d.reason, Reason::CapacityReservationInterrupted);
        // EC2 terminates the block's instances from 30 minutes before its end: the drain's deadline.
        assert_eq!(d.reclaim_at, Some(NOW.plus(Duration::from_secs(10 * 60))));
        assert!(
            d.message.starts_with(&format!("Capacity Block {BLOCK} expiration warning (the block ends at ")),
            "{}",
            d.message
        );
        assert!(d.message.ends_with("draining before EC2 starts terminating the block's instances"), "{}", d.message);
        assert!(ds.iter().any(|x| matches!(&x.action, Some(Action::Event { object, reason, .. })
            if object == &format!("Node/node-{}", w.name) && reason == "CapacityReservationInterrupted")));
    }
    // Replacements for both, none of them back into the expiring block (which EC2 still counts
    // as five free instances), and nothing marked unavailable: the block's type and zone remain.
    let planned = launches(&ds);
    let mut covered: Vec<String> = planned.iter().flat_map(|p| p.pods.iter().cloned()).collect();
    covered.sort();
    assert_eq!(covered, ["shop/cart-0", "shop/cart-1", "shop/default-00002-app", "shop/web-0"], "{ds:#?}");
    assert!(planned.iter().all(|p| reservation_of(p) != Some(BLOCK)), "{planned:#?}");
    assert!(position(&ds, |a| matches!(a, Action::MarkUnavailable { .. })).is_none());

    // Redelivered after the writes landed: notes only.
    let mut after = cluster.clone();
    for w in written(&ds) {
        let i = after.claims.iter().position(|c| c.name == w.name).unwrap();
        after.claims[i] = w.clone();
    }
    let again = decide(&block_warning(), &after, catalog());
    assert!(launches(&again).is_empty() && written(&again).is_empty(), "{again:#?}");
    assert_eq!(again.iter().filter(|d| d.why.contains("already being disrupted")).count(), 2, "{again:#?}");
}

#[test]
fn capacity_block_warning_without_an_end_counts_ten_minutes_from_the_warning() {
    let cluster = in_reservation(BLOCK, ReservationKind::CapacityBlock, "cr-0c");
    let msg = Message::CapacityBlockExpiry { reservation_id: BLOCK.into(), end: None, time: Some(NOW) };
    let ds = decide(&msg, &cluster, catalog());
    assert_eq!(the_disruption(&ds).1.reclaim_at, Some(NOW.plus(Duration::from_secs(600))));
}

#[test]
fn capacity_block_warning_for_a_block_nothing_runs_in_is_a_note() {
    // The node runs in another reservation; and a claim planned for the block that launched
    // on-demand is not in it.
    let cluster = in_reservation("cr-0c", ReservationKind::CapacityBlock, "cr-0d");
    let ds = decide(&block_warning(), &cluster, catalog());
    assert_eq!(
        ds,
        vec![Decision::note(
            None,
            format!("ignored: Capacity Block expiration warning for {BLOCK}: no NodeClaim runs in {BLOCK}")
        )]
    );
    let mut fell_back = in_reservation(BLOCK, ReservationKind::CapacityBlock, "cr-0c");
    fell_back.claims[0].launch.as_mut().unwrap().capacity_type = CapacityType::OnDemand;
    let ds = decide(&block_warning(), &fell_back, catalog());
    assert!(ds.len() == 1 && ds[0].action.is_none(), "{ds:#?}");
}

#[test]
fn a_replacement_under_a_full_node_limit_frees_the_interrupted_node() {
    // The pool may have one node, and has it: the interrupted node's replacement takes its place.
    let mut cluster = cluster();
    cluster.nodepools[0].limits.insert("nodes".into(), 1);
    let usage = dovetail_core::provisioning::pool_usage(&cluster, catalog());
    assert_eq!(usage["default"].get("nodes"), 1);
    cluster.nodepools[0].usage = usage["default"].clone();
    let ds = decide(&spot_message(), &cluster, catalog());
    assert_eq!(launches(&ds).len(), 1, "{ds:#?}");
    assert_pods_covered(&ds, &APP_PODS);
    assert!(ds.iter().all(|d| !d.why.contains("no replacement capacity")), "{ds:#?}");

    // With a second node in the pool besides, the limit is exceeded already: nothing is launched,
    // and the note says which limit.
    cluster.nodepools[0].usage.set("nodes", 2);
    let ds = decide(&spot_message(), &cluster, catalog());
    assert!(launches(&ds).is_empty(), "{ds:#?}");
    assert!(
        ds.iter()
            .any(|d| d.why.contains("has no replacement capacity")
                && d.why.contains("limit on nodes reached (0 of 1 left)")),
        "{ds:#?}"
    );
}

#[test]
fn a_replacement_stays_within_the_cost_limits_giving_back_what_the_interrupted_node_cost() {
    // The pool may cost $1/h and its one node costs $0.04/h: the replacement fits in what the
    // interrupted node gives back and the room beside it.
    let mut cluster = cluster();
    cluster.nodepools[0].limits.insert(LIMIT_COST.into(), cost_micros(1.0));
    let usage = dovetail_core::provisioning::pool_usage(&cluster, catalog());
    assert_eq!(usage["default"].get(LIMIT_COST), cost_micros(0.04));
    cluster.nodepools[0].usage = usage["default"].clone();
    let ds = decide(&spot_message(), &cluster, catalog());
    assert_eq!(launches(&ds).len(), 1, "{ds:#?}");
    assert_pods_covered(&ds, &APP_PODS);

    // Other capacity of the pool already costs the whole limit: no replacement, and the note
    // says which limit.
    cluster.nodepools[0].usage.set(LIMIT_COST, cost_micros(1.04));
    let ds = decide(&spot_message(), &cluster, catalog());
    assert!(launches(&ds).is_empty(), "{ds:#?}");
    let why = "limit on dovetail.dev/cost-per-hour reached ($0.0000/h of $1.0000/h left)";
    assert!(ds.iter().any(|d| d.why.contains("has no replacement capacity") && d.why.contains(why)), "{ds:#?}");

    // The cluster-wide limit the same way: the interrupted node's cost is given back to it too.
    cluster.nodepools[0].limits.clear();
    cluster.nodepools[0].usage = usage["default"].clone();
    cluster.cost_limit = Some(cost_micros(1.0));
    assert_eq!(launches(&decide(&spot_message(), &cluster, catalog())).len(), 1);
    cluster.cost_limit = Some(0);
    let ds = decide(&spot_message(), &cluster, catalog());
    assert!(launches(&ds).is_empty(), "{ds:#?}");
    assert!(ds.iter().any(|d| d.why.contains("the cluster-wide cost limit is reached")), "{ds:#?}");
}

#[test]
fn rebalance_under_ignore_records_an_event_only() {
    let cluster = with_policy(cluster(), RebalancePolicy::Ignore);
    let ds = decide(&Message::RebalanceRecommendation { instance_id: INSTANCE.into() }, &cluster, catalog());
    assert_eq!(ds.len(), 1, "{ds:#?}");
    match &ds[0].action {
        Some(Action::Event { object, reason, message }) => {
            assert_eq!(object, &format!("Node/{}", cluster.nodes[0].name));
            assert_eq!(reason, "RebalanceRecommendation");
            assert!(message.contains("rebalance policy Ignore"), "{message}");
            assert!(message.contains("dovetail.dev/rebalance-policy"), "{message}");
        }
        other => panic!("expected an Event, got {other:?}"),
    }
}

#[test]
fn rebalance_under_replace_launches_first_then_disrupts_voluntarily() {
    let cluster = with_policy(cluster(), RebalancePolicy::Replace);
    let ds = decide(&Message::RebalanceRecommendation { instance_id: INSTANCE.into() }, &cluster, catalog());
    assert!(position(&ds, |a| matches!(a, Action::MarkUnavailable { .. })).is_none());
    assert_pods_covered(&ds, &APP_PODS);
    let first_launch = position(&ds, |a| matches!(a, Action::Launch(_))).unwrap();
    let write = position(&ds, |a| matches!(a, Action::WriteClaim(_))).unwrap();
    assert!(first_launch < write);
    let (claim, d) = the_disruption(&ds);
    assert_eq!(claim.phase, Phase::Draining);
    assert_eq!(d.reason, Reason::Rebalance);
    assert!(d.reason.is_voluntary(), "the drain must respect budgets and PDBs");
    assert_eq!(d.replacements.len(), launches(&ds).len());
    assert!(d.message.ends_with("draining once the replacement is up, within budgets and PDBs"), "{}", d.message);

    // A duplicate recommendation is a note.
    let mut after = cluster.clone();
    after.claims[0] = claim.clone();
    let again = decide(&Message::RebalanceRecommendation { instance_id: INSTANCE.into() }, &after, catalog());
    assert!(launches(&again).is_empty() && written(&again).is_empty(), "{again:#?}");
}

#[test]
fn rebalance_replacement_waits_for_the_pool_budget() {
    // A second node of the pool is NotReady: it uses up the default 10% of 2 nodes (1).
    let mut cluster = with_policy(cluster(), RebalancePolicy::Replace);
    let other = claim("default-00002", "i-0bbbbbbbbbbbbbbbb", "m5.large", "us-east-1b", CapacityType::OnDemand);
    let mut down = node_for(&other, vec![]);
    down.ready = false;
    cluster.nodes.push(down);
    cluster.claims.push(other);
    let rebalance = Message::RebalanceRecommendation { instance_id: INSTANCE.into() };
    let ds = decide(&rebalance, &cluster, catalog());
    assert!(launches(&ds).is_empty() && written(&ds).is_empty(), "{ds:#?}");
    let event = ds.iter().find(|d| matches!(&d.action, Some(Action::Event { .. }))).expect("an Event");
    assert!(
        event.why.ends_with(
            "not replaced early: budget 10% of 2 nodes allows 1; 1 already disrupting (1 of them NotReady), so \
             Rebalance is blocked until some of them finish"
        ),
        "{}",
        event.why
    );
    // Once the node is Ready again the replacement goes ahead; a spot warning never waits.
    let mut ready = cluster.clone();
    ready.nodes[1].ready = true;
    assert!(!written(&decide(&rebalance, &ready, catalog())).is_empty());
    assert_eq!(the_disruption(&decide(&spot_message(), &cluster, catalog())).1.reason, Reason::SpotInterrupted);
}

#[test]
fn a_replacement_launched_before_a_lost_claim_write_is_adopted_not_launched_again() {
    let mut cluster = cluster();
    let first = decide(&spot_message(), &cluster, catalog());
    let (_, want) = the_disruption(&first);
    let want = want.replacements.clone();
    // The launches were carried out, then the invocation died before the claim write; the
    // message is redelivered.
    for p in launches(&first) {
        cluster.claims.push(NodeClaim::launching(&p.name, &p.nodepool, "default", NOW));
    }
    let again = decide(&spot_message(), &cluster, catalog());
    assert!(launches(&again).is_empty(), "{again:#?}");
    for name in &want {
        assert!(
            again
                .iter()
                .any(|d| d.action.is_none() && d.why.starts_with(&format!("{name} already exists (Launching)"))),
            "{again:#?}"
        );
    }
    assert_eq!(the_disruption(&again).1.replacements, want, "the write names the adopted replacements");
}

#[test]
fn rebalance_is_not_acted_on_when_pods_would_have_nowhere_to_go() {
    let mut cluster = with_policy(cluster(), RebalancePolicy::Replace);
    // A pod bigger than any type the pool allows.
    let mut huge = app_pod("huge", 500_000, 1024);
    huge.node_name = Some(cluster.nodes[0].name.clone());
    cluster.nodes[0].pods.push(huge.into());
    let ds = decide(&Message::RebalanceRecommendation { instance_id: INSTANCE.into() }, &cluster, catalog());
    assert!(launches(&ds).is_empty() && written(&ds).is_empty(), "{ds:#?}");
    assert!(ds.iter().any(|d| d.why.contains("not replaced early") && d.why.contains("shop/huge")), "{ds:#?}");

    // A spot warning cannot wait: it drains anyway and says which pod is left without a place.
    let ds = decide(&spot_message(), &cluster, catalog());
    let (_, d) = the_disruption(&ds);
    assert!(d.message.contains("1 pod without a place"), "{}", d.message);
    assert!(ds
        .iter()
        .any(|x| x.action.is_none() && x.why.starts_with("pod shop/huge from default-00001 has no replacement")));
}

#[test]
fn spot_warning_escalates_a_voluntary_disruption_without_new_launches() {
    let mut cluster = with_policy(cluster(), RebalancePolicy::Replace);
    let first = decide(&Message::RebalanceRecommendation { instance_id: INSTANCE.into() }, &cluster, catalog());
    let (claim, before) = the_disruption(&first);
    let before = before.clone();
    cluster.claims[0] = claim.clone();

    let ds = decide(&spot_message(), &cluster, catalog());
    assert!(launches(&ds).is_empty(), "{ds:#?}");
    assert!(position(&ds, |a| matches!(a, Action::MarkUnavailable { .. })).is_some());
    let (claim, d) = the_disruption(&ds);
    assert_eq!(claim.version, 6);
    assert_eq!(d.reason, Reason::SpotInterrupted);
    assert_eq!(d.replacements, before.replacements);
    assert_eq!(d.since, before.since);
    assert_eq!(d.reclaim_at, Some(NOW.plus(Duration::from_secs(120))), "the drain under way gets the reclaim time");
    assert!(d.message.contains("no longer waits on budgets or PDBs"), "{}", d.message);
}

#[test]
fn pods_that_fit_on_other_live_nodes_go_there_but_not_onto_leaving_ones() {
    let mut cluster = cluster();
    // A roomy on-demand node that is itself live…
    let big = claim("default-00002", "i-0bbbbbbbbbbbbbbbb", "m5.4xlarge", "us-east-1b", CapacityType::OnDemand);
    cluster.nodes.push(node_for(&big, vec![]));
    cluster.claims.push(big);
    let ds = decide(&spot_message(), &cluster, catalog());
    assert!(launches(&ds).is_empty(), "{ds:#?}");
    let (_, d) = the_disruption(&ds);
    assert!(d.message.contains("replacing with 0 nodes, 3 pods fit on existing nodes"), "{}", d.message);

    // …but not once it is being disrupted itself.
    cluster.claims[1].disruption = Some(Disruption {
        reason: Reason::Drifted,
        since: NOW,
        replacements: vec![],
        message: String::new(),
        reclaim_at: None,
    });
    cluster.claims[1].phase = Phase::Draining;
    let ds = decide(&spot_message(), &cluster, catalog());
    assert_pods_covered(&ds, &APP_PODS);
}

#[test]
fn a_claim_interrupted_before_registration_replans_its_nominated_pods() {
    let mut cluster = cluster();
    cluster.nodes.clear();
    cluster.claims[0].phase = Phase::Launched;
    cluster.claims[0].node_name = None;
    cluster.claims[0].pods = vec!["shop/cart-0".into(), "shop/cart-1".into()];
    cluster.pending = vec![app_pod("cart-0", 500, 1024), app_pod("cart-1", 500, 1024), app_pod("other", 100, 128)];
    let ds = decide(&spot_message(), &cluster, catalog());
    assert_pods_covered(&ds, &["shop/cart-0", "shop/cart-1"]);
    assert!(ds
        .iter()
        .any(|d| matches!(&d.action, Some(Action::Event { object, .. }) if object == "NodeClaim/default-00001")));
}

#[test]
fn claims_already_terminating_are_left_alone() {
    let mut cluster = cluster();
    cluster.claims[0].phase = Phase::Terminating;
    let ds = decide(&spot_message(), &cluster, catalog());
    assert!(launches(&ds).is_empty() && written(&ds).is_empty(), "{ds:#?}");
    assert!(ds.iter().any(|d| d.why.contains("already Terminating")));
}
