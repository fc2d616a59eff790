use super::*;
use crate::catalog::{embedded, CapacityType, InstanceType};
use crate::model::{KubeletConfig, NodeClass, NodePool, OwnerKind, Pod};
use crate::requirements::{Operator, Requirement};
use crate::resources::Resources;
use crate::scheduler::schedule;
use crate::snapshot::Snapshot;

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values).unwrap()
}

fn overlay(name: &str, weight: i32, reqs: Vec<Requirement>, price: Option<PriceChange>) -> NodeOverlay {
    NodeOverlay { name: name.into(), requirements: reqs.into_iter().collect(), weight, price, capacity: vec![] }
}

fn offering<'c>(c: &'c Catalog, t: &str, zone: &str, ct: CapacityType) -> &'c Offering {
    c.get(t).unwrap().offerings.iter().find(|o| o.zone == zone && o.capacity_type == ct).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

/// A Compute Savings Plan: 28% off on-demand m5 only.
fn savings_plan() -> NodeOverlay {
    overlay(
        "savings-plan",
        10,
        vec![
            req(labels::INSTANCE_FAMILY, Operator::In, &["m5"]),
            req(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]),
        ],
        Some(PriceChange::Percent(-28.0)),
    )
}

#[test]
fn prices_and_adjustments_parse_as_karpenter_allows() {
    assert_eq!(PriceChange::parse_price("0.05"), Ok(PriceChange::Set(0.05)));
    assert_eq!(PriceChange::parse_price("3"), Ok(PriceChange::Set(3.0)));
    for bad in ["-1", "+1", ".5", "1.", "1e3", "", "abc", "1.2.3"] {
        assert!(PriceChange::parse_price(bad).is_err(), "{bad:?}");
    }
    assert_eq!(PriceChange::parse_adjustment("+0.02"), Ok(PriceChange::Add(0.02)));
    assert_eq!(PriceChange::parse_adjustment("-.5"), Ok(PriceChange::Add(-0.5)));
    assert_eq!(PriceChange::parse_adjustment("+10%"), Ok(PriceChange::Percent(10.0)));
    assert_eq!(PriceChange::parse_adjustment("+250%"), Ok(PriceChange::Percent(250.0)));
    assert_eq!(PriceChange::parse_adjustment("-28%"), Ok(PriceChange::Percent(-28.0)));
    assert_eq!(PriceChange::parse_adjustment("-7.5%"), Ok(PriceChange::Percent(-7.5)));
    assert_eq!(PriceChange::parse_adjustment("-100%"), Ok(PriceChange::Percent(-100.0)));
    // Unsigned, a decrease past 100%, three-digit decreases, stray characters.
    for bad in ["0.5", "10%", "-101%", "-150%", "-100.5%", "+", "+%", "+1x", "--1", "+1.2.3", ""] {
        assert!(PriceChange::parse_adjustment(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn changes_never_make_a_price_negative() {
    assert!(close(PriceChange::Set(0.05).apply(0.096), 0.05));
    assert!(close(PriceChange::Add(0.02).apply(0.096), 0.116));
    assert!(close(PriceChange::Add(-1.0).apply(0.096), 0.0));
    assert!(close(PriceChange::Percent(-28.0).apply(0.1), 0.072));
    assert!(close(PriceChange::Percent(-100.0).apply(0.1), 0.0));
}

#[test]
fn no_overlays_leave_the_catalog_as_it_is() {
    let out = apply(embedded(), &[]);
    assert_eq!(&out.catalog, embedded());
    assert!(out.statuses.is_empty());
}

#[test]
fn a_savings_plan_discounts_on_demand_of_its_family_only_and_keeps_the_list_price() {
    let out = apply(embedded(), &[savings_plan()]);
    let (c, base) = (&out.catalog, embedded());
    for zone in ["us-east-1a", "us-east-1b"] {
        let list = offering(base, "m5.large", zone, CapacityType::OnDemand).price;
        let o = offering(c, "m5.large", zone, CapacityType::OnDemand);
        assert!(close(o.price, list * 0.72), "{zone}: {} vs {}", o.price, list * 0.72);
        assert_eq!(o.list_price, Some(list));
        // Spot, and other families, are as the catalog has them.
        assert_eq!(
            offering(c, "m5.large", zone, CapacityType::Spot),
            offering(base, "m5.large", zone, CapacityType::Spot)
        );
        assert_eq!(
            offering(c, "c5.large", zone, CapacityType::OnDemand),
            offering(base, "c5.large", zone, CapacityType::OnDemand)
        );
    }
    let m5 = base.types.iter().filter(|t| t.name.starts_with("m5.")).count();
    let zones = offering_count(base, "m5.large", CapacityType::OnDemand);
    assert_eq!(
        out.statuses,
        vec![Status { name: "savings-plan".into(), outcome: Outcome::Applied { offerings: m5 * zones, types: 0 } }]
    );
}

fn offering_count(c: &Catalog, t: &str, ct: CapacityType) -> usize {
    c.get(t).unwrap().offerings.iter().filter(|o| o.capacity_type == ct).count()
}

#[test]
fn a_zone_requirement_selects_that_zone_s_offerings_only() {
    let o = overlay(
        "cheap-in-a",
        0,
        vec![req(labels::ZONE, Operator::In, &["us-east-1a"]), req(labels::INSTANCE_TYPE, Operator::In, &["m5.large"])],
        Some(PriceChange::Set(0.01)),
    );
    let c = apply(embedded(), &[o]).catalog;
    assert!(close(offering(&c, "m5.large", "us-east-1a", CapacityType::Spot).price, 0.01));
    assert!(close(offering(&c, "m5.large", "us-east-1a", CapacityType::OnDemand).price, 0.01));
    let b = offering(&c, "m5.large", "us-east-1b", CapacityType::OnDemand);
    assert_eq!(b, offering(embedded(), "m5.large", "us-east-1b", CapacityType::OnDemand));
}

#[test]
fn the_heavier_overlay_prices_an_offering_and_lighter_ones_price_the_rest() {
    let heavy = overlay(
        "heavy",
        50,
        vec![req(labels::INSTANCE_TYPE, Operator::In, &["m5.large"])],
        Some(PriceChange::Set(0.5)),
    );
    let light =
        overlay("light", 1, vec![req(labels::INSTANCE_FAMILY, Operator::In, &["m5"])], Some(PriceChange::Add(1.0)));
    // Input order does not matter: weight does.
    let out = apply(embedded(), &[light, heavy]);
    let c = &out.catalog;
    let od = |t| offering(c, t, "us-east-1a", CapacityType::OnDemand).price;
    assert!(close(od("m5.large"), 0.5));
    let list = offering(embedded(), "m5.xlarge", "us-east-1a", CapacityType::OnDemand).price;
    assert!(close(od("m5.xlarge"), list + 1.0), "an adjustment applies to the list price");
    assert_eq!(out.statuses[0].name, "heavy");
    assert!(matches!(out.statuses[1].outcome, Outcome::Applied { .. }));
}

#[test]
fn equal_weights_conflict_and_the_second_is_not_applied_at_all() {
    // `b-wide` is taken first (later name among equal weights), so `a-narrow` conflicts with it
    // on m5.large, and does not price c5.large either: an overlay applies whole or not at all.
    let wide =
        overlay("b-wide", 5, vec![req(labels::INSTANCE_FAMILY, Operator::In, &["m5"])], Some(PriceChange::Set(0.2)));
    let narrow = overlay(
        "a-narrow",
        5,
        vec![req(labels::INSTANCE_TYPE, Operator::In, &["m5.large", "c5.large"])],
        Some(PriceChange::Set(0.3)),
    );
    let out = apply(embedded(), &[narrow, wide]);
    assert_eq!(
        out.statuses[1],
        Status { name: "a-narrow".into(), outcome: Outcome::Conflict { with: "b-wide".into() } }
    );
    let c = &out.catalog;
    assert!(close(offering(c, "m5.large", "us-east-1a", CapacityType::OnDemand).price, 0.2));
    assert_eq!(c.get("c5.large"), embedded().get("c5.large"));
    // A different weight is no conflict: the lighter one prices what the heavier left.
    let narrow = overlay(
        "a-narrow",
        4,
        vec![req(labels::INSTANCE_TYPE, Operator::In, &["m5.large", "c5.large"])],
        Some(PriceChange::Set(0.3)),
    );
    let wide =
        overlay("b-wide", 5, vec![req(labels::INSTANCE_FAMILY, Operator::In, &["m5"])], Some(PriceChange::Set(0.2)));
    let out = apply(embedded(), &[narrow, wide]);
    assert!(out.statuses.iter().all(|s| matches!(s.outcome, Outcome::Applied { .. })), "{:?}", out.statuses);
    assert!(close(offering(&out.catalog, "c5.large", "us-east-1a", CapacityType::OnDemand).price, 0.3));
    assert!(close(offering(&out.catalog, "m5.large", "us-east-1a", CapacityType::OnDemand).price, 0.2));
}

#[test]
fn capacity_adds_extended_resources_to_capacity_and_allocatable() {
    let kubelet = KubeletConfig::default();
    let mut o = overlay("smarter-devices", 0, vec![req(labels::INSTANCE_TYPE, Operator::In, &["m5.large"])], None);
    o.capacity = vec![("smarter-devices/fuse".into(), 10)];
    let mut heavier = overlay("gpu-slices", 9, vec![req(labels::INSTANCE_FAMILY, Operator::In, &["m5"])], None);
    heavier.capacity = vec![("smarter-devices/fuse".into(), 2), ("example.com/slice".into(), 4)];
    let out = apply(embedded(), &[o, heavier]);
    let m5: &InstanceType = out.catalog.get("m5.large").unwrap();
    let base = embedded().get("m5.large").unwrap();
    assert_eq!(m5.capacity(&kubelet).get("smarter-devices/fuse"), 2, "the heavier overlay's quantity wins");
    assert_eq!(m5.allocatable(&kubelet).get("example.com/slice"), 4);
    assert_eq!(m5.allocatable(&kubelet).cpu, base.allocatable(&kubelet).cpu, "standard resources are untouched");
    assert_eq!(m5.offerings, base.offerings, "capacity overlays change no price");
    assert_eq!(out.catalog.get("c5.large"), embedded().get("c5.large"));
    // Equal weights setting one resource of one type conflict.
    let mut a = overlay("a", 3, vec![req(labels::INSTANCE_TYPE, Operator::In, &["m5.large"])], None);
    a.capacity = vec![("example.com/x".into(), 1)];
    let mut b = overlay("b", 3, vec![req(labels::INSTANCE_FAMILY, Operator::In, &["m5"])], None);
    b.capacity = vec![("example.com/x".into(), 2)];
    let out = apply(embedded(), &[a, b]);
    assert_eq!(out.statuses[1].outcome, Outcome::Conflict { with: "b".into() });
    assert_eq!(out.catalog.get("m5.large").unwrap().allocatable(&kubelet).get("example.com/x"), 2);
}

#[test]
fn a_requirement_on_a_label_no_type_carries_matches_nothing_but_not_in_matches_everything() {
    let gpu = overlay(
        "gpus",
        0,
        vec![req(labels::INSTANCE_GPU_COUNT, Operator::Exists, &[] as &[&str])],
        Some(PriceChange::Set(0.0)),
    );
    let out = apply(embedded(), &[gpu]);
    assert!(close(offering(&out.catalog, "g4dn.xlarge", "us-east-1a", CapacityType::OnDemand).price, 0.0));
    assert_eq!(out.catalog.get("m5.large"), embedded().get("m5.large"));
    let not_spot = overlay(
        "not-spot",
        0,
        vec![req(labels::CAPACITY_TYPE, Operator::NotIn, &["spot"])],
        Some(PriceChange::Add(0.001)),
    );
    let out = apply(embedded(), &[not_spot]);
    let Outcome::Applied { offerings, .. } = out.statuses[0].outcome else { panic!() };
    let on_demand: usize = embedded()
        .types
        .iter()
        .map(|t| t.offerings.iter().filter(|o| o.capacity_type == CapacityType::OnDemand).count())
        .sum();
    assert_eq!(offerings, on_demand);
}

/// One pending pod (of a ReplicaSet) and an on-demand pool, of `types` only when given.
fn on_demand(mut pod: Pod, types: Option<&[&str]>) -> Snapshot {
    let mut pool = NodePool::new("default", "default");
    pool.requirements.add(req(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]));
    if let Some(types) = types {
        pool.requirements.add(req(labels::INSTANCE_TYPE, Operator::In, types));
    }
    pod.owner = OwnerKind::ReplicaSet;
    Snapshot {
        pods: vec![pod],
        nodepools: vec![pool],
        nodeclasses: vec![NodeClass { name: "default".into(), ..NodeClass::default() }],
        ..Default::default()
    }
}

/// The scheduler buys by the effective price, and the plan shows the list price beside it.
#[test]
fn plans_buy_by_the_effective_price_and_show_the_list_price() {
    let pod = Pod::new("default", "web", Resources::new(500, 1 << 30));
    let snap = on_demand(pod, Some(&["m5.large", "c5.large", "m6i.large"]));
    let before = schedule(&snap, embedded());
    assert_eq!(before.nodeclaims[0].instance_type, "c5.large", "the cheapest of the three by list price");
    assert_eq!(before.nodeclaims[0].list_price_per_hour, None);
    // 60% off m6i makes it the cheapest.
    let deal = overlay(
        "m6i-deal",
        0,
        vec![req(labels::INSTANCE_FAMILY, Operator::In, &["m6i"])],
        Some(PriceChange::Percent(-60.0)),
    );
    let c = apply(embedded(), &[deal]).catalog;
    let after = schedule(&snap, &c);
    let claim = &after.nodeclaims[0];
    assert_eq!(claim.instance_type, "m6i.large");
    let list = offering(embedded(), "m6i.large", &claim.zone, CapacityType::OnDemand).price;
    assert!(close(claim.price_per_hour, list * 0.4), "{claim:?}");
    assert_eq!(claim.list_price_per_hour, Some(list));
    assert!(close(after.cost_per_hour, list * 0.4));
}

/// A pod requesting an extended resource no type advertises is placed once an overlay gives the
/// resource to some types, and only on those.
#[test]
fn pods_requesting_an_overlaid_resource_go_to_the_types_that_have_it() {
    let mut pod = Pod::new("default", "fuse", Resources::new(500, 1 << 30));
    pod.requests.set("smarter-devices/fuse", 2);
    let snap = on_demand(pod, None);
    let before = schedule(&snap, embedded());
    assert!(before.nodeclaims.is_empty() && before.unschedulable.len() == 1, "{before:?}");
    let mut o = overlay("fuse", 0, vec![req(labels::INSTANCE_FAMILY, Operator::In, &["m5", "c5"])], None);
    o.capacity = vec![("smarter-devices/fuse".into(), 20)];
    let after = schedule(&snap, &apply(embedded(), &[o]).catalog);
    assert!(after.unschedulable.is_empty(), "{after:?}");
    let claim = &after.nodeclaims[0];
    assert_eq!(claim.allocatable["smarter-devices/fuse"], "20");
    for t in &claim.instance_types {
        assert!(t.starts_with("m5.") || t.starts_with("c5."), "{t} has no smarter-devices/fuse");
    }
}
