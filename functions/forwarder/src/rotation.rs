//! Rotating the serving certificate while the forwarder runs, without a moment in which the API
//! server would be shown a certificate it does not trust:
//!
//! 1. after [`ROTATE_AFTER`] of serving one certificate, a new CA and certificate are made, and the
//!    webhook configuration's `caBundle` is set to both CAs (the old one first);
//! 2. once that bundle has been in place for [`TRUST_DELAY`] (the API servers read webhook
//!    configurations through a watch, within seconds), the server presents the new certificate
//!    from its next handshake on, and the bundle is set to the new CA alone.
//!
//! Each step happens at a periodic check (every minute, with the `caBundle` check it replaces).
//! A step whose `caBundle` patch fails is tried again at the next check, while the certificate
//! being served stays valid: certificates live [`tls::VALID_DAYS`], four times [`ROTATE_AFTER`].

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::tls::{self, ServingCert, ServingKey, TlsError};
use crate::webhook::{CaBundle, WebhookError};

/// How long one certificate is served before the next replaces it.
pub const ROTATE_AFTER: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long a `caBundle` holding the next CA must have been in place before the server presents
/// the next certificate.
pub const TRUST_DELAY: Duration = Duration::from_secs(30);

/// Where the CAs the API server trusts are kept: the webhook configuration's `caBundle`
/// ([`CaBundle`]), or a stand-in in tests.
pub trait Trust {
    /// Makes `bundle` (PEM certificates) the trusted CAs; `true` when that changed anything.
    fn ensure(&self, bundle: &str) -> impl Future<Output = Result<bool, WebhookError>>;
}

impl Trust for CaBundle {
    async fn ensure(&self, bundle: &str) -> Result<bool, WebhookError> {
        CaBundle::ensure(self, bundle).await
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RotationError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Trust(#[from] WebhookError),
}

/// What a [`Rotation::check`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// The bundle was as it should be; nothing changed.
    Unchanged,
    /// The bundle did not hold what it should (at start; after the configuration was re-created
    /// or edited) and was set.
    BundleSet,
    /// A next CA was made or re-offered and the bundle now trusts it beside the current one.
    NextTrusted,
    /// The server now presents the next certificate, and the bundle trusts its CA alone.
    Rotated,
}

/// The certificate being served, the next one while a rotation is under way, and the names they
/// are made for.
pub struct Rotation {
    sans: Vec<String>,
    serving: Arc<ServingKey>,
    current: ServingCert,
    serving_since: Instant,
    next: Option<Next>,
}

struct Next {
    cert: ServingCert,
    /// When a bundle trusting it was last set or found in place.
    trusted_since: Option<Instant>,
}

impl Rotation {
    /// Starts with `current`, which `serving` presents since `now`.
    pub fn new(sans: Vec<String>, current: ServingCert, serving: Arc<ServingKey>, now: Instant) -> Rotation {
        Rotation { sans, serving, current, serving_since: now, next: None }
    }

    /// The `caBundle` the webhook configuration should hold: the current CA, then the next one
    /// while a rotation is under way.
    pub fn bundle(&self) -> String {
        match &self.next {
            Some(next) => format!("{}\n{}", self.current.ca_pem.trim_end(), next.cert.ca_pem),
            None => self.current.ca_pem.clone(),
        }
    }

    /// One check at `now`: starts a rotation when it is due, sets the bundle, and switches to the
    /// next certificate once the bundle has trusted it for [`TRUST_DELAY`].
    pub async fn check(&mut self, trust: &impl Trust, now: Instant) -> Result<Checked, RotationError> {
        if self.next.is_none() && now.saturating_duration_since(self.serving_since) >= ROTATE_AFTER {
            self.next = Some(Next { cert: tls::generate(&self.sans)?, trusted_since: None });
        }
        let patched = trust.ensure(&self.bundle()).await?;
        let Some(next) = &mut self.next else {
            return Ok(if patched { Checked::BundleSet } else { Checked::Unchanged });
        };
        let newly_trusted = next.trusted_since.is_none();
        if patched || newly_trusted {
            // Set just now (or found already set): the API servers may not have read it yet.
            next.trusted_since = Some(now);
            return Ok(if newly_trusted { Checked::NextTrusted } else { Checked::BundleSet });
        }
        if next.trusted_since.is_some_and(|since| now.saturating_duration_since(since) < TRUST_DELAY) {
            return Ok(Checked::Unchanged);
        }
        let next = self.next.take().expect("matched above");
        self.serving.replace(&next.cert)?;
        self.current = next.cert;
        self.serving_since = now;
        // Nothing presents the old certificate any more: the bundle drops its CA. Should this
        // patch fail, the next check sets the same bundle.
        trust.ensure(&self.bundle()).await?;
        Ok(Checked::Rotated)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use jiff::Timestamp;

    use super::*;

    const NAME: &str = "dovetail-forwarder.dovetail.svc";

    /// A `caBundle` in memory, which can be made to refuse patches or be changed behind our back.
    #[derive(Default)]
    struct Bundle {
        held: Mutex<String>,
        refuse: Mutex<bool>,
    }

    impl Bundle {
        fn held(&self) -> String {
            self.held.lock().unwrap().clone()
        }
    }

    impl Trust for Bundle {
        async fn ensure(&self, bundle: &str) -> Result<bool, WebhookError> {
            if *self.refuse.lock().unwrap() {
                return Err(WebhookError::Empty("dovetail-forwarder".into()));
            }
            let mut held = self.held.lock().unwrap();
            let changed = *held != bundle;
            *held = bundle.to_string();
            Ok(changed)
        }
    }

    fn start(now: Instant) -> (Rotation, Arc<ServingKey>, ServingCert) {
        let sans = vec![NAME.to_string()];
        let first = tls::generate(&sans).unwrap();
        let key = ServingKey::new(&first).unwrap();
        let kept = ServingCert { ca_pem: first.ca_pem.clone(), cert: first.cert.clone(), key: first.key.clone_key() };
        (Rotation::new(sans, first, Arc::clone(&key), now), key, kept)
    }

    /// Checks at `at`, and that the API server, trusting whatever the bundle holds afterwards,
    /// accepts the certificate the server presents: at no step may it be shown one it does not
    /// trust.
    async fn check(rotation: &mut Rotation, bundle: &Bundle, key: &ServingKey, at: Instant) -> Checked {
        let checked = rotation.check(bundle, at).await.unwrap();
        assert!(tls::trusted_by(&bundle.held(), &key.certificate(), NAME, Timestamp::now()), "after {checked:?}");
        checked
    }

    #[tokio::test]
    async fn the_new_certificate_is_presented_only_once_its_ca_is_trusted() {
        let t0 = Instant::now();
        let days = |d: u64| t0 + Duration::from_secs(d * 24 * 3600);
        let (mut rotation, key, first) = start(t0);
        let bundle = Bundle::default();

        assert_eq!(check(&mut rotation, &bundle, &key, t0).await, Checked::BundleSet);
        assert_eq!(bundle.held(), first.ca_pem);
        assert_eq!(check(&mut rotation, &bundle, &key, days(6)).await, Checked::Unchanged);

        // Due: the bundle trusts both CAs, the server still presents the first certificate.
        assert_eq!(check(&mut rotation, &bundle, &key, days(7)).await, Checked::NextTrusted);
        assert!(bundle.held().starts_with(first.ca_pem.trim_end()) && bundle.held().len() > first.ca_pem.len());
        assert_eq!(key.certificate(), first.cert);
        let too_soon = days(7) + TRUST_DELAY - Duration::from_secs(1);
        assert_eq!(check(&mut rotation, &bundle, &key, too_soon).await, Checked::Unchanged);
        assert_eq!(key.certificate(), first.cert);

        // Trusted long enough: the second certificate is presented, its CA alone is trusted.
        let switched = days(7) + Duration::from_secs(60);
        assert_eq!(check(&mut rotation, &bundle, &key, switched).await, Checked::Rotated);
        assert_ne!(key.certificate(), first.cert);
        assert!(!bundle.held().contains(first.ca_pem.trim_end()), "the old CA is still trusted");
        assert!(!tls::trusted_by(&bundle.held(), &first.cert, NAME, Timestamp::now()));

        // The next rotation counts from the switch.
        let second = key.certificate();
        assert_eq!(check(&mut rotation, &bundle, &key, switched + ROTATE_AFTER / 2).await, Checked::Unchanged);
        assert_eq!(check(&mut rotation, &bundle, &key, switched + ROTATE_AFTER).await, Checked::NextTrusted);
        let later = switched + ROTATE_AFTER + Duration::from_secs(60);
        assert_eq!(check(&mut rotation, &bundle, &key, later).await, Checked::Rotated);
        assert_ne!(key.certificate(), second);
    }

    #[tokio::test]
    async fn a_bundle_that_cannot_be_set_holds_the_old_certificate_and_a_reset_one_restarts_the_wait() {
        let t0 = Instant::now();
        let (mut rotation, key, first) = start(t0);
        let bundle = Bundle::default();
        check(&mut rotation, &bundle, &key, t0).await;

        // The API server refuses the patch: nothing changes where it matters.
        *bundle.refuse.lock().unwrap() = true;
        let due = t0 + ROTATE_AFTER;
        assert!(matches!(rotation.check(&bundle, due).await, Err(RotationError::Trust(_))));
        assert_eq!(bundle.held(), first.ca_pem);
        assert_eq!(key.certificate(), first.cert);
        let minute = Duration::from_secs(60);
        assert!(rotation.check(&bundle, due + minute).await.is_err());
        assert_eq!(key.certificate(), first.cert);

        // It answers again: the next CA is trusted first, the switch waits its delay from there.
        *bundle.refuse.lock().unwrap() = false;
        assert_eq!(check(&mut rotation, &bundle, &key, due + 2 * minute).await, Checked::NextTrusted);
        assert_eq!(key.certificate(), first.cert);

        // Someone resets the bundle to the old CA alone just before the switch: set again, and
        // the wait starts over.
        *bundle.held.lock().unwrap() = first.ca_pem.clone();
        assert_eq!(check(&mut rotation, &bundle, &key, due + 3 * minute).await, Checked::BundleSet);
        assert_eq!(key.certificate(), first.cert);
        let soon = due + 3 * minute + TRUST_DELAY / 2;
        assert_eq!(check(&mut rotation, &bundle, &key, soon).await, Checked::Unchanged);
        assert_eq!(key.certificate(), first.cert);
        assert_eq!(check(&mut rotation, &bundle, &key, due + 4 * minute).await, Checked::Rotated);
        assert_ne!(key.certificate(), first.cert);
    }
}
