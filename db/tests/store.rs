//! Store tests against a real PostgreSQL (DATABASE_URL; each test gets a fresh database).

use std::pin::pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kairon_db::{Durability, EventType, ObjectRef, Store, StoreError, WatchConfig, WatchEvent, Write, WriteError};
use serde_json::{Value, json};
use sqlx::PgPool;

const G: &str = "kairon.io";
const R: &str = "machines";
const WAIT: Duration = Duration::from_secs(20);

fn oref<'a>(namespace: &'a str, name: &'a str) -> ObjectRef<'a> {
    ObjectRef { group: G, resource: R, namespace, name }
}

fn obj(namespace: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "kairon.io/v1",
        "kind": "Machine",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uuid::Uuid::new_v4().to_string(),
        },
        "spec": spec,
    })
}

fn rv_of(object: &Value) -> i64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion is a string")
        .parse()
        .expect("resourceVersion is numeric")
}

async fn next_event<S>(stream: &mut S) -> WatchEvent
where
    S: Stream<Item = Result<WatchEvent, StoreError>> + Unpin,
{
    tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("timed out waiting for a watch event")
        .expect("watch stream ended")
        .expect("watch stream error")
}

async fn assert_quiet<S>(stream: &mut S)
where
    S: Stream<Item = Result<WatchEvent, StoreError>> + Unpin,
{
    let got = tokio::time::timeout(Duration::from_millis(300), stream.next()).await;
    assert!(got.is_err(), "unexpected event: {got:?}");
}

#[sqlx::test(migrations = "./migrations")]
async fn crud_round_trip(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    assert_eq!(store.current_rv().await.unwrap(), 0);
    assert_eq!(store.get(oref("ns", "a")).await.unwrap(), None);

    let input = obj("ns", "a", json!({"size": 1}));
    let uid = input["metadata"]["uid"].clone();
    let created = store.create(oref("ns", "a"), input).await.unwrap();
    assert_eq!(rv_of(&created), 1);
    assert_eq!(created["metadata"]["uid"], uid);
    assert_eq!(store.get(oref("ns", "a")).await.unwrap(), Some(created.clone()));

    let dup = store.create(oref("ns", "a"), obj("ns", "a", json!({}))).await;
    assert!(matches!(dup, Err(StoreError::AlreadyExists)), "{dup:?}");

    // Same name in another namespace is a different object.
    let other = store.create(oref("other", "a"), obj("other", "a", json!({}))).await.unwrap();
    assert_eq!(rv_of(&other), 2);

    let mut changed = created.clone();
    changed["spec"]["size"] = json!(2);
    let updated = store.update(oref("ns", "a"), changed.clone(), None).await.unwrap();
    assert_eq!(rv_of(&updated), 3);
    assert_eq!(updated["spec"]["size"], 2);
    assert_eq!(store.get(oref("ns", "a")).await.unwrap(), Some(updated.clone()));

    let stale = store.update(oref("ns", "a"), changed.clone(), Some(1)).await;
    assert!(matches!(stale, Err(StoreError::Conflict { current: 3 })), "{stale:?}");
    let updated = store.update(oref("ns", "a"), changed.clone(), Some(3)).await.unwrap();
    assert_eq!(rv_of(&updated), 4);

    let missing = store.update(oref("ns", "nope"), obj("ns", "nope", json!({})), None).await;
    assert!(matches!(missing, Err(StoreError::NotFound)), "{missing:?}");
    let missing = store.update(oref("ns", "nope"), obj("ns", "nope", json!({})), Some(1)).await;
    assert!(matches!(missing, Err(StoreError::NotFound)), "{missing:?}");

    let stale = store.delete(oref("ns", "a"), Some(3)).await;
    assert!(matches!(stale, Err(StoreError::Conflict { current: 4 })), "{stale:?}");
    let deleted = store.delete(oref("ns", "a"), Some(4)).await.unwrap();
    assert_eq!(rv_of(&deleted), 5);
    assert_eq!(deleted["spec"]["size"], 2);
    assert_eq!(store.get(oref("ns", "a")).await.unwrap(), None);
    let missing = store.delete(oref("ns", "a"), None).await;
    assert!(matches!(missing, Err(StoreError::NotFound)), "{missing:?}");

    // Failed writes roll back their rv: the sequence stays gap-free.
    assert_eq!(store.current_rv().await.unwrap(), 5);
    let revs: Vec<(i64, String)> =
        sqlx::query_as("SELECT rv, event_type FROM revisions ORDER BY rv").fetch_all(store.pool()).await.unwrap();
    let expected = [(1, "ADDED"), (2, "ADDED"), (3, "MODIFIED"), (4, "MODIFIED"), (5, "DELETED")];
    assert_eq!(revs, expected.iter().map(|(rv, t)| (*rv, t.to_string())).collect::<Vec<_>>());
}

/// A claim and the member it takes are stored together or not at all: each write gets an rv of
/// its own in order, one watch sees both, and a failed precondition on the second stores nothing
/// (nor uses up an rv).
#[sqlx::test(migrations = "./migrations")]
async fn write_all_is_one_transaction(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    let member = store.create(oref("ns", "member"), obj("ns", "member", json!({"warm": true}))).await.unwrap();
    let mut watch = pin!(store.watch(G, R, Some("ns"), rv_of(&member)).await.unwrap());

    let mut taken = member.clone();
    taken["spec"]["warm"] = json!(false);
    let writes = vec![
        Write::Create(oref("ns", "claim"), obj("ns", "claim", json!({}))),
        Write::Update(oref("ns", "member"), taken.clone(), Some(rv_of(&member))),
    ];
    let stored = store.write_all(writes).await.unwrap();
    assert_eq!((rv_of(&stored[0]), rv_of(&stored[1])), (2, 3));
    assert_eq!(store.get(oref("ns", "member")).await.unwrap().unwrap()["spec"]["warm"], json!(false));
    for (rv, name) in [(2, "claim"), (3, "member")] {
        let e = next_event(&mut watch).await;
        assert_eq!((e.rv, e.object().unwrap()["metadata"]["name"].as_str()), (rv, Some(name)));
    }

    // The member changed since it was read: neither the second claim nor the take is stored.
    let writes = vec![
        Write::Create(oref("ns", "claim-2"), obj("ns", "claim-2", json!({}))),
        Write::Update(oref("ns", "member"), taken, Some(rv_of(&member))),
    ];
    let err = store.write_all(writes).await.unwrap_err();
    assert!(matches!(err, WriteError { index: 1, error: StoreError::Conflict { current: 3 } }), "{err:?}");
    assert_eq!(store.get(oref("ns", "claim-2")).await.unwrap(), None, "nothing of a failed batch is stored");
    assert_eq!(store.current_rv().await.unwrap(), 3, "a failed batch uses up no rv");
    assert_quiet(&mut watch).await;

    // The first write fails: its index is the one named.
    let writes = vec![Write::Create(oref("ns", "claim"), obj("ns", "claim", json!({})))];
    let err = store.write_all(writes).await.unwrap_err();
    assert!(matches!(err, WriteError { index: 0, error: StoreError::AlreadyExists }), "{err:?}");

    // A write that cannot be stored at all (jsonb holds no NUL) is named too, and the one
    // before it is not stored.
    let writes = vec![
        Write::Create(oref("ns", "claim-3"), obj("ns", "claim-3", json!({}))),
        Write::Create(oref("ns", "claim-4"), obj("ns", "claim-4", json!({"note": "a\u{0}b"}))),
    ];
    let err = store.write_all(writes).await.unwrap_err();
    assert!(matches!(err, WriteError { index: 1, error: StoreError::Invalid(_) }), "{err:?}");
    assert_eq!(store.get(oref("ns", "claim-3")).await.unwrap(), None);
    assert_eq!(store.current_rv().await.unwrap(), 3, "nor does a refused one");
}

/// A write that does not wait for its WAL flush is stored, versioned, watched and refused
/// exactly as a flushed one: only when its commit answers differs.
#[sqlx::test(migrations = "./migrations")]
async fn relaxed_writes_are_versioned_and_watched_like_flushed_ones(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    let first = store.create(oref("ns", "a"), obj("ns", "a", json!({"n": 0}))).await.unwrap();
    let mut watch = pin!(store.watch(G, R, Some("ns"), rv_of(&first)).await.unwrap());
    let mut status = first.clone();
    status["status"] = json!({"phase": "Running"});
    let relaxed =
        store.update_with(oref("ns", "a"), status.clone(), Some(rv_of(&first)), Durability::Relaxed).await.unwrap();
    let created = store.create_with(oref("ns", "b"), obj("ns", "b", json!({})), Durability::Relaxed).await.unwrap();
    let flushed = store.create(oref("ns", "c"), obj("ns", "c", json!({}))).await.unwrap();
    assert_eq!((rv_of(&relaxed), rv_of(&created), rv_of(&flushed)), (2, 3, 4));
    assert_eq!(store.get(oref("ns", "a")).await.unwrap().unwrap()["status"]["phase"], "Running");
    for (rv, name) in [(2, "a"), (3, "b"), (4, "c")] {
        let e = next_event(&mut watch).await;
        assert_eq!((e.rv, e.object().unwrap()["metadata"]["name"].as_str()), (rv, Some(name)));
    }
    // A stale precondition is refused the same way, and uses up no rv.
    let err = store.update_with(oref("ns", "a"), status, Some(rv_of(&first)), Durability::Relaxed).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict { current: 2 }), "{err:?}");
    assert_eq!(store.current_rv().await.unwrap(), 4);
}

/// A label lookup finds exactly the objects of that namespace and resource with that label
/// value, in name order, whatever else they carry.
#[sqlx::test(migrations = "./migrations")]
async fn labelled_finds_exactly_the_labelled_objects(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    let with = |ns: &str, name: &str, labels: Value| {
        let mut o = obj(ns, name, json!({}));
        o["metadata"]["labels"] = labels;
        o
    };
    for (ns, name, labels) in [
        ("ns", "b", json!({"pool": "warm", "other": "x"})),
        ("ns", "a", json!({"pool": "warm"})),
        ("ns", "c", json!({"pool": "cold"})),
        ("ns", "d", json!({})),
        ("other", "e", json!({"pool": "warm"})),
    ] {
        store.create(oref(ns, name), with(ns, name, labels)).await.unwrap();
    }
    store
        .create(
            ObjectRef { group: G, resource: "pools", namespace: "ns", name: "f" },
            with("ns", "f", json!({"pool": "warm"})),
        )
        .await
        .unwrap();
    let names =
        |v: Vec<Value>| v.iter().map(|o| o["metadata"]["name"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(names(store.labelled(G, R, "ns", "pool", "warm").await.unwrap()), ["a", "b"]);
    assert_eq!(names(store.labelled(G, R, "ns", "pool", "cold").await.unwrap()), ["c"]);
    assert!(store.labelled(G, R, "ns", "pool", "none").await.unwrap().is_empty());
    assert!(store.labelled(G, R, "ns", "other\"", "x").await.unwrap().is_empty(), "a key is a key, not JSON");
}

#[sqlx::test(migrations = "./migrations")]
async fn create_validates_and_fills_uid(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    let bad = store.create(oref("ns", "a"), json!("not an object")).await;
    assert!(matches!(bad, Err(StoreError::Invalid(_))), "{bad:?}");
    let bad = store.create(oref("ns", "a"), json!({"metadata": {"uid": "nope"}})).await;
    assert!(matches!(bad, Err(StoreError::Invalid(_))), "{bad:?}");
    let bad = store.update(oref("ns", "a"), json!([1]), None).await;
    assert!(matches!(bad, Err(StoreError::Invalid(_))), "{bad:?}");
    // jsonb holds no NUL character: the writer's error, and nothing is stored.
    let bad = store.create(oref("ns", "a"), json!({"metadata": {"labels": {"x": "a\u{0}b"}}})).await;
    assert!(matches!(&bad, Err(StoreError::Invalid(m)) if m.contains("NUL")), "{bad:?}");
    assert_eq!(store.current_rv().await.unwrap(), 0);

    let created = store.create(oref("ns", "a"), json!({"spec": {}})).await.unwrap();
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let stored: uuid::Uuid = sqlx::query_scalar("SELECT uid FROM objects").fetch_one(store.pool()).await.unwrap();
    assert_eq!(stored.to_string(), uid);
    assert_eq!(rv_of(&created), 1);
    let bad = store.update(oref("ns", "a"), json!({"spec": {"\u{0}": 1}}), None).await;
    assert!(matches!(&bad, Err(StoreError::Invalid(m)) if m.contains("NUL")), "{bad:?}");
    assert_eq!(store.get(oref("ns", "a")).await.unwrap().unwrap()["spec"], json!({}));
}

#[sqlx::test(migrations = "./migrations")]
async fn list_pagination_and_snapshot_rv(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    let names = [("b", "x2"), ("a", "x1"), ("b", "x1"), ("a", "x3"), ("c", "x1"), ("a", "x2")];
    for (ns, name) in names {
        store.create(oref(ns, name), obj(ns, name, json!({}))).await.unwrap();
    }
    // Another resource and a cluster-scoped one must not leak in.
    let nodes = ObjectRef { group: G, resource: "nodes", namespace: "", name: "n1" };
    store.create(nodes, obj("", "n1", json!({}))).await.unwrap();
    let current = store.current_rv().await.unwrap();
    assert_eq!(current, 7);

    let key = |v: &Value| {
        (v["metadata"]["namespace"].as_str().unwrap().to_owned(), v["metadata"]["name"].as_str().unwrap().to_owned())
    };
    let all = store.list(G, R, None, None, None).await.unwrap();
    assert_eq!(all.resource_version, current);
    assert_eq!(all.continue_after, None);
    let keys: Vec<_> = all.items.iter().map(key).collect();
    let mut expected: Vec<_> = names.iter().map(|(ns, n)| (ns.to_string(), n.to_string())).collect();
    expected.sort();
    assert_eq!(keys, expected);

    // Page through with limit 4, then 2.
    for limit in [4usize, 2, 1] {
        let mut got = Vec::new();
        let mut after: Option<(String, String)> = None;
        loop {
            let page = store
                .list(G, R, None, after.as_ref().map(|(a, b)| (a.as_str(), b.as_str())), Some(limit))
                .await
                .unwrap();
            assert!(page.items.len() <= limit);
            assert_eq!(page.resource_version, current);
            got.extend(page.items.iter().map(key));
            match page.continue_after {
                Some(c) => {
                    assert_eq!(Some(&c), got.last());
                    after = Some(c);
                }
                None => break,
            }
        }
        assert_eq!(got, expected, "limit {limit}");
    }

    // Exactly `limit` remaining items: no continue token.
    let page = store.list(G, R, None, Some(("b", "x2")), Some(1)).await.unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.continue_after, None);

    let ns_a = store.list(G, R, Some("a"), None, Some(2)).await.unwrap();
    assert_eq!(
        ns_a.items.iter().map(key).collect::<Vec<_>>(),
        vec![("a".into(), "x1".into()), ("a".into(), "x2".into())]
    );
    assert_eq!(ns_a.continue_after, Some(("a".into(), "x2".into())));
    let ns_a = store.list(G, R, Some("a"), Some(("a", "x2")), Some(2)).await.unwrap();
    assert_eq!(ns_a.items.iter().map(key).collect::<Vec<_>>(), vec![("a".into(), "x3".into())]);
    assert_eq!(ns_a.continue_after, None);

    let cluster = store.list(G, "nodes", None, None, Some(0)).await.unwrap();
    assert_eq!(cluster.items.len(), 1);

    // The list rv reflects exactly the writes it contains.
    store.delete(oref("a", "x1"), None).await.unwrap();
    let after_delete = store.list(G, R, None, None, None).await.unwrap();
    assert_eq!(after_delete.resource_version, 8);
    assert_eq!(after_delete.items.len(), 5);

    assert_eq!(store.namespaces().await.unwrap(), vec!["a", "b", "c"]);
}

/// Checks a list snapshot while writers run: every item's rv must be <= the
/// page rv, and the number of items must match what was committed by then.
#[sqlx::test(migrations = "./migrations")]
async fn list_snapshot_under_concurrent_writes(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            for i in 0..200 {
                let name = format!("o{i:03}");
                store.create(oref("ns", &name), obj("ns", &name, json!({}))).await.unwrap();
            }
        })
    };
    for _ in 0..30 {
        let page = store.list(G, R, None, None, None).await.unwrap();
        // Only creates happen, so rv N means exactly N objects.
        assert_eq!(page.items.len() as i64, page.resource_version);
        assert!(page.items.iter().all(|o| rv_of(o) <= page.resource_version));
        tokio::task::yield_now().await;
    }
    writer.await.unwrap();
}

#[sqlx::test(migrations = "./migrations")]
async fn watch_replays_then_streams_live(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    let a = store.create(oref("ns", "a"), obj("ns", "a", json!({}))).await.unwrap();
    let nodes = ObjectRef { group: G, resource: "nodes", namespace: "", name: "n1" };
    store.create(nodes, obj("", "n1", json!({}))).await.unwrap(); // rv 2, other resource
    store.create(oref("ns2", "b"), obj("ns2", "b", json!({}))).await.unwrap(); // rv 3
    store.update(oref("ns", "a"), a.clone(), None).await.unwrap(); // rv 4

    // From rv 1: replay 3 and 4, skipping the other resource.
    let mut w = pin!(store.watch(G, R, None, 1).await.unwrap());
    let mut ns_w = pin!(store.watch(G, R, Some("ns"), 0).await.unwrap());
    let ev = next_event(&mut w).await;
    assert_eq!((ev.rv, ev.event_type, ev.name.as_str()), (3, EventType::Added, "b"));
    assert_eq!(rv_of(&ev.object().unwrap()), 3);
    let ev = next_event(&mut w).await;
    assert_eq!((ev.rv, ev.event_type, ev.name.as_str()), (4, EventType::Modified, "a"));

    let ev = next_event(&mut ns_w).await;
    assert_eq!((ev.rv, ev.event_type), (1, EventType::Added));
    let ev = next_event(&mut ns_w).await;
    assert_eq!((ev.rv, ev.event_type), (4, EventType::Modified));

    // Live events.
    store.create(oref("ns", "c"), obj("ns", "c", json!({}))).await.unwrap(); // 5
    store.create(oref("ns2", "d"), obj("ns2", "d", json!({}))).await.unwrap(); // 6
    let deleted = store.delete(oref("ns", "a"), None).await.unwrap(); // 7
    for (rv, t, name) in [(5, EventType::Added, "c"), (6, EventType::Added, "d"), (7, EventType::Deleted, "a")] {
        let ev = next_event(&mut w).await;
        assert_eq!((ev.rv, ev.event_type, ev.name.as_str()), (rv, t, name));
        assert_eq!(rv_of(&ev.object().unwrap()), rv);
    }
    let ev = next_event(&mut ns_w).await;
    assert_eq!(ev.rv, 5);
    let ev = next_event(&mut ns_w).await;
    assert_eq!((ev.rv, ev.event_type), (7, EventType::Deleted));
    assert_eq!(ev.object().unwrap(), deleted);
    assert_eq!(ev.namespace, "ns");
    assert_eq!(ev.group, G);
    assert_eq!(ev.resource, R);
    assert_quiet(&mut w).await;
    assert_quiet(&mut ns_w).await;
    assert_eq!(serde_json::to_value(EventType::Deleted).unwrap(), json!("DELETED"));
    assert_eq!(EventType::Modified.as_str(), "MODIFIED");
}

/// With a tiny ring, replay has to stitch database history and ring events.
#[sqlx::test(migrations = "./migrations")]
async fn watch_replay_stitches_database_and_ring(pool: PgPool) {
    let config = WatchConfig { ring_capacity: 3, broadcast_capacity: 4, ..WatchConfig::default() };
    let store = Store::from_pool_with_config(pool, config).await.unwrap();
    for i in 0..1200 {
        let name = format!("o{i}");
        store.create(oref("ns", &name), obj("ns", &name, json!({}))).await.unwrap();
    }
    // Let the listener fill the ring with the newest events.
    tokio::time::timeout(WAIT, async {
        loop {
            let mut w = pin!(store.watch(G, R, None, 1199).await.unwrap());
            if tokio::time::timeout(Duration::from_millis(50), w.next()).await.is_ok() {
                break;
            }
        }
    })
    .await
    .unwrap();
    for from in [0, 5, 1196, 1197, 1200] {
        let mut w = pin!(store.watch(G, R, None, from).await.unwrap());
        for rv in from + 1..=1200 {
            assert_eq!(next_event(&mut w).await.rv, rv, "from {from}");
        }
        assert_quiet(&mut w).await;
    }
}

/// The ring is bounded by the bytes of its objects too, and an object bigger than the whole
/// ring passes through without breaking replay: every watcher still gets every event, in order.
#[sqlx::test(migrations = "./migrations")]
async fn watch_ring_bounded_by_bytes_still_replays_everything(pool: PgPool) {
    let config = WatchConfig { ring_bytes: 2000, ..WatchConfig::default() };
    let store = Store::from_pool_with_config(pool, config).await.unwrap();
    let pad = |i: i64| if i == 20 { 5000 } else { 300 + (i as usize * 37) % 600 };
    for i in 1..=40 {
        let name = format!("o{i}");
        store.create(oref("ns", &name), obj("ns", &name, json!({"pad": "x".repeat(pad(i))}))).await.unwrap();
    }
    // Let the listener publish everything.
    tokio::time::timeout(WAIT, async {
        loop {
            let mut w = pin!(store.watch(G, R, None, 39).await.unwrap());
            if tokio::time::timeout(Duration::from_millis(50), w.next()).await.is_ok() {
                break;
            }
        }
    })
    .await
    .unwrap();
    for from in [0, 10, 19, 20, 30, 38, 40] {
        let mut w = pin!(store.watch(G, R, None, from).await.unwrap());
        for rv in from + 1..=40 {
            let ev = next_event(&mut w).await;
            let o = ev.object().unwrap();
            assert_eq!((ev.rv, o["metadata"]["name"].as_str()), (rv, Some(format!("o{rv}").as_str())), "from {from}");
            assert_eq!(o["spec"]["pad"].as_str().map(str::len), Some(pad(rv)), "from {from}");
        }
        assert_quiet(&mut w).await;
    }
}

#[sqlx::test(migrations = "./migrations")]
async fn watch_from_future_rv_waits(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    let mut w = pin!(store.watch(G, R, None, 2).await.unwrap());
    for name in ["a", "b", "c"] {
        store.create(oref("ns", name), obj("ns", name, json!({}))).await.unwrap();
    }
    let ev = next_event(&mut w).await;
    assert_eq!((ev.rv, ev.name.as_str()), (3, "c"));
}

#[sqlx::test(migrations = "./migrations")]
async fn watch_below_compacted_is_gone(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    for i in 0..5 {
        let name = format!("o{i}");
        store.create(oref("ns", &name), obj("ns", &name, json!({}))).await.unwrap();
    }
    assert_eq!(store.compact(2).await.unwrap(), 3);
    assert_eq!(store.compacted_rv().await.unwrap(), 3);
    // Compaction never moves backwards.
    assert_eq!(store.compact(100).await.unwrap(), 3);
    // Each live object keeps its last revision; these five were written once each.
    let left: Vec<i64> =
        sqlx::query_scalar("SELECT rv FROM revisions ORDER BY rv").fetch_all(store.pool()).await.unwrap();
    assert_eq!(left, vec![1, 2, 3, 4, 5]);

    for from in [0, 2] {
        match store.watch(G, R, None, from).await {
            Err(StoreError::Gone { compacted: 3 }) => {}
            Err(e) => panic!("from {from}: unexpected error {e:?}"),
            Ok(_) => panic!("from {from}: expected Gone"),
        }
    }

    // A fresh store has an empty ring, so this replay reads the database.
    let fresh = Store::from_pool(store.pool().clone()).await.unwrap();
    let mut w = pin!(fresh.watch(G, R, None, 3).await.unwrap());
    assert_eq!(next_event(&mut w).await.rv, 4);
    assert_eq!(next_event(&mut w).await.rv, 5);
    store.create(oref("ns", "live"), obj("ns", "live", json!({}))).await.unwrap();
    assert_eq!(next_event(&mut w).await.rv, 6);
}

/// Compaction keeps each live object's last revision at or below the compacted rv, so what
/// an object was just before any rv a watch may resume from is still known.
#[sqlx::test(migrations = "./migrations")]
async fn compaction_keeps_what_each_object_was(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    store.create(oref("ns", "kept"), obj("ns", "kept", json!({"v": 1}))).await.unwrap(); // 1
    store.create(oref("ns", "gone"), obj("ns", "gone", json!({}))).await.unwrap(); // 2
    store.update(oref("ns", "kept"), obj("ns", "kept", json!({"v": 2})), None).await.unwrap(); // 3
    store.delete(oref("ns", "gone"), None).await.unwrap(); // 4
    store.update(oref("ns", "kept"), obj("ns", "kept", json!({"v": 3})), None).await.unwrap(); // 5
    store.create(oref("ns", "new"), obj("ns", "new", json!({}))).await.unwrap(); // 6
    assert_eq!(store.compact(2).await.unwrap(), 4);
    let left: Vec<i64> =
        sqlx::query_scalar("SELECT rv FROM revisions ORDER BY rv").fetch_all(store.pool()).await.unwrap();
    assert_eq!(left, vec![3, 5, 6], "kept's last revision below the bound stays; gone's history goes");

    let before = |name, rv| store.revision_before(oref("ns", name), rv);
    let kept = before("kept", 5).await.unwrap().expect("kept existed at rv 4");
    assert_eq!((kept.rv, kept.object().unwrap()["spec"]["v"].clone()), (3, json!(2)));
    assert_eq!(before("kept", 6).await.unwrap().unwrap().rv, 5);
    assert!(before("gone", 6).await.unwrap().is_none(), "deleted before the bound: nothing to hold");
    assert!(before("new", 6).await.unwrap().is_none(), "did not exist yet");
    assert_eq!(before("new", 7).await.unwrap().unwrap().event_type, EventType::Added);
}

/// Writes that never notify (as if the notification were lost) still reach
/// watchers through the periodic poll.
#[sqlx::test(migrations = "./migrations")]
async fn lost_notification_is_recovered_by_poll(pool: PgPool) {
    let config = WatchConfig { poll_interval: Duration::from_millis(200), ..WatchConfig::default() };
    let store = Store::from_pool_with_config(pool, config).await.unwrap();
    let mut w = pin!(store.watch(G, R, None, 0).await.unwrap());
    let mut tx = store.pool().begin().await.unwrap();
    let rv: i64 = sqlx::query_scalar("UPDATE store_meta SET current_rv = current_rv + 1 RETURNING current_rv")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO revisions (rv, api_group, resource, namespace, name, event_type, object) \
         VALUES ($1, $2, $3, 'ns', 'silent', 'ADDED', '{}'::jsonb)",
    )
    .bind(rv)
    .bind(G)
    .bind(R)
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let ev = next_event(&mut w).await;
    assert_eq!((ev.rv, ev.name.as_str()), (1, "silent"));
}

#[sqlx::test(migrations = "./migrations")]
async fn close_ends_watch_streams(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    let mut w = pin!(store.watch(G, R, None, 0).await.unwrap());
    store.close().await;
    let end = tokio::time::timeout(WAIT, w.next()).await.unwrap();
    assert!(end.is_none(), "{end:?}");
}

#[sqlx::test(migrations = "./migrations")]
async fn end_watches_ends_streams_and_keeps_the_store_usable(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    let mut w = pin!(store.watch(G, R, None, 0).await.unwrap());
    store.end_watches().await;
    let end = tokio::time::timeout(WAIT, w.next()).await.unwrap();
    assert!(end.is_none(), "{end:?}");
    // Requests still in flight during a shutdown keep working; a new watch ends at once.
    store.create(oref("ns", "after"), obj("ns", "after", json!({}))).await.unwrap();
    assert!(store.get(oref("ns", "after")).await.unwrap().is_some());
    let mut late = pin!(store.watch(G, R, None, 0).await.unwrap());
    let end = tokio::time::timeout(WAIT, late.next()).await.unwrap();
    assert!(end.is_none(), "{end:?}");
    store.end_watches().await;
    store.close().await;
}

#[sqlx::test(migrations = "./migrations")]
async fn concurrent_updates_with_same_precondition(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    let created = store.create(oref("ns", "a"), obj("ns", "a", json!({}))).await.unwrap();
    let mut rv = rv_of(&created);
    for round in 0..20 {
        let tasks: Vec<_> = (0..2)
            .map(|i| {
                let store = store.clone();
                let mut object = created.clone();
                object["spec"] = json!({"writer": i, "round": round});
                tokio::spawn(async move { store.update(oref("ns", "a"), object, Some(rv)).await })
            })
            .collect();
        let mut won = Vec::new();
        let mut conflicts = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(v) => won.push(rv_of(&v)),
                Err(StoreError::Conflict { current }) => {
                    conflicts += 1;
                    assert_eq!(current, rv + 1);
                }
                Err(e) => panic!("unexpected error {e:?}"),
            }
        }
        assert_eq!((won.len(), conflicts), (1, 1), "round {round}");
        rv = won[0];
    }
    assert_eq!(store.current_rv().await.unwrap(), 21);
}

async fn ordering_under_concurrency(store: Store) {
    const WRITERS: usize = 8;
    const OPS: usize = 100;
    const WATCHERS: usize = 20;
    let total = (WRITERS * OPS) as i64;

    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let stream = store.watch(G, R, None, 0).await.unwrap();
        watchers.push(tokio::spawn(async move {
            let mut stream = pin!(stream);
            let mut rvs = Vec::with_capacity(total as usize);
            while (rvs.len() as i64) < total {
                rvs.push(next_event(&mut stream).await.rv);
            }
            rvs
        }));
    }

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                // Alternate creating a new object and updating it.
                for op in 0..OPS {
                    let name = format!("w{w}-{}", op / 2);
                    let object = obj("ns", &name, json!({"op": op}));
                    if op % 2 == 0 {
                        store.create(oref("ns", &name), object).await.unwrap();
                    } else {
                        store.update(oref("ns", &name), object, None).await.unwrap();
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    assert_eq!(store.current_rv().await.unwrap(), total);

    let expected: Vec<i64> = (1..=total).collect();
    for w in watchers {
        assert_eq!(w.await.unwrap(), expected);
    }
}

#[sqlx::test(migrations = "./migrations")]
async fn watch_ordering_under_concurrency(pool: PgPool) {
    ordering_under_concurrency(Store::from_pool(pool).await.unwrap()).await;
}

/// Same, with buffers small enough that watchers lag and must catch up from
/// the ring and the database.
#[sqlx::test(migrations = "./migrations")]
async fn watch_ordering_with_lagging_watchers(pool: PgPool) {
    let config = WatchConfig { broadcast_capacity: 2, ring_capacity: 5, ..WatchConfig::default() };
    ordering_under_concurrency(Store::from_pool_with_config(pool, config).await.unwrap()).await;
}

/// Multi-threaded variant: writers, listener and watchers run in parallel.
#[test]
fn watch_ordering_multi_thread() {
    // Like #[sqlx::test], it fails without a database rather than pass having tested nothing.
    let url = std::env::var("DATABASE_URL")
        .expect("DATABASE_URL must name the test PostgreSQL (scripts/test sets it and starts PostgreSQL)");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    rt.block_on(async move {
        // A private database so the fixed rv expectations hold.
        let admin = PgPool::connect(&url).await.unwrap();
        let db = format!("kairon_db_mt_{}", uuid::Uuid::new_v4().simple());
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}"))).execute(&admin).await.unwrap();
        let mut opts: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
        opts = opts.database(&db);
        let pool = sqlx::postgres::PgPoolOptions::new().max_connections(10).connect_with(opts).await.unwrap();
        let store = Store::from_pool_with_config(
            pool,
            WatchConfig { broadcast_capacity: 8, ring_capacity: 16, ..WatchConfig::default() },
        )
        .await
        .unwrap();
        ordering_under_concurrency(store.clone()).await;
        store.close().await;
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE {db}"))).execute(&admin).await.unwrap();
    });
}

/// A list whose caller goes away while its `BEGIN ... READ ONLY` is in flight (an HTTP client
/// that disconnects) must not leave that transaction on the pooled connection for the next
/// user: writes right after such dropped lists all succeed.
#[sqlx::test(migrations = "./migrations")]
async fn a_list_dropped_mid_begin_leaves_no_transaction_behind(pool: PgPool) {
    let o = pool.connect_options();
    let url = format!(
        "postgres://{}@{}:{}/{}",
        o.get_username(),
        o.get_host(),
        o.get_port(),
        o.get_database().expect("the test database")
    );
    let store = Store::connect(&url).await.unwrap();
    for i in 0..300u64 {
        // Zero and small timeouts drop the list at its first await points: acquiring, BEGIN.
        let d = Duration::from_micros((i % 10) * 100);
        let _ = tokio::time::timeout(d, store.list(G, R, Some("default"), None, None)).await;
        let name = format!("m{i}");
        if let Err(e) = store.create(oref("default", &name), obj("default", &name, json!({}))).await {
            panic!("write {i} after a dropped list failed: {e}");
        }
    }
    store.close().await;
}

#[sqlx::test(migrations = "./migrations")]
async fn owned_by_finds_the_dependents_of_an_owner_in_its_namespace(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    let owned = |ns: &str, name: &str, owners: Value| {
        let mut o = obj(ns, name, json!({}));
        o["metadata"]["ownerReferences"] = owners;
        o
    };
    let owner = json!([{"apiVersion": "kairon.io/v1", "kind": "MachinePool", "name": "p", "uid": "u-1"}]);
    let two = json!([{"uid": "u-2", "name": "q"}, {"uid": "u-1", "name": "p"}]);
    store.create(oref("ns", "b"), owned("ns", "b", owner.clone())).await.unwrap();
    store.create(oref("ns", "a"), owned("ns", "a", two)).await.unwrap();
    store.create(oref("ns", "c"), owned("ns", "c", json!([{"uid": "u-3"}]))).await.unwrap();
    store.create(oref("ns", "d"), obj("ns", "d", json!({}))).await.unwrap();
    store.create(oref("other", "e"), owned("other", "e", owner.clone())).await.unwrap();
    let pools = ObjectRef { group: G, resource: "pools", namespace: "ns", name: "f" };
    store.create(pools, owned("ns", "f", owner)).await.unwrap();
    let found = store.owned_by("ns", "u-1").await.unwrap();
    let found: Vec<_> =
        found.iter().map(|(g, r, o)| (g.as_str(), r.as_str(), o["metadata"]["name"].as_str().unwrap())).collect();
    assert_eq!(found, [(G, R, "a"), (G, R, "b"), (G, "pools", "f")], "every kind, only this namespace");
    assert!(store.owned_by("ns", "u-9").await.unwrap().is_empty());
    assert!(store.owned_by("ns", "\"}]").await.unwrap().is_empty(), "a uid is a value, not JSON");
}

#[sqlx::test(migrations = "./migrations")]
async fn expire_deletes_what_was_last_written_before_the_ttl_and_says_when_the_next_is_due(pool: PgPool) {
    let store = Store::from_pool(pool.clone()).await.unwrap();
    const EV: ObjectRef<'static> = ObjectRef { group: "events.k8s.io", resource: "events", namespace: "ns", name: "" };
    let at = |name| ObjectRef { name, ..EV };
    for name in ["old", "older", "rewritten", "fresh"] {
        store.create(at(name), obj("ns", name, json!({}))).await.unwrap();
    }
    store.create(oref("ns", "machine"), obj("ns", "machine", json!({}))).await.unwrap();
    sqlx::query("UPDATE objects SET updated_at = now() - interval '2 hours' WHERE name <> 'fresh'")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("UPDATE objects SET updated_at = now() - interval '3 hours' WHERE name = 'older'")
        .execute(&pool)
        .await
        .unwrap();
    // An update is a write: the ttl counts from it.
    let rewritten = store.get(at("rewritten")).await.unwrap().unwrap();
    store.update(at("rewritten"), rewritten, None).await.unwrap();
    let from = store.current_rv().await.unwrap();
    let mut w = pin!(store.watch("events.k8s.io", "events", None, from).await.unwrap());

    let hour = Duration::from_secs(3600);
    let (deleted, next) = store.expire("events.k8s.io", "events", hour, 1).await.unwrap();
    assert_eq!(deleted, 1, "at most a batch");
    let ev = next_event(&mut w).await;
    assert_eq!((ev.event_type, ev.name.as_str()), (EventType::Deleted, "older"), "oldest first, and watched");
    assert_eq!(next, Some(Duration::ZERO), "\"old\" is due already");
    let (deleted, next) = store.expire("events.k8s.io", "events", hour, 100).await.unwrap();
    assert_eq!(deleted, 1);
    assert_eq!(next_event(&mut w).await.name, "old");
    let next = next.expect("two Events are left");
    assert!(next > Duration::from_secs(3590) && next <= hour, "the next is due an hour after its write: {next:?}");
    assert!(store.get(at("rewritten")).await.unwrap().is_some() && store.get(at("fresh")).await.unwrap().is_some());
    assert!(store.get(oref("ns", "machine")).await.unwrap().is_some(), "only the resource asked for");
    assert_eq!(store.expire("events.k8s.io", "events", hour, 100).await.unwrap().0, 0);
    assert_quiet(&mut w).await;
    store.delete(at("rewritten"), None).await.unwrap();
    store.delete(at("fresh"), None).await.unwrap();
    assert_eq!(store.expire("events.k8s.io", "events", hour, 100).await.unwrap(), (0, None), "nothing left");
}

/// A guard judges what is committed under the store's write lock: racing guarded creates see
/// each other, so a limit of 5 lets exactly 5 of 20 through, and a refused one stores nothing.
#[sqlx::test(migrations = "./migrations")]
async fn guarded_writes_racing_for_the_last_places_get_one_winner_each(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    let limit = ObjectRef { group: "test.io", resource: "limits", namespace: "ns", name: "max" };
    store.create(limit, json!({"metadata": {"name": "max", "namespace": "ns"}, "max": 5})).await.unwrap();
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let name = format!("w{i}");
                let guard = kairon_db::Guard {
                    namespace: "ns",
                    limits: ("test.io", "limits"),
                    counted: (G, R),
                    replaces: None,
                    judge: Box::new(|limits: &[Value], counted: &[Value]| {
                        let max = limits[0]["max"].as_u64().unwrap() as usize;
                        (counted.len() + 1 > max).then(|| format!("{} widgets of {max}", counted.len()))
                    }),
                };
                let w = Write::Create(oref("ns", &name), obj("ns", &name, json!({})));
                store.write_all_guarded(vec![w], Durability::Flushed, Some(guard)).await
            })
        })
        .collect();
    let mut won = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => won += 1,
            Err(WriteError { error: StoreError::Refused(why), .. }) => assert_eq!(why, "5 widgets of 5"),
            Err(e) => panic!("unexpected error {e:?}"),
        }
    }
    assert_eq!(won, 5);
    let listed = store.list(G, R, Some("ns"), None, None).await.unwrap();
    assert_eq!(listed.items.len(), 5, "a refused write stores nothing");
    // With no limiting object in the namespace, nothing is judged.
    let guard = kairon_db::Guard {
        namespace: "other",
        limits: ("test.io", "limits"),
        counted: (G, R),
        replaces: None,
        judge: Box::new(|_: &[Value], _: &[Value]| Some("never asked".to_string())),
    };
    let w = Write::Create(oref("other", "w"), obj("other", "w", json!({})));
    store.write_all_guarded(vec![w], Durability::Flushed, Some(guard)).await.unwrap();
}

/// Reads come from the watch cache: a row changed behind the store's back (no revision) is not
/// seen, while every write through the store is, by the very next get and list.
#[sqlx::test(migrations = "./migrations")]
async fn reads_are_served_by_the_watch_cache_and_see_every_write_at_once(pool: PgPool) {
    let store = Store::from_pool(pool).await.unwrap();
    let a = store.create(oref("ns", "a"), obj("ns", "a", json!({"n": 0}))).await.unwrap();
    sqlx::query("UPDATE objects SET object = jsonb_set(object, '{spec,n}', '99') WHERE name = 'a'")
        .execute(store.pool())
        .await
        .unwrap();
    let got = store.get(oref("ns", "a")).await.unwrap().unwrap();
    assert_eq!(got["spec"]["n"], json!(0), "a read at the latest revision is the cache's");
    assert_eq!(store.list(G, R, Some("ns"), None, None).await.unwrap().items[0]["spec"]["n"], json!(0));

    // Labelled reads too, from the cache's label index: a label the database alone holds is not
    // found, and one just written is.
    sqlx::query(
        "UPDATE objects SET object = jsonb_set(object, '{metadata,labels}', '{\"pool\": \"p\"}') WHERE name = 'a'",
    )
    .execute(store.pool())
    .await
    .unwrap();
    assert_eq!(store.labelled(G, R, "ns", "pool", "p").await.unwrap(), Vec::<serde_json::Value>::new());
    let mut labelled = store.get(oref("ns", "a")).await.unwrap().unwrap();
    labelled["metadata"]["labels"] = json!({"pool": "q"});
    let a = store.update(oref("ns", "a"), labelled, Some(rv_of(&a))).await.unwrap();
    let found = store.labelled(G, R, "ns", "pool", "q").await.unwrap();
    assert_eq!((found.len(), rv_of(&found[0])), (1, rv_of(&a)));

    // A write followed at once by a get and a list sees it, 200 times over.
    let mut last = a;
    for n in 1..=200 {
        let mut next = last.clone();
        next["spec"]["n"] = json!(n);
        last = store.update(oref("ns", "a"), next, Some(rv_of(&last))).await.unwrap();
        let name = format!("b{n}");
        store.create(oref("ns", &name), obj("ns", &name, json!({}))).await.unwrap();
        let got = store.get(oref("ns", "a")).await.unwrap().unwrap();
        assert_eq!((rv_of(&got), &got["spec"]["n"]), (rv_of(&last), &json!(n)));
        let found = store.labelled(G, R, "ns", "pool", "q").await.unwrap();
        assert_eq!(rv_of(&found[0]), rv_of(&last), "a labelled read sees the write just made");
        let page = store.list(G, R, Some("ns"), None, None).await.unwrap();
        assert_eq!(page.items.len(), n as usize + 1, "the create just made is listed");
        assert!(page.resource_version > rv_of(&last));
    }
    store.delete(oref("ns", "a"), None).await.unwrap();
    assert_eq!(store.get(oref("ns", "a")).await.unwrap(), None);
    assert!(store.get_json(oref("ns", "b7"), kairon_db::Freshness::Any).await.unwrap().is_some());

    // Pages from the cache: in (namespace, name) order, continuing after the last key.
    store.create(oref("other", "z"), obj("other", "z", json!({}))).await.unwrap();
    let first = store.list(G, R, None, None, Some(150)).await.unwrap();
    let (ns, name) = first.continue_after.clone().expect("more remain");
    let rest = store.list(G, R, None, Some((&ns, &name)), None).await.unwrap();
    assert_eq!((first.items.len(), rest.items.len()), (150, 51));
    assert_eq!(rest.items.last().unwrap()["metadata"]["namespace"], json!("other"));
}

/// Revisions the listener never saw (compacted before it read them) leave the cache unloaded
/// until it loads a snapshot again; reads meanwhile go to the database and stay correct.
#[sqlx::test(migrations = "./migrations")]
async fn a_gap_in_the_feed_reloads_the_cache(pool: PgPool) {
    let config = WatchConfig { poll_interval: Duration::from_millis(100), ..WatchConfig::default() };
    let store = Store::from_pool_with_config(pool, config).await.unwrap();
    store.create(oref("ns", "a"), obj("ns", "a", json!({"n": 0}))).await.unwrap();
    // Two commits, the first's revision gone: the listener sees rv 3 after rv 1.
    let mut tx = store.pool().begin().await.unwrap();
    let rv: i64 = sqlx::query_scalar("UPDATE store_meta SET current_rv = current_rv + 2 RETURNING current_rv")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    let changed = json!({"apiVersion": "kairon.io/v1", "kind": "Machine",
                         "metadata": {"name": "a", "namespace": "ns", "resourceVersion": rv.to_string()},
                         "spec": {"n": 2}});
    sqlx::query("UPDATE objects SET object = $1, resource_version = $2 WHERE name = 'a'")
        .bind(&changed)
        .bind(rv)
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO revisions (rv, api_group, resource, namespace, name, event_type, object) \
         VALUES ($1, $2, $3, 'ns', 'a', 'MODIFIED', $4)",
    )
    .bind(rv)
    .bind(G)
    .bind(R)
    .bind(&changed)
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    sqlx::query("SELECT pg_notify('kairon_revisions', $1)").bind(rv.to_string()).execute(store.pool()).await.unwrap();
    // Right away (the database) and once reloaded (the cache) alike.
    for _ in 0..20 {
        let got = store.get(oref("ns", "a")).await.unwrap().unwrap();
        assert_eq!(got["spec"]["n"], json!(2));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The reload is the cache's: a change behind the store's back is not seen.
    sqlx::query("UPDATE objects SET object = jsonb_set(object, '{spec,n}', '99') WHERE name = 'a'")
        .execute(store.pool())
        .await
        .unwrap();
    let got = store.get(oref("ns", "a")).await.unwrap().unwrap();
    assert_eq!(got["spec"]["n"], json!(2), "served by the reloaded cache");
}
