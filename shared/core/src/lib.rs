//! Dovetail's decision core: a snapshot of the cluster goes in, actions come out.
//!
//! Every decision here is pure and synchronous so the Lambdas, the `dovetail` CLI and the
//! simulator run exactly the same decisions. No AWS SDK, no Kubernetes client, no async runtime:
//! [`reconcile`] is the thin shell that reads through small traits, decides, and acts through
//! them; adapters implementing the traits live elsewhere.

// The modules form a ladder, bottom first: each builds only on the rungs above it in this list
// (tests/layout.rs in the workspace fails on any cycle; docs/architecture.md draws it).

// Vocabulary: the supported input sizes, well-known names, quantities, instants and durations.
pub mod ceilings;
pub mod labels;
pub mod resources;
pub mod time;
// Label requirements,
pub mod requirements;
// then pods, nodes, pools and classes, which carry them.
pub mod model;
// What follows from the model alone: persisted hashes, node overhead, disruption protection.
pub mod hash;
pub mod overhead;
pub mod protection;
// Instance types, their offerings and prices.
pub mod catalog;
// and what the user's NodeOverlays make of them.
pub mod overlay;
// Dovetail's record of one instance, with its drain progress.
pub mod nodeclaim;
// What decisions are made from: the live cluster, and the scheduler's snapshot.
pub mod cluster;
pub mod snapshot;
// How many instances each capacity reservation still takes, claims headed for it counted.
pub mod reservations;
// The instance profile a class's nodes launch with, made and cleaned up for its `role`.
pub mod instance_profile;
// Packing pods onto nodes (and the workloads that benchmark it).
pub mod benchmark;
pub mod scheduler;
// What decisions produce: actions with their reasons, a claim's next step.
pub mod decision;
// and the Events they imply, written without repeats.
pub mod events;
// The concepts, each on those before it: draining a node,
pub mod termination;

pub mod deletion;
// a claim's life from launch to registration,
pub mod lifecycle;
// new capacity for pending pods,
pub mod provisioning;
// replacement capacity for a leaving claim,
pub mod replacement;
// voluntary disruption (budgets, consolidation, drift, expiration, orphans),
pub mod disruption;
// and interruption events.
pub mod interruption;
// The shell: read through the ports, decide, act.
pub mod reconcile;
