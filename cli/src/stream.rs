//! The verbs that stream over the API's WebSocket relays: `console`, `exec -i` (a command with
//! its stdin, stdout and stderr streamed) and `port-forward`. The relays answer a refusal
//! (not found, suspended, a closed port) before the upgrade, as the usual `{reason, message}`.

use std::sync::Arc;

use anyhow::Result;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use crate::Failure;
use crate::config::Target;

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Largest read from stdin or a forwarded connection sent as one frame.
const CHUNK: usize = 64 * 1024;

/// Where and how the relays are reached: the server, the token, and the kubeconfig's CA.
pub struct Relays {
    server: String,
    token: Option<String>,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl Relays {
    pub fn new(t: &Target) -> Result<Self> {
        let tls = match &t.ca_pem {
            Some(pem) => {
                use rustls::pki_types::pem::PemObject;
                let mut roots = rustls::RootCertStore::empty();
                for cert in rustls::pki_types::CertificateDer::pem_slice_iter(pem) {
                    roots.add(cert.map_err(|e| anyhow::anyhow!("the kubeconfig's CA is not PEM: {e}"))?)?;
                }
                Some(Arc::new(rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth()))
            }
            None => None,
        };
        Ok(Self { server: t.server.clone(), token: t.token.clone(), tls })
    }

    /// Opens the relay at `/api/v1/machines/{ns}/{name}/{route}` (with `query`, already encoded).
    async fn open(&self, ns: &str, name: &str, route: &str, query: &str) -> Result<Ws> {
        let base = self.server.replacen("https://", "wss://", 1).replacen("http://", "ws://", 1);
        let mut url = format!("{base}/api/v1/machines/{}/{}/{route}", encode(ns), encode(name));
        if !query.is_empty() {
            url = format!("{url}?{query}");
        }
        let mut req = url.as_str().into_client_request()?;
        if let Some(tok) = &self.token {
            let mut v = HeaderValue::from_str(&format!("Bearer {tok}"))
                .map_err(|_| anyhow::anyhow!("the token has characters a header cannot carry"))?;
            v.set_sensitive(true);
            req.headers_mut().insert("authorization", v);
        }
        let connector = self.tls.clone().map(Connector::Rustls);
        match tokio_tungstenite::connect_async_tls_with_config(req, None, false, connector).await {
            Ok((ws, _)) => Ok(ws),
            Err(tungstenite::Error::Http(resp)) => {
                let status = resp.status().as_u16();
                let body: serde_json::Value =
                    resp.body().as_deref().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or_default();
                Err(anyhow::Error::new(Failure::Refused(format!(
                    "{} ({status}): {}",
                    body["reason"].as_str().unwrap_or("Error"),
                    body["message"].as_str().unwrap_or("the server refused the stream")
                ))))
            }
            Err(e) => Err(anyhow::Error::new(Failure::Unreachable(format!("could not reach the server: {e}")))),
        }
    }

    /// `console NAME`: the Machine's console (a shell in a sandbox, the serial console of a VM),
    /// with this process's stdin and stdout; the exit code is the shell's.
    pub async fn console(&self, ns: &str, name: &str) -> Result<i32> {
        session(self.open(ns, name, "console", "").await?).await
    }

    /// `exec -i NAME -- CMD...`: the command with this process's stdin streamed to it and its
    /// output (stdout and stderr as one stream) as it is produced; the exit code is its own.
    pub async fn exec(&self, ns: &str, name: &str, command: &StreamedExec) -> Result<i32> {
        session(self.open(ns, name, "exec/stream", &command.query()?).await?).await
    }

    /// `exec -it NAME -- CMD...`: the command on a terminal in the guest of this terminal's
    /// size; this terminal is in raw mode meanwhile (every key goes as typed), and resizing it
    /// resizes the guest's. The exit code is the command's.
    pub async fn exec_tty(&self, ns: &str, name: &str, command: &StreamedExec) -> Result<i32> {
        let (cols, rows) = crate::terminal::size();
        let query = format!("{}&tty=true&cols={cols}&rows={rows}", command.query()?);
        let ws = self.open(ns, name, "exec/stream", &query).await?;
        let raw = crate::terminal::RawMode::enter()?;
        let code = tty_session(ws).await;
        drop(raw);
        code
    }

    /// `command` in the guest with `input` as its stdin and its output (stdout and stderr as
    /// one stream) into `out`; its exit code.
    pub async fn exec_io(
        &self,
        ns: &str,
        name: &str,
        command: &[String],
        input: impl AsyncRead + Unpin + Send + 'static,
        out: &mut (impl AsyncWrite + Unpin),
    ) -> Result<i32> {
        let query = format!("command={}", encode(&serde_json::to_string(command)?));
        session_io(self.open(ns, name, "exec/stream", &query).await?, input, out).await
    }

    /// `port-forward NAME [LOCAL:]REMOTE`: listens on 127.0.0.1:LOCAL (any free port when it is
    /// empty or 0) and carries each connection to the guest's REMOTE port on its own stream.
    /// Runs until interrupted.
    pub async fn port_forward(self: Arc<Self>, ns: &str, name: &str, ports: &str) -> Result<()> {
        let (local, remote) = parse_ports(ports)?;
        let route = format!("portforward/{remote}");
        let listener = TcpListener::bind(("127.0.0.1", local))
            .await
            .map_err(|e| anyhow::anyhow!("listening on 127.0.0.1:{local}: {e}"))?;
        let bound = listener.local_addr()?.port();
        println!("Forwarding from 127.0.0.1:{bound} -> {remote}");
        use std::io::Write;
        std::io::stdout().flush()?;
        loop {
            let (conn, peer) = listener.accept().await?;
            let (relays, ns, name, route) = (self.clone(), ns.to_string(), name.to_string(), route.clone());
            tokio::spawn(async move {
                match relays.open(&ns, &name, &route, "").await {
                    Ok(ws) => {
                        eprintln!("Handling connection for {remote} (from {peer})");
                        tunnel(conn, ws).await;
                    }
                    Err(e) => eprintln!("error: forwarding a connection to port {remote}: {e}"),
                }
            });
        }
    }
}

impl Relays {
    /// `port-forward NAME --stdio PORT`: one connection to the guest's PORT carried over this
    /// process's stdin and stdout (an SSH ProxyCommand), until either side ends.
    pub async fn port_forward_stdio(&self, ns: &str, name: &str, port: u16) -> Result<()> {
        let ws = self.open(ns, name, &format!("portforward/{port}"), "").await?;
        let (mut tx, mut rx) = ws.split();
        let up = async {
            let mut stdin = tokio::io::stdin();
            let mut buf = vec![0u8; CHUNK];
            loop {
                match stdin.read(&mut buf).await {
                    Ok(n) if n > 0 => {
                        if tx.send(Message::Binary(buf[..n].to_vec().into())).await.is_err() {
                            return;
                        }
                    }
                    // A tunnel has no half-close: the answer still comes, until the guest ends
                    // the connection (or ssh, done, ends this process).
                    _ => return,
                }
            }
        };
        let down = async {
            let mut stdout = tokio::io::stdout();
            while let Some(Ok(msg)) = rx.next().await {
                match msg {
                    Message::Binary(b) if stdout.write_all(&b).await.is_err() || stdout.flush().await.is_err() => {
                        return;
                    }
                    Message::Close(_) => return,
                    _ => {}
                }
            }
        };
        // The guest closing ends it at once; stdin ending waits for the rest of the answer.
        tokio::pin!(down);
        tokio::select! {
            () = &mut down => {}
            () = up => down.await,
        }
        drop(tx);
        Ok(())
    }
}

/// A path segment or query value percent-encoded (names are DNS labels, but nothing is assumed:
/// a `/` or `?` in a name given on the command line stays in its segment).
/// What `exec -i`/`-it` runs: the command, its environment variables, user and directory.
pub struct StreamedExec {
    pub command: Vec<String>,
    pub env: Vec<(String, String)>,
    pub user: Option<String>,
    pub cwd: Option<String>,
}

impl StreamedExec {
    /// The exec-stream query: `command` and `env` as JSON, `user` and `cwd` as given.
    fn query(&self) -> Result<String> {
        let mut q = format!("command={}", encode(&serde_json::to_string(&self.command)?));
        if !self.env.is_empty() {
            let env: std::collections::BTreeMap<&str, &str> =
                self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            q += &format!("&env={}", encode(&serde_json::to_string(&env)?));
        }
        for (key, value) in [("user", &self.user), ("cwd", &self.cwd)] {
            if let Some(v) = value {
                q += &format!("&{key}={}", encode(v));
            }
        }
        Ok(q)
    }
}

pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `LOCAL:REMOTE`, `:REMOTE` (any free local port) or `PORT` (the same both sides).
fn parse_ports(s: &str) -> Result<(u16, u16)> {
    let port = |p: &str, what: &str| -> Result<u16> {
        p.parse::<u16>()
            .map_err(|_| anyhow::anyhow!("{what} port {p:?} is not a number from 0 to 65535 (e.g. 8080:80)"))
    };
    let (local, remote) = match s.split_once(':') {
        Some(("", r)) => (0, port(r, "the remote")?),
        Some((l, r)) => (port(l, "the local")?, port(r, "the remote")?),
        None => {
            let p = port(s, "the")?;
            (p, p)
        }
    };
    if remote == 0 {
        anyhow::bail!("the remote port must be from 1 to 65535 (e.g. 8080:80)");
    }
    Ok((local, remote))
}

/// The exit code in a relay's Close reason `exit <code>`.
fn exit_code(reason: &str) -> Option<i32> {
    reason.strip_prefix("exit ")?.split_whitespace().next()?.parse().ok()
}

/// Stdin to the stream (end of file as an empty frame), the stream to stdout, until the relay
/// closes with the program's exit code.
async fn session(ws: Ws) -> Result<i32> {
    session_io(ws, tokio::io::stdin(), &mut tokio::io::stdout()).await
}

/// A relay session: `input` to the guest (its end as the relay's empty frame), the guest's
/// output to `out` as it comes; the exit code from the close frame.
async fn session_io(
    ws: Ws,
    mut input: impl AsyncRead + Unpin + Send + 'static,
    out: &mut (impl AsyncWrite + Unpin),
) -> Result<i32> {
    let (mut tx, rx) = ws.split();
    let input = tokio::spawn(async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match input.read(&mut buf).await {
                Ok(0) | Err(_) => {
                    let _ = tx.send(Message::Binary(Vec::new().into())).await;
                    // Keep the sending half open: closing it would end the session.
                    std::future::pending::<()>().await;
                }
                Ok(n) => {
                    if tx.send(Message::Binary(buf[..n].to_vec().into())).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    let code = output_until_exit(rx, out).await;
    input.abort();
    code
}

/// The guest's output to `out` as it comes, until the relay closes with the exit code.
async fn output_until_exit(
    mut rx: futures::stream::SplitStream<Ws>,
    out: &mut (impl AsyncWrite + Unpin),
) -> Result<i32> {
    loop {
        match rx.next().await {
            Some(Ok(Message::Binary(b))) => {
                out.write_all(&b).await?;
                out.flush().await?;
            }
            Some(Ok(Message::Text(t))) => {
                out.write_all(t.as_bytes()).await?;
                out.flush().await?;
            }
            Some(Ok(Message::Close(frame))) => {
                let reason = frame.map(|f| f.reason.to_string()).unwrap_or_default();
                match exit_code(&reason) {
                    Some(code) => return Ok(code),
                    None if reason.is_empty() => {
                        return Err(Failure::Refused("the stream closed without an exit code".into()).into());
                    }
                    None => return Err(Failure::Refused(format!("the stream ended: {reason}")).into()),
                }
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(Failure::Unreachable(format!("the stream broke: {e}")).into()),
            None => return Err(Failure::Unreachable("the stream ended without closing".into()).into()),
        }
    }
}

/// A terminal session: keys from stdin as they are typed, the guest's screen to stdout, and a
/// resize message whenever this terminal is resized (SIGWINCH); the exit code from the close.
async fn tty_session(ws: Ws) -> Result<i32> {
    let (mut tx, rx) = ws.split();
    let mut winch = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())?;
    let input = tokio::spawn(async move {
        let mut stdin = tokio::io::stdin();
        let mut buf = vec![0u8; CHUNK];
        loop {
            let msg = tokio::select! {
                read = stdin.read(&mut buf) => match read {
                    Ok(n) if n > 0 => Message::Binary(buf[..n].to_vec().into()),
                    // The terminal went away: nothing more will be typed.
                    _ => std::future::pending().await,
                },
                _ = winch.recv() => {
                    let (cols, rows) = crate::terminal::size();
                    Message::Text(serde_json::json!({"resize": {"cols": cols, "rows": rows}}).to_string().into())
                }
            };
            if tx.send(msg).await.is_err() {
                return;
            }
        }
    });
    let code = output_until_exit(rx, &mut tokio::io::stdout()).await;
    input.abort();
    code
}

/// Carries one forwarded connection both ways until either side ends.
async fn tunnel(conn: TcpStream, ws: Ws) {
    let (mut local_rx, mut local_tx) = conn.into_split();
    let (mut tx, mut rx) = ws.split();
    let up = async {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match local_rx.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send(Message::Binary(buf[..n].to_vec().into())).await.is_err() {
                        return;
                    }
                }
            }
        }
        // The local side is done sending: the relay shuts the guest's side for writing and
        // still brings back what the guest answers.
        let _ = tx.send(Message::Close(None)).await;
        std::future::pending::<()>().await
    };
    let down = async {
        while let Some(Ok(m)) = rx.next().await {
            match m {
                Message::Binary(b) if local_tx.write_all(&b).await.is_err() => return,
                Message::Close(frame) => {
                    // The guest closing its side is the normal end; anything else is said.
                    if let Some(f) = frame.filter(|f| f.code != CloseCode::Normal && !f.reason.is_empty()) {
                        eprintln!("error: the forwarded connection broke: {}", f.reason);
                    }
                    break;
                }
                _ => {}
            }
        }
        let _ = local_tx.shutdown().await;
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_read_as_kubectl_writes_them() {
        assert_eq!(parse_ports("8080:80").unwrap(), (8080, 80));
        assert_eq!(parse_ports(":80").unwrap(), (0, 80));
        assert_eq!(parse_ports("5432").unwrap(), (5432, 5432));
        assert!(parse_ports("80:0").is_err());
        assert!(parse_ports("x:80").unwrap_err().to_string().contains("local port"));
        assert!(parse_ports("70000").is_err());
    }

    #[test]
    fn exit_codes_come_from_the_close_reason() {
        assert_eq!(exit_code("exit 0"), Some(0));
        assert_eq!(exit_code("exit 137"), Some(137));
        assert_eq!(exit_code("exit -1 (waiting for the shell: x)"), Some(-1));
        assert_eq!(exit_code("writing to port 80: reset"), None);
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(encode(r#"["sh","-c","a b"]"#), "%5B%22sh%22%2C%22-c%22%2C%22a%20b%22%5D");
    }
}
