//! The simulated world: one state shared by every in-memory port, and the things that happen in
//! it on their own (instances finish booting, EC2 reclaims spot capacity, pods finish, kubelets
//! go quiet, kube-scheduler binds pods).
//!
//! [`World`] is a cheap handle (`Arc<Mutex<State>>`); [`World::ports`] hands out the five port
//! implementations over it. Port futures complete immediately (each call locks, acts, unlocks),
//! so a no-op waker drives them (see [`crate::block_on`]). The driver moves time forward with
//! [`World::advance`], which runs every scheduled happening in time order, then lets
//! kube-scheduler bind what it can ([`State::settle`]).

mod agenda;
mod binder;
mod clock;
mod cloud;
mod kube;
mod queue;
mod reservations;
mod stats;
mod store;
mod workloads;

pub use agenda::Happening;
pub use clock::SimClock;
pub use cloud::{
    registration, subnet_of, CapacityWindow, CloudState, LaunchSpec, Registration, SimCloud, SimInstance, GROUP_TAG,
    SECURITY_GROUP,
};
pub use kube::{daemon_pods, IntOrPercent, KubeEvent, KubeSim, PdbOverride, PdbSpec, SimKube, SimNode, SimPod};
pub use queue::{QueueMessage, QueueState, SimQueue, SqsQueue};
pub use reservations::{SimReservation, MATCH_CRITERIA};
pub use stats::{InstanceRecord, Stats};
pub use store::{Lease, SimStore, StoreState};
pub use workloads::{JobSpec, ReplicaKind, Workload};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use dovetail_core::catalog::{Catalog, ReservationKind, Zone, BLOCK_EXPIRY_LEAD};
use dovetail_core::time::Time;

use agenda::Agenda;

/// How the world behaves: everything a scenario can tune about AWS and the cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct WorldConfig {
    pub seed: u64,
    /// Virtual time at the start of the run.
    pub start: Time,
    pub cluster: String,
    pub region: String,
    pub account: String,
    pub zones: Vec<Zone>,
    /// Instances finish booting (kubelet registered, Ready) after a uniform sample in this range.
    pub boot_min: Duration,
    pub boot_max: Duration,
    /// Multiplies every spot type's Spot Advisor interruption rate (0 turns interruptions off).
    pub interruption_multiplier: f64,
    /// Share of spot interruptions that a rebalance recommendation precedes.
    pub rebalance_share: f64,
    /// Offerings that fail with InsufficientInstanceCapacity during a window.
    pub capacity_windows: Vec<CapacityWindow>,
    /// Capacity reservations the account holds, listed to the classes that select them.
    pub reservations: Vec<SimReservation>,
    /// Chance that any one CreateFleet fails for capacity (on top of the windows).
    pub capacity_error_rate: f64,
    /// Chance that SQS delivers a message twice (at-least-once delivery).
    pub duplicate_rate: f64,
    /// How long after registration a node's startup taints are removed (by the agent that owns
    /// them, say a CNI daemon).
    pub startup_taint_delay: Duration,
    /// How long an evicted or deleted pod takes to stop (capped by its grace period).
    pub pod_stop: Duration,
}

impl Default for WorldConfig {
    fn default() -> Self {
        WorldConfig {
            seed: 1,
            // 2026-01-05T00:00:00Z, a Monday: cron-like timelines read naturally from midnight.
            start: Time::from_secs(1_767_571_200),
            cluster: "sim".into(),
            region: "us-east-1".into(),
            account: "123456789012".into(),
            zones: dovetail_core::catalog::DEFAULT_ZONES
                .iter()
                .map(|(name, id)| Zone { name: name.to_string(), id: id.to_string() })
                .collect(),
            boot_min: Duration::from_secs(30),
            boot_max: Duration::from_secs(60),
            interruption_multiplier: 1.0,
            rebalance_share: 0.5,
            capacity_windows: vec![],
            reservations: vec![],
            capacity_error_rate: 0.0,
            duplicate_rate: 0.0,
            startup_taint_delay: Duration::from_secs(5),
            pod_stop: Duration::from_secs(5),
        }
    }
}

/// Everything there is, in one place so that one event can touch the cloud, the cluster and the
/// queues consistently (an instance finishing its boot registers a Node and rings a doorbell).
pub struct State {
    pub now: Time,
    pub config: WorldConfig,
    pub rng: SmallRng,
    pub catalog: Arc<Catalog>,
    pub cloud: CloudState,
    pub kube: KubeSim,
    pub store: StoreState,
    pub queues: QueueState,
    pub stats: Stats,
    agenda: Agenda,
}

/// A handle on the shared world state. Clones share it.
#[derive(Clone)]
pub struct World {
    inner: Arc<Mutex<State>>,
}

/// The five port implementations, all over one [`World`].
#[derive(Clone)]
pub struct SimPorts {
    pub kube: SimKube,
    pub cloud: SimCloud,
    pub store: SimStore,
    pub queue: SimQueue,
    pub clock: SimClock,
}

impl World {
    /// An empty world (no nodes, no pods) with the catalog's types and prices offered in the
    /// configured zones.
    pub fn new(config: WorldConfig) -> World {
        let catalog = Arc::new(dovetail_core::catalog::embedded_with_zones(&config.zones));
        World::with_catalog(config, catalog)
    }

    pub fn with_catalog(config: WorldConfig, catalog: Arc<Catalog>) -> World {
        let mut state = State {
            now: config.start,
            rng: SmallRng::seed_from_u64(config.seed),
            catalog,
            cloud: CloudState::default(),
            kube: KubeSim::default(),
            store: StoreState::default(),
            queues: QueueState::default(),
            stats: Stats::default(),
            agenda: Agenda::default(),
            config,
        };
        // EC2's expiration warning for each Capacity Block that ends after the run starts, 40
        // minutes ahead (one that comes before the start was sent before the world began).
        let warnings: Vec<(Time, String)> = state
            .config
            .reservations
            .iter()
            .filter(|r| r.kind == ReservationKind::CapacityBlock)
            .filter_map(|r| Some((r.end?.minus(BLOCK_EXPIRY_LEAD), r.id.clone())))
            .filter(|(at, _)| *at >= state.now)
            .collect();
        for (at, reservation) in warnings {
            state.schedule_at(at, Happening::BlockExpiring { reservation });
        }
        World { inner: Arc::new(Mutex::new(state)) }
    }

    /// The state, for the driver, the baseline and the report. Port calls lock it too, so do not
    /// hold the guard across one.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held already failed the run; the state is still readable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn ports(&self) -> SimPorts {
        SimPorts {
            kube: SimKube(self.clone()),
            cloud: SimCloud(self.clone()),
            store: SimStore(self.clone()),
            queue: SimQueue(self.clone()),
            clock: SimClock(self.clone()),
        }
    }

    pub fn now(&self) -> Time {
        self.lock().now
    }

    /// When the next scheduled happening is due, if any.
    pub fn next_happening(&self) -> Option<Time> {
        self.lock().agenda.next_time()
    }

    /// Runs every happening due up to `to` in time order (letting kube-scheduler bind after each
    /// instant), then sets the clock to `to`.
    pub fn advance(&self, to: Time) {
        self.lock().advance(to);
    }
}

impl State {
    pub fn advance(&mut self, to: Time) {
        while let Some(t) = self.agenda.next_time().filter(|t| *t <= to) {
            self.now = self.now.max(t);
            while let Some(h) = self.agenda.pop_due(t) {
                self.happen(h);
            }
            self.settle();
        }
        self.now = self.now.max(to);
        self.settle();
    }

    /// When the next scheduled happening is due, if any.
    pub fn next_happening(&self) -> Option<Time> {
        self.agenda.next_time()
    }

    /// Schedules a happening `after` from now.
    pub fn schedule(&mut self, after: Duration, h: Happening) {
        let at = self.now.plus(after);
        self.agenda.push(at, h);
    }

    pub fn schedule_at(&mut self, at: Time, h: Happening) {
        self.agenda.push(at.max(self.now), h);
    }

    fn happen(&mut self, h: Happening) {
        match h {
            Happening::Booted { instance } => self.booted(&instance),
            Happening::StartupTaintsGone { node } => self.kube.remove_startup_taints(&node),
            Happening::RebalanceRecommendation { instance } => self.rebalance_recommendation(&instance),
            Happening::SpotWarning { instance } => self.spot_warning(&instance),
            Happening::SpotReclaim { instance } => self.spot_reclaim(&instance),
            Happening::BlockExpiring { reservation } => self.block_expiring(&reservation),
            Happening::BlockEnded { instance } => self.block_ended(&instance),
            Happening::InstanceGone { instance } => self.instance_gone(&instance),
            Happening::NodeLost { node } => self.node_lost(&node),
            Happening::PodStopped { uid } => self.pod_stopped(uid),
            Happening::PodSucceeded { uid } => self.pod_succeeded(uid),
        }
    }

    /// kube-scheduler's turn: bind pending pods to nodes with room, mark the rest Unschedulable
    /// and ring the doorbell for each newly unschedulable pod (the forwarder's webhook).
    pub fn settle(&mut self) {
        let newly = binder::bind(self);
        for key in newly {
            let body = serde_json::json!({"pod": key, "unschedulableAt": self.now.to_string()}).to_string();
            self.send_doorbell(body);
        }
    }

    fn send_doorbell(&mut self, body: String) {
        let dup = self.config.duplicate_rate;
        let now = self.now;
        self.queues.doorbells.send(now, body, Duration::ZERO, dup, &mut self.rng);
    }

    /// Sends an EventBridge event (or a delayed resume body) to the interruption queue.
    pub fn send_interruption(&mut self, body: String, delay: Duration) {
        let dup = self.config.duplicate_rate;
        let now = self.now;
        self.queues.interruptions.send(now, body, delay, dup, &mut self.rng);
    }
}

#[cfg(test)]
mod tests;
