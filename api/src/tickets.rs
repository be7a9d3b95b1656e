//! Single-use WebSocket tickets. Browsers cannot put an `Authorization` header on a WebSocket,
//! and a token never goes in a URL (it would land in logs and history): a caller with a bearer
//! token mints a ticket (`POST /api/v1/tickets`) and opens the WebSocket with `?ticket=`. A
//! ticket is not a token: it works once, for [`TICKET_TTL`], and stands for the identity that
//! minted it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::auth::Identity;

/// How long a ticket may wait for its WebSocket.
pub const TICKET_TTL: Duration = Duration::from_secs(30);

/// The most unredeemed tickets kept at once (older ones are dropped first when it is reached).
const MAX_TICKETS: usize = 10_000;

/// The most unredeemed tickets one subject holds: its own oldest is dropped past it, so one
/// tenant minting in a loop drops its own tickets, never another tenant's.
const MAX_TICKETS_PER_SUBJECT: usize = 32;

pub struct Tickets {
    open: Mutex<HashMap<String, (Identity, Instant)>>,
    ttl: Duration,
}

impl Default for Tickets {
    fn default() -> Self {
        Tickets::with_ttl(TICKET_TTL)
    }
}

impl Tickets {
    /// Tickets valid for `ttl` (tests shorten it).
    pub fn with_ttl(ttl: Duration) -> Self {
        Tickets { open: Mutex::new(HashMap::new()), ttl }
    }

    /// How long a ticket stays valid.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A new ticket for `id`, valid for [`TICKET_TTL`].
    pub fn mint(&self, id: &Identity) -> String {
        let ticket = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
        let now = Instant::now();
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|_, (_, at)| now.duration_since(*at) < self.ttl);
        // Past the subject's own limit its oldest ticket goes; past the global one, the oldest.
        let own = open.values().filter(|(holder, _)| holder.sub == id.sub).count();
        let evict_own = own >= MAX_TICKETS_PER_SUBJECT;
        if evict_own || open.len() >= MAX_TICKETS {
            let oldest = open
                .iter()
                .filter(|(_, (holder, _))| !evict_own || holder.sub == id.sub)
                .min_by_key(|(_, (_, at))| *at)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                open.remove(&oldest);
            }
        }
        open.insert(ticket.clone(), (id.clone(), now));
        ticket
    }

    /// The identity a ticket stands for, once: redeeming it removes it.
    pub fn redeem(&self, ticket: &str) -> Option<Identity> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let (id, at) = open.remove(ticket)?;
        (at.elapsed() < self.ttl).then_some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;

    fn viewer() -> Identity {
        Identity { sub: "v".into(), role: Role::Viewer, namespaces: vec!["a".into()], legacy: false }
    }

    #[test]
    fn a_ticket_works_once() {
        let t = Tickets::default();
        let ticket = t.mint(&viewer());
        assert_eq!(ticket.len(), 64);
        assert_eq!(t.redeem(&ticket).map(|i| i.sub), Some("v".into()));
        assert!(t.redeem(&ticket).is_none());
        assert!(t.redeem("nope").is_none());
    }

    #[test]
    fn a_subject_minting_in_a_loop_drops_only_its_own_tickets() {
        let t = Tickets::default();
        let other = Identity { sub: "w".into(), ..viewer() };
        let kept = t.mint(&other);
        let first = t.mint(&viewer());
        let rest: Vec<String> = (0..MAX_TICKETS_PER_SUBJECT * 4).map(|_| t.mint(&viewer())).collect();
        assert!(t.redeem(&first).is_none(), "its oldest went first");
        assert!(t.redeem(rest.last().unwrap()).is_some(), "its newest works");
        assert_eq!(t.redeem(&kept).map(|i| i.sub), Some("w".into()), "another subject's ticket stays");
    }

    #[test]
    fn a_ticket_expires() {
        let t = Tickets::with_ttl(Duration::from_millis(1));
        let ticket = t.mint(&viewer());
        std::thread::sleep(Duration::from_millis(5));
        assert!(t.redeem(&ticket).is_none());
    }
}
