//! Validation of NodePools and EC2NodeClasses.
//!
//! These are the rules Karpenter enforces through its CRD schema (OpenAPI patterns and CEL
//! rules) and its runtime validation, restated in Rust. Dovetail needs them client-side too: the
//! CLI checks manifests before they reach a cluster, and the functions refuse to act on an
//! object the API server let through (an older CRD, a cluster without CEL, a hand-built object)
//! rather than guess. Every problem is reported, not just the first, each naming the object and
//! the field so it can be fixed in one pass.

use std::collections::{BTreeMap, BTreeSet};

use super::duration::is_whole_unit_duration;
use super::labels;
use super::nodepool::{BudgetNodes, Operator, Taint};
use super::schedule::CronSchedule;
use super::{AmiAlias, AmiFamily, EC2NodeClass, NodePool};

/// One problem in one field of a NodePool or EC2NodeClass.
///
/// Displays as `NodePool "default": spec.disruption.budgets[0].nodes: "ten%" is neither an
/// integer nor a percentage`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} \"{name}\": {field}: {message}")]
pub struct FieldError {
    /// Kind of the object, `NodePool` or `EC2NodeClass`.
    pub kind: &'static str,
    /// Name of the object (empty if it has none).
    pub name: String,
    /// Path of the field, e.g. `spec.template.spec.requirements[2].minValues`.
    pub field: String,
    /// What is wrong, for a person.
    pub message: String,
}

/// Accumulates the errors of one object.
struct Errors {
    kind: &'static str,
    name: String,
    list: Vec<FieldError>,
}

impl Errors {
    fn new(kind: &'static str, name: Option<&str>) -> Self {
        let mut errors = Self { kind, name: name.unwrap_or_default().to_owned(), list: Vec::new() };
        if name.is_none_or(str::is_empty) {
            errors.push("metadata.name", "is required");
        }
        errors
    }

    fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.list.push(FieldError {
            kind: self.kind,
            name: self.name.clone(),
            field: field.into(),
            message: message.into(),
        });
    }

    fn finish(self) -> Result<(), Vec<FieldError>> {
        if self.list.is_empty() {
            Ok(())
        } else {
            Err(self.list)
        }
    }
}

/// Karpenter's CRD patterns for durations: whole seconds, minutes and hours.
const SMH: &[char] = &['s', 'm', 'h'];

impl NodePool {
    /// Checks the NodePool against Karpenter v1's rules (plus Dovetail's: the node class must be
    /// an EC2NodeClass), returning every problem found.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errs = Errors::new("NodePool", self.metadata.name.as_deref());
        let spec = &self.spec;
        let template = &spec.template;

        for (key, value) in &template.metadata.labels {
            let field = format!("spec.template.metadata.labels[{key}]");
            if let Err(why) = labels::check_qualified_name(key) {
                errs.push(&field, why);
            } else if let Err(why) = labels::check_nodepool_key(key) {
                errs.push(&field, why);
            }
            if let Err(why) = labels::check_label_value(value) {
                errs.push(&field, why);
            }
        }
        for key in template.metadata.annotations.keys() {
            if let Err(why) = labels::check_qualified_name(key) {
                errs.push(format!("spec.template.metadata.annotations[{key}]"), why);
            }
        }

        let mut seen_taints = BTreeSet::new();
        for (list, taints) in [("taints", &template.spec.taints), ("startupTaints", &template.spec.startup_taints)] {
            for (i, taint) in taints.iter().enumerate() {
                validate_taint(&mut errs, &format!("spec.template.spec.{list}[{i}]"), taint);
                if !seen_taints.insert((taint.key.as_str(), taint.effect.as_str())) {
                    errs.push(
                        format!("spec.template.spec.{list}[{i}]"),
                        format!(
                            "duplicate taint {}:{} (key and effect must be unique across taints \
                             and startupTaints)",
                            taint.key, taint.effect
                        ),
                    );
                }
            }
        }

        let requirements = &template.spec.requirements;
        if requirements.len() > 100 {
            errs.push(
                "spec.template.spec.requirements",
                format!("has {} entries, at most 100 are allowed", requirements.len()),
            );
        }
        for (i, req) in requirements.iter().enumerate() {
            let field = format!("spec.template.spec.requirements[{i}]");
            if let Err(why) = labels::check_qualified_name(&req.key) {
                errs.push(format!("{field}.key"), why);
            } else if let Err(why) = labels::check_nodepool_key(&req.key) {
                errs.push(format!("{field}.key"), why);
            }
            if let Operator::Unknown(op) = &req.operator {
                errs.push(format!("{field}.operator"), format!("{op:?} is not one of {}", Operator::KNOWN.join(", ")));
            }
            for (j, value) in req.values.iter().enumerate() {
                if let Err(why) = labels::check_label_value(value) {
                    errs.push(format!("{field}.values[{j}]"), why);
                }
            }
            match req.operator {
                Operator::In if req.values.is_empty() => {
                    errs.push(format!("{field}.values"), "operator In needs at least one value");
                }
                Operator::Gt | Operator::Lt => {
                    let single_integer = req.values.len() == 1
                        && !req.values[0].is_empty()
                        && req.values[0].bytes().all(|b| b.is_ascii_digit());
                    if !single_integer {
                        errs.push(
                            format!("{field}.values"),
                            format!(
                                "operator {} needs exactly one non-negative integer value, got {:?}",
                                req.operator, req.values
                            ),
                        );
                    }
                }
                _ => {}
            }
            if let Some(min) = req.min_values {
                if !(1..=50).contains(&min) {
                    errs.push(format!("{field}.minValues"), format!("{min} is outside 1-50"));
                } else if req.operator == Operator::In && (req.values.len() as i64) < min {
                    errs.push(
                        format!("{field}.minValues"),
                        format!("{min} is more than the {} value(s) listed for operator In", req.values.len()),
                    );
                }
            }
        }

        let class = &template.spec.node_class_ref;
        for (field, value) in [("group", &class.group), ("kind", &class.kind), ("name", &class.name)] {
            if value.is_empty() {
                errs.push(format!("spec.template.spec.nodeClassRef.{field}"), "may not be empty");
            }
        }
        if class.group.contains('/') {
            errs.push(
                "spec.template.spec.nodeClassRef.group",
                format!("{:?} is an API group, not an apiVersion (no '/')", class.group),
            );
        } else if !class.kind.is_empty() && !class.is_ec2_node_class() {
            errs.push(
                "spec.template.spec.nodeClassRef",
                format!(
                    "{}/{} is not supported: Dovetail only knows kind EC2NodeClass in group \
                     dovetail.dev (or karpenter.k8s.aws, for converted Karpenter manifests)",
                    class.group, class.kind
                ),
            );
        }

        let expire = &template.spec.expire_after;
        if !(expire.is_never() || is_whole_unit_duration(expire.as_str(), SMH)) {
            errs.push(
                "spec.template.spec.expireAfter",
                format!(
                    "{:?} is not a duration in whole hours, minutes and seconds (e.g. 720h, \
                     1h30m) or Never",
                    expire.as_str()
                ),
            );
        }
        if let Some(grace) = &template.spec.termination_grace_period {
            if !is_whole_unit_duration(grace.as_str(), SMH) {
                errs.push(
                    "spec.template.spec.terminationGracePeriod",
                    format!("{:?} is not a duration in whole hours, minutes and seconds (e.g. 48h)", grace.as_str()),
                );
            }
        }

        let disruption = &spec.disruption;
        let after = &disruption.consolidate_after;
        if !(after.is_never() || is_whole_unit_duration(after.as_str(), SMH)) {
            errs.push(
                "spec.disruption.consolidateAfter",
                format!(
                    "{:?} is not a duration in whole hours, minutes and seconds (e.g. 30s, 5m) \
                     or Never",
                    after.as_str()
                ),
            );
        }
        if !disruption.consolidation_policy.is_known() {
            errs.push(
                "spec.disruption.consolidationPolicy",
                format!(
                    "{:?} is not one of WhenEmpty, WhenEmptyOrUnderutilized",
                    disruption.consolidation_policy.as_str()
                ),
            );
        }
        if disruption.budgets.len() > 50 {
            errs.push(
                "spec.disruption.budgets",
                format!("has {} entries, at most 50 are allowed", disruption.budgets.len()),
            );
        }
        for (i, budget) in disruption.budgets.iter().enumerate() {
            let field = format!("spec.disruption.budgets[{i}]");
            if let Err(why) = BudgetNodes::parse(&budget.nodes) {
                errs.push(format!("{field}.nodes"), why);
            }
            if let Some(schedule) = &budget.schedule {
                if let Err(why) = CronSchedule::parse(schedule) {
                    errs.push(format!("{field}.schedule"), why.to_string());
                }
            }
            if let Some(duration) = &budget.duration {
                if !is_budget_duration(duration.as_str()) {
                    errs.push(
                        format!("{field}.duration"),
                        format!(
                            "{:?} is not a duration in whole hours and minutes (e.g. 8h, 30m, \
                             1h30m)",
                            duration.as_str()
                        ),
                    );
                }
            }
            match (&budget.schedule, &budget.duration) {
                (Some(_), None) => errs.push(format!("{field}.duration"), "is required when schedule is set"),
                (None, Some(_)) => errs.push(format!("{field}.schedule"), "is required when duration is set"),
                _ => {}
            }
            for (j, reason) in budget.reasons.iter().flatten().enumerate() {
                if !reason.is_known() {
                    errs.push(
                        format!("{field}.reasons[{j}]"),
                        format!("{:?} is not one of Empty, Underutilized, Drifted", reason.as_str()),
                    );
                }
            }
        }

        for (resource, quantity) in &spec.limits {
            if !is_quantity(&quantity.0) {
                errs.push(
                    format!("spec.limits[{resource}]"),
                    format!("{:?} is not a quantity (e.g. 1000, 500m, 64Gi)", quantity.0),
                );
            }
        }

        if let Some(weight) = spec.weight {
            if !(1..=100).contains(&weight) {
                errs.push("spec.weight", format!("{weight} is outside 1-100"));
            }
        }

        errs.finish()
    }
}

fn validate_taint(errs: &mut Errors, field: &str, taint: &Taint) {
    if taint.key.is_empty() {
        errs.push(format!("{field}.key"), "may not be empty");
    } else if let Err(why) = labels::check_qualified_name(&taint.key) {
        errs.push(format!("{field}.key"), why);
    }
    if let Some(value) = taint.value.as_deref().filter(|v| !v.is_empty()) {
        // Karpenter holds taint values to the qualified-name grammar, not the label-value one.
        if let Err(why) = labels::check_qualified_name(value) {
            errs.push(format!("{field}.value"), why);
        }
    }
    if !taint.effect.is_known() {
        errs.push(
            format!("{field}.effect"),
            format!("{:?} is not one of NoSchedule, PreferNoSchedule, NoExecute", taint.effect.as_str()),
        );
    }
}

/// Budget durations: hours and/or minutes (cron has no seconds), optionally followed by the
/// `0s` Go appends when formatting.
fn is_budget_duration(value: &str) -> bool {
    let value = value.strip_suffix("0s").filter(|v| !v.is_empty()).unwrap_or(value);
    if !is_whole_unit_duration(value, &['h', 'm']) {
        return false;
    }
    // At most one `h` group followed by at most one `m` group.
    let units: Vec<char> = value.chars().filter(|c| c.is_ascii_alphabetic()).collect();
    matches!(units.as_slice(), ['h'] | ['m'] | ['h', 'm'])
}

/// Kubernetes quantity syntax: a signed decimal number with an optional binary (`Ki`..`Ei`),
/// decimal (`n`, `u`, `m`, `k`, `M`..`E`) or exponent (`e3`) suffix.
fn is_quantity(value: &str) -> bool {
    let rest = value.strip_prefix(['+', '-']).unwrap_or(value);
    let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_len);
    let digits = number.bytes().filter(u8::is_ascii_digit).count();
    if digits == 0 || number.matches('.').count() > 1 {
        return false;
    }
    match suffix {
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E" => true,
        exponent => {
            let Some(exp) = exponent.strip_prefix(['e', 'E']) else {
                return false;
            };
            let exp = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            !exp.is_empty() && exp.bytes().all(|b| b.is_ascii_digit())
        }
    }
}

/// A non-negative quantity or a percentage, as kubelet eviction thresholds take.
fn is_threshold(value: &str) -> bool {
    match value.strip_suffix('%') {
        Some(percent) => percent.parse::<f64>().is_ok_and(|p| (0.0..=100.0).contains(&p)),
        None => !value.starts_with('-') && is_quantity(value),
    }
}

const RESERVED_RESOURCES: &[&str] = &["cpu", "memory", "ephemeral-storage", "pid"];
const EVICTION_SIGNALS: &[&str] = &[
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
];

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

impl EC2NodeClass {
    /// Checks the EC2NodeClass against Karpenter v1's rules, returning every problem found.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errs = Errors::new("EC2NodeClass", self.metadata.name.as_deref());
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
                    format!("{:?} is not one of {}", kind.as_str(), super::VolumeType::KNOWN.join(", ")),
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

fn validate_kubelet(errs: &mut Errors, kubelet: &super::KubeletConfiguration) {
    for (name, reserved) in [("systemReserved", &kubelet.system_reserved), ("kubeReserved", &kubelet.kube_reserved)] {
        for (resource, value) in reserved {
            let field = format!("spec.kubelet.{name}[{resource}]");
            if !RESERVED_RESOURCES.contains(&resource.as_str()) {
                errs.push(&field, format!("{resource:?} is not one of {}", RESERVED_RESOURCES.join(", ")));
            }
            if value.starts_with('-') || !is_quantity(value) {
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
            if !is_threshold(value) {
                errs.push(&field, format!("{value:?} is neither a quantity nor a percentage"));
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

/// EBS sizes: a whole number of `Gi`, `G`, `Ti` or `T`, from 1 GiB to 64 TB.
fn check_volume_size(value: &str) -> Result<(), String> {
    let number_len = value.find(|c: char| !c.is_ascii_digit()).unwrap_or(value.len());
    let (number, unit) = value.split_at(number_len);
    let unit_bytes: u128 = match unit {
        "Gi" => 1 << 30,
        "G" => 1_000_000_000,
        "Ti" => 1 << 40,
        "T" => 1_000_000_000_000,
        _ => return Err(format!("{value:?} is not a whole number of Gi, G, Ti or T (e.g. 100Gi)")),
    };
    let bytes = number.parse::<u128>().ok().and_then(|n| n.checked_mul(unit_bytes));
    match bytes {
        Some(b) if (1 << 30..=64_000_000_000_000).contains(&b) => Ok(()),
        _ => Err(format!("{value:?} is outside 1Gi-64T")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        for ok in ["1000", "500m", "64Gi", "1.5", "+2k", "1e3", "0.5Ti", ".5"] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["", "Gi", "1.2.3", "10 Gi", "ten", "1e", "5GB"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }

    #[test]
    fn budget_durations() {
        for ok in ["8h", "30m", "1h30m", "10h0m0s", "5m0s"] {
            assert!(is_budget_duration(ok), "{ok}");
        }
        for bad in ["30s", "1m1h", "1h1h", "", "0s", "1.5h"] {
            assert!(!is_budget_duration(bad), "{bad}");
        }
    }

    #[test]
    fn volume_sizes() {
        assert!(check_volume_size("100Gi").is_ok());
        assert!(check_volume_size("1T").is_ok());
        assert!(check_volume_size("0Gi").is_err());
        assert!(check_volume_size("100GB").is_err());
        assert!(check_volume_size("65T").is_err());
    }

    #[test]
    fn display_names_object_and_field() {
        let err = FieldError {
            kind: "NodePool",
            name: "default".into(),
            field: "spec.disruption.budgets[0].nodes".into(),
            message: "\"ten%\" is neither an integer nor a percentage".into(),
        };
        assert_eq!(
            err.to_string(),
            "NodePool \"default\": spec.disruption.budgets[0].nodes: \"ten%\" is neither an \
             integer nor a percentage"
        );
    }
}
