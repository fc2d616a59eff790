//! NodeOverlays in the CLI: the catalog `plan` and `bench` price with, and a note for each overlay
//! that is not applied (the functions publish the same as the overlay's status condition).

use dovetail_core::catalog::Catalog;
use dovetail_core::overlay::{self, NodeOverlay, Outcome};

/// `base` with `overlays` applied ([`overlay::apply`], the functions' own step), after a note on
/// stderr for each overlay that conflicts with another.
pub fn priced(base: &Catalog, overlays: &[NodeOverlay]) -> Catalog {
    let out = overlay::apply(base, overlays);
    for s in &out.statuses {
        if let Outcome::Conflict { with } = &s.outcome {
            eprintln!(
                "dovetail: note: NodeOverlay {} is not applied: NodeOverlay {with} has the same weight and \
                 changes the same price or resource",
                s.name
            );
        }
    }
    out.catalog
}
