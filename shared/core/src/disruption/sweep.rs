//! The sweeper's pass: every minute, one pure function of the live state decides what to advance,
//! clean up and take away — in Karpenter's order of urgency, each stage seeing the claims the
//! stages before it decided to disrupt (so budgets count them).
//!
//! 1. lifecycle and termination steps of every claim (timeouts, registration, drains);
//! 2. orphans (instances, claims and nodes that lost their other half);
//! 3. node repair — unhealthy nodes of pools that opted in, forceful, not subject to budgets;
//! 4. expiration — forceful, not subject to budgets;
//! 5. drift — within budgets, replacement capacity planned and launched first, then the drain;
//! 6. consolidation — within what the budgets still allow.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::catalog::Catalog;
use crate::lifecycle;
use crate::nodeclaim::Reason;
use crate::replacement::{launch_replacements, node_of, plan_replacement};

use super::consolidation::quiet::Quiet;
use super::{block_expiry, budgets, consolidation, drift, expiration, orphans, repair};
use crate::cluster::Cluster;
use crate::decision::{Action, Decision};

/// Everything the sweeper should do now, in order, each with its sentence.
pub fn sweep(cluster: &Cluster, catalog: &Catalog) -> Vec<Decision> {
    sweep_with(cluster, catalog, &Quiet::new())
}

/// [`sweep`], skipping the consolidation stage when `quiet` knows a pass over the same inputs
/// decides nothing (see [`consolidation::quiet`]), and remembering this pass's outcome in it.
pub fn sweep_with(cluster: &Cluster, catalog: &Catalog, quiet: &Quiet) -> Vec<Decision> {
    // Copied only when a stage records a write (most sweeps of a steady cluster record none).
    let mut state = Cow::Borrowed(cluster);
    let mut out = Vec::new();

    for step in lifecycle::advance_all(cluster) {
        out.extend(step.decisions);
        if let Some(next) = step.claim {
            state.to_mut().record(&next);
            let (name, why) = (next.name.clone(), format!("claim {} is now {}", next.name, next.phase));
            out.push(Decision::act(Some(&name), Action::WriteClaim(Box::new(next)), why));
        }
    }

    out.extend(orphans::orphans(&state));

    // Each of the forceful stages sees the claims the one before it took.
    for stage in [repair::repairs, expiration::expirations, block_expiry::expiring_blocks] {
        for d in stage(&state) {
            if let Some(Action::WriteClaim(c)) = &d.action {
                state.to_mut().record(c);
            }
            out.push(d);
        }
    }

    let drifted = drift::plan(&state);
    out.extend(drifted.notes);
    for d in drifted.replace {
        let Some(claim) = state.claims.iter().find(|c| c.name == d.claim).cloned() else { continue };
        let plan = plan_replacement(&claim, node_of(&claim, &state), &state, catalog, None, None);
        if !plan.unschedulable.is_empty() {
            // Launch first, then drain: with pods that would have nowhere to go, wait.
            let pods: Vec<String> = plan.unschedulable.iter().map(|u| format!("{} ({})", u.pod, u.reason)).collect();
            out.push(Decision::note(
                Some(&claim.name),
                format!("{}; not replaced yet: no capacity could be planned for {}", d.why, pods.join(", ")),
            ));
            continue;
        }
        let (names, launches) = launch_replacements(&claim, &plan, &state);
        out.extend(launches);
        for m in drift::mark_drifted(&claim, &d, names, state.now) {
            if let Some(Action::WriteClaim(c)) = &m.action {
                state.to_mut().record(c);
            }
            out.push(m);
        }
    }

    // Asked for each candidate; the answer only changes with the state, which is fixed from here.
    let answers: RefCell<BTreeMap<(String, Reason), usize>> = RefCell::default();
    let allowed = |pool: &str, reason: Reason| {
        if let Some(n) = answers.borrow().get(&(pool.to_string(), reason)) {
            return *n;
        }
        let n = state
            .nodepools
            .iter()
            .find(|p| p.name == pool)
            .map_or(0, |p| budgets::allowance(&state, p, reason).allowed);
        answers.borrow_mut().insert((pool.to_string(), reason), n);
        n
    };
    let fingerprint = consolidation::quiet::fingerprint(&state, &allowed);
    if let Some(events) = quiet.known(fingerprint) {
        out.push(Decision::note(
            None,
            "consolidation skipped: nothing it depends on changed since the last pass, which found nothing to do",
        ));
        out.extend(events);
        return out;
    }
    let moves = consolidation::consolidate(&state, catalog, &allowed);
    quiet.record(fingerprint, &moves);
    out.extend(moves);
    out
}
