//! Deleting a NodePool or an EC2NodeClass.
//!
//! Both carry Dovetail's termination finalizer (added to every one that lacks it), so `kubectl
//! delete` only marks them. A deleted NodePool launches nothing more
//! ([`Cluster::launchable_pools`]); its nodes are disrupted for [`Reason::NodePoolDeleted`] as
//! many at a time as its disruption budgets allow (those that name no reason: Karpenter's budget
//! reasons are consolidation and drift), each drained like any other disruption; when none of
//! its claims is left, the finalizer goes and the pool with it. Nodes that never finished
//! initializing hold no pods and count in no budget: they go at once.
//!
//! A deleted EC2NodeClass that a NodePool (deleted or not) or a live claim still names is kept,
//! serving them, and its status says by whom (`DeletionBlocked`, see `reconcile::status`); the
//! finalizer goes once nothing uses it. (Karpenter instead stops launching from a class being
//! deleted; here the deletion is refused until the pools move, so a mistaken delete costs no
//! capacity.)

use crate::cluster::{node_of, Cluster};
use crate::decision::{Action, Decision};
use crate::disruption::budgets::{allowance, standing, Standing};
use crate::model::NodePool;
use crate::nodeclaim::object::FINALIZER;
use crate::nodeclaim::{NodeClaim, Phase, Reason};

use super::{disrupt, disruptable, instance};

/// The NodePools' and EC2NodeClasses' finalizers and cascades (see the module's comment).
pub(super) fn deletions(cluster: &Cluster) -> Vec<Decision> {
    let mut out = Vec::new();
    for pool in &cluster.nodepools {
        let object = format!("NodePool/{}", pool.name);
        if !pool.deleting {
            if !pool.termination_finalizer {
                let why =
                    format!("holding NodePool {}'s deletion until its nodes are drained, with {FINALIZER}", pool.name);
                out.push(Decision::act(None, Action::AddFinalizer { object }, why));
            }
            continue;
        }
        if !has_live_claims(cluster, &pool.name) {
            if pool.termination_finalizer {
                let why = format!("NodePool {} was deleted and none of its nodes is left: releasing it", pool.name);
                out.push(Decision::act(None, Action::RemoveFinalizer { object }, why));
            }
            continue;
        }
        out.extend(cascade(pool, cluster));
    }
    for class in &cluster.nodeclasses {
        let object = format!("EC2NodeClass/{}", class.name);
        if !class.deleting {
            if !class.termination_finalizer {
                let why =
                    format!("holding EC2NodeClass {}'s deletion while NodePools use it, with {FINALIZER}", class.name);
                out.push(Decision::act(None, Action::AddFinalizer { object }, why));
            }
            continue;
        }
        if !class.termination_finalizer {
            continue;
        }
        let users = class_users(cluster, &class.name);
        let why = match users.sentence() {
            None => {
                let why = format!("EC2NodeClass {} was deleted and nothing uses it any more: releasing it", class.name);
                out.push(Decision::act(None, Action::RemoveFinalizer { object }, why));
                continue;
            }
            Some(users) => format!("EC2NodeClass {} was deleted but is kept: {users}", class.name),
        };
        out.push(Decision::note(None, why));
    }
    out
}

/// The next of a deleted pool's nodes to go: those no budget counts (never initialized) all at
/// once, then as many as the budgets allow, emptiest first (the fewest pods to move).
fn cascade(pool: &NodePool, cluster: &Cluster) -> Vec<Decision> {
    let mut candidates: Vec<(&NodeClaim, bool, usize)> = cluster
        .claims
        .iter()
        .filter(|c| c.nodepool == pool.name && disruptable(c))
        .map(|c| {
            let counted = standing(c, cluster) != Standing::Uncounted;
            (c, counted, node_of(c, cluster).map_or(0, |n| n.pods.len()))
        })
        .collect();
    candidates.sort_by(|a, b| (a.1, a.2, &a.0.name).cmp(&(b.1, b.2, &b.0.name)));
    let budget = allowance(cluster, pool, Reason::NodePoolDeleted);
    let mut left = budget.allowed;
    let mut waiting = 0;
    let mut out = Vec::new();
    for (claim, counted, _) in candidates {
        if counted {
            if left == 0 {
                waiting += 1;
                continue;
            }
            left -= 1;
        }
        let what = match &claim.node_name {
            Some(node) => format!("node {node}"),
            None => format!("claim {}", claim.name),
        };
        let message = format!(
            "NodePool {} was deleted: draining {what}, then terminating instance {}",
            pool.name,
            instance(claim)
        );
        out.extend(disrupt(claim, Reason::NodePoolDeleted, message, cluster));
    }
    if waiting > 0 {
        out.push(Decision::note(
            None,
            format!(
                "NodePool {} was deleted: {waiting} of its nodes wait for its disruption budget ({})",
                pool.name, budget.why
            ),
        ));
    }
    out
}

/// What keeps an EC2NodeClass: the NodePools that name it, and live claims launched from it
/// whose pool is gone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassUsers {
    pub pools: Vec<String>,
    /// Live claims from the class that no listed pool accounts for.
    pub claims: Vec<String>,
}

impl ClassUsers {
    /// "used by NodePools a, b and 2 NodeClaims whose pool is gone", or `None` when unused.
    pub fn sentence(&self) -> Option<String> {
        let mut parts = Vec::new();
        if !self.pools.is_empty() {
            parts.push(format!("NodePool{} {}", plural(self.pools.len()), self.pools.join(", ")));
        }
        if !self.claims.is_empty() {
            parts.push(format!("NodeClaim{} {}", plural(self.claims.len()), self.claims.join(", ")));
        }
        (!parts.is_empty())
            .then(|| format!("still used by {}; delete them or point them at another class first", parts.join(" and ")))
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn has_live_claims(cluster: &Cluster, pool: &str) -> bool {
    cluster.claims.iter().any(|c| c.nodepool == pool && c.phase != Phase::Terminated)
}

/// Who still uses EC2NodeClass `class` in `cluster`. A deleted pool with no claim left is not a
/// user: it is released in the same pass, so the class can go with it.
pub fn class_users(cluster: &Cluster, class: &str) -> ClassUsers {
    let pools: Vec<String> = cluster
        .nodepools
        .iter()
        .filter(|p| p.node_class == class && (!p.deleting || has_live_claims(cluster, &p.name)))
        .map(|p| p.name.clone())
        .collect();
    let claims = cluster
        .claims
        .iter()
        .filter(|c| c.nodeclass == class && c.phase != Phase::Terminated && !pools.contains(&c.nodepool))
        .map(|c| c.name.clone())
        .collect();
    ClassUsers { pools, claims }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deletion::tests::{claim, kinds, node};
    use crate::model::{Budget, BudgetNodes, NodeClass, Pod};
    use crate::resources::Resources;
    use crate::time::Time;

    /// A deleted pool of four initialized nodes (n-a with 3 pods, n-b with 1, n-c and n-d empty)
    /// and one claim still registering, with a budget of one node at a time.
    fn deleted_pool() -> Cluster {
        let mut pool = NodePool::new("web", "default");
        pool.deleting = true;
        pool.termination_finalizer = true;
        pool.disruption.budgets =
            vec![Budget { nodes: BudgetNodes::Count(1), schedule: None, duration: None, reasons: vec![] }];
        let mut cluster = Cluster { now: Time::from_secs(100), nodepools: vec![pool], ..Cluster::default() };
        for (name, pods) in [("a", 3), ("b", 1), ("c", 0), ("d", 0)] {
            let mut c = claim(name, Some(&format!("n-{name}")));
            c.nodepool = "web".into();
            c.initialized_at = Some(Time::from_secs(10));
            cluster.claims.push(c);
            let mut n = node(&format!("n-{name}"), false);
            n.ready = true;
            for i in 0..pods {
                n.pods.push(std::sync::Arc::new(Pod::new(
                    "shop",
                    &format!("{name}-{i}"),
                    Resources::new(100, 1 << 20),
                )));
            }
            cluster.nodes.push(n);
        }
        let mut young = claim("e", None);
        young.nodepool = "web".into();
        cluster.claims.push(young);
        cluster
    }

    fn apply(cluster: &mut Cluster, decisions: &[Decision]) {
        for d in decisions {
            match &d.action {
                Some(Action::WriteClaim(c)) => cluster.record(c),
                Some(Action::AddFinalizer { object }) => cluster.hold(object, true),
                Some(Action::RemoveFinalizer { object }) => cluster.hold(object, false),
                _ => {}
            }
        }
    }

    fn disrupted(decisions: &[Decision]) -> Vec<(String, Reason)> {
        decisions
            .iter()
            .filter_map(|d| match &d.action {
                Some(Action::WriteClaim(c)) => Some((c.name.clone(), c.disruption.as_ref()?.reason)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_deleted_pool_loses_its_nodes_within_its_budget_then_is_released() {
        let mut cluster = deleted_pool();
        let first = super::super::deletions(&cluster);
        // The claim no budget counts, and the emptiest counted node; the others wait.
        assert_eq!(
            disrupted(&first),
            [("e".to_string(), Reason::NodePoolDeleted), ("c".to_string(), Reason::NodePoolDeleted)]
        );
        assert!(first.iter().any(|d| d.why.contains("3 of its nodes wait for its disruption budget")), "{first:#?}");
        let Some(Action::Event { object, reason, message }) = &first[3].action else { panic!("{first:#?}") };
        assert_eq!((object.as_str(), reason.as_str()), ("Node/n-c", "DisruptionTerminating"));
        assert_eq!(message, "NodePool web was deleted: draining node n-c, then terminating instance i-c");
        apply(&mut cluster, &first);

        // While c drains, the budget is spent: nothing more.
        assert!(disrupted(&super::super::deletions(&cluster)).is_empty());

        // c and e are gone: the next goes (d, empty), then b, then a.
        let mut order = Vec::new();
        let terminate = |cluster: &mut Cluster| {
            for c in cluster.claims.iter_mut().filter(|c| c.disruption.is_some()) {
                c.phase = Phase::Terminated;
            }
        };
        for _ in 0..3 {
            terminate(&mut cluster);
            let next = super::super::deletions(&cluster);
            order.extend(disrupted(&next).into_iter().map(|(n, _)| n));
            apply(&mut cluster, &next);
        }
        assert_eq!(order, ["d", "b", "a"]);
        terminate(&mut cluster);
        let last = super::super::deletions(&cluster);
        assert_eq!(kinds(&last), [(None, "RemoveFinalizer")]);
        assert!(last[0].why.contains("none of its nodes is left"), "{}", last[0].why);
        apply(&mut cluster, &last);
        assert!(super::super::deletions(&cluster).is_empty());
    }

    #[test]
    fn a_deleted_pool_takes_its_claims_whatever_else_was_deleted() {
        // The garbage collector deleting every NodeClaim object at once (a foreground delete of
        // the pool) does not bypass the budget.
        let mut cluster = deleted_pool();
        cluster.claim_objects = cluster
            .claims
            .iter()
            .map(|c| crate::nodeclaim::object::Observed {
                name: c.name.clone(),
                version: Some(c.version),
                deleting: true,
            })
            .collect();
        assert_eq!(disrupted(&super::super::deletions(&cluster)).len(), 2);
    }

    #[test]
    fn pools_and_classes_are_held_and_a_used_class_is_kept() {
        let class = |name: &str| NodeClass { name: name.into(), ..NodeClass::default() };
        let mut cluster = Cluster {
            nodepools: vec![NodePool::new("web", "default")],
            nodeclasses: vec![class("default"), class("old")],
            ..Cluster::default()
        };
        let held = super::super::deletions(&cluster);
        let objects: Vec<_> = held
            .iter()
            .filter_map(|d| match &d.action {
                Some(Action::AddFinalizer { object }) => Some(object.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(objects, ["NodePool/web", "EC2NodeClass/default", "EC2NodeClass/old"]);
        apply(&mut cluster, &held);
        assert!(super::super::deletions(&cluster).is_empty());

        // Deleting a class a pool uses is not honoured; one nothing uses goes.
        for c in &mut cluster.nodeclasses {
            c.deleting = true;
        }
        let mut orphan = claim("x", Some("n-x"));
        orphan.nodepool = "gone".into();
        orphan.nodeclass = "default".into();
        cluster.claims.push(orphan);
        let decisions = super::super::deletions(&cluster);
        assert_eq!(kinds(&decisions), [(None, "RemoveFinalizer")]);
        assert_eq!(decisions[0].why, "EC2NodeClass default was deleted but is kept: still used by NodePool web and NodeClaim x; delete them or point them at another class first");
        assert_eq!(class_users(&cluster, "old"), ClassUsers::default());
    }
}
