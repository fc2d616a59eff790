//! Chaos: one world driven through a seeded schedule of faults at every port, then left to catch up
//! with the faults gone, then checked: the fault soak (`cargo run --release -p dovetail-sim
//! --example fault-soak`) runs thousands of seeds, the tests a few hundred.
//!
//! The world: a pool, pending pods (how many is the seed's) under a PodDisruptionBudget that lets
//! one be unavailable at a time, spot warnings for two of the nodes
//! at minute 3, most pods gone at minute 5 (consolidation's work), all under faults for ten
//! minutes of virtual time — a doorbell every 15 s, every interruption-queue message handled as
//! it becomes visible (failed ones back after the visibility timeout, to the dead-letter queue
//! after five receives), a sweep every minute — then ten more minutes without faults.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use dovetail_core::nodeclaim::Phase;
use dovetail_core::reconcile::{Ports, Reconciler, Settings};

use crate::faults::{Faults, FaultyCloud, FaultyKube, FaultyQueue, FaultyStore};
use crate::world::World;
use crate::{block_on, fixtures, invariants};

/// What one seed's run met and left.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub seed: u64,
    /// Faults injected, by kind.
    pub injected: BTreeMap<&'static str, u64>,
    /// Port calls, faulted or not.
    pub calls: i64,
    /// The most port calls one invocation made: retries are bounded when this is.
    pub most_calls_in_an_invocation: i64,
    /// Messages in the interruption queue's dead-letter queue, with why.
    pub dead_letters: Vec<String>,
    /// Claims there ever were, spot warnings sent, and claims ended: the work the run made.
    pub claims: usize,
    pub warnings: usize,
    pub ended: usize,
    /// Pods removed past their budget at a drain's deadline (allowed then; checked).
    pub pdb_overrides: usize,
    /// Every invariant broken (empty: all held).
    pub violations: Vec<String>,
}

/// Port calls one invocation may make in these worlds (at most 20 pods and their nodes): far
/// above what any makes (a few dozen), far below a retry loop without a bound.
pub const CALLS_PER_INVOCATION: i64 = 2_000;

/// Runs seed `seed` with each port call faulted with probability `rate`.
pub fn run(seed: u64, rate: f64) -> Outcome {
    let mut rng = SmallRng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let pods = rng.random_range(4..=20);
    let w = fixtures::pending(pods);
    // The pods under a budget that lets one of them be unavailable at a time.
    fixtures::under_budget(&w, 1);
    let faults = Faults::seeded(seed, rate);
    let p = w.ports();
    let ports = Ports {
        kube: FaultyKube(p.kube, faults.clone()),
        cloud: FaultyCloud(p.cloud, faults.clone()),
        store: FaultyStore(p.store, faults.clone()),
        queue: FaultyQueue(p.queue, faults.clone()),
        clock: p.clock,
    };
    let r = Reconciler::new(ports, Settings::new("sim", "chaos"));
    let mut most = 0;
    let mut warned: Vec<(String, String)> = Vec::new();
    for tick in 0..40u64 {
        w.advance(w.now().plus(Duration::from_secs(15)));
        if tick == 12 {
            warned = warn(&w, &mut rng);
        }
        if tick == 20 {
            let mut s = w.lock();
            for i in 0..pods {
                if rng.random_bool(0.7) {
                    s.stop_pod(&format!("shop/web-{i}"), 0);
                }
            }
        }
        let before = faults.calls();
        let _ = block_on(r.provision());
        most = most.max(faults.calls() - before);
        for calls in invariants::deliver_interruptions(&w, &r, || faults.calls()) {
            most = most.max(calls);
        }
        if tick % 4 == 3 {
            let before = faults.calls();
            let _ = block_on(r.sweep());
            most = most.max(faults.calls() - before);
        }
        w.lock().settle();
    }
    faults.disarm();
    invariants::catch_up(&w, &r, 10);

    let mut violations = invariants::violations(&w, &faults);
    let s = w.lock();
    let dead_letters: Vec<String> =
        s.queues.interruptions.dead.iter().map(|(m, why)| format!("{}: {why}", m.body)).collect();
    for (m, why) in &s.queues.interruptions.dead {
        if why.trim().is_empty() {
            violations.push(format!("message {} is in the dead-letter queue without a reason", m.id));
        }
    }
    if !s.queues.interruptions.is_empty() {
        violations.push(format!("{} interruption messages never handled", s.queues.interruptions.len()));
    }
    for (claim, instance) in &warned {
        let handled = s.store.claims.get(claim).is_none_or(|c| c.disruption.is_some() || c.phase == Phase::Terminated);
        let dead = s.queues.interruptions.dead.iter().any(|(m, _)| m.body.contains(instance.as_str()));
        if !handled && !dead {
            violations.push(format!("the spot warning for {claim} ({instance}) was lost"));
        }
    }
    if most > CALLS_PER_INVOCATION {
        violations.push(format!("an invocation made {most} port calls (bound {CALLS_PER_INVOCATION})"));
    }
    Outcome {
        seed,
        injected: faults.injected(),
        calls: faults.calls(),
        most_calls_in_an_invocation: most,
        dead_letters,
        claims: s.store.claims.len(),
        warnings: warned.len(),
        ended: s.store.claims.values().filter(|c| c.phase == Phase::Terminated).count(),
        pdb_overrides: s.kube.pdb_overrides.len(),
        violations,
    }
}

/// Spot warnings (EC2's, reclaim included) for up to two initialized claims' instances; returns
/// the claims warned, with their instances.
fn warn(w: &World, rng: &mut SmallRng) -> Vec<(String, String)> {
    let mut s = w.lock();
    let mut victims: Vec<(String, String)> = s
        .store
        .claims
        .values()
        .filter(|c| c.phase == Phase::Initialized)
        .filter_map(|c| Some((c.name.clone(), c.launch.as_ref()?.instance_id.clone())))
        .collect();
    let keep = rng.random_range(0..=2).min(victims.len());
    victims.truncate(keep);
    for (_, instance) in &victims {
        s.spot_warning(instance);
    }
    victims
}
