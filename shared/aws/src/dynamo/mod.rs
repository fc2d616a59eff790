//! [`Store`] on one DynamoDB table (single-table design).
//!
//! Every item of a cluster shares the partition `pk = CLUSTER#<cluster>`; the sort key says what
//! the item is:
//!
//! | item | `sk` | attributes |
//! |---|---|---|
//! | NodeClaim | `CLAIM#<name>` | `claim` (S: the NodeClaim as JSON), `version` (N), `phase` (S), `instance_id` (S, once launched: key of the `by-instance` index), `expires_at` (N, epoch seconds: TTL, on Terminated claims only) |
//! | unavailable offering | `UNAVAILABLE#<capacity type>#<zone>#<instance type>` | `instance_type`, `zone`, `capacity_type` (S), `until` (N, epoch ms), `expires_at` (N, epoch seconds: TTL, an hour after `until`) |
//! | provisioning lease | `LEASE#provisioning` | `holder` (S), `until` (N, epoch ms), `dirty` (BOOL) |
//!
//! - Table keys `pk` (S, hash) and `sk` (S, range); on-demand billing; TTL attribute `expires_at`.
//! - Global secondary index `by-instance`: hash key `instance_id` (S), all attributes projected.
//!   Sparse: only launched claims carry `instance_id`. Index reads are eventually consistent.
//! - NodeClaim writes are conditional on `version`: version 0 creates only
//!   (`attribute_not_exists(pk)`), any other version replaces only the item whose stored
//!   `version` is one less; deletes require the stored version (absent is success). A lost
//!   condition is [`PortError::Conflict`].
//! - Reads of the partition are strongly consistent, so a reconciler sees its own last write.
//! - Expired unavailable offerings are filtered on read; DynamoDB's TTL removes them later
//!   (TTL deletion lags by up to days, so reads never rely on it), as it does Terminated claims.
//! - The lease: see [`DynamoStore`]'s `lease` and `release`.
//!
//! [`create_table`] makes such a table (tests, local runs); the infrastructure templates declare
//! the same.

mod table;

pub use table::{create_table, GSI_BY_INSTANCE};

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use dovetail_core::catalog::{CapacityType, OfferingKey};
use dovetail_core::nodeclaim::{NodeClaim, Phase};
use dovetail_core::reconcile::ports::{Lease, PortError, PortResult, Store};
use dovetail_core::time::Time;

use crate::error::{api_error, AwsError, AwsResult, ErrorKind};

/// One DynamoDB item.
pub type Item = HashMap<String, AttributeValue>;

const CLAIM_PREFIX: &str = "CLAIM#";
const UNAVAILABLE_PREFIX: &str = "UNAVAILABLE#";
const LEASE_SK: &str = "LEASE#provisioning";
/// Unavailable-offering items linger this long after they lapse before TTL may delete them.
const UNAVAILABLE_LINGER: Duration = Duration::from_secs(3600);

/// The table's item layout for one cluster: keys and the codecs between items and the core's
/// types. Pure, so it is tested without a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub cluster: String,
    /// How long a Terminated claim stays.
    pub terminated_ttl: Duration,
}

impl Layout {
    pub fn pk(&self) -> String {
        format!("CLUSTER#{}", self.cluster)
    }

    pub fn claim_sk(name: &str) -> String {
        format!("{CLAIM_PREFIX}{name}")
    }

    pub fn unavailable_sk(o: &OfferingKey) -> String {
        format!("{UNAVAILABLE_PREFIX}{}#{}#{}", o.capacity_type, o.zone, o.instance_type)
    }

    pub fn key(&self, sk: String) -> Item {
        HashMap::from([("pk".to_string(), s(self.pk())), ("sk".to_string(), s(sk))])
    }

    /// The item stored for `claim`; `now` dates the TTL of a Terminated claim.
    pub fn claim_item(&self, claim: &NodeClaim, now: SystemTime) -> AwsResult<Item> {
        let json = serde_json::to_string(claim)
            .map_err(|e| AwsError::Item { key: Self::claim_sk(&claim.name), message: e.to_string() })?;
        let mut item = self.key(Self::claim_sk(&claim.name));
        item.insert("claim".into(), s(json));
        item.insert("version".into(), n(claim.version));
        item.insert("phase".into(), s(claim.phase.to_string()));
        if let Some(launch) = &claim.launch {
            item.insert("instance_id".into(), s(launch.instance_id.clone()));
        }
        if claim.phase == Phase::Terminated {
            let at = now.checked_add(self.terminated_ttl).unwrap_or(now);
            item.insert("expires_at".into(), n(epoch_secs(at)));
        }
        Ok(item)
    }

    pub fn claim_from_item(item: &Item) -> AwsResult<NodeClaim> {
        let key = item.get("sk").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
        let json = item
            .get("claim")
            .and_then(|v| v.as_s().ok())
            .ok_or_else(|| AwsError::Item { key: key.clone(), message: "no `claim` attribute".into() })?;
        serde_json::from_str(json).map_err(|e| AwsError::Item { key, message: e.to_string() })
    }

    pub fn unavailable_item(&self, o: &OfferingKey, until: Time) -> Item {
        let mut item = self.key(Self::unavailable_sk(o));
        item.insert("instance_type".into(), s(o.instance_type.clone()));
        item.insert("zone".into(), s(o.zone.clone()));
        item.insert("capacity_type".into(), s(o.capacity_type.to_string()));
        item.insert("until".into(), n(until.millis()));
        item.insert("expires_at".into(), n(until.plus(UNAVAILABLE_LINGER).millis() / 1000));
        item
    }

    /// The offering an item names, if it is still unavailable at `now`.
    pub fn unavailable_from_item(item: &Item, now: Time) -> AwsResult<Option<OfferingKey>> {
        let key = item.get("sk").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
        let bad = |what: &str| AwsError::Item { key: key.clone(), message: format!("bad or missing `{what}`") };
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).ok_or_else(|| bad(name));
        let until = number(item, "until").ok_or_else(|| bad("until"))?;
        if until <= now.millis() {
            return Ok(None);
        }
        Ok(Some(OfferingKey {
            instance_type: text("instance_type")?.clone(),
            zone: text("zone")?.clone(),
            capacity_type: CapacityType::parse(text("capacity_type")?).ok_or_else(|| bad("capacity_type"))?,
        }))
    }
}

/// [`Store`] on DynamoDB.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    layout: Layout,
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn number(item: &Item, name: &str) -> Option<i64> {
    item.get(name).and_then(|v| v.as_n().ok()).and_then(|v| v.parse().ok())
}

fn epoch_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// True when the error is a lost condition (what conditional writes expect now and then).
fn lost(e: &AwsError) -> bool {
    matches!(e, AwsError::Api { kind: ErrorKind::Conflict, .. })
}

/// Whether a conditional write happened: `false` when its condition did not hold.
fn applied<T, E>(operation: &'static str, result: Result<T, SdkError<E>>) -> AwsResult<bool>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match result {
        Ok(_) => Ok(true),
        Err(e) => match api_error(operation, e) {
            e if lost(&e) => Ok(false),
            e => Err(e),
        },
    }
}

impl DynamoStore {
    pub fn new(client: Client, table: &str, cluster: &str, terminated_ttl: Duration) -> DynamoStore {
        DynamoStore {
            client,
            table: table.to_string(),
            layout: Layout { cluster: cluster.to_string(), terminated_ttl },
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Reads one item (the lease), so a Lambda's init opens the connection and a missing table or
    /// permission fails there, with DynamoDB's message, not in the first invocation.
    pub async fn check(&self) -> AwsResult<()> {
        self.get_lease().await.map(|_| ())
    }

    /// Items of this cluster whose sort key starts with `prefix` (strongly consistent).
    async fn query_prefix(&self, prefix: &str) -> AwsResult<Vec<Item>> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .consistent_read(true)
                .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":pk", s(self.layout.pk()))
                .expression_attribute_values(":prefix", s(prefix))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| api_error("Query", e))?;
            out.extend(page.items().iter().cloned());
            match page.last_evaluated_key() {
                Some(k) if !k.is_empty() => start = Some(k.clone()),
                _ => return Ok(out),
            }
        }
    }

    /// The claim launched as `instance_id`, through the `by-instance` index (eventually
    /// consistent): how interruption events, which name instances, find their claims.
    pub async fn claim_by_instance(&self, instance_id: &str) -> PortResult<Option<NodeClaim>> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(GSI_BY_INSTANCE)
            .key_condition_expression("instance_id = :id")
            .expression_attribute_values(":id", s(instance_id))
            .send()
            .await
            .map_err(|e| api_error("Query", e))?;
        let pk = self.layout.pk();
        let mut found = None;
        for item in out.items() {
            if item.get("pk").and_then(|v| v.as_s().ok()) == Some(&pk) {
                found = Some(Layout::claim_from_item(item)?);
            }
        }
        Ok(found)
    }

    async fn get_lease(&self) -> AwsResult<Option<(String, i64, bool)>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .consistent_read(true)
            .set_key(Some(self.layout.key(LEASE_SK.into())))
            .send()
            .await
            .map_err(|e| api_error("GetItem", e))?;
        Ok(out.item().map(|item| {
            let holder = item.get("holder").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
            let until = number(item, "until").unwrap_or(0);
            let dirty = item.get("dirty").and_then(|v| v.as_bool().ok()).copied().unwrap_or(false);
            (holder, until, dirty)
        }))
    }

    /// Takes the lease if it is free, lapsed or already ours; clean (not dirty).
    async fn try_acquire(&self, holder: &str, now: Time, ttl: Duration) -> AwsResult<bool> {
        let mut item = self.layout.key(LEASE_SK.into());
        item.insert("holder".into(), s(holder));
        item.insert("until".into(), n(now.plus(ttl).millis()));
        item.insert("dirty".into(), AttributeValue::Bool(false));
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk) OR #until <= :now OR holder = :holder")
            .expression_attribute_names("#until", "until")
            .expression_attribute_values(":now", n(now.millis()))
            .expression_attribute_values(":holder", s(holder))
            .send()
            .await;
        applied("PutItem", put)
    }

    /// Marks someone else's live lease dirty; false if there is no such lease any more.
    async fn try_mark_dirty(&self, holder: &str, now: Time) -> AwsResult<bool> {
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.layout.key(LEASE_SK.into())))
            .update_expression("SET dirty = :true")
            .condition_expression("attribute_exists(pk) AND #until > :now AND holder <> :holder")
            .expression_attribute_names("#until", "until")
            .expression_attribute_values(":true", AttributeValue::Bool(true))
            .expression_attribute_values(":now", n(now.millis()))
            .expression_attribute_values(":holder", s(holder))
            .send()
            .await;
        applied("UpdateItem", update)
    }

    /// Ours and dirty: clear the flag and renew. True when that happened.
    async fn try_clear_dirty(&self, holder: &str, now: Time, ttl: Duration) -> AwsResult<bool> {
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.layout.key(LEASE_SK.into())))
            .update_expression("SET dirty = :false, #until = :until")
            .condition_expression("holder = :holder AND dirty = :true")
            .expression_attribute_names("#until", "until")
            .expression_attribute_values(":false", AttributeValue::Bool(false))
            .expression_attribute_values(":true", AttributeValue::Bool(true))
            .expression_attribute_values(":until", n(now.plus(ttl).millis()))
            .expression_attribute_values(":holder", s(holder))
            .send()
            .await;
        applied("UpdateItem", update)
    }

    /// Ours and clean: delete it. True when that happened.
    async fn try_delete_clean(&self, holder: &str) -> AwsResult<bool> {
        let delete = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(self.layout.key(LEASE_SK.into())))
            .condition_expression("holder = :holder AND (attribute_not_exists(dirty) OR dirty = :false)")
            .expression_attribute_values(":holder", s(holder))
            .expression_attribute_values(":false", AttributeValue::Bool(false))
            .send()
            .await;
        applied("DeleteItem", delete)
    }
}

/// Conditional steps race with other invocations; this many rounds settle any interleaving
/// short of a livelock, which is reported as retryable.
const LEASE_ROUNDS: usize = 4;

impl Store for DynamoStore {
    async fn claims(&self) -> PortResult<Vec<NodeClaim>> {
        let items = self.query_prefix(CLAIM_PREFIX).await?;
        Ok(items.iter().map(Layout::claim_from_item).collect::<AwsResult<Vec<_>>>()?)
    }

    async fn claim(&self, name: &str) -> PortResult<Option<NodeClaim>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .consistent_read(true)
            .set_key(Some(self.layout.key(Layout::claim_sk(name))))
            .send()
            .await
            .map_err(|e| api_error("GetItem", e))?;
        Ok(out.item().map(Layout::claim_from_item).transpose()?)
    }

    async fn put_claim(&self, claim: &NodeClaim) -> PortResult<()> {
        let item = self.layout.claim_item(claim, SystemTime::now())?;
        let put = self.client.put_item().table_name(&self.table).set_item(Some(item));
        let put = if claim.version == 0 {
            put.condition_expression("attribute_not_exists(pk)")
        } else {
            put.condition_expression("version = :expected")
                .expression_attribute_values(":expected", n(claim.version - 1))
        };
        put.send().await.map_err(|e| api_error("PutItem", e)).map_err(|e| match e {
            e if lost(&e) => PortError::Conflict(format!(
                "NodeClaim {} version {}: {}",
                claim.name,
                claim.version,
                if claim.version == 0 { "already exists" } else { "stored version is not the one read" }
            )),
            e => e.into(),
        })?;
        Ok(())
    }

    async fn delete_claim(&self, name: &str, version: u64) -> PortResult<()> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(self.layout.key(Layout::claim_sk(name))))
            .condition_expression("attribute_not_exists(pk) OR version = :version")
            .expression_attribute_values(":version", n(version))
            .send()
            .await
            .map_err(|e| api_error("DeleteItem", e))
            .map_err(|e| match e {
                e if lost(&e) => PortError::Conflict(format!("NodeClaim {name}: stored version is not {version}")),
                e => e.into(),
            })?;
        Ok(())
    }

    async fn unavailable(&self, now: Time) -> PortResult<BTreeSet<OfferingKey>> {
        let items = self.query_prefix(UNAVAILABLE_PREFIX).await?;
        let mut out = BTreeSet::new();
        for item in &items {
            out.extend(Layout::unavailable_from_item(item, now)?);
        }
        Ok(out)
    }

    /// Never shortens an existing mark: a later `until` wins.
    async fn mark_unavailable(&self, offering: &OfferingKey, until: Time) -> PortResult<()> {
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.layout.unavailable_item(offering, until)))
            .condition_expression("attribute_not_exists(pk) OR #until < :until")
            .expression_attribute_names("#until", "until")
            .expression_attribute_values(":until", n(until.millis()))
            .send()
            .await;
        applied("PutItem", put)?;
        Ok(())
    }

    /// Acquired when the lease is absent, lapsed or already `holder`'s (then renewed and its
    /// dirty flag cleared: the holder is about to reconcile anyway). Otherwise the live holder's
    /// lease is marked dirty and the answer is Busy.
    async fn lease(&self, holder: &str, now: Time, ttl: Duration) -> PortResult<Lease> {
        for _ in 0..LEASE_ROUNDS {
            if self.try_acquire(holder, now, ttl).await? {
                return Ok(Lease::Acquired);
            }
            if self.try_mark_dirty(holder, now).await? {
                return Ok(Lease::Busy);
            }
            // Released or lapsed between the two writes: try again.
        }
        Err(PortError::Unavailable("provisioning lease: contention did not settle".into()))
    }

    /// Dirty: cleared and renewed, `true` (reconcile once more). Clean: deleted, `false`. Not
    /// ours any more (lapsed and taken, or gone): `false`, the current holder covers the work.
    async fn release(&self, holder: &str, now: Time, ttl: Duration) -> PortResult<bool> {
        for _ in 0..LEASE_ROUNDS {
            if self.try_clear_dirty(holder, now, ttl).await? {
                return Ok(true);
            }
            if self.try_delete_clean(holder).await? {
                return Ok(false);
            }
            match self.get_lease().await? {
                Some((h, _, _)) if h == holder => continue, // marked dirty in between
                _ => return Ok(false),
            }
        }
        Err(PortError::Unavailable("provisioning lease: contention did not settle".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_core::nodeclaim::Launch;

    fn layout() -> Layout {
        Layout { cluster: "prod".into(), terminated_ttl: Duration::from_secs(7 * 86_400) }
    }

    #[test]
    fn claims_round_trip_with_key_and_index_attributes() {
        let mut claim = NodeClaim::launching("default-abc", "default", "default", Time::from_secs(100));
        claim.version = 3;
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let item = layout().claim_item(&claim, now).unwrap();
        assert_eq!(item["pk"], s("CLUSTER#prod"));
        assert_eq!(item["sk"], s("CLAIM#default-abc"));
        assert_eq!(item["version"], n(3));
        assert_eq!(item["phase"], s("Launching"));
        assert!(!item.contains_key("instance_id") && !item.contains_key("expires_at"));
        assert_eq!(Layout::claim_from_item(&item).unwrap(), claim);

        claim.launch = Some(Launch {
            instance_id: "i-1".into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
            image_id: "ami-1".into(),
            subnet_id: "subnet-1".into(),
            security_groups: vec!["sg-1".into()],
            price: 0.03,
            launched_at: Time::from_secs(200),
        });
        claim.phase = Phase::Terminated;
        let item = layout().claim_item(&claim, now).unwrap();
        assert_eq!(item["instance_id"], s("i-1"));
        assert_eq!(item["expires_at"], n(1_000 + 7 * 86_400));
    }

    #[test]
    fn unavailable_items_lapse_at_until() {
        let o = OfferingKey {
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
        };
        let item = layout().unavailable_item(&o, Time(180_000));
        assert_eq!(item["sk"], s("UNAVAILABLE#spot#us-east-1a#m5.large"));
        assert_eq!(item["expires_at"], n(180 + 3600));
        assert_eq!(Layout::unavailable_from_item(&item, Time(179_999)).unwrap(), Some(o));
        assert_eq!(Layout::unavailable_from_item(&item, Time(180_000)).unwrap(), None);
    }

    #[test]
    fn unreadable_items_name_their_key() {
        let mut item = layout().key(Layout::claim_sk("x"));
        item.insert("claim".into(), s("{not json"));
        let e = Layout::claim_from_item(&item).unwrap_err();
        assert!(e.to_string().contains("CLAIM#x"), "{e}");
    }
}
