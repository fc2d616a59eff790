//! DaemonSet → core [`DaemonSet`]: the pod every matching node runs.

use dovetail_core::model::{DaemonSet, OwnerKind, TaintEffect, Toleration, TolerationOp};
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::pod::{pod_from_spec, DEFAULT_NAMESPACE};
use super::{ConvertError, Within};
use crate::crd::meta::NameRule;

/// Tolerations the DaemonSet controller adds to every daemon pod (and `network-unavailable` for
/// host-network ones), so daemons keep running on nodes under pressure or cordoned. A planner
/// that left them out would think the daemon skips cordoned or pressured nodes.
const DAEMON_TOLERATIONS: [(&str, TaintEffect); 6] = [
    ("node.kubernetes.io/not-ready", TaintEffect::NoExecute),
    ("node.kubernetes.io/unreachable", TaintEffect::NoExecute),
    ("node.kubernetes.io/disk-pressure", TaintEffect::NoSchedule),
    ("node.kubernetes.io/memory-pressure", TaintEffect::NoSchedule),
    ("node.kubernetes.io/pid-pressure", TaintEffect::NoSchedule),
    ("node.kubernetes.io/unschedulable", TaintEffect::NoSchedule),
];

/// Converts a DaemonSet. Its pod comes from `spec.template` (error paths say so), named after the
/// DaemonSet and owned by it.
pub fn daemonset_from_k8s(ds: &apps::DaemonSet) -> Result<DaemonSet, ConvertError> {
    let name = ds.metadata.name.clone().filter(|n| !n.is_empty());
    let name = name.ok_or_else(|| ConvertError::invalid("metadata.name", "missing"))?;
    super::metadata(&ds.metadata, NameRule::Subdomain)?;
    let namespace = ds.metadata.namespace.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| DEFAULT_NAMESPACE.into());
    let spec = ds.spec.as_ref().ok_or_else(|| ConvertError::invalid("spec", "missing"))?;
    let template_meta = spec.template.metadata.clone().unwrap_or_default();
    let meta = ObjectMeta {
        name: Some(name.clone()),
        namespace: Some(namespace.clone()),
        labels: template_meta.labels,
        annotations: template_meta.annotations,
        ..Default::default()
    };
    let pod_spec = spec.template.spec.as_ref().ok_or_else(|| ConvertError::invalid("spec.template.spec", "missing"))?;
    let mut pod = pod_from_spec(&meta, pod_spec).within(|| "spec.template".into())?;
    pod.owner = OwnerKind::DaemonSet;
    pod.owner_name = name.clone();
    let host_network = pod_spec.host_network == Some(true);
    let extra = DAEMON_TOLERATIONS
        .iter()
        .copied()
        .chain(host_network.then_some(("node.kubernetes.io/network-unavailable", TaintEffect::NoSchedule)));
    for (key, effect) in extra {
        let t =
            Toleration { key: key.into(), operator: TolerationOp::Exists, value: String::new(), effect: Some(effect) };
        if !pod.tolerations.contains(&t) {
            pod.tolerations.push(t);
        }
    }
    Ok(DaemonSet { namespace, name, pod })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_core::model::{tolerates_all, Taint};

    #[test]
    fn daemon_pod_from_template() {
        let ds: apps::DaemonSet = serde_yaml_ng::from_str(
            r#"
metadata: {name: aws-node, namespace: kube-system}
spec:
  selector: {matchLabels: {k8s-app: aws-node}}
  template:
    metadata: {labels: {k8s-app: aws-node}}
    spec:
      hostNetwork: true
      priorityClassName: system-node-critical
      initContainers:
      - {name: init, resources: {requests: {cpu: 25m}}}
      containers:
      - {name: aws-node, resources: {requests: {cpu: 25m, memory: 64Mi}}}
      - {name: aws-eks-nodeagent, resources: {requests: {cpu: 25m}}}
"#,
        )
        .unwrap();
        let d = daemonset_from_k8s(&ds).unwrap();
        assert_eq!((d.namespace.as_str(), d.name.as_str()), ("kube-system", "aws-node"));
        assert!(d.pod.is_daemon());
        assert_eq!(d.pod.owner_name, "aws-node");
        assert_eq!(d.pod.requests.cpu, 50);
        assert_eq!(d.pod.priority, 2_000_001_000);
        assert_eq!(d.pod.labels["k8s-app"], "aws-node");
        let cordoned = Taint::new("node.kubernetes.io/unschedulable", "", TaintEffect::NoSchedule);
        assert!(tolerates_all(&d.pod.tolerations, &[cordoned]).is_ok());
    }

    #[test]
    fn template_errors_carry_the_template_path() {
        let ds: apps::DaemonSet = serde_yaml_ng::from_str(
            "metadata: {name: d}\nspec:\n  selector: {}\n  template:\n    spec:\n      containers: [{name: a, resources: {requests: {cpu: 1x}}}]\n",
        )
        .unwrap();
        let e = daemonset_from_k8s(&ds).unwrap_err().to_string();
        assert!(e.starts_with("spec.template.spec.containers[0].resources.requests.cpu: \"1x\""), "{e}");
    }
}
