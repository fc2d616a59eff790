//! Small adjustments to the generated JSON schemas, so the CRDs read like Karpenter's.

use schemars::{json_schema, Schema, SchemaGenerator};
use serde_json::Value;

/// Kubernetes' quantity syntax (`1000`, `500m`, `64Gi`, `1e3`).
const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Schema of a resource-name → quantity map (`limits`, `status.resources`): values may be
/// integers (`cpu: 1000`) or strings (`memory: 1000Gi`), as Karpenter's CRD allows. Replaces
/// k8s-openapi's `Quantity` schema, whose long description would be repeated on every such map.
pub(crate) fn quantity_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "x-kubernetes-int-or-string": true,
            "pattern": QUANTITY_PATTERN,
        },
    })
}

/// Removes `null` from `enum` lists. schemars adds it for `Option<Enum>` fields, but the field
/// is already `nullable`, and Karpenter's CRDs list only real values.
pub(crate) fn tidy(schema: &mut Schema) {
    if let Some(object) = schema.as_object_mut() {
        for (key, value) in object.iter_mut() {
            // Defaults and CEL rules are data, not schemas.
            if key != "default" && key != "x-kubernetes-validations" {
                tidy_value(key, value);
            }
        }
    }
}

fn tidy_value(key: &str, value: &mut Value) {
    match value {
        Value::Array(items) if key == "enum" => items.retain(|v| !v.is_null()),
        Value::Array(items) => items.iter_mut().for_each(|v| tidy_value("", v)),
        Value::Object(object) => {
            for (key, value) in object.iter_mut() {
                if key != "default" && key != "x-kubernetes-validations" {
                    tidy_value(key, value);
                }
            }
        }
        _ => {}
    }
}
