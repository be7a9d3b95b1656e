//! Bounded work: how much one request may make the server read, compute, keep or hold open.
//! Every limit is a flag of `kairon up` and `kairon api` (SECURITY.md, "Bounded work").

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The limits, with the documented defaults.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest request body on every route but file uploads.
    pub max_body_bytes: usize,
    /// Largest file upload (`PUT …/files`): it streams to the guest, so this bounds the disk
    /// one request fills, not memory.
    pub max_upload_bytes: u64,
    /// Most operations in one JSON Patch.
    pub max_patch_operations: usize,
    /// Largest object a patch (JSON, merge, strategic or apply) may produce.
    pub max_patched_object_bytes: usize,
    /// Most bytes of each exec output stream kept; the rest is cut and `truncated` set.
    pub max_exec_output_bytes: u64,
    /// The exec timeout when a request gives none.
    pub exec_default_timeout: Duration,
    /// The longest exec timeout a request may ask for.
    pub exec_max_timeout: Duration,
    /// Most long-lived connections (watches, waits, WebSockets, log follows) per token subject.
    pub max_connections_per_subject: usize,
}

pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
pub const DEFAULT_MAX_PATCH_OPERATIONS: usize = 10_000;
pub const DEFAULT_MAX_PATCHED_OBJECT_BYTES: usize = 3 * 512 * 1024;
pub const DEFAULT_MAX_EXEC_OUTPUT_BYTES: u64 = 16 * 1024 * 1024;
pub const DEFAULT_EXEC_TIMEOUT_SECONDS: u64 = 300;
pub const DEFAULT_EXEC_MAX_TIMEOUT_SECONDS: u64 = 3600;
pub const DEFAULT_MAX_CONNECTIONS_PER_SUBJECT: usize = 32;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_upload_bytes: kairon_runtime_api::types::DEFAULT_MAX_UPLOAD_BYTES,
            max_patch_operations: DEFAULT_MAX_PATCH_OPERATIONS,
            max_patched_object_bytes: DEFAULT_MAX_PATCHED_OBJECT_BYTES,
            max_exec_output_bytes: DEFAULT_MAX_EXEC_OUTPUT_BYTES,
            exec_default_timeout: Duration::from_secs(DEFAULT_EXEC_TIMEOUT_SECONDS),
            exec_max_timeout: Duration::from_secs(DEFAULT_EXEC_MAX_TIMEOUT_SECONDS),
            max_connections_per_subject: DEFAULT_MAX_CONNECTIONS_PER_SUBJECT,
        }
    }
}

/// Why an upload was refused for its size.
pub fn upload_too_large(limit: u64) -> String {
    format!(
        "the file is larger than {}, the largest upload: split it, or raise --max-upload-bytes (KAIRON_MAX_UPLOAD_BYTES)",
        human_bytes(limit)
    )
}

/// A byte count for a message: `3 MiB`, `64 KiB`, `512 bytes`.
pub fn human_bytes(n: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    const GIB: u64 = 1024 * MIB;
    if n >= GIB && n.is_multiple_of(GIB) {
        format!("{} GiB", n / GIB)
    } else if n >= MIB && n.is_multiple_of(MIB / 2) {
        let whole = n / MIB;
        if n.is_multiple_of(MIB) { format!("{whole} MiB") } else { format!("{whole}.5 MiB") }
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} bytes")
    }
}

/// Counts the long-lived connections of each token subject. Admins are counted too: a leaked
/// admin token must not be able to exhaust the server either. Node agents and controllers are
/// not (see [`ConnectionLimiter::acquire_for`]): how many watches they hold is fixed by the
/// code, not by a caller, and refusing one would stop the cluster's own machinery.
#[derive(Debug)]
pub struct ConnectionLimiter {
    limit: usize,
    open: Mutex<HashMap<String, usize>>,
}

/// One open long-lived connection; dropping it frees the slot.
#[derive(Debug)]
pub struct ConnectionGuard {
    limiter: Arc<ConnectionLimiter>,
    sub: String,
}

/// The refusal: the subject already holds `limit` connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooManyConnections {
    pub limit: usize,
}

impl TooManyConnections {
    pub const REASON: &'static str = "TooManyConnections";

    pub fn message(&self) -> String {
        format!(
            "this token already holds {} long-lived connections (watches, waits, WebSockets, log follows), the \
             most one token subject may hold at once: close one, or raise --max-connections-per-subject \
             (KAIRON_MAX_CONNECTIONS_PER_SUBJECT)",
            self.limit
        )
    }
}

impl ConnectionLimiter {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(ConnectionLimiter { limit, open: Mutex::new(HashMap::new()) })
    }

    /// Takes a slot for `sub`, or refuses when it holds `limit` already.
    pub fn acquire(self: &Arc<Self>, sub: &str) -> Result<ConnectionGuard, TooManyConnections> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(sub.to_string()).or_default();
        if *n >= self.limit {
            return Err(TooManyConnections { limit: self.limit });
        }
        *n += 1;
        Ok(ConnectionGuard { limiter: self.clone(), sub: sub.to_string() })
    }

    /// Takes a slot for a caller; node agents' and controllers' watches are not counted
    /// (`None`).
    pub fn acquire_for(
        self: &Arc<Self>,
        id: &crate::auth::Identity,
    ) -> Result<Option<ConnectionGuard>, TooManyConnections> {
        use crate::auth::Role;
        if matches!(id.role, Role::Node | Role::Controller) {
            return Ok(None);
        }
        self.acquire(&id.sub).map(Some)
    }

    /// How many connections `sub` holds now.
    pub fn open(&self, sub: &str) -> usize {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).get(sub).copied().unwrap_or(0)
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        let mut open = self.limiter.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.sub) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.sub);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subject_gets_its_limit_and_a_closed_slot_comes_back() {
        let l = ConnectionLimiter::new(2);
        let a = l.acquire("alice").unwrap();
        let _b = l.acquire("alice").unwrap();
        assert_eq!(l.acquire("alice").unwrap_err(), TooManyConnections { limit: 2 });
        // Another subject is not affected.
        let _c = l.acquire("bob").unwrap();
        drop(a);
        assert_eq!(l.open("alice"), 1);
        let _d = l.acquire("alice").unwrap();
        assert!(l.acquire("alice").is_err());
    }

    #[test]
    fn the_map_forgets_subjects_with_nothing_open() {
        let l = ConnectionLimiter::new(1);
        drop(l.acquire("x").unwrap());
        assert!(l.open.lock().unwrap().is_empty());
    }

    #[test]
    fn sizes_read_as_a_person_writes_them() {
        assert_eq!(human_bytes(3 * 1024 * 1024), "3 MiB");
        assert_eq!(human_bytes(DEFAULT_MAX_PATCHED_OBJECT_BYTES as u64), "1.5 MiB");
        assert_eq!(human_bytes(64 * 1024), "64 KiB");
        assert_eq!(human_bytes(1000), "1000 bytes");
    }
}
