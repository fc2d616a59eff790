//! The warm snapshot equals a fresh list. Random creates, updates and deletes of this test's
//! nodes, pods, PDBs, NodePools and namespace labels, with versions the server no longer keeps
//! (answered 410 Gone, as after etcd's compaction), dropped watches and process restarts
//! interleaved: after every few changes, each warm adapter's read of the test's objects must be
//! exactly what a new adapter lists. The control plane is shared, so only this test's objects
//! are compared (everything else may change under it at any time).
//!
//! `DOVETAIL_SNAPSHOT_STEPS` (default 30) sets the changes per seed; a long run is a soak:
//! `DOVETAIL_SNAPSHOT_STEPS=2000 cargo test -p dovetail-tests --test integration kube::snapshot`.

use anyhow::{Context, Result};
use dovetail_core::reconcile::ports::{Kube, KubeState};
use dovetail_kube::KubeAdapter;
use dovetail_tests::controlplane::ControlPlane;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;

use super::*;

/// splitmix64: a seeded, reproducible choice of the next change.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

/// What this test created and still exists.
#[derive(Default)]
struct World {
    nodes: Vec<String>,
    pods: Vec<String>,
    pdbs: Vec<String>,
    pools: Vec<String>,
    next: usize,
}

impl World {
    fn name(&mut self, ns: &str, what: &str) -> String {
        self.next += 1;
        format!("{ns}-{what}{}", self.next)
    }
}

fn pick(rng: &mut Rng, from: &[String]) -> Option<String> {
    (!from.is_empty()).then(|| from[rng.below(from.len())].clone())
}

/// One random change; returns what it did, for the failure message.
async fn change(admin: &Client, ns: &str, world: &mut World, rng: &mut Rng) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), ns);
    let nodes: Api<Node> = Api::all(admin.clone());
    let merge = PatchParams::default();
    Ok(match rng.below(12) {
        0 | 1 => {
            let name = world.name(ns, "n");
            test_node(admin, ns, &name[ns.len() + 1..], json!([])).await?;
            world.nodes.push(name.clone());
            format!("create node {name}")
        }
        2 => match pick(rng, &world.nodes) {
            Some(node) => {
                let patch = json!({ "metadata": { "labels": { "step": world.next.to_string() } } });
                nodes.patch(&node, &merge, &Patch::Merge(&patch)).await?;
                world.next += 1;
                format!("label node {node}")
            }
            None => "nothing".into(),
        },
        3 => match pick(rng, &world.nodes) {
            // Held by a finalizer: the node stays, being deleted, and its pods need a new home.
            Some(node) if rng.below(2) == 0 => {
                let hold = json!({ "metadata": { "finalizers": ["dovetail.dev/test-hold"] } });
                nodes.patch(&node, &merge, &Patch::Merge(&hold)).await?;
                nodes.delete(&node, &DeleteParams::default()).await?;
                format!("start deleting node {node}")
            }
            Some(node) => {
                let release = json!({ "metadata": { "finalizers": null } });
                nodes.patch(&node, &merge, &Patch::Merge(&release)).await?;
                gone(nodes.delete(&node, &DeleteParams::default()).await)?;
                world.nodes.retain(|n| *n != node);
                format!("delete node {node}")
            }
            None => "nothing".into(),
        },
        4..=6 => {
            let name = world.name(ns, "p");
            let cpu = ["100m", "250m", "1"][rng.below(3)];
            match pick(rng, &world.nodes) {
                Some(node) if rng.below(3) > 0 => {
                    // Bound at creation, as the scheduler would leave it.
                    create_pod(admin, &test_pod(ns, &name, cpu, json!({ "spec": { "nodeName": node } }))?).await?;
                }
                _ => {
                    // No scheduler picks it up (schedulerName): the test marks it Unschedulable
                    // itself, so nothing else changes it between the two reads.
                    let spec = json!({ "spec": { "schedulerName": "nobody" } });
                    create_pod(admin, &test_pod(ns, &name, cpu, spec)?).await?;
                    let status = json!({ "status": { "phase": "Pending", "conditions": [{
                        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                        "message": "0/1 nodes are available" }] } });
                    pods.patch_status(&name, &merge, &Patch::Merge(&status)).await?;
                }
            }
            world.pods.push(name.clone());
            format!("create pod {name}")
        }
        7 => match pick(rng, &world.pods) {
            Some(pod) => {
                let patch = json!({ "metadata": { "labels": { "step": world.next.to_string() } } });
                pods.patch(&pod, &merge, &Patch::Merge(&patch)).await?;
                world.next += 1;
                format!("label pod {pod}")
            }
            None => "nothing".into(),
        },
        8 => match pick(rng, &world.pods) {
            Some(pod) => {
                // A pod that finished leaves the read (and the watch, which filters on phase).
                let status = json!({ "status": { "phase": if rng.below(2) == 0 { "Succeeded" } else { "Running" } } });
                pods.patch_status(&pod, &merge, &Patch::Merge(&status)).await?;
                format!("set the phase of pod {pod}")
            }
            None => "nothing".into(),
        },
        9 => match pick(rng, &world.pods) {
            Some(pod) => {
                gone(pods.delete(&pod, &DeleteParams::default().grace_period(0)).await)?;
                world.pods.retain(|p| *p != pod);
                format!("delete pod {pod}")
            }
            None => "nothing".into(),
        },
        10 => {
            let pdbs: Api<PodDisruptionBudget> = Api::namespaced(admin.clone(), ns);
            match pick(rng, &world.pdbs) {
                Some(pdb) if rng.below(2) == 0 => {
                    gone(pdbs.delete(&pdb, &DeleteParams::default()).await)?;
                    world.pdbs.retain(|p| *p != pdb);
                    format!("delete pdb {pdb}")
                }
                _ => {
                    let name = world.name(ns, "pdb");
                    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
                        "metadata": { "name": name, "namespace": ns },
                        "spec": { "maxUnavailable": 1, "selector": { "matchLabels": { "app": name } } },
                    }))?;
                    pdbs.create(&PostParams::default(), &pdb).await?;
                    world.pdbs.push(name.clone());
                    format!("create pdb {name}")
                }
            }
        }
        _ => match pick(rng, &world.pools) {
            Some(pool) if rng.below(2) == 0 => {
                gone(nodepools(admin).delete(&pool, &DeleteParams::default()).await)?;
                world.pools.retain(|p| *p != pool);
                format!("delete nodepool {pool}")
            }
            _ if rng.below(3) == 0 => {
                let labels = json!({ "metadata": { "labels": { "step": world.next.to_string() } } });
                Api::<Namespace>::all(admin.clone()).patch(ns, &merge, &Patch::Merge(&labels)).await?;
                world.next += 1;
                format!("label namespace {ns}")
            }
            _ => {
                let name = world.name(ns, "pool");
                // One in three is invalid for Dovetail: it must be listed as such on both sides.
                let class = if rng.below(3) == 0 { "OtherClass" } else { "EC2NodeClass" };
                create_nodepool(admin, &name, class).await?;
                world.pools.push(name.clone());
                format!("create nodepool {name} ({class})")
            }
        },
    })
}

/// A delete (or release) that finds the object gone already did its job.
fn gone<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// The part of a read that is this test's: its namespace's objects, its nodes and pools.
fn ours(mut state: KubeState, ns: &str) -> KubeState {
    let prefix = format!("{ns}-");
    state.nodes.retain(|n| n.name.starts_with(&prefix));
    state.pending.retain(|p| p.namespace == ns);
    state.daemonsets.retain(|d| d.namespace == ns);
    state.pdbs.retain(|p| p.namespace == ns);
    state.nodepools.retain(|p| p.name.starts_with(&prefix));
    state.nodeclasses.retain(|c| c.name.starts_with(&prefix));
    state.volume_attachments.retain(|node, _| node.starts_with(&prefix));
    state.namespaces.retain(|name, _| name == ns);
    state.invalid.retain(|i| i.object.contains(ns));
    state.claim_objects.retain(|o| o.name.starts_with(&prefix));
    state
}

#[tokio::test]
async fn the_warm_snapshot_equals_a_fresh_list() -> Result<()> {
    let Fixture { admin, ns, adapter } = fixture("snapshot").await?;
    let control_plane = ControlPlane::shared();
    let client = functions_client(control_plane, &admin).await?;
    // Small pages: every list takes several round trips; every kind is caught up by watching,
    // however small.
    let warm = adapter.with_page_size(3).with_relist_below(0);
    // Every watch of this one breaks after one event: catch-ups resume again and again.
    let dropping = KubeAdapter::new(client.clone()).with_page_size(3).with_relist_below(0).with_watch_drops(1);
    // As deployed: kinds of up to a page are listed again, larger ones caught up.
    let deployed = KubeAdapter::new(client.clone());
    let steps: usize = std::env::var("DOVETAIL_SNAPSHOT_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(30);

    let mut world = World::default();
    let mut log: Vec<String> = Vec::new();
    for seed in [1u64, 2] {
        let mut rng = Rng(seed);
        // Whether the warm adapter's last read left it current (no injected fault since).
        let mut current = false;
        for step in 0..steps {
            let done = match rng.below(10) {
                0 => {
                    // Versions older than the server keeps: the next catch-up gets 410 and relists.
                    warm.set_versions("1").await;
                    current = false;
                    "versions expired (410 next)".to_string()
                }
                1 if step % 4 == 1 => {
                    warm.forget().await;
                    current = false;
                    "restart (snapshot forgotten)".to_string()
                }
                _ => change(&admin, &ns, &mut world, &mut rng).await?,
            };
            log.push(format!("seed {seed} step {step}: {done}"));
            if step % 3 != 2 && step + 1 != steps {
                continue;
            }
            let fresh = ours(KubeAdapter::new(client.clone()).read().await?, &ns);
            for (name, adapter) in [("warm", &warm), ("dropping", &dropping), ("deployed", &deployed)] {
                let mut got = ours(adapter.read().await.with_context(|| format!("{name} read"))?, &ns);
                let history = log.join("\n");
                // A snapshot that watched a pod leave its node knows when; a fresh list knows only
                // the pods still there: the warm time is never earlier, and otherwise the same.
                for (g, f) in got.nodes.iter_mut().zip(&fresh.nodes) {
                    assert!(g.last_pod_event >= f.last_pod_event, "{name}: {} lost a pod event\n{history}", g.name);
                    g.last_pod_event = f.last_pod_event;
                }
                assert_eq!(got, fresh, "the {name} snapshot differs from a fresh list after:\n{history}");
            }
            let counts = warm.last_read().await;
            if current {
                // A warm read lists nothing: it only watches. The control plane is shared with
                // the other tests, and under their load the server may drop a version from its
                // watch cache (410) or fail a catch-up, which relists that one kind: allowed once
                // per read, and then only that kind's objects are listed, never the cluster.
                assert!(counts.relists <= 1, "a warm read relisted {} kinds: {counts:?}", counts.relists);
                if counts.relists == 0 {
                    assert_eq!(counts.objects, 0, "a warm read without a relist listed: {counts:?}");
                }
                // A version check and a watch per kind, and a second watch when the first one's
                // bookmark was sent before the server's cache had reached the current version.
                assert!(counts.requests <= 12 * 3, "a version check and a watch or two per kind: {counts:?}");
            }
            current = true;
        }
    }

    // Leave no node held by the test's finalizer.
    let nodes: Api<Node> = Api::all(admin.clone());
    for node in &world.nodes {
        let release = json!({ "metadata": { "finalizers": null } });
        gone(nodes.patch(node, &PatchParams::default(), &Patch::Merge(&release)).await)?;
    }
    Ok(())
}
