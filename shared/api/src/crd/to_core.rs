//! From the API objects to the decision core's model.
//!
//! Conversion validates first, so the core only ever sees well-formed pools: every problem comes
//! back as [`FieldError`]s naming the object and field, and a pool that fails is left out by the
//! caller while the others carry on.

use std::collections::BTreeMap;

use dovetail_core::model as core;
use dovetail_core::nodeclaim::object::FINALIZER;
use dovetail_core::requirements::{Operator as CoreOperator, Requirement, Requirements};
use dovetail_core::resources::{parse_cpu_millis, parse_units, Resources, CPU};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{
    AmiFamily, Budget, BudgetNodes, ConsolidationPolicy, DisruptionReason, EC2NodeClass, FieldError,
    InstanceStorePolicy, NodePool, NodeSelectorRequirementWithMinValues, Operator, Taint, TaintEffect,
};

fn field_error(kind: &'static str, name: &str, field: String, message: String) -> FieldError {
    FieldError { kind, name: name.to_string(), field, message }
}

fn taint(t: &Taint) -> core::Taint {
    let effect = match t.effect {
        TaintEffect::PreferNoSchedule => core::TaintEffect::PreferNoSchedule,
        TaintEffect::NoExecute => core::TaintEffect::NoExecute,
        // Validation has rejected unknown effects; NoSchedule is the only one left.
        _ => core::TaintEffect::NoSchedule,
    };
    core::Taint { key: t.key.clone(), value: t.value.clone().unwrap_or_default(), effect }
}

/// A pool's requirement in the core's terms ([`core_operator`] for its operator and values).
fn requirement(r: &NodeSelectorRequirementWithMinValues) -> Result<Requirement, String> {
    let (op, values) = core_operator(&r.operator, &r.values)?;
    let req = Requirement::new(&r.key, op, &values).map_err(|e| e.to_string())?;
    Ok(req.with_min_values(r.min_values.map(|m| m.max(0) as usize)))
}

/// A requirement's operator and values in the core's terms, for pools and overlays alike.
/// Karpenter's inclusive `Gte n` and `Lte n` are the core's exclusive `Gt n-1` and `Lt n+1`: both
/// compare integer label values only, so the sets are the same (and a NodeClaim writes them back
/// as Gt and Lt, which Karpenter reads alike).
pub(crate) fn core_operator(operator: &Operator, values: &[String]) -> Result<(CoreOperator, Vec<String>), String> {
    match operator {
        Operator::Gte | Operator::Lte => {
            let (op, shift) = if *operator == Operator::Gte { (CoreOperator::Gt, -1) } else { (CoreOperator::Lt, 1) };
            let bound = match values {
                [v] => v.parse::<i64>().ok().and_then(|n| n.checked_add(shift)),
                _ => None,
            };
            let bound =
                bound.ok_or_else(|| format!("operator {operator} needs one integer value in range, got {values:?}"))?;
            Ok((op, vec![bound.to_string()]))
        }
        other => match CoreOperator::parse(other.as_str()) {
            Some(op) => Ok((op, values.to_vec())),
            None => Err(format!("{:?} is not one of {}", other.as_str(), Operator::KNOWN.join(", "))),
        },
    }
}

/// Parses a resource quantity the way the core counts it (cpu in millicores, the rest in units).
fn quantity(name: &str, q: &str) -> Result<i64, String> {
    let r = match name {
        CPU => parse_cpu_millis(q),
        core::LIMIT_COST => core::parse_cost(q),
        _ => parse_units(q),
    };
    r.map_err(|e| e.to_string())
}

impl NodePool {
    /// The pool as the decision core uses it. `usage` (capacity of the pool's current nodes)
    /// is left zero for the caller to fill from the cluster.
    pub fn to_core(&self) -> Result<core::NodePool, Vec<FieldError>> {
        self.validate()?;
        let name = self.metadata.name.clone().unwrap_or_default();
        let err = |field: String, message: String| vec![field_error("NodePool", &name, field, message)];
        let tmpl = &self.spec.template;
        let mut requirements = Requirements::new();
        for (i, r) in tmpl.spec.requirements.iter().enumerate() {
            let field = format!("spec.template.spec.requirements[{i}]");
            requirements.add(requirement(r).map_err(|m| err(field, m))?);
        }
        // Template labels become requirements: a pod selecting them must match this pool.
        for (k, v) in &tmpl.metadata.labels {
            requirements.add(Requirement::single(k, v));
        }
        let mut limits = BTreeMap::new();
        for (k, q) in &self.spec.limits {
            let v = quantity(k, &q.0).map_err(|m| err(format!("spec.limits.{k}"), m))?;
            limits.insert(k.clone(), v);
        }
        let expire_after =
            tmpl.spec.expire_after.parse().map_err(|e| err("spec.template.spec.expireAfter".into(), e.to_string()))?;
        let termination_grace_period = match &tmpl.spec.termination_grace_period {
            Some(d) => {
                Some(d.parse().map_err(|e| err("spec.template.spec.terminationGracePeriod".into(), e.to_string()))?)
            }
            None => None,
        };
        let d = &self.spec.disruption;
        let consolidate_after =
            d.consolidate_after.parse().map_err(|e| err("spec.disruption.consolidateAfter".into(), e.to_string()))?;
        let budgets = d
            .budgets
            .iter()
            .enumerate()
            .map(|(i, b)| budget(b).map_err(|m| err(format!("spec.disruption.budgets[{i}]"), m)))
            .collect::<Result<Vec<_>, _>>()?;
        let (deleting, termination_finalizer) = deletion(&self.metadata);
        Ok(core::NodePool {
            name: name.clone(),
            weight: self.spec.weight.unwrap_or(0),
            requirements,
            labels: tmpl.metadata.labels.clone(),
            annotations: tmpl.metadata.annotations.clone(),
            taints: tmpl.spec.taints.iter().map(taint).collect(),
            startup_taints: tmpl.spec.startup_taints.iter().map(taint).collect(),
            node_class: tmpl.spec.node_class_ref.name.clone(),
            limits,
            usage: Resources::default(),
            expire_after,
            termination_grace_period,
            rebalance: match self.metadata.annotations.as_ref().and_then(|a| a.get(core::REBALANCE_POLICY_ANNOTATION)) {
                Some(v) if v == "Replace" => core::RebalancePolicy::Replace,
                Some(v) if v == "Ignore" => core::RebalancePolicy::Ignore,
                Some(v) => {
                    return Err(err(
                        format!("metadata.annotations[{}]", core::REBALANCE_POLICY_ANNOTATION),
                        format!("{v:?} is not a rebalance policy: use Ignore or Replace"),
                    ))
                }
                None => core::RebalancePolicy::Ignore,
            },
            node_repair: match self.metadata.annotations.as_ref().and_then(|a| a.get(core::NODE_REPAIR_ANNOTATION)) {
                Some(v) if v == "true" => true,
                Some(v) if v == "false" => false,
                Some(v) => {
                    return Err(err(
                        format!("metadata.annotations[{}]", core::NODE_REPAIR_ANNOTATION),
                        format!("{v:?} is not a node repair setting: use \"true\" or \"false\""),
                    ))
                }
                None => false,
            },
            disruption: core::DisruptionSpec {
                consolidation_policy: match d.consolidation_policy {
                    ConsolidationPolicy::WhenEmpty => core::ConsolidationPolicy::WhenEmpty,
                    _ => core::ConsolidationPolicy::WhenEmptyOrUnderutilized,
                },
                consolidate_after,
                budgets,
            },
            deleting,
            termination_finalizer,
        })
    }
}

/// Whether an object is being deleted, and whether Dovetail's termination finalizer holds it.
fn deletion(metadata: &ObjectMeta) -> (bool, bool) {
    let held = metadata.finalizers.iter().flatten().any(|f| f == FINALIZER);
    (metadata.deletion_timestamp.is_some(), held)
}

fn budget(b: &Budget) -> Result<core::Budget, String> {
    let nodes = match BudgetNodes::parse(&b.nodes)? {
        BudgetNodes::Count(n) => core::BudgetNodes::Count(n),
        BudgetNodes::Percent(p) => core::BudgetNodes::Percent(u32::from(p)),
    };
    let duration = match &b.duration {
        Some(d) => Some(d.parse().map_err(|e| e.to_string())?),
        None => None,
    };
    let reasons = b
        .reasons
        .iter()
        .flatten()
        .filter_map(|r| match r {
            DisruptionReason::Empty => Some(core::DisruptionReason::Empty),
            DisruptionReason::Underutilized => Some(core::DisruptionReason::Underutilized),
            DisruptionReason::Drifted => Some(core::DisruptionReason::Drifted),
            DisruptionReason::Unknown(_) => None,
        })
        .collect();
    Ok(core::Budget { nodes, schedule: b.schedule.clone(), duration, reasons })
}

impl EC2NodeClass {
    /// The parts of the class the decision core needs (kubelet settings that shape allocatable,
    /// and tags).
    pub fn to_core(&self) -> Result<core::NodeClass, Vec<FieldError>> {
        self.validate()?;
        let name = self.metadata.name.clone().unwrap_or_default();
        let err = |field: String, message: String| vec![field_error("EC2NodeClass", &name, field, message)];
        // The family from `amiFamily`, else the alias, decides the OS of the class's nodes.
        let mut kubelet = core::KubeletConfig {
            os: self.ami_family().node_os(),
            bottlerocket: self.ami_family() == AmiFamily::Bottlerocket,
            ephemeral_volume_bytes: self.spec.ephemeral_volume_bytes(),
            instance_store_raid0: self.spec.instance_store_policy == Some(InstanceStorePolicy::Raid0),
            ..Default::default()
        };
        if let Some(k) = &self.spec.kubelet {
            kubelet.max_pods = k.max_pods.map(i64::from);
            kubelet.pods_per_core = k.pods_per_core.map(i64::from);
            let reserved =
                |map: &BTreeMap<String, String>, field: &str| -> Result<Option<Resources>, Vec<FieldError>> {
                    if map.is_empty() {
                        return Ok(None);
                    }
                    Resources::from_quantities(map.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                        .map(Some)
                        .map_err(|(k, e)| err(format!("spec.kubelet.{field}.{k}"), e.to_string()))
                };
            kubelet.kube_reserved = reserved(&k.kube_reserved, "kubeReserved")?;
            kubelet.system_reserved = reserved(&k.system_reserved, "systemReserved")?;
            kubelet.eviction_hard = k.eviction_hard.clone();
            kubelet.eviction_soft = k.eviction_soft.clone();
            dovetail_core::overhead::validate(&kubelet).map_err(|e| err("spec.kubelet".into(), e.to_string()))?;
        }
        let spec = serde_json::to_value(&self.spec).unwrap_or_default();
        let (deleting, termination_finalizer) = deletion(&self.metadata);
        Ok(core::NodeClass {
            name,
            kubelet,
            tags: self.spec.tags.clone(),
            spec,
            deleting,
            termination_finalizer,
            role: self.spec.role.clone(),
            instance_profile: self.spec.instance_profile.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(yaml: &str) -> NodePool {
        serde_yaml_ng::from_str(yaml).expect("fixture parses")
    }

    #[test]
    fn converts_requirements_labels_limits_and_disruption() {
        let np = pool(
            r#"
apiVersion: dovetail.dev/v1
kind: NodePool
metadata: {name: web}
spec:
  weight: 10
  limits: {cpu: "100", memory: 400Gi}
  template:
    metadata:
      labels: {team: web}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, m6i, m7i, c6i, c7i], minValues: 3}
        - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["3"]}
      taints: [{key: dedicated, value: web, effect: NoSchedule}]
      startupTaints: [{key: node.cilium.io/agent-not-ready, effect: NoExecute}]
      expireAfter: 168h
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 5m
    budgets:
      - {nodes: "20%"}
      - {nodes: "0", schedule: "0 9 * * mon-fri", duration: 8h, reasons: [Underutilized]}
"#,
        );
        let p = np.to_core().expect("valid");
        assert_eq!(p.name, "web");
        assert_eq!(p.weight, 10);
        assert_eq!(p.node_class, "default");
        assert_eq!(p.requirements.get("team").and_then(|r| r.single_value()), Some("web"));
        assert_eq!(p.requirements.get("karpenter.k8s.aws/instance-family").unwrap().min_values, Some(3));
        assert!(p.requirements.get("karpenter.k8s.aws/instance-cpu").unwrap().has("4"));
        assert_eq!(p.limits["cpu"], 100_000);
        assert_eq!(p.limits["memory"], 400 << 30);
        assert_eq!(p.taints[0].to_string(), "dedicated=web:NoSchedule");
        assert_eq!(p.startup_taints[0].effect, core::TaintEffect::NoExecute);
        assert_eq!(p.expire_after, Some(std::time::Duration::from_secs(168 * 3600)));
        assert_eq!(p.disruption.consolidation_policy, core::ConsolidationPolicy::WhenEmpty);
        assert_eq!(p.disruption.consolidate_after, Some(std::time::Duration::from_secs(300)));
        assert_eq!(p.disruption.budgets.len(), 2);
        assert_eq!(p.disruption.budgets[1].nodes, core::BudgetNodes::Count(0));
        assert_eq!(p.disruption.budgets[1].reasons, vec![core::DisruptionReason::Underutilized]);
    }

    #[test]
    fn defaults_follow_karpenter() {
        let p = pool(
            "apiVersion: dovetail.dev/v1\nkind: NodePool\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: dovetail.dev, kind: EC2NodeClass, name: default}\n      requirements: []\n",
        )
        .to_core()
        .expect("valid");
        assert_eq!(p.expire_after, Some(std::time::Duration::from_secs(720 * 3600)));
        assert_eq!(p.disruption.consolidation_policy, core::ConsolidationPolicy::WhenEmptyOrUnderutilized);
        assert_eq!(p.disruption.budgets[0].nodes, core::BudgetNodes::Percent(10));
        assert!(!p.node_repair, "node repair is opt-in, as in Karpenter");
    }

    #[test]
    fn the_node_repair_annotation_turns_repair_on() {
        let annotated = |value: &str| {
            pool(&format!(
                "apiVersion: dovetail.dev/v1\nkind: NodePool\nmetadata: {{name: r, annotations: {{dovetail.dev/node-repair: {value:?}}}}}\nspec:\n  template:\n    spec:\n      nodeClassRef: {{group: dovetail.dev, kind: EC2NodeClass, name: default}}\n      requirements: []\n"
            ))
            .to_core()
        };
        assert!(annotated("true").expect("valid").node_repair);
        assert!(!annotated("false").expect("valid").node_repair);
        let errs = annotated("yes").unwrap_err();
        let text = errs.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
        assert_eq!(
            text,
            "NodePool \"r\": metadata.annotations[dovetail.dev/node-repair]: \"yes\" is not a node repair setting: use \"true\" or \"false\""
        );
    }

    #[test]
    fn invalid_pool_reports_object_and_field() {
        let np = pool(
            "apiVersion: dovetail.dev/v1\nkind: NodePool\nmetadata: {name: bad}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: dovetail.dev, kind: EC2NodeClass, name: default}\n      requirements:\n        - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: [four]}\n",
        );
        let errs = np.to_core().unwrap_err();
        let text = errs.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
        assert!(text.contains("NodePool \"bad\""), "{text}");
        assert!(text.contains("spec.template.spec.requirements[0]"), "{text}");
    }

    fn with_limits(limits: &str) -> NodePool {
        pool(&format!(
            "apiVersion: dovetail.dev/v1\nkind: NodePool\nmetadata: {{name: capped}}\nspec:\n  limits: {limits}\n  template:\n    spec:\n      nodeClassRef: {{group: dovetail.dev, kind: EC2NodeClass, name: default}}\n      requirements: []\n"
        ))
    }

    #[test]
    fn a_node_limit_is_a_whole_count() {
        let p = with_limits(r#"{nodes: "3", cpu: "16"}"#).to_core().expect("valid");
        assert_eq!((p.limits["nodes"], p.limits["cpu"]), (3, 16_000));
        assert_eq!(with_limits(r#"{nodes: 1k}"#).to_core().expect("valid").limits["nodes"], 1000);
        for bad in ["2.5", "500m", "-1"] {
            let errs = with_limits(&format!("{{nodes: {bad:?}}}")).to_core().unwrap_err();
            let text = errs.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
            assert_eq!(
                text,
                format!(
                    "NodePool \"capped\": spec.limits[nodes]: {bad:?} is not a whole, non-negative number of nodes"
                )
            );
        }
        // Other limits round as before: half a cpu is a quantity like any other.
        assert!(with_limits(r#"{cpu: "2.5"}"#).to_core().is_ok());
    }

    #[test]
    fn a_cost_limit_is_dollars_per_hour() {
        let p = with_limits(r#"{dovetail.dev/cost-per-hour: "12.5", cpu: "16"}"#).to_core().expect("valid");
        assert_eq!((p.limits[core::LIMIT_COST], p.limits["cpu"]), (12_500_000, 16_000));
        assert_eq!(
            with_limits(r#"{dovetail.dev/cost-per-hour: 250}"#).to_core().expect("valid").limits[core::LIMIT_COST],
            250_000_000
        );
        for bad in ["-1", "-500m"] {
            let errs = with_limits(&format!("{{dovetail.dev/cost-per-hour: {bad:?}}}")).to_core().unwrap_err();
            let text = errs.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
            assert_eq!(
                text,
                format!(
                    "NodePool \"capped\": spec.limits[dovetail.dev/cost-per-hour]: {bad:?} is not a non-negative number of dollars per hour (e.g. \"12.5\")"
                )
            );
        }
        // Not a quantity at all: the same message as for any limit, naming the field.
        let errs = with_limits(r#"{dovetail.dev/cost-per-hour: "$12"}"#).to_core().unwrap_err();
        assert!(
            errs[0]
                .to_string()
                .starts_with("NodePool \"capped\": spec.limits[dovetail.dev/cost-per-hour]: \"$12\" is not a quantity"),
            "{errs:?}"
        );
    }

    #[test]
    fn node_class_kubelet_shapes_allocatable() {
        let nc: EC2NodeClass = serde_yaml_ng::from_str(
            r#"
apiVersion: dovetail.dev/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  kubelet: {maxPods: 20, kubeReserved: {cpu: 200m}}
"#,
        )
        .unwrap();
        let c = nc.to_core().expect("valid");
        assert_eq!(c.kubelet.max_pods, Some(20));
        assert_eq!(c.kubelet.kube_reserved.as_ref().map(|r| r.cpu), Some(200));
        let m5 = dovetail_core::catalog::embedded().get("m5.large").unwrap();
        assert_eq!(m5.allocatable(&c.kubelet).pods, 20);
        assert_eq!(c.kubelet.os, core::NodeOs::Linux);
    }

    fn class_with(ami: &str) -> EC2NodeClass {
        serde_yaml_ng::from_str(&format!(
            r#"
apiVersion: dovetail.dev/v1
kind: EC2NodeClass
metadata: {{name: win}}
spec:
  role: KarpenterNodeRole-demo
  {ami}
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
"#
        ))
        .unwrap()
    }

    #[test]
    fn the_family_decides_the_node_os() {
        for (ami, os) in [
            ("amiSelectorTerms: [{alias: windows2019@latest}]", core::NodeOs::Windows2019),
            ("amiSelectorTerms: [{alias: windows2022@latest}]", core::NodeOs::Windows2022),
            ("amiSelectorTerms: [{alias: windows2025@latest}]", core::NodeOs::Windows2025),
            ("amiSelectorTerms: [{alias: windows2022@latest}]\n  amiFamily: Windows2022", core::NodeOs::Windows2022),
            ("amiSelectorTerms: [{id: ami-0123456789abcdef0}]\n  amiFamily: Windows2025", core::NodeOs::Windows2025),
            // Custom with a Windows alias is Custom, as Karpenter reads it: the image is the user's.
            ("amiSelectorTerms: [{alias: windows2022@latest}]\n  amiFamily: Custom", core::NodeOs::Linux),
            ("amiSelectorTerms: [{alias: al2023@latest}]", core::NodeOs::Linux),
            ("amiSelectorTerms: [{alias: bottlerocket@latest}]", core::NodeOs::Linux),
        ] {
            let c = class_with(ami).to_core().unwrap_or_else(|e| panic!("{ami}: {e:?}"));
            assert_eq!(c.kubelet.os, os, "{ami}");
        }
        // The OS reaches allocatable: 110 pods on a Windows m5.large, not the ENI limit of 29.
        let c = class_with("amiSelectorTerms: [{alias: windows2022@latest}]").to_core().unwrap();
        let m5 = dovetail_core::catalog::embedded().get("m5.large").unwrap();
        assert_eq!(m5.allocatable(&c.kubelet).pods, 110);
    }

    /// The class's mappings and instanceStorePolicy reach the node's ephemeral storage as
    /// Karpenter sizes it: rootVolume, else the family's ephemeral device (Bottlerocket's data
    /// volume), else for Custom the last mapping; with RAID0, the type's instance store.
    #[test]
    fn the_mapped_volume_or_the_instance_store_holds_ephemeral_storage() {
        const GI: i64 = 1 << 30;
        let cases = [
            ("amiSelectorTerms: [{alias: al2023@latest}]", None),
            (
                "amiSelectorTerms: [{alias: al2023@latest}]\n  blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 100Gi}}]",
                Some(100 * GI),
            ),
            (
                "amiSelectorTerms: [{alias: al2023@latest}]\n  blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 100Gi}}, {deviceName: /dev/xvdc, rootVolume: true, ebs: {volumeSize: 200Gi}}]",
                Some(200 * GI),
            ),
            // Only the ephemeral device counts: a data volume elsewhere leaves the default.
            ("amiSelectorTerms: [{alias: al2023@latest}]\n  blockDeviceMappings: [{deviceName: /dev/xvdb, ebs: {volumeSize: 100Gi}}]", None),
            (
                "amiSelectorTerms: [{alias: bottlerocket@latest}]\n  blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 4Gi}}, {deviceName: /dev/xvdb, ebs: {volumeSize: 80Gi}}]",
                Some(80 * GI),
            ),
            (
                "amiSelectorTerms: [{alias: windows2022@latest}]\n  blockDeviceMappings: [{deviceName: /dev/sda1, ebs: {volumeSize: 1Ti}}]",
                Some(1024 * GI),
            ),
            (
                "amiFamily: Custom\n  amiSelectorTerms: [{id: ami-0123}]\n  blockDeviceMappings: [{deviceName: /dev/sda1, ebs: {volumeSize: 30Gi}}, {deviceName: /dev/sdb, ebs: {volumeSize: 60Gi}}]",
                Some(60 * GI),
            ),
        ];
        for (ami, want) in cases {
            let c = class_with(ami).to_core().unwrap_or_else(|e| panic!("{ami}: {e:?}"));
            assert_eq!(c.kubelet.ephemeral_volume_bytes, want, "{ami}");
            assert!(!c.kubelet.instance_store_raid0);
        }
        let m5d = dovetail_core::catalog::embedded().get("m5d.large").unwrap();
        let mapped = class_with(cases[1].0).to_core().unwrap();
        assert_eq!(m5d.capacity(&mapped.kubelet).ephemeral, 100 * GI);
        let raid0 = class_with(&format!("{}\n  instanceStorePolicy: RAID0", cases[1].0)).to_core().unwrap();
        assert!(raid0.kubelet.instance_store_raid0);
        assert_eq!(m5d.capacity(&raid0.kubelet).ephemeral, 75_000_000_000, "m5d.large has one 75 GB NVMe disk");
        let m5 = dovetail_core::catalog::embedded().get("m5.large").unwrap();
        assert_eq!(m5.capacity(&raid0.kubelet).ephemeral, 100 * GI, "no instance store: the volume");
    }
}
