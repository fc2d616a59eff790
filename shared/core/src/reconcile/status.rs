//! What the sweeper publishes as the NodePools' and EC2NodeClasses' `status`, from one view: the
//! facts (resources, whether a class resolves, whether a pool's nodes register); the Kubernetes
//! adapter turns them into the conditions `kubectl` shows.

use super::ports::{ClassStatus, PoolStatus};
use super::View;
use crate::deletion;
use crate::nodeclaim::Phase;
use crate::provisioning;

/// One status per NodePool, valid or not.
pub(super) fn pools(view: &View) -> Vec<PoolStatus> {
    let usage = provisioning::pool_usage(&view.cluster, &view.catalog);
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
                resources,
                invalid: None,
                node_class: class_ready(view, &p.node_class),
                registered: view
                    .cluster
                    .claims
                    .iter()
                    .any(|c| c.nodepool == p.name && c.registered_at.is_some() && c.phase != Phase::Terminated),
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
            }),
        }
    }
    statuses
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
