//! The sweeper Lambda, on a schedule (EventBridge Scheduler, `rate(1 minute)`; the payload is
//! ignored): the provisioning safety net, then expiration, drift, consolidation, orphans and
//! registration timeouts, then the NodePools' status. Answers a summary; an error (the cluster or
//! the store unreachable) is retried by the next tick.

use dovetail_runtime::aws::Function;
use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    dovetail_runtime::logging::init();
    let function = Function::from_env("sweeper").await?;
    let function = &function;
    lambda_runtime::run(service_fn(move |_: LambdaEvent<serde_json::Value>| async move {
        function.sweep().await.map_err(lambda_runtime::Error::from)
    }))
    .await
}
