//! `dovetail import`'s output on the real API server. The fixtures that stand for Karpenter's
//! published v1 examples (`shared/cli/tests/fixtures/import/karpenter-v1-*.yaml`, every field
//! they use) are converted as `dovetail import` converts them, and every object is created
//! through Dovetail's CRDs: their OpenAPI schema and CEL rules must accept it, the server must
//! store every field sent (a field the schema does not know would be pruned silently), and the
//! functions must read it back as valid. A copy the CRD's CEL rules refuse shows the check
//! catches a refusal, and names the object.

use anyhow::{anyhow, Context, Result};
use dovetail_api::crd::{EC2NodeClass, NodePool};
use dovetail_api::import::{convert, Converted};
use dovetail_core::reconcile::ports::Kube;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::Client;
use serde_json::{json, Value};

use super::*;

const FIXTURES: &[&str] = &[
    "../shared/cli/tests/fixtures/import/karpenter-v1-fields.yaml",
    "../shared/cli/tests/fixtures/import/karpenter-v1-windows.yaml",
];

/// The converted objects as `dovetail import` prints them, each name (and each pool's class
/// reference) prefixed with `prefix`: NodePools and EC2NodeClasses are cluster-wide and the
/// control plane is shared.
fn imported(prefix: &str) -> Result<Vec<Value>> {
    let mut texts = Vec::new();
    for fixture in FIXTURES {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(fixture);
        texts.push((*fixture, std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?));
    }
    let report = convert(texts.iter().map(|(name, text)| (*name, text.as_str())));
    if !report.errors.is_empty() {
        return Err(anyhow!("the fixtures do not convert: {:?}", report.errors));
    }
    let mut objects = Vec::new();
    for converted in &report.objects {
        let mut object: Value = serde_yaml_ng::from_str(&converted.to_yaml())?;
        object["metadata"]["name"] = json!(format!("{prefix}-{}", converted.name()));
        if let Converted::NodePool(pool) = converted {
            let class = &pool.spec.template.spec.node_class_ref.name;
            object["spec"]["template"]["spec"]["nodeClassRef"]["name"] = json!(format!("{prefix}-{class}"));
        }
        objects.push(object);
    }
    Ok(objects)
}

fn api_of(admin: &Client, object: &Value) -> Result<Api<DynamicObject>> {
    match object["kind"].as_str() {
        Some("NodePool") => Ok(nodepools(admin)),
        Some("EC2NodeClass") => Ok(nodeclasses(admin)),
        other => Err(anyhow!("not an imported kind: {other:?}")),
    }
}

fn label(object: &Value) -> String {
    format!(
        "{} {}",
        object["kind"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Creates `object` and reads it back; fails, naming the object, if the API server refuses it
/// or stores anything other than what was sent (compared as Dovetail's types read it, so the
/// server's defaults for fields the import left out compare equal to the types' defaults).
async fn create_and_read_back(admin: &Client, object: &Value) -> Result<()> {
    let api = api_of(admin, object)?;
    let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let what = label(object);
    let sent: DynamicObject = serde_json::from_value(object.clone())?;
    api.create(&PostParams::default(), &sent).await.with_context(|| format!("the API server refused {what}"))?;
    let stored = serde_json::to_value(api.get(&name).await.with_context(|| format!("reading {what} back"))?)?;
    let same = |field: &str| stored["metadata"][field] == object["metadata"][field];
    if !(same("labels") && same("annotations")) {
        return Err(anyhow!("{what}: metadata stored as {}, sent {}", stored["metadata"], object["metadata"]));
    }
    let equal = match object["kind"].as_str() {
        Some("NodePool") => {
            serde_json::from_value::<NodePool>(stored.clone())?.spec
                == serde_json::from_value::<NodePool>(object.clone())?.spec
        }
        _ => {
            serde_json::from_value::<EC2NodeClass>(stored.clone())?.spec
                == serde_json::from_value::<EC2NodeClass>(object.clone())?.spec
        }
    };
    if !equal {
        return Err(anyhow!("{what}: stored as\n{}\nsent\n{}", stored["spec"], object["spec"]));
    }
    Ok(())
}

#[tokio::test]
async fn imported_karpenter_examples_apply_to_the_real_api_server() -> Result<()> {
    let Fixture { admin, ns, adapter } = fixture("kube-import").await?;
    let objects = imported(&ns)?;
    // In the output's order, pools before their classes, as `kubectl apply -f` of it creates
    // them: nothing in the API server checks a pool's class reference.
    for object in &objects {
        create_and_read_back(&admin, object).await?;
    }
    let names = |kind: &str| -> Vec<String> {
        objects
            .iter()
            .filter(|o| o["kind"] == kind)
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let (pools, classes) = (names("NodePool"), names("EC2NodeClass"));
    assert_eq!((pools.len(), classes.len()), (12, 11), "the fixtures' objects");

    // The functions read every one of them as valid.
    let state = adapter.read().await?;
    let invalid: Vec<_> = state.invalid.iter().filter(|i| i.object.contains(&ns)).collect();
    assert!(invalid.is_empty(), "Dovetail refuses imported objects: {invalid:?}");
    for pool in &pools {
        assert!(state.nodepools.iter().any(|p| &p.name == pool), "NodePool {pool} is not read");
    }
    for class in &classes {
        assert!(state.nodeclasses.iter().any(|c| &c.name == class), "EC2NodeClass {class} is not read");
    }

    // A copy the CRD refuses (Karpenter's rule: a role or an instance profile, never both) is
    // reported as a refusal of that object.
    let mut broken = objects.iter().find(|o| o["metadata"]["name"] == format!("{ns}-standard")).unwrap().clone();
    broken["metadata"]["name"] = json!(format!("{ns}-broken"));
    broken["spec"]["instanceProfile"] = json!("shop-prod-nodes");
    let error = create_and_read_back(&admin, &broken).await.expect_err("role and instanceProfile together");
    assert!(format!("{error:#}").contains(&format!("refused EC2NodeClass {ns}-broken")), "{error:#}");
    match error.chain().find_map(|e| e.downcast_ref::<kube::Error>()) {
        Some(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert!(status.message.contains("must specify exactly one of ['role', 'instanceProfile']"), "{status:?}");
        }
        other => panic!("expected the API server's refusal, got {other:?} from {error:#}"),
    }

    for object in &objects {
        let name = object["metadata"]["name"].as_str().unwrap();
        api_of(&admin, object)?.delete(name, &DeleteParams::default()).await?;
    }
    Ok(())
}
