//! What the three Lambda mains share, so each `main.rs` only wires adapters to a reconciler:
//! the handlers over any ports ([`handlers`]), JSON logs that carry every decision's sentence
//! ([`logging`]), CloudWatch Embedded Metric Format lines ([`metrics`]), the SQS batch shapes
//! ([`sqs`]), the wall clock ([`clock`]), the decisions' settings from the environment
//! ([`settings`]) and — with the `aws` feature, which links the AWS SDK
//! and kube-rs — the adapters built from the environment ([`aws`]).
//!
//! Without the feature the crate links neither, so benchmarks and tests of the handlers over
//! in-memory ports build quickly.

#[cfg(feature = "aws")]
pub mod aws;
pub mod clock;
pub mod handlers;
pub mod logging;
pub mod metrics;
pub mod settings;
pub mod sqs;
