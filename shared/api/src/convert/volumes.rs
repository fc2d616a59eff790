//! Node constraints that come from a pod's PersistentVolumeClaims.
//!
//! A pod whose claim is bound to an EBS volume can only run in that volume's zone; a pod whose
//! claim is not bound yet (WaitForFirstConsumer) can only run where its StorageClass may
//! provision. [`StorageIndex`] holds the PVCs, PVs and StorageClasses of the input, already
//! converted, and answers a pod's `volume_requirements`.
//!
//! Simplifications, all shared with Karpenter:
//! * only the first term of a PV's `nodeAffinity.required` (and of a class's `allowedTopologies`)
//!   is used: the terms are ORed, and a conjunction is all `volume_requirements` can express;
//! * a claim, PV or class missing from the input adds no constraint (the real scheduler would
//!   wait for it to exist);
//! * an unbound claim uses its class's `allowedTopologies` whatever its binding mode: an
//!   Immediate-mode volume is also provisioned inside those topologies, so the constraint holds,
//!   though the zone it picks is unknown until then;
//! * volume limits per node (attachable EBS volumes) are not modelled here.

use std::collections::BTreeMap;

use dovetail_core::labels;
use dovetail_core::requirements::{Requirement, Requirements};
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::storage::v1::StorageClass;

use super::pod::DEFAULT_NAMESPACE;
use super::selector::node_selector_term;
use super::{ConvertError, Within};

/// The zone key the EBS CSI driver writes into PV node affinity. Its node plugin sets it to the
/// same value as `topology.kubernetes.io/zone`, which is the key Dovetail's nodes carry and its
/// catalog knows, so both are read as the standard key.
pub const EBS_CSI_ZONE: &str = "topology.ebs.csi.aws.com/zone";

const DEFAULT_CLASS_ANNOTATIONS: [&str; 2] =
    ["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"];

#[derive(Debug, Clone, PartialEq)]
struct Claim {
    volume_name: Option<String>,
    storage_class: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
struct Volume {
    requirements: Requirements,
    /// `spec.claimRef` (namespace, name): a PV pre-bound to a claim the binder will pair it with.
    claim_ref: Option<(String, String)>,
}

/// A claim the pod will get from a template rather than from a PVC object in the input: a
/// StatefulSet's `volumeClaimTemplates` (claim `<template>-<pod>`) or a generic ephemeral volume
/// (claim `<pod>-<volume>`). When no PVC of that name is in the input, the template's class
/// decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateClaim {
    pub claim_name: String,
    /// `None` = the cluster's default StorageClass.
    pub storage_class: Option<String>,
}

/// PVCs, PVs and StorageClasses of the input, converted once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StorageIndex {
    claims: BTreeMap<(String, String), Claim>,
    volumes: BTreeMap<String, Volume>,
    classes: BTreeMap<String, Requirements>,
    default_class: Option<String>,
}

fn standard_keys(reqs: Requirements) -> Requirements {
    reqs.iter()
        .map(|r| {
            let mut r = r.clone();
            if r.key == EBS_CSI_ZONE {
                r.key = labels::ZONE.to_string();
            }
            r
        })
        .collect()
}

impl StorageIndex {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add_claim(&mut self, pvc: &k8s::PersistentVolumeClaim) -> Result<(), ConvertError> {
        let name = pvc.metadata.name.clone().filter(|n| !n.is_empty());
        let name = name.ok_or_else(|| ConvertError::invalid("metadata.name", "missing"))?;
        let ns = pvc.metadata.namespace.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| DEFAULT_NAMESPACE.into());
        let spec = pvc.spec.as_ref();
        let claim = Claim {
            volume_name: spec.and_then(|s| s.volume_name.clone()).filter(|v| !v.is_empty()),
            storage_class: spec.and_then(|s| s.storage_class_name.clone()),
        };
        self.claims.insert((ns, name), claim);
        Ok(())
    }

    pub fn add_volume(&mut self, pv: &k8s::PersistentVolume) -> Result<(), ConvertError> {
        let name = pv.metadata.name.clone().filter(|n| !n.is_empty());
        let name = name.ok_or_else(|| ConvertError::invalid("metadata.name", "missing"))?;
        let spec = pv.spec.as_ref();
        let first_term = spec
            .and_then(|s| s.node_affinity.as_ref())
            .and_then(|a| a.required.as_ref())
            .and_then(|r| r.node_selector_terms.first());
        let requirements = match first_term {
            Some(t) => standard_keys(
                node_selector_term(t).within(|| "spec.nodeAffinity.required.nodeSelectorTerms[0]".into())?,
            ),
            None => Requirements::new(),
        };
        let claim_ref = spec.and_then(|s| s.claim_ref.as_ref()).and_then(|r| {
            let name = r.name.clone().filter(|n| !n.is_empty())?;
            Some((r.namespace.clone().unwrap_or_else(|| DEFAULT_NAMESPACE.into()), name))
        });
        self.volumes.insert(name, Volume { requirements, claim_ref });
        Ok(())
    }

    pub fn add_class(&mut self, sc: &StorageClass) -> Result<(), ConvertError> {
        let name = sc.metadata.name.clone().filter(|n| !n.is_empty());
        let name = name.ok_or_else(|| ConvertError::invalid("metadata.name", "missing"))?;
        let mut requirements = Requirements::new();
        if let Some(term) = sc.allowed_topologies.as_ref().and_then(|t| t.first()) {
            for (i, e) in term.match_label_expressions.iter().flatten().enumerate() {
                let r =
                    Requirement::new(&e.key, dovetail_core::requirements::Operator::In, &e.values).map_err(|err| {
                        ConvertError::new(format!("allowedTopologies[0].matchLabelExpressions[{i}]"), err)
                    })?;
                requirements.add(r);
            }
        }
        let annotations = sc.metadata.annotations.as_ref();
        if DEFAULT_CLASS_ANNOTATIONS.iter().any(|a| annotations.and_then(|m| m.get(*a)).is_some_and(|v| v == "true")) {
            // With several defaults the API server picks the newest; the input has no reliable
            // creation time, so the last one wins.
            self.default_class = Some(name.clone());
        }
        self.classes.insert(name, standard_keys(requirements));
        Ok(())
    }

    fn class_requirements(&self, class: Option<&str>) -> Option<&Requirements> {
        match class {
            // `storageClassName: ""` asks for a PV without class: static provisioning only.
            Some("") => None,
            Some(c) => self.classes.get(c),
            None => self.default_class.as_deref().and_then(|c| self.classes.get(c)),
        }
    }

    /// Requirements of one claim, or `None` when the input does not say.
    fn claim_requirements(
        &self,
        namespace: &str,
        claim_name: &str,
        template_class: Option<Option<&str>>,
    ) -> Option<&Requirements> {
        let key = (namespace.to_string(), claim_name.to_string());
        match self.claims.get(&key) {
            Some(Claim { volume_name: Some(v), .. }) => self.volumes.get(v).map(|v| &v.requirements),
            Some(Claim { volume_name: None, storage_class }) => {
                let pre_bound = self.volumes.values().find(|v| v.claim_ref.as_ref() == Some(&key));
                match pre_bound {
                    Some(v) => Some(&v.requirements),
                    None => self.class_requirements(storage_class.as_deref()),
                }
            }
            None => template_class.and_then(|class| self.class_requirements(class)),
        }
    }

    /// The pod's `volume_requirements`: the AND of every claim's constraint. `template_claims`
    /// are claims the pod's controller creates for it (StatefulSet `volumeClaimTemplates`).
    pub fn pod_requirements(
        &self,
        namespace: &str,
        pod_name: &str,
        spec: &k8s::PodSpec,
        template_claims: &[TemplateClaim],
    ) -> Requirements {
        let mut out = Requirements::new();
        for v in spec.volumes.iter().flatten() {
            let found = if let Some(pvc) = &v.persistent_volume_claim {
                self.claim_requirements(namespace, &pvc.claim_name, None)
            } else if let Some(eph) = &v.ephemeral {
                // A generic ephemeral volume's claim is named `<pod>-<volume>`.
                let class = eph.volume_claim_template.as_ref().and_then(|t| t.spec.storage_class_name.as_deref());
                self.claim_requirements(namespace, &format!("{pod_name}-{}", v.name), Some(class))
            } else {
                None
            };
            if let Some(r) = found {
                out = out.intersection(r);
            }
        }
        for t in template_claims {
            if let Some(r) = self.claim_requirements(namespace, &t.claim_name, Some(t.storage_class.as_deref())) {
                out = out.intersection(r);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(pvcs: &str, pvs: &str, classes: &str) -> StorageIndex {
        let mut idx = StorageIndex::new();
        for d in pvcs.split("---").filter(|d| !d.trim().is_empty()) {
            idx.add_claim(&serde_yaml_ng::from_str(d).unwrap()).unwrap();
        }
        for d in pvs.split("---").filter(|d| !d.trim().is_empty()) {
            idx.add_volume(&serde_yaml_ng::from_str(d).unwrap()).unwrap();
        }
        for d in classes.split("---").filter(|d| !d.trim().is_empty()) {
            idx.add_class(&serde_yaml_ng::from_str(d).unwrap()).unwrap();
        }
        idx
    }

    const GP3: &str = r#"
metadata:
  name: gp3
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions:
  - {key: topology.ebs.csi.aws.com/zone, values: [us-east-1a, us-east-1b]}
"#;

    const PV: &str = r#"
metadata: {name: pvc-0f1e}
spec:
  capacity: {storage: 20Gi}
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-0abc}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: topology.ebs.csi.aws.com/zone, operator: In, values: [us-east-1c]}
      - matchExpressions:
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1d]}
"#;

    fn pod_spec(yaml: &str) -> k8s::PodSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn zones(r: &Requirements) -> Vec<String> {
        r.get(labels::ZONE).map(|z| z.values.iter().cloned().collect()).unwrap_or_default()
    }

    #[test]
    fn bound_claim_takes_the_pv_zone_from_the_first_term() {
        let idx = index("metadata: {name: data, namespace: db}\nspec: {volumeName: pvc-0f1e}\n", PV, GP3);
        let spec = pod_spec("containers: []\nvolumes: [{name: d, persistentVolumeClaim: {claimName: data}}]\n");
        assert_eq!(zones(&idx.pod_requirements("db", "pg-0", &spec, &[])), vec!["us-east-1c"]);
        // Same claim name in another namespace: not this PVC, no constraint.
        assert!(idx.pod_requirements("web", "x", &spec, &[]).is_empty());
    }

    #[test]
    fn unbound_claim_uses_the_class_topologies() {
        let idx = index(
            "metadata: {name: a, namespace: db}\nspec: {storageClassName: gp3}\n---\nmetadata: {name: b, namespace: db}\nspec: {}\n---\nmetadata: {name: c, namespace: db}\nspec: {storageClassName: \"\"}\n",
            "",
            GP3,
        );
        for claim in ["a", "b"] {
            let spec = pod_spec(&format!(
                "containers: []\nvolumes: [{{name: d, persistentVolumeClaim: {{claimName: {claim}}}}}]\n"
            ));
            assert_eq!(
                zones(&idx.pod_requirements("db", "p", &spec, &[])),
                vec!["us-east-1a", "us-east-1b"],
                "{claim}"
            );
        }
        let spec = pod_spec("containers: []\nvolumes: [{name: d, persistentVolumeClaim: {claimName: c}}]\n");
        assert!(idx.pod_requirements("db", "p", &spec, &[]).is_empty());
    }

    #[test]
    fn pre_bound_pv_and_templates() {
        let pv = "metadata: {name: pv-1}\nspec:\n  claimRef: {namespace: db, name: data-pg-0}\n  nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1b]}]}]}}\n";
        let idx = index("metadata: {name: data-pg-0, namespace: db}\nspec: {storageClassName: gp3}\n", pv, GP3);
        let spec = pod_spec("containers: []\n");
        let tmpl = |n: &str| vec![TemplateClaim { claim_name: n.into(), storage_class: Some("gp3".into()) }];
        assert_eq!(zones(&idx.pod_requirements("db", "pg-0", &spec, &tmpl("data-pg-0"))), vec!["us-east-1b"]);
        // pg-1's claim is not in the input: the template's class decides.
        assert_eq!(zones(&idx.pod_requirements("db", "pg-1", &spec, &tmpl("data-pg-1"))).len(), 2);
        let eph = pod_spec("containers: []\nvolumes: [{name: scratch, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce]}}}}]\n");
        assert_eq!(zones(&idx.pod_requirements("db", "job-x", &eph, &[])).len(), 2, "default class");
    }

    #[test]
    fn bad_pv_affinity_is_reported() {
        let mut idx = StorageIndex::new();
        let pv: k8s::PersistentVolume = serde_yaml_ng::from_str(
            "metadata: {name: p}\nspec: {nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: z, operator: In}]}]}}}\n",
        )
        .unwrap();
        let e = idx.add_volume(&pv).unwrap_err().to_string();
        assert!(
            e.starts_with("spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0]: operator In"),
            "{e}"
        );
    }
}
