//! SQS batches as Lambda hands them to the functions (`aws_lambda_events`' `SqsEvent`, then
//! `dovetail_runtime::sqs`): doorbells for the provisioner, and EventBridge events and
//! `{"resume": …}` messages for the interruption function (`dovetail_core::reconcile::Parsed`).

use arbitrary::Arbitrary;
use aws_lambda_events::event::sqs::SqsEvent;
use dovetail_core::reconcile::Parsed;
use dovetail_runtime::sqs;
use serde_json::{json, Value};

use crate::eventbridge;
use crate::harness::Target;
use crate::tree::{Choice, Fragment, Word};

pub const TARGET: Target<Input> = Target {
    name: "sqs_batch",
    fixtures: &["tests/fixtures/lambda"],
    vocabulary: &[
        "Records",
        "messageId",
        "receiptHandle",
        "body",
        "attributes",
        "messageAttributes",
        "md5OfBody",
        "eventSource",
        "eventSourceARN",
        "awsRegion",
        "aws:sqs",
        "pod",
        "node",
        "nodeclaim",
        "nodepool",
        "event",
        "at",
        "unschedulableAt",
        "registered",
        "ready",
        "gone",
        "deleted",
        "resume",
        "shop/web-0",
        "default-abc12",
        "2026-11-21T15:05:45.624Z",
        "ApproximateReceiveCount",
        "stringValue",
        "dataType",
    ],
    render,
    check,
};

#[derive(Debug, Arbitrary)]
pub struct Input {
    records: Vec<Record>,
}

#[derive(Debug, Arbitrary)]
pub struct Record {
    id: Option<Word>,
    body: Option<Body>,
    /// Receive count and the like (strings in Lambda's shape, anything here).
    attributes: Option<Fragment>,
}

#[derive(Debug, Arbitrary)]
pub enum Body {
    /// A doorbell as the forwarder writes it: `{"<kind>": name, "event": …, "at": …}`.
    Doorbell {
        kind: Choice,
        name: Word,
        event: Choice,
        at: Word,
    },
    Resume(Fragment),
    Event(eventbridge::Input),
    Text(Word),
}

const KINDS: [&str; 4] = ["pod", "node", "nodeclaim", "nodepool"];
const EVENTS: [&str; 4] = ["registered", "ready", "gone", "deleted"];

pub fn render(input: &Input, vocabulary: &[&str]) -> String {
    let records: Vec<Value> = input
        .records
        .iter()
        .map(|r| {
            let mut record = json!({"receiptHandle": "r", "eventSource": "aws:sqs", "awsRegion": "us-east-1",
                                    "messageAttributes": {}, "attributes": {}});
            if let Some(id) = &r.id {
                record["messageId"] = id.resolve(vocabulary).into();
            }
            if let Some(attributes) = &r.attributes {
                record["attributes"] = attributes.value(vocabulary);
            }
            let body = match &r.body {
                None => return record,
                Some(Body::Doorbell { kind, name, event, at }) => json!({
                    kind.resolve(&KINDS, vocabulary): name.resolve(vocabulary),
                    "event": event.resolve(&EVENTS, vocabulary),
                    "at": at.resolve(vocabulary),
                })
                .to_string(),
                Some(Body::Resume(claim)) => json!({ "resume": claim.value(vocabulary) }).to_string(),
                Some(Body::Event(event)) => eventbridge::render(event, eventbridge::VOCABULARY),
                Some(Body::Text(text)) => text.resolve(vocabulary).to_string(),
            };
            record["body"] = body.into();
            record
        })
        .collect();
    json!({ "Records": records }).to_string()
}

/// An event Lambda can decode gives one message per record, ids kept; every body is classified
/// as the interruption function classifies it (the provisioner only reads it as JSON), and the
/// batch responses name exactly the failed messages.
pub fn check(text: &str) {
    let Ok(event) = serde_json::from_str::<SqsEvent>(text) else {
        return; // Lambda's runtime refuses the invocation before the handler.
    };
    let messages = sqs::messages(&event);
    assert_eq!(messages.len(), event.records.len());
    for (m, r) in messages.iter().zip(&event.records) {
        assert_eq!(Some(&m.id), r.message_id.as_ref().or(Some(&String::new())));
        let _ = serde_json::from_str::<Value>(&m.body);
        match Parsed::of(&m.body) {
            Parsed::Resume(_) => {}
            Parsed::Event(_) | Parsed::Malformed(_) => eventbridge::check(&m.body),
        }
    }
    let ids: Vec<String> = messages.iter().map(|m| m.id.clone()).collect();
    let all = serde_json::to_value(sqs::all_failed(&event)).expect("a response serializes");
    let named: Vec<&str> = all["batchItemFailures"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|f| f["itemIdentifier"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(named, ids);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_without_id_or_body_is_kept_empty() {
        let text =
            r#"{"Records": [{"messageId": "m1", "body": "{\"resume\": \"default-x\"}"}, {"eventSource": "aws:sqs"}]}"#;
        let event: SqsEvent = serde_json::from_str(text).unwrap();
        let messages = sqs::messages(&event);
        assert_eq!((messages[1].id.as_str(), messages[1].body.as_str()), ("", ""));
        assert!(matches!(Parsed::of(&messages[0].body), Parsed::Resume(claim) if claim == "default-x"));
        assert!(matches!(Parsed::of(&messages[1].body), Parsed::Malformed(_)));
        check(text);
    }
}
