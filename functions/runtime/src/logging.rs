//! Logs for CloudWatch: one line per decision, with its sentence and claim, so "why did
//! Dovetail do that?" is a Logs Insights query away; formatted and filtered the way the
//! function's Lambda logging configuration (LoggingConfig) asks.
//!
//! Lambda passes that configuration to a custom runtime in two environment variables ("advanced
//! logging controls"): `AWS_LAMBDA_LOG_FORMAT` (`JSON` or `Text`, the function's LogFormat) and,
//! with the JSON format only, `AWS_LAMBDA_LOG_LEVEL` (`TRACE` … `FATAL`, its ApplicationLogLevel).
//! With the JSON format Lambda itself drops every line whose `"level"` is finer than
//! ApplicationLogLevel, so writing them would be wasted work. The precedence:
//!
//! | set | level filter |
//! | --- | --- |
//! | `AWS_LAMBDA_LOG_LEVEL` only | that level |
//! | `RUST_LOG` only (local runs, tests) | that tracing filter (`info,dovetail_kube=debug`) |
//! | both | `RUST_LOG`'s directives, capped at `AWS_LAMBDA_LOG_LEVEL` (more detail would be dropped by Lambda) |
//! | neither | `INFO` |
//!
//! The format is JSON unless `AWS_LAMBDA_LOG_FORMAT` says `Text` (the decision lines are meant
//! for Logs Insights, and Lambda filters levels only in JSON). A value that is none of these is
//! a warning in the log and the default, never a failed start: a typo in the logging settings must
//! not stop the autoscaler.
//!
//! Not `lambda_runtime::tracing::init_default_subscriber` (lambda_runtime's `tracing` feature):
//! it defaults to text, falls back to INFO in silence on `FATAL` or a typo, and panics when a
//! subscriber is already set (tests, a second start in one process).

use dovetail_core::reconcile::Report;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The log format variable Lambda sets from LoggingConfig.LogFormat.
pub const FORMAT_VAR: &str = "AWS_LAMBDA_LOG_FORMAT";
/// The level variable Lambda sets from LoggingConfig.ApplicationLogLevel (JSON format only).
pub const LEVEL_VAR: &str = "AWS_LAMBDA_LOG_LEVEL";
/// A tracing filter with per-module directives, for finer control under the level.
pub const FILTER_VAR: &str = "RUST_LOG";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON object a line with a `"level"` key, which Lambda's level filtering reads.
    Json,
    /// tracing's plain text lines.
    Text,
}

/// What the environment asks for, and what in it was ignored and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub format: Format,
    /// The most detailed level written.
    pub level: LevelFilter,
    /// `RUST_LOG`'s directives (already checked to parse), applied under `level`.
    pub directives: Option<String>,
    /// One sentence per value that was ignored or overridden, logged once logging is up.
    pub warnings: Vec<String>,
}

impl Settings {
    /// Reads the variables through `var` (the process environment in [`init`]); an unset and an
    /// empty variable are the same.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Settings {
        let var = |name: &str| var(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let mut warnings = Vec::new();
        let format = match var(FORMAT_VAR) {
            None => Format::Json,
            Some(v) if v.eq_ignore_ascii_case("json") => Format::Json,
            Some(v) if v.eq_ignore_ascii_case("text") => Format::Text,
            Some(v) => {
                warnings.push(format!("{FORMAT_VAR}={v:?} is neither JSON nor Text; writing JSON"));
                Format::Json
            }
        };
        let ceiling = var(LEVEL_VAR).and_then(|v| match lambda_level(&v) {
            Some(level) => Some((v, level)),
            None => {
                warnings
                    .push(format!("{LEVEL_VAR}={v:?} is not one of TRACE, DEBUG, INFO, WARN, ERROR, FATAL; ignored"));
                None
            }
        });
        let directives = var(FILTER_VAR).and_then(|v| match EnvFilter::builder().parse(&v) {
            Ok(filter) => Some((v, filter.max_level_hint())),
            Err(e) => {
                warnings.push(format!("{FILTER_VAR}={v:?} is not a tracing filter ({e}); ignored"));
                None
            }
        });
        let level = match (&ceiling, &directives) {
            (Some((_, level)), _) => *level,
            (None, Some(_)) => LevelFilter::TRACE,
            (None, None) => LevelFilter::INFO,
        };
        if let (Some((lambda, level)), Some((filter, Some(wanted)))) = (&ceiling, &directives) {
            // LevelFilter orders by verbosity: TRACE is the greatest.
            if wanted > level {
                warnings.push(format!(
                    "{FILTER_VAR}={filter:?} asks for more detail than {LEVEL_VAR}={lambda} (the function's \
                     ApplicationLogLevel), which Lambda would drop; raise ApplicationLogLevel to see it"
                ));
            }
        }
        Settings { format, level, directives: directives.map(|(v, _)| v), warnings }
    }
}

/// A level of Lambda's ApplicationLogLevel, case-insensitively. tracing has nothing above
/// ERROR, so FATAL writes errors only (and Lambda, filtering at FATAL, drops those too).
fn lambda_level(value: &str) -> Option<LevelFilter> {
    Some(match value.to_ascii_uppercase().as_str() {
        "TRACE" => LevelFilter::TRACE,
        "DEBUG" => LevelFilter::DEBUG,
        "INFO" => LevelFilter::INFO,
        "WARN" => LevelFilter::WARN,
        "ERROR" | "FATAL" => LevelFilter::ERROR,
        _ => return None,
    })
}

/// The subscriber for `settings`, writing to `writer`: no ANSI colours, no timestamps of our own
/// (Lambda adds them), no targets or spans (the decision lines carry what matters).
pub fn subscriber<W>(settings: &Settings, writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let fmt = tracing_subscriber::fmt::layer().with_ansi(false).without_time().with_target(false).with_writer(writer);
    let lines: Box<dyn Layer<_> + Send + Sync> = match settings.format {
        Format::Json => Box::new(fmt.json().with_current_span(false).with_span_list(false)),
        Format::Text => Box::new(fmt),
    };
    let directives = settings
        .directives
        .as_deref()
        .map(|d| EnvFilter::builder().parse(d).expect("Settings::from_vars keeps only directives that parse"));
    tracing_subscriber::registry().with(lines).with(settings.level).with(directives)
}

/// Logging on stdout as the function's LoggingConfig asks (see the module), then one warning per
/// ignored setting. Does nothing when a subscriber is already set.
pub fn init() {
    let settings = Settings::from_vars(|name| std::env::var(name).ok());
    if tracing::subscriber::set_global_default(subscriber(&settings, std::io::stdout)).is_ok() {
        for warning in &settings.warnings {
            tracing::warn!("{warning}");
        }
    }
}

/// Logs every decision (actions at `info`, notes at `debug`) and every error (`warn`).
pub fn log_report(report: &Report) {
    for d in &report.decisions {
        let claim = d.claim.as_deref().unwrap_or("");
        match &d.action {
            Some(a) => tracing::info!(claim, action = a.kind(), why = %d.why, "decision"),
            None => tracing::debug!(claim, why = %d.why, "note"),
        }
    }
    for e in &report.errors {
        tracing::warn!(error = %e, "error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn settings(vars: &[(&str, &str)]) -> Settings {
        Settings::from_vars(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string()))
    }

    /// A writer into a shared buffer, for what the subscriber writes.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("buffer").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Buffer {
            self.clone()
        }
    }

    /// The lines a debug, an info and a warn event from two modules produce under `vars`.
    fn lines(vars: &[(&str, &str)]) -> Vec<String> {
        let buffer = Buffer::default();
        tracing::subscriber::with_default(subscriber(&settings(vars), buffer.clone()), || {
            tracing::debug!(target: "dovetail_kube::snapshot", "kube detail");
            tracing::debug!(target: "dovetail_runtime::handlers", why = "already launched", "note");
            tracing::info!(target: "dovetail_runtime::handlers", claim = "c-1", "decision");
            tracing::warn!(target: "dovetail_aws::ec2", "throttled");
        });
        let bytes = buffer.0.lock().expect("buffer").clone();
        String::from_utf8(bytes).expect("UTF-8 log lines").lines().map(str::to_owned).collect()
    }

    #[test]
    fn nothing_set_is_json_at_info() {
        let s = settings(&[]);
        assert_eq!((s.format, s.level, s.directives.as_deref()), (Format::Json, LevelFilter::INFO, None));
        assert!(s.warnings.is_empty());
        let lines = lines(&[]);
        assert_eq!(lines.len(), 2, "{lines:?}");
        let first: serde_json::Value = serde_json::from_str(&lines[0]).expect("a JSON line");
        // Lambda's level filtering reads the "level" key.
        assert_eq!(first["level"], "INFO");
        assert_eq!(first["fields"]["claim"], "c-1");
        assert!(first.get("timestamp").is_none() && first.get("target").is_none(), "{first}");
        assert!(lines[1].contains(r#""level":"WARN""#), "{lines:?}");
    }

    #[test]
    fn lambda_levels_map_to_tracing_levels() {
        for (value, level) in [
            ("TRACE", LevelFilter::TRACE),
            ("DEBUG", LevelFilter::DEBUG),
            ("INFO", LevelFilter::INFO),
            ("WARN", LevelFilter::WARN),
            ("ERROR", LevelFilter::ERROR),
            ("FATAL", LevelFilter::ERROR),
            ("debug", LevelFilter::DEBUG),
            (" Warn ", LevelFilter::WARN),
        ] {
            let s = settings(&[(LEVEL_VAR, value)]);
            assert_eq!(s.level, level, "{value}");
            assert!(s.warnings.is_empty(), "{value}: {:?}", s.warnings);
        }
        assert_eq!(lines(&[(LEVEL_VAR, "DEBUG")]).len(), 4);
        let warn = lines(&[(LEVEL_VAR, "WARN")]);
        assert_eq!(warn.len(), 1, "{warn:?}");
        assert!(warn[0].contains("throttled"));
        assert!(lines(&[(LEVEL_VAR, "FATAL")]).is_empty());
    }

    #[test]
    fn text_format_when_asked() {
        for value in ["Text", "TEXT", "text"] {
            assert_eq!(settings(&[(FORMAT_VAR, value)]).format, Format::Text, "{value}");
        }
        assert_eq!(settings(&[(FORMAT_VAR, "JSON")]).format, Format::Json);
        let text = lines(&[(FORMAT_VAR, "Text")]);
        assert_eq!(text.len(), 2, "{text:?}");
        assert!(text[0].contains("INFO") && text[0].contains("decision") && text[0].contains("claim=\"c-1\""));
        assert!(serde_json::from_str::<serde_json::Value>(&text[0]).is_err(), "not JSON: {}", text[0]);
    }

    #[test]
    fn bad_values_warn_and_keep_the_defaults() {
        let s = settings(&[(FORMAT_VAR, "yaml"), (LEVEL_VAR, "verbose"), (FILTER_VAR, "info,dovetail_kube=loud")]);
        assert_eq!((s.format, s.level, s.directives.as_deref()), (Format::Json, LevelFilter::INFO, None));
        assert_eq!(s.warnings.len(), 3, "{:?}", s.warnings);
        assert!(s.warnings[0].contains(r#"AWS_LAMBDA_LOG_FORMAT="yaml""#), "{}", s.warnings[0]);
        assert!(s.warnings[1].contains(r#"AWS_LAMBDA_LOG_LEVEL="verbose""#), "{}", s.warnings[1]);
        assert!(s.warnings[2].contains(r#"RUST_LOG="info,dovetail_kube=loud""#), "{}", s.warnings[2]);
        // Empty is unset, not bad.
        assert!(settings(&[(FORMAT_VAR, ""), (LEVEL_VAR, " "), (FILTER_VAR, "")]).warnings.is_empty());
    }

    #[test]
    fn the_warnings_reach_the_log_once_it_is_up() {
        let s = settings(&[(LEVEL_VAR, "LOUD")]);
        let buffer = Buffer::default();
        tracing::subscriber::with_default(subscriber(&s, buffer.clone()), || {
            for w in &s.warnings {
                tracing::warn!("{w}");
            }
        });
        let out = String::from_utf8(buffer.0.lock().expect("buffer").clone()).expect("UTF-8");
        assert!(out.contains(r#""level":"WARN""#) && out.contains("LOUD"), "{out}");
    }

    #[test]
    fn rust_log_alone_filters_per_module() {
        let s = settings(&[(FILTER_VAR, "info,dovetail_runtime=debug")]);
        assert_eq!((s.level, s.directives.as_deref()), (LevelFilter::TRACE, Some("info,dovetail_runtime=debug")));
        let lines = lines(&[(FILTER_VAR, "info,dovetail_runtime=debug")]);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].contains("already launched"), "the runtime's debug note: {lines:?}");
        assert!(!lines.iter().any(|l| l.contains("kube detail")), "{lines:?}");
    }

    #[test]
    fn the_lambda_level_caps_rust_log() {
        // Narrowing within the level: kept, no warning.
        let narrower = [(LEVEL_VAR, "DEBUG"), (FILTER_VAR, "warn,dovetail_runtime=debug")];
        assert!(settings(&narrower).warnings.is_empty());
        let lines_narrow = lines(&narrower);
        assert_eq!(lines_narrow.len(), 3, "{lines_narrow:?}");
        assert!(!lines_narrow.iter().any(|l| l.contains("kube detail")));
        // Asking for more than Lambda keeps: capped, with a warning saying what to change.
        let wider = [(LEVEL_VAR, "INFO"), (FILTER_VAR, "info,dovetail_runtime=debug")];
        let s = settings(&wider);
        assert_eq!(s.level, LevelFilter::INFO);
        assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
        assert!(s.warnings[0].contains("ApplicationLogLevel"), "{}", s.warnings[0]);
        let lines_wide = lines(&wider);
        assert_eq!(lines_wide.len(), 2, "{lines_wide:?}");
        assert!(!lines_wide.iter().any(|l| l.contains("already launched")));
    }
}
