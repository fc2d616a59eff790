//! Taints and tolerations with kube-scheduler's matching rules.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn parse(s: &str) -> Option<TaintEffect> {
        Some(match s {
            "NoSchedule" => TaintEffect::NoSchedule,
            "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
            "NoExecute" => TaintEffect::NoExecute,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    pub effect: TaintEffect,
}

impl Taint {
    pub fn new(key: &str, value: &str, effect: TaintEffect) -> Self {
        Taint { key: key.to_string(), value: value.to_string(), effect }
    }

    /// One of the taints a new node carries until the control plane lifts them, seconds after
    /// it registers (Karpenter's `KnownEphemeralTaints`): the API server's and node lifecycle
    /// controller's not-ready and unreachable, the cloud controller's uninitialized.
    pub fn is_ephemeral(&self) -> bool {
        use TaintEffect::{NoExecute, NoSchedule};
        match (self.key.as_str(), self.effect) {
            ("node.kubernetes.io/not-ready", NoSchedule | NoExecute) => true,
            ("node.kubernetes.io/unreachable", NoSchedule) => true,
            ("node.cloudprovider.kubernetes.io/uninitialized", NoSchedule) => self.value == "true",
            _ => false,
        }
    }
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{:?}", self.key, self.effect)
        } else {
            write!(f, "{}={}:{:?}", self.key, self.value, self.effect)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TolerationOp {
    Equal,
    Exists,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Toleration {
    /// Empty with `Exists` tolerates every taint.
    pub key: String,
    pub operator: TolerationOp,
    pub value: String,
    /// `None` tolerates every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if let Some(e) = self.effect {
            if e != taint.effect {
                return false;
            }
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.operator {
            TolerationOp::Exists => true,
            TolerationOp::Equal => self.value == taint.value,
        }
    }
}

/// Whether `tolerations` cover every taint that keeps pods off a node (NoSchedule, NoExecute).
/// PreferNoSchedule only lowers a node's score, so it never blocks placement.
pub fn tolerates_all(tolerations: &[Toleration], taints: &[Taint]) -> Result<(), Taint> {
    for t in taints {
        if t.effect == TaintEffect::PreferNoSchedule {
            continue;
        }
        if !tolerations.iter().any(|tol| tol.tolerates(t)) {
            return Err(t.clone());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ephemeral_taints_are_the_control_planes_while_a_node_comes_up() {
        let t = |key: &str, value: &str, effect| Taint::new(key, value, effect).is_ephemeral();
        assert!(t("node.kubernetes.io/not-ready", "", TaintEffect::NoSchedule));
        assert!(t("node.kubernetes.io/not-ready", "", TaintEffect::NoExecute));
        assert!(t("node.kubernetes.io/unreachable", "", TaintEffect::NoSchedule));
        assert!(!t("node.kubernetes.io/unreachable", "", TaintEffect::NoExecute), "evicts: not just coming up");
        assert!(t("node.cloudprovider.kubernetes.io/uninitialized", "true", TaintEffect::NoSchedule));
        assert!(!t("node.cloudprovider.kubernetes.io/uninitialized", "false", TaintEffect::NoSchedule));
        assert!(!t("dedicated", "gpu", TaintEffect::NoSchedule));
    }

    #[test]
    fn toleration_rules() {
        let gpu = Taint::new("nvidia.com/gpu", "true", TaintEffect::NoSchedule);
        let exact = Toleration {
            key: "nvidia.com/gpu".into(),
            operator: TolerationOp::Equal,
            value: "true".into(),
            effect: Some(TaintEffect::NoSchedule),
        };
        assert!(exact.tolerates(&gpu));
        let wrong_value = Toleration { value: "false".into(), ..exact.clone() };
        assert!(!wrong_value.tolerates(&gpu));
        let wildcard =
            Toleration { key: String::new(), operator: TolerationOp::Exists, value: String::new(), effect: None };
        assert!(wildcard.tolerates(&gpu));
        let prefer = Taint::new("x", "", TaintEffect::PreferNoSchedule);
        assert!(tolerates_all(&[], std::slice::from_ref(&prefer)).is_ok());
        assert_eq!(tolerates_all(&[], &[prefer, gpu.clone()]), Err(gpu));
    }
}
