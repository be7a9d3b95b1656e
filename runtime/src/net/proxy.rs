//! The node's egress proxy: guests' HTTP (port 80) and HTTPS (443) connections, redirected
//! here by the node's rules whatever address they were sent to.
//!
//! The proxy reads the host a connection is for — the `Host` header of each HTTP request, the
//! SNI name of a TLS ClientHello — and decides with the egress-check matcher. An allowed host
//! is resolved by the node's upstream resolver and dialled at the address the proxy found
//! (never the guest's destination, so SNI `allowed.test` sent to another address reaches
//! `allowed.test`); an address in the deny set or of the node itself is never dialled. A request
//! whose URI and `Host` header name different hosts is refused, and the host is sent the name
//! that was judged. HTTPS to a host with an `inject_authorization` entry is answered by the node
//! with a certificate from its egress CA (which guests trust, see [`super::tls`]) so the
//! credential can go into each request as its `Authorization` header, sent on over TLS verified
//! against the node's trust store; the guest never sees it, it is never logged, and it never
//! travels in clear text (plain HTTP to that host goes without it). HTTPS to any other host
//! passes through untouched.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode, Uri, header};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::dns;
use super::netns::NodeNetns;
use crate::egress::EgressPolicy;
use kairon_model::egress::Host;

/// How long a guest may take to send its ClientHello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a guest may take to send a request's head (HTTP, and HTTPS the node terminates).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections the proxy holds at once, from every guest (each guest is held to its own
/// `max_connections` by the node's rules before this).
pub const MAX_PROXY_CONNECTIONS: usize = 16_384;
/// A ClientHello larger than this (one TLS record's worth) is refused.
const MAX_HELLO: usize = 16 * 1024 + 5;

/// Why a guest's connection or question was refused (the `reason` of the denial count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DenyKind {
    /// The host is not in the allowlist.
    NotAllowed,
    /// The host is, or resolves only to, an address in the deny set or of the node.
    DenySet,
    /// A DNS question for a name the allowlist does not hold.
    Dns,
    /// No host to decide on: no `Host` header, no SNI, not HTTP or TLS.
    NoHost,
    /// A request naming two hosts: its URI and its `Host` header, or its `Host` header and the
    /// TLS server name it came under.
    HostMismatch,
    /// The node allows the host, the guest's own Machine (`spec.network.egress`) does not.
    Machine,
}

impl DenyKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DenyKind::NotAllowed => "NotAllowed",
            DenyKind::DenySet => "DenySet",
            DenyKind::Dns => "DnsRefused",
            DenyKind::NoHost => "NoHost",
            DenyKind::HostMismatch => "HostMismatch",
            DenyKind::Machine => "MachineEgress",
        }
    }
}

/// Which instance holds a guest IP, and how its Machine narrows its egress.
pub type GuestOf = Arc<dyn Fn(IpAddr) -> Option<super::Guest> + Send + Sync>;

/// What the resolver and the proxy share.
pub struct Context {
    pub policy: Arc<EgressPolicy>,
    pub ns: NodeNetns,
    pub upstream: Arc<dns::Upstream>,
    pub log: Arc<super::denials::DenialLog>,
    pub guest_of: GuestOf,
    /// The egress CA, when some host has a credential to inject (HTTPS is terminated only
    /// for such hosts).
    pub ca: Option<Arc<super::tls::EgressCa>>,
}

impl Context {
    /// Counts, logs and keeps a refusal (the host is the guest's; never a credential).
    pub fn denied(&self, guest: IpAddr, host: &str, kind: DenyKind, message: &str) {
        tracing::info!(%guest, host, reason = kind.as_str(), message, "egress refused");
        self.log.record((self.guest_of)(guest).map(|g| g.instance), host, kind, message);
    }

    /// Whether the guest's own Machine lets it reach `host` (the node's policy allowed it
    /// already); the error is why not.
    pub fn machine_allows(&self, guest: IpAddr, host: &Host) -> Result<(), String> {
        match (self.guest_of)(guest).and_then(|g| g.egress) {
            Some(narrowing) => narrowing.check(host),
            None => Ok(()),
        }
    }

    /// Connects to `host` (allowed already) on `port` at an address the node resolved.
    async fn connect(&self, guest: IpAddr, host: &str, port: u16) -> Result<tokio::net::TcpStream, Refusal> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let candidates: Vec<IpAddr> = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => dns::resolve(self, bare)
                .await
                .map_err(|e| Refusal::Upstream(format!("resolving {host}: {e}")))?
                .into_iter()
                .map(IpAddr::V4)
                .collect(),
        };
        let mut last = None;
        for ip in candidates {
            if let Some(entry) = self.policy.denied_address(ip) {
                last = Some(format!("{host} resolves to {ip}, in the node's egress_deny_cidrs ({entry})"));
                continue;
            }
            if self.ns.is_local(ip).await {
                last = Some(format!("{host} resolves to {ip}, an address of the node itself"));
                continue;
            }
            return self
                .ns
                .dial(SocketAddr::new(ip, port))
                .await
                .map_err(|e| Refusal::Upstream(format!("connecting to {host} ({ip}:{port}): {e}")));
        }
        let message = last.unwrap_or_else(|| format!("{host} has no address"));
        self.denied(guest, host, DenyKind::DenySet, &message);
        Err(Refusal::Denied(message))
    }

    /// The policy's answer for `host`, counted when it refuses.
    fn decide(&self, guest: IpAddr, host: &str) -> Result<Option<String>, Refusal> {
        let parsed = match crate::egress::parse_host(host) {
            Ok(parsed) => parsed,
            Err(e) => {
                self.denied(guest, host, DenyKind::NoHost, &e.to_string());
                return Err(Refusal::Denied(e.to_string()));
            }
        };
        let d = self.policy.check_parsed(&parsed);
        if !d.allow {
            let kind = if d.reason.contains("egress_deny_cidrs") { DenyKind::DenySet } else { DenyKind::NotAllowed };
            self.denied(guest, host, kind, &d.reason);
            return Err(Refusal::Denied(d.reason));
        }
        match self.machine_allows(guest, &parsed) {
            Ok(()) => Ok(d.credential),
            Err(reason) => {
                self.denied(guest, host, DenyKind::Machine, &reason);
                Err(Refusal::Denied(reason))
            }
        }
    }
}

enum Refusal {
    /// The node's policy refuses it (403 for HTTP).
    Denied(String),
    /// Allowed, but the host could not be resolved or reached (502).
    Upstream(String),
}

/// Serves guests' plain HTTP connections.
pub async fn serve_http(listener: tokio::net::TcpListener, ctx: Arc<Context>) {
    accept_loop(listener, ctx, |ctx, stream, peer| async move {
        let service = hyper::service::service_fn(move |req| {
            let ctx = ctx.clone();
            async move { Ok::<_, std::convert::Infallible>(relay(&ctx, peer.ip(), req, &Leg::Plain).await) }
        });
        let _ = http1().serve_connection(TokioIo::new(stream), service).await;
    })
    .await
}

/// The proxy's HTTP/1 server: a request head must come within [`HEADER_READ_TIMEOUT`].
fn http1() -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
    b
}

/// Accepts guests' connections on `listener` for as long as the runtime runs, each handled on
/// its own task; past [`MAX_PROXY_CONNECTIONS`] at once a new one is closed at once.
async fn accept_loop<F, Fut>(listener: tokio::net::TcpListener, ctx: Arc<Context>, handle: F)
where
    F: Fn(Arc<Context>, tokio::net::TcpStream, SocketAddr) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_PROXY_CONNECTIONS));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(got) => got,
            Err(e) => {
                tracing::warn!(error = %e, "egress proxy: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(guest = %peer.ip(), "egress proxy: at its connection limit, closing one");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let handled = handle(ctx.clone(), stream, peer);
        tokio::spawn(async move {
            handled.await;
            drop(slot);
        });
    }
}

/// Which connection a guest's request came on, so which the proxy opens to the host.
#[derive(Clone)]
enum Leg {
    /// Plain HTTP (port 80).
    Plain,
    /// HTTPS the proxy terminated for `sni` to inject a credential (port 443, TLS again to the
    /// host, verified).
    Tls { sni: String },
}

/// One guest request, relayed to the host it names.
///
/// The host judged is the one the request is sent to and the one its `Host` header names: a
/// request whose URI names one host and whose `Host` header another is refused (a shared host
/// or CDN routes on `Host`, so judging one and sending the other would take the node's
/// credential to a host nobody allowed). A credential is injected only on the TLS leg, to the
/// host the guest's TLS named: never in clear text.
async fn relay(ctx: &Context, guest: IpAddr, req: Request<Incoming>, leg: &Leg) -> Response<Body> {
    let host = match judged_host(&req) {
        Ok(host) => host,
        Err((kind, shown, message)) => {
            ctx.denied(guest, &shown, kind, &message);
            let status = if kind == DenyKind::NoHost { StatusCode::BAD_REQUEST } else { StatusCode::FORBIDDEN };
            return refusal(status, &message);
        }
    };
    // The port the guest asked for is not honoured: this connection came for port 80 or 443.
    let name = strip_port(&host);
    if let Leg::Tls { sni } = leg
        && !name.eq_ignore_ascii_case(sni)
    {
        let message = format!("the request's host {host} is not the TLS server name {sni} it came under");
        ctx.denied(guest, &host, DenyKind::HostMismatch, &message);
        return refusal(StatusCode::FORBIDDEN, &message);
    }
    let credential = match ctx.decide(guest, &host) {
        Ok(c) => c.filter(|_| matches!(leg, Leg::Tls { .. })),
        Err(Refusal::Denied(reason)) => return refusal(StatusCode::FORBIDDEN, &reason),
        Err(Refusal::Upstream(m)) => return refusal(StatusCode::BAD_GATEWAY, &m),
    };
    let port = if matches!(leg, Leg::Plain) { 80 } else { 443 };
    let stream = match ctx.connect(guest, name, port).await {
        Ok(s) => s,
        Err(Refusal::Denied(reason)) => return refusal(StatusCode::FORBIDDEN, &reason),
        Err(Refusal::Upstream(m)) => return refusal(StatusCode::BAD_GATEWAY, &m),
    };
    let (mut parts, body) = req.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    parts.uri = Uri::try_from(path).unwrap_or_else(|_| Uri::from_static("/"));
    parts.headers.remove(header::PROXY_AUTHORIZATION);
    // The host sees the name that was judged, whatever else the guest wrote.
    match HeaderValue::from_str(name) {
        Ok(v) => {
            parts.headers.insert(header::HOST, v);
        }
        Err(_) => return refusal(StatusCode::BAD_REQUEST, "the request's host is not a header value"),
    }
    if let Some(secret) = credential {
        match HeaderValue::from_str(&secret) {
            Ok(mut v) => {
                v.set_sensitive(true);
                parts.headers.insert(header::AUTHORIZATION, v);
            }
            Err(_) => {
                return refusal(StatusCode::BAD_GATEWAY, "the node's credential for this host is not a header value");
            }
        }
    }
    let req = Request::from_parts(parts, body);
    let sent = match leg {
        Leg::Plain => send(stream, req).await,
        Leg::Tls { sni } => match tls_to(ctx, sni, stream).await {
            Ok(tls) => send(tls, req).await,
            Err(e) => Err(e),
        },
    };
    match sent {
        Ok(resp) => resp.map(Body::new),
        Err(e) => refusal(StatusCode::BAD_GATEWAY, &format!("{name}: {e}")),
    }
}

/// A verified TLS connection to `sni` over `stream`.
async fn tls_to(
    ctx: &Context,
    sni: &str,
    stream: tokio::net::TcpStream,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
    let ca = ctx.ca.as_ref().ok_or("the node terminates no TLS")?;
    let server = rustls::pki_types::ServerName::try_from(sni.to_string()).map_err(|e| format!("{sni}: {e}"))?;
    tokio_rustls::TlsConnector::from(ca.upstream())
        .connect(server, stream)
        .await
        .map_err(|e| format!("TLS to the host failed: {e}"))
}

/// Sends one request on a new HTTP/1.1 connection over `io`.
async fn send<IO>(io: IO, req: Request<Incoming>) -> Result<Response<Incoming>, String>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(io)).await.map_err(|e| format!("talking to it: {e}"))?;
    tokio::spawn(conn);
    sender.send_request(req).await.map_err(|e| format!("it did not answer: {e}"))
}

fn refusal(status: StatusCode, message: &str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Body::from(format!("kairon egress: {message}\n")))
        .expect("a static response")
}

/// The host a request is for: its URI's authority (absolute form) or its `Host` header; when
/// it has both they must name the same host (ports aside). The refusal carries the kind, the
/// host to show and why.
fn judged_host<B>(req: &Request<B>) -> Result<String, (DenyKind, String, String)> {
    let mut hosts = req.headers().get_all(header::HOST).iter();
    let (first, second) = (hosts.next(), hosts.next());
    let header = match (first.map(|h| h.to_str()), second) {
        (Some(Ok(h)), None) => Some(h),
        (None, _) => None,
        _ => {
            let message = "the request has more than one Host header, or one that is not text: send one".to_string();
            return Err((DenyKind::HostMismatch, String::new(), message));
        }
    };
    match (req.uri().authority().map(|a| a.as_str()), header) {
        (Some(uri), Some(header)) if !strip_port(uri).eq_ignore_ascii_case(strip_port(header)) => {
            let message = format!("the request is for {uri} but its Host header names {header}: send one host");
            Err((DenyKind::HostMismatch, uri.to_string(), message))
        }
        (Some(uri), _) => Ok(uri.to_string()),
        (None, Some(header)) => Ok(header.to_string()),
        (None, None) => {
            Err((DenyKind::NoHost, String::new(), "the request names no host (no Host header)".to_string()))
        }
    }
}

/// `host` without a `:port` (keeps an IPv6 literal's brackets).
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.split_once(']').map_or(host, |(a, _)| &host[..a.len() + 1]);
    }
    host.split_once(':').map_or(host, |(h, _)| h)
}

/// Serves guests' TLS connections: decides on the ClientHello's SNI name, then splices.
pub async fn serve_tls(listener: tokio::net::TcpListener, ctx: Arc<Context>) {
    accept_loop(listener, ctx, |ctx, stream, peer| async move {
        if let Err(e) = splice_tls(ctx, peer.ip(), stream).await {
            tracing::debug!(guest = %peer.ip(), error = %e, "egress proxy: TLS connection ended");
        }
    })
    .await
}

async fn splice_tls(ctx: Arc<Context>, guest: IpAddr, mut guest_stream: tokio::net::TcpStream) -> io::Result<()> {
    let hello = tokio::time::timeout(HELLO_TIMEOUT, read_client_hello(&mut guest_stream))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no ClientHello"))??;
    let Some(name) = sni(&hello) else {
        ctx.denied(guest, "", DenyKind::NoHost, "the TLS ClientHello names no server (no SNI)");
        return Ok(());
    };
    match ctx.decide(guest, &name) {
        Err(_) => return Ok(()),
        // A credential to inject: the node answers for the host itself.
        Ok(Some(_)) if ctx.ca.is_some() => return terminate(ctx, guest, hello, guest_stream, name).await,
        Ok(_) => {}
    }
    let mut upstream = match ctx.connect(guest, &name, 443).await {
        Ok(s) => s,
        Err(Refusal::Denied(m) | Refusal::Upstream(m)) => return Err(io::Error::other(m)),
    };
    upstream.write_all(&hello).await?;
    tokio::io::copy_bidirectional(&mut guest_stream, &mut upstream).await?;
    Ok(())
}

/// Answers the guest's TLS for `sni` with the node's egress CA, and relays its requests
/// (their credential injected) over TLS to the host.
async fn terminate(
    ctx: Arc<Context>,
    guest: IpAddr,
    hello: Vec<u8>,
    stream: tokio::net::TcpStream,
    sni: String,
) -> io::Result<()> {
    let ca = ctx.ca.clone().ok_or_else(|| io::Error::other("no egress CA"))?;
    let acceptor = tokio_rustls::TlsAcceptor::from(ca.server_config(&sni)?);
    let tls = acceptor.accept(super::tls::Prefixed::new(hello, stream)).await?;
    let leg = Leg::Tls { sni };
    let service = hyper::service::service_fn(move |req| {
        let (ctx, leg) = (ctx.clone(), leg.clone());
        async move { Ok::<_, std::convert::Infallible>(relay(&ctx, guest, req, &leg).await) }
    });
    http1().serve_connection(TokioIo::new(tls), service).await.map_err(io::Error::other)
}

/// Reads one whole TLS record (the ClientHello) and returns its bytes.
pub(crate) async fn read_client_hello(s: &mut tokio::net::TcpStream) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 5];
    s.read_exact(&mut buf).await?;
    if buf[0] != 0x16 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not a TLS handshake"));
    }
    let len = usize::from(u16::from_be_bytes([buf[3], buf[4]]));
    if 5 + len > MAX_HELLO {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "ClientHello too large"));
    }
    buf.resize(5 + len, 0);
    s.read_exact(&mut buf[5..]).await?;
    Ok(buf)
}

/// The server name (SNI) of a ClientHello record, lower case.
pub fn sni(record: &[u8]) -> Option<String> {
    let hs = record.get(5..)?;
    if *hs.first()? != 1 {
        return None;
    }
    let mut at = 4 + 2 + 32; // handshake header, version, random
    let sid = usize::from(*hs.get(at)?);
    at += 1 + sid;
    let suites = usize::from(u16::from_be_bytes([*hs.get(at)?, *hs.get(at + 1)?]));
    at += 2 + suites;
    let comp = usize::from(*hs.get(at)?);
    at += 1 + comp;
    let ext_len = usize::from(u16::from_be_bytes([*hs.get(at)?, *hs.get(at + 1)?]));
    at += 2;
    let end = (at + ext_len).min(hs.len());
    while at + 4 <= end {
        let kind = u16::from_be_bytes([hs[at], hs[at + 1]]);
        let len = usize::from(u16::from_be_bytes([hs[at + 2], hs[at + 3]]));
        let data = hs.get(at + 4..at + 4 + len)?;
        if kind == 0 {
            // server_name_list: list length, then (type 0 = host_name, length, name).
            let name_type = *data.get(2)?;
            let name_len = usize::from(u16::from_be_bytes([*data.get(3)?, *data.get(4)?]));
            if name_type != 0 {
                return None;
            }
            let name = std::str::from_utf8(data.get(5..5 + name_len)?).ok()?;
            return Some(name.to_ascii_lowercase());
        }
        at += 4 + len;
    }
    None
}

/// A minimal ClientHello record naming `host` (tests and benchmarks play the guest with it).
pub fn client_hello(host: &str) -> Vec<u8> {
    let name = host.as_bytes();
    let mut sni_ext = Vec::new();
    sni_ext.extend_from_slice(&((name.len() + 3) as u16).to_be_bytes());
    sni_ext.push(0);
    sni_ext.extend_from_slice(&(name.len() as u16).to_be_bytes());
    sni_ext.extend_from_slice(name);
    let mut exts = vec![0, 0];
    exts.extend_from_slice(&(sni_ext.len() as u16).to_be_bytes());
    exts.extend_from_slice(&sni_ext);
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7u8; 32]);
    body.push(0); // session id
    body.extend_from_slice(&[0, 2, 0x13, 0x01]); // one suite: TLS_AES_128_GCM_SHA256
    body.extend_from_slice(&[1, 0]); // no compression
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    let mut hs = vec![1];
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    let mut record = vec![0x16, 3, 1];
    record.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    record.extend_from_slice(&hs);
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sni_is_read_from_a_client_hello() {
        assert_eq!(sni(&client_hello("Allowed.Test")).as_deref(), Some("allowed.test"));
        let mut cut = client_hello("allowed.test");
        cut.truncate(cut.len() - 3);
        assert_eq!(sni(&cut), None);
        assert_eq!(sni(b"GET / HTTP/1.1\r\n"), None);
    }

    #[test]
    fn ports_are_stripped_from_hosts() {
        assert_eq!(strip_port("a.test:8080"), "a.test");
        assert_eq!(strip_port("a.test"), "a.test");
        assert_eq!(strip_port("[2001:db8::1]:80"), "[2001:db8::1]");
    }
}
