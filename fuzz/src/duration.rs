//! Go-style durations (`1h30m`, `Never`): NodePools' `expireAfter`, `consolidateAfter`,
//! `terminationGracePeriod`, budget durations, the simulator's times (`dovetail_core::time`,
//! `dovetail_api::crd::{KubeDuration, NillableDuration}`).

use arbitrary::Arbitrary;
use dovetail_api::crd::{KubeDuration, NillableDuration};
use dovetail_core::time::{format_duration, parse_duration};

use crate::harness::Target;
use crate::tree::Word;

pub const TARGET: Target<Input> = Target {
    name: "duration",
    fixtures: &[],
    vocabulary: &["ns", "us", "µs", "μs", "ms", "s", "m", "h", "d", "Never", ".", "+", "-", "0", "1e3", " "],
    render,
    check,
};

/// `[sign] (number unit)*`.
#[derive(Debug, Arbitrary)]
pub struct Input {
    sign: Option<bool>,
    parts: Vec<(Digits, Option<Digits>, Unit)>,
}

/// Digits, from a few to more than any integer type holds.
#[derive(Debug, Arbitrary)]
pub enum Digits {
    Small(u16),
    Large(u128),
    /// This many nines (up to 40: the widths where integer types end).
    Nines(u8),
    /// One of [`EDGES`]: random numbers almost never land on a type's end.
    Edge(u8),
    Empty,
}

/// The ends of the integer types the parsers count in, their neighbours, and the largest whole
/// numbers of microseconds, milliseconds, seconds, minutes and hours a `u128` of nanoseconds holds.
const EDGES: [&str; 12] = [
    "0",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "170141183460469231731687303715884105727",
    "340282366920938463463374607431768211455",
    "340282366920938463463374607431768211",
    "340282366920938463463374607431768",
    "340282366920938463463374607431",
    "5671372782015641057722910123",
    "94522879700260684295381835",
];

impl Digits {
    pub fn render(&self) -> String {
        match self {
            Digits::Small(n) => n.to_string(),
            Digits::Large(n) => n.to_string(),
            Digits::Nines(n) => "9".repeat(*n as usize % 41),
            Digits::Edge(i) => EDGES[*i as usize % EDGES.len()].to_string(),
            Digits::Empty => String::new(),
        }
    }
}

#[derive(Debug, Arbitrary)]
pub enum Unit {
    Known(u8),
    Any(Word),
}

const UNITS: [&str; 8] = ["ns", "us", "µs", "ms", "s", "m", "h", ""];

pub fn render(input: &Input, vocabulary: &[&str]) -> String {
    let mut out = match input.sign {
        Some(true) => "+".to_string(),
        Some(false) => "-".to_string(),
        None => String::new(),
    };
    for (whole, fraction, unit) in &input.parts {
        out.push_str(&whole.render());
        if let Some(fraction) = fraction {
            out.push('.');
            out.push_str(&fraction.render());
        }
        out.push_str(match unit {
            Unit::Known(i) => UNITS[*i as usize % UNITS.len()],
            Unit::Any(w) => w.resolve(vocabulary),
        });
    }
    out
}

/// A duration parses or says why, naming what it was given; a parsed one is written back
/// (`format_duration`, what Dovetail writes into objects) as a string that parses to the same
/// duration. The CRD types parse as the core does, `Never` aside.
pub fn check(text: &str) {
    let parsed = parse_duration(text);
    match &parsed {
        Ok(d) => {
            let written = format_duration(*d);
            assert_eq!(parse_duration(&written).as_ref(), Ok(d), "{text:?} parsed to {d:?}, written as {written:?}");
        }
        Err(e) => {
            assert_eq!(e.input, text);
            assert!(e.to_string().contains(&format!("{text:?}")), "{e}");
        }
    }
    assert_eq!(KubeDuration::new(text).parse(), parsed);
    let nillable = NillableDuration::new(text).parse();
    if text == NillableDuration::NEVER {
        assert_eq!(nillable, Ok(None));
    } else {
        assert_eq!(nillable, parsed.map(Some));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_durations_say_why() {
        for (text, says) in
            [("5", "missing unit"), ("5d", "unknown unit"), ("-1s", "negative"), ("1..5s", "expected a number")]
        {
            let e = parse_duration(text).unwrap_err();
            assert!(e.to_string().contains(says) && e.to_string().contains(text), "{text}: {e}");
            check(text);
        }
    }
}
