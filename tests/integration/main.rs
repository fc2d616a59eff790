//! Integration and end-to-end tests (one binary). Each module starts what it needs through the
//! harness in `tests/harness`.

mod aws;
mod controlplane;
mod e2e;
mod forwarder;
mod functions;
mod helm;
mod image;
mod infra;
mod kube;
mod readme;
mod scale;
