//! `kairon runtime`: this node's runtime behind the FluxVM v1 API, on its own.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};

use kairon_runtime::engine::{Runtime, RuntimeConfig};
use kairon_runtime_api::CertificatePin;

#[derive(clap::Args, Clone)]
pub struct RuntimeArgs {
    /// Where the runtime keeps templates, instances and runc state.
    #[arg(long, env = "KAIRON_RUNTIME_STATE_DIR")]
    pub state_dir: PathBuf,
    /// Address to serve on; port 0 picks a free one. Beyond loopback only with TLS.
    #[arg(long, env = "KAIRON_RUNTIME_LISTEN", default_value = "127.0.0.1:7444")]
    pub listen: SocketAddr,
    /// Serve HTTPS with this certificate (PEM, the leaf first) and --tls-key: the runtime may
    /// then listen on the node's address, for an api on another host. Its SHA-256 (printed at
    /// start) is what its node agent registers (--runtime-certificate-sha256) and the api pins.
    #[arg(long, env = "KAIRON_RUNTIME_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    #[arg(long, env = "KAIRON_RUNTIME_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// This node's name (it scopes the runc state root and cgroups).
    #[arg(long, env = "KAIRON_NODE_NAME", default_value = "local")]
    pub node_name: String,
    /// The bearer token the node agent and the api use.
    #[arg(long, env = "KAIRON_RUNTIME_TOKEN", hide_env_values = true)]
    pub token: String,
    /// The api's public key (PEM; `kairon runtime-keys` makes the pair): the runtime also
    /// accepts the grants that api signs for this node (`kairon api --runtime-signing-key`).
    #[arg(long, env = "KAIRON_RUNTIME_API_KEY")]
    pub api_key: Option<PathBuf>,
    #[command(flatten)]
    pub node: NodeFiles,
    /// Registries reached over plain HTTP (host:port), for template pulls.
    #[arg(long = "insecure-registry")]
    pub insecure_registries: Vec<String>,
    /// Image directories beyond the node config's `[vm] image_dirs` (`kairon up`'s own
    /// `DATA_DIR/images`, where `kairon image` builds when the system directory is not writable).
    #[arg(skip)]
    pub extra_image_dirs: Vec<PathBuf>,
}

/// What a node's guests may reach: its config file and the ranges a cluster adds.
#[derive(clap::Args, Clone, Default)]
pub struct NodeFiles {
    /// The node's config file (TOML; `[sandbox] egress_allow_domains`, `inject_authorization`,
    /// `egress_deny_cidrs`, `[network]`, `[registry]`, `[vm]`).
    #[arg(long, env = "KAIRON_NODE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Addresses no guest reaches, added to the config's deny set (repeatable; a cluster's pod
    /// and service CIDRs, which the manifests pass).
    #[arg(long = "deny-cidr", value_name = "CIDR")]
    pub deny_cidrs: Vec<String>,
    /// Attach every sandbox to the guest network when the config's `[network]
    /// attach_sandboxes` is unset (`kairon up`'s default; `false` forces it off).
    #[arg(skip)]
    pub guest_network: Option<bool>,
}

/// Opens the runtime: the process becomes a child subreaper so sandbox inits that outlive
/// their runc parent are reaped here (the host's PID 1 may not be an init).
pub async fn open(args: &RuntimeArgs) -> Result<Runtime> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).context("becoming a child subreaper")?;
    let node_config = match &args.node.config {
        Some(p) => kairon_runtime::egress::NodeConfig::load(p)?,
        None => Default::default(),
    };
    let egress = kairon_runtime::egress::EgressPolicy::new(&node_config.sandbox)?.deny_also(&args.node.deny_cidrs)?;
    let network = guest_network(&args.node_name, node_config.network.clone(), args.node.guest_network);
    let cfg = RuntimeConfig {
        egress,
        network,
        state_dir: args.state_dir.clone(),
        node_name: args.node_name.clone(),
        // The config file's `[registry]`, plus `--insecure-registry`.
        registry: node_config.registry.to_config(&args.insecure_registries),
    };
    let rt = Runtime::open(cfg)
        .await
        .map_err(|e| anyhow::anyhow!("opening the runtime in {}: {e}", args.state_dir.display()))?;
    let mut image_dirs = node_config.vm.image_dirs();
    image_dirs.extend(args.extra_image_dirs.iter().cloned());
    rt.set_image_dirs(image_dirs);
    if let Some(max) = &node_config.vm.max_volume_size {
        let bytes = max.to_bytes().map_err(|e| anyhow::anyhow!("[vm] max_volume_size {:?}: {e}", max.0))?;
        rt.set_max_volume_bytes(bytes);
    }
    Ok(rt)
}

/// The `[network]` settings with the command's choice applied: `Some(false)` (`kairon up
/// --no-guest-network`) turns attaching off whatever the file says; `Some(true)` (`kairon up`'s
/// default) turns it on where the file says nothing, unless this host cannot give guests a
/// network (no resolver to forward to, no `nft`): then sandboxes stay offline, and it says why.
fn guest_network(
    node: &str,
    mut settings: kairon_runtime::net::NetworkSettings,
    choice: Option<bool>,
) -> kairon_runtime::net::NetworkSettings {
    match choice {
        Some(false) => settings.attach_sandboxes = Some(false),
        Some(true) if settings.attach_sandboxes.is_none() => {
            let plan = kairon_runtime::net::Plan::new(node, &settings);
            let missing = match &plan {
                Err(e) => Some(e.to_string()),
                Ok(p) if p.dns_upstream.is_none() => {
                    Some("no nameserver in /etc/resolv.conf (set [network] dns_upstream in --node-config)".into())
                }
                Ok(_) if which("nft").is_none() || which("ip").is_none() => {
                    Some("nftables (nft) and iproute2 (ip) are needed; install them".into())
                }
                Ok(_) => None,
            };
            match missing {
                None => settings.attach_sandboxes = Some(true),
                Some(why) => {
                    eprintln!("warning: sandboxes are offline: {why}; --no-guest-network silences this");
                    settings.attach_sandboxes = Some(false);
                }
            }
        }
        _ => {}
    }
    settings
}

/// `program` on `$PATH`.
fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|dir| PathBuf::from(dir).join(program)).find(|p| p.is_file())
}

/// Where and how a runtime in a node's process serves.
pub struct Serving {
    pub listen: SocketAddr,
    /// Certificate and key: HTTPS (needed beyond loopback).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The URL the node registers, when the listening address is not it (0.0.0.0, or a port
    /// forwarded elsewhere).
    pub advertise: Option<String>,
    /// The api's public key, whose grants for this node the runtime accepts.
    pub api_key: Option<PathBuf>,
}

impl Serving {
    /// A free loopback port, plain HTTP: for a node whose api runs on the same host.
    pub fn loopback() -> Serving {
        Serving { listen: SocketAddr::from(([127, 0, 0, 1], 0)), tls: None, advertise: None, api_key: None }
    }
}

/// Opens a runtime on `state_dir` and serves it in this process as `serving` says; returns the
/// URL to register and, over TLS, the certificate the runtime serves.
pub async fn serve_in_process(
    state_dir: PathBuf,
    node_name: &str,
    token: &str,
    node: NodeFiles,
    extra_image_dirs: Vec<PathBuf>,
    serving: Serving,
) -> Result<(String, Option<CertificatePin>)> {
    let (tls_cert, tls_key) = serving.tls.clone().unzip();
    let args = RuntimeArgs {
        state_dir,
        listen: serving.listen,
        tls_cert,
        tls_key,
        node_name: node_name.to_string(),
        token: token.to_string(),
        api_key: serving.api_key.clone(),
        node,
        insecure_registries: vec![],
        extra_image_dirs,
    };
    check_listen(&args)?;
    let certificate = certificate_pin(&args)?;
    let url = serving.advertise.clone();
    if certificate.is_some() && url.as_deref().is_some_and(|u| !u.starts_with("https://")) {
        anyhow::bail!(
            "the runtime serves only over TLS here: advertise an https:// URL (--runtime-advertise {})",
            url.unwrap_or_default().replacen("http://", "https://", 1)
        );
    }
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
    // It serves as long as this process runs.
    let (listening, server) = serve(&args, rt, std::future::pending()).await?;
    tokio::spawn(server);
    Ok((url.unwrap_or(listening), certificate))
}

/// The pin of the certificate the runtime serves, when it serves TLS.
fn certificate_pin(args: &RuntimeArgs) -> Result<Option<CertificatePin>> {
    let Some(cert) = &args.tls_cert else { return Ok(None) };
    let pem = std::fs::read(cert).with_context(|| format!("reading the runtime's certificate {}", cert.display()))?;
    let pin = CertificatePin::of_pem(&pem).with_context(|| format!("the runtime's certificate {}", cert.display()))?;
    Ok(Some(pin))
}

/// Plain HTTP only on loopback: the token travels in every request.
fn check_listen(args: &RuntimeArgs) -> Result<()> {
    if !args.listen.ip().is_loopback() && args.tls_cert.is_none() {
        anyhow::bail!(
            "the runtime API listens beyond loopback ({}) only over TLS: give --tls-cert and --tls-key, or listen on 127.0.0.1 (kairon node makes a certificate of its own)",
            args.listen
        );
    }
    Ok(())
}

/// Binds the runtime's address and returns its URL and the server to run (HTTPS when the
/// arguments give a certificate), which finishes the requests in flight once `shutdown` is
/// done.
async fn serve(
    args: &RuntimeArgs,
    rt: Runtime,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(String, std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send>>)> {
    let listener = std::net::TcpListener::bind(args.listen).with_context(|| format!("binding {}", args.listen))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let mut auth = kairon_runtime::server::RuntimeAuth::token(args.token.clone());
    if let Some(path) = &args.api_key {
        let pem = std::fs::read(path).with_context(|| format!("reading the api's public key {}", path.display()))?;
        auth = auth.with_grants(kairon_runtime_api::grant::GrantVerifier::from_pem(&pem, &args.node_name)?);
    }
    let app = kairon_runtime::server::router_with(rt, auth);
    match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let config = axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key).await.with_context(|| {
                format!("reading the runtime's certificate {} and key {}", cert.display(), key.display())
            })?;
            let handle = axum_server::Handle::new();
            let stop = handle.clone();
            tokio::spawn(async move {
                shutdown.await;
                stop.graceful_shutdown(Some(std::time::Duration::from_secs(30)));
            });
            let server = crate::tls::https_server(listener, config)?.handle(handle);
            Ok((format!("https://{addr}"), Box::pin(server.serve(app.into_make_service()))))
        }
        _ => {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let server = axum::serve(listener, app).with_graceful_shutdown(shutdown);
            Ok((format!("http://{addr}"), Box::pin(async move { server.await })))
        }
    }
}

pub async fn run(args: RuntimeArgs) -> Result<()> {
    check_listen(&args)?;
    let rt = open(&args).await?;
    let certificate = certificate_pin(&args)?;
    let (url, server) = serve(&args, rt, crate::up::shutdown_signal()).await?;
    match certificate {
        // The pin on the same line, for whoever reads the URL from it: the node agent registers
        // it (kairon node --runtime-certificate-sha256).
        Some(pin) => println!("Kairon runtime is up at {url} (certificate sha256:{pin})"),
        None => println!("Kairon runtime is up at {url}"),
    }
    println!("  node:      {}", args.node_name);
    println!("  state dir: {}", args.state_dir.display());
    server.await?;
    Ok(())
}
