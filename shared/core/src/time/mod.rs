//! Time for decisions: an instant as plain data (milliseconds since the Unix epoch, UTC), so a
//! snapshot, a persisted NodeClaim and the simulator's virtual clock all speak the same unit and
//! decisions stay pure functions of their input.

pub mod cron;
mod duration;
mod rfc3339;

pub use duration::{format_duration, parse_duration, DurationError};
pub use rfc3339::parse_rfc3339;

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// An instant, in milliseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Time(pub i64);

impl Time {
    pub fn from_secs(s: i64) -> Time {
        Time(s * 1000)
    }

    pub fn millis(self) -> i64 {
        self.0
    }

    pub fn plus(self, d: Duration) -> Time {
        Time(self.0.saturating_add(d.as_millis().min(i64::MAX as u128) as i64))
    }

    pub fn minus(self, d: Duration) -> Time {
        Time(self.0.saturating_sub(d.as_millis().min(i64::MAX as u128) as i64))
    }

    /// Time from `earlier` to `self`; zero if `earlier` is later.
    pub fn since(self, earlier: Time) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0).max(0) as u64)
    }

    /// UTC calendar fields: (year, month 1–12, day 1–31, hour, minute, second, weekday 0=Sunday).
    pub fn civil(self) -> Civil {
        let secs = self.0.div_euclid(1000);
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        // Howard Hinnant's days-to-civil algorithm.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + i64::from(month <= 2);
        Civil {
            year,
            month,
            day,
            hour: (rem / 3600) as u32,
            minute: (rem % 3600 / 60) as u32,
            second: (rem % 60) as u32,
            weekday: (days + 4).rem_euclid(7) as u32,
        }
    }
}

/// Calendar fields of an instant, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Civil {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    /// 0 = Sunday.
    pub weekday: u32,
}

impl fmt::Display for Time {
    /// RFC 3339, UTC, second precision: `2026-11-21T14:00:00Z`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.civil();
        write!(f, "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", c.year, c.month, c.day, c.hour, c.minute, c.second)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_fields_and_display() {
        // 2026-11-21T10:49:00Z is a Saturday.
        let t = Time::from_secs(1_795_258_140);
        let c = t.civil();
        assert_eq!((c.year, c.month, c.day, c.hour, c.minute, c.weekday), (2026, 11, 21, 10, 49, 6));
        assert_eq!(t.to_string(), "2026-11-21T10:49:00Z");
        assert_eq!(Time(0).to_string(), "1970-01-01T00:00:00Z");
        assert_eq!(Time::from_secs(951_782_400).to_string(), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn arithmetic_saturates() {
        let t = Time::from_secs(100);
        assert_eq!(t.plus(Duration::from_secs(5)), Time::from_secs(105));
        assert_eq!(t.since(Time::from_secs(200)), Duration::ZERO);
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_millis(100)), "100ms");
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert!(parse_duration("5x").unwrap_err().to_string().contains("5x"));
    }
}
