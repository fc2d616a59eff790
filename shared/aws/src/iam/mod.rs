//! Instance profiles for EC2NodeClass roles, on IAM: the calls only. Which profile a class gets,
//! how an existing one is brought in line and which ones are deleted are decided in
//! `dovetail_core::instance_profile`.
//!
//! - `for_class`: the profile a class launches with — `spec.instanceProfile` as named, or the one
//!   for `spec.role`, made or brought in line (GetInstanceProfile, then CreateInstanceProfile with
//!   its path and tags, RemoveRoleFromInstanceProfile, AddRoleToInstanceProfile as the core's
//!   steps say). A refusal (the role does not exist, it may not be passed, a profile of that name
//!   is someone else's) is the class's problem, said on its status; throttling and outages are
//!   errors, retried with the next read.
//! - `list`: ListInstanceProfiles under the cluster's path (filtered here as well: not every
//!   endpoint honours `PathPrefix`), each with its class.
//! - `delete`: its role out, then DeleteInstanceProfile; absent is success.

use aws_sdk_iam::types::{InstanceProfile, Tag};
use dovetail_core::instance_profile::{self, Found, Listed, Managed, Step, Wanted};
use dovetail_core::model::NodeClass;

use crate::error::{api_error, AwsError, AwsResult, ErrorKind};

/// IAM's code for an entity that does not exist (a profile, a role).
const NO_SUCH_ENTITY: &str = "NoSuchEntity";
/// IAM's code for creating what exists already (a concurrent invocation made the profile).
const ALREADY_EXISTS: &str = "EntityAlreadyExists";

/// The cluster's instance profiles.
#[derive(Debug, Clone)]
pub struct InstanceProfiles {
    iam: aws_sdk_iam::Client,
    region: String,
    cluster: String,
}

fn code(e: &AwsError) -> Option<&str> {
    match e {
        AwsError::Api { code, .. } => code.as_deref(),
        _ => None,
    }
}

/// `None` for an entity that does not exist (an absent profile, a role already out): not an
/// error to the calls here, which all make something so or find it so.
fn unless_absent<T>(result: AwsResult<T>) -> AwsResult<Option<T>> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(e) if code(&e) == Some(NO_SUCH_ENTITY) => Ok(None),
        Err(e) => Err(e),
    }
}

fn found(p: &InstanceProfile) -> Found {
    Found {
        name: p.instance_profile_name().to_string(),
        path: p.path().to_string(),
        roles: p.roles().iter().map(|r| r.role_name().to_string()).collect(),
    }
}

/// What the class's status says when IAM refused to make its profile.
pub fn problem(wanted: &Managed, e: &AwsError) -> String {
    let role = &wanted.role;
    match e {
        AwsError::Api { operation: "AddRoleToInstanceProfile", code: Some(c), .. } if c == NO_SUCH_ENTITY => {
            format!("spec.role: role {role} does not exist (instance profile {})", wanted.name)
        }
        AwsError::Api { operation: "AddRoleToInstanceProfile", code: Some(c), message, .. }
            if c.starts_with("AccessDenied") =>
        {
            format!(
                "spec.role: the functions may not pass role {role} (iam:PassRole is granted for the stack's node \
                 roles only; deploy the stack with this role as NodeRoleName or use its role): {message}"
            )
        }
        AwsError::Class { message, .. } => message.clone(),
        e => format!("instance profile {} for role {role}: {e}", wanted.name),
    }
}

impl InstanceProfiles {
    pub fn new(iam: aws_sdk_iam::Client, region: &str, cluster: &str) -> InstanceProfiles {
        InstanceProfiles { iam, region: region.to_string(), cluster: cluster.to_string() }
    }

    /// The profile `class` launches with (`Ok(Ok(name))`), or why it has none (`Ok(Err(why))`);
    /// `Err` only for what a retry may fix.
    pub async fn for_class(&self, class: &NodeClass) -> AwsResult<Result<String, String>> {
        match instance_profile::wanted(&self.region, &self.cluster, class) {
            None => Ok(Err("neither spec.role nor spec.instanceProfile is set".to_string())),
            Some(Wanted::Given(name)) => Ok(Ok(name)),
            Some(Wanted::Managed(m)) => match self.ensure(&class.name, &m).await {
                Ok(()) => Ok(Ok(m.name)),
                Err(e @ AwsError::Api { kind: ErrorKind::Retryable, .. }) => Err(e),
                Err(e) => {
                    let why = problem(&m, &e);
                    tracing::warn!(class = %class.name, profile = %m.name, "instance profile: {why}");
                    Ok(Err(why))
                }
            },
        }
    }

    /// The profile of that name, if it exists.
    pub async fn get(&self, name: &str) -> AwsResult<Option<Found>> {
        let out = self.iam.get_instance_profile().instance_profile_name(name).send().await;
        let out = unless_absent(out.map_err(|e| api_error("GetInstanceProfile", e)))?;
        Ok(out.as_ref().and_then(|o| o.instance_profile()).map(found))
    }

    /// Makes the profile what `wanted` says (see [`instance_profile::steps`]).
    pub async fn ensure(&self, class: &str, wanted: &Managed) -> AwsResult<()> {
        let current = self.get(&wanted.name).await?;
        let steps = instance_profile::steps(current.as_ref(), wanted)
            .map_err(|e| AwsError::Class { class: class.to_string(), message: e.to_string() })?;
        for step in steps {
            match step {
                Step::Create => {
                    let tags: Vec<Tag> =
                        wanted.tags.iter().filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok()).collect();
                    let created = self
                        .iam
                        .create_instance_profile()
                        .instance_profile_name(&wanted.name)
                        .path(&wanted.path)
                        .set_tags(Some(tags))
                        .send()
                        .await;
                    match created.map_err(|e| api_error("CreateInstanceProfile", e)) {
                        Ok(_) => tracing::info!(profile = %wanted.name, class, "created instance profile"),
                        // Made meanwhile by another invocation: adding the role is still ours.
                        Err(e) if code(&e) == Some(ALREADY_EXISTS) => {}
                        Err(e) => return Err(e),
                    }
                }
                Step::RemoveRole(role) => {
                    self.remove_role(&wanted.name, &role).await?;
                    tracing::info!(profile = %wanted.name, class, role, "took the old role out of the instance profile");
                }
                Step::AddRole(role) => {
                    self.iam
                        .add_role_to_instance_profile()
                        .instance_profile_name(&wanted.name)
                        .role_name(&role)
                        .send()
                        .await
                        .map_err(|e| api_error("AddRoleToInstanceProfile", e))?;
                    tracing::info!(profile = %wanted.name, class, role, "added the role to the instance profile");
                }
            }
        }
        Ok(())
    }

    /// Takes `role` out of `profile`; out already (another invocation, a deleted role) is fine.
    async fn remove_role(&self, profile: &str, role: &str) -> AwsResult<()> {
        let out =
            self.iam.remove_role_from_instance_profile().instance_profile_name(profile).role_name(role).send().await;
        unless_absent(out.map_err(|e| api_error("RemoveRoleFromInstanceProfile", e))).map(|_| ())
    }

    /// The cluster's profiles, each with the class it was made for.
    pub async fn list(&self) -> AwsResult<Vec<Listed>> {
        let prefix = instance_profile::cluster_path(&self.region, &self.cluster);
        let profiles: Vec<InstanceProfile> = self
            .iam
            .list_instance_profiles()
            .path_prefix(&prefix)
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| api_error("ListInstanceProfiles", e))?;
        Ok(profiles
            .iter()
            .filter_map(|p| {
                let class = instance_profile::class_of(p.path(), &self.region, &self.cluster)?;
                Some(Listed { name: p.instance_profile_name().to_string(), class: class.to_string() })
            })
            .collect())
    }

    /// Deletes a profile, its role taken out first; absent is success.
    pub async fn delete(&self, name: &str) -> AwsResult<()> {
        let Some(profile) = self.get(name).await? else { return Ok(()) };
        for role in &profile.roles {
            self.remove_role(name, role).await?;
        }
        let out = self.iam.delete_instance_profile().instance_profile_name(name).send().await;
        if unless_absent(out.map_err(|e| api_error("DeleteInstanceProfile", e)))?.is_some() {
            tracing::info!(profile = name, "deleted instance profile");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted() -> Managed {
        match instance_profile::wanted(
            "eu-west-1",
            "prod",
            &NodeClass { name: "default".into(), role: Some("NodeRole".into()), ..NodeClass::default() },
        ) {
            Some(Wanted::Managed(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    fn api(operation: &'static str, code: &str, message: &str) -> AwsError {
        AwsError::Api { operation, code: Some(code.into()), message: message.into(), kind: ErrorKind::Refused }
    }

    #[test]
    fn a_missing_role_and_a_role_that_may_not_be_passed_are_said_plainly() {
        let w = wanted();
        let missing = problem(
            &w,
            &api("AddRoleToInstanceProfile", "NoSuchEntity", "The role with name NodeRole cannot be found."),
        );
        assert!(missing.starts_with("spec.role: role NodeRole does not exist"), "{missing}");
        let denied = problem(
            &w,
            &api("AddRoleToInstanceProfile", "AccessDenied", "not authorized to perform: iam:PassRole on NodeRole"),
        );
        assert!(
            denied.contains("may not pass role NodeRole") && denied.contains("iam:PassRole on NodeRole"),
            "{denied}"
        );
        let other = problem(&w, &api("CreateInstanceProfile", "AccessDenied", "no"));
        assert!(other.contains(&w.name) && other.contains("CreateInstanceProfile"), "{other}");
        let foreign = AwsError::Class { class: "default".into(), message: "left alone".into() };
        assert_eq!(problem(&w, &foreign), "left alone");
    }
}
