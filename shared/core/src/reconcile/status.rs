//! What the sweeper publishes as the NodePools' and EC2NodeClasses' `status`, from one view: the
//! facts (resources, whether a class resolves, whether a pool's nodes register); the Kubernetes
//! adapter turns them into the conditions `kubectl` shows.

use super::ports::{ClassStatus, CostLimitStatus, PoolStatus};
use super::View;
use crate::deletion;
use crate::model::{cost_micros, format_cost, NodePool, LIMIT_COST};
use crate::nodeclaim::Phase;
use crate::provisioning;
use crate::scheduler;

/// One status per NodePool, valid or not.
pub(super) fn pools(view: &View) -> Vec<PoolStatus> {
    let usage = provisioning::pool_usage(&view.cluster, &view.catalog);
    let cluster_cost: i64 = usage.values().map(|u| u.get(LIMIT_COST)).sum();
    let mut statuses: Vec<PoolStatus> = view
        .cluster
        .nodepools
        .iter()
        .map(|p| {
            // The count `limits.nodes` is checked against, so status and limit never disagree.
            let resources = usage.get(&p.name).cloned().unwrap_or_default();
            PoolStatus {
                name: p.name.clone(),
                nodes: resources.get(crate::model::LIMIT_NODES).max(0) as usize,
                invalid: None,
                node_class: class_ready(view, &p.node_class),
                registered: view
                    .cluster
                    .claims
                    .iter()
                    .any(|c| c.nodepool == p.name && c.registered_at.is_some() && c.phase != Phase::Terminated),
                cost_limit: cost_limit(view, p, resources.get(LIMIT_COST), cluster_cost),
                resources,
            }
        })
        .collect();
    for inv in view.invalid.iter().filter(|i| i.object.starts_with("NodePool/")) {
        let name = inv.object.trim_start_matches("NodePool/");
        let message = format!("{}: {}", inv.field, inv.message);
        match statuses.iter_mut().find(|s| s.name == name) {
            Some(s) => {
                let joined = s.invalid.take().map_or(message.clone(), |m| format!("{m}; {message}"));
                s.invalid = Some(joined);
            }
            None => statuses.push(PoolStatus {
                name: name.to_string(),
                nodes: 0,
                resources: Default::default(),
                invalid: Some(message),
                node_class: Err("the NodePool is invalid, so its EC2NodeClass is not looked at".into()),
                registered: false,
                cost_limit: None,
            }),
        }
    }
    statuses
}

/// Where `pool` (costing `used`) stands against its own cost limit and the cluster-wide one (all
/// pools costing `cluster_used`): reached when what either leaves is less than the cheapest node the
/// pool could launch, so it cannot grow until something goes.
fn cost_limit(view: &View, pool: &NodePool, used: i64, cluster_used: i64) -> Option<CostLimitStatus> {
    let own = pool.limits.get(LIMIT_COST).map(|&limit| (limit - used, limit));
    let cluster = view.cluster.cost_limit.map(|limit| (limit - cluster_used, limit));
    if own.is_none() && cluster.is_none() {
        return None;
    }
    let kubelet = view.cluster.nodeclasses.iter().find(|c| c.name == pool.node_class).map(|c| &c.kubelet);
    let cheapest = scheduler::cheapest_launch(pool, kubelet, &view.catalog, &view.cluster.unavailable).map(cost_micros);
    // Too little left for even one node: at the limit, whatever its size. Nothing to launch at all
    // is the class's or the requirements' doing, said elsewhere; the limit binds only at zero left.
    let binds = |left: i64| left < cheapest.unwrap_or(1).max(1);
    let own_text = own.map(|(_, limit)| {
        format!("the pool's capacity costs {} of its limit {}", format_cost(used), format_cost(limit))
    });
    let cluster_text = cluster.map(|(_, limit)| {
        format!(
            "all pools' capacity costs {} of the cluster-wide limit {}",
            format_cost(cluster_used),
            format_cost(limit)
        )
    });
    let cheapest_text = cheapest.map_or(String::new(), |c| format!("; its cheapest node costs {}", format_cost(c)));
    let message = match (own, cluster) {
        (Some((left, _)), _) if binds(left) => format!("{}{cheapest_text}", own_text.unwrap_or_default()),
        (_, Some((left, _))) if binds(left) => format!("{}{cheapest_text}", cluster_text.unwrap_or_default()),
        _ => {
            let within: Vec<String> = [own_text, cluster_text].into_iter().flatten().collect();
            return Some(CostLimitStatus { reached: false, message: format!("{}{cheapest_text}", within.join("; ")) });
        }
    };
    Some(CostLimitStatus { reached: true, message })
}

/// One status per EC2NodeClass, valid or not.
pub(super) fn classes(view: &View) -> Vec<ClassStatus> {
    let mut out: Vec<ClassStatus> = view
        .cluster
        .nodeclasses
        .iter()
        .map(|c| ClassStatus {
            name: c.name.clone(),
            resolved: resolution(view, &c.name),
            deletion_blocked: c.deleting.then(|| deletion::class_users(&view.cluster, &c.name).sentence()).flatten(),
        })
        .collect();
    for inv in view.invalid.iter().filter(|i| i.object.starts_with("EC2NodeClass/")) {
        let name = inv.object.trim_start_matches("EC2NodeClass/");
        if !out.iter().any(|s| s.name == name) {
            out.push(ClassStatus {
                name: name.to_string(),
                resolved: Err(format!("invalid: {}: {}", inv.field, inv.message)),
                deletion_blocked: None,
            });
        }
    }
    out
}

/// What a valid class resolved to in this view, or why it did not.
fn resolution(view: &View, class: &str) -> Result<crate::cluster::ResolvedClass, String> {
    match view.cluster.resolved.iter().find(|r| r.name == class) {
        Some(r) => Ok(r.clone()),
        None => Err(view.cluster.unresolved.get(class).cloned().unwrap_or_else(|| "not resolved in this pass".into())),
    }
}

/// Whether the class a pool names can launch, else why not: it must exist, be valid, and
/// resolve to subnets, security groups and images.
fn class_ready(view: &View, class: &str) -> Result<(), String> {
    if let Some(inv) = view.invalid.iter().find(|i| i.object == format!("EC2NodeClass/{class}")) {
        return Err(format!("EC2NodeClass {class} is invalid: {}: {}", inv.field, inv.message));
    }
    if !view.cluster.nodeclasses.iter().any(|c| c.name == class) {
        return Err(format!("EC2NodeClass {class} not found"));
    }
    let resolved = resolution(view, class).map_err(|e| format!("EC2NodeClass {class} does not resolve: {e}"))?;
    let missing: Vec<String> = resolved.missing().into_iter().map(|(_, why)| why).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("EC2NodeClass {class}: {}", missing.join("; ")))
    }
}
