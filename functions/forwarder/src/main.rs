//! `dovetail-forwarder`: see the library (`src/lib.rs`) and `README.md`.

fn main() -> anyhow::Result<()> {
    // The error is logged as JSON too; this line is for a human reading `kubectl logs`.
    dovetail_forwarder::run_process()?;
    Ok(())
}
