//! The egress guard of a pull a tenant asked for: a CONNECT proxy on loopback that the pull's
//! HTTP client must go through, so every connection it makes — to the registry, to the blob
//! store a registry redirects to, to a token realm — obeys the node's egress policy.
//!
//! The name is resolved here, once, and the connection made to the address that was checked:
//! a name that resolves to a public address for a check and to 10.0.0.5 for the pull (DNS
//! rebinding) never reaches 10.0.0.5. A name with any address in the deny set is refused. Only
//! CONNECT is served: a plain-HTTP request (a redirect to `http://…`) is refused, so nothing
//! leaves unchecked. Registries the node's config names (`insecure_hosts`, credentials) are the
//! admin's and are pulled from directly.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::egress::EgressPolicy;

/// A request head longer than this is no CONNECT a registry client sends.
const MAX_HEAD: usize = 8 << 10;

/// A running guard; stops when dropped.
pub struct PullGuard {
    addr: SocketAddr,
    refusals: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl PullGuard {
    pub async fn start(policy: Arc<EgressPolicy>) -> std::io::Result<PullGuard> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let refusals = Arc::new(Mutex::new(Vec::new()));
        let seen = refusals.clone();
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let (policy, seen) = (policy.clone(), seen.clone());
                tokio::spawn(async move {
                    if let Err(reason) = serve(conn, &policy, &seen).await {
                        tracing::debug!(%reason, "a pull's proxy connection ended");
                    }
                });
            }
        });
        Ok(PullGuard { addr, refusals, task })
    }

    /// The proxy URL for the pull's client.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Why connections were refused, first first: what a failed pull's message should say.
    pub fn refusals(&self) -> Vec<String> {
        self.refusals.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl Drop for PullGuard {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One client connection: a CONNECT to an allowed address is spliced to it; anything else is
/// answered 403 with the reason, recorded in `seen` first (the client may act on the answer
/// before this task runs again).
async fn serve(mut conn: TcpStream, policy: &EgressPolicy, seen: &Mutex<Vec<String>>) -> Result<(), String> {
    let head = read_head(&mut conn).await.map_err(|e| format!("reading the pull's proxy request: {e}"))?;
    let checked = match connect_target(&head) {
        Ok(target) => checked_connect(&target, policy).await,
        Err(reason) => Err(reason),
    };
    let upstream = match checked {
        Ok(s) => s,
        Err(reason) => {
            tracing::info!(%reason, "a tenant's pull was refused a connection");
            seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(reason.clone());
            return refuse(conn, reason).await;
        }
    };
    conn.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.map_err(|e| e.to_string())?;
    let mut upstream = upstream;
    let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
    Ok(())
}

async fn refuse(mut conn: TcpStream, reason: String) -> Result<(), String> {
    let body = format!("{reason}\n");
    let answer = format!("HTTP/1.1 403 Forbidden\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    let _ = conn.write_all(answer.as_bytes()).await;
    Err(reason)
}

async fn read_head(conn: &mut TcpStream) -> std::io::Result<String> {
    let mut buf = Vec::with_capacity(512);
    let mut byte = [0u8; 512];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        if buf.len() > MAX_HEAD {
            return Err(std::io::Error::other("request head too long"));
        }
        let n = conn.read(&mut byte).await?;
        if n == 0 {
            return Err(std::io::Error::other("closed before the request head ended"));
        }
        buf.extend_from_slice(&byte[..n]);
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// `host:port` of a `CONNECT host:port HTTP/1.1` request.
fn connect_target(head: &str) -> Result<String, String> {
    let line = head.lines().next().unwrap_or_default();
    let mut parts = line.split_whitespace();
    match (parts.next(), parts.next()) {
        (Some("CONNECT"), Some(target)) => Ok(target.to_string()),
        (Some(_), Some(url)) => Err(format!(
            "{url}: a pull a tenant asked for goes over HTTPS only (a registry that is not in the node's config cannot be reached over plain HTTP)"
        )),
        _ => Err("malformed proxy request".into()),
    }
}

/// Resolves `target` once, checks the name and every address against the policy, and connects
/// to the checked addresses only.
async fn checked_connect(target: &str, policy: &EgressPolicy) -> Result<TcpStream, String> {
    let decision = policy.check(target).map_err(|e| e.to_string())?;
    if !decision.allow {
        return Err(format!("registry host {target}: {}", decision.reason));
    }
    let addrs: Vec<SocketAddr> =
        tokio::net::lookup_host(target).await.map_err(|e| format!("resolving {target}: {e}"))?.collect();
    if addrs.is_empty() {
        return Err(format!("{target} resolves to no address"));
    }
    if let Some((addr, entry)) = addrs.iter().find_map(|a| policy.denied_address(a.ip()).map(|e| (a, e))) {
        return Err(format!(
            "registry host {target} resolves to {}, in this node's egress_deny_cidrs ({entry}): a tenant's template is never pulled from a private address",
            addr.ip()
        ));
    }
    let mut last = String::new();
    for addr in &addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e) => last = format!("connecting to {target} ({addr}): {e}"),
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn ask(guard: &PullGuard, request: &str) -> String {
        let mut c = TcpStream::connect(guard.addr).await.unwrap();
        c.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn private_addresses_and_plain_http_are_refused_with_the_reason() {
        let guard = PullGuard::start(Arc::new(EgressPolicy::default())).await.unwrap();
        let answer = ask(&guard, "CONNECT 127.0.0.1:5000 HTTP/1.1\r\nHost: 127.0.0.1:5000\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
        assert!(answer.contains("egress_deny_cidrs (127.0.0.0/8)"), "{answer}");
        // A name that resolves to loopback is refused by its address, not its name.
        let answer = ask(&guard, "CONNECT localhost:443 HTTP/1.1\r\n\r\n").await;
        assert!(answer.contains("resolves to") && answer.contains("egress_deny_cidrs"), "{answer}");
        let answer = ask(&guard, "GET http://10.0.0.5/v2/ HTTP/1.1\r\nHost: 10.0.0.5\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 403") && answer.contains("HTTPS only"), "{answer}");
        let refusals = guard.refusals();
        assert_eq!(refusals.len(), 3, "{refusals:?}");
    }
}
