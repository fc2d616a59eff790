//! `Ec2Cloud::instances_of` against moto: only what a per-event read asks for — by id (the
//! `instance-id` filter, chunked under EC2's 200 filter values a call) and by the
//! `dovetail.dev/nodeclaim` tag — among the cluster's instances only; unknown ids are no error;
//! an empty query makes no call. `instances`, the sweeper's, describes them all.

use std::collections::BTreeSet;

use dovetail_aws::ec2::{TAG_CLUSTER, TAG_NODECLAIM};
use dovetail_aws::Ec2Cloud;
use dovetail_core::cluster::InstanceQuery;
use dovetail_core::reconcile::ports::Cloud;

use super::describes::{tally, Describes, Kind};
use super::{World, CLUSTER};

#[tokio::test]
async fn instances_of_describes_only_what_it_is_asked_for() {
    let world = World::new().await;
    // 230 instances of the cluster with no claim tag, 5 tagged for claims, 3 of another cluster.
    let crowd = world.run_instances(230, &[(TAG_CLUSTER, CLUSTER)]).await;
    let mut claimed = Vec::new();
    for i in 0..5 {
        let claim = format!("default-{i}");
        claimed.extend(world.run_instances(1, &[(TAG_CLUSTER, CLUSTER), (TAG_NODECLAIM, claim.as_str())]).await);
    }
    let theirs = world.run_instances(3, &[(TAG_CLUSTER, "other-cluster")]).await;
    let describes = Describes::default();
    let cloud = Ec2Cloud::new(&describes.clients(&world), &world.config, World::facts());

    // Nothing asked: no call.
    assert!(cloud.instances_of(&InstanceQuery::default()).await.unwrap().is_empty());
    assert!(describes.take().is_empty());

    // 210 ids of ours, one of another cluster, one EC2 never knew: 210 back, in two calls.
    let mut query = InstanceQuery::default();
    for id in &crowd[..210] {
        query.instance(id);
    }
    query.instance(&theirs[0]);
    query.instance("i-0123456789abcdef0");
    let got: BTreeSet<String> = cloud.instances_of(&query).await.unwrap().into_iter().map(|i| i.id).collect();
    assert_eq!(got, crowd[..210].iter().cloned().collect::<BTreeSet<String>>());
    let calls = describes.take();
    assert_eq!(tally(&calls, Kind::ById), (2, 210), "{calls:?}");
    assert_eq!(calls.len(), 2, "{calls:?}");

    // By claim tag (two claims, one unknown), and one instance asked for both ways: listed once.
    let mut query = InstanceQuery::default();
    query.claims.extend(["default-1".to_string(), "default-3".to_string(), "default-gone".to_string()]);
    query.instance(&claimed[1]);
    let got = cloud.instances_of(&query).await.unwrap();
    let ids: Vec<&str> = got.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(
        ids.iter().copied().collect::<BTreeSet<&str>>(),
        BTreeSet::from([claimed[1].as_str(), claimed[3].as_str()])
    );
    let tagged = got.iter().find(|i| i.id == claimed[3]).unwrap();
    assert_eq!(tagged.tags.get(TAG_NODECLAIM).map(String::as_str), Some("default-3"));
    assert_eq!(tagged.state, "running");
    let calls = describes.take();
    assert_eq!((tally(&calls, Kind::ById), tally(&calls, Kind::ByClaim)), ((1, 1), (1, 2)), "{calls:?}");

    // The sweeper's read: every instance of the cluster, none of the other's.
    let all = cloud.instances().await.unwrap();
    assert_eq!(all.len(), 235);
    assert!(all.iter().all(|i| !theirs.contains(&i.id)));
    let (_, returned) = tally(&describes.take(), Kind::All);
    assert_eq!(returned, 235);
}
