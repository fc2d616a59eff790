//! Golden tests for `import::convert` on realistic Karpenter manifests.
//!
//! Each `tests/fixtures/import/<name>.yaml` converts to `expected/<name>.yaml` (the Dovetail
//! manifests) and `expected/<name>.txt` (one line per warning, then per error, as `dovetail
//! import` prints them without its `dovetail: ` prefix and summary line; `cli/tests/import.rs`
//! checks the binary against the same files). Files are named by their path from the repository
//! root, as the CLI test passes them. After a deliberate change, rewrite the goldens and review the
//! diff:
//!
//! ```text
//! DOVETAIL_BLESS=1 cargo test -p dovetail-api --test import
//! ```
//!
//! A re-bless accepts whatever the import does, so each fixture also asserts what it exists to
//! show, and every output must load and validate as Dovetail manifests.

use std::path::{Path, PathBuf};

use dovetail_api::import::{convert, Converted, Report};
use dovetail_api::manifest;

const DIR: &str = "shared/api/tests/fixtures/import";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn blessing() -> bool {
    std::env::var_os("DOVETAIL_BLESS").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Converts `<name>.yaml`, checks both goldens, and checks the output loads as Dovetail objects.
fn fixture(name: &str) -> Report {
    let path = format!("{DIR}/{name}.yaml");
    let text = std::fs::read_to_string(root().join(&path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let report = convert([(path.as_str(), text.as_str())]);
    check_golden(&format!("{DIR}/expected/{name}.yaml"), &report.yaml());
    check_golden(&format!("{DIR}/expected/{name}.txt"), &messages(&report));
    if !report.objects.is_empty() {
        let inputs = manifest::load_str("out.yaml", &report.yaml()).expect("the output loads as manifests");
        let snapshot = inputs.snapshot().expect("the output passes Dovetail's validation");
        let pools = report.objects.iter().filter(|o| matches!(o, Converted::NodePool(_))).count();
        assert_eq!((snapshot.nodepools.len(), snapshot.nodeclasses.len()), (pools, report.objects.len() - pools));
    }
    report
}

/// The warning and error lines, as the CLI prints them.
fn messages(report: &Report) -> String {
    let warnings = report.warnings.iter().map(|w| format!("warning: {w}\n"));
    let errors = report.errors.iter().map(|e| format!("error: {e}\n"));
    warnings.chain(errors).collect()
}

fn check_golden(path: &str, actual: &str) {
    let file = root().join(path);
    if blessing() {
        std::fs::write(&file, actual).unwrap_or_else(|e| panic!("{path}: {e}"));
        return;
    }
    let expected = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        panic!("{path}: {e} (create it with DOVETAIL_BLESS=1 cargo test -p dovetail-api --test import)")
    });
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "{path} differs, first at line {}:\n  golden: {:?}\n  actual: {:?}\nIf the change is intended, rewrite it \
             with DOVETAIL_BLESS=1 cargo test -p dovetail-api --test import and review the diff.",
            line + 1,
            expected.lines().nth(line).unwrap_or("<end of file>"),
            actual.lines().nth(line).unwrap_or("<end of file>"),
        );
    }
}

/// The warning on `field` of `object`, which must exist.
fn warned(report: &Report, object: &str, field: &str, says: &str) {
    let found = report.warnings.iter().any(|w| w.object == object && w.field == field && w.message.contains(says));
    assert!(found, "no warning on {object} {field} saying {says:?}:\n{}", messages(report));
}

fn names(report: &Report) -> Vec<String> {
    report.objects.iter().map(|o| format!("{} {}", o.kind(), o.name())).collect()
}

#[test]
fn kubectl_get_list() {
    let report = fixture("kubectl-get");
    assert!(report.errors.is_empty(), "{}", messages(&report));
    assert_eq!(names(&report), ["NodePool default", "NodePool gpu", "EC2NodeClass default", "EC2NodeClass gpu"]);
    let out = report.yaml();
    for gone in [
        "status:",
        "uid:",
        "resourceVersion",
        "managedFields",
        "last-applied",
        "-hash",
        "finalizers",
        "karpenter.sh/v1",
    ] {
        assert!(!out.contains(gone), "{gone} is still in the output:\n{out}");
    }
    // User labels, even Helm's, are the user's.
    assert!(out.contains("app.kubernetes.io/managed-by: Helm"), "{out}");
    for object in ["NodePool default", "NodePool gpu", "EC2NodeClass default", "EC2NodeClass gpu"] {
        warned(&report, object, "status", "dropped");
        warned(&report, object, "metadata.annotations", "-hash-version");
    }
    warned(&report, "NodePool gpu", "spec.template.spec.nodeClassRef.group", "karpenter.k8s.aws → dovetail.dev");
    warned(&report, "EC2NodeClass default", "metadata.finalizers", "karpenter.k8s.aws/termination");
    warned(&report, "EC2NodeClass default", "spec.role", "instance profile named \"KarpenterNodeRole-prod-eks\"");
    warned(&report, "EC2NodeClass gpu", "spec.amiSelectorTerms[0].alias", "would not join");
    // Dovetail's schedule and budgets are Karpenter's: nothing to say about the GPU pool's.
    assert!(report.warnings.iter().all(|w| !w.field.starts_with("spec.disruption")), "{}", messages(&report));
}

#[test]
fn gitops_multi_document_file() {
    let report = fixture("gitops");
    assert!(report.errors.is_empty(), "{}", messages(&report));
    assert_eq!(
        names(&report),
        ["NodePool batch", "NodePool training", "EC2NodeClass default", "EC2NodeClass training"]
    );
    warned(&report, "NodePool batch", "spec.template.metadata.annotations[karpenter.sh/do-not-disrupt]", "renamed");
    warned(&report, "NodePool batch", "spec.limits[nodes]", "does not enforce");
    warned(&report, "NodePool training", "spec.template.spec.requirements[0]", "reserved");
    warned(&report, "NodePool training", "spec.template.spec.kubelet", "EC2NodeClass's spec.kubelet");
    warned(
        &report,
        "EC2NodeClass training",
        "spec.capacityReservationSelectorTerms",
        "never into capacity reservations",
    );
    warned(&report, "EC2NodeClass training", "spec.instanceStorePolicy", "RAID0");
    warned(&report, "EC2NodeClass training", "spec.blockDeviceMappings[0].ebs.volumeSize", "500Gi");
    warned(&report, "EC2NodeClass training", "spec.ipPrefixCount", "dropped");
    warned(&report, "ConfigMap karpenter/karpenter-global-settings", "", "skipped");
    // A 20Gi root volume is what Dovetail plans with; an instance profile needs no warning.
    assert!(report.warnings.iter().all(|w| !(w.object == "EC2NodeClass default" && w.field.starts_with("spec.block"))));
    assert!(report.warnings.iter().all(|w| !(w.object == "EC2NodeClass training" && w.field == "spec.role")));
    let out = report.yaml();
    assert!(out.contains("dovetail.dev/do-not-disrupt: 'true'"), "{out}");
    assert!(out.contains("shutdownGracePeriod: 60s"), "userData is carried over: {out}");
    assert!(!out.contains("kubelet:\n        maxPods: 110"), "{out}");
}

#[test]
fn malformed_objects_next_to_a_good_one() {
    let report = fixture("malformed");
    assert_eq!(names(&report), ["NodePool good"]);
    let errors: Vec<String> = report.errors.iter().map(ToString::to_string).collect();
    let has = |object: &str, field: &str| {
        assert!(
            errors.iter().any(|e| e.contains(&format!("({object}): {field}"))),
            "no error on {object} {field}:\n{}",
            errors.join("\n")
        )
    };
    has("NodePool typos", "spec.template.spec.taints[0].effect: \"NoScheduleOrElse\"");
    has("NodePool typos", "spec.template.spec.requirements[0].operator: \"Equals\"");
    has("NodePool typos", "spec.disruption.budgets[0].schedule");
    has("EC2NodeClass default", "spec.metadataOptions.httpPutResponseHopLimit: invalid type");
    has("NodePool static", "spec.replicas: static NodePools");
    has("NodePool legacy", "apiVersion \"karpenter.sh/v1beta1\" is not supported");
    // The good pool's class failed: it is told so.
    warned(&report, "NodePool good", "spec.template.spec.nodeClassRef.name", "no EC2NodeClass \"default\"");
}
