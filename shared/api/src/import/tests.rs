//! One rule at a time, on small inline manifests. The fixture files and their golden output are
//! checked, through the binary, in `cli/tests/import.rs`.

use super::*;
use crate::crd::{AmiFamily, HttpTokens, Operator};

const CLASS: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  instanceProfile: KarpenterNodeInstanceProfile-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"#;

const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
"#;

fn run(yaml: &str) -> Report {
    convert([("in.yaml", yaml)])
}

/// `CLASS` plus the given documents, so pools have their class.
fn with_class(yaml: &str) -> Report {
    run(&format!("{CLASS}---\n{yaml}"))
}

/// A pool with `edit` applied to `POOL`'s text.
fn pool(edit: impl Fn(&mut serde_yaml_ng::Value)) -> String {
    let mut doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(POOL).unwrap();
    edit(&mut doc);
    serde_yaml_ng::to_string(&doc).unwrap()
}

/// `POOL` renamed and edited.
fn named_pool(name: &str, edit: impl Fn(&mut serde_yaml_ng::Value)) -> String {
    pool(|d| {
        d["metadata"]["name"] = name.into();
        edit(d);
    })
}

fn class(edit: impl Fn(&mut serde_yaml_ng::Value)) -> String {
    let mut doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(CLASS).unwrap();
    edit(&mut doc);
    serde_yaml_ng::to_string(&doc).unwrap()
}

fn yaml(text: &str) -> serde_yaml_ng::Value {
    serde_yaml_ng::from_str(text).unwrap()
}

/// The warning about `field` of `object`; fails listing all warnings when there is none.
fn warning<'r>(report: &'r Report, object: &str, field: &str) -> &'r Warning {
    report
        .warnings
        .iter()
        .find(|w| w.object == object && w.field == field)
        .unwrap_or_else(|| panic!("no warning on {object} {field}; warnings:\n{}", lines(&report.warnings)))
}

fn no_warning(report: &Report, object: &str, field: &str) {
    let found: Vec<&Warning> = report.warnings.iter().filter(|w| w.object == object && w.field == field).collect();
    assert!(found.is_empty(), "unexpected warnings: {found:?}");
}

fn lines<T: ToString>(items: &[T]) -> String {
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
}

fn errors(report: &Report) -> String {
    lines(&report.errors)
}

/// The converted `kind name`; fails listing the errors when there is none.
fn object<'r>(report: &'r Report, kind: &str, name: &str) -> &'r Converted {
    let found = report.objects.iter().find(|o| o.kind() == kind && o.name() == name);
    found.unwrap_or_else(|| panic!("no {kind} {name}; errors:\n{}", errors(report)))
}

fn pool_of(report: &Report, name: &str) -> NodePool {
    let Converted::NodePool(pool) = object(report, "NodePool", name) else { unreachable!("a NodePool") };
    (**pool).clone()
}

fn class_of(report: &Report, name: &str) -> EC2NodeClass {
    let Converted::EC2NodeClass(class) = object(report, "EC2NodeClass", name) else { unreachable!("a class") };
    (**class).clone()
}

#[test]
fn an_api_version_written_as_the_class_group_is_read_as_its_group() {
    // One of Karpenter's published examples (windows-custom-userdata.yaml) writes it so.
    let report =
        with_class(&pool(|d| d["spec"]["template"]["spec"]["nodeClassRef"]["group"] = "karpenter.k8s.aws/v1".into()));
    assert!(report.errors.is_empty(), "{}", errors(&report));
    assert_eq!(pool_of(&report, "default").spec.template.spec.node_class_ref.group, "dovetail.dev");
    let w = warning(&report, "NodePool default", "spec.template.spec.nodeClassRef.group");
    assert!(
        w.message.contains("\"karpenter.k8s.aws/v1\" is an apiVersion: read as the group karpenter.k8s.aws"),
        "{w}"
    );
    // Another group with a version is not Karpenter's class: refused as before, the field named.
    let report =
        with_class(&pool(|d| d["spec"]["template"]["spec"]["nodeClassRef"]["group"] = "example.com/v1".into()));
    assert!(errors(&report).contains("nodeClassRef.group"), "{}", errors(&report));
}

#[test]
fn a_pool_and_its_class_become_dovetail_objects() {
    let report = with_class(POOL);
    assert!(report.errors.is_empty(), "{}", errors(&report));
    assert_eq!(report.objects.iter().map(Converted::kind).collect::<Vec<_>>(), ["EC2NodeClass", "NodePool"]);
    let pool = pool_of(&report, "default");
    assert_eq!(pool.spec.template.spec.node_class_ref.group, "dovetail.dev");
    assert!(pool.spec.template.spec.node_class_ref.is_ec2_node_class());
    let w = warning(&report, "NodePool default", "spec.template.spec.nodeClassRef.group");
    assert!(w.message.starts_with("karpenter.k8s.aws → dovetail.dev"), "{w}");
    // The group is the only thing worth a word here.
    assert_eq!(report.warnings.len(), 1, "{}", lines(&report.warnings));

    let out = report.yaml();
    assert_eq!(out.matches("apiVersion: dovetail.dev/v1").count(), 2, "{out}");
    assert!(!out.contains("karpenter.k8s.aws/v1") && !out.contains("karpenter.sh/v1"), "{out}");
    // Defaults are written out as the API server would store them.
    let class = class_of(&report, "default");
    assert_eq!(class.spec.metadata_options.http_tokens, HttpTokens::Required);
    assert!(out.contains("expireAfter: 720h"), "{out}");
}

#[test]
fn the_output_is_what_dovetail_reads() {
    let report = with_class(POOL);
    let inputs = crate::manifest::load_str("out.yaml", &report.yaml()).expect("the output loads");
    assert_eq!((inputs.node_pools.len(), inputs.node_classes.len()), (1, 1));
    let snapshot = inputs.snapshot().expect("the output validates");
    assert_eq!(snapshot.nodepools[0].node_class, "default");
    // Importing the output again converts nothing: it is already Dovetail's.
    let again = run(&report.yaml());
    assert!(again.objects.is_empty() && again.errors.is_empty());
    assert!(again.warnings.iter().all(|w| w.message == "skipped: already a Dovetail object"), "{again:?}");
}

#[test]
fn kubectl_bookkeeping_goes_silently_karpenters_with_a_warning() {
    let report = with_class(&pool(|d| {
        d["metadata"] = yaml(
            r#"
name: default
uid: 0f3c8f1e-0000-4000-8000-000000000001
resourceVersion: "123456"
generation: 4
creationTimestamp: "2025-03-01T10:00:00Z"
managedFields: [{manager: kubectl, operation: Update}]
labels: {team: platform}
annotations:
  kubernetes.io/description: General purpose
  kubectl.kubernetes.io/last-applied-configuration: '{"apiVersion":"karpenter.sh/v1"}'
  karpenter.sh/nodepool-hash: "6821555240594823858"
  karpenter.sh/nodepool-hash-version: v3
finalizers: [karpenter.sh/termination]
ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: owner, uid: 1}]
"#,
        );
        d["status"] = yaml("{resources: {cpu: '4', nodes: '1'}, conditions: [{type: Ready, status: 'True'}]}");
    }));
    assert!(report.errors.is_empty(), "{}", errors(&report));
    let pool = pool_of(&report, "default");
    let meta = serde_json::to_value(&pool.metadata).unwrap();
    assert_eq!(
        meta,
        serde_json::json!({"name": "default", "labels": {"team": "platform"},
                           "annotations": {"kubernetes.io/description": "General purpose"}})
    );
    assert!(pool.status.is_none());
    let hashes = warning(&report, "NodePool default", "metadata.annotations");
    assert!(hashes.message.contains("karpenter.sh/nodepool-hash, karpenter.sh/nodepool-hash-version"), "{hashes}");
    assert!(warning(&report, "NodePool default", "metadata.finalizers").message.contains("karpenter.sh/termination"));
    warning(&report, "NodePool default", "metadata.ownerReferences");
    assert!(warning(&report, "NodePool default", "status").message.starts_with("dropped"));
    for silent in ["metadata.uid", "metadata.managedFields", "metadata.labels"] {
        no_warning(&report, "NodePool default", silent);
    }
}

#[test]
fn the_kubelet_migration_annotation_points_at_the_class() {
    let report = with_class(&pool(|d| {
        d["metadata"]["annotations"] =
            yaml(r#"{compatibility.karpenter.sh/v1beta1-kubelet-conversion: '{"maxPods":20}'}"#);
    }));
    let w = warning(&report, "NodePool default", "metadata.annotations");
    assert!(w.message.contains("EC2NodeClass's spec.kubelet"), "{w}");
}

#[test]
fn fields_dovetail_lacks_are_dropped_with_their_path() {
    let report = with_class(&pool(|d| {
        d["spec"]["template"]["spec"]["kubelet"] = yaml("{maxPods: 20}");
        d["spec"]["template"]["spec"]["requirements"][0]["flexibility"] = yaml("high");
        d["spec"]["consolidateWhen"] = yaml("Always");
    }));
    assert!(report.errors.is_empty(), "{}", errors(&report));
    let kubelet = warning(&report, "NodePool default", "spec.template.spec.kubelet");
    assert!(kubelet.message.contains("EC2NodeClass's spec.kubelet"), "{kubelet}");
    for field in ["spec.consolidateWhen", "spec.template.spec.requirements[0].flexibility"] {
        assert_eq!(
            warning(&report, "NodePool default", field).message,
            "dropped: Dovetail's NodePool has no such field"
        );
    }
    assert!(!report.yaml().contains("flexibility"));

    let report = run(&class(|d| d["spec"]["launchTemplate"] = yaml("lt-0123")));
    assert_eq!(
        warning(&report, "EC2NodeClass default", "spec.launchTemplate").message,
        "dropped: Dovetail's EC2NodeClass has no such field"
    );
}

/// Karpenter 1.14's fields Dovetail refuses are errors naming them, as on the cluster, not
/// fields dropped with a warning.
#[test]
fn refused_karpenter_fields_are_errors() {
    let report = run(&class(|d| {
        d["spec"]["ipPrefixCount"] = yaml("2");
        d["spec"]["kubelet"] = yaml("{maxPods: 20, containerLogMaxSize: 10Mi}");
    }));
    assert!(report.objects.is_empty());
    let errors: Vec<String> = report.errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("(EC2NodeClass default): spec.ipPrefixCount: a Karpenter field Dovetail refuses: "));
    assert!(errors[1].contains("(EC2NodeClass default): spec.kubelet.containerLogMaxSize: a Karpenter field"));
}

#[test]
fn a_static_pool_is_refused_and_the_others_still_convert() {
    let report = with_class(&[named_pool("static", |d| d["spec"]["replicas"] = 3.into()), POOL.into()].join("---\n"));
    assert_eq!(report.errors.len(), 1, "{}", errors(&report));
    let e = report.errors[0].to_string();
    assert!(
        e.starts_with("in.yaml: document 2 (NodePool static): spec.replicas: a Karpenter field Dovetail refuses: static NodePools"),
        "{e}"
    );
    pool_of(&report, "default");
    // A failed object's warnings are not reported: it is not converted at all.
    assert!(report.warnings.iter().all(|w| w.object != "NodePool static"), "{}", lines(&report.warnings));
}

#[test]
fn invalid_objects_name_object_and_field_and_stop_nothing_else() {
    let heavy = named_pool("heavy", |d| {
        d["spec"]["weight"] = 500.into();
        d["spec"]["disruption"] = yaml("{budgets: [{nodes: ten%}]}");
    });
    let misfit = named_pool("misfit", |d| d["spec"]["template"]["spec"]["requirements"] = yaml("{key: a}"));
    let report = with_class(&[heavy, misfit, POOL.into()].join("---\n"));
    let text = errors(&report);
    assert!(text.contains("in.yaml: document 2 (NodePool heavy): spec.weight: 500 is outside 1-100"), "{text}");
    assert!(text.contains("(NodePool heavy): spec.disruption.budgets[0].nodes: \"ten%\""), "{text}");
    assert!(text.contains("in.yaml: document 3 (NodePool misfit): spec.template.spec.requirements: "), "{text}");
    assert_eq!(report.errors.len(), 3, "{text}");
    assert_eq!(report.objects.len(), 2);
    pool_of(&report, "default");
}

#[test]
fn a_broken_file_stops_only_itself() {
    let report = convert([("bad.yaml", "kind: [unclosed\n"), ("good.yaml", CLASS)]);
    assert_eq!(report.errors.len(), 1);
    assert!(report.errors[0].to_string().starts_with("bad.yaml: document 1: invalid YAML"), "{}", errors(&report));
    class_of(&report, "default");
}

#[test]
fn other_kinds_are_skipped_and_old_karpenter_apis_refused() {
    let report = run(r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: karpenter}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: default-abcde}
---
apiVersion: dovetail.dev/v1
kind: NodePool
metadata: {name: ours}
---
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: old}
---
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: older}
---
kind: NodePool
metadata: {name: nameless-version}
"#);
    assert!(report.objects.is_empty());
    let skipped = lines(&report.warnings);
    assert!(
        skipped.contains("(ConfigMap karpenter/settings): skipped: v1 ConfigMap is not a Karpenter NodePool"),
        "{skipped}"
    );
    assert!(skipped.contains("(NodeClaim default-abcde): skipped: Karpenter's record of a node"), "{skipped}");
    assert!(skipped.contains("(NodePool ours): skipped: already a Dovetail object"), "{skipped}");
    let text = errors(&report);
    assert!(
        text.contains(
            "(NodePool old): apiVersion \"karpenter.sh/v1beta1\" is not supported for NodePool; use karpenter.sh/v1"
        ),
        "{text}"
    );
    assert!(text.contains("(Provisioner older): karpenter.sh/v1alpha5 is Karpenter's API from before v1"), "{text}");
    assert!(text.contains("document 6 (NodePool nameless-version): missing \"apiVersion\""), "{text}");
    assert_eq!(report.errors.len(), 3, "{text}");
}

#[test]
fn duplicates_are_errors() {
    let report = with_class(&format!("{POOL}---\n{POOL}"));
    assert_eq!(report.objects.len(), 2);
    assert_eq!(errors(&report), "in.yaml: document 3 (NodePool default): defined twice (first in in.yaml: document 2)");
}

#[test]
fn a_pool_without_its_class_is_warned_about() {
    let report = run(POOL);
    let w = warning(&report, "NodePool default", "spec.template.spec.nodeClassRef.name");
    assert!(w.message.starts_with("no EC2NodeClass \"default\" was converted"), "{w}");
    no_warning(&with_class(POOL), "NodePool default", "spec.template.spec.nodeClassRef.name");
}

#[test]
fn do_not_disrupt_takes_dovetails_spelling() {
    let report = with_class(&pool(|d| {
        d["spec"]["template"]["metadata"] =
            yaml("{annotations: {karpenter.sh/do-not-disrupt: 'true', karpenter.sh/custom: x, team: a}}");
    }));
    let annotations = pool_of(&report, "default").spec.template.metadata.annotations;
    assert_eq!(annotations.keys().collect::<Vec<_>>(), ["dovetail.dev/do-not-disrupt", "karpenter.sh/custom", "team"]);
    let renamed =
        warning(&report, "NodePool default", "spec.template.metadata.annotations[karpenter.sh/do-not-disrupt]");
    assert!(renamed.message.starts_with("renamed to dovetail.dev/do-not-disrupt"), "{renamed}");
    let kept = warning(&report, "NodePool default", "spec.template.metadata.annotations[karpenter.sh/custom]");
    assert!(kept.message.starts_with("kept"), "{kept}");

    // A Dovetail spelling already there wins.
    let report = with_class(&pool(|d| {
        d["spec"]["template"]["metadata"] =
            yaml("{annotations: {karpenter.sh/do-not-disrupt: 'true', dovetail.dev/do-not-disrupt: '2h'}}");
    }));
    let annotations = pool_of(&report, "default").spec.template.metadata.annotations;
    assert_eq!(
        annotations.into_iter().collect::<Vec<_>>(),
        [("dovetail.dev/do-not-disrupt".to_string(), "2h".to_string())]
    );
    let dropped =
        warning(&report, "NodePool default", "spec.template.metadata.annotations[karpenter.sh/do-not-disrupt]");
    assert!(dropped.message.starts_with("dropped: dovetail.dev/do-not-disrupt is set too"), "{dropped}");
}

#[test]
fn values_dovetail_never_offers_are_kept_with_a_warning() {
    let report = with_class(&pool(|d| {
        d["spec"]["template"]["spec"]["requirements"] = yaml(
            "[{key: karpenter.sh/capacity-type, operator: In, values: [reserved, on-demand]},
              {key: kubernetes.io/os, operator: In, values: [linux, windows]},
              {key: karpenter.sh/capacity-type, operator: NotIn, values: [reserved]},
              {key: karpenter.k8s.aws/instance-family, operator: In, values: [m7i, c7i], minValues: 2}]",
        );
        d["spec"]["template"]["spec"]["taints"] =
            yaml("[{key: karpenter.sh/disrupted, effect: NoSchedule}, {key: karpenter.sh/capacity-type, value: spot, effect: NoSchedule}]");
        d["spec"]["limits"] = yaml("{cpu: 100, nodes: 10, dovetail.dev/cost-per-hour: \"12.5\"}");
    }));
    let pool = pool_of(&report, "default");
    assert_eq!(pool.spec.template.spec.requirements[0].values, ["reserved", "on-demand"]);
    assert_eq!(pool.spec.template.spec.requirements[3].operator, Operator::In);
    // Capacity type reserved is offered (a class's capacity reservations), so it carries over silently.
    no_warning(&report, "NodePool default", "spec.template.spec.requirements[0]");
    // Windows is an OS Dovetail launches (with a Windows EC2NodeClass), so os windows matches.
    no_warning(&report, "NodePool default", "spec.template.spec.requirements[1]");
    no_warning(&report, "NodePool default", "spec.template.spec.requirements[2]");
    no_warning(&report, "NodePool default", "spec.template.spec.requirements[3]");
    assert!(warning(&report, "NodePool default", "spec.template.spec.taints[0]")
        .message
        .contains("dovetail.dev/disrupted"));
    // A well-known label used as a taint key is an ordinary taint under both.
    no_warning(&report, "NodePool default", "spec.template.spec.taints[1]");
    // Dovetail caps a pool's node count as Karpenter does (`limits.nodes`): nothing to say.
    no_warning(&report, "NodePool default", "spec.limits[nodes]");
    assert_eq!(pool.spec.limits["cpu"].0, "100");
    // A cost limit (Dovetail's key in Karpenter's ResourceList) is kept as written, nothing to say.
    assert_eq!(pool.spec.limits["dovetail.dev/cost-per-hour"].0, "12.5");
    no_warning(&report, "NodePool default", "spec.limits[dovetail.dev/cost-per-hour]");
}

#[test]
fn of_the_ami_families_only_al2_is_flagged() {
    // Karpenter 1.14's Windows families, 2025 included, are launched as Karpenter launches them:
    // by alias or by amiFamily, nothing to say.
    for (alias, family) in [
        ("windows2019", AmiFamily::Windows2019),
        ("windows2022", AmiFamily::Windows2022),
        ("windows2025", AmiFamily::Windows2025),
    ] {
        let report = run(&class(|d| d["spec"]["amiSelectorTerms"] = yaml(&format!("[{{alias: {alias}@latest}}]"))));
        assert!(report.warnings.is_empty(), "{alias}: {}", lines(&report.warnings));
        assert_eq!(class_of(&report, "default").ami_family(), family);
        let report = run(&class(|d| {
            d["spec"]["amiFamily"] = family.to_string().into();
            d["spec"]["amiSelectorTerms"] = yaml("[{id: ami-0123456789abcdef0}]");
        }));
        assert!(report.warnings.is_empty(), "amiFamily {family}: {}", lines(&report.warnings));
    }

    // Bottlerocket launches as Karpenter's does: nothing to say.
    let report = run(&class(|d| d["spec"]["amiSelectorTerms"] = yaml("[{alias: bottlerocket@latest}]")));
    assert!(report.warnings.is_empty(), "{}", lines(&report.warnings));
    assert_eq!(class_of(&report, "default").ami_family(), AmiFamily::Bottlerocket);

    let report = run(&class(|d| {
        d["spec"]["amiFamily"] = "AL2".into();
        d["spec"]["amiSelectorTerms"] = yaml("[{name: amazon-eks-node-1.31-*, owner: amazon}]");
    }));
    let w = warning(&report, "EC2NodeClass default", "spec.amiFamily");
    assert!(w.message.starts_with("kept AL2") && w.message.contains("AWS has deprecated AL2"), "{w}");
    let report = run(&class(|d| d["spec"]["amiSelectorTerms"] = yaml("[{alias: al2@latest}]")));
    let w = warning(&report, "EC2NodeClass default", "spec.amiSelectorTerms[0].alias");
    assert!(w.message.contains("no EKS-optimized AL2 images for Kubernetes 1.33"), "{w}");
    assert_eq!(report.warnings.len(), 1, "{}", lines(&report.warnings));

    // Custom: the user data goes to the nodes unchanged, as with Karpenter, so nothing to say...
    let custom = |user_data: &'static str| {
        run(&class(move |d| {
            d["spec"]["amiFamily"] = "Custom".into();
            d["spec"]["amiSelectorTerms"] = yaml("[{id: ami-0123456789abcdef0}]");
            d["spec"]["userData"] = user_data.into();
        }))
    };
    let report = custom("#!/bin/bash\n/etc/eks/bootstrap.sh demo\n");
    assert!(report.warnings.is_empty(), "{}", lines(&report.warnings));
    // ...unless it registers nodes with Karpenter's taint, which Dovetail does not lift.
    let report = custom("#!/bin/bash\n/etc/eks/bootstrap.sh demo --kubelet-extra-args '--register-with-taints=karpenter.sh/unregistered:NoExecute'\n");
    let w = warning(&report, "EC2NodeClass default", "spec.userData");
    assert!(w.message.contains("karpenter.sh/unregistered") && w.message.contains("dovetail.dev/unregistered"), "{w}");

    let report = run(&class(|d| d["spec"]["amiFamily"] = "AL2023".into()));
    assert!(report.warnings.is_empty(), "{}", lines(&report.warnings));
}

#[test]
fn a_custom_class_on_an_alias_finds_its_image_without_a_word() {
    // Karpenter's custom-family-with-alias example: its own user data on the Bottlerocket image.
    let custom = |alias: &'static str| {
        run(&class(move |d| {
            d["spec"]["amiFamily"] = "Custom".into();
            d["spec"]["amiSelectorTerms"] = yaml(&format!("[{{alias: {alias}}}]"));
            d["spec"]["userData"] = "#!/bin/bash\n/opt/join\n".into();
        }))
    };
    for alias in ["bottlerocket@latest", "al2023@latest"] {
        let report = custom(alias);
        assert!(report.warnings.is_empty(), "{alias}: {}", lines(&report.warnings));
        assert_eq!(class_of(&report, "default").ami_family(), AmiFamily::Custom);
    }
}

#[test]
fn launch_settings_dovetail_applies_differently_are_flagged() {
    let report = run(&class(|d| {
        d["spec"]["instanceProfile"] = serde_yaml_ng::Value::Null;
        d["spec"]["role"] = "KarpenterNodeRole-demo".into();
        d["spec"]["capacityReservationSelectorTerms"] = yaml("[{id: cr-0123456789abcdef0}]");
        d["spec"]["instanceStorePolicy"] = "RAID0".into();
        d["spec"]["blockDeviceMappings"] = yaml(
            "[{deviceName: /dev/xvda, ebs: {volumeSize: 100Gi, volumeType: gp3}},
              {deviceName: /dev/xvdb, ebs: {volumeSize: 20Gi}}]",
        );
    }));
    assert!(report.errors.is_empty(), "{}", errors(&report));
    // The role carries over with nothing lost: no warning, and the stack's note names it.
    assert!(report.warnings.iter().all(|w| w.field != "spec.role"), "{:?}", report.warnings);
    assert_eq!(report.node_roles(), ["KarpenterNodeRole-demo"]);
    // Dovetail selects and launches into capacity reservations, plans ephemeral storage from the
    // mapped volume and applies RAID0 as Karpenter does: nothing to say about any of them.
    assert!(report.warnings.is_empty(), "{}", lines(&report.warnings));
}

#[test]
fn warnings_display_like_load_errors() {
    let report = convert([(
        "dump.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: s, namespace: n}}\n",
    )]);
    assert_eq!(
        lines(&report.warnings),
        "dump.yaml: document 1, item 1 (Secret n/s): skipped: v1 Secret is not a Karpenter NodePool (karpenter.sh/v1) \
         or EC2NodeClass (karpenter.k8s.aws/v1)"
    );
    let report = with_class(POOL);
    assert_eq!(
        report.warnings[0].to_string(),
        "in.yaml: document 2 (NodePool default): spec.template.spec.nodeClassRef.group: karpenter.k8s.aws → \
         dovetail.dev: the pool uses the converted EC2NodeClass of the same name"
    );
}
