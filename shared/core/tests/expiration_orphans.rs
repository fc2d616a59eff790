//! Expiration (forceful, outside budgets) and the sweeper's orphan rules.

use std::collections::BTreeMap;
use std::time::Duration;

use dovetail_core::catalog::CapacityType;
use dovetail_core::cluster::{Cluster, Described, Instance, InstanceQuery};
use dovetail_core::decision::{Action, Decision};
use dovetail_core::disruption::expiration::{expirations, expires_at};
use dovetail_core::disruption::orphans::{orphans, ORPHAN_GRACE};
use dovetail_core::labels;
use dovetail_core::model::{Budget, BudgetNodes, Node, NodePool, Pod};
use dovetail_core::nodeclaim::{Disruption, Launch, NodeClaim, Phase, Reason};
use dovetail_core::resources::Resources;
use dovetail_core::time::Time;

/// 2026-10-22T09:00:00Z.
const LAUNCHED: i64 = 1_792_659_600;

fn t(minutes: i64) -> Time {
    Time::from_secs(LAUNCHED + minutes * 60)
}

fn claim(name: &str, phase: Phase, launched: Time) -> NodeClaim {
    let mut c = NodeClaim::launching(name, "default", "default", launched);
    c.phase = phase;
    c.expire_after = Some(Duration::from_secs(720 * 3600));
    c.node_name = Some(format!("node-{name}"));
    c.launch = Some(Launch {
        instance_id: format!("i-{name}"),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: CapacityType::OnDemand,
        image_id: "ami-1".into(),
        subnet_id: "subnet-a".into(),
        security_groups: vec!["sg-1".into()],
        price: 0.096,
        launched_at: launched,
    });
    c
}

fn instance(id: &str, tag: Option<&str>, launched: Time) -> Instance {
    Instance {
        id: id.into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        state: "running".into(),
        launched_at: launched,
        tags: tag.map(|t| BTreeMap::from([(labels::NODECLAIM.to_string(), t.to_string())])).unwrap_or_default(),
        image_id: "ami-1".into(),
        subnet_id: "subnet-a".into(),
        security_groups: vec![],
    }
}

fn node(name: &str, claim: Option<&str>) -> Node {
    let mut l = BTreeMap::from([(labels::NODEPOOL.to_string(), "default".to_string())]);
    if let Some(c) = claim {
        l.insert(labels::NODECLAIM.to_string(), c.to_string());
    }
    Node::new(name, l, Resources::default())
}

/// A cluster where every claim has its instance and node.
fn healthy(claims: Vec<NodeClaim>, now: Time) -> Cluster {
    let mut c = Cluster { now, ..Default::default() };
    c.nodepools.push(NodePool::new("default", "default"));
    for cl in &claims {
        let l = cl.launch.as_ref().unwrap();
        c.instances.push(instance(&l.instance_id, Some(&cl.name), l.launched_at));
        c.nodes.push(node(cl.node_name.as_deref().unwrap(), Some(&cl.name)));
    }
    c.claims = claims;
    c
}

fn actions(d: &[Decision]) -> Vec<&Action> {
    d.iter().filter_map(|d| d.action.as_ref()).collect()
}

// ---- expiration ----

#[test]
fn an_expired_claim_is_disrupted_with_its_reason() {
    let c = healthy(vec![claim("a", Phase::Initialized, t(0))], t(720 * 60));
    assert_eq!(expires_at(&c.claims[0]), Some(t(720 * 60)));
    let d = expirations(&c);
    assert_eq!(d.len(), 2);
    assert_eq!(d[0].why, "expired: launched 2026-10-22T09:00:00Z, expireAfter 720h");
    let Some(Action::WriteClaim(w)) = &d[0].action else { panic!("{d:?}") };
    let dis = w.disruption.as_ref().unwrap();
    assert_eq!((dis.reason, dis.since), (Reason::Expired, t(720 * 60)));
    assert_eq!(w.version, c.claims[0].version + 1, "written as the next version (the store's conditional write)");
    assert!(
        matches!(&d[1].action, Some(Action::Event { object, reason, .. }) if object == "Node/node-a" && reason == "Expired")
    );
}

#[test]
fn unexpired_never_expiring_and_already_disrupting_claims_are_not_news() {
    let mut never = claim("never", Phase::Initialized, t(0));
    never.expire_after = None;
    let mut busy = claim("busy", Phase::Initialized, t(0));
    busy.disruption = Some(Disruption {
        reason: Reason::Drifted,
        since: t(1),
        replacements: vec![],
        message: "drifted".into(),
        reclaim_at: None,
    });
    let draining = claim("draining", Phase::Draining, t(0));
    let young = claim("young", Phase::Initialized, t(10));
    let c = healthy(vec![never, busy, draining, young], t(720 * 60 + 5));
    assert!(expirations(&c).is_empty(), "{:?}", expirations(&c));
}

#[test]
fn expiration_is_not_subject_to_budgets() {
    let claims = (0..5).map(|i| claim(&format!("c{i}"), Phase::Registered, t(0))).collect();
    let mut c = healthy(claims, t(800 * 60));
    c.nodepools[0].disruption.budgets =
        vec![Budget { nodes: BudgetNodes::Count(0), schedule: None, duration: None, reasons: vec![] }];
    let writes = expirations(&c).into_iter().filter(|d| matches!(d.action, Some(Action::WriteClaim(_)))).count();
    assert_eq!(writes, 5);
}

#[test]
fn age_counts_from_creation_when_no_instance_is_recorded() {
    let mut c = claim("a", Phase::Launched, t(0));
    c.launch = None;
    c.created_at = t(-60);
    assert_eq!(expires_at(&c), Some(t(720 * 60 - 60)));
}

// ---- orphans ----

#[test]
fn an_untracked_instance_is_terminated_after_the_grace_period() {
    let mut c = healthy(vec![claim("a", Phase::Initialized, t(0))], t(100));
    c.instances.push(instance("i-stray", Some("gone-claim"), t(90)));
    c.instances.push(instance("i-young", Some("other-gone"), t(98)));
    c.instances.push(instance("i-not-ours", None, t(0)));
    let mut dying = instance("i-dying", Some("x"), t(0));
    dying.state = "shutting-down".into();
    c.instances.push(dying);
    let d = orphans(&c);
    assert_eq!(actions(&d), vec![&Action::TerminateInstance { instance_id: "i-stray".into() }]);
    assert_eq!(
        d[0].why,
        "orphan instance i-stray (m5.large, launched 2026-10-22T10:30:00Z): its nodeclaim gone-claim does not \
         exist; terminated after a 5m grace period"
    );
    assert_eq!(d.len(), 2);
    assert!(d[1].action.is_none());
    assert!(d[1].why.contains("i-young looks orphaned") && d[1].why.contains("terminated at 2026-10-22T10:43:00Z"));
    assert_eq!(ORPHAN_GRACE, Duration::from_secs(300));
}

#[test]
fn a_duplicate_instance_is_an_orphan_but_a_launching_claim_owns_its_tag() {
    let mut c = healthy(vec![claim("a", Phase::Initialized, t(0))], t(100));
    c.instances.push(instance("i-dup", Some("a"), t(0)));
    let mut launching = NodeClaim::launching("b", "default", "default", t(0));
    launching.launch = None;
    c.claims.push(launching);
    c.instances.push(instance("i-b", Some("b"), t(0)));
    let d = orphans(&c);
    assert_eq!(actions(&d), vec![&Action::TerminateInstance { instance_id: "i-dup".into() }]);
    assert!(d[0].why.contains("its nodeclaim a records instance i-a instead"), "{}", d[0].why);
}

#[test]
fn a_claim_whose_instance_vanished_is_terminated_and_its_pods_released() {
    let mut c = healthy(vec![claim("a", Phase::Initialized, t(0)), claim("b", Phase::Registered, t(0))], t(60));
    c.nodes[0].pods.push(Pod::new("shop", "cart-7", Resources::default()).into());
    c.instances.retain(|i| i.id != "i-a");
    c.instances.iter_mut().find(|i| i.id == "i-b").unwrap().state = "terminated".into();
    let d = orphans(&c);
    let acts = actions(&d);
    assert_eq!(acts.len(), 6, "{d:#?}");
    let Action::WriteClaim(w) = acts[0] else { panic!() };
    assert_eq!((w.name.as_str(), w.phase), ("a", Phase::Terminated));
    assert_eq!(acts[1], &Action::DeleteNode { node: "node-a".into() });
    assert_eq!(d[0].why, "instance i-a of nodeclaim a no longer exists; releasing pods shop/cart-7");
    assert!(matches!(acts[2], Action::Event { reason, .. } if reason == "InstanceVanished"));
    assert_eq!(d[3].why, "instance i-b of nodeclaim b is terminated");
}

#[test]
fn fresh_and_terminating_claims_are_not_called_vanished() {
    let fresh = claim("fresh", Phase::Launched, t(58));
    let terminating = claim("done", Phase::Terminating, t(0));
    let mut c = healthy(vec![fresh, terminating], t(60));
    c.claims[0].node_name = None;
    c.claims[1].node_name = None;
    c.instances.clear();
    c.nodes.clear();
    assert!(orphans(&c).is_empty(), "{:?}", orphans(&c));
}

#[test]
fn no_orphan_pass_over_a_read_that_described_only_some_instances() {
    // A per-event read asked for b's instance only: a's is absent because it was not asked for.
    let mut c = healthy(vec![claim("a", Phase::Initialized, t(0)), claim("b", Phase::Initialized, t(0))], t(60));
    let mut query = InstanceQuery::default();
    query.instance("i-b");
    c.instances.retain(|i| i.id == "i-b");
    c.described = Described::Only(query);
    let d = orphans(&c);
    assert!(actions(&d).is_empty(), "nothing vanished, nothing orphaned: {d:#?}");
    assert_eq!(d.len(), 1, "one note says why: {d:#?}");
}

#[test]
fn nodes_with_our_labels_but_no_claim() {
    let mut c = healthy(vec![claim("a", Phase::Initialized, t(0))], t(100));
    // Instance gone as well: delete the Node so its pods are rescheduled.
    c.nodes.push(node("ghost", Some("lost")));
    // Instance still running (an orphan instance): keep pods off until it is terminated.
    c.nodes.push(node("stray", Some("stray-claim")));
    c.instances.push(instance("i-stray", Some("stray-claim"), t(99)));
    // A node we do not label is none of our business.
    c.nodes.push(Node::new("foreign", BTreeMap::new(), Resources::default()));
    let d = orphans(&c);
    let acts = actions(&d);
    assert!(acts.contains(&&Action::DeleteNode { node: "ghost".into() }), "{d:#?}");
    assert!(acts.iter().any(|a| matches!(a, Action::TaintNode { node, taint }
        if node == "stray" && taint.key == labels::TAINT_DISRUPTED)));
    let events: Vec<&str> = d
        .iter()
        .filter_map(|x| match &x.action {
            Some(Action::Event { object, reason, .. }) if reason == "OrphanNode" => Some(object.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(events, vec!["Node/ghost", "Node/stray"]);
    assert!(!acts.iter().any(|a| matches!(a, Action::DeleteNode { node } if node == "foreign" || node == "node-a")));
    assert!(!acts.iter().any(|a| matches!(a, Action::TerminateInstance { .. })), "i-stray is inside its grace");
}

#[test]
fn a_node_is_known_by_its_instance_before_its_claim_records_it() {
    // The launch of `late` reached EC2 but its record did not (the store was down): the claim is
    // still Launching, without an instance, and the Node registered with only the pool's label.
    let mut c = healthy(vec![claim("a", Phase::Initialized, t(0))], t(100));
    let mut late = claim("late", Phase::Launching, t(99));
    (late.launch, late.node_name) = (None, None);
    c.claims.push(late);
    c.instances.push(instance("i-late", Some("late"), t(99)));
    let mut registered = node("ip-late", None);
    registered.provider_id = Some("aws:///us-east-1a/i-late".into());
    c.nodes.push(registered);
    // A second instance tagged for `a` (a duplicate launch) whose Node registered: the claim
    // records another instance, so this Node is an orphan's and kept free of new pods.
    c.instances.push(instance("i-dup", Some("a"), t(99)));
    let mut duplicate = node("ip-dup", None);
    duplicate.provider_id = Some("aws:///us-east-1a/i-dup".into());
    c.nodes.push(duplicate);
    // A Node whose instance is gone and whose label names no claim.
    let mut ghost = node("ip-ghost", None);
    ghost.provider_id = Some("aws:///us-east-1a/i-ghost".into());
    c.nodes.push(ghost);

    let d = orphans(&c);
    let touched = |name: &str| {
        actions(&d)
            .into_iter()
            .any(|a| matches!(a, Action::DeleteNode { node } | Action::TaintNode { node, .. } if node == name))
    };
    assert!(!touched("ip-late"), "the Launching claim owns its instance's Node: {d:#?}");
    assert!(actions(&d).iter().any(|a| matches!(a, Action::TaintNode { node, .. } if node == "ip-dup")), "{d:#?}");
    assert!(actions(&d).contains(&&Action::DeleteNode { node: "ip-ghost".into() }), "{d:#?}");
}
