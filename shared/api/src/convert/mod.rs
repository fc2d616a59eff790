//! Conversions from Kubernetes objects (k8s-openapi types) into the core model.
//!
//! Each conversion reads exactly what kube-scheduler honours for placement, so a plan made from
//! the converted model agrees with where the pods will really land. Errors carry the field path
//! (`spec.containers[1].resources.requests.memory: …`) so a user can find the bad value; callers
//! that convert a template inside a bigger object prefix it with [`ConvertError::within`].

pub mod daemonset;
pub mod node;
pub mod pdb;
pub mod pod;
pub mod provisionable;
mod selector;
pub mod volumes;

pub use daemonset::daemonset_from_k8s;
pub use node::node_from_k8s;
pub use pdb::pdb_from_k8s;
pub use pod::{effective_requests, pod_from_k8s, pod_from_spec};
pub use provisionable::{displaced_by_node_deletion, is_provisionable, provisionable, NotProvisionable};
pub use selector::{label_selector, node_selector_term, MATCHES_NOTHING_KEY};
pub use volumes::{StorageIndex, TemplateClaim};

use crate::crd::meta::{check_metadata, NameRule};

use dovetail_core::ceilings::OverCeiling;
use dovetail_core::requirements::RequirementError;
use dovetail_core::resources::QuantityError;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use thiserror::Error;

/// A Kubernetes timestamp (`creationTimestamp`, `startTime`, a condition's transition) as the
/// core's time.
pub fn time(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> dovetail_core::time::Time {
    dovetail_core::time::Time(t.0.as_millisecond())
}

/// A Kubernetes object that cannot be converted. Displays as `<path>: <problem>`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{path}: {kind}")]
pub struct ConvertError {
    /// Field path in the object's JSON spelling, e.g. `spec.containers[1].resources.requests.memory`.
    pub path: String,
    pub kind: ConvertErrorKind,
}

/// What is wrong with the field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConvertErrorKind {
    /// Displays as `"12Gx" is not a valid Kubernetes quantity: <why>`.
    #[error(transparent)]
    Quantity(#[from] QuantityError),
    /// A node selector requirement with the wrong number of values or a non-integer bound.
    #[error(transparent)]
    Requirement(#[from] RequirementError),
    /// An enum-like string field with a value Kubernetes does not define.
    #[error("{value:?} is not a valid {what} (expected one of: {expected})")]
    Unknown { what: &'static str, value: String, expected: &'static str },
    /// Anything the API server's validation would reject.
    #[error("{0}")]
    Invalid(String),
    /// More than Dovetail supports (`spec.replicas` over the pods ceiling).
    #[error(transparent)]
    OverCeiling(#[from] OverCeiling),
}

impl ConvertError {
    pub fn new(path: impl Into<String>, kind: impl Into<ConvertErrorKind>) -> Self {
        ConvertError { path: path.into(), kind: kind.into() }
    }

    pub fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConvertError { path: path.into(), kind: ConvertErrorKind::Invalid(message.into()) }
    }

    pub(crate) fn unknown(path: impl Into<String>, what: &'static str, value: &str, expected: &'static str) -> Self {
        ConvertError { path: path.into(), kind: ConvertErrorKind::Unknown { what, value: value.to_string(), expected } }
    }

    /// Prefixes the path with the field that holds the converted part, so an error found in a
    /// Deployment's pod template reads `spec.template.spec.containers[0]…`.
    pub fn within(mut self, prefix: &str) -> Self {
        self.path = if self.path.is_empty() {
            prefix.to_string()
        } else if self.path.starts_with('[') {
            format!("{prefix}{}", self.path)
        } else {
            format!("{prefix}.{}", self.path)
        };
        self
    }
}

/// The first problem of an object's metadata under Kubernetes' rules (see [`crate::crd::meta`]).
pub fn metadata(meta: &ObjectMeta, rule: NameRule) -> Result<(), ConvertError> {
    let mut first = None;
    check_metadata(meta, rule, &mut |field, message| {
        first.get_or_insert((field, message));
    });
    match first {
        Some((field, message)) => Err(ConvertError::invalid(field, message)),
        None => Ok(()),
    }
}

/// `result.map_err(|e| e.within(..))` with the prefix formatted only on error.
pub(crate) trait Within<T> {
    fn within(self, prefix: impl FnOnce() -> String) -> Result<T, ConvertError>;
}

impl<T> Within<T> for Result<T, ConvertError> {
    fn within(self, prefix: impl FnOnce() -> String) -> Result<T, ConvertError> {
        self.map_err(|e| e.within(&prefix()))
    }
}
