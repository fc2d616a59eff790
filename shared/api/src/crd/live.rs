//! NodePools and EC2NodeClasses as the API server returns them (or as any JSON value holds
//! them): typed one object at a time, so one that does not fit the types is reported on its own
//! and never hides the others.

use serde::de::DeserializeOwned;

use super::FieldError;

/// Decodes one object of `kind` (`NodePool`, `EC2NodeClass`). A value that does not fit the
/// Rust type (the CRD schema let through something the types do not accept) is one
/// [`FieldError`] naming the field when the decoder can tell which (`spec.weight`), else the
/// object as a whole (empty field). A Karpenter field Dovetail refuses ([`super::refused`]) is
/// an error naming it, one per field, rather than dropped.
pub fn from_value<T: DeserializeOwned>(kind: &'static str, value: &serde_json::Value) -> Result<T, Vec<FieldError>> {
    let name = value.pointer("/metadata/name").and_then(|v| v.as_str()).unwrap_or_default().to_string();
    let typed = crate::decode::with_path(value).map_err(|text| {
        let (field, message) = split_path(&text);
        vec![FieldError { kind, name, field, message }]
    })?;
    let refused = super::refused::refused_fields::<T>(kind, value);
    if refused.is_empty() {
        Ok(typed)
    } else {
        Err(refused)
    }
}

/// The decoder writes `spec.template.spec.weight: invalid type: …` when it knows the field and a
/// bare message otherwise. The path ends where one of serde's messages starts (a map key in the
/// path may hold spaces or `: `, as AWS tag keys do); failing that, a path never contains
/// whitespace, a message's first words do.
fn split_path(text: &str) -> (String, String) {
    const MESSAGES: [&str; 7] = [
        "invalid type",
        "invalid value",
        "invalid length",
        "unknown variant",
        "unknown field",
        "missing field",
        "duplicate field",
    ];
    let before_message = text
        .match_indices(": ")
        .map(|(i, _)| i)
        .find(|&i| i > 0 && MESSAGES.iter().any(|m| text[i + 2..].starts_with(m)));
    if let Some(i) = before_message {
        return (text[..i].to_string(), text[i + 2..].to_string());
    }
    match text.split_once(": ") {
        Some((path, rest)) if !path.is_empty() && !path.contains(char::is_whitespace) => {
            (path.to_string(), rest.to_string())
        }
        _ => (String::new(), text.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{EC2NodeClass, NodePool};
    use serde_json::json;

    #[test]
    fn valid_objects_decode() {
        let np: NodePool = from_value(
            "NodePool",
            &json!({"apiVersion": "dovetail.dev/v1", "kind": "NodePool", "metadata": {"name": "default", "generation": 3},
                    "spec": {"template": {"spec": {"nodeClassRef": {"group": "dovetail.dev", "kind": "EC2NodeClass", "name": "default"},
                                                   "requirements": []}}}}),
        )
        .unwrap();
        assert_eq!(np.metadata.generation, Some(3));
        assert!(np.to_core().is_ok());
    }

    #[test]
    fn misfits_name_the_field() {
        let e = from_value::<NodePool>(
            "NodePool",
            &json!({"apiVersion": "dovetail.dev/v1", "kind": "NodePool", "metadata": {"name": "bad"},
                    "spec": {"weight": "heavy", "template": {"spec": {"nodeClassRef": {"group": "dovetail.dev", "kind": "EC2NodeClass", "name": "x"}, "requirements": []}}}}),
        )
        .unwrap_err()
        .remove(0);
        assert_eq!((e.kind, e.name.as_str(), e.field.as_str()), ("NodePool", "bad", "spec.weight"), "{e}");
        let e = from_value::<EC2NodeClass>(
            "EC2NodeClass",
            &json!({"apiVersion": "dovetail.dev/v1", "kind": "EC2NodeClass", "metadata": {"name": "c"}}),
        )
        .unwrap_err()
        .remove(0);
        assert_eq!(e.field, "", "{e}");
        assert!(e.message.contains("spec"), "{e}");
    }

    #[test]
    fn refused_fields_are_errors_naming_each() {
        let errors = from_value::<NodePool>(
            "NodePool",
            &json!({"apiVersion": "dovetail.dev/v1", "kind": "NodePool", "metadata": {"name": "fixed"},
                    "spec": {"replicas": 3, "unheardOf": true,
                             "template": {"spec": {"nodeClassRef": {"group": "dovetail.dev", "kind": "EC2NodeClass", "name": "x"}, "requirements": []}}}}),
        )
        .unwrap_err();
        // A field Karpenter 1.14 does not have either is no refusal: the API server prunes it.
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!((errors[0].name.as_str(), errors[0].field.as_str()), ("fixed", "spec.replicas"));
        assert!(errors[0].message.contains("static NodePools"), "{}", errors[0]);
    }

    /// Found by the `crd_objects` fuzz target: a map key with a space in the path lost the field.
    #[test]
    fn misfits_under_keys_with_spaces_name_the_field() {
        let e = from_value::<EC2NodeClass>(
            "EC2NodeClass",
            &json!({"apiVersion": "dovetail.dev/v1", "kind": "EC2NodeClass", "metadata": {"name": "c"},
                    "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                             "subnetSelectorTerms": [{"id": "subnet-1"}], "securityGroupSelectorTerms": [{"id": "sg-1"}],
                             "tags": {"cost center: eu": []}}}),
        )
        .unwrap_err()
        .remove(0);
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            ("spec.tags.cost center: eu", "invalid type: sequence, expected a string"),
            "{e}"
        );
    }
}
