//! Dovetail's Kubernetes-facing API: the `NodePool` and `EC2NodeClass` custom resources
//! (group `dovetail.dev`, version `v1`), their validation, and the CRDs generated from them.
//!
//! This crate is deliberately light (no AWS SDK, no kube client) so the decision core, the CLI
//! and every function can depend on it without paying for either.

pub mod crd;
