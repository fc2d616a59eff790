//! Keeping the NodeClaim objects in the cluster in step with the store
//! ([`crate::nodeclaim::object`]).
//!
//! A pass writes the object of every claim it wrote once, after its actions: a claim written
//! three times by one launch (intent, attempt, instance) costs one object write, made after the
//! pass's CreateFleet calls rather than before them. A failed object write is reported, not
//! retried: the claim itself is safe in the store, and the sweeper's repair puts the object right.

use super::ports::{Clock, Cloud, Kube, Queue, Store};
use super::{Reconciler, Report, View};
use crate::catalog::Catalog;
use crate::cluster::Cluster;
use crate::nodeclaim::object::{self, shown, ClaimObject};
use crate::nodeclaim::NodeClaim;

impl<K: Kube, C: Cloud, S: Store, Q: Queue, T: Clock> Reconciler<K, C, S, Q, T> {
    /// Writes the objects of the claims written since the last call, and deletes those of claims
    /// that ended or were deleted.
    pub(super) async fn write_objects(&self, view: &mut View, report: &mut Report) {
        for name in std::mem::take(&mut view.written) {
            let claim = view.cluster.claims.iter().find(|c| c.name == name);
            let written = match claim {
                Some(c) if shown(c) => {
                    let version = c.version;
                    let result =
                        self.ports.kube.write_claim_object(&claim_object(c, &view.cluster, &view.catalog)).await;
                    result.map(|()| Some(version))
                }
                // Still launching: its object comes with its instance.
                Some(c) if c.launch.is_none() && c.phase != crate::nodeclaim::Phase::Terminated => continue,
                _ => self.ports.kube.delete_claim_object(&name).await.map(|()| None),
            };
            // The view shows what was written, so a repair later in the pass does not write it again.
            let objects = &mut view.cluster.claim_objects;
            match written {
                Ok(Some(version)) => match objects.iter_mut().find(|o| o.name == name) {
                    Some(o) => o.version = Some(version),
                    None => objects.push(object::Observed { name, version: Some(version), deleting: false }),
                },
                Ok(None) => objects.retain(|o| o.name != name),
                Err(e) => report.errors.push(format!("NodeClaim object {name}: {e} (the sweeper repairs it)")),
            }
        }
    }

    /// The sweeper's repair: objects missing, outdated or left without a live claim.
    pub(super) async fn repair_objects(&self, view: &mut View, report: &mut Report) {
        let stale = stale(&view.cluster);
        if !stale.is_empty() {
            report.note(None, format!("bringing {} NodeClaim object(s) in step with the store", stale.len()));
        }
        view.written.extend(stale);
        self.write_objects(view, report).await;
    }
}

/// The object of `claim`: its conditions, and its type's capacity and allocatable under its class's
/// kubelet settings.
pub fn claim_object(claim: &NodeClaim, cluster: &Cluster, catalog: &Catalog) -> ClaimObject {
    let kubelet = cluster.kubelet_of(&claim.nodeclass);
    let kind = crate::provisioning::claim_type(claim, catalog);
    ClaimObject {
        claim: claim.clone(),
        conditions: object::conditions(claim),
        capacity: kind.map(|t| t.capacity(&kubelet)),
        allocatable: kind.map(|t| t.allocatable(&kubelet)),
    }
}

/// The claims whose object a sweep writes or deletes: live claims whose object is missing or
/// shows another version, and objects with no live claim behind them (left by a failed delete,
/// or made by hand past the admission policy). Sorted, for a stable order of writes.
pub fn stale(cluster: &Cluster) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for claim in cluster.claims.iter().filter(|c| shown(c)) {
        let current = cluster.claim_objects.iter().any(|o| o.name == claim.name && o.version == Some(claim.version));
        if !current {
            out.push(claim.name.clone());
        }
    }
    for o in &cluster.claim_objects {
        if !cluster.claims.iter().any(|c| c.name == o.name && shown(c)) {
            out.push(o.name.clone());
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodeclaim::object::tests::launched;
    use crate::nodeclaim::object::Observed;
    use crate::nodeclaim::Phase;
    use crate::time::Time;

    #[test]
    fn stale_objects_are_the_missing_the_outdated_and_the_orphaned() {
        let mut cluster = Cluster {
            claims: vec![launched("current", 3), launched("outdated", 5), launched("missing", 1)],
            ..Cluster::default()
        };
        let mut launching = NodeClaim::launching("launching", "default", "default", Time::from_secs(1));
        launching.version = 1;
        let mut ended = launched("ended", 9);
        ended.phase = Phase::Terminated;
        cluster.claims.extend([launching, ended]);
        let observed = |name: &str, version: Option<u64>| Observed { name: name.into(), version, deleting: false };
        cluster.claim_objects = vec![
            observed("current", Some(3)),
            observed("outdated", Some(4)),
            observed("ended", Some(8)),
            observed("by-hand", None),
        ];
        assert_eq!(stale(&cluster), ["by-hand", "ended", "missing", "outdated"]);
    }
}
