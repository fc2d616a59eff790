use super::*;
use crate::time::parse_rfc3339;

fn at(s: &str) -> Time {
    parse_rfc3339(s).unwrap_or_else(|| panic!("bad test time {s}"))
}

/// Expression, start, and the activations that follow it one after the other, as robfig/cron v3's
/// `ParseStandard(expression).Next` gives them (UTC). An empty list: `Next` finds none (robfig's
/// zero time). Weekdays for orientation: 2012-07-09, 2024-01-01 and 2024-01-08 are Mondays.
const NEXT: &[(&str, &str, &[&str])] = &[
    // Every minute, strictly after the start, whole minutes only.
    ("* * * * *", "2024-01-01T00:00:00Z", &["2024-01-01T00:01:00Z", "2024-01-01T00:02:00Z"]),
    ("* * * * *", "2024-01-01T00:00:59.999Z", &["2024-01-01T00:01:00Z"]),
    ("* * * * *", "2012-12-31T23:59:45Z", &["2013-01-01T00:00:00Z"]),
    ("*/1 * * * *", "2024-01-01T00:00:30Z", &["2024-01-01T00:01:00Z", "2024-01-01T00:02:00Z"]),
    // `*/1` in every field is `*` in every field, stars included (so every day, not "either").
    ("*/1 */1 */1 */1 */1", "2024-02-28T23:59:00Z", &["2024-02-29T00:00:00Z", "2024-02-29T00:01:00Z"]),
    ("? ? ? ? ?", "2024-01-01T00:00:00Z", &["2024-01-01T00:01:00Z"]),
    // Steps.
    ("*/15 * * * *", "2012-07-09T14:45:00Z", &["2012-07-09T15:00:00Z", "2012-07-09T15:15:00Z", "2012-07-09T15:30:00Z"]),
    ("0/15 * * * *", "2012-07-09T14:59:59Z", &["2012-07-09T15:00:00Z"]),
    // `a/n` runs from a to the maximum.
    (
        "5/15 * * * *",
        "2012-07-09T15:00:00Z",
        &[
            "2012-07-09T15:05:00Z",
            "2012-07-09T15:20:00Z",
            "2012-07-09T15:35:00Z",
            "2012-07-09T15:50:00Z",
            "2012-07-09T16:05:00Z",
        ],
    ),
    // ... even with step 1: `5/1` is 5-59, not 5.
    ("5/1 * * * *", "2024-01-01T00:58:00Z", &["2024-01-01T00:59:00Z", "2024-01-01T01:05:00Z", "2024-01-01T01:06:00Z"]),
    // Steps on ranges, wrapping into the next hour and day.
    (
        "20-35/15 * * * *",
        "2012-07-09T15:45:00Z",
        &["2012-07-09T16:20:00Z", "2012-07-09T16:35:00Z", "2012-07-09T17:20:00Z"],
    ),
    ("20-35/15 * * * *", "2012-07-09T23:45:00Z", &["2012-07-10T00:20:00Z"]),
    (
        "0 9-17/4 * * *",
        "2024-01-01T10:00:00Z",
        &["2024-01-01T13:00:00Z", "2024-01-01T17:00:00Z", "2024-01-02T09:00:00Z"],
    ),
    (
        "15,45 */6 * * *",
        "2024-01-01T05:50:00Z",
        &["2024-01-01T06:15:00Z", "2024-01-01T06:45:00Z", "2024-01-01T12:15:00Z"],
    ),
    (
        "1,5-7/2,3 * * * *",
        "2024-01-01T00:00:00Z",
        &[
            "2024-01-01T00:01:00Z",
            "2024-01-01T00:03:00Z",
            "2024-01-01T00:05:00Z",
            "2024-01-01T00:07:00Z",
            "2024-01-01T01:01:00Z",
        ],
    ),
    // A step larger than the field leaves only its start.
    ("*/100 * * * *", "2024-01-01T00:00:00Z", &["2024-01-01T01:00:00Z"]),
    ("0 0 1 */5 *", "2024-01-01T00:00:00Z", &["2024-06-01T00:00:00Z", "2024-11-01T00:00:00Z", "2025-01-01T00:00:00Z"]),
    ("05 08 * * *", "2024-01-01T00:00:00Z", &["2024-01-01T08:05:00Z"]),
    // Day of month and day of week both restricted (no star): either one.
    (
        "0 0 13 * fri",
        "2024-01-01T00:00:00Z",
        &["2024-01-05T00:00:00Z", "2024-01-12T00:00:00Z", "2024-01-13T00:00:00Z", "2024-01-19T00:00:00Z"],
    ),
    (
        "0 0 */2 * mon",
        "2024-01-02T00:00:00Z",
        &[
            "2024-01-03T00:00:00Z",
            "2024-01-05T00:00:00Z",
            "2024-01-07T00:00:00Z",
            "2024-01-08T00:00:00Z",
            "2024-01-09T00:00:00Z",
        ],
    ),
    ("0 0 1-31 * mon", "2024-01-02T00:00:00Z", &["2024-01-03T00:00:00Z", "2024-01-04T00:00:00Z"]),
    (
        "0 0 */5 apr,aug,oct mon",
        "2012-07-09T23:35:00Z",
        &["2012-08-01T00:00:00Z", "2012-08-06T00:00:00Z", "2012-08-11T00:00:00Z", "2012-08-13T00:00:00Z"],
    ),
    ("0 0 */5 oct mon", "2012-07-09T23:35:00Z", &["2012-10-01T00:00:00Z"]),
    // A star in either day field (`*`, `?`, `*/1`, `*` in a list, `*-…`): both must match.
    ("0 0 */1 * mon", "2024-01-02T00:00:00Z", &["2024-01-08T00:00:00Z", "2024-01-15T00:00:00Z"]),
    ("0 0 1 * */1", "2024-01-02T00:00:00Z", &["2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"]),
    ("0 0 *,15 * mon", "2024-01-02T00:00:00Z", &["2024-01-08T00:00:00Z"]),
    ("0 0 *-5 * mon", "2024-01-02T00:00:00Z", &["2024-01-08T00:00:00Z"]),
    ("30 8 ? jul sun", "2012-07-09T00:00:00Z", &["2012-07-15T08:30:00Z", "2012-07-22T08:30:00Z"]),
    ("30 8 15 jul ?", "2012-07-09T00:00:00Z", &["2012-07-15T08:30:00Z", "2013-07-15T08:30:00Z"]),
    // `*/2` in the day of week is no star, but the day of month's `*` still is: both must match.
    (
        "0 0 * * */2",
        "2024-01-01T00:00:00Z",
        &[
            "2024-01-02T00:00:00Z",
            "2024-01-04T00:00:00Z",
            "2024-01-06T00:00:00Z",
            "2024-01-07T00:00:00Z",
            "2024-01-09T00:00:00Z",
        ],
    ),
    // Names, in any case, alone, in ranges and with steps.
    ("0 12 * JAN-mar Mon-Fri", "2024-03-29T12:00:00Z", &["2025-01-01T12:00:00Z", "2025-01-02T12:00:00Z"]),
    (
        "0 0 * feb Mon/2",
        "2012-07-09T23:35:00Z",
        &["2013-02-01T00:00:00Z", "2013-02-04T00:00:00Z", "2013-02-06T00:00:00Z"],
    ),
    ("0 0 * Feb Mon", "2012-07-09T23:35:00Z", &["2013-02-04T00:00:00Z"]),
    (
        "0 0 1 jan/3 *",
        "2024-01-01T00:00:00Z",
        &["2024-04-01T00:00:00Z", "2024-07-01T00:00:00Z", "2024-10-01T00:00:00Z", "2025-01-01T00:00:00Z"],
    ),
    ("0 0 9 Apr-Oct ?", "2012-07-09T23:35:00Z", &["2012-08-09T00:00:00Z"]),
    // Empty list items are skipped, as robfig does.
    ("0 0 1,,15 * *", "2024-01-02T00:00:00Z", &["2024-01-15T00:00:00Z", "2024-02-01T00:00:00Z"]),
    ("0 0 * * ,mon,", "2024-01-02T00:00:00Z", &["2024-01-08T00:00:00Z"]),
    // ... so a field of commas allows nothing, and the schedule never fires.
    ("0 0 , * *", "2024-01-02T00:00:00Z", &[]),
    // Months without the day are skipped; February 29 waits for a leap year.
    ("0 0 31 * *", "2024-01-31T00:00:00Z", &["2024-03-31T00:00:00Z", "2024-05-31T00:00:00Z"]),
    ("59 23 31 12 *", "2024-01-01T00:00:00Z", &["2024-12-31T23:59:00Z"]),
    ("0 0 29 2 *", "2012-07-09T23:35:00Z", &["2016-02-29T00:00:00Z", "2020-02-29T00:00:00Z"]),
    ("0 0 29 feb *", "2024-03-01T00:00:00Z", &["2028-02-29T00:00:00Z"]),
    // 2100 is no leap year: the next February 29 after 2096's is more than five years away.
    ("0 0 29 feb *", "2096-03-01T00:00:00Z", &[]),
    // Never: robfig's zero time.
    ("0 0 30 2 *", "2012-07-09T23:35:00Z", &[]),
    ("0 0 31 apr ?", "2012-07-09T23:35:00Z", &[]),
    // Descriptors.
    ("@hourly", "2024-01-01T00:00:00Z", &["2024-01-01T01:00:00Z", "2024-01-01T02:00:00Z"]),
    ("@daily", "2024-01-01T00:00:00Z", &["2024-01-02T00:00:00Z", "2024-01-03T00:00:00Z"]),
    ("@midnight", "2024-01-01T12:00:00Z", &["2024-01-02T00:00:00Z"]),
    ("@weekly", "2024-01-01T00:00:00Z", &["2024-01-07T00:00:00Z", "2024-01-14T00:00:00Z"]),
    ("@monthly", "2024-01-15T00:00:00Z", &["2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"]),
    ("@yearly", "2024-01-01T00:00:00Z", &["2025-01-01T00:00:00Z", "2026-01-01T00:00:00Z"]),
    ("@annually", "2023-12-31T23:59:59Z", &["2024-01-01T00:00:00Z"]),
];

#[test]
fn next_activations_follow_robfig() {
    for (expression, start, expected) in NEXT {
        let schedule = CronSchedule::parse(expression).unwrap_or_else(|e| panic!("{e}"));
        let mut t = at(start);
        for want in *expected {
            let next = schedule.next_after(t).unwrap_or_else(|| panic!("{expression:?} after {t}: none, want {want}"));
            assert_eq!(next.to_string(), *want, "{expression:?} after {t}");
            t = next;
        }
        if expected.is_empty() {
            assert_eq!(schedule.next_after(t), None, "{expression:?} after {t}");
        }
    }
}

/// `fires_at` and `next_after` agree: the activation fires, and no minute before it does.
#[test]
fn fires_at_agrees_with_next_after() {
    const MINUTE_MS: i64 = 60_000;
    const SCAN: i64 = 45 * 24 * 60;
    for (expression, start, _) in NEXT {
        let schedule = CronSchedule::parse(expression).unwrap();
        let start = at(start);
        let first_minute = start.0.div_euclid(MINUTE_MS) + 1;
        let next = schedule.next_after(start);
        let scanned = (first_minute..first_minute + SCAN).map(|m| Time(m * MINUTE_MS)).find(|t| schedule.fires_at(*t));
        match next {
            Some(next) if next.0 / MINUTE_MS < first_minute + SCAN => assert_eq!(scanned, Some(next), "{expression:?}"),
            _ => assert_eq!(scanned, None, "{expression:?}"),
        }
    }
}

#[test]
fn descriptors_are_their_expressions() {
    for (descriptor, expression) in [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
    ] {
        assert_eq!(CronSchedule::parse(descriptor).unwrap(), CronSchedule::parse(expression).unwrap());
    }
    // Whitespace between fields is any run of blanks.
    assert_eq!(CronSchedule::parse("  0\t9  * *\n1 ").unwrap(), CronSchedule::parse("0 9 * * 1").unwrap());
}

/// Expression and the reason it is refused (after `"<expression>" is not a valid cron schedule: `).
const INVALID: &[(&str, &str)] = &[
    ("", "it is empty"),
    ("* * * *", "expected 5 fields (minute hour day-of-month month day-of-week), found 4"),
    ("0 * * * * *", "expected 5 fields (minute hour day-of-month month day-of-week), found 6"),
    ("   ", "expected 5 fields (minute hour day-of-month month day-of-week), found 0"),
    (" @daily", "expected 5 fields (minute hour day-of-month month day-of-week), found 1"),
    (
        "@daily ",
        "unknown descriptor \"@daily \" (expected @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)",
    ),
    (
        "@Daily",
        "unknown descriptor \"@Daily\" (expected @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)",
    ),
    (
        "@fortnightly",
        "unknown descriptor \"@fortnightly\" (expected @yearly, @annually, @monthly, @weekly, @daily, @midnight or \
         @hourly)",
    ),
    (
        "@every 1h",
        "@every intervals are not supported (use 5 fields or @yearly, @annually, @monthly, @weekly, @daily, @midnight \
         or @hourly)",
    ),
    ("CRON_TZ=UTC 0 9 * * *", "time zone prefixes (TZ=, CRON_TZ=) are not supported: schedules are in UTC"),
    ("TZ=Europe/Paris 0 9 * * *", "time zone prefixes (TZ=, CRON_TZ=) are not supported: schedules are in UTC"),
    ("60 * * * *", "the minute field \"60\": 60 is above the maximum 59"),
    ("0,5-70/5 * * * *", "the minute field \"0,5-70/5\": 70 is above the maximum 59"),
    ("70/5 * * * *", "the minute field \"70/5\": 70 is above the maximum 59"),
    ("* 24 * * *", "the hour field \"24\": 24 is above the maximum 23"),
    ("* * 0 * *", "the day-of-month field \"0\": 0 is below the minimum 1"),
    ("* * 32 * *", "the day-of-month field \"32\": 32 is above the maximum 31"),
    ("* * 0/5 * *", "the day-of-month field \"0/5\": 0 is below the minimum 1"),
    ("* * * 0 *", "the month field \"0\": 0 is below the minimum 1"),
    ("* * * 13 *", "the month field \"13\": 13 is above the maximum 12"),
    ("* * * * 7", "the day-of-week field \"7\": 7 is above the maximum 6"),
    ("0 9 * * fri-mon", "the day-of-week field \"fri-mon\": the range \"fri-mon\" starts at 5, after its end 1"),
    ("30-10 * * * *", "the minute field \"30-10\": the range \"30-10\" starts at 30, after its end 10"),
    ("*/0 * * * *", "the minute field \"*/0\": the step \"0\" in \"*/0\" is not a positive number"),
    ("*/-12 * * * *", "the minute field \"*/-12\": the step \"-12\" in \"*/-12\" is not a positive number"),
    ("* 1-5/x * * *", "the hour field \"1-5/x\": the step \"x\" in \"1-5/x\" is not a positive number"),
    ("* 5/ * * *", "the hour field \"5/\": the step \"\" in \"5/\" is not a positive number"),
    ("*//2 * * * *", "the minute field \"*//2\": too many slashes in \"*//2\""),
    ("1/2/3 * * * *", "the minute field \"1/2/3\": too many slashes in \"1/2/3\""),
    ("5--5 * * * *", "the minute field \"5--5\": too many hyphens in \"5--5\""),
    ("1-2-3 * * * *", "the minute field \"1-2-3\": too many hyphens in \"1-2-3\""),
    ("-5 * * * *", "the minute field \"-5\": a value is missing"),
    ("a b c d e", "the minute field \"a\": \"a\" is not a number"),
    ("* * jan * *", "the day-of-month field \"jan\": \"jan\" is not a number"),
    ("* * * foo *", "the month field \"foo\": \"foo\" is neither a number nor a name (JAN–DEC)"),
    ("* * * jan-x *", "the month field \"jan-x\": \"x\" is neither a number nor a name (JAN–DEC)"),
    ("* * * * monday", "the day-of-week field \"monday\": \"monday\" is neither a number nor a name (SUN–SAT)"),
    ("* * * * XYZ", "the day-of-week field \"XYZ\": \"XYZ\" is neither a number nor a name (SUN–SAT)"),
];

#[test]
fn invalid_expressions_name_the_field() {
    for (expression, reason) in INVALID {
        match CronSchedule::parse(expression) {
            Ok(s) => panic!("{expression:?} parsed as {s:?}, want {reason:?}"),
            Err(e) => {
                assert_eq!(e.reason, *reason, "{expression:?}");
                assert_eq!(e.to_string(), format!("{expression:?} is not a valid cron schedule: {reason}"));
            }
        }
    }
}
