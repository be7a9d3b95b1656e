//! The `cluster` scenario: claim → Bound, → Running and → first exec from a Paused pool of runc
//! sandboxes, in one run on `kairon up` (the embedded API) and on a real Kubernetes control
//! plane (`scripts/k8s-testbed`, Kairon installed as `kairon_e2e::testbed::Install` does: the
//! api, two controllers and two nodes as processes). Bound and Running are the watch events a
//! client sees; the first exec is the REST exec sent once the Machine is Running.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use kairon_e2e::testbed::Install;
use kairon_e2e::{Kairon, Rest};
use kairon_model::{Machine, MachineClaim, MachinePool};

use crate::claims::{claim_once, paused_pool, wait_full_with};
use crate::{Cli, Report, ms};

const S: &str = "cluster";
const NS: &str = "bench-cluster";
const POOL: &str = "agents";

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    let k = tokio::task::spawn_blocking(|| Kairon::start_with(&["--node-tick", "1s", "--heartbeat-interval", "1s"]))
        .await??;
    let result = measure(cli, "kairon up", &k.client().await?, &k.rest()?, report).await;
    tokio::task::spawn_blocking(move || drop(k)).await?;
    result?;

    eprintln!("cluster: starting a real control plane and installing Kairon on it");
    let install = tokio::task::spawn_blocking(|| Install::start(&["a", "b"])).await??;
    install.wait_for_nodes();
    install.testbed.kubectl(&["create", "namespace", NS])?;
    let admin = kairon_e2e::testbed::client(&install.testbed.kubeconfig).await;
    let result = measure(cli, "real cluster", &admin, &install.rest(), report).await;
    tokio::task::spawn_blocking(move || drop(install)).await?;
    result
}

async fn measure(cli: &Cli, label: &str, client: &kube::Client, rest: &Rest, report: &mut Report) -> Result<()> {
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let size = cli.pool_size.max(1) as i32;
    let pool = paused_pool(POOL, size, json!({"guestAgent": {"console": true}}))?;
    pools.create(&PostParams::default(), &pool).await?;
    let full = || wait_full_with(&pools, POOL, size, Duration::from_secs(300), |_| {});
    let t = Instant::now();
    full().await?;
    report.add(S, format!("{label}: paused pool of {size} warm after"), t.elapsed().as_secs_f64(), "s");

    let (mut to_bound, mut to_running, mut to_exec) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..cli.claims {
        full().await?;
        let name = format!("job-{i}");
        let (bound, running) = claim_once(&claims, &machines, POOL, &name).await?;
        let machine =
            claims.get(&name).await?.status.and_then(|s| s.machine_name).context("a Bound claim's Machine")?;
        let t = Instant::now();
        let exec = rest.post(&format!("/api/v1/machines/{NS}/{machine}/exec"), json!({"command": ["true"]})).await;
        anyhow::ensure!(exec.status == 200, "{label}: the first exec answered {} {}", exec.status, exec.body);
        let first_exec = running + t.elapsed();
        eprintln!(
            "  {label} {name}: Bound {:.1} ms, Running {:.1} ms, first exec {:.1} ms",
            ms(bound),
            ms(running),
            ms(first_exec)
        );
        to_bound.push(ms(bound));
        to_running.push(ms(running));
        to_exec.push(ms(first_exec));
        claims.delete(&name, &DeleteParams::default()).await?;
    }
    report.latencies(S, &format!("{label}: claim to Bound"), &mut to_bound);
    report.latencies(S, &format!("{label}: claim to Running"), &mut to_running);
    report.latencies(S, &format!("{label}: claim to first exec"), &mut to_exec);

    pools.delete(POOL, &DeleteParams::default()).await?;
    let _ = claims.delete_collection(&DeleteParams::default(), &ListParams::default()).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline && !machines.list(&ListParams::default()).await?.items.is_empty() {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}
