//! The crates' modules form ladders: inside every crate of the workspace, no two sibling modules
//! depend on each other, directly or through others (docs/architecture.md draws the core's).
//!
//! A module depends on another when its code names it by a `crate::`, `super::` or `self::` path
//! (in a `use` or inline). Dependencies are compared between siblings: `disruption::drift` naming
//! `cluster::Cluster` is the edge `disruption → cluster` among the crate's top-level modules, and
//! `scheduler::topology` naming `scheduler::classes` is `topology → classes` inside `scheduler`. A
//! module naming its own parent or child is not an edge (a `mod.rs` declares and re-exports its
//! children; children use the parent's vocabulary). Comments, strings and character literals are
//! skipped, so prose and doc links do not count.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One place a module names another: for the failure message.
#[derive(Debug, Clone)]
struct Reference {
    file: PathBuf,
    line: usize,
    path: String,
}

/// A crate's sources: module path (`["disruption", "drift"]`) → files and inline modules.
struct Crate {
    name: String,
    /// Every module the crate declares, by its path from the crate root.
    modules: BTreeSet<Vec<String>>,
    /// (from module, path as written with `crate`/`super`/`self` resolved) per reference.
    references: Vec<(Vec<String>, Vec<String>, Reference)>,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// The workspace's crates and the directory their root module sits in.
fn crate_roots() -> Vec<(String, PathBuf)> {
    let manifest = fs::read_to_string(repo().join("Cargo.toml")).expect("read Cargo.toml");
    let members: Vec<String> = manifest
        .split("members = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .expect("a members list in Cargo.toml")
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect();
    let mut roots = Vec::new();
    for member in members {
        let dir = repo().join(&member);
        for root in ["src/lib.rs", "src/main.rs", "harness/lib.rs"] {
            if dir.join(root).is_file() {
                let src = dir.join(root).parent().expect("root file has a directory").to_path_buf();
                roots.push((format!("{member} ({root})"), src));
                break;
            }
        }
    }
    assert!(roots.len() >= 10, "found only {} crates in Cargo.toml's members: {roots:?}", roots.len());
    roots
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> =
        fs::read_dir(dir).expect("read source dir").map(|e| e.expect("entry").path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module a file is: `disruption/drift.rs` and `disruption/drift/mod.rs` are both
/// `["disruption", "drift"]`; `lib.rs` and `main.rs` the root.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("file under its source dir").with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// Source text with comments, string and char literals blanked (newlines kept, so line numbers
/// stay right).
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || (next == Some('#') && !prev_is_ident(&b, i)))
            && !prev_is_ident(&b, i)
        {
            // Raw string: r"…" or r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &ch in &b[i..j.min(b.len())] {
                out.push(blank(ch));
            }
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && is_char_literal(&b, i) {
            // A char literal ('x', '\n', '\u{..}'), not a lifetime.
            let mut j = i + 1;
            if b.get(j) == Some(&'\\') {
                j += 1;
            }
            while j < b.len() && b[j] != '\'' {
                j += 1;
            }
            for _ in i..=j.min(b.len() - 1) {
                out.push(' ');
            }
            i = j + 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn prev_is_ident(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

fn is_char_literal(b: &[char], i: usize) -> bool {
    matches!((b.get(i + 1), b.get(i + 2)), (Some('\\'), _) | (Some(_), Some('\'')))
}

/// Tokens of code: identifiers, `::`, and single punctuation characters, with their line.
fn tokens(code: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut line = 1;
    let b: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push((b[start..i].iter().collect(), line));
        } else if c == ':' && b.get(i + 1) == Some(&':') {
            out.push(("::".into(), line));
            i += 2;
        } else {
            out.push((c.to_string(), line));
            i += 1;
        }
    }
    out
}

/// Paths of a use tree starting at `toks[i]` (after a `::`): `a::b`, `{a, b::{c, d}}`, `*`.
fn use_tree(toks: &[(String, usize)], mut i: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(i).map(|t| t.0.as_str()) {
            Some("{") => {
                i += 1;
                loop {
                    match toks.get(i).map(|t| t.0.as_str()) {
                        Some("}") => return i + 1,
                        Some(",") => i += 1,
                        Some(_) => i = use_tree(toks, i, &path, out),
                        None => return i,
                    }
                }
            }
            Some(t) if t.chars().all(|c| c.is_alphanumeric() || c == '_') || t == "*" => {
                path.push(t.to_string());
                i += 1;
                if toks.get(i).map(|t| t.0.as_str()) == Some("::") {
                    i += 1;
                    continue;
                }
                out.push(path);
                return i;
            }
            _ => {
                out.push(path);
                return i;
            }
        }
    }
}

/// Reads one crate: its modules (files and inline `mod x { … }`) and every path it names.
fn read_crate(name: &str, src: &Path) -> Crate {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let sources: Vec<(PathBuf, String)> =
        files.into_iter().map(|f| (f.clone(), fs::read_to_string(&f).expect("read source"))).collect();
    read_sources(name, src, &sources)
}

fn read_sources(name: &str, src: &Path, sources: &[(PathBuf, String)]) -> Crate {
    let mut krate = Crate { name: name.to_string(), modules: BTreeSet::new(), references: Vec::new() };
    for (file, text) in sources {
        let base = module_of(src, file);
        for k in 0..=base.len() {
            krate.modules.insert(base[..k].to_vec());
        }
        let toks = tokens(&code_only(text));
        // Inline modules: (brace depth at which they close, module path).
        let mut stack: Vec<(usize, Vec<String>)> = Vec::new();
        let mut depth = 0usize;
        let mut i = 0;
        while i < toks.len() {
            let here = stack.last().map_or(base.clone(), |s| s.1.clone());
            let t = toks[i].0.as_str();
            match t {
                "{" => depth += 1,
                "}" => {
                    depth = depth.saturating_sub(1);
                    if stack.last().is_some_and(|s| s.0 == depth) {
                        stack.pop();
                    }
                }
                "mod" if toks.get(i + 2).map(|t| t.0.as_str()) == Some("{") => {
                    let mut inner = here.clone();
                    inner.push(toks[i + 1].0.clone());
                    krate.modules.insert(inner.clone());
                    stack.push((depth, inner));
                    depth += 1;
                    i += 3;
                    continue;
                }
                "crate" | "super" | "self" if toks.get(i + 1).map(|t| t.0.as_str()) == Some("::") => {
                    // `a::crate` cannot occur; `x::self` (in a use list) is handled by use_tree.
                    let after_path = i > 0 && toks[i - 1].0 == "::";
                    if !after_path {
                        let line = toks[i].1;
                        let mut anchor = match t {
                            "crate" => Vec::new(),
                            "super" => here[..here.len().saturating_sub(1)].to_vec(),
                            _ => here.clone(),
                        };
                        let mut j = i + 2;
                        // super::super::…
                        while t == "super" && toks.get(j).map(|t| t.0.as_str()) == Some("super") {
                            anchor.pop();
                            j += 2;
                        }
                        let mut paths = Vec::new();
                        let end = use_tree(&toks, j, &anchor, &mut paths);
                        for p in paths {
                            let written = format!("{t}::{}", p[anchor.len()..].join("::"));
                            let r = Reference { file: file.clone(), line, path: written };
                            krate.references.push((here.clone(), p, r));
                        }
                        i = end;
                        continue;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
    krate
}

/// Sibling edges, per parent module: parent → (from child → (to child → an example reference)).
type Edges = BTreeMap<Vec<String>, BTreeMap<String, BTreeMap<String, Reference>>>;

fn edges(krate: &Crate) -> Edges {
    let mut out: Edges = BTreeMap::new();
    for (from, path, r) in &krate.references {
        // The module a path lands in: its longest prefix that is a module.
        let to =
            (0..=path.len()).rev().map(|k| path[..k].to_vec()).find(|p| krate.modules.contains(p)).unwrap_or_default();
        let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        if common == from.len() || common == to.len() {
            continue; // itself, an ancestor or a descendant
        }
        out.entry(from[..common].to_vec())
            .or_default()
            .entry(from[common].clone())
            .or_default()
            .entry(to[common].clone())
            .or_insert_with(|| r.clone());
    }
    out
}

/// Every cycle among siblings, each as the modules around it with the reference behind each step.
fn cycles(krate: &Crate) -> Vec<String> {
    let mut found = Vec::new();
    for (parent, graph) in edges(krate) {
        // Modules that reach each other form a knot. The graphs are small (tens of modules), so
        // each module's reach is worked out on its own.
        let reach = |from: &String| -> BTreeSet<&String> {
            let mut seen = BTreeSet::new();
            let mut todo = vec![from];
            while let Some(m) = todo.pop() {
                for next in graph.get(m).into_iter().flat_map(|m| m.keys()) {
                    if seen.insert(next) {
                        todo.push(next);
                    }
                }
            }
            seen
        };
        let reaches: BTreeMap<&String, BTreeSet<&String>> = graph.keys().map(|m| (m, reach(m))).collect();
        let mut sccs: Vec<BTreeSet<&String>> = Vec::new();
        for (m, r) in &reaches {
            if !r.contains(m) || sccs.iter().any(|s| s.contains(m)) {
                continue;
            }
            sccs.push(r.iter().copied().filter(|o| reaches.get(o).is_some_and(|ro| ro.contains(m))).collect());
        }
        for members in sccs {
            let mut lines = Vec::new();
            for from in &members {
                for (to, r) in graph.get(*from).into_iter().flatten().filter(|(to, _)| members.contains(to)) {
                    lines.push(format!("    {from} → {to}: {}:{} names {}", r.file.display(), r.line, r.path));
                }
            }
            let inside = if parent.is_empty() { "the crate root".to_string() } else { parent.join("::") };
            found.push(format!(
                "{}: a cycle among the modules of {inside}: {}\n{}",
                krate.name,
                members.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", "),
                lines.join("\n")
            ));
        }
    }
    found
}

#[test]
fn no_module_cycles_in_any_crate() {
    let mut problems = Vec::new();
    for (name, src) in crate_roots() {
        let krate = read_crate(&name, &src);
        assert!(
            krate.modules.len() > 1 || name.contains("functions/"),
            "{name}: read no modules under {}",
            src.display()
        );
        problems.extend(cycles(&krate));
    }
    assert!(
        problems.is_empty(),
        "modules that depend on each other (move what both need below both):\n{}",
        problems.join("\n")
    );
}

/// The checker itself finds a knot, through `use` groups, `super::` and inline paths, and ignores
/// comments, strings and a module naming its own children.
#[test]
fn a_cycle_between_siblings_is_found() {
    let src = Path::new("/src");
    let files = |a: &str| -> Vec<(PathBuf, String)> {
        vec![
            (src.join("lib.rs"), "pub mod a; pub mod b; pub mod c;".into()),
            (src.join("a/mod.rs"), format!("pub mod inner;\nuse crate::{{c::C, {a}}};\n// crate::b::B in a comment\n")),
            (src.join("a/inner.rs"), "use super::super::c::C;\nfn f() { let s = \"crate::b::x\"; }".into()),
            (src.join("b.rs"), "fn g() -> crate::c::C { todo!() }\n".into()),
            (src.join("c.rs"), "pub struct C;\nmod tests { use super::C; }\n".into()),
        ]
    };
    let quiet = read_sources("fixture", src, &files("c::D"));
    assert!(cycles(&quiet).is_empty(), "{:?}", cycles(&quiet));
    let knotted = read_sources("fixture", src, &files("b::B"));
    let with_c_back = {
        let mut f = files("b::B");
        f[4].1.push_str("fn h() { crate::a::inner::x(); }\n");
        read_sources("fixture", src, &f)
    };
    assert!(cycles(&knotted).is_empty(), "a → b, a → c, b → c is a ladder");
    let found = cycles(&with_c_back);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("a, b, c") || found[0].contains("a, c"), "{}", found[0]);
    assert!(found[0].contains("c → a: /src/c.rs:3 names crate::a::inner::x"), "{}", found[0]);
}
