//! Typed objects from JSON values, with errors that name the field: shared by the manifest loader
//! (files) and the decoding of live NodePools and EC2NodeClasses (the API server).

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Decodes a document into its typed object. Deserializing from the JSON value is fast but its
/// errors carry no field path; on failure the document is decoded again through the YAML
/// deserializer, which tracks the path (`spec.template.spec.containers[0].ports[0].containerPort:
/// invalid type …`). Line numbers from that second pass refer to re-serialized text, so they are
/// dropped. The YAML pass is also more lenient (it reads `app: 1` as the string "1", as many
/// hand-written manifests assume); what it accepts is accepted.
pub(crate) fn with_path<T: DeserializeOwned>(value: &Value) -> Result<T, String> {
    let fast_err = match T::deserialize(value) {
        Ok(t) => return Ok(t),
        Err(e) => e,
    };
    let text = match serde_yaml_ng::to_string(value) {
        Ok(t) => t,
        Err(_) => return Err(fast_err.to_string()),
    };
    serde_yaml_ng::from_str::<T>(&text).map_err(|e| {
        let msg = e.to_string();
        match msg.rfind(" at line ") {
            Some(i) if msg[i..].contains(" column ") => msg[..i].to_string(),
            _ => msg,
        }
    })
}
