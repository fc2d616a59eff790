//! The reconcilers the Lambdas (and the simulator) run: read the truth through [`ports`], decide
//! with the pure core, carry the decisions out through the same ports.
//!
//! - [`Reconciler::provision`] — the provisioner: under the per-cluster lease, registers claims
//!   whose Nodes joined, finishes launches a crash interrupted, and launches capacity for pending
//!   pods ([`crate::provisioning::plan`]), looping once more whenever the lease was marked dirty.
//! - [`Reconciler::interrupt`] — a batch of interruption-queue messages: EventBridge events
//!   ([`crate::interruption`]) and `{"resume": "<claim>"}` messages that advance one drain.
//! - [`Reconciler::sweep`] — the scheduled safety net: a provisioning pass, then lifecycle,
//!   orphans, expiration, drift and consolidation ([`crate::disruption::sweep::sweep`]) and the
//!   NodePools' status.
//!
//! Every claim a pass writes has its NodeClaim object in the cluster written once after the
//! pass's actions ([`objects`]); the sweep repairs what a failed write left. Deletions someone
//! else started (`kubectl delete node|nodeclaim`) are carried out by every provisioning pass
//! ([`crate::deletion`]).
//!
//! What each reads of EC2 ([`scope`]): the sweeper describes every instance of the cluster; the
//! provisioner and the interruption function only the instances of the claims they step and
//! those their events name.
//!
//! Exactly-once launches (see [`launch`]): the claim intent is written (create-only) before
//! CreateFleet; whoever bumps the claim's attempt counter (a conditional write) owns the call;
//! the instance is recorded after. A crash between CreateFleet and the record is repaired by the
//! `dovetail.dev/nodeclaim` tag lookup before any second call, and CreateFleet's client token is
//! the claim name besides.

mod apply;
pub mod deadline;
mod launch;
mod objects;
pub mod ports;
mod read;
pub mod scope;
mod status;

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Duration;

use crate::catalog::Catalog;
use crate::cluster::Cluster;
use crate::decision::{Action, Decision};
use crate::deletion;
use crate::disruption::consolidation::quiet::Quiet;
use crate::disruption::sweep;
use crate::events::Recent;
use crate::instance_profile;
use crate::interruption;
use crate::lifecycle;
use crate::nodeclaim::Phase;
use crate::provisioning;
use crate::scheduler::SolveCache;

pub use deadline::Deadline;
pub use launch::ATTEMPT_TIMEOUT;
use ports::{Clock, Cloud, Invalid, Kube, Lease, PortError, PortResult, Queue, Store};
pub use scope::Scope;

/// The Event reason for an object skipped as invalid.
pub const VALIDATION_FAILED: &str = "ValidationFailed";
/// The Event reason on an EC2NodeClass whose instance profile could not be made.
pub const INSTANCE_PROFILE_FAILED: &str = "InstanceProfileFailed";
/// The Event reason on an EC2NodeClass that cannot launch for want of an image, subnet or security
/// group, or whose resolution failed (Karpenter's NodeClass `Ready=False`): its pools take no pods.
pub const NODECLASS_NOT_READY: &str = "NodeClassNotReady";

/// The adapters one reconciler works through.
pub struct Ports<K, C, S, Q, T> {
    pub kube: K,
    pub cloud: C,
    pub store: S,
    pub queue: Q,
    pub clock: T,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub cluster: String,
    /// Who holds the provisioning lease (the Lambda request id, a simulator name).
    pub holder: String,
    /// Longer than one provisioning invocation may run (the function timeout), so a crashed
    /// holder frees the cluster by itself.
    pub lease_ttl: Duration,
    /// Node repair for every NodePool, not only those annotated `dovetail.dev/node-repair: "true"`
    /// (see [`crate::disruption::repair`]). Off by default, as Karpenter's `NodeRepair` feature
    /// gate is; the functions read it from `DOVETAIL_NODE_REPAIR`.
    pub node_repair: bool,
    /// Whether `minValues` is a hard constraint ([`crate::requirements::MinValuesPolicy`]);
    /// `Strict` by default, as Karpenter's; the functions read it from
    /// `DOVETAIL_MIN_VALUES_POLICY`.
    pub min_values_policy: crate::requirements::MinValuesPolicy,
    /// The cluster-wide limit on what all pools' capacity costs, in micro-dollars per hour
    /// ([`crate::snapshot::CostLimit`]); the functions read it from `DOVETAIL_COST_LIMIT`. `None`
    /// by default: only the pools' own limits hold.
    pub cost_limit: Option<i64>,
}

impl Settings {
    pub fn new(cluster: &str, holder: &str) -> Settings {
        Settings {
            cluster: cluster.into(),
            holder: holder.into(),
            lease_ttl: Duration::from_secs(120),
            node_repair: false,
            min_values_policy: Default::default(),
            cost_limit: None,
        }
    }
}

/// One message from a queue: its id (for partial batch failures) and body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueMessage {
    pub id: String,
    pub body: String,
}

/// What a reconciler did, each with its sentence, and what went wrong (logged; the work that
/// could go on went on).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub decisions: Vec<Decision>,
    pub errors: Vec<String>,
    /// The state after the invocation's actions ([`View::measure`]): pods waiting for capacity
    /// (a pod a launch is for stays pending until its node registers, as in Kubernetes), what
    /// the live claims cost per hour (launched ones included), and the claims by phase.
    pub pending_pods: usize,
    /// How long the longest-waiting of those pods has existed, in seconds (0 with none pending).
    #[serde(default)]
    pub oldest_pending_seconds: f64,
    pub fleet_cost_per_hour: f64,
    #[serde(default)]
    pub claims_by_phase: BTreeMap<Phase, usize>,
    /// What happened during the invocation, by low-cardinality kind (for metrics): claims newly
    /// disrupted by reason, interruption messages by kind
    /// ([`interruption::Message::kind`]), and launch failures by reason ([`LaunchFailure`]).
    #[serde(default)]
    pub disruptions: BTreeMap<crate::nodeclaim::Reason, usize>,
    #[serde(default)]
    pub interruptions: BTreeMap<String, usize>,
    #[serde(default)]
    pub launch_failures: BTreeMap<String, usize>,
    /// Stopped at its [`Deadline`] with work left, which the next invocation picks up.
    #[serde(default)]
    pub unfinished: bool,
}

/// Why a launch did not give a claim its instance, as the launch-failure metric names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchFailure {
    /// EC2 had no capacity for an offering (`InsufficientInstanceCapacity` and its kin): counted
    /// once per offering ruled out.
    InsufficientCapacity,
    /// Every offering of the claim's candidate types is unavailable: the claim is given up.
    NoOfferingLeft,
    /// The claim's EC2NodeClass is missing, invalid or unresolved.
    NodeClassNotReady,
    /// The CreateFleet call itself failed (an error other than capacity).
    CloudError,
}

impl LaunchFailure {
    pub const ALL: [LaunchFailure; 4] = [
        LaunchFailure::InsufficientCapacity,
        LaunchFailure::NoOfferingLeft,
        LaunchFailure::NodeClassNotReady,
        LaunchFailure::CloudError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LaunchFailure::InsufficientCapacity => "InsufficientInstanceCapacity",
            LaunchFailure::NoOfferingLeft => "NoOfferingLeft",
            LaunchFailure::NodeClassNotReady => "NodeClassNotReady",
            LaunchFailure::CloudError => "CloudError",
        }
    }
}

impl Report {
    fn count_launch_failure(&mut self, why: LaunchFailure) {
        *self.launch_failures.entry(why.as_str().to_string()).or_default() += 1;
    }

    fn note(&mut self, claim: Option<&str>, why: impl Into<String>) {
        self.decisions.push(Decision::note(claim, why));
    }

    /// Instances terminated (TerminateInstance carried out).
    pub fn terminations(&self) -> usize {
        self.decisions.iter().filter(|d| matches!(d.action, Some(Action::TerminateInstance { .. }))).count()
    }

    /// Launch actions carried out (intents written), for summaries and tests.
    pub fn launches(&self) -> impl Iterator<Item = &crate::scheduler::PlannedClaim> {
        self.decisions.iter().filter_map(|d| match &d.action {
            Some(Action::Launch(p)) => Some(p.as_ref()),
            _ => None,
        })
    }
}

/// The outcome of a batch of queue messages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    /// Ids of messages to report as failed (`ReportBatchItemFailures`): they are delivered again,
    /// and after the queue's `maxReceiveCount` land in its DLQ.
    pub failed: Vec<String>,
    pub report: Report,
}

/// Everything one pass decides from: the live cluster, the catalog it was planned against, and
/// the objects that were skipped as invalid.
#[derive(Debug, Clone)]
pub struct View {
    pub cluster: Cluster,
    pub catalog: Arc<Catalog>,
    /// Each NodeOverlay's status: applied, invalid or in conflict (published by the sweeper).
    pub overlays: Vec<ports::OverlayStatus>,
    pub invalid: Vec<Invalid>,
    /// A claim was given up (no offering left): its pods need planning again in this invocation.
    pub replan: bool,
    /// Claims newly disrupted in this view whose drain its caller starts itself, when it keeps
    /// them here (`Some`; see [`Reconciler::interrupt`]). `None`: each drain starts with a resume
    /// message queued at once.
    pub drains_to_start: Option<Vec<String>>,
    /// Claims written or deleted since their NodeClaim objects were last brought in step (see
    /// [`objects`]).
    pub written: BTreeSet<String>,
    /// When the invocation this view serves stops starting work.
    pub deadline: Deadline,
}

/// Passes a provisioner makes before it leaves remaining work to the next doorbell or sweep.
pub const MAX_PASSES: usize = 5;

/// The body of a message that resumes one claim's drain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    pub resume: String,
}

pub struct Reconciler<K, C, S, Q, T> {
    pub ports: Ports<K, C, S, Q, T>,
    pub settings: Settings,
    /// The last consolidation pass that found nothing, while its inputs stay the same (kept by a
    /// warm function between sweeps; see [`crate::disruption::consolidation::quiet`]).
    quiet: Quiet,
    /// What provisioning solves prepared (each pool's instance types, pool fits, priced types),
    /// kept by a warm function for the next solve, which checks it against its own inputs (see
    /// [`SolveCache`]). Boxed: it would be most of the reconciler's size.
    solves: Box<Mutex<SolveCache<'static>>>,
    /// Events written lately, so a repeat within its window is not written again (kept by a warm
    /// function; see [`crate::events`]). Boxed, as `solves` is: reconcilers are held by value.
    events: Box<Recent>,
    /// The catalog priced with the cluster's NodeOverlays, kept while neither changes (see
    /// [`read::Priced`]). Boxed, as `solves` is.
    priced: Box<Mutex<Option<read::Priced>>>,
}

impl<K: Kube, C: Cloud, S: Store, Q: Queue, T: Clock> Reconciler<K, C, S, Q, T> {
    pub fn new(ports: Ports<K, C, S, Q, T>, settings: Settings) -> Self {
        Reconciler {
            ports,
            settings,
            quiet: Quiet::new(),
            solves: Box::new(Mutex::new(SolveCache::new())),
            events: Box::new(Recent::new()),
            priced: Box::new(Mutex::new(None)),
        }
    }

    /// The provisioner's invocation (a batch of doorbells: their content does not matter, the
    /// cluster is re-read). Of EC2 it describes only the instances of the claims it registers.
    pub async fn provision(&self) -> PortResult<Report> {
        self.provision_by(Deadline::NONE).await
    }

    /// [`Reconciler::provision`], starting no action once `deadline` has passed (the report is
    /// then `unfinished`, and the lease free for whoever comes next).
    pub async fn provision_by(&self, deadline: Deadline) -> PortResult<Report> {
        self.provision_keeping_view(Scope::Provisioning, deadline).await.map(|(report, _)| report)
    }

    /// [`Reconciler::provision_by`] reading `scope`, also returning the view of its last pass
    /// (kept in step with what it did), so the sweep that follows need not read everything again.
    async fn provision_keeping_view(&self, scope: Scope<'_>, deadline: Deadline) -> PortResult<(Report, Option<View>)> {
        let mut report = Report::default();
        let (holder, ttl) = (self.settings.holder.as_str(), self.settings.lease_ttl);
        if self.ports.store.lease(holder, self.ports.clock.now(), ttl).await? == Lease::Busy {
            report.note(None, "another invocation is provisioning; it was asked to look once more");
            return Ok((report, None));
        }
        let mut last = None;
        for pass in 1..=MAX_PASSES {
            if self.out_of_time(deadline, &mut report) {
                break;
            }
            let replan = match self.provision_pass(&mut report, scope, deadline).await {
                Ok(view) => {
                    view.measure(&mut report);
                    let replan = view.replan;
                    last = Some(view);
                    replan
                }
                Err(e) => {
                    // Free the cluster for the retry; whether it was dirty no longer matters.
                    let _ = self.ports.store.release(holder, self.ports.clock.now(), ttl).await;
                    return Err(e);
                }
            };
            if report.unfinished {
                break;
            }
            if replan && pass < MAX_PASSES {
                continue;
            }
            if !self.ports.store.release(holder, self.ports.clock.now(), ttl).await? {
                return Ok((report, last));
            }
            if pass == MAX_PASSES {
                report.note(
                    None,
                    format!("still more to do after {MAX_PASSES} passes; the lease expires and the next doorbell or sweep goes on"),
                );
            }
        }
        if report.unfinished {
            // Stopped at the deadline: the lease is let go at once, dirty or not — this
            // invocation's doorbells come back (see [`deadline`]), and any one means "look again".
            let now = self.ports.clock.now();
            if self.ports.store.release(holder, now, ttl).await? {
                self.ports.store.release(holder, now, ttl).await?;
            }
        }
        Ok((report, last))
    }

    /// Whether the time to start work is over; the first time, the report says so.
    fn out_of_time(&self, deadline: Deadline, report: &mut Report) -> bool {
        if !deadline.passed(self.ports.clock.now()) {
            return false;
        }
        if !report.unfinished {
            report.unfinished = true;
            report.note(None, "the invocation's deadline is near: what is left goes to the next invocation");
        }
        true
    }

    /// [`Reconciler::read`] for an invocation that stops at `deadline`.
    async fn read_until(&self, report: &mut Report, scope: Scope<'_>, deadline: Deadline) -> PortResult<View> {
        let mut view = self.read(report, scope).await?;
        view.deadline = deadline;
        Ok(view)
    }

    /// One pass; its view's `replan` says a launch was given up and its pods need planning again.
    async fn provision_pass(&self, report: &mut Report, scope: Scope<'_>, deadline: Deadline) -> PortResult<View> {
        let mut view = self.read_until(report, scope, deadline).await?;
        self.register(&mut view, report).await;
        self.repair_launches(&mut view, report).await;
        self.apply(deletion::deletions(&view.cluster), &mut view, report).await;
        let decisions = self.plan(&view);
        self.apply(decisions, &mut view, report).await;
        Ok(view)
    }

    /// Launches for the view's pending pods, with the kept [`SolveCache`]. A second solve running
    /// alongside (never in Lambda, which sends a process one event at a time) prepares its own;
    /// after a panic mid-solve the cache starts afresh.
    fn plan(&self, view: &View) -> Vec<Decision> {
        let cache = match self.solves.try_lock() {
            Ok(cache) => cache,
            Err(TryLockError::WouldBlock) => return provisioning::plan(&view.cluster, &view.catalog),
            Err(TryLockError::Poisoned(poisoned)) => {
                let mut cache = poisoned.into_inner();
                *cache = SolveCache::new();
                self.solves.clear_poison();
                cache
            }
        };
        provisioning::plan_cached(&view.cluster, &view.catalog, &cache)
    }

    /// Steps claims whose instance is up but whose Node is not yet matched or Ready, so pods can
    /// land as soon as the `dovetail.dev/unregistered` taint goes (a node doorbell brings us here).
    /// The same claims [`Scope::Provisioning`] describes the instances of.
    async fn register(&self, view: &mut View, report: &mut Report) {
        let waiting: Vec<String> =
            view.cluster.claims.iter().filter(|c| scope::registering(c)).map(|c| c.name.clone()).collect();
        for name in waiting {
            if self.out_of_time(view.deadline, report) {
                return;
            }
            self.step_claim(&name, false, view, report).await;
        }
    }

    /// Launches a crash (or a lost race) left half done: claims still Launching with no instance
    /// recorded and no attempt in progress.
    async fn repair_launches(&self, view: &mut View, report: &mut Report) {
        let now = self.ports.clock.now();
        let stale: Vec<_> = view
            .cluster
            .claims
            .iter()
            .filter(|c| c.phase == Phase::Launching && c.launch.is_none())
            .filter(|c| now.since(c.created_at) < lifecycle::LAUNCH_TIMEOUT)
            .filter(|c| c.launch_attempted_at.is_none_or(|t| now.since(t) >= ATTEMPT_TIMEOUT))
            .cloned()
            .collect();
        for claim in stale {
            if self.out_of_time(view.deadline, report) {
                return;
            }
            report.note(Some(&claim.name), format!("resuming the launch of {}: no instance recorded yet", claim.name));
            if let Err(e) = self.complete_launch(claim.clone(), view, report).await {
                report.errors.push(format!("launch of {}: {e}", claim.name));
            }
        }
    }

    /// A batch from the interruption queue. Each message stands alone: a malformed one fails
    /// (and reaches the DLQ after its retries) without holding back the others. Of EC2 it
    /// describes the instances its events name and those of the claims it resumes.
    pub async fn interrupt(&self, messages: &[QueueMessage]) -> Batch {
        self.interrupt_by(messages, Deadline::NONE).await
    }

    /// [`Reconciler::interrupt`], starting nothing once `deadline` has passed: events not reached
    /// (or cut short) are reported failed, so they come back; drains are handed on to resume
    /// messages sent at once.
    pub async fn interrupt_by(&self, messages: &[QueueMessage], deadline: Deadline) -> Batch {
        let mut batch = Batch::default();
        let parsed: Vec<Parsed> = messages.iter().map(|m| Parsed::of(&m.body)).collect();
        let resumed: Vec<String> = parsed
            .iter()
            .filter_map(|p| match p {
                Parsed::Resume(claim) => Some(claim.clone()),
                _ => None,
            })
            .collect();
        let named: Vec<String> = parsed
            .iter()
            .filter_map(|p| match p {
                Parsed::Event(message) => Some(message.instance_ids()),
                _ => None,
            })
            .flatten()
            .map(str::to_string)
            .collect();
        let reservations: Vec<String> = parsed
            .iter()
            .filter_map(|p| match p {
                Parsed::Event(message) => message.reservation_id().map(str::to_string),
                _ => None,
            })
            .collect();
        let scope = Scope::Named { claims: &resumed, instances: &named, reservations: &reservations };
        let mut view = match self.read_until(&mut batch.report, scope, deadline).await {
            Ok(v) => v,
            Err(e) => {
                batch.report.errors.push(format!("reading the cluster: {e}"));
                batch.failed = messages.iter().map(|m| m.id.clone()).collect();
                return batch;
            }
        };
        for (m, parsed) in messages.iter().zip(parsed) {
            let retry = match parsed {
                Parsed::Resume(claim) => self.step_claim(&claim, true, &mut view, &mut batch.report).await,
                Parsed::Event(_) if self.out_of_time(deadline, &mut batch.report) => true,
                Parsed::Event(message) => {
                    *batch.report.interruptions.entry(message.kind().to_string()).or_default() += 1;
                    let decisions = interruption::decide(&message, &view.cluster, &view.catalog);
                    // The drain starts here and now: a spot warning gives two minutes, and a resume
                    // message would be a queue hop and a read later. Its first step taints the
                    // node, which the view then shows; the second, seeing the taint, evicts (as
                    // Karpenter's terminator taints and drains in one reconcile) and asks for the
                    // next step.
                    view.drains_to_start = Some(Vec::new());
                    let mut retry = self.apply(decisions, &mut view, &mut batch.report).await;
                    for claim in view.drains_to_start.take().unwrap_or_default() {
                        if self.out_of_time(deadline, &mut batch.report) {
                            retry |= self.hand_on(&claim, &mut batch.report).await;
                            continue;
                        }
                        retry |= self.step_claim(&claim, false, &mut view, &mut batch.report).await;
                        retry |= self.step_claim(&claim, true, &mut view, &mut batch.report).await;
                    }
                    // Cut short: delivered again, it decides afresh from what was done.
                    retry || batch.report.unfinished
                }
                Parsed::Malformed(e) => {
                    batch.report.errors.push(format!("message {}: {e}", m.id));
                    true
                }
            };
            if retry {
                batch.failed.push(m.id.clone());
            }
        }
        view.measure(&mut batch.report);
        batch
    }

    /// Advances one claim's drain (a `{"resume": …}` message).
    pub async fn resume(&self, claim: &str) -> PortResult<Report> {
        let mut report = Report::default();
        let claims = [claim.to_string()];
        let mut view =
            self.read(&mut report, Scope::Named { claims: &claims, instances: &[], reservations: &[] }).await?;
        self.step_claim(claim, true, &mut view, &mut report).await;
        view.measure(&mut report);
        Ok(report)
    }

    /// The scheduled sweep: the provisioning safety net, then every disruption decision, then the
    /// NodePools' status. The one reader of every instance of the cluster (its orphan pass needs
    /// them all), its provisioning pass included, since the sweep reuses that pass's view.
    pub async fn sweep(&self) -> PortResult<Report> {
        self.sweep_by(Deadline::NONE).await
    }

    /// [`Reconciler::sweep`], starting nothing once `deadline` has passed: what it did not reach
    /// waits for the next tick.
    pub async fn sweep_by(&self, deadline: Deadline) -> PortResult<Report> {
        let (mut report, view) = match self.provision_keeping_view(Scope::All, deadline).await {
            Ok(r) => r,
            Err(e) => (Report { errors: vec![format!("provisioning pass: {e}")], ..Report::default() }, None),
        };
        if self.out_of_time(deadline, &mut report) {
            return Ok(report);
        }
        // When the provisioning pass did nothing, its view (read moments ago) is the cluster as
        // it is: no second read. After any action, read again — a launch's instance, for one, is
        // not in that view's instance list.
        let quiet = report.decisions.iter().all(|d| d.action.is_none()) && report.errors.is_empty();
        let mut view = match view.filter(|_| quiet) {
            Some(v) => v,
            None => {
                let mut v = self.read_until(&mut report, Scope::All, deadline).await?;
                self.repair_launches(&mut v, &mut report).await;
                v
            }
        };
        let decisions = sweep::sweep_with(&view.cluster, &view.catalog, &self.quiet);
        self.apply(decisions, &mut view, &mut report).await;
        view.measure(&mut report);
        if self.out_of_time(deadline, &mut report) {
            return Ok(report);
        }
        self.repair_objects(&mut view, &mut report).await;
        self.publish_status(&view, &mut report).await;
        self.delete_unused_profiles(&view, &mut report).await;
        Ok(report)
    }

    /// Deletes the instance profiles made for classes that no longer want them once nothing of
    /// theirs runs ([`instance_profile::unused`]). A failure is reported; the next sweep retries.
    async fn delete_unused_profiles(&self, view: &View, report: &mut Report) {
        if view.cluster.described != crate::cluster::Described::All {
            return;
        }
        let listed = match self.ports.cloud.instance_profiles().await {
            Ok(l) => l,
            Err(e) => return report.errors.push(format!("listing instance profiles: {e}")),
        };
        let invalid: BTreeSet<String> =
            view.invalid.iter().filter_map(|i| i.object.strip_prefix("EC2NodeClass/")).map(str::to_string).collect();
        for unused in instance_profile::unused(&view.cluster, &invalid, &listed) {
            match self.ports.cloud.delete_instance_profile(&unused.name).await {
                Ok(()) => report.note(None, unused.why),
                Err(e) => report.errors.push(format!("deleting instance profile {}: {e}", unused.name)),
            }
        }
    }

    /// One lifecycle / termination step for a claim, carried out; with `requeue`, the step's
    /// "come back in N s" becomes a delayed message. Returns whether a retry is needed.
    async fn step_claim(&self, name: &str, requeue: bool, view: &mut View, report: &mut Report) -> bool {
        if requeue && self.out_of_time(view.deadline, report) {
            return self.hand_on(name, report).await;
        }
        let Some(claim) = view.cluster.claims.iter().find(|c| c.name == name).cloned() else {
            report.note(Some(name), format!("claim {name} no longer exists; nothing to resume"));
            return false;
        };
        let step = lifecycle::advance(&claim, &view.cluster);
        let mut decisions = step.decisions;
        if let Some(next) = step.claim {
            let why = format!("claim {name} is now {}", next.phase);
            decisions.push(Decision::act(Some(name), Action::WriteClaim(Box::new(next)), why));
        }
        let mut retry = self.apply(decisions, view, report).await;
        if requeue && report.unfinished {
            // Cut short by the deadline: the next step comes at once, in a fresh invocation.
            return retry | self.hand_on(name, report).await;
        }
        if let (true, Some(after)) = (requeue, step.requeue) {
            if let Err(e) = self.ports.queue.requeue(name, after).await {
                report.errors.push(format!("requeue of {name}: {e}"));
                retry = true;
            }
        }
        retry
    }

    /// Leaves a claim's drain to a resume message sent now (the invocation is out of time).
    /// Returns whether that failed, so the message in hand must come back instead.
    async fn hand_on(&self, claim: &str, report: &mut Report) -> bool {
        match self.ports.queue.requeue(claim, Duration::ZERO).await {
            Ok(()) => {
                report.note(Some(claim), format!("{claim}'s drain goes on in the next invocation"));
                false
            }
            Err(e) => {
                report.errors.push(format!("requeue of {claim}: {e}"));
                true
            }
        }
    }

    async fn publish_status(&self, view: &View, report: &mut Report) {
        let statuses = status::pools(view);
        for s in &statuses {
            if let Err(e) = self.ports.kube.pool_status(s).await {
                report.errors.push(format!("NodePool/{} status: {e}", s.name));
            }
        }
        for s in &view.overlays {
            if let Err(e) = self.ports.kube.overlay_status(s).await {
                report.errors.push(format!("NodeOverlay/{} status: {e}", s.name));
            }
        }
        let classes = status::classes(view);
        for s in &classes {
            if let Err(e) = self.ports.kube.class_status(s).await {
                report.errors.push(format!("EC2NodeClass/{} status: {e}", s.name));
            }
        }
        // A class that cannot get its instance profile (a role that does not exist, or that the
        // functions may not pass) says why on the class, besides its condition.
        for s in &classes {
            let Ok(resolved) = &s.resolved else { continue };
            let (None, Some(problem)) = (&resolved.instance_profile, &resolved.instance_profile_problem) else {
                continue;
            };
            let object = format!("EC2NodeClass/{}", s.name);
            if let Err(e) = self.event(&object, INSTANCE_PROFILE_FAILED, problem).await {
                report.errors.push(format!("{object} Event: {e}"));
            }
        }
        // A class that cannot launch for another reason (no image, subnet or security group, or
        // its resolution failed) says so on the class too: its pools take no pods meanwhile
        // (`Cluster::launchable_pools`), so no launch failure would say it.
        for s in &classes {
            let problem = match &s.resolved {
                Err(why) => why.clone(),
                Ok(resolved) => {
                    let missing: Vec<String> = resolved
                        .missing()
                        .into_iter()
                        .filter(|(condition, _)| *condition != crate::cluster::INSTANCE_PROFILE_READY)
                        .map(|(_, why)| why)
                        .collect();
                    if missing.is_empty() {
                        continue;
                    }
                    missing.join("; ")
                }
            };
            let object = format!("EC2NodeClass/{}", s.name);
            if let Err(e) = self.event(&object, NODECLASS_NOT_READY, &problem).await {
                report.errors.push(format!("{object} Event: {e}"));
            }
        }
        // What was skipped as invalid is said where its owner looks: an Event on the object,
        // naming the field (repeats fold into one Event with a count).
        for inv in &view.invalid {
            let message = format!("skipped: {}: {}", inv.field, inv.message);
            if let Err(e) = self.event(&inv.object, VALIDATION_FAILED, &message).await {
                report.errors.push(format!("{} Event: {e}", inv.object));
            }
        }
    }
}

/// An interruption-queue message, parsed once: its instances are asked for before the read.
/// Public for the fuzz target of the queue's messages (`fuzz/src/sqs_batch.rs`).
pub enum Parsed {
    /// `{"resume": "<claim>"}`: one step of that claim's drain.
    Resume(String),
    Event(interruption::Message),
    Malformed(interruption::ParseError),
}

impl Parsed {
    pub fn of(body: &str) -> Parsed {
        if let Err(e) = interruption::within_ceiling(body) {
            return Parsed::Malformed(e);
        }
        if let Ok(Resume { resume }) = serde_json::from_str::<Resume>(body) {
            return Parsed::Resume(resume);
        }
        match interruption::parse(body) {
            Ok(message) => Parsed::Event(message),
            Err(e) => Parsed::Malformed(e),
        }
    }
}

/// Whether an error is worth retrying the whole message for.
fn retryable(e: &PortError) -> bool {
    matches!(e, PortError::Unavailable(_) | PortError::Conflict(_))
}
