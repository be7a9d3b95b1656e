//! The `vm` scenario: the node runtime in-process on real QEMU (TCG unless KVM works here) with
//! the project's test image — boot to agent ready, exec, pause, resume, hibernate, restore,
//! live fork, pool claim, and the memory of a paused VM.

use std::time::{Duration, Instant};

use anyhow::Result;
use kairon_model::{ImageSource, Quantity, Resources};
use kairon_runtime::engine::{Runtime, RuntimeConfig};
use kairon_runtime_api::types::{
    ClaimRequest, CreatePoolRequest, CreateVmRequest, ExecRequest, PoolMemberState, PowerAction,
};

use crate::{Cli, Report};

const S: &str = "vm";

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn e(err: kairon_runtime::engine::RuntimeError) -> anyhow::Error {
    anyhow::anyhow!("{err}")
}

fn request(name: &str, image: &std::path::Path) -> CreateVmRequest {
    CreateVmRequest {
        name: name.into(),
        image: Some(ImageSource { path: image.to_string_lossy().into_owned() }),
        resources: Some(Resources { cpu: Some(Quantity::new("1")), memory: Some(Quantity::new("256Mi")) }),
        ..Default::default()
    }
}

fn true_cmd() -> ExecRequest {
    ExecRequest { command: vec!["true".into()], ..Default::default() }
}

/// Kills the scenario's QEMU processes however it ends.
struct Cleanup(std::path::PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        kairon_runtime::vm::kill_all_under(&self.0);
    }
}

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    let dir = tempfile::Builder::new().prefix("kbench").tempdir_in("/tmp")?;
    let _cleanup = Cleanup(dir.path().to_path_buf());
    let rt = Runtime::open(RuntimeConfig {
        state_dir: dir.path().to_path_buf(),
        node_name: "bench".into(),
        registry: Default::default(),
        egress: Default::default(),
        network: Default::default(),
    })
    .await
    .map_err(|e| anyhow::anyhow!("opening the runtime (needs root): {e}"))?;
    let t = Instant::now();
    let image = rt.ensure_default_image().await.map_err(e)?;
    report.add(S, "default image ready (built or found)", ms(t.elapsed()), "ms");
    let accel = rt.acceleration().await;
    report.info.insert("vm acceleration".into(), serde_json::json!(accel));
    let n = cli.vms.max(1);

    // Boot to the guest agent's first answer (create returns then).
    let mut boots = Vec::new();
    let mut last: Option<kairon_runtime_api::InstanceId> = None;
    for i in 0..n {
        if let Some(id) = last.take() {
            rt.delete(&id).await.map_err(e)?;
        }
        let t = Instant::now();
        let vm = rt.create(request(&format!("bench-boot-{i}"), &image)).await.map_err(e)?;
        boots.push(ms(t.elapsed()));
        last = Some(vm.id);
    }
    report.latencies(S, "boot to agent ready", &mut boots);
    let id = last.expect("one VM booted");

    let mut execs = Vec::new();
    for _ in 0..n * 4 {
        let t = Instant::now();
        let out = rt.exec(&id, &true_cmd()).await.map_err(e)?;
        execs.push(ms(t.elapsed()));
        if out.exit_code != 0 {
            report.anomaly(format!("true exited {} in the VM", out.exit_code));
        }
    }
    report.latencies(S, "exec round trip (guest agent)", &mut execs);

    let (mut pauses, mut resumes) = (Vec::new(), Vec::new());
    for _ in 0..n * 2 {
        let t = Instant::now();
        rt.power(&id, PowerAction::Pause, false).await.map_err(e)?;
        pauses.push(ms(t.elapsed()));
        let t = Instant::now();
        rt.power(&id, PowerAction::Resume, false).await.map_err(e)?;
        resumes.push(ms(t.elapsed()));
    }
    report.latencies(S, "pause", &mut pauses);
    report.latencies(S, "resume", &mut resumes);
    rt.power(&id, PowerAction::Pause, false).await.map_err(e)?;
    let paused = rt.stats(&id, false).await.map_err(e)?;
    report.add(S, "RSS of a paused VM (QEMU, 256 MiB guest)", paused.memory_bytes as f64 / 1024.0 / 1024.0, "MiB");
    rt.power(&id, PowerAction::Resume, false).await.map_err(e)?;

    let (mut hibernates, mut restores) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let t = Instant::now();
        rt.power(&id, PowerAction::Hibernate, false).await.map_err(e)?;
        hibernates.push(ms(t.elapsed()));
        let t = Instant::now();
        rt.power(&id, PowerAction::Resume, false).await.map_err(e)?;
        restores.push(ms(t.elapsed()));
    }
    report.latencies(S, "hibernate (RAM to file, QEMU exits)", &mut hibernates);
    report.latencies(S, "restore from hibernate", &mut restores);

    let mut forks = Vec::new();
    for i in 0..n {
        let t = Instant::now();
        let child = rt.fork(&id, &format!("bench-fork-{i}")).await.map_err(e)?;
        forks.push(ms(t.elapsed()));
        rt.delete(&child.id).await.map_err(e)?;
    }
    report.latencies(S, "live fork (incl. re-identification)", &mut forks);
    rt.delete(&id).await.map_err(e)?;

    rt.create_pool(CreatePoolRequest { name: "bench-vms".into(), size: 1, template: request("", &image) })
        .map_err(e)?;
    let (mut claims, mut first_exec) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let deadline = Instant::now() + Duration::from_secs(300);
        while !rt.pool("bench-vms").map_err(e)?.members.iter().any(|m| m.state == PoolMemberState::Ready) {
            anyhow::ensure!(Instant::now() < deadline, "the VM pool did not refill in 300 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let t = Instant::now();
        let vm = rt.claim("bench-vms", ClaimRequest::default()).await.map_err(e)?;
        claims.push(ms(t.elapsed()));
        rt.exec(&vm.id, &true_cmd()).await.map_err(e)?;
        first_exec.push(ms(t.elapsed()));
        rt.delete(&vm.id).await.map_err(e)?;
    }
    report.latencies(S, "pool claim (Paused member resumed)", &mut claims);
    report.latencies(S, "pool claim to first exec (after re-identification)", &mut first_exec);
    rt.delete_pool("bench-vms").await.map_err(e)?;
    Ok(())
}
