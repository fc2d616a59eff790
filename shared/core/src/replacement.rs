//! Replacement capacity for a claim that is going away (interrupted, drifted): plan new capacity
//! for its pods with the scheduler, then launch it under deterministic names — launch first, then
//! drain. Shared by the interruption function and the sweeper's drift pass.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::catalog::{Catalog, OfferingKey};
use crate::cluster::{unbound, vacate_leaving, Cluster};
use crate::decision::{launch_once, Decision};
use crate::labels;
use crate::model::{Node, NodePool, Pod, LIMIT_COST};
use crate::nodeclaim::NodeClaim;
use crate::provisioning::{claim_limit_share, cost_limit};
use crate::scheduler::{schedule_cached, Plan, PlannedClaim, SolveCache};
use crate::snapshot::{CostLimit, Snapshot};

/// The registered Node of a claim, by name or by its `dovetail.dev/nodeclaim` label.
pub(crate) fn node_of<'a>(claim: &NodeClaim, cluster: &'a Cluster) -> Option<&'a Node> {
    cluster.nodes.iter().find(|n| {
        claim.node_name.as_deref() == Some(n.name.as_str())
            || n.labels.get(labels::NODECLAIM).is_some_and(|c| c == &claim.name)
    })
}

/// Plans new capacity for the pods of `claim`: the scheduler sees them as pending, the rest of the
/// cluster as it is, and (for a spot warning) without the offering being reclaimed, (for a
/// reservation taking its instances back) without the reservation `closing`.
pub(crate) fn plan_replacement(
    claim: &NodeClaim,
    node: Option<&Node>,
    cluster: &Cluster,
    catalog: &Catalog,
    excluded: Option<&OfferingKey>,
    closing: Option<&str>,
) -> Plan {
    let mut pods = Vec::new();
    let mut seen = BTreeSet::new();
    // Daemon pods come with whatever node replaces it and mirror pods belong to the node itself;
    // everything else needs a new home.
    for p in node.into_iter().flat_map(unbound) {
        seen.insert(p.key());
        pods.push(p);
    }
    // A claim interrupted before its node registered still has pods waiting for it.
    for p in cluster.pending.iter().filter(|p| claim.pods.contains(&p.key())) {
        if seen.insert(p.key()) {
            pods.push(p.clone());
        }
    }

    // Capacity that is itself leaving cannot take pods, and its pods, like the pending ones, are
    // on their way to new homes too: they are placed first and keep the room they take.
    // Otherwise two drifted nodes planned one after the other could both count on the same empty
    // node (say the first one's replacement, just up), the second drain would find no room, and
    // "launch first, then drain" would not hold.
    let mut nodes: Vec<Node> =
        cluster.nodes.iter().filter(|n| node.is_none_or(|own| own.name != n.name)).cloned().collect();
    let mut waiting: Vec<Pod> = cluster.pending.iter().filter(|p| !seen.contains(&p.key())).cloned().collect();
    waiting.extend(vacate_leaving(cluster, &mut nodes));

    // The node being replaced stops counting against its pool's limits (its capacity and its one
    // node, as `pool_usage` counted them): the swap must not be refused because what it gives
    // back is still on the books.
    // The same for the cluster-wide cost limit: the replacement may cost what this claim did.
    let share = claim_limit_share(claim, cluster, catalog);
    let mut nodepools: Vec<NodePool> = cluster.launchable_pools().cloned().collect();
    if let Some(pool) = nodepools.iter_mut().find(|p| p.name == claim.nodepool) {
        pool.usage.sub(&share);
    }
    let cost_limit = cost_limit(cluster, catalog).map(|l| CostLimit { usage: l.usage - share.get(LIMIT_COST), ..l });

    let mut unavailable = cluster.unavailable.clone();
    unavailable.extend(excluded.cloned());
    let mut reservations = crate::reservations::open(cluster);
    if let Some(id) = closing {
        for open in reservations.values_mut() {
            open.retain(|r| r.id != id);
        }
        reservations.retain(|_, open| !open.is_empty());
    }
    let mut snapshot = Snapshot {
        pods: waiting,
        nodes,
        daemonsets: cluster.daemonsets.clone(),
        nodepools,
        nodeclasses: cluster.nodeclasses.clone(),
        unavailable,
        namespaces: cluster.namespaces.clone(),
        min_values_policy: cluster.min_values_policy,
        cost_limit,
        reservations,
    };
    // Both solves below are over the same pools: the second reuses what the first prepared.
    let cache = SolveCache::new();
    if !snapshot.pods.is_empty() {
        // Pods the scheduler would put on new capacity are left out: that capacity is theirs
        // (a replacement already launched, or the provisioner's next pass), not this claim's.
        let first = schedule_cached(&snapshot, catalog, &cache);
        let mut by_key: BTreeMap<String, Pod> = snapshot.pods.drain(..).map(|p| (p.key(), p)).collect();
        for e in &first.existing {
            let Some(n) = snapshot.nodes.iter_mut().find(|n| n.name == e.node) else { continue };
            for mut p in e.pods.iter().filter_map(|k| by_key.remove(k)) {
                p.node_name = Some(n.name.clone());
                n.pods.push(Arc::new(p));
            }
        }
    }
    snapshot.pods = pods;
    schedule_cached(&snapshot, catalog, &cache)
}

/// Launches for a claim's replacement plan, named `<claim>-r<N>` so a redelivered message or a
/// repeated sweep plans the same names (and CreateFleet tokens) — and names that already exist in
/// `cluster` are adopted rather than launched again (see `launch_once`) — with a note for every pod
/// left without capacity. Returns the replacement names and the decisions.
pub(crate) fn launch_replacements(claim: &NodeClaim, plan: &Plan, cluster: &Cluster) -> (Vec<String>, Vec<Decision>) {
    let mut out = Vec::new();
    let mut replacements = Vec::with_capacity(plan.nodeclaims.len());
    for (i, planned) in plan.nodeclaims.iter().enumerate() {
        let planned = rename(planned, &format!("{}-r{}", claim.name, i + 1));
        replacements.push(planned.name.clone());
        let why = format!(
            "launch {} ({} {} in {}, ${:.4}/h) for {} from {}",
            planned.name,
            planned.instance_type,
            planned.capacity_type,
            planned.zone,
            planned.price_per_hour,
            pods_phrase(planned.pods.len()),
            claim.name
        );
        let name = planned.name.clone();
        out.push(launch_once(cluster, Some(&name), planned, why));
    }
    for u in &plan.unschedulable {
        out.push(Decision::note(
            Some(&claim.name),
            format!("pod {} from {} has no replacement capacity: {}", u.pod, claim.name, u.reason),
        ));
    }
    (replacements, out)
}

/// Gives a planned claim its deterministic replacement name (also the CreateFleet client token).
fn rename(planned: &PlannedClaim, name: &str) -> PlannedClaim {
    let mut p = planned.clone();
    p.name = name.to_string();
    p.labels.insert(labels::NODECLAIM.to_string(), name.to_string());
    p
}

pub(crate) fn pods_phrase(n: usize) -> String {
    if n == 1 {
        "1 pod".into()
    } else {
        format!("{n} pods")
    }
}
