mod lifecycle_support;
use dovetail_core::benchmark::karpenter_pods;
use dovetail_core::catalog;
use dovetail_core::cluster::Cluster;
use dovetail_core::labels;
use dovetail_core::model::{NodeClass, NodePool};
use dovetail_core::provisioning::plan;
use dovetail_core::resources::Resources;
use lifecycle_support::*;
use std::time::Instant;

#[test]
#[ignore]
fn tmp_scale() {
    for n in [500usize, 1000, 2000, 4000] {
        let pool = NodePool::new("default", "default");
        let mut c = Cluster {
            now: T0.plus(secs(100)),
            nodepools: vec![pool],
            nodeclasses: vec![NodeClass { name: "default".into(), ..Default::default() }],
            ..Cluster::default()
        };
        let pods = karpenter_pods(n * 20 + 1, 7);
        for i in 0..n {
            let name = format!("c{i:05}");
            let mut claim = running(&name);
            claim.nodepool = "default".into();
            let mut nd = node(&name);
            nd.allocatable = Resources::new(16000, 64 << 30);
            nd.labels.insert(labels::HOSTNAME.into(), nd.name.clone());
            nd.labels.insert(labels::ZONE.into(), ["us-east-1a", "us-east-1b", "us-east-1c"][i % 3].into());
            nd.labels.insert(labels::NODEPOOL.into(), "default".into());
            for j in 0..20 {
                let mut p = pods[i * 20 + j].clone();
                p.node_name = Some(nd.name.clone());
                nd.pods.push(p);
            }
            c.nodes.push(nd);
            c.claims.push(claim);
        }
        c.pending = vec![pods[n * 20].clone()];
        let t = Instant::now();
        let ds = plan(&c, catalog::embedded());
        eprintln!("n={n} plan {:?} decisions {}", t.elapsed(), ds.len());
    }
}
