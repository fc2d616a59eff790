//! [`Store`] on one DynamoDB table (single-table design).
//!
//! Every item of a cluster shares the partition `pk = CLUSTER#<cluster>`; the sort key says what
//! the item is:
//!
//! | item | `sk` | attributes |
//! |---|---|---|
//! | NodeClaim | `CLAIM#<name>` | `claim` (S: the NodeClaim as JSON), `version` (N), `phase` (S), `changed` (N, epoch ms: when written), `live` (S, the name: on claims not Terminated only), `instance_id` (S, once launched: key of the `by-instance` index), `expires_at` (N, epoch seconds: TTL, on Terminated claims only) |
//! | deleted NodeClaim (tombstone) | `CLAIM#<name>` | `tombstone` (BOOL, true), `changed` (N), `expires_at` (N: TTL, an hour on) |
//! | unavailable offering | `UNAVAILABLE#<capacity type>#<zone>#<instance type>` | `instance_type`, `zone`, `capacity_type` (S), `until` (N, epoch ms), `expires_at` (N, epoch seconds: TTL, an hour after `until`) |
//! | provisioning lease | `LEASE#provisioning` | `holder` (S), `until` (N, epoch ms), `dirty` (BOOL) |
//!
//! - Table keys `pk` (S, hash) and `sk` (S, range); on-demand billing; TTL attribute `expires_at`.
//! - Global secondary index `by-instance`: hash key `instance_id` (S), all attributes projected.
//!   Sparse: only launched claims carry `instance_id`. Index reads are eventually consistent.
//! - Local secondary index `live-claims`: sort key `live` (S), all attributes. Sparse: only claims
//!   that are not Terminated carry `live`, so reading it costs what the live claims cost, however
//!   many Terminated ones the TTL still keeps.
//! - Local secondary index `claims-by-change`: sort key `changed` (N), all attributes; every claim
//!   write and tombstone carries it, nothing else does.
//!   Local, not global, indexes: only they answer strongly consistent queries, and a reconciler
//!   must see its own last write. The price: DynamoDB adds them only when it creates a table; a
//!   partition with local indexes holds at most 10 GB (a claim takes a few KB in the table and in
//!   each index: 168 h of history at 5,000 launches a day stays under 1 GB); and a claim write
//!   also writes the index entries it adds, changes or removes (up to three times the units).
//! - NodeClaim writes are conditional on `version`: version 0 creates only (no item, or a
//!   tombstone), any other version replaces only the item whose stored `version` is one less;
//!   deletes require the stored version (absent is success) and leave a tombstone, so that
//!   processes reading changes see the claim go. A lost condition is [`PortError::Conflict`].
//! - Reads of the partition and its local indexes are strongly consistent, so a reconciler sees
//!   its own last write.
//! - `claims()` reads ∝ change: a process keeps the live claims it read ([`kept`]) and afterwards
//!   reads only the claim items written since (`claims-by-change`), with a full read of
//!   `live-claims` when it starts and every [`kept::RESYNC_AFTER`].
//! - Expired unavailable offerings are filtered on read; DynamoDB's TTL removes them later
//!   (TTL deletion lags by up to days, so reads never rely on it), as it does Terminated claims and
//!   tombstones.
//! - The lease: see [`DynamoStore`]'s `lease` and `release`.
//!
//! [`create_table`] makes such a table (tests, local runs); the infrastructure templates declare
//! the same.

pub mod kept;
mod table;

pub use table::{create_table, GSI_BY_INSTANCE, LSI_CHANGED, LSI_LIVE};

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, ConsumedCapacity, ReturnConsumedCapacity};
use aws_sdk_dynamodb::Client;
use dovetail_core::catalog::{CapacityType, OfferingKey};
use dovetail_core::nodeclaim::{NodeClaim, Phase};
use dovetail_core::reconcile::ports::{Lease, PortError, PortResult, Store};
use dovetail_core::time::Time;

use crate::error::{api_error, AwsError, AwsResult, ErrorKind};
use kept::{Entry, Kept, Next, CHANGE_MARGIN, RESYNC_AFTER, TOMBSTONE_TTL};

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

    /// The item stored for `claim`, written at `now` (its change stamp, and the start of a
    /// Terminated claim's TTL).
    pub fn claim_item(&self, claim: &NodeClaim, now: SystemTime) -> AwsResult<Item> {
        let json = serde_json::to_string(claim)
            .map_err(|e| AwsError::Item { key: Self::claim_sk(&claim.name), message: e.to_string() })?;
        let mut item = self.key(Self::claim_sk(&claim.name));
        item.insert("claim".into(), s(json));
        item.insert("version".into(), n(claim.version));
        item.insert("phase".into(), s(claim.phase.to_string()));
        item.insert("changed".into(), n(epoch_millis(now)));
        if let Some(launch) = &claim.launch {
            item.insert("instance_id".into(), s(launch.instance_id.clone()));
        }
        if claim.phase == Phase::Terminated {
            let at = now.checked_add(self.terminated_ttl).unwrap_or(now);
            item.insert("expires_at".into(), n(epoch_secs(at)));
        } else {
            item.insert("live".into(), s(claim.name.clone()));
        }
        Ok(item)
    }

    /// What a deleted claim leaves for [`TOMBSTONE_TTL`]: readers of changes see it go. No
    /// `version` (so no write based on the deleted claim matches) and no `live`, `claim` or
    /// `instance_id` (so no other read finds it).
    pub fn tombstone_item(&self, name: &str, now: SystemTime) -> Item {
        let mut item = self.key(Self::claim_sk(name));
        item.insert("tombstone".into(), AttributeValue::Bool(true));
        item.insert("changed".into(), n(epoch_millis(now)));
        let at = now.checked_add(TOMBSTONE_TTL).unwrap_or(now);
        item.insert("expires_at".into(), n(epoch_secs(at)));
        item
    }

    /// What a claim item (or tombstone) means to a reader of live claims.
    pub fn entry_from_item(item: &Item) -> AwsResult<Entry> {
        if item.get("tombstone").and_then(|v| v.as_bool().ok()) == Some(&true) {
            let sk = item.get("sk").and_then(|v| v.as_s().ok()).map(String::as_str).unwrap_or_default();
            return Ok(Entry::Gone(sk.strip_prefix(CLAIM_PREFIX).unwrap_or(sk).to_string()));
        }
        let claim = Self::claim_from_item(item)?;
        Ok(match claim.phase {
            Phase::Terminated => Entry::Gone(claim.name),
            _ => Entry::live(claim),
        })
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

/// [`Store`] on DynamoDB. Clones share the kept claims and the read counters: they are one
/// process's view of the table.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    layout: Layout,
    /// Items per query page; DynamoDB's own limit (1 MB a page) when `None`.
    page_size: Option<i32>,
    change_margin: Duration,
    resync_after: Duration,
    /// The live claims as of the last read, kept while the process stays warm; `None` until the
    /// first read, or after a failure that leaves it in doubt (the next read is then a full one).
    kept: Arc<Mutex<Option<Kept>>>,
    reads: Arc<Reads>,
}

/// What the store has read from DynamoDB since it was made: items, as DynamoDB counts them for a
/// query (`ScannedCount`) or a GetItem that found one, and the read capacity units DynamoDB
/// reported consuming (in thousandths, to add atomically).
#[derive(Debug, Default)]
struct Reads {
    items: AtomicU64,
    milli_units: AtomicU64,
}

impl Reads {
    fn count(&self, items: u64, capacity: Option<&ConsumedCapacity>) {
        self.items.fetch_add(items, Ordering::Relaxed);
        let units = capacity.and_then(|c| c.capacity_units()).unwrap_or(0.0);
        self.milli_units.fetch_add((units * 1000.0).round() as u64, Ordering::Relaxed);
    }
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

fn epoch_millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)).unwrap_or(0)
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
            page_size: None,
            change_margin: CHANGE_MARGIN,
            resync_after: RESYNC_AFTER,
            kept: Arc::default(),
            reads: Arc::default(),
        }
    }

    /// Queries in pages of at most `items` (tests: to make a small table span pages).
    pub fn with_page_size(mut self, items: i32) -> DynamoStore {
        self.page_size = Some(items);
        self
    }

    /// Reads of changes start this long before the last read instead of [`CHANGE_MARGIN`]. Tests
    /// whose writers share one clock and write within seconds use a small one, so that a read of
    /// changes reads what they changed since, not the whole minute.
    pub fn with_change_margin(mut self, margin: Duration) -> DynamoStore {
        self.change_margin = margin;
        self
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Items read from DynamoDB since the store was made (queries' `ScannedCount`, GetItems that
    /// found an item): what on-demand read units are charged for, up to their size.
    pub fn items_read(&self) -> u64 {
        self.reads.items.load(Ordering::Relaxed)
    }

    /// Read capacity units DynamoDB reported for those reads (moto reports a fixed figure per
    /// request; DynamoDB one unit per 4 KB read strongly consistently).
    pub fn read_units(&self) -> f64 {
        self.reads.milli_units.load(Ordering::Relaxed) as f64 / 1000.0
    }

    fn kept(&self) -> MutexGuard<'_, Option<Kept>> {
        // Kept claims are replaced whole or by one claim at a time, never left half written: a
        // panic elsewhere while the lock was held leaves them usable.
        self.kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Brings the kept claims up to date (a full read or a read of changes) and returns them.
    async fn read_claims(&self) -> AwsResult<Vec<NodeClaim>> {
        let started = epoch_millis(SystemTime::now());
        let mut next = Kept::next(self.kept().as_ref(), started, self.change_margin, self.resync_after);
        loop {
            match next {
                Next::Full => {
                    let items = self.query_pages(self.claim_query(LSI_LIVE)).await?;
                    let entries = items.iter().map(Layout::entry_from_item).collect::<AwsResult<Vec<_>>>()?;
                    let kept = Kept::full(entries, started);
                    let claims = kept.claims();
                    tracing::debug!(read = "full", items = items.len(), live = claims.len(), "NodeClaims read");
                    *self.kept() = Some(kept);
                    return Ok(claims);
                }
                Next::ChangesSince(since) => {
                    let query = self
                        .claim_query(LSI_CHANGED)
                        .key_condition_expression("pk = :pk AND changed >= :since")
                        .expression_attribute_values(":since", n(since));
                    let items = self.query_pages(query).await?;
                    let entries = items.iter().map(Layout::entry_from_item).collect::<AwsResult<Vec<_>>>()?;
                    let mut guard = self.kept();
                    // Replaced by a concurrent full read meanwhile: these changes apply to it as
                    // well (each is the claim as stored when read). Forgotten meanwhile (a failed
                    // re-read): only a full read gives the whole view.
                    let Some(kept) = guard.as_mut() else {
                        next = Next::Full;
                        continue;
                    };
                    kept.changes(entries, started);
                    let claims = kept.claims();
                    tracing::debug!(
                        read = "changes",
                        since,
                        items = items.len(),
                        live = claims.len(),
                        "NodeClaims read"
                    );
                    return Ok(claims);
                }
            }
        }
    }

    /// A strongly consistent query of this cluster's partition in the local index `index`.
    fn claim_query(&self, index: &str) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .index_name(index)
            .consistent_read(true)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(self.layout.pk()))
    }

    /// Every page of `query`, counted in [`DynamoStore::items_read`].
    async fn query_pages(&self, query: QueryFluentBuilder) -> AwsResult<Vec<Item>> {
        let mut pages = query.return_consumed_capacity(ReturnConsumedCapacity::Total).into_paginator();
        if let Some(items) = self.page_size {
            pages = pages.page_size(items);
        }
        let mut pages = pages.send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| api_error("Query", e))?;
            self.reads.count(u64::try_from(page.scanned_count).unwrap_or(0), page.consumed_capacity.as_ref());
            out.extend(page.items.unwrap_or_default());
        }
        Ok(out)
    }

    /// After a lost condition: the kept copy of `name` was stale (or another writer won). Re-read
    /// it, so the caller's re-read decides from the claim as stored; if that fails too, forget
    /// everything kept (the next read is a full one).
    async fn reread_after_conflict(&self, name: &str) {
        if self.kept().is_none() {
            return;
        }
        match self.get_claim_item(name).await {
            Ok(Some(item)) => match Layout::entry_from_item(&item) {
                Ok(entry) => self.record(entry),
                Err(_) => *self.kept() = None,
            },
            Ok(None) => self.record(Entry::Gone(name.to_string())),
            Err(_) => *self.kept() = None,
        }
    }

    /// One claim's new state into the kept claims (when there are any).
    fn record(&self, entry: Entry) {
        if let Some(kept) = self.kept().as_mut() {
            kept.record(entry);
        }
    }

    async fn get_claim_item(&self, name: &str) -> AwsResult<Option<Item>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .consistent_read(true)
            .set_key(Some(self.layout.key(Layout::claim_sk(name))))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| api_error("GetItem", e))?;
        self.reads.count(u64::from(out.item.is_some()), out.consumed_capacity.as_ref());
        Ok(out.item)
    }

    /// Reads one item (the lease), so a Lambda's init opens the connection and a missing table or
    /// permission fails there, with DynamoDB's message, not in the first invocation.
    pub async fn check(&self) -> AwsResult<()> {
        self.get_lease().await.map(|_| ())
    }

    /// Items of this cluster whose sort key starts with `prefix` (strongly consistent).
    async fn query_prefix(&self, prefix: &str) -> AwsResult<Vec<Item>> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
            .expression_attribute_values(":pk", s(self.layout.pk()))
            .expression_attribute_values(":prefix", s(prefix));
        self.query_pages(query).await
    }

    /// The claim launched as `instance_id`, through the `by-instance` index (eventually
    /// consistent): how interruption events, which name instances, find their claims.
    pub async fn claim_by_instance(&self, instance_id: &str) -> PortResult<Option<NodeClaim>> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(GSI_BY_INSTANCE)
            .key_condition_expression("instance_id = :id")
            .expression_attribute_values(":id", s(instance_id));
        let items = self.query_pages(query).await?;
        let pk = self.layout.pk();
        let mut found = None;
        for item in &items {
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
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| api_error("GetItem", e))?;
        self.reads.count(u64::from(out.item.is_some()), out.consumed_capacity.as_ref());
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
    /// The claims that are not Terminated. Terminated ones stay in the table for their TTL (for
    /// people reading history, and `claim`), but no decision needs them: see the port's contract.
    async fn claims(&self) -> PortResult<Vec<NodeClaim>> {
        Ok(self.read_claims().await?)
    }

    /// Any claim, Terminated ones included; a tombstone is a claim that does not exist.
    async fn claim(&self, name: &str) -> PortResult<Option<NodeClaim>> {
        let item = self.get_claim_item(name).await?;
        match item {
            Some(item) if item.contains_key("tombstone") => Ok(None),
            Some(item) => Ok(Some(Layout::claim_from_item(&item)?)),
            None => Ok(None),
        }
    }

    async fn put_claim(&self, claim: &NodeClaim) -> PortResult<()> {
        let item = self.layout.claim_item(claim, SystemTime::now())?;
        let put = self.client.put_item().table_name(&self.table).set_item(Some(item));
        let put = if claim.version == 0 {
            // A tombstone is no claim: a name whose claim was deleted may be used again (a
            // replacement planned again after its first launch was given up), as before there
            // were tombstones.
            put.condition_expression("attribute_not_exists(pk) OR tombstone = :true")
                .expression_attribute_values(":true", AttributeValue::Bool(true))
        } else {
            put.condition_expression("version = :expected")
                .expression_attribute_values(":expected", n(claim.version - 1))
        };
        let written = put.send().await.map_err(|e| api_error("PutItem", e));
        match written {
            Ok(_) => {
                self.record(match claim.phase {
                    Phase::Terminated => Entry::Gone(claim.name.clone()),
                    _ => Entry::live(claim.clone()),
                });
                Ok(())
            }
            Err(e) if lost(&e) => {
                self.reread_after_conflict(&claim.name).await;
                Err(PortError::Conflict(format!(
                    "NodeClaim {} version {}: {}",
                    claim.name,
                    claim.version,
                    if claim.version == 0 { "already exists" } else { "stored version is not the one read" }
                )))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Leaves a tombstone rather than deleting the item, so that processes reading changes see
    /// the claim go (a deleted item leaves no trace in any index). The conditions are a delete's:
    /// the stored version, or nothing stored (no item, or a tombstone already).
    async fn delete_claim(&self, name: &str, version: u64) -> PortResult<()> {
        let deleted = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.layout.tombstone_item(name, SystemTime::now())))
            .condition_expression("attribute_not_exists(pk) OR tombstone = :true OR version = :version")
            .expression_attribute_values(":true", AttributeValue::Bool(true))
            .expression_attribute_values(":version", n(version))
            .send()
            .await
            .map_err(|e| api_error("PutItem", e));
        match deleted {
            Ok(_) => {
                self.record(Entry::Gone(name.to_string()));
                Ok(())
            }
            Err(e) if lost(&e) => {
                self.reread_after_conflict(name).await;
                Err(PortError::Conflict(format!("NodeClaim {name}: stored version is not {version}")))
            }
            Err(e) => Err(e.into()),
        }
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
        assert_eq!(item["changed"], n(1_000_000));
        assert_eq!(item["live"], s("default-abc"), "in the live-claims index");
        assert!(!item.contains_key("instance_id") && !item.contains_key("expires_at"));
        assert_eq!(Layout::claim_from_item(&item).unwrap(), claim);
        assert_eq!(Layout::entry_from_item(&item).unwrap(), Entry::live(claim.clone()));

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
        assert!(!item.contains_key("live"), "out of the live-claims index");
        assert_eq!(Layout::entry_from_item(&item).unwrap(), Entry::Gone("default-abc".into()));
    }

    #[test]
    fn a_tombstone_is_a_stamped_absence() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let item = layout().tombstone_item("default-abc", now);
        assert_eq!(item["sk"], s("CLAIM#default-abc"));
        assert_eq!(item["changed"], n(1_000_000));
        assert_eq!(item["expires_at"], n(1_000 + 3_600));
        for absent in ["version", "claim", "live", "instance_id"] {
            assert!(!item.contains_key(absent), "{absent}");
        }
        assert_eq!(Layout::entry_from_item(&item).unwrap(), Entry::Gone("default-abc".into()));
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
