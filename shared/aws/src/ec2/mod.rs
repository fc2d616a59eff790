//! [`Cloud`] on EC2 (with SSM for AMI aliases and the Pricing API for on-demand prices).
//!
//! - `catalog`: instance types and offerings refreshed every `catalog_ttl` (5 min), prices every
//!   `price_ttl` (12 h); when EC2 cannot be read the last catalog stays, or the embedded one
//!   serves; when Pricing cannot be read the embedded prices serve.
//! - `resolve`: subnets, security groups and images from the class's selector terms, cached a
//!   minute per class spec.
//! - `launch`: the claim's instance if one is already tagged for it; else one launch template per
//!   (image, maxPods) group of the offered types, then CreateFleet `instant` for one unit.
//! - `instances`: DescribeInstances of every instance tagged `dovetail.dev/cluster` (the sweeper's
//!   reconciliation). `instances_of`: only the instances a per-event read asks for, by the
//!   `instance-id` filter and by the `dovetail.dev/nodeclaim` tag, in chunks of the 200 filter
//!   values EC2 takes per call; an empty query makes no call. `find_launched`: by the
//!   `dovetail.dev/nodeclaim` tag, live instances only. `terminate`: TerminateInstances, an
//!   unknown instance being already gone.

pub mod catalog;
pub mod filters;
pub mod fleet;
pub mod launch_template;
pub mod pricing;
pub mod reservations;
pub mod resolve;
pub mod userdata;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_sdk_ec2::types::{
    Filter, FleetLaunchTemplateConfigRequest, FleetLaunchTemplateOverridesRequest,
    FleetLaunchTemplateSpecificationRequest, FleetOnDemandAllocationStrategy, FleetReservationType, FleetType,
    InstanceLifecycle, InstanceLifecycleType, InstanceType as SdkInstanceType, OnDemandOptionsRequest,
    ReservedCapacityOptionsRequest, ResourceType, SpotAllocationStrategy, SpotOptionsRequest, Tag, TagSpecification,
    TargetCapacitySpecificationRequest,
};
use dovetail_api::crd::{AmiFamily, InstanceStorePolicy};
use dovetail_core::catalog::{
    embedded, CapacityType, Catalog, ImageVariant, InstanceResources, Reservation, ReservationKind,
};
use dovetail_core::cluster::{Instance, InstanceQuery, ResolvedClass};
use dovetail_core::disruption::drift::resolved_image;
use dovetail_core::labels;
use dovetail_core::model::{NodeClass, NodeOs};
use dovetail_core::nodeclaim::Launch;
use dovetail_core::overhead;
use dovetail_core::reconcile::ports::{Cloud, LaunchOutcome, LaunchRequest, PortError, PortResult};
use dovetail_core::time::Time;
use tokio::sync::Mutex;

use crate::clients::Clients;
use crate::config::Config;
use crate::eks::ClusterFacts;
use crate::error::{api_error, AwsError, AwsResult, ErrorKind};
use crate::iam::InstanceProfiles;
use fleet::{FleetError, Override, Verdict};
use pricing::PriceBook;
use resolve::{Resolution, Resolver};

/// Tag naming the cluster an instance (or launch template) belongs to.
pub const TAG_CLUSTER: &str = "dovetail.dev/cluster";
/// Tag naming the NodePool of an instance.
pub const TAG_NODEPOOL: &str = labels::NODEPOOL;
/// Tag naming the EC2NodeClass of an instance.
pub const TAG_NODECLASS: &str = labels::NODECLASS;
/// Tag naming the NodeClaim of an instance: how a launch is found again.
pub const TAG_NODECLAIM: &str = labels::NODECLAIM;

/// How long a class resolution is reused.
const RESOLVE_TTL: Duration = Duration::from_secs(60);
/// The waits before relaunching a fleet refused because EC2 does not see a new instance profile
/// yet: 6 s in all, with the four calls about as long as IAM's changes usually take to reach EC2
/// (some seconds, ten at worst), and within the time an invocation keeps for finishing
/// (`dovetail_core::reconcile::deadline::RESERVE`), so a launch started just before its deadline
/// still ends in time. Longer, the claim's launch is resumed by a later pass.
pub const PROFILE_WAITS: [Duration; 3] = [Duration::from_secs(1), Duration::from_secs(2), Duration::from_secs(3)];
/// How long a fallback (embedded catalog, embedded prices) serves before the APIs are tried again.
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// Filter values EC2 accepts in one DescribeInstances call, all filters together (more is
/// `FilterLimitExceeded`).
const FILTER_VALUES: usize = 200;

/// Results per DescribeInstances page: EC2's largest. Left unset it is the endpoint's choice
/// (moto's is 100), and the sweeper's reconciliation of a 5,000-node cluster could take fifty
/// calls against EC2's request rate limit where five do.
const DESCRIBE_PAGE: i32 = 1000;

/// Instance states in which an instance still stands for its claim.
const LIVE_STATES: [&str; 4] = ["pending", "running", "stopping", "stopped"];

fn now() -> Time {
    Time(SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0))
}

/// A cached value and when it must be fetched again.
#[derive(Debug, Clone)]
struct Cached<T> {
    value: T,
    until: Instant,
}

impl<T: Clone> Cached<T> {
    fn fresh(slot: &Option<Cached<T>>) -> Option<T> {
        slot.as_ref().filter(|c| Instant::now() < c.until).map(|c| c.value.clone())
    }
}

/// The EC2 adapter.
#[derive(Debug)]
pub struct Ec2Cloud {
    ec2: aws_sdk_ec2::Client,
    pricing: aws_sdk_pricing::Client,
    resolver: Resolver,
    /// The instance profiles made for classes' roles (IAM).
    profiles: InstanceProfiles,
    cluster: ClusterFacts,
    region: String,
    catalog_ttl: Duration,
    price_ttl: Duration,
    catalog: Mutex<Option<Cached<Arc<Catalog>>>>,
    prices: Mutex<Option<Cached<Arc<PriceBook>>>>,
    /// Class name → (spec as JSON, resolution).
    resolutions: Mutex<HashMap<String, Cached<(String, Resolution)>>>,
    /// Subnet id → zone, from resolutions and lookups.
    subnet_zones: Mutex<HashMap<String, String>>,
    /// Launch templates known to exist.
    templates: Mutex<HashSet<String>>,
    /// The waits before relaunching a fleet EC2 refused for an instance profile it does not see
    /// yet.
    profile_waits: Vec<Duration>,
}

impl Ec2Cloud {
    pub fn new(clients: &Clients, config: &Config, cluster: ClusterFacts) -> Ec2Cloud {
        let region = config
            .region
            .clone()
            .or_else(|| clients.sdk.region().map(|r| r.to_string()))
            .unwrap_or_else(|| "us-east-1".to_string());
        Ec2Cloud {
            ec2: clients.ec2.clone(),
            pricing: clients.pricing.clone(),
            resolver: Resolver {
                ec2: clients.ec2.clone(),
                ssm: clients.ssm.clone(),
                ssm_prefix: config.ssm_prefix.clone(),
                k8s_version: cluster.version.clone(),
            },
            profiles: InstanceProfiles::new(clients.iam.clone(), &region, &cluster.name),
            cluster,
            region,
            catalog_ttl: config.catalog_ttl,
            price_ttl: config.price_ttl,
            catalog: Mutex::new(None),
            prices: Mutex::new(None),
            resolutions: Mutex::new(HashMap::new()),
            subnet_zones: Mutex::new(HashMap::new()),
            templates: Mutex::new(HashSet::new()),
            profile_waits: PROFILE_WAITS.to_vec(),
        }
    }

    /// The cluster name tagged on everything this adapter creates.
    pub fn cluster(&self) -> &ClusterFacts {
        &self.cluster
    }

    /// Prices, refreshed every `price_ttl`; a source that fails is retried after a minute, the
    /// embedded prices serving meanwhile.
    pub async fn prices(&self) -> Arc<PriceBook> {
        let mut slot = self.prices.lock().await;
        if let Some(p) = Cached::fresh(&slot) {
            return p;
        }
        let (on_demand, spot) =
            tokio::join!(pricing::on_demand_prices(&self.pricing, &self.region), pricing::spot_prices(&self.ec2));
        let complete = on_demand.is_ok() && spot.is_ok();
        let book = Arc::new(PriceBook { on_demand: on_demand.unwrap_or_default(), spot: spot.unwrap_or_default() });
        let ttl = if complete { self.price_ttl } else { RETRY_AFTER.min(self.price_ttl) };
        *slot = Some(Cached { value: book.clone(), until: Instant::now() + ttl });
        book
    }

    async fn fetch_catalog(&self) -> AwsResult<Catalog> {
        let (zones, types, offered, prices) = tokio::join!(
            catalog::zones(&self.ec2),
            catalog::describe_types(&self.ec2),
            catalog::offerings(&self.ec2),
            self.prices()
        );
        Ok(catalog::build_catalog(&types?, &offered?, &zones?, &prices, embedded()))
    }

    /// The resolution of `class`, from the cache while its spec is unchanged and fresh.
    pub async fn resolution(&self, class: &NodeClass) -> AwsResult<Resolution> {
        let spec_json = class.spec.to_string();
        let cached = self
            .resolutions
            .lock()
            .await
            .get(&class.name)
            .filter(|c| Instant::now() < c.until)
            .map(|c| c.value.clone());
        if let Some((spec, r)) = cached {
            if spec == spec_json {
                return Ok(r);
            }
        }
        let mut r = self.resolver.resolve(class).await?;
        match self.profiles.for_class(class).await? {
            Ok(profile) => r.resolved.instance_profile = Some(profile),
            Err(why) => r.resolved.instance_profile_problem = Some(why),
        }
        self.subnet_zones.lock().await.extend(r.subnets.iter().map(|s| (s.id.clone(), s.zone.clone())));
        self.resolutions
            .lock()
            .await
            .insert(class.name.clone(), Cached { value: (spec_json, r.clone()), until: Instant::now() + RESOLVE_TTL });
        Ok(r)
    }

    /// Zone → subnet for the resolved subnets (looked up when not seen in a resolution).
    async fn subnet_by_zone(&self, resolved: &ResolvedClass) -> AwsResult<BTreeMap<String, String>> {
        let unknown: Vec<String> = {
            let zones = self.subnet_zones.lock().await;
            resolved.subnets.iter().filter(|s| !zones.contains_key(*s)).cloned().collect()
        };
        if !unknown.is_empty() {
            let out = self
                .ec2
                .describe_subnets()
                .filters(Filter::builder().name("subnet-id").set_values(Some(unknown)).build())
                .send()
                .await
                .map_err(|e| api_error("DescribeSubnets", e))?;
            let mut zones = self.subnet_zones.lock().await;
            for s in out.subnets() {
                if let (Some(id), Some(zone)) = (s.subnet_id(), s.availability_zone()) {
                    zones.insert(id.to_string(), zone.to_string());
                }
            }
        }
        let zones = self.subnet_zones.lock().await;
        let mut out = BTreeMap::new();
        for s in &resolved.subnets {
            if let Some(zone) = zones.get(s) {
                out.entry(zone.clone()).or_insert_with(|| s.clone());
            }
        }
        Ok(out)
    }

    /// Ensures the launch templates for `request` and says which template each offered type uses:
    /// types are grouped by (image for their architecture and variant, maxPods), one template per
    /// group.
    async fn templates_for(
        &self,
        request: &LaunchRequest,
        catalog: &Catalog,
        reservation: Option<&Reservation>,
    ) -> PortResult<HashMap<String, (String, String)>> {
        let spec = resolve::spec(&request.class)?;
        let claim = &request.claim;
        // Only labels every instance of the pool carries whatever the fleet picks: not those of an
        // instance type, zone or capacity type (the plan names its cheapest candidate's), nor the
        // claim's name, which would make a template per claim. Registration labels the Node with
        // the rest, as Karpenter does.
        let mut node_labels: BTreeMap<String, String> = claim
            .labels
            .iter()
            .filter(|(k, _)| !labels::is_well_known(k) && k.as_str() != labels::NODECLAIM)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        node_labels.insert(labels::NODEPOOL.into(), claim.nodepool.clone());
        node_labels.insert(labels::KARPENTER_NODEPOOL.into(), claim.nodepool.clone());
        let taints: Vec<_> = claim.taints.iter().chain(&claim.startup_taints).cloned().collect();

        let mut by_type = HashMap::new();
        let mut groups: BTreeMap<(String, i64), String> = BTreeMap::new();
        for offer in &request.offers {
            if by_type.contains_key(&offer.instance_type) {
                continue;
            }
            let Some(t) = catalog.get(&offer.instance_type) else { continue };
            let arch = t.requirements.get(labels::ARCH).and_then(|r| r.single_value()).unwrap_or("amd64");
            let Some(image) = resolved_image(&request.resolved, &offer.instance_type, Some(arch), ImageVariant::of(t))
            else {
                continue;
            };
            let image = image.to_string();
            let max_pods = match &t.resources {
                InstanceResources::Ec2(facts) => overhead::max_pods(facts, &request.class.kubelet),
                InstanceResources::Fixed { .. } => overhead::DEFAULT_MAX_PODS,
            };
            let key = (image.clone(), max_pods);
            if let Some(name) = groups.get(&key) {
                by_type.insert(offer.instance_type.clone(), (name.clone(), image.clone()));
                continue;
            }
            let user_data = match spec.ami_family() {
                // Karpenter's `Custom`: the image bootstraps itself from the class's user data,
                // which goes to the instance as written, with nothing of Dovetail's added.
                AmiFamily::Custom => spec.user_data.clone().unwrap_or_default(),
                family => userdata::user_data(&userdata::NodeSettings {
                    cluster: &self.cluster,
                    labels: &node_labels,
                    taints: &taints,
                    max_pods,
                    kubelet: spec.kubelet.as_ref(),
                    user_data: spec.user_data.as_deref(),
                    family,
                    raid0: spec.instance_store_policy == Some(InstanceStorePolicy::Raid0),
                })
                .map_err(|e| AwsError::Class {
                    class: request.class.name.clone(),
                    message: format!("spec.userData: {e}"),
                })?,
            };
            let mut content = launch_template::content(
                &spec,
                &image,
                &user_data,
                &request.resolved.security_groups,
                request.resolved.instance_profile.as_deref(),
            );
            content.reservation = reservation.map(launch_template::TemplateReservation::of);
            let name = content.name(&self.cluster.name);
            if !self.templates.lock().await.contains(&name) {
                launch_template::ensure(&self.ec2, &name, &content, &self.cluster.name).await?;
                self.templates.lock().await.insert(name.clone());
            }
            groups.insert(key, name.clone());
            by_type.insert(offer.instance_type.clone(), (name, image.clone()));
        }
        Ok(by_type)
    }

    /// Sends a CreateFleet (`call`, all but its client token). Right after a class's instance
    /// profile was made or given its role, EC2 may not see it yet and refuses the launch: that is
    /// retried after each of `profile_waits`, a new request each time (see
    /// [`fleet::client_token`]), and is no launch failure unless EC2 still refuses after the last.
    async fn create_fleet(
        &self,
        call: aws_sdk_ec2::operation::create_fleet::builders::CreateFleetFluentBuilder,
        request: &LaunchRequest,
        capacity: CapacityType,
        overrides: &[Override],
    ) -> PortResult<aws_sdk_ec2::operation::create_fleet::CreateFleetOutput> {
        let claim = &request.claim.name;
        let profile = request.resolved.instance_profile.as_deref().unwrap_or_default();
        for retry in 0..=self.profile_waits.len() {
            let token = fleet::client_token(claim, capacity, overrides, retry);
            let sent = call.clone().client_token(token).send().await.map_err(|e| api_error("CreateFleet", e));
            let unseen = match &sent {
                Err(AwsError::Api { code, message, .. }) => {
                    fleet::profile_not_yet_visible(code.as_deref().unwrap_or_default(), message)
                }
                Err(_) => false,
                Ok(out) => {
                    out.instances().iter().all(|i| i.instance_ids().is_empty())
                        && !out.errors().is_empty()
                        && out.errors().iter().all(|e| {
                            fleet::profile_not_yet_visible(
                                e.error_code().unwrap_or_default(),
                                e.error_message().unwrap_or_default(),
                            )
                        })
                }
            };
            if !unseen {
                return Ok(sent?);
            }
            let Some(wait) = self.profile_waits.get(retry) else { break };
            tracing::info!(claim = %claim, profile, ?wait, "EC2 does not see the instance profile yet; launching again");
            tokio::time::sleep(*wait).await;
        }
        Err(PortError::Unavailable(format!(
            "NodeClaim {claim}: EC2 still does not see instance profile {profile} after {} tries; IAM is eventually \
             consistent, so the launch is tried again later",
            self.profile_waits.len() + 1
        )))
    }

    /// How long to wait before each relaunch of a fleet refused because EC2 did not see the
    /// class's instance profile yet (default [`PROFILE_WAITS`]).
    pub fn with_profile_waits(mut self, waits: Vec<Duration>) -> Ec2Cloud {
        self.profile_waits = waits;
        self
    }

    fn tags(&self, request: &LaunchRequest) -> Vec<Tag> {
        let mut tags: BTreeMap<String, String> = request.class.tags.clone();
        tags.insert(format!("kubernetes.io/cluster/{}", self.cluster.name), "owned".into());
        tags.insert(TAG_CLUSTER.into(), self.cluster.name.clone());
        tags.insert(TAG_NODEPOOL.into(), request.claim.nodepool.clone());
        // What the sweeper's instance-profile clean-up counts a class's instances by.
        tags.insert(TAG_NODECLASS.into(), request.class.name.clone());
        tags.insert(TAG_NODECLAIM.into(), request.claim.name.clone());
        tags.insert("Name".into(), request.claim.name.clone());
        tags.into_iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()
    }

    async fn describe(&self, filters: Vec<Filter>) -> AwsResult<Vec<aws_sdk_ec2::types::Instance>> {
        let reservations = self
            .ec2
            .describe_instances()
            .set_filters(Some(filters))
            .max_results(DESCRIBE_PAGE)
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| api_error("DescribeInstances", e))?;
        Ok(reservations.iter().flat_map(|r| r.instances().iter().cloned()).collect())
    }

    fn tag_filter(key: &str, value: &str) -> Filter {
        Filter::builder().name(format!("tag:{key}")).values(value).build()
    }

    /// The cluster's instances whose `filter` has one of `values`: one paginated describe per
    /// chunk (the cluster tag takes one of the call's filter values).
    async fn describe_where(&self, filter: &str, values: &[String]) -> AwsResult<Vec<aws_sdk_ec2::types::Instance>> {
        let mut found = Vec::new();
        for chunk in values.chunks(FILTER_VALUES - 1) {
            let wanted = Filter::builder().name(filter).set_values(Some(chunk.to_vec())).build();
            found.extend(self.describe(vec![Self::tag_filter(TAG_CLUSTER, &self.cluster.name), wanted]).await?);
        }
        Ok(found)
    }
}

fn time_of(t: Option<&aws_sdk_ec2::primitives::DateTime>) -> Time {
    t.and_then(|t| t.to_millis().ok()).map(Time).unwrap_or_default()
}

/// The core's view of an EC2 instance.
pub fn instance_of(i: &aws_sdk_ec2::types::Instance) -> Instance {
    Instance {
        id: i.instance_id().unwrap_or_default().to_string(),
        instance_type: i.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
        zone: i.placement().and_then(|p| p.availability_zone()).unwrap_or_default().to_string(),
        state: i.state().and_then(|s| s.name()).map(|n| n.as_str().to_string()).unwrap_or_default(),
        launched_at: time_of(i.launch_time()),
        tags: i
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string())))
            .collect(),
        image_id: i.image_id().unwrap_or_default().to_string(),
        subnet_id: i.subnet_id().unwrap_or_default().to_string(),
        security_groups: i.security_groups().iter().filter_map(|g| g.group_id()).map(str::to_string).collect(),
    }
}

impl Cloud for Ec2Cloud {
    async fn catalog(&self) -> PortResult<Arc<Catalog>> {
        let mut slot = self.catalog.lock().await;
        if let Some(c) = Cached::fresh(&slot) {
            return Ok(c);
        }
        let catalog = match self.fetch_catalog().await {
            Ok(c) if !c.types.is_empty() => Arc::new(c),
            // Keep what we had; else the embedded catalog. Try again in a minute.
            _ => {
                let fallback = slot.as_ref().map(|c| c.value.clone()).unwrap_or_else(|| Arc::new(embedded().clone()));
                *slot =
                    Some(Cached { value: fallback.clone(), until: Instant::now() + RETRY_AFTER.min(self.catalog_ttl) });
                return Ok(fallback);
            }
        };
        *slot = Some(Cached { value: catalog.clone(), until: Instant::now() + self.catalog_ttl });
        Ok(catalog)
    }

    async fn instances(&self) -> PortResult<Vec<Instance>> {
        let found = self.describe(vec![Self::tag_filter(TAG_CLUSTER, &self.cluster.name)]).await?;
        Ok(found.iter().map(instance_of).collect())
    }

    async fn instances_of(&self, query: &InstanceQuery) -> PortResult<Vec<Instance>> {
        // The `instance-id` filter rather than InstanceIds: an id EC2 no longer knows (an event
        // about an instance long gone) would fail the whole call with InvalidInstanceID.NotFound.
        let ids: Vec<String> = query.ids.iter().cloned().collect();
        let claims: Vec<String> = query.claims.iter().cloned().collect();
        let mut found = self.describe_where("instance-id", &ids).await?;
        found.extend(self.describe_where(&format!("tag:{TAG_NODECLAIM}"), &claims).await?);
        // An instance asked for both ways is listed once.
        let unique: BTreeMap<String, Instance> = found.iter().map(instance_of).map(|i| (i.id.clone(), i)).collect();
        Ok(unique.into_values().collect())
    }

    async fn resolve(&self, class: &NodeClass) -> PortResult<ResolvedClass> {
        Ok(self.resolution(class).await?.resolved)
    }

    async fn instance_profiles(&self) -> PortResult<Vec<dovetail_core::instance_profile::Listed>> {
        Ok(self.profiles.list().await?)
    }

    async fn delete_instance_profile(&self, name: &str) -> PortResult<()> {
        Ok(self.profiles.delete(name).await?)
    }

    async fn launch(&self, request: &LaunchRequest) -> PortResult<LaunchOutcome> {
        let claim = &request.claim.name;
        // Already launched (a crash after CreateFleet, a redelivery, a retry with other offers).
        if let Some(launch) = self.find_launched(claim).await? {
            return Ok(LaunchOutcome::Launched(launch));
        }
        let Some(capacity) = request.offers.first().map(|o| o.capacity_type) else {
            return Err(PortError::Rejected(format!("NodeClaim {claim}: nothing offered to launch")));
        };
        if request.offers.iter().any(|o| o.capacity_type != capacity) {
            return Err(PortError::Rejected(format!("NodeClaim {claim}: offers mix capacity types")));
        }
        // A reserved launch goes into the one reservation its offer names.
        let reservation = request.offers.iter().find_map(|o| o.reservation.as_ref());
        if capacity == CapacityType::Reserved && reservation.is_none() {
            return Err(PortError::Rejected(format!("NodeClaim {claim}: reserved offers name no reservation")));
        }
        let catalog = self.catalog().await?;
        let subnets = self.subnet_by_zone(&request.resolved).await?;
        let templates = self.templates_for(request, &catalog, reservation).await?;
        let overrides = fleet::overrides(&request.offers, &subnets, |t| templates.get(t).map(|(name, _)| name.clone()));
        if overrides.is_empty() {
            return Err(PortError::Rejected(format!(
                "NodeClaim {claim}: no offer is in a zone of the class's subnets ({}) with an image for its architecture",
                subnets.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        }

        // One launch template config per template, in the order of their cheapest override.
        let mut configs: Vec<(String, Vec<&Override>)> = Vec::new();
        for o in &overrides {
            match configs.iter_mut().find(|(t, _)| *t == o.template) {
                Some((_, list)) => list.push(o),
                None => configs.push((o.template.clone(), vec![o])),
            }
        }
        let tags = self.tags(request);
        let spec = resolve::spec(&request.class)?;
        let mut call = self
            .ec2
            .create_fleet()
            .r#type(FleetType::Instant)
            .set_context(spec.context.clone())
            .target_capacity_specification(
                TargetCapacitySpecificationRequest::builder()
                    .total_target_capacity(1)
                    .default_target_capacity_type(fleet::target_capacity(capacity, reservation))
                    .build(),
            );
        let on_demand = |call: aws_sdk_ec2::operation::create_fleet::builders::CreateFleetFluentBuilder| {
            call.on_demand_options(
                OnDemandOptionsRequest::builder()
                    .allocation_strategy(FleetOnDemandAllocationStrategy::LowestPrice)
                    .build(),
            )
        };
        call = match (capacity, reservation) {
            (CapacityType::Spot, _) => call.spot_options(
                SpotOptionsRequest::builder()
                    .allocation_strategy(SpotAllocationStrategy::PriceCapacityOptimized)
                    .build(),
            ),
            (CapacityType::OnDemand, _) => on_demand(call),
            // Karpenter's options per reservation kind: none for a Capacity Block.
            (CapacityType::Reserved, Some(r)) if r.kind == ReservationKind::CapacityBlock => call,
            (CapacityType::Reserved, Some(r)) if r.interruptible => call.reserved_capacity_options(
                ReservedCapacityOptionsRequest::builder()
                    .reservation_types(FleetReservationType::InterruptibleCapacityReservation)
                    .build(),
            ),
            (CapacityType::Reserved, _) => on_demand(call),
        };
        for (template, list) in &configs {
            let mut config = FleetLaunchTemplateConfigRequest::builder().launch_template_specification(
                FleetLaunchTemplateSpecificationRequest::builder()
                    .launch_template_name(template)
                    .version("$Latest")
                    .build(),
            );
            for o in list {
                config = config.overrides(
                    FleetLaunchTemplateOverridesRequest::builder()
                        .instance_type(SdkInstanceType::from(o.instance_type.as_str()))
                        .subnet_id(&o.subnet_id)
                        .availability_zone(&o.zone)
                        .build(),
                );
            }
            call = call.launch_template_configs(config.build());
        }
        for resource in [ResourceType::Instance, ResourceType::Volume] {
            call = call.tag_specifications(
                TagSpecification::builder().resource_type(resource).set_tags(Some(tags.clone())).build(),
            );
        }
        let out = self.create_fleet(call, request, capacity, &overrides).await?;

        let launched = out.instances().iter().find_map(|i| Some((i, i.instance_ids().first()?)));
        if let Some((instance, id)) = launched {
            let chosen = instance.launch_template_and_overrides().and_then(|l| l.overrides());
            let instance_type = instance
                .instance_type()
                .or_else(|| chosen.and_then(|c| c.instance_type()))
                .map(|t| t.as_str().to_string())
                .unwrap_or_else(|| overrides[0].instance_type.clone());
            let subnet = chosen.and_then(|c| c.subnet_id());
            let o = overrides
                .iter()
                .find(|o| o.instance_type == instance_type && subnet.is_none_or(|s| s == o.subnet_id))
                .unwrap_or(&overrides[0]);
            let capacity_type = match instance.lifecycle() {
                // The fleet reports a reserved launch's lifecycle as on-demand.
                _ if capacity == CapacityType::Reserved => CapacityType::Reserved,
                Some(InstanceLifecycle::Spot) => CapacityType::Spot,
                Some(InstanceLifecycle::OnDemand) => CapacityType::OnDemand,
                _ => capacity,
            };
            return Ok(LaunchOutcome::Launched(Launch {
                instance_id: id.clone(),
                instance_type: o.instance_type.clone(),
                zone: o.zone.clone(),
                capacity_type,
                image_id: templates.get(&o.instance_type).map(|(_, image)| image.clone()).unwrap_or_default(),
                subnet_id: o.subnet_id.clone(),
                security_groups: request.resolved.security_groups.clone(),
                price: o.price,
                launched_at: now(),
            }));
        }
        let errors: Vec<FleetError> = out
            .errors()
            .iter()
            .map(|e| {
                let o = e.launch_template_and_overrides().and_then(|l| l.overrides());
                FleetError {
                    code: e.error_code().unwrap_or_default().to_string(),
                    message: e.error_message().unwrap_or_default().to_string(),
                    instance_type: o.and_then(|o| o.instance_type()).map(|t| t.as_str().to_string()),
                    zone: o.and_then(|o| o.availability_zone()).map(str::to_string),
                    subnet_id: o.and_then(|o| o.subnet_id()).map(str::to_string),
                }
            })
            .collect();
        match fleet::judge(&errors, capacity, &overrides) {
            Verdict::NoCapacity { offerings, message } => Ok(LaunchOutcome::NoCapacity { offerings, message }),
            Verdict::Failed { kind, message } => {
                if errors.iter().any(|e| e.code.starts_with("InvalidLaunchTemplate")) {
                    // Deleted behind our back: create it again next time.
                    self.templates.lock().await.clear();
                }
                let e = AwsError::Api {
                    operation: "CreateFleet",
                    code: errors.first().map(|e| e.code.clone()),
                    message,
                    kind,
                };
                Err(match kind {
                    ErrorKind::Conflict | ErrorKind::Retryable => PortError::Unavailable(e.to_string()),
                    ErrorKind::Refused => PortError::Rejected(e.to_string()),
                })
            }
        }
    }

    async fn find_launched(&self, claim: &str) -> PortResult<Option<Launch>> {
        let mut found = self
            .describe(vec![
                Self::tag_filter(TAG_NODECLAIM, claim),
                Self::tag_filter(TAG_CLUSTER, &self.cluster.name),
                Filter::builder()
                    .name("instance-state-name")
                    .set_values(Some(LIVE_STATES.map(String::from).to_vec()))
                    .build(),
            ])
            .await?;
        // The first launched, should EC2 ever hold two.
        found.sort_by_key(|i| (time_of(i.launch_time()), i.instance_id().unwrap_or_default().to_string()));
        let Some(i) = found.first() else { return Ok(None) };
        let instance = instance_of(i);
        let capacity_type = match i.instance_lifecycle() {
            Some(InstanceLifecycleType::Spot) => CapacityType::Spot,
            _ if i.capacity_reservation_id().is_some() => CapacityType::Reserved,
            _ => CapacityType::OnDemand,
        };
        let price = Cached::fresh(&*self.catalog.lock().await)
            .and_then(|c| {
                let (t, zone) = (&instance.instance_type, &instance.zone);
                c.offering_price(t, zone, capacity_type, NodeOs::Linux)
            })
            .unwrap_or(0.0);
        Ok(Some(Launch {
            instance_id: instance.id,
            instance_type: instance.instance_type,
            zone: instance.zone,
            capacity_type,
            image_id: instance.image_id,
            subnet_id: instance.subnet_id,
            security_groups: instance.security_groups,
            price,
            launched_at: instance.launched_at,
        }))
    }

    async fn terminate(&self, instance_id: &str) -> PortResult<()> {
        match self.ec2.terminate_instances().instance_ids(instance_id).send().await {
            Ok(_) => Ok(()),
            Err(e) => {
                let e = api_error("TerminateInstances", e);
                match &e {
                    AwsError::Api { code: Some(c), .. } if c == "InvalidInstanceID.NotFound" => Ok(()),
                    _ => Err(e.into()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relaunching_for_an_unseen_profile_fits_in_what_an_invocation_keeps_for_finishing() {
        let waited: Duration = PROFILE_WAITS.iter().sum();
        // Four CreateFleet calls of about a second each on top.
        let calls = Duration::from_secs(PROFILE_WAITS.len() as u64 + 1);
        assert!(waited + calls <= dovetail_core::reconcile::deadline::RESERVE, "{waited:?} + {calls:?}");
    }
}
