//! Cron schedules of disruption budgets and of the simulator's timelines and CronJobs
//! (`dovetail_core::time::cron`).

use arbitrary::Arbitrary;
use dovetail_core::time::cron::CronSchedule;
use dovetail_core::time::Time;

use crate::harness::Target;
use crate::tree::Word;

pub const TARGET: Target<Input> = Target {
    name: "cron",
    fixtures: &[],
    vocabulary: &[
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "@daily",
        "@midnight",
        "@hourly",
        "@reboot",
        "*",
        "?",
        "-",
        "/",
        ",",
        "L",
        "W",
        "#",
        "jan",
        "dec",
        "sun",
        "sat",
        "MON",
        "Fri",
        "60",
        "24",
        "32",
        "13",
        "7",
        "0",
    ],
    render,
    check,
};

/// A schedule as fields of comma-separated items (`a`, `a-b`, `*`, each with an optional step).
#[derive(Debug, Arbitrary)]
pub enum Input {
    Macro(Word),
    Fields { fields: Vec<Vec<Item>>, separator: Separator },
}

#[derive(Debug, Arbitrary)]
pub struct Item {
    base: Base,
    step: Option<Number>,
}

#[derive(Debug, Arbitrary)]
pub enum Base {
    Star,
    Question,
    One(Number),
    Range(Number, Number),
}

#[derive(Debug, Arbitrary)]
pub enum Number {
    Small(u8),
    Any(u32),
    /// One of [`EDGES`]: random numbers almost never land on a boundary.
    Edge(u8),
    Word(Word),
}

/// Each field's bounds and their neighbours, and the ends of the integer types.
const EDGES: [u32; 17] =
    [0, 1, 6, 7, 12, 13, 23, 24, 31, 32, 59, 60, 64, i32::MAX as u32, u32::MAX - 59, u32::MAX - 1, u32::MAX];

#[derive(Debug, Arbitrary)]
pub enum Separator {
    Space,
    Tab,
    Spaces,
}

fn number(n: &Number, vocabulary: &[&str]) -> String {
    match n {
        Number::Small(n) => (n % 70).to_string(),
        Number::Any(n) => n.to_string(),
        Number::Edge(i) => EDGES[*i as usize % EDGES.len()].to_string(),
        Number::Word(w) => w.resolve(vocabulary).to_string(),
    }
}

pub fn render(input: &Input, vocabulary: &[&str]) -> String {
    let (fields, separator) = match input {
        Input::Macro(word) => return word.resolve(vocabulary).to_string(),
        Input::Fields { fields, separator } => (fields, separator),
    };
    let separator = match separator {
        Separator::Space => " ",
        Separator::Tab => "\t",
        Separator::Spaces => "  ",
    };
    let field = |items: &Vec<Item>| -> String {
        let items: Vec<String> = items
            .iter()
            .map(|item| {
                let base = match &item.base {
                    Base::Star => "*".to_string(),
                    Base::Question => "?".to_string(),
                    Base::One(n) => number(n, vocabulary),
                    Base::Range(a, b) => format!("{}-{}", number(a, vocabulary), number(b, vocabulary)),
                };
                match &item.step {
                    Some(step) => format!("{base}/{}", number(step, vocabulary)),
                    None => base,
                }
            })
            .collect();
        items.join(",")
    };
    fields.iter().map(field).collect::<Vec<_>>().join(separator)
}

/// Minutes the oracle asks a parsed schedule about: the epoch, a leap day, a year's last minute,
/// far past and future.
const TIMES: [i64; 5] = [0, 951_782_400_000, 1_798_761_540_000, -62_135_596_800_000, 253_402_300_740_000];

/// A schedule parses or says why, naming what it was given; a parsed one answers for any time.
pub fn check(text: &str) {
    match CronSchedule::parse(text) {
        Ok(schedule) => {
            for t in TIMES {
                let _ = schedule.fires_at(Time(t));
                // The next activation, when there is one, is later and fires.
                if let Some(next) = schedule.next_after(Time(t)) {
                    assert!(next > Time(t) && schedule.fires_at(next), "{text}: {next} after {}", Time(t));
                }
            }
        }
        Err(e) => {
            assert_eq!(e.input, text);
            assert!(!e.reason.is_empty(), "{e}");
            assert!(e.to_string().contains(&format!("{text:?}")), "{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_schedules_say_what_and_which_field() {
        for (text, says) in [
            ("61 * * * *", "the minute field"),
            ("* 24 * * *", "the hour field"),
            ("* * 0 * *", "the day-of-month field"),
            ("* * * foo *", "the month field"),
            ("* * * * 1-0", "the day-of-week field"),
        ] {
            let e = CronSchedule::parse(text).unwrap_err();
            assert!(e.to_string().contains(says) && e.to_string().contains(text), "{text}: {e}");
            check(text);
        }
    }
}
