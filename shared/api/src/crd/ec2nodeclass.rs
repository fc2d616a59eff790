//! `EC2NodeClass` (`dovetail.dev/v1`): the AWS settings of the nodes a NodePool launches (AMI,
//! subnets, security groups, IAM role, kubelet, disks, IMDS). Field for field Karpenter v1's
//! `karpenter.k8s.aws/v1` `EC2NodeClass`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::KubeDuration;
use super::open_enum::open_enum;

/// AWS-specific configuration of the nodes launched by the NodePools that reference this class.
// kube repeats `type_ = ...` in each printcolumn(...), which clippy mistakes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "dovetail.dev",
    version = "v1",
    kind = "EC2NodeClass",
    plural = "ec2nodeclasses",
    singular = "ec2nodeclass",
    shortname = "ec2nc",
    shortname = "ec2ncs",
    category = "dovetail",
    status = "EC2NodeClassStatus",
    derive = "PartialEq",
    doc = "EC2NodeClass holds the AWS settings of the nodes Dovetail launches. Same fields and \
           meaning as Karpenter v1's karpenter.k8s.aws/v1 EC2NodeClass.",
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "Role", type_ = "string", json_path = ".spec.role", priority = 1)
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = super::schema::tidy)]
#[schemars(transform = super::refused::ec2nodeclass_spec)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.role) != has(self.instanceProfile)",
    "message": "must specify exactly one of ['role', 'instanceProfile']",
}]))]
pub struct EC2NodeClassSpec {
    /// Subnets to launch into; terms are ORed, the fields of one term ANDed.
    #[schemars(length(min = 1, max = 30))]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,

    /// Security groups to attach; terms are ORed, the fields of one term ANDed.
    #[schemars(length(min = 1, max = 30))]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,

    /// On-demand capacity reservations the nodes may use; terms are ORed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 30))]
    pub capacity_reservation_selector_terms: Vec<CapacityReservationSelectorTerm>,

    /// Whether instances get a public IPv4 address; unset follows the subnet's setting.
    #[serde(default, rename = "associatePublicIPAddress", skip_serializing_if = "Option::is_none")]
    pub associate_public_ip_address: Option<bool>,

    /// AMIs to use; terms are ORed. An `alias` term (`al2023@latest`) must be the only term.
    #[schemars(length(min = 1, max = 30))]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "!self.exists(t, has(t.alias)) || size(self) == 1",
        "message": "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
    }]))]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,

    /// Format of the user data and default block devices. Optional with an `alias` term (the
    /// alias implies it; otherwise it must match the alias or be `Custom`), required without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<AmiFamily>,

    /// User data merged with what Dovetail generates; its format depends on the AMI family
    /// (a nodeadm `NodeConfig` MIME part for AL2023, TOML for Bottlerocket, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,

    /// IAM role for the nodes; Dovetail manages an instance profile for it. Exactly one of
    /// `role` and `instanceProfile` must be set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub role: Option<String>,

    /// Existing instance profile for the nodes (its role must be passable by Dovetail).
    /// Exactly one of `role` and `instanceProfile` must be set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub instance_profile: Option<String>,

    /// Tags for the instances, volumes and other EC2 resources Dovetail creates. Keys Dovetail
    /// and EKS use for ownership (`kubernetes.io/cluster/*`, `eks:eks-cluster-name`,
    /// `karpenter.sh/nodepool`, `dovetail.dev/*`, ...) are refused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,

    /// Kubelet settings for the nodes; also used to compute their allocatable resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,

    /// Block devices; unset uses the AMI family's defaults (e.g. a 20Gi gp3 root volume).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50))]
    pub block_device_mappings: Vec<BlockDeviceMapping>,

    /// What to do with instance-store NVMe disks; unset leaves them alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<InstanceStorePolicy>,

    /// Whether EC2 detailed (1-minute) monitoring is enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,

    /// Instance Metadata Service exposure. Defaults keep pods away from the node's IAM
    /// credentials: endpoint enabled, IPv6 endpoint disabled, hop limit 1, tokens (IMDSv2)
    /// required.
    #[serde(default)]
    pub metadata_options: MetadataOptions,

    /// EC2 Fleet `Context` (reserved field for some AWS accounts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

/// Selects subnets by id or by tags.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.tags) || has(self.id)",
        "message": "expected at least one, got none, ['tags', 'id']",
    },
    {
        "rule": "!(has(self.id) && has(self.tags))",
        "message": "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",
    },
]))]
pub struct SubnetSelectorTerm {
    /// Tags the subnet must carry; the value `*` matches any value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 20))]
    pub tags: BTreeMap<String, String>,
    /// Subnet id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"subnet-[0-9a-z]+"))]
    pub id: Option<String>,
}

/// Selects security groups by id, by name or by tags.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.tags) || has(self.id) || has(self.name)",
        "message": "expected at least one, got none, ['tags', 'id', 'name']",
    },
    {
        "rule": "!has(self.id) || !(has(self.tags) || has(self.name))",
        "message": "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",
    },
    {
        "rule": "!has(self.name) || !(has(self.tags) || has(self.id))",
        "message": "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",
    },
]))]
pub struct SecurityGroupSelectorTerm {
    /// Tags the security group must carry; the value `*` matches any value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 20))]
    pub tags: BTreeMap<String, String>,
    /// Security group id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"sg-[0-9a-z]+"))]
    pub id: Option<String>,
    /// Security group name (the group's name, not its `Name` tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Selects capacity reservations by id, or by tags, owner and match criteria.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.tags) || has(self.id) || has(self.instanceMatchCriteria)",
        "message": "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",
    },
    {
        "rule": "!has(self.id) || !(has(self.tags) || has(self.ownerID) || has(self.instanceMatchCriteria))",
        "message": "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term",
    },
]))]
pub struct CapacityReservationSelectorTerm {
    /// Tags the reservation must carry; the value `*` matches any value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 20))]
    pub tags: BTreeMap<String, String>,
    /// Capacity reservation id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^cr-[0-9a-z]+$"))]
    pub id: Option<String>,
    /// AWS account that owns the reservation.
    #[serde(default, rename = "ownerID", skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]{12}$"))]
    pub owner_id: Option<String>,
    /// Whether the reservation accepts any matching instance (`open`) or only targeted ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_match_criteria: Option<InstanceMatchCriteria>,
}

open_enum! {
    /// Which launches a capacity reservation accepts.
    pub enum InstanceMatchCriteria {
        /// Any launch with matching attributes.
        Open = "open",
        /// Only launches that target the reservation.
        Targeted = "targeted",
    }
}

/// Selects AMIs by alias, id, name/owner, tags or SSM parameter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.tags) || has(self.id) || has(self.name) || has(self.alias) || has(self.ssmParameter)",
        "message": "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
    },
    {
        "rule": "!has(self.id) || !(has(self.alias) || has(self.tags) || has(self.name) || has(self.owner))",
        "message": "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
    },
    {
        "rule": "!has(self.alias) || !(has(self.id) || has(self.tags) || has(self.name) || has(self.owner))",
        "message": "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
    },
]))]
pub struct AmiSelectorTerm {
    /// An EKS-optimized AMI as `family@version`: family one of `al2`, `al2023`, `bottlerocket`,
    /// `windows2019`, `windows2022`, `windows2025`; version a release (`al2023@v20240625`) or
    /// `latest` (the only choice for Windows). `latest` drifts nodes whenever AWS publishes a new AMI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 30))]
    #[schemars(regex(pattern = r"^((al2|al2023|bottlerocket)@.+|(windows2019|windows2022|windows2025)@latest)$"))]
    pub alias: Option<String>,
    /// Tags the AMI must carry; the value `*` matches any value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 20))]
    pub tags: BTreeMap<String, String>,
    /// AMI id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"ami-[0-9a-z]+"))]
    pub id: Option<String>,
    /// AMI name (may contain wildcards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// AMI owner: an account id, `self`, `amazon` or `aws-marketplace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Name or ARN of an SSM parameter holding the AMI id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
}

/// An AMI alias split into family and version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AmiAlias {
    /// The family as written in the alias, e.g. `al2023`.
    pub family: String,
    /// A release such as `v20240625`, or `latest`.
    pub version: String,
}

impl AmiAlias {
    /// Alias families and the AMI family each implies.
    pub const FAMILIES: &'static [(&'static str, AmiFamily)] = &[
        ("al2", AmiFamily::Al2),
        ("al2023", AmiFamily::Al2023),
        ("bottlerocket", AmiFamily::Bottlerocket),
        ("windows2019", AmiFamily::Windows2019),
        ("windows2022", AmiFamily::Windows2022),
        ("windows2025", AmiFamily::Windows2025),
    ];

    /// Parses `family@version`, checking the family and that Windows uses `latest`.
    pub fn parse(alias: &str) -> Result<Self, String> {
        let Some((family, version)) = alias.split_once('@') else {
            return Err(format!("{alias:?} is not of the form 'family@version' (e.g. al2023@latest)"));
        };
        if family.is_empty() || version.is_empty() || version.contains('@') {
            return Err(format!("{alias:?} is not of the form 'family@version' (e.g. al2023@latest)"));
        }
        if !Self::FAMILIES.iter().any(|(f, _)| *f == family) {
            return Err(format!(
                "family {family:?} is not supported, must be one of 'al2', 'al2023', \
                 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"
            ));
        }
        if family.starts_with("windows") && version != "latest" {
            return Err(format!("{alias:?}: windows families may only use version 'latest'"));
        }
        Ok(Self { family: family.to_owned(), version: version.to_owned() })
    }

    /// The AMI family this alias implies.
    pub fn ami_family(&self) -> AmiFamily {
        Self::FAMILIES.iter().find(|(f, _)| *f == self.family).map_or(AmiFamily::Custom, |(_, family)| family.clone())
    }
}

impl EC2NodeClassSpec {
    /// The parsed alias of the (single) alias AMI term, if any and if well formed.
    pub fn alias(&self) -> Option<AmiAlias> {
        self.ami_selector_terms.iter().find_map(|t| t.alias.as_deref()).and_then(|a| AmiAlias::parse(a).ok())
    }

    /// The effective AMI family: `amiFamily` if set, else the one the alias implies, else
    /// `Custom` (validation rejects that case).
    pub fn ami_family(&self) -> AmiFamily {
        self.ami_family.clone().or_else(|| self.alias().map(|a| a.ami_family())).unwrap_or(AmiFamily::Custom)
    }
}

impl EC2NodeClassSpec {
    /// Bytes of the volume the class maps for the kubelet's ephemeral storage, Karpenter's rule:
    /// the `rootVolume` mapping's size; else for `Custom` the last mapping's; else the mapping of
    /// the family's [`AmiFamily::ephemeral_device`]. `None` when no mapping sizes it (the image's
    /// default root volume then), or the size is no quantity (validation refuses that).
    pub fn ephemeral_volume_bytes(&self) -> Option<i64> {
        let mappings = &self.block_device_mappings;
        let family = self.ami_family();
        let mapping = mappings.iter().find(|m| m.root_volume).or_else(|| match family {
            AmiFamily::Custom => mappings.last(),
            _ => mappings.iter().find(|m| m.device_name.as_deref() == Some(family.ephemeral_device())),
        })?;
        let size = mapping.ebs.as_ref()?.volume_size.as_ref()?;
        dovetail_core::resources::parse_units(&size.0).ok()
    }
}

impl EC2NodeClass {
    /// See [`EC2NodeClassSpec::alias`].
    pub fn alias(&self) -> Option<AmiAlias> {
        self.spec.alias()
    }

    /// See [`EC2NodeClassSpec::ami_family`].
    pub fn ami_family(&self) -> AmiFamily {
        self.spec.ami_family()
    }
}

impl AmiFamily {
    /// The OS the family's images run: Windows for the Windows families, Linux for every other,
    /// `Custom` included (as Karpenter reads a Custom class: the image is the user's).
    pub fn node_os(&self) -> dovetail_core::model::NodeOs {
        use dovetail_core::model::NodeOs;
        match self {
            AmiFamily::Windows2019 => NodeOs::Windows2019,
            AmiFamily::Windows2022 => NodeOs::Windows2022,
            AmiFamily::Windows2025 => NodeOs::Windows2025,
            _ => NodeOs::Linux,
        }
    }

    /// The device the family's images boot from (Karpenter's default block device mapping):
    /// `/dev/sda1` on Windows, `/dev/xvda` on Linux.
    pub fn root_device(&self) -> &'static str {
        if self.node_os().is_windows() {
            "/dev/sda1"
        } else {
            "/dev/xvda"
        }
    }

    /// The device the kubelet's ephemeral storage lives on when no mapping says `rootVolume`
    /// (Karpenter's `EphemeralBlockDevice`): Bottlerocket's data volume `/dev/xvdb`, else the
    /// root device.
    pub fn ephemeral_device(&self) -> &'static str {
        if *self == AmiFamily::Bottlerocket {
            "/dev/xvdb"
        } else {
            self.root_device()
        }
    }

    /// Why the family should not be used any more, for the class's status and `dovetail import`.
    pub fn deprecation(&self) -> Option<&'static str> {
        (*self == AmiFamily::Al2).then_some(
            "AWS has deprecated AL2: it publishes no EKS-optimized AL2 images for Kubernetes 1.33 or later, so \
             nodes of this class launch only while the cluster's version has them. Move to alias al2023@latest \
             (rewrite userData as nodeadm configuration if it configures the kubelet)",
        )
    }
}

open_enum! {
    /// The OS image family, which sets the user-data format and default block devices.
    pub enum AmiFamily {
        /// Amazon Linux 2.
        Al2 = "AL2",
        /// Amazon Linux 2023 (nodeadm user data).
        Al2023 = "AL2023",
        /// Bottlerocket (TOML user data).
        Bottlerocket = "Bottlerocket",
        /// Any AMI; user data is passed through as given.
        Custom = "Custom",
        /// Windows Server 2019.
        Windows2019 = "Windows2019",
        /// Windows Server 2022.
        Windows2022 = "Windows2022",
        /// Windows Server 2025.
        Windows2025 = "Windows2025",
    }
}

/// Kubelet settings: a subset of the upstream `KubeletConfiguration`, with its field names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.imageGCHighThresholdPercent) || !has(self.imageGCLowThresholdPercent) || self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent",
    "message": "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
}]))]
pub struct KubeletConfiguration {
    /// Cluster DNS server addresses.
    #[serde(default, rename = "clusterDNS", skip_serializing_if = "Vec::is_empty")]
    pub cluster_dns: Vec<String>,
    /// Maximum pods per node, overriding the ENI-based limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_pods: Option<i32>,
    /// Maximum pods per CPU core; the lower of this and `maxPods` applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub pods_per_core: Option<i32>,
    /// Resources reserved for the OS (`cpu`, `memory`, `ephemeral-storage`, `pid`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub system_reserved: BTreeMap<String, String>,
    /// Resources reserved for Kubernetes daemons (`cpu`, `memory`, `ephemeral-storage`, `pid`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kube_reserved: BTreeMap<String, String>,
    /// Hard eviction thresholds by signal (`memory.available: 100Mi`, `nodefs.available: 10%`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_hard: BTreeMap<String, String>,
    /// Soft eviction thresholds by signal; each needs a grace period.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_soft: BTreeMap<String, String>,
    /// Grace period of each soft eviction threshold.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_soft_grace_period: BTreeMap<String, KubeDuration>,
    /// Longest pod termination grace period (seconds) honoured on soft eviction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i32>,
    /// Disk usage percentage above which image garbage collection always runs.
    #[serde(default, rename = "imageGCHighThresholdPercent", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_high_threshold_percent: Option<i32>,
    /// Disk usage percentage image garbage collection frees down to.
    #[serde(default, rename = "imageGCLowThresholdPercent", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_low_threshold_percent: Option<i32>,
    /// Whether CPU limits are enforced with CFS quota.
    #[serde(default, rename = "cpuCFSQuota", skip_serializing_if = "Option::is_none")]
    pub cpu_cfs_quota: Option<bool>,
}

/// A block device of the launched instances.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    /// Device name, e.g. `/dev/xvda`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// EBS volume settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "has(self.snapshotID) || has(self.volumeSize)",
        "message": "snapshotID or volumeSize must be defined",
    }]))]
    pub ebs: Option<BlockDevice>,
    /// Whether this device holds the kubelet root directory (at most one may).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub root_volume: bool,
}

/// EBS volume parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDevice {
    /// Whether the volume is deleted with the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    /// Whether the volume is encrypted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    /// Provisioned IOPS (io1, io2, gp3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    /// KMS key (id, alias or ARN) for encryption.
    #[serde(default, rename = "kmsKeyID", skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    /// Snapshot to create the volume from.
    #[serde(default, rename = "snapshotID", skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
    /// Throughput in MiB/s (gp3, 125-1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    /// Size in `Gi`, `G`, `Ti` or `T`, e.g. `100Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "volume_size_schema")]
    pub volume_size: Option<Quantity>,
    /// EBS volume type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<VolumeType>,
}

fn volume_size_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    // Karpenter types the size as a string whose units are limited to what EBS accepts.
    schemars::json_schema!({
        "type": "string",
        "pattern": "^[0-9]+(Gi|G|Ti|T)$",
    })
}

open_enum! {
    /// EBS volume types.
    pub enum VolumeType {
        /// Magnetic (previous generation).
        Standard = "standard",
        /// Provisioned IOPS SSD.
        Io1 = "io1",
        /// Provisioned IOPS SSD, second generation.
        Io2 = "io2",
        /// General purpose SSD.
        Gp2 = "gp2",
        /// Cold HDD.
        Sc1 = "sc1",
        /// Throughput-optimized HDD.
        St1 = "st1",
        /// General purpose SSD, third generation.
        Gp3 = "gp3",
    }
}

open_enum! {
    /// Handling of instance-store NVMe disks.
    pub enum InstanceStorePolicy {
        /// Stripe all instance-store disks into one RAID-0 array for containerd and kubelet.
        Raid0 = "RAID0",
    }
}

/// Instance Metadata Service options of the launched instances.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    /// Whether the metadata endpoint is reachable at all.
    #[serde(default = "enabled")]
    pub http_endpoint: EndpointState,
    /// Whether the IPv6 metadata endpoint is enabled.
    #[serde(default = "disabled", rename = "httpProtocolIPv6")]
    pub http_protocol_ipv6: EndpointState,
    /// Hops a metadata response may travel; 1 keeps it away from pods on overlay networks.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 64))]
    pub http_put_response_hop_limit: i64,
    /// Whether session tokens (IMDSv2) are required.
    #[serde(default)]
    pub http_tokens: HttpTokens,
}

impl Default for MetadataOptions {
    fn default() -> Self {
        Self {
            http_endpoint: enabled(),
            http_protocol_ipv6: disabled(),
            http_put_response_hop_limit: one(),
            http_tokens: HttpTokens::default(),
        }
    }
}

open_enum! {
    /// Enabled or disabled.
    pub enum EndpointState {
        /// On.
        Enabled = "enabled",
        /// Off.
        Disabled = "disabled",
    }
}

open_enum! {
    /// IMDS session token requirement.
    #[derive(Default)]
    pub enum HttpTokens {
        /// IMDSv2 only.
        #[default]
        Required = "required",
        /// IMDSv1 and IMDSv2.
        Optional = "optional",
    }
}

fn enabled() -> EndpointState {
    EndpointState::Enabled
}

fn disabled() -> EndpointState {
    EndpointState::Disabled
}

fn one() -> i64 {
    1
}

/// Observed state of an EC2NodeClass: what its selectors currently resolve to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = super::schema::tidy)]
pub struct EC2NodeClassStatus {
    /// Subnets the subnet selectors resolve to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<Subnet>,
    /// Security groups the security group selectors resolve to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<SecurityGroup>,
    /// Capacity reservations the reservation selectors resolve to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservations: Vec<CapacityReservation>,
    /// AMIs the AMI selectors resolve to, with the instance requirements each one suits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amis: Vec<Ami>,
    /// Instance profile used for `role`, or the one given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// Health and readiness (`Ready`, `SubnetsReady`, `AMIsReady`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A resolved subnet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subnet {
    /// Subnet id.
    pub id: String,
    /// Availability zone name.
    pub zone: String,
    /// Availability zone id.
    #[serde(default, rename = "zoneID", skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
}

/// A resolved security group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecurityGroup {
    /// Security group id.
    pub id: String,
    /// Security group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A resolved AMI.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Ami {
    /// AMI id.
    pub id: String,
    /// Whether AWS has deprecated the AMI.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deprecated: bool,
    /// AMI name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Instance requirements the AMI suits (architecture, GPU or not, ...).
    pub requirements: Vec<NodeSelectorRequirement>,
}

/// A resolved capacity reservation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservation {
    /// Zone of the reservation.
    pub availability_zone: String,
    /// When the reservation ends, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
    /// Reservation id.
    pub id: String,
    /// `open` or `targeted`.
    pub instance_match_criteria: InstanceMatchCriteria,
    /// Instance type reserved.
    pub instance_type: String,
    /// Whether EC2 may take its instances back before it ends (an interruptible reservation).
    // Written when false too, as Karpenter's status writes it.
    #[serde(default)]
    pub interruptible: bool,
    /// Owning account.
    #[serde(rename = "ownerID")]
    pub owner_id: String,
    /// `default` or `capacity-block`.
    #[serde(default = "default_reservation_type")]
    pub reservation_type: String,
    /// `active` or `expiring`.
    #[serde(default = "default_reservation_state")]
    pub state: String,
}

fn default_reservation_type() -> String {
    "default".to_owned()
}

fn default_reservation_state() -> String {
    "active".to_owned()
}
