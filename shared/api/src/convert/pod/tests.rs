use super::*;
use dovetail_core::labels;

/// A Pod object from YAML, the way the tests read best.
fn parse(yaml: &str) -> k8s::Pod {
    serde_yaml_ng::from_str(yaml).expect("test pod parses")
}

fn convert(yaml: &str) -> Pod {
    pod_from_k8s(&parse(yaml)).expect("test pod converts")
}

fn convert_err(yaml: &str) -> String {
    pod_from_k8s(&parse(yaml)).expect_err("test pod must not convert").to_string()
}

const GI: i64 = 1 << 30;
const MI: i64 = 1 << 20;

#[test]
fn creation_and_start_times_are_kept() {
    let p = convert(
        "metadata: {name: web, namespace: shop, creationTimestamp: '2026-11-27T03:00:00Z'}\n\
         spec: {containers: [{name: app}]}\nstatus: {startTime: '2026-11-27T03:01:30Z'}\n",
    );
    let created = dovetail_core::time::Time::from_secs(1_795_748_400);
    assert_eq!(p.created_at, Some(created), "metadata.creationTimestamp");
    assert_eq!(p.started_at, Some(created.plus(std::time::Duration::from_secs(90))), "status.startTime");
    let bare = convert("metadata: {name: web}\nspec: {containers: [{name: app}]}\n");
    assert_eq!((bare.created_at, bare.started_at), (None, None));
}

#[test]
fn containers_add_up_and_take_a_pod_slot() {
    let p = convert(
        r#"
metadata: {name: web, namespace: shop}
spec:
  containers:
  - name: app
    resources: {requests: {cpu: 500m, memory: 1Gi}}
  - name: proxy
    resources: {requests: {cpu: "0.25", memory: 256Mi, nvidia.com/gpu: 1}}
"#,
    );
    assert_eq!(p.key(), "shop/web");
    assert_eq!(p.requests.cpu, 750);
    assert_eq!(p.requests.memory, GI + 256 * MI);
    assert_eq!(p.requests.get("nvidia.com/gpu"), 1);
    assert_eq!(p.requests.pods, 1);
    assert_eq!(p.termination_grace_seconds, 30);
    assert_eq!(p.node_affinity, vec![Requirements::new()]);
}

#[test]
fn init_containers_take_the_max_not_the_sum() {
    let p = convert(
        r#"
metadata: {name: migrate}
spec:
  initContainers:
  - name: schema
    resources: {requests: {cpu: "2", memory: 512Mi}}
  - name: warm
    resources: {requests: {cpu: "1", memory: 3Gi}}
  containers:
  - name: app
    resources: {requests: {cpu: "1", memory: 1Gi}}
  - name: log
    resources: {requests: {cpu: 100m, memory: 128Mi}}
"#,
    );
    assert_eq!(p.namespace, "default");
    // cpu: max(1 + 0.1, 2, 1) = 2; memory: max(1Gi + 128Mi, 512Mi, 3Gi) = 3Gi.
    assert_eq!(p.requests.cpu, 2000);
    assert_eq!(p.requests.memory, 3 * GI);
}

#[test]
fn sidecars_add_to_the_sum_and_to_later_init_containers() {
    let p = convert(
        r#"
metadata: {name: mesh}
spec:
  initContainers:
  - name: istio-proxy
    restartPolicy: Always
    resources: {requests: {cpu: 300m, memory: 256Mi}}
  - name: setup
    resources: {requests: {cpu: "2", memory: 64Mi}}
  containers:
  - name: app
    resources: {requests: {cpu: "1", memory: 1Gi}}
"#,
    );
    // Sum: app + sidecar = 1.3 cpu, 1Gi + 256Mi. Init peak: setup runs beside the sidecar,
    // 2 + 0.3 = 2.3 cpu, 64Mi + 256Mi. Max per resource.
    assert_eq!(p.requests.cpu, 2300);
    assert_eq!(p.requests.memory, GI + 256 * MI);
}

#[test]
fn init_container_before_the_sidecar_runs_alone() {
    let p = convert(
        r#"
metadata: {name: mesh}
spec:
  initContainers:
  - name: setup
    resources: {requests: {cpu: "2"}}
  - name: proxy
    restartPolicy: Always
    resources: {requests: {cpu: 500m}}
  containers:
  - name: app
    resources: {requests: {cpu: "1"}}
"#,
    );
    assert_eq!(p.requests.cpu, 2000);
}

#[test]
fn overhead_is_added_on_top() {
    let p = convert(
        r#"
metadata: {name: kata}
spec:
  runtimeClassName: kata
  overhead: {cpu: 250m, memory: 120Mi}
  initContainers:
  - name: big
    resources: {requests: {cpu: "4"}}
  containers:
  - name: app
    resources: {requests: {cpu: "1", memory: 1Gi}}
"#,
    );
    assert_eq!(p.requests.cpu, 4250);
    assert_eq!(p.requests.memory, GI + 120 * MI);
}

#[test]
fn limits_without_requests_default_the_request() {
    let p = convert(
        r#"
metadata: {name: capped}
spec:
  containers:
  - name: app
    resources:
      requests: {cpu: 200m}
      limits: {cpu: "1", memory: 2Gi, nvidia.com/gpu: "1"}
"#,
    );
    // The explicit cpu request wins; memory and the GPU default to their limits.
    assert_eq!(p.requests.cpu, 200);
    assert_eq!(p.requests.memory, 2 * GI);
    assert_eq!(p.requests.get("nvidia.com/gpu"), 1);
}

#[test]
fn pod_level_resources_replace_the_aggregate() {
    let p = convert(
        r#"
metadata: {name: pod-level}
spec:
  resources:
    requests: {cpu: "2"}
    limits: {memory: 4Gi}
  containers:
  - name: a
    resources: {requests: {cpu: 100m}}
  - name: b
"#,
    );
    assert_eq!(p.requests.cpu, 2000);
    assert_eq!(p.requests.memory, 4 * GI);
}

#[test]
fn bad_quantity_names_the_container_and_resource() {
    let e = convert_err(
        r#"
metadata: {name: typo}
spec:
  containers:
  - name: a
    resources: {requests: {memory: 1Gi}}
  - name: b
    resources: {requests: {memory: 12Gx}}
"#,
    );
    assert!(
        e.starts_with(r#"spec.containers[1].resources.requests.memory: "12Gx" is not a valid Kubernetes quantity"#),
        "{e}"
    );
    let e = convert_err("metadata: {name: x}\nspec:\n  initContainers:\n  - {name: i, resources: {limits: {cpu: -1}}}\n  containers: [{name: a}]\n");
    assert!(e.starts_with("spec.initContainers[0].resources.limits.cpu: \"-1\" must not be negative"), "{e}");
    let e = convert_err("metadata: {name: x}\nspec:\n  overhead: {cpu: lots}\n  containers: [{name: a}]\n");
    assert!(e.starts_with("spec.overhead.cpu: "), "{e}");
}

#[test]
fn absurd_amounts_are_refused_before_they_are_added_up() {
    // Two containers at 4Ei of memory each would overflow the pod's 64-bit sum.
    let e = convert_err(
        "metadata: {name: x}\nspec:\n  containers:\n  - {name: a, resources: {requests: {memory: 4Ei}}}\n  - {name: b, resources: {requests: {memory: 4Ei}}}\n",
    );
    assert_eq!(
        e,
        "spec.containers[0].resources.requests.memory: \"4Ei\" is more than the supported 1Pi (2^50 bytes, or 2^50 \
         millicores of cpu) per resource amount"
    );
    let e =
        convert_err("metadata: {name: x}\nspec:\n  containers: [{name: a, resources: {limits: {cpu: \"2e12\"}}}]\n");
    assert!(e.starts_with("spec.containers[0].resources.limits.cpu: \"2e12\" is more than the supported"), "{e}");
    // Malformed and out-of-range quantities come from the core's parser.
    let e =
        convert_err("metadata: {name: x}\nspec:\n  containers: [{name: a, resources: {requests: {cpu: \"1e99\"}}}]\n");
    assert_eq!(
        e,
        "spec.containers[0].resources.requests.cpu: \"1e99\" is not a valid Kubernetes quantity: exponent out of range"
    );
    // The largest real amounts pass: 32 TiB of memory, 1,000 cores.
    let big = convert(
        "metadata: {name: x}\nspec:\n  containers: [{name: a, resources: {requests: {memory: 32Ti, cpu: 1k}}}]\n",
    );
    assert_eq!((big.requests.memory, big.requests.cpu), (32 << 40, 1_000_000));
}

#[test]
fn node_selector_is_anded_into_every_affinity_term() {
    let p = convert(
        r#"
metadata: {name: pinned}
spec:
  nodeSelector:
    karpenter.sh/capacity-type: spot
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: kubernetes.io/arch, operator: In, values: [arm64]}
        - matchExpressions:
          - {key: kubernetes.io/arch, operator: In, values: [amd64]}
          - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["5"]}
        - matchFields:
          - {key: metadata.name, operator: In, values: [ip-10-0-3-4.ec2.internal]}
  containers: [{name: a}]
"#,
    );
    assert_eq!(p.node_affinity.len(), 3);
    for alt in &p.node_affinity {
        assert_eq!(alt.get(labels::CAPACITY_TYPE).unwrap().single_value(), Some("spot"));
    }
    assert_eq!(p.node_affinity[0].get(labels::ARCH).unwrap().single_value(), Some("arm64"));
    assert_eq!(p.node_affinity[1].get(labels::ARCH).unwrap().single_value(), Some("amd64"));
    assert!(p.node_affinity[1].get(labels::INSTANCE_GENERATION).unwrap().has("6"));
    assert!(!p.node_affinity[1].get(labels::INSTANCE_GENERATION).unwrap().has("5"));
    assert_eq!(p.node_affinity[2].get(labels::HOSTNAME).unwrap().single_value(), Some("ip-10-0-3-4.ec2.internal"));
}

#[test]
fn selector_and_affinity_on_the_same_key_intersect() {
    let p = convert(
        r#"
metadata: {name: zone}
spec:
  nodeSelector: {failure-domain.beta.kubernetes.io/zone: us-east-1a}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1b]}
  containers: [{name: a}]
"#,
    );
    // The deprecated key is normalized, so the two constraints collide: no zone is left.
    assert!(p.node_affinity[0].get(labels::ZONE).unwrap().is_empty());
}

#[test]
fn empty_required_terms_match_nothing_and_empty_preferences_are_dropped() {
    let p = convert(
        r#"
metadata: {name: nowhere}
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms: [{}]
      preferredDuringSchedulingIgnoredDuringExecution:
      - {weight: 10, preference: {}}
      - weight: 50
        preference:
          matchExpressions: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]
  containers: [{name: a}]
"#,
    );
    assert!(p.node_affinity.is_empty());
    assert_eq!(p.preferred_node_affinity.len(), 1);
    assert_eq!(p.preferred_node_affinity[0].weight, 50);
    let e = convert_err(
        "metadata: {name: x}\nspec:\n  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: []}}}\n  containers: [{name: a}]\n",
    );
    assert!(e.contains("nodeSelectorTerms: must have at least one"), "{e}");
}

#[test]
fn bad_affinity_operator_names_the_term() {
    let e = convert_err(
        r#"
metadata: {name: x}
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{key: a, operator: Equals, values: [b]}]
  containers: [{name: a}]
"#,
    );
    assert!(e.starts_with(
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: \"Equals\""
    ), "{e}");
}

#[test]
fn tolerations_convert_and_validate() {
    let p = convert(
        r#"
metadata: {name: t}
spec:
  tolerations:
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
  - {key: dedicated, value: ml}
  - {operator: Exists}
  containers: [{name: a}]
"#,
    );
    assert_eq!(p.tolerations.len(), 3);
    assert_eq!(p.tolerations[0].effect, Some(TaintEffect::NoSchedule));
    assert_eq!(p.tolerations[1].operator, TolerationOp::Equal);
    assert_eq!(p.tolerations[1].effect, None);
    assert!(p.tolerations[2].key.is_empty());
    let e = convert_err(
        "metadata: {name: t}\nspec:\n  tolerations: [{key: a, effect: NoScheduled}]\n  containers: [{name: a}]\n",
    );
    assert!(e.starts_with("spec.tolerations[0].effect: \"NoScheduled\" is not a valid taint effect"), "{e}");
}

#[test]
fn spread_defaults_and_match_label_keys_fold() {
    let p = convert(
        r#"
metadata:
  name: web-7d9c-0
  labels: {app: web, pod-template-hash: 7d9c}
spec:
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
    labelSelector: {matchLabels: {app: web}}
    matchLabelKeys: [pod-template-hash, not-on-pod]
  - maxSkew: 2
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    nodeTaintsPolicy: Honor
    minDomains: 3
  containers: [{name: a}]
"#,
    );
    let s = &p.topology_spread[0];
    assert_eq!(s.node_affinity_policy, InclusionPolicy::Honor);
    assert_eq!(s.node_taints_policy, InclusionPolicy::Ignore);
    assert_eq!(s.when_unsatisfiable, WhenUnsatisfiable::DoNotSchedule);
    let same = |hash: &str| {
        BTreeMap::from([("app".to_string(), "web".to_string()), ("pod-template-hash".to_string(), hash.to_string())])
    };
    assert!(s.selector.matches(&same("7d9c")));
    // A pod of an older ReplicaSet no longer counts towards the skew.
    assert!(!s.selector.matches(&same("5f6b")));
    assert_eq!(s.selector.match_expressions.len(), 1);
    let t = &p.topology_spread[1];
    assert_eq!(t.node_taints_policy, InclusionPolicy::Honor);
    assert_eq!(t.min_domains, Some(3));
    // No labelSelector: the constraint counts no pods.
    assert!(!t.selector.matches(&same("7d9c")));
    let e = convert_err("metadata: {name: s}\nspec:\n  topologySpreadConstraints: [{maxSkew: 0, topologyKey: z, whenUnsatisfiable: DoNotSchedule}]\n  containers: [{name: a}]\n");
    assert!(e.starts_with("spec.topologySpreadConstraints[0].maxSkew: 0 must be greater than zero"), "{e}");
}

#[test]
fn pod_affinity_scopes_and_label_keys() {
    let p = convert(
        r#"
metadata:
  name: api-0
  namespace: shop
  labels: {app: api, tenant: acme}
spec:
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {app: cache}}
        topologyKey: topology.kubernetes.io/zone
        matchLabelKeys: [tenant]
      - labelSelector: {matchLabels: {app: db}}
        namespaces: [data]
        topologyKey: topology.kubernetes.io/zone
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {app: api}}
        namespaceSelector: {}
        topologyKey: kubernetes.io/hostname
        mismatchLabelKeys: [tenant]
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 30
        podAffinityTerm:
          labelSelector: {matchLabels: {app: batch}}
          namespaceSelector: {matchLabels: {team: data}}
          namespaces: [jobs]
          topologyKey: kubernetes.io/hostname
  containers: [{name: a}]
"#,
    );
    let own = &p.pod_affinity[0];
    assert_eq!(own.namespaces, NamespaceScope::List(vec!["shop".into()]));
    let cache = |tenant: &str| {
        BTreeMap::from([("app".to_string(), "cache".to_string()), ("tenant".to_string(), tenant.to_string())])
    };
    assert!(own.selector.matches(&cache("acme")));
    assert!(!own.selector.matches(&cache("globex")));
    assert_eq!(p.pod_affinity[1].namespaces, NamespaceScope::List(vec!["data".into()]));

    let anti = &p.pod_anti_affinity[0];
    assert_eq!(anti.namespaces, NamespaceScope::All);
    let api = |tenant: &str| {
        BTreeMap::from([("app".to_string(), "api".to_string()), ("tenant".to_string(), tenant.to_string())])
    };
    // mismatchLabelKeys: only other tenants' api pods repel this one.
    assert!(!anti.selector.matches(&api("acme")));
    assert!(anti.selector.matches(&api("globex")));

    let pref = &p.preferred_pod_anti_affinity[0];
    assert_eq!(pref.weight, 30);
    match &pref.term.namespaces {
        NamespaceScope::Selector(sel, listed) => {
            assert_eq!(listed, &vec!["jobs".to_string()]);
            assert!(sel.matches(&BTreeMap::from([("team".to_string(), "data".to_string())])));
            assert!(pref.term.namespaces.contains("shop", "jobs", None));
        }
        other => panic!("expected a selector scope, got {other:?}"),
    }
    let e = convert_err("metadata: {name: a}\nspec:\n  affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {}, topologyKey: \"\"}]}}\n  containers: [{name: a}]\n");
    assert!(e.starts_with("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: must not be empty"), "{e}");
}

#[test]
fn host_ports_of_containers_and_sidecars() {
    let p = convert(
        r#"
metadata: {name: ports}
spec:
  initContainers:
  - name: setup
    ports: [{containerPort: 9000, hostPort: 9000}]
  - name: agent
    restartPolicy: Always
    ports: [{containerPort: 8126, hostPort: 8126, protocol: UDP}]
  containers:
  - name: app
    ports:
    - {containerPort: 8080}
    - {containerPort: 443, hostPort: 8443, hostIP: 10.0.0.1}
  - name: metrics
    ports: [{containerPort: 9100, hostPort: 9100}]
"#,
    );
    let ports: Vec<(i32, &str, &str)> =
        p.host_ports.iter().map(|h| (h.port, h.protocol.as_str(), h.ip.as_str())).collect();
    assert_eq!(ports, vec![(8443, "TCP", "10.0.0.1"), (9100, "TCP", ""), (8126, "UDP", "")]);

    let net = convert(
        "metadata: {name: n}\nspec:\n  hostNetwork: true\n  containers: [{name: a, ports: [{containerPort: 10250}]}]\n",
    );
    assert_eq!(net.host_ports[0].port, 10250);
}

#[test]
fn ownership_priority_and_grace() {
    let p = convert(
        r#"
metadata:
  name: web-abc
  ownerReferences:
  - {apiVersion: v1, kind: ConfigMap, name: cfg, uid: "1"}
  - {apiVersion: apps/v1, kind: ReplicaSet, name: web-5d4f8, uid: "2", controller: true}
spec:
  priorityClassName: system-cluster-critical
  terminationGracePeriodSeconds: 120
  nodeName: ip-10-0-1-1.ec2.internal
  containers: [{name: a}]
"#,
    );
    assert_eq!((p.owner, p.owner_name.as_str()), (OwnerKind::ReplicaSet, "web-5d4f8"));
    assert_eq!(p.priority, 2_000_000_000);
    assert_eq!(p.priority_class, "system-cluster-critical");
    assert_eq!(p.termination_grace_seconds, 120);
    assert_eq!(p.node_name.as_deref(), Some("ip-10-0-1-1.ec2.internal"));

    let mirror = convert("metadata:\n  name: kube-proxy-x\n  ownerReferences: [{apiVersion: v1, kind: Node, name: n1, uid: u, controller: true}]\nspec:\n  priority: 7\n  containers: [{name: a}]\n");
    assert!(mirror.is_mirror());
    assert_eq!(mirror.priority, 7);
}

#[test]
fn missing_name_or_spec_is_an_error() {
    assert_eq!(convert_err("metadata: {}\nspec: {containers: [{name: a}]}\n"), "metadata.name: missing");
    assert_eq!(convert_err("metadata: {name: a}\n"), "spec: missing");
    let generated = convert("metadata: {generateName: job-}\nspec: {containers: [{name: a}]}\n");
    assert_eq!(generated.name, "job-");
}

#[test]
fn a_pod_without_containers_is_refused() {
    assert_eq!(
        convert_err("metadata: {name: empty}\nspec: {containers: []}\n"),
        "spec.containers: must have at least one container"
    );
    // Init containers alone do not make a pod: it would never run.
    assert_eq!(
        convert_err("metadata: {name: init-only}\nspec:\n  initContainers: [{name: i}]\n  containers: []\n"),
        "spec.containers: must have at least one container"
    );
}
