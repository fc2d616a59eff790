//! Errors of the adapters, and how an AWS API failure maps onto the core's [`PortError`].

use std::error::Error as StdError;

use aws_sdk_ec2::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use dovetail_core::reconcile::ports::PortError;

/// What went wrong in an adapter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AwsError {
    /// An AWS API call failed.
    #[error("{operation}: {message}")]
    Api {
        operation: &'static str,
        /// The service's error code (`ConditionalCheckFailedException`, `Throttling`, ...), if
        /// a response arrived.
        code: Option<String>,
        message: String,
        kind: ErrorKind,
    },
    /// An environment variable is missing or malformed.
    #[error("configuration: {0}")]
    Config(String),
    /// An EC2NodeClass cannot be used as written or resolves to nothing.
    #[error("EC2NodeClass {class}: {message}")]
    Class { class: String, message: String },
    /// A response lacked something the adapter needs.
    #[error("{operation}: unexpected response: {message}")]
    Response { operation: &'static str, message: String },
    /// A stored item could not be read back.
    #[error("stored item {key}: {message}")]
    Item { key: String, message: String },
    /// Signing the EKS bearer token failed.
    #[error("EKS token: {0}")]
    Token(String),
}

/// What a caller should do about an API failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A conditional write lost.
    Conflict,
    /// Throttled, a timeout, a 5xx or no response: a retry may succeed.
    Retryable,
    /// Refused: permissions, validation, not found.
    Refused,
}

impl From<AwsError> for PortError {
    fn from(e: AwsError) -> PortError {
        let text = e.to_string();
        match e {
            AwsError::Api { kind: ErrorKind::Conflict, .. } => PortError::Conflict(text),
            AwsError::Api { kind: ErrorKind::Retryable, .. } | AwsError::Response { .. } => {
                PortError::Unavailable(text)
            }
            _ => PortError::Rejected(text),
        }
    }
}

/// Error codes that mean "slow down" or "try later" across the services used here.
const RETRYABLE_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "TransactionConflictException",
    "LimitExceededException",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "InternalServerException",
    "Unavailable",
];

/// Classifies an error by its code and HTTP status (pure, so it is tested on data).
pub fn classify(code: Option<&str>, status: Option<u16>) -> ErrorKind {
    match code {
        Some("ConditionalCheckFailedException") => ErrorKind::Conflict,
        Some(c) if RETRYABLE_CODES.contains(&c) => ErrorKind::Retryable,
        _ if status.is_some_and(|s| s >= 500 || s == 429) => ErrorKind::Retryable,
        Some(_) => ErrorKind::Refused,
        None => ErrorKind::Retryable,
    }
}

/// An SDK failure as an [`AwsError::Api`]. No response at all (timeout, connection refused) is
/// retryable; a response is classified by its code and status.
pub fn api_error<E>(operation: &'static str, err: SdkError<E>) -> AwsError
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    let status = err.raw_response().map(|r| r.status().as_u16());
    let code = err.code().map(str::to_string);
    let kind = match &err {
        SdkError::ConstructionFailure(_) => ErrorKind::Refused,
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => ErrorKind::Retryable,
        _ => classify(code.as_deref(), status),
    };
    let message = err.message().map(str::to_string).unwrap_or_else(|| DisplayErrorContext(&err).to_string());
    AwsError::Api { operation, code, message, kind }
}

/// `Result` with [`AwsError`].
pub type AwsResult<T> = Result<T, AwsError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_statuses_sort_into_kinds() {
        assert_eq!(classify(Some("ConditionalCheckFailedException"), Some(400)), ErrorKind::Conflict);
        assert_eq!(classify(Some("RequestLimitExceeded"), Some(503)), ErrorKind::Retryable);
        assert_eq!(classify(Some("ThrottlingException"), Some(400)), ErrorKind::Retryable);
        assert_eq!(classify(Some("UnauthorizedOperation"), Some(403)), ErrorKind::Refused);
        assert_eq!(classify(Some("SomethingOdd"), Some(502)), ErrorKind::Retryable);
        assert_eq!(classify(None, Some(500)), ErrorKind::Retryable);
        assert_eq!(classify(None, None), ErrorKind::Retryable);
    }

    #[test]
    fn kinds_map_onto_port_errors() {
        let api = |kind| AwsError::Api { operation: "PutItem", code: None, message: "m".into(), kind };
        assert!(matches!(PortError::from(api(ErrorKind::Conflict)), PortError::Conflict(_)));
        assert!(matches!(PortError::from(api(ErrorKind::Retryable)), PortError::Unavailable(_)));
        assert!(matches!(PortError::from(api(ErrorKind::Refused)), PortError::Rejected(_)));
        assert!(matches!(PortError::from(AwsError::Config("x".into())), PortError::Rejected(_)));
    }
}
