//! The embedded catalog against its source: the committed TSV must be what generate.py makes from
//! the shared CSV, and every type must carry the labels, offerings and resources the CSV gives it.

mod common;

use std::process::Command;
use std::time::Instant;

use common::Csv;
use dovetail_core::catalog::{embedded, embedded_with_zones, CapacityType, InstanceResources, Zone, DEFAULT_ZONES};
use dovetail_core::labels;
use dovetail_core::requirements::Operator;
use dovetail_core::resources::{AMD_GPU, EFA, NEURON, NEURON_CORE, NVIDIA_GPU, POD_ENI};

#[test]
fn committed_tsv_is_what_the_generator_makes() {
    let script = common::workspace_root().join("shared/core/src/catalog/generate.py");
    let out = match Command::new("python3").arg(&script).arg("--check").output() {
        Ok(out) => out,
        Err(e) => panic!("cannot run python3 ({e}): it is needed to check {} against the shared CSV", script.display()),
    };
    assert!(
        out.status.success(),
        "`python3 {} --check` failed ({}):\n{}{}",
        script.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A type's value for a label; `None` when the type records the label as absent (DoesNotExist).
fn label<'a>(t: &'a dovetail_core::catalog::InstanceType, key: &str) -> Option<&'a str> {
    t.requirements
        .get(key)
        .filter(|r| !r.is_empty())
        .map(|r| r.single_value().unwrap_or_else(|| panic!("{}: {key} is neither single-valued nor absent", t.name)))
}

#[test]
fn every_csv_row_becomes_a_type_with_its_labels_offerings_and_resources() {
    let csv = Csv::load();
    let catalog = embedded();
    assert_eq!(catalog.types.len(), csv.rows.len());
    assert_eq!(csv.rows.len(), 1363, "the reference data changed size: review generate.py's checks");
    let zones: Vec<&str> = DEFAULT_ZONES.iter().map(|(z, _)| *z).collect();
    let mut problems = Vec::new();
    for row in &csv.rows {
        let name = csv.get(row, "instance_type");
        let Some(t) = catalog.get(name) else {
            problems.push(format!("{name}: missing from the catalog"));
            continue;
        };
        let mut expect = |key: &str, want: Option<&str>| {
            let got = t.requirements.get(key).and_then(|r| r.single_value());
            if got != want {
                problems.push(format!("{name}: {key} = {got:?}, want {want:?}"));
            }
        };
        let present = |col: &str| Some(csv.get(row, col)).filter(|v| !v.is_empty());
        expect(labels::INSTANCE_TYPE, Some(name));
        expect(labels::ARCH, present("arch"));
        expect(labels::OS, Some("linux"));
        expect(labels::INSTANCE_CATEGORY, present("category"));
        expect(labels::INSTANCE_FAMILY, present("family"));
        expect(labels::INSTANCE_GENERATION, present("generation"));
        expect(labels::INSTANCE_SIZE, present("size"));
        expect(labels::INSTANCE_CPU, present("vcpu"));
        expect(labels::INSTANCE_CPU_MANUFACTURER, present("cpu_manufacturer"));
        expect(labels::INSTANCE_MEMORY, present("memory_mib"));
        expect(labels::INSTANCE_NETWORK_BANDWIDTH, present("network_bandwidth_mbps"));
        expect(labels::INSTANCE_EBS_BANDWIDTH, present("ebs_bandwidth_mbps"));
        expect(labels::INSTANCE_HYPERVISOR, present("hypervisor"));
        expect(labels::INSTANCE_ENCRYPTION_IN_TRANSIT, present("encryption_in_transit"));
        expect(labels::INSTANCE_LOCAL_NVME, present("local_nvme_gb"));
        expect(labels::INSTANCE_CAPABILITY_FLEX, present("capability_flex"));
        expect(labels::INSTANCE_GPU_NAME, present("gpu_name"));
        expect(labels::INSTANCE_GPU_MANUFACTURER, present("gpu_manufacturer"));
        expect(labels::INSTANCE_GPU_COUNT, present("gpu_count"));
        expect(labels::INSTANCE_GPU_MEMORY, present("gpu_memory_mib"));

        let od: Option<f64> = present("od_price_usd_per_h").map(|p| p.parse().unwrap());
        let savings: Option<f64> = present("spot_savings_pct").map(|p| p.parse().unwrap());
        let want_offerings = match (od, savings) {
            (None, _) => 0,
            (Some(_), None) => zones.len(),
            (Some(_), Some(_)) => 2 * zones.len(),
        };
        if t.offerings.len() != want_offerings {
            problems.push(format!("{name}: {} offerings, want {want_offerings}", t.offerings.len()));
        }
        for o in &t.offerings {
            let want = match o.capacity_type {
                CapacityType::OnDemand => od.unwrap(),
                CapacityType::Spot => od.unwrap() * (1.0 - savings.unwrap() / 100.0),
                // The catalog has none: reservations are a class's, not the region's.
                CapacityType::Reserved => f64::NAN,
            };
            if (o.price - want).abs() > 1e-9 || !o.available || !zones.contains(&o.zone.as_str()) {
                problems.push(format!("{name}: offering {o:?}, want price {want}"));
            }
        }

        let InstanceResources::Ec2(facts) = &t.resources else { panic!("{name}: not an EC2 type") };
        let mut want_extended: Vec<(String, i64)> = [
            ("res_pod_eni", POD_ENI),
            ("res_efa", EFA),
            ("res_nvidia_gpu", NVIDIA_GPU),
            ("res_amd_gpu", AMD_GPU),
            ("res_neuron", NEURON),
            ("res_neuroncore", NEURON_CORE),
        ]
        .iter()
        .filter_map(|(col, res)| present(col).map(|v| (res.to_string(), v.parse::<i64>().unwrap())))
        .filter(|(_, v)| *v > 0)
        .collect();
        want_extended.sort();
        let mut got_extended = facts.extended.clone();
        got_extended.sort();
        if got_extended != want_extended {
            problems.push(format!("{name}: extended {got_extended:?}, want {want_extended:?}"));
        }
        if facts.vcpu.to_string() != csv.get(row, "vcpu") || facts.memory_mib.to_string() != csv.get(row, "memory_mib")
        {
            problems.push(format!("{name}: facts {facts:?} disagree with vcpu/memory"));
        }
        if facts.arm64 != (csv.get(row, "arch") == "arm64") {
            problems.push(format!("{name}: arm64 = {}", facts.arm64));
        }
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems[..problems.len().min(30)].join("\n"));
}

#[test]
fn offerings_are_reflected_in_zone_and_capacity_type_requirements() {
    let catalog = embedded();
    assert_eq!(catalog.zone_id("us-east-1c"), Some("use1-az4"));
    let t = catalog.get("m5.large").unwrap();
    let zone = t.requirements.get(labels::ZONE).unwrap();
    assert_eq!(zone.operator(), Operator::In);
    assert_eq!(zone.values.iter().map(String::as_str).collect::<Vec<_>>(), ["us-east-1a", "us-east-1b", "us-east-1c"]);
    let ids = t.requirements.get(labels::ZONE_ID).unwrap();
    assert_eq!(ids.values.iter().map(String::as_str).collect::<Vec<_>>(), ["use1-az1", "use1-az2", "use1-az4"]);
    let ct = t.requirements.get(labels::CAPACITY_TYPE).unwrap();
    assert!(ct.has("spot") && ct.has("on-demand"));
    assert!(t.cheapest().unwrap().capacity_type == CapacityType::Spot);

    // No Spot Advisor data: on-demand only.
    let od_only = catalog.types.iter().find(|t| t.offerings.iter().all(|o| o.capacity_type == CapacityType::OnDemand));
    let od_only = od_only.expect("some type has no spot data");
    let ct = od_only.requirements.get(labels::CAPACITY_TYPE).unwrap();
    assert!(ct.has("on-demand") && !ct.has("spot"), "{}: {ct}", od_only.name);

    // No on-demand price: kept for its facts, but nothing can launch it.
    let unpriced: Vec<&str> =
        catalog.types.iter().filter(|t| t.offerings.is_empty()).map(|t| t.name.as_str()).collect();
    assert_eq!(unpriced.len(), 18, "{unpriced:?}");
    let hpc = catalog.get("hpc7a.96xlarge").unwrap();
    assert!(hpc.requirements.get(labels::ZONE).unwrap().is_empty());
    assert!(hpc.cheapest().is_none());
}

#[test]
fn karpenter_label_formats() {
    let catalog = embedded();
    let g5 = catalog.get("g5.xlarge").unwrap();
    assert_eq!(label(g5, labels::INSTANCE_GPU_NAME), Some("a10g"));
    assert_eq!(label(g5, labels::INSTANCE_GPU_MANUFACTURER), Some("nvidia"));
    assert_eq!(label(g5, labels::INSTANCE_GPU_COUNT), Some("1"));
    assert_eq!(label(g5, labels::INSTANCE_GPU_MEMORY), Some("22888"));
    assert_eq!(label(catalog.get("g4dn.xlarge").unwrap(), labels::INSTANCE_GPU_NAME), Some("t4"));

    let m7g = catalog.get("m7g.large").unwrap();
    assert_eq!(label(m7g, labels::ARCH), Some("arm64"));
    assert_eq!(label(m7g, labels::INSTANCE_CPU_MANUFACTURER), Some("aws"));
    assert_eq!(label(m7g, labels::INSTANCE_MEMORY), Some("8192"));
    assert_eq!(label(m7g, labels::INSTANCE_GENERATION), Some("7"));
    assert_eq!(label(m7g, labels::INSTANCE_HYPERVISOR), Some("nitro"));
    assert_eq!(label(m7g, labels::INSTANCE_GPU_NAME), None);
    assert_eq!(label(m7g, labels::INSTANCE_LOCAL_NVME), None);
    assert_eq!(label(m7g, labels::INSTANCE_ENCRYPTION_IN_TRANSIT), Some("true"));
    assert_eq!(label(m7g, labels::INSTANCE_CAPABILITY_FLEX), Some("false"));

    assert_eq!(label(catalog.get("m7gd.large").unwrap(), labels::INSTANCE_LOCAL_NVME), Some("118"));
    assert_eq!(label(catalog.get("m7g.metal").unwrap(), labels::INSTANCE_HYPERVISOR), None);
    assert_eq!(label(catalog.get("m7i-flex.large").unwrap(), labels::INSTANCE_CAPABILITY_FLEX), Some("true"));
}

#[test]
fn multi_card_types_count_only_default_card_enis() {
    let catalog = embedded();
    let facts = |name: &str| match &catalog.get(name).unwrap().resources {
        InstanceResources::Ec2(f) => f.clone(),
        other => panic!("{name}: {other:?}"),
    };
    // 64 ENIs over 32 network cards; the VPC CNI only uses the 2 on the default card.
    assert_eq!((facts("p5.48xlarge").max_enis, facts("p5.48xlarge").ipv4_per_eni), (2, 50));
    assert_eq!(facts("c6in.32xlarge").max_enis, 8);
    // No ENI data in the CSV: filled from DescribeInstanceTypes by generate.py.
    assert_eq!((facts("hpc6id.32xlarge").max_enis, facts("hpc6id.32xlarge").ipv4_per_eni), (1, 50));
}

#[test]
fn custom_zones_and_caching() {
    assert!(std::ptr::eq(embedded(), embedded()), "embedded() builds once");
    let zones = [
        Zone { name: "us-west-2a".into(), id: "usw2-az1".into() },
        Zone { name: "us-west-2b".into(), id: "usw2-az2".into() },
    ];
    let started = Instant::now();
    let c = embedded_with_zones(&zones);
    eprintln!("embedded_with_zones: {} types in {:?}", c.types.len(), started.elapsed());
    assert_eq!(c.zones, zones);
    let t = c.get("c7g.large").unwrap();
    assert_eq!(t.offerings.len(), 4);
    assert!(t.offerings.iter().all(|o| o.zone.starts_with("us-west-2")));
    assert!(t.requirements.get(labels::ZONE_ID).unwrap().has("usw2-az2"));
    assert!(embedded_with_zones(&[]).types.iter().all(|t| t.offerings.is_empty()));
}
