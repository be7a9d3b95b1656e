//! TLS for the embedded API: a CA kept in the data dir (so kubeconfigs stay valid across
//! restarts) and a server certificate issued at each start for the addresses served; and a
//! node runtime's own certificate.
//!
//! The API serves TLS even on loopback: kubectl (client-go) never sends a bearer token over
//! plain HTTP, and every route needs one.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use axum_server::accept::NoDelayAcceptor;
use axum_server::tls_rustls::RustlsConfig;
use kairon_api::previews::{PreviewDomain, PreviewHost};
use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

pub struct TlsFiles {
    pub ca_pem: String,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The CA's key (PEM), which mints preview links' certificates.
    ca_key_pem: String,
}

fn ca_params() -> Result<CertificateParams> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "kairon-ca");
    dn.push(DnType::OrganizationName, "Kairon");
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    p.not_before = rcgen::date_time_ymd(2025, 1, 1);
    p.not_after = rcgen::date_time_ymd(2045, 1, 1);
    Ok(p)
}

/// Makes sure the data dir holds a CA and a certificate for `addr` (plus localhost and
/// `names`).
pub fn prepare(data_dir: &Path, addr: SocketAddr, names: &[String]) -> Result<TlsFiles> {
    let dir = data_dir.join("tls");
    std::fs::create_dir_all(&dir)?;
    let (ca_crt, ca_key) = (dir.join("ca.crt"), dir.join("ca.key"));
    if !ca_crt.exists() || !ca_key.exists() {
        let key = KeyPair::generate()?;
        let cert = ca_params()?.self_signed(&key)?;
        crate::up::write_private(&ca_key, key.serialize_pem().as_bytes())?;
        std::fs::write(&ca_crt, cert.pem())?;
    }
    let ca_pem = std::fs::read_to_string(&ca_crt).context("reading the CA certificate")?;
    let ca_key_pem = std::fs::read_to_string(&ca_key)?;
    let ca_key = KeyPair::from_pem(&ca_key_pem).context("reading the CA key")?;
    let issuer = Issuer::new(ca_params()?, ca_key);

    let extra = names;
    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    if !addr.ip().is_unspecified() && !addr.ip().is_loopback() {
        names.push(addr.ip().to_string());
    }
    if let Ok(h) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        names.push(h.trim().to_string());
    }
    names.extend(extra.iter().cloned());
    let mut params = CertificateParams::new(names)?;
    params.distinguished_name.push(DnType::CommonName, "kairon-api");
    params.not_before = rcgen::date_time_ymd(2025, 1, 1);
    params.not_after = rcgen::date_time_ymd(2045, 1, 1);
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    let (cert_path, key_path) = (dir.join("server.crt"), dir.join("server.key"));
    std::fs::write(&cert_path, cert.pem())?;
    crate::up::write_private(&key_path, key.serialize_pem().as_bytes())?;
    Ok(TlsFiles { ca_pem, cert: cert_path, key: key_path, ca_key_pem })
}

/// How preview links' hosts get their certificates.
pub struct PreviewTls<'a> {
    pub domain: &'a PreviewDomain,
    /// A certificate for `*.DOMAIN` and its key (PEM files), e.g. one a public CA issued; else
    /// each link's host gets one for its name alone, minted from the CA.
    pub wildcard: Option<(&'a Path, &'a Path)>,
}

/// An HTTPS server on `listener` whose connections send each write at once (TCP_NODELAY):
/// without it, an answer written in two parts waits for the client's delayed ACK, 40 ms on
/// Linux (a 100-row usage report took 48 ms over REST, 1 ms in the database).
pub fn https_server(
    listener: std::net::TcpListener,
    config: RustlsConfig,
) -> std::io::Result<axum_server::Server<SocketAddr, axum_server::tls_rustls::RustlsAcceptor<NoDelayAcceptor>>> {
    Ok(axum_server::from_tcp_rustls(listener, config)?.map(|tls| tls.acceptor(NoDelayAcceptor::new())))
}

/// The API's TLS configuration: its own certificate, and with previews, each preview link's host
/// gets the wildcard certificate given or one for that name, minted from the CA at its first
/// handshake.
pub async fn server_config(tls: &TlsFiles, previews: Option<PreviewTls<'_>>) -> Result<RustlsConfig> {
    let provider = rustls::crypto::ring::default_provider();
    let api = Arc::new(certified(&tls.cert, &tls.key, &provider)?);
    let previews = match previews {
        Some(p) => {
            let mut certs = PreviewCertificates::new(p.domain.clone(), &tls.ca_pem, &tls.ca_key_pem)?;
            if let Some((cert, key)) = p.wildcard {
                certs.wildcard = Some(Arc::new(certified(cert, key, &provider)?));
            }
            Some(certs)
        }
        None => None,
    };
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(ServerCertificates { api, previews }));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(RustlsConfig::from_config(Arc::new(config)))
}

/// A certificate chain and its key, from PEM files.
fn certified(cert: &Path, key: &Path, provider: &rustls::crypto::CryptoProvider) -> Result<CertifiedKey> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading {}", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading {}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key).with_context(|| format!("reading {}", key.display()))?;
    CertifiedKey::from_der(certs, key, provider).with_context(|| format!("{} and its key", cert.display()))
}

/// Picks the certificate for a handshake's server name.
#[derive(Debug)]
struct ServerCertificates {
    api: Arc<CertifiedKey>,
    previews: Option<PreviewCertificates>,
}

impl ServerCertificates {
    fn for_name(&self, name: Option<&str>) -> Arc<CertifiedKey> {
        let preview = match (&self.previews, name) {
            (Some(p), Some(name)) => p.for_name(name),
            _ => None,
        };
        preview.unwrap_or_else(|| self.api.clone())
    }
}

impl ResolvesServerCert for ServerCertificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.for_name(hello.server_name()))
    }
}

/// Certificates for preview links' hosts: the wildcard one given, else one name each (so a
/// browser never reuses one link's connection for another; with a wildcard it may, and each
/// request is still routed by its own host), all with one key, signed by the CA.
struct PreviewCertificates {
    domain: PreviewDomain,
    wildcard: Option<Arc<CertifiedKey>>,
    issuer: Issuer<'static, KeyPair>,
    key: KeyPair,
    signing: Arc<dyn rustls::sign::SigningKey>,
    ca: CertificateDer<'static>,
    minted: Mutex<HashMap<String, Arc<CertifiedKey>>>,
}

/// Minted certificates kept at once (a name's is minted again after the cache is cleared).
const MINTED_KEPT: usize = 4096;

impl std::fmt::Debug for PreviewCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreviewCertificates").field("domain", &self.domain).finish_non_exhaustive()
    }
}

impl PreviewCertificates {
    fn new(domain: PreviewDomain, ca_pem: &str, ca_key_pem: &str) -> Result<Self> {
        let issuer = Issuer::new(ca_params()?, KeyPair::from_pem(ca_key_pem).context("reading the CA key")?);
        let key = KeyPair::generate()?;
        let der = PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| anyhow::anyhow!("the preview key: {e}"))?;
        let signing = rustls::crypto::ring::sign::any_supported_type(&der)?;
        let ca = CertificateDer::from_pem_slice(ca_pem.as_bytes()).context("reading the CA certificate")?;
        Ok(PreviewCertificates { domain, wildcard: None, issuer, key, signing, ca, minted: Mutex::default() })
    }

    /// The certificate for `name` when it is a preview link's host.
    fn for_name(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        if !matches!(self.domain.parse(name), PreviewHost::Link { .. }) {
            return None;
        }
        if let Some(wildcard) = &self.wildcard {
            return Some(wildcard.clone());
        }
        let name = name.to_ascii_lowercase();
        let mut minted = self.minted.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = minted.get(&name) {
            return Some(found.clone());
        }
        let made = match self.mint(&name) {
            Ok(made) => Arc::new(made),
            Err(e) => {
                tracing::warn!(%name, "minting a preview certificate: {e:#}");
                return None;
            }
        };
        if minted.len() >= MINTED_KEPT {
            minted.clear();
        }
        minted.insert(name, made.clone());
        Some(made)
    }

    fn mint(&self, name: &str) -> Result<CertifiedKey> {
        let mut params = CertificateParams::new(vec![name.to_string()])?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.not_before = rcgen::date_time_ymd(2025, 1, 1);
        params.not_after = rcgen::date_time_ymd(2045, 1, 1);
        let cert = params.signed_by(&self.key, &self.issuer)?;
        Ok(CertifiedKey::new(vec![cert.der().clone(), self.ca.clone()], self.signing.clone()))
    }
}

/// A node runtime's own certificate and key, in `dir`: made on first use (self-signed, for
/// `names`) and kept, since its SHA-256 is what the node registers and the api pins. No CA is
/// involved, so no node holds anything that vouches for another.
pub fn runtime_certificate(dir: &Path, names: &[String]) -> Result<(PathBuf, PathBuf)> {
    let (cert_path, key_path) = (dir.join("runtime.crt"), dir.join("runtime.key"));
    if cert_path.exists() && key_path.exists() {
        return Ok((cert_path, key_path));
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut params = CertificateParams::new(names.to_vec())?;
    params.distinguished_name.push(DnType::CommonName, "kairon-runtime");
    params.not_before = rcgen::date_time_ymd(2025, 1, 1);
    params.not_after = rcgen::date_time_ymd(2045, 1, 1);
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    // The key first: a certificate without its key is remade, never served.
    crate::up::write_private(&key_path, key.serialize_pem().as_bytes())?;
    std::fs::write(&cert_path, cert.pem()).with_context(|| format!("writing {}", cert_path.display()))?;
    Ok((cert_path, key_path))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINK: &str = "0123456789abcdef0123456789abcdef-8000.localhost";

    /// Whether the leaf's DER holds `name` (its one subject alternative name, for a minted one).
    fn names(key: &CertifiedKey, name: &str) -> bool {
        key.cert[0].as_ref().windows(name.len()).any(|w| w == name.as_bytes())
    }

    #[tokio::test]
    async fn each_link_host_gets_a_certificate_for_its_name_or_the_wildcard_given() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let tls = prepare(dir.path(), "127.0.0.1:7443".parse().unwrap(), &[]).unwrap();
        let provider = rustls::crypto::ring::default_provider();
        let api = Arc::new(certified(&tls.cert, &tls.key, &provider).unwrap());
        let domain = PreviewDomain::new("localhost", Some(7443)).unwrap();
        let previews = PreviewCertificates::new(domain.clone(), &tls.ca_pem, &tls.ca_key_pem).unwrap();
        let certs = ServerCertificates { api: api.clone(), previews: Some(previews) };
        let minted = certs.for_name(Some(LINK));
        assert!(names(&minted, LINK) && !names(&api, LINK));
        assert_eq!(minted.cert.len(), 2, "the leaf, then the CA");
        assert!(Arc::ptr_eq(&minted, &certs.for_name(Some(LINK))), "minted once per name");
        for other in [Some("localhost"), Some("api.localhost"), None] {
            assert!(Arc::ptr_eq(&certs.for_name(other), &api), "{other:?} gets the API's own");
        }

        let mut previews = PreviewCertificates::new(domain, &tls.ca_pem, &tls.ca_key_pem).unwrap();
        previews.wildcard = Some(api.clone());
        let given = ServerCertificates { api: api.clone(), previews: Some(previews) };
        assert!(Arc::ptr_eq(&given.for_name(Some(LINK)), &api), "the wildcard given");
    }
}
