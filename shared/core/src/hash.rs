//! Stable hashes persisted on claims: what a NodePool template and an EC2NodeClass spec looked
//! like at launch, so that drift can tell later whether they changed.

use std::collections::BTreeMap;

use crate::model::NodePool;
use crate::time::format_duration;

/// FNV-1a, 64 bits: tiny, dependency-free and stable across runs and platforms (unlike std's
/// randomly seeded `DefaultHasher`), which is what a hash persisted on a claim needs.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// FNV-1a, 32 bits: the width Kubernetes' controllers use for generated names
/// (`pod-template-hash`), which the manifest expander imitates.
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Canonical JSON: object keys sorted, arrays sorted by their canonical text (Karpenter hashes
/// lists as sets, so reordering taints or tags is not a change). Independent of serde_json's
/// map ordering features.
fn canonical(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<&String, &Value> = m.iter().collect();
            out.push('{');
            for (i, (k, v)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            let mut parts: Vec<String> = items
                .iter()
                .map(|i| {
                    let mut s = String::new();
                    canonical(i, &mut s);
                    s
                })
                .collect();
            parts.sort();
            out.push('[');
            out.push_str(&parts.join(","));
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// A stable hash of any JSON value: FNV-1a 64 of its canonical form, as 16 hex digits.
pub fn json_hash(value: &serde_json::Value) -> String {
    let mut s = String::new();
    canonical(value, &mut s);
    format!("{:016x}", fnv1a64(s.as_bytes()))
}

/// The EC2NodeClass spec hash: [`json_hash`] of the spec without its top-level `*SelectorTerms`
/// fields (amiSelectorTerms, subnetSelectorTerms, securityGroupSelectorTerms,
/// capacityReservationSelectorTerms). Their effect is drift through AMI / subnet / security-group
/// resolution; hashing the terms would replace nodes whose resolution did not change.
pub fn nodeclass_hash(spec: &serde_json::Value) -> String {
    match spec {
        serde_json::Value::Object(m) => {
            let kept: serde_json::Map<String, serde_json::Value> =
                m.iter().filter(|(k, _)| !k.ends_with("SelectorTerms")).map(|(k, v)| (k.clone(), v.clone())).collect();
            json_hash(&serde_json::Value::Object(kept))
        }
        other => json_hash(other),
    }
}

/// The NodePool template hash stored on claims at launch. Requirements are deliberately left out
/// (Karpenter checks them against the node, so widening a requirement does not replace nodes).
pub fn nodepool_hash(pool: &NodePool) -> String {
    let duration = |d: Option<std::time::Duration>| d.map_or_else(|| "Never".to_string(), format_duration);
    let value = serde_json::json!({
        "labels": pool.labels,
        "annotations": pool.annotations,
        "taints": serde_json::to_value(&pool.taints).unwrap_or_default(),
        "startupTaints": serde_json::to_value(&pool.startup_taints).unwrap_or_default(),
        "nodeClassRef": pool.node_class,
        "expireAfter": duration(pool.expire_after),
        "terminationGracePeriod": duration(pool.termination_grace_period),
    });
    json_hash(&value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_the_published_vectors() {
        // From the FNV reference test suite (Fowler, Noll, Vo).
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a32(b"foobar"), 0xbf9c_f968);
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
