//! What the simulator's integration tests share: messages as AWS sends them, moving the world's
//! clock, and a provisioned world with the reconciler the Lambdas run over it.

use std::time::Duration;

use dovetail_core::model::{NodeClass, NodePool, OwnerKind, Pod};
use dovetail_core::reconcile::{Ports, Reconciler, Settings};
use dovetail_core::resources::Resources;
use dovetail_sim::block_on;
use dovetail_sim::world::{ReplicaKind, SimClock, SimCloud, SimKube, SimQueue, SimStore, Workload, World, WorldConfig};

/// The reconciler over the world's ports, as the functions build it over theirs.
pub type Plain = Reconciler<SimKube, SimCloud, SimStore, SimQueue, SimClock>;

pub fn reconciler(w: &World, settings: Settings) -> Plain {
    let p = w.ports();
    let ports = Ports { kube: p.kube, cloud: p.cloud, store: p.store, queue: p.queue, clock: p.clock };
    Reconciler::new(ports, settings)
}

/// A quiet world (no interruptions) with `pool`, its EC2NodeClass `default`, and `replicas` pods
/// of 1.5 CPU under a Deployment — a controller, so pods lost with a node come back pending —
/// provisioned and running (eight provisioning passes, 30 s apart).
pub fn provisioned(pool: NodePool, replicas: usize) -> World {
    provisioned_with(pool, replicas, Settings::new("sim", "sweeper"))
}

/// [`provisioned`], by a reconciler with `settings`.
pub fn provisioned_with(pool: NodePool, replicas: usize, settings: Settings) -> World {
    let w = World::new(WorldConfig { interruption_multiplier: 0.0, ..WorldConfig::default() });
    {
        let mut s = w.lock();
        s.kube.nodepools.push(pool);
        s.kube.nodeclasses.push(NodeClass { name: "default".into(), ..NodeClass::default() });
        let mut web = Pod::new("shop", "web", Resources::new(1500, 2 << 30));
        web.owner = OwnerKind::ReplicaSet;
        s.add_workload("shop/web", Workload::replicas(ReplicaKind::Deployment, web, replicas));
        s.settle();
    }
    let r = reconciler(&w, settings);
    for _ in 0..8 {
        later(&w, 30);
        block_on(r.provision()).expect("a clean provisioning pass");
    }
    w
}

/// Moves the world `secs` seconds on.
pub fn later(w: &World, secs: u64) {
    w.advance(w.now().plus(Duration::from_secs(secs)));
}
