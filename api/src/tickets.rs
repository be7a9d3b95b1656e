//! Single-use WebSocket tickets. Browsers cannot put an `Authorization` header on a WebSocket,
//! and a token never goes in a URL (it would land in logs and history): a caller with a bearer
//! token mints a ticket (`POST /api/v1/tickets`) for one WebSocket route of one Machine and
//! opens that WebSocket with `?ticket=`. A ticket is not a token: it works once, for
//! [`TICKET_TTL`], on the route it was minted for only, and stands for the identity that minted
//! it. Tickets live in PostgreSQL, so that behind several api replicas one minted on a
//! replica opens its WebSocket on another; only their SHA-256 is stored, and redeeming one is a
//! single `DELETE … RETURNING`, so it works once however many replicas race for it.

use std::time::Duration;

use sha2::{Digest, Sha256};
use sqlx::PgPool;

use crate::auth::Identity;

/// How long a ticket may wait for its WebSocket.
pub const TICKET_TTL: Duration = Duration::from_secs(30);

/// The most unredeemed tickets kept at once (the oldest are dropped first past it).
const MAX_TICKETS: i64 = 10_000;

/// The most unredeemed tickets one subject holds: its own oldest is dropped past it, so one
/// tenant minting in a loop drops its own tickets, never another tenant's.
const MAX_TICKETS_PER_SUBJECT: i64 = 32;

pub struct Tickets {
    pool: PgPool,
    ttl: Duration,
}

impl Tickets {
    pub fn new(pool: PgPool) -> Self {
        Tickets::with_ttl(pool, TICKET_TTL)
    }

    /// Tickets valid for `ttl` (tests shorten it).
    pub fn with_ttl(pool: PgPool, ttl: Duration) -> Self {
        Tickets { pool, ttl }
    }

    /// How long a ticket stays valid.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A new ticket for `id` to open the WebSocket at `path`, valid for the ttl.
    pub async fn mint(&self, id: &Identity, path: &str) -> Result<String, sqlx::Error> {
        let ticket = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
        let identity = serde_json::to_value(id).map_err(|e| sqlx::Error::Encode(e.into()))?;
        let mut tx = self.pool.begin().await?;
        // The database's clock, the same for every replica.
        sqlx::query("DELETE FROM tickets WHERE expires_at <= clock_timestamp()").execute(&mut *tx).await?;
        // Past the subject's own limit its oldest tickets go; past the global one, the oldest.
        sqlx::query(
            "DELETE FROM tickets WHERE digest IN \
             (SELECT digest FROM tickets WHERE subject = $1 ORDER BY expires_at DESC OFFSET $2)",
        )
        .bind(&id.sub)
        .bind(MAX_TICKETS_PER_SUBJECT - 1)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM tickets WHERE digest IN (SELECT digest FROM tickets ORDER BY expires_at DESC OFFSET $1)",
        )
        .bind(MAX_TICKETS - 1)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO tickets (digest, subject, identity, path, expires_at) \
             VALUES ($1, $2, $3, $4, clock_timestamp() + make_interval(secs => $5))",
        )
        .bind(digest(&ticket))
        .bind(&id.sub)
        .bind(identity)
        .bind(path)
        .bind(self.ttl.as_secs_f64())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(ticket)
    }

    /// The identity a ticket stands for, once, on the WebSocket at `path`: redeeming it
    /// removes it, on whatever route it is tried (a ticket tried elsewhere is spent).
    pub async fn redeem(&self, ticket: &str, path: &str) -> Result<Redeemed, sqlx::Error> {
        let row: Option<(serde_json::Value, String, bool)> = sqlx::query_as(
            "DELETE FROM tickets WHERE digest = $1 RETURNING identity, path, expires_at > clock_timestamp()",
        )
        .bind(digest(ticket))
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            Some((_, minted_for, true)) if minted_for != path => Redeemed::OtherRoute(minted_for),
            Some((id, _, true)) => serde_json::from_value(id).map_or(Redeemed::Unknown, Redeemed::Opens),
            _ => Redeemed::Unknown,
        })
    }
}

/// What a ticket tried on a route comes to.
#[derive(Debug)]
pub enum Redeemed {
    /// The identity it stands for.
    Opens(Identity),
    /// Minted for this other route: refused (and spent).
    OtherRoute(String),
    /// Unknown, used or expired.
    Unknown,
}

impl Redeemed {
    pub fn identity(self) -> Option<Identity> {
        match self {
            Redeemed::Opens(id) => Some(id),
            _ => None,
        }
    }
}

fn digest(ticket: &str) -> Vec<u8> {
    Sha256::digest(ticket.as_bytes()).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;

    const SHELL: &str = "/api/v1/machines/a/m/exec/stream";

    fn viewer() -> Identity {
        Identity { sub: "v".into(), role: Role::Viewer, namespaces: vec!["a".into()], legacy: false }
    }

    #[sqlx::test(migrator = "kairon_db::MIGRATOR")]
    async fn a_ticket_works_once_on_any_replica(pool: PgPool) {
        let (one, two) = (Tickets::new(pool.clone()), Tickets::new(pool));
        let ticket = one.mint(&viewer(), SHELL).await.unwrap();
        assert_eq!(ticket.len(), 64);
        let id = two.redeem(&ticket, SHELL).await.unwrap().identity().expect("minted on one, redeemed on the other");
        assert_eq!((id.sub.as_str(), id.role, id.namespaces), ("v", Role::Viewer, vec!["a".to_string()]));
        assert!(one.redeem(&ticket, SHELL).await.unwrap().identity().is_none(), "used");
        assert!(one.redeem("nope", SHELL).await.unwrap().identity().is_none());
    }

    #[sqlx::test(migrator = "kairon_db::MIGRATOR")]
    async fn a_ticket_opens_only_the_route_it_was_minted_for(pool: PgPool) {
        let t = Tickets::new(pool);
        let ticket = t.mint(&viewer(), SHELL).await.unwrap();
        match t.redeem(&ticket, "/api/v1/machines/b/other/exec/stream").await.unwrap() {
            Redeemed::OtherRoute(p) => assert_eq!(p, SHELL),
            other => panic!("another Machine's route: {other:?}"),
        }
        assert!(t.redeem(&ticket, SHELL).await.unwrap().identity().is_none(), "tried elsewhere, it is spent");
    }

    #[sqlx::test(migrator = "kairon_db::MIGRATOR")]
    async fn racing_redeems_of_one_ticket_have_one_winner(pool: PgPool) {
        let t = std::sync::Arc::new(Tickets::new(pool));
        let ticket = t.mint(&viewer(), SHELL).await.unwrap();
        let racers = (0..16).map(|_| {
            let (t, ticket) = (t.clone(), ticket.clone());
            tokio::spawn(async move { t.redeem(&ticket, SHELL).await.unwrap().identity().is_some() })
        });
        let won = futures::future::join_all(racers).await.into_iter().filter(|w| *w.as_ref().unwrap()).count();
        assert_eq!(won, 1);
    }

    #[sqlx::test(migrator = "kairon_db::MIGRATOR")]
    async fn a_subject_minting_in_a_loop_drops_only_its_own_tickets(pool: PgPool) {
        let t = Tickets::new(pool);
        let other = Identity { sub: "w".into(), ..viewer() };
        let kept = t.mint(&other, SHELL).await.unwrap();
        let first = t.mint(&viewer(), SHELL).await.unwrap();
        let mut last = String::new();
        for _ in 0..MAX_TICKETS_PER_SUBJECT * 2 {
            last = t.mint(&viewer(), SHELL).await.unwrap();
        }
        assert!(t.redeem(&first, SHELL).await.unwrap().identity().is_none(), "its oldest went first");
        assert!(t.redeem(&last, SHELL).await.unwrap().identity().is_some(), "its newest works");
        assert_eq!(
            t.redeem(&kept, SHELL).await.unwrap().identity().map(|i| i.sub),
            Some("w".into()),
            "another subject's stays"
        );
    }

    #[sqlx::test(migrator = "kairon_db::MIGRATOR")]
    async fn a_ticket_expires(pool: PgPool) {
        let t = Tickets::with_ttl(pool, Duration::from_millis(1));
        let ticket = t.mint(&viewer(), SHELL).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(t.redeem(&ticket, SHELL).await.unwrap().identity().is_none());
    }
}
