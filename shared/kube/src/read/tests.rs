use super::*;
use crate::snapshot::{Keep, KeptPod, Lean};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use kube::api::DynamicObject;

/// The objects of a test cluster as the API server would send them.
#[derive(Debug, Default)]
struct Listed {
    nodes: Vec<k8s_openapi::api::core::v1::Node>,
    pods: Vec<Pod>,
    daemonsets: Vec<DaemonSet>,
    pdbs: Vec<PodDisruptionBudget>,
    claims: Vec<PersistentVolumeClaim>,
    volumes: Vec<PersistentVolume>,
    classes: Vec<StorageClass>,
    attachments: Vec<VolumeAttachment>,
    namespaces: Vec<Namespace>,
    nodepools: Vec<Value>,
    nodeclasses: Vec<Value>,
    overlays: Vec<Value>,
}

fn kind<T: Keep>(objects: &[T::Object]) -> Kind<T> {
    Kind { objects: objects.iter().map(|o| (T::key(o), Box::new(T::keep(o)))).collect(), ..Kind::default() }
}

/// The snapshot a list of these objects keeps.
/// Objects as the snapshot reads them (their managedFields are left out as they arrive).
fn lean<K: Clone>(objects: &[K]) -> Vec<Lean<K>> {
    objects.iter().cloned().map(Lean).collect()
}

fn snapshot(l: Listed) -> Snapshot {
    let dynamic =
        |v: &[Value]| -> Vec<DynamicObject> { v.iter().map(|o| serde_json::from_value(o.clone()).unwrap()).collect() };
    Snapshot {
        nodes: kind(&lean(&l.nodes)),
        pods: kind(&lean(&l.pods)),
        daemonsets: kind(&l.daemonsets),
        pdbs: kind(&l.pdbs),
        claims: kind(&l.claims),
        volumes: kind(&l.volumes),
        classes: kind(&l.classes),
        attachments: kind(&l.attachments),
        namespaces: kind(&l.namespaces),
        nodepools: kind(&dynamic(&l.nodepools)),
        nodeclasses: kind(&dynamic(&l.nodeclasses)),
        overlays: kind(&dynamic(&l.overlays)),
        claim_objects: Kind::default(),
    }
}

fn parse<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    serde_yaml_ng::from_str(yaml).unwrap()
}

fn docs<T: serde::de::DeserializeOwned>(yaml: &str) -> Vec<T> {
    yaml.split("\n---\n").filter(|d| !d.trim().is_empty()).map(parse).collect()
}

const NODES: &str = r#"
metadata: {name: n1, uid: node-1, labels: {topology.kubernetes.io/zone: us-east-1a}}
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
  conditions: [{type: Ready, status: "True"}]
---
metadata: {name: n2, uid: node-2, deletionTimestamp: "2025-06-01T12:00:00Z", finalizers: [hold]}
status:
  allocatable: {cpu: "2", memory: 8Gi, pods: "110"}
"#;

const PODS: &str = r#"
metadata: {name: web-1, namespace: shop, uid: p1, labels: {app: web}}
spec: {nodeName: n1, containers: [{name: a, resources: {requests: {cpu: 500m}}}]}
status: {phase: Running}
---
metadata: {name: web-2, namespace: shop, uid: p2}
spec: {containers: [{name: a, resources: {requests: {cpu: "1"}}}]}
status:
  phase: Pending
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
---
metadata: {name: web-3, namespace: shop, uid: p3}
spec: {containers: [{name: a}]}
status: {phase: Pending}
---
metadata:
  name: agent-x
  namespace: kube-system
  uid: p4
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: d, controller: true}]
spec: {nodeName: n2, containers: [{name: a}]}
status: {phase: Running}
---
metadata: {name: db-0, namespace: shop, uid: p5}
spec:
  nodeName: n2
  containers: [{name: a}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data-db-0}}]
status: {phase: Running}
---
metadata: {name: lost, namespace: shop, uid: p6}
spec: {nodeName: gone, containers: [{name: a}]}
status: {phase: Running}
---
metadata: {name: broken, namespace: shop, uid: p7}
spec: {containers: [{name: a, resources: {requests: {cpu: 1x}}}]}
status:
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
---
metadata: {name: done, namespace: shop, uid: p8}
spec: {nodeName: n1, containers: [{name: a, resources: {requests: {cpu: "3"}}}]}
status: {phase: Succeeded}
"#;

fn nodepool(name: &str, operator: &str) -> Value {
    serde_json::json!({
        "apiVersion": "dovetail.dev/v1", "kind": "NodePool",
        "metadata": {"name": name, "uid": format!("np-{name}"), "generation": 2},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "dovetail.dev", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": operator, "values": ["spot"]}]}}},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                                    "lastTransitionTime": "2025-01-01T00:00:00Z"}]}
    })
}

fn listed() -> Listed {
    Listed {
        nodes: docs(NODES),
        pods: docs(PODS),
        daemonsets: docs(
            "metadata: {name: agent, namespace: kube-system}\nspec:\n  selector: {}\n  template:\n    spec: {containers: [{name: a, resources: {requests: {cpu: 50m}}}]}\n",
        ),
        pdbs: docs("metadata: {name: web, namespace: shop, generation: 1}\nspec: {selector: {matchLabels: {app: web}}}\nstatus: {observedGeneration: 1, disruptionsAllowed: 1, currentHealthy: 2, desiredHealthy: 1, expectedPods: 2}\n"),
        claims: docs("metadata: {name: data-db-0, namespace: shop}\nspec: {volumeName: pv-db}\n---\nmetadata: {name: logs, namespace: shop}\nspec: {volumeName: pv-logs}\n"),
        volumes: docs("metadata: {name: pv-db}\nspec:\n  nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: topology.ebs.csi.aws.com/zone, operator: In, values: [us-east-1b]}]}]}}\n"),
        classes: vec![],
        attachments: docs(
            "metadata: {name: csi-1}\nspec: {attacher: ebs.csi.aws.com, nodeName: n2, source: {persistentVolumeName: pv-db}}\n---\nmetadata: {name: csi-2}\nspec: {attacher: ebs.csi.aws.com, nodeName: n2, source: {persistentVolumeName: pv-logs}}\n",
        ),
        namespaces: docs("metadata: {name: shop, labels: {team: a}}\n"),
        nodepools: vec![nodepool("spot", "In"), nodepool("broken", "Sometimes")],
        nodeclasses: vec![serde_json::json!({"apiVersion": "dovetail.dev/v1", "kind": "EC2NodeClass", "metadata": {"name": "nameless"}})],
        overlays: vec![],
    }
}

#[test]
fn pods_are_grouped_and_pending_ones_found() {
    let (state, _) = assemble(&snapshot(listed()));
    let names: Vec<&str> = state.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["n1", "n2"]);
    let on = |n: usize| state.nodes[n].pods.iter().map(|p| p.name.as_str()).collect::<Vec<_>>();
    assert_eq!(on(0), ["web-1"], "finished pods hold nothing");
    assert_eq!(on(1), ["agent-x", "db-0"], "daemon pods stay on their node");
    assert!(state.nodes[1].unschedulable, "a deleting node takes nothing new");
    let pending: Vec<(&str, Option<&str>)> =
        state.pending.iter().map(|p| (p.name.as_str(), p.node_name.as_deref())).collect();
    // db-0 leaves a node being deleted; web-2 is unschedulable; web-3 was not judged yet. In key
    // order, as the API server lists them.
    assert_eq!(pending, [("db-0", None), ("web-2", None)]);
    let db = &state.pending[0];
    assert!(db.volume_requirements.get(dovetail_core::labels::ZONE).is_some(), "its volume pins the zone");
}

#[test]
fn the_rest_of_the_cluster() {
    let (state, seen) = assemble(&snapshot(listed()));
    assert_eq!(state.daemonsets.len(), 1);
    assert_eq!((state.pdbs[0].name.as_str(), state.pdbs[0].disruptions_allowed), ("web", 1));
    assert_eq!(state.volume_attachments["n2"], ["pv-db", "pv-logs"]);
    assert_eq!(state.namespaces["shop"]["team"], "a");
    assert_eq!(state.namespaces["shop"]["kubernetes.io/metadata.name"], "shop");
    assert_eq!(seen.uids["Pod/shop/web-2"], "p2");
    assert_eq!(seen.uids["Node/n1"], "node-1");
    assert_eq!(seen.uids["NodePool/broken"], "np-broken");
    assert_eq!(seen.pools["spot"].generation, Some(2));
    assert_eq!(seen.pools["spot"].status.conditions[0].type_, "Ready");
}

#[test]
fn invalid_objects_are_listed_and_skipped() {
    let (state, _) = assemble(&snapshot(listed()));
    let pools: Vec<&str> = state.nodepools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(pools, ["spot"], "the broken pool does not hide the good one");
    let bad: Vec<(&str, &str)> = state.invalid.iter().map(|i| (i.object.as_str(), i.field.as_str())).collect();
    assert!(bad.contains(&("Pod/shop/broken", "spec.containers[0].resources.requests.cpu")), "{bad:?}");
    assert!(bad.contains(&("NodePool/broken", "spec.template.spec.requirements[0].operator")), "{bad:?}");
    assert!(bad.iter().any(|(o, _)| *o == "EC2NodeClass/nameless"), "{bad:?}");
    assert!(state.nodeclasses.is_empty());
}

#[test]
fn a_pod_without_containers_is_invalid_and_the_others_carry_on() {
    let mut l = listed();
    l.pods.push(parse(
        "metadata: {name: hollow, namespace: shop, uid: p9}\nspec: {containers: []}\nstatus:\n  conditions: [{type: PodScheduled, status: \"False\", reason: Unschedulable}]\n",
    ));
    let (state, _) = assemble(&snapshot(l));
    let hollow: Vec<&Invalid> = state.invalid.iter().filter(|i| i.object == "Pod/shop/hollow").collect();
    assert_eq!(
        hollow,
        [&Invalid {
            object: "Pod/shop/hollow".into(),
            field: "spec.containers".into(),
            message: "must have at least one container".into()
        }]
    );
    let pending: Vec<&str> = state.pending.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(pending, ["db-0", "web-2"], "the other pending pods are still there");
}

#[test]
fn objects_breaking_kubernetes_validation_are_invalid_and_the_others_carry_on() {
    let mut l = listed();
    let huge = "v".repeat(1 << 20);
    l.pods.push(parse(&format!(
        "metadata: {{name: labelled, namespace: shop, uid: p10, labels: {{team: {huge}}}}}\nspec: {{containers: [{{name: a}}]}}\nstatus:\n  conditions: [{{type: PodScheduled, status: \"False\", reason: Unschedulable}}]\n"
    )));
    l.nodes.push(parse("metadata: {name: n3, labels: {\"bad key\": x}}\nstatus: {allocatable: {cpu: \"2\"}}\n"));
    let mut pool = nodepool("tagged", "In");
    pool["metadata"]["labels"] = serde_json::json!({"team": "a b"});
    l.nodepools.push(pool);
    let (state, _) = assemble(&snapshot(l));
    let field_of = |object: &str| -> Vec<(String, String)> {
        state.invalid.iter().filter(|i| i.object == object).map(|i| (i.field.clone(), i.message.clone())).collect()
    };
    assert_eq!(
        field_of("Pod/shop/labelled"),
        [(
            "metadata.labels[\"team\"]".to_string(),
            format!(
                "\"{}\"… (1048576 bytes) is not a valid label value: it is longer than 63 characters",
                "v".repeat(64)
            )
        )]
    );
    assert_eq!(
        field_of("Node/n3"),
        [(
            "metadata.labels[\"bad key\"]".to_string(),
            "\"bad key\" is not a qualified name: only letters, digits, '-', '_' and '.' are allowed".to_string()
        )]
    );
    assert_eq!(
        field_of("NodePool/tagged"),
        [(
            "metadata.labels[\"team\"]".to_string(),
            "\"a b\" is not a valid label value: only letters, digits, '-', '_' and '.' are allowed".to_string()
        )]
    );
    let pending: Vec<&str> = state.pending.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(pending, ["db-0", "web-2"], "the other pods carry on");
    let nodes: Vec<&str> = state.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(nodes, ["n1", "n2"]);
    let pools: Vec<&str> = state.nodepools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(pools, ["spot"]);
}

#[test]
fn volumes_of_pods_that_stay_do_not_hold_termination() {
    let mut l = listed();
    // db-0 tolerates the disrupted taint: it is not evicted, so its volume never detaches.
    let db = l.pods.iter_mut().find(|p| p.metadata.name.as_deref() == Some("db-0")).unwrap();
    db.spec.as_mut().unwrap().tolerations = Some(vec![parse("{key: dovetail.dev/disrupted, operator: Exists}")]);
    let (state, _) = assemble(&snapshot(l));
    assert_eq!(state.volume_attachments["n2"], ["pv-logs"]);
}

#[test]
fn a_pod_keeps_its_volumes_only_when_one_names_a_claim() {
    let pod: Pod = parse(
        "metadata: {name: web-0, namespace: web}
spec:
  containers: [{name: app, image: x}]
  volumes:
  - {name: kube-api-access-x, projected: {sources: [{serviceAccountToken: {path: token}}]}}
  - {name: scratch, emptyDir: {}}",
    );
    assert_eq!(KeptPod::keep(&Lean(pod.clone())).volumes, None, "no claim, nothing kept");

    let mut with_claim = pod.clone();
    let volumes = with_claim.spec.as_mut().unwrap().volumes.as_mut().unwrap();
    volumes.push(parse("{name: data, persistentVolumeClaim: {claimName: data-web-0}}"));
    let kept = KeptPod::keep(&Lean(with_claim)).volumes.expect("a claim is kept");
    let names: Vec<_> = kept.volumes.iter().flatten().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["data"], "only the volumes that name a claim");
}

#[test]
fn a_nodes_last_pod_event_comes_from_the_pods_bound_and_those_seen_leaving() {
    use dovetail_core::time::Time;
    let at = |s: &str| Time(s.parse::<k8s_openapi::jiff::Timestamp>().unwrap().as_millisecond());
    let pods: Vec<Pod> = docs(
        r#"
metadata: {name: web-1, namespace: shop, uid: q1}
spec: {nodeName: n1, containers: [{name: a}]}
status: {phase: Running, startTime: "2025-06-01T12:00:00Z"}
---
metadata: {name: web-2, namespace: shop, uid: q2}
spec: {nodeName: n1, containers: [{name: a}]}
status: {phase: Running, startTime: "2025-06-01T12:03:00Z"}
---
metadata:
  name: agent-n1
  namespace: kube-system
  uid: q3
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: d, controller: true}]
spec: {nodeName: n1, containers: [{name: a}]}
status: {phase: Running, startTime: "2025-06-01T12:30:00Z"}
---
metadata: {name: job-1, namespace: batch, uid: q4}
spec: {nodeName: n1, containers: [{name: a}]}
status: {phase: Running, startTime: "2025-06-01T12:01:00Z"}
"#,
    );
    let mut snap = snapshot(Listed { nodes: docs(NODES), pods: pods.clone(), ..Listed::default() });
    let last = |snap: &Snapshot| assemble(snap).0.nodes[0].last_pod_event;
    // The latest pod bound, DaemonSet pods aside; a node without pods has none.
    assert_eq!(last(&snap), Some(at("2025-06-01T12:03:00Z")));
    assert_eq!(assemble(&snap).0.nodes[1].last_pod_event, None);

    // web-2 is deleted with a 30 s grace period, and the watch delivers it a minute later: it
    // left at its deletionTimestamp.
    let mut deleted = pods[1].clone();
    deleted.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2025-06-01T12:10:30Z".parse().unwrap()));
    snap.pods.changed(&Lean(deleted.clone()), at("2025-06-01T12:10:00Z"));
    assert_eq!(last(&snap), Some(at("2025-06-01T12:03:00Z")), "terminating, still there");
    snap.pods.deleted(&Lean(deleted), at("2025-06-01T12:11:30Z"));
    assert_eq!(last(&snap), Some(at("2025-06-01T12:10:30Z")));

    // job-1 finishes: the live-pods watch reports it deleted, with no deletionTimestamp; it left
    // when the watch delivered that.
    let mut finished = pods[3].clone();
    finished.status.as_mut().unwrap().phase = Some("Succeeded".into());
    snap.pods.deleted(&Lean(finished), at("2025-06-01T12:20:00Z"));
    assert_eq!(last(&snap), Some(at("2025-06-01T12:20:00Z")));

    // A DaemonSet pod leaving is no pod event; nor is an unbound pod's deletion.
    snap.pods.deleted(&Lean(pods[2].clone()), at("2025-06-01T12:40:00Z"));
    assert_eq!(last(&snap), Some(at("2025-06-01T12:20:00Z")));
    assert_eq!(snap.pods.departed.len(), 1, "{:?}", snap.pods.departed);

    // A small kind is listed again rather than watched: web-1, missing from the relist, left by
    // then. (The first list of a kind says nothing of what left.)
    snap.pods.version = Some("7".into());
    let kept = kind::<KeptPod>(&lean(&pods[2..3])).objects;
    snap.pods.relisted(kept, Some("8".into()), at("2025-06-01T12:50:00Z"));
    assert_eq!(last(&snap), Some(at("2025-06-01T12:50:00Z")));
    let mut cold = Kind::<KeptPod>::default();
    cold.relisted(kind::<KeptPod>(&lean(&pods)).objects, Some("9".into()), at("2025-06-01T13:00:00Z"));
    assert!(cold.departed.is_empty());
}

/// A NodeOverlay as listed (list items carry no apiVersion or kind: the snapshot adds them).
fn overlay(name: &str, adjustment: &str) -> Value {
    serde_json::json!({
        "metadata": {"name": name, "uid": format!("no-{name}"), "generation": 1},
        "spec": {
            "priceAdjustment": adjustment,
            "requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]}],
        },
    })
}

#[test]
fn overlays_are_read_and_an_invalid_one_is_left_out_with_its_field() {
    let (state, _) = assemble(&snapshot(Listed {
        overlays: vec![overlay("savings", "-28%"), overlay("typo", "28%"), overlay("licence", "+0.02")],
        ..Listed::default()
    }));
    let names: Vec<&str> = state.overlays.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["licence", "savings"]);
    let bad: Vec<(&str, &str)> = state.invalid.iter().map(|i| (i.object.as_str(), i.field.as_str())).collect();
    assert_eq!(bad, [("NodeOverlay/typo", "spec.priceAdjustment")]);
}
