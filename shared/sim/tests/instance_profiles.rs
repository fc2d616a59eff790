//! The instance profile made for an EC2NodeClass `role`, over the in-memory world, through the
//! reconciler the functions run: made when the class resolves and launched with; kept while the
//! deleted class's instances run; deleted by the sweep once none is left.

// Shared by the simulator's test binaries, each using a part of it.
#[allow(dead_code)]
mod common;

use common::{later, reconciler};
use dovetail_core::instance_profile;
use dovetail_core::model::{NodeClass, NodePool, OwnerKind, Pod};
use dovetail_core::reconcile::Settings;
use dovetail_core::resources::Resources;
use dovetail_sim::block_on;
use dovetail_sim::world::{ReplicaKind, Workload, World, WorldConfig};

#[test]
fn a_roles_profile_is_made_kept_while_used_and_deleted_after_its_class() {
    let w = World::new(WorldConfig { interruption_multiplier: 0.0, ..WorldConfig::default() });
    let profile = {
        let mut s = w.lock();
        s.kube.nodepools.push(NodePool::new("default", "default"));
        let class = NodeClass { name: "default".into(), role: Some("NodeRole".into()), ..NodeClass::default() };
        s.kube.nodeclasses.push(class);
        let mut web = Pod::new("shop", "web", Resources::new(1500, 2 << 30));
        web.owner = OwnerKind::ReplicaSet;
        s.add_workload("shop/web", Workload::replicas(ReplicaKind::Deployment, web, 4));
        s.settle();
        instance_profile::name(&s.config.region, &s.config.cluster, "default")
    };
    let r = reconciler(&w, Settings::new("sim", "sweeper"));
    for _ in 0..8 {
        later(&w, 30);
        block_on(r.provision()).expect("a clean provisioning pass");
    }
    later(&w, 60);
    block_on(r.sweep()).expect("a clean sweep");
    {
        let s = w.lock();
        assert!(s.cloud.profiles.contains_key(&profile), "made for the role: {:?}", s.cloud.profiles);
        assert!(s.cloud.instances.values().any(|i| i.instance.state == "running"), "and launched with");
        let status = &s.kube.class_status["default"];
        let resolved = status.resolved.as_ref().expect("resolved");
        assert_eq!(resolved.instance_profile.as_deref(), Some(profile.as_str()));
    }

    // Pool and class deleted: the profile stays while any of their instances is left.
    {
        let mut s = w.lock();
        s.kube.nodepools[0].deleting = true;
        s.kube.nodeclasses[0].deleting = true;
    }
    for _ in 0..60 {
        later(&w, 60);
        block_on(r.sweep()).expect("a clean sweep");
        let s = w.lock();
        let live = s.cloud.instances.values().filter(|i| i.instance.state != "terminated").count();
        if !s.cloud.profiles.contains_key(&profile) {
            assert_eq!(live, 0, "deleted while {live} instances of its class were left");
            assert!(s.kube.nodeclasses.is_empty(), "deleted while its class was there");
            return;
        }
    }
    panic!("the profile of the deleted class was never deleted: {:?}", w.lock().cloud.profiles);
}
