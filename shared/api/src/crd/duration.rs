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

pub use dovetail_core::time::DurationError;
use dovetail_core::time::{format_duration, parse_duration as parse_go_duration};
use serde::{Deserialize, Serialize};

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
