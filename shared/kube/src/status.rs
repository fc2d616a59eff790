//! The `status` of NodePools, EC2NodeClasses and NodeOverlays from the core's [`PoolStatus`],
//! [`ClassStatus`] and [`OverlayStatus`], as Karpenter shows them.
//!
//! - NodePool: the resources of its nodes with a `nodes` count and what they cost per hour
//!   (`dovetail.dev/cost-per-hour`, in dollars); `ValidationSucceeded`, `NodeClassReady`,
//!   `NodeRegistrationHealthy`, and `Ready` (valid and its class ready); `CostLimitReached` when a
//!   cost limit applies to it.
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

use dovetail_api::crd::{
    Ami, CapacityReservation, EC2NodeClassStatus, InstanceMatchCriteria, NodeOverlayStatus, NodePoolStatus,
    SecurityGroup, Subnet,
};
use dovetail_core::catalog::{ImageVariant, Reservation};
use dovetail_core::cluster::{AMIS_READY, INSTANCE_PROFILE_READY, SECURITY_GROUPS_READY, SUBNETS_READY};
use dovetail_core::labels;
use dovetail_core::model::{cost_quantity, LIMIT_COST};
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
/// Dovetail's: a pool's cost limit, or the cluster-wide one, leaves too little for even its
/// cheapest node (`True`), or not (`False`); absent when no cost limit applies to the pool.
pub const COST_LIMIT_REACHED: &str = dovetail_core::events::COST_LIMIT_REACHED;
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
    // What the pool costs is counted in micro-dollars; shown, as its limit is written, in dollars.
    if let Some(micros) = resources.get(LIMIT_COST).map(|_| s.resources.get(LIMIT_COST)) {
        resources.insert(LIMIT_COST.into(), Quantity(cost_quantity(micros)));
    }

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
    let mut ours = vec![valid, class, registration, ready];
    // Not part of Ready: a pool at its cost limit is healthy, it just cannot grow.
    let cost = s.cost_limit.as_ref().map(|c| match c.reached {
        true => condition(COST_LIMIT_REACHED, "True", COST_LIMIT_REACHED, &c.message),
        false => condition(COST_LIMIT_REACHED, "False", "WithinCostLimit", &c.message),
    });
    ours.extend(cost.clone());
    let mut conditions = merge(ours, &observed.status.conditions, observed.generation, now);
    // Ours alone: with no cost limit any more, the condition goes rather than stay as it was.
    if cost.is_none() {
        conditions.retain(|c| c.type_ != COST_LIMIT_REACHED);
    }
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
            r.images.iter().map(|(key, id)| image(key, id, r.images_per_variant)).collect(),
        ),
        Err(_) => (vec![], vec![], vec![]),
    };
    EC2NodeClassStatus {
        subnets,
        security_groups,
        capacity_reservations: match &s.resolved {
            Ok(r) => r.reservations.iter().map(|res| reservation(res, now)).collect(),
            Err(_) => vec![],
        },
        amis,
        instance_profile: s.resolved.as_ref().ok().and_then(|r| r.instance_profile.clone()),
        conditions: merge(ours, &observed.status.conditions, observed.generation, now),
    }
}

/// An image as the status lists it, with the requirements of the types it suits (Karpenter's
/// shape): keyed by an instance type, that type; keyed by architecture (`amd64`, `arm64`), that
/// architecture, and for an alias's variants (`amd64/nvidia`) GPU types (`instance-gpu-count`
/// exists) or Neuron types (`instance-accelerator-count` exists), its standard image then the
/// types with neither.
fn image(key: &str, id: &str, per_variant: bool) -> Ami {
    let requirement = |key: &str, operator: &str, values: Option<Vec<String>>| NodeSelectorRequirement {
        key: key.into(),
        operator: operator.into(),
        values,
    };
    let requirements = match ImageVariant::parse_key(key) {
        None => vec![requirement(labels::INSTANCE_TYPE, "In", Some(vec![key.to_string()]))],
        Some((arch, variant)) => {
            let mut r = vec![requirement(labels::ARCH, "In", Some(vec![arch.to_string()]))];
            match variant {
                ImageVariant::Standard if per_variant => {
                    r.push(requirement(ACCELERATOR_COUNT, "DoesNotExist", None));
                    r.push(requirement(labels::INSTANCE_GPU_COUNT, "DoesNotExist", None));
                }
                ImageVariant::Standard => {}
                ImageVariant::Nvidia => r.push(requirement(labels::INSTANCE_GPU_COUNT, "Exists", None)),
                ImageVariant::Neuron => r.push(requirement(ACCELERATOR_COUNT, "Exists", None)),
            }
            r
        }
    };
    Ami { id: id.to_string(), name: None, deprecated: false, requirements }
}

/// Karpenter's label for a type's accelerator count (Inferentia, Trainium), which its status
/// names for the Neuron images.
const ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";

/// A reservation as Karpenter's status lists it, its state (`active`, `expiring`) as of `now`.
fn reservation(r: &Reservation, now: &Time) -> CapacityReservation {
    let end = r.end.and_then(|t| k8s_openapi::jiff::Timestamp::from_millisecond(t.0).ok()).map(Time);
    CapacityReservation {
        availability_zone: r.zone.clone(),
        end_time: end,
        id: r.id.clone(),
        instance_match_criteria: InstanceMatchCriteria::from(r.instance_match_criteria.as_str()),
        instance_type: r.instance_type.clone(),
        interruptible: r.interruptible,
        owner_id: r.owner_id.clone(),
        reservation_type: r.kind.as_str().to_string(),
        state: r.state(dovetail_api::convert::time(now)).to_string(),
    }
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
    use dovetail_core::reconcile::ports::CostLimitStatus;
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
            cost_limit: None,
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
    fn a_cost_limit_shows_as_a_condition_and_the_cost_in_dollars() {
        let now = t("2025-06-01T12:00:00Z");
        let mut costly = pool(None);
        costly.resources.set(LIMIT_COST, 384_000);
        let reached = "the pool's capacity costs $0.3840/h of its limit $0.4000/h; its cheapest node costs $0.0960/h";
        costly.cost_limit = Some(CostLimitStatus { reached: true, message: reached.into() });
        let s = desired(&costly, &ObservedPool::default(), &now);
        assert_eq!(s.resources[LIMIT_COST].0, "0.384");
        let c = s.conditions.iter().find(|c| c.type_ == COST_LIMIT_REACHED).expect("the condition");
        assert_eq!((c.status.as_str(), c.reason.as_str(), c.message.as_str()), ("True", "CostLimitReached", reached));
        // Ready does not depend on it: the pool is healthy, it cannot grow.
        assert_eq!(s.conditions.iter().find(|c| c.type_ == READY).unwrap().status, "True");

        // Room again: False, from a later time.
        let observed = ObservedPool { generation: None, status: s };
        costly.cost_limit = Some(CostLimitStatus { reached: false, message: "within".into() });
        let later = t("2025-06-01T12:05:00Z");
        let s = desired(&costly, &observed, &later);
        let c = s.conditions.iter().find(|c| c.type_ == COST_LIMIT_REACHED).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str(), &c.last_transition_time),
            ("False", "WithinCostLimit", &later)
        );

        // The limit removed: the condition goes, as does a cost of nothing.
        let observed = ObservedPool { generation: None, status: s };
        let s = desired(&pool(None), &observed, &later);
        assert!(s.conditions.iter().all(|c| c.type_ != COST_LIMIT_REACHED), "{:?}", s.conditions);
        assert!(!s.resources.contains_key(LIMIT_COST));
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
            images_per_variant: false,
            subnets: vec!["subnet-a".into(), "subnet-b".into()],
            security_groups: vec!["sg-1".into()],
            zones: vec!["us-east-1a".into(), "us-east-1b".into()],
            instance_profile: Some("demo_0123456789abcdef".into()),
            instance_profile_problem: None,
            reservations: vec![],
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

    /// An alias's variant images list the types each suits, as Karpenter's status does.
    #[test]
    fn variant_images_list_their_types() {
        let mut r = resolved();
        r.images.insert("amd64/nvidia".into(), "ami-gpu".into());
        r.images.insert("amd64/neuron".into(), "ami-neuron".into());
        r.images.insert("p5.48xlarge".into(), "ami-pinned".into());
        r.images_per_variant = true;
        let s = desired_class(
            &ClassStatus { name: "default".into(), resolved: Ok(r), deletion_blocked: None },
            &ObservedClass::default(),
            &t("2025-06-01T12:00:00Z"),
        );
        let of = |id: &str| -> Vec<(String, String, Vec<String>)> {
            let ami = s.amis.iter().find(|a| a.id == id).unwrap();
            ami.requirements
                .iter()
                .map(|r| (r.key.clone(), r.operator.clone(), r.values.clone().unwrap_or_default()))
                .collect()
        };
        let req =
            |k: &str, op: &str, v: &[&str]| (k.to_string(), op.to_string(), v.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            of("ami-x86"),
            [
                req("kubernetes.io/arch", "In", &["amd64"]),
                req(ACCELERATOR_COUNT, "DoesNotExist", &[]),
                req(labels::INSTANCE_GPU_COUNT, "DoesNotExist", &[])
            ]
        );
        assert_eq!(
            of("ami-gpu"),
            [req("kubernetes.io/arch", "In", &["amd64"]), req(labels::INSTANCE_GPU_COUNT, "Exists", &[])]
        );
        assert_eq!(
            of("ami-neuron"),
            [req("kubernetes.io/arch", "In", &["amd64"]), req(ACCELERATOR_COUNT, "Exists", &[])]
        );
        assert_eq!(of("ami-pinned"), [req(labels::INSTANCE_TYPE, "In", &["p5.48xlarge"])]);
    }

    #[test]
    fn a_class_lists_its_reservations_as_karpenter_does() {
        use dovetail_core::catalog::{Reservation, ReservationKind};
        let now = t("2025-06-01T12:00:00Z");
        let at = |s: &str| dovetail_api::convert::time(&t(s));
        let odcr = Reservation {
            id: "cr-0a".into(),
            instance_type: "p5.48xlarge".into(),
            zone: "us-east-1a".into(),
            owner_id: "123456789012".into(),
            instance_match_criteria: "targeted".into(),
            kind: ReservationKind::Default,
            interruptible: false,
            available: 2,
            observed_at: at("2025-06-01T11:59:00Z"),
            end: None,
        };
        // A block ending in 30 minutes is within its last 40: expiring.
        let block = Reservation {
            id: "cr-0b".into(),
            kind: ReservationKind::CapacityBlock,
            end: Some(at("2025-06-01T12:30:00Z")),
            ..odcr.clone()
        };
        let interruptible = Reservation { id: "cr-0c".into(), interruptible: true, ..odcr.clone() };
        let r = ResolvedClass { reservations: vec![odcr, block, interruptible], ..resolved() };
        let s = desired_class(
            &ClassStatus { name: "default".into(), resolved: Ok(r), deletion_blocked: None },
            &ObservedClass::default(),
            &now,
        );
        let listed: Vec<(&str, &str, bool, &str, Option<&Time>)> = s
            .capacity_reservations
            .iter()
            .map(|c| {
                (c.id.as_str(), c.reservation_type.as_str(), c.interruptible, c.state.as_str(), c.end_time.as_ref())
            })
            .collect();
        assert_eq!(
            listed,
            [
                ("cr-0a", "default", false, "active", None),
                ("cr-0b", "capacity-block", false, "expiring", Some(&t("2025-06-01T12:30:00Z"))),
                ("cr-0c", "default", true, "active", None)
            ]
        );
        // Written whether true or false, as Karpenter's status has it.
        let written = serde_json::to_value(&s.capacity_reservations).unwrap();
        assert_eq!(written[0]["interruptible"], false);
        assert_eq!(written[2]["interruptible"], true);
        let cr = &s.capacity_reservations[0];
        assert_eq!((cr.instance_type.as_str(), cr.availability_zone.as_str()), ("p5.48xlarge", "us-east-1a"));
        assert_eq!((cr.owner_id.as_str(), cr.instance_match_criteria.as_str()), ("123456789012", "targeted"));
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
