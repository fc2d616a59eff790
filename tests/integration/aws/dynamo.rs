//! The single table on moto's DynamoDB: conditional claim writes, the instance index, the
//! unavailable offerings, the provisioning lease, and claim reads that cost what changed (the
//! `live-claims` and `claims-by-change` indexes, the claims a warm store keeps).

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

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
    // Terminated claims are history: out of `claims()`, still readable by name.
    let mut names: Vec<String> = store.claims().await.unwrap().into_iter().map(|c| c.name).collect();
    names.sort();
    assert_eq!(names, vec!["default-def".to_string()]);
    assert_eq!(store.claim("default-abc").await.unwrap().map(|c| c.phase), Some(Phase::Terminated));

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

// --- Reads ∝ change: the live-claims and claims-by-change indexes -------------------------------

/// A claim of the `default` pool, launched as instance `i-<name>`.
fn launched(name: &str, version: u64) -> NodeClaim {
    let mut c = NodeClaim::launching(name, "default", "default", Time::from_secs(1));
    c.version = version;
    c.phase = Phase::Launched;
    c.launch = Some(launch(&format!("i-{name}")));
    c
}

/// Writes `live` launched claims (`live-0`, …) and `terminated` Terminated ones (`old-0`, …)
/// straight into the table as the store would have written them at `at`: a cluster's claims and
/// the history the TTL keeps, written before the test's reader ever read.
async fn seed(world: &World, store: &DynamoStore, live: usize, terminated: usize, at: SystemTime) {
    use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
    let mut claims: Vec<NodeClaim> = (0..live).map(|i| launched(&format!("live-{i}"), 1)).collect();
    claims.extend((0..terminated).map(|i| {
        let mut c = launched(&format!("old-{i}"), 7);
        c.phase = Phase::Terminated;
        c
    }));
    let requests: Vec<WriteRequest> = claims
        .iter()
        .map(|c| {
            let item = store.layout().claim_item(c, at).unwrap();
            WriteRequest::builder().put_request(PutRequest::builder().set_item(Some(item)).build().unwrap()).build()
        })
        .collect();
    for batch in requests.chunks(25) {
        let out = world.clients.dynamodb.batch_write_item().request_items(TABLE, batch.to_vec()).send().await.unwrap();
        assert!(out.unprocessed_items().is_none_or(|u| u.is_empty()), "moto left items unwritten");
    }
}

/// Items a read of the whole partition would read (what `claims()` read before the indexes).
async fn partition_items(world: &World, store: &DynamoStore) -> i32 {
    let out = world
        .clients
        .dynamodb
        .query()
        .table_name(TABLE)
        .consistent_read(true)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", aws_sdk_dynamodb::types::AttributeValue::S(store.layout().pk()))
        .select(aws_sdk_dynamodb::types::Select::Count)
        .send()
        .await
        .unwrap();
    out.scanned_count
}

fn names(claims: &[NodeClaim]) -> Vec<String> {
    claims.iter().map(|c| c.name.clone()).collect()
}

fn an_hour_ago() -> SystemTime {
    SystemTime::now() - Duration::from_secs(3600)
}

/// Reads `claims()` on `store`; the claims and the items the read cost.
async fn counted(store: &DynamoStore) -> (Vec<NodeClaim>, u64) {
    let before = store.items_read();
    let claims = store.claims().await.unwrap();
    (claims, store.items_read() - before)
}

#[tokio::test]
async fn a_cold_read_reads_only_the_live_claims_however_much_history_the_table_keeps() {
    let world = World::new().await;
    let writer = store(&world).await;
    seed(&world, &writer, 20, 500, an_hour_ago()).await;
    assert_eq!(partition_items(&world, &writer).await, 520);

    // Pages of 7: the paginator follows all three.
    let reader = store(&world).await.with_page_size(7);
    let (claims, read) = counted(&reader).await;
    let mut expected: Vec<String> = (0..20).map(|i| format!("live-{i}")).collect();
    expected.sort();
    assert_eq!(names(&claims), expected, "live claims only, by name");
    assert!(claims.iter().all(|c| c.phase == Phase::Launched && c.version == 1));
    assert_eq!(read, 20, "a cold read reads the 20 live claims, not the 500 Terminated ones");
    eprintln!("cold read: {read} items read for 20 live claims; the partition holds 520 claim items");
}

#[tokio::test]
async fn a_warm_read_reads_what_changed_and_sees_other_writers() {
    let world = World::new().await;
    let writer = store(&world).await;
    seed(&world, &writer, 50, 500, an_hour_ago()).await;
    let reader = store(&world).await;
    let (cold, cold_read) = counted(&reader).await;
    assert_eq!((cold.len(), cold_read), (50, 50));

    // Nothing changed: nothing read.
    let (warm, read) = counted(&reader).await;
    assert_eq!((warm.len(), read), (50, 0));

    // Another writer: one claim moves on, one is Terminated, one deleted (launch gave up), one
    // is new.
    let mut moved = launched("live-1", 2);
    moved.phase = Phase::Registered;
    moved.node_name = Some("ip-10-0-0-1.ec2.internal".into());
    writer.put_claim(&moved).await.unwrap();
    let mut ended = launched("live-2", 2);
    ended.phase = Phase::Terminated;
    writer.put_claim(&ended).await.unwrap();
    writer.delete_claim("live-3", 1).await.unwrap();
    let new = NodeClaim::launching("default-new", "default", "default", Time::from_secs(5));
    writer.put_claim(&new).await.unwrap();

    let (warm, read) = counted(&reader).await;
    assert_eq!(read, 4, "a warm read reads the 4 changed items, not the 550 in the table");
    let by_name = |n: &str| warm.iter().find(|c| c.name == n).cloned();
    assert_eq!(by_name("live-1"), Some(moved), "an update arrives");
    assert_eq!(by_name("live-2"), None, "a claim Terminated elsewhere leaves");
    assert_eq!(by_name("live-3"), None, "a claim deleted elsewhere leaves");
    assert_eq!(by_name("default-new"), Some(new), "a claim created elsewhere arrives");
    assert_eq!(warm.len(), 49);
    // The kept view is what a cold process reads.
    assert_eq!(warm, store(&world).await.claims().await.unwrap());
    eprintln!("warm read after 4 changes: {read} items read; the partition holds 550 claim items");

    // Within the margin (a minute) the same changes are read again, and only they: what a warm
    // read costs is the claims written in the last minute, never the table.
    let (again, read) = counted(&reader).await;
    assert_eq!((again, read), (warm, 4));
}

#[tokio::test]
async fn a_warm_reader_sees_its_own_writes_and_rereads_a_claim_it_missed() {
    let world = World::new().await;
    let writer = store(&world).await;
    seed(&world, &writer, 3, 10, an_hour_ago()).await;
    let reader = store(&world).await;
    assert_eq!(counted(&reader).await.1, 3);

    // Its own write is in its view, Terminated or deleted claims leave it.
    let mut ended = launched("live-0", 2);
    ended.phase = Phase::Terminated;
    reader.put_claim(&ended).await.unwrap();
    reader.delete_claim("live-1", 1).await.unwrap();
    assert_eq!(names(&reader.claims().await.unwrap()), ["live-2"]);

    // A write the reader's window missed (stamped an hour back: a request stalled beyond the
    // margin). The reader's stale copy loses its condition; the store then re-reads that claim,
    // so the caller's re-read decides from the stored one.
    let mut elsewhere = launched("live-2", 2);
    elsewhere.phase = Phase::Registered;
    let item = writer.layout().claim_item(&elsewhere, an_hour_ago()).unwrap();
    world.clients.dynamodb.put_item().table_name(TABLE).set_item(Some(item)).send().await.unwrap();
    assert_eq!(reader.claims().await.unwrap(), vec![launched("live-2", 1)], "missed: still the old one");
    let mut stale = launched("live-2", 2);
    stale.phase = Phase::Draining;
    assert!(matches!(reader.put_claim(&stale).await, Err(PortError::Conflict(_))));
    assert_eq!(reader.claims().await.unwrap(), vec![elsewhere]);
}

#[tokio::test]
async fn a_deleted_claim_leaves_a_tombstone_that_only_readers_of_changes_see() {
    let world = World::new().await;
    let store = store(&world).await;
    let claim = launched("default-abc", 0);
    store.put_claim(&claim).await.unwrap();
    store.delete_claim("default-abc", 0).await.unwrap();
    assert_eq!(store.claim("default-abc").await.unwrap(), None);
    assert!(store.claim_by_instance("i-default-abc").await.unwrap().is_none());
    assert!(store.claims().await.unwrap().is_empty());
    // A writer that read the claim before it was deleted loses; the name may be used again.
    let mut late = claim.clone();
    late.version = 1;
    assert!(matches!(store.put_claim(&late).await, Err(PortError::Conflict(_))));
    store.put_claim(&claim).await.unwrap();
    assert_eq!(store.claim("default-abc").await.unwrap(), Some(claim.clone()));
    assert_eq!(store.claims().await.unwrap(), vec![claim]);
    // Deleting what was never written writes a tombstone and succeeds, as a delete of nothing.
    store.delete_claim("never-written", 4).await.unwrap();
    assert_eq!(store.claim("never-written").await.unwrap(), None);
}
