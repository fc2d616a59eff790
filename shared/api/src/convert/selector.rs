//! Label selectors and node selector terms, shared by pods, volumes and storage classes.

use std::collections::BTreeSet;

use dovetail_core::labels;
use dovetail_core::model::{LabelSelector, SelectorExpr, SelectorOp};
use dovetail_core::requirements::{Operator, Requirement, Requirements};
use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use super::{ConvertError, Within};

/// Key of the expression in a selector that matches no object. Kubernetes gives a *missing*
/// `labelSelector` on a spread constraint or affinity term that meaning (the term selects no
/// pods), and the core's [`LabelSelector`] spells it as `key In []`.
pub const MATCHES_NOTHING_KEY: &str = "dovetail.dev/no-label-selector";

pub(crate) fn matches_nothing() -> LabelSelector {
    LabelSelector {
        match_labels: Default::default(),
        match_expressions: vec![SelectorExpr {
            key: MATCHES_NOTHING_KEY.to_string(),
            op: SelectorOp::In,
            values: BTreeSet::new(),
        }],
    }
}

/// A `metav1.LabelSelector` (matchLabels ∧ matchExpressions). Paths are relative to the selector.
pub fn label_selector(sel: &meta::LabelSelector) -> Result<LabelSelector, ConvertError> {
    let mut out =
        LabelSelector { match_labels: sel.match_labels.clone().unwrap_or_default(), match_expressions: vec![] };
    for (i, e) in sel.match_expressions.iter().flatten().enumerate() {
        let path = || format!("matchExpressions[{i}]");
        let op = match e.operator.as_str() {
            "In" => SelectorOp::In,
            "NotIn" => SelectorOp::NotIn,
            "Exists" => SelectorOp::Exists,
            "DoesNotExist" => SelectorOp::DoesNotExist,
            other => {
                return Err(ConvertError::unknown(
                    format!("{}.operator", path()),
                    "label selector operator",
                    other,
                    "In, NotIn, Exists, DoesNotExist",
                ))
            }
        };
        let values: BTreeSet<String> = e.values.iter().flatten().cloned().collect();
        // The API server rejects these shapes; an `In []` would silently match nothing.
        match op {
            SelectorOp::In | SelectorOp::NotIn if values.is_empty() => {
                return Err(ConvertError::invalid(
                    format!("{}.values", path()),
                    format!("operator {} needs at least one value", e.operator),
                ))
            }
            SelectorOp::Exists | SelectorOp::DoesNotExist if !values.is_empty() => {
                return Err(ConvertError::invalid(
                    format!("{}.values", path()),
                    format!("operator {} takes no values", e.operator),
                ))
            }
            _ => {}
        }
        out.match_expressions.push(SelectorExpr { key: e.key.clone(), op, values });
    }
    Ok(out)
}

/// Whether the selector is `{}`, which selects everything (for `namespaceSelector`: all namespaces).
pub(crate) fn is_empty_selector(sel: &meta::LabelSelector) -> bool {
    sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && sel.match_expressions.as_ref().is_none_or(|m| m.is_empty())
}

/// One `NodeSelectorRequirement` from `matchExpressions`.
pub(crate) fn node_selector_requirement(r: &NodeSelectorRequirement) -> Result<Requirement, ConvertError> {
    let op = Operator::parse(&r.operator).ok_or_else(|| {
        ConvertError::unknown(
            "operator",
            "node selector operator",
            &r.operator,
            "In, NotIn, Exists, DoesNotExist, Gt, Lt",
        )
    })?;
    let values: &[String] = r.values.as_deref().unwrap_or_default();
    Requirement::new(&r.key, op, values).map_err(|e| ConvertError::new("", e))
}

/// One `NodeSelectorRequirement` from `matchFields`. `metadata.name` is the only field
/// kube-scheduler supports; it becomes a requirement on the hostname label, which EKS sets to
/// the node name.
fn node_field_requirement(r: &NodeSelectorRequirement) -> Result<Requirement, ConvertError> {
    if r.key != "metadata.name" {
        return Err(ConvertError::invalid(
            "key",
            format!("{:?} is not a supported field selector (only metadata.name is)", r.key),
        ));
    }
    let op = match r.operator.as_str() {
        "In" => Operator::In,
        "NotIn" => Operator::NotIn,
        other => return Err(ConvertError::unknown("operator", "field selector operator", other, "In, NotIn")),
    };
    let values: &[String] = r.values.as_deref().unwrap_or_default();
    Requirement::new(labels::HOSTNAME, op, values).map_err(|e| ConvertError::new("", e))
}

/// A `NodeSelectorTerm`: its matchExpressions and matchFields, ANDed. Paths are relative to the
/// term (`matchExpressions[1].operator`).
pub fn node_selector_term(term: &NodeSelectorTerm) -> Result<Requirements, ConvertError> {
    let mut out = Requirements::new();
    for (i, r) in term.match_expressions.iter().flatten().enumerate() {
        out.add(node_selector_requirement(r).within(|| format!("matchExpressions[{i}]"))?);
    }
    for (i, r) in term.match_fields.iter().flatten().enumerate() {
        out.add(node_field_requirement(r).within(|| format!("matchFields[{i}]"))?);
    }
    Ok(out)
}

/// Whether a term has neither matchExpressions nor matchFields; Kubernetes says such a required
/// term matches no node and such a preferred term is a no-op.
pub(crate) fn is_empty_term(term: &NodeSelectorTerm) -> bool {
    term.match_expressions.as_ref().is_none_or(|m| m.is_empty())
        && term.match_fields.as_ref().is_none_or(|m| m.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn term_with_fields_targets_hostname() {
        let term = NodeSelectorTerm {
            match_expressions: Some(vec![req(labels::ZONE, "In", &["us-east-1a", "us-east-1b"])]),
            match_fields: Some(vec![req("metadata.name", "In", &["ip-10-0-1-7.ec2.internal"])]),
        };
        let r = node_selector_term(&term).unwrap();
        assert!(r.get(labels::HOSTNAME).unwrap().has("ip-10-0-1-7.ec2.internal"));
        assert!(r.get(labels::ZONE).unwrap().has("us-east-1b"));
    }

    #[test]
    fn bad_operator_names_the_field() {
        let term = NodeSelectorTerm {
            match_expressions: Some(vec![req("a", "In", &["x"]), req("b", "Like", &["y"])]),
            match_fields: None,
        };
        let e = node_selector_term(&term).unwrap_err();
        assert_eq!(e.path, "matchExpressions[1].operator");
        assert!(e.to_string().contains("\"Like\" is not a valid node selector operator"), "{e}");
        let gt = NodeSelectorTerm { match_expressions: Some(vec![req("cpu", "Gt", &["four"])]), match_fields: None };
        let e = node_selector_term(&gt).unwrap_err();
        assert_eq!(e.path, "matchExpressions[0]");
    }

    #[test]
    fn label_selector_semantics() {
        let sel = meta::LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
            match_expressions: Some(vec![meta::LabelSelectorRequirement {
                key: "tier".into(),
                operator: "NotIn".into(),
                values: Some(vec!["db".into()]),
            }]),
        };
        let s = label_selector(&sel).unwrap();
        let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
        assert!(s.matches(&labels));
        assert!(!matches_nothing().matches(&labels));
        assert!(!matches_nothing().matches(&BTreeMap::new()));
    }
}
