//! The `sandbox` scenario: the node runtime in-process on real runc — cold create-to-exec,
//! pool claim-to-exec, resume, and memory per paused pool member.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kairon_model::SandboxSpec;
use kairon_runtime::engine::{Runtime, RuntimeConfig};
use kairon_runtime_api::types::{
    ClaimRequest, CreatePoolRequest, CreateVmRequest, ExecRequest, PoolMemberState, PowerAction,
};

use crate::{Cli, Report};

const S: &str = "sandbox";

fn busybox(name: &str) -> CreateVmRequest {
    CreateVmRequest {
        name: name.into(),
        sandbox: Some(SandboxSpec { template_name: Some("busybox".into()) }),
        ..Default::default()
    }
}

fn true_cmd() -> ExecRequest {
    ExecRequest { command: vec!["true".into()], ..Default::default() }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn ready_members(rt: &Runtime, pool: &str, want: usize, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let p = rt.pool(pool)?;
        if p.members.iter().filter(|m| m.state == PoolMemberState::Ready).count() >= want {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "pool {pool} did not refill in {timeout:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let rt = Runtime::open(RuntimeConfig {
        state_dir: dir.path().to_path_buf(),
        node_name: "bench".into(),
        registry: Default::default(),
        egress: Default::default(),
        network: Default::default(),
    })
    .await
    .map_err(|e| anyhow::anyhow!("opening the runtime (needs root and runc): {e}"))?;
    rt.wait_template("busybox", Duration::from_secs(120)).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let n = cli.sandboxes.unwrap_or(crate::DEFAULT_SANDBOXES);

    // Cold: create a sandbox, then the first exec in it.
    let mut cold = Vec::new();
    for i in 0..n {
        let t = Instant::now();
        let vm = rt.create(busybox(&format!("bench-cold-{i}"))).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        let out = rt.exec(&vm.id, &true_cmd()).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        cold.push(ms(t.elapsed()));
        if out.exit_code != 0 {
            report.anomaly(format!("exec in a cold sandbox exited {}", out.exit_code));
        }
    }
    report.latencies(S, "cold create-to-exec", &mut cold);

    // Exec alone in a running sandbox (runc exec per command).
    let warm = rt.list().await.into_iter().next().context("a sandbox")?;
    let mut execs = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        rt.exec(&warm.id, &true_cmd()).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        execs.push(ms(t.elapsed()));
    }
    report.latencies(S, "exec round trip", &mut execs);

    // Pause/resume of a sandbox with a busy process in it.
    rt.start_process(
        &warm.id,
        &ExecRequest { command: vec!["sh".into(), "-c".into(), "while :; do :; done".into()], ..Default::default() },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (mut pauses, mut resumes) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let t = Instant::now();
        rt.power(&warm.id, PowerAction::Pause, false).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        pauses.push(ms(t.elapsed()));
        let t = Instant::now();
        rt.power(&warm.id, PowerAction::Resume, false).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        resumes.push(ms(t.elapsed()));
    }
    report.latencies(S, "pause", &mut pauses);
    report.latencies(S, "resume", &mut resumes);
    for vm in rt.list().await {
        let _ = rt.delete(&vm.id).await;
    }

    // A pool of Paused members: claim, then the first exec.
    let size = cli.pool_size;
    rt.create_pool(CreatePoolRequest { name: "bench".into(), size, template: busybox("") })
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let t = Instant::now();
    ready_members(&rt, "bench", size as usize, Duration::from_secs(300)).await?;
    report.add(S, format!("pool fill to {size} Paused"), ms(t.elapsed()), "ms");
    let members = rt.pool("bench")?.members;
    let mut mem = 0u64;
    for m in &members {
        mem += rt.stats(&m.id, false).await.map_err(|e| anyhow::anyhow!("{e}"))?.memory_bytes;
    }
    report.add(
        S,
        "memory per paused member (cgroup)",
        mem as f64 / members.len().max(1) as f64 / 1024.0 / 1024.0,
        "MiB",
    );
    let mut claims = Vec::new();
    let mut claim_only = Vec::new();
    for _ in 0..n {
        ready_members(&rt, "bench", 1, Duration::from_secs(60)).await?;
        let t = Instant::now();
        let vm = rt.claim("bench", ClaimRequest::default()).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        claim_only.push(ms(t.elapsed()));
        rt.exec(&vm.id, &true_cmd()).await.map_err(|e| anyhow::anyhow!("{e}"))?;
        claims.push(ms(t.elapsed()));
        let _ = rt.delete(&vm.id).await;
    }
    report.latencies(S, "pool claim", &mut claim_only);
    report.latencies(S, "pool claim-to-exec", &mut claims);
    rt.delete_pool("bench").await.map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}
