//! Node label keys Dovetail knows, and the rules on which keys NodePools and pods may use.
//!
//! Karpenter reserves a few label domains (`kubernetes.io`, `k8s.io`, `karpenter.sh`,
//! `karpenter.k8s.aws`): the kubelet refuses to self-assign most of them, and the autoscaler owns
//! the rest. Keys in those domains are only usable when they are *well known*, i.e. the
//! autoscaler itself knows their value for every instance type and offering (zone, arch,
//! capacity type, instance family, ...). Dovetail keeps Karpenter's rules so that NodePools and
//! pod specs written for Karpenter behave the same, and adds its own domain, `dovetail.dev`.

/// Label carrying the name of the Dovetail NodePool that launched a node.
pub const NODEPOOL: &str = "dovetail.dev/nodepool";
/// Label carrying the name of the Dovetail NodeClaim behind a node.
pub const NODECLAIM: &str = "dovetail.dev/nodeclaim";
/// Karpenter's nodepool label; Dovetail sets it too so existing selectors keep working.
pub const KARPENTER_NODEPOOL: &str = "karpenter.sh/nodepool";
/// `spot`, `on-demand` (or `reserved`).
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
/// Zone name, e.g. `us-east-1a`.
pub const TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
/// Zone id, e.g. `use1-az1`.
pub const TOPOLOGY_ZONE_ID: &str = "topology.k8s.aws/zone-id";
/// Region, e.g. `us-east-1`.
pub const TOPOLOGY_REGION: &str = "topology.kubernetes.io/region";
/// EC2 instance type, e.g. `m7g.large`.
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// `amd64` or `arm64`.
pub const ARCH: &str = "kubernetes.io/arch";
/// `linux` or `windows`.
pub const OS: &str = "kubernetes.io/os";
/// Windows build, e.g. `10.0.20348`.
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
/// The node's hostname: set by the kubelet, never by an autoscaler.
pub const HOSTNAME: &str = "kubernetes.io/hostname";

/// Karpenter's AWS instance labels (`karpenter.k8s.aws/...`), all well known.
pub const KARPENTER_AWS_INSTANCE_LABELS: &[&str] = &[
    "karpenter.k8s.aws/ec2nodeclass",
    "karpenter.k8s.aws/capacity-reservation-id",
    "karpenter.k8s.aws/capacity-reservation-type",
    "karpenter.k8s.aws/capacity-reservation-interruptible",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
];

/// Label domains that only well-known keys may use (suffix match, like Karpenter: a domain
/// ending in `kubernetes.io`, such as `node.kubernetes.io`, is inside `kubernetes.io`).
pub const RESTRICTED_DOMAINS: &[&str] =
    &["kubernetes.io", "k8s.io", "karpenter.sh", "karpenter.k8s.aws", "dovetail.dev"];

/// Sub-domains of restricted domains that are free to use (kubelet allows them, or another
/// tool owns them).
const DOMAIN_EXCEPTIONS: &[&str] = &["kops.k8s.io", "node.kubernetes.io", "node-restriction.kubernetes.io"];

/// Keys in restricted domains that NodePools and pods may still use, because Dovetail derives
/// their values from the instance type and offering it launches.
const WELL_KNOWN_CORE: &[&str] = &[
    NODEPOOL,
    KARPENTER_NODEPOOL,
    CAPACITY_TYPE,
    TOPOLOGY_ZONE,
    TOPOLOGY_ZONE_ID,
    TOPOLOGY_REGION,
    INSTANCE_TYPE,
    ARCH,
    OS,
    WINDOWS_BUILD,
];

/// Deprecated aliases and the well-known key each stands for; pods still use them.
const ALIASES: &[(&str, &str)] = &[
    ("failure-domain.beta.kubernetes.io/zone", TOPOLOGY_ZONE),
    ("failure-domain.beta.kubernetes.io/region", TOPOLOGY_REGION),
    ("beta.kubernetes.io/arch", ARCH),
    ("beta.kubernetes.io/os", OS),
    ("beta.kubernetes.io/instance-type", INSTANCE_TYPE),
];

/// Keys that may never appear in a NodePool's requirements or template labels: the nodepool
/// labels are set by the autoscaler from the pool's own name, the hostname by the kubelet.
const NODEPOOL_FORBIDDEN: &[&str] = &[NODEPOOL, KARPENTER_NODEPOOL, HOSTNAME];

/// The domain of a label key (the part before `/`), or `""` for unprefixed keys.
pub fn domain(key: &str) -> &str {
    key.split_once('/').map_or("", |(domain, _)| domain)
}

/// Maps a deprecated alias (`beta.kubernetes.io/arch`, ...) to its current key; other keys are
/// returned unchanged.
pub fn normalize(key: &str) -> &str {
    ALIASES.iter().find(|(alias, _)| *alias == key).map_or(key, |(_, canonical)| canonical)
}

/// Whether Dovetail knows this key's value for the nodes it launches (after alias
/// normalization). Pods may select on these, and NodePools may constrain them.
pub fn is_well_known(key: &str) -> bool {
    let key = normalize(key);
    WELL_KNOWN_CORE.contains(&key) || KARPENTER_AWS_INSTANCE_LABELS.contains(&key)
}

/// Whether `key` lies in a restricted domain without being well known, in which case neither a
/// NodePool nor a pod can ask for it (Dovetail could never satisfy it).
pub fn is_restricted(key: &str) -> bool {
    let key = normalize(key);
    if is_well_known(key) {
        return false;
    }
    if key == HOSTNAME {
        return true;
    }
    let domain = domain(key);
    if DOMAIN_EXCEPTIONS.iter().any(|d| domain.ends_with(d)) {
        return false;
    }
    RESTRICTED_DOMAINS.iter().any(|d| domain.ends_with(d))
}

/// Checks a key used in a pod's node selector or node affinity: well-known keys (including
/// `karpenter.sh/*`, `karpenter.k8s.aws/*` and `dovetail.dev/nodepool`) and custom keys are
/// fine; other keys in restricted domains can never be satisfied by a new node.
pub fn check_pod_key(key: &str) -> Result<(), String> {
    if is_restricted(key) {
        Err(restricted_message(key))
    } else {
        Ok(())
    }
}

/// Checks a key used in a NodePool's requirements or template labels: as for pods, and the
/// nodepool and hostname labels are off limits.
pub fn check_nodepool_key(key: &str) -> Result<(), String> {
    let normalized = normalize(key);
    if NODEPOOL_FORBIDDEN.contains(&normalized) {
        return Err(format!(
            "label {key:?} is restricted: it is set by {}",
            if normalized == HOSTNAME { "the kubelet" } else { "Dovetail from the NodePool's name" }
        ));
    }
    check_pod_key(key)
}

fn restricted_message(key: &str) -> String {
    let domain = domain(normalize(key));
    let owner = RESTRICTED_DOMAINS.iter().find(|d| domain.ends_with(*d)).copied().unwrap_or(domain);
    format!(
        "label {key:?} is restricted: domain {owner:?} only allows well-known labels such as \
         {ARCH}, {INSTANCE_TYPE}, {CAPACITY_TYPE} or karpenter.k8s.aws/instance-family"
    )
}

/// Kubernetes' limit on the total size of an object's annotations (keys and values), 256 KiB.
pub const MAX_ANNOTATIONS_BYTES: usize = 256 << 10;

/// A value as messages show it: quoted, and cut after 64 characters with its length, so a 1 MB
/// label value does not make a 1 MB message.
pub fn shown(value: &str) -> String {
    const MAX: usize = 64;
    match value.char_indices().nth(MAX) {
        None => format!("{value:?}"),
        Some((cut, _)) => format!("{:?}… ({} bytes)", &value[..cut], value.len()),
    }
}

/// Checks a Kubernetes "qualified name" (label and annotation keys, taint keys): an optional
/// DNS-subdomain prefix and `/`, then a name of at most 63 characters of `[A-Za-z0-9_.-]`
/// starting and ending with an alphanumeric.
pub fn check_qualified_name(value: &str) -> Result<(), String> {
    let (prefix, name) = match value.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, value),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err(format!("{} has an empty prefix before '/'", shown(value)));
        }
        check_dns_subdomain(prefix).map_err(|why| format!("{} has a bad prefix: {why}", shown(value)))?;
    }
    if name.is_empty() {
        return Err(format!("{} has an empty name", shown(value)));
    }
    check_name_part(name).map_err(|why| format!("{} is not a qualified name: {why}", shown(value)))
}

/// Checks a label value: empty, or at most 63 characters of `[A-Za-z0-9_.-]` starting and
/// ending with an alphanumeric.
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    check_name_part(value).map_err(|why| format!("{} is not a valid label value: {why}", shown(value)))
}

fn check_name_part(name: &str) -> Result<(), &'static str> {
    if name.len() > 63 {
        return Err("it is longer than 63 characters");
    }
    let bytes = name.as_bytes();
    if !bytes[0].is_ascii_alphanumeric() || !bytes[bytes.len() - 1].is_ascii_alphanumeric() {
        return Err("it must start and end with a letter or digit");
    }
    if !bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')) {
        return Err("only letters, digits, '-', '_' and '.' are allowed");
    }
    Ok(())
}

/// Checks a DNS-1123 subdomain (most objects' names, label key prefixes): at most 253
/// characters, dot-separated parts of lowercase letters, digits and '-', each starting and
/// ending with a letter or digit.
pub fn check_dns_subdomain(value: &str) -> Result<(), &'static str> {
    if value.len() > 253 {
        return Err("it is longer than 253 characters");
    }
    if !value.split('.').all(is_dns_part) {
        return Err(
            "it must be a lowercase DNS subdomain (a-z, 0-9, '-' and '.', starting and ending with a letter or digit)",
        );
    }
    Ok(())
}

/// Checks a DNS-1123 label (namespaces' names): at most 63 lowercase letters, digits and '-',
/// starting and ending with a letter or digit.
pub fn check_dns_label(value: &str) -> Result<(), &'static str> {
    if value.len() > 63 {
        return Err("it is longer than 63 characters");
    }
    if !is_dns_part(value) {
        return Err("it must be a lowercase DNS label (a-z, 0-9 and '-', starting and ending with a letter or digit)");
    }
    Ok(())
}

fn is_dns_part(part: &str) -> bool {
    let bytes = part.as_bytes();
    !bytes.is_empty()
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_keys_are_usable_by_pools_and_pods() {
        for key in [
            CAPACITY_TYPE,
            "karpenter.k8s.aws/instance-family",
            "karpenter.k8s.aws/instance-generation",
            // A pool or pod may pick reserved capacity by reservation, its type or interruptibility.
            "karpenter.k8s.aws/capacity-reservation-id",
            "karpenter.k8s.aws/capacity-reservation-type",
            "karpenter.k8s.aws/capacity-reservation-interruptible",
            TOPOLOGY_ZONE,
            INSTANCE_TYPE,
            ARCH,
            "beta.kubernetes.io/arch",
            "failure-domain.beta.kubernetes.io/zone",
            "node.kubernetes.io/lifecycle",
            "example.com/team",
            "team",
        ] {
            assert_eq!(check_nodepool_key(key), Ok(()), "{key}");
            assert_eq!(check_pod_key(key), Ok(()), "{key}");
        }
        // Pods may select a pool by name under either spelling; pools may not set it.
        for key in [KARPENTER_NODEPOOL, NODEPOOL] {
            assert_eq!(check_pod_key(key), Ok(()));
            assert!(check_nodepool_key(key).is_err());
        }
    }

    #[test]
    fn restricted_domains_are_rejected() {
        for key in [
            "kubernetes.io/custom",
            "k8s.io/custom",
            "karpenter.sh/custom",
            "karpenter.k8s.aws/custom",
            "dovetail.dev/custom",
            "kubernetes.io/hostname",
        ] {
            assert!(check_pod_key(key).is_err(), "{key}");
            assert!(check_nodepool_key(key).is_err(), "{key}");
        }
        assert_eq!(check_pod_key("kops.k8s.io/instancegroup"), Ok(()));
    }

    #[test]
    fn qualified_names() {
        assert!(check_qualified_name("example.com/gpu").is_ok());
        assert!(check_qualified_name("gpu").is_ok());
        assert!(check_qualified_name("").is_err());
        assert!(check_qualified_name("Example.com/gpu").is_err());
        assert!(check_qualified_name("example.com/").is_err());
        assert!(check_qualified_name("-gpu").is_err());
        assert!(check_label_value("").is_ok());
        assert!(check_label_value("on-demand").is_ok());
        assert!(check_label_value("a b").is_err());
    }

    #[test]
    fn kubernetes_name_rules_with_their_messages() {
        assert_eq!(check_dns_subdomain("web-1.shop"), Ok(()));
        assert_eq!(check_dns_subdomain(&"a".repeat(100)), Ok(()), "no 63-character limit on a subdomain's parts");
        assert_eq!(check_dns_subdomain(&"a".repeat(254)), Err("it is longer than 253 characters"));
        for bad in ["Web", "web_1", "-web", "web.", "a..b", ""] {
            assert!(check_dns_subdomain(bad).is_err(), "{bad}");
        }
        assert_eq!(check_dns_label("shop-1"), Ok(()));
        assert_eq!(check_dns_label(&"a".repeat(64)), Err("it is longer than 63 characters"));
        assert!(check_dns_label("shop.prod").is_err(), "no dots in a label");
        assert_eq!(
            check_qualified_name("Example.com/gpu").unwrap_err(),
            "\"Example.com/gpu\" has a bad prefix: it must be a lowercase DNS subdomain (a-z, 0-9, '-' and '.', \
             starting and ending with a letter or digit)"
        );
        assert_eq!(
            check_qualified_name("team/_x").unwrap_err(),
            "\"team/_x\" is not a qualified name: it must start and end with a letter or digit"
        );
        assert_eq!(
            check_label_value("a b").unwrap_err(),
            "\"a b\" is not a valid label value: only letters, digits, '-', '_' and '.' are allowed"
        );
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        let huge = "v".repeat(1 << 20);
        let e = check_label_value(&huge).unwrap_err();
        assert_eq!(
            e,
            format!(
                "\"{}\"… (1048576 bytes) is not a valid label value: it is longer than 63 characters",
                "v".repeat(64)
            )
        );
        assert_eq!(shown("short"), "\"short\"");
    }
}
