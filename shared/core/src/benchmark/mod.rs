//! Workloads for scheduling benchmarks: Karpenter's published benchmark mix reproduced exactly
//! (400 synthetic instance types, five kinds of pods), and generic pods for the real catalog.
//! Shared by `cargo bench` and `dovetail bench` so both measure the same thing.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::catalog::{CapacityType, Catalog, InstanceResources, InstanceType, Offering, Zone};
use crate::labels;
use crate::model::{
    InclusionPolicy, LabelSelector, NamespaceScope, NodeClass, NodePool, Pod, PodAffinityTerm, TopologySpread,
    WhenUnsatisfiable,
};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::Resources;
use crate::snapshot::Snapshot;

pub const SEED: u64 = 42;
const CPU_CHOICES_M: [i64; 5] = [100, 250, 500, 1000, 1500];
const MEMORY_CHOICES_MI: [i64; 6] = [100, 256, 512, 1024, 2048, 4096];
const LABEL_VALUES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];
const GIB: i64 = 1 << 30;

/// Karpenter's fake instance types: type i (1…n) has i vCPU, 2i GiB, 10i pods, priced
/// 0.1 × vCPU + 0.1 × memory in (decimal) GB; spot in zones 1–2 and on-demand in zones 1–3.
pub fn karpenter_catalog(n: usize) -> Catalog {
    let zones: Vec<Zone> =
        (1..=3).map(|z| Zone { name: format!("test-zone-{z}"), id: format!("test-zone-id-{z}") }).collect();
    let types = (1..=n as i64)
        .map(|i| {
            let name = format!("fake-it-{}", i - 1);
            let res = Resources { cpu: i * 1000, memory: 2 * i * GIB, ephemeral: 0, pods: 10 * i, extended: vec![] };
            let price = 0.1 * i as f64 + 0.1 * (2 * i * GIB) as f64 / 1e9;
            let mut offerings = Vec::new();
            for (ct, zs) in [(CapacityType::Spot, 1..=2), (CapacityType::OnDemand, 1..=3)] {
                for z in zs {
                    offerings.push(Offering {
                        zone: format!("test-zone-{z}"),
                        capacity_type: ct,
                        price,
                        list_price: None,
                        available: true,
                    });
                }
            }
            let mut requirements: Requirements = [
                Requirement::single(labels::INSTANCE_TYPE, &name),
                Requirement::single(labels::ARCH, "amd64"),
                Requirement::single(labels::OS, "linux"),
            ]
            .into_iter()
            .collect();
            let zone_names: Vec<&str> = zones.iter().map(|z| z.name.as_str()).collect();
            requirements.add(Requirement::new(labels::ZONE, Operator::In, &zone_names).expect("zones"));
            requirements
                .add(Requirement::new(labels::CAPACITY_TYPE, Operator::In, &["spot", "on-demand"]).expect("types"));
            InstanceType {
                name,
                requirements,
                offerings,
                resources: InstanceResources::Fixed { capacity: res.clone(), allocatable: res },
            }
        })
        .collect();
    Catalog { types, zones }
}

fn random_requests(rng: &mut SmallRng) -> Resources {
    let cpu = CPU_CHOICES_M[rng.random_range(0..CPU_CHOICES_M.len())];
    let mem = MEMORY_CHOICES_MI[rng.random_range(0..MEMORY_CHOICES_MI.len())] << 20;
    Resources { cpu, memory: mem, ephemeral: 0, pods: 1, extended: vec![] }
}

fn random_label(rng: &mut SmallRng) -> &'static str {
    LABEL_VALUES[rng.random_range(0..LABEL_VALUES.len())]
}

fn pod(i: usize, requests: Resources, labels: &[(&str, &str)]) -> Pod {
    Pod::new("default", &format!("pod-{i:06}"), requests).with_labels(labels)
}

/// Karpenter's benchmark mix of `count` pods, in fifths: generic; zonal topology spread;
/// hostname topology spread; zonal self-affinity; hostname anti-affinity (the remainder is
/// generic).
pub fn karpenter_pods(count: usize, seed: u64) -> Vec<Pod> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let fifth = count / 5;
    let mut pods = Vec::with_capacity(count);
    let spread = |key: &str, selector_value: &str| TopologySpread {
        max_skew: 1,
        topology_key: key.to_string(),
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        selector: LabelSelector::from_labels(&[("my-label", selector_value)]),
        min_domains: None,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
    };
    for i in 0..count {
        let requests = random_requests(&mut rng);
        let kind = i.checked_div(fifth).map_or(0, |k| k.min(5));
        let p = match kind {
            1 => {
                let own = random_label(&mut rng);
                let mut p = pod(i, requests, &[("my-label", own)]);
                p.topology_spread.push(spread(labels::ZONE, random_label(&mut rng)));
                p
            }
            2 => {
                let own = random_label(&mut rng);
                let mut p = pod(i, requests, &[("my-label", own)]);
                p.topology_spread.push(spread(labels::HOSTNAME, random_label(&mut rng)));
                p
            }
            3 => {
                let own = random_label(&mut rng);
                let mut p = pod(i, requests, &[("my-affininity", own)]);
                p.pod_affinity.push(PodAffinityTerm {
                    selector: LabelSelector::from_labels(&[("my-affininity", own)]),
                    namespaces: NamespaceScope::List(vec![]),
                    topology_key: labels::ZONE.to_string(),
                });
                p
            }
            4 => {
                let mut p = pod(i, requests, &[("app", "nginx")]);
                p.pod_anti_affinity.push(PodAffinityTerm {
                    selector: LabelSelector::from_labels(&[("app", "nginx")]),
                    namespaces: NamespaceScope::List(vec![]),
                    topology_key: labels::HOSTNAME.to_string(),
                });
                p
            }
            _ => pod(i, requests, &[("my-label", random_label(&mut rng))]),
        };
        pods.push(p);
    }
    pods
}

/// Generic pods (random label, cpu and memory from Karpenter's choices).
pub fn generic_pods(count: usize, seed: u64) -> Vec<Pod> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..count)
        .map(|i| {
            let requests = random_requests(&mut rng);
            pod(i, requests, &[("my-label", random_label(&mut rng))])
        })
        .collect()
}

/// One unconstrained pool (spot and on-demand, any architecture) and its class.
pub fn default_pool() -> (NodePool, NodeClass) {
    let mut pool = NodePool::new("default", "default");
    pool.requirements.add(
        Requirement::new(labels::CAPACITY_TYPE, Operator::In, &[labels::CAPACITY_SPOT, labels::CAPACITY_ON_DEMAND])
            .expect("valid"),
    );
    pool.requirements.add(Requirement::single(labels::OS, "linux"));
    (pool, NodeClass { name: "default".into(), ..NodeClass::default() })
}

/// The DaemonSets every EKS node runs with the default add-ons (VPC CNI, kube-proxy, EBS CSI
/// node plugin), at their default requests: what each node gives away before pods arrive.
pub fn eks_daemonsets() -> Vec<crate::model::DaemonSet> {
    [("aws-node", 25, 0), ("kube-proxy", 100, 0), ("ebs-csi-node", 30, 120 << 20)]
        .into_iter()
        .map(|(name, cpu, memory)| {
            let mut pod = Pod::new("kube-system", name, Resources::new(cpu, memory));
            pod.owner = crate::model::OwnerKind::DaemonSet;
            pod.tolerations.push(crate::model::Toleration {
                key: String::new(),
                operator: crate::model::TolerationOp::Exists,
                value: String::new(),
                effect: None,
            });
            crate::model::DaemonSet { namespace: "kube-system".into(), name: name.into(), pod }
        })
        .collect()
}

/// A snapshot with these pending pods, the default pool and EKS's default DaemonSets.
pub fn eks_snapshot(pods: Vec<Pod>) -> Snapshot {
    Snapshot { daemonsets: eks_daemonsets(), ..snapshot(pods) }
}

/// The general-purpose NodePool Karpenter's documentation starts people with: compute, general
/// and memory-optimised families (`c`, `m`, `r`) newer than the 2nd generation, spot and
/// on-demand, either architecture — no burstable, accelerated or storage-dense types.
pub fn general_purpose_pool() -> NodePool {
    let (mut pool, _) = default_pool();
    pool.requirements.add(Requirement::new(labels::INSTANCE_CATEGORY, Operator::In, &["c", "m", "r"]).expect("valid"));
    pool.requirements.add(Requirement::new(labels::INSTANCE_GENERATION, Operator::Gt, &["2"]).expect("valid"));
    pool
}

/// Generic pods for the real catalog: the general-purpose pool and EKS's default DaemonSets.
pub fn general_purpose_snapshot(pods: Vec<Pod>) -> Snapshot {
    let mut snap = eks_snapshot(pods);
    snap.nodepools = vec![general_purpose_pool()];
    snap
}

/// A snapshot with just these pending pods and the default pool.
pub fn snapshot(pods: Vec<Pod>) -> Snapshot {
    let (pool, class) = default_pool();
    Snapshot { pods, nodepools: vec![pool], nodeclasses: vec![class], ..Default::default() }
}
