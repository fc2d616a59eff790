//! NodePools and EC2NodeClasses as the API server hands them to the functions
//! (`dovetail_api::crd::from_value`, then `validate` and `to_core`), and Karpenter's objects —
//! NodePools, EC2NodeClasses, NodeOverlays, NodeClaims — given to `dovetail import`
//! (`dovetail_api::import::convert`).

use dovetail_api::crd::{from_value, EC2NodeClass, FieldError, NodeOverlay, NodePool};
use dovetail_api::import;
use serde_json::Value;

use crate::harness::Target;
use crate::objects::{self, Documents};

pub const TARGET: Target<Documents> = Target {
    name: "crd_objects",
    fixtures: &["shared/api/tests/fixtures", "infra/k8s/examples"],
    vocabulary: objects::VOCABULARY,
    render: objects::render,
    check,
};

/// Every problem of an object is an error naming its kind, its name as written (empty when it has
/// none; a name that is not a string is read leniently, `1` as "1", so only a string is compared)
/// and, for validation, the field.
fn named(errors: &[FieldError], kind: &str, doc: &Value, decoding: bool) {
    let name = match doc.pointer("/metadata/name") {
        None | Some(Value::Null) => Some(""),
        Some(Value::String(name)) => Some(name.as_str()),
        Some(_) => None,
    };
    for e in errors {
        assert_eq!(e.kind, kind, "{e}");
        assert!(name.is_none_or(|name| name == e.name), "{e}");
        assert!(!e.message.is_empty(), "{e}");
        // A decoding error names the field in its path, or in its message when the decoder could
        // only say which field of the object it missed.
        assert!(!e.field.is_empty() || (decoding && e.message.contains('`')), "no field named: {e}");
    }
}

fn typed<T: serde::de::DeserializeOwned>(kind: &'static str, doc: &Value) -> Option<T> {
    match from_value::<T>(kind, doc) {
        Ok(t) => Some(t),
        Err(e) => {
            named(&e, kind, doc, true);
            None
        }
    }
}

/// One object from the API server: decoded, validated and converted, or refused with errors
/// that name it; a pool converted keeps its name.
pub fn check_object(doc: &Value) {
    match doc.get("kind").and_then(Value::as_str) {
        Some("NodePool") => {
            let Some(pool) = typed::<NodePool>("NodePool", doc) else { return };
            if let Err(errors) = pool.validate() {
                named(&errors, "NodePool", doc, false);
            }
            match pool.to_core() {
                Ok(core) => assert_eq!(Some(&core.name), pool.metadata.name.as_ref()),
                Err(errors) => named(&errors, "NodePool", doc, false),
            }
        }
        Some("EC2NodeClass") => {
            let Some(class) = typed::<EC2NodeClass>("EC2NodeClass", doc) else { return };
            if let Err(errors) = class.validate() {
                named(&errors, "EC2NodeClass", doc, false);
            }
            if let Err(errors) = class.to_core() {
                named(&errors, "EC2NodeClass", doc, false);
            }
        }
        _ => {}
    }
}

/// Each document as an object of the API server, then the whole text through `dovetail import`,
/// whose every converted object must be one the functions accept.
pub fn check(text: &str) {
    for doc in crate::tree::documents(text).unwrap_or_default() {
        check_object(&doc);
    }
    let report = import::convert([("input.yaml", text)]);
    for warning in &report.warnings {
        assert!(!warning.object.is_empty() && !warning.message.is_empty(), "{warning}");
    }
    for converted in &report.objects {
        let yaml = converted.to_yaml();
        let value: Value = serde_yaml_ng::from_str(&yaml).expect("a converted object reads back");
        let accepted = match converted.kind() {
            "NodePool" => from_value::<NodePool>("NodePool", &value).map(|p| p.to_core().map(|_| ())),
            "NodeOverlay" => from_value::<NodeOverlay>("NodeOverlay", &value).map(|o| o.to_core().map(|_| ())),
            _ => from_value::<EC2NodeClass>("EC2NodeClass", &value).map(|c| c.to_core().map(|_| ())),
        };
        assert!(matches!(accepted, Ok(Ok(()))), "import wrote an object the functions refuse: {accepted:?}\n{yaml}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bad_objects_name_the_object_and_the_field() {
        let pool = json!({"apiVersion": "dovetail.dev/v1", "kind": "NodePool", "metadata": {"name": "web"},
            "spec": {"disruption": {"budgets": [{"nodes": "ten%"}]},
                     "template": {"spec": {"nodeClassRef": {"group": "dovetail.dev", "kind": "EC2NodeClass", "name": "default"},
                                           "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "Gt", "values": ["spot"]}]}}}});
        let errors = from_value::<NodePool>("NodePool", &pool).unwrap().validate().unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert!(fields.contains(&"spec.disruption.budgets[0].nodes"), "{errors:?}");
        assert!(fields.iter().any(|f| f.starts_with("spec.template.spec.requirements[0]")), "{errors:?}");
        assert!(errors.iter().all(|e| e.to_string().starts_with("NodePool \"web\": ")), "{errors:?}");

        let misfit = json!({"apiVersion": "dovetail.dev/v1", "kind": "EC2NodeClass", "metadata": {"name": "c"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "r", "subnetSelectorTerms": "all",
                     "securityGroupSelectorTerms": [{"id": "sg-1"}]}});
        let e = from_value::<EC2NodeClass>("EC2NodeClass", &misfit).unwrap_err().remove(0);
        assert_eq!(
            (e.kind, e.name.as_str(), e.field.as_str()),
            ("EC2NodeClass", "c", "spec.subnetSelectorTerms"),
            "{e}"
        );
        check_object(&pool);
        check_object(&misfit);
    }
}
