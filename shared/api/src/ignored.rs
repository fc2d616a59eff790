//! Fields of an object that Dovetail's types do not have.
//!
//! Deserialization silently skips unknown fields (so objects from a newer Karpenter still read),
//! which is right for the functions and wrong for an import: a skipped field is a setting the user
//! would lose without knowing. `serde_ignored` reports every key the typed deserialization skipped,
//! so the list of what Dovetail supports is the types themselves, never a second list here. The
//! import warns about each; the CRDs' list of refused Karpenter fields (`crd/refused.rs`) picks
//! out those Dovetail refuses among them. Its tests are there, with the CRD types.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Paths of the fields in `value` that deserializing it as `T` skips, each prefixed with
/// `prefix` (`spec`; empty when `value` is a whole object), in the order met: `spec.template.spec.kubelet`,
/// `spec.blockDeviceMappings[0].ebs.volumeInitializationRate`, `spec.tags[example.com/team]` for
/// keys that are not plain names.
///
/// `value` must already have deserialized as `T` (the caller decoded the object first): if the
/// JSON pass fails, the lenient YAML pass the loader also uses is tried, and if that fails too
/// nothing is reported.
pub(crate) fn ignored_fields<T: DeserializeOwned>(value: &Value, prefix: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let json = serde_ignored::deserialize::<_, _, T>(value, |path| paths.push(format(prefix, &path)));
    if json.is_ok() {
        return paths;
    }
    paths.clear();
    let Ok(text) = serde_yaml_ng::to_string(value) else { return Vec::new() };
    let yaml = serde_yaml_ng::Deserializer::from_str(&text);
    match serde_ignored::deserialize::<_, _, T>(yaml, |path| paths.push(format(prefix, &path))) {
        Ok(_) => paths,
        Err(_) => Vec::new(),
    }
}

/// `spec.a.b[0].c`, with keys that are not plain names in brackets (`tags[team.example.com/x]`),
/// as validation messages write them.
fn format(prefix: &str, path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => prefix.to_string(),
        Path::Seq { parent, index } => format!("{}[{index}]", format(prefix, parent)),
        Path::Map { parent, key } if key.bytes().all(|b| b.is_ascii_alphanumeric()) => {
            let parent = format(prefix, parent);
            if parent.is_empty() {
                key.to_string()
            } else {
                format!("{parent}.{key}")
            }
        }
        Path::Map { parent, key } => format!("{}[{key}]", format(prefix, parent)),
        Path::Some { parent } | Path::NewtypeStruct { parent } | Path::NewtypeVariant { parent } => {
            format(prefix, parent)
        }
    }
}
