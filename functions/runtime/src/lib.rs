//! What the three Lambda mains share, so each `main.rs` only wires adapters to a reconciler:
//! JSON logs that carry every decision's sentence ([`logging`]), CloudWatch Embedded Metric
//! Format lines ([`metrics`]) and the SQS batch shapes ([`sqs`]).

pub mod logging;
pub mod metrics;
pub mod sqs;
