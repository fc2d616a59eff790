//! Scenario, crash-resume and property tests for draining and terminating a node
//! (`termination::step`, reached through `lifecycle::advance`).

mod lifecycle_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use dovetail_core::cluster::Cluster;
use dovetail_core::decision::Action;
use dovetail_core::decision::Step;
use dovetail_core::events::FAILED_DRAINING;
use dovetail_core::lifecycle::advance;
use dovetail_core::model::Pod;
use dovetail_core::nodeclaim::drain::{backoff, EvictionResult};
use dovetail_core::nodeclaim::object::{conditions, DISRUPTING};
use dovetail_core::nodeclaim::{NodeClaim, Phase, Reason};
use dovetail_core::protection::pod_protected;
use dovetail_core::termination::{disrupted_taint, ignored_by_drain, step, Tier, STUCK_DRAIN};
use dovetail_core::time::Time;
use lifecycle_support::*;

/// Moves the world on by itself: a shutting-down instance is terminated by the next look.
fn world_moves(c: &mut Cluster) {
    for i in &mut c.instances {
        if i.state == "shutting-down" {
            i.state = "terminated".into();
        }
    }
}

/// Runs a drain to its end (at most `limit` steps), advancing the clock by each requeue.
fn drive(mut claim: NodeClaim, mut c: Cluster, answer: Answer<'_>, limit: usize) -> (Vec<Step>, NodeClaim, Cluster) {
    let mut trace = vec![];
    for _ in 0..limit {
        c.claims = vec![claim.clone()];
        let s = advance(&claim, &c);
        let wait = s.requeue.unwrap_or(secs(1));
        claim = apply(&mut c, &claim, &s, answer).expect("drains never delete the claim");
        trace.push(s);
        if claim.phase == Phase::Terminated {
            break;
        }
        world_moves(&mut c);
        c.now = c.now.plus(wait);
    }
    (trace, claim, c)
}

/// The clock at each step of a `drive` (it advances by each step's requeue, 1 s by default).
fn trace_times(trace: &[Step]) -> Vec<Time> {
    let mut t = T0;
    trace
        .iter()
        .map(|s| {
            let now = t;
            t = t.plus(s.requeue.unwrap_or(secs(1)));
            now
        })
        .collect()
}

fn evicted(trace: &[Step]) -> Vec<String> {
    trace
        .iter()
        .flat_map(|s| s.actions())
        .filter_map(|a| match a {
            Action::Evict { namespace, name } => Some(format!("{namespace}/{name}")),
            _ => None,
        })
        .collect()
}

fn drain_cluster(claim: &NodeClaim, pods: Vec<Pod>) -> Cluster {
    let mut n = node(&claim.name);
    n.pods = pods.into_iter().map(Arc::new).collect();
    cluster(claim.disruption.as_ref().unwrap().since, claim, "running", Some(n))
}

#[test]
fn the_node_is_tainted_before_anything_is_evicted() {
    let claim = disrupted("a", Reason::Expired, T0.plus(secs(3600)));
    let c = drain_cluster(&claim, vec![pod("shop", "cart-1")]);
    let s = step(&claim, &c);
    assert_eq!(s, advance(&claim, &c), "advance hands disrupted claims to termination");
    assert_eq!(actions(&s), vec![Action::TaintNode { node: "node-a".into(), taint: disrupted_taint() }]);
    assert_eq!(
        sentences(&s),
        vec![
            "draining a (node node-a) for Expired",
            "tainting node node-a with dovetail.dev/disrupted:NoSchedule before draining it"
        ]
    );
    let next = s.claim.clone().unwrap();
    assert_eq!(next.phase, Phase::Draining);
    assert_eq!(next.version, claim.version + 1);
    let drain = next.drain.as_ref().unwrap();
    assert_eq!((drain.started_at, drain.deadline, drain.tainted_at), (c.now, None, None));
    assert_eq!(s.requeue, Some(secs(1)));
}

#[test]
fn pods_go_in_four_tiers_skipping_mirror_and_tolerating_pods_then_the_instance_and_node() {
    let claim = disrupted("a", Reason::Expired, T0.plus(secs(3600)));
    let pods = vec![
        critical(daemon(pod("kube-system", "kube-proxy"))),
        critical(pod("kube-system", "coredns")),
        daemon(pod("monitoring", "node-exporter")),
        pod("shop", "cart-1"),
        pod("shop", "cart-2"),
        mirror(pod("kube-system", "etcd-static")),
        tolerating(pod("ops", "debugger")),
    ];
    let c = drain_cluster(&claim, pods);
    let (trace, end, world) = drive(claim, c, &mut |_| EvictionResult::Accepted, 50);
    assert_eq!(end.phase, Phase::Terminated);
    let steps_with_evictions: Vec<Vec<String>> =
        trace.iter().map(|s| evicted(std::slice::from_ref(s))).filter(|e| !e.is_empty()).collect();
    assert_eq!(
        steps_with_evictions,
        vec![
            vec!["shop/cart-1".to_string(), "shop/cart-2".to_string()],
            vec!["monitoring/node-exporter".to_string()],
            vec!["kube-system/coredns".to_string()],
            vec!["kube-system/kube-proxy".to_string()],
        ]
    );
    let all: Vec<String> = trace.iter().flat_map(sentences).collect();
    assert!(all.contains(&"evicting non-critical non-daemon pod shop/cart-1 from node node-a for Expired".to_string()));
    assert!(
        all.contains(&"evicting critical daemon pod kube-system/kube-proxy from node node-a for Expired".to_string())
    );
    assert!(all.contains(&"node node-a is drained".to_string()));
    assert!(all.contains(&"terminating instance i-a of a for Expired".to_string()));
    let tail: Vec<Action> = trace.iter().flat_map(actions).filter(|a| !matches!(a, Action::Evict { .. })).collect();
    assert_eq!(tail[0], Action::TaintNode { node: "node-a".into(), taint: disrupted_taint() });
    assert_eq!(tail[1], Action::TerminateInstance { instance_id: "i-a".into() });
    assert!(matches!(&tail[2], Action::Event { reason, message, .. }
        if reason == "Terminated" && message == "a terminated: its instance is already gone; released pods ops/debugger"));
    assert_eq!(tail[3], Action::DeleteNode { node: "node-a".into() }, "the lingering Node goes with the instance");
    assert!(world.nodes.is_empty());
    assert!(trace.iter().all(|s| s.requeue.is_none_or(|r| r <= secs(10))));
}

#[test]
fn evictions_stop_at_what_each_pdb_allows_in_one_step() {
    let claim = disrupted("a", Reason::Drifted, T0.plus(secs(3600)));
    let web = |n: &str| pod("shop", n).with_labels(&[("app", "web")]);
    let mut c = drain_cluster(&claim, vec![web("web-1"), web("web-2"), web("web-3"), pod("shop", "cart-1")]);
    c.pdbs = vec![pdb("shop", "web", "web", 1)];
    c.nodes[0].taints.push(disrupted_taint());
    let s = step(&claim, &c);
    assert_eq!(evicted(std::slice::from_ref(&s)), vec!["shop/web-1", "shop/cart-1"]);
    let notes: Vec<String> = s.decisions.iter().filter(|d| d.action.is_none()).map(|d| d.why.clone()).collect();
    assert_eq!(
        notes,
        vec![
            "draining a (node node-a) for Drifted".to_string(),
            "not evicting pod shop/web-2 yet: PodDisruptionBudget shop/web allows no more disruptions".to_string(),
            "not evicting pod shop/web-3 yet: PodDisruptionBudget shop/web allows no more disruptions".to_string(),
        ]
    );
    assert_eq!(s.requeue, Some(Duration::from_millis(100)));
}

#[test]
fn refused_evictions_back_off_from_100ms_to_10s() {
    assert_eq!(
        (1..=9).map(backoff).collect::<Vec<_>>(),
        [100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000].map(Duration::from_millis).to_vec()
    );
    let mut claim = disrupted("a", Reason::Expired, T0);
    let mut c = drain_cluster(&claim, vec![pod("shop", "cart-1")]);
    c.nodes[0].taints.push(disrupted_taint());
    // First eviction, refused with a 429.
    let s = step(&claim, &c);
    assert_eq!(evicted(std::slice::from_ref(&s)), vec!["shop/cart-1"]);
    claim = apply(&mut c, &claim, &s, &mut |_| EvictionResult::Refused).unwrap();
    let e = &claim.drain.as_ref().unwrap().pods["shop/cart-1"];
    assert_eq!((e.attempts, e.next_retry, e.accepted_at), (1, Some(T0.plus(Duration::from_millis(100))), None));
    // Too early: nothing, come back when the retry is due.
    c.now = T0.plus(Duration::from_millis(40));
    let s = step(&claim, &c);
    assert!(s.is_quiet(), "{s:?}");
    assert_eq!(s.requeue, Some(Duration::from_millis(60)));
    // Due: second attempt, then 200 ms.
    c.now = T0.plus(Duration::from_millis(100));
    let s = step(&claim, &c);
    assert_eq!(
        sentences(&s),
        vec!["evicting non-critical non-daemon pod shop/cart-1 from node node-a for Expired (attempt 2)"]
    );
    assert_eq!(s.requeue, Some(Duration::from_millis(200)));
    claim = apply(&mut c, &claim, &s, &mut |_| EvictionResult::Accepted).unwrap();
    // Accepted and gone: drained.
    let s = step(&claim, &c);
    assert_eq!(s.claim.as_ref().unwrap().phase, Phase::Terminating);
}

#[test]
fn accepted_evictions_are_not_repeated_while_the_pod_terminates() {
    let mut claim = disrupted("a", Reason::Expired, T0);
    let mut c = drain_cluster(&claim, vec![pod("shop", "cart-1")]);
    c.nodes[0].taints.push(disrupted_taint());
    let s = step(&claim, &c);
    claim = s.claim.clone().unwrap();
    claim.drain.as_mut().unwrap().record("shop/cart-1", EvictionResult::Accepted, T0);
    c.now = T0.plus(secs(5));
    let s = step(&claim, &c);
    assert!(s.is_quiet(), "the pod is terminating: {s:?}");
    assert_eq!(s.requeue, Some(secs(1)));
}

#[test]
fn do_not_disrupt_blocks_voluntary_drains_from_starting() {
    let claim = disrupted("a", Reason::Underutilized, T0);
    let c = drain_cluster(&claim, vec![pod("shop", "web-1"), do_not_disrupt(pod("shop", "cart-7"))]);
    let s = step(&claim, &c);
    assert!(only_blocked(&s), "{s:?}");
    assert_eq!(
        sentences(&s),
        vec!["not draining a for Underutilized: pod shop/cart-7 has karpenter.sh/do-not-disrupt=true"]
    );
    assert!(matches!(&actions(&s)[..], [Action::Event { object, .. }] if object == "Node/node-a"), "{s:?}");
    // On the node, with a duration counted from registration (T0 + 60 s).
    let mut c = drain_cluster(&claim, vec![pod("shop", "web-1")]);
    c.nodes[0].annotations.insert("dovetail.dev/do-not-disrupt".into(), "1h".into());
    let s = step(&claim, &c);
    assert_eq!(
        sentences(&s),
        vec!["not draining a for Underutilized: node node-a has dovetail.dev/do-not-disrupt=1h (until 2027-01-15T09:01:00Z)"]
    );
    c.now = T0.plus(secs(3660));
    assert_eq!(step(&claim, &c).claim.unwrap().phase, Phase::Draining, "protection over");
}

#[test]
fn involuntary_drains_start_but_hold_do_not_disrupt_pods() {
    // Expiry is forceful but the instance would keep running: do-not-disrupt still holds (until
    // a terminationGracePeriod, when there is one).
    let claim = disrupted("a", Reason::Expired, T0);
    let mut c = drain_cluster(&claim, vec![pod("shop", "web-1"), do_not_disrupt(pod("shop", "cart-7"))]);
    c.nodes[0].taints.push(disrupted_taint());
    let s = step(&claim, &c);
    assert_eq!(evicted(std::slice::from_ref(&s)), vec!["shop/web-1"]);
    assert!(sentences(&s)
        .contains(&"not evicting pod shop/cart-7: pod shop/cart-7 has karpenter.sh/do-not-disrupt=true".to_string()));
    assert_eq!(s.claim.unwrap().phase, Phase::Draining);
}

/// The Events of a trace with this reason: (object, message).
fn events(trace: &[Step], reason: &str) -> Vec<(String, String)> {
    trace
        .iter()
        .flat_map(|s| s.actions())
        .filter_map(|a| match a {
            Action::Event { object, reason: r, message } if r == reason => Some((object.clone(), message.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_spot_interrupted_drain_evicts_do_not_disrupt_pods_and_deletes_pdb_blocked_ones_before_the_reclaim() {
    let mut claim = disrupted("a", Reason::SpotInterrupted, T0);
    let reclaim = T0.plus(secs(120));
    claim.disruption.as_mut().unwrap().reclaim_at = Some(reclaim);
    // Later than the reclaim: the reclaim is the deadline.
    claim.termination_grace_period = Some(secs(600));
    let pods = vec![do_not_disrupt(pod("batch", "render-0")), pod("shop", "db-0").with_labels(&[("app", "db")])];
    let mut c = drain_cluster(&claim, pods);
    c.pdbs = vec![pdb("shop", "db", "db", 0)];
    let (trace, end, _) = drive(claim, c, &mut |_| EvictionResult::Accepted, 500);
    assert_eq!(end.phase, Phase::Terminated);
    let all: Vec<String> = trace.iter().flat_map(sentences).collect();
    assert_eq!(all[0], "draining a (node node-a) for SpotInterrupted; pods left at 2027-01-15T08:02:00Z are deleted");
    assert!(!all.iter().any(|s| s.starts_with("not evicting pod batch/render-0")), "{all:#?}");

    // The do-not-disrupt pod goes at once: in the first step after the taint, not held.
    let times = trace_times(&trace);
    let first_eviction = trace.iter().position(|s| !evicted(std::slice::from_ref(s)).is_empty()).unwrap();
    assert_eq!((times[first_eviction], evicted(&trace)), (T0.plus(secs(1)), vec!["batch/render-0".to_string()]));

    // The PDB-blocked pod is retried until the reclaim time minus its 30 s grace, then deleted.
    let waits = all.iter().filter(|s| s.contains("PodDisruptionBudget shop/db allows no more disruptions")).count();
    assert!(waits > 5, "retried with backoff: {waits}");
    let deletes: Vec<(Time, &Action, &str)> = trace
        .iter()
        .zip(&times)
        .flat_map(|(s, t)| s.decisions.iter().map(move |d| (*t, d)))
        .filter(|(_, d)| matches!(d.action, Some(Action::DeletePod { .. })))
        .map(|(t, d)| (t, d.action.as_ref().unwrap(), d.why.as_str()))
        .collect();
    assert_eq!(
        deletes,
        vec![(
            T0.plus(secs(90)),
            &Action::DeletePod { namespace: "shop".into(), name: "db-0".into(), grace_period_seconds: 30 },
            "deleting pod shop/db-0 with 30s grace: the instance of a is reclaimed at 2027-01-15T08:02:00Z"
        )]
    );

    // The Node says which protections were overridden, and why, once.
    assert_eq!(
        events(&trace, "ProtectionOverridden"),
        vec![(
            "Node/node-a".to_string(),
            "drained node node-a overriding the protection of 2 pods (SpotInterrupted and EC2 takes the instance \
             back at 2027-01-15T08:02:00Z): batch/render-0 (karpenter.sh/do-not-disrupt=true); \
             shop/db-0 (PodDisruptionBudget shop/db)"
                .to_string()
        )]
    );
}

#[test]
fn a_pod_held_by_both_protections_is_listed_with_both() {
    let mut claim = disrupted("a", Reason::CapacityReservationInterrupted, T0);
    claim.disruption.as_mut().unwrap().reclaim_at = Some(T0.plus(secs(120)));
    let mut c = drain_cluster(&claim, vec![do_not_disrupt(pod("shop", "db-0").with_labels(&[("app", "db")]))]);
    c.pdbs = vec![pdb("shop", "db", "db", 0)];
    let (trace, end, _) = drive(claim, c, &mut |_| EvictionResult::Accepted, 500);
    assert_eq!(end.phase, Phase::Terminated);
    let overridden = events(&trace, "ProtectionOverridden");
    assert_eq!(overridden.len(), 1, "{overridden:?}");
    assert!(
        overridden[0].1.ends_with(": shop/db-0 (karpenter.sh/do-not-disrupt=true, PodDisruptionBudget shop/db)"),
        "{}",
        overridden[0].1
    );
}

#[test]
fn an_instance_stopping_releases_do_not_disrupt_pods_without_a_deadline_of_its_own() {
    // No warning, no reclaim time: do-not-disrupt is overridden (the pod cannot keep running
    // there), PDBs still hold until a terminationGracePeriod.
    let claim = disrupted("a", Reason::InstanceStateChange, T0);
    let mut c = drain_cluster(&claim, vec![do_not_disrupt(pod("batch", "render-0"))]);
    c.nodes[0].taints.push(disrupted_taint());
    let s = step(&claim, &c);
    assert_eq!(evicted(std::slice::from_ref(&s)), vec!["batch/render-0"]);
    assert_eq!(s.claim.as_ref().unwrap().drain.as_ref().unwrap().deadline, None);
    assert_eq!(
        sentences(&s),
        vec![
            "draining a (node node-a) for InstanceStateChange",
            "evicting non-critical non-daemon pod batch/render-0 from node node-a for InstanceStateChange, despite \
             karpenter.sh/do-not-disrupt=true"
        ]
    );
}

#[test]
fn voluntary_and_expiring_drains_never_record_overrides() {
    // Expiry holds the do-not-disrupt pod and deletes it at the terminationGracePeriod's deadline
    // like any other pod: nothing is recorded as overridden, no ProtectionOverridden Event.
    let mut claim = disrupted("a", Reason::Expired, T0);
    claim.termination_grace_period = Some(secs(60));
    let mut c = drain_cluster(&claim, vec![do_not_disrupt(pod("batch", "render-0")).with_labels(&[("app", "r")])]);
    c.pdbs = vec![pdb("batch", "r", "r", 0)];
    let (trace, end, _) = drive(claim, c, &mut |_| EvictionResult::Accepted, 500);
    assert_eq!(end.phase, Phase::Terminated);
    assert!(evicted(&trace).is_empty());
    assert!(events(&trace, "ProtectionOverridden").is_empty());
    assert!(trace
        .iter()
        .filter_map(|s| s.claim.as_ref())
        .all(|c| c.drain.as_ref().is_none_or(|d| d.overridden.is_empty())));
}

#[test]
fn the_grace_period_deletes_pods_despite_pdbs_and_do_not_disrupt() {
    let mut claim = disrupted("a", Reason::Expired, T0);
    claim.termination_grace_period = Some(secs(600));
    let mut slow = pod("shop", "web-1").with_labels(&[("app", "web")]);
    slow.termination_grace_seconds = 120;
    let mut c = drain_cluster(&claim, vec![slow, do_not_disrupt(pod("shop", "cart-7"))]);
    c.pdbs = vec![pdb("shop", "web", "web", 0)];
    let (trace, end, _) = drive(claim, c, &mut |_| EvictionResult::Accepted, 500);
    assert_eq!(end.phase, Phase::Terminated);
    assert!(evicted(&trace).is_empty(), "the PDB allowed nothing and cart-7 is protected");
    let times = trace_times(&trace);
    let deletes: Vec<(Time, Action, String)> = trace
        .iter()
        .zip(times)
        .flat_map(|(s, t)| s.decisions.iter().map(move |d| (t, d)))
        .filter(|(_, d)| matches!(d.action, Some(Action::DeletePod { .. })))
        .map(|(t, d)| (t, d.action.clone().unwrap(), d.why.clone()))
        .collect();
    assert_eq!(deletes.len(), 2);
    assert_eq!(deletes[0].0, T0.plus(secs(480)), "deadline 600 s − 120 s grace");
    assert_eq!(deletes[1].0, T0.plus(secs(570)), "deadline 600 s − 30 s grace");
    assert_eq!(
        deletes[0].1,
        Action::DeletePod { namespace: "shop".into(), name: "web-1".into(), grace_period_seconds: 120 }
    );
    assert_eq!(
        deletes[0].2,
        "deleting pod shop/web-1 with 120s grace: the terminationGracePeriod of a ends at 2027-01-15T08:10:00Z"
    );
    assert_eq!(
        deletes[1].1,
        Action::DeletePod { namespace: "shop".into(), name: "cart-7".into(), grace_period_seconds: 30 }
    );
}

#[test]
fn pods_are_deleted_exactly_at_deadline_minus_their_grace() {
    let mut claim = disrupted("a", Reason::Expired, T0);
    claim.termination_grace_period = Some(secs(600));
    let mut c = drain_cluster(&claim, vec![pod("shop", "web-1").with_labels(&[("app", "web")])]);
    c.pdbs = vec![pdb("shop", "web", "web", 0)];
    c.nodes[0].taints.push(disrupted_taint());
    let s = step(&claim, &c);
    let claim = s.claim.unwrap();
    c.now = T0.plus(secs(569));
    let s = step(&claim, &c);
    assert!(!actions(&s).iter().any(|a| matches!(a, Action::DeletePod { .. })));
    assert_eq!(s.requeue, Some(Duration::from_millis(200)), "the PDB backoff (second wait) is the nearest wake-up");
    c.now = T0.plus(secs(570));
    let s = step(&claim, &c);
    assert_eq!(
        actions_but_events(&s),
        vec![Action::DeletePod { namespace: "shop".into(), name: "web-1".into(), grace_period_seconds: 30 }]
    );
    // Deleted once only.
    let claim = s.claim.unwrap();
    c.now = T0.plus(secs(575));
    let again = step(&claim, &c);
    assert!(again.claim.is_none() && actions_but_events(&again).is_empty(), "{again:?}");
    // All it says is that the deleted pod holds the drain.
    assert!(failed_draining(&again)[0].1.contains("pod shop/web-1 (deleted, not gone yet)"), "{again:?}");
    // Still there at the deadline (a stuck finalizer): terminate anyway.
    c.now = T0.plus(secs(600));
    let s = step(&claim, &c);
    assert_eq!(s.claim.as_ref().unwrap().phase, Phase::Terminating);
    assert_eq!(actions(&s), vec![Action::TerminateInstance { instance_id: "i-a".into() }]);
    assert_eq!(
        sentences(&s)[0],
        "terminationGracePeriod of a ended at 2027-01-15T08:10:00Z; terminating with 1 pod(s) still on node node-a"
    );
}

/// The FailedDraining Events of a step: (object, message).
fn failed_draining(s: &Step) -> Vec<(String, String)> {
    s.actions()
        .filter_map(|a| match a {
            Action::Event { object, reason, message } if reason == FAILED_DRAINING => {
                Some((object.clone(), message.clone()))
            }
            _ => None,
        })
        .collect()
}

/// A drain held past STUCK_DRAIN says on what: a Warning on the node naming each pod and what
/// holds it, and the claim's Disrupting condition; once it moves again, the condition stops saying so.
#[test]
fn a_drain_held_too_long_says_on_what() {
    let claim = disrupted("a", Reason::Expired, T0);
    let pods = vec![
        pod("shop", "web-1").with_labels(&[("app", "web")]),
        do_not_disrupt(pod("shop", "cart-7")),
        pod("shop", "api-2"),
    ];
    let mut c = drain_cluster(&claim, pods);
    c.pdbs = vec![pdb("shop", "web", "web", 0)];
    c.nodes[0].taints.push(disrupted_taint());
    let mut claim = step(&claim, &c).claim.expect("the drain starts");
    // api-2's eviction is accepted; the pod takes its time to go.
    claim.drain.as_mut().unwrap().record("shop/api-2", EvictionResult::Accepted, T0);

    // Within STUCK_DRAIN: a drain under a PDB may just be slow, nothing is said.
    c.now = T0.plus(STUCK_DRAIN - secs(1));
    let s = step(&claim, &c);
    assert!(failed_draining(&s).is_empty(), "{s:?}");
    let claim = s.claim.unwrap_or(claim);
    assert_eq!(claim.drain.as_ref().unwrap().waiting_on, None);

    c.now = T0.plus(STUCK_DRAIN);
    let s = step(&claim, &c);
    let held = "pod shop/web-1 (PodDisruptionBudget shop/web); pod shop/cart-7 (karpenter.sh/do-not-disrupt=true); \
                pod shop/api-2 (evicted, not gone yet)";
    assert_eq!(
        failed_draining(&s),
        vec![(
            "Node/node-a".to_string(),
            format!("draining node node-a for Expired has been held for over 2m: {held}")
        )]
    );
    let claim = s.claim.expect("what holds the drain is recorded");
    assert_eq!(claim.drain.as_ref().unwrap().waiting_on.as_deref(), Some(held));
    let disrupting = conditions(&claim).into_iter().find(|c| c.type_ == DISRUPTING).expect("Disrupting");
    assert!(disrupting.message.ends_with(&format!("; the drain is held by {held}")), "{}", disrupting.message);
    // The same words at the next step, so repeats fold into one Event.
    c.now = c.now.plus(secs(10));
    let s = step(&claim, &c);
    assert_eq!(failed_draining(&s)[0].1, format!("draining node node-a for Expired has been held for over 2m: {held}"));

    // The holds go: the drain moves on and the condition no longer says it is held.
    c.nodes[0].pods.clear();
    let s = step(&claim, &c);
    assert!(failed_draining(&s).is_empty());
    let claim = s.claim.unwrap();
    assert_eq!(claim.drain.as_ref().unwrap().waiting_on, None);
    assert!(!conditions(&claim).iter().any(|c| c.message.contains("held by")));

    // Volumes that do not detach hold the termination the same way.
    c.volume_attachments.insert("node-a".into(), vec!["csi-123".into()]);
    let s = step(&claim, &c);
    assert_eq!(
        failed_draining(&s),
        vec![(
            "Node/node-a".to_string(),
            "draining node node-a for Expired has been held for over 2m: volume attachment(s) csi-123 not detached yet"
                .to_string()
        )]
    );
}

/// A terminationGracePeriod is named as when what holds the drain is deleted.
#[test]
fn a_held_drain_names_its_grace_deadline() {
    let mut claim = disrupted("a", Reason::Drifted, T0);
    claim.termination_grace_period = Some(secs(600));
    let mut c = drain_cluster(&claim, vec![pod("shop", "web-1").with_labels(&[("app", "web")])]);
    c.pdbs = vec![pdb("shop", "web", "web", 0)];
    c.nodes[0].taints.push(disrupted_taint());
    let claim = step(&claim, &c).claim.unwrap();
    c.now = T0.plus(secs(300));
    let message = &failed_draining(&step(&claim, &c))[0].1;
    assert!(
        message.ends_with(
            "pod shop/web-1 (PodDisruptionBudget shop/web); the terminationGracePeriod of a ends at \
             2027-01-15T08:10:00Z, and what is left then goes"
        ),
        "{message}"
    );
}

#[test]
fn termination_waits_for_volume_attachments() {
    let claim = disrupted("a", Reason::Expired, T0);
    let mut c = drain_cluster(&claim, vec![]);
    c.nodes[0].taints.push(disrupted_taint());
    c.volume_attachments.insert("node-a".into(), vec!["csi-123".into()]);
    let s = step(&claim, &c);
    assert_eq!(s.claim.as_ref().unwrap().phase, Phase::Terminating);
    assert!(actions(&s).is_empty());
    assert_eq!(
        sentences(&s).last().unwrap(),
        "waiting for 1 volume attachment(s) on node node-a to detach before terminating instance i-a"
    );
    assert_eq!(s.requeue, Some(secs(5)));
    let claim = s.claim.unwrap();
    c.volume_attachments.clear();
    let s = step(&claim, &c);
    assert_eq!(actions(&s), vec![Action::TerminateInstance { instance_id: "i-a".into() }]);
    let claim = s.claim.unwrap();
    // Still running 10 s later: not asked again yet; 30 s later: asked again.
    c.now = T0.plus(secs(10));
    assert!(step(&claim, &c).is_quiet());
    c.now = T0.plus(secs(30));
    assert_eq!(actions(&step(&claim, &c)), vec![Action::TerminateInstance { instance_id: "i-a".into() }]);
    // Shutting down: not asked again, and the Node object can go now the kubelet is stopping.
    c.instances[0].state = "shutting-down".into();
    let s = step(&claim, &c);
    assert_eq!(actions(&s), vec![Action::DeleteNode { node: "node-a".into() }]);
    assert_eq!(sentences(&s), vec!["deleting node node-a: instance i-a is shutting-down"]);
}

#[test]
fn an_instance_gone_mid_drain_ends_the_claim() {
    let claim = disrupted("a", Reason::SpotInterrupted, T0);
    let mut c = drain_cluster(&claim, vec![pod("shop", "web-1")]);
    c.instances.clear();
    let s = step(&claim, &c);
    assert_eq!(s.claim.as_ref().unwrap().phase, Phase::Terminated);
    assert_eq!(sentences(&s)[0], "a is Terminated: its instance is already gone; released pods shop/web-1");
    assert_eq!(actions(&s)[1], Action::DeleteNode { node: "node-a".into() });
}

#[test]
fn an_interrupted_instance_gone_mid_drain_still_reports_the_overrides() {
    let claim = disrupted("a", Reason::SpotInterrupted, T0);
    let mut c = drain_cluster(&claim, vec![do_not_disrupt(pod("batch", "render-0"))]);
    c.nodes[0].taints.push(disrupted_taint());
    let s = step(&claim, &c);
    assert_eq!(evicted(std::slice::from_ref(&s)), vec!["batch/render-0"]);
    // EC2 took the instance before the pod finished terminating.
    let claim = apply(&mut c, &claim, &s, &mut |_| EvictionResult::Refused).unwrap();
    c.instances.clear();
    let s = step(&claim, &c);
    assert_eq!(s.claim.as_ref().unwrap().phase, Phase::Terminated);
    assert_eq!(
        events(std::slice::from_ref(&s), "ProtectionOverridden"),
        vec![(
            "Node/node-a".to_string(),
            "drained node node-a overriding the protection of 1 pod (SpotInterrupted and the instance is going away \
             regardless): batch/render-0 (karpenter.sh/do-not-disrupt=true)"
                .to_string()
        )]
    );
}

#[test]
fn a_claim_without_a_node_goes_straight_to_terminating() {
    let mut claim = launched("a");
    claim.disruption = disrupted("a", Reason::Expired, T0).disruption;
    let c = cluster(T0, &claim, "running", None);
    let s = step(&claim, &c);
    assert_eq!(s.claim.as_ref().unwrap().phase, Phase::Terminating);
    assert_eq!(
        sentences(&s),
        vec![
            "draining a (no registered node) for Expired",
            "a has no node to drain",
            "terminating instance i-a of a for Expired"
        ]
    );
}

/// Persist after every step, drop the in-memory claim, resume from the JSON: same steps, same end.
/// Also replays a crash between carrying out the actions and persisting: the old state still
/// finishes the drain.
#[test]
fn drains_resume_from_persisted_json_after_a_crash_at_any_point() {
    let mut claim = disrupted("a", Reason::Drifted, T0);
    claim.termination_grace_period = Some(secs(300));
    let web = |n: &str| pod("shop", n).with_labels(&[("app", "web")]);
    let mut c =
        drain_cluster(&claim, vec![web("web-1"), web("web-2"), daemon(pod("mon", "exporter")), pod("shop", "cart-1")]);
    c.pdbs = vec![pdb("shop", "web", "web", 1)];
    let mut refusals = 0;
    let mut answer = |_: &Pod| {
        refusals += 1;
        if refusals % 3 == 0 {
            EvictionResult::Refused
        } else {
            EvictionResult::Accepted
        }
    };
    let mut persisted = serde_json::to_string(&claim).unwrap();
    for i in 0..200 {
        let in_memory = claim.clone();
        let resumed: NodeClaim = serde_json::from_str(&persisted).unwrap();
        assert_eq!(resumed, in_memory);
        c.claims = vec![resumed.clone()];
        let s = advance(&resumed, &c);
        assert_eq!(s, advance(&in_memory, &c), "step {i}");
        // Crash after the actions, before the write: the next invocation re-reads the old claim.
        if i % 4 == 1 {
            let mut crashed = c.clone();
            let _ = apply(&mut crashed, &resumed, &s, &mut |_| EvictionResult::Accepted);
            c = crashed;
            c.now = c.now.plus(secs(1));
            continue;
        }
        claim = apply(&mut c, &resumed, &s, &mut answer).unwrap();
        persisted = serde_json::to_string(&claim).unwrap();
        if claim.phase == Phase::Terminated {
            break;
        }
        world_moves(&mut c);
        for p in &mut c.pdbs {
            p.disruptions_allowed = 1;
        }
        c.now = c.now.plus(s.requeue.unwrap_or(secs(1)));
    }
    assert_eq!(claim.phase, Phase::Terminated);
    assert!(c.nodes.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Property: random drains.

#[derive(Debug, Clone)]
struct PodSpec {
    critical: bool,
    daemon: bool,
    mirror: bool,
    tolerating: bool,
    dnd: bool,
    app: Option<usize>,
    grace: i64,
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        any::<bool>(),
        any::<bool>(),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.08),
        prop::option::of(0usize..3),
        prop::sample::select(vec![0i64, 5, 30, 120]),
    )
        .prop_map(|(critical, daemon, mirror, tolerating, dnd, app, grace)| PodSpec {
            critical,
            daemon,
            mirror,
            tolerating,
            dnd,
            app,
            grace,
        })
}

fn build(i: usize, s: &PodSpec) -> Pod {
    let mut p = pod("ns", &format!("p{i}"));
    if let Some(a) = s.app {
        p = p.with_labels(&[("app", ["a", "b", "c"][a])]);
    }
    p.termination_grace_seconds = s.grace;
    if s.critical {
        p = critical(p);
    }
    if s.daemon {
        p = daemon(p);
    }
    if s.mirror {
        p = mirror(p);
    }
    if s.tolerating {
        p = tolerating(p);
    }
    if s.dnd {
        p = do_not_disrupt(p);
    }
    p
}

fn config(cases: u32) -> Config {
    let cases = std::env::var("DOVETAIL_PROPERTY_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(cases);
    Config { cases, failure_persistence: Some(Box::new(FileFailurePersistence::Off)), ..Config::default() }
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn random_drains_respect_pdbs_tiers_and_protection_and_finish(
        specs in prop::collection::vec(pod_spec(), 0..12),
        allowed in prop::collection::vec(0i32..3, 3),
        voluntary in any::<bool>(),
        grace in prop::option::of(60u64..1200),
        volumes in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut rng = SmallRng::seed_from_u64(seed);
        let reason = if voluntary { Reason::Underutilized } else { Reason::Expired };
        let mut claim = disrupted("a", reason, T0);
        claim.termination_grace_period = grace.map(secs);
        let pods: Vec<Pod> = specs.iter().enumerate().map(|(i, s)| build(i, s)).collect();
        let mut c = drain_cluster(&claim, pods.clone());
        c.pdbs = (0..3).map(|i| pdb("ns", ["a", "b", "c"][i], ["a", "b", "c"][i], allowed[i])).collect();
        if volumes {
            c.volume_attachments.insert("node-a".into(), vec!["vol-1".into()]);
        }
        let protected_at_start = pods.iter().any(|p| pod_protected(p, T0).is_some());
        let held = pods.iter().any(|p| !ignored_by_drain(p) && pod_protected(p, T0).is_some());
        let mut refusal = 0.4;
        for round in 0..3000 {
            c.claims = vec![claim.clone()];
            let s = advance(&claim, &c);
            prop_assert!(s.requeue.is_none_or(|r| r <= secs(10)));
            let present: Vec<&Pod> = c.nodes.iter().flat_map(|n| n.pods.iter().map(Arc::as_ref)).collect();
            let started = claim.drain.is_some();
            if voluntary && !started && protected_at_start {
                prop_assert!(only_blocked(&s), "a voluntary drain started through do-not-disrupt: {:?}", s);
                break;
            }
            let deadline = s.claim.as_ref().unwrap_or(&claim).drain.as_ref().and_then(|d| d.deadline);
            let before_deadline = deadline.is_none_or(|d| c.now < d);
            let blocking_tier = present.iter().filter(|p| !ignored_by_drain(p)).map(|p| Tier::of(p)).min();
            let mut per_pdb: BTreeMap<String, i32> = BTreeMap::new();
            for a in s.actions() {
                match a {
                    Action::Evict { name, .. } => {
                        let p = present.iter().find(|p| &p.name == name).expect("evicts only present pods");
                        prop_assert!(!p.is_mirror() && !ignored_by_drain(p), "evicted {}", p.key());
                        prop_assert!(pod_protected(p, c.now).is_none(), "evicted protected {}", p.key());
                        prop_assert_eq!(Some(Tier::of(p)), blocking_tier, "tier order for {}", p.key());
                        for b in c.pdbs.iter().filter(|b| b.covers(p)) {
                            *per_pdb.entry(b.name.clone()).or_default() += 1;
                        }
                    }
                    Action::DeletePod { name, grace_period_seconds, .. } => {
                        let p = present.iter().find(|p| &p.name == name).expect("deletes only present pods");
                        prop_assert!(!ignored_by_drain(p));
                        let d = deadline.expect("deletes only under a grace period");
                        prop_assert!(c.now >= d.minus(secs(p.termination_grace_seconds as u64)));
                        prop_assert!(*grace_period_seconds <= p.termination_grace_seconds);
                    }
                    _ => {}
                }
            }
            if before_deadline {
                for b in &c.pdbs {
                    let used = per_pdb.get(&b.name).copied().unwrap_or(0);
                    prop_assert!(used <= b.disruptions_allowed.max(0), "PDB {} allowed {} got {}", b.name, b.disruptions_allowed, used);
                }
            }
            let wait = s.requeue.unwrap_or(secs(1));
            let p_refuse = refusal;
            claim = apply(&mut c, &claim, &s, &mut |_| {
                if rng_bool(seed, round, p_refuse) { EvictionResult::Refused } else { EvictionResult::Accepted }
            }).unwrap();
            if claim.phase == Phase::Terminated {
                break;
            }
            // The world moves: replacements become healthy (PDBs regain room), volumes detach,
            // instances finish shutting down, and the clock jumps by the requeue or a random bit.
            for b in &mut c.pdbs {
                if rng.random_bool(0.3) {
                    b.disruptions_allowed = (b.disruptions_allowed + 1).min(2);
                }
            }
            if c.nodes.iter().all(|n| n.pods.iter().all(|p| ignored_by_drain(p))) && rng.random_bool(0.3) {
                c.volume_attachments.clear();
            }
            world_moves(&mut c);
            let jitter = Duration::from_millis(rng.random_range(0..2000));
            c.now = c.now.plus(if rng.random_bool(0.2) { jitter } else { wait });
            if round > 500 {
                refusal = 0.0;
            }
        }
        // A voluntary drain blocked at its start never begins; a held pod without a grace period
        // waits forever (as in Karpenter). Everything else must end Terminated.
        let blocked_forever = (voluntary && protected_at_start) || (held && grace.is_none());
        let must_finish = !blocked_forever;
        if must_finish {
            prop_assert_eq!(claim.phase, Phase::Terminated, "drain did not finish");
        }
    }
}

/// A deterministic coin per (seed, round) for the eviction answers (the closure cannot borrow
/// the test's rng while the world is being changed).
fn rng_bool(seed: u64, round: usize, p: f64) -> bool {
    SmallRng::seed_from_u64(seed ^ (round as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)).random_bool(p)
}
