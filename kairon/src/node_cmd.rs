//! `kairon node`: a node agent against a Kairon API, and the controllers `kairon up` runs.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

use kairon_model::Quantity;
use kairon_node::NodeConfig;

use crate::workers::Workers;

fn parse_duration(s: &str) -> Result<Duration, String> {
    kairon_model::duration::parse_seconds(s).map(|s| Duration::from_secs(s as u64))
}

/// How the node agent samples and what it advertises.
#[derive(clap::Args, Clone)]
pub struct NodeTuning {
    /// How often lifecycle Machines are sampled for activity.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub node_tick: Duration,
    /// status.lifecycle.lastActivityTime is written at most this often (30s in production;
    /// tests shorten it).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub activity_write_interval: Duration,
    /// How often the node reports it is alive.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub heartbeat_interval: Duration,
    /// CPU to advertise (the host's CPUs when unset).
    #[arg(long)]
    pub node_cpu: Option<String>,
    /// Memory to advertise (the host's memory when unset).
    #[arg(long)]
    pub node_memory: Option<String>,
    /// Most Machines this node takes.
    #[arg(long)]
    pub node_max_machines: Option<i32>,
}

impl NodeTuning {
    pub fn config(&self, node: &str, runtime_url: &str, token: &str) -> NodeConfig {
        let mut cfg = NodeConfig::new(node, runtime_url, token);
        cfg.tick = self.node_tick;
        cfg.activity_write_interval = self.activity_write_interval;
        cfg.heartbeat_interval = self.heartbeat_interval;
        cfg.cpu = self.node_cpu.as_deref().map(Quantity::from);
        cfg.memory = self.node_memory.as_deref().map(Quantity::from);
        cfg.max_machines = self.node_max_machines;
        cfg
    }
}

#[derive(clap::Args)]
pub struct NodeArgs {
    /// The kubeconfig of the Kairon API (what `kairon up` writes); the pod's own (in-cluster)
    /// configuration when unset.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    #[arg(long, env = "KAIRON_NODE_NAME")]
    node_name: String,
    /// Where this node's own runtime keeps its state (when it runs in this process).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// An existing runtime to use instead (with --runtime-token).
    #[arg(long)]
    runtime_endpoint: Option<String>,
    /// The SHA-256 of the certificate that runtime serves over https (`kairon runtime` prints
    /// it): registered with the node, so the api trusts that certificate alone for this node.
    #[arg(long, requires = "runtime_endpoint")]
    runtime_certificate_sha256: Option<kairon_runtime_api::CertificatePin>,
    /// The runtime token shared with the api (a single host); without it, and without
    /// --runtime-endpoint, this node's runtime has a private token of its own.
    #[arg(long, env = "KAIRON_RUNTIME_TOKEN", hide_env_values = true, value_parser = crate::up::parse_secret)]
    runtime_token: Option<String>,
    /// The api's public key (PEM): across a cluster the api reaches this node's runtime with
    /// grants it signs for this node alone, and no node holds a token another node accepts.
    #[arg(long, env = "KAIRON_RUNTIME_API_KEY")]
    runtime_api_key: Option<PathBuf>,
    /// Also run the controllers (scheduler, lifecycle, pools, claims; leader-elected).
    #[arg(long)]
    scheduler: bool,
    /// Where this node's own runtime serves (beyond loopback only over TLS).
    #[arg(long, env = "KAIRON_RUNTIME_LISTEN", default_value = "127.0.0.1:0")]
    runtime_listen: std::net::SocketAddr,
    /// Serve the runtime over TLS with a certificate of this node's own (made in the state dir
    /// and kept), whose SHA-256 the node registers and the api pins: what a runtime beyond
    /// loopback does unless given --runtime-tls-cert.
    #[arg(long, env = "KAIRON_RUNTIME_TLS")]
    runtime_tls: bool,
    /// A certificate for the runtime instead (PEM, the leaf first) and its key; it is pinned
    /// the same way.
    #[arg(long, env = "KAIRON_RUNTIME_TLS_CERT", requires = "runtime_tls_key")]
    runtime_tls_cert: Option<PathBuf>,
    #[arg(long, env = "KAIRON_RUNTIME_TLS_KEY", requires = "runtime_tls_cert")]
    runtime_tls_key: Option<PathBuf>,
    /// The runtime URL to register, when the listening address is not how the api reaches it
    /// (e.g. https://NODE_IP:7444 for --runtime-listen 0.0.0.0:7444).
    #[arg(long, env = "KAIRON_RUNTIME_ADVERTISE")]
    runtime_advertise: Option<String>,
    /// The CA (PEM) that signs the certificate of the runtime at --runtime-endpoint, when
    /// --runtime-certificate-sha256 does not pin it.
    #[arg(long, env = "KAIRON_RUNTIME_CA")]
    runtime_ca: Option<PathBuf>,
    #[command(flatten)]
    node_files: crate::runtime_cmd::NodeFiles,
    #[command(flatten)]
    tuning: NodeTuning,
}

/// Keeps the node agent running; it starts over after an error (the API may not be up yet).
/// It stops when `workers` stop.
pub fn spawn_node_agent(workers: &mut Workers, client: kube::Client, cfg: NodeConfig) {
    let stop = workers.token();
    workers.spawn(async move {
        loop {
            let result = kairon_node::run(client.clone(), cfg.clone(), stop.clone()).await;
            if stop.is_cancelled() {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "node agent stopped");
                }
                return;
            }
            if let Err(e) = result {
                tracing::warn!(error = %e, "node agent stopped; starting over");
            }
            if crate::workers::pause(&stop, Duration::from_secs(1)).await {
                return;
            }
        }
    });
}

/// The controllers (scheduler, lifecycle, pools, claims, usage), under leader election. When
/// `workers` stop they finish their reconciles in flight and give the Lease up, so another
/// controller takes over at once.
pub fn spawn_controllers(workers: &mut Workers, client: kube::Client, cfg: kairon_reconciler::ControllerConfig) {
    let stop = workers.token();
    workers.spawn(async move {
        let identity = cfg.identity.clone();
        kairon_reconciler::run_all(client.clone(), cfg, stop).await;
        release_lease(client, &identity).await;
    });
}

/// Gives the controller Lease up if this process holds it.
pub async fn release_lease(client: kube::Client, identity: &str) {
    match kairon_reconciler::leader::release(client, identity).await {
        Ok(true) => eprintln!("released the controller lease"),
        Ok(false) => {}
        Err(e) => eprintln!("warning: releasing the controller lease failed (it runs out on its own): {e}"),
    }
}

/// The names a runtime's own certificate is for: the advertised host and the address listened
/// on. Informative only: the api pins the certificate itself, whatever its names.
fn certificate_names(listen: std::net::SocketAddr, advertise: Option<&str>) -> Vec<String> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    if !listen.ip().is_unspecified() && !listen.ip().is_loopback() {
        names.push(listen.ip().to_string());
    }
    if let Some(uri) = advertise.and_then(|a| a.parse::<axum::http::Uri>().ok())
        && let Some(host) = uri.host()
    {
        names.push(host.trim_start_matches('[').trim_end_matches(']').to_string());
    }
    names.dedup();
    names
}

pub async fn run(args: NodeArgs) -> Result<()> {
    let client = crate::up::kube_client(args.kubeconfig.as_deref()).await?;
    let (endpoint, token, certificate) = match (&args.runtime_endpoint, &args.runtime_token) {
        (Some(e), Some(t)) => (e.clone(), t.clone(), args.runtime_certificate_sha256),
        (Some(_), None) => anyhow::bail!("--runtime-endpoint needs --runtime-token"),
        (None, _) => {
            let state_dir = args
                .state_dir
                .clone()
                .context("give --state-dir (for this node's own runtime) or --runtime-endpoint")?;
            // The cluster's runtime token when given (so the api can reach this node), else a
            // private one.
            let token = args.runtime_token.clone().unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
            if args.runtime_listen.ip().is_unspecified() && args.runtime_advertise.is_none() {
                anyhow::bail!(
                    "--runtime-listen {} is every address: say which one the api reaches with --runtime-advertise https://NODE_IP:PORT",
                    args.runtime_listen
                );
            }
            let tls = match args.runtime_tls_cert.clone().zip(args.runtime_tls_key.clone()) {
                Some(files) => Some(files),
                None if args.runtime_tls || !args.runtime_listen.ip().is_loopback() => {
                    let names = certificate_names(args.runtime_listen, args.runtime_advertise.as_deref());
                    Some(crate::tls::runtime_certificate(&state_dir.join("tls"), &names)?)
                }
                None => None,
            };
            let serving = crate::runtime_cmd::Serving {
                listen: args.runtime_listen,
                tls,
                advertise: args.runtime_advertise.clone(),
                api_key: args.runtime_api_key.clone(),
            };
            let (url, certificate) = crate::runtime_cmd::serve_in_process(
                state_dir,
                &args.node_name,
                &token,
                args.node_files.clone(),
                vec![],
                serving,
            )
            .await?;
            (url, token, certificate)
        }
    };
    println!("Kairon node {} is up (runtime {endpoint})", args.node_name);
    let mut workers = Workers::new();
    if args.scheduler {
        spawn_controllers(&mut workers, client.clone(), Default::default());
    }
    let mut cfg = args.tuning.config(&args.node_name, &endpoint, &token);
    cfg.runtime_ca = crate::up::read_ca(args.runtime_ca.as_deref())?;
    cfg.runtime_certificate = certificate;
    spawn_node_agent(&mut workers, client, cfg);
    crate::up::shutdown_signal().await;
    // The runtime's instances keep running; the next agent on this node adopts them.
    workers.stop(crate::workers::GRACE).await;
    Ok(())
}
