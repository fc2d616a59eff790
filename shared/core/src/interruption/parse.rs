//! Typed parsing of the EventBridge events the interruption queue receives.
//!
//! The SQS body is the EventBridge envelope itself (`{version, id, detail-type, source, account,
//! time, region, resources, detail}`). Fields are read from a `serde_json::Value` rather than
//! derived structs so a missing field can be reported by name together with the message id: the
//! DLQ reason must say exactly which message was bad and why.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

use crate::ceilings::{OverCeiling, QUEUE_MESSAGE_BYTES};
use crate::time::Time;

pub const SOURCE_EC2: &str = "aws.ec2";
pub const SOURCE_HEALTH: &str = "aws.health";
pub const SPOT_INTERRUPTION: &str = "EC2 Spot Instance Interruption Warning";
pub const REBALANCE_RECOMMENDATION: &str = "EC2 Instance Rebalance Recommendation";
pub const STATE_CHANGE: &str = "EC2 Instance State-change Notification";
pub const CAPACITY_RESERVATION_INTERRUPTION: &str = "EC2 Capacity Reservation Instance Interruption Warning";
pub const HEALTH_EVENT: &str = "AWS Health Event";
/// EC2's warning, 40 minutes before a Capacity Block ends, that the instances still running in it
/// are terminated from 10 minutes later. AWS's documentation spells it two ways (the EventBridge
/// event list without "Reservation", the EC2 guide's example with it), so both are read and the
/// rule matches both: a rule on the wrong spelling would never fire.
pub const CAPACITY_BLOCK_EXPIRY: [&str; 2] =
    ["Capacity Block Expiration Warning", "Capacity Block Reservation Expiration Warning"];

/// One interruption-queue message, typed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// Two-minute warning before EC2 reclaims a spot instance.
    SpotInterruption {
        instance_id: String,
        /// `terminate`, `stop` or `hibernate`.
        action: String,
        /// When EventBridge sent it (the envelope's `time`): the two minutes count from here. An
        /// unreadable value is `None` (the drain then counts from when it decided) rather than an
        /// error that would send a real interruption to the DLQ.
        time: Option<Time>,
    },
    /// The spot instance is at elevated risk of interruption.
    RebalanceRecommendation { instance_id: String },
    /// The instance changed state (`pending`, `running`, `stopping`, `stopped`, `shutting-down`,
    /// `terminated`).
    StateChange { instance_id: String, state: String },
    /// An AWS Health scheduled change (retirement, maintenance) for EC2 instances.
    ScheduledChange {
        instance_ids: Vec<String>,
        /// e.g. `AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED`.
        event_type_code: String,
        /// As AWS Health writes it (RFC 1123 style); shown to people only.
        start_time: Option<String>,
    },
    /// Two-minute warning before an interruptible capacity reservation takes the instance back.
    CapacityReservationInterruption {
        instance_id: String,
        /// When EventBridge sent it (the envelope's `time`), read as for a spot warning.
        time: Option<Time>,
    },
    /// A Capacity Block ends soon: EC2 terminates every instance still running in it from 10
    /// minutes after this warning (30 minutes before `end`).
    CapacityBlockExpiry {
        /// `cr-…`: the block, whose instances the event does not list.
        reservation_id: String,
        /// When the block ends (`detail.end-date`); `None` when unreadable, as for `time`.
        end: Option<Time>,
        /// When EventBridge sent it (the envelope's `time`).
        time: Option<Time>,
    },
    /// Anything else on the queue: ignored with a log line, never an error.
    Unknown { source: String, detail_type: String },
}

impl Message {
    /// The message's kind as Karpenter's `karpenter_interruption_received_messages_total` labels
    /// it (`message_type`), for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::SpotInterruption { .. } => "spot_interrupted",
            Message::RebalanceRecommendation { .. } => "rebalance_recommendation",
            Message::StateChange { .. } => "instance_state_change",
            Message::ScheduledChange { .. } => "scheduled_change",
            Message::CapacityReservationInterruption { .. } => "capacity_reservation_interrupted",
            Message::CapacityBlockExpiry { .. } => "capacity_block_expiring",
            Message::Unknown { .. } => "no_op",
        }
    }

    /// The instances the message names. A Capacity Block warning names none: its instances are
    /// those of the claims running in [`Message::reservation_id`].
    pub fn instance_ids(&self) -> Vec<&str> {
        match self {
            Message::SpotInterruption { instance_id, .. }
            | Message::RebalanceRecommendation { instance_id }
            | Message::StateChange { instance_id, .. }
            | Message::CapacityReservationInterruption { instance_id, .. } => vec![instance_id.as_str()],
            Message::ScheduledChange { instance_ids, .. } => instance_ids.iter().map(String::as_str).collect(),
            Message::CapacityBlockExpiry { .. } | Message::Unknown { .. } => vec![],
        }
    }

    /// The capacity reservation the message is about as a whole, if it is about one.
    pub fn reservation_id(&self) -> Option<&str> {
        match self {
            Message::CapacityBlockExpiry { reservation_id, .. } => Some(reservation_id),
            _ => None,
        }
    }
}

impl fmt::Display for Message {
    /// A short description for logs and decision sentences.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Message::SpotInterruption { instance_id, action, .. } => {
                write!(f, "spot interruption warning ({action}) for {instance_id}")
            }
            Message::RebalanceRecommendation { instance_id } => write!(f, "rebalance recommendation for {instance_id}"),
            Message::StateChange { instance_id, state } => write!(f, "state change of {instance_id} to {state}"),
            Message::ScheduledChange { instance_ids, event_type_code, .. } => {
                write!(f, "AWS Health scheduled change {event_type_code} for {}", instance_ids.join(", "))
            }
            Message::CapacityReservationInterruption { instance_id, .. } => {
                write!(f, "capacity reservation interruption warning for {instance_id}")
            }
            Message::CapacityBlockExpiry { reservation_id, .. } => {
                write!(f, "Capacity Block expiration warning for {reservation_id}")
            }
            Message::Unknown { source, detail_type } => write!(f, "unknown event {source:?} / {detail_type:?}"),
        }
    }
}

/// Why one message could not be read. The message goes to the DLQ with this as its reason; the
/// rest of the batch is unaffected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("message is not a JSON EventBridge event (id unreadable): {0}")]
    Json(String),
    #[error("EventBridge message {}: field `{field}` is {problem}", .id.as_deref().unwrap_or("(no id)"))]
    Field { id: Option<String>, field: &'static str, problem: &'static str },
    /// Not parsed at all: larger than any message Dovetail's queues carry.
    #[error("message body not parsed: {0}")]
    TooLarge(OverCeiling),
}

/// Refuses a body over [`QUEUE_MESSAGE_BYTES`] before any JSON is parsed from it.
pub fn within_ceiling(body: &str) -> Result<(), ParseError> {
    QUEUE_MESSAGE_BYTES.check(body.len() as u64).map_err(ParseError::TooLarge)
}

/// Parses an SQS message body holding an EventBridge event.
pub fn parse(body: &str) -> Result<Message, ParseError> {
    within_ceiling(body)?;
    let v: Value = serde_json::from_str(body).map_err(|e| ParseError::Json(e.to_string()))?;
    if !v.is_object() {
        return Err(ParseError::Json("the body is JSON but not an object".into()));
    }
    let id = v.get("id").and_then(Value::as_str).map(str::to_string);
    let err = |field: &'static str, problem: &'static str| ParseError::Field { id: id.clone(), field, problem };
    let text = |value: Option<&Value>, field: &'static str| -> Result<String, ParseError> {
        match value {
            None | Some(Value::Null) => Err(err(field, "missing")),
            Some(Value::String(s)) if s.is_empty() => Err(err(field, "empty")),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(err(field, "not a string")),
        }
    };

    // The envelope's routing fields are required of every event, known or not: without them we
    // cannot even say what we are ignoring.
    let source = text(v.get("source"), "source")?;
    let detail_type = text(v.get("detail-type"), "detail-type")?;
    let detail = v.get("detail");
    let detail_field = |name: &'static str| detail.and_then(|d| d.get(name));

    match (source.as_str(), detail_type.as_str()) {
        (SOURCE_EC2, SPOT_INTERRUPTION) => Ok(Message::SpotInterruption {
            instance_id: text(detail_field("instance-id"), "detail.instance-id")?,
            action: text(detail_field("instance-action"), "detail.instance-action")?,
            time: v.get("time").and_then(Value::as_str).and_then(parse_rfc3339),
        }),
        (SOURCE_EC2, REBALANCE_RECOMMENDATION) => Ok(Message::RebalanceRecommendation {
            instance_id: text(detail_field("instance-id"), "detail.instance-id")?,
        }),
        (SOURCE_EC2, STATE_CHANGE) => Ok(Message::StateChange {
            instance_id: text(detail_field("instance-id"), "detail.instance-id")?,
            state: text(detail_field("state"), "detail.state")?,
        }),
        (SOURCE_EC2, CAPACITY_RESERVATION_INTERRUPTION) => Ok(Message::CapacityReservationInterruption {
            instance_id: text(detail_field("instance-id"), "detail.instance-id")?,
            time: v.get("time").and_then(Value::as_str).and_then(parse_rfc3339),
        }),
        (SOURCE_EC2, kind) if CAPACITY_BLOCK_EXPIRY.contains(&kind) => {
            let reservation_id = text(detail_field("capacity-reservation-id"), "detail.capacity-reservation-id")?;
            // An id that is not one would match no claim, and the block's nodes would be left
            // to EC2 without a word.
            if !reservation_id.starts_with("cr-") {
                return Err(err("detail.capacity-reservation-id", "not a capacity reservation id (cr-…)"));
            }
            Ok(Message::CapacityBlockExpiry {
                reservation_id,
                end: detail_field("end-date").and_then(Value::as_str).and_then(parse_rfc3339),
                time: v.get("time").and_then(Value::as_str).and_then(parse_rfc3339),
            })
        }
        (SOURCE_HEALTH, HEALTH_EVENT) => {
            // Health carries every service's notices; only EC2 scheduled changes concern nodes. The
            // rest is not ours to act on, so it is "unknown" (ignored), not malformed.
            let service = detail_field("service").and_then(Value::as_str);
            let category = detail_field("eventTypeCategory").and_then(Value::as_str);
            if service != Some("EC2") || category != Some("scheduledChange") {
                return Ok(Message::Unknown { source, detail_type });
            }
            let entities = match detail_field("affectedEntities") {
                Some(Value::Array(a)) => a,
                None | Some(Value::Null) => return Err(err("detail.affectedEntities", "missing")),
                Some(_) => return Err(err("detail.affectedEntities", "not an array")),
            };
            let mut instance_ids = Vec::with_capacity(entities.len());
            for e in entities {
                instance_ids.push(text(e.get("entityValue"), "detail.affectedEntities[].entityValue")?);
            }
            if instance_ids.is_empty() {
                return Err(err("detail.affectedEntities", "empty"));
            }
            Ok(Message::ScheduledChange {
                instance_ids,
                event_type_code: detail_field("eventTypeCode").and_then(Value::as_str).unwrap_or("").to_string(),
                start_time: detail_field("startTime").and_then(Value::as_str).map(str::to_string),
            })
        }
        _ => Ok(Message::Unknown { source, detail_type }),
    }
}

/// Read here as EventBridge writes it; the reader is time's own.
pub use crate::time::parse_rfc3339;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_with_display() {
        for s in ["2026-11-21T10:49:00Z", "1970-01-01T00:00:00Z", "2000-02-29T23:59:59Z", "2024-12-31T00:00:01Z"] {
            assert_eq!(parse_rfc3339(s).unwrap().to_string(), s);
        }
        assert_eq!(parse_rfc3339("2026-11-21T10:49:00.250Z").unwrap(), Time(1_795_258_140_250));
        for bad in ["", "2026-11-21", "2026-13-01T00:00:00Z", "2026-11-21T10:49:00+02:00", "yyyy-mm-ddThh:mm:ssZ"] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_body_over_the_message_ceiling_is_refused_unparsed() {
        // A real spot warning padded past 256 KiB: valid JSON, refused before parsing.
        let padding = "x".repeat(256 * 1024);
        let body = format!(
            r#"{{"id": "1", "source": "aws.ec2", "detail-type": "{SPOT_INTERRUPTION}", "detail": {{"instance-id": "i-1", "instance-action": "terminate", "pad": "{padding}"}}}}"#
        );
        let e = parse(&body).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "message body not parsed: {} bytes (256.2 KiB) is more than the supported 256 KiB per queue message",
                body.len()
            )
        );
        let small = body.replace(&padding, "");
        assert!(matches!(parse(&small), Ok(Message::SpotInterruption { .. })));
    }
}
