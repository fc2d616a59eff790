//! RFC 3339 instants as AWS writes them.

use super::Time;

/// `yyyy-mm-ddThh:mm:ss[.fff]Z` (the form EventBridge writes) to a [`Time`]; `None` otherwise.
pub fn parse_rfc3339(s: &str) -> Option<Time> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes().all(|c| c.is_ascii_digit()).then(|| part.parse().ok())?
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let rest = &s[19..];
    let (millis, zone) = match rest.strip_prefix('.') {
        Some(frac) => {
            let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            let ms = frac[..digits.min(3)].parse::<i64>().ok()? * 10_i64.pow(3 - digits.min(3) as u32);
            (ms, &frac[digits..])
        }
        None => (0, rest),
    };
    if zone != "Z" && zone != "z" {
        // EventBridge always writes UTC; offsets are not worth the code for an informational field.
        return None;
    }
    // Days from civil (the inverse of `Time::civil`, Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(Time(((days * 86_400) + hour * 3600 + minute * 60 + second) * 1000 + millis))
}
