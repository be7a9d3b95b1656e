//! The `hotpath` scenario: the paths an agent waits on most, each measured three ways in one run
//! against a real `kairon up` (release build for the figures that count):
//!
//! - Kairon: through the REST API, as an SDK sees it;
//! - limit: what this machine cannot go below — a cgroup freezer thaw plus an exec through the
//!   agent already inside the runc container (dialled on its socket, no control plane);
//! - naive: no control plane and no agent — `runc exec` by hand, `runc run` + `runc exec`.
//!
//! Rows: exec round trip on a Running sandbox; claim from a Paused pool → first exec returns
//! (and claim → Bound); wake-on-connect from an idle Pause → exec returns; GET one Machine on
//! the REST and Kubernetes paths beside `/healthz` (wrk, keep-alive, TLS). Every latency row
//! has p50/p90/p99 over `--hotpath-samples`; a lost sample is an anomaly (non-zero exit). The exec
//! row is also taken at the node runtime's API alone, which splits it into its hops: the API
//! layer (kairon − runtime API), the runtime (runtime API − limit) and the agent (limit).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use kairon_e2e::{Kairon, Rest};
use kairon_model::Machine;

use crate::{Cli, Report, ms};

const S: &str = "hotpath";
const NS: &str = "hot";
const POOL: &str = "warm";

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    eprintln!("hotpath: starting kairon up");
    let k = tokio::task::spawn_blocking(|| {
        Kairon::start_with(&["--node-tick", "1s", "--heartbeat-interval", "1s", "--activity-write-interval", "1s"])
    })
    .await??;
    let result = measure(cli, &k, report).await;
    tokio::task::spawn_blocking(move || drop(k)).await?;
    result
}

/// Where `kairon up` keeps the runtime's state for its one node.
fn state_dir(k: &Kairon) -> Result<PathBuf> {
    let nodes = k.data_dir.path().join("runtime");
    let node = std::fs::read_dir(&nodes)
        .with_context(|| format!("reading {}", nodes.display()))?
        .flatten()
        .find(|e| e.path().join("instances").is_dir())
        .context("no runtime state dir under the data dir")?;
    Ok(node.path())
}

/// A sandbox as the runtime keeps it: its agent's socket, its freezer and its memory cgroup.
struct Sandbox {
    id: String,
    socket: PathBuf,
    freezer: PathBuf,
    /// `memory.usage_in_bytes` of its cgroup (the agent, its init, included).
    memory: PathBuf,
    /// The agent: the sandbox's init.
    init_pid: u32,
}

impl Sandbox {
    async fn of(rest: &Rest, state: &Path, name: &str) -> Result<Sandbox> {
        let m = rest.get(&format!("/api/v1/machines/{NS}/{name}")).await;
        let id = m.body["status"]["runtimeID"].as_str().context("the Machine has no runtimeID")?.to_string();
        let dir = state.join("instances").join(&id);
        let pid = std::fs::read_to_string(dir.join("init.pid")).context("reading the sandbox's init.pid")?;
        let cgroups = std::fs::read_to_string(format!("/proc/{}/cgroup", pid.trim()))?;
        let cgroup = |controller: &str| {
            cgroups
                .lines()
                .find_map(|l| l.split_once(&format!(":{controller}:")).map(|(_, p)| p.to_string()))
                .with_context(|| format!("the sandbox's init is in no {controller} cgroup (cgroup v1 expected)"))
        };
        let (freezer, memory) = (cgroup("freezer")?, cgroup("memory")?);
        let socket = dir.join("agent.sock");
        ensure!(
            socket.exists(),
            "the sandbox runs without its agent (no {}): build it with scripts/build-agent",
            socket.display()
        );
        Ok(Sandbox {
            id,
            socket,
            freezer: PathBuf::from(format!("/sys/fs/cgroup/freezer{freezer}/freezer.state")),
            memory: PathBuf::from(format!("/sys/fs/cgroup/memory{memory}/memory.usage_in_bytes")),
            init_pid: pid.trim().parse().context("init.pid")?,
        })
    }

    /// One `kairon-exec` of `true` straight to the agent, spoken as the runtime speaks it.
    async fn agent_exec(&self) -> Result<()> {
        let req = kairon_runtime_api::types::ExecRequest { command: vec!["true".into()], ..Default::default() };
        let done = kairon_runtime::sandbox::agent::exec(&self.socket, &req, 4096).await?;
        ensure!(done.exit_code == 0, "agent exec of true: {done:?}");
        Ok(())
    }

    /// (cgroup memory in use, the agent's resident set), in bytes.
    fn memory(&self) -> Result<(u64, u64)> {
        let usage = std::fs::read_to_string(&self.memory)?.trim().parse()?;
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.init_pid))?;
        let rss_kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .context("the agent's VmRSS")?;
        Ok((usage, rss_kib << 10))
    }

    fn set_freezer(&self, want: &str) -> Result<()> {
        std::fs::write(&self.freezer, want)?;
        while std::fs::read_to_string(&self.freezer)?.trim() != want {
            std::hint::spin_loop();
        }
        Ok(())
    }
}

fn runc(state: &Path) -> Command {
    let mut c = Command::new("runc");
    c.arg("--root").arg(state.join("runc"));
    c
}

fn run_ok(c: &mut Command) -> Result<()> {
    let out = c.output()?;
    ensure!(out.status.success(), "{c:?}: {}", String::from_utf8_lossy(&out.stderr).trim());
    Ok(())
}

async fn measure(cli: &Cli, k: &Kairon, report: &mut Report) -> Result<()> {
    let rest = k.rest()?;
    let n = cli.hotpath_samples.max(1);
    let state = state_dir(k)?;
    report.info.insert("hotpath samples per row".into(), json!(n));

    let created = rest
        .post(
            &format!("/api/v1/machines/{NS}"),
            json!({"metadata": {"name": "hot", "labels": {"kairon.zyvor.dev/sandbox": "true"}},
                   "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true},
                            "lifecycle": {"wakeOnConnect": true, "wakeTimeoutSeconds": 60}}}),
        )
        .await;
    ensure!(created.status == 201, "creating the Machine: {:?}", created.body);
    let up = rest.get(&format!("/api/v1/machines/{NS}/hot/wait?phase=Running&timeoutSeconds=120")).await;
    ensure!(up.status == 200, "the Machine did not run: {:?}", up.body);
    let hot = Sandbox::of(&rest, &state, "hot").await?;

    eprintln!("hotpath: exec round trip ({n} samples each)");
    let exec = json!({"command": ["true"]});
    let before = hops(&rest).await?;
    let mut kairon = samples(report, "exec round trip: kairon", n, || async {
        let r = rest.post(&format!("/api/v1/machines/{NS}/hot/exec"), exec.clone()).await;
        ensure!(r.status == 200 && r.body["exitCode"] == 0, "exec: {} {}", r.status, r.body);
        Ok(())
    })
    .await;
    report.latencies(S, "exec round trip: kairon", &mut kairon);
    report_hops(report, "exec", &before, &hops(&rest).await?);
    // The hops between: the node runtime's API on its own (so kairon − runtime is the API
    // layer's share, runtime − limit the runtime's).
    let runtime = k.runtime()?;
    let instance = kairon_runtime_api::InstanceId::new(hot.id.clone())?;
    let probe = kairon_runtime_api::types::ExecRequest { command: vec!["true".into()], ..Default::default() };
    let mut direct = samples(report, "exec round trip: runtime API", n, || async {
        let r = runtime.exec(&instance, &probe).await?;
        ensure!(r.exit_code == 0, "runtime exec: {r:?}");
        Ok(())
    })
    .await;
    report.latencies(S, "exec round trip: runtime API alone", &mut direct);
    let mut limit = samples(report, "exec round trip: limit", n, || hot.agent_exec()).await;
    report.latencies(S, "exec round trip: limit (agent inside)", &mut limit);
    let mut naive =
        samples(report, "exec round trip: naive", n, || async { run_ok(runc(&state).args(["exec", &hot.id, "true"])) })
            .await;
    report.latencies(S, "exec round trip: naive (runc exec)", &mut naive);

    // The limit of a claim and of a wake: a thaw plus an exec through the agent.
    let mut thaw_exec = samples(report, "thaw + exec: limit", n, || async {
        hot.set_freezer("FROZEN")?;
        let t = Instant::now();
        hot.set_freezer("THAWED")?;
        hot.agent_exec().await?;
        Ok(t.elapsed())
    })
    .await;
    report.latencies(S, "thaw + exec: limit (freezer + agent)", &mut thaw_exec);

    let before = hops(&rest).await?;
    claims(cli, k, &rest, &state, report, n).await?;
    report_hops(report, "claim", &before, &hops(&rest).await?);
    let before = hops(&rest).await?;
    wakes(k, &rest, report, cli.hotpath_wakes.max(1)).await?;
    report_hops(report, "wake", &before, &hops(&rest).await?);
    gets(cli, k, &rest, report)?;
    Ok(())
}

/// The server's hop counters (`kairon_hop_seconds_total` and `kairon_hop_count_total` on
/// `/metrics`, from its `hop.*` tracing spans): hop → (seconds, count).
async fn hops(rest: &Rest) -> Result<BTreeMap<String, (f64, f64)>> {
    let m = rest.get("/metrics").await;
    ensure!(m.status == 200, "/metrics: {} {}", m.status, m.body);
    Ok(parse_hops(m.body.as_str().unwrap_or_default()))
}

fn parse_hops(text: &str) -> BTreeMap<String, (f64, f64)> {
    let mut out = BTreeMap::<String, (f64, f64)>::new();
    for line in text.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let Ok(value) = value.parse::<f64>() else { continue };
        let (seconds, rest) = if let Some(r) = series.strip_prefix("kairon_hop_seconds_total{hop=\"") {
            (true, r)
        } else if let Some(r) = series.strip_prefix("kairon_hop_count_total{hop=\"") {
            (false, r)
        } else {
            continue;
        };
        let Some(hop) = rest.strip_suffix("\"}") else { continue };
        let e = out.entry(hop.to_string()).or_default();
        if seconds { e.0 = value } else { e.1 = value }
    }
    out
}

/// Each hop's mean over the phase between two scrapes, and how often it ran. Background work
/// of the same phase (the pool starting a replacement, the node agent's reconciles) runs the
/// store's hops too: their counts say so.
fn report_hops(
    report: &mut Report,
    phase: &str,
    before: &BTreeMap<String, (f64, f64)>,
    after: &BTreeMap<String, (f64, f64)>,
) {
    for (hop, (secs, count)) in after {
        let (secs0, count0) = before.get(hop).copied().unwrap_or_default();
        let runs = count - count0;
        if runs > 0.0 {
            report.add(S, format!("{phase} hops: {hop} mean ({runs} runs)"), (secs - secs0) / runs * 1000.0, "ms");
        }
    }
}

/// `n` timed runs of `f`; a failure is an anomaly and ends the row (so a lost sample shows).
/// `f` may return the span it timed itself (a `Duration`) or `()` to be timed whole.
async fn samples<F, Fut, T>(report: &mut Report, what: &str, n: usize, mut f: F) -> Vec<f64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
    T: Timed,
{
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        match f().await {
            Ok(timed) => out.push(ms(timed.or(t.elapsed()))),
            Err(e) => {
                report.anomaly(format!("{what}: sample {i} of {n} lost: {e:#}"));
                break;
            }
        }
    }
    out
}

trait Timed {
    fn or(self, whole: Duration) -> Duration;
}
impl Timed for () {
    fn or(self, whole: Duration) -> Duration {
        whole
    }
}
impl Timed for Duration {
    fn or(self, _: Duration) -> Duration {
        self
    }
}

/// A pool of `size` Paused busybox sandboxes with their guest agent (what an agent claims from).
pub async fn paused_pool(rest: &Rest, ns: &str, name: &str, size: u32) -> Result<()> {
    let pool = rest
        .post(
            &format!("/api/v1/machinepools/{ns}"),
            json!({"metadata": {"name": name},
                   "spec": {"replicas": size, "warmPowerState": "Paused", "warmupSeconds": 1,
                            "template": {"metadata": {"labels": {"kairon.zyvor.dev/sandbox": "true"}},
                                         "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true}}}}}),
        )
        .await;
    ensure!(pool.status == 201, "creating the pool: {:?}", pool.body);
    Ok(())
}

/// Claims from a Paused pool: claim → Bound and claim → first exec (Kairon), and the naive cold
/// start without a pool (`runc run` + `runc exec` of the same template).
async fn claims(cli: &Cli, k: &Kairon, rest: &Rest, state: &Path, report: &mut Report, n: usize) -> Result<()> {
    let size = cli.pool_size.max(1);
    paused_pool(rest, NS, POOL, size).await?;
    let pools: Api<kairon_model::MachinePool> = Api::namespaced(k.client().await?, NS);
    eprintln!("hotpath: claim → first exec ({n} claims from a Paused pool of {size})");
    let mut bound = Vec::with_capacity(n);
    let mut first_exec = Vec::with_capacity(n);
    let mut first_exec_alone = Vec::with_capacity(n);
    let mut second_exec = Vec::with_capacity(n);
    let mut released = Vec::new();
    crate::claims::wait_full_with(&pools, POOL, size as i32, Duration::from_secs(300), |_| {}).await?;
    paused_memory(rest, state, report).await?;
    for i in 0..n {
        crate::claims::wait_full_with(&pools, POOL, size as i32, Duration::from_secs(300), |_| {}).await?;
        let name = format!("c{i}");
        let t = Instant::now();
        let r = async {
            let c = rest
                .post(
                    &format!("/api/v1/machineclaims/{NS}"),
                    json!({"metadata": {"name": name}, "spec": {"poolName": POOL}}),
                )
                .await;
            ensure!(c.status == 201, "claim: {} {}", c.status, c.body);
            // A claim binds in its create request when a member is warm; else wait for it.
            let b = if c.body["status"]["phase"] == "Bound" {
                c
            } else {
                let b =
                    rest.get(&format!("/api/v1/machineclaims/{NS}/{name}/wait?phase=Bound&timeoutSeconds=60")).await;
                ensure!(b.status == 200, "claim not Bound: {} {}", b.status, b.body);
                b
            };
            let to_bound = t.elapsed();
            let machine =
                b.body["status"]["machineName"].as_str().context("a Bound claim names its Machine")?.to_string();
            let e = rest.post(&format!("/api/v1/machines/{NS}/{machine}/exec"), json!({"command": ["true"]})).await;
            ensure!(e.status == 200 && e.body["exitCode"] == 0, "first exec: {} {}", e.status, e.body);
            let to_first = t.elapsed();
            // The next exec at once: what the first costs beyond a steady one (the resume, and
            // the pool starting the member's replacement beside it) is first − second.
            let t2 = Instant::now();
            let e = rest.post(&format!("/api/v1/machines/{NS}/{machine}/exec"), json!({"command": ["true"]})).await;
            ensure!(e.status == 200 && e.body["exitCode"] == 0, "second exec: {} {}", e.status, e.body);
            Ok((to_bound, to_first, t2.elapsed(), machine))
        }
        .await;
        match r {
            Ok((b, e, e2, machine)) => {
                released.push(machine);
                bound.push(ms(b));
                first_exec.push(ms(e));
                first_exec_alone.push(ms(e - b));
                second_exec.push(ms(e2));
                if (i + 1) % 20 == 0 {
                    eprintln!("  {} claims: last Bound after {:.1} ms, first exec after {:.1} ms", i + 1, ms(b), ms(e));
                }
            }
            Err(e) => {
                report.anomaly(format!("claim → first exec: sample {i} of {n} lost: {e:#}"));
                break;
            }
        }
        let gone = rest.delete(&format!("/api/v1/machineclaims/{NS}/{name}")).await;
        ensure!(gone.status < 300, "releasing the claim: {} {}", gone.status, gone.body);
        // Samples stand alone: as the pool is full again before each claim (the last refill
        // done), the last claim's teardown (its sandbox stopped and removed) is done too.
        for machine in released.drain(..) {
            let w = rest.get(&format!("/api/v1/machines/{NS}/{machine}/wait?deleted=true&timeoutSeconds=60")).await;
            ensure!(w.status == 200 || w.status == 404, "the released {machine} is not gone: {} {}", w.status, w.body);
        }
    }
    report.latencies(S, "claim → Bound: kairon", &mut bound);
    report.latencies(S, "claim → first exec: kairon", &mut first_exec);
    report.latencies(S, "claim hops: Bound → first exec returns", &mut first_exec_alone);
    report.latencies(S, "claim hops: the exec after the first", &mut second_exec);

    // Naive: a fresh container of the same template, started and exec'd by hand.
    let bundle = tempfile::tempdir()?;
    run_ok(Command::new("runc").args(["spec", "--bundle"]).arg(bundle.path()))?;
    let cfg_path = bundle.path().join("config.json");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&cfg_path)?)?;
    cfg["root"] = json!({"path": state.join("templates/busybox/rootfs"), "readonly": true});
    cfg["process"]["terminal"] = json!(false);
    cfg["process"]["args"] = json!(["sleep", "1000"]);
    std::fs::write(&cfg_path, serde_json::to_vec(&cfg)?)?;
    eprintln!("hotpath: cold start → first exec by hand ({n} runc run + runc exec)");
    let mut naive = samples(report, "cold start → first exec: naive", n, || async {
        let id = format!("kairon-bench-naive-{}", std::process::id());
        // Detached: the container keeps its stdio, so none of it may be a pipe read to its end.
        let null = std::process::Stdio::null;
        // Timed from `runc run` to the exec's return; the delete after it is not part of a start.
        let t = Instant::now();
        let started = run_ok(
            runc(state)
                .args(["run", "-d", "-b"])
                .arg(bundle.path())
                .arg(&id)
                .stdin(null())
                .stdout(null())
                .stderr(null()),
        )
        .and_then(|()| run_ok(runc(state).args(["exec", &id, "true"])))
        .map(|()| t.elapsed());
        let _ = runc(state).args(["delete", "-f", &id]).output();
        started
    })
    .await;
    report.latencies(S, "cold start → first exec: naive (runc run + exec)", &mut naive);
    let _ = rest.delete(&format!("/api/v1/machinepools/{NS}/{POOL}")).await;
    Ok(())
}

/// What a warm Paused member holds: its cgroup's memory in use (the agent included) and, of
/// that, the agent's resident set.
async fn paused_memory(rest: &Rest, state: &Path, report: &mut Report) -> Result<()> {
    let members = rest.get(&format!("/api/v1/machines/{NS}?labelSelector=kairon.zyvor.dev/pool%3D{POOL}")).await;
    let names: Vec<String> = members.body["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["status"]["phase"] == "Paused")
        .filter_map(|m| m["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    ensure!(!names.is_empty(), "the pool has no Paused member to measure: {}", members.body);
    let (mut usage, mut agent) = (0u64, 0u64);
    for name in &names {
        let (u, a) = Sandbox::of(rest, state, name).await?.memory()?;
        usage += u;
        agent += a;
    }
    let mib = |b: u64| b as f64 / names.len() as f64 / (1u64 << 20) as f64;
    report.add(S, "memory per Paused sandbox (cgroup usage, agent included)", mib(usage), "MiB");
    report.add(S, "memory per Paused sandbox: agent RSS", mib(agent), "MiB");
    Ok(())
}

/// Wake-on-connect: the Machine idle-suspended as the lifecycle controller does it, then an exec.
async fn wakes(k: &Kairon, rest: &Rest, report: &mut Report, n: usize) -> Result<()> {
    eprintln!("hotpath: wake-on-connect → exec ({n} wakes)");
    let kube: Api<Machine> = Api::namespaced(k.client().await?, NS);
    let mut wake = Vec::with_capacity(n);
    for i in 0..n {
        let patch = json!({"spec": {"powerState": "Paused"},
                           "metadata": {"annotations": {"kairon.zyvor.dev/idle-suspended": "Pause"}}});
        kube.patch("hot", &PatchParams::default(), &Patch::Merge(&patch)).await.context("idle-suspending")?;
        let paused = rest.get(&format!("/api/v1/machines/{NS}/hot/wait?phase=Paused&timeoutSeconds=60")).await;
        ensure!(paused.status == 200, "the Machine did not pause: {:?}", paused.body);
        let t = Instant::now();
        let r = rest.post(&format!("/api/v1/machines/{NS}/hot/exec"), json!({"command": ["true"]})).await;
        if r.status != 200 || r.body["exitCode"] != 0 {
            report.anomaly(format!("wake → exec: sample {i} of {n} lost: {} {}", r.status, r.body));
            break;
        }
        wake.push(ms(t.elapsed()));
        if (i + 1) % 200 == 0 {
            eprintln!("  {} wakes, the last exec back after {:.1} ms", i + 1, ms(t.elapsed()));
        }
    }
    // An exec that met a frozen sandbox would not have come back (a lost sample above).
    report.add(S, "wake-on-connect cycles, every exec answered", wake.len() as f64, "count");
    report.latencies(S, "wake-on-connect → exec: kairon", &mut wake);
    Ok(())
}

/// GET one Machine with wrk (8 connections, keep-alive, TLS) on the REST and Kubernetes paths,
/// beside `/healthz` on the same server (the limit).
fn gets(cli: &Cli, k: &Kairon, rest: &Rest, report: &mut Report) -> Result<()> {
    if Command::new("wrk").arg("--version").output().is_err() {
        report.anomaly("wrk is not installed (apt-get install wrk): the GET rows were not measured");
        return Ok(());
    }
    let secs = cli.hotpath_seconds.max(1);
    let auth = format!("Authorization: Bearer {}", rest.token);
    for (what, path) in [
        ("GET machine: kairon REST", format!("/api/v1/machines/{NS}/hot")),
        ("GET machine: kairon Kubernetes path", format!("/apis/kairon.zyvor.dev/v1/namespaces/{NS}/machines/hot")),
        ("GET /healthz: limit", "/healthz".to_string()),
    ] {
        eprintln!("hotpath: {what} (wrk, 8 connections, {secs} s)");
        let out = Command::new("wrk")
            .args(["-t2", "-c8", &format!("-d{secs}s"), "--latency", "-H", &auth])
            .arg(format!("{}{path}", k.url))
            .output()
            .context("running wrk")?;
        let text = String::from_utf8_lossy(&out.stdout);
        let wrk = parse_wrk(&text).with_context(|| format!("reading wrk's output: {text}"))?;
        if wrk.non_2xx > 0 || wrk.errors > 0 {
            report.anomaly(format!("{what}: {} non-2xx answers, {} socket errors", wrk.non_2xx, wrk.errors));
        }
        report.add(S, format!("{what} rate"), wrk.rate, "req/s");
        for (p, v) in wrk.percentiles {
            report.add(S, format!("{what} p{p}"), v, "ms");
        }
    }
    Ok(())
}

struct Wrk {
    rate: f64,
    percentiles: Vec<(u32, f64)>,
    non_2xx: u64,
    errors: u64,
}

/// wrk's `Requests/sec:`, its `--latency` distribution (p50/p90/p99) and its error lines.
fn parse_wrk(text: &str) -> Result<Wrk> {
    let mut w = Wrk { rate: f64::NAN, percentiles: Vec::new(), non_2xx: 0, errors: 0 };
    for line in text.lines().map(str::trim) {
        if let Some(r) = line.strip_prefix("Requests/sec:") {
            w.rate = r.trim().parse()?;
        } else if let Some(n) = line.strip_prefix("Non-2xx or 3xx responses:") {
            w.non_2xx = n.trim().parse()?;
        } else if let Some(rest) = line.strip_prefix("Socket errors:") {
            w.errors = rest.split(',').filter_map(|f| f.split_whitespace().last()?.parse::<u64>().ok()).sum();
        } else if let Some((p, v)) = line.split_once("% ")
            && let Ok(p @ (50 | 90 | 99)) = p.parse::<u32>()
        {
            w.percentiles.push((p, wrk_ms(v.trim())?));
        }
    }
    if w.rate.is_nan() {
        bail!("no Requests/sec line");
    }
    Ok(w)
}

fn wrk_ms(v: &str) -> Result<f64> {
    let (num, unit) = v.split_at(v.find(|c: char| c.is_ascii_alphabetic()).context("a unit")?);
    let n: f64 = num.parse()?;
    Ok(match unit {
        "us" => n / 1000.0,
        "ms" => n,
        "s" => n * 1000.0,
        "m" => n * 60_000.0,
        other => bail!("unknown unit {other}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_counters_are_read() {
        let text = "# TYPE kairon_hop_count_total counter\nkairon_hop_count_total{hop=\"claim.bind\"} 4\n\
                    kairon_hop_seconds_total{hop=\"claim.bind\"} 0.02\nkairon_lifecycle_actions_total{action=\"Pause\"} 1\n";
        let hops = parse_hops(text);
        assert_eq!(hops.len(), 1);
        assert_eq!(hops["claim.bind"], (0.02, 4.0));
    }

    #[test]
    fn wrk_output_is_read() {
        let text = "Running 2s test @ https://127.0.0.1:1/healthz\n  2 threads and 8 connections\n  Latency Distribution\n     50%  250.00us\n     75%  400.00us\n     90%    1.20ms\n     99%    2.50s\n  4000 requests in 2.00s, 1.00MB read\n  Socket errors: connect 0, read 1, write 0, timeout 2\n  Non-2xx or 3xx responses: 5\nRequests/sec:   2000.50\nTransfer/sec:    500.00KB\n";
        let w = parse_wrk(text).unwrap();
        assert_eq!(w.rate, 2000.5);
        assert_eq!(w.percentiles, [(50, 0.25), (90, 1.2), (99, 2500.0)]);
        assert_eq!((w.non_2xx, w.errors), (5, 3));
    }
}
