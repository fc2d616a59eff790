//! The serving certificate: a throw-away CA signs one server certificate for the Service's DNS
//! names; the CA's certificate goes into the webhook's `caBundle` and its key is dropped once the
//! server certificate is signed, so nothing can ever be issued under it again and there is no
//! secret to store or mount. A new pair is made at every start and, while the process runs, every
//! [`crate::rotation::ROTATE_AFTER`] ([`crate::rotation`]); each is valid for [`VALID_DAYS`].
//!
//! The server presents whatever [`ServingKey`] holds at the start of each handshake, so a new
//! certificate takes effect for new connections without a restart.

use std::sync::{Arc, RwLock};

use jiff::{tz::TimeZone, Timestamp, ToSpan};
use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;

/// How long a certificate and its CA are valid, from the day they are made (and from a day
/// before, for clock skew). Four rotation periods: a rotation that cannot reach the API server
/// has three weeks of retries before the certificate still served expires.
pub const VALID_DAYS: i64 = 28;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("generating the serving certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("configuring TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A server certificate and key, and the PEM of the CA that signed it.
pub struct ServingCert {
    pub ca_pem: String,
    pub cert: CertificateDer<'static>,
    pub key: PrivateKeyDer<'static>,
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCert").field("ca_pem", &self.ca_pem).finish_non_exhaustive()
    }
}

/// The names a Service is reached by from the API server: `<name>.<namespace>.svc` is what it
/// dials; the others are there for humans with curl.
pub fn service_names(service: &str, namespace: &str, cluster_domain: &str) -> Vec<String> {
    vec![
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.{cluster_domain}"),
    ]
}

/// Generates a CA and a server certificate for `sans` (DNS names, or IP addresses such as
/// `127.0.0.1`), valid from a day ago (clock skew) for [`VALID_DAYS`] days.
pub fn generate(sans: &[String]) -> Result<ServingCert, TlsError> {
    let today = Timestamp::now().to_zoned(TimeZone::UTC);
    let date = |z: &jiff::Zoned| date_time_ymd(i32::from(z.year()), z.month() as u8, z.day() as u8);
    let not_before = date(&today.saturating_sub(1.day()));
    let not_after = date(&today.saturating_add(VALID_DAYS.days()));

    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name.push(DnType::CommonName, "dovetail-forwarder-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    (ca.not_before, ca.not_after) = (not_before, not_after);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;

    let mut server = CertificateParams::new(sans.to_vec())?;
    server.distinguished_name.push(DnType::CommonName, sans.first().map_or("dovetail-forwarder", String::as_str));
    server.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    (server.not_before, server.not_after) = (not_before, not_after);
    let key = KeyPair::generate()?;
    let cert = server.signed_by(&key, &ca)?;
    Ok(ServingCert {
        ca_pem: ca.pem(),
        cert: cert.der().clone(),
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    })
}

/// The certificate and key the server presents, replaceable while it serves: each handshake
/// takes the one held when it starts; connections already open keep theirs.
#[derive(Debug)]
pub struct ServingKey {
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
}

impl ServingKey {
    pub fn new(cert: &ServingCert) -> Result<Arc<ServingKey>, TlsError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let current = RwLock::new(certified(cert, &provider)?);
        Ok(Arc::new(ServingKey { provider, current }))
    }

    /// Presents `cert` from the next handshake on.
    pub fn replace(&self, cert: &ServingCert) -> Result<(), TlsError> {
        let key = certified(cert, &self.provider)?;
        *self.current.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = key;
        Ok(())
    }

    /// The certificate presented now.
    pub fn certificate(&self) -> CertificateDer<'static> {
        self.held().cert[0].clone()
    }

    fn held(&self) -> Arc<CertifiedKey> {
        Arc::clone(&self.current.read().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }
}

impl ResolvesServerCert for ServingKey {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.held())
    }
}

fn certified(cert: &ServingCert, provider: &CryptoProvider) -> Result<Arc<CertifiedKey>, TlsError> {
    Ok(Arc::new(CertifiedKey::from_der(vec![cert.cert.clone()], cert.key.clone_key(), provider)?))
}

/// A rustls server configuration presenting what `key` holds: HTTP/1.1 only (the API server keeps
/// a pool of connections to a webhook either way, and one protocol keeps the server small).
pub fn server_config(key: Arc<ServingKey>) -> Result<Arc<ServerConfig>, TlsError> {
    let mut config = ServerConfig::builder_with_provider(Arc::clone(&key.provider))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(key);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Whether a client trusting the PEM certificates of `bundle` (a `caBundle`: one CA or several,
/// as the API server reads it) accepts `cert` for `name` at `at`.
#[cfg(test)]
pub(crate) fn trusted_by(bundle: &str, cert: &CertificateDer<'_>, name: &str, at: Timestamp) -> bool {
    use rustls::client::danger::ServerCertVerifier;

    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots(bundle)), provider).build().unwrap();
    let name = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
    let at = rustls::pki_types::UnixTime::since_unix_epoch(std::time::Duration::from_secs(at.as_second() as u64));
    verifier.verify_server_cert(cert, &[], &name, &[], at).is_ok()
}

/// The CA certificates of a PEM bundle.
#[cfg(test)]
fn roots(bundle: &str) -> rustls::RootCertStore {
    use rustls::pki_types::pem::PemObject;

    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(bundle.as_bytes()) {
        roots.add(ca.expect("a PEM certificate")).expect("a CA certificate");
    }
    roots
}

#[cfg(test)]
mod tests {
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    const NAME: &str = "dovetail-forwarder.dovetail.svc";

    #[test]
    fn service_names_include_what_the_api_server_dials() {
        let names = service_names("dovetail-forwarder", "dovetail", "cluster.local");
        assert!(names.contains(&NAME.to_string()));
        assert_eq!(names.last().unwrap(), "dovetail-forwarder.dovetail.svc.cluster.local");
    }

    #[test]
    fn a_client_trusting_the_ca_accepts_the_server() {
        let cert = generate(&[NAME.into(), "127.0.0.1".into()]).unwrap();
        server_config(ServingKey::new(&cert).unwrap()).unwrap();
        let now = Timestamp::now();
        for name in [NAME, "127.0.0.1"] {
            assert!(trusted_by(&cert.ca_pem, &cert.cert, name, now), "{name}");
        }
        assert!(!trusted_by(&cert.ca_pem, &cert.cert, "elsewhere.svc", now));
        let other = generate(&[NAME.into()]).unwrap();
        assert!(!trusted_by(&other.ca_pem, &cert.cert, NAME, now), "another CA's certificate");
    }

    #[test]
    fn certificates_expire_after_valid_days() {
        let cert = generate(&[NAME.into()]).unwrap();
        let now = Timestamp::now();
        let in_days = |days: i64| now.checked_add((days * 24).hours()).unwrap();
        assert!(trusted_by(&cert.ca_pem, &cert.cert, NAME, in_days(VALID_DAYS - 1)));
        assert!(!trusted_by(&cert.ca_pem, &cert.cert, NAME, in_days(VALID_DAYS + 1)), "valid past {VALID_DAYS} days");
    }

    /// A TLS handshake with the server configured by `key`, from a client trusting `bundle`: the
    /// certificate the server presented, or None when the client refused it.
    async fn handshake(key: &Arc<ServingKey>, bundle: &str) -> Option<CertificateDer<'static>> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(server_config(Arc::clone(key)).unwrap());
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let _ = acceptor.accept(stream).await;
        });
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots(bundle))
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let name = rustls::pki_types::ServerName::try_from(NAME).unwrap();
        let stream = TcpStream::connect(address).await.unwrap();
        let presented = match connector.connect(name, stream).await {
            Ok(tls) => tls.get_ref().1.peer_certificates().map(|chain| chain[0].clone()),
            Err(_) => None,
        };
        server.await.unwrap();
        presented
    }

    #[tokio::test]
    async fn a_replaced_certificate_is_presented_from_the_next_handshake() {
        let first = generate(&[NAME.into()]).unwrap();
        let second = generate(&[NAME.into()]).unwrap();
        let key = ServingKey::new(&first).unwrap();
        assert_eq!(handshake(&key, &first.ca_pem).await, Some(first.cert.clone()));

        key.replace(&second).unwrap();
        assert_eq!(key.certificate(), second.cert);
        assert_eq!(handshake(&key, &first.ca_pem).await, None, "a client trusting only the old CA");
        // A caBundle holding both CAs, as during a rotation, accepts either certificate.
        let both = format!("{}\n{}", first.ca_pem.trim_end(), second.ca_pem);
        assert_eq!(handshake(&key, &both).await, Some(second.cert.clone()));
        assert_eq!(handshake(&key, &second.ca_pem).await, Some(second.cert));
    }
}
