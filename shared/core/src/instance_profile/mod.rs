//! The instance profile an EC2NodeClass's nodes launch with, and the ones Dovetail makes.
//!
//! A class names either an `instanceProfile` someone else made (used as it is, never touched) or a
//! `role`, for which Dovetail makes and keeps one profile, as Karpenter does:
//!
//! - **Which** ([`wanted`]): one profile per class, named from the region, cluster and class
//!   ([`name`]), under the path `/dovetail/<region>/<cluster>/<class>/` ([`path`]), tagged with
//!   the class's `tags` and the cluster and class ([`tags`]), holding the class's role. IAM is global, so the region is in
//!   both: clusters of the same name in two regions do not share profiles. The name does not
//!   depend on the role, so a changed role is a changed profile, not a new one.
//! - **How to bring an existing one in line** ([`steps`]): create it when absent, keep it when it
//!   holds the role, else take the other role out and put this one in (a profile holds at most
//!   one). The role changing also changes the class's hash, so its nodes drift and are replaced.
//!   A profile of that name outside Dovetail's path is someone else's and is left alone.
//! - **When to delete** ([`unused`]): the sweeper lists the cluster's profiles (by path) and
//!   deletes those whose class no longer wants one (deleted, or now naming an `instanceProfile`)
//!   once no instance and no claim of that class is left. There is no controller to hold a
//!   finalizer for this; the sweep sees every instance of the cluster each minute.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, Described};
use crate::hash::fnv1a64;
use crate::labels;
use crate::model::NodeClass;
use crate::nodeclaim::Phase;

/// The first segment of every profile path Dovetail makes.
pub const PATH_ROOT: &str = "dovetail";
/// Tag naming the cluster (the same key as on the cluster's instances and launch templates).
pub const TAG_CLUSTER: &str = "dovetail.dev/cluster";
/// Tag naming the class a profile was made for.
pub const TAG_NODECLASS: &str = labels::NODECLASS;

/// The instance profile a class's nodes get.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Wanted {
    /// `spec.instanceProfile`: someone else's, used as named.
    Given(String),
    /// `spec.role`: the profile Dovetail makes for it.
    Managed(Managed),
}

impl Wanted {
    /// The profile name launches use.
    pub fn name(&self) -> &str {
        match self {
            Wanted::Given(name) => name,
            Wanted::Managed(m) => &m.name,
        }
    }
}

/// A profile Dovetail makes for a class's role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Managed {
    pub name: String,
    pub path: String,
    /// The role's name: `spec.role` without any path (IAM adds roles to profiles by name).
    pub role: String,
    pub tags: BTreeMap<String, String>,
}

/// A profile as IAM shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Found {
    pub name: String,
    pub path: String,
    /// Role names (IAM allows one).
    pub roles: Vec<String>,
}

/// The class a profile at `path` was made for, when the path is a class path of this region and
/// cluster ([`path`]); else `None` (not one of this cluster's).
pub fn class_of<'a>(path: &'a str, region: &str, cluster: &str) -> Option<&'a str> {
    let rest = path.strip_prefix(&cluster_path(region, cluster))?.strip_suffix('/')?;
    (!rest.is_empty() && !rest.contains('/')).then_some(rest)
}

/// One of the cluster's profiles, with the class it was made for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    pub name: String,
    pub class: String,
}

/// One IAM call that brings a profile in line with what its class wants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Step {
    /// CreateInstanceProfile with the wanted path and tags.
    Create,
    RemoveRole(String),
    AddRole(String),
}

/// A profile of the wanted name that Dovetail did not make: it is not touched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "instance profile {name} exists under path {path}, not {wanted_path}: it was not made by Dovetail for this \
     class and is left alone (delete it, or set spec.instanceProfile to use it)"
)]
pub struct NotOurs {
    pub name: String,
    pub path: String,
    pub wanted_path: String,
}

/// The path prefix of every profile of a cluster: `/dovetail/<region>/<cluster>/`.
pub fn cluster_path(region: &str, cluster: &str) -> String {
    format!("/{PATH_ROOT}/{region}/{cluster}/")
}

/// The path of a class's profile: `/dovetail/<region>/<cluster>/<class>/` (a class name is a DNS
/// subdomain, which a path may hold).
pub fn path(region: &str, cluster: &str, class: &str) -> String {
    format!("{}{class}/", cluster_path(region, cluster))
}

/// The name of a class's profile: `<cluster>_<16 hex digits>`, the digits a hash of region,
/// cluster and class. At most 117 characters (EKS cluster names have at most 100; IAM allows 128).
pub fn name(region: &str, cluster: &str, class: &str) -> String {
    // NUL-separated, so no two triples share a text ("a" + "bc" vs "ab" + "c").
    let key = format!("{region}\0{cluster}\0{class}");
    format!("{cluster}_{:016x}", fnv1a64(key.as_bytes()))
}

/// The tags a class's profile is created with; the stacks' IAM policies allow creating only
/// profiles tagged so, and changing only profiles that are.
pub fn tags(region: &str, cluster: &str, class: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (TAG_CLUSTER.to_string(), cluster.to_string()),
        (format!("kubernetes.io/cluster/{cluster}"), "owned".to_string()),
        (TAG_NODECLASS.to_string(), class.to_string()),
        (labels::REGION.to_string(), region.to_string()),
    ])
}

/// The role name IAM takes: `spec.role` may be written with its path (`nodes/NodeRole`).
pub fn role_name(role: &str) -> &str {
    role.rsplit('/').next().unwrap_or(role)
}

/// The profile `class` launches with, `None` when it names neither (an invalid class).
pub fn wanted(region: &str, cluster: &str, class: &NodeClass) -> Option<Wanted> {
    if let Some(given) = class.instance_profile.as_deref().filter(|p| !p.is_empty()) {
        return Some(Wanted::Given(given.to_string()));
    }
    let role = class.role.as_deref().map(role_name).filter(|r| !r.is_empty())?;
    // The class's own tags too, as on its instances (Karpenter's way); Dovetail's win, as the
    // stack's IAM grants hang on them.
    let mut all = class.tags.clone();
    all.extend(tags(region, cluster, &class.name));
    Some(Wanted::Managed(Managed {
        name: name(region, cluster, &class.name),
        path: path(region, cluster, &class.name),
        role: role.to_string(),
        tags: all,
    }))
}

/// The IAM calls that make `found` (the profile of `wanted`'s name, if any) what `wanted` says,
/// in order; none when it already is.
pub fn steps(found: Option<&Found>, wanted: &Managed) -> Result<Vec<Step>, NotOurs> {
    let Some(found) = found else {
        return Ok(vec![Step::Create, Step::AddRole(wanted.role.clone())]);
    };
    if found.path != wanted.path {
        return Err(NotOurs { name: found.name.clone(), path: found.path.clone(), wanted_path: wanted.path.clone() });
    }
    let mut out: Vec<Step> =
        found.roles.iter().filter(|r| **r != wanted.role).map(|r| Step::RemoveRole(r.clone())).collect();
    if !found.roles.contains(&wanted.role) {
        out.push(Step::AddRole(wanted.role.clone()));
    }
    Ok(out)
}

/// A profile to delete, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unused {
    pub name: String,
    pub why: String,
}

/// Which of the cluster's profiles (`listed`, under [`cluster_path`]) to delete: those whose class
/// no longer wants one — it is gone, or names an `instanceProfile` now — when no instance EC2
/// still lists (terminated ones aside) and no live claim belongs to that class. A class that
/// exists but is invalid (`invalid_classes`) keeps its profile: what it wants cannot be told.
/// Only from a read that described every instance of the cluster; otherwise nothing.
pub fn unused(cluster: &Cluster, invalid_classes: &BTreeSet<String>, listed: &[Listed]) -> Vec<Unused> {
    if cluster.described != Described::All {
        return Vec::new();
    }
    let mut out = Vec::new();
    for profile in listed {
        let class = profile.class.as_str();
        if invalid_classes.contains(class) {
            continue;
        }
        let current = cluster.nodeclasses.iter().find(|c| c.name == class);
        if current.is_some_and(|c| c.instance_profile.is_none() && c.role.is_some()) {
            continue;
        }
        if in_use(cluster, class) {
            continue;
        }
        let why = match current {
            None => format!(
                "instance profile {} was made for EC2NodeClass {class}, which is gone, and no instance uses it",
                profile.name
            ),
            Some(_) => format!(
                "instance profile {} was made for EC2NodeClass {class}, which names spec.instanceProfile now, and no \
                 instance uses it",
                profile.name
            ),
        };
        out.push(Unused { name: profile.name.clone(), why });
    }
    out
}

/// Whether something of `class` may still run with its profile: a claim not yet terminated (its
/// launch may be under way), or an instance EC2 lists that is not terminated, by its class tag or
/// by its claim's class (instances launched before the class tag was set carry only the claim's).
fn in_use(cluster: &Cluster, class: &str) -> bool {
    let claim_class = |claim: &str| cluster.claims.iter().find(|c| c.name == claim).map(|c| c.nodeclass.as_str());
    cluster.claims.iter().any(|c| c.nodeclass == class && c.phase != Phase::Terminated)
        || cluster.instances.iter().filter(|i| i.state != "terminated").any(|i| {
            i.tags.get(TAG_NODECLASS).is_some_and(|c| c == class)
                || i.tags.get(labels::NODECLAIM).and_then(|c| claim_class(c)) == Some(class)
        })
}

#[cfg(test)]
mod tests;
