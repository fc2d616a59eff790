//! The forwarder's container image as `infra/image/build.sh` builds it (buildah running
//! `infra/image/Dockerfile`, no Docker daemon): one OCI image index with a linux/amd64 and a
//! linux/arm64 image, each configured as the Deployment (`infra/k8s/forwarder/deployment.yaml`)
//! runs it and labelled from the workspace's Cargo.toml, and small; the same index pushed to a
//! registry (`crane registry serve` on loopback); and the amd64 image's root
//! filesystem, unpacked, runs: its binary, chrooted into that root filesystem as the image's
//! user, serves `/healthz` and is the real kube-apiserver's admission webhook, ringing a doorbell
//! on moto's SQS for a pod that cannot be scheduled.
//!
//! Needs buildah (Debian's package), crane (tests/run-all.sh installs both) and root (chroot(2)). The
//! binaries are built in `$DOVETAIL_IMAGE_TARGET_DIR` (else `$HOME/.cache/dovetail/target-image`;
//! tests/run-all.sh builds them there in the background while the tests build).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use base64::Engine as _;
use dovetail_tests::controlplane::ControlPlane;
use dovetail_tests::forwarder::{connect, free_port, manifest, request, Forwarder};
use dovetail_tests::moto::Moto;
use hyper::body::Bytes;
use serde_json::{json, Value};

use crate::forwarder::{doorbell, settings, Doorbells, Registration};
use crate::kube::{create_pod, test_pod, unschedulable};

/// How CI (and a developer) installs what this test needs.
const INSTALL: &str = "apt-get install buildah (as tests/run-all.sh does)";
const CRANE_INSTALL: &str = "GOBIN=$HOME/.cache/dovetail/tools/crane go install \
                             github.com/google/go-containerregistry/cmd/crane@v0.20.3 (as tests/run-all.sh does)";
/// The most the compressed layers of one architecture's image may weigh: the binary is most of it.
const MAX_COMPRESSED_BYTES: u64 = 10_000_000;
/// Where the kubeconfig goes in the unpacked root filesystem (a mounted file, in a pod).
const KUBECONFIG_IN_IMAGE: &str = "run/dovetail/kubeconfig";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is in the workspace").to_path_buf()
}

/// Where the script's cargo builds: kept between runs, apart from the test build.
pub(crate) fn target_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("DOVETAIL_IMAGE_TARGET_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    Ok(PathBuf::from(home).join(".cache/dovetail/target-image"))
}

/// The crane tests/run-all.sh installs, or how to install it.
pub(crate) fn crane() -> Result<PathBuf> {
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    let crane = PathBuf::from(home).join(".cache/dovetail/tools/crane/crane");
    if !crane.is_file() {
        bail!("crane is not installed at {}: install it with {CRANE_INSTALL}", crane.display());
    }
    Ok(crane)
}

/// A registry in memory on a loopback port (`crane registry serve`), stopped when dropped.
struct Registry {
    crane: PathBuf,
    child: Child,
    address: String,
}

impl Registry {
    fn start() -> Result<Registry> {
        let crane = crane()?;
        let address = format!("127.0.0.1:{}", free_port()?);
        let child = Command::new(&crane)
            .args(["registry", "serve", "--address", &address])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting crane registry serve")?;
        let registry = Registry { crane, child, address };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(&registry.address).is_err() {
            if Instant::now() > deadline {
                bail!("crane registry serve did not listen on {} within 10 s", registry.address);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(registry)
    }

    /// What `crane <args>` prints about an image in it, as JSON.
    fn inspect(&self, args: &[&str]) -> Result<Value> {
        inspect(&self.crane, args)
    }
}

/// What `crane <args> --insecure` prints about an image in a local registry, as JSON.
pub(crate) fn inspect(crane: &Path, args: &[&str]) -> Result<Value> {
    let output = Command::new(crane).args(args).arg("--insecure").output()?;
    ensure!(output.status.success(), "crane {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// The architectures of an image index's manifests, sorted.
pub(crate) fn architectures(index: &Value) -> Result<Vec<&str>> {
    let mut architectures: Vec<&str> = index["manifests"]
        .as_array()
        .context("an image index's manifests")?
        .iter()
        .filter_map(|m| m["platform"]["architecture"].as_str())
        .collect();
    architectures.sort();
    Ok(architectures)
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `infra/image/build.sh --oci <dir>/oci --push <push> --insecure`: the OCI layout's directory.
fn build(dir: &Path, push: &str) -> Result<PathBuf> {
    require_buildah()?;
    let oci = dir.join("oci");
    let started = Instant::now();
    let mut command = Command::new("bash");
    command
        .arg(workspace().join("infra/image/build.sh"))
        .arg("--oci")
        .arg(&oci)
        .args(["--push", push, "--insecure"])
        .env("CARGO_TARGET_DIR", target_dir()?);
    dovetail_tests::completed(&mut command, "infra/image/build.sh")?;
    eprintln!("infra/image/build.sh built and pushed the image in {:.1?}", started.elapsed());
    Ok(oci)
}

/// Fails, saying how to install it, when buildah is missing.
pub(crate) fn require_buildah() -> Result<()> {
    if Command::new("buildah").arg("--version").output().is_err() {
        bail!("buildah is not installed: install it with {INSTALL}");
    }
    Ok(())
}

/// The blob `digest` (`sha256:<hex>`) of an OCI layout.
fn blob_path(oci: &Path, digest: &str) -> Result<PathBuf> {
    let (algorithm, hex) = digest.split_once(':').with_context(|| format!("digest {digest:?}"))?;
    Ok(oci.join("blobs").join(algorithm).join(hex))
}

fn json_blob(oci: &Path, digest: &str) -> Result<Value> {
    let path = blob_path(oci, digest)?;
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("{} is not JSON", path.display()))
}

/// One architecture's image: its configuration and its layers (blob digest, compressed size).
struct Image {
    config: Value,
    layers: Vec<(String, u64)>,
}

/// The images of the layout's one tag, `version`, by architecture.
fn images(oci: &Path, version: &str) -> Result<Vec<(String, Image)>> {
    let top: Value = serde_json::from_slice(&std::fs::read(oci.join("index.json"))?)?;
    let tags = top["manifests"].as_array().context("index.json: manifests")?;
    ensure!(tags.len() == 1, "index.json: one tag expected, found {tags:?}");
    assert_eq!(tags[0]["annotations"]["org.opencontainers.image.ref.name"], version, "the tag is the crate's version");
    assert_eq!(tags[0]["mediaType"], "application/vnd.oci.image.index.v1+json", "a multi-arch image index");
    let index = json_blob(oci, tags[0]["digest"].as_str().context("digest")?)?;
    let mut images = Vec::new();
    for entry in index["manifests"].as_array().context("the index's manifests")? {
        assert_eq!(entry["platform"]["os"], "linux");
        let arch = entry["platform"]["architecture"].as_str().context("architecture")?.to_string();
        let manifest = json_blob(oci, entry["digest"].as_str().context("digest")?)?;
        let config = json_blob(oci, manifest["config"]["digest"].as_str().context("config digest")?)?;
        let mut layers = Vec::new();
        for layer in manifest["layers"].as_array().context("layers")? {
            assert_eq!(layer["mediaType"], "application/vnd.oci.image.layer.v1.tar+gzip", "{arch}: a gzip layer");
            let digest = layer["digest"].as_str().context("layer digest")?.to_string();
            let size = layer["size"].as_u64().context("layer size")?;
            assert_eq!(std::fs::metadata(blob_path(oci, &digest)?)?.len(), size, "{arch}: {digest}'s size");
            layers.push((digest, size));
        }
        images.push((arch, Image { config, layers }));
    }
    Ok(images)
}

/// `key = "value"` of the workspace's Cargo.toml ([workspace.package]).
fn workspace_field(key: &str) -> Result<String> {
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml"))?;
    let prefix = format!("{key} = \"");
    let line = manifest.lines().find(|l| l.starts_with(&prefix)).with_context(|| format!("{key} in Cargo.toml"))?;
    Ok(line[prefix.len()..].trim_end_matches('"').to_string())
}

/// The image's configuration against the Deployment and the workspace.
fn check_config(arch: &str, config: &Value, deployment: &Value) -> Result<()> {
    assert_eq!(config["architecture"], arch);
    assert_eq!(config["os"], "linux");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let image = &config["config"];
    let user = format!("{}:{}", pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]);
    assert_eq!(image["User"], user, "{arch}: the Deployment's runAsUser:runAsGroup");
    assert_ne!(user.split(':').next(), Some("0"), "{arch}: a non-root user");
    assert_eq!(image["Entrypoint"], json!(["/dovetail-forwarder"]), "{arch}: entrypoint");
    let port = format!("{}/tcp", container["ports"][0]["containerPort"]);
    let exposed: Vec<&String> = image["ExposedPorts"].as_object().context("ExposedPorts")?.keys().collect();
    assert_eq!(exposed, [&port], "{arch}: exposes the Deployment's containerPort");
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true, "the image writes nothing");
    let labels = &image["Labels"];
    let expected = [
        ("title", "dovetail-forwarder".to_string()),
        ("version", env!("CARGO_PKG_VERSION").to_string()),
        ("source", workspace_field("repository")?),
        ("licenses", workspace_field("license")?),
    ];
    for (key, value) in expected {
        assert_eq!(labels[format!("org.opencontainers.image.{key}")], value.as_str(), "{arch}: label {key}");
    }
    Ok(())
}

/// Unpacks `image`'s layers into `rootfs` (ownership as recorded: the test runs as root).
fn unpack(oci: &Path, image: &Image, rootfs: &Path) -> Result<()> {
    std::fs::create_dir_all(rootfs)?;
    for (digest, _) in &image.layers {
        let status = Command::new("tar")
            .args(["--extract", "--gzip", "--numeric-owner", "--file"])
            .arg(blob_path(oci, digest)?)
            .arg("--directory")
            .arg(rootfs)
            .status()?;
        ensure!(status.success(), "tar could not unpack layer {digest}");
    }
    Ok(())
}

/// Every file of a directory tree, relative to it, sorted.
fn files(root: &Path) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                found.push(path.strip_prefix(root)?.display().to_string());
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The kubeconfig at `path` with its certificate files inlined, so it reads the same from inside
/// a root filesystem that does not have them.
fn self_contained_kubeconfig(path: &Path) -> Result<Value> {
    let mut kubeconfig: Value = serde_json::from_slice(&std::fs::read(path)?)?;
    let engine = base64::engine::general_purpose::STANDARD;
    let inline = |section: &mut Value, key: &str| -> Result<()> {
        if let Some(file) = section.as_object_mut().and_then(|s| s.remove(key)) {
            let file = file.as_str().with_context(|| format!("{key} is not a path"))?;
            let bytes = std::fs::read(file).with_context(|| format!("reading {file}"))?;
            section[format!("{key}-data")] = json!(engine.encode(bytes));
        }
        Ok(())
    };
    inline(&mut kubeconfig["clusters"][0]["cluster"], "certificate-authority")?;
    inline(&mut kubeconfig["users"][0]["user"], "client-certificate")?;
    inline(&mut kubeconfig["users"][0]["user"], "client-key")?;
    Ok(kubeconfig)
}

/// The image's entrypoint as its runtime starts it: chrooted into `rootfs`, as the image's user
/// and group (`uid:gid`), no supplementary groups.
fn chrooted(rootfs: &Path, entrypoint: &str, user: &str) -> Result<Command> {
    let (uid, gid) = user.split_once(':').with_context(|| format!("User {user:?} is not uid:gid"))?;
    let (uid, gid): (libc::uid_t, libc::gid_t) = (uid.parse()?, gid.parse()?);
    // SAFETY: geteuid only reads the process's credentials.
    ensure!(unsafe { libc::geteuid() } == 0, "running the image's root filesystem needs root (chroot(2))");
    let root = CString::new(rootfs.as_os_str().as_bytes())?;
    let mut command = Command::new(entrypoint);
    // SAFETY: chroot, chdir, setgroups, setgid and setuid are async-signal-safe system calls; the
    // path was allocated before the fork.
    unsafe {
        command.pre_exec(move || {
            let check = |result: libc::c_int| match result {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            };
            check(libc::chroot(root.as_ptr()))?;
            check(libc::chdir(c"/".as_ptr()))?;
            check(libc::setgroups(0, std::ptr::null()))?;
            check(libc::setgid(gid))?;
            check(libc::setuid(uid))
        });
    }
    Ok(command)
}

#[tokio::test]
async fn forwarder_image_is_multi_arch_small_and_runs_from_its_root_filesystem() -> Result<()> {
    let control_plane = ControlPlane::shared();
    let dir = control_plane.dir().join("image");
    let registry = Registry::start()?;
    let pushed = format!("{}/dovetail-forwarder", registry.address);
    let oci = build(&dir, &pushed)?;

    let deployment = manifest("deployment.yaml")?.into_iter().next().context("deployment.yaml is empty")?;
    let images = images(&oci, env!("CARGO_PKG_VERSION"))?;
    let mut arches: Vec<&str> = images.iter().map(|(arch, _)| arch.as_str()).collect();
    arches.sort();
    assert_eq!(arches, ["amd64", "arm64"]);
    for (arch, image) in &images {
        check_config(arch, &image.config, &deployment)?;
        let compressed: u64 = image.layers.iter().map(|(_, size)| size).sum();
        eprintln!("{arch}: {} layer(s), {compressed} bytes compressed (gzip)", image.layers.len());
        assert!(compressed <= MAX_COMPRESSED_BYTES, "{arch}: {compressed} bytes of compressed layers");
    }

    // Pushed under the crate's version as a tag: the same two images.
    let pushed = format!("{pushed}:{}", env!("CARGO_PKG_VERSION"));
    let index = registry.inspect(&["manifest", &pushed])?;
    assert_eq!(architectures(&index)?, arches, "{pushed}");
    for (arch, image) in &images {
        let config = registry.inspect(&["config", "--platform", &format!("linux/{arch}"), &pushed])?;
        assert_eq!(config["config"], image.config["config"], "{arch}: pushed and OCI layout differ");
        assert_eq!(config["rootfs"], image.config["rootfs"], "{arch}: pushed and OCI layout differ");
    }
    drop(registry);

    let (_, amd64) = images.iter().find(|(arch, _)| arch == "amd64").context("no amd64 image")?;
    let rootfs = dir.join("rootfs");
    unpack(&oci, amd64, &rootfs)?;
    // The binary and the CA bundle its SQS client reads, nothing else: no shell, no libc.
    assert_eq!(files(&rootfs)?, ["dovetail-forwarder", "etc/ssl/certs/ca-certificates.crt"]);
    let bundle = std::fs::read_to_string(rootfs.join("etc/ssl/certs/ca-certificates.crt"))?;
    assert!(bundle.matches("-----BEGIN CERTIFICATE-----").count() > 10, "a CA bundle: {} bytes", bundle.len());

    // Registered as the cluster's webhook, as its ServiceAccount, as in forwarder.rs.
    let admin = control_plane.client();
    let registration = Registration::new(control_plane, &admin, "image").await?;
    let Registration { ns, port, name, kubeconfig } = &registration;
    let inside = rootfs.join(KUBECONFIG_IN_IMAGE);
    std::fs::create_dir_all(inside.parent().context("a directory")?)?;
    std::fs::write(&inside, serde_json::to_vec(&self_contained_kubeconfig(kubeconfig)?)?)?;
    let moto = Moto::session()?;
    let mut doorbells = Doorbells::new(&moto).await?;

    let config = &amd64.config["config"];
    let entrypoint = config["Entrypoint"][0].as_str().context("Entrypoint")?;
    let user = config["User"].as_str().context("User")?;
    let command = chrooted(&rootfs, entrypoint, user)?;
    let in_image = Path::new("/").join(KUBECONFIG_IN_IMAGE);
    let settings = settings(control_plane, &in_image, name, ns, *port, (&moto.endpoint, &doorbells.url));
    let mut forwarder = Forwarder::start(command, &settings)?;
    let ca = forwarder.ca_bundle(&admin, name).await?;
    let status = std::fs::read_to_string(format!("/proc/{}/status", forwarder.pid()))?;
    let uid = user.split(':').next().unwrap_or_default();
    assert!(status.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some(uid)), "{status}");

    let mut client = connect(*port, &ca).await?;
    let (code, body) = request(&mut client, "GET", "/healthz", Bytes::new()).await?;
    assert_eq!((code, body.as_ref()), (200, b"ok\n".as_slice()), "GET /healthz");

    // One admission review round trip: the scheduler marks the pod Unschedulable, the API server
    // sends the status update to the webhook, the forwarder rings.
    create_pod(&admin, &test_pod(ns, "huge", "64", json!({}))?).await?;
    unschedulable(&admin, ns, "huge").await?;
    doorbell(&mut forwarder, &mut doorbells, json!({"pod": format!("{ns}/huge")})).await?;
    forwarder.check_running()?;

    drop(forwarder);
    registration.remove(&admin).await?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
