//! The fuzz targets of this crate, one test each: the seeds, then a second of generated cases
//! (`DOVETAIL_FUZZ_CASES=N` for N cases: the soak in `docs/development.md`, "Fuzzing").
//! User data and AdmissionReviews run in `dovetail-aws`'s and the forwarder's unit tests.

use dovetail_fuzz::harness::run;
use dovetail_fuzz::{crd_objects, cron, duration, eventbridge, manifests, quantity, scenario, sqs_batch};

#[test]
fn fuzz_cron() {
    run(&cron::TARGET);
}

#[test]
fn fuzz_duration() {
    run(&duration::TARGET);
}

#[test]
fn fuzz_quantity() {
    run(&quantity::TARGET);
}

#[test]
fn fuzz_eventbridge() {
    run(&eventbridge::TARGET);
}

#[test]
fn fuzz_sqs_batch() {
    run(&sqs_batch::TARGET);
}

#[test]
fn fuzz_crd_objects() {
    run(&crd_objects::TARGET);
}

#[test]
fn fuzz_manifests() {
    run(&manifests::TARGET);
}

#[test]
fn fuzz_scenario() {
    run(&scenario::TARGET);
}
