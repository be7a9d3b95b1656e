//! Warm pools and claims under `kairon up`, with real runc: a Paused pool warms its members up
//! and pauses them, many claims racing bind each member exactly once, surplus trimming takes
//! non-warm members first, a Running pool hands out Running members, and a claim's TTL releases it.
//! Each bound claim says whether it was served warm or waited (cold), and for how long.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use kairon_e2e::{Flags, Kairon, MINUTE, during, eventually, hold, phase, wait_for_object, wait_gone, wait_phase};
use kairon_model::pool::PoolAutoscale;
use kairon_model::{ClaimPhase, LaunchType, Machine, MachineClaim, MachinePhase, MachinePool, PowerState};

fn fast() -> Flags<'static> {
    Flags::fast_activity("1s").usage_interval("1s")
}
const NS: &str = "agents";
const POOL: &str = "kairon.zyvor.dev/pool";
const CLAIM: &str = "kairon.zyvor.dev/claim";
const LAUNCH_TYPE: &str = "kairon.zyvor.dev/launch-type";

fn pool(name: &str, replicas: i32, warm: &str, warmup: i64) -> MachinePool {
    serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas, "warmPowerState": warm, "warmupSeconds": warmup,
            "template": {
                "metadata": {"labels": {"kairon.zyvor.dev/sandbox": "true", "team": "a"}},
                "spec": {"sandbox": {"templateName": "busybox"}}
            }
        }
    }))
    .unwrap()
}

fn claim(name: &str, pool: &str, ttl: Option<i64>) -> MachineClaim {
    let mut c = json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"poolName": pool}
    });
    if let Some(t) = ttl {
        c["spec"]["ttlSeconds"] = json!(t);
    }
    serde_json::from_value(c).unwrap()
}

fn claim_phase(c: &MachineClaim) -> Option<ClaimPhase> {
    c.status.as_ref().and_then(|s| s.phase)
}

async fn members(api: &Api<Machine>, pool: &str) -> Vec<Machine> {
    let lp = ListParams::default().labels(&format!("{POOL}={pool}"));
    api.list(&lp).await.map(|l| l.items).unwrap_or_default()
}

fn unclaimed(ms: &[Machine]) -> Vec<&Machine> {
    ms.iter().filter(|m| !m.labels().contains_key(CLAIM) && m.metadata.deletion_timestamp.is_none()).collect()
}

async fn wait_warm(pools: &Api<MachinePool>, name: &str, warm: i32, timeout: Duration) -> MachinePool {
    wait_for_object(pools, name, &format!("pool {name} to have {warm} warm"), timeout, |p| {
        p.status.as_ref().is_some_and(|s| s.warm == warm && s.replicas == warm)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_pool_warms_up_and_twenty_racing_claims_each_get_their_own_member() {
    let k = Kairon::start_with(&fast()).unwrap();
    let client = k.client().await.unwrap();
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    pools.create(&PostParams::default(), &pool("agents", 5, "Paused", 1)).await.unwrap();

    let p = wait_warm(&pools, "agents", 5, Duration::from_secs(120)).await;
    let s = p.status.unwrap();
    assert_eq!((s.replicas, s.ready, s.warm, s.claimed), (5, 5, 5, 0));
    let ms = members(&machines, "agents").await;
    assert_eq!(ms.len(), 5);
    for m in &ms {
        assert!(m.name_any().starts_with("agents-") && m.name_any().len() == "agents-".len() + 5, "{}", m.name_any());
        assert_eq!(phase(m), Some(MachinePhase::Paused), "{} is paused once warm", m.name_any());
        assert_eq!(m.spec.power_state, Some(PowerState::Paused));
        assert_eq!(m.labels().get("team").map(String::as_str), Some("a"), "template labels are copied");
        assert_eq!(m.owner_references().first().map(|o| o.name.as_str()), Some("agents"));
        let since = m.annotations().get("kairon.zyvor.dev/warm-since").expect("warm-since stamped");
        let since: k8s_openapi::jiff::Timestamp = since.parse().unwrap();
        let created = m.metadata.creation_timestamp.as_ref().unwrap().0;
        assert!(since >= created, "warm-up counts from the first Running, not creation");
    }
    let warm_names: BTreeSet<String> = ms.iter().map(|m| m.name_any()).collect();

    // 20 claims at once.
    let creates = (0..20).map(|i| {
        let claims = claims.clone();
        async move {
            let t = std::time::Instant::now();
            let r = claims.create(&PostParams::default(), &claim(&format!("job-{i}"), "agents", None)).await;
            (r, t.elapsed())
        }
    });
    // Each binds inside its create request: the reply says Bound with its own Machine, or
    // Pending for want of a warm member; none is left mid-way (reason Binding).
    let mut bound_in_reply = BTreeSet::new();
    for (r, round_trip) in futures::future::join_all(creates).await {
        let c = r.unwrap();
        let s = c.status.clone().expect("the create reply carries the binding's outcome");
        match s.phase {
            Some(ClaimPhase::Bound) => {
                let m = s.machine_name.clone().expect("a Bound reply names its Machine");
                assert!(warm_names.contains(&m), "{m} was one of the warm members");
                assert!(bound_in_reply.insert(m), "two replies name the same member: {c:?}");
                assert!(s.bound_time.is_some(), "{c:?}");
                // Created and bound inside this one request: its wait, counted from a creation
                // time to the millisecond, is within the request's round trip.
                let wait = s.wait_seconds.expect("a bound claim says how long it waited");
                assert!(wait <= round_trip.as_secs_f64(), "waited {wait} s in a {round_trip:?} request: {c:?}");
            }
            _ => {
                let reason = s.conditions.iter().find(|x| x.type_ == "Bound").map(|x| x.reason.as_str());
                assert_eq!(reason, Some("NoWarmMember"), "{c:?}");
            }
        }
    }
    assert!(!bound_in_reply.is_empty(), "five warm members, and no create bound one");

    // The first five warm members go to exactly five claims; the rest wait.
    let first = eventually("5 claims bound and 15 pending", Duration::from_secs(60), || async {
        let cs = claims.list(&ListParams::default()).await.ok()?.items;
        let bound: Vec<&MachineClaim> = cs.iter().filter(|c| claim_phase(c) == Some(ClaimPhase::Bound)).collect();
        let pending: Vec<&MachineClaim> = cs
            .iter()
            .filter(|c| claim_phase(c) == Some(ClaimPhase::Pending))
            .filter(|c| {
                c.status.as_ref().unwrap().conditions.iter().any(|x| {
                    x.type_ == "Bound"
                        && x.status == "False"
                        && x.reason == "NoWarmMember"
                        && x.message == "pool agents has no warm member right now; the claim binds when one is ready"
                })
            })
            .collect();
        (bound.len() == 5 && pending.len() == 15)
            .then(|| bound.iter().map(|c| c.status.as_ref().unwrap().machine_name.clone().unwrap()).collect::<Vec<_>>())
    })
    .await;
    let distinct: BTreeSet<String> = first.iter().cloned().collect();
    assert_eq!(distinct.len(), 5, "no member bound twice: {first:?}");
    assert_eq!(distinct, warm_names, "the five warm members are the ones bound");
    for name in &distinct {
        let m = machines.get(name).await.unwrap();
        let claim_name = m.labels().get(CLAIM).cloned().expect("bound member carries the claim label");
        let c = claims.get(&claim_name).await.unwrap();
        assert_eq!(c.status.as_ref().unwrap().machine_name.as_deref(), Some(name.as_str()));
        assert!(m.annotations().contains_key("kairon.zyvor.dev/lifecycle-start"));
        assert_eq!(m.spec.power_state, Some(PowerState::Running), "binding resumes the member");
    }

    // The pool refills and the rest bind, each to its own Machine.
    eventually("all 20 claims bound to 20 distinct Machines", Duration::from_secs(300), || async {
        let cs = claims.list(&ListParams::default()).await.ok()?.items;
        let names: BTreeSet<String> = cs
            .iter()
            .filter(|c| claim_phase(c) == Some(ClaimPhase::Bound))
            .filter_map(|c| c.status.as_ref()?.machine_name.clone())
            .collect();
        (names.len() == 20 && cs.len() == 20).then_some(())
    })
    .await;
    // How each was served: the claims bound to the five members warm when they arrived are
    // Warm, the fifteen that waited for a refill are Cold, in status, label and /metrics alike.
    eventually("every claim labelled with its launch type", MINUTE, || async {
        let cs = claims.list(&ListParams::default()).await.ok()?.items;
        cs.iter().all(|c| c.labels().contains_key(LAUNCH_TYPE)).then_some(())
    })
    .await;
    let (mut warm, mut cold) = (Vec::new(), Vec::new());
    for c in claims.list(&ListParams::default()).await.unwrap().items {
        let s = c.status.as_ref().unwrap();
        let machine = s.machine_name.clone().unwrap();
        let want = if distinct.contains(&machine) { LaunchType::Warm } else { LaunchType::Cold };
        assert_eq!(s.launch_type, Some(want), "{c:?}");
        assert_eq!(c.labels().get(LAUNCH_TYPE).map(String::as_str), Some(want.as_str()), "{c:?}");
        let wait = s.wait_seconds.expect("a bound claim says how long it waited");
        if want == LaunchType::Warm {
            warm.push(wait)
        } else {
            cold.push(wait)
        }
        if bound_in_reply.contains(&machine) {
            assert_eq!(want, LaunchType::Warm, "bound in its create request: {c:?}");
        }
    }
    assert_eq!((warm.len(), cold.len()), (5, 15));
    assert!(warm.iter().all(|w| *w < 5.0), "warm claims bind at once: {warm:?}");
    // A refill is created, started and warmed up (warmupSeconds 1) before it serves a claim.
    assert!(cold.iter().all(|w| *w >= 1.0), "cold claims waited for a refill: {cold:?}");
    let metrics = k.kubectl_ok(&["get", "--raw", "/metrics"]);
    for line in [
        "kairon_pool_claims_total{launch_type=\"Warm\",pool=\"agents\"} 5",
        "kairon_pool_claims_total{launch_type=\"Cold\",pool=\"agents\"} 15",
        "kairon_pool_claim_wait_seconds_count{pool=\"agents\"} 20",
        "kairon_pool_claim_wait_seconds_bucket{pool=\"agents\",le=\"+Inf\"} 20",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in /metrics:\n{metrics}");
    }

    let ms = members(&machines, "agents").await;
    let mut by_claim: BTreeSet<String> = BTreeSet::new();
    for m in ms.iter().filter(|m| m.labels().contains_key(CLAIM)) {
        assert!(by_claim.insert(m.labels()[CLAIM].clone()), "one Machine per claim");
    }
    assert_eq!(by_claim.len(), 20);
    let bound_running = eventually("bound members Running", Duration::from_secs(60), || async {
        let ms = members(&machines, "agents").await;
        let claimed: Vec<&Machine> = ms.iter().filter(|m| m.labels().contains_key(CLAIM)).collect();
        claimed.iter().all(|m| phase(m) == Some(MachinePhase::Running)).then_some(claimed.len())
    })
    .await;
    assert_eq!(bound_running, 20);
    // The pool keeps 5 unclaimed members besides the 20 claimed ones (with 2 host CPUs the node
    // offers 20 sandbox slots, so the refills wait Pending for room: counted, not yet warm).
    eventually("pool status: 20 claimed, 5 replicas", Duration::from_secs(60), || async {
        let s = pools.get("agents").await.ok()?.status?;
        (s.claimed == 20 && s.replicas == 5).then_some(())
    })
    .await;

    // Each bound claim's usage is written once an interval (1 s here), and a write that changes
    // nothing is not stored: no claim is written in a loop. (One was, ~250 times a second, when
    // the usage history kept the bind's milliseconds and status.usage could not: its repair
    // never matched, and each write woke the controller to write it again.)
    let from = claims.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    let mut events = claims.watch(&WatchParams::default(), &from).await.unwrap().boxed();
    let mut writes: BTreeMap<String, usize> = BTreeMap::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(4);
    while let Ok(Some(ev)) = tokio::time::timeout_at(until, events.next()).await {
        if let Ok(WatchEvent::Modified(c)) = ev {
            *writes.entry(c.name_any()).or_default() += 1;
        }
    }
    assert!(writes.values().all(|&n| n <= 8), "writes per claim in 4 s of 1 s usage intervals: {writes:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn scaling_down_trims_members_that_are_not_warm_first() {
    let k = Kairon::start_with(&fast()).unwrap();
    let client = k.client().await.unwrap();
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    pools.create(&PostParams::default(), &pool("trim", 2, "Paused", 1)).await.unwrap();
    wait_warm(&pools, "trim", 2, Duration::from_secs(90)).await;
    let warm: BTreeSet<String> = members(&machines, "trim").await.iter().map(|m| m.name_any()).collect();

    // Three more, scaled back down before they can be warm: the two warm ones stay.
    let patch = |n: i32| json!({"spec": {"replicas": n}});
    pools.patch("trim", &PatchParams::default(), &Patch::Merge(&patch(5))).await.unwrap();
    eventually("5 members", Duration::from_secs(30), || async {
        (unclaimed(&members(&machines, "trim").await).len() == 5).then_some(())
    })
    .await;
    pools.patch("trim", &PatchParams::default(), &Patch::Merge(&patch(2))).await.unwrap();
    let left = eventually("2 members left", Duration::from_secs(60), || async {
        let ms = members(&machines, "trim").await;
        let u: BTreeSet<String> = unclaimed(&ms).iter().map(|m| m.name_any()).collect();
        (u.len() == 2).then_some(u)
    })
    .await;
    assert_eq!(left, warm, "the warm members are kept, the booting ones trimmed");
    let p = wait_warm(&pools, "trim", 2, Duration::from_secs(60)).await;
    let s = p.status.unwrap();
    assert_eq!((s.replicas, s.ready, s.warm, s.claimed), (2, 2, 2, 0));
    assert_eq!(s.observed_generation, p.metadata.generation);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_pool_hands_out_running_members_and_a_claim_ttl_releases_it() {
    let k = Kairon::start_with(&fast()).unwrap();
    let client = k.client().await.unwrap();
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    pools.create(&PostParams::default(), &pool("web", 2, "Running", 1)).await.unwrap();
    wait_warm(&pools, "web", 2, Duration::from_secs(90)).await;
    for m in members(&machines, "web").await {
        assert_eq!(phase(&m), Some(MachinePhase::Running), "a Running pool keeps {} Running", m.name_any());
    }
    // Still Running a while later: nothing pauses them.
    hold(Duration::from_secs(2), "a Running pool's members must not be paused").await;
    for m in members(&machines, "web").await {
        assert_eq!(phase(&m), Some(MachinePhase::Running));
    }

    claims.create(&PostParams::default(), &claim("keep", "web", None)).await.unwrap();
    let c = eventually("keep bound", Duration::from_secs(30), || async {
        claims.get("keep").await.ok().filter(|c| claim_phase(c) == Some(ClaimPhase::Bound))
    })
    .await;
    let kept = c.status.as_ref().unwrap().machine_name.clone().unwrap();
    let m = machines.get(&kept).await.unwrap();
    assert_eq!(phase(&m), Some(MachinePhase::Running));
    assert_eq!(m.labels().get(CLAIM).map(String::as_str), Some("keep"));
    assert!(c.finalizers().contains(&"kairon.zyvor.dev/claim".to_string()));

    // A claim with a TTL of 2 s is released after ~2 s: deleted, Released Event, Machine gone.
    claims.create(&PostParams::default(), &claim("short", "web", Some(2))).await.unwrap();
    let c = eventually("short bound", Duration::from_secs(60), || async {
        claims.get("short").await.ok().filter(|c| claim_phase(c) == Some(ClaimPhase::Bound))
    })
    .await;
    let bound_at = std::time::Instant::now();
    let machine = c.status.as_ref().unwrap().machine_name.clone().unwrap();
    assert_ne!(machine, kept);
    wait_gone(&claims, "short", Duration::from_secs(30)).await;
    let took = bound_at.elapsed();
    assert!(took >= Duration::from_millis(1000) && took < Duration::from_secs(15), "released after {took:?}");
    wait_gone(&machines, &machine, MINUTE).await;
    let released = eventually("a Released event", Duration::from_secs(10), || async {
        events.list(&ListParams::default()).await.ok()?.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("Released")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("short")
        })
    })
    .await;
    let note = released.note.unwrap_or_default();
    assert!(note.contains(&machine) && note.contains("usage"), "{note}");
    let bound_event = events.list(&ListParams::default()).await.unwrap().items.into_iter().any(|e| {
        e.reason.as_deref() == Some("Bound") && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("keep")
    });
    assert!(bound_event, "a Bound event for keep");
    // A claim on a pool that does not exist says so.
    claims.create(&PostParams::default(), &claim("lost", "nope", None)).await.unwrap();
    eventually("lost to explain the missing pool", Duration::from_secs(30), || async {
        let c = claims.get("lost").await.ok()?;
        let s = c.status?;
        s.conditions
            .iter()
            .any(|x| x.reason == "PoolNotFound" && x.message.contains("MachinePool nope does not exist"))
            .then_some(())
    })
    .await;
    // The kept claim stays bound and the pool refills.
    assert_eq!(claim_phase(&claims.get("keep").await.unwrap()), Some(ClaimPhase::Bound));
    wait_warm(&pools, "web", 2, Duration::from_secs(60)).await;
}

/// The resourceVersion of an object (one sequence over every resource, so versions of a pool
/// and of its members order their writes).
fn rv_of<K: kube::Resource>(o: &K) -> u64 {
    o.meta().resource_version.as_deref().and_then(|v| v.parse().ok()).expect("a numeric resourceVersion")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deleted_pool_deletes_its_members_itself_before_it_goes() {
    let k = Kairon::start_with(&fast()).unwrap();
    let client = k.client().await.unwrap();
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    pools.create(&PostParams::default(), &pool("gone", 2, "Running", 1)).await.unwrap();
    wait_warm(&pools, "gone", 2, Duration::from_secs(90)).await;
    claims.create(&PostParams::default(), &claim("holder", "gone", None)).await.unwrap();
    eventually("holder bound", Duration::from_secs(60), || async {
        claims.get("holder").await.ok().filter(|c| claim_phase(c) == Some(ClaimPhase::Bound))
    })
    .await;
    // Two unclaimed members again, and one claimed.
    eventually("2 warm and 1 claimed", Duration::from_secs(90), || async {
        let s = pools.get("gone").await.ok()?.status?;
        (s.warm == 2 && s.replicas == 2 && s.claimed == 1).then_some(())
    })
    .await;
    let p = pools.get("gone").await.unwrap();
    assert!(p.finalizers().contains(&"kairon.zyvor.dev/pool".to_string()), "{:?}", p.finalizers());
    let names: BTreeSet<String> = members(&machines, "gone").await.iter().map(|m| m.name_any()).collect();
    assert_eq!(names.len(), 3, "{names:?}");

    let rv = machines.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    let mut machine_watch = machines.watch(&kube::api::WatchParams::default(), &rv).await.unwrap().boxed();
    let mut pool_watch = pools.watch(&kube::api::WatchParams::default(), &rv).await.unwrap().boxed();
    pools.delete("gone", &kube::api::DeleteParams::default()).await.unwrap();

    // The last revision of the pool before it went.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let pool_last = loop {
        let ev = tokio::time::timeout_at(deadline, pool_watch.next()).await.expect("the pool to go").unwrap().unwrap();
        if let kube::api::WatchEvent::Deleted(p) = ev
            && p.name_any() == "gone"
        {
            break rv_of(&p);
        }
    };
    // Each member started deleting (or went) at a revision before that: the pool's finalizer
    // deleted it while the pool still existed, not garbage collection after it had gone.
    let mut marked: std::collections::BTreeMap<String, u64> = Default::default();
    while marked.len() < names.len() {
        let ev = tokio::time::timeout_at(deadline, machine_watch.next())
            .await
            .unwrap_or_else(|_| panic!("every member to be deleted; saw {marked:?} of {names:?}"))
            .unwrap()
            .unwrap();
        let m = match ev {
            kube::api::WatchEvent::Modified(m) if m.metadata.deletion_timestamp.is_some() => m,
            kube::api::WatchEvent::Deleted(m) => m,
            _ => continue,
        };
        if names.contains(&m.name_any()) {
            marked.entry(m.name_any()).or_insert(rv_of(&m));
        }
    }
    for (name, rv) in &marked {
        assert!(*rv <= pool_last, "{name} started deleting at {rv}, after the pool went at {pool_last}");
    }
    eventually("every member gone", Duration::from_secs(120), || async {
        members(&machines, "gone").await.is_empty().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_pool_resumes_paused_members_unless_its_template_asks_for_paused() {
    let k = Kairon::start_with(&fast()).unwrap();
    let client = k.client().await.unwrap();
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);

    // A member of a Running pool paused by hand is resumed by the pool.
    pools.create(&PostParams::default(), &pool("run", 1, "Running", 1)).await.unwrap();
    wait_warm(&pools, "run", 1, Duration::from_secs(90)).await;
    let name = members(&machines, "run").await[0].name_any();
    let pause = json!({"spec": {"powerState": "Paused"}});
    machines.patch(&name, &PatchParams::default(), &Patch::Merge(&pause)).await.unwrap();
    eventually("the pool to resume its paused member", Duration::from_secs(60), || async {
        let m = machines.get(&name).await.ok()?;
        (m.spec.power_state == Some(PowerState::Running) && phase(&m) == Some(MachinePhase::Running)).then_some(())
    })
    .await;

    // A Running pool whose template asks for Paused leaves its members Paused, counts them warm,
    // and a claim takes one and resumes it.
    let mut p = pool("still", 2, "Running", 1);
    p.spec.template.spec.power_state = Some(PowerState::Paused);
    pools.create(&PostParams::default(), &p).await.unwrap();
    wait_warm(&pools, "still", 2, Duration::from_secs(90)).await;
    hold(Duration::from_secs(2), "members a template asks Paused must not be resumed").await;
    for m in members(&machines, "still").await {
        assert_eq!(phase(&m), Some(MachinePhase::Paused), "{} stays Paused", m.name_any());
        assert_eq!(m.spec.power_state, Some(PowerState::Paused), "{} is not resumed", m.name_any());
    }
    claims.create(&PostParams::default(), &claim("take", "still", None)).await.unwrap();
    let c = eventually("take bound", Duration::from_secs(60), || async {
        claims.get("take").await.ok().filter(|c| claim_phase(c) == Some(ClaimPhase::Bound))
    })
    .await;
    let taken = c.status.unwrap().machine_name.unwrap();
    wait_phase(&machines, &taken, MachinePhase::Running, MINUTE).await;
}

/// A pool whose members' template carries an idle timeout and action (wake-on-connect off).
fn idle_pool(name: &str, warm: &str, action: &str, idle_seconds: i64) -> MachinePool {
    let mut p = pool(name, 1, warm, 1);
    p.spec.template.spec.lifecycle = Some(
        serde_json::from_value(json!({
            "idleTimeoutSeconds": idle_seconds, "idleAction": action, "wakeOnConnect": false
        }))
        .unwrap(),
    );
    p
}

fn annotation_time(m: &Machine, key: &str) -> Option<k8s_openapi::jiff::Timestamp> {
    m.annotations().get(key)?.rsplit(' ').next()?.parse().ok()
}

/// Warm members (Running or Paused pools) are exempt from idle actions however long they sit,
/// and a claimed member's idle time counts from its claim, not from how long it was warm: with
/// each idle action a runc sandbox has, it stays awake for the whole timeout after the claim and
/// only then is suspended (or deleted).
#[tokio::test(flavor = "multi_thread")]
async fn warm_members_never_idle_and_a_claimed_member_idles_only_from_its_claim() {
    const IDLE: i64 = 4;
    const IDLE_SUSPENDED: &str = "kairon.zyvor.dev/idle-suspended";
    const LIFECYCLE_START: &str = "kairon.zyvor.dev/lifecycle-start";
    let k = Kairon::start_with(&fast().min_idle_timeout_seconds("1")).unwrap();
    let client = k.client().await.unwrap();
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let cases: Vec<(String, PowerState, &str)> = [PowerState::Running, PowerState::Paused]
        .into_iter()
        .flat_map(|warm| {
            ["Pause", "Stop", "Delete"]
                .into_iter()
                .map(move |action| (format!("idle-{}-{}", warm.as_str(), action).to_lowercase(), warm, action))
        })
        .collect();
    for (name, warm, action) in &cases {
        pools.create(&PostParams::default(), &idle_pool(name, warm.as_str(), action, IDLE)).await.unwrap();
    }
    for (name, _, _) in &cases {
        wait_warm(&pools, name, 1, Duration::from_secs(120)).await;
    }

    // Warm for twice the idle timeout: no member is suspended, and a Running pool's members do
    // not flip between the lifecycle controller (Pause) and the pool (Running).
    let mut window = during(Duration::from_secs(2 * IDLE as u64), Duration::from_millis(200));
    while window.tick().await {
        for (name, warm, _) in &cases {
            for m in unclaimed(&members(&machines, name).await) {
                assert!(!m.annotations().contains_key(IDLE_SUSPENDED), "warm {} was idle-suspended", m.name_any());
                assert_eq!(m.spec.desired_power_state(), *warm, "warm {} keeps its pool's power state", m.name_any());
            }
        }
    }
    let idle_events = events.list(&ListParams::default()).await.unwrap().items;
    assert!(
        !idle_events.iter().any(|e| e.reason.as_deref() == Some("IdleSuspended")),
        "no idle action on a warm member: {:?}",
        idle_events.iter().map(|e| (&e.reason, &e.note)).collect::<Vec<_>>()
    );

    // Each claim binds in its create request (else later, by the controller): its member's
    // idleness counts from the moment it was seen bound, at the latest. Right after its claim,
    // each member is awake and not suspended, however long it sat warm.
    let mut bound = Vec::new();
    for (name, warm, action) in &cases {
        let reply = claims.create(&PostParams::default(), &claim(name, name, None)).await.unwrap();
        let (seen_at, c) = if claim_phase(&reply) == Some(ClaimPhase::Bound) {
            (tokio::time::Instant::now(), reply)
        } else {
            let c = eventually(&format!("claim {name} bound"), Duration::from_secs(60), || async {
                claims.get(name).await.ok().filter(|c| claim_phase(c) == Some(ClaimPhase::Bound))
            })
            .await;
            (tokio::time::Instant::now(), c)
        };
        let member = c.status.unwrap().machine_name.unwrap();
        let m = machines.get(&member).await.unwrap();
        assert!(
            !m.annotations().contains_key(IDLE_SUSPENDED),
            "{member} ({warm}) suspended at its claim: {:?}",
            m.annotations()
        );
        assert_eq!(m.spec.power_state, Some(PowerState::Running), "{member} ({warm}) is resumed by its claim");
        bound.push((seen_at, member, *warm, *action));
    }
    for (bound_at, member, warm, action) in &bound {
        let what = format!("{member} ({warm} pool) to be {action} once idle since its claim");
        if *action == "Delete" {
            eventually(&what, Duration::from_secs(60), || async {
                matches!(machines.get_opt(member).await, Ok(None)).then_some(())
            })
            .await;
            let after = bound_at.elapsed();
            // The deadline is lifecycle-start + IDLE; the claim was seen bound just after it.
            assert!(
                after >= Duration::from_millis(IDLE as u64 * 1000 - 1500),
                "{member} deleted {after:?} after its claim"
            );
        } else {
            let m = eventually(&what, Duration::from_secs(60), || async {
                machines.get(member).await.ok().filter(|m| m.annotations().contains_key(IDLE_SUSPENDED))
            })
            .await;
            let started = annotation_time(&m, LIFECYCLE_START).expect("lifecycle-start stamped at the claim");
            let suspended = annotation_time(&m, IDLE_SUSPENDED).expect("idle-suspended says when");
            let idle_for = suspended.duration_since(started);
            assert!(
                idle_for >= k8s_openapi::jiff::SignedDuration::from_secs(IDLE),
                "{member}: suspended {idle_for} after its claim, before its idle timeout of {IDLE}s"
            );
            assert!(m.annotations()[IDLE_SUSPENDED].starts_with(action), "{:?}", m.annotations()[IDLE_SUSPENDED]);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_autoscaled_pool_grows_with_a_burst_within_its_bounds_and_shrinks_when_idle() {
    let k = Kairon::start_with(&fast()).unwrap();
    let client = k.client().await.unwrap();
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let mut auto = pool("auto", 1, "Running", 1);
    auto.spec.autoscale = Some(PoolAutoscale {
        min_replicas: 1,
        max_replicas: 4,
        target_hit_rate: 0.95,
        window_seconds: 20,
        scale_down_delay_seconds: 5,
    });
    pools.create(&PostParams::default(), &auto).await.unwrap();
    wait_warm(&pools, "auto", 1, Duration::from_secs(90)).await;
    let quiet = pools.get("auto").await.unwrap();
    assert_eq!(quiet.spec.replicas, 1, "no claims: the minimum");
    assert!(quiet.status.as_ref().unwrap().hit_rate.is_none(), "no hit rate before any claim");

    // A burst of 8 claims: the pool grows at once, never beyond maxReplicas.
    for i in 0..8 {
        claims.create(&PostParams::default(), &claim(&format!("burst-{i}"), "auto", None)).await.unwrap();
    }
    let largest = std::sync::atomic::AtomicI32::new(0);
    eventually("all 8 claims bound", Duration::from_secs(120), || async {
        largest.fetch_max(pools.get("auto").await.ok()?.spec.replicas, std::sync::atomic::Ordering::Relaxed);
        let cs = claims.list(&ListParams::default()).await.ok()?.items;
        (cs.iter().filter(|c| claim_phase(c) == Some(ClaimPhase::Bound)).count() == 8).then_some(())
    })
    .await;
    let largest = largest.into_inner();
    assert!((2..=4).contains(&largest), "the burst grew the pool within its bounds: {largest}");
    let scaled = |direction: &'static str| {
        let events = events.clone();
        async move {
            let evs = events.list(&ListParams::default()).await.ok()?.items;
            evs.into_iter()
                .filter(|e| e.reason.as_deref() == Some("Scaled"))
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("auto"))
                .find(|e| e.note.as_deref().is_some_and(|n| n.starts_with(direction)))
        }
    };
    let up = eventually("a Scaled event saying why the pool grew", MINUTE, || scaled("scaled up to")).await;
    let note = up.note.unwrap();
    assert!(note.contains("claims/min") && note.contains("target 0.95"), "{note}");
    // One member was warm for eight claims: the pool says its claims are not served warm enough.
    let p = eventually("the hit rate reported", MINUTE, || async {
        let p = pools.get("auto").await.ok()?;
        p.status.as_ref()?.conditions.iter().any(|c| c.type_ == "WarmHitRate").then_some(p)
    })
    .await;
    let s = p.status.unwrap();
    assert!(s.hit_rate.is_some_and(|r| r < 0.95), "{:?}", s.hit_rate);
    let c = s.conditions.iter().find(|c| c.type_ == "WarmHitRate").unwrap();
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "BelowTarget"), "{c:?}");

    // Released, and no claim for the window and the delay: back to the minimum, trimmed.
    for i in 0..8 {
        claims.delete(&format!("burst-{i}"), &Default::default()).await.unwrap();
    }
    eventually("the idle pool back at one member", Duration::from_secs(90), || async {
        let p = pools.get("auto").await.ok()?;
        let ms = members(&machines, "auto").await;
        (p.spec.replicas == 1 && unclaimed(&ms).len() == 1).then_some(())
    })
    .await;
    let down = eventually("a Scaled event saying why it shrank", MINUTE, || scaled("scaled down to 1")).await;
    assert!(down.note.unwrap().contains("0.0 claims/min"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_autoscaled_pool_never_asks_for_more_members_than_the_nodes_have_room_for() {
    let k = Kairon::start_with(&fast().with(&["--node-max-machines", "3"])).unwrap();
    let client = k.client().await.unwrap();
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let mut big = pool("big", 1, "Running", 1);
    big.spec.autoscale = Some(PoolAutoscale {
        min_replicas: 5,
        max_replicas: 10,
        target_hit_rate: 0.95,
        window_seconds: 60,
        scale_down_delay_seconds: 60,
    });
    pools.create(&PostParams::default(), &big).await.unwrap();
    // Its minimum is 5, but the one node holds 3 Machines.
    let capped = eventually("a Scaled event saying the nodes are full", MINUTE, || async {
        let evs = events.list(&ListParams::default()).await.ok()?.items;
        evs.into_iter().find(|e| {
            e.reason.as_deref() == Some("Scaled") && e.note.as_deref().is_some_and(|n| n.contains("room for no more"))
        })
    })
    .await;
    assert!(capped.note.as_deref().unwrap().starts_with("scaled up to 3 replicas from 1"), "{:?}", capped.note);
    wait_warm(&pools, "big", 3, Duration::from_secs(90)).await;
    let mut window = during(Duration::from_secs(3), Duration::from_millis(250));
    while window.tick().await {
        assert_eq!(pools.get("big").await.unwrap().spec.replicas, 3, "never beyond the node's room");
    }
}

/// Two `kairon controller`s (`kairon up --no-controllers`) under 30 racing claims: the leader is
/// killed (-9) just as the claims arrive, while the pool must refill for most of them; the
/// other takes the Lease within its duration (plus one look of the stand-by), and every claim
/// ends bound to a Machine of its own: no member bound twice across the hand-over.
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_leader_is_replaced_under_thirty_racing_claims_and_no_claim_binds_twice() {
    let k = Kairon::start_with(&fast().with(&["--no-controllers"])).unwrap();
    let client = k.client().await.unwrap();
    let kubeconfig = k.kubeconfig.to_string_lossy().to_string();
    let lease = Duration::from_secs(6);
    let start = |id: &'static str| {
        kairon_e2e::Process::start(
            &["controller", "--kubeconfig", &kubeconfig, "--identity", id, "--test-lease-duration", "6s"],
            "is up",
        )
        .unwrap()
    };
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(client.clone(), "kairon-system");
    let holder =
        || async { leases.get_opt("kairon-controller").await.ok().flatten().and_then(|l| l.spec?.holder_identity) };
    let mut first = start("first");
    eventually("first to lead", MINUTE, || async { (holder().await? == "first").then_some(()) }).await;
    let _second = start("second");
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    pools.create(&PostParams::default(), &pool("race", 5, "Paused", 1)).await.unwrap();
    wait_warm(&pools, "race", 5, Duration::from_secs(120)).await;

    let creates = (0..30).map(|i| {
        let claims = claims.clone();
        async move { claims.create(&PostParams::default(), &claim(&format!("race-{i}"), "race", None)).await }
    });
    for r in futures::future::join_all(creates).await {
        r.unwrap();
    }
    first.kill9();
    let killed = std::time::Instant::now();
    eventually("second to lead", MINUTE, || async { (holder().await? == "second").then_some(()) }).await;
    let took = killed.elapsed();
    eprintln!("the stand-by led {took:?} after the leader's kill -9 (lease {lease:?})");
    // The Lease runs out at most its duration after the last renewal, and the stand-by looks
    // every 2 s.
    assert!(took <= lease + Duration::from_secs(3), "took over after {took:?}");

    let bound = eventually("all 30 claims bound", Duration::from_secs(300), || async {
        let cs = claims.list(&ListParams::default()).await.ok()?.items;
        let bound: Vec<(String, String)> = cs
            .iter()
            .filter(|c| claim_phase(c) == Some(ClaimPhase::Bound))
            .filter_map(|c| Some((c.name_any(), c.status.as_ref()?.machine_name.clone()?)))
            .collect();
        (bound.len() == 30).then_some(bound)
    })
    .await;
    let distinct: BTreeSet<&String> = bound.iter().map(|(_, m)| m).collect();
    assert_eq!(distinct.len(), 30, "each claim has a Machine of its own: {bound:?}");
    // And each of those Machines names its one claim.
    let ms = members(&machines, "race").await;
    let labelled: BTreeMap<String, String> =
        ms.iter().filter_map(|m| Some((m.name_any(), m.labels().get(CLAIM)?.clone()))).collect();
    for (claim, machine) in &bound {
        assert_eq!(labelled.get(machine), Some(claim), "{machine} carries the claim label of {claim}");
    }
    assert_eq!(labelled.len(), 30, "no member carries a claim label it was not bound by: {labelled:?}");
}
