//! Crashes injected into any `Cloud` and `Store`: the exactly-once tests wrap the simulator's
//! in-memory ports and the AWS adapters (against moto) alike, stop an invocation at its n-th port
//! call, and count the CreateFleet calls that succeeded for each claim.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dovetail_core::catalog::{Catalog, OfferingKey};
use dovetail_core::cluster::{Instance, InstanceQuery, ResolvedClass};
use dovetail_core::model::NodeClass;
use dovetail_core::nodeclaim::{Launch, NodeClaim};
use dovetail_core::reconcile::ports::{Cloud, LaunchOutcome, LaunchRequest, Lease, PortError, PortResult, Store};
use dovetail_core::time::Time;

/// A crash after `budget` port calls: that call and every later one fail until [`Faults::disarm`].
#[derive(Debug, Default)]
pub struct Faults {
    budget: AtomicI64,
    calls: AtomicI64,
    launches: Mutex<BTreeMap<String, u32>>,
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

    pub fn disarm(&self) {
        self.budget.store(i64::MAX, Ordering::SeqCst);
    }

    /// Port calls made so far (failed ones included).
    pub fn calls(&self) -> i64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// Successful CreateFleet calls per claim.
    pub fn launches(&self) -> BTreeMap<String, u32> {
        self.launches.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn call(&self) -> PortResult<()> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.budget.fetch_sub(1, Ordering::SeqCst) <= 0 {
            self.budget.store(0, Ordering::SeqCst);
            return Err(PortError::Unavailable("injected crash".into()));
        }
        Ok(())
    }

    fn launched(&self, claim: &str) {
        *self.launches.lock().unwrap_or_else(|e| e.into_inner()).entry(claim.to_string()).or_default() += 1;
    }
}

/// `Cloud` with crashes.
pub struct FaultyCloud<C>(pub C, pub Arc<Faults>);
/// `Store` with crashes.
pub struct FaultyStore<S>(pub S, pub Arc<Faults>);

impl<C: Cloud> Cloud for FaultyCloud<C> {
    async fn catalog(&self) -> PortResult<Arc<Catalog>> {
        self.1.call()?;
        self.0.catalog().await
    }
    async fn instances(&self) -> PortResult<Vec<Instance>> {
        self.1.call()?;
        self.0.instances().await
    }
    async fn instances_of(&self, query: &InstanceQuery) -> PortResult<Vec<Instance>> {
        self.1.call()?;
        self.0.instances_of(query).await
    }
    async fn resolve(&self, class: &NodeClass) -> PortResult<ResolvedClass> {
        self.1.call()?;
        self.0.resolve(class).await
    }
    async fn launch(&self, request: &LaunchRequest) -> PortResult<LaunchOutcome> {
        self.1.call()?;
        let outcome = self.0.launch(request).await;
        if let Ok(LaunchOutcome::Launched(_)) = &outcome {
            self.1.launched(&request.claim.name);
        }
        outcome
    }
    async fn find_launched(&self, claim: &str) -> PortResult<Option<Launch>> {
        self.1.call()?;
        self.0.find_launched(claim).await
    }
    async fn terminate(&self, instance_id: &str) -> PortResult<()> {
        self.1.call()?;
        self.0.terminate(instance_id).await
    }
}

impl<S: Store> Store for FaultyStore<S> {
    async fn claims(&self) -> PortResult<Vec<NodeClaim>> {
        self.1.call()?;
        self.0.claims().await
    }
    async fn claim(&self, name: &str) -> PortResult<Option<NodeClaim>> {
        self.1.call()?;
        self.0.claim(name).await
    }
    async fn put_claim(&self, claim: &NodeClaim) -> PortResult<()> {
        self.1.call()?;
        self.0.put_claim(claim).await
    }
    async fn delete_claim(&self, name: &str, version: u64) -> PortResult<()> {
        self.1.call()?;
        self.0.delete_claim(name, version).await
    }
    async fn unavailable(&self, now: Time) -> PortResult<BTreeSet<OfferingKey>> {
        self.1.call()?;
        self.0.unavailable(now).await
    }
    async fn mark_unavailable(&self, offering: &OfferingKey, until: Time) -> PortResult<()> {
        self.1.call()?;
        self.0.mark_unavailable(offering, until).await
    }
    async fn lease(&self, holder: &str, now: Time, ttl: Duration) -> PortResult<Lease> {
        self.1.call()?;
        self.0.lease(holder, now, ttl).await
    }
    async fn release(&self, holder: &str, now: Time, ttl: Duration) -> PortResult<bool> {
        self.1.call()?;
        self.0.release(holder, now, ttl).await
    }
}
