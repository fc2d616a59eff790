//! [`Sink`] on SQS SendMessageBatch, and the client set-up.
//!
//! Credentials come from the SDK's default chain, which covers both ways a pod gets an IAM role
//! on EKS: IRSA (the pod identity webhook injects `AWS_ROLE_ARN` and
//! `AWS_WEB_IDENTITY_TOKEN_FILE`: web-identity credentials) and EKS Pod Identity (the agent's
//! `AWS_CONTAINER_CREDENTIALS_FULL_URI` and `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`: container
//! credentials). The region comes from the same chain, else from the queue URL
//! (`https://sqs.<region>.amazonaws.com/...`).

use std::time::Duration;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_sqs::config::ProvideCredentials;
use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchError;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use aws_sdk_sqs::Client;

use crate::dispatch::{Entry, EntryFailure, Sink, SinkError};

/// Setting up the SQS client failed.
#[derive(Debug, thiserror::Error)]
pub enum SqsSetupError {
    #[error(
        "no AWS region: set AWS_REGION, or use a queue URL of the form https://sqs.<region>.amazonaws.com/<account>/<name> (got {0})"
    )]
    NoRegion(String),
    #[error(
        "no AWS credentials ({0}); on EKS give the forwarder's ServiceAccount an IAM role, through IRSA (the \
         eks.amazonaws.com/role-arn annotation) or an EKS Pod Identity association"
    )]
    NoCredentials(String),
}

/// How long start-up waits for the credential chain (IMDS or STS can be slow to answer).
const CREDENTIALS_TIMEOUT: Duration = Duration::from_secs(20);

/// An SQS client for `queue_url`: the default chains, `endpoint_url` overriding AWS's endpoint
/// (a local moto server in tests). Fails when there is no region or no credentials, so that a
/// misconfigured pod says so at start instead of failing every send.
pub async fn client(queue_url: &str, endpoint_url: Option<&str>) -> Result<Client, SqsSetupError> {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(url) = endpoint_url {
        loader = loader.endpoint_url(url);
    }
    let sdk = loader.load().await;
    let mut config = aws_sdk_sqs::config::Builder::from(&sdk);
    if sdk.region().is_none() {
        let region = region_of(queue_url).ok_or_else(|| SqsSetupError::NoRegion(queue_url.to_string()))?;
        config = config.region(Region::new(region.to_string()));
    }
    let provider = sdk.credentials_provider().ok_or_else(|| SqsSetupError::NoCredentials("no provider".into()))?;
    match tokio::time::timeout(CREDENTIALS_TIMEOUT, provider.provide_credentials()).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => return Err(SqsSetupError::NoCredentials(DisplayErrorContext(&error).to_string())),
        Err(_) => return Err(SqsSetupError::NoCredentials(format!("no answer within {CREDENTIALS_TIMEOUT:?}"))),
    }
    Ok(Client::from_conf(config.build()))
}

/// The region in an SQS queue URL (`https://sqs.us-east-1.amazonaws.com/1234/q` → `us-east-1`).
pub fn region_of(queue_url: &str) -> Option<&str> {
    let host = queue_url.strip_prefix("https://")?.split('/').next()?;
    let region = host.strip_prefix("sqs.")?.split('.').next()?;
    (!region.is_empty()).then_some(region)
}

/// SendMessageBatch on one queue.
#[derive(Debug, Clone)]
pub struct SqsSink {
    client: Client,
    queue_url: String,
}

impl SqsSink {
    pub fn new(client: Client, queue_url: &str) -> SqsSink {
        SqsSink { client, queue_url: queue_url.to_string() }
    }
}

impl Sink for SqsSink {
    async fn send_batch(&self, entries: &[Entry]) -> Result<Vec<EntryFailure>, SinkError> {
        let entries = entries
            .iter()
            .map(|e| SendMessageBatchRequestEntry::builder().id(&e.id).message_body(&e.body).build())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| SinkError { retryable: false, message: e.to_string() })?;
        let output = self
            .client
            .send_message_batch()
            .queue_url(&self.queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(call_error)?;
        Ok(output
            .failed()
            .iter()
            .map(|f| EntryFailure {
                id: f.id().to_string(),
                // Sender faults (a body SQS refuses) fail again; the others are SQS's own.
                retryable: !f.sender_fault(),
                reason: match f.message() {
                    Some(message) => format!("{}: {message}", f.code()),
                    None => f.code().to_string(),
                },
            })
            .collect())
    }
}

/// Throttling and server errors are worth another attempt (the SDK's own retries are spent by
/// then); client errors such as a missing queue or denied access are not.
fn call_error(error: SdkError<SendMessageBatchError>) -> SinkError {
    let retryable = match &error {
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            let throttled = matches!(
                service.err(),
                SendMessageBatchError::RequestThrottled(_) | SendMessageBatchError::KmsThrottled(_)
            ) || service.err().code().is_some_and(|c| c.contains("Throttl"));
            throttled || status >= 500
        }
        SdkError::ConstructionFailure(_) => false,
        _ => true,
    };
    SinkError { retryable, message: DisplayErrorContext(&error).to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_from_queue_urls() {
        assert_eq!(region_of("https://sqs.eu-west-1.amazonaws.com/123456789012/doorbells"), Some("eu-west-1"));
        assert_eq!(region_of("https://sqs.cn-north-1.amazonaws.com.cn/123/q"), Some("cn-north-1"));
        assert_eq!(region_of("http://127.0.0.1:5000/123456789012/doorbells"), None);
        assert_eq!(region_of("https://queue.amazonaws.com/123/q"), None);
    }
}
