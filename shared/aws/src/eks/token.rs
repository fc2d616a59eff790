//! The EKS bearer token: `k8s-aws-v1.` + base64url (no padding) of a SigV4-presigned
//! `GET https://<sts endpoint>/?Action=GetCallerIdentity&Version=2011-06-15` whose signed headers
//! include `x-k8s-aws-id: <cluster>` (what `aws eks get-token` and aws-iam-authenticator produce).
//! The API server has STS run the request and maps the caller's role to a Kubernetes identity
//! through the cluster's access entries.
//!
//! The STS endpoint is the region's own, from the SDK's endpoint rules rather than a pattern:
//! `sts.<region>.amazonaws.com` in the commercial and GovCloud partitions, but
//! `sts.<region>.amazonaws.com.cn` in China and other domains in the isolated partitions, where a
//! token naming `amazonaws.com` would be refused.

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sdk_sts::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SignatureLocation, SigningParams, SigningSettings};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use crate::error::AwsError;

/// The token's prefix, which tells the API server's webhook what follows.
pub const TOKEN_PREFIX: &str = "k8s-aws-v1.";
/// The header binding a token to one cluster.
pub const CLUSTER_HEADER: &str = "x-k8s-aws-id";
/// `X-Amz-Expires` of the presigned URL. EKS accepts a token for 15 minutes from its signing
/// time whatever this says; 60 is what the AWS CLI sends.
pub const PRESIGN_EXPIRES: Duration = Duration::from_secs(60);
/// How long a minted token is reused: a minute short of EKS's 15.
pub const TOKEN_REUSE: Duration = Duration::from_secs(14 * 60);

/// The regional STS endpoint of `region` (`https://sts.cn-north-1.amazonaws.com.cn`), as the SDK
/// resolves it for an STS client of that region without FIPS or dual-stack.
pub async fn sts_endpoint(region: &str) -> Result<String, AwsError> {
    let params = Params::builder()
        .region(region)
        .build()
        .map_err(|e| AwsError::Token(format!("STS endpoint parameters for region {region:?}: {e}")))?;
    let endpoint = DefaultResolver::new()
        .resolve_endpoint(&params)
        .await
        .map_err(|e| AwsError::Token(format!("no STS endpoint for region {region:?}: {e}")))?;
    Ok(endpoint.url().trim_end_matches('/').to_string())
}

/// The presigned STS URL for `cluster`, signed at `at`.
pub async fn presigned_url(
    cluster: &str,
    region: &str,
    credentials: &Credentials,
    at: SystemTime,
) -> Result<String, AwsError> {
    let endpoint = sts_endpoint(region).await?;
    let base = format!("{endpoint}/?Action=GetCallerIdentity&Version=2011-06-15");
    let identity: Identity = credentials.clone().into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(PRESIGN_EXPIRES);
    let params: SigningParams<'_> = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(at)
        .settings(settings)
        .build()
        .map_err(|e| AwsError::Token(e.to_string()))?
        .into();
    let request =
        SignableRequest::new("GET", base.as_str(), [(CLUSTER_HEADER, cluster)].into_iter(), SignableBody::Bytes(&[]))
            .map_err(|e| AwsError::Token(e.to_string()))?;
    let (instructions, _signature) = sign(request, &params).map_err(|e| AwsError::Token(e.to_string()))?.into_parts();
    let mut url = base;
    for (name, value) in instructions.params() {
        url.push('&');
        url.push_str(name);
        url.push('=');
        url.push_str(&uri_encode(value));
    }
    Ok(url)
}

/// The bearer token for `cluster`, signed at `at`.
pub async fn token(cluster: &str, region: &str, credentials: &Credentials, at: SystemTime) -> Result<String, AwsError> {
    let url = presigned_url(cluster, region, credentials, at).await?;
    Ok(format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(url)))
}

/// SigV4's URI encoding: everything but `A-Z a-z 0-9 - _ . ~` as `%XX`.
fn uri_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    /// AWS's documentation example key pair, signed at 2024-01-02T03:04:05Z.
    fn fixture() -> (Credentials, SystemTime) {
        let creds = Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None, None, "test");
        (creds, UNIX_EPOCH + Duration::from_secs(1_704_164_645))
    }

    // The expected values follow the SigV4 specification step by step:
    //
    // 1. Canonical request (method, path, sorted query, headers, signed headers, payload hash):
    //      GET
    //      /
    //      Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Algorithm=AWS4-HMAC-SHA256
    //        &X-Amz-Credential=AKIDEXAMPLE%2F20240102%2Fus-east-1%2Fsts%2Faws4_request
    //        &X-Amz-Date=20240102T030405Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host%3Bx-k8s-aws-id
    //      host:sts.us-east-1.amazonaws.com
    //      x-k8s-aws-id:my-cluster
    //
    //      host;x-k8s-aws-id
    //      e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855   (SHA-256 of "")
    //    (the query is one line; it is wrapped here).
    // 2. String to sign: "AWS4-HMAC-SHA256\n20240102T030405Z\n20240102/us-east-1/sts/aws4_request\n"
    //    + hex(SHA-256(canonical request)) = CANONICAL_REQUEST_SHA256 below.
    // 3. Signing key: HMAC chain "AWS4"+secret -> "20240102" -> "us-east-1" -> "sts" -> "aws4_request".
    // 4. Signature: hex(HMAC(signing key, string to sign)) = SIGNATURE below.
    //
    // The same steps in 15 lines of Python (hashlib/hmac) gave these constants, and botocore's own
    // presigner (PyPI `botocore` 1.x, run once) gives the identical URL for this input:
    //   from botocore.awsrequest import AWSRequest; from botocore.auth import SigV4QueryAuth
    //   from botocore.credentials import Credentials; import datetime, unittest.mock as m
    //   r = AWSRequest("GET", "https://sts.us-east-1.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
    //                  headers={"x-k8s-aws-id": "my-cluster"})
    //   at = datetime.datetime(2024, 1, 2, 3, 4, 5)   # freeze the signing time
    //   with m.patch("botocore.auth.get_current_datetime", return_value=at):
    //       SigV4QueryAuth(Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"), "sts",
    //                      "us-east-1", expires=60).add_auth(r)
    //   print(r.url)
    const CANONICAL_REQUEST_SHA256: &str = "f09116920e5da220e226e0b618ff32cacb9923a16d1fe9af283f781b7cb95574";
    const SIGNATURE: &str = "b9c52540c7aed8adbc93935c90eca6cf36a27e75841b841bf1c08dffb059c2b5";

    #[tokio::test]
    async fn presigned_url_matches_the_sigv4_derivation() {
        let (creds, at) = fixture();
        let url = presigned_url("my-cluster", "us-east-1", &creds, at).await.unwrap();
        assert_eq!(
            url,
            format!(
                "https://sts.us-east-1.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15\
                 &X-Amz-Algorithm=AWS4-HMAC-SHA256\
                 &X-Amz-Credential=AKIDEXAMPLE%2F20240102%2Fus-east-1%2Fsts%2Faws4_request\
                 &X-Amz-Date=20240102T030405Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host%3Bx-k8s-aws-id\
                 &X-Amz-Signature={SIGNATURE}"
            )
        );
    }

    #[test]
    fn signature_follows_from_the_canonical_request_hash() {
        let (_, at) = fixture();
        let string_to_sign = format!(
            "AWS4-HMAC-SHA256\n20240102T030405Z\n20240102/us-east-1/sts/aws4_request\n{CANONICAL_REQUEST_SHA256}"
        );
        let key = v4::generate_signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", at, "us-east-1", "sts");
        assert_eq!(v4::calculate_signature(key, string_to_sign.as_bytes()), SIGNATURE);
    }

    #[tokio::test]
    async fn token_is_prefixed_unpadded_base64url_of_the_url() {
        let (creds, at) = fixture();
        let token = token("my-cluster", "us-east-1", &creds, at).await.unwrap();
        assert_eq!(token, "k8s-aws-v1.aHR0cHM6Ly9zdHMudXMtZWFzdC0xLmFtYXpvbmF3cy5jb20vP0FjdGlvbj1HZXRDYWxsZXJJZGVudGl0eSZWZXJzaW9uPTIwMTEtMDYtMTUmWC1BbXotQWxnb3JpdGhtPUFXUzQtSE1BQy1TSEEyNTYmWC1BbXotQ3JlZGVudGlhbD1BS0lERVhBTVBMRSUyRjIwMjQwMTAyJTJGdXMtZWFzdC0xJTJGc3RzJTJGYXdzNF9yZXF1ZXN0JlgtQW16LURhdGU9MjAyNDAxMDJUMDMwNDA1WiZYLUFtei1FeHBpcmVzPTYwJlgtQW16LVNpZ25lZEhlYWRlcnM9aG9zdCUzQngtazhzLWF3cy1pZCZYLUFtei1TaWduYXR1cmU9YjljNTI1NDBjN2FlZDhhZGJjOTM5MzVjOTBlY2E2Y2YzNmEyN2U3NTg0MWI4NDFiZjFjMDhkZmZiMDU5YzJiNQ");
        let body = token.strip_prefix(TOKEN_PREFIX).unwrap();
        assert!(!body.contains('=') && !body.contains('+') && !body.contains('/'));
        let url = String::from_utf8(URL_SAFE_NO_PAD.decode(body).unwrap()).unwrap();
        assert_eq!(url, presigned_url("my-cluster", "us-east-1", &creds, at).await.unwrap());
    }

    #[tokio::test]
    async fn session_tokens_are_signed_into_the_url() {
        let (_, at) = fixture();
        let creds = Credentials::new("AKIDEXAMPLE", "secret", Some("session/token+1".into()), None, "test");
        let url = presigned_url("c", "eu-west-1", &creds, at).await.unwrap();
        assert!(url.starts_with("https://sts.eu-west-1.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&"));
        assert!(url.contains("&X-Amz-Security-Token=session%2Ftoken%2B1"), "{url}");
    }

    /// Each partition's STS domain, per the SDK's endpoint rules (their own test cases list the
    /// same hosts); the URL is signed for that host and the region.
    #[tokio::test]
    async fn the_sts_endpoint_is_the_partitions() {
        let (creds, at) = fixture();
        for (region, endpoint) in [
            ("eu-west-1", "https://sts.eu-west-1.amazonaws.com"),
            ("us-east-1", "https://sts.us-east-1.amazonaws.com"),
            ("cn-north-1", "https://sts.cn-north-1.amazonaws.com.cn"),
            ("cn-northwest-1", "https://sts.cn-northwest-1.amazonaws.com.cn"),
            ("us-gov-west-1", "https://sts.us-gov-west-1.amazonaws.com"),
            ("us-iso-east-1", "https://sts.us-iso-east-1.c2s.ic.gov"),
            ("us-isob-east-1", "https://sts.us-isob-east-1.sc2s.sgov.gov"),
        ] {
            assert_eq!(sts_endpoint(region).await.unwrap(), endpoint, "{region}");
            let url = presigned_url("c", region, &creds, at).await.unwrap();
            assert!(url.starts_with(&format!("{endpoint}/?Action=GetCallerIdentity&Version=2011-06-15&")), "{url}");
            assert!(url.contains(&format!("%2F{region}%2Fsts%2Faws4_request")), "{url}");
        }
    }

    #[tokio::test]
    async fn a_region_that_is_no_dns_label_is_an_error() {
        let err = sts_endpoint("us east 1").await.unwrap_err().to_string();
        assert!(err.contains(r#"STS endpoint parameters for region "us east 1""#), "{err}");
        assert!(err.contains("valid host label"), "{err}");
    }

    #[test]
    fn uri_encoding_keeps_only_unreserved_characters() {
        assert_eq!(uri_encode("a-b_c.d~e"), "a-b_c.d~e");
        assert_eq!(uri_encode("a/b;c+d=e f"), "a%2Fb%3Bc%2Bd%3De%20f");
    }
}
