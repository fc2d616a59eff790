//! Manifests given to `dovetail plan` (and `dovetail simulate`'s scenarios):
//! `dovetail_api::manifest::load_str`, then `Inputs::snapshot`.

use dovetail_api::manifest::{load_str, LoadErrorKind};

use crate::harness::Target;
use crate::objects::{self, Documents};

pub const TARGET: Target<Documents> = Target {
    name: "manifests",
    fixtures: &[
        "shared/api/tests/fixtures",
        "shared/api/tests/fixtures/dir",
        "shared/api/tests/fixtures/errors",
        "fuzz/corpus/crd_objects",
    ],
    vocabulary: objects::VOCABULARY,
    render: objects::render,
    check,
};

/// The file loads into a snapshot, or the error says where: the file always, the document for
/// anything but an unreadable file, and the object once its header was read.
pub fn check(text: &str) {
    let file = "plan.yaml";
    let error = match load_str(file, text) {
        Ok(inputs) => match inputs.snapshot() {
            Ok(snapshot) => {
                assert_eq!(snapshot.pods.len(), inputs.pending.len());
                return;
            }
            Err(e) => e,
        },
        Err(e) => e,
    };
    assert_eq!(error.file, file);
    assert!(error.document.is_some(), "{error}");
    let said = error.to_string();
    assert!(said.starts_with(&format!("{file}: document ")), "{said}");
    match &*error.kind {
        LoadErrorKind::Syntax { .. }
        | LoadErrorKind::NotAnObject(_)
        | LoadErrorKind::MissingApiVersion
        | LoadErrorKind::MissingKind => {}
        _ => assert!(error.object.is_some(), "an error about an object names it: {said}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_manifests_name_file_document_object_and_field() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\n\
                    apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\n\
                    spec:\n  replicas: 1\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n\
                    \x20   spec: {containers: [{name: c, image: x, resources: {requests: {cpu: 1x}}}]}\n";
        let e = load_str("plan.yaml", text).unwrap_err();
        assert_eq!((e.document, e.object.as_deref()), (Some(2), Some("Deployment shop/web")), "{e}");
        assert!(e.to_string().contains("spec.template.spec.containers[0].resources.requests.cpu"), "{e}");
        check(text);
    }
}
