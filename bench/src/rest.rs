//! The `rest` scenario: the REST API under `kairon up` as an SDK sees it — GET machine
//! throughput and latency with concurrent clients, the exec round trip into a runc sandbox, and
//! wake-on-connect latency from an idle Pause (the exec that wakes the Machine, start to answer).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use kairon_e2e::{Kairon, Rest};
use kairon_model::Machine;

use crate::{Cli, Report, ms};

const S: &str = "rest";

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    eprintln!("rest: starting kairon up");
    let k = tokio::task::spawn_blocking(|| Kairon::start_with(&["--node-tick", "1s", "--heartbeat-interval", "1s"]))
        .await??;
    let result = measure(cli, &k, report).await;
    tokio::task::spawn_blocking(move || drop(k)).await?;
    result
}

async fn measure(cli: &Cli, k: &Kairon, report: &mut Report) -> Result<()> {
    let rest = k.rest()?;
    let m = json!({
        "metadata": {"name": "bench", "labels": {"kairon.zyvor.dev/sandbox": "true"}},
        "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true},
                 "lifecycle": {"wakeOnConnect": true, "wakeTimeoutSeconds": 60}}
    });
    let created = rest.post("/api/v1/machines/bench", m).await;
    anyhow::ensure!(created.status == 201, "creating the Machine: {:?}", created.body);
    let up = rest.get("/api/v1/machines/bench/bench/wait?phase=Running&timeoutSeconds=120").await;
    anyhow::ensure!(up.status == 200, "the Machine did not run: {:?}", up.body);

    // GET machine: each client sends its requests one after another.
    let clients = cli.rest_clients.max(1);
    let per_client = cli.rest_requests.max(1);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let rest: Rest = rest.clone();
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::with_capacity(per_client);
            let mut errors = 0usize;
            for _ in 0..per_client {
                let t = Instant::now();
                let r = rest.send(rest.request(reqwest::Method::GET, "/api/v1/machines/bench/bench")).await;
                samples.push(ms(t.elapsed()));
                if r.status != 200 {
                    errors += 1;
                }
            }
            (samples, errors)
        }));
    }
    let mut get = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (s, e) = t.await?;
        get.extend(s);
        errors += e;
    }
    let elapsed = started.elapsed().as_secs_f64();
    report.add(S, format!("GET machine rate ({clients} clients)"), get.len() as f64 / elapsed, "req/s");
    report.latencies(S, "GET machine", &mut get);
    if errors > 0 {
        report.anomaly(format!("GET machine: {errors} non-200 answers"));
    }

    // Exec round trip.
    let mut exec = Vec::new();
    for _ in 0..cli.rest_requests.clamp(1, 200) {
        let t = Instant::now();
        let r = rest.post("/api/v1/machines/bench/bench/exec", json!({"command": ["true"]})).await;
        exec.push(ms(t.elapsed()));
        if r.status != 200 || r.body["exitCode"] != 0 {
            report.anomaly(format!("exec: {} {}", r.status, r.body));
            break;
        }
    }
    report.latencies(S, "exec round trip", &mut exec);

    // Wake-on-connect from an idle Pause: suspended exactly as the controller does it.
    let kube: Api<Machine> = Api::namespaced(k.client().await?, "bench");
    let mut wake = Vec::new();
    for _ in 0..cli.rest_wakes {
        let patch = json!({"spec": {"powerState": "Paused"}, "metadata": {"annotations": {"kairon.zyvor.dev/idle-suspended": "Pause"}}});
        kube.patch("bench", &PatchParams::default(), &Patch::Merge(&patch)).await.context("idle-suspending")?;
        let paused = rest.get("/api/v1/machines/bench/bench/wait?phase=Paused&timeoutSeconds=60").await;
        anyhow::ensure!(paused.status == 200, "the Machine did not pause: {:?}", paused.body);
        let t = Instant::now();
        let r = rest.post("/api/v1/machines/bench/bench/exec", json!({"command": ["true"]})).await;
        wake.push(ms(t.elapsed()));
        if r.status != 200 {
            report.anomaly(format!("wake-on-connect exec: {} {}", r.status, r.body));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    report.latencies(S, "wake-on-connect from Paused (exec)", &mut wake);
    Ok(())
}
