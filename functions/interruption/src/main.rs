//! The interruption Lambda: a batch from the interruption queue — EventBridge spot interruption
//! warnings, rebalance recommendations, instance state changes, AWS Health scheduled changes, and
//! the functions' own delayed `{"resume": "<claim>"}` messages → replacements and drains →
//! partial batch failures (a malformed message fails alone).

use aws_lambda_events::event::sqs::SqsEvent;
use dovetail_runtime::aws::Function;
use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    dovetail_runtime::logging::init();
    let function = Function::from_env("interruption").await?;
    let function = &function;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        function.interruptions(event.payload).await.map_err(lambda_runtime::Error::from)
    }))
    .await
}
