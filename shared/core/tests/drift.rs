//! Drift: hash stability, every drift cause, budgets on replacements, do-not-disrupt, and the
//! write that starts a replacement.

use std::collections::BTreeMap;
use std::time::Duration;

use dovetail_core::catalog::{CapacityType, ImageVariant};
use dovetail_core::cluster::{Cluster, ResolvedClass};
use dovetail_core::decision::Action;
use dovetail_core::disruption::drift::{causes, detect, mark_drifted, plan, resolved_image, DriftCause};
use dovetail_core::events::DISRUPTION_BLOCKED;
use dovetail_core::hash::{json_hash, nodeclass_hash, nodepool_hash};
use dovetail_core::labels;
use dovetail_core::model::{Budget, BudgetNodes, Node, NodePool, Pod, Taint, TaintEffect};
use dovetail_core::nodeclaim::{Hashes, Launch, NodeClaim, Phase, Reason};
use dovetail_core::requirements::{Operator, Requirement};
use dovetail_core::resources::Resources;
use dovetail_core::time::Time;

/// 2024-01-01T00:00:00Z, a Monday.
const MONDAY: i64 = 1_704_067_200;

fn at(day: i64, hour: i64) -> Time {
    Time::from_secs(MONDAY + day * 86_400 + hour * 3600)
}

fn labelled_pool(order: &[(&str, &str)], taints: &[&str]) -> NodePool {
    let mut p = NodePool::new("default", "default");
    for (k, v) in order {
        p.labels.insert(k.to_string(), v.to_string());
    }
    for t in taints {
        p.taints.push(Taint::new(t, "", TaintEffect::NoSchedule));
    }
    p
}

#[test]
fn nodepool_hash_is_stable_and_covers_the_template_only() {
    let a = labelled_pool(&[("team", "a"), ("tier", "web")], &["x", "y"]);
    let b = labelled_pool(&[("tier", "web"), ("team", "a")], &["y", "x"]);
    assert_eq!(nodepool_hash(&a), nodepool_hash(&b), "field and list order do not matter");
    assert_eq!(nodepool_hash(&a), nodepool_hash(&a.clone()));
    // Pinned (FNV-1a 64 of the canonical JSON, checked independently): a hash persisted on claims
    // must not change between builds or releases.
    assert_eq!(nodepool_hash(&NodePool::new("default", "default")), "fe176ba510a692e6");

    let mut label = a.clone();
    label.labels.insert("team".into(), "b".into());
    assert_ne!(nodepool_hash(&a), nodepool_hash(&label), "a label is part of the template");
    let mut annotation = a.clone();
    annotation.annotations.insert("note".into(), "x".into());
    assert_ne!(nodepool_hash(&a), nodepool_hash(&annotation));
    let mut startup = a.clone();
    startup.startup_taints.push(Taint::new("cni", "", TaintEffect::NoExecute));
    assert_ne!(nodepool_hash(&a), nodepool_hash(&startup));
    let mut class = a.clone();
    class.node_class = "other".into();
    assert_ne!(nodepool_hash(&a), nodepool_hash(&class));
    let mut expire = a.clone();
    expire.expire_after = None;
    assert_ne!(nodepool_hash(&a), nodepool_hash(&expire));
    let mut tgp = a.clone();
    tgp.termination_grace_period = Some(Duration::from_secs(600));
    assert_ne!(nodepool_hash(&a), nodepool_hash(&tgp));

    let mut reqs = a.clone();
    reqs.requirements.add(Requirement::new(labels::CAPACITY_TYPE, Operator::In, &["spot"]).unwrap());
    reqs.weight = 50;
    reqs.disruption.budgets = vec![];
    assert_eq!(nodepool_hash(&a), nodepool_hash(&reqs), "requirements, weight and budgets are not hashed");
}

#[test]
fn json_and_nodeclass_hashes() {
    let one: serde_json::Value =
        serde_json::from_str(r#"{"role":"r","tags":{"a":"1","b":"2"},"amiSelectorTerms":[{"alias":"al2023@latest"}]}"#)
            .unwrap();
    let two: serde_json::Value =
        serde_json::from_str(r#"{"tags":{"b":"2","a":"1"},"amiSelectorTerms":[{"id":"ami-1"}],"role":"r"}"#).unwrap();
    assert_ne!(json_hash(&one), json_hash(&two), "json_hash sees everything");
    assert_eq!(nodeclass_hash(&one), nodeclass_hash(&two), "selector terms and key order are ignored");
    let three: serde_json::Value = serde_json::from_str(r#"{"role":"other","tags":{"a":"1","b":"2"}}"#).unwrap();
    assert_ne!(nodeclass_hash(&one), nodeclass_hash(&three));
    let lists: serde_json::Value = serde_json::from_str(r#"{"x":[1,2,3]}"#).unwrap();
    let reordered: serde_json::Value = serde_json::from_str(r#"{"x":[3,1,2]}"#).unwrap();
    assert_eq!(json_hash(&lists), json_hash(&reordered), "lists hash as sets, as Karpenter's do");
    assert_eq!(json_hash(&lists).len(), 16);
}

const CLASS_HASH: &str = "class-v1";

/// A pool of `n` healthy claims of `m5.large` (amd64), launched from the current template.
fn cluster(n: usize) -> Cluster {
    let pool = NodePool::new("default", "default");
    let mut c = Cluster { now: at(2, 12), ..Default::default() };
    c.resolved.push(ResolvedClass {
        name: "default".into(),
        hash: CLASS_HASH.into(),
        images: BTreeMap::from([("amd64".to_string(), "ami-0new".to_string())]),
        images_problem: None,
        images_per_variant: false,
        subnets: vec!["subnet-a".into(), "subnet-b".into()],
        security_groups: vec!["sg-1".into(), "sg-2".into()],
        zones: vec![],
        instance_profile: Some("profile".into()),
        instance_profile_problem: None,
        reservations: vec![],
    });
    for i in 0..n {
        let name = format!("default-{i}");
        let mut claim = NodeClaim::launching(&name, "default", "default", at(0, i as i64));
        claim.phase = Phase::Initialized;
        claim.hashes = Hashes { nodepool: nodepool_hash(&pool), nodeclass: CLASS_HASH.into() };
        claim.launch = Some(Launch {
            instance_id: format!("i-{i}"),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
            image_id: "ami-0new".into(),
            subnet_id: "subnet-a".into(),
            security_groups: vec!["sg-2".into(), "sg-1".into()],
            price: 0.04,
            launched_at: at(0, i as i64),
        });
        claim.node_name = Some(format!("node-{i}"));
        let mut node_labels = BTreeMap::new();
        node_labels.insert(labels::ARCH.to_string(), "amd64".to_string());
        node_labels.insert(labels::CAPACITY_TYPE.to_string(), "spot".to_string());
        node_labels.insert(labels::NODEPOOL.to_string(), "default".to_string());
        c.nodes.push(Node::new(&format!("node-{i}"), node_labels, Resources::default()));
        c.claims.push(claim);
    }
    c.nodepools.push(pool);
    c
}

#[test]
fn an_up_to_date_claim_is_not_drifted() {
    let c = cluster(3);
    assert!(detect(&c).is_empty(), "{:?}", detect(&c));
    assert!(plan(&c).replace.is_empty() && plan(&c).notes.is_empty());
}

#[test]
fn ami_drift_names_old_and_new_images() {
    let mut c = cluster(1);
    c.claims[0].launch.as_mut().unwrap().image_id = "ami-0old".into();
    let d = detect(&c);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].why, "drifted: AMI ami-0old is no longer selected (now ami-0new)");
    // An image pinned for the instance type wins over the architecture's.
    c.resolved[0].images.insert("m5.large".into(), "ami-0old".into());
    assert!(detect(&c).is_empty());
    // No image resolved for the claim: unknown, not drift.
    c.resolved[0].images.clear();
    assert!(detect(&c).is_empty());
}

#[test]
fn ami_drift_finds_the_architecture_without_a_node() {
    let mut c = cluster(1);
    c.nodes.clear();
    c.resolved[0].images = BTreeMap::from([("arm64".to_string(), "ami-arm".to_string())]);
    assert!(detect(&c).is_empty(), "m5.large is amd64 (from the catalog): no arm64 image applies");
    c.resolved[0].images.insert("amd64".into(), "ami-0newer".into());
    assert_eq!(
        causes(&c, &c.claims[0]),
        vec![DriftCause::Ami { launched: "ami-0new".into(), now: "ami-0newer".into() }]
    );
}

/// A GPU type's node drifts when the alias's nvidia image changes, not the standard one; a
/// class resolved from terms (one image per architecture) gives it that image.
#[test]
fn ami_drift_follows_the_variant_of_the_type() {
    let mut c = cluster(1);
    c.claims[0].launch.as_mut().unwrap().instance_type = "g5.xlarge".into();
    c.claims[0].launch.as_mut().unwrap().image_id = "ami-gpu".into();
    c.resolved[0].images = BTreeMap::from([
        ("amd64".to_string(), "ami-std".to_string()),
        ("amd64/nvidia".to_string(), "ami-gpu".to_string()),
        ("amd64/neuron".to_string(), "ami-neuron".to_string()),
    ]);
    c.resolved[0].images_per_variant = true;
    assert!(detect(&c).is_empty(), "{:?}", detect(&c));
    c.resolved[0].images.insert("amd64/nvidia".into(), "ami-gpu2".into());
    assert_eq!(causes(&c, &c.claims[0]), vec![DriftCause::Ami { launched: "ami-gpu".into(), now: "ami-gpu2".into() }]);
    // Per variant, a GPU type never takes the standard image: without an nvidia one, unknown.
    c.resolved[0].images.remove("amd64/nvidia");
    assert!(detect(&c).is_empty());
    assert_eq!(resolved_image(&c.resolved[0], "g5.xlarge", Some("amd64"), ImageVariant::Nvidia), None);
    assert_eq!(resolved_image(&c.resolved[0], "inf2.xlarge", Some("amd64"), ImageVariant::Neuron), Some("ami-neuron"));
    // An alias with no GPU build at all (an old pinned release) gives GPU types no image either.
    c.resolved[0].images.remove("amd64/neuron");
    assert_eq!(resolved_image(&c.resolved[0], "g5.xlarge", Some("amd64"), ImageVariant::Nvidia), None);
    assert_eq!(resolved_image(&c.resolved[0], "m5.large", Some("amd64"), ImageVariant::Standard), Some("ami-std"));
    // From terms: the architecture's one image, for every variant.
    c.resolved[0].images = BTreeMap::from([("amd64".to_string(), "ami-any".to_string())]);
    c.resolved[0].images_per_variant = false;
    assert_eq!(causes(&c, &c.claims[0]), vec![DriftCause::Ami { launched: "ami-gpu".into(), now: "ami-any".into() }]);
    assert_eq!(resolved_image(&c.resolved[0], "g5.xlarge", Some("amd64"), ImageVariant::Nvidia), Some("ami-any"));
}

#[test]
fn subnet_and_security_group_drift() {
    let mut c = cluster(1);
    c.resolved[0].subnets = vec!["subnet-c".into()];
    let d = detect(&c);
    assert_eq!(d[0].why, "drifted: subnet subnet-a is no longer selected (now subnet-c)");

    let mut c = cluster(1);
    c.resolved[0].security_groups = vec!["sg-1".into()];
    let d = detect(&c);
    assert_eq!(d[0].why, "drifted: security groups sg-1, sg-2 are no longer the selected ones (sg-1)");
    // Same set in a different order is not drift (checked by cluster(): launched sg-2, sg-1).
    c.resolved[0].security_groups = vec!["sg-2".into(), "sg-1".into()];
    assert!(detect(&c).is_empty());
}

#[test]
fn hash_drift_for_pool_and_class() {
    let mut c = cluster(1);
    c.nodepools[0].labels.insert("team".into(), "a".into());
    let d = detect(&c);
    assert!(matches!(d[0].causes[..], [DriftCause::NodePoolHash { .. }]), "{:?}", d[0].causes);
    assert!(d[0].why.starts_with("drifted: the NodePool template changed"), "{}", d[0].why);
    // The snapshot's precomputed hash is used when present.
    let mut c = cluster(1);
    c.nodepool_hashes.insert("default".into(), "elsewhere".into());
    assert!(matches!(detect(&c)[0].causes[..], [DriftCause::NodePoolHash { .. }]));

    let mut c = cluster(1);
    c.resolved[0].hash = "class-v2".into();
    assert_eq!(detect(&c)[0].why, "drifted: the EC2NodeClass spec changed (hash class-v1 at launch, class-v2 now)");
    // A claim without recorded hashes (adopted) is not replaced on a guess.
    c.claims[0].hashes = Hashes::default();
    assert!(detect(&c).is_empty());
}

#[test]
fn requirements_drift_uses_the_node_labels() {
    let mut c = cluster(1);
    c.nodepools[0].requirements.add(Requirement::new(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]).unwrap());
    let d = detect(&c);
    assert_eq!(
        d[0].causes,
        vec![DriftCause::Requirement {
            key: labels::CAPACITY_TYPE.into(),
            value: Some("spot".into()),
            wanted: c.nodepools[0].requirements.get(labels::CAPACITY_TYPE).unwrap().to_string(),
        }]
    );
    assert!(d[0].why.contains("label karpenter.sh/capacity-type=spot no longer satisfies"), "{}", d[0].why);
    // Widening the requirement instead is not drift (and does not change the hash).
    let mut c = cluster(1);
    c.nodepools[0]
        .requirements
        .add(Requirement::new(labels::CAPACITY_TYPE, Operator::In, &["spot", "on-demand"]).unwrap());
    assert!(detect(&c).is_empty());
    // A custom label the pool now demands and the node lacks.
    let mut c = cluster(1);
    c.nodepools[0].requirements.add(Requirement::new("team", Operator::Exists, &[] as &[&str]).unwrap());
    assert!(detect(&c)[0].why.contains("lacks label team"), "{}", detect(&c)[0].why);
}

#[test]
fn budgets_pace_replacements_and_say_so() {
    let mut c = cluster(10);
    c.nodepools[0].disruption.budgets =
        vec![Budget { nodes: BudgetNodes::Count(1), schedule: None, duration: None, reasons: vec![] }];
    for claim in c.claims.iter_mut().take(3) {
        claim.launch.as_mut().unwrap().image_id = "ami-0old".into();
    }
    let p = plan(&c);
    assert_eq!(p.replace.len(), 1);
    assert_eq!(p.replace[0].claim, "default-0", "oldest first");
    assert_eq!(p.notes.len(), 2);
    assert_eq!(
        p.notes[0].why,
        "drifted: AMI ami-0old is no longer selected (now ami-0new); replacement waits: budget 1 of 10 nodes \
         allows 1; 0 already disrupting, so 1 more may start for Drifted, taken by this pass for default-0"
    );
    // Each is a DisruptionBlocked Event on the waiting node (the budget allowed one: the pool is
    // not blocked, so it says nothing).
    for (n, node) in p.notes.iter().zip(["node-1", "node-2"]) {
        assert!(
            matches!(&n.action, Some(Action::Event { object, reason, message })
                if *object == format!("Node/{node}") && reason == DISRUPTION_BLOCKED && *message == n.why),
            "{n:?}"
        );
    }

    // Inside a zero-budget window for drift, nothing is replaced and the window's end is named.
    c.nodepools[0].disruption.budgets = vec![Budget {
        nodes: BudgetNodes::Count(0),
        schedule: Some("0 9 * * mon-fri".into()),
        duration: Some(Duration::from_secs(8 * 3600)),
        reasons: vec![dovetail_core::model::DisruptionReason::Drifted],
    }];
    let p = plan(&c);
    assert!(p.replace.is_empty());
    // The pool says once that its budget blocks drift, then each node.
    assert_eq!(p.notes.len(), 4);
    let Some(Action::Event { object, reason, message }) = &p.notes[0].action else { panic!("{:?}", p.notes[0]) };
    assert_eq!((object.as_str(), reason.as_str()), ("NodePool/default", DISRUPTION_BLOCKED));
    assert!(message.starts_with("drifted nodes wait: budget 0"), "{message}");
    assert!(p.notes[1].why.contains("window (opened 2024-01-03T09:00:00Z, 8h) ends at 2024-01-03T17:00:00Z"));
}

#[test]
fn do_not_disrupt_and_disrupting_claims_are_left_alone() {
    let mut c = cluster(3);
    for claim in &mut c.claims {
        claim.launch.as_mut().unwrap().image_id = "ami-0old".into();
    }
    let mut pod = Pod::new("shop", "cart-7", Resources::default());
    pod.annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    c.nodes[0].pods.push(pod.into());
    c.nodes[1].annotations.insert("dovetail.dev/do-not-disrupt".into(), "true".into());
    c.claims[2].phase = Phase::Draining;
    let p = plan(&c);
    assert!(p.replace.is_empty());
    assert_eq!(p.notes.len(), 2);
    assert!(p.notes[0].why.ends_with("not replaced: pod shop/cart-7 has karpenter.sh/do-not-disrupt=true"));
    assert!(p.notes[1].why.ends_with("not replaced: node node-1 has dovetail.dev/do-not-disrupt=true"));
}

#[test]
fn mark_drifted_records_replacements_on_the_claim() {
    let mut c = cluster(1);
    c.claims[0].launch.as_mut().unwrap().image_id = "ami-0old".into();
    let d = detect(&c).remove(0);
    let out = mark_drifted(&c.claims[0], &d, vec!["default-r1".into()], c.now);
    let Some(Action::WriteClaim(written)) = &out[0].action else { panic!("{out:?}") };
    let disruption = written.disruption.as_ref().unwrap();
    assert_eq!(disruption.reason, Reason::Drifted);
    assert_eq!(disruption.replacements, vec!["default-r1".to_string()]);
    assert_eq!(written.version, c.claims[0].version + 1, "written as the next version (the store's conditional write)");
    assert!(out[0].why.ends_with("replacing with default-r1 before draining"));
    assert!(matches!(&out[1].action, Some(Action::Event { object, .. }) if object == "Node/node-0"));
}

#[test]
fn only_initialized_claims_drift() {
    let mut c = cluster(1);
    c.resolved[0].hash = "class-v2".into();
    assert_eq!(detect(&c).len(), 1);
    for phase in [Phase::Launched, Phase::Registered] {
        c.claims[0].phase = phase;
        assert!(detect(&c).is_empty(), "a {phase} claim is still coming up: not replaced yet");
    }
}
