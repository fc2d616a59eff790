//! The `status` of NodePools, EC2NodeClasses and NodeOverlays from the core's [`PoolStatus`],
//! [`ClassStatus`] and [`OverlayStatus`], as Karpenter shows them.
//!
//! - NodePool: the resources of its nodes with a `nodes` count; `ValidationSucceeded`,
//!   `NodeClassReady`, `NodeRegistrationHealthy`, and `Ready` (valid and its class ready).
//! - EC2NodeClass: the subnets (with zones), security groups, images (with the architecture each
//!   suits) and instance profile it resolves to (`spec.instanceProfile`, or the one made for
//!   `spec.role`); `SubnetsReady`, `SecurityGroupsReady`, `AMIsReady`, `InstanceProfileReady`
//!   (reason `InstanceProfileFailed` with IAM's refusal when it could not be made; `AMIsReady`'s
//!   message says when the family is deprecated, AL2), and `Ready`
//!   (all four); `DeletionBlocked` while a
//!   deletion waits for the pools and claims that use it.
//! - NodeOverlay: `ValidationSucceeded` (False with reason `RuntimeValidation` for a field
//!   Dovetail cannot use, `Conflict` when an overlay of the same weight sets the same price or
//!   resource) and `Ready`.

use std::collections::BTreeMap;

use dovetail_api::crd::{Ami, EC2NodeClassStatus, NodeOverlayStatus, NodePoolStatus, SecurityGroup, Subnet};
use dovetail_core::cluster::{AMIS_READY, INSTANCE_PROFILE_READY, SECURITY_GROUPS_READY, SUBNETS_READY};
use dovetail_core::reconcile::ports::{ClassStatus, OverlayProblem, OverlayStatus, PoolStatus};
use dovetail_core::reconcile::INSTANCE_PROFILE_FAILED;
use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::read::{ObservedClass, ObservedOverlay, ObservedPool};

pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
pub const READY: &str = "Ready";
pub const NODE_CLASS_READY: &str = "NodeClassReady";
pub const NODE_REGISTRATION_HEALTHY: &str = "NodeRegistrationHealthy";
/// An EC2NodeClass that was deleted while NodePools or NodeClaims use it is kept, and says by whom.
pub const DELETION_BLOCKED: &str = "DeletionBlocked";
/// Karpenter's reason for `ValidationSucceeded=False`.
const VALIDATION_FAILED: &str = "NodePoolValidationFailed";

/// metav1.Condition allows 32 KiB of message.
const MESSAGE_LIMIT: usize = 32 * 1024;

/// The status to write for `s`, given what the pool shows now. Conditions keep their
/// `lastTransitionTime` unless their status flips (that time is what `kubectl describe` and
/// alerting read as "since when"); conditions of other types, set by someone else, are kept.
pub(crate) fn desired(s: &PoolStatus, observed: &ObservedPool, now: &Time) -> NodePoolStatus {
    let mut resources: BTreeMap<String, Quantity> =
        s.resources.to_quantities().into_iter().map(|(k, v)| (k, Quantity(v))).collect();
    // The core's resources already count the nodes (they are what `limits.nodes` is checked
    // against) but leave a zero out; the same count goes in either way, never added twice.
    resources.insert("nodes".into(), Quantity(s.nodes.to_string()));

    let valid = match &s.invalid {
        None => condition(VALIDATION_SUCCEEDED, "True", VALIDATION_SUCCEEDED, ""),
        Some(message) => condition(VALIDATION_SUCCEEDED, "False", VALIDATION_FAILED, message),
    };
    let class = match &s.node_class {
        Ok(()) => condition(NODE_CLASS_READY, "True", NODE_CLASS_READY, ""),
        Err(why) => condition(NODE_CLASS_READY, "False", "NodeClassNotReady", why),
    };
    // Healthy once a node registered; until then it stays as it was (Unknown on a new pool), so
    // a pool that scaled to zero is not called unknown again.
    let was = observed.status.conditions.iter().find(|c| c.type_ == NODE_REGISTRATION_HEALTHY);
    let registration = match (s.registered, was) {
        (true, _) => condition(NODE_REGISTRATION_HEALTHY, "True", NODE_REGISTRATION_HEALTHY, ""),
        (false, Some(c)) => c.clone(),
        (false, None) => condition(
            NODE_REGISTRATION_HEALTHY,
            "Unknown",
            "AwaitingRegistration",
            "no node of this pool registered yet",
        ),
    };
    let ready = root(&[&valid, &class]);
    let conditions =
        merge(vec![valid, class, registration, ready], &observed.status.conditions, observed.generation, now);
    NodePoolStatus {
        resources,
        node_class_observed_generation: observed.status.node_class_observed_generation,
        conditions,
    }
}

/// The status to write for a class: what it resolves to, and its conditions.
pub(crate) fn desired_class(s: &ClassStatus, observed: &ObservedClass, now: &Time) -> EC2NodeClassStatus {
    let parts = [SUBNETS_READY, SECURITY_GROUPS_READY, AMIS_READY, INSTANCE_PROFILE_READY];
    let mut ours: Vec<Condition> = match &s.resolved {
        Ok(r) => {
            let missing = r.missing();
            parts
                .iter()
                .map(|t| match (missing.iter().find(|(m, _)| m == t), *t) {
                    // Not "not found": the role may exist but not be passable, or IAM refused.
                    (Some((_, why)), INSTANCE_PROFILE_READY) => condition(t, "False", INSTANCE_PROFILE_FAILED, why),
                    (Some((_, why)), _) => condition(t, "False", &not_found(t), why),
                    (None, INSTANCE_PROFILE_READY) => {
                        let profile = r.instance_profile.as_deref().unwrap_or_default();
                        condition(t, "True", t, &format!("instance profile {profile}"))
                    }
                    (None, AMIS_READY) => condition(t, "True", t, observed.deprecation.unwrap_or_default()),
                    (None, _) => condition(t, "True", t, ""),
                })
                .collect()
        }
        Err(why) => parts.iter().map(|t| condition(t, "False", "ResolutionFailed", why)).collect(),
    };
    let refs: Vec<&Condition> = ours.iter().collect();
    let ready = root(&refs);
    ours.push(ready);
    // Only while a deletion waits: once nothing uses the class it goes, condition and all.
    if let Some(users) = &s.deletion_blocked {
        ours.push(condition(DELETION_BLOCKED, "True", "InUse", users));
    }
    let (subnets, security_groups, amis) = match &s.resolved {
        Ok(r) => (
            r.subnets
                .iter()
                .enumerate()
                .map(|(i, id)| Subnet {
                    id: id.clone(),
                    zone: r.zones.get(i).cloned().unwrap_or_default(),
                    zone_id: None,
                })
                .collect(),
            r.security_groups.iter().map(|id| SecurityGroup { id: id.clone(), name: None }).collect(),
            r.images.iter().map(|(arch, id)| image(arch, id)).collect(),
        ),
        Err(_) => (vec![], vec![], vec![]),
    };
    EC2NodeClassStatus {
        subnets,
        security_groups,
        capacity_reservations: observed.status.capacity_reservations.clone(),
        amis,
        instance_profile: s.resolved.as_ref().ok().and_then(|r| r.instance_profile.clone()),
        conditions: merge(ours, &observed.status.conditions, observed.generation, now),
    }
}

/// An image as the status lists it: keyed by architecture (`amd64`, `arm64`), it suits that
/// architecture; keyed by an instance type, that type.
fn image(key: &str, id: &str) -> Ami {
    let label =
        if matches!(key, "amd64" | "arm64") { "kubernetes.io/arch" } else { "node.kubernetes.io/instance-type" };
    let requirement =
        NodeSelectorRequirement { key: label.into(), operator: "In".into(), values: Some(vec![key.to_string()]) };
    Ami { id: id.to_string(), name: None, deprecated: false, requirements: vec![requirement] }
}

/// `SubnetsReady` → `SubnetsNotFound`, as Karpenter's reasons read.
fn not_found(type_: &str) -> String {
    format!("{}NotFound", type_.trim_end_matches("Ready"))
}

/// `Ready` from the conditions it depends on: `True` when all are, else `False` naming the first
/// that is not.
fn root(parts: &[&Condition]) -> Condition {
    match parts.iter().find(|c| c.status != "True") {
        None => condition(READY, "True", READY, ""),
        Some(c) => condition(READY, "False", &c.reason, &format!("{}={}: {}", c.type_, c.status, c.message)),
    }
}

/// Our conditions with their transition times kept from `before` where the status did not flip,
/// followed by the conditions of other types someone else set.
fn merge(ours: Vec<Condition>, before: &[Condition], generation: Option<i64>, now: &Time) -> Vec<Condition> {
    let mut conditions: Vec<Condition> = Vec::with_capacity(before.len().max(ours.len()));
    for mut c in ours {
        c.observed_generation = generation;
        c.last_transition_time = match before.iter().find(|b| b.type_ == c.type_) {
            Some(b) if b.status == c.status => b.last_transition_time.clone(),
            _ => now.clone(),
        };
        conditions.push(c);
    }
    let extra: Vec<Condition> =
        before.iter().filter(|b| !conditions.iter().any(|c| c.type_ == b.type_)).cloned().collect();
    conditions.extend(extra);
    conditions
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.chars().take(MESSAGE_LIMIT).collect(),
        last_transition_time: Time(Default::default()),
        observed_generation: None,
    }
}

/// The status to write for a NodeOverlay: whether it applies, and `Ready` from that.
pub(crate) fn desired_overlay(s: &OverlayStatus, observed: &ObservedOverlay, now: &Time) -> NodeOverlayStatus {
    let valid = match &s.problem {
        None => condition(VALIDATION_SUCCEEDED, "True", VALIDATION_SUCCEEDED, ""),
        Some(OverlayProblem::Invalid(why)) => condition(VALIDATION_SUCCEEDED, "False", "RuntimeValidation", why),
        Some(OverlayProblem::Conflict(with)) => condition(
            VALIDATION_SUCCEEDED,
            "False",
            "Conflict",
            &format!("conflicts with NodeOverlay {with}: the same weight, setting the same price or resource"),
        ),
    };
    let ready = root(&[&valid]);
    NodeOverlayStatus { conditions: merge(vec![valid, ready], &observed.status.conditions, observed.generation, now) }
}

/// Whether writing `desired` would change anything: the sweeper publishes every pass, and an
/// unchanged pool costs no write. Conditions are compared in any order.
pub(crate) fn unchanged(desired: &NodePoolStatus, observed: &NodePoolStatus) -> bool {
    let sorted = |s: &NodePoolStatus| {
        let mut c = s.conditions.clone();
        c.sort_by(|a, b| a.type_.cmp(&b.type_));
        c
    };
    desired.resources == observed.resources
        && desired.node_class_observed_generation == observed.node_class_observed_generation
        && sorted(desired) == sorted(observed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_api::crd::AmiFamily;
    use dovetail_core::cluster::ResolvedClass;
    use dovetail_core::resources::Resources;

    fn t(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    fn pool(invalid: Option<&str>) -> PoolStatus {
        // As the core's usage counts two nodes: their capacity and one node each.
        let mut resources = Resources::new(7840, 32 << 30);
        resources.set("nodes", 2);
        PoolStatus {
            name: "default".into(),
            nodes: 2,
            resources,
            invalid: invalid.map(Into::into),
            node_class: Ok(()),
            registered: true,
        }
    }

    fn statuses(conditions: &[Condition]) -> Vec<(&str, &str)> {
        conditions.iter().map(|c| (c.type_.as_str(), c.status.as_str())).collect()
    }

    #[test]
    fn an_overlay_is_ready_unless_invalid_or_in_conflict() {
        let now = t("2025-06-01T12:00:00Z");
        let observed = ObservedOverlay { generation: Some(3), ..Default::default() };
        let ok = desired_overlay(&OverlayStatus { name: "a".into(), problem: None }, &observed, &now);
        assert_eq!(statuses(&ok.conditions), [("ValidationSucceeded", "True"), ("Ready", "True")]);
        assert!(ok.conditions.iter().all(|c| c.observed_generation == Some(3)));
        let conflict = OverlayStatus { name: "a".into(), problem: Some(OverlayProblem::Conflict("b".into())) };
        let s = desired_overlay(&conflict, &observed, &t("2025-06-01T12:05:00Z"));
        assert_eq!(statuses(&s.conditions), [("ValidationSucceeded", "False"), ("Ready", "False")]);
        assert_eq!((s.conditions[0].reason.as_str(), s.conditions[1].reason.as_str()), ("Conflict", "Conflict"));
        assert!(s.conditions[0].message.contains("NodeOverlay b"), "{}", s.conditions[0].message);
        let invalid = OverlayStatus {
            name: "a".into(),
            problem: Some(OverlayProblem::Invalid("spec.priceAdjustment: \"28%\" is not".into())),
        };
        let s =
            desired_overlay(&invalid, &ObservedOverlay { status: ok.clone(), ..observed }, &t("2025-06-01T12:05:00Z"));
        assert_eq!(s.conditions[0].reason, "RuntimeValidation");
        assert_eq!(s.conditions[0].last_transition_time, t("2025-06-01T12:05:00Z"), "it flipped");
        // Unchanged, it keeps its transition time.
        let again = desired_overlay(
            &OverlayStatus { name: "a".into(), problem: None },
            &ObservedOverlay { status: ok.clone(), ..observed },
            &t("2025-06-01T13:00:00Z"),
        );
        assert_eq!(again, ok);
    }

    #[test]
    fn resources_and_valid_conditions() {
        let s = desired(
            &pool(None),
            &ObservedPool { generation: Some(4), ..Default::default() },
            &t("2025-06-01T12:00:00Z"),
        );
        assert_eq!(s.resources["nodes"].0, "2", "counted once");
        assert_eq!(s.resources["cpu"].0, "7840m");
        let empty = PoolStatus { nodes: 0, resources: Resources::default(), ..pool(None) };
        let s0 = desired(&empty, &ObservedPool::default(), &t("2025-06-01T12:00:00Z"));
        assert_eq!(s0.resources["nodes"].0, "0");
        assert_eq!(s.resources["memory"].0, "32Gi");
        assert_eq!(
            statuses(&s.conditions),
            [
                ("ValidationSucceeded", "True"),
                ("NodeClassReady", "True"),
                ("NodeRegistrationHealthy", "True"),
                ("Ready", "True")
            ]
        );
        assert!(s.conditions.iter().all(|c| c.observed_generation == Some(4)));
    }

    #[test]
    fn a_pool_is_ready_when_valid_with_its_class_ready() {
        let now = t("2025-06-01T12:00:00Z");
        let missing =
            PoolStatus { node_class: Err("EC2NodeClass gpu not found".into()), registered: false, ..pool(None) };
        let s = desired(&missing, &ObservedPool::default(), &now);
        assert_eq!(
            statuses(&s.conditions),
            [
                ("ValidationSucceeded", "True"),
                ("NodeClassReady", "False"),
                ("NodeRegistrationHealthy", "Unknown"),
                ("Ready", "False")
            ]
        );
        let ready = s.conditions.iter().find(|c| c.type_ == READY).unwrap();
        assert_eq!(
            (ready.reason.as_str(), ready.message.as_str()),
            ("NodeClassNotReady", "NodeClassReady=False: EC2NodeClass gpu not found")
        );
        // Registration stays healthy once seen, while the pool has no node.
        let observed = ObservedPool { generation: None, status: desired(&pool(None), &ObservedPool::default(), &now) };
        let scaled_to_zero = PoolStatus { registered: false, ..pool(None) };
        let s = desired(&scaled_to_zero, &observed, &t("2025-06-01T13:00:00Z"));
        let r = s.conditions.iter().find(|c| c.type_ == NODE_REGISTRATION_HEALTHY).unwrap();
        assert_eq!((r.status.as_str(), &r.last_transition_time), ("True", &now));
    }

    #[test]
    fn transition_times_move_only_on_a_flip() {
        let first = t("2025-06-01T12:00:00Z");
        let later = t("2025-06-01T12:05:00Z");
        let s1 = desired(&pool(None), &ObservedPool::default(), &first);
        let observed = ObservedPool { generation: None, status: s1.clone() };
        let s2 = desired(&pool(None), &observed, &later);
        assert_eq!(s2, s1, "nothing changed: same status, same times");
        assert!(unchanged(&s2, &observed.status));

        let bad = "spec.template.spec.requirements[0].operator: unknown operator";
        let s3 = desired(&pool(Some(bad)), &observed, &later);
        assert!(!unchanged(&s3, &observed.status));
        let v = s3.conditions.iter().find(|c| c.type_ == VALIDATION_SUCCEEDED).unwrap();
        assert_eq!((v.status.as_str(), v.reason.as_str(), v.message.as_str()), ("False", VALIDATION_FAILED, bad));
        assert_eq!(v.last_transition_time, later);
        let r = s3.conditions.iter().find(|c| c.type_ == READY).unwrap();
        assert_eq!(r.message, format!("ValidationSucceeded=False: {bad}"));
    }

    #[test]
    fn other_conditions_are_kept() {
        let mut observed = ObservedPool::default();
        observed.status.conditions.push(Condition {
            type_: "Example".into(),
            status: "True".into(),
            reason: "Example".into(),
            message: String::new(),
            last_transition_time: t("2025-01-01T00:00:00Z"),
            observed_generation: Some(1),
        });
        let s = desired(&pool(None), &observed, &t("2025-06-01T12:00:00Z"));
        assert_eq!(s.conditions.len(), 5);
        assert_eq!(s.conditions[4].type_, "Example");
    }

    fn resolved() -> ResolvedClass {
        ResolvedClass {
            name: "default".into(),
            hash: "h".into(),
            images: [("amd64".to_string(), "ami-x86".to_string()), ("arm64".to_string(), "ami-arm".to_string())].into(),
            images_problem: None,
            subnets: vec!["subnet-a".into(), "subnet-b".into()],
            security_groups: vec!["sg-1".into()],
            zones: vec!["us-east-1a".into(), "us-east-1b".into()],
            instance_profile: Some("demo_0123456789abcdef".into()),
            instance_profile_problem: None,
        }
    }

    #[test]
    fn a_resolved_class_lists_what_it_resolves_to_and_is_ready() {
        let observed = ObservedClass::default();
        let s = desired_class(
            &ClassStatus { name: "default".into(), resolved: Ok(resolved()), deletion_blocked: None },
            &observed,
            &t("2025-06-01T12:00:00Z"),
        );
        assert_eq!(
            s.subnets.iter().map(|x| (x.id.as_str(), x.zone.as_str())).collect::<Vec<_>>(),
            [("subnet-a", "us-east-1a"), ("subnet-b", "us-east-1b")]
        );
        assert_eq!(s.security_groups[0].id, "sg-1");
        let arm = s.amis.iter().find(|a| a.id == "ami-arm").unwrap();
        assert_eq!(arm.requirements[0].key, "kubernetes.io/arch");
        assert_eq!(arm.requirements[0].values.as_deref(), Some(&["arm64".to_string()][..]));
        assert_eq!(s.instance_profile.as_deref(), Some("demo_0123456789abcdef"));
        let profile = s.conditions.iter().find(|c| c.type_ == INSTANCE_PROFILE_READY).unwrap();
        assert_eq!(profile.message, "instance profile demo_0123456789abcdef");
        assert_eq!(
            statuses(&s.conditions),
            [
                ("SubnetsReady", "True"),
                ("SecurityGroupsReady", "True"),
                ("AMIsReady", "True"),
                ("InstanceProfileReady", "True"),
                ("Ready", "True")
            ]
        );
    }

    #[test]
    fn an_al2_class_is_ready_and_says_al2_is_deprecated() {
        let observed = ObservedClass { deprecation: AmiFamily::Al2.deprecation(), ..ObservedClass::default() };
        let s = desired_class(
            &ClassStatus { name: "default".into(), resolved: Ok(resolved()), deletion_blocked: None },
            &observed,
            &t("2025-06-01T12:00:00Z"),
        );
        let amis = s.conditions.iter().find(|c| c.type_ == AMIS_READY).unwrap();
        assert_eq!(amis.status, "True");
        assert!(amis.message.starts_with("AWS has deprecated AL2"), "{}", amis.message);
        assert!(s.conditions.iter().any(|c| c.type_ == READY && c.status == "True"));
    }

    #[test]
    fn a_class_that_resolves_to_nothing_or_fails_is_not_ready_and_says_why() {
        let observed = ObservedClass::default();
        let now = t("2025-06-01T12:00:00Z");
        let empty = ResolvedClass { subnets: vec![], zones: vec![], ..resolved() };
        let s = desired_class(
            &ClassStatus { name: "default".into(), resolved: Ok(empty), deletion_blocked: None },
            &observed,
            &now,
        );
        let subnets = s.conditions.iter().find(|c| c.type_ == SUBNETS_READY).unwrap();
        assert_eq!(
            (subnets.status.as_str(), subnets.reason.as_str(), subnets.message.as_str()),
            ("False", "SubnetsNotFound", "no subnet matches subnetSelectorTerms")
        );
        let ready = s.conditions.iter().find(|c| c.type_ == READY).unwrap();
        assert_eq!(ready.status, "False");
        assert!(ready.message.starts_with("SubnetsReady=False"), "{}", ready.message);

        let failed = ClassStatus {
            name: "default".into(),
            resolved: Err("DescribeSubnets: throttled".into()),
            deletion_blocked: Some(
                "still used by NodePool web; delete them or point them at another class first".into(),
            ),
        };
        let s = desired_class(&failed, &observed, &now);
        assert!(s.subnets.is_empty() && s.amis.is_empty());
        assert!(s
            .conditions
            .iter()
            .filter(|c| ![READY, DELETION_BLOCKED].contains(&c.type_.as_str()))
            .all(|c| c.reason == "ResolutionFailed"));
        // A deleted class still in use says by whom; its Ready is about resolving, not this.
        let blocked = s.conditions.iter().find(|c| c.type_ == DELETION_BLOCKED).unwrap();
        assert_eq!((blocked.status.as_str(), blocked.reason.as_str()), ("True", "InUse"));
        assert!(blocked.message.starts_with("still used by NodePool web"), "{}", blocked.message);
    }

    #[test]
    fn a_class_whose_instance_profile_could_not_be_made_says_why_and_is_not_ready() {
        let why = "spec.role: role Missing does not exist (instance profile demo_0123456789abcdef)";
        let r = ResolvedClass { instance_profile: None, instance_profile_problem: Some(why.into()), ..resolved() };
        let s = desired_class(
            &ClassStatus { name: "default".into(), resolved: Ok(r), deletion_blocked: None },
            &ObservedClass::default(),
            &t("2025-06-01T12:00:00Z"),
        );
        assert_eq!(s.instance_profile, None);
        let profile = s.conditions.iter().find(|c| c.type_ == INSTANCE_PROFILE_READY).unwrap();
        assert_eq!(
            (profile.status.as_str(), profile.reason.as_str(), profile.message.as_str()),
            ("False", "InstanceProfileFailed", why)
        );
        // The parts EC2 resolved still show as they are.
        assert_eq!(s.subnets.len(), 2);
        assert!(s.conditions.iter().find(|c| c.type_ == SUBNETS_READY).is_some_and(|c| c.status == "True"));
        let ready = s.conditions.iter().find(|c| c.type_ == READY).unwrap();
        assert!(ready.message.starts_with("InstanceProfileReady=False"), "{}", ready.message);
    }
}
