//! Dovetail's functions, where the Lambdas would run: the same `Reconciler` the provisioner,
//! interruption and sweeper Lambdas call, bound to the world's ports.

use std::collections::BTreeMap;

use dovetail_core::decision::Decision;
use dovetail_core::reconcile::ports::PortResult;
use dovetail_core::reconcile::{Batch, Ports, QueueMessage, Reconciler, Report, Settings};
use dovetail_core::time::Time;

use crate::block_on;
use crate::world::{SimClock, SimCloud, SimKube, SimQueue, SimStore, World};

/// Errors kept word for word in a run's record (all are counted).
const ERRORS_KEPT: usize = 20;

/// What the functions did over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub provision_invocations: u64,
    pub interrupt_invocations: u64,
    pub sweep_invocations: u64,
    pub doorbells: u64,
    pub interruption_messages: u64,
    /// Messages reported failed (redelivered after the visibility timeout).
    pub failed_messages: u64,
    /// Actions carried out, by kind (`Launch`, `Evict`, `TerminateInstance`, …).
    pub actions: BTreeMap<String, u64>,
    pub errors: u64,
    /// The first errors, with when they happened.
    pub first_errors: Vec<(Time, String)>,
}

impl Tally {
    fn record(&mut self, now: Time, report: &Report) {
        for d in &report.decisions {
            if let Some(a) = &d.action {
                *self.actions.entry(a.kind().to_string()).or_default() += 1;
            }
        }
        self.errors(now, report.errors.iter().cloned());
    }

    fn errors(&mut self, now: Time, errors: impl Iterator<Item = String>) {
        for e in errors {
            self.errors += 1;
            if self.first_errors.len() < ERRORS_KEPT {
                self.first_errors.push((now, e));
            }
        }
    }
}

/// The three functions over one world.
pub struct Functions {
    reconciler: Reconciler<SimKube, SimCloud, SimStore, SimQueue, SimClock>,
    world: World,
    pub tally: Tally,
    /// Every decision with when and which function made it, when asked for (`Some`); the driver
    /// hands them on after each invocation.
    pub log: Option<Vec<(Time, &'static str, Decision)>>,
}

impl Functions {
    /// The functions with the cluster-wide `cost_limit` (micro-dollars per hour) they would read
    /// from `DOVETAIL_COST_LIMIT`.
    pub fn new(world: &World, cost_limit: Option<i64>) -> Functions {
        let p = world.ports();
        let cluster = world.lock().config.cluster.clone();
        let ports = Ports { kube: p.kube, cloud: p.cloud, store: p.store, queue: p.queue, clock: p.clock };
        let settings = Settings { cost_limit, ..Settings::new(&cluster, "dovetail-simulator") };
        Functions {
            reconciler: Reconciler::new(ports, settings),
            world: world.clone(),
            tally: Tally::default(),
            log: None,
        }
    }

    /// The provisioner, for a batch of `doorbells`; `Err` fails the batch (redelivered).
    pub fn provision(&mut self, doorbells: usize) -> PortResult<()> {
        self.tally.provision_invocations += 1;
        self.tally.doorbells += doorbells as u64;
        let result = block_on(self.reconciler.provision());
        self.finish("provisioner", result)
    }

    /// The interruption function on a batch; returns the ids of the messages that failed.
    pub fn interrupt(&mut self, messages: &[QueueMessage]) -> Vec<String> {
        self.tally.interrupt_invocations += 1;
        self.tally.interruption_messages += messages.len() as u64;
        let Batch { failed, report } = block_on(self.reconciler.interrupt(messages));
        let now = self.world.now();
        self.tally.record(now, &report);
        self.keep("interruption", now, &report);
        self.tally.failed_messages += failed.len() as u64;
        self.world.lock().settle();
        failed
    }

    /// The sweeper (EventBridge Scheduler, every minute).
    pub fn sweep(&mut self) -> PortResult<()> {
        self.tally.sweep_invocations += 1;
        let result = block_on(self.reconciler.sweep());
        self.finish("sweeper", result)
    }

    fn keep(&mut self, function: &'static str, now: Time, report: &Report) {
        if let Some(log) = self.log.as_mut() {
            log.extend(report.decisions.iter().map(|d| (now, function, d.clone())));
        }
    }

    fn finish(&mut self, function: &'static str, result: PortResult<Report>) -> PortResult<()> {
        let now = self.world.now();
        let out = match result {
            Ok(report) => {
                self.tally.record(now, &report);
                self.keep(function, now, &report);
                Ok(())
            }
            Err(e) => {
                self.tally.errors(now, std::iter::once(e.to_string()));
                Err(e)
            }
        };
        // kube-scheduler reacts to what the function did (taints removed, pods evicted).
        self.world.lock().settle();
        out
    }
}
