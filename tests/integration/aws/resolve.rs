//! EC2NodeClass resolution against moto: subnets by tag or id (the most free IPs per zone),
//! security groups, images by id, tags, SSM parameter and alias (per architecture and variant,
//! latest and pinned; SSM parameters under a test prefix,
//! as the public `/aws/service/...` ones cannot be written to moto).

use std::collections::BTreeMap;

use dovetail_core::hash::nodeclass_hash;
use dovetail_core::reconcile::ports::Cloud;
use serde_json::json;

use super::{class, example, World, CLUSTER, DISCOVERY, K8S_VERSION, SSM_PREFIX};

#[tokio::test]
async fn the_example_class_resolves_by_tags_and_alias() {
    let world = World::new().await;
    let net = world.network().await;
    let (amd64, arm64) = world.images().await;
    let cloud = world.cloud();

    // Launching takes a free IP from the big subnet: it still has more than the small one.
    let nodeclass = example().nodeclasses.remove(0);
    let resolved = cloud.resolve(&nodeclass).await.unwrap();
    assert_eq!(resolved.name, "default");
    assert_eq!(resolved.hash, nodeclass_hash(&nodeclass.spec));
    assert_eq!(resolved.subnets, vec![net.big_a.clone(), net.b.clone()], "one per zone, most free IPs; c is untagged");
    assert_eq!(resolved.security_groups, vec![net.tagged_sg.clone()]);
    assert_eq!(resolved.images, BTreeMap::from([("amd64".to_string(), amd64), ("arm64".to_string(), arm64)]));
    assert!(!resolved.subnets.contains(&net.small_a) && !resolved.subnets.contains(&net.untagged_c));
}

#[tokio::test]
async fn ids_names_and_tags_select_too() {
    let world = World::new().await;
    let net = world.network().await;
    let (amd64, arm64) = world.images().await;
    let cloud = world.cloud();

    let by_id = class(
        "by-id",
        json!({
            "role": "nodes",
            "subnetSelectorTerms": [{"id": net.small_a}, {"id": net.untagged_c}, {"id": "subnet-0doesnotexist"}],
            "securityGroupSelectorTerms": [{"name": "extra"}, {"id": net.tagged_sg}],
            "amiSelectorTerms": [{"id": amd64}],
        }),
    );
    let r = cloud.resolve(&by_id).await.unwrap();
    assert_eq!(r.subnets, vec![net.small_a.clone(), net.untagged_c.clone()]);
    let mut groups = vec![net.named_sg.clone(), net.tagged_sg.clone()];
    groups.sort();
    assert_eq!(r.security_groups, groups);
    assert_eq!(r.images, BTreeMap::from([("amd64".to_string(), amd64.clone())]));

    let by_tags = class(
        "by-tags",
        json!({
            "role": "nodes",
            "subnetSelectorTerms": [{"tags": {DISCOVERY: "*"}}],
            "securityGroupSelectorTerms": [{"tags": {DISCOVERY: CLUSTER}}],
            "amiSelectorTerms": [{"tags": {"team": "nodes"}}],
        }),
    );
    let r = cloud.resolve(&by_tags).await.unwrap();
    assert_eq!(r.images, BTreeMap::from([("amd64".to_string(), amd64), ("arm64".to_string(), arm64)]));
    assert_eq!(r.subnets, vec![net.big_a, net.b]);

    // Nothing selected: the part is empty and the class's condition for it names the field; the
    // other parts show what they found.
    let empty = class(
        "empty",
        json!({
            "role": "nodes",
            "subnetSelectorTerms": [{"tags": {DISCOVERY: "nobody"}}],
            "securityGroupSelectorTerms": [{"tags": {DISCOVERY: CLUSTER}}],
            "amiSelectorTerms": [{"tags": {"team": "nodes"}}],
        }),
    );
    let r = cloud.resolve(&empty).await.expect("a selector that selects nothing is no failed lookup");
    assert!(r.subnets.is_empty() && !r.security_groups.is_empty() && !r.images.is_empty(), "{r:?}");
    // (These classes are converted without their role, so their instance profile is missing too.)
    let missing = r.missing();
    let subnets = missing.iter().find(|(c, _)| *c == dovetail_core::cluster::SUBNETS_READY);
    assert!(subnets.is_some_and(|(_, m)| m.contains("subnetSelectorTerms")), "{missing:?}");
    let no_image = class(
        "no-image",
        json!({
            "role": "nodes",
            "subnetSelectorTerms": [{"tags": {DISCOVERY: CLUSTER}}],
            "securityGroupSelectorTerms": [{"tags": {DISCOVERY: CLUSTER}}],
            "amiSelectorTerms": [{"alias": "al2023@v20991231"}],
        }),
    );
    let r = cloud.resolve(&no_image).await.expect("an alias with no image is no failed lookup");
    assert!(r.images.is_empty() && !r.subnets.is_empty(), "{r:?}");
    let missing = r.missing();
    let amis = missing.iter().find(|(c, _)| *c == dovetail_core::cluster::AMIS_READY);
    assert!(
        amis.is_some_and(|(_, m)| m.contains("amiSelectorTerms") && m.contains("AWS publishes no such image")),
        "{missing:?}"
    );
}

/// An alias resolves an image per architecture and variant, `latest` from the recommended
/// parameters and a pinned release from its own; Bottlerocket's standard image also serves Neuron
/// types. An `ssmParameter` term selects the image a parameter of the user's holds.
#[tokio::test]
async fn aliases_resolve_per_variant_and_release_and_ssm_parameters_select() {
    use dovetail_tests::moto::fixtures;

    let world = World::new().await;
    world.network().await;
    let (amd64, arm64) = world.images().await;
    let cloud = world.cloud();
    let ssm = &world.clients.ssm;
    let selecting = |name: &str, ami: serde_json::Value| {
        class(
            name,
            json!({
                "role": "nodes",
                "subnetSelectorTerms": [{"tags": {DISCOVERY: CLUSTER}}],
                "securityGroupSelectorTerms": [{"tags": {DISCOVERY: CLUSTER}}],
                "amiSelectorTerms": ami,
                "amiFamily": "AL2023",
            }),
        )
    };
    let images = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };

    // The GPU and Neuron builds beside the standard ones world.images() published.
    fixtures::al2023_variant_images(
        ssm,
        SSM_PREFIX,
        K8S_VERSION,
        "latest",
        &[
            ("x86_64", "nvidia", "ami-0a1nvidia"),
            ("x86_64", "neuron", "ami-0a1neuron"),
            ("arm64", "nvidia", "ami-0a1armgpu"),
        ],
    )
    .await
    .unwrap();
    let latest = cloud.resolve(&selecting("latest", json!([{"alias": "al2023@latest"}]))).await.unwrap();
    assert_eq!(
        latest.images,
        images(&[
            ("amd64", &amd64),
            ("amd64/neuron", "ami-0a1neuron"),
            ("amd64/nvidia", "ami-0a1nvidia"),
            ("arm64", &arm64),
            ("arm64/nvidia", "ami-0a1armgpu"),
        ])
    );

    // A pinned release: its own parameters, not the recommended ones.
    fixtures::al2023_variant_images(
        ssm,
        SSM_PREFIX,
        K8S_VERSION,
        "v20240807",
        &[("x86_64", "standard", "ami-0old"), ("x86_64", "nvidia", "ami-0oldgpu")],
    )
    .await
    .unwrap();
    let pinned = cloud.resolve(&selecting("pinned", json!([{"alias": "al2023@v20240807"}]))).await.unwrap();
    assert_eq!(pinned.images, images(&[("amd64", "ami-0old"), ("amd64/nvidia", "ami-0oldgpu")]));

    // Bottlerocket: `latest`, or the release without its `v`.
    fixtures::bottlerocket_images(
        ssm,
        SSM_PREFIX,
        K8S_VERSION,
        "latest",
        &[("x86_64", false, "ami-0br"), ("x86_64", true, "ami-0brgpu"), ("arm64", false, "ami-0brarm")],
    )
    .await
    .unwrap();
    fixtures::bottlerocket_images(ssm, SSM_PREFIX, K8S_VERSION, "1.20.3", &[("x86_64", false, "ami-0br1203")])
        .await
        .unwrap();
    let mut br = selecting("br", json!([{"alias": "bottlerocket@latest"}]));
    br.spec["amiFamily"] = "Bottlerocket".into();
    assert_eq!(
        cloud.resolve(&br).await.unwrap().images,
        images(&[
            ("amd64", "ami-0br"),
            ("amd64/neuron", "ami-0br"),
            ("amd64/nvidia", "ami-0brgpu"),
            ("arm64", "ami-0brarm")
        ])
    );
    br.spec["amiSelectorTerms"] = json!([{"alias": "bottlerocket@v1.20.3"}]);
    assert_eq!(
        cloud.resolve(&br).await.unwrap().images,
        images(&[("amd64", "ami-0br1203"), ("amd64/neuron", "ami-0br1203")])
    );

    // The user's own parameter holding an image id: that image, for its architecture.
    fixtures::parameter(ssm, "/my/amis/prod", &amd64).await.unwrap();
    let by_parameter = cloud.resolve(&selecting("param", json!([{"ssmParameter": "/my/amis/prod"}]))).await.unwrap();
    assert_eq!(by_parameter.images, images(&[("amd64", &amd64)]));
    // A parameter that does not exist selects nothing, and the class's AMIsReady says so.
    let none = cloud.resolve(&selecting("none", json!([{"ssmParameter": "/my/amis/missing"}]))).await.unwrap();
    assert!(none.images.is_empty(), "{none:?}");
    assert!(none
        .missing()
        .iter()
        .any(|(c, m)| *c == dovetail_core::cluster::AMIS_READY && m.contains("amiSelectorTerms")));
}
