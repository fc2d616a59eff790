//! EKS: what the cluster is (DescribeCluster) and how to call its API server (a bearer token).
//! No Kubernetes client here: [`ClusterAccess`] is plain data the Kubernetes adapter builds its
//! client from.

pub mod token;

use std::time::SystemTime;

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use tokio::sync::Mutex;

use crate::error::{api_error, AwsError, AwsResult};

/// What DescribeCluster says about the cluster, as user data and AMI lookup need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterFacts {
    pub name: String,
    /// `https://....eks.amazonaws.com`.
    pub endpoint: String,
    /// The cluster CA bundle, PEM.
    pub ca_pem: String,
    /// Kubernetes `major.minor` (`1.31`).
    pub version: String,
    /// Service IPv4 CIDR (`10.100.0.0/16`); `None` when the cluster does not say.
    pub service_cidr: Option<String>,
}

/// Everything a Kubernetes client needs to talk to the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterAccess {
    pub endpoint: String,
    pub ca_pem: String,
    pub version: String,
    pub token: String,
    /// Mint a new token before this.
    pub expires_at: SystemTime,
}

/// DescribeCluster (cached for the process: endpoint, CA and version change only with an
/// upgrade, which restarts nothing but is picked up by the next cold start) and bearer tokens
/// (cached [`token::TOKEN_REUSE`]).
#[derive(Debug)]
pub struct Eks {
    client: aws_sdk_eks::Client,
    credentials: Option<SharedCredentialsProvider>,
    region: String,
    cluster: String,
    facts: Mutex<Option<ClusterFacts>>,
    token: Mutex<Option<(String, SystemTime)>>,
}

impl Eks {
    /// `sdk` supplies the credentials and region the token is signed with.
    pub fn new(client: aws_sdk_eks::Client, sdk: &aws_config::SdkConfig, cluster: &str) -> Eks {
        Eks {
            client,
            credentials: sdk.credentials_provider(),
            region: sdk.region().map(|r| r.to_string()).unwrap_or_else(|| "us-east-1".to_string()),
            cluster: cluster.to_string(),
            facts: Mutex::new(None),
            token: Mutex::new(None),
        }
    }

    /// DescribeCluster, once per process.
    pub async fn facts(&self) -> AwsResult<ClusterFacts> {
        let mut cached = self.facts.lock().await;
        if let Some(f) = cached.as_ref() {
            return Ok(f.clone());
        }
        let out = self
            .client
            .describe_cluster()
            .name(&self.cluster)
            .send()
            .await
            .map_err(|e| api_error("DescribeCluster", e))?;
        let cluster = out
            .cluster()
            .ok_or_else(|| AwsError::Response { operation: "DescribeCluster", message: "no cluster".into() })?;
        let facts = facts_from(&self.cluster, cluster)?;
        *cached = Some(facts.clone());
        Ok(facts)
    }

    /// A bearer token, minted again once the cached one is [`token::TOKEN_REUSE`] old.
    pub async fn token(&self) -> AwsResult<(String, SystemTime)> {
        let mut cached = self.token.lock().await;
        let now = SystemTime::now();
        if let Some((t, expires)) = cached.as_ref() {
            if now < *expires {
                return Ok((t.clone(), *expires));
            }
        }
        let provider =
            self.credentials.as_ref().ok_or_else(|| AwsError::Token("no credentials provider configured".into()))?;
        let creds = provider.provide_credentials().await.map_err(|e| AwsError::Token(e.to_string()))?;
        let minted = token::token(&self.cluster, &self.region, &creds, now).await?;
        let expires = now + token::TOKEN_REUSE;
        *cached = Some((minted.clone(), expires));
        Ok((minted, expires))
    }

    /// Endpoint, CA, version and a fresh-enough token.
    pub async fn access(&self) -> AwsResult<ClusterAccess> {
        let facts = self.facts().await?;
        let (token, expires_at) = self.token().await?;
        Ok(ClusterAccess { endpoint: facts.endpoint, ca_pem: facts.ca_pem, version: facts.version, token, expires_at })
    }
}

/// The facts in a DescribeCluster answer; the CA arrives base64-encoded.
pub fn facts_from(name: &str, cluster: &aws_sdk_eks::types::Cluster) -> AwsResult<ClusterFacts> {
    let missing = |what: &str| AwsError::Response {
        operation: "DescribeCluster",
        message: format!("cluster {name} has no {what}"),
    };
    let ca_b64 =
        cluster.certificate_authority().and_then(|c| c.data()).ok_or_else(|| missing("certificate authority"))?;
    let ca = STANDARD.decode(ca_b64.trim()).map_err(|e| AwsError::Response {
        operation: "DescribeCluster",
        message: format!("certificate authority of {name} is not base64: {e}"),
    })?;
    Ok(ClusterFacts {
        name: name.to_string(),
        endpoint: cluster.endpoint().ok_or_else(|| missing("endpoint"))?.to_string(),
        ca_pem: String::from_utf8_lossy(&ca).into_owned(),
        version: cluster.version().ok_or_else(|| missing("version"))?.to_string(),
        service_cidr: cluster.kubernetes_network_config().and_then(|n| n.service_ipv4_cidr()).map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_eks::types::{Certificate, Cluster, KubernetesNetworkConfigResponse};

    #[test]
    fn facts_decode_the_ca_and_keep_the_cidr() {
        let cluster = Cluster::builder()
            .name("prod")
            .endpoint("https://ABC.gr7.us-east-1.eks.amazonaws.com")
            .version("1.31")
            .certificate_authority(
                Certificate::builder().data(STANDARD.encode("-----BEGIN CERTIFICATE-----\n")).build(),
            )
            .kubernetes_network_config(
                KubernetesNetworkConfigResponse::builder().service_ipv4_cidr("10.100.0.0/16").build(),
            )
            .build();
        let f = facts_from("prod", &cluster).unwrap();
        assert_eq!(f.ca_pem, "-----BEGIN CERTIFICATE-----\n");
        assert_eq!(f.version, "1.31");
        assert_eq!(f.service_cidr.as_deref(), Some("10.100.0.0/16"));

        let no_ca = Cluster::builder().name("prod").endpoint("https://x").version("1.31").build();
        assert!(facts_from("prod", &no_ca).unwrap_err().to_string().contains("certificate authority"));
    }
}
