//! What the CLI's test binaries share: running the built `dovetail` from the repository root, and
//! golden files that `DOVETAIL_BLESS=1` rewrites.

// Each test binary compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_dovetail");

/// The repository root: examples, fixtures and goldens are addressed from there, as in the README.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("shared/cli/ has a grandparent").to_path_buf()
}

/// Whether goldens are being rewritten (`DOVETAIL_BLESS=1`).
pub fn blessing() -> bool {
    std::env::var_os("DOVETAIL_BLESS").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Runs `dovetail <args>` from the repository root, feeding `stdin` if given.
pub fn dovetail(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args).current_dir(root()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = cmd.spawn().expect("run the dovetail binary");
    if let Some(input) = stdin {
        child.stdin.take().expect("piped stdin").write_all(input).expect("write stdin");
    }
    child.wait_with_output().expect("wait for dovetail")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

/// Compares `actual` with the golden file, or rewrites it when blessing. `test` is the test
/// binary's name, for the command that rewrites it.
pub fn check_golden(path: &Path, actual: &str, test: &str) {
    let bless = format!("DOVETAIL_BLESS=1 cargo test -p dovetail --test {test}");
    if blessing() {
        std::fs::write(path, actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let expected =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e} (create it with {bless})", path.display()));
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs, first at line {}:\n  golden: {:?}\n  actual: {:?}\n\
             If the change is intended, rewrite it with {bless} and review the diff.",
            path.display(),
            line + 1,
            expected.lines().nth(line).unwrap_or("<end of file>"),
            actual.lines().nth(line).unwrap_or("<end of file>"),
        );
    }
}
