//! Scenarios: a cluster (standard manifests), what happens to it over time, how AWS behaves, and
//! optionally the Cluster Autoscaler node groups to compare against. The format is documented in
//! `docs/cli.md` (`dovetail simulate`); [`builtin`] holds the scenarios that ship with the binary.

pub mod builtin;
mod format;
pub mod manifests;
pub mod timeline;

pub use manifests::{Cluster, CronJobTemplate, JobTemplate, ReplicaTemplate};
pub use timeline::{Action, Entry, Repeat, Submission};

use std::path::Path;
use std::time::Duration;

use dovetail_api::manifest::{self, LoadError};
use dovetail_core::catalog::{self, CapacityType, ReservationKind, Zone};
use dovetail_core::ceilings::{PODS_PER_PLAN, SCENARIO_BYTES};
use dovetail_core::interruption::parse_rfc3339;
use dovetail_core::model::{parse_cost, Taint, TaintEffect};
use dovetail_core::time::cron::CronSchedule;
use dovetail_core::time::parse_duration;

use crate::baseline::{Config as CaConfig, NodeGroup};
use crate::world::{CapacityWindow, SimReservation, WorldConfig};

/// A scenario, parsed and checked: everything a run needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    /// How long a run lasts unless told otherwise.
    pub duration: Duration,
    /// Seed, start, zones and AWS behaviour.
    pub world: WorldConfig,
    pub cluster: Cluster,
    pub timeline: Vec<Entry>,
    pub cluster_autoscaler: Option<CaConfig>,
    /// The cluster-wide cost limit (`costLimit`), in micro-dollars per hour.
    pub cost_limit: Option<i64>,
}

/// What is wrong with a scenario, and where.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// Unreadable, or larger than the scenario ceiling (`dovetail_core::ceilings`).
    #[error(transparent)]
    Read(#[from] LoadError),
    /// Not YAML, or not the scenario schema; the message gives the field path, line and column.
    #[error("{file}: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}: {field}: {message}")]
    Field { file: String, field: String, message: String },
    #[error("{file}: {source}")]
    Manifests {
        file: String,
        #[source]
        source: manifests::ManifestError,
    },
    #[error("no built-in scenario {name:?}; the built-in scenarios are {known}")]
    UnknownBuiltin { name: String, known: String },
}

/// Errors about one scenario file.
struct Ctx<'a> {
    file: &'a str,
}

impl Ctx<'_> {
    fn err(&self, field: impl Into<String>, message: impl Into<String>) -> ScenarioError {
        ScenarioError::Field { file: self.file.to_string(), field: field.into(), message: message.into() }
    }

    fn duration(&self, field: &str, value: &str) -> Result<Duration, ScenarioError> {
        parse_duration(value).map_err(|e| self.err(field, e.to_string()))
    }

    fn fraction(&self, field: &str, value: Option<f64>, default: f64, max: f64) -> Result<f64, ScenarioError> {
        match value {
            None => Ok(default),
            Some(v) if v.is_finite() && (0.0..=max).contains(&v) => Ok(v),
            Some(v) => Err(self.err(field, format!("{v} is not between 0 and {max}"))),
        }
    }
}

/// "there are: a, b" or "there are none", for errors about a name that does not exist.
fn listing(known: &[&str]) -> String {
    if known.is_empty() {
        "there are none".to_string()
    } else {
        format!("there are: {}", known.join(", "))
    }
}

/// `namespace/name`, the namespace `default` when left out.
fn object_ref(s: &str) -> String {
    if s.contains('/') {
        s.to_string()
    } else {
        format!("default/{s}")
    }
}

fn zones(ctx: &Ctx<'_>, specs: &[String]) -> Result<Vec<Zone>, ScenarioError> {
    let mut out = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let zone = match s.split_once('=') {
            Some((name, id)) => Zone { name: name.to_string(), id: id.to_string() },
            None => {
                let id = catalog::DEFAULT_ZONES.iter().find(|(n, _)| n == s).map(|(_, id)| id.to_string());
                let id = id.ok_or_else(|| {
                    ctx.err(
                        format!("world.zones[{i}]"),
                        format!("{s:?} is not a default us-east-1 zone; write it as name=zone-id"),
                    )
                })?;
                Zone { name: s.clone(), id }
            }
        };
        out.push(zone);
    }
    Ok(out)
}

fn capacity_type(ctx: &Ctx<'_>, field: &str, value: &str) -> Result<CapacityType, ScenarioError> {
    CapacityType::parse(value).ok_or_else(|| ctx.err(field, format!("{value:?} is neither spot nor on-demand")))
}

impl Scenario {
    /// A built-in scenario by name (see [`builtin::NAMES`]).
    pub fn builtin(name: &str) -> Result<Scenario, ScenarioError> {
        let text = builtin::get(name).ok_or_else(|| ScenarioError::UnknownBuiltin {
            name: name.to_string(),
            known: builtin::NAMES.join(", "),
        })?;
        Scenario::parse(&format!("built-in scenario {name}"), text, None)
    }

    /// Reads a scenario file; `manifestFiles` are relative to it.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = manifest::read_file_within(path, SCENARIO_BYTES)?;
        Scenario::parse(&path.display().to_string(), &text, path.parent())
    }

    /// Parses a scenario; `file` names it in errors, `base` resolves `manifestFiles`.
    pub fn parse(file: &str, text: &str, base: Option<&Path>) -> Result<Scenario, ScenarioError> {
        let ctx = Ctx { file };
        let f: format::File = serde_yaml_ng::from_str(text)
            .map_err(|e| ScenarioError::Syntax { file: file.to_string(), message: e.to_string() })?;
        let name = f.name.clone().unwrap_or_else(|| {
            Path::new(file).file_stem().map_or_else(|| file.to_string(), |s| s.to_string_lossy().into_owned())
        });
        let duration = match &f.duration {
            Some(d) => ctx.duration("duration", d)?,
            None => Duration::from_secs(24 * 3600),
        };
        if duration.is_zero() {
            return Err(ctx.err("duration", "must be longer than 0s"));
        }
        let world = world(&ctx, &f)?;

        let mut texts = Vec::new();
        if !f.manifests.trim().is_empty() {
            texts.push(("manifests".to_string(), f.manifests.clone()));
        }
        for (i, p) in f.manifest_files.iter().enumerate() {
            let path = base.map_or_else(|| Path::new(p).to_path_buf(), |b| b.join(p));
            // A file, or a directory's YAML and JSON files by name, as `dovetail plan` reads them.
            let text =
                manifest::read_paths(&[&path]).map_err(|e| ctx.err(format!("manifestFiles[{i}]"), e.to_string()))?;
            texts.extend(text);
        }
        if texts.is_empty() {
            return Err(ctx.err("manifests", "no manifests: a scenario needs at least a NodePool and a workload"));
        }
        let cluster =
            manifests::load(&texts).map_err(|source| ScenarioError::Manifests { file: file.to_string(), source })?;
        let cost_limit = f
            .cost_limit
            .as_ref()
            .map(|limit| {
                parse_cost(limit).map_err(|_| {
                    let message = format!("{limit:?} is not a non-negative number of dollars per hour (e.g. 12.5)");
                    ctx.err("costLimit", message)
                })
            })
            .transpose()?;
        if cluster.nodepools.is_empty() {
            return Err(ctx.err("manifests", "no NodePool: Dovetail would have nothing to launch from"));
        }
        for pool in &cluster.nodepools {
            if !cluster.nodeclasses.iter().any(|c| c.name == pool.node_class) {
                let known: Vec<&str> = cluster.nodeclasses.iter().map(|c| c.name.as_str()).collect();
                return Err(ctx.err(
                    format!("manifests: NodePool {}: spec.template.spec.nodeClassRef.name", pool.name),
                    format!("EC2NodeClass {:?} is not in the manifests ({})", pool.node_class, listing(&known)),
                ));
            }
        }

        let mut timeline = Vec::new();
        for (i, e) in f.timeline.iter().enumerate() {
            timeline.push(entry(&ctx, &format!("timeline[{i}]"), e, &cluster)?);
        }
        // Jobs no entry submits run once at the start; CronJobs run on their schedule.
        for (key, job) in &cluster.jobs {
            let submitted = timeline.iter().any(|e| matches!(&e.action, Action::Submit(s) if !s.cron && s.job == *key));
            if !submitted {
                let field = format!("Job {key}: metadata.annotations[{}]", manifests::DURATION_ANNOTATION);
                let duration = job.duration.ok_or_else(|| ctx.err(field, "missing: how long do its pods run?"))?;
                timeline.push(Entry {
                    at: Duration::ZERO,
                    repeat: Repeat::Once,
                    until: None,
                    action: Action::Submit(submission(key, job, false, duration, None, None, None, 1)),
                });
            }
        }
        for (key, cron) in &cluster.cron_jobs {
            let field = format!("CronJob {key}: metadata.annotations[{}]", manifests::DURATION_ANNOTATION);
            let duration = cron.job.duration.ok_or_else(|| ctx.err(field, "missing: how long do its pods run?"))?;
            timeline.push(Entry {
                at: Duration::ZERO,
                repeat: Repeat::Cron(cron.schedule),
                until: None,
                action: Action::Submit(submission(key, &cron.job, true, duration, None, None, None, 1)),
            });
        }

        let cluster_autoscaler = f.cluster_autoscaler.as_ref().map(|ca| ca_config(&ctx, ca, &world)).transpose()?;
        Ok(Scenario {
            name,
            description: f.description.trim().to_string(),
            duration,
            world,
            cluster,
            timeline,
            cluster_autoscaler,
            cost_limit,
        })
    }
}

fn world(ctx: &Ctx<'_>, f: &format::File) -> Result<WorldConfig, ScenarioError> {
    let mut w = WorldConfig::default();
    if let Some(seed) = f.seed {
        w.seed = seed;
    }
    if let Some(s) = &f.start {
        w.start = parse_rfc3339(s)
            .ok_or_else(|| ctx.err("start", format!("{s:?} is not a UTC time like 2026-11-27T00:00:00Z")))?;
    }
    let wf = &f.world;
    if let Some(b) = &wf.boot_time {
        w.boot_min = ctx.duration("world.bootTime.min", &b.min)?;
        w.boot_max = ctx.duration("world.bootTime.max", &b.max)?;
        if w.boot_max < w.boot_min {
            return Err(ctx.err("world.bootTime.max", format!("{} is shorter than min {}", b.max, b.min)));
        }
    }
    w.interruption_multiplier = ctx.fraction("world.interruptionRate", wf.interruption_rate, 1.0, 1e6)?;
    w.rebalance_share = ctx.fraction("world.rebalanceShare", wf.rebalance_share, w.rebalance_share, 1.0)?;
    w.capacity_error_rate = ctx.fraction("world.capacityErrorRate", wf.capacity_error_rate, 0.0, 1.0)?;
    w.duplicate_rate = ctx.fraction("world.duplicateRate", wf.duplicate_rate, 0.0, 1.0)?;
    if !wf.zones.is_empty() {
        w.zones = zones(ctx, &wf.zones)?;
    }
    for (i, c) in wf.capacity_errors.iter().enumerate() {
        let at = ctx.duration(&format!("world.capacityErrors[{i}].at"), &c.at)?;
        let lasts = ctx.duration(&format!("world.capacityErrors[{i}].for"), &c.lasts)?;
        let capacity_type = c
            .capacity_type
            .as_deref()
            .map(|v| capacity_type(ctx, &format!("world.capacityErrors[{i}].capacityType"), v))
            .transpose()?;
        if let Some(t) = &c.instance_type {
            if catalog::embedded().get(t).is_none() {
                return Err(ctx.err(
                    format!("world.capacityErrors[{i}].instanceType"),
                    format!("{t:?} is not an EC2 instance type"),
                ));
            }
        }
        w.capacity_windows.push(CapacityWindow {
            instance_type: c.instance_type.clone(),
            zone: c.zone.clone(),
            capacity_type,
            from: w.start.plus(at),
            until: w.start.plus(at + lasts),
        });
    }
    for (i, r) in wf.reservations.iter().enumerate() {
        let reservation = reservation(ctx, &format!("world.reservations[{i}]"), r, &w)?;
        w.reservations.push(reservation);
    }
    Ok(w)
}

/// A reservation of the scenario, checked: a `cr-` id used once, a type EC2 sells on demand in
/// one of the world's zones, at least one instance, and a window that ends after it starts (a
/// Capacity Block always ends).
fn reservation(
    ctx: &Ctx<'_>,
    path: &str,
    r: &format::ReservationFile,
    w: &WorldConfig,
) -> Result<SimReservation, ScenarioError> {
    let id_ok =
        r.id.strip_prefix("cr-")
            .is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c.is_ascii_lowercase()));
    if !id_ok {
        return Err(
            ctx.err(format!("{path}.id"), format!("{:?} is not a capacity reservation id (cr-0123abcd…)", r.id))
        );
    }
    if w.reservations.iter().any(|o| o.id == r.id) {
        return Err(ctx.err(format!("{path}.id"), format!("{} is used twice", r.id)));
    }
    let sold = catalog::embedded()
        .get(&r.instance_type)
        .map(|t| t.offerings.iter().any(|o| o.capacity_type == CapacityType::OnDemand));
    if sold != Some(true) {
        return Err(ctx.err(
            format!("{path}.instanceType"),
            format!("{:?} is not an EC2 instance type sold on demand", r.instance_type),
        ));
    }
    if !w.zones.iter().any(|z| z.name == r.zone) {
        let known: Vec<&str> = w.zones.iter().map(|z| z.name.as_str()).collect();
        return Err(ctx.err(
            format!("{path}.zone"),
            format!("{:?} is not one of the world's zones ({})", r.zone, known.join(", ")),
        ));
    }
    if r.count == 0 {
        return Err(ctx.err(format!("{path}.count"), "must be at least 1"));
    }
    let kind = match &r.kind {
        None => ReservationKind::Default,
        Some(k) => ReservationKind::parse(k)
            .ok_or_else(|| ctx.err(format!("{path}.type"), format!("{k:?} is neither default nor capacity-block")))?,
    };
    let offset = |field: &str, v: &Option<String>| {
        v.as_deref().map(|v| ctx.duration(&format!("{path}.{field}"), v).map(|d| w.start.plus(d))).transpose()
    };
    let (start, end) = (offset("start", &r.start)?, offset("end", &r.end)?);
    if kind == ReservationKind::CapacityBlock && end.is_none() {
        return Err(ctx.err(format!("{path}.end"), "missing: a capacity block ends"));
    }
    if let (Some(s), Some(e)) = (start.or(Some(w.start)), end) {
        if e <= s {
            return Err(ctx.err(format!("{path}.end"), "must come after start"));
        }
    }
    Ok(SimReservation {
        id: r.id.clone(),
        instance_type: r.instance_type.clone(),
        zone: r.zone.clone(),
        count: r.count,
        kind,
        tags: r.tags.clone(),
        start,
        end,
    })
}

#[allow(clippy::too_many_arguments)]
fn submission(
    key: &str,
    job: &JobTemplate,
    cron: bool,
    duration: Duration,
    duration_max: Option<Duration>,
    parallelism: Option<usize>,
    completions: Option<usize>,
    count: usize,
) -> Submission {
    let parallelism = parallelism.unwrap_or(job.parallelism);
    Submission {
        job: key.to_string(),
        cron,
        duration,
        duration_max: duration_max.or(job.duration_max),
        parallelism,
        completions: completions.unwrap_or(if parallelism == job.parallelism { job.completions } else { parallelism }),
        count,
    }
}

fn entry(ctx: &Ctx<'_>, path: &str, e: &format::Entry, cluster: &Cluster) -> Result<Entry, ScenarioError> {
    let at = e.at.as_deref().map(|v| ctx.duration(&format!("{path}.at"), v)).transpose()?.unwrap_or_default();
    let until = e.until.as_deref().map(|v| ctx.duration(&format!("{path}.until"), v)).transpose()?;
    let repeat = match (&e.every, &e.cron) {
        (Some(_), Some(_)) => return Err(ctx.err(path, "every and cron are exclusive: give one")),
        (Some(v), None) => {
            let step = ctx.duration(&format!("{path}.every"), v)?;
            if step < Duration::from_secs(1) {
                return Err(ctx.err(format!("{path}.every"), format!("{v} is shorter than 1s")));
            }
            Repeat::Every(step)
        }
        (None, Some(c)) => {
            Repeat::Cron(CronSchedule::parse(c).map_err(|err| ctx.err(format!("{path}.cron"), err.to_string()))?)
        }
        (None, None) => Repeat::Once,
    };
    let actions = [e.scale.is_some(), e.submit.is_some(), e.release_ami.is_some()];
    if actions.iter().filter(|a| **a).count() != 1 {
        return Err(ctx.err(path, "needs exactly one action: scale, submit or releaseAmi"));
    }
    let action = if let Some(s) = &e.scale {
        let targets = [("Deployment", &s.deployment), ("StatefulSet", &s.stateful_set), ("ReplicaSet", &s.replica_set)];
        let named: Vec<_> = targets.iter().filter_map(|(k, v)| v.as_ref().map(|v| (*k, v))).collect();
        let [(kind, target)] = named.as_slice() else {
            return Err(ctx.err(format!("{path}.scale"), "name exactly one of deployment, statefulSet, replicaSet"));
        };
        let workload = format!("{kind}/{}", object_ref(target));
        if !cluster.replicas.contains_key(&workload) {
            let field = format!("{path}.scale.{}", kind[..1].to_lowercase() + &kind[1..]);
            let known: Vec<&str> = cluster.replicas.keys().map(String::as_str).collect();
            return Err(
                ctx.err(field, format!("no {kind} {} in the manifests ({})", object_ref(target), listing(&known)))
            );
        }
        PODS_PER_PLAN
            .check(s.replicas as u64)
            .map_err(|over| ctx.err(format!("{path}.scale.replicas"), over.to_string()))?;
        Action::Scale { workload, replicas: s.replicas }
    } else if let Some(s) = &e.submit {
        let key = object_ref(&s.job);
        let Some(job) = cluster.jobs.get(&key) else {
            let known: Vec<&str> = cluster.jobs.keys().map(String::as_str).collect();
            return Err(
                ctx.err(format!("{path}.submit.job"), format!("no Job {key} in the manifests ({})", listing(&known)))
            );
        };
        let duration = match &s.duration {
            Some(d) => ctx.duration(&format!("{path}.submit.duration"), d)?,
            None => job.duration.ok_or_else(|| {
                ctx.err(
                    format!("{path}.submit.duration"),
                    format!("missing, and Job {key} has no {} annotation", manifests::DURATION_ANNOTATION),
                )
            })?,
        };
        let duration_max =
            s.duration_max.as_deref().map(|d| ctx.duration(&format!("{path}.submit.durationMax"), d)).transpose()?;
        if duration_max.is_some_and(|m| m < duration) {
            return Err(ctx.err(format!("{path}.submit.durationMax"), "is shorter than duration"));
        }
        for (name, v) in [("parallelism", s.parallelism), ("completions", s.completions), ("count", s.count)] {
            if v == Some(0) {
                return Err(ctx.err(format!("{path}.submit.{name}"), "must be at least 1"));
            }
        }
        // The pods one submission starts at once: `count` Jobs of `parallelism` pods each.
        let at_once = (s.count.unwrap_or(1) as u64).saturating_mul(s.parallelism.unwrap_or(job.parallelism) as u64);
        PODS_PER_PLAN
            .check(at_once)
            .map_err(|over| ctx.err(format!("{path}.submit"), format!("count × parallelism: {over}")))?;
        Action::Submit(submission(
            &key,
            job,
            false,
            duration,
            duration_max,
            s.parallelism,
            s.completions,
            s.count.unwrap_or(1),
        ))
    } else {
        Action::ReleaseAmi
    };
    Ok(Entry { at, repeat, until, action })
}

fn ca_config(ctx: &Ctx<'_>, f: &format::ClusterAutoscalerFile, world: &WorldConfig) -> Result<CaConfig, ScenarioError> {
    let mut c = CaConfig::default();
    if let Some(v) = &f.scan_interval {
        c.scan_interval = ctx.duration("clusterAutoscaler.scanInterval", v)?;
        if c.scan_interval < Duration::from_secs(1) {
            return Err(ctx.err("clusterAutoscaler.scanInterval", "must be at least 1s"));
        }
    }
    c.utilization_threshold = ctx.fraction(
        "clusterAutoscaler.scaleDownUtilizationThreshold",
        f.scale_down_utilization_threshold,
        c.utilization_threshold,
        1.0,
    )?;
    if let Some(v) = &f.scale_down_unneeded_time {
        c.unneeded_time = ctx.duration("clusterAutoscaler.scaleDownUnneededTime", v)?;
    }
    if let Some(v) = &f.scale_down_delay_after_add {
        c.delay_after_add = ctx.duration("clusterAutoscaler.scaleDownDelayAfterAdd", v)?;
    }
    if let Some(v) = f.max_empty_bulk_delete {
        c.max_empty_bulk_delete = v.max(1);
    }
    if f.node_groups.is_empty() {
        return Err(ctx.err("clusterAutoscaler.nodeGroups", "empty: Cluster Autoscaler needs at least one node group"));
    }
    let known_zones: Vec<&str> = world.zones.iter().map(|z| z.name.as_str()).collect();
    for (i, g) in f.node_groups.iter().enumerate() {
        let path = format!("clusterAutoscaler.nodeGroups[{i}]");
        if g.name.is_empty() || c.node_groups.iter().any(|o: &NodeGroup| o.name == g.name) {
            return Err(ctx.err(format!("{path}.name"), format!("{:?} is empty or used twice", g.name)));
        }
        let capacity = match &g.capacity_type {
            Some(v) => capacity_type(ctx, &format!("{path}.capacityType"), v)?,
            None => CapacityType::OnDemand,
        };
        if g.instance_types.is_empty() {
            return Err(ctx.err(format!("{path}.instanceTypes"), "empty"));
        }
        for (j, t) in g.instance_types.iter().enumerate() {
            let offered = catalog::embedded().get(t).map(|it| it.offerings.iter().any(|o| o.capacity_type == capacity));
            match offered {
                None => {
                    return Err(
                        ctx.err(format!("{path}.instanceTypes[{j}]"), format!("{t:?} is not an EC2 instance type"))
                    )
                }
                Some(false) => {
                    return Err(ctx.err(format!("{path}.instanceTypes[{j}]"), format!("{t} is not sold as {capacity}")))
                }
                Some(true) => {}
            }
        }
        for (j, z) in g.zones.iter().enumerate() {
            if !known_zones.contains(&z.as_str()) {
                return Err(ctx.err(
                    format!("{path}.zones[{j}]"),
                    format!("{z:?} is not one of the world's zones ({})", known_zones.join(", ")),
                ));
            }
        }
        if g.max_size == 0 || g.min_size > g.max_size {
            return Err(ctx.err(
                format!("{path}.maxSize"),
                format!("{} must be at least 1 and at least minSize {}", g.max_size, g.min_size),
            ));
        }
        let mut taints = Vec::new();
        for (j, t) in g.taints.iter().enumerate() {
            let effect = TaintEffect::parse(&t.effect).ok_or_else(|| {
                ctx.err(
                    format!("{path}.taints[{j}].effect"),
                    format!("{:?} is not NoSchedule, PreferNoSchedule or NoExecute", t.effect),
                )
            })?;
            taints.push(Taint::new(&t.key, &t.value, effect));
        }
        c.node_groups.push(NodeGroup {
            name: g.name.clone(),
            instance_types: g.instance_types.clone(),
            capacity_type: capacity,
            zones: if g.zones.is_empty() {
                known_zones.iter().map(|z| z.to_string()).collect()
            } else {
                g.zones.clone()
            },
            min_size: g.min_size,
            max_size: g.max_size,
            labels: g.labels.clone(),
            taints,
        });
    }
    Ok(c)
}

#[cfg(test)]
pub(crate) mod tests;
