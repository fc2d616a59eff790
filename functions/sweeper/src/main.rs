//! The sweeper Lambda, on a schedule (EventBridge Scheduler, `rate(1 minute)`; the payload is
//! ignored): the provisioning safety net, then expiration, drift, consolidation, orphans and
//! registration timeouts, then the NodePools' status. Answers a summary; an error (the cluster or
//! the store unreachable) is retried by the next tick.

use dovetail_runtime::aws::{run, Kind};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    run(Kind::Sweeper).await
}
