//! The fuzz target of AdmissionReview bodies (issue 18, point 4). Its generator is
//! `dovetail_fuzz::admission`; the oracle is here, beside the decoder, so that the fuzz crate does
//! not link the forwarder's Kubernetes client and AWS SDK. `docs/development.md` ("Fuzzing").

use dovetail_fuzz::admission::{render, Input, FIXTURES, NAME, VOCABULARY};
use dovetail_fuzz::harness::{run, Target};
use jiff::Timestamp;
use serde_json::Value;

use super::{review, Outcome};

/// What makes a body an AdmissionReview request, read with serde's duplicate-field check.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Head {
    api_version: String,
    kind: String,
    request: Request,
}

#[derive(serde::Deserialize)]
struct Request {
    uid: String,
}

const TARGET: Target<Input> = Target { name: NAME, fixtures: FIXTURES, vocabulary: VOCABULARY, render, check };

/// Whatever the body, the answer is an allowing AdmissionReview, carrying the request's uid
/// whenever the body has one (or the API server would not take it), unless the body is no
/// AdmissionReview at all; a doorbell's body is JSON that names what rang; a malformed body says
/// why.
fn check(text: &str) {
    let now: Timestamp = "2026-11-21T15:05:45.624Z".parse().expect("a time");
    let reviewed = review(text.as_bytes(), now);
    let body: Option<Value> = serde_json::from_str(text).ok();
    if let Outcome::NotReview(why) = &reviewed.outcome {
        // Refused (HTTP 400, no body) only when it is no AdmissionReview the API server sends —
        // read strictly, as the forwarder reads it (a repeated key is no JSON the API server
        // writes, though a `Value` keeps the last one).
        let review = serde_json::from_str::<Head>(text).is_ok_and(|h| {
            h.api_version == "admission.k8s.io/v1" && h.kind == "AdmissionReview" && !h.request.uid.is_empty()
        });
        assert!(!review && !why.is_empty() && reviewed.response.is_empty(), "{why}");
        return;
    }
    let answer: Value = serde_json::from_slice(&reviewed.response).expect("the answer is JSON");
    assert_eq!(
        (answer["kind"].as_str(), answer["response"]["allowed"].as_bool()),
        (Some("AdmissionReview"), Some(true))
    );
    if let Some(uid) = body.as_ref().and_then(|b| b.pointer("/request/uid")).and_then(Value::as_str) {
        assert_eq!(answer["response"]["uid"].as_str(), Some(uid), "{:?}", reviewed.outcome);
    }
    match &reviewed.outcome {
        Outcome::Doorbell(doorbell) => {
            let rung: Value = serde_json::from_str(&doorbell.body()).expect("a doorbell's body is JSON");
            let key = if doorbell.kind() == "pod" { "pod" } else { doorbell.kind() };
            assert!(rung.get(key).is_some_and(Value::is_string), "{rung}");
        }
        Outcome::Malformed(why) => assert!(!why.is_empty()),
        Outcome::Ignored | Outcome::Unhandled | Outcome::DryRun | Outcome::NotReview(_) => {}
    }
}

#[test]
fn fuzz_admission_review() {
    run(&TARGET);
}
