//! The README's "Try the cluster side locally", run as written: its two marked code blocks
//! (`<!-- readme-test: try -->`, `<!-- readme-test: clean up -->`) are taken from README.md and
//! run by one bash (`set -euxo pipefail`) from the repository's root, with a pause between them
//! for the checks: the Helm chart's objects in the local control plane `local-cluster` started
//! (the CRDs — which only the chart installs there —, the webhook configuration, the admission
//! policy, the Deployment with the image reference the README pushed, its pod Pending for want of
//! a kubelet), and the image, both architectures, in the README's local registry. After the
//! second block, the control plane and the registry are gone and so are the control plane's files.
//! Beside it, `local-cluster`'s guards: one control plane per directory, none in a directory holding
//! files it did not make.
//!
//! The README's block of one-off installs (apt, pip, go install) is not run: it is what
//! tests/run-all.sh does. Every tool the blocks use is looked for first, and a missing one fails
//! with how to install it. The environment only places things: the control plane's directory
//! (`DOVETAIL_LOCAL_CLUSTER_DIR`), the registry's port (`DOVETAIL_REGISTRY`), the image's musl
//! builds (`DOVETAIL_IMAGE_TARGET_DIR`, as the image test) and Helm's own directories.

use std::fs::File;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use dovetail_tests::controlplane::{crd_established, Binaries};
use dovetail_tests::forwarder::free_port;
use dovetail_tests::helm::Helm;
use dovetail_tests::lambda::{cargo_lambda, workspace};
use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::image::{architectures, crane, inspect, require_buildah, target_dir};

const TRY: &str = "<!-- readme-test: try -->";
const CLEAN_UP: &str = "<!-- readme-test: clean up -->";
/// The README's release and namespace.
const NAMESPACE: &str = "dovetail";
/// A cold image build (both musl targets) takes about 12 minutes with one job.
const TRY_TIMEOUT: Duration = Duration::from_secs(40 * 60);
const CLEAN_UP_TIMEOUT: Duration = Duration::from_secs(120);

/// The lines of the fenced code block right after the line `marker` in `markdown`.
fn block_after(markdown: &str, marker: &str) -> Result<String> {
    let mut lines = markdown.lines().skip_while(|line| line.trim() != marker);
    ensure!(lines.next().is_some(), "README.md has no line {marker:?}");
    let fence = lines.next().unwrap_or_default();
    ensure!(fence.trim_start().starts_with("```"), "README.md: {marker:?} is not followed by a code block");
    let mut block = String::new();
    for line in lines {
        if line.trim_start().starts_with("```") {
            return Ok(block);
        }
        block.push_str(line);
        block.push('\n');
    }
    bail!("README.md: the code block after {marker:?} is not closed")
}

/// The README's bash, its output going to a log file; on drop (a failed check), whatever it left
/// running is stopped: the control plane through `local-cluster stop`, the rest (the registry) as
/// bash's process group.
struct Script {
    child: Child,
    stdin: Option<ChildStdin>,
    log: PathBuf,
    cluster_dir: PathBuf,
}

impl Script {
    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_else(|e| format!("(cannot read {}: {e})", self.log.display()))
    }

    /// Waits until `done` holds, failing when bash exits first or after `timeout`, with its output.
    fn wait(&mut self, what: &str, timeout: Duration, done: impl Fn(&mut Child) -> Result<bool>) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while !done(&mut self.child)? {
            if let Some(status) = self.child.try_wait()? {
                // It may have got there just before it exited.
                if done(&mut self.child)? {
                    break;
                }
                bail!("the README's commands exited ({status}) before {what}; their output:\n{}", self.output());
            }
            if Instant::now() > deadline {
                bail!(
                    "the README's commands had not reached {what} after {timeout:?}; their output:\n{}",
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_some() && !self.cluster_dir.exists() {
            return;
        }
        let _ = Command::new(env!("CARGO_BIN_EXE_local-cluster"))
            .args(["stop", "--dir"])
            .arg(&self.cluster_dir)
            .stdin(Stdio::null())
            .status();
        if let Ok(pgid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: kill(2) on bash's process group; it touches no memory.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
        let _ = self.child.wait();
    }
}

/// Fails, saying how to install it, for each tool the README's blocks run.
fn require_tools() -> Result<()> {
    let binaries = Binaries::locate()?;
    binaries.kubectl()?;
    binaries.require("kube-controller-manager")?;
    Helm::locate()?;
    crane()?;
    require_buildah()?;
    cargo_lambda()?;
    Ok(())
}

async fn admin_client(kubeconfig: &Path) -> Result<Client> {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).with_context(|| format!("reading {}", kubeconfig.display()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// The chart's objects, as the README installed them, and the image in its registry.
async fn check_installed(kubeconfig: &Path, registry: &str) -> Result<()> {
    let client = admin_client(kubeconfig).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in [
        "nodepools.dovetail.dev",
        "ec2nodeclasses.dovetail.dev",
        "nodeclaims.dovetail.dev",
        "nodeoverlays.dovetail.dev",
    ] {
        let crd = crds.get(name).await.with_context(|| format!("CRD {name}"))?;
        ensure!(crd_established(&crd), "CRD {name} is not Established: {:?}", crd.status);
    }
    let webhooks: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    webhooks.get("dovetail-forwarder").await.context("ValidatingWebhookConfiguration dovetail-forwarder")?;
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    policies.get("dovetail-nodeclaims").await.context("ValidatingAdmissionPolicy dovetail-nodeclaims")?;

    let image = format!("{registry}/dovetail-forwarder:{}", env!("CARGO_PKG_VERSION"));
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let deployment = deployments.get("dovetail-forwarder").await.context("Deployment dovetail/dovetail-forwarder")?;
    let containers = deployment.spec.and_then(|s| s.template.spec).map(|s| s.containers).unwrap_or_default();
    let images: Vec<Option<&str>> = containers.iter().map(|c| c.image.as_deref()).collect();
    ensure!(
        images == [Some(image.as_str())],
        "the Deployment runs {images:?}, not the image the README pushed, {image}"
    );

    // kube-controller-manager made its pod; kube-scheduler found no Node for it.
    let pods: Api<Pod> = Api::namespaced(client, NAMESPACE);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listed = pods.list(&ListParams::default()).await?;
        let unschedulable = listed.items.iter().any(|pod| {
            let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
            pod.metadata.name.as_deref().is_some_and(|n| n.starts_with("dovetail-forwarder-"))
                && conditions.is_some_and(|c| {
                    c.iter().any(|c| {
                        c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable")
                    })
                })
        });
        if unschedulable {
            break;
        }
        ensure!(Instant::now() < deadline, "no forwarder pod marked Unschedulable within 60 s: {:?}", listed.items);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let index = inspect(&crane()?, &["manifest", &image])?;
    ensure!(architectures(&index)? == ["amd64", "arm64"], "{image} in the registry: {index}");
    Ok(())
}

/// Whether nothing listens on `address` any more, within a few seconds (`kill` returns before the
/// process it signals has exited).
async fn refuses_connections(address: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(address).is_ok() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

#[tokio::test]
async fn readme_commands_build_the_image_and_install_the_chart_into_the_local_control_plane() -> Result<()> {
    require_tools()?;
    let readme = std::fs::read_to_string(workspace().join("README.md"))?;
    let (try_block, clean_up) = (block_after(&readme, TRY)?, block_after(&readme, CLEAN_UP)?);

    let dir = std::env::temp_dir().join(format!("dovetail-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let cluster_dir = dir.join("local-cluster");
    let registry = format!("127.0.0.1:{}", free_port()?);
    let checkpoint = dir.join("checkpoint");
    let log = dir.join("readme.log");
    // Between the blocks: a sign for the test, then a wait for its go-ahead on standard input.
    let script = format!("set -euxo pipefail\n{try_block}: >\"$DOVETAIL_README_CHECKPOINT\"\nread -r _\n{clean_up}");

    // One open file for both streams: one offset, their lines in order.
    let output = File::create(&log)?;
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(&script)
        .current_dir(workspace())
        .env("DOVETAIL_LOCAL_CLUSTER_DIR", &cluster_dir)
        .env("DOVETAIL_REGISTRY", &registry)
        .env("DOVETAIL_IMAGE_TARGET_DIR", target_dir()?)
        .env("DOVETAIL_README_CHECKPOINT", &checkpoint)
        .stdin(Stdio::piped())
        .stdout(output.try_clone()?)
        .stderr(output)
        .process_group(0);
    // Helm's configuration, cache and data directories of its own, as the Helm tests have.
    for (key, value) in Helm::locate()?.command().get_envs() {
        if let Some(value) = value {
            command.env(key, value);
        }
    }
    let started = Instant::now();
    let mut child = command.spawn().context("starting bash")?;
    let stdin = child.stdin.take();
    let mut script = Script { child, stdin, log, cluster_dir: cluster_dir.clone() };

    script.wait("the end of the first block", TRY_TIMEOUT, |_| Ok(checkpoint.exists()))?;
    let tried = started.elapsed();
    let kubeconfig = cluster_dir.join("controlplane/admin.kubeconfig");
    let config: serde_json::Value = serde_json::from_slice(&std::fs::read(&kubeconfig)?)?;
    let server = config["clusters"][0]["cluster"]["server"].as_str().context("the kubeconfig's server")?;
    let server_address = server.trim_start_matches("https://").to_string();
    if let Err(e) = check_installed(&kubeconfig, &registry).await {
        bail!("{e:#}\n\nthe README's output:\n{}", script.output());
    }

    let checks_done = Instant::now();
    writeln!(script.stdin.take().context("bash's standard input")?).context("resuming the README's commands")?;
    script.wait("its end", CLEAN_UP_TIMEOUT, |child| Ok(child.try_wait()?.is_some()))?;
    let status = script.child.wait()?;
    ensure!(status.success(), "the README's clean-up exited ({status}); their output:\n{}", script.output());
    let output = script.output();
    ensure!(!cluster_dir.exists(), "{} is still there after `local-cluster stop`", cluster_dir.display());
    ensure!(
        refuses_connections(&server_address).await,
        "kube-apiserver still answers on {server_address} after the clean-up"
    );
    ensure!(refuses_connections(&registry).await, "the registry still answers on {registry} after the clean-up");
    eprintln!("{output}");
    eprintln!(
        "README: first block {tried:.1?}, clean-up {:.1?}, {:.1?} in all",
        checks_done.elapsed(),
        started.elapsed()
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// `local-cluster` (the built binary) with `args`, its directory `dir`: its exit status and both
/// outputs.
fn local_cluster(dir: &Path, args: &[&str]) -> Result<(bool, String, String)> {
    let output = Command::new(env!("CARGO_BIN_EXE_local-cluster"))
        .args(args)
        .env("DOVETAIL_LOCAL_CLUSTER_DIR", dir)
        .stdin(Stdio::null())
        .output()
        .context("running local-cluster")?;
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    Ok((output.status.success(), text(&output.stdout), text(&output.stderr)))
}

#[test]
fn local_cluster_runs_one_control_plane_per_directory_and_leaves_foreign_files_alone() -> Result<()> {
    let root = std::env::temp_dir().join(format!("dovetail-local-cluster-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let foreign = root.join("foreign");
    std::fs::create_dir_all(&foreign)?;
    std::fs::write(foreign.join("notes.txt"), "mine")?;
    let (ok, _, stderr) = local_cluster(&foreign, &["start"])?;
    ensure!(!ok && stderr.contains(r#"holds "notes.txt", which local-cluster did not make"#), "{stderr}");
    ensure!(foreign.join("notes.txt").exists(), "the foreign file was removed");

    let dir = root.join("cluster");
    let (ok, _, stderr) = local_cluster(&dir, &["stop"])?;
    ensure!(!ok && stderr.contains("no local control plane was started from"), "{stderr}");
    let (ok, kubeconfig, stderr) = local_cluster(&dir, &["start"])?;
    ensure!(ok, "local-cluster start failed:\n{stderr}");
    let second = local_cluster(&dir, &["start"]);
    let (stopped, _, stop) = local_cluster(&dir, &["stop"])?;
    let (ok, _, second) = second?;
    ensure!(kubeconfig.trim() == dir.join("controlplane/admin.kubeconfig").display().to_string(), "{kubeconfig}");
    ensure!(!ok && second.contains("is running from") && second.contains("already"), "a second start: {second}");
    ensure!(stopped && !dir.exists(), "local-cluster stop: {stop}");
    std::fs::remove_dir_all(&root)?;
    Ok(())
}
