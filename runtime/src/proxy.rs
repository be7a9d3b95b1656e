//! The guest HTTP proxy: relays an HTTP request to a server listening on a port inside a
//! sandbox, and the server's answer back, both streamed.
//!
//! A sandbox has its own network namespace with only a loopback interface, so the host cannot
//! reach the guest's server by address. Instead the proxy opens the TCP connection from inside
//! that namespace (on a short-lived OS thread, see [`dial_in_netns`]): a socket belongs to the
//! namespace it was created in, so the connected socket keeps talking to the sandbox's
//! 127.0.0.1 after the thread has gone, and is driven by tokio like any other.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri, Version, header};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

use crate::api::ErrorBody;

/// How long connecting to the guest's port may take. A listening socket in the sandbox answers
/// at once (even when its server is slow to respond); this only bounds a wedged dial.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a request could not be relayed. Each becomes a JSON error body (see [`ErrorBody`]).
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// No connection to the guest's port: nothing listens there, or the sandbox is gone.
    #[error("{0}")]
    GuestUnreachable(String),
    /// Connected, but the guest closed or broke the connection before its response began.
    #[error("{0}")]
    GuestClosed(String),
    /// The guest path is not a valid request target.
    #[error("{0}")]
    Invalid(String),
}

impl ProxyError {
    pub fn reason(&self) -> &'static str {
        match self {
            ProxyError::GuestUnreachable(_) => "GuestUnreachable",
            ProxyError::GuestClosed(_) => "GuestClosed",
            ProxyError::Invalid(_) => "Invalid",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ProxyError::GuestUnreachable(_) | ProxyError::GuestClosed(_) => StatusCode::BAD_GATEWAY,
            ProxyError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
        }
    }
}

impl IntoResponse for ProxyError {
    fn into_response(self) -> Response {
        let body = ErrorBody { reason: self.reason().into(), message: self.to_string() };
        (self.status(), Json(body)).into_response()
    }
}

/// Connects to `127.0.0.1:port` inside the network namespace of process `pid` (a sandbox's
/// init). The namespace switch happens on a dedicated OS thread that exits right after: no
/// tokio worker ever changes namespace, and the socket stays in the sandbox's namespace.
pub async fn dial_in_netns(pid: u32, port: u16) -> io::Result<tokio::net::TcpStream> {
    dial_in_netns_at(pid, Ipv4Addr::LOCALHOST, port).await
}

/// Connects to `ip:port` from inside the network namespace of process `pid`.
pub async fn dial_in_netns_at(pid: u32, ip: Ipv4Addr, port: u16) -> io::Result<tokio::net::TcpStream> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new().name(format!("netns-dial-{pid}")).spawn(move || {
        // The receiver only goes away when the caller gave up; then the socket just closes.
        let _ = tx.send(dial_blocking(pid, ip, port));
    })?;
    let stream = rx.await.map_err(|_| io::Error::other("the namespace dialing thread died"))??;
    tokio::net::TcpStream::from_std(stream)
}

/// Runs on its own thread: it moves that thread (only) into the sandbox's network namespace.
fn dial_blocking(pid: u32, ip: Ipv4Addr, port: u16) -> io::Result<std::net::TcpStream> {
    let ns_path = format!("/proc/{pid}/ns/net");
    let ns = std::fs::File::open(&ns_path).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            io::Error::new(e.kind(), format!("the sandbox's process {pid} is gone (no {ns_path})"))
        } else {
            io::Error::new(e.kind(), format!("opening {ns_path}: {e}"))
        }
    })?;
    move_into_link_name_space(std::os::fd::AsFd::as_fd(&ns), Some(LinkNameSpaceType::Network))
        .map_err(|e| io::Error::other(format!("entering the sandbox's network namespace ({ns_path}): {e}")))?;
    drop(ns);
    let addr = SocketAddr::from((ip, port));
    let stream = std::net::TcpStream::connect_timeout(&addr, DIAL_TIMEOUT).map_err(|e| match e.kind() {
        io::ErrorKind::ConnectionRefused => {
            if ip.is_loopback() {
                io::Error::new(e.kind(), format!("nothing listens on port {port} inside the sandbox"))
            } else {
                io::Error::new(
                    e.kind(),
                    format!(
                        "nothing listens on port {port} at the sandbox's guest IP {ip} (a server listening on \
                         127.0.0.1 only cannot be reached: listen on 0.0.0.0)"
                    ),
                )
            }
        }
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => io::Error::new(
            io::ErrorKind::TimedOut,
            format!("port {port} inside the sandbox did not accept a connection within {} s", DIAL_TIMEOUT.as_secs()),
        ),
        _ => io::Error::new(e.kind(), format!("connecting to port {port} inside the sandbox: {e}")),
    })?;
    stream.set_nonblocking(true)?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Where a guest port is dialled: in a sandbox's network namespace (its init's pid), or at a
/// host address that leads to it (a VM's forwarded port on loopback).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Netns(u32),
    /// A sandbox on the guest network: its guest IP, dialled inside its namespace (so a
    /// server the guest bound to that address answers, as it would from the node).
    Guest {
        pid: u32,
        ip: Ipv4Addr,
    },
    /// An address dialled from a network namespace file (`None`: this process's): a VM's guest
    /// IP from the node side of the guest network.
    InNetns {
        netns: Option<std::path::PathBuf>,
        addr: SocketAddr,
    },
    Addr(SocketAddr),
}

/// Connects to guest port `port` through `target`.
pub async fn dial(target: Target, port: u16) -> io::Result<tokio::net::TcpStream> {
    match target {
        Target::Netns(pid) => dial_in_netns(pid, port).await,
        Target::Guest { pid, ip } => dial_in_netns_at(pid, ip, port).await,
        Target::InNetns { netns, addr } => crate::net::netns::NodeNetns::at(netns)
            .dial(addr)
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("port {port} at the VM's guest IP {}: {e}", addr.ip()))),
        Target::Addr(addr) => {
            let s = tokio::time::timeout(DIAL_TIMEOUT, tokio::net::TcpStream::connect(addr))
                .await
                .map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "port {port} in the VM did not accept a connection within {} s",
                            DIAL_TIMEOUT.as_secs()
                        ),
                    )
                })?
                .map_err(|e| io::Error::new(e.kind(), format!("connecting to port {port} in the VM: {e}")))?;
            s.set_nodelay(true)?;
            Ok(s)
        }
    }
}

/// Relays `req` to the guest's HTTP server on `port` inside the sandbox whose init is `pid`,
/// as `path_and_query` (e.g. from [`guest_path`]). Request and response bodies are streamed
/// both ways, so uploads, chunked responses and server-sent events flow as they are produced.
/// Hop-by-hop headers and the client's `Authorization` (its credential to Kairon) are not
/// forwarded, and `Host` is `127.0.0.1:<port>`. Errors are 502 (`GuestUnreachable` when the
/// port cannot be dialled, `GuestClosed` when the guest drops the request) with a JSON body.
pub async fn proxy(pid: u32, port: u16, req: Request, path_and_query: &str) -> Response {
    proxy_to(Target::Netns(pid), port, req, path_and_query).await
}

/// [`proxy`] to a guest port through any [`Target`] (a VM's forwarded port included).
pub async fn proxy_to(target: Target, port: u16, req: Request, path_and_query: &str) -> Response {
    match relay(target, port, req, path_and_query).await {
        Ok(resp) => resp,
        Err(e) => e.into_response(),
    }
}

async fn relay(target: Target, port: u16, req: Request, path_and_query: &str) -> Result<Response, ProxyError> {
    let uri: Uri = path_and_query
        .parse()
        .ok()
        .filter(|u: &Uri| u.scheme().is_none() && u.authority().is_none() && u.path().starts_with('/'))
        .ok_or_else(|| ProxyError::Invalid(format!("{path_and_query:?} is not a valid path for the guest")))?;
    let stream = dial(target, port).await.map_err(|e| ProxyError::GuestUnreachable(e.to_string()))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake::<_, Body>(TokioIo::new(stream))
        .await
        .map_err(|e| ProxyError::GuestUnreachable(format!("starting HTTP with port {port} inside the sandbox: {e}")))?;
    // The connection task drives both bodies; it ends when the exchange is over or abandoned
    // (the client going away drops the response body, which closes the connection).
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(port, error = %e, "guest proxy connection ended with an error");
        }
    });

    let (parts, body) = req.into_parts();
    let mut out = hyper::Request::new(body);
    *out.method_mut() = parts.method;
    *out.uri_mut() = uri;
    *out.version_mut() = Version::HTTP_11;
    let headers = out.headers_mut();
    *headers = parts.headers;
    strip_hop_by_hop(headers);
    headers.remove(header::AUTHORIZATION);
    // Answered by the server that received the request; the guest just gets the body.
    headers.remove(header::EXPECT);
    let host = HeaderValue::try_from(format!("127.0.0.1:{port}"))
        .map_err(|e| ProxyError::Invalid(format!("building the Host header: {e}")))?;
    headers.insert(header::HOST, host);

    let resp = sender.send_request(out).await.map_err(|e| {
        ProxyError::GuestClosed(format!(
            "the guest's server on port {port} closed the connection before answering: {}",
            error_chain(&e)
        ))
    })?;
    let (parts, body) = resp.into_parts();
    let mut resp = Response::new(Body::new(body));
    *resp.status_mut() = parts.status;
    *resp.headers_mut() = parts.headers;
    strip_hop_by_hop(resp.headers_mut());
    Ok(resp)
}

/// Headers that describe one connection, not the message (RFC 9110 section 7.6.1), plus any
/// header the `Connection` header names.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::try_from(t.trim()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        HeaderName::from_static("keep-alive"),
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
    let proxy_headers: Vec<HeaderName> = headers.keys().filter(|k| k.as_str().starts_with("proxy-")).cloned().collect();
    for name in proxy_headers {
        headers.remove(name);
    }
}

/// hyper's errors keep the useful part (e.g. "connection closed before message completed")
/// in their source chain.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

/// The request target for the guest: `/<path>` and `?<query>` when there is one. `path` is
/// the route's `{*path}` capture as axum's `Path` extractor gives it (percent-decoded, with or
/// without a leading `/`); it is percent-encoded again here, so e.g. a space or `?` in a path
/// segment reaches the guest as `%20` / `%3F`. `query` is the raw query string (`uri.query()`),
/// passed on as it is except for bytes that are never valid in a URI.
pub fn guest_path(path: Option<&str>, query: Option<&str>) -> String {
    let mut out = String::from("/");
    let path = path.unwrap_or("");
    encode_into(&mut out, path.strip_prefix('/').unwrap_or(path), |b| is_pchar(b) || b == b'/');
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        out.push('?');
        encode_into(&mut out, q, |b| is_pchar(b) || matches!(b, b'/' | b'?' | b'%'));
    }
    out
}

/// RFC 3986 `pchar` without `%`: unreserved, sub-delims, `:` and `@`.
fn is_pchar(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(b, b'-' | b'.' | b'_' | b'~' | b'!' | b'$' | b'&' | b'\'' | b'(' | b')')
        || matches!(b, b'*' | b'+' | b',' | b';' | b'=' | b':' | b'@')
}

fn encode_into(out: &mut String, s: &str, keep: impl Fn(u8) -> bool) {
    for &b in s.as_bytes() {
        if keep(b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_paths() {
        assert_eq!(guest_path(None, None), "/");
        assert_eq!(guest_path(Some(""), Some("")), "/");
        assert_eq!(guest_path(Some("api/webhook"), None), "/api/webhook");
        assert_eq!(guest_path(Some("/api/webhook"), Some("x=1&y=a%20b")), "/api/webhook?x=1&y=a%20b");
        assert_eq!(guest_path(None, Some("x=1")), "/?x=1");
        assert_eq!(guest_path(Some("a b/c?d#e%f/é"), None), "/a%20b/c%3Fd%23e%25f/%C3%A9");
        assert_eq!(guest_path(Some("x"), Some("q=a b\"")), "/x?q=a%20b%22");
        for p in [guest_path(Some("a b/c?d#e%f/é"), Some("q=a b\"<>")), guest_path(Some("x"), Some("a/b?c"))] {
            assert!(p.parse::<Uri>().is_ok(), "{p}");
        }
    }

    #[test]
    fn hop_by_hop_headers_are_dropped() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "keep-alive, x-conn-only"),
            ("keep-alive", "timeout=5"),
            ("proxy-authorization", "Basic eA=="),
            ("proxy-connection", "keep-alive"),
            ("te", "trailers"),
            ("trailer", "x-sum"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("x-conn-only", "1"),
            ("x-kept", "2"),
            ("content-type", "text/plain"),
        ] {
            h.append(k, HeaderValue::from_static(v));
        }
        strip_hop_by_hop(&mut h);
        let mut left: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        left.sort();
        assert_eq!(left, ["content-type", "x-kept"]);
    }
}
