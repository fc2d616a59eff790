//! The adapter's writes against the real API server, as the functions' RBAC allows them: taints
//! (idempotent, other taints kept), node adoption (labels, finalizer, owner), NodeClaim objects,
//! evictions through the Eviction API (a PDB's refusal, then
//! success once the budget allows), pod and node deletion, Events, NodePool status, and the
//! termination finalizer of NodePools and EC2NodeClasses.

use std::time::Instant;

use anyhow::{Context, Result};
use dovetail_core::model::{Taint, TaintEffect};
use dovetail_core::nodeclaim::drain::EvictionResult;
use dovetail_core::nodeclaim::object::{self, FINALIZER};
use dovetail_core::nodeclaim::{Launch, NodeClaim, Phase};
use dovetail_core::reconcile::ports::{ClassStatus, Kube, PoolStatus, PortError};
use dovetail_core::resources::Resources;
use dovetail_tests::controlplane::ControlPlane;
use k8s_openapi::api::core::v1::{Event, Node, Pod, Secret};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::*;

/// Ours only: the scheduler writes its own FailedScheduling Events on the same pods.
const OURS: &str = "reportingComponent=dovetail.dev";

fn taint_keys(node: &Node) -> Vec<(String, String, String)> {
    let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    taints.into_iter().map(|t| (t.key, t.value.unwrap_or_default(), t.effect)).collect()
}

#[tokio::test]
async fn the_functions_role_is_all_the_adapter_has() -> Result<()> {
    let control_plane = ControlPlane::shared();
    let admin = control_plane.client();
    let client = functions_client(control_plane, &admin).await?;
    match Api::<Secret>::all(client).list(&ListParams::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("the functions may not read Secrets: {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn taints_are_added_and_removed_idempotently() -> Result<()> {
    let Fixture { admin, ns, adapter, .. } = fixture("kube-taint").await?;
    let nodes: Api<Node> = Api::all(admin.clone());
    let disrupted = Taint::new(dovetail_core::labels::TAINT_DISRUPTED, "", TaintEffect::NoSchedule);
    let other = ("example.com/other".to_string(), "x".to_string(), "NoExecute".to_string());
    let expected_disrupted = ("dovetail.dev/disrupted".to_string(), String::new(), "NoSchedule".to_string());

    // One node with no taints at all (the server omits the list), one with a taint of its own.
    let bare = test_node(&admin, &ns, "bare", json!([])).await?.metadata.name.unwrap();
    let tainted =
        test_node(&admin, &ns, "tainted", json!([{ "key": "example.com/other", "value": "x", "effect": "NoExecute" }]))
            .await?
            .metadata
            .name
            .unwrap();

    for _ in 0..2 {
        adapter.taint(&bare, &disrupted).await?;
        adapter.taint(&tainted, &disrupted).await?;
    }
    assert_eq!(taint_keys(&nodes.get(&bare).await?), std::slice::from_ref(&expected_disrupted));
    assert_eq!(taint_keys(&nodes.get(&tainted).await?), [other.clone(), expected_disrupted.clone()]);

    // A new value for the same key and effect replaces the old one.
    adapter.taint(&bare, &Taint::new(dovetail_core::labels::TAINT_DISRUPTED, "drift", TaintEffect::NoSchedule)).await?;
    assert_eq!(taint_keys(&nodes.get(&bare).await?)[0].1, "drift");

    for _ in 0..2 {
        adapter.remove_taint(&bare, dovetail_core::labels::TAINT_DISRUPTED).await?;
        adapter.remove_taint(&tainted, dovetail_core::labels::TAINT_DISRUPTED).await?;
    }
    assert!(taint_keys(&nodes.get(&bare).await?).is_empty());
    assert_eq!(taint_keys(&nodes.get(&tainted).await?), [other]);

    adapter.remove_taint(&format!("{ns}-ghost"), "any").await?;
    let e = adapter.taint(&format!("{ns}-ghost"), &disrupted).await.unwrap_err();
    assert!(matches!(e, PortError::Rejected(ref m) if m.contains("does not exist")), "{e}");
    Ok(())
}

#[tokio::test]
async fn adopting_a_node_labels_it_and_holds_its_deletion_until_dovetail_deletes_it() -> Result<()> {
    let Fixture { admin, ns, adapter, .. } = fixture("kube-adopt").await?;
    let nodes: Api<Node> = Api::all(admin.clone());
    let name = test_node(&admin, &ns, "n", json!([])).await?.metadata.name.unwrap();
    let labels = std::collections::BTreeMap::from([
        (dovetail_core::labels::CAPACITY_TYPE.to_string(), "spot".to_string()),
        (dovetail_core::labels::NODECLAIM.to_string(), "default-abc12".to_string()),
    ]);
    // The claim's object does not exist here: the node is adopted without an owner.
    for _ in 0..2 {
        adapter.adopt_node(&name, &format!("{ns}-claim"), &labels).await?;
    }
    let got = nodes.get(&name).await?;
    let got_labels = got.metadata.labels.clone().unwrap_or_default();
    for (k, v) in &labels {
        assert_eq!(got_labels.get(k), Some(v), "{k}");
    }
    assert_eq!(got_labels.get("dovetail.dev/test"), Some(&ns), "the node's own labels stay");
    assert_eq!(got.metadata.finalizers.clone().unwrap_or_default(), [FINALIZER], "added once");
    assert!(got.metadata.owner_references.unwrap_or_default().is_empty());

    // Someone deletes it: the finalizer holds it. Dovetail's delete completes it.
    nodes.delete(&name, &DeleteParams::default()).await?;
    assert!(nodes.get(&name).await?.metadata.deletion_timestamp.is_some());
    adapter.read().await?;
    adapter.delete_node(&name).await?;
    assert!(nodes.get_opt(&name).await?.is_none(), "deleted once the finalizer went");
    // A node that is gone needs no adopting and no deleting.
    adapter.adopt_node(&format!("{ns}-ghost"), "x", &labels).await?;
    adapter.delete_node(&format!("{ns}-ghost")).await?;
    Ok(())
}

#[tokio::test]
async fn claim_objects_follow_their_claims_and_own_their_nodes() -> Result<()> {
    let Fixture { admin, ns, adapter, .. } = fixture("kube-claim-object").await?;
    let objects: Api<DynamicObject> =
        Api::all_with(admin.clone(), &ApiResource::erase::<dovetail_api::crd::NodeClaim>(&()));
    let node = test_node(&admin, &ns, "n", json!([])).await?.metadata.name.unwrap();
    let mut claim = NodeClaim::launching(
        &format!("{ns}-claim"),
        "default",
        "default",
        dovetail_core::time::Time::from_secs(1_750_000_000),
    );
    claim.version = 3;
    claim.phase = Phase::Initialized;
    claim.labels.insert(dovetail_core::labels::INSTANCE_TYPE.into(), "m5.large".into());
    claim.launch = Some(Launch {
        instance_id: "i-0abc".into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: dovetail_core::catalog::CapacityType::Spot,
        image_id: "ami-1".into(),
        subnet_id: "subnet-1".into(),
        security_groups: vec![],
        price: 0.04,
        launched_at: dovetail_core::time::Time::from_secs(1_750_000_010),
    });
    claim.node_name = Some(node.clone());
    claim.registered_at = Some(dovetail_core::time::Time::from_secs(1_750_000_060));
    claim.initialized_at = Some(dovetail_core::time::Time::from_secs(1_750_000_070));
    let written = object::ClaimObject {
        conditions: object::conditions(&claim),
        claim: claim.clone(),
        capacity: Some(Resources::new(2000, 8 << 30)),
        allocatable: Some(Resources::new(1930, 7 << 30)),
    };
    for _ in 0..2 {
        adapter.write_claim_object(&written).await?;
    }
    let got = objects.get(&claim.name).await?;
    assert_eq!(
        got.metadata.annotations.unwrap_or_default().get(object::VERSION_ANNOTATION).map(String::as_str),
        Some("3")
    );
    assert_eq!(got.metadata.finalizers.unwrap_or_default(), [FINALIZER]);
    assert_eq!(
        got.metadata.labels.unwrap_or_default().get("node.kubernetes.io/instance-type").map(String::as_str),
        Some("m5.large")
    );
    let status = &got.data["status"];
    assert_eq!(status["providerID"], "aws:///us-east-1a/i-0abc");
    assert_eq!(status["nodeName"], node.as_str());
    assert_eq!(status["capacity"]["cpu"], "2");
    let ready = status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").cloned().unwrap();
    assert_eq!(
        (ready["status"].as_str(), ready["lastTransitionTime"].as_str()),
        (Some("True"), Some("2025-06-15T15:07:50Z"))
    );

    // Read back (as the next invocation would), the object is in the state; a node adopted
    // after is owned by it.
    let state = adapter.read().await?;
    let seen = state.claim_objects.iter().find(|o| o.name == claim.name).cloned();
    assert_eq!(seen, Some(object::Observed { name: claim.name.clone(), version: Some(3), deleting: false }));
    adapter.adopt_node(&node, &claim.name, &Default::default()).await?;
    let owners = Api::<Node>::all(admin.clone()).get(&node).await?.metadata.owner_references.unwrap_or_default();
    assert_eq!(
        owners.iter().map(|o| (o.kind.as_str(), o.name.as_str())).collect::<Vec<_>>(),
        [("NodeClaim", claim.name.as_str())]
    );

    // Deleted by hand: held by the finalizer, and the read says so.
    objects.delete(&claim.name, &DeleteParams::default()).await?;
    let state = adapter.read().await?;
    assert!(state.claim_objects.iter().any(|o| o.name == claim.name && o.deleting));
    adapter.delete_claim_object(&claim.name).await?;
    assert!(objects.get_opt(&claim.name).await?.is_none());
    adapter.delete_claim_object(&claim.name).await?;
    Ok(())
}

/// Does the kubelet's part: the pod runs and is Ready (the Eviction API lets pending pods go
/// without asking their PDB).
async fn mark_running(admin: &Client, ns: &str, name: &str) -> Result<()> {
    let status = json!({ "status": {
        "phase": "Running",
        "conditions": [
            { "type": "PodScheduled", "status": "True" },
            { "type": "Ready", "status": "True" },
            { "type": "ContainersReady", "status": "True" },
        ],
    }});
    Api::<Pod>::namespaced(admin.clone(), ns)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// Does the disruption controller's part (there is no kube-controller-manager).
async fn budget(admin: &Client, ns: &str, name: &str, allowed: i32) -> Result<()> {
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(admin.clone(), ns);
    let generation = pdbs.get(name).await?.metadata.generation.unwrap_or(1);
    let status = json!({ "status": {
        "observedGeneration": generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": 1 + allowed,
        "desiredHealthy": 1,
        "expectedPods": 1 + allowed,
    }});
    pdbs.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await?;
    Ok(())
}

#[tokio::test]
async fn evictions_honour_the_pdb_and_deletions_are_idempotent() -> Result<()> {
    let Fixture { admin, ns, adapter, .. } = fixture("kube-evict").await?;
    let node = test_node(&admin, &ns, "a", json!([])).await?.metadata.name.unwrap();
    let web = json!({ "metadata": { "labels": { "app": "web" } } });
    create_pod(&admin, &test_pod(&ns, "web-0", "100m", web.clone())?).await?;
    create_pod(&admin, &test_pod(&ns, "web-1", "100m", web)?).await?;
    for pod in ["web-0", "web-1"] {
        assert_eq!(bound(&admin, &ns, pod).await?, node);
        mark_running(&admin, &ns, pod).await?;
    }
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": { "name": "web", "namespace": ns },
        "spec": { "minAvailable": 1, "selector": { "matchLabels": { "app": "web" } } },
    }))?;
    Api::<PodDisruptionBudget>::namespaced(admin.clone(), &ns).create(&PostParams::default(), &pdb).await?;
    budget(&admin, &ns, "web", 0).await?;
    // As a drain does: read, then evict (the read gives the pods' uids for the precondition).
    let state = adapter.read().await?;
    assert_eq!(state.pdbs.iter().find(|p| p.namespace == ns).map(|p| p.disruptions_allowed), Some(0));

    let started = Instant::now();
    assert_eq!(adapter.evict(&ns, "web-0").await?, EvictionResult::Refused);
    let refused_in = started.elapsed();
    budget(&admin, &ns, "web", 1).await?;
    assert_eq!(adapter.evict(&ns, "web-0").await?, EvictionResult::Accepted);
    println!("eviction refused by the PDB in {refused_in:?}");
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    assert!(pods.get("web-0").await?.metadata.deletion_timestamp.is_some(), "web-0 is terminating");
    assert_eq!(adapter.evict(&ns, "ghost").await?, EvictionResult::NotFound);

    // No kubelet finishes the termination: the deadline's deletion does, with grace 0.
    adapter.delete_pod(&ns, "web-0", 0).await?;
    assert!(pods.get_opt("web-0").await?.is_none());
    adapter.delete_pod(&ns, "web-0", 0).await?;

    // A same-named pod that replaced the one the read saw is not touched: its uid differs.
    pods.delete("web-1", &kube::api::DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await?;
    create_pod(&admin, &test_pod(&ns, "web-1", "100m", json!({}))?).await?;
    adapter.delete_pod(&ns, "web-1", 0).await?;
    assert!(pods.get_opt("web-1").await?.is_some(), "the replacement survives");
    // (An eviction with the old uid answers NotFound too, but only after the API server has
    // retried the failed precondition for ~10 s; not worth the test's time.)

    adapter.delete_node(&node).await?;
    assert!(Api::<Node>::all(admin.clone()).get_opt(&node).await?.is_none());
    adapter.delete_node(&node).await?;
    Ok(())
}

#[tokio::test]
async fn events_land_on_their_objects_and_repeats_are_counted() -> Result<()> {
    let Fixture { admin, ns, adapter, .. } = fixture("kube-event").await?;
    let pod = create_pod(&admin, &test_pod(&ns, "web", "64", json!({}))?).await?;
    let pool = create_nodepool(&admin, &format!("{ns}-pool"), "EC2NodeClass").await?;

    // Pod: resolved without a prior read (a GET), then counted on repeat.
    let message = "Pod should schedule on: nodeclaim/default-abc (m7i.large spot in us-east-1a)";
    adapter.event(&format!("Pod/{ns}/web"), "Nominated", message).await?;
    adapter.event(&format!("Pod/{ns}/web"), "Nominated", message).await?;
    let events: Api<Event> = Api::namespaced(admin.clone(), &ns);
    let on_pod = events.list(&ListParams::default().fields(&format!("involvedObject.name=web,{OURS}"))).await?.items;
    assert_eq!(on_pod.len(), 1, "{on_pod:?}");
    let e = &on_pod[0];
    assert_eq!(e.involved_object.uid, pod.metadata.uid, "kubectl describe finds it by uid");
    assert_eq!(e.involved_object.kind.as_deref(), Some("Pod"));
    assert_eq!((e.reason.as_deref(), e.message.as_deref()), (Some("Nominated"), Some(message)));
    assert_eq!((e.type_.as_deref(), e.count), (Some("Normal"), Some(2)));
    assert_eq!(e.reporting_component.as_deref(), Some(dovetail_kube::REPORTING_CONTROLLER));
    assert_eq!(e.reporting_instance.as_deref(), Some("integration-test"));

    // A cluster-scoped NodePool: the Event goes to `default`. Resolved from the read this time.
    adapter.read().await?;
    let pool_name = pool.metadata.name.clone().unwrap();
    adapter.event(&format!("NodePool/{pool_name}"), "LaunchTimeout", "claim x did not launch").await?;
    let in_default: Api<Event> = Api::namespaced(admin.clone(), "default");
    let on_pool =
        in_default.list(&ListParams::default().fields(&format!("involvedObject.name={pool_name},{OURS}"))).await?.items;
    assert_eq!(on_pool.len(), 1);
    assert_eq!(on_pool[0].involved_object.uid, pool.metadata.uid);
    assert_eq!(on_pool[0].involved_object.api_version.as_deref(), Some("dovetail.dev/v1"));
    assert_eq!(on_pool[0].type_.as_deref(), Some("Warning"));

    // An object that is gone still gets its Event, without a uid.
    adapter.event(&format!("Pod/{ns}/gone"), "FailedScheduling", "no NodePool fits").await?;
    let on_gone = events.list(&ListParams::default().fields(&format!("involvedObject.name=gone,{OURS}"))).await?.items;
    assert_eq!(on_gone.len(), 1);
    assert_eq!(on_gone[0].involved_object.uid, None);
    Ok(())
}

#[tokio::test]
async fn nodepool_status_shows_nodes_resources_and_validation() -> Result<()> {
    let Fixture { admin, ns, adapter, .. } = fixture("kube-status").await?;
    let (good, bad) = (format!("{ns}-good"), format!("{ns}-bad"));
    create_nodepool(&admin, &good, "EC2NodeClass").await?;
    create_nodepool(&admin, &bad, "OtherClass").await?;

    let state = adapter.read().await?;
    let invalid = state.invalid.iter().find(|i| i.object == format!("NodePool/{bad}")).context("the bad pool")?;
    let message = format!("{}: {}", invalid.field, invalid.message);
    let two_nodes = || PoolStatus {
        name: good.clone(),
        nodes: 2,
        resources: Resources::new(3_500, 8 << 30),
        invalid: None,
        node_class: Ok(()),
        registered: true,
        cost_limit: None,
    };
    adapter.pool_status(&two_nodes()).await?;
    let empty = |name: &str| PoolStatus {
        name: name.into(),
        nodes: 0,
        resources: Resources::default(),
        invalid: None,
        node_class: Err("the NodePool is invalid".into()),
        registered: false,
        cost_limit: None,
    };
    adapter.pool_status(&PoolStatus { invalid: Some(message.clone()), ..empty(&bad) }).await?;

    let pools = nodepools(&admin);
    let status = pools.get(&good).await?.data["status"].clone();
    assert_eq!(status["resources"]["nodes"], "2");
    assert_eq!(status["resources"]["cpu"], "3500m");
    assert_eq!(status["resources"]["memory"], "8Gi");
    let condition = |s: &serde_json::Value, t: &str| {
        s["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == t).cloned()).unwrap_or_default()
    };
    for t in ["ValidationSucceeded", "NodeClassReady", "NodeRegistrationHealthy", "Ready"] {
        assert_eq!(condition(&status, t)["status"], "True", "{t}");
    }
    assert_eq!(condition(&status, "Ready")["observedGeneration"], 1);

    let bad_status = pools.get(&bad).await?.data["status"].clone();
    let validation = condition(&bad_status, "ValidationSucceeded");
    assert_eq!(validation["status"], "False");
    assert_eq!(validation["message"], message.as_str());
    assert!(message.starts_with("spec.template.spec.nodeClassRef: "), "{message}");
    assert_eq!(condition(&bad_status, "Ready")["status"], "False");

    // The same status again writes nothing (the sweeper publishes every minute).
    let before = pools.get(&good).await?.metadata.resource_version;
    adapter.pool_status(&two_nodes()).await?;
    assert_eq!(pools.get(&good).await?.metadata.resource_version, before);
    // A pool that is gone has no status to write.
    adapter.pool_status(&empty(&format!("{ns}-gone"))).await?;

    // An EC2NodeClass: what it resolves to, and Ready, which `kubectl wait` reads.
    let class = format!("{ns}-class");
    create_nodeclass(&admin, &class).await?;
    adapter.read().await?;
    let resolved = dovetail_core::cluster::ResolvedClass {
        name: class.clone(),
        hash: "h".into(),
        images: [("amd64".to_string(), "ami-0abc".to_string())].into(),
        images_problem: None,
        images_per_variant: false,
        subnets: vec!["subnet-a".into()],
        security_groups: vec!["sg-1".into()],
        zones: vec!["us-east-1a".into()],
        instance_profile: Some("test_0123456789abcdef".into()),
        instance_profile_problem: None,
        reservations: vec![],
    };
    adapter.class_status(&ClassStatus { name: class.clone(), resolved: Ok(resolved), deletion_blocked: None }).await?;
    let classes =
        Api::<DynamicObject>::all_with(admin.clone(), &ApiResource::erase::<dovetail_api::crd::EC2NodeClass>(&()));
    let status = classes.get(&class).await?.data["status"].clone();
    assert_eq!(status["subnets"][0], json!({"id": "subnet-a", "zone": "us-east-1a"}));
    assert_eq!(status["amis"][0]["requirements"][0]["values"][0], "amd64");
    assert_eq!(status["instanceProfile"], "test_0123456789abcdef");
    for t in ["SubnetsReady", "SecurityGroupsReady", "AMIsReady", "InstanceProfileReady", "Ready"] {
        assert_eq!(condition(&status, t)["status"], "True", "{t}");
    }
    adapter
        .class_status(&ClassStatus {
            name: class.clone(),
            resolved: Err("DescribeSubnets: throttled".into()),
            deletion_blocked: None,
        })
        .await?;
    let status = classes.get(&class).await?.data["status"].clone();
    assert_eq!(condition(&status, "Ready")["status"], "False");
    assert_eq!(condition(&status, "SubnetsReady")["message"], "DescribeSubnets: throttled");
    Ok(())
}

#[tokio::test]
async fn pools_and_classes_are_held_and_released_keeping_other_finalizers() -> Result<()> {
    let Fixture { admin, ns, adapter, .. } = fixture("kube-held").await?;
    let (pool, class) = (format!("{ns}-pool"), format!("{ns}-class"));
    create_nodepool(&admin, &pool, "EC2NodeClass").await?;
    create_nodeclass(&admin, &class).await?;
    let pools = nodepools(&admin);
    let classes =
        Api::<DynamicObject>::all_with(admin.clone(), &ApiResource::erase::<dovetail_api::crd::EC2NodeClass>(&()));
    let theirs = json!({"metadata": {"finalizers": ["example.com/theirs"]}});
    pools.patch(&pool, &PatchParams::default(), &Patch::Merge(&theirs)).await?;

    // Held, twice over: one finalizer of ours, theirs kept.
    for _ in 0..2 {
        adapter.add_finalizer(&format!("NodePool/{pool}")).await?;
        adapter.add_finalizer(&format!("EC2NodeClass/{class}")).await?;
    }
    let held = pools.get(&pool).await?.metadata.finalizers.unwrap_or_default();
    assert_eq!(held, ["example.com/theirs", FINALIZER]);
    assert_eq!(classes.get(&class).await?.metadata.finalizers.unwrap_or_default(), [FINALIZER]);
    // The core reads both back as held.
    let state = adapter.read().await?;
    assert!(state.nodepools.iter().any(|p| p.name == pool && p.termination_finalizer && !p.deleting));
    assert!(state.nodeclasses.iter().any(|c| c.name == class && c.termination_finalizer));

    // Deleted, the class stays until released; released, it goes.
    classes.delete(&class, &DeleteParams::default()).await?;
    let state = adapter.read().await?;
    assert!(state.nodeclasses.iter().any(|c| c.name == class && c.deleting));
    adapter.remove_finalizer(&format!("EC2NodeClass/{class}")).await?;
    assert!(classes.get_opt(&class).await?.is_none(), "released, the class is gone");
    // Gone objects, and objects without our finalizer, are no error either way.
    adapter.remove_finalizer(&format!("EC2NodeClass/{class}")).await?;
    adapter.add_finalizer(&format!("EC2NodeClass/{class}")).await?;
    adapter.remove_finalizer(&format!("NodePool/{pool}")).await?;
    adapter.remove_finalizer(&format!("NodePool/{pool}")).await?;
    assert_eq!(pools.get(&pool).await?.metadata.finalizers.unwrap_or_default(), ["example.com/theirs"]);
    assert!(matches!(adapter.add_finalizer("Node/x").await, Err(PortError::Rejected(_))));

    // A pool being deleted takes no new finalizer (the API server would refuse it anyway).
    pools.delete(&pool, &DeleteParams::default()).await?;
    adapter.add_finalizer(&format!("NodePool/{pool}")).await?;
    assert_eq!(pools.get(&pool).await?.metadata.finalizers.unwrap_or_default(), ["example.com/theirs"]);
    pools.patch(&pool, &PatchParams::default(), &Patch::Merge(&json!({"metadata": {"finalizers": null}}))).await?;
    Ok(())
}
