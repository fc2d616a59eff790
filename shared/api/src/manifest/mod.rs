//! Manifest files into an [`Inputs`] snapshot: what `dovetail plan` and `dovetail simulate` read
//! instead of a live cluster.
//!
//! Reads multi-document YAML or JSON with the kinds a placement decision depends on: Pod,
//! Deployment, ReplicaSet, StatefulSet, Job, CronJob, DaemonSet, Node, PersistentVolumeClaim,
//! PersistentVolume, StorageClass, PodDisruptionBudget, Namespace, PriorityClass, plus NodePool
//! and EC2NodeClass (`dovetail.dev/v1`, `karpenter.sh/v1`, `karpenter.k8s.aws/v1`) and NodeOverlay
//! (`dovetail.dev/v1alpha1`, `karpenter.sh/v1alpha1`), which are kept raw. `kind: List` documents
//! (`kubectl get -o yaml`) are read item by item. Other kinds
//! are skipped and listed in [`Inputs::skipped`].
//!
//! Controllers are expanded into the pods they would create (see `expand`), unless the input
//! already holds their pods, as a `kubectl get all -o yaml` dump does; then the real pods are
//! used and nothing is counted twice. Partially rolled-out controllers are not topped up.
//!
//! Input is bounded by [`dovetail_core::ceilings`]: each file's size is checked before it is read
//! and its object count while it is split, and the pods of the whole input (controllers' pods
//! counted from their `replicas` before any is made) are held to the pods-per-plan ceiling.

mod error;
mod expand;
mod objects;
mod read;
mod snapshot;

pub use error::{LoadError, LoadErrorKind};
pub(crate) use objects::{header, Header};
pub(crate) use read::{documents, Doc};
pub use read::{read_file_within, read_paths, STDIN_NAME};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use dovetail_core::ceilings::{OverCeiling, PODS_PER_PLAN};
use dovetail_core::model::{DaemonSet, Node, OwnerKind, Pod};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::convert::{
    daemonset_from_k8s, metadata, node_from_k8s, pod_from_k8s, pod_from_spec, provisionable, ConvertError,
    NotProvisionable, StorageIndex,
};
use expand::Expansion;
use objects::Object;

/// Where an object came from. `document` and `item` are 1-based (see [`LoadError`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Source {
    /// The path as given (a directory's files as `dir/name.yaml`), or [`STDIN_NAME`].
    pub file: String,
    pub document: usize,
    /// Position in a `List` document's `items`.
    pub item: Option<usize>,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.file, self.document)?;
        if let Some(i) = self.item {
            write!(f, ", item {i}")?;
        }
        Ok(())
    }
}

/// An object kept as read, with its origin so later conversions can report errors in place
/// (see [`LoadError::at`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Sourced<T> {
    pub source: Source,
    /// `Kind namespace/name`, or `Kind name` for cluster-scoped kinds.
    pub label: String,
    pub object: T,
}

/// A document of a kind the planner does not use (ConfigMap, Service, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub source: Source,
    pub api_version: String,
    pub kind: String,
    /// `namespace/name` when the document names a namespace, else `name`.
    pub name: String,
}

/// A pod in the input that is neither pending nor placed on a node of the input.
#[derive(Debug, Clone, PartialEq)]
pub struct IgnoredPod {
    pub pod: Pod,
    /// [`NotProvisionable::Bound`] here means bound to a node that is not in the input.
    pub reason: NotProvisionable,
}

/// Everything the files describe, converted to the core model where the core has a model.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// Pods waiting for capacity (Karpenter's provisionable pods, and pods of expanded
    /// controllers), in input order, with `volume_requirements` resolved.
    pub pending: Vec<Pod>,
    /// Nodes, in input order, each with the pods bound to it (`spec.nodeName`).
    pub nodes: Vec<Node>,
    pub daemonsets: Vec<DaemonSet>,
    /// Pods neither pending nor on an input node (DaemonSet pods without a node, finished,
    /// gated, bound to an unknown node, …).
    pub ignored: Vec<IgnoredPod>,
    /// Namespace → labels, for `namespaceSelector`s; `kubernetes.io/metadata.name` is always set,
    /// as the API server does.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pub pod_disruption_budgets: Vec<Sourced<PodDisruptionBudget>>,
    pub persistent_volume_claims: Vec<Sourced<core::PersistentVolumeClaim>>,
    pub persistent_volumes: Vec<Sourced<core::PersistentVolume>>,
    pub storage_classes: Vec<Sourced<StorageClass>>,
    pub priority_classes: Vec<Sourced<PriorityClass>>,
    /// NodePool documents as read (`dovetail.dev/v1` or `karpenter.sh/v1`).
    pub node_pools: Vec<Sourced<serde_json::Value>>,
    /// EC2NodeClass documents as read (`dovetail.dev/v1` or `karpenter.k8s.aws/v1`).
    pub node_classes: Vec<Sourced<serde_json::Value>>,
    /// NodeOverlay documents as read (`dovetail.dev/v1alpha1` or `karpenter.sh/v1alpha1`).
    pub node_overlays: Vec<Sourced<serde_json::Value>>,
    pub skipped: Vec<Skipped>,
}

/// Loads files, directories (their `*.yaml`, `*.yml`, `*.json`, sorted by name, not recursive)
/// and `-` (stdin), in the order given. All or nothing: the first problem is returned.
pub fn load<P: AsRef<Path>>(paths: &[P]) -> Result<Inputs, LoadError> {
    let texts = read::read_paths(paths)?;
    load_texts(texts.iter().map(|(n, t)| (n.as_str(), t.as_str())))
}

/// Loads one text as if it were a file called `name` (`.json` names are read as JSON, other
/// names by content).
pub fn load_str(name: &str, text: &str) -> Result<Inputs, LoadError> {
    load_texts([(name, text)])
}

/// Loads several named texts as one input, in order.
pub fn load_texts<'a>(texts: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Inputs, LoadError> {
    let mut objects = vec![];
    let mut inputs = Inputs::default();
    let mut seen: HashMap<(String, String, String), Source> = HashMap::new();
    for (name, text) in texts {
        for doc in read::documents(name, text)? {
            let header =
                objects::header(&doc).map_err(|(label, kind)| LoadError::at(&doc.source, label.as_deref(), kind))?;
            if !header.is_known() {
                let name = match &header.namespace {
                    Some(ns) => format!("{ns}/{}", header.name),
                    None => header.name.clone(),
                };
                inputs.skipped.push(Skipped {
                    source: doc.source.clone(),
                    api_version: header.api_version,
                    kind: header.kind,
                    name,
                });
                continue;
            }
            if let Some(id) = header.identity() {
                if let Some(first) = seen.get(&id) {
                    return Err(LoadError::at(
                        &doc.source,
                        Some(&header.label),
                        LoadErrorKind::Duplicate(first.to_string()),
                    ));
                }
                // Pods named only by generateName get distinct names later; no identity yet.
                let generated = doc.value.pointer("/metadata/name").and_then(|v| v.as_str()).is_none_or(str::is_empty);
                if !generated {
                    seen.insert(id, doc.source.clone());
                }
            }
            let object =
                objects::object(&header, &doc).map_err(|kind| LoadError::at(&doc.source, Some(&header.label), kind))?;
            if let Some((meta, rule)) = object.unconverted_metadata() {
                metadata(meta, rule).map_err(|e| LoadError::at(&doc.source, Some(&header.label), e))?;
            }
            objects.push((doc, header, object));
        }
    }
    Assembler::new(inputs).run(&objects)
}

/// Second pass: with every object read, convert and place.
struct Assembler {
    inputs: Inputs,
    storage: StorageIndex,
    node_index: HashMap<String, usize>,
    priority_values: HashMap<String, i32>,
    global_default_priority: Option<i32>,
    generated: HashMap<String, usize>,
    /// Pods so far (Pod objects and controllers' pods), held to [`PODS_PER_PLAN`].
    pods: u64,
}

type Entry = (Doc, Header, Object);

fn at<'a>(doc: &'a Doc, header: &'a Header) -> impl Fn(ConvertError) -> LoadError + 'a {
    move |e| LoadError::at(&doc.source, Some(&header.label), e)
}

fn sourced<T>(doc: &Doc, header: &Header, object: T) -> Sourced<T> {
    Sourced { source: doc.source.clone(), label: header.label.clone(), object }
}

fn controller_of(meta: &ObjectMeta) -> Option<(&str, &str)> {
    let r = meta.owner_references.iter().flatten().find(|r| r.controller == Some(true))?;
    Some((r.kind.as_str(), r.name.as_str()))
}

fn ns_of(meta: &ObjectMeta) -> String {
    meta.namespace.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| crate::convert::pod::DEFAULT_NAMESPACE.into())
}

/// Which controllers already have their pods (or their child objects) in the input, so their
/// expansion would count pods twice.
#[derive(Default)]
struct Present {
    /// (namespace, controller kind, controller name) of every input pod's controller.
    pod_owners: HashSet<(String, String, String)>,
    /// (namespace, Deployment) with a live ReplicaSet in the input, or pods that evidently came from
    /// one of its ReplicaSets (`<deployment>-<pod-template-hash>`).
    deployments: HashSet<(String, String)>,
    /// (namespace, CronJob) with a Job or Job pods in the input.
    cron_jobs: HashSet<(String, String)>,
}

impl Present {
    fn scan(objects: &[Entry]) -> Present {
        let mut p = Present::default();
        for (_, _, object) in objects {
            match object {
                Object::Pod(pod) => {
                    let Some((kind, owner)) = controller_of(&pod.metadata) else {
                        continue;
                    };
                    let ns = ns_of(&pod.metadata);
                    let hash = pod.metadata.labels.as_ref().and_then(|l| l.get("pod-template-hash"));
                    if kind == "ReplicaSet" {
                        if let Some(d) = hash.and_then(|h| owner.strip_suffix(&format!("-{h}"))) {
                            p.deployments.insert((ns.clone(), d.to_string()));
                        }
                    }
                    if kind == "Job" {
                        // CronJob Jobs are `<cronjob>-<scheduled minute>`.
                        if let Some((cron, stamp)) = owner.rsplit_once('-') {
                            if !stamp.is_empty() && stamp.bytes().all(|b| b.is_ascii_digit()) {
                                p.cron_jobs.insert((ns.clone(), cron.to_string()));
                            }
                        }
                    }
                    p.pod_owners.insert((ns, kind.to_string(), owner.to_string()));
                }
                Object::ReplicaSet(rs) => {
                    // An old ReplicaSet scaled to zero says nothing about the current one.
                    let scaled_down = rs.spec.as_ref().is_some_and(|s| s.replicas == Some(0));
                    if let (Some(("Deployment", d)), false) = (controller_of(&rs.metadata), scaled_down) {
                        p.deployments.insert((ns_of(&rs.metadata), d.to_string()));
                    }
                }
                Object::Job(j) => {
                    if let Some(("CronJob", c)) = controller_of(&j.metadata) {
                        p.cron_jobs.insert((ns_of(&j.metadata), c.to_string()));
                    }
                }
                _ => {}
            }
        }
        p
    }

    fn has_pods(&self, meta: &ObjectMeta, kind: &str) -> bool {
        let name = meta.name.clone().unwrap_or_default();
        self.pod_owners.contains(&(ns_of(meta), kind.to_string(), name))
    }

    fn has(&self, set: &HashSet<(String, String)>, meta: &ObjectMeta) -> bool {
        set.contains(&(ns_of(meta), meta.name.clone().unwrap_or_default()))
    }
}

impl Assembler {
    fn new(inputs: Inputs) -> Self {
        Assembler {
            inputs,
            storage: StorageIndex::new(),
            node_index: HashMap::new(),
            priority_values: HashMap::new(),
            global_default_priority: None,
            generated: HashMap::new(),
            pods: 0,
        }
    }

    fn run(mut self, objects: &[Entry]) -> Result<Inputs, LoadError> {
        // Everything pods refer to comes first: nodes, volumes, namespaces, priority classes.
        for (doc, header, object) in objects {
            let err = at(doc, header);
            match object {
                Object::Node(n) => {
                    self.node_index.insert(header.name.clone(), self.inputs.nodes.len());
                    self.inputs.nodes.push(node_from_k8s(n).map_err(err)?);
                }
                Object::Claim(c) => {
                    self.storage.add_claim(c).map_err(err)?;
                    self.inputs.persistent_volume_claims.push(sourced(doc, header, (**c).clone()));
                }
                Object::Volume(v) => {
                    self.storage.add_volume(v).map_err(err)?;
                    self.inputs.persistent_volumes.push(sourced(doc, header, (**v).clone()));
                }
                Object::StorageClass(c) => {
                    self.storage.add_class(c).map_err(err)?;
                    self.inputs.storage_classes.push(sourced(doc, header, (**c).clone()));
                }
                Object::Namespace(ns) => {
                    let mut labels = ns.metadata.labels.clone().unwrap_or_default();
                    labels.insert("kubernetes.io/metadata.name".into(), header.name.clone());
                    self.inputs.namespaces.insert(header.name.clone(), labels);
                }
                Object::PriorityClass(pc) => {
                    self.priority_values.insert(header.name.clone(), pc.value);
                    if pc.global_default == Some(true) {
                        self.global_default_priority = Some(pc.value);
                    }
                    self.inputs.priority_classes.push(sourced(doc, header, (**pc).clone()));
                }
                _ => {}
            }
        }
        let present = Present::scan(objects);
        for (doc, header, object) in objects {
            let err = at(doc, header);
            match object {
                Object::Pod(p) => {
                    self.count_pods(1).map_err(|e| LoadError::at(&doc.source, Some(&header.label), e))?;
                    self.pod(p).map_err(err)?
                }
                Object::Deployment(d) if !present.has(&present.deployments, &d.metadata) => {
                    self.expand(expand::deployment(d).map_err(&err)?).map_err(err)?
                }
                Object::ReplicaSet(rs) if !present.has_pods(&rs.metadata, "ReplicaSet") => {
                    self.expand(expand::replica_set(rs).map_err(&err)?).map_err(err)?
                }
                Object::StatefulSet(s) if !present.has_pods(&s.metadata, "StatefulSet") => {
                    self.expand(expand::stateful_set(s).map_err(&err)?).map_err(err)?
                }
                Object::Job(j) if !present.has_pods(&j.metadata, "Job") => {
                    self.expand(expand::job(j).map_err(&err)?).map_err(err)?
                }
                Object::CronJob(c) if !present.has(&present.cron_jobs, &c.metadata) => {
                    self.expand(expand::cron_job(c).map_err(&err)?).map_err(err)?
                }
                Object::DaemonSet(ds) => self.inputs.daemonsets.push(daemonset_from_k8s(ds).map_err(err)?),
                Object::Pdb(pdb) => self.inputs.pod_disruption_budgets.push(sourced(doc, header, (**pdb).clone())),
                Object::NodePool(v) => self.inputs.node_pools.push(sourced(doc, header, v.clone())),
                Object::NodeClass(v) => self.inputs.node_classes.push(sourced(doc, header, v.clone())),
                Object::NodeOverlay(v) => self.inputs.node_overlays.push(sourced(doc, header, v.clone())),
                _ => {}
            }
        }
        // Namespaces that pods use but no Namespace document declares still exist for selectors.
        let bound = self.inputs.nodes.iter().flat_map(|n| n.pods.iter().map(Arc::as_ref));
        let daemons = self.inputs.daemonsets.iter().map(|d| &d.pod);
        let ignored = self.inputs.ignored.iter().map(|i| &i.pod);
        let all = self.inputs.pending.iter().chain(bound).chain(daemons).chain(ignored);
        let used: Vec<String> = all.map(|p| p.namespace.clone()).collect();
        for ns in used {
            self.inputs
                .namespaces
                .entry(ns.clone())
                .or_insert_with(|| BTreeMap::from([("kubernetes.io/metadata.name".into(), ns)]));
        }
        Ok(self.inputs)
    }

    /// The API server's Priority admission for a pod that does not set `spec.priority`: the
    /// value of its PriorityClass from the input (built-in classes are resolved by `convert`),
    /// or the global default class when it names none.
    fn resolve_priority(&self, pod: &mut Pod, spec: &core::PodSpec) {
        if spec.priority.is_some() {
            return;
        }
        if let Some(v) = self.priority_values.get(&pod.priority_class) {
            pod.priority = *v;
        } else if pod.priority_class.is_empty() {
            if let Some(v) = self.global_default_priority {
                pod.priority = v;
            }
        }
    }

    fn pod(&mut self, k: &core::Pod) -> Result<(), ConvertError> {
        let mut pod = pod_from_k8s(k)?;
        let spec = k.spec.as_ref().expect("pod_from_k8s checked the spec");
        if k.metadata.name.as_deref().is_none_or(str::is_empty) {
            // generateName: the API server appends a random suffix; a counter keeps it stable.
            let n = self.generated.entry(format!("{}/{}", pod.namespace, pod.name)).or_insert(0);
            pod.name = format!("{}{n}", pod.name);
            *n += 1;
        }
        self.resolve_priority(&mut pod, spec);
        pod.volume_requirements = self.storage.pod_requirements(&pod.namespace, &pod.name, spec, &[]);
        let phase = k.status.as_ref().and_then(|s| s.phase.as_deref());
        if let Some(phase @ ("Succeeded" | "Failed")) = phase {
            // Finished pods hold no resources, wherever they ran.
            self.ignore(pod, NotProvisionable::Finished(phase.to_string()));
            return Ok(());
        }
        match provisionable(k) {
            Ok(()) => self.inputs.pending.push(pod),
            Err(NotProvisionable::Bound(node)) => self.bind(pod, node),
            Err(reason) => self.ignore(pod, reason),
        }
        Ok(())
    }

    fn bind(&mut self, pod: Pod, node: String) {
        match self.node_index.get(&node) {
            Some(&i) => self.inputs.nodes[i].pods.push(pod.into()),
            None => self.ignore(pod, NotProvisionable::Bound(node)),
        }
    }

    fn ignore(&mut self, pod: Pod, reason: NotProvisionable) {
        self.inputs.ignored.push(IgnoredPod { pod, reason });
    }

    /// Counts `n` more pods against [`PODS_PER_PLAN`], before they are made.
    fn count_pods(&mut self, n: usize) -> Result<(), OverCeiling> {
        PODS_PER_PLAN.check_total(self.pods, n as u64)?;
        self.pods += n as u64;
        Ok(())
    }

    fn expand(&mut self, e: Expansion<'_>) -> Result<(), ConvertError> {
        self.count_pods(e.count).map_err(|over| ConvertError::new(e.count_field.clone(), over))?;
        let path = e.template_path;
        let spec = e.template.spec.as_ref().ok_or_else(|| ConvertError::invalid(format!("{path}.spec"), "missing"))?;
        let tmeta = e.template.metadata.clone().unwrap_or_default();
        let meta = |name: &str, labels: &[(String, String)], annotations: &[(String, String)]| {
            let mut l = tmeta.labels.clone().unwrap_or_default();
            l.extend(labels.iter().cloned());
            let mut a = tmeta.annotations.clone().unwrap_or_default();
            a.extend(annotations.iter().cloned());
            ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(e.namespace.clone()),
                labels: Some(l),
                annotations: Some(a),
                ..Default::default()
            }
        };
        if e.count == 0 {
            // Nothing to create, but a broken template is still worth reporting.
            pod_from_spec(&meta(&e.owner.1, &[], &[]), spec).map_err(|err| err.within(path))?;
        }
        let gated = spec.scheduling_gates.as_ref().is_some_and(|g| !g.is_empty());
        for i in 0..e.count {
            let r = &e.replica(i);
            let mut pod =
                pod_from_spec(&meta(&r.name, &r.labels, &r.annotations), spec).map_err(|err| err.within(path))?;
            (pod.owner, pod.owner_name) = (e.owner.0, e.owner.1.clone());
            debug_assert!(pod.owner != OwnerKind::DaemonSet);
            self.resolve_priority(&mut pod, spec);
            pod.volume_requirements = self.storage.pod_requirements(&e.namespace, &r.name, spec, &r.claims);
            if gated {
                self.ignore(pod, NotProvisionable::SchedulingGated);
            } else if let Some(node) = pod.node_name.clone() {
                self.bind(pod, node);
            } else {
                self.inputs.pending.push(pod);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
