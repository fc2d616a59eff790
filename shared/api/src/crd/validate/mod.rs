//! Validation of NodePools, EC2NodeClasses and NodeOverlays.
//!
//! These are the rules Karpenter enforces through its CRD schema (OpenAPI patterns and CEL
//! rules) and its runtime validation, restated in Rust. Dovetail needs them client-side too: the
//! CLI checks manifests before they reach a cluster, and the functions refuse to act on an
//! object the API server let through (an older CRD, a cluster without CEL, a hand-built object)
//! rather than guess. Every problem is reported, not just the first, each naming the object and
//! the field so it can be fixed in one pass.
//!
//! Each kind's rules are in a file of its own (`nodepool.rs`, `nodeclass.rs`); this one holds the
//! error type and what both use.

mod nodeclass;
mod nodeoverlay;
mod nodepool;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::meta::{check_metadata, NameRule};

/// One problem in one field of a NodePool or EC2NodeClass.
///
/// Displays as `NodePool "default": spec.disruption.budgets[0].nodes: "ten%" is neither an
/// integer nor a percentage`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} \"{name}\": {field}: {message}")]
pub struct FieldError {
    /// Kind of the object, `NodePool`, `EC2NodeClass` or `NodeOverlay`.
    pub kind: &'static str,
    /// Name of the object (empty if it has none).
    pub name: String,
    /// Path of the field, e.g. `spec.template.spec.requirements[2].minValues`.
    pub field: String,
    /// What is wrong, for a person.
    pub message: String,
}

/// Accumulates the errors of one object.
pub(super) struct Errors {
    kind: &'static str,
    name: String,
    list: Vec<FieldError>,
}

impl Errors {
    /// Starts with the object's metadata: a name is required, and it, the labels and the
    /// annotations follow Kubernetes' rules ([`crate::crd::meta`]).
    fn new(kind: &'static str, meta: &ObjectMeta) -> Self {
        let name = meta.name.as_deref();
        let mut errors = Self { kind, name: name.unwrap_or_default().to_owned(), list: Vec::new() };
        if name.is_none_or(str::is_empty) {
            errors.push("metadata.name", "is required");
        }
        check_metadata(meta, NameRule::Subdomain, &mut |field, message| errors.push(field, message));
        errors
    }

    fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.list.push(FieldError {
            kind: self.kind,
            name: self.name.clone(),
            field: field.into(),
            message: message.into(),
        });
    }

    fn finish(self) -> Result<(), Vec<FieldError>> {
        if self.list.is_empty() {
            Ok(())
        } else {
            Err(self.list)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::nodeclass::check_volume_size;
    use super::nodepool::is_budget_duration;
    use super::*;

    #[test]
    fn budget_durations() {
        for ok in ["8h", "30m", "1h30m", "10h0m0s", "5m0s"] {
            assert!(is_budget_duration(ok), "{ok}");
        }
        for bad in ["30s", "1m1h", "1h1h", "", "0s", "1.5h"] {
            assert!(!is_budget_duration(bad), "{bad}");
        }
    }

    #[test]
    fn volume_sizes() {
        assert!(check_volume_size("100Gi").is_ok());
        assert!(check_volume_size("1T").is_ok());
        assert!(check_volume_size("0Gi").is_err());
        assert!(check_volume_size("100GB").is_err());
        assert!(check_volume_size("65T").is_err());
        assert!(check_volume_size("64000G").is_ok());
        assert_eq!(check_volume_size("64001G").unwrap_err(), r#""64001G" is outside 1Gi-64T"#);
        assert_eq!(
            check_volume_size("99999999999999999999Ti").unwrap_err(),
            r#""99999999999999999999Ti" is outside 1Gi-64T"#
        );
        // Karpenter's schema takes whole numbers of these four units only.
        for form in ["1.5Ti", "100e9", "100", "Gi", "1Mi"] {
            assert!(check_volume_size(form).unwrap_err().contains("is not a whole number of Gi, G, Ti or T"), "{form}");
        }
    }

    #[test]
    fn display_names_object_and_field() {
        let err = FieldError {
            kind: "NodePool",
            name: "default".into(),
            field: "spec.disruption.budgets[0].nodes".into(),
            message: "\"ten%\" is neither an integer nor a percentage".into(),
        };
        assert_eq!(
            err.to_string(),
            "NodePool \"default\": spec.disruption.budgets[0].nodes: \"ten%\" is neither an \
             integer nor a percentage"
        );
    }
}
