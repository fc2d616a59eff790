//! DescribeCluster against moto's EKS, and the token minted with the SDK's credentials.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use dovetail_aws::eks::token::TOKEN_PREFIX;
use dovetail_aws::Eks;

use super::{World, CLUSTER, K8S_VERSION};

#[tokio::test]
async fn cluster_access_from_describe_cluster_and_a_presigned_token() {
    let world = World::new().await;
    world.eks_cluster().await;
    let eks = Eks::new(world.clients.eks.clone(), &world.sdk, CLUSTER);
    let access = eks.access().await.unwrap();
    assert!(access.endpoint.starts_with("https://"), "{}", access.endpoint);
    assert_eq!(access.version, K8S_VERSION);
    assert!(!access.ca_pem.is_empty());
    assert_eq!(eks.facts().await.unwrap().service_cidr.as_deref(), Some("10.100.0.0/16"));

    let url =
        String::from_utf8(URL_SAFE_NO_PAD.decode(access.token.strip_prefix(TOKEN_PREFIX).unwrap()).unwrap()).unwrap();
    assert!(
        url.starts_with("https://sts.us-east-1.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&"),
        "{url}"
    );
    assert!(url.contains("X-Amz-Credential=testing%2F") && url.contains("X-Amz-SignedHeaders=host%3Bx-k8s-aws-id"));
    // Cached: the same token until it is 14 minutes old.
    assert_eq!(eks.access().await.unwrap().token, access.token);
    assert!(access.expires_at > std::time::SystemTime::now() + std::time::Duration::from_secs(13 * 60));
}
