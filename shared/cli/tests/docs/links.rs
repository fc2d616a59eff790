//! Relative links and their `#anchor`s in every Markdown file.

use super::*;

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

#[test]
fn the_link_scanner_reads_markdown_as_github_does() {
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
}
