//! The cluster as the decision core sees it: pods, nodes, NodePools, EC2NodeClasses.
//! Plain data, built by adapters (Kubernetes objects, manifests, the simulator).

mod held;
mod node;
mod nodeclass;
mod nodepool;
mod pdb;
mod pod;
mod selector;
mod taint;

pub use held::{hold, Held};
pub use node::{DaemonSet, Node, NodeCondition, NodeKind};
pub use nodeclass::{KubeletConfig, NodeClass, NodeOs};
pub use nodepool::{
    cost_micros, cost_quantity, format_cost, limit_share, parse_cost, Budget, BudgetNodes, ConsolidationPolicy,
    DisruptionReason, DisruptionSpec, NodePool, RebalancePolicy, LIMIT_COST, LIMIT_NODES, NODE_REPAIR_ANNOTATION,
    REBALANCE_POLICY_ANNOTATION,
};
pub use pdb::Pdb;
pub use pod::{
    HostPort, InclusionPolicy, NamespaceScope, OwnerKind, Pod, PodAffinityTerm, TopologySpread, Weighted,
    WhenUnsatisfiable,
};
pub use selector::{LabelSelector, SelectorExpr, SelectorOp};
pub use taint::{tolerates_all, Taint, TaintEffect, Toleration, TolerationOp};
