//! Karpenter v1 manifests must become valid Dovetail objects by changing only their apiVersion.
//!
//! Each fixture under `tests/fixtures/` is a realistic `karpenter.sh/v1` NodePool or
//! `karpenter.k8s.aws/v1` EC2NodeClass (several documents per file are allowed). The tests
//! rewrite the apiVersion to `dovetail.dev/v1` and nothing else, then parse, check key fields and
//! defaults, and validate. The negative tests break one field at a time and check that the error
//! names the object and the field.

use std::path::Path;
use std::time::Duration;

use dovetail_api::crd::{
    AmiFamily, BudgetNodes, ConsolidationPolicy, DisruptionReason, EC2NodeClass, EndpointState, FieldError, HttpTokens,
    InstanceStorePolicy, NodePool, Operator, TaintEffect, VolumeType,
};
use serde::Deserialize;

/// The converted documents of a fixture file, keyed by kind.
#[derive(Default)]
struct Converted {
    node_pools: Vec<NodePool>,
    node_classes: Vec<EC2NodeClass>,
}

/// Changes a Karpenter apiVersion to Dovetail's; everything else in the document is untouched.
fn convert_api_version(doc: &mut serde_yaml_ng::Value) {
    let api_version = doc["apiVersion"].as_str().expect("apiVersion").to_owned();
    assert!(
        api_version == "karpenter.sh/v1" || api_version == "karpenter.k8s.aws/v1",
        "fixtures are Karpenter v1 manifests, found {api_version}"
    );
    doc["apiVersion"] = "dovetail.dev/v1".into();
}

fn load(file_name: &str) -> Converted {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(file_name);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut converted = Converted::default();
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let mut doc = serde_yaml_ng::Value::deserialize(document).unwrap();
        convert_api_version(&mut doc);
        match doc["kind"].as_str() {
            Some("NodePool") => {
                converted.node_pools.push(serde_yaml_ng::from_value(doc).unwrap_or_else(|e| panic!("{file_name}: {e}")))
            }
            Some("EC2NodeClass") => converted
                .node_classes
                .push(serde_yaml_ng::from_value(doc).unwrap_or_else(|e| panic!("{file_name}: {e}"))),
            other => panic!("{file_name}: unexpected kind {other:?}"),
        }
    }
    converted
}

fn assert_valid_pool(pool: &NodePool) {
    if let Err(errors) = pool.validate() {
        panic!("{}", render(&errors));
    }
    // What we write back must read back the same (no field lost or renamed).
    let json = serde_json::to_value(pool).unwrap();
    assert_eq!(json["apiVersion"], "dovetail.dev/v1");
    let back: NodePool = serde_json::from_value(json).unwrap();
    assert_eq!(&back, pool);
}

fn assert_valid_class(class: &EC2NodeClass) {
    if let Err(errors) = class.validate() {
        panic!("{}", render(&errors));
    }
    let json = serde_json::to_value(class).unwrap();
    let back: EC2NodeClass = serde_json::from_value(json).unwrap();
    assert_eq!(&back, class);
}

fn render(errors: &[FieldError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
}

#[test]
fn grover_nodepool() {
    let docs = load("grover-nodepool.yaml");
    let pool = &docs.node_pools[0];
    assert_valid_pool(pool);
    assert_eq!(pool.metadata.name.as_deref(), Some("default"));
    let spec = &pool.spec.template.spec;
    assert_eq!(spec.node_class_ref.group, "karpenter.k8s.aws");
    assert!(spec.node_class_ref.is_ec2_node_class());
    assert_eq!(spec.expire_after.parse(), Ok(Some(Duration::from_secs(720 * 3600))));
    assert_eq!(spec.requirements.len(), 6);
    let families = &spec.requirements[2];
    assert_eq!(families.key, "karpenter.k8s.aws/instance-family");
    assert_eq!(families.operator, Operator::NotIn);
    assert_eq!(families.values.len(), 12);
    assert_eq!(pool.spec.disruption.consolidation_policy, ConsolidationPolicy::WhenEmptyOrUnderutilized);
    // Budgets were not given: Karpenter's default applies.
    assert_eq!(pool.spec.disruption.budgets.len(), 1);
    assert_eq!(pool.spec.disruption.budgets[0].parse_nodes(), Ok(BudgetNodes::Percent(10)));
}

#[test]
fn getting_started_pool_and_class() {
    let docs = load("getting-started.yaml");
    let pool = &docs.node_pools[0];
    assert_valid_pool(pool);
    let generation = &pool.spec.template.spec.requirements[4];
    assert_eq!(generation.operator, Operator::Gt);
    assert_eq!(generation.values, ["2"]);
    assert_eq!(pool.spec.limits["cpu"].0, "1000");
    assert_eq!(pool.spec.disruption.consolidate_after.parse(), Ok(Some(Duration::from_secs(60))));

    let class = &docs.node_classes[0];
    assert_valid_class(class);
    assert_eq!(class.spec.role.as_deref(), Some("KarpenterNodeRole-demo-cluster"));
    assert_eq!(class.spec.ami_selector_terms[0].alias.as_deref(), Some("al2023@latest"));
    // The family comes from the alias when amiFamily is not given.
    assert_eq!(class.spec.ami_family, None);
    assert_eq!(class.ami_family(), AmiFamily::Al2023);
    assert_eq!(class.alias().unwrap().version, "latest");
    // IMDS defaults.
    let imds = &class.spec.metadata_options;
    assert_eq!(imds.http_endpoint, EndpointState::Enabled);
    assert_eq!(imds.http_protocol_ipv6, EndpointState::Disabled);
    assert_eq!(imds.http_put_response_hop_limit, 1);
    assert_eq!(imds.http_tokens, HttpTokens::Required);
    assert_eq!(class.spec.subnet_selector_terms[0].tags["karpenter.sh/discovery"], "demo-cluster");
}

#[test]
fn minimal_pool_gets_karpenter_defaults() {
    let pool = &load("minimal-nodepool.yaml").node_pools[0];
    assert_valid_pool(pool);
    let spec = &pool.spec;
    assert_eq!(spec.template.spec.expire_after.as_str(), "720h");
    assert_eq!(spec.template.spec.termination_grace_period, None);
    assert_eq!(spec.disruption.consolidation_policy, ConsolidationPolicy::WhenEmptyOrUnderutilized);
    assert_eq!(spec.disruption.consolidate_after.as_str(), "0s");
    assert_eq!(spec.disruption.budgets.len(), 1);
    assert_eq!(spec.disruption.budgets[0].nodes, "10%");
    assert!(spec.limits.is_empty());
    assert_eq!(spec.weight, None);
    // Defaults are written out explicitly, as the API server would store them.
    let json = serde_json::to_value(pool).unwrap();
    assert_eq!(json["spec"]["template"]["spec"]["expireAfter"], "720h");
    assert_eq!(json["spec"]["disruption"]["budgets"], serde_json::json!([{ "nodes": "10%" }]));
}

#[test]
fn gpu_pool_and_class() {
    let docs = load("gpu.yaml");
    let pool = &docs.node_pools[0];
    assert_valid_pool(pool);
    let spec = &pool.spec.template.spec;
    assert_eq!(pool.spec.weight, Some(50));
    assert_eq!(spec.taints[0].key, "nvidia.com/gpu");
    assert_eq!(spec.taints[0].value.as_deref(), Some("true"));
    assert_eq!(spec.taints[0].effect, TaintEffect::NoSchedule);
    assert_eq!(spec.startup_taints[0].effect, TaintEffect::NoExecute);
    assert!(spec.expire_after.is_never());
    assert_eq!(spec.expire_after.parse(), Ok(None));
    assert_eq!(spec.termination_grace_period.as_ref().unwrap().parse(), Ok(Duration::from_secs(48 * 3600)));
    assert_eq!(pool.spec.limits["nvidia.com/gpu"].0, "32");
    assert_eq!(pool.spec.limits["memory"].0, "4Ti");
    assert_eq!(pool.spec.disruption.consolidation_policy, ConsolidationPolicy::WhenEmpty);
    assert_eq!(pool.spec.template.metadata.labels["workload-type"], "gpu");

    let class = &docs.node_classes[0];
    assert_valid_class(class);
    assert_eq!(class.ami_family(), AmiFamily::Bottlerocket);
    assert_eq!(class.spec.role, None);
    assert!(class.spec.instance_profile.is_some());
    let data = class.spec.block_device_mappings[1].ebs.as_ref().unwrap();
    assert_eq!(data.volume_type, Some(VolumeType::Gp3));
    assert_eq!(data.volume_size.as_ref().unwrap().0, "200Gi");
    assert_eq!(data.throughput, Some(500));
}

#[test]
fn budgets_with_schedules() {
    let pool = &load("budgets.yaml").node_pools[0];
    assert_valid_pool(pool);
    let budgets = &pool.spec.disruption.budgets;
    assert_eq!(budgets.len(), 3);
    assert_eq!(budgets[0].parse_nodes(), Ok(BudgetNodes::Percent(20)));
    assert!(budgets[0].applies_to(&DisruptionReason::Drifted));
    assert_eq!(budgets[1].parse_nodes(), Ok(BudgetNodes::Count(0)));
    assert_eq!(budgets[1].schedule.as_deref(), Some("0 9 * * mon-fri"));
    assert_eq!(budgets[1].duration.as_ref().unwrap().parse(), Ok(Duration::from_secs(8 * 3600)));
    assert!(budgets[1].applies_to(&DisruptionReason::Underutilized));
    assert!(!budgets[1].applies_to(&DisruptionReason::Drifted));
    assert_eq!(budgets[2].duration.as_ref().unwrap().parse(), Ok(Duration::from_secs(5400)));
    let families = &pool.spec.template.spec.requirements[1];
    assert_eq!(families.min_values, Some(5));
    assert_eq!(pool.spec.template.spec.expire_after.as_str(), "168h");
}

#[test]
fn full_ec2nodeclass() {
    let class = &load("ec2nodeclass-full.yaml").node_classes[0];
    assert_valid_class(class);
    let spec = &class.spec;
    assert_eq!(spec.ami_family, Some(AmiFamily::Al2));
    assert_eq!(class.alias(), None);
    assert_eq!(spec.ami_selector_terms[0].owner.as_deref(), Some("amazon"));
    let kubelet = spec.kubelet.as_ref().unwrap();
    assert_eq!(kubelet.max_pods, Some(20));
    assert_eq!(kubelet.pods_per_core, Some(2));
    assert_eq!(kubelet.kube_reserved["ephemeral-storage"], "3Gi");
    assert_eq!(kubelet.eviction_hard["memory.available"], "5%");
    assert_eq!(kubelet.eviction_soft_grace_period["nodefs.available"].parse(), Ok(Duration::from_secs(90)));
    assert_eq!(kubelet.image_gc_high_threshold_percent, Some(85));
    assert_eq!(kubelet.cpu_cfs_quota, Some(true));
    assert_eq!(kubelet.cluster_dns, ["10.0.1.100"]);
    assert!(spec.block_device_mappings[0].root_volume);
    assert_eq!(spec.instance_store_policy, Some(InstanceStorePolicy::Raid0));
    assert_eq!(spec.associate_public_ip_address, Some(false));
    assert_eq!(spec.metadata_options.http_put_response_hop_limit, 2);
    assert_eq!(spec.metadata_options.http_protocol_ipv6, EndpointState::Enabled);
    assert_eq!(spec.capacity_reservation_selector_terms[1].owner_id.as_deref(), Some("123456789012"));
    assert!(spec.user_data.as_deref().unwrap().contains("custom bootstrap"));
    // Field names Karpenter spells unusually survive a round trip.
    let json = serde_json::to_value(class).unwrap();
    let kubelet = &json["spec"]["kubelet"];
    assert_eq!(kubelet["clusterDNS"][0], "10.0.1.100");
    assert_eq!(kubelet["cpuCFSQuota"], true);
    assert_eq!(kubelet["imageGCHighThresholdPercent"], 85);
    assert_eq!(json["spec"]["blockDeviceMappings"][0]["ebs"]["kmsKeyID"], "alias/ebs-nodes");
    assert_eq!(json["spec"]["associatePublicIPAddress"], false);
    assert_eq!(json["spec"]["metadataOptions"]["httpProtocolIPv6"], "enabled");
}

// ---- negative tests: one broken field each ----

/// Loads the first NodePool of a fixture and lets `edit` break it.
fn broken_pool(edit: impl FnOnce(&mut serde_yaml_ng::Value)) -> NodePool {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/budgets.yaml")).unwrap();
    let mut doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    convert_api_version(&mut doc);
    edit(&mut doc);
    serde_yaml_ng::from_value(doc).unwrap()
}

fn broken_class(edit: impl FnOnce(&mut serde_yaml_ng::Value)) -> EC2NodeClass {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ec2nodeclass-full.yaml"))
            .unwrap();
    let mut doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    convert_api_version(&mut doc);
    edit(&mut doc);
    serde_yaml_ng::from_value(doc).unwrap()
}

fn yaml(text: &str) -> serde_yaml_ng::Value {
    serde_yaml_ng::from_str(text).unwrap()
}

/// Asserts validation fails with an error on exactly `field` whose message contains `needle`.
fn assert_error(result: Result<(), Vec<FieldError>>, kind: &str, name: &str, field: &str, needle: &str) {
    let errors = result.expect_err("validation should fail");
    let hit = errors
        .iter()
        .find(|e| e.field == field)
        .unwrap_or_else(|| panic!("no error on {field}; got:\n{}", render(&errors)));
    assert_eq!(hit.kind, kind);
    assert_eq!(hit.name, name);
    assert!(hit.message.contains(needle), "error on {field} should mention {needle:?}: {hit}");
    assert!(hit.to_string().starts_with(&format!("{kind} \"{name}\": {field}: ")));
}

#[test]
fn budget_nodes_must_be_count_or_percent() {
    let pool = broken_pool(|d| d["spec"]["disruption"]["budgets"][0]["nodes"] = "ten%".into());
    let errors = pool.validate().unwrap_err();
    assert_eq!(
        errors[0].to_string(),
        "NodePool \"batch\": spec.disruption.budgets[0].nodes: \"ten%\" is neither an integer nor \
         a percentage"
    );
}

#[test]
fn nodepool_label_is_not_a_requirement() {
    let pool =
        broken_pool(|d| d["spec"]["template"]["spec"]["requirements"][0]["key"] = "karpenter.sh/nodepool".into());
    assert_error(pool.validate(), "NodePool", "batch", "spec.template.spec.requirements[0].key", "restricted");
}

#[test]
fn restricted_label_domains() {
    for key in ["kubernetes.io/custom", "karpenter.k8s.aws/custom", "dovetail.dev/anything"] {
        let pool = broken_pool(|d| d["spec"]["template"]["spec"]["requirements"][0]["key"] = key.into());
        assert_error(pool.validate(), "NodePool", "batch", "spec.template.spec.requirements[0].key", "restricted");
    }
    let pool = broken_pool(|d| d["spec"]["template"]["metadata"] = yaml("labels: {kubernetes.io/hostname: foo}"));
    assert_error(
        pool.validate(),
        "NodePool",
        "batch",
        "spec.template.metadata.labels[kubernetes.io/hostname]",
        "restricted",
    );
}

#[test]
fn requirement_operators_and_values() {
    let pool = broken_pool(|d| d["spec"]["template"]["spec"]["requirements"][0]["operator"] = "Equals".into());
    assert_error(
        pool.validate(),
        "NodePool",
        "batch",
        "spec.template.spec.requirements[0].operator",
        "\"Equals\" is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt",
    );

    let pool = broken_pool(|d| d["spec"]["template"]["spec"]["requirements"][0]["values"] = yaml("[]"));
    assert_error(
        pool.validate(),
        "NodePool",
        "batch",
        "spec.template.spec.requirements[0].values",
        "at least one value",
    );

    for values in ["[abc]", "['1', '2']", "['-1']"] {
        let pool = broken_pool(|d| d["spec"]["template"]["spec"]["requirements"][3]["values"] = yaml(values));
        assert_error(
            pool.validate(),
            "NodePool",
            "batch",
            "spec.template.spec.requirements[3].values",
            "exactly one non-negative integer",
        );
    }
}

#[test]
fn min_values_bounds() {
    let pool = broken_pool(|d| d["spec"]["template"]["spec"]["requirements"][1]["minValues"] = 9.into());
    assert_error(
        pool.validate(),
        "NodePool",
        "batch",
        "spec.template.spec.requirements[1].minValues",
        "more than the 8 value(s)",
    );
    let pool = broken_pool(|d| d["spec"]["template"]["spec"]["requirements"][2]["minValues"] = 51.into());
    assert_error(pool.validate(), "NodePool", "batch", "spec.template.spec.requirements[2].minValues", "outside 1-50");
}

#[test]
fn budget_schedules() {
    let pool = broken_pool(|d| {
        d["spec"]["disruption"]["budgets"][1].as_mapping_mut().unwrap().remove("duration");
    });
    assert_error(
        pool.validate(),
        "NodePool",
        "batch",
        "spec.disruption.budgets[1].duration",
        "required when schedule is set",
    );
    let pool = broken_pool(|d| d["spec"]["disruption"]["budgets"][1]["schedule"] = "0 9 * *".into());
    assert_error(pool.validate(), "NodePool", "batch", "spec.disruption.budgets[1].schedule", "expected 5 fields");
    let pool = broken_pool(|d| d["spec"]["disruption"]["budgets"][1]["schedule"] = "0 9 * * mon-8".into());
    assert_error(
        pool.validate(),
        "NodePool",
        "batch",
        "spec.disruption.budgets[1].schedule",
        r#"the day-of-week field "mon-8": 8 is above the maximum 6"#,
    );
    let pool = broken_pool(|d| d["spec"]["disruption"]["budgets"][1]["duration"] = "30s".into());
    assert_error(
        pool.validate(),
        "NodePool",
        "batch",
        "spec.disruption.budgets[1].duration",
        "whole hours and minutes",
    );
    let pool = broken_pool(|d| d["spec"]["disruption"]["budgets"][2]["reasons"][0] = "Expired".into());
    assert_error(
        pool.validate(),
        "NodePool",
        "batch",
        "spec.disruption.budgets[2].reasons[0]",
        "not one of Empty, Underutilized, Drifted",
    );
}

#[test]
fn taints_weight_durations_and_node_class() {
    let pool = broken_pool(|d| d["spec"]["template"]["spec"]["taints"] = yaml("[{key: example.com/x, effect: NoRun}]"));
    assert_error(pool.validate(), "NodePool", "batch", "spec.template.spec.taints[0].effect", "\"NoRun\"");
    let pool = broken_pool(|d| d["spec"]["weight"] = 0.into());
    assert_error(pool.validate(), "NodePool", "batch", "spec.weight", "outside 1-100");
    let pool = broken_pool(|d| d["spec"]["template"]["spec"]["expireAfter"] = "30d".into());
    assert_error(pool.validate(), "NodePool", "batch", "spec.template.spec.expireAfter", "\"30d\"");
    let pool = broken_pool(|d| d["spec"]["disruption"]["consolidationPolicy"] = "Always".into());
    assert_error(pool.validate(), "NodePool", "batch", "spec.disruption.consolidationPolicy", "\"Always\"");
    let pool = broken_pool(|d| {
        d["spec"]["template"]["spec"]["nodeClassRef"] =
            yaml("{group: karpenter.azure.com, kind: AKSNodeClass, name: default}")
    });
    assert_error(
        pool.validate(),
        "NodePool",
        "batch",
        "spec.template.spec.nodeClassRef",
        "only knows kind EC2NodeClass",
    );
    // Both groups name a Dovetail EC2NodeClass.
    let pool = broken_pool(|d| d["spec"]["template"]["spec"]["nodeClassRef"]["group"] = "dovetail.dev".into());
    assert_eq!(pool.validate(), Ok(()));
}

#[test]
fn every_problem_is_reported_at_once() {
    let pool = broken_pool(|d| {
        d["spec"]["weight"] = 500.into();
        d["spec"]["disruption"]["budgets"][0]["nodes"] = "lots".into();
    });
    let errors = pool.validate().unwrap_err();
    let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
    assert!(fields.contains(&"spec.weight"), "{fields:?}");
    assert!(fields.contains(&"spec.disruption.budgets[0].nodes"), "{fields:?}");
}

#[test]
fn ec2nodeclass_identity_and_ami_rules() {
    let class = broken_class(|d| d["spec"]["instanceProfile"] = "profile".into());
    assert_error(class.validate(), "EC2NodeClass", "tuned", "spec", "role and instanceProfile are mutually exclusive");
    let class = broken_class(|d| {
        d["spec"].as_mapping_mut().unwrap().remove("role");
    });
    assert_error(class.validate(), "EC2NodeClass", "tuned", "spec", "exactly one of role");

    let class = broken_class(|d| d["spec"]["amiSelectorTerms"] = yaml("[]"));
    assert_error(class.validate(), "EC2NodeClass", "tuned", "spec.amiSelectorTerms", "at least one term");
    for (alias, needle) in [
        ("al2023", "family@version"),
        ("ubuntu@latest", "not supported"),
        ("windows2022@v20240101", "only use version 'latest'"),
        ("windows2025@v20250101", "only use version 'latest'"),
    ] {
        let class = broken_class(|d| {
            d["spec"]["amiSelectorTerms"] = yaml(&format!("[{{alias: '{alias}'}}]"));
            d["spec"].as_mapping_mut().unwrap().remove("amiFamily");
        });
        assert_error(class.validate(), "EC2NodeClass", "tuned", "spec.amiSelectorTerms[0].alias", needle);
    }
    let class = broken_class(|d| d["spec"]["amiSelectorTerms"] = yaml("[{alias: al2023@latest}]"));
    assert_error(class.validate(), "EC2NodeClass", "tuned", "spec.amiFamily", "does not match alias family al2023");
    // Karpenter's rule for Windows aliases: amiFamily, if set, must be the alias's Windows family
    // or Custom. A Linux family with a Windows alias (and the reverse) is refused, naming both.
    for (family, alias, needle) in [
        ("AL2023", "windows2022@latest", "AL2023 does not match alias family windows2022; use Windows2022 or Custom"),
        ("Windows2019", "windows2025@latest", "does not match alias family windows2025; use Windows2025 or Custom"),
        ("Windows2022", "al2023@latest", "Windows2022 does not match alias family al2023; use AL2023 or Custom"),
    ] {
        let class = broken_class(|d| {
            d["spec"]["amiFamily"] = family.into();
            d["spec"]["amiSelectorTerms"] = yaml(&format!("[{{alias: '{alias}'}}]"));
        });
        assert_error(class.validate(), "EC2NodeClass", "tuned", "spec.amiFamily", needle);
    }
    for family in ["Windows2022", "Custom"] {
        let class = broken_class(|d| {
            d["spec"]["amiFamily"] = family.into();
            d["spec"]["amiSelectorTerms"] = yaml("[{alias: windows2022@latest}]");
        });
        assert!(class.validate().is_ok(), "{family} with windows2022@latest");
    }
    let class = broken_class(|d| d["spec"]["amiSelectorTerms"] = yaml("[{alias: al2023@latest}, {id: ami-0123abcd}]"));
    assert_error(class.validate(), "EC2NodeClass", "tuned", "spec.amiSelectorTerms[0].alias", "only amiSelectorTerm");
    let class = broken_class(|d| {
        d["spec"].as_mapping_mut().unwrap().remove("amiFamily");
    });
    assert_error(
        class.validate(),
        "EC2NodeClass",
        "tuned",
        "spec.amiFamily",
        "required when amiSelectorTerms has no alias",
    );
}

#[test]
fn ec2nodeclass_selector_terms() {
    let class = broken_class(|d| d["spec"]["subnetSelectorTerms"] = yaml("[]"));
    assert_error(class.validate(), "EC2NodeClass", "tuned", "spec.subnetSelectorTerms", "at least one term");
    let class = broken_class(|d| d["spec"]["subnetSelectorTerms"] = yaml("[{}]"));
    assert_error(class.validate(), "EC2NodeClass", "tuned", "spec.subnetSelectorTerms[0]", "is empty");
    let class = broken_class(|d| d["spec"]["securityGroupSelectorTerms"] = yaml("[{id: sg-0123, name: default}]"));
    assert_error(class.validate(), "EC2NodeClass", "tuned", "spec.securityGroupSelectorTerms[0]", "cannot be combined");
    let class = broken_class(|d| d["spec"]["securityGroupSelectorTerms"] = yaml("[{tags: {team: ''}}]"));
    assert_error(
        class.validate(),
        "EC2NodeClass",
        "tuned",
        "spec.securityGroupSelectorTerms[0].tags",
        "empty tag keys or values",
    );
    let class = broken_class(|d| d["spec"]["subnetSelectorTerms"] = yaml("[{id: vpc-0123}]"));
    assert_error(class.validate(), "EC2NodeClass", "tuned", "spec.subnetSelectorTerms[0].id", "subnet-");
}

#[test]
fn ec2nodeclass_tags_kubelet_and_disks() {
    let class = broken_class(|d| d["spec"]["tags"]["kubernetes.io/cluster/demo-cluster"] = "owned".into());
    assert_error(
        class.validate(),
        "EC2NodeClass",
        "tuned",
        "spec.tags[kubernetes.io/cluster/demo-cluster]",
        "restricted",
    );
    let class = broken_class(|d| {
        d["spec"]["kubelet"]["evictionSoftGracePeriod"].as_mapping_mut().unwrap().remove("memory.available");
    });
    assert_error(
        class.validate(),
        "EC2NodeClass",
        "tuned",
        "spec.kubelet.evictionSoft[memory.available]",
        "no matching evictionSoftGracePeriod",
    );
    let class = broken_class(|d| d["spec"]["kubelet"]["imageGCLowThresholdPercent"] = 90.into());
    assert_error(
        class.validate(),
        "EC2NodeClass",
        "tuned",
        "spec.kubelet.imageGCHighThresholdPercent",
        "greater than imageGCLowThresholdPercent",
    );
    let class = broken_class(|d| d["spec"]["kubelet"]["systemReserved"]["gpu"] = "1".into());
    assert_error(
        class.validate(),
        "EC2NodeClass",
        "tuned",
        "spec.kubelet.systemReserved[gpu]",
        "not one of cpu, memory, ephemeral-storage, pid",
    );
    // Thresholds, reservations and disk sizes are read by the core's one quantity parser.
    let class = broken_class(|d| d["spec"]["kubelet"]["evictionHard"]["memory.available"] = "150%".into());
    assert_error(
        class.validate(),
        "EC2NodeClass",
        "tuned",
        "spec.kubelet.evictionHard[memory.available]",
        r#""150%": percentage must be between 0% and 100%"#,
    );
    let class = broken_class(|d| d["spec"]["kubelet"]["evictionHard"]["memory.available"] = "100 Mi".into());
    assert_error(
        class.validate(),
        "EC2NodeClass",
        "tuned",
        "spec.kubelet.evictionHard[memory.available]",
        r#""100 Mi": not a quantity or a percentage"#,
    );
    let class = broken_class(|d| d["spec"]["kubelet"]["kubeReserved"]["memory"] = "-1Gi".into());
    assert_error(
        class.validate(),
        "EC2NodeClass",
        "tuned",
        "spec.kubelet.kubeReserved[memory]",
        r#""-1Gi" is not a non-negative quantity"#,
    );
    let class = broken_class(|d| d["spec"]["blockDeviceMappings"][0]["ebs"]["volumeSize"] = "1.5Ti".into());
    assert_error(
        class.validate(),
        "EC2NodeClass",
        "tuned",
        "spec.blockDeviceMappings[0].ebs.volumeSize",
        "not a whole number of Gi, G, Ti or T",
    );
    let class = broken_class(|d| d["spec"]["blockDeviceMappings"][1]["rootVolume"] = true.into());
    assert_error(class.validate(), "EC2NodeClass", "tuned", "spec.blockDeviceMappings", "at most one may");
    let class = broken_class(|d| {
        d["spec"]["metadataOptions"]["httpPutResponseHopLimit"] = 65.into();
        d["spec"]["metadataOptions"]["httpTokens"] = "sometimes".into();
    });
    assert_error(
        class.validate(),
        "EC2NodeClass",
        "tuned",
        "spec.metadataOptions.httpPutResponseHopLimit",
        "outside 1-64",
    );
    assert_error(class.validate(), "EC2NodeClass", "tuned", "spec.metadataOptions.httpTokens", "\"sometimes\"");
}
