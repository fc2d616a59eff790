//! Voluntary and involuntary disruption: what to take away, when, and why.
//!
//! Every function here is a pure decision over a [`Cluster`](crate::cluster::Cluster) — the live state the sweeper and the
//! interruption function read (or the simulator holds) — and returns [`Decision`](crate::decision::Decision)s: actions with
//! the sentence a person would want to read about them. Adapters carry the actions out.

pub mod block_expiry;
pub mod budgets;
pub mod consolidation;
pub mod drift;
pub mod expiration;
pub mod orphans;
pub mod repair;
pub mod sweep;
