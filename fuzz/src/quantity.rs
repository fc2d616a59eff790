//! Kubernetes quantities (`100m`, `1.5Gi`, `1e3`): resource requests and limits, NodePool
//! limits, kubelet reservations (`dovetail_core::resources`).

use arbitrary::Arbitrary;
use dovetail_core::resources::{format_bytes, format_cpu, parse_cpu_millis, parse_milli, parse_units, Resources};

use crate::duration::Digits;
use crate::harness::Target;
use crate::tree::Word;

pub const TARGET: Target<Input> = Target {
    name: "quantity",
    fixtures: &[],
    vocabulary: &[
        "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E", "e", "E-", "e+", "KB", " ",
        ".", "+", "-",
    ],
    render,
    check,
};

/// `[sign] digits[.digits] suffix`, with spaces around when `padded`.
#[derive(Debug, Arbitrary)]
pub struct Input {
    sign: Option<bool>,
    whole: Digits,
    fraction: Option<(u8, Digits)>,
    suffix: Suffix,
    padded: bool,
}

#[derive(Debug, Arbitrary)]
pub enum Suffix {
    Known(u8),
    Exponent(i16),
    Any(Word),
}

const SUFFIXES: [&str; 16] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"];

pub fn render(input: &Input, vocabulary: &[&str]) -> String {
    let mut out = String::new();
    if input.padded {
        out.push(' ');
    }
    match input.sign {
        Some(true) => out.push('+'),
        Some(false) => out.push('-'),
        None => {}
    }
    out.push_str(&input.whole.render());
    if let Some((zeros, fraction)) = &input.fraction {
        // Leading zeros after the point: tiny values, which round up.
        out.push('.');
        out.push_str(&"0".repeat(*zeros as usize % 48));
        out.push_str(&fraction.render());
    }
    match &input.suffix {
        Suffix::Known(i) => out.push_str(SUFFIXES[*i as usize % SUFFIXES.len()]),
        Suffix::Exponent(e) => out.push_str(&format!("e{e}")),
        Suffix::Any(w) => out.push_str(w.resolve(vocabulary)),
    }
    if input.padded {
        out.push(' ');
    }
    out
}

/// A quantity parses or says why, naming what it was given; the whole-unit and CPU readings
/// agree with the milli-unit one, and what Dovetail writes back (`format_cpu`, `format_bytes`)
/// parses to the same value. A resource list's error names the resource.
pub fn check(text: &str) {
    let milli = parse_milli(text);
    match &milli {
        Ok(m) => {
            let m = *m;
            let units = parse_units(text);
            let ceiling = if m >= 0 { m.div_euclid(1000) + i128::from(m.rem_euclid(1000) != 0) } else { m / 1000 };
            match i64::try_from(ceiling) {
                Ok(whole) => {
                    assert_eq!(units.as_ref().ok(), Some(&whole), "{text:?}");
                    assert_eq!(
                        parse_units(&format_bytes(whole)),
                        Ok(whole),
                        "{text:?} written as {}",
                        format_bytes(whole)
                    );
                }
                Err(_) => assert!(units.is_err(), "{text:?}"),
            }
            match i64::try_from(m) {
                Ok(millis) => {
                    assert_eq!(parse_cpu_millis(text), Ok(millis), "{text:?}");
                    assert_eq!(
                        parse_cpu_millis(&format_cpu(millis)),
                        Ok(millis),
                        "{text:?} written as {}",
                        format_cpu(millis)
                    );
                }
                Err(_) => assert!(parse_cpu_millis(text).is_err(), "{text:?}"),
            }
        }
        Err(e) => {
            assert_eq!(e.input, text);
            assert!(e.to_string().contains(&format!("{text:?}")), "{e}");
            assert!(parse_units(text).is_err() && parse_cpu_millis(text).is_err());
        }
    }
    for name in ["cpu", "memory", "nvidia.com/gpu"] {
        if let Err((resource, e)) = Resources::from_quantities([(name, text)]) {
            assert_eq!(resource, name);
            assert_eq!(e.input, text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_quantities_say_why_and_name_the_resource() {
        for (text, says) in
            [("1.2.3", "malformed number"), ("5GB", "unknown suffix"), ("1e99", "exponent out of range")]
        {
            let e = parse_milli(text).unwrap_err();
            assert!(e.to_string().contains(says) && e.to_string().contains(text), "{text}: {e}");
            let (resource, _) = Resources::from_quantities([("memory", text)]).unwrap_err();
            assert_eq!(resource, "memory");
            check(text);
        }
    }
}
