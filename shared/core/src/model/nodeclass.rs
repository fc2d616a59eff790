//! The parts of an EC2NodeClass the decision core needs.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::resources::Resources;

/// The operating system of a class's image (its AMI family), which a node's labels and the
/// kubelet's defaults follow. Every family but Windows runs Linux.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeOs {
    #[default]
    Linux,
    /// Windows Server 2019 (build 10.0.17763).
    Windows2019,
    /// Windows Server 2022 (build 10.0.20348).
    Windows2022,
    /// Windows Server 2025 (build 10.0.26100).
    Windows2025,
}

impl NodeOs {
    /// The Windows releases, each of which is its own OS here.
    pub const WINDOWS: [NodeOs; 3] = [NodeOs::Windows2019, NodeOs::Windows2022, NodeOs::Windows2025];

    /// The node's `kubernetes.io/os`.
    pub fn label(self) -> &'static str {
        if self.is_windows() {
            "windows"
        } else {
            "linux"
        }
    }

    /// The node's `node.kubernetes.io/windows-build` (the build Karpenter labels each Windows
    /// Server release with); none on Linux.
    pub fn windows_build(self) -> Option<&'static str> {
        match self {
            NodeOs::Linux => None,
            NodeOs::Windows2019 => Some("10.0.17763"),
            NodeOs::Windows2022 => Some("10.0.20348"),
            NodeOs::Windows2025 => Some("10.0.26100"),
        }
    }

    /// The Windows Server release (`2022`), as AWS names its images; none on Linux.
    pub fn windows_release(self) -> Option<&'static str> {
        match self {
            NodeOs::Linux => None,
            NodeOs::Windows2019 => Some("2019"),
            NodeOs::Windows2022 => Some("2022"),
            NodeOs::Windows2025 => Some("2025"),
        }
    }

    pub fn is_windows(self) -> bool {
        self != NodeOs::Linux
    }

    pub fn is_linux(&self) -> bool {
        *self == NodeOs::Linux
    }
}

/// What shapes a node's capacity and allocatable besides its type: the kubelet settings of its
/// class, and the OS of the class's image, whose kubelet defaults differ (max pods, the pod count
/// kube-reserved memory is sized for, the root volume). The OS lives here, not beside it on
/// [`NodeClass`], because every caller that works out allocatable for a class already holds this.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KubeletConfig {
    /// Linux unless the class's AMI family is Windows.
    #[serde(default, skip_serializing_if = "NodeOs::is_linux")]
    pub os: NodeOs,
    /// The class's image is Bottlerocket, whose kubelet ignores `podsPerCore` (Bottlerocket has
    /// no such setting) and whose kube-reserved memory follows the pods the node runs, not its
    /// ENI limit (Karpenter's feature flags for the family).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bottlerocket: bool,
    pub max_pods: Option<i64>,
    pub pods_per_core: Option<i64>,
    /// Replaces the computed kube-reserved amounts for the resources it names.
    pub kube_reserved: Option<Resources>,
    pub system_reserved: Option<Resources>,
    /// `memory.available`, `nodefs.available`, … as written (`100Mi`, `10%`).
    pub eviction_hard: BTreeMap<String, String>,
    pub eviction_soft: BTreeMap<String, String>,
    /// Size of the volume the kubelet's ephemeral storage lives on, as the class's block device
    /// mappings set it (the `rootVolume` mapping, else the family's ephemeral device); `None`: the
    /// image's default root volume ([`crate::overhead::default_root_volume_bytes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral_volume_bytes: Option<i64>,
    /// `instanceStorePolicy: RAID0`: the instance-store disks, striped, hold the ephemeral storage
    /// on types that have them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub instance_store_raid0: bool,
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
