//! The interruption Lambda: a batch from the interruption queue — EventBridge spot interruption
//! warnings, rebalance recommendations, instance state changes, AWS Health scheduled changes, and
//! the functions' own delayed `{"resume": "<claim>"}` messages → replacements and drains →
//! partial batch failures (a malformed message fails alone).

use dovetail_runtime::aws::{run, Kind};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    run(Kind::Interruption).await
}
