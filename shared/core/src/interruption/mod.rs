//! Interruption handling: EC2 and AWS Health events in, disruption decisions out.
//!
//! [`parse`] turns one SQS message body into a typed [`Message`]; [`decide`] turns a message and
//! the live [`Cluster`] into [`Decision`]s. This module only *starts* a disruption — it writes the
//! claim with `disruption` set and phase `Draining` — and plans the replacement capacity; the
//! termination state machine does the draining.
//!
//! Redelivery is expected (SQS is at-least-once and EventBridge may send an event twice), so a
//! claim that is already being disrupted never gets a second replacement: the decision is a note.
//! Replacement claims are named after the claim they replace, so even a decision repeated before
//! its claim write lands produces the same names (and CreateFleet client tokens).

mod parse;

pub use parse::{
    parse, parse_rfc3339, within_ceiling, Message, ParseError, CAPACITY_BLOCK_EXPIRY,
    CAPACITY_RESERVATION_INTERRUPTION, HEALTH_EVENT, REBALANCE_RECOMMENDATION, SOURCE_EC2, SOURCE_HEALTH,
    SPOT_INTERRUPTION, STATE_CHANGE,
};

use std::time::Duration;

use crate::catalog::{CapacityType, Catalog, OfferingKey};
use crate::cluster::Cluster;
use crate::decision::{Action, Decision};
use crate::disruption::block_expiry::BLOCK_RECLAIM_LEAD;
use crate::disruption::budgets;
use crate::model::RebalancePolicy;
use crate::nodeclaim::{Disruption, Phase, Reason};
use crate::replacement::{launch_replacements, node_of, plan_replacement, pods_phrase};
use crate::reservations::running_in;

/// How long an interrupted spot offering stays out of plans: the same window as a launch capacity
/// error, so a pool does not immediately buy back the capacity EC2 is reclaiming.
pub const SPOT_UNAVAILABLE_FOR: Duration = Duration::from_secs(180);

/// How long after its warning EC2 takes back a spot instance, or an instance of an interruptible
/// capacity reservation.
pub const RECLAIM_NOTICE: Duration = Duration::from_secs(120);

/// How long after its expiration warning EC2 starts terminating a Capacity Block's instances: the
/// warning comes 40 minutes before the end, the terminations from 30 minutes before it.
pub const BLOCK_EXPIRY_NOTICE: Duration = Duration::from_secs(10 * 60);

/// EC2 states after which the instance will not run pods again.
pub const DISRUPTING_STATES: [&str; 4] = ["stopping", "stopped", "shutting-down", "terminated"];

/// What to do about one message. Every message yields at least one decision, so the log always
/// says what happened to it.
pub fn decide(message: &Message, cluster: &Cluster, catalog: &Catalog) -> Vec<Decision> {
    let reason = match message {
        Message::Unknown { source, detail_type } => {
            return vec![Decision::note(
                None,
                format!("ignored: event {detail_type:?} from {source:?} is not an interruption Dovetail handles"),
            )]
        }
        Message::StateChange { instance_id, state } if !DISRUPTING_STATES.contains(&state.as_str()) => {
            return vec![Decision::note(
                None,
                format!("ignored: instance {instance_id} is now {state}, which does not take its pods away"),
            )]
        }
        Message::SpotInterruption { .. } => Reason::SpotInterrupted,
        Message::RebalanceRecommendation { .. } => Reason::Rebalance,
        Message::StateChange { .. } => Reason::InstanceStateChange,
        Message::ScheduledChange { .. } => Reason::ScheduledChange,
        Message::CapacityReservationInterruption { .. } | Message::CapacityBlockExpiry { .. } => {
            Reason::CapacityReservationInterrupted
        }
    };
    let mut out = Vec::new();
    if let Some(id) = message.reservation_id() {
        // The block's instances are those of the claims running in it (the event lists none),
        // each drained and replaced as if EC2 had warned about it alone.
        let instances: Vec<&str> = cluster
            .claims
            .iter()
            .filter(|c| running_in(c) == Some(id))
            .filter_map(|c| c.launch.as_ref().map(|l| l.instance_id.as_str()))
            .collect();
        if instances.is_empty() {
            out.push(Decision::note(None, format!("ignored: {message}: no NodeClaim runs in {id}")));
        }
        for instance_id in instances {
            decide_instance(message, reason, instance_id, cluster, catalog, &mut out);
        }
        return out;
    }
    // A Health event may name several instances; each is decided on its own, and replacements
    // planned for one are not visible to the next (they are new capacity, not existing), which at
    // worst plans a little more than needed and never less.
    for instance_id in message.instance_ids() {
        decide_instance(message, reason, instance_id, cluster, catalog, &mut out);
    }
    out
}

fn decide_instance(
    message: &Message,
    reason: Reason,
    instance_id: &str,
    cluster: &Cluster,
    catalog: &Catalog,
    out: &mut Vec<Decision>,
) {
    let Some(claim) = cluster.claims.iter().find(|c| c.launch.as_ref().is_some_and(|l| l.instance_id == instance_id))
    else {
        let why = if !cluster.knows_instance(instance_id) {
            // Not described by this read (only a caller that skipped the read's query gets here).
            format!("ignored: no NodeClaim owns instance {instance_id}")
        } else if cluster.instances.iter().any(|i| i.id == instance_id) {
            format!(
                "ignored: instance {instance_id} is tagged for this cluster but no NodeClaim owns it; \
                 the sweeper's orphan pass cleans it up"
            )
        } else {
            format!("ignored: instance {instance_id} is not Dovetail's")
        };
        out.push(Decision::note(None, why));
        return;
    };
    let launch = claim.launch.as_ref().expect("found by its launch");
    let offering = OfferingKey {
        instance_type: launch.instance_type.clone(),
        zone: launch.zone.clone(),
        capacity_type: launch.capacity_type,
    };
    // The notice counts from when EC2 sent the warning; from this decision when its time is
    // unreadable (late by the queue's delay, which the instance's disappearance then cuts short).
    let reclaim_at = match message {
        Message::SpotInterruption { time, .. } | Message::CapacityReservationInterruption { time, .. } => {
            Some(time.unwrap_or(cluster.now).plus(RECLAIM_NOTICE))
        }
        // The block's end says it exactly; without it, the notice counts from the warning.
        Message::CapacityBlockExpiry { end, time, .. } => Some(match end {
            Some(end) => end.minus(BLOCK_RECLAIM_LEAD),
            None => time.unwrap_or(cluster.now).plus(BLOCK_EXPIRY_NOTICE),
        }),
        _ => None,
    };
    let what = format!(
        "{} for {instance_id} ({} {} in {})",
        kind(message),
        offering.instance_type,
        offering.capacity_type,
        offering.zone
    );

    // Spot capacity being reclaimed is the same signal as a capacity error at launch. Marking is
    // idempotent, so duplicates repeat it rather than reason about whether the first one landed.
    if reason == Reason::SpotInterrupted && offering.capacity_type == CapacityType::Spot {
        let until = cluster.now.plus(SPOT_UNAVAILABLE_FOR);
        out.push(Decision::act(
            Some(&claim.name),
            Action::MarkUnavailable { offering: offering.clone(), until },
            format!(
                "{} {} in {} marked unavailable until {until}: EC2 is reclaiming spot capacity there",
                offering.instance_type, offering.capacity_type, offering.zone
            ),
        ));
    }

    if let Some(existing) = &claim.disruption {
        // Already on its way out. An involuntary reason arriving for a claim drained voluntarily
        // (rebalance, drift, consolidation) must stop it waiting on budgets and PDBs: escalate the
        // reason, keep the replacements already launched.
        if existing.reason.is_voluntary() && !reason.is_voluntary() {
            let mut next = claim.next_version();
            next.phase = next.phase.max(Phase::Draining);
            let message = format!(
                "{what}: already draining for {} with {}; now {reason}, so the drain no longer waits on budgets or PDBs",
                existing.reason,
                replacements_phrase(existing.replacements.len())
            );
            next.disruption = Some(Disruption { reason, message: message.clone(), reclaim_at, ..existing.clone() });
            out.push(Decision::act(Some(&claim.name), Action::WriteClaim(Box::new(next)), message));
        } else {
            out.push(Decision::note(
                Some(&claim.name),
                format!(
                    "{what}: claim {} is already being disrupted ({} since {}), no second replacement",
                    claim.name, existing.reason, existing.since
                ),
            ));
        }
        return;
    }
    if claim.phase >= Phase::Draining {
        out.push(Decision::note(
            Some(&claim.name),
            format!("{what}: claim {} is already {}, nothing to replace", claim.name, claim.phase),
        ));
        return;
    }

    let node = node_of(claim, cluster);
    let object = node.map_or_else(|| format!("NodeClaim/{}", claim.name), |n| format!("Node/{}", n.name));

    if reason == Reason::Rebalance {
        let pool = cluster.nodepools.iter().find(|p| p.name == claim.nodepool);
        let policy = pool.map(|p| p.rebalance).unwrap_or_default();
        if policy == RebalancePolicy::Ignore {
            let why = format!(
                "{what}: NodePool {} has rebalance policy Ignore, so the node keeps running until an \
                 interruption warning (set the annotation {} to Replace to replace early)",
                claim.nodepool,
                crate::model::REBALANCE_POLICY_ANNOTATION
            );
            out.push(Decision::act(
                Some(&claim.name),
                Action::Event { object, reason: "RebalanceRecommendation".into(), message: why.clone() },
                why,
            ));
            return;
        }
        // Replacing early is a voluntary disruption, so the pool's budgets apply (README: "within
        // the pool's budgets"). The recommendation is advice: with no budget left the node keeps
        // running, and a spot interruption warning, should one follow, replaces it forcefully.
        if let Some(a) = pool.map(|p| budgets::allowance(cluster, p, reason)).filter(|a| a.allowed == 0) {
            let why = format!("{what}: not replaced early: {}", a.why);
            out.push(Decision::event(Some(&claim.name), object, "RebalanceRecommendation", why));
            return;
        }
    }

    let excluded = (reason == Reason::SpotInterrupted).then_some(&offering);
    // A reservation taking its instances back (an interruptible one reclaiming, a Capacity Block
    // ending) is no home for the replacements, whatever it still counts as free.
    let closing = (reason == Reason::CapacityReservationInterrupted).then(|| running_in(claim)).flatten();
    let plan = plan_replacement(claim, node, cluster, catalog, excluded, closing);

    // A rebalance recommendation is advice, not a deadline: draining when some pods would have
    // nowhere to go trades a risk for a certainty, so the claim is left alone instead.
    if reason == Reason::Rebalance && !plan.unschedulable.is_empty() {
        let pods: Vec<String> = plan.unschedulable.iter().map(|u| format!("{} ({})", u.pod, u.reason)).collect();
        out.push(Decision::note(
            Some(&claim.name),
            format!("{what}: not replaced early: no capacity could be planned for {}", pods.join(", ")),
        ));
        return;
    }

    let (replacements, launches) = launch_replacements(claim, &plan, cluster);
    out.extend(launches);

    let moved: usize = plan.existing.iter().map(|e| e.pods.len()).sum();
    let mut sentence = format!("{what}: replacing with {}", nodes_phrase(replacements.len()));
    if moved > 0 {
        sentence.push_str(&format!(", {} fit on existing nodes", pods_phrase(moved)));
    }
    if !plan.unschedulable.is_empty() {
        sentence.push_str(&format!(", {} without a place", pods_phrase(plan.unschedulable.len())));
    }
    sentence.push_str(", ");
    sentence.push_str(match (reason, message) {
        (Reason::CapacityReservationInterrupted, Message::CapacityBlockExpiry { .. }) => {
            "draining before EC2 starts terminating the block's instances"
        }
        (Reason::SpotInterrupted, _) | (Reason::CapacityReservationInterrupted, _) => {
            "draining within the 2-minute notice"
        }
        (Reason::Rebalance, _) => "draining once the replacement is up, within budgets and PDBs",
        (Reason::InstanceStateChange, Message::StateChange { state, .. }) if state == "terminated" => {
            "the instance is already gone; releasing its pods"
        }
        (Reason::ScheduledChange, _) => "draining before the scheduled change",
        _ => "draining now",
    });

    let mut next = claim.next_version();
    next.phase = Phase::Draining;
    next.disruption = Some(Disruption {
        reason,
        since: cluster.now,
        replacements: replacements.clone(),
        message: sentence.clone(),
        reclaim_at,
    });
    out.push(Decision::act(Some(&claim.name), Action::WriteClaim(Box::new(next)), sentence.clone()));
    out.push(Decision::act(
        Some(&claim.name),
        Action::Event { object, reason: reason.to_string(), message: sentence.clone() },
        format!("record the disruption of {} as an Event", claim.name),
    ));
}

fn kind(message: &Message) -> String {
    match message {
        Message::SpotInterruption { action, .. } if action != "terminate" => {
            format!("spot interruption warning ({action})")
        }
        Message::SpotInterruption { .. } => "spot interruption warning".into(),
        Message::RebalanceRecommendation { .. } => "rebalance recommendation".into(),
        Message::StateChange { state, .. } => format!("instance state change to {state}"),
        Message::ScheduledChange { event_type_code, start_time, .. } => match start_time {
            Some(t) => format!("AWS Health scheduled change {event_type_code} starting {t}"),
            None => format!("AWS Health scheduled change {event_type_code}"),
        },
        Message::CapacityReservationInterruption { .. } => "capacity reservation interruption warning".into(),
        Message::CapacityBlockExpiry { reservation_id, end, .. } => match end {
            Some(end) => format!("Capacity Block {reservation_id} expiration warning (the block ends at {end})"),
            None => format!("Capacity Block {reservation_id} expiration warning"),
        },
        Message::Unknown { detail_type, .. } => detail_type.clone(),
    }
}

fn nodes_phrase(n: usize) -> String {
    if n == 1 {
        "1 node".into()
    } else {
        format!("{n} nodes")
    }
}

fn replacements_phrase(n: usize) -> String {
    if n == 1 {
        "1 replacement".into()
    } else {
        format!("{n} replacements")
    }
}
