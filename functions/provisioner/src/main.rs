//! The provisioner Lambda: a batch of doorbells from the doorbell queue → one level-triggered
//! reconcile (read the cluster and the NodeClaims, plan, launch, record) → partial batch
//! failures. Configuration: see `shared/aws/src/config.rs` and `functions/runtime/src/aws.rs`.

use aws_lambda_events::event::sqs::SqsEvent;
use dovetail_runtime::aws::Function;
use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    dovetail_runtime::logging::init();
    let function = Function::from_env("provisioner").await?;
    let function = &function;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        function.doorbells(event.payload).await.map_err(lambda_runtime::Error::from)
    }))
    .await
}
