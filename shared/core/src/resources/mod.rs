//! Resource vectors (requests, capacity, allocatable) and Kubernetes quantity parsing.
//!
//! The four resources every pod and node has are plain fields so the scheduler's hot loop is a
//! handful of integer comparisons; extended resources (`nvidia.com/gpu`, `vpc.amazonaws.com/pod-eni`,
//! …) sit in a small sorted list that is empty for most pods.

mod quantity;

pub use quantity::{format_bytes, format_cpu, parse_cpu_millis, parse_milli, parse_units, QuantityError};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";
pub const NVIDIA_GPU: &str = "nvidia.com/gpu";
pub const AMD_GPU: &str = "amd.com/gpu";
pub const NEURON: &str = "aws.amazon.com/neuron";
pub const NEURON_CORE: &str = "aws.amazon.com/neuroncore";
pub const EFA: &str = "vpc.amazonaws.com/efa";
pub const POD_ENI: &str = "vpc.amazonaws.com/pod-eni";
/// Secondary IPv4 addresses the VPC resource controller hands to Windows pods.
pub const PRIVATE_IPV4_ADDRESS: &str = "vpc.amazonaws.com/PrivateIPv4Address";

/// An amount of every resource: cpu in millicores, memory and ephemeral storage in bytes,
/// pods and extended resources in units.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Resources {
    pub cpu: i64,
    pub memory: i64,
    pub ephemeral: i64,
    pub pods: i64,
    /// Extended resources, sorted by name, no zero entries.
    pub extended: Vec<(String, i64)>,
}

impl Resources {
    pub fn new(cpu: i64, memory: i64) -> Self {
        Resources { cpu, memory, ..Default::default() }
    }

    /// Builds a vector from `name → quantity` pairs as they appear in a manifest.
    pub fn from_quantities<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, (String, QuantityError)> {
        let mut out = Resources::default();
        for (name, q) in pairs {
            let value = if name == CPU { parse_cpu_millis(q) } else { parse_units(q) };
            out.set(name, value.map_err(|e| (name.to_string(), e))?);
        }
        Ok(out)
    }

    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral,
            PODS => self.pods,
            _ => self.extended.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v),
        }
    }

    pub fn set(&mut self, name: &str, value: i64) {
        match name {
            CPU => self.cpu = value,
            MEMORY => self.memory = value,
            EPHEMERAL_STORAGE => self.ephemeral = value,
            PODS => self.pods = value,
            _ => match self.extended.binary_search_by(|(n, _)| n.as_str().cmp(name)) {
                Ok(i) if value == 0 => {
                    self.extended.remove(i);
                }
                Ok(i) => self.extended[i].1 = value,
                Err(_) if value == 0 => {}
                Err(i) => self.extended.insert(i, (name.to_string(), value)),
            },
        }
    }

    pub fn add(&mut self, other: &Resources) {
        self.cpu += other.cpu;
        self.memory += other.memory;
        self.ephemeral += other.ephemeral;
        self.pods += other.pods;
        for (n, v) in &other.extended {
            let cur = self.get(n);
            self.set(n, cur + v);
        }
    }

    pub fn sub(&mut self, other: &Resources) {
        self.cpu -= other.cpu;
        self.memory -= other.memory;
        self.ephemeral -= other.ephemeral;
        self.pods -= other.pods;
        for (n, v) in &other.extended {
            let cur = self.get(n);
            self.set(n, cur - v);
        }
    }

    pub fn plus(&self, other: &Resources) -> Resources {
        let mut r = self.clone();
        r.add(other);
        r
    }

    pub fn minus(&self, other: &Resources) -> Resources {
        let mut r = self.clone();
        r.sub(other);
        r
    }

    /// Element-wise maximum: the init-container rule (a pod needs the larger of the sum of its
    /// containers and its largest init container, per resource).
    pub fn max(&self, other: &Resources) -> Resources {
        let mut r = Resources {
            cpu: self.cpu.max(other.cpu),
            memory: self.memory.max(other.memory),
            ephemeral: self.ephemeral.max(other.ephemeral),
            pods: self.pods.max(other.pods),
            extended: self.extended.clone(),
        };
        for (n, v) in &other.extended {
            let cur = r.get(n);
            r.set(n, cur.max(*v));
        }
        r
    }

    /// The first resource in which `self` exceeds `available`, or `None` when it fits.
    #[inline]
    pub fn exceeds<'a>(&'a self, available: &Resources) -> Option<&'a str> {
        if self.cpu > available.cpu {
            return Some(CPU);
        }
        if self.memory > available.memory {
            return Some(MEMORY);
        }
        if self.pods > available.pods {
            return Some(PODS);
        }
        if self.ephemeral > available.ephemeral && self.ephemeral > 0 {
            return Some(EPHEMERAL_STORAGE);
        }
        self.extended.iter().find(|(n, v)| *v > available.get(n)).map(|(n, _)| n.as_str())
    }

    #[inline]
    pub fn fits(&self, available: &Resources) -> bool {
        self.exceeds(available).is_none()
    }

    /// Whether every resource is zero (a pod with no requests still takes a pod slot).
    pub fn is_zero(&self) -> bool {
        self.cpu == 0 && self.memory == 0 && self.ephemeral == 0 && self.pods == 0 && self.extended.is_empty()
    }

    /// `name → quantity string`, the shape Kubernetes prints (`{"cpu":"3920m","memory":"14Gi",…}`).
    pub fn to_quantities(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        m.insert(CPU.to_string(), format_cpu(self.cpu));
        m.insert(MEMORY.to_string(), format_bytes(self.memory));
        if self.ephemeral != 0 {
            m.insert(EPHEMERAL_STORAGE.to_string(), format_bytes(self.ephemeral));
        }
        m.insert(PODS.to_string(), self.pods.to_string());
        for (n, v) in &self.extended {
            m.insert(n.clone(), v.to_string());
        }
        m
    }

    /// Names of every resource with a non-zero amount.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        [(CPU, self.cpu), (MEMORY, self.memory), (EPHEMERAL_STORAGE, self.ephemeral), (PODS, self.pods)]
            .into_iter()
            .filter(|(_, v)| *v != 0)
            .map(|(n, _)| n)
            .chain(self.extended.iter().map(|(n, _)| n.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_and_fit() {
        let mut a = Resources::from_quantities([("cpu", "500m"), ("memory", "1Gi"), ("nvidia.com/gpu", "1")]).unwrap();
        let cap = Resources::from_quantities([("cpu", "2"), ("memory", "4Gi"), ("pods", "10")]).unwrap();
        assert_eq!(a.exceeds(&cap), Some("nvidia.com/gpu"));
        a.set("nvidia.com/gpu", 0);
        assert!(a.extended.is_empty());
        assert!(a.fits(&cap));
        let sum = a.plus(&a).plus(&a).plus(&a).plus(&a);
        assert_eq!(sum.exceeds(&cap), Some("cpu"));
        assert_eq!(sum.minus(&a).minus(&a), a.plus(&a).plus(&a));
        let m = Resources::new(100, 5).max(&Resources::new(50, 10));
        assert_eq!((m.cpu, m.memory), (100, 10));
    }

    #[test]
    fn bad_quantity_names_the_resource() {
        let (name, e) = Resources::from_quantities([("cpu", "1"), ("memory", "lots")]).unwrap_err();
        assert_eq!(name, "memory");
        assert!(e.to_string().contains("lots"));
    }
}
