//! Scenario tests for the NodeClaim lifecycle (`lifecycle::advance`): launch and registration
//! timeouts, registration by providerID, initialization, vanished instances, idempotence.

mod lifecycle_support;

use dovetail_core::decision::Action;

use dovetail_core::cluster::{Cluster, Described, InstanceQuery};
use dovetail_core::decision::Step;
use dovetail_core::labels::{self, TAINT_UNREGISTERED};
use dovetail_core::lifecycle::{advance, advance_all};
use dovetail_core::model::{Taint, TaintEffect};
use dovetail_core::nodeclaim::drain::EvictionResult;
use dovetail_core::nodeclaim::{NodeClaim, Phase, Reason};
use lifecycle_support::*;
use std::collections::BTreeMap;

/// Same input, same output; carrying the output out and advancing again does nothing new.
fn settle(claim: &NodeClaim, cluster: &Cluster) -> (Step, Option<NodeClaim>, Cluster) {
    let step = advance(claim, cluster);
    assert_eq!(step, advance(claim, cluster), "advance is a function of its input");
    if let Some(r) = step.requeue {
        assert!(r <= secs(10), "never asks for more than a short wait: {r:?}");
    }
    let mut world = cluster.clone();
    let next = apply(&mut world, claim, &step, &mut |_| EvictionResult::Accepted);
    if let Some(next) = &next {
        let again = advance(next, &world);
        assert!(again.is_quiet(), "applying {step:?} then advancing again changed something: {again:?}");
    }
    (step, next, world)
}

#[test]
fn launching_claim_is_left_alone_before_the_timeout() {
    let claim = NodeClaim::launching("a", "default", "default", T0);
    let mut c = cluster(T0.plus(secs(299)), &claim, "running", None);
    c.instances.clear();
    let step = advance(&claim, &c);
    assert!(step.is_quiet() && step.decisions.is_empty() && step.requeue.is_none(), "{step:?}");
}

#[test]
fn launch_timeout_terminates_tagged_instances_and_deletes_the_claim() {
    let claim = NodeClaim::launching("a", "default", "default", T0);
    // The instance came up late (tagged, never recorded on the claim): it is stale and goes too.
    let mut c = cluster(T0.plus(secs(300)), &claim, "running", None);
    let mut gone = instance("a", "terminated");
    gone.id = "i-old".into();
    c.instances.push(gone);
    let (step, next, _) = settle(&claim, &c);
    let why = "launch of a timed out: no instance recorded 5m after the claim was written (limit 5m)";
    assert_eq!(
        actions(&step),
        vec![
            Action::TerminateInstance { instance_id: "i-a".into() },
            Action::Event { object: "NodePool/default".into(), reason: "LaunchTimeout".into(), message: why.into() },
            Action::DeleteClaim { name: "a".into() },
        ]
    );
    assert_eq!(sentences(&step)[0], "terminating instance i-a tagged for a: its launch had already timed out");
    assert_eq!(sentences(&step)[2], why);
    assert!(step.claim.is_none() && next.is_none(), "the claim is deleted, not rewritten");

    // Without any instance, the claim is simply deleted.
    c.instances.clear();
    let step = advance(&claim, &c);
    assert_eq!(actions(&step).len(), 2);
    assert_eq!(actions(&step)[1], Action::DeleteClaim { name: "a".into() });
}

#[test]
fn registration_by_provider_id_labels_the_node_removes_the_taint_and_initializes_a_ready_node() {
    let mut claim = launched("a");
    claim.labels.insert("team".into(), "payments".into());
    claim.labels.insert(labels::NODECLAIM.into(), "a".into());
    let mut n = node("a");
    n.taints.push(unregistered_taint());
    // What the launch template's --node-labels gave the kubelet.
    n.labels.insert("team".into(), "payments".into());
    let now = T0.plus(secs(90));
    let c = cluster(now, &claim, "running", Some(n));
    let (step, next, world) = settle(&claim, &c);
    let registration_labels = BTreeMap::from([
        (labels::CAPACITY_TYPE.to_string(), "on-demand".to_string()),
        (labels::NODECLAIM.to_string(), "a".to_string()),
        (labels::INSTANCE_TYPE.to_string(), "m7i.large".to_string()),
        (labels::ZONE.to_string(), "us-east-1a".to_string()),
    ]);
    assert_eq!(
        actions(&step),
        vec![
            Action::AdoptNode { node: "node-a".into(), claim: "a".into(), labels: registration_labels.clone() },
            Action::RemoveTaint { node: "node-a".into(), key: TAINT_UNREGISTERED.into() },
        ]
    );
    assert_eq!(
        sentences(&step),
        vec![
            "a registered as node node-a (providerID aws:///us-east-1a/i-a)".to_string(),
            "adopting node node-a as a's: labelling it dovetail.dev/nodeclaim, karpenter.sh/capacity-type, node.kubernetes.io/instance-type, topology.kubernetes.io/zone, holding its deletion for the drain".to_string(),
            "removing dovetail.dev/unregistered from node node-a: it is matched to a".to_string(),
            "a initialized: node node-a is Ready".to_string(),
        ]
    );
    let next = next.unwrap();
    assert_eq!(next.phase, Phase::Initialized);
    assert_eq!(next.node_name.as_deref(), Some("node-a"));
    assert_eq!((next.registered_at, next.initialized_at), (Some(now), Some(now)));
    assert_eq!(next.version, claim.version + 1, "one write per step");
    assert!(world.nodes[0].taints.is_empty());
    assert!(registration_labels.iter().all(|(k, v)| world.nodes[0].labels.get(k) == Some(v)));
    assert_eq!(step.requeue, None);
    // Labelled once: the next step finds them.
    assert!(advance(&next, &world).is_quiet());
}

#[test]
fn a_node_with_another_provider_id_does_not_register_the_claim() {
    let claim = launched("a");
    let mut n = node("a");
    n.provider_id = Some("aws:///us-east-1b/i-a".into());
    let step = advance(&claim, &cluster(T0.plus(secs(60)), &claim, "running", Some(n)));
    assert!(step.is_quiet(), "{step:?}");
    assert_eq!(step.requeue, Some(secs(10)), "watches for the node");
}

#[test]
fn nodes_stay_registered_until_ready_and_free_of_startup_and_not_ready_taints() {
    let mut claim = launched("a");
    let cilium = Taint::new("node.cilium.io/agent-not-ready", "true", TaintEffect::NoExecute);
    claim.startup_taints.push(cilium.clone());
    let mut n = node("a");
    n.ready = false;
    n.taints = vec![unregistered_taint(), cilium.clone()];
    let now = T0.plus(secs(60));
    let (step, next, mut world) = settle(&claim, &cluster(now, &claim, "running", Some(n)));
    let next = next.unwrap();
    assert_eq!(next.phase, Phase::Registered);
    assert_eq!(sentences(&step).last().unwrap(), "a not initialized: node node-a is not Ready yet");
    assert_eq!(step.requeue, Some(secs(10)));

    world.nodes[0].ready = true;
    let step = advance(&next, &world);
    assert!(step.claim.is_none());
    assert_eq!(
        sentences(&step),
        vec!["a not initialized: node node-a is still tainted with startup or not-ready taints node.cilium.io/agent-not-ready=true:NoExecute"]
    );

    // Ready, startup taint gone, the control plane's not-ready not lifted yet.
    let not_ready = Taint::new("node.kubernetes.io/not-ready", "", TaintEffect::NoSchedule);
    world.nodes[0].taints = vec![not_ready];
    let step = advance(&next, &world);
    assert!(step.claim.is_none());
    assert_eq!(
        sentences(&step),
        vec!["a not initialized: node node-a is still tainted with startup or not-ready taints node.kubernetes.io/not-ready:NoSchedule"]
    );

    world.nodes[0].taints.clear();
    world.now = now.plus(secs(30));
    let (step, next, _) = settle(&next, &world);
    let next = next.unwrap();
    assert_eq!(next.phase, Phase::Initialized);
    assert_eq!(next.initialized_at, Some(world.now));
    assert_eq!(next.registered_at, Some(now), "registration time is kept");
    assert_eq!(sentences(&step), vec!["a initialized: node node-a is Ready"]);
}

#[test]
fn registration_timeout_terminates_the_instance_and_deletes_the_claim() {
    let claim = launched("a");
    let early = advance(&claim, &cluster(T0.plus(secs(899)), &claim, "running", None));
    assert!(early.is_quiet() && early.requeue == Some(secs(10)));

    let c = cluster(T0.plus(secs(900)), &claim, "running", None);
    let (step, next, _) = settle(&claim, &c);
    let why = "RegistrationTimeout: no Node with providerID aws:///us-east-1a/i-a registered 15m after instance i-a \
               launched (limit 15m); terminating it and deleting a";
    assert_eq!(
        actions(&step),
        vec![
            Action::TerminateInstance { instance_id: "i-a".into() },
            Action::Event {
                object: "NodePool/default".into(),
                reason: "RegistrationTimeout".into(),
                message: why.into()
            },
            Action::DeleteClaim { name: "a".into() },
        ]
    );
    assert!(sentences(&step).iter().all(|s| s == why));
    assert!(next.is_none());
}

#[test]
fn a_vanished_instance_terminates_the_claim_and_releases_its_pods() {
    for state in [None, Some("terminated")] {
        let claim = running("a");
        let mut n = node("a");
        n.pods = vec![pod("shop", "cart-1").into(), mirror(pod("kube-system", "static-1")).into()];
        let mut c = cluster(T0.plus(secs(3600)), &claim, "running", Some(n));
        match state {
            None => c.instances.clear(),
            Some(s) => c.instances[0].state = s.into(),
        }
        let (step, next, world) = settle(&claim, &c);
        let next = next.unwrap();
        assert_eq!(next.phase, Phase::Terminated, "the record is kept");
        assert_eq!(next.version, claim.version + 1);
        let msg = "a terminated: its instance is already gone; released pods shop/cart-1";
        assert_eq!(
            actions(&step),
            vec![
                Action::Event { object: "Node/node-a".into(), reason: "Terminated".into(), message: msg.into() },
                Action::DeleteNode { node: "node-a".into() },
            ]
        );
        assert_eq!(sentences(&step)[0], "a is Terminated: its instance is already gone; released pods shop/cart-1");
        assert!(world.nodes.is_empty());
    }
}

#[test]
fn launching_claims_are_not_terminated_for_a_missing_instance() {
    let claim = NodeClaim::launching("a", "default", "default", T0);
    let mut c = cluster(T0.plus(secs(10)), &claim, "running", None);
    c.instances.clear();
    assert!(advance(&claim, &c).is_quiet());
}

#[test]
fn initialized_claims_are_quiet_and_advance_all_covers_every_claim() {
    let claim = running("a");
    let c = cluster(T0.plus(secs(3600)), &claim, "running", Some(node("a")));
    let step = advance(&claim, &c);
    assert!(step.is_quiet() && step.decisions.is_empty() && step.requeue.is_none());

    let mut other = launched("b");
    other.created_at = T0;
    let mut c2 = c.clone();
    c2.claims.push(other);
    c2.instances.push(instance("b", "running"));
    c2.nodes.push(node("b"));
    let steps = advance_all(&c2);
    assert_eq!(steps.len(), 2);
    assert!(steps[0].is_quiet());
    assert_eq!(steps[1].claim.as_ref().unwrap().phase, Phase::Initialized);
}

#[test]
fn the_nodes_last_pod_event_is_written_to_its_claim_once_per_ten_seconds() {
    let mut claim = running("a");
    let mut n = node("a");
    let first = T0.plus(secs(600));
    n.last_pod_event = Some(first);
    let mut c = cluster(T0.plus(secs(3600)), &claim, "running", Some(n));
    // The node knows of a pod event the claim does not: one write, and settled after it.
    let (step, next, mut world) = settle(&claim, &c);
    let written = step.claim.as_ref().expect("a claim write");
    assert_eq!((written.last_pod_event, written.version), (Some(first), claim.version + 1));
    assert_eq!(sentences(&step), vec![format!("a: last pod event on node node-a at {first}")]);
    claim = next.unwrap();

    // Pods come and go within 10 s of the stored time: no write each time.
    for later in [1, 5, 9] {
        world.nodes[0].last_pod_event = Some(first.plus(secs(later)));
        assert!(advance(&claim, &world).is_quiet(), "{later} s after the stored event");
    }
    // 10 s or more later: written again.
    world.nodes[0].last_pod_event = Some(first.plus(secs(10)));
    assert_eq!(advance(&claim, &world).claim.unwrap().last_pod_event, Some(first.plus(secs(10))));
    // A node that knows less than the claim (a cold read that never saw the removal) is no
    // reason to write, nor is one that knows nothing.
    world.nodes[0].last_pod_event = Some(first.minus(secs(300)));
    assert!(advance(&claim, &world).is_quiet());
    world.nodes[0].last_pod_event = None;
    assert!(advance(&claim, &world).is_quiet());
    // Claims not yet initialized are left to their lifecycle.
    c.claims[0].phase = Phase::Registered;
    let registered = c.claims[0].clone();
    c.nodes[0].ready = false;
    assert_eq!(advance(&registered, &c).claim, None);
}

#[test]
fn persisted_claims_resume_identically() {
    let claim = launched("a");
    let mut n = node("a");
    n.taints.push(unregistered_taint());
    let c = cluster(T0.plus(secs(90)), &claim, "running", Some(n));
    let json = serde_json::to_string(&claim).unwrap();
    let resumed: NodeClaim = serde_json::from_str(&json).unwrap();
    assert_eq!(advance(&resumed, &c), advance(&claim, &c));
}

/// A snapshot from a per-event read that asked only for `query`.
fn described_only(mut c: Cluster, query: InstanceQuery) -> Cluster {
    c.instances.retain(|i| query.ids.contains(&i.id));
    c.described = Described::Only(query);
    c
}

#[test]
fn an_instance_the_read_did_not_describe_is_never_taken_for_vanished() {
    let claims = [launched("a"), running("a"), disrupted("a", Reason::SpotInterrupted, T0)];
    for claim in claims {
        let c = cluster(T0.plus(secs(3600)), &claim, "running", Some(node("a")));
        // The read asked for another claim's instance: this one's is absent, and unknown.
        let mut other = InstanceQuery::default();
        other.instance("i-b");
        let step = advance(&claim, &described_only(c.clone(), other));
        assert!(step.is_quiet() && step.claim.is_none(), "{}: nothing judged: {step:?}", claim.phase);
        assert_eq!(step.requeue, Some(secs(10)), "looked at again by a read that asks for it");
        assert!(sentences(&step)[0].contains("did not describe instance i-a"), "{step:?}");

        // Asked for and absent: gone, as with a full read.
        let mut asked = InstanceQuery::default();
        asked.claim(&claim);
        let mut gone = described_only(c.clone(), asked.clone());
        gone.instances.clear();
        let step = advance(&claim, &gone);
        assert_eq!(step.claim.as_ref().map(|n| n.phase), Some(Phase::Terminated), "{step:?}");

        // Asked for and running: the same step as from a full read.
        assert_eq!(advance(&claim, &described_only(c.clone(), asked)), advance(&claim, &c));
    }
}

#[test]
fn a_timed_out_launch_terminates_only_tagged_instances_it_asked_for() {
    let claim = NodeClaim::launching("a", "default", "default", T0);
    let c = cluster(T0.plus(secs(300)), &claim, "running", None);
    // Not asked for: neither the tagged instance's termination nor the claim's deletion.
    let step = advance(&claim, &described_only(c.clone(), InstanceQuery::default()));
    assert!(step.is_quiet(), "{step:?}");
    // Asked for by its tag: what a full read decides.
    let mut by_tag = InstanceQuery::default();
    by_tag.claim(&claim);
    let mut asked = c.clone();
    asked.described = Described::Only(by_tag);
    assert_eq!(advance(&claim, &asked), advance(&claim, &c));
    assert_eq!(actions(&advance(&claim, &asked))[0], Action::TerminateInstance { instance_id: "i-a".into() });
}
