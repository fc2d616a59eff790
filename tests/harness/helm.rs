//! Helm, as `tests/helm/install.sh` caches it under
//! `${DOVETAIL_CACHE_DIR:-$HOME/.cache/dovetail}/helm/<version>/helm` (the version is
//! `tests/helm/VERSION`), and the chart `infra/helm/dovetail` rendered by it. A missing Helm fails
//! with the command that installs it: a test that needs it never silently skips.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::controlplane::{cache_root, is_executable};

/// The Helm version `tests/helm/install.sh` builds (overridable with `DOVETAIL_HELM_VERSION`, for
/// both).
const VERSION_FILE: &str = include_str!("../helm/VERSION");

/// The cached Helm binary.
#[derive(Debug, Clone)]
pub struct Helm {
    pub version: String,
    pub path: PathBuf,
}

impl Helm {
    /// Finds the binary `tests/helm/install.sh` built, or says how to build it.
    pub fn locate() -> Result<Helm> {
        let version = std::env::var("DOVETAIL_HELM_VERSION").unwrap_or_else(|_| VERSION_FILE.trim().to_string());
        let path = cache_root()?.join("helm").join(&version).join("helm");
        if !is_executable(&path) {
            bail!(
                "helm {version} is not installed: missing {}. Run tests/helm/install.sh (about 2 minutes cold; \
                 tests/run-all.sh does it)",
                path.display()
            );
        }
        Ok(Helm { version, path })
    }

    /// A `helm` command, run from the repository's root, with Helm's own configuration, cache and
    /// data directories in a temporary directory (none of the user's repositories or plugins).
    pub fn command(&self) -> Command {
        let home = std::env::temp_dir().join(format!("dovetail-helm-home-{}", std::process::id()));
        let mut command = Command::new(&self.path);
        command
            .current_dir(crate::lambda::workspace())
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_DATA_HOME", home.join("data"))
            .stdin(Stdio::null());
        command
    }

    /// `helm <args>` to completion: its standard output, or an error with both outputs.
    pub fn run(&self, args: &[&str]) -> Result<String> {
        let mut command = self.command();
        command.args(args);
        crate::completed(&mut command, &format!("helm {}", args.join(" ")))
    }

    /// `helm template <release> infra/helm/dovetail --namespace <namespace> --include-crds
    /// --kube-version <kube_version> <args>`: every object the chart installs (its CRDs first).
    pub fn template(&self, release: &str, namespace: &str, kube_version: &str, args: &[&str]) -> Result<String> {
        let chart = CHART.to_string();
        let mut all = vec!["template", release, &chart, "--namespace", namespace, "--include-crds"];
        all.extend(["--kube-version", kube_version]);
        all.extend(args);
        self.run(&all)
    }
}

/// The chart, from the repository's root.
pub const CHART: &str = "infra/helm/dovetail";

/// The documents of a multi-document YAML text, empty ones left out.
pub fn documents(yaml: &str) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(yaml) {
        let value: Value = serde::Deserialize::deserialize(document).context("parsing rendered YAML")?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

/// `Kind/name` of a document.
pub fn kind_name(document: &Value) -> String {
    format!(
        "{}/{}",
        document["kind"].as_str().unwrap_or("<no kind>"),
        document["metadata"]["name"].as_str().unwrap_or("<no name>")
    )
}
