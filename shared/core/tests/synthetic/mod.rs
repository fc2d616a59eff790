//! Synthetic catalogs with fixed figures, for tests whose expected plans are worked out by hand
//! or by an exact solver: types offered on demand (and on spot) in given zones at given prices.

#![allow(dead_code)] // each test binary uses a different part

use dovetail_core::catalog::{CapacityType, Catalog, InstanceResources, InstanceType, Offering, Zone};
use dovetail_core::labels;
use dovetail_core::model::{DaemonSet, OwnerKind, Pod, Toleration, TolerationOp};
use dovetail_core::requirements::{Operator, Requirement, Requirements};
use dovetail_core::resources::Resources;

pub const GIB: i64 = 1 << 30;

pub fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values).expect("well-formed")
}

pub fn reqs(list: Vec<Requirement>) -> Requirements {
    list.into_iter().collect()
}

/// A synthetic type with fixed figures, offered on demand and on spot in the given zones.
pub fn fixed_type(name: &str, cores: i64, mem_gib: i64, od: f64, spot: Option<f64>, zones: &[&str]) -> InstanceType {
    let mut offerings = Vec::new();
    for z in zones {
        offerings.push(Offering {
            zone: z.to_string(),
            capacity_type: CapacityType::OnDemand,
            price: od,
            list_price: None,
            available: true,
        });
        if let Some(s) = spot {
            offerings.push(Offering {
                zone: z.to_string(),
                capacity_type: CapacityType::Spot,
                price: s,
                list_price: None,
                available: true,
            });
        }
    }
    let family = name.split('.').next().unwrap_or(name);
    let mut r = reqs(vec![
        Requirement::single(labels::INSTANCE_TYPE, name),
        Requirement::single(labels::ARCH, "amd64"),
        Requirement::single(labels::OS, "linux"),
        Requirement::single(labels::INSTANCE_FAMILY, family),
        Requirement::single(labels::INSTANCE_CPU, &cores.to_string()),
    ]);
    r.add(req(labels::ZONE, Operator::In, zones));
    let cts: Vec<&str> = if spot.is_some() { vec!["on-demand", "spot"] } else { vec!["on-demand"] };
    r.add(req(labels::CAPACITY_TYPE, Operator::In, &cts));
    let res = Resources { cpu: cores * 1000, memory: mem_gib * GIB, ephemeral: 0, pods: 110, extended: vec![] };
    InstanceType {
        name: name.into(),
        requirements: r,
        offerings,
        resources: InstanceResources::Fixed { capacity: res.clone(), allocatable: res },
    }
}

/// A DaemonSet in kube-system whose pods request `cpu_m` millicores and `mem_mi` MiB and tolerate
/// every taint (as node agents do), with no node affinity of its own.
pub fn daemonset(name: &str, cpu_m: i64, mem_mi: i64) -> DaemonSet {
    let mut p = Pod::new("kube-system", name, Resources::new(cpu_m, mem_mi << 20));
    p.owner = OwnerKind::DaemonSet;
    p.tolerations.push(Toleration {
        key: String::new(),
        operator: TolerationOp::Exists,
        value: String::new(),
        effect: None,
    });
    DaemonSet { namespace: "kube-system".into(), name: name.into(), pod: p }
}

pub fn fixed_catalog(types: Vec<InstanceType>) -> Catalog {
    let zones = ["zone-a", "zone-b", "zone-c"]
        .iter()
        .map(|z| Zone { name: z.to_string(), id: z.replace("zone", "id") })
        .collect();
    Catalog { types, zones }
}
