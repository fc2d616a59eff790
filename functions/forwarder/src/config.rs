//! The forwarder's configuration, from environment variables (the Deployment sets them).
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `DOVETAIL_DOORBELL_QUEUE_URL` | SQS queue the doorbells go to | required |
//! | `DOVETAIL_WEBHOOK_CONFIGURATION` | name of the ValidatingWebhookConfiguration whose `caBundle` the forwarder sets | required |
//! | `DOVETAIL_SERVICE_NAME` | the forwarder's Service (the certificate's DNS names) | required |
//! | `DOVETAIL_SERVICE_NAMESPACE` | its namespace | required |
//! | `DOVETAIL_LISTEN_ADDRESS` | HTTPS listen address | `0.0.0.0:8443` |
//! | `DOVETAIL_CLUSTER_DOMAIN` | the cluster's DNS domain | `cluster.local` |
//! | `DOVETAIL_EXTRA_SANS` | more certificate names or IP addresses, comma-separated (a webhook reached by `url:`) | none |
//! | `DOVETAIL_ENDPOINT_URL` | SQS endpoint instead of AWS's (a local moto server in tests) | unset |
//! | `DOVETAIL_COALESCE` | how long doorbells are gathered before a send | `100ms` |
//! | `DOVETAIL_QUEUE_CAPACITY` | doorbells waiting to be sent at most; more are dropped and counted | `4096` |
//! | `RUST_LOG` | log filter | `info` |
//!
//! AWS credentials and region come from the SDK's default chains (`AWS_REGION`, IRSA, EKS Pod
//! Identity; see [`crate::sqs`]). Durations use the Kubernetes/Go form (`100ms`, `1s`).

use std::net::SocketAddr;
use std::time::Duration;

use dovetail_core::time::parse_duration;

/// A variable is missing or unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{0} is not set (see functions/forwarder/README.md)")]
    Missing(&'static str),
    #[error("{name}={value:?}: {reason}")]
    Invalid { name: &'static str, value: String, reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub queue_url: String,
    pub webhook_configuration: String,
    pub service_name: String,
    pub service_namespace: String,
    pub listen: SocketAddr,
    pub cluster_domain: String,
    pub extra_sans: Vec<String>,
    pub endpoint_url: Option<String>,
    pub coalesce: Duration,
    pub queue_capacity: usize,
}

impl Config {
    /// From the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|k| std::env::var(k).ok())
    }

    /// From any variable lookup (tests pass a map). Blank values count as unset.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let get = |k: &str| get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let required = |k: &'static str| get(k).ok_or(ConfigError::Missing(k));
        let invalid = |name, value: &str, reason: String| ConfigError::Invalid { name, value: value.into(), reason };

        let queue_url = required("DOVETAIL_DOORBELL_QUEUE_URL")?;
        if !(queue_url.starts_with("https://") || queue_url.starts_with("http://")) {
            let reason = "an SQS queue URL, https://sqs.<region>.amazonaws.com/<account>/<name>".into();
            return Err(invalid("DOVETAIL_DOORBELL_QUEUE_URL", &queue_url, reason));
        }
        let listen = match get("DOVETAIL_LISTEN_ADDRESS") {
            None => SocketAddr::from(([0, 0, 0, 0], 8443)),
            Some(v) => {
                v.parse().map_err(|e| invalid("DOVETAIL_LISTEN_ADDRESS", &v, format!("{e} (e.g. 0.0.0.0:8443)")))?
            }
        };
        let coalesce = match get("DOVETAIL_COALESCE") {
            None => Duration::from_millis(100),
            Some(v) => parse_duration(&v).map_err(|e| invalid("DOVETAIL_COALESCE", &v, e.to_string()))?,
        };
        if coalesce > Duration::from_secs(10) {
            let reason = "at most 10s: the provisioner's own batching window does the long wait".into();
            return Err(invalid("DOVETAIL_COALESCE", &format!("{coalesce:?}"), reason));
        }
        let queue_capacity = match get("DOVETAIL_QUEUE_CAPACITY") {
            None => 4096,
            Some(v) => match v.parse::<usize>() {
                Ok(n) if (1..=1_000_000).contains(&n) => n,
                _ => return Err(invalid("DOVETAIL_QUEUE_CAPACITY", &v, "a whole number from 1 to 1000000".into())),
            },
        };
        let extra_sans = get("DOVETAIL_EXTRA_SANS")
            .map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect())
            .unwrap_or_default();
        Ok(Config {
            queue_url,
            webhook_configuration: required("DOVETAIL_WEBHOOK_CONFIGURATION")?,
            service_name: required("DOVETAIL_SERVICE_NAME")?,
            service_namespace: required("DOVETAIL_SERVICE_NAMESPACE")?,
            listen,
            cluster_domain: get("DOVETAIL_CLUSTER_DOMAIN").unwrap_or_else(|| "cluster.local".into()),
            extra_sans,
            endpoint_url: get("DOVETAIL_ENDPOINT_URL"),
            coalesce,
            queue_capacity,
        })
    }

    /// The serving certificate's names: the Service's, then the extra ones.
    pub fn sans(&self) -> Vec<String> {
        let mut sans = crate::tls::service_names(&self.service_name, &self.service_namespace, &self.cluster_domain);
        sans.extend(self.extra_sans.iter().cloned());
        sans
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    const QUEUE: &str = "https://sqs.us-east-1.amazonaws.com/123456789012/dovetail-doorbells";

    fn from(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_lookup(|k| vars.get(k).cloned())
    }

    fn minimal() -> Vec<(&'static str, &'static str)> {
        vec![
            ("DOVETAIL_DOORBELL_QUEUE_URL", QUEUE),
            ("DOVETAIL_WEBHOOK_CONFIGURATION", "dovetail-forwarder"),
            ("DOVETAIL_SERVICE_NAME", "dovetail-forwarder"),
            ("DOVETAIL_SERVICE_NAMESPACE", "dovetail"),
        ]
    }

    #[test]
    fn defaults() {
        let config = from(&minimal()).unwrap();
        assert_eq!(config.listen, "0.0.0.0:8443".parse().unwrap());
        assert_eq!(config.coalesce, Duration::from_millis(100));
        assert_eq!(config.queue_capacity, 4096);
        assert_eq!(config.endpoint_url, None);
        assert_eq!(config.sans()[2], "dovetail-forwarder.dovetail.svc");
    }

    #[test]
    fn every_variable() {
        let mut vars = minimal();
        vars.extend([
            ("DOVETAIL_LISTEN_ADDRESS", "127.0.0.1:9443"),
            ("DOVETAIL_CLUSTER_DOMAIN", "corp.example"),
            ("DOVETAIL_EXTRA_SANS", " 127.0.0.1, forwarder.example.com ,"),
            ("DOVETAIL_ENDPOINT_URL", "http://127.0.0.1:5000"),
            ("DOVETAIL_COALESCE", "250ms"),
            ("DOVETAIL_QUEUE_CAPACITY", "100"),
        ]);
        let config = from(&vars).unwrap();
        assert_eq!(config.listen, "127.0.0.1:9443".parse().unwrap());
        assert_eq!(config.extra_sans, ["127.0.0.1", "forwarder.example.com"]);
        assert_eq!(config.sans().len(), 6);
        assert_eq!(config.sans()[3], "dovetail-forwarder.dovetail.svc.corp.example");
        assert_eq!(config.endpoint_url.as_deref(), Some("http://127.0.0.1:5000"));
        assert_eq!(config.coalesce, Duration::from_millis(250));
        assert_eq!(config.queue_capacity, 100);
    }

    #[test]
    fn errors_name_the_variable() {
        for missing in minimal().iter().map(|(k, _)| *k) {
            let vars: Vec<_> = minimal().into_iter().filter(|(k, _)| *k != missing).collect();
            let error = from(&vars).unwrap_err();
            assert_eq!(error, ConfigError::Missing(missing));
            assert!(error.to_string().contains(missing));
        }
        for (name, value) in [
            ("DOVETAIL_LISTEN_ADDRESS", "8443"),
            ("DOVETAIL_COALESCE", "soon"),
            ("DOVETAIL_COALESCE", "1m"),
            ("DOVETAIL_QUEUE_CAPACITY", "0"),
            ("DOVETAIL_DOORBELL_QUEUE_URL", "dovetail-doorbells"),
        ] {
            let mut vars = minimal();
            vars.retain(|(k, _)| *k != name);
            vars.push((name, value));
            let error = from(&vars).unwrap_err().to_string();
            assert!(error.starts_with(name), "{error}");
        }
    }
}
