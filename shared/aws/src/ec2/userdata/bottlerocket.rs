//! Bottlerocket's user data: TOML settings (`settings.kubernetes.*`, …), which the image's
//! `early-boot-config` applies before the kubelet starts.
//!
//! As Karpenter does, the class's `userData` is read as Bottlerocket TOML and Dovetail's settings
//! are merged over it: the cluster's facts, `max-pods`, the class's kubelet fields, and the
//! registration taints replace whatever the class set for them; the node labels are the class's
//! with Dovetail's added (Dovetail's win on a shared key). Everything else the class sets
//! (`settings.host-containers`, `settings.kernel`, other `settings.kubernetes` keys) stays as
//! written.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use toml::{Table, Value};

use super::{effect, registration_labels, registration_taints, NodeSettings, UserDataError};

/// The bootstrap command that stripes the instance-store disks into one array and binds the
/// kubelet's, containerd's and the pod logs' directories onto it (RAID0).
pub const MOUNT_INSTANCE_STORAGE: &str = "000-mount-instance-storage";

/// The class's TOML with Dovetail's settings merged in (see the module docs), as TOML.
pub fn settings(s: &NodeSettings<'_>) -> Result<String, UserDataError> {
    let mut doc: Table = match s.user_data.filter(|u| !u.trim().is_empty()) {
        Some(text) => text.parse().map_err(|e: toml::de::Error| UserDataError::Toml(e.to_string()))?,
        None => Table::new(),
    };
    let settings = table(&mut doc, "settings")?;
    let kubernetes = table(settings, "kubernetes")?;
    kubernetes.insert("cluster-name".into(), s.cluster.name.clone().into());
    kubernetes.insert("api-server".into(), s.cluster.endpoint.clone().into());
    kubernetes.insert("cluster-certificate".into(), STANDARD.encode(&s.cluster.ca_pem).into());
    kubernetes.insert("max-pods".into(), s.max_pods.into());

    let labels = table(kubernetes, "node-labels")?;
    for (k, v) in registration_labels(s.labels) {
        labels.insert(k.clone(), v.clone().into());
    }
    // A key per taint, its `value:Effect`s (Bottlerocket's shape); the class's own are replaced.
    let mut taints: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for t in registration_taints(s.taints) {
        taints.entry(t.key.clone()).or_default().push(format!("{}:{}", t.value, effect(t.effect)).into());
    }
    kubernetes.insert("node-taints".into(), Value::Table(taints.into_iter().map(|(k, v)| (k, v.into())).collect()));

    if let Some(k) = s.kubelet {
        let strings = |m: &BTreeMap<String, String>| -> Value {
            Value::Table(m.iter().map(|(k, v)| (k.clone(), v.clone().into())).collect())
        };
        if let Some(ip) = k.cluster_dns.first() {
            kubernetes.insert("cluster-dns-ip".into(), ip.clone().into());
        }
        for (key, map) in [
            ("system-reserved", &k.system_reserved),
            ("kube-reserved", &k.kube_reserved),
            ("eviction-hard", &k.eviction_hard),
            ("eviction-soft", &k.eviction_soft),
        ] {
            if !map.is_empty() {
                kubernetes.insert(key.into(), strings(map));
            }
        }
        if !k.eviction_soft_grace_period.is_empty() {
            let periods = k.eviction_soft_grace_period.iter().map(|(k, v)| (k.clone(), v.to_string())).collect();
            kubernetes.insert("eviction-soft-grace-period".into(), strings(&periods));
        }
        if let Some(v) = k.eviction_max_pod_grace_period {
            kubernetes.insert("eviction-max-pod-grace-period".into(), i64::from(v).into());
        }
        // Bottlerocket takes the image GC thresholds as strings (Karpenter writes them so).
        for (key, value) in [
            ("image-gc-high-threshold-percent", k.image_gc_high_threshold_percent),
            ("image-gc-low-threshold-percent", k.image_gc_low_threshold_percent),
        ] {
            if let Some(v) = value {
                kubernetes.insert(key.into(), v.to_string().into());
            }
        }
        if let Some(quota) = k.cpu_cfs_quota {
            kubernetes.insert("cpu-cfs-quota".into(), quota.into());
        }
    }

    if s.raid0 {
        let commands = table(table(&mut doc, "settings")?, "bootstrap-commands")?;
        let words = |w: &[&str]| Value::Array(w.iter().map(|w| Value::from(*w)).collect());
        let mut mount = Table::new();
        mount.insert(
            "commands".into(),
            Value::Array(vec![
                words(&["apiclient", "ephemeral-storage", "init"]),
                words(&[
                    "apiclient",
                    "ephemeral-storage",
                    "bind",
                    "--dirs",
                    "/var/lib/containerd",
                    "/var/lib/kubelet",
                    "/var/log/pods",
                ]),
            ]),
        );
        mount.insert("essential".into(), true.into());
        mount.insert("mode".into(), "always".into());
        commands.insert(MOUNT_INSTANCE_STORAGE.into(), Value::Table(mount));
    }
    toml::to_string(&doc).map_err(|e| UserDataError::Toml(e.to_string()))
}

/// The table under `key`, made if absent; an error naming the key if it holds something else.
fn table<'a>(parent: &'a mut Table, key: &str) -> Result<&'a mut Table, UserDataError> {
    match parent.entry(key).or_insert_with(|| Value::Table(Table::new())) {
        Value::Table(t) => Ok(t),
        other => Err(UserDataError::Toml(format!("{key} must be a table, not {}", other.type_str()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ec2::userdata::tests::{cluster, every_kubelet_field, settings as base};
    use dovetail_api::crd::{AmiFamily, KubeletConfiguration};
    use dovetail_core::model::{Taint, TaintEffect};

    fn parsed(text: &str) -> Table {
        text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    /// The class's settings stay, Dovetail's win where both set one, and the labels merge.
    #[test]
    fn the_class_settings_merge_under_dovetails() {
        let c = cluster();
        let labels = BTreeMap::from([
            ("dovetail.dev/nodepool".to_string(), "br".to_string()),
            ("team".to_string(), "pay".to_string()),
            // The kubelet may not set it: left out, as for nodeadm.
            ("node-role.kubernetes.io/worker".to_string(), "".to_string()),
        ]);
        let kubelet: KubeletConfiguration = serde_json::from_value(every_kubelet_field()).unwrap();
        let user = r#"
[settings.kubernetes]
cluster-name = "someone-else"
max-pods = 3
allowed-unsafe-sysctls = ["net.core.somaxconn"]

[settings.kubernetes.node-labels]
team = "ops"
extra = "mine"

[settings.kubernetes.node-taints]
dedicated = ["x:NoSchedule"]

[settings.host-containers.admin]
enabled = true
"#;
        let taints =
            [Taint::new("gpu", "true", TaintEffect::NoSchedule), Taint::new("gpu", "true", TaintEffect::NoExecute)];
        let s = NodeSettings {
            taints: &taints,
            max_pods: 50,
            kubelet: Some(&kubelet),
            user_data: Some(user),
            ..base(&c, &labels, AmiFamily::Bottlerocket)
        };
        let out = super::super::user_data(&s).unwrap();
        let doc = parsed(&out);
        let k = doc["settings"]["kubernetes"].as_table().unwrap();
        assert_eq!(k["cluster-name"].as_str(), Some("prod"), "Dovetail's cluster wins");
        assert_eq!(k["api-server"].as_str(), Some(c.endpoint.as_str()));
        assert_eq!(STANDARD.decode(k["cluster-certificate"].as_str().unwrap()).unwrap(), c.ca_pem.as_bytes());
        assert_eq!(k["max-pods"].as_integer(), Some(50));
        assert_eq!(k["allowed-unsafe-sysctls"][0].as_str(), Some("net.core.somaxconn"), "the class's own stays");
        assert_eq!(doc["settings"]["host-containers"]["admin"]["enabled"].as_bool(), Some(true));
        let node_labels = k["node-labels"].as_table().unwrap();
        assert_eq!(
            node_labels.iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap())).collect::<Vec<_>>(),
            [("dovetail.dev/nodepool", "br"), ("extra", "mine"), ("team", "pay")]
        );
        let node_taints = k["node-taints"].as_table().unwrap();
        assert_eq!(node_taints.len(), 2, "the class's taints are replaced: {node_taints:?}");
        assert_eq!(node_taints["gpu"], Value::Array(vec!["true:NoSchedule".into(), "true:NoExecute".into()]));
        assert_eq!(node_taints["dovetail.dev/unregistered"], Value::Array(vec![":NoExecute".into()]));
        assert_eq!(k["cluster-dns-ip"].as_str(), Some("10.100.0.10"));
        assert_eq!(k["system-reserved"]["cpu"].as_str(), Some("100m"));
        assert_eq!(k["system-reserved"]["ephemeral-storage"].as_str(), Some("1Gi"));
        assert_eq!(k["kube-reserved"]["memory"].as_str(), Some("300Mi"));
        assert_eq!(k["eviction-hard"]["memory.available"].as_str(), Some("5%"));
        assert_eq!(k["eviction-hard"]["nodefs.available"].as_str(), Some("10%"));
        assert_eq!(k["eviction-soft"]["memory.available"].as_str(), Some("10%"));
        assert_eq!(k["eviction-soft-grace-period"]["memory.available"].as_str(), Some("1m30s"));
        assert_eq!(k["eviction-max-pod-grace-period"].as_integer(), Some(60));
        assert_eq!(k["image-gc-high-threshold-percent"].as_str(), Some("85"));
        assert_eq!(k["image-gc-low-threshold-percent"].as_str(), Some("80"));
        assert_eq!(k["cpu-cfs-quota"].as_bool(), Some(false));
        assert!(!k.contains_key("pods-per-core"), "Bottlerocket has no podsPerCore");
        assert!(doc["settings"].get("bootstrap-commands").is_none());
    }

    #[test]
    fn raid0_binds_the_kubelet_onto_the_instance_store() {
        let c = cluster();
        let labels = BTreeMap::new();
        let s = NodeSettings { raid0: true, ..base(&c, &labels, AmiFamily::Bottlerocket) };
        let doc = parsed(&settings(&s).unwrap());
        let mount = &doc["settings"]["bootstrap-commands"][MOUNT_INSTANCE_STORAGE];
        let commands: Vec<Vec<&str>> = mount["commands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect())
            .collect();
        assert_eq!(
            commands,
            [
                vec!["apiclient", "ephemeral-storage", "init"],
                vec![
                    "apiclient",
                    "ephemeral-storage",
                    "bind",
                    "--dirs",
                    "/var/lib/containerd",
                    "/var/lib/kubelet",
                    "/var/log/pods"
                ],
            ]
        );
        assert_eq!((mount["essential"].as_bool(), mount["mode"].as_str()), (Some(true), Some("always")));
        let k = &doc["settings"]["kubernetes"];
        assert_eq!(k["max-pods"].as_integer(), Some(29));
        assert!(k.get("cluster-dns-ip").is_none());
    }

    #[test]
    fn user_data_that_is_not_settings_is_refused_with_why() {
        let c = cluster();
        let labels = BTreeMap::new();
        let with = |user: &'static str| {
            settings(&NodeSettings { user_data: Some(user), ..base(&c, &labels, AmiFamily::Bottlerocket) })
        };
        let err = with("#!/bin/bash\necho hi\n").unwrap_err().to_string();
        assert!(err.starts_with("not Bottlerocket TOML settings: "), "{err}");
        let err = with("settings = 3\n").unwrap_err().to_string();
        assert_eq!(err, "not Bottlerocket TOML settings: settings must be a table, not integer");
        let err = with("[settings]\nkubernetes = \"x\"\n").unwrap_err().to_string();
        assert_eq!(err, "not Bottlerocket TOML settings: kubernetes must be a table, not string");
        // Blank user data is none.
        assert!(with("  \n").is_ok());
    }
}
