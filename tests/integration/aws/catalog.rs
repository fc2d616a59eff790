//! The live catalog from moto's DescribeInstanceTypes / DescribeInstanceTypeOfferings, scheduled
//! with by the core.

use dovetail_core::catalog::CapacityType;
use dovetail_core::labels;
use dovetail_core::reconcile::ports::Cloud;
use dovetail_core::scheduler::schedule;

use super::{example, World};

#[tokio::test]
async fn catalog_maps_types_and_offerings_and_schedules() {
    let world = World::new().await;
    let cloud = world.cloud();
    let catalog = cloud.catalog().await.unwrap();

    // moto's region: its zones (with its own zone ids), most of its 1,395 types.
    let zones: Vec<&str> = catalog.zones.iter().map(|z| z.name.as_str()).collect();
    assert!(zones.contains(&"us-east-1a") && zones.len() >= 3, "{zones:?}");
    assert!(catalog.types.len() > 1000, "{} types", catalog.types.len());
    let m5 = catalog.get("m5.large").expect("m5.large is offered");
    let zone_id = catalog.zone_id("us-east-1a").unwrap();
    assert_eq!(m5.requirements.get(labels::ZONE_ID).map(|r| r.has(zone_id)), Some(true));
    // Pricing is not served by moto: on-demand prices come from the embedded catalog; spot
    // prices from moto's DescribeSpotPriceHistory.
    let od = m5.offerings.iter().find(|o| o.capacity_type == CapacityType::OnDemand).unwrap();
    let embedded_od = dovetail_core::catalog::embedded().get("m5.large").unwrap().offerings[0].price;
    assert_eq!(od.price, embedded_od);
    assert!(m5.offerings.iter().any(|o| o.capacity_type == CapacityType::Spot));

    // The second call within the TTL is the same catalog.
    assert!(std::sync::Arc::ptr_eq(&catalog, &cloud.catalog().await.unwrap()));

    // The core schedules the arm64-only example on it: arm64 types moto offers.
    let plan = schedule(&example(), &catalog);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert!(!plan.nodeclaims.is_empty());
    for claim in &plan.nodeclaims {
        let t = catalog.get(&claim.instance_type).unwrap();
        assert_eq!(t.requirements.get(labels::ARCH).and_then(|r| r.single_value()), Some("arm64"));
        assert!(zones.contains(&claim.zone.as_str()));
        assert_eq!(claim.capacity_type, CapacityType::OnDemand);
    }
}

#[tokio::test]
async fn unreachable_ec2_falls_back_to_the_embedded_catalog() {
    let world = World::new().await;
    // Nothing listens on a port just released: every call fails after the SDK's retries.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut config = world.config.clone();
    config.endpoint_url = Some(format!("http://127.0.0.1:{closed}"));
    let sdk = world.sdk.to_builder().endpoint_url(config.endpoint_url.clone().unwrap()).build();
    let clients = dovetail_aws::Clients::new(&sdk, &config);
    let cloud = dovetail_aws::Ec2Cloud::new(&clients, &config, World::facts());
    let catalog = cloud.catalog().await.unwrap();
    assert_eq!(*catalog, *dovetail_core::catalog::embedded());
}
