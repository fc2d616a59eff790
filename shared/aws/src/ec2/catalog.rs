//! The live catalog: which instance types the region has (DescribeInstanceTypes), in which zones
//! (DescribeInstanceTypeOfferings, location type availability-zone), at what price (see
//! [`super::pricing`]), mapped into the core's [`Catalog`].
//!
//! A type the embedded catalog knows keeps its labels and EC2 facts from there (the same figures
//! `dovetail plan` uses); a newer type is described from the API and read through the core's own
//! row parser ([`types_from_tsv`]), so its labels follow the same rules. Offerings come from the
//! API; prices from the price book, falling back to the embedded figures.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::{
    ArchitectureType, EphemeralNvmeSupport, Filter, InstanceTypeInfo, LocationType, UsageClassType,
};
use dovetail_core::catalog::{types_from_tsv, CapacityType, Catalog, InstanceType, Offering, Zone, COLUMNS};

use super::pricing::PriceBook;
use crate::error::{api_error, AwsResult};

/// What DescribeInstanceTypes says about one type, in the embedded catalog's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct DescribedType {
    pub name: String,
    /// `amd64` or `arm64`.
    pub arch: &'static str,
    pub vcpu: i64,
    pub memory_mib: i64,
    /// Lower case: `intel`, `amd`, `aws`.
    pub cpu_manufacturer: String,
    pub hypervisor: String,
    pub network_bandwidth_mbps: Option<i64>,
    pub ebs_bandwidth_mbps: Option<i64>,
    pub encryption_in_transit: bool,
    pub local_nvme_gb: Option<i64>,
    /// Name (lower-kebab-case), manufacturer, count, total memory (MiB).
    pub gpu: Option<(String, String, i64, i64)>,
    /// ENIs of the default network card, and IPv4 addresses per ENI.
    pub max_enis: i64,
    pub ipv4_per_eni: i64,
    pub efa: i64,
    pub neuron: i64,
    pub spot: bool,
    pub on_demand: bool,
}

/// The type described, or `None` for what nodes cannot run on (Mac hosts, 32-bit only, no HVM)
/// or what the answer lacks (vCPUs, memory).
pub fn described(info: &InstanceTypeInfo) -> Option<DescribedType> {
    let name = info.instance_type()?.as_str().to_string();
    if name.starts_with("mac") {
        return None;
    }
    let processor = info.processor_info()?;
    let arch = if processor.supported_architectures().contains(&ArchitectureType::X8664) {
        "amd64"
    } else if processor.supported_architectures().contains(&ArchitectureType::Arm64) {
        "arm64"
    } else {
        return None;
    };
    let network = info.network_info();
    let default_card = network.and_then(|n| {
        let index = n.default_network_card_index().unwrap_or(0);
        n.network_cards().iter().find(|c| c.network_card_index().unwrap_or(0) == index)
    });
    let max_enis = default_card
        .and_then(|c| c.maximum_network_interfaces())
        .or_else(|| network.and_then(|n| n.maximum_network_interfaces()))
        .unwrap_or(0);
    let gpu = info.gpu_info().and_then(|g| {
        let first = g.gpus().first()?;
        let count: i64 = g.gpus().iter().map(|d| i64::from(d.count().unwrap_or(0))).sum();
        let memory = g
            .total_gpu_memory_in_mib()
            .map(i64::from)
            .unwrap_or_else(|| i64::from(first.memory_info().and_then(|m| m.size_in_mib()).unwrap_or(0)) * count);
        Some((
            first.name()?.trim().to_lowercase().replace(' ', "-"),
            first.manufacturer().unwrap_or_default().trim().to_lowercase().replace(' ', "-"),
            count,
            memory,
        ))
    });
    let neuron = info.neuron_info().map(|n| n.neuron_devices().iter().map(|d| i64::from(d.count().unwrap_or(0))).sum());
    let storage = info.instance_storage_info();
    let nvme = storage.filter(|s| {
        matches!(s.nvme_support(), Some(EphemeralNvmeSupport::Required) | Some(EphemeralNvmeSupport::Supported))
    });
    Some(DescribedType {
        name,
        arch,
        vcpu: i64::from(info.v_cpu_info()?.default_v_cpus()?),
        memory_mib: info.memory_info()?.size_in_mib()?,
        cpu_manufacturer: processor.manufacturer().unwrap_or("unknown").trim().to_lowercase(),
        hypervisor: info.hypervisor().map(|h| h.as_str().to_string()).unwrap_or_default(),
        network_bandwidth_mbps: default_card
            .and_then(|c| c.baseline_bandwidth_in_gbps())
            .map(|g| (g * 1000.0).round() as i64),
        ebs_bandwidth_mbps: info
            .ebs_info()
            .and_then(|e| e.ebs_optimized_info())
            .and_then(|o| o.baseline_bandwidth_in_mbps())
            .map(i64::from),
        encryption_in_transit: network.and_then(|n| n.encryption_in_transit_supported()).unwrap_or(false),
        local_nvme_gb: nvme.and_then(|s| s.total_size_in_gb()),
        gpu,
        max_enis: i64::from(max_enis),
        ipv4_per_eni: i64::from(network.and_then(|n| n.ipv4_addresses_per_interface()).unwrap_or(0)),
        efa: i64::from(network.and_then(|n| n.efa_info()).and_then(|e| e.maximum_efa_interfaces()).unwrap_or(0)),
        neuron: neuron.unwrap_or(0),
        spot: info.supported_usage_classes().contains(&UsageClassType::Spot),
        on_demand: info.supported_usage_classes().contains(&UsageClassType::OnDemand),
    })
}

/// `m7i-flex.large` → (`m`, `m7i-flex`, `7`, `large`); `u-6tb1.metal` → (`u`, `u-6tb1`, `1`,
/// `metal`).
pub fn name_parts(name: &str) -> Option<(String, String, String, String)> {
    let (family, size) = name.split_once('.')?;
    let category: String = family.chars().take_while(|c| c.is_ascii_lowercase()).collect();
    let rest = &family[category.len()..];
    let digits = |s: &str| -> String {
        s.chars().skip_while(|c| !c.is_ascii_digit()).take_while(char::is_ascii_digit).collect()
    };
    let generation = if rest.starts_with(|c: char| c.is_ascii_digit()) {
        digits(rest)
    } else {
        // `u-6tb1`: the generation is the last run of digits.
        let last: String = rest.chars().rev().take_while(char::is_ascii_digit).collect();
        last.chars().rev().collect()
    };
    if category.is_empty() || generation.is_empty() || size.is_empty() {
        return None;
    }
    Some((category, family.to_string(), generation, size.to_string()))
}

/// The type as one row of `instance_types.tsv`, for the core's parser (prices left empty: the
/// offerings are set from the price book afterwards).
pub fn tsv_row(t: &DescribedType) -> Option<String> {
    let (category, family, generation, size) = name_parts(&t.name)?;
    let opt = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    let count = |v: i64| if v > 0 { v.to_string() } else { String::new() };
    let (gpu_name, gpu_manufacturer, gpu_count, gpu_memory) = match &t.gpu {
        Some((n, m, c, mem)) => (n.clone(), m.clone(), c.to_string(), mem.to_string()),
        None => Default::default(),
    };
    let (nvidia, amd) = match &t.gpu {
        Some((_, m, c, _)) if m == "nvidia" => (count(*c), String::new()),
        Some((_, m, c, _)) if m == "amd" => (String::new(), count(*c)),
        _ => Default::default(),
    };
    let value = |column: &str| -> String {
        match column {
            "name" => t.name.clone(),
            "category" => category.clone(),
            "family" => family.clone(),
            "generation" => generation.clone(),
            "size" => size.clone(),
            "hypervisor" => t.hypervisor.clone(),
            "arch" => t.arch.to_string(),
            "vcpu" => t.vcpu.to_string(),
            "memory_mib" => t.memory_mib.to_string(),
            "cpu_manufacturer" => t.cpu_manufacturer.clone(),
            "capability_flex" => family.ends_with("-flex").to_string(),
            "network_bandwidth_mbps" => opt(t.network_bandwidth_mbps),
            "ebs_bandwidth_mbps" => opt(t.ebs_bandwidth_mbps),
            "encryption_in_transit" => t.encryption_in_transit.to_string(),
            "local_nvme_gb" => opt(t.local_nvme_gb),
            "gpu_name" => gpu_name.clone(),
            "gpu_manufacturer" => gpu_manufacturer.clone(),
            "gpu_count" => gpu_count.clone(),
            "gpu_memory_mib" => gpu_memory.clone(),
            "max_enis" => t.max_enis.to_string(),
            "ipv4_per_eni" => t.ipv4_per_eni.to_string(),
            "efa" => count(t.efa),
            "nvidia_gpu" => nvidia.clone(),
            "amd_gpu" => amd.clone(),
            "neuron" => count(t.neuron),
            // Pod ENIs (trunking) have no DescribeInstanceTypes field; NeuronCores need the core
            // count per device. Left out for types the embedded data does not know.
            _ => String::new(),
        }
    };
    Some(COLUMNS.iter().map(|c| value(c)).collect::<Vec<_>>().join("\t"))
}

/// The core's instance type for a type the embedded catalog does not know.
fn new_type(t: &DescribedType, zones: &[Zone]) -> Option<InstanceType> {
    let tsv = format!("{}\n{}\n", COLUMNS.join("\t"), tsv_row(t)?);
    types_from_tsv(&tsv, zones).ok()?.pop()
}

/// The catalog from what EC2 described. `offered` maps each type to the zones that offer it;
/// types offered nowhere are left out. Offerings are priced from `prices`, else from the
/// embedded catalog; an offering with no price at all is left out.
pub fn build_catalog(
    types: &[DescribedType],
    offered: &BTreeMap<String, BTreeSet<String>>,
    zones: &[Zone],
    prices: &PriceBook,
    embedded: &Catalog,
) -> Catalog {
    let mut out = Vec::with_capacity(types.len());
    for t in types {
        let Some(in_zones) = offered.get(&t.name) else { continue };
        let known = embedded.get(&t.name);
        let Some(mut it) = known.cloned().or_else(|| new_type(t, zones)) else { continue };
        let on_demand = prices.on_demand(&t.name, known);
        let mut offerings = Vec::new();
        for zone in zones.iter().filter(|z| in_zones.contains(&z.name)) {
            if let (true, Some(price)) = (t.on_demand, on_demand) {
                offerings.push(Offering {
                    zone: zone.name.clone(),
                    capacity_type: CapacityType::OnDemand,
                    price,
                    list_price: None,
                    available: true,
                });
            }
            if let (true, Some(price)) = (t.spot, prices.spot(&t.name, &zone.name, known)) {
                offerings.push(Offering {
                    zone: zone.name.clone(),
                    capacity_type: CapacityType::Spot,
                    price,
                    list_price: None,
                    available: true,
                });
            }
        }
        if offerings.is_empty() {
            continue;
        }
        it.set_offerings(offerings, zones);
        out.push(it);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Catalog { types: out, zones: zones.to_vec() }
}

/// Available zones of the region, in name order.
pub async fn zones(ec2: &aws_sdk_ec2::Client) -> AwsResult<Vec<Zone>> {
    let out = ec2
        .describe_availability_zones()
        .filters(Filter::builder().name("zone-type").values("availability-zone").build())
        .send()
        .await
        .map_err(|e| api_error("DescribeAvailabilityZones", e))?;
    let mut zones: Vec<Zone> = out
        .availability_zones()
        .iter()
        .filter_map(|z| Some(Zone { name: z.zone_name()?.to_string(), id: z.zone_id()?.to_string() }))
        .collect();
    zones.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(zones)
}

/// Every instance type of the region, described.
pub async fn describe_types(ec2: &aws_sdk_ec2::Client) -> AwsResult<Vec<DescribedType>> {
    let infos = ec2
        .describe_instance_types()
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| api_error("DescribeInstanceTypes", e))?;
    Ok(infos.iter().filter_map(described).collect())
}

/// Type → zones offering it.
pub async fn offerings(ec2: &aws_sdk_ec2::Client) -> AwsResult<BTreeMap<String, BTreeSet<String>>> {
    let items = ec2
        .describe_instance_type_offerings()
        .location_type(LocationType::AvailabilityZone)
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| api_error("DescribeInstanceTypeOfferings", e))?;
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for o in &items {
        if let (Some(t), Some(zone)) = (o.instance_type(), o.location()) {
            out.entry(t.as_str().to_string()).or_default().insert(zone.to_string());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::{
        GpuDeviceInfo, GpuInfo, InstanceType as SdkType, MemoryInfo, NetworkCardInfo, NetworkInfo, ProcessorInfo,
        VCpuInfo,
    };
    use dovetail_core::catalog::embedded;
    use dovetail_core::labels;
    use dovetail_core::model::KubeletConfig;

    fn zones() -> Vec<Zone> {
        vec![
            Zone { name: "us-east-1a".into(), id: "use1-az6".into() },
            Zone { name: "us-east-1b".into(), id: "use1-az1".into() },
        ]
    }

    /// A GPU type unknown to the embedded data.
    fn future_gpu() -> InstanceTypeInfo {
        InstanceTypeInfo::builder()
            .instance_type(SdkType::from("g99x.2xlarge"))
            .supported_usage_classes(UsageClassType::OnDemand)
            .supported_usage_classes(UsageClassType::Spot)
            .processor_info(
                ProcessorInfo::builder().supported_architectures(ArchitectureType::X8664).manufacturer("AMD").build(),
            )
            .v_cpu_info(VCpuInfo::builder().default_v_cpus(8).build())
            .memory_info(MemoryInfo::builder().size_in_mib(32768).build())
            .network_info(
                NetworkInfo::builder()
                    .maximum_network_interfaces(8)
                    .default_network_card_index(0)
                    .network_cards(
                        NetworkCardInfo::builder()
                            .network_card_index(0)
                            .maximum_network_interfaces(4)
                            .baseline_bandwidth_in_gbps(2.5)
                            .build(),
                    )
                    .ipv4_addresses_per_interface(15)
                    .encryption_in_transit_supported(true)
                    .build(),
            )
            .gpu_info(
                GpuInfo::builder()
                    .gpus(GpuDeviceInfo::builder().name("L40S").manufacturer("NVIDIA").count(1).build())
                    .total_gpu_memory_in_mib(45776)
                    .build(),
            )
            .build()
    }

    #[test]
    fn names_split_into_category_family_generation_size() {
        let parts = |n: &str| name_parts(n).unwrap();
        assert_eq!(parts("m5.large"), ("m".into(), "m5".into(), "5".into(), "large".into()));
        assert_eq!(parts("m7i-flex.2xlarge"), ("m".into(), "m7i-flex".into(), "7".into(), "2xlarge".into()));
        assert_eq!(parts("trn1n.32xlarge").2, "1");
        assert_eq!(parts("u-6tb1.112xlarge"), ("u".into(), "u-6tb1".into(), "1".into(), "112xlarge".into()));
        assert_eq!(name_parts("weird"), None);
    }

    #[test]
    fn described_types_take_the_default_network_card() {
        let d = described(&future_gpu()).unwrap();
        assert_eq!(d.arch, "amd64");
        assert_eq!(d.max_enis, 4);
        assert_eq!(d.network_bandwidth_mbps, Some(2500));
        assert_eq!(d.gpu, Some(("l40s".into(), "nvidia".into(), 1, 45776)));
        let mac = InstanceTypeInfo::builder().instance_type(SdkType::from("mac2.metal")).build();
        assert_eq!(described(&mac), None);
    }

    #[test]
    fn new_types_get_the_embedded_label_rules_and_live_offerings() {
        let d = described(&future_gpu()).unwrap();
        let offered = BTreeMap::from([("g99x.2xlarge".to_string(), BTreeSet::from(["us-east-1b".to_string()]))]);
        let mut prices = PriceBook::default();
        prices.on_demand.insert("g99x.2xlarge".into(), 1.5);
        let catalog = build_catalog(&[d], &offered, &zones(), &prices, embedded());
        let t = catalog.get("g99x.2xlarge").unwrap();
        let label = |k: &str| t.requirements.get(k).and_then(|r| r.single_value()).map(str::to_string);
        assert_eq!(label(labels::INSTANCE_FAMILY).as_deref(), Some("g99x"));
        assert_eq!(label(labels::INSTANCE_GPU_NAME).as_deref(), Some("l40s"));
        assert_eq!(label(labels::ZONE).as_deref(), Some("us-east-1b"));
        assert_eq!(label(labels::ZONE_ID).as_deref(), Some("use1-az1"));
        // No spot price anywhere: on-demand only.
        assert_eq!(t.offerings.len(), 1);
        assert_eq!(t.offerings[0].capacity_type, CapacityType::OnDemand);
        assert_eq!(t.allocatable(&KubeletConfig::default()).get(dovetail_core::resources::NVIDIA_GPU), 1);
    }

    #[test]
    fn known_types_keep_embedded_facts_and_fall_back_to_embedded_prices() {
        let m5 = described(
            &InstanceTypeInfo::builder()
                .instance_type(SdkType::M5Large)
                .supported_usage_classes(UsageClassType::OnDemand)
                .supported_usage_classes(UsageClassType::Spot)
                .processor_info(ProcessorInfo::builder().supported_architectures(ArchitectureType::X8664).build())
                .v_cpu_info(VCpuInfo::builder().default_v_cpus(2).build())
                .memory_info(MemoryInfo::builder().size_in_mib(8192).build())
                .build(),
        )
        .unwrap();
        let offered = BTreeMap::from([("m5.large".to_string(), zones().iter().map(|z| z.name.clone()).collect())]);
        let mut prices = PriceBook::default();
        prices.spot.insert(("m5.large".into(), "us-east-1a".into()), 0.04);
        let catalog = build_catalog(&[m5], &offered, &zones(), &prices, embedded());
        let t = catalog.get("m5.large").unwrap();
        assert_eq!(t.resources, embedded().get("m5.large").unwrap().resources);
        let price =
            |zone: &str, ct| t.offerings.iter().find(|o| o.zone == zone && o.capacity_type == ct).unwrap().price;
        let embedded_od = embedded().get("m5.large").unwrap().offerings[0].price;
        assert_eq!(price("us-east-1a", CapacityType::OnDemand), embedded_od);
        assert_eq!(price("us-east-1a", CapacityType::Spot), 0.04);
        // No live spot price in 1b: the embedded spot price.
        let embedded_spot = embedded()
            .get("m5.large")
            .unwrap()
            .offerings
            .iter()
            .find(|o| o.capacity_type == CapacityType::Spot)
            .unwrap()
            .price;
        assert_eq!(price("us-east-1b", CapacityType::Spot), embedded_spot);
        assert_eq!(catalog.zones, zones());
    }
}
