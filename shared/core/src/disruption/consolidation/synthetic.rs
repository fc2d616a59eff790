//! A large, realistic cluster for consolidation benchmarks: real embedded instance types, nodes
//! filled to mixed utilisation, EKS DaemonSets on every node, PDBs, do-not-disrupt pods, a few
//! bare pods, empty nodes and zonally spread deployments. Shared by the criterion benchmark, the
//! `consolidation_pass` example and tests so all of them measure the same thing.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::benchmark;
use crate::catalog::{CapacityType, Catalog};
use crate::cluster::Cluster;
use crate::labels;
use crate::model::{
    ConsolidationPolicy, InclusionPolicy, LabelSelector, Node, OwnerKind, Pdb, Pod, TopologySpread, WhenUnsatisfiable,
};
use crate::nodeclaim::{Launch, NodeClaim, Phase};
use crate::resources::Resources;
use crate::time::Time;

/// Types the generated nodes run: common general-purpose, compute and memory sizes of both
/// architectures, as a cluster that Karpenter has run for a while ends up with.
const TYPES: [&str; 10] = [
    "m5.large",
    "m5.xlarge",
    "m5.2xlarge",
    "c5.xlarge",
    "c5.2xlarge",
    "r5.xlarge",
    "m6g.xlarge",
    "m6i.2xlarge",
    "c6g.2xlarge",
    "m5.4xlarge",
];

/// `nodes` nodes carrying `pods` workload pods (DaemonSet pods come on top, three per node),
/// in two pools: `general` (WhenEmptyOrUnderutilized, 80% of the nodes) and `batch` (WhenEmpty).
pub fn synthetic_cluster(catalog: &Catalog, nodes: usize, pods: usize, seed: u64) -> Cluster {
    let mut rng = SmallRng::seed_from_u64(seed);
    let now = Time::from_secs(1_750_000_000);
    let mut general = benchmark::general_purpose_pool();
    general.name = "general".into();
    general.disruption.consolidate_after = Some(Duration::from_secs(30));
    let mut batch = benchmark::general_purpose_pool();
    batch.name = "batch".into();
    batch.disruption.consolidation_policy = ConsolidationPolicy::WhenEmpty;
    batch.disruption.consolidate_after = Some(Duration::from_secs(300));
    let (_, class) = benchmark::default_pool();
    let daemonsets = benchmark::eks_daemonsets();
    let types: Vec<_> = TYPES.iter().filter_map(|t| catalog.get(t)).collect();
    assert!(!types.is_empty(), "the embedded catalog lacks the benchmark types");
    let apps = (pods / 200).max(1);
    let mut cluster = Cluster {
        now,
        nodepools: vec![general, batch],
        nodeclasses: vec![class.clone()],
        daemonsets: daemonsets.clone(),
        ..Default::default()
    };
    // One PDB per tenth app; one in ten of those allows no disruption right now.
    for a in (0..apps).step_by(10) {
        cluster.pdbs.push(Pdb {
            namespace: "shop".into(),
            name: format!("app-{a}"),
            selector: LabelSelector::from_labels(&[("app", &format!("app-{a}"))]),
            disruptions_allowed: if a % 100 == 0 { 0 } else { 2 },
        });
    }
    let mut made = 0usize;
    for n in 0..nodes {
        let t = types[rng.random_range(0..types.len())];
        let spot = rng.random_bool(0.6);
        let ct = if spot { CapacityType::Spot } else { CapacityType::OnDemand };
        let offer = t
            .offerings
            .iter()
            .filter(|o| o.capacity_type == ct)
            .nth(n % 3)
            .or_else(|| t.offerings.iter().find(|o| o.capacity_type == ct))
            .or_else(|| t.offerings.first())
            .expect("type has offerings");
        let pool = if n % 5 == 4 { "batch" } else { "general" };
        let name = format!("node-{n:05}");
        let mut node_labels: BTreeMap<String, String> = t.requirements.single_valued_labels();
        node_labels.insert(labels::ZONE.into(), offer.zone.clone());
        node_labels.insert(labels::CAPACITY_TYPE.into(), offer.capacity_type.as_str().into());
        node_labels.insert(labels::NODEPOOL.into(), pool.into());
        node_labels.insert(labels::KARPENTER_NODEPOOL.into(), pool.into());
        node_labels.insert(labels::NODECLAIM.into(), name.clone());
        node_labels.insert(labels::HOSTNAME.into(), name.clone());
        let allocatable = t.allocatable(&class.kubelet);
        let mut node = Node::new(&name, node_labels, allocatable.clone());
        node.price = Some(offer.price);
        for ds in &daemonsets {
            let mut p = ds.pod.clone();
            p.name = format!("{}-{name}", ds.name);
            p.node_name = Some(name.clone());
            node.pods.push(Arc::new(p));
        }
        let room = allocatable.minus(&node.requested());
        // Workload pods spread evenly over the nodes; 2% of nodes are empty and the rest are
        // filled to between 15% and 95% of their room.
        let left_nodes = nodes - n;
        let mut count = (pods - made) / left_nodes;
        if rng.random_bool(0.02) && left_nodes > 1 {
            count = 0;
        }
        let fill = rng.random_range(0.15..0.95);
        let per_cpu = ((room.cpu as f64 * fill) / count.max(1) as f64) as i64;
        let per_mem = ((room.memory as f64 * fill) / count.max(1) as f64) as i64;
        let count = count.min((room.pods - 1).max(0) as usize);
        for _ in 0..count {
            let a = rng.random_range(0..apps);
            let req = Resources::new((per_cpu / 10 * 10).max(10), (per_mem >> 20 << 20).max(16 << 20));
            let mut p = Pod::new("shop", &format!("app-{a}-{made:06}"), req);
            p.labels.insert("app".into(), format!("app-{a}"));
            p.owner = OwnerKind::ReplicaSet;
            p.owner_name = format!("app-{a}-7d9f");
            p.node_name = Some(name.clone());
            p.started_at = Some(now.minus(Duration::from_secs(3600)));
            let roll: f64 = rng.random();
            if roll < 0.01 {
                p.annotations.insert(labels::DO_NOT_DISRUPT[0].into(), "true".into());
            } else if roll < 0.015 {
                p.owner = OwnerKind::None;
            } else if roll < 0.03 {
                p.priority = 1_000_000;
            }
            if a % 40 == 1 {
                // Zonally spread deployments: their moves need the whole cluster simulated.
                p.topology_spread.push(TopologySpread {
                    max_skew: 1,
                    topology_key: labels::ZONE.into(),
                    when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                    selector: LabelSelector::from_labels(&[("app", &format!("app-{a}"))]),
                    min_domains: None,
                    node_affinity_policy: InclusionPolicy::Honor,
                    node_taints_policy: InclusionPolicy::Ignore,
                });
            }
            node.pods.push(Arc::new(p));
            made += 1;
        }
        let mut claim = NodeClaim::launching(&name, pool, "default", now.minus(Duration::from_secs(86_400)));
        let age = Duration::from_secs(rng.random_range(3_600..20 * 86_400));
        claim.created_at = now.minus(age);
        claim.phase = Phase::Initialized;
        claim.node_name = Some(name.clone());
        claim.registered_at = Some(claim.created_at);
        claim.initialized_at = Some(claim.created_at);
        claim.last_pod_event = Some(now.minus(Duration::from_secs(rng.random_range(0..7_200))));
        claim.expire_after = Some(Duration::from_secs(720 * 3600));
        claim.launch = Some(Launch {
            instance_id: format!("i-{n:017x}"),
            instance_type: t.name.clone(),
            zone: offer.zone.clone(),
            capacity_type: offer.capacity_type,
            image_id: "ami-0123".into(),
            subnet_id: "subnet-1".into(),
            security_groups: vec![],
            price: offer.price,
            launched_at: claim.created_at,
        });
        cluster.claims.push(claim);
        cluster.nodes.push(node);
    }
    cluster
}
