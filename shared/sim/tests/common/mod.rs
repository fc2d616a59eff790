//! What the simulator's integration tests share: messages as AWS sends them, and moving the
//! world's clock.

use std::time::Duration;

use dovetail_sim::world::World;

/// An EventBridge spot warning for `instance`, as EC2 sends it.
pub fn spot_warning(instance: &str) -> String {
    serde_json::json!({
        "version": "0", "id": format!("warn-{instance}"), "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2", "account": "123456789012", "time": "2026-01-05T00:10:00Z", "region": "us-east-1",
        "resources": [format!("arn:aws:ec2:us-east-1a:instance/{instance}")],
        "detail": {"instance-id": instance, "instance-action": "terminate"}
    })
    .to_string()
}

/// Moves the world `secs` seconds on.
pub fn later(w: &World, secs: u64) {
    w.advance(w.now().plus(Duration::from_secs(secs)));
}
