//! Drift: a claim no longer matches what its NodePool and EC2NodeClass would launch today.
//!
//! Causes, in the order they are reported:
//! - the NodePool template hash differs from the one stored on the claim at launch
//!   ([`crate::hash::nodepool_hash`]: labels, annotations, taints, startupTaints, nodeClassRef, expireAfter,
//!   terminationGracePeriod — not requirements, which are checked against the node instead);
//! - the EC2NodeClass hash differs ([`crate::hash::nodeclass_hash`]: the spec minus its selector terms, which
//!   are checked through what they resolve to instead);
//! - requirements: a label of the node no longer satisfies the pool's requirement on that key;
//! - AMI: the instance's image is not the one the class resolves now for the instance;
//! - subnet: the instance's subnet is no longer among the class's subnets;
//! - security groups: the instance's groups differ (as a set) from the class's.
//!
//! A hash or resolution that is unknown (empty) is not drift: a claim adopted without hashes, or
//! a class not yet resolved, must not be replaced on a guess.
//!
//! Replacement is "launch first, then drain", which needs the scheduler. This module therefore
//! does not launch: [`plan`] returns the drifted claims the pool budgets let go now
//! ([`DriftPlan::replace`]) with their causes, and notes for the ones that must wait. The caller
//! plans capacity for each candidate's pods with the scheduler (the node treated as gone), emits
//! the `Launch` actions, then calls [`mark_drifted`] with the replacement claim names; the
//! termination machine drains the node once its replacements are initialized.
//!
//! `ResolvedClass.images` is keyed by instance type name (an image pinned for one type) or by
//! architecture (`amd64` / `arm64`, the `kubernetes.io/arch` values), with `/nvidia` or `/neuron`
//! for an alias's GPU and Neuron images ([`resolved_image`]); the type name wins. The
//! architecture is taken from the node's label, else the claim's labels or requirements, else
//! the embedded catalog's type.

use std::collections::{BTreeMap, BTreeSet};

use super::budgets::{allowance, Allowance};
use crate::catalog::ImageVariant;
use crate::cluster::{Cluster, ResolvedClass};
use crate::decision::{Action, Decision};
use crate::events;
use crate::hash::nodepool_hash;
use crate::labels;
use crate::model::Node;
use crate::nodeclaim::{Disruption, NodeClaim, Phase, Reason};
use crate::protection::{do_not_disrupt, pod_protected};
use crate::time::Time;

/// One reason a claim drifted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriftCause {
    NodePoolHash { launched: String, now: String },
    NodeClassHash { launched: String, now: String },
    Requirement { key: String, value: Option<String>, wanted: String },
    Ami { launched: String, now: String },
    Subnet { launched: String, now: Vec<String> },
    SecurityGroups { launched: Vec<String>, now: Vec<String> },
}

impl std::fmt::Display for DriftCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriftCause::NodePoolHash { launched, now } => {
                write!(f, "the NodePool template changed (hash {launched} at launch, {now} now)")
            }
            DriftCause::NodeClassHash { launched, now } => {
                write!(f, "the EC2NodeClass spec changed (hash {launched} at launch, {now} now)")
            }
            DriftCause::Requirement { key, value: Some(v), wanted } => {
                write!(f, "label {key}={v} no longer satisfies the NodePool requirement {wanted}")
            }
            DriftCause::Requirement { key, value: None, wanted } => {
                write!(f, "the node lacks label {key} that the NodePool requirement {wanted} needs")
            }
            DriftCause::Ami { launched, now } => write!(f, "AMI {launched} is no longer selected (now {now})"),
            DriftCause::Subnet { launched, now } => {
                write!(f, "subnet {launched} is no longer selected (now {})", now.join(", "))
            }
            DriftCause::SecurityGroups { launched, now } => write!(
                f,
                "security groups {} are no longer the selected ones ({})",
                launched.join(", "),
                now.join(", ")
            ),
        }
    }
}

/// A drifted claim and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Drifted {
    pub claim: String,
    pub nodepool: String,
    pub causes: Vec<DriftCause>,
    /// "drifted: AMI ami-0old is no longer selected (now ami-0new)".
    pub why: String,
}

fn node_of<'a>(cluster: &'a Cluster, claim: &NodeClaim) -> Option<&'a Node> {
    let name = claim.node_name.as_deref()?;
    cluster.nodes.iter().find(|n| n.name == name)
}

/// The architecture of a claim's instance (see the module docs for the order of sources).
fn arch_of(claim: &NodeClaim, node: Option<&Node>, instance_type: &str) -> Option<String> {
    node.and_then(|n| n.labels.get(labels::ARCH).cloned())
        .or_else(|| claim.labels.get(labels::ARCH).cloned())
        .or_else(|| claim.requirements.get(labels::ARCH).and_then(|r| r.single_value()).map(str::to_string))
        .or_else(|| {
            crate::catalog::embedded()
                .get(instance_type)
                .and_then(|t| t.requirements.get(labels::ARCH))
                .and_then(|r| r.single_value())
                .map(str::to_string)
        })
}

/// The image the class resolves now for an instance type of `arch` that boots `variant`, if
/// known: the image pinned for the type by name, else the variant's image for the architecture
/// ([`ImageVariant::image_key`]). A class resolved per variant
/// ([`ResolvedClass::images_per_variant`]) gives a GPU or Neuron type only its variant's image,
/// never the standard one, which lacks their drivers; a class resolved from selector terms has
/// one image per architecture, which every variant boots.
pub fn resolved_image<'a>(
    class: &'a ResolvedClass,
    instance_type: &str,
    arch: Option<&str>,
    variant: ImageVariant,
) -> Option<&'a str> {
    if let Some(image) = class.images.get(instance_type) {
        return Some(image);
    }
    let arch = arch?;
    let key = if class.images_per_variant { variant.image_key(arch) } else { arch.to_string() };
    class.images.get(&key).map(String::as_str)
}

/// Every drift cause of one claim; empty when it is not drifted (or not launched yet).
pub fn causes(cluster: &Cluster, claim: &NodeClaim) -> Vec<DriftCause> {
    let mut out = vec![];
    let Some(launch) = &claim.launch else { return out };
    let pool = cluster.nodepools.iter().find(|p| p.name == claim.nodepool);
    let class = cluster.resolved.iter().find(|r| r.name == claim.nodeclass);
    let node = node_of(cluster, claim);

    if let Some(pool) = pool {
        let now = cluster.nodepool_hashes.get(&pool.name).cloned().unwrap_or_else(|| nodepool_hash(pool));
        if !claim.hashes.nodepool.is_empty() && claim.hashes.nodepool != now {
            out.push(DriftCause::NodePoolHash { launched: claim.hashes.nodepool.clone(), now });
        }
    }
    if let Some(class) = class {
        if !class.hash.is_empty() && !claim.hashes.nodeclass.is_empty() && claim.hashes.nodeclass != class.hash {
            out.push(DriftCause::NodeClassHash { launched: claim.hashes.nodeclass.clone(), now: class.hash.clone() });
        }
    }
    if let Some(pool) = pool {
        // Only keys the node has are compared (Karpenter's compatibility check between the pool's
        // requirements and the claim's labels): a requirement on a label the node lacks only
        // matters when it demands the label exist.
        let labels = node.map(|n| &n.labels).unwrap_or(&claim.labels);
        for r in pool.requirements.iter() {
            match labels.get(&r.key) {
                Some(v) if !r.has(v) => out.push(DriftCause::Requirement {
                    key: r.key.clone(),
                    value: Some(v.clone()),
                    wanted: r.to_string(),
                }),
                None if node.is_some()
                    && !labels::is_well_known(&r.key)
                    && matches!(
                        r.operator(),
                        crate::requirements::Operator::In | crate::requirements::Operator::Exists
                    ) =>
                {
                    out.push(DriftCause::Requirement { key: r.key.clone(), value: None, wanted: r.to_string() })
                }
                _ => {}
            }
        }
    }
    if let Some(class) = class {
        let arch = arch_of(claim, node, &launch.instance_type);
        let variant = ImageVariant::of_type_name(&launch.instance_type);
        if let Some(image) = resolved_image(class, &launch.instance_type, arch.as_deref(), variant) {
            if !launch.image_id.is_empty() && launch.image_id != image {
                out.push(DriftCause::Ami { launched: launch.image_id.clone(), now: image.to_string() });
            }
        }
        if !class.subnets.is_empty() && !class.subnets.contains(&launch.subnet_id) {
            out.push(DriftCause::Subnet { launched: launch.subnet_id.clone(), now: class.subnets.clone() });
        }
        let launched: BTreeSet<&String> = launch.security_groups.iter().collect();
        let now: BTreeSet<&String> = class.security_groups.iter().collect();
        if !now.is_empty() && launched != now {
            out.push(DriftCause::SecurityGroups {
                launched: launched.into_iter().cloned().collect(),
                now: now.into_iter().cloned().collect(),
            });
        }
    }
    out
}

/// Claims that can be considered for drift replacement: launched, still live, not already being
/// disrupted.
/// Only initialized claims drift (as in Karpenter): one still coming up is not yet counted by
/// budgets, and replacing it before it runs anything would only churn.
fn eligible(claim: &NodeClaim) -> bool {
    claim.phase == Phase::Initialized && claim.disruption.is_none()
}

/// Every drifted claim in the cluster, oldest launch first (replace what has run longest first).
pub fn detect(cluster: &Cluster) -> Vec<Drifted> {
    let mut claims: Vec<&NodeClaim> = cluster.claims.iter().filter(|c| eligible(c)).collect();
    claims.sort_by_key(|c| (c.launch.as_ref().map_or(c.created_at, |l| l.launched_at), c.name.clone()));
    claims
        .into_iter()
        .filter_map(|c| {
            let causes = causes(cluster, c);
            if causes.is_empty() {
                return None;
            }
            let text: Vec<String> = causes.iter().map(ToString::to_string).collect();
            Some(Drifted {
                claim: c.name.clone(),
                nodepool: c.nodepool.clone(),
                why: format!("drifted: {}", text.join("; ")),
                causes,
            })
        })
        .collect()
}

/// What drift wants this pass.
#[derive(Debug, Clone, PartialEq)]
pub struct DriftPlan {
    /// Replace these now (the budget allows them): plan capacity, launch, then [`mark_drifted`].
    pub replace: Vec<Drifted>,
    /// Explanations for drifted claims that must wait (budget, do-not-disrupt): DisruptionBlocked
    /// Events on their nodes, and on a pool whose budget holds them.
    pub notes: Vec<Decision>,
    /// The allowance each pool with drifted claims had.
    pub allowances: BTreeMap<String, Allowance>,
}

/// Why a drifted claim's node is protected from voluntary disruption now, if it is.
fn protected(cluster: &Cluster, claim: &NodeClaim, now: Time) -> Option<String> {
    let node = node_of(cluster, claim)?;
    if let Some(why) = do_not_disrupt(&node.annotations, claim.registered_at, now) {
        return Some(format!("node {} has {why}", node.name));
    }
    node.pods.iter().find_map(|p| pod_protected(p, now))
}

/// A DisruptionBlocked Event on a drifted claim's node; a note when it has none.
fn blocked(claim: &NodeClaim, why: String) -> Decision {
    match &claim.node_name {
        Some(node) => events::on_node(&claim.name, node, events::DISRUPTION_BLOCKED, why),
        None => Decision::note(Some(&claim.name), why),
    }
}

/// Drifted claims split into those the budgets let go now and those that wait, with sentences.
pub fn plan(cluster: &Cluster) -> DriftPlan {
    let mut plan = DriftPlan { replace: vec![], notes: vec![], allowances: BTreeMap::new() };
    let mut left: BTreeMap<String, usize> = BTreeMap::new();
    // Pools whose blocking budget this pass has said on the pool.
    let mut told: BTreeSet<String> = BTreeSet::new();
    for d in detect(cluster) {
        let claim = cluster.claims.iter().find(|c| c.name == d.claim).expect("detected from the claims");
        if let Some(why) = protected(cluster, claim, cluster.now) {
            plan.notes.push(blocked(claim, format!("{}; not replaced: {why}", d.why)));
            continue;
        }
        let Some(pool) = cluster.nodepools.iter().find(|p| p.name == d.nodepool) else {
            // A pool that is gone: its claims are orphans of a different kind; replacing them
            // would need the pool's template. Say so rather than guess.
            plan.notes.push(Decision::note(
                Some(&d.claim),
                format!("{}; not replaced: nodepool {} no longer exists", d.why, d.nodepool),
            ));
            continue;
        };
        let remaining = left.entry(pool.name.clone()).or_insert_with(|| {
            let a = allowance(cluster, pool, Reason::Drifted);
            let n = a.allowed;
            plan.allowances.insert(pool.name.clone(), a);
            n
        });
        if *remaining == 0 {
            let budget = &plan.allowances[&pool.name];
            // The allowance was taken before this pass chose; name what used it up here.
            let started: Vec<&str> =
                plan.replace.iter().filter(|r| r.nodepool == pool.name).map(|r| r.claim.as_str()).collect();
            let this_pass = if started.is_empty() {
                String::new()
            } else {
                format!(", taken by this pass for {}", started.join(", "))
            };
            if started.is_empty() && told.insert(pool.name.clone()) {
                // Said once per pool, not per drifted node: the budget is the pool's.
                plan.notes.push(Decision::event(
                    None,
                    format!("NodePool/{}", pool.name),
                    events::DISRUPTION_BLOCKED,
                    format!("drifted nodes wait: {}", budget.why),
                ));
            }
            plan.notes.push(blocked(claim, format!("{}; replacement waits: {}{this_pass}", d.why, budget.why)));
            continue;
        }
        *remaining -= 1;
        plan.replace.push(d);
    }
    plan
}

/// The write that starts a drift replacement once the caller has launched `replacements` for the
/// claim's pods: the claim (as the next version of the one read) with its disruption recorded,
/// and an Event.
pub fn mark_drifted(claim: &NodeClaim, drifted: &Drifted, replacements: Vec<String>, now: Time) -> Vec<Decision> {
    let mut next = claim.next_version();
    let message = if replacements.is_empty() {
        format!("{}; no replacement needed, draining", drifted.why)
    } else {
        format!("{}; replacing with {} before draining", drifted.why, replacements.join(", "))
    };
    next.disruption = Some(Disruption {
        reason: Reason::Drifted,
        since: now,
        replacements,
        message: message.clone(),
        reclaim_at: None,
    });
    let mut out = vec![Decision::act(Some(&claim.name), Action::WriteClaim(Box::new(next)), message.clone())];
    if let Some(node) = &claim.node_name {
        out.push(Decision::event(Some(&claim.name), format!("Node/{node}"), "Drifted", message));
    }
    out
}
