//! Capacity priced and reserved end to end: a NodeOverlay's price is what the functions decide
//! and record with, and a capacity reservation takes the claims it has room for, no more.
//!
//! moto 5.x has no capacity-reservation API: the reservation comes from the test double in
//! `tests/harness/moto_launcher.py` (`CapacityReservationsTestDouble`), which answers
//! CreateCapacityReservation and DescribeCapacityReservations and launches a fleet whose launch
//! template targets a reservation into it, counting its instances as EC2 does.

use std::collections::BTreeSet;

use anyhow::{ensure, Context, Result};
use aws_sdk_ec2::types::{CapacityReservationInstancePlatform, Filter, InstanceMatchCriteria, ResourceType};
use dovetail_core::catalog::{self, CapacityType};
use dovetail_core::labels;
use dovetail_core::nodeclaim::NodeClaim;
use dovetail_core::reconcile::ports::Store;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};

use super::provisioning::{on_dovetail_nodes, ANTI_AFFINE, SWEEPING};
use super::{label, EndToEnd};
use crate::aws::CLUSTER;

/// The example's Savings Plan overlay takes 28% off these families' on-demand price.
const DISCOUNTED: [&str; 4] = ["m6i", "m7i", "c6i", "c7i"];

/// Beside the example's overlay: one of its weight setting another price of a family it covers
/// (taken second, names of one weight being taken later name first, so it conflicts and applies
/// nothing), and one the schema admits but Dovetail refuses (it selects a NodePool). Either,
/// applied, would make what it selects far cheaper than the Savings Plan does.
const RIVALS: &str = "
apiVersion: dovetail.dev/v1alpha1
kind: NodeOverlay
metadata: {name: a-rival-discount}
spec:
  weight: 10
  priceAdjustment: \"-90%\"
  requirements:
    - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c6i]}
---
apiVersion: dovetail.dev/v1alpha1
kind: NodeOverlay
metadata: {name: by-pool}
spec:
  price: \"0.001\"
  requirements:
    - {key: karpenter.sh/nodepool, operator: In, values: [default]}
";

/// The overlay's conditions, by type.
async fn overlay_conditions(overlays: &Api<DynamicObject>, name: &str) -> Result<Vec<Value>> {
    let overlay = overlays.get(name).await?;
    Ok(overlay.data["status"]["conditions"].as_array().cloned().unwrap_or_default())
}

fn condition<'a>(conditions: &'a [Value], kind: &str) -> Option<&'a Value> {
    conditions.iter().find(|c| c["type"] == kind)
}

/// The savings-plan example (an on-demand pool of c/m/r types, its overlay, six 1-vCPU pods) with
/// two overlays that must not apply: every node is of a discounted family, each claim records
/// the effective price (the catalog's less 28%), and the sweeper says which overlays apply.
#[tokio::test]
async fn an_overlay_prices_what_the_functions_launch_and_one_in_conflict_is_reported() -> Result<()> {
    let e2e = EndToEnd::start("overlay", SWEEPING).await?;
    e2e.apply_example("savings-plan/nodepools.yaml").await?;
    e2e.apply_example("savings-plan/overlay.yaml").await?;
    e2e.apply(RIVALS).await?;
    e2e.apply_example("savings-plan/workload.yaml").await?;
    let pods = e2e.running("payments", "app=api", 6).await?;
    let nodes = on_dovetail_nodes(&e2e, &pods).await?;
    let claims = e2e.live_claims().await?;
    for node in &nodes {
        let claim = claims.iter().find(|c| c.name == label(node, labels::NODECLAIM)).context("the node's claim")?;
        let launch = claim.launch.as_ref().context("a launched claim")?;
        // Undiscounted, c6a is cheaper than c6i per vCPU: the overlay's price chose the type.
        let family = launch.instance_type.split('.').next().unwrap_or_default();
        ensure!(DISCOUNTED.contains(&family), "{}: a {} node", claim.name, launch.instance_type);
        ensure!(launch.capacity_type == CapacityType::OnDemand, "{}: {:?}", claim.name, launch.capacity_type);
        // moto serves no Pricing API: the catalog's on-demand prices are the embedded ones.
        let listed = catalog::embedded()
            .get(&launch.instance_type)
            .and_then(|t| t.offerings.iter().find(|o| o.capacity_type == CapacityType::OnDemand))
            .map(|o| o.price)
            .context("the type's on-demand price")?;
        ensure!(
            (launch.price - listed * 0.72).abs() < 1e-9,
            "{} ({}) recorded ${}/h; listed ${listed}/h, less 28% is ${}/h",
            claim.name,
            launch.instance_type,
            launch.price,
            listed * 0.72
        );
    }

    let overlays: Api<DynamicObject> =
        Api::all_with(e2e.admin.clone(), &ApiResource::erase::<dovetail_api::crd::NodeOverlay>(&()));
    let written = e2e
        .until("the three overlays' Ready conditions", super::STEP, || {
            let overlays = overlays.clone();
            async move {
                let mut all = vec![];
                for name in ["compute-savings-plan", "a-rival-discount", "by-pool"] {
                    let conditions = overlay_conditions(&overlays, name).await?;
                    if condition(&conditions, "Ready").is_none() {
                        return Ok(None);
                    }
                    all.push(conditions);
                }
                Ok(Some(all))
            }
        })
        .await?;
    let [savings, rival, by_pool] = &written[..] else { unreachable!("three overlays read") };
    for kind in ["ValidationSucceeded", "Ready"] {
        let c = condition(savings, kind).context(kind)?;
        assert_eq!(c["status"], "True", "the savings plan applies: {c}");
    }
    let conflict = condition(rival, "ValidationSucceeded").context("the rival's ValidationSucceeded")?;
    assert_eq!(
        (&conflict["status"], &conflict["reason"]),
        (&Value::from("False"), &Value::from("Conflict")),
        "{conflict}"
    );
    let message = conflict["message"].as_str().unwrap_or_default();
    assert!(message.contains("NodeOverlay compute-savings-plan"), "names the overlay it conflicts with: {message}");
    let refused = condition(by_pool, "ValidationSucceeded").context("by-pool's ValidationSucceeded")?;
    assert_eq!(
        (&refused["status"], &refused["reason"]),
        (&Value::from("False"), &Value::from("RuntimeValidation")),
        "{refused}"
    );
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(message.contains("spec.requirements[0].key"), "names the field: {message}");
    for (name, conditions) in [("a-rival-discount", rival), ("by-pool", by_pool)] {
        let ready = condition(conditions, "Ready").context("Ready")?;
        assert_eq!(ready["status"], "False", "{name} is not applied: {ready}");
    }
    e2e.assert_exactly_once("overlay").await?;
    e2e.report_latency().await?;
    Ok(())
}

/// How many instances each reservation holds.
const RESERVED: i32 = 2;

/// A class selecting reservations by tag (`team: payments`) and a pool of m5.large allowing
/// `reserved` and `on-demand`.
const RESERVED_POOL: &str = "
apiVersion: dovetail.dev/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: DovetailNodeRole-demo-cluster
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]
  capacityReservationSelectorTerms: [{tags: {team: payments}}]
---
apiVersion: dovetail.dev/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: dovetail.dev, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [reserved, on-demand]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
";

/// A reservation of two m5.large in us-east-1a the class selects, and one it does not; three
/// replicas that each need a node of their own: two nodes launch into the selected reservation
/// (labelled `reserved` with its id), the third on demand, nothing into the other; the class's
/// status lists the one it selects. A fourth replica, added once the reservation is full, launches
/// on demand too.
#[tokio::test]
async fn a_reservation_takes_the_claims_it_has_room_for_and_the_rest_launch_on_demand() -> Result<()> {
    let e2e = EndToEnd::start("reserved", SWEEPING).await?;
    let ec2 = &e2e.aws.clients.ec2;
    let mut reservations = vec![];
    for team in ["payments", "other"] {
        let created = ec2
            .create_capacity_reservation()
            .instance_type("m5.large")
            .instance_platform(CapacityReservationInstancePlatform::LinuxUnix)
            .availability_zone("us-east-1a")
            .instance_count(RESERVED)
            .instance_match_criteria(InstanceMatchCriteria::Targeted)
            .tag_specifications(dovetail_tests::moto::fixtures::tags(
                ResourceType::CapacityReservation,
                &[("team", team)],
            ))
            .send()
            .await?;
        let id = created.capacity_reservation().and_then(|r| r.capacity_reservation_id()).context("an id")?;
        reservations.push(id.to_string());
    }
    let (selected, other) = (&reservations[0], &reservations[1]);
    e2e.apply(RESERVED_POOL).await?;
    e2e.apply(ANTI_AFFINE).await?;
    let pods = e2e.running("coordination", "app=quorum", 3).await?;
    let nodes = on_dovetail_nodes(&e2e, &pods).await?;
    let mut reserved = BTreeSet::new();
    for node in &nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        match label(node, labels::CAPACITY_TYPE) {
            "reserved" => {
                assert_eq!(label(node, labels::CAPACITY_RESERVATION_ID), selected, "{name}");
                assert_eq!(label(node, labels::ZONE), "us-east-1a", "{name}: the reservation's zone");
                reserved.insert(name);
            }
            "on-demand" => assert_eq!(label(node, labels::CAPACITY_RESERVATION_ID), "", "{name}"),
            other => panic!("{name}: capacity type {other:?}"),
        }
    }
    assert_eq!(reserved.len(), RESERVED as usize, "the reservation's room, used: {reserved:?}");
    // One more replica, once EC2 counts the reservation full: it launches on demand.
    let deployments: Api<Deployment> = Api::namespaced(e2e.admin.clone(), "coordination");
    deployments.patch("quorum", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 4}}))).await?;
    let pods = e2e.running("coordination", "app=quorum", 4).await?;
    let nodes = on_dovetail_nodes(&e2e, &pods).await?;
    let on_demand = nodes.iter().filter(|n| label(n, labels::CAPACITY_TYPE) == "on-demand").count();
    assert_eq!(on_demand, 2, "the replicas past the reservation's room are on demand");
    // Never more claims headed for it than it holds, terminated ones included.
    let into = |id: &str| {
        let id = id.to_string();
        move |c: &&NodeClaim| c.labels.get(labels::CAPACITY_RESERVATION_ID) == Some(&id)
    };
    let claims = e2e.store().claims().await?;
    assert_eq!(claims.iter().filter(into(selected)).count(), RESERVED as usize, "claims ever into {selected}");
    assert_eq!(claims.iter().filter(into(other)).count(), 0, "nothing into the reservation the class does not select");
    for c in claims.iter().filter(into(selected)) {
        let launch = c.launch.as_ref().context("launched")?;
        assert_eq!(launch.capacity_type, CapacityType::Reserved, "{}", c.name);
    }
    // EC2's side: the instances launched into it and what it has left.
    let described = ec2
        .describe_instances()
        .filters(Filter::builder().name("tag:dovetail.dev/cluster").values(CLUSTER).build())
        .filters(Filter::builder().name("instance-state-name").values("pending").values("running").build())
        .send()
        .await?;
    let in_reservation: Vec<&str> = described
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(|i| i.capacity_reservation_id())
        .collect();
    assert_eq!(in_reservation, vec![selected.as_str(); RESERVED as usize], "instances in a reservation");
    let left = ec2.describe_capacity_reservations().capacity_reservation_ids(selected).send().await?;
    let left = left.capacity_reservations().first().and_then(|r| r.available_instance_count());
    assert_eq!(left, Some(0), "{selected} is full");

    // The class lists the reservation it selects (the sweeper writes its status).
    let classes = super::super::kube::nodeclasses(&e2e.admin);
    let listed = e2e
        .until("the class's status.capacityReservations", super::STEP, || {
            let classes = classes.clone();
            async move {
                let status = classes.get("default").await?.data["status"].clone();
                Ok(status["capacityReservations"].as_array().filter(|l| !l.is_empty()).cloned())
            }
        })
        .await?;
    assert_eq!(listed.len(), 1, "only the reservation the class selects: {listed:?}");
    let r = &listed[0];
    assert_eq!(r["id"], selected.as_str(), "{r}");
    assert_eq!(r["instanceType"], "m5.large", "{r}");
    assert_eq!(r["availabilityZone"], "us-east-1a", "{r}");
    assert_eq!(r["instanceMatchCriteria"], "targeted", "{r}");
    assert_eq!(r["reservationType"], "default", "{r}");
    assert_eq!(r["state"], "active", "{r}");
    e2e.assert_exactly_once("reserved").await?;
    e2e.report_latency().await?;
    Ok(())
}
