//! The `node` scenario: one node holding many Paused sandboxes on real runc — a MachinePool of
//! `--sandboxes` members (default 1000) kept Paused — measured at that size: memory per Paused
//! member (the members' cgroups), the node agent's CPU per reconcile tick, and claim-to-Bound /
//! claim-to-Running from the full pool. With `--node-machines M`, M Running lifecycle sandboxes
//! join them and the node agent's CPU per tick is measured again.
//!
//! `kairon up --no-runtime`, a `kairon runtime`, a `kairon controller` and a `kairon node` run
//! as separate processes, so the node agent's CPU is measured alone; the node advertises enough
//! capacity for every member (a 2-core host would otherwise offer 20 sandbox slots). At the end,
//! after deleting everything, nothing may be left: no runc instance, mount, loop device or
//! cgroup of this node, and the store's rows back to their count before the run.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use kairon_e2e::{Kairon, Process};
use kairon_model::keys::labels;
use kairon_model::{Machine, MachineClaim, MachinePhase, MachinePool};

use crate::leaks::{self, NodeFootprint};
use crate::{Cli, Report, ServerProc};

const S: &str = "node";
const NS: &str = "bench";
const POOL: &str = "paused";
/// What the scheduler counts for a template sandbox (reconciler/src/scheduler.rs).
const SANDBOX_MEMORY_MIB: usize = 64;
const DEFAULT_SANDBOXES: usize = 1000;

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    let n = cli.sandboxes.unwrap_or(DEFAULT_SANDBOXES).max(1);
    let extra = cli.node_machines.unwrap_or(0);
    let tick = 2u64;
    // Its own node name: the cgroup parent (kairon-<node>) is then this run's alone.
    let node_name = format!("bench-node-{}", std::process::id());
    let k = tokio::task::spawn_blocking(|| Kairon::start_with(&["--no-runtime"])).await??;
    let state = tempfile::Builder::new().prefix("kairon-bench-node-").tempdir()?;
    let footprint = NodeFootprint::new(state.path(), &node_name);
    let token = "bench-node-token-of-at-least-32-bytes";
    let state_path = state.path().to_string_lossy().to_string();
    let result = async {
        let runtime = Process::start(
            &[
                "runtime",
                "--listen",
                "127.0.0.1:0",
                "--node-name",
                &node_name,
                "--token",
                token,
                "--state-dir",
                &state_path,
            ],
            "is up at",
        )?;
        let endpoint = runtime.ready_line.split_whitespace().last().context("runtime URL")?.to_string();
        let kubeconfig = k.kubeconfig.to_string_lossy().to_string();
        let tick_s = format!("{tick}s");
        // Room for every member, the refills after claims and the Running extras.
        let memory = format!("{}Mi", ((n + extra + 64) * SANDBOX_MEMORY_MIB).max(64 << 10));
        let node = Process::start(
            &[
                "node",
                "--kubeconfig",
                &kubeconfig,
                "--node-name",
                &node_name,
                "--runtime-endpoint",
                &endpoint,
                "--runtime-token",
                token,
                "--node-tick",
                &tick_s,
                "--heartbeat-interval",
                "10s",
                "--node-memory",
                &memory,
                "--node-cpu",
                "10000",
            ],
            "is up",
        )?;
        // The controllers (the scheduler places the sandboxes, the pool keeps them) on their own.
        let controllers =
            Process::start(&["controller", "--kubeconfig", &kubeconfig, "--identity", "bench-node"], "is up")?;
        let db = k.database_url().context("the bench's kairon up runs on a test database")?.to_string();
        let baseline = leaks::settled_counts(&db).await?;
        let client = k.client().await?;
        let rt = kairon_runtime_api::RuntimeClient::new(&endpoint, token)?;
        let measured = measure(cli, &client, n, extra, tick, &footprint, &node, &runtime, report).await;

        // Leave nothing running on the host: delete the claims, the pool and every Machine
        // (their finalizers remove the runtime instances), then check nothing is left.
        eprintln!("node: cleaning up");
        let t = Instant::now();
        let cleaned = clean_up(&client, &rt, n + extra).await;
        report.add(S, "cleanup (delete everything) took", t.elapsed().as_secs_f64(), "s");
        let after = leaks::object_counts(&db)?;
        drop(controllers);
        drop(node);
        drop(runtime);
        measured?;
        cleaned?;
        for leak in footprint.leaks() {
            report.anomaly(format!("node: leak after cleanup: {leak}"));
        }
        for change in leaks::count_changes(&baseline, &after) {
            report.anomaly(format!("node: database rows not back after cleanup: {change}"));
        }
        report.add(S, "events left in the store", after.get(leaks::EVENTS).copied().unwrap_or(0) as f64, "count");
        anyhow::Ok(())
    }
    .await;
    // Whatever happened: no sandbox of this run outlives it.
    let dir = state.path().to_path_buf();
    tokio::task::spawn_blocking(move || kairon_e2e::remove_sandboxes(&dir)).await?;
    footprint.remove_cgroup_parents();
    tokio::task::spawn_blocking(move || drop(k)).await?;
    result
}

async fn clean_up(client: &kube::Client, rt: &kairon_runtime_api::RuntimeClient, n: usize) -> Result<()> {
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let dp = DeleteParams::default();
    claims.delete_collection(&dp, &ListParams::default()).await?;
    pools.delete_collection(&dp, &ListParams::default()).await?;
    machines.delete_collection(&dp, &ListParams::default()).await?;
    let limit = Duration::from_secs(120 + n as u64);
    leaks::wait_until("every Machine to be deleted", limit, Duration::from_secs(1), || async {
        Ok(machines.list(&ListParams::default().limit(1)).await?.items.is_empty()
            && claims.list(&ListParams::default().limit(1)).await?.items.is_empty()
            && pools.list(&ListParams::default().limit(1)).await?.items.is_empty())
    })
    .await?;
    leaks::wait_until("the runtime to hold no instance", Duration::from_secs(120), Duration::from_secs(1), || async {
        Ok(rt.list().await?.is_empty())
    })
    .await
}

/// The `kairon node` and `kairon runtime` processes, sampled from /proc.
fn proc_of(p: &Process) -> ServerProc {
    ServerProc { pid: p.child.id(), clk_tck: 100.0 }
}

/// MemAvailable of the host, in KiB.
fn mem_available_kib() -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The node agent's CPU over `ticks` whole ticks.
async fn cpu_per_tick(node: &Process, n: usize, label: &str, tick: u64, report: &mut Report) -> Result<()> {
    // Let the first samples settle, then measure over whole ticks.
    tokio::time::sleep(Duration::from_secs(2 * tick)).await;
    let proc = proc_of(node);
    let ticks = 10u64;
    let before = proc.sample()?;
    tokio::time::sleep(Duration::from_secs(ticks * tick)).await;
    let after = proc.sample()?;
    let cpu = after.cpu.saturating_sub(before.cpu).as_secs_f64();
    report.add(S, format!("node agent cpu per tick ({n} {label})"), cpu * 1000.0 / ticks as f64, "ms");
    report.add(S, format!("node agent cpu per machine per tick ({label})"), cpu * 1e6 / ticks as f64 / n as f64, "us");
    report.add(S, format!("node agent cpu share ({label})"), cpu / (ticks * tick) as f64, "cores");
    report.add(S, format!("node agent rss ({label})"), after.rss_kib as f64 / 1024.0, "MiB");
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn measure(
    cli: &Cli,
    client: &kube::Client,
    n: usize,
    extra: usize,
    tick: u64,
    footprint: &NodeFootprint,
    node: &Process,
    runtime: &Process,
    report: &mut Report,
) -> Result<()> {
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    let available_before = mem_available_kib();
    let runtime_before = proc_of(runtime).sample()?;

    // 1. N Paused members.
    let pool: MachinePool = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool",
        "metadata": {"name": POOL},
        "spec": {"replicas": n, "warmPowerState": "Paused", "warmupSeconds": 1,
                 "template": {"metadata": {"labels": {"kairon.zyvor.dev/sandbox": "true"}},
                              "spec": {"sandbox": {"templateName": "busybox"},
                                       "lifecycle": {"idleTimeoutSeconds": 3600, "idleAction": "Pause"}}}}
    }))?;
    let t = Instant::now();
    pools.create(&PostParams::default(), &pool).await?;
    eprintln!("node: pool of {n} Paused members created; waiting for them to be warm");
    let mut last_progress = Instant::now();
    crate::claims::wait_full_with(&pools, POOL, n as i32, Duration::from_secs(300 + 3 * n as u64), |warm| {
        if last_progress.elapsed() >= Duration::from_secs(30) {
            eprintln!("node: {warm} of {n} warm after {:.0} s", t.elapsed().as_secs_f64());
            last_progress = Instant::now();
        }
    })
    .await?;
    let warm_after = t.elapsed();
    report.add(S, format!("{n} Paused sandboxes warm after"), warm_after.as_secs_f64(), "s");
    report.add(S, "Paused sandboxes warmed per second", n as f64 / warm_after.as_secs_f64(), "sandboxes/s");

    // 2. Memory per Paused member, from the members' cgroups.
    let members: Vec<Machine> = machines
        .list(&ListParams::default().labels(&format!("{}={POOL}", labels::POOL)))
        .await?
        .items
        .into_iter()
        .filter(|m| !m.labels().contains_key(labels::CLAIM))
        .collect();
    let (mut usage, mut rss, mut cache, mut frozen, mut paused, mut read) = (0u64, 0u64, 0u64, 0usize, 0usize, 0usize);
    for m in &members {
        let status = m.status.as_ref();
        if status.and_then(|s| s.phase) == Some(MachinePhase::Paused) {
            paused += 1;
        }
        let Some(id) = status.and_then(|s| s.runtime_id.as_deref()) else { continue };
        let Ok(u) = std::fs::read_to_string(footprint.cgroup_file("memory", id, "memory.usage_in_bytes")) else {
            continue;
        };
        read += 1;
        usage += u.trim().parse::<u64>().unwrap_or(0);
        let stat = std::fs::read_to_string(footprint.cgroup_file("memory", id, "memory.stat")).unwrap_or_default();
        let field = |k: &str| {
            stat.lines()
                .find_map(|l| l.strip_prefix(k).and_then(|v| v.strip_prefix(' ')))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        rss += field("total_rss");
        cache += field("total_cache");
        let state = std::fs::read_to_string(footprint.cgroup_file("freezer", id, "freezer.state")).unwrap_or_default();
        if state.trim() == "FROZEN" {
            frozen += 1;
        }
    }
    if members.len() != n || paused != n || read != n || frozen != n {
        report.anomaly(format!(
            "node: {} unclaimed members, {paused} Paused, {read} with a memory cgroup, {frozen} frozen; {n} expected",
            members.len()
        ));
    }
    let per = |b: u64| b as f64 / n as f64 / (1 << 20) as f64;
    report.add(S, "Paused members measured", read as f64, "count");
    report.add(S, "memory per Paused member (cgroup usage)", per(usage), "MiB");
    report.add(S, "memory per Paused member (rss)", per(rss), "MiB");
    report.add(S, "memory per Paused member (page cache)", per(cache), "MiB");
    report.add(S, format!("memory of {n} Paused members (cgroup usage)"), usage as f64 / (1u64 << 30) as f64, "GiB");
    if let (Some(b), Some(a)) = (available_before, mem_available_kib()) {
        // Everything the host gave up, kernel memory (mounts, loop devices) included; other work
        // on the host moves it too.
        report.add(S, "host MemAvailable drop per member", b.saturating_sub(a) as f64 / n as f64 / 1024.0, "MiB");
    }
    let runtime_now = proc_of(runtime).sample()?;
    report.add(S, format!("runtime rss ({n} Paused)"), runtime_now.rss_kib as f64 / 1024.0, "MiB");
    report.add(S, "runtime cpu while warming", runtime_now.cpu.saturating_sub(runtime_before.cpu).as_secs_f64(), "s");

    // 3. The node agent's CPU per tick at that size.
    cpu_per_tick(node, n, "Paused", tick, report).await?;

    // 4. Claims from the full pool at that size.
    let (mut to_bound, mut to_running) = (Vec::new(), Vec::new());
    for i in 0..cli.claims {
        crate::claims::wait_full_with(&pools, POOL, n as i32, Duration::from_secs(300), |_| {}).await?;
        let name = format!("job-{i}");
        let (b, r) = crate::claims::claim_once(&claims, &machines, POOL, &name).await?;
        to_bound.push(crate::ms(b));
        to_running.push(crate::ms(r));
        eprintln!("  {name}: Bound after {:.1} ms, Running after {:.1} ms", crate::ms(b), crate::ms(r));
        claims.delete(&name, &DeleteParams::default()).await?;
    }
    report.latencies(S, &format!("claim to Bound ({n} Paused)"), &mut to_bound);
    report.latencies(S, &format!("claim to Running ({n} Paused)"), &mut to_running);

    // 5. Running lifecycle sandboxes beside them (--node-machines).
    if extra > 0 {
        let t = Instant::now();
        let creates = futures::stream::iter(0..extra).map(|i| {
            let machines = machines.clone();
            async move {
                let m: Machine = serde_json::from_value(json!({
                    "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
                    "metadata": {"name": format!("idle-{i}")},
                    "spec": {"sandbox": {"templateName": "busybox"}, "lifecycle": {"idleTimeoutSeconds": 3600}}
                }))?;
                machines.create(&PostParams::default(), &m).await?;
                anyhow::Ok(())
            }
        });
        for r in creates.buffer_unordered(16).collect::<Vec<_>>().await {
            r?;
        }
        eprintln!("node: created {extra} Running lifecycle Machines in {:?}; waiting for them to run", t.elapsed());
        leaks::wait_until(
            &format!("{extra} Running lifecycle Machines"),
            Duration::from_secs(300 + 2 * extra as u64),
            Duration::from_secs(2),
            || async {
                let running = machines
                    .list(&ListParams::default())
                    .await?
                    .items
                    .iter()
                    .filter(|m| m.name_any().starts_with("idle-"))
                    .filter(|m| m.status.as_ref().and_then(|s| s.phase) == Some(MachinePhase::Running))
                    .count();
                Ok(running == extra)
            },
        )
        .await?;
        report.add(S, format!("{extra} lifecycle sandboxes running after"), t.elapsed().as_secs_f64(), "s");
        cpu_per_tick(node, n + extra, &format!("Paused + {extra} Running"), tick, report).await?;
    }
    Ok(())
}
