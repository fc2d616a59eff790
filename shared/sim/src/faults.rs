//! Faults injected into every port the reconcilers use — `Cloud` (EC2), `Store` (DynamoDB),
//! `Kube` (the API server) and `Queue` (SQS) — over the simulator's in-memory ports and the AWS
//! adapters (against moto) alike.
//!
//! Two modes, on one [`Faults`]:
//! - **a crash** after `n` calls ([`Faults::crash_after`]): that call and every later one fail,
//!   as when a function dies there; the exactly-once tests crash at every call in turn;
//! - **a seeded schedule** ([`Faults::seeded`]): each call meets, with the given probability, one
//!   of the faults its service really answers with — throttling, a 5xx, a timeout or a connection
//!   reset before the request took effect, a reset *after* it took effect (the call was carried
//!   out, the answer lost), a conditional-check failure, an API server 409/410/429/500, and for
//!   CreateFleet an `InsufficientInstanceCapacity` answer. [`crate::chaos`] drives a whole world
//!   through such a schedule and checks the invariants afterwards.
//!
//! Whatever the mode, the successful CreateFleet calls are counted per claim: a second one for a
//! claim is the bug the exactly-once design rules out.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use dovetail_core::catalog::{Catalog, OfferingKey};
use dovetail_core::cluster::{Instance, InstanceQuery, ResolvedClass};
use dovetail_core::instance_profile;
use dovetail_core::model::{NodeClass, Taint};
use dovetail_core::nodeclaim::drain::EvictionResult;
use dovetail_core::nodeclaim::object::ClaimObject;
use dovetail_core::nodeclaim::{Launch, NodeClaim};
use dovetail_core::reconcile::ports::Clock;
use dovetail_core::reconcile::ports::{
    ClassStatus, Cloud, Kube, KubeState, LaunchOutcome, LaunchRequest, Lease, OverlayStatus, PoolStatus, PortError,
    PortResult, Queue, Store,
};
use dovetail_core::reconcile::{Ports, Reconciler, Settings};
use dovetail_core::time::Time;

use crate::world::{SimClock, SimCloud, SimKube, SimQueue, SimStore, World};

/// Which service a call goes to: the faults it can meet are that service's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Service {
    Ec2,
    Dynamo,
    Kube,
    Sqs,
}

/// What kind of call: a read is never applied half-way; a write can take effect and still fail
/// (the answer lost); a conditional write can lose its condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Read,
    Write,
    ConditionalWrite,
    Launch,
}

/// What a call meets.
#[derive(Debug, Clone, PartialEq)]
enum Fate {
    /// Carried out, answered.
    Go,
    /// Fails before taking effect.
    Fail(PortError),
    /// Takes effect, then fails: the connection reset on the way back.
    FailAfter(PortError),
    /// CreateFleet answers that the cheapest offering has no capacity.
    NoCapacity,
}

#[derive(Debug)]
struct Schedule {
    rng: SmallRng,
    rate: f64,
}

/// A crash after `budget` port calls, or a seeded schedule of faults (see the module).
#[derive(Debug, Default)]
pub struct Faults {
    budget: AtomicI64,
    calls: AtomicI64,
    launches: Mutex<BTreeMap<String, u32>>,
    schedule: Mutex<Option<Schedule>>,
    injected: Mutex<BTreeMap<&'static str, u64>>,
}

impl Faults {
    pub fn crash_after(n: i64) -> Arc<Faults> {
        let f = Faults::default();
        f.budget.store(n, Ordering::SeqCst);
        Arc::new(f)
    }

    pub fn never() -> Arc<Faults> {
        Faults::crash_after(i64::MAX)
    }

    /// Each call meets a fault with probability `rate`, chosen by `seed`.
    pub fn seeded(seed: u64, rate: f64) -> Arc<Faults> {
        let f = Faults::never();
        *lock(&f.schedule) = Some(Schedule { rng: SmallRng::seed_from_u64(seed), rate });
        f
    }

    /// No more faults, of either mode.
    pub fn disarm(&self) {
        self.budget.store(i64::MAX, Ordering::SeqCst);
        *lock(&self.schedule) = None;
    }

    /// Port calls made so far (failed ones included).
    pub fn calls(&self) -> i64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// Successful CreateFleet calls per claim.
    pub fn launches(&self) -> BTreeMap<String, u32> {
        lock(&self.launches).clone()
    }

    /// Faults injected so far, by kind.
    pub fn injected(&self) -> BTreeMap<&'static str, u64> {
        lock(&self.injected).clone()
    }

    fn fate(&self, service: Service, call: Call) -> Fate {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.budget.fetch_sub(1, Ordering::SeqCst) <= 0 {
            self.budget.store(0, Ordering::SeqCst);
            return Fate::Fail(PortError::Unavailable("injected crash".into()));
        }
        let mut schedule = lock(&self.schedule);
        let Some(s) = schedule.as_mut() else { return Fate::Go };
        if !s.rng.random_bool(s.rate) {
            return Fate::Go;
        }
        let kinds = kinds(service, call);
        let (kind, fate) = kinds[s.rng.random_range(0..kinds.len())];
        drop(schedule);
        *lock(&self.injected).entry(kind).or_default() += 1;
        let e = |conflict: bool| {
            let message = format!("injected {kind}");
            if conflict {
                PortError::Conflict(message)
            } else {
                PortError::Unavailable(message)
            }
        };
        match fate {
            Kind::Before => Fate::Fail(e(false)),
            Kind::Conflict => Fate::Fail(e(true)),
            Kind::After => Fate::FailAfter(e(false)),
            Kind::NoCapacity => Fate::NoCapacity,
        }
    }

    fn launched(&self, claim: &str) {
        *lock(&self.launches).entry(claim.to_string()).or_default() += 1;
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Before,
    Conflict,
    After,
    NoCapacity,
}

/// The faults a call to `service` can really meet, named as the service names them.
fn kinds(service: Service, call: Call) -> Vec<(&'static str, Kind)> {
    let mut k: Vec<(&'static str, Kind)> = match service {
        Service::Ec2 => vec![
            ("RequestLimitExceeded", Kind::Before),
            ("InternalError (500)", Kind::Before),
            ("ServiceUnavailable (503)", Kind::Before),
        ],
        Service::Dynamo => vec![
            ("ProvisionedThroughputExceededException", Kind::Before),
            ("ThrottlingException", Kind::Before),
            ("InternalServerError (500)", Kind::Before),
        ],
        Service::Kube => vec![
            ("429 Too Many Requests", Kind::Before),
            ("500 Internal Server Error", Kind::Before),
            ("410 Gone (watch expired)", Kind::Before),
        ],
        Service::Sqs => vec![("ThrottlingException (SQS)", Kind::Before), ("InternalError (SQS 500)", Kind::Before)],
    };
    k.push(("timeout before the request took effect", Kind::Before));
    k.push(("connection reset before the request took effect", Kind::Before));
    if call != Call::Read {
        k.push(("connection reset after the request took effect", Kind::After));
    }
    match (service, call) {
        (Service::Dynamo, Call::ConditionalWrite) => k.push(("ConditionalCheckFailedException", Kind::Conflict)),
        (Service::Kube, Call::Write | Call::ConditionalWrite) => k.push(("409 Conflict", Kind::Conflict)),
        (Service::Ec2, Call::Launch) => k.push(("InsufficientInstanceCapacity", Kind::NoCapacity)),
        _ => {}
    }
    k
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Carries out `f` as its fate says.
async fn meet<T>(fate: Fate, f: impl std::future::Future<Output = PortResult<T>>) -> PortResult<T> {
    match fate {
        Fate::Go | Fate::NoCapacity => f.await,
        Fate::Fail(e) => Err(e),
        Fate::FailAfter(e) => {
            let _ = f.await;
            Err(e)
        }
    }
}

/// The functions' reconciler over the world `w`, named `holder`, its cloud and store calls
/// through `faults` (which count launches, and fail as `faults` says), its clock made by `clock`
/// from the world's.
pub fn crashable<T: Clock>(
    w: &World,
    faults: &Arc<Faults>,
    holder: &str,
    clock: impl FnOnce(SimClock) -> T,
) -> Reconciler<SimKube, FaultyCloud<SimCloud>, FaultyStore<SimStore>, SimQueue, T> {
    let p = w.ports();
    let ports = Ports {
        kube: p.kube,
        cloud: FaultyCloud(p.cloud, faults.clone()),
        store: FaultyStore(p.store, faults.clone()),
        queue: p.queue,
        clock: clock(p.clock),
    };
    Reconciler::new(ports, Settings::new("sim", holder))
}

/// `Cloud` with faults.
pub struct FaultyCloud<C>(pub C, pub Arc<Faults>);
/// `Store` with faults.
pub struct FaultyStore<S>(pub S, pub Arc<Faults>);
/// `Kube` with faults.
pub struct FaultyKube<K>(pub K, pub Arc<Faults>);
/// `Queue` with faults.
pub struct FaultyQueue<Q>(pub Q, pub Arc<Faults>);

impl<C: Cloud> Cloud for FaultyCloud<C> {
    async fn catalog(&self) -> PortResult<Arc<Catalog>> {
        meet(self.1.fate(Service::Ec2, Call::Read), self.0.catalog()).await
    }
    async fn instances(&self) -> PortResult<Vec<Instance>> {
        meet(self.1.fate(Service::Ec2, Call::Read), self.0.instances()).await
    }
    async fn instances_of(&self, query: &InstanceQuery) -> PortResult<Vec<Instance>> {
        meet(self.1.fate(Service::Ec2, Call::Read), self.0.instances_of(query)).await
    }
    async fn resolve(&self, class: &NodeClass) -> PortResult<ResolvedClass> {
        meet(self.1.fate(Service::Ec2, Call::Read), self.0.resolve(class)).await
    }
    async fn launch(&self, request: &LaunchRequest) -> PortResult<LaunchOutcome> {
        let fate = self.1.fate(Service::Ec2, Call::Launch);
        match (&fate, request.offers.first()) {
            (Fate::Fail(e), _) => return Err(e.clone()),
            (Fate::NoCapacity, Some(offer)) => {
                let message = format!("InsufficientInstanceCapacity (injected) for {}", offer.instance_type);
                return Ok(LaunchOutcome::NoCapacity { offerings: vec![offer.key()], message });
            }
            _ => {}
        }
        let outcome = self.0.launch(request).await;
        if let Ok(LaunchOutcome::Launched(_)) = &outcome {
            self.1.launched(&request.claim.name);
        }
        match fate {
            Fate::FailAfter(e) => Err(e),
            _ => outcome,
        }
    }
    async fn instance_profiles(&self) -> PortResult<Vec<instance_profile::Listed>> {
        meet(self.1.fate(Service::Ec2, Call::Read), self.0.instance_profiles()).await
    }
    async fn delete_instance_profile(&self, name: &str) -> PortResult<()> {
        meet(self.1.fate(Service::Ec2, Call::Write), self.0.delete_instance_profile(name)).await
    }
    async fn find_launched(&self, claim: &str) -> PortResult<Option<Launch>> {
        meet(self.1.fate(Service::Ec2, Call::Read), self.0.find_launched(claim)).await
    }
    async fn terminate(&self, instance_id: &str) -> PortResult<()> {
        meet(self.1.fate(Service::Ec2, Call::Write), self.0.terminate(instance_id)).await
    }
}

impl<S: Store> Store for FaultyStore<S> {
    async fn claims(&self) -> PortResult<Vec<NodeClaim>> {
        meet(self.1.fate(Service::Dynamo, Call::Read), self.0.claims()).await
    }
    async fn claim(&self, name: &str) -> PortResult<Option<NodeClaim>> {
        meet(self.1.fate(Service::Dynamo, Call::Read), self.0.claim(name)).await
    }
    async fn put_claim(&self, claim: &NodeClaim) -> PortResult<()> {
        meet(self.1.fate(Service::Dynamo, Call::ConditionalWrite), self.0.put_claim(claim)).await
    }
    async fn delete_claim(&self, name: &str, version: u64) -> PortResult<()> {
        meet(self.1.fate(Service::Dynamo, Call::ConditionalWrite), self.0.delete_claim(name, version)).await
    }
    async fn unavailable(&self, now: Time) -> PortResult<BTreeSet<OfferingKey>> {
        meet(self.1.fate(Service::Dynamo, Call::Read), self.0.unavailable(now)).await
    }
    async fn mark_unavailable(&self, offering: &OfferingKey, until: Time) -> PortResult<()> {
        meet(self.1.fate(Service::Dynamo, Call::Write), self.0.mark_unavailable(offering, until)).await
    }
    async fn lease(&self, holder: &str, now: Time, ttl: Duration) -> PortResult<Lease> {
        meet(self.1.fate(Service::Dynamo, Call::ConditionalWrite), self.0.lease(holder, now, ttl)).await
    }
    async fn release(&self, holder: &str, now: Time, ttl: Duration) -> PortResult<bool> {
        meet(self.1.fate(Service::Dynamo, Call::ConditionalWrite), self.0.release(holder, now, ttl)).await
    }
}

impl<K: Kube> Kube for FaultyKube<K> {
    async fn read(&self) -> PortResult<KubeState> {
        meet(self.1.fate(Service::Kube, Call::Read), self.0.read()).await
    }
    async fn taint(&self, node: &str, taint: &Taint) -> PortResult<()> {
        meet(self.1.fate(Service::Kube, Call::Write), self.0.taint(node, taint)).await
    }
    async fn remove_taint(&self, node: &str, key: &str) -> PortResult<()> {
        meet(self.1.fate(Service::Kube, Call::Write), self.0.remove_taint(node, key)).await
    }
    async fn adopt_node(&self, node: &str, claim: &str, labels: &BTreeMap<String, String>) -> PortResult<()> {
        meet(self.1.fate(Service::Kube, Call::Write), self.0.adopt_node(node, claim, labels)).await
    }
    async fn add_finalizer(&self, object: &str) -> PortResult<()> {
        meet(self.1.fate(Service::Kube, Call::ConditionalWrite), self.0.add_finalizer(object)).await
    }
    async fn remove_finalizer(&self, object: &str) -> PortResult<()> {
        meet(self.1.fate(Service::Kube, Call::ConditionalWrite), self.0.remove_finalizer(object)).await
    }
    async fn evict(&self, namespace: &str, name: &str) -> PortResult<EvictionResult> {
        meet(self.1.fate(Service::Kube, Call::Write), self.0.evict(namespace, name)).await
    }
    async fn delete_pod(&self, namespace: &str, name: &str, grace_seconds: i64) -> PortResult<()> {
        meet(self.1.fate(Service::Kube, Call::Write), self.0.delete_pod(namespace, name, grace_seconds)).await
    }
    async fn delete_node(&self, node: &str) -> PortResult<()> {
        meet(self.1.fate(Service::Kube, Call::Write), self.0.delete_node(node)).await
    }
    async fn write_claim_object(&self, object: &ClaimObject) -> PortResult<()> {
        meet(self.1.fate(Service::Kube, Call::Write), self.0.write_claim_object(object)).await
    }
    async fn delete_claim_object(&self, name: &str) -> PortResult<()> {
        meet(self.1.fate(Service::Kube, Call::Write), self.0.delete_claim_object(name)).await
    }
    async fn event(&self, object: &str, reason: &str, message: &str) -> PortResult<()> {
        meet(self.1.fate(Service::Kube, Call::Write), self.0.event(object, reason, message)).await
    }
    async fn pool_status(&self, status: &PoolStatus) -> PortResult<()> {
        meet(self.1.fate(Service::Kube, Call::Write), self.0.pool_status(status)).await
    }
    async fn class_status(&self, status: &ClassStatus) -> PortResult<()> {
        meet(self.1.fate(Service::Kube, Call::Write), self.0.class_status(status)).await
    }
    async fn overlay_status(&self, status: &OverlayStatus) -> PortResult<()> {
        meet(self.1.fate(Service::Kube, Call::Write), self.0.overlay_status(status)).await
    }
}

impl<Q: Queue> Queue for FaultyQueue<Q> {
    async fn requeue(&self, claim: &str, after: Duration) -> PortResult<()> {
        meet(self.1.fate(Service::Sqs, Call::Write), self.0.requeue(claim, after)).await
    }
}
