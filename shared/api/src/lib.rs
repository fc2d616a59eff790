//! Kubernetes objects and manifest files into Dovetail's core model.
//!
//! `convert` maps single k8s-openapi objects (Pod, Node, DaemonSet, volumes) onto
//! `dovetail_core::model` exactly as kube-scheduler and Karpenter read them; `manifest` loads
//! multi-document YAML/JSON files (or `kubectl get -o yaml` dumps) into an [`manifest::Inputs`]
//! snapshot for `dovetail plan` / `dovetail simulate`. No AWS SDK and no Kubernetes client here,
//! so the CLI builds fast.

pub mod convert;
pub mod manifest;
