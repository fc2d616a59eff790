//! Fields of an object that Dovetail's types do not have.
//!
//! Deserialization silently skips unknown fields (so objects from a newer Karpenter still read),
//! which is right for the functions and wrong for an import: a skipped field is a setting the user
//! would lose without knowing. `serde_ignored` reports every key the typed deserialization skipped,
//! so the list of what Dovetail supports is the types themselves, never a second list here. The
//! import warns about each; [`crate::crd::refused`] picks out the Karpenter fields Dovetail
//! refuses among them.

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{EC2NodeClassSpec, NodePoolSpec};
    use serde_json::json;

    #[test]
    fn names_every_skipped_field_with_its_path() {
        let spec = json!({
            "replicas": 3,
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "a", "operator": "In", "values": ["b"], "flexible": true}],
                "kubelet": {"maxPods": 10},
            }},
        });
        // serde_json's maps are sorted, so fields come in key order.
        assert_eq!(
            ignored_fields::<NodePoolSpec>(&spec, "spec"),
            ["spec.replicas", "spec.template.spec.kubelet", "spec.template.spec.requirements[0].flexible"]
        );
    }

    #[test]
    fn whole_objects_get_paths_from_their_root() {
        let pool = json!({
            "apiVersion": "dovetail.dev/v1", "kind": "NodePool", "metadata": {"name": "p"},
            "spec": {"replicas": 3, "template": {"spec": {
                "nodeClassRef": {"group": "dovetail.dev", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []}}},
        });
        // kube's object types read apiVersion and kind apart from serde.
        assert_eq!(ignored_fields::<crate::crd::NodePool>(&pool, ""), ["apiVersion", "kind", "spec.replicas"]);
    }

    #[test]
    fn known_fields_and_map_keys_are_not_reported() {
        let spec = json!({
            "role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            "securityGroupSelectorTerms": [{"id": "sg-1"}],
            "tags": {"team.example.com/owner": "x"},
            "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi", "volumeInitializationRate": 100}}],
        });
        assert_eq!(
            ignored_fields::<EC2NodeClassSpec>(&spec, "spec"),
            ["spec.blockDeviceMappings[0].ebs.volumeInitializationRate"]
        );
    }

    #[test]
    fn lenient_values_still_get_their_paths() {
        // A number as a label value only reads through the YAML pass, as in the loader.
        let spec = json!({
            "extra": {"x": 1},
            "template": {"metadata": {"labels": {"tier": 1}},
                         "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []}},
        });
        assert!(serde_json::from_value::<NodePoolSpec>(spec.clone()).is_err());
        assert_eq!(ignored_fields::<NodePoolSpec>(&spec, "spec"), ["spec.extra"]);
    }
}
