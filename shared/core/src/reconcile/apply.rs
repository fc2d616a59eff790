//! Carrying decisions out, in order, through the ports.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::ports::{Clock, Cloud, Kube, PortResult, Queue, Store};
use super::{retryable, Reconciler, Report, View};
use crate::decision::{Action, Decision};
use crate::events;
use crate::nodeclaim::drain::EvictionResult;
use crate::nodeclaim::NodeClaim;

impl<K: Kube, C: Cloud, S: Store, Q: Queue, T: Clock> Reconciler<K, C, S, Q, T> {
    /// Carries `decisions` out in order and keeps `view` in step with what was done. A failed
    /// claim write (or launch) skips the rest of that claim's actions — they were decided on a
    /// state that did not come about — while everything else goes on. Returns whether something
    /// failed that a retry could fix.
    pub(super) async fn apply(&self, decisions: Vec<Decision>, view: &mut View, report: &mut Report) -> bool {
        let decisions = events::complete(decisions, &view.cluster);
        // Events on NodeClaims wait for the pass's objects to be written: an Event needs its
        // object's uid to show in `kubectl describe`, and a replacement's object is new.
        let mut on_claims: Vec<(String, String, String)> = Vec::new();
        // Eviction answers, by claim, recorded into the claim's drain state when it is written
        // (a step's claim write comes after its evictions).
        let mut evictions: BTreeMap<String, Vec<(String, EvictionResult)>> = BTreeMap::new();
        let mut blocked: BTreeSet<String> = BTreeSet::new();
        let mut retry = false;
        // Actions not started because the invocation's deadline came first.
        let mut left = 0;
        for d in decisions {
            if d.claim.as_ref().is_some_and(|c| blocked.contains(c)) {
                report.note(d.claim.as_deref(), format!("skipped after an earlier failure: {}", d.why));
                continue;
            }
            let Some(action) = d.action.clone() else {
                report.decisions.push(d);
                continue;
            };
            if left > 0 || self.out_of_time(view.deadline, report) {
                left += 1;
                continue;
            }
            if let Action::Event { object, reason, message } = &action {
                if !self.events.admit(object, reason, message, self.ports.clock.now()) {
                    // Written less than its window ago: the sentence stays in the report.
                    report.decisions.push(Decision::note(d.claim.as_deref(), d.why));
                    continue;
                }
                if object.starts_with("NodeClaim/") {
                    on_claims.push((object.clone(), reason.clone(), message.clone()));
                    report.decisions.push(d);
                    continue;
                }
            }
            // A drain must not wait on a replacement that was never launched.
            if let Action::WriteClaim(c) = &action {
                let missing: Vec<&String> = c
                    .disruption
                    .iter()
                    .flat_map(|x| x.replacements.iter())
                    .filter(|r| blocked.contains(r.as_str()))
                    .collect();
                if !missing.is_empty() {
                    report
                        .errors
                        .push(format!("claim {} not written: replacement {:?} failed to launch", c.name, missing));
                    blocked.insert(c.name.clone());
                    retry = true;
                    continue;
                }
            }
            let claim = d.claim.clone();
            report.decisions.push(d);
            let result = self.act(&action, claim.as_deref(), &mut evictions, view, report).await;
            if let Err(e) = result {
                report.errors.push(format!("{}: {e}", describe(&action)));
                retry |= retryable(&e);
                if matches!(action, Action::WriteClaim(_) | Action::Launch(_)) {
                    blocked.extend(claim);
                }
            }
        }
        if left > 0 {
            report.note(None, format!("{left} action(s) left for the next invocation"));
        }
        self.write_objects(view, report).await;
        for (object, reason, message) in on_claims {
            if let Err(e) = self.write_event(&object, &reason, &message).await {
                report.errors.push(format!("event {reason} on {object}: {e}"));
                retry |= retryable(&e);
            }
        }
        retry
    }

    /// An Event, unless the same was written within its window (see [`crate::events::Recent`]).
    pub(super) async fn event(&self, object: &str, reason: &str, message: &str) -> PortResult<()> {
        if !self.events.admit(object, reason, message, self.ports.clock.now()) {
            return Ok(());
        }
        self.write_event(object, reason, message).await
    }

    /// Writes an admitted Event; a failed write is forgotten, so the next identical one is tried.
    async fn write_event(&self, object: &str, reason: &str, message: &str) -> PortResult<()> {
        let result = self.ports.kube.event(object, reason, message).await;
        if result.is_err() {
            self.events.forget(object, reason, message);
        }
        result
    }

    async fn act(
        &self,
        action: &Action,
        claim: Option<&str>,
        evictions: &mut BTreeMap<String, Vec<(String, EvictionResult)>>,
        view: &mut View,
        report: &mut Report,
    ) -> PortResult<()> {
        let p = &self.ports;
        match action {
            Action::Launch(planned) => self.launch_planned(planned, view, report).await,
            Action::WriteClaim(c) => {
                let mut next: NodeClaim = (**c).clone();
                if let (Some(results), Some(drain)) = (evictions.remove(&next.name), next.drain.as_mut()) {
                    let now = p.clock.now();
                    for (pod, result) in results {
                        drain.record(&pod, result, now);
                    }
                }
                let newly_disrupted = next.disruption.is_some()
                    && view.cluster.claims.iter().find(|x| x.name == next.name).is_none_or(|x| x.disruption.is_none());
                p.store.put_claim(&next).await?;
                view.record(&next);
                if let Some(d) = next.disruption.as_ref().filter(|_| newly_disrupted) {
                    *report.disruptions.entry(d.reason).or_default() += 1;
                }
                if newly_disrupted {
                    // Start the drain now rather than at the next sweep, by the caller or by a
                    // resume message; the resume chain then carries it (each step asks for the next).
                    match view.drains_to_start.as_mut() {
                        Some(started) => started.push(next.name.clone()),
                        None => p.queue.requeue(&next.name, Duration::ZERO).await?,
                    }
                }
                Ok(())
            }
            Action::DeleteClaim { name } => {
                if let Some(version) = view.cluster.claims.iter().find(|c| &c.name == name).map(|c| c.version) {
                    p.store.delete_claim(name, version).await?;
                }
                view.forget(name);
                Ok(())
            }
            Action::TaintNode { node, taint } => {
                p.kube.taint(node, taint).await?;
                if let Some(n) = view.cluster.nodes.iter_mut().find(|n| &n.name == node) {
                    if !n.taints.contains(taint) {
                        n.taints.push(taint.clone());
                    }
                }
                Ok(())
            }
            Action::AdoptNode { node, claim, labels } => {
                p.kube.adopt_node(node, claim, labels).await?;
                if let Some(n) = view.cluster.nodes.iter_mut().find(|n| &n.name == node) {
                    n.labels.extend(labels.clone());
                    n.termination_finalizer = true;
                }
                Ok(())
            }
            Action::AddFinalizer { object } => {
                p.kube.add_finalizer(object).await?;
                view.cluster.hold(object, true);
                Ok(())
            }
            Action::RemoveFinalizer { object } => {
                p.kube.remove_finalizer(object).await?;
                view.cluster.hold(object, false);
                Ok(())
            }
            Action::RemoveTaint { node, key } => {
                p.kube.remove_taint(node, key).await?;
                if let Some(n) = view.cluster.nodes.iter_mut().find(|n| &n.name == node) {
                    n.taints.retain(|t| &t.key != key);
                }
                Ok(())
            }
            Action::Evict { namespace, name } => {
                let result = p.kube.evict(namespace, name).await?;
                if let Some(claim) = claim {
                    evictions.entry(claim.to_string()).or_default().push((format!("{namespace}/{name}"), result));
                }
                Ok(())
            }
            Action::DeletePod { namespace, name, grace_period_seconds } => {
                p.kube.delete_pod(namespace, name, *grace_period_seconds).await
            }
            Action::DeleteNode { node } => {
                p.kube.delete_node(node).await?;
                view.cluster.nodes.retain(|n| &n.name != node);
                Ok(())
            }
            Action::TerminateInstance { instance_id } => p.cloud.terminate(instance_id).await,
            Action::MarkUnavailable { offering, until } => {
                p.store.mark_unavailable(offering, *until).await?;
                view.cluster.unavailable.insert(offering.clone());
                Ok(())
            }
            // Admitted by `apply` already.
            Action::Event { object, reason, message } => self.write_event(object, reason, message).await,
            Action::RequeueAfter { claim, after } => p.queue.requeue(claim, *after).await,
        }
    }
}

/// The action, in a few words, for error lines.
fn describe(action: &Action) -> String {
    match action {
        Action::Launch(p) => format!("launch {}", p.name),
        Action::WriteClaim(c) => format!("write claim {} (version {})", c.name, c.version),
        Action::DeleteClaim { name } => format!("delete claim {name}"),
        Action::TaintNode { node, taint } => format!("taint node {node} with {taint}"),
        Action::RemoveTaint { node, key } => format!("remove taint {key} from node {node}"),
        Action::AdoptNode { node, .. } => format!("adopt node {node}"),
        Action::AddFinalizer { object } => format!("add finalizer to {object}"),
        Action::RemoveFinalizer { object } => format!("remove finalizer from {object}"),
        Action::Evict { namespace, name } => format!("evict pod {namespace}/{name}"),
        Action::DeletePod { namespace, name, .. } => format!("delete pod {namespace}/{name}"),
        Action::DeleteNode { node } => format!("delete node {node}"),
        Action::TerminateInstance { instance_id } => format!("terminate instance {instance_id}"),
        Action::MarkUnavailable { offering, .. } => {
            format!("mark {} {} in {} unavailable", offering.instance_type, offering.capacity_type, offering.zone)
        }
        Action::Event { object, reason, .. } => format!("event {reason} on {object}"),
        Action::RequeueAfter { claim, .. } => format!("requeue {claim}"),
    }
}
