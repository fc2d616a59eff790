//! Node object → core [`Node`] (kind Existing).

use dovetail_core::disruption::repair;
use dovetail_core::model::{Node, NodeCondition, NodeKind, Taint, TaintEffect};
use dovetail_core::nodeclaim::object::FINALIZER;
use k8s_openapi::api::core::v1 as k8s;

use super::pod::quantities;
use super::{ConvertError, Within};
use crate::crd::labels::{check_label_value, check_qualified_name};
use crate::crd::meta::NameRule;

/// Labels, taints, allocatable and schedulability of a registered Node. Pods are not attached
/// here: the caller binds them by `spec.nodeName`.
///
/// Allocatable falls back to capacity when a hand-written Node has no `status.allocatable`, and a
/// node being deleted counts as unschedulable, since nothing new lands there and its pods need a
/// new home.
pub fn node_from_k8s(node: &k8s::Node) -> Result<Node, ConvertError> {
    let name = node.metadata.name.clone().filter(|n| !n.is_empty());
    let name = name.ok_or_else(|| ConvertError::invalid("metadata.name", "missing"))?;
    super::metadata(&node.metadata, NameRule::Subdomain)?;
    let spec = node.spec.as_ref();
    let taints = spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| taint(t).within(|| format!("spec.taints[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let status = node.status.as_ref();
    let allocatable = match (status.and_then(|s| s.allocatable.as_ref()), status.and_then(|s| s.capacity.as_ref())) {
        (Some(a), _) => quantities(a).within(|| "status.allocatable".into())?,
        (None, Some(c)) => quantities(c).within(|| "status.capacity".into())?,
        (None, None) => Default::default(),
    };
    Ok(Node {
        name,
        kind: NodeKind::Existing,
        labels: node.metadata.labels.clone().unwrap_or_default(),
        annotations: node.metadata.annotations.clone().unwrap_or_default(),
        taints,
        allocatable,
        pods: vec![],
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false)
            || node.metadata.deletion_timestamp.is_some(),
        price: None,
        provider_id: spec.and_then(|s| s.provider_id.clone()).filter(|p| !p.is_empty()),
        ready: is_ready(status),
        deleting: node.metadata.deletion_timestamp.is_some(),
        termination_finalizer: node.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER),
        // Known from the pods, which the caller assembles onto the node.
        last_pod_event: None,
        conditions: conditions(status),
    })
}

/// The conditions node repair watches ([`repair::watched`]), with their status and
/// `lastTransitionTime`; the others (MemoryPressure, DiskPressure, …) are not kept.
fn conditions(status: Option<&k8s::NodeStatus>) -> Vec<NodeCondition> {
    status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| repair::watched(&c.type_))
        .map(|c| {
            let since = c.last_transition_time.as_ref().map(super::time);
            NodeCondition::new(&c.type_, &c.status, since)
        })
        .collect()
}

/// A node is Ready when its `Ready` condition says `True`; a node without conditions has not
/// reported yet, so it is not.
fn is_ready(status: Option<&k8s::NodeStatus>) -> bool {
    status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub(crate) fn taint(t: &k8s::Taint) -> Result<Taint, ConvertError> {
    if t.key.is_empty() {
        return Err(ConvertError::invalid("key", "must not be empty"));
    }
    check_qualified_name(&t.key).map_err(|why| ConvertError::invalid("key", why))?;
    if let Some(value) = t.value.as_deref() {
        check_label_value(value).map_err(|why| ConvertError::invalid("value", why))?;
    }
    let effect = TaintEffect::parse(&t.effect).ok_or_else(|| {
        ConvertError::unknown("effect", "taint effect", &t.effect, "NoSchedule, PreferNoSchedule, NoExecute")
    })?;
    Ok(Taint::new(&t.key, t.value.as_deref().unwrap_or_default(), effect))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_core::labels;
    use dovetail_core::time::Time;

    fn parse(yaml: &str) -> k8s::Node {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn registered_node() {
        let n = node_from_k8s(&parse(
            r#"
metadata:
  name: ip-10-0-1-7.ec2.internal
  labels: {topology.kubernetes.io/zone: us-east-1a, node.kubernetes.io/instance-type: m7i.xlarge}
spec:
  unschedulable: true
  taints:
  - {key: node.kubernetes.io/unschedulable, effect: NoSchedule}
  - {key: dedicated, value: ml, effect: NoExecute}
status:
  capacity: {cpu: "4", memory: 16073128Ki, pods: "58"}
  allocatable: {cpu: 3920m, memory: 15056296Ki, pods: "58", ephemeral-storage: "76224326324"}
"#,
        ))
        .unwrap();
        assert_eq!(n.kind, NodeKind::Existing);
        assert_eq!(n.labels[labels::ZONE], "us-east-1a");
        assert_eq!(n.allocatable.cpu, 3920);
        assert_eq!(n.allocatable.memory, 15056296 * 1024);
        assert_eq!(n.allocatable.pods, 58);
        assert!(n.unschedulable);
        assert_eq!(n.taints[1], Taint::new("dedicated", "ml", TaintEffect::NoExecute));
        assert_eq!(n.provider_id, None);
        assert!(!n.ready, "no Ready condition reported yet");
    }

    #[test]
    fn provider_id_and_ready_condition() {
        let n = node_from_k8s(&parse(
            r#"
metadata: {name: n}
spec: {providerID: "aws:///us-east-1a/i-0abc"}
status:
  conditions:
  - {type: MemoryPressure, status: "False"}
  - {type: Ready, status: "True"}
"#,
        ))
        .unwrap();
        assert_eq!(n.provider_id.as_deref(), Some("aws:///us-east-1a/i-0abc"));
        assert!(n.ready);
        assert_eq!(n.conditions, [NodeCondition::new("Ready", "True", None)]);
        let n = node_from_k8s(&parse("metadata: {name: n}\nstatus: {conditions: [{type: Ready, status: Unknown}]}\n"))
            .unwrap();
        assert!(!n.ready);
    }

    #[test]
    fn watched_conditions_with_their_transition_times() {
        let n = node_from_k8s(&parse(
            r#"
metadata: {name: n}
status:
  conditions:
  - {type: MemoryPressure, status: "True", lastTransitionTime: "2026-10-22T08:00:00Z"}
  - {type: Ready, status: "False", lastTransitionTime: "2026-10-22T09:00:00Z", reason: KubeletNotReady}
  - {type: AcceleratedHardwareReady, status: "False", lastTransitionTime: "2026-10-22T09:05:30Z"}
  - {type: KernelReady, status: "True", lastTransitionTime: "2026-10-22T07:00:00Z"}
"#,
        ))
        .unwrap();
        let at = |s: &str| Some(Time(s.parse::<k8s_openapi::jiff::Timestamp>().unwrap().as_millisecond()));
        assert_eq!(
            n.conditions,
            [
                NodeCondition::new("Ready", "False", at("2026-10-22T09:00:00Z")),
                NodeCondition::new("AcceleratedHardwareReady", "False", at("2026-10-22T09:05:30Z")),
                NodeCondition::new("KernelReady", "True", at("2026-10-22T07:00:00Z")),
            ]
        );
        assert!(!n.ready);
        assert_eq!(n.conditions[0].since, Some(Time::from_secs(1_792_659_600)));
        let bare = node_from_k8s(&parse("metadata: {name: n}\n")).unwrap();
        assert!(bare.conditions.is_empty());
    }

    #[test]
    fn capacity_fallback_and_errors() {
        let n = node_from_k8s(&parse("metadata: {name: n}\nstatus: {capacity: {cpu: \"2\"}}\n")).unwrap();
        assert_eq!(n.allocatable.cpu, 2000);
        assert!(!n.unschedulable);
        let deleting =
            node_from_k8s(&parse("metadata: {name: n, deletionTimestamp: \"2025-01-01T00:00:00Z\"}\n")).unwrap();
        assert!(deleting.unschedulable);
        let e = node_from_k8s(&parse("metadata: {name: n}\nspec: {taints: [{key: a, effect: Never}]}\n")).unwrap_err();
        assert!(e.to_string().starts_with("spec.taints[0].effect: \"Never\" is not a valid taint effect"), "{e}");
        let e = node_from_k8s(&parse("metadata: {name: n}\nstatus: {allocatable: {memory: 1.5.Gi}}\n")).unwrap_err();
        assert!(e.to_string().starts_with("status.allocatable.memory: \"1.5.Gi\""), "{e}");
    }
}
