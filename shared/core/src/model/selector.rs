//! Label selectors (`matchLabels` + `matchExpressions`) as pods, spreads and affinities use them.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SelectorOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SelectorExpr {
    pub key: String,
    pub op: SelectorOp,
    pub values: BTreeSet<String>,
}

/// A Kubernetes LabelSelector. The empty selector matches every object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LabelSelector {
    pub match_labels: BTreeMap<String, String>,
    pub match_expressions: Vec<SelectorExpr>,
}

impl LabelSelector {
    pub fn from_labels(labels: &[(&str, &str)]) -> Self {
        LabelSelector {
            match_labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            match_expressions: vec![],
        }
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|e| match (e.op, labels.get(&e.key)) {
                (SelectorOp::In, Some(v)) => e.values.contains(v),
                (SelectorOp::In, None) => false,
                (SelectorOp::NotIn, Some(v)) => !e.values.contains(v),
                (SelectorOp::NotIn, None) => true,
                (SelectorOp::Exists, v) => v.is_some(),
                (SelectorOp::DoesNotExist, v) => v.is_none(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_semantics() {
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        assert!(LabelSelector::default().matches(&labels));
        assert!(LabelSelector::from_labels(&[("app", "web")]).matches(&labels));
        assert!(!LabelSelector::from_labels(&[("app", "db")]).matches(&labels));
        let expr = |op, vals: &[&str]| LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: vec![SelectorExpr {
                key: "tier".into(),
                op,
                values: vals.iter().map(|s| s.to_string()).collect(),
            }],
        };
        assert!(expr(SelectorOp::NotIn, &["x"]).matches(&labels));
        assert!(!expr(SelectorOp::In, &["x"]).matches(&labels));
        assert!(expr(SelectorOp::DoesNotExist, &[]).matches(&labels));
        assert!(!expr(SelectorOp::Exists, &[]).matches(&labels));
    }
}
