//! Validation: a move stands only if the next provisioning pass, the scheduler over exactly the
//! cluster that pass will see, launches nothing for its pods — the check that rules out flapping.
//! Holds that pass's snapshot ([`after`]) and the cheaper view of it consolidation checks on.

use rustc_hash::FxHashSet;
use std::collections::BTreeMap;

use super::candidates::Candidate;
use super::search::{Outcome, Simulated};
use super::work::{NotTaken, Work};
use crate::cluster::{unbound, vacate_leaving, Cluster};
use crate::decision::{Action, Decision};
use crate::labels;
use crate::model::{DaemonSet, Node, NodePool};
use crate::provisioning;
use crate::resources::Resources;
use crate::scheduler::{self, PlannedClaim};
use crate::snapshot::Snapshot;

impl<'a> Work<'a> {
    /// No flapping: a move stands only if the provisioning pass after it — the scheduler over
    /// exactly the cluster that pass will see ([`Work::next_pass`]: the whole cluster in its own
    /// node order, pending and moved pods together, the replacement in flight) — launches nothing
    /// and leaves nothing unscheduled. A simulation on a subset of the nodes cannot promise that:
    /// the scheduler places pods first fit in node order, and packing is not monotone — nodes the
    /// subset left out can take a pod first and leave a later one no room anywhere. For a delete
    /// the plan returned is the next pass's own.
    pub(super) fn verify(&mut self, nodes: &[Candidate], sim: Simulated) -> Result<Outcome, NotTaken> {
        if sim.exact {
            return Ok(sim.outcome);
        }
        self.spend_full_simulation("checking the move against the next provisioning pass needs a run, but ")
            .map_err(NotTaken::Later)?;
        let names: FxHashSet<&str> = nodes.iter().map(|c| c.node.as_str()).collect();
        let (outcome, next) = match sim.outcome {
            Outcome::Delete(_) => {
                let next = scheduler::simulate(&self.next_pass(&names, None), self.catalog, &self.types);
                if next.nodeclaims.is_empty() && next.unschedulable.is_empty() {
                    return Ok(Outcome::Delete(next));
                }
                ("its pods fit the other nodes only when packed", next)
            }
            Outcome::Replace(mut plan) => {
                // Named as it will be launched: the next pass sees it under that name.
                let claim = &mut plan.nodeclaims[0];
                claim.name = format!("{}-consolidation", self.cluster.claims[nodes[0].claim].name);
                claim.labels.insert(labels::NODECLAIM.into(), claim.name.clone());
                let next = scheduler::simulate(&self.next_pass(&names, Some(claim)), self.catalog, &self.types);
                if next.nodeclaims.is_empty() && next.unschedulable.is_empty() {
                    return Ok(Outcome::Replace(plan));
                }
                ("its pods fit the replacement and the other nodes only when packed", next)
            }
        };
        let stray = next
            .nodeclaims
            .iter()
            .flat_map(|c| c.pods.first())
            .chain(next.unschedulable.iter().map(|u| &u.pod))
            .next()
            .cloned()
            .unwrap_or_default();
        Err(NotTaken::Unconsolidatable(format!(
            "{outcome} the simulation's way; the next provisioning pass, placing them first fit over the \
             whole cluster, would need new capacity for pod {stray} (it would flap)"
        )))
    }

    /// What the provisioning pass after taking `names` away schedules — [`after`]'s snapshot
    /// (the cluster as it was, minus the nodes gone this pass and `names`; the replacement in
    /// flight at the end; the pending pods, then the moved pods in node order) — made cheap
    /// without changing its answer: pods the scheduler cannot tell apart from plain requests
    /// (no host ports, no anti-affinity, selected by no topology term of a pod to place) are
    /// dropped and their requests taken off the node's allocatable, so every node keeps its free
    /// room, its order, its taints, the labels the scheduler reads and the pods topology counts.
    pub(super) fn next_pass(&self, names: &FxHashSet<&str>, replacement: Option<&PlannedClaim>) -> Snapshot {
        // One move per pass: no replacement of an earlier move is in flight in the working copy,
        // so the cluster's own nodes, minus those gone, are all the next pass sees.
        debug_assert_eq!(self.moves, 0);
        let leaving = crate::cluster::leaving(self.cluster);
        let live = |(i, n): &(usize, &Node)| !self.gone[*i] && !names.contains(n.name.as_str());
        // Pending pods, then those of nodes already leaving (as `Work::new` takes them: room is
        // kept for them, see `vacate_leaving`), then the moved ones — `after`'s order.
        let mut pods = self.cluster.pending.clone();
        for (_, n) in self.cluster.nodes.iter().enumerate().filter(live) {
            if crate::cluster::is_leaving(n, &leaving) {
                pods.extend(unbound(n));
            }
        }
        for n in self.cluster.nodes.iter().filter(|n| names.contains(n.name.as_str())) {
            pods.extend(unbound(n));
        }
        let mut selectors: Vec<&crate::model::LabelSelector> = Vec::new();
        for p in &pods {
            let terms = p.pod_affinity.iter().chain(&p.pod_anti_affinity).map(|t| &t.selector);
            let preferred =
                p.preferred_pod_affinity.iter().chain(&p.preferred_pod_anti_affinity).map(|w| &w.term.selector);
            for s in p.topology_spread.iter().map(|t| &t.selector).chain(terms).chain(preferred) {
                if !selectors.contains(&s) {
                    selectors.push(s); // replicas share selectors: each is matched against every pod
                }
            }
        }
        // With no topology in play, the scheduler reads an existing node's labels only through the
        // pods' node requirements (and the hostname, the domain of existing pods' anti-affinity):
        // copying just those keeps the check cheap where it runs most, on pods without topology.
        let label_keys: Option<FxHashSet<&str>> = (selectors.is_empty() && !self.wide_anti).then(|| {
            pods.iter()
                .flat_map(|p| {
                    p.node_affinity
                        .iter()
                        .chain(p.preferred_node_affinity.iter().map(|w| &w.term))
                        .chain(std::iter::once(&p.volume_requirements))
                })
                .flat_map(|r| r.keys())
                .chain(std::iter::once(labels::HOSTNAME))
                .collect()
        });
        let mut nodes = Vec::with_capacity(self.cluster.nodes.len() + 1);
        for (_, n) in self.cluster.nodes.iter().enumerate().filter(live) {
            let is_leaving = crate::cluster::is_leaving(n, &leaving);
            let mut allocatable = n.allocatable.clone();
            let mut kept = Vec::new();
            for p in &n.pods {
                if is_leaving && !p.is_daemon() && !p.is_mirror() {
                    continue; // pending above
                }
                if !p.host_ports.is_empty()
                    || !p.pod_anti_affinity.is_empty()
                    || selectors.iter().any(|s| s.matches(&p.labels))
                {
                    kept.push(p.clone());
                } else {
                    allocatable.sub(&p.requests);
                }
            }
            let labels = match &label_keys {
                None => n.labels.clone(),
                Some(keys) => n
                    .labels
                    .iter()
                    .filter(|(k, _)| keys.contains(k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            };
            nodes.push(Node {
                name: n.name.clone(),
                kind: n.kind,
                labels,
                annotations: BTreeMap::new(),
                taints: n.taints.clone(),
                allocatable,
                pods: kept,
                unschedulable: n.unschedulable || is_leaving,
                price: n.price,
                provider_id: None,
                ready: n.ready,
                deleting: n.deleting,
                termination_finalizer: false,
                last_pod_event: n.last_pod_event,
                conditions: vec![],
            });
        }
        if let Some(r) = replacement {
            nodes.push(planned_node(r, &self.cluster.nodepools, &self.cluster.daemonsets));
        }
        Snapshot { pods, nodes, ..self.context() }
    }
}

/// The cluster as it is once `decisions` are carried out and the moved pods are pending again:
/// nodes whose claims consolidation disrupts gone, replacements in flight, and their non-daemon
/// pods in `pods` — after the pods of nodes already leaving, cordoned, which consolidation keeps
/// room for too. What the next provisioning pass would see; tests run the scheduler on it, and
/// consolidation checks each move on the same snapshot (`Work::next_pass`).
pub fn after(cluster: &Cluster, decisions: &[Decision]) -> Snapshot {
    let mut gone: FxHashSet<String> = FxHashSet::default();
    let mut launched: Vec<&PlannedClaim> = vec![];
    for d in decisions {
        match &d.action {
            Some(Action::WriteClaim(c)) if c.disruption.is_some() => {
                if let Some(n) = &c.node_name {
                    gone.insert(n.clone());
                }
            }
            Some(Action::Launch(p)) => launched.push(p),
            _ => {}
        }
    }
    let mut snap = Snapshot {
        pods: cluster.pending.clone(),
        nodes: vec![],
        daemonsets: cluster.daemonsets.clone(),
        nodepools: cluster.nodepools.clone(),
        nodeclasses: cluster.nodeclasses.clone(),
        unavailable: cluster.unavailable.clone(),
        namespaces: cluster.namespaces.clone(),
        min_values_policy: cluster.min_values_policy,
        // What this checks is room for the pods, not what it costs.
        cost_limit: None,
        reservations: crate::reservations::open(cluster),
    };
    let mut moved = vec![];
    for n in &cluster.nodes {
        if gone.contains(&n.name) {
            moved.extend(unbound(n));
        } else {
            snap.nodes.push(n.clone());
        }
    }
    // Nodes already leaving are cordoned and their pods need room too, as consolidation saw them.
    snap.pods.extend(vacate_leaving(cluster, &mut snap.nodes));
    snap.pods.extend(moved);
    for r in launched {
        let node = planned_node(r, &cluster.nodepools, &cluster.daemonsets);
        snap.nodes.push(node);
    }
    snap
}

/// A planned replacement as an in-flight node (its DaemonSet pods included, its own pods not).
pub(super) fn planned_node(r: &PlannedClaim, pools: &[NodePool], daemonsets: &[DaemonSet]) -> Node {
    let allocatable =
        Resources::from_quantities(r.allocatable.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap_or_default();
    let pool = pools.iter().find(|p| p.name == r.nodepool);
    provisioning::inflight_node(&r.name, &r.labels, allocatable, Some(r.price_per_hour), pool, daemonsets)
}

#[cfg(test)]
mod tests {
    use super::super::Options;
    use super::*;
    use crate::benchmark;
    use crate::catalog::embedded;
    use crate::model::{OwnerKind, Pod};
    use crate::nodeclaim::{Disruption, NodeClaim, Phase, Reason};
    use crate::scheduler::ExistingPlacement;
    use crate::scheduler::Plan;
    use crate::time::Time;
    use std::sync::Arc;
    use std::time::Duration;

    /// `no_flapping`'s shrunk case (the `the_next_pass_packs_in_node_order` scenario): n0, n1
    /// and n4 hold 898m, 1517m, 2415m, 1161m and 1114m; n2 and n3 have 2414m and 5587m free and
    /// pods without a controller, so they stay.
    fn cluster() -> Cluster {
        let (mut pool, class) = benchmark::default_pool();
        pool.requirements = benchmark::general_purpose_pool().requirements;
        let now = Time::from_secs(1_750_000_000);
        let mut c = Cluster {
            now,
            nodepools: vec![pool],
            nodeclasses: vec![class],
            daemonsets: benchmark::eks_daemonsets(),
            ..Default::default()
        };
        type Pods = &'static [(&'static str, i64)];
        let nodes: [(&str, &str, Pods); 5] = [
            ("n0", "m5.2xlarge", &[("web-0", 898), ("web-1", 1517), ("web-2", 2415)]),
            ("n1", "m5.large", &[("web-3", 1161)]),
            ("n2", "m5.xlarge", &[("solo-0", 1351)]),
            ("n3", "m5.2xlarge", &[("web-4", 2109), ("solo-1", 59)]),
            ("n4", "m5.large", &[("web-5", 1114)]),
        ];
        for (name, itype, pods) in nodes {
            let t = embedded().get(itype).expect("type");
            let mut l = t.requirements.single_valued_labels();
            l.insert(labels::HOSTNAME.into(), name.into());
            l.insert(labels::ZONE.into(), t.cheapest().map(|o| o.zone.clone()).unwrap_or_default());
            l.insert(labels::CAPACITY_TYPE.into(), labels::CAPACITY_ON_DEMAND.into());
            let mut node = Node::new(name, l, t.allocatable(&Default::default()));
            node.price = t.cheapest().map(|o| o.price);
            node.pods.extend(c.daemonsets.iter().map(|ds| ds.pod.clone().into()));
            for &(pod, cpu) in pods {
                let mut p = Pod::new("shop", pod, Resources::new(cpu, 64 << 20));
                p.owner = if pod.starts_with("solo") { OwnerKind::None } else { OwnerKind::ReplicaSet };
                p.labels.insert("app".into(), pod.split('-').next().unwrap_or(pod).into());
                p.node_name = Some(name.into());
                node.pods.push(p.into());
            }
            let mut claim = NodeClaim::launching(name, "default", "default", now.minus(Duration::from_secs(86_400)));
            claim.phase = Phase::Initialized;
            claim.node_name = Some(name.into());
            claim.initialized_at = Some(claim.created_at);
            c.nodes.push(node);
            c.claims.push(claim);
        }
        c
    }

    /// The gate itself: "all five pods fit n2 and n3" was the subset simulation's answer when it
    /// packed roomiest node first; the next pass, first fit in node order, strands web-0.
    #[test]
    fn verify_refuses_a_move_only_another_packing_allows() {
        let c = cluster();
        let opts = Options::default();
        let mut w = Work::new(&c, embedded(), &opts);
        let candidates = w.candidates();
        let pick = |names: &[&str]| -> Vec<Candidate> {
            names.iter().map(|n| candidates.iter().find(|c| c.node == *n).expect("candidate").clone()).collect()
        };
        let claimed = || Simulated { outcome: Outcome::Delete(Plan::default()), exact: false };
        let Some(NotTaken::Unconsolidatable(err)) = w.verify(&pick(&["n1", "n4", "n0"]), claimed()).err() else {
            panic!("refused as unconsolidatable")
        };
        assert!(err.contains("pod shop/web-0") && err.contains("flap"), "{err}");
        // The subset the simulation gets is in node order, so it packs the way that pass does.
        let names: FxHashSet<&str> = ["n1", "n4", "n0"].into_iter().collect();
        let pods: Vec<Pod> = ["n1", "n4", "n0"].iter().flat_map(|n| w.movable(n)).cloned().collect();
        assert_eq!(w.subset(&names, &pods, f64::INFINITY), Some(vec![2, 3]));
        // n1 and n4 alone do go: the plan is that pass's own, both pods on n0, first in order.
        let Ok(Outcome::Delete(plan)) = w.verify(&pick(&["n1", "n4"]), claimed()) else { panic!("n1 and n4 fit n0") };
        let on_n0 = ExistingPlacement { node: "n0".into(), pods: vec!["shop/web-3".into(), "shop/web-5".into()] };
        assert_eq!(plan.existing, vec![on_n0]);
    }

    /// `next_pass` leaves out pods and labels the scheduler cannot see, for speed: its answer must
    /// still be the one the next pass gives on `after`'s full snapshot — with and without
    /// topology in play, and with a node already leaving.
    #[test]
    fn next_pass_answers_as_after_does() {
        for (spread, leaving) in [(false, false), (true, false), (false, true)] {
            let mut c = cluster();
            if leaving {
                c.claims[3].phase = Phase::Draining; // n3: its web-4 and solo-1 need room again
            }
            if spread {
                let web3 = Arc::make_mut(c.nodes[1].pods.last_mut().expect("web-3"));
                web3.topology_spread.push(crate::model::TopologySpread {
                    max_skew: 1,
                    topology_key: labels::ZONE.into(),
                    when_unsatisfiable: crate::model::WhenUnsatisfiable::DoNotSchedule,
                    selector: crate::model::LabelSelector::from_labels(&[("app", "web")]),
                    min_domains: None,
                    node_affinity_policy: crate::model::InclusionPolicy::Honor,
                    node_taints_policy: crate::model::InclusionPolicy::Ignore,
                });
            }
            let opts = Options::default();
            let w = Work::new(&c, embedded(), &opts);
            for gone in [&["n1", "n4"][..], &["n1", "n4", "n0"], &["n0"]] {
                let names: FxHashSet<&str> = gone.iter().copied().collect();
                let decisions: Vec<Decision> = gone
                    .iter()
                    .map(|n| {
                        let mut claim = c.claims.iter().find(|x| x.name == *n).expect("claim").clone();
                        claim.disruption = Some(Disruption {
                            reason: Reason::Underutilized,
                            since: c.now,
                            replacements: vec![],
                            message: String::new(),
                            reclaim_at: None,
                        });
                        Decision::act(Some(n), Action::WriteClaim(Box::new(claim)), "")
                    })
                    .collect();
                let mut full = crate::scheduler::schedule(&after(&c, &decisions), embedded());
                // Cached plans (consolidation's simulations) carry no lower bound.
                full.lower_bound_per_hour = 0.0;
                let view = scheduler::simulate(&w.next_pass(&names, None), embedded(), &w.types);
                assert_eq!(view, full, "spread: {spread}, leaving: {leaving}, gone: {gone:?}");
            }
        }
    }
}
