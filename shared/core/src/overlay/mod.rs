//! NodeOverlays: what a user knows about prices and resources that EC2's catalog does not (a
//! Savings Plan's discount, a licensed image's surcharge, a device plugin's extended resource),
//! applied to the catalog once, before any decision reads it.
//!
//! [`apply`] is the only place overlays change anything. It returns a catalog whose
//! [`Offering::price`] is the effective price (so decisions, limits, consolidation and the
//! simulator's bill all see it without knowing overlays exist) and whose [`Offering::list_price`]
//! keeps the catalog's price beside it for `dovetail plan` to show.
//!
//! The semantics are Karpenter v1alpha1's: overlays are taken by weight, highest first, and by
//! name, later first, among equal weights; for each offering the first overlay that sets its
//! price wins, and each extended resource takes the first overlay's quantity. Two overlays of the
//! same weight that would both set one offering's price, or one resource of one type, conflict:
//! the one taken second is not applied at all (nothing of it, so no half-applied overlay) and its
//! status says which overlay it conflicts with.
//!
//! Karpenter evaluates overlays per NodePool, so its requirements may name a pool or its template
//! labels. Dovetail has one catalog for every pool, so an overlay selects on what an offering
//! itself carries: the type's labels plus the offering's zone, zone id and capacity type. The API
//! layer refuses requirements on the NodePool name or on other labels with an error naming the
//! field, instead of an overlay that silently never matches.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, InstanceResources, InstanceType, Offering};
use crate::labels;
use crate::requirements::Requirements;

/// A NodeOverlay, validated: what the API layer makes of a `NodeOverlay` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeOverlay {
    pub name: String,
    /// Which offerings the overlay applies to (matched against an offering's labels).
    pub requirements: Requirements,
    /// Precedence among overlays; unset counts as 0.
    pub weight: i32,
    /// What the overlay does to the price of the offerings it selects, if anything.
    pub price: Option<PriceChange>,
    /// Extended resources (name, count) added to, or replacing those of, the selected types.
    pub capacity: Vec<(String, i64)>,
}

/// A price change: `price` sets it, `priceAdjustment` adds a signed amount or a percentage.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum PriceChange {
    /// USD per hour, whatever the catalog says (`price: "0.05"`).
    Set(f64),
    /// USD per hour added (`priceAdjustment: "+0.02"` or `"-0.01"`).
    Add(f64),
    /// Percent added (`priceAdjustment: "-28%"` or `"+10%"`).
    Percent(f64),
}

/// Why a price or price adjustment string is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceChangeError {
    #[error("{0:?} is not a price: use a non-negative decimal such as \"0.05\" (USD per hour)")]
    Price(String),
    #[error(
        "{0:?} is not a price adjustment: use a signed amount (\"+0.02\", \"-0.5\") or a signed \
         percentage (\"+10%\", \"-28%\"; a decrease is at most \"-100%\")"
    )]
    Adjustment(String),
}

/// Digits with at most one dot and at least one digit (`\d*\.?\d+` and `\d+(\.\d+)?`).
fn is_decimal(s: &str, leading_dot: bool) -> bool {
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (s, None),
    };
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    match frac {
        None => !int.is_empty() && digits(int),
        Some(f) => !f.is_empty() && digits(f) && digits(int) && (leading_dot || !int.is_empty()),
    }
}

impl PriceChange {
    /// `spec.price`: an unsigned decimal (Karpenter's pattern `^\d+(\.\d+)?$`).
    pub fn parse_price(s: &str) -> Result<Self, PriceChangeError> {
        if !is_decimal(s, false) {
            return Err(PriceChangeError::Price(s.to_string()));
        }
        s.parse().map(PriceChange::Set).map_err(|_| PriceChangeError::Price(s.to_string()))
    }

    /// `spec.priceAdjustment`: `+x`/`-x` USD, `+x%`, or a decrease of at most 100%
    /// (`-d%`/`-dd%` with decimals, or `-100%`), as Karpenter's pattern allows.
    pub fn parse_adjustment(s: &str) -> Result<Self, PriceChangeError> {
        let bad = || PriceChangeError::Adjustment(s.to_string());
        let (negative, rest) = match s.as_bytes().first() {
            Some(b'+') => (false, &s[1..]),
            Some(b'-') => (true, &s[1..]),
            _ => return Err(bad()),
        };
        if let Some(pct) = rest.strip_suffix('%') {
            let ok = if negative {
                // `-\d{1,2}(\.\d+)?%` or `-100%`: a discount cannot exceed the price.
                pct == "100" || {
                    let int = pct.split_once('.').map_or(pct, |(i, _)| i);
                    (1..=2).contains(&int.len()) && is_decimal(pct, false)
                }
            } else {
                is_decimal(pct, true)
            };
            let v: f64 = pct.parse().map_err(|_| bad())?;
            return if ok { Ok(PriceChange::Percent(if negative { -v } else { v })) } else { Err(bad()) };
        }
        if !is_decimal(rest, true) {
            return Err(bad());
        }
        let v: f64 = rest.parse().map_err(|_| bad())?;
        Ok(PriceChange::Add(if negative { -v } else { v }))
    }

    /// The effective price of an offering listed at `list`; never below zero.
    pub fn apply(self, list: f64) -> f64 {
        let p = match self {
            PriceChange::Set(v) => v,
            PriceChange::Add(d) => list + d,
            PriceChange::Percent(pct) => list * (1.0 + pct / 100.0),
        };
        p.max(0.0)
    }
}

/// What became of one overlay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Outcome {
    /// Applied: how many offerings it priced and how many types it gave resources.
    Applied { offerings: usize, types: usize },
    /// Not applied: an overlay of the same weight, taken first, already sets the same price or
    /// resource.
    Conflict { with: String },
}

/// An overlay's [`Outcome`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub name: String,
    pub outcome: Outcome,
}

/// The catalog with every applicable overlay applied, and what became of each overlay (in the
/// order they were taken: weight, then name, as Karpenter orders them).
#[derive(Debug, Clone)]
pub struct Overlaid {
    pub catalog: Catalog,
    pub statuses: Vec<Status>,
}

/// Who set a price or a resource so far, at which weight (the lowest weight that touched it, as
/// only an overlay of that weight can still conflict: the order is by weight, descending).
#[derive(Debug, Clone)]
struct Claim {
    winner: usize,
    lowest_weight: i32,
    lowest: usize,
}

/// Applies `overlays` to `catalog` (see the module doc). Overlays that select nothing are
/// "applied" to nothing; with no overlays the catalog comes back unchanged.
pub fn apply(catalog: &Catalog, overlays: &[NodeOverlay]) -> Overlaid {
    let mut order: Vec<usize> = (0..overlays.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&overlays[a], &overlays[b]);
        b.weight.cmp(&a.weight).then_with(|| b.name.cmp(&a.name))
    });
    // (type, offering) → who prices it; (type, resource) → who sets it.
    let mut prices: BTreeMap<(usize, usize), Claim> = BTreeMap::new();
    let mut resources: BTreeMap<(usize, &str), Claim> = BTreeMap::new();
    let mut statuses = Vec::with_capacity(overlays.len());
    for &i in &order {
        let overlay = &overlays[i];
        let selector = Selector::new(&overlay.requirements);
        // Every (type, offering) it selects; a type is selected when any of its offerings is.
        let selected: Vec<(usize, usize)> = catalog
            .types
            .iter()
            .enumerate()
            .filter(|(_, it)| selector.selects_type(it))
            .flat_map(|(t, it)| {
                it.offerings.iter().enumerate().filter(|(_, o)| selector.selects(o, catalog)).map(move |(o, _)| (t, o))
            })
            .collect();
        let mut types: Vec<usize> = selected.iter().map(|(t, _)| *t).collect();
        types.dedup();
        let same_weight = |c: &Claim| c.lowest_weight == overlay.weight;
        let conflict = if overlay.price.is_some() {
            selected.iter().find_map(|k| prices.get(k).filter(|c| same_weight(c)).map(|c| c.lowest))
        } else {
            None
        }
        .or_else(|| {
            types.iter().find_map(|&t| {
                overlay
                    .capacity
                    .iter()
                    .find_map(|(r, _)| resources.get(&(t, r.as_str())).filter(|c| same_weight(c)).map(|c| c.lowest))
            })
        });
        if let Some(other) = conflict {
            statuses.push(Status {
                name: overlay.name.clone(),
                outcome: Outcome::Conflict { with: overlays[other].name.clone() },
            });
            continue;
        }
        let mut priced = 0;
        if overlay.price.is_some() {
            for &k in &selected {
                let c = prices.entry(k).or_insert(Claim { winner: i, lowest_weight: overlay.weight, lowest: i });
                priced += usize::from(c.winner == i);
                c.lowest_weight = overlay.weight;
                c.lowest = i;
            }
        }
        let mut resourced = 0;
        if !overlay.capacity.is_empty() {
            for &t in &types {
                let mut any = false;
                for (r, _) in &overlay.capacity {
                    let c = resources.entry((t, r.as_str())).or_insert(Claim {
                        winner: i,
                        lowest_weight: overlay.weight,
                        lowest: i,
                    });
                    any |= c.winner == i;
                    c.lowest_weight = overlay.weight;
                    c.lowest = i;
                }
                resourced += usize::from(any);
            }
        }
        statuses.push(Status {
            name: overlay.name.clone(),
            outcome: Outcome::Applied { offerings: priced, types: resourced },
        });
    }
    let mut out = catalog.clone();
    for ((t, o), c) in prices {
        let change = overlays[c.winner].price.expect("only overlays with a price claim offerings");
        let offering = &mut out.types[t].offerings[o];
        let list = offering.list_price.unwrap_or(offering.price);
        offering.list_price = Some(list);
        offering.price = change.apply(list);
    }
    for ((t, r), c) in resources {
        let (_, count) = overlays[c.winner].capacity.iter().find(|(n, _)| n == r).expect("claimed resources exist");
        set_extended(&mut out.types[t].resources, r, *count);
    }
    Overlaid { catalog: out, statuses }
}

/// Labels an offering sets on top of its type's (the type's own requirements on them list every
/// offering's value, so they are matched per offering).
const OFFERING_KEYS: [&str; 3] = [labels::ZONE, labels::ZONE_ID, labels::CAPACITY_TYPE];

/// An overlay's requirements split into those on the type's labels and those on the offering's,
/// so a type is matched once rather than once per offering.
struct Selector {
    by_type: Requirements,
    by_offering: Requirements,
}

impl Selector {
    fn new(requirements: &Requirements) -> Self {
        let (mut by_type, mut by_offering) = (Requirements::new(), Requirements::new());
        for r in requirements.iter() {
            let side = if OFFERING_KEYS.contains(&r.key.as_str()) { &mut by_offering } else { &mut by_type };
            side.add(r.clone());
        }
        Selector { by_type, by_offering }
    }

    /// Whether the type's labels (its single-valued requirements) satisfy the overlay.
    fn selects_type(&self, t: &InstanceType) -> bool {
        self.by_type.matches(|key| t.requirements.get(key).and_then(|r| r.single_value()))
    }

    /// Whether the offering's zone, zone id and capacity type satisfy the overlay (a zone the
    /// catalog knows no id of has no zone-id label).
    fn selects(&self, o: &Offering, catalog: &Catalog) -> bool {
        self.by_offering.matches(|key| match key {
            labels::ZONE => Some(o.zone.as_str()),
            labels::CAPACITY_TYPE => Some(o.capacity_type.as_str()),
            labels::ZONE_ID => catalog.zone_id(&o.zone),
            _ => None,
        })
    }
}

/// Sets an extended resource of a type: it adds to what the node advertises, so capacity and
/// allocatable both carry it (the kubelet reserves nothing of extended resources).
fn set_extended(resources: &mut InstanceResources, name: &str, count: i64) {
    match resources {
        InstanceResources::Ec2(facts) => match facts.extended.iter_mut().find(|(n, _)| n == name) {
            Some(e) => e.1 = count,
            None => facts.extended.push((name.to_string(), count)),
        },
        InstanceResources::Fixed { capacity, allocatable } => {
            capacity.set(name, count);
            allocatable.set(name, count);
        }
    }
}

#[cfg(test)]
mod tests;
