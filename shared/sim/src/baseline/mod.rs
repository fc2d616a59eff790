//! A Cluster Autoscaler-like policy, to compare Dovetail against on the same world and scenario.

mod config;

pub use config::{Config, NodeGroup};
