//! `kairon controller`: the controllers alone (scheduler, lifecycle, pools, claims, usage)
//! against a Kairon API or a real cluster, leader-elected through a Lease so that several may
//! run and only one acts. `kairon up` runs the same controllers in-process unless
//! `--no-controllers`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// The controllers' intervals. Every flag here is TEST ONLY (hidden): production uses the
/// defaults, which are the product documents' values.
#[derive(clap::Args, Clone)]
pub struct ControllerTuning {
    /// TEST ONLY: how often bound claims accrue usage (30 s in production).
    #[arg(long, hide = true, default_value = "30s", value_parser = crate::up::parse_duration)]
    pub test_usage_interval: Duration,
    /// TEST ONLY: the controller Lease duration (15 s in production).
    #[arg(long, hide = true, default_value = "15s", value_parser = crate::up::parse_duration)]
    pub test_lease_duration: Duration,
    /// TEST ONLY: lowers the 60 s minimum of spec.lifecycle.idleTimeoutSeconds.
    #[arg(long, hide = true, default_value_t = kairon_model::machine::MIN_IDLE_TIMEOUT_SECONDS)]
    pub test_min_idle_timeout_seconds: i64,
    /// TEST ONLY: after recording a usage interval in the history, wait this long before
    /// writing status.usage, so a test can kill the controller inside that window.
    #[arg(long, hide = true, default_value = "0s", value_parser = crate::up::parse_duration)]
    pub test_hold_after_usage_record: Duration,
}

impl ControllerTuning {
    pub fn config(&self, identity: String, store: Option<kairon_db::Store>) -> kairon_reconciler::ControllerConfig {
        kairon_reconciler::ControllerConfig {
            usage_interval: self.test_usage_interval,
            min_idle_timeout: Duration::from_secs(self.test_min_idle_timeout_seconds.max(0) as u64),
            lease_duration: self.test_lease_duration,
            identity,
            store,
            test_hold_after_record: self.test_hold_after_usage_record,
        }
    }
}

#[derive(clap::Args)]
pub struct ControllerArgs {
    /// The kubeconfig of the Kairon API (what `kairon up` writes) or of a cluster; the pod's own
    /// (in-cluster) configuration when unset.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// The PostgreSQL that keeps the claim usage history. Without it, usage is kept in
    /// status.usage only and billing queries have nothing to read.
    #[arg(long, env = "DATABASE_URL")]
    database_url: Option<String>,
    /// This controller's identity in the leader-election Lease (default: host name and pid).
    #[arg(long)]
    identity: Option<String>,
    /// Serve the controllers' Prometheus counters at http://ADDR/metrics. An address other than
    /// loopback needs --metrics-token-file: the counters name every namespace's pools.
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// A file holding the token a scraper must send (`Authorization: Bearer …`) to read
    /// /metrics: a `kairon token --role metrics`, the one Prometheus is given.
    #[arg(long)]
    metrics_token_file: Option<PathBuf>,
    #[command(flatten)]
    tuning: ControllerTuning,
}

/// The counters, for a scraper that sends `token` when one is set.
fn scrape(token: Option<&str>, headers: &axum::http::HeaderMap) -> axum::response::Response {
    use axum::response::IntoResponse;
    let sent = headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let sent = sent.and_then(|v| v.strip_prefix("Bearer ")).unwrap_or_default();
    match token {
        Some(t) if !same(t.as_bytes(), sent.as_bytes()) => (
            axum::http::StatusCode::UNAUTHORIZED,
            "send the metrics token (--metrics-token-file) as Authorization: Bearer <token>\n",
        )
            .into_response(),
        _ => kairon_reconciler::metrics::global().render().into_response(),
    }
}

/// Equal bytes, compared in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host.trim();
    let host = if host.is_empty() { "kairon" } else { host };
    format!("kairon-controller-{host}-{}", std::process::id())
}

pub async fn run(args: ControllerArgs) -> Result<()> {
    // Refused before anything starts: counters for anyone who can reach the port.
    let metrics_token = match (&args.metrics_listen, &args.metrics_token_file) {
        (_, Some(path)) => {
            let token = std::fs::read_to_string(path)
                .with_context(|| format!("reading the metrics token {}", path.display()))?;
            let token = token.trim();
            anyhow::ensure!(!token.is_empty(), "the metrics token file {} is empty", path.display());
            Some(token.to_string())
        }
        (Some(addr), None) if !addr.ip().is_loopback() => bail!(
            "--metrics-listen {addr} is reachable from other hosts: give --metrics-token-file (a `kairon token \
             --role metrics`, the token your scraper sends) or listen on 127.0.0.1"
        ),
        _ => None,
    };
    let client = crate::up::kube_client(args.kubeconfig.as_deref()).await?;
    let store = match &args.database_url {
        Some(url) => Some(kairon_db::Store::connect(url).await.context("connecting to PostgreSQL")?),
        None => {
            eprintln!("warning: no --database-url: claim usage is kept in status.usage only, with no history");
            None
        }
    };
    let identity = args.identity.clone().unwrap_or_else(default_identity);
    if let Some(addr) = args.metrics_listen {
        let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))?;
        let bound = listener.local_addr()?;
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move |headers: axum::http::HeaderMap| {
                let token = metrics_token.clone();
                async move { scrape(token.as_deref(), &headers) }
            }),
        );
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(error = %e, "the metrics server stopped");
            }
        });
        println!("  metrics:     http://{bound}/metrics");
    }
    let cfg = args.tuning.config(identity.clone(), store.clone());
    println!("Kairon controller {identity} is up (leader-elected; the Lease kairon-system/kairon-controller)");
    let mut workers = crate::workers::Workers::new();
    // Finishes the reconciles in flight, then hands over at once rather than after the lease
    // duration.
    crate::node_cmd::spawn_controllers(&mut workers, client, cfg);
    crate::up::shutdown_signal().await;
    workers.stop(crate::workers::GRACE).await;
    if let Some(s) = store {
        s.close().await;
    }
    Ok(())
}
