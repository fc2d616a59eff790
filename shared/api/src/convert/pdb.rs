//! PodDisruptionBudget → core [`Pdb`]: which pods it covers and how many evictions it allows now.

use dovetail_core::model::Pdb;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::pod::DEFAULT_NAMESPACE;
use super::selector::{label_selector, matches_nothing};
use super::{ConvertError, Within};
use crate::crd::meta::NameRule;

/// Converts a PDB as the Eviction API judges it.
///
/// * A missing `spec.selector` selects no pod in `policy/v1` (an empty one, `{}`, selects every
///   pod of the namespace).
/// * `disruptions_allowed` is `status.disruptionsAllowed`, except that a budget whose status the
///   disruption controller has not caught up with (`status.observedGeneration <
///   metadata.generation`, or no status yet) allows nothing: the API server refuses such
///   evictions with 429 ("still being processed"), and planning as if it allowed more would
///   promise drains that cannot happen.
pub fn pdb_from_k8s(pdb: &PodDisruptionBudget) -> Result<Pdb, ConvertError> {
    let name = pdb.metadata.name.clone().filter(|n| !n.is_empty());
    let name = name.ok_or_else(|| ConvertError::invalid("metadata.name", "missing"))?;
    super::metadata(&pdb.metadata, NameRule::Subdomain)?;
    let namespace =
        pdb.metadata.namespace.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| DEFAULT_NAMESPACE.into());
    let selector = match pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        Some(s) => label_selector(s).within(|| "spec.selector".into())?,
        None => matches_nothing(),
    };
    let status = pdb.status.as_ref();
    let generation = pdb.metadata.generation.unwrap_or(0);
    let observed = status.and_then(|s| s.observed_generation).unwrap_or(0);
    let disruptions_allowed = match status {
        Some(s) if observed >= generation => s.disruptions_allowed.max(0),
        _ => 0,
    };
    Ok(Pdb { namespace, name, selector, disruptions_allowed })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn parse(yaml: &str) -> PodDisruptionBudget {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn selector_and_allowed_disruptions() {
        let p = pdb_from_k8s(&parse(
            r#"
metadata: {name: pg, namespace: shop, generation: 2}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: pg}, matchExpressions: [{key: tier, operator: In, values: [db]}]}
status: {observedGeneration: 2, disruptionsAllowed: 1, currentHealthy: 2, desiredHealthy: 1, expectedPods: 2}
"#,
        ))
        .unwrap();
        assert_eq!((p.namespace.as_str(), p.name.as_str(), p.disruptions_allowed), ("shop", "pg", 1));
        assert!(p.selector.matches(&labels(&[("app", "pg"), ("tier", "db")])));
        assert!(!p.selector.matches(&labels(&[("app", "pg")])));
    }

    #[test]
    fn stale_or_missing_status_allows_nothing() {
        let stale = "metadata: {name: a, generation: 3}\nspec: {selector: {}}\nstatus: {observedGeneration: 2, disruptionsAllowed: 4, currentHealthy: 4, desiredHealthy: 0, expectedPods: 4}\n";
        assert_eq!(pdb_from_k8s(&parse(stale)).unwrap().disruptions_allowed, 0);
        let fresh = pdb_from_k8s(&parse("metadata: {name: a, generation: 1}\nspec: {selector: {}}\n")).unwrap();
        assert_eq!(fresh.disruptions_allowed, 0);
        assert_eq!(fresh.namespace, "default");
        assert!(fresh.selector.matches(&labels(&[("any", "pod")])), "{{}} selects every pod");
    }

    #[test]
    fn no_selector_selects_nothing_and_bad_selectors_are_reported() {
        let none = pdb_from_k8s(&parse("metadata: {name: a}\nspec: {maxUnavailable: 1}\n")).unwrap();
        assert!(!none.selector.matches(&labels(&[])));
        let e = pdb_from_k8s(&parse(
            "metadata: {name: a}\nspec: {selector: {matchExpressions: [{key: app, operator: Near, values: [x]}]}}\n",
        ))
        .unwrap_err();
        assert!(e.to_string().starts_with("spec.selector.matchExpressions[0].operator: \"Near\""), "{e}");
    }
}
