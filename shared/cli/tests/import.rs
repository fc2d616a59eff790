//! `dovetail import`, run as a user runs it: the built binary on realistic Karpenter manifests, on
//! files, on stdin, with `--output-file`, in each `-o` format.
//!
//! Each `fixtures/import/<name>.yaml` must print `expected/<name>.yaml` on stdout (the Dovetail
//! manifests) and `expected/<name>.stderr` (the warnings and errors, each naming file, document,
//! object and field, then the summary), and exit 0 with warnings only, 2 when anything failed.
//! The migration example is imported too (`infra/examples/karpenter-migration/expected/import.yaml`),
//! and the converted objects must plan exactly as the Karpenter originals do: the import changes
//! nothing Dovetail decides with. After a deliberate change, rewrite the goldens and review the
//! diff:
//!
//! ```text
//! DOVETAIL_BLESS=1 cargo test -p dovetail --test import
//! ```
//!
//! A re-bless accepts whatever the import does, so each fixture also asserts what it exists to
//! show on the library's report (`dovetail_api::import`), which must be what the binary printed,
//! and every output must load and validate as Dovetail manifests.
//!
//! `karpenter-v1-fields.yaml` stands for Karpenter's published v1 examples: it uses every field
//! they use (`fields::EXAMPLE_FIELDS`), each must come out unchanged or with a warning
//! (`fields::silently_changed`), and each converted pool must plan a generic Deployment.

mod common;
mod fields;

use std::path::{Path, PathBuf};

use common::{check_golden, dovetail, root, text};
use dovetail_api::import::{convert, Converted, Report};
use dovetail_api::manifest;

const FIXTURES: &str = "shared/cli/tests/fixtures/import";

fn read(path: impl AsRef<Path>) -> String {
    let path = root().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fresh directory for one test's output files.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("import").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    dir
}

/// Runs `dovetail import` on a fixture: stdout and stderr against the goldens, the exit code, the
/// output loading as Dovetail manifests. Returns the library's report of the same conversion.
fn fixture(name: &str, exit_code: i32) -> Report {
    let path = format!("{FIXTURES}/{name}.yaml");
    let out = dovetail(&["import", &path], None);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let expected = root().join(FIXTURES).join("expected");
    check_golden(&expected.join(format!("{name}.yaml")), &stdout, "import");
    check_golden(&expected.join(format!("{name}.stderr")), &stderr, "import");
    assert_eq!(out.status.code(), Some(exit_code), "{stderr}");

    let report = convert([(path.as_str(), read(&path).as_str())]);
    assert_eq!(report.yaml(), stdout, "the binary prints the library's conversion");
    // The warnings, the errors, the note on the stack's node role when a class names one, the summary.
    let note = usize::from(!report.node_roles().is_empty());
    assert_eq!(stderr.lines().count(), report.warnings.len() + report.errors.len() + note + 1, "{stderr}");
    assert_eq!(stderr.contains("dovetail: note: the classes use the node role"), note == 1, "{stderr}");
    if !report.objects.is_empty() {
        let inputs = manifest::load_str("out.yaml", &stdout).expect("the output loads as manifests");
        let snapshot = inputs.snapshot().expect("the output passes Dovetail's validation");
        let of = |kind: &str| report.objects.iter().filter(|o| o.kind() == kind).count();
        assert_eq!((snapshot.nodepools.len(), snapshot.nodeclasses.len()), (of("NodePool"), of("EC2NodeClass")));
        let overlays = inputs.overlays().expect("the output's overlays pass Dovetail's validation");
        assert_eq!(overlays.len(), of("NodeOverlay"));
    }
    report
}

fn messages(report: &Report) -> String {
    let warnings = report.warnings.iter().map(|w| format!("warning: {w}\n"));
    warnings.chain(report.errors.iter().map(|e| format!("error: {e}\n"))).collect()
}

/// Fails unless there is a warning on `field` of `object` saying `says`.
fn warned(report: &Report, object: &str, field: &str, says: &str) {
    let found = report.warnings.iter().any(|w| w.object == object && w.field == field && w.message.contains(says));
    assert!(found, "no warning on {object} {field} saying {says:?}:\n{}", messages(report));
}

fn names(report: &Report) -> Vec<String> {
    report.objects.iter().map(|o| format!("{} {}", o.kind(), o.name())).collect()
}

#[test]
fn kubectl_get_list() {
    let report = fixture("kubectl-get", 0);
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
    // A role is no warning (nothing is lost), but the note on the stack names it.
    assert!(report.warnings.iter().all(|w| w.field != "spec.role"), "{}", messages(&report));
    assert_eq!(report.node_roles(), ["KarpenterNodeRole-prod-eks"]);
    // Its Bottlerocket alias launches as Karpenter's does: nothing to say.
    assert!(report.warnings.iter().all(|w| !w.field.starts_with("spec.amiSelectorTerms")), "{}", messages(&report));
    // Dovetail's budgets and schedules are Karpenter's: nothing to say about the GPU pool's.
    assert!(report.warnings.iter().all(|w| !w.field.starts_with("spec.disruption")), "{}", messages(&report));
}

#[test]
fn gitops_multi_document_file() {
    let report = fixture("gitops", 0);
    assert!(report.errors.is_empty(), "{}", messages(&report));
    assert_eq!(
        names(&report),
        [
            "NodePool batch",
            "NodePool training",
            "EC2NodeClass default",
            "EC2NodeClass training",
            "NodePool windows",
            "EC2NodeClass windows"
        ]
    );
    warned(&report, "NodePool batch", "spec.template.metadata.annotations[karpenter.sh/do-not-disrupt]", "renamed");
    assert!(!report.warnings.iter().any(|w| w.field == "spec.limits[nodes]"), "{}", messages(&report));
    warned(&report, "NodePool training", "spec.template.spec.kubelet", "EC2NodeClass's spec.kubelet");
    // Capacity reservations and capacity type reserved carry over as they are: Dovetail launches
    // into reservations as Karpenter does.
    assert!(
        !report
            .warnings
            .iter()
            .any(|w| w.field == "spec.capacityReservationSelectorTerms" || w.message.contains("reserved")),
        "{}",
        messages(&report)
    );
    warned(&report, "EC2NodeClass training", "spec.enclaveOptions", "dropped");
    warned(&report, "ConfigMap karpenter/karpenter-global-settings", "", "skipped");
    // A Windows pool and class carry over as they are: Dovetail launches Windows nodes too, and
    // plans ephemeral storage from the root volume the class maps, as Karpenter does.
    let windows: Vec<_> = report
        .warnings
        .iter()
        .filter(|w| w.object.ends_with(" windows"))
        .map(|w| format!("{} {}", w.object, w.field))
        .collect();
    assert_eq!(windows, ["NodePool windows spec.template.spec.nodeClassRef.group"], "{}", messages(&report));
    // Mapped volumes and RAID0 are planned and applied as Karpenter does; an instance profile needs
    // no warning.
    assert!(report
        .warnings
        .iter()
        .all(|w| !w.field.starts_with("spec.block") && !w.field.starts_with("spec.instanceStore")));
    let out = report.yaml();
    assert!(out.contains("dovetail.dev/do-not-disrupt: 'true'"), "{out}");
    assert!(out.contains("shutdownGracePeriod: 60s"), "userData is carried over: {out}");
    assert!(!out.contains("maxPods: 110"), "the pool's kubelet is dropped: {out}");
}

#[test]
fn malformed_objects_next_to_a_good_one() {
    let report = fixture("malformed", 2);
    assert_eq!(names(&report), ["NodePool good"]);
    let errors: Vec<String> = report.errors.iter().map(ToString::to_string).collect();
    let has = |object: &str, field: &str| {
        let found = errors.iter().any(|e| e.contains(&format!("({object}): {field}")));
        assert!(found, "no error on {object} {field}:\n{}", errors.join("\n"));
    };
    has("NodePool typos", "spec.template.spec.taints[0].effect: \"NoScheduleOrElse\"");
    has("NodePool typos", "spec.template.spec.requirements[0].operator: \"Equals\"");
    has("NodePool typos", "spec.disruption.budgets[0].schedule");
    has("EC2NodeClass default", "spec.metadataOptions.httpPutResponseHopLimit: invalid type");
    has("NodePool static", "spec.replicas: a Karpenter field Dovetail refuses: static NodePools");
    has("NodePool legacy", "apiVersion \"karpenter.sh/v1beta1\" is not supported");
    assert_eq!(errors.len(), 6, "{}", errors.join("\n"));
    // The good pool's class failed: it is told so.
    warned(&report, "NodePool good", "spec.template.spec.nodeClassRef.name", "no EC2NodeClass \"default\"");
}

/// Karpenter's NodeOverlays carry over as Dovetail's, except one that selects a NodePool: Dovetail
/// prices one catalog for every pool, so that overlay is refused with its field, and the others
/// still convert.
#[test]
fn karpenter_overlays() {
    let report = fixture("karpenter-v1alpha1-overlays", 2);
    assert_eq!(
        names(&report),
        ["NodeOverlay compute-savings-plan", "NodeOverlay licensed-ami", "NodeOverlay fuse-devices"]
    );
    let errors: Vec<String> = report.errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 1, "{}", errors.join("\n"));
    assert!(
        errors[0].contains(
            "(NodeOverlay gpu-pool-only): spec.requirements[0].key: \"karpenter.sh/nodepool\" cannot be selected on"
        ),
        "{}",
        errors[0]
    );
    warned(&report, "NodeOverlay licensed-ami", "status", "dropped");
    warned(&report, "NodeOverlay licensed-ami", "metadata.annotations", "karpenter.sh/nodeoverlay-hash");
    let out = report.yaml();
    assert!(!out.contains("karpenter.sh/v1alpha1"), "{out}");
    assert_eq!(out.matches("apiVersion: dovetail.dev/v1alpha1").count(), 3, "{out}");
    assert!(out.contains("priceAdjustment: -28%"), "{out}");
    assert!(out.contains("price: '0.5'") || out.contains("priceAdjustment: '+0.05'"), "{out}");
}

#[test]
fn stdin_by_default_or_dash_and_an_output_file() {
    let input = read(format!("{FIXTURES}/kubectl-get.yaml"));
    let yaml = read(format!("{FIXTURES}/expected/kubectl-get.yaml"));
    let out = dovetail(&["import"], Some(input.as_bytes()));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), yaml);
    let err = text(&out.stderr);
    assert!(err.contains("warning: <stdin>: document 1, item 4 (EC2NodeClass gpu): status: dropped"), "{err}");
    assert!(err.ends_with("dovetail: converted 2 NodePools and 2 EC2NodeClasses, 12 warnings, 0 errors\n"), "{err}");

    let file = scratch("stdin").join("dovetail.yaml");
    let out = dovetail(&["import", "-f", "-", "--output-file", file.to_str().unwrap()], Some(input.as_bytes()));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "with --output-file nothing goes to stdout");
    assert_eq!(read(&file), yaml);
}

#[test]
fn an_unreadable_file_stops_only_itself() {
    let out = dovetail(&["import", "no-such-file.yaml", &format!("{FIXTURES}/gitops.yaml")], None);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stdout), read(format!("{FIXTURES}/expected/gitops.yaml")));
    let err = text(&out.stderr);
    assert!(err.contains("dovetail: error: no-such-file.yaml: cannot read: "), "{err}");
    assert!(err.ends_with("converted 3 NodePools and 3 EC2NodeClasses, 7 warnings, 1 error\n"), "{err}");
}

#[test]
fn the_migration_example_imports_and_plans_the_same() {
    let example = "infra/examples/karpenter-migration";
    let file = scratch("example").join("dovetail.yaml");
    let (pool, class) = (format!("{example}/nodepool.yaml"), format!("{example}/ec2nodeclass.yaml"));
    let out = dovetail(&["import", "-f", &pool, "-f", &class, "--output-file", file.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let imported = read(&file);
    check_golden(&root().join(example).join("expected/import.yaml"), &imported, "import");
    assert!(imported.contains("group: dovetail.dev") && !imported.contains("karpenter.sh/v1"), "{imported}");

    // Dovetail reads Karpenter's objects as its own, so the plan must not move.
    let workloads = format!("{example}/workloads.yaml");
    let plan = dovetail(&["plan", "-o", "json", "-f", file.to_str().unwrap(), "-f", &workloads], None);
    assert!(plan.status.success(), "{}", text(&plan.stderr));
    assert_eq!(text(&plan.stdout), read(format!("{example}/expected/plan.json")));
}

#[test]
fn help_explains_the_conversion() {
    let out = dovetail(&["import", "--help"], None);
    assert!(out.status.success());
    let help = text(&out.stdout);
    for part in [
        "What changes:",
        "Warnings (stderr)",
        "Errors (stderr, exit code 2)",
        "-o, --output <FORMAT>",
        "--output-file <FILE>",
        "Examples:",
        "Exit codes:",
    ] {
        assert!(help.contains(part), "{part:?} missing from:\n{help}");
    }
}

#[test]
fn the_old_output_file_form_says_where_files_went() {
    let file = scratch("old-form").join("dovetail.yaml");
    let example = "infra/examples/karpenter-migration/nodepool.yaml";
    let out = dovetail(&["import", example, "-o", file.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let err = text(&out.stderr);
    let says =
        format!("unknown output format '{}' (table|json|yaml); to write files use --output-file", file.display());
    assert!(err.contains(&says), "{err}");
    assert_eq!(text(&out.stdout), "");
    assert!(!file.exists(), "nothing written");
}

#[test]
fn json_and_table_show_the_same_conversion() {
    let example = "infra/examples/karpenter-migration";
    let (pool, class) = (format!("{example}/nodepool.yaml"), format!("{example}/ec2nodeclass.yaml"));
    let report = convert([(pool.as_str(), read(&pool).as_str()), (class.as_str(), read(&class).as_str())]);

    let json = dovetail(&["import", "-o", "json", &pool, &class], None);
    assert_eq!(json.status.code(), Some(0), "{}", text(&json.stderr));
    let list: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON document");
    assert_eq!((list["apiVersion"].as_str(), list["kind"].as_str()), (Some("v1"), Some("List")));
    // The same objects as the YAML output, item for item.
    let yaml: Vec<serde_json::Value> =
        report.yaml().split("---\n").map(|doc| serde_yaml_ng::from_str(doc).expect("a YAML document")).collect();
    assert_eq!(list["items"].as_array().expect("items"), &yaml);

    let table = dovetail(&["import", "-o", "table", &pool, &class], None);
    assert_eq!(table.status.code(), Some(0), "{}", text(&table.stderr));
    let warnings = |object: &str| report.warnings.iter().filter(|w| w.object == object).count();
    let expected = format!(
        "KIND          NAME     WARNINGS\nNodePool      default  {}\nEC2NodeClass  default  {}\n",
        warnings("NodePool default"),
        warnings("EC2NodeClass default")
    );
    assert_eq!(text(&table.stdout), expected);
    // The class converts without a word (its 50Gi root volume is planned as it is).
    assert!(warnings("NodePool default") > 0 && warnings("EC2NodeClass default") == 0, "{:?}", report.warnings);
}

const FIELDS: &str = "karpenter-v1-fields";

/// The `(object, field)` of every warning, sorted.
fn warned_fields(report: &Report) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = report.warnings.iter().map(|w| (w.object.clone(), w.field.clone())).collect();
    all.sort();
    all
}

#[test]
fn every_field_of_karpenters_examples_carries_over() {
    let report = fixture(FIELDS, 0);
    assert!(report.errors.is_empty(), "{}", messages(&report));
    let inputs = fields::documents(&read(format!("{FIXTURES}/{FIELDS}.yaml")));
    assert_eq!(fields::uncovered(&inputs), Vec::<String>::new(), "the fixture no longer covers the examples");
    assert_eq!(report.objects.len(), inputs.len(), "every object converts");

    // What the import says, all of it: the group of every pool and what Dovetail launches
    // differently (AL2). The roles are a note on the stack, not a warning.
    let pools =
        ["general", "spot-spread", "large", "graviton", "nvme", "legacy", "custom", "custom-alias", "bottlerocket"];
    let mut expected: Vec<(String, String)> =
        pools.iter().map(|p| (format!("NodePool {p}"), "spec.template.spec.nodeClassRef.group".to_string())).collect();
    expected.push(("EC2NodeClass al2-images".into(), "spec.amiFamily".into()));
    expected.sort();
    assert_eq!(warned_fields(&report), expected, "{}", messages(&report));
    warned(&report, "NodePool general", "spec.template.spec.nodeClassRef.group", "karpenter.k8s.aws → dovetail.dev");
    assert!(report.node_roles().contains(&"NodeRole-shop-prod"), "{:?}", report.node_roles());
    warned(&report, "EC2NodeClass al2-images", "spec.amiFamily", "deprecated AL2");

    // Everything else comes out as it went in: values, and fields no warning names.
    let outputs = fields::outputs(&report);
    assert_eq!(fields::silently_changed(&inputs, &outputs, &report.warnings), Vec::<String>::new());
    let pool = |name: &str| outputs.iter().find(|o| o["kind"] == "NodePool" && o["metadata"]["name"] == name).unwrap();
    assert_eq!(pool("general")["spec"]["limits"]["cpu"], "400", "a number limit is a quantity");
    assert_eq!(pool("general")["spec"]["template"]["spec"]["nodeClassRef"]["group"], "dovetail.dev");
    assert_eq!(pool("spot-spread")["spec"]["template"]["spec"]["requirements"][3]["minValues"], 4);
}

#[test]
fn the_field_check_names_what_an_import_loses_or_changes() {
    let report = convert([("in.yaml", read(format!("{FIXTURES}/{FIELDS}.yaml")).as_str())]);
    let inputs = fields::documents(&read(format!("{FIXTURES}/{FIELDS}.yaml")));
    let mut outputs = fields::outputs(&report);
    let class =
        outputs.iter_mut().find(|o| o["metadata"]["name"] == "standard" && o["kind"] == "EC2NodeClass").unwrap();
    class["spec"]["kubelet"].as_object_mut().unwrap().remove("cpuCFSQuota");
    class["spec"]["tags"]["CostCentre"] = "0815".into();
    let pool = outputs.iter_mut().find(|o| o["metadata"]["name"] == "spot-spread").unwrap();
    pool["apiVersion"] = "karpenter.sh/v1".into();
    // Dropping a field the import warns about is what the warning is for: not reported.
    let al2 = outputs.iter_mut().find(|o| o["metadata"]["name"] == "al2-images").unwrap();
    al2["spec"].as_object_mut().unwrap().remove("amiFamily");
    assert_eq!(
        fields::silently_changed(&inputs, &outputs, &report.warnings),
        [
            "NodePool spot-spread: apiVersion: \"dovetail.dev/v1\" became \"karpenter.sh/v1\"",
            "EC2NodeClass standard: spec.kubelet.cpuCFSQuota: \"true\" is gone",
            "EC2NodeClass standard: spec.tags.CostCentre: \"4711\" became \"0815\"",
        ]
    );

    // The coverage check notices a field of the examples the fixture stops using.
    let mut fewer = inputs.clone();
    for object in &mut fewer {
        if let Some(spec) = object["spec"].as_object_mut() {
            spec.remove("instanceStorePolicy");
        }
    }
    assert_eq!(fields::uncovered(&fewer), ["EC2NodeClass spec.instanceStorePolicy"]);
    assert_eq!(fields::parse("spec.tags[example.org/x].y[0]"), ["spec", "tags", "example.org/x", "y", "0"]);
}

/// A Deployment of 10 replicas of 500m and 1Gi, with `pod_spec` merged into its pod template's
/// spec (selectors, tolerations).
fn generic_deployment(name: &str, pod_spec: serde_json::Value) -> String {
    let mut spec = serde_json::json!({
        "containers": [{"name": "app", "image": "example.org/app:1",
                        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
    });
    spec.as_object_mut().unwrap().extend(pod_spec.as_object().cloned().unwrap_or_default());
    let deployment = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": 10, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": spec}},
    });
    serde_yaml_ng::to_string(&deployment).unwrap()
}

/// `dovetail plan -o json` of the files; fails unless it succeeds.
fn plan_json(files: &[&Path]) -> serde_json::Value {
    let mut args = vec!["plan", "-o", "json"];
    for file in files {
        args.extend(["-f", file.to_str().unwrap()]);
    }
    let out = dovetail(&args, None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the plan as JSON")
}

#[test]
fn every_imported_pool_plans_a_generic_deployment() {
    let report = fixture(FIELDS, 0);
    let dir = scratch("plan-fields");
    let imported = dir.join("dovetail.yaml");
    std::fs::write(&imported, report.yaml()).unwrap();

    // No selector at all: some pool takes it.
    let workload = dir.join("generic.yaml");
    std::fs::write(&workload, generic_deployment("generic", serde_json::json!({}))).unwrap();
    let plan = plan_json(&[&imported, &workload]);
    assert_eq!(plan["unschedulable"], serde_json::json!([]), "{plan}");
    assert!(!plan["nodeclaims"].as_array().unwrap().is_empty(), "{plan}");

    each_pool_plans(&report, &imported, &workload, serde_json::json!({}));
}

/// For each pool of the report (imported into `imported`): a generic Deployment that selects the
/// pool by name and by `selector` and tolerates its taints plans claims of that pool only, with
/// `selector`'s labels, and leaves no pod unplaced. `workload` is the file to write it to.
fn each_pool_plans(report: &Report, imported: &Path, workload: &Path, selector: serde_json::Value) {
    for object in &report.objects {
        let Converted::NodePool(pool) = object else { continue };
        let name = object.name();
        let tolerations: Vec<serde_json::Value> = pool
            .spec
            .template
            .spec
            .taints
            .iter()
            .map(|t| serde_json::json!({"key": t.key, "operator": "Exists", "effect": t.effect.to_string()}))
            .collect();
        let mut node_selector = selector.clone();
        node_selector["dovetail.dev/nodepool"] = name.into();
        let pod_spec = serde_json::json!({"nodeSelector": node_selector, "tolerations": tolerations});
        std::fs::write(workload, generic_deployment(name, pod_spec)).unwrap();
        let plan = plan_json(&[imported, workload]);
        assert_eq!(plan["unschedulable"], serde_json::json!([]), "pool {name}: {plan}");
        let claims = plan["nodeclaims"].as_array().unwrap();
        assert!(!claims.is_empty(), "pool {name} plans no claim: {plan}");
        for claim in claims {
            assert_eq!(claim["nodepool"], name, "pool {name}: {plan}");
            for (key, value) in node_selector.as_object().unwrap() {
                assert_eq!(&claim["labels"][key], value, "pool {name}, label {key}: {claim}");
            }
        }
    }
}

#[test]
fn karpenters_windows_fields_carry_over() {
    let report = fixture("karpenter-v1-windows", 0);
    assert!(report.errors.is_empty(), "{}", messages(&report));
    assert_eq!(
        names(&report),
        [
            "NodePool build-2019",
            "NodePool reports",
            "NodePool build-2025",
            "EC2NodeClass build-2019",
            "EC2NodeClass reports",
            "EC2NodeClass build-2025"
        ]
    );
    // Windows carries over as it is: the groups are all there is to say.
    let mut expected: Vec<(String, String)> = ["build-2019", "reports", "build-2025"]
        .iter()
        .map(|name| (format!("NodePool {name}"), "spec.template.spec.nodeClassRef.group".to_string()))
        .collect();
    expected.sort();
    assert_eq!(warned_fields(&report), expected, "{}", messages(&report));
    warned(&report, "NodePool reports", "spec.template.spec.nodeClassRef.group", "is an apiVersion");

    let inputs = fields::documents(&read(format!("{FIXTURES}/karpenter-v1-windows.yaml")));
    assert_eq!(fields::silently_changed(&inputs, &fields::outputs(&report), &report.warnings), Vec::<String>::new());
}

#[test]
fn every_imported_windows_pool_plans_a_windows_deployment() {
    let report = fixture("karpenter-v1-windows", 0);
    let dir = scratch("plan-windows");
    let imported = dir.join("dovetail.yaml");
    std::fs::write(&imported, report.yaml()).unwrap();
    let workload = dir.join("windows.yaml");

    // Selecting Windows only: some Windows pool takes it.
    std::fs::write(
        &workload,
        generic_deployment("windows", serde_json::json!({"nodeSelector": {"kubernetes.io/os": "windows"}})),
    )
    .unwrap();
    let plan = plan_json(&[&imported, &workload]);
    assert_eq!(plan["unschedulable"], serde_json::json!([]), "{plan}");
    assert!(!plan["nodeclaims"].as_array().unwrap().is_empty(), "{plan}");

    // Each pool on its own, its claims Windows nodes of the class's release.
    each_pool_plans(&report, &imported, &workload, serde_json::json!({"kubernetes.io/os": "windows"}));
    let builds = [("build-2019", "10.0.17763"), ("reports", "10.0.20348"), ("build-2025", "10.0.26100")];
    for (pool, build) in builds {
        let selector = serde_json::json!({"dovetail.dev/nodepool": pool});
        std::fs::write(&workload, generic_deployment(pool, serde_json::json!({"nodeSelector": selector}))).unwrap();
        let plan = plan_json(&[&imported, &workload]);
        for claim in plan["nodeclaims"].as_array().unwrap() {
            assert_eq!(claim["labels"]["node.kubernetes.io/windows-build"], build, "{claim}");
            assert_eq!(claim["labels"]["kubernetes.io/arch"], "amd64", "{claim}");
        }
    }

    // A pod that selects Linux is no Windows pool's. (One that selects no OS may land on either,
    // as with Karpenter and the scheduler: Windows pools are usually tainted for that reason.)
    let linux = serde_json::json!({"nodeSelector": {"kubernetes.io/os": "linux"}});
    std::fs::write(&workload, generic_deployment("linux", linux)).unwrap();
    let plan = plan_json(&[&imported, &workload]);
    assert_eq!(plan["nodeclaims"], serde_json::json!([]), "{plan}");
    assert_eq!(plan["unschedulable"].as_array().unwrap().len(), 10, "{plan}");
}
