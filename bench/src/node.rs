//! The `node` scenario: the node agent's CPU per reconcile tick with many lifecycle sandboxes
//! on real runc (`kairon up --no-runtime`, a `kairon runtime`, a `kairon controller` and a
//! `kairon node` process, so the node agent's CPU is measured alone).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::StreamExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use kairon_e2e::{Kairon, Process};
use kairon_model::{Machine, MachinePhase};

use crate::{Cli, Report, ServerProc};

const S: &str = "node";

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    let n = cli.node_machines;
    let tick = 2u64;
    let k = tokio::task::spawn_blocking(|| Kairon::start_with(&["--no-runtime"])).await??;
    let state = tempfile::tempdir()?;
    let token = "bench-node-token-of-at-least-32-bytes";
    let state_path = state.path().to_string_lossy().to_string();
    let runtime = Process::start(
        &["runtime", "--listen", "127.0.0.1:0", "--node-name", "bench", "--token", token, "--state-dir", &state_path],
        "is up at",
    )?;
    let endpoint = runtime.ready_line.split_whitespace().last().context("runtime URL")?.to_string();
    let kubeconfig = k.kubeconfig.to_string_lossy().to_string();
    let tick_s = format!("{tick}s");
    let node = Process::start(
        &[
            "node",
            "--kubeconfig",
            &kubeconfig,
            "--node-name",
            "bench",
            "--runtime-endpoint",
            &endpoint,
            "--runtime-token",
            token,
            "--node-tick",
            &tick_s,
            "--heartbeat-interval",
            "10s",
            "--node-memory",
            "64Gi",
            "--node-cpu",
            "10000",
        ],
        "is up",
    )?;
    // The controllers (the scheduler places the sandboxes) in their own process.
    let controllers =
        Process::start(&["controller", "--kubeconfig", &kubeconfig, "--identity", "bench-node"], "is up")?;
    let client = k.client().await?;
    let api: Api<Machine> = Api::namespaced(client, "bench");
    let rt = kairon_runtime_api::RuntimeClient::new(&endpoint, token)?;
    let result = measure(&api, n, tick, node.child.id(), report).await;

    // Leave nothing running on the host: delete every Machine, then anything the runtime holds.
    eprintln!("cleaning up {n} sandboxes");
    let _ = api.delete_collection(&DeleteParams::default(), &ListParams::default()).await;
    let deadline = Instant::now() + Duration::from_secs(300);
    while Instant::now() < deadline && !rt.list().await.map(|v| v.is_empty()).unwrap_or(true) {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for vm in rt.list().await.unwrap_or_default() {
        let _ = rt.delete(&vm.id).await;
    }
    drop(node);
    drop(controllers);
    drop(runtime);
    tokio::task::spawn_blocking(move || drop(k)).await?;
    result
}

async fn measure(api: &Api<Machine>, n: usize, tick: u64, node_pid: u32, report: &mut Report) -> Result<()> {
    let t = Instant::now();
    let creates = futures::stream::iter(0..n).map(|i| {
        let api = api.clone();
        async move {
            let m: Machine = serde_json::from_value(json!({
                "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
                "metadata": {"name": format!("idle-{i}")},
                "spec": {"sandbox": {"templateName": "busybox"}, "lifecycle": {"idleTimeoutSeconds": 3600}}
            }))?;
            api.create(&PostParams::default(), &m).await?;
            anyhow::Ok(())
        }
    });
    let results: Vec<_> = creates.buffer_unordered(16).collect().await;
    for r in results {
        r?;
    }
    eprintln!("created {n} Machines in {:?}; waiting for them to run", t.elapsed());
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let running = api
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|m| m.status.as_ref().and_then(|s| s.phase) == Some(MachinePhase::Running))
            .count();
        if running == n {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "only {running} of {n} Machines running after 10 minutes");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    report.add(S, format!("{n} lifecycle sandboxes running after"), t.elapsed().as_secs_f64(), "s");
    // Let the first samples settle, then measure the node agent over whole ticks.
    tokio::time::sleep(Duration::from_secs(2 * tick)).await;
    let proc = ServerProc { pid: node_pid, clk_tck: 100.0 };
    let ticks = 10u64;
    let before = proc.sample()?;
    tokio::time::sleep(Duration::from_secs(ticks * tick)).await;
    let after = proc.sample()?;
    let cpu = after.cpu.saturating_sub(before.cpu).as_secs_f64();
    report.add(S, format!("node agent cpu per tick ({n} machines)"), cpu * 1000.0 / ticks as f64, "ms");
    report.add(S, "node agent cpu per machine per tick", cpu * 1e6 / ticks as f64 / n as f64, "us");
    report.add(S, "node agent cpu share", cpu / (ticks * tick) as f64, "cores");
    report.add(S, "node agent rss", after.rss_kib as f64 / 1024.0, "MiB");
    Ok(())
}
