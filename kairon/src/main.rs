//! `kairon`: the Kairon control plane in one binary.

mod api_cmd;
mod container_image;
mod controller_cmd;
mod hops;
mod housekeeping;
mod limits_args;
mod node_cmd;
mod postgres;
mod runtime_cmd;
mod tls;
mod up;
mod webhook_server;
mod workers;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use kairon_api::auth::{Role, TokenKeys};

#[derive(Parser)]
#[command(name = "kairon", version, about = "Kairon: a control plane for agent sandboxes")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run everything in one process (embedded mode): API, store, and a private PostgreSQL
    /// unless DATABASE_URL is set.
    Up(Box<up::UpArgs>),
    /// Run the REST API alone against a real cluster (resources through its Kubernetes API).
    Api(api_cmd::ApiArgs),
    /// Run a node agent (with its own runtime unless --runtime-endpoint is given) against a
    /// Kairon API.
    Node(node_cmd::NodeArgs),
    /// Run the controllers alone (leader-elected) against a Kairon API or a cluster.
    Controller(controller_cmd::ControllerArgs),
    /// Run this node's runtime (the FluxVM v1 API over runc sandboxes) on its own.
    Runtime(runtime_cmd::RuntimeArgs),
    /// Print a signed bearer token.
    Token(TokenArgs),
    /// Print the CustomResourceDefinitions (both versions) for a real cluster.
    Crds,
    /// Print the REST API's OpenAPI document (what openapi/openapi.json holds).
    Openapi,
    /// Build the default VM image (kairon-hw.qcow2, with its kernel and initrd) unless it
    /// exists, and print its path. `kairon up` does this in the background on first start.
    Image {
        /// Where images go when /var/lib/fluxvm/images cannot be written.
        #[arg(long, env = "KAIRON_DATA_DIR")]
        data_dir: Option<PathBuf>,
    },
    /// Make the key pair of per-node runtime grants: DIR/runtime-signing.key (for `kairon api
    /// --runtime-signing-key`, mode 600) and DIR/runtime-api.pub (for every `kairon node
    /// --runtime-api-key`).
    RuntimeKeys {
        #[arg(long)]
        out: PathBuf,
    },
    /// Build Kairon's container image (an OCI image layout, no Docker daemon) or push one.
    #[command(subcommand)]
    ContainerImage(container_image::ContainerImageCommand),
    /// Apply the database migrations to DATABASE_URL.
    Migrate {
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
    },
}

#[derive(clap::Args)]
struct TokenArgs {
    /// The data dir of the `kairon up` whose key signs the token.
    #[arg(long, env = "KAIRON_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Who the token is for.
    #[arg(long)]
    sub: String,
    /// admin, operator, viewer, node (sub = the node's name), controller, or metrics (reads /metrics only).
    #[arg(long, value_parser = |s: &str| s.parse::<Role>())]
    role: Role,
    /// Namespaces an operator or viewer may use (comma-separated; `*` for all).
    #[arg(long, value_delimiter = ',')]
    namespaces: Vec<String>,
    /// How long the token is valid (e.g. 1h, 30d).
    #[arg(long, default_value = "1h", value_parser = |s: &str| kairon_model::duration::parse_seconds(s))]
    ttl: i64,
}

fn main() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = runtime.block_on(run());
    // Blocking work still under way (a background VM image build waiting for another process's
    // build lock, say) must not hold the exit: `#[tokio::main]` would wait for it (a SIGTERM took
    // 38 s to end `kairon up` so).
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    result
}

fn default_log_filter() -> tracing_subscriber::EnvFilter {
    "info,sqlx=warn,tower_http=warn".into()
}

/// The log on stderr (`KAIRON_LOG`, else [`default_log_filter`]) and the hop timings.
fn subscriber(log_filter: tracing_subscriber::EnvFilter) -> impl tracing::Subscriber + Send + Sync {
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(log_filter))
        .with(hops::layer())
}

async fn run() -> Result<()> {
    // One TLS provider for the whole process (kube-rs and the server both use rustls).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let log_filter = tracing_subscriber::EnvFilter::try_from_env("KAIRON_LOG").unwrap_or_else(|_| default_log_filter());
    subscriber(log_filter).init();
    match Cli::parse().command {
        Command::Up(args) => up::run(*args).await,
        Command::Api(args) => api_cmd::run(args).await,
        Command::Runtime(args) => runtime_cmd::run(args).await,
        Command::Node(args) => node_cmd::run(args).await,
        Command::Controller(args) => controller_cmd::run(args).await,
        Command::Token(t) => {
            let dir = t.data_dir.unwrap_or_else(up::default_data_dir);
            let keys = TokenKeys::from_secret(&up::signing_secret(&dir, false)?)?;
            println!("{}", keys.mint(&t.sub, t.role, t.namespaces, t.ttl)?);
            Ok(())
        }
        Command::Image { data_dir } => {
            let dir = data_dir.unwrap_or_else(up::default_data_dir);
            let images = kairon_runtime::vm::image::images_dir(&dir.join("images"));
            let progress = kairon_runtime::oci::Progress::default();
            let path = kairon_runtime::vm::image::ensure_default_image(&images, &progress).await?;
            // The KVM probe boots the image's kernel once per host boot; do it now, not when
            // the first node registers.
            let accel = kairon_runtime::vm::accel(Some(&path.with_extension("vmlinuz")), &images).await;
            eprintln!("VM acceleration on this host: {accel:?}");
            println!("{}", path.display());
            Ok(())
        }
        Command::RuntimeKeys { out } => {
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt as _;
            let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)?;
            std::fs::create_dir_all(&out)?;
            let private = out.join("runtime-signing.key");
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&private)
                .with_context(|| format!("creating {} (an existing key is never overwritten)", private.display()))?
                .write_all(pair.serialize_pem().as_bytes())?;
            let public = out.join("runtime-api.pub");
            std::fs::write(&public, pair.public_key_pem())?;
            println!("{}\n{}", private.display(), public.display());
            Ok(())
        }
        Command::ContainerImage(command) => container_image::run(command).await,
        Command::Crds => {
            print!("{}", kairon_model::crds::yaml()?);
            Ok(())
        }
        Command::Openapi => {
            print!("{}", kairon_api::rest::openapi_text());
            Ok(())
        }
        Command::Migrate { database_url } => {
            let store = kairon_db::Store::connect(&database_url).await.context("connecting to the database")?;
            store.close().await;
            eprintln!("migrations applied");
            Ok(())
        }
    }
}
