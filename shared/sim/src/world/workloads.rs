//! The controllers that own pods: ReplicaSets (for Deployments), StatefulSets and Jobs keep their
//! pod count, replacing pods that were evicted or lost with their node, as kube-controller-manager
//! does.

use std::collections::BTreeSet;
use std::time::Duration;

use rand::Rng;

use dovetail_core::model::{OwnerKind, Pod};
use dovetail_core::time::Time;

use super::{SimPod, State};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaKind {
    /// Through its ReplicaSet: replacements get new names at once.
    Deployment,
    ReplicaSet,
    /// Stable names `<name>-<ordinal>`: a replacement waits for its predecessor to be gone.
    StatefulSet,
}

/// A Job run: `parallelism` pods at a time until `completions` have succeeded, each running
/// `duration` once started. An evicted pod is started again from the beginning.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    pub parallelism: usize,
    pub completions: usize,
    pub duration: Duration,
    /// Run times vary uniformly up to this, when set.
    pub duration_max: Option<Duration>,
    pub succeeded: usize,
    pub submitted_at: Time,
    pub finished_at: Option<Time>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadKind {
    Replicas { kind: ReplicaKind, replicas: usize },
    Job(JobSpec),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// The pod every replica starts from (its name is the prefix of theirs).
    pub template: Pod,
    pub kind: WorkloadKind,
    /// Uids of its pods, stopping ones included.
    pub pods: BTreeSet<u64>,
    /// Pods created so far (the suffix of the next generated name).
    pub created: u64,
}

impl Workload {
    pub fn replicas(kind: ReplicaKind, template: Pod, replicas: usize) -> Workload {
        Workload { template, kind: WorkloadKind::Replicas { kind, replicas }, pods: BTreeSet::new(), created: 0 }
    }

    pub fn job(template: Pod, spec: JobSpec) -> Workload {
        Workload { template, kind: WorkloadKind::Job(spec), pods: BTreeSet::new(), created: 0 }
    }
}

impl State {
    /// Adds a controller and creates its pods.
    pub fn add_workload(&mut self, key: &str, workload: Workload) {
        self.kube.workloads.insert(key.to_string(), workload);
        self.reconcile_workload(key);
    }

    /// Submits a Job named `name` in the template's namespace from a template pod; its pods are
    /// `<name>-<n>` and carry the Job's name labels. Returns the workload key.
    pub fn submit_job(&mut self, template: &Pod, name: &str, mut spec: JobSpec) -> String {
        let mut pod = template.clone();
        pod.name = name.to_string();
        pod.owner = OwnerKind::Job;
        pod.owner_name = name.to_string();
        for label in ["job-name", "batch.kubernetes.io/job-name"] {
            if let Some(v) = pod.labels.get_mut(label) {
                *v = name.to_string();
            }
        }
        spec.submitted_at = self.now;
        let key = format!("Job/{}/{name}", pod.namespace);
        self.add_workload(&key, Workload::job(pod, spec));
        self.stats.jobs_submitted += 1;
        key
    }

    /// `kubectl scale`: a ReplicaSet or StatefulSet to `replicas`. Returns false for no such one.
    pub fn scale(&mut self, key: &str, replicas: usize) -> bool {
        match self.kube.workloads.get_mut(key).map(|w| &mut w.kind) {
            Some(WorkloadKind::Replicas { replicas: r, .. }) => *r = replicas,
            _ => return false,
        }
        self.reconcile_workload(key);
        true
    }

    /// Brings a controller's pods to what it wants: creates the missing ones; removes the extra
    /// ones, unscheduled first, then the youngest (the ReplicaSet's order).
    pub(super) fn reconcile_workload(&mut self, key: &str) {
        let Some(w) = self.kube.workloads.get(key) else { return };
        let active: Vec<&SimPod> =
            w.pods.iter().filter_map(|uid| self.kube.pods.get(uid)).filter(|p| !p.terminating).collect();
        let (want, runs) = match &w.kind {
            WorkloadKind::Replicas { replicas, .. } => (*replicas, None),
            WorkloadKind::Job(j) => {
                (j.parallelism.min(j.completions.saturating_sub(j.succeeded)), Some((j.duration, j.duration_max)))
            }
        };
        let have = active.len();
        if have > want {
            let mut extra: Vec<(bool, Time, String)> =
                active.iter().map(|p| (p.pod.node_name.is_some(), p.created_at(), p.pod.key())).collect();
            // Unbound first, then newest first.
            extra.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)));
            for (_, _, k) in extra.into_iter().take(have - want) {
                let grace = self.kube.pod(&k).map_or(0, |p| p.pod.termination_grace_seconds);
                self.stop_pod(&k, grace);
            }
            return;
        }
        for _ in have..want {
            let Some(name) = self.next_pod_name(key) else { break };
            let runs_for = runs.map(|(min, max)| match max {
                Some(max) if max > min => {
                    Duration::from_millis(self.rng.random_range(min.as_millis() as u64..=max.as_millis() as u64))
                }
                _ => min,
            });
            let Some(w) = self.kube.workloads.get_mut(key) else { return };
            w.created += 1;
            let mut pod = w.template.clone();
            pod.name = name;
            self.create_pod(pod, Some(key.to_string()), runs_for);
        }
        let now = self.now;
        if let Some(WorkloadKind::Job(j)) = self.kube.workloads.get_mut(key).map(|w| &mut w.kind) {
            if j.succeeded >= j.completions && j.finished_at.is_none() {
                j.finished_at = Some(now);
                self.stats.jobs_finished.push(now.since(j.submitted_at));
            }
        }
    }

    /// The name of the next pod, or `None` when a StatefulSet's free ordinal is still taken by a
    /// stopping pod.
    fn next_pod_name(&self, key: &str) -> Option<String> {
        let w = self.kube.workloads.get(key)?;
        let base = &w.template.name;
        match &w.kind {
            WorkloadKind::Replicas { kind: ReplicaKind::StatefulSet, replicas } => {
                let ns = &w.template.namespace;
                let free = (0..*replicas).find(|i| !self.kube.names.contains_key(&format!("{ns}/{base}-{i}")))?;
                Some(format!("{base}-{free}"))
            }
            _ => Some(format!("{base}-{}", w.created)),
        }
    }
}
