//! A local Kubernetes control plane: etcd, kube-apiserver and kube-scheduler on loopback ports,
//! with certificates generated per start, an admin kubeconfig, and Dovetail's CRDs installed.
//!
//! The binaries come from `tests/controlplane/build.sh`, which caches them under
//! `${DOVETAIL_CACHE_DIR:-$HOME/.cache/dovetail}/controlplane/<version>/` (the version is
//! `tests/controlplane/VERSION`). When they are missing, starting fails and says which ones and
//! how to build them: a test that needs the control plane never silently skips.
//!
//! There is no kubelet: tests act as the kubelet and the node lifecycle controller
//! ([`register_ready_node`]). kube-controller-manager runs only when a test asks for some of its
//! controllers ([`ControlPlane::start_with_controllers`]: the end-to-end tests want Deployments,
//! ReplicaSets, StatefulSets, Jobs and PodDisruptionBudget status); otherwise their work
//! (Deployments → Pods, namespace deletion, default service accounts, garbage collection) does
//! not happen. The ServiceAccount admission plugin is off so that Pods can be created without a
//! `default` ServiceAccount.
//!
//! Tests in one process share a control plane ([`ControlPlane::shared`]) and each uses its own
//! namespace ([`ControlPlane::namespace`]); [`ControlPlane::start`] gives a private one, stopped
//! when dropped. A watchdog process kills the components and removes the temporary directory if
//! the test process dies without dropping it (the shared one is never dropped: statics are not).
//!
//! The `local-cluster` binary (`tests/bin/local-cluster.rs`) runs one for a person to install
//! into ([`ControlPlane::start_in`]; README, "Try the cluster side locally").

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, NodeCondition, NodeStatus};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde::Deserialize as _;

/// The Kubernetes version `tests/controlplane/build.sh` builds (overridable with
/// `DOVETAIL_KUBE_VERSION`, for both).
const VERSION_FILE: &str = include_str!("../controlplane/VERSION");
const COMPONENTS: [&str; 3] = ["etcd", "kube-apiserver", "kube-scheduler"];
/// Started only for tests that ask for controllers.
const CONTROLLER_MANAGER: &str = "kube-controller-manager";
/// kube-controller-manager's controllers for workloads: Deployments, ReplicaSets, StatefulSets,
/// Jobs, PodDisruptionBudget status, and Pods left bound to a Node that is gone (the end-to-end
/// tests' set, and `local-cluster`'s).
pub const WORKLOAD_CONTROLLERS: &[&str] = &[
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "job-controller",
    "disruption-controller",
    "pod-garbage-collector-controller",
];
/// Field manager for what the harness applies.
const MANAGER: &str = "dovetail-tests";
const START_TIMEOUT: Duration = Duration::from_secs(90);
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Where the cached control-plane binaries are.
#[derive(Clone, Debug)]
pub struct Binaries {
    pub version: String,
    pub dir: PathBuf,
}

impl Binaries {
    /// Finds the binaries `tests/controlplane/build.sh` built, or says what is missing.
    pub fn locate() -> Result<Self> {
        let version = std::env::var("DOVETAIL_KUBE_VERSION").unwrap_or_else(|_| VERSION_FILE.trim().to_string());
        Self::in_cache(&cache_root()?, &version)
    }

    /// The binaries of `version` under the cache root `cache`, or what is missing.
    pub fn in_cache(cache: &Path, version: &str) -> Result<Self> {
        let dir = cache.join("controlplane").join(version);
        let missing: Vec<String> = COMPONENTS
            .iter()
            .map(|name| dir.join(name))
            .filter(|path| !is_executable(path))
            .map(|path| path.display().to_string())
            .collect();
        if !missing.is_empty() {
            bail!(
                "the local Kubernetes control plane {version} is not built: missing {}. \
                 Run tests/controlplane/build.sh (about 20 minutes cold; tests/run-all.sh does it)",
                missing.join(", ")
            );
        }
        Ok(Binaries { version: version.to_string(), dir })
    }

    pub fn path(&self, component: &str) -> PathBuf {
        self.dir.join(component)
    }

    /// kubectl of the same version, built by `tests/controlplane/build.sh` next to the control
    /// plane (a cache built before kubectl was added gets just it, in a few minutes).
    pub fn kubectl(&self) -> Result<PathBuf> {
        self.require("kubectl")
    }

    /// The path of `binary`, one that only some tests need (kubectl, kube-controller-manager),
    /// or what to do when a cache built before it was added lacks it.
    pub fn require(&self, binary: &str) -> Result<PathBuf> {
        let path = self.path(binary);
        if !is_executable(&path) {
            bail!(
                "{binary} {} is not built: missing {}. Run tests/controlplane/build.sh (tests/run-all.sh does it; \
                 a cache without it gets just it, in a few minutes)",
                self.version,
                path.display()
            );
        }
        Ok(path)
    }
}

/// Where `tests/run-all.sh` caches the tools the tests run (the control plane, Helm):
/// `$DOVETAIL_CACHE_DIR`, else `$HOME/.cache/dovetail`.
pub fn cache_root() -> Result<PathBuf> {
    match std::env::var_os("DOVETAIL_CACHE_DIR") {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => {
            let home =
                std::env::var_os("HOME").ok_or_else(|| anyhow!("HOME is not set: cannot find the tools' cache"))?;
            Ok(Path::new(&home).join(".cache/dovetail"))
        }
    }
}

pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A running etcd + kube-apiserver + kube-scheduler (unless started without) (+
/// kube-controller-manager when asked for).
pub struct ControlPlane {
    binaries: Binaries,
    dir: PathBuf,
    kubeconfig: PathBuf,
    server: String,
    config: Config,
    /// Started in order etcd, kube-apiserver, kube-scheduler; stopped in reverse.
    processes: Vec<Process>,
    watchdog: Option<Watchdog>,
    startup: Duration,
}

/// What a control plane runs besides etcd and kube-apiserver, and where its files go.
struct Setup<'a> {
    /// kube-controller-manager's `--controllers`; none: no kube-controller-manager.
    controllers: &'a [&'a str],
    scheduler: bool,
    /// Dovetail's CRDs (`infra/k8s/crds`), installed and Established before the start returns.
    crds: bool,
    /// The control plane's directory; none: a temporary one of its own.
    dir: Option<&'a Path>,
}

impl Default for Setup<'_> {
    fn default() -> Self {
        Setup { controllers: &[], scheduler: true, crds: true, dir: None }
    }
}

struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
    /// What it was started with, to start it again ([`ControlPlane::restart`]).
    args: Vec<String>,
}

impl ControlPlane {
    /// The control plane shared by every test in this process, started on first use. Panics, with
    /// the reason, when it cannot start (every test that asks fails with the same message).
    #[track_caller]
    pub fn shared() -> &'static ControlPlane {
        static SHARED: OnceLock<Result<ControlPlane, String>> = OnceLock::new();
        match SHARED.get_or_init(|| ControlPlane::start().map_err(|e| format!("{e:#}"))) {
            Ok(control_plane) => control_plane,
            Err(e) => panic!("local control plane: {e}"),
        }
    }

    /// Starts a private control plane, ready to use (`/readyz` ok, the scheduler holding its
    /// lease, CRDs established); it stops when dropped. Callable from sync code and from inside a
    /// Tokio runtime (the asynchronous part runs on a thread of its own).
    pub fn start() -> Result<ControlPlane> {
        ControlPlane::start_with_controllers(&[])
    }

    /// [`ControlPlane::start`], with kube-controller-manager running `controllers` (its
    /// `--controllers` names, e.g. `deployment-controller`) when there are some. Its node
    /// lifecycle controller is never among them: with no kubelet heartbeating, it would taint
    /// every Node unreachable.
    pub fn start_with_controllers(controllers: &[&str]) -> Result<ControlPlane> {
        ControlPlane::start_components(Setup { controllers, ..Setup::default() })
    }

    /// A control plane for a person rather than a test (the `local-cluster` binary): kube-scheduler
    /// and the [`WORKLOAD_CONTROLLERS`], its files in `dir` (which must not exist or be empty; it
    /// is removed when the control plane stops), and without Dovetail's CRDs: what is installed
    /// into it brings them (the Helm chart does).
    pub fn start_in(dir: &Path) -> Result<ControlPlane> {
        ControlPlane::start_components(Setup {
            controllers: WORKLOAD_CONTROLLERS,
            crds: false,
            dir: Some(dir),
            ..Setup::default()
        })
    }

    /// A private control plane without kube-scheduler: for the scale rig
    /// (`tests/harness/scale`), which writes pods bound or marked Unschedulable itself. With
    /// thousands of Nodes a scheduler would retry every pending pod on each Node change, CPU the
    /// rig's measurements share; and nothing would be bound behind the rig's back.
    pub fn start_without_scheduler() -> Result<ControlPlane> {
        ControlPlane::start_components(Setup { scheduler: false, ..Setup::default() })
    }

    fn start_components(setup: Setup) -> Result<ControlPlane> {
        let binaries = Binaries::locate()?;
        if !setup.controllers.is_empty() {
            binaries.require(CONTROLLER_MANAGER)?;
        }
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .context("building a Tokio runtime")?;
                    runtime.block_on(Self::start_with(binaries, &setup))
                })
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    async fn start_with(binaries: Binaries, setup: &Setup<'_>) -> Result<ControlPlane> {
        let begun = Instant::now();
        let mut attempt = 1;
        loop {
            let dir = match setup.dir {
                Some(dir) => empty_dir(dir)?,
                None => unique_temp_dir()?,
            };
            let watchdog = Watchdog::spawn(&dir)?;
            let mut control_plane = ControlPlane {
                kubeconfig: dir.join("admin.kubeconfig"),
                binaries: binaries.clone(),
                dir,
                server: String::new(),
                config: Config::new("https://127.0.0.1".parse().expect("static URI")),
                processes: Vec::new(),
                watchdog: Some(watchdog),
                startup: Duration::ZERO,
            };
            // On error the partly started control plane is dropped: processes stopped, dir
            // removed.
            match control_plane.boot(setup).await {
                Ok(()) => {
                    control_plane.startup = begun.elapsed();
                    return Ok(control_plane);
                }
                // Another process took a port between our choosing and binding it: choose again.
                Err(_) if attempt < 3 && control_plane.port_clash() => attempt += 1,
                Err(e) => return Err(e),
            }
        }
    }

    fn port_clash(&self) -> bool {
        self.processes
            .iter()
            .any(|process| fs::read_to_string(&process.log).is_ok_and(|log| log.contains("address already in use")))
    }

    async fn boot(&mut self, setup: &Setup<'_>) -> Result<()> {
        let [etcd_port, etcd_peer_port, api_port] = free_ports()?;
        let pki = Pki::generate(&self.dir)?;
        self.server = format!("https://127.0.0.1:{api_port}");
        write_kubeconfig(&self.kubeconfig, &self.server, &pki.ca, &pki.admin)?;
        let scheduler_kubeconfig = self.dir.join("scheduler.kubeconfig");
        write_kubeconfig(&scheduler_kubeconfig, &self.server, &pki.ca, &pki.scheduler)?;

        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let etcd_peer_url = format!("http://127.0.0.1:{etcd_peer_port}");
        let etcd_data = self.dir.join("etcd");
        self.spawn(
            "etcd",
            &[
                "--name=dovetail".into(),
                format!("--data-dir={}", etcd_data.display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={etcd_peer_url}"),
                format!("--initial-advertise-peer-urls={etcd_peer_url}"),
                format!("--initial-cluster=dovetail={etcd_peer_url}"),
                // Test data: durability buys nothing, fsync costs.
                "--unsafe-no-fsync".into(),
                // The scale rig's 100,000 pods, each written twice, with their history until the
                // apiserver compacts (every 5 minutes) pass the 2 GiB default quota; past it etcd
                // refuses every write (NOSPACE). Data files grow only as needed.
                "--quota-backend-bytes=8589934592".into(),
                "--log-level=warn".into(),
            ],
        )?;
        self.wait_for("etcd /health", || async move { etcd_healthy(etcd_port) }).await?;

        let path = |p: &Path| p.display().to_string();
        self.spawn(
            "kube-apiserver",
            &[
                format!("--etcd-servers={etcd_url}"),
                "--bind-address=127.0.0.1".into(),
                "--advertise-address=127.0.0.1".into(),
                format!("--secure-port={api_port}"),
                format!("--cert-dir={}", path(&self.dir.join("apiserver"))),
                format!("--tls-cert-file={}", path(&pki.serving.cert)),
                format!("--tls-private-key-file={}", path(&pki.serving.key)),
                format!("--client-ca-file={}", path(&pki.ca.cert)),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-account-key-file={}", path(&pki.service_account_public_key)),
                format!("--service-account-signing-key-file={}", path(&pki.service_account_key)),
                "--service-cluster-ip-range=10.96.0.0/16".into(),
                "--authorization-mode=Node,RBAC".into(),
                // No kube-controller-manager creates `default` ServiceAccounts.
                "--disable-admission-plugins=ServiceAccount".into(),
                "--enable-priority-and-fairness=false".into(),
                "--profiling=false".into(),
            ],
        )?;
        let options = KubeConfigOptions { context: Some("dovetail".into()), ..KubeConfigOptions::default() };
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)?;
        self.config =
            Config::from_custom_kubeconfig(kubeconfig, &options).await.context("loading the admin kubeconfig")?;
        let client = self.client();
        let api = &client;
        self.wait_for("kube-apiserver /readyz", || async move {
            let request = http_get("/readyz");
            matches!(api.request_text(request).await, Ok(body) if body.trim() == "ok")
        })
        .await?;

        if setup.scheduler {
            self.start_scheduler(&scheduler_kubeconfig, &client).await?;
        }

        if !setup.controllers.is_empty() {
            // As the admin: the tests' controllers need no narrower identity. No HTTPS endpoint
            // and no leader election (it is alone); it acts once it has synced its informers.
            self.spawn(
                CONTROLLER_MANAGER,
                &[
                    format!("--kubeconfig={}", path(&self.kubeconfig)),
                    format!("--controllers={}", setup.controllers.join(",")),
                    "--leader-elect=false".into(),
                    "--secure-port=0".into(),
                    "--use-service-account-credentials=false".into(),
                ],
            )?;
        }
        if setup.crds {
            install_crds(&client).await?;
        }
        Ok(())
    }

    /// kube-scheduler, ready once it holds its leader lease.
    async fn start_scheduler(&mut self, kubeconfig: &Path, client: &Client) -> Result<()> {
        self.spawn(
            "kube-scheduler",
            &[
                format!("--kubeconfig={}", kubeconfig.display()),
                "--leader-elect=true".into(),
                // No HTTPS endpoint: readiness is the leader lease, below.
                "--secure-port=0".into(),
            ],
        )?;
        let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
        let leases = &leases;
        self.wait_for("kube-scheduler to hold its leader lease", || async move {
            leases.get_opt("kube-scheduler").await.ok().flatten().is_some_and(|lease| {
                lease.spec.and_then(|spec| spec.holder_identity).is_some_and(|holder| !holder.is_empty())
            })
        })
        .await
    }

    fn spawn(&mut self, name: &'static str, args: &[String]) -> Result<()> {
        let log = self.dir.join(format!("{name}.log"));
        // Appended: a restarted component's log follows its first life's.
        let out = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .with_context(|| format!("creating {}", log.display()))?;
        let binary = self.binaries.path(name);
        let child = Command::new(&binary)
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            // Its own process group: stopped as a group, and out of reach of the terminal's ^C
            // (the watchdog stops it when the test process goes).
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let pid = child.id();
        self.processes.push(Process { name, child, log, args: args.to_vec() });
        if let Some(watchdog) = &mut self.watchdog {
            watchdog.watch(pid)?;
        }
        Ok(())
    }

    /// Probes `ready` every 50 ms until it holds; fails when a component exits or after
    /// [`START_TIMEOUT`], with the tail of the components' logs.
    async fn wait_for<F, Fut>(&mut self, what: &str, mut ready: F) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            // A probe that hangs counts as not ready, so that the deadline holds.
            if tokio::time::timeout(PROBE_TIMEOUT, ready()).await.unwrap_or(false) {
                return Ok(());
            }
            for process in &mut self.processes {
                if let Some(status) = process.child.try_wait()? {
                    let name = process.name;
                    bail!(
                        "{name} exited ({status}) while waiting for {what}; {name}'s log:\n{}",
                        self.log_tail(name, 40)
                    );
                }
            }
            if Instant::now() > deadline {
                let mut logs = String::new();
                for process in &self.processes {
                    let _ = write!(logs, "\n--- {}:\n{}", process.name, self.log_tail(process.name, 20));
                }
                bail!("timed out after {START_TIMEOUT:?} waiting for {what}{logs}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A client for the admin user (`system:masters`). Call it inside the Tokio runtime that will
    /// use the client: a client's connection pool lives on the runtime that made it, so the shared
    /// control plane hands each test (each `#[tokio::test]` has its own runtime) a new client.
    pub fn client(&self) -> Client {
        Client::try_from(self.config.clone()).expect("a client from the admin kubeconfig")
    }

    /// The client configuration behind [`ControlPlane::client`].
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The admin kubeconfig (client certificate for `admin` in `system:masters`); its
    /// certificates sit beside it, in the control plane's temporary directory.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A `kubectl` command (the cached binary of the control plane's version) with the admin
    /// kubeconfig, ready for arguments; fails when kubectl is not built, saying how to build it.
    pub fn kubectl(&self) -> Result<Command> {
        let mut command = Command::new(self.binaries.kubectl()?);
        command.arg(format!("--kubeconfig={}", self.kubeconfig.display())).stdin(Stdio::null());
        Ok(command)
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The Kubernetes version of the binaries.
    pub fn version(&self) -> &str {
        &self.binaries.version
    }

    /// The temporary directory holding the certificates, kubeconfigs, etcd's data and the logs;
    /// removed on drop.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The components' process ids (each leads its own process group).
    pub fn pids(&self) -> Vec<u32> {
        self.processes.iter().map(|p| p.child.id()).collect()
    }

    /// How long [`ControlPlane::start`] took.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// The last `lines` lines of a component's log (`etcd`, `kube-apiserver`, `kube-scheduler`),
    /// for failure messages.
    pub fn log_tail(&self, component: &str, lines: usize) -> String {
        let Some(process) = self.processes.iter().find(|p| p.name == component) else {
            return format!("({component} was not started)");
        };
        match fs::read_to_string(&process.log) {
            Ok(text) => {
                let all: Vec<&str> = text.lines().collect();
                all[all.len().saturating_sub(lines)..].join("\n")
            }
            Err(e) => format!("(cannot read {}: {e})", process.log.display()),
        }
    }

    /// Creates a namespace of its own for a test, `<prefix>-<n>`, and returns its name.
    /// (Namespaces are not deleted afterwards: without kube-controller-manager a deleted
    /// namespace stays Terminating; the whole control plane goes with the process.)
    pub async fn namespace(&self, client: &Client, prefix: &str) -> Result<String> {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        let name = format!("{prefix}-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let namespace: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name }
        }))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        Ok(name)
    }

    fn stop(&mut self) {
        while let Some(mut process) = self.processes.pop() {
            signal_group(&process.child, libc::SIGTERM);
            let deadline = Instant::now() + STOP_GRACE;
            loop {
                match process.child.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                    _ => {
                        signal_group(&process.child, libc::SIGKILL);
                        let _ = process.child.wait();
                        break;
                    }
                }
            }
            // Anything else left in its group.
            signal_group(&process.child, libc::SIGKILL);
        }
        let _ = fs::remove_dir_all(&self.dir);
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.dismiss();
        }
    }
}

impl ControlPlane {
    /// Kills component `name` (as a crash would: SIGKILL), leaves it down for `down`, starts it
    /// again as it was first started and waits until the API server is ready. Clients reconnect
    /// by themselves; watches end and are started again by whoever held them.
    pub async fn restart(&mut self, name: &'static str, down: Duration) -> Result<()> {
        let at = self.processes.iter().position(|p| p.name == name).with_context(|| format!("no {name} running"))?;
        let mut old = self.processes.remove(at);
        signal_group(&old.child, libc::SIGKILL);
        let _ = old.child.wait();
        tokio::time::sleep(down).await;
        self.spawn(name, &old.args)?;
        // Back in its place: components stop in the reverse of their start order.
        let new = self.processes.pop().expect("just started");
        self.processes.insert(at, new);
        let client = self.client();
        let api = &client;
        self.wait_for(&format!("{name} restarted: kube-apiserver /readyz"), || async move {
            matches!(api.request_text(http_get("/readyz")).await, Ok(body) if body.trim() == "ok")
        })
        .await
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("version", &self.binaries.version)
            .field("server", &self.server)
            .field("kubeconfig", &self.kubeconfig)
            .finish_non_exhaustive()
    }
}

fn signal_group(child: &Child, signal: libc::c_int) {
    let Ok(pgid) = libc::pid_t::try_from(child.id()) else {
        return;
    };
    // SAFETY: kill(2) with a negative pid signals that process group; it touches no memory.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

/// A `sh` in a process group of its own that holds the read end of a pipe only the test process
/// writes to. Each line it reads is a process group to kill; at end of file — the test process
/// has gone, however it went — it kills them all and removes the temporary directory. A clean
/// stop sends `done` first and it exits without killing anything.
struct Watchdog {
    child: Child,
    stdin: ChildStdin,
}

impl Watchdog {
    const SCRIPT: &'static str = r#"
groups=""
while read -r line; do
    [ "$line" = done ] && exit 0
    groups="$groups $line"
done
for g in $groups; do kill -9 "-$g" 2>/dev/null; done
rm -rf -- "$1"
"#;

    fn spawn(dir: &Path) -> Result<Self> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(Self::SCRIPT)
            .arg("dovetail-controlplane-watchdog")
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .context("starting the control plane's watchdog (sh)")?;
        let stdin = child.stdin.take().expect("piped stdin");
        Ok(Watchdog { child, stdin })
    }

    fn watch(&mut self, pgid: u32) -> Result<()> {
        writeln!(self.stdin, "{pgid}").context("telling the watchdog about a process")
    }

    fn dismiss(mut self) {
        let _ = writeln!(self.stdin, "done");
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

fn unique_temp_dir() -> Result<PathBuf> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = format!("dovetail-controlplane-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let dir = std::env::temp_dir().join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// `dir`, created, as an absolute path; refused when it holds anything already (it is removed
/// when the control plane stops).
fn empty_dir(dir: &Path) -> Result<PathBuf> {
    if fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        bail!(
            "{} is not empty: a control plane's directory is removed when it stops, so it must be new \
             (choose another, or remove it)",
            dir.display()
        );
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    fs::canonicalize(dir).with_context(|| format!("resolving {}", dir.display()))
}

/// Free loopback ports, all held until all are chosen so that they differ.
fn free_ports<const N: usize>() -> Result<[u16; N]> {
    let listeners = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()
        .context("finding free loopback ports")?;
    let mut ports = [0; N];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener.local_addr()?.port();
    }
    Ok(ports)
}

fn etcd_healthy(port: u16) -> bool {
    let probe = || -> std::io::Result<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(1)))?;
        stream.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        Ok(response)
    };
    probe().is_ok_and(|response| response.contains(r#""health":"true""#))
}

fn http_get(path: &str) -> http::Request<Vec<u8>> {
    http::Request::get(path).body(Vec::new()).expect("a GET request")
}

/// A certificate and its private key, as PEM files.
struct CertFiles {
    cert: PathBuf,
    key: PathBuf,
}

/// The control plane's keys: a CA, the apiserver's serving certificate, client certificates
/// for the admin and the scheduler, and the service-account signing key.
struct Pki {
    ca: CertFiles,
    serving: CertFiles,
    admin: CertFiles,
    scheduler: CertFiles,
    service_account_key: PathBuf,
    service_account_public_key: PathBuf,
}

impl Pki {
    fn generate(dir: &Path) -> Result<Pki> {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
            KeyUsagePurpose,
        };

        let pki = dir.join("pki");
        fs::create_dir_all(&pki)?;
        let write = |name: &str, pem: &str| -> Result<PathBuf> {
            let path = pki.join(name);
            fs::write(&path, pem).with_context(|| format!("writing {}", path.display()))?;
            Ok(path)
        };

        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, "dovetail-test-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca_key = KeyPair::generate()?;
        let ca_key_pem = ca_key.serialize_pem();
        let ca = CertifiedIssuer::self_signed(params, ca_key)?;
        let ca_files = CertFiles { cert: write("ca.crt", &ca.pem())?, key: write("ca.key", &ca_key_pem)? };

        let leaf = |name: &str,
                    common_name: &str,
                    organization: Option<&str>,
                    sans: &[&str],
                    usage: ExtendedKeyUsagePurpose|
         -> Result<CertFiles> {
            let mut params = CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
            params.distinguished_name.push(DnType::CommonName, common_name);
            if let Some(organization) = organization {
                params.distinguished_name.push(DnType::OrganizationName, organization);
            }
            params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
            params.extended_key_usages = vec![usage];
            let key = KeyPair::generate()?;
            let cert = params.signed_by(&key, &ca)?;
            Ok(CertFiles {
                cert: write(&format!("{name}.crt"), &cert.pem())?,
                key: write(&format!("{name}.key"), &key.serialize_pem())?,
            })
        };
        let serving = leaf(
            "apiserver",
            "kube-apiserver",
            None,
            &[
                "127.0.0.1",
                "localhost",
                "10.96.0.1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let admin = leaf("admin", "admin", Some("system:masters"), &[], ExtendedKeyUsagePurpose::ClientAuth)?;
        let scheduler = leaf("scheduler", "system:kube-scheduler", None, &[], ExtendedKeyUsagePurpose::ClientAuth)?;
        let service_account = KeyPair::generate()?;
        let service_account_key = write("sa.key", &service_account.serialize_pem())?;
        let service_account_public_key = write("sa.pub", &service_account.public_key_pem())?;
        Ok(Pki { ca: ca_files, serving, admin, scheduler, service_account_key, service_account_public_key })
    }
}

fn write_kubeconfig(path: &Path, server: &str, ca: &CertFiles, user: &CertFiles) -> Result<()> {
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "dovetail",
            "cluster": { "server": server, "certificate-authority": ca.cert },
        }],
        "users": [{
            "name": "dovetail",
            "user": { "client-certificate": user.cert, "client-key": user.key },
        }],
        "contexts": [{
            "name": "dovetail",
            "context": { "cluster": "dovetail", "user": "dovetail" },
        }],
        "current-context": "dovetail",
    });
    // JSON is YAML: every kubeconfig reader takes it.
    fs::write(path, serde_json::to_vec_pretty(&kubeconfig)?).with_context(|| format!("writing {}", path.display()))
}

/// The API resource and capabilities (scope) of a manifest document's `apiVersion` and `kind`,
/// found by discovery.
pub async fn resource_of(
    client: &Client,
    document: &serde_json::Value,
) -> Result<(kube::api::ApiResource, kube::discovery::ApiCapabilities)> {
    let kind = document["kind"].as_str().context("a document without a kind")?;
    let api_version = document["apiVersion"].as_str().context("a document without an apiVersion")?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    kube::discovery::pinned_kind(client, &gvk).await.with_context(|| format!("discovering {api_version} {kind}"))
}

/// The repository's `infra/k8s/crds/`.
pub fn crd_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/k8s/crds")
}

/// Applies every CRD under `infra/k8s/crds/` (server-side apply) and waits until each is
/// Established.
pub async fn install_crds(client: &Client) -> Result<()> {
    let dir = crd_dir();
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    files.retain(|path| path.extension().is_some_and(|ext| ext == "yaml" || ext == "yml"));
    files.sort();
    if files.is_empty() {
        bail!("no CRD files in {}", dir.display());
    }
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file)?;
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let value =
                serde_yaml_ng::Value::deserialize(document).with_context(|| format!("parsing {}", file.display()))?;
            if value.is_null() {
                continue;
            }
            let crd: CustomResourceDefinition = serde_yaml_ng::from_value(value)
                .with_context(|| format!("{} is not a CustomResourceDefinition", file.display()))?;
            let name = crd.metadata.name.clone().context("a CRD without a name")?;
            api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&crd))
                .await
                .with_context(|| format!("applying CRD {name} from {}", file.display()))?;
            names.push(name);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for name in names {
        while !crd_established(&api.get(&name).await?) {
            if Instant::now() > deadline {
                bail!("CRD {name} was not Established within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// Whether a CRD has condition `Established=True`.
pub fn crd_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Established" && c.status == "True"))
}

/// Registers a Node as a kubelet would (there is none): creates `node`, sets its status to Ready
/// with `allocatable` as both capacity and allocatable (e.g. `[("cpu", "4"), ("memory", "16Gi"),
/// ("pods", "110")]`), and lifts the not-ready taint as the node lifecycle controller would. The
/// Node's other taints (from `node.spec.taints`) stay.
pub async fn register_ready_node(client: &Client, node: Node, allocatable: &[(&str, &str)]) -> Result<Node> {
    let resources: std::collections::BTreeMap<String, Quantity> =
        allocatable.iter().map(|(resource, amount)| (resource.to_string(), Quantity(amount.to_string()))).collect();
    register_node(client, node, resources.clone(), resources).await
}

/// [`register_ready_node`] with a capacity and an allocatable of their own (what a kubelet
/// reports: allocatable is capacity less what it reserves).
pub async fn register_node(
    client: &Client,
    mut node: Node,
    capacity: std::collections::BTreeMap<String, Quantity>,
    allocatable: std::collections::BTreeMap<String, Quantity>,
) -> Result<Node> {
    let nodes: Api<Node> = Api::all(client.clone());
    let name = node.metadata.name.clone().context("a Node without a name")?;
    node.status = None;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        // Registering again after a failure past the create (as a kubelet retries): the Node is
        // there already, with this instance's providerID.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let existing = nodes.get(&name).await.with_context(|| format!("reading Node {name}"))?;
            let theirs = existing.spec.and_then(|s| s.provider_id);
            let ours = node.spec.as_ref().and_then(|s| s.provider_id.clone());
            if theirs != ours {
                bail!("Node {name} exists already, for {theirs:?} rather than {ours:?}");
            }
        }
        Err(e) => return Err(e).with_context(|| format!("creating Node {name}")),
    }
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let status = NodeStatus {
        capacity: Some(capacity),
        allocatable: Some(allocatable),
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: Some("KubeletReady".into()),
            message: Some("registered by the dovetail test harness".into()),
            last_heartbeat_time: Some(now.clone()),
            last_transition_time: Some(now),
        }]),
        ..NodeStatus::default()
    };
    let patch = serde_json::json!({ "status": status });
    let node = nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("marking Node {name} Ready"))?;
    // The apiserver's TaintNodesByCondition admission taints every new Node
    // `node.kubernetes.io/not-ready:NoSchedule`; kube-controller-manager's node lifecycle
    // controller lifts it once the Node is Ready. There is none: do its part. Others write the
    // Node meanwhile (Dovetail's registration: labels, a finalizer), so a conflict is retried
    // on the Node as it is now.
    let (mut node, mut attempt) = (node, 0);
    loop {
        attempt += 1;
        let taints = node.spec.as_ref().and_then(|spec| spec.taints.clone()).unwrap_or_default();
        if !taints.iter().any(|t| t.key == NOT_READY_TAINT) {
            return Ok(node);
        }
        let kept: Vec<_> = taints.into_iter().filter(|t| t.key != NOT_READY_TAINT).collect();
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": node.metadata.resource_version },
            "spec": { "taints": kept },
        });
        match nodes.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(patched) => return Ok(patched),
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < 10 => {
                node = nodes.get(&name).await.with_context(|| format!("reading Node {name}"))?;
            }
            Err(e) => return Err(e).with_context(|| format!("lifting the not-ready taint from Node {name}")),
        }
    }
}

const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    /// A temporary directory and a watchdog watching a `sleep` in its own process group.
    fn watched_sleeper() -> (PathBuf, Watchdog, Child) {
        let dir = unique_temp_dir().unwrap();
        let mut watchdog = Watchdog::spawn(&dir).unwrap();
        let process = Command::new("sleep").arg("600").process_group(0).spawn().expect("sleep");
        watchdog.watch(process.id()).unwrap();
        (dir, watchdog, process)
    }

    /// The test process going (its end of the pipe closes, however it dies) makes the watchdog
    /// kill the groups it watches and remove the directory.
    #[test]
    fn watchdog_cleans_up_when_the_test_process_goes() {
        let (dir, watchdog, mut process) = watched_sleeper();
        let Watchdog { mut child, stdin } = watchdog;
        drop(stdin);
        assert!(child.wait().unwrap().success());
        assert_eq!(process.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert!(!dir.exists(), "{} is still there", dir.display());
    }

    /// A chosen directory is made, and given as an absolute path; one holding anything is refused
    /// (it is removed at the stop), naming it.
    #[test]
    fn a_chosen_directory_must_be_new_or_empty() {
        let parent = unique_temp_dir().unwrap();
        let fresh = parent.join("a/b");
        assert_eq!(empty_dir(&fresh).unwrap(), fs::canonicalize(&fresh).unwrap());
        assert_eq!(empty_dir(&fresh).unwrap(), fs::canonicalize(&fresh).unwrap(), "an empty one is fine");
        fs::write(fresh.join("notes.txt"), "mine").unwrap();
        let refused = format!("{:#}", empty_dir(&fresh).unwrap_err());
        assert!(refused.contains(&format!("{} is not empty", fresh.display())), "{refused}");
        assert!(fresh.join("notes.txt").exists());
        fs::remove_dir_all(&parent).unwrap();
    }

    /// A clean stop dismisses it: nothing killed, nothing removed.
    #[test]
    fn a_dismissed_watchdog_leaves_everything() {
        let (dir, watchdog, mut process) = watched_sleeper();
        watchdog.dismiss();
        assert!(process.try_wait().unwrap().is_none());
        assert!(dir.exists());
        process.kill().unwrap();
        process.wait().unwrap();
        fs::remove_dir_all(&dir).unwrap();
    }
}
