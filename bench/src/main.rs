//! `kairon-bench <scenario>`: starts `kairon up` through the end-to-end harness (a real server over
//! HTTPS, a fresh PostgreSQL database, the admin bearer token) and measures it with kube-rs, as a
//! user's client would see it. Progress goes to stderr; the figures go to stdout, as an aligned
//! table or (`--json`) one JSON object.

mod autoscale;
mod billing;
mod claims;
mod cluster;
mod controller;
mod hotpath;
mod leaks;
mod migrate;
mod network;
mod node;
mod rest;
mod sandbox;
mod sdk;
mod soak;
mod storecore;
mod vm;

use std::collections::BTreeMap;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};

use kairon_e2e::Kairon;
use kairon_model::Machine;

#[derive(Parser, Debug)]
#[command(name = "kairon-bench", about = "Benchmarks a real `kairon up` through kube-rs and prints the figures")]
struct Cli {
    /// What to measure (`all` runs every scenario).
    scenario: Scenario,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Machines to create (and then list).
    #[arg(long, default_value_t = 10_000)]
    machines: usize,
    /// Concurrent create tasks.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Raw watches open during the update phase.
    #[arg(long, default_value_t = 100)]
    watchers: usize,
    /// Updates the single writer makes while the watches are open.
    #[arg(long, default_value_t = 500)]
    updates: usize,
    /// Sandboxes created (and claims made) in the sandbox scenario (default 20); Paused pool
    /// members the node scenario holds on one node (default 1000).
    #[arg(long)]
    sandboxes: Option<usize>,
    /// Running lifecycle sandboxes the node scenario adds beside its Paused ones (none unless
    /// given), measuring the node agent's CPU per tick again.
    #[arg(long)]
    node_machines: Option<usize>,
    /// How long the soak scenario cycles its claims, in seconds.
    #[arg(long, default_value_t = 1800)]
    soak_seconds: u64,
    /// Lifecycle Machines the soak scenario keeps cycling (claim, idle Pause, wake, release).
    #[arg(long, default_value_t = 200)]
    soak_machines: usize,
    /// Most the kairon process's RSS may grow in the soak between the end of its warm-up (the
    /// first third) and its end, in MiB.
    #[arg(long, default_value_t = 64.0)]
    soak_max_rss_growth_mib: f64,
    /// Claims made (one at a time, each from a full Paused pool) in the claims scenario.
    #[arg(long, default_value_t = 20)]
    claims: usize,
    /// Simulated lifecycle Machines in the controller scenario.
    #[arg(long, default_value_t = 10_000)]
    controller_machines: usize,
    /// How long the controller scenario measures the steady state, in seconds.
    #[arg(long, default_value_t = 60)]
    steady_seconds: u64,
    /// last-activity stamps a second during the controller scenario's steady state.
    #[arg(long, default_value_t = 10.0)]
    churn: f64,
    /// Repetitions of each measurement in the vm scenario (boots, hibernates, forks, claims).
    #[arg(long, default_value_t = 5)]
    vms: usize,
    /// Paused members of the pool in the sandbox and claims scenarios.
    #[arg(long, default_value_t = 5)]
    pool_size: u32,
    /// The writer's steady pace, in updates per second.
    #[arg(long, default_value_t = 50.0)]
    update_rate: f64,
    /// Repetitions of each list measurement.
    #[arg(long, default_value_t = 5)]
    list_reps: usize,
    /// Page size of the paginated list.
    #[arg(long, default_value_t = 500)]
    page_size: u32,
    /// How long a watcher waits for its next event before it gives up, in seconds.
    #[arg(long, default_value_t = 30)]
    watch_idle_timeout: u64,
    /// Concurrent clients of the REST scenario's GET phase.
    #[arg(long, default_value_t = 8)]
    rest_clients: usize,
    /// Requests each REST client sends (and execs measured).
    #[arg(long, default_value_t = 200)]
    rest_requests: usize,
    /// Wakes from an idle Pause measured in the REST scenario.
    #[arg(long, default_value_t = 30)]
    rest_wakes: usize,
    /// Samples of each latency row of the hotpath scenario (claims, wakes, execs).
    #[arg(long, default_value_t = 200)]
    hotpath_samples: usize,
    /// Wake-on-connect cycles of the hotpath scenario (idle Pause, then an exec that wakes it),
    /// each an exec that must find the sandbox thawed with the node agent running beside it.
    #[arg(long, default_value_t = 1000)]
    hotpath_wakes: usize,
    /// How long wrk loads each GET row of the hotpath scenario, in seconds.
    #[arg(long, default_value_t = 30)]
    hotpath_seconds: u64,
    /// How long the autoscale scenario's arrival trace lasts, in seconds.
    #[arg(long, default_value_t = 900)]
    autoscale_seconds: u64,
    /// The fixed pool sizes the autoscale scenario replays the trace against, beside the
    /// autoscaled pool.
    #[arg(long, value_delimiter = ',', default_value = "3,4")]
    autoscale_fixed: Vec<u32>,
    /// The autoscaled pool's maxReplicas.
    #[arg(long, default_value_t = 12)]
    autoscale_max: i32,
    /// MiB written into the sandbox that the migrate scenario moves.
    #[arg(long, default_value_t = 100)]
    migrate_mib: u64,
    /// Migrations the migrate scenario times (back and forth between two nodes).
    #[arg(long, default_value_t = 3)]
    migrations: usize,
    /// Claims whose month of usage the billing scenario records (4 intervals each) and reports.
    #[arg(long, default_value_t = 100_000)]
    billing_claims: usize,
    /// Namespace the Machines are created in.
    #[arg(long, default_value = "bench")]
    namespace: String,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    /// Create rate, full and paginated list, watch-event delivery latency.
    Store,
    /// The same figures of the store in-process (no HTTP): 8 writers' creates, lists and gets
    /// from the watch cache, watch delivery to many watchers.
    StoreCore,
    /// The node runtime on runc: cold create-to-exec, pool claim-to-exec, pause/resume, memory.
    Sandbox,
    /// One node with many Paused sandboxes: memory per member, node-agent CPU per tick,
    /// claim latency at that size, and no leaks after.
    Node,
    /// Lifecycle Machines claimed, idled, woken and released for a long time: flat memory, no
    /// leaked sandboxes, mounts, cgroups or rows, usage totals equal to their history.
    Soak,
    /// The REST API: GET machine rate and latency, exec round trip, wake-on-connect latency.
    Rest,
    /// Claim-to-Bound and claim-to-Running from a Paused pool of runc sandboxes (kairon up).
    Claims,
    /// `kairon controller` CPU and memory over many simulated lifecycle Machines.
    Controller,
    /// The node runtime on QEMU: boot, exec, pause, resume, hibernate, restore, fork, pool claim.
    Vm,
    /// The guest network: sandbox create time attached vs not, and the egress proxy's added
    /// latency per HTTP request (in network namespaces it creates).
    Network,
    /// Exec, claim → first exec, wake → exec and GET one Machine: Kairon beside this machine's
    /// limit and the naive path without a control plane.
    Hotpath,
    /// One claim arrival trace against fixed pools and an autoscaled one: hit rate, claim to
    /// Bound, member-seconds held.
    Autoscale,
    /// A sandbox with a 100 MiB writable layer moved cold between two nodes: time (= downtime)
    /// and throughput.
    Migrate,
    /// Claim → Bound, → Running and → first exec on `kairon up` and on a real Kubernetes
    /// control plane (scripts/k8s-testbed), in one run.
    Cluster,
    /// Claim → first `run` and `run` from the Python SDK (`--hotpath-samples` claims from a
    /// Paused pool of `--pool-size`), beside issue 45's goals.
    Sdk,
    /// A month of usage (`--billing-claims` claims) and the billing reports over it: from the
    /// daily rollup, from the raw intervals (the naive path) and over REST.
    Billing,
    /// Every scenario but soak, autoscale, cluster, sdk and billing.
    All,
}

/// One figure of the report.
struct Row {
    scenario: &'static str,
    metric: String,
    value: f64,
    unit: &'static str,
}

#[derive(Default)]
struct Report {
    rows: Vec<Row>,
    /// Server errors, watch gaps, wrong counts: anything that makes the run not clean.
    anomalies: Vec<String>,
    /// Facts about the run (build profile, binary, sizes).
    info: BTreeMap<String, Value>,
}

impl Report {
    fn add(&mut self, scenario: &'static str, metric: impl Into<String>, value: f64, unit: &'static str) {
        self.rows.push(Row { scenario, metric: metric.into(), value, unit });
    }

    /// p50/p99/max (and the count) of a set of latency samples in milliseconds.
    fn latencies(&mut self, scenario: &'static str, prefix: &str, samples: &mut [f64]) {
        samples.sort_by(f64::total_cmp);
        self.add(scenario, format!("{prefix} samples"), samples.len() as f64, "count");
        if samples.is_empty() {
            return;
        }
        self.add(scenario, format!("{prefix} p50"), percentile(samples, 50.0), "ms");
        self.add(scenario, format!("{prefix} p90"), percentile(samples, 90.0), "ms");
        self.add(scenario, format!("{prefix} p99"), percentile(samples, 99.0), "ms");
        self.add(scenario, format!("{prefix} max"), samples[samples.len() - 1], "ms");
    }

    fn anomaly(&mut self, what: impl Into<String>) {
        let what = what.into();
        eprintln!("ANOMALY: {what}");
        self.anomalies.push(what);
    }

    fn print_table(&self) {
        let w_s = self.rows.iter().map(|r| r.scenario.len()).max().unwrap_or(0).max("scenario".len());
        let w_m = self.rows.iter().map(|r| r.metric.len()).max().unwrap_or(0).max("metric".len());
        let values: Vec<String> = self.rows.iter().map(|r| format_value(r.value)).collect();
        let w_v = values.iter().map(String::len).max().unwrap_or(0).max("value".len());
        println!("{:<w_s$}  {:<w_m$}  {:>w_v$}  unit", "scenario", "metric", "value");
        for (r, v) in self.rows.iter().zip(&values) {
            println!("{:<w_s$}  {:<w_m$}  {:>w_v$}  {}", r.scenario, r.metric, v, r.unit);
        }
        for (k, v) in &self.info {
            let v = v.as_str().map(String::from).unwrap_or_else(|| v.to_string());
            println!("# {k}: {v}");
        }
        if self.anomalies.is_empty() {
            println!("# anomalies: none");
        } else {
            for a in &self.anomalies {
                println!("# ANOMALY: {a}");
            }
        }
    }

    fn to_json(&self) -> Value {
        let mut scenarios = serde_json::Map::new();
        for r in &self.rows {
            let entry = scenarios.entry(r.scenario).or_insert_with(|| json!({}));
            entry[r.metric.as_str()] = json!({"value": r.value, "unit": r.unit});
        }
        json!({"scenarios": scenarios, "info": self.info, "anomalies": self.anomalies})
    }
}

fn format_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// Nearest-rank percentile of samples sorted ascending: the smallest sample with at least `p`%
/// of the samples at or below it.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A short name for a failed request: the HTTP status for API errors, the error otherwise.
fn classify(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("HTTP {} {}", s.code, s.reason),
        other => {
            let s = other.to_string();
            s.chars().take(120).collect()
        }
    }
}

fn report_errors(report: &mut Report, phase: &str, errors: &BTreeMap<String, usize>) {
    for (what, n) in errors {
        report.anomaly(format!("{phase}: {n} request(s) failed with {what}"));
    }
}

// ---------------------------------------------------------------------------------------
// The server process: CPU time and memory from /proc.

struct ProcSample {
    cpu: Duration,
    rss_kib: u64,
    peak_rss_kib: u64,
}

struct ServerProc {
    pid: u32,
    clk_tck: f64,
}

impl ServerProc {
    /// The `kairon up` serving this data dir: its path is unique to the instance.
    fn find(k: &Kairon) -> Result<ServerProc> {
        let dir = k.data_dir.path().to_string_lossy().into_owned();
        let out =
            Command::new("pgrep").args(["-f", "--", &format!("--data-dir {dir}")]).output().context("running pgrep")?;
        let pids: Vec<u32> =
            String::from_utf8_lossy(&out.stdout).split_whitespace().filter_map(|s| s.parse().ok()).collect();
        let pid = match pids.as_slice() {
            [pid] => *pid,
            [] => bail!("no process matches --data-dir {dir}: {}", String::from_utf8_lossy(&out.stderr).trim()),
            many => bail!("several processes match --data-dir {dir}: {many:?}"),
        };
        let clk_tck = Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|t| *t > 0.0)
            .unwrap_or(100.0);
        Ok(ServerProc { pid, clk_tck })
    }

    fn sample(&self) -> Result<ProcSample> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
            .with_context(|| format!("reading /proc/{}/stat (did the server exit?)", self.pid))?;
        // The command name may hold spaces; the fields after it are space-separated, starting at
        // field 3 (state). utime and stime are fields 14 and 15.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).context("malformed /proc/<pid>/stat")?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let tick = |i: usize| -> Result<f64> {
            fields.get(i).and_then(|f| f.parse::<f64>().ok()).context("malformed /proc/<pid>/stat")
        };
        let cpu = Duration::from_secs_f64((tick(11)? + tick(12)?) / self.clk_tck);
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))?;
        let kib = |key: &str| -> Result<u64> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .with_context(|| format!("no {key} in /proc/<pid>/status"))
        };
        Ok(ProcSample { cpu, rss_kib: kib("VmRSS:")?, peak_rss_kib: kib("VmHWM:")? })
    }
}

/// Server CPU used by a phase, and its share of one core over the phase's wall time.
fn phase_cpu(report: &mut Report, phase: &str, before: &ProcSample, after: &ProcSample, wall: Duration) {
    let cpu = after.cpu.saturating_sub(before.cpu);
    report.add("store", format!("server cpu ({phase})"), cpu.as_secs_f64(), "s");
    if !wall.is_zero() {
        report.add("store", format!("server cpu/wall ({phase})"), cpu.as_secs_f64() / wall.as_secs_f64(), "cores");
    }
}

// ---------------------------------------------------------------------------------------
// The store scenario.

fn machine(name: &str) -> Result<Machine> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
        "metadata": {"name": name},
        "spec": {"image": {"path": "/var/lib/fluxvm/images/kairon-hw.qcow2"}, "resources": {"cpu": "1", "memory": "512Mi"}}
    }))?)
}

fn machine_name(i: usize) -> String {
    format!("m-{i:06}")
}

/// Sandboxes of the sandbox scenario unless `--sandboxes` says otherwise.
const DEFAULT_SANDBOXES: usize = 20;

/// Gives up on a phase after this many failed requests (the server is clearly unwell).
const MAX_ERRORS: usize = 100;

struct Created {
    wall: Duration,
    latencies_ms: Vec<f64>,
    ok: usize,
    errors: BTreeMap<String, usize>,
}

async fn create_phase(api: &Api<Machine>, n: usize, concurrency: usize) -> Result<Created> {
    let next = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency.max(1) {
        let (api, next, failed, stop) = (api.clone(), next.clone(), failed.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors: BTreeMap<String, usize> = BTreeMap::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n || stop.load(Ordering::Relaxed) {
                    break;
                }
                let m = machine(&machine_name(i))?;
                let t0 = Instant::now();
                match api.create(&PostParams::default(), &m).await {
                    Ok(_) => lat.push(ms(t0.elapsed())),
                    Err(e) => {
                        *errors.entry(classify(&e)).or_default() += 1;
                        if failed.fetch_add(1, Ordering::Relaxed) + 1 >= MAX_ERRORS {
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                }
                if (i + 1) % 2000 == 0 {
                    eprintln!("  created {} / {n}", i + 1);
                }
            }
            anyhow::Ok((lat, errors))
        }));
    }
    let mut created =
        Created { wall: Duration::ZERO, latencies_ms: Vec::with_capacity(n), ok: 0, errors: BTreeMap::new() };
    for t in tasks {
        let (lat, errors) = t.await??;
        created.latencies_ms.extend(lat);
        for (k, v) in errors {
            *created.errors.entry(k).or_default() += v;
        }
    }
    created.wall = start.elapsed();
    created.ok = created.latencies_ms.len();
    Ok(created)
}

/// One full list; returns the time, the item count and the list's resourceVersion.
async fn list_full(api: &Api<Machine>) -> Result<(Duration, usize, String)> {
    let t0 = Instant::now();
    let list = api.list(&ListParams::default()).await.context("full list")?;
    let dt = t0.elapsed();
    if list.metadata.continue_.as_deref().is_some_and(|c| !c.is_empty()) {
        bail!("a list without limit came back with a continue token");
    }
    Ok((dt, list.items.len(), list.metadata.resource_version.unwrap_or_default()))
}

/// A list in pages of `limit`, following `continue`; returns the time, items and pages.
async fn list_paged(api: &Api<Machine>, limit: u32) -> Result<(Duration, usize, usize)> {
    let t0 = Instant::now();
    let (mut items, mut pages) = (0, 0);
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(limit);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await.with_context(|| format!("paginated list, page {}", pages + 1))?;
        pages += 1;
        items += page.items.len();
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => token = Some(c),
            _ => break,
        }
        if pages > 1_000_000 {
            bail!("paginated list does not end");
        }
    }
    Ok((t0.elapsed(), items, pages))
}

/// What one watcher saw: (update index, resourceVersion, receipt instant) per matching event.
#[derive(Default)]
struct Seen {
    events: Vec<(usize, i64, Instant)>,
    /// Events that are not one of the writer's updates.
    unexpected: usize,
    /// Why the watcher stopped early, if it did.
    ended: Option<String>,
}

async fn run_watcher<S>(mut stream: S, base: i64, updates: usize, idle: Duration) -> Seen
where
    S: futures::Stream<Item = kube::Result<WatchEvent<Machine>>> + Unpin,
{
    let mut seen = Seen { events: Vec::with_capacity(updates), ..Seen::default() };
    while seen.events.len() < updates {
        let ev = match tokio::time::timeout(idle, stream.try_next()).await {
            Err(_) => {
                seen.ended = Some(format!("no event for {} s", idle.as_secs()));
                break;
            }
            Ok(Err(e)) => {
                seen.ended = Some(format!("stream error: {}", classify(&e)));
                break;
            }
            Ok(Ok(None)) => {
                seen.ended = Some("stream ended".into());
                break;
            }
            Ok(Ok(Some(ev))) => ev,
        };
        let now = Instant::now();
        match ev {
            WatchEvent::Added(m) | WatchEvent::Modified(m) | WatchEvent::Deleted(m) => {
                let rv = m.metadata.resource_version.as_deref().and_then(|v| v.parse().ok()).unwrap_or(-1);
                match m.spec.ttl_seconds.map(|t| t - base) {
                    Some(k) if k >= 0 && (k as usize) < updates => seen.events.push((k as usize, rv, now)),
                    _ => seen.unexpected += 1,
                }
            }
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => {
                seen.ended = Some(format!("ERROR event: {} {}", e.code, e.message));
                break;
            }
        }
    }
    seen
}

/// `spec.ttlSeconds` of update k is `TTL_BASE + k`: far in the future, and it names the update.
const TTL_BASE: i64 = 1_000_000_000;

async fn store(cli: &Cli, k: &Kairon, server: &ServerProc, report: &mut Report) -> Result<()> {
    const S: &str = "store";
    let client = k.client().await?;
    let api: Api<Machine> = Api::namespaced(client, &cli.namespace);
    let n = cli.machines;

    // 1. Create rate.
    eprintln!("create: {n} Machines with {} concurrent tasks", cli.concurrency);
    let before = server.sample()?;
    let created = create_phase(&api, n, cli.concurrency).await?;
    let after = server.sample()?;
    report_errors(report, "create", &created.errors);
    if created.ok != n {
        report.anomaly(format!("create: {} of {n} Machines created", created.ok));
    }
    report.add(S, "create machines", created.ok as f64, "count");
    report.add(S, "create concurrency", cli.concurrency as f64, "tasks");
    report.add(S, "create wall", created.wall.as_secs_f64(), "s");
    report.add(S, "create rate", created.ok as f64 / created.wall.as_secs_f64(), "creates/s");
    let mut lat = created.latencies_ms;
    report.latencies(S, "create latency", &mut lat);
    phase_cpu(report, "create", &before, &after, created.wall);
    report.add(S, "server rss after create", after.rss_kib as f64 / 1024.0, "MiB");

    // 2. Lists of every Machine.
    eprintln!("list: {} full lists and {} lists in pages of {}", cli.list_reps, cli.list_reps, cli.page_size);
    let before = server.sample()?;
    let list_start = Instant::now();
    let reps = cli.list_reps.max(1);
    let mut full = Vec::new();
    for _ in 0..reps {
        let (dt, items, _) = list_full(&api).await?;
        if items != created.ok {
            report.anomaly(format!("full list returned {items} items, {} were created", created.ok));
        }
        full.push(ms(dt));
    }
    let mut paged = Vec::new();
    let mut pages_seen = 0;
    for _ in 0..reps {
        let (dt, items, pages) = list_paged(&api, cli.page_size).await?;
        if items != created.ok {
            report.anomaly(format!("paginated list returned {items} items, {} were created", created.ok));
        }
        pages_seen = pages;
        paged.push(ms(dt));
    }
    let list_wall = list_start.elapsed();
    let after = server.sample()?;
    full.sort_by(f64::total_cmp);
    paged.sort_by(f64::total_cmp);
    let items = created.ok as f64;
    for (name, samples) in [("list full", &full), ("list paged", &paged)] {
        report.add(S, format!("{name} repetitions"), samples.len() as f64, "count");
        let (p50, p99) = (percentile(samples, 50.0), percentile(samples, 99.0));
        report.add(S, format!("{name} p50"), p50, "ms");
        report.add(S, format!("{name} p99"), p99, "ms");
        report.add(S, format!("{name} items/s (at p50)"), items / (p50 / 1000.0), "items/s");
    }
    report.add(S, "list paged page size", cli.page_size as f64, "items");
    report.add(S, "list paged pages", pages_seen as f64, "count");
    phase_cpu(report, "lists", &before, &after, list_wall);
    report.add(S, "server rss after lists", after.rss_kib as f64 / 1024.0, "MiB");

    // 3. Watch-event delivery latency.
    let (watchers, updates) = (cli.watchers, cli.updates);
    eprintln!("watch: {watchers} watchers, {updates} updates at {}/s", cli.update_rate);
    let rv = api
        .list(&ListParams::default().limit(1))
        .await
        .context("list for the watch resourceVersion")?
        .metadata
        .resource_version
        .context("list without resourceVersion")?;
    let idle = Duration::from_secs(cli.watch_idle_timeout.max(1));
    let open_start = Instant::now();
    let mut tasks = Vec::with_capacity(watchers);
    for i in 0..watchers {
        let stream =
            api.watch(&WatchParams::default(), &rv).await.with_context(|| format!("opening watch {}", i + 1))?.boxed();
        tasks.push(tokio::spawn(run_watcher(stream, TTL_BASE, updates, idle)));
    }
    let open_wall = open_start.elapsed();
    report.add(S, "watch watchers", watchers as f64, "count");
    report.add(S, "watch open all", ms(open_wall), "ms");

    let before = server.sample()?;
    let watch_start = Instant::now();
    let mut send_at: Vec<Instant> = Vec::with_capacity(updates);
    let mut patch_lat = Vec::with_capacity(updates);
    let mut patch_errors: BTreeMap<String, usize> = BTreeMap::new();
    let period = Duration::from_secs_f64(1.0 / cli.update_rate.max(0.001));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for u in 0..updates {
        tick.tick().await;
        let name = machine_name(u % n.max(1));
        let patch = Patch::Merge(json!({"spec": {"ttlSeconds": TTL_BASE + u as i64}}));
        let t0 = Instant::now();
        send_at.push(t0);
        match api.patch(&name, &PatchParams::default(), &patch).await {
            Ok(_) => patch_lat.push(ms(t0.elapsed())),
            Err(e) => {
                *patch_errors.entry(classify(&e)).or_default() += 1;
                if patch_errors.values().sum::<usize>() >= MAX_ERRORS {
                    break;
                }
            }
        }
    }
    let write_wall = watch_start.elapsed();
    let sent = send_at.len();
    let ok_updates = patch_lat.len();
    eprintln!("watch: writer done after {:.1} s; waiting for the watchers", write_wall.as_secs_f64());
    let mut seen = Vec::with_capacity(watchers);
    for t in tasks {
        seen.push(t.await?);
    }
    let watch_wall = watch_start.elapsed();
    let after = server.sample()?;
    report_errors(report, "update", &patch_errors);

    let mut latencies = Vec::with_capacity(watchers * updates);
    let (mut duplicates, mut out_of_order, mut unexpected, mut short) = (0usize, 0usize, 0usize, 0usize);
    let mut endings: BTreeMap<String, usize> = BTreeMap::new();
    for w in &seen {
        let mut got = vec![false; updates];
        let mut last_rv = i64::MIN;
        for &(k, rv, at) in &w.events {
            if std::mem::replace(&mut got[k], true) {
                duplicates += 1;
            }
            if rv <= last_rv {
                out_of_order += 1;
            }
            last_rv = rv;
            if let Some(sent_at) = send_at.get(k) {
                latencies.push(ms(at.saturating_duration_since(*sent_at)));
            }
        }
        unexpected += w.unexpected;
        if w.events.len() < ok_updates {
            short += 1;
        }
        if let Some(why) = &w.ended {
            *endings.entry(why.clone()).or_default() += 1;
        }
    }
    let delivered = latencies.len();
    let expected = watchers * ok_updates;
    report.add(S, "watch updates sent", ok_updates as f64, "count");
    report.add(S, "watch update rate (target)", cli.update_rate, "updates/s");
    // Sends are one period apart: n sends span n-1 periods.
    if let (Some(first), Some(last)) = (send_at.first(), send_at.last())
        && sent > 1
    {
        let span = last.duration_since(*first).as_secs_f64();
        report.add(S, "watch update rate (achieved)", (sent - 1) as f64 / span, "updates/s");
    }
    report.latencies(S, "watch patch latency", &mut patch_lat);
    report.add(S, "watch delivered", delivered as f64, "events");
    report.add(S, "watch expected", expected as f64, "events");
    report.latencies(S, "watch delivery latency", &mut latencies);
    report.add(S, "watch delivery rate", delivered as f64 / watch_wall.as_secs_f64(), "events/s");
    phase_cpu(report, "watch", &before, &after, watch_wall);
    if delivered != expected {
        report.anomaly(format!(
            "watch: {delivered} deliveries, expected {watchers} watchers x {ok_updates} updates = {expected}; \
             {short} watcher(s) came up short"
        ));
    }
    if duplicates > 0 {
        report.anomaly(format!("watch: {duplicates} duplicate deliveries"));
    }
    if out_of_order > 0 {
        report.anomaly(format!("watch: {out_of_order} events out of resourceVersion order"));
    }
    if unexpected > 0 {
        report.anomaly(format!("watch: {unexpected} events that were none of the writer's updates"));
    }
    for (why, count) in endings {
        report.anomaly(format!("watch: {count} watcher(s) stopped early: {why}"));
    }

    let end = server.sample()?;
    report.add(S, "server cpu (total since start)", end.cpu.as_secs_f64(), "s");
    report.add(S, "server rss peak (VmHWM)", end.peak_rss_kib as f64 / 1024.0, "MiB");
    report.add(S, "server rss at end", end.rss_kib as f64 / 1024.0, "MiB");
    Ok(())
}

/// Warnings and errors the server logged (5xx responses are logged at ERROR by its trace layer).
fn server_log_problems(k: &Kairon, report: &mut Report) {
    let logs = k.logs();
    let bad: Vec<String> = logs
        .lines()
        .map(kairon_e2e::strip_ansi)
        .filter(|l| l.split_whitespace().take(3).any(|w| w == "WARN" || w == "ERROR"))
        .collect();
    report.add("store", "server log warn/error lines", bad.len() as f64, "count");
    for l in bad.iter().take(5) {
        report.anomaly(format!("server log: {}", l.chars().take(300).collect::<String>()));
    }
    if bad.len() > 5 {
        report.anomaly(format!("server log: {} more warn/error lines", bad.len() - 5));
    }
}

async fn run(cli: Cli) -> Result<Report> {
    let mut report = Report::default();
    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    report.info.insert("bench build".into(), json!(profile));
    if matches!(cli.scenario, Scenario::Sandbox | Scenario::All) {
        sandbox::run(&cli, &mut report).await?;
    }
    if matches!(cli.scenario, Scenario::Node | Scenario::All) {
        node::run(&cli, &mut report).await?;
    }
    if matches!(cli.scenario, Scenario::Rest | Scenario::All) {
        rest::run(&cli, &mut report).await?;
    }
    if matches!(cli.scenario, Scenario::Claims | Scenario::All) {
        claims::run(&cli, &mut report).await?;
    }
    if matches!(cli.scenario, Scenario::Controller | Scenario::All) {
        controller::run(&cli, &mut report).await?;
    }
    if matches!(cli.scenario, Scenario::StoreCore | Scenario::All) {
        storecore::run(&cli, &mut report).await?;
    }
    if matches!(cli.scenario, Scenario::Hotpath | Scenario::All) {
        hotpath::run(&cli, &mut report).await?;
    }
    if matches!(cli.scenario, Scenario::Vm | Scenario::All) {
        vm::run(&cli, &mut report).await?;
    }
    if matches!(cli.scenario, Scenario::Network | Scenario::All) {
        network::run(&cli, &mut report).await?;
    }
    if matches!(cli.scenario, Scenario::Migrate | Scenario::All) {
        migrate::run(&cli, &mut report).await?;
    }
    if cli.scenario == Scenario::Cluster {
        cluster::run(&cli, &mut report).await?;
    }
    if cli.scenario == Scenario::Soak {
        soak::run(&cli, &mut report).await?;
    }
    if cli.scenario == Scenario::Autoscale {
        autoscale::run(&cli, &mut report).await?;
    }
    if cli.scenario == Scenario::Sdk {
        sdk::run(&cli, &mut report).await?;
    }
    if cli.scenario == Scenario::Billing {
        billing::run(&cli, &mut report).await?;
    }
    if !matches!(cli.scenario, Scenario::Store | Scenario::All) {
        return Ok(report);
    }
    report.info.insert("kairon binary".into(), json!(kairon_e2e::kairon_bin().display().to_string()));
    report.info.insert("database".into(), json!(kairon_e2e::database_url()));

    eprintln!("starting kairon up ({})", kairon_e2e::kairon_bin().display());
    // The store alone: no node agent or controllers write next to the measured traffic. Every
    // watcher holds a long-lived connection of the bench's one token: the server's limit per
    // token (32 by default, one more answers 429) is raised to what the run opens.
    let most = (cli.watchers + 8).to_string();
    let k = tokio::task::spawn_blocking(move || {
        Kairon::start_with(&["--no-runtime", "--max-connections-per-subject", most.as_str()])
    })
    .await??;
    eprintln!("kairon up at {} (data dir {})", k.url, k.data_dir.path().display());
    let result = async {
        let server = ServerProc::find(&k)?;
        report.info.insert("server pid".into(), json!(server.pid));
        if matches!(cli.scenario, Scenario::Store | Scenario::All) {
            store(&cli, &k, &server, &mut report).await?;
        }
        server_log_problems(&k, &mut report);
        anyhow::Ok(())
    }
    .await;
    if result.is_err() {
        let logs = k.logs();
        let tail: Vec<&str> = logs.lines().rev().take(20).collect();
        eprintln!("server log tail:");
        for l in tail.into_iter().rev() {
            eprintln!("  {l}");
        }
    }
    // Stopping the server and dropping its database block: keep them off the runtime threads.
    tokio::task::spawn_blocking(move || drop(k)).await?;
    result.map(|()| report)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !kairon_e2e::kairon_bin().exists() {
        eprintln!(
            "kairon-bench: no kairon binary at {} (run `cargo build -p kairon`, or set KAIRON_BIN)",
            kairon_e2e::kairon_bin().display()
        );
        return ExitCode::FAILURE;
    }
    let json_out = cli.json;
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kairon-bench: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(report) => {
            if json_out {
                println!("{}", report.to_json());
            } else {
                report.print_table();
            }
            if report.anomalies.is_empty() {
                ExitCode::SUCCESS
            } else {
                eprintln!(
                    "kairon-bench: {} anomal{} (see above)",
                    report.anomalies.len(),
                    if report.anomalies.len() == 1 { "y" } else { "ies" }
                );
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("kairon-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&s, 50.0), 50.0);
        assert_eq!(percentile(&s, 99.0), 99.0);
        assert_eq!(percentile(&s, 100.0), 100.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
        assert_eq!(percentile(&[1.0, 2.0, 3.0], 50.0), 2.0);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0, 5.0], 99.0), 5.0);
        assert!(percentile(&[], 50.0).is_nan());
    }
}
