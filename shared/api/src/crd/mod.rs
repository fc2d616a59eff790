//! The `dovetail.dev/v1` custom resources, and the `dovetail.dev/v1alpha1` NodeOverlay.
//!
//! `NodePool` and `EC2NodeClass` carry the same fields, defaults and meaning as Karpenter v1's
//! `karpenter.sh/v1` `NodePool` and `karpenter.k8s.aws/v1` `EC2NodeClass`, so a Karpenter
//! manifest becomes a Dovetail one by changing only its `apiVersion`. The Karpenter 1.14 fields
//! Dovetail does not have (static `replicas`, `ipPrefixCount`, ...) are refused with an error
//! naming them, never silently dropped ([`refused`]).
//!
//! Defaults live in two places on purpose: in serde (a field missing from YAML deserializes to
//! Karpenter's default, so code never sees an "unset" `expireAfter`) and in the generated CRD
//! schema (`default:`), so objects read back from the API server carry them explicitly too.
//!
//! The CRD YAML under `infra/k8s/crds/` and `infra/helm/dovetail/crds/` (the Helm chart's) is
//! generated from these types; see [`crd_yaml`] and the `crds` integration test, which fails when
//! the committed files drift
//! (`DOVETAIL_BLESS=1 cargo test -p dovetail-api --test crds` rewrites them).

mod duration;
mod ec2nodeclass;
pub mod labels;
mod live;
pub mod meta;
mod nodeclaim;
mod nodeoverlay;
mod nodepool;
mod open_enum;
pub mod refused;
pub use dovetail_core::time::cron as schedule;
mod schema;
mod to_core;
mod validate;

pub use duration::{DurationError, KubeDuration, NillableDuration};
pub use ec2nodeclass::*;
pub use live::from_value;
pub use nodeclaim::*;
pub use nodeoverlay::*;
pub use nodepool::*;
pub use validate::FieldError;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// API group of Dovetail's custom resources.
pub const GROUP: &str = "dovetail.dev";
/// The only served (and stored) version.
pub const VERSION: &str = "v1";
/// `apiVersion` of Dovetail objects.
pub const API_VERSION: &str = "dovetail.dev/v1";
/// `apiVersion` of NodeOverlays, alpha as Karpenter's (`karpenter.sh/v1alpha1`) is.
pub const OVERLAY_API_VERSION: &str = "dovetail.dev/v1alpha1";
/// Karpenter's core API group (`NodePool`, `NodeClaim`).
pub const KARPENTER_GROUP: &str = "karpenter.sh";
/// Karpenter's AWS provider API group (`EC2NodeClass`).
pub const KARPENTER_AWS_GROUP: &str = "karpenter.k8s.aws";
/// Kind of the only node class Dovetail supports.
pub const EC2_NODE_CLASS_KIND: &str = "EC2NodeClass";

/// Every CRD this crate defines, in a stable order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![NodePool::crd(), EC2NodeClass::crd(), NodeClaim::crd(), NodeOverlay::crd()]
}

/// Renders the CRD of `K` as a YAML document, the form committed under `infra/k8s/crds/`.
///
/// The header says the file is generated so nobody edits it by hand.
pub fn crd_yaml<K: CustomResourceExt>() -> String {
    let body = serde_yaml_ng::to_string(&K::crd()).expect("a CRD always serializes to YAML");
    format!(
        "# Generated from the Rust types in shared/api/src/crd by\n\
         # `DOVETAIL_BLESS=1 cargo test -p dovetail-api --test crds`. Do not edit by hand.\n\
         ---\n{body}"
    )
}
