//! Duration strings as Kubernetes and Karpenter write them (`720h`, `30m`, `1h30m`, `Never`).
//!
//! Both types keep the exact string they were given. Re-serializing an object must not rewrite
//! `1h30m` as `5400s` (that would show up as a diff in GitOps tools and change the drift hash),
//! and an unparsable value must survive deserialization so that validation, which knows the
//! object and field, can report it. Parsing into [`std::time::Duration`] is explicit.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

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
    fn new(input: &str, reason: &'static str) -> Self {
        Self { input: input.to_owned(), reason }
    }
}

/// A duration that may be disabled with the literal `Never` (Karpenter's `NillableDuration`),
/// used by `expireAfter` and `consolidateAfter`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NillableDuration(String);

impl NillableDuration {
    /// The spelling of a disabled duration.
    pub const NEVER: &'static str = "Never";

    /// Wraps a string as written in a manifest; nothing is checked until [`Self::parse`].
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The disabled duration, `Never`.
    pub fn never() -> Self {
        Self(Self::NEVER.to_owned())
    }

    /// The string as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is `Never`.
    pub fn is_never(&self) -> bool {
        self.0 == Self::NEVER
    }

    /// `Ok(None)` for `Never`, `Ok(Some(d))` for a Go-style duration such as `1h30m`.
    pub fn parse(&self) -> Result<Option<Duration>, DurationError> {
        if self.is_never() {
            Ok(None)
        } else {
            parse_go_duration(&self.0).map(Some)
        }
    }
}

impl From<Duration> for NillableDuration {
    fn from(value: Duration) -> Self {
        Self(format_duration(value))
    }
}

impl From<Option<Duration>> for NillableDuration {
    fn from(value: Option<Duration>) -> Self {
        value.map_or_else(Self::never, Self::from)
    }
}

impl FromStr for NillableDuration {
    type Err = DurationError;

    /// Accepts only strings that [`NillableDuration::parse`] accepts.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let value = Self::new(s);
        value.parse()?;
        Ok(value)
    }
}

impl fmt::Display for NillableDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl JsonSchema for NillableDuration {
    fn schema_name() -> Cow<'static, str> {
        "NillableDuration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        // Karpenter's pattern: whole seconds, minutes and hours only, or `Never`.
        json_schema!({
            "type": "string",
            "pattern": "^(([0-9]+(s|m|h))+|Never)$",
        })
    }
}

/// A plain duration (Kubernetes' `metav1.Duration`), e.g. `terminationGracePeriod: 48h`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KubeDuration(String);

impl KubeDuration {
    /// Wraps a string as written in a manifest; nothing is checked until [`Self::parse`].
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The string as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Parses a Go-style duration such as `90s` or `1h30m`.
    pub fn parse(&self) -> Result<Duration, DurationError> {
        parse_go_duration(&self.0)
    }
}

impl From<Duration> for KubeDuration {
    fn from(value: Duration) -> Self {
        Self(format_duration(value))
    }
}

impl FromStr for KubeDuration {
    type Err = DurationError;

    /// Accepts only strings that [`KubeDuration::parse`] accepts.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let value = Self::new(s);
        value.parse()?;
        Ok(value)
    }
}

impl fmt::Display for KubeDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl JsonSchema for KubeDuration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        // No pattern here: each field that restricts the units adds its own.
        json_schema!({ "type": "string" })
    }
}

/// Parses Go's `time.ParseDuration` syntax (what Karpenter accepts): a sequence of decimal numbers
/// with units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`, like `1h30m` or `1.5s`; `0` alone is allowed.
/// Negative durations are rejected: no Karpenter field has a meaning for them.
pub(crate) fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
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
            nanos += u128::from(digit - b'0') * scale;
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

/// Whether `input` is one or more `<digits><unit>` groups with units from `units`, the shape
/// Karpenter's CRD patterns enforce (e.g. `^([0-9]+(s|m|h))+$`).
pub(crate) fn is_whole_unit_duration(input: &str, units: &[char]) -> bool {
    let mut chars = input.chars().peekable();
    if chars.peek().is_none() {
        return false;
    }
    while chars.peek().is_some() {
        let mut digits = 0;
        while chars.peek().is_some_and(char::is_ascii_digit) {
            chars.next();
            digits += 1;
        }
        match chars.next() {
            Some(unit) if digits > 0 && units.contains(&unit) => {}
            _ => return false,
        }
    }
    true
}

/// Formats a duration compactly in whole units (`720h`, `1h30m`, `45s`, `0s`); sub-second parts
/// are written in milliseconds, micro- or nanoseconds so that nothing is lost.
fn format_duration(value: Duration) -> String {
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

    #[test]
    fn parses_karpenter_durations() {
        let cases =
            [("720h", 720 * 3600), ("30m", 1800), ("1h30m", 5400), ("0s", 0), ("0", 0), ("90s", 90), ("1h0m0s", 3600)];
        for (input, secs) in cases {
            assert_eq!(KubeDuration::new(input).parse(), Ok(Duration::from_secs(secs)), "{input}");
        }
        assert_eq!(KubeDuration::new("1.5s").parse(), Ok(Duration::from_millis(1500)));
        assert_eq!(KubeDuration::new("250ms").parse(), Ok(Duration::from_millis(250)));
    }

    #[test]
    fn never_is_none() {
        assert_eq!(NillableDuration::never().parse(), Ok(None));
        assert_eq!(NillableDuration::new("720h").parse(), Ok(Some(Duration::from_secs(720 * 3600))));
        assert!(KubeDuration::new("Never").parse().is_err());
    }

    #[test]
    fn rejects_garbage_with_a_clear_error() {
        for input in ["", "h", "10", "10x", "1.2.3s", "-5m", "ten minutes", "5m-"] {
            let err = KubeDuration::new(input).parse().unwrap_err();
            assert_eq!(err.input, input);
            assert!(err.to_string().contains("is not a valid duration"), "{err}");
        }
    }

    #[test]
    fn round_trips_as_written() {
        for input in ["720h", "1h30m", "Never", "0s", "90s"] {
            let d = NillableDuration::new(input);
            let json = serde_json::to_string(&d).unwrap();
            assert_eq!(json, format!("\"{input}\""));
            let back: NillableDuration = serde_json::from_str(&json).unwrap();
            assert_eq!(back.as_str(), input);
        }
    }

    #[test]
    fn formats_compactly() {
        assert_eq!(NillableDuration::from(Duration::from_secs(720 * 3600)).as_str(), "720h");
        assert_eq!(KubeDuration::from(Duration::from_secs(5400)).as_str(), "1h30m");
        assert_eq!(KubeDuration::from(Duration::ZERO).as_str(), "0s");
        assert_eq!(NillableDuration::from(None).as_str(), "Never");
        assert_eq!(KubeDuration::from(Duration::from_millis(1500)).as_str(), "1s500ms");
    }

    #[test]
    fn whole_unit_shape() {
        assert!(is_whole_unit_duration("1h30m", &['s', 'm', 'h']));
        assert!(!is_whole_unit_duration("1.5h", &['s', 'm', 'h']));
        assert!(!is_whole_unit_duration("", &['s', 'm', 'h']));
        assert!(!is_whole_unit_duration("10s", &['m', 'h']));
        assert!(!is_whole_unit_duration("h", &['h']));
    }
}
