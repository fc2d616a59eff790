//! A local AWS endpoint: moto's server (PyPI `moto[server]`) from the venv at
//! `$HOME/.cache/dovetail/venv` (which `tests/run-all.sh` creates), on a free loopback port.
//!
//! [`Moto::session`] hands each test a server of its own, its state reset (`POST /moto-api/reset`),
//! so tests neither see each other's resources nor need unique names. Servers are pooled per test
//! binary: a session returns its server for the next one, and at most [`sessions`] run at once
//! (a server is a Python process; the tests behind them start control planes). Each server runs
//! moto_server's own entry point under a watchdog that exits when the test process's end of a pipe
//! closes, so it never outlives the tests; `moto_launcher.py` says why it also makes DynamoDB's
//! operations atomic (as DynamoDB's conditional writes are) and replaces moto's lookup of an EC2
//! resource's tags, and adds a test double of EC2's capacity reservations
//! (`CapacityReservationsTestDouble`: CreateCapacityReservation, DescribeCapacityReservations and
//! fleets launched into a reservation), which moto 5.x does not have.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;

/// The region every test client uses.
pub const REGION: &str = "us-east-1";

/// How CI (and a developer) installs moto.
pub const INSTALL: &str = "python3 -m venv \"$HOME/.cache/dovetail/venv\" && \
                           \"$HOME/.cache/dovetail/venv/bin/pip\" install 'moto[server]==5.2.5' (as tests/run-all.sh does)";

/// The venv's python, which must have moto's server installed.
pub fn python() -> Result<PathBuf> {
    let home = std::env::var_os("HOME").ok_or_else(|| anyhow!("HOME is not set"))?;
    let venv = PathBuf::from(home).join(".cache/dovetail/venv");
    let python = venv.join("bin/python");
    if !venv.join("bin/moto_server").is_file() || !python.is_file() {
        bail!("moto_server is not installed in {}: install it with {INSTALL}", venv.display());
    }
    Ok(python)
}

/// A running moto server.
pub struct Moto {
    child: Mutex<Child>,
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    port: u16,
}

/// One test's exclusive use of a pooled server, its state reset; the server goes back to the pool
/// when the session drops.
pub struct Session {
    pub moto: &'static Moto,
}

impl Drop for Session {
    fn drop(&mut self) {
        POOL.end_session(Some(self.moto));
    }
}

/// How many moto sessions run at once in one test binary: `DOVETAIL_MOTO_SESSIONS`, 3 unless set.
/// Most tests behind a session wait on a control plane, a scheduled sweep or an SQS delay rather
/// than compute, so a few at once fill two cores; one at a time left the integration binary's
/// run as long as the sum of its moto tests.
pub fn sessions() -> usize {
    std::env::var("DOVETAIL_MOTO_SESSIONS").ok().and_then(|s| s.parse().ok()).filter(|n| *n > 0).unwrap_or(3)
}

/// The binary's servers: those not in a session, and how many sessions run.
struct Pool {
    state: Mutex<PoolState>,
    freed: Condvar,
}

struct PoolState {
    idle: Vec<&'static Moto>,
    running: usize,
}

static POOL: Pool = Pool { state: Mutex::new(PoolState { idle: Vec::new(), running: 0 }), freed: Condvar::new() };

impl Pool {
    /// A session ends: its server (if one was started) waits for the next, and a test waiting for
    /// a turn may go.
    fn end_session(&self, server: Option<&'static Moto>) {
        let mut pool = self.state.lock().unwrap_or_else(|e| e.into_inner());
        pool.idle.extend(server);
        pool.running -= 1;
        self.freed.notify_one();
    }
}

impl std::ops::Deref for Session {
    type Target = Moto;
    fn deref(&self) -> &Moto {
        self.moto
    }
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// moto_server's `main` under a watchdog (the process exits when its stdin closes), DynamoDB's
/// operations one at a time, EC2's tags looked up by resource id (the file says why).
const LAUNCHER: &str = include_str!("moto_launcher.py");

impl Moto {
    /// Starts a server and waits until it answers (30 s at most); fails naming the install command
    /// when moto is missing, and with moto's own output when it does not come up.
    pub fn start() -> Result<Moto> {
        let python = python()?;
        let port = free_port()?;
        let log = std::env::temp_dir().join(format!("dovetail-moto-{port}.log"));
        let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new(&python)
            .args(["-c", LAUNCHER, "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::piped())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting moto_server with {}; install it with {INSTALL}", python.display()))?;
        let moto = Moto { child: Mutex::new(child), endpoint: format!("http://127.0.0.1:{port}"), port };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if moto.request("GET", "/moto-api/").is_ok_and(|status| status < 500) {
                return Ok(moto);
            }
            let exited = moto.child.lock().unwrap_or_else(|e| e.into_inner()).try_wait()?;
            if exited.is_some() || Instant::now() > deadline {
                let output = std::fs::read_to_string(&log).unwrap_or_default();
                bail!("moto_server on port {port} did not come up ({exited:?}); its output:\n{output}\ninstall: {INSTALL}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A server for one test: waits while [`sessions`] run, takes an idle server (or starts one;
    /// pooled servers live as long as the process), and resets its state.
    pub fn session() -> Result<Session> {
        let idle = {
            let mut pool = POOL.state.lock().unwrap_or_else(|e| e.into_inner());
            while pool.running >= sessions() {
                pool = POOL.freed.wait(pool).unwrap_or_else(|e| e.into_inner());
            }
            pool.running += 1;
            pool.idle.pop()
        };
        let moto = match idle {
            Some(moto) => moto,
            None => match Moto::start() {
                Ok(moto) => Box::leak(Box::new(moto)),
                Err(e) => {
                    POOL.end_session(None);
                    return Err(e);
                }
            },
        };
        // From here the session owns the server: dropping it (on a failed reset too) returns it.
        let session = Session { moto };
        session.moto.reset()?;
        Ok(session)
    }

    /// Forgets every resource (`POST /moto-api/reset`).
    pub fn reset(&self) -> Result<()> {
        let status = self.request("POST", "/moto-api/reset")?;
        if status != 200 {
            bail!("moto reset answered HTTP {status}");
        }
        Ok(())
    }

    /// A bodiless HTTP/1.1 request to the server; its status code.
    fn request(&self, method: &str, path: &str) -> Result<u16> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head)?;
        let text = String::from_utf8_lossy(&head);
        text.get(9..12).and_then(|s| s.parse().ok()).ok_or_else(|| anyhow!("not an HTTP answer: {text:?}"))
    }

    /// SDK configuration for this server: its endpoint, the test region, dummy credentials.
    pub async fn sdk_config(&self) -> SdkConfig {
        aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .endpoint_url(&self.endpoint)
            .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
            .load()
            .await
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// What the functions find in AWS before they run, made in moto by the tests and the scale rig.
pub mod fixtures {
    use anyhow::{Context, Result};
    use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};

    /// `tags` for a resource created with them.
    pub fn tags(resource: ResourceType, tags: &[(&str, &str)]) -> TagSpecification {
        let mut spec = TagSpecification::builder().resource_type(resource);
        for (k, v) in tags {
            spec = spec.tags(Tag::builder().key(*k).value(*v).build());
        }
        spec.build()
    }

    /// The node role `name` in moto's IAM (assumable by EC2), which the EC2NodeClasses of the
    /// tests name as their `role`: Dovetail puts it in the class's instance profile. Made once
    /// per moto; a second call finds it there.
    pub async fn node_role(iam: &aws_sdk_iam::Client, name: &str) -> Result<()> {
        let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
        match iam.create_role().role_name(name).assume_role_policy_document(trust).send().await {
            Ok(_) => Ok(()),
            Err(e) if e.as_service_error().is_some_and(|e| e.is_entity_already_exists_exception()) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("creating the node role {name}")),
        }
    }

    /// The cluster `name` in moto's EKS: DescribeCluster then answers with an endpoint, a CA and
    /// the Kubernetes `version`.
    pub async fn eks_cluster(eks: &aws_sdk_eks::Client, name: &str, version: &str) -> Result<()> {
        eks.create_cluster()
            .name(name)
            .version(version)
            .role_arn("arn:aws:iam::123456789012:role/eks")
            .resources_vpc_config(aws_sdk_eks::types::VpcConfigRequest::builder().build())
            .kubernetes_network_config(
                aws_sdk_eks::types::KubernetesNetworkConfigRequest::builder()
                    .service_ipv4_cidr("10.100.0.0/16")
                    .build(),
            )
            .send()
            .await
            .with_context(|| format!("creating the EKS cluster {name}"))?;
        Ok(())
    }

    /// Publishes `images` (architecture, image id) as EKS's recommended AL2023 AMIs for Kubernetes
    /// `version` under the SSM `prefix`: what the `al2023@latest` alias resolves.
    pub async fn al2023_images(
        ssm: &aws_sdk_ssm::Client,
        prefix: &str,
        version: &str,
        images: &[(&str, &str)],
    ) -> Result<()> {
        let standard: Vec<(&str, &str, &str)> = images.iter().map(|(arch, id)| (*arch, "standard", *id)).collect();
        al2023_variant_images(ssm, prefix, version, "latest", &standard).await
    }

    /// Publishes `images` (architecture, variant `standard`/`nvidia`/`neuron`, image id) as EKS's
    /// AL2023 AMIs of `release` (`latest`: the recommended ones; else `v20240807`) for Kubernetes
    /// `version` under the SSM `prefix`, where AWS publishes them.
    pub async fn al2023_variant_images(
        ssm: &aws_sdk_ssm::Client,
        prefix: &str,
        version: &str,
        release: &str,
        images: &[(&str, &str, &str)],
    ) -> Result<()> {
        for (arch, variant, id) in images {
            let leaf = if release == "latest" {
                "recommended".to_string()
            } else {
                format!("amazon-eks-node-al2023-{arch}-{variant}-{version}-{release}")
            };
            let name = format!(
                "{prefix}/aws/service/eks/optimized-ami/{version}/amazon-linux-2023/{arch}/{variant}/{leaf}/image_id"
            );
            publish(ssm, &name, id).await?;
        }
        Ok(())
    }

    /// Publishes `images` (architecture, `nvidia` build or not, image id) as Bottlerocket's AMIs
    /// of `release` (`latest`, or a version such as `1.20.3`) for Kubernetes `version` under the
    /// SSM `prefix`, where AWS publishes them (`aws-k8s-<version>[-nvidia]/<arch>/<release>`).
    pub async fn bottlerocket_images(
        ssm: &aws_sdk_ssm::Client,
        prefix: &str,
        version: &str,
        release: &str,
        images: &[(&str, bool, &str)],
    ) -> Result<()> {
        for (arch, nvidia, id) in images {
            let flavour = if *nvidia { "-nvidia" } else { "" };
            let name =
                format!("{prefix}/aws/service/bottlerocket/aws-k8s-{version}{flavour}/{arch}/{release}/image_id");
            publish(ssm, &name, id).await?;
        }
        Ok(())
    }

    /// Publishes `value` as the SSM parameter `name` (an `ssmParameter` AMI selector reads it).
    pub async fn parameter(ssm: &aws_sdk_ssm::Client, name: &str, value: &str) -> Result<()> {
        publish(ssm, name, value).await
    }

    /// Where AWS publishes its latest EKS-optimized Windows Server Core image of `year` (`2022`) for
    /// Kubernetes `version`, under the SSM `prefix`: what the `windows<year>@latest` alias resolves.
    pub fn windows_parameter(prefix: &str, year: &str, version: &str) -> String {
        format!("{prefix}/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{version}/image_id")
    }

    /// Publishes `image` as that Windows image ([`windows_parameter`]).
    pub async fn windows_image(
        ssm: &aws_sdk_ssm::Client,
        prefix: &str,
        year: &str,
        version: &str,
        image: &str,
    ) -> Result<()> {
        publish(ssm, &windows_parameter(prefix, year, version), image).await
    }

    /// The Windows Server release (`2022`) whose EKS image [`windows_image`] published as `image`
    /// under `prefix`, for any Kubernetes version: how the end-to-end test kubelet tells which
    /// Windows an instance runs (a real one asks the OS).
    pub async fn windows_year_of(ssm: &aws_sdk_ssm::Client, prefix: &str, image: &str) -> Result<Option<String>> {
        let path = format!("{prefix}/aws/service/ami-windows-latest");
        let mut pages = ssm.get_parameters_by_path().path(&path).recursive(true).into_paginator().send();
        while let Some(page) = pages.next().await {
            for p in page.with_context(|| format!("listing {path}"))?.parameters() {
                if p.value() != Some(image) {
                    continue;
                }
                let name = p.name().unwrap_or_default();
                let year = name.split("Windows_Server-").nth(1).and_then(|rest| rest.split('-').next());
                if let Some(year) = year {
                    return Ok(Some(year.to_string()));
                }
            }
        }
        Ok(None)
    }

    async fn publish(ssm: &aws_sdk_ssm::Client, name: &str, value: &str) -> Result<()> {
        ssm.put_parameter()
            .name(name)
            .value(value)
            .r#type(aws_sdk_ssm::types::ParameterType::String)
            .send()
            .await
            .with_context(|| format!("publishing {name}"))?;
        Ok(())
    }
}
