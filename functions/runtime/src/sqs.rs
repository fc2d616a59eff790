//! SQS batches in, partial batch failures out (`ReportBatchItemFailures`: only the failed
//! messages are delivered again; the rest are deleted).

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use dovetail_core::reconcile::QueueMessage;

/// The messages of a batch; a record without an id cannot be reported failed, so it is kept with
/// an empty one (and its failure fails the whole batch, see [`response`]).
pub fn messages(event: &SqsEvent) -> Vec<QueueMessage> {
    event
        .records
        .iter()
        .map(|r| QueueMessage {
            id: r.message_id.clone().unwrap_or_default(),
            body: r.body.clone().unwrap_or_default(),
        })
        .collect()
}

/// The response naming the failed messages.
pub fn response(failed: &[String]) -> SqsBatchResponse {
    let mut r = SqsBatchResponse::default();
    r.batch_item_failures = failed
        .iter()
        .map(|id| {
            let mut f = BatchItemFailure::default();
            f.item_identifier = id.clone();
            f
        })
        .collect();
    r
}

/// Every message of the batch failed (the reconcile could not run at all).
pub fn all_failed(event: &SqsEvent) -> SqsBatchResponse {
    let ids: Vec<String> = messages(event).into_iter().map(|m| m.id).collect();
    response(&ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> SqsEvent {
        serde_json::from_value(serde_json::json!({"Records": [
            {"messageId": "m1", "body": "{\"resume\":\"default-abc\"}", "receiptHandle": "r1", "attributes": {}, "messageAttributes": {}, "eventSource": "aws:sqs"},
            {"messageId": "m2", "body": "not json", "receiptHandle": "r2", "attributes": {}, "messageAttributes": {}, "eventSource": "aws:sqs"}
        ]}))
        .unwrap()
    }

    #[test]
    fn failures_name_the_message_ids_in_lambda_s_shape() {
        let msgs = messages(&event());
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[1].body, "not json");
        let json = serde_json::to_value(response(&["m2".to_string()])).unwrap();
        assert_eq!(json, serde_json::json!({"batchItemFailures": [{"itemIdentifier": "m2"}]}));
        let all = serde_json::to_value(all_failed(&event())).unwrap();
        assert_eq!(all["batchItemFailures"].as_array().unwrap().len(), 2);
    }
}
