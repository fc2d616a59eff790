//! What the scenario does to the cluster over time, and when.

use std::time::Duration;

use dovetail_core::time::cron::CronSchedule;
use dovetail_core::time::Time;

/// A Job submission: `count` Jobs from the template `job` (`namespace/name`).
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    pub job: String,
    /// Submitted by a CronJob: runs are named `<cronjob>-<scheduled minute>` as the CronJob
    /// controller names them.
    pub cron: bool,
    pub duration: Duration,
    pub duration_max: Option<Duration>,
    pub parallelism: usize,
    pub completions: usize,
    pub count: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A ReplicaSet, StatefulSet or Deployment (`Kind/namespace/name`) to `replicas`.
    Scale {
        workload: String,
        replicas: usize,
    },
    Submit(Submission),
    /// A new EKS-optimized AMI: every EC2NodeClass resolves to new images.
    ReleaseAmi,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Repeat {
    Once,
    Every(Duration),
    /// Every minute the schedule matches (UTC).
    Cron(CronSchedule),
}

/// One timeline entry, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Offset from the start of the run of the first occurrence.
    pub at: Duration,
    pub repeat: Repeat,
    /// No occurrence at or after this offset.
    pub until: Option<Duration>,
    pub action: Action,
}

/// Every occurrence within `duration` of a run starting at `start`, in time order (entries that
/// fire together keep the order they were written in).
pub fn expand(entries: &[Entry], start: Time, duration: Duration) -> Vec<(Duration, Action)> {
    let mut out = Vec::new();
    for e in entries {
        let end = e.until.map_or(duration, |u| u.min(duration));
        match &e.repeat {
            Repeat::Once => {
                if e.at < end || (e.at.is_zero() && end.is_zero()) {
                    out.push((e.at, e.action.clone()));
                }
            }
            Repeat::Every(step) => {
                let mut t = e.at;
                while t < end {
                    out.push((t, e.action.clone()));
                    t += *step;
                }
            }
            Repeat::Cron(schedule) => {
                // Minute by minute from the first whole minute at or after `at`.
                let minute = Duration::from_secs(60);
                let first = start.plus(e.at);
                let skew = first.millis().rem_euclid(60_000);
                let mut t = if skew == 0 { e.at } else { e.at + Duration::from_millis((60_000 - skew) as u64) };
                while t < end {
                    if schedule.fires_at(start.plus(t)) {
                        out.push((t, e.action.clone()));
                    }
                    t += minute;
                }
            }
        }
    }
    out.sort_by_key(|(t, _)| *t);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_stop_at_until_and_cron_follows_the_clock() {
        let h = |n: u64| Duration::from_secs(n * 3600);
        let entries = vec![
            Entry { at: h(1), repeat: Repeat::Every(h(2)), until: Some(h(6)), action: Action::ReleaseAmi },
            Entry {
                at: Duration::ZERO,
                repeat: Repeat::Cron(CronSchedule::parse("30 */4 * * *").unwrap()),
                until: None,
                action: Action::Scale { workload: "Deployment/default/web".into(), replicas: 3 },
            },
            Entry { at: h(30), repeat: Repeat::Once, until: None, action: Action::ReleaseAmi },
        ];
        // A start at 00:00 UTC.
        let got = expand(&entries, Time::from_secs(1_767_571_200), h(12));
        let times: Vec<u64> = got.iter().map(|(t, _)| t.as_secs() / 60).collect();
        assert_eq!(times, [30, 60, 180, 270, 300, 510]);
    }
}
