//! An instance type as a class of a given OS launches it: its labels and its price.
//!
//! The catalog describes each type as Linux nodes run it (`kubernetes.io/os=linux`, no Windows
//! build, Linux prices), because one catalog serves every class. A Windows class sees the same
//! types through these functions, which every place that labels, matches or prices a node of a
//! class goes through.

use std::borrow::Cow;

use super::{InstanceResources, InstanceType, Offering};
use crate::labels;
use crate::model::NodeOs;
use crate::requirements::Requirement;
use crate::requirements::Requirements;

/// USD per vCPU-hour that AWS adds to the Linux price of an instance for the Windows Server
/// licence it includes (license-included pricing, us-east-1). AWS prices burstable (T) types'
/// licence differently, so for them this is an estimate. A NodeOverlay cannot correct it for
/// Windows alone: overlays change the catalog's (Linux) price, which the licence is added to, and
/// the catalog's types are labelled as Linux nodes run them.
pub const WINDOWS_LICENSE_PER_VCPU_HOUR: f64 = 0.046;

impl InstanceType {
    /// vCPUs of the type, as EC2 counts them (and as the Windows licence is charged).
    pub fn vcpus(&self) -> i64 {
        match &self.resources {
            InstanceResources::Ec2(f) => f.vcpu,
            InstanceResources::Fixed { capacity, .. } => capacity.cpu / 1000,
        }
    }

    /// The type's requirements on a node of `os`: the catalog's as they are for Linux; for Windows
    /// `kubernetes.io/os In [windows]` and the release's `node.kubernetes.io/windows-build`. `None`
    /// when the OS does not run on the type (Windows images are amd64 only, as Karpenter gives
    /// arm64 types no OS under a Windows family).
    pub fn requirements_for(&self, os: NodeOs) -> Option<Cow<'_, Requirements>> {
        let Some(build) = os.windows_build() else { return Some(Cow::Borrowed(&self.requirements)) };
        if !self.requirements.get(labels::ARCH).is_some_and(|r| r.has("amd64")) {
            return None;
        }
        let mut r = self.requirements.clone();
        r.remove(labels::OS);
        r.remove(labels::WINDOWS_BUILD);
        r.add(Requirement::single(labels::OS, os.label()));
        r.add(Requirement::single(labels::WINDOWS_BUILD, build));
        Some(Cow::Owned(r))
    }

    /// What an offering of this type costs per hour on a node of `os`: the catalog's (Linux) price,
    /// plus on Windows the licence for each vCPU, on spot as on demand (AWS charges the licence on
    /// top of either). Every price of a class's node or offering is read through this.
    pub fn price(&self, offering: &Offering, os: NodeOs) -> f64 {
        if os.is_windows() {
            offering.price + self.vcpus() as f64 * WINDOWS_LICENSE_PER_VCPU_HOUR
        } else {
            offering.price
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{embedded, CapacityType};

    fn on_demand(t: &InstanceType) -> &Offering {
        t.offerings.iter().find(|o| o.capacity_type == CapacityType::OnDemand).unwrap()
    }

    #[test]
    fn windows_adds_the_licence_per_vcpu() {
        let catalog = embedded();
        for (name, linux, windows) in [("m5.large", 0.096, 0.188), ("c5.xlarge", 0.17, 0.354)] {
            let t = catalog.get(name).unwrap();
            let o = on_demand(t);
            assert!((t.price(o, NodeOs::Linux) - linux).abs() < 1e-9, "{name}");
            assert!((t.price(o, NodeOs::Windows2022) - windows).abs() < 1e-9, "{name}");
        }
        let t = catalog.get("m5.large").unwrap();
        let spot = t.offerings.iter().find(|o| o.capacity_type == CapacityType::Spot).unwrap();
        assert!((t.price(spot, NodeOs::Windows2019) - (spot.price + 0.092)).abs() < 1e-9);
    }

    #[test]
    fn windows_requirements_replace_os_and_build_and_skip_arm64() {
        let catalog = embedded();
        let m5 = catalog.get("m5.large").unwrap();
        let linux = m5.requirements_for(NodeOs::Linux).unwrap();
        assert_eq!(linux.get(labels::OS).unwrap().single_value(), Some("linux"));
        assert!(linux.get(labels::WINDOWS_BUILD).unwrap().is_empty(), "Linux types have no Windows build");
        let windows = m5.requirements_for(NodeOs::Windows2022).unwrap();
        let labels = windows.single_valued_labels();
        assert_eq!(labels[labels::OS], "windows");
        assert_eq!(labels[labels::WINDOWS_BUILD], "10.0.20348");
        assert_eq!(labels[labels::INSTANCE_TYPE], "m5.large");
        let build = |os| m5.requirements_for(os).unwrap().single_valued_labels()[labels::WINDOWS_BUILD].clone();
        assert_eq!(build(NodeOs::Windows2019), "10.0.17763");
        assert_eq!(build(NodeOs::Windows2025), "10.0.26100");
        let graviton = catalog.get("m6g.large").unwrap();
        assert!(graviton.requirements_for(NodeOs::Windows2022).is_none());
        assert!(graviton.requirements_for(NodeOs::Linux).is_some());
    }
}
