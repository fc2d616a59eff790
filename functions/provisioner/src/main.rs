//! The provisioner Lambda: a batch of doorbells from the doorbell queue → one level-triggered
//! reconcile (read the cluster and the NodeClaims, plan, launch, record) → partial batch
//! failures. Configuration: see `shared/aws/src/config.rs` and `functions/runtime/src/aws.rs`.

use dovetail_runtime::aws::{run, Kind};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    run(Kind::Provisioner).await
}
