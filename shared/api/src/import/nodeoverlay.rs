//! `karpenter.sh/v1alpha1` NodeOverlay → `dovetail.dev/v1alpha1` NodeOverlay.
//!
//! The fields are the same. Dovetail applies overlays to the one catalog every NodePool shares,
//! so an overlay that selects a NodePool by name, or on a label of a pool's template, cannot keep
//! its meaning: its validation refuses such a requirement with the field, and the overlay is not
//! converted (rather than converted into one that prices every pool's nodes, or none).

use serde_json::Value;

use super::object;
use super::Notes;
use crate::crd::{FieldError, NodeOverlay, NodeOverlaySpec, OVERLAY_API_VERSION};

const KIND: &str = "NodeOverlay";

/// Converts one Karpenter NodeOverlay (as read) into Dovetail's, or says why it cannot be.
pub(super) fn convert(input: &Value, notes: &mut Notes<'_>) -> Result<NodeOverlay, Vec<FieldError>> {
    let mut value = input.clone();
    object::prepare(&mut value, notes);
    if let Some(o) = value.as_object_mut() {
        o.insert("apiVersion".into(), OVERLAY_API_VERSION.into());
    }
    let overlay: NodeOverlay = object::decode::<NodeOverlay, NodeOverlaySpec>(KIND, &value, notes, |_| {
        "dropped: Dovetail's NodeOverlay has no such field".into()
    })?;
    overlay.to_core()?;
    Ok(overlay)
}
