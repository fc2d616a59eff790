//! Cron schedules of disruption budgets (`spec.disruption.budgets[].schedule`) and of the
//! simulator's CronJobs.
//!
//! Karpenter reads a budget's schedule with robfig/cron v3's standard parser (the one the
//! Kubernetes CronJob controller uses too) and evaluates it in UTC. A schedule has to mean the
//! same here, quirks included, or a NodePool written for Karpenter would disrupt at other times:
//! - five fields: minute 0–59, hour 0–23, day of month 1–31, month 1–12 or `JAN`–`DEC`, day of
//!   week 0–6 or `SUN`–`SAT` (names in any case; `7` is not Sunday, full names are not names);
//! - a field is a comma-separated list of `*`, `?` (the same as `*`), `a` or `a-b`, each
//!   optionally followed by `/n`. With a step, a lone start runs to the field's maximum: `a/n` is
//!   `a-max/n`, even `5/1` is `5-max`;
//! - what robfig never reads is not checked either: empty list items are skipped (`1,,2` is
//!   `1,2`), and everything after a leading `*-` or `?-` is ignored (`*-5` is `*`);
//! - the day rule: if either day field holds a *star* — `*` or `?`, alone or in a list, bare or
//!   with step `/1` (`*/2` is no star) — a day must match both fields; otherwise either one;
//! - the descriptors Karpenter's schedule pattern allows: `@yearly`, `@annually`, `@monthly`,
//!   `@weekly`, `@daily`, `@midnight`, `@hourly`, exactly so written (no surrounding blanks);
//! - [`CronSchedule::next_after`] is robfig's `Next`: the first matching minute strictly after an
//!   instant, looked for until the end of the fifth year after it, so `0 0 30 2 *` never fires.
//!
//! Not accepted: `@every` intervals (Karpenter's pattern rejects them) and `TZ=`/`CRON_TZ=` time
//! zone prefixes (Karpenter documents schedules as UTC; time zones would need a zone database in
//! the core).

use super::Time;

/// Why a schedule string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a valid cron schedule: {reason}")]
pub struct ScheduleError {
    /// The schedule as written.
    pub input: String,
    /// What is wrong with it, naming the cron field when one is at fault.
    pub reason: String,
}

/// A parsed five-field cron schedule, in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CronSchedule {
    /// One bit per allowed value, indexed by [`Field`] order.
    bits: [u64; 5],
    /// Whether the day-of-month / day-of-week field holds a star (see the module documentation).
    day_of_month_star: bool,
    day_of_week_star: bool,
}

const MONTH_NAMES: &[&str] = &["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const DAY_NAMES: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// One of the five fields: its name for errors, its bounds and its value names.
struct Field {
    name: &'static str,
    min: u64,
    max: u64,
    names: &'static [&'static str],
    /// Value of the first name (`jan` = 1, `sun` = 0).
    names_start: u64,
}

const MINUTE: usize = 0;
const HOUR: usize = 1;
const DAY_OF_MONTH: usize = 2;
const MONTH: usize = 3;
const DAY_OF_WEEK: usize = 4;

const FIELDS: [Field; 5] = [
    Field { name: "minute", min: 0, max: 59, names: &[], names_start: 0 },
    Field { name: "hour", min: 0, max: 23, names: &[], names_start: 0 },
    Field { name: "day-of-month", min: 1, max: 31, names: &[], names_start: 0 },
    Field { name: "month", min: 1, max: 12, names: MONTH_NAMES, names_start: 1 },
    Field { name: "day-of-week", min: 0, max: 6, names: DAY_NAMES, names_start: 0 },
];

const DESCRIPTORS: &str = "@yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly";

const SECOND_MS: i64 = 1000;
const MINUTE_SECS: i64 = 60;
const DAY_SECS: i64 = 86_400;
/// robfig gives up on a schedule that has not fired by the end of the fifth year.
const SEARCH_YEARS: i64 = 5;

impl CronSchedule {
    /// Parses a five-field expression or a descriptor (`@yearly`, `@annually`, `@monthly`,
    /// `@weekly`, `@daily`, `@midnight`, `@hourly`).
    pub fn parse(input: &str) -> Result<Self, ScheduleError> {
        let err = |reason: String| ScheduleError { input: input.to_owned(), reason };
        if input.is_empty() {
            return Err(err("it is empty".into()));
        }
        if input.starts_with("TZ=") || input.starts_with("CRON_TZ=") {
            return Err(err("time zone prefixes (TZ=, CRON_TZ=) are not supported: schedules are in UTC".into()));
        }
        // Descriptors are matched as written, like robfig: `@Daily` and `@daily ` are errors.
        let expression = match input {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            every if every.starts_with("@every ") => {
                return Err(err(format!("@every intervals are not supported (use 5 fields or {DESCRIPTORS})")))
            }
            other if other.starts_with('@') => {
                return Err(err(format!("unknown descriptor {other:?} (expected {DESCRIPTORS})")))
            }
            other => other,
        };
        let texts: Vec<&str> = expression.split_whitespace().collect();
        if texts.len() != FIELDS.len() {
            return Err(err(format!(
                "expected 5 fields (minute hour day-of-month month day-of-week), found {}",
                texts.len()
            )));
        }
        let mut bits = [0u64; 5];
        let mut stars = [false; 5];
        for (i, (text, field)) in texts.iter().zip(FIELDS.iter()).enumerate() {
            (bits[i], stars[i]) =
                parse_field(text, field).map_err(|why| err(format!("the {} field {text:?}: {why}", field.name)))?;
        }
        Ok(Self { bits, day_of_month_star: stars[DAY_OF_MONTH], day_of_week_star: stars[DAY_OF_WEEK] })
    }

    /// Whether the schedule fires in the minute containing `t`.
    pub fn fires_at(&self, t: Time) -> bool {
        let c = t.civil();
        self.month_and_day_match(c.month, c.day, c.weekday)
            && has(self.bits[HOUR], c.hour.into())
            && has(self.bits[MINUTE], c.minute.into())
    }

    /// The first minute strictly after `t` the schedule fires at (robfig's `Next`, UTC), or
    /// `None` if it does not fire before the end of the fifth year after `t`.
    pub fn next_after(&self, t: Time) -> Option<Time> {
        // The first whole second after `t`, then the first whole minute from there.
        let after_secs = t.0.div_euclid(SECOND_MS) + 1;
        let last_year = Time::from_secs(after_secs).civil().year + SEARCH_YEARS;
        let first_secs = (after_secs + MINUTE_SECS - 1).div_euclid(MINUTE_SECS) * MINUTE_SECS;
        let mut day = first_secs.div_euclid(DAY_SECS);
        // Minute of the day to start from: where `first` is on its own day, 0 on later days.
        let mut from = first_secs.rem_euclid(DAY_SECS) / MINUTE_SECS;
        loop {
            let c = Time::from_secs(day * DAY_SECS).civil();
            if c.year > last_year {
                return None;
            }
            if self.month_and_day_match(c.month, c.day, c.weekday) {
                if let Some(minute_of_day) = self.first_time_of_day(from as u64) {
                    return Some(Time::from_secs(day * DAY_SECS + minute_of_day as i64 * MINUTE_SECS));
                }
            }
            day += 1;
            from = 0;
        }
    }

    /// The first minute of a day, at or after `from` (minutes since midnight), with a matching
    /// hour and minute.
    fn first_time_of_day(&self, from: u64) -> Option<u64> {
        (from / 60..24).filter(|hour| has(self.bits[HOUR], *hour)).find_map(|hour| {
            let first_minute = if hour == from / 60 { from % 60 } else { 0 };
            let later = self.bits[MINUTE] >> first_minute;
            (later != 0).then(|| hour * 60 + first_minute + u64::from(later.trailing_zeros()))
        })
    }

    fn month_and_day_match(&self, month: u32, day_of_month: u32, day_of_week: u32) -> bool {
        let by_month_day = has(self.bits[DAY_OF_MONTH], day_of_month.into());
        let by_week_day = has(self.bits[DAY_OF_WEEK], day_of_week.into());
        let day = if self.day_of_month_star || self.day_of_week_star {
            by_month_day && by_week_day
        } else {
            by_month_day || by_week_day
        };
        day && has(self.bits[MONTH], month.into())
    }
}

fn has(bits: u64, value: u64) -> bool {
    value < 64 && bits & (1 << value) != 0
}

/// A field's allowed values as bits, and whether it holds a star.
fn parse_field(text: &str, field: &Field) -> Result<(u64, bool), String> {
    let mut bits = 0;
    let mut star = false;
    for item in text.split(',').filter(|item| !item.is_empty()) {
        let (item_bits, item_star) = parse_item(item, field)?;
        bits |= item_bits;
        star |= item_star;
    }
    Ok((bits, star))
}

/// One list item: `*`, `?`, `a` or `a-b`, optionally with `/step`.
fn parse_item(item: &str, field: &Field) -> Result<(u64, bool), String> {
    let (range, step) = match item.split('/').collect::<Vec<_>>()[..] {
        [range] => (range, None),
        [range, step] => (range, Some(step)),
        _ => return Err(format!("too many slashes in {item:?}")),
    };
    let bounds: Vec<&str> = range.split('-').collect();
    let (start, mut end, mut star) = if bounds[0] == "*" || bounds[0] == "?" {
        (field.min, field.max, true)
    } else {
        let start = parse_value(bounds[0], field)?;
        match bounds[1..] {
            [] => (start, start, false),
            [end] => (start, parse_value(end, field)?, false),
            _ => return Err(format!("too many hyphens in {item:?}")),
        }
    };
    let step = match step {
        None => 1,
        Some(text) => {
            let step = text
                .parse::<u64>()
                .ok()
                .filter(|step| *step > 0)
                .ok_or_else(|| format!("the step {text:?} in {item:?} is not a positive number"))?;
            if bounds.len() == 1 {
                end = field.max;
            }
            // Only an every-value step keeps the star: `*/2` restricts the day.
            star &= step == 1;
            step
        }
    };
    for value in [start, end] {
        if value < field.min {
            return Err(format!("{value} is below the minimum {}", field.min));
        }
        if value > field.max {
            return Err(format!("{value} is above the maximum {}", field.max));
        }
    }
    if start > end {
        return Err(format!("the range {item:?} starts at {start}, after its end {end}"));
    }
    let step = usize::try_from(step).unwrap_or(usize::MAX);
    Ok(((start..=end).step_by(step).fold(0, |bits, v| bits | 1 << v), star))
}

fn parse_value(text: &str, field: &Field) -> Result<u64, String> {
    if text.is_empty() {
        return Err("a value is missing".into());
    }
    let lower = text.to_ascii_lowercase();
    if let Some(index) = field.names.iter().position(|name| *name == lower) {
        return Ok(index as u64 + field.names_start);
    }
    text.parse::<u64>().map_err(|_| {
        if field.names.is_empty() {
            format!("{text:?} is not a number")
        } else {
            let (first, last) = (field.names[0], field.names[field.names.len() - 1]);
            format!(
                "{text:?} is neither a number nor a name ({}–{})",
                first.to_ascii_uppercase(),
                last.to_ascii_uppercase()
            )
        }
    })
}

#[cfg(test)]
mod tests;
