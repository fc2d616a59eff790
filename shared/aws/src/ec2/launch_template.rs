//! Launch templates, created once per distinct content and reused: the name carries the content
//! hash (`dovetail/<cluster>/<hash>`), so equal content finds the existing template and changed
//! content (a new AMI, new user data) gets a new one. Instance type, subnet and zone are CreateFleet
//! overrides, not template content.

use aws_sdk_ec2::types::{
    CapacityReservationPreference, CapacityReservationTarget, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateCapacityReservationSpecificationRequest, LaunchTemplateEbsBlockDeviceRequest,
    LaunchTemplateHttpTokensState, LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMarketOptionsRequest, LaunchTemplateInstanceMetadataEndpointState,
    LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplateInstanceMetadataProtocolIpv6,
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, LaunchTemplatesMonitoringRequest, MarketType,
    RequestLaunchTemplateData, ResourceType, Tag, TagSpecification, VolumeType,
};
use dovetail_api::crd::{AmiFamily, EC2NodeClassSpec};
use dovetail_core::catalog::{Reservation, ReservationKind};
use dovetail_core::hash::json_hash;
use dovetail_core::resources::parse_units;
use serde::Serialize;

use crate::error::{api_error, AwsError, AwsResult};

/// One EBS volume of the template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Volume {
    pub device_name: String,
    pub size_gib: Option<i32>,
    pub volume_type: Option<String>,
    pub iops: Option<i32>,
    pub throughput: Option<i32>,
    pub encrypted: Option<bool>,
    pub kms_key_id: Option<String>,
    pub snapshot_id: Option<String>,
    pub delete_on_termination: Option<bool>,
}

/// Instance metadata service options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Metadata {
    pub http_endpoint: String,
    pub http_protocol_ipv6: String,
    pub hop_limit: i32,
    pub http_tokens: String,
}

/// Everything a template holds; its hash names the template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TemplateContent {
    pub image_id: String,
    /// Base64, as EC2 takes it.
    pub user_data: String,
    pub security_groups: Vec<String>,
    pub instance_profile: Option<String>,
    pub volumes: Vec<Volume>,
    pub metadata: Metadata,
    pub detailed_monitoring: bool,
    /// Set: the groups go on an explicit primary interface with this public-IP setting.
    pub associate_public_ip: Option<bool>,
    /// Set for a launch into a capacity reservation: a template per reservation (left out of the
    /// hash when unset, so the names of other templates do not change).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reservation: Option<TemplateReservation>,
}

/// The reservation a template launches into (Karpenter's launch template for reserved capacity):
/// that reservation only, and for a Capacity Block or an interruptible reservation the market
/// type EC2 requires for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TemplateReservation {
    pub id: String,
    pub kind: ReservationKind,
    pub interruptible: bool,
}

impl TemplateReservation {
    pub fn of(r: &Reservation) -> Self {
        TemplateReservation { id: r.id.clone(), kind: r.kind, interruptible: r.interruptible }
    }

    /// `InstanceMarketOptions.MarketType`: `capacity-block` for a block, `interruptible-capacity-
    /// reservation` for an interruptible ODCR, none (on-demand) otherwise.
    pub fn market_type(&self) -> Option<MarketType> {
        match (self.kind, self.interruptible) {
            (ReservationKind::CapacityBlock, _) => Some(MarketType::CapacityBlock),
            (ReservationKind::Default, true) => Some(MarketType::InterruptibleCapacityReservation),
            (ReservationKind::Default, false) => None,
        }
    }
}

impl TemplateContent {
    pub fn hash(&self) -> String {
        json_hash(&serde_json::to_value(self).expect("plain data serializes"))
    }

    /// `dovetail/<cluster>/<hash>`.
    pub fn name(&self, cluster: &str) -> String {
        format!("dovetail/{cluster}/{}", self.hash())
    }
}

/// A Kubernetes quantity of bytes (`100Gi`, `20G`, `1.5Ti`, `100e9`) in whole GiB, rounded up
/// (EBS sizes are GiB); `None` if it is no quantity, not positive, or beyond `i32` GiB.
pub fn size_gib(quantity: &str) -> Option<i32> {
    const GIB: u64 = 1 << 30;
    let bytes = u64::try_from(parse_units(quantity).ok()?).ok().filter(|b| *b > 0)?;
    i32::try_from(bytes.div_ceil(GIB)).ok()
}

fn as_text<T: Serialize>(v: &T) -> Option<String> {
    serde_json::to_value(v).ok()?.as_str().map(str::to_string)
}

/// The root device and default root volume size (GiB) of the class's family, Karpenter's
/// `DefaultBlockDeviceMappings`: Windows images boot from `/dev/sda1` and need 50 GiB, the Linux
/// ones from `/dev/xvda` with 20 GiB.
pub fn default_root(spec: &EC2NodeClassSpec) -> (&'static str, i32) {
    let family = spec.ami_family();
    // The size the planner counts ephemeral storage from, so the two never disagree.
    let gib = dovetail_core::overhead::default_root_volume_bytes(family.node_os()) >> 30;
    (family.root_device(), gib as i32)
}

/// Size of Bottlerocket's OS volume (`/dev/xvda`) when the class maps no block devices; its data
/// volume gets the default root size ([`default_root`]), which planning counts as ephemeral storage.
pub const BOTTLEROCKET_OS_VOLUME_GIB: i32 = 4;

/// The template content for a class: its disks (default: an encrypted gp3 root volume on the
/// family's root device, [`default_root`], and for Bottlerocket its data volume; a mapping without
/// a device name is the root), IMDS settings, monitoring and public-IP setting, with the given
/// image, user data
/// (plain text, encoded here), security groups and instance profile (the one the class resolved
/// to: `spec.instanceProfile`, or the one made for `spec.role`).
pub fn content(
    spec: &EC2NodeClassSpec,
    image_id: &str,
    user_data: &str,
    security_groups: &[String],
    instance_profile: Option<&str>,
) -> TemplateContent {
    use base64::Engine;
    let (root_device, root_gib) = default_root(spec);
    let mut volumes: Vec<Volume> = spec
        .block_device_mappings
        .iter()
        .map(|m| {
            let ebs = m.ebs.clone().unwrap_or_default();
            Volume {
                device_name: m.device_name.clone().unwrap_or_else(|| root_device.to_string()),
                size_gib: ebs.volume_size.as_ref().and_then(|q| size_gib(&q.0)),
                volume_type: ebs.volume_type.as_ref().and_then(as_text),
                iops: ebs.iops.and_then(|v| i32::try_from(v).ok()),
                throughput: ebs.throughput.and_then(|v| i32::try_from(v).ok()),
                encrypted: ebs.encrypted,
                kms_key_id: ebs.kms_key_id.clone(),
                snapshot_id: ebs.snapshot_id.clone(),
                delete_on_termination: ebs.delete_on_termination,
            }
        })
        .collect();
    if volumes.is_empty() {
        let default = |device: &str, gib: i32| Volume {
            device_name: device.into(),
            size_gib: Some(gib),
            volume_type: Some("gp3".into()),
            iops: None,
            throughput: None,
            encrypted: Some(true),
            kms_key_id: None,
            snapshot_id: None,
            delete_on_termination: Some(true),
        };
        let family = spec.ami_family();
        if family == AmiFamily::Bottlerocket {
            // Bottlerocket keeps its OS on a small root volume and containers, images and the
            // kubelet on a data volume (Karpenter's defaults: 4 GiB and 20 GiB).
            volumes.push(default(root_device, BOTTLEROCKET_OS_VOLUME_GIB));
            volumes.push(default(family.ephemeral_device(), root_gib));
        } else {
            volumes.push(default(root_device, root_gib));
        }
    }
    let md = &spec.metadata_options;
    let mut security_groups = security_groups.to_vec();
    security_groups.sort();
    TemplateContent {
        image_id: image_id.to_string(),
        user_data: base64::engine::general_purpose::STANDARD.encode(user_data),
        security_groups,
        instance_profile: instance_profile.map(str::to_string),
        volumes,
        metadata: Metadata {
            http_endpoint: as_text(&md.http_endpoint).unwrap_or_else(|| "enabled".into()),
            http_protocol_ipv6: as_text(&md.http_protocol_ipv6).unwrap_or_else(|| "disabled".into()),
            hop_limit: i32::try_from(md.http_put_response_hop_limit).unwrap_or(1),
            http_tokens: as_text(&md.http_tokens).unwrap_or_else(|| "required".into()),
        },
        detailed_monitoring: spec.detailed_monitoring.unwrap_or(false),
        associate_public_ip: spec.associate_public_ip_address,
        reservation: None,
    }
}

pub fn request_data(c: &TemplateContent) -> RequestLaunchTemplateData {
    let mut data = RequestLaunchTemplateData::builder()
        .image_id(&c.image_id)
        .user_data(&c.user_data)
        .monitoring(LaunchTemplatesMonitoringRequest::builder().enabled(c.detailed_monitoring).build())
        .metadata_options(
            LaunchTemplateInstanceMetadataOptionsRequest::builder()
                .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::from(c.metadata.http_endpoint.as_str()))
                .http_protocol_ipv6(LaunchTemplateInstanceMetadataProtocolIpv6::from(
                    c.metadata.http_protocol_ipv6.as_str(),
                ))
                .http_put_response_hop_limit(c.metadata.hop_limit)
                .http_tokens(LaunchTemplateHttpTokensState::from(c.metadata.http_tokens.as_str()))
                .build(),
        );
    if let Some(profile) = &c.instance_profile {
        data = data.iam_instance_profile(
            LaunchTemplateIamInstanceProfileSpecificationRequest::builder().name(profile).build(),
        );
    }
    for v in &c.volumes {
        let ebs = LaunchTemplateEbsBlockDeviceRequest::builder()
            .set_volume_size(v.size_gib)
            .set_volume_type(v.volume_type.as_deref().map(VolumeType::from))
            .set_iops(v.iops)
            .set_throughput(v.throughput)
            .set_encrypted(v.encrypted)
            .set_kms_key_id(v.kms_key_id.clone())
            .set_snapshot_id(v.snapshot_id.clone())
            .set_delete_on_termination(v.delete_on_termination)
            .build();
        data = data.block_device_mappings(
            LaunchTemplateBlockDeviceMappingRequest::builder().device_name(&v.device_name).ebs(ebs).build(),
        );
    }
    if let Some(r) = &c.reservation {
        data = data.capacity_reservation_specification(
            LaunchTemplateCapacityReservationSpecificationRequest::builder()
                .capacity_reservation_preference(CapacityReservationPreference::CapacityReservationsOnly)
                .capacity_reservation_target(
                    CapacityReservationTarget::builder().capacity_reservation_id(&r.id).build(),
                )
                .build(),
        );
        if let Some(market) = r.market_type() {
            data = data.instance_market_options(
                LaunchTemplateInstanceMarketOptionsRequest::builder().market_type(market).build(),
            );
        }
    }
    match c.associate_public_ip {
        Some(public) => {
            let nic = LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .device_index(0)
                .associate_public_ip_address(public)
                .set_groups(Some(c.security_groups.clone()))
                .build();
            data = data.network_interfaces(nic);
        }
        None => data = data.set_security_group_ids(Some(c.security_groups.clone())),
    }
    data.build()
}

/// Makes sure the template named `name` exists with `content`: looked up first, created if
/// absent; losing a creation race to another invocation is success.
pub async fn ensure(ec2: &aws_sdk_ec2::Client, name: &str, content: &TemplateContent, cluster: &str) -> AwsResult<()> {
    let found = ec2.describe_launch_templates().launch_template_names(name).send().await;
    match found {
        Ok(out) if !out.launch_templates().is_empty() => return Ok(()),
        Ok(_) => {}
        Err(e) => {
            let e = api_error("DescribeLaunchTemplates", e);
            if !matches!(&e, AwsError::Api { code: Some(c), .. } if c.starts_with("InvalidLaunchTemplateName.NotFound"))
            {
                return Err(e);
            }
        }
    }
    let created = ec2
        .create_launch_template()
        .launch_template_name(name)
        .launch_template_data(request_data(content))
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::LaunchTemplate)
                .tags(Tag::builder().key(super::TAG_CLUSTER).value(cluster).build())
                .build(),
        )
        .send()
        .await;
    match created {
        Ok(_) => Ok(()),
        Err(e) => {
            let e = api_error("CreateLaunchTemplate", e);
            match &e {
                AwsError::Api { code: Some(c), .. } if c.starts_with("InvalidLaunchTemplateName.AlreadyExists") => {
                    Ok(())
                }
                _ => Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: serde_json::Value) -> EC2NodeClassSpec {
        let mut v = serde_json::json!({
            "subnetSelectorTerms": [{"tags": {"k": "v"}}],
            "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "role": "KarpenterNodeRole-prod",
        });
        if let (Some(m), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn sizes_in_gib() {
        assert_eq!(size_gib("100Gi"), Some(100));
        assert_eq!(size_gib("1Ti"), Some(1024));
        assert_eq!(size_gib("20G"), Some(19));
        assert_eq!(size_gib("21G"), Some(20));
        // Any quantity of bytes, through the one quantity parser, rounded up to whole GiB.
        assert_eq!(size_gib("1.5Ti"), Some(1536));
        assert_eq!(size_gib("100e9"), Some(94));
        assert_eq!(size_gib("0.5Gi"), Some(1));
        assert_eq!(size_gib("1000Mi"), Some(1));
        assert_eq!(size_gib("1025Mi"), Some(2));
        assert_eq!(size_gib("10Mi"), Some(1));
        assert_eq!(size_gib("1"), Some(1));
        for none in ["", "Gi", "10GB", "0", "-1Gi", "2048Pi"] {
            assert_eq!(size_gib(none), None, "{none}");
        }
    }

    #[test]
    fn defaults_and_class_settings() {
        let c =
            content(&spec(serde_json::json!({})), "ami-1", "hello", &["sg-2".into(), "sg-1".into()], Some("prod_1"));
        assert_eq!(c.volumes.len(), 1);
        assert_eq!(c.volumes[0].size_gib, Some(20));
        assert_eq!(
            c.metadata,
            Metadata {
                http_endpoint: "enabled".into(),
                http_protocol_ipv6: "disabled".into(),
                hop_limit: 1,
                http_tokens: "required".into()
            }
        );
        assert_eq!(c.security_groups, vec!["sg-1".to_string(), "sg-2".to_string()]);
        assert_eq!(c.instance_profile.as_deref(), Some("prod_1"));
        assert_eq!(c.user_data, "aGVsbG8=");

        let custom = content(
            &spec(serde_json::json!({
                "blockDeviceMappings": [{"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "100Gi", "volumeType": "io2", "iops": 3000}}],
                "metadataOptions": {"httpTokens": "optional", "httpPutResponseHopLimit": 2},
                "detailedMonitoring": true,
            })),
            "ami-1",
            "hello",
            &[],
            None,
        );
        assert_eq!(custom.volumes[0].device_name, "/dev/xvdb");
        assert_eq!(custom.volumes[0].size_gib, Some(100));
        assert_eq!(custom.volumes[0].volume_type.as_deref(), Some("io2"));
        assert_eq!(custom.metadata.http_tokens, "optional");
        assert_eq!(custom.metadata.hop_limit, 2);
        assert!(custom.detailed_monitoring);
    }

    #[test]
    fn the_default_root_volume_is_the_familys() {
        let linux = content(&spec(serde_json::json!({})), "ami-1", "x", &[], None);
        assert_eq!((linux.volumes[0].device_name.as_str(), linux.volumes[0].size_gib), ("/dev/xvda", Some(20)));
        for alias in ["windows2019@latest", "windows2022@latest", "windows2025@latest"] {
            let s = spec(serde_json::json!({"amiSelectorTerms": [{"alias": alias}]}));
            let windows = content(&s, "ami-1", "x", &[], None);
            assert_eq!(windows.volumes.len(), 1);
            let v = &windows.volumes[0];
            assert_eq!(
                (v.device_name.as_str(), v.size_gib, v.volume_type.as_deref()),
                ("/dev/sda1", Some(50), Some("gp3"))
            );
            assert_eq!((v.encrypted, v.delete_on_termination), (Some(true), Some(true)));
        }
        // amiFamily decides over the alias; a mapping without a device name is the root.
        let s = spec(serde_json::json!({
            "amiFamily": "Windows2022",
            "amiSelectorTerms": [{"id": "ami-0123"}],
            "blockDeviceMappings": [{"ebs": {"volumeSize": "80Gi"}}],
        }));
        let v = &content(&s, "ami-1", "x", &[], None).volumes[0];
        assert_eq!((v.device_name.as_str(), v.size_gib), ("/dev/sda1", Some(80)));
    }

    #[test]
    fn bottlerocket_gets_an_os_and_a_data_volume() {
        let s = spec(serde_json::json!({"amiSelectorTerms": [{"alias": "bottlerocket@latest"}]}));
        let c = content(&s, "ami-1", "x", &[], None);
        let disks: Vec<_> = c
            .volumes
            .iter()
            .map(|v| (v.device_name.as_str(), v.size_gib, v.volume_type.as_deref(), v.encrypted))
            .collect();
        assert_eq!(
            disks,
            [("/dev/xvda", Some(4), Some("gp3"), Some(true)), ("/dev/xvdb", Some(20), Some("gp3"), Some(true))]
        );
    }

    #[test]
    fn a_reserved_template_targets_its_reservation_only() {
        let s = spec(serde_json::json!({}));
        let plain = content(&s, "ami-1", "x", &["sg-1".into()], Some("p"));
        let data = request_data(&plain);
        assert!(data.capacity_reservation_specification().is_none() && data.instance_market_options().is_none());
        let reservation = |kind, interruptible| TemplateReservation { id: "cr-0a".into(), kind, interruptible };
        for (r, market) in [
            (reservation(ReservationKind::Default, false), None),
            (reservation(ReservationKind::CapacityBlock, false), Some(MarketType::CapacityBlock)),
            (reservation(ReservationKind::Default, true), Some(MarketType::InterruptibleCapacityReservation)),
        ] {
            let reserved = TemplateContent { reservation: Some(r), ..plain.clone() };
            assert_ne!(reserved.name("prod"), plain.name("prod"), "a reservation is a template of its own");
            let data = request_data(&reserved);
            let spec = data.capacity_reservation_specification().expect("a capacity reservation specification");
            assert_eq!(
                spec.capacity_reservation_preference(),
                Some(&CapacityReservationPreference::CapacityReservationsOnly)
            );
            assert_eq!(spec.capacity_reservation_target().and_then(|t| t.capacity_reservation_id()), Some("cr-0a"));
            assert_eq!(data.instance_market_options().and_then(|m| m.market_type()), market.as_ref());
        }
        // Without a reservation the content hashes as before the field existed.
        let v = serde_json::to_value(&plain).unwrap();
        assert!(v.get("reservation").is_none());
    }

    #[test]
    fn names_follow_content() {
        let s = spec(serde_json::json!({}));
        let a = content(&s, "ami-1", "x", &["sg-1".into()], Some("p"));
        assert_eq!(a.name("prod"), content(&s, "ami-1", "x", &["sg-1".into()], Some("p")).name("prod"));
        assert_ne!(a.name("prod"), content(&s, "ami-2", "x", &["sg-1".into()], Some("p")).name("prod"));
        assert_ne!(a.name("prod"), content(&s, "ami-1", "y", &["sg-1".into()], Some("p")).name("prod"));
        // A new profile (the class switched between role and instanceProfile) is a new template.
        assert_ne!(a.name("prod"), content(&s, "ami-1", "x", &["sg-1".into()], Some("q")).name("prod"));
        assert!(a.name("prod").starts_with("dovetail/prod/"));
    }
}
