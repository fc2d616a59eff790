//! The instance profile made for an EC2NodeClass `role`, over the in-memory world, through the
//! reconciler the functions run: made when the class resolves and launched with; kept while the
//! deleted class's instances run; deleted by the sweep once none is left. A class whose profile
//! cannot be made launches nothing and says why; other classes carry on.

// Shared by the simulator's test binaries, each using a part of it.
#[allow(dead_code)]
mod common;

use std::sync::Arc;

use common::{later, reconciler};
use dovetail_core::catalog::Catalog;
use dovetail_core::cluster::{Instance, InstanceQuery, ResolvedClass};
use dovetail_core::decision::Action;
use dovetail_core::instance_profile;
use dovetail_core::labels;
use dovetail_core::model::{NodeClass, NodePool, OwnerKind, Pod};
use dovetail_core::nodeclaim::Launch;
use dovetail_core::reconcile::ports::{Cloud, LaunchOutcome, LaunchRequest, PortResult};
use dovetail_core::reconcile::{Ports, Reconciler, Settings};
use dovetail_core::requirements::Requirement;
use dovetail_core::resources::Resources;
use dovetail_sim::block_on;
use dovetail_sim::world::{ReplicaKind, SimCloud, SimInstance, Workload, World, WorldConfig};

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

/// The world's cloud, but no instance profile can be made for class `default`'s role (as when the
/// role does not exist, or the functions may not pass it).
struct NoProfile(SimCloud);

const REFUSED: &str = "spec.role: role NodeRole does not exist (instance profile sim_0000000000000000)";

impl Cloud for NoProfile {
    async fn catalog(&self) -> PortResult<Arc<Catalog>> {
        self.0.catalog().await
    }
    async fn instances(&self) -> PortResult<Vec<Instance>> {
        self.0.instances().await
    }
    async fn instances_of(&self, query: &InstanceQuery) -> PortResult<Vec<Instance>> {
        self.0.instances_of(query).await
    }
    async fn resolve(&self, class: &NodeClass) -> PortResult<ResolvedClass> {
        let mut r = self.0.resolve(class).await?;
        if class.name == "default" {
            r.instance_profile = None;
            r.instance_profile_problem = Some(REFUSED.into());
        }
        Ok(r)
    }
    async fn instance_profiles(&self) -> PortResult<Vec<instance_profile::Listed>> {
        self.0.instance_profiles().await
    }
    async fn delete_instance_profile(&self, name: &str) -> PortResult<()> {
        self.0.delete_instance_profile(name).await
    }
    async fn launch(&self, request: &LaunchRequest) -> PortResult<LaunchOutcome> {
        self.0.launch(request).await
    }
    async fn find_launched(&self, claim: &str) -> PortResult<Option<Launch>> {
        self.0.find_launched(claim).await
    }
    async fn terminate(&self, instance_id: &str) -> PortResult<()> {
        self.0.terminate(instance_id).await
    }
}

#[test]
fn a_class_without_its_instance_profile_launches_nothing_says_why_and_others_carry_on() {
    let w = World::new(WorldConfig { interruption_multiplier: 0.0, ..WorldConfig::default() });
    {
        let mut s = w.lock();
        for (pool, class) in [("web", "default"), ("batch", "other")] {
            s.kube.nodepools.push(NodePool::new(pool, class));
            let class = NodeClass { name: class.into(), role: Some("NodeRole".into()), ..NodeClass::default() };
            s.kube.nodeclasses.push(class);
        }
        let mut web = Pod::new("shop", "web", Resources::new(1500, 2 << 30));
        web.owner = OwnerKind::ReplicaSet;
        web.node_affinity = vec![[Requirement::single(labels::NODEPOOL, "web")].into_iter().collect()];
        s.add_workload("shop/web", Workload::replicas(ReplicaKind::Deployment, web, 2));
        let mut batch = Pod::new("jobs", "batch", Resources::new(1500, 2 << 30));
        batch.owner = OwnerKind::ReplicaSet;
        batch.node_affinity = vec![[Requirement::single(labels::NODEPOOL, "batch")].into_iter().collect()];
        s.add_workload("jobs/batch", Workload::replicas(ReplicaKind::Deployment, batch, 2));
        s.settle();
    }
    let p = w.ports();
    let ports = Ports { kube: p.kube, cloud: NoProfile(p.cloud), store: p.store, queue: p.queue, clock: p.clock };
    let r = Reconciler::new(ports, Settings::new("sim", "sweeper"));
    later(&w, 30);
    let report = block_on(r.provision()).expect("a provisioning pass");
    // The pool of a class without its profile is left out of planning, as Karpenter leaves a
    // NodePool whose class is not Ready: nothing is planned for it, so nothing fails to launch, and
    // its pods' Event says why.
    assert!(report.launch_failures.values().all(|n| *n == 0), "{:?}", report.launch_failures);
    let waiting = report
        .decisions
        .iter()
        .find_map(|d| match &d.action {
            Some(Action::Event { object, reason, message })
                if object.starts_with("Pod/shop/") && reason == "FailedScheduling" =>
            {
                Some(message.clone())
            }
            _ => None,
        })
        .expect("a FailedScheduling Event on a web pod");
    assert!(
        waiting.contains("NodePool web is not used while its EC2NodeClass default is not ready")
            && waiting.contains(REFUSED),
        "{waiting}"
    );
    later(&w, 60);
    block_on(r.sweep()).expect("a sweep");

    let s = w.lock();
    let pool_of = |c: &SimInstance| c.instance.tags.get(labels::NODEPOOL).cloned().unwrap_or_default();
    let pools: Vec<String> = s.cloud.instances.values().map(pool_of).collect();
    assert!(!pools.is_empty() && pools.iter().all(|p| p == "batch"), "only the other class launched: {pools:?}");
    // The class's status and an Event say why; its pool is not ready because of it.
    let status = s.kube.class_status["default"].resolved.clone().expect("resolved otherwise");
    assert_eq!(status.instance_profile_problem.as_deref(), Some(REFUSED));
    let event = s.kube.events.iter().find(|e| e.object == "EC2NodeClass/default").expect("an Event on the class");
    assert_eq!((event.reason.as_str(), event.message.as_str()), ("InstanceProfileFailed", REFUSED));
    let pool = s.kube.pool_status["web"].node_class.clone().unwrap_err();
    assert!(pool.contains(REFUSED), "{pool}");
    assert_eq!(s.kube.pool_status["batch"].node_class, Ok(()));
}
