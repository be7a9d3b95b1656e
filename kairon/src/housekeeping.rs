//! The embedded store's upkeep: old revisions compacted away, and Events deleted a while after
//! their last write (Kubernetes' `--event-ttl`), so neither the database nor the work that reads
//! Events grows with the Machines a node has ever run.

use std::time::Duration;

use kairon_db::Store;
use tokio_util::sync::CancellationToken;

use crate::workers::{Workers, pause};

#[derive(clap::Args, Clone)]
pub struct Housekeeping {
    /// How often old revisions are compacted away.
    #[arg(long, default_value = "5m", value_parser = crate::up::parse_duration)]
    compact_interval: Duration,
    /// How many recent revisions compaction keeps (watches may resume within them).
    #[arg(long, default_value_t = 100_000)]
    compact_keep: i64,
    /// How long an Event is kept after its last write.
    #[arg(long, default_value = "1h", value_parser = crate::up::parse_duration)]
    event_ttl: Duration,
}

/// Events deleted in one go; more wait for the next turn, at once.
const EXPIRY_BATCH: usize = 500;
/// After a failure, the next try.
const RETRY: Duration = Duration::from_secs(10);

impl Housekeeping {
    pub fn spawn(&self, workers: &mut Workers, store: &Store) {
        let (store2, stop) = (store.clone(), workers.token());
        let (every, keep) = (self.compact_interval.max(Duration::from_millis(100)), self.compact_keep);
        workers.spawn(async move {
            while !pause(&stop, every).await {
                if let Err(e) = store2.compact(keep).await {
                    tracing::warn!(error = %e, "compaction failed");
                }
            }
        });
        let (store, stop, ttl) = (store.clone(), workers.token(), self.event_ttl);
        workers.spawn(expire_events(store, ttl, stop));
    }
}

/// Deletes Events older than `ttl`, waking when the oldest left comes due (or after a ttl
/// when none is left: an Event written meanwhile is due no sooner).
async fn expire_events(store: Store, ttl: Duration, stop: CancellationToken) {
    loop {
        let next = match store.expire("events.k8s.io", "events", ttl, EXPIRY_BATCH).await {
            Ok((deleted, next)) => {
                if deleted > 0 {
                    tracing::debug!(deleted, "expired Events");
                }
                // Due now means a batch is still waiting: go on, after a breath for the writers.
                next.unwrap_or(ttl).max(Duration::from_millis(100))
            }
            Err(e) => {
                tracing::warn!(error = %e, "expiring Events failed; retrying");
                RETRY
            }
        };
        if pause(&stop, next).await {
            return;
        }
    }
}
