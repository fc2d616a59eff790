//! Karpenter's "provisionable pod" predicate: the pods new capacity is launched for.

use std::fmt;

use k8s_openapi::api::core::v1 as k8s;

/// Annotation the kubelet puts on the API copy of a static pod.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Why a pod is not waiting for new capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotProvisionable {
    /// Already bound to this node.
    Bound(String),
    /// Being deleted.
    Terminating,
    /// DaemonSet pods follow nodes; they never ask for one.
    DaemonSet,
    /// A static pod's mirror, owned by its Node.
    Mirror,
    /// Preempting: the scheduler nominated this node and is evicting lower-priority pods there.
    Preempting(String),
    /// Held back by `spec.schedulingGates`; the scheduler does not consider it yet.
    SchedulingGated,
    /// Phase Succeeded or Failed.
    Finished(String),
    /// The scheduler has not (or not yet) reported it unschedulable.
    NotUnschedulable,
}

impl fmt::Display for NotProvisionable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotProvisionable::Bound(n) => write!(f, "bound to node {n}"),
            NotProvisionable::Terminating => f.write_str("terminating"),
            NotProvisionable::DaemonSet => f.write_str("owned by a DaemonSet"),
            NotProvisionable::Mirror => f.write_str("mirror pod of a static pod"),
            NotProvisionable::Preempting(n) => write!(f, "preempting on nominated node {n}"),
            NotProvisionable::SchedulingGated => f.write_str("has scheduling gates"),
            NotProvisionable::Finished(phase) => write!(f, "finished ({phase})"),
            NotProvisionable::NotUnschedulable => f.write_str("not marked Unschedulable by the scheduler"),
        }
    }
}

/// Karpenter's predicate: condition `PodScheduled=False` with reason `Unschedulable`, not owned
/// by a DaemonSet or a Node (mirror), not preempting (`status.nominatedNodeName`), not
/// terminating. A pod with no status at all (a manifest from a file, never seen by a scheduler)
/// and no `nodeName` counts as pending too. Pods bound to a node are not provisionable here;
/// whether their node is going away is the disruption logic's business.
pub fn provisionable(pod: &k8s::Pod) -> Result<(), NotProvisionable> {
    let spec = pod.spec.as_ref();
    if let Some(node) = spec.and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty()) {
        return Err(NotProvisionable::Bound(node.to_string()));
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return Err(NotProvisionable::Terminating);
    }
    follows_its_node(pod)?;
    if spec.and_then(|s| s.scheduling_gates.as_ref()).is_some_and(|g| !g.is_empty()) {
        return Err(NotProvisionable::SchedulingGated);
    }
    let status = match &pod.status {
        None => return Ok(()),
        Some(s) if *s == k8s::PodStatus::default() => return Ok(()),
        Some(s) => s,
    };
    if let Some(phase @ ("Succeeded" | "Failed")) = status.phase.as_deref() {
        return Err(NotProvisionable::Finished(phase.to_string()));
    }
    if let Some(n) = status.nominated_node_name.as_deref().filter(|n| !n.is_empty()) {
        return Err(NotProvisionable::Preempting(n.to_string()));
    }
    let unschedulable = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"));
    if unschedulable {
        Ok(())
    } else {
        Err(NotProvisionable::NotUnschedulable)
    }
}

/// DaemonSet pods and mirror pods belong to their node: they never ask for capacity of their own.
/// Any owner reference counts, not only the controller one, as in Karpenter.
fn follows_its_node(pod: &k8s::Pod) -> Result<(), NotProvisionable> {
    for o in pod.metadata.owner_references.iter().flatten() {
        match (o.kind.as_str(), o.api_version.split('/').next().unwrap_or_default()) {
            ("DaemonSet", "apps" | "extensions") => return Err(NotProvisionable::DaemonSet),
            ("Node", "v1") => return Err(NotProvisionable::Mirror),
            _ => {}
        }
    }
    if pod.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(MIRROR_ANNOTATION)) {
        return Err(NotProvisionable::Mirror);
    }
    Ok(())
}

/// The other half of Karpenter's rule: a pod bound to a node that is being deleted
/// (`deletionTimestamp` set on the Node) is provisionable too, since it will need a home
/// elsewhere, unless it goes with the node (DaemonSet and mirror pods), is already terminating,
/// or has finished. Whether the node is being deleted is the caller's to know.
pub fn displaced_by_node_deletion(pod: &k8s::Pod) -> Result<(), NotProvisionable> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Err(NotProvisionable::Terminating);
    }
    follows_its_node(pod)?;
    if let Some(phase @ ("Succeeded" | "Failed")) = pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
        return Err(NotProvisionable::Finished(phase.to_string()));
    }
    Ok(())
}

/// [`provisionable`] as a yes/no.
pub fn is_provisionable(pod: &k8s::Pod) -> bool {
    provisionable(pod).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(yaml: &str) -> Result<(), NotProvisionable> {
        provisionable(&serde_yaml_ng::from_str::<k8s::Pod>(yaml).unwrap())
    }

    const UNSCHEDULABLE: &str =
        "status:\n  phase: Pending\n  conditions: [{type: PodScheduled, status: \"False\", reason: Unschedulable}]\n";

    #[test]
    fn karpenter_rules() {
        let spec = "spec: {containers: [{name: a}]}\n";
        assert_eq!(check(&format!("metadata: {{name: a}}\n{spec}{UNSCHEDULABLE}")), Ok(()));
        assert_eq!(check(&format!("metadata: {{name: a}}\n{spec}")), Ok(()), "no status: pending");
        assert_eq!(
            check(&format!("metadata: {{name: a}}\n{spec}status: {{phase: Pending, conditions: [{{type: PodScheduled, status: \"False\", reason: SchedulingGated}}]}}\n")),
            Err(NotProvisionable::NotUnschedulable)
        );
        assert_eq!(
            check(&format!("metadata: {{name: a}}\n{spec}status: {{phase: Running, conditions: [{{type: PodScheduled, status: \"True\"}}]}}\n")),
            Err(NotProvisionable::NotUnschedulable)
        );
        let ds = "metadata:\n  name: a\n  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: d, uid: u, controller: true}]\n";
        assert_eq!(check(&format!("{ds}{spec}{UNSCHEDULABLE}")), Err(NotProvisionable::DaemonSet));
        let mirror = "metadata:\n  name: a\n  ownerReferences: [{apiVersion: v1, kind: Node, name: n, uid: u, controller: true}]\n";
        assert_eq!(check(&format!("{mirror}{spec}")), Err(NotProvisionable::Mirror));
        let preempting = format!("metadata: {{name: a}}\n{spec}{UNSCHEDULABLE}  nominatedNodeName: n1\n");
        assert_eq!(check(&preempting), Err(NotProvisionable::Preempting("n1".into())));
        let deleting =
            format!("metadata: {{name: a, deletionTimestamp: \"2025-01-01T00:00:00Z\"}}\n{spec}{UNSCHEDULABLE}");
        assert_eq!(check(&deleting), Err(NotProvisionable::Terminating));
        let bound = "metadata: {name: a}\nspec: {nodeName: n2, containers: [{name: a}]}\n";
        assert_eq!(check(bound), Err(NotProvisionable::Bound("n2".into())));
        let gated = "metadata: {name: a}\nspec: {schedulingGates: [{name: wait}], containers: [{name: a}]}\n";
        assert_eq!(check(gated), Err(NotProvisionable::SchedulingGated));
        let done = format!("metadata: {{name: a}}\n{spec}status: {{phase: Succeeded}}\n");
        assert_eq!(check(&done), Err(NotProvisionable::Finished("Succeeded".into())));
        assert!(!is_provisionable(&serde_yaml_ng::from_str(bound).unwrap()));
    }

    #[test]
    fn pods_displaced_by_a_deleting_node() {
        let displaced = |yaml: &str| displaced_by_node_deletion(&serde_yaml_ng::from_str::<k8s::Pod>(yaml).unwrap());
        let spec = "spec: {nodeName: n1, containers: [{name: a}]}\n";
        let running = "status: {phase: Running}\n";
        assert_eq!(displaced(&format!("metadata: {{name: a}}\n{spec}{running}")), Ok(()));
        let ds = "metadata:\n  name: a\n  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: d, uid: u}]\n";
        assert_eq!(displaced(&format!("{ds}{spec}{running}")), Err(NotProvisionable::DaemonSet));
        let mirror = "metadata:\n  name: a\n  annotations: {kubernetes.io/config.mirror: x}\n";
        assert_eq!(displaced(&format!("{mirror}{spec}{running}")), Err(NotProvisionable::Mirror));
        let deleting = "metadata: {name: a, deletionTimestamp: \"2025-01-01T00:00:00Z\"}\n";
        assert_eq!(displaced(&format!("{deleting}{spec}{running}")), Err(NotProvisionable::Terminating));
        let done = format!("metadata: {{name: a}}\n{spec}status: {{phase: Failed}}\n");
        assert_eq!(displaced(&done), Err(NotProvisionable::Finished("Failed".into())));
    }
}
