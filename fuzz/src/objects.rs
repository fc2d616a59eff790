//! Kubernetes objects as people write them: NodePools and EC2NodeClasses (Dovetail's and
//! Karpenter's), NodeOverlays, workloads and the other kinds `dovetail plan` reads. Every field
//! is either missing, of the right shape with a plausible or borderline value, or anything at all
//! ([`Slot`]), so one generated object exercises both the decoder and the validation behind it.

use arbitrary::Arbitrary;
use serde_json::{json, Map, Value};

use crate::tree::{Choice, Fragment, Tree, Word};

/// Words for the trees and mutations of every Kubernetes target.
pub const VOCABULARY: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "spec",
    "status",
    "template",
    "requirements",
    "key",
    "operator",
    "values",
    "minValues",
    "limits",
    "requests",
    "cpu",
    "memory",
    "pods",
    "nvidia.com/gpu",
    "disruption",
    "budgets",
    "nodes",
    "schedule",
    "duration",
    "reasons",
    "consolidateAfter",
    "consolidationPolicy",
    "expireAfter",
    "terminationGracePeriod",
    "nodeClassRef",
    "group",
    "taints",
    "startupTaints",
    "effect",
    "weight",
    "replicas",
    "containers",
    "resources",
    "nodeSelector",
    "tolerations",
    "affinity",
    "topologySpreadConstraints",
    "amiSelectorTerms",
    "alias",
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "tags",
    "role",
    "instanceProfile",
    "blockDeviceMappings",
    "ebs",
    "volumeSize",
    "kubelet",
    "maxPods",
    "userData",
    "items",
    "List",
    "NodePool",
    "EC2NodeClass",
    "NodeOverlay",
    "Pod",
    "Deployment",
    "In",
    "NotIn",
    "Exists",
    "Gt",
    "Lt",
    "NoSchedule",
    "NoExecute",
    "WhenEmpty",
    "WhenEmptyOrUnderutilized",
    "Never",
    "30s",
    "720h",
    "100m",
    "1Gi",
    "@daily",
    "al2023@latest",
    "dovetail.dev",
    "dovetail.dev/v1",
    "karpenter.sh/v1",
    "karpenter.k8s.aws/v1",
    "karpenter.sh/capacity-type",
    "spot",
    "on-demand",
    "kubernetes.io/arch",
    "amd64",
    "default",
    "",
];

pub const QUANTITIES: &[&str] =
    &["1", "100m", "64Gi", "1.5", "0", "-1", "1e3", "ten", "5GB", "1000000000000Ei", ".5", "0.0000000001"];
pub const DURATIONS: &[&str] = &["30s", "720h", "Never", "1h30m", "0s", "-5m", "1d", "1.5h", "", "9999999999h"];
pub const SCHEDULES: &[&str] = &["@daily", "0 9 * * mon-fri", "* * * * *", "61 * * * *", "@weekly", "*/15 0-6 * * *"];
pub const LABEL_KEYS: &[&str] = &[
    "karpenter.sh/capacity-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "topology.kubernetes.io/zone",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-generation",
    "dovetail.dev/nodepool",
    "karpenter.sh/nodepool",
    "kubernetes.io/hostname",
    "example.com/team",
    "bad key!",
    "",
];
pub const LABEL_VALUES: &[&str] =
    &["spot", "on-demand", "amd64", "arm64", "linux", "us-east-1a", "m5.large", "c", "4", "2", "x", "", "-bad-"];
pub const OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Equals"];
pub const EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute", "Sometimes"];
pub const RESOURCES: &[&str] = &["cpu", "memory", "pods", "nvidia.com/gpu", "ephemeral-storage", "bad name"];

/// A field: left out, of its shape, or anything.
#[derive(Debug, Arbitrary)]
pub enum Slot<T> {
    Missing,
    Shaped(T),
    Any(Fragment),
}

/// Sets `key` in `map` as the slot says.
pub fn set<T>(
    map: &mut Map<String, Value>,
    key: &str,
    slot: &Slot<T>,
    vocabulary: &[&str],
    shape: impl FnOnce(&T) -> Value,
) {
    match slot {
        Slot::Missing => {}
        Slot::Shaped(t) => {
            map.insert(key.into(), shape(t));
        }
        Slot::Any(f) => {
            map.insert(key.into(), f.value(vocabulary));
        }
    }
}

fn word(choice: &Choice, known: &[&str]) -> Value {
    choice.resolve(known, VOCABULARY).into()
}

fn object(build: impl FnOnce(&mut Map<String, Value>)) -> Value {
    let mut map = Map::new();
    build(&mut map);
    Value::Object(map)
}

fn pairs(list: &[(Choice, Choice)], keys: &[&str], values: &[&str]) -> Value {
    object(|m| {
        for (k, v) in list {
            m.insert(k.resolve(keys, VOCABULARY).into(), word(v, values));
        }
    })
}

#[derive(Debug, Arbitrary)]
pub struct Metadata {
    name: Slot<Word>,
    namespace: Slot<Word>,
    labels: Slot<Vec<(Choice, Choice)>>,
    annotations: Slot<Vec<(Choice, Choice)>>,
}

impl Metadata {
    fn value(&self) -> Value {
        let v = VOCABULARY;
        object(|m| {
            set(m, "name", &self.name, v, |w| w.resolve(&["default", "web", "gpu", "db", "x"]).into());
            set(m, "namespace", &self.namespace, v, |w| w.resolve(&["default", "shop", "kube-system"]).into());
            set(m, "labels", &self.labels, v, |l| pairs(l, LABEL_KEYS, LABEL_VALUES));
            set(m, "annotations", &self.annotations, v, |l| {
                pairs(
                    l,
                    &["dovetail.dev/node-repair", "sim.dovetail.dev/duration", "karpenter.sh/do-not-disrupt"],
                    &["true", "20m", "x"],
                )
            });
        })
    }
}

#[derive(Debug, Arbitrary)]
pub struct Requirement {
    key: Choice,
    operator: Choice,
    values: Slot<Vec<Choice>>,
    min_values: Slot<u8>,
}

fn requirements(list: &[Requirement]) -> Value {
    list.iter()
        .map(|r| {
            object(|m| {
                m.insert("key".into(), word(&r.key, LABEL_KEYS));
                m.insert("operator".into(), word(&r.operator, OPERATORS));
                set(m, "values", &r.values, VOCABULARY, |vs| vs.iter().map(|c| word(c, LABEL_VALUES)).collect());
                set(m, "minValues", &r.min_values, VOCABULARY, |n| json!(n % 64));
            })
        })
        .collect()
}

#[derive(Debug, Arbitrary)]
pub struct Taint {
    key: Choice,
    value: Slot<Choice>,
    effect: Choice,
}

fn taints(list: &[Taint]) -> Value {
    list.iter()
        .map(|t| {
            object(|m| {
                m.insert("key".into(), word(&t.key, LABEL_KEYS));
                set(m, "value", &t.value, VOCABULARY, |c| word(c, LABEL_VALUES));
                m.insert("effect".into(), word(&t.effect, EFFECTS));
            })
        })
        .collect()
}

#[derive(Debug, Arbitrary)]
pub struct Budget {
    nodes: Slot<Choice>,
    schedule: Slot<Choice>,
    duration: Slot<Choice>,
    reasons: Slot<Vec<Choice>>,
}

#[derive(Debug, Arbitrary)]
pub struct NodePool {
    karpenter: bool,
    metadata: Slot<Metadata>,
    weight: Slot<u8>,
    limits: Slot<Vec<(Choice, Choice)>>,
    policy: Slot<Choice>,
    consolidate_after: Slot<Choice>,
    budgets: Slot<Vec<Budget>>,
    template_metadata: Slot<Metadata>,
    node_class_ref: Slot<(Choice, Choice, Word)>,
    requirements: Slot<Vec<Requirement>>,
    taints: Slot<Vec<Taint>>,
    startup_taints: Slot<Vec<Taint>>,
    expire_after: Slot<Choice>,
    termination_grace_period: Slot<Choice>,
}

impl NodePool {
    pub fn value(&self) -> Value {
        let v = VOCABULARY;
        let mut disruption = Map::new();
        set(&mut disruption, "consolidationPolicy", &self.policy, v, |c| {
            word(c, &["WhenEmpty", "WhenEmptyOrUnderutilized", "WhenUnderutilized"])
        });
        set(&mut disruption, "consolidateAfter", &self.consolidate_after, v, |c| word(c, DURATIONS));
        set(&mut disruption, "budgets", &self.budgets, v, |bs| {
            bs.iter()
                .map(|b| {
                    object(|m| {
                        set(m, "nodes", &b.nodes, v, |c| word(c, &["10%", "0", "5", "100%", "ten%", "-1", "101%"]));
                        set(m, "schedule", &b.schedule, v, |c| word(c, SCHEDULES));
                        set(m, "duration", &b.duration, v, |c| word(c, DURATIONS));
                        set(m, "reasons", &b.reasons, v, |rs| {
                            rs.iter().map(|c| word(c, &["Empty", "Drifted", "Underutilized", "Expired"])).collect()
                        });
                    })
                })
                .collect()
        });
        let mut template_spec = Map::new();
        set(&mut template_spec, "nodeClassRef", &self.node_class_ref, v, |(group, kind, name)| {
            json!({"group": word(group, &["dovetail.dev", "karpenter.k8s.aws", "example.com"]),
                   "kind": word(kind, &["EC2NodeClass", "NodeClass"]), "name": name.resolve(&["default", "gpu"])})
        });
        set(&mut template_spec, "requirements", &self.requirements, v, |r| requirements(r));
        set(&mut template_spec, "taints", &self.taints, v, |t| taints(t));
        set(&mut template_spec, "startupTaints", &self.startup_taints, v, |t| taints(t));
        set(&mut template_spec, "expireAfter", &self.expire_after, v, |c| word(c, DURATIONS));
        set(&mut template_spec, "terminationGracePeriod", &self.termination_grace_period, v, |c| word(c, DURATIONS));
        let mut template = Map::new();
        set(&mut template, "metadata", &self.template_metadata, v, Metadata::value);
        template.insert("spec".into(), Value::Object(template_spec));
        let mut spec = Map::new();
        set(&mut spec, "weight", &self.weight, v, |w| json!(w));
        set(&mut spec, "limits", &self.limits, v, |l| pairs(l, RESOURCES, QUANTITIES));
        spec.insert("disruption".into(), Value::Object(disruption));
        spec.insert("template".into(), Value::Object(template));
        let mut doc = Map::new();
        doc.insert("apiVersion".into(), (if self.karpenter { "karpenter.sh/v1" } else { "dovetail.dev/v1" }).into());
        doc.insert("kind".into(), "NodePool".into());
        set(&mut doc, "metadata", &self.metadata, v, Metadata::value);
        doc.insert("spec".into(), Value::Object(spec));
        Value::Object(doc)
    }
}

#[derive(Debug, Arbitrary)]
pub struct SelectorTerm {
    tags: Slot<Vec<(Choice, Choice)>>,
    id: Slot<Choice>,
    name: Slot<Word>,
    alias: Slot<Choice>,
}

fn terms(list: &[SelectorTerm]) -> Value {
    let v = VOCABULARY;
    list.iter()
        .map(|t| {
            object(|m| {
                set(m, "tags", &t.tags, v, |l| pairs(l, &["karpenter.sh/discovery", "Name", "*"], &["prod", "*", ""]));
                set(m, "id", &t.id, v, |c| word(c, &["subnet-0abc", "sg-0abc", "ami-0abc", "bad"]));
                set(m, "name", &t.name, v, |w| w.resolve(v).into());
                set(m, "alias", &t.alias, v, |c| {
                    word(
                        c,
                        &[
                            "al2023@latest",
                            "al2023@v20240807",
                            "bottlerocket@latest",
                            "al2@latest",
                            "al2023",
                            "windows2022@latest",
                            "@",
                        ],
                    )
                });
            })
        })
        .collect()
}

/// Device name, volume size, volume type, IOPS.
#[derive(Debug, Arbitrary)]
pub struct BlockDevice(Choice, Slot<Choice>, Slot<Choice>, Slot<u16>);

#[derive(Debug, Arbitrary)]
pub struct EC2NodeClass {
    karpenter: bool,
    metadata: Slot<Metadata>,
    ami_selector_terms: Slot<Vec<SelectorTerm>>,
    subnet_selector_terms: Slot<Vec<SelectorTerm>>,
    security_group_selector_terms: Slot<Vec<SelectorTerm>>,
    role: Slot<Choice>,
    instance_profile: Slot<Choice>,
    block_device_mappings: Slot<Vec<BlockDevice>>,
    kubelet: Slot<Vec<(Choice, Fragment)>>,
    user_data: Slot<Word>,
    tags: Slot<Vec<(Choice, Choice)>>,
    extra: Slot<Tree>,
}

impl EC2NodeClass {
    pub fn value(&self) -> Value {
        let v = VOCABULARY;
        let mut spec = Map::new();
        set(&mut spec, "amiSelectorTerms", &self.ami_selector_terms, v, |t| terms(t));
        set(&mut spec, "subnetSelectorTerms", &self.subnet_selector_terms, v, |t| terms(t));
        set(&mut spec, "securityGroupSelectorTerms", &self.security_group_selector_terms, v, |t| terms(t));
        set(&mut spec, "role", &self.role, v, |c| word(c, &["KarpenterNodeRole-prod", ""]));
        set(&mut spec, "instanceProfile", &self.instance_profile, v, |c| {
            word(c, &["KarpenterNodeInstanceProfile", ""])
        });
        set(&mut spec, "blockDeviceMappings", &self.block_device_mappings, v, |list| {
            list.iter()
                .map(|BlockDevice(device, size, kind, iops)| {
                    let mut ebs = Map::new();
                    set(&mut ebs, "volumeSize", size, v, |c| word(c, &["100Gi", "20G", "0Gi", "100GB", "65T", "1Ti"]));
                    set(&mut ebs, "volumeType", kind, v, |c| word(c, &["gp3", "gp2", "io2", "floppy"]));
                    set(&mut ebs, "iops", iops, v, |n| json!(n));
                    json!({"deviceName": word(device, &["/dev/xvda", "/dev/xvdb", ""]), "ebs": ebs})
                })
                .collect()
        });
        set(&mut spec, "kubelet", &self.kubelet, v, |fields| {
            object(|m| {
                for (k, f) in fields {
                    let key = k.resolve(
                        &[
                            "maxPods",
                            "podsPerCore",
                            "systemReserved",
                            "kubeReserved",
                            "evictionHard",
                            "evictionSoft",
                            "evictionSoftGracePeriod",
                            "clusterDNS",
                            "imageGCHighThresholdPercent",
                            "cpuCFSQuota",
                        ],
                        v,
                    );
                    m.insert(key.into(), f.value(v));
                }
            })
        });
        set(&mut spec, "userData", &self.user_data, v, |w| w.resolve(crate::user_data::VOCABULARY).into());
        set(&mut spec, "tags", &self.tags, v, |l| {
            pairs(l, &["team", "karpenter.sh/nodepool", "kubernetes.io/cluster/x", "Name"], &["a", ""])
        });
        if let Slot::Shaped(extra) | Slot::Any(crate::tree::Fragment::Tree(extra)) = &self.extra {
            if let Value::Object(more) = extra.value(v) {
                for (k, value) in more {
                    spec.entry(k).or_insert(value);
                }
            }
        }
        let mut doc = Map::new();
        doc.insert(
            "apiVersion".into(),
            (if self.karpenter { "karpenter.k8s.aws/v1" } else { "dovetail.dev/v1" }).into(),
        );
        doc.insert("kind".into(), "EC2NodeClass".into());
        set(&mut doc, "metadata", &self.metadata, v, Metadata::value);
        doc.insert("spec".into(), Value::Object(spec));
        Value::Object(doc)
    }
}

/// Key, operator, effect.
#[derive(Debug, Arbitrary)]
pub struct Toleration(Slot<Choice>, Choice, Slot<Choice>);

#[derive(Debug, Arbitrary)]
pub struct Container {
    requests: Slot<Vec<(Choice, Choice)>>,
    limits: Slot<Vec<(Choice, Choice)>>,
}

/// A pod spec with what scheduling reads.
#[derive(Debug, Arbitrary)]
pub struct PodSpec {
    containers: Slot<Vec<Container>>,
    node_selector: Slot<Vec<(Choice, Choice)>>,
    tolerations: Slot<Vec<Toleration>>,
    affinity: Slot<Tree>,
    spread: Slot<Vec<(Slot<u8>, Choice, Choice)>>,
    node_name: Slot<Word>,
    priority_class: Slot<Word>,
    volumes: Slot<Tree>,
}

impl PodSpec {
    pub fn value(&self) -> Value {
        let v = VOCABULARY;
        object(|m| {
            set(m, "containers", &self.containers, v, |cs| {
                cs.iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let mut resources = Map::new();
                        set(&mut resources, "requests", &c.requests, v, |l| pairs(l, RESOURCES, QUANTITIES));
                        set(&mut resources, "limits", &c.limits, v, |l| pairs(l, RESOURCES, QUANTITIES));
                        json!({"name": format!("c{i}"), "image": "app", "resources": resources})
                    })
                    .collect()
            });
            set(m, "nodeSelector", &self.node_selector, v, |l| pairs(l, LABEL_KEYS, LABEL_VALUES));
            set(m, "tolerations", &self.tolerations, v, |ts| {
                ts.iter()
                    .map(|Toleration(key, op, effect)| {
                        object(|t| {
                            set(t, "key", key, v, |c| word(c, LABEL_KEYS));
                            t.insert("operator".into(), word(op, &["Equal", "Exists", "In"]));
                            set(t, "effect", effect, v, |c| word(c, EFFECTS));
                        })
                    })
                    .collect()
            });
            set(m, "affinity", &self.affinity, v, |t| t.value(v));
            set(m, "topologySpreadConstraints", &self.spread, v, |list| {
                list.iter()
                    .map(|(skew, key, when)| {
                        object(|c| {
                            set(c, "maxSkew", skew, v, |n| json!(n));
                            c.insert("topologyKey".into(), word(key, LABEL_KEYS));
                            c.insert(
                                "whenUnsatisfiable".into(),
                                word(when, &["DoNotSchedule", "ScheduleAnyway", "Never"]),
                            );
                            c.insert("labelSelector".into(), json!({"matchLabels": {"app": "web"}}));
                        })
                    })
                    .collect()
            });
            set(m, "nodeName", &self.node_name, v, |w| w.resolve(&["n1", "ip-10-0-0-1"]).into());
            set(m, "priorityClassName", &self.priority_class, v, |w| {
                w.resolve(&["high", "system-node-critical"]).into()
            });
            set(m, "volumes", &self.volumes, v, |t| t.value(v));
        })
    }
}

/// Controllers' replica counts: small, so a case stays small (the loader expands each
/// controller into its pods).
#[derive(Debug, Arbitrary)]
pub struct Count(u8);

impl Count {
    fn value(&self) -> Value {
        json!(self.0 % 20)
    }
}

/// One document of a manifest.
#[derive(Debug, Arbitrary)]
pub enum Document {
    NodePool(NodePool),
    EC2NodeClass(EC2NodeClass),
    Pod {
        metadata: Slot<Metadata>,
        spec: Slot<PodSpec>,
        pending: bool,
    },
    Workload {
        kind: Choice,
        metadata: Slot<Metadata>,
        replicas: Slot<Count>,
        spec: Slot<PodSpec>,
        schedule: Slot<Choice>,
    },
    /// Any other kind (NodeOverlay, Node, PersistentVolumeClaim, PodDisruptionBudget, …) with any body.
    Other {
        api_version: Choice,
        kind: Choice,
        metadata: Slot<Metadata>,
        spec: Slot<Tree>,
    },
    /// A `List` of documents.
    List(Vec<Document>),
}

const WORKLOADS: &[&str] = &["Deployment", "StatefulSet", "ReplicaSet", "Job", "CronJob", "DaemonSet"];
const OTHER_KINDS: &[&str] = &[
    "NodeOverlay",
    "Node",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "PodDisruptionBudget",
    "Namespace",
    "PriorityClass",
    "NodeClaim",
    "ConfigMap",
    "NodePool",
    "EC2NodeClass",
    "Pod",
];
const API_VERSIONS: &[&str] = &[
    "v1",
    "apps/v1",
    "batch/v1",
    "policy/v1",
    "storage.k8s.io/v1",
    "scheduling.k8s.io/v1",
    "karpenter.sh/v1",
    "karpenter.sh/v1alpha1",
    "karpenter.k8s.aws/v1",
    "dovetail.dev/v1",
    "karpenter.sh/v1beta1",
];

impl Document {
    pub fn value(&self) -> Value {
        let v = VOCABULARY;
        match self {
            Document::NodePool(p) => p.value(),
            Document::EC2NodeClass(c) => c.value(),
            Document::Pod { metadata, spec, pending } => object(|m| {
                m.insert("apiVersion".into(), "v1".into());
                m.insert("kind".into(), "Pod".into());
                set(m, "metadata", metadata, v, Metadata::value);
                set(m, "spec", spec, v, PodSpec::value);
                if *pending {
                    m.insert("status".into(), json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}));
                }
            }),
            Document::Workload { kind, metadata, replicas, spec, schedule } => {
                let kind = kind.resolve(WORKLOADS, v);
                let template = object(|t| {
                    t.insert("metadata".into(), json!({"labels": {"app": "web"}}));
                    set(t, "spec", spec, v, PodSpec::value);
                });
                let mut body = object(|s| {
                    set(s, "replicas", replicas, v, Count::value);
                    s.insert("selector".into(), json!({"matchLabels": {"app": "web"}}));
                    s.insert("template".into(), template);
                });
                if kind == "CronJob" {
                    let mut cron = object(|c| set(c, "schedule", schedule, v, |s| word(s, SCHEDULES)));
                    cron["jobTemplate"] = json!({ "spec": body });
                    body = cron;
                }
                let api = match kind {
                    "Job" | "CronJob" => "batch/v1",
                    _ => "apps/v1",
                };
                object(|m| {
                    m.insert("apiVersion".into(), api.into());
                    m.insert("kind".into(), kind.into());
                    set(m, "metadata", metadata, v, Metadata::value);
                    m.insert("spec".into(), body);
                })
            }
            Document::Other { api_version, kind, metadata, spec } => object(|m| {
                m.insert("apiVersion".into(), word(api_version, API_VERSIONS));
                m.insert("kind".into(), word(kind, OTHER_KINDS));
                set(m, "metadata", metadata, v, Metadata::value);
                set(m, "spec", spec, v, |t| t.value(v));
            }),
            Document::List(items) => {
                json!({"apiVersion": "v1", "kind": "List", "items": items.iter().map(Document::value).collect::<Vec<_>>()})
            }
        }
    }
}

/// Documents as YAML (`---` between them) or as a JSON stream.
pub fn render_documents(docs: &[Document], json: bool) -> String {
    crate::tree::write_documents(&docs.iter().map(Document::value).collect::<Vec<_>>(), json)
}

/// A file of documents: the generated input of the targets that read manifests.
#[derive(Debug, Arbitrary)]
pub struct Documents {
    docs: Vec<Document>,
    json: bool,
}

pub fn render(input: &Documents, _: &[&str]) -> String {
    render_documents(&input.docs, input.json)
}
