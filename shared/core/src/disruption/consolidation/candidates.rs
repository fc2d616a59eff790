//! Candidates: the nodes consolidation may take away (initialized, idle for their pool's
//! `consolidateAfter`, not protected), cheapest to disrupt first, and what protects the others:
//! do-not-disrupt, pods without a controller, PodDisruptionBudgets.

use rustc_hash::FxHashMap;
use std::sync::Arc;

use super::work::{NotTaken, Work};
use crate::decision::Decision;
use crate::events;
use crate::labels;
use crate::model::{ConsolidationPolicy, NodePool, OwnerKind, Pod};
use crate::nodeclaim::Phase;
use crate::protection::{do_not_disrupt, eviction_cost, pod_protected};

/// A node consolidation may take away.
#[derive(Debug, Clone)]
pub(super) struct Candidate {
    pub(super) claim: usize,
    pub(super) node: String,
    pub(super) pool: String,
    pub(super) policy: ConsolidationPolicy,
    pub(super) price: Option<f64>,
    /// `m5.2xlarge spot`, for sentences.
    pub(super) what: String,
    pub(super) spot: bool,
    pub(super) cost: f64,
}

impl<'a> Work<'a> {
    /// Claims whose nodes consolidation may take away, cheapest to disrupt first; a
    /// DisruptionBlocked Event for each node a user would expect to go that is protected.
    pub(super) fn candidates(&mut self) -> Vec<Candidate> {
        let cluster = self.cluster;
        let now = cluster.now;
        let pools: FxHashMap<&str, &NodePool> = cluster.nodepools.iter().map(|p| (p.name.as_str(), p)).collect();
        let mut out = Vec::new();
        let mut notes = Vec::new();
        for (ci, claim) in cluster.claims.iter().enumerate() {
            if claim.phase != Phase::Initialized || claim.disruption.is_some() {
                continue;
            }
            let Some(node_name) = claim.node_name.as_deref() else { continue };
            if self.touched.contains(node_name) {
                continue;
            }
            let Some(node) = self.node(node_name) else { continue };
            if node.unschedulable {
                continue;
            }
            let Some(pool) = pools.get(claim.nodepool.as_str()) else { continue };
            let Some(after) = pool.disruption.consolidate_after else { continue };
            let idle = now.since(claim.idle_since(Some(node)));
            if idle < after {
                continue;
            }
            let movable: Vec<&Pod> =
                node.pods.iter().map(Arc::as_ref).filter(|p| !p.is_daemon() && !p.is_mirror()).collect();
            // Not a candidate whatever protects it: nothing to say about it.
            if !movable.is_empty() && pool.disruption.consolidation_policy == ConsolidationPolicy::WhenEmpty {
                continue;
            }
            // A node in a reservation costs nothing to keep: taking it away (alone, or with others
            // whose saving it would only ride on) saves nothing and leaves the reservation's
            // instance unused. Karpenter deletes it at the reserved offering's token price.
            if let Some(r) = crate::reservations::paid_for(cluster, claim) {
                let why = format!(
                    "not consolidated: it runs in capacity reservation {}, paid for whether it runs or not, so taking it away saves nothing",
                    r.id
                );
                notes.push(events::on_node(&claim.name, &node.name, events::UNCONSOLIDATABLE, why));
                continue;
            }
            let note = |why: String| blocked(&claim.name, &node.name, why);
            if let Some(why) = do_not_disrupt(&node.annotations, claim.initialized_at.or(claim.registered_at), now) {
                notes.push(note(format!("node {} has {why}", node.name)));
                continue;
            }
            if let Some(why) = movable.iter().find_map(|p| self.pod_blocked(p)) {
                notes.push(note(why));
                continue;
            }
            // Karpenter's disruption cost: what evicting costs, scaled by how much of the node's
            // life is left (a node about to expire goes anyway, so disrupting it costs little).
            let lifetime = match claim.expire_after {
                Some(e) if !e.is_zero() => {
                    let age = now.since(claim.created_at).as_secs_f64();
                    (1.0 - age / e.as_secs_f64()).clamp(0.0, 1.0)
                }
                _ => 1.0,
            };
            let cost = movable.iter().map(|p| eviction_cost(p)).sum::<f64>() * lifetime;
            let price = claim.launch.as_ref().map(|l| l.price).or(node.price);
            let itype = claim
                .launch
                .as_ref()
                .map(|l| l.instance_type.clone())
                .or_else(|| node.labels.get(labels::INSTANCE_TYPE).cloned())
                .unwrap_or_else(|| "unknown type".into());
            let ct = node.labels.get(labels::CAPACITY_TYPE).cloned().unwrap_or_default();
            out.push(Candidate {
                claim: ci,
                node: node.name.clone(),
                pool: pool.name.clone(),
                policy: pool.disruption.consolidation_policy,
                price,
                what: format!("{itype} {ct}").trim().to_string(),
                spot: ct == labels::CAPACITY_SPOT,
                cost,
            });
        }
        self.decisions.extend(notes);
        out.sort_by(|a, b| a.cost.total_cmp(&b.cost).then_with(|| a.node.cmp(&b.node)));
        out
    }

    /// What a candidate's owner is told when it is not consolidated: an Event on its node (and
    /// NodeClaim) when something protects it or nothing cheaper was found, a note when this pass
    /// only ran out of simulations.
    pub(super) fn not_taken(&mut self, c: &Candidate, not: NotTaken) {
        let claim = &self.cluster.claims[c.claim].name;
        let decision = match not {
            NotTaken::Blocked(why) => blocked(claim, &c.node, why),
            NotTaken::Unconsolidatable(why) => {
                events::on_node(claim, &c.node, events::UNCONSOLIDATABLE, format!("not consolidated: {why}"))
            }
            NotTaken::Later(why) => Decision::note(Some(claim), format!("not consolidated: {why}")),
        };
        self.decisions.push(decision);
    }

    /// Why a pod keeps its node: do-not-disrupt, no controller to recreate it, or a PDB that
    /// allows no eviction now.
    pub(super) fn pod_blocked(&self, p: &Pod) -> Option<String> {
        if let Some(why) = pod_protected(p, self.cluster.now) {
            return Some(why);
        }
        if p.owner == OwnerKind::None {
            return Some(format!("pod {} has no controller to recreate it elsewhere", p.key()));
        }
        for (i, pdb) in self.cluster.pdbs.iter().enumerate() {
            if pdb.covers(p) && self.pdb_left[i] <= 0 {
                return Some(format!(
                    "pod {} is covered by PodDisruptionBudget {}/{}, which allows no more disruptions now",
                    p.key(),
                    pdb.namespace,
                    pdb.name
                ));
            }
        }
        None
    }

    /// Whether evicting all these pods together stays within every PDB's allowance.
    pub(super) fn pdbs_allow(&self, pods: &[Pod]) -> Result<(), String> {
        for (i, pdb) in self.cluster.pdbs.iter().enumerate() {
            let n = pods.iter().filter(|p| pdb.covers(p)).count() as i32;
            if n > self.pdb_left[i] {
                return Err(format!(
                    "PodDisruptionBudget {}/{} allows {} more disruptions, the move would evict {n}",
                    pdb.namespace, pdb.name, self.pdb_left[i]
                ));
            }
        }
        Ok(())
    }
}

/// A DisruptionBlocked Event on a candidate's node: `why` names what protects it.
pub(super) fn blocked(claim: &str, node: &str, why: String) -> Decision {
    events::on_node(claim, node, events::DISRUPTION_BLOCKED, format!("not consolidated: {why}"))
}
