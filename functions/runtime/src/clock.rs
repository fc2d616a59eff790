//! The wall clock, for the functions (the simulator has its own virtual one), and the deadline
//! Lambda gives each invocation.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dovetail_core::reconcile::ports::Clock;
use dovetail_core::reconcile::Deadline;
use dovetail_core::time::Time;

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Time {
        let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Time(since.as_millis() as i64)
    }
}

/// The longest a Lambda invocation can run.
pub const LAMBDA_MAX_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The deadline of an invocation whose runtime API said `deadline_ms` (its
/// `Lambda-Runtime-Deadline-Ms`, milliseconds since the epoch) at `now`. Lambda's is always
/// ahead and at most 15 minutes away; one that is not comes from an emulator (cargo-lambda's
/// sends a constant 600,000, ten minutes past 1970) or a clock gone wrong, and is ignored rather
/// than taken to mean there is no time at all.
pub fn lambda_deadline(deadline_ms: u64, now: Time) -> Deadline {
    let end = Time(deadline_ms.min(i64::MAX as u64) as i64);
    if end <= now || end.since(now) > LAMBDA_MAX_TIMEOUT {
        tracing::warn!(
            deadline_ms,
            now = now.millis(),
            "the runtime's deadline is not within Lambda's limits; ignored"
        );
        return Deadline::NONE;
    }
    Deadline::before(end, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lambda_deadline_stops_work_before_it_and_an_impossible_one_is_ignored() {
        let now = Time::from_secs(1_795_000_000);
        let d = lambda_deadline((now.millis() + 60_000) as u64, now);
        assert!(!d.passed(now.plus(Duration::from_secs(49))));
        assert!(d.passed(now.plus(Duration::from_secs(50))));
        // cargo-lambda's emulator, and anything past or beyond 15 minutes.
        assert_eq!(lambda_deadline(600_000, now), Deadline::NONE);
        assert_eq!(lambda_deadline(now.millis() as u64, now), Deadline::NONE);
        assert_eq!(lambda_deadline((now.millis() + 16 * 60_000) as u64, now), Deadline::NONE);
        assert_eq!(lambda_deadline(u64::MAX, now), Deadline::NONE);
    }
}
