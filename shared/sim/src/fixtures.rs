//! Worlds the simulator's and the functions' tests start from.

use dovetail_core::model::{NodeClass, NodePool, OwnerKind, Pod};
use dovetail_core::resources::Resources;

use crate::world::{World, WorldConfig};

const GIB: i64 = 1 << 30;

/// A quiet world (no spot interruptions) with the NodePool and EC2NodeClass `default` and `pods`
/// pending pods of mixed sizes (0.25–2 CPU, 1–3 GiB) owned by a ReplicaSet: several claims' worth
/// of work for one provisioning pass.
pub fn pending(pods: usize) -> World {
    let w = World::new(WorldConfig { interruption_multiplier: 0.0, ..WorldConfig::default() });
    {
        let mut s = w.lock();
        s.kube.nodepools.push(NodePool::new("default", "default"));
        s.kube.nodeclasses.push(NodeClass { name: "default".into(), ..NodeClass::default() });
        for i in 0..pods {
            let cpu = [250, 500, 1000, 2000][i % 4];
            let mut p = Pod::new("shop", &format!("web-{i}"), Resources::new(cpu, (1 + (i as i64 % 3)) * GIB));
            p.owner = OwnerKind::ReplicaSet;
            s.create_pod(p, None, None);
        }
        s.settle();
    }
    w
}
