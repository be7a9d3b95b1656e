//! The `sdk` scenario: claim → first `run` and `run` itself as an agent sees them, from the
//! Python SDK (`sdk/python/scripts/bench_claims.py`, run by the venv `sdk-gen/setup` makes)
//! against a real `kairon up` with a Paused pool. Rows: `claim_from` returns, claim → first
//! `run` returns, the five `run`s right after a claim (while the pool refills beside them), and
//! `run` on a quiet sandbox; each beside issue 45's goal. A missed goal is a figure, not an
//! anomaly: the run says where it stands.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, ensure};
use serde::Deserialize;

use kairon_e2e::Kairon;

use crate::{Cli, Report, percentile};

const S: &str = "sdk";
const NS: &str = "sdk-bench";
const POOL: &str = "warm";
/// `run`s timed on the quiet sandbox.
const STEADY_RUNS: usize = 100;

#[derive(Deserialize)]
struct Samples {
    claim: Vec<f64>,
    first_run: Vec<f64>,
    runs_after: Vec<Vec<f64>>,
    steady: Vec<f64>,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The venv's Python (`sdk-gen/setup`), which has the SDK's dependencies.
fn python() -> Result<PathBuf> {
    let tools = std::env::var_os("KAIRON_SDK_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/kairon-sdk-tools"));
    let python = tools.join("venv/bin/python");
    ensure!(python.exists(), "{} is missing: run sdk-gen/setup", python.display());
    Ok(python)
}

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    let python = python()?;
    eprintln!("sdk: starting kairon up");
    let k = tokio::task::spawn_blocking(|| {
        Kairon::start_with(&["--node-tick", "1s", "--heartbeat-interval", "1s", "--activity-write-interval", "1s"])
    })
    .await??;
    let result = measure(cli, &k, &python, report).await;
    tokio::task::spawn_blocking(move || drop(k)).await?;
    result
}

async fn measure(cli: &Cli, k: &Kairon, python: &Path, report: &mut Report) -> Result<()> {
    let size = cli.pool_size.max(1);
    let rest = k.rest()?;
    crate::hotpath::paused_pool(&rest, NS, POOL, size).await?;
    let n = cli.hotpath_samples;
    eprintln!("sdk: {n} claims from a Paused pool of {size}, then {STEADY_RUNS} runs on a quiet sandbox (Python SDK)");
    let sdk = repo().join("sdk/python");
    let mut cmd = Command::new(python);
    cmd.arg(sdk.join("scripts/bench_claims.py"))
        .args([POOL, &size.to_string(), &n.to_string(), &STEADY_RUNS.to_string()])
        .env("PYTHONPATH", &sdk)
        .env("KAIRON_URL", &k.url)
        .env("KAIRON_TOKEN", &k.admin_token)
        .env("KAIRON_CA_FILE", k.data_dir.path().join("tls/ca.crt"))
        .env("KAIRON_NAMESPACE", NS)
        .stderr(Stdio::inherit());
    let out = tokio::task::spawn_blocking(move || cmd.output()).await?.context("running bench_claims.py")?;
    ensure!(out.status.success(), "bench_claims.py failed ({}): {}", out.status, String::from_utf8_lossy(&out.stdout));
    let mut s: Samples = serde_json::from_slice(&out.stdout).context("reading bench_claims.py's figures")?;
    if s.first_run.len() < n {
        report.anomaly(format!("{} of {n} claims were measured", s.first_run.len()));
    }

    report.latencies(S, "claim_from returns", &mut s.claim);
    report.latencies(S, "claim_from → first run returns", &mut s.first_run);
    report.add(S, "goal: claim_from → first run p50", 10.0, "ms");
    report.add(S, "goal: claim_from → first run p99", 25.0, "ms");
    report.latencies(S, "run on a quiet sandbox", &mut s.steady);
    report.add(S, "goal: run on a quiet sandbox p50", 2.0, "ms");
    let steady_p50 = percentile(&s.steady, 50.0);
    let mut slowest = 0.0_f64;
    for (i, after) in s.runs_after.iter_mut().enumerate() {
        after.sort_by(f64::total_cmp);
        let p50 = percentile(after, 50.0);
        report.add(S, format!("run {} after the claim p50", i + 2), p50, "ms");
        slowest = slowest.max(p50);
    }
    report.add(S, "slowest of the five runs after a claim / quiet run (p50s)", slowest / steady_p50, "x");
    report.add(S, "goal: slowest of the five runs after a claim / quiet run", 1.5, "x");
    let _ = rest.delete(&format!("/api/v1/machinepools/{NS}/{POOL}")).await;
    Ok(())
}
