//! What an EC2NodeClass resolves to: subnets (per zone, the one with the most free IPs),
//! security groups and images (per architecture, and for an alias per variant), from its selector
//! terms.
//!
//! Terms are ORed, the fields of one term ANDed; a tag value `*` matches any value. Lookups use
//! filters rather than id lists, so a term naming something that does not exist selects nothing
//! instead of failing the call.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::{ArchitectureValues, Filter};
use dovetail_api::crd::{
    AmiAlias, AmiFamily, AmiSelectorTerm, EC2NodeClassSpec, SecurityGroupSelectorTerm, SubnetSelectorTerm,
};
use dovetail_core::catalog::ImageVariant;
use dovetail_core::cluster::ResolvedClass;
use dovetail_core::hash::nodeclass_hash;
use dovetail_core::model::NodeClass;

use super::filters::{filter, tag_filters};
use crate::error::{api_error, AwsError, AwsResult};

/// Architectures Dovetail launches, as Kubernetes and as EC2/SSM spell them.
pub const ARCHES: [(&str, &str); 2] = [("amd64", "x86_64"), ("arm64", "arm64")];

/// A subnet as selection needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubnetInfo {
    pub id: String,
    pub zone: String,
    pub free_ips: i64,
}

/// A class resolved, with the subnet zones launches need.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    pub resolved: ResolvedClass,
    /// The chosen subnets (one per zone), zone order.
    pub subnets: Vec<SubnetInfo>,
}

/// The class spec as written, in dovetail-api's types.
pub fn spec(class: &NodeClass) -> AwsResult<EC2NodeClassSpec> {
    serde_json::from_value(class.spec.clone())
        .map_err(|e| AwsError::Class { class: class.name.clone(), message: format!("spec does not parse: {e}") })
}

/// Per zone, the subnet with the most free IPs (ties: the smaller id), in zone order.
pub fn pick_subnets(candidates: &[SubnetInfo]) -> Vec<SubnetInfo> {
    let mut best: BTreeMap<&str, &SubnetInfo> = BTreeMap::new();
    for s in candidates {
        match best.get(s.zone.as_str()) {
            Some(b) if (b.free_ips, std::cmp::Reverse(&b.id)) >= (s.free_ips, std::cmp::Reverse(&s.id)) => {}
            _ => {
                best.insert(&s.zone, s);
            }
        }
    }
    best.into_values().cloned().collect()
}

fn subnet_filters(term: &SubnetSelectorTerm) -> Vec<Filter> {
    let mut f = tag_filters(&term.tags);
    if let Some(id) = &term.id {
        f.push(filter("subnet-id", id));
    }
    f
}

fn security_group_filters(term: &SecurityGroupSelectorTerm) -> Vec<Filter> {
    let mut f = tag_filters(&term.tags);
    if let Some(id) = &term.id {
        f.push(filter("group-id", id));
    }
    if let Some(name) = &term.name {
        f.push(filter("group-name", name));
    }
    f
}

/// The SSM parameter holding the EKS-optimized image of an alias for `arch` (`x86_64` / `arm64`)
/// and `variant` (see [`ImageVariant`]), `recommended` (Bottlerocket: `latest`) for `latest`, else
/// the release's own parameter (`v20240625`); `None` when the family publishes no such image:
/// - AL2023: `<prefix>/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/<variant>/…`,
///   every variant on x86_64, standard and nvidia on arm64 (no Neuron type is arm64).
/// - AL2: `<prefix>/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2[-arm64]/…`, and for GPU and
///   Neuron types `amazon-linux-2-gpu` (x86_64 only), published for Kubernetes up to 1.32 (AWS
///   ended AL2 EKS images in November 2025): for a later cluster the parameter is missing and the
///   class says so.
/// - Bottlerocket: `<prefix>/aws/service/bottlerocket/aws-k8s-<k8s>[-nvidia]/<arch>/<version>/
///   image_id`, the version without its `v` (`bottlerocket@v1.20.3` → `1.20.3`); its standard
///   image also serves Neuron types (it carries the Neuron driver), on x86_64.
/// - Windows 2019/2022/2025: `<prefix>/aws/service/ami-windows-latest/Windows_Server-<year>-English-
///   Core-EKS_Optimized-<k8s>/image_id` (the Server Core image, the one Karpenter uses), x86_64
///   standard only, and only `latest` (AWS publishes no per-release parameters for them).
pub fn alias_parameter(
    prefix: &str,
    alias: &AmiAlias,
    k8s_version: &str,
    arch: &str,
    variant: ImageVariant,
) -> AwsResult<Option<String>> {
    let root = format!("{prefix}/aws/service/eks/optimized-ami/{k8s_version}");
    let version = &alias.version;
    let latest = *version == "latest";
    let unsupported = |why: &str| AwsError::Class {
        class: String::new(),
        message: format!("amiSelectorTerms: alias {}@{version}: {why}", alias.family),
    };
    // Per family: where its parameters live, and a release's own parameter name.
    let (base, release) = match alias.ami_family() {
        AmiFamily::Al2023 => {
            if arch == "arm64" && variant == ImageVariant::Neuron {
                return Ok(None);
            }
            let variant = variant.as_str();
            (
                format!("{root}/amazon-linux-2023/{arch}/{variant}"),
                format!("amazon-eks-node-al2023-{arch}-{variant}-{k8s_version}-{version}"),
            )
        }
        AmiFamily::Al2 => match (arch, variant) {
            ("arm64", ImageVariant::Standard) => {
                (format!("{root}/amazon-linux-2-arm64"), format!("amazon-eks-arm64-node-{k8s_version}-{version}"))
            }
            ("arm64", _) => return Ok(None),
            (_, ImageVariant::Standard) => {
                (format!("{root}/amazon-linux-2"), format!("amazon-eks-node-{k8s_version}-{version}"))
            }
            _ => (format!("{root}/amazon-linux-2-gpu"), format!("amazon-eks-gpu-node-{k8s_version}-{version}")),
        },
        AmiFamily::Bottlerocket => {
            let flavour = match (arch, variant) {
                (_, ImageVariant::Standard) | ("x86_64", ImageVariant::Neuron) => "",
                (_, ImageVariant::Nvidia) => "-nvidia",
                _ => return Ok(None),
            };
            let release = if latest { "latest" } else { version.trim_start_matches('v') };
            return Ok(Some(format!(
                "{prefix}/aws/service/bottlerocket/aws-k8s-{k8s_version}{flavour}/{arch}/{release}/image_id"
            )));
        }
        family @ (AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025) => {
            if !latest {
                return Err(unsupported("windows families may only use version 'latest'"));
            }
            if arch != "x86_64" || variant != ImageVariant::Standard {
                return Ok(None);
            }
            let year = family.node_os().windows_release().expect("a Windows family");
            return Ok(Some(format!(
                "{prefix}/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s_version}/image_id"
            )));
        }
        _ => return Err(unsupported("the family publishes no images to resolve (use al2023 or bottlerocket)")),
    };
    Ok(Some(if latest { format!("{base}/recommended/image_id") } else { format!("{base}/{release}/image_id") }))
}

/// Whether AWS publishes the alias's family in GPU or Neuron builds (AL2023, AL2 and Bottlerocket
/// do, Windows does not): the class's images are then per variant
/// (`ResolvedClass::images_per_variant`).
pub fn publishes_variants(alias: &AmiAlias, k8s_version: &str) -> bool {
    ARCHES.iter().any(|(_, arch)| {
        [ImageVariant::Nvidia, ImageVariant::Neuron]
            .into_iter()
            .any(|v| matches!(alias_parameter("", alias, k8s_version, arch, v), Ok(Some(_))))
    })
}

/// Kubernetes architecture of an EC2 image architecture.
fn arch_of(a: Option<&ArchitectureValues>) -> Option<&'static str> {
    match a? {
        ArchitectureValues::X8664 => Some("amd64"),
        ArchitectureValues::Arm64 => Some("arm64"),
        _ => None,
    }
}

/// Resolves classes against EC2 and SSM.
#[derive(Debug, Clone)]
pub struct Resolver {
    pub ec2: aws_sdk_ec2::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub ssm_prefix: String,
    /// Kubernetes `major.minor` of the cluster (alias lookups).
    pub k8s_version: String,
}

impl Resolver {
    /// What the class's selectors select. A selector that selects nothing (or an alias AWS
    /// publishes no image for) is not an error here but an empty part, which the class's condition
    /// for that part reports (`ResolvedClass::missing`) while the other parts show what they
    /// found; an error is a lookup that failed.
    pub async fn resolve(&self, class: &NodeClass) -> AwsResult<Resolution> {
        let spec = spec(class)?;
        let subnets = pick_subnets(&self.subnets(&spec.subnet_selector_terms).await?);
        let security_groups = self.security_groups(&spec.security_group_selector_terms).await?;
        let (images, images_problem) = match self.images(&spec.ami_selector_terms).await {
            Ok(images) => (images, None),
            Err(AwsError::Class { message, .. }) => (BTreeMap::new(), Some(message)),
            Err(e) => return Err(e),
        };
        let (reservations, unusable) =
            super::reservations::list(&self.ec2, &spec.capacity_reservation_selector_terms, super::now()).await?;
        for why in unusable {
            tracing::warn!(class = %class.name, "capacityReservationSelectorTerms: {why}; left out");
        }
        Ok(Resolution {
            resolved: ResolvedClass {
                name: class.name.clone(),
                hash: nodeclass_hash(&class.spec),
                images_per_variant: spec.alias().is_some_and(|a| publishes_variants(&a, &self.k8s_version)),
                images,
                images_problem,
                subnets: subnets.iter().map(|s| s.id.clone()).collect(),
                security_groups,
                zones: subnets.iter().map(|s| s.zone.clone()).collect(),
                // Made by the caller (`crate::iam`), after the parts EC2 resolves.
                instance_profile: None,
                instance_profile_problem: None,
                reservations,
            },
            subnets,
        })
    }

    /// Every subnet any term selects.
    pub async fn subnets(&self, terms: &[SubnetSelectorTerm]) -> AwsResult<Vec<SubnetInfo>> {
        let mut out: BTreeMap<String, SubnetInfo> = BTreeMap::new();
        for term in terms {
            let page = self
                .ec2
                .describe_subnets()
                .set_filters(Some(subnet_filters(term)))
                .send()
                .await
                .map_err(|e| api_error("DescribeSubnets", e))?;
            for s in page.subnets() {
                if let (Some(id), Some(zone)) = (s.subnet_id(), s.availability_zone()) {
                    let free_ips = i64::from(s.available_ip_address_count().unwrap_or(0));
                    out.insert(id.to_string(), SubnetInfo { id: id.to_string(), zone: zone.to_string(), free_ips });
                }
            }
        }
        Ok(out.into_values().collect())
    }

    /// Ids of every security group any term selects, sorted.
    pub async fn security_groups(&self, terms: &[SecurityGroupSelectorTerm]) -> AwsResult<Vec<String>> {
        let mut out = BTreeSet::new();
        for term in terms {
            let page = self
                .ec2
                .describe_security_groups()
                .set_filters(Some(security_group_filters(term)))
                .send()
                .await
                .map_err(|e| api_error("DescribeSecurityGroups", e))?;
            out.extend(page.security_groups().iter().filter_map(|g| g.group_id()).map(str::to_string));
        }
        Ok(out.into_iter().collect())
    }

    /// Images: per architecture and variant from the alias's SSM parameters (keys as
    /// [`ImageVariant::image_key`] makes them), or per architecture the newest image any other
    /// term selects.
    pub async fn images(&self, terms: &[AmiSelectorTerm]) -> AwsResult<BTreeMap<String, String>> {
        let mut images = BTreeMap::new();
        if let Some(alias) = terms.iter().find_map(|t| t.alias.as_deref()) {
            let alias = AmiAlias::parse(alias).map_err(|message| AwsError::Class { class: String::new(), message })?;
            let mut missing = Vec::new();
            // Parameter → value, as variants may share a parameter (Bottlerocket's Neuron image).
            let mut read: BTreeMap<String, Option<String>> = BTreeMap::new();
            for (k8s_arch, ec2_arch) in ARCHES {
                for variant in ImageVariant::ALL {
                    let Some(name) = alias_parameter(&self.ssm_prefix, &alias, &self.k8s_version, ec2_arch, variant)?
                    else {
                        continue;
                    };
                    if !read.contains_key(&name) {
                        let value = self.parameter(&name).await?;
                        if value.is_none() {
                            missing.push(name.clone());
                        }
                        read.insert(name.clone(), value);
                    }
                    if let Some(id) = &read[&name] {
                        images.insert(variant.image_key(k8s_arch), id.clone());
                    }
                }
            }
            if images.is_empty() {
                // An AL2 alias on a cluster newer than AWS publishes AL2 images for lands here.
                return Err(AwsError::Class {
                    class: String::new(),
                    message: format!(
                        "amiSelectorTerms: alias {}@{}: AWS publishes no such image for Kubernetes {} (no SSM parameter {})",
                        alias.family,
                        alias.version,
                        self.k8s_version,
                        missing.join(" or ")
                    ),
                });
            }
            return Ok(images);
        }
        // (creation date, id) of the newest image per architecture.
        let mut newest: BTreeMap<&'static str, (String, String)> = BTreeMap::new();
        for term in terms {
            let mut request = self.ec2.describe_images().set_filters(Some(tag_filters(&term.tags)));
            let mut ids = Vec::new();
            if let Some(p) = &term.ssm_parameter {
                match self.parameter(p).await? {
                    Some(id) => ids.push(id),
                    None => continue,
                }
            }
            if let Some(id) = &term.id {
                ids.push(id.clone());
            }
            for id in ids {
                request = request.filters(filter("image-id", &id));
            }
            if let Some(name) = &term.name {
                request = request.filters(filter("name", name));
            }
            match (&term.owner, &term.name) {
                (Some(owner), _) => request = request.owners(owner),
                // A name alone could match anyone's public image: only ours and Amazon's.
                (None, Some(_)) => request = request.owners("self").owners("amazon"),
                (None, None) => {}
            }
            let page = request.send().await.map_err(|e| api_error("DescribeImages", e))?;
            for image in page.images() {
                let (Some(arch), Some(id)) = (arch_of(image.architecture()), image.image_id()) else { continue };
                let candidate = (image.creation_date().unwrap_or_default().to_string(), id.to_string());
                if newest.get(arch).is_none_or(|current| *current < candidate) {
                    newest.insert(arch, candidate);
                }
            }
        }
        images.extend(newest.into_iter().map(|(arch, (_, id))| (arch.to_string(), id)));
        Ok(images)
    }

    /// An SSM parameter's value; `None` if it does not exist.
    async fn parameter(&self, name: &str) -> AwsResult<Option<String>> {
        match self.ssm.get_parameter().name(name).send().await {
            Ok(out) => Ok(out.parameter().and_then(|p| p.value()).map(str::to_string)),
            Err(e) => {
                let e = api_error("GetParameter", e);
                match &e {
                    AwsError::Api { code: Some(c), .. } if c == "ParameterNotFound" => Ok(None),
                    _ => Err(e),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ImageVariant::{Neuron, Nvidia, Standard};

    fn subnet(id: &str, zone: &str, free_ips: i64) -> SubnetInfo {
        SubnetInfo { id: id.into(), zone: zone.into(), free_ips }
    }

    #[test]
    fn one_subnet_per_zone_with_the_most_free_ips() {
        let picked = pick_subnets(&[
            subnet("subnet-b1", "us-east-1b", 10),
            subnet("subnet-a1", "us-east-1a", 100),
            subnet("subnet-a2", "us-east-1a", 250),
            subnet("subnet-b2", "us-east-1b", 10),
        ]);
        assert_eq!(picked, vec![subnet("subnet-a2", "us-east-1a", 250), subnet("subnet-b1", "us-east-1b", 10)]);
    }

    #[test]
    fn alias_parameters_follow_the_eks_layout() {
        let latest = AmiAlias::parse("al2023@latest").unwrap();
        assert_eq!(
            alias_parameter("", &latest, "1.31", "x86_64", Standard).unwrap().unwrap(),
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id"
        );
        assert_eq!(
            alias_parameter("/test", &latest, "1.31", "arm64", Standard).unwrap().unwrap(),
            "/test/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/standard/recommended/image_id"
        );
        let pinned = AmiAlias::parse("al2023@v20240625").unwrap();
        assert_eq!(
            alias_parameter("", &pinned, "1.30", "x86_64", Standard).unwrap().unwrap(),
            "/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/x86_64/standard/\
             amazon-eks-node-al2023-x86_64-standard-1.30-v20240625/image_id"
        );
        for (alias, year) in [("windows2019", "2019"), ("windows2022", "2022"), ("windows2025", "2025")] {
            let windows = AmiAlias::parse(&format!("{alias}@latest")).unwrap();
            assert_eq!(
                alias_parameter("/test", &windows, "1.31", "x86_64", Standard).unwrap().as_deref(),
                Some(
                    format!(
                        "/test/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-1.31/image_id"
                    )
                    .as_str()
                )
            );
            assert_eq!(
                alias_parameter("", &windows, "1.31", "arm64", Standard).unwrap(),
                None,
                "Windows images are x86_64 only"
            );
        }
        // The API refuses a pinned Windows alias; built by hand, it is refused here too.
        let pinned_windows = AmiAlias { family: "windows2022".into(), version: "v1".into() };
        let refused = alias_parameter("", &pinned_windows, "1.31", "x86_64", Standard).unwrap_err().to_string();
        assert!(refused.contains("windows2022@v1") && refused.contains("'latest'"), "{refused}");
        let al2 = AmiAlias::parse("al2@latest").unwrap();
        assert_eq!(
            alias_parameter("", &al2, "1.32", "x86_64", Standard).unwrap().unwrap(),
            "/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id"
        );
        assert_eq!(
            alias_parameter("/test", &al2, "1.32", "arm64", Standard).unwrap().unwrap(),
            "/test/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/recommended/image_id"
        );
        let pinned = AmiAlias::parse("al2@v20240213").unwrap();
        assert_eq!(
            alias_parameter("", &pinned, "1.29", "arm64", Standard).unwrap().unwrap(),
            "/aws/service/eks/optimized-ami/1.29/amazon-linux-2-arm64/amazon-eks-arm64-node-1.29-v20240213/image_id"
        );
        assert_eq!(
            alias_parameter("", &pinned, "1.29", "x86_64", Standard).unwrap().unwrap(),
            "/aws/service/eks/optimized-ami/1.29/amazon-linux-2/amazon-eks-node-1.29-v20240213/image_id"
        );
    }

    /// Every variant's parameter, per family and architecture, as AWS publishes them.
    #[test]
    fn alias_parameters_per_variant() {
        let param = |alias: &str, arch: &str, variant| {
            alias_parameter("", &AmiAlias::parse(alias).unwrap(), "1.31", arch, variant).unwrap()
        };
        let eks = "/aws/service/eks/optimized-ami/1.31";
        for (arch, variant, want) in [
            ("x86_64", Nvidia, Some(format!("{eks}/amazon-linux-2023/x86_64/nvidia/recommended/image_id"))),
            ("x86_64", Neuron, Some(format!("{eks}/amazon-linux-2023/x86_64/neuron/recommended/image_id"))),
            ("arm64", Nvidia, Some(format!("{eks}/amazon-linux-2023/arm64/nvidia/recommended/image_id"))),
            ("arm64", Neuron, None),
        ] {
            assert_eq!(param("al2023@latest", arch, variant), want, "{arch} {variant:?}");
        }
        assert_eq!(
            param("al2023@v20240807", "x86_64", Neuron).as_deref(),
            Some(format!("{eks}/amazon-linux-2023/x86_64/neuron/amazon-eks-node-al2023-x86_64-neuron-1.31-v20240807/image_id").as_str())
        );
        // AL2: one GPU image (x86_64) for GPU and Neuron types.
        for variant in [Nvidia, Neuron] {
            assert_eq!(
                param("al2@v20240213", "x86_64", variant),
                Some(format!("{eks}/amazon-linux-2-gpu/amazon-eks-gpu-node-1.31-v20240213/image_id"))
            );
            assert_eq!(param("al2@latest", "arm64", variant), None);
        }
        // Bottlerocket: `latest`, or the release without its `v`; the nvidia image apart, the
        // standard one also for Neuron types.
        let br = "/aws/service/bottlerocket";
        for (alias, arch, variant, want) in [
            ("bottlerocket@latest", "x86_64", Standard, Some(format!("{br}/aws-k8s-1.31/x86_64/latest/image_id"))),
            ("bottlerocket@latest", "arm64", Standard, Some(format!("{br}/aws-k8s-1.31/arm64/latest/image_id"))),
            ("bottlerocket@latest", "x86_64", Neuron, Some(format!("{br}/aws-k8s-1.31/x86_64/latest/image_id"))),
            ("bottlerocket@latest", "arm64", Neuron, None),
            ("bottlerocket@latest", "arm64", Nvidia, Some(format!("{br}/aws-k8s-1.31-nvidia/arm64/latest/image_id"))),
            (
                "bottlerocket@v1.20.3",
                "x86_64",
                Nvidia,
                Some(format!("{br}/aws-k8s-1.31-nvidia/x86_64/1.20.3/image_id")),
            ),
            ("bottlerocket@1.20.3", "x86_64", Standard, Some(format!("{br}/aws-k8s-1.31/x86_64/1.20.3/image_id"))),
        ] {
            assert_eq!(param(alias, arch, variant), want, "{alias} {arch} {variant:?}");
        }
        for variant in [Nvidia, Neuron] {
            assert_eq!(param("windows2022@latest", "x86_64", variant), None, "no GPU Windows image");
        }
        let custom = AmiAlias { family: "custom".into(), version: "latest".into() };
        assert!(alias_parameter("", &custom, "1.31", "x86_64", Standard).is_err());
        // Which families' images are per variant.
        for (alias, per_variant) in [
            ("al2023@latest", true),
            ("al2023@v20240807", true),
            ("al2@latest", true),
            ("bottlerocket@latest", true),
            ("windows2022@latest", false),
        ] {
            assert_eq!(publishes_variants(&AmiAlias::parse(alias).unwrap(), "1.31"), per_variant, "{alias}");
        }
    }

    #[test]
    fn wildcard_tags_filter_on_the_key() {
        let f = tag_filters(&BTreeMap::from([
            ("karpenter.sh/discovery".to_string(), "prod".to_string()),
            ("team".to_string(), "*".to_string()),
        ]));
        assert_eq!(f[0].name(), Some("tag:karpenter.sh/discovery"));
        assert_eq!(f[0].values(), ["prod"]);
        assert_eq!(f[1].name(), Some("tag-key"));
        assert_eq!(f[1].values(), ["team"]);
    }
}
