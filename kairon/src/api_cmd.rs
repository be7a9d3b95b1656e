//! `kairon api`: the REST API on its own against a real Kubernetes cluster (the CRDs from
//! `kairon crds` installed there), with PostgreSQL for the usage history.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};

use kairon_api::AppState;
use kairon_api::auth::TokenKeys;
use kairon_db::Store;

#[derive(clap::Args)]
pub struct ApiArgs {
    /// The cluster's kubeconfig; in-cluster config when unset.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Where this api keeps its TLS CA and token signing key.
    #[arg(long, env = "KAIRON_DATA_DIR")]
    data_dir: PathBuf,
    /// Address to serve on (HTTPS); port 0 picks a free one.
    #[arg(long, env = "KAIRON_LISTEN", default_value = "127.0.0.1:7445")]
    listen: SocketAddr,
    /// More names the api's certificate is for (repeat): e.g. the Service name a cluster's API
    /// server calls the admission webhook at, `kairon-api.kairon-system.svc`.
    #[arg(long = "tls-name", env = "KAIRON_TLS_NAMES", value_delimiter = ',')]
    tls_names: Vec<String>,
    /// PostgreSQL for the usage history.
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
    /// The nodes' runtime token (the secret the node agents were started with).
    #[arg(long, env = "KAIRON_RUNTIME_TOKEN", hide_env_values = true, value_parser = crate::up::parse_secret)]
    runtime_token: String,
    #[command(flatten)]
    rest: crate::up::RestArgs,
    #[command(flatten)]
    limits: crate::limits_args::LimitArgs,
}

pub async fn run(args: ApiArgs) -> Result<()> {
    std::fs::create_dir_all(&args.data_dir).with_context(|| format!("creating {}", args.data_dir.display()))?;
    let data_dir = args.data_dir.canonicalize()?;
    let kube = crate::up::kube_client(args.kubeconfig.as_deref()).await?;
    let store = Store::connect(&args.database_url).await.context("connecting to PostgreSQL")?;
    let keys = TokenKeys::from_secret(&crate::up::signing_secret(&data_dir, true)?)?;
    let mut state = AppState::new(store.clone(), keys, Default::default()).with_limits(args.limits.limits());
    state.machines = Some(std::sync::Arc::new(args.rest.machines(kube, args.runtime_token.clone())?));
    args.rest.install_image_dirs(None);
    state.legacy_token = args.rest.legacy_token.clone();
    // The claims this API binds in their create requests are counted here.
    state.metrics = std::sync::Arc::new(|| kairon_model::metrics::global().render());

    let listener = std::net::TcpListener::bind(args.listen).with_context(|| format!("binding {}", args.listen))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let tls = crate::tls::prepare(&data_dir, addr, &args.tls_names)?;
    let host =
        if addr.ip().is_unspecified() || addr.ip().is_loopback() { "127.0.0.1".into() } else { addr.ip().to_string() };
    println!("Kairon API is up at https://{host}:{}", addr.port());
    println!("  CA:        {}", data_dir.join("tls/ca.crt").display());
    println!("  tokens:    kairon token --data-dir {} --sub NAME --role ROLE", data_dir.display());

    let stopping = state.stopping.clone();
    let app = kairon_api::cluster_router(state);
    let config = axum_server::tls_rustls::RustlsConfig::from_pem_file(&tls.cert, &tls.key).await?;
    let handle = axum_server::Handle::new();
    let server = axum_server::from_tcp_rustls(listener, config)?.handle(handle.clone());
    let mut server = tokio::spawn(server.serve(app.into_make_service()));
    tokio::select! {
        _ = crate::up::shutdown_signal() => {}
        r = &mut server => {
            store.close().await;
            return Ok(r??);
        }
    }
    // Stop accepting, let the requests in flight finish (they still reach the database), and
    // only then close the store.
    crate::up::drain(&store, &handle, server, &stopping).await?;
    store.close().await;
    Ok(())
}
