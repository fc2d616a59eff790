//! Dovetail's decision core: a snapshot of the cluster goes in, actions come out.
//!
//! Every decision here is pure and synchronous so the Lambdas, the `dovetail` CLI and the
//! simulator run exactly the same decisions. No AWS SDK, no Kubernetes client, no async runtime:
//! [`reconcile`] is the thin shell that reads through small traits, decides, and acts through
//! them; adapters implementing the traits live elsewhere.

pub mod benchmark;
pub mod catalog;
pub mod disruption;
pub mod interruption;
pub mod labels;
pub mod lifecycle;
pub mod model;
pub mod nodeclaim;
pub mod overhead;
pub mod provisioning;
pub mod reconcile;
pub mod requirements;
pub mod resources;
pub mod scheduler;
pub mod snapshot;
pub mod termination;
pub mod time;
