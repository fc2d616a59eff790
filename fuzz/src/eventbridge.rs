//! EventBridge events on the interruption queue (`dovetail_core::interruption::parse`): spot
//! interruption warnings, rebalance recommendations, instance state changes, capacity
//! reservation interruptions, Capacity Block expiration warnings, AWS Health scheduled changes,
//! and anything else a rule delivers.

use arbitrary::Arbitrary;
use dovetail_core::interruption::{
    parse, parse_rfc3339, Message, ParseError, CAPACITY_BLOCK_EXPIRY, CAPACITY_RESERVATION_INTERRUPTION, HEALTH_EVENT,
    REBALANCE_RECOMMENDATION, SOURCE_EC2, SOURCE_HEALTH, SPOT_INTERRUPTION, STATE_CHANGE,
};
use serde_json::{json, Map, Value};

use crate::harness::Target;
use crate::tree::{Choice, Fragment, Tree, Word};

pub const TARGET: Target<Input> = Target {
    name: "eventbridge",
    fixtures: &["shared/core/tests/fixtures/eventbridge"],
    vocabulary: VOCABULARY,
    render,
    check,
};

pub const VOCABULARY: &[&str] = &[
    "version",
    "id",
    "detail-type",
    "source",
    "account",
    "time",
    "region",
    "resources",
    "detail",
    "instance-id",
    "instance-action",
    "capacity-reservation-id",
    "end-date",
    "state",
    "service",
    "eventTypeCategory",
    "eventTypeCode",
    "affectedEntities",
    "entityValue",
    "startTime",
    "terminate",
    "stop",
    "hibernate",
    "running",
    "stopping",
    "stopped",
    "shutting-down",
    "terminated",
    "pending",
    "EC2",
    "scheduledChange",
    "issue",
    "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
    "i-0abc1234def567890",
    "cr-0b1234567890abcde",
    "2026-03-14T09:26:53Z",
    "2026-03-14T09:26:53.123Z",
    "2026-02-31T25:61:61Z",
    "aws.autoscaling",
    "",
];

const SOURCES: [&str; 2] = [SOURCE_EC2, SOURCE_HEALTH];
const DETAIL_TYPES: [&str; 7] = [
    SPOT_INTERRUPTION,
    REBALANCE_RECOMMENDATION,
    STATE_CHANGE,
    CAPACITY_RESERVATION_INTERRUPTION,
    CAPACITY_BLOCK_EXPIRY[0],
    CAPACITY_BLOCK_EXPIRY[1],
    HEALTH_EVENT,
];
/// The detail's fields the handled events read: [`VOCABULARY`]'s 10th to 20th words.
const DETAIL_FIELDS: &[&str] = VOCABULARY.split_at(20).0.split_at(9).1;

/// An envelope whose routing fields are mostly among the handled ones, with a detail of the
/// fields those events read, each with any value.
#[derive(Debug, Arbitrary)]
pub struct Input {
    id: Option<Fragment>,
    source: Option<Choice>,
    detail_type: Option<Choice>,
    time: Option<Word>,
    detail: Option<Detail>,
    /// Other envelope fields.
    extra: Tree,
}

#[derive(Debug, Arbitrary)]
pub enum Detail {
    Fields(Vec<(Choice, DetailValue)>),
    Other(Fragment),
}

#[derive(Debug, Arbitrary)]
pub enum DetailValue {
    Text(Choice),
    Entities(Vec<Option<Fragment>>),
    Any(Fragment),
}

/// The envelope as a JSON value (the SQS target puts it in message bodies).
pub fn envelope(input: &Input, vocabulary: &[&str]) -> Value {
    let mut map = match input.extra.value(vocabulary) {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    if let Some(id) = &input.id {
        map.insert("id".into(), id.value(vocabulary));
    }
    if let Some(source) = &input.source {
        map.insert("source".into(), source.resolve(&SOURCES, vocabulary).into());
    }
    if let Some(detail_type) = &input.detail_type {
        map.insert("detail-type".into(), detail_type.resolve(&DETAIL_TYPES, vocabulary).into());
    }
    if let Some(time) = &input.time {
        map.insert("time".into(), time.resolve(vocabulary).into());
    }
    match &input.detail {
        None => {}
        Some(Detail::Other(fragment)) => {
            map.insert("detail".into(), fragment.value(vocabulary));
        }
        Some(Detail::Fields(fields)) => {
            let mut detail = Map::new();
            for (name, value) in fields {
                let value = match value {
                    DetailValue::Text(choice) => choice.resolve(VOCABULARY, vocabulary).into(),
                    DetailValue::Entities(entities) => entities
                        .iter()
                        .map(|e| match e {
                            Some(value) => json!({ "entityValue": value.value(vocabulary) }),
                            None => json!({}),
                        })
                        .collect(),
                    DetailValue::Any(fragment) => fragment.value(vocabulary),
                };
                detail.insert(name.resolve(DETAIL_FIELDS, vocabulary).to_string(), value);
            }
            map.insert("detail".into(), Value::Object(detail));
        }
    }
    Value::Object(map)
}

pub fn render(input: &Input, vocabulary: &[&str]) -> String {
    envelope(input, vocabulary).to_string()
}

/// A body is a message or an error that names the message (its `id`, when it has one) and the
/// field; a message names its instances; a readable `time` is a real instant.
pub fn check(text: &str) {
    let value: Option<Value> = serde_json::from_str(text).ok();
    let object = value.as_ref().and_then(Value::as_object);
    match parse(text) {
        Ok(message) => {
            let object = object.expect("a message comes from a JSON object");
            for id in message.instance_ids() {
                assert!(!id.is_empty(), "{message:?}");
            }
            if let Message::ScheduledChange { instance_ids, .. } = &message {
                assert!(!instance_ids.is_empty());
            }
            if let Message::CapacityBlockExpiry { reservation_id, .. } = &message {
                assert!(reservation_id.starts_with("cr-"), "{message:?}");
            }
            if let Message::SpotInterruption { time: Some(t), .. }
            | Message::CapacityReservationInterruption { time: Some(t), .. }
            | Message::CapacityBlockExpiry { time: Some(t), .. }
            | Message::CapacityBlockExpiry { end: Some(t), .. } = &message
            {
                // What a parsed time says, written and read again, is the same instant.
                assert_eq!(parse_rfc3339(&t.to_string()).map(|again| again.0 / 1000), Some(t.0 / 1000), "{object:?}");
            }
            let _ = message.to_string();
        }
        Err(ParseError::TooLarge(over)) => {
            assert!(text.len() as u64 > dovetail_core::ceilings::QUEUE_MESSAGE_BYTES.max, "{over}");
        }
        Err(ParseError::Json(why)) => {
            assert!(object.is_none(), "a JSON object was refused as not one: {why}");
        }
        Err(e @ ParseError::Field { .. }) => {
            let object = object.expect("field errors are about a JSON object");
            let ParseError::Field { id, field, problem } = &e else { unreachable!() };
            assert_eq!(id.as_deref(), object.get("id").and_then(Value::as_str), "{e}");
            assert!(!field.is_empty() && !problem.is_empty(), "{e}");
            let said = e.to_string();
            assert!(said.contains(field) && id.as_deref().is_none_or(|id| said.contains(id)), "{said}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detail_fields_are_the_ones_the_parser_reads() {
        assert_eq!(DETAIL_FIELDS.first(), Some(&"instance-id"));
        assert_eq!(DETAIL_FIELDS.last(), Some(&"startTime"));
    }

    #[test]
    fn bad_events_name_the_message_and_the_field() {
        let no_instance = r#"{"id": "m-1", "source": "aws.ec2", "detail-type": "EC2 Instance Rebalance Recommendation", "detail": {}}"#;
        assert_eq!(
            parse(no_instance).unwrap_err().to_string(),
            "EventBridge message m-1: field `detail.instance-id` is missing"
        );
        let entities = r#"{"id": "m-2", "source": "aws.health", "detail-type": "AWS Health Event",
            "detail": {"service": "EC2", "eventTypeCategory": "scheduledChange", "affectedEntities": [{"entityValue": 7}]}}"#;
        assert_eq!(
            parse(entities).unwrap_err().to_string(),
            "EventBridge message m-2: field `detail.affectedEntities[].entityValue` is not a string"
        );
        for text in [no_instance, entities, "[]", "{\"source\": 1}"] {
            check(text);
        }
    }
}
