//! Access to the shared reference data (`shared/data` beside the repository) for tests that check
//! the embedded catalog and the overhead model against it. These tests fail, never skip, when the
//! data is missing: a silently skipped reference test would let the model drift unnoticed.

#![allow(dead_code)] // each test binary uses a different part

use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub const CSV_NAME: &str = "ec2-instance-types-us-east-1.csv";

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root exists")
}

/// Same search as generate.py: `$DOVETAIL_SHARED_DATA`, then `shared/data` in the repository's
/// parent or any directory above it (CI has it beside the clone, worktrees sit deeper).
pub fn shared_csv_path() -> PathBuf {
    let mut tried = Vec::new();
    if let Some(dir) = std::env::var_os("DOVETAIL_SHARED_DATA") {
        tried.push(PathBuf::from(dir).join(CSV_NAME));
    }
    tried.extend(workspace_root().ancestors().skip(1).map(|a| a.join("shared/data").join(CSV_NAME)));
    match tried.iter().find(|p| p.is_file()) {
        Some(p) => p.clone(),
        None => panic!(
            "the shared reference data {CSV_NAME} is missing; looked in:\n  {}\n\
             set DOVETAIL_SHARED_DATA to the directory holding it",
            tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join("\n  ")
        ),
    }
}

/// The reference CSV: plain comma-separated, no quoting, CRLF line ends.
pub struct Csv {
    columns: HashMap<String, usize>,
    pub rows: Vec<Vec<String>>,
}

impl Csv {
    pub fn load() -> Csv {
        let path = shared_csv_path();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let mut lines = text.lines().map(|l| l.trim_end_matches('\r')).filter(|l| !l.is_empty());
        let header = lines.next().unwrap_or_else(|| panic!("{} is empty", path.display()));
        let columns: HashMap<String, usize> = header.split(',').enumerate().map(|(i, c)| (c.to_string(), i)).collect();
        let rows: Vec<Vec<String>> = lines.map(|l| l.split(',').map(str::to_string).collect()).collect();
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(r.len(), columns.len(), "{} line {} has {} fields", path.display(), i + 2, r.len());
        }
        Csv { columns, rows }
    }

    pub fn get<'a>(&self, row: &'a [String], column: &str) -> &'a str {
        let i = *self.columns.get(column).unwrap_or_else(|| panic!("reference CSV has no column {column:?}"));
        &row[i]
    }
}
