//! The event loop over virtual time.
//!
//! The world runs its own happenings (boots, interruptions, pods finishing); the driver adds what
//! the scenario's timeline does and calls the autoscaler where it would run:
//! - Dovetail: the provisioner when the doorbell batching window closes ([`window`]), the
//!   interruption function on batches of up to 10 interruption-queue messages (EventBridge events
//!   and delayed resumes) as they become visible, the sweeper every minute; failed messages come
//!   back after the visibility timeout.
//! - Cluster Autoscaler: its scan loop every `scanInterval` ([`crate::baseline`]).
//!
//! Time jumps from one thing to the next, so a quiet day costs nothing and a busy one costs what
//! the decisions cost.

pub mod functions;
mod record;
pub mod window;

pub use record::{Run, Sample, CLUSTER_COST_LIMIT};

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use dovetail_core::catalog::CapacityType;
use dovetail_core::decision::Decision;
use dovetail_core::model::LIMIT_COST;
use dovetail_core::reconcile::QueueMessage;
use dovetail_core::time::Time;

use crate::baseline::ClusterAutoscaler;
use crate::scenario::{timeline, Action, Scenario};
use crate::world::{JobSpec, State, Workload, World};
use functions::Functions;
use window::Window;

/// Runs a future whose every await is already ready — the in-memory ports' futures are — to
/// completion without an async runtime.
///
/// # Panics
/// If the future is not ready at once: something awaited real I/O or a timer, which the
/// simulation never does.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a simulated port returned a future that is not ready"),
    }
}

/// The sweeper's schedule (EventBridge Scheduler's finest rate).
pub const SWEEP_EVERY: Duration = Duration::from_secs(60);
/// How often the report's time series is sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(60);
/// The interruption function's SQS batch size.
pub const INTERRUPTION_BATCH: usize = 10;

/// Who decides capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Policy {
    Dovetail,
    ClusterAutoscaler,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::Dovetail => "dovetail",
            Policy::ClusterAutoscaler => "cluster-autoscaler",
        }
    }
}

/// Receives each decision: when, which function (`provisioner`, `interruption`, `sweeper`), what.
pub type DecisionSink<'a> = &'a mut dyn FnMut(Time, &str, &Decision);

/// How to run a scenario.
pub struct Options<'a> {
    pub policy: Policy,
    /// Overrides the scenario's duration.
    pub duration: Option<Duration>,
    /// Overrides the scenario's seed.
    pub seed: Option<u64>,
    /// Called with the fraction of virtual time done, at every sample.
    pub progress: Option<&'a mut dyn FnMut(f64)>,
    /// Called with every decision Dovetail's functions make (when, which function, what and
    /// why), in order: the simulation's explanation of itself.
    pub decisions: Option<DecisionSink<'a>>,
}

impl Options<'_> {
    pub fn new(policy: Policy) -> Self {
        Options { policy, duration: None, seed: None, progress: None, decisions: None }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(
        "scenario {0} has no clusterAutoscaler section: --compare cluster-autoscaler needs its node groups \
         (instance types, capacity type, sizes)"
    )]
    NoNodeGroups(String),
}

enum Autoscaler {
    Dovetail { functions: Functions, window: Window, held: Vec<crate::world::QueueMessage>, next_sweep: Time },
    ClusterAutoscaler { ca: ClusterAutoscaler, next_scan: Time },
}

/// Runs a scenario under one policy and returns what happened.
pub fn run(scenario: &Scenario, mut opts: Options<'_>) -> Result<Run, RunError> {
    let duration = opts.duration.unwrap_or(scenario.duration);
    let mut config = scenario.world.clone();
    if let Some(seed) = opts.seed {
        config.seed = seed;
    }
    let seed = config.seed;
    let start = config.start;
    let end = start.plus(duration);
    let world = World::new(config);
    populate(&mut world.lock(), scenario, opts.policy);

    let mut autoscaler = match opts.policy {
        Policy::Dovetail => Autoscaler::Dovetail {
            functions: {
                let mut f = Functions::new(&world, scenario.cost_limit);
                f.log = opts.decisions.is_some().then(Vec::new);
                f
            },
            window: Window::default(),
            held: Vec::new(),
            next_sweep: start.plus(SWEEP_EVERY),
        },
        Policy::ClusterAutoscaler => {
            let config =
                scenario.cluster_autoscaler.clone().ok_or_else(|| RunError::NoNodeGroups(scenario.name.clone()))?;
            Autoscaler::ClusterAutoscaler { ca: ClusterAutoscaler::new(config), next_scan: start }
        }
    };

    let events = timeline::expand(&scenario.timeline, start, duration);
    let mut next_event = 0;
    let mut jobs_submitted: BTreeMap<String, usize> = BTreeMap::new();
    let mut next_sample = start;
    let mut samples = Vec::new();
    let mut same_instant = 0u32;

    loop {
        let now = world.now();
        {
            let mut s = world.lock();
            while let Some((_, action)) = events.get(next_event).filter(|(at, _)| start.plus(*at) <= now) {
                apply(&mut s, scenario, action, &mut jobs_submitted);
                next_event += 1;
            }
            s.settle();
        }
        match &mut autoscaler {
            Autoscaler::Dovetail { functions, window, held, next_sweep } => {
                dovetail_turn(&world, functions, window, held, next_sweep, now);
                if let (Some(log), Some(sink)) = (functions.log.as_mut(), opts.decisions.as_mut()) {
                    for (t, function, d) in log.drain(..) {
                        sink(t, function, &d);
                    }
                }
            }
            Autoscaler::ClusterAutoscaler { ca, next_scan } => {
                {
                    // Nothing consumes the forwarder's or EventBridge's messages without Dovetail.
                    let mut s = world.lock();
                    s.queues.doorbells.receive(now, usize::MAX);
                    s.queues.interruptions.receive(now, usize::MAX);
                }
                if now >= *next_scan {
                    ca.scan(&world);
                    *next_scan = next_scan.plus(ca.config().scan_interval);
                }
            }
        }
        if now >= next_sample {
            samples.push(sample(&world.lock(), start));
            next_sample = next_sample.plus(SAMPLE_EVERY);
            if let Some(p) = opts.progress.as_mut() {
                p(now.since(start).as_secs_f64() / duration.as_secs_f64());
            }
        }
        if now >= end {
            break;
        }

        let mut next = end.min(next_sample);
        if let Some((at, _)) = events.get(next_event) {
            next = next.min(start.plus(*at));
        }
        {
            let s = world.lock();
            for t in [s.next_happening(), s.queues.doorbells.next_visible(), s.queues.interruptions.next_visible()]
                .into_iter()
                .flatten()
            {
                next = next.min(t);
            }
        }
        match &autoscaler {
            Autoscaler::Dovetail { window, next_sweep, .. } => {
                next = next.min(*next_sweep);
                if let Some(t) = window.closes_at() {
                    next = next.min(t);
                }
            }
            Autoscaler::ClusterAutoscaler { next_scan, .. } => next = next.min(*next_scan),
        }
        // Work that keeps scheduling more work at the same instant would never let time move:
        // after a while, the next round waits a millisecond.
        if next <= now {
            same_instant += 1;
            if same_instant > 100 {
                next = now.plus(Duration::from_millis(1));
                same_instant = 0;
            }
        } else {
            same_instant = 0;
        }
        world.advance(next.max(now));
    }

    let s = world.lock();
    let now = s.now;
    let (tally, baseline) = match autoscaler {
        Autoscaler::Dovetail { functions, .. } => (Some(functions.tally), None),
        Autoscaler::ClusterAutoscaler { ca, .. } => (None, Some(ca.tally)),
    };
    Ok(Run {
        policy: opts.policy,
        scenario: scenario.name.clone(),
        description: scenario.description.clone(),
        seed,
        start,
        duration,
        samples,
        instances: s.instance_records(),
        stats: s.stats.clone(),
        still_pending_ms: s
            .kube
            .unbound()
            .filter(|p| !p.pod.is_daemon())
            .map(|p| now.since(p.created_at()).as_millis() as u64)
            .collect(),
        functions: tally,
        baseline,
        events: s.kube.event_counts.clone(),
        dead_letters: (s.queues.doorbells.dead.len() + s.queues.interruptions.dead.len()) as u64,
        duplicates: s.queues.doorbells.duplicates + s.queues.interruptions.duplicates,
        claim_conflicts: s.store.conflicts,
        cost_limits: cost_limits(scenario),
        reservation_hours: s.config.reservations.iter().map(|r| r.hours_within(start, now)).fold(0.0, |a, b| a + b),
    })
}

/// The scenario's cost limits in dollars per hour: each NodePool's, by name, and the cluster-wide
/// one under [`CLUSTER_COST_LIMIT`].
fn cost_limits(scenario: &Scenario) -> BTreeMap<String, f64> {
    let dollars = |micros: i64| micros as f64 / 1e6;
    let mut out: BTreeMap<String, f64> = scenario
        .cluster
        .nodepools
        .iter()
        .filter_map(|p| Some((p.name.clone(), dollars(*p.limits.get(LIMIT_COST)?))))
        .collect();
    if let Some(limit) = scenario.cost_limit {
        out.insert(CLUSTER_COST_LIMIT.to_string(), dollars(limit));
    }
    out
}

/// The functions' turn at `now`: doorbells into the window, the provisioner when it closes, the
/// interruption function on whatever is visible, the sweeper on its schedule.
fn dovetail_turn(
    world: &World,
    functions: &mut Functions,
    window: &mut Window,
    held: &mut Vec<crate::world::QueueMessage>,
    next_sweep: &mut Time,
    now: Time,
) {
    let arrived = world.lock().queues.doorbells.receive(now, usize::MAX);
    for _ in &arrived {
        window.ring(now);
    }
    held.extend(arrived);
    if let Some(n) = window.close_if_due(now) {
        if let Err(e) = functions.provision(n) {
            let mut s = world.lock();
            for m in held.drain(..) {
                s.queues.doorbells.fail(now, m, &e.to_string());
            }
        }
        held.clear();
    }
    // Everything visible now, in batches (messages the function itself sends with no delay are
    // picked up at this instant too, within the bound).
    for _ in 0..1_000 {
        let batch = world.lock().queues.interruptions.receive(now, INTERRUPTION_BATCH);
        if batch.is_empty() {
            break;
        }
        let messages: Vec<QueueMessage> =
            batch.iter().map(|m| QueueMessage { id: m.id.clone(), body: m.body.clone() }).collect();
        let failed = functions.interrupt(&messages);
        let mut s = world.lock();
        for m in batch.into_iter().filter(|m| failed.contains(&m.id)) {
            s.queues.interruptions.fail(now, m, "reported failed by the interruption function");
        }
    }
    if now >= *next_sweep {
        // A failed sweep is simply the next minute's work.
        let _ = functions.sweep();
        *next_sweep = next_sweep.plus(SWEEP_EVERY);
    }
}

/// Puts the scenario's cluster into the world at the start.
fn populate(s: &mut State, scenario: &Scenario, policy: Policy) {
    let c = &scenario.cluster;
    if policy == Policy::Dovetail {
        s.kube.nodepools = c.nodepools.clone();
        s.kube.nodeclasses = c.nodeclasses.clone();
    }
    // NodeOverlays describe the account's prices: a Savings Plan discounts the bill whoever
    // launches, so the baseline's bill reads them too (nothing else of it does).
    s.kube.overlays = c.overlays.clone();
    s.kube.daemonsets = c.daemonsets.clone();
    s.kube.pdbs = c.pdbs.clone();
    s.kube.namespaces = c.namespaces.clone();
    for (key, r) in &c.replicas {
        s.add_workload(key, Workload::replicas(r.kind, r.template.clone(), r.replicas));
    }
    for p in &c.pods {
        s.create_pod(p.clone(), None, None);
    }
}

/// Carries out one timeline action.
fn apply(s: &mut State, scenario: &Scenario, action: &Action, submitted: &mut BTreeMap<String, usize>) {
    match action {
        Action::Scale { workload, replicas } => {
            s.scale(workload, *replicas);
        }
        Action::Submit(sub) => {
            let c = &scenario.cluster;
            let template = match c.jobs.get(&sub.job) {
                Some(j) if !sub.cron => &j.template,
                _ => match c.cron_jobs.get(&sub.job) {
                    Some(cron) => &cron.job.template,
                    None => return,
                },
            };
            for _ in 0..sub.count {
                let name = if sub.cron {
                    // The CronJob controller names a run after its scheduled minute.
                    format!("{}-{}", template.name, s.now.millis() / 60_000)
                } else {
                    let n = submitted.entry(sub.job.clone()).or_default();
                    *n += 1;
                    format!("{}-{n}", template.name)
                };
                let spec = JobSpec {
                    parallelism: sub.parallelism,
                    completions: sub.completions,
                    duration: sub.duration,
                    duration_max: sub.duration_max,
                    succeeded: 0,
                    submitted_at: s.now,
                    finished_at: None,
                };
                s.submit_job(template, &name, spec);
            }
        }
        Action::ReleaseAmi => s.cloud.ami_release += 1,
    }
}

/// The state of things at one instant, for the time series.
fn sample(s: &State, start: Time) -> Sample {
    let now = s.now;
    let mut out = Sample { at_s: now.since(start).as_secs(), ..Sample::default() };
    for i in s.cloud.instances.values() {
        let hours = i.ended_at.unwrap_or(now).since(i.instance.launched_at).as_secs_f64() / 3600.0;
        out.cost_total += i.price * hours;
        if i.ended_at.is_some() {
            continue;
        }
        match i.capacity_type {
            CapacityType::Spot => out.nodes_spot += 1,
            // Reserved instances are on-demand ones run in a reservation: the series counts
            // them with on-demand nodes (the report's savings section tells them apart).
            CapacityType::OnDemand | CapacityType::Reserved => out.nodes_on_demand += 1,
        }
        out.cost_per_hour += i.price;
        *out.groups.entry(i.group.clone()).or_default() += 1;
        *out.group_cost.entry(i.group.clone()).or_default() += i.price;
    }
    out.pending = s.kube.unbound().filter(|p| !p.pod.is_daemon()).count() as u32;
    let (mut cpu, mut mem, mut cpu_alloc, mut mem_alloc) = (0i64, 0i64, 0i64, 0i64);
    for n in s.kube.nodes.values().filter(|n| n.node.ready) {
        cpu_alloc += n.node.allocatable.cpu;
        mem_alloc += n.node.allocatable.memory;
        for p in n.pods.iter().filter_map(|uid| s.kube.pods.get(uid)) {
            cpu += p.pod.requests.cpu;
            mem += p.pod.requests.memory;
        }
    }
    if cpu_alloc > 0 {
        out.cpu_allocated = cpu as f64 / cpu_alloc as f64;
        out.memory_allocated = mem as f64 / mem_alloc.max(1) as f64;
    }
    out
}
