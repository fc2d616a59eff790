//! Dovetail's simulator: the reconcilers the Lambdas run, driven over virtual time against an
//! in-memory world, with a Cluster Autoscaler-like baseline to compare against.
//!
//! - [`world`]: one shared state behind every port the reconcilers use (`Kube`, `Cloud`, `Store`,
//!   `Queue`, `Clock`), plus what the real world does on its own: instances boot and get
//!   interrupted, kube-scheduler binds pods, controllers recreate them, jobs finish.
//! - [`scenario`]: the YAML format (standard manifests plus a timeline) and the built-in scenarios.
//! - [`driver`]: the event loop — doorbells with a batching window, interruption and delayed
//!   messages, the sweeper's schedule — calling the functions where the Lambdas would run.
//! - [`baseline`]: a Cluster Autoscaler-like policy over the same world.
//! - [`report`]: what a run cost and how long pods waited, as a table, JSON or an HTML page.
//! - [`faults`]: crashes and seeded faults injected into every port.
//! - [`chaos`]: a world run through seeded faults, then checked against the invariants.
//! - [`fixtures`]: worlds the tests start from.
//! - [`invariants`]: what must hold after any run (one instance per claim, nothing pending).
//!
//! Everything is deterministic for a seed: seeded `SmallRng`, `BTreeMap` iteration, virtual time.

pub mod baseline;
pub mod chaos;
pub mod driver;
pub mod faults;
pub mod fixtures;
pub mod invariants;
pub mod report;
pub mod scenario;
pub mod world;

pub use driver::block_on;
