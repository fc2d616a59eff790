//! When an invocation stops starting work: Lambda ends a function at its timeout whatever it is
//! doing, so a reconciler stops early enough to finish cleanly — the NodeClaim objects of what it
//! did written, the provisioning lease released, the batch answered.
//!
//! Stopping is safe at any action boundary for the same reason a crash is (the exactly-once
//! tests crash at every port call): every step is persisted as it is taken and the next
//! invocation reads the truth again. What a stop adds over a crash is that nothing waits for a
//! lease to expire or a message to time out without need:
//! - the provisioner answers its whole batch as failed (the doorbells come back; any one of them
//!   means "look again") and the sweeper's provisioning pass picks the work up sooner still;
//! - the interruption function reports the messages it did not reach as failed, and hands the
//!   drains it was stepping on to resume messages sent at once;
//! - the sweeper leaves what it did not reach to its next tick.

use std::time::Duration;

use crate::time::Time;

/// What a function keeps back from its timeout for finishing: one port call under way when the
/// deadline passes (CreateFleet takes seconds; the SDKs' own retries a few more), then the
/// pass's NodeClaim objects, the lease's release and the answer to Lambda.
pub const RESERVE: Duration = Duration::from_secs(10);

/// The instant after which no new action starts (`None`: no deadline, as in the simulator and
/// the CLI, whose invocations take no time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deadline {
    stop_at: Option<Time>,
}

impl Deadline {
    /// No deadline.
    pub const NONE: Deadline = Deadline { stop_at: None };

    /// Stop [`RESERVE`] before `end` (a Lambda invocation's deadline), or at once when the
    /// invocation is shorter than twice that: then half of it goes to work, half to finishing.
    pub fn before(end: Time, now: Time) -> Deadline {
        let reserve = RESERVE.min(end.since(now) / 2);
        Deadline { stop_at: Some(end.minus(reserve)) }
    }

    /// Stop at `at` exactly (tests).
    pub fn at(at: Time) -> Deadline {
        Deadline { stop_at: Some(at) }
    }

    /// Whether the time to start work is over.
    pub fn passed(&self, now: Time) -> bool {
        self.stop_at.is_some_and(|at| now >= at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lambda_deadline_keeps_the_reserve_back() {
        let now = Time::from_secs(1_000);
        let d = Deadline::before(now.plus(Duration::from_secs(60)), now);
        assert!(!d.passed(now.plus(Duration::from_secs(49))));
        assert!(d.passed(now.plus(Duration::from_secs(50))));
        // A short invocation keeps half of what it has for finishing.
        let short = Deadline::before(now.plus(Duration::from_secs(6)), now);
        assert!(!short.passed(now.plus(Duration::from_millis(2_999))));
        assert!(short.passed(now.plus(Duration::from_secs(3))));
        // Already over: stop before starting anything.
        assert!(Deadline::before(now, now).passed(now));
        assert!(!Deadline::NONE.passed(Time(i64::MAX)));
    }
}
