//! The warm snapshot: what the core needs of every object the adapter reads, kept between
//! invocations (a warm Lambda keeps its process) and brought up to date from what changed.
//!
//! - **Cold** (a new process, or a kind the server can no longer catch up): each kind is listed
//!   page by page and every object is kept in its compact form ([`kept`]) as its page arrives;
//!   the raw pages never pile up.
//! - **Warm**: each kind catches up from its resourceVersion with a short watch that ends at the
//!   API server's bookmark ([`kind`]): the bytes read follow the changes, not the cluster.
//!
//! All kinds sync concurrently, and a read returns only when every kind is current: a decision
//! never rests on a state older than the read. The exactly-once conditional writes downstream
//! stay the last word against anything that changes after it.

mod kept;
mod kind;
mod lean;

#[cfg(test)]
pub(crate) use kept::Keep;
pub(crate) use kept::{
    Converted, KeptAttachment, KeptClaimObject, KeptClass, KeptNamespace, KeptNode, KeptOverlay, KeptPod, KeptPool,
};
pub(crate) use kind::{Kind, Source};
pub use kind::{Reading, CATCH_UP_SECONDS, PAGE_SIZE};
#[cfg(test)]
pub(crate) use lean::Lean;

use dovetail_api::crd::{EC2NodeClass, NodeClaim, NodeOverlay, NodePool};
use dovetail_core::model::{DaemonSet, Pdb};
use dovetail_core::reconcile::ports::PortResult;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ApiResource};
use kube::Client;

/// Pods that finished (Succeeded, Failed) are left out by the server: on clusters running Jobs
/// they can outnumber the live ones. A watch with the selector reports a pod that finishes as
/// deleted.
pub const LIVE_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// What one sync asked of the API server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// List pages, one-object version checks and watches.
    pub requests: usize,
    /// Objects received in list pages.
    pub objects: usize,
    /// Changes received by watches.
    pub events: usize,
    /// Kinds listed again because their catch-up could not finish (410 Gone or failures).
    pub relists: usize,
}

/// Every kind the adapter reads, as kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Snapshot {
    pub nodes: Kind<KeptNode>,
    pub pods: Kind<KeptPod>,
    pub daemonsets: Kind<Converted<DaemonSet>>,
    pub pdbs: Kind<Converted<Pdb>>,
    pub claims: Kind<PersistentVolumeClaim>,
    pub volumes: Kind<PersistentVolume>,
    pub classes: Kind<StorageClass>,
    pub attachments: Kind<KeptAttachment>,
    pub namespaces: Kind<KeptNamespace>,
    pub nodepools: Kind<KeptPool>,
    pub nodeclasses: Kind<KeptClass>,
    pub overlays: Kind<KeptOverlay>,
    /// NodeClaim objects (`nodeclaims.dovetail.dev`), not the volume claims above.
    pub claim_objects: Kind<KeptClaimObject>,
}

fn source<K>(api: Api<K>, what: &'static str) -> Source<K> {
    Source { api, fields: None, what, optional: false }
}

impl Snapshot {
    /// Brings every kind up to date, concurrently: a list for kinds never read, a catch-up for the
    /// others. On an error the kinds that did sync keep their progress and the read fails.
    pub async fn sync(&mut self, client: &Client, reading: &Reading) -> PortResult<Counts> {
        // A read lasts as long as its slowest kind. When a large kind (pods, on any cluster past a
        // page of them) waits for its bookmark anyway, the small kinds' watches end by then too:
        // they catch up rather than list again, and the read costs what changed, not a page of
        // every small kind (NodeClaim objects and Nodes below a page are most of that).
        let waiting = self.pods.version.is_some() && self.pods.objects.len() >= reading.relist_below;
        let reading = &Reading { relist_below: if waiting { 0 } else { reading.relist_below }, ..*reading };
        let c = || client.clone();
        let nodes = source(Api::all(c()), "nodes");
        let pods = Source { api: Api::all(c()), fields: Some(LIVE_PODS), what: "pods", optional: false };
        let daemonsets = source(Api::all(c()), "daemonsets");
        let pdbs = source(Api::all(c()), "poddisruptionbudgets");
        let claims = source(Api::all(c()), "persistentvolumeclaims");
        let volumes = source(Api::all(c()), "persistentvolumes");
        let classes = source(Api::all(c()), "storageclasses");
        let attachments = source(Api::all(c()), "volumeattachments");
        let namespaces = source(Api::all(c()), "namespaces");
        let nodepools = source(Api::all_with(c(), &ApiResource::erase::<NodePool>(&())), "nodepools");
        let nodeclasses = source(Api::all_with(c(), &ApiResource::erase::<EC2NodeClass>(&())), "ec2nodeclasses");
        let claim_objects = source(Api::all_with(c(), &ApiResource::erase::<NodeClaim>(&())), "nodeclaims");
        // NodeOverlays are alpha and arrived after the other CRDs: a cluster without theirs has none.
        let overlays = Source {
            optional: true,
            ..source(Api::all_with(c(), &ApiResource::erase::<NodeOverlay>(&())), "nodeoverlays")
        };
        let mut counts = [Counts::default(); 13];
        let [n, p, d, b, pc, pv, sc, va, ns, np, nc, co, no] = &mut counts;
        let results = tokio::join!(
            self.nodes.sync(&nodes, reading, n),
            self.pods.sync(&pods, reading, p),
            self.daemonsets.sync(&daemonsets, reading, d),
            self.pdbs.sync(&pdbs, reading, b),
            self.claims.sync(&claims, reading, pc),
            self.volumes.sync(&volumes, reading, pv),
            self.classes.sync(&classes, reading, sc),
            self.attachments.sync(&attachments, reading, va),
            self.namespaces.sync(&namespaces, reading, ns),
            self.nodepools.sync(&nodepools, reading, np),
            self.nodeclasses.sync(&nodeclasses, reading, nc),
            self.claim_objects.sync(&claim_objects, reading, co),
            self.overlays.sync(&overlays, reading, no),
        );
        let total = counts.iter().fold(Counts::default(), |t, c| Counts {
            requests: t.requests + c.requests,
            objects: t.objects + c.objects,
            events: t.events + c.events,
            relists: t.relists + c.relists,
        });
        let (r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12) = results;
        for r in [r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12] {
            r?;
        }
        Ok(total)
    }

    /// Forgets everything: the next sync lists every kind (a process that starts afresh).
    pub fn clear(&mut self) {
        *self = Snapshot::default();
    }

    /// Makes every kind that has a version resume from `version` instead.
    pub fn set_versions(&mut self, version: &str) {
        let set = |v: &mut Option<String>| {
            if v.is_some() {
                *v = Some(version.to_string());
            }
        };
        set(&mut self.nodes.version);
        set(&mut self.pods.version);
        set(&mut self.daemonsets.version);
        set(&mut self.pdbs.version);
        set(&mut self.claims.version);
        set(&mut self.volumes.version);
        set(&mut self.classes.version);
        set(&mut self.attachments.version);
        set(&mut self.namespaces.version);
        set(&mut self.nodepools.version);
        set(&mut self.nodeclasses.version);
        set(&mut self.claim_objects.version);
        set(&mut self.overlays.version);
    }
}
