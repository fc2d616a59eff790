//! Counters, served in Prometheus' text format on `/metrics` and logged once a minute when they
//! moved, and a limiter that keeps a failing dependency from flooding the logs.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::doorbell::Deleted;
use crate::review::Outcome;

/// Monotonic counters since the process started.
#[derive(Debug, Default)]
pub struct Metrics {
    pub reviews_pod_doorbell: AtomicU64,
    pub reviews_node_doorbell: AtomicU64,
    pub reviews_nodeclaim_doorbell: AtomicU64,
    pub reviews_nodepool_doorbell: AtomicU64,
    pub reviews_ignored: AtomicU64,
    pub reviews_dry_run: AtomicU64,
    pub reviews_malformed: AtomicU64,
    /// AdmissionReviews for a resource or operation the forwarder does not handle (the webhook
    /// configuration's rules send more than they should): allowed, no doorbell.
    pub reviews_unhandled: AtomicU64,
    /// Requests that are not AdmissionReviews at all: answered 400.
    pub reviews_not_review: AtomicU64,
    /// Bodies refused before decoding (too large, too slow, unreadable).
    pub reviews_unread: AtomicU64,
    /// Doorbells that found the queue to the sender full (or closing). Of those that found it
    /// full, the latest is kept and sent with the next window (`overflow_sent`).
    pub doorbells_dropped: AtomicU64,
    /// Doorbells sent from the overflow slot, standing for the ones dropped before them.
    pub overflow_sent: AtomicU64,
    /// Doorbells folded into an identical one in the same coalescing window.
    pub doorbells_coalesced: AtomicU64,
    pub messages_sent: AtomicU64,
    /// Messages given up on after the retries (or refused by SQS for good).
    pub messages_failed: AtomicU64,
    pub batches_sent: AtomicU64,
    pub batch_retries: AtomicU64,
    /// How long AdmissionReview requests took to answer, from routing to the reply, by result.
    pub request_seconds: Latency,
}

/// The `result` label of an AdmissionReview request: what it meant ([`Outcome`]), or `unread`
/// for a body refused before decoding. Also the `outcome` label of `reviews_total`.
pub fn result_of(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Doorbell(crate::doorbell::Doorbell::Pod { .. }) => "pod_doorbell",
        Outcome::Doorbell(crate::doorbell::Doorbell::Node { .. }) => "node_doorbell",
        Outcome::Doorbell(crate::doorbell::Doorbell::Deleted { kind: Deleted::NodeClaim, .. }) => "nodeclaim_doorbell",
        Outcome::Doorbell(crate::doorbell::Doorbell::Deleted { kind: Deleted::NodePool, .. }) => "nodepool_doorbell",
        Outcome::Ignored => "ignored",
        Outcome::DryRun => "dry_run",
        Outcome::Malformed(_) => "malformed",
        Outcome::Unhandled => "unhandled",
        Outcome::NotReview(_) => "not_admission_review",
    }
}

/// The `result` of a request whose body was not read.
pub const UNREAD: &str = "unread";

/// Every `result` label, in the order the histogram keeps them.
const RESULTS: [&str; 10] = [
    "pod_doorbell",
    "node_doorbell",
    "nodeclaim_doorbell",
    "nodepool_doorbell",
    "ignored",
    "dry_run",
    "malformed",
    "unhandled",
    "not_admission_review",
    UNREAD,
];

/// Upper bounds (seconds) of the latency buckets: an answer is a parse and a channel send, so
/// most fall under a millisecond; the API server's webhook timeout (10 s by default) bounds
/// the top.
const BUCKETS: [f64; 12] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5, 10.0];

/// A Prometheus histogram per `result`, in atomics (no lock on the request path).
#[derive(Debug, Default)]
pub struct Latency {
    series: [Series; RESULTS.len()],
}

#[derive(Debug, Default)]
struct Series {
    /// Observations per bucket (not cumulative; the last is +Inf's own).
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Latency {
    pub fn observe(&self, result: &str, took: Duration) {
        let Some(i) = RESULTS.iter().position(|r| *r == result) else {
            debug_assert!(false, "{result} is one of RESULTS");
            return;
        };
        let series = &self.series[i];
        let seconds = took.as_secs_f64();
        let bucket = BUCKETS.iter().position(|b| seconds <= *b).unwrap_or(BUCKETS.len());
        bump(&series.buckets[bucket], 1);
        bump(&series.sum_nanos, took.as_nanos().min(u64::MAX as u128) as u64);
    }

    fn render(&self, out: &mut String) {
        const NAME: &str = "dovetail_forwarder_request_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {NAME} Time to answer an AdmissionReview request, by result.\n# TYPE {NAME} histogram"
        );
        for (result, series) in RESULTS.iter().zip(&self.series) {
            let mut cumulative = 0;
            for (i, count) in series.buckets.iter().enumerate() {
                cumulative += count.load(Ordering::Relaxed);
                let le = BUCKETS.get(i).map_or_else(|| "+Inf".to_string(), |b| b.to_string());
                let _ = writeln!(out, "{NAME}_bucket{{result=\"{result}\",le=\"{le}\"}} {cumulative}");
            }
            let sum = series.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
            let _ = writeln!(out, "{NAME}_sum{{result=\"{result}\"}} {sum}");
            let _ = writeln!(out, "{NAME}_count{{result=\"{result}\"}} {cumulative}");
        }
    }
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

impl Metrics {
    pub fn review(&self, outcome: &Outcome) {
        let counter = match outcome {
            Outcome::Doorbell(crate::doorbell::Doorbell::Pod { .. }) => &self.reviews_pod_doorbell,
            Outcome::Doorbell(crate::doorbell::Doorbell::Node { .. }) => &self.reviews_node_doorbell,
            Outcome::Doorbell(crate::doorbell::Doorbell::Deleted { kind: Deleted::NodeClaim, .. }) => {
                &self.reviews_nodeclaim_doorbell
            }
            Outcome::Doorbell(crate::doorbell::Doorbell::Deleted { kind: Deleted::NodePool, .. }) => {
                &self.reviews_nodepool_doorbell
            }
            Outcome::Ignored => &self.reviews_ignored,
            Outcome::DryRun => &self.reviews_dry_run,
            Outcome::Malformed(_) => &self.reviews_malformed,
            Outcome::Unhandled => &self.reviews_unhandled,
            Outcome::NotReview(_) => &self.reviews_not_review,
        };
        bump(counter, 1);
    }

    pub fn add(counter: &AtomicU64, by: u64) {
        bump(counter, by);
    }

    /// Every counter with its Prometheus name, label and help text.
    fn counters(&self) -> [(&'static str, Option<&'static str>, &'static str, &AtomicU64); 17] {
        const REVIEWS: &str = "AdmissionReview requests answered, by what they meant.";
        const DOORBELLS: &str = "Doorbells not sent, by why.";
        [
            ("dovetail_forwarder_reviews_total", Some("outcome=\"pod_doorbell\""), REVIEWS, &self.reviews_pod_doorbell),
            (
                "dovetail_forwarder_reviews_total",
                Some("outcome=\"node_doorbell\""),
                REVIEWS,
                &self.reviews_node_doorbell,
            ),
            (
                "dovetail_forwarder_reviews_total",
                Some("outcome=\"nodeclaim_doorbell\""),
                REVIEWS,
                &self.reviews_nodeclaim_doorbell,
            ),
            (
                "dovetail_forwarder_reviews_total",
                Some("outcome=\"nodepool_doorbell\""),
                REVIEWS,
                &self.reviews_nodepool_doorbell,
            ),
            ("dovetail_forwarder_reviews_total", Some("outcome=\"ignored\""), REVIEWS, &self.reviews_ignored),
            ("dovetail_forwarder_reviews_total", Some("outcome=\"dry_run\""), REVIEWS, &self.reviews_dry_run),
            ("dovetail_forwarder_reviews_total", Some("outcome=\"malformed\""), REVIEWS, &self.reviews_malformed),
            ("dovetail_forwarder_reviews_total", Some("outcome=\"unhandled\""), REVIEWS, &self.reviews_unhandled),
            (
                "dovetail_forwarder_reviews_total",
                Some("outcome=\"not_admission_review\""),
                REVIEWS,
                &self.reviews_not_review,
            ),
            ("dovetail_forwarder_reviews_total", Some("outcome=\"unread\""), REVIEWS, &self.reviews_unread),
            (
                "dovetail_forwarder_doorbells_skipped_total",
                Some("reason=\"queue_full\""),
                DOORBELLS,
                &self.doorbells_dropped,
            ),
            (
                "dovetail_forwarder_doorbells_skipped_total",
                Some("reason=\"coalesced\""),
                DOORBELLS,
                &self.doorbells_coalesced,
            ),
            (
                "dovetail_forwarder_overflow_doorbells_total",
                None,
                "Doorbells sent from the overflow slot, standing for those a full queue dropped.",
                &self.overflow_sent,
            ),
            ("dovetail_forwarder_messages_sent_total", None, "Doorbells SQS accepted.", &self.messages_sent),
            ("dovetail_forwarder_messages_failed_total", None, "Doorbells given up on.", &self.messages_failed),
            ("dovetail_forwarder_batches_sent_total", None, "SendMessageBatch calls made.", &self.batches_sent),
            ("dovetail_forwarder_batch_retries_total", None, "SendMessageBatch calls repeated.", &self.batch_retries),
        ]
    }

    /// The Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(2048);
        let mut last = "";
        for (name, label, help, value) in self.counters() {
            if name != last {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
                last = name;
            }
            let value = value.load(Ordering::Relaxed);
            match label {
                Some(label) => writeln!(out, "{name}{{{label}}} {value}"),
                None => writeln!(out, "{name} {value}"),
            }
            .expect("writing to a String");
        }
        self.request_seconds.render(&mut out);
        out
    }

    /// The counters' values in order, to tell whether anything moved since the last look.
    pub fn snapshot(&self) -> Vec<u64> {
        self.counters().iter().map(|(.., value)| value.load(Ordering::Relaxed)).collect()
    }

    /// Logs the counters as one JSON line.
    pub fn log(&self) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        tracing::info!(
            pod_doorbells = load(&self.reviews_pod_doorbell),
            node_doorbells = load(&self.reviews_node_doorbell),
            ignored = load(&self.reviews_ignored),
            dry_run = load(&self.reviews_dry_run),
            malformed = load(&self.reviews_malformed),
            unhandled = load(&self.reviews_unhandled),
            not_admission_review = load(&self.reviews_not_review),
            unread = load(&self.reviews_unread),
            dropped = load(&self.doorbells_dropped),
            overflow_sent = load(&self.overflow_sent),
            coalesced = load(&self.doorbells_coalesced),
            sent = load(&self.messages_sent),
            failed = load(&self.messages_failed),
            batches = load(&self.batches_sent),
            retries = load(&self.batch_retries),
            "counters"
        );
    }
}

/// Lets one log line through per interval and counts the ones it held back, so a dependency
/// failing on every request (SQS down, a full queue at 1,000 events/s) logs once in a while with
/// how often it happened.
#[derive(Debug)]
pub struct LogLimiter {
    interval: Duration,
    state: Mutex<(Option<Instant>, u64)>,
}

impl LogLimiter {
    pub const fn new(interval: Duration) -> LogLimiter {
        LogLimiter { interval, state: Mutex::new((None, 0)) }
    }

    /// `Some(n)` when a line may be logged now, `n` being how many were held back since the last
    /// one; `None` to stay quiet.
    pub fn allow(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (last, held) = &mut *state;
        match last {
            Some(at) if now.duration_since(*at) < self.interval => {
                *held += 1;
                None
            }
            _ => {
                *last = Some(now);
                Some(std::mem::take(held))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let metrics = Metrics::default();
        metrics.review(&Outcome::Ignored);
        metrics.review(&Outcome::Ignored);
        Metrics::add(&metrics.messages_sent, 7);
        let text = metrics.render();
        assert!(text.contains("dovetail_forwarder_reviews_total{outcome=\"ignored\"} 2\n"), "{text}");
        assert!(text.contains("dovetail_forwarder_messages_sent_total 7\n"), "{text}");
        assert_eq!(text.matches("# TYPE dovetail_forwarder_reviews_total counter").count(), 1, "{text}");
        assert_eq!(text.matches("# TYPE").count(), 8, "{text}");
    }

    #[test]
    fn renders_the_latency_histogram_cumulatively() {
        let metrics = Metrics::default();
        metrics.request_seconds.observe("ignored", Duration::from_micros(200));
        metrics.request_seconds.observe("ignored", Duration::from_millis(3));
        metrics.request_seconds.observe("ignored", Duration::from_secs(20));
        metrics.request_seconds.observe(UNREAD, Duration::from_millis(1));
        let text = metrics.render();
        let name = "dovetail_forwarder_request_duration_seconds";
        assert_eq!(text.matches(&format!("# TYPE {name} histogram")).count(), 1, "{text}");
        for (le, n) in [("0.0001", 0), ("0.00025", 1), ("0.0025", 1), ("0.005", 2), ("10", 2), ("+Inf", 3)] {
            let line = format!("{name}_bucket{{result=\"ignored\",le=\"{le}\"}} {n}\n");
            assert!(text.contains(&line), "{line} in {text}");
        }
        assert!(text.contains(&format!("{name}_count{{result=\"ignored\"}} 3\n")), "{text}");
        assert!(text.contains(&format!("{name}_sum{{result=\"ignored\"}} 20.0032\n")), "{text}");
        assert!(text.contains(&format!("{name}_count{{result=\"unread\"}} 1\n")), "{text}");
        assert!(text.contains(&format!("{name}_count{{result=\"pod_doorbell\"}} 0\n")), "{text}");
        // Every line is `name{labels} value` with a number for a value.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }

    #[test]
    fn limiter_lets_one_line_through_per_interval() {
        let limiter = LogLimiter::new(Duration::from_secs(10));
        let start = Instant::now();
        assert_eq!(limiter.allow(start), Some(0));
        assert_eq!(limiter.allow(start + Duration::from_secs(1)), None);
        assert_eq!(limiter.allow(start + Duration::from_secs(2)), None);
        assert_eq!(limiter.allow(start + Duration::from_secs(11)), Some(2));
        assert_eq!(limiter.allow(start + Duration::from_secs(12)), None);
    }
}
