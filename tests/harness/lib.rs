//! The test harness: starts the real components integration tests talk to, on loopback ports, and
//! stops them when dropped. A component that cannot be started fails the test loudly with what is
//! missing and how CI installs it; nothing is silently skipped.

pub mod controlplane;
pub mod forwarder;
pub mod helm;
pub mod lambda;
pub mod moto;
pub mod scale;
