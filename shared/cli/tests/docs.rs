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

mod common;

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

// ---------------------------------------------------------------------------------------------
// Headings and links

/// GitHub's anchor for a heading's text.
fn slug(heading: &str) -> String {
    // Links in a heading show their text.
    let mut shown = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|c| open + c) else { break };
        let Some(end) = rest[close..].find(')').map(|e| close + e) else { break };
        shown.push_str(&rest[..open]);
        shown.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    shown.push_str(rest);
    shown
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings, in order, duplicates numbered as GitHub does.
fn anchors(doc: &Doc) -> Vec<String> {
    let (_, prose) = split_fences(doc);
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for line in &prose {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let trimmed = line.trim_start_matches(' ');
        let level = trimmed.chars().take_while(|c| *c == '#').count();
        if indent > 3 || !(1..=6).contains(&level) {
            continue;
        }
        let after = &trimmed[level..];
        if !(after.is_empty() || after.starts_with(' ') || after.starts_with('\t')) {
            continue;
        }
        let text = after.trim().trim_end_matches('#').trim_end();
        let base = slug(text);
        let n = seen.entry(base.clone()).or_insert(0);
        out.push(if *n == 0 { base } else { format!("{base}-{n}") });
        *n += 1;
    }
    out
}

/// A link found in prose: its 1-based line and its destination.
struct Link {
    line: usize,
    dest: String,
}

/// Inline links and images (`[text](dest)`, `![alt](dest)`) and reference definitions
/// (`[label]: dest`), outside code blocks and code spans.
fn links(doc: &Doc) -> Vec<Link> {
    let (_, prose) = split_fences(doc);
    let prose = blank_code_spans(&prose);
    let mut out = Vec::new();
    for (i, line) in prose.iter().enumerate() {
        let mut from = 0;
        while let Some(at) = line[from..].find("](").map(|p| from + p) {
            let rest = &line[at + 2..];
            let dest = if let Some(angled) = rest.strip_prefix('<') {
                angled.split('>').next().unwrap_or("").to_owned()
            } else {
                // Up to the closing parenthesis (destinations may hold balanced ones), then
                // without a title.
                let mut depth = 0;
                let end = rest
                    .char_indices()
                    .find(|&(_, c)| {
                        match c {
                            '(' => depth += 1,
                            ')' if depth == 0 => return true,
                            ')' => depth -= 1,
                            _ => {}
                        }
                        false
                    })
                    .map_or(rest.len(), |(p, _)| p);
                rest[..end].split_whitespace().next().unwrap_or("").to_owned()
            };
            out.push(Link { line: i + 1, dest });
            from = at + 2;
        }
        let trimmed = line.trim_start();
        if line.len() - trimmed.len() <= 3 && trimmed.starts_with('[') && !trimmed.starts_with("[^") {
            if let Some(close) = trimmed.find("]:") {
                if let Some(dest) = trimmed[close + 2..].split_whitespace().next() {
                    let dest = dest.trim_start_matches('<').trim_end_matches('>');
                    out.push(Link { line: i + 1, dest: dest.to_owned() });
                }
            }
        }
    }
    out
}

/// Whether a destination leaves the repository: a URL (`https:`, `mailto:`, `//host`).
fn is_external(dest: &str) -> bool {
    if dest.starts_with("//") {
        return true;
    }
    let scheme: String =
        dest.chars().take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-')).collect();
    !scheme.is_empty()
        && dest[scheme.len()..].starts_with(':')
        && scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(high * 16 + low);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `base/relative` with `.` and `..` resolved, relative to the repository root; `None` when it
/// climbs out of the repository.
fn join(base: &Path, relative: &str) -> Option<PathBuf> {
    let start = if relative.starts_with('/') { PathBuf::new() } else { base.to_path_buf() };
    let mut parts: Vec<String> = start.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    for component in Path::new(relative.trim_start_matches('/')).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop()?;
            }
            _ => {}
        }
    }
    Some(parts.iter().collect())
}

#[test]
fn relative_links_lead_to_files_and_headings_that_exist() {
    let root = root();
    let docs = markdown_files();
    let by_path: BTreeMap<&str, &Doc> = docs.iter().map(|d| (d.path.as_str(), d)).collect();
    let mut anchor_cache: HashMap<String, Vec<String>> = HashMap::new();
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in &docs {
        for link in links(doc) {
            let dest = link.dest.trim();
            if dest.is_empty() || is_external(dest) {
                continue;
            }
            checked += 1;
            let (path_part, anchor) = match dest.split_once('#') {
                Some((p, a)) => (p, Some(percent_decode(a))),
                None => (dest, None),
            };
            let where_ = format!("{}:{}: link `{dest}`", doc.path, link.line);
            let target = if path_part.is_empty() {
                PathBuf::from(&doc.path)
            } else {
                match join(&doc.dir(), &percent_decode(path_part)) {
                    Some(t) => t,
                    None => {
                        problems.push(format!("{where_}: leads out of the repository"));
                        continue;
                    }
                }
            };
            let on_disk = root.join(&target);
            if !on_disk.exists() {
                problems.push(format!("{where_}: {} does not exist", target.display()));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            // An anchor into a directory means its README; into other files (`#L10` in source),
            // GitHub's own line anchors, which are not checked.
            let markdown = if on_disk.is_dir() { target.join("README.md") } else { target.clone() };
            let markdown = markdown.to_string_lossy().replace('\\', "/");
            if !markdown.ends_with(".md") {
                continue;
            }
            let Some(target_doc) = by_path.get(markdown.as_str()) else {
                problems
                    .push(format!("{where_}: has an anchor, but {markdown} is not a Markdown file of the repository"));
                continue;
            };
            let known = anchor_cache.entry(markdown.clone()).or_insert_with(|| anchors(target_doc));
            if !known.contains(&anchor) {
                problems.push(format!(
                    "{where_}: no heading of {markdown} has the anchor #{anchor} (its anchors: {})",
                    known.iter().map(|a| format!("#{a}")).collect::<Vec<_>>().join(" ")
                ));
            }
        }
    }
    assert!(checked >= 50, "only {checked} relative links found in {} Markdown files: is the scan broken?", docs.len());
    assert!(problems.is_empty(), "{} broken link(s):\n  {}", problems.len(), problems.join("\n  "));
}

// ---------------------------------------------------------------------------------------------
// Commands in code blocks

/// Languages whose code blocks are commands (none: a synopsis or a command without one).
const SHELL: &[&str] = &["", "sh", "bash", "shell", "console"];

/// What the CLI offers, read from the built binary's `--help`.
struct Cli {
    subcommands: BTreeSet<String>,
    /// Options by subcommand ("" for the top level): `--long` and `-s` spellings.
    options: HashMap<String, BTreeSet<String>>,
}

impl Cli {
    fn read() -> Cli {
        let top = help(&["--help"]);
        let mut subcommands = BTreeSet::new();
        let mut in_commands = false;
        for line in top.lines() {
            if line.trim_end().ends_with(':') && !line.starts_with(' ') {
                in_commands = line.trim() == "Commands:";
                continue;
            }
            if in_commands {
                if let Some(name) = line.split_whitespace().next() {
                    subcommands.insert(name.to_owned());
                }
            }
        }
        assert!(subcommands.contains("plan"), "`dovetail --help` lists no `plan` subcommand:\n{top}");
        let mut options = HashMap::new();
        options.insert(String::new(), option_names(&top));
        for sub in subcommands.iter().filter(|s| *s != "help") {
            options.insert(sub.clone(), option_names(&help(&[sub, "--help"])));
        }
        Cli { subcommands, options }
    }
}

fn help(args: &[&str]) -> String {
    let out = dovetail(args, None);
    assert!(out.status.success(), "dovetail {}: {}", args.join(" "), text(&out.stderr));
    text(&out.stdout)
}

/// `-f` and `--filename` from clap's option lines (`  -f, --filename <FILES>...  Manifest files…`).
fn option_names(help: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in help.lines() {
        let trimmed = line.trim_start();
        if !trimmed.starts_with('-') {
            continue;
        }
        let spellings = trimmed.split("  ").next().unwrap_or("");
        for word in spellings.split([',', ' ']) {
            let word = word.split(['=', '<', '[']).next().unwrap_or("");
            if (word.starts_with("--") && word.len() > 2) || (word.len() == 2 && word.starts_with('-')) {
                names.insert(word.to_owned());
            }
        }
    }
    names
}

/// The workspace's packages and their targets by kind (`bin`, `test`, `example`, `bench`, …).
struct Workspace {
    packages: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

impl Workspace {
    fn read() -> Workspace {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_owned());
        let out = Command::new(cargo)
            .args(["metadata", "--no-deps", "--format-version", "1", "--offline", "--manifest-path"])
            .arg(root().join("Cargo.toml"))
            .output()
            .expect("run cargo metadata");
        assert!(out.status.success(), "cargo metadata: {}", text(&out.stderr));
        let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
        let mut packages = BTreeMap::new();
        for package in metadata["packages"].as_array().expect("packages") {
            let mut targets: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for target in package["targets"].as_array().expect("targets") {
                let name = target["name"].as_str().expect("target name");
                for kind in target["kind"].as_array().expect("target kinds") {
                    let kind = kind.as_str().expect("a kind");
                    targets.entry(kind.to_owned()).or_default().insert(name.to_owned());
                }
            }
            packages.insert(package["name"].as_str().expect("package name").to_owned(), targets);
        }
        Workspace { packages }
    }

    fn has_target(&self, package: &str, kind: &str, name: &str) -> bool {
        self.packages.get(package).and_then(|t| t.get(kind)).is_some_and(|names| names.contains(name))
    }
}

/// A word of a command line, or a separator between commands (`|`, `&&`, `;`, `$(`, `(`, `)`).
#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Separator,
}

/// Shell-like words: quotes kept together and removed, `#` comments dropped. A `|` separates
/// commands only standing alone outside `[ ]`, so a synopsis's `[-o table|json]` and
/// `[FILE | --scenario NAME]` stay one command.
fn tokenize(line: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut brackets = 0i32;
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let flush = |word: &mut String, in_word: &mut bool, tokens: &mut Vec<Token>| {
        if *in_word {
            tokens.push(Token::Word(std::mem::take(word)));
            *in_word = false;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            '\'' | '"' => {
                in_word = true;
                i += 1;
                while i < chars.len() && chars[i] != c {
                    if c == '"' && chars[i] == '\\' && i + 1 < chars.len() {
                        i += 1;
                    }
                    word.push(chars[i]);
                    i += 1;
                }
            }
            '#' if !in_word => break,
            ' ' | '\t' => flush(&mut word, &mut in_word, &mut tokens),
            '|' if !in_word && brackets == 0 => {
                flush(&mut word, &mut in_word, &mut tokens);
                tokens.push(Token::Separator);
                if next == Some('|') {
                    i += 1;
                }
            }
            '&' if next == Some('&') => {
                flush(&mut word, &mut in_word, &mut tokens);
                tokens.push(Token::Separator);
                i += 1;
            }
            ';' | '`' => {
                flush(&mut word, &mut in_word, &mut tokens);
                tokens.push(Token::Separator);
            }
            '$' if next == Some('(') => {
                flush(&mut word, &mut in_word, &mut tokens);
                tokens.push(Token::Separator);
                i += 1;
            }
            '(' if !in_word => tokens.push(Token::Separator),
            ')' if brackets == 0 => {
                flush(&mut word, &mut in_word, &mut tokens);
                tokens.push(Token::Separator);
            }
            _ => {
                match c {
                    '[' => brackets += 1,
                    ']' => brackets -= 1,
                    _ => {}
                }
                in_word = true;
                word.push(c);
            }
        }
        i += 1;
    }
    flush(&mut word, &mut in_word, &mut tokens);
    tokens
}

/// The commands of a line: each a list of words, leading `VAR=value` assignments and `sudo`,
/// `time`, `exec`, `env` dropped.
fn commands(line: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut current: Vec<String> = Vec::new();
    for token in tokenize(line).into_iter().chain([Token::Separator]) {
        match token {
            Token::Word(w) => {
                let assignment = current.is_empty()
                    && w.split_once('=').is_some_and(|(name, _)| {
                        !name.is_empty()
                            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                            && !name.starts_with(|c: char| c.is_ascii_digit())
                    });
                let prefix = current.is_empty() && matches!(w.as_str(), "sudo" | "time" | "exec" | "env" | "!");
                if !assignment && !prefix {
                    current.push(w);
                }
            }
            Token::Separator => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
            }
        }
    }
    out
}

/// The command lines of a code block, each with its first line number: `\` continuations (and in
/// a block without a language, a synopsis's indented lines) joined, here-documents skipped, and in
/// ` ```console ` only the lines after a `$ ` prompt.
fn command_lines(fence: &Fence) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut heredoc: Option<String> = None;
    let mut continued = false;
    for (number, raw) in &fence.lines {
        if let Some(end) = &heredoc {
            if raw.trim() == end {
                heredoc = None;
            }
            continue;
        }
        let mut line = raw.trim().to_owned();
        if fence.lang == "console" && !continued {
            match line.strip_prefix("$ ") {
                Some(command) => line = command.to_owned(),
                None => continue,
            }
        }
        if let Some(at) = line.find("<<") {
            let marker: String = line[at + 2..]
                .trim_start_matches('-')
                .trim_start()
                .chars()
                .take_while(|c| !c.is_whitespace())
                .filter(|c| !matches!(c, '\'' | '"'))
                .collect();
            if !marker.is_empty() {
                heredoc = Some(marker);
            }
        }
        let joined = line.strip_suffix('\\').map(str::to_owned);
        let body = joined.clone().unwrap_or(line);
        // A synopsis (a block without a language) wraps its options onto indented lines.
        let wrapped = fence.lang.is_empty() && raw.starts_with([' ', '\t']);
        match out.last_mut() {
            Some((_, previous)) if continued || wrapped => {
                previous.push(' ');
                previous.push_str(&body);
            }
            _ => out.push((*number, body)),
        }
        continued = joined.is_some();
    }
    out
}

/// A value in the docs that stands for something (`<cluster>`, `$REPO`, `…`): not checked.
fn placeholder(word: &str) -> bool {
    word.contains(['<', '>', '$', '{', '…', '*'])
}

/// The option spelling a word of a command line uses, if it is one: `--name` (of `--name=value`)
/// or `-n` (of `-n` or `-nvalue`). Brackets and commas of a synopsis are stripped.
fn flag(word: &str) -> Option<String> {
    let word = word.trim_start_matches(['[', '(']).trim_end_matches([']', ')', ',', '…', '.']);
    if let Some(long) = word.strip_prefix("--") {
        let name = long.split('=').next().unwrap_or("");
        return (!name.is_empty()).then(|| format!("--{name}"));
    }
    let short = word.strip_prefix('-')?.chars().next()?;
    short.is_ascii_alphabetic().then(|| format!("-{short}"))
}

/// Checks `dovetail <args>`.
fn check_dovetail(args: &[String], cli: &Cli, problems: &mut Vec<String>, at: &str) {
    let mut sub: Option<&str> = None;
    for word in args {
        if word == "--" {
            break;
        }
        if placeholder(word) {
            continue;
        }
        let scope = sub.unwrap_or("");
        if let Some(name) = flag(word) {
            let Some(known) = cli.options.get(scope) else { continue };
            if !known.contains(&name) {
                let command = if scope.is_empty() { "dovetail".to_owned() } else { format!("dovetail {scope}") };
                problems.push(format!(
                    "{at}: `{command}` has no option {name} (its --help lists: {})",
                    known.iter().cloned().collect::<Vec<_>>().join(" ")
                ));
            }
        } else if sub.is_none() {
            if !cli.subcommands.contains(word) {
                problems.push(format!(
                    "{at}: `dovetail {word}`: no such subcommand (there are: {}; if the block shows \
                     output rather than commands, fence it as ```text)",
                    cli.subcommands.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
                return;
            }
            sub = Some(word);
        }
    }
}

/// Checks `cargo …`: packages and targets exist; returns the arguments for `dovetail` when the
/// command runs the CLI (`cargo run -p dovetail -- <args>`).
fn check_cargo(args: &[String], workspace: &Workspace, problems: &mut Vec<String>, at: &str) -> Option<Vec<String>> {
    let mut packages = Vec::new();
    let mut targets: Vec<(&str, String)> = Vec::new();
    let mut subcommand = None;
    let mut rest = None;
    let mut i = 0;
    while i < args.len() {
        let word = args[i].as_str();
        if word == "--" {
            rest = Some(args[i + 1..].to_vec());
            break;
        }
        let (name, attached) = match word.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_owned())),
            _ => (word, None),
        };
        let kind = match name {
            "-p" | "--package" => Some("package"),
            "--test" => Some("test"),
            "--example" => Some("example"),
            "--bin" => Some("bin"),
            "--bench" => Some("bench"),
            _ if name.starts_with("-p") && name.len() > 2 => {
                packages.push(name[2..].to_owned());
                None
            }
            _ => {
                if subcommand.is_none() && !name.starts_with(['-', '+']) {
                    subcommand = Some(word);
                }
                None
            }
        };
        if let Some(kind) = kind {
            let value = match attached {
                Some(v) => Some(v),
                None => {
                    i += 1;
                    args.get(i).cloned()
                }
            };
            if let Some(value) = value.filter(|v| !v.starts_with('-')) {
                if kind == "package" {
                    packages.push(value);
                } else {
                    targets.push((kind, value));
                }
            }
        }
        i += 1;
    }
    if subcommand == Some("install") {
        return None;
    }
    for package in packages.iter().filter(|p| !placeholder(p)) {
        if !workspace.packages.contains_key(package) {
            problems.push(format!(
                "{at}: no package `{package}` in the workspace (there are: {})",
                workspace.packages.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    for (kind, name) in targets.iter().filter(|(_, n)| !placeholder(n)) {
        let searched: Vec<&String> = if packages.is_empty() {
            workspace.packages.keys().collect()
        } else {
            packages.iter().filter(|p| workspace.packages.contains_key(*p)).collect()
        };
        if !searched.is_empty() && !searched.iter().any(|p| workspace.has_target(p, kind, name)) {
            let have: BTreeSet<&String> =
                searched.iter().filter_map(|p| workspace.packages[*p].get(*kind)).flatten().collect();
            let which =
                if packages.is_empty() { "no package".to_owned() } else { format!("`{}`", packages.join("`, `")) };
            problems.push(format!(
                "{at}: {which} has no {kind} target `{name}` (there are: {})",
                have.into_iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    let runs_cli = subcommand == Some("run")
        && packages == ["dovetail"]
        && targets.iter().all(|(kind, name)| *kind == "bin" && name == "dovetail");
    if runs_cli {
        rest
    } else {
        None
    }
}

/// Checks `bash path/script.sh` and `path/script.sh`: the script exists (paths from the
/// repository root, where the docs run their commands).
fn check_script(words: &[String], problems: &mut Vec<String>, at: &str) {
    let script = match words[0].as_str() {
        "bash" | "sh" => words[1..].iter().find(|w| !w.starts_with('-')),
        first if first.ends_with(".sh") && first.contains('/') => Some(&words[0]),
        _ => None,
    };
    let Some(script) = script else { return };
    if placeholder(script) || script.starts_with(['/', '~']) {
        return;
    }
    if !root().join(script).is_file() {
        problems.push(format!("{at}: script {script} does not exist"));
    }
}

#[test]
fn commands_in_code_blocks_name_what_exists() {
    let cli = Cli::read();
    let workspace = Workspace::read();
    let mut problems = Vec::new();
    let (mut dovetail_runs, mut cargo_runs) = (0, 0);
    for doc in markdown_files() {
        let (fences, _) = split_fences(&doc);
        for fence in fences.iter().filter(|f| SHELL.contains(&f.lang.as_str())) {
            for (number, line) in command_lines(fence) {
                for words in commands(&line) {
                    let at = format!("{}:{number}: `{}`", doc.path, words.join(" "));
                    let program = Path::new(&words[0]).file_name().and_then(|n| n.to_str()).unwrap_or_default();
                    let cli_args = match program {
                        "dovetail" => Some(words[1..].to_vec()),
                        "cargo" => {
                            cargo_runs += 1;
                            check_cargo(&words[1..], &workspace, &mut problems, &at)
                        }
                        _ => {
                            check_script(&words, &mut problems, &at);
                            None
                        }
                    };
                    if let Some(args) = cli_args {
                        dovetail_runs += 1;
                        check_dovetail(&args, &cli, &mut problems, &at);
                    }
                }
            }
        }
    }
    assert!(
        dovetail_runs >= 10 && cargo_runs >= 10,
        "only {dovetail_runs} dovetail and {cargo_runs} cargo commands found in code blocks: is the scan broken?"
    );
    assert!(
        problems.is_empty(),
        "{} command(s) naming what does not exist:\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}

#[test]
fn the_scanners_read_markdown_as_github_does() {
    assert_eq!(slug("`dovetail plan`"), "dovetail-plan");
    assert_eq!(slug("Built-in scenarios (`--scenario NAME`, `--list`)"), "built-in-scenarios---scenario-name---list");
    assert_eq!(slug("The sweeper's safety net"), "the-sweepers-safety-net");
    assert_eq!(slug("1. Build the functions"), "1-build-the-functions");
    assert_eq!(slug("NodePool (`nodepools.dovetail.dev`)"), "nodepool-nodepoolsdovetaildev");
    assert_eq!(slug("See [the guide](x.md) — twice"), "see-the-guide--twice");
    let doc = Doc {
        path: "x.md".into(),
        lines: ["# A", "```sh", "# not a heading", "```", "## A", "### A", "#no", "    # indented code"]
            .map(String::from)
            .to_vec(),
    };
    assert_eq!(anchors(&doc), ["a", "a-1", "a-2"]);

    let doc = Doc {
        path: "docs/x.md".into(),
        lines: [
            "See [a](b.md#c) and `[not](a link)`, ``also `[not](this)` ``,",
            "![img](i.png \"title\")",
            "[ref]: ../r.md",
        ]
        .map(String::from)
        .to_vec(),
    };
    let found: Vec<_> = links(&doc).into_iter().map(|l| (l.line, l.dest)).collect();
    assert_eq!(found, [(1, "b.md#c".to_owned()), (2, "i.png".to_owned()), (3, "../r.md".to_owned())]);
    assert_eq!(join(Path::new("docs"), "../README.md"), Some(PathBuf::from("README.md")));
    assert_eq!(join(Path::new("docs"), "../../x"), None);
    assert!(is_external("https://rustup.rs") && is_external("mailto:a@b") && !is_external("docs/cli.md#x"));

    let words = |line: &str| commands(line);
    assert_eq!(
        words("kubectl get x -o yaml | dovetail import -o out.yaml  # a comment -z"),
        [vec!["kubectl", "get", "x", "-o", "yaml"], vec!["dovetail", "import", "-o", "out.yaml"]]
    );
    assert_eq!(
        words("dovetail simulate [SCENARIO.yaml | --scenario NAME] [-o table|json]"),
        [vec!["dovetail", "simulate", "[SCENARIO.yaml", "|", "--scenario", "NAME]", "[-o", "table|json]"]]
    );
    assert_eq!(
        words("(cd infra/cdk && DOVETAIL_X=1 npx cdk synth -q)"),
        [vec!["cd", "infra/cdk"], vec!["npx", "cdk", "synth", "-q"]]
    );
    assert_eq!(words("REPO=$(aws ecr x --query 'a b')"), [vec!["aws", "ecr", "x", "--query", "a b"]]);
    assert_eq!(flag("[--sizes"), Some("--sizes".into()));
    assert_eq!(flag("--output=json"), Some("--output".into()));
    assert_eq!(flag("[-o"), Some("-o".into()));
    assert_eq!(flag("-"), None);
    assert_eq!(flag("table|json]"), None);

    let fence = Fence {
        lang: "console".into(),
        lines: ["$ dovetail plan \\", "    -f x", "dovetail: output", "$ cat > f <<'EOF'", "dovetail bogus", "EOF"]
            .iter()
            .enumerate()
            .map(|(i, l)| (i + 1, l.to_string()))
            .collect(),
    };
    assert_eq!(command_lines(&fence), [(1, "dovetail plan  -f x".to_owned()), (4, "cat > f <<'EOF'".to_owned())]);
    let synopsis = Fence {
        lang: String::new(),
        lines: vec![(7, "dovetail bench [--sizes 1,5]".to_owned()), (8, "               [-o table|json]".to_owned())],
    };
    assert_eq!(command_lines(&synopsis), [(7, "dovetail bench [--sizes 1,5] [-o table|json]".to_owned())]);
}
