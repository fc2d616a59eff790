//! Kubernetes resource quantities (`100m`, `1.5`, `512Mi`, `2G`, `1e3`) parsed exactly.
//!
//! Values are kept as integer thousandths ("milli-units") so that CPU stays exact in millicores
//! and byte counts never go through floating point.

use thiserror::Error;

/// A quantity string that is not a valid Kubernetes quantity.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{input:?} is not a valid Kubernetes quantity: {why}")]
pub struct QuantityError {
    pub input: String,
    pub why: &'static str,
}

/// Parses a quantity into milli-units, rounding any finer fraction up (as the API server does).
pub fn parse_milli(input: &str) -> Result<i128, QuantityError> {
    let err = |why| QuantityError { input: input.to_string(), why };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    let (negative, s) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(err("missing or malformed number"));
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    // Decimal exponent and binary multiplier from the suffix.
    let (exp10, mult2): (i32, i128) = match suffix {
        "" => (0, 1),
        "n" => (-9, 1),
        "u" => (-6, 1),
        "m" => (-3, 1),
        "k" => (3, 1),
        "M" => (6, 1),
        "G" => (9, 1),
        "T" => (12, 1),
        "P" => (15, 1),
        "E" => (18, 1),
        "Ki" => (0, 1 << 10),
        "Mi" => (0, 1 << 20),
        "Gi" => (0, 1 << 30),
        "Ti" => (0, 1 << 40),
        "Pi" => (0, 1 << 50),
        "Ei" => (0, 1 << 60),
        e if e.starts_with(['e', 'E']) => {
            let exp: i32 = e[1..].parse().map_err(|_| err("malformed exponent"))?;
            if !(-30..=30).contains(&exp) {
                return Err(err("exponent out of range"));
            }
            (exp, 1)
        }
        _ => return Err(err("unknown suffix")),
    };
    // digits × 10^(exp10 − len(frac) + 3) × mult2, rounded up.
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return Err(err("too many digits"));
    }
    let mantissa: i128 = if digits.is_empty() { 0 } else { digits.parse().map_err(|_| err("malformed number"))? };
    let scale = exp10 - frac_part.len() as i32 + 3;
    let value = if scale >= 0 {
        mantissa
            .checked_mul(10i128.checked_pow(scale as u32).ok_or_else(|| err("too large"))?)
            .and_then(|v| v.checked_mul(mult2))
            .ok_or_else(|| err("too large"))?
    } else {
        let num = mantissa.checked_mul(mult2).ok_or_else(|| err("too large"))?;
        // Rounded up without `num + div - 1`, which overflowed for a value near i128's end (found
        // by the `quantity` fuzz target); a divisor past i128 means less than a milli-unit.
        match 10i128.checked_pow((-scale) as u32) {
            Some(div) => num / div + i128::from(num % div != 0),
            None => i128::from(num != 0),
        }
    };
    Ok(if negative { -value } else { value })
}

/// Parses a quantity into whole units (bytes, pods, GPUs), rounding fractions up.
pub fn parse_units(input: &str) -> Result<i64, QuantityError> {
    let milli = parse_milli(input)?;
    let units = if milli >= 0 { (milli + 999) / 1000 } else { milli / 1000 };
    i64::try_from(units).map_err(|_| QuantityError { input: input.to_string(), why: "too large" })
}

/// Parses a CPU quantity into millicores.
pub fn parse_cpu_millis(input: &str) -> Result<i64, QuantityError> {
    i64::try_from(parse_milli(input)?).map_err(|_| QuantityError { input: input.to_string(), why: "too large" })
}

/// Formats millicores the way people write them: `2`, `1500m`.
pub fn format_cpu(millis: i64) -> String {
    if millis % 1000 == 0 {
        format!("{}", millis / 1000)
    } else {
        format!("{millis}m")
    }
}

/// Formats bytes with the largest binary suffix that divides them exactly: `16Gi`, `1536Mi`.
pub fn format_bytes(bytes: i64) -> String {
    for (suffix, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
        let unit = 1i64 << shift;
        if bytes != 0 && bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    format!("{bytes}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kubernetes_quantities() {
        assert_eq!(parse_cpu_millis("100m").unwrap(), 100);
        assert_eq!(parse_cpu_millis("1.5").unwrap(), 1500);
        assert_eq!(parse_cpu_millis("2").unwrap(), 2000);
        assert_eq!(parse_cpu_millis("0.0001").unwrap(), 1, "finer than a millicore rounds up");
        assert_eq!(parse_units("512Mi").unwrap(), 512 << 20);
        assert_eq!(parse_units("1Gi").unwrap(), 1 << 30);
        assert_eq!(parse_units("2G").unwrap(), 2_000_000_000);
        assert_eq!(parse_units("1e3").unwrap(), 1000);
        assert_eq!(parse_units("1.5Gi").unwrap(), 3 << 29);
        assert_eq!(parse_units("100k").unwrap(), 100_000);
        assert_eq!(parse_units("1").unwrap(), 1);
        assert_eq!(parse_units("-1").unwrap(), -1);
        assert_eq!(parse_cpu_millis("+2k").unwrap(), 2_000_000);
        assert_eq!(parse_cpu_millis(".5").unwrap(), 500);
        assert_eq!(parse_units("0.5Ti").unwrap(), 1 << 39);
    }

    /// Found by the `quantity` fuzz target (the first overflowed while rounding up); the second
    /// was refused as "too small" where a shorter one rounds up.
    #[test]
    fn tiny_values_round_up_to_a_milli_unit() {
        assert_eq!(parse_milli("0.00000000000000000000099999999999999999999Ei"), Ok(2));
        assert_eq!(parse_milli("0.00000000000000000000000000000000000000001"), Ok(1));
        assert_eq!(parse_milli("0.00000000000000000000000000000000000000000"), Ok(0));
        assert_eq!(parse_milli("0.0000000000000000000000000000000000001"), Ok(1));
    }

    #[test]
    fn rejects_garbage_with_the_input_in_the_message() {
        for bad in ["", "abc", "1.2.3", "10Mb", "1e", ".", "Gi", "10 Gi", "5GB"] {
            let e = parse_milli(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn formats_round_trip() {
        assert_eq!(format_cpu(1500), "1500m");
        assert_eq!(format_cpu(4000), "4");
        assert_eq!(format_bytes(16 << 30), "16Gi");
        assert_eq!(format_bytes(1536 << 20), "1536Mi");
        assert_eq!(format_bytes(1000), "1000");
    }
}
