//! The `migrate` scenario, between two nodes on this host (`kairon up`'s `local` and a `kairon
//! node` named `second` with its own runtime), `--migrations` times each (default 3), back and
//! forth:
//! - a template sandbox with `--migrate-mib` MiB (default 100) written into its writable layer
//!   moves cold; each is timed from the request to the Machine running on its new node, which
//!   for a cold migration is also how long the sandbox is down; its files are checked after;
//! - a VM of 256 MiB with a process dirtying its memory moves live: the time end to end, and how
//!   long QEMU paused the guest for the last pass (its downtime); its process must still count.
//!   The accelerator is the node's (`KAIRON_QEMU_ACCEL=tcg` forces TCG, as the figure
//!   asks); the report says which.

use std::time::Instant;

use anyhow::{Result, bail};
use kube::api::{Api, PostParams};
use serde_json::json;

use kairon_e2e::{Kairon, SandboxCleanup};
use kairon_model::Machine;

use crate::{Cli, Report};

const S: &str = "migrate";
const NAME: &str = "mover";

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    let mib = cli.migrate_mib;
    let k = tokio::task::spawn_blocking(|| Kairon::start_with(&kairon_e2e::Flags::fast())).await??;
    let state = tempfile::Builder::new().prefix("kairon-bench-migrate-").tempdir()?;
    let _cleanup = SandboxCleanup(state.path().to_path_buf());
    let _second = k.second_node("second", state.path(), &[])?;
    let rest = k.rest()?;
    let rest = &rest;
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
    live(cli, &k, rest, report).await
}

/// The VM rows (see the module's comment).
async fn live(cli: &Cli, k: &Kairon, rest: &kairon_e2e::Rest, report: &mut Report) -> Result<()> {
    let images = kairon_runtime::vm::image::images_dir(&std::env::temp_dir().join("kairon-images"));
    let image = kairon_runtime::vm::image::ensure_default_image(&images, &Default::default()).await?;
    let base = "/api/v1/machines/default/live";
    let vm = json!({
        "metadata": {"name": "live"},
        "spec": {"image": {"path": image}, "resources": {"cpu": "1", "memory": "256Mi"}, "guestAgent": {"enabled": true},
                 "nodeName": "local"}
    });
    let created = rest.post("/api/v1/machines/default", vm).await;
    if created.status >= 300 {
        bail!("creating the VM: {} {}", created.status, created.body);
    }
    rest.get(&format!("{base}/wait?phase=Running&timeoutSeconds=300")).await.ok();
    let accel = k.client().await.ok().map(Api::<kairon_model::KaironNode>::all);
    if let Some(nodes) = accel
        && let Ok(n) = nodes.get("local").await
    {
        report.info.insert("migrate accelerator".into(), json!(n.spec.acceleration));
    }
    // The counter's value, or the exec's answer when it gives none.
    let count = || async {
        let r = rest.post(&format!("{base}/exec"), json!({"command": ["cat", "/dev/shm/count"]})).await;
        r.body["stdout"]
            .as_str()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .ok_or_else(|| format!("{} {}", r.status, r.body))
    };
    // The guest agent answers a little after the boot.
    let deadline = Instant::now() + std::time::Duration::from_secs(180);
    loop {
        let r = rest
            .post(
                &format!("{base}/processes"),
                json!({"command": ["sh", "-c", "i=0; while true; do i=$((i+1)); echo $i > /dev/shm/count; sleep 0.05; done"]}),
            )
            .await;
        if r.status == 201 {
            break;
        }
        if Instant::now() > deadline {
            bail!("starting the VM's counter: {} {}", r.status, r.body);
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    let (mut total, mut downtime, mut bytes) = (Vec::new(), Vec::new(), 0u64);
    for i in 0..cli.migrations.max(1) {
        let to = if i % 2 == 0 { "second" } else { "local" };
        let before = count().await.map_err(|e| anyhow::anyhow!("reading the VM's counter: {e}"))?;
        let t0 = Instant::now();
        let r = rest.post(&format!("{base}/migrate?targetNode={to}"), json!({})).await;
        if r.status != 200 {
            bail!("migrating the VM to {to}: {} {}", r.status, r.body);
        }
        total.push(crate::ms(t0.elapsed()));
        downtime.push(r.body["downtimeMs"].as_f64().unwrap_or(f64::NAN));
        bytes = r.body["copiedBytes"].as_u64().unwrap_or(0);
        // A failed read is not a counter at 0: read again for a while, and say what the first
        // exec after the handover answered.
        let read_at = Instant::now();
        let mut after = count().await;
        if let Err(first) = &after {
            eprintln!("migrate: the first exec after the handover answered {first}");
            while after.is_err() && read_at.elapsed() < std::time::Duration::from_secs(10) {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                after = count().await;
            }
        }
        match after {
            Ok(after) if after < before => {
                report.anomaly(format!("the VM's counter went back across a migration: {before} → {after}"))
            }
            Ok(_) => {}
            Err(e) => report.anomaly(format!("the VM's counter could not be read for 10 s after a migration: {e}")),
        }
        eprintln!("migrate: VM to {to} in {:.0} ms, paused {:.0} ms", total[i], downtime[i]);
    }
    report.add(S, "VM (256 MiB) live copied", bytes as f64 / 1048576.0, "MiB");
    report.latencies(S, "VM live migration", &mut total);
    report.latencies(S, "VM live downtime", &mut downtime);
    Ok(())
}
