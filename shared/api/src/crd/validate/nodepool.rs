//! NodePool validation: requirements, labels and taints, disruption budgets, limits.

use std::collections::BTreeSet;

use dovetail_core::model::{parse_cost, LIMIT_COST, LIMIT_NODES};
use dovetail_core::resources::parse_milli;

use super::{Errors, FieldError};
use crate::crd::duration::is_whole_unit_duration;
use crate::crd::labels;
use crate::crd::nodepool::{BudgetNodes, ConsolidationPolicy, Operator, Taint};
use crate::crd::refused;
use crate::crd::schedule::CronSchedule;
use crate::crd::NodePool;

/// Karpenter's CRD patterns for durations: whole seconds, minutes and hours.
const SMH: &[char] = &['s', 'm', 'h'];

impl NodePool {
    /// Checks the NodePool against Karpenter v1's rules (plus Dovetail's: the node class must be
    /// an EC2NodeClass), returning every problem found.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errs = Errors::new("NodePool", &self.metadata);
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
                Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => {
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
            let field = "spec.disruption.consolidationPolicy";
            let policy = disruption.consolidation_policy.as_str();
            let mut message = format!("{policy:?} is not one of {}", ConsolidationPolicy::KNOWN.join(", "));
            if let Some(why) = refused::refused_value("NodePool", field, policy) {
                message = format!("{message}: {why}");
            }
            errs.push(field, message);
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
            if parse_milli(&quantity.0).is_err() {
                errs.push(
                    format!("spec.limits[{resource}]"),
                    format!("{:?} is not a quantity (e.g. 1000, 500m, 64Gi)", quantity.0),
                );
            } else if resource == LIMIT_COST && parse_cost(&quantity.0).is_err() {
                errs.push(
                    format!("spec.limits[{resource}]"),
                    format!("{:?} is not a non-negative number of dollars per hour (e.g. \"12.5\")", quantity.0),
                );
            } else if resource == LIMIT_NODES && !is_node_count(&quantity.0) {
                // A fraction of a node, or fewer than none, cannot be launched or counted: rounding
                // it (as other limits are) would silently change what the user asked for.
                errs.push(
                    format!("spec.limits[{resource}]"),
                    format!("{:?} is not a whole, non-negative number of nodes", quantity.0),
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
/// Whether a quantity is a whole number of nodes, zero or more (`3`, `1k`; not `2.5`, `500m`, `-1`).
fn is_node_count(value: &str) -> bool {
    parse_milli(value).is_ok_and(|m| m >= 0 && m % 1000 == 0)
}

pub(super) fn is_budget_duration(value: &str) -> bool {
    let value = value.strip_suffix("0s").filter(|v| !v.is_empty()).unwrap_or(value);
    if !is_whole_unit_duration(value, &['h', 'm']) {
        return false;
    }
    // At most one `h` group followed by at most one `m` group.
    let units: Vec<char> = value.chars().filter(|c| c.is_ascii_alphabetic()).collect();
    matches!(units.as_slice(), ['h'] | ['m'] | ['h', 'm'])
}
