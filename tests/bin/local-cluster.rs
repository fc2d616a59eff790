//! `local-cluster`: the integration tests' local Kubernetes control plane, for a person — etcd,
//! kube-apiserver, kube-scheduler and kube-controller-manager's workload controllers on loopback
//! ports, with an admin kubeconfig — to install Dovetail's Helm chart into and look at with
//! kubectl (README, "Try the cluster side locally"). It is the tests' code
//! ([`ControlPlane::start_in`]), not a second starter. There is no kubelet: pods stay Pending.
//!
//! ```text
//! local-cluster start [--dir DIR]   start it in the background; print the admin kubeconfig's path once ready
//! local-cluster stop [--dir DIR]    stop the one started from DIR, and remove DIR
//! local-cluster run [--dir DIR]     run it in the foreground until SIGINT (Ctrl-C), SIGTERM or SIGHUP
//! ```
//!
//! DIR is `$DOVETAIL_LOCAL_CLUSTER_DIR`, else `${DOVETAIL_CACHE_DIR:-$HOME/.cache/dovetail}/local-cluster`.
//! It holds `local-cluster.pid` (the process holding the control plane), `local-cluster.log` (its
//! messages, when started in the background) and `controlplane/` (certificates, kubeconfigs,
//! etcd's data, the components' logs). All of it goes when the control plane stops; if the holding
//! process is killed, the harness's watchdog stops the components and removes `controlplane/`.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use dovetail_tests::controlplane::{cache_root, ControlPlane};

const USAGE: &str = "usage: local-cluster start|stop|run [--dir DIR]
  start   start the local control plane in the background; print the admin kubeconfig's path once ready
  stop    stop the one started from DIR, and remove DIR
  run     run it in the foreground until SIGINT (Ctrl-C), SIGTERM or SIGHUP
DIR: $DOVETAIL_LOCAL_CLUSTER_DIR, else ~/.cache/dovetail/local-cluster";
const PID_FILE: &str = "local-cluster.pid";
const LOG_FILE: &str = "local-cluster.log";
const CONTROL_PLANE_DIR: &str = "controlplane";
/// Each component gets 5 s to stop before it is killed; four of them.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

fn main() -> ExitCode {
    match main_with(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("local-cluster: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn main_with(args: Vec<String>) -> Result<()> {
    let (command, dir) = match args.as_slice() {
        [command] => (command.as_str(), default_dir()?),
        [command, flag, dir] if flag == "--dir" => (command.as_str(), PathBuf::from(dir)),
        _ => bail!("{USAGE}"),
    };
    match command {
        "start" => start(&dir),
        "stop" => stop(&dir),
        "run" => run(&dir),
        _ => bail!("unknown command {command:?}\n{USAGE}"),
    }
}

fn default_dir() -> Result<PathBuf> {
    match std::env::var_os("DOVETAIL_LOCAL_CLUSTER_DIR") {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => Ok(cache_root()?.join("local-cluster")),
    }
}

/// Runs the control plane in this process until a stop signal, then stops it and removes `dir`.
fn run(dir: &Path) -> Result<()> {
    // Before any thread starts, so that every thread inherits the mask and the signals wait for
    // `sigwait` below, whenever they come (a child process's mask is reset by `Command`).
    let signals = block_stop_signals();
    prepare(dir)?;
    let pid_file = dir.join(PID_FILE);
    fs::write(&pid_file, format!("{}\n", std::process::id()))
        .with_context(|| format!("writing {}", pid_file.display()))?;
    let control_plane = match ControlPlane::start_in(&dir.join(CONTROL_PLANE_DIR)) {
        Ok(control_plane) => control_plane,
        Err(e) => {
            let _ = fs::remove_file(&pid_file);
            return Err(e.context("starting the local control plane"));
        }
    };
    // The summary first (stderr), then the kubeconfig's path (stdout): `start` reads the path as
    // the sign of readiness, and the summary from the log.
    eprintln!(
        "local-cluster: Kubernetes {} ready at {} after {:.1?}: etcd, kube-apiserver, kube-scheduler, \
         kube-controller-manager (no kubelet: pods stay Pending)\n  kubeconfig: {}\n  logs: {}/*.log\n  \
         stop: cargo run -p dovetail-tests --bin local-cluster -- stop{}",
        control_plane.version(),
        control_plane.server(),
        control_plane.startup_time(),
        control_plane.kubeconfig().display(),
        control_plane.dir().display(),
        match std::env::var_os("DOVETAIL_LOCAL_CLUSTER_DIR") {
            Some(_) => String::new(),
            None => format!(" --dir {}", dir.display()),
        },
    );
    println!("{}", control_plane.kubeconfig().display());
    std::io::stdout().flush()?;

    let signal = wait_for_signal(&signals);
    eprintln!("local-cluster: signal {signal}: stopping");
    drop(control_plane);
    fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    eprintln!("local-cluster: stopped; {} removed", dir.display());
    Ok(())
}

/// Starts `local-cluster run` in a session of its own, its messages in DIR's log, and returns
/// once it is ready (printing the kubeconfig's path) or has failed (printing its log).
fn start(dir: &Path) -> Result<()> {
    prepare(dir)?;
    let log_path = dir.join(LOG_FILE);
    let log = File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let mut command = Command::new(std::env::current_exe().context("finding local-cluster's own path")?);
    command.arg("run").arg("--dir").arg(dir).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(log);
    // SAFETY: setsid(2) is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| match libc::setsid() {
            -1 => Err(std::io::Error::last_os_error()),
            _ => Ok(()),
        });
    }
    let mut child = command.spawn().context("starting `local-cluster run` in the background")?;
    let mut kubeconfig = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout"))
        .read_line(&mut kubeconfig)
        .context("reading `local-cluster run`'s output")?;
    let messages = fs::read_to_string(&log_path).unwrap_or_default();
    if kubeconfig.trim().is_empty() {
        let status = child.wait()?;
        bail!("the local control plane did not start ({status}); its log, {}:\n{messages}", log_path.display());
    }
    eprint!("{messages}");
    eprintln!("  running in the background as process {}; its messages: {}", child.id(), log_path.display());
    println!("{}", kubeconfig.trim());
    Ok(())
}

/// Stops the control plane started from `dir` (SIGTERM to its process, which stops the
/// components and removes `dir`) and waits until it has.
fn stop(dir: &Path) -> Result<()> {
    let pid_file = dir.join(PID_FILE);
    let Some(pid) = recorded_pid(dir)? else {
        bail!("no local control plane was started from {} (no {PID_FILE} there)", dir.display());
    };
    if !holds_control_plane(pid) {
        remove_dir(dir)?;
        eprintln!("local-cluster: process {pid} of {} was not running; {} removed", pid_file.display(), dir.display());
        return Ok(());
    }
    let Ok(raw) = libc::pid_t::try_from(pid) else { bail!("{}: pid {pid} is out of range", pid_file.display()) };
    // SAFETY: kill(2) sends a signal; it touches no memory.
    if unsafe { libc::kill(raw, libc::SIGTERM) } != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("signalling process {pid}"));
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    while holds_control_plane(pid) {
        if Instant::now() > deadline {
            bail!("process {pid} did not stop within {STOP_TIMEOUT:?} of SIGTERM: kill -9 {pid}, then run stop again");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    remove_dir(dir)?;
    eprintln!("local-cluster: stopped; {} removed", dir.display());
    Ok(())
}

/// Makes `dir` ready for a control plane: refused while one runs from it or when it holds files
/// `local-cluster` did not make; what a stopped or killed one left is removed.
fn prepare(dir: &Path) -> Result<()> {
    if let Some(pid) = recorded_pid(dir)? {
        if holds_control_plane(pid) {
            bail!(
                "a local control plane is running from {} already (process {pid}): use it, or stop it with \
                 `cargo run -p dovetail-tests --bin local-cluster -- stop`",
                dir.display()
            );
        }
    }
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries {
            let name = entry?.file_name();
            if ![PID_FILE, LOG_FILE, CONTROL_PLANE_DIR].iter().any(|ours| name == *ours) {
                bail!(
                    "{} holds {name:?}, which local-cluster did not make: choose another directory \
                     (--dir or DOVETAIL_LOCAL_CLUSTER_DIR)",
                    dir.display()
                );
            }
        }
    }
    let _ = fs::remove_file(dir.join(PID_FILE));
    let leftover = dir.join(CONTROL_PLANE_DIR);
    if leftover.exists() {
        fs::remove_dir_all(&leftover).with_context(|| format!("removing {}", leftover.display()))?;
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}

fn recorded_pid(dir: &Path) -> Result<Option<u32>> {
    let path = dir.join(PID_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text.trim().parse().with_context(|| format!("{} holds {text:?}", path.display()))?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Whether process `pid` is alive (not a zombie nobody has reaped yet) and is a `local-cluster`
/// (not another process that reused the pid of one that was killed).
fn holds_control_plane(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // `pid (comm) state …`: the name may hold spaces and parentheses, the state follows the last `)`.
    let state = stat.rfind(')').and_then(|at| stat[at + 1..].split_whitespace().next());
    if matches!(state, None | Some("Z" | "X")) {
        return false;
    }
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else { return false };
    let program = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    Path::new(std::ffi::OsStr::new(std::str::from_utf8(program).unwrap_or_default()))
        .file_name()
        .is_some_and(|name| name == "local-cluster")
}

fn remove_dir(dir: &Path) -> Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", dir.display()))
        }
        _ => Ok(()),
    }
}

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread (and the threads it starts from now on).
fn block_stop_signals() -> libc::sigset_t {
    // SAFETY: the set is initialised by sigemptyset before use; pthread_sigmask only changes this
    // thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, signal);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Waits for one of the blocked signals; its number.
fn wait_for_signal(set: &libc::sigset_t) -> libc::c_int {
    let mut signal = 0;
    // SAFETY: sigwait reads the set and writes the signal number; both outlive the call.
    unsafe { libc::sigwait(set, &mut signal) };
    signal
}
