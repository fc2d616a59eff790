//! The single table on moto's DynamoDB: conditional claim writes, the instance index, the
//! unavailable offerings and the provisioning lease.

use std::collections::BTreeSet;
use std::time::Duration;

use dovetail_aws::dynamo::create_table;
use dovetail_aws::DynamoStore;
use dovetail_core::catalog::{CapacityType, OfferingKey};
use dovetail_core::nodeclaim::{Launch, NodeClaim, Phase};
use dovetail_core::reconcile::ports::{Lease, PortError, Store};
use dovetail_core::time::Time;

use super::{World, CLUSTER, TABLE};

async fn store(world: &World) -> DynamoStore {
    create_table(&world.clients.dynamodb, TABLE).await.unwrap();
    // Idempotent.
    create_table(&world.clients.dynamodb, TABLE).await.unwrap();
    DynamoStore::new(world.clients.dynamodb.clone(), TABLE, CLUSTER, Duration::from_secs(7 * 86_400))
}

fn launch(id: &str) -> Launch {
    Launch {
        instance_id: id.into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: CapacityType::Spot,
        image_id: "ami-1".into(),
        subnet_id: "subnet-1".into(),
        security_groups: vec!["sg-1".into()],
        price: 0.03,
        launched_at: Time::from_secs(10),
    }
}

#[tokio::test]
async fn claims_are_written_conditionally_and_found_by_instance() {
    let world = World::new().await;
    let store = store(&world).await;
    let mut claim = NodeClaim::launching("default-abc", "default", "default", Time::from_secs(1));

    store.put_claim(&claim).await.unwrap();
    // Version 0 creates only.
    assert!(matches!(store.put_claim(&claim).await, Err(PortError::Conflict(_))));
    assert_eq!(store.claim("default-abc").await.unwrap(), Some(claim.clone()));

    // Version n replaces version n - 1 only.
    let stale = claim.clone();
    claim.version = 1;
    claim.phase = Phase::Launched;
    claim.launch = Some(launch("i-0123"));
    store.put_claim(&claim).await.unwrap();
    let mut late = stale.clone();
    late.version = 1; // a writer that also read version 0
    assert!(matches!(store.put_claim(&late).await, Err(PortError::Conflict(_))));
    let mut skipping = claim.clone();
    skipping.version = 3;
    assert!(matches!(store.put_claim(&skipping).await, Err(PortError::Conflict(_))));
    let mut ghost = NodeClaim::launching("never-written", "default", "default", Time::from_secs(1));
    ghost.version = 1;
    assert!(matches!(store.put_claim(&ghost).await, Err(PortError::Conflict(_))));

    // The index by instance id; another cluster's claim in the same table stays apart.
    assert_eq!(store.claim_by_instance("i-0123").await.unwrap(), Some(claim.clone()));
    assert_eq!(store.claim_by_instance("i-none").await.unwrap(), None);
    let other = DynamoStore::new(world.clients.dynamodb.clone(), TABLE, "other-cluster", Duration::from_secs(60));
    assert_eq!(other.claim_by_instance("i-0123").await.unwrap(), None);
    assert!(other.claims().await.unwrap().is_empty());

    // Terminated claims carry the TTL attribute.
    claim.version = 2;
    claim.phase = Phase::Terminated;
    store.put_claim(&claim).await.unwrap();
    let item = world
        .clients
        .dynamodb
        .get_item()
        .table_name(TABLE)
        .set_key(Some(store.layout().key(dovetail_aws::dynamo::Layout::claim_sk("default-abc"))))
        .send()
        .await
        .unwrap();
    let expires: u64 = item.item().unwrap()["expires_at"].as_n().unwrap().parse().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert!(expires > now + 6 * 86_400 && expires <= now + 7 * 86_400 + 60, "{expires}");

    let second = NodeClaim::launching("default-def", "default", "default", Time::from_secs(2));
    store.put_claim(&second).await.unwrap();
    let mut names: Vec<String> = store.claims().await.unwrap().into_iter().map(|c| c.name).collect();
    names.sort();
    assert_eq!(names, vec!["default-abc".to_string(), "default-def".to_string()]);

    // Deletes need the stored version; absent is success.
    assert!(matches!(store.delete_claim("default-abc", 1).await, Err(PortError::Conflict(_))));
    store.delete_claim("default-abc", 2).await.unwrap();
    store.delete_claim("default-abc", 2).await.unwrap();
    assert_eq!(store.claim("default-abc").await.unwrap(), None);
}

#[tokio::test]
async fn unavailable_offerings_expire() {
    let world = World::new().await;
    let store = store(&world).await;
    let key =
        |t: &str| OfferingKey { instance_type: t.into(), zone: "us-east-1a".into(), capacity_type: CapacityType::Spot };
    store.mark_unavailable(&key("m5.large"), Time(180_000)).await.unwrap();
    store.mark_unavailable(&key("c5.large"), Time(60_000)).await.unwrap();
    // A shorter mark never shortens a longer one.
    store.mark_unavailable(&key("m5.large"), Time(100_000)).await.unwrap();

    assert_eq!(store.unavailable(Time(0)).await.unwrap(), BTreeSet::from([key("c5.large"), key("m5.large")]));
    assert_eq!(store.unavailable(Time(60_000)).await.unwrap(), BTreeSet::from([key("m5.large")]));
    assert_eq!(store.unavailable(Time(150_000)).await.unwrap(), BTreeSet::from([key("m5.large")]));
    assert!(store.unavailable(Time(180_000)).await.unwrap().is_empty());
}

#[tokio::test]
async fn lease_busy_marks_dirty_and_release_loops_once() {
    let world = World::new().await;
    let store = store(&world).await;
    let ttl = Duration::from_secs(60);
    let t = |s: i64| Time::from_secs(s);

    assert_eq!(store.lease("a", t(0), ttl).await.unwrap(), Lease::Acquired);
    // Re-acquiring one's own lease renews it.
    assert_eq!(store.lease("a", t(1), ttl).await.unwrap(), Lease::Acquired);
    // Someone else: busy, and the lease is now dirty.
    assert_eq!(store.lease("b", t(2), ttl).await.unwrap(), Lease::Busy);
    assert_eq!(store.lease("c", t(3), ttl).await.unwrap(), Lease::Busy);
    // The holder is told to reconcile once more, keeps the lease, then releases it.
    assert!(store.release("a", t(4), ttl).await.unwrap());
    assert_eq!(store.lease("b", t(5), ttl).await.unwrap(), Lease::Busy);
    assert!(store.release("a", t(6), ttl).await.unwrap());
    assert!(!store.release("a", t(7), ttl).await.unwrap());
    // Released: free for the next.
    assert_eq!(store.lease("b", t(8), ttl).await.unwrap(), Lease::Acquired);
    // A lapsed lease is taken over; the old holder's release does nothing.
    assert_eq!(store.lease("c", t(8 + 61), ttl).await.unwrap(), Lease::Acquired);
    assert!(!store.release("b", t(70), ttl).await.unwrap());
    assert_eq!(store.lease("b", t(71), ttl).await.unwrap(), Lease::Busy);
    assert!(store.release("c", t(72), ttl).await.unwrap());
    assert!(!store.release("c", t(73), ttl).await.unwrap());
}
