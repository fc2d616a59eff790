//! One read of everything a pass decides from (which instances it describes: [`super::scope`]).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::future::join4;

use super::ports::{Clock, Cloud, Invalid, Kube, KubeState, OverlayProblem, OverlayStatus, PortResult, Queue, Store};
use super::scope::Scope;
use super::{Deadline, Reconciler, Report, View};
use crate::catalog::Catalog;
use crate::cluster::{Cluster, Described};
use crate::hash::nodepool_hash;
use crate::nodeclaim::{object, Phase};
use crate::overlay::{self, NodeOverlay, Outcome};
use crate::provisioning;

impl<K: Kube, C: Cloud, S: Store, Q: Queue, T: Clock> Reconciler<K, C, S, Q, T> {
    /// Kubernetes objects, claims, instances (all of the cluster's, or those `scope` asks for),
    /// the catalog, the unavailable offerings and what each EC2NodeClass resolves to now. A class
    /// that fails to resolve is reported and left out (launches for it wait; drift is not judged
    /// against it); the other reads are required.
    ///
    /// The reads go side by side: a warm Kubernetes read waits for the API server's bookmark (a
    /// second or so), which the store's and EC2's answers need not queue behind. The instances
    /// follow the claims, by which they are looked up.
    pub async fn read(&self, report: &mut Report, scope: Scope<'_>) -> PortResult<View> {
        let now = self.ports.clock.now();
        let claims_and_instances = async {
            let claims = self.ports.store.claims().await?;
            let (instances, described) = match scope.query(&claims) {
                None => (self.ports.cloud.instances().await?, Described::All),
                Some(query) => (self.ports.cloud.instances_of(&query).await?, Described::Only(query)),
            };
            PortResult::Ok((claims, instances, described))
        };
        // Boxed: side by side, the futures' states add up rather than share one slot, and the
        // adapters' are large (inline, a debug build's overflowed a test thread's 2 MiB stack).
        let kube: Pin<Box<dyn Future<Output = PortResult<KubeState>> + Send + '_>> = Box::pin(self.ports.kube.read());
        let claims_and_instances: Pin<Box<dyn Future<Output = _> + Send + '_>> = Box::pin(claims_and_instances);
        let (kube, claims_and_instances, catalog, unavailable) =
            join4(kube, claims_and_instances, self.ports.cloud.catalog(), self.ports.store.unavailable(now)).await;
        let kube = kube?;
        let (claims, instances, described) = claims_and_instances?;
        let (catalog, overlays) = self.priced(catalog?, &kube.overlays, &kube.invalid, report);
        let unavailable = unavailable?;
        let mut resolved = Vec::with_capacity(kube.nodeclasses.len());
        let mut unresolved = BTreeMap::new();
        for class in &kube.nodeclasses {
            match self.ports.cloud.resolve(class).await {
                Ok(r) => resolved.push(r),
                Err(e) => {
                    report.errors.push(format!("EC2NodeClass/{}: {e}", class.name));
                    unresolved.insert(class.name.clone(), e.to_string());
                }
            }
        }
        for inv in &kube.invalid {
            report.errors.push(format!("{} is skipped: {}: {}", inv.object, inv.field, inv.message));
        }
        let nodepool_hashes: BTreeMap<String, String> =
            kube.nodepools.iter().map(|p| (p.name.clone(), nodepool_hash(p))).collect();
        let mut cluster = Cluster {
            now,
            claims,
            nodes: kube.nodes,
            pending: kube.pending,
            daemonsets: kube.daemonsets,
            nodepools: kube.nodepools,
            nodeclasses: kube.nodeclasses,
            resolved,
            nodepool_hashes,
            pdbs: kube.pdbs,
            instances,
            described,
            volume_attachments: kube.volume_attachments,
            unavailable,
            namespaces: kube.namespaces,
            claim_objects: kube.claim_objects,
            node_repair: self.settings.node_repair,
            min_values_policy: self.settings.min_values_policy,
            cost_limit: self.settings.cost_limit,
            unresolved,
        };
        let usage = provisioning::pool_usage(&cluster, &catalog);
        for p in &mut cluster.nodepools {
            p.usage = usage.get(&p.name).cloned().unwrap_or_default();
        }
        let view = View {
            cluster,
            catalog,
            overlays,
            invalid: kube.invalid,
            replan: false,
            drains_to_start: None,
            written: BTreeSet::new(),
            deadline: Deadline::NONE,
        };
        // Measured now, so a pass that stops early still reports what it read; measured again
        // after the actions by whoever ends the invocation.
        view.measure(report);
        Ok(view)
    }
}

/// A catalog priced with NodeOverlays, and what it was priced from. A warm function keeps it, so
/// the next read hands the scheduler the same catalog (its solve cache knows a catalog by
/// address) as long as EC2's catalog and the overlays stay the same.
pub(super) struct Priced {
    base: Arc<Catalog>,
    overlays: Vec<NodeOverlay>,
    catalog: Arc<Catalog>,
    /// (overlay, the overlay it conflicts with) for each overlay that is not applied.
    conflicts: Vec<(String, String)>,
}

impl<K: Kube, C: Cloud, S: Store, Q: Queue, T: Clock> Reconciler<K, C, S, Q, T> {
    /// `base` priced with `overlays` ([`overlay::apply`]), and each overlay's status (invalid ones
    /// among `invalid`, which the read leaves out, included). An overlay that conflicts with
    /// another is reported (and left out) on every pass, as an invalid NodePool is.
    fn priced(
        &self,
        base: Arc<Catalog>,
        overlays: &[NodeOverlay],
        invalid: &[Invalid],
        report: &mut Report,
    ) -> (Arc<Catalog>, Vec<OverlayStatus>) {
        let mut statuses = invalid_overlays(invalid);
        if overlays.is_empty() {
            return (base, statuses);
        }
        let mut kept = self.priced.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let fresh = kept.as_ref().is_some_and(|p| Arc::ptr_eq(&p.base, &base) && p.overlays == overlays);
        if !fresh {
            let out = overlay::apply(&base, overlays);
            let conflicts = out
                .statuses
                .into_iter()
                .filter_map(|s| match s.outcome {
                    Outcome::Conflict { with } => Some((s.name, with)),
                    Outcome::Applied { .. } => None,
                })
                .collect();
            *kept = Some(Priced { base, overlays: overlays.to_vec(), catalog: Arc::new(out.catalog), conflicts });
        }
        let p = kept.as_ref().expect("set above");
        for o in overlays {
            let with = p.conflicts.iter().find(|(name, _)| *name == o.name).map(|(_, with)| with.clone());
            if let Some(with) = &with {
                report.errors.push(format!(
                    "NodeOverlay/{} is not applied: NodeOverlay/{with} has the same weight and changes the same \
                     price or resource",
                    o.name
                ));
            }
            statuses.push(OverlayStatus { name: o.name.clone(), problem: with.map(OverlayProblem::Conflict) });
        }
        (p.catalog.clone(), statuses)
    }
}

/// The statuses of the NodeOverlays the read left out as invalid: each one's problems, joined.
fn invalid_overlays(invalid: &[Invalid]) -> Vec<OverlayStatus> {
    let mut problems: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for i in invalid {
        if let Some(name) = i.object.strip_prefix("NodeOverlay/") {
            problems.entry(name).or_default().push(format!("{}: {}", i.field, i.message));
        }
    }
    problems
        .into_iter()
        .map(|(name, p)| OverlayStatus { name: name.to_string(), problem: Some(OverlayProblem::Invalid(p.join("; "))) })
        .collect()
}

impl View {
    /// Puts the view's state into the report's gauges. Called at the end of an invocation, after
    /// its actions (which the view records), so a launch counts among the claims and their cost
    /// in the same invocation's metrics, not the next one's.
    pub fn measure(&self, report: &mut Report) {
        let cluster = &self.cluster;
        report.pending_pods = cluster.pending.len();
        report.oldest_pending_seconds = cluster
            .pending
            .iter()
            .filter_map(|p| p.created_at)
            .min()
            .map_or(0.0, |created| cluster.now.since(created).as_secs_f64());
        report.fleet_cost_per_hour = cluster
            .claims
            .iter()
            .filter(|c| c.phase != Phase::Terminated)
            .filter_map(|c| c.launch.as_ref())
            // Folded from +0.0: a float sum of nothing is -0.0, which metrics would show as such.
            .fold(0.0, |total, l| total + l.price);
        report.claims_by_phase.clear();
        for c in &cluster.claims {
            *report.claims_by_phase.entry(c.phase).or_default() += 1;
        }
    }

    /// Puts a claim's new state into the view later decisions of the same pass read.
    pub fn record(&mut self, claim: &crate::nodeclaim::NodeClaim) {
        self.cluster.record(claim);
        self.written.insert(claim.name.clone());
    }

    /// Takes a claim out of the view (deleted from the store); its object goes with it.
    pub fn forget(&mut self, name: &str) {
        if self.cluster.claims.iter().any(|c| c.name == name && object::shown(c)) {
            self.written.insert(name.to_string());
        }
        self.cluster.claims.retain(|c| c.name != name);
    }
}
