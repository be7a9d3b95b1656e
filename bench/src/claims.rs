//! The `claims` scenario: claim-to-Bound and claim-to-Running from a Paused pool of runc
//! sandboxes, against `kairon up` (API, node agent and controllers in one process), as a client
//! sees it: from the claim's create request to the watch event that shows the claim Bound, and
//! to the one that shows its Machine Running.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use kairon_e2e::Kairon;
use kairon_model::{ClaimPhase, Machine, MachineClaim, MachinePhase, MachinePool};

use crate::{Cli, Report, ms};

const S: &str = "claims";
const NS: &str = "bench-claims";
const POOL: &str = "agents";
const CLAIM_LABEL: &str = "kairon.zyvor.dev/claim";

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    let k = tokio::task::spawn_blocking(|| {
        Kairon::start_with(&["--node-tick", "1s", "--heartbeat-interval", "1s", "--activity-write-interval", "1s"])
    })
    .await??;
    let client = k.client().await?;
    let result = measure(cli, &client, report).await;
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    let _ = claims.delete_collection(&DeleteParams::default(), &ListParams::default()).await;
    let _ = pools.delete(POOL, &DeleteParams::default()).await;
    let machines: Api<Machine> = Api::namespaced(client, NS);
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline && !machines.list(&ListParams::default()).await.map(|l| l.items.is_empty())? {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Stopping the server and dropping its database block: keep them off the runtime threads.
    tokio::task::spawn_blocking(move || drop(k)).await?;
    result
}

async fn wait_full(pools: &Api<MachinePool>, size: i32) -> Result<()> {
    wait_full_with(pools, POOL, size, Duration::from_secs(300), |_| {}).await
}

/// Waits until `pool` has `size` warm members, calling `progress` with the warm count at each
/// look.
pub async fn wait_full_with(
    pools: &Api<MachinePool>,
    pool: &str,
    size: i32,
    timeout: Duration,
    mut progress: impl FnMut(i32),
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let s = pools.get(pool).await?.status.unwrap_or_default();
        if s.warm >= size {
            return Ok(());
        }
        progress(s.warm);
        if Instant::now() > deadline {
            bail!("pool {pool} has only {} of {size} warm members after {timeout:?}", s.warm);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Claims a member of `pool` as `name` and measures, as a client sees it, the time from the
/// create request to the watch event that shows the claim Bound and to the one that shows its
/// Machine Running.
pub async fn claim_once(
    claims: &Api<MachineClaim>,
    machines: &Api<Machine>,
    pool: &str,
    name: &str,
) -> Result<(Duration, Duration)> {
    let rv = claims.list(&ListParams::default().limit(1)).await?.metadata.resource_version.context("list rv")?;
    let mut claim_events = claims.watch(&WatchParams::default(), &rv).await?.boxed();
    let mut machine_events = machines.watch(&WatchParams::default(), &rv).await?.boxed();
    let c: MachineClaim = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim",
        "metadata": {"name": name}, "spec": {"poolName": pool}
    }))?;
    let t0 = Instant::now();
    claims.create(&PostParams::default(), &c).await?;
    let bound_name = name.to_string();
    let bound = tokio::spawn(async move {
        while let Some(ev) = claim_events.next().await {
            if let WatchEvent::Added(c) | WatchEvent::Modified(c) = ev?
                && c.name_any() == bound_name
                && c.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound)
            {
                return anyhow::Ok(t0.elapsed());
            }
        }
        bail!("the claim watch ended before {bound_name} was Bound")
    });
    let running_name = name.to_string();
    let running = tokio::spawn(async move {
        while let Some(ev) = machine_events.next().await {
            if let WatchEvent::Added(m) | WatchEvent::Modified(m) = ev?
                && m.labels().get(CLAIM_LABEL) == Some(&running_name)
                && m.status.as_ref().and_then(|s| s.phase) == Some(MachinePhase::Running)
            {
                return anyhow::Ok(t0.elapsed());
            }
        }
        bail!("the Machine watch ended before {running_name}'s Machine was Running")
    });
    let limit = Duration::from_secs(120);
    let b = tokio::time::timeout(limit, bound).await.context("claim not Bound within 2 minutes")???;
    let r = tokio::time::timeout(limit, running).await.context("Machine not Running within 2 minutes")???;
    Ok((b, r))
}

/// A pool `name` of `size` Paused busybox sandboxes, `extra` merged into their spec (say, a
/// guest agent for execs).
pub fn paused_pool(name: &str, size: i32, extra: serde_json::Value) -> Result<MachinePool> {
    let mut spec = json!({"sandbox": {"templateName": "busybox"}});
    spec.as_object_mut().context("a spec")?.extend(extra.as_object().cloned().unwrap_or_default());
    Ok(serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool",
        "metadata": {"name": name},
        "spec": {"replicas": size, "warmPowerState": "Paused", "warmupSeconds": 1,
                 "template": {"metadata": {"labels": {"kairon.zyvor.dev/sandbox": "true"}}, "spec": spec}}
    }))?)
}

async fn measure(cli: &Cli, client: &kube::Client, report: &mut Report) -> Result<()> {
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let size = cli.pool_size.max(1) as i32;
    pools.create(&PostParams::default(), &paused_pool(POOL, size, json!({}))?).await?;
    let t = Instant::now();
    wait_full(&pools, size).await?;
    report.add(S, format!("paused pool of {size} warm after"), t.elapsed().as_secs_f64(), "s");

    let (mut to_bound, mut to_running) = (Vec::new(), Vec::new());
    for i in 0..cli.claims {
        // Each claim finds the pool full of Paused members.
        wait_full(&pools, size).await?;
        let name = format!("job-{i}");
        let (b, r) = claim_once(&claims, &machines, POOL, &name).await?;
        to_bound.push(ms(b));
        to_running.push(ms(r));
        eprintln!("  {name}: Bound after {:.1} ms, Running after {:.1} ms", ms(b), ms(r));
        // Release it (its Machine goes) so the node keeps room for the refills.
        claims.delete(&name, &DeleteParams::default()).await?;
    }
    report.latencies(S, "claim to Bound", &mut to_bound);
    report.latencies(S, "claim to Running", &mut to_running);
    Ok(())
}
