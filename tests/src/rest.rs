//! A small REST client for the e2e tests: the caller's token, the server's CA, JSON in and out.

use std::time::Duration;

use anyhow::Result;
use serde_json::Value;

use crate::Kairon;

/// Talks to `/api/v1` of one `kairon up` with one token.
#[derive(Clone)]
pub struct Rest {
    pub base: String,
    pub token: String,
    pub http: reqwest::Client,
    /// The server's CA (PEM), for the WebSocket client.
    ca: Vec<u8>,
}

/// An answer: status and body (JSON when it parses, else the text as a JSON string).
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl Answer {
    pub fn ok(self) -> Value {
        assert!((200..300).contains(&self.status), "expected success, got {} {}", self.status, self.body);
        self.body
    }

    pub fn reason(&self) -> &str {
        self.body["reason"].as_str().unwrap_or_default()
    }

    pub fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or_default()
    }
}

impl Kairon {
    /// A REST client with the admin token.
    pub fn rest(&self) -> Result<Rest> {
        self.rest_as(&self.admin_token)
    }

    /// A REST client with another token.
    pub fn rest_as(&self, token: &str) -> Result<Rest> {
        let ca = std::fs::read(self.data_dir.path().join("tls/ca.crt"))?;
        Rest::new(&self.url, token, ca)
    }
}

impl Rest {
    /// A client of the server at `base` whose certificate `ca` (PEM) signs.
    pub fn new(base: &str, token: &str, ca: Vec<u8>) -> Result<Rest> {
        crate::ensure_crypto();
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca)?)
            .timeout(Duration::from_secs(180))
            .build()?;
        Ok(Rest { base: base.to_string(), token: token.to_string(), http, ca })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http.request(method, self.url(path)).bearer_auth(&self.token)
    }

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Answer {
        let resp = req.send().await.expect("the server answers");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Answer { status, body }
    }

    /// A stream of JSON lines (`application/x-ndjson`), each line with when it arrived, until
    /// the server ends it. Panics on an answer that is not a 200.
    pub async fn json_lines(&self, path: &str) -> Vec<(std::time::Instant, Value)> {
        use futures::StreamExt;
        let resp = self.request(reqwest::Method::GET, path).send().await.expect("the server answers");
        assert_eq!(resp.status().as_u16(), 200, "{path}: {:?}", resp.text().await);
        let mut body = resp.bytes_stream();
        let (mut out, mut buf) = (Vec::new(), Vec::<u8>::new());
        while let Some(chunk) = body.next().await {
            buf.extend_from_slice(&chunk.expect("the stream reads"));
            while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=nl).collect();
                out.push((std::time::Instant::now(), serde_json::from_slice(&line).expect("a JSON line")));
            }
        }
        assert!(buf.is_empty(), "a partial last line: {:?}", String::from_utf8_lossy(&buf));
        out
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.send(self.request(reqwest::Method::GET, path)).await
    }

    pub async fn delete(&self, path: &str) -> Answer {
        self.send(self.request(reqwest::Method::DELETE, path)).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Answer {
        self.send(self.request(reqwest::Method::POST, path).json(&body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> Answer {
        self.send(self.request(reqwest::Method::PUT, path).json(&body)).await
    }

    /// The server's own wait (`GET .../machines/{ns}/{name}/wait?phase=`), which answers once
    /// the Machine reports `phase` (or with an error after `timeout_seconds`).
    pub async fn wait_phase(&self, ns: &str, name: &str, phase: &str, timeout_seconds: u32) -> Answer {
        self.get(&format!("/api/v1/machines/{ns}/{name}/wait?phase={phase}&timeoutSeconds={timeout_seconds}")).await
    }

    /// The server's wait for Machine `ns`/`name` to be deleted, within `timeout_seconds`, which
    /// must succeed: 200 once it goes, or 404 if it was gone before the wait began (a Machine
    /// with no finalizer left goes with its delete request, or a moment later).
    pub async fn wait_deleted(&self, ns: &str, name: &str, timeout_seconds: u32) {
        let a =
            self.get(&format!("/api/v1/machines/{ns}/{name}/wait?deleted=true&timeoutSeconds={timeout_seconds}")).await;
        assert!(
            a.status == 200 || (a.status == 404 && a.reason() == "NotFound"),
            "{ns}/{name} not deleted: {} {}",
            a.status,
            a.body
        );
    }

    /// [`Rest::wait_phase`] Running, within 120 s, which must succeed; the Machine.
    pub async fn running(&self, ns: &str, name: &str) -> Value {
        self.wait_phase(ns, name, "Running", 120).await.ok()
    }

    /// A WebSocket to a relay route, authenticated like every other request.
    pub async fn websocket(
        &self,
        path: &str,
    ) -> Result<tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>, String>
    {
        let bearer = format!("Bearer {}", self.token);
        self.websocket_with(path, &[("authorization", bearer.as_str())]).await
    }

    /// A WebSocket to a relay route with exactly these headers (none: no Authorization), as a
    /// browser opens one (a ticket in the query, or the token in a subprotocol).
    pub async fn websocket_with(
        &self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>, String>
    {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
        let url = self.url(path).replacen("https", "wss", 1);
        let mut req = url.into_client_request().map_err(|e| e.to_string())?;
        for (k, v) in headers {
            req.headers_mut().insert(
                HeaderName::from_bytes(k.as_bytes()).map_err(|e| e.to_string())?,
                HeaderValue::from_str(v).map_err(|e| e.to_string())?,
            );
        }
        let connector = tokio_tungstenite::Connector::Rustls(std::sync::Arc::new(self.tls_config()));
        match tokio_tungstenite::connect_async_tls_with_config(req, None, false, Some(connector)).await {
            Ok((ws, _)) => Ok(ws),
            Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => Err(format!(
                "{} {}",
                resp.status(),
                String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default())
            )),
            Err(e) => Err(e.to_string()),
        }
    }

    fn tls_config(&self) -> rustls::ClientConfig {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&self.ca).filter_map(Result::ok) {
            let _ = roots.add(cert);
        }
        rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth()
    }
}
