//! Worlds the simulator's and the functions' tests start from.

use dovetail_core::model::{LabelSelector, NodeClass, NodePool, OwnerKind, Pod};
use dovetail_core::resources::Resources;

use crate::world::{IntOrPercent, PdbSpec, World, WorldConfig};

const GIB: i64 = 1 << 30;

/// A quiet world (no spot interruptions) with the NodePool and EC2NodeClass `default` and `pods`
/// pending pods of mixed sizes (0.25–2 CPU, 1–3 GiB) owned by a ReplicaSet: several claims' worth
/// of work for one provisioning pass.
pub fn pending(pods: usize) -> World {
    let w = World::new(WorldConfig { interruption_multiplier: 0.0, ..WorldConfig::default() });
    {
        let mut s = w.lock();
        s.kube.nodepools.push(NodePool::new("default", "default"));
        s.kube.nodeclasses.push(NodeClass { name: "default".into(), ..NodeClass::default() });
        for i in 0..pods {
            let cpu = [250, 500, 1000, 2000][i % 4];
            let mut p = Pod::new("shop", &format!("web-{i}"), Resources::new(cpu, (1 + (i as i64 % 3)) * GIB));
            p.owner = OwnerKind::ReplicaSet;
            s.create_pod(p, None, None);
        }
        s.settle();
    }
    w
}

/// Puts the pods of [`pending`]'s world (`shop`) under a PodDisruptionBudget that lets
/// `max_unavailable` of them be unavailable at a time (labelled `app: web`).
pub fn under_budget(w: &World, max_unavailable: i32) {
    let mut s = w.lock();
    for p in s.kube.pods.values_mut().filter(|p| p.pod.namespace == "shop") {
        p.pod.labels.insert("app".into(), "web".into());
    }
    s.kube.pdbs.push(PdbSpec {
        namespace: "shop".into(),
        name: "web".into(),
        selector: LabelSelector::from_labels(&[("app", "web")]),
        min_available: None,
        max_unavailable: Some(IntOrPercent::Int(max_unavailable)),
    });
}

/// An EventBridge spot warning for `instance`, as EC2 sends it.
pub fn spot_warning(instance: &str) -> String {
    serde_json::json!({
        "version": "0", "id": format!("warn-{instance}"), "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2", "account": "123456789012", "time": "2026-01-05T00:10:00Z", "region": "us-east-1",
        "resources": [format!("arn:aws:ec2:us-east-1a:instance/{instance}")],
        "detail": {"instance-id": instance, "instance-action": "terminate"}
    })
    .to_string()
}
