//! `karpenter.k8s.aws/v1` EC2NodeClass → `dovetail.dev/v1` EC2NodeClass.
//!
//! Nothing is rewritten: every field keeps its value. The warnings are about what Dovetail's
//! launches (`shared/aws`) and planning (`shared/core`) do differently from Karpenter with the same
//! settings today; each says what happens and what to change. When Dovetail closes one of these
//! gaps, its check here goes with it.

use serde_json::Value;

use super::nodepool::KARPENTER_TAINTS;
use super::object;
use super::Notes;
use crate::crd::{AmiFamily, EC2NodeClass, EC2NodeClassSpec, FieldError, EC2_NODE_CLASS_KIND};

/// Converts one Karpenter EC2NodeClass (as read) into Dovetail's, or says why it cannot be.
pub(super) fn convert(input: &Value, notes: &mut Notes<'_>) -> Result<EC2NodeClass, Vec<FieldError>> {
    let mut value = input.clone();
    object::prepare(&mut value, notes);
    let class: EC2NodeClass =
        object::decode::<EC2NodeClass, EC2NodeClassSpec>(EC2_NODE_CLASS_KIND, &value, notes, |_| {
            "dropped: Dovetail's EC2NodeClass has no such field".into()
        })?;
    class.to_core()?;
    check_image(&class, notes);
    Ok(class)
}

/// Dovetail writes AL2023 user data (a nodeadm NodeConfig), AL2's (`bootstrap.sh`), the Windows
/// images' (the EKS PowerShell bootstrap) and Bottlerocket's (TOML settings), passes `Custom` user
/// data unchanged as Karpenter does, and resolves every alias family Karpenter does: only AL2's
/// deprecation and Karpenter's own taint in Custom user data are worth a word.
fn check_image(class: &EC2NodeClass, notes: &mut Notes<'_>) {
    let spec = &class.spec;
    let alias = spec.ami_selector_terms.iter().position(|t| t.alias.is_some());
    match class.ami_family() {
        AmiFamily::Al2 => {
            let field = match alias {
                Some(i) => format!("spec.amiSelectorTerms[{i}].alias"),
                None => "spec.amiFamily".to_string(),
            };
            let why = AmiFamily::Al2.deprecation().unwrap_or_default();
            notes.warn(field, format!("kept AL2, which Dovetail launches with /etc/eks/bootstrap.sh. {why}"));
        }
        // Karpenter's Custom images register their nodes with its unregistered taint, which
        // Dovetail never lifts (it lifts its own).
        AmiFamily::Custom => {
            let user_data = spec.user_data.as_deref().unwrap_or_default();
            for (karpenter, dovetail) in KARPENTER_TAINTS.iter().filter(|(k, _)| user_data.contains(k)) {
                notes.warn(
                    "spec.userData",
                    format!(
                        "kept, and passed to the nodes unchanged as Karpenter does for the Custom family; it \
                         names Karpenter's {karpenter} taint, which Dovetail does not manage: use {dovetail} instead"
                    ),
                );
            }
        }
        // AL2023, Bottlerocket and Windows launch as Karpenter's do; an unknown family fails
        // validation before this.
        _ => {}
    }
}
