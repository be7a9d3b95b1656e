//! Certificate pinning: across a cluster each node's runtime serves a certificate of its own,
//! and its node registers the certificate's SHA-256 in its KaironNode (which only that node may
//! write). A client of that runtime accepts that certificate and no other, so a node that could
//! redirect the api's traffic for another node still cannot take the TLS session (and the grant
//! in it): it does not hold the other node's key.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};

/// The SHA-256 of a certificate (DER), written as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CertificatePin([u8; 32]);

#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("{0:?} is not a certificate's SHA-256: give 64 lowercase hex digits")]
    Malformed(String),
    #[error("no certificate in the PEM")]
    NoCertificate,
    #[error("reading the certificate's PEM: {0}")]
    Pem(String),
}

impl CertificatePin {
    /// The pin of a certificate (DER).
    pub fn of(der: &[u8]) -> CertificatePin {
        let mut pin = [0u8; 32];
        pin.copy_from_slice(&Sha256::digest(der));
        CertificatePin(pin)
    }

    /// The pin of the first certificate of a PEM file (the leaf of a chain).
    pub fn of_pem(pem: &[u8]) -> Result<CertificatePin, PinError> {
        use rustls::pki_types::pem::PemObject;
        let first = CertificateDer::pem_slice_iter(pem).next().ok_or(PinError::NoCertificate)?;
        Ok(CertificatePin::of(&first.map_err(|e| PinError::Pem(e.to_string()))?))
    }

    /// A client configuration that trusts the certificate with this pin alone.
    pub(crate) fn client_config(self) -> rustls::ClientConfig {
        let provider = rustls::crypto::ring::default_provider();
        let verifier = PinnedServer { pin: self, provider: Arc::new(provider) };
        rustls::ClientConfig::builder()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth()
    }
}

impl FromStr for CertificatePin {
    type Err = PinError;

    fn from_str(s: &str) -> Result<Self, PinError> {
        let malformed = || PinError::Malformed(s.chars().take(80).collect());
        if s.len() != 64 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(malformed());
        }
        let mut pin = [0u8; 32];
        hex::decode_to_slice(s, &mut pin).map_err(|_| malformed())?;
        Ok(CertificatePin(pin))
    }
}

impl fmt::Display for CertificatePin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for CertificatePin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{self}")
    }
}

/// Accepts exactly the pinned certificate. Names, issuers and dates are not consulted: the pin
/// is the runtime's identity, registered by its node, and the handshake still proves the peer
/// holds the certificate's key.
#[derive(Debug)]
struct PinnedServer {
    pin: CertificatePin,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinnedServer {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let presented = CertificatePin::of(end_entity);
        if presented == self.pin {
            return Ok(ServerCertVerified::assertion());
        }
        let why = format!(
            "the runtime presented certificate sha256:{presented}, not sha256:{} that its node registered",
            self.pin
        );
        Err(rustls::Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(Arc::new(
            std::io::Error::other(why),
        )))))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_64_lowercase_hex_digits() {
        let pin = CertificatePin::of(b"a certificate");
        let text = pin.to_string();
        assert_eq!(text.len(), 64);
        assert_eq!(text.parse::<CertificatePin>().unwrap(), pin);
        for bad in ["", "zz", &text[..63], &text.to_uppercase(), &format!("{text}0"), &format!("+{}", &text[1..])] {
            assert!(bad.parse::<CertificatePin>().is_err(), "{bad:?}");
        }
        assert!(matches!(CertificatePin::of_pem(b"no pem here"), Err(PinError::NoCertificate)));
    }
}
