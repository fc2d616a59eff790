//! Carrying a move out: the decisions (the claim write that starts the drain, its Event, a
//! replacement's launch first) and the working copy updated so later candidates see the move.

use rustc_hash::FxHashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use super::candidates::{blocked, Candidate};
use super::search::Outcome;
use super::verify::planned_node;
use super::work::Work;
use super::{money, pool_blocked, Allowed};
use crate::decision::{launch_once, Action, Decision};
use crate::model::Pod;
use crate::nodeclaim::{Disruption, NodeClaim, Reason};
use crate::scheduler::PlannedClaim;

impl<'a> Work<'a> {
    pub(super) fn delete_empty(&mut self, c: &Candidate, allowed: Allowed<'_>) {
        let claim = &self.cluster.claims[c.claim];
        if self.left(&c.pool, Reason::Empty, allowed) == 0 {
            let why = format!(
                "node {} is empty but NodePool {}'s disruption budget allows no more nodes now",
                c.node, c.pool
            );
            self.decisions.push(blocked(&claim.name, &c.node, why));
            if self.exhausted.insert((c.pool.clone(), Reason::Empty)) {
                self.decisions.push(pool_blocked(&c.pool, Reason::Empty));
            }
            return;
        }
        let since = claim.idle_since(self.node(&c.node));
        let idle = crate::time::format_duration(self.cluster.now.since(since));
        let saving = c.price.map(|p| format!(", saving {}", money(p))).unwrap_or_default();
        let why = format!("deleting empty node {} ({}): only DaemonSet pods for {idle}{saving}", c.node, c.what);
        self.disrupt(c, Reason::Empty, vec![], why);
        self.remove_nodes(std::slice::from_ref(&c.node));
    }

    /// Records the claim write that starts the drain (its Events follow from it: see
    /// [`crate::events::complete`]).
    fn disrupt(&mut self, c: &Candidate, reason: Reason, replacements: Vec<String>, why: String) {
        let mut claim: NodeClaim = self.cluster.claims[c.claim].next_version();
        claim.disruption =
            Some(Disruption { reason, since: self.cluster.now, replacements, message: why.clone(), reclaim_at: None });
        *self.used.entry(c.pool.clone()).or_default() += 1;
        self.touched.insert(c.node.clone());
        let name = claim.name.clone();
        self.decisions.push(Decision::act(Some(&name), Action::WriteClaim(Box::new(claim)), why));
    }

    /// Applies a successful simulation: decisions out, working state updated.
    pub(super) fn commit(&mut self, nodes: &[Candidate], outcome: Outcome) {
        self.moves += 1;
        let pods: Vec<Pod> = nodes.iter().flat_map(|c| self.movable(&c.node)).cloned().collect();
        for (i, pdb) in self.cluster.pdbs.iter().enumerate() {
            self.pdb_left[i] -= pods.iter().filter(|p| pdb.covers(p)).count() as i32;
        }
        let by_key: FxHashMap<String, Pod> = pods.into_iter().map(|p| (p.key(), p)).collect();
        let total: f64 = nodes.iter().filter_map(|c| c.price).sum();
        let names: Vec<String> = nodes.iter().map(|c| c.node.clone()).collect();
        let mut list = String::new();
        for (i, c) in nodes.iter().enumerate() {
            let _ = write!(list, "{}{} ({})", if i > 0 { ", " } else { "" }, c.node, c.what);
        }
        self.remove_nodes(&names);
        let (plan, replacement) = match outcome {
            Outcome::Delete(plan) => (plan, None),
            // Named by `verify`, which checked the next pass with it in flight under that name.
            Outcome::Replace(mut plan) => {
                let claim = plan.nodeclaims.remove(0);
                (plan, Some(claim))
            }
        };
        // A delete's plan is the next pass's own, pending pods included: count the moved ones.
        let targets = plan.existing.iter().filter(|e| e.pods.iter().any(|k| by_key.contains_key(k))).count();
        self.place(&plan, &by_key);
        let why = match &replacement {
            None => format!(
                "deleting underutilized {} {list}: {} pods fit on {targets} other nodes, saving {}",
                if nodes.len() == 1 { "node" } else { "nodes" },
                by_key.len(),
                money(total)
            ),
            Some(r) => format!(
                "replaced {list} by {} {}, saving {} ({} pods: {} to the new node, the rest to {targets} other nodes)",
                r.instance_type,
                r.capacity_type.as_str(),
                money(total - r.price_per_hour),
                by_key.len(),
                r.pods.len()
            ),
        };
        let mut replacements = vec![];
        if let Some(r) = replacement {
            replacements.push(r.name.clone());
            self.add_inflight(&r, &by_key);
            let owner = &self.cluster.claims[nodes[0].claim].name;
            self.decisions.push(launch_once(self.cluster, Some(owner), r, why.clone()));
        }
        for c in nodes {
            self.disrupt(c, Reason::Underutilized, replacements.clone(), why.clone());
        }
        self.refresh(&[]);
    }

    /// The replacement as an in-flight node carrying its pods and the DaemonSet pods that will
    /// run on it, so later candidates see what room it has left.
    fn add_inflight(&mut self, r: &PlannedClaim, pods: &FxHashMap<String, Pod>) {
        let mut node = planned_node(r, &self.snap.nodepools, &self.snap.daemonsets);
        for key in &r.pods {
            if let Some(p) = pods.get(key) {
                let mut p = p.clone();
                p.node_name = Some(r.name.clone());
                node.pods.push(Arc::new(p));
            }
        }
        self.touched.insert(r.name.clone());
        self.snap.nodes.push(node);
        self.refresh(&[]);
    }
}
