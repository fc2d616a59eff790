//! What must hold after any run, however the world misbehaved during it: the checks the
//! exactly-once, deadline and fault tests make once the functions have caught up.

use std::time::Duration;

use dovetail_core::nodeclaim::{NodeClaim, Phase};
use dovetail_core::reconcile::ports::{Clock, Cloud, Kube, Queue, Store};
use dovetail_core::reconcile::{QueueMessage, Reconciler};

use crate::block_on;
use crate::faults::Faults;
use crate::world::World;

/// Lets the functions catch up for `minutes` of virtual time with `r`, as they would in AWS
/// with nothing failing any more: every 15 s a provisioning pass (a doorbell) and every visible
/// interruption-queue message handled (resume messages included; a failed one comes back after
/// the visibility timeout), every minute a sweep.
pub fn catch_up<K: Kube, C: Cloud, S: Store, Q: Queue, T: Clock>(
    w: &World,
    r: &Reconciler<K, C, S, Q, T>,
    minutes: u64,
) {
    for tick in 0..minutes * 4 {
        w.advance(w.now().plus(Duration::from_secs(15)));
        let _ = block_on(r.provision());
        deliver_interruptions(w, r, || 0);
        if tick % 4 == 3 {
            let _ = block_on(r.sweep());
        }
        w.lock().settle();
    }
}

/// Hands every visible interruption-queue message to `r`, ten at a time as the event source
/// does; failed ones go back to the queue (visible again after the visibility timeout, to the
/// dead-letter queue after too many receives). Returns how many `calls` each invocation made.
pub fn deliver_interruptions<K: Kube, C: Cloud, S: Store, Q: Queue, T: Clock>(
    w: &World,
    r: &Reconciler<K, C, S, Q, T>,
    calls: impl Fn() -> i64,
) -> Vec<i64> {
    let mut made = Vec::new();
    // Bounded: a function that keeps sending itself messages due at once must not hang a test.
    for _ in 0..100 {
        let now = w.now();
        let batch = w.lock().queues.interruptions.receive(now, 10);
        if batch.is_empty() {
            break;
        }
        let messages: Vec<QueueMessage> =
            batch.iter().map(|m| QueueMessage { id: m.id.clone(), body: m.body.clone() }).collect();
        let before = calls();
        let failed = block_on(r.interrupt(&messages)).failed;
        made.push(calls() - before);
        let mut s = w.lock();
        for m in batch.into_iter().filter(|m| failed.contains(&m.id)) {
            s.queues.interruptions.fail(now, m, "reported failed by the interruption function");
        }
        s.settle();
    }
    made
}

/// Every way the world is out of line with the invariants, one sentence each (empty: all hold):
/// - no claim had a second successful CreateFleet (as `faults` counted them);
/// - every pending or running instance has exactly one live claim, and every live claim a
///   running instance;
/// - no pod is left pending that the forwarder would report;
/// - no pod was removed past its PodDisruptionBudget before its drain's deadline.
pub fn violations(w: &World, faults: &Faults) -> Vec<String> {
    let mut out = Vec::new();
    for (claim, n) in faults.launches() {
        if n != 1 {
            out.push(format!("claim {claim} got {n} successful CreateFleet calls"));
        }
    }
    let s = w.lock();
    let live: Vec<&NodeClaim> = s.store.claims.values().filter(|c| c.phase != Phase::Terminated).collect();
    let running: Vec<&str> = s
        .cloud
        .instances
        .values()
        .filter(|i| matches!(i.instance.state.as_str(), "pending" | "running"))
        .map(|i| i.instance.id.as_str())
        .collect();
    for id in &running {
        let owners = live.iter().filter(|c| c.launch.as_ref().is_some_and(|l| l.instance_id == *id)).count();
        if owners != 1 {
            out.push(format!("instance {id} is owned by {owners} live claims"));
        }
    }
    for c in &live {
        match &c.launch {
            None => out.push(format!("claim {} never recorded its instance", c.name)),
            Some(l) if !running.contains(&l.instance_id.as_str()) => {
                out.push(format!("claim {} has no running instance ({})", c.name, l.instance_id))
            }
            Some(_) => {}
        }
    }
    // A budget is overridden only at the drain's deadline (a pod left then is deleted at the
    // deadline less its own grace period, so that it is gone by the deadline), as its claim had
    // it at that moment.
    for o in &s.kube.pdb_overrides {
        let deadline = o.deadline;
        let allowed = deadline.is_some_and(|d| o.at >= d.minus(Duration::from_secs(o.grace_seconds.max(0) as u64)));
        if !allowed {
            out.push(format!(
                "pod {} was removed from {} by {} at {} past its PodDisruptionBudget, before its drain's deadline ({})",
                o.pod,
                o.node,
                o.by,
                o.at,
                deadline.map_or("none".to_string(), |d| d.to_string())
            ));
        }
    }
    let pending: Vec<String> = s.kube.provisionable().map(|p| format!("{}/{}", p.pod.namespace, p.pod.name)).collect();
    if !pending.is_empty() {
        out.push(format!("{} pods still pending: {}", pending.len(), pending.join(", ")));
    }
    out
}

/// Panics with every violation, naming the run (`context`).
pub fn assert_hold(w: &World, faults: &Faults, context: &str) {
    let v = violations(w, faults);
    assert!(v.is_empty(), "{context}:\n  {}", v.join("\n  "));
}
