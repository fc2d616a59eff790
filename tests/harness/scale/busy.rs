//! Wall time spent waiting: with at least one AWS call in flight, with at least one Kubernetes
//! request in flight, and with either. The functions read the API server and AWS side by side, so
//! the two overlap; what a row's time less the union is, the function spent on its own.
//!
//! The AWS interceptor ([`super::aws`]) and the counting proxy ([`super::proxy`]) share one
//! [`Busy`]. A Kubernetes request is in flight from its arrival at the proxy until its response
//! body has been passed on, or dropped: a catch-up's watch counts until its bookmark.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Who is being waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Aws,
    Kube,
}

/// The wall time during which at least one of some calls was in flight.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Span {
    in_flight: usize,
    since: Option<Instant>,
    /// Over the stretches that have ended.
    ended: Duration,
}

impl Span {
    /// Until `now`, the stretch in progress included.
    fn at(&self, now: Instant) -> Duration {
        self.ended + self.since.map_or(Duration::ZERO, |since| now.saturating_duration_since(since))
    }

    fn start(&mut self, now: Instant) {
        if self.in_flight == 0 {
            self.since = Some(now);
        }
        self.in_flight += 1;
    }

    fn end(&mut self, now: Instant) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if self.in_flight == 0 {
            self.ended = self.at(now);
            self.since = None;
        }
    }
}

/// Waiting times at one moment, since the [`Busy`] was made; a window is the difference of two
/// ([`Waited::since`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Waited {
    pub aws: Duration,
    pub kube: Duration,
    /// With either in flight.
    pub any: Duration,
}

impl Waited {
    pub fn since(&self, before: &Waited) -> Waited {
        Waited {
            aws: self.aws.saturating_sub(before.aws),
            kube: self.kube.saturating_sub(before.kube),
            any: self.any.saturating_sub(before.any),
        }
    }

    /// The AWS time no Kubernetes request overlapped: what is left of a wall time without it is
    /// the function's own work and its waits on the API server.
    pub fn aws_alone(&self) -> Duration {
        self.any.saturating_sub(self.kube)
    }
}

#[derive(Debug, Default)]
struct Spans {
    aws: Span,
    kube: Span,
    any: Span,
}

impl Spans {
    fn of(&mut self, source: Source) -> &mut Span {
        match source {
            Source::Aws => &mut self.aws,
            Source::Kube => &mut self.kube,
        }
    }

    fn start(&mut self, source: Source, now: Instant) {
        self.of(source).start(now);
        self.any.start(now);
    }

    fn end(&mut self, source: Source, now: Instant) {
        self.of(source).end(now);
        self.any.end(now);
    }
}

/// The shared clock; clones share it.
#[derive(Debug, Clone, Default)]
pub struct Busy(Arc<Mutex<Spans>>);

impl Busy {
    fn spans(&self) -> std::sync::MutexGuard<'_, Spans> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn started(&self, source: Source) {
        self.spans().start(source, Instant::now());
    }

    pub fn ended(&self, source: Source) {
        self.spans().end(source, Instant::now());
    }

    /// The waiting times until `now`, calls in flight included.
    pub fn at(&self, now: Instant) -> Waited {
        let s = self.spans();
        Waited { aws: s.aws.at(now), kube: s.kube.at(now), any: s.any.at(now) }
    }

    /// A request of `source` in flight until the guard is dropped.
    pub fn guard(&self, source: Source) -> InFlight {
        self.started(source);
        InFlight { busy: self.clone(), source }
    }
}

/// Ends its call when dropped.
pub struct InFlight {
    busy: Busy,
    source: Source,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.busy.ended(self.source);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_source_and_their_union_count_overlaps_once() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut s = Spans::default();
        // AWS 0–30, Kubernetes 10–50 (a second Kubernetes request 20–40 inside it).
        s.start(Source::Aws, at(0));
        s.start(Source::Kube, at(10));
        s.start(Source::Kube, at(20));
        s.end(Source::Aws, at(30));
        s.end(Source::Kube, at(40));
        s.end(Source::Kube, at(50));
        let busy = Busy(Arc::new(Mutex::new(s)));
        let w = busy.at(at(60));
        assert_eq!(w.aws, Duration::from_millis(30));
        assert_eq!(w.kube, Duration::from_millis(40));
        assert_eq!(w.any, Duration::from_millis(50));
        assert_eq!(w.aws_alone(), Duration::from_millis(10));
        let before = Waited { aws: Duration::from_millis(5), kube: Duration::ZERO, any: Duration::from_millis(5) };
        assert_eq!(w.since(&before).aws, Duration::from_millis(25));
    }

    #[test]
    fn a_call_in_flight_counts_until_now_and_a_guard_ends_it() {
        let busy = Busy::default();
        let guard = busy.guard(Source::Kube);
        std::thread::sleep(Duration::from_millis(5));
        let during = busy.at(Instant::now());
        assert!(during.kube >= Duration::from_millis(5), "{during:?}");
        assert_eq!(during.aws, Duration::ZERO);
        drop(guard);
        let after = busy.at(Instant::now());
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(busy.at(Instant::now()).kube, after.kube, "nothing in flight: the time stands still");
    }
}
