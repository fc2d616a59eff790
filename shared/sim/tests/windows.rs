//! A Windows EC2NodeClass over the in-memory world, through the reconciler the functions run: its
//! pool launches for the Windows pods only, at the Windows price, and the nodes register as
//! Windows nodes of the class's build (labels and allocatable), beside a Linux pool's.

// Shared by the simulator's test binaries, each using a part of it.
#[allow(dead_code)]
mod common;

use common::{later, reconciler};
use dovetail_core::catalog::CapacityType;
use dovetail_core::labels;
use dovetail_core::model::{KubeletConfig, NodeClass, NodeOs, NodePool, OwnerKind, Pod};
use dovetail_core::reconcile::Settings;
use dovetail_core::requirements::{Requirement, Requirements};
use dovetail_core::resources::Resources;
use dovetail_sim::block_on;
use dovetail_sim::world::{ReplicaKind, Workload, World, WorldConfig};

fn selecting(os: &str, name: &str, cpu_m: i64) -> Pod {
    let mut p = Pod::new("shop", name, Resources::new(cpu_m, 2 << 30));
    p.owner = OwnerKind::ReplicaSet;
    p.node_affinity = vec![Requirements::from_iter([Requirement::single(labels::OS, os)])];
    p
}

#[test]
fn a_windows_class_launches_windows_nodes_for_windows_pods() {
    let w = World::new(WorldConfig { interruption_multiplier: 0.0, ..WorldConfig::default() });
    {
        let mut s = w.lock();
        for (name, os) in [("linux", NodeOs::Linux), ("windows", NodeOs::Windows2022)] {
            let mut pool = NodePool::new(name, name);
            pool.requirements.add(Requirement::single(labels::CAPACITY_TYPE, "on-demand"));
            s.kube.nodepools.push(pool);
            let kubelet = KubeletConfig { os, ..KubeletConfig::default() };
            s.kube.nodeclasses.push(NodeClass { name: name.into(), kubelet, ..NodeClass::default() });
        }
        s.add_workload("shop/iis", Workload::replicas(ReplicaKind::Deployment, selecting("windows", "iis", 1000), 3));
        s.add_workload("shop/cart", Workload::replicas(ReplicaKind::Deployment, selecting("linux", "cart", 500), 2));
        s.settle();
    }
    let r = reconciler(&w, Settings::new("sim", "sweeper"));
    for _ in 0..8 {
        later(&w, 30);
        block_on(r.provision()).expect("a clean provisioning pass");
    }

    let s = w.lock();
    let mut windows_nodes = 0;
    for n in s.kube.nodes.values() {
        let l = &n.node.labels;
        let pool = l[labels::NODEPOOL].as_str();
        let instance = &s.cloud.instances[&n.instance_id];
        let t = s.catalog.get(&l[labels::INSTANCE_TYPE]).unwrap();
        let linux_price = t
            .offerings
            .iter()
            .find(|o| o.zone == instance.instance.zone && o.capacity_type == CapacityType::OnDemand)
            .unwrap()
            .price;
        if pool == "windows" {
            windows_nodes += 1;
            assert_eq!(l[labels::OS], "windows", "{}", n.node.name);
            assert_eq!(l[labels::WINDOWS_BUILD], "10.0.20348", "{}", n.node.name);
            assert_eq!(l[labels::ARCH], "amd64", "{}", n.node.name);
            assert_eq!(n.node.allocatable.pods, 110, "{}: Windows pod density", n.node.name);
            let licence = 0.046 * t.vcpus() as f64;
            assert!((instance.price - (linux_price + licence)).abs() < 1e-9, "{}: {}", n.node.name, instance.price);
        } else {
            assert_eq!(l[labels::OS], "linux", "{}", n.node.name);
            assert!(!l.contains_key(labels::WINDOWS_BUILD), "{}", n.node.name);
            assert!((instance.price - linux_price).abs() < 1e-9, "{}: {}", n.node.name, instance.price);
        }
        for uid in &n.pods {
            let pod = &s.kube.pods[uid].pod;
            let want = if pod.name.starts_with("iis") { "windows" } else { "linux" };
            assert_eq!(l[labels::OS], want, "{} on {}", pod.name, n.node.name);
        }
    }
    assert!(windows_nodes > 0, "no Windows node registered: {:?}", s.kube.nodes.keys());
    let bound = s.kube.pods.values().filter(|p| p.bound_at.is_some()).count();
    assert_eq!(bound, 5, "every pod runs on a node of its OS");
}
