//! The wall clock, for the functions (the simulator has its own virtual one).

use std::time::{SystemTime, UNIX_EPOCH};

use dovetail_core::reconcile::ports::Clock;
use dovetail_core::time::Time;

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Time {
        let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Time(since.as_millis() as i64)
    }
}
