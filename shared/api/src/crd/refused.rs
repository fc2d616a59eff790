//! Karpenter 1.14 fields and values Dovetail refuses, rather than ignores.
//!
//! Every property of Karpenter 1.14's NodePool and EC2NodeClass schemas is either one of
//! Dovetail's fields (with its meaning) or listed here, with why (`tests/karpenter_compat.rs`
//! walks both schemas and fails otherwise; `docs/karpenter-compatibility.md` prints this list).
//! A listed field is refused wherever an object enters Dovetail, with an error naming its path:
//!
//! - on the API server: the CRD declares the field (so it is not pruned silently) and a CEL rule
//!   on its parent refuses it ([`declare_in_schema`]). A `*` entry (any key Dovetail's schema does
//!   not declare, e.g. the open-ended kubelet settings) cannot be declared: the API server prunes
//!   such a key, and refuses it with `unknown field "<path>"` under strict field validation
//!   (kubectl's default);
//! - in Dovetail's own decoding ([`super::from_value`], the manifest loader of `dovetail plan`, and
//!   through both `dovetail import`): [`refused_fields`], among the fields the types skip.
//!
//! Values Dovetail's enums do not have (a policy, an operator) are refused by the enums
//! themselves, in the CRD's `enum` and in validation; [`REFUSED_VALUES`] says why for Karpenter's.
//!
//! Other helpers' fields wait here until their work lands: the lead removes an entry when the
//! field starts to work.

use schemars::Schema;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::FieldError;
use crate::ignored::ignored_fields;

/// A Karpenter 1.14 field Dovetail refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefusedField {
    /// `NodePool` or `EC2NodeClass`.
    pub kind: &'static str,
    /// Path in the object, `[]` standing for every item of a list
    /// (`spec.blockDeviceMappings[].ebs.volumeInitializationRate`), and a last segment `*` for any
    /// key of an open-ended object that Dovetail's schema does not declare (`spec.kubelet.*`).
    pub path: &'static str,
    /// Its type in Karpenter's schema (`integer`, `object`, `array` of objects, `string`): our CRD
    /// declares it so, for its CEL rule can only name a field of a known type.
    pub ty: &'static str,
    /// Why Dovetail refuses it and what to do instead, for a person.
    pub why: &'static str,
}

/// A value of a Karpenter 1.14 enum that Dovetail's enum does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefusedValue {
    pub kind: &'static str,
    /// Path of the field, as in [`RefusedField::path`].
    pub path: &'static str,
    pub value: &'static str,
    pub why: &'static str,
}

/// The Karpenter 1.14 fields Dovetail refuses.
pub const REFUSED_FIELDS: &[RefusedField] = &[
    RefusedField {
        kind: "NodePool",
        path: "spec.replicas",
        ty: "integer",
        why: "static NodePools (a fixed number of nodes whatever the pods) are not supported: Dovetail launches \
              nodes for pending pods only. Keep this pool in Karpenter, or remove replicas and bound the pool with \
              limits",
    },
    RefusedField {
        kind: "EC2NodeClass",
        path: "spec.blockDeviceMappings[].ebs.volumeInitializationRate",
        ty: "integer",
        why: "Dovetail's launch templates do not set an EBS volume initialization rate; remove it (volumes from a \
              snapshot initialize at EBS's default rate)",
    },
    RefusedField {
        kind: "EC2NodeClass",
        path: "spec.connectionTracking",
        ty: "object",
        why: "Dovetail's launch templates do not set connection tracking timeouts on network interfaces; remove it \
              (EC2's defaults apply)",
    },
    RefusedField {
        kind: "EC2NodeClass",
        path: "spec.cpuOptions",
        ty: "object",
        why: "Dovetail neither sets CPU options nor filters instance types by nested virtualization; remove it",
    },
    RefusedField {
        kind: "EC2NodeClass",
        path: "spec.ipPrefixCount",
        ty: "integer",
        why: "Dovetail's launch templates do not assign IPv4 prefixes to the network interface, and its pod \
              density does not count them; remove it",
    },
    RefusedField {
        kind: "EC2NodeClass",
        path: "spec.kubelet.*",
        ty: "any",
        why: "Dovetail applies the kubelet settings its schema lists (clusterDNS, maxPods, podsPerCore, \
              systemReserved, kubeReserved, evictionHard, evictionSoft, evictionSoftGracePeriod, \
              evictionMaxPodGracePeriod, imageGCHighThresholdPercent, imageGCLowThresholdPercent, cpuCFSQuota), not \
              the rest of KubeletConfiguration; remove it",
    },
    RefusedField {
        kind: "EC2NodeClass",
        path: "spec.networkInterfaces",
        ty: "array",
        why: "Dovetail launches instances with one network interface from the selected subnet (no EFA or extra \
              interfaces); remove it",
    },
    RefusedField {
        kind: "EC2NodeClass",
        path: "spec.placementGroupSelector",
        ty: "object",
        why: "Dovetail does not launch into placement groups; remove it",
    },
];

/// Karpenter 1.14 enum values Dovetail refuses.
pub const REFUSED_VALUES: &[RefusedValue] = &[RefusedValue {
    kind: "NodePool",
    path: "spec.disruption.consolidationPolicy",
    value: "Balanced",
    why: "Karpenter's Balanced policy (a move must save enough per pod disrupted) is not implemented; use \
          WhenEmptyOrUnderutilized or WhenEmpty",
}];

/// Why `value` of the field at `path` (a concrete path: `spec.template.spec.requirements[3].operator`)
/// of a `kind` is refused, when it is one of Karpenter's.
pub fn refused_value(kind: &str, path: &str, value: &str) -> Option<&'static str> {
    let path = pattern_of(path);
    REFUSED_VALUES.iter().find(|r| r.kind == kind && r.path == path && r.value == value).map(|r| r.why)
}

/// The refused fields `object` (a whole `kind` object, as read) sets: one error each, naming the
/// field's path in the object (`spec.blockDeviceMappings[1].ebs.volumeInitializationRate`).
/// `T` is the object's type: a field is refused only when the type does not have it.
pub fn refused_fields<T: DeserializeOwned>(kind: &'static str, object: &Value) -> Vec<FieldError> {
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    ignored_fields::<T>(object, "")
        .into_iter()
        .filter_map(|field| {
            let refused = REFUSED_FIELDS.iter().find(|r| r.kind == kind && covers(r.path, &field))?;
            Some(FieldError { kind, name: name.to_string(), field, message: message(refused) })
        })
        .collect()
}

/// The error message of a refused field, the same on the API server and in Dovetail.
fn message(refused: &RefusedField) -> String {
    format!("a Karpenter field Dovetail refuses: {}", refused.why)
}

/// Whether a refused path covers a concrete path (`spec.kubelet.*` covers `spec.kubelet.podPidsLimit`).
fn covers(pattern: &str, concrete: &str) -> bool {
    let concrete = pattern_of(concrete);
    match pattern.strip_suffix('*') {
        Some(parent) => concrete.strip_prefix(parent).is_some_and(|key| !key.is_empty() && !key.contains('.')),
        None => pattern == concrete,
    }
}

/// A concrete path with its list indices as `[]`: `a[2].b` → `a[].b`. Map keys in brackets
/// (`tags[team.example.com/x]`) are kept.
fn pattern_of(concrete: &str) -> String {
    let mut out = String::with_capacity(concrete.len());
    let mut rest = concrete;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find(']') {
            Some(close) if close > 0 && after[..close].bytes().all(|b| b.is_ascii_digit()) => {
                out.push_str("[]");
                rest = &after[close + 1..];
            }
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Declares `kind`'s refused fields in the schema of its `spec` (a schemars transform on the
/// spec type), so the API server keeps them and refuses them: each field gets a property of its
/// Karpenter type (an object or list item holding anything), described as refused, and its parent a CEL rule `!has(self.<field>)` whose
/// message names the field and says why. `*` entries are left to the API server's field
/// validation (see the module's documentation).
fn declare_in_schema(kind: &str, spec: &mut Schema) {
    let mut value = std::mem::take(spec).to_value();
    for refused in REFUSED_FIELDS.iter().filter(|r| r.kind == kind && !r.path.ends_with('*')) {
        let relative = refused.path.strip_prefix("spec.").expect("refused fields are under spec");
        let (parent_path, field) = relative.rsplit_once('.').unwrap_or(("", relative));
        let Some(parent) = schema_at(&mut value, parent_path) else {
            panic!("{kind} {}: the parent of a refused field is not in the schema", refused.path);
        };
        let Some(object) = parent.as_object_mut() else { continue };
        let properties = object.entry("properties").or_insert_with(|| json!({}));
        let description = format!("Not supported by Dovetail, refused: {}", refused.why);
        properties[field] = match refused.ty {
            "object" => {
                json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": description})
            }
            "array" => json!({
                "type": "array",
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "description": description,
            }),
            ty => json!({"type": ty, "description": description}),
        };
        let rules = object.entry("x-kubernetes-validations").or_insert_with(|| json!([]));
        if let Some(rules) = rules.as_array_mut() {
            rules.push(json!({
                "rule": format!("!has(self.{field})"),
                "message": format!("{}: {}", refused.path.replace("[]", "[*]"), message(refused)),
                "fieldPath": format!(".{field}"),
                "reason": "FieldValueForbidden",
            }));
        }
    }
    *spec = Schema::try_from(value).expect("a spec schema stays an object");
}

/// [`declare_in_schema`] for the NodePool's spec.
pub(crate) fn nodepool_spec(spec: &mut Schema) {
    declare_in_schema("NodePool", spec);
}

/// [`declare_in_schema`] for the EC2NodeClass's spec.
pub(crate) fn ec2nodeclass_spec(spec: &mut Schema) {
    declare_in_schema("EC2NodeClass", spec);
}

/// The schema at a dotted path below `schema` (`blockDeviceMappings[].ebs`), through
/// `properties` and list `items`; `""` is `schema` itself.
fn schema_at<'a>(schema: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    if path.is_empty() {
        return Some(schema);
    }
    let mut at = schema;
    for segment in path.split('.') {
        let (name, lists) = match segment.find('[') {
            Some(i) => (&segment[..i], segment[i..].matches("[]").count()),
            None => (segment, 0),
        };
        at = at.get_mut("properties")?.get_mut(name)?;
        for _ in 0..lists {
            at = at.get_mut("items")?;
        }
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_of_concrete_paths() {
        assert_eq!(pattern_of("spec.blockDeviceMappings[12].ebs.x"), "spec.blockDeviceMappings[].ebs.x");
        assert_eq!(pattern_of("spec.tags[team.example.com/x]"), "spec.tags[team.example.com/x]");
        assert_eq!(pattern_of("spec.a[0][1]"), "spec.a[][]");
        assert!(covers("spec.kubelet.*", "spec.kubelet.podPidsLimit"));
        assert!(!covers("spec.kubelet.*", "spec.kubelet"));
        assert!(!covers("spec.kubelet.*", "spec.kubelet.a.b"));
        assert!(covers(
            "spec.blockDeviceMappings[].ebs.volumeInitializationRate",
            "spec.blockDeviceMappings[3].ebs.volumeInitializationRate"
        ));
        assert!(!covers("spec.replicas", "spec.replicasX"));
    }

    #[test]
    fn refused_values_by_concrete_path() {
        assert!(refused_value("NodePool", "spec.disruption.consolidationPolicy", "Balanced").is_some());
        assert_eq!(refused_value("NodePool", "spec.disruption.consolidationPolicy", "Always"), None);
        assert_eq!(refused_value("EC2NodeClass", "spec.disruption.consolidationPolicy", "Balanced"), None);
    }

    /// `crate::ignored`'s paths, tested here with the CRD types (`ignored` sits below `crd`).
    mod ignored_paths {
        use crate::crd::{EC2NodeClassSpec, NodePoolSpec};
        use crate::ignored::ignored_fields;
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
}
