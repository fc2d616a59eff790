//! Which instances a read describes.
//!
//! Describing every instance of the cluster costs in proportion to the cluster, so only the
//! sweeper's reconciliation does it, once a minute: its orphan pass needs all of them, and the
//! provisioning pass it starts with hands it its view. The provisioner and the interruption
//! function ask only for the instances whose state their steps read — those of the claims they
//! step and those their events name — and the view records what was asked
//! ([`Described::Only`](crate::cluster::Described)), so an instance that was not asked for is
//! never taken for one that is gone.

use crate::cluster::InstanceQuery;
use crate::nodeclaim::{NodeClaim, Phase};
use crate::reservations::running_in;

/// What a read describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// Every instance tagged for the cluster: the sweeper.
    All,
    /// The provisioner: the instances of the claims [`registering`] picks, which its pass steps.
    /// (Its launch repair looks instances up by tag itself, after taking the attempt.)
    Provisioning,
    /// The interruption function: the instances of `claims` (resume messages step them), the
    /// `instances` its events name — an owned one is its claim's, an unowned one is still told
    /// apart from one that is not the cluster's at all — and those of the claims running in the
    /// `reservations` its events name (a Capacity Block's warning lists no instance).
    Named { claims: &'a [String], instances: &'a [String], reservations: &'a [String] },
}

impl Scope<'_> {
    /// The query for this scope over the claims just read; `None` for every instance.
    pub fn query(&self, claims: &[NodeClaim]) -> Option<InstanceQuery> {
        let mut query = InstanceQuery::default();
        match self {
            Scope::All => return None,
            Scope::Provisioning => {
                for c in claims.iter().filter(|c| registering(c)) {
                    query.claim(c);
                }
            }
            Scope::Named { claims: named, instances, reservations } => {
                let in_named = |c: &NodeClaim| running_in(c).is_some_and(|id| reservations.iter().any(|r| r == id));
                for c in claims.iter().filter(|c| named.contains(&c.name) || in_named(c)) {
                    query.claim(c);
                }
                for id in instances.iter() {
                    query.instance(id);
                }
            }
        }
        Some(query)
    }
}

/// Claims the provisioner steps on every pass: live, with an instance up, and whose Node is not
/// yet matched or Ready.
pub fn registering(claim: &NodeClaim) -> bool {
    claim.is_live() && (Phase::Launched..Phase::Initialized).contains(&claim.phase)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::CapacityType;
    use crate::nodeclaim::{Disruption, Launch, Reason};
    use crate::time::Time;

    fn launched(name: &str, phase: Phase) -> NodeClaim {
        let mut c = NodeClaim::launching(name, "default", "default", Time::from_secs(0));
        c.phase = phase;
        if phase >= Phase::Launched {
            c.launch = Some(Launch {
                instance_id: format!("i-{name}"),
                instance_type: "m6g.large".into(),
                zone: "us-east-1a".into(),
                capacity_type: CapacityType::OnDemand,
                image_id: "ami-1".into(),
                subnet_id: "subnet-1".into(),
                security_groups: vec![],
                price: 0.077,
                launched_at: Time::from_secs(0),
            });
        }
        c
    }

    fn disrupted(mut claim: NodeClaim) -> NodeClaim {
        claim.disruption = Some(Disruption {
            reason: Reason::SpotInterrupted,
            since: Time::from_secs(0),
            replacements: vec![],
            message: String::new(),
            reclaim_at: None,
        });
        claim
    }

    /// A steady cluster of many Initialized claims, a few coming up, one launching, two leaving.
    fn claims() -> Vec<NodeClaim> {
        let mut out: Vec<NodeClaim> = (0..200).map(|i| launched(&format!("steady-{i}"), Phase::Initialized)).collect();
        out.push(launched("joining", Phase::Launched));
        out.push(launched("registered", Phase::Registered));
        out.push(launched("launching", Phase::Launching));
        out.push(disrupted(launched("draining", Phase::Draining)));
        out.push(disrupted(launched("disrupted", Phase::Registered)));
        out
    }

    fn ids(query: &InstanceQuery) -> Vec<&str> {
        query.ids.iter().map(String::as_str).collect()
    }

    #[test]
    fn the_sweeper_describes_everything() {
        assert_eq!(Scope::All.query(&claims()), None);
    }

    #[test]
    fn the_provisioner_asks_only_for_the_claims_it_registers() {
        let query = Scope::Provisioning.query(&claims()).unwrap();
        assert_eq!(ids(&query), ["i-joining", "i-registered"], "not the 200 Initialized, not the leaving ones");
        assert!(query.claims.is_empty(), "{query:?}");
    }

    #[test]
    fn a_steady_cluster_asks_the_provisioner_for_nothing() {
        let steady: Vec<NodeClaim> = claims().into_iter().filter(|c| c.name.starts_with("steady")).collect();
        assert!(Scope::Provisioning.query(&steady).unwrap().is_empty());
    }

    #[test]
    fn interruption_asks_for_resumed_claims_and_named_instances() {
        let resumed = ["draining".to_string(), "launching".to_string(), "gone".to_string()];
        let named = ["i-steady-7".to_string(), "i-0123456789abcdef0".to_string()];
        let query = Scope::Named { claims: &resumed, instances: &named, reservations: &[] }.query(&claims()).unwrap();
        assert_eq!(ids(&query), ["i-0123456789abcdef0", "i-draining", "i-steady-7"]);
        // A claim with no launch recorded is found by its tag; a claim that no longer exists
        // asks for nothing.
        assert_eq!(query.claims.iter().map(String::as_str).collect::<Vec<_>>(), ["launching"]);
    }

    #[test]
    fn interruption_asks_for_the_instances_running_in_a_named_reservation() {
        let headed_for = |name: &str, id: &str, capacity: CapacityType| {
            let mut c = launched(name, Phase::Initialized);
            c.launch.as_mut().unwrap().capacity_type = capacity;
            c.requirements.add(crate::requirements::Requirement::single(crate::labels::CAPACITY_RESERVATION_ID, id));
            c
        };
        let mut all = claims();
        all.push(headed_for("in-block", "cr-0b", CapacityType::Reserved));
        // Planned for the block but launched on-demand: not in it.
        all.push(headed_for("fell-back", "cr-0b", CapacityType::OnDemand));
        all.push(headed_for("in-other", "cr-0c", CapacityType::Reserved));
        let reservations = ["cr-0b".to_string()];
        let query = Scope::Named { claims: &[], instances: &[], reservations: &reservations }.query(&all).unwrap();
        assert_eq!(ids(&query), ["i-in-block"]);
    }

    #[test]
    fn the_query_covers_exactly_the_claims_it_asked_for() {
        let all = claims();
        let query = Scope::Provisioning.query(&all).unwrap();
        let covered: Vec<&str> = all.iter().filter(|c| query.covers(c)).map(|c| c.name.as_str()).collect();
        assert_eq!(covered, ["joining", "registered"]);
        let named = ["launching".to_string()];
        let query = Scope::Named { claims: &named, instances: &[], reservations: &[] }.query(&all).unwrap();
        let launching = all.iter().find(|c| c.name == "launching").unwrap();
        assert!(query.covers(launching));
        // Once its launch is recorded (after the read), the tag lookup no longer speaks for it.
        let recorded = launched("launching", Phase::Launched);
        assert!(!query.covers(&recorded));
    }
}
