//! The live state disruption, termination and provisioning decide from: claims, nodes with their
//! pods, pending pods, the pools and classes, and the instances the cloud reports — and the few
//! questions every decision asks of it (which node and instance belong to a claim, which capacity
//! is leaving).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::catalog::OfferingKey;
use crate::labels::{self, NODECLAIM};
use crate::model::{DaemonSet, Node, NodeClass, NodePool, Pdb, Pod};
use crate::nodeclaim::NodeClaim;
use crate::time::Time;

/// An EC2 instance as the cloud reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// `pending`, `running`, `stopping`, `stopped`, `shutting-down`, `terminated`.
    pub state: String,
    pub launched_at: Time,
    pub tags: BTreeMap<String, String>,
    pub image_id: String,
    pub subnet_id: String,
    pub security_groups: Vec<String>,
}

/// What an EC2NodeClass currently resolves to, for drift.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResolvedClass {
    pub name: String,
    /// Hash of the class spec (minus selector terms), see `crate::hash::nodeclass_hash`.
    pub hash: String,
    /// Image per instance type architecture (`amd64` / `arm64`; an alias's GPU and Neuron images
    /// under `amd64/nvidia`, `amd64/neuron`, …) or per type name.
    pub images: BTreeMap<String, String>,
    /// Why `images` is empty, when the lookup could say (an alias AWS publishes no image for),
    /// for the class's `AMIsReady` condition; else it says no AMI matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images_problem: Option<String>,
    /// The images are per variant: they come from an alias of a family AWS publishes GPU and
    /// Neuron builds of (AL2023, AL2, Bottlerocket), so a GPU or Neuron type takes only its
    /// variant's image (`<arch>/nvidia`, `<arch>/neuron`) and none where the alias has none, as
    /// Karpenter gives such types no image then. Otherwise each architecture's one image serves
    /// every type.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub images_per_variant: bool,
    pub subnets: Vec<String>,
    pub security_groups: Vec<String>,
    /// Zones the subnets are in: where a launch can go (empty when unknown: anywhere).
    #[serde(default)]
    pub zones: Vec<String>,
    /// The instance profile launches use ([`crate::instance_profile`]): `spec.instanceProfile`,
    /// or the one made for `spec.role`. `None` when it could not be made (see
    /// `instance_profile_problem`): the class cannot launch.
    #[serde(default)]
    pub instance_profile: Option<String>,
    /// Why there is no instance profile (the role does not exist, it may not be passed, IAM
    /// refused), for the class's `InstanceProfileReady` condition and Event.
    #[serde(default)]
    pub instance_profile_problem: Option<String>,
    /// The active capacity reservations `capacityReservationSelectorTerms` select (none without
    /// terms): offered as capacity type `reserved` ([`crate::catalog::Reservation`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<crate::catalog::Reservation>,
}

/// The parts of an EC2NodeClass that must resolve to something before it can launch, as the
/// condition types its status reports them under.
pub const SUBNETS_READY: &str = "SubnetsReady";
pub const SECURITY_GROUPS_READY: &str = "SecurityGroupsReady";
pub const AMIS_READY: &str = "AMIsReady";
pub const INSTANCE_PROFILE_READY: &str = "InstanceProfileReady";

impl ResolvedClass {
    /// What the class resolves to nothing of, by condition type, with the sentence to show:
    /// empty when it can launch.
    pub fn missing(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if self.subnets.is_empty() {
            out.push((SUBNETS_READY, "no subnet matches subnetSelectorTerms".to_string()));
        }
        if self.security_groups.is_empty() {
            out.push((SECURITY_GROUPS_READY, "no security group matches securityGroupSelectorTerms".to_string()));
        }
        if self.images.is_empty() {
            let why = self.images_problem.clone().unwrap_or_else(|| "no AMI matches amiSelectorTerms".to_string());
            out.push((AMIS_READY, why));
        }
        if self.instance_profile.is_none() {
            let why = self.instance_profile_problem.clone().unwrap_or_else(|| "no instance profile".to_string());
            out.push((INSTANCE_PROFILE_READY, why));
        }
        out
    }
}

/// The live state disruption decisions are made from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    pub now: Time,
    pub claims: Vec<NodeClaim>,
    /// Registered nodes with their pods.
    pub nodes: Vec<Node>,
    /// Pods waiting for capacity (consolidation must not remove room they need).
    pub pending: Vec<Pod>,
    pub daemonsets: Vec<DaemonSet>,
    pub nodepools: Vec<NodePool>,
    pub nodeclasses: Vec<NodeClass>,
    /// Current resolution of each class (hash, images, subnets, security groups).
    pub resolved: Vec<ResolvedClass>,
    /// Hash of each pool's template, by pool name.
    pub nodepool_hashes: BTreeMap<String, String>,
    pub pdbs: Vec<Pdb>,
    /// Instances tagged for this cluster: all of them, or only those a per-event read asked for
    /// (see `described`).
    pub instances: Vec<Instance>,
    /// Which instances `instances` covers. An instance outside it is unknown, not gone.
    #[serde(default)]
    pub described: Described,
    /// VolumeAttachments still present, by node name.
    pub volume_attachments: BTreeMap<String, Vec<String>>,
    pub unavailable: BTreeSet<OfferingKey>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// NodeClaim objects in the cluster (what `kubectl get nodeclaims` lists).
    #[serde(default)]
    pub claim_objects: Vec<crate::nodeclaim::object::Observed>,
    /// Node repair is on for every NodePool, not only those that opt in with their annotation
    /// ([`crate::model::NODE_REPAIR_ANNOTATION`]): the functions' setting
    /// ([`crate::reconcile::Settings::node_repair`]), which the read copies here so the decisions
    /// stay functions of the cluster alone.
    #[serde(default)]
    pub node_repair: bool,
    /// Whether `minValues` is a hard constraint when planning: the functions' setting
    /// ([`crate::reconcile::Settings::min_values_policy`]), copied here by the read.
    #[serde(default)]
    pub min_values_policy: crate::requirements::MinValuesPolicy,
    /// The cluster-wide limit on what all pools' capacity costs, in micro-dollars per hour: the
    /// functions' setting ([`crate::reconcile::Settings::cost_limit`]), copied here by the read as
    /// `node_repair` is. `None`: no cluster-wide limit (each pool's own still holds).
    #[serde(default)]
    pub cost_limit: Option<i64>,
    /// EC2NodeClasses whose resolution failed in this read, with why (their status says so).
    #[serde(default)]
    pub unresolved: BTreeMap<String, String>,
}

impl Cluster {
    /// The kubelet settings (with the OS) of a class's nodes; the defaults, Linux, for a class
    /// the cluster does not have.
    pub fn kubelet_of(&self, class: &str) -> crate::model::KubeletConfig {
        self.nodeclasses.iter().find(|c| c.name == class).map(|c| c.kubelet.clone()).unwrap_or_default()
    }

    /// Puts a claim's new state into this working copy, for the decisions that follow to read.
    pub fn record(&mut self, claim: &NodeClaim) {
        match self.claims.iter_mut().find(|c| c.name == claim.name) {
            Some(c) => *c = claim.clone(),
            None => self.claims.push(claim.clone()),
        }
    }

    /// The pools that may launch: all but those being deleted (a deleting pool's nodes are being
    /// taken away, so nothing new goes to it — not even a replacement) and those whose class is
    /// known not to be ready ([`Cluster::class_not_ready`]). Like Karpenter's NodePools that are not
    /// Ready, such a pool takes no pods: they go to the next pool by weight, or wait, instead of
    /// being planned onto claims that can only fail to launch.
    pub fn launchable_pools(&self) -> impl Iterator<Item = &NodePool> {
        self.nodepools.iter().filter(|p| !p.deleting && self.class_not_ready(&p.node_class).is_none())
    }

    /// Why a class cannot launch, when this read knows: its resolution failed, or it resolved to
    /// no subnet, security group, image or instance profile. `None` when it is ready, and when it
    /// was not resolved at all (`dovetail plan`, which reads no cloud: nothing is known against it).
    pub fn class_not_ready(&self, class: &str) -> Option<String> {
        if let Some(why) = self.unresolved.get(class) {
            return Some(why.clone());
        }
        let resolved = self.resolved.iter().find(|r| r.name == class)?;
        let missing: Vec<String> = resolved.missing().into_iter().map(|(_, why)| why).collect();
        (!missing.is_empty()).then(|| missing.join("; "))
    }

    /// Records that `object` (`NodePool/x` or `EC2NodeClass/x`) now carries Dovetail's
    /// termination finalizer, or no longer does (and is gone, if it was being deleted).
    pub fn hold(&mut self, object: &str, held: bool) {
        crate::model::hold(&mut self.nodepools, &mut self.nodeclasses, object, held);
    }

    /// Whether `instances` tells the state of `claim`'s instance, as [`instance_of`] finds it:
    /// `false` when the read did not ask for it (or the claim's launch was recorded after the
    /// read) — its absence from the list then says nothing, and nothing may be judged on it.
    pub fn knows_instance_of(&self, claim: &NodeClaim) -> bool {
        match &self.described {
            Described::All => true,
            Described::Only(query) => query.covers(claim),
        }
    }

    /// Whether `instances` tells whether instance `id` exists (and is tagged for the cluster).
    pub fn knows_instance(&self, id: &str) -> bool {
        match &self.described {
            Described::All => true,
            Described::Only(query) => query.ids.contains(id),
        }
    }
}

/// Which instances a read described.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Described {
    /// Every instance tagged for the cluster (the sweeper's reconciliation): an instance missing
    /// from the list is gone, or too fresh for EC2 to list it yet.
    #[default]
    All,
    /// Only what a per-event read asked for: the instances of the claims it steps and those its
    /// events name. The rest of the cluster's instances are unknown, not gone.
    Only(InstanceQuery),
}

/// The instances a per-event read asks the cloud for (`Cloud::instances_of`): the few whose
/// state its decisions read, so its work follows the event, not the size of the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceQuery {
    /// By instance id: the recorded launches of the claims to step, and ids events name.
    pub ids: BTreeSet<String>,
    /// By `dovetail.dev/nodeclaim` tag: claims with no launch recorded (a crash between
    /// CreateFleet and the claim write leaves the instance findable only by its tag).
    pub claims: BTreeSet<String>,
}

impl InstanceQuery {
    /// Asks for `claim`'s instance the way [`instance_of`] finds it: by the recorded id, else by
    /// the claim's tag.
    pub fn claim(&mut self, claim: &NodeClaim) {
        match &claim.launch {
            Some(l) => self.ids.insert(l.instance_id.clone()),
            None => self.claims.insert(claim.name.clone()),
        };
    }

    /// Asks for the instance `id` (named by an event).
    pub fn instance(&mut self, id: &str) {
        self.ids.insert(id.to_string());
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty() && self.claims.is_empty()
    }

    /// Whether the answer to this query tells the state of `claim`'s instance.
    pub fn covers(&self, claim: &NodeClaim) -> bool {
        match &claim.launch {
            Some(l) => self.ids.contains(&l.instance_id),
            None => self.claims.contains(&claim.name),
        }
    }
}

/// A node's pods that need a new home when it goes (DaemonSet and mirror pods go with it),
/// unbound.
pub(crate) fn unbound(n: &Node) -> impl Iterator<Item = Pod> + '_ {
    n.pods.iter().filter(|p| !p.is_daemon() && !p.is_mirror()).map(|p| Pod { node_name: None, ..Pod::clone(p) })
}

/// Capacity already on its way out: marks the nodes of claims being taken away (disruption set,
/// or Draining and later) unschedulable, as they are once tainted, and takes their movable pods
/// off them, returned unbound — they need room elsewhere just like pending pods, and a plan made
/// now must leave it to them. DaemonSet and mirror pods stay: they go with the node.
pub(crate) fn vacate_leaving(cluster: &Cluster, nodes: &mut [Node]) -> Vec<Pod> {
    let leaving = leaving(cluster);
    let mut moving = Vec::new();
    for n in nodes.iter_mut() {
        if !is_leaving(n, &leaving) {
            continue;
        }
        n.unschedulable = true;
        let (go, stay): (Vec<_>, Vec<_>) = n.pods.drain(..).partition(|p| !p.is_daemon() && !p.is_mirror());
        n.pods = stay;
        moving.extend(go.into_iter().map(|p| Pod { node_name: None, ..Arc::unwrap_or_clone(p) }));
    }
    moving
}

/// The instance a claim runs on, if it still exists: by the recorded id, else (a crash between
/// CreateFleet and the write) by the `dovetail.dev/nodeclaim` tag. `None` means gone only where
/// [`Cluster::knows_instance_of`] the claim: callers that judge a claim by it check that first.
pub fn instance_of<'a>(claim: &NodeClaim, cluster: &'a Cluster) -> Option<&'a Instance> {
    match &claim.launch {
        Some(l) => cluster.instances.iter().find(|i| i.id == l.instance_id),
        None => cluster.instances.iter().find(|i| i.tags.get(NODECLAIM) == Some(&claim.name)),
    }
    .filter(|i| i.state != "terminated")
}

/// The instance a Node runs on, by its `spec.providerID` (`aws:///<zone>/<instance-id>`), which
/// the kubelet sets from the instance itself.
pub fn instance_of_node<'a>(node: &Node, cluster: &'a Cluster) -> Option<&'a Instance> {
    let id = node.provider_id.as_deref()?.rsplit('/').next().filter(|id| !id.is_empty())?;
    cluster.instances.iter().find(|i| i.id == id)
}

/// The claim's Node: by recorded name, else by providerID.
pub fn node_of<'a>(claim: &NodeClaim, cluster: &'a Cluster) -> Option<&'a Node> {
    if let Some(name) = &claim.node_name {
        return cluster.nodes.iter().find(|n| &n.name == name);
    }
    let pid = claim.provider_id()?;
    cluster.nodes.iter().find(|n| n.provider_id.as_deref() == Some(pid.as_str()))
}

/// Node and claim names of capacity that is leaving (claims being disrupted or drained): it takes
/// no new pods, in the scheduler's eyes as in the cluster once tainted.
pub fn leaving(cluster: &Cluster) -> BTreeSet<&str> {
    cluster
        .claims
        .iter()
        .filter(|c| !c.is_live())
        .flat_map(|c| c.node_name.iter().map(String::as_str).chain(std::iter::once(c.name.as_str())))
        .collect()
}

/// Whether `node` belongs to leaving capacity (by its name or its claim label).
pub fn is_leaving(node: &Node, leaving: &BTreeSet<&str>) -> bool {
    let claim = node.labels.get(labels::NODECLAIM).map(String::as_str);
    leaving.contains(node.name.as_str()) || claim.is_some_and(|c| leaving.contains(c))
}
