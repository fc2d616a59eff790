//! NodeOverlay objects: validation with every problem named by field, conversion into the core's
//! overlay, and loading from manifests in both API groups.

use dovetail_api::crd::NodeOverlay;
use dovetail_api::manifest::load_str;
use dovetail_core::labels;
use dovetail_core::overlay::PriceChange;

fn overlay(spec: &str) -> NodeOverlay {
    let yaml = format!("apiVersion: dovetail.dev/v1alpha1\nkind: NodeOverlay\nmetadata:\n  name: test\nspec:\n{spec}");
    serde_yaml_ng::from_str(&yaml).unwrap()
}

const SAVINGS_PLAN: &str = r#"  weight: 10
  priceAdjustment: "-28%"
  requirements:
  - key: karpenter.k8s.aws/instance-family
    operator: In
    values: [m5, m6i]
  - key: karpenter.sh/capacity-type
    operator: In
    values: [on-demand]
"#;

#[test]
fn a_valid_overlay_converts_to_the_core_s() {
    let o = overlay(SAVINGS_PLAN).to_core().unwrap();
    assert_eq!(o.name, "test");
    assert_eq!(o.weight, 10);
    assert_eq!(o.price, Some(PriceChange::Percent(-28.0)));
    assert_eq!(o.requirements.get(labels::INSTANCE_FAMILY).unwrap().values.len(), 2);
    assert!(o.requirements.get(labels::CAPACITY_TYPE).unwrap().has("on-demand"));

    let o =
        overlay("  price: \"0.25\"\n  capacity:\n    example.com/license: 2\n  requirements: []\n").to_core().unwrap();
    assert_eq!((o.weight, o.price), (0, Some(PriceChange::Set(0.25))));
    assert_eq!(o.capacity, [("example.com/license".to_string(), 2)]);
}

/// Karpenter 1.14's inclusive `Gte`/`Lte`, which the CRD accepts, convert as a pool's do: to the
/// core's `Gt n-1` / `Lt n+1`.
#[test]
fn inclusive_bounds_convert_as_a_pools_do() {
    let o = overlay(
        "  price: \"0.1\"\n  requirements:\n  - {key: karpenter.k8s.aws/instance-cpu, operator: Gte, values: [\"8\"]}\n",
    )
    .to_core()
    .unwrap();
    let cpu = o.requirements.get(labels::INSTANCE_CPU).unwrap();
    assert!(cpu.has("8") && cpu.has("64") && !cpu.has("7"), "{cpu:?}");
    let bad = overlay("  requirements:\n  - {key: karpenter.k8s.aws/instance-cpu, operator: Lte, values: [many]}\n");
    let errs = bad.to_core().unwrap_err();
    assert_eq!(errs[0].field, "spec.requirements[0].operator", "{errs:?}");
}

#[test]
fn every_problem_is_reported_with_its_field() {
    let o = overlay(
        r#"  weight: 0
  price: "1"
  priceAdjustment: "+1"
  capacity:
    cpu: 4
    example.com/x: -1
  requirements:
  - key: karpenter.sh/nodepool
    operator: In
    values: [default]
  - key: team
    operator: Exists
  - key: karpenter.sh/capacity-type
    operator: NotIn
  - key: karpenter.k8s.aws/instance-cpu
    operator: Gt
    values: ["4", "8"]
  - key: karpenter.k8s.aws/instance-size
    operator: Near
    values: [large]
"#,
    );
    let errors = o.to_core().unwrap_err();
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    for want in [
        "spec.requirements[0].key",
        "spec.requirements[1].key",
        "spec.requirements[2].values",
        "spec.requirements[3].values",
        "spec.requirements[4].operator",
        "spec",
        "spec.capacity.cpu",
        "spec.capacity.example.com/x",
        "spec.weight",
    ] {
        assert!(fields.contains(&want), "{want} missing from {fields:?}");
    }
    assert!(errors.iter().all(|e| e.kind == "NodeOverlay" && e.name == "test"));
    let nodepool = &errors[0].to_string();
    assert!(nodepool.starts_with("NodeOverlay \"test\": spec.requirements[0].key:"), "{nodepool}");
    assert!(nodepool.contains("all NodePools share"), "{nodepool}");
    assert_eq!(o.validate(), Err(errors));

    for (spec, field, says) in [
        ("  priceAdjustment: \"-150%\"\n  requirements: []\n", "spec.priceAdjustment", "at most \"-100%\""),
        ("  priceAdjustment: \"10%\"\n  requirements: []\n", "spec.priceAdjustment", "signed"),
        ("  price: \"-1\"\n  requirements: []\n", "spec.price", "non-negative"),
    ] {
        let e = &overlay(spec).to_core().unwrap_err()[0];
        assert_eq!(e.field, field);
        assert!(e.message.contains(says), "{}", e.message);
    }
}

#[test]
fn manifests_hold_overlays_of_both_groups() {
    let pool = "apiVersion: dovetail.dev/v1alpha1\nkind: NodeOverlay\nmetadata:\n  name: savings\nspec:\n";
    let karpenter = "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata:\n  name: licence\nspec:\n  priceAdjustment: \"+0.02\"\n  requirements: []\n";
    let text = format!("{pool}{SAVINGS_PLAN}---\n{karpenter}");
    let inputs = load_str("o.yaml", &text).unwrap();
    let overlays = inputs.overlays().unwrap();
    let names: Vec<&str> = overlays.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["savings", "licence"]);
    assert_eq!(overlays[1].price, Some(PriceChange::Add(0.02)));

    // A bad overlay names its file, document, object and field.
    let bad = format!("{karpenter}---\n{pool}  priceAdjustment: \"x\"\n  requirements: []\n");
    let e = load_str("o.yaml", &bad).unwrap().overlays().unwrap_err().to_string();
    assert!(e.starts_with("o.yaml: document 2 (NodeOverlay savings): spec.priceAdjustment:"), "{e}");
    // Two overlays of one name are one object twice, whichever group each is written in.
    let twice = format!("{karpenter}---\n{}", karpenter.replace("karpenter.sh", "dovetail.dev"));
    assert!(load_str("o.yaml", &twice).unwrap_err().to_string().contains("licence"));
}
