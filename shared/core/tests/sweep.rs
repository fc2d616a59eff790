//! The sweeper's combined pass, and "launch first, then drain" for voluntary replacements.

mod lifecycle_support;

use std::time::Duration;

use dovetail_core::catalog;
use dovetail_core::disruption::sweep::sweep;
use dovetail_core::disruption::{Action, Decision};
use dovetail_core::model::{Budget, BudgetNodes, NodeClass, NodePool};
use dovetail_core::nodeclaim::{Phase, Reason};
use dovetail_core::termination;
use lifecycle_support::*;

fn writes(decisions: &[Decision]) -> Vec<(String, Option<Reason>, Phase)> {
    decisions
        .iter()
        .filter_map(|d| match &d.action {
            Some(Action::WriteClaim(c)) => Some((c.name.clone(), c.disruption.as_ref().map(|x| x.reason), c.phase)),
            _ => None,
        })
        .collect()
}

fn launches(decisions: &[Decision]) -> Vec<String> {
    decisions
        .iter()
        .filter_map(|d| match &d.action {
            Some(Action::Launch(p)) => Some(p.name.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_voluntary_replacement_waits_for_its_new_capacity_before_draining() {
    let mut old = disrupted("old", Reason::Drifted, T0.plus(secs(3600)));
    old.disruption.as_mut().unwrap().replacements = vec!["old-r1".into()];
    let mut repl = launched("old-r1");
    repl.phase = Phase::Launched;
    let mut c = cluster(T0.plus(secs(3700)), &old, "running", Some(node("old")));
    c.claims.push(repl.clone());
    c.instances.push(instance("old-r1", "running"));

    let step = termination::step(&old, &c);
    assert!(
        !actions(&step).iter().any(|a| matches!(a, Action::TaintNode { .. } | Action::Evict { .. })),
        "nothing is drained while the replacement is launching: {:?}",
        actions(&step)
    );
    assert!(
        sentences(&step).iter().any(|s| s.contains("replacement old-r1 is not initialized")),
        "{:?}",
        sentences(&step)
    );
    assert!(step.requeue.is_some_and(|r| r <= Duration::from_secs(10)));

    // Once the replacement is initialized, the drain starts (taint first).
    c.claims[1].phase = Phase::Initialized;
    let step = termination::step(&old, &c);
    assert!(actions(&step).iter().any(|a| matches!(a, Action::TaintNode { .. })), "{:?}", actions(&step));
}

#[test]
fn a_forceful_disruption_does_not_wait_for_replacements() {
    let mut old = disrupted("old", Reason::SpotInterrupted, T0.plus(secs(3600)));
    old.disruption.as_mut().unwrap().replacements = vec!["old-r1".into()];
    let mut c = cluster(T0.plus(secs(3601)), &old, "running", Some(node("old")));
    c.claims.push(launched("old-r1"));
    let step = termination::step(&old, &c);
    assert!(actions(&step).iter().any(|a| matches!(a, Action::TaintNode { .. })), "{:?}", actions(&step));
}

/// One expired claim and one drifted claim (with a pod) in pool `default` with a single budget.
fn expired_and_drifted(nodes: BudgetNodes) -> dovetail_core::disruption::Cluster {
    let now = T0.plus(secs(31 * 24 * 3600));
    let mut expired = running("exp");
    expired.expire_after = Some(Duration::from_secs(720 * 3600));
    let mut drifted = running("dft");
    drifted.hashes.nodepool = "old-hash".into();
    let mut dnode = node("dft");
    dnode.pods.push(pod("shop", "cart-0"));
    let mut pool = NodePool::new("default", "default");
    pool.disruption.budgets = vec![Budget { nodes, schedule: None, duration: None, reasons: vec![] }];
    let mut c = cluster(now, &expired, "running", Some(node("exp")));
    c.claims.push(drifted);
    c.nodes.push(dnode);
    c.instances.push(instance("dft", "running"));
    c.nodeclasses = vec![NodeClass { name: "default".into(), ..Default::default() }];
    c.nodepool_hashes.insert("default".into(), dovetail_core::disruption::drift::nodepool_hash(&pool));
    c.nodepools = vec![pool];
    c
}

#[test]
fn expiry_is_forceful_and_counts_against_the_budget_drift_waits_for() {
    // Default budget: 10% of 2 nodes allows 1; the expiring node already takes it.
    let c = expired_and_drifted(BudgetNodes::Percent(10));
    let decisions = sweep(&c, catalog::embedded());
    let w = writes(&decisions);
    assert!(w.iter().any(|x| x.0 == "exp" && x.1 == Some(Reason::Expired)), "{w:?}");
    assert!(!w.iter().any(|x| x.0 == "dft"), "drift must wait: {w:?}");
    assert!(launches(&decisions).is_empty());
    let note = decisions
        .iter()
        .find(|d| d.claim.as_deref() == Some("dft") && d.action.is_none())
        .expect("a note on the drifted claim");
    assert!(note.why.contains("budget 10% of 2 nodes allows 1; 1 already disrupting"), "{}", note.why);
}

#[test]
fn drift_launches_its_replacement_before_the_drain_is_recorded() {
    let c = expired_and_drifted(BudgetNodes::Percent(100));
    let decisions = sweep(&c, catalog::embedded());
    let w = writes(&decisions);
    assert!(w.iter().any(|x| x.0 == "exp" && x.1 == Some(Reason::Expired)), "{w:?}");
    assert!(w.iter().any(|x| x.0 == "dft" && x.1 == Some(Reason::Drifted)), "{w:?}");
    assert_eq!(launches(&decisions), vec!["dft-r1".to_string()]);
    let launch_at = decisions.iter().position(|d| matches!(&d.action, Some(Action::Launch(_)))).unwrap();
    let write_at =
        decisions.iter().position(|d| matches!(&d.action, Some(Action::WriteClaim(c)) if c.name == "dft")).unwrap();
    assert!(launch_at < write_at, "launch first, then drain");
    let recorded = decisions
        .iter()
        .find_map(|d| match &d.action {
            Some(Action::WriteClaim(c)) if c.name == "dft" => c.disruption.clone(),
            _ => None,
        })
        .unwrap();
    assert_eq!(recorded.replacements, vec!["dft-r1".to_string()]);
}
