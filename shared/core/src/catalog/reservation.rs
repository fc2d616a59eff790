//! Capacity reservations an EC2NodeClass selects (On-Demand Capacity Reservations and Capacity
//! Blocks for ML): what a reserved offering is and when it may be launched into (how many
//! instances each still takes is [`crate::reservations`]' business).
//!
//! Karpenter's semantics (AWS provider 1.14): a reservation is offered as capacity type
//! `reserved` for its one instance type and zone, priced at the on-demand price divided by ten
//! million (already paid for, yet ordered like on-demand for consolidation), and tried before
//! spot and on-demand whenever a claim's requirements allow `reserved`. A Capacity Block is
//! `expiring` from 40 minutes before its end: nothing more is launched into it and its nodes are
//! disrupted then, ten minutes before EC2 starts reclaiming the instances.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

use crate::labels;
use crate::time::Time;

/// How long before a Capacity Block's end it counts as expiring (Karpenter's
/// `capacityReservationExpirationPeriod`): no launch goes into it and its nodes are disrupted.
pub const BLOCK_EXPIRY_LEAD: Duration = Duration::from_secs(40 * 60);

/// The divisor that makes a reserved offering's price "free" while keeping the order of the
/// on-demand prices it derives from (Karpenter's constant).
pub const RESERVED_PRICE_DIVISOR: f64 = 10_000_000.0;

/// `karpenter.k8s.aws/capacity-reservation-type`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ReservationKind {
    /// An On-Demand Capacity Reservation.
    #[default]
    #[serde(rename = "default")]
    Default,
    /// A Capacity Block for ML: a fixed window, reclaimed by EC2 at its end.
    #[serde(rename = "capacity-block")]
    CapacityBlock,
}

impl ReservationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ReservationKind::Default => "default",
            ReservationKind::CapacityBlock => "capacity-block",
        }
    }

    /// EC2's `ReservationType` (absent on older reservations: `default`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "" | "default" => Some(ReservationKind::Default),
            "capacity-block" => Some(ReservationKind::CapacityBlock),
            _ => None,
        }
    }
}

impl fmt::Display for ReservationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One active capacity reservation a class selects, as EC2 described it at `observed_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// `cr-…`.
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// The owning account.
    #[serde(default)]
    pub owner_id: String,
    /// `open` or `targeted`.
    #[serde(default)]
    pub instance_match_criteria: String,
    pub kind: ReservationKind,
    /// An interruptible ODCR (EC2 may reclaim its instances).
    #[serde(default)]
    pub interruptible: bool,
    /// EC2's `AvailableInstanceCount` when described.
    pub available: u32,
    /// When EC2 said so: launches recorded after it are not in `available` yet.
    pub observed_at: Time,
    /// When the reservation ends, if it does (always for a Capacity Block).
    #[serde(default)]
    pub end: Option<Time>,
}

impl Reservation {
    /// Karpenter's `expiring` state: a Capacity Block within [`BLOCK_EXPIRY_LEAD`] of its end.
    /// Other reservations never expire this way (EC2 ends them and they stop being listed).
    pub fn expiring(&self, now: Time) -> bool {
        self.kind == ReservationKind::CapacityBlock && self.end.is_some_and(|end| now >= end.minus(BLOCK_EXPIRY_LEAD))
    }

    /// Whether a launch may go into it at `now` at all (whatever its count): not ended, and not a
    /// block about to be reclaimed. A block before its start is not `active` and is never listed.
    pub fn open_at(&self, now: Time) -> bool {
        self.end.is_none_or(|end| now < end) && !self.expiring(now)
    }

    /// The state Karpenter's status shows: `expiring` or `active`.
    pub fn state(&self, now: Time) -> &'static str {
        if self.expiring(now) {
            "expiring"
        } else {
            "active"
        }
    }

    /// The price of the reserved offering, from the type's on-demand price.
    pub fn price(on_demand: f64) -> f64 {
        on_demand / RESERVED_PRICE_DIVISOR
    }

    /// The labels a node launched into it carries besides `karpenter.sh/capacity-type=reserved`,
    /// in [`labels::RESERVATION_LABELS`]' order.
    pub fn labels(&self) -> [(&'static str, String); 3] {
        [
            (labels::CAPACITY_RESERVATION_ID, self.id.clone()),
            (labels::CAPACITY_RESERVATION_TYPE, self.kind.as_str().to_string()),
            (labels::CAPACITY_RESERVATION_INTERRUPTIBLE, self.interruptible.to_string()),
        ]
    }

    /// The order claims try reservations in when several would do (Karpenter's launch filter):
    /// ODCRs, then Capacity Blocks, then interruptible ODCRs.
    pub fn preference(&self) -> u8 {
        match (self.kind, self.interruptible) {
            (ReservationKind::Default, false) => 0,
            (ReservationKind::CapacityBlock, _) => 1,
            (ReservationKind::Default, true) => 2,
        }
    }
}
