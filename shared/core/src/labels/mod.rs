//! Well-known node labels, taints and annotations: Kubernetes', Karpenter's (kept so existing pod
//! specs work unchanged) and Dovetail's own.

pub const ZONE: &str = "topology.kubernetes.io/zone";
pub const REGION: &str = "topology.kubernetes.io/region";
pub const ZONE_ID: &str = "topology.k8s.aws/zone-id";
pub const HOSTNAME: &str = "kubernetes.io/hostname";
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
pub const ARCH: &str = "kubernetes.io/arch";
pub const OS: &str = "kubernetes.io/os";
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
/// Older spellings that some pod specs still use.
pub const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
pub const INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";
pub const ARCH_BETA: &str = "beta.kubernetes.io/arch";
pub const OS_BETA: &str = "beta.kubernetes.io/os";

pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
pub const KARPENTER_NODEPOOL: &str = "karpenter.sh/nodepool";
pub const INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
pub const INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
pub const INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
pub const INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
pub const INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
pub const INSTANCE_CPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
pub const INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
pub const INSTANCE_NETWORK_BANDWIDTH: &str = "karpenter.k8s.aws/instance-network-bandwidth";
pub const INSTANCE_EBS_BANDWIDTH: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
pub const INSTANCE_HYPERVISOR: &str = "karpenter.k8s.aws/instance-hypervisor";
pub const INSTANCE_ENCRYPTION_IN_TRANSIT: &str = "karpenter.k8s.aws/instance-encryption-in-transit-supported";
pub const INSTANCE_LOCAL_NVME: &str = "karpenter.k8s.aws/instance-local-nvme";
pub const INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
pub const INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
pub const INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
pub const INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.aws/instance-gpu-memory";
pub const INSTANCE_CAPABILITY_FLEX: &str = "karpenter.k8s.aws/instance-capability-flex";
/// The reservation a `reserved` node runs in, its type (`default`, `capacity-block`) and whether
/// EC2 may interrupt it (Karpenter's reserved-capacity labels).
pub const CAPACITY_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
pub const CAPACITY_RESERVATION_TYPE: &str = "karpenter.k8s.aws/capacity-reservation-type";
pub const CAPACITY_RESERVATION_INTERRUPTIBLE: &str = "karpenter.k8s.aws/capacity-reservation-interruptible";

pub const NODEPOOL: &str = "dovetail.dev/nodepool";
pub const NODECLAIM: &str = "dovetail.dev/nodeclaim";
pub const NODECLASS: &str = "dovetail.dev/ec2nodeclass";

/// Capacity types as Karpenter names them.
pub const CAPACITY_SPOT: &str = "spot";
pub const CAPACITY_ON_DEMAND: &str = "on-demand";
pub const CAPACITY_RESERVED: &str = "reserved";

/// Taint placed on nodes until Dovetail has matched them to their NodeClaim.
pub const TAINT_UNREGISTERED: &str = "dovetail.dev/unregistered";
/// Taint placed on nodes that are being drained.
pub const TAINT_DISRUPTED: &str = "dovetail.dev/disrupted";

/// Annotations that block voluntary disruption of a pod or node ("true" or a duration).
pub const DO_NOT_DISRUPT: [&str; 2] = ["karpenter.sh/do-not-disrupt", "dovetail.dev/do-not-disrupt"];

/// Labels whose values come from the instance type or offering rather than the NodePool. A pod may
/// require them although no NodePool mentions them (Karpenter's `WellKnownLabels`).
pub const WELL_KNOWN: &[&str] = &[
    ZONE,
    REGION,
    ZONE_ID,
    INSTANCE_TYPE,
    ARCH,
    OS,
    WINDOWS_BUILD,
    CAPACITY_TYPE,
    NODEPOOL,
    KARPENTER_NODEPOOL,
    INSTANCE_CATEGORY,
    INSTANCE_FAMILY,
    INSTANCE_GENERATION,
    INSTANCE_SIZE,
    INSTANCE_CPU,
    INSTANCE_CPU_MANUFACTURER,
    INSTANCE_MEMORY,
    INSTANCE_NETWORK_BANDWIDTH,
    INSTANCE_EBS_BANDWIDTH,
    INSTANCE_HYPERVISOR,
    INSTANCE_ENCRYPTION_IN_TRANSIT,
    INSTANCE_LOCAL_NVME,
    INSTANCE_GPU_NAME,
    INSTANCE_GPU_MANUFACTURER,
    INSTANCE_GPU_COUNT,
    INSTANCE_GPU_MEMORY,
    INSTANCE_CAPABILITY_FLEX,
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_TYPE,
    CAPACITY_RESERVATION_INTERRUPTIBLE,
];

/// The labels only a node in a capacity reservation carries.
pub const RESERVATION_LABELS: [&str; 3] =
    [CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_TYPE, CAPACITY_RESERVATION_INTERRUPTIBLE];

pub fn is_well_known(key: &str) -> bool {
    WELL_KNOWN.contains(&key)
}

/// Maps deprecated label spellings onto the current ones so both select the same nodes.
pub fn normalize_key(key: &str) -> &str {
    match key {
        ZONE_BETA => ZONE,
        INSTANCE_TYPE_BETA => INSTANCE_TYPE,
        ARCH_BETA => ARCH,
        OS_BETA => OS,
        "karpenter.sh/nodepool" => NODEPOOL,
        other => other,
    }
}
