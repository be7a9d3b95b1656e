//! Claim usage under `kairon up` with real runc: a bound claim accrues active time while its
//! sandbox runs and suspended time while it is paused; the counters show on /metrics; the
//! usage history in PostgreSQL sums to `status.usage`, and still does, without gaps or
//! overlaps, after kairon restarts.
//!
//! The claim is bound by hand (status patched to Bound), so this does not depend on the claims
//! controller.

use std::process::Command;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use kairon_e2e::{
    Flags, Kairon, MINUTE, database_url, eventually, hold, psql_query, wait_for, wait_for_and_report, wait_gone,
    wait_phase,
};
use kairon_model::{ClaimPhase, ClaimUsage, Machine, MachineClaim, MachinePhase};

fn fast() -> Flags<'static> {
    Flags::fast().usage_interval("1s")
}
const NS: &str = "agents";

fn usage(c: &MachineClaim) -> ClaimUsage {
    c.status.as_ref().and_then(|s| s.usage.clone()).unwrap_or_default()
}

fn secs(t: &Time) -> i64 {
    t.0.as_second()
}

async fn usage_where(k: &Kairon, api: &Api<MachineClaim>, what: &str, ok: impl Fn(&ClaimUsage) -> bool) -> ClaimUsage {
    let usage_log = || {
        let log: Vec<String> =
            k.logs().lines().filter(|l| l.contains("usage") || l.contains("claim")).map(String::from).collect();
        format!("log:\n{}", log.join("\n"))
    };
    let check = || async {
        let c = api.get("job").await.ok();
        c.as_ref().map(usage).filter(&ok).ok_or_else(|| c.and_then(|c| c.status))
    };
    wait_for_and_report(what, MINUTE, check, usage_log).await
}

fn with_database(db: &str) -> String {
    let url = database_url();
    let (base, query) = url.split_once('?').map(|(b, q)| (b.to_string(), Some(q.to_string()))).unwrap_or((url, None));
    let base = base.rsplit_once('/').map(|(b, _)| b.to_string()).unwrap_or(base);
    match query {
        Some(q) => format!("{base}/{db}?{q}"),
        None => format!("{base}/{db}"),
    }
}

fn psql(url: &str, sql: &str) -> String {
    psql_query(url, sql).unwrap_or_else(|e| panic!("{e:#}"))
}

/// The harness keeps its database name to itself: find the e2e database that holds this claim.
fn database_of(claim_uid: &str) -> String {
    let dbs = psql(&database_url(), "SELECT datname FROM pg_database WHERE datname LIKE 'kairon_e2e_%'");
    dbs.lines()
        .map(with_database)
        .find(|url| {
            psql_query(url, &format!("SELECT 1 FROM objects WHERE uid = '{claim_uid}'")).is_ok_and(|o| o == "1")
        })
        .expect("the test's database")
}

/// One history row: (start, end, state, active, suspended) with times as Unix seconds.
type Row = (i64, i64, String, i64, i64, f64, f64);

fn history(db: &str, claim_uid: &str) -> Vec<Row> {
    let out = psql(
        db,
        &format!(
            "SELECT extract(epoch FROM interval_start)::bigint, extract(epoch FROM interval_end)::bigint, state, \
             active_seconds, suspended_seconds, vcpu_seconds, memory_gib_seconds \
             FROM claim_usage_intervals WHERE claim_uid = '{claim_uid}' ORDER BY interval_start"
        ),
    );
    out.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].to_string(),
                f[3].parse().unwrap(),
                f[4].parse().unwrap(),
                f[5].parse().unwrap(),
                f[6].parse().unwrap(),
            )
        })
        .collect()
}

/// The history up to `status.usage.lastAccrualTime` is contiguous from `boundTime` (no gap, no
/// overlap: each interval counted once) and sums exactly to `status.usage`.
fn assert_history_matches(db: &str, claim: &MachineClaim) {
    let uid = claim.uid().unwrap();
    let st = claim.status.as_ref().unwrap();
    let u = usage(claim);
    let until = secs(u.last_accrual_time.as_ref().unwrap());
    let rows: Vec<Row> = history(db, &uid).into_iter().filter(|r| r.1 <= until).collect();
    assert!(!rows.is_empty());
    let mut at = secs(st.bound_time.as_ref().unwrap());
    for r in &rows {
        assert_eq!(r.0, at, "intervals are contiguous: {rows:?}");
        assert!(r.1 > r.0);
        at = r.1;
    }
    assert_eq!(at, until, "the history ends where status.usage is accrued to");
    assert_eq!(rows.iter().map(|r| r.3).sum::<i64>(), u.active_seconds, "{rows:?}");
    assert_eq!(rows.iter().map(|r| r.4).sum::<i64>(), u.suspended_seconds, "{rows:?}");
    assert!((rows.iter().map(|r| r.5).sum::<f64>() - u.vcpu_seconds).abs() < 1e-6);
    assert!((rows.iter().map(|r| r.6).sum::<f64>() - u.memory_gib_seconds).abs() < 1e-6);
}

/// GET /metrics as an operator would: the admin bearer token, the CA `kairon up` wrote.
fn metric(k: &Kairon, line_prefix: &str) -> f64 {
    let out = Command::new("curl")
        .args(["-sSf", "--cacert"])
        .arg(k.data_dir.path().join("tls/ca.crt"))
        .args(["-H", &format!("Authorization: Bearer {}", k.admin_token), &format!("{}/metrics", k.url)])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix(line_prefix).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no {line_prefix} in /metrics:\n{text}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bound_claim_accrues_active_then_suspended_time_exactly_once_across_a_restart() {
    let k = Kairon::start_with(&fast()).unwrap();
    let client = k.client().await.unwrap();
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);

    let m: Machine = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
        "metadata": {"name": "sb", "labels": {"kairon.zyvor.dev/sandbox": "true"}},
        "spec": {"sandbox": {"templateName": "busybox"}}
    }))
    .unwrap();
    machines.create(&PostParams::default(), &m).await.unwrap();
    wait_phase(&machines, "sb", MachinePhase::Running, MINUTE).await;

    let c: MachineClaim = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim",
        "metadata": {"name": "job"}, "spec": {"poolName": "by-hand"}
    }))
    .unwrap();
    let c = claims.create(&PostParams::default(), &c).await.unwrap();
    let uid = c.uid().unwrap();
    // With no pool behind it, the claims controller (when it runs) marks the claim Pending: let
    // it settle first, so it does not overwrite the binding this test writes by hand.
    wait_for("the claims controller to give the claim a phase", MINUTE, || async {
        let c = claims.get("job").await.ok();
        c.as_ref().and_then(|c| c.status.as_ref()?.phase).map(drop).ok_or_else(|| c.and_then(|c| c.status))
    })
    .await;
    let bound = k8s_openapi::jiff::Timestamp::now();
    let bound = k8s_openapi::jiff::Timestamp::from_second(bound.as_second()).unwrap();
    let status = json!({"status": {"phase": "Bound", "machineName": "sb", "boundTime": Time(bound)}});
    // Bind by hand; write it again should a claims controller's stale Pending land after it.
    for _ in 0..5 {
        claims.patch_status("job", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
        hold(Duration::from_secs(1), "a stale Pending from the claims controller would land within it").await;
        let phase = claims.get("job").await.unwrap().status.and_then(|s| s.phase);
        if phase == Some(kairon_model::ClaimPhase::Bound) {
            break;
        }
    }

    // Running: active time grows, 1 vCPU and 0.5 GiB per second (a template sandbox).
    let u = usage_where(&k, &claims, "5 active seconds", |u| u.active_seconds >= 5).await;
    assert_eq!(u.suspended_seconds, 0, "{u:?}");
    assert_eq!(u.vcpu_seconds, u.active_seconds as f64);
    assert_eq!(u.memory_gib_seconds, u.active_seconds as f64 * 0.5);

    // Paused: suspended time grows instead, and active time stops.
    let pause = json!({"spec": {"powerState": "Paused"}});
    machines.patch("sb", &PatchParams::default(), &Patch::Merge(&pause)).await.unwrap();
    wait_phase(&machines, "sb", MachinePhase::Paused, MINUTE).await;
    let paused_at = k8s_openapi::jiff::Timestamp::now().as_second();
    let u = usage_where(&k, &claims, "5 suspended seconds", |u| u.suspended_seconds >= 5).await;
    let active_when_paused = u.active_seconds;
    let u =
        usage_where(&k, &claims, "3 more suspended seconds", |v| v.suspended_seconds >= u.suspended_seconds + 3).await;
    assert_eq!(u.active_seconds, active_when_paused, "no active time while Paused");

    // The totals follow the timeline within an interval (plus the moments spent Pausing).
    let last = secs(u.last_accrual_time.as_ref().unwrap());
    let expect_active = paused_at - bound.as_second();
    assert!((u.active_seconds - expect_active).abs() <= 4, "active {} vs {expect_active} s Running", u.active_seconds);
    let expect_suspended = last - paused_at;
    assert!(
        (u.suspended_seconds - expect_suspended).abs() <= 4,
        "suspended {} vs {expect_suspended} s Paused",
        u.suspended_seconds
    );
    assert!(u.active_seconds + u.suspended_seconds <= last - bound.as_second());

    // /metrics shows the counters (read after the status, so they are at least as far along).
    let claim = claims.get("job").await.unwrap();
    let u = usage(&claim);
    let active = metric(&k, "kairon_claim_usage_seconds_total{namespace=\"agents\",state=\"active\"}");
    let suspended = metric(&k, "kairon_claim_usage_seconds_total{namespace=\"agents\",state=\"suspended\"}");
    let vcpu = metric(&k, "kairon_claim_usage_vcpu_seconds_total{namespace=\"agents\"}");
    let mem = metric(&k, "kairon_claim_usage_memory_gib_seconds_total{namespace=\"agents\"}");
    assert_eq!(active, u.active_seconds as f64, "nothing active since the pause");
    assert!(suspended >= u.suspended_seconds as f64, "{suspended} vs {u:?}");
    assert_eq!(vcpu, u.vcpu_seconds);
    assert_eq!(mem, u.memory_gib_seconds);

    // The history in PostgreSQL sums to status.usage, interval by interval.
    let db = database_of(&uid);
    assert_history_matches(&db, &claim);

    // Restart: the downtime is accrued once (Paused, so as suspended time), nothing is lost or
    // counted twice, and the history still sums to status.usage.
    let before = u.clone();
    let k = k.restart().unwrap();
    let client = k.client().await.unwrap();
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    let before_last = secs(before.last_accrual_time.as_ref().unwrap());
    let after = usage_where(&k, &claims, "accrual to continue after the restart", |u| {
        u.last_accrual_time.as_ref().is_some_and(|t| secs(t) >= before_last + 5)
    })
    .await;
    assert!(after.active_seconds >= before.active_seconds, "{after:?} vs {before:?}");
    assert!(after.suspended_seconds >= before.suspended_seconds, "{after:?} vs {before:?}");
    let claim = claims.get("job").await.unwrap();
    assert_history_matches(&db, &claim);
    let u = usage(&claim);
    let none: i64 = history(&db, &uid)
        .iter()
        .filter(|r| r.2 == "none" && r.1 <= secs(u.last_accrual_time.as_ref().unwrap()))
        .map(|r| r.1 - r.0)
        .sum();
    assert_eq!(
        u.active_seconds + u.suspended_seconds + none,
        secs(u.last_accrual_time.as_ref().unwrap()) - bound.as_second(),
        "every second since binding is accounted exactly once"
    );
}

// ---------------------------------------------------------------------------------------
// SIGKILL mid-accrual: controllers as separate processes (`kairon controller`), killed with
// kill -9 inside the window between the history insert and the status write, and again at an
// arbitrary instant; and `kairon up` itself killed the same way.

/// A Running pool of one busybox sandbox, so a claim binds at once to a Running Machine.
fn running_pool() -> kairon_model::MachinePool {
    serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool",
        "metadata": {"name": "p"},
        "spec": {"replicas": 1, "warmPowerState": "Running", "warmupSeconds": 1,
                 "template": {"metadata": {"labels": {"kairon.zyvor.dev/sandbox": "true"}},
                              "spec": {"sandbox": {"templateName": "busybox"}}}}
    }))
    .unwrap()
}

/// Creates the pool and the claim `job` and waits until it is Bound; returns it.
async fn bind_claim(client: &kube::Client) -> MachineClaim {
    let pools: Api<kairon_model::MachinePool> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    pools.create(&PostParams::default(), &running_pool()).await.unwrap();
    let c: MachineClaim = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim",
        "metadata": {"name": "job"}, "spec": {"poolName": "p"}
    }))
    .unwrap();
    claims.create(&PostParams::default(), &c).await.unwrap();
    eventually("the claim to bind", Duration::from_secs(120), || async {
        claims.get("job").await.ok().filter(|c| c.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound))
    })
    .await
}

/// The end of the last interval in the history (Unix seconds), if any.
fn history_end(db: &str, uid: &str) -> Option<i64> {
    history(db, uid).iter().map(|r| r.1).max()
}

/// Where status.usage is accrued to (Unix seconds), if anywhere.
fn status_end(c: &MachineClaim) -> Option<i64> {
    c.status.as_ref()?.usage.as_ref()?.last_accrual_time.as_ref().map(secs)
}

/// Waits until the history holds an interval that status.usage does not: the controller is
/// inside the window between the two writes (held there by the test-only flag).
async fn wait_history_ahead(db: &str, claims: &Api<MachineClaim>, uid: &str) -> i64 {
    eventually("a history row the status does not have yet", Duration::from_secs(60), || async {
        let c = claims.get("job").await.ok()?;
        let h = history_end(db, uid)?;
        (status_end(&c).is_none_or(|s| s < h)).then_some(h)
    })
    .await
}

/// Every second since binding is accounted exactly once (active, suspended or none).
fn assert_every_second_once(db: &str, c: &MachineClaim) {
    let u = usage(c);
    let last = secs(u.last_accrual_time.as_ref().unwrap());
    let bound = secs(c.status.as_ref().unwrap().bound_time.as_ref().unwrap());
    let none: i64 =
        history(db, &c.uid().unwrap()).iter().filter(|r| r.2 == "none" && r.1 <= last).map(|r| r.1 - r.0).sum();
    assert_eq!(u.active_seconds + u.suspended_seconds + none, last - bound, "every second once: {u:?}");
}

fn controller(k: &Kairon, db: &str, identity: &str, hold: bool) -> kairon_e2e::Process {
    let kubeconfig = k.kubeconfig.to_string_lossy().to_string();
    let mut args = vec![
        "controller",
        "--kubeconfig",
        &kubeconfig,
        "--database-url",
        db,
        "--identity",
        identity,
        "--test-usage-interval",
        "1s",
        "--test-lease-duration",
        "2s",
    ];
    if hold {
        args.extend(["--test-hold-after-usage-record", "600s"]);
    }
    kairon_e2e::Process::start(&args, "is up").unwrap()
}

async fn wait_accrued_past(claims: &Api<MachineClaim>, what: &str, past: i64) -> MachineClaim {
    eventually(what, Duration::from_secs(90), || async {
        claims.get("job").await.ok().filter(|c| status_end(c).is_some_and(|e| e >= past))
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn controllers_killed_mid_accrual_neither_lose_nor_double_count_and_release_carries_the_final_usage() {
    let k = Kairon::start_with(&Flags::fast().with(&["--no-controllers"])).unwrap();
    let db = k.database_url().unwrap().to_string();
    let client = k.client().await.unwrap();
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);

    // The first controller records an interval and is held before writing the status.
    let mut first = controller(&k, &db, "first", true);
    let c = bind_claim(&client).await;
    let uid = c.uid().unwrap();
    let bound = secs(c.status.as_ref().unwrap().bound_time.as_ref().unwrap());
    let machine = c.status.as_ref().unwrap().machine_name.clone().unwrap();
    let ahead = wait_history_ahead(&db, &claims, &uid).await;
    first.kill9();
    // Killed inside the window: the interval is in the history, not in the status.
    let c = claims.get("job").await.unwrap();
    assert!(status_end(&c).is_none_or(|s| s < ahead), "killed between the writes: {:?}", c.status);
    assert_eq!(history_end(&db, &uid), Some(ahead));

    // A second controller takes over (once the Lease runs out) and repairs the status from the
    // history, then goes on accruing.
    let mut second = controller(&k, &db, "second", false);
    let c = wait_accrued_past(&claims, "the second controller to accrue", ahead + 3).await;
    assert_history_matches(&db, &c);
    let u = usage(&c);
    assert_eq!(u.suspended_seconds, 0, "Running all along: {u:?}");

    // Pause the Machine, let suspended time accrue, then kill the second controller at an
    // arbitrary instant.
    let pause = json!({"spec": {"powerState": "Paused"}});
    machines.patch(&machine, &PatchParams::default(), &Patch::Merge(&pause)).await.unwrap();
    wait_phase(&machines, &machine, MachinePhase::Paused, MINUTE).await;
    let paused_at = k8s_openapi::jiff::Timestamp::now().as_second();
    usage_where(&k, &claims, "3 suspended seconds", |u| u.suspended_seconds >= 3).await;
    let jitter = u64::from(k8s_openapi::jiff::Timestamp::now().subsec_nanosecond().unsigned_abs() % 1000);
    hold(Duration::from_millis(jitter), "the kill lands at an arbitrary instant of the accrual").await;
    second.kill9();
    let killed_at = k8s_openapi::jiff::Timestamp::now().as_second();

    // A third takes over.
    let _third = controller(&k, &db, "third", false);
    let c = wait_accrued_past(&claims, "the third controller to accrue", killed_at + 4).await;
    let u = usage(&c);
    let last = secs(u.last_accrual_time.as_ref().unwrap());
    // The totals match the phase timeline within one interval (plus the moment Pausing takes).
    let (expect_active, expect_suspended) = (paused_at - bound, last - paused_at);
    assert!((u.active_seconds - expect_active).abs() <= 3, "active {} vs {expect_active} s Running", u.active_seconds);
    assert!(
        (u.suspended_seconds - expect_suspended).abs() <= 3,
        "suspended {} vs {expect_suspended} s Paused",
        u.suspended_seconds
    );
    assert_eq!(u.vcpu_seconds, u.active_seconds as f64, "a template sandbox bills 1 vCPU");
    assert_eq!(u.memory_gib_seconds, u.active_seconds as f64 * 0.5);
    assert_history_matches(&db, &c);
    assert_every_second_once(&db, &c);

    // Delete the claim and watch every revision: phase Released with the final usage (accrued
    // up to the deletion, equal to the history's sums), a Released Event carrying it, and then
    // the claim and its Machine are gone.
    let rv = claims.list(&kube::api::ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    let mut watch = claims.watch(&kube::api::WatchParams::default(), &rv).await.unwrap().boxed();
    let deleted_at = k8s_openapi::jiff::Timestamp::now().as_second();
    claims.delete("job", &kube::api::DeleteParams::default()).await.unwrap();
    let mut released: Option<MachineClaim> = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let ev = tokio::time::timeout_at(deadline, watch.next()).await.expect("the claim to go").unwrap().unwrap();
        match ev {
            // The first Released revision still has the finalizer: Released comes before it goes.
            kube::api::WatchEvent::Modified(c)
                if c.name_any() == "job"
                    && released.is_none()
                    && c.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Released) =>
            {
                assert!(
                    c.finalizers().contains(&"kairon.zyvor.dev/claim".to_string()),
                    "Released before the finalizer goes"
                );
                released = Some(c);
            }
            kube::api::WatchEvent::Deleted(c) if c.name_any() == "job" => break,
            _ => {}
        }
    }
    let released = released.expect("a revision with phase Released before the claim went");
    let fin = usage(&released);
    let fin_end = secs(fin.last_accrual_time.as_ref().unwrap());
    assert!(fin_end >= deleted_at - 1, "the final accrual runs up to the deletion: {fin_end} vs {deleted_at}");
    assert!(fin.suspended_seconds >= u.suspended_seconds);
    assert_history_matches(&db, &released);
    assert_every_second_once(&db, &released);
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), NS);
    let ev = eventually("a Released event", Duration::from_secs(30), || async {
        events.list(&kube::api::ListParams::default()).await.ok()?.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("Released")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("job")
        })
    })
    .await;
    let note = ev.note.unwrap_or_default();
    for part in [
        format!("released Machine {machine}"),
        format!("activeSeconds={}", fin.active_seconds),
        format!("suspendedSeconds={}", fin.suspended_seconds),
        format!("vcpuSeconds={:.3}", fin.vcpu_seconds),
    ] {
        assert!(note.contains(&part), "{part:?} in {note:?}");
    }
    wait_gone(&machines, &machine, MINUTE).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kairon_up_killed_mid_accrual_neither_loses_nor_double_counts() {
    let mut k = Kairon::start_with(&fast().with(&["--test-hold-after-usage-record", "600s"])).unwrap();
    let db = k.database_url().unwrap().to_string();
    let client = k.client().await.unwrap();
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    let c = bind_claim(&client).await;
    let uid = c.uid().unwrap();
    let ahead = wait_history_ahead(&db, &claims, &uid).await;
    k.kill9().unwrap();

    // Restarted on the same database (and data dir), without the hold.
    let k = k.restart_with(&fast()).unwrap();
    let client = k.client().await.unwrap();
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    let c = wait_accrued_past(&claims, "accrual to continue after the restart", ahead + 3).await;
    assert_history_matches(&db, &c);
    assert_every_second_once(&db, &c);
    let u = usage(&c);
    assert!(u.active_seconds >= 1, "the interval recorded before the kill counts: {u:?}");
    assert_eq!(history(&db, &uid).iter().filter(|r| r.1 == ahead).count(), 1, "the held interval is there once");
}

/// A claim released before it lived a whole second still leaves its history: one empty interval,
/// so its usage (zero) is answered after it is gone, by UID.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_released_within_its_first_second_still_has_a_history() {
    let k = Kairon::start_with(&fast()).unwrap();
    let client = k.client().await.unwrap();
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    let c = bind_claim(&client).await;
    let uid = c.metadata.uid.clone().unwrap();
    claims.delete("job", &Default::default()).await.unwrap();
    wait_gone(&claims, "job", MINUTE).await;
    let rest = k.rest().unwrap();
    let h = rest.get(&format!("/api/v1/usage/claims/{uid}")).await.ok();
    assert_eq!(h["claimName"], "job", "{h}");
    assert!(h["total"]["activeSeconds"].as_i64().is_some_and(|s| s <= 2), "{h}");
    assert!(!h["intervals"].as_array().unwrap().is_empty(), "{h}");
}
