//! The serving certificate, made at every start: a throw-away CA signs one server certificate for
//! the Service's DNS names; the CA's certificate becomes the webhook's `caBundle` and its key is
//! dropped once the server certificate is signed, so nothing can ever be issued under it again
//! and there is no secret to store, mount or rotate (a restart makes a new pair).

use std::sync::Arc;

use jiff::{tz::TimeZone, Timestamp, ToSpan};
use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;

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
/// `127.0.0.1`), valid from a day ago (clock skew) for ten years.
pub fn generate(sans: &[String]) -> Result<ServingCert, TlsError> {
    let today = Timestamp::now().to_zoned(TimeZone::UTC);
    let date = |z: &jiff::Zoned| date_time_ymd(i32::from(z.year()), z.month() as u8, z.day() as u8);
    let not_before = date(&today.saturating_sub(1.day()));
    let not_after = date(&today.saturating_add(10.years()));

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

/// A rustls server configuration for `cert`: HTTP/1.1 only (the API server keeps a pool of
/// connections to a webhook either way, and one protocol keeps the server small).
pub fn server_config(cert: &ServingCert) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.clone()], cert.key.clone_key())?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use rustls::client::danger::ServerCertVerifier;

    use super::*;

    #[test]
    fn service_names_include_what_the_api_server_dials() {
        let names = service_names("dovetail-forwarder", "dovetail", "cluster.local");
        assert!(names.contains(&"dovetail-forwarder.dovetail.svc".to_string()));
        assert_eq!(names.last().unwrap(), "dovetail-forwarder.dovetail.svc.cluster.local");
    }

    #[test]
    fn a_client_trusting_the_ca_accepts_the_server() {
        let cert = generate(&["dovetail-forwarder.dovetail.svc".into(), "127.0.0.1".into()]).unwrap();
        server_config(&cert).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        let ca = rustls::pki_types::pem::PemObject::from_pem_slice(cert.ca_pem.as_bytes()).unwrap();
        roots.add(ca).unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build().unwrap();
        let now = rustls::pki_types::UnixTime::now();
        for name in ["dovetail-forwarder.dovetail.svc", "127.0.0.1"] {
            let name = rustls::pki_types::ServerName::try_from(name).unwrap();
            verifier.verify_server_cert(&cert.cert, &[], &name, &[], now).unwrap();
        }
        let other = rustls::pki_types::ServerName::try_from("elsewhere.svc").unwrap();
        assert!(verifier.verify_server_cert(&cert.cert, &[], &other, &[], now).is_err());
    }
}
