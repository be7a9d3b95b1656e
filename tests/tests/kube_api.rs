//! kube-rs against `kairon up`: the Kubernetes wire protocol the controllers rely on.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use kairon_e2e::flags::API_ONLY;
use kairon_e2e::{Kairon, hold, wait_for, wait_for_and_report};
use kairon_model::{Machine, MachineSpec};

// These tests are about the API alone (API_ONLY): no node agent or controllers write next to them.

fn machine(name: &str) -> Machine {
    serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
        "metadata": {"name": name},
        "spec": {"image": {"path": "/var/lib/fluxvm/images/kairon-hw.qcow2"}, "resources": {"cpu": "1", "memory": "512Mi"}}
    }))
    .unwrap()
}

fn api_error(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn create_get_list_patch_delete() {
    let k = Kairon::start_with(API_ONLY).unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "agents");

    let created = api.create(&PostParams::default(), &machine("agent-1")).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(created.metadata.uid.is_some());
    let lifecycle_default = created.spec.lifecycle.is_none();
    assert!(lifecycle_default, "a Machine without spec.lifecycle stays without it");

    let got = api.get("agent-1").await.unwrap();
    assert_eq!(got.metadata.resource_version, created.metadata.resource_version);

    api.create(&PostParams::default(), &machine("agent-2")).await.unwrap();
    let names: Vec<String> =
        api.list(&ListParams::default()).await.unwrap().items.into_iter().filter_map(|m| m.metadata.name).collect();
    assert_eq!(names, ["agent-1", "agent-2"]);

    // A merge patch that turns on the lifecycle gets its defaults filled in.
    let patched = api
        .patch(
            "agent-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"lifecycle": {"idleTimeoutSeconds": 600}}})),
        )
        .await
        .unwrap();
    let l = patched.spec.lifecycle.clone().unwrap();
    assert_eq!((l.idle_timeout_seconds, l.idle_cpu_millicores, l.wake_timeout_seconds), (Some(600), 50, 60));
    assert_eq!(patched.metadata.generation, Some(2), "a spec change bumps generation");

    // A status write does not touch spec, and does not bump generation.
    let status = api
        .patch_status(
            "agent-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running"}, "spec": {"ttlSeconds": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(status.spec.ttl_seconds, None);
    assert_eq!(status.metadata.generation, Some(2));
    assert_eq!(serde_json::to_value(&status.status).unwrap()["phase"], "Running");

    // Label selectors.
    api.patch(
        "agent-2",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"kairon.zyvor.dev/sandbox": "true"}}})),
    )
    .await
    .unwrap();
    let sandboxes = api.list(&ListParams::default().labels("kairon.zyvor.dev/sandbox=true")).await.unwrap();
    assert_eq!(sandboxes.items.len(), 1);
    let by_field = api.list(&ListParams::default().fields("metadata.name=agent-1")).await.unwrap();
    assert_eq!(by_field.items.len(), 1);

    api.delete("agent-1", &DeleteParams::default()).await.unwrap();
    let (code, reason, msg) = api_error(api.get("agent-1").await.unwrap_err());
    assert_eq!((code, reason.as_str()), (404, "NotFound"));
    assert_eq!(msg, "machines.kairon.zyvor.dev \"agent-1\" not found");

    // Both served versions read the same object.
    let v1alpha1 = kube::api::ApiResource {
        group: "kairon.zyvor.dev".into(),
        version: "v1alpha1".into(),
        api_version: "kairon.zyvor.dev/v1alpha1".into(),
        kind: "Machine".into(),
        plural: "machines".into(),
    };
    let dynamic: Api<kube::api::DynamicObject> = Api::namespaced_with(k.client().await.unwrap(), "agents", &v1alpha1);
    let old = dynamic.get("agent-2").await.unwrap();
    assert_eq!(old.types.unwrap().api_version, "kairon.zyvor.dev/v1alpha1");
}

#[tokio::test]
async fn stale_update_conflicts_and_racing_writers_have_one_winner() {
    let k = Kairon::start_with(API_ONLY).unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "default");
    let m = api.create(&PostParams::default(), &machine("race")).await.unwrap();

    let mut first = m.clone();
    first.spec.ttl_seconds = Some(100);
    api.replace("race", &PostParams::default(), &first).await.unwrap();
    // The same stale copy again: its resourceVersion is gone.
    let mut stale = m.clone();
    stale.spec.ttl_seconds = Some(200);
    let (code, reason, msg) = api_error(api.replace("race", &PostParams::default(), &stale).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert!(msg.contains("the object has been modified"), "{msg}");

    // Many rounds of two writers from the same version: exactly one wins each time.
    for round in 0..10 {
        let base = api.get("race").await.unwrap();
        let (mut a, mut b) = (base.clone(), base.clone());
        a.spec.ttl_seconds = Some(1000 + round);
        b.spec.ttl_seconds = Some(2000 + round);
        let pp = PostParams::default();
        let (ra, rb) = tokio::join!(api.replace("race", &pp, &a), api.replace("race", &pp, &b));
        let wins = [ra.is_ok(), rb.is_ok()].iter().filter(|w| **w).count();
        assert_eq!(wins, 1, "round {round}: exactly one writer wins");
        let loser = match (ra, rb) {
            (Ok(_), Err(e)) | (Err(e), Ok(_)) => e,
            _ => unreachable!("exactly one won"),
        };
        assert_eq!(api_error(loser).0, 409);
    }
}

/// A write that changes nothing is not stored (as Kubernetes does): same resourceVersion, no
/// watch event; a stale one that changes nothing is still refused; a real change still goes.
#[tokio::test]
async fn a_write_that_changes_nothing_stores_nothing() {
    let k = Kairon::start_with(API_ONLY).unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "default");
    let m = api.create(&PostParams::default(), &machine("same")).await.unwrap();
    let rv = m.metadata.resource_version.clone().unwrap();
    let mut events = api.watch(&WatchParams::default(), &rv).await.unwrap().boxed();

    let status = json!({"status": {"phase": "Pending", "observedGeneration": 1}});
    let pp = PatchParams::default();
    let written = api.patch_status("same", &pp, &Patch::Merge(&status)).await.unwrap();
    let rv1 = written.metadata.resource_version.clone().unwrap();
    assert_ne!(rv1, rv);
    // The same status again, a spec patch to the value it has, a replace with what is stored,
    // and an apply of nothing new: each answers the stored object as it is.
    let again = api.patch_status("same", &pp, &Patch::Merge(&status)).await.unwrap();
    assert_eq!(again.metadata.resource_version.as_deref(), Some(rv1.as_str()));
    let spec = json!({"spec": {"resources": {"cpu": "1"}}});
    let again = api.patch("same", &pp, &Patch::Merge(&spec)).await.unwrap();
    assert_eq!(again.metadata.resource_version.as_deref(), Some(rv1.as_str()));
    let again = api.replace("same", &PostParams::default(), &again).await.unwrap();
    assert_eq!(again.metadata.resource_version.as_deref(), Some(rv1.as_str()));
    assert_eq!(again.status.as_ref().and_then(|s| s.observed_generation), Some(1));

    // A stale copy that would change nothing is refused as any stale write.
    let mut stale = m.clone();
    stale.status = again.status.clone();
    let (code, _, _) = api_error(api.replace_status("same", &PostParams::default(), &stale).await.unwrap_err());
    assert_eq!(code, 409);

    // A real change after them is the next revision the watch hears of; nothing came between.
    let changed =
        api.patch_status("same", &pp, &Patch::Merge(&json!({"status": {"observedGeneration": 2}}))).await.unwrap();
    let mut heard = Vec::new();
    while heard.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(10), events.next()).await {
            Ok(Some(Ok(WatchEvent::Modified(o)))) => heard.push(o.metadata.resource_version.unwrap()),
            Ok(Some(Ok(WatchEvent::Bookmark(_)))) => {}
            other => panic!("expected two MODIFIED events, got {other:?} after {heard:?}"),
        }
    }
    assert_eq!(heard, [rv1, changed.metadata.resource_version.unwrap()]);
}

#[tokio::test]
async fn invalid_objects_are_refused_with_the_field_named_and_nothing_stored() {
    let k = Kairon::start_with(API_ONLY).unwrap();
    let client = k.client().await.unwrap();
    let api: Api<Machine> = Api::namespaced(client.clone(), "default");
    let raw: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client, "default", &kube::api::ApiResource::erase::<Machine>(&()));
    let cases = [
        (
            json!({"idleTimeoutSeconds": 30}),
            None,
            "spec.lifecycle.idleTimeoutSeconds",
            "must be greater than or equal to 60",
        ),
        (json!({"idleTimeoutSeconds": 600, "idleAction": "Sleep"}), None, "spec.lifecycle.idleAction", "Sleep"),
        (
            json!(null),
            Some(json!({"sandbox": {}, "deviceClaims": [{"name": "gpu", "resourceName": "nvidia.com/gpu"}]})),
            "spec.deviceClaims",
            "PCI passthrough",
        ),
    ];
    for (i, (lifecycle, extra, field, words)) in cases.into_iter().enumerate() {
        let name = format!("bad-{i}");
        let mut obj = json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "metadata": {"name": name},
            "spec": {"image": {"path": "/var/lib/fluxvm/images/kairon-hw.qcow2"}}
        });
        if !lifecycle.is_null() {
            obj["spec"]["lifecycle"] = lifecycle;
        }
        if let Some(extra) = extra {
            for (k, v) in extra.as_object().unwrap() {
                obj["spec"][k] = v.clone();
            }
        }
        let dynobj: kube::api::DynamicObject = serde_json::from_value(obj).unwrap();
        let (code, reason, msg) = api_error(raw.create(&PostParams::default(), &dynobj).await.unwrap_err());
        assert_eq!((code, reason.as_str()), (422, "Invalid"), "{msg}");
        assert!(msg.contains(field) && msg.contains(words), "{field} / {words} in {msg}");
        assert!(api.get_opt(&name).await.unwrap().is_none(), "nothing stored for {name}");
    }
    assert!(api.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn server_side_apply_tracks_field_managers() {
    let k = Kairon::start_with(API_ONLY).unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "default");
    let alice = PatchParams::apply("alice");
    let doc = |ttl: Option<i64>, labels: serde_json::Value| {
        let mut d = json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
            "metadata": {"name": "shared", "labels": labels},
            "spec": {"image": {"path": "/img.qcow2"}}
        });
        if let Some(t) = ttl {
            d["spec"]["ttlSeconds"] = json!(t);
        }
        d
    };
    let m = api.patch("shared", &alice, &Patch::Apply(doc(Some(600), json!({"team": "a"})))).await.unwrap();
    assert_eq!(m.spec.ttl_seconds, Some(600));
    let managers: Vec<_> = m.metadata.managed_fields.unwrap().into_iter().filter_map(|f| f.manager).collect();
    assert_eq!(managers, ["alice"]);

    // Bob sets the same field to another value: conflict, unless forced.
    let bob = PatchParams::apply("bob");
    let bob_doc = json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "metadata": {"name": "shared"}, "spec": {"ttlSeconds": 900}});
    let (code, reason, msg) = api_error(api.patch("shared", &bob, &Patch::Apply(bob_doc.clone())).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert!(msg.contains("conflict with \"alice\"") && msg.contains(".spec.ttlSeconds"), "{msg}");
    let forced = api.patch("shared", &bob.clone().force(), &Patch::Apply(bob_doc)).await.unwrap();
    assert_eq!(forced.spec.ttl_seconds, Some(900));

    // Alice re-applies without the label: it is removed; the ttl is Bob's now, so it stays.
    let m = api.patch("shared", &alice, &Patch::Apply(doc(None, json!({})))).await.unwrap();
    assert!(!m.metadata.labels.unwrap_or_default().contains_key("team"), "label removed");
    assert_eq!(m.spec.ttl_seconds, Some(900));
}

#[tokio::test]
async fn watcher_resumes_from_a_resource_version() {
    let k = Kairon::start_with(API_ONLY).unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "default");
    let first = api.create(&PostParams::default(), &machine("w-1")).await.unwrap();
    let rv = first.metadata.resource_version.clone().unwrap();
    api.create(&PostParams::default(), &machine("w-2")).await.unwrap();
    api.delete("w-1", &DeleteParams::default()).await.unwrap();

    // Watching from the first version replays exactly what came after it.
    let mut stream = api.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(10), stream.try_next()).await.unwrap().unwrap() {
            Some(WatchEvent::Added(m)) => seen.push(format!("ADDED {}", m.metadata.name.unwrap())),
            Some(WatchEvent::Deleted(m)) => seen.push(format!("DELETED {}", m.metadata.name.unwrap())),
            Some(WatchEvent::Modified(m)) => seen.push(format!("MODIFIED {}", m.metadata.name.unwrap())),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["ADDED w-2", "DELETED w-1"]);

    // The runtime watcher (list, then watch) sees a later change live.
    let mut w = watcher(api.clone(), watcher::Config::default()).applied_objects().boxed();
    let first_seen = tokio::time::timeout(Duration::from_secs(10), w.try_next()).await.unwrap().unwrap().unwrap();
    assert_eq!(first_seen.metadata.name.as_deref(), Some("w-2"));
    api.patch("w-2", &PatchParams::default(), &Patch::Merge(json!({"spec": {"ttlSeconds": 77}}))).await.unwrap();
    let updated = tokio::time::timeout(Duration::from_secs(10), w.try_next()).await.unwrap().unwrap().unwrap();
    assert_eq!(updated.spec.ttl_seconds, Some(77));
}

#[tokio::test]
async fn watch_from_a_compacted_version_is_gone_and_the_watcher_recovers() {
    let k = Kairon::start_with(&["--no-runtime", "--compact-interval", "1s", "--compact-keep", "3"]).unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "default");
    let first = api.create(&PostParams::default(), &machine("old")).await.unwrap();
    let old_rv = first.metadata.resource_version.clone().unwrap();
    for i in 0..10 {
        api.create(&PostParams::default(), &machine(&format!("m-{i}"))).await.unwrap();
    }

    // A raw watch from the compacted version gets a 410 ERROR event inside the stream (until
    // the compaction, every 1 s, has passed old_rv, the watch replays from it instead).
    wait_for("a watch from the compacted version to be 410 Gone", Duration::from_secs(30), || async {
        let mut stream = api.watch(&WatchParams::default(), &old_rv).await.unwrap().boxed();
        match tokio::time::timeout(Duration::from_secs(10), stream.try_next()).await.unwrap() {
            Ok(Some(WatchEvent::Error(e))) if e.code == 410 => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 410 => Ok(()),
            Ok(Some(WatchEvent::Added(m))) => Err(format!("replayed from old_rv: ADDED {:?}", m.metadata.name)),
            other => panic!("expected 410 Gone, got {other:?}"),
        }
    })
    .await;

    // kube-rs's watcher re-lists after a 410 and carries on.
    let mut w = watcher(api.clone(), watcher::Config::default()).default_backoff().applied_objects().boxed();
    let mut names = BTreeSet::new();
    // The watcher reports each 410 as an error item, then re-lists; skip those.
    let mut next = async || loop {
        match tokio::time::timeout(Duration::from_secs(20), w.next()).await.expect("an event in time") {
            Some(Ok(m)) => return m,
            Some(Err(e)) => eprintln!("watcher error (recovering): {e}"),
            None => panic!("watcher ended"),
        }
    };
    while names.len() < 11 {
        names.insert(next().await.metadata.name.unwrap());
    }
    for i in 0..5 {
        api.create(&PostParams::default(), &machine(&format!("late-{i}"))).await.unwrap();
        hold(Duration::from_millis(700), "spread over compactions (every 1 s) while the watcher follows").await;
    }
    while !names.contains("late-4") {
        names.insert(next().await.metadata.name.unwrap());
    }
    assert!((0..5).all(|i| names.contains(&format!("late-{i}"))));
}

#[tokio::test]
async fn concurrent_writers_and_a_hundred_watchers_see_every_version_in_order() {
    // A hundred watches on one token: above the default of 32 per subject (limits.rs tests
    // that limit), so this server allows them.
    let mut flags = API_ONLY.to_vec();
    flags.extend(["--max-connections-per-subject", "128"]);
    let k = Kairon::start_with(&flags).unwrap();
    let client = k.client().await.unwrap();
    let api: Api<Machine> = Api::namespaced(client.clone(), "default");
    let start_rv: u64 =
        api.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap().parse().unwrap();
    const WRITERS: usize = 8;
    const EACH: usize = 25;
    let total = WRITERS * EACH;

    let mut watchers = Vec::new();
    for _ in 0..100 {
        let api = api.clone();
        let mut stream = api.watch(&WatchParams::default(), &start_rv.to_string()).await.unwrap().boxed();
        watchers.push(tokio::spawn(async move {
            let mut rvs = Vec::with_capacity(total);
            while rvs.len() < total {
                let ev = tokio::time::timeout(Duration::from_secs(60), stream.try_next())
                    .await
                    .expect("event in time")
                    .unwrap();
                let m = match ev {
                    Some(WatchEvent::Added(m) | WatchEvent::Modified(m) | WatchEvent::Deleted(m)) => m,
                    other => panic!("unexpected {other:?}"),
                };
                rvs.push(m.metadata.resource_version.unwrap().parse::<u64>().unwrap());
            }
            rvs
        }));
    }
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let api = api.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..EACH {
                let name = format!("w{w}-{}", i / 2);
                if i % 2 == 0 {
                    api.create(&PostParams::default(), &machine(&name)).await.unwrap();
                } else {
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"ttlSeconds": 60 + i}})))
                        .await
                        .unwrap();
                }
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let want: Vec<u64> = (start_rv + 1..=start_rv + total as u64).collect();
    for w in watchers {
        assert_eq!(w.await.unwrap(), want, "every version, in order, no gap");
    }
    let _ = MachineSpec::default();
}

#[tokio::test]
async fn deleting_an_owner_deletes_what_it_owns() {
    let k = Kairon::start_with(API_ONLY).unwrap();
    let client = k.client().await.unwrap();
    let pools: Api<kairon_model::MachinePool> = Api::namespaced(client.clone(), "default");
    let pool: kairon_model::MachinePool = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool", "metadata": {"name": "owner"},
        "spec": {"replicas": 0, "template": {"spec": {"image": {"path": "/var/lib/fluxvm/images/kairon-hw.qcow2"}}}}
    }))
    .unwrap();
    let pool = pools.create(&PostParams::default(), &pool).await.unwrap();
    let api: Api<Machine> = Api::namespaced(client, "default");
    let mut owned = machine("owned");
    owned.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "kairon.zyvor.dev/v1".into(),
        kind: "MachinePool".into(),
        name: "owner".into(),
        uid: pool.metadata.uid.clone().unwrap(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    api.create(&PostParams::default(), &owned).await.unwrap();
    api.create(&PostParams::default(), &machine("unowned")).await.unwrap();
    pools.delete("owner", &DeleteParams::default()).await.unwrap();
    let owned = || async {
        match api.get_opt("owned").await.unwrap() {
            None => Ok(()),
            Some(m) => Err(m.metadata),
        }
    };
    wait_for_and_report("the owned Machine to go with its owner", Duration::from_secs(10), owned, || k.logs()).await;
    assert!(api.get_opt("unowned").await.unwrap().is_some());
}

#[tokio::test]
async fn events_expire_after_the_event_ttl_and_watchers_see_them_go() {
    let flags: Vec<&str> = API_ONLY.iter().copied().chain(["--event-ttl", "3s"]).collect();
    let k = Kairon::start_with(&flags).unwrap();
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(k.client().await.unwrap(), "default");
    let event = |name: &str| -> k8s_openapi::api::events::v1::Event {
        serde_json::from_value(json!({
            "metadata": {"name": name}, "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "e2e", "reportingInstance": "e2e", "action": "Test", "reason": "Tested",
            "type": "Normal", "regarding": {"kind": "Machine", "name": "m", "namespace": "default"},
        }))
        .unwrap()
    };
    let first = events.create(&PostParams::default(), &event("first")).await.unwrap();
    let rv = first.metadata.resource_version.clone().unwrap();
    let mut w = events.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    hold(Duration::from_secs(2), "the second Event is written 2 s after the first").await;
    events.create(&PostParams::default(), &event("second")).await.unwrap();
    // The first goes about 3 s after its write, the second about 2 s later: each when due.
    type Ev = k8s_openapi::api::events::v1::Event;
    let deleted = async |w: &mut (dyn futures::Stream<Item = kube::Result<WatchEvent<Ev>>> + Unpin + Send)| loop {
        match tokio::time::timeout(Duration::from_secs(10), w.try_next()).await.expect("a watch event in time") {
            Ok(Some(WatchEvent::Deleted(e))) => return e.metadata.name.unwrap(),
            Ok(Some(WatchEvent::Added(_) | WatchEvent::Bookmark(_))) => continue,
            other => panic!("expected the expired Event to be DELETED, got {other:?}"),
        }
    };
    let started = std::time::Instant::now();
    assert_eq!(deleted(&mut w).await, "first");
    assert!(events.get_opt("second").await.unwrap().is_some(), "the second is not due yet");
    assert_eq!(deleted(&mut w).await, "second");
    assert!(started.elapsed() >= Duration::from_millis(1500), "the second went when due, not with the first");
    assert!(events.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn a_selector_watch_resumed_after_a_delete_still_hears_of_it() {
    // What a client watching `team=a` held at `rv` and what went away before it came back: the
    // resumed watch must say so, or its cache keeps those objects for good.
    let k = Kairon::start_with(API_ONLY).unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "default");
    let labelled = |name: &str| {
        let mut m = machine(name);
        m.metadata.labels = Some([("team".to_string(), "a".to_string())].into());
        m
    };
    api.create(&PostParams::default(), &labelled("deleted")).await.unwrap();
    api.create(&PostParams::default(), &labelled("relabelled")).await.unwrap();
    let kept = api.create(&PostParams::default(), &labelled("kept")).await.unwrap();
    let mut outside = machine("outside");
    outside.metadata.labels = Some([("team".to_string(), "b".to_string())].into());
    api.create(&PostParams::default(), &outside).await.unwrap();
    let rv = kept.metadata.resource_version.clone().unwrap();
    api.delete("deleted", &DeleteParams::default()).await.unwrap();
    let relabel = json!({"metadata": {"labels": {"team": "b"}}});
    api.patch("relabelled", &PatchParams::default(), &Patch::Merge(relabel)).await.unwrap();
    api.create(&PostParams::default(), &labelled("new")).await.unwrap();
    // Changes to an object that never matched are nobody's business: no DELETED for it.
    let touch = json!({"metadata": {"annotations": {"touched": "yes"}}});
    api.patch("outside", &PatchParams::default(), &Patch::Merge(&touch)).await.unwrap();
    let mut never = machine("never");
    never.metadata.labels = Some([("team".to_string(), "b".to_string())].into());
    api.create(&PostParams::default(), &never).await.unwrap();
    api.delete("never", &DeleteParams::default()).await.unwrap();

    // By name, as kube-rs's `await_condition` watches one object: the others' changes since
    // `rv` are not its, and the first event is the watched object's own.
    let mut one = api.watch(&WatchParams::default().fields("metadata.name=kept"), &rv).await.unwrap().boxed();
    api.patch("kept", &PatchParams::default(), &Patch::Merge(&touch)).await.unwrap();
    match tokio::time::timeout(Duration::from_secs(10), one.try_next()).await {
        Ok(Ok(Some(WatchEvent::Modified(m)))) => assert_eq!(m.metadata.name.as_deref(), Some("kept")),
        other => panic!("the watch of kept alone must first hear kept modified, got {other:?}"),
    }

    let mut stream = api.watch(&WatchParams::default().labels("team=a"), &rv).await.unwrap().boxed();
    let mut seen = BTreeSet::new();
    while seen.len() < 3 {
        match tokio::time::timeout(Duration::from_secs(10), stream.try_next()).await {
            Ok(Ok(Some(WatchEvent::Added(m)))) => seen.insert(format!("ADDED {}", m.metadata.name.unwrap())),
            Ok(Ok(Some(WatchEvent::Deleted(m)))) => seen.insert(format!("DELETED {}", m.metadata.name.unwrap())),
            Ok(Ok(Some(WatchEvent::Modified(m)))) => seen.insert(format!("MODIFIED {}", m.metadata.name.unwrap())),
            other => panic!("after {seen:?}: unexpected {other:?}"),
        };
    }
    assert_eq!(seen, BTreeSet::from(["ADDED new".into(), "DELETED deleted".into(), "DELETED relabelled".into()]));
    // kept was touched after the others: its MODIFIED comes next, before anything live.
    match tokio::time::timeout(Duration::from_secs(10), stream.try_next()).await {
        Ok(Ok(Some(WatchEvent::Modified(m)))) => assert_eq!(m.metadata.name.as_deref(), Some("kept")),
        other => panic!("expected kept's MODIFIED, got {other:?}"),
    }
    // Live, a change that leaves the selector is DELETED once, and one outside it is not sent.
    api.patch("kept", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"team": "c"}}})))
        .await
        .unwrap();
    api.delete("relabelled", &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &labelled("last")).await.unwrap();
    let mut live = Vec::new();
    while live.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(10), stream.try_next()).await {
            Ok(Ok(Some(WatchEvent::Added(m)))) => live.push(format!("ADDED {}", m.metadata.name.unwrap())),
            Ok(Ok(Some(WatchEvent::Deleted(m)))) => live.push(format!("DELETED {}", m.metadata.name.unwrap())),
            other => panic!("after {live:?}: unexpected {other:?}"),
        }
    }
    assert_eq!(live, ["DELETED kept", "ADDED last"], "nothing of the object outside the selector");
}

/// Reads come from the watch cache: a write followed at once by a GET and a LIST sees it, on
/// every one of 100 writes; `resourceVersion=0` answers from the cache as it is, never with a
/// version newer than the store has.
#[tokio::test]
async fn a_write_followed_at_once_by_get_and_list_sees_it() {
    let k = Kairon::start_with(API_ONLY).unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "agents");
    api.create(&PostParams::default(), &machine("m")).await.unwrap();
    for i in 0..100 {
        let name = format!("n{i}");
        api.create(&PostParams::default(), &machine(&name)).await.unwrap();
        let patch = json!({"metadata": {"labels": {"round": i.to_string()}}});
        let written = api.patch("m", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        let got = api.get("m").await.unwrap();
        assert_eq!(got.metadata.resource_version, written.metadata.resource_version, "GET after write {i}");
        let listed = api.list(&ListParams::default()).await.unwrap();
        assert_eq!(listed.items.len(), i + 2, "LIST after the create of {name}");
        let m = listed.items.iter().find(|m| m.metadata.name.as_deref() == Some("m")).unwrap();
        assert_eq!(m.metadata.resource_version, written.metadata.resource_version, "LIST after write {i}");
    }
    let rv = |m: &Machine| m.metadata.resource_version.as_deref().unwrap().parse::<u64>().unwrap();
    let latest = rv(&api.get("m").await.unwrap());
    let cached = api.get_with("m", &kube::api::GetParams::any()).await.unwrap();
    assert!(rv(&cached) <= latest, "resourceVersion=0 reads what the cache holds");
    let listed = api.list(&ListParams::default().match_any()).await.unwrap();
    assert_eq!(listed.items.len(), 101);
    assert!(listed.items.iter().all(|m| rv(m) <= latest));

    // A create reads the cache as it is and confirms only a name it finds taken: a delete
    // followed at once by a create of the same name succeeds, and a name in use is refused.
    for _ in 0..50 {
        api.delete("m", &DeleteParams::default()).await.unwrap();
        api.create(&PostParams::default(), &machine("m")).await.unwrap();
        let (code, reason, _) = api_error(api.create(&PostParams::default(), &machine("m")).await.unwrap_err());
        assert_eq!((code, reason.as_str()), (409, "AlreadyExists"));
    }
    // A patch naming the resourceVersion it read applies to that version only.
    let read = api.get("m").await.unwrap().metadata.resource_version.unwrap();
    let named = Patch::Merge(json!({"metadata": {"resourceVersion": read, "labels": {"named": "yes"}}}));
    let patched = api.patch("m", &PatchParams::default(), &named).await.unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["named"], "yes");
    let stale = api.patch("m", &PatchParams::default(), &named).await.unwrap_err();
    assert_eq!(api_error(stale).0, 409);
}
