//! Dovetail's AWS adapters, implementing the decision core's ports
//! (`dovetail_core::reconcile::ports`): the only crate that links AWS SDKs.
//!
//! - [`ec2::Ec2Cloud`]: `Cloud` — the live catalog and prices, EC2NodeClass resolution, launch
//!   templates with AL2023 user data, CreateFleet, instance lookups by tag, termination.
//! - [`dynamo::DynamoStore`]: `Store` — NodeClaims with conditional writes, the unavailable
//!   offerings, the provisioning lease; one table, documented in [`dynamo`].
//! - [`sqs::SqsQueue`]: `Queue` — delayed resume messages.
//! - [`eks::Eks`]: DescribeCluster and bearer tokens, as plain data for the Kubernetes adapter.
//! - [`iam::InstanceProfiles`]: the instance profiles made for EC2NodeClass roles (used by
//!   `Ec2Cloud` as it resolves classes and by the sweeper's clean-up).
//! - [`config::Config`]: the environment variables, read once at the binary edge.

pub mod clients;
pub mod config;
pub mod dynamo;
pub mod ec2;
pub mod eks;
pub mod error;
pub mod iam;
pub mod sqs;

pub use clients::{load_sdk_config, Clients};
pub use config::Config;
pub use dynamo::DynamoStore;
pub use ec2::Ec2Cloud;
pub use eks::{ClusterAccess, ClusterFacts, Eks};
pub use error::{AwsError, AwsResult};
pub use sqs::SqsQueue;
