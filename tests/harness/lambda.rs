//! The Lambda functions as `cargo lambda build --release --arm64` packages them: one
//! `<binary>/bootstrap` per function under a `lambda` directory, which SAM, the CDK app and the
//! infra tests take as the functions' code.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

/// The binaries of the three functions (their packages have the same names).
pub const BINARIES: [&str; 3] = ["dovetail-provisioner", "dovetail-interruption", "dovetail-sweeper"];

/// How CI (and a developer) builds them.
pub const BUILD: &str = "cargo lambda build --release --arm64 (PyPI cargo-lambda and ziglang; \
                         rustup target add aarch64-unknown-linux-gnu)";

/// The directory holding `<binary>/bootstrap` for every function in [`BINARIES`]: the
/// `DOVETAIL_LAMBDA_DIR` environment variable, else `$CARGO_TARGET_DIR/lambda`, else the
/// workspace's `target/lambda` (where cargo lambda writes). Fails naming the missing files and how
/// to build them.
pub fn artifacts() -> Result<PathBuf> {
    let dir = match (std::env::var_os("DOVETAIL_LAMBDA_DIR"), std::env::var_os("CARGO_TARGET_DIR")) {
        (Some(dir), _) => PathBuf::from(dir),
        (None, Some(target)) => PathBuf::from(target).join("lambda"),
        (None, None) => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/lambda"),
    };
    let missing: Vec<String> = BINARIES
        .iter()
        .map(|binary| dir.join(binary).join("bootstrap"))
        .filter(|bootstrap| !bootstrap.is_file())
        .map(|bootstrap| bootstrap.display().to_string())
        .collect();
    if !missing.is_empty() {
        bail!("the Lambda functions are not built: missing {}. Build them with {BUILD}", missing.join(", "));
    }
    Ok(dir)
}
