//! Launch templates and CreateFleet against moto: templates reused by content, the fleet's tags
//! and token, a second launch for the same claim finding the first instance, termination, and a
//! launch into a capacity reservation.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use dovetail_aws::ec2::{TAG_CLUSTER, TAG_NODECLAIM, TAG_NODECLASS, TAG_NODEPOOL};
use dovetail_aws::Ec2Cloud;
use dovetail_core::catalog::CapacityType;
use dovetail_core::catalog::Offer;
use dovetail_core::cluster::ResolvedClass;
use dovetail_core::model::{NodeClass, Taint, TaintEffect};
use dovetail_core::nodeclaim::NodeClaim;
use dovetail_core::reconcile::ports::{Cloud, LaunchOutcome, LaunchRequest};
use dovetail_core::time::Time;

use super::{example, World, CLUSTER, DISCOVERY, K8S_VERSION, NODE_ROLE, SSM_PREFIX};

fn offer(t: &str, zone: &str, capacity_type: CapacityType, price: f64) -> Offer {
    Offer { instance_type: t.into(), zone: zone.into(), capacity_type, price, reservation: None }
}

async fn template_names(world: &World) -> Vec<String> {
    let out = world.clients.ec2.describe_launch_templates().send().await.unwrap();
    let mut names: Vec<String> =
        out.launch_templates().iter().filter_map(|t| t.launch_template_name()).map(str::to_string).collect();
    names.sort();
    names
}

/// The world's network and images, an adapter, and the example class as it resolves there.
async fn example_class(world: &World) -> (Ec2Cloud, NodeClass, ResolvedClass) {
    world.network().await;
    world.images().await;
    let cloud = world.cloud();
    let nodeclass = example().nodeclasses.remove(0);
    let resolved = cloud.resolve(&nodeclass).await.unwrap();
    (cloud, nodeclass, resolved)
}

#[tokio::test]
async fn launch_tags_reuses_templates_finds_and_terminates() {
    let world = World::new().await;
    let net = world.network().await;
    let (_, arm64) = world.images().await;
    let cloud = world.cloud();
    let mut nodeclass = example().nodeclasses.remove(0);
    nodeclass.tags = BTreeMap::from([("team".to_string(), "payments".to_string())]);
    let resolved = cloud.resolve(&nodeclass).await.unwrap();

    let mut claim = NodeClaim::launching("default-abc12", "default", "default", Time::from_secs(1));
    claim.labels.insert("team".into(), "payments".into());
    // What a plan puts on a claim: its cheapest candidate's labels, which must not reach the
    // template (the fleet may pick another type or zone).
    claim.labels.insert("node.kubernetes.io/instance-type".into(), "m6g.large".into());
    claim.labels.insert("dovetail.dev/nodeclaim".into(), "default-abc12".into());
    let request = LaunchRequest {
        claim: claim.clone(),
        class: nodeclass.clone(),
        resolved: resolved.clone(),
        offers: vec![
            // Cheapest first after sorting; us-east-1c has no subnet of the class.
            offer("m6g.large", "us-east-1c", CapacityType::Spot, 0.01),
            offer("m6g.xlarge", "us-east-1b", CapacityType::Spot, 0.05),
            offer("m6g.large", "us-east-1a", CapacityType::Spot, 0.03),
        ],
    };
    let LaunchOutcome::Launched(launch) = cloud.launch(&request).await.unwrap() else { panic!("no capacity?") };
    // moto takes the first override: the cheapest offer in a zone with a subnet.
    assert_eq!((launch.instance_type.as_str(), launch.zone.as_str()), ("m6g.large", "us-east-1a"));
    assert_eq!(launch.subnet_id, net.big_a);
    assert_eq!(launch.image_id, arm64);
    assert_eq!(launch.capacity_type, CapacityType::Spot);
    assert_eq!(launch.price, 0.03);
    assert_eq!(launch.security_groups, vec![net.tagged_sg.clone()]);

    // Tags on the instance (and its volumes).
    let described = world.clients.ec2.describe_instances().instance_ids(&launch.instance_id).send().await.unwrap();
    let instance = &described.reservations()[0].instances()[0];
    let tags: BTreeMap<&str, &str> = instance.tags().iter().map(|t| (t.key().unwrap(), t.value().unwrap())).collect();
    assert_eq!(tags.get(TAG_CLUSTER), Some(&CLUSTER));
    assert_eq!(tags.get(TAG_NODEPOOL), Some(&"default"));
    // What the sweeper's instance-profile clean-up counts the class's instances by.
    assert_eq!(tags.get(TAG_NODECLASS), Some(&"default"));
    assert_eq!(tags.get(TAG_NODECLAIM), Some(&"default-abc12"));
    assert_eq!(tags.get("Name"), Some(&"default-abc12"));
    assert_eq!(tags.get("team"), Some(&"payments"));
    assert_eq!(instance.instance_lifecycle().map(|l| l.as_str()), Some("spot"));

    // One template for the arm64 image and m6g.large's / m6g.xlarge's maxPods each; reused.
    let templates = template_names(&world).await;
    assert_eq!(templates.len(), 2, "{templates:?}");
    assert!(templates.iter().all(|n| n.starts_with(&format!("dovetail/{CLUSTER}/"))));
    let version =
        world.clients.ec2.describe_launch_template_versions().launch_template_name(&templates[0]).send().await.unwrap();
    let data = version.launch_template_versions()[0].launch_template_data().unwrap();
    assert_eq!(data.image_id(), Some(arm64.as_str()));
    let user_data = String::from_utf8(STANDARD.decode(data.user_data().unwrap()).unwrap()).unwrap();
    assert!(user_data.contains("Content-Type: application/node.eks.aws"), "{user_data}");
    assert!(user_data.contains("--register-with-taints=dovetail.dev/unregistered:NoExecute"), "{user_data}");
    assert!(user_data.contains("dovetail.dev/nodepool=default") && user_data.contains("team=payments"), "{user_data}");
    assert!(!user_data.contains("instance-type") && !user_data.contains("default-abc12"), "{user_data}");
    assert!(
        user_data.contains(&format!("name: {CLUSTER}")) && user_data.contains("cidr: 10.100.0.0/16"),
        "{user_data}"
    );

    // The same claim again (redelivery, crash after CreateFleet): the same instance, no new one.
    let LaunchOutcome::Launched(again) = cloud.launch(&request).await.unwrap() else { panic!() };
    assert_eq!(again.instance_id, launch.instance_id);
    let found = cloud.find_launched("default-abc12").await.unwrap().unwrap();
    assert_eq!(
        (found.instance_id.as_str(), found.zone.as_str(), found.subnet_id.as_str()),
        (launch.instance_id.as_str(), "us-east-1a", net.big_a.as_str())
    );
    assert_eq!(found.capacity_type, CapacityType::Spot);
    assert_eq!(cloud.find_launched("default-other").await.unwrap(), None);

    // A fresh adapter (a new Lambda container) reuses the templates by name, for another claim and
    // another capacity type too: their content is the pool's, not the claim's.
    let mut other = claim.clone();
    other.name = "default-def34".into();
    other.labels.insert("dovetail.dev/nodeclaim".into(), "default-def34".into());
    other.labels.insert("node.kubernetes.io/instance-type".into(), "m6g.xlarge".into());
    let on_demand = LaunchRequest {
        claim: other,
        offers: vec![offer("m6g.large", "us-east-1b", CapacityType::OnDemand, 0.077)],
        ..request.clone()
    };
    let fresh = world.cloud();
    let LaunchOutcome::Launched(second) = fresh.launch(&on_demand).await.unwrap() else { panic!() };
    assert_eq!(second.capacity_type, CapacityType::OnDemand);
    assert_eq!(second.subnet_id, net.b);
    assert_eq!(template_names(&world).await, templates, "same content, same templates");

    // Changed content (the class's user data): a new template.
    let mut changed = on_demand.clone();
    changed.claim = NodeClaim::launching("default-ghi56", "default", "default", Time::from_secs(3));
    changed.class.spec["userData"] = "#!/bin/bash\necho extra\n".into();
    let LaunchOutcome::Launched(_) = fresh.launch(&changed).await.unwrap() else { panic!() };
    assert_eq!(template_names(&world).await.len(), 3);

    // Instances of the cluster, then termination (twice: already terminating is success).
    let instances = cloud.instances().await.unwrap();
    let ids: Vec<&str> = instances.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(ids.contains(&launch.instance_id.as_str()));
    let first = instances.iter().find(|i| i.id == launch.instance_id).unwrap();
    assert_eq!(first.tags.get(TAG_NODECLAIM).map(String::as_str), Some("default-abc12"));
    assert_eq!(first.state, "running");

    cloud.terminate(&launch.instance_id).await.unwrap();
    cloud.terminate(&launch.instance_id).await.unwrap();
    cloud.terminate("i-0123456789abcdef0").await.unwrap();
    assert_eq!(cloud.find_launched("default-abc12").await.unwrap(), None, "a terminated instance stands for nothing");
    let state = cloud.instances().await.unwrap().into_iter().find(|i| i.id == launch.instance_id).unwrap().state;
    assert!(state == "shutting-down" || state == "terminated", "{state}");
}

/// A reserved launch (issue 20): CreateFleet into the one reservation the offer names, through a
/// launch template of its own that targets it (`capacity-reservations-only`), on-demand for an
/// On-Demand Capacity Reservation. moto has no capacity-reservation API (the listing is tested
/// against a test double in shared/aws) but takes the template and the fleet as EC2 would.
#[tokio::test]
async fn a_reserved_launch_targets_its_reservation_through_its_own_template() {
    use dovetail_core::catalog::{Reservation, ReservationKind};
    let world = World::new().await;
    let (cloud, nodeclass, resolved) = example_class(&world).await;
    // moto has no capacity reservations of its own: the launcher's CapacityReservationsTestDouble
    // holds this one, and refuses a launch into a reservation it does not know.
    let created = world
        .clients
        .ec2
        .create_capacity_reservation()
        .instance_type("m6g.large")
        .instance_platform(aws_sdk_ec2::types::CapacityReservationInstancePlatform::LinuxUnix)
        .availability_zone("us-east-1a")
        .instance_count(2)
        .instance_match_criteria(aws_sdk_ec2::types::InstanceMatchCriteria::Targeted)
        .send()
        .await
        .unwrap();
    let id = created.capacity_reservation().and_then(|r| r.capacity_reservation_id()).unwrap().to_string();
    let reservation = Reservation {
        id: id.clone(),
        instance_type: "m6g.large".into(),
        zone: "us-east-1a".into(),
        owner_id: "123456789012".into(),
        instance_match_criteria: "targeted".into(),
        kind: ReservationKind::Default,
        interruptible: false,
        available: 2,
        observed_at: Time::from_secs(1),
        end: None,
    };
    let reserved = Offer {
        reservation: Some(reservation.clone()),
        ..offer("m6g.large", "us-east-1a", CapacityType::Reserved, 0.077 / 10_000_000.0)
    };
    let request = LaunchRequest {
        claim: NodeClaim::launching("default-res01", "default", "default", Time::from_secs(1)),
        class: nodeclass.clone(),
        resolved: resolved.clone(),
        offers: vec![reserved.clone()],
    };
    let LaunchOutcome::Launched(launch) = cloud.launch(&request).await.unwrap() else { panic!("no capacity?") };
    assert_eq!(launch.capacity_type, CapacityType::Reserved);
    assert_eq!((launch.instance_type.as_str(), launch.zone.as_str()), ("m6g.large", "us-east-1a"));
    let described = world.clients.ec2.describe_instances().instance_ids(&launch.instance_id).send().await.unwrap();
    let instance = &described.reservations()[0].instances()[0];
    assert_ne!(instance.instance_lifecycle().map(|l| l.as_str()), Some("spot"));

    let templates = template_names(&world).await;
    assert_eq!(templates.len(), 1, "{templates:?}");
    let version =
        world.clients.ec2.describe_launch_template_versions().launch_template_name(&templates[0]).send().await.unwrap();
    let data = version.launch_template_versions()[0].launch_template_data().unwrap();
    let spec = data.capacity_reservation_specification().expect("the template targets the reservation");
    assert_eq!(spec.capacity_reservation_preference().map(|p| p.as_str()), Some("capacity-reservations-only"));
    assert_eq!(spec.capacity_reservation_target().and_then(|t| t.capacity_reservation_id()), Some(id.as_str()));
    assert!(data.instance_market_options().is_none(), "an ODCR launches as on-demand");

    // The same class's on-demand launch uses another template, without the reservation.
    let on_demand = LaunchRequest {
        claim: NodeClaim::launching("default-od01", "default", "default", Time::from_secs(2)),
        offers: vec![offer("m6g.large", "us-east-1a", CapacityType::OnDemand, 0.077)],
        ..request.clone()
    };
    let LaunchOutcome::Launched(plain) = cloud.launch(&on_demand).await.unwrap() else { panic!() };
    assert_eq!(plain.capacity_type, CapacityType::OnDemand);
    assert_eq!(template_names(&world).await.len(), 2);

    // Reserved offers that name no reservation are refused before anything is asked of EC2.
    let nameless = LaunchRequest {
        claim: NodeClaim::launching("default-res02", "default", "default", Time::from_secs(3)),
        offers: vec![Offer { reservation: None, ..reserved }],
        ..request
    };
    assert!(cloud.launch(&nameless).await.is_err());
}

/// `amiFamily: Custom`, as Karpenter defines it: the class's user data reaches the instance as
/// written, with no bootstrap of Dovetail's added (the image joins the node itself).
#[tokio::test]
async fn a_custom_family_class_launches_with_its_user_data_unchanged() {
    let world = World::new().await;
    let (cloud, nodeclass, resolved) = example_class(&world).await;
    let script =
        "#!/bin/bash\n/opt/bootstrap --cluster demo --register-with-taints=dovetail.dev/unregistered:NoExecute\n";
    let mut class = nodeclass.clone();
    class.spec["amiFamily"] = "Custom".into();
    class.spec["userData"] = script.into();
    let request = LaunchRequest {
        claim: NodeClaim::launching("default-cus01", "default", "default", Time::from_secs(1)),
        class,
        resolved,
        offers: vec![offer("m6g.large", "us-east-1a", CapacityType::OnDemand, 0.077)],
    };
    let LaunchOutcome::Launched(launch) = cloud.launch(&request).await.unwrap() else { panic!("no capacity?") };
    assert_eq!(launch.instance_type, "m6g.large");
    let templates = template_names(&world).await;
    assert_eq!(templates.len(), 1, "{templates:?}");
    let version =
        world.clients.ec2.describe_launch_template_versions().launch_template_name(&templates[0]).send().await.unwrap();
    let data = version.launch_template_versions()[0].launch_template_data().unwrap();
    let user_data = String::from_utf8(STANDARD.decode(data.user_data().unwrap()).unwrap()).unwrap();
    assert_eq!(user_data, script, "passed unchanged: no MIME document, no NodeConfig");
}

/// `al2@latest`: resolved from AL2's SSM parameters while AWS publishes them, launched with AL2's
/// bootstrap (`/etc/eks/bootstrap.sh`) after the class's own script; on a cluster version with no
/// AL2 image published the class is refused with what is missing.
#[tokio::test]
async fn an_al2_alias_resolves_and_bootstraps_with_bootstrap_sh() {
    let world = World::new().await;
    world.network().await;
    let (_, arm64) = world.images().await;
    let name =
        format!("{SSM_PREFIX}/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2-arm64/recommended/image_id");
    world
        .clients
        .ssm
        .put_parameter()
        .name(&name)
        .value(&arm64)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .unwrap();
    let cloud = world.cloud();
    let mut class = example().nodeclasses.remove(0);
    class.spec["amiSelectorTerms"] = serde_json::json!([{"alias": "al2@latest"}]);
    class.spec["userData"] = "#!/bin/bash\necho before-join\n".into();
    let resolved = cloud.resolve(&class).await.unwrap();
    assert_eq!(resolved.images, BTreeMap::from([("arm64".to_string(), arm64.clone())]), "AL2 publishes per arch");
    let request = LaunchRequest {
        claim: NodeClaim::launching("default-al201", "default", "default", Time::from_secs(1)),
        class: class.clone(),
        resolved,
        offers: vec![offer("m6g.large", "us-east-1a", CapacityType::OnDemand, 0.077)],
    };
    let LaunchOutcome::Launched(launch) = cloud.launch(&request).await.unwrap() else { panic!("no capacity?") };
    assert_eq!(launch.image_id, arm64);
    let templates = template_names(&world).await;
    let version =
        world.clients.ec2.describe_launch_template_versions().launch_template_name(&templates[0]).send().await.unwrap();
    let data = version.launch_template_versions()[0].launch_template_data().unwrap();
    let user_data = String::from_utf8(STANDARD.decode(data.user_data().unwrap()).unwrap()).unwrap();
    let parts = dovetail_aws::ec2::userdata::user_parts(&user_data).unwrap();
    assert_eq!(parts.len(), 2, "{user_data}");
    assert_eq!(parts[0].body.trim_end(), "#!/bin/bash\necho before-join");
    let bootstrap = parts[1].body.lines().find(|l| l.starts_with("/etc/eks/bootstrap.sh ")).expect(&user_data);
    assert!(bootstrap.starts_with(&format!("/etc/eks/bootstrap.sh '{CLUSTER}' --apiserver-endpoint ")), "{bootstrap}");
    assert!(bootstrap.contains("--register-with-taints=dovetail.dev/unregistered:NoExecute"), "{bootstrap}");
    assert!(bootstrap.contains("--node-labels=") && bootstrap.contains("dovetail.dev/nodepool=default"), "{bootstrap}");
    assert!(!user_data.contains("node.eks.aws"), "no nodeadm NodeConfig for AL2:\n{user_data}");

    // A cluster version AWS publishes no AL2 image for: refused, saying what is missing.
    let mut newer = class.clone();
    newer.name = "newer".into();
    newer.spec["amiSelectorTerms"] = serde_json::json!([{"alias": "al2@v20990101"}]);
    let r = cloud.resolve(&newer).await.expect("an alias with no image is no failed lookup");
    assert!(r.images.is_empty(), "resolved an AL2 release nobody published: {r:?}");
    let m = r.images_problem.clone().unwrap_or_default();
    assert!(m.contains("AWS publishes no such image") && m.contains("amazon-eks-arm64-node-"), "{m}");
}

/// A Windows class (`windows2022@latest`): resolved from the Windows EKS image's SSM parameter,
/// amd64 only; launched with Karpenter's PowerShell bootstrap (the class's script first) and a
/// 50 GiB `/dev/sda1` root volume. A Windows alias for a Kubernetes version AWS publishes no image
/// for is refused with the field, the alias and the parameter, and other classes still resolve.
#[tokio::test]
async fn a_windows_alias_resolves_and_bootstraps_with_powershell() {
    use dovetail_aws::ec2::userdata::windows_bootstrap_args;
    use dovetail_tests::moto::fixtures;

    let world = World::new().await;
    world.network().await;
    world.images().await;
    let windows = world.windows_image("2022", K8S_VERSION).await;
    // 2019's image only for an older Kubernetes: none for the cluster's.
    assert_eq!(world.windows_image("2019", "1.30").await, windows);
    let cloud = world.cloud();
    // Converted as the functions convert it: the alias makes its kubelet settings Windows'.
    let windows_class = |name: &str, alias: &str| {
        let class: dovetail_api::crd::EC2NodeClass = serde_yaml_ng::from_str(&format!(
            "apiVersion: dovetail.dev/v1
kind: EC2NodeClass
metadata: {{name: {name}}}
spec:
  role: {NODE_ROLE}
  amiSelectorTerms: [{{alias: {alias}}}]
  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {CLUSTER}}}}}]
  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {CLUSTER}}}}}]
  kubelet: {{clusterDNS: [10.100.0.10]}}
  userData: |
    Write-Host \"before join\"
"
        ))
        .unwrap();
        class.to_core().unwrap()
    };
    let class = windows_class("windows", "windows2022@latest");
    assert!(class.kubelet.os.is_windows());
    let resolved = cloud.resolve(&class).await.unwrap();
    assert_eq!(resolved.images, BTreeMap::from([("amd64".to_string(), windows.clone())]), "Windows is amd64 only");

    let mut claim = NodeClaim::launching("windows-win01", "windows", "windows", Time::from_secs(1));
    claim.labels.insert("team".into(), "dotnet".into());
    let request = LaunchRequest {
        claim,
        class: class.clone(),
        resolved,
        offers: vec![offer("m5.large", "us-east-1a", CapacityType::OnDemand, 0.188)],
    };
    let LaunchOutcome::Launched(launch) = cloud.launch(&request).await.unwrap() else { panic!("no capacity?") };
    assert_eq!((launch.image_id.as_str(), launch.instance_type.as_str()), (windows.as_str(), "m5.large"));
    let templates = template_names(&world).await;
    assert_eq!(templates.len(), 1, "{templates:?}");
    let version =
        world.clients.ec2.describe_launch_template_versions().launch_template_name(&templates[0]).send().await.unwrap();
    let data = version.launch_template_versions()[0].launch_template_data().unwrap();
    let disks: Vec<(&str, Option<i32>, Option<&str>)> = data
        .block_device_mappings()
        .iter()
        .map(|m| {
            let ebs = m.ebs();
            (
                m.device_name().unwrap_or_default(),
                ebs.and_then(|e| e.volume_size()),
                ebs.and_then(|e| e.volume_type()).map(|t| t.as_str()),
            )
        })
        .collect();
    assert_eq!(disks, vec![("/dev/sda1", Some(50), Some("gp3"))], "Windows' root device and size");
    let user_data = String::from_utf8(STANDARD.decode(data.user_data().unwrap()).unwrap()).unwrap();
    assert!(user_data.starts_with("<powershell>\nWrite-Host \"before join\"\n"), "{user_data}");
    assert!(!user_data.contains("MIME-Version") && !user_data.contains("node.eks.aws"), "{user_data}");
    let args = windows_bootstrap_args(&user_data).expect(&user_data);
    assert_eq!(args["EKSClusterName"], CLUSTER);
    assert_eq!(args["APIServerEndpoint"], World::facts().endpoint);
    assert_eq!(args["DNSClusterIP"], "10.100.0.10");
    let kubelet: Vec<&str> = args["KubeletExtraArgs"].split(' ').collect();
    assert!(kubelet.contains(&"--register-with-taints=dovetail.dev/unregistered:NoExecute"), "{kubelet:?}");
    let labels = kubelet.iter().find_map(|a| a.strip_prefix("--node-labels=")).expect("node labels");
    assert!(
        labels.split(',').any(|l| l == "team=dotnet") && labels.contains("dovetail.dev/nodepool=windows"),
        "{labels}"
    );
    // Windows' pod density is the kubelet's 110, not m5.large's ENI limit (29).
    assert!(kubelet.contains(&"--max-pods=110"), "{kubelet:?}");

    // windows2019 on a Kubernetes version it has no image for: no image, its AMIsReady naming
    // what is missing, and the rest of the class resolved.
    let r = cloud.resolve(&windows_class("windows-2019", "windows2019@latest")).await.expect("no failed lookup");
    assert!(r.images.is_empty() && !r.subnets.is_empty(), "resolved a Windows image nobody published: {r:?}");
    let missing = r.missing();
    assert_eq!(missing.len(), 1, "{missing:?}");
    let (condition, m) = &missing[0];
    assert_eq!(*condition, dovetail_core::cluster::AMIS_READY);
    let parameter = fixtures::windows_parameter(SSM_PREFIX, "2019", K8S_VERSION);
    assert!(
        m.contains("amiSelectorTerms")
            && m.contains("windows2019@latest")
            && m.contains(&format!("Kubernetes {K8S_VERSION}"))
            && m.contains(&parameter),
        "{m}"
    );
    // The other classes carry on.
    assert_eq!(cloud.resolve(&class).await.unwrap().images.len(), 1);
    assert_eq!(cloud.resolve(&example().nodeclasses.remove(0)).await.unwrap().images.len(), 2);
}

/// Images of moto's that are x86_64 Linux, other than `but`: stand-ins for the GPU and Neuron
/// builds (moto launches only images it has).
async fn other_amd64_images(world: &World, but: &str, count: usize) -> Vec<String> {
    let all = world.clients.ec2.describe_images().owners("amazon").send().await.unwrap();
    let found: Vec<String> = all
        .images()
        .iter()
        .filter(|i| i.architecture().map(|a| a.as_str()) == Some("x86_64"))
        .filter(|i| i.platform().map(|p| p.as_str()) != Some("windows"))
        .filter_map(|i| i.image_id())
        .filter(|id| *id != but)
        .map(str::to_string)
        .take(count)
        .collect();
    assert_eq!(found.len(), count, "moto has {count} more x86_64 Linux images");
    found
}

/// The launch template whose image is `image` (each test's templates have one image each), read
/// back: its user data (decoded) and disks (device, GiB).
async fn template_with_image(world: &World, image: &str) -> (String, Vec<(String, Option<i32>)>) {
    for name in template_names(world).await {
        let versions =
            world.clients.ec2.describe_launch_template_versions().launch_template_name(&name).send().await.unwrap();
        let data = versions.launch_template_versions()[0].launch_template_data().unwrap();
        if data.image_id() != Some(image) {
            continue;
        }
        let user_data = String::from_utf8(STANDARD.decode(data.user_data().unwrap()).unwrap()).unwrap();
        let disks = data
            .block_device_mappings()
            .iter()
            .map(|m| (m.device_name().unwrap_or_default().to_string(), m.ebs().and_then(|e| e.volume_size())))
            .collect();
        return (user_data, disks);
    }
    panic!("no launch template has image {image}")
}

/// Launches `claim` of `class` on one on-demand offer of `instance_type` in us-east-1a.
async fn launch_one(
    cloud: &dovetail_aws::Ec2Cloud,
    claim: NodeClaim,
    class: &dovetail_core::model::NodeClass,
    resolved: &dovetail_core::cluster::ResolvedClass,
    instance_type: &str,
) -> dovetail_core::nodeclaim::Launch {
    let request = LaunchRequest {
        claim,
        class: class.clone(),
        resolved: resolved.clone(),
        offers: vec![offer(instance_type, "us-east-1a", CapacityType::OnDemand, 1.0)],
    };
    let LaunchOutcome::Launched(launch) = cloud.launch(&request).await.unwrap() else { panic!("no capacity?") };
    launch
}

/// AL2023: a GPU type launches on the alias's nvidia image, an Inferentia type on its neuron image,
/// any other type on the standard one, each with its own template whose nodeadm NodeConfig
/// carries the node's labels, the registration taint and the type's max pods; with
/// `instanceStorePolicy: RAID0` nodeadm stripes the instance store.
#[tokio::test]
async fn al2023_types_launch_on_their_variants_image() {
    use dovetail_aws::ec2::userdata::{user_parts, NODECONFIG_TYPE};
    use dovetail_tests::moto::fixtures;

    let world = World::new().await;
    world.network().await;
    let (amd64, _) = world.images().await;
    let [nvidia, neuron] = <[String; 2]>::try_from(other_amd64_images(&world, &amd64, 2).await).unwrap();
    fixtures::al2023_variant_images(
        &world.clients.ssm,
        SSM_PREFIX,
        K8S_VERSION,
        "latest",
        &[("x86_64", "nvidia", &nvidia), ("x86_64", "neuron", &neuron)],
    )
    .await
    .unwrap();
    let cloud = world.cloud();
    let mut class = example().nodeclasses.remove(0);
    class.spec["instanceStorePolicy"] = "RAID0".into();
    let resolved = cloud.resolve(&class).await.unwrap();
    assert_eq!(resolved.images.get("amd64/nvidia"), Some(&nvidia));
    assert_eq!(resolved.images.get("amd64/neuron"), Some(&neuron));

    for (i, (instance_type, image, max_pods)) in
        [("g5.xlarge", &nvidia, 58), ("inf2.xlarge", &neuron, 58), ("m5.large", &amd64, 29)].into_iter().enumerate()
    {
        let mut claim = NodeClaim::launching(&format!("default-var0{i}"), "default", "default", Time::from_secs(1));
        claim.labels.insert("team".into(), "ml".into());
        let launch = launch_one(&cloud, claim, &class, &resolved, instance_type).await;
        assert_eq!((launch.instance_type.as_str(), &launch.image_id), (instance_type, image));
        let (user_data, _) = template_with_image(&world, image).await;
        let parts = user_parts(&user_data).unwrap();
        let ours = parts.last().unwrap();
        assert_eq!(ours.headers, vec![format!("Content-Type: {NODECONFIG_TYPE}")]);
        let config: serde_json::Value = serde_yaml_ng::from_str(&ours.body).unwrap();
        assert_eq!(config["spec"]["cluster"]["name"], CLUSTER);
        assert_eq!(config["spec"]["kubelet"]["config"]["maxPods"], max_pods, "{instance_type}");
        assert_eq!(config["spec"]["instance"]["localStorage"]["strategy"], "RAID0");
        let flags: Vec<&str> =
            config["spec"]["kubelet"]["flags"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
        let labels = flags.iter().find_map(|f| f.strip_prefix("--node-labels=")).expect("node labels");
        assert!(
            labels.split(',').any(|l| l == "team=ml") && labels.contains("dovetail.dev/nodepool=default"),
            "{labels}"
        );
        assert!(flags.contains(&"--register-with-taints=dovetail.dev/unregistered:NoExecute"), "{flags:?}");
    }
    assert_eq!(template_names(&world).await.len(), 3, "one template per image");
}

/// Bottlerocket: `bottlerocket@latest` resolves from Bottlerocket's parameters, nodes launch with an
/// OS and a data volume and TOML settings (parsed here) in which the class's own settings stay and
/// Dovetail's (cluster, max pods, kubelet fields, taints, labels) win; a GPU type gets the nvidia
/// build.
#[tokio::test]
async fn a_bottlerocket_alias_resolves_and_launches_with_toml_settings() {
    use dovetail_tests::moto::fixtures;

    let world = World::new().await;
    world.network().await;
    let (amd64, arm64) = world.images().await;
    let [nvidia] = <[String; 1]>::try_from(other_amd64_images(&world, &amd64, 1).await).unwrap();
    fixtures::bottlerocket_images(
        &world.clients.ssm,
        SSM_PREFIX,
        K8S_VERSION,
        "latest",
        &[("x86_64", false, &amd64), ("x86_64", true, &nvidia), ("arm64", false, &arm64)],
    )
    .await
    .unwrap();
    let cloud = world.cloud();
    let class: dovetail_api::crd::EC2NodeClass = serde_yaml_ng::from_str(&format!(
        "apiVersion: dovetail.dev/v1
kind: EC2NodeClass
metadata: {{name: br}}
spec:
  role: {NODE_ROLE}
  amiSelectorTerms: [{{alias: bottlerocket@latest}}]
  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {CLUSTER}}}}}]
  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {CLUSTER}}}}}]
  kubelet: {{clusterDNS: [10.100.0.10], maxPods: 40, evictionHard: {{memory.available: 5%}}}}
  userData: |
    [settings.kubernetes]
    cluster-name = \"not-this-one\"
    [settings.kubernetes.node-labels]
    rack = \"r1\"
    [settings.host-containers.admin]
    enabled = true
"
    ))
    .unwrap();
    let class = class.to_core().unwrap();
    assert!(class.kubelet.bottlerocket);
    let resolved = cloud.resolve(&class).await.unwrap();
    assert_eq!(
        resolved.images,
        BTreeMap::from([
            ("amd64".to_string(), amd64.clone()),
            ("amd64/neuron".to_string(), amd64.clone()),
            ("amd64/nvidia".to_string(), nvidia.clone()),
            ("arm64".to_string(), arm64.clone()),
        ])
    );

    for (i, (instance_type, image)) in [("m5.large", &amd64), ("g5.xlarge", &nvidia)].into_iter().enumerate() {
        let mut claim = NodeClaim::launching(&format!("br-br00{i}"), "br", "br", Time::from_secs(1));
        claim.labels.insert("team".into(), "ops".into());
        claim.taints.push(Taint::new("dedicated", "ops", TaintEffect::NoSchedule));
        let launch = launch_one(&cloud, claim, &class, &resolved, instance_type).await;
        assert_eq!(&launch.image_id, image, "{instance_type}");
        let (user_data, disks) = template_with_image(&world, image).await;
        assert_eq!(disks, vec![("/dev/xvda".to_string(), Some(4)), ("/dev/xvdb".to_string(), Some(20))]);
        assert!(!user_data.contains("MIME-Version"), "TOML, no MIME document:\n{user_data}");
        let doc: toml::Table = user_data.parse().unwrap_or_else(|e| panic!("{e}\n{user_data}"));
        let k = doc["settings"]["kubernetes"].as_table().unwrap();
        assert_eq!(k["cluster-name"].as_str(), Some(CLUSTER), "Dovetail's cluster wins");
        assert_eq!(k["api-server"].as_str(), Some(World::facts().endpoint.as_str()));
        assert_eq!(k["max-pods"].as_integer(), Some(40));
        assert_eq!(k["cluster-dns-ip"].as_str(), Some("10.100.0.10"));
        assert_eq!(k["eviction-hard"]["memory.available"].as_str(), Some("5%"));
        assert_eq!(doc["settings"]["host-containers"]["admin"]["enabled"].as_bool(), Some(true), "the class's stays");
        let labels = k["node-labels"].as_table().unwrap();
        assert_eq!(labels["rack"].as_str(), Some("r1"));
        assert_eq!(labels["team"].as_str(), Some("ops"));
        assert_eq!(labels["dovetail.dev/nodepool"].as_str(), Some("br"));
        let taints = k["node-taints"].as_table().unwrap();
        assert_eq!(taints["dedicated"][0].as_str(), Some("ops:NoSchedule"));
        assert_eq!(taints["dovetail.dev/unregistered"][0].as_str(), Some(":NoExecute"));
    }
}
