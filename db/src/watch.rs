//! Watch fan-out: one listener task per [`Store`] turns `pg_notify` wake-ups
//! into an ordered event feed (broadcast channel + in-memory ring), and each
//! watch stream replays history from the ring or the `revisions` table before
//! following that feed.
//!
//! Correctness rests on two facts: revisions commit in rv order with no gaps
//! (see the crate docs), and the hub's lock makes "subscribe + snapshot the
//! ring" atomic with respect to publishing. A watcher therefore sees every rv
//! exactly once: history up to the hub's `last` from the ring/database, every
//! later rv from its receiver, and anything it misses on lag it re-reads.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use sqlx::postgres::{PgListener, PgPool};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::oneshot;
use tokio::time::MissedTickBehavior;

use crate::cache::Cache;
use crate::{EventType, NOTIFY_CHANNEL, Store, StoreError, WatchConfig, WatchEvent};

/// Rows per query when the listener reads new revisions.
const LISTENER_PAGE: i64 = 1000;
/// Rows per query when a watcher replays history from the database.
const REPLAY_PAGE: i64 = 500;
/// Pause before retrying a failed LISTEN connection.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

#[derive(sqlx::FromRow)]
pub(crate) struct RevisionRow {
    rv: i64,
    api_group: String,
    resource: String,
    namespace: String,
    name: String,
    event_type: String,
    /// `object::text`: the feed keeps the text, not a parsed value.
    object: String,
}

impl TryFrom<RevisionRow> for WatchEvent {
    type Error = sqlx::Error;

    fn try_from(row: RevisionRow) -> Result<Self, Self::Error> {
        let event_type = EventType::parse(&row.event_type).ok_or_else(|| {
            sqlx::Error::Decode(format!("unknown event_type {:?} at rv {}", row.event_type, row.rv).into())
        })?;
        Ok(WatchEvent {
            rv: row.rv,
            group: row.api_group,
            resource: row.resource,
            namespace: row.namespace,
            name: row.name,
            event_type,
            object_json: row.object.into(),
        })
    }
}

pub(crate) struct Filter {
    pub group: String,
    pub resource: String,
    pub namespace: Option<String>,
}

impl Filter {
    fn matches(&self, ev: &WatchEvent) -> bool {
        ev.group == self.group
            && ev.resource == self.resource
            && self.namespace.as_ref().is_none_or(|ns| *ns == ev.namespace)
    }
}

/// Shared between the listener (sole publisher) and watchers.
pub(crate) struct Hub {
    state: Mutex<HubState>,
    ring_capacity: usize,
    ring_bytes: usize,
    broadcast_capacity: usize,
    /// The revision the cache has applied (-1 while it is not loaded): readers wait on it.
    applied: tokio::sync::watch::Sender<i64>,
}

struct HubState {
    /// `None` once the listener has stopped: watchers then end.
    tx: Option<broadcast::Sender<Arc<WatchEvent>>>,
    /// Contiguous run of the most recent events, ending at `last`.
    ring: VecDeque<Arc<WatchEvent>>,
    /// Bytes of object JSON in `ring`.
    ring_size: usize,
    /// Highest rv published; every rv <= last is committed.
    last: i64,
    /// Every object as of the feed, for reads.
    cache: Cache,
}

/// What a watcher needs to continue strictly after some rv.
struct Subscription {
    rx: broadcast::Receiver<Arc<WatchEvent>>,
    /// Matching ring events after the requested rv.
    ring: VecDeque<Arc<WatchEvent>>,
    /// Events up to here that are older than the ring must come from the database.
    db_upto: i64,
    /// Every rv <= this is covered by the database range and `ring`.
    covered: i64,
}

impl Hub {
    /// A hub whose feed starts after `last`, its cache loaded with `objects` as of `last`.
    pub(crate) fn new(last: i64, objects: Vec<WatchEvent>, config: &WatchConfig) -> Hub {
        // broadcast::channel panics on zero capacity.
        let broadcast_capacity = config.broadcast_capacity.max(1);
        let mut cache = Cache::default();
        cache.load(last, objects);
        Hub {
            state: Mutex::new(HubState {
                tx: Some(broadcast::channel(broadcast_capacity).0),
                ring: VecDeque::new(),
                ring_size: 0,
                last,
                cache,
            }),
            ring_capacity: config.ring_capacity,
            ring_bytes: config.ring_bytes,
            broadcast_capacity,
            applied: tokio::sync::watch::channel(last).0,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        // The state stays consistent even if a holder panicked mid-way.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn last(&self) -> i64 {
        self.lock().last
    }

    /// Runs `read` on the cache once it has applied `rv` (any loaded state when `rv` is None);
    /// None when it does not within `patience` (the listener is behind, or reloading).
    pub(crate) async fn read_cache<T>(
        &self,
        rv: Option<i64>,
        patience: Duration,
        read: impl FnOnce(&Cache) -> T,
    ) -> Option<T> {
        let want = rv.unwrap_or(0);
        let mut applied = self.applied.subscribe();
        if *applied.borrow() < want {
            let caught_up = tokio::time::timeout(patience, applied.wait_for(|&a| a >= want)).await;
            if !matches!(caught_up, Ok(Ok(_))) {
                return None;
            }
        }
        let st = self.lock();
        st.cache.rv().filter(|&at| at >= want).map(|_| read(&st.cache))
    }

    /// Whether the cache lost its footing (a gap in the feed) and must be loaded again.
    fn cache_unloaded(&self) -> bool {
        self.lock().cache.rv().is_none()
    }

    /// Loads the cache with a snapshot of the objects at `rv`, unless the feed has already
    /// gone past it (the snapshot would miss what came between).
    fn load_cache(&self, rv: i64, objects: Vec<WatchEvent>) -> bool {
        let mut st = self.lock();
        if st.last > rv {
            return false;
        }
        st.cache.load(rv, objects);
        self.applied.send_replace(rv);
        true
    }

    /// Publishes events read in rv order after `last`.
    fn publish(&self, events: Vec<WatchEvent>) {
        let mut st = self.lock();
        for ev in events {
            if ev.rv <= st.last {
                continue;
            }
            if ev.rv != st.last + 1 {
                // Revisions were compacted before the listener read them. The
                // live feed can't be made whole, so restart every watcher: each
                // resyncs from its own position and gets Gone if it needs them.
                tracing::warn!(
                    expected = st.last + 1,
                    got = ev.rv,
                    "revisions compacted before the listener read them; restarting watches"
                );
                st.ring.clear();
                st.ring_size = 0;
                if st.tx.is_some() {
                    st.tx = Some(broadcast::channel(self.broadcast_capacity).0);
                }
                // The cache missed them too: reads go to the database until the listener
                // loads it again.
                st.cache.invalidate();
                self.applied.send_replace(-1);
            }
            let ev = Arc::new(ev);
            st.cache.apply(&ev);
            if self.ring_capacity > 0 && ev.object_json.len() <= self.ring_bytes {
                st.ring_size += ev.object_json.len();
                st.ring.push_back(Arc::clone(&ev));
                while st.ring.len() > self.ring_capacity || st.ring_size > self.ring_bytes {
                    let old = st.ring.pop_front().expect("the ring holds what it counts");
                    st.ring_size -= old.object_json.len();
                }
            } else {
                // Too big to keep: the ring must stay contiguous, so it starts again after it.
                st.ring.clear();
                st.ring_size = 0;
            }
            st.last = ev.rv;
            if let Some(tx) = &st.tx {
                // No receivers is fine.
                let _ = tx.send(ev);
            }
        }
        if let Some(rv) = st.cache.rv() {
            self.applied.send_if_modified(|a| std::mem::replace(a, rv) != rv);
        }
    }

    fn close(&self) {
        self.lock().tx = None;
    }

    /// Subscribes and snapshots the ring under one lock, so nothing published
    /// can fall between the snapshot and the receiver.
    fn subscribe(&self, after: i64, filter: &Filter) -> Option<Subscription> {
        let st = self.lock();
        let rx = st.tx.as_ref()?.subscribe();
        let ring_first = st.ring.front().map_or(st.last + 1, |ev| ev.rv);
        // The ring is contiguous, so the first rv > after sits at a known index.
        let skip = usize::try_from(after + 1 - ring_first).unwrap_or(0);
        let ring = st.ring.iter().skip(skip).filter(|ev| filter.matches(ev)).cloned().collect();
        Some(Subscription { rx, ring, db_upto: ring_first - 1, covered: st.last })
    }
}

/// State of one watch stream, driven by `futures::stream::unfold`.
pub(crate) struct WatchState {
    // Keeps the listener alive while the stream exists.
    store: Store,
    filter: Filter,
    rx: broadcast::Receiver<Arc<WatchEvent>>,
    /// Matching events ready to emit, in rv order.
    pending: VecDeque<Arc<WatchEvent>>,
    /// Database range still to replay: rv in (db_after, db_upto].
    db_after: i64,
    db_upto: i64,
    /// Ring events that follow the database range.
    ring_tail: VecDeque<Arc<WatchEvent>>,
    /// Every rv <= seen has been emitted, queued above, or filtered out.
    seen: i64,
    done: bool,
}

impl WatchState {
    /// `None` when the listener has already stopped.
    pub(crate) fn start(store: Store, filter: Filter, from_rv: i64) -> Option<WatchState> {
        let sub = store.inner.hub.subscribe(from_rv, &filter)?;
        Some(WatchState {
            store,
            filter,
            rx: sub.rx,
            pending: VecDeque::new(),
            db_after: from_rv,
            db_upto: sub.db_upto,
            ring_tail: sub.ring,
            seen: sub.covered.max(from_rv),
            done: false,
        })
    }

    /// Re-subscribes after lag (or a feed restart) and queues whatever was
    /// missed since `seen`. Returns false when the listener has stopped.
    fn resync(&mut self) -> bool {
        let Some(sub) = self.store.inner.hub.subscribe(self.seen, &self.filter) else {
            return false;
        };
        self.rx = sub.rx;
        self.db_after = self.seen;
        self.db_upto = sub.db_upto;
        self.ring_tail = sub.ring;
        self.seen = sub.covered.max(self.seen);
        true
    }

    pub(crate) async fn next(mut self) -> Option<(Result<WatchEvent, StoreError>, Self)> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Some((Ok(WatchEvent::clone(&ev)), self));
            }
            if self.done {
                return None;
            }
            if self.db_after < self.db_upto {
                if let Err(e) = self.load_page().await {
                    self.done = true;
                    return Some((Err(e), self));
                }
                continue;
            }
            if !self.ring_tail.is_empty() {
                self.pending.append(&mut self.ring_tail);
                continue;
            }
            match self.rx.recv().await {
                Ok(ev) => {
                    if ev.rv <= self.seen {
                        continue;
                    }
                    self.seen = ev.rv;
                    if self.filter.matches(&ev) {
                        return Some((Ok(WatchEvent::clone(&ev)), self));
                    }
                }
                // Lagged: events were dropped for us; Closed: the feed was
                // restarted or stopped. Either way, pick up from `seen`.
                Err(RecvError::Lagged(_) | RecvError::Closed) => {
                    if !self.resync() {
                        self.done = true;
                    }
                }
            }
        }
    }

    /// Reads the next page of the database replay range into `pending`.
    async fn load_page(&mut self) -> Result<(), StoreError> {
        let pool = self.store.pool().clone();
        let rows: Vec<RevisionRow> = sqlx::query_as(
            "SELECT rv, api_group, resource, namespace, name, event_type, object::text AS object \
             FROM revisions \
             WHERE api_group = $1 AND resource = $2 AND ($3::text IS NULL OR namespace = $3) \
               AND rv > $4 AND rv <= $5 \
             ORDER BY rv LIMIT $6",
        )
        .bind(&self.filter.group)
        .bind(&self.filter.resource)
        .bind(self.filter.namespace.as_deref())
        .bind(self.db_after)
        .bind(self.db_upto)
        .bind(REPLAY_PAGE)
        .fetch_all(&pool)
        .await?;
        // Checked after the read: compaction raises compacted_rv before it
        // deletes, so a read that missed deleted rows sees the raised bound.
        let compacted = crate::compacted_rv(&pool).await?;
        if compacted > self.db_after {
            return Err(StoreError::Gone { compacted });
        }
        let full = rows.len() >= REPLAY_PAGE as usize;
        for row in rows {
            let ev = WatchEvent::try_from(row)?;
            self.db_after = ev.rv;
            self.pending.push_back(Arc::new(ev));
        }
        if !full {
            self.db_after = self.db_upto;
        }
        Ok(())
    }
}

pub(crate) async fn listen(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(NOTIFY_CHANNEL).await?;
    Ok(listener)
}

/// Every object and the revision they are at, read in one snapshot.
pub(crate) async fn snapshot(pool: &PgPool) -> Result<(i64, Vec<WatchEvent>), sqlx::Error> {
    let mut tx = crate::begin(pool, Some("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")).await?;
    let rv: i64 = sqlx::query_scalar("SELECT current_rv FROM store_meta").fetch_one(&mut *tx).await?;
    let rows: Vec<RevisionRow> = sqlx::query_as(
        "SELECT resource_version AS rv, api_group, resource, namespace, name, 'ADDED' AS event_type, \
                object::text AS object \
         FROM objects",
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let objects = rows.into_iter().map(WatchEvent::try_from).collect::<Result<Vec<_>, _>>()?;
    Ok((rv, objects))
}

/// Reads every committed revision after the hub's `last` and publishes it, then loads the
/// cache again if a gap in the feed emptied it.
async fn pump(pool: &PgPool, hub: &Hub) -> Result<(), sqlx::Error> {
    loop {
        let rows: Vec<RevisionRow> = sqlx::query_as(
            "SELECT rv, api_group, resource, namespace, name, event_type, object::text AS object \
             FROM revisions WHERE rv > $1 ORDER BY rv LIMIT $2",
        )
        .bind(hub.last())
        .bind(LISTENER_PAGE)
        .fetch_all(pool)
        .await?;
        let full = rows.len() >= LISTENER_PAGE as usize;
        let events = rows.into_iter().map(WatchEvent::try_from).collect::<Result<Vec<_>, _>>()?;
        hub.publish(events);
        if !full {
            break;
        }
    }
    if hub.cache_unloaded() {
        let (rv, objects) = snapshot(pool).await?;
        if hub.load_cache(rv, objects) {
            tracing::info!(rv, "watch cache loaded again after a gap in the feed");
        }
    }
    Ok(())
}

enum Step {
    Continue,
    Stop,
}

/// Logs a failed read; a closed pool means the store is shutting down.
fn on_error(what: &str, err: sqlx::Error) -> Step {
    if matches!(err, sqlx::Error::PoolClosed) {
        return Step::Stop;
    }
    tracing::warn!(error = %err, "watch listener: {what} failed");
    Step::Continue
}

async fn pump_logged(pool: &PgPool, hub: &Hub) -> Step {
    match pump(pool, hub).await {
        Ok(()) => Step::Continue,
        Err(e) => on_error("reading revisions", e),
    }
}

/// The per-store listener task. Runs until shutdown is signalled (or its
/// sender dropped) or the pool is closed; then ends every watch stream.
pub(crate) async fn run_listener(
    pool: PgPool,
    hub: Arc<Hub>,
    first: PgListener,
    mut shutdown: oneshot::Receiver<()>,
    poll_interval: Duration,
) {
    let mut next_listener = Some(first);
    let mut poll = tokio::time::interval(poll_interval);
    poll.set_missed_tick_behavior(MissedTickBehavior::Delay);

    'connect: loop {
        let listener = match next_listener.take() {
            Some(listener) => listener,
            None => {
                let res = tokio::select! {
                    biased;
                    _ = &mut shutdown => break 'connect,
                    res = listen(&pool) => res,
                };
                match res {
                    Ok(listener) => listener,
                    Err(e) => {
                        if let Step::Stop = on_error("LISTEN", e) {
                            break 'connect;
                        }
                        tokio::select! {
                            biased;
                            _ = &mut shutdown => break 'connect,
                            _ = tokio::time::sleep(RECONNECT_DELAY) => continue 'connect,
                        }
                    }
                }
            }
        };
        // The stream owns the in-flight receive, so select! may drop `next()`.
        let mut notifications = listener.into_stream();
        // Commits may have happened while no LISTEN was active.
        if let Step::Stop = pump_logged(&pool, &hub).await {
            break 'connect;
        }

        loop {
            tokio::select! {
                biased;
                _ = &mut shutdown => break 'connect,
                note = notifications.next() => match note {
                    Some(Ok(note)) => {
                        // One read covers many commits; skip notifications it already covered.
                        let covered = note
                            .payload()
                            .parse::<i64>()
                            .is_ok_and(|rv| rv <= hub.last());
                        if !covered && let Step::Stop = pump_logged(&pool, &hub).await {
                            break 'connect;
                        }
                    }
                    Some(Err(e)) => {
                        if let Step::Stop = on_error("receiving notifications", e) {
                            break 'connect;
                        }
                        continue 'connect;
                    }
                    None => continue 'connect,
                },
                _ = poll.tick() => {
                    // Safety net for notifications lost on reconnect.
                    match crate::current_rv(&pool).await {
                        Ok(rv) if rv > hub.last() => {
                            if let Step::Stop = pump_logged(&pool, &hub).await {
                                break 'connect;
                            }
                        }
                        Ok(_) => {}
                        Err(e) => {
                            if let Step::Stop = on_error("polling current_rv", e) {
                                break 'connect;
                            }
                        }
                    }
                }
            }
        }
    }
    hub.close();
}
