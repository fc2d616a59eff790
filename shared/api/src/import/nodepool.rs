//! `karpenter.sh/v1` NodePool → `dovetail.dev/v1` NodePool.
//!
//! The fields are the same; what changes is the node class reference (Dovetail's own group) and
//! the one node annotation Dovetail has its own spelling for. What is kept but behaves
//! differently under Dovetail (requirement values it never offers, Karpenter's own taints) is
//! warned about; a static pool, whose meaning Dovetail cannot keep at
//! all, is refused with the other Karpenter fields Dovetail refuses ([`crate::crd::refused`], by
//! the decoding in `object::decode`).

use serde_json::Value;

use dovetail_core::labels::{DO_NOT_DISRUPT, TAINT_DISRUPTED, TAINT_UNREGISTERED};

use super::object::{self, is_karpenter_key};
use super::Notes;
use crate::crd::{FieldError, NodePool, NodePoolSpec, EC2_NODE_CLASS_KIND, GROUP, KARPENTER_AWS_GROUP};

const KIND: &str = "NodePool";

/// Converts one Karpenter NodePool (as read) into Dovetail's, or says why it cannot be.
pub(super) fn convert(input: &Value, notes: &mut Notes<'_>) -> Result<NodePool, Vec<FieldError>> {
    let mut value = input.clone();
    object::prepare(&mut value, notes);
    if let Some(spec) = value.get_mut("spec") {
        rewrite(spec, notes);
    }
    let pool: NodePool = object::decode::<NodePool, NodePoolSpec>(KIND, &value, notes, unsupported)?;
    pool.to_core()?;
    check(&pool, notes);
    Ok(pool)
}

/// Why a field Dovetail's NodePool does not have is dropped.
fn unsupported(field: &str) -> String {
    match field {
        "spec.template.spec.kubelet" => {
            "dropped: kubelet settings belong in the EC2NodeClass's spec.kubelet since Karpenter v1".into()
        }
        _ => "dropped: Dovetail's NodePool has no such field".into(),
    }
}

/// Karpenter keys a pool puts on its nodes that Dovetail spells its own way, and that spelling.
const RENAMED_ANNOTATIONS: &[(&str, &str, &str)] =
    &[(DO_NOT_DISRUPT[0], DO_NOT_DISRUPT[1], "Dovetail honours both spellings on pods and nodes, and writes its own")];

/// Karpenter's own taints, which Karpenter adds and removes itself, and Dovetail's counterparts.
pub(super) const KARPENTER_TAINTS: &[(&str, &str)] =
    &[("karpenter.sh/disrupted", TAINT_DISRUPTED), ("karpenter.sh/unregistered", TAINT_UNREGISTERED)];

/// Rewrites, on the spec as read, what has a Dovetail equivalent: the node class group and the
/// template annotations Dovetail spells its own way.
fn rewrite(spec: &mut Value, notes: &mut Notes<'_>) {
    if let Some(class) = spec.pointer_mut("/template/spec/nodeClassRef").and_then(Value::as_object_mut) {
        let group = class.get("group").and_then(Value::as_str).unwrap_or_default().to_string();
        // An apiVersion where the group belongs (`karpenter.k8s.aws/v1`, as one of Karpenter's own
        // examples writes it, though its CRD refuses it) still says which class is meant.
        let version = group.strip_prefix(KARPENTER_AWS_GROUP).and_then(|rest| rest.strip_prefix('/'));
        let karpenter = group == KARPENTER_AWS_GROUP || version.is_some();
        if karpenter && class.get("kind").and_then(Value::as_str) == Some(EC2_NODE_CLASS_KIND) {
            class.insert("group".into(), GROUP.into());
            let read_as = match version {
                Some(_) => format!(" ({group:?} is an apiVersion: read as the group {KARPENTER_AWS_GROUP})"),
                None => String::new(),
            };
            notes.warn(
                "spec.template.spec.nodeClassRef.group",
                format!(
                    "{KARPENTER_AWS_GROUP} → {GROUP}: the pool uses the converted EC2NodeClass of the same name{read_as}"
                ),
            );
        }
    }
    if let Some(annotations) = spec.pointer_mut("/template/metadata/annotations").and_then(Value::as_object_mut) {
        for &(from, to, why) in RENAMED_ANNOTATIONS {
            let Some(v) = annotations.remove(from) else { continue };
            let field = format!("spec.template.metadata.annotations[{from}]");
            // An explicit Dovetail spelling wins over the Karpenter one.
            if annotations.contains_key(to) {
                notes.warn(field, format!("dropped: {to} is set too, and is the one kept"));
            } else {
                annotations.insert(to.into(), v);
                notes.warn(field, format!("renamed to {to}: {why}"));
            }
        }
        for key in annotations.keys().filter(|k| is_karpenter_key(k)) {
            notes.warn(
                format!("spec.template.metadata.annotations[{key}]"),
                "kept: Karpenter's own annotation, which Dovetail puts on the nodes like any other but does \
                 not act on",
            );
        }
    }
}

/// Warnings about what the typed pool keeps but Dovetail treats differently from Karpenter.
fn check(pool: &NodePool, notes: &mut Notes<'_>) {
    let template = &pool.spec.template.spec;
    for (list, taints) in [("taints", &template.taints), ("startupTaints", &template.startup_taints)] {
        for (i, taint) in taints.iter().enumerate() {
            if let Some((_, ours)) = KARPENTER_TAINTS.iter().find(|(theirs, _)| *theirs == taint.key) {
                notes.warn(
                    format!("spec.template.spec.{list}[{i}]"),
                    format!(
                        "kept {}: Karpenter adds and removes this taint itself, Dovetail does neither (its own \
                         is {ours}), so the nodes keep it",
                        taint.key
                    ),
                );
            }
        }
    }
}
