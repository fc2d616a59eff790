//! The live NodeClaims a warm process keeps between invocations, and how what the store reads or
//! writes brings them up to date. Pure: [`super::DynamoStore`] decides what to read and applies
//! the answers here.
//!
//! Like any cache it may be out of date: between two reads other invocations write claims. It is
//! never more out of date than the last read (every read first catches up), and a write made from
//! a stale claim loses its version condition, after which the store re-reads that claim. Reads
//! come in two kinds:
//!
//! - **full** — every live claim (the `live-claims` index): a cold process, or [`RESYNC_AFTER`]
//!   since the last full read;
//! - **changes** — the claim items written since the last read began, minus [`CHANGE_MARGIN`]
//!   (the `claims-by-change` index). Their answers replace what is kept, name by name: a claim that
//!   became Terminated or was deleted (a tombstone) leaves, any other is kept as read.

use std::collections::BTreeMap;
use std::time::Duration;

use dovetail_core::nodeclaim::NodeClaim;

/// How far before its last read a read of changes starts. A write is stamped with its writer's
/// wall clock just before it is sent, and a reader may miss it only if DynamoDB committed it after
/// that reader's last read began; its stamp is then at most (the writer's clock lag behind the
/// reader's) + (the time from stamp to commit) before that moment. Lambda hosts keep time with the
/// Amazon Time Sync Service (well under a second apart), and stamp to commit is one request with
/// the SDK's retries: seconds. A minute covers both many times over, and costs only re-reading the
/// claims written in the last minute — work that grows with the change, not with the table.
pub const CHANGE_MARGIN: Duration = Duration::from_secs(60);

/// How long a process goes on reading changes only before it reads every live claim again. The
/// change stamps are the writers' clocks, not an order DynamoDB keeps (unlike a Kubernetes
/// resourceVersion), so a write delayed beyond [`CHANGE_MARGIN`] — a stalled request, a clock
/// stepped back — would otherwise stay unseen; this bounds how long. Ten minutes: a full read per
/// ten sweeps, still ∝ live claims.
pub const RESYNC_AFTER: Duration = Duration::from_secs(600);

/// How long the tombstone of a deleted claim stays for readers of changes to see. A reader whose
/// last read is older than [`RESYNC_AFTER`] reads in full and needs no tombstone; an hour leaves
/// room for DynamoDB's TTL, which never deletes an item before it expires.
pub const TOMBSTONE_TTL: Duration = Duration::from_secs(3600);
const _: () = assert!(TOMBSTONE_TTL.as_secs() > RESYNC_AFTER.as_secs() + CHANGE_MARGIN.as_secs());

/// What a stored claim item means to a reader of live claims.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// Boxed: a claim is some 700 bytes, a name 24.
    Live(Box<NodeClaim>),
    /// Terminated, or deleted (a tombstone): out of the live view. The claim's name.
    Gone(String),
}

impl Entry {
    pub fn live(claim: NodeClaim) -> Entry {
        Entry::Live(Box::new(claim))
    }

    pub fn name(&self) -> &str {
        match self {
            Entry::Live(c) => &c.name,
            Entry::Gone(name) => name,
        }
    }
}

/// The live claims as of the last read, by name (the order a query of the table gives).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Kept {
    claims: BTreeMap<String, NodeClaim>,
    /// When the last read began (wall clock, epoch ms).
    read_at: i64,
    /// When the last full read began.
    full_at: i64,
}

/// The read a process should make next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Full,
    /// The claim items stamped at or after this time (epoch ms).
    ChangesSince(i64),
}

impl Kept {
    /// From a full read that began at `started`.
    pub fn full(entries: impl IntoIterator<Item = Entry>, started: i64) -> Kept {
        let mut kept = Kept { claims: BTreeMap::new(), read_at: started, full_at: started };
        for e in entries {
            kept.record(e);
        }
        kept
    }

    /// What to read at `now`: with nothing kept, a resync due, or a clock that went back (the
    /// window would be wrong), everything; else the changes since the last read, less `margin`.
    pub fn next(kept: Option<&Kept>, now: i64, margin: Duration, resync: Duration) -> Next {
        match kept {
            Some(k) if now >= k.read_at && now - k.full_at < millis(resync) => {
                Next::ChangesSince(k.read_at - millis(margin))
            }
            _ => Next::Full,
        }
    }

    /// Applies a read of changes that began at `started`: each item read is the claim as stored
    /// now, so it replaces what was kept.
    pub fn changes(&mut self, entries: impl IntoIterator<Item = Entry>, started: i64) {
        for e in entries {
            self.record(e);
        }
        self.read_at = self.read_at.max(started);
    }

    /// One claim as it now stands: written by this process, or re-read after a lost condition.
    pub fn record(&mut self, entry: Entry) {
        match entry {
            Entry::Live(c) => {
                self.claims.insert(c.name.clone(), *c);
            }
            Entry::Gone(name) => {
                self.claims.remove(&name);
            }
        }
    }

    pub fn claims(&self) -> Vec<NodeClaim> {
        self.claims.values().cloned().collect()
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_core::nodeclaim::Phase;
    use dovetail_core::time::Time;

    const MARGIN: Duration = Duration::from_secs(60);

    fn claim(name: &str, version: u64) -> NodeClaim {
        let mut c = NodeClaim::launching(name, "default", "default", Time::from_secs(1));
        c.version = version;
        c
    }

    fn names(k: &Kept) -> Vec<String> {
        k.claims().into_iter().map(|c| c.name).collect()
    }

    #[test]
    fn reads_changes_until_a_resync_is_due_or_the_clock_goes_back() {
        assert_eq!(Kept::next(None, 1_000, MARGIN, RESYNC_AFTER), Next::Full);
        let mut k = Kept::full([], 100_000);
        assert_eq!(Kept::next(Some(&k), 130_000, MARGIN, RESYNC_AFTER), Next::ChangesSince(40_000));
        k.changes([], 130_000);
        assert_eq!(Kept::next(Some(&k), 131_000, MARGIN, RESYNC_AFTER), Next::ChangesSince(70_000));
        assert_eq!(Kept::next(Some(&k), 129_000, MARGIN, RESYNC_AFTER), Next::Full, "clock went back");
        assert_eq!(Kept::next(Some(&k), 100_000 + 600_000, MARGIN, RESYNC_AFTER), Next::Full, "resync due");
    }

    #[test]
    fn changes_replace_claims_and_gone_ones_leave() {
        let mut k = Kept::full([Entry::live(claim("a", 3)), Entry::live(claim("b", 1))], 0);
        assert_eq!(names(&k), ["a", "b"]);
        let mut terminated = claim("a", 4);
        terminated.phase = Phase::Terminated;
        // The store turns a Terminated item into Gone; a new claim and a deleted one arrive too.
        k.changes([Entry::Gone(terminated.name.clone()), Entry::live(claim("c", 0)), Entry::Gone("b".into())], 10);
        assert_eq!(names(&k), ["c"]);
        // A claim deleted and created again under the same name: the read is the truth, even
        // with a lower version than was kept.
        k.record(Entry::live(claim("c", 5)));
        k.changes([Entry::live(claim("c", 0))], 20);
        assert_eq!(k.claims(), vec![claim("c", 0)]);
        // Reading an older window never moves the watermark back.
        k.changes([], 15);
        assert_eq!(Kept::next(Some(&k), 30, MARGIN, RESYNC_AFTER), Next::ChangesSince(20 - 60_000));
    }

    /// Random writes by other processes, each seen by a read of changes at some point (as the
    /// margin guarantees), interleaved with this process's own writes: the kept view always ends
    /// equal to the live claims in the table.
    #[test]
    fn randomized_writes_end_in_the_table_state() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut table: BTreeMap<String, Entry> = BTreeMap::new();
        let mut kept = Kept::full([], 0);
        let mut unseen: Vec<Entry> = vec![];
        for step in 1..=20_000i64 {
            let name = format!("c{}", next(40));
            let entry = match next(3) {
                0 => Entry::Gone(name.clone()),
                _ => Entry::live(claim(&name, next(10))),
            };
            table.insert(name, entry.clone());
            if next(4) == 0 {
                kept.record(entry); // this process's own write
            } else {
                unseen.push(entry);
            }
            if next(10) == 0 {
                // A read of changes returns each changed item once, as it stands in the table.
                let mut changed: Vec<String> = unseen.drain(..).map(|e| e.name().to_string()).collect();
                changed.sort();
                changed.dedup();
                kept.changes(changed.iter().map(|n| table[n].clone()), step);
            }
        }
        kept.changes(unseen.iter().map(|e| table[e.name()].clone()), 20_001);
        let live: Vec<NodeClaim> = table
            .values()
            .filter_map(|e| match e {
                Entry::Live(c) => Some((**c).clone()),
                Entry::Gone(_) => None,
            })
            .collect();
        assert_eq!(kept.claims(), live);
    }
}
