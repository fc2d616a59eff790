//! One kind of object in the snapshot, and how it is brought up to date: a list when it has
//! nothing to start from, a watch from its resourceVersion otherwise.
//!
//! A catch-up is complete only when the watch has delivered an event or a bookmark at or past the
//! kind's *current* resourceVersion, learnt by a one-object consistent list just before: events
//! and bookmarks come in version order, so nothing that happened before the read started can be
//! missing. That list is served by the API server's watch cache once the cache has caught up
//! with etcd (consistent reads from cache, Kubernetes 1.31+ with etcd 3.5.13+), which moves the
//! cache's version, and so its next bookmark, past the target even for a kind nobody changed.
//! The server sends a bookmark two seconds before a watch's timeout, so the watch asks for
//! [`CATCH_UP_SECONDS`]. A watch that ends or breaks before that resumes from the last event it
//! delivered; one the server refuses as too old (410 Gone: etcd compacted past it, or the watch
//! cache no longer holds it), or one that keeps failing (an older etcd: bookmarks that never
//! reach the target), ends in a relist of this kind alone.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures_util::{pin_mut, TryStreamExt};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use tracing::debug;

use super::kept::Keep;
use super::Counts;
use crate::error::{port_error, status_code};
use dovetail_core::reconcile::ports::PortResult;
use dovetail_core::time::Time;

/// A watch's `timeoutSeconds`. The watch cache sends its bookmark two seconds before the
/// deadline and no sooner (bookmarks are dispatched on a one-second tick), so three is the
/// shortest that still gets one.
pub const CATCH_UP_SECONDS: u32 = 3;

/// Objects per list page: client-go's pager default. A page of 500 pods is ~2–5 MB of JSON, kept
/// and dropped before the next is fetched.
pub const PAGE_SIZE: u32 = 500;

/// Watches in a row that bring nothing before a catch-up gives up and relists.
const CATCH_UP_ATTEMPTS: usize = 3;

/// How long one kind's catch-up may take before it gives up and relists.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(30);

/// How a sync reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Objects per list page.
    pub page: u32,
    /// A kind that held fewer than this many objects at its last read is listed again rather
    /// than caught up: a page costs less than waiting for a bookmark (one to two seconds), so
    /// small clusters keep answering in milliseconds. Once the pods are past it (the read waits
    /// for their bookmark anyway), every kind catches up (see `Snapshot::sync`). 0 catches every
    /// kind up.
    pub relist_below: usize,
    /// Fault injection for tests: every watch is dropped after this many events, as if its
    /// connection broke, and the catch-up resumes with a new one.
    pub drop_watch_after: Option<usize>,
}

impl Default for Reading {
    fn default() -> Self {
        Reading { page: PAGE_SIZE, relist_below: PAGE_SIZE as usize, drop_watch_after: None }
    }
}

/// Where a kind's objects come from: its API, the selector every read of it uses, and its name in
/// errors and logs.
pub(crate) struct Source<K> {
    pub api: Api<K>,
    pub fields: Option<&'static str>,
    pub what: &'static str,
    /// Whether the cluster may not serve the kind at all (its CRD not installed yet, as a cluster
    /// upgraded before its CRDs are): then it reads as empty, instead of failing every read.
    pub optional: bool,
}

impl<K> Source<K> {
    fn list_params(&self) -> ListParams {
        let p = ListParams::default();
        match self.fields {
            Some(f) => p.fields(f),
            None => p,
        }
    }

    fn watch_params(&self) -> WatchParams {
        let p = WatchParams::default().timeout(CATCH_UP_SECONDS);
        match self.fields {
            Some(f) => p.fields(f),
            None => p,
        }
    }
}

/// The kept objects of one kind, by key, and the resourceVersion they are current at.
///
/// Each object sits behind a box: a B-tree's nodes hold eleven slots and, filled in key order as
/// lists arrive, stay about half full, so slots as large as a kept pod (near 600 bytes) would
/// double what the snapshot holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Kind<T> {
    pub objects: BTreeMap<String, Box<T>>,
    /// `None` until the first list: then the next read lists.
    pub version: Option<String>,
    /// By node name, the latest time this process saw a pod leave it: through a watch (see
    /// [`Keep::departure`]), or gone from a relist ([`Keep::vanished`]); empty for other kinds. It
    /// outlives relists, and is as warm as the process: one entry per node that ever lost a pod.
    pub departed: BTreeMap<String, Time>,
}

impl<T> Default for Kind<T> {
    fn default() -> Self {
        Kind { objects: BTreeMap::new(), version: None, departed: BTreeMap::new() }
    }
}

impl<T: Keep> Kind<T> {
    /// Keeps an object a watch added or modified at `now`.
    pub(crate) fn changed(&mut self, o: &T::Object, now: Time) {
        let (key, kept) = (T::key(o), T::keep(o));
        let left = self.objects.get(&key).and_then(|before| before.departure(Some(&kept), o, now));
        self.record(left);
        self.objects.insert(key, Box::new(kept));
    }

    /// Forgets an object a watch deleted at `now`.
    pub(crate) fn deleted(&mut self, o: &T::Object, now: Time) {
        let left = self.objects.remove(&T::key(o)).and_then(|before| before.departure(None, o, now));
        self.record(left);
    }

    /// Takes a list's objects (at `version`, listed at `now`). After a first list, what the list
    /// no longer shows left meanwhile: a kind small enough to be listed again at each read sees
    /// its pods leave this way, not through a watch.
    pub(crate) fn relisted(&mut self, objects: BTreeMap<String, Box<T>>, version: Option<String>, now: Time) {
        if self.version.is_some() {
            let gone: Vec<_> = self
                .objects
                .iter()
                .filter(|(key, _)| !objects.contains_key(*key))
                .filter_map(|(_, before)| before.vanished(now))
                .collect();
            for left in gone {
                self.record(Some(left));
            }
        }
        self.objects = objects;
        self.version = version;
    }

    fn record(&mut self, left: Option<(String, Time)>) {
        if let Some((node, at)) = left {
            let latest = self.departed.entry(node).or_insert(at);
            *latest = (*latest).max(at);
        }
    }
}

/// Why a catch-up could not finish.
enum Missed {
    /// 410 Gone: the version is older than the server keeps.
    Gone,
    /// The watch could not be opened or kept delivering.
    Failed(String),
}

fn version_number(v: &str) -> Option<u64> {
    v.parse().ok()
}

impl<T: Keep> Kind<T>
where
    T::Object: kube::Resource,
{
    /// Brings the kind up to date: a catch-up from its version when it has one, the server still
    /// does and the kind is not small, a full list otherwise.
    pub async fn sync(&mut self, source: &Source<T::Object>, reading: &Reading, counts: &mut Counts) -> PortResult<()> {
        let small = self.objects.len() < reading.relist_below;
        if let Some(version) = self.version.clone().filter(|_| !small) {
            match self.catch_up(source, version, reading, counts).await {
                Ok(()) => return Ok(()),
                Err(Missed::Gone) => debug!(kind = source.what, "the version is gone (410); listing again"),
                Err(Missed::Failed(why)) => debug!(kind = source.what, %why, "catch-up failed; listing again"),
            }
            counts.relists += 1;
        }
        self.list(source, reading.page, counts).await
    }

    /// Every object, page by page, each kept as it arrives (the page is dropped before the next
    /// is fetched). A continue token that expired mid-way (410: the list outlasted etcd's
    /// compaction window) restarts the list once from the first page.
    pub async fn list(&mut self, source: &Source<T::Object>, page: u32, counts: &mut Counts) -> PortResult<()> {
        let mut restarted = false;
        'list: loop {
            let mut objects = BTreeMap::new();
            let mut version = None;
            let mut token: Option<String> = None;
            loop {
                let mut p = source.list_params().limit(page);
                p.continue_token = token.take();
                counts.requests += 1;
                let list = match source.api.list(&p).await {
                    Ok(list) => list,
                    Err(e) if status_code(&e) == Some(410) && !restarted => {
                        debug!(kind = source.what, error = %e, "continue token expired; listing again from the start");
                        restarted = true;
                        continue 'list;
                    }
                    Err(e) if source.optional && status_code(&e) == Some(404) => {
                        debug!(kind = source.what, "not served (its CRD is not installed): none");
                        // No version: the next read lists again, and finds the kind once it is there.
                        self.relisted(BTreeMap::new(), None, now());
                        return Ok(());
                    }
                    Err(e) => return Err(port_error(&format!("list {}", source.what), e)),
                };
                // Every page of one list is served at the first page's version.
                version = version.or(list.metadata.resource_version.clone());
                counts.objects += list.items.len();
                for o in &list.items {
                    objects.insert(T::key(o), Box::new(T::keep(o)));
                }
                match list.metadata.continue_.filter(|c| !c.is_empty()) {
                    Some(next) => token = Some(next),
                    None => break,
                }
            }
            self.relisted(objects, version, now());
            return Ok(());
        }
    }

    /// The kind's current resourceVersion: a consistent one-object list, which also makes the
    /// server's watch cache for the kind wait until it has caught up with etcd.
    async fn current(&self, source: &Source<T::Object>, counts: &mut Counts) -> Result<Option<u64>, Missed> {
        counts.requests += 1;
        let list = source.api.list(&source.list_params().limit(1)).await.map_err(|e| Missed::Failed(e.to_string()))?;
        Ok(list.metadata.resource_version.as_deref().and_then(version_number))
    }

    async fn catch_up(
        &mut self,
        source: &Source<T::Object>,
        from: String,
        reading: &Reading,
        counts: &mut Counts,
    ) -> Result<(), Missed> {
        let target = self.current(source, counts).await?;
        let started = Instant::now();
        let mut version = from;
        let mut last_failure = String::new();
        // Watches in a row that brought nothing: a server that keeps failing is given up on.
        let mut fruitless = 0;
        while fruitless < CATCH_UP_ATTEMPTS && started.elapsed() < CATCH_UP_LIMIT {
            // Already there (the last event applied was at the current version): a watch from
            // it would wait in vain, since the server only sends bookmarks newer than the start.
            if reached(target, &version) {
                return self.caught_up(source, version, started);
            }
            counts.requests += 1;
            let stream = match source.api.watch(&source.watch_params(), &version).await {
                Ok(s) => s,
                Err(e) if status_code(&e) == Some(410) => return Err(Missed::Gone),
                Err(e) => {
                    last_failure = e.to_string();
                    fruitless += 1;
                    continue;
                }
            };
            pin_mut!(stream);
            let mut received = 0;
            loop {
                if reading.drop_watch_after.is_some_and(|n| received >= n) {
                    // A dropped connection, injected: resume from what was applied.
                    break;
                }
                let event = match stream.try_next().await {
                    Ok(Some(event)) => event,
                    // The server closed the watch (its timeout) before a bookmark: resume.
                    Ok(None) => break,
                    Err(e) => {
                        last_failure = e.to_string();
                        break;
                    }
                };
                received += 1;
                match event {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                        counts.events += 1;
                        version = resource_version(&o).unwrap_or(version);
                        self.changed(&o, now());
                    }
                    WatchEvent::Deleted(o) => {
                        counts.events += 1;
                        version = resource_version(&o).unwrap_or(version);
                        self.deleted(&o, now());
                    }
                    WatchEvent::Bookmark(b) => {
                        version = b.metadata.resource_version;
                        // Versions that are not numbers cannot be compared: the first bookmark,
                        // sent after the watch started, is as far as it can tell.
                        if target.is_none() || version_number(&version).is_none() {
                            return self.caught_up(source, version, started);
                        }
                    }
                    WatchEvent::Error(s) if s.code == 410 => return Err(Missed::Gone),
                    WatchEvent::Error(s) => {
                        last_failure = format!("HTTP {} {}: {}", s.code, s.reason, s.message);
                        break;
                    }
                }
                // Events come in version order: one at or past the current version means every
                // change before it has been applied.
                if reached(target, &version) {
                    return self.caught_up(source, version, started);
                }
            }
            // What was applied stays applied: the next watch resumes after it.
            self.version = Some(version.clone());
            fruitless = if received > 0 { 0 } else { fruitless + 1 };
        }
        Err(Missed::Failed(if last_failure.is_empty() {
            format!("no bookmark at the current version within {:?}", started.elapsed())
        } else {
            last_failure
        }))
    }

    fn caught_up(&mut self, source: &Source<T::Object>, version: String, started: Instant) -> Result<(), Missed> {
        debug!(kind = source.what, took = ?started.elapsed(), "caught up");
        self.version = Some(version);
        Ok(())
    }
}

/// When a watch event is applied (a pod's departure is stamped with it when nothing better).
fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now().as_millisecond())
}

/// Whether `version` is at or past the kind's current version `target`.
fn reached(target: Option<u64>, version: &str) -> bool {
    matches!((target, version_number(version)), (Some(target), Some(at)) if at >= target)
}

fn resource_version<K: kube::Resource>(o: &K) -> Option<String> {
    o.meta().resource_version.clone().filter(|v| !v.is_empty())
}
