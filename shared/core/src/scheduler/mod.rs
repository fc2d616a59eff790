//! The provisioning scheduler: places pending pods on existing capacity first, then on as few
//! dollars of new NodeClaims as it can.
//!
//! Shape of the algorithm (first-fit-decreasing, with three changes that make it cheaper and
//! faster than Karpenter's):
//! - pods with identical constraints form a *class*; compatibility, candidate types and topology
//!   domains are worked out once per class, and a per-class cursor skips bins that can never take
//!   that class again (bins only fill up, so a rejection is final) — near-linear time;
//! - a new claim is filled up to a *target* instance type: the one that buys the pool's remaining
//!   demand most cheaply (price × nodes needed), instead of growing until only the largest types
//!   fit; at the end each claim is re-priced to the cheapest type that holds its pods;
//! - preferences are relaxed per pod in Karpenter's order only when a pod cannot otherwise go.
//!
//! Where things are: start at [`schedule`] below, then `pass.rs` (the scheduler's state and its
//! loop); each other file holds one part of the work:
//! - `classes.rs` — pods grouped into classes, and each class's relaxation ladder (its rungs);
//! - `pools.rs` — the NodePools prepared for a pass: instance types, offerings, prices, limits,
//!   and a pool fit (which of its types can take a class);
//! - `cache.rs` — what a pass prepares (pool types, fits, priced types), kept for the next pass
//!   over the same inputs, and checked against them;
//! - `fit.rs` — whether a pool can run a class at a rung, and with which types;
//! - `topology.rs` — pods counted per topology domain; `domains.rs` — the domains a pod may take;
//! - `bins.rs` — the capacity pods go on, and whether a bin takes a pod;
//! - `claims.rs` — opening a new claim and filling it; `reservations.rs` — what each capacity
//!   reservation still takes, and which reserved offering a claim goes into (a pod a reservation
//!   holds opens its claim there before anything is bought);
//! - `targets.rs` — the instance type a new claim is filled up to;
//! - `repack.rs` — new claims packed afresh or merged after the pass; `mix.rs` — a few claims
//!   at a time packed afresh over a mix of types; `rides.rs` — a claim's pods moved onto another
//!   pool's claim; `exact.rs` — a small batch packed exactly, by search;
//! - `finalize.rs` — the filled bins turned into the plan; `bound.rs` — the lower bound it is
//!   judged against; `plan.rs` — the plan's types;
//! - `optimum.rs` (feature `optimum`) — the exact optimum of small problems, by MILP, that the
//!   exact-optimum test and `dovetail bench` judge plans against.

mod bins;
mod bound;
mod cache;
mod claims;
mod classes;
mod domains;
mod exact;
mod finalize;
mod fit;
mod mix;
#[cfg(feature = "optimum")]
pub mod optimum;
mod pass;
mod plan;
mod pools;
mod repack;
mod reservations;
mod rides;
mod targets;
mod topology;

pub use cache::{CatalogRef, SolveCache};
pub use plan::{ExistingPlacement, Plan, PlannedClaim, Unschedulable};

use pass::Scheduler;

use crate::catalog::Catalog;
use crate::snapshot::Snapshot;

/// The cheapest price a node of `pool` could be launched at now: its types under its class's
/// kubelet (`None`: the class is missing), each at its available offerings the pool's requirements
/// allow and `unavailable` does not rule out. `None` when it can launch nothing at all. What a cost
/// limit must leave room for before the pool can grow (see `CostLimitReached` in its status).
pub fn cheapest_launch(
    pool: &crate::model::NodePool,
    kubelet: Option<&crate::model::KubeletConfig>,
    catalog: &Catalog,
    unavailable: &std::collections::BTreeSet<crate::catalog::OfferingKey>,
) -> Option<f64> {
    let mut requirements = pool.requirements.clone();
    requirements.add(crate::requirements::Requirement::single(crate::labels::NODEPOOL, &pool.name));
    // Reservations left out: what a cost limit must leave room for is a node bought at its price.
    let (_, types) = pools::pool_types(pool, &requirements, kubelet, &[], catalog, unavailable, &[]);
    types.iter().flat_map(|t| t.offerings.iter().map(|o| o.price)).min_by(f64::total_cmp)
}

/// Computes the plan for a snapshot.
pub fn schedule(snap: &Snapshot, catalog: &Catalog) -> Plan {
    schedule_with(snap, catalog, Strategy::LowestCost)
}

/// How new claims are packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Dovetail's: target types chosen for value per dollar, claims filled by shape.
    LowestCost,
    /// Karpenter's first-fit-decreasing: a new claim keeps every type that still fits and grows
    /// until only the largest would; pods go to the first claim with room. Kept as the baseline the
    /// benchmarks compare against.
    FirstFitDecreasing,
}

/// Computes the plan with a given packing strategy (constraints are honoured the same way).
pub fn schedule_with(snap: &Snapshot, catalog: &Catalog, strategy: Strategy) -> Plan {
    plan_with(snap, catalog.into(), &SolveCache::new(), strategy, true)
}

/// Computes the plan [`schedule`] computes, reusing what earlier solves with `cache` prepared when
/// they had the same inputs (see [`SolveCache`]; it is checked and started afresh otherwise). A
/// warm process keeps one cache and passes it to every solve.
pub fn schedule_cached<'c>(snap: &Snapshot, catalog: impl Into<CatalogRef<'c>>, cache: &SolveCache<'c>) -> Plan {
    plan_with(snap, catalog.into(), cache, Strategy::LowestCost, true)
}

/// [`schedule_cached`] for consolidation's many small simulations, which read placements and
/// prices only: the plan's `lower_bound_per_hour` is left at 0.
pub fn simulate<'c>(snap: &Snapshot, catalog: impl Into<CatalogRef<'c>>, cache: &SolveCache<'c>) -> Plan {
    plan_with(snap, catalog.into(), cache, Strategy::LowestCost, false)
}

fn plan_with<'c>(
    snap: &Snapshot,
    catalog: CatalogRef<'c>,
    cache: &SolveCache<'c>,
    strategy: Strategy,
    with_bound: bool,
) -> Plan {
    let prepared = cache.check(snap, &catalog);
    let mut s = Scheduler::new(snap, catalog.get(), prepared);
    s.strategy = strategy;
    s.run();
    if strategy == Strategy::LowestCost {
        s.repack();
        // Plans that launch get a small batch packed exactly; consolidation's many simulations
        // (without the bound) decide on the pass's packing.
        if with_bound {
            s.pack_exactly();
        }
    }
    let mut plan = finalize::plan(&s);
    // The bound costs another pass over the pods, so only plans people read carry it.
    if with_bound {
        plan.lower_bound_per_hour = bound::lower_bound(&s, &plan);
    }
    plan
}

#[cfg(test)]
mod tests;
