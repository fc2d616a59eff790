//! Node overhead: what a node of an EC2 type reports as capacity and allocatable.
//!
//! Dovetail must predict allocatable before the node exists, and must predict it the way Karpenter
//! does: a model that is too generous packs pods onto nodes where the kubelet then rejects them, one
//! that is too stingy buys bigger nodes than Karpenter would. Every rule and rounding step below
//! mirrors Karpenter's AWS provider for the AL2023 AMI family, and for the Windows families where
//! they differ (pod density not limited by ENIs, kube-reserved memory sized from that pod count, a
//! 50 GiB root volume, the VPC resource controller's `PrivateIPv4Address`);
//! `tests/overhead_reference.rs` checks the Linux result against Karpenter's published allocatable
//! for every type in the catalog.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::model::{KubeletConfig, NodeOs};
use crate::resources::{parse_units, Resources, PRIVATE_IPV4_ADDRESS};

/// Raw facts of an EC2 instance type, from which the AL2023 overhead model computes allocatable.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Ec2Facts {
    pub vcpu: i64,
    pub memory_mib: i64,
    /// Graviton: the kernel keeps 64 MiB more for itself (see `overhead::GRAVITON_CMA_MIB`).
    #[serde(default)]
    pub arm64: bool,
    /// ENIs on the default network card, the only ones the VPC CNI uses (less than
    /// DescribeInstanceTypes' total on multi-card types). 0 when the type has no ENI data (then
    /// max pods defaults to 110).
    pub max_enis: i64,
    pub ipv4_per_eni: i64,
    /// Total size of the type's NVMe instance-store disks in GB (10^9 bytes, as EC2 reports it);
    /// 0 without. With `instanceStorePolicy: RAID0` the node's ephemeral storage lives on them.
    #[serde(default)]
    pub instance_store_gb: i64,
    /// Extended resources the node advertises (GPUs, Neuron devices, EFA, pod ENIs).
    pub extended: Vec<(String, i64)>,
}

/// Share of memory the hypervisor and kernel keep (Karpenter's `VM_MEMORY_OVERHEAD_PERCENT`
/// default): DescribeInstanceTypes reports more memory than the OS ever sees.
pub const VM_MEMORY_OVERHEAD_PERCENT: f64 = 0.075;
/// Graviton kernels reserve this much memory for the contiguous memory allocator on top of the VM
/// overhead; Karpenter subtracts it before applying the percentage.
pub const GRAVITON_CMA_MIB: i64 = 64;
/// Size of AL2023's root volume when the EC2NodeClass maps no block devices; the kubelet's
/// ephemeral storage lives on it.
pub const DEFAULT_ROOT_VOLUME_BYTES: i64 = 20 << 30;
/// Size of the Windows images' root volume (`/dev/sda1`) when the class maps no block devices.
pub const WINDOWS_ROOT_VOLUME_BYTES: i64 = 50 << 30;
/// Max pods when the ENI limits of a type are unknown, and always on Windows (the kubelet's own
/// default).
pub const DEFAULT_MAX_PODS: i64 = 110;
/// Pods that use the host network and so need no VPC address (kube-proxy, aws-node).
const HOST_NETWORK_PODS: i64 = 2;
const KUBE_RESERVED_EPHEMERAL_BYTES: i64 = 1 << 30;
const EVICTION_MEMORY_BYTES: i64 = 100 << 20;
const EVICTION_NODEFS_PERCENT: f64 = 10.0;

/// Eviction signals that change allocatable; the kubelet's others (imagefs, pid) do not.
pub const MEMORY_AVAILABLE: &str = "memory.available";
pub const NODEFS_AVAILABLE: &str = "nodefs.available";

/// A kubelet setting the overhead model cannot use. The model itself ignores such values (it has to
/// return something for any input); admission should reject them with this error first.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KubeletError {
    #[error("eviction threshold {signal}={value:?}: {why}")]
    Eviction { signal: String, value: String, why: &'static str },
    #[error("maxPods must not be negative, got {0}")]
    MaxPods(i64),
    #[error("podsPerCore must not be negative, got {0}")]
    PodsPerCore(i64),
}

/// Checks the kubelet settings the model reads, so a bad value is reported instead of ignored.
pub fn validate(kubelet: &KubeletConfig) -> Result<(), KubeletError> {
    if let Some(n) = kubelet.max_pods.filter(|n| *n < 0) {
        return Err(KubeletError::MaxPods(n));
    }
    if let Some(n) = kubelet.pods_per_core.filter(|n| *n < 0) {
        return Err(KubeletError::PodsPerCore(n));
    }
    for signals in [&kubelet.eviction_hard, &kubelet.eviction_soft] {
        for signal in [MEMORY_AVAILABLE, NODEFS_AVAILABLE] {
            if let Some(value) = signals.get(signal) {
                Threshold::parse(value).map_err(|why| KubeletError::Eviction {
                    signal: signal.to_string(),
                    value: value.clone(),
                    why,
                })?;
            }
        }
    }
    Ok(())
}

/// Checks one eviction threshold as written (`500Mi`, `10%`): what validation of a class's
/// kubelet settings and this model read it with are the same.
pub fn check_threshold(value: &str) -> Result<(), &'static str> {
    Threshold::parse(value).map(|_| ())
}

/// Max pods if only the VPC CNI's address supply limited them: every ENI on the default network
/// card keeps one address for itself, and host-network pods need none.
pub fn eni_limited_pods(facts: &Ec2Facts) -> i64 {
    if facts.max_enis <= 0 || facts.ipv4_per_eni <= 0 {
        return DEFAULT_MAX_PODS;
    }
    facts.max_enis * (facts.ipv4_per_eni - 1) + HOST_NETWORK_PODS
}

/// The root volume a node's ephemeral storage lives on, when the class maps no block devices.
pub fn default_root_volume_bytes(os: NodeOs) -> i64 {
    if os.is_windows() {
        WINDOWS_ROOT_VOLUME_BYTES
    } else {
        DEFAULT_ROOT_VOLUME_BYTES
    }
}

/// The kubelet's `maxPods`: the configured value, else the ENI limit on Linux and 110 on Windows
/// (the Windows images do not size pod density from the type's ENIs), capped by `podsPerCore`
/// (except on Bottlerocket, which has no such setting).
pub fn max_pods(facts: &Ec2Facts, kubelet: &KubeletConfig) -> i64 {
    let count = kubelet.max_pods.unwrap_or_else(|| match kubelet.os {
        NodeOs::Linux => eni_limited_pods(facts),
        _ => DEFAULT_MAX_PODS,
    });
    match kubelet.pods_per_core.filter(|_| !kubelet.bottlerocket) {
        // Zero means "no limit" to the kubelet, so it must not cap the count at zero.
        Some(per_core) if per_core > 0 => count.min(per_core * facts.vcpu),
        _ => count,
    }
}

/// Memory the OS sees, in bytes: the advertised MiB minus Graviton's CMA reservation, minus the VM
/// overhead rounded up to whole MiB (in floating point, as Karpenter rounds, so the two never
/// disagree by a MiB).
fn memory_capacity(facts: &Ec2Facts) -> i64 {
    let mib = (facts.memory_mib - if facts.arm64 { GRAVITON_CMA_MIB } else { 0 }).max(0);
    let bytes = mib << 20;
    let overhead_mib = (bytes as f64 * VM_MEMORY_OVERHEAD_PERCENT / 1024.0 / 1024.0).ceil() as i64;
    (mib - overhead_mib) << 20
}

/// The node's ephemeral-storage capacity, as Karpenter works it out: with
/// `instanceStorePolicy: RAID0` on a type with instance-store disks, their total (the image
/// stripes them into one array for the kubelet and containerd); else the volume the class maps
/// for the kubelet ([`KubeletConfig::ephemeral_volume_bytes`]), else the image's default root
/// volume.
pub fn ephemeral_storage(facts: &Ec2Facts, kubelet: &KubeletConfig) -> i64 {
    if kubelet.instance_store_raid0 && facts.instance_store_gb > 0 {
        return facts.instance_store_gb * 1_000_000_000;
    }
    kubelet.ephemeral_volume_bytes.unwrap_or_else(|| default_root_volume_bytes(kubelet.os))
}

pub fn capacity(facts: &Ec2Facts, kubelet: &KubeletConfig) -> Resources {
    let mut r = Resources {
        cpu: facts.vcpu * 1000,
        memory: memory_capacity(facts),
        ephemeral: ephemeral_storage(facts, kubelet),
        pods: max_pods(facts, kubelet),
        extended: Vec::new(),
    };
    for (name, count) in &facts.extended {
        r.set(name, *count);
    }
    if kubelet.os.is_windows() {
        // Windows pods get their addresses from the VPC resource controller, which advertises the
        // secondary addresses of the primary ENI (all but its own) as this resource.
        r.set(PRIVATE_IPV4_ADDRESS, (facts.ipv4_per_eni - 1).max(0));
    }
    r
}

/// kube-reserved with the EKS AMI defaults, then the EC2NodeClass's `kubeReserved` per resource.
pub fn kube_reserved(facts: &Ec2Facts, kubelet: &KubeletConfig) -> Resources {
    // The Linux AMI sizes kubelet's memory reservation from the ENI-limited pod density even when
    // maxPods is overridden (awslabs/amazon-eks-ami#782), and Karpenter follows the AMI, so neither
    // maxPods nor podsPerCore changes it there. The Windows images size it from the pods the node
    // actually runs, so there they do; Bottlerocket too.
    let pods = match kubelet.os {
        NodeOs::Linux if !kubelet.bottlerocket => eni_limited_pods(facts),
        _ => max_pods(facts, kubelet),
    };
    let mut r = Resources {
        cpu: kube_reserved_cpu(facts.vcpu),
        memory: (11 * pods + 255) << 20,
        ephemeral: KUBE_RESERVED_EPHEMERAL_BYTES,
        ..Resources::default()
    };
    if let Some(custom) = &kubelet.kube_reserved {
        override_named(&mut r, custom);
    }
    r
}

/// Millicores reserved for the kubelet and container runtime: 6% of the first core, 1% of the
/// second, 0.5% of the third and fourth, 0.25% of every other. Each band truncates separately
/// after a floating-point multiply, exactly as Karpenter computes it.
fn kube_reserved_cpu(vcpu: i64) -> i64 {
    const BANDS: [(i64, i64, f64); 4] =
        [(0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025)];
    let cpu = vcpu * 1000;
    BANDS
        .iter()
        .filter(|(start, _, _)| cpu >= *start)
        .map(|&(start, end, pct)| ((cpu.min(end) - start) as f64 * pct) as i64)
        .sum()
}

/// `Resources` cannot tell "reserve zero" from "not set", so only non-zero amounts override: a
/// kubeReserved that names only `cpu` must leave the computed memory reservation alone.
fn override_named(base: &mut Resources, with: &Resources) {
    if with.cpu != 0 {
        base.cpu = with.cpu;
    }
    if with.memory != 0 {
        base.memory = with.memory;
    }
    if with.ephemeral != 0 {
        base.ephemeral = with.ephemeral;
    }
    if with.pods != 0 {
        base.pods = with.pods;
    }
    for (name, v) in &with.extended {
        base.set(name, *v);
    }
}

/// An eviction threshold as written: a quantity or a percentage of capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Threshold {
    Bytes(i64),
    Percent(f64),
}

impl Threshold {
    fn parse(value: &str) -> Result<Threshold, &'static str> {
        let value = value.trim();
        if let Some(p) = value.strip_suffix('%') {
            let p: f64 = p.trim().parse().map_err(|_| "percentage is not a number")?;
            if !(0.0..=100.0).contains(&p) {
                return Err("percentage must be between 0% and 100%");
            }
            return Ok(Threshold::Percent(p));
        }
        let bytes = parse_units(value).map_err(|_| "not a quantity or a percentage")?;
        if bytes < 0 {
            return Err("must not be negative");
        }
        Ok(Threshold::Bytes(bytes))
    }

    fn of(self, capacity: i64) -> i64 {
        match self {
            Threshold::Bytes(b) => b,
            // The kubelet reads 100% as "threshold disabled", not "evict at full capacity".
            Threshold::Percent(100.0) => 0,
            Threshold::Percent(p) => (capacity as f64 / 100.0 * p).ceil() as i64,
        }
    }
}

/// Memory and ephemeral storage held back by the hard eviction thresholds (defaults
/// `memory.available<100Mi`, `nodefs.available<10%`). Where the EC2NodeClass sets a signal, the
/// larger of its hard and soft values replaces the default: pods are evicted at the soft threshold
/// after a grace period, so scheduling up to it would only cause churn.
pub fn eviction_threshold(capacity: &Resources, kubelet: &KubeletConfig) -> Resources {
    let configured = |signal: &str, cap: i64| {
        [&kubelet.eviction_hard, &kubelet.eviction_soft]
            .into_iter()
            .filter_map(|m| m.get(signal))
            .filter_map(|v| Threshold::parse(v).ok())
            .map(|t| t.of(cap))
            .max()
    };
    Resources {
        memory: configured(MEMORY_AVAILABLE, capacity.memory).unwrap_or(EVICTION_MEMORY_BYTES),
        ephemeral: configured(NODEFS_AVAILABLE, capacity.ephemeral)
            .unwrap_or_else(|| Threshold::Percent(EVICTION_NODEFS_PERCENT).of(capacity.ephemeral)),
        ..Resources::default()
    }
}

/// Capacity minus kube-reserved, system-reserved (none by default) and the eviction thresholds.
/// Never negative: a type whose overhead exceeds its capacity simply fits nothing.
pub fn allocatable(facts: &Ec2Facts, kubelet: &KubeletConfig) -> Resources {
    let cap = capacity(facts, kubelet);
    let mut r = cap.minus(&kube_reserved(facts, kubelet));
    if let Some(system) = &kubelet.system_reserved {
        r.sub(system);
    }
    r.sub(&eviction_threshold(&cap, kubelet));
    r.cpu = r.cpu.max(0);
    r.memory = r.memory.max(0);
    r.ephemeral = r.ephemeral.max(0);
    r.pods = r.pods.max(0);
    r.extended.retain(|(_, v)| *v > 0);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{EFA, NVIDIA_GPU, POD_ENI};
    use std::collections::BTreeMap;

    const MI: i64 = 1 << 20;
    const GI: i64 = 1 << 30;

    /// m5.large: Karpenter publishes 1930m / 6903Mi / 17Gi / 29 pods for it.
    fn m5_large() -> Ec2Facts {
        Ec2Facts {
            vcpu: 2,
            memory_mib: 8192,
            max_enis: 3,
            ipv4_per_eni: 10,
            arm64: false,
            instance_store_gb: 0,
            extended: vec![(POD_ENI.to_string(), 9)],
        }
    }

    fn kubelet() -> KubeletConfig {
        KubeletConfig::default()
    }

    fn with_eviction(hard: &[(&str, &str)], soft: &[(&str, &str)]) -> KubeletConfig {
        let map =
            |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>();
        KubeletConfig { eviction_hard: map(hard), eviction_soft: map(soft), ..kubelet() }
    }

    #[test]
    fn defaults_match_karpenter_for_m5_large() {
        let a = allocatable(&m5_large(), &kubelet());
        assert_eq!(a.cpu, 1930);
        assert_eq!(a.memory, 6903 * MI);
        assert_eq!(a.ephemeral, 17 * GI);
        assert_eq!(a.pods, 29);
        assert_eq!(a.get(POD_ENI), 9);
        let c = capacity(&m5_large(), &kubelet());
        assert_eq!((c.cpu, c.memory, c.ephemeral, c.pods), (2000, 7577 * MI, 20 * GI, 29));
    }

    #[test]
    fn graviton_loses_cma_memory_before_vm_overhead() {
        // t4g.nano: 512 MiB - 64 = 448, minus ceil(448 * 7.5%) = 34 -> 414 MiB of capacity.
        let facts = Ec2Facts {
            vcpu: 2,
            memory_mib: 512,
            max_enis: 2,
            ipv4_per_eni: 2,
            arm64: true,
            instance_store_gb: 0,
            extended: vec![],
        };
        assert_eq!(capacity(&facts, &kubelet()).memory, 414 * MI);
        assert_eq!(allocatable(&facts, &kubelet()).memory, 15 * MI);
    }

    #[test]
    fn kube_reserved_cpu_bands() {
        assert_eq!(kube_reserved_cpu(1), 60);
        assert_eq!(kube_reserved_cpu(2), 70);
        assert_eq!(kube_reserved_cpu(4), 80);
        assert_eq!(kube_reserved_cpu(8), 90);
        assert_eq!(kube_reserved_cpu(96), 310);
        assert_eq!(kube_reserved_cpu(448), 1190);
    }

    #[test]
    fn missing_eni_data_means_110_pods() {
        let facts = Ec2Facts { max_enis: 0, ipv4_per_eni: 0, ..m5_large() };
        assert_eq!(capacity(&facts, &kubelet()).pods, DEFAULT_MAX_PODS);
        assert_eq!(kube_reserved(&facts, &kubelet()).memory, (11 * 110 + 255) * MI);
    }

    #[test]
    fn max_pods_override_keeps_eni_limited_memory_reservation() {
        let base = allocatable(&m5_large(), &kubelet());
        let k = KubeletConfig { max_pods: Some(110), ..kubelet() };
        let a = allocatable(&m5_large(), &k);
        assert_eq!(a.pods, 110);
        assert_eq!(a.memory, base.memory, "the AMI reserves memory for ENI-limited pods regardless");
        assert_eq!(a.cpu, base.cpu);
    }

    #[test]
    fn pods_per_core_caps_pods() {
        let k = KubeletConfig { pods_per_core: Some(4), ..kubelet() };
        assert_eq!(allocatable(&m5_large(), &k).pods, 8);
        let k = KubeletConfig { pods_per_core: Some(100), ..kubelet() };
        assert_eq!(allocatable(&m5_large(), &k).pods, 29, "a cap above the ENI limit changes nothing");
        let k = KubeletConfig { max_pods: Some(5), pods_per_core: Some(4), ..kubelet() };
        assert_eq!(allocatable(&m5_large(), &k).pods, 5);
        let k = KubeletConfig { pods_per_core: Some(0), ..kubelet() };
        assert_eq!(allocatable(&m5_large(), &k).pods, 29, "podsPerCore 0 means unlimited");
    }

    #[test]
    fn kube_reserved_overrides_only_what_it_names() {
        let base = allocatable(&m5_large(), &kubelet());
        let k = KubeletConfig { kube_reserved: Some(Resources::new(200, 0)), ..kubelet() };
        let a = allocatable(&m5_large(), &k);
        assert_eq!(a.cpu, 1800);
        assert_eq!(a.memory, base.memory);
        let reserved = Resources::from_quantities([("memory", "1Gi"), ("ephemeral-storage", "3Gi")]).unwrap();
        let k = KubeletConfig { kube_reserved: Some(reserved), ..kubelet() };
        let a = allocatable(&m5_large(), &k);
        assert_eq!(a.cpu, base.cpu);
        assert_eq!(a.memory, 7577 * MI - GI - 100 * MI);
        assert_eq!(a.ephemeral, 20 * GI - 3 * GI - 2 * GI);
    }

    #[test]
    fn system_reserved_adds_to_kube_reserved() {
        let base = allocatable(&m5_large(), &kubelet());
        let sys =
            Resources::from_quantities([("cpu", "100m"), ("memory", "100Mi"), ("ephemeral-storage", "1Gi")]).unwrap();
        let k = KubeletConfig { system_reserved: Some(sys), ..kubelet() };
        let a = allocatable(&m5_large(), &k);
        assert_eq!(a.cpu, base.cpu - 100);
        assert_eq!(a.memory, base.memory - 100 * MI);
        assert_eq!(a.ephemeral, base.ephemeral - GI);
        assert_eq!(a.pods, base.pods);
    }

    #[test]
    fn eviction_hard_absolute() {
        let base = allocatable(&m5_large(), &kubelet());
        let k = with_eviction(&[(MEMORY_AVAILABLE, "500Mi"), (NODEFS_AVAILABLE, "1Gi")], &[]);
        let a = allocatable(&m5_large(), &k);
        assert_eq!(a.memory, base.memory - 400 * MI);
        assert_eq!(a.ephemeral, 20 * GI - GI - GI);
        // Smaller than the default is honoured too: the setting replaces the default.
        let k = with_eviction(&[(MEMORY_AVAILABLE, "50Mi")], &[]);
        assert_eq!(allocatable(&m5_large(), &k).memory, base.memory + 50 * MI);
    }

    #[test]
    fn eviction_hard_percent_of_capacity() {
        let base = allocatable(&m5_large(), &kubelet());
        let k = with_eviction(&[(MEMORY_AVAILABLE, "5%"), (NODEFS_AVAILABLE, "15%")], &[]);
        let a = allocatable(&m5_large(), &k);
        let five_percent = (7577.0 * MI as f64 * 0.05).ceil() as i64;
        assert_eq!(a.memory, base.memory + 100 * MI - five_percent);
        assert_eq!(a.ephemeral, 20 * GI - GI - (20.0 * GI as f64 * 0.15).ceil() as i64);
        let k = with_eviction(&[(MEMORY_AVAILABLE, "100%")], &[]);
        assert_eq!(allocatable(&m5_large(), &k).memory, base.memory + 100 * MI, "100% disables the threshold");
    }

    #[test]
    fn eviction_soft_takes_the_larger_of_hard_and_soft() {
        let base = allocatable(&m5_large(), &kubelet());
        let k = with_eviction(&[(MEMORY_AVAILABLE, "200Mi")], &[(MEMORY_AVAILABLE, "300Mi")]);
        assert_eq!(allocatable(&m5_large(), &k).memory, base.memory - 200 * MI);
        let k = with_eviction(&[(MEMORY_AVAILABLE, "300Mi")], &[(MEMORY_AVAILABLE, "200Mi")]);
        assert_eq!(allocatable(&m5_large(), &k).memory, base.memory - 200 * MI);
        let k = with_eviction(&[], &[(NODEFS_AVAILABLE, "20%")]);
        assert_eq!(allocatable(&m5_large(), &k).ephemeral, 20 * GI - GI - 4 * GI);
    }

    #[test]
    fn invalid_values_are_ignored_by_the_model_and_reported_by_validate() {
        let base = allocatable(&m5_large(), &kubelet());
        for bad in ["lots", "150%", "-1Gi", "x%"] {
            let k = with_eviction(&[(MEMORY_AVAILABLE, bad)], &[]);
            assert_eq!(allocatable(&m5_large(), &k), base, "{bad}");
            let e = validate(&k).unwrap_err();
            assert!(e.to_string().contains(bad), "{e}");
        }
        assert!(validate(&with_eviction(&[(MEMORY_AVAILABLE, "5%"), ("imagefs.available", "junk")], &[])).is_ok());
        assert_eq!(validate(&KubeletConfig { max_pods: Some(-1), ..kubelet() }), Err(KubeletError::MaxPods(-1)));
        assert_eq!(
            validate(&KubeletConfig { pods_per_core: Some(-2), ..kubelet() }),
            Err(KubeletError::PodsPerCore(-2))
        );
    }

    fn windows(kubelet: KubeletConfig) -> KubeletConfig {
        KubeletConfig { os: NodeOs::Windows2022, ..kubelet }
    }

    fn facts(vcpu: i64, memory_mib: i64, max_enis: i64, ipv4_per_eni: i64) -> Ec2Facts {
        Ec2Facts { vcpu, memory_mib, max_enis, ipv4_per_eni, arm64: false, instance_store_gb: 0, extended: vec![] }
    }

    /// Worked by hand from Karpenter's formulas for a Windows family: 110 pods whatever the ENIs,
    /// kube-reserved memory 11 * 110 + 255 = 1465Mi, cpu bands as on Linux, a 50Gi root volume
    /// (1Gi kube-reserved, 10% = 5Gi evicted), 100Mi memory eviction, and `PrivateIPv4Address` one
    /// less than the addresses of an ENI.
    #[test]
    fn windows_defaults_follow_karpenter() {
        let k = windows(kubelet());
        // m5.large: 7577Mi of memory capacity (as on Linux), 2000m cpu, 10 addresses per ENI.
        let a = allocatable(&m5_large(), &k);
        assert_eq!((a.cpu, a.memory, a.ephemeral, a.pods), (1930, (7577 - 1465 - 100) * MI, 44 * GI, 110));
        assert_eq!(a.get(PRIVATE_IPV4_ADDRESS), 9);
        assert_eq!(a.get(POD_ENI), 9, "trunk ENIs are the type's, whatever the OS");
        let c = capacity(&m5_large(), &k);
        assert_eq!((c.cpu, c.memory, c.ephemeral, c.pods), (2000, 7577 * MI, 50 * GI, 110));
        assert_eq!(kube_reserved(&m5_large(), &k).memory, 1465 * MI);
        // c5.4xlarge: 16 vCPU, 32768Mi - ceil(2457.6) = 30310Mi; cpu 60 + 10 + 10 + 30 = 110m.
        let a = allocatable(&facts(16, 32768, 8, 30), &k);
        assert_eq!((a.cpu, a.memory, a.pods), (15890, (30310 - 1465 - 100) * MI, 110));
        assert_eq!(a.get(PRIVATE_IPV4_ADDRESS), 29);
        // t3.medium: 4096Mi - ceil(307.2) = 3788Mi; 6 addresses per ENI.
        let a = allocatable(&facts(2, 4096, 3, 6), &k);
        assert_eq!((a.cpu, a.memory, a.pods), (1930, (3788 - 1465 - 100) * MI, 110));
        assert_eq!(a.get(PRIVATE_IPV4_ADDRESS), 5);
    }

    #[test]
    fn windows_memory_reservation_follows_max_pods_and_pods_per_core() {
        // maxPods 20: 11 * 20 + 255 = 475Mi reserved (Linux would keep the ENI-limited 574Mi).
        let k = windows(KubeletConfig { max_pods: Some(20), ..kubelet() });
        let a = allocatable(&m5_large(), &k);
        assert_eq!((a.memory, a.pods), ((7577 - 475 - 100) * MI, 20));
        // podsPerCore 10 on 2 vCPU caps the 110 default at 20: the same figures.
        let k = windows(KubeletConfig { pods_per_core: Some(10), ..kubelet() });
        assert_eq!(allocatable(&m5_large(), &k), a);
        // A type with no ENI data still advertises no addresses rather than a negative count.
        let a = allocatable(&facts(2, 8192, 0, 0), &windows(kubelet()));
        assert_eq!((a.pods, a.get(PRIVATE_IPV4_ADDRESS)), (110, 0));
    }

    #[test]
    fn linux_has_no_private_ipv4_resource_and_keeps_eni_limits() {
        let a = allocatable(&m5_large(), &kubelet());
        assert_eq!(a.get(PRIVATE_IPV4_ADDRESS), 0);
        assert_eq!(default_root_volume_bytes(NodeOs::Linux), 20 * GI);
        assert_eq!(default_root_volume_bytes(NodeOs::Windows2019), 50 * GI);
    }

    #[test]
    fn extended_resources_pass_through_and_overhead_never_goes_negative() {
        let facts = Ec2Facts {
            extended: vec![(EFA.to_string(), 1), (NVIDIA_GPU.to_string(), 4), (POD_ENI.to_string(), 0)],
            ..m5_large()
        };
        let a = allocatable(&facts, &kubelet());
        assert_eq!(a.extended, vec![(NVIDIA_GPU.to_string(), 4), (EFA.to_string(), 1)]);
        let huge = Resources::from_quantities([("cpu", "64"), ("memory", "1Ti")]).unwrap();
        let a = allocatable(&facts, &KubeletConfig { system_reserved: Some(huge), ..kubelet() });
        assert_eq!((a.cpu, a.memory), (0, 0));
    }

    /// Ephemeral storage: the image's root volume, the class's mapped volume, or with RAID0 the
    /// type's instance store; allocatable takes kube-reserved's 1Gi and nodefs' 10% of it.
    #[test]
    fn ephemeral_storage_from_the_root_volume_or_the_instance_store() {
        let m5 = m5_large();
        let m5d = Ec2Facts { instance_store_gb: 75, ..m5_large() };
        let mapped = KubeletConfig { ephemeral_volume_bytes: Some(100 * GI), ..kubelet() };
        let raid0 = KubeletConfig { instance_store_raid0: true, ..mapped.clone() };
        for (facts, k, want) in [
            (&m5, kubelet(), 20 * GI),
            (&m5d, kubelet(), 20 * GI),
            (&m5, mapped.clone(), 100 * GI),
            // RAID0 without instance-store disks leaves the volume in charge.
            (&m5, raid0.clone(), 100 * GI),
            (&m5d, mapped.clone(), 100 * GI),
            (&m5d, raid0.clone(), 75_000_000_000),
            (&m5, KubeletConfig { os: NodeOs::Windows2022, ..kubelet() }, 50 * GI),
        ] {
            assert_eq!(capacity(facts, &k).ephemeral, want, "{facts:?} {k:?}");
            let tenth = (want as f64 / 10.0).ceil() as i64;
            assert_eq!(allocatable(facts, &k).ephemeral, want - GI - tenth, "{facts:?} {k:?}");
        }
    }

    /// Bottlerocket: no podsPerCore, and kube-reserved memory from the pods the node runs.
    #[test]
    fn bottlerocket_sizes_kube_reserved_from_its_pods_and_has_no_pods_per_core() {
        let br = KubeletConfig { bottlerocket: true, ..kubelet() };
        let m5 = m5_large();
        assert_eq!(max_pods(&m5, &br), 29);
        assert_eq!(max_pods(&m5, &KubeletConfig { pods_per_core: Some(4), ..br.clone() }), 29);
        assert_eq!(max_pods(&m5, &KubeletConfig { pods_per_core: Some(4), ..kubelet() }), 8);
        let fewer = KubeletConfig { max_pods: Some(10), ..br.clone() };
        assert_eq!(kube_reserved(&m5, &fewer).memory, (11 * 10 + 255) * MI);
        // AL2023 keeps the ENI-limited figure whatever maxPods says.
        assert_eq!(kube_reserved(&m5, &KubeletConfig { max_pods: Some(10), ..kubelet() }).memory, (11 * 29 + 255) * MI);
        assert_eq!(kube_reserved(&m5, &br).memory, (11 * 29 + 255) * MI);
    }
}
