//! Dovetail's simulator: the reconcilers the Lambdas run, driven over virtual time against an
//! in-memory world, with a Cluster Autoscaler-like baseline to compare against.
//!
//! - [`world`]: one shared state behind every port the reconcilers use (`Kube`, `Cloud`, `Store`,
//!   `Queue`, `Clock`), plus what the real world does on its own: instances boot and get
//!   interrupted, kube-scheduler binds pods, controllers recreate them, jobs finish.
//!
//! Everything is deterministic for a seed: seeded `SmallRng`, `BTreeMap` iteration, virtual time.

pub mod baseline;
pub mod scenario;
pub mod world;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Runs a future whose every await is already ready — the in-memory ports' futures are — to
/// completion without an async runtime.
///
/// # Panics
/// If the future is not ready at once: something awaited real I/O or a timer, which the
/// simulation never does.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a simulated port returned a future that is not ready"),
    }
}
