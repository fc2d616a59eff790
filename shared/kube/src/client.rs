//! The Kubernetes client the functions use against EKS, and the settings any client given to the
//! adapter should have.

use std::time::Duration;

use kube::{Client, Config};
use secrecy::SecretString;

/// How long a request may take before it fails as `Unavailable` (the message is retried). Reads of
/// big clusters are paginated, so no single page comes near it.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// The API server is in the same region; a slow connect means it is unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cluster endpoint {endpoint:?} is not a URL: {source}")]
    Endpoint {
        endpoint: String,
        #[source]
        source: http::uri::InvalidUri,
    },
    #[error("cluster CA: {0}")]
    CaPem(#[from] pem::PemError),
    #[error("cluster CA: no certificate in the PEM data")]
    NoCertificate,
    #[error("building the client: {0}")]
    Client(#[from] kube::Error),
}

/// Settings every adapter client needs, whatever built its config:
///
/// * kube-rs's default retry layer off: it retries 429 up to 15 times with backoff reaching
///   minutes, and an Eviction API 429 ("a PodDisruptionBudget blocks") must come back at once as
///   `Refused` — the drain has its own backoff (100 ms → 10 s) across invocations; a throttled
///   read is retried by the queue;
/// * request and connect timeouts, so a hung API server fails the call (`Unavailable`) instead of
///   the Lambda running into its own timeout.
pub fn adapter_settings(mut config: Config) -> Config {
    config.default_retry = false;
    config.read_timeout = Some(REQUEST_TIMEOUT);
    config.reset_reader_on_write = true;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config
}

/// A client configuration for an EKS cluster: `endpoint` and `ca_pem` from DescribeCluster
/// (`cluster.endpoint`, `cluster.certificateAuthority.data` base64-decoded), `token` the
/// `k8s-aws-v1.…` bearer token the AWS side mints from a presigned STS GetCallerIdentity.
///
/// The token is valid for 15 minutes and a client holds it for its whole life: a Lambda keeps the
/// client (and its warm TLS connections) across invocations and builds a new one from a fresh
/// token when the old one is ~14 minutes old, before a request could carry an expired one. A 401
/// that slips through anyway maps to `Unavailable`, so the retried message meets the new client.
pub fn eks_config(endpoint: &str, ca_pem: &[u8], token: &str) -> Result<Config, ClientError> {
    let url = endpoint
        .parse::<http::Uri>()
        .map_err(|source| ClientError::Endpoint { endpoint: endpoint.to_string(), source })?;
    let roots: Vec<Vec<u8>> =
        pem::parse_many(ca_pem)?.into_iter().filter(|p| p.tag() == "CERTIFICATE").map(|p| p.into_contents()).collect();
    if roots.is_empty() {
        return Err(ClientError::NoCertificate);
    }
    let mut config = Config::new(url);
    config.root_cert = Some(roots);
    config.auth_info.token = Some(SecretString::from(token.to_string()));
    Ok(adapter_settings(config))
}

/// [`eks_config`] made into a client. Must run inside the Tokio runtime that will use it (the
/// connection pool lives there).
pub fn eks_client(endpoint: &str, ca_pem: &[u8], token: &str) -> Result<Client, ClientError> {
    Ok(Client::try_from(eks_config(endpoint, ca_pem, token)?)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    // A self-signed certificate's PEM framing around arbitrary DER bytes is enough here: the
    // config only carries the DER; rustls parses it when the client connects.
    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUY29mZmVl\n-----END CERTIFICATE-----\n";

    #[test]
    fn config_from_describe_cluster() {
        let c = eks_config("https://abcd.gr7.us-east-1.eks.amazonaws.com", CA.as_bytes(), "k8s-aws-v1.abc").unwrap();
        assert_eq!(c.cluster_url.host(), Some("abcd.gr7.us-east-1.eks.amazonaws.com"));
        assert_eq!(c.root_cert.as_ref().map(Vec::len), Some(1));
        assert_eq!(c.auth_info.token.as_ref().map(|t| t.expose_secret().to_string()), Some("k8s-aws-v1.abc".into()));
        assert!(!c.default_retry);
        assert_eq!(c.read_timeout, Some(REQUEST_TIMEOUT));
    }

    #[test]
    fn bad_inputs() {
        assert!(matches!(eks_config("not a url", CA.as_bytes(), "t"), Err(ClientError::Endpoint { .. })));
        assert!(matches!(eks_config("https://x", b"no pem here", "t"), Err(ClientError::NoCertificate)));
        let key = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        assert!(matches!(eks_config("https://x", key.as_bytes(), "t"), Err(ClientError::NoCertificate)));
    }
}
