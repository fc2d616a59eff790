use super::*;

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values).unwrap()
}

#[test]
fn operators_build_the_expected_sets() {
    let r = req("a", Operator::In, &["x", "y"]);
    assert!(r.has("x") && !r.has("z"));
    assert_eq!(r.operator(), Operator::In);
    let r = req("a", Operator::NotIn, &["x"]);
    assert!(!r.has("x") && r.has("z"));
    assert_eq!(r.operator(), Operator::NotIn);
    assert!(req("a", Operator::Exists, &[]).has("anything"));
    assert!(req("a", Operator::DoesNotExist, &[]).is_empty());
    let gt = req("cpu", Operator::Gt, &["4"]);
    assert!(gt.has("8") && !gt.has("4") && !gt.has("abc"));
    let lt = req("cpu", Operator::Lt, &["16"]);
    assert!(lt.has("8") && !lt.has("16"));
}

#[test]
fn arity_and_integer_errors_name_the_key() {
    let e = Requirement::new("k", Operator::In, &[] as &[&str]).unwrap_err();
    assert!(e.to_string().contains("\"k\""), "{e}");
    let e = Requirement::new("cpu", Operator::Gt, &["four"]).unwrap_err();
    assert!(e.to_string().contains("four"), "{e}");
}

#[test]
fn intersection_follows_set_algebra() {
    let a = req("k", Operator::In, &["1", "2", "3"]);
    let b = req("k", Operator::NotIn, &["2"]);
    let i = a.intersection(&b);
    assert_eq!(i.values, BTreeSet::from(["1".to_string(), "3".to_string()]));
    assert!(!i.complement);
    let g = req("k", Operator::Gt, &["1"]);
    let i = a.intersection(&g);
    assert_eq!(i.values, BTreeSet::from(["2".to_string(), "3".to_string()]));
    let both = req("k", Operator::NotIn, &["a"]).intersection(&req("k", Operator::NotIn, &["b"]));
    assert!(both.complement && both.values.len() == 2);
    let empty = req("k", Operator::Gt, &["5"]).intersection(&req("k", Operator::Lt, &["3"]));
    assert!(empty.is_empty());
    let mv = a.clone().with_min_values(Some(2)).intersection(&b);
    assert_eq!(mv.min_values, Some(2));
}

#[test]
fn compatibility_allows_well_known_keys_but_not_unknown_custom_ones() {
    let pool: Requirements =
        [req("team", Operator::In, &["a"]), req(labels::CAPACITY_TYPE, Operator::In, &["spot"])].into_iter().collect();
    let pod: Requirements = [req(labels::ARCH, Operator::In, &["arm64"])].into_iter().collect();
    assert!(pool.compatible(&pod).is_ok(), "well-known keys are left to the instance type");
    let pod: Requirements = [req("gpu", Operator::In, &["yes"])].into_iter().collect();
    assert!(matches!(pool.compatible(&pod), Err(Incompatible::Undefined { .. })));
    let pod: Requirements = [req("gpu", Operator::DoesNotExist, &[])].into_iter().collect();
    assert!(pool.compatible(&pod).is_ok());
    let pod: Requirements = [req(labels::CAPACITY_TYPE, Operator::In, &["on-demand"])].into_iter().collect();
    let err = pool.compatible(&pod).unwrap_err();
    assert!(err.to_string().contains("karpenter.sh/capacity-type"), "{err}");
    let pod: Requirements = [req("team", Operator::NotIn, &["a"])].into_iter().collect();
    assert!(pool.compatible(&pod).is_err());
}

#[test]
fn deprecated_keys_normalise() {
    let r = req("failure-domain.beta.kubernetes.io/zone", Operator::In, &["us-east-1a"]);
    assert_eq!(r.key, labels::ZONE);
    let r = req("karpenter.sh/nodepool", Operator::In, &["default"]);
    assert_eq!(r.key, labels::NODEPOOL);
}

#[test]
fn label_matching_treats_missing_keys_like_kube_scheduler() {
    let reqs: Requirements =
        [req("a", Operator::In, &["1"]), req("b", Operator::DoesNotExist, &[])].into_iter().collect();
    let mut labels = BTreeMap::new();
    labels.insert("a".to_string(), "1".to_string());
    assert!(reqs.matches_labels(&labels));
    labels.insert("b".to_string(), "x".to_string());
    assert!(!reqs.matches_labels(&labels));
}

#[test]
fn overlaps_agrees_with_intersection() {
    let reqs = [
        req("k", Operator::In, &["1", "2", "3"]),
        req("k", Operator::In, &["4"]),
        req("k", Operator::NotIn, &["2"]),
        req("k", Operator::NotIn, &["1", "2", "3"]),
        req("k", Operator::Exists, &[]),
        req("k", Operator::DoesNotExist, &[]),
        req("k", Operator::Gt, &["2"]),
        req("k", Operator::Lt, &["2"]),
        req("k", Operator::Gt, &["5"]),
    ];
    for a in &reqs {
        for b in &reqs {
            assert_eq!(a.overlaps(b), !a.intersection(b).is_empty(), "{a} vs {b}");
        }
    }
}

#[test]
fn serializes_as_node_selector_requirements_and_back() {
    let reqs: Requirements = [
        req("a", Operator::In, &["1", "2"]).with_min_values(Some(2)),
        req("b", Operator::NotIn, &["x"]),
        req("c", Operator::Exists, &[]),
        req("d", Operator::DoesNotExist, &[]),
        req("e", Operator::Gt, &["3"]).intersection(&req("e", Operator::Lt, &["9"])),
    ]
    .into_iter()
    .collect();
    let json = serde_json::to_string(&reqs).unwrap();
    assert!(json.contains(r#"{"key":"a","operator":"In","values":["1","2"],"minValues":2}"#), "{json}");
    assert!(
        json.contains(r#"{"key":"e","operator":"Gt","values":["3"]},{"key":"e","operator":"Lt","values":["9"]}"#),
        "{json}"
    );
    let back: Requirements = serde_json::from_str(&json).unwrap();
    assert_eq!(back, reqs);
}
