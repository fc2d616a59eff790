//! Cron schedules of disruption budgets (`spec.disruption.budgets[].schedule`).
//!
//! Karpenter follows the Kubernetes CronJob syntax: five fields (minute, hour, day of month,
//! month, day of week) or one of the `@yearly`-style macros, always in UTC. The schedule is parsed
//! here, once, so validation and the disruption logic agree on what a string means.

/// Why a schedule string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a valid cron schedule: {reason}")]
pub struct ScheduleError {
    /// The schedule as written.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

/// A parsed five-field cron schedule, in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CronSchedule {
    minutes: u64,
    hours: u32,
    days_of_month: u32,
    months: u16,
    days_of_week: u8,
    /// Standard cron: when both day fields are restricted, a day matches if either matches.
    day_of_month_any: bool,
    day_of_week_any: bool,
}

const MONTH_NAMES: &[&str] = &["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const DAY_NAMES: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
    /// Value of the first name (`jan` = 1, `sun` = 0).
    names_start: u32,
}

const FIELDS: [FieldSpec; 5] = [
    FieldSpec { name: "minute", min: 0, max: 59, names: &[], names_start: 0 },
    FieldSpec { name: "hour", min: 0, max: 23, names: &[], names_start: 0 },
    FieldSpec { name: "day of month", min: 1, max: 31, names: &[], names_start: 0 },
    FieldSpec { name: "month", min: 1, max: 12, names: MONTH_NAMES, names_start: 1 },
    FieldSpec { name: "day of week", min: 0, max: 6, names: DAY_NAMES, names_start: 0 },
];

impl CronSchedule {
    /// Parses a five-field expression or a macro (`@yearly`, `@annually`, `@monthly`,
    /// `@weekly`, `@daily`, `@midnight`, `@hourly`).
    pub fn parse(input: &str) -> Result<Self, ScheduleError> {
        let err = |reason: String| ScheduleError { input: input.to_owned(), reason };
        let expanded = match input.trim() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other if other.starts_with('@') => {
                return Err(err(format!(
                    "unknown macro {other:?} (expected @yearly, @annually, @monthly, @weekly, \
                     @daily, @midnight or @hourly)"
                )))
            }
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(err(format!(
                "expected 5 fields (minute hour day-of-month month day-of-week), found {}",
                fields.len()
            )));
        }
        let mut bits = [0u64; 5];
        for (i, (field, spec)) in fields.iter().zip(FIELDS.iter()).enumerate() {
            bits[i] = parse_field(field, spec).map_err(err)?;
        }
        Ok(Self {
            minutes: bits[0],
            hours: bits[1] as u32,
            days_of_month: bits[2] as u32,
            months: bits[3] as u16,
            days_of_week: bits[4] as u8,
            day_of_month_any: fields[2] == "*" || fields[2] == "?",
            day_of_week_any: fields[4] == "*" || fields[4] == "?",
        })
    }

    /// Whether the schedule fires at this UTC minute. `month` and `day_of_month` start at 1,
    /// `day_of_week` at 0 for Sunday.
    /// Whether the schedule fires in the minute containing `t`.
    pub fn fires_at(&self, t: super::Time) -> bool {
        let c = t.civil();
        self.matches(c.minute, c.hour, c.day, c.month, c.weekday)
    }

    pub fn matches(&self, minute: u32, hour: u32, day_of_month: u32, month: u32, day_of_week: u32) -> bool {
        let bit = |set: u64, v: u32| v < 64 && set & (1u64 << v) != 0;
        let dom = bit(u64::from(self.days_of_month), day_of_month);
        let dow = bit(u64::from(self.days_of_week), day_of_week);
        let day = match (self.day_of_month_any, self.day_of_week_any) {
            (true, true) => true,
            (true, false) => dow,
            (false, true) => dom,
            (false, false) => dom || dow,
        };
        bit(self.minutes, minute) && bit(u64::from(self.hours), hour) && bit(u64::from(self.months), month) && day
    }
}

fn parse_field(field: &str, spec: &FieldSpec) -> Result<u64, String> {
    let mut set = 0u64;
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| format!("bad step {step:?} in the {} field", spec.name))?;
                (range, step)
            }
            None => (item, 1),
        };
        let (low, high) = if range == "*" || range == "?" {
            (spec.min, spec.max)
        } else if let Some((low, high)) = range.split_once('-') {
            (parse_value(low, spec)?, parse_value(high, spec)?)
        } else {
            let value = parse_value(range, spec)?;
            // `5/15` means "from 5 to the end, every 15".
            (value, if step > 1 { spec.max } else { value })
        };
        if low > high {
            return Err(format!("range {range:?} in the {} field is backwards", spec.name));
        }
        let mut v = low;
        while v <= high {
            set |= 1u64 << v;
            // A step past the field's end ends the range (a step near u32::MAX overflowed:
            // found by the `cron` fuzz target).
            match v.checked_add(step) {
                Some(next) => v = next,
                None => break,
            }
        }
    }
    Ok(set)
}

fn parse_value(value: &str, spec: &FieldSpec) -> Result<u32, String> {
    let lower = value.to_ascii_lowercase();
    let parsed = match spec.names.iter().position(|n| *n == lower) {
        Some(index) => index as u32 + spec.names_start,
        None => value.parse::<u32>().map_err(|_| format!("{value:?} is not a number in the {} field", spec.name))?,
    };
    if parsed < spec.min || parsed > spec.max {
        return Err(format!("{parsed} is outside {}-{} in the {} field", spec.min, spec.max, spec.name));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_common_schedules() {
        for s in
            ["0 9 * * mon-fri", "@daily", "@midnight", "*/15 * * * *", "0 0 1,15 * *", "30 22 * dec sun", "0 0 * * 0-6"]
        {
            assert!(CronSchedule::parse(s).is_ok(), "{s}");
        }
    }

    #[test]
    fn rejects_bad_schedules() {
        for s in
            ["", "* * * *", "60 * * * *", "* * * * 7", "@fortnightly", "0 9 * * fri-mon", "*/0 * * * *", "a b c d e"]
        {
            let err = CronSchedule::parse(s).unwrap_err();
            assert!(err.to_string().contains("is not a valid cron schedule"), "{s}: {err}");
        }
    }

    #[test]
    fn steps_longer_than_the_field_select_the_start_only() {
        for s in ["5/4294967295 * * * *", "59/4294967294 * * * *", "5/60 * * * *"] {
            let once = CronSchedule::parse(s).unwrap();
            let first: u32 = s.split('/').next().unwrap().parse().unwrap();
            assert!((0..60).all(|m| once.matches(m, 0, 1, 1, 1) == (m == first)), "{s}");
        }
    }

    #[test]
    fn matching_follows_cron_day_rules() {
        let weekdays_9am = CronSchedule::parse("0 9 * * mon-fri").unwrap();
        // 2024-01-01 was a Monday.
        assert!(weekdays_9am.matches(0, 9, 1, 1, 1));
        assert!(!weekdays_9am.matches(0, 9, 6, 1, 6));
        assert!(!weekdays_9am.matches(1, 9, 1, 1, 1));
        // Both day fields restricted: either one matching is enough.
        let either = CronSchedule::parse("0 0 13 * fri").unwrap();
        assert!(either.matches(0, 0, 13, 5, 1));
        assert!(either.matches(0, 0, 3, 5, 5));
        assert!(!either.matches(0, 0, 3, 5, 4));
    }
}
