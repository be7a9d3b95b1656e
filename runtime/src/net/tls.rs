//! TLS the egress proxy terminates, only to inject a credential into HTTPS requests: the
//! node's egress CA (kept in the runtime's state dir, so guests' trust survives restarts)
//! issues a certificate for the allowed host the guest asked for, and the proxy talks TLS to
//! the real host, verifying it against the node's trust store (plus `[network]
//! upstream_ca_file`). Guests trust the CA through the bundle [`EgressCa::guest_bundle`]
//! mounted into them.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Where a guest finds the bundle (the node's trust store plus its egress CA), and the
/// variables that point the usual tools at it (pip and certifi ignore the system store).
pub const GUEST_BUNDLE_PATH: &str = "/etc/kairon/egress-ca.pem";
pub const GUEST_BUNDLE_ENV: [&str; 6] =
    ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "CURL_CA_BUNDLE"];
/// The system bundle of Debian-like guests, replaced by the guest bundle when present.
pub const SYSTEM_BUNDLE_PATH: &str = "/etc/ssl/certs/ca-certificates.crt";

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn ca_params() -> Result<CertificateParams, rcgen::Error> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    p.distinguished_name.push(DnType::CommonName, "Kairon node egress CA");
    p.distinguished_name.push(DnType::OrganizationName, "Kairon");
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    p.not_before = rcgen::date_time_ymd(2025, 1, 1);
    p.not_after = rcgen::date_time_ymd(2045, 1, 1);
    Ok(p)
}

fn setup_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("the egress CA: {e}"))
}

/// The node's egress CA and the certificates it issued, by host.
pub struct EgressCa {
    issuer: Issuer<'static, KeyPair>,
    bundle: PathBuf,
    servers: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
    upstream: Arc<rustls::ClientConfig>,
}

impl EgressCa {
    /// Loads the CA from `dir` (making it on first use, its key readable by root only) and
    /// writes the guests' bundle beside it.
    pub fn open(dir: &Path, upstream_ca_file: Option<&Path>) -> io::Result<EgressCa> {
        std::fs::create_dir_all(dir)?;
        let (crt, key) = (dir.join("ca.crt"), dir.join("ca.key"));
        if !crt.exists() || !key.exists() {
            let pair = KeyPair::generate().map_err(setup_err)?;
            let cert = ca_params().map_err(setup_err)?.self_signed(&pair).map_err(setup_err)?;
            write_private(&key, pair.serialize_pem().as_bytes())?;
            std::fs::write(&crt, cert.pem())?;
        }
        let ca_pem = std::fs::read_to_string(&crt)?;
        let pair = KeyPair::from_pem(&std::fs::read_to_string(&key)?).map_err(setup_err)?;
        let issuer = Issuer::new(ca_params().map_err(setup_err)?, pair);

        let system = std::fs::read(SYSTEM_BUNDLE_PATH).unwrap_or_default();
        let mut roots = rustls::RootCertStore::empty();
        let mut add = |pem: &[u8]| {
            for cert in CertificateDer::pem_slice_iter(pem).flatten() {
                let _ = roots.add(cert);
            }
        };
        add(&system);
        if let Some(extra) = upstream_ca_file {
            let pem = std::fs::read(extra).map_err(|e| {
                io::Error::new(e.kind(), format!("[network] upstream_ca_file {}: {e}", extra.display()))
            })?;
            add(&pem);
        }
        let mut upstream = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(setup_err)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        upstream.alpn_protocols = vec![b"http/1.1".to_vec()];

        let bundle = dir.join("guest-bundle.pem");
        let mut text = String::from_utf8_lossy(&system).into_owned();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&ca_pem);
        std::fs::write(&bundle, text)?;
        Ok(EgressCa { issuer, bundle, servers: Mutex::new(HashMap::new()), upstream: Arc::new(upstream) })
    }

    /// The host file guests get at [`GUEST_BUNDLE_PATH`].
    pub fn guest_bundle(&self) -> &Path {
        &self.bundle
    }

    /// The TLS config the proxy answers a guest with for `host` (issued once per host).
    pub fn server_config(&self, host: &str) -> io::Result<Arc<rustls::ServerConfig>> {
        if let Some(c) = self.servers.lock().unwrap_or_else(|e| e.into_inner()).get(host) {
            return Ok(c.clone());
        }
        let mut params = CertificateParams::new(vec![host.to_string()]).map_err(setup_err)?;
        params.distinguished_name.push(DnType::CommonName, host);
        params.not_before = rcgen::date_time_ymd(2025, 1, 1);
        params.not_after = rcgen::date_time_ymd(2045, 1, 1);
        let key = KeyPair::generate().map_err(setup_err)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(setup_err)?;
        let chain = vec![cert.der().clone()];
        let key = PrivateKeyDer::try_from(key.serialize_der()).map_err(setup_err)?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(setup_err)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(setup_err)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        self.servers.lock().unwrap_or_else(|e| e.into_inner()).insert(host.to_string(), config.clone());
        Ok(config)
    }

    /// The TLS config the proxy dials real hosts with.
    pub fn upstream(&self) -> Arc<rustls::ClientConfig> {
        self.upstream.clone()
    }
}

fn write_private(path: &Path, data: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    f.write_all(data)
}

/// A stream that yields `prefix` (bytes already read from `inner`) before `inner`'s own.
pub struct Prefixed<S> {
    prefix: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Prefixed<S> {
    pub fn new(prefix: Vec<u8>, inner: S) -> Self {
        Prefixed { prefix, at: 0, inner }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.at < self.prefix.len() {
            let n = (self.prefix.len() - self.at).min(buf.remaining());
            let at = self.at;
            buf.put_slice(&self.prefix[at..at + n]);
            self.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_is_kept_and_its_key_is_root_only() {
        let dir = tempfile::tempdir().unwrap();
        let ca = EgressCa::open(dir.path(), None).unwrap();
        ca.server_config("allowed.test").unwrap();
        let first = std::fs::read(dir.path().join("ca.crt")).unwrap();
        drop(ca);
        let again = EgressCa::open(dir.path(), None).unwrap();
        assert_eq!(std::fs::read(dir.path().join("ca.crt")).unwrap(), first, "the same CA across restarts");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("ca.key")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let bundle = std::fs::read_to_string(again.guest_bundle()).unwrap();
        assert!(bundle.ends_with(&String::from_utf8(first).unwrap()), "the bundle ends with the CA");
    }
}
