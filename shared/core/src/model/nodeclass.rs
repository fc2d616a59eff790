//! The parts of an EC2NodeClass the decision core needs.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::resources::Resources;

/// Kubelet settings that change a node's allocatable resources.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KubeletConfig {
    pub max_pods: Option<i64>,
    pub pods_per_core: Option<i64>,
    /// Replaces the computed kube-reserved amounts for the resources it names.
    pub kube_reserved: Option<Resources>,
    pub system_reserved: Option<Resources>,
    /// `memory.available`, `nodefs.available`, … as written (`100Mi`, `10%`).
    pub eviction_hard: BTreeMap<String, String>,
    pub eviction_soft: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeClass {
    pub name: String,
    pub kubelet: KubeletConfig,
    /// Tags the class adds to every instance.
    pub tags: BTreeMap<String, String>,
    /// The EC2NodeClass `spec` as written (JSON), for the adapters that resolve images, subnets
    /// and security groups and render user data; the decision core does not read it.
    #[serde(default)]
    pub spec: serde_json::Value,
    /// The EC2NodeClass has a `deletionTimestamp`; while pools or claims still use it, its
    /// finalizer holds it ([`crate::deletion`]) and it keeps serving them.
    #[serde(default)]
    pub deleting: bool,
    /// It carries Dovetail's termination finalizer.
    #[serde(default)]
    pub termination_finalizer: bool,
    /// `spec.role`: the IAM role of its nodes, for which Dovetail makes the instance profile
    /// ([`crate::instance_profile`]). Exactly one of `role` and `instance_profile` is set.
    #[serde(default)]
    pub role: Option<String>,
    /// `spec.instanceProfile`: an instance profile someone else made, used as it is.
    #[serde(default)]
    pub instance_profile: Option<String>,
}
