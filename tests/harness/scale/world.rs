//! The rig's world: moto with a network, images, the table and the resume queue, an EKS cluster to
//! describe; a private control plane (no scheduler) with two NodePools and a class; and the
//! loaded cluster — Nodes as Dovetail registers them, their instances in moto, their NodeClaims in
//! DynamoDB, and bound pods of Karpenter's mix on them.
//!
//! - NodePool `filled` holds the loaded nodes (`m6i.4xlarge`, one in four spot, three zones). They
//!   carry its taint `scale.example.com/filled:NoSchedule`, which the bound pods tolerate and
//!   pending pods do not: pending pods need new capacity, as in a cluster whose nodes are full.
//!   Its nodes were initialized at load and consolidate only after an hour: sweeps judge them but
//!   find nothing to take away yet.
//! - NodePool `burst` takes the pending pods: c, m and r types newer than the 5th generation,
//!   spot or on-demand, amd64; each burst's pods select their burst's value of
//!   `scale.example.com/burst`, which the pool leaves open (see [`pods::BURST_LABEL`]).
//!
//! Loading writes many objects at a time ([`LOAD_CONCURRENCY`]); the API server's default
//! in-flight limits (400 reads, 200 writes, priority and fairness off) hold that many.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use anyhow::{anyhow, Context, Result};
use aws_config::SdkConfig;
use aws_sdk_ec2::types::{Filter, ResourceType};
use dovetail_aws::dynamo::create_table;
use dovetail_aws::ec2::{TAG_CLUSTER, TAG_NODECLAIM, TAG_NODEPOOL};
use dovetail_aws::{Clients, Config, DynamoStore};
use dovetail_core::catalog::CapacityType;
use dovetail_core::hash::nodepool_hash;
use dovetail_core::labels;
use dovetail_core::model::NodePool;
use dovetail_core::nodeclaim::{launched_labels, object, Hashes, Launch, NodeClaim, Phase};
use dovetail_core::reconcile::ports::{Clock, Kube, Store};
use dovetail_core::time::Time;
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

use super::pods::{self, Kind, Placement, BURST_LABEL, FILLED_TAINT};
use super::proxy::Proxy;
use super::Size;
use crate::controlplane::{register_node, ControlPlane};
use crate::moto::fixtures::{self, tags};
use crate::moto::{Moto, Session, REGION};

pub const CLUSTER: &str = "scale-cluster";
pub const TABLE: &str = "dovetail";
/// The namespace of every pod the rig writes.
pub const NAMESPACE: &str = "scale";
const KUBERNETES_VERSION: &str = "1.34";
const SSM_PREFIX: &str = "/test";
const DISCOVERY: &str = "karpenter.sh/discovery";
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
/// The loaded nodes' type and what the embedded data (`shared/data`) gives it.
const FILLED_TYPE: &str = "m6i.4xlarge";
const FILLED_PRICE: [f64; 2] = [0.768, 0.261];
/// Objects written at once while loading.
pub const LOAD_CONCURRENCY: usize = 48;
/// The adapter's page size (`dovetail_kube::list::PAGE_SIZE`): the reference full list is read in
/// the same pages.
const PAGE: u32 = 500;

/// One loaded node.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub node: String,
    pub claim: String,
    pub instance_id: String,
    pub capacity_type: CapacityType,
}

/// How long loading took, and the size of one full read of the loaded cluster.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct LoadStats {
    pub aws_seconds: f64,
    pub nodes_seconds: f64,
    pub pods_seconds: f64,
    /// One list of every pod and node in pages of 500, as a cold read makes it.
    pub full_list_requests: u64,
    pub full_list_bytes: u64,
}

pub struct World {
    pub size: Size,
    _moto: Session,
    pub control_plane: ControlPlane,
    pub admin: Client,
    pub sdk: SdkConfig,
    /// The rig's own clients (not counted).
    pub clients: Clients,
    /// The functions' settings.
    pub config: Config,
    pub store: DynamoStore,
    pub proxy: Proxy,
    /// The kubeconfig through [`Proxy`].
    pub kubeconfig: PathBuf,
    pub loaded: Vec<Loaded>,
    pub stats: LoadStats,
    /// Bound pods not yet deleted, by index (pod `bound-<i>`).
    bound: std::ops::Range<usize>,
    /// Pending pods written so far, in this many bursts.
    pending: usize,
    bursts: usize,
    /// Loaded nodes already interrupted or drifted (never twice).
    used: usize,
}

/// Runs `work` on every item, `LOAD_CONCURRENCY` at a time; the first error stops it.
pub async fn concurrently<T, F, Fut>(items: impl IntoIterator<Item = T>, work: F) -> Result<()>
where
    F: FnMut(T) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    futures_util::stream::iter(items)
        .map(work)
        .buffer_unordered(LOAD_CONCURRENCY)
        .try_for_each(|()| async { Ok(()) })
        .await
}

fn now() -> Time {
    dovetail_runtime::clock::SystemClock.now()
}

/// The `dovetail.dev/v1` kind `kind` (plural `plural`).
fn dovetail_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "dovetail.dev".into(),
        version: "v1".into(),
        api_version: "dovetail.dev/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// The pools and the class (see the module documentation).
fn manifests() -> Vec<(ApiResource, Value)> {
    let pool = |name: &str, template: Value| {
        json!({
            "apiVersion": "dovetail.dev/v1",
            "kind": "NodePool",
            "metadata": { "name": name },
            "spec": {
                "template": template,
                "disruption": { "consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1h" },
            },
        })
    };
    let class_ref = json!({ "group": "dovetail.dev", "kind": "EC2NodeClass", "name": "default" });
    let filled = pool(
        "filled",
        json!({ "spec": {
            "nodeClassRef": class_ref,
            "taints": [{ "key": FILLED_TAINT, "value": "true", "effect": "NoSchedule" }],
            "requirements": [
                { "key": labels::INSTANCE_TYPE, "operator": "In", "values": [FILLED_TYPE] },
                { "key": labels::CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"] },
            ],
        }}),
    );
    let burst = pool(
        "burst",
        json!({ "spec": {
            "nodeClassRef": class_ref,
            "requirements": [
                { "key": labels::ARCH, "operator": "In", "values": ["amd64"] },
                { "key": labels::CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"] },
                { "key": labels::INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m", "r"] },
                { "key": labels::INSTANCE_GENERATION, "operator": "Gt", "values": ["5"] },
                { "key": BURST_LABEL, "operator": "Exists" },
            ],
        }}),
    );
    let class = json!({
        "apiVersion": "dovetail.dev/v1",
        "kind": "EC2NodeClass",
        "metadata": { "name": "default" },
        "spec": {
            "role": format!("DovetailNodeRole-{CLUSTER}"),
            "amiSelectorTerms": [{ "alias": "al2023@latest" }],
            "subnetSelectorTerms": [{ "tags": { "karpenter.sh/discovery": CLUSTER } }],
            "securityGroupSelectorTerms": [{ "tags": { "karpenter.sh/discovery": CLUSTER } }],
        },
    });
    let pools = dovetail_resource("NodePool", "nodepools");
    vec![(pools.clone(), filled), (pools, burst), (dovetail_resource("EC2NodeClass", "ec2nodeclasses"), class)]
}

/// What moto holds for the functions besides instances.
struct Network {
    /// Subnet per zone, in [`ZONES`] order.
    subnets: Vec<String>,
    security_group: String,
    image: String,
    resume_queue_url: String,
}

impl World {
    /// Starts everything and loads `size`.
    pub async fn load(size: Size) -> Result<World> {
        let begun = Instant::now();
        // moto first: a session of its own, counted among those that may run at once.
        let moto = Moto::session()?;
        let sdk = moto.sdk_config().await;
        let mut config = Config::new(CLUSTER, TABLE, "");
        config.region = Some(REGION.into());
        config.ssm_prefix = SSM_PREFIX.into();
        config.endpoint_url = Some(moto.endpoint.clone());
        let clients = Clients::new(&sdk, &config);
        let network = Self::aws(&clients).await?;
        config.resume_queue_url = network.resume_queue_url.clone();
        let store = DynamoStore::new(clients.dynamodb.clone(), TABLE, CLUSTER, config.terminated_ttl);

        let control_plane = ControlPlane::start_without_scheduler()?;
        let admin = control_plane.client();
        let proxy = Proxy::start(control_plane.config().clone())?;
        let kubeconfig = control_plane.dir().join("scale-proxy.kubeconfig");
        std::fs::write(&kubeconfig, serde_json::to_vec_pretty(&proxy.kubeconfig())?)?;
        let mut world = World {
            size,
            _moto: moto,
            control_plane,
            admin,
            sdk,
            clients,
            config,
            store,
            proxy,
            kubeconfig,
            loaded: Vec::new(),
            stats: LoadStats::default(),
            bound: 0..size.pods,
            pending: 0,
            bursts: 0,
            used: 0,
        };
        let pool = world.apply_manifests().await?;
        world.instances(&network).await?;
        world.claims(&pool, &network).await?;
        world.stats.aws_seconds = begun.elapsed().as_secs_f64();
        let nodes = Instant::now();
        world.nodes(&pool).await?;
        world.stats.nodes_seconds = nodes.elapsed().as_secs_f64();
        let pods = Instant::now();
        world.bound_pods().await?;
        world.stats.pods_seconds = pods.elapsed().as_secs_f64();
        world.measure_full_list().await?;
        Ok(world)
    }

    /// The VPC (a subnet per zone, tagged for discovery), a tagged security group, the
    /// `al2023@latest` parameters, the table, the resume queue, the EKS cluster and the node role.
    async fn aws(clients: &Clients) -> Result<Network> {
        let ec2 = &clients.ec2;
        let vpc = ec2.create_vpc().cidr_block("10.0.0.0/16").send().await?;
        let vpc = vpc.vpc().and_then(|v| v.vpc_id()).context("a VPC id")?.to_string();
        let discovery = [(DISCOVERY, CLUSTER)];
        let mut subnets = Vec::new();
        for (i, zone) in ZONES.iter().enumerate() {
            let subnet = ec2
                .create_subnet()
                .vpc_id(&vpc)
                .cidr_block(format!("10.0.{}.0/18", i * 64))
                .availability_zone(*zone)
                .tag_specifications(tags(ResourceType::Subnet, &discovery))
                .send()
                .await?;
            subnets.push(subnet.subnet().and_then(|s| s.subnet_id()).context("a subnet id")?.to_string());
        }
        let security_group = ec2
            .create_security_group()
            .group_name("nodes")
            .description("nodes")
            .vpc_id(&vpc)
            .tag_specifications(tags(ResourceType::SecurityGroup, &discovery))
            .send()
            .await?
            .group_id()
            .context("a security group id")?
            .to_string();
        let images = ec2.describe_images().owners("amazon").send().await?;
        let image_of = |arch: &str| {
            images
                .images()
                .iter()
                .find(|i| i.architecture().map(|a| a.as_str()) == Some(arch))
                .and_then(|i| i.image_id())
                .map(str::to_string)
                .with_context(|| format!("an {arch} image among moto's"))
        };
        let image = image_of("x86_64")?;
        let arm64 = image_of("arm64")?;
        fixtures::al2023_images(&clients.ssm, SSM_PREFIX, KUBERNETES_VERSION, &[("x86_64", &image), ("arm64", &arm64)])
            .await?;
        create_table(&clients.dynamodb, TABLE).await?;
        let resume_queue_url = clients
            .sqs
            .create_queue()
            .queue_name("dovetail-resume")
            .send()
            .await?
            .queue_url()
            .context("a queue url")?
            .to_string();
        fixtures::eks_cluster(&clients.eks, CLUSTER, KUBERNETES_VERSION).await?;
        fixtures::node_role(&clients.iam, &format!("DovetailNodeRole-{CLUSTER}")).await?;
        Ok(Network { subnets, security_group, image, resume_queue_url })
    }

    /// Creates the pools, the class and the namespace; the `filled` pool as the functions will
    /// read it back (API server defaults included), for the hash its claims record.
    async fn apply_manifests(&self) -> Result<NodePool> {
        for (resource, manifest) in manifests() {
            let object: DynamicObject = serde_json::from_value(manifest)?;
            let name = object.metadata.name.clone().unwrap_or_default();
            Api::<DynamicObject>::all_with(self.admin.clone(), &resource)
                .create(&PostParams::default(), &object)
                .await
                .with_context(|| format!("creating {} {name}", resource.kind))?;
        }
        let namespace: Namespace = serde_json::from_value(json!({ "metadata": { "name": NAMESPACE } }))?;
        Api::<Namespace>::all(self.admin.clone()).create(&PostParams::default(), &namespace).await?;
        let pools = dovetail_resource("NodePool", "nodepools");
        let filled = Api::<DynamicObject>::all_with(self.admin.clone(), &pools).get("filled").await?;
        let value = serde_json::to_value(&filled)?;
        dovetail_api::crd::from_value::<dovetail_api::crd::NodePool>("NodePool", &value)
            .map_err(|e| anyhow!("NodePool filled: {e:?}"))?
            .to_core()
            .map_err(|e| anyhow!("NodePool filled: {e:?}"))
    }

    fn zone(i: usize) -> usize {
        i % ZONES.len()
    }

    fn capacity_type(i: usize) -> CapacityType {
        if i.is_multiple_of(4) {
            CapacityType::Spot
        } else {
            CapacityType::OnDemand
        }
    }

    fn node_name(i: usize) -> String {
        format!("ip-10-0-{}-{}.ec2.internal", (i >> 8) & 255, i & 255)
    }

    fn node_ip(i: usize) -> String {
        format!("10.0.{}.{}", (i >> 8) & 255, i & 255)
    }

    /// One instance per node, tagged as CreateFleet's launch tags it.
    async fn instances(&mut self, network: &Network) -> Result<()> {
        let ec2 = &self.clients.ec2;
        let ids = std::sync::Mutex::new(vec![String::new(); self.size.nodes]);
        let (ids_ref, network) = (&ids, network);
        concurrently(0..self.size.nodes, |i| async move {
            let claim = format!("filled-s{i:05}");
            let cluster_tag = format!("kubernetes.io/cluster/{CLUSTER}");
            let tagged = [
                (cluster_tag.as_str(), "owned"),
                (TAG_CLUSTER, CLUSTER),
                (TAG_NODEPOOL, "filled"),
                (TAG_NODECLAIM, claim.as_str()),
                ("Name", claim.as_str()),
            ];
            let out = ec2
                .run_instances()
                .image_id(&network.image)
                .instance_type(aws_sdk_ec2::types::InstanceType::from(FILLED_TYPE))
                .subnet_id(&network.subnets[Self::zone(i)])
                .security_group_ids(&network.security_group)
                .min_count(1)
                .max_count(1)
                .tag_specifications(tags(ResourceType::Instance, &tagged))
                .send()
                .await
                .with_context(|| format!("launching the instance of {claim}"))?;
            let id = out.instances().first().and_then(|i| i.instance_id()).context("an instance id")?;
            ids_ref.lock().unwrap_or_else(|e| e.into_inner())[i] = id.to_string();
            Ok(())
        })
        .await?;
        self.loaded = ids
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .into_iter()
            .enumerate()
            .map(|(i, instance_id)| Loaded {
                node: Self::node_name(i),
                claim: format!("filled-s{i:05}"),
                instance_id,
                capacity_type: Self::capacity_type(i),
            })
            .collect();
        Ok(())
    }

    /// The labels a loaded node carries: the pool's, the claim's, the type's, zone and capacity.
    fn node_labels(pool: &NodePool, loaded: &Loaded, i: usize) -> BTreeMap<String, String> {
        let mut base = pool.labels.clone();
        base.insert(labels::NODEPOOL.into(), pool.name.clone());
        base.insert(labels::KARPENTER_NODEPOOL.into(), pool.name.clone());
        base.insert(labels::NODECLAIM.into(), loaded.claim.clone());
        let catalog = dovetail_core::catalog::embedded();
        let mut out = launched_labels(&base, FILLED_TYPE, ZONES[Self::zone(i)], loaded.capacity_type, catalog);
        out.insert(labels::HOSTNAME.into(), loaded.node.clone());
        out
    }

    /// Every node's claim, Initialized, as the provisioner leaves one.
    async fn claims(&self, pool: &NodePool, network: &Network) -> Result<()> {
        let at = now();
        let hash = nodepool_hash(pool);
        let (store, network) = (&self.store, network);
        let claims: Vec<NodeClaim> = self
            .loaded
            .iter()
            .enumerate()
            .map(|(i, loaded)| {
                let mut claim = NodeClaim::launching(&loaded.claim, &pool.name, &pool.node_class, at);
                claim.phase = Phase::Initialized;
                claim.instance_types = vec![FILLED_TYPE.into()];
                claim.labels = Self::node_labels(pool, loaded, i);
                claim.labels.remove(labels::HOSTNAME);
                claim.taints = pool.taints.clone();
                claim.launch = Some(Launch {
                    instance_id: loaded.instance_id.clone(),
                    instance_type: FILLED_TYPE.into(),
                    zone: ZONES[Self::zone(i)].into(),
                    capacity_type: loaded.capacity_type,
                    image_id: network.image.clone(),
                    subnet_id: network.subnets[Self::zone(i)].clone(),
                    security_groups: vec![network.security_group.clone()],
                    price: FILLED_PRICE[usize::from(loaded.capacity_type == CapacityType::Spot)],
                    launched_at: at,
                });
                claim.launch_attempts = 1;
                claim.launch_attempted_at = Some(at);
                claim.node_name = Some(loaded.node.clone());
                claim.registered_at = Some(at);
                claim.initialized_at = Some(at);
                // The class hash stays unknown, which is never drift (`disruption::drift`).
                claim.hashes = Hashes { nodepool: hash.clone(), nodeclass: String::new() };
                claim.expire_after = pool.expire_after;
                claim.termination_grace_period = pool.termination_grace_period;
                // No later than its pods' start (`pods::STEADY_FOR` before they are loaded): the
                // sweeper has no newer pod event to record.
                claim.last_pod_event = Some(at);
                claim
            })
            .collect();
        // Written as a steady cluster holds them: last changed an hour ago (`pods::STEADY_FOR`). Loading takes seconds
        // to minutes, within the one minute the functions' reads of changes look back
        // (`dovetail_aws::dynamo`), so claims stamped now would all read as just changed.
        let written = SystemTime::now() - pods::STEADY_FOR;
        let dynamodb = &self.clients.dynamodb;
        // With its NodeClaim object, as the functions keep one for every live claim: without
        // them the first sweep would be a one-time repair writing every object, not the steady
        // sweep the rig measures.
        let adapter = dovetail_kube::KubeAdapter::new(self.admin.clone());
        let adapter = &adapter;
        concurrently(claims, |claim| async move {
            let item = store.layout().claim_item(&claim, written)?;
            dynamodb
                .put_item()
                .table_name(TABLE)
                .set_item(Some(item))
                .send()
                .await
                .with_context(|| format!("writing NodeClaim {}", claim.name))?;
            let shown = object::ClaimObject {
                conditions: object::conditions(&claim),
                claim,
                capacity: None,
                allocatable: None,
            };
            let name = shown.claim.name.clone();
            adapter.write_claim_object(&shown).await.map_err(|e| anyhow!("NodeClaim object {name}: {e}"))?;
            Ok(())
        })
        .await
    }

    /// The Nodes, registered and Ready as a kubelet and the node lifecycle controller leave them.
    async fn nodes(&self, pool: &NodePool) -> Result<()> {
        let quantities = |pairs: &[(&str, &str)]| -> BTreeMap<String, Quantity> {
            pairs.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect()
        };
        // m6i.4xlarge with AL2023's defaults (`shared/data`): 16 vCPU, 64 GiB, 234 pods.
        let capacity =
            quantities(&[("cpu", "16"), ("memory", "60620Mi"), ("pods", "234"), ("ephemeral-storage", "20Gi")]);
        let allocatable =
            quantities(&[("cpu", "15890m"), ("memory", "57691Mi"), ("pods", "234"), ("ephemeral-storage", "17Gi")]);
        let (admin, capacity, allocatable) = (&self.admin, &capacity, &allocatable);
        concurrently(self.loaded.iter().enumerate(), |(i, loaded)| async move {
            let labels = Self::node_labels(pool, loaded, i);
            let taints: Vec<Value> =
                pool.taints.iter().map(|t| json!({ "key": t.key, "value": t.value, "effect": t.effect })).collect();
            let node: Node = serde_json::from_value(json!({
                "metadata": { "name": loaded.node, "labels": labels },
                "spec": {
                    "providerID": format!("aws:///{}/{}", ZONES[Self::zone(i)], loaded.instance_id),
                    "taints": taints,
                },
            }))?;
            register_node(admin, node, capacity.clone(), allocatable.clone()).await?;
            Ok(())
        })
        .await
    }

    /// `size.pods` pods of the mix, bound round-robin and Running.
    async fn bound_pods(&self) -> Result<()> {
        let api: Api<Pod> = Api::namespaced(self.admin.clone(), NAMESPACE);
        let (api, count, nodes) = (&api, self.size.pods, self.size.nodes);
        concurrently(0..count, |i| async move {
            let node = i % nodes;
            let name = format!("bound-{i:06}");
            let pod: Pod = serde_json::from_value(pods::pod(
                NAMESPACE,
                &name,
                i,
                Kind::of(i, count),
                Placement::Bound(&Self::node_name(node)),
            ))?;
            api.create(&PostParams::default(), &pod).await.with_context(|| format!("creating pod {name}"))?;
            let status = pods::running(i, &Self::node_ip(node));
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await?;
            Ok(())
        })
        .await
    }

    /// One paginated list of every pod and node through the proxy: the reference a warm read is
    /// compared with.
    async fn measure_full_list(&mut self) -> Result<()> {
        let client = Client::try_from(kube::Config::new(self.proxy.url.parse()?))?;
        let before = self.proxy.tally();
        let mut token: Option<String> = None;
        let pods: Api<Pod> = Api::all(client.clone());
        loop {
            let mut params = ListParams::default().limit(PAGE);
            params.continue_token = token.take();
            let page = pods.list(&params).await?;
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        let nodes: Api<Node> = Api::all(client);
        loop {
            let mut params = ListParams::default().limit(PAGE);
            params.continue_token = token.take();
            let page = nodes.list(&params).await?;
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        let read = self.proxy.tally().since(&before);
        self.stats.full_list_requests = read.total();
        self.stats.full_list_bytes = read.bytes_read;
        Ok(())
    }

    /// `count` new pods of the mix, a burst of their own, marked Unschedulable as kube-scheduler
    /// would; their names.
    pub async fn pending(&mut self, count: usize) -> Result<Vec<String>> {
        let api: Api<Pod> = Api::namespaced(self.admin.clone(), NAMESPACE);
        let first = self.pending;
        self.pending += count;
        self.bursts += 1;
        let burst = self.bursts;
        let names: Vec<String> = (first..first + count).map(|i| format!("pending-{i:06}")).collect();
        let status = pods::unschedulable(self.size.nodes);
        let (api, status, seed) = (&api, &status, self.size.pods);
        concurrently(names.iter().enumerate(), |(i, name)| async move {
            let pod: Pod = serde_json::from_value(pods::pod(
                NAMESPACE,
                name,
                seed + first + i,
                Kind::of(i, count),
                Placement::Pending(burst),
            ))?;
            api.create(&PostParams::default(), &pod).await.with_context(|| format!("creating pod {name}"))?;
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(status)).await?;
            Ok(())
        })
        .await?;
        Ok(names)
    }

    /// Deletes `count` bound pods, spread over the nodes (the last ones written), at once (grace 0:
    /// there is no kubelet to finish a graceful deletion).
    pub async fn delete(&mut self, count: usize) -> Result<()> {
        let count = count.min(self.bound.len());
        let end = self.bound.end;
        self.bound.end -= count;
        let api: Api<Pod> = Api::namespaced(self.admin.clone(), NAMESPACE);
        let (api, params) = (&api, &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() });
        concurrently(end - count..end, |i| async move {
            api.delete(&format!("bound-{i:06}"), params).await?;
            Ok(())
        })
        .await
    }

    /// A loaded node of `capacity_type` not used by an earlier interruption or drift.
    fn next_node(&mut self, capacity_type: CapacityType) -> Result<Loaded> {
        let found = self.loaded[self.used..]
            .iter()
            .position(|l| l.capacity_type == capacity_type)
            .context("every loaded node of that capacity type was used")?;
        let loaded = self.loaded[self.used + found].clone();
        self.used += found + 1;
        Ok(loaded)
    }

    /// The body EventBridge delivers for a spot interruption warning of a spot node's instance.
    pub fn spot_interruption(&mut self) -> Result<String> {
        let loaded = self.next_node(CapacityType::Spot)?;
        let recorded = include_str!("../../../shared/core/tests/fixtures/eventbridge/spot-interruption.json");
        let mut event: Value = serde_json::from_str(&recorded.replace("i-0abc1234def567890", &loaded.instance_id))?;
        event["time"] = serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        ))?;
        Ok(event.to_string())
    }

    /// Makes an on-demand node's claim look launched from an older `filled` template (its recorded
    /// NodePool hash no longer the pool's): the next sweep finds it drifted.
    pub async fn drift(&mut self) -> Result<String> {
        let loaded = self.next_node(CapacityType::OnDemand)?;
        let claim = self.store.claim(&loaded.claim).await.map_err(|e| anyhow!("{e}"))?;
        let mut claim = claim.with_context(|| format!("NodeClaim {}", loaded.claim))?.next_version();
        claim.hashes.nodepool = "0123456789abcdef".into();
        self.store.put_claim(&claim).await.map_err(|e| anyhow!("{e}"))?;
        Ok(loaded.claim)
    }

    /// Live (not Terminated) claims.
    pub async fn live_claims(&self) -> Result<usize> {
        let claims = self.store.claims().await.map_err(|e| anyhow!("{e}"))?;
        Ok(claims.iter().filter(|c| c.phase != Phase::Terminated).count())
    }

    /// Instances of the cluster in moto that are pending or running.
    pub async fn running_instances(&self) -> Result<usize> {
        let out = self
            .clients
            .ec2
            .describe_instances()
            .filters(Filter::builder().name(format!("tag:{TAG_CLUSTER}")).values(CLUSTER).build())
            .filters(Filter::builder().name("instance-state-name").values("pending").values("running").build())
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await?;
        Ok(out.iter().map(|r| r.instances().len()).sum())
    }
}
