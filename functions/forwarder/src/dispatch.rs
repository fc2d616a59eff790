//! From doorbells to SendMessageBatch calls: a bounded queue, coalescing windows, batches of at
//! most 10 messages and 256 KiB, sends in parallel up to a limit, and retries with backoff.
//!
//! Memory stays bounded: the queue holds at most `queue_capacity` doorbells, a window at most
//! `max_window` (plus one, below), and at most `max_in_flight` batches are being sent or retried.
//! When every batch slot is busy the window waits and the queue fills; a webhook request that then
//! finds it full does not wait (that would delay the API server) and its doorbell does not enter
//! the queue.
//!
//! Doorbells are level-triggered — any one means "look at the whole cluster again" — so a storm
//! loses nothing by being coalesced, as long as a doorbell still goes out *after* its last event.
//! That is what the overflow slot keeps: a doorbell that finds the queue full replaces the one
//! held there (counted as dropped), and the next window to close takes it along. Whatever the
//! storm, the doorbell of its last overflowing event is sent after every event before it, and
//! the messages sent stay bounded by the windows, not by the events.
//!
//! The SQS call sits behind [`Sink`] so the batching and retry rules are tested against an
//! in-memory sink.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::sync::Mutex;

use tokio::sync::{mpsc, Notify, Semaphore};

use crate::doorbell::{Doorbell, DoorbellKey};
use crate::metrics::{LogLimiter, Metrics};

/// SQS's limits for one SendMessageBatch call.
pub const MAX_BATCH_ENTRIES: usize = 10;
pub const MAX_BATCH_BYTES: usize = 256 * 1024;

/// One message of a batch; `id` is unique within the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: String,
    pub body: String,
}

/// A message of a batch that was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryFailure {
    pub id: String,
    /// False when SQS says the message itself is at fault: sending it again cannot help.
    pub retryable: bool,
    pub reason: String,
}

/// A whole call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SinkError {
    /// False for errors another attempt cannot fix (no such queue, access denied).
    pub retryable: bool,
    pub message: String,
}

/// Where batches go: SQS in production ([`crate::sqs::SqsSink`]).
pub trait Sink: Send + Sync + 'static {
    /// Sends one batch (≤ [`MAX_BATCH_ENTRIES`], ≤ [`MAX_BATCH_BYTES`]); `Ok` lists the entries
    /// that failed, if any.
    fn send_batch(&self, entries: &[Entry]) -> impl Future<Output = Result<Vec<EntryFailure>, SinkError>> + Send;
}

/// The dispatcher's knobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// How long a window stays open after its first doorbell.
    pub coalesce: Duration,
    /// Doorbells in one window at most; a full window is sent at once.
    pub max_window: usize,
    /// Batches being sent or retried at once.
    pub max_in_flight: usize,
    /// Attempts per batch, the first included.
    pub max_attempts: u32,
    /// Backoff before the second attempt; doubled for each further one, up to `max_backoff`.
    pub first_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            coalesce: Duration::from_millis(100),
            max_window: 1000,
            max_in_flight: 8,
            max_attempts: 5,
            first_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
        }
    }
}

impl Settings {
    /// The pause after attempt `attempt` (1-based) failed. No jitter: there is one forwarder, so
    /// no herd to spread.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let doubled = self.first_backoff.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
        doubled.min(self.max_backoff)
    }
}

/// The webhook's end of the queue.
#[derive(Debug, Clone)]
pub struct Doorbells {
    tx: mpsc::Sender<Doorbell>,
    overflow: Arc<Overflow>,
    metrics: Arc<Metrics>,
}

/// The one doorbell kept for a full queue (the latest to find it full), and the dispatcher's
/// wake-up for it.
#[derive(Debug, Default)]
struct Overflow {
    latest: Mutex<Option<Doorbell>>,
    /// Keeps a permit when nobody waits, so a dispatcher that drained the queue between a
    /// `Full` and the doorbell's arrival here still wakes for it.
    arrived: Notify,
}

impl Overflow {
    fn hold(&self, doorbell: Doorbell) {
        *self.latest.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(doorbell);
        self.arrived.notify_one();
    }

    fn take(&self) -> Option<Doorbell> {
        self.latest.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take()
    }
}

static DROPS: LogLimiter = LogLimiter::new(Duration::from_secs(10));

impl Doorbells {
    /// Queues a doorbell without waiting. When the queue is full it takes the overflow slot
    /// instead (the doorbell held there before is dropped); when the queue is closing it is
    /// dropped. Either way it is counted.
    pub fn ring(&self, doorbell: Doorbell) {
        if let Err(error) = self.tx.try_send(doorbell) {
            Metrics::add(&self.metrics.doorbells_dropped, 1);
            let why = match error {
                mpsc::error::TrySendError::Full(doorbell) => {
                    self.overflow.hold(doorbell);
                    "queue full (the latest is kept for the next window)"
                }
                mpsc::error::TrySendError::Closed(_) => "shutting down",
            };
            if let Some(held) = DROPS.allow(Instant::now()) {
                tracing::warn!(why, dropped_since_last_line = held, "doorbell dropped");
            }
        }
    }
}

/// The dispatcher's end of the queue: the doorbells, and the overflow slot.
#[derive(Debug)]
pub struct Queue {
    rx: mpsc::Receiver<Doorbell>,
    overflow: Arc<Overflow>,
}

#[cfg(test)]
impl Queue {
    /// A queued or held doorbell, without waiting.
    pub(crate) fn try_recv(&mut self) -> Option<Doorbell> {
        self.rx.try_recv().ok().or_else(|| self.overflow.take())
    }
}

/// A bounded queue of `capacity` doorbells: the webhook's end and the dispatcher's.
pub fn queue(capacity: usize, metrics: Arc<Metrics>) -> (Doorbells, Queue) {
    let (tx, rx) = mpsc::channel(capacity);
    let overflow = Arc::new(Overflow::default());
    (Doorbells { tx, overflow: Arc::clone(&overflow), metrics }, Queue { rx, overflow })
}

/// Sends the queue's doorbells until `shutdown` completes; then stops taking new ones, sends
/// what is queued (and the overflow slot's) and waits for the batches in flight (their retries
/// included).
pub async fn run<S: Sink>(
    queue: Queue,
    sink: Arc<S>,
    settings: Settings,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) {
    let Queue { mut rx, overflow } = queue;
    let slots = Arc::new(Semaphore::new(settings.max_in_flight));
    let mut shutdown = std::pin::pin!(shutdown);
    let mut closing = false;
    loop {
        let first = if closing {
            rx.recv().await
        } else {
            tokio::select! {
                biased;
                () = &mut shutdown => {
                    // Refuse new doorbells; `recv` still yields the queued ones, then `None`.
                    rx.close();
                    closing = true;
                    continue;
                }
                first = rx.recv() => first,
                // A doorbell held while the queue was drained already: it opens a window.
                () = overflow.arrived.notified() => match overflow.take() {
                    Some(held) => Some(held),
                    // Taken by the window that just closed; its wake-up was left over.
                    None => continue,
                },
            }
        };
        // Closed and drained: whatever overflowed last still goes.
        let Some(first) = first.or_else(|| overflow.take()) else { break };
        let mut window = Window::new(first);
        let deadline = tokio::time::Instant::now() + settings.coalesce;
        while window.len() < settings.max_window {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(doorbell)) => {
                    window.push(doorbell);
                }
                Ok(None) | Err(_) => break,
            }
        }
        // The queue overflowed since the last window: its latest doorbell goes with this one,
        // after every event that was queued before it.
        if let Some(held) = overflow.take() {
            if window.push(held) {
                Metrics::add(&metrics.overflow_sent, 1);
            }
        }
        Metrics::add(&metrics.doorbells_coalesced, window.coalesced);
        for batch in batches(window.doorbells.iter().map(Doorbell::body)) {
            let slot = Arc::clone(&slots).acquire_owned().await.expect("the semaphore is never closed");
            let (sink, metrics, settings) = (Arc::clone(&sink), Arc::clone(&metrics), settings.clone());
            tokio::spawn(async move {
                send_with_retries(&*sink, batch, &settings, &metrics).await;
                drop(slot);
            });
        }
    }
    let all = u32::try_from(settings.max_in_flight).expect("a small number of slots");
    let _ = slots.acquire_many(all).await;
}

/// The doorbells of one coalescing window, first of each key only.
struct Window {
    doorbells: Vec<Doorbell>,
    keys: HashSet<DoorbellKey>,
    coalesced: u64,
}

impl Window {
    fn new(first: Doorbell) -> Window {
        let keys = HashSet::from([first.key()]);
        Window { doorbells: vec![first], keys, coalesced: 0 }
    }

    fn len(&self) -> usize {
        self.doorbells.len()
    }

    /// Adds a doorbell unless one with its key is in the window already; `true` when added.
    fn push(&mut self, doorbell: Doorbell) -> bool {
        if self.keys.insert(doorbell.key()) {
            self.doorbells.push(doorbell);
            true
        } else {
            self.coalesced += 1;
            false
        }
    }
}

/// Splits message bodies into SendMessageBatch calls: at most [`MAX_BATCH_ENTRIES`] entries and
/// [`MAX_BATCH_BYTES`] of bodies each, in order. A body larger than a whole batch cannot be sent
/// and is left out (doorbells are a few hundred bytes: this cannot happen).
pub fn batches(bodies: impl IntoIterator<Item = String>) -> Vec<Vec<Entry>> {
    let mut batches = Vec::new();
    let mut current: Vec<Entry> = Vec::new();
    let mut bytes = 0;
    for body in bodies {
        if body.len() > MAX_BATCH_BYTES {
            tracing::error!(bytes = body.len(), "a doorbell larger than a batch was left out");
            continue;
        }
        if current.len() == MAX_BATCH_ENTRIES || bytes + body.len() > MAX_BATCH_BYTES {
            batches.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += body.len();
        current.push(Entry { id: current.len().to_string(), body });
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

static SEND_FAILURES: LogLimiter = LogLimiter::new(Duration::from_secs(10));

/// Sends a batch; entries that fail retryably are sent again after a backoff, up to
/// `max_attempts` calls; the rest are counted as failed.
async fn send_with_retries<S: Sink>(sink: &S, mut pending: Vec<Entry>, settings: &Settings, metrics: &Metrics) {
    let mut attempt = 1;
    loop {
        Metrics::add(&metrics.batches_sent, 1);
        let failed: Vec<EntryFailure> = match sink.send_batch(&pending).await {
            Ok(failures) => failures,
            Err(error) => pending
                .iter()
                .map(|e| EntryFailure { id: e.id.clone(), retryable: error.retryable, reason: error.message.clone() })
                .collect(),
        };
        let accepted = pending.len() - failed.iter().filter(|f| pending.iter().any(|e| e.id == f.id)).count();
        Metrics::add(&metrics.messages_sent, accepted as u64);
        let (retry, lost): (Vec<_>, Vec<_>) =
            failed.into_iter().partition(|f| f.retryable && attempt < settings.max_attempts);
        if !lost.is_empty() {
            Metrics::add(&metrics.messages_failed, lost.len() as u64);
            if let Some(held) = SEND_FAILURES.allow(Instant::now()) {
                tracing::warn!(
                    messages = lost.len(),
                    attempts = attempt,
                    reason = %lost[0].reason,
                    failures_since_last_line = held,
                    "doorbells not delivered; the next doorbell or the sweeper catches up"
                );
            }
        }
        if retry.is_empty() {
            return;
        }
        pending.retain(|e| retry.iter().any(|f| f.id == e.id));
        tokio::time::sleep(settings.backoff(attempt)).await;
        attempt += 1;
        Metrics::add(&metrics.batch_retries, 1);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::atomic::Ordering;
    use std::sync::Mutex;

    use jiff::Timestamp;

    use super::*;
    use crate::doorbell::NodeEvent;

    /// One scripted answer of [`MemorySink`].
    type Answer = Box<dyn Fn(&[Entry]) -> Result<Vec<EntryFailure>, SinkError> + Send>;

    /// Records every call; answers from a script, then accepts everything.
    #[derive(Default)]
    struct MemorySink {
        calls: Mutex<Vec<(tokio::time::Instant, Vec<Entry>)>>,
        script: Mutex<VecDeque<Answer>>,
    }

    impl MemorySink {
        fn then(&self, answer: impl Fn(&[Entry]) -> Result<Vec<EntryFailure>, SinkError> + Send + 'static) {
            self.script.lock().unwrap().push_back(Box::new(answer));
        }

        fn calls(&self) -> Vec<(tokio::time::Instant, Vec<Entry>)> {
            self.calls.lock().unwrap().clone()
        }

        fn bodies(&self) -> Vec<String> {
            self.calls().into_iter().flat_map(|(_, entries)| entries.into_iter().map(|e| e.body)).collect()
        }
    }

    impl Sink for MemorySink {
        async fn send_batch(&self, entries: &[Entry]) -> Result<Vec<EntryFailure>, SinkError> {
            assert!(entries.len() <= MAX_BATCH_ENTRIES);
            self.calls.lock().unwrap().push((tokio::time::Instant::now(), entries.to_vec()));
            let answer = self.script.lock().unwrap().pop_front();
            answer.map_or(Ok(Vec::new()), |answer| answer(entries))
        }
    }

    fn pod(i: usize) -> Doorbell {
        Doorbell::Pod { namespace: "ns".into(), name: format!("p{i}"), at: Timestamp::UNIX_EPOCH }
    }

    /// Runs the dispatcher over `doorbells` queued at once, then shuts it down and waits for it.
    async fn dispatch(sink: &Arc<MemorySink>, settings: Settings, doorbells: Vec<Doorbell>) -> Arc<Metrics> {
        let metrics = Arc::new(Metrics::default());
        let (bells, rx) = queue(4096, Arc::clone(&metrics));
        for d in doorbells {
            bells.ring(d);
        }
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(run(rx, Arc::clone(sink), settings, Arc::clone(&metrics), async {
            let _ = stopped.await;
        }));
        tokio::time::sleep(Duration::from_secs(30)).await;
        let _ = stop.send(());
        task.await.unwrap();
        metrics
    }

    fn load(counter: &std::sync::atomic::AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    #[test]
    fn batches_hold_ten_entries_with_ids_unique_in_each() {
        let bodies: Vec<String> = (0..23).map(|i| format!("b{i}")).collect();
        let batches = batches(bodies.clone());
        assert_eq!(batches.iter().map(Vec::len).collect::<Vec<_>>(), [10, 10, 3]);
        for batch in &batches {
            let ids: Vec<&str> = batch.iter().map(|e| e.id.as_str()).collect();
            assert_eq!(ids, (0..batch.len()).map(|i| i.to_string()).collect::<Vec<_>>());
        }
        let flat: Vec<String> = batches.into_iter().flatten().map(|e| e.body).collect();
        assert_eq!(flat, bodies, "order kept");
    }

    #[test]
    fn batches_stay_under_256_kib() {
        let big = "x".repeat(100 * 1024);
        let batches = batches(vec![big.clone(), big.clone(), big.clone(), "small".into()]);
        assert_eq!(batches.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2]);
        for batch in &batches {
            assert!(batch.iter().map(|e| e.body.len()).sum::<usize>() <= MAX_BATCH_BYTES);
        }
        let too_big = "x".repeat(MAX_BATCH_BYTES + 1);
        assert_eq!(super::batches(vec![too_big, "ok".into()]).concat().len(), 1);
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let settings = Settings::default();
        let pauses: Vec<u128> = (1..=6).map(|a| settings.backoff(a).as_millis()).collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1600, 2000]);
        assert_eq!(settings.backoff(u32::MAX), settings.max_backoff);
    }

    #[tokio::test(start_paused = true)]
    async fn one_window_coalesces_into_full_batches() {
        let sink = Arc::new(MemorySink::default());
        let mut doorbells: Vec<Doorbell> = (0..25).map(pod).collect();
        // The same pod twice, and the same node event twice: sent once each.
        doorbells.push(pod(3));
        let node = |event| Doorbell::Node { name: "n1".into(), event, at: Timestamp::UNIX_EPOCH };
        doorbells.extend([node(NodeEvent::Registered), node(NodeEvent::Registered), node(NodeEvent::Ready)]);
        let start = tokio::time::Instant::now();
        let metrics = dispatch(&sink, Settings::default(), doorbells).await;

        let calls = sink.calls();
        assert_eq!(calls.iter().map(|(_, e)| e.len()).collect::<Vec<_>>(), [10, 10, 7]);
        for (at, _) in &calls {
            assert_eq!(*at - start, Duration::from_millis(100), "sent when the window closes");
        }
        let bodies = sink.bodies();
        assert_eq!(bodies.iter().filter(|b| b.contains("\"ns/p3\"")).count(), 1);
        assert_eq!(bodies.iter().filter(|b| b.contains("\"registered\"")).count(), 1);
        assert_eq!(load(&metrics.doorbells_coalesced), 2);
        assert_eq!(load(&metrics.messages_sent), 27);
        assert_eq!(load(&metrics.batches_sent), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_window_goes_at_once() {
        let sink = Arc::new(MemorySink::default());
        let settings = Settings { max_window: 20, ..Settings::default() };
        let start = tokio::time::Instant::now();
        dispatch(&sink, settings, (0..45).map(pod).collect()).await;
        let calls = sink.calls();
        let offsets: Vec<Duration> = calls.iter().map(|(at, _)| *at - start).collect();
        // Windows of 20, 20 and 5: the first two close full without waiting.
        assert_eq!(offsets[..4], [Duration::ZERO; 4]);
        assert_eq!(offsets[4], Duration::from_millis(100));
        assert_eq!(sink.bodies().len(), 45);
    }

    #[tokio::test(start_paused = true)]
    async fn failed_entries_are_retried_alone_with_backoff() {
        let sink = Arc::new(MemorySink::default());
        // First call: entries 1 and 2 fail retryably, 3 for good; second call: still entry 1;
        // third: accepted.
        sink.then(|_| {
            Ok(vec![
                EntryFailure { id: "1".into(), retryable: true, reason: "InternalError".into() },
                EntryFailure { id: "2".into(), retryable: true, reason: "InternalError".into() },
                EntryFailure { id: "3".into(), retryable: false, reason: "InvalidMessageContents".into() },
            ])
        });
        sink.then(|entries| {
            assert_eq!(entries.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["1", "2"]);
            Ok(vec![EntryFailure { id: "1".into(), retryable: true, reason: "InternalError".into() }])
        });
        let metrics = dispatch(&sink, Settings::default(), (0..5).map(pod).collect()).await;

        let calls = sink.calls();
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[1].0 - calls[0].0, Duration::from_millis(100));
        assert_eq!(calls[2].0 - calls[1].0, Duration::from_millis(200));
        assert_eq!(calls[2].1.len(), 1);
        assert!(calls[2].1[0].body.contains("ns/p1"));
        assert_eq!(load(&metrics.messages_sent), 4);
        assert_eq!(load(&metrics.messages_failed), 1);
        assert_eq!(load(&metrics.batch_retries), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_queue_is_given_up_on_after_the_attempts() {
        let sink = Arc::new(MemorySink::default());
        for _ in 0..10 {
            sink.then(|_| Err(SinkError { retryable: true, message: "connection refused".into() }));
        }
        let metrics = dispatch(&sink, Settings::default(), (0..3).map(pod).collect()).await;
        assert_eq!(sink.calls().len(), 5);
        assert_eq!(load(&metrics.messages_failed), 3);
        assert_eq!(load(&metrics.messages_sent), 0);

        let sink = Arc::new(MemorySink::default());
        sink.then(|_| Err(SinkError { retryable: false, message: "AWS.SimpleQueueService.NonExistentQueue".into() }));
        let metrics = dispatch(&sink, Settings::default(), (0..3).map(pod).collect()).await;
        assert_eq!(sink.calls().len(), 1, "not retried");
        assert_eq!(load(&metrics.messages_failed), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_keeps_its_latest_doorbell_and_counts() {
        let metrics = Arc::new(Metrics::default());
        let (bells, mut queue) = queue(3, Arc::clone(&metrics));
        for i in 0..5 {
            bells.ring(pod(i));
        }
        assert_eq!(load(&metrics.doorbells_dropped), 2);
        queue.rx.close();
        bells.ring(pod(9));
        assert_eq!(load(&metrics.doorbells_dropped), 3, "a closing queue drops too");
        let mut kept = Vec::new();
        while let Some(d) = queue.rx.recv().await {
            kept.push(d);
        }
        assert_eq!(kept, (0..3).map(pod).collect::<Vec<_>>());
        assert_eq!(queue.overflow.take(), Some(pod(4)), "the latest to find it full, not the one refused at closing");
    }

    #[tokio::test(start_paused = true)]
    async fn a_storm_into_a_small_queue_sends_a_bounded_number_of_messages_the_last_event_included() {
        // 100,000 distinct pods at once into a queue of 16: the queue's 16, and the storm's last.
        let sink = Arc::new(MemorySink::default());
        let metrics = Arc::new(Metrics::default());
        let (bells, queue) = queue(16, Arc::clone(&metrics));
        for i in 0..100_000 {
            bells.ring(pod(i));
        }
        run(queue, Arc::clone(&sink), Settings::default(), Arc::clone(&metrics), async {}).await;
        let bodies = sink.bodies();
        assert_eq!(bodies.len(), 17);
        assert!(bodies.last().unwrap().contains("\"ns/p99999\""), "{bodies:?}");
        assert_eq!(load(&metrics.doorbells_dropped), 100_000 - 16);
        assert_eq!(load(&metrics.overflow_sent), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_storm_at_ten_thousand_a_second_is_coalesced_and_its_last_event_still_rings() {
        // 10 s at 10,000 distinct doorbells a second (100 every 10 ms) against a sink that takes
        // 20 ms a call, two calls at a time: at most 100 calls a second get through, so the queue
        // fills and overflows for the whole storm.
        #[derive(Default)]
        struct SlowSink {
            calls: Mutex<Vec<(tokio::time::Instant, Vec<Entry>)>>,
        }
        impl Sink for SlowSink {
            async fn send_batch(&self, entries: &[Entry]) -> Result<Vec<EntryFailure>, SinkError> {
                self.calls.lock().unwrap().push((tokio::time::Instant::now(), entries.to_vec()));
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(Vec::new())
            }
        }
        let sink = Arc::new(SlowSink::default());
        let metrics = Arc::new(Metrics::default());
        let (bells, queue) = queue(64, Arc::clone(&metrics));
        let settings = Settings { max_in_flight: 2, ..Settings::default() };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let dispatcher = tokio::spawn(run(queue, Arc::clone(&sink), settings, Arc::clone(&metrics), async {
            let _ = stopped.await;
        }));
        let start = tokio::time::Instant::now();
        let mut n = 0;
        for _ in 0..1000 {
            for _ in 0..100 {
                bells.ring(pod(n));
                n += 1;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let last_event = tokio::time::Instant::now();
        tokio::time::sleep(Duration::from_secs(5)).await;
        let _ = stop.send(());
        dispatcher.await.unwrap();

        let calls = sink.calls.lock().unwrap().clone();
        let messages: usize = calls.iter().map(|(_, e)| e.len()).sum();
        // Two 20 ms calls at a time for the storm and the drain after it, ten messages each.
        let bound = (last_event - start + Duration::from_secs(5)).as_millis() as usize / 20 * 2 * 10;
        assert!(messages <= bound, "{messages} messages for 100,000 events, more than {bound}");
        assert!(messages < 100_000 / 4, "{messages}: the storm was not coalesced");
        assert!(load(&metrics.doorbells_dropped) > 0, "the storm overflowed the queue");
        assert!(load(&metrics.overflow_sent) > 0);
        // Level-triggered: the storm's last event is announced, by a call made after it.
        let (at, _) =
            calls.iter().find(|(_, e)| e.iter().any(|e| e.body.contains("\"ns/p99999\""))).expect("p99999 sent");
        assert!(*at >= last_event - Duration::from_millis(10), "sent before the last burst");
        assert_eq!(load(&metrics.messages_sent) as usize, messages);
    }

    #[tokio::test(start_paused = true)]
    async fn a_doorbell_held_while_the_dispatcher_waits_wakes_it() {
        // The queue drained between a `Full` and the doorbell's arrival in the slot (possible when
        // the webhook and the dispatcher run on different threads): it must not wait for the next
        // doorbell to be sent.
        let sink = Arc::new(MemorySink::default());
        let metrics = Arc::new(Metrics::default());
        let (bells, queue) = queue(4, Arc::clone(&metrics));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let dispatcher =
            tokio::spawn(run(queue, Arc::clone(&sink), Settings::default(), Arc::clone(&metrics), async {
                let _ = stopped.await;
            }));
        tokio::time::sleep(Duration::from_secs(1)).await;
        bells.overflow.hold(pod(7));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(sink.bodies().len(), 1, "sent without another doorbell or a shutdown");
        assert!(sink.bodies()[0].contains("\"ns/p7\""));
        let _ = stop.send(());
        dispatcher.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn in_flight_batches_are_bounded() {
        /// Holds every call for a second and records how many overlap.
        #[derive(Default)]
        struct SlowSink {
            now: std::sync::atomic::AtomicUsize,
            most: std::sync::atomic::AtomicUsize,
        }
        impl Sink for SlowSink {
            async fn send_batch(&self, _: &[Entry]) -> Result<Vec<EntryFailure>, SinkError> {
                let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
                self.most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(1)).await;
                self.now.fetch_sub(1, Ordering::SeqCst);
                Ok(Vec::new())
            }
        }
        let sink = Arc::new(SlowSink::default());
        let metrics = Arc::new(Metrics::default());
        let (bells, rx) = queue(4096, Arc::clone(&metrics));
        for i in 0..200 {
            bells.ring(pod(i));
        }
        let settings = Settings { max_in_flight: 3, ..Settings::default() };
        let start = tokio::time::Instant::now();
        // Shut down at once: the queued doorbells are still sent, and `run` returns only when
        // the last batch is done.
        run(rx, Arc::clone(&sink), settings, Arc::clone(&metrics), async {}).await;
        assert_eq!(sink.most.load(Ordering::SeqCst), 3);
        assert_eq!(load(&metrics.messages_sent), 200);
        assert_eq!(load(&metrics.batches_sent), 20);
        // 20 batches, 3 at a time, a second each.
        assert_eq!(start.elapsed(), Duration::from_secs(7));
        assert!(bells.tx.is_closed(), "nothing more is taken");
    }
}
