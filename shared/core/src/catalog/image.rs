//! Which build of an EKS-optimized image an instance type boots.
//!
//! AWS publishes its AL2023 and Bottlerocket images in variants: the standard build, one with the
//! NVIDIA driver and container toolkit, and (AL2023) one with the AWS Neuron driver for
//! Inferentia and Trainium. Karpenter gives a type with GPUs (`instance-gpu-count` set) the nvidia
//! image, one with accelerators the neuron image, every other the standard image; Dovetail does
//! the same. A class resolved from selector terms (ids, names, tags) has one image per
//! architecture, which every type of that architecture boots whatever its variant.

use serde::{Deserialize, Serialize};

use super::{InstanceResources, InstanceType};
use crate::labels;
use crate::resources::NEURON;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ImageVariant {
    Standard,
    /// GPU types (NVIDIA, and like Karpenter, any type with `instance-gpu-count`).
    Nvidia,
    /// Inferentia and Trainium types (AWS Neuron devices).
    Neuron,
}

impl ImageVariant {
    pub const ALL: [ImageVariant; 3] = [ImageVariant::Standard, ImageVariant::Nvidia, ImageVariant::Neuron];

    /// The variant's name in AWS's parameter paths (`standard`, `nvidia`, `neuron`).
    pub fn as_str(self) -> &'static str {
        match self {
            ImageVariant::Standard => "standard",
            ImageVariant::Nvidia => "nvidia",
            ImageVariant::Neuron => "neuron",
        }
    }

    /// The variant a type boots: nvidia with GPUs, neuron with Neuron devices, else standard.
    pub fn of(t: &InstanceType) -> ImageVariant {
        let gpus = t.requirements.get(labels::INSTANCE_GPU_COUNT).and_then(|r| r.single_value());
        if gpus.is_some_and(|n| n != "0") {
            return ImageVariant::Nvidia;
        }
        let neuron = match &t.resources {
            InstanceResources::Ec2(f) => f.extended.iter().any(|(name, n)| name == NEURON && *n > 0),
            InstanceResources::Fixed { capacity, .. } => capacity.get(NEURON) > 0,
        };
        if neuron {
            ImageVariant::Neuron
        } else {
            ImageVariant::Standard
        }
    }

    /// The variant of the embedded catalog's type of that name; standard for a type it lacks.
    pub fn of_type_name(instance_type: &str) -> ImageVariant {
        super::embedded().get(instance_type).map_or(ImageVariant::Standard, ImageVariant::of)
    }

    /// The key of this variant's image for `arch` in `ResolvedClass::images`: the architecture
    /// alone for the standard image (also the key of an image selected by terms), else
    /// `<arch>/<variant>` (`amd64/nvidia`).
    pub fn image_key(self, arch: &str) -> String {
        match self {
            ImageVariant::Standard => arch.to_string(),
            v => format!("{arch}/{}", v.as_str()),
        }
    }

    /// The architecture and variant of an image key ([`ImageVariant::image_key`]); `None` for a
    /// key that names an instance type.
    pub fn parse_key(key: &str) -> Option<(&str, ImageVariant)> {
        let (arch, variant) = key.split_once('/').unwrap_or((key, "standard"));
        if !matches!(arch, "amd64" | "arm64") {
            return None;
        }
        let variant = ImageVariant::ALL.into_iter().find(|v| v.as_str() == variant)?;
        Some((arch, variant))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_types_boot_nvidia_neuron_types_neuron_the_rest_standard() {
        for (name, want) in [
            ("m5.large", ImageVariant::Standard),
            ("m7g.large", ImageVariant::Standard),
            ("g5.xlarge", ImageVariant::Nvidia),
            ("p4d.24xlarge", ImageVariant::Nvidia),
            ("g5g.xlarge", ImageVariant::Nvidia),
            ("inf2.xlarge", ImageVariant::Neuron),
            ("trn1.2xlarge", ImageVariant::Neuron),
        ] {
            assert_eq!(ImageVariant::of_type_name(name), want, "{name}");
        }
        assert_eq!(ImageVariant::of_type_name("no.such"), ImageVariant::Standard);
    }

    #[test]
    fn keys_round_trip() {
        for arch in ["amd64", "arm64"] {
            for v in ImageVariant::ALL {
                assert_eq!(ImageVariant::parse_key(&v.image_key(arch)), Some((arch, v)));
            }
        }
        assert_eq!(ImageVariant::image_key(ImageVariant::Standard, "amd64"), "amd64");
        assert_eq!(ImageVariant::image_key(ImageVariant::Neuron, "amd64"), "amd64/neuron");
        assert_eq!(ImageVariant::parse_key("m5.large"), None);
        assert_eq!(ImageVariant::parse_key("amd64/cuda"), None);
    }
}
