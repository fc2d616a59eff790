//! The habits every `dovetail` command shares with kubectl, run on the built binary: `-o
//! table|json|yaml`, `-f -` for stdin, examples and exit codes in `--help`, shell completions,
//! exit codes 0/1/2, and progress drawn on a terminal only.

mod common;

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

use common::{dovetail, root, text};

const EXAMPLE: &str = "infra/examples/web-zone-spread";
const SUBCOMMANDS: [&str; 5] = ["plan", "simulate", "bench", "import", "completion"];

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(bytes)))
}

fn yaml(bytes: &[u8]) -> serde_json::Value {
    serde_yaml_ng::from_slice(bytes).unwrap_or_else(|e| panic!("not YAML ({e}): {}", text(bytes)))
}

/// `dovetail <args> -o <format>`, which must succeed; its stdout.
fn output(args: &[&str], format: &str, stdin: Option<&[u8]>) -> Vec<u8> {
    let mut all = args.to_vec();
    all.extend(["-o", format]);
    let out = dovetail(&all, stdin);
    assert_eq!(out.status.code(), Some(0), "dovetail {}: {}", all.join(" "), text(&out.stderr));
    out.stdout
}

#[test]
fn every_command_prints_yaml_as_its_json() {
    let commands: [&[&str]; 4] = [
        &["plan", "-f", EXAMPLE],
        &["simulate", "--scenario", "eight-pods"],
        &["simulate", "--list"],
        &["bench", "--suite", "karpenter-mix", "--sizes", "10", "--samples", "1", "--seconds", "0"],
    ];
    for args in commands {
        let (j, y) = (json(&output(args, "json", None)), yaml(&output(args, "yaml", None)));
        if args[0] == "bench" {
            // Timings differ between two runs; the shape and the plans do not.
            let keys = |v: &serde_json::Value| v["rows"][0].as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
            assert_eq!(keys(&j), keys(&y), "{args:?}");
            assert_eq!(j["rows"][0]["nodes"], y["rows"][0]["nodes"], "{args:?}");
        } else {
            assert_eq!(j, y, "{args:?}: -o yaml is -o json's document");
        }
        let table = text(&output(args, "table", None));
        assert!(!table.is_empty() && serde_json::from_str::<serde_json::Value>(&table).is_err(), "{args:?}");
        // Table is the default.
        let default = dovetail(args, None);
        if args[0] != "bench" {
            assert_eq!(text(&default.stdout), table, "{args:?}: table is the default");
        }
    }
}

#[test]
fn a_format_that_is_not_one_is_a_usage_error() {
    for sub in ["plan", "simulate", "bench", "import"] {
        let out = dovetail(&[sub, "-o", "plan.txt"], None);
        assert_eq!(out.status.code(), Some(2), "{sub}");
        let err = text(&out.stderr);
        assert!(
            err.contains("unknown output format 'plan.txt' (table|json|yaml); to write files use --output-file"),
            "{sub}: {err}"
        );
        assert!(out.stdout.is_empty(), "{sub}");
    }
}

#[test]
fn dash_f_dash_reads_stdin() {
    let scenario = std::fs::read(root().join("shared/sim/src/scenario/builtin/eight-pods.yaml")).expect("scenario");
    let from_stdin = dovetail(&["simulate", "-f", "-", "-o", "json"], Some(&scenario));
    assert_eq!(from_stdin.status.code(), Some(0), "{}", text(&from_stdin.stderr));
    let builtin = output(&["simulate", "--scenario", "eight-pods"], "json", None);
    // The same runs; only the scenario's name (from its file name, `<stdin>` here) may differ.
    let runs =
        |v: serde_json::Value| v["runs"].as_array().map(|r| r.iter().map(|r| r["summary"].clone()).collect::<Vec<_>>());
    let summaries = runs(json(&builtin)).expect("runs");
    assert!(summaries.iter().all(serde_json::Value::is_object), "{summaries:?}");
    assert_eq!(runs(json(&from_stdin.stdout)), Some(summaries));

    let manifests: Vec<u8> = std::fs::read_dir(root().join(EXAMPLE))
        .expect("example")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .flat_map(|p| [std::fs::read(p).expect("manifest"), b"\n---\n".to_vec()].concat())
        .collect();
    let plan = output(&["plan", "-f", "-"], "yaml", Some(&manifests));
    assert_eq!(yaml(&plan)["nodeclaims"], json(&output(&["plan", "-f", EXAMPLE], "json", None))["nodeclaims"]);

    let import = root().join("infra/examples/karpenter-migration/nodepool.yaml");
    let pool = std::fs::read(&import).expect("nodepool");
    let from_stdin = dovetail(&["import", "-f", "-"], Some(&pool));
    let from_file = dovetail(&["import", "-f", import.to_str().expect("UTF-8")], None);
    assert_eq!(from_stdin.stdout, from_file.stdout);
    assert!(!from_stdin.stdout.is_empty());
}

#[test]
fn help_shows_examples_and_exit_codes() {
    let top = text(&dovetail(&["--help"], None).stdout);
    for part in ["Examples:", "Exit codes:", "  2  bad input"] {
        assert!(top.contains(part), "{part:?} missing from dovetail --help:\n{top}");
    }
    for sub in SUBCOMMANDS {
        let out = dovetail(&[sub, "--help"], None);
        assert!(out.status.success(), "{sub}");
        let help = text(&out.stdout);
        let examples =
            help.split("Examples:").nth(1).unwrap_or_else(|| panic!("{sub} --help has no examples:\n{help}"));
        assert!(examples.contains(&format!("dovetail {sub}")), "{sub}: {examples}");
        if sub != "completion" {
            assert!(help.contains("Exit codes:") && help.contains("-o, --output <FORMAT>"), "{sub}:\n{help}");
        }
    }
}

#[test]
fn completion_scripts_know_the_commands_and_formats() {
    for shell in ["bash", "zsh", "fish"] {
        let out = dovetail(&["completion", shell], None);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        for word in SUBCOMMANDS.iter().chain(&["output-file", "yaml"]) {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
    let bash = dovetail(&["completion", "bash"], None);
    let check =
        Command::new("bash").arg("-n").stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn();
    let mut check = check.expect("bash");
    std::io::Write::write_all(check.stdin.as_mut().expect("stdin"), &bash.stdout).expect("write");
    let checked = check.wait_with_output().expect("bash -n");
    assert!(checked.status.success(), "bash -n: {}", text(&checked.stderr));
    assert_eq!(dovetail(&["completion", "tcsh"], None).status.code(), Some(2));
}

#[test]
fn exit_codes_say_what_went_wrong() {
    // 0: done (unplaceable pods are part of a plan).
    assert_eq!(dovetail(&["plan", "-f", "infra/examples/limits"], None).status.code(), Some(0));
    // 2: arguments and input.
    for args in [
        &["plan"][..],
        &["plan", "-f", "no-such-file.yaml"],
        &["simulate", "--scenario", "no-such-scenario"],
        &["simulate", "--hours", "-1"],
        &["bench", "--samples", "0"],
        &["import", "no-such-file.yaml"],
        &["no-such-command"],
    ] {
        let out = dovetail(args, None);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(!out.stderr.is_empty(), "{args:?} says why");
    }
    // 1: the input was fine, the run failed (here: its output file cannot be written).
    let out = dovetail(&["simulate", "--scenario", "eight-pods", "--decisions", "/nonexistent/dir/d.jsonl"], None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let out = dovetail(&["import", "-f", "-", "--output-file", "/nonexistent/dir/x.yaml"], Some(b""));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

/// `bench --overlays` prices the catalog as `plan` does: a fee on every node raises the bill of
/// the same pods by the fee per node; a bad overlay is bad input, said before any row.
#[test]
fn bench_prices_with_overlays() {
    let run = |stdin: Option<&[u8]>| -> serde_json::Value {
        let mut args = vec!["bench", "--suite", "real-catalog", "--sizes", "100", "--samples", "1", "--seconds", "0"];
        if stdin.is_some() {
            args.extend(["--overlays", "-"]);
        }
        json(&output(&args, "json", stdin))["rows"][0].clone()
    };
    let fee = "apiVersion: dovetail.dev/v1alpha1\nkind: NodeOverlay\nmetadata: {name: fee}\nspec: {priceAdjustment: \"+0.5\", requirements: []}\n";
    let (list, priced) = (run(None), run(Some(fee.as_bytes())));
    let cost = |r: &serde_json::Value| r["cost_per_hour"].as_f64().unwrap();
    let nodes = priced["nodes"].as_f64().unwrap();
    assert!(cost(&priced) > cost(&list), "{priced} is not above {list}");
    assert!(cost(&priced) >= 0.5 * nodes, "every node pays the fee: {priced}");
    let bad = "apiVersion: dovetail.dev/v1alpha1\nkind: NodeOverlay\nmetadata: {name: x}\nspec: {price: \"-1\", requirements: []}\n";
    let out = dovetail(&["bench", "--sizes", "1", "--overlays", "-"], Some(bad.as_bytes()));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("NodeOverlay x") && text(&out.stderr).contains("spec.price"),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}

#[test]
fn progress_stays_off_a_pipe() {
    for args in [
        &["simulate", "--hours", "2"][..],
        &["bench", "--suite", "karpenter-mix", "--sizes", "10,20", "--samples", "1", "--seconds", "0"],
    ] {
        let out = dovetail(args, None);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(!out.stderr.contains(&b'\r'), "{args:?} drew progress on a pipe: {:?}", text(&out.stderr));
    }
}

/// A pseudo-terminal: the controlling side, and the path of the terminal side.
fn pty() -> (std::fs::File, String) {
    // SAFETY: plain libc calls on a descriptor this function owns; ptsname_r writes at most
    // `buf.len()` bytes including the NUL.
    unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(fd >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
        let owned = OwnedFd::from_raw_fd(fd);
        assert_eq!(libc::grantpt(fd), 0, "grantpt");
        assert_eq!(libc::unlockpt(fd), 0, "unlockpt");
        let mut buf = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(fd, buf.as_mut_ptr(), buf.len()), 0, "ptsname_r");
        let path = std::ffi::CStr::from_ptr(buf.as_ptr()).to_str().expect("UTF-8 pty path").to_owned();
        (std::fs::File::from(owned), path)
    }
}

#[test]
fn progress_is_drawn_on_a_terminal() {
    for args in [
        &["simulate", "--hours", "2"][..],
        &["bench", "--suite", "karpenter-mix", "--sizes", "10,20", "--samples", "1", "--seconds", "0"],
    ] {
        let (mut controller, path) = pty();
        let terminal = std::fs::OpenOptions::new().read(true).write(true).open(&path).expect("open the pty");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dovetail"));
        cmd.args(args).current_dir(root()).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(terminal);
        let child = cmd.spawn().expect("run dovetail");
        // Our copy of the terminal side goes with the command, so reading ends when the child exits.
        drop(cmd);
        let reader = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut buf = [0; 4096];
            // The controlling side reads EIO once no process holds the terminal side.
            while let Ok(n) = controller.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.extend_from_slice(&buf[..n]);
            }
            seen
        });
        let out = child.wait_with_output().expect("wait");
        let drawn = String::from_utf8_lossy(&reader.join().expect("reader")).into_owned();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {drawn}");
        assert!(drawn.contains('\r') && drawn.contains('%'), "{args:?} drew no progress: {drawn:?}");
        // The bar is erased before anything else is printed, and at the end.
        assert!(drawn.trim_end_matches(' ').ends_with('\r'), "{args:?} left the bar: {drawn:?}");
        assert!(!text(&out.stdout).contains('\r'), "{args:?}: progress went to stdout");
    }
}

#[test]
fn a_reader_that_goes_away_is_no_failure() {
    // `dovetail plan … | head -1`: stdout closes before (or while) the plan is written.
    let mut child = Command::new(env!("CARGO_BIN_EXE_dovetail"))
        .args(["plan", "-f", EXAMPLE, "-o", "json"])
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run dovetail");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{err}");
}
