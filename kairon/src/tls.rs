//! TLS for the embedded API: a CA kept in the data dir (so kubeconfigs stay valid across
//! restarts) and a server certificate issued at each start for the addresses served; and a
//! node runtime's own certificate.
//!
//! The API serves TLS even on loopback: kubectl (client-go) never sends a bearer token over
//! plain HTTP, and every route needs one.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

pub struct TlsFiles {
    pub ca_pem: String,
    pub cert: PathBuf,
    pub key: PathBuf,
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
    let ca_key = KeyPair::from_pem(&std::fs::read_to_string(&ca_key)?).context("reading the CA key")?;
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
    Ok(TlsFiles { ca_pem, cert: cert_path, key: key_path })
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
