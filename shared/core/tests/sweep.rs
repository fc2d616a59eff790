//! The sweeper's combined pass, and "launch first, then drain" for voluntary replacements.

mod lifecycle_support;
mod sweep_world;

use std::time::Duration;

use dovetail_core::catalog;
use dovetail_core::decision::{Action, Decision};
use dovetail_core::disruption::budgets::{standing, Standing};
use dovetail_core::disruption::sweep::sweep;
use dovetail_core::interruption::{decide, Message};
use dovetail_core::model::{Budget, BudgetNodes, NodeClass, NodePool};
use dovetail_core::nodeclaim::{Phase, Reason};
use dovetail_core::termination;
use lifecycle_support::*;
use sweep_world as w;

fn writes(decisions: &[Decision]) -> Vec<(String, Option<Reason>, Phase)> {
    decisions
        .iter()
        .filter_map(|d| match &d.action {
            Some(Action::WriteClaim(c)) => Some((c.name.clone(), c.disruption.as_ref().map(|x| x.reason), c.phase)),
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
        !actions(&step).iter().any(|a| matches!(a, Action::Evict { .. })),
        "nothing is evicted while the replacement is launching: {:?}",
        actions(&step)
    );
    // Tainted at once, as Karpenter does: new pods go to the new capacity.
    assert!(actions(&step).iter().any(|a| matches!(a, Action::TaintNode { .. })), "{:?}", actions(&step));
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
fn expired_and_drifted(nodes: BudgetNodes) -> dovetail_core::cluster::Cluster {
    let now = T0.plus(secs(31 * 24 * 3600));
    let mut expired = running("exp");
    expired.expire_after = Some(Duration::from_secs(720 * 3600));
    let mut drifted = running("dft");
    drifted.hashes.nodepool = "old-hash".into();
    let mut dnode = node("dft");
    dnode.pods.push(pod("shop", "cart-0").into());
    let mut pool = NodePool::new("default", "default");
    pool.disruption.budgets = vec![Budget { nodes, schedule: None, duration: None, reasons: vec![] }];
    let mut c = cluster(now, &expired, "running", Some(node("exp")));
    c.claims.push(drifted);
    c.nodes.push(dnode);
    c.instances.push(instance("dft", "running"));
    c.nodeclasses = vec![NodeClass { name: "default".into(), ..Default::default() }];
    c.nodepool_hashes.insert("default".into(), dovetail_core::hash::nodepool_hash(&pool));
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
    assert!(w::launches(&decisions).is_empty());
    let note = w::note_on(&decisions, "dft").expect("a note on the drifted claim");
    assert!(note.why.contains("budget 10% of 2 nodes allows 1; 1 already disrupting"), "{}", note.why);
}

#[test]
fn drift_launches_its_replacement_before_the_drain_is_recorded() {
    let c = expired_and_drifted(BudgetNodes::Percent(100));
    let decisions = sweep(&c, catalog::embedded());
    let w = writes(&decisions);
    assert!(w.iter().any(|x| x.0 == "exp" && x.1 == Some(Reason::Expired)), "{w:?}");
    assert!(w.iter().any(|x| x.0 == "dft" && x.1 == Some(Reason::Drifted)), "{w:?}");
    assert_eq!(w::launches(&decisions), vec!["dft-r1".to_string()]);
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

// ---------------------------------------------------------------------------------------------
// Whole passes on a world of real instance types: interruptions arriving mid-sweep, scheduled
// budgets, every voluntary and forceful reason in one pass, and resuming after a crash.

/// Pool `default` (no consolidation) with these budgets and nodes `a`, `b`, `c`, `d` (m5.large),
/// each running one 1.5-cpu pod that fits nowhere else and only runs on m5.large, launched a day
/// apart (a oldest).
fn four(budgets: Vec<Budget>) -> w::World {
    let mut pool = w::pool("default", budgets);
    pool.disruption.consolidate_after = None;
    let mut c = w::cluster(w::at(2, 12, 0), vec![pool]);
    for (i, name) in ["a", "b", "c", "d"].into_iter().enumerate() {
        let pods = vec![w::pinned(w::pod(&format!("{name}-0"), 1500, 1024), "m5.large")];
        w::add_node(&mut c, name, "default", "m5.large", w::at(-10 + i as i64, 0, 0), pods);
    }
    w::World::new(c)
}

/// Claims of pool `default` using up budget now.
fn disrupting(c: &dovetail_core::cluster::Cluster) -> Vec<String> {
    c.claims.iter().filter(|x| matches!(standing(x, c), Standing::Disrupting { .. })).map(|x| x.name.clone()).collect()
}

/// Sweeps once a minute until `done` or 60 passes, carrying every decision out; checks after
/// each pass that at most `limit` claims use up budget. Returns every claim launched.
fn run(world: &mut w::World, limit: usize, done: impl Fn(&w::World) -> bool) -> Vec<String> {
    let mut launched = vec![];
    for _ in 0..60 {
        if done(world) {
            return launched;
        }
        let ds = sweep(&world.cluster, catalog::embedded());
        launched.extend(w::launches(&ds));
        world.apply(&ds, usize::MAX).unwrap();
        let busy = disrupting(&world.cluster);
        assert!(busy.len() <= limit, "{busy:?} disrupting at {} with a budget of {limit}", world.cluster.now);
        world.tick(Duration::from_secs(60));
    }
    panic!("not done after 60 passes: {:#?}", world.cluster.claims);
}

fn terminated(world: &w::World, names: &[&str]) -> bool {
    names.iter().all(|n| world.cluster.claims.iter().any(|c| c.name == *n && c.phase == Phase::Terminated))
}

#[test]
fn an_interrupted_node_uses_the_budget_and_is_not_replaced_twice() {
    let mut world = four(vec![w::budget(BudgetNodes::Count(1))]);
    w::drift(&mut world.cluster, "b");
    w::drift(&mut world.cluster, "c");
    let stopping = Message::StateChange { instance_id: "i-a".into(), state: "stopping".into() };
    let ds = decide(&stopping, &world.cluster, catalog::embedded());
    assert_eq!(w::launches(&ds), vec!["a-r1".to_string()]);
    world.apply(&ds, usize::MAX).unwrap();

    // The next sweep drains `a` at once (forceful), launches nothing — no second replacement for
    // `a`, and no drift replacement while `a` holds the only slot — and says why.
    let ds = sweep(&world.cluster, catalog::embedded());
    assert!(w::launches(&ds).is_empty(), "{ds:#?}");
    assert!(w::disrupted(&ds).iter().all(|(n, _)| n == "a"), "{:?}", w::disrupted(&ds));
    assert!(
        ds.iter().any(|d| matches!(&d.action, Some(Action::TaintNode { node, .. }) if node == "node-a")),
        "{ds:#?}"
    );
    for drifted in ["b", "c"] {
        let note = w::note_on(&ds, drifted).expect("a note");
        assert!(
            note.why.contains("replacement waits: budget 1 of 4 nodes allows 1; 1 already disrupting"),
            "{}",
            note.why
        );
    }
    // A second copy of the message changes nothing either.
    let again = decide(&stopping, &world.cluster, catalog::embedded());
    assert!(w::launches(&again).is_empty() && w::disrupted(&again).is_empty(), "{again:#?}");

    // Carried on, one node at a time: `a` goes, then `b` and `c` are replaced, each once.
    let launched = run(&mut world, 1, |w| terminated(w, &["a", "b", "c"]));
    assert_eq!(launched, vec!["b-r1".to_string(), "c-r1".to_string()]);
    for r in ["a-r1", "b-r1", "c-r1"] {
        assert_eq!(w::claim(&world.cluster, r).phase, Phase::Initialized, "{r}");
    }
    assert!(world.cluster.pending.is_empty(), "{:?}", world.cluster.pending);
}

#[test]
fn an_interruption_escalates_a_drift_replacement_in_progress() {
    let mut world = four(vec![w::budget(BudgetNodes::Count(1))]);
    w::drift(&mut world.cluster, "b");
    w::drift(&mut world.cluster, "c");
    let ds = sweep(&world.cluster, catalog::embedded());
    assert_eq!(w::disrupted(&ds), vec![("b".to_string(), Reason::Drifted)]);
    assert_eq!(w::launches(&ds), vec!["b-r1".to_string()]);
    world.apply(&ds, usize::MAX).unwrap();

    // The drain of `b` waits for b-r1 … until `b`'s instance is being stopped.
    let ds = sweep(&world.cluster, catalog::embedded());
    assert!(ds.iter().any(|d| d.why.contains("replacement b-r1 is not initialized")), "{ds:#?}");
    let stopping = Message::StateChange { instance_id: "i-b".into(), state: "stopping".into() };
    let ds = decide(&stopping, &world.cluster, catalog::embedded());
    assert!(w::launches(&ds).is_empty(), "no second replacement: {ds:#?}");
    world.apply(&ds, usize::MAX).unwrap();
    let b = w::claim(&world.cluster, "b").disruption.clone().unwrap();
    assert_eq!((b.reason, b.replacements), (Reason::InstanceStateChange, vec!["b-r1".to_string()]));

    let ds = sweep(&world.cluster, catalog::embedded());
    assert!(w::launches(&ds).is_empty(), "{ds:#?}");
    assert!(
        ds.iter().any(|d| matches!(&d.action, Some(Action::TaintNode { node, .. }) if node == "node-b")),
        "the forceful drain no longer waits for b-r1: {ds:#?}"
    );
    assert!(!w::disrupted(&ds).iter().any(|(n, _)| n == "c"), "`b` still holds the budget");
    let launched = run(&mut world, 1, |w| terminated(w, &["b", "c"]));
    assert_eq!(launched, vec!["c-r1".to_string()]);
}

/// Drift is blocked on weekdays 09:00–17:00; at most two nodes go at once for any reason.
fn business_hours() -> Vec<Budget> {
    vec![
        Budget {
            nodes: BudgetNodes::Count(0),
            schedule: Some("0 9 * * mon-fri".into()),
            duration: Some(Duration::from_secs(8 * 3600)),
            reasons: vec![dovetail_core::model::DisruptionReason::Drifted],
        },
        w::budget(BudgetNodes::Count(2)),
    ]
}

/// `four` with empty nodes consolidated, `b`, `c`, `d` drifted and an empty node `e` (c5.large,
/// so the pods cannot move there), at `now`.
fn drifted_and_empty(now: dovetail_core::time::Time) -> dovetail_core::cluster::Cluster {
    let mut world = four(business_hours());
    world.cluster.now = now;
    world.cluster.nodepools[0].disruption.consolidate_after = Some(Duration::ZERO);
    world.cluster.nodepools[0].disruption.consolidation_policy = dovetail_core::model::ConsolidationPolicy::WhenEmpty;
    for n in ["b", "c", "d"] {
        w::drift(&mut world.cluster, n);
    }
    w::add_node(&mut world.cluster, "e", "default", "c5.large", w::at(-1, 0, 0), vec![]);
    world.cluster
}

#[test]
fn a_scheduled_budget_blocks_drift_only_inside_its_window() {
    // Monday 10:00: inside the window. Drift waits and says until when; the empty node still goes
    // (the window limits Drifted only).
    let ds = sweep(&drifted_and_empty(w::at(0, 10, 0)), catalog::embedded());
    assert_eq!(w::disrupted(&ds), vec![("e".to_string(), Reason::Empty)]);
    assert!(w::launches(&ds).is_empty());
    let waits: Vec<String> = w::notes(&ds).into_iter().filter(|n| n.contains("replacement waits")).collect();
    assert_eq!(waits.len(), 3, "{waits:?}");
    assert!(waits[0].contains("window (opened 2024-01-01T09:00:00Z, 8h) ends at 2024-01-01T17:00:00Z"), "{}", waits[0]);

    // 17:00 the window has closed, and on Saturday it never opened: two drifted nodes (the oldest)
    // are replaced and take the whole budget, so the empty node waits.
    for now in [w::at(0, 17, 0), w::at(5, 10, 0)] {
        let ds = sweep(&drifted_and_empty(now), catalog::embedded());
        assert_eq!(
            w::disrupted(&ds),
            vec![("b".to_string(), Reason::Drifted), ("c".to_string(), Reason::Drifted)],
            "at {now}"
        );
        assert_eq!(w::launches(&ds), vec!["b-r1".to_string(), "c-r1".to_string()]);
        assert!(
            w::notes(&ds).iter().any(|n| n.contains("node node-e is empty but NodePool default's disruption budget")),
            "{:?}",
            w::notes(&ds)
        );
    }
}

/// Pool `default` with budget `nodes`: `exp` expired, `d1` and `d2` drifted (d1 older), `k`
/// healthy, each an m5.large with a 1.5-cpu pod pinned to m5.large, and `x1` and `x2` empty
/// c5.large nodes.
fn mixed(nodes: u32) -> dovetail_core::cluster::Cluster {
    let pool = w::pool("default", vec![w::budget(BudgetNodes::Count(nodes))]);
    let mut c = w::cluster(w::at(2, 12, 0), vec![pool]);
    for (i, name) in ["exp", "d1", "d2", "k", "x1", "x2"].into_iter().enumerate() {
        let launched = w::at(-10 + i as i64, 0, 0);
        if name.starts_with('x') {
            w::add_node(&mut c, name, "default", "c5.large", launched, vec![]);
        } else {
            let pods = vec![w::pinned(w::pod(&format!("{name}-0"), 1500, 1024), "m5.large")];
            w::add_node(&mut c, name, "default", "m5.large", launched, pods);
        }
    }
    w::expire(&mut c, "exp", Duration::from_secs(60));
    w::drift(&mut c, "d1");
    w::drift(&mut c, "d2");
    c
}

#[test]
fn expiry_drift_and_consolidation_share_a_tight_budget_in_one_pass() {
    // Two slots: the expiry takes one whatever the budget, drift the other, consolidation none.
    let ds = sweep(&mixed(2), catalog::embedded());
    assert_eq!(w::disrupted(&ds), vec![("exp".to_string(), Reason::Expired), ("d1".to_string(), Reason::Drifted)]);
    assert_eq!(w::launches(&ds), vec!["d1-r1".to_string()]);
    let d2 = w::note_on(&ds, "d2").expect("a note on d2");
    assert!(
        d2.why.ends_with("1 already disrupting, so 1 more may start for Drifted, taken by this pass for d1"),
        "{}",
        d2.why
    );
    let notes = w::notes(&ds);
    for x in ["node-x1", "node-x2"] {
        assert!(notes.iter().any(|n| n.contains(&format!("node {x} is empty but"))), "{notes:?}");
    }

    // Drift comes before consolidation: three slots replace both drifted nodes, four let one
    // empty node go as well.
    let reasons = |n| -> Vec<(String, Reason)> { w::disrupted(&sweep(&mixed(n), catalog::embedded())) };
    let three =
        vec![("exp".to_string(), Reason::Expired), ("d1".into(), Reason::Drifted), ("d2".into(), Reason::Drifted)];
    assert_eq!(reasons(3), three);
    let mut four = three;
    four.push(("x1".into(), Reason::Empty));
    assert_eq!(reasons(4), four);

    // A budget of zero stops every voluntary reason, never the expiry.
    let ds = sweep(&mixed(0), catalog::embedded());
    assert_eq!(w::disrupted(&ds), vec![("exp".to_string(), Reason::Expired)]);
}

#[test]
fn a_pass_resumed_after_a_crash_at_any_point_duplicates_nothing() {
    let start = mixed(4);
    let catalog = catalog::embedded();
    let mut whole = w::World::new(start.clone());
    let ds = sweep(&start, catalog);
    whole.apply(&ds, usize::MAX).unwrap();
    let want_disrupted = w::disrupted(&ds);
    assert_eq!(w::launches(&ds).len(), 2, "{:?}", w::launches(&ds));

    let launch_d1 = ds
        .iter()
        .filter(|d| d.action.is_some())
        .position(|d| matches!(&d.action, Some(Action::Launch(p)) if p.name == "d1-r1"))
        .unwrap();
    for crash_after in 0..=w::action_count(&ds) {
        let mut world = w::World::new(start.clone());
        world.apply(&ds, crash_after).unwrap();
        // The sweeper runs again on what was carried out (same minute: nothing else moved). The
        // world refuses a second launch of a name and a write at a stale version.
        let resumed = sweep(&world.cluster, catalog);
        world.apply(&resumed, usize::MAX).unwrap_or_else(|e| panic!("crash after {crash_after}: {e}"));
        assert_eq!(world.names, whole.names, "crash after {crash_after}: the same claims exist");
        let reasons = |c: &dovetail_core::cluster::Cluster| -> Vec<(String, Option<Reason>)> {
            c.claims.iter().map(|x| (x.name.clone(), x.disruption.as_ref().map(|d| d.reason))).collect()
        };
        assert_eq!(reasons(&world.cluster), reasons(&whole.cluster), "crash after {crash_after}");
        if crash_after == launch_d1 + 1 {
            // Launched, but the drift was never recorded on d1: the replacement is adopted.
            assert!(!w::launches(&resumed).contains(&"d1-r1".to_string()), "{resumed:#?}");
            assert!(
                w::notes(&resumed).iter().any(|n| n.starts_with("d1-r1 already exists (Launching)")),
                "{resumed:#?}"
            );
        }
    }
    assert_eq!(want_disrupted.len(), 4, "{want_disrupted:?}");
}

#[test]
fn pending_pods_do_not_lift_the_budget_on_empty_nodes() {
    let pool = w::pool("default", vec![w::budget(BudgetNodes::Count(1))]);
    let mut c = w::cluster(w::at(2, 12, 0), vec![pool]);
    for name in ["x1", "x2", "x3"] {
        w::add_node(&mut c, name, "default", "m5.large", w::at(0, 0, 0), vec![]);
    }
    // Too big for any existing node: the provisioner needs new capacity for it.
    c.pending.push(w::pod("big-0", 6000, 2048));
    let ds = sweep(&c, catalog::embedded());
    assert_eq!(w::disrupted(&ds), vec![("x1".to_string(), Reason::Empty)]);
    assert!(w::notes(&ds).iter().any(|n| n.contains("node node-x2 is empty but")), "{:?}", w::notes(&ds));
}

#[test]
fn drifted_nodes_do_not_count_on_the_same_room_nor_lose_it_to_consolidation() {
    // `b` and `c` drift in one pass; the empty node `e` has room for one of their pods.
    let mut pool = w::pool("default", vec![w::budget(BudgetNodes::Count(3))]);
    pool.disruption.consolidation_policy = dovetail_core::model::ConsolidationPolicy::WhenEmpty;
    let mut c = w::cluster(w::at(2, 12, 0), vec![pool]);
    for name in ["b", "c"] {
        w::add_node(
            &mut c,
            name,
            "default",
            "m5.large",
            w::at(0, 0, 0),
            vec![w::pod(&format!("{name}-0"), 1500, 1024)],
        );
        w::drift(&mut c, name);
    }
    w::add_node(&mut c, "e", "default", "m5.large", w::at(1, 0, 0), vec![]);
    let ds = sweep(&c, catalog::embedded());
    // `b`'s pod takes `e`, so `c` needs new capacity before it drains; and `e` is not deleted as
    // empty in the same pass.
    assert_eq!(w::disrupted(&ds), vec![("b".to_string(), Reason::Drifted), ("c".to_string(), Reason::Drifted)]);
    assert_eq!(w::launches(&ds), vec!["c-r1".to_string()]);

    let mut world = w::World::new(c);
    world.apply(&ds, usize::MAX).unwrap();
    world.tick(Duration::from_secs(60));
    let launched = run(&mut world, 3, |w| terminated(w, &["b", "c"]));
    assert!(launched.is_empty(), "{launched:?}");
    assert!(world.cluster.pending.is_empty(), "every pod found the room planned for it: {:?}", world.cluster.pending);
}

#[test]
fn consolidation_moves_no_pods_onto_a_node_being_replaced() {
    // Two m5.xlarge nodes, each mostly free, with pods that only run on m5.xlarge: `d` drifts,
    // and `u` could be deleted by moving its pod into `d`'s free room — but `d` is leaving.
    let mut c = w::cluster(w::at(2, 12, 0), vec![w::pool("default", vec![w::budget(BudgetNodes::Percent(100))])]);
    for name in ["d", "u"] {
        let pods = vec![w::pinned(w::pod(&format!("{name}-0"), 1000, 512), "m5.xlarge")];
        w::add_node(&mut c, name, "default", "m5.xlarge", w::at(0, 0, 0), pods);
    }
    w::drift(&mut c, "d");
    let mut world = w::World::new(c);
    for pass in 0..3 {
        let ds = sweep(&world.cluster, catalog::embedded());
        assert!(w::disrupted(&ds).iter().all(|(n, _)| n == "d"), "pass {pass}: {:?}", w::disrupted(&ds));
        world.apply(&ds, usize::MAX).unwrap();
    }
    assert!(w::claim(&world.cluster, "d").disruption.is_some());
}

#[test]
fn two_drains_in_one_sweep_share_a_pdb_allowance() {
    let now = T0.plus(secs(3600));
    let mut a = disrupted("a", Reason::Expired, now);
    a.expire_after = Some(secs(60));
    let mut b = disrupted("b", Reason::Expired, now);
    b.expire_after = Some(secs(60));
    let mut na = node("a");
    let mut nb = node("b");
    for n in [&mut na, &mut nb] {
        n.taints.push(termination::disrupted_taint());
        let mut p = pod("shop", &format!("web-{}", n.name));
        p.labels.insert("app".into(), "web".into());
        n.pods.push(p.into());
    }
    let mut c = cluster(now, &a, "running", Some(na));
    c.claims.push(b);
    c.nodes.push(nb);
    c.instances.push(instance("b", "running"));
    c.pdbs.push(pdb("shop", "web", "web", 1));
    // A few steps: taints seen, drains started, evictions planned.
    let mut evictions = 0;
    for _ in 0..3 {
        let decisions = sweep(&c, catalog::embedded());
        evictions = decisions.iter().filter(|d| matches!(d.action, Some(Action::Evict { .. }))).count();
        for d in &decisions {
            if let Some(Action::WriteClaim(w)) = &d.action {
                c.record(w);
            }
        }
        if evictions > 0 {
            break;
        }
        c.now = c.now.plus(secs(1));
    }
    assert_eq!(evictions, 1, "one PDB allowing one disruption: one eviction across both drains");
}
