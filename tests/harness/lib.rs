//! The test harness: starts the real components integration tests talk to, on loopback ports, and
//! stops them when dropped. A component that cannot be started fails the test loudly with what is
//! missing and how CI installs it; nothing is silently skipped.

pub mod controlplane;
pub mod forwarder;
pub mod helm;
pub mod lambda;
pub mod moto;
pub mod scale;

use anyhow::{bail, Context, Result};

/// Runs `command` to completion (`shown`: how errors name it): its standard output, or an error
/// carrying its exit status and both outputs.
pub fn completed(command: &mut std::process::Command, shown: &str) -> Result<String> {
    let output = command.output().with_context(|| format!("starting {shown}"))?;
    if !output.status.success() {
        bail!(
            "{shown} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    String::from_utf8(output.stdout).with_context(|| format!("{shown}'s output is not UTF-8"))
}
