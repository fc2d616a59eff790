//! AL2023 user data: a nodeadm `NodeConfig` (cluster name, API endpoint, CA, service CIDR;
//! kubelet config with maxPods and the class's kubelet settings; kubelet flags with the node's
//! labels and registration taints, `dovetail.dev/unregistered:NoExecute` among them) in a MIME
//! multipart document, after the parts of the class's own `userData`. nodeadm merges the
//! NodeConfig parts in order, so Dovetail's settings win where both set a field.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use dovetail_api::crd::KubeletConfiguration;
use dovetail_core::labels::TAINT_UNREGISTERED;
use dovetail_core::model::{Taint, TaintEffect};

use crate::eks::ClusterFacts;

/// The MIME boundary of the generated document (fixed, so equal inputs give equal bytes and one
/// launch template), unless a part holds it: see [`boundary_for`].
pub const BOUNDARY: &str = "//dovetail//";
/// Content type of a nodeadm NodeConfig part.
pub const NODECONFIG_TYPE: &str = "application/node.eks.aws";

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

/// The kubelet flags: `--node-labels` (what the kubelet may set) and `--register-with-taints`
/// (always including the unregistered taint).
pub fn kubelet_flags(labels: &BTreeMap<String, String>, taints: &[Taint]) -> Vec<String> {
    let mut flags = Vec::new();
    let labels: Vec<String> =
        labels.iter().filter(|(k, _)| kubelet_may_set(k)).map(|(k, v)| format!("{k}={v}")).collect();
    if !labels.is_empty() {
        flags.push(format!("--node-labels={}", labels.join(",")));
    }
    let mut all: Vec<Taint> = taints.to_vec();
    if !all.iter().any(|t| t.key == TAINT_UNREGISTERED) {
        all.push(Taint::new(TAINT_UNREGISTERED, "", TaintEffect::NoExecute));
    }
    let taints: Vec<String> = all
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
    let doc = serde_json::json!({
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {
            "cluster": cluster,
            "kubelet": {"config": kubelet, "flags": kubelet_flags(s.labels, s.taints)},
        },
    });
    serde_yaml_ng::to_string(&doc).expect("JSON values serialize as YAML")
}

/// One part of a MIME multipart document: its headers and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub headers: Vec<String>,
    pub body: String,
}

/// The class's user data as parts: a MIME multipart document's own parts, or the whole text as
/// one part (a NodeConfig if it looks like one, else a shell script or cloud-config).
pub fn user_parts(user_data: &str) -> Vec<Part> {
    if user_data.trim().is_empty() {
        return vec![];
    }
    if let Some(parts) = mime_parts(user_data) {
        return parts;
    }
    let content_type = if user_data.contains("node.eks.aws") {
        NODECONFIG_TYPE
    } else if user_data.trim_start().starts_with("#cloud-config") {
        "text/cloud-config; charset=\"us-ascii\""
    } else {
        "text/x-shellscript; charset=\"us-ascii\""
    };
    vec![Part { headers: vec![format!("Content-Type: {content_type}")], body: user_data.to_string() }]
}

/// The parts of a `multipart/*` MIME document, or `None` if it is not one.
fn mime_parts(text: &str) -> Option<Vec<Part>> {
    let text = text.replace("\r\n", "\n");
    let (head, body) = text.split_once("\n\n")?;
    let content_type = head.lines().find(|l| l.to_ascii_lowercase().starts_with("content-type:"))?;
    if !content_type.to_ascii_lowercase().contains("multipart/") {
        return None;
    }
    let boundary =
        content_type.split(';').find_map(|p| p.trim().strip_prefix("boundary="))?.trim_matches('"').to_string();
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    for chunk in body.split(delimiter.as_str()).skip(1) {
        if chunk.starts_with("--") {
            break;
        }
        let chunk = chunk.strip_prefix('\n').unwrap_or(chunk);
        // A blank line right after the delimiter: a part without headers (the fuzz target found
        // the body's first line taken for the end of the headers).
        let (headers, content) = match chunk.strip_prefix('\n') {
            Some(content) => ("", content),
            None => chunk.split_once("\n\n").unwrap_or(("", chunk)),
        };
        parts.push(Part {
            headers: headers.lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect(),
            body: content.trim_end_matches('\n').to_string(),
        });
    }
    Some(parts)
}

/// A boundary whose delimiter (`--` and the boundary) occurs in no part, as MIME requires:
/// [`BOUNDARY`], or [`BOUNDARY`] and a number when a part holds it (the class's user data is the
/// user's text, and a delimiter inside it would split the part). Found by the `user_data` fuzz
/// target.
fn boundary_for(parts: &[Part]) -> String {
    let holds = |delimiter: &str| {
        parts.iter().any(|p| p.body.contains(delimiter) || p.headers.iter().any(|h| h.contains(delimiter)))
    };
    let mut boundary = BOUNDARY.to_string();
    let mut n = 0;
    while holds(&format!("--{boundary}")) {
        n += 1;
        boundary = format!("{BOUNDARY}{n}");
    }
    boundary
}

/// The whole user data: the class's parts, then Dovetail's NodeConfig.
pub fn user_data(s: &NodeSettings<'_>) -> String {
    let mut parts = s.user_data.map(user_parts).unwrap_or_default();
    parts.push(Part { headers: vec![format!("Content-Type: {NODECONFIG_TYPE}")], body: node_config(s) });
    let boundary = boundary_for(&parts);
    let mut out = format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{boundary}\"\n\n");
    for p in &parts {
        out.push_str(&format!("--{boundary}\n"));
        for h in &p.headers {
            out.push_str(h);
            out.push('\n');
        }
        out.push('\n');
        out.push_str(p.body.trim_end_matches('\n'));
        out.push('\n');
    }
    out.push_str(&format!("--{boundary}--\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> ClusterFacts {
        ClusterFacts {
            name: "prod".into(),
            endpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com".into(),
            ca_pem: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".into(),
            version: "1.31".into(),
            service_cidr: Some("10.100.0.0/16".into()),
        }
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

    #[test]
    fn class_user_data_parts_come_first() {
        let c = cluster();
        let labels = BTreeMap::new();
        let class = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n\
                     --BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hi\n\
                     --BOUNDARY\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n\
                     --BOUNDARY--\n";
        let s = NodeSettings {
            cluster: &c,
            labels: &labels,
            taints: &[],
            max_pods: 110,
            kubelet: None,
            user_data: Some(class),
        };
        let out = user_data(&s);
        let parts = mime_parts(&out).unwrap();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0].body, "#!/bin/bash\necho hi");
        assert_eq!(parts[1].headers, vec!["Content-Type: application/node.eks.aws".to_string()]);
        assert!(parts[2].body.contains("kind: NodeConfig") && parts[2].body.contains("maxPods: 110"));

        let script = NodeSettings { user_data: Some("#!/bin/bash\ntrue\n"), ..s.clone() };
        let parts = mime_parts(&user_data(&script)).unwrap();
        assert_eq!(parts[0].headers, vec!["Content-Type: text/x-shellscript; charset=\"us-ascii\"".to_string()]);
        assert_eq!(parts.len(), 2);
        assert_eq!(user_data(&s), user_data(&s), "deterministic");

        // Found by the `user_data` fuzz target: a class's part holding the document's delimiter
        // was split in two on the node. The boundary moves to one no part holds.
        let holds = "#!/bin/bash\necho --//dovetail// --//dovetail//1\n";
        let out = user_data(&NodeSettings { user_data: Some(holds), ..s.clone() });
        assert!(out.contains("Content-Type: multipart/mixed; boundary=\"//dovetail//2\"\n"), "{out}");
        let parts = mime_parts(&out).unwrap();
        assert_eq!(parts.len(), 2, "{out}");
        assert_eq!(parts[0].body, holds.trim_end());
    }

    /// Found by the `user_data` fuzz target: a part without headers lost its first line break.
    #[test]
    fn a_part_without_headers_keeps_its_body() {
        let text = "Content-Type: multipart/mixed; boundary=b\n\n--b\n\n\nafter a blank line\n--b--\n";
        let parts = mime_parts(text).unwrap();
        assert_eq!(parts, vec![Part { headers: vec![], body: "\nafter a blank line".into() }]);
    }
}

#[cfg(test)]
mod fuzz;
