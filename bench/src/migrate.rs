//! The `migrate` scenario: a template sandbox with `--migrate-mib` MiB (default 100) written into
//! its writable layer moves cold between two nodes on this host (`kairon up`'s `local` and a
//! `kairon node` named `second` with its own runtime), `--migrations` times (default 3), back
//! and forth. Each is timed from the request to the Machine running on its new node, which for
//! a cold migration is also how long the sandbox is down. Its files are checked after each.

use std::time::Instant;

use anyhow::{Result, bail};
use kube::api::{Api, PostParams};
use serde_json::json;

use kairon_e2e::{Kairon, Process, SandboxCleanup};
use kairon_model::Machine;

use crate::{Cli, Report};

const S: &str = "migrate";
const NAME: &str = "mover";

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    let mib = cli.migrate_mib;
    let k = tokio::task::spawn_blocking(|| Kairon::start_with(&kairon_e2e::Flags::fast())).await??;
    let state = tempfile::Builder::new().prefix("kairon-bench-migrate-").tempdir()?;
    let _cleanup = SandboxCleanup(state.path().to_path_buf());
    let token = std::fs::read_to_string(k.data_dir.path().join("runtime-token"))?;
    let kubeconfig = k.kubeconfig.to_string_lossy().to_string();
    let state_path = state.path().to_string_lossy().to_string();
    let _second = Process::start(
        &[
            "node",
            "--runtime-token",
            token.trim(),
            "--kubeconfig",
            &kubeconfig,
            "--node-name",
            "second",
            "--state-dir",
            &state_path,
            "--heartbeat-interval",
            "1s",
        ],
        "is up",
    )?;
    let rest = k.rest()?;
    let api: Api<Machine> = Api::namespaced(k.client().await?, "default");
    let m: Machine = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
        "metadata": {"name": NAME, "labels": {"kairon.zyvor.dev/sandbox": "true"}},
        "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"enabled": true}, "nodeName": "local"}
    }))?;
    api.create(&PostParams::default(), &m).await?;
    rest.wait_phase("default", NAME, "Running", 120).await.ok();
    let exec = |script: String| {
        let rest = &rest;
        async move {
            let r = rest
                .post(&format!("/api/v1/machines/default/{NAME}/exec"), json!({"command": ["sh", "-c", script]}))
                .await;
            if r.status != 200 || r.body["exitCode"] != 0 {
                bail!("{script:?} failed: {} {}", r.status, r.body);
            }
            Ok(())
        }
    };
    eprintln!("migrate: writing {mib} MiB into the sandbox");
    exec(format!("dd if=/dev/urandom of=/big bs=1M count={mib} 2>/dev/null && md5sum /big > /big.md5")).await?;
    // The second node reports its templates with its heartbeat: until then it does not fit.
    let mut samples = Vec::new();
    let mut bytes = 0u64;
    for i in 0..cli.migrations.max(1) {
        let to = if i % 2 == 0 { "second" } else { "local" };
        let deadline = Instant::now() + std::time::Duration::from_secs(60);
        let r = loop {
            let t0 = Instant::now();
            let r = rest.post(&format!("/api/v1/machines/default/{NAME}/migrate?targetNode={to}"), json!({})).await;
            if r.status == 200 {
                samples.push(crate::ms(t0.elapsed()));
                break r;
            }
            if Instant::now() > deadline || r.reason() != "NoTargetNode" {
                bail!("migrating to {to}: {} {}", r.status, r.body);
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        };
        bytes = r.body["copiedBytes"].as_u64().unwrap_or(0);
        eprintln!("migrate: to {to} in {:.0} ms ({bytes} bytes)", samples.last().copied().unwrap_or(0.0));
        exec("md5sum -c -s /big.md5".into()).await?;
    }
    report.add(S, "layer size", bytes as f64 / 1048576.0, "MiB");
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    report.add(S, "cold migration mean (= downtime)", mean, "ms");
    report.latencies(S, "cold migration", &mut samples);
    report.add(S, "cold migration throughput", bytes as f64 / 1048576.0 / (mean / 1000.0), "MiB/s");
    Ok(())
}
