//! The fuzz target of an EC2NodeClass's `userData` (issue 18, point 4). Its generator is
//! `dovetail_fuzz::user_data`; the oracle is here, beside the MIME code, so that the fuzz crate
//! does not link the AWS SDK. `docs/development.md` ("Fuzzing").

use std::collections::BTreeMap;

use dovetail_fuzz::harness::{run, Target};
use dovetail_fuzz::user_data::{render, Input, NAME, VOCABULARY};

use super::{user_data, user_parts, NodeSettings, Part};
use crate::eks::ClusterFacts;
use dovetail_api::crd::AmiFamily;

const TARGET: Target<Input> = Target { name: NAME, fixtures: &[], vocabulary: VOCABULARY, render, check };

/// Whatever the class's user data, the node's document read back has the class's parts
/// unchanged, in order, then Dovetail's NodeConfig last (nodeadm merges in order: ours wins).
fn check(text: &str) {
    let cluster = ClusterFacts {
        name: "prod".into(),
        endpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com".into(),
        ca_pem: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".into(),
        version: "1.31".into(),
        service_cidr: None,
    };
    let labels = BTreeMap::from([("dovetail.dev/nodepool".to_string(), "default".to_string())]);
    let settings = NodeSettings {
        cluster: &cluster,
        labels: &labels,
        taints: &[],
        max_pods: 29,
        kubelet: None,
        user_data: Some(text),
        family: AmiFamily::Al2023,
        raid0: false,
    };
    // User data that is not a readable MIME document is refused, at the launch that uses it.
    let Ok(class) = user_parts(text) else {
        assert!(user_data(&settings).is_err(), "unreadable user data was merged:\n{text}");
        return;
    };
    let document = user_data(&settings).expect("readable user data merges");
    let read = user_parts(&document).expect("the merged document reads back");
    assert_eq!(read.len(), class.len() + 1, "the class's {} part(s) and the NodeConfig, in:\n{document}", class.len());
    // Bodies are kept byte for byte (CRLF included); only the line break before a delimiter
    // belongs to the delimiter, and it may complete a CR the body ended with.
    let end = |text: &str| text.trim_end_matches(['\r', '\n']).to_string();
    for (written, back) in class.iter().zip(&read) {
        let headers = |p: &Part| p.headers.iter().map(|h| end(h)).collect::<Vec<_>>();
        assert_eq!(headers(written), headers(back), "in:\n{document}");
        assert_eq!(end(&written.body), end(&back.body), "in:\n{document}");
    }
    let last = read.last().expect("the NodeConfig");
    assert!(last.body.contains("kind: NodeConfig") && last.body.contains("maxPods: 29"), "{document}");
}

#[test]
fn fuzz_user_data() {
    run(&TARGET);
}
