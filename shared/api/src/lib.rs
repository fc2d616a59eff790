//! Dovetail's Kubernetes side, without a Kubernetes client:
//! - `crd`: the `NodePool` and `EC2NodeClass` custom resources (group `dovetail.dev`, version
//!   `v1`), their validation, the CRDs generated from them, and their conversion to the core;
//! - `convert`: single k8s-openapi objects (Pod, Node, DaemonSet, volumes) onto
//!   `dovetail_core::model` exactly as kube-scheduler and Karpenter read them;
//! - `import`: Karpenter v1 NodePools and EC2NodeClasses into Dovetail's, with a warning for
//!   everything that does not carry over exactly (`dovetail import`);
//! - `manifest`: multi-document YAML/JSON files (or `kubectl get -o yaml` dumps) into
//!   [`manifest::Inputs`] for `dovetail plan` / `dovetail simulate`;
//! - `decode` (private, beneath `crd` and `manifest`): typed objects from JSON with errors that
//!   name the field; `ignored` (private, beneath `crd` and `import`): the fields a typed decoding
//!   skips.
//!
//! Deliberately light (no AWS SDK, no kube client) so the CLI and every function can depend on it.

pub mod convert;
pub mod crd;
mod decode;
mod ignored;
pub mod import;
pub mod manifest;
