//! Instance types and their offerings (zone × capacity type, with a price).
//!
//! The embedded catalog is generated from public EC2 facts (see `generate.py` beside this file);
//! the AWS adapter refreshes it from the EC2 and Pricing APIs at run time.

mod embedded;
mod image;
mod os;
mod reservation;

pub use embedded::{
    embedded, embedded_with_zones, spot_band_monthly_rate, spot_interruption_band, types_from_tsv, CatalogDataError,
    Zone, COLUMNS, DEFAULT_ZONES,
};
pub use image::ImageVariant;
pub use os::WINDOWS_LICENSE_PER_VCPU_HOUR;
pub use reservation::{Reservation, ReservationKind, BLOCK_EXPIRY_LEAD, RESERVED_PRICE_DIVISOR};

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::model::KubeletConfig;
use crate::overhead::{self, Ec2Facts};
use crate::requirements::Requirements;
use crate::resources::Resources;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum CapacityType {
    #[serde(rename = "spot")]
    Spot,
    #[serde(rename = "on-demand")]
    OnDemand,
    /// Launched into a capacity reservation the class selects ([`Reservation`]).
    #[serde(rename = "reserved")]
    Reserved,
}

impl CapacityType {
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityType::Spot => crate::labels::CAPACITY_SPOT,
            CapacityType::OnDemand => crate::labels::CAPACITY_ON_DEMAND,
            CapacityType::Reserved => crate::labels::CAPACITY_RESERVED,
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "spot" => Some(CapacityType::Spot),
            "on-demand" => Some(CapacityType::OnDemand),
            "reserved" => Some(CapacityType::Reserved),
            _ => None,
        }
    }
}

impl fmt::Display for CapacityType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where and how an instance type can be bought, and for how much.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offering {
    pub zone: String,
    pub capacity_type: CapacityType,
    /// USD per hour: the effective price every decision uses (the catalog's, or what a
    /// NodeOverlay made of it; see [`crate::overlay`]).
    pub price: f64,
    /// The catalog's price when a NodeOverlay changed `price`, so a plan can show both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_price: Option<f64>,
    /// False while the offering is known to be out of capacity.
    pub available: bool,
}

/// Identifies an offering in the unavailable-offerings cache.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OfferingKey {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
}

/// How a type's capacity and allocatable are known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum InstanceResources {
    /// A real EC2 type: the overhead model derives allocatable from the facts and kubelet settings.
    Ec2(Ec2Facts),
    /// A synthetic type (benchmarks, tests) with fixed figures.
    Fixed { capacity: Resources, allocatable: Resources },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceType {
    pub name: String,
    /// Every label a node of this type carries (`In [value]`), plus the zones and capacity
    /// types of its offerings.
    pub requirements: Requirements,
    pub offerings: Vec<Offering>,
    pub resources: InstanceResources,
}

impl InstanceType {
    pub fn capacity(&self, kubelet: &KubeletConfig) -> Resources {
        match &self.resources {
            InstanceResources::Ec2(f) => overhead::capacity(f, kubelet),
            InstanceResources::Fixed { capacity, .. } => capacity.clone(),
        }
    }

    pub fn allocatable(&self, kubelet: &KubeletConfig) -> Resources {
        match &self.resources {
            InstanceResources::Ec2(f) => overhead::allocatable(f, kubelet),
            InstanceResources::Fixed { allocatable, .. } => allocatable.clone(),
        }
    }

    /// Replaces the offerings, and with them the zone, zone-id and capacity-type requirements
    /// (what the AWS adapter learns from DescribeInstanceTypeOfferings and the price APIs).
    pub fn set_offerings(&mut self, offerings: Vec<Offering>, zones: &[Zone]) {
        for r in embedded::offering_requirements(&offerings, zones) {
            self.requirements.remove(&r.key);
            self.requirements.add(r);
        }
        self.offerings = offerings;
    }

    /// The cheapest available offering.
    pub fn cheapest(&self) -> Option<&Offering> {
        self.offerings.iter().filter(|o| o.available).min_by(|a, b| a.price.total_cmp(&b.price))
    }
}

/// The instance types a region offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    pub types: Vec<InstanceType>,
    pub zones: Vec<Zone>,
}

impl Catalog {
    pub fn get(&self, name: &str) -> Option<&InstanceType> {
        self.types.iter().find(|t| t.name == name)
    }

    pub fn zone_id(&self, zone: &str) -> Option<&str> {
        self.zones.iter().find(|z| z.name == zone).map(|z| z.id.as_str())
    }

    /// What an instance of `instance_type` in `zone` bought as `capacity_type` costs per hour on
    /// a node of `os`: its offering's price; for a reservation (not in the catalog: a class's),
    /// the reserved price of the type's on-demand offering there ([`Reservation::price`]).
    pub fn offering_price(
        &self,
        instance_type: &str,
        zone: &str,
        capacity_type: CapacityType,
        os: crate::model::NodeOs,
    ) -> Option<f64> {
        let t = self.get(instance_type)?;
        let reserved = capacity_type == CapacityType::Reserved;
        let priced_as = if reserved { CapacityType::OnDemand } else { capacity_type };
        let offering = t.offerings.iter().find(|o| o.zone == zone && o.capacity_type == priced_as)?;
        let price = t.price(offering, os);
        Some(if reserved { Reservation::price(price) } else { price })
    }
}

/// One offering CreateFleet may pick, with the price the plan assumed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offer {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
    /// The reservation a `reserved` offer launches into (none for spot and on-demand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<Reservation>,
}

impl Offer {
    pub fn key(&self) -> OfferingKey {
        OfferingKey {
            instance_type: self.instance_type.clone(),
            zone: self.zone.clone(),
            capacity_type: self.capacity_type,
        }
    }
}
