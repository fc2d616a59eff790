//! Draining and terminating a node as a persisted, resumable state machine.
//!
//! A drain can outlive a Lambda invocation (15 minutes at most) and must survive crashes, so it is
//! never a loop: [`step`] looks at the claim (with its persisted [`DrainState`]) and a fresh
//! snapshot of the cluster, and returns the next claim state, the actions to carry out now and
//! "come back in N s" (N ≤ 10). The adapter carries the actions out, records eviction results
//! with [`DrainState::record`], persists the claim (conditional on its version) and schedules the
//! next invocation.
//!
//! Crash safety comes from being level-triggered: every decision is re-derived from what the
//! snapshot shows (is the taint there, which pods remain, is the instance gone), and every action
//! is idempotent (tainting a tainted node, evicting an evicting pod, terminating a terminating
//! instance). The persisted state only remembers what the snapshot cannot tell: when the drain
//! started (for the grace deadline), which evictions were tried and when to retry them, which pods
//! were force-deleted and when the instance termination was requested. A crash before the write
//! repeats idempotent actions; a crash after it resumes from the persisted state.
//!
//! Order of work, as in Karpenter: taint `dovetail.dev/disrupted:NoSchedule`; evict in four tiers
//! (non-critical non-daemon → non-critical daemon → critical non-daemon → critical daemon), a tier
//! starting only once the previous tier's pods are gone; then wait for VolumeAttachments to go,
//! terminate the instance, delete the Node, and mark the claim Terminated once the instance is gone.
//!
//! When the instance goes away regardless ([`Reason::loses_instance`]: a spot or capacity
//! reservation warning, a state change), do-not-disrupt pods are evicted rather than held, the
//! deadline is the reclaim time when that comes before the terminationGracePeriod's, and the end
//! of the drain leaves an Event on the Node naming every pod whose do-not-disrupt or
//! PodDisruptionBudget was overridden. Other drains keep both protections until their deadline.
//!
//! Node repair ([`Reason::skips_drain`]) has its deadline at the repair decision itself: the node
//! has been unhealthy past its toleration, so the machine terminates the instance without
//! evicting or waiting (as Karpenter's repair does); the pods go when the Node is deleted.
//!
//! [`Reason::skips_drain`]: crate::nodeclaim::Reason::skips_drain
//! [`Reason::loses_instance`]: crate::nodeclaim::Reason::loses_instance

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::{instance_of, node_of, Cluster};
use crate::decision::{Action, Decision, Step};
use crate::events;
use crate::labels::TAINT_DISRUPTED;
use crate::model::{Node, Pod, Taint, TaintEffect};
use crate::nodeclaim::drain::{backoff, DrainState};
use crate::nodeclaim::{Disruption, NodeClaim, Phase};
use crate::protection::{do_not_disrupt, is_critical, pod_protected};
use crate::time::{format_duration, Time};

/// The longest wait a step ever asks for: short enough that a delayed SQS message (or an
/// in-process sleep) carries it, so no invocation waits in a loop.
pub const MAX_REQUEUE: Duration = Duration::from_secs(10);
/// How often to look again while waiting for the taint to show, volumes to detach or the
/// instance to go.
pub const POLL: Duration = Duration::from_secs(5);
/// A TerminateInstance whose instance is still `running`/`pending` after this long is sent again
/// (the first call may have been lost with a crashed invocation).
pub const TERMINATE_RETRY: Duration = Duration::from_secs(30);

/// A drain held this long says what holds it: a FailedDraining Event on the Node and NodeClaim, and
/// the claim's Disrupting condition. Karpenter warns from the first step that leaves pods behind;
/// a rolling drain under a PodDisruptionBudget legitimately takes a minute or so, so we wait two
/// before calling it stuck. A terminationGracePeriod shorter than this ends the drain first, by
/// deleting what is left; a longer one is named in the message as when that happens.
pub const STUCK_DRAIN: Duration = Duration::from_secs(2 * 60);

/// The Event reason on a Node whose drain overrode pods' protections (a Warning).
pub const PROTECTION_OVERRIDDEN: &str = "ProtectionOverridden";

/// The four eviction tiers, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Tier {
    NonCriticalNonDaemon,
    NonCriticalDaemon,
    CriticalNonDaemon,
    CriticalDaemon,
}

impl Tier {
    pub fn of(pod: &Pod) -> Tier {
        match (is_critical(pod), pod.is_daemon()) {
            (false, false) => Tier::NonCriticalNonDaemon,
            (false, true) => Tier::NonCriticalDaemon,
            (true, false) => Tier::CriticalNonDaemon,
            (true, true) => Tier::CriticalDaemon,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Tier::NonCriticalNonDaemon => "non-critical non-daemon",
            Tier::NonCriticalDaemon => "non-critical daemon",
            Tier::CriticalNonDaemon => "critical non-daemon",
            Tier::CriticalDaemon => "critical daemon",
        }
    }
}

/// When nothing may hold a drain any longer, and what sets it: the claim's terminationGracePeriod,
/// or EC2 taking the instance back, whichever comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deadline {
    Grace(Time),
    Reclaim(Time),
    /// Node repair decided at this time, and does not wait for the drain
    /// ([`crate::nodeclaim::Reason::skips_drain`]).
    Repair(Time),
}

/// The deadline of a drain whose terminationGracePeriod ends at `grace`, for `disruption`.
fn earliest(grace: Option<Time>, disruption: Option<&Disruption>) -> Option<Deadline> {
    let grace = grace.map(Deadline::Grace);
    let reclaim = disruption.and_then(|d| d.reclaim_at).map(Deadline::Reclaim);
    let repair = disruption.filter(|d| d.reason.skips_drain()).map(|d| Deadline::Repair(d.since));
    // The earliest wins; on a tie the one listed first words it.
    [grace, reclaim, repair].into_iter().flatten().min_by_key(|d| d.at())
}

/// When `claim`'s drain stops letting anything hold its pods, as its stored state says: the
/// simulator's checks compare the budgets it overrode with this.
pub fn deadline_of(claim: &NodeClaim) -> Option<Time> {
    earliest(claim.drain.as_ref().and_then(|d| d.deadline), claim.disruption.as_ref()).map(Deadline::at)
}

impl Deadline {
    fn at(self) -> Time {
        match self {
            Deadline::Grace(t) | Deadline::Reclaim(t) | Deadline::Repair(t) => t,
        }
    }

    /// Why pods still there at this deadline are deleted, for the claim `name`.
    fn ends(self, name: &str) -> String {
        match self {
            Deadline::Grace(t) => format!("the terminationGracePeriod of {name} ends at {t}"),
            Deadline::Reclaim(t) => format!("the instance of {name} is reclaimed at {t}"),
            Deadline::Repair(t) => format!("the node of {name} is unhealthy and was repaired at {t}"),
        }
    }

    /// Why the drain stopped waiting, once it has.
    fn ended(self, name: &str) -> String {
        match self {
            Deadline::Grace(t) => format!("terminationGracePeriod of {name} ended at {t}"),
            Deadline::Reclaim(t) => format!("the instance of {name} is reclaimed at {t}"),
            Deadline::Repair(t) => {
                format!("the node of {name} is unhealthy: repair (decided {t}) does not wait for its drain")
            }
        }
    }
}

pub fn disrupted_taint() -> Taint {
    Taint::new(TAINT_DISRUPTED, "", TaintEffect::NoSchedule)
}

/// Pods the drain leaves alone: mirror pods (the kubelet recreates them; they go with the node)
/// and pods that tolerate the disrupted taint (they chose to stay).
pub fn ignored_by_drain(pod: &Pod) -> bool {
    let taint = disrupted_taint();
    pod.is_mirror() || pod.tolerations.iter().any(|t| t.tolerates(&taint))
}

/// Advances a claim that is being taken away (disruption set, or phase Draining / Terminating)
/// by one short step. Pure: the same claim and cluster always give the same [`Step`].
pub fn step(claim: &NodeClaim, cluster: &Cluster) -> Step {
    // Whether the instance is gone, and whether it is on its way out, is read from the snapshot:
    // a snapshot that did not describe it cannot tell.
    if !cluster.knows_instance_of(claim) {
        return Step::instance_not_described(claim, POLL);
    }
    let mut s = Stepper { now: cluster.now, name: claim.name.clone(), next: claim.clone(), out: Step::default() };
    if claim.phase == Phase::Terminated {
        s.after_terminated(cluster);
        return s.finish(claim, cluster);
    }
    // Whatever the phase, an instance that is already gone ends the claim: nothing left to drain.
    if claim.launch.is_some() && instance_of(claim, cluster).is_none() {
        s.terminated(cluster, "its instance is already gone");
        return s.finish(claim, cluster);
    }
    let started = claim.phase >= Phase::Draining && claim.drain.is_some();
    if !started {
        // Launch first, then drain: a voluntary replacement waits for its new capacity to be
        // ready (forceful reasons — an interruption notice, expiry — do not wait).
        if let Some(waiting) = replacements_not_ready(claim, cluster) {
            // Karpenter taints a node as soon as it decides to replace it: pods created meanwhile
            // must go to the new capacity, not to a node that is about to be drained.
            if let Some(node) = node_of(claim, cluster).filter(|n| !n.taints.iter().any(|t| t.key == TAINT_DISRUPTED)) {
                s.act(
                    Action::TaintNode { node: node.name.clone(), taint: disrupted_taint() },
                    format!("tainting node {} {TAINT_DISRUPTED}:NoSchedule: it is being replaced", node.name),
                );
            }
            s.note(format!("not draining yet: replacement {waiting} is not initialized"));
            s.requeue(Duration::from_secs(10));
            return s.finish(claim, cluster);
        }
        if !s.start(claim, cluster) {
            return s.finish(claim, cluster);
        }
    }
    if s.next.phase == Phase::Draining {
        s.drain(cluster);
    }
    if s.next.phase == Phase::Terminating {
        s.terminate(cluster);
    }
    s.finish(claim, cluster)
}

/// The first replacement of a voluntary disruption that exists but is not Initialized yet. A
/// replacement with no claim at all (its launch failed, or it was never written) does not hold
/// the drain: the provisioner finds capacity for the pods once they are pending.
fn replacements_not_ready<'a>(claim: &'a NodeClaim, cluster: &Cluster) -> Option<&'a str> {
    let d = claim.disruption.as_ref()?;
    if !d.reason.is_voluntary() {
        return None;
    }
    d.replacements
        .iter()
        .map(String::as_str)
        .find(|r| cluster.claims.iter().any(|c| c.name == *r && c.phase < Phase::Initialized))
}

struct Stepper {
    now: Time,
    name: String,
    next: NodeClaim,
    out: Step,
}

impl Stepper {
    fn act(&mut self, action: Action, why: String) {
        self.out.decisions.push(Decision::act(Some(&self.name), action, why));
    }

    fn note(&mut self, why: String) {
        self.out.decisions.push(Decision::note(Some(&self.name), why));
    }

    fn requeue(&mut self, after: Duration) {
        let after = after.min(MAX_REQUEUE);
        self.out.requeue = Some(self.out.requeue.map_or(after, |r| r.min(after)));
    }

    fn state(&mut self) -> &mut DrainState {
        let (now, grace) = (self.now, self.next.termination_grace_period);
        self.next.drain.get_or_insert_with(|| DrainState::new(now, grace))
    }

    /// The drain's deadline: its terminationGracePeriod's, or the reclaim time when earlier. Read
    /// from the disruption each step, so a voluntary drain that an interruption escalates gets
    /// the reclaim time too.
    fn deadline(&mut self) -> Option<Deadline> {
        let grace = self.state().deadline;
        earliest(grace, self.next.disruption.as_ref())
    }

    /// Whether the instance goes away whatever the drain does (see `Reason::loses_instance`).
    fn losing_instance(&self) -> bool {
        self.next.disruption.as_ref().is_some_and(|d| d.reason.loses_instance())
    }

    /// Records that the drain did not let `protection` hold `pod`.
    fn overrode(&mut self, pod: &str, protection: String) {
        let all = self.state().overridden.entry(pod.to_string()).or_default();
        if !all.contains(&protection) {
            all.push(protection);
        }
    }

    fn reason(&self) -> String {
        match &self.next.disruption {
            Some(d) if d.message.is_empty() => d.reason.to_string(),
            Some(d) => format!("{} ({})", d.reason, d.message),
            None => "deletion".to_string(),
        }
    }

    /// Begins the drain unless a voluntary disruption meets do-not-disrupt. Returns whether the
    /// drain is (now) under way.
    fn start(&mut self, claim: &NodeClaim, cluster: &Cluster) -> bool {
        let voluntary = claim.disruption.as_ref().is_some_and(|d| d.reason.is_voluntary());
        let node = node_of(claim, cluster);
        if voluntary {
            if let Some((node, why)) = node.and_then(|n| blocker(n, claim, self.now).map(|why| (n, why))) {
                let message = format!("not draining {} for {}: {why}", self.name, self.reason());
                self.out.decisions.push(events::on_node(&self.name, &node.name, events::DISRUPTION_BLOCKED, message));
                return false;
            }
        }
        let (now, grace) = (self.now, claim.termination_grace_period);
        self.next.drain = Some(DrainState::new(now, grace));
        self.next.phase = Phase::Draining;
        let deadline = match self.deadline() {
            Some(d) => format!("; pods left at {} are deleted", d.at()),
            None => String::new(),
        };
        let on = node.map_or_else(|| "no registered node".to_string(), |n| format!("node {}", n.name));
        self.note(format!("draining {} ({on}) for {}{deadline}", self.name, self.reason()));
        true
    }

    fn drain(&mut self, cluster: &Cluster) {
        let now = self.now;
        let Some(node) = node_of(&self.next, cluster) else {
            self.next.phase = Phase::Terminating;
            self.note(format!("{} has no node to drain", self.name));
            return;
        };
        let deadline = self.deadline();
        if let Some(d) = deadline.filter(|d| now >= d.at()) {
            self.next.phase = Phase::Terminating;
            let left = node.pods.iter().filter(|p| !ignored_by_drain(p)).count();
            self.note(format!("{}; terminating with {left} pod(s) still on node {}", d.ended(&self.name), node.name));
            return;
        }
        // Taint first, and evict only once the taint is seen: an evicted pod must not be able to
        // land on this node again.
        let taint = disrupted_taint();
        if !node.taints.iter().any(|t| t.key == taint.key && t.effect == taint.effect) {
            self.act(
                Action::TaintNode { node: node.name.clone(), taint: taint.clone() },
                format!("tainting node {} with {taint} before draining it", node.name),
            );
            self.requeue(Duration::from_secs(1));
            return;
        }
        if self.state().tainted_at.is_none() {
            self.state().tainted_at = Some(now);
        }

        let blocking: Vec<&Pod> = node.pods.iter().map(Arc::as_ref).filter(|p| !ignored_by_drain(p)).collect();
        // Forget pods that are gone so the persisted state stays as small as the drain.
        let present: Vec<String> = blocking.iter().map(|p| p.key()).collect();
        self.state().pods.retain(|k, _| present.contains(k));
        if blocking.is_empty() {
            self.next.phase = Phase::Terminating;
            self.held(&node.name, vec![]);
            self.note(format!("node {} is drained", node.name));
            return;
        }

        let losing = self.losing_instance();
        // At the deadline minus its own grace period a pod is deleted, whatever protects it.
        if let Some(d) = deadline {
            let deadline = d.at();
            for pod in &blocking {
                let grace = Duration::from_secs(pod.termination_grace_seconds.max(0) as u64);
                let at = deadline.minus(grace);
                let key = pod.key();
                let entry = self.state().pods.get(&key).cloned().unwrap_or_default();
                if now >= at && entry.deleted_at.is_none() {
                    let secs = (deadline.since(now).as_secs() as i64).min(pod.termination_grace_seconds.max(0));
                    self.state().pods.entry(key.clone()).or_default().deleted_at = Some(now);
                    // Its eviction tried and not accepted while a PDB covers it: the PDB is what
                    // held it, and what deleting it overrides.
                    let tried = entry.accepted_at.is_none() && (entry.attempts > 0 || entry.pdb_waits > 0);
                    if losing && tried {
                        for p in cluster.pdbs.iter().filter(|p| p.covers(pod)) {
                            self.overrode(&key, format!("PodDisruptionBudget {}/{}", p.namespace, p.name));
                        }
                    }
                    self.act(
                        Action::DeletePod {
                            namespace: pod.namespace.clone(),
                            name: pod.name.clone(),
                            grace_period_seconds: secs,
                        },
                        format!("deleting pod {key} with {secs}s grace: {}", d.ends(&self.name)),
                    );
                } else if now < at {
                    self.requeue(at.since(now));
                }
            }
        }

        let tier = blocking.iter().map(|p| Tier::of(p)).min().unwrap_or(Tier::CriticalDaemon);
        let mut budgets: BTreeMap<(String, String), i32> =
            cluster.pdbs.iter().map(|p| ((p.namespace.clone(), p.name.clone()), p.disruptions_allowed)).collect();
        let (mut waiting, mut held) = (0usize, 0usize);
        // What keeps each pod of this tier on the node, worded the same at every step while it
        // does (the FailedDraining message must not change with attempt counts).
        let mut holds: Vec<String> = Vec::new();
        let covered = |pod: &Pod| -> Option<String> {
            let names: Vec<String> =
                cluster.pdbs.iter().filter(|p| p.covers(pod)).map(|p| format!("{}/{}", p.namespace, p.name)).collect();
            (!names.is_empty()).then(|| format!("PodDisruptionBudget {}", names.join(", ")))
        };
        for pod in blocking.iter().filter(|p| Tier::of(p) == tier) {
            let key = pod.key();
            let entry = self.state().pods.get(&key).cloned().unwrap_or_default();
            if entry.deleted_at.is_some() || entry.accepted_at.is_some() {
                let how = if entry.deleted_at.is_some() { "deleted" } else { "evicted" };
                holds.push(format!("pod {key} ({how}, not gone yet)"));
                waiting += 1;
                continue;
            }
            // do-not-disrupt holds the pod, unless the node goes anyway: then the pod is better
            // off restarting elsewhere now than dying with it.
            let protected = do_not_disrupt(&pod.annotations, pod.started_at, now);
            if let Some(why) = &protected {
                if !losing {
                    self.note(format!("not evicting pod {key}: pod {key} has {why}"));
                    holds.push(format!("pod {key} ({why})"));
                    held += 1;
                    continue;
                }
                self.overrode(&key, why.clone());
            }
            // Held by its PDB, or refused for another reason (a retry is one).
            let hold = covered(pod).or_else(|| (entry.attempts > 0).then(|| "eviction refused".to_string()));
            if let Some(retry) = entry.next_retry.filter(|r| now < *r) {
                holds.extend(hold.map(|h| format!("pod {key} ({h})")));
                self.requeue(retry.since(now));
                waiting += 1;
                continue;
            }
            let covering: Vec<_> = cluster.pdbs.iter().filter(|p| p.covers(pod)).collect();
            if let Some(full) = covering.iter().find(|p| budgets[&(p.namespace.clone(), p.name.clone())] <= 0) {
                // Emitting it would only earn a 429: back off as though it had.
                self.note(format!(
                    "not evicting pod {key} yet: PodDisruptionBudget {}/{} allows no more disruptions",
                    full.namespace, full.name
                ));
                let e = self.state().pods.entry(key.clone()).or_default();
                e.pdb_waits += 1;
                let wait = backoff(e.attempts + e.pdb_waits);
                e.next_retry = Some(now.plus(wait));
                self.requeue(wait);
                holds.extend(hold.map(|h| format!("pod {key} ({h})")));
                continue;
            }
            for p in &covering {
                *budgets.get_mut(&(p.namespace.clone(), p.name.clone())).expect("every pdb has a budget") -= 1;
            }
            let e = self.state().pods.entry(key.clone()).or_default();
            e.attempts += 1;
            e.last_attempt = Some(now);
            let wait = backoff(e.attempts + e.pdb_waits);
            e.next_retry = Some(now.plus(wait));
            let attempt = e.attempts;
            let retry = if attempt > 1 { format!(" (attempt {attempt})") } else { String::new() };
            let despite = protected.map(|why| format!(", despite {why}")).unwrap_or_default();
            self.act(
                Action::Evict { namespace: pod.namespace.clone(), name: pod.name.clone() },
                format!(
                    "evicting {} pod {key} from node {} for {}{retry}{despite}",
                    tier.describe(),
                    node.name,
                    self.reason()
                ),
            );
            self.requeue(wait);
            if attempt > 1 {
                holds.extend(hold.map(|h| format!("pod {key} ({h})")));
            }
        }
        let later = blocking.iter().filter(|p| Tier::of(p) > tier).count();
        if later > 0 && !holds.is_empty() {
            holds.push(format!("{later} pod(s) of later eviction tiers wait for these"));
        }
        self.held(&node.name, holds);
        // Terminating pods go in their own time, held ones when their protection ends or the
        // grace deadline deletes them: look again shortly, never wait here.
        if waiting > 0 {
            self.requeue(Duration::from_secs(1));
        }
        if held > 0 || self.out.requeue.is_none() {
            self.requeue(POLL);
        }
    }

    fn terminate(&mut self, cluster: &Cluster) {
        let now = self.now;
        let instance = instance_of(&self.next, cluster);
        let Some(instance) = instance else {
            self.terminated(cluster, "its instance is gone");
            return;
        };
        let node_name = self.next.node_name.clone().or_else(|| node_of(&self.next, cluster).map(|n| n.name.clone()));
        let past_deadline = self.deadline().is_some_and(|d| now >= d.at());
        if let Some(volumes) = node_name.as_ref().and_then(|n| cluster.volume_attachments.get(n)) {
            if !volumes.is_empty() && !past_deadline {
                let node = node_name.as_deref().unwrap_or_default();
                self.held(node, vec![format!("volume attachment(s) {} not detached yet", volumes.join(", "))]);
                self.note(format!(
                    "waiting for {} volume attachment(s) on node {} to detach before terminating instance {}",
                    volumes.len(),
                    node_name.as_deref().unwrap_or_default(),
                    instance.id
                ));
                self.requeue(POLL);
                return;
            }
        }
        if let Some(node) = &node_name {
            self.held(node, vec![]);
        }
        let requested = self.state().terminate_requested_at;
        let going = matches!(instance.state.as_str(), "shutting-down" | "stopping" | "stopped");
        let resend = requested.is_none_or(|r| !going && now >= r.plus(TERMINATE_RETRY));
        if resend {
            self.state().terminate_requested_at = Some(now);
            self.act(
                Action::TerminateInstance { instance_id: instance.id.clone() },
                format!("terminating instance {} of {} for {}", instance.id, self.name, self.reason()),
            );
        }
        // The Node object goes once the instance is on its way out: deleted earlier, a running
        // kubelet would register it again.
        if going {
            if let Some(n) = node_name.filter(|n| cluster.nodes.iter().any(|x| &x.name == n)) {
                self.act(
                    Action::DeleteNode { node: n.clone() },
                    format!("deleting node {n}: instance {} is {}", instance.id, instance.state),
                );
            }
        }
        self.requeue(POLL);
    }

    /// The instance is gone: record the end, delete a leftover Node and say so.
    fn terminated(&mut self, cluster: &Cluster, why: &str) {
        self.next.phase = Phase::Terminated;
        let node = node_of(&self.next, cluster);
        let pods: Vec<String> =
            node.map(|n| n.pods.iter().filter(|p| !p.is_mirror()).map(|p| p.key()).collect()).unwrap_or_default();
        let object = match node {
            Some(n) => format!("Node/{}", n.name),
            None => format!("NodeClaim/{}", self.name),
        };
        let released = if pods.is_empty() { String::new() } else { format!("; released pods {}", pods.join(", ")) };
        self.act(
            Action::Event {
                object,
                reason: "Terminated".into(),
                message: format!("{} terminated: {why}{released}", self.name),
            },
            format!("{} is Terminated: {why}{released}", self.name),
        );
        self.after_terminated(cluster);
    }

    /// A Terminated claim whose Node object lingers: delete it so its pods are rescheduled.
    fn after_terminated(&mut self, cluster: &Cluster) {
        if let Some(n) = node_of(&self.next, cluster) {
            let name = n.name.clone();
            self.act(
                Action::DeleteNode { node: name.clone() },
                format!("deleting node {name}: the instance of {} is gone", self.name),
            );
        }
    }

    /// Says what holds the drain once it has been held for [`STUCK_DRAIN`]: a FailedDraining Event
    /// on `node` (its NodeClaim gets it too, see [`crate::events::complete`]), and the drain
    /// state's `waiting_on`, which the claim's Disrupting condition shows. `holds` empty: nothing
    /// holds it (any more), and `waiting_on` is cleared.
    fn held(&mut self, node: &str, holds: Vec<String>) {
        let Some(drain) = self.next.drain.as_ref() else { return };
        let stuck = !holds.is_empty() && self.now.since(drain.started_at) >= STUCK_DRAIN;
        let waiting_on = stuck.then(|| holds.join("; "));
        if let Some(what) = &waiting_on {
            let deadline = match self.deadline() {
                Some(d) => format!("; {}, and what is left then goes", d.ends(&self.name)),
                None => String::new(),
            };
            let reason = self.next.disruption.as_ref().map_or_else(|| "deletion".to_string(), |d| d.reason.to_string());
            let message = format!(
                "draining node {node} for {reason} has been held for over {}: {what}{deadline}",
                format_duration(STUCK_DRAIN)
            );
            self.out.decisions.push(events::on_node(&self.name, node, events::FAILED_DRAINING, message));
        }
        if let Some(drain) = self.next.drain.as_mut() {
            drain.waiting_on = waiting_on;
        }
    }

    /// When the drain ends (the claim leaves Draining, whichever way), an Event on the Node names
    /// the pods whose protection it overrode, and why.
    fn report_overrides(&mut self, before: &NodeClaim, cluster: &Cluster) {
        if before.phase > Phase::Draining || self.next.phase <= Phase::Draining {
            return;
        }
        let Some(overridden) = self.next.drain.as_ref().map(|d| &d.overridden).filter(|o| !o.is_empty()) else {
            return;
        };
        let pods: Vec<String> = overridden.iter().map(|(pod, what)| format!("{pod} ({})", what.join(", "))).collect();
        let because = match self.next.disruption.as_ref() {
            Some(d) => match d.reclaim_at {
                Some(t) => format!("{} and EC2 takes the instance back at {t}", d.reason),
                None => format!("{} and the instance is going away regardless", d.reason),
            },
            None => "the instance is going away regardless".to_string(),
        };
        let node = node_of(&self.next, cluster).map(|n| n.name.clone()).or_else(|| self.next.node_name.clone());
        let object = node.as_ref().map_or_else(|| format!("NodeClaim/{}", self.name), |n| format!("Node/{n}"));
        let message = format!(
            "drained {} overriding the protection of {} pod{} ({because}): {}",
            node.as_deref().map_or_else(|| self.name.clone(), |n| format!("node {n}")),
            pods.len(),
            if pods.len() == 1 { "" } else { "s" },
            pods.join("; ")
        );
        self.act(Action::Event { object, reason: PROTECTION_OVERRIDDEN.into(), message: message.clone() }, message);
    }

    fn finish(mut self, before: &NodeClaim, cluster: &Cluster) -> Step {
        self.report_overrides(before, cluster);
        if self.next != *before {
            self.next.version = before.version + 1;
            self.out.claim = Some(self.next);
        }
        self.out
    }
}

/// Why do-not-disrupt on the node or one of its pods blocks a voluntary drain from starting.
fn blocker(node: &Node, claim: &NodeClaim, now: Time) -> Option<String> {
    if let Some(why) = do_not_disrupt(&node.annotations, claim.registered_at, now) {
        return Some(format!("node {} has {why}", node.name));
    }
    // Every pod counts, mirror and tolerating ones too: the annotation is the owner saying "not
    // this node, not now", whether or not the drain would touch that pod.
    node.pods.iter().find_map(|p| pod_protected(p, now))
}
