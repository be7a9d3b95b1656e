//! `kairon controller`: the controllers alone (scheduler, lifecycle, pools, claims, usage)
//! against a Kairon API or a real cluster, leader-elected through a Lease so that several may
//! run and only one acts. `kairon up` runs the same controllers in-process unless
//! `--no-controllers`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

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
    /// Serve the controllers' Prometheus counters at http://ADDR/metrics.
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    #[command(flatten)]
    tuning: ControllerTuning,
}

fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host.trim();
    let host = if host.is_empty() { "kairon" } else { host };
    format!("kairon-controller-{host}-{}", std::process::id())
}

pub async fn run(args: ControllerArgs) -> Result<()> {
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
        let app = axum::Router::new()
            .route("/metrics", axum::routing::get(|| async { kairon_reconciler::metrics::global().render() }));
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
