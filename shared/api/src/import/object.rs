//! The envelope of an imported object: `apiVersion`, `metadata`, `status`.
//!
//! A converted object is a new object for the cluster, so nothing the API server recorded about
//! the Karpenter one belongs on it. Server bookkeeping (uid, resourceVersion, managedFields, ...)
//! and kubectl's last-applied annotation are dropped silently, as `kubectl get -o yaml | kubectl
//! apply` users expect; everything else that is dropped is warned about, because someone wrote it
//! or something reads it: `status`, Karpenter's own metadata (hash annotations its drift detection
//! compares, finalizers only its controller removes, migration annotations), owner references.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::Notes;
use crate::crd::{from_value, labels, FieldError, API_VERSION};
use crate::ignored::ignored_fields;

/// Metadata fields the API server sets on every object; a copy must not carry them.
const SERVER_SET: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    // NodePools and EC2NodeClasses are cluster-scoped: a namespace means nothing on them.
    "namespace",
    // Used only when `name` is empty, and an import needs a name (the header checked it).
    "generateName",
];

/// kubectl's copy of the Karpenter object as last applied: stale on a Dovetail object.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Karpenter's migration annotation holding a v1beta1 NodePool's kubelet settings.
const KUBELET_CONVERSION: &str = "compatibility.karpenter.sh/v1beta1-kubelet-conversion";

/// Whether a key (label, annotation, finalizer) is in one of Karpenter's domains, its
/// `compatibility.` sub-domains included.
pub(super) fn is_karpenter_key(key: &str) -> bool {
    let domain = labels::domain(key);
    [crate::crd::KARPENTER_GROUP, crate::crd::KARPENTER_AWS_GROUP]
        .iter()
        .any(|group| domain == *group || domain.ends_with(&format!(".{group}")))
}

/// Rewrites the envelope of `value` (a NodePool or EC2NodeClass as read) into Dovetail's: the
/// `apiVersion`, the kept metadata (name, labels, annotations) and no status. Leaves `spec` alone.
pub(super) fn prepare(value: &mut Value, notes: &mut Notes<'_>) {
    let Some(object) = value.as_object_mut() else { return };
    object.insert("apiVersion".into(), API_VERSION.into());
    let keys: Vec<String> = object.keys().cloned().collect();
    for key in keys {
        match key.as_str() {
            "apiVersion" | "kind" | "spec" => {}
            "metadata" => {
                let metadata = object.get_mut("metadata").and_then(Value::as_object_mut);
                metadata.into_iter().for_each(|m| metadata_fields(m, notes));
            }
            "status" => {
                if object.remove("status").is_some_and(|s| !is_empty(&s)) {
                    notes.warn("status", "dropped: Dovetail's functions write the status of its own objects");
                }
            }
            other => {
                object.remove(other);
                notes.warn(other, "dropped: not part of a Dovetail object");
            }
        }
    }
}

fn metadata_fields(metadata: &mut Map<String, Value>, notes: &mut Notes<'_>) {
    let keys: Vec<String> = metadata.keys().cloned().collect();
    for key in keys {
        match key.as_str() {
            "name" => {}
            "labels" | "annotations" => {
                if let Some(Value::Object(map)) = metadata.get_mut(&key) {
                    drop_karpenter_keys(&key, map, notes);
                }
            }
            "finalizers" => {
                let Some(Value::Array(list)) = metadata.remove("finalizers") else { continue };
                // Nothing in Dovetail removes another controller's finalizer: the object could
                // never be deleted.
                let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
                if !names.is_empty() {
                    notes.warn(
                        "metadata.finalizers",
                        format!(
                            "dropped {}: only the controller that added a finalizer removes it, and Dovetail's \
                             objects need none",
                            names.join(", ")
                        ),
                    );
                }
            }
            "ownerReferences" => {
                metadata.remove("ownerReferences");
                notes.warn(
                    "metadata.ownerReferences",
                    "dropped: they name their owners by uid, and the garbage collector would delete a copy \
                     whose owners do not own it",
                );
            }
            known if SERVER_SET.contains(&known) => {
                metadata.remove(known);
            }
            other => {
                metadata.remove(other);
                notes.warn(format!("metadata.{other}"), "dropped: not carried over to a new object");
            }
        }
    }
}

/// Drops kubectl's last-applied annotation silently and Karpenter's own keys with one warning
/// per map (a kubectl dump has several on every object).
fn drop_karpenter_keys(which: &str, map: &mut Map<String, Value>, notes: &mut Notes<'_>) {
    map.remove(LAST_APPLIED);
    let karpenter: Vec<String> = map.keys().filter(|k| is_karpenter_key(k)).cloned().collect();
    if karpenter.is_empty() {
        return;
    }
    for key in &karpenter {
        map.remove(key);
    }
    let mut message = format!(
        "dropped Karpenter's {}: Karpenter sets them for its own use (drift hashes, migration state), \
         Dovetail neither reads nor needs them",
        karpenter.join(", ")
    );
    if karpenter.iter().any(|k| k == KUBELET_CONVERSION) {
        message.push_str(&format!(
            "; {KUBELET_CONVERSION} holds kubelet settings from a v1beta1 NodePool, which in v1 belong in the \
             EC2NodeClass's spec.kubelet: check they are there"
        ));
    }
    notes.warn(format!("metadata.{which}"), message);
}

/// Decodes the prepared object as `T` (whose spec is `S`), as Dovetail's functions decode what
/// they read, and warns about every spec field the types skip, with `unsupported(field)` as the
/// message.
pub(super) fn decode<T: DeserializeOwned, S: DeserializeOwned>(
    kind: &'static str,
    value: &Value,
    notes: &mut Notes<'_>,
    unsupported: fn(&str) -> String,
) -> Result<T, Vec<FieldError>> {
    let typed = from_value::<T>(kind, value)?;
    if let Some(spec) = value.get("spec") {
        for field in ignored_fields::<S>(spec, "spec") {
            let message = unsupported(&field);
            notes.warn(field, message);
        }
    }
    Ok(typed)
}

/// Null, `{}` and `[]`: written, but saying nothing.
pub(super) fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}
