//! Day-2 operations as an operator coming from Karpenter runs them with kubectl, end to end on
//! one control plane: NodeClaims listed with Karpenter's printer columns (through the API's
//! Table output, what `kubectl get nodeclaims -o wide` prints) and conditions, owner references
//! NodePool → NodeClaim → Node, a hand-made NodeClaim refused at admission, and `kubectl delete
//! node` / `kubectl delete nodeclaim` carried out as a drain: the Node or the NodeClaim stays,
//! held by Dovetail's finalizer, until its pods have moved (the PodDisruptionBudget kept) and its
//! instance is terminated; a drain held by do-not-disrupt says on what (FailedDraining, the
//! claim's Disrupting condition). The EC2NodeClass's and NodePool's status and READY columns;
//! node repair; `limits.nodes`; consolidateAfter counted from the last pod event, and
//! DisruptionBlocked on node, NodeClaim and pool while the budget holds it; deleting the
//! EC2NodeClass refused while the NodePool uses it, and deleting the NodePool draining its nodes
//! under its budget, then releasing pool and class.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use dovetail_core::nodeclaim::object::FINALIZER;
use dovetail_core::nodeclaim::{NodeClaim, Phase};
use dovetail_core::reconcile::ports::{Clock, Store};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};

use super::disruption::{pool, replaced, workload, DISRUPTION_OPTIONS};
use super::{instance_of, node_of, EndToEnd, STEP};

/// `kubectl get nodeclaims -o wide`: each row's cells by column, from the API server's Table
/// rendering of the CRD's printer columns.
async fn nodeclaim_table(e2e: &EndToEnd) -> Result<Vec<BTreeMap<String, Value>>> {
    let expected =
        ["Name", "Type", "Capacity", "Zone", "Node", "Ready", "Age", "ID", "NodePool", "NodeClass", "Drifted"];
    table(e2e, "nodeclaims", &expected).await
}

/// `kubectl get <plural>.dovetail.dev -o wide`, its columns checked against `expected`.
async fn table(e2e: &EndToEnd, plural: &str, expected: &[&str]) -> Result<Vec<BTreeMap<String, Value>>> {
    let request = http::Request::get(format!("/apis/dovetail.dev/v1/{plural}?includeObject=None"))
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())?;
    let table: Value = serde_json::from_str(&e2e.admin.request_text(request).await?)?;
    let columns: Vec<String> = table["columnDefinitions"]
        .as_array()
        .context("a Table has columnDefinitions")?
        .iter()
        .map(|c| c["name"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(columns, expected, "kubectl get {plural} -o wide columns");
    Ok(table["rows"]
        .as_array()
        .context("a Table has rows")?
        .iter()
        .map(|row| {
            let cells = row["cells"].as_array().cloned().unwrap_or_default();
            columns.iter().cloned().zip(cells).collect()
        })
        .collect())
}

fn claim_objects(e2e: &EndToEnd) -> Api<DynamicObject> {
    let resource = kube::api::ApiResource::erase::<dovetail_api::crd::NodeClaim>(&());
    Api::all_with(e2e.admin.clone(), &resource)
}

fn condition<'a>(object: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    object.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)
}

fn finalizers(meta: &kube::api::ObjectMeta) -> Vec<String> {
    meta.finalizers.clone().unwrap_or_default()
}

#[tokio::test]
async fn nodeclaims_show_in_kubectl_and_deleting_a_node_or_a_nodeclaim_drains_it() -> Result<()> {
    let e2e = EndToEnd::start("day2", DISRUPTION_OPTIONS).await?;
    e2e.apply(&pool("on-demand", "", "{consolidationPolicy: WhenEmpty, consolidateAfter: Never}")).await?;
    e2e.apply(&workload(3)).await?;
    let pods = e2e.running("shop", "app=api", 3).await?;

    // 1. Every live claim is listed, with the columns and values Karpenter's NodeClaims show.
    let rows = e2e
        .until("three NodeClaims Ready in kubectl get nodeclaims", STEP, || async {
            let rows = nodeclaim_table(&e2e).await?;
            Ok((rows.len() == 3 && rows.iter().all(|r| r["Ready"] == "True")).then_some(rows))
        })
        .await?;
    let claims = e2e.live_claims().await?;
    for row in &rows {
        let name = row["Name"].as_str().unwrap_or_default();
        let claim = claims.iter().find(|c| c.name == name).context("a row for a claim the store has")?;
        let launch = claim.launch.as_ref().context("launched")?;
        assert_eq!(row["Type"], launch.instance_type.as_str(), "{name}");
        assert_eq!(row["Capacity"], "on-demand", "{name}");
        assert_eq!(row["Zone"], launch.zone.as_str(), "{name}");
        assert_eq!(row["Node"], claim.node_name.as_deref().unwrap_or_default(), "{name}");
        assert_eq!(row["ID"], launch.provider_id().as_str(), "{name}");
        assert_eq!((row["NodePool"].as_str(), row["NodeClass"].as_str()), (Some("default"), Some("default")));
        // Not drifted: no Drifted condition, an empty cell.
        assert!(row["Drifted"].is_null(), "{name}: {}", row["Drifted"]);
    }

    // Conditions with reasons, owner references both ways, the finalizer on object and Node.
    let pool_uid = super::super::kube::nodepools(&e2e.admin).get("default").await?.metadata.uid;
    for claim in &claims {
        let object = claim_objects(&e2e).get(&claim.name).await?;
        for type_ in ["Launched", "Registered", "Initialized", "Ready"] {
            let c = condition(&object, type_).with_context(|| format!("{} has {type_}", claim.name))?;
            assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some("True"), Some(type_)), "{}", claim.name);
        }
        let owners = object.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(owners.len(), 1, "{}: owned by its NodePool", claim.name);
        assert_eq!((owners[0].kind.as_str(), Some(owners[0].uid.clone())), ("NodePool", pool_uid.clone()));
        assert_eq!(finalizers(&object.metadata), [FINALIZER]);
        let node = e2e.node(claim.node_name.as_deref().context("registered")?).await?;
        let owners = node.metadata.owner_references.clone().unwrap_or_default();
        assert!(
            owners
                .iter()
                .any(|o| o.kind == "NodeClaim" && o.name == claim.name && Some(&o.uid) == object.metadata.uid.as_ref()),
            "node {:?} is owned by its NodeClaim: {owners:?}",
            node.metadata.name
        );
        assert!(finalizers(&node.metadata).contains(&FINALIZER.to_string()));
    }

    // 4. The class's status says what it resolved to, and READY is filled for class and pool.
    let pool_columns = ["Name", "NodeClass", "Nodes", "Ready", "Age", "Weight", "CPU", "Memory"];
    e2e.until("READY True for the class and the pool (the sweeper's status)", STEP, || async {
        let classes = table(&e2e, "ec2nodeclasses", &["Name", "Ready", "Age", "Role"]).await?;
        let pools = table(&e2e, "nodepools", &pool_columns).await?;
        let ready = |rows: &[BTreeMap<String, Value>]| rows.len() == 1 && rows[0]["Ready"] == "True";
        Ok((ready(&classes) && ready(&pools) && pools[0]["Nodes"] == "3").then_some(()))
    })
    .await?;
    let class_api = kube::api::ApiResource::erase::<dovetail_api::crd::EC2NodeClass>(&());
    let class = Api::<DynamicObject>::all_with(e2e.admin.clone(), &class_api).get("default").await?;
    let status = &class.data["status"];
    let zones = status["subnets"].as_array().map(|s| s.iter().filter(|s| s["zone"] != "").count());
    assert!(zones.is_some_and(|n| n > 0), "subnets with their zones: {status}");
    assert!(status["securityGroups"].as_array().is_some_and(|s| !s.is_empty()), "{status}");
    assert_eq!(status["amis"][0]["requirements"][0]["key"], "kubernetes.io/arch", "{status}");
    for type_ in ["SubnetsReady", "SecurityGroupsReady", "AMIsReady", "InstanceProfileReady", "Ready"] {
        let c = condition(&class, type_).with_context(|| format!("the class has {type_}"))?;
        assert_eq!(c["status"], "True", "{type_}: {c}");
    }
    let pool = super::super::kube::nodepools(&e2e.admin).get("default").await?;
    for type_ in ["ValidationSucceeded", "NodeClassReady", "NodeRegistrationHealthy", "Ready"] {
        let c = condition(&pool, type_).with_context(|| format!("the pool has {type_}"))?;
        assert_eq!(c["status"], "True", "{type_}: {c}");
    }

    // A NodeClaim made by hand is refused, and says why.
    e2e.assert_hand_made_nodeclaim_refused().await?;

    // 2a. kubectl delete node: the Node stays while Dovetail drains it, then goes with its instance.
    // Its pod has do-not-disrupt at first, which holds the drain: after two minutes the node and
    // its NodeClaim say on what (a FailedDraining Event, the claim's Disrupting condition).
    let node_name = node_of(&pods[0]);
    let node = e2e.node(&node_name).await?;
    let victim = instance_of(&node);
    let deleted_claim = claims.iter().find(|c| c.node_name.as_deref() == Some(&node_name)).context("its claim")?;
    let pod_api = Api::<Pod>::namespaced(e2e.admin.clone(), "shop");
    let pod_name = pods[0].metadata.name.clone().unwrap_or_default();
    let protect = |on: bool| {
        let value = if on { json!("true") } else { Value::Null };
        json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": value}}})
    };
    pod_api.patch(&pod_name, &PatchParams::default(), &Patch::Merge(&protect(true))).await?;
    Api::<Node>::all(e2e.admin.clone()).delete(&node_name, &DeleteParams::default()).await?;
    let held = e2e.node(&node_name).await?;
    assert!(held.metadata.deletion_timestamp.is_some(), "the finalizer holds the deleted node");
    let failed = |e: &Event| e.reason.as_deref() == Some("FailedDraining");
    let stuck = e2e
        .until("FailedDraining on the held node and its NodeClaim", STEP * 3, || async {
            let on_node = e2e.events("default", "Node", &node_name).await?.into_iter().find(|e| failed(e));
            let on_claim = e2e.events("default", "NodeClaim", &deleted_claim.name).await?.iter().any(failed);
            Ok(on_node.filter(|_| on_claim))
        })
        .await?;
    let message = stuck.message.unwrap_or_default();
    assert!(message.contains(&format!("shop/{pod_name}")) && message.contains("do-not-disrupt"), "{message}");
    assert_eq!(stuck.type_.as_deref(), Some("Warning"));
    let object = claim_objects(&e2e).get(&deleted_claim.name).await?;
    let disrupting = condition(&object, "Disrupting").context("Disrupting")?;
    assert!(disrupting["message"].as_str().is_some_and(|m| m.contains("the drain is held by")), "{disrupting}");
    pod_api.patch(&pod_name, &PatchParams::default(), &Patch::Merge(&protect(false))).await?;
    replaced(&e2e, &victim, 3).await?;
    let events = e2e.events("default", "Node", &node_name).await?;
    assert!(
        events.iter().any(|e| e.reason.as_deref() == Some("DisruptionTerminating")
            && e.message.as_deref().is_some_and(|m| m.contains("was deleted"))),
        "an Event on the node says why it is drained: {events:?}"
    );
    e2e.until("the deleted node's NodeClaim gone", STEP, || async {
        Ok(claim_objects(&e2e).get_opt(&deleted_claim.name).await?.is_none().then_some(()))
    })
    .await?;

    // 2b. kubectl delete nodeclaim: the same, starting from the claim.
    let claims = e2e.live_claims().await?;
    let target = claims.iter().find(|c| c.node_name.is_some()).context("a registered claim")?.clone();
    let victim = target.launch.as_ref().context("launched")?.instance_id.clone();
    claim_objects(&e2e).delete(&target.name, &DeleteParams::default()).await?;
    let held = claim_objects(&e2e).get(&target.name).await?;
    assert!(held.metadata.deletion_timestamp.is_some(), "the finalizer holds the deleted NodeClaim");
    replaced(&e2e, &victim, 3).await?;
    e2e.until("the deleted NodeClaim gone", STEP, || async {
        Ok(claim_objects(&e2e).get_opt(&target.name).await?.is_none().then_some(()))
    })
    .await?;
    let rows = e2e
        .until("kubectl get nodeclaims showing the three live claims", STEP, || async {
            let rows = nodeclaim_table(&e2e).await?;
            Ok((rows.len() == 3 && rows.iter().all(|r| r["Ready"] == "True")).then_some(rows))
        })
        .await?;
    assert!(rows.iter().all(|r| r["Name"] != target.name.as_str() && r["Name"] != deleted_claim.name.as_str()));
    e2e.assert_exactly_once("after two deletions").await?;

    // 9. Node repair, opted in on the pool: a node NotReady for 31 minutes (past Ready's 30) is
    // replaced, one node of three being within the 20% a pool may repair at once.
    let pools = super::super::kube::nodepools(&e2e.admin);
    let opt_in = json!({"metadata": {"annotations": {"dovetail.dev/node-repair": "true"}}});
    pools.patch("default", &PatchParams::default(), &Patch::Merge(&opt_in)).await?;
    let claims = e2e.live_claims().await?;
    // Not one of the claims deleted above, which may still be on their way out.
    let working = |c: &&NodeClaim| c.phase == Phase::Initialized && c.disruption.is_none();
    let sick = claims.iter().find(working).context("an Initialized claim")?.clone();
    let sick_node = sick.node_name.clone().unwrap_or_default();
    let since = k8s_openapi::jiff::Timestamp::now() - std::time::Duration::from_secs(31 * 60);
    let not_ready = json!({"status": {"conditions": [{
        "type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "container runtime is down",
        "lastTransitionTime": since.to_string(), "lastHeartbeatTime": since.to_string(),
    }]}});
    Api::<Node>::all(e2e.admin.clone())
        .patch_status(&sick_node, &PatchParams::default(), &Patch::Merge(&not_ready))
        .await?;
    // Forceful: its pods are not evicted but go with the Node (kube-controller-manager's pod
    // garbage collector deletes pods bound to a Node that is gone), and run again elsewhere.
    let sick_instance = sick.launch.as_ref().context("launched")?.instance_id.clone();
    e2e.until("the unhealthy node terminated and its pod running elsewhere", STEP * 2, || async {
        let nodes: Vec<String> = e2e.nodes().await?.iter().filter_map(|n| n.metadata.name.clone()).collect();
        let pods = e2e.pods("shop", "app=api").await?;
        let running = pods.iter().filter(|p| super::runs(p) && nodes.contains(&node_of(p))).count();
        let live = e2e.instances().await.iter().any(|(id, ..)| id == &sick_instance);
        Ok((!live && !nodes.contains(&sick_node) && running == 3).then_some(()))
    })
    .await?;
    let events = e2e.events("default", "Node", &sick_node).await?;
    let unhealthy = events.iter().find(|e| e.reason.as_deref() == Some("Unhealthy")).context("an Unhealthy Event")?;
    assert!(unhealthy.message.as_deref().is_some_and(|m| m.contains("Ready")), "{unhealthy:?}");
    let stored = e2e.store().claim(&sick.name).await?.context("the repaired claim stays as history")?;
    assert_eq!(stored.disruption.map(|d| d.reason), Some(dovetail_core::nodeclaim::Reason::Unhealthy));

    // 7. limits.nodes: with three nodes and a limit of three, a fourth replica waits, and says why.
    pools
        .patch("default", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"limits": {"nodes": "3"}}})))
        .await?;
    e2e.apply(&workload(4)).await?;
    let why = e2e
        .until("the fourth replica's FailedScheduling naming the node limit", STEP, || async {
            for pod in e2e.pods("shop", "app=api").await? {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let events = e2e.events("shop", "Pod", &name).await?;
                let found = events.into_iter().filter(super::by_dovetail).find(|e| {
                    e.reason.as_deref() == Some("FailedScheduling")
                        && e.message.as_deref().is_some_and(|m| m.contains("limit on nodes reached"))
                });
                if found.is_some() {
                    return Ok(found);
                }
            }
            Ok(None)
        })
        .await?;
    assert!(why.message.unwrap_or_default().contains("0 of 3 left"));
    assert_eq!(e2e.live_claims().await?.len(), 3, "no fourth node past the limit");

    // 6. consolidateAfter counts from the last pod event: one replica fewer empties a node, which
    // is taken away no sooner than 30 s after its pod left. 5. While the pool's budget allows no
    // disruption, the emptied node, its NodeClaim and the pool say so (DisruptionBlocked).
    let patch = json!({"spec": {"limits": null, "disruption": {
        "consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s", "budgets": [{"nodes": "0"}],
    }}});
    pools.patch("default", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let before = e2e.live_claims().await?;
    let emptied_at = dovetail_runtime::clock::SystemClock.now();
    e2e.apply(&workload(2)).await?;
    let blocked = |e: &Event| {
        e.reason.as_deref() == Some("DisruptionBlocked")
            && e.message.as_deref().is_some_and(|m| m.contains("allows no more nodes"))
    };
    let (emptied, message) = e2e
        .until("DisruptionBlocked on the emptied node, its NodeClaim and the pool", STEP, || async {
            if !e2e.events("default", "NodePool", "default").await?.iter().any(blocked) {
                return Ok(None);
            }
            for claim in &before {
                let node = claim.node_name.as_deref().unwrap_or_default();
                let on_node = e2e.events("default", "Node", node).await?.into_iter().find(|e| blocked(e));
                let on_claim = e2e.events("default", "NodeClaim", &claim.name).await?.into_iter().any(|e| blocked(&e));
                if let (Some(e), true) = (on_node, on_claim) {
                    return Ok(Some((claim.name.clone(), e.message.unwrap_or_default())));
                }
            }
            Ok(None)
        })
        .await?;
    assert!(message.contains("is empty"), "{message}");
    assert_eq!(e2e.live_claims().await?.len(), 3, "the budget holds the empty node");
    let open = json!({"spec": {"disruption": {"budgets": null}}});
    pools.patch("default", &PatchParams::default(), &Patch::Merge(&open)).await?;
    let before: Vec<String> = before.into_iter().map(|c| c.name).collect();
    let gone = e2e
        .until("the emptied node's claim consolidated away", STEP * 2, || async {
            let live: Vec<String> = e2e.live_claims().await?.into_iter().map(|c| c.name).collect();
            Ok((live.len() == 2).then(|| before.iter().find(|c| !live.contains(c)).cloned()).flatten())
        })
        .await?;
    let claim = e2e.store().claim(&gone).await?.context("the consolidated claim stays as history")?;
    let disruption = claim.disruption.context("consolidated")?;
    assert_eq!(disruption.reason, dovetail_core::nodeclaim::Reason::Empty, "{}", disruption.message);
    let waited = disruption.since.since(emptied_at);
    assert!(waited >= std::time::Duration::from_secs(30), "consolidated {waited:?} after its pod left, not 30 s");
    assert_eq!(gone, emptied, "the node that said it was blocked");
    // Its disruption is told on the NodeClaim as on the Node.
    let events = e2e.events("default", "NodeClaim", &gone).await?;
    assert!(
        events.iter().any(|e| e.reason.as_deref() == Some("DisruptionTerminating")
            && e.message.as_deref().is_some_and(|m| m.starts_with("disrupting for Empty"))),
        "{events:?}"
    );

    // 3. Deletions that cascade. Pool and class are held by Dovetail's finalizer; deleting the
    // class while the pool uses it is refused (kept, with a condition saying by whom).
    let class_api = Api::<DynamicObject>::all_with(e2e.admin.clone(), &class_api);
    for held in
        [finalizers(&pools.get("default").await?.metadata), finalizers(&class_api.get("default").await?.metadata)]
    {
        assert!(held.contains(&FINALIZER.to_string()), "{held:?}");
    }
    class_api.delete("default", &DeleteParams::default()).await?;
    let blocked = e2e
        .until("the deleted class kept, DeletionBlocked naming the pool", STEP, || async {
            let class = class_api.get("default").await?;
            Ok(condition(&class, "DeletionBlocked").filter(|c| c["status"] == "True").cloned())
        })
        .await?;
    assert!(blocked["message"].as_str().is_some_and(|m| m.contains("NodePool default")), "{blocked}");

    // Deleting the pool drains its nodes one at a time (its budget: one node), their pods moving
    // to a second pool (of its own class), then releases it, and with it the class.
    let spare = super::disruption::pool("on-demand", "", "{consolidationPolicy: WhenEmpty, consolidateAfter: Never}");
    e2e.apply(&spare.replace("name: default}", "name: spare}")).await?;
    let one = json!({"spec": {"disruption": {"budgets": [{"nodes": "1"}]}}});
    pools.patch("default", &PatchParams::default(), &Patch::Merge(&one)).await?;
    let leaving: Vec<String> = e2e.live_claims().await?.into_iter().map(|c| c.name).collect();
    assert_eq!(leaving.len(), 2);
    pools.delete("default", &DeleteParams::default()).await?;
    let most_draining = std::cell::Cell::new(0);
    e2e.until("the deleted pool's nodes gone, then the pool and the class", STEP * 4, || async {
        let claims = e2e.store().claims().await?;
        let draining = claims
            .iter()
            .filter(|c| leaving.contains(&c.name) && c.disruption.is_some() && c.phase < Phase::Terminating)
            .count();
        most_draining.set(most_draining.get().max(draining));
        let pool_gone = pools.get_opt("default").await?.is_none();
        let class_gone = class_api.get_opt("default").await?.is_none();
        Ok((pool_gone && class_gone).then_some(()))
    })
    .await?;
    assert_eq!(most_draining.get(), 1, "the pool's budget of one node at a time");
    for name in &leaving {
        let events = e2e.events("default", "NodeClaim", name).await?;
        assert!(
            events.iter().any(|e| e.reason.as_deref() == Some("DisruptionTerminating")
                && e.message.as_deref().is_some_and(|m| m.starts_with("NodePool default was deleted"))),
            "{name}: {events:?}"
        );
        let claim = e2e.store().claim(name).await?.context("a claim of the deleted pool")?;
        let disruption = claim.disruption.context("disrupted by the pool's deletion")?;
        assert_eq!(disruption.reason, dovetail_core::nodeclaim::Reason::NodePoolDeleted, "{}", disruption.message);
        assert_eq!(claim.phase, Phase::Terminated, "{name}");
    }
    let pods = e2e.running("shop", "app=api", 2).await?;
    for pod in &pods {
        let node = e2e.node(&node_of(pod)).await?;
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let pool = labels.get(dovetail_core::labels::NODEPOOL).map(String::as_str);
        assert_eq!(pool, Some("spare"), "{:?}", node.metadata.name);
    }
    Ok(())
}
