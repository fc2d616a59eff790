//! [`Queue`] on SQS. (Lambda's partial batch response is built by `functions/runtime`'s `sqs`.)
//!
//! `requeue(claim, after)` sends `{"resume": "<claim>"}` to the resume queue with
//! `DelaySeconds = min(after, 900)` (SQS's maximum): a drain longer than that is resumed in
//! several hops, each invocation requeueing again while there is work left.

use std::time::Duration;

use aws_sdk_sqs::types::QueueAttributeName;
use aws_sdk_sqs::Client;
use dovetail_core::reconcile::ports::{PortResult, Queue};
use dovetail_core::reconcile::Resume;

use crate::error::{api_error, AwsResult};

/// SQS's longest message delay.
pub const MAX_DELAY: Duration = Duration::from_secs(900);

/// The delay SQS is asked for: whole seconds, rounded up, at most [`MAX_DELAY`].
pub fn delay_seconds(after: Duration) -> i32 {
    let secs = after.as_secs() + u64::from(after.subsec_nanos() > 0);
    secs.min(MAX_DELAY.as_secs()) as i32
}

/// [`Queue`] on one SQS queue.
#[derive(Debug, Clone)]
pub struct SqsQueue {
    client: Client,
    url: String,
}

impl SqsQueue {
    pub fn new(client: Client, url: &str) -> SqsQueue {
        SqsQueue { client, url: url.to_string() }
    }

    /// Reaches the queue once (GetQueueAttributes), so a Lambda's init opens the connection and
    /// a wrong URL or a missing permission fails there, naming the queue, not in the first drain.
    pub async fn check(&self) -> AwsResult<()> {
        self.client
            .get_queue_attributes()
            .queue_url(&self.url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| api_error("GetQueueAttributes", e))?;
        Ok(())
    }
}

impl Queue for SqsQueue {
    async fn requeue(&self, claim: &str, after: Duration) -> PortResult<()> {
        let body = serde_json::to_string(&Resume { resume: claim.to_string() }).expect("a string field serializes");
        self.client
            .send_message()
            .queue_url(&self.url)
            .message_body(body)
            .delay_seconds(delay_seconds(after))
            .send()
            .await
            .map_err(|e| api_error("SendMessage", e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_round_up_and_cap_at_fifteen_minutes() {
        assert_eq!(delay_seconds(Duration::ZERO), 0);
        assert_eq!(delay_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(delay_seconds(Duration::from_secs(60)), 60);
        assert_eq!(delay_seconds(Duration::from_secs(3600)), 900);
    }

    #[test]
    fn resume_body() {
        let body = serde_json::to_string(&Resume { resume: "default-abc".into() }).unwrap();
        assert_eq!(body, r#"{"resume":"default-abc"}"#);
    }
}
