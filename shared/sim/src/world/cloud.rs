//! EC2 in memory: CreateFleet (one instance, the cheapest offer with capacity, idempotent on the
//! client token), instances that boot, get reclaimed when they are spot, and terminate; and the
//! EventBridge events EC2 sends about them.

use rand::Rng;
use std::collections::BTreeMap;
use std::future::{ready, Future};
use std::sync::Arc;
use std::time::Duration;

use dovetail_core::catalog::{
    spot_band_monthly_rate, spot_interruption_band, CapacityType, Catalog, ImageVariant, OfferingKey,
};
use dovetail_core::cluster::{Instance, InstanceQuery, ResolvedClass};
use dovetail_core::disruption::drift::resolved_image;
use dovetail_core::hash::nodeclass_hash;
use dovetail_core::instance_profile::{self, Wanted};
use dovetail_core::interruption::{
    CAPACITY_BLOCK_EXPIRY, REBALANCE_RECOMMENDATION, SOURCE_EC2, SPOT_INTERRUPTION, STATE_CHANGE,
};
use dovetail_core::labels;
use dovetail_core::model::{KubeletConfig, NodeClass, NodeOs, Taint, TaintEffect};
use dovetail_core::nodeclaim::{launched_labels, Launch};
use dovetail_core::reconcile::ports::{Cloud, LaunchOutcome, LaunchRequest, PortError, PortResult};
use dovetail_core::resources::Resources;
use dovetail_core::time::Time;

use super::{Happening, State, World};

/// Spot instances get this much warning before EC2 takes them back.
pub const SPOT_NOTICE: Duration = Duration::from_secs(120);
/// How long an instance stays `shutting-down` before it is `terminated`.
pub const SHUTDOWN: Duration = Duration::from_secs(30);
/// How long after its instance is gone the cloud node lifecycle controller deletes a Node: the
/// kubelet's lease must lapse (40 s) before the Node is seen NotReady and checked against EC2.
pub const NODE_MONITOR_GRACE: Duration = Duration::from_secs(40);
/// EC2 keeps listing terminated instances for about an hour.
pub const TERMINATED_VISIBLE: Duration = Duration::from_secs(3600);
/// Hours in a Spot Advisor month.
const HOURS_PER_MONTH: f64 = 720.0;
/// The tag that names the autoscaling group (or NodePool) an instance belongs to, for reports.
pub const GROUP_TAG: &str = "sim.dovetail.dev/group";

/// Offerings without capacity during a window (`None` fields match anything).
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityWindow {
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub capacity_type: Option<CapacityType>,
    pub from: Time,
    pub until: Time,
}

impl CapacityWindow {
    pub fn blocks(&self, key: &OfferingKey, now: Time) -> bool {
        now >= self.from
            && now < self.until
            && self.instance_type.as_ref().is_none_or(|t| *t == key.instance_type)
            && self.zone.as_ref().is_none_or(|z| *z == key.zone)
            && self.capacity_type.is_none_or(|c| c == key.capacity_type)
    }
}

/// What the instance's kubelet registers as once it has booted.
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    pub node_name: String,
    pub labels: BTreeMap<String, String>,
    /// Registered with these (the pool's taints, and `dovetail.dev/unregistered` for Dovetail's).
    pub taints: Vec<Taint>,
    /// Removed a little after registration by the agent that owns them.
    pub startup_taints: Vec<Taint>,
    pub allocatable: Resources,
}

/// One instance to launch, fully decided: by CreateFleet from a claim, or by an autoscaling group.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchSpec {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
    pub tags: BTreeMap<String, String>,
    pub image_id: String,
    pub subnet_id: String,
    pub security_groups: Vec<String>,
    /// Labels the node gets besides its instance type's and offering's (the kubelet's
    /// `--node-labels`).
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    pub kubelet: KubeletConfig,
    /// Register with `dovetail.dev/unregistered:NoExecute` until Dovetail matches the node.
    pub unregistered_taint: bool,
    /// The capacity reservation it runs in (a `reserved` launch).
    pub reservation: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimInstance {
    pub instance: Instance,
    pub capacity_type: CapacityType,
    pub price: f64,
    /// What the catalog asks for the offering, before any NodeOverlay; for a reserved instance
    /// the on-demand price of its type there (what its hours would cost without the reservation).
    pub list_price: f64,
    /// The capacity reservation it runs in, which it takes one instance of while it runs.
    pub reservation: Option<String>,
    /// NodePool or node group, for reports.
    pub group: String,
    pub registration: Registration,
    /// When billing stopped (the instance started shutting down).
    pub ended_at: Option<Time>,
    /// EC2 reclaimed it (spot interruption).
    pub reclaimed: bool,
}

impl SimInstance {
    pub fn launch(&self) -> Launch {
        let i = &self.instance;
        Launch {
            instance_id: i.id.clone(),
            instance_type: i.instance_type.clone(),
            zone: i.zone.clone(),
            capacity_type: self.capacity_type,
            image_id: i.image_id.clone(),
            subnet_id: i.subnet_id.clone(),
            security_groups: i.security_groups.clone(),
            price: self.price,
            launched_at: i.launched_at,
        }
    }

    fn is_live(&self) -> bool {
        matches!(self.instance.state.as_str(), "pending" | "running")
    }
}

#[derive(Debug, Default)]
pub struct CloudState {
    /// Every instance ever launched (the report bills them); `instances()` lists the recent ones.
    pub instances: BTreeMap<String, SimInstance>,
    launched: u64,
    /// Bumped by an AMI release: classes resolve to new images (drift).
    pub ami_release: u32,
    /// Instance profiles made for classes' roles, by name (IAM, which the world folds into its
    /// cloud): made when a class resolves, deleted by the sweeper's clean-up.
    pub profiles: BTreeMap<String, instance_profile::Listed>,
}

impl CloudState {
    /// The instance launched with this client token (claim name), if one is still around.
    pub fn by_claim(&self, claim: &str) -> Option<&SimInstance> {
        self.instances
            .values()
            .filter(|i| i.instance.tags.get(labels::NODECLAIM).map(String::as_str) == Some(claim))
            .find(|i| i.instance.state != "terminated")
    }

    /// The images classes resolve to now, by architecture.
    pub fn images(&self) -> BTreeMap<String, String> {
        ["amd64", "arm64"]
            .iter()
            .enumerate()
            .map(|(i, arch)| {
                let id = 0x0a20_2300_0000_0000u64 | ((i as u64) << 32) | u64::from(self.ami_release);
                (arch.to_string(), format!("ami-{id:017x}"))
            })
            .collect()
    }
}

/// The subnet of a zone, as the simulated VPC names it.
pub fn subnet_of(zone: &str) -> String {
    format!("subnet-{zone}")
}

pub const SECURITY_GROUP: &str = "sg-0c1a55e5000000001";

/// EC2-style ids from a counter: distinct and deterministic, but not sequential-looking
/// (multiplying by an odd constant is a bijection on u64).
fn instance_id(n: u64) -> String {
    format!("i-0{:016x}", n.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

fn node_name(n: u64) -> String {
    let n = n + 10;
    format!("ip-10-{}-{}-{}.ec2.internal", (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff)
}

impl State {
    /// Starts an instance: billed from now, booted after a sampled boot time, and (spot) given an
    /// interruption time drawn from its type's Spot Advisor band.
    pub fn launch_instance(&mut self, spec: LaunchSpec, group: &str) -> String {
        self.cloud.launched += 1;
        let n = self.cloud.launched;
        let id = instance_id(n);
        let registration = registration(&self.catalog, &spec, &self.config.zones, node_name(n));
        let list_price = list_price(&self.catalog, &spec, &registration.labels).unwrap_or(spec.price);
        let instance = Instance {
            id: id.clone(),
            instance_type: spec.instance_type.clone(),
            zone: spec.zone.clone(),
            state: "pending".into(),
            launched_at: self.now,
            tags: spec.tags.clone(),
            image_id: spec.image_id.clone(),
            subnet_id: spec.subnet_id.clone(),
            security_groups: spec.security_groups.clone(),
        };
        self.cloud.instances.insert(
            id.clone(),
            SimInstance {
                instance,
                capacity_type: spec.capacity_type,
                price: spec.price,
                list_price,
                reservation: spec.reservation.clone(),
                group: group.to_string(),
                registration,
                ended_at: None,
                reclaimed: false,
            },
        );
        let (lo, hi) = (self.config.boot_min.as_millis() as u64, self.config.boot_max.as_millis() as u64);
        let boot = Duration::from_millis(if hi > lo { self.rng.random_range(lo..=hi) } else { lo });
        self.schedule(boot, Happening::Booted { instance: id.clone() });
        if spec.capacity_type == CapacityType::Spot {
            self.schedule_interruption(&id, &spec.instance_type, boot);
        }
        if let Some(end) = spec.reservation.as_deref().and_then(|r| self.reservation_end(r)) {
            self.schedule_at(end, Happening::BlockEnded { instance: id.clone() });
        }
        self.stats.launches += 1;
        id
    }

    /// Draws when EC2 reclaims a spot instance: exponential with the monthly rate of the type's
    /// band, times the scenario's multiplier. The warning comes two minutes before; sometimes a
    /// rebalance recommendation earlier still.
    fn schedule_interruption(&mut self, id: &str, instance_type: &str, boot: Duration) {
        let m = self.config.interruption_multiplier;
        if m <= 0.0 {
            return;
        }
        let band = spot_interruption_band(instance_type).unwrap_or(4);
        let per_hour = -(1.0 - spot_band_monthly_rate(band)).ln() / HOURS_PER_MONTH * m;
        let u: f64 = self.rng.random::<f64>().max(f64::MIN_POSITIVE);
        let hours = -u.ln() / per_hour;
        // Warnings go to running instances: one drawn during boot comes right after it.
        let earliest = boot + SPOT_NOTICE;
        let after = Duration::from_secs_f64((hours * 3600.0).min(1e9)).max(earliest);
        let reclaim = self.now.plus(after);
        self.schedule_at(reclaim.minus(SPOT_NOTICE), Happening::SpotWarning { instance: id.to_string() });
        if self.rng.random::<f64>() < self.config.rebalance_share {
            let lead = Duration::from_secs(self.rng.random_range(120..=1800));
            let at = reclaim.minus(SPOT_NOTICE).minus(lead).max(self.now.plus(boot));
            self.schedule_at(at, Happening::RebalanceRecommendation { instance: id.to_string() });
        }
    }

    /// TerminateInstances: billing stops now; the instance shuts down, its kubelet stops.
    pub fn terminate_instance(&mut self, id: &str) {
        let now = self.now;
        let Some(i) = self.cloud.instances.get_mut(id) else { return };
        if !i.is_live() {
            return;
        }
        i.instance.state = "shutting-down".into();
        i.ended_at = Some(now);
        let node = i.registration.node_name.clone();
        self.kube.kubelet_stopped(&node);
        self.schedule(SHUTDOWN, Happening::InstanceGone { instance: id.to_string() });
    }

    pub(super) fn booted(&mut self, id: &str) {
        let Some(i) = self.cloud.instances.get_mut(id) else { return };
        if i.instance.state != "pending" {
            return;
        }
        i.instance.state = "running".into();
        let (reg, zone, price) = (i.registration.clone(), i.instance.zone.clone(), i.price);
        let claim = i.instance.tags.get(labels::NODECLAIM).cloned();
        let provider_id = format!("aws:///{zone}/{id}");
        self.register_node(&reg, provider_id, id, price);
        if !reg.startup_taints.is_empty() {
            self.schedule(
                self.config.startup_taint_delay,
                Happening::StartupTaintsGone { node: reg.node_name.clone() },
            );
        }
        self.node_registered(&reg, claim);
    }

    pub(super) fn rebalance_recommendation(&mut self, id: &str) {
        if self.cloud.instances.get(id).is_some_and(SimInstance::is_live) {
            self.stats.rebalance_recommendations += 1;
            let body = self.eventbridge(
                REBALANCE_RECOMMENDATION,
                &format!("instance/{id}"),
                serde_json::json!({"instance-id": id}),
            );
            self.send_interruption(body, Duration::ZERO);
        }
    }

    /// EC2's two-minute warning for spot instance `id` (through EventBridge to the interruption
    /// queue), and its reclaim when the two minutes are up.
    pub fn spot_warning(&mut self, id: &str) {
        if !self.cloud.instances.get(id).is_some_and(SimInstance::is_live) {
            return;
        }
        self.stats.spot_warnings += 1;
        let detail = serde_json::json!({"instance-id": id, "instance-action": "terminate"});
        let body = self.eventbridge(SPOT_INTERRUPTION, &format!("instance/{id}"), detail);
        self.send_interruption(body, Duration::ZERO);
        self.schedule(SPOT_NOTICE, Happening::SpotReclaim { instance: id.to_string() });
    }

    pub(super) fn spot_reclaim(&mut self, id: &str) {
        if !self.cloud.instances.get(id).is_some_and(SimInstance::is_live) {
            return;
        }
        self.terminate_instance(id);
        if let Some(i) = self.cloud.instances.get_mut(id) {
            i.reclaimed = true;
        }
        self.stats.spot_reclaimed += 1;
        let detail = serde_json::json!({"instance-id": id, "state": "shutting-down"});
        let body = self.eventbridge(STATE_CHANGE, &format!("instance/{id}"), detail);
        self.send_interruption(body, Duration::ZERO);
    }

    /// Capacity Block `id` ends in 40 minutes: EC2 says so on EventBridge (its instances are
    /// terminated from 10 minutes later; here at the end itself, see `block_ended`).
    pub(super) fn block_expiring(&mut self, id: &str) {
        let Some(end) = self.reservation_end(id) else { return };
        let detail = serde_json::json!({"capacity-reservation-id": id, "end-date": end.to_string()});
        let body = self.eventbridge(CAPACITY_BLOCK_EXPIRY[1], &format!("capacity-reservation/{id}"), detail);
        self.send_interruption(body, Duration::ZERO);
    }

    /// A Capacity Block ended with the instance still in it: EC2 terminates it and says so on
    /// EventBridge (Dovetail should have drained it before, from 40 minutes ahead).
    pub(super) fn block_ended(&mut self, id: &str) {
        if !self.cloud.instances.get(id).is_some_and(SimInstance::is_live) {
            return;
        }
        self.terminate_instance(id);
        let detail = serde_json::json!({"instance-id": id, "state": "shutting-down"});
        let body = self.eventbridge(STATE_CHANGE, &format!("instance/{id}"), detail);
        self.send_interruption(body, Duration::ZERO);
    }

    pub(super) fn instance_gone(&mut self, id: &str) {
        let Some(i) = self.cloud.instances.get_mut(id) else { return };
        i.instance.state = "terminated".into();
        let node = i.registration.node_name.clone();
        if self.kube.nodes.contains_key(&node) {
            self.schedule(NODE_MONITOR_GRACE, Happening::NodeLost { node });
        }
    }

    pub(super) fn node_lost(&mut self, node: &str) {
        let gone =
            self.kube.nodes.get(node).is_some_and(|n| {
                self.cloud.instances.get(&n.instance_id).is_none_or(|i| i.instance.state == "terminated")
            });
        if gone {
            self.delete_node(node);
        }
    }

    /// An EventBridge envelope as EC2 sends it to the interruption queue, about `resource`
    /// (`instance/i-…`, `capacity-reservation/cr-…`).
    fn eventbridge(&mut self, detail_type: &str, resource: &str, detail: serde_json::Value) -> String {
        self.stats.eventbridge_sent += 1;
        let n = self.stats.eventbridge_sent;
        serde_json::json!({
            "version": "0",
            "id": format!("{:08x}-0000-4000-8000-{:012x}", n, self.now.millis()),
            "detail-type": detail_type,
            "source": SOURCE_EC2,
            "account": self.config.account,
            "time": self.now.to_string(),
            "region": self.config.region,
            "resources": [format!("arn:aws:ec2:{}:{}:{resource}", self.config.region, self.config.account)],
            "detail": detail,
        })
        .to_string()
    }

    /// Whether EC2 would fail a launch of this offering now for capacity (a scenario window, or
    /// the random capacity error rate).
    pub fn capacity_error(&mut self, key: &OfferingKey) -> bool {
        let now = self.now;
        if self.config.capacity_windows.iter().any(|w| w.blocks(key, now)) {
            return true;
        }
        self.config.capacity_error_rate > 0.0 && self.rng.random::<f64>() < self.config.capacity_error_rate
    }

    /// CreateFleet for one claim: the same client token returns the same instance; otherwise the
    /// cheapest offer with capacity is launched.
    pub fn create_fleet(&mut self, request: &LaunchRequest) -> PortResult<LaunchOutcome> {
        let claim = &request.claim;
        if let Some(i) = self.cloud.by_claim(&claim.name) {
            return Ok(LaunchOutcome::Launched(i.launch()));
        }
        if request.offers.is_empty() {
            return Err(PortError::Rejected(format!("CreateFleet for {}: no overrides", claim.name)));
        }
        let mut offers: Vec<_> = request.offers.iter().collect();
        offers.sort_by(|a, b| a.price.total_cmp(&b.price));
        let mut failed = Vec::new();
        let mut refusals = Vec::new();
        let mut chosen = None;
        for o in offers {
            if self.catalog.get(&o.instance_type).is_none() {
                return Err(PortError::Rejected(format!(
                    "CreateFleet for {}: unknown instance type {}",
                    claim.name, o.instance_type
                )));
            }
            let key = o.key();
            if o.capacity_type == CapacityType::Reserved {
                // Reserved capacity is there or not by the reservation's count alone.
                let Some(r) = &o.reservation else {
                    return Err(PortError::Rejected(format!(
                        "CreateFleet for {}: reserved offer of {} names no reservation",
                        claim.name, o.instance_type
                    )));
                };
                if let Some(why) = self.reservation_refusal(&r.id, &o.instance_type, &o.zone) {
                    refusals.push(why);
                    failed.push(key);
                    continue;
                }
            } else if self.capacity_error(&key) {
                failed.push(key);
                continue;
            }
            chosen = Some(o.clone());
            break;
        }
        let Some(offer) = chosen else {
            self.stats.capacity_errors += 1;
            let message = if refusals.is_empty() {
                format!("InsufficientInstanceCapacity: no capacity for {} override(s) of {}", failed.len(), claim.name)
            } else {
                format!("{} (launching {})", refusals.join("; "), claim.name)
            };
            return Ok(LaunchOutcome::NoCapacity { offerings: failed, message });
        };
        let offered = self.catalog.get(&offer.instance_type);
        let arch = offered.and_then(|t| t.requirements.get(labels::ARCH)).and_then(|r| r.single_value());
        let variant = offered.map_or(ImageVariant::Standard, ImageVariant::of);
        let image = resolved_image(&request.resolved, &offer.instance_type, arch, variant)
            .map(str::to_string)
            .ok_or_else(|| PortError::Rejected(format!("CreateFleet for {}: no image resolved", claim.name)))?;
        let subnet =
            request.resolved.subnets.iter().find(|s| **s == subnet_of(&offer.zone)).cloned().ok_or_else(|| {
                PortError::Rejected(format!("CreateFleet for {}: no subnet in {}", claim.name, offer.zone))
            })?;
        let mut tags = request.class.tags.clone();
        tags.insert(labels::NODECLAIM.into(), claim.name.clone());
        tags.insert(labels::NODEPOOL.into(), claim.nodepool.clone());
        tags.insert(GROUP_TAG.into(), claim.nodepool.clone());
        tags.insert(format!("kubernetes.io/cluster/{}", self.config.cluster), "owned".into());
        let spec = LaunchSpec {
            instance_type: offer.instance_type.clone(),
            zone: offer.zone.clone(),
            capacity_type: offer.capacity_type,
            price: offer.price,
            tags,
            image_id: image,
            subnet_id: subnet,
            security_groups: request.resolved.security_groups.clone(),
            // As the real launch template: the claim's name is not among the kubelet's labels
            // (it would make a template per claim); registration labels the Node with it.
            labels: claim
                .labels
                .iter()
                .filter(|(k, _)| k.as_str() != labels::NODECLAIM)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            taints: claim.taints.clone(),
            startup_taints: claim.startup_taints.clone(),
            kubelet: request.class.kubelet.clone(),
            unregistered_taint: true,
            reservation: offer.reservation.as_ref().map(|r| r.id.clone()),
        };
        let id = self.launch_instance(spec, &claim.nodepool);
        Ok(LaunchOutcome::Launched(self.cloud.instances[&id].launch()))
    }

    /// What an EC2NodeClass resolves to: its spec hash, today's images, one subnet per zone, and
    /// its instance profile, made for its role if it names one. Fixture classes often name
    /// neither role nor profile; the world's EC2 does not check profiles, so they launch with one
    /// named after the class.
    pub fn resolve_class(&mut self, class: &NodeClass) -> ResolvedClass {
        let profile = match instance_profile::wanted(&self.config.region, &self.config.cluster, class) {
            Some(Wanted::Managed(m)) => {
                let listed = instance_profile::Listed { name: m.name.clone(), class: class.name.clone() };
                self.cloud.profiles.insert(m.name.clone(), listed);
                m.name
            }
            Some(Wanted::Given(name)) => name,
            None => class.name.clone(),
        };
        ResolvedClass {
            name: class.name.clone(),
            hash: nodeclass_hash(&class.spec),
            images: self.cloud.images(),
            images_problem: None,
            images_per_variant: false,
            subnets: self.config.zones.iter().map(|z| subnet_of(&z.name)).collect(),
            security_groups: vec![SECURITY_GROUP.to_string()],
            zones: self.config.zones.iter().map(|z| z.name.clone()).collect(),
            instance_profile: Some(profile),
            instance_profile_problem: None,
            reservations: self.reservations_of(class),
        }
    }

    /// Every instance's bill so far, in launch order of ids.
    pub fn instance_records(&self) -> Vec<super::InstanceRecord> {
        let now = self.now;
        self.cloud
            .instances
            .values()
            .map(|i| super::InstanceRecord {
                id: i.instance.id.clone(),
                instance_type: i.instance.instance_type.clone(),
                group: i.group.clone(),
                spot: i.capacity_type == CapacityType::Spot,
                reserved: i.capacity_type == CapacityType::Reserved,
                price: i.price,
                list_price: i.list_price,
                hours: i.ended_at.unwrap_or(now).since(i.instance.launched_at).as_secs_f64() / 3600.0,
                reclaimed: i.reclaimed,
            })
            .collect()
    }

    /// The listed instances `query` asks for: by id, or by their claim's tag.
    pub fn listed_instances_of(&self, query: &InstanceQuery) -> Vec<Instance> {
        let asked = |i: &Instance| {
            query.ids.contains(&i.id) || i.tags.get(labels::NODECLAIM).is_some_and(|c| query.claims.contains(c))
        };
        self.listed_instances().into_iter().filter(asked).collect()
    }

    /// Instances EC2 lists now (terminated ones for an hour).
    pub fn listed_instances(&self) -> Vec<Instance> {
        let now = self.now;
        self.cloud
            .instances
            .values()
            .filter(|i| i.ended_at.is_none_or(|e| now.since(e) < TERMINATED_VISIBLE))
            .map(|i| i.instance.clone())
            .collect()
    }
}

/// The node an instance registers as: the spec's labels with the launched type's and offering's
/// labels on top (a claim's labels describe its cheapest candidate, which CreateFleet may not
/// have picked; a Windows claim's keep its OS and build), the spec's taints, and the type's
/// allocatable under the class's kubelet settings.
pub fn registration(
    catalog: &Catalog,
    spec: &LaunchSpec,
    zones: &[dovetail_core::catalog::Zone],
    node: String,
) -> Registration {
    let mut labels = launched_labels(&spec.labels, &spec.instance_type, &spec.zone, spec.capacity_type, catalog);
    if let Some(z) = zones.iter().find(|z| z.name == spec.zone) {
        labels.insert(labels::ZONE_ID.into(), z.id.clone());
    }
    labels.insert(labels::HOSTNAME.into(), node.clone());
    let allocatable = catalog.get(&spec.instance_type).map(|t| t.allocatable(&spec.kubelet)).unwrap_or_default();
    let mut taints = spec.taints.clone();
    if spec.unregistered_taint {
        taints.push(Taint::new(labels::TAINT_UNREGISTERED, "", TaintEffect::NoExecute));
    }
    taints.extend(spec.startup_taints.iter().cloned());
    Registration { node_name: node, labels, taints, startup_taints: spec.startup_taints.clone(), allocatable }
}

/// What the catalog asks for the instance `spec` launches, before NodeOverlays, on the OS the node
/// registers with; a reserved instance's on-demand equivalent. `None` for an offering the catalog
/// does not sell.
fn list_price(catalog: &Catalog, spec: &LaunchSpec, node_labels: &BTreeMap<String, String>) -> Option<f64> {
    let priced_as = match spec.capacity_type {
        CapacityType::Reserved => CapacityType::OnDemand,
        other => other,
    };
    let build = node_labels.get(labels::WINDOWS_BUILD).map(String::as_str);
    let os = NodeOs::WINDOWS.into_iter().find(|os| os.windows_build() == build).unwrap_or(NodeOs::Linux);
    catalog.offering_price(&spec.instance_type, &spec.zone, priced_as, os)
}

/// The `Cloud` port over the world.
#[derive(Clone)]
pub struct SimCloud(pub World);

impl Cloud for SimCloud {
    fn catalog(&self) -> impl Future<Output = PortResult<Arc<Catalog>>> + Send {
        ready(Ok(self.0.lock().catalog.clone()))
    }

    fn instances(&self) -> impl Future<Output = PortResult<Vec<Instance>>> + Send {
        ready(Ok(self.0.lock().listed_instances()))
    }

    fn instances_of(&self, query: &InstanceQuery) -> impl Future<Output = PortResult<Vec<Instance>>> + Send {
        ready(Ok(self.0.lock().listed_instances_of(query)))
    }

    fn resolve(&self, class: &NodeClass) -> impl Future<Output = PortResult<ResolvedClass>> + Send {
        ready(Ok(self.0.lock().resolve_class(class)))
    }

    fn instance_profiles(&self) -> impl Future<Output = PortResult<Vec<instance_profile::Listed>>> + Send {
        ready(Ok(self.0.lock().cloud.profiles.values().cloned().collect()))
    }

    fn delete_instance_profile(&self, name: &str) -> impl Future<Output = PortResult<()>> + Send {
        self.0.lock().cloud.profiles.remove(name);
        ready(Ok(()))
    }

    fn launch(&self, request: &LaunchRequest) -> impl Future<Output = PortResult<LaunchOutcome>> + Send {
        ready(self.0.lock().create_fleet(request))
    }

    fn find_launched(&self, claim: &str) -> impl Future<Output = PortResult<Option<Launch>>> + Send {
        ready(Ok(self.0.lock().cloud.by_claim(claim).map(SimInstance::launch)))
    }

    fn terminate(&self, instance_id: &str) -> impl Future<Output = PortResult<()>> + Send {
        let mut s = self.0.lock();
        let r = if let Some(i) = s.cloud.instances.get(instance_id) {
            let node = i.registration.node_name.clone();
            let pods: Vec<u64> = s.kube.nodes.get(&node).map(|n| n.pods.iter().copied().collect()).unwrap_or_default();
            s.note_overrides(&pods, "TerminateInstances");
            s.terminate_instance(instance_id);
            Ok(())
        } else {
            Err(PortError::Rejected(format!("InvalidInstanceID.NotFound: {instance_id}")))
        };
        ready(r)
    }
}
