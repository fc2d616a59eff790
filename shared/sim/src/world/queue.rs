//! SQS in memory: delayed messages, at-least-once delivery (an occasional duplicate), redelivery
//! of failed messages after the visibility timeout, and a dead-letter queue after too many
//! receives.

use rand::rngs::SmallRng;
use rand::Rng;
use std::collections::BTreeMap;
use std::future::{ready, Future};
use std::time::Duration;

use dovetail_core::reconcile::ports::{PortResult, Queue};
use dovetail_core::time::Time;

use super::World;

/// A failed message comes back after this long (AWS advises 6× the function timeout; the
/// functions time out at 15 s in the simulation's deployment).
pub const VISIBILITY_TIMEOUT: Duration = Duration::from_secs(90);
/// Receives before a message goes to the dead-letter queue.
pub const MAX_RECEIVES: u32 = 5;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueMessage {
    pub id: String,
    pub body: String,
    /// Times it has been handed to a consumer.
    pub receives: u32,
    pub sent_at: Time,
}

#[derive(Debug, Default)]
pub struct SqsQueue {
    /// By the time they become visible, then send order.
    visible: BTreeMap<(Time, u64), QueueMessage>,
    seq: u64,
    pub sent: u64,
    pub duplicates: u64,
    /// Messages that failed `MAX_RECEIVES` times, with the last reason.
    pub dead: Vec<(QueueMessage, String)>,
}

impl SqsQueue {
    /// Sends a message visible after `delay`; with probability `duplicate`, a second copy with the
    /// same id turns up a little later (SQS standard queues deliver at least once).
    pub fn send(&mut self, now: Time, body: String, delay: Duration, duplicate: f64, rng: &mut SmallRng) {
        self.sent += 1;
        let msg = QueueMessage { id: format!("m-{:08}", self.sent), body, receives: 0, sent_at: now };
        if duplicate > 0.0 && rng.random::<f64>() < duplicate {
            self.duplicates += 1;
            let later = delay + Duration::from_millis(rng.random_range(100..=5_000));
            self.push(now.plus(later), msg.clone());
        }
        self.push(now.plus(delay), msg);
    }

    fn push(&mut self, at: Time, msg: QueueMessage) {
        self.seq += 1;
        self.visible.insert((at, self.seq), msg);
    }

    /// When the next message becomes visible.
    pub fn next_visible(&self) -> Option<Time> {
        self.visible.keys().next().map(|(t, _)| *t)
    }

    /// Takes up to `max` visible messages (the event source's batch).
    pub fn receive(&mut self, now: Time, max: usize) -> Vec<QueueMessage> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some((&key, _)) = self.visible.first_key_value() else { break };
            if key.0 > now {
                break;
            }
            let mut m = self.visible.remove(&key).expect("just seen");
            m.receives += 1;
            out.push(m);
        }
        out
    }

    /// A message the consumer reported failed: back after the visibility timeout, or to the DLQ.
    pub fn fail(&mut self, now: Time, msg: QueueMessage, reason: &str) {
        if msg.receives >= MAX_RECEIVES {
            self.dead.push((msg, reason.to_string()));
        } else {
            self.push(now.plus(VISIBILITY_TIMEOUT), msg);
        }
    }

    pub fn len(&self) -> usize {
        self.visible.len()
    }

    pub fn is_empty(&self) -> bool {
        self.visible.is_empty()
    }
}

#[derive(Debug, Default)]
pub struct QueueState {
    /// The forwarder's pod and node doorbells, for the provisioner.
    pub doorbells: SqsQueue,
    /// EventBridge events and delayed `{"resume": "<claim>"}` messages, for the interruption
    /// function.
    pub interruptions: SqsQueue,
}

/// The `Queue` port over the world: a delayed resume message on the interruption queue.
#[derive(Clone)]
pub struct SimQueue(pub World);

impl Queue for SimQueue {
    fn requeue(&self, claim: &str, after: Duration) -> impl Future<Output = PortResult<()>> + Send {
        let body = serde_json::json!({ "resume": claim }).to_string();
        self.0.lock().send_interruption(body, after);
        ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn delays_redelivery_and_dead_letters() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut q = SqsQueue::default();
        q.send(Time(0), "a".into(), Duration::from_secs(10), 0.0, &mut rng);
        q.send(Time(0), "b".into(), Duration::ZERO, 0.0, &mut rng);
        let got = q.receive(Time(0), 10);
        assert_eq!(got.iter().map(|m| m.body.as_str()).collect::<Vec<_>>(), ["b"]);
        assert_eq!(q.next_visible(), Some(Time(10_000)));
        let mut m = q.receive(Time(10_000), 10).pop().unwrap();
        for i in 1..MAX_RECEIVES {
            let now = Time(i64::from(i) * 100_000);
            q.fail(now, m, "boom");
            assert!(q.receive(now, 10).is_empty(), "invisible during the visibility timeout");
            m = q.receive(now.plus(VISIBILITY_TIMEOUT), 10).pop().unwrap();
        }
        assert_eq!(m.receives, MAX_RECEIVES);
        q.fail(Time(0), m, "boom");
        assert_eq!(q.dead.len(), 1);
        assert!(q.is_empty());
    }

    #[test]
    fn duplicates_share_the_id() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut q = SqsQueue::default();
        q.send(Time(0), "x".into(), Duration::ZERO, 1.0, &mut rng);
        let got = q.receive(Time(10_000), 10);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].id, got[1].id);
    }
}
