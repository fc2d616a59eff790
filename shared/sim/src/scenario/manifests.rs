//! A scenario's manifests into what the world runs: NodePools and EC2NodeClasses (validated and
//! converted by `dovetail-api`, as `dovetail plan` does), DaemonSets, PodDisruptionBudgets, and
//! one pod template per controller.
//!
//! Pod templates come from `dovetail-api`'s own controller expansion, so a simulated pod is
//! exactly the pod `dovetail plan` would see: the manifests are loaded a second time with every
//! controller scaled to one pod and its template annotated with the controller's key, and that one
//! pod becomes the template. The first load, of the text as written, reports any problem at the
//! right file, document and field.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

use dovetail_api::convert::label_selector;
use dovetail_api::manifest::{self, Inputs, LoadError};
use dovetail_core::model::{DaemonSet, NodeClass, NodePool, OwnerKind, Pod};
use dovetail_core::overlay::NodeOverlay;
use dovetail_core::time::cron::CronSchedule;
use dovetail_core::time::parse_duration;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{json, Value};

use crate::world::{IntOrPercent, PdbSpec, ReplicaKind};

/// Marks a template with the controller it came from, for the second load.
const WORKLOAD_ANNOTATION: &str = "sim.dovetail.dev/workload";
/// How long a Job's pods run once started (`20m`), on the Job, CronJob or pod template.
pub const DURATION_ANNOTATION: &str = "sim.dovetail.dev/duration";
/// The upper end when pods' run times vary (`40m`): each pod runs a uniform draw in between.
pub const DURATION_MAX_ANNOTATION: &str = "sim.dovetail.dev/duration-max";

/// A controller that keeps a number of pods.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaTemplate {
    pub kind: ReplicaKind,
    pub template: Pod,
    pub replicas: usize,
}

/// A Job (or a CronJob's job template) the timeline can submit.
#[derive(Debug, Clone, PartialEq)]
pub struct JobTemplate {
    pub template: Pod,
    pub parallelism: usize,
    pub completions: usize,
    pub duration: Option<Duration>,
    pub duration_max: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CronJobTemplate {
    pub schedule: CronSchedule,
    pub job: JobTemplate,
}

/// Everything the manifests put in the cluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cluster {
    pub nodepools: Vec<NodePool>,
    pub nodeclasses: Vec<NodeClass>,
    /// NodeOverlays: the functions price the catalog with them, as in a cluster.
    pub overlays: Vec<NodeOverlay>,
    pub daemonsets: Vec<DaemonSet>,
    pub pdbs: Vec<PdbSpec>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// `Deployment/ns/name`, `StatefulSet/ns/name`, `ReplicaSet/ns/name`.
    pub replicas: BTreeMap<String, ReplicaTemplate>,
    /// `ns/name` of each Job.
    pub jobs: BTreeMap<String, JobTemplate>,
    /// `ns/name` of each CronJob that is not suspended.
    pub cron_jobs: BTreeMap<String, CronJobTemplate>,
    /// Pods written as Pods: created at the start, never recreated.
    pub pods: Vec<Pod>,
}

/// Why the manifests cannot be simulated.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error(transparent)]
    Load(#[from] LoadError),
    /// `<object>: <field>: <message>`.
    #[error("{object}: {field}: {message}")]
    Field { object: String, field: String, message: String },
}

fn field(object: &str, field: &str, message: impl Into<String>) -> ManifestError {
    ManifestError::Field { object: object.to_string(), field: field.to_string(), message: message.into() }
}

/// The documents of one YAML text, as JSON values (empty documents dropped).
fn documents(name: &str, text: &str) -> Result<Vec<Value>, ManifestError> {
    let mut out = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        // The first load already reported syntax errors with positions; this only re-reads.
        let v = Value::deserialize(doc).map_err(|e| field(name, "(document)", e.to_string()))?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

fn meta_str<'a>(doc: &'a Value, key: &str) -> Option<&'a str> {
    doc.pointer(&format!("/metadata/{key}")).and_then(Value::as_str)
}

fn label(doc: &Value) -> String {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("?");
    let name = meta_str(doc, "name").unwrap_or("?");
    format!("{kind} {}/{name}", meta_str(doc, "namespace").unwrap_or("default"))
}

/// Sets the value at a JSON pointer (`~1` is `/` in a key), creating objects on the way.
fn set(doc: &mut Value, pointer: &str, value: Value) {
    let mut cur = doc;
    for part in pointer.trim_start_matches('/').split('/') {
        if !cur.is_object() {
            *cur = json!({});
        }
        let key = part.replace("~1", "/").replace("~0", "~");
        cur = cur.as_object_mut().expect("just made an object").entry(key).or_insert(Value::Null);
    }
    *cur = value;
}

fn count(doc: &Value, pointer: &str, default: usize, object: &str) -> Result<usize, ManifestError> {
    match doc.pointer(pointer) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v.as_u64().map(|n| n as usize).ok_or_else(|| {
            field(object, pointer.trim_start_matches('/').replace('/', ".").as_str(), format!("{v} is not a count"))
        }),
    }
}

/// The run time annotations of a Job, looked up on the object, then its pod template.
fn durations(doc: &Value, template: &str, object: &str) -> Result<(Option<Duration>, Option<Duration>), ManifestError> {
    let get = |key: &str| -> Result<Option<Duration>, ManifestError> {
        let escaped = key.replace('/', "~1");
        let found = [format!("/metadata/annotations/{escaped}"), format!("{template}/metadata/annotations/{escaped}")]
            .into_iter()
            .find_map(|p| doc.pointer(&p).map(|v| (p, v.clone())));
        let Some((p, v)) = found else { return Ok(None) };
        let path = p.trim_start_matches('/').replace("~1", "/").replace('/', ".");
        let s = v.as_str().ok_or_else(|| field(object, &path, "must be a duration string such as 20m"))?;
        parse_duration(s).map(Some).map_err(|e| field(object, &path, e.to_string()))
    };
    Ok((get(DURATION_ANNOTATION)?, get(DURATION_MAX_ANNOTATION)?))
}

struct Controller {
    key: String,
    kind: &'static str,
    replicas: usize,
    parallelism: usize,
    completions: usize,
    durations: (Option<Duration>, Option<Duration>),
    schedule: Option<CronSchedule>,
}

/// Loads the manifest texts (`(name, text)` pairs, names as errors should show them).
pub fn load(texts: &[(String, String)]) -> Result<Cluster, ManifestError> {
    let inputs = manifest::load_texts(texts.iter().map(|(n, t)| (n.as_str(), t.as_str())))?;
    let snapshot = inputs.snapshot()?;
    let mut cluster = Cluster {
        nodepools: snapshot.nodepools,
        nodeclasses: snapshot.nodeclasses,
        overlays: inputs.overlays()?,
        daemonsets: inputs.daemonsets.clone(),
        namespaces: inputs.namespaces.clone(),
        ..Cluster::default()
    };
    if let Some(n) = inputs.nodes.first() {
        return Err(field(
            &format!("Node {}", n.name),
            "kind",
            "Node objects are not simulated: capacity comes from the NodePools (and, for \
             --compare, clusterAutoscaler.nodeGroups)",
        ));
    }
    cluster.pdbs = pdbs(&inputs)?;

    let mut controllers = Vec::new();
    let mut second = Vec::new();
    for (name, text) in texts {
        let mut docs = documents(name, text)?;
        for doc in &mut docs {
            if let Some(c) = controller(doc)? {
                controllers.push(c);
            }
        }
        let joined: Vec<String> =
            docs.iter().map(|d| serde_yaml_ng::to_string(d).expect("JSON values serialize as YAML")).collect();
        second.push((name.clone(), joined.join("---\n")));
    }
    let expanded = manifest::load_texts(second.iter().map(|(n, t)| (n.as_str(), t.as_str())))?;
    let mut templates: BTreeMap<String, Pod> = BTreeMap::new();
    for pod in expanded.pending.iter().chain(expanded.ignored.iter().map(|i| &i.pod)) {
        let mut pod = pod.clone();
        let Some(key) = pod.annotations.remove(WORKLOAD_ANNOTATION) else { continue };
        pod.name = match pod.owner {
            // Deployment pods are named after their ReplicaSet, `<deployment>-<hash>`.
            OwnerKind::ReplicaSet => pod.owner_name.clone(),
            // StatefulSet pods after the set; Job runs get their own names when submitted.
            _ => key.rsplit('/').next().unwrap_or_default().to_string(),
        };
        templates.entry(key).or_insert(pod);
    }
    for c in controllers {
        let Some(template) = templates.remove(&c.key) else {
            // Scheduling gates or a finished status keep a controller from creating pods.
            continue;
        };
        let job = || JobTemplate {
            template: template.clone(),
            parallelism: c.parallelism,
            completions: c.completions,
            duration: c.durations.0,
            duration_max: c.durations.1,
        };
        let (kind, rest) = c.key.split_once('/').expect("keys are Kind/ns/name");
        match (c.kind, &c.schedule) {
            ("Job", _) => {
                cluster.jobs.insert(rest.to_string(), job());
            }
            ("CronJob", Some(schedule)) => {
                cluster.cron_jobs.insert(rest.to_string(), CronJobTemplate { schedule: *schedule, job: job() });
            }
            ("CronJob", None) => {}
            _ => {
                let kind = match kind {
                    "StatefulSet" => ReplicaKind::StatefulSet,
                    "ReplicaSet" => ReplicaKind::ReplicaSet,
                    _ => ReplicaKind::Deployment,
                };
                cluster.replicas.insert(c.key.clone(), ReplicaTemplate { kind, template, replicas: c.replicas });
            }
        }
    }
    cluster.pods = inputs.pending.iter().filter(|p| p.owner == OwnerKind::None).cloned().collect();
    Ok(cluster)
}

/// Notes a controller and rewrites it to create one annotated pod.
fn controller(doc: &mut Value) -> Result<Option<Controller>, ManifestError> {
    let kind = match doc.get("kind").and_then(Value::as_str) {
        Some("Deployment") => "Deployment",
        Some("StatefulSet") => "StatefulSet",
        Some("ReplicaSet") => "ReplicaSet",
        Some("Job") => "Job",
        Some("CronJob") => "CronJob",
        _ => return Ok(None),
    };
    let object = label(doc);
    let ns = meta_str(doc, "namespace").filter(|n| !n.is_empty()).unwrap_or("default").to_string();
    let name = meta_str(doc, "name").unwrap_or_default().to_string();
    let key = format!("{kind}/{ns}/{name}");
    let (spec, template) = match kind {
        "CronJob" => ("/spec/jobTemplate/spec", "/spec/jobTemplate/spec/template"),
        _ => ("/spec", "/spec/template"),
    };
    let replicas = count(doc, "/spec/replicas", 1, &object)?;
    let parallelism = count(doc, &format!("{spec}/parallelism"), 1, &object)?;
    let completions = count(doc, &format!("{spec}/completions"), parallelism, &object)?;
    let durations = durations(doc, template, &object)?;
    let mut schedule = None;
    if kind == "CronJob" {
        let text = doc.pointer("/spec/schedule").and_then(Value::as_str).unwrap_or_default();
        let parsed = CronSchedule::parse(text).map_err(|e| field(&object, "spec.schedule", e.to_string()))?;
        let suspended = doc.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
        schedule = (!suspended).then_some(parsed);
        set(doc, "/spec/suspend", json!(false));
    }
    match kind {
        "Job" | "CronJob" => {
            set(doc, &format!("{spec}/parallelism"), json!(1));
            set(doc, &format!("{spec}/completions"), json!(1));
            if let Some(m) = doc.as_object_mut() {
                m.remove("status");
            }
        }
        _ => set(doc, "/spec/replicas", json!(1)),
    }
    let escaped = WORKLOAD_ANNOTATION.replace('/', "~1");
    set(doc, &format!("{template}/metadata/annotations/{escaped}"), json!(key));
    Ok(Some(Controller { key, kind, replicas, parallelism, completions, durations, schedule }))
}

fn int_or_percent(v: &IntOrString, object: &str, path: &str) -> Result<IntOrPercent, ManifestError> {
    match v {
        IntOrString::Int(n) => Ok(IntOrPercent::Int(*n)),
        IntOrString::String(s) => s
            .strip_suffix('%')
            .and_then(|p| p.trim().parse::<i32>().ok())
            .filter(|p| (0..=100).contains(p))
            .map(IntOrPercent::Percent)
            .ok_or_else(|| field(object, path, format!("{s:?} is neither a count nor a percentage like \"50%\""))),
    }
}

fn pdbs(inputs: &Inputs) -> Result<Vec<PdbSpec>, ManifestError> {
    let mut out = Vec::new();
    for s in &inputs.pod_disruption_budgets {
        let pdb = &s.object;
        let object = s.label.clone();
        let spec = pdb.spec.clone().unwrap_or_default();
        let selector = match &spec.selector {
            Some(sel) => label_selector(sel).map_err(|e| field(&object, "spec.selector", e.to_string()))?,
            None => return Err(field(&object, "spec.selector", "missing")),
        };
        let min_available =
            spec.min_available.as_ref().map(|v| int_or_percent(v, &object, "spec.minAvailable")).transpose()?;
        let max_unavailable =
            spec.max_unavailable.as_ref().map(|v| int_or_percent(v, &object, "spec.maxUnavailable")).transpose()?;
        if min_available.is_some() && max_unavailable.is_some() {
            return Err(field(&object, "spec", "minAvailable and maxUnavailable are mutually exclusive"));
        }
        out.push(PdbSpec {
            namespace: pdb.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
            name: pdb.metadata.name.clone().unwrap_or_default(),
            selector,
            min_available,
            max_unavailable,
        });
    }
    Ok(out)
}
