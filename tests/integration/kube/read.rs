//! `read()` returns what the cluster holds, converted: nodes registered as a kubelet would with
//! the pods the real scheduler bound to them, pods it could not place as pending, a node being
//! deleted whose pods need a new home, storage zones, PDBs, DaemonSets, VolumeAttachments,
//! namespaces, and NodePools where one invalid pool is listed with its field while the valid
//! one is read. Small pages make every list take several round trips.

use std::time::Instant;

use anyhow::Result;
use dovetail_core::labels;
use dovetail_core::reconcile::ports::Kube;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::*;

#[tokio::test]
async fn read_returns_the_cluster_in_the_core_model() -> Result<()> {
    let Fixture { admin, ns, adapter, .. } = fixture("kube-read").await?;
    let adapter = adapter.with_page_size(2);

    let a = test_node(&admin, &ns, "a", json!([])).await?;
    let b = test_node(&admin, &ns, "b", json!([])).await?;
    let (a, b) = (a.metadata.name.unwrap(), b.metadata.name.unwrap());
    for i in 0..4 {
        create_pod(&admin, &test_pod(&ns, &format!("small-{i}"), "500m", json!({}))?).await?;
    }
    create_pod(&admin, &test_pod(&ns, "huge", "64", json!({}))?).await?;

    // A PV pinned to us-east-1b and a claim naming it: without a PV controller the claim never
    // binds, so the scheduler leaves the pod Unschedulable and the read must carry the zone.
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": { "name": format!("{ns}-pv") },
        "spec": {
            "capacity": { "storage": "1Gi" }, "accessModes": ["ReadWriteOnce"],
            "csi": { "driver": "ebs.csi.aws.com", "volumeHandle": "vol-0abc" },
            "nodeAffinity": { "required": { "nodeSelectorTerms": [{ "matchExpressions": [
                { "key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": ["us-east-1b"] }]}]}},
        },
    }))?;
    Api::<PersistentVolume>::all(admin.clone()).create(&PostParams::default(), &pv).await?;
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": { "name": "data", "namespace": ns },
        "spec": { "accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": format!("{ns}-pv"),
                  "resources": { "requests": { "storage": "1Gi" } } },
    }))?;
    Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns).create(&PostParams::default(), &pvc).await?;
    let volume =
        json!({ "spec": { "volumes": [{ "name": "data", "persistentVolumeClaim": { "claimName": "data" } }] } });
    create_pod(&admin, &test_pod(&ns, "db", "100m", volume)?).await?;

    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": { "name": "small", "namespace": ns },
        "spec": { "maxUnavailable": 1, "selector": { "matchLabels": { "app": "small-0" } } },
    }))?;
    Api::<PodDisruptionBudget>::namespaced(admin.clone(), &ns).create(&PostParams::default(), &pdb).await?;
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": { "name": "agent", "namespace": ns },
        "spec": {
            "selector": { "matchLabels": { "app": "agent" } },
            "template": { "metadata": { "labels": { "app": "agent" } },
                          "spec": { "containers": [{ "name": "a", "image": "x", "resources": { "requests": { "cpu": "50m" } } }] } },
        },
    }))?;
    Api::<DaemonSet>::namespaced(admin.clone(), &ns).create(&PostParams::default(), &ds).await?;
    let attachment: VolumeAttachment = serde_json::from_value(json!({
        "metadata": { "name": format!("{ns}-csi") },
        "spec": { "attacher": "ebs.csi.aws.com", "nodeName": a, "source": { "persistentVolumeName": format!("{ns}-pv") } },
    }))?;
    Api::<VolumeAttachment>::all(admin.clone()).create(&PostParams::default(), &attachment).await?;

    create_nodeclass(&admin, &ns).await?;
    create_nodepool(&admin, &format!("{ns}-good"), "EC2NodeClass").await?;
    create_nodepool(&admin, &format!("{ns}-bad"), "OtherClass").await?;

    // A node going away (a finalizer holds it) with a pod bound to it directly; its taint keeps
    // the scheduler from putting the other pods there.
    let keep_off = json!([{ "key": "dovetail.dev/test-leaving", "effect": "NoSchedule" }]);
    let c = test_node(&admin, &ns, "c", keep_off).await?.metadata.name.unwrap();
    let leaving = json!({ "spec": { "nodeName": c } });
    create_pod(&admin, &test_pod(&ns, "leaving", "100m", leaving)?).await?;
    let nodes: Api<Node> = Api::all(admin.clone());
    let hold = json!({ "metadata": { "finalizers": ["dovetail.dev/test-hold"] } });
    nodes.patch(&c, &PatchParams::default(), &Patch::Merge(&hold)).await?;
    nodes.delete(&c, &DeleteParams::default()).await?;

    let mut placed = Vec::new();
    for i in 0..4 {
        placed.push(bound(&admin, &ns, &format!("small-{i}")).await?);
    }
    unschedulable(&admin, &ns, "huge").await?;
    unschedulable(&admin, &ns, "db").await?;

    let started = Instant::now();
    let state = adapter.read().await?;
    let took = started.elapsed();
    println!("read(): {} nodes, {} pending pods in {took:?} (pages of 2)", state.nodes.len(), state.pending.len());

    // Bound pods sit on the node the scheduler chose.
    for (i, node) in placed.iter().enumerate() {
        let n = state.nodes.iter().find(|n| &n.name == node).expect("the pod's node is read");
        assert!(n.pods.iter().any(|p| p.namespace == ns && p.name == format!("small-{i}")), "small-{i} on {node}");
    }
    let node_a = state.nodes.iter().find(|n| n.name == a).expect("node a");
    assert!(node_a.ready && !node_a.unschedulable);
    assert_eq!(node_a.allocatable.cpu, 2000);
    assert_eq!(node_a.provider_id.as_deref(), Some(format!("aws:///us-east-1a/i-{a}").as_str()));
    assert_eq!(node_a.labels[labels::ZONE], "us-east-1a");
    assert!(state.nodes.iter().any(|n| n.name == b));

    // Pending: the pod that fits nowhere, the one waiting on its volume (in its zone), and the
    // one on the node being deleted; the bound ones are not.
    let mine: Vec<&dovetail_core::model::Pod> = state.pending.iter().filter(|p| p.namespace == ns).collect();
    let mut names: Vec<&str> = mine.iter().map(|p| p.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["db", "huge", "leaving"]);
    let huge = mine.iter().find(|p| p.name == "huge").unwrap();
    assert_eq!(huge.requests.cpu, 64_000);
    let db = mine.iter().find(|p| p.name == "db").unwrap();
    let zones = db.volume_requirements.get(labels::ZONE).expect("the volume's zone");
    assert_eq!(zones.values.iter().collect::<Vec<_>>(), ["us-east-1b"]);
    let node_c = state.nodes.iter().find(|n| n.name == c).expect("the deleting node is still read");
    assert!(node_c.unschedulable);
    assert!(node_c.pods.iter().any(|p| p.name == "leaving"), "its pods stay on it until they are gone");

    let pdb = state.pdbs.iter().find(|p| p.namespace == ns).expect("the PDB");
    assert_eq!(pdb.disruptions_allowed, 0, "no disruption controller has observed it");
    assert!(state.daemonsets.iter().any(|d| d.namespace == ns && d.name == "agent"));
    assert_eq!(state.volume_attachments[&a], [format!("{ns}-pv")]);
    assert_eq!(state.namespaces[&ns]["kubernetes.io/metadata.name"], ns);

    assert!(state.nodepools.iter().any(|p| p.name == format!("{ns}-good")), "the valid pool is read");
    assert!(!state.nodepools.iter().any(|p| p.name == format!("{ns}-bad")));
    let bad = state.invalid.iter().find(|i| i.object == format!("NodePool/{ns}-bad")).expect("the invalid pool");
    assert_eq!(bad.field, "spec.template.spec.nodeClassRef");
    assert!(bad.message.contains("example.com/OtherClass is not supported"), "{}", bad.message);
    assert!(state.nodeclasses.iter().any(|c| c.name == ns));

    // Let the held node go, so later reads in this process do not see it.
    nodes.patch(&c, &PatchParams::default(), &Patch::Merge(&json!({ "metadata": { "finalizers": null } }))).await?;
    Ok(())
}
