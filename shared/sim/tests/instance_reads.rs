//! Which instances each function describes, over the in-memory world: the sweeper every instance
//! of the cluster; the provisioner only those of the claims it registers; the interruption
//! function only those its messages name. And a claim whose instance a read did not ask for is
//! never judged by it, however its instance fares.

// Shared by the simulator's test binaries, each using a part of it.
#[allow(dead_code)]
mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use common::later;
use dovetail_core::catalog::Catalog;
use dovetail_core::cluster::{Instance, InstanceQuery, ResolvedClass};
use dovetail_core::labels;
use dovetail_core::model::{NodeClass, NodePool, OwnerKind, Pod};
use dovetail_core::nodeclaim::{Launch, NodeClaim, Phase};
use dovetail_core::reconcile::ports::{Cloud, LaunchOutcome, LaunchRequest, PortResult};
use dovetail_core::reconcile::{Ports, QueueMessage, Reconciler, Settings};
use dovetail_core::requirements::{Operator, Requirement};
use dovetail_core::resources::Resources;
use dovetail_sim::block_on;
use dovetail_sim::fixtures::spot_warning;
use dovetail_sim::world::{SimClock, SimCloud, SimKube, SimQueue, SimStore, State, World, WorldConfig};

const GIB: i64 = 1 << 30;

/// What the reconciler asked of the cloud's instances.
#[derive(Debug, Default)]
struct Reads {
    /// Full reads (`Cloud::instances`).
    full: usize,
    /// Per-event reads (`Cloud::instances_of`), in order.
    queries: Vec<InstanceQuery>,
}

/// The simulator's cloud, its instance reads recorded.
struct Recording(SimCloud, Arc<Mutex<Reads>>);

impl Cloud for Recording {
    async fn catalog(&self) -> PortResult<Arc<Catalog>> {
        self.0.catalog().await
    }
    async fn instances(&self) -> PortResult<Vec<Instance>> {
        self.1.lock().unwrap().full += 1;
        self.0.instances().await
    }
    async fn instances_of(&self, query: &InstanceQuery) -> PortResult<Vec<Instance>> {
        self.1.lock().unwrap().queries.push(query.clone());
        self.0.instances_of(query).await
    }
    async fn resolve(&self, class: &NodeClass) -> PortResult<ResolvedClass> {
        self.0.resolve(class).await
    }
    async fn launch(&self, request: &LaunchRequest) -> PortResult<LaunchOutcome> {
        self.0.launch(request).await
    }
    async fn instance_profiles(&self) -> PortResult<Vec<dovetail_core::instance_profile::Listed>> {
        self.0.instance_profiles().await
    }
    async fn delete_instance_profile(&self, name: &str) -> PortResult<()> {
        self.0.delete_instance_profile(name).await
    }
    async fn find_launched(&self, claim: &str) -> PortResult<Option<Launch>> {
        self.0.find_launched(claim).await
    }
    async fn terminate(&self, instance_id: &str) -> PortResult<()> {
        self.0.terminate(instance_id).await
    }
}

type Recorded = Reconciler<SimKube, Recording, SimStore, SimQueue, SimClock>;

fn recorded(w: &World) -> (Recorded, Arc<Mutex<Reads>>) {
    let reads = Arc::new(Mutex::new(Reads::default()));
    let p = w.ports();
    let ports = Ports {
        kube: p.kube,
        cloud: Recording(p.cloud, reads.clone()),
        store: p.store,
        queue: p.queue,
        clock: p.clock,
    };
    (Reconciler::new(ports, Settings::new("sim", "recorded")), reads)
}

/// A quiet world (no spot interruptions) with one pool of m5.large nodes and `pods` pending pods.
fn world(pods: usize) -> World {
    let w = World::new(WorldConfig { interruption_multiplier: 0.0, ..WorldConfig::default() });
    {
        let mut s = w.lock();
        // Small nodes, so that the pods make a cluster of many claims.
        let mut pool = NodePool::new("default", "default");
        pool.requirements.add(Requirement::new(labels::INSTANCE_TYPE, Operator::In, &["m5.large"]).unwrap());
        s.kube.nodepools.push(pool);
        s.kube.nodeclasses.push(NodeClass { name: "default".into(), ..NodeClass::default() });
        for i in 0..pods {
            add_pod(&mut s, &format!("web-{i}"), [250, 500, 1000, 1500][i % 4]);
        }
        s.settle();
    }
    w
}

fn add_pod(s: &mut State, name: &str, cpu: i64) {
    let mut p = Pod::new("shop", name, Resources::new(cpu, GIB));
    p.owner = OwnerKind::ReplicaSet;
    s.create_pod(p, None, None);
}

/// Launched, booted, registered and Initialized: the provisioner runs while the world moves.
fn settle(w: &World, r: &Recorded) {
    for _ in 0..8 {
        later(w, 30);
        block_on(r.provision()).expect("a provisioning pass");
    }
    let s = w.lock();
    let live: Vec<&NodeClaim> = s.store.claims.values().filter(|c| c.phase != Phase::Terminated).collect();
    assert!(live.len() >= 3, "a cluster of several claims: {}", live.len());
    assert!(
        live.iter().all(|c| c.phase == Phase::Initialized),
        "{:?}",
        live.iter().map(|c| c.phase).collect::<Vec<_>>()
    );
}

fn claims(w: &World) -> Vec<NodeClaim> {
    w.lock().store.claims.values().cloned().collect()
}

fn instance_ids(claims: &[NodeClaim], phase: Phase) -> BTreeSet<String> {
    claims
        .iter()
        .filter(|c| c.phase == phase)
        .filter_map(|c| c.launch.as_ref())
        .map(|l| l.instance_id.clone())
        .collect()
}

fn take(reads: &Mutex<Reads>) -> Reads {
    std::mem::take(&mut *reads.lock().unwrap())
}

#[test]
fn the_provisioner_describes_only_the_instances_of_the_claims_it_registers() {
    let w = world(40);
    let (r, reads) = recorded(&w);

    // The first pass: no claim yet, so no instance to ask for.
    block_on(r.provision()).unwrap();
    let first = take(&reads);
    assert_eq!(first.full, 0);
    assert!(!first.queries.is_empty() && first.queries.iter().all(InstanceQuery::is_empty), "{first:?}");

    // Claims launched, instances not yet registered: their instances, and only theirs.
    let launched = instance_ids(&claims(&w), Phase::Launched);
    assert!(!launched.is_empty());
    block_on(r.provision()).unwrap();
    let second = take(&reads);
    assert_eq!(second.full, 0);
    for q in &second.queries {
        assert_eq!(q.ids, launched, "{q:?}");
        assert!(q.claims.is_empty(), "{q:?}");
    }

    // Every claim Initialized: a doorbell for one more pod asks EC2 for nothing.
    settle(&w, &r);
    let before = claims(&w).len();
    {
        let mut s = w.lock();
        add_pod(&mut s, "late", 1800);
        s.settle();
    }
    take(&reads);
    block_on(r.provision()).unwrap();
    let third = take(&reads);
    assert_eq!(third.full, 0);
    assert!(third.queries.iter().all(InstanceQuery::is_empty), "{third:?}");
    assert!(claims(&w).len() > before, "the pod got capacity");
}

fn resume(claim: &str) -> String {
    serde_json::json!({ "resume": claim }).to_string()
}

#[test]
fn interruption_describes_the_instances_its_messages_name_and_judges_no_other() {
    let w = world(40);
    let (r, reads) = recorded(&w);
    settle(&w, &r);
    let all = claims(&w);
    let (victim, resumed, bystander) = (&all[0], &all[1], &all[2]);
    let id = |c: &NodeClaim| c.launch.as_ref().unwrap().instance_id.clone();

    // The resumed claim's instance and a bystander's are terminated behind Dovetail's back.
    {
        let mut s = w.lock();
        s.terminate_instance(&id(resumed));
        s.terminate_instance(&id(bystander));
    }
    later(&w, 180);
    take(&reads);
    let evictions_before = w.lock().stats.evictions;
    let batch = vec![
        QueueMessage { id: "warning".into(), body: spot_warning(&id(victim)) },
        QueueMessage { id: "resume".into(), body: resume(&resumed.name) },
        QueueMessage { id: "stranger".into(), body: spot_warning("i-0fff0000aaaa11112") },
    ];
    let out = block_on(r.interrupt(&batch));
    assert!(out.failed.is_empty(), "{:?}", out.report.errors);
    let read = take(&reads);
    assert_eq!(read.full, 0, "no full describe");
    assert_eq!(read.queries.len(), 1, "{read:?}");
    let asked: BTreeSet<String> = [id(victim), id(resumed), "i-0fff0000aaaa11112".to_string()].into();
    assert_eq!(read.queries[0].ids, asked);
    assert!(read.queries[0].claims.is_empty());

    let after: Vec<NodeClaim> = claims(&w);
    let now = |c: &NodeClaim| after.iter().find(|x| x.name == c.name).unwrap().clone();
    assert!(now(victim).disruption.is_some(), "the warned claim is being disrupted");
    // Its drain began in the same invocation: node tainted, pods asked to leave.
    assert_eq!(now(victim).phase, Phase::Draining);
    assert!(w.lock().stats.evictions > evictions_before, "{:#?}", out.report.decisions);
    assert_eq!(now(resumed).phase, Phase::Terminated, "the resumed claim's instance was described: gone");
    assert_eq!(now(bystander), *bystander, "the bystander's instance was not described: untouched");
    assert!(out.report.decisions.iter().any(|d| d.why == "ignored: instance i-0fff0000aaaa11112 is not Dovetail's"));

    // The sweep describes everything, and finds the bystander's instance gone.
    block_on(r.sweep()).unwrap();
    let swept = take(&reads);
    assert!(swept.full >= 1 && swept.queries.is_empty(), "{swept:?}");
    assert_eq!(claims(&w).iter().find(|c| c.name == bystander.name).unwrap().phase, Phase::Terminated);
}
