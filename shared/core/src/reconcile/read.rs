//! One read of everything a pass decides from (which instances it describes: [`super::scope`]).

use std::collections::BTreeMap;

use super::ports::{Clock, Cloud, Kube, PortResult, Queue, Store};
use super::scope::Scope;
use super::{Reconciler, Report, View};
use crate::cluster::{Cluster, Described};
use crate::hash::nodepool_hash;
use crate::nodeclaim::Phase;
use crate::provisioning;

impl<K: Kube, C: Cloud, S: Store, Q: Queue, T: Clock> Reconciler<K, C, S, Q, T> {
    /// Kubernetes objects, claims, instances (all of the cluster's, or those `scope` asks for),
    /// the catalog, the unavailable offerings and what each EC2NodeClass resolves to now. A class
    /// that fails to resolve is reported and left out (launches for it wait; drift is not judged
    /// against it); the other reads are required.
    pub async fn read(&self, report: &mut Report, scope: Scope<'_>) -> PortResult<View> {
        let now = self.ports.clock.now();
        let kube = self.ports.kube.read().await?;
        let claims = self.ports.store.claims().await?;
        let (instances, described) = match scope.query(&claims) {
            None => (self.ports.cloud.instances().await?, Described::All),
            Some(query) => (self.ports.cloud.instances_of(&query).await?, Described::Only(query)),
        };
        let catalog = self.ports.cloud.catalog().await?;
        let unavailable = self.ports.store.unavailable(now).await?;
        let mut resolved = Vec::with_capacity(kube.nodeclasses.len());
        for class in &kube.nodeclasses {
            match self.ports.cloud.resolve(class).await {
                Ok(r) => resolved.push(r),
                Err(e) => report.errors.push(format!("EC2NodeClass/{}: {e}", class.name)),
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
        };
        let usage = provisioning::pool_usage(&cluster, &catalog);
        for p in &mut cluster.nodepools {
            p.usage = usage.get(&p.name).cloned().unwrap_or_default();
        }
        report.pending_pods = cluster.pending.len();
        report.fleet_cost_per_hour = cluster
            .claims
            .iter()
            .filter(|c| c.phase != Phase::Terminated)
            .filter_map(|c| c.launch.as_ref())
            // Folded from +0.0: a float sum of nothing is -0.0, which metrics would show as such.
            .fold(0.0, |total, l| total + l.price);
        Ok(View { cluster, catalog, invalid: kube.invalid, replan: false })
    }
}

impl View {
    /// Puts a claim's new state into the view later decisions of the same pass read.
    pub fn record(&mut self, claim: &crate::nodeclaim::NodeClaim) {
        self.cluster.record(claim);
    }
}
