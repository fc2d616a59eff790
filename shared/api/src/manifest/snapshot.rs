//! Loaded manifests into the decision core's snapshot: NodePools and EC2NodeClasses typed,
//! validated and converted; and the NodeOverlays the catalog is priced with.

use dovetail_core::overlay;
use dovetail_core::snapshot::Snapshot;

use super::{Inputs, LoadError, LoadErrorKind, Sourced};
use crate::crd::refused::refused_fields;
use crate::crd::{EC2NodeClass, NodeOverlay, NodePool, API_VERSION, EC2_NODE_CLASS_KIND, OVERLAY_API_VERSION};

/// Parses a NodePool, EC2NodeClass or NodeOverlay document into its typed form (`api_version`
/// being Dovetail's for the kind). Karpenter's `karpenter.sh` and `karpenter.k8s.aws` objects are
/// read as Dovetail's: the fields are the same, and the Karpenter fields Dovetail refuses
/// ([`crate::crd::refused`]) are errors, as on the cluster.
fn typed<T: serde::de::DeserializeOwned>(
    kind: &'static str,
    doc: &Sourced<serde_json::Value>,
    api_version: &str,
) -> Result<T, LoadError> {
    let mut value = doc.object.clone();
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), api_version.into());
    }
    let typed = super::objects::decode(&value).map_err(|kind| LoadError::at(&doc.source, Some(&doc.label), kind))?;
    let refused = refused_fields::<T>(kind, &value);
    if !refused.is_empty() {
        return Err(field_errors(doc, refused));
    }
    Ok(typed)
}

fn field_errors(doc: &Sourced<serde_json::Value>, errors: Vec<crate::crd::FieldError>) -> LoadError {
    let text: Vec<String> = errors.iter().map(|e| format!("{}: {}", e.field, e.message)).collect();
    LoadError::at(&doc.source, Some(&doc.label), LoadErrorKind::Invalid(text.join("; ")))
}

impl Inputs {
    /// The snapshot `dovetail plan` schedules: every pool and class must be valid (a planning
    /// input is fixed by hand, so the first bad object stops the run with its location).
    ///
    /// The nodes are not counted against the limits yet: what a node costs depends on the catalog
    /// and its NodeOverlays. [`dovetail_core::provisioning::count_nodes`] counts them, as the
    /// functions do, once the catalog is priced.
    pub fn snapshot(&self) -> Result<Snapshot, LoadError> {
        let mut nodepools = Vec::new();
        for doc in &self.node_pools {
            let np: NodePool = typed("NodePool", doc, API_VERSION)?;
            nodepools.push(np.to_core().map_err(|e| field_errors(doc, e))?);
        }
        let mut nodeclasses = Vec::new();
        for doc in &self.node_classes {
            let nc: EC2NodeClass = typed(EC2_NODE_CLASS_KIND, doc, API_VERSION)?;
            nodeclasses.push(nc.to_core().map_err(|e| field_errors(doc, e))?);
        }
        Ok(Snapshot {
            pods: self.pending.clone(),
            nodes: self.nodes.clone(),
            daemonsets: self.daemonsets.clone(),
            nodepools,
            nodeclasses,
            unavailable: Default::default(),
            namespaces: self.namespaces.clone(),
            min_values_policy: Default::default(),
            cost_limit: None,
            // A class's status lists its reservations but not how many instances each has
            // left, so a plan from manifests uses none.
            reservations: Default::default(),
        })
    }

    /// The NodeOverlays to apply to the catalog ([`overlay::apply`]), validated and converted:
    /// like the pools, the first bad one stops the run with its location and field.
    pub fn overlays(&self) -> Result<Vec<overlay::NodeOverlay>, LoadError> {
        self.node_overlays
            .iter()
            .map(|doc| {
                let o: NodeOverlay = typed("NodeOverlay", doc, OVERLAY_API_VERSION)?;
                o.to_core().map_err(|e| field_errors(doc, e))
            })
            .collect()
    }
}
