//! Preview links: one port of one Machine opened to a browser with no header.
//!
//! A link is a host of its own, `<capability>-<port>.<domain>` (under `kairon up`,
//! `….localhost`, which browsers resolve to loopback by themselves), so every link is an origin
//! of its own: never the API's, never one another tenant's page shares (a shared origin would let
//! one tenant's page read another's responses, and cookies ignore ports). The capability is a
//! random value; only its SHA-256 is stored, with the Machine's UID, the port, the expiry and the
//! identity that made the link, which every request through it acts as (re-authorized each time,
//! and woken on connect as that identity's own requests are). A link opens its own port only,
//! dies when it expires, when it is revoked, and with its Machine (a new Machine of the same name
//! has another UID). Requests to a preview host never reach an API route.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use utoipa::ToSchema;

use crate::auth::Identity;
use crate::machines::{Error, Needs, Reason, Result, Session};
use crate::state::AppState;

/// How long a link lives when its request names no ttl.
pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);
/// The longest a link may live: it is a credential in a URL, and a new one is one call away.
pub const MAX_TTL: Duration = Duration::from_secs(7 * 86400);
/// The most live links one Machine holds; past it a new one is refused until one is revoked.
pub const MAX_PER_MACHINE: i64 = 64;

/// Where links are served: hosts `<capability>-<port>.<domain>`, reached on `port` (the URL's
/// default port when None).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreviewDomain {
    pub domain: String,
    pub port: Option<u16>,
}

/// What a request's host is, for a server with a preview domain.
#[derive(Debug, PartialEq, Eq)]
pub enum PreviewHost<'a> {
    /// A link's host: its capability and the guest port it names.
    Link { capability: &'a str, port: u16 },
    /// Under the preview domain but not a link's shape: answered 404, never by an API route.
    Malformed,
    /// Not under the preview domain: the API's.
    Api,
}

/// The capability's length: 32 lowercase hex digits (122 random bits of a v4 UUID).
const CAPABILITY_LEN: usize = 32;

impl PreviewDomain {
    /// The domain given on the command line, checked: DNS labels, lowercase, no port or scheme.
    pub fn new(domain: &str, port: Option<u16>) -> Result<Self, String> {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if domain.is_empty() || !domain.split('.').all(label_ok) {
            return Err(format!(
                "preview domain {domain:?} is not a DNS name: give one like previews.example.com, whose \
                 subdomains (*.previews.example.com) all resolve to this server"
            ));
        }
        Ok(PreviewDomain { domain, port })
    }

    /// The URL of a link.
    pub fn url(&self, capability: &str, guest_port: u16) -> String {
        match self.port {
            Some(p) if p != 443 => format!("https://{capability}-{guest_port}.{}:{p}/", self.domain),
            _ => format!("https://{capability}-{guest_port}.{}/", self.domain),
        }
    }

    /// What `host` (a Host header or a TLS server name, with or without a port) is.
    pub fn parse<'a>(&self, host: &'a str) -> PreviewHost<'a> {
        let name = match host.rsplit_once(':') {
            // An IPv6 literal (`[::1]:443`, `[::1]`) is never a preview host.
            _ if host.starts_with('[') => return PreviewHost::Api,
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        };
        let name = name.trim_end_matches('.');
        let Some(label) = strip_suffix_ignore_case(name, &self.domain).and_then(|l| l.strip_suffix('.')) else {
            return PreviewHost::Api;
        };
        let Some((capability, port)) = label.split_once('-') else { return PreviewHost::Malformed };
        let capability_ok = capability.len() == CAPABILITY_LEN
            && capability.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let port = port.parse::<u16>().ok().filter(|p| *p > 0 && !port.starts_with('0'));
        match port {
            Some(port) if capability_ok => PreviewHost::Link { capability, port },
            _ => PreviewHost::Malformed,
        }
    }
}

fn strip_suffix_ignore_case<'a>(s: &'a str, suffix: &str) -> Option<&'a str> {
    let cut = s.len().checked_sub(suffix.len())?;
    (s.is_char_boundary(cut) && s[cut..].eq_ignore_ascii_case(suffix)).then(|| &s[..cut])
}

/// A preview link as the API shows it.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Preview {
    /// Names the link to revoke it; not the capability (which only the creator's answer holds).
    pub id: String,
    /// The guest port the link opens.
    pub port: u16,
    /// The link, to open in a browser with no header: given once, in the answer that made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Who made it; requests through the link act as them.
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    /// After this the link answers 404.
    pub expires_at: DateTime<Utc>,
}

/// What a live link opens.
#[derive(Debug)]
pub struct Opened {
    pub namespace: String,
    pub machine: String,
    pub machine_uid: String,
    pub identity: Identity,
}

/// Why a link was not made.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("this server serves no preview links")]
    Disabled,
    #[error("the Machine holds {MAX_PER_MACHINE} live preview links, the most it may: revoke one first")]
    TooMany,
    #[error(transparent)]
    Store(#[from] sqlx::Error),
}

pub struct Previews {
    pool: PgPool,
    domain: Option<PreviewDomain>,
}

type Row = (String, i32, String, DateTime<Utc>, DateTime<Utc>);

fn preview((id, port, created_by, created_at, expires_at): Row) -> Preview {
    Preview { id, port: port as u16, url: None, created_by, created_at, expires_at }
}

impl Previews {
    pub fn new(pool: PgPool, domain: Option<PreviewDomain>) -> Self {
        Previews { pool, domain }
    }

    /// Where links are served, if this server serves them.
    pub fn domain(&self) -> Option<&PreviewDomain> {
        self.domain.as_ref()
    }

    /// A link for `id` to `port` of the Machine `ns/name`, as every surface makes one (REST, MCP):
    /// the port and ttl checked, then the caller's right to use that guest, then the link.
    pub async fn make(
        &self,
        machines: &crate::machines::Machines,
        id: &Identity,
        (ns, name): (&str, &str),
        port: u16,
        ttl_seconds: Option<u64>,
    ) -> Result<Preview> {
        if self.domain.is_none() {
            return Err(CreateError::Disabled.into());
        }
        if port == 0 {
            return Err(Error::new(Reason::Invalid, "port must be from 1 to 65535"));
        }
        let ttl = ttl_seconds.map_or(DEFAULT_TTL, Duration::from_secs);
        if ttl.is_zero() || ttl > MAX_TTL {
            return Err(Error::new(
                Reason::Invalid,
                format!(
                    "ttlSeconds must be from 1 to {} (7 days): ask for a new link when one ends",
                    MAX_TTL.as_secs()
                ),
            ));
        }
        let m = machines.authorize(id, ns, name, Needs::Instance).await?;
        let uid = m.metadata.uid.ok_or_else(|| Error::internal(format!("Machine {ns}/{name} has no uid")))?;
        Ok(self.create(id, (ns, name, &uid), port, ttl).await?)
    }

    /// A new link for `id` to port `port` of the Machine `ns/name` with UID `uid`.
    pub async fn create(
        &self,
        id: &Identity,
        (ns, name, uid): (&str, &str, &str),
        port: u16,
        ttl: Duration,
    ) -> Result<Preview, CreateError> {
        let domain = self.domain.as_ref().ok_or(CreateError::Disabled)?;
        let capability = uuid::Uuid::new_v4().simple().to_string();
        let link_id = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        let identity = serde_json::to_value(id).map_err(|e| sqlx::Error::Encode(e.into()))?;
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM previews WHERE expires_at <= clock_timestamp()").execute(&mut *tx).await?;
        // One link at a time per Machine counts, so two racing creates cannot both pass the limit.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('previews/' || $1))").bind(uid).execute(&mut *tx).await?;
        let (live,): (i64,) = sqlx::query_as("SELECT count(*) FROM previews WHERE machine_uid = $1")
            .bind(uid)
            .fetch_one(&mut *tx)
            .await?;
        if live >= MAX_PER_MACHINE {
            return Err(CreateError::TooMany);
        }
        let row: Row = sqlx::query_as(
            "INSERT INTO previews (id, digest, namespace, machine, machine_uid, port, subject, identity, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, clock_timestamp() + make_interval(secs => $9)) \
             RETURNING id, port, subject, created_at, expires_at",
        )
        .bind(&link_id)
        .bind(digest(&capability))
        .bind(ns)
        .bind(name)
        .bind(uid)
        .bind(i32::from(port))
        .bind(&id.sub)
        .bind(identity)
        .bind(ttl.as_secs_f64())
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Preview { url: Some(domain.url(&capability, port)), ..preview(row) })
    }

    /// The live links of the Machine with UID `uid`, newest first.
    pub async fn list(&self, uid: &str) -> Result<Vec<Preview>, sqlx::Error> {
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT id, port, subject, created_at, expires_at FROM previews \
             WHERE machine_uid = $1 AND expires_at > clock_timestamp() ORDER BY created_at DESC, id",
        )
        .bind(uid)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(preview).collect())
    }

    /// Revokes the link `link_id` of the Machine with UID `uid`: whether there was one.
    pub async fn revoke(&self, uid: &str, link_id: &str) -> Result<bool, sqlx::Error> {
        let done = sqlx::query("DELETE FROM previews WHERE machine_uid = $1 AND id = $2")
            .bind(uid)
            .bind(link_id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// What the live link with this capability opens, if it opens `port`.
    pub async fn open(&self, capability: &str, port: u16) -> Result<Option<Opened>, sqlx::Error> {
        let row: Option<(String, String, String, i32, serde_json::Value)> = sqlx::query_as(
            "SELECT namespace, machine, machine_uid, port, identity FROM previews \
             WHERE digest = $1 AND expires_at > clock_timestamp()",
        )
        .bind(digest(capability))
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.filter(|r| r.3 == i32::from(port)).and_then(|(namespace, machine, machine_uid, _, identity)| {
            let identity = serde_json::from_value(identity).ok()?;
            Some(Opened { namespace, machine, machine_uid, identity })
        }))
    }
}

fn digest(capability: &str) -> Vec<u8> {
    Sha256::digest(capability.as_bytes()).to_vec()
}

/// The server's outermost layer: a request for a preview host is the link's (or a 404), never
/// an API route's; any other goes on to the API.
pub async fn serve(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let Some(domain) = st.previews.domain() else { return next.run(req).await };
    let host = req
        .uri()
        .host()
        .map(str::to_owned)
        .or_else(|| req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).map(str::to_owned));
    let Some(host) = host else { return next.run(req).await };
    let mut resp = match domain.parse(&host) {
        PreviewHost::Api => return next.run(req).await,
        PreviewHost::Malformed => gone(),
        PreviewHost::Link { capability, port } => match relay(&st, capability, port, req).await {
            Ok(resp) => resp,
            Err(e) => e.into_response(),
        },
    };
    // A link's capability is in its host: no page it serves tells another site where it came from.
    resp.headers_mut().insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    resp
}

/// The answer for a link that does not open anything: the same whatever the reason, so a guess
/// learns nothing.
fn gone() -> Response {
    let mut resp = (
        StatusCode::NOT_FOUND,
        "This preview link does not open anything: it expired, was revoked, names another port, or its \
         Machine was deleted. Ask for a new one (sb.preview_url(port) in the SDKs, POST \
         /api/v1/machines/NAMESPACE/NAME/previews).\n",
    )
        .into_response();
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

async fn relay(st: &AppState, capability: &str, port: u16, req: Request) -> Result<Response> {
    let Some(opened) = st.previews.open(capability, port).await? else { return Ok(gone()) };
    let machines = st.machines.as_ref().ok_or_else(|| Error::unavailable("this server has no Machines service"))?;
    let (ns, name) = (&opened.namespace, &opened.machine);
    // As the link's maker, checked again now: a link is never more than its maker may do.
    let m = match machines.authorize(&opened.identity, ns, name, Needs::Instance).await {
        Ok(m) => m,
        Err(e) if e.status() == StatusCode::NOT_FOUND => return Ok(gone()),
        Err(e) => return Err(e),
    };
    if m.metadata.uid.as_deref() != Some(opened.machine_uid.as_str()) {
        return Ok(gone());
    }
    let slot = st
        .connections
        .acquire_for(&opened.identity)
        .map_err(|e| Error::new(Reason::TooManyConnections, e.message()))?;
    let session = machines.connect(&opened.identity, ns, name, m).await?;
    if req.headers().contains_key(header::UPGRADE) {
        return upgrade(session, port, req, slot).await;
    }
    let path = percent_decoded(req.uri().path());
    let path =
        kairon_runtime_api::GuestPath::new(&path).map_err(|e| crate::machines::Error::bad_request(e.to_string()))?;
    crate::rest::guest::relay_http(session, port, &path, req, crate::rest::guest::Origin::Preview).await
}

/// The most a guest's answer to an upgrade may put before its body.
const MAX_UPGRADE_HEAD: usize = 64 * 1024;

/// An upgrade request to a link (a dev server's live-reload WebSocket): the guest's own server
/// answers the handshake. The request goes to it as HTTP/1.1 bytes through a tunnel to its port;
/// once it switches protocols, bytes flow both ways until either side closes.
async fn upgrade(
    session: Session,
    port: u16,
    mut req: Request,
    slot: Option<crate::limits::ConnectionGuard>,
) -> Result<Response> {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;

    let client = hyper::upgrade::on(&mut req);
    let mut tunnel = session.runtime.relay(&session.id, &kairon_runtime_api::Relay::Tunnel(port)).await?;
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let mut head = format!("{} {target} HTTP/1.1\r\n", req.method()).into_bytes();
    if req.uri().authority().is_some() && !req.headers().contains_key(header::HOST) {
        head.extend_from_slice(format!("host: {}\r\n", req.uri().authority().map_or("", |a| a.as_str())).as_bytes());
    }
    for (k, v) in req.headers().iter().filter(|(k, _)| *k != header::AUTHORIZATION) {
        head.extend_from_slice(k.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(v.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    let closed = |e: &dyn std::fmt::Display| {
        Error::new(Reason::GuestClosed, format!("the server on port {port} closed the connection: {e}"))
    };
    tunnel.send(Message::Binary(head.into())).await.map_err(|e| closed(&e))?;

    // The guest's answer, up to the end of its head.
    let mut answer = Vec::new();
    let end = loop {
        if let Some(at) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if answer.len() > MAX_UPGRADE_HEAD {
            return Err(Error::new(Reason::GuestUnreachable, format!("the server on port {port} sent no HTTP answer")));
        }
        match tunnel.next().await {
            Some(Ok(Message::Binary(b))) => answer.extend_from_slice(&b),
            Some(Ok(Message::Close(_))) | None => return Err(closed(&"before it answered")),
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(closed(&e)),
        }
    };
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Response::new(&mut headers);
    let bad = || Error::new(Reason::GuestUnreachable, format!("the server on port {port} did not answer in HTTP/1.1"));
    parsed.parse(&answer[..end]).map_err(|_| bad())?;
    let status = parsed.code.and_then(|c| StatusCode::from_u16(c).ok()).ok_or_else(bad)?;
    let mut resp = Response::builder().status(status);
    for h in parsed.headers.iter() {
        resp = resp.header(h.name, h.value);
    }
    let rest = answer[end..].to_vec();
    if status != StatusCode::SWITCHING_PROTOCOLS {
        // Refused (no such route, a wrong key): its answer, as far as it was read, and no upgrade.
        let mut refused = resp.body(axum::body::Body::from(rest)).map_err(|_| bad())?;
        refused.headers_mut().remove(header::TRANSFER_ENCODING);
        refused.headers_mut().remove(header::CONTENT_LENGTH);
        return Ok(refused);
    }
    tokio::spawn(async move {
        let _held = (session, slot);
        let Ok(client) = client.await else { return };
        let mut client = hyper_util::rt::TokioIo::new(client);
        if client.write_all(&rest).await.is_err() {
            return;
        }
        let (mut from_client, mut to_client) = tokio::io::split(client);
        let (mut to_guest, mut from_guest) = tunnel.split();
        let up = async {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n @ 1..) = from_client.read(&mut buf).await {
                if to_guest.send(Message::Binary(buf[..n].to_vec().into())).await.is_err() {
                    break;
                }
            }
            let _ = to_guest.close().await;
        };
        let down = async {
            while let Some(Ok(m)) = from_guest.next().await {
                match m {
                    Message::Binary(b) if to_client.write_all(&b).await.is_ok() => {}
                    Message::Binary(_) | Message::Close(_) => break,
                    _ => {}
                }
            }
            let _ = to_client.shutdown().await;
        };
        tokio::select! { _ = up => {}, _ = down => {} }
    });
    resp.body(axum::body::Body::empty()).map_err(|_| bad())
}

/// A request path as the guest's server should see it (the relay encodes each segment again).
fn percent_decoded(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) =
                (bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl From<CreateError> for Error {
    fn from(e: CreateError) -> Self {
        match e {
            CreateError::Disabled => Error::new(
                Reason::PreviewsUnavailable,
                "this server serves no preview links: start its api with --preview-domain DOMAIN, a domain \
                 whose subdomains all resolve to it (wildcard DNS) and are served with a wildcard \
                 certificate or one minted per name from the api's CA",
            ),
            CreateError::TooMany => Error::conflict(Reason::Conflict, e.to_string()),
            CreateError::Store(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn hosts_are_a_links_or_the_apis() {
        let d = PreviewDomain::new("localhost", Some(8443)).unwrap();
        assert_eq!(d.url(CAP, 8000), format!("https://{CAP}-8000.localhost:8443/"));
        let link = PreviewHost::Link { capability: CAP, port: 8000 };
        assert_eq!(d.parse(&format!("{CAP}-8000.localhost:8443")), link);
        assert_eq!(d.parse(&format!("{CAP}-8000.LOCALHOST.")), link);
        for api in ["localhost", "localhost:8443", "127.0.0.1:8443", "[::1]:8443", "example.com", "xlocalhost"] {
            assert_eq!(d.parse(api), PreviewHost::Api, "{api}");
        }
        for bad in [
            format!("{CAP}.localhost"),
            format!("{CAP}-0.localhost"),
            format!("{CAP}-08000.localhost"),
            format!("{CAP}-65536.localhost"),
            format!("x.{CAP}-8000.localhost"),
            format!("{}-8000.localhost", &CAP[1..]),
            format!("{}-8000.localhost", CAP.to_uppercase().replace('A', "g")),
            "api.localhost".to_string(),
        ] {
            assert_eq!(d.parse(&bad), PreviewHost::Malformed, "{bad}");
        }
        let cluster = PreviewDomain::new("Previews.Example.com.", None).unwrap();
        assert_eq!(cluster.url(CAP, 3000), format!("https://{CAP}-3000.previews.example.com/"));
        assert!(PreviewDomain::new("https://x.com", None).is_err());
        assert!(PreviewDomain::new("", None).is_err());
    }

    #[test]
    fn paths_reach_the_guest_as_sent() {
        assert_eq!(percent_decoded("/a%20b/c%2Fd/%zz"), "/a b/c/d/%zz");
    }

    fn maker() -> Identity {
        Identity { sub: "alice".into(), role: crate::auth::Role::Operator, namespaces: vec!["a".into()], legacy: false }
    }

    #[sqlx::test(migrator = "kairon_db::MIGRATOR")]
    async fn a_link_opens_its_port_of_its_machine_until_revoked_or_expired(pool: PgPool) {
        let previews = Previews::new(pool, Some(PreviewDomain::new("localhost", Some(1)).unwrap()));
        let made = previews.create(&maker(), ("a", "m", "uid-1"), 8000, DEFAULT_TTL).await.unwrap();
        let url = made.url.clone().unwrap();
        let PreviewHost::Link { capability, port } = previews.domain().unwrap().parse(url_host(&url)) else {
            panic!("{url}")
        };
        assert_eq!(port, 8000);
        let opened = previews.open(capability, 8000).await.unwrap().expect("opens");
        assert_eq!(
            (opened.namespace.as_str(), opened.machine_uid.as_str(), opened.identity.sub.as_str()),
            ("a", "uid-1", "alice")
        );
        assert!(previews.open(capability, 8001).await.unwrap().is_none(), "another port");
        let listed = previews.list("uid-1").await.unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].url.is_none(), "the capability is given once");
        assert!(!previews.revoke("uid-2", &made.id).await.unwrap(), "another Machine's link");
        assert!(previews.revoke("uid-1", &made.id).await.unwrap());
        assert!(previews.open(capability, 8000).await.unwrap().is_none(), "revoked");

        let short = previews.create(&maker(), ("a", "m", "uid-1"), 8000, Duration::from_millis(200)).await.unwrap();
        let url = short.url.unwrap();
        let PreviewHost::Link { capability, .. } = previews.domain().unwrap().parse(url_host(&url)) else { panic!() };
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(previews.open(capability, 8000).await.unwrap().is_none(), "expired");
    }

    #[sqlx::test(migrator = "kairon_db::MIGRATOR")]
    async fn a_machine_holds_a_bounded_number_of_links(pool: PgPool) {
        let previews = Previews::new(pool.clone(), Some(PreviewDomain::new("localhost", None).unwrap()));
        for _ in 0..MAX_PER_MACHINE {
            previews.create(&maker(), ("a", "m", "uid-1"), 80, DEFAULT_TTL).await.unwrap();
        }
        let refused = previews.create(&maker(), ("a", "m", "uid-1"), 80, DEFAULT_TTL).await;
        assert!(matches!(refused, Err(CreateError::TooMany)), "{refused:?}");
        previews.create(&maker(), ("a", "other", "uid-2"), 80, DEFAULT_TTL).await.expect("another Machine's own");
        let off = Previews::new(pool, None);
        assert!(matches!(off.create(&maker(), ("a", "m", "uid-3"), 80, DEFAULT_TTL).await, Err(CreateError::Disabled)));
    }

    fn url_host(url: &str) -> &str {
        url.trim_start_matches("https://").trim_end_matches('/')
    }
}
