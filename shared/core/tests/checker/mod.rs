//! An independent checker for scheduler plans: kube-scheduler's predicates written again, plainly,
//! from the Kubernetes semantics, so a plan is judged by something that shares no code (and so no
//! bugs) with the scheduler that made it.
//!
//! It uses only the model types and the smallest building blocks (`Requirements::matches_labels`,
//! `Requirement::has`, `LabelSelector::matches`, `Toleration::tolerates`, `Resources`, catalog
//! lookups, the overhead model behind `InstanceType::allocatable`). Everything else — which
//! DaemonSets land on a node, which domains count for a spread, what a launch could turn into — is
//! worked out here from the final state: the existing nodes with the pods the plan nominates to them,
//! and one node per planned claim built from its pool, instance type and offering (its labels
//! derived here, then compared with those the claim reports), with the DaemonSet pods that would
//! run there. Every other launch the claim allows (each candidate type in each offering its
//! requirements allow) is checked to hold the same pods too.
//!
//! Simplicity beats speed: everything is quadratic and nothing is cached beyond what keeps a
//! property test under a few seconds.

#![allow(dead_code)] // each test binary uses a different part

use std::collections::{BTreeMap, BTreeSet};

use dovetail_core::catalog::{Catalog, InstanceType, Offering, OfferingKey, WINDOWS_LICENSE_PER_VCPU_HOUR};
use dovetail_core::labels;
use dovetail_core::model::{
    cost_micros, InclusionPolicy, KubeletConfig, NamespaceScope, NodeOs, NodePool, Pod, PodAffinityTerm, Taint,
    TaintEffect, Toleration, WhenUnsatisfiable, LIMIT_COST, LIMIT_NODES,
};
use dovetail_core::requirements::{Operator, Requirement, Requirements};
use dovetail_core::resources::{self, Resources};
use dovetail_core::scheduler::{Plan, PlannedClaim};
use dovetail_core::snapshot::Snapshot;

type Labels = BTreeMap<String, String>;

/// Keys whose value comes from the offering a launch picks, not from the instance type.
const OFFERING_KEYS: [&str; 3] = [labels::ZONE, labels::ZONE_ID, labels::CAPACITY_TYPE];

/// Checks a plan; returns every violation found (empty = valid).
pub fn check(snap: &Snapshot, catalog: &Catalog, plan: &Plan) -> Vec<String> {
    let mut c = Checker { snap, catalog, plan, nodes: vec![], errors: vec![] };
    c.accounting();
    c.build_nodes();
    c.node_predicates();
    c.anti_affinity();
    c.affinity();
    c.spreads();
    for (i, claim) in plan.nodeclaims.iter().enumerate() {
        c.claim(i, claim);
    }
    c.costs();
    c.limits();
    c.cluster_cost_limit();
    c.errors
}

/// The domains of `key` that a spread of `pod` (default policies: nodeAffinityPolicy Honor,
/// nodeTaintsPolicy Ignore) counts in a snapshot, before any plan.
pub fn spread_domains(snap: &Snapshot, catalog: &Catalog, pod: &Pod, key: &str) -> BTreeSet<String> {
    let plan = Plan::default();
    let mut c = Checker { snap, catalog, plan: &plan, nodes: vec![], errors: vec![] };
    c.build_nodes();
    c.spread_domains(pod, labels::normalize_key(key), true, false)
}

/// Panics with every violation and a summary of the plan when the plan is not valid.
pub fn assert_valid(snap: &Snapshot, catalog: &Catalog, plan: &Plan) {
    let errors = check(snap, catalog, plan);
    if !errors.is_empty() {
        panic!(
            "the checker found {} violation(s):\n  - {}\nplan:\n{}",
            errors.len(),
            errors.iter().take(40).cloned().collect::<Vec<_>>().join("\n  - "),
            summary(plan)
        );
    }
}

/// A compact human-readable plan, for failure messages.
pub fn summary(plan: &Plan) -> String {
    let mut out = String::new();
    for c in &plan.nodeclaims {
        out.push_str(&format!(
            "  claim {} pool={} type={} ({} candidates) {} {} ${:.4}: {}\n",
            c.name,
            c.nodepool,
            c.instance_type,
            c.instance_types.len(),
            c.zone,
            c.capacity_type,
            c.price_per_hour,
            c.pods.join(" ")
        ));
    }
    for e in &plan.existing {
        out.push_str(&format!("  existing {}: {}\n", e.node, e.pods.join(" ")));
    }
    for u in &plan.unschedulable {
        out.push_str(&format!("  unschedulable {}: {}\n", u.pod, u.reason));
    }
    out.push_str(&format!("  cost ${:.4}/h, bound ${:.4}/h\n", plan.cost_per_hour, plan.lower_bound_per_hour));
    out
}

/// A pod on a node of the final cluster.
#[derive(Clone, Copy)]
struct Placed<'a> {
    pod: &'a Pod,
    /// Placed by this plan (pending before); only these can be blamed for a violation.
    new: bool,
}

/// A node of the final cluster.
struct FinalNode<'a> {
    name: String,
    /// Index into `plan.nodeclaims` for a planned claim.
    claim: Option<usize>,
    labels: Labels,
    /// Taints that keep pods off (a claim's startup taints excluded: they go away).
    taints: Vec<Taint>,
    allocatable: Resources,
    unschedulable: bool,
    pods: Vec<Placed<'a>>,
}

struct Checker<'a> {
    snap: &'a Snapshot,
    catalog: &'a Catalog,
    plan: &'a Plan,
    nodes: Vec<FinalNode<'a>>,
    errors: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// Small predicates, written from the Kubernetes rules.

/// The first NoSchedule/NoExecute taint no toleration covers. PreferNoSchedule only scores.
fn untolerated<'t>(tolerations: &[Toleration], taints: &'t [Taint]) -> Option<&'t Taint> {
    taints
        .iter()
        .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
        .find(|t| !tolerations.iter().any(|tol| tol.tolerates(t)))
}

/// Required node affinity (ORed terms, nodeSelector folded in) against a node's labels. No term at
/// all means every term the pod wrote was empty, which matches no node (the model's convention).
fn node_affinity_ok(pod: &Pod, labels: &Labels) -> bool {
    pod.node_affinity.iter().any(|term| term.matches_labels(labels))
}

/// Node affinity and the bound volumes' node constraints.
fn node_selection_ok(pod: &Pod, labels: &Labels) -> bool {
    node_affinity_ok(pod, labels) && pod.volume_requirements.matches_labels(labels)
}

/// Whether a pod in `ns` is in the namespaces a term owned by a pod in `owner_ns` looks at.
fn in_scope(scope: &NamespaceScope, owner_ns: &str, ns: &str, namespaces: &BTreeMap<String, Labels>) -> bool {
    match scope {
        NamespaceScope::All => true,
        NamespaceScope::List(list) if list.is_empty() => ns == owner_ns,
        NamespaceScope::List(list) => list.iter().any(|n| n == ns),
        NamespaceScope::Selector(sel, list) => {
            list.iter().any(|n| n == ns) || sel.matches(&namespaces.get(ns).cloned().unwrap_or_default())
        }
    }
}

fn term_selects(term: &PodAffinityTerm, owner_ns: &str, pod: &Pod, namespaces: &BTreeMap<String, Labels>) -> bool {
    in_scope(&term.namespaces, owner_ns, &pod.namespace, namespaces) && term.selector.matches(&pod.labels)
}

fn host_ports_conflict(a: &Pod, b: &Pod) -> Option<String> {
    let wild = |ip: &str| ip.is_empty() || ip == "0.0.0.0" || ip == "::";
    for p in &a.host_ports {
        for q in &b.host_ports {
            if p.port == q.port && p.protocol == q.protocol && (wild(&p.ip) || wild(&q.ip) || p.ip == q.ip) {
                return Some(format!("{}/{}", p.port, p.protocol));
            }
        }
    }
    None
}

/// Names of the resources in which `used` exceeds `available`; `only` restricts the comparison to
/// resources with a non-zero amount in it (kube-scheduler ignores resources a pod does not request).
fn overcommitted(used: &Resources, available: &Resources, only: Option<&Resources>) -> Vec<String> {
    let mut names: BTreeSet<String> =
        [resources::CPU, resources::MEMORY, resources::EPHEMERAL_STORAGE, resources::PODS].map(String::from).into();
    names.extend(used.extended.iter().map(|(n, _)| n.clone()));
    names
        .into_iter()
        .filter(|n| only.is_none_or(|o| o.get(n) > 0 || n == resources::PODS))
        .filter(|n| used.get(n) > available.get(n))
        .map(|n| format!("{n} {} > {}", used.get(&n), available.get(&n)))
        .collect()
}

/// The only value a requirement allows, if it allows exactly one.
fn single(r: &Requirement) -> Option<&str> {
    let v = r.values.iter().next()?;
    (!r.complement && r.values.len() == 1 && r.has(v)).then_some(v.as_str())
}

/// Labels an instance type gives its nodes (every single-valued requirement), offering keys aside,
/// on a node of `os`: a Windows image's node says `windows` and its build; `None` when the OS does
/// not run on the type (Windows images are amd64 only).
fn type_labels(t: &InstanceType, os: NodeOs) -> Option<Labels> {
    let mut l: Labels = t
        .requirements
        .iter()
        .filter(|r| !OFFERING_KEYS.contains(&r.key.as_str()))
        .filter_map(|r| single(r).map(|v| (r.key.clone(), v.to_string())))
        .collect();
    if let Some(build) = os.windows_build() {
        if l.get(labels::ARCH).map(String::as_str) != Some("amd64") {
            return None;
        }
        l.insert(labels::OS.to_string(), "windows".to_string());
        l.insert(labels::WINDOWS_BUILD.to_string(), build.to_string());
    }
    Some(l)
}

/// What an offering costs on a node of `os`: Windows adds the licence per vCPU the type has.
fn offering_price(t: &InstanceType, o: &Offering, os: NodeOs) -> f64 {
    if !os.is_windows() {
        return o.price;
    }
    let vcpus: f64 = single_label(t, labels::INSTANCE_CPU).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    o.price + vcpus * WINDOWS_LICENSE_PER_VCPU_HOUR
}

fn single_label<'t>(t: &'t InstanceType, key: &str) -> Option<&'t str> {
    t.requirements.get(key).and_then(single)
}

/// Whether a requirement on a key some node will carry allows that key's value.
fn requirement_allows(r: &Requirement, labels: &Labels) -> bool {
    match labels.get(&r.key) {
        Some(v) => r.has(v),
        None => matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist),
    }
}

/// Whether a pod's node-affinity term can be met by a node a pool would launch with `labels`: keys
/// the node carries must match; a custom key the pool constrains without labelling it gets a value
/// the claim narrows to, so it only has to be possible; a key nobody sets is absent.
fn term_feasible(term: &Requirements, labels: &Labels, pool: &Requirements) -> bool {
    let pool_key = |k: &str| if labels::is_well_known(k) { None } else { pool.get(k) };
    term.iter().all(|r| match (labels.get(&r.key), pool_key(&r.key)) {
        (Some(v), _) => r.has(v),
        (None, Some(p)) if !p.complement => p.values.iter().any(|v| r.has(v)),
        (None, Some(p)) => match r.operator() {
            Operator::DoesNotExist => matches!(p.operator(), Operator::NotIn | Operator::DoesNotExist),
            Operator::In => r.values.iter().any(|v| p.has(v)),
            _ => true,
        },
        (None, None) => matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist),
    })
}

/// Whether an offering can be bought at all: available in the catalog and not in the snapshot's
/// unavailable-offerings cache.
fn launchable(snap: &Snapshot, t: &InstanceType, o: &Offering) -> bool {
    o.available
        && !snap.unavailable.contains(&OfferingKey {
            instance_type: t.name.clone(),
            zone: o.zone.clone(),
            capacity_type: o.capacity_type,
        })
}

impl<'a> Checker<'a> {
    fn err(&mut self, msg: String) {
        self.errors.push(msg);
    }

    fn kubelet(&self, pool: &NodePool) -> Option<&'a KubeletConfig> {
        self.snap.nodeclasses.iter().find(|c| c.name == pool.node_class).map(|c| &c.kubelet)
    }

    /// The OS of a pool's nodes (Linux when its class is missing, reported elsewhere).
    fn os(&self, pool: &NodePool) -> NodeOs {
        self.kubelet(pool).map(|k| k.os).unwrap_or_default()
    }

    fn pool(&self, name: &str) -> Option<&'a NodePool> {
        self.snap.nodepools.iter().find(|p| p.name == name)
    }

    /// Labels a node launched from `pool` as a type with `type_labels` in offering `o` carries,
    /// before any pod narrows the claim: the type's labels, the offering's zone and capacity type,
    /// the pool's name, its template labels and its single-valued custom requirements. Well-known
    /// keys come only from the type or the offering: nothing else makes them true of the machine.
    fn launch_labels(&self, pool: &NodePool, type_labels: &Labels, o: &Offering) -> Labels {
        let mut l = type_labels.clone();
        for r in pool.requirements.iter().filter(|r| !labels::is_well_known(&r.key)) {
            if let Some(v) = single(r) {
                l.insert(r.key.clone(), v.to_string());
            }
        }
        l.extend(pool.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        l.insert(labels::ZONE.to_string(), o.zone.clone());
        if let Some(id) = self.catalog.zone_id(&o.zone) {
            l.insert(labels::ZONE_ID.to_string(), id.to_string());
        }
        l.insert(labels::CAPACITY_TYPE.to_string(), o.capacity_type.as_str().to_string());
        l.insert(labels::NODEPOOL.to_string(), pool.name.clone());
        l.insert(labels::KARPENTER_NODEPOOL.to_string(), pool.name.clone());
        l
    }

    /// Labels the node of a claim launched as a type in an offering carries: the launch labels
    /// plus the custom keys the claim's pods narrowed to one value, and the claim's name.
    fn claim_node_labels(&self, claim: &PlannedClaim, pool: &NodePool, type_labels: &Labels, o: &Offering) -> Labels {
        let mut l = self.launch_labels(pool, type_labels, o);
        for r in claim.requirements.iter().filter(|r| !labels::is_well_known(&r.key)) {
            if let Some(v) = single(r) {
                l.entry(r.key.clone()).or_insert_with(|| v.to_string());
            }
        }
        l.insert(labels::NODECLAIM.to_string(), claim.name.clone());
        l
    }

    /// The node a claim describes (its type in its zone and capacity type), as the checker
    /// labels it; `None` when the claim names something that does not exist (reported by `claim`).
    fn planned_node_labels(&self, claim: &PlannedClaim) -> Option<Labels> {
        let pool = self.pool(&claim.nodepool)?;
        let t = self.catalog.get(&claim.instance_type)?;
        let o = t.offerings.iter().find(|o| o.zone == claim.zone && o.capacity_type == claim.capacity_type)?;
        Some(self.claim_node_labels(claim, pool, &type_labels(t, self.os(pool))?, o))
    }

    /// The DaemonSet pods that would run on a new node with these labels and taints: the
    /// DaemonSet controller places a pod wherever its node affinity matches and it tolerates the
    /// NoSchedule/NoExecute taints.
    fn daemons_on(&self, labels: &Labels, taints: &[Taint]) -> Vec<&'a Pod> {
        self.snap
            .daemonsets
            .iter()
            .map(|ds| &ds.pod)
            .filter(|p| node_selection_ok(p, labels) && untolerated(&p.tolerations, taints).is_none())
            .collect()
    }

    /// The value a node has for a topology key: hostname is the node itself (claims have no
    /// hostname label yet, and every node is its own hostname domain); other keys need the label.
    fn domain(&self, node: usize, key: &str) -> Option<String> {
        let key = labels::normalize_key(key);
        if key == labels::HOSTNAME {
            Some(format!("node#{node}"))
        } else {
            self.nodes[node].labels.get(key).cloned()
        }
    }

    /// Every pending pod appears exactly once: on a claim, on an existing node, or unschedulable
    /// with a reason; nothing else appears.
    fn accounting(&mut self) {
        let mut seen: BTreeMap<String, Vec<String>> = self.snap.pods.iter().map(|p| (p.key(), Vec::new())).collect();
        let mut unknown = Vec::new();
        let mut note = |pod: &str, place: String| match seen.get_mut(pod) {
            Some(v) => v.push(place),
            None => unknown.push(format!("{pod} (in {place})")),
        };
        for c in &self.plan.nodeclaims {
            for p in &c.pods {
                note(p, format!("claim {}", c.name));
            }
        }
        for e in &self.plan.existing {
            for p in &e.pods {
                note(p, format!("existing node {}", e.node));
            }
        }
        for u in &self.plan.unschedulable {
            note(&u.pod, "unschedulable".to_string());
        }
        for u in &self.plan.unschedulable {
            if u.reason.trim().is_empty() {
                self.errors.push(format!("{} is unschedulable with an empty reason", u.pod));
            }
        }
        for (pod, places) in seen {
            if places.len() != 1 {
                self.errors.push(format!("pending pod {pod} appears {} times in the plan: {places:?}", places.len()));
            }
        }
        for u in unknown {
            self.errors.push(format!("the plan places {u}, which is not a pending pod"));
        }
        for c in &self.plan.nodeclaims {
            if c.pods.is_empty() {
                self.errors.push(format!("claim {} holds no pod", c.name));
            }
        }
        let names: BTreeSet<&str> = self.plan.nodeclaims.iter().map(|c| c.name.as_str()).collect();
        if names.len() != self.plan.nodeclaims.len() {
            self.errors.push("claim names are not unique".to_string());
        }
    }

    /// The final cluster: existing nodes with their pods plus the nominated ones, and one node per
    /// claim as the claim describes it, with the DaemonSet pods that would run there.
    fn build_nodes(&mut self) {
        let pending: BTreeMap<String, &'a Pod> = self.snap.pods.iter().map(|p| (p.key(), p)).collect();
        for n in &self.snap.nodes {
            self.nodes.push(FinalNode {
                name: n.name.clone(),
                claim: None,
                labels: n.labels.clone(),
                taints: n.taints.clone(),
                allocatable: n.allocatable.clone(),
                unschedulable: n.unschedulable,
                pods: n.pods.iter().map(|p| Placed { pod: p, new: false }).collect(),
            });
        }
        for e in &self.plan.existing {
            let Some(i) = self.snap.nodes.iter().position(|n| n.name == e.node) else {
                self.err(format!("pods are nominated to node {}, which does not exist", e.node));
                continue;
            };
            for key in &e.pods {
                if let Some(p) = pending.get(key) {
                    self.nodes[i].pods.push(Placed { pod: p, new: true });
                }
            }
        }
        for (ci, claim) in self.plan.nodeclaims.iter().enumerate() {
            let pool = self.pool(&claim.nodepool);
            let startup: &[Taint] = pool.map_or(&[], |p| &p.startup_taints);
            let taints: Vec<Taint> = claim.taints.iter().filter(|t| !startup.contains(t)).cloned().collect();
            let allocatable = match (pool.and_then(|p| self.kubelet(p)), self.catalog.get(&claim.instance_type)) {
                (Some(k), Some(t)) => t.allocatable(k),
                _ => Resources::default(), // reported by `claim`
            };
            // Predicates run on the labels the checker derives, not on those the claim reports (a
            // claim could report a label its machine will never carry): `claim` compares the two.
            let node_labels = self.planned_node_labels(claim).unwrap_or_else(|| claim.labels.clone());
            let mut pods: Vec<Placed<'a>> =
                self.daemons_on(&node_labels, &taints).into_iter().map(|p| Placed { pod: p, new: false }).collect();
            for key in &claim.pods {
                if let Some(p) = pending.get(key) {
                    pods.push(Placed { pod: p, new: true });
                }
            }
            self.nodes.push(FinalNode {
                name: format!("claim {}", claim.name),
                claim: Some(ci),
                labels: node_labels,
                taints,
                allocatable,
                unschedulable: false,
                pods,
            });
        }
    }

    /// Per node: cordon, resources, node affinity, volumes, taints, host ports.
    fn node_predicates(&mut self) {
        let mut errors = Vec::new();
        for n in &self.nodes {
            let new: Vec<&Placed<'_>> = n.pods.iter().filter(|p| p.new).collect();
            if new.is_empty() {
                continue;
            }
            if n.unschedulable {
                errors.push(format!("{} is unschedulable (cordoned or deleting) yet receives pods", n.name));
            }
            let mut used = Resources::default();
            let mut requested_new = Resources::default();
            for p in &n.pods {
                used.add(&p.pod.requests);
                if p.new {
                    requested_new.add(&p.pod.requests);
                }
            }
            // A new claim must hold everything (its DaemonSets included); an existing node only
            // has to have room for what the new pods ask for.
            let only = n.claim.is_none().then_some(&requested_new);
            let over = overcommitted(&used, &n.allocatable, only);
            if !over.is_empty() {
                errors.push(format!(
                    "{}: pods (with DaemonSets and pods already there) exceed allocatable: {}",
                    n.name,
                    over.join(", ")
                ));
            }
            for p in &new {
                let key = p.pod.key();
                if !node_affinity_ok(p.pod, &n.labels) {
                    errors.push(format!("{key} on {}: required node affinity not satisfied by {:?}", n.name, n.labels));
                }
                if !p.pod.volume_requirements.matches_labels(&n.labels) {
                    errors.push(format!(
                        "{key} on {}: volume requirements {} not satisfied",
                        n.name, p.pod.volume_requirements
                    ));
                }
                if let Some(t) = untolerated(&p.pod.tolerations, &n.taints) {
                    errors.push(format!("{key} on {}: taint {t} not tolerated", n.name));
                }
            }
            for (i, a) in n.pods.iter().enumerate() {
                for b in &n.pods[i + 1..] {
                    if !(a.new || b.new) {
                        continue;
                    }
                    if let Some(port) = host_ports_conflict(a.pod, b.pod) {
                        errors.push(format!(
                            "{}: host port {port} used by both {} and {}",
                            n.name,
                            a.pod.key(),
                            b.pod.key()
                        ));
                    }
                }
            }
        }
        self.errors.extend(errors);
    }

    fn all_pods(&self) -> Vec<(usize, Placed<'a>)> {
        self.nodes.iter().enumerate().flat_map(|(i, n)| n.pods.iter().map(move |p| (i, *p))).collect()
    }

    /// Required anti-affinity in both directions: no pod in the domain of a pod that owns a term
    /// may match the term (kube-scheduler checks the incoming pod's terms and those of the pods
    /// already there). Only pairs involving a new pod are the plan's doing.
    fn anti_affinity(&mut self) {
        let all = self.all_pods();
        let mut errors = Vec::new();
        for (xi, &(xn, x)) in all.iter().enumerate() {
            for term in &x.pod.pod_anti_affinity {
                let Some(dx) = self.domain(xn, &term.topology_key) else { continue };
                for (yi, &(yn, y)) in all.iter().enumerate() {
                    if xi == yi || !(x.new || y.new) {
                        continue;
                    }
                    if !term_selects(term, &x.pod.namespace, y.pod, &self.snap.namespaces) {
                        continue;
                    }
                    if self.domain(yn, &term.topology_key).as_deref() == Some(dx.as_str()) {
                        errors.push(format!(
                            "required anti-affinity of {} ({}) violated by {} ({} and {} share {}={})",
                            x.pod.key(),
                            term.topology_key,
                            y.pod.key(),
                            self.nodes[xn].name,
                            self.nodes[yn].name,
                            term.topology_key,
                            dx
                        ));
                    }
                }
            }
        }
        self.errors.extend(errors);
    }

    /// Required pod affinity of new pods: a matching pod (other than itself) in its domain, or —
    /// kube-scheduler's first-pod rule — no matching pod anywhere and the pod matches its own term.
    ///
    /// On the final state this is stricter than kube-scheduler only when a pod that matches the
    /// term but does not carry it lands elsewhere *after* the first pod; the generators give
    /// affinity only to groups whose selector matches the group alone.
    fn affinity(&mut self) {
        let all = self.all_pods();
        let mut errors = Vec::new();
        for (pi, &(pn, p)) in all.iter().enumerate() {
            if !p.new {
                continue;
            }
            for term in &p.pod.pod_affinity {
                let dp = self.domain(pn, &term.topology_key);
                let matching: Vec<&(usize, Placed<'_>)> = all
                    .iter()
                    .enumerate()
                    .filter(|&(i, (_, q))| {
                        i != pi && term_selects(term, &p.pod.namespace, q.pod, &self.snap.namespaces)
                    })
                    .map(|(_, x)| x)
                    .collect();
                let together =
                    dp.is_some() && matching.iter().any(|(qn, _)| self.domain(*qn, &term.topology_key) == dp);
                let first = matching.is_empty() && term_selects(term, &p.pod.namespace, p.pod, &self.snap.namespaces);
                if !together && !first {
                    errors.push(format!(
                        "required affinity of {} on {} not satisfied on {} ({} matching pod(s) elsewhere)",
                        p.pod.key(),
                        term.topology_key,
                        self.nodes[pn].name,
                        matching.len()
                    ));
                }
            }
        }
        self.errors.extend(errors);
    }

    /// Whether a node counts for a spread of `pod` (nodeAffinityPolicy / nodeTaintsPolicy).
    fn counts_for_spread(&self, pod: &Pod, honor_affinity: bool, honor_taints: bool, node: &FinalNode<'_>) -> bool {
        (!honor_affinity || node_affinity_ok(pod, &node.labels))
            && (!honor_taints || untolerated(&pod.tolerations, &node.taints).is_none())
    }

    /// Domains of a non-hostname key a spread counts: those of schedulable nodes that exist (or are
    /// planned) and pass the spread's node policies, and those any NodePool could launch a node in for the
    /// pod (Karpenter's view: an empty zone a pool can reach is a domain with zero pods).
    fn spread_domains(&self, pod: &Pod, key: &str, honor_affinity: bool, honor_taints: bool) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for (i, n) in self.nodes.iter().enumerate() {
            // A cordoned or deleting node is on its way out: like the scheduler (and unlike
            // kube-scheduler, which still counts its domain until it is gone), it adds no domain.
            if n.unschedulable {
                continue;
            }
            if self.counts_for_spread(pod, honor_affinity, honor_taints, n) {
                if let Some(v) = self.domain(i, key) {
                    out.insert(v);
                }
            }
        }
        for pool in &self.snap.nodepools {
            if self.kubelet(pool).is_none() {
                continue;
            }
            if honor_taints && untolerated(&pod.tolerations, &pool.taints).is_some() {
                continue;
            }
            for t in &self.catalog.types {
                let Some(tl) = type_labels(t, self.os(pool)) else { continue };
                for o in t.offerings.iter().filter(|o| launchable(self.snap, t, o)) {
                    let l = self.launch_labels(pool, &tl, o);
                    let Some(v) = l.get(key) else { continue };
                    if out.contains(v) {
                        continue;
                    }
                    let pool_ok = pool.requirements.iter().all(|r| {
                        (!l.contains_key(&r.key) && !labels::is_well_known(&r.key)) || requirement_allows(r, &l)
                    });
                    if !pool_ok {
                        continue;
                    }
                    let terms_ok = !honor_affinity
                        || pod.node_affinity.iter().any(|term| term_feasible(term, &l, &pool.requirements));
                    if terms_ok {
                        out.insert(v.clone());
                    }
                }
            }
        }
        out
    }

    /// DoNotSchedule topology spreads of new pods.
    ///
    /// Hostname: the count of matching pods on the pod's node is at most maxSkew (a fresh node, which
    /// a pool can always add, has zero, so the global minimum is zero). Counted so that it holds in
    /// any binding order: every other matching pod on the node, plus the pod if it matches itself.
    ///
    /// Other keys (zone): checked on the *final* state — the count in the pod's domain minus the
    /// minimum over the counted domains is at most maxSkew. That is implied by kube-scheduler's
    /// per-pod check (count before + 1 − min before ≤ maxSkew) for the last constrained pod put in a
    /// domain, since minima only grow; it is stricter only if pods that match the selector but do
    /// not carry the constraint land in the domain afterwards. The generators therefore give spreads
    /// selectors that match only the pods carrying that very spread. Counts include only pods in
    /// the pod's namespace, on nodes that pass the spread's node policies.
    fn spreads(&mut self) {
        let mut errors = Vec::new();
        let mut domain_cache: Vec<(&Pod, String, bool, bool, BTreeSet<String>)> = Vec::new();
        for (pn, node) in self.nodes.iter().enumerate() {
            for p in node.pods.iter().filter(|p| p.new) {
                for s in
                    p.pod.topology_spread.iter().filter(|s| s.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
                {
                    let key = labels::normalize_key(&s.topology_key).to_string();
                    let honor_affinity = s.node_affinity_policy == InclusionPolicy::Honor;
                    let honor_taints = s.node_taints_policy == InclusionPolicy::Honor;
                    let selected = |q: &Pod| q.namespace == p.pod.namespace && s.selector.matches(&q.labels);
                    if key == labels::HOSTNAME {
                        // The other matching pods may all bind first: they count fully, and the
                        // pod itself only if its own labels match.
                        let others =
                            node.pods.iter().filter(|q| !std::ptr::eq(q.pod, p.pod) && selected(q.pod)).count() as i64;
                        let count = others + selected(p.pod) as i64;
                        if count > s.max_skew as i64 {
                            errors.push(format!(
                                "hostname spread of {} (maxSkew {}): {} holds {count} matching pods",
                                p.pod.key(),
                                s.max_skew,
                                node.name
                            ));
                        }
                        continue;
                    }
                    let Some(dp) = self.domain(pn, &key) else {
                        errors.push(format!(
                            "{} has a spread on {key} but {} has no such label",
                            p.pod.key(),
                            node.name
                        ));
                        continue;
                    };
                    let same = |(q, k, a, t, _): &&(&Pod, String, bool, bool, BTreeSet<String>)| {
                        q.node_affinity == p.pod.node_affinity
                            && q.tolerations == p.pod.tolerations
                            && *k == key
                            && *a == honor_affinity
                            && *t == honor_taints
                    };
                    let domains = match domain_cache.iter().find(same) {
                        Some(d) => d.4.clone(),
                        None => {
                            let d = self.spread_domains(p.pod, &key, honor_affinity, honor_taints);
                            domain_cache.push((p.pod, key.clone(), honor_affinity, honor_taints, d.clone()));
                            d
                        }
                    };
                    let mut counts: BTreeMap<&str, i64> = domains.iter().map(|d| (d.as_str(), 0)).collect();
                    for (qn, q) in self.nodes.iter().enumerate() {
                        if !self.counts_for_spread(p.pod, honor_affinity, honor_taints, q) {
                            continue;
                        }
                        let Some(d) = self.domain(qn, &key) else { continue };
                        let k = q.pods.iter().filter(|x| selected(x.pod)).count() as i64;
                        if let Some(c) = counts.get_mut(d.as_str()) {
                            *c += k;
                        }
                    }
                    if !domains.contains(&dp) {
                        errors.push(format!(
                            "{} landed in {key}={dp}, which is not a domain its spread counts ({domains:?})",
                            p.pod.key()
                        ));
                        continue;
                    }
                    // The final state can only judge a spread when every pod it counts saw the same
                    // nodes: with nodeAffinityPolicy Honor, a selected pod with other node
                    // requirements counted (and was counted on) different nodes when it was placed,
                    // so the order of placement decides and kube-scheduler's per-pod check is the
                    // only fair one. Such mixed spreads are not judged here.
                    let mixed = honor_affinity
                        && self
                            .nodes
                            .iter()
                            .flat_map(|q| q.pods.iter())
                            .any(|x| selected(x.pod) && x.pod.node_affinity != p.pod.node_affinity);
                    if mixed {
                        continue;
                    }
                    let too_few = s.min_domains.is_some_and(|m| (domains.len() as i64) < m as i64);
                    let min = if too_few { 0 } else { counts.values().copied().min().unwrap_or(0) };
                    let here = counts[dp.as_str()];
                    if here - min > s.max_skew as i64 {
                        errors.push(format!(
                            "{key} spread of {} (maxSkew {}) broken: {dp} has {here}, minimum {min}, counts {counts:?}",
                            p.pod.key(),
                            s.max_skew
                        ));
                    }
                }
            }
        }
        self.errors.extend(errors);
    }

    /// Topology keys (other than hostname) on which the placement of a claim's pods matters: keys
    /// of the required terms and DoNotSchedule spreads the pods carry, and of the terms and spreads
    /// the checker verifies for other pods (anti-affinity of any pod, the rest of new pods) that
    /// select them. The claim must pin those keys to the value it reports,
    /// or a launch elsewhere would break the topology the plan was checked with.
    fn pinned_keys(&self, claim_node: usize) -> BTreeSet<String> {
        let all = self.all_pods();
        let mut keys = BTreeSet::new();
        let mut add = |k: &str| {
            let k = labels::normalize_key(k);
            if k != labels::HOSTNAME {
                keys.insert(k.to_string());
            }
        };
        for p in self.nodes[claim_node].pods.iter().filter(|p| p.new) {
            for t in p.pod.pod_affinity.iter().chain(&p.pod.pod_anti_affinity) {
                add(&t.topology_key);
            }
            for s in p.pod.topology_spread.iter().filter(|s| s.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule) {
                add(&s.topology_key);
            }
            for (_, q) in &all {
                // Checked later: anti-affinity of every pod, affinity and spreads of new pods.
                let affinity: &[PodAffinityTerm] = if q.new { &q.pod.pod_affinity } else { &[] };
                for t in affinity.iter().chain(&q.pod.pod_anti_affinity) {
                    if term_selects(t, &q.pod.namespace, p.pod, &self.snap.namespaces) {
                        add(&t.topology_key);
                    }
                }
                let spreads = q.pod.topology_spread.iter().filter(|_| q.new);
                for s in spreads.filter(|s| s.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule) {
                    if q.pod.namespace == p.pod.namespace && s.selector.matches(&p.pod.labels) {
                        add(&s.topology_key);
                    }
                }
            }
        }
        keys
    }

    /// A planned claim: consistent with its pool, its type and offering, and every candidate type
    /// in every offering its requirements allow can run all its pods.
    fn claim(&mut self, ci: usize, claim: &'a PlannedClaim) {
        let name = &claim.name;
        let Some(pool) = self.pool(&claim.nodepool) else {
            self.err(format!("claim {name}: NodePool {:?} does not exist", claim.nodepool));
            return;
        };
        let Some(kubelet) = self.kubelet(pool) else {
            self.err(format!("claim {name}: EC2NodeClass {:?} of its pool does not exist", pool.node_class));
            return;
        };
        let Some(cheapest) = self.catalog.get(&claim.instance_type) else {
            self.err(format!("claim {name}: instance type {} is not in the catalog", claim.instance_type));
            return;
        };
        let node = self.snap.nodes.len() + ci;

        // What the claim says about itself.
        if claim.instance_types.first() != Some(&claim.instance_type) {
            self.err(format!("claim {name}: instance_types does not start with instance_type {}", claim.instance_type));
        }
        if claim.instance_types.len() > 60 {
            self.err(format!("claim {name}: {} candidate types (at most 60)", claim.instance_types.len()));
        }
        let distinct: BTreeSet<&String> = claim.instance_types.iter().collect();
        if distinct.len() != claim.instance_types.len() {
            self.err(format!("claim {name}: duplicate candidate types"));
        }
        let label = |k: &str| claim.labels.get(k).map(String::as_str);
        if label(labels::ZONE) != Some(claim.zone.as_str()) {
            self.err(format!("claim {name}: zone label {:?} is not its zone {}", label(labels::ZONE), claim.zone));
        }
        if label(labels::CAPACITY_TYPE) != Some(claim.capacity_type.as_str()) {
            self.err(format!(
                "claim {name}: capacity-type label {:?} is not {}",
                label(labels::CAPACITY_TYPE),
                claim.capacity_type
            ));
        }
        if label(labels::INSTANCE_TYPE) != Some(claim.instance_type.as_str()) {
            self.err(format!(
                "claim {name}: instance-type label {:?} is not {}",
                label(labels::INSTANCE_TYPE),
                claim.instance_type
            ));
        }
        if label(labels::NODEPOOL) != Some(pool.name.as_str()) {
            self.err(format!("claim {name}: nodepool label {:?} is not {}", label(labels::NODEPOOL), pool.name));
        }
        if let Some(derived) = self.planned_node_labels(claim) {
            for (k, v) in &claim.labels {
                if derived.get(k) != Some(v) {
                    self.err(format!(
                        "claim {name}: label {k}={v}, but a {} node in {} carries {k}={:?}",
                        cheapest.name,
                        claim.zone,
                        derived.get(k)
                    ));
                }
            }
            for (k, v) in &derived {
                if !claim.labels.contains_key(k) {
                    self.err(format!("claim {name}: label {k}={v} missing"));
                }
            }
        }
        for (k, v) in &pool.labels {
            if label(k) != Some(v.as_str()) {
                self.err(format!("claim {name}: pool label {k}={v} missing (has {:?})", label(k)));
            }
        }
        for t in pool.taints.iter().chain(&pool.startup_taints) {
            if !claim.taints.contains(t) {
                self.err(format!("claim {name}: pool taint {t} missing"));
            }
        }
        for r in pool.requirements.iter() {
            if let Some(v) = claim.labels.get(&r.key) {
                if !r.has(v) {
                    self.err(format!("claim {name}: label {}={v} breaks pool requirement {r}", r.key));
                }
            }
        }
        for r in claim.requirements.iter() {
            if let Some(v) = claim.labels.get(&r.key) {
                if !r.has(v) {
                    self.err(format!("claim {name}: label {}={v} breaks its own requirement {r}", r.key));
                }
            }
        }
        let allocatable = cheapest.allocatable(kubelet);
        if claim.allocatable != allocatable.to_quantities() {
            self.err(format!(
                "claim {name}: allocatable {:?} is not {}'s {:?}",
                claim.allocatable,
                cheapest.name,
                allocatable.to_quantities()
            ));
        }

        // minValues: the candidates keep enough distinct values of every such key, or CreateFleet
        // would not get the flexibility the pool demands. Under BestEffort a claim may launch with
        // fewer (the scenarios check what it keeps).
        let strict = self.snap.min_values_policy.is_strict();
        for r in pool.requirements.iter().filter(|_| strict) {
            let Some(min) = r.min_values else { continue };
            let values: BTreeSet<String> = claim
                .instance_types
                .iter()
                .filter_map(|n| self.catalog.get(n))
                .filter_map(|t| type_labels(t, kubelet.os)?.get(&r.key).cloned())
                .collect();
            if values.len() < min {
                self.err(format!(
                    "claim {name}: {} distinct {} among its candidates, pool asks minValues {min}",
                    values.len(),
                    r.key
                ));
            }
        }

        // The offering the price comes from.
        match cheapest.offerings.iter().find(|o| o.zone == claim.zone && o.capacity_type == claim.capacity_type) {
            None => self.err(format!(
                "claim {name}: {} has no {} offering in {}",
                cheapest.name, claim.capacity_type, claim.zone
            )),
            Some(o) => {
                if !launchable(self.snap, cheapest, o) {
                    self.err(format!(
                        "claim {name}: offering {} {} {} is unavailable",
                        cheapest.name, claim.zone, claim.capacity_type
                    ));
                }
                let price = offering_price(cheapest, o, kubelet.os);
                if (price - claim.price_per_hour).abs() > 1e-12 {
                    self.err(format!("claim {name}: price {} is not the offering's {price}", claim.price_per_hour));
                }
            }
        }

        // Every launch the claim allows: each candidate type in each offering its requirements and
        // pool allow. Each must carry labels the pods accept, pin the topology keys, and hold the
        // pods next to its DaemonSets.
        let pods: Vec<&'a Pod> = self.nodes[node].pods.iter().filter(|p| p.new).map(|p| p.pod).collect();
        let mut distinct_pods: Vec<&'a Pod> = Vec::new();
        for p in &pods {
            let same = |q: &&Pod| {
                q.node_affinity == p.node_affinity
                    && q.volume_requirements == p.volume_requirements
                    && q.tolerations == p.tolerations
            };
            if !distinct_pods.iter().any(same) {
                distinct_pods.push(p);
            }
        }
        let mut demand = Resources::default();
        for p in &pods {
            demand.add(&p.requests);
        }
        let pinned = self.pinned_keys(node);
        let taints = self.nodes[node].taints.clone();
        let mut prices: Vec<(String, f64)> = Vec::new();
        let mut errors = Vec::new();
        for tname in &claim.instance_types {
            let Some(t) = self.catalog.get(tname) else {
                errors.push(format!("claim {name}: candidate {tname} is not in the catalog"));
                continue;
            };
            let alloc = t.allocatable(kubelet);
            let Some(tl) = type_labels(t, kubelet.os) else {
                errors.push(format!("claim {name}: candidate {tname} cannot run {:?}", kubelet.os));
                continue;
            };
            let mut outcomes = 0;
            let mut best: Option<f64> = None;
            for o in t.offerings.iter().filter(|o| launchable(self.snap, t, o)) {
                let full = self.claim_node_labels(claim, pool, &tl, o);
                // A well-known key the machine lacks is absent; a custom key the node lacks is
                // one no pod needed narrowed (the pool's requirement stays a launch constraint).
                let allowed = |reqs: &Requirements| {
                    reqs.iter().all(|r| {
                        (!full.contains_key(&r.key) && !labels::is_well_known(&r.key)) || requirement_allows(r, &full)
                    })
                };
                if !allowed(&claim.requirements) || !allowed(&pool.requirements) {
                    continue;
                }
                outcomes += 1;
                if o.capacity_type == claim.capacity_type {
                    let price = offering_price(t, o, kubelet.os);
                    best = Some(best.map_or(price, |b: f64| b.min(price)));
                }
                // Zone-independent findings name the type only, so they are reported once.
                let what = format!("claim {name} launched as {tname}");
                for p in &distinct_pods {
                    if !node_selection_ok(p, &full) {
                        errors.push(format!("{what}: {} would not accept the node", p.key()));
                    }
                }
                for k in &pinned {
                    if full.get(k) != self.nodes[node].labels.get(k) {
                        errors.push(format!(
                            "{what} in {} {}: topology key {k} would be {:?}, not the planned {:?}",
                            o.zone,
                            o.capacity_type,
                            full.get(k),
                            self.nodes[node].labels.get(k)
                        ));
                    }
                }
                let mut used = demand.clone();
                for d in self.daemons_on(&full, &taints) {
                    used.add(&d.requests);
                }
                let over = overcommitted(&used, &alloc, None);
                if !over.is_empty() {
                    errors.push(format!("{what}: pods and DaemonSets exceed allocatable: {}", over.join(", ")));
                }
            }
            if outcomes == 0 {
                errors
                    .push(format!("claim {name}: candidate {tname} has no launchable offering its requirements allow"));
            }
            match best {
                Some(b) => prices.push((tname.clone(), b)),
                None if outcomes > 0 => errors.push(format!(
                    "claim {name}: candidate {tname} has no {} offering its requirements allow",
                    claim.capacity_type
                )),
                None => {}
            }
        }
        for w in prices.windows(2) {
            if w[1].1 < w[0].1 - 1e-12 {
                errors.push(format!(
                    "claim {name}: candidates not cheapest first: {} (${}) before {} (${})",
                    w[0].0, w[0].1, w[1].0, w[1].1
                ));
            }
        }
        if let Some((_, p)) = prices.first() {
            if claim.instance_types.first() == Some(&claim.instance_type) && (p - claim.price_per_hour).abs() > 1e-12 {
                errors.push(format!(
                    "claim {name}: {} is offered at ${p}, cheaper than its planned ${}",
                    claim.instance_type, claim.price_per_hour
                ));
            }
        }
        let mut seen = BTreeSet::new();
        errors.retain(|e| seen.insert(e.clone()));
        self.errors.extend(errors);
    }

    fn costs(&mut self) {
        let sum: f64 = self.plan.nodeclaims.iter().map(|c| c.price_per_hour).sum();
        if (sum - self.plan.cost_per_hour).abs() > 1e-9 * sum.max(1.0) {
            self.err(format!("cost_per_hour {} is not the sum of claim prices {sum}", self.plan.cost_per_hour));
        }
        if self.plan.lower_bound_per_hour > self.plan.cost_per_hour + 1e-9 {
            self.err(format!(
                "lower bound {} exceeds the cost {}",
                self.plan.lower_bound_per_hour, self.plan.cost_per_hour
            ));
        }
        if self.plan.lower_bound_per_hour < 0.0 || !self.plan.lower_bound_per_hour.is_finite() {
            self.err(format!("lower bound {} is not a finite non-negative number", self.plan.lower_bound_per_hour));
        }
    }

    /// The most any launch a claim allows could cost: each candidate type in each launchable
    /// offering its requirements allow.
    fn dearest_launch(&self, claim: &PlannedClaim, os: NodeOs) -> f64 {
        let allowed = |key: &str, value: &str| claim.requirements.get(key).is_none_or(|r| r.has(value));
        claim
            .instance_types
            .iter()
            .filter_map(|n| self.catalog.get(n))
            .flat_map(|t| t.offerings.iter().map(move |o| (t, o)))
            .filter(|(t, o)| launchable(self.snap, t, o))
            .filter(|(_, o)| allowed(labels::ZONE, &o.zone) && allowed(labels::CAPACITY_TYPE, o.capacity_type.as_str()))
            .map(|(t, o)| offering_price(t, o, os))
            .fold(0.0, f64::max)
    }

    /// The cluster-wide cost limit: what runs plus the dearest launch of every planned claim, in
    /// any pool, stays within it.
    fn cluster_cost_limit(&mut self) {
        let Some(limit) = self.snap.cost_limit else { return };
        if self.plan.nodeclaims.is_empty() {
            return;
        }
        let mut worst = limit.usage;
        for c in &self.plan.nodeclaims {
            let os = self.pool(&c.nodepool).map(|p| self.os(p)).unwrap_or_default();
            worst += cost_micros(self.dearest_launch(c, os));
        }
        if worst > limit.limit {
            self.err(format!("the cluster-wide cost limit is {}, the plan could bring it to {worst}", limit.limit));
        }
    }

    /// Pool limits: usage plus the capacity of what the plan launches stays within each limit —
    /// counting each claim as its planned type, and (CreateFleet may launch any candidate) as the
    /// largest of its candidates, resource by resource — and each claim as one node.
    fn limits(&mut self) {
        for pool in &self.snap.nodepools {
            if pool.limits.is_empty() {
                continue;
            }
            let Some(kubelet) = self.kubelet(pool) else { continue };
            if !self.plan.nodeclaims.iter().any(|c| c.nodepool == pool.name) {
                continue; // usage over a limit already is not the plan's doing
            }
            let mut planned = pool.usage.clone();
            let mut worst = pool.usage.clone();
            for c in self.plan.nodeclaims.iter().filter(|c| c.nodepool == pool.name) {
                if let Some(t) = self.catalog.get(&c.instance_type) {
                    planned.add(&t.capacity(kubelet));
                }
                let mut max = Resources::default();
                for t in c.instance_types.iter().filter_map(|n| self.catalog.get(n)) {
                    max = max.max(&t.capacity(kubelet));
                }
                worst.add(&max);
                // The cost limit: the claim's own price, and the dearest launch it allows.
                planned.set(LIMIT_COST, planned.get(LIMIT_COST) + cost_micros(c.price_per_hour));
                worst.set(LIMIT_COST, worst.get(LIMIT_COST) + cost_micros(self.dearest_launch(c, kubelet.os)));
                // Each claim is one more node against `limits.nodes`, whichever type it launches.
                for counted in [&mut planned, &mut worst] {
                    counted.set(LIMIT_NODES, counted.get(LIMIT_NODES) + 1);
                }
            }
            for (res, limit) in &pool.limits {
                if planned.get(res) > *limit {
                    self.err(format!(
                        "NodePool {}: limit on {res} is {limit}, planned types bring it to {}",
                        pool.name,
                        planned.get(res)
                    ));
                } else if worst.get(res) > *limit {
                    self.err(format!(
                        "NodePool {}: limit on {res} is {limit}, the largest candidates could bring it to {}",
                        pool.name,
                        worst.get(res)
                    ));
                }
            }
        }
    }
}
