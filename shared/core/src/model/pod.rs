//! The scheduler's view of a pod: everything kube-scheduler would check, already parsed.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::selector::LabelSelector;
use super::taint::Toleration;
use crate::requirements::Requirements;
use crate::resources::Resources;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WhenUnsatisfiable {
    DoNotSchedule,
    ScheduleAnyway,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InclusionPolicy {
    Honor,
    Ignore,
}

/// One `topologySpreadConstraints` entry (`matchLabelKeys` already folded into `selector`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TopologySpread {
    pub max_skew: i32,
    pub topology_key: String,
    pub when_unsatisfiable: WhenUnsatisfiable,
    pub selector: LabelSelector,
    pub min_domains: Option<i32>,
    /// Whether nodes the pod's node affinity excludes count as domains (default Honor).
    pub node_affinity_policy: InclusionPolicy,
    /// Whether nodes with taints the pod does not tolerate count as domains (default Ignore).
    pub node_taints_policy: InclusionPolicy,
}

/// Which namespaces an affinity term looks at.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NamespaceScope {
    /// The listed namespaces (the pod's own when the term lists none).
    List(Vec<String>),
    /// Every namespace (`namespaceSelector: {}`).
    All,
    /// Namespaces whose labels match, plus any listed explicitly.
    Selector(LabelSelector, Vec<String>),
}

/// A required or preferred pod (anti-)affinity term.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PodAffinityTerm {
    pub selector: LabelSelector,
    pub namespaces: NamespaceScope,
    pub topology_key: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Weighted<T> {
    pub weight: i32,
    pub term: T,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HostPort {
    pub port: i32,
    pub protocol: String,
    /// Empty or `0.0.0.0` binds every address.
    pub ip: String,
}

impl HostPort {
    /// Two host ports collide when protocol and port match and either binds every address.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        let wild = |ip: &str| ip.is_empty() || ip == "0.0.0.0" || ip == "::";
        self.port == other.port
            && self.protocol == other.protocol
            && (wild(&self.ip) || wild(&other.ip) || self.ip == other.ip)
    }
}

/// Who owns a pod, as far as disruption and provisioning care.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum OwnerKind {
    #[default]
    None,
    ReplicaSet,
    StatefulSet,
    Job,
    DaemonSet,
    /// A static (mirror) pod owned by its Node.
    Node,
    Other,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Effective requests: max(Σ containers, max init container) + pod overhead, with `pods: 1`.
    pub requests: Resources,
    /// Required node affinity: alternatives (ORed terms), each already intersected with the
    /// nodeSelector. One empty term when the pod has no node constraint; no term at all when
    /// every term it wrote was empty, which (as in kube-scheduler) matches no node.
    pub node_affinity: Vec<Requirements>,
    pub preferred_node_affinity: Vec<Weighted<Requirements>>,
    pub tolerations: Vec<Toleration>,
    pub topology_spread: Vec<TopologySpread>,
    pub pod_affinity: Vec<PodAffinityTerm>,
    pub pod_anti_affinity: Vec<PodAffinityTerm>,
    pub preferred_pod_affinity: Vec<Weighted<PodAffinityTerm>>,
    pub preferred_pod_anti_affinity: Vec<Weighted<PodAffinityTerm>>,
    pub host_ports: Vec<HostPort>,
    /// Node constraints of the pod's bound PersistentVolumes (e.g. an EBS volume's zone), ANDed.
    pub volume_requirements: Requirements,
    pub priority: i32,
    pub priority_class: String,
    pub owner: OwnerKind,
    pub owner_name: String,
    pub node_name: Option<String>,
    pub termination_grace_seconds: i64,
    /// When the pod started running (`status.startTime`), for duration-valued do-not-disrupt.
    pub started_at: Option<crate::time::Time>,
    /// When the pod was created (`metadata.creationTimestamp`): how long a pending pod has waited
    /// for a node, Karpenter's `karpenter_pods_unbound_time_seconds`.
    #[serde(default)]
    pub created_at: Option<crate::time::Time>,
}

impl Pod {
    /// A pod with only a name and requests; the rest unconstrained. Builders and tests start here.
    pub fn new(namespace: &str, name: &str, requests: Resources) -> Self {
        let mut requests = requests;
        if requests.pods == 0 {
            requests.pods = 1;
        }
        Pod {
            namespace: namespace.to_string(),
            name: name.to_string(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            requests,
            node_affinity: vec![Requirements::new()],
            preferred_node_affinity: vec![],
            tolerations: vec![],
            topology_spread: vec![],
            pod_affinity: vec![],
            pod_anti_affinity: vec![],
            preferred_pod_affinity: vec![],
            preferred_pod_anti_affinity: vec![],
            host_ports: vec![],
            volume_requirements: Requirements::new(),
            priority: 0,
            priority_class: String::new(),
            owner: OwnerKind::None,
            owner_name: String::new(),
            node_name: None,
            termination_grace_seconds: 30,
            started_at: None,
            created_at: None,
        }
    }

    /// `namespace/name`, the way plans and events refer to pods.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn with_labels(mut self, labels: &[(&str, &str)]) -> Self {
        for (k, v) in labels {
            self.labels.insert(k.to_string(), v.to_string());
        }
        self
    }

    /// Whether where this pod may go depends on pods elsewhere (topology spread, pod affinity or
    /// anti-affinity, required or preferred), so a placement check needs the whole cluster.
    pub fn has_topology(&self) -> bool {
        !self.topology_spread.is_empty()
            || !self.pod_affinity.is_empty()
            || !self.pod_anti_affinity.is_empty()
            || !self.preferred_pod_affinity.is_empty()
            || !self.preferred_pod_anti_affinity.is_empty()
    }

    pub fn is_daemon(&self) -> bool {
        self.owner == OwnerKind::DaemonSet
    }

    pub fn is_mirror(&self) -> bool {
        self.owner == OwnerKind::Node
    }

    /// Whether this pod binding to a node or leaving it is a pod event for the node's idleness
    /// ([`super::Node::last_pod_event`]): DaemonSet and mirror pods come and go with the node
    /// itself (Karpenter's pod events leave DaemonSet pods out too).
    pub fn marks_pod_event(&self) -> bool {
        !self.is_daemon() && !self.is_mirror()
    }
}

impl NamespaceScope {
    /// Whether a pod in `namespace` (with `ns_labels`) is in scope of a term owned by a pod in `own`.
    pub fn contains(&self, own: &str, namespace: &str, ns_labels: Option<&BTreeMap<String, String>>) -> bool {
        match self {
            NamespaceScope::All => true,
            NamespaceScope::List(list) if list.is_empty() => namespace == own,
            NamespaceScope::List(list) => list.iter().any(|n| n == namespace),
            NamespaceScope::Selector(sel, list) => {
                list.iter().any(|n| n == namespace) || ns_labels.is_some_and(|l| sel.matches(l))
            }
        }
    }
}
