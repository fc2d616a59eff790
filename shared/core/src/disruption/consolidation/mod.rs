//! Consolidation: take away nodes whose pods the rest of the cluster (plus at most one cheaper
//! node) can run, without ever creating work for the next provisioning pass.
//!
//! Karpenter's methods, in Karpenter's order:
//! 1. **empty nodes** — only DaemonSet / mirror pods, idle for `consolidateAfter` → delete (Empty);
//! 2. **multi-node** — the longest prefix (binary search, at most [`Options::max_multi_nodes`])
//!    of the candidates in disruption-cost order whose pods fit the other nodes plus at most one
//!    new claim cheaper than all of them → delete them, launching that claim first (Underutilized);
//! 3. **single-node** — each remaining candidate in order: delete it when its pods fit the other
//!    nodes, else replace it when they fit the others plus one cheaper claim (Underutilized).
//!
//! Every answer comes from the core scheduler run on the cluster as it would be: nodes removed,
//! their movable pods pending, every NodePool available. A move counts only when the scheduler
//! launches nothing (delete) or one claim (replace) — and when the next provisioning pass agrees:
//! the scheduler over exactly the snapshot that pass will see ([`after`]'s: the whole cluster in
//! its own node order, pending and moved pods together, the replacement in flight) launches
//! nothing for those pods. That check is what rules out flapping; the simulations before it only
//! find moves worth checking.
//!
//! Scaling to thousands of nodes: the scheduler is not run on the whole cluster per candidate.
//! For pods whose constraints are per node (resources, labels, taints, host ports, node affinity)
//! a first fit over an index of every node's free room — each pod to the first node in node order
//! with room, as the scheduler places pods on existing capacity — proposes the few nodes the pods
//! go to, and the scheduler runs on a snapshot of only those (plus some slack), kept in node
//! order. That answer is not the whole cluster's: first fit is not monotone, and nodes left out
//! can take a pod first and leave a later one no room. So the move found is then checked once
//! on the whole cluster (stripped to what the scheduler looks at: `Work::next_pass`).
//! Pods with topology spread or pod (anti-)affinity — and any pod while some pod in the cluster
//! has zonal anti-affinity — are simulated on that whole-cluster view directly. Whole-cluster
//! runs are bounded per pass ([`Options::max_full_simulations`]); a move without one waits.
//!
//! Reserved capacity: a reservation with an instance left is where the simulations put pods first
//! (the scheduler's own reservation round), at its token price, so a spot or on-demand node whose
//! pods fit it is replaced by a claim launched into it. A node running in a reservation is no
//! candidate at all (`candidates.rs`): the reservation is paid for whether its instance runs or
//! not, so taking it away saves nothing.
//!
//! Decisions taken in a pass are applied to a working copy at once (pods placed where the
//! scheduler put them, replacements added as in-flight nodes), so later candidates see the room
//! earlier ones used, PDB allowances already spent and per-pool budgets already consumed.
//!
//! Where things are: [`consolidate_with`] below is the pass, methods 1–3 in order; it works on
//! `work.rs`'s working copy of the cluster. Then, in the order a move goes through them:
//! - `candidates.rs` — the nodes that may go, cheapest to disrupt first, and what protects others;
//! - `search.rs` — simulating their removal, and multi-node's search for the longest prefix;
//!   `first_fit.rs` — the index that proposes the few nodes a simulation runs on;
//! - `verify.rs` — the check against the next provisioning pass ([`after`]'s snapshot);
//! - `apply.rs` — the decisions, and the working copy updated for the candidates after it.
//!
//! Also here: `quiet.rs` (skipping passes that cannot find anything new) and `synthetic.rs` (the
//! large cluster the benchmarks run on).

mod apply;
mod candidates;
mod first_fit;
pub mod quiet;
mod search;
mod synthetic;
mod verify;
mod work;

pub use synthetic::synthetic_cluster;
pub use verify::after;

use crate::catalog::Catalog;
use crate::cluster::Cluster;
use crate::decision::Decision;
use crate::model::ConsolidationPolicy;
use crate::nodeclaim::Reason;
use work::Work;

/// Bounds on the work of one pass.
#[derive(Debug, Clone)]
pub struct Options {
    /// Candidates multi-node consolidation considers at once (Karpenter: 100).
    pub max_multi_nodes: usize,
    /// Spot-to-spot replacement needs at least this many spot types cheaper than what it replaces
    /// (Karpenter: 15), so the replacement is not the one cheap pool about to be interrupted.
    pub min_spot_alternatives: usize,
    /// Whole-cluster scheduler runs per pass: simulations of pods with topology constraints, and
    /// the check of each move found against the next provisioning pass.
    pub max_full_simulations: usize,
    /// Nodes beyond the first-fit proposal given to each subset simulation as slack.
    pub slack_nodes: usize,
    /// Scheduler simulations per pass (Karpenter bounds single-node consolidation by time, 3 min);
    /// a count keeps passes deterministic. Candidates beyond it wait for the next pass.
    pub max_simulations: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_multi_nodes: 100,
            min_spot_alternatives: 15,
            max_full_simulations: 64,
            slack_nodes: 4,
            max_simulations: 1_000,
        }
    }
}

/// How many more nodes of a pool may be disrupted now for a reason (the budgets module's answer,
/// already net of nodes disrupting). Consolidation counts its own decisions against it.
pub type Allowed<'a> = &'a dyn Fn(&str, Reason) -> usize;

/// One consolidation pass with the default [`Options`].
pub fn consolidate(cluster: &Cluster, catalog: &Catalog, allowed: Allowed<'_>) -> Vec<Decision> {
    consolidate_with(cluster, catalog, allowed, &Options::default())
}

/// One pass: see the module documentation. Decisions come in the order to carry them out (a
/// replacement's `Launch` before the claim write that starts the drain); notes explain nodes a user
/// would expect to go but that stay.
pub fn consolidate_with(cluster: &Cluster, catalog: &Catalog, allowed: Allowed<'_>, opts: &Options) -> Vec<Decision> {
    let mut w = Work::new(cluster, catalog, opts);
    if !w.place_pending(allowed) {
        return w.decisions;
    }
    let candidates = w.candidates();
    // 1. Empty nodes: no simulation needed, their pods are only DaemonSet and mirror pods.
    let mut rest = Vec::new();
    for c in candidates {
        if w.movable(&c.node).is_empty() {
            w.delete_empty(&c, allowed);
        } else if c.policy == ConsolidationPolicy::WhenEmptyOrUnderutilized {
            rest.push(c);
        }
    }
    // 2. Multi-node, 3. single-node — one move per pass, as Karpenter runs one consolidation
    // command at a time: moves are simulated one by one, but the provisioning pass after them
    // re-places all their pods together, so a second move could undo what the first relied on.
    let one_move_note = |w: &mut Work<'_>| {
        w.decisions.push(Decision::note(
            None,
            "other underutilized nodes wait for the next pass: one consolidation move at a time, so the \
             next provisioning pass sees exactly the move that was simulated"
                .to_string(),
        ))
    };
    w.multi(&rest, allowed);
    if w.moves > 0 {
        one_move_note(&mut w);
        return w.decisions;
    }
    for c in &rest {
        if w.moves > 0 {
            one_move_note(&mut w);
            break;
        }
        if w.touched.contains(&c.node) {
            continue;
        }
        if w.left(&c.pool, Reason::Underutilized, allowed) == 0 {
            if w.exhausted.insert((c.pool.clone(), Reason::Underutilized)) {
                w.decisions.push(pool_blocked(&c.pool, Reason::Underutilized));
            }
            continue;
        }
        let one = std::slice::from_ref(c);
        match w.simulate(one).and_then(|sim| w.verify(one, sim)) {
            Ok(outcome) => w.commit(one, outcome),
            Err(not) => w.not_taken(c, not),
        }
    }
    w.decisions
}

/// The DisruptionBlocked Event on a NodePool whose budget allows no (more) nodes for `reason` now:
/// the nodes it would take say nothing themselves, so the pool says it once.
pub(super) fn pool_blocked(pool: &str, reason: Reason) -> Decision {
    let why = format!(
        "not consolidated further: the disruption budget of NodePool {pool} allows no more nodes for reason {reason} now"
    );
    Decision::event(None, format!("NodePool/{pool}"), crate::events::DISRUPTION_BLOCKED, why)
}

/// A price as the sentences print it.
pub(super) fn money(x: f64) -> String {
    format!("${x:.3}/h")
}
