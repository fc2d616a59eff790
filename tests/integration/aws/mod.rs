//! The AWS adapters against a local moto server (see `tests/harness/moto.rs`): state and call
//! sequences. What moto cannot do (capacity errors, fleet choice, prices, public SSM parameters)
//! is covered by the adapters' unit tests on data.

pub mod canned;
mod catalog;
pub mod describes;
mod dynamo;
mod eks;
mod instances;
mod launch;
mod profiles;
mod resolve;
mod sqs;

use aws_config::SdkConfig;
use aws_sdk_ec2::types::{ResourceType, Tag};
use dovetail_api::manifest;
use dovetail_aws::{Clients, ClusterFacts, Config, Ec2Cloud};
use dovetail_core::model::NodeClass;
use dovetail_core::snapshot::Snapshot;
use dovetail_tests::moto::fixtures::{self, tags};
use dovetail_tests::moto::{Moto, Session};

pub const CLUSTER: &str = "demo-cluster";
pub const TABLE: &str = "dovetail";
pub const K8S_VERSION: &str = "1.31";
pub const SSM_PREFIX: &str = "/test";
/// The role the example classes name.
pub const NODE_ROLE: &str = "DovetailNodeRole-demo-cluster";
/// The tag the example classes select subnets and security groups by.
pub const DISCOVERY: &str = "karpenter.sh/discovery";

/// The `arm64-only` example: a pool allowing both architectures (on demand, c/m/r, generation
/// > 5), its class selecting by the discovery tag and `al2023@latest`, six arm64-only pods.
pub fn example() -> Snapshot {
    let pool = include_str!("../../../infra/examples/arm64-only/nodepool.yaml");
    let workload = include_str!("../../../infra/examples/arm64-only/workload.yaml");
    manifest::load_texts([("nodepool.yaml", pool), ("workload.yaml", workload)]).unwrap().snapshot().unwrap()
}

/// A class named `name` with `spec` as written.
pub fn class(name: &str, spec: serde_json::Value) -> NodeClass {
    NodeClass { name: name.into(), spec, ..NodeClass::default() }
}

/// One test's moto, clients and settings.
pub struct World {
    /// Held for the test: moto is this test's alone until the World is dropped.
    _moto: Session,
    pub sdk: SdkConfig,
    pub clients: Clients,
    pub config: Config,
}

/// What [`World::network`] made.
pub struct Network {
    /// (id, zone) of the tagged subnets: a big and a small one in us-east-1a, one in us-east-1b.
    pub big_a: String,
    pub small_a: String,
    pub b: String,
    /// An untagged subnet in us-east-1c.
    pub untagged_c: String,
    pub tagged_sg: String,
    pub named_sg: String,
}

impl World {
    pub async fn new() -> World {
        let moto = Moto::session().expect("moto must run for the AWS tests");
        let sdk = moto.sdk_config().await;
        let mut config = Config::new(CLUSTER, TABLE, "");
        config.region = Some(dovetail_tests::moto::REGION.into());
        config.ssm_prefix = SSM_PREFIX.into();
        config.endpoint_url = Some(moto.endpoint.clone());
        let clients = Clients::new(&sdk, &config);
        World { _moto: moto, sdk, clients, config }
    }

    pub fn facts() -> ClusterFacts {
        ClusterFacts {
            name: CLUSTER.into(),
            endpoint: "https://EXAMPLE.gr7.us-east-1.eks.amazonaws.com".into(),
            ca_pem: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".into(),
            version: K8S_VERSION.into(),
            service_cidr: Some("10.100.0.0/16".into()),
        }
    }

    /// The cluster in moto's EKS (DescribeCluster answers with an endpoint, a CA and the version).
    pub async fn eks_cluster(&self) {
        fixtures::eks_cluster(&self.clients.eks, CLUSTER, K8S_VERSION).await.unwrap();
    }

    pub fn cloud(&self) -> Ec2Cloud {
        Ec2Cloud::new(&self.clients, &self.config, World::facts())
    }

    /// A VPC with discovery-tagged subnets (two in us-east-1a of different sizes, one in
    /// us-east-1b), an untagged one in us-east-1c, a tagged security group and one found by name;
    /// and the node role the example classes name (their instance profile holds it).
    pub async fn network(&self) -> Network {
        fixtures::node_role(&self.clients.iam, NODE_ROLE).await.unwrap();
        let ec2 = &self.clients.ec2;
        let vpc = ec2.create_vpc().cidr_block("10.0.0.0/16").send().await.unwrap();
        let vpc = vpc.vpc().unwrap().vpc_id().unwrap().to_string();
        let discovery = [(DISCOVERY, CLUSTER)];
        let subnet = |cidr: &'static str, zone: &'static str, tagged: bool| {
            let vpc = vpc.clone();
            async move {
                let mut call = ec2.create_subnet().vpc_id(vpc).cidr_block(cidr).availability_zone(zone);
                if tagged {
                    call = call.tag_specifications(tags(ResourceType::Subnet, &discovery));
                }
                call.send().await.unwrap().subnet().unwrap().subnet_id().unwrap().to_string()
            }
        };
        let small_a = subnet("10.0.1.0/26", "us-east-1a", true).await;
        let big_a = subnet("10.0.2.0/24", "us-east-1a", true).await;
        let b = subnet("10.0.3.0/25", "us-east-1b", true).await;
        let untagged_c = subnet("10.0.4.0/24", "us-east-1c", false).await;
        let sg = |name: &'static str, tagged: bool| {
            let vpc = vpc.clone();
            async move {
                let mut call = ec2.create_security_group().group_name(name).description(name).vpc_id(vpc);
                if tagged {
                    call = call.tag_specifications(tags(ResourceType::SecurityGroup, &discovery));
                }
                call.send().await.unwrap().group_id().unwrap().to_string()
            }
        };
        let tagged_sg = sg("nodes", true).await;
        let named_sg = sg("extra", false).await;
        Network { big_a, small_a, b, untagged_c, tagged_sg, named_sg }
    }

    /// `count` arm64 instances launched in one call (one reservation), tagged `tags`; their ids.
    pub async fn run_instances(&self, count: i32, tags: &[(&str, &str)]) -> Vec<String> {
        let ec2 = &self.clients.ec2;
        let images = ec2.describe_images().owners("amazon").send().await.unwrap();
        let image = images.images().iter().find_map(|i| i.image_id()).unwrap().to_string();
        let out = ec2
            .run_instances()
            .image_id(image)
            .instance_type(aws_sdk_ec2::types::InstanceType::from("m6g.large"))
            .min_count(count)
            .max_count(count)
            .tag_specifications(fixtures::tags(ResourceType::Instance, tags))
            .send()
            .await
            .unwrap();
        out.instances().iter().map(|i| i.instance_id().unwrap().to_string()).collect()
    }

    /// One of moto's Windows images (platform `windows`, x86_64), published as the EKS-optimized
    /// Windows Server `year` image for Kubernetes `version` under the test prefix (what
    /// `windows<year>@latest` resolves on a cluster of that version); its id.
    pub async fn windows_image(&self, year: &str, version: &str) -> String {
        let all = self.clients.ec2.describe_images().owners("amazon").send().await.unwrap();
        let image = all
            .images()
            .iter()
            .find(|i| i.platform().map(|p| p.as_str()) == Some("windows"))
            .and_then(|i| i.image_id())
            .expect("moto has Windows images")
            .to_string();
        fixtures::windows_image(&self.clients.ssm, SSM_PREFIX, year, version, &image).await.unwrap();
        image
    }

    /// Publishes `amd64` and `arm64` (from [`World::images`]) as the `al2023@latest` alias's GPU
    /// (nvidia) and Neuron builds too: moto has none, and an alias gives GPU and Neuron types only
    /// their variant's image.
    pub async fn gpu_images(&self, amd64: &str, arm64: &str) {
        let builds = [("x86_64", "nvidia", amd64), ("x86_64", "neuron", amd64), ("arm64", "nvidia", arm64)];
        fixtures::al2023_variant_images(&self.clients.ssm, SSM_PREFIX, K8S_VERSION, "latest", &builds).await.unwrap();
    }

    /// An amd64 and an arm64 image among moto's, tagged `team=nodes`, and published as the
    /// `al2023@latest` parameters under the test prefix.
    pub async fn images(&self) -> (String, String) {
        let ec2 = &self.clients.ec2;
        let all = ec2.describe_images().owners("amazon").send().await.unwrap();
        let pick = |arch: &str| {
            all.images()
                .iter()
                .find(|i| i.architecture().map(|a| a.as_str()) == Some(arch))
                .and_then(|i| i.image_id())
                .unwrap()
                .to_string()
        };
        let (amd64, arm64) = (pick("x86_64"), pick("arm64"));
        ec2.create_tags()
            .resources(&amd64)
            .resources(&arm64)
            .tags(Tag::builder().key("team").value("nodes").build())
            .send()
            .await
            .unwrap();
        fixtures::al2023_images(&self.clients.ssm, SSM_PREFIX, K8S_VERSION, &[("x86_64", &amd64), ("arm64", &arm64)])
            .await
            .unwrap();
        (amd64, arm64)
    }
}
