//! Files, directories and stdin into documents: one JSON value per object, with where it came
//! from. `kind: List` documents are flattened into their items here.

use std::io::Read;
use std::path::Path;

use dovetail_core::ceilings::{Ceiling, MANIFEST_BYTES, OBJECTS_PER_MANIFEST};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::error::{LoadError, LoadErrorKind};
use super::Source;

/// Name stdin goes by in messages.
pub const STDIN_NAME: &str = "<stdin>";

const EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];

/// Reads every path: `-` is stdin, a directory contributes its `*.yaml`, `*.yml` and `*.json`
/// files sorted by name (not recursing, so a `kustomize` base next to overlays is not pulled in
/// by accident), anything else is read as a file whatever its extension. Returns `(name, text)`
/// pairs in order, names as messages show them ([`STDIN_NAME`] for stdin); the first unreadable
/// path is the error.
pub fn read_paths<P: AsRef<Path>>(paths: &[P]) -> Result<Vec<(String, String)>, LoadError> {
    let mut out = vec![];
    for p in paths {
        let p = p.as_ref();
        if p == Path::new("-") {
            out.push((STDIN_NAME.to_string(), read_within(std::io::stdin().lock(), STDIN_NAME, MANIFEST_BYTES)?));
        } else if p.is_dir() {
            let display = p.display().to_string();
            let entries = std::fs::read_dir(p).map_err(|e| LoadError::file(&display, LoadErrorKind::Io(e)))?;
            let mut files = vec![];
            for entry in entries {
                let entry = entry.map_err(|e| LoadError::file(&display, LoadErrorKind::Io(e)))?;
                let path = entry.path();
                let wanted = path.extension().and_then(|e| e.to_str()).is_some_and(|e| EXTENSIONS.contains(&e));
                if wanted && path.is_file() {
                    files.push(path);
                }
            }
            files.sort();
            for f in files {
                out.push(read_file(&f)?);
            }
        } else {
            out.push(read_file(p)?);
        }
    }
    Ok(out)
}

fn read_file(path: &Path) -> Result<(String, String), LoadError> {
    let name = path.display().to_string();
    Ok((name, read_file_within(path, MANIFEST_BYTES)?))
}

/// Reads a UTF-8 file of at most `ceiling` bytes: a regular file over it is refused by its size,
/// before a byte is read, and anything else (a pipe, a device) is read no further than the
/// ceiling. Errors name the file as given.
pub fn read_file_within(path: &Path, ceiling: Ceiling) -> Result<String, LoadError> {
    let name = path.display().to_string();
    let io = |e| LoadError::file(&name, LoadErrorKind::Io(e));
    let file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    ceiling.check(size).map_err(|over| LoadError::file(&name, over.into()))?;
    read_within(file, &name, ceiling)
}

/// Reads at most one byte past `ceiling`, so an endless or oversized stream costs no more memory
/// than the ceiling.
fn read_within(reader: impl Read, name: &str, ceiling: Ceiling) -> Result<String, LoadError> {
    let mut text = String::new();
    reader
        .take(ceiling.max.saturating_add(1))
        .read_to_string(&mut text)
        .map_err(|e| LoadError::file(name, LoadErrorKind::Io(e)))?;
    ceiling.check(text.len() as u64).map_err(|over| LoadError::file(name, over.into()))?;
    Ok(text)
}

/// A top-level object (or List item) and where it is.
#[derive(Debug, Clone)]
pub(crate) struct Doc {
    pub source: Source,
    /// Always a JSON object.
    pub value: Value,
}

/// Whether the text is JSON: by extension, else by its first character (stdin, odd names).
fn is_json(name: &str, text: &str) -> bool {
    match Path::new(name).extension().and_then(|e| e.to_str()) {
        Some("json") => true,
        Some("yaml" | "yml") => false,
        _ => text.trim_start().starts_with(['{', '[']),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Splits one file's text into documents. Empty documents (`---` twice, trailing `---`) are
/// skipped but still counted, so numbers match what the user sees between separators.
pub(crate) fn documents(name: &str, text: &str) -> Result<Vec<Doc>, LoadError> {
    // Texts that did not come through `read_paths` (a scenario's inline manifests) are held to
    // the same ceiling before they are parsed.
    MANIFEST_BYTES.check(text.len() as u64).map_err(|over| LoadError::file(name, over.into()))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut raw: Vec<(usize, Value)> = vec![];
    let syntax = |document: usize, format: &'static str, message: String| LoadError {
        file: name.to_string(),
        document: Some(document),
        item: None,
        object: None,
        kind: Box::new(LoadErrorKind::Syntax { format, message }),
    };
    if is_json(name, text) {
        for (i, v) in serde_json::Deserializer::from_str(text).into_iter::<Value>().enumerate() {
            too_many(name, i + 1)?;
            raw.push((i + 1, v.map_err(|e| syntax(i + 1, "JSON", e.to_string()))?));
        }
    } else {
        for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            too_many(name, i + 1)?;
            // After a syntax error the YAML stream keeps yielding the same error: stop at the first.
            raw.push((i + 1, Value::deserialize(doc).map_err(|e| syntax(i + 1, "YAML", e.to_string()))?));
        }
    }
    let mut out = vec![];
    for (document, value) in raw {
        let source = Source { file: name.to_string(), document, item: None };
        match value {
            Value::Null => {}
            Value::Object(map) => flatten(source, map, &mut out)?,
            other => return Err(LoadError::at(&source, None, LoadErrorKind::NotAnObject(type_name(&other)))),
        }
        too_many(name, out.len())?;
    }
    Ok(out)
}

/// The objects-per-file ceiling, checked as documents are split (empty ones count too: they cost
/// a parse each) and again once `List`s are flattened into their items.
fn too_many(name: &str, objects: usize) -> Result<(), LoadError> {
    OBJECTS_PER_MANIFEST.check(objects as u64).map_err(|over| LoadError::file(name, over.into()))
}

/// `kind: List` (what `kubectl get -o yaml` prints) and typed lists (`PodList` from the API)
/// become their items. Items of a typed list carry no kind or apiVersion; they get the list's.
fn flatten(source: Source, map: Map<String, Value>, out: &mut Vec<Doc>) -> Result<(), LoadError> {
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or_default();
    let is_list = kind.ends_with("List") && matches!(map.get("items"), Some(Value::Array(_) | Value::Null));
    if !is_list {
        out.push(Doc { source, value: Value::Object(map) });
        return Ok(());
    }
    let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty()).map(str::to_string);
    let api_version = map.get("apiVersion").cloned();
    let Some(Value::Array(items)) = map.get("items") else {
        return Ok(());
    };
    for (i, item) in items.iter().enumerate() {
        let source = Source { item: Some(i + 1), ..source.clone() };
        let Value::Object(mut item) = item.clone() else {
            return Err(LoadError::at(&source, None, LoadErrorKind::NotAnObject(type_name(item))));
        };
        if let Some(k) = &item_kind {
            item.entry("kind").or_insert_with(|| Value::String(k.clone()));
            if let Some(v) = &api_version {
                item.entry("apiVersion").or_insert_with(|| v.clone());
            }
        }
        out.push(Doc { source, value: Value::Object(item) });
    }
    Ok(())
}
