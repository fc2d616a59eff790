//! NodeOverlays on the real API server: the CRD's schema refuses what Karpenter's refuses (both a
//! price and an adjustment, an adjustment that is not one); the adapter, allowed only what the
//! functions' ClusterRole grants, reads the valid overlays and lists an overlay the schema lets
//! through but Dovetail cannot apply (one selecting a NodePool) as invalid with its field; and the
//! catalog the functions decide with is priced by what it read; the status the sweeper publishes
//! lands on the object (`ValidationSucceeded` and `Ready`).

use anyhow::Result;
use dovetail_core::catalog::{self, CapacityType};
use dovetail_core::overlay::{self, Outcome};
use dovetail_core::reconcile::ports::{Kube, OverlayProblem, OverlayStatus};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{json, Value};

use super::*;

fn overlays(admin: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(admin.clone(), &ApiResource::erase::<dovetail_api::crd::NodeOverlay>(&()))
}

async fn create_overlay(admin: &kube::Client, name: &str, spec: Value) -> Result<DynamicObject, kube::Error> {
    let overlay: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "dovetail.dev/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": { "name": name },
        "spec": spec,
    }))
    .expect("a well-formed object");
    overlays(admin).create(&PostParams::default(), &overlay).await
}

#[tokio::test]
async fn overlays_are_read_checked_and_price_the_catalog() -> Result<()> {
    let Fixture { admin, ns, adapter } = fixture("kube-overlays").await?;
    let family =
        |values: &[&str]| json!([{ "key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": values }]);

    // The schema's own checks, as Karpenter's CRD has them.
    for (what, spec, field) in [
        ("both prices", json!({ "price": "1", "priceAdjustment": "+1", "requirements": [] }), "priceAdjustment"),
        ("an unsigned percentage", json!({ "priceAdjustment": "28%", "requirements": [] }), "priceAdjustment"),
        ("cpu capacity", json!({ "capacity": { "cpu": "4" }, "requirements": [] }), "capacity"),
    ] {
        match create_overlay(&admin, &format!("{ns}-refused"), spec).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 422, "{what}: {s:?}");
                assert!(s.message.contains(field), "{what}: {}", s.message);
            }
            other => panic!("{what} was not refused by the schema: {other:?}"),
        }
    }

    // Two overlays of different weights on m5, one the schema accepts but Dovetail refuses.
    let savings = format!("{ns}-savings");
    create_overlay(
        &admin,
        &savings,
        json!({
            "weight": 10,
            "priceAdjustment": "-28%",
            "requirements": [
                { "key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"] },
                { "key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"] },
            ],
        }),
    )
    .await?;
    let licence = format!("{ns}-licence");
    create_overlay(&admin, &licence, json!({ "priceAdjustment": "+0.05", "requirements": family(&["m5"]) })).await?;
    let pooled = format!("{ns}-pooled");
    create_overlay(
        &admin,
        &pooled,
        json!({ "price": "9", "requirements": [{ "key": "karpenter.sh/nodepool", "operator": "In", "values": ["gpu"] }] }),
    )
    .await?;

    let state = adapter.read().await?;
    let ours: Vec<_> = state.overlays.iter().filter(|o| o.name.starts_with(&format!("{ns}-"))).cloned().collect();
    let names: Vec<&str> = ours.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, [licence.as_str(), savings.as_str()], "the valid overlays, by name");
    let invalid: Vec<(&str, &str)> = state
        .invalid
        .iter()
        .filter(|i| i.object.starts_with(&format!("NodeOverlay/{ns}-")))
        .map(|i| (i.object.as_str(), i.field.as_str()))
        .collect();
    assert_eq!(invalid, [(format!("NodeOverlay/{pooled}").as_str(), "spec.requirements[0].key")]);

    // What the functions decide with: on-demand m5 at 72% of the list price (the heavier savings
    // plan wins there), spot m5 at list + $0.05 (only the licence selects it).
    let base = catalog::embedded();
    let priced = overlay::apply(base, &ours);
    assert!(priced.statuses.iter().all(|s| matches!(s.outcome, Outcome::Applied { .. })), "{:?}", priced.statuses);
    let price = |c: &catalog::Catalog, ct| {
        let o = c.get("m5.large").unwrap().offerings.iter().find(|o| o.zone == "us-east-1a" && o.capacity_type == ct);
        o.unwrap().price
    };
    let (od, spot) = (price(base, CapacityType::OnDemand), price(base, CapacityType::Spot));
    assert!((price(&priced.catalog, CapacityType::OnDemand) - od * 0.72).abs() < 1e-12);
    assert!((price(&priced.catalog, CapacityType::Spot) - (spot + 0.05)).abs() < 1e-12);

    // The sweeper's status writes, under the functions' RBAC: the invalid overlay says why.
    let why = state.invalid.iter().find(|i| i.object == format!("NodeOverlay/{pooled}")).unwrap();
    let problem = OverlayProblem::Invalid(format!("{}: {}", why.field, why.message));
    adapter.overlay_status(&OverlayStatus { name: pooled.clone(), problem: Some(problem) }).await?;
    adapter.overlay_status(&OverlayStatus { name: savings.clone(), problem: None }).await?;
    let conditions = |o: &DynamicObject| -> Vec<(String, String, String)> {
        o.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                (s("type"), s("status"), s("reason"))
            })
            .collect()
    };
    let written = overlays(&admin).get(&pooled).await?;
    assert_eq!(
        conditions(&written),
        [
            ("ValidationSucceeded".into(), "False".into(), "RuntimeValidation".into()),
            ("Ready".into(), "False".into(), "RuntimeValidation".into())
        ],
        "{}",
        written.data["status"]
    );
    assert!(written.data["status"]["conditions"][0]["message"].as_str().unwrap().contains("spec.requirements[0].key"));
    let written = overlays(&admin).get(&savings).await?;
    assert_eq!(
        conditions(&written),
        [
            ("ValidationSucceeded".into(), "True".into(), "ValidationSucceeded".into()),
            ("Ready".into(), "True".into(), "Ready".into())
        ]
    );

    // Deleted overlays leave the next (warm) read.
    for name in [&savings, &licence, &pooled] {
        overlays(&admin).delete(name, &Default::default()).await?;
    }
    let state = adapter.read().await?;
    assert!(state.overlays.iter().all(|o| !o.name.starts_with(&format!("{ns}-"))), "{:?}", state.overlays);
    Ok(())
}
