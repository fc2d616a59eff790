//! Keeping the NodeClaim objects in the cluster in step with the store
//! ([`crate::nodeclaim::object`]).
//!
//! A pass writes the object of every claim it wrote once, after its actions: a claim written
//! three times by one launch (intent, attempt, instance) costs one object write, made after the
//! pass's CreateFleet calls rather than before them. A failed object write is reported, not
//! retried: the claim itself is safe in the store, and the sweeper's repair puts the object right.

use super::ports::{Clock, Cloud, Kube, Queue, Store};
use super::{Reconciler, Report, View};
use crate::nodeclaim::object;

impl<K: Kube, C: Cloud, S: Store, Q: Queue, T: Clock> Reconciler<K, C, S, Q, T> {
    /// Writes the objects of the claims written since the last call, and deletes those of claims
    /// that ended or were deleted.
    pub(super) async fn write_objects(&self, view: &mut View, report: &mut Report) {
        for name in std::mem::take(&mut view.written) {
            let claim = view.cluster.claims.iter().find(|c| c.name == name);
            let written = match claim {
                Some(c) if object::shown(c) => {
                    let version = c.version;
                    let result =
                        self.ports.kube.write_claim_object(&object::object(c, &view.cluster, &view.catalog)).await;
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
        let stale = object::stale(&view.cluster);
        if !stale.is_empty() {
            report.note(None, format!("bringing {} NodeClaim object(s) in step with the store", stale.len()));
        }
        view.written.extend(stale);
        self.write_objects(view, report).await;
    }
}
