//! Keeps the forwarder's ValidatingWebhookConfiguration trusting this process's certificates:
//! every webhook in it gets the bundle of our CAs as `caBundle` (one CA, two during a rotation:
//! [`crate::rotation`]), at start and again whenever a periodic check finds it changed (the
//! configuration re-created, another replica's CA).
//!
//! RBAC: `get` and `patch` on `validatingwebhookconfigurations`, restricted by `resourceNames` to
//! this one configuration (`infra/k8s/forwarder/rbac.yaml`).

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::ByteString;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

/// The field manager of our patches (shown in `managedFields`).
const MANAGER: &str = "dovetail-forwarder";

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error(
        "ValidatingWebhookConfiguration {0} does not exist: apply infra/k8s/forwarder (or set \
         DOVETAIL_WEBHOOK_CONFIGURATION to its name)"
    )]
    NotFound(String),
    #[error("ValidatingWebhookConfiguration {0} has no webhooks")]
    Empty(String),
    #[error(
        "not allowed to {verb} ValidatingWebhookConfiguration {name}: the forwarder's ServiceAccount needs get and \
         patch on it (infra/k8s/forwarder/rbac.yaml): {message}"
    )]
    Forbidden { verb: &'static str, name: String, message: String },
    #[error("{verb} ValidatingWebhookConfiguration {name}: {source}")]
    Api {
        verb: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl WebhookError {
    /// Whether trying again later can help (the API server unreachable, a conflict) — as opposed
    /// to a missing object or missing permissions, which need a person.
    pub fn is_transient(&self) -> bool {
        matches!(self, WebhookError::Api { .. })
    }
}

/// One ValidatingWebhookConfiguration, whose webhooks should trust our CAs.
#[derive(Clone)]
pub struct CaBundle {
    api: Api<ValidatingWebhookConfiguration>,
    name: String,
}

impl CaBundle {
    pub fn new(client: Client, name: &str) -> CaBundle {
        CaBundle { api: Api::all(client), name: name.to_string() }
    }

    /// Sets `bundle` (PEM certificates) as `caBundle` of every webhook of the configuration that
    /// does not have exactly it yet; `true` when it patched.
    pub async fn ensure(&self, bundle: &str) -> Result<bool, WebhookError> {
        let name = &self.name;
        let configuration = self.api.get_opt(name).await.map_err(|e| self.error("get", e))?;
        let configuration = configuration.ok_or_else(|| WebhookError::NotFound(name.clone()))?;
        let webhooks = configuration.webhooks.unwrap_or_default();
        if webhooks.is_empty() {
            return Err(WebhookError::Empty(name.clone()));
        }
        let stale: Vec<&str> = webhooks
            .iter()
            .filter(|w| w.client_config.ca_bundle.as_ref().map(|b| b.0.as_slice()) != Some(bundle.as_bytes()))
            .map(|w| w.name.as_str())
            .collect();
        if stale.is_empty() {
            return Ok(false);
        }
        // A strategic merge patch: `webhooks` merges by name, so only `caBundle` of the named
        // entries changes, whatever else someone edits at the same time.
        let bundle = ByteString(bundle.as_bytes().to_vec());
        let patch = json!({
            "webhooks": stale.iter().map(|w| json!({"name": w, "clientConfig": {"caBundle": bundle}})).collect::<Vec<_>>(),
        });
        let params = PatchParams { field_manager: Some(MANAGER.into()), ..PatchParams::default() };
        self.api.patch(name, &params, &Patch::Strategic(&patch)).await.map_err(|e| self.error("patch", e))?;
        Ok(true)
    }

    fn error(&self, verb: &'static str, error: kube::Error) -> WebhookError {
        match error {
            kube::Error::Api(status) if status.code == 403 => {
                WebhookError::Forbidden { verb, name: self.name.clone(), message: status.message }
            }
            source => WebhookError::Api { verb, name: self.name.clone(), source },
        }
    }
}
