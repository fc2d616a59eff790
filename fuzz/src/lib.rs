//! Fuzz targets for every parser of outside input (issue 18, point 4).
//!
//! Each target is a text parser and an oracle (`check`: it panics when the parser breaks a
//! promise) plus a structure-aware generator (an `arbitrary` type rendered to text), so that
//! generated cases reach past the first syntax check. [`harness::run`] replays the target's seeds
//! (its `fuzz/corpus/<target>/` files and the fixture directories it names) and then generated
//! cases: the generator's, arbitrary text, and the seeds mutated byte by byte or as JSON/YAML
//! trees. Every case runs under a memory bound (a counting allocator) and a watchdog
//! that aborts on a hang. `docs/development.md` ("Fuzzing") has the commands.
//!
//! The targets whose parser lives in a crate that links the AWS SDK or a Kubernetes client keep
//! their oracle in that crate's unit tests (user data in `dovetail-aws`, AdmissionReviews in the
//! forwarder) and only their generator here, so this crate builds without either.

pub mod admission;
pub mod crd_objects;
pub mod cron;
pub mod duration;
pub mod eventbridge;
pub mod harness;
pub mod manifests;
pub mod memory;
pub mod objects;
pub mod quantity;
pub mod scenario;
pub mod sqs_batch;
pub mod tree;
pub mod user_data;
