//! Instance profiles for EC2NodeClass roles against moto's IAM and EC2: made on resolution with
//! Dovetail's path, tags and the role, reused, given a changed role, refused plainly for a role
//! that does not exist or a name someone else holds, listed and deleted; and a launch EC2 refuses
//! because it does not see a new profile yet (an SDK interceptor answers as EC2 does — moto's IAM
//! is at once consistent) is launched again, not failed.

use std::collections::BTreeMap;
use std::time::Duration;

use dovetail_aws::Ec2Cloud;
use dovetail_core::catalog::{CapacityType, Offer};
use dovetail_core::instance_profile;
use dovetail_core::model::NodeClass;
use dovetail_core::nodeclaim::NodeClaim;
use dovetail_core::reconcile::ports::{Cloud, LaunchOutcome, LaunchRequest, PortError};
use dovetail_core::time::Time;
use dovetail_tests::moto::{fixtures, REGION};

use super::canned::{CannedFleet, FleetError};
use super::{example, World, CLUSTER, NODE_ROLE};

/// The example class with `role` (as the Kubernetes adapter gives it: field and spec agree).
fn with_role(mut class: NodeClass, name: &str, role: &str) -> NodeClass {
    class.name = name.into();
    class.role = Some(role.into());
    class.spec["role"] = role.into();
    class
}

async fn profile(world: &World, name: &str) -> Option<aws_sdk_iam::types::InstanceProfile> {
    match world.clients.iam.get_instance_profile().instance_profile_name(name).send().await {
        Ok(out) => out.instance_profile().cloned(),
        Err(e) if e.as_service_error().is_some_and(|e| e.is_no_such_entity_exception()) => None,
        Err(e) => panic!("GetInstanceProfile {name}: {e:?}"),
    }
}

fn roles(p: &aws_sdk_iam::types::InstanceProfile) -> Vec<&str> {
    p.roles().iter().map(|r| r.role_name()).collect()
}

#[tokio::test]
async fn a_roles_instance_profile_is_made_reused_changed_refused_plainly_and_deleted() {
    let world = World::new().await;
    world.network().await;
    world.images().await;
    let cloud = world.cloud();
    let example_class = example().nodeclasses.remove(0);
    assert_eq!(example_class.role.as_deref(), Some(NODE_ROLE), "the example names the fixture's role");

    // Made on the first resolution: named from region, cluster and class, under Dovetail's path,
    // tagged, holding the role.
    let mut class = with_role(example_class.clone(), "default", NODE_ROLE);
    let name = instance_profile::name(REGION, CLUSTER, "default");
    let resolved = cloud.resolve(&class).await.unwrap();
    assert_eq!(resolved.instance_profile.as_deref(), Some(name.as_str()), "{:?}", resolved.instance_profile_problem);
    let made = profile(&world, &name).await.expect("the profile exists");
    assert_eq!(made.path(), format!("/dovetail/{REGION}/{CLUSTER}/default/"));
    assert_eq!(roles(&made), [NODE_ROLE]);
    let tags: BTreeMap<&str, &str> = made.tags().iter().map(|t| (t.key(), t.value())).collect();
    assert_eq!(
        tags,
        BTreeMap::from([
            ("dovetail.dev/cluster", CLUSTER),
            ("dovetail.dev/ec2nodeclass", "default"),
            (format!("kubernetes.io/cluster/{CLUSTER}").as_str(), "owned"),
            ("topology.kubernetes.io/region", REGION),
        ])
    );

    // Reused: a fresh adapter (another Lambda) finds it as it is.
    let again = world.cloud().resolve(&class).await.unwrap();
    assert_eq!(again.instance_profile.as_deref(), Some(name.as_str()));
    let listed = world.clients.iam.list_instance_profiles().send().await.unwrap();
    assert_eq!(listed.instance_profiles().iter().filter(|p| p.instance_profile_name() == name).count(), 1);

    // The role changes: the same profile, the old role out and the new one in; the class's hash
    // changes with it, so its nodes drift.
    fixtures::node_role(&world.clients.iam, "NewNodeRole").await.unwrap();
    class = with_role(example_class.clone(), "default", "NewNodeRole");
    let changed = cloud.resolve(&class).await.unwrap();
    assert_eq!(changed.instance_profile.as_deref(), Some(name.as_str()));
    assert_ne!(changed.hash, resolved.hash);
    assert_eq!(roles(&profile(&world, &name).await.unwrap()), ["NewNodeRole"]);
    // A role written with its path goes in by name.
    class = with_role(example_class.clone(), "default", &format!("nodes/{NODE_ROLE}"));
    cloud.resolve(&class).await.unwrap();
    assert_eq!(roles(&profile(&world, &name).await.unwrap()), [NODE_ROLE]);

    // A role that does not exist: the class says so and cannot launch; the others carry on.
    let ghost = with_role(example_class.clone(), "ghost", "NoSuchRole");
    let refused = cloud.resolve(&ghost).await.unwrap();
    assert_eq!(refused.instance_profile, None);
    let why = refused.instance_profile_problem.clone().unwrap_or_default();
    assert!(why.contains("role NoSuchRole does not exist"), "{why}");
    assert!(refused.missing().iter().any(|(t, m)| *t == "InstanceProfileReady" && *m == why));
    assert_eq!(cloud.resolve(&class).await.unwrap().instance_profile.as_deref(), Some(name.as_str()));

    // A profile of the wanted name that someone else made is left alone.
    let taken = instance_profile::name(REGION, CLUSTER, "taken");
    world.clients.iam.create_instance_profile().instance_profile_name(&taken).send().await.unwrap();
    let theirs = cloud.resolve(&with_role(example_class.clone(), "taken", NODE_ROLE)).await.unwrap();
    let why = theirs.instance_profile_problem.unwrap_or_default();
    assert!(theirs.instance_profile.is_none() && why.contains("left alone"), "{why}");
    let untouched = profile(&world, &taken).await.unwrap();
    assert!(untouched.path() == "/" && untouched.roles().is_empty());

    // Listed under the cluster's path with their classes (moto ignores PathPrefix: the adapter
    // filters too); someone else's is not among them.
    let mut ours: Vec<(String, String)> =
        cloud.instance_profiles().await.unwrap().into_iter().map(|l| (l.class, l.name)).collect();
    ours.sort();
    let ghost_name = instance_profile::name(REGION, CLUSTER, "ghost");
    assert_eq!(ours, [("default".to_string(), name.clone()), ("ghost".to_string(), ghost_name.clone())]);

    // Deleted with its role taken out first; deleting what is gone is no error.
    cloud.delete_instance_profile(&name).await.unwrap();
    assert!(profile(&world, &name).await.is_none());
    cloud.delete_instance_profile(&name).await.unwrap();
    cloud.delete_instance_profile(&ghost_name).await.unwrap();
    assert!(cloud.instance_profiles().await.unwrap().is_empty());
    // The role itself is not touched.
    world.clients.iam.get_role().role_name(NODE_ROLE).send().await.unwrap();
}

/// EC2's answer to an instant fleet whose launch template names an instance profile it does not
/// see yet.
const PROFILE_NOT_VISIBLE: FleetError = FleetError {
    code: "InvalidParameterValue",
    message: "Value (demo-cluster_0123456789abcdef) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name",
    lifecycle: "on-demand",
};

fn request(class: &NodeClass, resolved: &dovetail_core::cluster::ResolvedClass, claim: &str) -> LaunchRequest {
    LaunchRequest {
        claim: NodeClaim::launching(claim, "default", &class.name, Time::from_secs(1)),
        class: class.clone(),
        resolved: resolved.clone(),
        offers: vec![Offer {
            instance_type: "m6g.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::OnDemand,
            price: 0.077,
            reservation: None,
        }],
    }
}

/// An adapter whose first `refuse` CreateFleet calls EC2 answers as before it sees a new profile,
/// waiting 20 ms before each of its three relaunches.
fn refusing(world: &World, refuse: usize) -> (Ec2Cloud, CannedFleet) {
    let injector = CannedFleet::new(PROFILE_NOT_VISIBLE, move |_, refused| refused < refuse);
    let mut clients = world.clients.clone();
    clients.ec2 = injector.client(&world.sdk);
    let waits = vec![Duration::from_millis(20); 3];
    (Ec2Cloud::new(&clients, &world.config, World::facts()).with_profile_waits(waits), injector)
}

#[tokio::test]
async fn a_launch_refused_for_a_profile_ec2_does_not_see_yet_is_launched_again() {
    let world = World::new().await;
    world.network().await;
    world.images().await;
    let class = with_role(example().nodeclasses.remove(0), "default", NODE_ROLE);

    // Refused twice, then launched: one instance, each try a request of its own.
    let (cloud, injector) = refusing(&world, 2);
    let resolved = cloud.resolve(&class).await.unwrap();
    let profile = resolved.instance_profile.clone().expect("made");
    let outcome = cloud.launch(&request(&class, &resolved, "default-abc12")).await.unwrap();
    let LaunchOutcome::Launched(launch) = outcome else { panic!("{outcome:?}") };
    assert_eq!(injector.refusals(), 2);
    let tokens = injector.tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 3, "{tokens:?}");
    assert!(tokens[0] != tokens[1] && tokens[1] != tokens[2], "{tokens:?}");
    let live = world.clients.ec2.describe_instances().send().await.unwrap();
    let launched: Vec<&str> =
        live.reservations().iter().flat_map(|r| r.instances()).filter_map(|i| i.instance_id()).collect();
    assert_eq!(launched, [launch.instance_id.as_str()]);

    // The launch template names the class's profile.
    let templates = world.clients.ec2.describe_launch_templates().send().await.unwrap();
    let template = templates.launch_templates()[0].launch_template_name().unwrap().to_string();
    let versions =
        world.clients.ec2.describe_launch_template_versions().launch_template_name(&template).send().await.unwrap();
    let data = versions.launch_template_versions()[0].launch_template_data().unwrap();
    assert_eq!(data.iam_instance_profile().and_then(|p| p.name()), Some(profile.as_str()));

    // Still refused after the last wait: unavailable (the launch is resumed later), saying why.
    let (cloud, injector) = refusing(&world, usize::MAX);
    match cloud.launch(&request(&class, &resolved, "default-def34")).await {
        Err(PortError::Unavailable(m)) => {
            assert!(m.contains(&format!("still does not see instance profile {profile} after 4 tries")), "{m}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(injector.refusals(), 4);
}
