//! The admission webhook's own listener (`--webhook-listen`): a cluster's API server is its only
//! caller, so it is served apart from the public API port (which answers 404 for it), and with
//! `--webhook-client-ca` a TLS client certificate from that CA is required before a byte of a
//! review is read. Managed clusters whose API server presents no client certificate leave it off.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use kairon_api::AppState;

use crate::tls::TlsFiles;

#[derive(clap::Args, Clone, Default)]
pub struct WebhookArgs {
    /// Serve the admission webhook (`POST /admission/v1/validate`) on this address, over HTTPS
    /// with the api's certificate; port 0 picks a free one. Unset: no webhook.
    #[arg(long, env = "KAIRON_WEBHOOK_LISTEN")]
    pub webhook_listen: Option<SocketAddr>,
    /// Require of every webhook client a TLS certificate signed by this CA (PEM): the one the
    /// cluster's API server presents (its AdmissionConfiguration's kubeConfigFile).
    #[arg(long, env = "KAIRON_WEBHOOK_CLIENT_CA", requires = "webhook_listen")]
    pub webhook_client_ca: Option<PathBuf>,
}

/// A running webhook listener.
pub struct Webhook {
    pub url: String,
    pub handle: axum_server::Handle<SocketAddr>,
}

impl WebhookArgs {
    /// Starts the webhook's listener when one is asked for.
    pub async fn serve(&self, state: AppState, tls: &TlsFiles) -> Result<Option<Webhook>> {
        let Some(listen) = self.webhook_listen else { return Ok(None) };
        let listener = std::net::TcpListener::bind(listen).with_context(|| format!("binding {listen}"))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let config = server_config(tls, self.webhook_client_ca.as_deref())?;
        let config = axum_server::tls_rustls::RustlsConfig::from_config(Arc::new(config));
        let handle = axum_server::Handle::new();
        let server = crate::tls::https_server(listener, config)?.handle(handle.clone());
        let app = kairon_api::webhook_router(state);
        tokio::spawn(async move {
            if let Err(e) = server.serve(app.into_make_service()).await {
                tracing::error!("the admission webhook's listener stopped: {e}");
            }
        });
        let host = if addr.ip().is_unspecified() { "127.0.0.1".to_string() } else { addr.ip().to_string() };
        let url = format!("https://{host}:{}{}", addr.port(), kairon_api::webhook::PATH);
        Ok(Some(Webhook { url, handle }))
    }
}

fn server_config(tls: &TlsFiles, client_ca: Option<&Path>) -> Result<rustls::ServerConfig> {
    let certs = CertificateDer::pem_file_iter(&tls.cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading {}", tls.cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(&tls.key).with_context(|| format!("reading {}", tls.key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder =
        rustls::ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions()?;
    let builder = match client_ca {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            let cas = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .with_context(|| format!("reading the webhook's client CA {}", path.display()))?;
            anyhow::ensure!(!cas.is_empty(), "{} holds no certificate", path.display());
            for ca in cas {
                roots.add(ca).with_context(|| format!("a certificate of {}", path.display()))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .context("the webhook's client certificate verifier")?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key).context("the api's certificate and key")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
