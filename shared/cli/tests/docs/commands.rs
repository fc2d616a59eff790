//! Commands in fenced code blocks: `dovetail` subcommands and flags, cargo packages and targets,
//! scripts.

use super::*;

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
fn the_command_scanner_reads_code_blocks_as_a_shell_does() {
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
