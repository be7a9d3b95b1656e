//! `kairon runtime`: this node's runtime behind the FluxVM v1 API, on its own.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};

use kairon_runtime::engine::{Runtime, RuntimeConfig};

#[derive(clap::Args, Clone)]
pub struct RuntimeArgs {
    /// Where the runtime keeps templates, instances and runc state.
    #[arg(long, env = "KAIRON_RUNTIME_STATE_DIR")]
    pub state_dir: PathBuf,
    /// Loopback address to serve on; port 0 picks a free one.
    #[arg(long, env = "KAIRON_RUNTIME_LISTEN", default_value = "127.0.0.1:7444")]
    pub listen: SocketAddr,
    /// This node's name (it scopes the runc state root and cgroups).
    #[arg(long, env = "KAIRON_NODE_NAME", default_value = "local")]
    pub node_name: String,
    /// The bearer token the node agent and the api use.
    #[arg(long, env = "KAIRON_RUNTIME_TOKEN", hide_env_values = true)]
    pub token: String,
    /// The node's config file (TOML; `[sandbox] egress_allow_domains`, `inject_authorization`).
    #[arg(long, env = "KAIRON_NODE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Registries reached over plain HTTP (host:port), for template pulls.
    #[arg(long = "insecure-registry")]
    pub insecure_registries: Vec<String>,
    /// Image directories beyond the node config's `[vm] image_dirs` (`kairon up`'s own
    /// `DATA_DIR/images`, where `kairon image` builds when the system directory is not writable).
    #[arg(skip)]
    pub extra_image_dirs: Vec<PathBuf>,
}

/// Opens the runtime: the process becomes a child subreaper so sandbox inits that outlive
/// their runc parent are reaped here (the host's PID 1 may not be an init).
pub async fn open(args: &RuntimeArgs) -> Result<Runtime> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).context("becoming a child subreaper")?;
    let node_config = match &args.config {
        Some(p) => kairon_runtime::egress::NodeConfig::load(p)?,
        None => Default::default(),
    };
    let egress = kairon_runtime::egress::EgressPolicy::new(&node_config.sandbox)?;
    let cfg = RuntimeConfig {
        egress,
        network: node_config.network.clone(),
        state_dir: args.state_dir.clone(),
        node_name: args.node_name.clone(),
        registry: kairon_runtime::oci::RegistryConfig {
            insecure_hosts: args.insecure_registries.clone(),
            ..Default::default()
        },
    };
    let rt = Runtime::open(cfg)
        .await
        .map_err(|e| anyhow::anyhow!("opening the runtime in {}: {e}", args.state_dir.display()))?;
    let mut image_dirs = node_config.vm.image_dirs();
    image_dirs.extend(args.extra_image_dirs.iter().cloned());
    rt.set_image_dirs(image_dirs);
    Ok(rt)
}

/// Opens a runtime on `state_dir` and serves it in this process on a free loopback port;
/// returns its URL.
pub async fn serve_in_process(
    state_dir: PathBuf,
    node_name: &str,
    token: &str,
    config: Option<PathBuf>,
    extra_image_dirs: Vec<PathBuf>,
) -> Result<String> {
    let args = RuntimeArgs {
        state_dir,
        listen: "127.0.0.1:0".parse()?,
        node_name: node_name.to_string(),
        token: token.to_string(),
        config,
        insecure_registries: vec![],
        extra_image_dirs,
    };
    let rt = open(&args).await?;
    if kairon_runtime::vm::qemu_installed() {
        // So `spec.image: {path: /var/lib/fluxvm/images/kairon-hw.qcow2}` works on a fresh node.
        let bg = rt.clone();
        tokio::spawn(async move {
            let image = bg.default_image();
            if kairon_runtime::vm::image::is_current(image.parent().unwrap_or(std::path::Path::new("/"))) {
                return;
            }
            eprintln!("building the default VM image {} in the background", image.display());
            match bg.ensure_default_image().await {
                Ok(p) => eprintln!("the default VM image is ready: {}", p.display()),
                Err(e) => eprintln!("warning: the default VM image was not built: {e}"),
            }
        });
    }
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let url = format!("http://{}", listener.local_addr()?);
    let app = kairon_runtime::server::router(rt, args.token);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(url)
}

pub async fn run(args: RuntimeArgs) -> Result<()> {
    if !args.listen.ip().is_loopback() {
        anyhow::bail!("the runtime API is for this host only: listen on 127.0.0.1");
    }
    let rt = open(&args).await?;
    let listener =
        tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    println!("Kairon runtime is up at http://{}", listener.local_addr()?);
    println!("  node:      {}", args.node_name);
    println!("  state dir: {}", args.state_dir.display());
    let app = kairon_runtime::server::router(rt, args.token.clone());
    axum::serve(listener, app).with_graceful_shutdown(crate::up::shutdown_signal()).await?;
    Ok(())
}
