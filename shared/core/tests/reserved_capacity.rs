//! Reserved capacity (issue 20, point 1): a class's capacity reservations are tried before spot
//! and on-demand when a pool's requirements allow `reserved`, no more claims are planned into a
//! reservation than it has left (claims already headed for it counted), a Capacity Block takes
//! nothing in its last 40 minutes, and a launch only goes into the reservation it was planned for
//! while that still has an instance.

mod lifecycle_support;

use std::collections::BTreeSet;
use std::time::Duration;

use dovetail_core::catalog::{self, CapacityType, Reservation, ReservationKind};
use dovetail_core::cluster::{Cluster, ResolvedClass};
use dovetail_core::decision::Action;
use dovetail_core::labels;
use dovetail_core::model::{NodeClass, NodeOs, NodePool, Pod};
use dovetail_core::nodeclaim::{launched_labels, NodeClaim, Phase};
use dovetail_core::provisioning::{self, offers, plan};
use dovetail_core::requirements::{Operator, Requirement};
use dovetail_core::reservations::{self, remaining};
use dovetail_core::resources::Resources;
use dovetail_core::scheduler::PlannedClaim;
use lifecycle_support::*;

/// A pod only one fits on an m5.large (2 vCPU), so each needs its own node.
fn big(name: &str) -> Pod {
    let mut p = Pod::new("shop", name, Resources::new(1500, 2048 << 20));
    p.owner = dovetail_core::model::OwnerKind::ReplicaSet;
    p
}

fn odcr(id: &str, available: u32) -> Reservation {
    Reservation {
        id: id.into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        owner_id: "123456789012".into(),
        instance_match_criteria: "targeted".into(),
        kind: ReservationKind::Default,
        interruptible: false,
        available,
        observed_at: T0,
        end: None,
    }
}

/// An ODCR of another type than m5.large.
fn odcr_of(id: &str, instance_type: &str, available: u32) -> Reservation {
    Reservation { instance_type: instance_type.into(), ..odcr(id, available) }
}

/// `n` pods requesting `cpu` millicores and `gib` GiB each.
fn pods(prefix: &str, n: usize, cpu: i64, gib: i64) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut p = Pod::new("shop", &format!("{prefix}-{i}"), Resources::new(cpu, gib << 30));
            p.owner = dovetail_core::model::OwnerKind::ReplicaSet;
            p
        })
        .collect()
}

/// What the claims cost an hour.
fn cost(claims: &[&PlannedClaim]) -> f64 {
    claims.iter().map(|c| c.price_per_hour).sum()
}

fn block(id: &str, available: u32, end: dovetail_core::time::Time) -> Reservation {
    Reservation { kind: ReservationKind::CapacityBlock, end: Some(end), ..odcr(id, available) }
}

/// A cluster whose only pool may launch any capacity type of m5 types, its class selecting
/// `reservations`.
fn cluster(reservations: Vec<Reservation>, pods: usize) -> Cluster {
    let mut pool = NodePool::new("default", "default");
    pool.requirements.add(Requirement::new(labels::INSTANCE_FAMILY, Operator::In, &["m5"]).unwrap());
    Cluster {
        now: T0,
        nodepools: vec![pool],
        nodeclasses: vec![NodeClass { name: "default".into(), ..Default::default() }],
        resolved: vec![ResolvedClass {
            name: "default".into(),
            images: [("amd64".to_string(), "ami-1".to_string())].into(),
            subnets: vec!["subnet-1".into()],
            security_groups: vec!["sg-1".into()],
            instance_profile: Some("profile".into()),
            reservations,
            ..Default::default()
        }],
        pending: (0..pods).map(|i| big(&format!("web-{i}"))).collect(),
        ..Cluster::default()
    }
}

fn reserved_in(claims: &[PlannedClaim], id: &str) -> usize {
    claims
        .iter()
        .filter(|c| c.capacity_type == CapacityType::Reserved)
        .filter(|c| c.labels.get(labels::CAPACITY_RESERVATION_ID).map(String::as_str) == Some(id))
        .count()
}

/// A claim the plan sent into `id`, not launched yet.
fn headed_for(name: &str, id: &str) -> NodeClaim {
    let mut c = NodeClaim::launching(name, "default", "default", T0);
    c.instance_types = vec!["m5.large".into()];
    c.requirements.add(Requirement::single(labels::CAPACITY_TYPE, labels::CAPACITY_RESERVED));
    c.requirements.add(Requirement::single(labels::CAPACITY_RESERVATION_ID, id));
    c.requirements.add(Requirement::single(labels::ZONE, "us-east-1a"));
    c
}

#[test]
fn a_reservation_is_used_before_spot_with_karpenters_labels_and_requirements() {
    let c = cluster(vec![odcr("cr-0a", 3)], 1);
    let p = planned(&plan(&c, catalog::embedded()));
    assert_eq!(p.len(), 1);
    let claim = &p[0];
    assert_eq!(claim.capacity_type, CapacityType::Reserved);
    assert_eq!((claim.instance_type.as_str(), claim.zone.as_str()), ("m5.large", "us-east-1a"));
    assert_eq!(claim.instance_types, vec!["m5.large".to_string()]);
    // Karpenter's price for a reservation: the on-demand price over ten million.
    assert!((claim.price_per_hour - 0.096 / 10_000_000.0).abs() < 1e-12, "{}", claim.price_per_hour);
    assert_eq!(claim.labels[labels::CAPACITY_TYPE], "reserved");
    assert_eq!(claim.labels[labels::CAPACITY_RESERVATION_ID], "cr-0a");
    assert_eq!(claim.labels[labels::CAPACITY_RESERVATION_TYPE], "default");
    assert_eq!(claim.labels[labels::CAPACITY_RESERVATION_INTERRUPTIBLE], "false");
    let single = |k: &str| claim.requirements.get(k).and_then(|r| r.single_value()).map(str::to_string);
    assert_eq!(single(labels::CAPACITY_TYPE).as_deref(), Some("reserved"));
    assert_eq!(single(labels::CAPACITY_RESERVATION_ID).as_deref(), Some("cr-0a"));
    assert_eq!(single(labels::ZONE).as_deref(), Some("us-east-1a"));
}

#[test]
fn no_more_claims_go_into_a_reservation_than_it_has_left_counting_claims_headed_for_it() {
    // Three instances left by EC2's count, one already taken by a claim not launched yet: two
    // of the five pods' claims go into the reservation, the other three fall back to spot.
    let mut c = cluster(vec![odcr("cr-0a", 3)], 5);
    c.claims.push(headed_for("default-inflight", "cr-0a"));
    // The in-flight claim's node would take a pod: keep it busy with one of its own.
    c.claims[0].pods = vec!["shop/other".into()];
    let snap = provisioning::snapshot(&c, catalog::embedded());
    assert_eq!(snap.reservations["default"][0].available, 2);
    let p = planned(&plan(&c, catalog::embedded()));
    let reserved = reserved_in(&p, "cr-0a");
    assert!(reserved <= 2, "{reserved} claims planned into a reservation with 2 left");
    let spot = p.iter().filter(|c| c.capacity_type == CapacityType::Spot).count();
    let placed: usize = p.iter().map(|c| c.pods.len()).sum();
    assert_eq!(reserved, 2, "{p:#?}");
    assert!(spot >= 1, "the rest falls back to spot: {p:#?}");
    assert!(placed >= 4, "every pod but the one the in-flight claim may hold is placed: {p:#?}");
}

#[test]
fn a_full_reservation_is_never_planned_into() {
    let mut c = cluster(vec![odcr("cr-0a", 1)], 2);
    c.claims.push(headed_for("default-inflight", "cr-0a"));
    c.claims[0].pods = vec!["shop/other".into()];
    assert!(provisioning::snapshot(&c, catalog::embedded()).reservations.is_empty());
    let p = planned(&plan(&c, catalog::embedded()));
    assert_eq!(reserved_in(&p, "cr-0a"), 0, "{p:#?}");
    assert!(p.iter().all(|c| c.capacity_type != CapacityType::Reserved));
}

#[test]
fn a_pool_that_allows_only_reserved_leaves_the_rest_pending_with_why() {
    let mut c = cluster(vec![odcr("cr-0a", 1)], 3);
    c.nodepools[0].requirements.add(Requirement::single(labels::CAPACITY_TYPE, labels::CAPACITY_RESERVED));
    let ds = plan(&c, catalog::embedded());
    let p = planned(&ds);
    assert_eq!(p.len(), 1, "{ds:#?}");
    assert_eq!(reserved_in(&p, "cr-0a"), 1);
    let failed: Vec<String> = ds
        .iter()
        .filter_map(|d| match &d.action {
            Some(Action::Event { reason, message, .. }) if reason == dovetail_core::events::FAILED_SCHEDULING => {
                Some(message.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 2, "{failed:#?}");
    assert!(failed.iter().all(|m| m.contains("reservation")), "{failed:#?}");
}

#[test]
fn a_pool_that_does_not_allow_reserved_never_uses_a_reservation() {
    let mut c = cluster(vec![odcr("cr-0a", 5)], 2);
    c.nodepools[0]
        .requirements
        .add(Requirement::new(labels::CAPACITY_TYPE, Operator::In, &["spot", "on-demand"]).unwrap());
    let p = planned(&plan(&c, catalog::embedded()));
    assert!(!p.is_empty());
    assert!(p.iter().all(|c| c.capacity_type != CapacityType::Reserved), "{p:#?}");
    assert!(p.iter().all(|c| !c.labels.contains_key(labels::CAPACITY_RESERVATION_ID)));
}

#[test]
fn a_pod_may_select_a_reservation_by_id() {
    let mut c = cluster(vec![odcr("cr-0a", 5), odcr("cr-0b", 5)], 1);
    c.pending[0].node_affinity =
        vec![[Requirement::single(labels::CAPACITY_RESERVATION_ID, "cr-0b")].into_iter().collect()];
    let p = planned(&plan(&c, catalog::embedded()));
    assert_eq!(reserved_in(&p, "cr-0b"), 1, "{p:#?}");
}

#[test]
fn a_pod_may_ask_for_a_capacity_block_or_stay_off_reservations() {
    let reservations = || vec![odcr("cr-0a", 5), block("cr-0b", 5, T0.plus(Duration::from_secs(86_400)))];
    let mut c = cluster(reservations(), 1);
    c.pending[0].node_affinity =
        vec![[Requirement::single(labels::CAPACITY_RESERVATION_TYPE, "capacity-block")].into_iter().collect()];
    let p = planned(&plan(&c, catalog::embedded()));
    assert_eq!(reserved_in(&p, "cr-0b"), 1, "{p:#?}");
    // Only interruptible reservations: there are none, and spot or on-demand has no such label.
    let mut c = cluster(reservations(), 1);
    c.pending[0].node_affinity =
        vec![[Requirement::single(labels::CAPACITY_RESERVATION_INTERRUPTIBLE, "true")].into_iter().collect()];
    assert!(planned(&plan(&c, catalog::embedded())).is_empty());
    // Kept off reservations: spot.
    let mut c = cluster(reservations(), 1);
    c.pending[0].node_affinity =
        vec![[Requirement::new(labels::CAPACITY_RESERVATION_ID, Operator::DoesNotExist, &[] as &[&str]).unwrap()]
            .into_iter()
            .collect()];
    let p = planned(&plan(&c, catalog::embedded()));
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].capacity_type, CapacityType::Spot, "{p:#?}");
}

#[test]
fn odcrs_come_before_capacity_blocks() {
    let c = cluster(vec![block("cr-0b", 5, T0.plus(Duration::from_secs(86_400))), odcr("cr-0a", 5)], 1);
    let p = planned(&plan(&c, catalog::embedded()));
    assert_eq!(reserved_in(&p, "cr-0a"), 1, "{p:#?}");
    // With the ODCR gone, the block.
    let c = cluster(vec![block("cr-0b", 5, T0.plus(Duration::from_secs(86_400)))], 1);
    let p = planned(&plan(&c, catalog::embedded()));
    assert_eq!(reserved_in(&p, "cr-0b"), 1, "{p:#?}");
    assert_eq!(p[0].labels[labels::CAPACITY_RESERVATION_TYPE], "capacity-block");
}

#[test]
fn a_capacity_block_takes_nothing_in_its_last_forty_minutes() {
    let end = T0.plus(Duration::from_secs(39 * 60));
    let r = block("cr-0b", 5, end);
    assert!(r.expiring(T0) && !r.open_at(T0));
    assert_eq!(r.state(T0), "expiring");
    let later = block("cr-0b", 5, T0.plus(Duration::from_secs(41 * 60)));
    assert!(!later.expiring(T0) && later.open_at(T0));
    assert_eq!(later.state(T0), "active");
    // An ODCR with an end date is not "expiring"; it closes at its end.
    let ending = Reservation { end: Some(T0.plus(Duration::from_secs(60))), ..odcr("cr-0a", 5) };
    assert!(!ending.expiring(T0) && ending.open_at(T0));
    assert!(!ending.open_at(T0.plus(Duration::from_secs(60))));

    let c = cluster(vec![r], 1);
    let p = planned(&plan(&c, catalog::embedded()));
    assert!(p.iter().all(|c| c.capacity_type != CapacityType::Reserved), "{p:#?}");
}

#[test]
fn remaining_counts_what_ec2_had_not_counted_yet() {
    let r = Reservation { observed_at: T0.plus(secs(100)), ..odcr("cr-0a", 4) };
    // Launched before EC2's answer: in its count already.
    let mut before = headed_for("a", "cr-0a");
    before.phase = Phase::Launched;
    before.launch = Some(launch("a", T0));
    // Launched after it, and not launched yet: not in it.
    let mut after = headed_for("b", "cr-0a");
    after.phase = Phase::Launched;
    after.launch = Some(launch("b", T0.plus(secs(200))));
    let planned_only = headed_for("c", "cr-0a");
    // Being drained: its instance goes, nothing to hold for it.
    let mut leaving = headed_for("d", "cr-0a");
    leaving.phase = Phase::Draining;
    let other = headed_for("e", "cr-0z");
    let left = remaining(std::slice::from_ref(&r), [&before, &after, &planned_only, &leaving, &other], T0);
    assert_eq!(left["cr-0a"], 2);
    // Never below zero.
    let left = remaining(&[Reservation { available: 1, ..r }], [&after, &planned_only], T0);
    assert_eq!(left["cr-0a"], 0);
}

#[test]
fn a_reserved_claim_is_offered_its_reservation_only_while_it_has_an_instance() {
    let claim = headed_for("x", "cr-0a");
    let groups = offers(&claim, catalog::embedded(), &BTreeSet::new(), &[], NodeOs::Linux, &[odcr("cr-0a", 1)]);
    assert_eq!(groups.len(), 1, "a reserved claim has no spot or on-demand group: {groups:#?}");
    let o = &groups[0][0];
    assert_eq!(
        (o.capacity_type, o.instance_type.as_str(), o.zone.as_str()),
        (CapacityType::Reserved, "m5.large", "us-east-1a")
    );
    assert_eq!(o.reservation.as_ref().map(|r| r.id.as_str()), Some("cr-0a"));
    // Full: nothing to launch.
    assert!(offers(&claim, catalog::embedded(), &BTreeSet::new(), &[], NodeOs::Linux, &[odcr("cr-0a", 0)]).is_empty());
    // Not a reservation of the class (any more).
    assert!(offers(&claim, catalog::embedded(), &BTreeSet::new(), &[], NodeOs::Linux, &[odcr("cr-0b", 3)]).is_empty());
    // Outside the class's subnets' zones.
    let zones = ["us-east-1b".to_string()];
    assert!(
        offers(&claim, catalog::embedded(), &BTreeSet::new(), &zones, NodeOs::Linux, &[odcr("cr-0a", 1)]).is_empty()
    );
    // Ruled out by a capacity error.
    let gone = BTreeSet::from([dovetail_core::catalog::OfferingKey {
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: CapacityType::Reserved,
    }]);
    assert!(offers(&claim, catalog::embedded(), &gone, &[], NodeOs::Linux, &[odcr("cr-0a", 1)]).is_empty());
}

#[test]
fn a_launch_counts_the_other_claims_headed_for_the_reservation_not_itself() {
    let mut c = cluster(vec![odcr("cr-0a", 2)], 0);
    let me = headed_for("me", "cr-0a");
    c.claims = vec![me.clone(), headed_for("other", "cr-0a")];
    let rs = reservations::for_launch(&me, &c.resolved[0].reservations, &c);
    assert_eq!(rs[0].available, 1);
    c.claims.push(headed_for("third", "cr-0a"));
    let rs = reservations::for_launch(&me, &c.resolved[0].reservations, &c);
    assert_eq!(rs[0].available, 0, "two others took both instances: this launch must not go");
    assert!(offers(&me, catalog::embedded(), &BTreeSet::new(), &[], NodeOs::Linux, &rs).is_empty());
}

#[test]
fn a_node_that_did_not_launch_into_its_reservation_loses_the_reservation_labels() {
    let c = cluster(vec![odcr("cr-0a", 3)], 1);
    let p = planned(&plan(&c, catalog::embedded()));
    let reserved = launched_labels(&p[0].labels, "m5.large", "us-east-1a", CapacityType::Reserved, catalog::embedded());
    assert_eq!(reserved[labels::CAPACITY_RESERVATION_ID], "cr-0a");
    let on_demand =
        launched_labels(&p[0].labels, "m5.large", "us-east-1a", CapacityType::OnDemand, catalog::embedded());
    assert_eq!(on_demand[labels::CAPACITY_TYPE], "on-demand");
    assert!(labels::RESERVATION_LABELS.iter().all(|k| !on_demand.contains_key(*k)), "{on_demand:?}");
}

#[test]
fn nodes_of_an_expiring_capacity_block_are_taken_away_before_ec2_reclaims_them() {
    use dovetail_core::disruption::block_expiry::expiring_blocks;
    use dovetail_core::nodeclaim::Reason;
    let running_in = |name: &str, id: &str| {
        let mut c = running(name);
        c.launch.as_mut().unwrap().capacity_type = CapacityType::Reserved;
        c.requirements.add(Requirement::single(labels::CAPACITY_RESERVATION_ID, id));
        c
    };
    // Planned for the expiring block but launched on-demand: EC2 does not reclaim it.
    let mut fell_back = running_in("e", "cr-0b");
    fell_back.launch.as_mut().unwrap().capacity_type = CapacityType::OnDemand;
    // The block ends in 30 minutes (expiring); another in two hours; an ODCR never.
    let end = T0.plus(Duration::from_secs(30 * 60));
    let mut c = cluster(
        vec![block("cr-0b", 0, end), block("cr-0c", 0, T0.plus(Duration::from_secs(7200))), odcr("cr-0a", 0)],
        0,
    );
    c.claims =
        vec![running_in("a", "cr-0b"), running_in("b", "cr-0c"), running_in("c", "cr-0a"), running("d"), fell_back];
    let ds = expiring_blocks(&c);
    let written: Vec<NodeClaim> = ds
        .iter()
        .filter_map(|d| match &d.action {
            Some(Action::WriteClaim(c)) => Some((**c).clone()),
            _ => None,
        })
        .collect();
    assert_eq!(written.len(), 1, "{ds:#?}");
    let d = written[0].disruption.as_ref().unwrap();
    assert_eq!(written[0].name, "a");
    assert_eq!(d.reason, Reason::CapacityReservationInterrupted);
    // EC2 starts reclaiming 30 minutes before the end: here, now.
    assert_eq!(d.reclaim_at, Some(end.minus(Duration::from_secs(30 * 60))));
    assert!(d.message.contains("cr-0b"), "{}", d.message);
    assert!(ds.iter().any(|d| matches!(&d.action, Some(Action::Event { object, .. }) if object == "Node/node-a")));
    // Ten minutes earlier the block is not expiring yet: nothing.
    c.now = T0.minus(Duration::from_secs(11 * 60));
    assert!(expiring_blocks(&c).is_empty());
    // The sweep runs it (the instances and nodes up, so nothing else takes the claims).
    c.now = T0;
    c.instances = ["a", "b", "c", "d"].iter().map(|n| instance(n, "running")).collect();
    c.nodes = ["a", "b", "c", "d"].iter().map(|n| node(n)).collect();
    let swept = dovetail_core::disruption::sweep::sweep(&c, catalog::embedded());
    assert!(
        swept.iter().any(|d| matches!(&d.action, Some(Action::WriteClaim(w))
        if w.name == "a" && w.disruption.as_ref().is_some_and(|d| d.reason == Reason::CapacityReservationInterrupted)))
    );
}

#[test]
fn a_reservation_of_a_type_not_cheapest_per_pod_takes_the_first_claims_up_to_its_count() {
    // An m5.2xlarge holds seven of these pods. Spot holds them for less, so without the
    // reservation no m5.2xlarge is bought; with two reserved, paid for either way, the first two
    // claims go there, each filled to its type, and the six pods left are bought as they would
    // be with no reservation at all.
    let mut c = cluster(vec![odcr_of("cr-0a", "m5.2xlarge", 2)], 0);
    c.pending = pods("web", 20, 1000, 2);
    let p = planned(&plan(&c, catalog::embedded()));
    let (reserved, bought): (Vec<&PlannedClaim>, Vec<&PlannedClaim>) =
        p.iter().partition(|c| c.capacity_type == CapacityType::Reserved);
    assert_eq!(reserved_in(&p, "cr-0a"), 2, "{p:#?}");
    assert!(reserved.iter().all(|c| c.instance_type == "m5.2xlarge" && c.pods.len() == 7), "{reserved:#?}");
    assert!(bought.iter().all(|c| c.capacity_type == CapacityType::Spot), "{bought:#?}");
    assert_eq!(bought.iter().map(|c| c.pods.len()).sum::<usize>(), 6, "{p:#?}");

    let mut without = cluster(vec![], 0);
    without.pending = pods("web", 6, 1000, 2);
    let alone = planned(&plan(&without, catalog::embedded()));
    assert!(alone.iter().all(|c| c.instance_type != "m5.2xlarge"), "not the type bought for these pods: {alone:#?}");
    let alone: Vec<&PlannedClaim> = alone.iter().collect();
    assert!((cost(&bought) - cost(&alone)).abs() < 1e-9, "{bought:#?} costs more than {alone:#?}");
}

#[test]
fn pools_sharing_a_reservation_never_take_more_than_it_has() {
    // Two pools of two classes select one reservation of two m5.2xlarge (seven pods each), and
    // each pool has ten pods that only it runs: two claims go into the reservation, whichever
    // pool opens them, never a third; the rest is bought.
    let mut c = cluster(vec![odcr_of("cr-0a", "m5.2xlarge", 2)], 0);
    let mut b = c.nodepools[0].clone();
    b.name = "b".into();
    b.node_class = "b".into();
    c.nodepools[0].name = "a".into();
    c.nodepools.push(b);
    c.nodeclasses.push(NodeClass { name: "b".into(), ..Default::default() });
    let mut class_b = c.resolved[0].clone();
    class_b.name = "b".into();
    c.resolved.push(class_b);
    for pool in ["a", "b"] {
        let mut ps = pods(pool, 10, 1000, 2);
        for p in &mut ps {
            p.node_affinity = vec![[Requirement::single(labels::KARPENTER_NODEPOOL, pool)].into_iter().collect()];
        }
        c.pending.extend(ps);
    }
    let p = planned(&plan(&c, catalog::embedded()));
    assert_eq!(reserved_in(&p, "cr-0a"), 2, "{p:#?}");
    assert_eq!(p.iter().map(|c| c.pods.len()).sum::<usize>(), 20, "{p:#?}");
    // The first pool's ten pods: seven fill the first instance, three open the second (the other
    // pool's pods may not run on its claims).
    let reserved: usize = p.iter().filter(|c| c.capacity_type == CapacityType::Reserved).map(|c| c.pods.len()).sum();
    assert_eq!(reserved, 10, "{p:#?}");
    assert!(p.iter().all(|c| c.capacity_type != CapacityType::OnDemand), "{p:#?}");
}

#[test]
fn a_reservation_of_a_type_too_small_for_the_pods_is_not_used() {
    // Three-vCPU pods: an m5.large (two vCPUs) holds none, though its ODCR comes first by
    // Karpenter's order; the Capacity Block of one m5.2xlarge holds two of them and takes the
    // first claim, filled to its type; the third pod is bought.
    let day = T0.plus(Duration::from_secs(86_400));
    let mut c = cluster(
        vec![odcr("cr-0a", 4), Reservation { instance_type: "m5.2xlarge".into(), ..block("cr-0b", 1, day) }],
        0,
    );
    c.pending = pods("train", 3, 3000, 4);
    let p = planned(&plan(&c, catalog::embedded()));
    assert_eq!(reserved_in(&p, "cr-0a"), 0, "{p:#?}");
    assert_eq!(reserved_in(&p, "cr-0b"), 1, "{p:#?}");
    let block_claim = p.iter().find(|c| c.capacity_type == CapacityType::Reserved).unwrap();
    assert_eq!((block_claim.instance_type.as_str(), block_claim.pods.len()), ("m5.2xlarge", 2), "{p:#?}");
    let bought: Vec<&PlannedClaim> = p.iter().filter(|c| c.capacity_type != CapacityType::Reserved).collect();
    assert_eq!(bought.iter().map(|c| c.pods.len()).sum::<usize>(), 1, "{p:#?}");
    assert!(bought.iter().all(|c| c.capacity_type == CapacityType::Spot), "{p:#?}");
}

#[test]
fn a_claim_bought_for_larger_pods_leaves_the_reservation_its_pods() {
    // A six-vCPU pod no m5.large holds comes first in the pass, and its claim has room for the
    // one-vCPU pods; two m5.large reserved hold two of those for nothing. They go there, and
    // what is bought is what the other three pods would cost with no reservation at all.
    let mut c = cluster(vec![odcr("cr-0a", 2)], 0);
    c.pending = pods("train", 1, 6000, 4);
    c.pending.extend(pods("web", 4, 1000, 2));
    let p = planned(&plan(&c, catalog::embedded()));
    assert_eq!(reserved_in(&p, "cr-0a"), 2, "{p:#?}");
    let (reserved, bought): (Vec<&PlannedClaim>, Vec<&PlannedClaim>) =
        p.iter().partition(|c| c.capacity_type == CapacityType::Reserved);
    assert!(reserved.iter().all(|c| c.pods.len() == 1 && c.pods[0].starts_with("shop/web-")), "{reserved:#?}");
    assert_eq!(bought.iter().map(|c| c.pods.len()).sum::<usize>(), 3, "{p:#?}");

    let mut without = cluster(vec![], 0);
    without.pending = pods("train", 1, 6000, 4);
    without.pending.extend(pods("web", 2, 1000, 2));
    let alone = planned(&plan(&without, catalog::embedded()));
    let alone: Vec<&PlannedClaim> = alone.iter().collect();
    assert!((cost(&bought) - cost(&alone)).abs() < 1e-9, "{bought:#?} costs more than {alone:#?}");
}

#[test]
fn a_group_that_must_share_a_node_goes_into_a_reservation_only_when_it_fits_there_whole() {
    // Three one-vCPU pods with hostname affinity to each other: one m5.large holds one of them,
    // so a claim opened for the first in a reservation would strand the other two. They go on
    // one bought node together, and the reservation is left for pods it holds.
    use dovetail_core::model::{LabelSelector, NamespaceScope, PodAffinityTerm};
    let mut c = cluster(vec![odcr("cr-0a", 3)], 0);
    c.pending = pods("aff", 3, 1000, 1);
    for p in &mut c.pending {
        p.labels.insert("app".into(), "aff".into());
        p.pod_affinity.push(PodAffinityTerm {
            selector: LabelSelector::from_labels(&[("app", "aff")]),
            namespaces: NamespaceScope::List(vec![]),
            topology_key: labels::HOSTNAME.into(),
        });
    }
    let ds = plan(&c, catalog::embedded());
    let p = planned(&ds);
    assert_eq!(p.len(), 1, "{ds:#?}");
    assert_eq!(p[0].pods.len(), 3, "{p:#?}");
    assert_eq!(reserved_in(&p, "cr-0a"), 0, "{p:#?}");
}
