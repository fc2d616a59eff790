//! `karpenter.k8s.aws/v1` EC2NodeClass → `dovetail.dev/v1` EC2NodeClass.
//!
//! Nothing is rewritten: every field keeps its value. The warnings are about what Dovetail's
//! launches (`shared/aws`) and planning (`shared/core`) do differently from Karpenter with the same
//! settings today; each says what happens and what to change. When Dovetail closes one of these
//! gaps, its check here goes with it.

use serde_json::Value;

use dovetail_core::overhead::default_root_volume_bytes;
use dovetail_core::resources::parse_units;

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
    check_launch(&class.spec, notes);
    // Bottlerocket gets the warning that its nodes would not join; its root devices differ.
    if class.ami_family() != AmiFamily::Bottlerocket {
        check_root_volume(&class.spec, &class.ami_family(), notes);
    }
    Ok(class)
}

/// Dovetail writes AL2023 user data (a nodeadm NodeConfig), AL2's (`bootstrap.sh`) and the Windows
/// images' (the EKS PowerShell bootstrap), passes `Custom` user data unchanged as Karpenter does,
/// and resolves `al2023`, `al2` and `windows20xx` aliases: Bottlerocket does not bootstrap.
fn check_image(class: &EC2NodeClass, notes: &mut Notes<'_>) {
    let spec = &class.spec;
    let alias = spec.ami_selector_terms.iter().position(|t| t.alias.is_some());
    match class.ami_family() {
        AmiFamily::Al2023 | AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {}
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
            check_custom_alias(class, notes);
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
        family => {
            let (field, how) = match (alias, &spec.ami_family) {
                (Some(i), None) => (
                    format!("spec.amiSelectorTerms[{i}].alias"),
                    "it resolves only al2023, al2 and windows2019/2022/2025 aliases",
                ),
                _ => ("spec.amiFamily".to_string(), "it writes only AL2023, AL2 and Windows bootstrap user data"),
            };
            notes.warn(
                field,
                format!(
                    "kept {family}, but Dovetail launches Amazon Linux and Windows nodes only ({how}): nodes of this \
                     class would not join the cluster. Use alias al2023@latest, or AL2023 AMIs with amiFamily AL2023, and \
                     rewrite userData{} as nodeadm configuration",
                    if spec.user_data.is_some() { "" } else { " (if you add any)" }
                ),
            );
        }
    }
}

/// Alias families Dovetail does not look images up for (`alias_parameter` in
/// `shared/aws/src/ec2/resolve.rs` refuses them). Under their own family the family's warning
/// covers it; under `amiFamily: Custom` (as Karpenter's custom-family-with-alias example writes
/// it) nothing else would say that the class finds no image.
const UNRESOLVED_ALIAS_FAMILIES: &[AmiFamily] = &[AmiFamily::Bottlerocket];

/// A Custom class whose image comes from an alias Dovetail cannot resolve launches nothing.
fn check_custom_alias(class: &EC2NodeClass, notes: &mut Notes<'_>) {
    let Some(i) = class.spec.ami_selector_terms.iter().position(|t| t.alias.is_some()) else { return };
    let Some(alias) = class.alias() else { return };
    if UNRESOLVED_ALIAS_FAMILIES.contains(&alias.ami_family()) {
        notes.warn(
            format!("spec.amiSelectorTerms[{i}].alias"),
            format!(
                "kept {}@{}, but Dovetail does not resolve {} aliases: this class finds no image and its pools \
                 launch nothing. Select the image by id, name or tags instead (the user data still goes to the \
                 nodes unchanged)",
                alias.family, alias.version, alias.family
            ),
        );
    }
}

/// Launch settings Dovetail keeps but applies differently.
fn check_launch(spec: &EC2NodeClassSpec, notes: &mut Notes<'_>) {
    if let Some(policy) = &spec.instance_store_policy {
        notes.warn(
            "spec.instanceStorePolicy",
            format!(
                "kept {policy}, but not applied: Dovetail's user data does not configure the instance-store \
                 disks, so they stay unused"
            ),
        );
    }
}

/// Karpenter sizes a node's ephemeral storage from its root volume; Dovetail's planner assumes
/// the image's default root volume (AL2023's 20Gi, the Windows images' 50Gi) whatever the mappings
/// say.
fn check_root_volume(spec: &EC2NodeClassSpec, family: &AmiFamily, notes: &mut Notes<'_>) {
    let os = family.node_os();
    // The mapping Karpenter takes the node's ephemeral storage from when none says `rootVolume`.
    let device = family.root_device();
    let image = if os.is_windows() { "the Windows images'" } else { "AL2023's" };
    let planned = default_root_volume_bytes(os);
    let mappings = &spec.block_device_mappings;
    let root = mappings
        .iter()
        .position(|m| m.root_volume)
        .or_else(|| mappings.iter().position(|m| m.device_name.as_deref() == Some(device)));
    let Some(i) = root else { return };
    let Some(size) = mappings[i].ebs.as_ref().and_then(|e| e.volume_size.as_ref()) else { return };
    if parse_units(&size.0).is_ok_and(|bytes| bytes != planned) {
        notes.warn(
            format!("spec.blockDeviceMappings[{i}].ebs.volumeSize"),
            format!(
                "nodes get this {} root volume, but Dovetail plans ephemeral-storage as on {image} default \
                 {}Gi one (Karpenter uses this size): pods that request ephemeral-storage are packed for {}Gi",
                size.0,
                planned >> 30,
                planned >> 30
            ),
        );
    }
}
