//! The NodeClaim lifecycle: Launching → Launched → Registered → Initialized, the timeouts on the
//! way, and the end of claims whose instance vanished. Disrupted claims are handed to
//! [`crate::termination`], so [`advance`] is the one entry point the sweeper, the interruption
//! function and the simulator call for any claim.
//!
//! [`advance`] is pure and level-triggered: it reads the claim and a fresh [`Cluster`] snapshot and
//! returns a [`Step`]. It runs every transition the snapshot already allows (a Node that is Ready
//! when it is first seen takes its claim from Launched to Initialized in one step), so carrying out
//! a step's actions and advancing again on the result yields nothing new until the world moves.
//! An Initialized claim's step also keeps the claim's copy of its node's last pod event, which
//! consolidation's `consolidateAfter` counts from.
//!
//! Adapter contract: carry the actions out in order (each is idempotent), then write `claim`
//! conditional on the version that was read (`claim.version` is already the next one); on a
//! version conflict drop the step and advance again from a fresh read. A crash anywhere therefore
//! only repeats idempotent actions.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::cluster::{instance_of, node_of, Cluster};
use crate::decision::{Action, Decision, Step};
use crate::labels::{NODECLAIM, TAINT_UNREGISTERED};
use crate::nodeclaim::{NodeClaim, Phase};
use crate::termination;
use crate::time::format_duration;

/// A claim still Launching this long after it was written has failed to launch.
pub const LAUNCH_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// An instance whose Node has not registered this long after launch is given up on.
pub const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// How often to look again while a Node is expected (registration, readiness).
pub const WATCH: Duration = Duration::from_secs(10);
/// A claim's stored last pod event is brought up to its Node's only when the Node's is at least
/// this much later (Karpenter skips writing `lastPodEventTime` within 10 s the same way): a busy
/// node costs one claim write per pass at most, and idleness read from the claim alone is off by
/// less than this.
pub const POD_EVENT_DEDUPE: Duration = Duration::from_secs(10);

/// The labels a claim's Node must carry: the claim's (recorded for the launched type at launch,
/// see [`crate::nodeclaim::launched_labels`]), with the launch's type, zone and capacity type
/// whatever an older record says.
fn node_labels(claim: &NodeClaim) -> BTreeMap<String, String> {
    let mut labels = claim.labels.clone();
    if let Some(l) = &claim.launch {
        labels.insert(crate::labels::INSTANCE_TYPE.into(), l.instance_type.clone());
        labels.insert(crate::labels::ZONE.into(), l.zone.clone());
        labels.insert(crate::labels::CAPACITY_TYPE.into(), l.capacity_type.as_str().into());
    }
    labels
}

/// Advances one claim as far as the snapshot allows. A claim whose instance the snapshot did not
/// describe (a per-event read asks only for the instances of the claims it steps) is left alone:
/// its absence from the list would otherwise read as "vanished".
pub fn advance(claim: &NodeClaim, cluster: &Cluster) -> Step {
    if !cluster.knows_instance_of(claim) {
        return Step::instance_not_described(claim, WATCH);
    }
    if claim.disruption.is_some() || claim.phase >= Phase::Draining {
        return termination::step(claim, cluster);
    }
    // A launched claim whose instance vanished ends here; termination words it and releases
    // the pods (see `termination::step`).
    if claim.phase >= Phase::Launched && claim.launch.is_some() && instance_of(claim, cluster).is_none() {
        return termination::step(claim, cluster);
    }
    let now = cluster.now;
    let mut next = claim.clone();
    let mut out = Step::default();
    let name = claim.name.as_str();

    if next.phase == Phase::Launching {
        if next.launch.is_some() {
            // The launch was recorded without the phase (an older writer): the record wins.
            next.phase = Phase::Launched;
        } else {
            let age = now.since(claim.created_at);
            if age < LAUNCH_TIMEOUT {
                return out;
            }
            // Any instance that did come up late is stale: its pods were re-planned meanwhile.
            for i in cluster.instances.iter().filter(|i| i.tags.get(NODECLAIM) == Some(&claim.name)) {
                if i.state == "terminated" || i.state == "shutting-down" {
                    continue;
                }
                out.decisions.push(Decision::act(
                    Some(name),
                    Action::TerminateInstance { instance_id: i.id.clone() },
                    format!("terminating instance {} tagged for {name}: its launch had already timed out", i.id),
                ));
            }
            let why = format!(
                "launch of {name} timed out: no instance recorded {} after the claim was written (limit {})",
                format_duration(age),
                format_duration(LAUNCH_TIMEOUT)
            );
            out.decisions.push(Decision::act(
                Some(name),
                Action::Event {
                    object: format!("NodePool/{}", claim.nodepool),
                    reason: "LaunchTimeout".into(),
                    message: why.clone(),
                },
                why.clone(),
            ));
            out.decisions.push(Decision::act(Some(name), Action::DeleteClaim { name: claim.name.clone() }, why));
            return out;
        }
    }

    if next.phase == Phase::Launched {
        let launch = next.launch.clone().expect("Launched claims carry their launch");
        let pid = launch.provider_id();
        match cluster.nodes.iter().find(|n| n.provider_id.as_deref() == Some(pid.as_str())) {
            Some(node) => {
                next.phase = Phase::Registered;
                next.node_name = Some(node.name.clone());
                next.registered_at = Some(now);
                out.decisions.push(Decision::note(
                    Some(name),
                    format!("{name} registered as node {} (providerID {pid})", node.name),
                ));
            }
            None => {
                let age = now.since(launch.launched_at);
                if age >= REGISTRATION_TIMEOUT {
                    let why = format!(
                        "RegistrationTimeout: no Node with providerID {pid} registered {} after instance {} \
                         launched (limit {}); terminating it and deleting {name}",
                        format_duration(age),
                        launch.instance_id,
                        format_duration(REGISTRATION_TIMEOUT)
                    );
                    out.decisions.push(Decision::act(
                        Some(name),
                        Action::TerminateInstance { instance_id: launch.instance_id.clone() },
                        why.clone(),
                    ));
                    out.decisions.push(Decision::act(
                        Some(name),
                        Action::Event {
                            object: format!("NodePool/{}", claim.nodepool),
                            reason: "RegistrationTimeout".into(),
                            message: why.clone(),
                        },
                        why.clone(),
                    ));
                    out.decisions.push(Decision::act(
                        Some(name),
                        Action::DeleteClaim { name: claim.name.clone() },
                        why,
                    ));
                    return out;
                }
                out.requeue = Some(WATCH);
            }
        }
    }

    if next.phase == Phase::Registered {
        let node = next.node_name.as_ref().and_then(|n| cluster.nodes.iter().find(|x| &x.name == n));
        if let Some(node) = node {
            // Labels first, taint second (as Karpenter): once the taint goes, pods that select
            // the capacity type, the instance type or the claim must find them on the Node.
            let missing: BTreeMap<String, String> =
                node_labels(&next).into_iter().filter(|(k, v)| node.labels.get(k) != Some(v)).collect();
            if !missing.is_empty() || !node.termination_finalizer {
                let keys: Vec<&str> = missing.keys().map(String::as_str).collect();
                let labelled =
                    if keys.is_empty() { String::new() } else { format!("labelling it {}, ", keys.join(", ")) };
                out.decisions.push(Decision::act(
                    Some(name),
                    Action::AdoptNode { node: node.name.clone(), claim: name.to_string(), labels: missing.clone() },
                    format!("adopting node {} as {name}'s: {labelled}holding its deletion for the drain", node.name),
                ));
            }
            // Level-triggered: as long as the Node carries the taint, ask for its removal.
            if node.taints.iter().any(|t| t.key == TAINT_UNREGISTERED) {
                out.decisions.push(Decision::act(
                    Some(name),
                    Action::RemoveTaint { node: node.name.clone(), key: TAINT_UNREGISTERED.into() },
                    format!("removing {TAINT_UNREGISTERED} from node {}: it is matched to {name}", node.name),
                ));
            }
            // The control plane's not-ready lingers a moment after the node turns Ready: until
            // it goes, pods cannot land, and an Initialized claim's node takes no more than it
            // shows (Karpenter waits for its known ephemeral taints the same way).
            let waiting_on: Vec<String> = node
                .taints
                .iter()
                .filter(|t| {
                    t.is_ephemeral() || next.startup_taints.iter().any(|s| t.key == s.key && t.effect == s.effect)
                })
                .map(ToString::to_string)
                .collect();
            if node.ready && waiting_on.is_empty() {
                next.phase = Phase::Initialized;
                next.initialized_at = Some(now);
                out.decisions
                    .push(Decision::note(Some(name), format!("{name} initialized: node {} is Ready", node.name)));
                out.requeue = None;
            } else {
                let why = if node.ready {
                    format!("still tainted with startup or not-ready taints {}", waiting_on.join(", "))
                } else {
                    "not Ready yet".to_string()
                };
                out.decisions
                    .push(Decision::note(Some(name), format!("{name} not initialized: node {} is {why}", node.name)));
                out.requeue = Some(WATCH);
            }
        }
    }

    if next.phase == Phase::Initialized {
        record_pod_event(&mut next, cluster, &mut out);
    }

    if next != *claim {
        next.version = claim.version + 1;
        out.claim = Some(next);
    }
    out
}

/// Copies the Node's last pod event onto the claim when it is [`POD_EVENT_DEDUPE`] or more later
/// than the claim's. The Node's value lives only in the warm snapshot that saw the events; the
/// claim's survives a cold start, which would otherwise forget that a pod left a minute ago and
/// consolidate the node early.
fn record_pod_event(next: &mut NodeClaim, cluster: &Cluster, out: &mut Step) {
    let Some(node) = node_of(next, cluster) else { return };
    let Some(seen) = node.last_pod_event else { return };
    if next.last_pod_event.is_some_and(|stored| seen < stored.plus(POD_EVENT_DEDUPE)) {
        return;
    }
    next.last_pod_event = Some(seen);
    out.decisions.push(Decision::note(
        Some(&next.name),
        format!("{}: last pod event on node {} at {seen}", next.name, node.name),
    ));
}

/// Advances every claim in the snapshot (the sweeper's pass).
///
/// Claims are stepped one after the other, and evictions one claim's step emits use up the
/// disruptions its PodDisruptionBudgets allow before the next claim is stepped: two nodes
/// draining at once never plan more evictions against one budget than it allows.
pub fn advance_all(cluster: &Cluster) -> Vec<Step> {
    let mut working: Option<Cluster> = None;
    let mut steps = Vec::with_capacity(cluster.claims.len());
    for claim in &cluster.claims {
        let step = advance(claim, working.as_ref().unwrap_or(cluster));
        let evicted: Vec<(&str, &str)> = step
            .actions()
            .filter_map(|a| match a {
                Action::Evict { namespace, name } => Some((namespace.as_str(), name.as_str())),
                _ => None,
            })
            .collect();
        if !evicted.is_empty() && !cluster.pdbs.is_empty() {
            let w = working.get_or_insert_with(|| cluster.clone());
            for (ns, name) in evicted {
                let pod = w.nodes.iter().flat_map(|n| n.pods.iter()).find(|p| p.namespace == ns && p.name == name);
                let Some(pod) = pod.cloned() else { continue };
                for pdb in w.pdbs.iter_mut().filter(|b| b.covers(&pod)) {
                    pdb.disruptions_allowed -= 1;
                }
            }
        }
        steps.push(step);
    }
    steps
}
