//! Loader tests over realistic fixtures (`tests/fixtures/`) and inline documents for each error.

use dovetail_api::convert::NotProvisionable;
use dovetail_api::manifest::{load, load_str, Inputs, LoadErrorKind};
use dovetail_core::labels;
use dovetail_core::model::{OwnerKind, Pod};

// Integration tests run from the package root, so fixture paths read like a user's would.
const SHOP: &str = "tests/fixtures/shop.yaml";
const DUMP: &str = "tests/fixtures/cluster-dump.yaml";

fn pending<'a>(inputs: &'a Inputs, prefix: &str) -> Vec<&'a Pod> {
    inputs.pending.iter().filter(|p| p.name.starts_with(prefix)).collect()
}

fn err(name: &str, text: &str) -> String {
    load_str(name, text).expect_err("input must be rejected").to_string()
}

#[test]
fn multi_document_file_expands_controllers() {
    let inputs = load(&[SHOP]).unwrap();
    // web 3 + pg 3 + reindex min(parallelism 4, completions 10) + one report run of 2.
    assert_eq!(inputs.pending.len(), 12, "{:#?}", inputs.pending.iter().map(|p| &p.name).collect::<Vec<_>>());

    let web = pending(&inputs, "web-");
    assert_eq!(web.len(), 3);
    let hash = web[0].labels["pod-template-hash"].clone();
    for (i, p) in web.iter().enumerate() {
        assert_eq!(p.name, format!("web-{hash}-{i}"));
        assert_eq!(p.owner, OwnerKind::ReplicaSet);
        assert_eq!(p.owner_name, format!("web-{hash}"));
        assert_eq!((p.requests.cpu, p.requests.memory), (500, 512 << 20));
        // matchLabelKeys folded with the generated hash: only this ReplicaSet's pods count.
        assert!(p.topology_spread[0].selector.matches(&p.labels));
    }

    let pg = pending(&inputs, "pg-");
    let names: Vec<&str> = pg.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["pg-0", "pg-1", "pg-2"]);
    let zones =
        |p: &Pod| -> Vec<String> { p.volume_requirements.get(labels::ZONE).unwrap().values.iter().cloned().collect() };
    assert_eq!(zones(pg[0]), ["us-east-1c"], "bound PV");
    assert_eq!(zones(pg[1]), ["us-east-1a", "us-east-1b"], "class topologies");
    assert_eq!(pg[0].priority, 100000, "PriorityClass from the input");
    assert_eq!(pg[0].termination_grace_seconds, 120);
    assert_eq!(pg[2].labels["statefulset.kubernetes.io/pod-name"], "pg-2");
    assert_eq!(pg[2].owner, OwnerKind::StatefulSet);

    let reindex = pending(&inputs, "reindex-");
    assert_eq!(reindex.len(), 4);
    assert!(reindex.iter().all(|p| p.owner == OwnerKind::Job && p.labels["job-name"] == "reindex"));

    let report = pending(&inputs, "report-");
    assert_eq!(report.len(), 2);
    assert_eq!(report[0].node_affinity[0].get(labels::CAPACITY_TYPE).unwrap().single_value(), Some("spot"));
    assert!(report[0].owner_name.starts_with("report-"));

    assert_eq!(inputs.daemonsets.len(), 1);
    let ds = &inputs.daemonsets[0];
    assert_eq!((ds.namespace.as_str(), ds.name.as_str()), ("monitoring", "node-exporter"));
    assert_eq!(ds.pod.host_ports[0].port, 9100);

    let skipped: Vec<(&str, &str, usize)> =
        inputs.skipped.iter().map(|s| (s.kind.as_str(), s.name.as_str(), s.source.document)).collect();
    assert_eq!(skipped, [("Service", "shop/web", 3), ("ConfigMap", "shop/web-config", 4)]);

    assert_eq!(inputs.node_pools.len(), 1);
    assert_eq!(inputs.node_pools[0].label, "NodePool general");
    assert_eq!(inputs.node_pools[0].object["spec"]["limits"]["cpu"], "1000");
    assert_eq!(inputs.node_pools[0].source.to_string(), format!("{SHOP}: document 14"));
    assert_eq!(inputs.node_classes.len(), 1);
    assert_eq!(inputs.node_classes[0].object["spec"]["role"], "KarpenterNodeRole-shop");
    assert_eq!(inputs.pod_disruption_budgets.len(), 1);
    assert_eq!(inputs.pod_disruption_budgets[0].label, "PodDisruptionBudget shop/pg");
    assert_eq!((inputs.persistent_volume_claims.len(), inputs.persistent_volumes.len()), (1, 1));
    assert_eq!(inputs.storage_classes.len(), 1);
    assert_eq!(inputs.namespaces["shop"]["team"], "storefront");
    assert_eq!(inputs.namespaces["shop"]["kubernetes.io/metadata.name"], "shop");
    assert!(inputs.nodes.is_empty() && inputs.ignored.is_empty());
}

#[test]
fn expansion_is_deterministic() {
    let a = load(&[SHOP]).unwrap();
    let b = load(&[SHOP]).unwrap();
    let names = |i: &Inputs| i.pending.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&a), names(&b));
}

#[test]
fn cluster_dump_list_binds_pods_and_does_not_expand_twice() {
    let inputs = load(&[DUMP]).unwrap();
    assert_eq!(inputs.nodes.len(), 2);
    let n1 = &inputs.nodes[0];
    assert_eq!(n1.allocatable.cpu, 3920);
    let on_n1: Vec<&str> = n1.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(on_n1, ["api-6c8f9d7b5-x2kqp", "aws-node-4xk2p"]);
    assert!(n1.pods[1].is_daemon());
    let n2 = &inputs.nodes[1];
    assert!(n2.unschedulable);
    assert_eq!(n2.pods.len(), 1);

    // The Deployment and its ReplicaSet are there, but so are their pods: no expansion.
    let names: Vec<&str> = inputs.pending.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["api-6c8f9d7b5-7hz4w"]);

    let ignored: Vec<(&str, &NotProvisionable)> =
        inputs.ignored.iter().map(|i| (i.pod.name.as_str(), &i.reason)).collect();
    assert_eq!(
        ignored,
        [
            ("batch-preemptor", &NotProvisionable::Preempting("ip-10-0-1-17.ec2.internal".into())),
            ("old-ip-10-0-9-9", &NotProvisionable::Bound("ip-10-0-9-9.ec2.internal".into())),
        ]
    );
    assert!(inputs.skipped.is_empty(), "{:?}", inputs.skipped);
    // Namespaces of bound and ignored pods exist for namespaceSelectors too.
    assert!(inputs.namespaces.contains_key("kube-system"));
}

#[test]
fn typed_json_list_items_take_the_list_kind() {
    let inputs = load(&["tests/fixtures/cluster.json"]).unwrap();
    let names: Vec<&str> = inputs.pending.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["worker-0", "worker-1"]);
    assert_eq!(inputs.pending[0].tolerations.len(), 1);
    assert_eq!(inputs.namespaces["jobs"]["kubernetes.io/metadata.name"], "jobs");
}

#[test]
fn directory_reads_manifests_sorted_by_name_and_not_recursively() {
    let inputs = load(&["tests/fixtures/dir"]).unwrap();
    let names: Vec<&str> = inputs.pending.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert_eq!(names[0], "api-canary");
    assert!(names[1].starts_with("worker-") && names[1].ends_with("-0"));
    assert!(names[2].starts_with("worker-") && names[2].ends_with("-1"));
    assert_eq!(names[3], "trainer");
    // Limit-only GPU request defaults from the limit, through a JSON number.
    assert_eq!(inputs.pending[3].requests.get("nvidia.com/gpu"), 4);
}

#[test]
fn several_paths_load_in_order_as_one_input() {
    let inputs = load(&[DUMP, "tests/fixtures/cluster.json"]).unwrap();
    assert_eq!(inputs.pending.len(), 3);
    assert_eq!(inputs.pending[2].name, "worker-1");
}

#[test]
fn stdin_text_is_sniffed() {
    let json = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": [{"name": "c"}]}}
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}, "spec": {"containers": [{"name": "c"}]}}"#;
    let inputs = load_str("<stdin>", json).unwrap();
    assert_eq!(inputs.pending.len(), 2);
    let yaml = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c}]}\n---\n---\n";
    let inputs = load_str("<stdin>", yaml).unwrap();
    assert_eq!(inputs.pending.len(), 1);
    assert_eq!(inputs.pending[0].namespace, "default");
}

#[test]
fn controller_counts() {
    let text = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: zero}
spec:
  replicas: 0
  selector: {}
  template: {spec: {containers: [{name: a}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: one}
spec:
  selector: {}
  template: {spec: {containers: [{name: a}]}}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  replicas: 2
  selector: {}
  template: {spec: {containers: [{name: a}]}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: ord}
spec:
  replicas: 2
  ordinals: {start: 5}
  selector: {}
  template: {spec: {containers: [{name: a}]}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: suspended}
spec:
  suspend: true
  parallelism: 3
  template: {spec: {containers: [{name: a}]}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: single}
spec:
  template: {spec: {containers: [{name: a}]}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: done}
spec:
  parallelism: 2
  template: {spec: {containers: [{name: a}]}}
status:
  conditions: [{type: Complete, status: "True"}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: paused}
spec:
  schedule: "* * * * *"
  suspend: true
  jobTemplate: {spec: {template: {spec: {containers: [{name: a}]}}}}
---
apiVersion: v1
kind: Pod
metadata: {generateName: adhoc-}
spec: {containers: [{name: a}]}
---
apiVersion: v1
kind: Pod
metadata: {generateName: adhoc-}
spec:
  schedulingGates: [{name: example.com/quota}]
  containers: [{name: a}]
"#;
    let inputs = load_str("controllers.yaml", text).unwrap();
    let names: Vec<&str> = inputs.pending.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names.len(), 1 + 2 + 2 + 1 + 1, "{names:?}");
    assert!(names[0].starts_with("one-") && names[0].ends_with("-0"));
    assert_eq!(&names[1..], ["rs-0", "rs-1", "ord-5", "ord-6", "single-0", "adhoc-0"]);
    assert_eq!(inputs.ignored.len(), 1);
    assert_eq!(inputs.ignored[0].pod.name, "adhoc-1");
    assert_eq!(inputs.ignored[0].reason, NotProvisionable::SchedulingGated);
}

#[test]
fn deployment_with_only_an_old_replica_set_still_expands() {
    let text = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template: {metadata: {labels: {app: api, v: "2"}}, spec: {containers: [{name: a}]}}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: api-old
  namespace: shop
  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: api, uid: u, controller: true}]
spec:
  replicas: 0
  selector: {matchLabels: {app: api}}
  template: {metadata: {labels: {app: api, v: "1"}}, spec: {containers: [{name: a}]}}
"#;
    let inputs = load_str("rollout.yaml", text).unwrap();
    assert_eq!(inputs.pending.len(), 2);
    assert!(inputs.pending.iter().all(|p| p.labels["v"] == "2"));
}

#[test]
fn priority_defaults_from_the_global_default_class() {
    let text = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: normal}\nvalue: 10\nglobalDefault: true\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec: {priority: 3, containers: [{name: c}]}\n";
    let inputs = load_str("p.yaml", text).unwrap();
    assert_eq!(inputs.pending[0].priority, 10);
    assert_eq!(inputs.pending[1].priority, 3);
}

// ---- errors: every message names the file, the 1-based document, the object and the field ----

#[test]
fn bad_quantity_in_a_fixture_file() {
    let e = load(&["tests/fixtures/errors/bad-quantity.yaml"]).unwrap_err();
    assert_eq!(e.file, "tests/fixtures/errors/bad-quantity.yaml");
    assert_eq!(e.document, Some(2));
    assert_eq!(e.object.as_deref(), Some("Deployment shop/web"));
    assert!(matches!(*e.kind, LoadErrorKind::Convert(_)));
    assert!(
        e.to_string().starts_with(
            r#"tests/fixtures/errors/bad-quantity.yaml: document 2 (Deployment shop/web): spec.template.spec.containers[0].resources.requests.cpu: "1x" is not a valid Kubernetes quantity"#
        ),
        "{e}"
    );
}

#[test]
fn all_or_nothing() {
    // The good directory plus one bad file: no partial result.
    assert!(load(&["tests/fixtures/dir", "tests/fixtures/errors/bad-quantity.yaml"]).is_err());
}

#[test]
fn yaml_syntax_error_has_line_and_column() {
    let e = err("examples/web.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: [a, b}\n");
    assert!(e.starts_with("examples/web.yaml: document 2: invalid YAML: "), "{e}");
    assert!(e.contains("line 7 column"), "{e}");
}

#[test]
fn json_syntax_error_has_line_and_column() {
    let e = err("dump.json", "{\"apiVersion\": \"v1\",\n \"kind\": \"Pod\",,}");
    assert!(e.starts_with("dump.json: document 1: invalid JSON: "), "{e}");
    assert!(e.contains("line 2 column"), "{e}");
}

#[test]
fn missing_api_version_or_kind() {
    let e = err("a.yaml", "kind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: a}]}\n");
    assert_eq!(e, r#"a.yaml: document 1 (Pod web): missing "apiVersion""#);
    let e = err(
        "a.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n---\napiVersion: v1\nmetadata: {name: web}\n",
    );
    assert_eq!(e, r#"a.yaml: document 2 (web): missing "kind""#);
    let e = err("a.yaml", "just a string\n");
    assert_eq!(
        e,
        "a.yaml: document 1: expected a Kubernetes object (a mapping with apiVersion and kind), found a string"
    );
}

#[test]
fn schema_errors_name_the_field() {
    let e = err(
        "examples/web.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  replicas: three\n  selector: {}\n  template: {spec: {containers: [{name: a}]}}\n",
    );
    assert_eq!(
        e,
        r#"examples/web.yaml: document 1 (Deployment shop/web): spec.replicas: invalid type: string "three", expected i32"#
    );
    let e = err(
        "p.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: a\n    ports: [{containerPort: http}]\n",
    );
    assert!(
        e.starts_with("p.yaml: document 1 (Pod default/p): spec.containers[0].ports[0].containerPort: invalid type"),
        "{e}"
    );
    let e = err("p.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {namespace: x}\nspec: {containers: [{name: a}]}\n");
    assert_eq!(e, "p.yaml: document 1 (Pod x/<unnamed>): metadata.name: missing");
}

#[test]
fn unsupported_versions_are_rejected_not_skipped() {
    let e = err("old.yaml", "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: web}\nspec: {}\n");
    assert_eq!(
        e,
        r#"old.yaml: document 1 (Deployment web): apiVersion "extensions/v1beta1" is not supported for Deployment; use apps/v1"#
    );
    let e = err("pool.yaml", "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: default}\nspec: {}\n");
    assert!(e.ends_with("use karpenter.sh/v1"), "{e}");
}

#[test]
fn list_items_are_numbered() {
    let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: a, namespace: shop}
  spec: {containers: [{name: c}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: b, namespace: shop}
  spec:
    containers:
    - name: c
      resources: {limits: {memory: 2Gb}}
"#;
    let e = err("dump.yaml", text);
    assert!(
        e.starts_with(r#"dump.yaml: document 1, item 2 (Pod shop/b): spec.containers[0].resources.limits.memory: "2Gb" is not a valid Kubernetes quantity"#),
        "{e}"
    );
}

#[test]
fn conversion_errors_of_other_kinds() {
    let e = err(
        "nodes.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec: {taints: [{key: a, effect: NoScheduling}]}\n",
    );
    assert!(
        e.starts_with(
            r#"nodes.yaml: document 1 (Node n1): spec.taints[0].effect: "NoScheduling" is not a valid taint effect"#
        ),
        "{e}"
    );
    let e = err(
        "pv.yaml",
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv1}\nspec: {nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: Near, values: [a]}]}]}}}\n",
    );
    assert!(e.starts_with("pv.yaml: document 1 (PersistentVolume pv1): spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator: \"Near\""), "{e}");
    let e = err(
        "cron.yaml",
        "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c, namespace: ops}\nspec:\n  schedule: '@daily'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers: [{name: a, resources: {requests: {cpu: fast}}}]\n",
    );
    assert!(e.starts_with(r#"cron.yaml: document 1 (CronJob ops/c): spec.jobTemplate.spec.template.spec.containers[0].resources.requests.cpu: "fast""#), "{e}");
    let e = err(
        "ds.yaml",
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  selector: {}\n  template: {spec: {tolerations: [{operator: Sometimes}], containers: [{name: a}]}}\n",
    );
    assert!(
        e.starts_with(
            r#"ds.yaml: document 1 (DaemonSet default/d): spec.template.spec.tolerations[0].operator: "Sometimes""#
        ),
        "{e}"
    );
}

#[test]
fn template_errors_are_reported_even_without_replicas() {
    let e = err(
        "web.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 0\n  selector: {}\n  template: {spec: {containers: [{name: a, resources: {requests: {memory: 1Q}}}]}}\n",
    );
    assert!(e.contains("spec.template.spec.containers[0].resources.requests.memory"), "{e}");
    let e = err(
        "web.yaml",
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  replicas: -1\n  selector: {}\n  template: {spec: {containers: [{name: a}]}}\n",
    );
    assert_eq!(
        e,
        "web.yaml: document 1 (StatefulSet default/db): spec.replicas: -1 must be greater than or equal to 0"
    );
}

#[test]
fn duplicates_are_rejected() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: shop}\nspec: {containers: [{name: a}]}\n";
    let e = err("x.yaml", &format!("{pod}---\n{pod}"));
    assert_eq!(e, "x.yaml: document 2 (Pod shop/a): defined twice (first in x.yaml: document 1)");
}

#[test]
fn unreadable_file() {
    let e = load(&["tests/fixtures/nope.yaml"]).unwrap_err();
    assert!(matches!(*e.kind, LoadErrorKind::Io(_)));
    assert!(e.to_string().starts_with("tests/fixtures/nope.yaml: cannot read: "), "{e}");
}

#[test]
fn replicas_over_the_pods_ceiling_are_refused_before_any_pod_is_made() {
    // A hundred million pods would take the loader's memory until the kernel killed it.
    let e = err(
        "big.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  replicas: 100000000\n  selector: {}\n  template: {spec: {containers: [{name: a}]}}\n",
    );
    assert_eq!(
        e,
        "big.yaml: document 1 (Deployment shop/web): spec.replicas: 100000000 pods is more than the supported 1000000 pods per plan"
    );
    // The ceiling counts the whole input: two controllers of 600,000 pods each go over together,
    // at the second, which says how many came before it.
    let set = |name: &str| {
        format!("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: {name}}}\nspec:\n  replicas: 600000\n  selector: {{}}\n  template: {{spec: {{containers: [{{name: a}}]}}}}\n")
    };
    let e = err("two.yaml", &format!("{}---\n{}", set("a"), set("b")));
    assert_eq!(
        e,
        "two.yaml: document 2 (StatefulSet default/b): spec.replicas: 1200000 pods is more than the supported 1000000 \
         pods per plan (this object adds 600000 pods to 600000 pods before it)"
    );
    let e = err(
        "etl.yaml",
        "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: etl}\nspec:\n  schedule: '@daily'\n  jobTemplate:\n    spec:\n      parallelism: 2000000\n      template: {spec: {containers: [{name: a}]}}\n",
    );
    assert!(
        e.starts_with(
            "etl.yaml: document 1 (CronJob default/etl): spec.jobTemplate.spec.parallelism: 2000000 pods is more than"
        ),
        "{e}"
    );
}

#[test]
fn objects_over_the_per_file_ceiling_are_refused() {
    // 1,000,001 documents of one JSON stream: refused at the one past the ceiling.
    let text = "{}".repeat(1_000_001);
    let e = err("many.json", &text);
    assert_eq!(e, "many.json: 1000001 objects is more than the supported 1000000 objects per manifest file");
}

#[test]
fn files_over_the_byte_ceiling_are_refused_before_reading() {
    use dovetail_api::manifest::read_file_within;
    use dovetail_core::ceilings::{Ceiling, MANIFEST_BYTES};
    use std::path::Path;

    let small = Ceiling { max: 1024, unit: "bytes", per: "per test file" };
    let e = read_file_within(Path::new(SHOP), small).unwrap_err();
    assert!(matches!(*e.kind, LoadErrorKind::OverCeiling(_)));
    assert_eq!(
        e.to_string(),
        "tests/fixtures/shop.yaml: 4959 bytes (4.8 KiB) is more than the supported 1 KiB per test file"
    );
    // A stream whose size is not known up front is read no further than the ceiling.
    let e = read_file_within(Path::new("/dev/zero"), small).unwrap_err();
    assert_eq!(e.to_string(), "/dev/zero: 1025 bytes (1.0 KiB) is more than the supported 1 KiB per test file");
    assert!(read_file_within(Path::new(SHOP), MANIFEST_BYTES).is_ok());
}

#[test]
fn pods_without_containers_are_refused_wherever_they_come_from() {
    let e =
        err("p.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: empty, namespace: shop}\nspec: {containers: []}\n");
    assert_eq!(e, "p.yaml: document 1 (Pod shop/empty): spec.containers: must have at least one container");
    // A workload's template is held to the same rule, with its path.
    let e = err(
        "d.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  replicas: 2\n  selector: {}\n  template: {spec: {containers: []}}\n",
    );
    assert_eq!(
        e,
        "d.yaml: document 1 (Deployment shop/web): spec.template.spec.containers: must have at least one container"
    );
    let e = err(
        "ds.yaml",
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent, namespace: kube-system}\nspec:\n  selector: {}\n  template: {spec: {}}\n",
    );
    assert_eq!(
        e,
        "ds.yaml: document 1 (DaemonSet kube-system/agent): spec.template.spec.containers: must have at least one container"
    );
}

#[test]
fn kubernetes_validation_applies_to_every_object_read() {
    // A 1 MB label value on a pod template was accepted and copied into every pod.
    let huge = "v".repeat(1 << 20);
    let e = err(
        "web.yaml",
        &format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: shop}}\nspec:\n  replicas: 2\n  selector: {{}}\n  template:\n    metadata: {{labels: {{team: {huge}}}}}\n    spec: {{containers: [{{name: a}}]}}\n"),
    );
    assert_eq!(
        e,
        format!(
            "web.yaml: document 1 (Deployment shop/web): spec.template.metadata.labels[\"team\"]: \"{}\"… (1048576 bytes) \
             is not a valid label value: it is longer than 63 characters",
            "v".repeat(64)
        )
    );
    // The controller's own metadata, whether or not it is expanded.
    let e = err("web.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: Web, namespace: shop}\nspec:\n  selector: {}\n  template: {spec: {containers: [{name: a}]}}\n");
    assert!(e.starts_with("web.yaml: document 1 (Deployment shop/Web): metadata.name: \"Web\" is not a valid name: it must be a lowercase DNS subdomain"), "{e}");
    // Namespaces are DNS labels: no dots.
    let e = err("ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop.prod}\n");
    assert!(e.starts_with("ns.yaml: document 1 (Namespace shop.prod): metadata.name: \"shop.prod\" is not a valid name: it must be a lowercase DNS label"), "{e}");
    let e = err(
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {\"a b\": x}}\nspec: {containers: [{name: a}]}\n",
    );
    assert!(
        e.starts_with(
            "pod.yaml: document 1 (Pod default/p): metadata.annotations[\"a b\"]: \"a b\" is not a qualified name"
        ),
        "{e}"
    );
    let e = err("node.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec: {taints: [{key: dedicated, value: \"ml team\", effect: NoSchedule}]}\n");
    assert!(
        e.starts_with("node.yaml: document 1 (Node n1): spec.taints[0].value: \"ml team\" is not a valid label value"),
        "{e}"
    );
    let e = err("pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  tolerations: [{key: \"bad key\", operator: Exists}]\n  containers: [{name: a}]\n");
    assert!(
        e.starts_with(
            "pod.yaml: document 1 (Pod default/p): spec.tolerations[0].key: \"bad key\" is not a qualified name"
        ),
        "{e}"
    );
    let pool = load_str("pool.yaml", "apiVersion: dovetail.dev/v1\nkind: NodePool\nmetadata: {name: gpu, labels: {team: \"a b\"}}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: dovetail.dev, kind: EC2NodeClass, name: default}\n      requirements: []\n");
    // NodePools are kept raw by the loader and validated when the plan converts them.
    let snapshot = pool.expect("read raw").snapshot().unwrap_err().to_string();
    assert!(snapshot.contains("metadata.labels[\"team\"]: \"a b\" is not a valid label value"), "{snapshot}");
}
