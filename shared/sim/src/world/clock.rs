//! Virtual time: the world's clock, moved only by the driver.

use dovetail_core::reconcile::ports::Clock;
use dovetail_core::time::Time;

use super::World;

#[derive(Clone)]
pub struct SimClock(pub World);

impl Clock for SimClock {
    fn now(&self) -> Time {
        self.0.lock().now
    }
}
