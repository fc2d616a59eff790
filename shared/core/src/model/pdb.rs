//! PodDisruptionBudgets, as far as voluntary disruption needs them.

use serde::{Deserialize, Serialize};

use super::pod::Pod;
use super::selector::LabelSelector;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pdb {
    pub namespace: String,
    pub name: String,
    pub selector: LabelSelector,
    /// `status.disruptionsAllowed`: evictions the budget allows right now.
    pub disruptions_allowed: i32,
}

impl Pdb {
    /// Whether the budget covers a pod.
    pub fn covers(&self, pod: &Pod) -> bool {
        pod.namespace == self.namespace && self.selector.matches(&pod.labels)
    }
}
