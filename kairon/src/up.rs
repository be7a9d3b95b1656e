//! `kairon up`: the embedded mode.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use kairon_api::AppState;
use kairon_api::auth::{Role, TokenKeys};
use kairon_api::loopback::RouterSlot;
use kairon_api::previews::PreviewDomain;
use kairon_db::Store;
use kairon_model::validate::ValidationOptions;

use crate::postgres::PrivatePostgres;

#[derive(clap::Args)]
pub struct UpArgs {
    /// Where Kairon keeps its state (database, keys, kubeconfig).
    #[arg(long, env = "KAIRON_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Address to serve on; port 0 picks a free one.
    #[arg(long, env = "KAIRON_LISTEN", default_value = "127.0.0.1:7443")]
    listen: SocketAddr,
    /// This machine's node name.
    #[arg(long, env = "KAIRON_NODE_NAME", default_value = "local")]
    node_name: String,
    /// Use this PostgreSQL instead of a private one.
    #[arg(long, env = "DATABASE_URL")]
    database_url: Option<String>,
    #[command(flatten)]
    housekeeping: crate::housekeeping::Housekeeping,
    /// Run without this node's runtime, node agent and controllers: the API alone (sandboxes
    /// need root for runc).
    #[arg(long)]
    no_runtime: bool,
    /// This node's config file (TOML: `[sandbox] egress_allow_domains`, `inject_authorization`;
    /// `[registry]`).
    #[arg(long, env = "KAIRON_NODE_CONFIG")]
    node_config: Option<PathBuf>,
    /// Leave sandboxes offline. By default each sandbox gets the guest network: the internet
    /// (what the node config allows), never the private ranges, the host or other guests; a
    /// Machine narrows it with spec.network.egress.
    #[arg(long, env = "KAIRON_NO_GUEST_NETWORK")]
    no_guest_network: bool,
    /// Preview links are served at `https://<capability>-<port>.DOMAIN:<listen port>/`, each
    /// with a certificate of its own from the CA. Under `localhost` browsers resolve every
    /// name to loopback by themselves; another domain needs its subdomains to resolve here.
    #[arg(long, env = "KAIRON_PREVIEW_DOMAIN", default_value = "localhost")]
    preview_domain: String,
    #[command(flatten)]
    node: crate::node_cmd::NodeTuning,
    #[command(flatten)]
    rest: RestArgs,
    #[command(flatten)]
    limits: crate::limits_args::LimitArgs,
    /// Run without the controllers (scheduler, lifecycle, pools, claims, usage): run them
    /// with `kairon controller` instead, e.g. to stop or kill them on their own.
    #[arg(long)]
    no_controllers: bool,
    #[command(flatten)]
    controllers: crate::controller_cmd::ControllerTuning,
    /// The admission webhook a cluster's API server would call (tests of its rules run it here).
    #[command(flatten)]
    webhook: crate::webhook_server::WebhookArgs,
}

/// The REST API's options.
#[derive(clap::Args, Clone)]
pub struct RestArgs {
    /// Let named operators use exec, files and the sandbox HTTP proxy on Machines labelled
    /// kairon.zyvor.dev/sandbox=true in their namespaces (Helm: ui.auth.sandboxOperatorExec).
    #[arg(long, env = kairon_model::keys::env::UI_SANDBOX_OPERATOR_EXEC, default_value_t = false)]
    pub sandbox_operator_exec: bool,
    /// A legacy shared token: it authenticates as an operator with no identity (so guest
    /// routes stay refused to it).
    #[arg(long, env = "KAIRON_LEGACY_TOKEN", hide_env_values = true, value_parser = parse_secret)]
    pub legacy_token: Option<String>,
    /// Relay sessions stamp kairon.zyvor.dev/last-activity at most this often per Machine.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub activity_stamp_interval: Duration,
    /// Where a tenant's (non-admin) Machine may name its image, kernel and initrd (repeat, or
    /// comma-separated). Each node's runtime checks its own `[vm] image_dirs` again; `kairon up`
    /// adds DATA_DIR/images, where `kairon image` may build.
    #[arg(
        long = "image-dir",
        env = "KAIRON_IMAGE_DIRS",
        value_delimiter = ',',
        default_values_t = kairon_api::guard::DEFAULT_IMAGE_DIRS.iter().map(|d| d.to_string()).collect::<Vec<_>>()
    )]
    pub image_dirs: Vec<String>,
    /// The CA (PEM file) that signs the certificate of a runtime served over TLS whose node
    /// registers no certificate of its own (spec.runtimeCertificateSha256, which wins).
    #[arg(long, env = "KAIRON_RUNTIME_CA")]
    pub runtime_ca: Option<PathBuf>,
}

impl RestArgs {
    /// Hands the image directories (and `extra`) to the API's write guard.
    pub fn install_image_dirs(&self, extra: Option<&Path>) {
        let mut dirs = self.image_dirs.clone();
        dirs.extend(extra.map(|p| p.to_string_lossy().into_owned()));
        kairon_api::guard::set_image_dirs(dirs);
    }

    pub fn machines(
        &self,
        kube: kube::Client,
        credential: kairon_runtime_api::Credential,
    ) -> Result<kairon_api::machines::Machines> {
        let mut machines = kairon_api::machines::Machines::new(kube, credential);
        machines.sandbox_operator_exec = self.sandbox_operator_exec;
        machines.activity_stamp_interval = self.activity_stamp_interval;
        machines.runtime_ca = read_ca(self.runtime_ca.as_deref())?;
        Ok(machines)
    }
}

/// A client of the Kubernetes API: from a kubeconfig, or the pod's own (in-cluster) one.
pub async fn kube_client(kubeconfig: Option<&Path>) -> Result<kube::Client> {
    match kubeconfig {
        Some(path) => kairon_node::client_from_kubeconfig(path).await.context("reading the kubeconfig"),
        None => kube::Client::try_default().await.context("no --kubeconfig and no in-cluster configuration"),
    }
}

/// The runtimes' CA from its file, when one is named.
pub fn read_ca(path: Option<&Path>) -> Result<Option<Vec<u8>>> {
    path.map(|p| std::fs::read(p).with_context(|| format!("reading the runtimes' CA {}", p.display()))).transpose()
}

/// The shortest shared secret accepted on the command line (`--legacy-token`, `--runtime-token`).
pub const MIN_SECRET_BYTES: usize = 32;

/// A shared bearer secret: at least 32 bytes, so that it cannot be guessed.
pub fn parse_secret(s: &str) -> Result<String, String> {
    if s.len() < MIN_SECRET_BYTES {
        return Err(format!(
            "a shared token must be at least {MIN_SECRET_BYTES} bytes (this one has {}): make one with \
             `openssl rand -hex 32`",
            s.len()
        ));
    }
    Ok(s.to_string())
}

pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    kairon_model::duration::parse_seconds(s).map(|s| Duration::from_secs(s as u64))
}

pub fn default_data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_STATE_HOME") {
        return PathBuf::from(d).join("kairon");
    }
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".local/state/kairon"),
        None => PathBuf::from("/var/lib/kairon"),
    }
}

/// The HS256 secret that signs tokens, created on first use (mode 600).
pub fn signing_secret(data_dir: &Path, create: bool) -> Result<Vec<u8>> {
    let path = data_dir.join("token-secret");
    match std::fs::read(&path) {
        Ok(s) => Ok(s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
            let secret = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
            write_private(&path, secret.as_bytes())?;
            Ok(secret.into_bytes())
        }
        Err(e) => Err(e).with_context(|| {
            format!("reading {} (start `kairon up --data-dir {}` first)", path.display(), data_dir.display())
        }),
    }
}

pub fn write_private(path: &Path, data: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(data)?;
    Ok(())
}

fn kubeconfig(server: &str, ca_pem: &str, token: &str) -> String {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kairon\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: kairon-admin\n  user:\n    token: {token}\ncontexts:\n- name: kairon\n  context:\n    cluster: kairon\n    user: kairon-admin\n    namespace: default\ncurrent-context: kairon\n"
    )
}

/// An in-process Kubernetes client of this server for a node or controller identity: its
/// token is minted here and kept in memory only.
fn system_client(keys: &TokenKeys, slot: &RouterSlot, sub: &str, role: Role) -> Result<kube::Client> {
    let token = keys.mint(sub, role, vec!["*".into()], 365 * 86400)?;
    Ok(kairon_api::loopback::client(slot, &token)?)
}

pub async fn run(args: UpArgs) -> Result<()> {
    let data_dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    std::fs::create_dir_all(&data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
    let data_dir = data_dir.canonicalize()?;

    let private = match &args.database_url {
        Some(_) => None,
        None => Some(tokio::task::block_in_place(|| PrivatePostgres::start(&data_dir))?),
    };
    let url = args.database_url.clone().or_else(|| private.as_ref().map(|p| p.url.clone())).unwrap_or_default();
    let result = serve(&args, &data_dir, &url).await;
    if let Some(pg) = private {
        tokio::task::block_in_place(|| pg.stop());
    }
    result
}

async fn serve(args: &UpArgs, data_dir: &Path, url: &str) -> Result<()> {
    let store = Store::connect(url).await.context("connecting to PostgreSQL")?;
    let keys = TokenKeys::from_secret(&signing_secret(data_dir, true)?)?;
    let validation = ValidationOptions { min_idle_timeout_seconds: args.controllers.test_min_idle_timeout_seconds };
    let mut state = AppState::new(store.clone(), keys.clone(), validation).with_limits(args.limits.limits());
    state.metrics = std::sync::Arc::new(|| kairon_reconciler::metrics::global().render());

    let listener = std::net::TcpListener::bind(args.listen).with_context(|| format!("binding {}", args.listen))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let tls = crate::tls::prepare(data_dir, addr, &[])?;
    let previews = PreviewDomain::new(&args.preview_domain, Some(addr.port())).map_err(anyhow::Error::msg)?;
    let mut state = state.with_previews(Some(previews.clone()));
    let host = if addr.ip().is_unspecified() || addr.ip().is_loopback() {
        "127.0.0.1".to_string()
    } else {
        addr.ip().to_string()
    };
    let server_url = format!("https://{host}:{}", addr.port());
    let token = keys.mint("admin", Role::Admin, vec!["*".into()], 365 * 86400)?;
    let kubeconfig_path = data_dir.join("kubeconfig");
    write_private(&kubeconfig_path, kubeconfig(&server_url, &tls.ca_pem, &token).as_bytes())?;

    // The REST layer, the node agent and the controllers reach resources through kube-rs, here
    // this very server's router, in-process (the same authentication and rules as any client).
    let slot = RouterSlot::default();
    // The REST layer's own identity (an admin): what it asks is told apart from a user's admin
    // token (the RBAC test compares it with the api's ClusterRole).
    let api_token = keys.mint("kairon-api", Role::Admin, vec!["*".into()], 365 * 86400)?;
    let client = kairon_api::loopback::client(&slot, &api_token)?;
    let runtime_token = runtime_token(data_dir)?;
    state.machines = Some(std::sync::Arc::new(
        args.rest.machines(client.clone(), kairon_runtime_api::Credential::Token(runtime_token.as_str().into()))?,
    ));
    args.rest.install_image_dirs(Some(&data_dir.join("images")));
    state.legacy_token = args.rest.legacy_token.clone();
    // The router, complete, before any in-process client of it starts.
    let stopping = state.stopping.clone();
    let webhook = args.webhook.serve(state.clone(), &tls).await?;
    let app = kairon_api::router(state);
    slot.serve(app.clone());

    // The in-process node agent and controllers use their own identities, never the admin's:
    // a node may write only what a node writes, the controllers what they own (SECURITY.md).
    let node_client = system_client(&keys, &slot, &args.node_name, Role::Node)?;
    let controller_sub = format!("kairon-controller-{}", args.node_name);
    let controller_client = system_client(&keys, &slot, &controller_sub, Role::Controller)?;
    let mut workers = crate::workers::Workers::new();
    let runtime_url = if args.no_runtime {
        None
    } else {
        match start_runtime(args, data_dir, &runtime_token).await {
            Ok(url) => {
                let token = runtime_token.clone();
                let cfg = args.node.config(&args.node_name, &url, &token);
                crate::node_cmd::spawn_node_agent(&mut workers, node_client, cfg);
                if !args.no_controllers {
                    let identity = format!("kairon-controller-{}", args.node_name);
                    let controllers = args.controllers.config(identity, Some(store.clone()));
                    crate::node_cmd::spawn_controllers(&mut workers, controller_client, controllers);
                }
                Some(url)
            }
            Err(e) => {
                eprintln!("warning: the node runtime did not start, so sandboxes cannot run here: {e:#}");
                None
            }
        }
    };

    args.housekeeping.spawn(&mut workers, &store);

    println!("Kairon is up at {server_url}");
    println!("  node:        {}", args.node_name);
    println!("  data dir:    {}", data_dir.display());
    println!("  kubeconfig:  {}   (export KUBECONFIG={0})", kubeconfig_path.display());
    println!("  CA:          {}", data_dir.join("tls/ca.crt").display());
    if let Some(u) = &runtime_url {
        println!("  runtime:     {u}   (token in {})", data_dir.join("runtime-token").display());
    }
    if let Some(w) = &webhook {
        println!("  webhook:     {}", w.url);
    }
    println!(
        "  previews:    {}   (sb.preview_url(port); trust the CA in your browser)",
        previews.url("<link>", 0).replace("-0.", "-<port>.")
    );
    println!("  admin token: {token}");
    println!("Press Ctrl-C to stop.");

    let preview_tls = crate::tls::PreviewTls { domain: &previews, wildcard: None };
    let config = crate::tls::server_config(&tls, Some(preview_tls)).await?;
    let handle = axum_server::Handle::new();
    let server = crate::tls::https_server(listener, config)?.handle(handle.clone());
    let mut server = tokio::spawn(server.serve(app.into_make_service()));
    tokio::select! {
        _ = shutdown_signal() => {}
        r = &mut server => {
            workers.stop(crate::workers::GRACE).await;
            store.close().await;
            return Ok(r??);
        }
    }
    // In order: the node agent and the controllers (clients of this very server) finish what
    // they are doing while it still answers them, then the server stops accepting and drains,
    // then the store closes (the caller then stops a private PostgreSQL). Runtime instances
    // keep running: the next `kairon up` on this data dir adopts them.
    eprintln!("Stopping Kairon...");
    workers.stop(crate::workers::GRACE).await;
    if let Some(w) = &webhook {
        w.handle.graceful_shutdown(Some(DRAIN));
    }
    drain(&store, &handle, server, &stopping).await?;
    store.close().await;
    eprintln!("Kairon stopped.");
    Ok(())
}

/// How long requests in flight get to finish once the server stops accepting new ones.
pub const DRAIN: Duration = Duration::from_secs(5);

/// Stops the server: it accepts no new connections, open watch streams end (their clients see
/// a clean end of stream), long polls are told (`stopping`), and the requests in flight finish,
/// at most [`DRAIN`]; the store stays open for them until this returns.
pub async fn drain(
    store: &Store,
    handle: &axum_server::Handle<SocketAddr>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    stopping: &tokio_util::sync::CancellationToken,
) -> Result<()> {
    stopping.cancel();
    handle.graceful_shutdown(Some(DRAIN));
    store.end_watches().await;
    server.await??;
    Ok(())
}

pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return ctrl_c.await.unwrap_or(()),
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = term.recv() => {},
    }
}

/// The bearer token of this cluster's runtimes, kept in the data dir (the api and every node
/// agent started with `--runtime-token` from it share it).
fn runtime_token(data_dir: &Path) -> Result<String> {
    let token_path = data_dir.join("runtime-token");
    match std::fs::read_to_string(&token_path) {
        Ok(t) => Ok(t.trim().to_string()),
        Err(_) => {
            let t = uuid::Uuid::new_v4().simple().to_string();
            write_private(&token_path, t.as_bytes())?;
            Ok(t)
        }
    }
}

/// Starts this node's runtime in-process on a free loopback port and returns its URL.
async fn start_runtime(args: &UpArgs, data_dir: &Path, token: &str) -> Result<String> {
    let state_dir = data_dir.join("runtime").join(&args.node_name);
    // `kairon image` builds into DATA_DIR/images when /var/lib/fluxvm/images is not writable.
    let extra = vec![data_dir.join("images")];
    let serving = crate::runtime_cmd::Serving::loopback();
    let (url, _) = crate::runtime_cmd::serve_in_process(
        state_dir,
        &args.node_name,
        token,
        crate::runtime_cmd::NodeFiles {
            config: args.node_config.clone(),
            deny_cidrs: vec![],
            guest_network: Some(!args.no_guest_network),
        },
        extra,
        serving,
    )
    .await?;
    Ok(url)
}
