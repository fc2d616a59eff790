//! The sweeper's pass: every minute, one pure function of the live state decides what to advance,
//! clean up and take away — in Karpenter's order of urgency, each stage seeing the claims the
//! stages before it decided to disrupt (so budgets count them).
//!
//! 1. lifecycle and termination steps of every claim (timeouts, registration, drains);
//! 2. orphans (instances, claims and nodes that lost their other half);
//! 3. expiration — forceful, not subject to budgets;
//! 4. drift — within budgets, replacement capacity planned and launched first, then the drain;
//! 5. consolidation — within what the budgets still allow.

use crate::catalog::Catalog;
use crate::interruption::{launch_replacements, node_of, plan_replacement};
use crate::lifecycle;
use crate::nodeclaim::Reason;

use super::{budgets, consolidation, drift, expiration, orphans, Action, Cluster, Decision};

/// Everything the sweeper should do now, in order, each with its sentence.
pub fn sweep(cluster: &Cluster, catalog: &Catalog) -> Vec<Decision> {
    let mut state = cluster.clone();
    let mut out = Vec::new();

    for step in lifecycle::advance_all(cluster) {
        out.extend(step.decisions);
        if let Some(next) = step.claim {
            state.record(&next);
            let (name, why) = (next.name.clone(), format!("claim {} is now {}", next.name, next.phase));
            out.push(Decision::act(Some(&name), Action::WriteClaim(Box::new(next)), why));
        }
    }

    out.extend(orphans::orphans(&state));

    for d in expiration::expirations(&state) {
        if let Some(Action::WriteClaim(c)) = &d.action {
            state.record(c);
        }
        out.push(d);
    }

    let drifted = drift::plan(&state);
    out.extend(drifted.notes);
    for d in drifted.replace {
        let Some(claim) = state.claims.iter().find(|c| c.name == d.claim).cloned() else { continue };
        let plan = plan_replacement(&claim, node_of(&claim, &state), &state, catalog, None);
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
                state.record(c);
            }
            out.push(m);
        }
    }

    let allowed = |pool: &str, reason: Reason| {
        state.nodepools.iter().find(|p| p.name == pool).map_or(0, |p| budgets::allowance(&state, p, reason).allowed)
    };
    out.extend(consolidation::consolidate(&state, catalog, &allowed));
    out
}
