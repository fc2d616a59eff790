//! The AL2023 overhead model against Karpenter's published allocatable for every type in the
//! shared reference data, with default kubelet settings.

mod common;

use common::Csv;
use dovetail_core::catalog::embedded;
use dovetail_core::model::KubeletConfig;
use dovetail_core::resources::{format_bytes, parse_cpu_millis, parse_units};

#[test]
fn allocatable_matches_karpenter_for_every_type() {
    let csv = Csv::load();
    let catalog = embedded();
    let kubelet = KubeletConfig::default();
    let mut problems = Vec::new();
    let mut worst_memory = (0.0f64, String::new());
    let mut checked = 0;
    for row in &csv.rows {
        let name = csv.get(row, "instance_type");
        let t = catalog.get(name).unwrap_or_else(|| panic!("{name} is not in the embedded catalog"));
        let got = t.allocatable(&kubelet);
        let cpu = parse_cpu_millis(csv.get(row, "karpenter_alloc_cpu")).unwrap();
        let memory = parse_units(csv.get(row, "karpenter_alloc_memory")).unwrap();
        let ephemeral = parse_units(csv.get(row, "karpenter_alloc_ephemeral")).unwrap();
        let pods: i64 = csv.get(row, "karpenter_max_pods").parse().unwrap();

        let rel = (got.memory - memory).abs() as f64 / memory as f64;
        if rel > worst_memory.0 || worst_memory.1.is_empty() {
            worst_memory = (rel, name.to_string());
        }
        // Exact everywhere: the model reproduces Karpenter's rounding, and being even a MiB more
        // generous than the kubelet would place pods on nodes that then reject them.
        if got.cpu != cpu {
            problems.push(format!("{name}: cpu {}m, Karpenter {cpu}m", got.cpu));
        }
        if got.pods != pods {
            problems.push(format!("{name}: pods {}, Karpenter {pods}", got.pods));
        }
        if got.memory != memory {
            problems.push(format!(
                "{name}: memory {}, Karpenter {} ({:+.3}%)",
                format_bytes(got.memory),
                format_bytes(memory),
                (got.memory - memory) as f64 * 100.0 / memory as f64
            ));
        }
        if got.ephemeral != ephemeral {
            problems.push(format!(
                "{name}: ephemeral {}, Karpenter {}",
                format_bytes(got.ephemeral),
                format_bytes(ephemeral)
            ));
        }
        if t.capacity(&kubelet).pods != got.pods {
            problems.push(format!("{name}: pods are not a reserved resource"));
        }
        checked += 1;
    }
    eprintln!("checked {checked} types; worst memory error {:.4}% ({})", worst_memory.0 * 100.0, worst_memory.1);
    assert_eq!(checked, 1363, "the reference data changed size");
    assert!(problems.is_empty(), "{} mismatches:\n{}", problems.len(), problems[..problems.len().min(40)].join("\n"));
}

#[test]
fn kubelet_overrides_apply_to_catalog_types() {
    let t = embedded().get("m5.large").unwrap();
    let base = t.allocatable(&KubeletConfig::default());
    let k = KubeletConfig { max_pods: Some(110), pods_per_core: Some(10), ..Default::default() };
    let a = t.allocatable(&k);
    assert_eq!(a.pods, 20, "podsPerCore 10 × 2 vCPU caps maxPods 110");
    assert_eq!((a.cpu, a.memory, a.ephemeral), (base.cpu, base.memory, base.ephemeral));
}
