use std::collections::BTreeSet;

use super::*;
use crate::cluster::{Instance, InstanceQuery};
use crate::nodeclaim::NodeClaim;
use crate::time::Time;

const REGION: &str = "eu-west-1";
const CLUSTER: &str = "prod";

fn class(name: &str, role: Option<&str>, profile: Option<&str>) -> NodeClass {
    NodeClass {
        name: name.into(),
        role: role.map(str::to_string),
        instance_profile: profile.map(str::to_string),
        ..NodeClass::default()
    }
}

fn managed(class_name: &str, role: &str) -> Managed {
    match wanted(REGION, CLUSTER, &class(class_name, Some(role), None)) {
        Some(Wanted::Managed(m)) => m,
        other => panic!("{other:?}"),
    }
}

fn found(class_name: &str, roles: &[&str]) -> Found {
    Found {
        name: name(REGION, CLUSTER, class_name),
        path: path(REGION, CLUSTER, class_name),
        roles: roles.iter().map(|r| r.to_string()).collect(),
    }
}

fn instance(id: &str, state: &str, tags: &[(&str, &str)]) -> Instance {
    Instance {
        id: id.into(),
        instance_type: "m5.large".into(),
        zone: "eu-west-1a".into(),
        state: state.into(),
        launched_at: Time(0),
        tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        image_id: "ami-1".into(),
        subnet_id: "subnet-1".into(),
        security_groups: vec![],
    }
}

#[test]
fn a_role_gets_a_profile_named_from_region_cluster_and_class() {
    let m = managed("default", "DovetailNodeRole-prod");
    assert_eq!(m.name, name(REGION, CLUSTER, "default"));
    assert!(m.name.starts_with("prod_") && m.name.len() == "prod_".len() + 16, "{}", m.name);
    assert_eq!(m.path, "/dovetail/eu-west-1/prod/default/");
    assert_eq!(m.role, "DovetailNodeRole-prod");
    assert_eq!(m.tags["dovetail.dev/cluster"], "prod");
    assert_eq!(m.tags["kubernetes.io/cluster/prod"], "owned");
    assert_eq!(m.tags["dovetail.dev/ec2nodeclass"], "default");
    assert_eq!(m.tags["topology.kubernetes.io/region"], "eu-west-1");
    // The class's own tags go on too, under Dovetail's (which the stack's IAM grants rely on).
    let mut tagged = class("default", Some("DovetailNodeRole-prod"), None);
    tagged.tags =
        BTreeMap::from([("team".to_string(), "payments".to_string()), ("dovetail.dev/cluster".into(), "x".into())]);
    let Some(Wanted::Managed(t)) = wanted(REGION, CLUSTER, &tagged) else { panic!("a managed profile") };
    assert_eq!((t.tags["team"].as_str(), t.tags["dovetail.dev/cluster"].as_str()), ("payments", "prod"));
    // Deterministic, and different for every other class, cluster or region (IAM is global).
    assert_eq!(m.name, managed("default", "other-role").name, "the role is not in the name");
    let others =
        [name(REGION, CLUSTER, "gpu"), name("us-east-1", CLUSTER, "default"), name(REGION, "staging", "default")];
    assert!(others.iter().all(|o| *o != m.name), "{others:?}");
    // Separated, so that shifting a character between parts changes the name.
    assert_ne!(name(REGION, "ab", "c"), name(REGION, "a", "bc"));
    // A 100-character cluster name (EKS's longest) still gives a name IAM takes (128 at most).
    assert!(name(REGION, &"c".repeat(100), "default").len() <= 128);
}

#[test]
fn a_role_written_with_its_path_is_added_by_name() {
    assert_eq!(managed("default", "nodes/team-a/NodeRole").role, "NodeRole");
}

#[test]
fn a_given_profile_is_used_as_named_and_a_class_with_neither_gets_none() {
    let given = wanted(REGION, CLUSTER, &class("default", None, Some("KarpenterNodeInstanceProfile")));
    assert_eq!(given, Some(Wanted::Given("KarpenterNodeInstanceProfile".into())));
    assert_eq!(given.unwrap().name(), "KarpenterNodeInstanceProfile");
    assert_eq!(wanted(REGION, CLUSTER, &class("default", None, None)), None);
    assert_eq!(wanted(REGION, CLUSTER, &class("default", Some(""), None)), None);
}

#[test]
fn an_absent_profile_is_created_then_given_the_role() {
    let m = managed("default", "NodeRole");
    assert_eq!(steps(None, &m), Ok(vec![Step::Create, Step::AddRole("NodeRole".into())]));
}

#[test]
fn a_profile_holding_the_role_is_reused_as_it_is() {
    let m = managed("default", "NodeRole");
    assert_eq!(steps(Some(&found("default", &["NodeRole"])), &m), Ok(vec![]));
}

#[test]
fn a_changed_role_is_taken_out_and_the_new_one_put_in() {
    let m = managed("default", "NewRole");
    assert_eq!(
        steps(Some(&found("default", &["OldRole"])), &m),
        Ok(vec![Step::RemoveRole("OldRole".into()), Step::AddRole("NewRole".into())])
    );
    // Created earlier, but the role could not be added then (it did not exist yet).
    assert_eq!(steps(Some(&found("default", &[])), &m), Ok(vec![Step::AddRole("NewRole".into())]));
}

#[test]
fn a_profile_of_that_name_outside_dovetails_path_is_not_touched() {
    let m = managed("default", "NodeRole");
    let foreign = Found { path: "/".into(), ..found("default", &["SomeoneElsesRole"]) };
    let e = steps(Some(&foreign), &m).unwrap_err();
    assert_eq!(e.path, "/");
    assert!(e.to_string().contains("left alone"), "{e}");
}

#[test]
fn a_profile_knows_its_class_from_its_path_only_under_this_cluster() {
    let p = path(REGION, CLUSTER, "gpu");
    assert_eq!(class_of(&p, REGION, CLUSTER), Some("gpu"));
    assert_eq!(class_of(&p, "us-east-1", CLUSTER), None);
    assert_eq!(class_of(&p, REGION, "prod-2"), None);
    assert_eq!(class_of(&path(REGION, "prod-2", "gpu"), REGION, "prod"), None);
    assert_eq!(class_of("/dovetail/eu-west-1/prod/gpu/x/", REGION, CLUSTER), None);
    assert_eq!(class_of("/dovetail/eu-west-1/prod/", REGION, CLUSTER), None);
    assert_eq!(class_of("/", REGION, CLUSTER), None);
}

fn cluster_with(classes: Vec<NodeClass>) -> Cluster {
    Cluster { nodeclasses: classes, described: Described::All, ..Cluster::default() }
}

fn listed(class_name: &str) -> Listed {
    Listed { name: name(REGION, CLUSTER, class_name), class: class_name.into() }
}

fn unused_names(cluster: &Cluster, invalid: &[&str], profiles: &[Listed]) -> Vec<String> {
    let invalid: BTreeSet<String> = invalid.iter().map(|s| s.to_string()).collect();
    unused(cluster, &invalid, profiles).into_iter().map(|u| u.name).collect()
}

#[test]
fn the_profile_of_a_deleted_class_that_nothing_uses_is_deleted() {
    let c = cluster_with(vec![class("default", Some("NodeRole"), None)]);
    let profiles = [listed("default"), listed("gone")];
    let out = unused(&c, &BTreeSet::new(), &profiles);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].name, name(REGION, CLUSTER, "gone"));
    assert!(out[0].why.contains("EC2NodeClass gone, which is gone"), "{}", out[0].why);
}

#[test]
fn a_class_that_now_names_an_instance_profile_lets_its_made_one_go() {
    let c = cluster_with(vec![class("default", None, Some("Theirs"))]);
    let out = unused(&c, &BTreeSet::new(), &[listed("default")]);
    assert_eq!(out.len(), 1);
    assert!(out[0].why.contains("names spec.instanceProfile now"), "{}", out[0].why);
}

#[test]
fn a_profile_is_kept_while_an_instance_or_claim_of_its_class_is_left() {
    let profiles = [listed("gone")];
    // An instance tagged with the class, still running.
    let mut c = cluster_with(vec![]);
    c.instances = vec![instance("i-1", "running", &[(TAG_NODECLASS, "gone")])];
    assert!(unused_names(&c, &[], &profiles).is_empty());
    // One launched before instances carried the class tag: known by its claim's class.
    c.instances = vec![instance("i-1", "shutting-down", &[(labels::NODECLAIM, "gone-abc")])];
    c.claims = vec![NodeClaim::launching("gone-abc", "pool", "gone", Time(0))];
    assert!(unused_names(&c, &[], &profiles).is_empty());
    // A claim whose launch is under way, with no instance listed yet.
    c.instances.clear();
    assert!(unused_names(&c, &[], &profiles).is_empty());
    // Terminated instances and terminated claims do not hold it.
    let mut done = NodeClaim::launching("gone-abc", "pool", "gone", Time(0));
    done.phase = Phase::Terminated;
    c.claims = vec![done];
    c.instances = vec![instance("i-1", "terminated", &[(TAG_NODECLASS, "gone")])];
    assert_eq!(unused_names(&c, &[], &profiles), vec![name(REGION, CLUSTER, "gone")]);
    // Another class's instance does not hold it either.
    c.instances = vec![instance("i-2", "running", &[(TAG_NODECLASS, "other")])];
    assert_eq!(unused_names(&c, &[], &profiles), vec![name(REGION, CLUSTER, "gone")]);
}

#[test]
fn nothing_is_deleted_for_an_invalid_class_or_from_a_partial_read() {
    let profiles = [listed("broken")];
    let c = cluster_with(vec![]);
    assert!(unused_names(&c, &["broken"], &profiles).is_empty());
    let partial = Cluster { described: Described::Only(InstanceQuery::default()), ..c };
    assert!(unused_names(&partial, &[], &profiles).is_empty());
}
