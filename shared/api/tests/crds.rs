//! The CRD YAML committed under `infra/k8s/crds/` (the kustomize base) and `infra/helm/dovetail/crds/`
//! (the Helm chart, which installs its `crds/` folder as they are) must be exactly what the Rust
//! types generate: two generated copies, byte for byte the same, never edited by hand.
//!
//! After changing the types, regenerate the files with
//!
//! ```sh
//! DOVETAIL_BLESS=1 cargo test -p dovetail-api --test crds
//! ```
//!
//! (both folders) and commit them together with the change (review the YAML diff: it is what clusters get).

use std::path::{Path, PathBuf};

use dovetail_api::crd::{crd_yaml, EC2NodeClass, NodeClaim, NodeOverlay, NodePool};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

fn repo_root() -> PathBuf {
    // This crate lives at <root>/shared/api.
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("shared/api has two ancestors").to_path_buf()
}

/// Where the generated CRDs live: the kustomize base's and the Helm chart's.
const CRD_DIRS: [&str; 2] = ["infra/k8s/crds", "infra/helm/dovetail/crds"];

fn check<K: CustomResourceExt>(file_name: &str) {
    let generated = crd_yaml::<K>();
    for dir in CRD_DIRS {
        check_file(&repo_root().join(dir).join(file_name), &generated);
    }
}

fn check_file(path: &Path, generated: &str) {
    if std::env::var_os("DOVETAIL_BLESS").is_some_and(|v| !v.is_empty() && v != "0") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    if committed != generated {
        let first_difference = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
        panic!(
            "{} is out of date with the Rust types in shared/api/src/crd \
             (first difference at line {}).\n\
             Regenerate it with `DOVETAIL_BLESS=1 cargo test -p dovetail-api --test crds`, \
             review the diff and commit it.",
            path.display(),
            first_difference + 1,
        );
    }
}

/// Each folder holds the generated CRDs and nothing else: a CRD file left behind in one of them
/// (a kind renamed or removed) would still be installed by kustomize or Helm.
#[test]
fn crd_folders_hold_exactly_the_generated_files() {
    for dir in CRD_DIRS {
        let mut files: Vec<String> = std::fs::read_dir(repo_root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(
            files,
            [
                "dovetail.dev_ec2nodeclasses.yaml",
                "dovetail.dev_nodeclaims.yaml",
                "dovetail.dev_nodeoverlays.yaml",
                "dovetail.dev_nodepools.yaml"
            ],
            "{dir}"
        );
    }
}

#[test]
fn nodepool_crd_is_up_to_date() {
    check::<NodePool>("dovetail.dev_nodepools.yaml");
}

#[test]
fn nodeclaim_crd_is_up_to_date() {
    check::<NodeClaim>("dovetail.dev_nodeclaims.yaml");
}

#[test]
fn nodeoverlay_crd_is_up_to_date() {
    check::<NodeOverlay>("dovetail.dev_nodeoverlays.yaml");
}

#[test]
fn ec2nodeclass_crd_is_up_to_date() {
    check::<EC2NodeClass>("dovetail.dev_ec2nodeclasses.yaml");
}

/// The generated YAML must read back as the same CRD, so `kubectl apply` installs exactly what
/// the types describe (guards against serializer quirks such as numbers turned into strings).
#[test]
fn yaml_reads_back_as_the_same_crd() {
    for (yaml, crd) in [
        (crd_yaml::<NodePool>(), NodePool::crd()),
        (crd_yaml::<EC2NodeClass>(), EC2NodeClass::crd()),
        (crd_yaml::<NodeClaim>(), NodeClaim::crd()),
        (crd_yaml::<NodeOverlay>(), NodeOverlay::crd()),
    ] {
        let parsed: CustomResourceDefinition = serde_yaml_ng::from_str(&yaml).unwrap();
        assert_eq!(parsed, crd);
    }
}

/// Names, scope and subresources clusters and kubectl users rely on.
#[test]
fn crd_shapes() {
    let np = NodePool::crd();
    assert_eq!(np.metadata.name.as_deref(), Some("nodepools.dovetail.dev"));
    assert_eq!(np.spec.scope, "Cluster");
    assert_eq!(np.spec.names.categories, Some(vec!["dovetail".to_owned()]));
    assert!(np.spec.versions[0].subresources.as_ref().and_then(|s| s.status.as_ref()).is_some());

    let nc = EC2NodeClass::crd();
    assert_eq!(nc.metadata.name.as_deref(), Some("ec2nodeclasses.dovetail.dev"));
    assert_eq!(nc.spec.scope, "Cluster");
    assert_eq!(nc.spec.names.short_names, Some(vec!["ec2nc".to_owned(), "ec2ncs".to_owned()]));

    // Alpha, as Karpenter's karpenter.sh/v1alpha1 NodeOverlay is.
    let no = NodeOverlay::crd();
    assert_eq!(no.metadata.name.as_deref(), Some("nodeoverlays.dovetail.dev"));
    assert_eq!(no.spec.scope, "Cluster");
    assert_eq!(no.spec.versions.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["v1alpha1"]);
    assert_eq!(no.spec.names.short_names, Some(vec!["overlays".to_owned()]));
    assert!(no.spec.versions[0].subresources.as_ref().and_then(|s| s.status.as_ref()).is_some());
}

/// Karpenter's defaults must be in the schema, so the API server fills them in.
#[test]
fn schema_carries_karpenter_defaults() {
    let schema = serde_json::to_value(NodePool::crd().spec.versions[0].schema.clone()).unwrap();
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"];
    let template_spec = &spec["template"]["properties"]["spec"]["properties"];
    assert_eq!(template_spec["expireAfter"]["default"], "720h");
    let disruption = &spec["disruption"]["properties"];
    assert_eq!(disruption["consolidationPolicy"]["default"], "WhenEmptyOrUnderutilized");
    assert_eq!(disruption["consolidateAfter"]["default"], "0s");
    assert_eq!(disruption["budgets"]["default"], serde_json::json!([{ "nodes": "10%" }]));

    let schema = serde_json::to_value(EC2NodeClass::crd().spec.versions[0].schema.clone()).unwrap();
    let imds = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["metadataOptions"];
    assert_eq!(
        imds["default"],
        serde_json::json!({
            "httpEndpoint": "enabled",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": 1,
            "httpTokens": "required",
        })
    );
}
