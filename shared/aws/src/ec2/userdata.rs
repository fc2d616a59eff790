//! Node user data, in a MIME multipart document after the parts of the class's own `userData`:
//! - AL2023: a nodeadm `NodeConfig` (cluster name, API endpoint, CA, service CIDR; kubelet
//!   config with maxPods and the class's kubelet settings; kubelet flags with the node's labels
//!   and registration taints, `dovetail.dev/unregistered:NoExecute` among them). nodeadm merges
//!   the NodeConfig parts in order, so Dovetail's settings win where both set a field.
//! - AL2: a shell script calling the image's `/etc/eks/bootstrap.sh` with the same settings as
//!   its arguments (the kubelet's as `--kubelet-extra-args`); cloud-init runs the parts in order,
//!   so the class's scripts run before the node joins.
//! - Windows: no MIME document but one `<powershell>` block, the class's PowerShell and then the
//!   image's `Start-EKSBootstrap.ps1` with the same settings ([`windows_bootstrap`]).
//! - Bottlerocket: TOML settings, the class's with Dovetail's merged over them
//!   ([`bottlerocket::settings`]).

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use dovetail_api::crd::{AmiFamily, KubeletConfiguration};
use dovetail_core::labels::TAINT_UNREGISTERED;
use dovetail_core::model::{Taint, TaintEffect};

use crate::eks::ClusterFacts;

pub mod bottlerocket;
mod mime;

use mime::Document;
pub use mime::{MimeError, Part};

/// Why the class's `userData` cannot be merged with Dovetail's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserDataError {
    #[error(transparent)]
    Mime(#[from] MimeError),
    #[error("not Bottlerocket TOML settings: {0}")]
    Toml(String),
}

/// The MIME boundary of the generated document (fixed, so equal inputs give equal bytes and one
/// launch template).
pub const BOUNDARY: &str = "//dovetail//";
/// Content type of a nodeadm NodeConfig part.
pub const NODECONFIG_TYPE: &str = "application/node.eks.aws";
/// Content type of a shell script part (cloud-init runs it).
pub const SHELL_SCRIPT_TYPE: &str = "text/x-shellscript; charset=\"us-ascii\"";

/// What one launch template's user data says.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSettings<'a> {
    pub cluster: &'a ClusterFacts,
    pub labels: &'a BTreeMap<String, String>,
    /// Taints and startup taints of the node; the unregistered taint is added.
    pub taints: &'a [Taint],
    pub max_pods: i64,
    pub kubelet: Option<&'a KubeletConfiguration>,
    /// The class's `userData`, merged in.
    pub user_data: Option<&'a str>,
    /// `instanceStorePolicy: RAID0`: the image stripes the instance-store disks into one array
    /// and puts the kubelet's and containerd's directories on it (nodeadm's `localStorage`
    /// strategy, `bootstrap.sh --local-disks raid0`, Bottlerocket's `apiclient ephemeral-storage`).
    pub raid0: bool,
    /// How the image bootstraps: [`AmiFamily::Al2`] with `bootstrap.sh`, the Windows families with
    /// `Start-EKSBootstrap.ps1`, any other with nodeadm.
    pub family: AmiFamily,
}

/// Whether the kubelet accepts `key` in `--node-labels`: labels in the `kubernetes.io` and
/// `k8s.io` namespaces are refused unless they are among the kubelet's own (the node
/// restriction admission plugin's rule); every other key is fine.
pub fn kubelet_may_set(key: &str) -> bool {
    const OWN: [&str; 11] = [
        "kubernetes.io/hostname",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
    ];
    let Some((namespace, _)) = key.split_once('/') else { return true };
    let restricted = |suffix: &str| namespace == suffix || namespace.ends_with(&format!(".{suffix}"));
    if !(restricted("kubernetes.io") || restricted("k8s.io")) {
        return true;
    }
    OWN.contains(&key)
        || ["kubelet.kubernetes.io", "node.kubernetes.io"]
            .iter()
            .any(|ns| namespace == *ns || namespace.ends_with(&format!(".{ns}")))
}

fn effect(e: TaintEffect) -> &'static str {
    match e {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    }
}

/// The taints a node registers with: the pool's and startup taints, and the unregistered taint
/// Dovetail lifts once it has matched the node to its claim.
fn registration_taints(taints: &[Taint]) -> Vec<Taint> {
    let mut all: Vec<Taint> = taints.to_vec();
    if !all.iter().any(|t| t.key == TAINT_UNREGISTERED) {
        all.push(Taint::new(TAINT_UNREGISTERED, "", TaintEffect::NoExecute));
    }
    all
}

/// The labels the node registers with: those the kubelet may set ([`kubelet_may_set`]).
fn registration_labels(labels: &BTreeMap<String, String>) -> impl Iterator<Item = (&String, &String)> {
    labels.iter().filter(|(k, _)| kubelet_may_set(k))
}

/// The kubelet flags: `--node-labels` (what the kubelet may set) and `--register-with-taints`
/// (always including the unregistered taint).
pub fn kubelet_flags(labels: &BTreeMap<String, String>, taints: &[Taint]) -> Vec<String> {
    let mut flags = Vec::new();
    let labels: Vec<String> = registration_labels(labels).map(|(k, v)| format!("{k}={v}")).collect();
    if !labels.is_empty() {
        flags.push(format!("--node-labels={}", labels.join(",")));
    }
    let taints: Vec<String> = registration_taints(taints)
        .iter()
        .map(|t| {
            if t.value.is_empty() {
                format!("{}:{}", t.key, effect(t.effect))
            } else {
                format!("{}={}:{}", t.key, t.value, effect(t.effect))
            }
        })
        .collect();
    flags.push(format!("--register-with-taints={}", taints.join(",")));
    flags
}

/// The NodeConfig document (YAML).
pub fn node_config(s: &NodeSettings<'_>) -> String {
    let mut kubelet = s.kubelet.and_then(|k| serde_json::to_value(k).ok()).unwrap_or_else(|| serde_json::json!({}));
    if let Some(map) = kubelet.as_object_mut() {
        map.insert("maxPods".into(), s.max_pods.into());
    }
    let mut cluster = serde_json::json!({
        "name": s.cluster.name,
        "apiServerEndpoint": s.cluster.endpoint,
        "certificateAuthority": STANDARD.encode(&s.cluster.ca_pem),
    });
    if let Some(cidr) = &s.cluster.service_cidr {
        cluster["cidr"] = cidr.clone().into();
    }
    let mut doc = serde_json::json!({
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {
            "cluster": cluster,
            "kubelet": {"config": kubelet, "flags": kubelet_flags(s.labels, s.taints)},
        },
    });
    if s.raid0 {
        doc["spec"]["instance"] = serde_json::json!({"localStorage": {"strategy": "RAID0"}});
    }
    serde_yaml_ng::to_string(&doc).expect("JSON values serialize as YAML")
}

/// The kubelet's command-line settings both bootstrap scripts take as one "extra args" string
/// (AL2's `--kubelet-extra-args`, Windows' `-KubeletExtraArgs`), as Karpenter passes them: the
/// flags [`kubelet_flags`] gives, maxPods, and the class's kubelet fields; with the class's first
/// `clusterDNS` address, which both scripts take as an argument of their own.
fn kubelet_extra_args<'a>(s: &NodeSettings<'a>) -> (Vec<String>, Option<&'a String>) {
    let mut kubelet = kubelet_flags(s.labels, s.taints);
    kubelet.push(format!("--max-pods={}", s.max_pods));
    let Some(k) = s.kubelet else { return (kubelet, None) };
    let pairs = |m: &BTreeMap<String, String>, sep: &str| {
        m.iter().map(|(k, v)| format!("{k}{sep}{v}")).collect::<Vec<_>>().join(",")
    };
    for (flag, map, sep) in [
        ("system-reserved", &k.system_reserved, "="),
        ("kube-reserved", &k.kube_reserved, "="),
        ("eviction-hard", &k.eviction_hard, "<"),
        ("eviction-soft", &k.eviction_soft, "<"),
    ] {
        if !map.is_empty() {
            kubelet.push(format!("--{flag}={}", pairs(map, sep)));
        }
    }
    if !k.eviction_soft_grace_period.is_empty() {
        let periods: BTreeMap<String, String> =
            k.eviction_soft_grace_period.iter().map(|(k, v)| (k.clone(), v.to_string())).collect();
        kubelet.push(format!("--eviction-soft-grace-period={}", pairs(&periods, "=")));
    }
    for (flag, value) in [
        ("pods-per-core", k.pods_per_core),
        ("eviction-max-pod-grace-period", k.eviction_max_pod_grace_period),
        ("image-gc-high-threshold", k.image_gc_high_threshold_percent),
        ("image-gc-low-threshold", k.image_gc_low_threshold_percent),
    ] {
        if let Some(v) = value {
            kubelet.push(format!("--{flag}={v}"));
        }
    }
    if let Some(quota) = k.cpu_cfs_quota {
        kubelet.push(format!("--cpu-cfs-quota={quota}"));
    }
    (kubelet, k.cluster_dns.first())
}

/// AL2's bootstrap: `/etc/eks/bootstrap.sh` with the cluster's facts and the kubelet's settings
/// ([`kubelet_extra_args`]) as `--kubelet-extra-args`. `--use-max-pods false` keeps the script's
/// own maxPods table out of it.
pub fn al2_bootstrap(s: &NodeSettings<'_>) -> String {
    let (kubelet, dns) = kubelet_extra_args(s);
    let mut args = vec![
        quoted(&s.cluster.name),
        "--apiserver-endpoint".to_string(),
        quoted(&s.cluster.endpoint),
        "--b64-cluster-ca".to_string(),
        quoted(&STANDARD.encode(&s.cluster.ca_pem)),
    ];
    if let Some(cidr) = &s.cluster.service_cidr {
        args.extend(["--service-ipv4-cidr".to_string(), quoted(cidr)]);
    }
    if let Some(ip) = dns {
        args.extend(["--dns-cluster-ip".to_string(), quoted(ip)]);
    }
    args.extend(["--use-max-pods".to_string(), "false".to_string()]);
    if s.raid0 {
        args.extend(["--local-disks".to_string(), "raid0".to_string()]);
    }
    args.extend(["--kubelet-extra-args".to_string(), quoted(&kubelet.join(" "))]);
    format!("#!/bin/bash\nset -euo pipefail\n/etc/eks/bootstrap.sh {}\n", args.join(" "))
}

/// Where the EKS Windows AMI keeps its bootstrap script (PowerShell expands the variable).
pub const WINDOWS_BOOTSTRAP_SCRIPT: &str = r#"$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"#;

/// Windows' user data, Karpenter's shape: one `<powershell>` block that runs the class's own
/// PowerShell first, then the image's `Start-EKSBootstrap.ps1` with the cluster's facts, the
/// kubelet's settings ([`kubelet_extra_args`]) as `-KubeletExtraArgs`, and `-DNSClusterIP` when the
/// class sets `clusterDNS`. EC2Launch runs the block; it is no MIME document.
///
/// Karpenter documents the class's `userData` as bare PowerShell commands and pastes it into its
/// block as written, so a class that wraps its script in `<powershell>` tags itself ends up with
/// nested blocks, which EC2Launch cuts at the first `</powershell>`: the bootstrap line falls
/// outside and the node never joins. Here such a block's content goes into ours instead, and
/// whatever stands outside it (other EC2Launch tags, such as `<persist>true</persist>`) follows our
/// block unchanged.
///
/// Unlike Karpenter (its issue 4088), the cluster's service CIDR is passed as `-ServiceCIDR` when
/// known: without it the script guesses 10.100.0.0/16 or 172.20.0.0/16 from the node's address.
pub fn windows_bootstrap(s: &NodeSettings<'_>) -> String {
    let (script, outside) = s.user_data.map(powershell_of).unwrap_or_default();
    let (kubelet, dns) = kubelet_extra_args(s);
    let mut out = String::from("<powershell>\n");
    if !script.trim().is_empty() {
        out.push_str(script.trim_matches(['\r', '\n']));
        out.push('\n');
    }
    out.push_str(&format!("[string]$EKSBootstrapScriptFile = \"{WINDOWS_BOOTSTRAP_SCRIPT}\"\n"));
    let mut call = format!(
        "& $EKSBootstrapScriptFile -EKSClusterName {} -APIServerEndpoint {} -Base64ClusterCA {}",
        ps_quoted(&s.cluster.name),
        ps_quoted(&s.cluster.endpoint),
        ps_quoted(&STANDARD.encode(&s.cluster.ca_pem)),
    );
    call.push_str(&format!(" -KubeletExtraArgs {}", ps_quoted(&kubelet.join(" "))));
    if let Some(ip) = dns {
        call.push_str(&format!(" -DNSClusterIP {}", ps_quoted(ip)));
    }
    if let Some(cidr) = &s.cluster.service_cidr {
        call.push_str(&format!(" -ServiceCIDR {}", ps_quoted(cidr)));
    }
    out.push_str(&call);
    out.push_str("\n</powershell>\n");
    if !outside.trim().is_empty() {
        out.push_str(outside.trim_matches(['\r', '\n']));
        out.push('\n');
    }
    out
}

/// A class's Windows `userData` split into the PowerShell to run in Dovetail's block and the rest:
/// the content of its first `<powershell>` block (tags matched in any case) and the text around
/// that block; without such a block, all of it is PowerShell.
fn powershell_of(user_data: &str) -> (String, String) {
    let lower = user_data.to_ascii_lowercase();
    let (open, close) = ("<powershell>", "</powershell>");
    let Some(start) = lower.find(open) else { return (user_data.to_string(), String::new()) };
    let inner = start + open.len();
    let end = lower[inner..].find(close).map_or(user_data.len(), |e| inner + e);
    let after = (end + close.len()).min(user_data.len());
    let outside = format!("{}{}", &user_data[..start], &user_data[after..]);
    (user_data[inner..end].to_string(), outside)
}

/// `text` as one PowerShell single-quoted string (a `'` inside doubled).
fn ps_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The named arguments of the `Start-EKSBootstrap.ps1` call in Windows user data, as
/// [`windows_bootstrap`] writes it (`-Name 'value'`, `''` standing for a `'`): what the image's
/// script receives, for whoever plays the node (the end-to-end test kubelet) and for tests.
/// `None` if no line calls the script.
pub fn windows_bootstrap_args(user_data: &str) -> Option<BTreeMap<String, String>> {
    let line = user_data.lines().find_map(|l| l.trim_start().strip_prefix("& $EKSBootstrapScriptFile"))?;
    let mut args = BTreeMap::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        let (name, after) = rest.strip_prefix('-')?.split_once(' ')?;
        let mut quoted = after.trim_start().strip_prefix('\'')?;
        let mut value = String::new();
        loop {
            let end = quoted.find('\'')?;
            value.push_str(&quoted[..end]);
            quoted = &quoted[end + 1..];
            match quoted.strip_prefix('\'') {
                Some(more) => {
                    value.push('\'');
                    quoted = more;
                }
                None => break,
            }
        }
        args.insert(name.to_string(), value);
        rest = quoted.trim_start();
    }
    Some(args)
}

/// `text` as one shell word: single-quoted, a `'` inside closed, escaped and reopened.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The class's user data as parts: a MIME multipart document's own parts, a single MIME
/// entity as it is, or the whole text as one part (a NodeConfig if it looks like one, else a shell
/// script or cloud-config).
pub fn user_parts(user_data: &str) -> Result<Vec<Part>, MimeError> {
    if user_data.trim().is_empty() {
        return Ok(vec![]);
    }
    match mime::read(user_data)? {
        Document::Multipart(parts) => return Ok(parts),
        Document::Single(part) => return Ok(vec![part]),
        Document::Plain => {}
    }
    let content_type = if user_data.contains("node.eks.aws") {
        NODECONFIG_TYPE
    } else if user_data.trim_start().starts_with("#cloud-config") {
        "text/cloud-config; charset=\"us-ascii\""
    } else {
        SHELL_SCRIPT_TYPE
    };
    Ok(vec![Part { headers: vec![format!("Content-Type: {content_type}")], body: user_data.to_string() }])
}

/// The whole user data: the class's parts, then Dovetail's NodeConfig (AL2: its bootstrap
/// script), for Windows the PowerShell block [`windows_bootstrap`] writes, for Bottlerocket the
/// class's TOML settings with Dovetail's merged in ([`bottlerocket::settings`]). An error if the
/// class's `userData` says it is multipart but cannot be split, or is no Bottlerocket TOML.
pub fn user_data(s: &NodeSettings<'_>) -> Result<String, UserDataError> {
    if s.family.node_os().is_windows() {
        return Ok(windows_bootstrap(s));
    }
    if s.family == AmiFamily::Bottlerocket {
        return bottlerocket::settings(s);
    }
    let mut parts = s.user_data.map(user_parts).transpose()?.unwrap_or_default();
    parts.push(match s.family {
        AmiFamily::Al2 => Part { headers: vec![format!("Content-Type: {SHELL_SCRIPT_TYPE}")], body: al2_bootstrap(s) },
        _ => Part { headers: vec![format!("Content-Type: {NODECONFIG_TYPE}")], body: node_config(s) },
    });
    let boundary = boundary_for(&parts);
    let mut out = format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{boundary}\"\n\n");
    for p in &parts {
        out.push_str(&format!("--{boundary}\n"));
        for h in &p.headers {
            out.push_str(h);
            out.push('\n');
        }
        out.push('\n');
        out.push_str(p.body.trim_end_matches(['\r', '\n']));
        out.push('\n');
    }
    out.push_str(&format!("--{boundary}--\n"));
    Ok(out)
}

/// [`BOUNDARY`], unless a part's body holds `--` + it (a line starting so would end that part
/// early): then the first `//dovetail-<n>//` none holds. Still a function of the parts alone.
fn boundary_for(parts: &[Part]) -> String {
    (0..)
        .map(|n| if n == 0 { BOUNDARY.to_string() } else { format!("//dovetail-{n}//") })
        .find(|b| {
            let delimiter = format!("--{b}");
            !parts.iter().any(|p| p.body.contains(&delimiter))
        })
        .expect("finitely many bodies cannot hold every boundary")
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn cluster() -> ClusterFacts {
        ClusterFacts {
            name: "prod".into(),
            endpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com".into(),
            ca_pem: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".into(),
            version: "1.31".into(),
            service_cidr: Some("10.100.0.0/16".into()),
        }
    }

    /// What a launch of `family` on `c` says with no taints, kubelet settings, class user data or
    /// RAID0, and 29 max pods; tests set what they check.
    pub(super) fn settings<'a>(
        c: &'a ClusterFacts,
        labels: &'a BTreeMap<String, String>,
        family: AmiFamily,
    ) -> NodeSettings<'a> {
        NodeSettings {
            cluster: c,
            labels,
            taints: &[],
            max_pods: 29,
            kubelet: None,
            user_data: None,
            family,
            raid0: false,
        }
    }

    /// Every kubelet field of Karpenter's EC2NodeClass, as a class writes them (maxPods 50).
    pub(super) fn every_kubelet_field() -> serde_json::Value {
        serde_json::json!({
            "clusterDNS": ["10.100.0.10"],
            "maxPods": 50,
            "podsPerCore": 10,
            "systemReserved": {"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi"},
            "kubeReserved": {"cpu": "200m", "memory": "300Mi"},
            "evictionHard": {"memory.available": "5%", "nodefs.available": "10%"},
            "evictionSoft": {"memory.available": "10%"},
            "evictionSoftGracePeriod": {"memory.available": "1m30s"},
            "evictionMaxPodGracePeriod": 60,
            "imageGCHighThresholdPercent": 85,
            "imageGCLowThresholdPercent": 80,
            "cpuCFSQuota": false,
        })
    }

    #[test]
    fn kubelet_label_rules() {
        assert!(kubelet_may_set("karpenter.sh/capacity-type"));
        assert!(kubelet_may_set("karpenter.k8s.aws/instance-family"));
        assert!(kubelet_may_set("topology.k8s.aws/zone-id"));
        assert!(kubelet_may_set("node.kubernetes.io/instance-type"));
        assert!(kubelet_may_set("team"));
        assert!(!kubelet_may_set("node-role.kubernetes.io/worker"));
        assert!(!kubelet_may_set("example.k8s.io/x"));
        assert!(kubelet_may_set("example.node.kubernetes.io/x"));
    }

    #[test]
    fn flags_carry_labels_and_the_unregistered_taint() {
        let labels = BTreeMap::from([
            ("dovetail.dev/nodepool".to_string(), "default".to_string()),
            ("node-role.kubernetes.io/worker".to_string(), "".to_string()),
        ]);
        let taints = [Taint::new("gpu", "true", TaintEffect::NoSchedule)];
        assert_eq!(
            kubelet_flags(&labels, &taints),
            vec![
                "--node-labels=dovetail.dev/nodepool=default".to_string(),
                "--register-with-taints=gpu=true:NoSchedule,dovetail.dev/unregistered:NoExecute".to_string(),
            ]
        );
    }

    #[test]
    fn node_config_has_cluster_kubelet_and_flags() {
        let c = cluster();
        let labels = BTreeMap::from([("dovetail.dev/nodeclaim".to_string(), "default-x".to_string())]);
        let kubelet = KubeletConfiguration { cluster_dns: vec!["10.100.0.10".into()], ..Default::default() };
        let s = NodeSettings {
            cluster: &c,
            labels: &labels,
            taints: &[],
            max_pods: 29,
            kubelet: Some(&kubelet),
            user_data: None,
            family: AmiFamily::Al2023,
            raid0: false,
        };
        let doc: serde_json::Value = serde_yaml_ng::from_str(&node_config(&s)).unwrap();
        assert_eq!(doc["kind"], "NodeConfig");
        assert_eq!(doc["spec"]["cluster"]["name"], "prod");
        assert_eq!(doc["spec"]["cluster"]["cidr"], "10.100.0.0/16");
        assert_eq!(doc["spec"]["cluster"]["apiServerEndpoint"], c.endpoint);
        assert_eq!(
            STANDARD.decode(doc["spec"]["cluster"]["certificateAuthority"].as_str().unwrap()).unwrap(),
            c.ca_pem.as_bytes()
        );
        assert_eq!(doc["spec"]["kubelet"]["config"]["maxPods"], 29);
        assert_eq!(doc["spec"]["kubelet"]["config"]["clusterDNS"][0], "10.100.0.10");
        assert_eq!(doc["spec"]["kubelet"]["flags"][0], "--node-labels=dovetail.dev/nodeclaim=default-x");
        assert_eq!(doc["spec"]["kubelet"]["flags"][1], "--register-with-taints=dovetail.dev/unregistered:NoExecute");
    }

    /// Every kubelet field of Karpenter's EC2NodeClass reaches nodeadm's kubelet config under the
    /// kubelet's own name, and RAID0 becomes nodeadm's local-storage strategy.
    #[test]
    fn node_config_carries_every_kubelet_field_and_the_raid0_strategy() {
        let c = cluster();
        let labels = BTreeMap::new();
        let kubelet: KubeletConfiguration = serde_json::from_value(every_kubelet_field()).unwrap();
        let s = NodeSettings {
            max_pods: 50,
            kubelet: Some(&kubelet),
            raid0: true,
            ..settings(&c, &labels, AmiFamily::Al2023)
        };
        let doc: serde_json::Value = serde_yaml_ng::from_str(&node_config(&s)).unwrap();
        let config = &doc["spec"]["kubelet"]["config"];
        // nodeadm takes the kubelet's own names, so the class's fields go as written.
        assert_eq!(*config, every_kubelet_field());
        assert_eq!(doc["spec"]["instance"]["localStorage"]["strategy"], "RAID0");
        let without = node_config(&NodeSettings { raid0: false, ..s });
        let doc: serde_json::Value = serde_yaml_ng::from_str(&without).unwrap();
        assert!(doc["spec"].get("instance").is_none(), "{without}");
    }

    /// A shell command line's words (single quotes and backslash escapes, as the AL2 bootstrap
    /// line uses them).
    fn shell_words(line: &str) -> Vec<String> {
        let (mut words, mut word, mut in_word, mut quoted) = (vec![], String::new(), false, false);
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            if quoted {
                if c == '\'' {
                    quoted = false;
                } else {
                    word.push(c);
                }
                continue;
            }
            match c {
                '\'' => (quoted, in_word) = (true, true),
                '\\' => {
                    word.extend(chars.next());
                    in_word = true;
                }
                ' ' if in_word => {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
                ' ' => {}
                c => {
                    word.push(c);
                    in_word = true;
                }
            }
        }
        if in_word {
            words.push(word);
        }
        words
    }

    #[test]
    fn al2_bootstraps_with_the_cluster_and_the_kubelet_settings_after_the_class_parts() {
        let c = cluster();
        let labels = BTreeMap::from([
            ("dovetail.dev/nodepool".to_string(), "default".to_string()),
            ("team".to_string(), "pay".to_string()),
        ]);
        let kubelet = KubeletConfiguration {
            cluster_dns: vec!["10.100.0.10".into()],
            system_reserved: BTreeMap::from([("cpu".into(), "100m".into()), ("memory".into(), "100Mi".into())]),
            eviction_hard: BTreeMap::from([("memory.available".into(), "5%".into())]),
            image_gc_high_threshold_percent: Some(85),
            ..Default::default()
        };
        let taints = [Taint::new("gpu", "true", TaintEffect::NoSchedule)];
        let s = NodeSettings {
            cluster: &c,
            labels: &labels,
            taints: &taints,
            max_pods: 58,
            kubelet: Some(&kubelet),
            user_data: Some("#!/bin/bash\necho mine\n"),
            family: AmiFamily::Al2,
            raid0: true,
        };
        let parts = user_parts(&user_data(&s).unwrap()).unwrap();
        assert_eq!(parts.len(), 2, "{parts:#?}");
        assert_eq!(parts[0].body.trim_end(), "#!/bin/bash\necho mine", "the class's script runs first");
        assert_eq!(parts[1].headers, vec![format!("Content-Type: {SHELL_SCRIPT_TYPE}")]);
        let line = parts[1].body.lines().find(|l| l.starts_with("/etc/eks/bootstrap.sh ")).expect("a bootstrap line");
        let words = shell_words(line);
        assert_eq!(words[1], "prod", "the cluster's name first");
        let arg = |flag: &str| words.iter().position(|w| w == flag).map(|i| words[i + 1].as_str());
        assert_eq!(arg("--apiserver-endpoint"), Some(c.endpoint.as_str()));
        assert_eq!(STANDARD.decode(arg("--b64-cluster-ca").unwrap()).unwrap(), c.ca_pem.as_bytes());
        assert_eq!(arg("--service-ipv4-cidr"), Some("10.100.0.0/16"));
        assert_eq!(arg("--dns-cluster-ip"), Some("10.100.0.10"));
        assert_eq!(arg("--use-max-pods"), Some("false"));
        assert_eq!(arg("--local-disks"), Some("raid0"));
        let kubelet_args: Vec<&str> = arg("--kubelet-extra-args").unwrap().split(' ').collect();
        for want in [
            "--node-labels=dovetail.dev/nodepool=default,team=pay",
            "--register-with-taints=gpu=true:NoSchedule,dovetail.dev/unregistered:NoExecute",
            "--max-pods=58",
            "--system-reserved=cpu=100m,memory=100Mi",
            "--eviction-hard=memory.available<5%",
            "--image-gc-high-threshold=85",
        ] {
            assert!(kubelet_args.contains(&want), "{want} in {kubelet_args:?}");
        }
        assert_eq!(kubelet_args.len(), 6, "{kubelet_args:?}");
        assert_eq!(shell_words(&format!("x {}", quoted("it's a 'test'"))), vec!["x", "it's a 'test'"]);
    }

    /// A Windows class's user data: its PowerShell first in the one block, then the bootstrap call
    /// with the cluster's facts and the kubelet's settings.
    #[test]
    fn windows_bootstraps_with_powershell_after_the_class_script() {
        let c = cluster();
        let labels = BTreeMap::from([
            ("dovetail.dev/nodepool".to_string(), "win".to_string()),
            ("team".to_string(), "o'brien".to_string()),
            // The kubelet may not set it: left out, as for Linux.
            ("node-role.kubernetes.io/windows".to_string(), "".to_string()),
        ]);
        let kubelet = KubeletConfiguration {
            cluster_dns: vec!["10.100.0.10".into()],
            kube_reserved: BTreeMap::from([("memory".into(), "500Mi".into())]),
            eviction_hard: BTreeMap::from([("memory.available".into(), "5%".into())]),
            pods_per_core: Some(4),
            ..Default::default()
        };
        let taints = [Taint::new("os", "windows", TaintEffect::NoSchedule)];
        for family in [AmiFamily::Windows2019, AmiFamily::Windows2022, AmiFamily::Windows2025] {
            let s = NodeSettings {
                cluster: &c,
                labels: &labels,
                taints: &taints,
                max_pods: 110,
                kubelet: Some(&kubelet),
                user_data: Some("Write-Host \"mine\"\nNew-Item -Path 'C:\\temp' -ItemType Directory\n"),
                family: family.clone(),
                raid0: false,
            };
            let out = user_data(&s).unwrap();
            assert!(out.starts_with("<powershell>\nWrite-Host \"mine\"\nNew-Item -Path 'C:\\temp'"), "{out}");
            assert!(out.trim_end().ends_with("</powershell>"), "{out}");
            assert!(!out.contains("MIME-Version"), "no MIME document for EC2Launch: {out}");
            let lines: Vec<&str> = out.lines().collect();
            let call = lines.iter().position(|l| l.starts_with("& $EKSBootstrapScriptFile")).expect("a bootstrap call");
            assert!(lines[call - 1].contains(WINDOWS_BOOTSTRAP_SCRIPT), "{out}");
            assert!(call > 2, "the class's script comes before the bootstrap: {out}");
            let args = windows_bootstrap_args(&out).expect("the bootstrap's arguments");
            assert_eq!(args["EKSClusterName"], "prod");
            assert_eq!(args["APIServerEndpoint"], c.endpoint);
            assert_eq!(STANDARD.decode(&args["Base64ClusterCA"]).unwrap(), c.ca_pem.as_bytes());
            assert_eq!(args["DNSClusterIP"], "10.100.0.10");
            assert_eq!(args["ServiceCIDR"], "10.100.0.0/16");
            let kubelet_args: Vec<&str> = args["KubeletExtraArgs"].split(' ').collect();
            assert_eq!(
                kubelet_args,
                vec![
                    "--node-labels=dovetail.dev/nodepool=win,team=o'brien",
                    "--register-with-taints=os=windows:NoSchedule,dovetail.dev/unregistered:NoExecute",
                    "--max-pods=110",
                    "--kube-reserved=memory=500Mi",
                    "--eviction-hard=memory.available<5%",
                    "--pods-per-core=4",
                ],
                "{family:?}"
            );
            assert_eq!(args.len(), 6, "{args:?}");
        }
    }

    /// Without class user data or clusterDNS: only the bootstrap, no `-DNSClusterIP`.
    #[test]
    fn windows_without_class_script_or_cluster_dns() {
        let mut c = cluster();
        c.service_cidr = None;
        let out = plain(&c, AmiFamily::Windows2022, 110, None).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4, "{out}");
        assert_eq!((lines[0], lines[3]), ("<powershell>", "</powershell>"));
        let args = windows_bootstrap_args(&out).unwrap();
        assert_eq!(
            args.keys().map(String::as_str).collect::<Vec<_>>(),
            ["APIServerEndpoint", "Base64ClusterCA", "EKSClusterName", "KubeletExtraArgs"]
        );
        assert_eq!(
            args["KubeletExtraArgs"],
            "--register-with-taints=dovetail.dev/unregistered:NoExecute --max-pods=110"
        );
    }

    /// A class script in its own `<powershell>` block runs inside ours (nested blocks would end at
    /// its closing tag and leave the bootstrap out); other EC2Launch tags follow our block.
    #[test]
    fn a_class_powershell_block_is_unwrapped() {
        let user = "<PowerShell>\r\nWrite-Host one\r\n</PowerShell>\r\n<persist>true</persist>\r\n";
        let out = plain(&cluster(), AmiFamily::Windows2019, 8, Some(user)).unwrap();
        assert_eq!(out.matches("<powershell>").count() + out.matches("<PowerShell>").count(), 1, "{out}");
        assert_eq!(out.matches("</powershell>").count() + out.matches("</PowerShell>").count(), 1, "{out}");
        assert!(out.starts_with("<powershell>\nWrite-Host one\n[string]$EKSBootstrapScriptFile"), "{out:?}");
        assert!(out.ends_with("</powershell>\n<persist>true</persist>\n"), "{out:?}");
        assert_eq!(
            windows_bootstrap_args(&out).unwrap()["KubeletExtraArgs"].split(' ').next_back(),
            Some("--max-pods=8")
        );
        // No block: all of it is the script.
        assert_eq!(powershell_of("Write-Host two"), ("Write-Host two".to_string(), String::new()));
        // An unclosed block runs to the end.
        assert_eq!(powershell_of("x<powershell>y"), ("y".to_string(), "x".to_string()));
    }

    #[test]
    fn windows_bootstrap_arguments_read_back_quotes() {
        let line = format!("& $EKSBootstrapScriptFile -A {} -B {}", ps_quoted("it's 'q'"), ps_quoted(""));
        let args = windows_bootstrap_args(&line).unwrap();
        assert_eq!(args["A"], "it's 'q'");
        assert_eq!(args["B"], "");
        assert_eq!(windows_bootstrap_args("& $EKSBootstrapScriptFile -A 'open"), None);
        assert_eq!(windows_bootstrap_args("Write-Host"), None);
    }

    /// The user data of a pool of `c` without labels, taints or kubelet settings.
    fn plain(c: &ClusterFacts, family: AmiFamily, max_pods: i64, user: Option<&str>) -> Result<String, UserDataError> {
        let labels = BTreeMap::new();
        let s = NodeSettings { max_pods, user_data: user, ..settings(c, &labels, family) };
        user_data(&s)
    }

    /// The user data of an AL2023 pool of `cluster()` (maxPods 110) whose class's `userData` is `user`.
    fn merge(user: &str) -> Result<String, UserDataError> {
        plain(&cluster(), AmiFamily::Al2023, 110, Some(user))
    }

    /// The class's `userData` merged with Dovetail's NodeConfig, read back as parts; the last is
    /// Dovetail's.
    fn merged(user: &str) -> Vec<Part> {
        let out = merge(user).unwrap();
        let Document::Multipart(parts) = mime::read(&out).unwrap() else { panic!("not multipart: {out}") };
        let ours = parts.last().unwrap();
        assert_eq!(ours.headers, vec![format!("Content-Type: {NODECONFIG_TYPE}")]);
        assert!(ours.body.contains("kind: NodeConfig") && ours.body.contains("maxPods: 110"), "{out}");
        parts
    }

    fn part(headers: &[&str], body: &str) -> Part {
        Part { headers: headers.iter().map(|h| h.to_string()).collect(), body: body.into() }
    }

    #[test]
    fn class_user_data_parts_come_first() {
        let class = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n\
                     --BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hi\n\
                     --BOUNDARY\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n\
                     --BOUNDARY--\n";
        let out = merge(class).unwrap();
        assert!(
            out.starts_with(
                "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//dovetail//\"\n\n\
                 --//dovetail//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hi\n\
                 --//dovetail//\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n\
                 --//dovetail//\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\n"
            ),
            "{out}"
        );
        assert!(out.ends_with("\n--//dovetail//--\n"), "{out}");
        let parts = merged(class);
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0].body, "#!/bin/bash\necho hi");
        assert_eq!(parts[1].headers, vec!["Content-Type: application/node.eks.aws".to_string()]);

        let parts = merged("#!/bin/bash\ntrue\n");
        assert_eq!(parts[0], part(&["Content-Type: text/x-shellscript; charset=\"us-ascii\""], "#!/bin/bash\ntrue"));
        assert_eq!(parts.len(), 2);
        assert_eq!(merge(class), merge(class), "deterministic");
    }

    #[test]
    fn header_and_parameter_names_in_any_case() {
        for user in [
            "mime-version: 1.0\ncontent-type: Multipart/Mixed; Boundary=inner\n\n\
             --inner\nCONTENT-TYPE: text/x-shellscript\n\necho one\n--inner--\n",
            "CONTENT-TYPE: multipart/mixed; BOUNDARY=\"inner\"\nMime-Version: 1.0\n\n\
             --inner\nCONTENT-TYPE: text/x-shellscript\n\necho one\n--inner--\n",
        ] {
            let parts = merged(user);
            assert_eq!(parts.len(), 2, "{user}");
            assert_eq!(parts[0], part(&["CONTENT-TYPE: text/x-shellscript"], "echo one"));
        }
    }

    #[test]
    fn quoted_and_unquoted_boundaries() {
        // Quoted, the boundary may hold blanks, `;` and `=`; other parameters come before or after.
        let quoted = "Content-Type: multipart/mixed; charset=us-ascii; boundary=\"==_a b;c==\"; x=y\n\n\
                      --==_a b;c==\nContent-Type: text/x-shellscript\n\necho quoted\n--==_a b;c==--\n";
        let unquoted = "Content-Type: multipart/mixed;boundary=plain_42\n\n\
                        --plain_42\nContent-Type: text/x-shellscript\n\necho unquoted\n--plain_42--\n";
        assert_eq!(merged(quoted)[0], part(&["Content-Type: text/x-shellscript"], "echo quoted"));
        assert_eq!(merged(unquoted)[0], part(&["Content-Type: text/x-shellscript"], "echo unquoted"));
    }

    #[test]
    fn folded_header_lines_are_unfolded() {
        let user = "Content-Type: multipart/mixed;\n boundary=\"folded\"\nMIME-Version:\n\t1.0\n\n\
                    --folded\nContent-Type: text/x-shellscript;\n\tcharset=\"us-ascii\"\n\necho folded\n--folded--\n";
        let parts = merged(user);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], part(&["Content-Type: text/x-shellscript;\tcharset=\"us-ascii\""], "echo folded"));
    }

    #[test]
    fn crlf_and_lf_line_endings() {
        let crlf = "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n\
                    --b\r\nContent-Type: text/x-shellscript\r\n\r\n#!/bin/bash\r\necho crlf\r\n\
                    --b\nContent-Type: text/cloud-config\n\n#cloud-config\nruncmd: [true]\n\
                    --b--\r\n";
        let parts = merged(crlf);
        assert_eq!(parts.len(), 3);
        // The line break before a delimiter is the delimiter's; the body keeps its own bytes.
        assert_eq!(parts[0], part(&["Content-Type: text/x-shellscript"], "#!/bin/bash\r\necho crlf"));
        assert_eq!(parts[1], part(&["Content-Type: text/cloud-config"], "#cloud-config\nruncmd: [true]"));
    }

    #[test]
    fn preamble_close_delimiter_and_epilogue() {
        let user = "Content-Type: multipart/mixed; boundary=b\n\n\
                    This is the preamble.\n--b is not a delimiter\n\
                    --b\n\necho one\n\
                    --b\nContent-Type: text/cloud-config\n\n#cloud-config\n\
                    --b--\nThis is the epilogue.\n--b\nContent-Type: text/x-shellscript\n\necho never\n";
        let parts = merged(user);
        assert_eq!(parts.len(), 3, "{parts:?}");
        assert_eq!(parts[0], part(&[], "echo one"));
        assert_eq!(parts[1], part(&["Content-Type: text/cloud-config"], "#cloud-config"));
        // Without its close delimiter, the last part runs to the end.
        let open = "Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/x-shellscript\n\necho open\n";
        assert_eq!(merged(open)[0], part(&["Content-Type: text/x-shellscript"], "echo open"));
    }

    #[test]
    fn the_boundary_delimits_only_as_a_whole_line_after_two_hyphens() {
        let user = "Content-Type: multipart/mixed; boundary=\"sep\"\n\n\
                    --sep\nContent-Type: text/x-shellscript\n\n\
                    echo --sep\nsep\n--sepia\n  --sep\n--sep-- not the end\n\
                    --sep \t\nContent-Type: text/x-shellscript\n\necho two\n\
                    --sep--  \n";
        let parts = merged(user);
        assert_eq!(parts.len(), 3, "{parts:?}");
        assert_eq!(
            parts[0],
            part(&["Content-Type: text/x-shellscript"], "echo --sep\nsep\n--sepia\n  --sep\n--sep-- not the end")
        );
        assert_eq!(parts[1], part(&["Content-Type: text/x-shellscript"], "echo two"));
    }

    #[test]
    fn a_part_holding_our_delimiter_gets_another_boundary() {
        let user = "Content-Type: multipart/mixed; boundary=x\n\n\
                    --x\nContent-Type: text/x-shellscript\n\ncat <<EOF\n--//dovetail//\nEOF\n--x--\n";
        let parts = merged(user);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].body, "cat <<EOF\n--//dovetail//\nEOF");
        assert!(merge(user).unwrap().contains("boundary=\"//dovetail-1//\""));
    }

    #[test]
    fn single_mime_entities_and_plain_text() {
        let single =
            "MIME-Version: 1.0\nContent-Type: text/x-shellscript; charset=us-ascii\n\n#!/bin/bash\necho single\n";
        let parts = merged(single);
        assert_eq!(parts[0], part(&["Content-Type: text/x-shellscript; charset=us-ascii"], "#!/bin/bash\necho single"));
        // A NodeConfig's YAML reads like header fields, but no Content-Type makes it MIME.
        let config =
            "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 5\n";
        let parts = merged(config);
        assert_eq!(parts[0], part(&[&format!("Content-Type: {NODECONFIG_TYPE}")], config.trim_end()));
    }

    #[test]
    fn multipart_that_cannot_be_split_is_an_error() {
        let with = |user| merge(user).unwrap_err().to_string();
        assert_eq!(
            with("Content-Type: multipart/mixed; charset=us-ascii\n\n--b\n\necho\n--b--\n"),
            "Content-Type \"multipart/mixed; charset=us-ascii\" declares a multipart document without a boundary \
             parameter"
        );
        assert_eq!(
            with("Content-Type: multipart/mixed; boundary=\"\"\n\n--\n\necho\n"),
            "Content-Type \"multipart/mixed; boundary=\\\"\\\"\" declares a multipart document without a boundary \
             parameter"
        );
        assert_eq!(
            with("Content-Type: multipart/mixed; boundary=b\n\necho --b\n"),
            "no line --b starts a part of the multipart document"
        );
    }
}

// The fuzz target whose oracle lives beside the code it checks (see `fuzz/`).
#[cfg(test)]
mod fuzz;
