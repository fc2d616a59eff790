//! The settings the decision core reads from the functions' environment ([`Settings`]); the
//! adapters' own variables are `dovetail_aws::Config`'s. Parsed here, outside the `aws` feature,
//! so they are tested without linking the SDK.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `DOVETAIL_NODE_REPAIR` | node repair for every NodePool (`true`), not only those annotated `dovetail.dev/node-repair: "true"` | `false` |
//! | `DOVETAIL_MIN_VALUES_POLICY` | what a pool's `minValues` means, as Karpenter's `--min-values-policy`: `Strict` (a claim that cannot keep it is not launched) or `BestEffort` (launched with the values there are) | `Strict` |
//! | `DOVETAIL_COST_LIMIT` | the cluster-wide limit on what all NodePools' capacity costs, in dollars per hour (`250`, `12.5`) | none |

use dovetail_core::reconcile::Settings;
use dovetail_core::requirements::MinValuesPolicy;

/// The variable that turns node repair on for every NodePool.
pub const NODE_REPAIR_VAR: &str = "DOVETAIL_NODE_REPAIR";
/// The variable that sets the cluster-wide cost limit. A setting of the stack, not an object in the
/// cluster: a spending cap belongs to whoever deploys and pays for the stack, and someone allowed to
/// edit NodePools should not be able to raise it.
pub const COST_LIMIT_VAR: &str = "DOVETAIL_COST_LIMIT";

/// The variable that makes `minValues` best effort.
pub const MIN_VALUES_POLICY_VAR: &str = "DOVETAIL_MIN_VALUES_POLICY";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}={value:?}: {expected}")]
pub struct SettingError {
    pub var: &'static str,
    pub value: String,
    pub expected: &'static str,
}

/// The reconciler's settings for `cluster` and `holder`, with what `get` (a variable lookup: the
/// process environment, or a map in tests) says. An unset or empty variable takes its default; a
/// value that is not one of the accepted ones is an error, so a typo stops the function at init
/// rather than leaving repair silently off.
pub fn from_lookup(
    cluster: &str,
    holder: &str,
    get: impl Fn(&str) -> Option<String>,
) -> Result<Settings, SettingError> {
    let mut settings = Settings::new(cluster, holder);
    if let Some(v) = get(NODE_REPAIR_VAR).filter(|v| !v.trim().is_empty()) {
        settings.node_repair = match v.trim() {
            "true" => true,
            "false" => false,
            _ => return Err(SettingError { var: NODE_REPAIR_VAR, value: v, expected: "true or false" }),
        };
    }
    if let Some(v) = get(MIN_VALUES_POLICY_VAR).filter(|v| !v.trim().is_empty()) {
        settings.min_values_policy = MinValuesPolicy::parse(v.trim()).ok_or(SettingError {
            var: MIN_VALUES_POLICY_VAR,
            value: v,
            expected: "Strict or BestEffort",
        })?;
    }
    if let Some(v) = get(COST_LIMIT_VAR).filter(|v| !v.trim().is_empty()) {
        let limit = dovetail_core::model::parse_cost(v.trim()).map_err(|_| SettingError {
            var: COST_LIMIT_VAR,
            value: v.clone(),
            expected: "a non-negative number of dollars per hour, e.g. 250 or 12.5",
        })?;
        settings.cost_limit = Some(limit);
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: Option<&str>) -> Result<Settings, SettingError> {
        from_lookup("prod", "sweeper", |k| if k == NODE_REPAIR_VAR { value.map(str::to_string) } else { None })
    }

    #[test]
    fn node_repair_is_off_unless_set_true() {
        assert!(!with(None).unwrap().node_repair);
        assert!(!with(Some("")).unwrap().node_repair);
        assert!(!with(Some("false")).unwrap().node_repair);
        let on = with(Some("true")).unwrap();
        assert!(on.node_repair);
        assert_eq!((on.cluster.as_str(), on.holder.as_str()), ("prod", "sweeper"));
        assert_eq!(with(Some("yes")).unwrap_err().to_string(), "DOVETAIL_NODE_REPAIR=\"yes\": true or false");
    }

    #[test]
    fn min_values_are_strict_unless_set_best_effort() {
        let policy = |value: Option<&str>| {
            from_lookup("prod", "provisioner", |k| {
                if k == MIN_VALUES_POLICY_VAR {
                    value.map(str::to_string)
                } else {
                    None
                }
            })
            .map(|s| s.min_values_policy)
        };
        assert_eq!(policy(None), Ok(MinValuesPolicy::Strict));
        assert_eq!(policy(Some(" ")), Ok(MinValuesPolicy::Strict));
        assert_eq!(policy(Some("Strict")), Ok(MinValuesPolicy::Strict));
        assert_eq!(policy(Some("BestEffort")), Ok(MinValuesPolicy::BestEffort));
        assert_eq!(
            policy(Some("besteffort")).unwrap_err().to_string(),
            "DOVETAIL_MIN_VALUES_POLICY=\"besteffort\": Strict or BestEffort"
        );
    }

    fn with_cost(value: Option<&str>) -> Result<Settings, SettingError> {
        from_lookup("prod", "sweeper", |k| if k == COST_LIMIT_VAR { value.map(str::to_string) } else { None })
    }

    #[test]
    fn the_cost_limit_is_dollars_per_hour_and_unset_by_default() {
        assert_eq!(with_cost(None).unwrap().cost_limit, None);
        assert_eq!(with_cost(Some(" ")).unwrap().cost_limit, None);
        assert_eq!(with_cost(Some("250")).unwrap().cost_limit, Some(250_000_000));
        assert_eq!(with_cost(Some("12.5")).unwrap().cost_limit, Some(12_500_000));
        for bad in ["-5", "$250", "lots"] {
            assert_eq!(
                with_cost(Some(bad)).unwrap_err().to_string(),
                format!("DOVETAIL_COST_LIMIT={bad:?}: a non-negative number of dollars per hour, e.g. 250 or 12.5")
            );
        }
    }
}
