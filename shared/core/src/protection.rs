//! What protects a pod or node from voluntary disruption, and what evicting a pod costs.

use std::collections::BTreeMap;

use crate::labels::DO_NOT_DISRUPT;
use crate::model::Pod;
use crate::time::{parse_duration, Time};

/// Why `do-not-disrupt` blocks at `now`, if it does: `"true"` always; a duration for that long
/// after `since` (the pod's start or the node's registration). A value that is neither blocks
/// too — refusing to disrupt is the safe reading of a typo — and the reason says so.
pub fn do_not_disrupt(annotations: &BTreeMap<String, String>, since: Option<Time>, now: Time) -> Option<String> {
    for key in DO_NOT_DISRUPT {
        let Some(value) = annotations.get(key) else { continue };
        let value = value.trim();
        if value.eq_ignore_ascii_case("true") {
            return Some(format!("{key}=true"));
        }
        if value.eq_ignore_ascii_case("false") || value.is_empty() {
            continue;
        }
        match parse_duration(value) {
            Ok(d) => {
                let until = since.unwrap_or(now).plus(d);
                if now < until {
                    return Some(format!("{key}={value} (until {until})"));
                }
            }
            Err(_) => return Some(format!("{key}={value:?} is neither \"true\" nor a duration; treated as true")),
        }
    }
    None
}

/// `do-not-disrupt` on a pod, counted from when it started.
pub fn pod_protected(pod: &Pod, now: Time) -> Option<String> {
    do_not_disrupt(&pod.annotations, pod.started_at, now).map(|why| format!("pod {} has {why}", pod.key()))
}

/// Pods whose `system-cluster-critical` / `system-node-critical` priority class puts them in the
/// last eviction tiers.
pub fn is_critical(pod: &Pod) -> bool {
    matches!(pod.priority_class.as_str(), "system-cluster-critical" | "system-node-critical")
}

/// The annotation ReplicaSets use to choose which pod to remove first.
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// Karpenter's eviction cost: clamp(1 + deletion-cost/2^27 + priority/2^25, −10, 10).
pub fn eviction_cost(pod: &Pod) -> f64 {
    let deletion_cost =
        pod.annotations.get(POD_DELETION_COST).and_then(|v| v.trim().parse::<f64>().ok()).unwrap_or(0.0);
    (1.0 + deletion_cost / 2f64.powi(27) + f64::from(pod.priority) / 2f64.powi(25)).clamp(-10.0, 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Resources;
    use std::time::Duration;

    #[test]
    fn do_not_disrupt_true_duration_and_garbage() {
        let now = Time::from_secs(10_000);
        let mut a = BTreeMap::new();
        assert_eq!(do_not_disrupt(&a, None, now), None);
        a.insert("karpenter.sh/do-not-disrupt".to_string(), "true".to_string());
        assert!(do_not_disrupt(&a, None, now).unwrap().contains("karpenter.sh/do-not-disrupt=true"));
        a.clear();
        a.insert("dovetail.dev/do-not-disrupt".to_string(), "1h".to_string());
        let started = now.minus(Duration::from_secs(1800));
        assert!(do_not_disrupt(&a, Some(started), now).is_some(), "30 minutes into a 1h protection");
        assert!(do_not_disrupt(&a, Some(now.minus(Duration::from_secs(7200))), now).is_none(), "expired");
        a.insert("dovetail.dev/do-not-disrupt".to_string(), "soon".to_string());
        assert!(do_not_disrupt(&a, None, now).unwrap().contains("treated as true"));
    }

    #[test]
    fn eviction_cost_follows_karpenter() {
        let mut p = Pod::new("a", "b", Resources::default());
        assert_eq!(eviction_cost(&p), 1.0);
        p.priority = 1 << 25;
        assert_eq!(eviction_cost(&p), 2.0);
        p.annotations.insert(POD_DELETION_COST.into(), "-99999999999".into());
        assert_eq!(eviction_cost(&p), -10.0);
        p.priority_class = "system-node-critical".into();
        assert!(is_critical(&p));
    }
}
