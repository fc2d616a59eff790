//! Controllers into the pods they would create, named the way the real controllers name them
//! (deterministically, so plans are reproducible): Deployment `web-<hash>-<i>`, ReplicaSet
//! `<rs>-<i>`, StatefulSet `db-0 … db-<n-1>`, Job `<job>-<i>`, CronJob `<cron>-<hash>-<i>`.

use dovetail_core::model::OwnerKind;
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::convert::pod::DEFAULT_NAMESPACE;
use crate::convert::{ConvertError, TemplateClaim};

/// One pod a controller creates: its name and what differs from the template.
#[derive(Debug, Clone)]
pub(crate) struct Replica {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub annotations: Vec<(String, String)>,
    pub claims: Vec<TemplateClaim>,
}

/// The pods of one controller: how many, and how to make the `i`th. Made one at a time, so the
/// count can be held to the pods ceiling before any pod is allocated.
pub(crate) struct Expansion<'a> {
    pub namespace: String,
    pub template: &'a PodTemplateSpec,
    /// Where `template` sits in the document (`spec.template`), for error paths.
    pub template_path: &'static str,
    pub owner: (OwnerKind, String),
    /// How many pods the controller runs, and the field that says so (`spec.replicas`).
    pub count: usize,
    pub count_field: String,
    replica: Box<dyn Fn(usize) -> Replica + 'a>,
}

impl Expansion<'_> {
    /// Pod `i` of `0..count`.
    pub fn replica(&self, i: usize) -> Replica {
        (self.replica)(i)
    }
}

/// The alphabet Kubernetes uses for generated names: no vowels (no accidental words) and no
/// look-alikes such as 0/o, 1/l.
const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A `pod-template-hash`-looking digest of a serializable value: FNV-32a of its JSON, its
/// decimal digits spelled in the safe alphabet, like the Deployment controller's encoding. Not
/// the same value as the real controller's (that one hashes Go's in-memory dump of the object),
/// but stable for the same template, which is what naming and `matchLabelKeys` need.
pub(crate) fn hash_of<T: serde::Serialize>(value: &T) -> String {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    dovetail_core::hash::fnv1a32(&bytes).to_string().bytes().map(|b| SAFE[b as usize % SAFE.len()] as char).collect()
}

fn name_and_namespace(meta: &ObjectMeta) -> Result<(String, String), ConvertError> {
    let name = meta.name.clone().filter(|n| !n.is_empty());
    let name = name.ok_or_else(|| ConvertError::invalid("metadata.name", "missing"))?;
    let ns = meta.namespace.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| DEFAULT_NAMESPACE.into());
    Ok((name, ns))
}

fn replicas(field: &'static str, value: Option<i32>) -> Result<usize, ConvertError> {
    match value {
        None => Ok(1),
        Some(n) if n >= 0 => Ok(n as usize),
        Some(n) => Err(ConvertError::invalid(field, format!("{n} must be greater than or equal to 0"))),
    }
}

fn missing(path: &str) -> ConvertError {
    ConvertError::invalid(path, "missing")
}

fn simple(name: String, labels: Vec<(String, String)>) -> Replica {
    Replica { name, labels, annotations: vec![], claims: vec![] }
}

/// A Deployment owns one ReplicaSet per template, `<deployment>-<pod-template-hash>`, whose pods
/// carry the `pod-template-hash` label (spreads with `matchLabelKeys: [pod-template-hash]`
/// depend on it).
pub(crate) fn deployment(d: &apps::Deployment) -> Result<Expansion<'_>, ConvertError> {
    let (name, namespace) = name_and_namespace(&d.metadata)?;
    let spec = d.spec.as_ref().ok_or_else(|| missing("spec"))?;
    let n = replicas("spec.replicas", spec.replicas)?;
    let hash = hash_of(&spec.template);
    let rs = format!("{name}-{hash}");
    let prefix = rs.clone();
    Ok(Expansion {
        namespace,
        template: &spec.template,
        template_path: "spec.template",
        owner: (OwnerKind::ReplicaSet, rs),
        count: n,
        count_field: "spec.replicas".into(),
        replica: Box::new(move |i| simple(format!("{prefix}-{i}"), vec![("pod-template-hash".into(), hash.clone())])),
    })
}

pub(crate) fn replica_set(rs: &apps::ReplicaSet) -> Result<Expansion<'_>, ConvertError> {
    let (name, namespace) = name_and_namespace(&rs.metadata)?;
    let spec = rs.spec.as_ref().ok_or_else(|| missing("spec"))?;
    let template = spec.template.as_ref().ok_or_else(|| missing("spec.template"))?;
    let n = replicas("spec.replicas", spec.replicas)?;
    let prefix = name.clone();
    Ok(Expansion {
        namespace,
        template,
        template_path: "spec.template",
        owner: (OwnerKind::ReplicaSet, name),
        count: n,
        count_field: "spec.replicas".into(),
        replica: Box::new(move |i| simple(format!("{prefix}-{i}"), vec![])),
    })
}

/// Pods `<name>-<ordinal>` from `spec.ordinals.start`, each with its own claims
/// `<template>-<pod>` from `volumeClaimTemplates`.
pub(crate) fn stateful_set(s: &apps::StatefulSet) -> Result<Expansion<'_>, ConvertError> {
    let (name, namespace) = name_and_namespace(&s.metadata)?;
    let spec = s.spec.as_ref().ok_or_else(|| missing("spec"))?;
    let n = replicas("spec.replicas", spec.replicas)?;
    let start = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0).max(0) as usize;
    let revision = format!("{name}-{}", hash_of(&spec.template));
    let mut templates = vec![];
    for (i, t) in spec.volume_claim_templates.iter().flatten().enumerate() {
        let tname = t.metadata.name.clone().filter(|n| !n.is_empty());
        let tname = tname.ok_or_else(|| missing(&format!("spec.volumeClaimTemplates[{i}].metadata.name")))?;
        templates.push((tname, t.spec.as_ref().and_then(|s| s.storage_class_name.clone())));
    }
    let prefix = name.clone();
    let replica = move |i: usize| {
        let ordinal = start + i;
        let pod = format!("{prefix}-{ordinal}");
        Replica {
            labels: vec![
                ("controller-revision-hash".into(), revision.clone()),
                ("statefulset.kubernetes.io/pod-name".into(), pod.clone()),
                ("apps.kubernetes.io/pod-index".into(), ordinal.to_string()),
            ],
            annotations: vec![],
            claims: templates
                .iter()
                .map(|(t, class)| TemplateClaim { claim_name: format!("{t}-{pod}"), storage_class: class.clone() })
                .collect(),
            name: pod,
        }
    };
    Ok(Expansion {
        namespace,
        template: &spec.template,
        template_path: "spec.template",
        owner: (OwnerKind::StatefulSet, name),
        count: n,
        count_field: "spec.replicas".into(),
        replica: Box::new(replica),
    })
}

/// The pods a Job runs at once: `parallelism` (default 1), at most `completions`; none when
/// suspended or already finished. Indexed Jobs label each pod with its completion index.
fn job_pods<'a>(
    namespace: String,
    job: String,
    uid: Option<&str>,
    spec: &'a batch::JobSpec,
    prefix: &'static str,
    template_path: &'static str,
) -> Result<Expansion<'a>, ConvertError> {
    let parallelism = match spec.parallelism {
        None => 1,
        Some(p) if p >= 0 => p as usize,
        Some(p) => {
            return Err(ConvertError::invalid(
                format!("{prefix}parallelism"),
                format!("{p} must be greater than or equal to 0"),
            ))
        }
    };
    let n = match spec.completions {
        Some(c) if c >= 0 => parallelism.min(c as usize),
        Some(c) => {
            return Err(ConvertError::invalid(
                format!("{prefix}completions"),
                format!("{c} must be greater than or equal to 0"),
            ))
        }
        None => parallelism,
    };
    let n = if spec.suspend == Some(true) { 0 } else { n };
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    let mut common =
        vec![("batch.kubernetes.io/job-name".to_string(), job.clone()), ("job-name".to_string(), job.clone())];
    if let Some(uid) = uid {
        common.push(("batch.kubernetes.io/controller-uid".into(), uid.to_string()));
        common.push(("controller-uid".into(), uid.to_string()));
    }
    let job_name = job.clone();
    let replica = move |i: usize| {
        let mut labels = common.clone();
        let mut annotations = vec![];
        if indexed {
            labels.push(("batch.kubernetes.io/job-completion-index".into(), i.to_string()));
            annotations.push(("batch.kubernetes.io/job-completion-index".into(), i.to_string()));
        }
        Replica { name: format!("{job_name}-{i}"), labels, annotations, claims: vec![] }
    };
    Ok(Expansion {
        namespace,
        template: &spec.template,
        template_path,
        owner: (OwnerKind::Job, job),
        count: n,
        count_field: format!("{prefix}parallelism"),
        replica: Box::new(replica),
    })
}

pub(crate) fn job(j: &batch::Job) -> Result<Expansion<'_>, ConvertError> {
    let (name, namespace) = name_and_namespace(&j.metadata)?;
    let spec = j.spec.as_ref().ok_or_else(|| missing("spec"))?;
    let mut e = job_pods(namespace, name, j.metadata.uid.as_deref(), spec, "spec.", "spec.template")?;
    // A Job a cluster dump shows as Complete or Failed runs nothing any more.
    let finished = j
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| matches!(c.type_.as_str(), "Complete" | "Failed") && c.status == "True");
    if finished {
        e.count = 0;
    }
    Ok(e)
}

/// One run of the CronJob's `jobTemplate` (none when suspended): a Job `<cron>-<hash>`.
pub(crate) fn cron_job(c: &batch::CronJob) -> Result<Expansion<'_>, ConvertError> {
    let (name, namespace) = name_and_namespace(&c.metadata)?;
    let spec = c.spec.as_ref().ok_or_else(|| missing("spec"))?;
    let job_spec = spec.job_template.spec.as_ref().ok_or_else(|| missing("spec.jobTemplate.spec"))?;
    let job = format!("{name}-{}", hash_of(&spec.job_template));
    let mut e = job_pods(namespace, job, None, job_spec, "spec.jobTemplate.spec.", "spec.jobTemplate.spec.template")?;
    if spec.suspend == Some(true) {
        e.count = 0;
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable_and_safe() {
        let a = hash_of(&serde_json::json!({"a": 1}));
        assert_eq!(a, hash_of(&serde_json::json!({"a": 1})));
        assert_ne!(a, hash_of(&serde_json::json!({"a": 2})));
        assert!(a.bytes().all(|b| SAFE.contains(&b)), "{a}");
        assert!(!a.is_empty() && a.len() <= 10);
    }

    #[test]
    fn job_parallelism_and_completions() {
        let j: batch::Job = serde_yaml_ng::from_str(
            "metadata: {name: etl, namespace: data}\nspec:\n  parallelism: 5\n  completions: 3\n  completionMode: Indexed\n  template: {spec: {containers: [{name: a}]}}\n",
        )
        .unwrap();
        let e = job(&j).unwrap();
        let names: Vec<String> = (0..e.count).map(|i| e.replica(i).name).collect();
        assert_eq!(names, ["etl-0", "etl-1", "etl-2"]);
        assert_eq!(e.count_field, "spec.parallelism");
        assert!(e.replica(2).labels.contains(&("batch.kubernetes.io/job-completion-index".into(), "2".into())));
        assert_eq!(e.owner, (OwnerKind::Job, "etl".to_string()));
    }
}
