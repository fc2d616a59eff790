//! Deletions someone else asked for: `kubectl delete node X` or `kubectl delete nodeclaim X`.
//!
//! The Nodes Dovetail launches and their NodeClaim objects carry its termination finalizer
//! ([`FINALIZER`]), so such a deletion only marks the object (a `deletionTimestamp`) and waits.
//! Seeing the mark — the forwarder rings on the DELETE, the sweeper looks every minute in case
//! that doorbell was lost — the claim is disrupted for [`Reason::Deleted`] and goes through the
//! same termination as every other disruption: taint, drain (PDBs, do-not-disrupt,
//! terminationGracePeriod), terminate the instance, delete the Node, which also removes the
//! finalizer. A claim already being taken away (a consolidation that got there first, a second
//! deletion) is left to that one termination.
//!
//! A finalizer must never hold an object for ever: a marked Node that no live claim owns (its
//! claim ended, its instance is gone) is released at once. Objects with no live claim are the
//! sweeper's object repair's (`reconcile::objects`).
//!
//! NodePools and EC2NodeClasses carry the same finalizer ([`pools`]): a deleted pool's nodes
//! leave under its budgets before the pool goes, and a class stays while anything uses it.

mod pools;

pub use pools::{class_users, ClassUsers};

use crate::cluster::Cluster;
use crate::decision::{Action, Decision};
use crate::nodeclaim::object::FINALIZER;
use crate::nodeclaim::{Disruption, NodeClaim, Phase, Reason};

/// Decisions for every deletion in `cluster`: a `Deleted` disruption for each live claim whose
/// Node or object is marked for deletion (with an Event saying so), and the release of each
/// marked Node no live claim owns. Also the finalizer for the Node of an Initialized claim that
/// lacks it (registered by a version that did not hold deletions). Then the NodePools' and
/// EC2NodeClasses' ([`pools::deletions`]).
pub fn deletions(cluster: &Cluster) -> Vec<Decision> {
    let mut out = Vec::new();
    for claim in cluster.claims.iter().filter(|c| disruptable(c)) {
        // A deleted pool takes its nodes under its budgets, whatever else is marked: the garbage
        // collector deletes the claims' objects (and their Nodes) at once when the pool goes in
        // the foreground.
        if cluster.nodepools.iter().any(|p| p.name == claim.nodepool && p.deleting) {
            continue;
        }
        let node = claim.node_name.as_deref().and_then(|n| cluster.nodes.iter().find(|x| x.name == n));
        if let Some(n) = node.filter(|n| !n.deleting && !n.termination_finalizer && claim.phase == Phase::Initialized) {
            // Registered before Dovetail held its nodes' deletions (registration adopts the
            // others): held from now on.
            out.push(Decision::act(
                Some(&claim.name),
                Action::AdoptNode { node: n.name.clone(), claim: claim.name.clone(), labels: Default::default() },
                format!("holding node {}'s deletion for the drain with {FINALIZER}", n.name),
            ));
        }
        let what = if let Some(n) = node.filter(|n| n.deleting) {
            format!("node {} was deleted", n.name)
        } else if cluster.claim_objects.iter().any(|o| o.name == claim.name && o.deleting) {
            format!("NodeClaim {} was deleted", claim.name)
        } else {
            continue;
        };
        let message = format!("{what}: draining it, then terminating instance {}", instance(claim));
        out.extend(disrupt(claim, Reason::Deleted, message, cluster));
    }
    for node in cluster.nodes.iter().filter(|n| n.deleting && n.termination_finalizer) {
        let owned = cluster
            .claims
            .iter()
            .any(|c| c.phase != Phase::Terminated && c.node_name.as_deref() == Some(node.name.as_str()));
        if !owned {
            out.push(Decision::act(
                None,
                Action::DeleteNode { node: node.name.clone() },
                format!(
                    "node {} is being deleted and no live claim owns it: removing {FINALIZER} so the deletion completes",
                    node.name
                ),
            ));
        }
    }
    out.extend(pools::deletions(cluster));
    out
}

/// A claim a deletion can take: its instance launched, not ending already (a consolidation that
/// got there first, a second deletion: that one termination carries on).
fn disruptable(claim: &NodeClaim) -> bool {
    matches!(claim.phase, Phase::Launched | Phase::Registered | Phase::Initialized) && claim.disruption.is_none()
}

/// The claim disrupted for `reason` (written with the disruption), and the Event saying so on its
/// Node, or on its NodeClaim while it has none.
fn disrupt(claim: &NodeClaim, reason: Reason, message: String, cluster: &Cluster) -> [Decision; 2] {
    let mut next = claim.next_version();
    next.disruption = Some(Disruption {
        reason,
        since: cluster.now,
        replacements: vec![],
        message: message.clone(),
        reclaim_at: None,
    });
    let object = match claim.node_name.as_deref().filter(|n| cluster.nodes.iter().any(|x| x.name == *n)) {
        Some(n) => format!("Node/{n}"),
        None => format!("NodeClaim/{}", claim.name),
    };
    [
        Decision::act(Some(&claim.name), Action::WriteClaim(Box::new(next)), message.clone()),
        Decision::event(Some(&claim.name), object, "DisruptionTerminating", message),
    ]
}

fn instance(claim: &NodeClaim) -> String {
    claim.launch.as_ref().map_or_else(|| "(none recorded)".to_string(), |l| l.instance_id.clone())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::Node;
    use crate::nodeclaim::object::tests::launched;
    use crate::nodeclaim::object::Observed;
    use crate::resources::Resources;
    use crate::time::Time;

    pub(crate) fn claim(name: &str, node: Option<&str>) -> NodeClaim {
        let mut c = launched(name, 3);
        c.phase = if node.is_some() { Phase::Initialized } else { Phase::Launched };
        c.node_name = node.map(str::to_string);
        c
    }

    pub(crate) fn node(name: &str, deleting: bool) -> Node {
        let mut n = Node::new(name, BTreeMap::new(), Resources::new(2000, 8 << 30));
        n.deleting = deleting;
        n.termination_finalizer = true;
        n
    }

    pub(crate) fn kinds(decisions: &[Decision]) -> Vec<(Option<String>, &'static str)> {
        decisions.iter().filter_map(|d| d.action.as_ref().map(|a| (d.claim.clone(), a.kind()))).collect()
    }

    #[test]
    fn a_deleted_node_or_claim_object_disrupts_its_claim_once() {
        let mut cluster = Cluster { now: Time::from_secs(100), ..Cluster::default() };
        cluster.claims =
            vec![claim("a", Some("n-a")), claim("b", None), claim("c", Some("n-c")), claim("d", Some("n-d"))];
        // c is being consolidated already: the deletion rides on that termination.
        cluster.claims[2].disruption = Some(Disruption {
            reason: Reason::Underutilized,
            since: Time::from_secs(50),
            replacements: vec![],
            message: "underutilized".into(),
            reclaim_at: None,
        });
        let mut older = node("n-d", false);
        older.termination_finalizer = false;
        cluster.nodes = vec![node("n-a", true), node("n-c", true), older];
        cluster.claim_objects = vec![Observed { name: "b".into(), version: Some(3), deleting: true }];
        let decisions = deletions(&cluster);
        assert_eq!(
            kinds(&decisions),
            [
                (Some("a".into()), "WriteClaim"),
                (Some("a".into()), "Event"),
                (Some("b".into()), "WriteClaim"),
                (Some("b".into()), "Event"),
                (Some("d".into()), "AdoptNode"),
            ]
        );
        let Some(Action::WriteClaim(a)) = &decisions[0].action else { unreachable!() };
        let d = a.disruption.as_ref().unwrap();
        assert_eq!((a.version, d.reason, d.since), (4, Reason::Deleted, Time::from_secs(100)));
        assert_eq!(d.message, "node n-a was deleted: draining it, then terminating instance i-a");
        assert!(!Reason::Deleted.is_voluntary());
        let Some(Action::Event { object, reason, .. }) = &decisions[3].action else { unreachable!() };
        assert_eq!((object.as_str(), reason.as_str()), ("NodeClaim/b", "DisruptionTerminating"));

        // Once the claims carry the disruption and the node its finalizer, the same cluster
        // decides nothing more.
        for d in &decisions {
            if let Some(Action::WriteClaim(c)) = &d.action {
                cluster.record(c);
            }
        }
        cluster.nodes[2].termination_finalizer = true;
        assert!(deletions(&cluster).is_empty());
    }

    #[test]
    fn a_deleted_node_no_live_claim_owns_is_released() {
        let mut ended = claim("a", Some("n-a"));
        ended.phase = Phase::Terminated;
        let mut by_hand = node("n-hand", true);
        by_hand.termination_finalizer = false;
        let cluster = Cluster { claims: vec![ended], nodes: vec![node("n-a", true), by_hand], ..Cluster::default() };
        let decisions = deletions(&cluster);
        assert_eq!(kinds(&decisions), [(None, "DeleteNode")]);
        assert!(decisions[0].why.contains("no live claim owns it"), "{}", decisions[0].why);
    }
}
