//! The test kubelet (and the bits of the cloud controller manager a node needs): every instance
//! of the cluster that moto runs joins as a Node the way the EKS AMI's nodeadm would make it —
//! labels, taints and maxPods read from the user data Dovetail generated (its NodeConfig's
//! kubelet flags and config), capacity from the instance type, architecture from the image
//! Dovetail chose, `providerID` `aws:///<zone>/<instance-id>` — and turns Ready. Pods the
//! scheduler binds to its nodes are started (Running and Ready); pods being deleted are finished
//! off, as a kubelet does once their containers stop.
//!
//! An instance whose user data is the Windows PowerShell bootstrap joins as the Windows AMI's
//! `Start-EKSBootstrap.ps1` makes it: labels, taints and maxPods from its `-KubeletExtraArgs`, and
//! what a Windows kubelet labels its Node with itself, `kubernetes.io/os=windows` and
//! `node.kubernetes.io/windows-build`. A real kubelet reads the build from the OS; this one reads
//! which Windows Server the instance's image is from the SSM parameter the image was published
//! under (`…/ami-windows-latest/Windows_Server-<year>-…`, seeded by the test as AWS publishes
//! it), and the release's build from the core's table.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use aws_sdk_ec2::types::{Filter, Instance, InstanceAttributeName};
use base64::Engine as _;
use dovetail_aws::ec2::userdata::{user_parts, windows_bootstrap_args, NODECONFIG_TYPE};
use dovetail_core::catalog::embedded;
use dovetail_core::labels;
use dovetail_core::model::{KubeletConfig, NodeOs, Taint, TaintEffect};
use dovetail_tests::controlplane::register_node;
use dovetail_tests::moto::fixtures;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};

use super::Shared;
use crate::aws::{CLUSTER, SSM_PREFIX};

pub struct Kubelet {
    admin: Client,
    ec2: aws_sdk_ec2::Client,
    /// Where the Windows images' parameters are (the build of a Windows node).
    ssm: aws_sdk_ssm::Client,
    /// Instances joined so far (a terminated instance's Node is Dovetail's to delete).
    joined: BTreeSet<String>,
}

/// What nodeadm reads from Dovetail's NodeConfig, or `Start-EKSBootstrap.ps1` from its
/// arguments.
#[derive(Debug, Default, PartialEq)]
pub struct NodeConfig {
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub max_pods: Option<i64>,
    /// Bootstrapped by the Windows script.
    pub windows: bool,
}

impl Kubelet {
    pub fn new(admin: Client, ec2: aws_sdk_ec2::Client, ssm: aws_sdk_ssm::Client) -> Kubelet {
        Kubelet { admin, ec2, ssm, joined: BTreeSet::new() }
    }

    /// Syncs every 250 ms until aborted; failures go to `shared`.
    pub async fn run(mut self, shared: Arc<Shared>) {
        loop {
            if let Err(e) = self.sync().await {
                shared.fail(format!("test kubelet: {e:#}"));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn sync(&mut self) -> Result<()> {
        let out = self
            .ec2
            .describe_instances()
            .filters(Filter::builder().name("tag:dovetail.dev/cluster").values(CLUSTER).build())
            // moto reports some fleet instances `pending` for good (seen in the third zone's subnet);
            // a real one boots to `running` within seconds either way.
            .filters(Filter::builder().name("instance-state-name").values("pending").values("running").build())
            .send()
            .await?;
        for instance in out.reservations().iter().flat_map(|r| r.instances()) {
            let id = instance.instance_id().context("an instance without an id")?;
            if !self.joined.contains(id) {
                self.join(instance).await.with_context(|| format!("joining {id}"))?;
                self.joined.insert(id.to_string());
            }
        }
        self.run_pods().await
    }

    async fn join(&self, instance: &Instance) -> Result<()> {
        let id = instance.instance_id().unwrap_or_default();
        let attribute = self
            .ec2
            .describe_instance_attribute()
            .instance_id(id)
            .attribute(InstanceAttributeName::UserData)
            .send()
            .await?;
        let encoded = attribute.user_data().and_then(|u| u.value()).context("the instance has no user data")?;
        let text = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(encoded)?)?;
        let config = match windows_bootstrap_args(&text) {
            Some(args) => windows_config(&args)?,
            None => node_config(&text)?,
        };

        let instance_type = instance.instance_type().context("no instance type")?.as_str();
        let zone = instance.placement().and_then(|p| p.availability_zone()).context("no zone")?;
        let facts = embedded().get(instance_type).with_context(|| format!("{instance_type} is not in the catalog"))?;
        let quantities = |r: dovetail_core::resources::Resources| -> BTreeMap<String, Quantity> {
            r.to_quantities().into_iter().map(|(k, v)| (k, Quantity(v))).collect()
        };
        let arch = match instance.architecture().map(|a| a.as_str()) {
            Some("x86_64") => "amd64",
            Some("arm64") => "arm64",
            other => bail!("instance {id} has architecture {other:?}"),
        };
        let dns = instance.private_dns_name().filter(|n| !n.is_empty()).context("no private DNS name")?;
        // moto hands a new instance the private address of one still running now and then (seen
        // under concurrent launches); EC2 never does. Such a clash is the harness's, so the Node
        // is named after the instance instead.
        let nodes: Api<Node> = Api::all(self.admin.clone());
        let taken = nodes
            .get_opt(dns)
            .await?
            .is_some_and(|n| n.spec.and_then(|s| s.provider_id).is_some_and(|p| !p.ends_with(&format!("/{id}"))));
        let fallback = format!("{id}.ec2.internal");
        let name = if taken { fallback.as_str() } else { dns };
        let mut labels = config.labels.clone();
        let os = if config.windows {
            let image = instance.image_id().context("no image")?;
            let year = fixtures::windows_year_of(&self.ssm, SSM_PREFIX, image).await?.with_context(|| {
                format!("{id} runs Windows' bootstrap, but its image {image} is no Windows EKS image")
            })?;
            windows_os(&year)?
        } else {
            NodeOs::Linux
        };
        if let Some(build) = os.windows_build() {
            labels.insert(labels::WINDOWS_BUILD.into(), build.into());
        }
        // Allocatable as the core models it for the node's OS (Windows: 110 pods by default,
        // kube-reserved memory sized from them, a 50 GiB root volume).
        let kubelet = KubeletConfig { max_pods: config.max_pods, os, ..KubeletConfig::default() };
        labels.extend([
            (labels::HOSTNAME.to_string(), name.to_string()),
            (labels::OS.into(), os.label().into()),
            (labels::ARCH.into(), arch.into()),
            (labels::INSTANCE_TYPE.into(), instance_type.into()),
            (labels::ZONE.into(), zone.into()),
            (labels::REGION.into(), zone[..zone.len() - 1].into()),
        ]);
        let taints = config.taints.iter().map(serde_json::to_value).collect::<Result<Vec<_>, _>>()?;
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": labels },
            "spec": { "providerID": format!("aws:///{zone}/{id}"), "taints": taints },
        }))?;
        register_node(&self.admin, node, quantities(facts.capacity(&kubelet)), quantities(facts.allocatable(&kubelet)))
            .await?;
        Ok(())
    }

    /// Starts the pods bound to a node and finishes off those being deleted.
    async fn run_pods(&self) -> Result<()> {
        let all: Api<Pod> = Api::all(self.admin.clone());
        for pod in all.list(&ListParams::default().fields("spec.nodeName!=")).await?.items {
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let pods: Api<Pod> = Api::namespaced(self.admin.clone(), &namespace);
            if pod.metadata.deletion_timestamp.is_some() {
                match pods.delete(&name, &DeleteParams::default().grace_period(0)).await {
                    Err(e) if !gone(&e) => return Err(e).with_context(|| format!("finishing {namespace}/{name}")),
                    _ => {}
                }
                continue;
            }
            if super::phase(&pod) == "Pending" {
                let now = k8s_openapi::jiff::Timestamp::now().to_string();
                let condition = |kind: &str| json!({"type": kind, "status": "True", "lastTransitionTime": now});
                let status = json!({"status": {
                    "phase": "Running",
                    "startTime": now,
                    "conditions": [condition("PodScheduled"), condition("Initialized"), condition("ContainersReady"), condition("Ready")],
                }});
                match pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await {
                    Err(e) if !gone(&e) => return Err(e).with_context(|| format!("starting {namespace}/{name}")),
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

/// A pod deleted meanwhile: nothing left to do for it.
fn gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// The labels, taints and maxPods of the NodeConfig part of `user_data` (MIME multipart, as
/// nodeadm reads it).
pub fn node_config(user_data: &str) -> Result<NodeConfig> {
    let parts = user_parts(user_data).context("the user data is not a MIME document Dovetail reads")?;
    let part = parts
        .iter()
        .find(|p| p.headers.iter().any(|h| h.contains(NODECONFIG_TYPE)))
        .context("no NodeConfig part in the user data")?;
    let doc: Value = serde_yaml_ng::from_str(&part.body).context("the NodeConfig is not YAML")?;
    if doc["kind"] != "NodeConfig" {
        bail!("the NodeConfig part is a {}", doc["kind"]);
    }
    let mut config =
        NodeConfig { max_pods: doc["spec"]["kubelet"]["config"]["maxPods"].as_i64(), ..Default::default() };
    read_flags(
        &mut config,
        doc["spec"]["kubelet"]["flags"].as_array().into_iter().flatten().filter_map(Value::as_str),
    )?;
    Ok(config)
}

/// What `Start-EKSBootstrap.ps1` gives the kubelet from its arguments: the labels, taints and
/// maxPods of `-KubeletExtraArgs` (space-separated flags, as Dovetail writes them).
pub fn windows_config(args: &BTreeMap<String, String>) -> Result<NodeConfig> {
    let extra = args.get("KubeletExtraArgs").context("no -KubeletExtraArgs in the Windows bootstrap")?;
    let mut config = NodeConfig { windows: true, ..Default::default() };
    read_flags(&mut config, extra.split(' ').filter(|f| !f.is_empty()))?;
    Ok(config)
}

/// The Windows Server release of an EKS Windows image's parameter (`2022`) as the core's OS.
fn windows_os(year: &str) -> Result<NodeOs> {
    let os = NodeOs::WINDOWS.into_iter().find(|os| os.windows_release() == Some(year));
    os.with_context(|| format!("Windows Server {year} has no EKS image Dovetail launches"))
}

/// `--node-labels`, `--register-with-taints` and `--max-pods` of kubelet `flags` into `config`.
fn read_flags<'a>(config: &mut NodeConfig, flags: impl Iterator<Item = &'a str>) -> Result<()> {
    for flag in flags {
        if let Some(n) = flag.strip_prefix("--max-pods=") {
            config.max_pods = Some(n.parse().with_context(|| format!("maxPods {n:?}"))?);
        } else if let Some(list) = flag.strip_prefix("--node-labels=") {
            for pair in list.split(',') {
                let (k, v) = pair.split_once('=').with_context(|| format!("label {pair:?}"))?;
                config.labels.insert(k.into(), v.into());
            }
        } else if let Some(list) = flag.strip_prefix("--register-with-taints=") {
            for taint in list.split(',') {
                let (kv, effect) = taint.rsplit_once(':').with_context(|| format!("taint {taint:?}"))?;
                let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
                let effect = TaintEffect::parse(effect).with_context(|| format!("taint effect {effect:?}"))?;
                config.taints.push(Taint::new(key, value, effect));
            }
        }
    }
    Ok(())
}
