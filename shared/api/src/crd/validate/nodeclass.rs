//! EC2NodeClass validation: selector terms, AMI family and aliases, tags, kubelet settings,
//! block devices.

use std::collections::BTreeMap;

use dovetail_core::overhead::check_threshold;
use dovetail_core::resources::{parse_milli, parse_units};

use super::{Errors, FieldError};
use crate::crd::{AmiAlias, AmiFamily, EC2NodeClass};

const RESERVED_RESOURCES: &[&str] = &["cpu", "memory", "ephemeral-storage", "pid"];

const EVICTION_SIGNALS: &[&str] = &[
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
];

impl EC2NodeClass {
    /// Checks the EC2NodeClass against Karpenter v1's rules, returning every problem found.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errs = Errors::new("EC2NodeClass", &self.metadata);
        let spec = &self.spec;

        // AMI selection.
        let terms = &spec.ami_selector_terms;
        if terms.is_empty() {
            errs.push("spec.amiSelectorTerms", "needs at least one term");
        } else if terms.len() > 30 {
            errs.push("spec.amiSelectorTerms", format!("has {} terms, at most 30 are allowed", terms.len()));
        }
        let mut alias = None;
        for (i, term) in terms.iter().enumerate() {
            let field = format!("spec.amiSelectorTerms[{i}]");
            let others = !term.tags.is_empty() || term.name.is_some() || term.owner.is_some();
            if term.alias.is_none()
                && term.id.is_none()
                && term.ssm_parameter.is_none()
                && term.tags.is_empty()
                && term.name.is_none()
            {
                errs.push(&field, "is empty: set one of alias, id, name, tags or ssmParameter");
            }
            if let Some(id) = &term.id {
                check_aws_id(&mut errs, &format!("{field}.id"), id, "ami-");
                if term.alias.is_some() || others {
                    errs.push(format!("{field}.id"), "cannot be combined with other fields in the same term");
                }
            }
            if let Some(value) = &term.alias {
                match AmiAlias::parse(value) {
                    Ok(parsed) => alias = Some(parsed),
                    Err(why) => errs.push(format!("{field}.alias"), why),
                }
                if others {
                    errs.push(format!("{field}.alias"), "cannot be combined with other fields in the same term");
                }
                if terms.len() > 1 {
                    errs.push(format!("{field}.alias"), "an alias term must be the only amiSelectorTerm");
                }
            }
            check_selector_tags(&mut errs, &format!("{field}.tags"), &term.tags);
        }
        match (&spec.ami_family, &alias) {
            (Some(AmiFamily::Unknown(family)), _) => {
                errs.push("spec.amiFamily", format!("{family:?} is not one of {}", AmiFamily::KNOWN.join(", ")))
            }
            (Some(family), Some(alias)) if *family != AmiFamily::Custom && *family != alias.ami_family() => errs.push(
                "spec.amiFamily",
                format!("{family} does not match alias family {}; use {} or Custom", alias.family, alias.ami_family()),
            ),
            (None, None) if terms.iter().all(|t| t.alias.is_none()) => {
                errs.push("spec.amiFamily", "is required when amiSelectorTerms has no alias term")
            }
            _ => {}
        }

        // Subnets and security groups.
        if spec.subnet_selector_terms.is_empty() {
            errs.push("spec.subnetSelectorTerms", "needs at least one term");
        }
        for (i, term) in spec.subnet_selector_terms.iter().enumerate() {
            let field = format!("spec.subnetSelectorTerms[{i}]");
            match &term.id {
                None if term.tags.is_empty() => errs.push(&field, "is empty: set id or tags"),
                Some(_) if !term.tags.is_empty() => {
                    errs.push(format!("{field}.id"), "cannot be combined with tags in the same term")
                }
                _ => {}
            }
            if let Some(id) = &term.id {
                check_aws_id(&mut errs, &format!("{field}.id"), id, "subnet-");
            }
            check_selector_tags(&mut errs, &format!("{field}.tags"), &term.tags);
        }
        if spec.security_group_selector_terms.is_empty() {
            errs.push("spec.securityGroupSelectorTerms", "needs at least one term");
        }
        for (i, term) in spec.security_group_selector_terms.iter().enumerate() {
            let field = format!("spec.securityGroupSelectorTerms[{i}]");
            let set =
                usize::from(term.id.is_some()) + usize::from(term.name.is_some()) + usize::from(!term.tags.is_empty());
            if set == 0 {
                errs.push(&field, "is empty: set id, name or tags");
            } else if set > 1 && (term.id.is_some() || term.name.is_some()) {
                errs.push(&field, "id and name cannot be combined with other fields in the same term");
            }
            if let Some(id) = &term.id {
                check_aws_id(&mut errs, &format!("{field}.id"), id, "sg-");
            }
            check_selector_tags(&mut errs, &format!("{field}.tags"), &term.tags);
        }
        for (i, term) in spec.capacity_reservation_selector_terms.iter().enumerate() {
            let field = format!("spec.capacityReservationSelectorTerms[{i}]");
            let others = !term.tags.is_empty() || term.owner_id.is_some() || term.instance_match_criteria.is_some();
            if term.id.is_none() && term.tags.is_empty() && term.instance_match_criteria.is_none() {
                errs.push(&field, "is empty: set id, tags or instanceMatchCriteria");
            }
            if let Some(id) = &term.id {
                check_aws_id(&mut errs, &format!("{field}.id"), id, "cr-");
                if others {
                    errs.push(format!("{field}.id"), "cannot be combined with other fields in the same term");
                }
            }
            if let Some(owner) = &term.owner_id {
                if owner.len() != 12 || !owner.bytes().all(|b| b.is_ascii_digit()) {
                    errs.push(format!("{field}.ownerID"), format!("{owner:?} is not a 12-digit AWS account id"));
                }
            }
            if let Some(criteria) = term.instance_match_criteria.as_ref().filter(|c| !c.is_known()) {
                errs.push(
                    format!("{field}.instanceMatchCriteria"),
                    format!("{:?} is not one of open, targeted", criteria.as_str()),
                );
            }
            check_selector_tags(&mut errs, &format!("{field}.tags"), &term.tags);
        }

        // Identity.
        match (&spec.role, &spec.instance_profile) {
            (Some(_), Some(_)) => errs.push("spec", "role and instanceProfile are mutually exclusive: set exactly one"),
            (None, None) => errs.push("spec", "set exactly one of role and instanceProfile"),
            _ => {}
        }
        if spec.role.as_deref() == Some("") {
            errs.push("spec.role", "may not be empty");
        }
        if spec.instance_profile.as_deref() == Some("") {
            errs.push("spec.instanceProfile", "may not be empty");
        }

        for key in spec.tags.keys() {
            if key.is_empty() {
                errs.push("spec.tags", "tag keys may not be empty");
            } else if let Some(why) = restricted_tag(key) {
                errs.push(format!("spec.tags[{key}]"), format!("is restricted: {why}"));
            }
        }

        if let Some(kubelet) = &spec.kubelet {
            validate_kubelet(&mut errs, kubelet);
        }

        if spec.block_device_mappings.len() > 50 {
            errs.push(
                "spec.blockDeviceMappings",
                format!("has {} entries, at most 50 are allowed", spec.block_device_mappings.len()),
            );
        }
        let roots = spec.block_device_mappings.iter().filter(|m| m.root_volume).count();
        if roots > 1 {
            errs.push("spec.blockDeviceMappings", format!("{roots} mappings set rootVolume, at most one may"));
        }
        for (i, mapping) in spec.block_device_mappings.iter().enumerate() {
            let Some(ebs) = &mapping.ebs else { continue };
            let field = format!("spec.blockDeviceMappings[{i}].ebs");
            if ebs.snapshot_id.is_none() && ebs.volume_size.is_none() {
                errs.push(&field, "set snapshotID or volumeSize");
            }
            if let Some(size) = &ebs.volume_size {
                if let Err(why) = check_volume_size(&size.0) {
                    errs.push(format!("{field}.volumeSize"), why);
                }
            }
            if let Some(kind) = ebs.volume_type.as_ref().filter(|t| !t.is_known()) {
                errs.push(
                    format!("{field}.volumeType"),
                    format!("{:?} is not one of {}", kind.as_str(), crate::crd::VolumeType::KNOWN.join(", ")),
                );
            }
        }

        if let Some(policy) = spec.instance_store_policy.as_ref().filter(|p| !p.is_known()) {
            errs.push("spec.instanceStorePolicy", format!("{:?} is not RAID0", policy.as_str()));
        }

        let imds = &spec.metadata_options;
        for (field, state) in [("httpEndpoint", &imds.http_endpoint), ("httpProtocolIPv6", &imds.http_protocol_ipv6)] {
            if !state.is_known() {
                errs.push(
                    format!("spec.metadataOptions.{field}"),
                    format!("{:?} is not one of enabled, disabled", state.as_str()),
                );
            }
        }
        if !imds.http_tokens.is_known() {
            errs.push(
                "spec.metadataOptions.httpTokens",
                format!("{:?} is not one of required, optional", imds.http_tokens.as_str()),
            );
        }
        if !(1..=64).contains(&imds.http_put_response_hop_limit) {
            errs.push(
                "spec.metadataOptions.httpPutResponseHopLimit",
                format!("{} is outside 1-64", imds.http_put_response_hop_limit),
            );
        }

        errs.finish()
    }
}

/// Tag keys EC2 resources must not get from users: AWS and EKS use them to tell which cluster
/// owns what, and Karpenter and Dovetail use them to find their instances again.
fn restricted_tag(key: &str) -> Option<&'static str> {
    if key == "eks:eks-cluster-name" {
        Some("it is set by EKS")
    } else if key.starts_with("kubernetes.io/cluster/") {
        Some("it marks cluster ownership and is set by Dovetail")
    } else if matches!(key, "karpenter.sh/nodepool" | "karpenter.sh/nodeclaim" | "karpenter.k8s.aws/ec2nodeclass") {
        Some("it identifies Karpenter-owned instances")
    } else if key.starts_with("dovetail.dev/") {
        Some("keys under dovetail.dev/ are reserved for Dovetail")
    } else {
        None
    }
}

fn check_aws_id(errs: &mut Errors, field: &str, id: &str, prefix: &str) {
    let ok = id
        .strip_prefix(prefix)
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
    if !ok {
        errs.push(field, format!("{id:?} is not an id of the form {prefix}<hex>"));
    }
}

fn check_selector_tags(errs: &mut Errors, field: &str, tags: &BTreeMap<String, String>) {
    if tags.len() > 20 {
        errs.push(field, format!("has {} tags, at most 20 are allowed", tags.len()));
    }
    for (key, value) in tags {
        if key.is_empty() || value.is_empty() {
            errs.push(field, format!("empty tag keys or values aren't supported ({key:?}: {value:?})"));
        }
    }
}

fn validate_kubelet(errs: &mut Errors, kubelet: &crate::crd::KubeletConfiguration) {
    for (name, reserved) in [("systemReserved", &kubelet.system_reserved), ("kubeReserved", &kubelet.kube_reserved)] {
        for (resource, value) in reserved {
            let field = format!("spec.kubelet.{name}[{resource}]");
            if !RESERVED_RESOURCES.contains(&resource.as_str()) {
                errs.push(&field, format!("{resource:?} is not one of {}", RESERVED_RESOURCES.join(", ")));
            }
            if !parse_milli(value).is_ok_and(|m| m >= 0) {
                errs.push(&field, format!("{value:?} is not a non-negative quantity"));
            }
        }
    }
    for (name, thresholds) in [("evictionHard", &kubelet.eviction_hard), ("evictionSoft", &kubelet.eviction_soft)] {
        for (signal, value) in thresholds {
            let field = format!("spec.kubelet.{name}[{signal}]");
            if !EVICTION_SIGNALS.contains(&signal.as_str()) {
                errs.push(&field, format!("{signal:?} is not one of {}", EVICTION_SIGNALS.join(", ")));
            }
            if let Err(why) = check_threshold(value) {
                errs.push(&field, format!("{value:?}: {why}"));
            }
        }
    }
    for (signal, grace) in &kubelet.eviction_soft_grace_period {
        let field = format!("spec.kubelet.evictionSoftGracePeriod[{signal}]");
        if !EVICTION_SIGNALS.contains(&signal.as_str()) {
            errs.push(&field, format!("{signal:?} is not one of {}", EVICTION_SIGNALS.join(", ")));
        }
        if let Err(why) = grace.parse() {
            errs.push(&field, why.to_string());
        }
        if !kubelet.eviction_soft.contains_key(signal) {
            errs.push(&field, "has no matching evictionSoft threshold");
        }
    }
    for signal in kubelet.eviction_soft.keys() {
        if !kubelet.eviction_soft_grace_period.contains_key(signal) {
            errs.push(format!("spec.kubelet.evictionSoft[{signal}]"), "has no matching evictionSoftGracePeriod");
        }
    }
    for (field, value) in [
        ("maxPods", kubelet.max_pods),
        ("podsPerCore", kubelet.pods_per_core),
        ("evictionMaxPodGracePeriod", kubelet.eviction_max_pod_grace_period),
    ] {
        if let Some(v) = value.filter(|v| *v < 0) {
            errs.push(format!("spec.kubelet.{field}"), format!("{v} is negative"));
        }
    }
    for (field, value) in [
        ("imageGCHighThresholdPercent", kubelet.image_gc_high_threshold_percent),
        ("imageGCLowThresholdPercent", kubelet.image_gc_low_threshold_percent),
    ] {
        if let Some(v) = value.filter(|v| !(0..=100).contains(v)) {
            errs.push(format!("spec.kubelet.{field}"), format!("{v} is outside 0-100"));
        }
    }
    if let (Some(high), Some(low)) = (kubelet.image_gc_high_threshold_percent, kubelet.image_gc_low_threshold_percent) {
        if high <= low {
            errs.push(
                "spec.kubelet.imageGCHighThresholdPercent",
                format!("{high} must be greater than imageGCLowThresholdPercent ({low})"),
            );
        }
    }
}

/// EBS sizes: a whole number of `Gi`, `G`, `Ti` or `T` (Karpenter's schema), from 1 GiB to
/// 64 TB. The form is checked here; the value comes from the one quantity parser.
pub(super) fn check_volume_size(value: &str) -> Result<(), String> {
    let number_len = value.find(|c: char| !c.is_ascii_digit()).unwrap_or(value.len());
    if number_len == 0 || !matches!(&value[number_len..], "Gi" | "G" | "Ti" | "T") {
        return Err(format!("{value:?} is not a whole number of Gi, G, Ti or T (e.g. 100Gi)"));
    }
    match parse_units(value) {
        Ok(bytes) if (1 << 30..=64_000_000_000_000).contains(&bytes) => Ok(()),
        _ => Err(format!("{value:?} is outside 1Gi-64T")),
    }
}
