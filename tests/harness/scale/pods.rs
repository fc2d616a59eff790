//! The pods the rig writes: Karpenter's benchmark mix (as `dovetail_core::benchmark::karpenter_pods`
//! builds it for `dovetail bench --suite karpenter-mix`: fifths of generic, zonal-spread,
//! hostname-spread, zonal self-affinity and hostname anti-affinity pods, with Karpenter's CPU and
//! memory choices), as the Kubernetes objects a Deployment's pods would be.
//!
//! Every pod is drawn from its own index, so the loader can write them in any order, many at a
//! time, without holding them all.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{json, Map, Value};

/// Karpenter's request choices (its `benchmark_test.go`).
const CPU_MILLIS: [i64; 5] = [100, 250, 500, 1000, 1500];
const MEMORY_MIB: [i64; 6] = [100, 256, 512, 1024, 2048, 4096];
const LABEL_VALUES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];
const ZONE: &str = "topology.kubernetes.io/zone";
const HOSTNAME: &str = "kubernetes.io/hostname";
/// The taint of the nodes the rig loads (see [`super::world`]): bound pods tolerate it, pending
/// pods do not, so pending pods need new capacity.
pub const FILLED_TAINT: &str = "scale.example.com/filled";
/// The label each burst of pending pods selects, with the burst's number: the `burst` pool leaves
/// it open (`Exists`), so each new node is labelled for the burst it was launched for and a later
/// burst needs capacity of its own, as a new workload would, rather than the room left in claims
/// still launching.
pub const BURST_LABEL: &str = "scale.example.com/burst";

/// Where a pod goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement<'a> {
    /// Bound to this node, tolerating the loaded nodes' taint.
    Bound(&'a str),
    /// Pending, in this burst.
    Pending(usize),
}

/// SplitMix64, seeded per pod: the same pod on every run, in any order.
struct Rng(u64);

impl Rng {
    fn for_pod(index: usize) -> Rng {
        Rng(0x5eed_0000_0000_0000 ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[(self.next() % from.len() as u64) as usize]
    }
}

/// Which fifth of the mix a pod is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Generic,
    ZonalSpread,
    HostnameSpread,
    ZonalAffinity,
    HostnameAntiAffinity,
}

impl Kind {
    /// The kind of pod `index` of `count`, in Karpenter's order: fifths, the remainder generic.
    pub fn of(index: usize, count: usize) -> Kind {
        match index.checked_div(count / 5).unwrap_or(0) {
            1 => Kind::ZonalSpread,
            2 => Kind::HostnameSpread,
            3 => Kind::ZonalAffinity,
            4 => Kind::HostnameAntiAffinity,
            _ => Kind::Generic,
        }
    }

    fn replicaset(self) -> (&'static str, &'static str) {
        match self {
            Kind::Generic => ("generic-5d4f8b7c9", "00000000-0000-4000-8000-000000000001"),
            Kind::ZonalSpread => ("zonal-spread-6c8d9f5b4", "00000000-0000-4000-8000-000000000002"),
            Kind::HostnameSpread => ("hostname-spread-7b9c6d4f8", "00000000-0000-4000-8000-000000000003"),
            Kind::ZonalAffinity => ("zonal-affinity-84f7c5d9b", "00000000-0000-4000-8000-000000000004"),
            Kind::HostnameAntiAffinity => ("anti-affinity-9d5b8c7f6", "00000000-0000-4000-8000-000000000005"),
        }
    }
}

/// A pod of `kind` in `namespace`, named `name`, its requests and labels drawn from `seed` (unique
/// per pod), placed as `placement` says. A bound hostname anti-affinity pod repels only itself:
/// the rig places bound pods round-robin, and Karpenter's selector (`app=nginx`) would make every
/// node that holds two of them a violation the core would see.
pub fn pod(namespace: &str, name: &str, seed: usize, kind: Kind, placement: Placement<'_>) -> Value {
    let mut rng = Rng::for_pod(seed);
    let (cpu, memory) = (rng.pick(&CPU_MILLIS), rng.pick(&MEMORY_MIB));
    let mut labels = Map::new();
    let mut spec = json!({
        "containers": [{
            "name": "app",
            "image": "registry.k8s.io/pause:3.10",
            "resources": { "requests": { "cpu": format!("{cpu}m"), "memory": format!("{memory}Mi") } },
        }],
    });
    let spread = |key: &str, value: &str| {
        json!([{
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": { "matchLabels": { "my-label": value } },
        }])
    };
    match kind {
        Kind::Generic => {
            labels.insert("my-label".into(), rng.pick(&LABEL_VALUES).into());
        }
        Kind::ZonalSpread | Kind::HostnameSpread => {
            labels.insert("my-label".into(), rng.pick(&LABEL_VALUES).into());
            let key = if kind == Kind::ZonalSpread { ZONE } else { HOSTNAME };
            spec["topologySpreadConstraints"] = spread(key, rng.pick(&LABEL_VALUES));
        }
        Kind::ZonalAffinity => {
            // Karpenter's spelling.
            let own = rng.pick(&LABEL_VALUES);
            labels.insert("my-affininity".into(), own.into());
            spec["affinity"] = json!({ "podAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": { "matchLabels": { "my-affininity": own } },
                "topologyKey": ZONE,
            }]}});
        }
        Kind::HostnameAntiAffinity => {
            let app = match placement {
                Placement::Bound(_) => format!("nginx-{seed}"),
                Placement::Pending(_) => "nginx".to_string(),
            };
            labels.insert("app".into(), app.clone().into());
            spec["affinity"] = json!({ "podAntiAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": { "matchLabels": { "app": app } },
                "topologyKey": HOSTNAME,
            }]}});
        }
    }
    match placement {
        Placement::Bound(node) => {
            spec["nodeName"] = node.into();
            spec["tolerations"] = json!([{ "key": FILLED_TAINT, "operator": "Exists", "effect": "NoSchedule" }]);
        }
        Placement::Pending(burst) => spec["nodeSelector"] = json!({ BURST_LABEL: burst.to_string() }),
    }
    let (replicaset, uid) = kind.replicaset();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": replicaset,
                "uid": uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": spec,
    })
}

/// How long the loaded cluster has run as it is: its pods started, and its claims last changed,
/// this long before the load.
pub const STEADY_FOR: std::time::Duration = std::time::Duration::from_secs(3600);

fn now() -> Value {
    serde_json::to_value(Time(k8s_openapi::jiff::Timestamp::now())).unwrap_or(Value::Null)
}

/// The status kube-scheduler writes on a pod no node takes (what makes it provisionable).
pub fn unschedulable(nodes: usize) -> Value {
    json!({ "status": { "conditions": [{
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": format!(
            "0/{nodes} nodes are available: {nodes} node(s) had untolerated taint {{{FILLED_TAINT}: true}}. \
             preemption: 0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling."
        ),
        "lastTransitionTime": now(),
    }]}})
}

/// The status a kubelet reports for a running pod (its size is part of what a list reads).
pub fn running(index: usize, node_ip: &str) -> Value {
    // Started an hour ago, as in a steady cluster (the claims' last pod event says the same).
    let at = serde_json::to_value(Time(k8s_openapi::jiff::Timestamp::now() - STEADY_FOR)).unwrap_or(Value::Null);
    let condition = |kind: &str| json!({ "type": kind, "status": "True", "lastTransitionTime": at });
    json!({ "status": {
        "phase": "Running",
        "conditions": [
            condition("PodReadyToStartContainers"),
            condition("Initialized"),
            condition("Ready"),
            condition("ContainersReady"),
            condition("PodScheduled"),
        ],
        "hostIP": node_ip,
        "hostIPs": [{ "ip": node_ip }],
        "podIP": pod_ip(index),
        "podIPs": [{ "ip": pod_ip(index) }],
        "startTime": at,
        "containerStatuses": [{
            "name": "app",
            "ready": true,
            "started": true,
            "restartCount": 0,
            "image": "registry.k8s.io/pause:3.10",
            "imageID": "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
            "containerID": format!("containerd://{index:064x}"),
            "state": { "running": { "startedAt": at } },
        }],
    }})
}

fn pod_ip(index: usize) -> String {
    format!("10.{}.{}.{}", 64 + (index >> 16) % 64, (index >> 8) & 255, index & 255)
}
