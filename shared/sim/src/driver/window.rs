//! The provisioner's batching window: the first doorbell opens it, each further doorbell extends
//! it while they keep coming (idle gap), up to a maximum — Karpenter's batch window, as the SQS
//! event source's batching window delivers it.

use std::time::Duration;

use dovetail_core::time::Time;

/// Karpenter's defaults: close after 1 s without a new doorbell, or 10 s after the first.
pub const IDLE: Duration = Duration::from_secs(1);
pub const MAX: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Window {
    /// (first, last) doorbell arrival while open.
    open: Option<(Time, Time)>,
    /// Doorbells in the open window.
    pub messages: usize,
}

impl Window {
    /// A doorbell arrived at `at`.
    pub fn ring(&mut self, at: Time) {
        self.messages += 1;
        self.open = Some(match self.open {
            None => (at, at),
            Some((first, last)) => (first, last.max(at)),
        });
    }

    /// When the window closes, if open.
    pub fn closes_at(&self) -> Option<Time> {
        self.open.map(|(first, last)| last.plus(IDLE).min(first.plus(MAX)))
    }

    /// Closes the window if it is due at `now`; returns how many doorbells it held.
    pub fn close_if_due(&mut self, now: Time) -> Option<usize> {
        if self.closes_at()? > now {
            return None;
        }
        self.open = None;
        Some(std::mem::take(&mut self.messages))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_gap_closes_and_the_maximum_caps() {
        let mut w = Window::default();
        assert_eq!(w.closes_at(), None);
        w.ring(Time(0));
        w.ring(Time(500));
        assert_eq!(w.closes_at(), Some(Time(1_500)));
        assert_eq!(w.close_if_due(Time(1_499)), None);
        assert_eq!(w.close_if_due(Time(1_500)), Some(2));
        // A steady trickle every 900 ms keeps it open until the 10 s cap.
        for i in 0..20 {
            w.ring(Time(10_000 + i * 900));
        }
        assert_eq!(w.closes_at(), Some(Time(20_000)));
    }
}
