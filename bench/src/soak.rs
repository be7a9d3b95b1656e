//! The `soak` scenario: a real `kairon up` (API, controllers, node agent and runc runtime in one
//! process) with `--soak-machines` lifecycle Machines cycling for `--soak-seconds`: each worker
//! claims a member of a Paused pool whose members idle-suspend (Pause) after a short timeout,
//! waits for the idle Pause, wakes it with an exec through the REST API (wake-on-connect) and
//! releases it (deletes the claim), over and over.
//!
//! It prints the kairon process's RSS at the start, at the end of the warm-up (the first third),
//! in the middle and at the end, with the claims, wakes and errors, and asserts (an anomaly makes
//! the bench exit non-zero): the RSS grew at most `--soak-max-rss-growth-mib` after the warm-up
//! (judged only when the warm-up, the first third, is long enough for the server's bounded
//! caches to fill: 6 minutes and 10,000 revisions; CI's 2-minute run never is, and the figure
//! line says when it was not judged);
//! after everything is deleted, no runc instance, mount, loop device or cgroup of the node is
//! left and the store's rows are back to their count before the run; the REST usage API's total
//! per claim (`/api/v1/usage?groupBy=claim`) equals the sum of that claim's history rows, and
//! every released claim has history.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use futures::StreamExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use kairon_e2e::{Kairon, Rest};
use kairon_model::keys::annotations;
use kairon_model::{ClaimPhase, Machine, MachineClaim, MachinePhase, MachinePool};

use crate::leaks::{self, NodeFootprint};
use crate::{Cli, Report, ServerProc, ms};

const S: &str = "soak";
const NS: &str = "soak";
const POOL: &str = "soak";
/// A claimed member is idle-suspended this long after its claim (or its last activity). Well
/// above the wake latency: a wake that takes longer than the idle timeout (the wake's activity
/// stamp has whole seconds) lets the lifecycle controller suspend the Machine again before the
/// exec that woke it arrives, which at 2 s showed up as "is paused" on a loaded host.
const IDLE_SECONDS: i64 = 5;
/// Claims wait for the pool to refill: on a 2-core host that can take a while under load.
const BIND_TIMEOUT: Duration = Duration::from_secs(600);
const STEP_TIMEOUT: Duration = Duration::from_secs(180);
/// Stop the soak early after this many failed cycles (the server is clearly unwell).
const MAX_ERRORS: usize = 50;
const RSS_EVERY: Duration = Duration::from_secs(5);
/// The server's bounded caches fill with traffic before its memory can be flat: the watch feed
/// keeps the last 10,000 revisions (at most 16 MiB of objects; its broadcast buffer 1,024), and
/// the controllers' event recorders keep each event for 6 minutes. The RSS bound is judged only
/// when the warm-up covers both.
const CACHED_REVISIONS: i64 = 10_000;
const EVENT_CACHE: Duration = Duration::from_secs(6 * 60);

fn current_rv(db: &str) -> Result<i64> {
    Ok(leaks::psql(db, "SELECT current_rv FROM store_meta")?.trim().parse()?)
}

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    let m = cli.soak_machines.max(1);
    let node_name = format!("bench-soak-{}", std::process::id());
    // Room for every claimed Machine and the pool's refills (the scheduler counts 64 MiB and
    // 100m a template sandbox; a 2-core host would otherwise offer 20 slots).
    let memory = format!("{}Mi", ((2 * m + 64) * 64).max(64 << 10));
    let min_idle = IDLE_SECONDS.to_string();
    let flags: Vec<String> = [
        "--node-name",
        &node_name,
        "--node-memory",
        &memory,
        "--node-cpu",
        "10000",
        "--node-tick",
        "1s",
        "--activity-write-interval",
        "1s",
        "--activity-stamp-interval",
        "1s",
        "--heartbeat-interval",
        "2s",
        "--test-min-idle-timeout-seconds",
        &min_idle,
        "--test-usage-interval",
        "5s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    eprintln!("soak: starting kairon up (node {node_name})");
    let k = tokio::task::spawn_blocking(move || {
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        Kairon::start_with(&flags)
    })
    .await??;
    let footprint = NodeFootprint::new(&k.data_dir.path().join("runtime").join(&node_name), &node_name);
    let result = soak(cli, &k, &footprint, report).await;
    if result.is_err() {
        let logs = k.logs();
        eprintln!("server log tail:");
        for l in logs.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev() {
            eprintln!("  {l}");
        }
    }
    // Dropping the server removes whatever sandboxes it still holds (after a failure).
    tokio::task::spawn_blocking(move || drop(k)).await?;
    footprint.remove_cgroup_parents();
    result
}

/// A watched collection: a reflector store and a signal that it changed.
struct Watched<K: Resource<DynamicType = ()> + Clone + 'static> {
    store: Store<K>,
    changes: tokio::sync::watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl<K> Watched<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn start(api: Api<K>) -> Watched<K> {
        let (store, writer) = reflector::store();
        let (tx, changes) = tokio::sync::watch::channel(0u64);
        let task = tokio::spawn(async move {
            let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()).default_backoff());
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                if ev.is_ok() {
                    tx.send_modify(|n| *n += 1);
                }
            }
        });
        Watched { store, changes, task }
    }

    /// Waits until `f` finds what it looks for in the store (checked again at every change).
    async fn wait<T>(&self, what: &str, timeout: Duration, mut f: impl FnMut(&Store<K>) -> Option<T>) -> Result<T> {
        let mut changes = self.changes.clone();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            changes.borrow_and_update();
            if let Some(v) = f(&self.store) {
                return Ok(v);
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => bail!("the watch ended while waiting for {what}"),
                Err(_) => bail!("timed out after {timeout:?} waiting for {what}"),
            }
        }
    }
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Drop for Watched<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Ctx {
    claims: Api<MachineClaim>,
    claims_w: Watched<MachineClaim>,
    machines_w: Watched<Machine>,
    rest: Rest,
    end: Instant,
    stop: AtomicBool,
    errors: AtomicUsize,
    cycles: AtomicUsize,
}

#[derive(Default)]
struct Stats {
    claims: usize,
    bound: usize,
    suspends: usize,
    wakes: usize,
    released: usize,
    errors: Vec<String>,
    /// Claims that were bound and then released: each must have usage history.
    released_uids: Vec<String>,
    to_bound: Vec<f64>,
    to_pause: Vec<f64>,
    wake: Vec<f64>,
    release: Vec<f64>,
}

fn claim_phase(c: &MachineClaim) -> Option<ClaimPhase> {
    c.status.as_ref().and_then(|s| s.phase)
}

/// One claim's life: claim, idle Pause, wake on connect, release.
async fn cycle(ctx: &Ctx, name: &str, st: &mut Stats) -> Result<()> {
    let c: MachineClaim = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim",
        "metadata": {"name": name}, "spec": {"poolName": POOL}
    }))?;
    let t0 = Instant::now();
    let created = ctx.claims.create(&PostParams::default(), &c).await.context("creating the claim")?;
    st.claims += 1;
    let uid = created.uid().context("a created claim without a uid")?;
    let key = ObjectRef::<MachineClaim>::new(name).within(NS);
    let machine = ctx
        .claims_w
        .wait("the claim to be Bound", BIND_TIMEOUT, |s| {
            s.get(&key)
                .filter(|c| claim_phase(c) == Some(ClaimPhase::Bound))
                .and_then(|c| c.status.as_ref().and_then(|s| s.machine_name.clone()))
        })
        .await?;
    st.bound += 1;
    st.to_bound.push(ms(t0.elapsed()));

    let t1 = Instant::now();
    let mkey = ObjectRef::<Machine>::new(&machine).within(NS);
    ctx.machines_w
        .wait(&format!("{machine} to be idle-suspended (Paused)"), STEP_TIMEOUT, |s| {
            s.get(&mkey)
                .filter(|m| {
                    m.annotations().contains_key(annotations::IDLE_SUSPENDED)
                        && m.status.as_ref().and_then(|s| s.phase) == Some(MachinePhase::Paused)
                })
                .map(|_| ())
        })
        .await?;
    st.suspends += 1;
    st.to_pause.push(ms(t1.elapsed()));

    // Wake on connect: the exec wakes the idle-suspended Machine and runs in it.
    let t2 = Instant::now();
    let resp = ctx
        .rest
        .request(reqwest::Method::POST, &format!("/api/v1/machines/{NS}/{machine}/exec"))
        .json(&json!({"command": ["echo", name]}))
        .send()
        .await
        .context("the wake-on-connect exec")?;
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    ensure!(
        status.as_u16() == 200 && body["exitCode"] == 0 && body["stdout"].as_str().map(str::trim) == Some(name),
        "the wake-on-connect exec in {machine} answered {status}: {body}"
    );
    st.wakes += 1;
    st.wake.push(ms(t2.elapsed()));

    // Release.
    let t3 = Instant::now();
    ctx.claims.delete(name, &DeleteParams::default()).await.context("deleting the claim")?;
    ctx.claims_w
        .wait("the claim to be released and gone", STEP_TIMEOUT, |s| s.get(&key).is_none().then_some(()))
        .await?;
    st.released += 1;
    st.released_uids.push(uid);
    st.release.push(ms(t3.elapsed()));
    Ok(())
}

async fn worker(ctx: Arc<Ctx>, w: usize) -> Stats {
    let mut st = Stats::default();
    let mut n = 0;
    while Instant::now() < ctx.end && !ctx.stop.load(Ordering::Relaxed) {
        n += 1;
        let name = format!("w{w:03}-{n}");
        let done = cycle(&ctx, &name, &mut st).await;
        ctx.cycles.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = done {
            eprintln!("soak: {name}: {e:#}");
            st.errors.push(format!("{name}: {e:#}"));
            if ctx.errors.fetch_add(1, Ordering::Relaxed) + 1 >= MAX_ERRORS {
                ctx.stop.store(true, Ordering::Relaxed);
            }
            // Leave nothing behind: release the claim (if it was made) before the next one.
            let _ = ctx.claims.delete(&name, &DeleteParams::default()).await;
            let key = ObjectRef::<MachineClaim>::new(&name).within(NS);
            let _ =
                ctx.claims_w.wait("a failed claim to go", STEP_TIMEOUT, |s| s.get(&key).is_none().then_some(())).await;
        }
    }
    st
}

/// RSS (KiB) samples of the server, with their time since the soak started.
/// A progress line goes to stderr every minute.
async fn sample_rss(server: ServerProc, start: Instant, stop: Arc<AtomicBool>, ctx: Arc<Ctx>) -> Vec<(f64, u64)> {
    let mut samples = Vec::new();
    let mut every = tokio::time::interval(RSS_EVERY);
    let mut last_line = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        every.tick().await;
        if let Ok(s) = server.sample() {
            samples.push((start.elapsed().as_secs_f64(), s.rss_kib));
            if last_line.elapsed() >= Duration::from_secs(60) {
                last_line = Instant::now();
                eprintln!(
                    "soak: {:.0} s: rss {:.1} MiB, {} cycles done, {} failed",
                    start.elapsed().as_secs_f64(),
                    s.rss_kib as f64 / 1024.0,
                    ctx.cycles.load(Ordering::Relaxed),
                    ctx.errors.load(Ordering::Relaxed)
                );
            }
        }
    }
    samples
}

/// Mean RSS (MiB) of the samples near `at` seconds.
fn rss_near(samples: &[(f64, u64)], at: f64, window: f64) -> Option<f64> {
    let near: Vec<u64> = samples.iter().filter(|(t, _)| (t - at).abs() <= window).map(|(_, r)| *r).collect();
    if near.is_empty() {
        let closest = samples.iter().min_by(|a, b| (a.0 - at).abs().total_cmp(&(b.0 - at).abs()))?;
        return Some(closest.1 as f64 / 1024.0);
    }
    Some(near.iter().sum::<u64>() as f64 / near.len() as f64 / 1024.0)
}

/// Least-squares slope of RSS (MiB per minute) over the samples from `from` seconds on.
fn rss_slope(samples: &[(f64, u64)], from: f64) -> Option<f64> {
    let pts: Vec<(f64, f64)> =
        samples.iter().filter(|(t, _)| *t >= from).map(|(t, r)| (*t / 60.0, *r as f64 / 1024.0)).collect();
    if pts.len() < 3 {
        return None;
    }
    let n = pts.len() as f64;
    let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
    let var: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    (var > 0.0).then(|| pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / var)
}

async fn soak(cli: &Cli, k: &Kairon, footprint: &NodeFootprint, report: &mut Report) -> Result<()> {
    let m = cli.soak_machines.max(1);
    let secs = cli.soak_seconds.max(1);
    let server = ServerProc::find(k)?;
    report.info.insert("soak server pid".into(), json!(server.pid));
    let db = k.database_url().context("the bench's kairon up runs on a test database")?.to_string();
    let baseline = leaks::settled_counts(&db).await?;
    let start_rss = server.sample()?;
    let client = k.client().await?;
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let claims_w = Watched::start(claims.clone());
    let machines_w = Watched::start(machines.clone());

    let replicas = (m / 4).max(2);
    let pool: MachinePool = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool",
        "metadata": {"name": POOL},
        "spec": {"replicas": replicas, "warmPowerState": "Paused", "warmupSeconds": 1,
                 "template": {"metadata": {"labels": {"kairon.zyvor.dev/sandbox": "true"}},
                              "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true},
                                       "lifecycle": {"idleTimeoutSeconds": IDLE_SECONDS, "idleAction": "Pause",
                                                     "wakeOnConnect": true, "wakeTimeoutSeconds": 120}}}}
    }))?;
    pools.create(&PostParams::default(), &pool).await?;
    let t = Instant::now();
    crate::claims::wait_full_with(
        &pools,
        POOL,
        replicas as i32,
        Duration::from_secs(300 + 2 * replicas as u64),
        |_| {},
    )
    .await?;
    report.add(S, format!("paused pool of {replicas} warm after"), t.elapsed().as_secs_f64(), "s");

    eprintln!("soak: {m} workers cycling claims for {secs} s");
    let start = Instant::now();
    let ctx = Arc::new(Ctx {
        claims: claims.clone(),
        claims_w,
        machines_w,
        rest: k.rest()?,
        end: start + Duration::from_secs(secs),
        stop: AtomicBool::new(false),
        errors: AtomicUsize::new(0),
        cycles: AtomicUsize::new(0),
    });
    let stop_sampling = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn(sample_rss(
        ServerProc { pid: server.pid, clk_tck: server.clk_tck },
        start,
        stop_sampling.clone(),
        ctx.clone(),
    ));
    let rv_start = current_rv(&db)?;
    let warmup = Duration::from_secs(secs) / 3;
    let db_warm = db.clone();
    let rv_at_warmup = tokio::spawn(async move {
        tokio::time::sleep_until((start + warmup).into()).await;
        current_rv(&db_warm)
    });
    let cpu_before = server.sample()?.cpu;
    let tasks: Vec<_> = (0..m).map(|w| tokio::spawn(worker(ctx.clone(), w))).collect();
    let mut st = Stats::default();
    for t in tasks {
        let s = t.await?;
        st.claims += s.claims;
        st.bound += s.bound;
        st.suspends += s.suspends;
        st.wakes += s.wakes;
        st.released += s.released;
        st.errors.extend(s.errors);
        st.released_uids.extend(s.released_uids);
        st.to_bound.extend(s.to_bound);
        st.to_pause.extend(s.to_pause);
        st.wake.extend(s.wake);
        st.release.extend(s.release);
    }
    let wall = start.elapsed();
    let cpu = server.sample()?.cpu.saturating_sub(cpu_before);
    stop_sampling.store(true, Ordering::Relaxed);
    let samples = sampler.await?;
    let rv_warm = rv_at_warmup.await??;
    let rv_end = current_rv(&db)?;

    report.add(S, "soak duration", wall.as_secs_f64(), "s");
    report.add(S, "lifecycle Machines cycling", m as f64, "count");
    report.add(S, "claims made", st.claims as f64, "count");
    report.add(S, "claims bound", st.bound as f64, "count");
    report.add(S, "idle suspends (Pause)", st.suspends as f64, "count");
    report.add(S, "wakes (exec, wake-on-connect)", st.wakes as f64, "count");
    report.add(S, "claims released", st.released as f64, "count");
    report.add(S, "errors", st.errors.len() as f64, "count");
    report.add(S, "cycles per minute", st.released as f64 / (wall.as_secs_f64() / 60.0), "cycles/min");
    report.add(S, "server cpu/wall", cpu.as_secs_f64() / wall.as_secs_f64(), "cores");
    report.add(S, "revisions written", (rv_end - rv_start) as f64, "count");
    report.add(S, "revisions written by the end of the warm-up", (rv_warm - rv_start) as f64, "count");
    report.latencies(S, "claim to Bound", &mut st.to_bound);
    report.latencies(S, "Bound to idle Pause", &mut st.to_pause);
    report.latencies(S, "wake-on-connect exec", &mut st.wake);
    report.latencies(S, "release (delete to gone)", &mut st.release);
    for e in st.errors.iter().take(5) {
        report.anomaly(format!("soak: {e}"));
    }
    if st.errors.len() > 5 {
        report.anomaly(format!("soak: {} more failed cycles", st.errors.len() - 5));
    }
    if ctx.stop.load(Ordering::Relaxed) {
        report.anomaly(format!("soak: stopped early after {MAX_ERRORS} failed cycles"));
    }
    if st.released == 0 {
        report.anomaly("soak: no claim went through a whole cycle");
    }

    // Memory: flat after the warm-up.
    let total = wall.as_secs_f64();
    let window = (total * 0.025).max(RSS_EVERY.as_secs_f64());
    let mib = |kib: u64| kib as f64 / 1024.0;
    report.add(S, "rss at start (before load)", mib(start_rss.rss_kib), "MiB");
    let warm = rss_near(&samples, total / 3.0, window);
    let middle = rss_near(&samples, total / 2.0, window);
    let end = rss_near(&samples, total - window, window);
    if let (Some(w), Some(mid), Some(e)) = (warm, middle, end) {
        report.add(S, "rss after warm-up (1/3)", w, "MiB");
        report.add(S, "rss in the middle", mid, "MiB");
        report.add(S, "rss at end (under load)", e, "MiB");
        report.add(S, "rss growth after warm-up", e - w, "MiB");
        let judged = warmup >= EVENT_CACHE && rv_warm - rv_start >= CACHED_REVISIONS;
        if !judged {
            let why = format!(
                "not judged: the warm-up ({:.0} s, {} revisions) is shorter than the server's caches take to fill \
                 ({} s of events, {CACHED_REVISIONS} revisions); run a longer soak",
                warmup.as_secs_f64(),
                rv_warm - rv_start,
                EVENT_CACHE.as_secs()
            );
            eprintln!("soak: rss growth {why}");
            report.info.insert("soak rss growth".into(), json!(why));
        } else if e - w > cli.soak_max_rss_growth_mib {
            report.anomaly(format!(
                "soak: the kairon process's RSS grew {:.1} MiB after the warm-up ({w:.1} → {e:.1} MiB), more than \
                 the {:.0} MiB allowed (--soak-max-rss-growth-mib)",
                e - w,
                cli.soak_max_rss_growth_mib
            ));
        }
    } else {
        report.anomaly("soak: too few RSS samples to judge memory growth");
    }
    if let Some(slope) = rss_slope(&samples, total / 3.0) {
        report.add(S, "rss slope after warm-up", slope, "MiB/min");
    }
    if let Some(peak) = samples.iter().map(|s| s.1).max() {
        report.add(S, "rss peak (sampled)", mib(peak), "MiB");
    }

    // Delete everything, then nothing may be left.
    eprintln!("soak: cleaning up");
    let t = Instant::now();
    pools.delete(POOL, &DeleteParams::default()).await?;
    claims.delete_collection(&DeleteParams::default(), &ListParams::default()).await?;
    ctx.machines_w
        .wait("every Machine to be deleted", Duration::from_secs(300 + 2 * m as u64), |s| {
            s.state().is_empty().then_some(())
        })
        .await?;
    ctx.claims_w.wait("every claim to be gone", STEP_TIMEOUT, |s| s.state().is_empty().then_some(())).await?;
    let rt = k.runtime()?;
    leaks::wait_until("the runtime to hold no instance", STEP_TIMEOUT, Duration::from_millis(500), || async {
        Ok(rt.list().await?.is_empty())
    })
    .await?;
    report.add(S, "cleanup (delete everything) took", t.elapsed().as_secs_f64(), "s");
    report.add(S, "rss after cleanup", mib(server.sample()?.rss_kib), "MiB");
    for leak in footprint.leaks() {
        report.anomaly(format!("soak: leak after cleanup: {leak}"));
    }
    let after = leaks::object_counts(&db)?;
    for change in leaks::count_changes(&baseline, &after) {
        report.anomaly(format!("soak: database rows not back after cleanup: {change}"));
    }
    report.add(S, "events left in the store", after.get(leaks::EVENTS).copied().unwrap_or(0) as f64, "count");

    check_usage(k, &db, &st.released_uids, report).await
}

/// Per claim: the REST usage API's totals equal the sum of the claim's history rows, and every
/// released claim has history.
async fn check_usage(k: &Kairon, db: &str, released: &[String], report: &mut Report) -> Result<()> {
    let history = leaks::psql(
        db,
        &format!(
            "SELECT claim_uid, count(*), sum(active_seconds), sum(suspended_seconds), sum(vcpu_seconds), \
             sum(memory_gib_seconds) FROM claim_usage_intervals WHERE namespace = '{NS}' GROUP BY claim_uid"
        ),
    )?;
    // uid → (rows, active, suspended, vcpu, memory)
    let mut hist: BTreeMap<String, (i64, i64, i64, f64, f64)> = BTreeMap::new();
    for line in history.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('|').collect();
        ensure!(f.len() == 6, "unexpected history row {line:?}");
        hist.insert(f[0].to_string(), (f[1].parse()?, f[2].parse()?, f[3].parse()?, f[4].parse()?, f[5].parse()?));
    }
    let rest = k.rest()?;
    let resp = rest
        .request(
            reqwest::Method::GET,
            &format!("/api/v1/usage?groupBy=claim&namespace={NS}&from=2000-01-01&to=2100-01-01"),
        )
        .send()
        .await?;
    let status = resp.status();
    let body: Value = resp.json().await?;
    ensure!(status.is_success(), "GET /api/v1/usage answered {status}: {body}");
    let mut api: BTreeMap<String, (i64, i64, f64, f64)> = BTreeMap::new();
    for row in body["rows"].as_array().context("usage report without rows")? {
        let uid = row["claimUid"].as_str().context("a usage row without claimUid")?.to_string();
        let e = api.entry(uid).or_default();
        e.0 += row["activeSeconds"].as_i64().unwrap_or(0);
        e.1 += row["suspendedSeconds"].as_i64().unwrap_or(0);
        e.2 += row["vcpuSeconds"].as_f64().unwrap_or(0.0);
        e.3 += row["memoryGiBSeconds"].as_f64().unwrap_or(0.0);
    }
    let rows: i64 = hist.values().map(|h| h.0).sum();
    report.add(S, "claims with usage history", hist.len() as f64, "count");
    report.add(S, "usage history rows", rows as f64, "count");
    report.add(S, "usage rows in the REST report", api.len() as f64, "count");
    report.add(S, "active seconds (history)", hist.values().map(|h| h.1).sum::<i64>() as f64, "s");
    report.add(S, "suspended seconds (history)", hist.values().map(|h| h.2).sum::<i64>() as f64, "s");
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0);
    let mut wrong = Vec::new();
    let uids: BTreeSet<&String> = hist.keys().chain(api.keys()).collect();
    for uid in uids {
        match (hist.get(uid), api.get(uid)) {
            (Some(h), Some(a)) if h.1 == a.0 && h.2 == a.1 && close(h.3, a.2) && close(h.4, a.3) => {}
            (h, a) => {
                wrong.push(format!("claim {uid}: history {h:?} (rows, active, suspended, vcpu, GiB·s), REST {a:?}"))
            }
        }
    }
    report.add(S, "claims whose REST usage differs from history", wrong.len() as f64, "count");
    for w in wrong.iter().take(5) {
        report.anomaly(format!("soak: usage: {w}"));
    }
    let missing: Vec<&String> = released.iter().filter(|u| !hist.contains_key(*u)).collect();
    if !missing.is_empty() {
        report.anomaly(format!(
            "soak: usage: {} of {} released claims have no usage history (e.g. {})",
            missing.len(),
            released.len(),
            missing[0]
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_near_averages_the_window_and_slope_is_mib_per_minute() {
        // 1 MiB more every 60 s.
        let samples: Vec<(f64, u64)> = (0..10).map(|i| (i as f64 * 60.0, 1024 * (100 + i))).collect();
        assert_eq!(rss_near(&samples, 120.0, 61.0), Some(102.0));
        assert_eq!(rss_near(&samples, 1000.0, 1.0), Some(109.0), "the closest sample when none is near");
        let slope = rss_slope(&samples, 0.0).unwrap();
        assert!((slope - 1.0).abs() < 1e-9, "{slope}");
        assert_eq!(rss_slope(&samples[..2], 0.0), None);
    }
}
