//! For `import.rs`: what an import does to each field, checked field by field: every leaf of every input object
//! (a scalar, or an empty map or list) must reach the output with its value, or be covered by a
//! warning on it or on a field above it, or be one of the documented rewrites. A field dropped
//! or changed without a word is what an import must never do.
//!
//! Paths are written as the import's warnings write fields (`spec.tags[example.org/owner]`,
//! `spec.template.spec.requirements[0].key`) and compared segment by segment, so a warning on
//! `spec.limits[nodes]` or on `metadata.annotations` covers the leaves below it.

use std::collections::BTreeMap;

use dovetail_api::import::{Report, Warning};
use serde_json::Value;

/// Fields every conversion rewrites without a warning (the import's documented change), and
/// their value in the output.
const REWRITTEN: &[(&str, &str)] = &[("apiVersion", "dovetail.dev/v1")];

/// A field's path as segments: map keys and list indices.
pub type Path = Vec<String>;

/// `spec.a[0].b[example.org/x]` → `["spec", "a", "0", "b", "example.org/x"]`.
pub fn parse(field: &str) -> Path {
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        match c {
            '.' => segments.extend((!current.is_empty()).then(|| std::mem::take(&mut current))),
            '[' => {
                segments.extend((!current.is_empty()).then(|| std::mem::take(&mut current)));
                segments.push(chars.by_ref().take_while(|&c| c != ']').collect());
            }
            c => current.push(c),
        }
    }
    segments.extend((!current.is_empty()).then_some(current));
    segments
}

/// Every leaf of `value` by path; scalars as text (`400` and `"400"` are one value, as the API
/// server's quantities are), empty maps and lists as `{}` and `[]`.
pub fn leaves(value: &Value) -> BTreeMap<Path, String> {
    fn walk(value: &Value, path: &mut Path, out: &mut BTreeMap<Path, String>) {
        let children: Vec<(String, &Value)> = match value {
            Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v)).collect(),
            Value::Array(list) => list.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect(),
            Value::String(s) => {
                out.insert(path.clone(), s.clone());
                return;
            }
            scalar => {
                out.insert(path.clone(), scalar.to_string());
                return;
            }
        };
        if children.is_empty() {
            out.insert(path.clone(), if value.is_object() { "{}" } else { "[]" }.to_string());
        }
        for (key, child) in children {
            path.push(key);
            walk(child, path, out);
            path.pop();
        }
    }
    let mut out = BTreeMap::new();
    walk(value, &mut Vec::new(), &mut out);
    out
}

/// `Kind name` of an object, as warnings name it.
fn label(object: &Value) -> String {
    format!(
        "{} {}",
        object["kind"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Every leaf of the inputs that the outputs lost or changed with no warning covering it, as
/// `Kind name: path: what happened`. Inputs and outputs are matched by kind and name; an input
/// object with no output must have a warning or error of its own (not checked here).
pub fn silently_changed(inputs: &[Value], outputs: &[Value], warnings: &[Warning]) -> Vec<String> {
    let mut problems = Vec::new();
    for input in inputs {
        let object = label(input);
        let Some(output) = outputs.iter().find(|o| label(o) == object) else { continue };
        let output = leaves(output);
        let warned: Vec<Path> = warnings.iter().filter(|w| w.object == object).map(|w| parse(&w.field)).collect();
        for (path, value) in leaves(input) {
            if warned.iter().any(|w| path.starts_with(w)) {
                continue;
            }
            let shown = path.join(".");
            let expected =
                REWRITTEN.iter().find(|(field, _)| parse(field) == path).map_or(value.as_str(), |(_, to)| to);
            match output.get(&path) {
                Some(got) if got == expected => {}
                Some(got) => problems.push(format!("{object}: {shown}: {expected:?} became {got:?}")),
                None => problems.push(format!("{object}: {shown}: {expected:?} is gone")),
            }
        }
    }
    problems
}

/// Fields Karpenter's published v1 examples (aws/karpenter-provider-aws, `examples/v1/*.yaml`)
/// use, by kind, with list indices and map keys left out where any will do: each must be a leaf,
/// or lead to one, in the fixture that stands for the examples.
pub const EXAMPLE_FIELDS: &[(&str, &str)] = &[
    ("NodePool", "metadata.name"),
    ("NodePool", "metadata.annotations[kubernetes.io/description]"),
    ("NodePool", "spec.template.spec.nodeClassRef.group"),
    ("NodePool", "spec.template.spec.nodeClassRef.kind"),
    ("NodePool", "spec.template.spec.nodeClassRef.name"),
    ("NodePool", "spec.template.spec.requirements[].key"),
    ("NodePool", "spec.template.spec.requirements[].operator"),
    ("NodePool", "spec.template.spec.requirements[].values[]"),
    ("NodePool", "spec.template.spec.requirements[].minValues"),
    ("NodePool", "spec.template.spec.expireAfter"),
    ("NodePool", "spec.template.spec.terminationGracePeriod"),
    ("NodePool", "spec.disruption.consolidationPolicy"),
    ("NodePool", "spec.disruption.consolidateAfter"),
    ("NodePool", "spec.limits[cpu]"),
    ("EC2NodeClass", "metadata.name"),
    ("EC2NodeClass", "metadata.annotations[kubernetes.io/description]"),
    ("EC2NodeClass", "spec.role"),
    ("EC2NodeClass", "spec.amiFamily"),
    ("EC2NodeClass", "spec.amiSelectorTerms[].alias"),
    ("EC2NodeClass", "spec.amiSelectorTerms[].id"),
    ("EC2NodeClass", "spec.subnetSelectorTerms[].tags"),
    ("EC2NodeClass", "spec.securityGroupSelectorTerms[].tags"),
    ("EC2NodeClass", "spec.userData"),
    ("EC2NodeClass", "spec.blockDeviceMappings[].deviceName"),
    ("EC2NodeClass", "spec.blockDeviceMappings[].ebs.volumeType"),
    ("EC2NodeClass", "spec.blockDeviceMappings[].ebs.volumeSize"),
    ("EC2NodeClass", "spec.blockDeviceMappings[].ebs.deleteOnTermination"),
    ("EC2NodeClass", "spec.instanceStorePolicy"),
    ("EC2NodeClass", "spec.metadataOptions.httpProtocolIPv6"),
    ("EC2NodeClass", "spec.metadataOptions.httpTokens"),
];

/// The requirements the examples write: key, operator, whether with `minValues`.
pub const EXAMPLE_REQUIREMENTS: &[(&str, &str, bool)] = &[
    ("kubernetes.io/arch", "In", false),
    ("kubernetes.io/os", "In", false),
    ("karpenter.sh/capacity-type", "In", false),
    ("karpenter.k8s.aws/instance-category", "In", false),
    ("karpenter.k8s.aws/instance-category", "In", true),
    ("karpenter.k8s.aws/instance-family", "Exists", true),
    ("node.kubernetes.io/instance-type", "Exists", true),
    ("karpenter.k8s.aws/instance-generation", "Gt", false),
    ("karpenter.k8s.aws/instance-cpu", "Gt", false),
    ("karpenter.k8s.aws/instance-memory", "Gt", false),
    ("karpenter.k8s.aws/instance-local-nvme", "Gt", false),
];

/// The entries of [`EXAMPLE_FIELDS`] and [`EXAMPLE_REQUIREMENTS`] no input object has.
pub fn uncovered(inputs: &[Value]) -> Vec<String> {
    let mut missing = Vec::new();
    for &(kind, field) in EXAMPLE_FIELDS {
        let wanted = parse(&field.replace("[]", ""));
        let has = |path: &Path| {
            // Indices are left out of the wanted path: compare with them skipped.
            let named: Path = path.iter().filter(|s| s.parse::<usize>().is_err()).cloned().collect();
            named.starts_with(&wanted)
        };
        let found = inputs.iter().filter(|o| o["kind"] == kind).any(|o| leaves(o).keys().any(has));
        if !found {
            missing.push(format!("{kind} {field}"));
        }
    }
    for &(key, operator, min_values) in EXAMPLE_REQUIREMENTS {
        let found = inputs
            .iter()
            .filter_map(|o| o["spec"]["template"]["spec"]["requirements"].as_array())
            .flatten()
            .any(|r| r["key"] == key && r["operator"] == operator && r.get("minValues").is_some() == min_values);
        if !found {
            missing.push(format!("requirement {key} {operator}{}", if min_values { " with minValues" } else { "" }));
        }
    }
    missing
}

/// The documents of a multi-document YAML text, as JSON values.
pub fn documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("a YAML document"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// The converted objects of a report, as JSON values.
pub fn outputs(report: &Report) -> Vec<Value> {
    documents(&report.yaml())
}
