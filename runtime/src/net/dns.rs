//! The node's resolver for guests: a question for a name the allowlist allows goes to the
//! node's upstream resolver and its answer back; any other name is answered REFUSED here and
//! never leaves the node. Also the proxy's own resolution (A records).
//!
//! Bounded whatever guests send: every question goes upstream on one socket of the node's
//! ([`Upstream`], each under an ID of its own), at most [`MAX_IN_FLIGHT`] at once and
//! [`MAX_IN_FLIGHT_PER_GUEST`] from one guest; past that a question is dropped, as a busy
//! resolver's would be (the guest's resolver library asks again).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::netns::NodeNetns;
use super::proxy::{Context, DenyKind};

/// How long the upstream resolver may take to answer.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(3);
const TYPE_A: u16 = 1;
const RCODE_REFUSED: u8 = 5;
const RCODE_SERVFAIL: u8 = 2;
/// Questions waiting for the upstream resolver at once, from every guest and the proxy.
pub const MAX_IN_FLIGHT: usize = 4096;
/// Questions one guest may have waiting at once.
pub const MAX_IN_FLIGHT_PER_GUEST: usize = 64;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The node's one socket to its upstream resolver: each question goes out under a random ID no
/// other waiting question has, and its answer is handed back under the asker's own ID.
pub struct Upstream {
    socket: tokio::net::UdpSocket,
    addr: SocketAddr,
    waiting: Mutex<HashMap<u16, tokio::sync::oneshot::Sender<Vec<u8>>>>,
}

impl Upstream {
    /// A socket of the node's (in its namespace) connected to `addr`.
    pub async fn open(ns: &NodeNetns, addr: SocketAddr) -> io::Result<Arc<Upstream>> {
        let any: SocketAddr =
            if addr.is_ipv4() { (Ipv4Addr::UNSPECIFIED, 0).into() } else { "[::]:0".parse().expect("addr") };
        let socket = ns.udp_socket(any).await?;
        socket.connect(addr).await?;
        Ok(Arc::new(Upstream { socket, addr, waiting: Mutex::new(HashMap::new()) }))
    }

    /// Hands each answer to the question waiting for its ID, for as long as the runtime runs.
    pub async fn receive(self: Arc<Self>) {
        let mut buf = vec![0u8; 4096];
        loop {
            match self.socket.recv(&mut buf).await {
                Ok(n) if n >= 12 => {
                    let id = u16::from_be_bytes([buf[0], buf[1]]);
                    if let Some(waiter) = lock(&self.waiting).remove(&id) {
                        let _ = waiter.send(buf[..n].to_vec());
                    }
                }
                Ok(_) => {}
                // An ICMP error of an earlier send (the resolver is down): the asker times out.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(e) => {
                    tracing::warn!(error = %e, "guest resolver: receiving from upstream failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// Asks `msg` upstream and returns the answer, under `msg`'s own ID.
    pub async fn exchange(&self, msg: &[u8]) -> io::Result<Vec<u8>> {
        if msg.len() < 12 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a DNS message"));
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let id = {
            let mut waiting = lock(&self.waiting);
            if waiting.len() >= MAX_IN_FLIGHT {
                return Err(io::Error::new(io::ErrorKind::WouldBlock, "too many questions in flight"));
            }
            let id =
                std::iter::repeat_with(rand::random::<u16>).find(|id| !waiting.contains_key(id)).expect("a free ID");
            waiting.insert(id, tx);
            id
        };
        // Taken back from the waiting list however this ends (a timeout, the asker gone).
        struct Unwait<'a>(&'a Upstream, u16);
        impl Drop for Unwait<'_> {
            fn drop(&mut self) {
                lock(&self.0.waiting).remove(&self.1);
            }
        }
        let _unwait = Unwait(self, id);
        let mut out = msg.to_vec();
        out[..2].copy_from_slice(&id.to_be_bytes());
        self.socket.send(&out).await?;
        let mut reply = tokio::time::timeout(UPSTREAM_TIMEOUT, rx)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, format!("{} did not answer", self.addr)))?
            .map_err(|_| io::Error::other("the resolver's receiver stopped"))?;
        reply[..2].copy_from_slice(&msg[..2]);
        Ok(reply)
    }

    /// Questions waiting now.
    pub fn in_flight(&self) -> usize {
        lock(&self.waiting).len()
    }
}

/// Answers guests' questions on `socket` for as long as the runtime runs.
pub async fn serve(socket: tokio::net::UdpSocket, ctx: Arc<Context>) {
    let socket = Arc::new(socket);
    let per_guest: Arc<Mutex<HashMap<IpAddr, usize>>> = Arc::default();
    let mut buf = vec![0u8; 4096];
    loop {
        let (n, from) = match socket.recv_from(&mut buf).await {
            Ok(got) => got,
            Err(e) => {
                tracing::warn!(error = %e, "guest resolver: receive failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let guest = from.ip();
        {
            let mut counts = lock(&per_guest);
            let count = counts.entry(guest).or_default();
            if *count >= MAX_IN_FLIGHT_PER_GUEST {
                continue;
            }
            *count += 1;
        }
        let msg = buf[..n].to_vec();
        let (socket, ctx, per_guest) = (socket.clone(), ctx.clone(), per_guest.clone());
        tokio::spawn(async move {
            if let Some(reply) = answer(&ctx, guest, &msg).await {
                let _ = socket.send_to(&reply, from).await;
            }
            let mut counts = lock(&per_guest);
            if let Some(count) = counts.get_mut(&guest) {
                *count -= 1;
                if *count == 0 {
                    counts.remove(&guest);
                }
            }
        });
    }
}

async fn answer(ctx: &Context, guest: IpAddr, msg: &[u8]) -> Option<Vec<u8>> {
    let (name, _qtype, _end) = question(msg)?;
    let refusal = match crate::egress::parse_host(&name) {
        Err(e) => Some(e.to_string()),
        Ok(host) => {
            let d = ctx.policy.check_parsed(&host);
            if d.allow { ctx.machine_allows(guest, &host).err() } else { Some(d.reason) }
        }
    };
    if let Some(reason) = refusal {
        ctx.denied(guest, &name, DenyKind::Dns, &format!("the node's resolver refused the name: {reason}"));
        return Some(error_reply(msg, RCODE_REFUSED));
    }
    match ctx.upstream.exchange(msg).await {
        Ok(reply) => Some(reply),
        Err(e) => {
            tracing::debug!(name, error = %e, "guest resolver: upstream failed");
            Some(error_reply(msg, RCODE_SERVFAIL))
        }
    }
}

/// The IPv4 addresses of `name`, from the upstream resolver.
pub async fn resolve(ctx: &Context, name: &str) -> io::Result<Vec<Ipv4Addr>> {
    let id: u16 = rand::random();
    let reply = ctx.upstream.exchange(&query(id, name, TYPE_A)).await?;
    let addrs = a_records(&reply);
    if addrs.is_empty() {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("{name} has no IPv4 address")));
    }
    Ok(addrs)
}

/// The question of a query: name (lower case, no trailing dot), type, and where it ends.
pub fn question(msg: &[u8]) -> Option<(String, u16, usize)> {
    if msg.len() < 12 || msg[2] & 0x80 != 0 || u16::from_be_bytes([msg[4], msg[5]]) != 1 {
        return None;
    }
    let (name, at) = read_name(msg, 12)?;
    let qtype = u16::from_be_bytes([*msg.get(at)?, *msg.get(at + 1)?]);
    msg.get(at + 3)?;
    Some((name, qtype, at + 4))
}

/// An answer carrying only the question and `rcode`.
pub fn error_reply(msg: &[u8], rcode: u8) -> Vec<u8> {
    let end = question(msg).map_or(12, |(_, _, end)| end);
    let mut out = msg[..end.min(msg.len())].to_vec();
    out.resize(12.max(out.len()), 0);
    out[2] = 0x80 | (msg.get(2).copied().unwrap_or(0) & 0x79); // QR, opcode, RD
    out[3] = 0x80 | rcode; // RA
    let qd = if end > 12 { 1u16 } else { 0 };
    out[4..6].copy_from_slice(&qd.to_be_bytes());
    out[6..12].fill(0);
    out
}

/// A recursive query for `name`.
pub fn query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len() + 18);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.').filter(|l| !l.is_empty()) {
        out.push(label.len().min(63) as u8);
        out.extend_from_slice(&label.as_bytes()[..label.len().min(63)]);
    }
    out.push(0);
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    out
}

/// The A records in the answer section of `msg`.
pub fn a_records(msg: &[u8]) -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    let Some((_, _, mut at)) = question_any(msg) else { return out };
    let count = u16::from_be_bytes([msg[6], msg[7]]);
    for _ in 0..count {
        let Some((_, after)) = read_name(msg, at) else { break };
        let Some(fixed) = msg.get(after..after + 10) else { break };
        let rtype = u16::from_be_bytes([fixed[0], fixed[1]]);
        let len = usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
        let Some(data) = msg.get(after + 10..after + 10 + len) else { break };
        if rtype == TYPE_A && len == 4 {
            out.push(Ipv4Addr::new(data[0], data[1], data[2], data[3]));
        }
        at = after + 10 + len;
    }
    out
}

/// The question of a reply (as [`question`], but QR set).
fn question_any(msg: &[u8]) -> Option<(String, u16, usize)> {
    if msg.len() < 12 || u16::from_be_bytes([msg[4], msg[5]]) != 1 {
        return None;
    }
    let (name, at) = read_name(msg, 12)?;
    msg.get(at + 3)?;
    Some((name, u16::from_be_bytes([msg[at], msg[at + 1]]), at + 4))
}

/// A name at `at`, following compression pointers (a bounded number); and where it ends.
fn read_name(msg: &[u8], mut at: usize) -> Option<(String, usize)> {
    let mut name = String::new();
    let mut end = None;
    for _ in 0..64 {
        let len = *msg.get(at)?;
        match len {
            0 => {
                return Some((name.to_ascii_lowercase(), end.unwrap_or(at + 1)));
            }
            l if l & 0xc0 == 0xc0 => {
                let ptr = usize::from(u16::from_be_bytes([l & 0x3f, *msg.get(at + 1)?]));
                end.get_or_insert(at + 2);
                at = ptr;
            }
            l if l & 0xc0 == 0 => {
                let label = msg.get(at + 1..at + 1 + usize::from(l))?;
                if !name.is_empty() {
                    name.push('.');
                }
                // A label is matched as written: anything but the host characters makes the
                // name fail the allowlist's parse, so it is refused.
                name.push_str(&String::from_utf8_lossy(label));
                if name.len() > 253 {
                    return None;
                }
                at += 1 + usize::from(l);
            }
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_round_trips_and_refusals_keep_the_question() {
        let q = query(0x1234, "Allowed.Test.", TYPE_A);
        let (name, qtype, end) = question(&q).unwrap();
        assert_eq!((name.as_str(), qtype, end), ("allowed.test", 1, q.len()));
        let r = error_reply(&q, RCODE_REFUSED);
        assert_eq!(&r[..2], &[0x12, 0x34]);
        assert_eq!(r[3] & 0x0f, RCODE_REFUSED);
        assert_eq!(r[2] & 0x80, 0x80);
        assert_eq!(&r[12..], &q[12..]);
        assert!(question(&r).is_none(), "a reply is not a question");
    }

    #[test]
    fn answers_with_compressed_names_give_their_addresses() {
        let mut r = query(7, "a.test", TYPE_A);
        r[2] = 0x81;
        r[3] = 0x80;
        r[7] = 2;
        for ip in [[198, 51, 100, 1], [198, 51, 100, 9]] {
            r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
            r.extend_from_slice(&ip);
        }
        assert_eq!(a_records(&r), vec![Ipv4Addr::new(198, 51, 100, 1), Ipv4Addr::new(198, 51, 100, 9)]);
        // A pointer loop ends instead of spinning.
        let mut bad = query(7, "a.test", TYPE_A);
        bad[12] = 0xc0;
        bad[13] = 12;
        assert!(question(&bad).is_none());
    }
}
