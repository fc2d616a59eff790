//! The documentation against the repository it describes. Every Markdown file of the repository
//! (README.md, docs/, the READMEs beside the code) is read, and the test fails, naming the file,
//! the line and what is wrong, when
//!
//! - a relative link leads to a file or directory that does not exist, or its `#anchor` matches no
//!   heading of the Markdown file it leads to (GitHub's slugs: lowercase, spaces to `-`,
//!   punctuation other than `-` and `_` dropped, `-1`, `-2`, … after repeated headings);
//! - a command in a fenced code block (` ```sh `, ` ```bash `, ` ```shell `, ` ```console `, or one
//!   without a language) names what does not exist: a `dovetail` subcommand or flag the built
//!   binary's `--help` does not list (also as `cargo run -p dovetail -- …`), a cargo package or
//!   target (`-p`, `--test`, `--example`, `--bin`, `--bench`) that `cargo metadata` does not list,
//!   or a script (`bash path/script.sh`) that is not there.
//!
//! Output shown in the docs goes in ` ```text ` blocks, which are not read as commands.
//!
//! This file reads the Markdown (files, fenced blocks, prose); `links.rs` and `commands.rs` check
//! each kind of reference.

mod commands;
#[path = "../common/mod.rs"]
mod common;
mod links;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use common::{dovetail, root, text};

/// Directories never searched for Markdown: build output, dependencies, Git's own.
const SKIPPED_DIRS: &[&str] = &[".git", "target", "node_modules", "infra/cdk/cdk.out", "infra/cdk/dist"];

/// A Markdown file of the repository.
struct Doc {
    /// Relative to the repository root, with `/` separators.
    path: String,
    lines: Vec<String>,
}

impl Doc {
    fn dir(&self) -> PathBuf {
        Path::new(&self.path).parent().map(Path::to_path_buf).unwrap_or_default()
    }
}

fn markdown_files() -> Vec<Doc> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<Doc>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let relative = path.strip_prefix(root).expect("under the root").to_string_lossy().replace('\\', "/");
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if path.is_dir() {
                if !SKIPPED_DIRS.contains(&name) && !SKIPPED_DIRS.contains(&relative.as_str()) {
                    walk(root, &path, out);
                }
            } else if name.ends_with(".md") {
                let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{relative}: {e}"));
                out.push(Doc { path: relative, lines: text.lines().map(str::to_owned).collect() });
            }
        }
    }
    let mut docs = Vec::new();
    walk(&root(), &root(), &mut docs);
    assert!(docs.iter().any(|d| d.path == "README.md"), "README.md not found under {}", root().display());
    docs
}

// ---------------------------------------------------------------------------------------------
// Fenced code blocks

/// A fenced code block: its language (the info string's first word, lowercase) and its lines,
/// each with its 1-based line number in the file.
struct Fence {
    lang: String,
    lines: Vec<(usize, String)>,
}

/// Splits a document into its fenced code blocks and the rest (`prose`, with every fenced line
/// blanked so that offsets still give line numbers).
fn split_fences(doc: &Doc) -> (Vec<Fence>, Vec<String>) {
    let mut fences = Vec::new();
    let mut prose = Vec::with_capacity(doc.lines.len());
    let mut open: Option<(char, usize, Fence)> = None;
    for (i, line) in doc.lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |c| trimmed.chars().take_while(|x| *x == c).count());
        match &mut open {
            None if run >= 3 => {
                let c = marker.expect("a marker");
                let info = trimmed[run..].trim();
                let lang = info.split_whitespace().next().unwrap_or("").to_lowercase();
                open = Some((c, run, Fence { lang, lines: Vec::new() }));
                prose.push(String::new());
            }
            None => prose.push(line.clone()),
            Some((c, n, _)) if marker == Some(*c) && run >= *n && trimmed[run..].trim().is_empty() => {
                fences.push(open.take().expect("an open fence").2);
                prose.push(String::new());
            }
            Some((_, _, fence)) => {
                fence.lines.push((i + 1, line.clone()));
                prose.push(String::new());
            }
        }
    }
    if let Some((_, _, fence)) = open {
        fences.push(fence);
    }
    (fences, prose)
}

/// Blanks inline code spans (across lines, as Markdown allows) so that links and headings are
/// looked for in the text a reader sees.
fn blank_code_spans(prose: &[String]) -> Vec<String> {
    let joined = prose.join("\n");
    let chars: Vec<char> = joined.chars().collect();
    let mut out = chars.clone();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let n = chars[i..].iter().take_while(|c| **c == '`').count();
        // The closing run: the next run of exactly n backticks.
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = chars[j..].iter().take_while(|c| **c == '`').count();
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                for c in &mut out[i..j + n] {
                    if *c != '\n' {
                        *c = ' ';
                    }
                }
                i = j + n;
            }
            None => i += n,
        }
    }
    out.into_iter().collect::<String>().split('\n').map(str::to_owned).collect()
}
