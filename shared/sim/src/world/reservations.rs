//! Capacity reservations in the simulated EC2: On-Demand Capacity Reservations and Capacity
//! Blocks a scenario holds, listed to the classes whose `capacityReservationSelectorTerms` select
//! them (as DescribeCapacityReservations answers the AWS adapter), filled by reserved launches and
//! emptied again as their instances end (a Capacity Block's at its end, when EC2 takes them back,
//! see `State::block_ended`). EC2's `AvailableInstanceCount` is the reservation's count
//! less its instances still running, so a launch into a full one fails like
//! `ReservationCapacityExceeded`.

use std::collections::BTreeMap;

use dovetail_api::crd::{CapacityReservationSelectorTerm, InstanceMatchCriteria};
use dovetail_core::catalog::{Reservation, ReservationKind};
use dovetail_core::model::NodeClass;
use dovetail_core::time::Time;

use super::State;

/// The match criteria of every simulated reservation: Dovetail's launches target them, as
/// Karpenter's do, and nothing else in the simulated account launches into them.
pub const MATCH_CRITERIA: &str = "targeted";

/// A capacity reservation the scenario holds.
#[derive(Debug, Clone, PartialEq)]
pub struct SimReservation {
    /// `cr-…`.
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// How many instances it holds (EC2's `TotalInstanceCount`).
    pub count: u32,
    pub kind: ReservationKind,
    /// Tags selector terms may match on.
    pub tags: BTreeMap<String, String>,
    /// When it becomes `active` (a Capacity Block's start; `None`: from the start of the run).
    pub start: Option<Time>,
    /// When it ends (always for a Capacity Block).
    pub end: Option<Time>,
}

impl SimReservation {
    /// EC2 lists it as `active`: started and not ended.
    pub fn active(&self, now: Time) -> bool {
        self.start.is_none_or(|s| now >= s) && self.end.is_none_or(|e| now < e)
    }

    /// Instance-hours it holds between `from` and `to` (its count over the part of its window
    /// inside them), used or not.
    pub fn hours_within(&self, from: Time, to: Time) -> f64 {
        let (start, end) = (self.start.unwrap_or(from).max(from), self.end.unwrap_or(to).min(to));
        if end <= start {
            return 0.0;
        }
        f64::from(self.count) * end.since(start).as_secs_f64() / 3600.0
    }

    /// Whether one of a class's selector terms selects it: by id, or by all of the term's tags
    /// (`*` matching any value) with the term's owner and match criteria, if given.
    fn selected_by(&self, term: &CapacityReservationSelectorTerm, account: &str) -> bool {
        if let Some(id) = &term.id {
            return *id == self.id;
        }
        if term.tags.is_empty() && term.instance_match_criteria.is_none() {
            return false;
        }
        let tags = term.tags.iter().all(|(k, v)| self.tags.get(k).is_some_and(|t| v == "*" || t == v));
        let owner = term.owner_id.as_deref().is_none_or(|o| o == account);
        let criteria = term.instance_match_criteria.as_ref().is_none_or(|c| *c == InstanceMatchCriteria::Targeted);
        tags && owner && criteria
    }
}

/// The class's selector terms as written in its spec (none when it has none, or when they do not
/// read as terms: the API layer refuses such a class before it gets here).
fn selector_terms(class: &NodeClass) -> Vec<CapacityReservationSelectorTerm> {
    class
        .spec
        .get("capacityReservationSelectorTerms")
        .and_then(|t| serde_json::from_value(t.clone()).ok())
        .unwrap_or_default()
}

impl State {
    /// EC2's `AvailableInstanceCount` of reservation `id` now: its count less its live instances.
    pub fn reservation_available(&self, id: &str) -> u32 {
        let Some(r) = self.config.reservations.iter().find(|r| r.id == id) else { return 0 };
        let used = self
            .cloud
            .instances
            .values()
            .filter(|i| i.reservation.as_deref() == Some(id) && i.ended_at.is_none())
            .count();
        r.count.saturating_sub(used as u32)
    }

    /// When reservation `id` ends, if it does (EC2 takes back the instances of a block then).
    pub fn reservation_end(&self, id: &str) -> Option<Time> {
        self.config.reservations.iter().find(|r| r.id == id)?.end
    }

    /// The active reservations `class` selects, as DescribeCapacityReservations describes them now.
    pub fn reservations_of(&self, class: &NodeClass) -> Vec<Reservation> {
        let terms = selector_terms(class);
        let account = &self.config.account;
        self.config
            .reservations
            .iter()
            .filter(|r| r.active(self.now) && terms.iter().any(|t| r.selected_by(t, account)))
            .map(|r| Reservation {
                id: r.id.clone(),
                instance_type: r.instance_type.clone(),
                zone: r.zone.clone(),
                owner_id: account.clone(),
                instance_match_criteria: MATCH_CRITERIA.to_string(),
                kind: r.kind,
                interruptible: false,
                available: self.reservation_available(&r.id),
                observed_at: self.now,
                end: r.end,
            })
            .collect()
    }

    /// Why a launch into reservation `id` of `instance_type` in `zone` fails now, if it does: the
    /// reservation is unknown, not active, for another type or zone, or full.
    pub fn reservation_refusal(&self, id: &str, instance_type: &str, zone: &str) -> Option<String> {
        let Some(r) = self.config.reservations.iter().find(|r| r.id == id) else {
            return Some(format!("InvalidCapacityReservationId.NotFound: {id}"));
        };
        if !r.active(self.now) {
            return Some(format!("ReservationCapacityExceeded: {id} is not active"));
        }
        if r.instance_type != instance_type || r.zone != zone {
            return Some(format!("ReservationCapacityExceeded: {id} holds {} in {}", r.instance_type, r.zone));
        }
        (self.reservation_available(id) == 0).then(|| format!("ReservationCapacityExceeded: {id} is full"))
    }
}
