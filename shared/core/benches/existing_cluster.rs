//! `cargo bench -p dovetail-core --bench existing_cluster`: one pending pod planned against a
//! cluster that is already running — N nodes of 20 bound pods of Karpenter's benchmark mix, each
//! bound hostname anti-affinity pod with a selector of its own (as the scale rig places them, a
//! workload each). The cost a warm provisioner pays per doorbell besides its reads; it grew with
//! nodes × workloads until a pod's topology effects stopped scanning every anti-affinity group.

use std::collections::BTreeMap;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use dovetail_core::benchmark;
use dovetail_core::cluster::Cluster;
use dovetail_core::labels;
use dovetail_core::model::{LabelSelector, Node, NodeClass, NodePool};
use dovetail_core::provisioning::plan;
use dovetail_core::resources::Resources;

const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

fn cluster(nodes: usize) -> Cluster {
    let pods = benchmark::karpenter_pods(nodes * 20 + 1, benchmark::SEED);
    let mut c = Cluster {
        nodepools: vec![NodePool::new("default", "default")],
        nodeclasses: vec![NodeClass { name: "default".into(), ..Default::default() }],
        ..Cluster::default()
    };
    for i in 0..nodes {
        let name = format!("node-{i:05}");
        let node_labels = BTreeMap::from([
            (labels::HOSTNAME.to_string(), name.clone()),
            (labels::ZONE.to_string(), ZONES[i % 3].to_string()),
            (labels::NODEPOOL.to_string(), "default".to_string()),
        ]);
        let mut node = Node::new(&name, node_labels, Resources::new(16_000, 64 << 30));
        for (j, pod) in pods[i * 20..(i + 1) * 20].iter().enumerate() {
            let mut pod = pod.clone();
            pod.node_name = Some(name.clone());
            for term in &mut pod.pod_anti_affinity {
                let app = format!("nginx-{i}-{j}");
                term.selector = LabelSelector::from_labels(&[("app", app.as_str())]);
                pod.labels.insert("app".into(), app);
            }
            node.pods.push(pod.into());
        }
        c.nodes.push(node);
    }
    c.pending = vec![pods[nodes * 20].clone()];
    c
}

fn one_pod_on_a_running_cluster(c: &mut Criterion) {
    let catalog = dovetail_core::catalog::embedded();
    let mut group = c.benchmark_group("one-pod-on-a-running-cluster");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    for nodes in [500usize, 2_000, 5_000] {
        let cluster = cluster(nodes);
        group.bench_with_input(BenchmarkId::from_parameter(nodes), &cluster, |b, c| b.iter(|| plan(c, catalog)));
    }
    group.finish();
}

criterion_group!(benches, one_pod_on_a_running_cluster);
criterion_main!(benches);
