//! NodeOverlay validation and conversion: Karpenter v1alpha1's schema and runtime rules, plus
//! Dovetail's one restriction (requirements select on what an offering carries, not on a pool).

use dovetail_core::labels as core_labels;
use dovetail_core::overlay::{self, PriceChange};
use dovetail_core::requirements::{Operator as CoreOperator, Requirement, Requirements};
use dovetail_core::resources::{parse_units, CPU, EPHEMERAL_STORAGE, MEMORY, PODS};

use super::{Errors, FieldError};
use crate::crd::labels;
use crate::crd::to_core::core_operator;
use crate::crd::NodeOverlay;

/// Resources the node's own figures give; an overlay may only add extended ones.
const STANDARD_RESOURCES: [&str; 4] = [CPU, MEMORY, EPHEMERAL_STORAGE, PODS];

impl NodeOverlay {
    /// Checks the overlay against Karpenter's rules, returning every problem found.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        self.checked().map(|_| ())
    }

    /// The overlay as the decision core applies it, or every problem with it (each naming the
    /// field), so a caller can leave this overlay out and apply the others.
    pub fn to_core(&self) -> Result<overlay::NodeOverlay, Vec<FieldError>> {
        self.checked()
    }

    fn checked(&self) -> Result<overlay::NodeOverlay, Vec<FieldError>> {
        let mut errs = Errors::new("NodeOverlay", &self.metadata);
        let spec = &self.spec;
        if spec.requirements.len() > 100 {
            errs.push("spec.requirements", format!("has {} entries, at most 100 are allowed", spec.requirements.len()));
        }
        let mut requirements = Requirements::new();
        for (i, req) in spec.requirements.iter().enumerate() {
            let field = format!("spec.requirements[{i}]");
            if let Err(why) = labels::check_qualified_name(&req.key) {
                errs.push(format!("{field}.key"), why);
            } else if let Err(why) = selectable(&req.key) {
                errs.push(format!("{field}.key"), why);
            }
            for (j, value) in req.values.iter().enumerate() {
                if let Err(why) = labels::check_label_value(value) {
                    errs.push(format!("{field}.values[{j}]"), why);
                }
            }
            // The same conversion as a pool's requirements (Gte and Lte included).
            let (op, values) = match core_operator(&req.operator, &req.values) {
                Ok(converted) => converted,
                Err(why) => {
                    errs.push(format!("{field}.operator"), why);
                    continue;
                }
            };
            if op == CoreOperator::NotIn && values.is_empty() {
                errs.push(format!("{field}.values"), "operator NotIn needs at least one value");
                continue;
            }
            match Requirement::new(&req.key, op, &values) {
                Ok(r) => requirements.add(r),
                Err(e) => errs.push(format!("{field}.values"), e.to_string()),
            }
        }
        let price = match (&spec.price, &spec.price_adjustment) {
            (Some(_), Some(_)) => {
                errs.push("spec", "cannot set both 'price' and 'priceAdjustment'");
                None
            }
            (Some(p), None) => PriceChange::parse_price(p).map_err(|e| errs.push("spec.price", e.to_string())).ok(),
            (None, Some(a)) => {
                PriceChange::parse_adjustment(a).map_err(|e| errs.push("spec.priceAdjustment", e.to_string())).ok()
            }
            (None, None) => None,
        };
        let mut capacity = Vec::new();
        for (name, q) in &spec.capacity {
            let field = format!("spec.capacity.{name}");
            if STANDARD_RESOURCES.contains(&name.as_str()) {
                errs.push(field, format!("{name} cannot be overlaid: only extended resources may be added"));
                continue;
            }
            if let Err(why) = labels::check_qualified_name(name) {
                errs.push(field, why);
                continue;
            }
            match parse_units(&q.0) {
                Ok(n) if n >= 0 => capacity.push((name.clone(), n)),
                Ok(_) => errs.push(field, format!("{:?} is negative", q.0)),
                Err(e) => errs.push(field, e.to_string()),
            }
        }
        if let Some(w) = spec.weight {
            if !(1..=10000).contains(&w) {
                errs.push("spec.weight", format!("{w} is outside 1-10000"));
            }
        }
        let name = errs.name.clone();
        errs.finish()?;
        Ok(overlay::NodeOverlay { name, requirements, weight: spec.weight.unwrap_or(0), price, capacity })
    }
}

/// Whether an overlay may select on `key`. Karpenter evaluates overlays per NodePool, so there a
/// requirement may name the pool or a label of its template; Dovetail applies overlays to the
/// one catalog every pool shares, where such a requirement could never match: refuse it rather
/// than let the overlay silently select nothing.
fn selectable(key: &str) -> Result<(), String> {
    let normalized = core_labels::normalize_key(key);
    if normalized == core_labels::NODEPOOL {
        return Err(format!(
            "{key:?} cannot be selected on: Dovetail applies overlays to the instance-type catalog all \
             NodePools share, so an overlay selects on instance-type and offering labels only"
        ));
    }
    if !core_labels::is_well_known(normalized) {
        return Err(format!(
            "{key:?} is not a well-known instance-type or offering label (such as {}, {}, {} or {}): \
             Dovetail applies overlays to the catalog all NodePools share, not to a pool's labels",
            core_labels::INSTANCE_FAMILY,
            core_labels::INSTANCE_TYPE,
            core_labels::CAPACITY_TYPE,
            core_labels::ZONE
        ));
    }
    Ok(())
}
