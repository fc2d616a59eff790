//! Pod → core [`Pod`]: effective requests, node constraints, tolerations, spreads, affinities,
//! host ports and ownership, as kube-scheduler reads them.

use std::collections::BTreeMap;

use dovetail_core::ceilings::{MAX_RESOURCE_AMOUNT, MAX_RESOURCE_AMOUNT_TEXT};
use dovetail_core::model::{
    HostPort, InclusionPolicy, LabelSelector, NamespaceScope, OwnerKind, Pod, PodAffinityTerm, SelectorExpr,
    SelectorOp, TaintEffect, Toleration, TolerationOp, TopologySpread, Weighted, WhenUnsatisfiable,
};
use dovetail_core::requirements::{Requirement, Requirements};
use dovetail_core::resources::{self, parse_cpu_millis, parse_units, Resources};
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::selector::{is_empty_selector, is_empty_term, label_selector, matches_nothing, node_selector_term};
use super::{ConvertError, Within};
use crate::crd::labels::{check_label_value, check_qualified_name};
use crate::crd::meta::NameRule;

/// Namespace of an object that does not name one; what kubectl uses without `-n`.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Grace period the API server defaults `terminationGracePeriodSeconds` to.
pub const DEFAULT_TERMINATION_GRACE_SECONDS: i64 = 30;

/// Values of the two built-in PriorityClasses; the API server's Priority admission fills
/// `spec.priority` from them, which a manifest file never went through.
pub fn builtin_priority(class: &str) -> Option<i32> {
    match class {
        "system-node-critical" => Some(2_000_001_000),
        "system-cluster-critical" => Some(2_000_000_000),
        _ => None,
    }
}

/// Converts a whole Pod object. `metadata.name` (or `generateName`) and `spec` are required.
pub fn pod_from_k8s(pod: &k8s::Pod) -> Result<Pod, ConvertError> {
    let spec = pod.spec.as_ref().ok_or_else(|| ConvertError::invalid("spec", "missing"))?;
    if pod.metadata.name.as_deref().unwrap_or_default().is_empty()
        && pod.metadata.generate_name.as_deref().unwrap_or_default().is_empty()
    {
        return Err(ConvertError::invalid("metadata.name", "missing"));
    }
    let mut out = pod_from_spec(&pod.metadata, spec)?;
    out.started_at = pod.status.as_ref().and_then(|s| s.start_time.as_ref()).map(super::time);
    out.created_at = pod.metadata.creation_timestamp.as_ref().map(super::time);
    Ok(out)
}

/// Converts a pod from its metadata and spec (also a controller's pod template, whose errors the
/// caller prefixes with `spec.template`). Error paths start at `spec.` / `metadata.`.
///
/// `volume_requirements` is left empty: it needs the PVCs, PVs and StorageClasses around the pod,
/// see [`super::volumes::StorageIndex`].
pub fn pod_from_spec(meta: &ObjectMeta, spec: &k8s::PodSpec) -> Result<Pod, ConvertError> {
    let namespace = meta.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or(DEFAULT_NAMESPACE);
    let name = match meta.name.as_deref() {
        Some(n) if !n.is_empty() => n,
        _ => meta.generate_name.as_deref().unwrap_or_default(),
    };
    super::metadata(meta, NameRule::Subdomain)?;
    // The API server refuses such a pod, so none exists in a cluster; one in a manifest would be
    // planned for as if it needed nothing but its pod slot.
    if spec.containers.is_empty() {
        return Err(ConvertError::invalid("spec.containers", "must have at least one container"));
    }
    let mut pod = Pod::new(namespace, name, Resources::default());
    pod.labels = meta.labels.clone().unwrap_or_default();
    pod.annotations = meta.annotations.clone().unwrap_or_default();
    pod.requests = effective_requests(spec).within(|| "spec".into())?;

    let affinity = spec.affinity.as_ref();
    let node_affinity = affinity.and_then(|a| a.node_affinity.as_ref());
    pod.node_affinity = required_node_affinity(spec.node_selector.as_ref(), node_affinity)?;
    pod.preferred_node_affinity = preferred_node_affinity(node_affinity)?;

    pod.tolerations = spec
        .tolerations
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| toleration(t).within(|| format!("spec.tolerations[{i}]")))
        .collect::<Result<_, _>>()?;

    pod.topology_spread = spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| spread(c, &pod.labels).within(|| format!("spec.topologySpreadConstraints[{i}]")))
        .collect::<Result<_, _>>()?;

    const PA: &str = "spec.affinity.podAffinity";
    const PAA: &str = "spec.affinity.podAntiAffinity";
    if let Some(pa) = affinity.and_then(|a| a.pod_affinity.as_ref()) {
        pod.pod_affinity = required_terms(
            pa.required_during_scheduling_ignored_during_execution.as_ref(),
            namespace,
            &pod.labels,
            PA,
        )?;
        pod.preferred_pod_affinity = preferred_terms(
            pa.preferred_during_scheduling_ignored_during_execution.as_ref(),
            namespace,
            &pod.labels,
            PA,
        )?;
    }
    if let Some(paa) = affinity.and_then(|a| a.pod_anti_affinity.as_ref()) {
        pod.pod_anti_affinity = required_terms(
            paa.required_during_scheduling_ignored_during_execution.as_ref(),
            namespace,
            &pod.labels,
            PAA,
        )?;
        pod.preferred_pod_anti_affinity = preferred_terms(
            paa.preferred_during_scheduling_ignored_during_execution.as_ref(),
            namespace,
            &pod.labels,
            PAA,
        )?;
    }

    pod.host_ports = host_ports(spec);
    pod.priority_class = spec.priority_class_name.clone().unwrap_or_default();
    pod.priority = spec.priority.or_else(|| builtin_priority(&pod.priority_class)).unwrap_or(0);
    (pod.owner, pod.owner_name) = owner(meta);
    pod.node_name = spec.node_name.clone().filter(|n| !n.is_empty());
    pod.termination_grace_seconds = spec.termination_grace_period_seconds.unwrap_or(DEFAULT_TERMINATION_GRACE_SECONDS);
    Ok(pod)
}

/// The controller owner (`controller: true`), as disruption and provisioning classify pods.
pub fn owner(meta: &ObjectMeta) -> (OwnerKind, String) {
    let Some(r) = meta.owner_references.iter().flatten().find(|r| r.controller == Some(true)) else {
        return (OwnerKind::None, String::new());
    };
    let kind = match r.kind.as_str() {
        "ReplicaSet" => OwnerKind::ReplicaSet,
        "StatefulSet" => OwnerKind::StatefulSet,
        "Job" => OwnerKind::Job,
        "DaemonSet" => OwnerKind::DaemonSet,
        "Node" => OwnerKind::Node,
        _ => OwnerKind::Other,
    };
    (kind, r.name.clone())
}

/// Parses a `name → quantity` map; error paths are the resource name. Negative amounts are
/// rejected like the API server does, because they would make a pod look smaller than nothing,
/// and so are amounts over [`MAX_RESOURCE_AMOUNT`], which could overflow the sums made of them.
pub(crate) fn quantities(map: &BTreeMap<String, Quantity>) -> Result<Resources, ConvertError> {
    let mut out = Resources::default();
    for (name, q) in map {
        let parsed = if name == resources::CPU { parse_cpu_millis(&q.0) } else { parse_units(&q.0) };
        let value = parsed.map_err(|e| ConvertError::new(name.clone(), e))?;
        if value < 0 {
            return Err(ConvertError::invalid(name.clone(), format!("{:?} must not be negative", q.0)));
        }
        if value > MAX_RESOURCE_AMOUNT {
            return Err(ConvertError::invalid(
                name.clone(),
                format!("{:?} is more than the supported {MAX_RESOURCE_AMOUNT_TEXT} per resource amount", q.0),
            ));
        }
        out.set(name, value);
    }
    Ok(out)
}

/// A container's requests after API defaulting: a resource with a limit and no request requests
/// its limit. Paths are relative to the container (`resources.requests.cpu`).
fn container_requests(c: &k8s::Container) -> Result<Resources, ConvertError> {
    let Some(res) = &c.resources else {
        return Ok(Resources::default());
    };
    let mut req = match &res.requests {
        Some(m) => quantities(m).within(|| "resources.requests".into())?,
        None => Resources::default(),
    };
    if let Some(limits) = &res.limits {
        let lim = quantities(limits).within(|| "resources.limits".into())?;
        for name in limits.keys() {
            if !res.requests.as_ref().is_some_and(|r| r.contains_key(name)) {
                req.set(name, lim.get(name));
            }
        }
    }
    Ok(req)
}

fn is_sidecar(c: &k8s::Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// What the pod needs from a node, as kube-scheduler's NodeResourcesFit computes it:
///
/// * regular containers run together: their requests add up;
/// * sidecars (init containers with `restartPolicy: Always`, KEP-753) start in order and keep
///   running, so each adds to the sum, and every init container that starts after a sidecar runs
///   beside the sidecars started before it;
/// * per resource, the pod needs the larger of that sum and the peak of the init phase;
/// * pod-level `spec.resources` (KEP-2837, on by default since 1.34) replaces the aggregate for
///   cpu and memory;
/// * `spec.overhead` (RuntimeClass) is added on top; every pod takes one `pods` slot.
///
/// Error paths start below `spec` (`containers[1].resources.requests.memory`).
pub fn effective_requests(spec: &k8s::PodSpec) -> Result<Resources, ConvertError> {
    let mut sum = Resources::default();
    for (i, c) in spec.containers.iter().enumerate() {
        sum.add(&container_requests(c).within(|| format!("containers[{i}]"))?);
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let r = container_requests(c).within(|| format!("initContainers[{i}]"))?;
        if is_sidecar(c) {
            sum.add(&r);
            sidecars.add(&r);
            init_peak = init_peak.max(&sidecars);
        } else {
            init_peak = init_peak.max(&r.plus(&sidecars));
        }
    }
    let mut total = sum.max(&init_peak);

    if let Some(pod_level) = &spec.resources {
        let requests = match &pod_level.requests {
            Some(m) => quantities(m).within(|| "resources.requests".into())?,
            None => Resources::default(),
        };
        let limits = match &pod_level.limits {
            Some(m) => quantities(m).within(|| "resources.limits".into())?,
            None => Resources::default(),
        };
        for name in [resources::CPU, resources::MEMORY] {
            let has = |m: &Option<BTreeMap<String, Quantity>>| m.as_ref().is_some_and(|m| m.contains_key(name));
            if has(&pod_level.requests) {
                total.set(name, requests.get(name));
            } else if has(&pod_level.limits) && !any_container_requests(spec, name) {
                // API defaulting: with only a pod-level limit, the pod-level request becomes the
                // limit unless containers request the resource themselves (then their sum stays).
                total.set(name, limits.get(name));
            }
        }
    }

    if let Some(overhead) = &spec.overhead {
        total.add(&quantities(overhead).within(|| "overhead".into())?);
    }
    total.pods = 1;
    Ok(total)
}

fn any_container_requests(spec: &k8s::PodSpec, name: &str) -> bool {
    spec.containers.iter().chain(spec.init_containers.iter().flatten()).any(|c| {
        c.resources.as_ref().is_some_and(|r| {
            r.requests.as_ref().is_some_and(|m| m.contains_key(name))
                || r.limits.as_ref().is_some_and(|m| m.contains_key(name))
        })
    })
}

const REQUIRED_NODE_AFFINITY: &str = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";

/// nodeSelector ∧ (term₁ ∨ term₂ ∨ …): one alternative per required term, each already
/// intersected with the nodeSelector. A term with no expressions and no fields matches no node in
/// kube-scheduler, so it contributes no alternative; a pod whose terms are all empty gets none
/// (it fits nowhere).
fn required_node_affinity(
    node_selector: Option<&BTreeMap<String, String>>,
    node_affinity: Option<&k8s::NodeAffinity>,
) -> Result<Vec<Requirements>, ConvertError> {
    let mut base = Requirements::new();
    for (k, v) in node_selector.into_iter().flatten() {
        base.add(Requirement::single(k, v));
    }
    let Some(required) = node_affinity.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
    else {
        return Ok(vec![base]);
    };
    if required.node_selector_terms.is_empty() {
        return Err(ConvertError::invalid(
            format!("{REQUIRED_NODE_AFFINITY}.nodeSelectorTerms"),
            "must have at least one node selector term",
        ));
    }
    let mut alternatives = Vec::with_capacity(required.node_selector_terms.len());
    for (i, term) in required.node_selector_terms.iter().enumerate() {
        let reqs = node_selector_term(term).within(|| format!("{REQUIRED_NODE_AFFINITY}.nodeSelectorTerms[{i}]"))?;
        if is_empty_term(term) {
            continue;
        }
        alternatives.push(base.intersection(&reqs));
    }
    Ok(alternatives)
}

fn preferred_node_affinity(
    node_affinity: Option<&k8s::NodeAffinity>,
) -> Result<Vec<Weighted<Requirements>>, ConvertError> {
    let mut out = vec![];
    let terms = node_affinity.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref());
    for (i, p) in terms.into_iter().flatten().enumerate() {
        let path =
            || format!("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference");
        let term = node_selector_term(&p.preference).within(path)?;
        // An empty preference matches every node: a no-op the scheduler scores identically.
        if !is_empty_term(&p.preference) {
            out.push(Weighted { weight: p.weight, term });
        }
    }
    Ok(out)
}

fn toleration(t: &k8s::Toleration) -> Result<Toleration, ConvertError> {
    let key = t.key.clone().unwrap_or_default();
    if !key.is_empty() {
        check_qualified_name(&key).map_err(|why| ConvertError::invalid("key", why))?;
    }
    let operator = match t.operator.as_deref().unwrap_or("Equal") {
        "Equal" | "" => TolerationOp::Equal,
        "Exists" => TolerationOp::Exists,
        other => return Err(ConvertError::unknown("operator", "toleration operator", other, "Equal, Exists")),
    };
    let value = t.value.clone().unwrap_or_default();
    if operator == TolerationOp::Equal && key.is_empty() {
        return Err(ConvertError::invalid("operator", "must be Exists when key is empty"));
    }
    if operator == TolerationOp::Exists && !value.is_empty() {
        return Err(ConvertError::invalid("value", "must be empty when operator is Exists"));
    }
    check_label_value(&value).map_err(|why| ConvertError::invalid("value", why))?;
    let effect = match t.effect.as_deref().unwrap_or_default() {
        "" => None,
        e => Some(TaintEffect::parse(e).ok_or_else(|| {
            ConvertError::unknown("effect", "taint effect", e, "NoSchedule, PreferNoSchedule, NoExecute")
        })?),
    };
    Ok(Toleration { key, operator, value, effect })
}

/// Adds `key In [pod's value]` (or `NotIn`) for each listed key the pod has, the way the API
/// server folds `matchLabelKeys` / `mismatchLabelKeys` into the selector. Keys the pod lacks are
/// ignored, as Kubernetes does. An expression rather than a matchLabels entry keeps the AND
/// semantics when the selector already constrains the same key.
fn fold_label_keys(
    selector: &mut LabelSelector,
    keys: Option<&Vec<String>>,
    labels: &BTreeMap<String, String>,
    op: SelectorOp,
) {
    for key in keys.into_iter().flatten() {
        if let Some(v) = labels.get(key) {
            selector.match_expressions.push(SelectorExpr { key: key.clone(), op, values: [v.clone()].into() });
        }
    }
}

fn spread(
    c: &k8s::TopologySpreadConstraint,
    labels: &BTreeMap<String, String>,
) -> Result<TopologySpread, ConvertError> {
    if c.max_skew <= 0 {
        return Err(ConvertError::invalid("maxSkew", format!("{} must be greater than zero", c.max_skew)));
    }
    if c.topology_key.is_empty() {
        return Err(ConvertError::invalid("topologyKey", "must not be empty"));
    }
    let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
        "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
        other => {
            return Err(ConvertError::unknown(
                "whenUnsatisfiable",
                "whenUnsatisfiable",
                other,
                "DoNotSchedule, ScheduleAnyway",
            ))
        }
    };
    let policy = |field: &'static str, v: Option<&str>, default| match v {
        None | Some("") => Ok(default),
        Some("Honor") => Ok(InclusionPolicy::Honor),
        Some("Ignore") => Ok(InclusionPolicy::Ignore),
        Some(other) => Err(ConvertError::unknown(field, "inclusion policy", other, "Honor, Ignore")),
    };
    // A missing labelSelector selects no pods (kube-scheduler uses labels.Nothing()).
    let mut selector = match &c.label_selector {
        Some(s) => label_selector(s).within(|| "labelSelector".into())?,
        None => matches_nothing(),
    };
    fold_label_keys(&mut selector, c.match_label_keys.as_ref(), labels, SelectorOp::In);
    Ok(TopologySpread {
        max_skew: c.max_skew,
        topology_key: c.topology_key.clone(),
        when_unsatisfiable,
        selector,
        min_domains: c.min_domains,
        node_affinity_policy: policy("nodeAffinityPolicy", c.node_affinity_policy.as_deref(), InclusionPolicy::Honor)?,
        node_taints_policy: policy("nodeTaintsPolicy", c.node_taints_policy.as_deref(), InclusionPolicy::Ignore)?,
    })
}

fn affinity_term(
    t: &k8s::PodAffinityTerm,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Result<PodAffinityTerm, ConvertError> {
    if t.topology_key.is_empty() {
        return Err(ConvertError::invalid("topologyKey", "must not be empty"));
    }
    // "If it's null, this PodAffinityTerm matches with no Pods."
    let mut selector = match &t.label_selector {
        Some(s) => label_selector(s).within(|| "labelSelector".into())?,
        None => matches_nothing(),
    };
    fold_label_keys(&mut selector, t.match_label_keys.as_ref(), labels, SelectorOp::In);
    fold_label_keys(&mut selector, t.mismatch_label_keys.as_ref(), labels, SelectorOp::NotIn);
    let listed: Vec<String> = t.namespaces.clone().unwrap_or_default();
    let namespaces = match &t.namespace_selector {
        // `namespaceSelector: {}` selects every namespace, which covers any listed one too.
        Some(s) if is_empty_selector(s) => NamespaceScope::All,
        Some(s) => NamespaceScope::Selector(label_selector(s).within(|| "namespaceSelector".into())?, listed),
        // Neither: the pod's own namespace, spelled out so the term means the same wherever it
        // is evaluated.
        None if listed.is_empty() => NamespaceScope::List(vec![namespace.to_string()]),
        None => NamespaceScope::List(listed),
    };
    Ok(PodAffinityTerm { selector, namespaces, topology_key: t.topology_key.clone() })
}

fn required_terms(
    terms: Option<&Vec<k8s::PodAffinityTerm>>,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    prefix: &str,
) -> Result<Vec<PodAffinityTerm>, ConvertError> {
    terms
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| {
            affinity_term(t, namespace, labels)
                .within(|| format!("{prefix}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"))
        })
        .collect()
}

fn preferred_terms(
    terms: Option<&Vec<k8s::WeightedPodAffinityTerm>>,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    prefix: &str,
) -> Result<Vec<Weighted<PodAffinityTerm>>, ConvertError> {
    terms
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, w)| {
            let term = affinity_term(&w.pod_affinity_term, namespace, labels)
                .within(|| format!("{prefix}.preferredDuringSchedulingIgnoredDuringExecution[{i}].podAffinityTerm"))?;
            Ok(Weighted { weight: w.weight, term })
        })
        .collect()
}

/// Host ports the pod binds: every regular container's and every sidecar's (they run for the
/// pod's whole life). Plain init containers are left out: they exit before the pod runs. With
/// `hostNetwork` the API server defaults each port's hostPort to its containerPort.
fn host_ports(spec: &k8s::PodSpec) -> Vec<HostPort> {
    let host_network = spec.host_network == Some(true);
    let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten().filter(|c| is_sidecar(c)));
    let mut out = vec![];
    for c in containers {
        for p in c.ports.iter().flatten() {
            let port = match p.host_port {
                Some(hp) if hp > 0 => hp,
                _ if host_network => p.container_port,
                _ => continue,
            };
            out.push(HostPort {
                port,
                protocol: p.protocol.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| "TCP".to_string()),
                ip: p.host_ip.clone().unwrap_or_default(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests;
