//! The adapters' configuration, read from environment variables at the binary edge (a Lambda's
//! `main`, the CLI); everything below takes a [`Config`] value, so tests build one directly.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `DOVETAIL_CLUSTER_NAME` | EKS cluster name: tags (`dovetail.dev/cluster`), DynamoDB partition, user data, token | required |
//! | `DOVETAIL_TABLE_NAME` | DynamoDB table of NodeClaims, leases and unavailable offerings | required |
//! | `DOVETAIL_RESUME_QUEUE_URL` | SQS queue for delayed "resume this claim" messages (drains) | required |
//! | `AWS_REGION` | region of every client but Pricing (Lambda sets it) | the SDK's default chain |
//! | `DOVETAIL_PRICING_REGION` | region of the Pricing API endpoint | `us-east-1` |
//! | `DOVETAIL_SSM_PREFIX` | prepended to `/aws/service/eks/optimized-ami/...` when resolving AMI aliases (tests write parameters under e.g. `/test`, as `/aws/` is reserved) | empty |
//! | `DOVETAIL_ENDPOINT_URL` | one endpoint for every AWS client (a local moto server in tests) | unset: AWS's endpoints |
//! | `DOVETAIL_TERMINATED_TTL` | how long Terminated NodeClaim records stay before DynamoDB's TTL removes them | `168h` |
//! | `DOVETAIL_CATALOG_TTL` | how long instance types and offerings are cached | `5m` |
//! | `DOVETAIL_PRICE_TTL` | how long on-demand and spot prices are cached | `12h` |
//!
//! Durations use the Kubernetes/Go form (`90s`, `5m`, `12h`, `1h30m`).

use std::time::Duration;

use dovetail_core::time::parse_duration;

use crate::error::AwsError;

/// Settings shared by the adapters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub cluster_name: String,
    pub table_name: String,
    pub resume_queue_url: String,
    /// `None`: the SDK's default region chain.
    pub region: Option<String>,
    pub pricing_region: String,
    /// Prefix of the EKS-optimized AMI parameters (empty in AWS).
    pub ssm_prefix: String,
    pub endpoint_url: Option<String>,
    pub terminated_ttl: Duration,
    pub catalog_ttl: Duration,
    pub price_ttl: Duration,
}

impl Config {
    /// Defaults for everything but the cluster, table and queue.
    pub fn new(cluster_name: &str, table_name: &str, resume_queue_url: &str) -> Config {
        Config {
            cluster_name: cluster_name.to_string(),
            table_name: table_name.to_string(),
            resume_queue_url: resume_queue_url.to_string(),
            region: None,
            pricing_region: "us-east-1".to_string(),
            ssm_prefix: String::new(),
            endpoint_url: None,
            terminated_ttl: Duration::from_secs(7 * 24 * 3600),
            catalog_ttl: Duration::from_secs(5 * 60),
            price_ttl: Duration::from_secs(12 * 3600),
        }
    }

    /// From the process environment (see the module documentation).
    pub fn from_env() -> Result<Config, AwsError> {
        Config::from_lookup(|k| std::env::var(k).ok())
    }

    /// From any variable lookup (tests pass a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, AwsError> {
        let get = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let required = |k: &str| get(k).ok_or_else(|| AwsError::Config(format!("{k} is not set")));
        let duration = |k: &str, default: Duration| match get(k) {
            None => Ok(default),
            Some(v) => parse_duration(&v).map_err(|e| AwsError::Config(format!("{k}={v:?}: {e}"))),
        };
        let defaults = Config::new(
            &required("DOVETAIL_CLUSTER_NAME")?,
            &required("DOVETAIL_TABLE_NAME")?,
            &required("DOVETAIL_RESUME_QUEUE_URL")?,
        );
        let ssm_prefix = get("DOVETAIL_SSM_PREFIX").unwrap_or_default();
        if !ssm_prefix.is_empty() && (!ssm_prefix.starts_with('/') || ssm_prefix.ends_with('/')) {
            return Err(AwsError::Config(format!(
                "DOVETAIL_SSM_PREFIX={ssm_prefix:?} must start with '/' and not end with one (e.g. /test)"
            )));
        }
        Ok(Config {
            region: get("AWS_REGION"),
            pricing_region: get("DOVETAIL_PRICING_REGION").unwrap_or(defaults.pricing_region.clone()),
            ssm_prefix,
            endpoint_url: get("DOVETAIL_ENDPOINT_URL"),
            terminated_ttl: duration("DOVETAIL_TERMINATED_TTL", defaults.terminated_ttl)?,
            catalog_ttl: duration("DOVETAIL_CATALOG_TTL", defaults.catalog_ttl)?,
            price_ttl: duration("DOVETAIL_PRICE_TTL", defaults.price_ttl)?,
            ..defaults
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn required_variables_are_named_when_missing() {
        let e = Config::from_lookup(lookup(&[("DOVETAIL_CLUSTER_NAME", "c")])).unwrap_err();
        assert_eq!(e, AwsError::Config("DOVETAIL_TABLE_NAME is not set".into()));
    }

    #[test]
    fn defaults_and_overrides() {
        let base = [
            ("DOVETAIL_CLUSTER_NAME", "prod"),
            ("DOVETAIL_TABLE_NAME", "dovetail"),
            ("DOVETAIL_RESUME_QUEUE_URL", "https://sqs/q"),
        ];
        let c = Config::from_lookup(lookup(&base)).unwrap();
        assert_eq!(c, Config::new("prod", "dovetail", "https://sqs/q"));

        let mut more = base.to_vec();
        more.extend([
            ("AWS_REGION", "eu-west-1"),
            ("DOVETAIL_SSM_PREFIX", "/test"),
            ("DOVETAIL_ENDPOINT_URL", "http://127.0.0.1:5000"),
            ("DOVETAIL_CATALOG_TTL", "30s"),
            ("DOVETAIL_TERMINATED_TTL", "24h"),
        ]);
        let c = Config::from_lookup(lookup(&more)).unwrap();
        assert_eq!(c.region.as_deref(), Some("eu-west-1"));
        assert_eq!(c.ssm_prefix, "/test");
        assert_eq!(c.endpoint_url.as_deref(), Some("http://127.0.0.1:5000"));
        assert_eq!(c.catalog_ttl, Duration::from_secs(30));
        assert_eq!(c.terminated_ttl, Duration::from_secs(86_400));
        assert_eq!(c.price_ttl, Duration::from_secs(12 * 3600));

        let mut bad = base.to_vec();
        bad.push(("DOVETAIL_SSM_PREFIX", "test/"));
        assert!(Config::from_lookup(lookup(&bad)).is_err());
        let mut bad = base.to_vec();
        bad.push(("DOVETAIL_PRICE_TTL", "soon"));
        assert!(Config::from_lookup(lookup(&bad)).unwrap_err().to_string().contains("DOVETAIL_PRICE_TTL"));
    }
}
