//! The `controller` scenario: the CPU and memory of `kairon controller` (all controllers, leader-
//! elected, in their own process) over many lifecycle Machines. For scale only, the node is
//! simulated: the bench itself writes each Machine's status (Running on node `sim`, as a node
//! agent would) and, in the steady phase, stamps `last-activity` on a few Machines a second (as
//! relay sessions do), so the controllers see real watch traffic from a real `kairon up`
//! without 10,000 sandboxes on this host.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use kairon_e2e::{Kairon, Process};
use kairon_model::Machine;

use crate::{Cli, Report, ServerProc};

const S: &str = "controller";
const NS: &str = "bench-ctl";

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    // The API alone: no node agent, no controllers besides the one measured.
    let k = tokio::task::spawn_blocking(|| Kairon::start_with(&["--no-runtime"])).await??;
    let result = measure(cli, &k, report).await;
    tokio::task::spawn_blocking(move || drop(k)).await?;
    result
}

fn name(i: usize) -> String {
    format!("agent-{i:05}")
}

async fn populate(api: &Api<Machine>, n: usize) -> Result<()> {
    let t = Instant::now();
    let writes = futures::stream::iter(0..n).map(|i| {
        let api = api.clone();
        async move {
            let m: Machine = serde_json::from_value(json!({
                "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
                "metadata": {"name": name(i), "labels": {"kairon.zyvor.dev/sandbox": "true"}},
                "spec": {"sandbox": {"templateName": "busybox"},
                         "lifecycle": {"idleTimeoutSeconds": 3600, "idleAction": "Pause", "maxLifetimeSeconds": 86400}}
            }))?;
            api.create(&PostParams::default(), &m).await?;
            // The simulated node: placed on `sim` and Running.
            let status = json!({"status": {"phase": "Running", "nodeName": "sim"}});
            api.patch_status(&name(i), &PatchParams::default(), &Patch::Merge(&status)).await?;
            anyhow::Ok(())
        }
    });
    let results: Vec<_> = writes.buffer_unordered(16).collect().await;
    for r in results {
        r?;
    }
    // One Machine whose ttlSeconds has run out: the controllers delete it once their initial
    // list is in, which marks the sync as under way for the measurement.
    let m: Machine = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
        "metadata": {"name": SENTINEL}, "spec": {"sandbox": {"templateName": "busybox"}, "ttlSeconds": 1}
    }))?;
    api.create(&PostParams::default(), &m).await?;
    let status = json!({"status": {"phase": "Running", "nodeName": "sim"}});
    api.patch_status(SENTINEL, &PatchParams::default(), &Patch::Merge(&status)).await?;
    eprintln!("created {n} Running lifecycle Machines in {:.1} s", t.elapsed().as_secs_f64());
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(())
}

const SENTINEL: &str = "expired-sentinel";

async fn measure(cli: &Cli, k: &Kairon, report: &mut Report) -> Result<()> {
    let n = cli.controller_machines;
    let client = k.client().await?;
    let api: Api<Machine> = Api::namespaced(client, NS);
    populate(&api, n).await?;

    let kubeconfig = k.kubeconfig.to_string_lossy().to_string();
    let mut args = vec!["controller", "--kubeconfig", &kubeconfig, "--identity", "bench-controller"];
    if let Some(db) = k.database_url() {
        args.extend(["--database-url", db]);
    }
    let t0 = Instant::now();
    let ctl = Process::start(&args, "is up")?;
    let proc = ServerProc { pid: ctl.child.id(), clk_tck: clk_tck() };

    // Initial sync: from start until the expired sentinel is deleted and then the process goes
    // quiet (under 2% of a core over 2 s).
    while api.get_opt(SENTINEL).await?.is_some() {
        anyhow::ensure!(t0.elapsed() < Duration::from_secs(900), "the controller did not expire the sentinel");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let window = Duration::from_secs(2);
    let mut last = proc.sample()?;
    let synced = loop {
        tokio::time::sleep(window).await;
        let now = proc.sample()?;
        let used = now.cpu.saturating_sub(last.cpu);
        if used.as_secs_f64() < 0.02 * window.as_secs_f64() {
            break now;
        }
        anyhow::ensure!(t0.elapsed() < Duration::from_secs(900), "the controller did not go quiet within 15 minutes");
        last = now;
    };
    let sync_wall = t0.elapsed().saturating_sub(window);
    report.add(S, format!("initial sync cpu ({n} machines)"), synced.cpu.as_secs_f64(), "s");
    report.add(S, "initial sync wall (until quiet)", sync_wall.as_secs_f64(), "s");
    report.add(S, "rss after initial sync", synced.rss_kib as f64 / 1024.0, "MiB");

    // Steady state: `churn` last-activity stamps a second, spread over the Machines.
    let secs = cli.steady_seconds.max(1);
    let rate = cli.churn.max(0.0);
    let before = proc.sample()?;
    let start = Instant::now();
    let mut stamped = 0usize;
    while start.elapsed() < Duration::from_secs(secs) {
        let due = (start.elapsed().as_secs_f64() * rate) as usize;
        while stamped < due {
            let stamp = k8s_openapi::jiff::Timestamp::now().to_string();
            let patch = json!({"metadata": {"annotations": {"kairon.zyvor.dev/last-activity": stamp}}});
            api.patch(&name(stamped % n.max(1)), &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .context("stamping last-activity")?;
            stamped += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let wall = start.elapsed().as_secs_f64();
    let after = proc.sample()?;
    let cpu = after.cpu.saturating_sub(before.cpu).as_secs_f64();
    report.add(S, format!("steady cpu per minute ({rate}/s activity stamps)"), cpu * 60.0 / wall, "s");
    report.add(S, "steady cpu share", cpu / wall, "cores");
    report.add(S, "steady activity stamps", stamped as f64, "count");
    report.add(S, "rss", after.rss_kib as f64 / 1024.0, "MiB");
    report.add(S, "peak rss", after.peak_rss_kib as f64 / 1024.0, "MiB");

    // The controllers left every Machine as it was: none was idle or expired.
    let acted = api
        .list(&kube::api::ListParams::default())
        .await?
        .items
        .iter()
        .filter(|m| m.spec.power_state.is_some() || m.metadata.deletion_timestamp.is_some())
        .count();
    if acted > 0 {
        report.anomaly(format!("the controllers acted on {acted} Machines that were neither idle nor expired"));
    }
    drop(ctl);
    Ok(())
}

fn clk_tck() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}
