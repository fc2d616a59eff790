//! The functions as Lambda runs them, through cargo-lambda (PyPI `cargo-lambda` and `ziglang`,
//! in the venv at `$HOME/.cache/dovetail/venv` that `tests/run-all.sh` creates):
//!
//! - [`artifacts`]: `cargo lambda build --profile lambda-check --arm64` of the three functions,
//!   once per test run, in a target directory of its own under `$HOME/.cache/dovetail` (aarch64 objects
//!   share nothing with the debug test build, and the two builds never wait on each other's lock);
//! - [`Emulator`]: `cargo lambda watch --only-lambda-apis`, Lambda's runtime API emulated on a
//!   loopback port, to run an already built function binary against and invoke it with
//!   `cargo lambda invoke`.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// The three functions: package and binary names.
pub const FUNCTIONS: [&str; 3] = ["dovetail-provisioner", "dovetail-interruption", "dovetail-sweeper"];

/// How CI (and a developer) installs what this module needs.
pub const INSTALL: &str = "\"$HOME/.cache/dovetail/venv/bin/pip\" install cargo-lambda ziglang && \
                           rustup target add aarch64-unknown-linux-gnu (as tests/run-all.sh does)";

fn home() -> Result<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from).ok_or_else(|| anyhow!("HOME is not set"))
}

fn venv_bin() -> Result<PathBuf> {
    Ok(home()?.join(".cache/dovetail/venv/bin"))
}

/// The `cargo-lambda` executable; an error naming the install command when it is missing.
pub fn cargo_lambda() -> Result<PathBuf> {
    let exe = venv_bin()?.join("cargo-lambda");
    if !exe.is_file() {
        bail!("cargo-lambda is not installed at {}: install it with {INSTALL}", exe.display());
    }
    Ok(exe)
}

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is in the workspace").to_path_buf()
}

/// A `cargo lambda …` command run in the workspace, with the venv first on `PATH` (cargo-lambda
/// finds zig through the venv's python).
pub fn command(args: &[&str]) -> Result<Command> {
    let mut cmd = Command::new(cargo_lambda()?);
    cmd.arg("lambda").args(args).current_dir(workspace());
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![venv_bin()?];
    paths.extend(std::env::split_paths(&path));
    cmd.env("PATH", std::env::join_paths(paths)?);
    Ok(cmd)
}

/// Where [`artifacts`] builds: `$DOVETAIL_LAMBDA_TARGET_DIR`, else `$HOME/.cache/dovetail/target-lambda`.
pub fn target_dir() -> Result<PathBuf> {
    match std::env::var_os("DOVETAIL_LAMBDA_TARGET_DIR") {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => Ok(home()?.join(".cache/dovetail/target-lambda")),
    }
}

/// `cargo lambda build --profile lambda-check --arm64` of [`FUNCTIONS`] (the release layout without
/// the optimisation: see the profile in Cargo.toml); the directory holding
/// `<function>/bootstrap` for each. Built once per process (later calls wait for the first and
/// share its outcome); cargo makes a warm rebuild a no-op.
///
/// The build directory is shared, the packaged functions are not: each test process gets
/// `lambda/<pid>/` of its own. cargo-lambda rewrites the bootstraps it packages even when cargo
/// built nothing, and run-all's background packaging build and the suite run in two processes
/// (one read a bootstrap of 0 bytes while the other rewrote it). Directories of processes that
/// have ended are removed.
pub fn artifacts() -> Result<&'static Path> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| build().map_err(|e| format!("{e:#}")));
    match built {
        Ok(dir) => Ok(dir.as_path()),
        Err(e) => Err(anyhow!("{e}")),
    }
}

fn build() -> Result<PathBuf> {
    let target = target_dir()?;
    let runs = target.join("lambda");
    remove_ended(&runs);
    let lambda_dir = runs.join(std::process::id().to_string());
    let mut args = vec!["build", "--profile", "lambda-check", "--arm64", "--lambda-dir"];
    let dir = lambda_dir.to_string_lossy().into_owned();
    args.push(&dir);
    for f in FUNCTIONS {
        args.extend(["-p", f]);
    }
    let started = Instant::now();
    let out = command(&args)?
        .env("CARGO_TARGET_DIR", &target)
        .env("CARGO_BUILD_JOBS", std::env::var("CARGO_BUILD_JOBS").unwrap_or_else(|_| "2".into()))
        .stdin(Stdio::null())
        .output()
        .context("running cargo lambda build")?;
    if !out.status.success() {
        bail!(
            "cargo lambda build --profile lambda-check --arm64 failed ({}):\n{}",
            out.status,
            tail(&String::from_utf8_lossy(&out.stderr), 40)
        );
    }
    eprintln!("cargo lambda build --profile lambda-check --arm64: {:.0} s", started.elapsed().as_secs_f64());
    Ok(lambda_dir)
}

/// Removes the packaged functions of test processes no longer running (`lambda/<pid>/`).
fn remove_ended(runs: &Path) {
    let Ok(entries) = std::fs::read_dir(runs) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// `cargo lambda watch --only-lambda-apis` on a loopback port, stopped when dropped.
pub struct Emulator {
    child: Child,
    pub port: u16,
    log: PathBuf,
}

impl Emulator {
    pub fn start() -> Result<Emulator> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let log = std::env::temp_dir().join(format!("dovetail-lambda-emulator-{port}.log"));
        let out = std::fs::File::create(&log)?;
        let child = command(&[
            "watch",
            "--only-lambda-apis",
            "--invoke-address",
            "127.0.0.1",
            "--invoke-port",
            &port.to_string(),
        ])?
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .context("starting cargo lambda watch")?;
        let mut emulator = Emulator { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = emulator.child.try_wait()? {
                bail!("cargo lambda watch exited ({status}):\n{}", emulator.log());
            }
            if Instant::now() > deadline {
                bail!("cargo lambda watch did not listen on {port} within 30 s:\n{}", emulator.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(emulator)
    }

    /// `AWS_LAMBDA_RUNTIME_API` for a function named `function`.
    pub fn runtime_api(&self, function: &str) -> String {
        format!("http://127.0.0.1:{}/.rt/{function}", self.port)
    }

    /// `cargo lambda invoke <function> --data-file <event>`, running: it exits once the function
    /// answered, its answer on stdout.
    pub fn invoke(&self, function: &str, event: &Path) -> Result<Child> {
        let port = self.port.to_string();
        let event = event.to_string_lossy();
        let args = [
            "invoke",
            function,
            "--invoke-address",
            "127.0.0.1",
            "--invoke-port",
            &port,
            "--data-file",
            &event,
            "--output-format",
            "json",
        ];
        command(&args)?
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running cargo lambda invoke")
    }

    pub fn log(&self) -> String {
        tail(&std::fs::read_to_string(&self.log).unwrap_or_default(), 40)
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The ELF machine of `path` (183 is AArch64), or an error saying what the file is not.
pub fn elf_machine(path: &Path) -> Result<u16> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() < 20 || &bytes[..4] != b"\x7fELF" {
        bail!("{} is not an ELF executable", path.display());
    }
    if bytes[4] != 2 || bytes[5] != 1 {
        bail!("{} is not a 64-bit little-endian ELF", path.display());
    }
    Ok(u16::from_le_bytes([bytes[18], bytes[19]]))
}
