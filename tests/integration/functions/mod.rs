//! The functions' handlers (`dovetail_runtime::handlers`, what the Lambda mains serve) run
//! in-process against moto — EC2, DynamoDB, SQS, EventBridge — with the simulator's in-memory
//! Kubernetes cluster (the Kubernetes adapter has its own tests against the real control plane).
//! Events reach the handlers as Lambda's SQS poller delivers them: received from the moto queue,
//! shaped as Lambda's SQS event, and deleted afterwards unless the handler reported them failed.

mod ec2_reads;
mod exactly_once;
mod ice;
pub mod interruption;
mod lambda;
mod provisioner;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_sqs::types::{Message, QueueAttributeName};
use dovetail_api::manifest;
use dovetail_aws::dynamo::create_table;
use dovetail_aws::{DynamoStore, Ec2Cloud, SqsQueue};
use dovetail_core::nodeclaim::{NodeClaim, Phase};
use dovetail_core::reconcile::ports::{Cloud, Store};
use dovetail_core::reconcile::{Ports, Reconciler, Settings};
use dovetail_core::time::Time;
use dovetail_sim::world::{registration, LaunchSpec, SimClock, SimKube, World as Cluster, WorldConfig};

use crate::aws::{World, CLUSTER, TABLE};

/// moto (its network, images, table and queues) and an in-memory cluster with pending pods.
pub struct Rig {
    pub aws: World,
    pub cluster: Cluster,
    pub doorbell_url: String,
    pub interruption_url: String,
}

/// The reconciler the Lambdas build, with the simulator's cluster in place of the Kubernetes
/// adapter.
pub type MotoReconciler = Reconciler<SimKube, Ec2Cloud, DynamoStore, SqsQueue, SimClock>;

impl Rig {
    /// The `arm64-only` example — its pool (with `capacity_types` allowed), its class and its six
    /// arm64-only pods, pending — on moto with the example's network, images, table and queues.
    pub async fn new(capacity_types: &[&str]) -> Rig {
        Rig::with_types(capacity_types, &[]).await
    }

    /// [`Rig::new`], the pool narrowed to `instance_types` when some are given.
    pub async fn with_types(capacity_types: &[&str], instance_types: &[&str]) -> Rig {
        let aws = World::new().await;
        aws.network().await;
        aws.images().await;
        create_table(&aws.clients.dynamodb, TABLE).await.unwrap();
        let queue = |name: &'static str| {
            let sqs = aws.clients.sqs.clone();
            async move { sqs.create_queue().queue_name(name).send().await.unwrap().queue_url().unwrap().to_string() }
        };
        let doorbell_url = queue("dovetail-doorbells").await;
        let interruption_url = queue("dovetail-interruptions").await;

        let allowed = serde_json::to_string(capacity_types).unwrap();
        let mut pool =
            include_str!("../../../infra/examples/arm64-only/nodepool.yaml").replace(r#"["on-demand"]"#, &allowed);
        if !instance_types.is_empty() {
            let types = serde_json::to_string(instance_types).unwrap();
            let narrowed = format!(
                "      requirements:\n        - key: node.kubernetes.io/instance-type\n          operator: In\n          values: {types}\n"
            );
            pool = pool.replacen("      requirements:\n", &narrowed, 1);
        }
        let workload = include_str!("../../../infra/examples/arm64-only/workload.yaml");
        let snapshot = manifest::load_texts([("nodepool.yaml", pool.as_str()), ("workload.yaml", workload)])
            .unwrap()
            .snapshot()
            .unwrap();
        let config = WorldConfig {
            start: now(),
            cluster: CLUSTER.into(),
            interruption_multiplier: 0.0,
            ..WorldConfig::default()
        };
        let cluster = Cluster::new(config);
        {
            let mut s = cluster.lock();
            s.kube.nodepools = snapshot.nodepools;
            s.kube.nodeclasses = snapshot.nodeclasses;
            s.kube.namespaces = snapshot.namespaces;
            let pods = snapshot.pods.len();
            for p in snapshot.pods {
                s.create_pod(p, None, None);
            }
            s.settle();
            assert_eq!(s.kube.provisionable().count(), pods, "every pod pending");
        }
        Rig { aws, cluster, doorbell_url, interruption_url }
    }

    pub fn store(&self) -> DynamoStore {
        DynamoStore::new(self.aws.clients.dynamodb.clone(), TABLE, CLUSTER, self.aws.config.terminated_ttl)
    }

    /// A reconciler on `cloud` (the plain adapter, or one with injected faults) and `store`.
    pub fn reconciler_with<C: Cloud, S: Store>(
        &self,
        cloud: C,
        store: S,
        holder: &str,
    ) -> Reconciler<SimKube, C, S, SqsQueue, SimClock> {
        let ports = Ports {
            kube: SimKube(self.cluster.clone()),
            cloud,
            store,
            queue: SqsQueue::new(self.aws.clients.sqs.clone(), &self.interruption_url),
            clock: SimClock(self.cluster.clone()),
        };
        Reconciler::new(ports, Settings::new(CLUSTER, holder))
    }

    pub fn reconciler(&self, holder: &str) -> MotoReconciler {
        self.reconciler_with(self.aws.cloud(), self.store(), holder)
    }

    /// Sends `bodies` to the queue at `url`.
    pub async fn send(&self, url: &str, bodies: &[String]) {
        for b in bodies {
            self.aws.clients.sqs.send_message().queue_url(url).message_body(b).send().await.unwrap();
        }
    }

    /// The ARN of the queue at `url` (event source mappings and EventBridge targets name it).
    pub async fn queue_arn(&self, url: &str) -> String {
        queue_arn(&self.aws.clients.sqs, url).await
    }

    /// What Lambda's SQS poller would hand the function: up to 10 messages received from the
    /// queue, as an SQS event.
    pub async fn receive(&self, url: &str) -> SqsEvent {
        let arn = self.queue_arn(url).await;
        sqs_event(receive(&self.aws.clients.sqs, url, 10, 0).await, &arn)
    }

    /// What the poller does after the function answered (see [`delete_succeeded`]).
    pub async fn delete_succeeded(&self, url: &str, event: &SqsEvent, failed: &[String]) {
        delete_succeeded(&self.aws.clients.sqs, url, event, failed).await
    }

    /// The test's kubelets: every launched claim's moto instance joins the in-memory cluster as a
    /// Node (labels and taints as its launch template gives them, capacity from its type), then
    /// the provisioner runs until the claims are Initialized and kube-scheduler bound the pods.
    pub async fn join_nodes(&self) {
        let claims = self.live_claims().await;
        {
            let mut s = self.cluster.lock();
            for c in &claims {
                let Some(l) = c.launch.as_ref() else { continue };
                if s.kube.nodes.values().any(|n| n.instance_id == l.instance_id) {
                    continue;
                }
                let spec = LaunchSpec {
                    instance_type: l.instance_type.clone(),
                    zone: l.zone.clone(),
                    capacity_type: l.capacity_type,
                    price: l.price,
                    tags: Default::default(),
                    image_id: l.image_id.clone(),
                    subnet_id: l.subnet_id.clone(),
                    security_groups: l.security_groups.clone(),
                    labels: c.labels.clone(),
                    taints: c.taints.clone(),
                    startup_taints: vec![],
                    kubelet: Default::default(),
                    unregistered_taint: true,
                    // What the node registers as does not depend on the reservation it runs in.
                    reservation: None,
                };
                let reg =
                    registration(&s.catalog, &spec, &s.config.zones, format!("ip-{}.ec2.internal", l.instance_id));
                s.join(&reg, &l.zone, &l.instance_id, l.price);
            }
            s.settle();
        }
        let r = self.reconciler("kubelets");
        for _ in 0..4 {
            self.cluster.advance(self.cluster.now().plus(std::time::Duration::from_secs(30)));
            r.provision().await.expect("a provisioning pass");
        }
        let s = self.cluster.lock();
        assert_eq!(s.kube.provisionable().count(), 0, "every pod bound");
    }

    /// Live (not Terminated) NodeClaims in DynamoDB.
    pub async fn live_claims(&self) -> Vec<NodeClaim> {
        self.store().claims().await.unwrap().into_iter().filter(|c| c.phase != Phase::Terminated).collect()
    }

    /// Instances of this cluster in moto that are pending or running.
    pub async fn instances(&self) -> Vec<(String, String, Option<String>)> {
        cluster_instances(&self.aws.clients.ec2).await
    }

    /// See [`assert_exactly_once`].
    pub async fn assert_exactly_once(&self, context: &str) {
        assert_exactly_once(&self.live_claims().await, &self.instances().await, context)
    }
}

/// Instances of this cluster in moto that are pending or running: (id, claim tag, lifecycle).
pub async fn cluster_instances(ec2: &aws_sdk_ec2::Client) -> Vec<(String, String, Option<String>)> {
    let out = ec2
        .describe_instances()
        .filters(aws_sdk_ec2::types::Filter::builder().name("tag:dovetail.dev/cluster").values(CLUSTER).build())
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("instance-state-name")
                .values("pending")
                .values("running")
                .build(),
        )
        .send()
        .await
        .unwrap();
    out.reservations()
        .iter()
        .flat_map(|r| r.instances())
        .map(|i| {
            let claim = i
                .tags()
                .iter()
                .find(|t| t.key() == Some("dovetail.dev/nodeclaim"))
                .and_then(|t| t.value())
                .unwrap_or_default()
                .to_string();
            (i.instance_id().unwrap().to_string(), claim, i.instance_lifecycle().map(|l| l.as_str().to_string()))
        })
        .collect()
}

/// Every live instance belongs to exactly one live claim, and every live claim recorded its
/// instance.
pub fn assert_exactly_once(claims: &[NodeClaim], instances: &[(String, String, Option<String>)], context: &str) {
    for (id, tag, _) in instances {
        let owners: Vec<&NodeClaim> =
            claims.iter().filter(|c| c.launch.as_ref().is_some_and(|l| &l.instance_id == id)).collect();
        assert_eq!(owners.len(), 1, "{context}: instance {id} (tag {tag}) is owned by {} claims", owners.len());
        assert_eq!(&owners[0].name, tag, "{context}: instance {id}'s tag names its claim");
    }
    for c in claims {
        let launch =
            c.launch.as_ref().unwrap_or_else(|| panic!("{context}: claim {} never recorded its instance", c.name));
        assert!(
            instances.iter().any(|(id, ..)| id == &launch.instance_id),
            "{context}: claim {} has no live instance",
            c.name
        );
    }
}

/// The ARN of the queue at `url`.
pub async fn queue_arn(sqs: &aws_sdk_sqs::Client, url: &str) -> String {
    let out =
        sqs.get_queue_attributes().queue_url(url).attribute_names(QueueAttributeName::QueueArn).send().await.unwrap();
    out.attributes().and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned()).unwrap()
}

/// One ReceiveMessage call: up to `max` messages, waiting up to `wait_seconds` for the first.
pub async fn receive(sqs: &aws_sdk_sqs::Client, url: &str, max: i32, wait_seconds: i32) -> Vec<Message> {
    let got = sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(max)
        .wait_time_seconds(wait_seconds)
        .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
        .send()
        .await
        .unwrap();
    got.messages().to_vec()
}

/// Received messages as Lambda's SQS event hands them to the function (`eventSource`,
/// `eventSourceARN` = `arn`, `receiptHandle`, attributes).
pub fn sqs_event(messages: Vec<Message>, arn: &str) -> SqsEvent {
    let records: Vec<serde_json::Value> = messages
        .iter()
        .map(|m| {
            serde_json::json!({
                "messageId": m.message_id(),
                "receiptHandle": m.receipt_handle(),
                "body": m.body(),
                "md5OfBody": m.md5_of_body(),
                "attributes": m.attributes().map(|a| a.iter().map(|(k, v)| (k.as_str().to_string(), v.clone())).collect::<std::collections::BTreeMap<_, _>>()),
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": dovetail_tests::moto::REGION,
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({ "Records": records })).expect("Lambda's SQS event shape")
}

/// What the poller does after the function answered: deletes every message not reported failed
/// (those come back after the visibility timeout).
pub async fn delete_succeeded(sqs: &aws_sdk_sqs::Client, url: &str, event: &SqsEvent, failed: &[String]) {
    for r in &event.records {
        let m: &SqsMessage = r;
        if m.message_id.as_ref().is_some_and(|id| failed.contains(id)) {
            continue;
        }
        let handle = m.receipt_handle.clone().unwrap();
        // A message received again meanwhile (its visibility timeout ran out while the function
        // ran) has a new receipt handle; the old one no longer deletes it, and it is handled again.
        if let Err(e) = sqs.delete_message().queue_url(url).receipt_handle(handle).send().await {
            eprintln!("deleting {:?}: {} (it comes back)", m.message_id, aws_sdk_sqs::error::DisplayErrorContext(&e));
        }
    }
}

/// A doorbell as the forwarder rings it (its own encoder).
pub fn doorbell(pod: &str) -> String {
    let at = k8s_openapi::jiff::Timestamp::now();
    dovetail_forwarder::doorbell::Doorbell::Pod { namespace: "payments".into(), name: pod.into(), at }.body()
}

pub fn now() -> Time {
    dovetail_core::reconcile::ports::Clock::now(&dovetail_runtime::clock::SystemClock)
}
