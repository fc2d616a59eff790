//! `dovetail import`, run as a user runs it: the built binary on files, on stdin, with `-o`.
//!
//! The conversion's goldens live with the library (`shared/api/tests/fixtures/import/expected/`,
//! see `shared/api/tests/import.rs`); here the binary must print exactly them: the YAML on stdout
//! (or in the `-o` file), each warning and error on stderr as `dovetail: warning: …` /
//! `dovetail: error: …` and a summary line, and exit 0 with warnings only, 2 when anything failed.
//!
//! The Karpenter migration example is imported too (`examples/karpenter-migration/expected/
//! import.yaml`), and the converted objects must plan exactly as the Karpenter originals do
//! (`expected/plan.json`): the import changes nothing Dovetail decides with. After a deliberate
//! change: `DOVETAIL_BLESS=1 cargo test -p dovetail --test import`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_dovetail");
const FIXTURES: &str = "shared/api/tests/fixtures/import";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("cli/ has a parent").to_path_buf()
}

/// A fresh directory for one test's output files.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("import").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    dir
}

/// Runs `dovetail <args>` from the repository root, feeding `stdin` if given.
fn dovetail(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args).current_dir(root()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = cmd.spawn().expect("run the dovetail binary");
    if let Some(input) = stdin {
        child.stdin.take().expect("piped stdin").write_all(input.as_bytes()).expect("write stdin");
    }
    child.wait_with_output().expect("wait for dovetail")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

fn read(path: impl AsRef<Path>) -> String {
    let path = root().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fixture's golden YAML and messages.
fn golden(name: &str) -> (String, String) {
    (read(format!("{FIXTURES}/expected/{name}.yaml")), read(format!("{FIXTURES}/expected/{name}.txt")))
}

/// Splits stderr into the message lines (without `dovetail: `) and the summary line.
fn stderr(out: &Output) -> (String, String) {
    let err = text(&out.stderr);
    let mut lines: Vec<&str> = err.lines().collect();
    let summary = lines.pop().unwrap_or_default().to_string();
    let messages = lines
        .iter()
        .map(|l| format!("{}\n", l.strip_prefix("dovetail: ").unwrap_or_else(|| panic!("unprefixed line: {l}"))))
        .collect();
    (messages, summary)
}

#[test]
fn a_kubectl_dump_prints_the_goldens() {
    let (yaml, messages) = golden("kubectl-get");
    let out = dovetail(&["import", &format!("{FIXTURES}/kubectl-get.yaml")], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), yaml);
    let (printed, summary) = stderr(&out);
    assert_eq!(printed, messages);
    assert_eq!(summary, "dovetail: converted 2 NodePools and 2 EC2NodeClasses, 14 warnings, 0 errors");
}

#[test]
fn stdin_by_default_or_dash_and_an_output_file() {
    let (yaml, _) = golden("kubectl-get");
    let input = read(format!("{FIXTURES}/kubectl-get.yaml"));
    let out = dovetail(&["import"], Some(&input));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), yaml);
    assert!(text(&out.stderr)
        .contains("warning: <stdin>: document 1, item 4 (EC2NodeClass gpu): spec.amiSelectorTerms[0].alias"));

    let file = scratch("stdin").join("dovetail.yaml");
    let out = dovetail(&["import", "-", "-o", file.to_str().unwrap()], Some(&input));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "with -o nothing goes to stdout");
    assert_eq!(read(&file), yaml);
}

#[test]
fn a_malformed_object_fails_alone_with_exit_code_2() {
    let (yaml, messages) = golden("malformed");
    let out = dovetail(&["import", &format!("{FIXTURES}/malformed.yaml")], None);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), yaml, "the good pool is still written");
    assert!(yaml.contains("name: good"));
    let (printed, summary) = stderr(&out);
    assert_eq!(printed, messages);
    assert_eq!(summary, "dovetail: converted 1 NodePool and 0 EC2NodeClasses, 2 warnings, 6 errors");
}

#[test]
fn an_unreadable_file_stops_only_itself() {
    let (yaml, _) = golden("gitops");
    let out = dovetail(&["import", "no-such-file.yaml", &format!("{FIXTURES}/gitops.yaml")], None);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stdout), yaml);
    let err = text(&out.stderr);
    assert!(err.contains("dovetail: error: no-such-file.yaml: cannot read: "), "{err}");
    assert!(err.ends_with("converted 2 NodePools and 2 EC2NodeClasses, 12 warnings, 1 error\n"), "{err}");
}

#[test]
fn the_migration_example_imports_and_plans_the_same() {
    let example = "examples/karpenter-migration";
    let file = scratch("example").join("dovetail.yaml");
    let out = dovetail(
        &[
            "import",
            &format!("{example}/nodepool.yaml"),
            &format!("{example}/ec2nodeclass.yaml"),
            "-o",
            file.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let imported = read(&file);
    let golden = root().join(example).join("expected/import.yaml");
    if std::env::var_os("DOVETAIL_BLESS").is_some_and(|v| !v.is_empty() && v != "0") {
        std::fs::write(&golden, &imported).expect("write the golden");
    }
    assert_eq!(imported, read(&golden), "rewrite with DOVETAIL_BLESS=1 cargo test -p dovetail --test import");
    assert!(imported.contains("group: dovetail.dev") && !imported.contains("karpenter.sh/v1"), "{imported}");

    // Dovetail reads Karpenter's objects as its own, so the plan must not move.
    let plan = dovetail(
        &["plan", "-o", "json", "-f", file.to_str().unwrap(), "-f", &format!("{example}/workloads.yaml")],
        None,
    );
    assert!(plan.status.success(), "{}", text(&plan.stderr));
    assert_eq!(text(&plan.stdout), read(format!("{example}/expected/plan.json")));
}

#[test]
fn help_explains_the_conversion() {
    let out = dovetail(&["import", "--help"], None);
    assert!(out.status.success());
    let help = text(&out.stdout);
    for part in ["What changes:", "Warnings (stderr)", "Errors (stderr, exit code 2)", "-o, --output <FILE>"] {
        assert!(help.contains(part), "{part:?} missing from:\n{help}");
    }
}
