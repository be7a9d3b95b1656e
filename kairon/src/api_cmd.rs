//! `kairon api`: the REST API on its own against a real Kubernetes cluster (the CRDs from
//! `kairon crds` installed there), with PostgreSQL for the usage history.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use tower::ServiceExt;

use kairon_api::AppState;
use kairon_api::auth::TokenKeys;
use kairon_api::k8s::status::ApiError;
use kairon_api::previews::PreviewDomain;
use kairon_db::Store;
use kairon_runtime_api::Credential;
use kairon_runtime_api::grant::GrantSigner;

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
    #[arg(long, env = "KAIRON_RUNTIME_TOKEN", hide_env_values = true, value_parser = crate::up::parse_secret,
          required_unless_present = "runtime_signing_key", conflicts_with = "runtime_signing_key")]
    runtime_token: Option<String>,
    /// Instead of one token: the private key (PEM; `kairon runtime-keys` makes the pair) this api
    /// signs a grant with for each node's runtime, which accepts only its own (`kairon node
    /// --runtime-api-key` with the public key).
    #[arg(long, env = "KAIRON_RUNTIME_SIGNING_KEY")]
    runtime_signing_key: Option<PathBuf>,
    /// Serve preview links at `https://<capability>-<port>.DOMAIN/`: every subdomain of DOMAIN
    /// must resolve to this api (wildcard DNS). Each link's host gets a certificate of its own
    /// from this api's CA, which browsers must trust (or terminate TLS for *.DOMAIN in front of
    /// the api with a wildcard certificate). Without it previews answer 501: never a shared origin.
    #[arg(long, env = "KAIRON_PREVIEW_DOMAIN")]
    preview_domain: Option<String>,
    /// A certificate for *.DOMAIN (PEM, the leaf first) to serve preview links with, e.g. one a
    /// public CA issued, instead of one minted per link from this api's CA.
    #[arg(long, env = "KAIRON_PREVIEW_TLS_CERT", requires_all = ["preview_tls_key", "preview_domain"])]
    preview_tls_cert: Option<PathBuf>,
    /// The key of --preview-tls-cert (PEM).
    #[arg(long, env = "KAIRON_PREVIEW_TLS_KEY", requires = "preview_tls_cert")]
    preview_tls_key: Option<PathBuf>,
    /// The port preview links' URLs name (where *.DOMAIN reaches this api).
    #[arg(long, env = "KAIRON_PREVIEW_PORT", default_value_t = 443)]
    preview_port: u16,
    #[command(flatten)]
    rest: crate::up::RestArgs,
    #[command(flatten)]
    limits: crate::limits_args::LimitArgs,
    #[command(flatten)]
    webhook: crate::webhook_server::WebhookArgs,
}

pub async fn run(args: ApiArgs) -> Result<()> {
    std::fs::create_dir_all(&args.data_dir).with_context(|| format!("creating {}", args.data_dir.display()))?;
    let data_dir = args.data_dir.canonicalize()?;
    let kube = crate::up::kube_client(args.kubeconfig.as_deref()).await?;
    let keys = TokenKeys::from_secret(&crate::up::signing_secret(&data_dir, true)?)?;
    let credential = match (&args.runtime_token, &args.runtime_signing_key) {
        (_, Some(path)) => {
            let pem =
                std::fs::read(path).with_context(|| format!("reading the runtime signing key {}", path.display()))?;
            Credential::Grants(Arc::new(GrantSigner::from_pem(&pem)?))
        }
        (Some(token), None) => Credential::Token(token.as_str().into()),
        (None, None) => anyhow::bail!("give --runtime-token or --runtime-signing-key"),
    };

    let listener = std::net::TcpListener::bind(args.listen).with_context(|| format!("binding {}", args.listen))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let tls = crate::tls::prepare(&data_dir, addr, &args.tls_names)?;
    let previews = match &args.preview_domain {
        Some(d) => Some(PreviewDomain::new(d, Some(args.preview_port)).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let host =
        if addr.ip().is_unspecified() || addr.ip().is_loopback() { "127.0.0.1".into() } else { addr.ip().to_string() };
    let url = format!("https://{host}:{}", addr.port());
    tracing::info!(%url, "serving /livez; the API follows once PostgreSQL answers");

    // Served at once, so a pod that starts before its database is alive rather than crash-looping:
    // /livez answers, /readyz and every other route say what is awaited, until the store is open.
    let starting = Starting::default();
    let wildcard = args.preview_tls_cert.as_deref().zip(args.preview_tls_key.as_deref());
    let preview_tls = previews.as_ref().map(|domain| crate::tls::PreviewTls { domain, wildcard });
    let config = crate::tls::server_config(&tls, preview_tls).await?;
    let handle = axum_server::Handle::new();
    let server = crate::tls::https_server(listener, config)?.handle(handle.clone());
    let mut server = tokio::spawn(server.serve(starting.router().into_make_service()));
    let store = tokio::select! {
        store = starting.connect(&args.database_url) => store,
        _ = crate::up::shutdown_signal() => {
            handle.graceful_shutdown(Some(std::time::Duration::from_secs(1)));
            return Ok(server.await??);
        }
        r = &mut server => return Ok(r??),
    };

    let mut state = AppState::new(store.clone(), keys, Default::default())
        .with_limits(args.limits.limits())
        .with_previews(previews);
    let mut machines = args.rest.machines(kube, credential)?;
    // Writes made for a caller carry who it is (kairon_api::requester).
    machines.own_user = kairon_api::requester::own_user(&machines.kube).await;
    state.machines = Some(std::sync::Arc::new(machines));
    args.rest.install_image_dirs(None);
    state.legacy_token = args.rest.legacy_token.clone();
    // The claims this API binds in their create requests are counted here.
    state.metrics = std::sync::Arc::new(|| kairon_model::metrics::global().render());
    let stopping = state.stopping.clone();
    let webhook = args.webhook.serve(state.clone(), &tls).await?;
    starting.ready(kairon_api::cluster_router(state));
    println!("Kairon API is up at {url}");
    if let Some(w) = &webhook {
        println!("  webhook:   {}", w.url);
    }
    println!("  CA:        {}", data_dir.join("tls/ca.crt").display());
    println!("  tokens:    kairon token --data-dir {} --sub NAME --role ROLE", data_dir.display());

    tokio::select! {
        _ = crate::up::shutdown_signal() => {}
        r = &mut server => {
            store.close().await;
            return Ok(r??);
        }
    }
    // Stop accepting, let the requests in flight finish (they still reach the database), and
    // only then close the store.
    if let Some(w) = &webhook {
        w.handle.graceful_shutdown(Some(crate::up::DRAIN));
    }
    crate::up::drain(&store, &handle, server, &stopping).await?;
    store.close().await;
    Ok(())
}

/// The api before its store is open: the router it serves from the start, which hands every
/// request to the full API once [`Starting::ready`] gave it one.
#[derive(Clone, Default)]
struct Starting {
    app: Arc<OnceLock<Router>>,
    /// Why the store is not open yet (the last error), for /readyz and the 503s.
    waiting: Arc<Mutex<String>>,
}

impl Starting {
    fn router(&self) -> Router {
        let this = self.clone();
        Router::new().fallback(move |req: Request| {
            let this = this.clone();
            async move {
                if let Some(app) = this.app.get() {
                    return app.clone().oneshot(req).await.into_response();
                }
                if matches!(req.uri().path(), "/livez" | "/healthz") {
                    return "ok".into_response();
                }
                let why = format!("Kairon API is starting: {}", this.waiting.lock().expect("lock"));
                let mut resp =
                    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", why).into_response();
                resp.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("5"));
                resp
            }
        })
    }

    /// Opens the store, retrying (1 s, doubling to 30 s) until PostgreSQL answers.
    async fn connect(&self, database_url: &str) -> Store {
        let mut delay = Duration::from_secs(1);
        loop {
            *self.waiting.lock().expect("lock") = "connecting to PostgreSQL".into();
            // One attempt first: the pool itself retries quietly until its acquire timeout.
            let opened = match Store::probe(database_url).await {
                Ok(()) => Store::connect(database_url).await,
                Err(e) => Err(e),
            };
            match opened {
                Ok(store) => return store,
                Err(e) => {
                    let why = format!("PostgreSQL unreachable ({e}); retrying in {}s", delay.as_secs());
                    tracing::warn!("{why}");
                    *self.waiting.lock().expect("lock") = why;
                }
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(30));
        }
    }

    fn ready(&self, app: Router) {
        let _ = self.app.set(app);
    }
}
