//! Kairon's PostgreSQL resource store: kind-agnostic JSON objects with a
//! Kubernetes-style resourceVersion and a revision log that feeds watches.
//!
//! Every write allocates the next resourceVersion by updating the single
//! `store_meta` row inside its transaction. That row lock serialises writers
//! until commit, so commits become visible in rv order and a reader never sees
//! rv N without every rv below it.

mod cache;
pub mod usage;
mod watch;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgPool, PgPoolOptions};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::Instrument;

pub use crate::cache::Freshness;
use crate::watch::{Filter, Hub, WatchState};

/// The store's schema, embedded at compile time. Usable as
/// `#[sqlx::test(migrator = "kairon_db::MIGRATOR")]` from other crates.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// Channel that every committed write notifies with its rv.
pub const NOTIFY_CHANNEL: &str = "kairon_revisions";

/// Identifies one stored object. `namespace` is `""` for cluster-scoped kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectRef<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }

    pub fn parse(s: &str) -> Option<EventType> {
        match s {
            "ADDED" => Some(EventType::Added),
            "MODIFIED" => Some(EventType::Modified),
            "DELETED" => Some(EventType::Deleted),
            _ => None,
        }
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of the revision log.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    pub rv: i64,
    pub group: String,
    pub resource: String,
    pub namespace: String,
    pub name: String,
    pub event_type: EventType,
    /// The object as JSON text, shared by every watcher: kept as text, not a parsed `Value`
    /// (several times larger), because the feed keeps thousands of recent events in memory.
    pub object_json: Arc<str>,
}

impl WatchEvent {
    /// The object. Its text came from a `jsonb` column, so it parses.
    pub fn object(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_str(&self.object_json)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ListPage {
    pub items: Vec<Value>,
    /// `current_rv` of the snapshot the items were read from.
    pub resource_version: i64,
    /// `(namespace, name)` of the last item when more items remain.
    pub continue_after: Option<(String, String)>,
}

#[derive(thiserror::Error, Debug)]
pub enum StoreError {
    #[error("object not found")]
    NotFound,
    #[error("object already exists")]
    AlreadyExists,
    #[error("resourceVersion precondition failed: current is {current}")]
    Conflict { current: i64 },
    #[error("requested resourceVersion is compacted (compacted up to {compacted})")]
    Gone { compacted: i64 },
    /// The object handed to a write is not storable (not a JSON object, bad uid).
    #[error("invalid object: {0}")]
    Invalid(String),
    /// A [`Guard`] refused the write: its message says why and what to do.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Database(sqlx::Error),
    #[error(transparent)]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        // jsonb holds no U+0000 (SQLSTATE 22P05, untranslatable character): an object with one
        // in a string is the writer's to fix, not a failure of the store.
        if let sqlx::Error::Database(d) = &e
            && d.code().as_deref() == Some("22P05")
        {
            return StoreError::Invalid(NUL_REFUSAL.into());
        }
        StoreError::Database(e)
    }
}

/// Why an object with a NUL character in a string (a key or a value) cannot be stored.
pub const NUL_REFUSAL: &str =
    "a string in the object holds the NUL character (\\u0000), which cannot be stored: remove it";

/// Whether any string of `v`, key or value, holds a NUL character: jsonb cannot store it, so a
/// write (a dry run too) is refused with [`NUL_REFUSAL`] before it reaches the store.
pub fn holds_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || holds_nul(v)),
        _ => false,
    }
}

/// Tuning of the watch machinery; the defaults suit production.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchConfig {
    /// Live events buffered for watchers; one that falls further behind resyncs from the ring
    /// (or the database). The channel holds on to this many events whatever their size.
    pub broadcast_capacity: usize,
    /// Recent events kept in memory so new watchers rarely need the database...
    pub ring_capacity: usize,
    /// ...and at most this many bytes of their objects' JSON, so memory stays bounded whatever
    /// the objects weigh.
    pub ring_bytes: usize,
    /// How often the listener checks for writes whose notification was lost.
    pub poll_interval: Duration,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            broadcast_capacity: 1024,
            ring_capacity: 10_000,
            ring_bytes: 16 << 20,
            poll_interval: Duration::from_secs(1),
        }
    }
}

/// Handle to the store. Cheap to clone; all clones share one pool and one
/// listener task. The listener stops when the last clone (including live
/// watch streams) is dropped, on [`Store::close`], or when the pool is closed.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    hub: Arc<Hub>,
    // Dropping the sender (with the last Store) also stops the listener.
    shutdown: Mutex<Option<oneshot::Sender<()>>>,
    listener: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

const DEFAULT_MAX_CONNECTIONS: u32 = 16;

/// How long a read waits for the watch cache to apply the commit it must see before it reads
/// the database instead: the listener applies a commit within a millisecond or so, unless it
/// is behind (a burst of writes) or loading the cache again.
const CACHE_PATIENCE: Duration = Duration::from_millis(50);

/// A stored object's JSON text as a value (it came from a `jsonb` column, so it parses).
fn parse_stored(text: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Invalid(format!("a stored object does not parse: {e}")))
}

impl Store {
    /// One connection attempt, closed at once: why the database cannot be reached now, without
    /// the pool's retrying until its acquire timeout.
    pub async fn probe(database_url: &str) -> Result<(), StoreError> {
        use sqlx::Connection as _;
        sqlx::PgConnection::connect(database_url).await?.close().await?;
        Ok(())
    }

    /// Connects, runs migrations and starts the listener task.
    pub async fn connect(database_url: &str) -> Result<Store, StoreError> {
        let pool = PgPoolOptions::new().max_connections(DEFAULT_MAX_CONNECTIONS).connect(database_url).await?;
        Store::from_pool(pool).await
    }

    /// Like [`Store::connect`] with an existing pool. The listener keeps one
    /// of the pool's connections for itself, so the pool needs at least two.
    pub async fn from_pool(pool: PgPool) -> Result<Store, StoreError> {
        Store::from_pool_with_config(pool, WatchConfig::default()).await
    }

    pub async fn from_pool_with_config(pool: PgPool, config: WatchConfig) -> Result<Store, StoreError> {
        MIGRATOR.run(&pool).await?;
        // LISTEN before reading the starting rv (and the cache's objects at it) so no commit
        // slips between them.
        let listener = watch::listen(&pool).await?;
        let (start_rv, objects) = watch::snapshot(&pool).await?;
        let hub = Arc::new(Hub::new(start_rv, objects, &config));
        let (shutdown_tx, shutdown_rx) = oneshot::channel();
        let task = tokio::spawn(watch::run_listener(
            pool.clone(),
            Arc::clone(&hub),
            listener,
            shutdown_rx,
            config.poll_interval,
        ));
        Ok(Store {
            inner: Arc::new(Inner {
                pool,
                hub,
                shutdown: Mutex::new(Some(shutdown_tx)),
                listener: Mutex::new(Some(task)),
            }),
        })
    }

    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// Stops the listener, which ends every watch stream, but keeps the pool open: reads and
    /// writes still work, and a watch started afterwards ends at once. A server calls this when
    /// it shuts down, so its graceful shutdown does not wait on open watches while the requests
    /// in flight still reach the database. Idempotent.
    pub async fn end_watches(&self) {
        let tx = self.inner.shutdown.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(tx) = tx {
            let _ = tx.send(());
        }
        let task = self.inner.listener.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    /// Stops the listener (ending every watch stream) and closes the pool.
    pub async fn close(&self) {
        self.end_watches().await;
        self.inner.pool.close().await;
    }

    /// The object as stored, with every committed write seen ([`Freshness::Latest`]).
    pub async fn get(&self, r: ObjectRef<'_>) -> Result<Option<Value>, StoreError> {
        self.get_with(r, Freshness::Latest).await
    }

    pub async fn get_with(&self, r: ObjectRef<'_>, fresh: Freshness) -> Result<Option<Value>, StoreError> {
        match self.get_json(r, fresh).await? {
            Some(text) => Ok(Some(parse_stored(&text)?)),
            None => Ok(None),
        }
    }

    /// The object's stored JSON text, unparsed, for a reply that sends it on as it is: from the
    /// watch cache once it is as fresh as asked, else from the database.
    pub async fn get_json(&self, r: ObjectRef<'_>, fresh: Freshness) -> Result<Option<Arc<str>>, StoreError> {
        let rv = self.required_rv(fresh).await?;
        let cached = self.inner.hub.read_cache(rv, CACHE_PATIENCE, |c| c.get(r.group, r.resource, r.namespace, r.name));
        if let Some(found) = cached.await {
            return Ok(found);
        }
        let object: Option<String> = sqlx::query_scalar(
            "SELECT object::text FROM objects \
             WHERE api_group = $1 AND resource = $2 AND namespace = $3 AND name = $4",
        )
        .bind(r.group)
        .bind(r.resource)
        .bind(r.namespace)
        .bind(r.name)
        .fetch_optional(self.pool())
        .await?;
        Ok(object.map(Arc::from))
    }

    /// The revision a read must reflect: the latest committed for [`Freshness::Latest`] (one
    /// small query), none for [`Freshness::Any`].
    async fn required_rv(&self, fresh: Freshness) -> Result<Option<i64>, StoreError> {
        Ok(match fresh {
            Freshness::Latest => Some(current_rv(self.pool()).await?),
            Freshness::Any => None,
            Freshness::AtLeast(rv) => Some(rv),
        })
    }

    /// Lists objects ordered by (namespace, name), starting after `after`, with every committed
    /// write seen. `limit` of `None` or `Some(0)` means no limit.
    pub async fn list(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        after: Option<(&str, &str)>,
        limit: Option<usize>,
    ) -> Result<ListPage, StoreError> {
        self.list_with(group, resource, namespace, after, limit, Freshness::Latest).await
    }

    /// [`Store::list`] as fresh as asked: from the watch cache once it is, else from the
    /// database.
    pub async fn list_with(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        after: Option<(&str, &str)>,
        limit: Option<usize>,
        fresh: Freshness,
    ) -> Result<ListPage, StoreError> {
        let limit = limit.filter(|&l| l > 0);
        let rv = self.required_rv(fresh).await?;
        let from = after.unwrap_or(("", ""));
        // One extra item tells whether more remain.
        let fetch = limit.map(|l| l.saturating_add(1));
        let read = |c: &cache::Cache| (c.rv().unwrap_or_default(), c.list(group, resource, namespace, from, fetch));
        if let Some((resource_version, mut rows)) = self.inner.hub.read_cache(rv, CACHE_PATIENCE, read).await {
            let more = limit.is_some_and(|l| rows.len() > l);
            if let Some(l) = limit {
                rows.truncate(l);
            }
            let continue_after = if more { rows.last().map(|(key, _)| key.clone()) } else { None };
            let items = rows.iter().map(|(_, text)| parse_stored(text)).collect::<Result<_, _>>()?;
            return Ok(ListPage { items, resource_version, continue_after });
        }
        self.list_stored(group, resource, namespace, after, limit).await
    }

    /// A page of the list read from the database, in one snapshot.
    async fn list_stored(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        after: Option<(&str, &str)>,
        limit: Option<usize>,
    ) -> Result<ListPage, StoreError> {
        // Every stored name is non-empty, so ("", "") sorts before all rows.
        let (after_ns, after_name) = after.unwrap_or(("", ""));
        // One extra row tells whether more remain.
        let fetch = limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX - 1) + 1);

        let mut tx = begin(self.pool(), Some("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")).await?;
        let resource_version: i64 = sqlx::query_scalar("SELECT current_rv FROM store_meta").fetch_one(&mut *tx).await?;
        // Row comparison on the full key lets the primary key index seek.
        let rows: Vec<(String, String, Value)> = match namespace {
            Some(ns) => {
                sqlx::query_as(
                    "SELECT namespace, name, object FROM objects \
                     WHERE api_group = $1 AND resource = $2 AND namespace = $3 \
                       AND (api_group, resource, namespace, name) > ($1, $2, $4, $5) \
                     ORDER BY namespace, name LIMIT $6",
                )
                .bind(group)
                .bind(resource)
                .bind(ns)
                .bind(after_ns)
                .bind(after_name)
                .bind(fetch)
                .fetch_all(&mut *tx)
                .await?
            }
            None => {
                sqlx::query_as(
                    "SELECT namespace, name, object FROM objects \
                     WHERE api_group = $1 AND resource = $2 \
                       AND (api_group, resource, namespace, name) > ($1, $2, $3, $4) \
                     ORDER BY namespace, name LIMIT $5",
                )
                .bind(group)
                .bind(resource)
                .bind(after_ns)
                .bind(after_name)
                .bind(fetch)
                .fetch_all(&mut *tx)
                .await?
            }
        };
        tx.commit().await?;

        let mut rows = rows;
        let more = limit.is_some_and(|l| rows.len() > l);
        if let Some(l) = limit {
            rows.truncate(l);
        }
        let continue_after = if more { rows.last().map(|(ns, name, _)| (ns.clone(), name.clone())) } else { None };
        Ok(ListPage {
            items: rows.into_iter().map(|(_, _, object)| object).collect(),
            resource_version,
            continue_after,
        })
    }

    /// The objects of `group`/`resource` in `namespace` labelled `key` = `value`, in name order,
    /// with every committed write seen.
    pub async fn labelled(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        key: &str,
        value: &str,
    ) -> Result<Vec<Value>, StoreError> {
        self.labelled_with(group, resource, namespace, key, value, Freshness::Latest).await
    }

    /// [`Store::labelled`] as fresh as asked: from the watch cache's label index once it is,
    /// else by the database's labels index. Either way a namespace of thousands is not read
    /// whole.
    pub async fn labelled_with(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        key: &str,
        value: &str,
        fresh: Freshness,
    ) -> Result<Vec<Value>, StoreError> {
        let rv = self.required_rv(fresh).await?;
        let read = |c: &cache::Cache| c.labelled((group, resource), namespace, key, value);
        if let Some(found) = self.inner.hub.read_cache(rv, CACHE_PATIENCE, read).await {
            return found.iter().map(|text| parse_stored(text)).collect();
        }
        let objects = sqlx::query_scalar(
            "SELECT object FROM objects \
             WHERE api_group = $1 AND resource = $2 AND namespace = $3 \
               AND object -> 'metadata' -> 'labels' @> jsonb_build_object($4::text, $5::text) \
             ORDER BY name",
        )
        .bind(group)
        .bind(resource)
        .bind(namespace)
        .bind(key)
        .bind(value)
        .fetch_all(self.pool())
        .await?;
        Ok(objects)
    }

    /// The objects in `namespace` whose ownerReferences name `owner_uid`, as
    /// (group, resource, object), found by the owners index.
    pub async fn owned_by(&self, namespace: &str, owner_uid: &str) -> Result<Vec<(String, String, Value)>, StoreError> {
        let objects = sqlx::query_as(
            "SELECT api_group, resource, object FROM objects \
             WHERE namespace = $1 \
               AND object -> 'metadata' -> 'ownerReferences' @> jsonb_build_array(jsonb_build_object('uid', $2::text)) \
             ORDER BY api_group, resource, name",
        )
        .bind(namespace)
        .bind(owner_uid)
        .fetch_all(self.pool())
        .await?;
        Ok(objects)
    }

    /// Deletes up to `batch` objects of `group`/`resource` last written more than `ttl` ago,
    /// oldest first, each as an ordinary delete (watchers see it go), and returns how many went
    /// and how long until the next one is due (None: none left). An object written meanwhile
    /// stays: the delete is preconditioned on the resourceVersion it was seen at.
    pub async fn expire(
        &self,
        group: &str,
        resource: &str,
        ttl: std::time::Duration,
        batch: usize,
    ) -> Result<(usize, Option<std::time::Duration>), StoreError> {
        let expired: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT namespace, name, resource_version FROM objects \
             WHERE api_group = $1 AND resource = $2 AND updated_at < now() - make_interval(secs => $3) \
             ORDER BY updated_at LIMIT $4",
        )
        .bind(group)
        .bind(resource)
        .bind(ttl.as_secs_f64())
        .bind(i64::try_from(batch).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        let mut deleted = 0;
        for (namespace, name, rv) in &expired {
            match self.delete(ObjectRef { group, resource, namespace, name }, Some(*rv)).await {
                Ok(_) => deleted += 1,
                Err(StoreError::NotFound | StoreError::Conflict { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let next: Option<f64> = sqlx::query_scalar(
            "SELECT EXTRACT(EPOCH FROM min(updated_at) + make_interval(secs => $3) - now())::float8 \
             FROM objects WHERE api_group = $1 AND resource = $2",
        )
        .bind(group)
        .bind(resource)
        .bind(ttl.as_secs_f64())
        .fetch_one(self.pool())
        .await?;
        Ok((deleted, next.map(|s| std::time::Duration::from_secs_f64(s.max(0.0)))))
    }

    /// Stores a new object. Its uid comes from `metadata.uid` (a new one is
    /// generated and written back when absent); `metadata.resourceVersion` is
    /// set to the allocated rv. Returns the stored object.
    pub async fn create(&self, r: ObjectRef<'_>, object: Value) -> Result<Value, StoreError> {
        self.create_with(r, object, Durability::Flushed).await
    }

    /// [`create`](Self::create) with the commit's [`Durability`].
    pub async fn create_with(&self, r: ObjectRef<'_>, object: Value, d: Durability) -> Result<Value, StoreError> {
        self.write_all_with(vec![Write::Create(r, object)], d).await.map(one).map_err(|e| e.error)
    }

    /// Replaces an existing object. With `precondition_rv`, fails with
    /// `Conflict` unless the stored rv equals it.
    pub async fn update(
        &self,
        r: ObjectRef<'_>,
        object: Value,
        precondition_rv: Option<i64>,
    ) -> Result<Value, StoreError> {
        self.update_with(r, object, precondition_rv, Durability::Flushed).await
    }

    /// [`update`](Self::update) with the commit's [`Durability`].
    pub async fn update_with(
        &self,
        r: ObjectRef<'_>,
        object: Value,
        precondition_rv: Option<i64>,
        d: Durability,
    ) -> Result<Value, StoreError> {
        self.write_all_with(vec![Write::Update(r, object, precondition_rv)], d).await.map(one).map_err(|e| e.error)
    }

    /// Several writes in one transaction (one commit): all are stored, each with an rv of its
    /// own in the order given, or none is. Returns the stored objects in that order.
    pub async fn write_all(&self, writes: Vec<Write<'_>>) -> Result<Vec<Value>, WriteError> {
        self.write_all_with(writes, Durability::Flushed).await
    }

    /// [`write_all`](Self::write_all) with the commit's [`Durability`].
    pub async fn write_all_with(&self, writes: Vec<Write<'_>>, d: Durability) -> Result<Vec<Value>, WriteError> {
        self.write_all_guarded(writes, d, None).await
    }

    /// [`write_all_with`](Self::write_all_with), stored only if `guard` accepts it. The guard
    /// judges inside the transaction, after the store's write lock is taken, so no other write
    /// commits between what it reads and what is stored: two writes racing for the last unit of
    /// a quota get one winner.
    pub async fn write_all_guarded(
        &self,
        writes: Vec<Write<'_>>,
        d: Durability,
        guard: Option<Guard<'_>>,
    ) -> Result<Vec<Value>, WriteError> {
        let at = |index: usize| move |error: StoreError| WriteError { index, error };
        // Validated before the write lock is taken; sent as one call of `kairon_write`.
        let n = writes.len();
        let (mut group, mut resource, mut namespace, mut name) =
            (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        let (mut uid, mut precondition, mut objects) =
            (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        for (i, w) in writes.into_iter().enumerate() {
            let (r, mut object, id, pre) = match w {
                Write::Create(r, mut object) => {
                    let id = object_uid(&mut object).map_err(at(i))?;
                    (r, object, Some(id), None)
                }
                Write::Update(r, object, pre) => (r, object, None, pre),
            };
            // A placeholder the function replaces; it also makes sure `metadata` is there.
            set_resource_version(&mut object, 0).map_err(at(i))?;
            group.push(r.group);
            resource.push(r.resource);
            namespace.push(r.namespace);
            name.push(r.name);
            uid.push(id);
            precondition.push(pre);
            objects.push(object);
        }
        if objects.is_empty() {
            return Ok(Vec::new());
        }
        let write = sqlx::query_scalar::<_, i64>("SELECT kairon_write($1, $2, $3, $4, $5, $6, $7, $8)")
            .bind(&group)
            .bind(&resource)
            .bind(&namespace)
            .bind(&name)
            .bind(&uid)
            .bind(&precondition)
            .bind(&objects)
            .bind(d == Durability::Relaxed);
        let first = match guard {
            // On its own the call is its transaction: one round trip, committed when it returns.
            None => write.fetch_one(self.pool()).instrument(tracing::trace_span!("hop.store.write")).await,
            // The guard judges inside the transaction, under the write lock, before the writes.
            Some(guard) => {
                let mut tx = begin(self.pool(), None).await.map_err(|e| at(0)(e.into()))?;
                if let Err(e) = judge_in(&mut tx, guard).await {
                    tx.rollback().await.map_err(|e| at(0)(e.into()))?;
                    return Err(at(0)(e));
                }
                match write.fetch_one(&mut *tx).await {
                    Ok(first) => tx.commit().instrument(tracing::trace_span!("hop.store.write")).await.map(|()| first),
                    Err(e) => Err(e),
                }
            }
        };
        let first = first.map_err(|e| write_failure(e, &objects))?;
        for (i, object) in objects.iter_mut().enumerate() {
            set_resource_version(object, first + i as i64).map_err(at(i))?;
        }
        Ok(objects)
    }

    /// What `guard` would answer a write now, with nothing written (a dry run): read in one
    /// snapshot, without the write lock, since nothing is stored on its word.
    pub async fn judge(&self, guard: Guard<'_>) -> Result<(), StoreError> {
        let mut tx = begin(self.pool(), Some("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")).await?;
        let judged = judge_now(&mut tx, guard).await;
        tx.rollback().await?;
        judged
    }

    /// Removes an object. The returned object, like the DELETED event's,
    /// carries the deletion's rv as `metadata.resourceVersion`.
    pub async fn delete(&self, r: ObjectRef<'_>, precondition_rv: Option<i64>) -> Result<Value, StoreError> {
        sqlx::query_scalar("SELECT kairon_delete($1, $2, $3, $4, $5)")
            .bind(r.group)
            .bind(r.resource)
            .bind(r.namespace)
            .bind(r.name)
            .bind(precondition_rv)
            .fetch_one(self.pool())
            .await
            .map_err(|e| write_failure(e, &[]).error)
    }

    /// Latest committed resourceVersion.
    pub async fn current_rv(&self) -> Result<i64, StoreError> {
        Ok(current_rv(self.pool()).await?)
    }

    /// Revisions with rv <= this may have been removed.
    pub async fn compacted_rv(&self) -> Result<i64, StoreError> {
        Ok(compacted_rv(self.pool()).await?)
    }

    /// Drops revisions older than the last `keep_last` rvs and returns the new
    /// compacted rv. Never moves the compacted rv backwards. Each live object keeps its
    /// last revision at or below that rv (as etcd's compaction keeps each key's), so
    /// [`Store::revision_before`] still answers for any rv a watch may resume from.
    pub async fn compact(&self, keep_last: i64) -> Result<i64, StoreError> {
        // Publish the new bound first in its own short statement so writers
        // wait on the store_meta lock only briefly, not for the whole delete.
        let compacted: i64 = sqlx::query_scalar(
            "UPDATE store_meta \
             SET compacted_rv = GREATEST(compacted_rv, current_rv - $1) \
             RETURNING compacted_rv",
        )
        .bind(keep_last.max(0))
        .fetch_one(self.pool())
        .await?;
        sqlx::query(
            "DELETE FROM revisions r WHERE r.rv <= $1 AND (r.event_type = 'DELETED' OR EXISTS ( \
               SELECT 1 FROM revisions n \
               WHERE n.api_group = r.api_group AND n.resource = r.resource \
                 AND n.namespace = r.namespace AND n.name = r.name AND n.rv > r.rv AND n.rv <= $1))",
        )
        .bind(compacted)
        .execute(self.pool())
        .await?;
        Ok(compacted)
    }

    /// The object's last revision before `rv`: what it was as of `rv - 1` (a `Deleted`
    /// event when it had been deleted), or None when it did not exist yet. A store compacted
    /// before compaction kept each object's last revision may also answer None for an object
    /// unchanged since then.
    pub async fn revision_before(&self, key: ObjectRef<'_>, rv: i64) -> Result<Option<WatchEvent>, StoreError> {
        let row: Option<watch::RevisionRow> = sqlx::query_as(
            "SELECT rv, api_group, resource, namespace, name, event_type, object::text AS object \
             FROM revisions \
             WHERE api_group = $1 AND resource = $2 AND namespace = $3 AND name = $4 AND rv < $5 \
             ORDER BY rv DESC LIMIT 1",
        )
        .bind(key.group)
        .bind(key.resource)
        .bind(key.namespace)
        .bind(key.name)
        .bind(rv)
        .fetch_optional(self.pool())
        .await?;
        Ok(row.map(WatchEvent::try_from).transpose()?)
    }

    /// Distinct non-empty namespaces that hold at least one object.
    pub async fn namespaces(&self) -> Result<Vec<String>, StoreError> {
        let namespaces =
            sqlx::query_scalar("SELECT DISTINCT namespace FROM objects WHERE namespace <> '' ORDER BY namespace")
                .fetch_all(self.pool())
                .await?;
        Ok(namespaces)
    }

    /// Every event of `group`/`resource` (and `namespace` when given) with
    /// rv > `from_rv`, in rv order and without gaps, then live events until
    /// the store shuts down (the stream then ends; it is empty when the store's watches have
    /// already ended, see [`Store::end_watches`]). Fails with `Gone` when
    /// `from_rv` is below the compacted rv. A stream item is `Err(Gone)` only
    /// if a lagging watcher fell behind compaction; the stream ends after it.
    pub async fn watch(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        from_rv: i64,
    ) -> Result<impl futures::Stream<Item = Result<WatchEvent, StoreError>> + Send + 'static, StoreError> {
        let compacted = self.compacted_rv().await?;
        if from_rv < compacted {
            return Err(StoreError::Gone { compacted });
        }
        let filter =
            Filter { group: group.to_owned(), resource: resource.to_owned(), namespace: namespace.map(str::to_owned) };
        // With the listener stopped (the store is shutting down) the stream ends at once, as
        // every open one just did: the client watches again from where it was.
        let state = WatchState::start(self.clone(), filter, from_rv);
        Ok(futures::StreamExt::flat_map(futures::stream::iter(state), |state| {
            futures::stream::unfold(state, WatchState::next)
        }))
    }
}

/// When a write's commit answers. Every write takes the store's one revision counter, whose row
/// lock a transaction holds until its commit is done, so a commit that waits for its WAL flush
/// (an fsync, milliseconds) makes every other writer wait as long.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// After its WAL is on disk: nothing answered is lost, even if PostgreSQL's host crashes.
    #[default]
    Flushed,
    /// Once it is visible, before its WAL is on disk (`synchronous_commit = off` for that
    /// transaction; PostgreSQL's WAL writer flushes within `wal_writer_delay`, and the next
    /// flushed commit carries it). For observations that their writers derive again (status,
    /// Events): only a crash of PostgreSQL itself (not of Kairon) loses the last few of them.
    Relaxed,
}

/// One write of a [`Store::write_all`] transaction.
pub enum Write<'a> {
    /// A new object (`AlreadyExists` if its key is taken).
    Create(ObjectRef<'a>, Value),
    /// A replacement, conditional on the stored rv when one is given.
    Update(ObjectRef<'a>, Value, Option<i64>),
}

/// What a guarded write ([`Store::write_all_guarded`]) must fit: objects of one kind in a
/// namespace (`limits`, e.g. its quotas) that bound what objects of another kind there
/// (`counted`, e.g. its Machines) add up to.
pub struct Guard<'a> {
    pub namespace: &'a str,
    /// The limiting objects (group, resource). With none in the namespace, nothing is judged.
    pub limits: (&'a str, &'a str),
    /// The counted objects (group, resource), read without their status and managed fields.
    pub counted: (&'a str, &'a str),
    /// The counted object the write replaces, left out of what `judge` is given.
    pub replaces: Option<&'a str>,
    /// Given the limiting objects and the counted ones, the reason to refuse the write, if any.
    #[allow(clippy::type_complexity)]
    pub judge: Box<dyn FnOnce(&[Value], &[Value]) -> Option<String> + Send + 'a>,
}

/// Takes the store's write lock (the revision counter's row, which every write takes first
/// anyway) and runs `guard` on what is committed under it.
async fn judge_in(tx: &mut sqlx::PgConnection, guard: Guard<'_>) -> Result<(), StoreError> {
    sqlx::query("SELECT 1 FROM store_meta FOR UPDATE").execute(&mut *tx).await?;
    judge_now(tx, guard).await
}

/// Runs `guard` on what `tx` sees.
async fn judge_now(tx: &mut sqlx::PgConnection, guard: Guard<'_>) -> Result<(), StoreError> {
    let objects = |(group, resource): (&str, &str), without: Option<&str>| {
        sqlx::query_scalar::<_, Value>(
            // Status is left out (it can be large) but for `status.resources`: what a node
            // started an instance with, which a quota counts while it exceeds the spec.
            "SELECT CASE WHEN object #> '{status,resources}' IS NULL THEN object - 'status' \
                    ELSE jsonb_set(object - 'status', '{status}', \
                                   jsonb_build_object('resources', object #> '{status,resources}')) END \
                    #- '{metadata,managedFields}' FROM objects \
             WHERE api_group = $1 AND resource = $2 AND namespace = $3 AND ($4::text IS NULL OR name <> $4)",
        )
        .bind(group.to_owned())
        .bind(resource.to_owned())
        .bind(guard.namespace.to_owned())
        .bind(without.map(str::to_owned))
    };
    let limits = objects(guard.limits, None).fetch_all(&mut *tx).await?;
    if limits.is_empty() {
        return Ok(());
    }
    let counted = objects(guard.counted, guard.replaces).fetch_all(&mut *tx).await?;
    match (guard.judge)(&limits, &counted) {
        Some(why) => Err(StoreError::Refused(why)),
        None => Ok(()),
    }
}

/// Why a [`Store::write_all`] stored nothing: the write at `index` failed with `error`.
#[derive(Debug)]
pub struct WriteError {
    pub index: usize,
    pub error: StoreError,
}

fn one(mut stored: Vec<Value>) -> Value {
    stored.pop().unwrap_or(Value::Null)
}

/// `pool.begin()` (or `begin_with(statement)`), safe to cancel. sqlx 0.9's `begin` is not: a
/// caller dropped while its `BEGIN` is in flight (an HTTP request whose client went away) leaves
/// the connection inside a transaction sqlx does not know about, back in the pool, and the next
/// user's statements run in it (after a list's `BEGIN ... READ ONLY` the next write failed with
/// "cannot execute UPDATE in a read-only transaction"). Begun in a task of its own, the BEGIN
/// always completes; a transaction nobody takes then is dropped, which rolls it back.
pub async fn begin(
    pool: &PgPool,
    statement: Option<&'static str>,
) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, sqlx::Error> {
    let pool = pool.clone();
    let begun = tokio::spawn(async move {
        match statement {
            Some(s) => pool.begin_with(s).await,
            None => pool.begin().await,
        }
    });
    begun.await.map_err(|e| sqlx::Error::Io(std::io::Error::other(format!("beginning a transaction: {e}"))))?
}

pub(crate) async fn current_rv(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT current_rv FROM store_meta").fetch_one(pool).await
}

pub(crate) async fn compacted_rv(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT compacted_rv FROM store_meta").fetch_one(pool).await
}

/// What a failed `kairon_write` or `kairon_delete` call means, and which write failed. The
/// functions raise their own codes with "<index> <stored rv>" as the message.
fn write_failure(e: sqlx::Error, objects: &[Value]) -> WriteError {
    let own = match &e {
        sqlx::Error::Database(d) => {
            d.code().filter(|c| c.starts_with("KR")).map(|c| (c.into_owned(), d.message().to_owned()))
        }
        _ => None,
    };
    let Some((code, message)) = own else {
        // A NUL in a string (SQLSTATE 22P05) is refused when the arguments are read: the first
        // object holding one is the write to blame.
        let index = objects.iter().position(holds_nul).unwrap_or(0);
        return WriteError { index, error: e.into() };
    };
    let mut parts = message.split(' ').map(|p| p.parse::<i64>().unwrap_or_default());
    let (index, current) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let error = match code.as_str() {
        "KR404" => StoreError::NotFound,
        "KR409" => StoreError::Conflict { current },
        "KR410" => StoreError::AlreadyExists,
        _ => StoreError::Database(e),
    };
    WriteError { index: usize::try_from(index).unwrap_or_default(), error }
}

fn metadata_mut(object: &mut Value) -> Result<&mut serde_json::Map<String, Value>, StoreError> {
    let map = object.as_object_mut().ok_or_else(|| StoreError::Invalid("object is not a JSON object".into()))?;
    map.entry("metadata")
        .or_insert_with(|| Value::Object(serde_json::Map::new()))
        .as_object_mut()
        .ok_or_else(|| StoreError::Invalid("metadata is not a JSON object".into()))
}

fn set_resource_version(object: &mut Value, rv: i64) -> Result<(), StoreError> {
    metadata_mut(object)?.insert("resourceVersion".into(), Value::String(rv.to_string()));
    Ok(())
}

fn object_uid(object: &mut Value) -> Result<uuid::Uuid, StoreError> {
    let meta = metadata_mut(object)?;
    match meta.get("uid") {
        Some(Value::String(s)) => {
            uuid::Uuid::parse_str(s).map_err(|e| StoreError::Invalid(format!("metadata.uid {s:?}: {e}")))
        }
        None | Some(Value::Null) => {
            let uid = uuid::Uuid::new_v4();
            meta.insert("uid".into(), Value::String(uid.to_string()));
            Ok(uid)
        }
        Some(other) => Err(StoreError::Invalid(format!("metadata.uid must be a string, got {other}"))),
    }
}
