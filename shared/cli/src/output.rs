//! `-o table|json|yaml`, the one output-format flag every command takes (kubectl's habit), and
//! writing what a command prints.
//!
//! `-o` is a format and nothing else: files are written with flags that say so (`--output-file`).
//! A value that is no format — most likely a file name from the days when `import -o FILE` wrote
//! one — is a usage error (exit 2) that says where files went.

use std::ffi::OsStr;
use std::io::Write;

use anyhow::{Context, Result};
use clap::builder::{PossibleValue, TypedValueParser};
use serde::Serialize;

/// How a command prints its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// For a person: aligned columns and sentences.
    Table,
    /// One pretty-printed JSON document.
    Json,
    /// One YAML document (or a stream of them, for manifests).
    Yaml,
}

impl Format {
    const ALL: [(Format, &'static str); 3] = [(Format::Table, "table"), (Format::Json, "json"), (Format::Yaml, "yaml")];

    /// `table`, `json` or `yaml` (case-insensitively), or the sentence a person reads.
    pub fn parse(value: &str) -> Result<Format, String> {
        Self::ALL.iter().find(|(_, name)| name.eq_ignore_ascii_case(value)).map(|(f, _)| *f).ok_or_else(|| {
            format!("unknown output format '{value}' (table|json|yaml); to write files use --output-file")
        })
    }
}

/// The flag, flattened into every command's arguments. `None` when not given: each command has
/// its own default (`table`, or `yaml` for `import`, whose output is manifests).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct OutputArgs {
    /// Output format: table, json or yaml.
    #[arg(short = 'o', long = "output", value_name = "FORMAT", value_parser = FormatParser)]
    pub format: Option<Format>,
}

/// clap's side of [`Format::parse`]: the error names the flag and keeps the usage line, and the
/// three values reach the help and the shell completions.
#[derive(Clone)]
struct FormatParser;

impl TypedValueParser for FormatParser {
    type Value = Format;

    fn parse_ref(&self, cmd: &clap::Command, _: Option<&clap::Arg>, value: &OsStr) -> Result<Format, clap::Error> {
        let value = value.to_string_lossy();
        Format::parse(&value).map_err(|message| {
            clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{message}\n")).with_cmd(cmd)
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(Format::ALL.iter().map(|(_, name)| PossibleValue::new(*name))))
    }
}

/// `value` as JSON or YAML; `table` renders the person's view.
pub fn render<T: Serialize + ?Sized>(format: Format, value: &T, table: impl FnOnce() -> String) -> Result<String> {
    Ok(match format {
        Format::Table => table(),
        Format::Json => serde_json::to_string_pretty(value).context("writing JSON")? + "\n",
        Format::Yaml => serde_yaml_ng::to_string(value).context("writing YAML")?,
    })
}

/// Writes `text` to stdout. A reader that went away (`dovetail plan … | head`) is not a failure:
/// it has what it wanted.
pub fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing to stdout"),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_and_file_names_say_where_files_go() {
        assert_eq!(Format::parse("table"), Ok(Format::Table));
        assert_eq!(Format::parse("JSON"), Ok(Format::Json));
        assert_eq!(Format::parse("yaml"), Ok(Format::Yaml));
        assert_eq!(
            Format::parse("somefile.yaml").unwrap_err(),
            "unknown output format 'somefile.yaml' (table|json|yaml); to write files use --output-file"
        );
    }

    #[test]
    fn render_is_the_value_in_each_format() {
        let value = serde_json::json!({ "nodes": 2, "pods": ["a", "b"] });
        assert_eq!(render(Format::Table, &value, || "2 nodes\n".to_string()).unwrap(), "2 nodes\n");
        let json = render(Format::Json, &value, String::new).unwrap();
        assert_eq!(serde_json::from_str::<serde_json::Value>(&json).unwrap(), value);
        let yaml = render(Format::Yaml, &value, String::new).unwrap();
        assert_eq!(yaml, "nodes: 2\npods:\n- a\n- b\n");
        assert_eq!(serde_yaml_ng::from_str::<serde_json::Value>(&yaml).unwrap(), value);
    }
}
