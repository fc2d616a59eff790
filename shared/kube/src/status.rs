//! A NodePool's `status` from the core's [`PoolStatus`], as Karpenter shows it: the resources of
//! its nodes with a `nodes` count, and the `ValidationSucceeded` and `Ready` conditions.

use std::collections::BTreeMap;

use dovetail_api::crd::NodePoolStatus;
use dovetail_core::reconcile::ports::PoolStatus;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::read::ObservedPool;

pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
pub const READY: &str = "Ready";
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

    let (valid, ready) = match &s.invalid {
        None => {
            (condition(VALIDATION_SUCCEEDED, "True", VALIDATION_SUCCEEDED, ""), condition(READY, "True", READY, ""))
        }
        Some(message) => {
            let message: String = message.chars().take(MESSAGE_LIMIT).collect();
            (
                condition(VALIDATION_SUCCEEDED, "False", VALIDATION_FAILED, &message),
                condition(READY, "False", VALIDATION_FAILED, &format!("{VALIDATION_SUCCEEDED}=False: {message}")),
            )
        }
    };
    let ours = [valid, ready];
    let before = &observed.status.conditions;
    let mut conditions: Vec<Condition> = Vec::with_capacity(before.len().max(2));
    for mut c in ours {
        c.observed_generation = observed.generation;
        c.last_transition_time = match before.iter().find(|b| b.type_ == c.type_) {
            Some(b) if b.status == c.status => b.last_transition_time.clone(),
            _ => now.clone(),
        };
        conditions.push(c);
    }
    conditions.extend(before.iter().filter(|b| b.type_ != VALIDATION_SUCCEEDED && b.type_ != READY).cloned());
    NodePoolStatus {
        resources,
        node_class_observed_generation: observed.status.node_class_observed_generation,
        conditions,
    }
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: Time(Default::default()),
        observed_generation: None,
    }
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
    use dovetail_core::resources::Resources;

    fn t(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    fn pool(invalid: Option<&str>) -> PoolStatus {
        // As the core's usage counts two nodes: their capacity and one node each.
        let mut resources = Resources::new(7840, 32 << 30);
        resources.set("nodes", 2);
        PoolStatus { name: "default".into(), nodes: 2, resources, invalid: invalid.map(Into::into) }
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
        let types: Vec<(&str, &str, Option<i64>)> =
            s.conditions.iter().map(|c| (c.type_.as_str(), c.status.as_str(), c.observed_generation)).collect();
        assert_eq!(types, vec![("ValidationSucceeded", "True", Some(4)), ("Ready", "True", Some(4))]);
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
            type_: "NodeClassReady".into(),
            status: "True".into(),
            reason: "NodeClassReady".into(),
            message: String::new(),
            last_transition_time: t("2025-01-01T00:00:00Z"),
            observed_generation: Some(1),
        });
        let s = desired(&pool(None), &observed, &t("2025-06-01T12:00:00Z"));
        assert_eq!(s.conditions.len(), 3);
        assert_eq!(s.conditions[2].type_, "NodeClassReady");
    }
}
