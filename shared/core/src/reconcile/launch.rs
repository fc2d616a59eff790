//! Exactly-once launches.
//!
//! 1. The claim intent is written create-only (`version` 0). A redelivered decision, or a second
//!    invocation planning the same replacement name, finds it there and launches nothing.
//! 2. Before each CreateFleet the claim's attempt counter is bumped with a conditional write:
//!    only the writer that wins calls the cloud, and others leave a fresh attempt alone for
//!    [`ATTEMPT_TIMEOUT`].
//! 3. A second attempt first looks for an instance tagged with the claim (a crash after
//!    CreateFleet, before the record), and CreateFleet's client token is the claim name.
//! 4. The instance is recorded on the claim (Launched). Capacity errors mark the offerings
//!    unavailable and the launch goes on with what remains (spot first, then on-demand where the
//!    claim allows it); with nothing left, the claim is deleted so its pods are planned afresh.

use std::time::Duration;

use super::ports::{Clock, Cloud, Kube, LaunchOutcome, LaunchRequest, PortError, PortResult, Queue, Store};
use super::{LaunchFailure, Reconciler, Report, View};
use crate::decision::{Action, Decision};
use crate::interruption::SPOT_UNAVAILABLE_FOR as UNAVAILABLE_FOR;
use crate::nodeclaim::{launched_labels, Launch, NodeClaim, Phase};
use crate::provisioning;
use crate::scheduler::PlannedClaim;

/// How long a launch attempt is left to its owner before another invocation takes over (after
/// looking the instance up by tag). CreateFleet `instant` answers within seconds.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

impl<K: Kube, C: Cloud, S: Store, Q: Queue, T: Clock> Reconciler<K, C, S, Q, T> {
    /// Writes the intent for a planned claim and launches it.
    pub(super) async fn launch_planned(
        &self,
        planned: &PlannedClaim,
        view: &mut View,
        report: &mut Report,
    ) -> PortResult<()> {
        let intent = provisioning::intent(planned, &view.cluster, self.ports.clock.now());
        match self.ports.store.put_claim(&intent).await {
            Ok(()) => view.record(&intent),
            Err(PortError::Conflict(_)) => {
                // Written by an earlier delivery of the same decision, which launches it (or the
                // repair pass does, if that one crashed).
                report.note(Some(&intent.name), format!("claim {} exists already; not launched twice", intent.name));
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        self.complete_launch(intent, view, report).await
    }

    /// Takes a Launching claim (as read, without an instance) to Launched, or deletes it when no
    /// offering is left.
    pub(super) async fn complete_launch(
        &self,
        claim: NodeClaim,
        view: &mut View,
        report: &mut Report,
    ) -> PortResult<()> {
        let now = self.ports.clock.now();
        let name = claim.name.clone();
        let mut attempt = claim;
        attempt.version += 1;
        attempt.launch_attempts += 1;
        attempt.launch_attempted_at = Some(now);
        match self.ports.store.put_claim(&attempt).await {
            Ok(()) => view.record(&attempt),
            Err(PortError::Conflict(_)) => {
                report.note(Some(&name), format!("another invocation is launching {name}"));
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        if attempt.launch_attempts > 1 {
            if let Some(launch) = self.ports.cloud.find_launched(&name).await? {
                let why =
                    format!("found instance {} tagged for {name}: an earlier launch got that far", launch.instance_id);
                return self.record_launch(attempt, launch, why, view, report).await;
            }
        }
        let class = view.cluster.nodeclasses.iter().find(|c| c.name == attempt.nodeclass).cloned();
        let resolved = view.cluster.resolved.iter().find(|r| r.name == attempt.nodeclass).cloned();
        let (Some(class), Some(resolved)) = (class, resolved) else {
            let why = format!(
                "cannot launch {name}: EC2NodeClass {} is missing, invalid or not resolved (see its errors)",
                attempt.nodeclass
            );
            report.count_launch_failure(LaunchFailure::NodeClassNotReady);
            return self.give_up(&attempt, why, view, report).await;
        };
        if let Some(problem) = view.cluster.class_not_ready(&attempt.nodeclass) {
            // Planned before the class stopped resolving (its pools take no new pods now): an
            // instance without a subnet, image or the class's profile could not join the cluster.
            let why = format!("cannot launch {name}: EC2NodeClass {} is not ready: {problem}", attempt.nodeclass);
            report.count_launch_failure(LaunchFailure::NodeClassNotReady);
            return self.give_up(&attempt, why, view, report).await;
        }
        loop {
            let groups = provisioning::offers(
                &attempt,
                &view.catalog,
                &view.cluster.unavailable,
                &resolved.zones,
                class.kubelet.os,
                &crate::reservations::for_launch(&attempt, &resolved.reservations, &view.cluster),
            );
            let Some(offers) = groups.into_iter().next() else {
                let why = format!(
                    "cannot launch {name}: every offering of its {} candidate types is unavailable; its pods are planned again",
                    attempt.instance_types.len()
                );
                report.count_launch_failure(LaunchFailure::NoOfferingLeft);
                return self.give_up(&attempt, why, view, report).await;
            };
            let request =
                LaunchRequest { claim: attempt.clone(), class: class.clone(), resolved: resolved.clone(), offers };
            let outcome = self.ports.cloud.launch(&request).await;
            if outcome.is_err() {
                report.count_launch_failure(LaunchFailure::CloudError);
            }
            match outcome? {
                LaunchOutcome::Launched(launch) => {
                    let why = format!(
                        "launched {} ({} {} in {}, ${:.4}/h) for {name}",
                        launch.instance_id, launch.instance_type, launch.capacity_type, launch.zone, launch.price
                    );
                    return self.record_launch(attempt, launch, why, view, report).await;
                }
                LaunchOutcome::NoCapacity { offerings, message } => {
                    // An answer naming no offering still rules out everything we offered, so the
                    // loop always shrinks.
                    let failed =
                        if offerings.is_empty() { request.offers.iter().map(|o| o.key()).collect() } else { offerings };
                    let until = self.ports.clock.now().plus(UNAVAILABLE_FOR);
                    for o in &failed {
                        report.count_launch_failure(LaunchFailure::InsufficientCapacity);
                        self.ports.store.mark_unavailable(o, until).await?;
                        view.cluster.unavailable.insert(o.clone());
                        let why = format!(
                            "{} {} in {} unavailable until {until}: {message}",
                            o.instance_type, o.capacity_type, o.zone
                        );
                        report.decisions.push(Decision::act(
                            Some(&name),
                            Action::MarkUnavailable { offering: o.clone(), until },
                            why,
                        ));
                    }
                }
            }
        }
    }

    async fn record_launch(
        &self,
        attempt: NodeClaim,
        mut launch: Launch,
        why: String,
        view: &mut View,
        report: &mut Report,
    ) -> PortResult<()> {
        // The price of what EC2 launched, as the class's OS is charged: the same as the offer's for
        // a launch made now, and the Windows licence added for one found again by its tag.
        let os = view.cluster.kubelet_of(&attempt.nodeclass).os;
        if let Some(price) = provisioning::launch_price(&view.catalog, &launch, os) {
            launch.price = price;
        }
        let mut next = attempt;
        next.version += 1;
        next.phase = Phase::Launched;
        next.labels =
            launched_labels(&next.labels, &launch.instance_type, &launch.zone, launch.capacity_type, &view.catalog);
        next.launch = Some(launch);
        let name = next.name.clone();
        match self.ports.store.put_claim(&next).await {
            Ok(()) => {}
            Err(PortError::Conflict(_)) => {
                // Someone else recorded it meanwhile (the repair pass of another invocation found
                // the same instance by tag): theirs stands.
                if let Some(stored) = self.ports.store.claim(&name).await? {
                    view.record(&stored);
                }
                report.note(Some(&name), format!("{why}; already recorded by another invocation"));
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        view.record(&next);
        report.note(Some(&name), why);
        Ok(())
    }

    /// Deletes a claim that cannot launch; its pods stay pending and are planned again.
    async fn give_up(&self, claim: &NodeClaim, why: String, view: &mut View, report: &mut Report) -> PortResult<()> {
        self.ports.store.delete_claim(&claim.name, claim.version).await?;
        view.forget(&claim.name);
        view.replan = true;
        let object = format!("NodePool/{}", claim.nodepool);
        if let Err(e) = self.ports.kube.event(&object, "LaunchFailed", &why).await {
            report.errors.push(format!("{object} event: {e}"));
        }
        report.decisions.push(Decision::act(Some(&claim.name), Action::DeleteClaim { name: claim.name.clone() }, why));
        Ok(())
    }
}
