//! Go-style duration strings (`1h30m`, `1.5s`), as Kubernetes and Karpenter write them.

use std::time::Duration;

/// Why a duration string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a valid duration: {reason}")]
pub struct DurationError {
    /// The string that was given.
    pub input: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl DurationError {
    pub(crate) fn new(input: &str, reason: &'static str) -> Self {
        Self { input: input.to_owned(), reason }
    }
}

/// Parses Go's `time.ParseDuration` syntax (what Karpenter accepts): a sequence of decimal numbers
/// with units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`, like `1h30m` or `1.5s`; `0` alone is allowed.
/// Negative durations are rejected: no Karpenter field has a meaning for them.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |reason| DurationError::new(input, reason);
    let mut rest = input;
    if let Some(stripped) = rest.strip_prefix('+') {
        rest = stripped;
    } else if rest.starts_with('-') {
        return Err(err("negative durations are not allowed"));
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(err("expected a number followed by a unit, e.g. 30s, 15m, 1h30m"));
    }
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(err("expected a number followed by a unit, e.g. 30s, 15m, 1h30m"));
        }
        let unit_len = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            "" => return Err(err("missing unit (one of ns, us, ms, s, m, h)")),
            _ => return Err(err("unknown unit (expected one of ns, us, ms, s, m, h)")),
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| err("number too large"))? };
        let mut nanos = whole.checked_mul(unit_nanos).ok_or_else(|| err("number too large"))?;
        // Fractions are exact to the nanosecond; further digits are truncated, as Go does.
        let mut scale = unit_nanos;
        for digit in fraction.bytes() {
            scale /= 10;
            if scale == 0 {
                break;
            }
            // Checked: a whole part just below u128's end in nanoseconds plus its fraction
            // overflowed (found by the `duration` fuzz target).
            nanos = nanos.checked_add(u128::from(digit - b'0') * scale).ok_or_else(|| err("number too large"))?;
        }
        total_nanos = total_nanos.checked_add(nanos).ok_or_else(|| err("number too large"))?;
        rest = after;
    }
    // Go durations are int64 nanoseconds (about 292 years); mirror that bound.
    if total_nanos > i64::MAX as u128 {
        return Err(err("number too large"));
    }
    Ok(Duration::from_nanos(total_nanos as u64))
}

/// Formats a duration compactly in whole units (`720h`, `1h30m`, `45s`, `0s`); sub-second parts
/// are written in milliseconds, micro- or nanoseconds so that nothing is lost.
pub fn format_duration(value: Duration) -> String {
    let secs = value.as_secs();
    let nanos = value.subsec_nanos();
    if secs == 0 && nanos == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    if nanos > 0 {
        if nanos % 1_000_000 == 0 {
            out.push_str(&format!("{}ms", nanos / 1_000_000));
        } else if nanos % 1_000 == 0 {
            out.push_str(&format!("{}us", nanos / 1_000));
        } else {
            out.push_str(&format!("{nanos}ns"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `duration` fuzz target: the fraction's nanoseconds overflowed a whole part
    /// that alone fitted.
    #[test]
    fn a_fraction_past_the_end_is_too_large() {
        let e = parse_duration("340282366920938463463374607431768211.9us").unwrap_err();
        assert_eq!(e.reason, "number too large");
        assert_eq!(parse_duration("9223372036.854775807s"), Ok(Duration::from_nanos(i64::MAX as u64)));
    }
}
