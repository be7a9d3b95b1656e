//! `kairon container-image build|push`: Kairon's own container image for a cluster, built with
//! no Docker daemon. A Debian minbase root filesystem (debootstrap) with what the node's runtime
//! runs (runc, QEMU, the guest network's tools) is the base layer, kept between builds; this
//! binary and the static guest agent are the second. The result is an OCI image layout, pushed to
//! a registry by the same OCI client that pulls sandbox images.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use sha2::Digest as _;

use kairon_runtime::api::ImageConfig;
use kairon_runtime::oci::layout::{self, LayerBlob};
use kairon_runtime::oci::{Progress, RegistryConfig, debian};

/// What the base layer holds beyond minbase, each for something the binary runs.
const PACKAGES: &[&str] = &[
    "runc",            // sandboxes
    "qemu-system-x86", // VMs
    "qemu-utils",      // their disks (qemu-img)
    "iproute2",        // the guest network's links (ip)
    "nftables",        // and its packet rules (nft)
    "e2fsprogs",       // sandbox disks and VM images (mke2fs)
    "busybox-static",  // the builtin busybox template and the VM image's tools
    "tini",            // a sandbox's init (tini-static)
    "debootstrap",     // the builtin python template
    "procps",          // kill
    "ca-certificates", // registries over HTTPS
];

/// Where the binaries go in the image (the runtime finds the agent beside `kairon`).
const BIN_DIR: &str = "usr/local/bin";
const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

#[derive(clap::Subcommand)]
pub enum ContainerImageCommand {
    /// Build the image as an OCI image layout (needs root for debootstrap, the first time).
    Build(BuildArgs),
    /// Push an image layout to a registry.
    Push(PushArgs),
}

#[derive(clap::Args)]
pub struct BuildArgs {
    /// The OCI image layout to write (a missing or empty directory, or an earlier layout, which
    /// is replaced).
    #[arg(long)]
    out: PathBuf,
    /// The kairon binary the image runs; default this one (build it with `cargo build --release
    /// -p kairon`).
    #[arg(long)]
    binary: Option<PathBuf>,
    /// The static guest agent VMs boot with; default the one `kairon up` finds (`scripts/build-agent`
    /// builds it).
    #[arg(long)]
    agent: Option<PathBuf>,
    /// The image's name in the layout's index.
    #[arg(long, default_value = env!("CARGO_PKG_VERSION"))]
    tag: String,
    /// Where the Debian base layer is kept between builds.
    #[arg(long, env = "KAIRON_IMAGE_CACHE")]
    cache_dir: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct PushArgs {
    /// The image layout to push (from `kairon container-image build`).
    #[arg(long)]
    layout: PathBuf,
    /// Where to: REGISTRY/REPOSITORY:TAG.
    reference: String,
    /// Reach the registry over plain HTTP (one on loopback, say).
    #[arg(long)]
    insecure: bool,
    #[arg(long, env = "KAIRON_REGISTRY_USERNAME")]
    username: Option<String>,
    #[arg(long, env = "KAIRON_REGISTRY_PASSWORD", hide_env_values = true)]
    password: Option<String>,
}

pub async fn run(command: ContainerImageCommand) -> Result<()> {
    match command {
        ContainerImageCommand::Build(args) => build(args).await,
        ContainerImageCommand::Push(args) => push(args).await,
    }
}

async fn build(args: BuildArgs) -> Result<()> {
    let binary = match args.binary {
        Some(b) => b,
        None => std::env::current_exe().context("finding this binary")?,
    };
    let agent = args
        .agent
        .or_else(kairon_runtime::vm::image::find_agent)
        .context("no static kairon-agent found: build it with scripts/build-agent, or pass --agent")?;
    for file in [&binary, &agent] {
        anyhow::ensure!(file.is_file(), "{} is not a file", file.display());
    }
    prepare_out(&args.out)?;
    let cache = args.cache_dir.unwrap_or_else(default_cache_dir);
    let base = base_layer(&cache).await?;
    layout::import_layer(&args.out, &base_layout(&cache, &base_key()?), &base)?;

    let tree = tempfile::tempdir_in(&args.out).context("creating a staging directory")?;
    let bin = tree.path().join(BIN_DIR);
    std::fs::create_dir_all(&bin)?;
    for (from, name) in [(&binary, "kairon"), (&agent, "kairon-agent")] {
        std::fs::copy(from, bin.join(name)).with_context(|| format!("copying {}", from.display()))?;
    }
    let created_by = format!("kairon {} and kairon-agent in /{BIN_DIR}", env!("CARGO_PKG_VERSION"));
    let (out, staged) = (args.out.clone(), tree.path().to_path_buf());
    let binaries = tokio::task::spawn_blocking(move || layout::add_layer(&out, &staged, &created_by)).await??;
    drop(tree);

    let run = ImageConfig {
        entrypoint: vec![format!("/{BIN_DIR}/kairon")],
        cmd: vec!["--help".into()],
        env: vec![PATH_ENV.into(), "LANG=C.UTF-8".into()],
        working_dir: Some("/".into()),
        user: None,
    };
    let digest = layout::write_image(&args.out, &[base.clone(), binaries.clone()], &run, &args.tag)?;
    eprintln!(
        "base layer {} ({} MiB), binaries {} ({} MiB)",
        base.digest,
        base.size >> 20,
        binaries.digest,
        binaries.size >> 20
    );
    println!("{digest}");
    Ok(())
}

async fn push(args: PushArgs) -> Result<()> {
    let mut cfg = RegistryConfig::default();
    let host = args.reference.split('/').next().unwrap_or_default().to_string();
    if args.insecure {
        cfg.insecure_hosts.push(host.clone());
    }
    match (args.username, args.password) {
        (Some(user), Some(pass)) => {
            cfg.auth.insert(host, (user, pass));
        }
        (None, None) => {}
        _ => bail!("give both --username and KAIRON_REGISTRY_PASSWORD, or neither"),
    }
    let digest = layout::push(&args.layout, &args.reference, &cfg).await?;
    println!("{}@{digest}", args.reference);
    Ok(())
}

/// The output directory, made ready: missing, empty, or an earlier layout (cleared).
fn prepare_out(out: &Path) -> Result<()> {
    if out.exists() {
        let empty = std::fs::read_dir(out)?.next().is_none();
        if !empty && !out.join("oci-layout").is_file() {
            bail!("{} holds files and is not an image layout: give a new directory", out.display());
        }
        std::fs::remove_dir_all(out).with_context(|| format!("clearing {}", out.display()))?;
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))
}

fn default_cache_dir() -> PathBuf {
    if rustix::process::geteuid().is_root() {
        return PathBuf::from("/var/cache/kairon/container-image");
    }
    let home = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    home.join("kairon/container-image")
}

/// Names the base layer by what goes into it: the package list and the Debian it comes from.
fn base_key() -> Result<String> {
    let (mirror, suite) = debian::configured_source()?;
    let hash = sha2::Sha256::digest(format!("{suite}\n{mirror}\n{}", PACKAGES.join(",")));
    Ok(format!("{suite}-{}", &hex::encode(hash)[..16]))
}

fn base_layout(cache: &Path, key: &str) -> PathBuf {
    cache.join(format!("base-{key}"))
}

/// The base layer, from the cache or built now (debootstrap: a few minutes, with progress).
async fn base_layer(cache: &Path) -> Result<LayerBlob> {
    let key = base_key()?;
    let dir = base_layout(cache, &key);
    let record = dir.join("layer.json");
    if let Ok(bytes) = std::fs::read(&record)
        && let Ok(layer) = serde_json::from_slice::<LayerBlob>(&bytes)
        && layout::blob_path(&dir, &layer.digest).is_file()
    {
        eprintln!("base layer {key}: cached in {}", dir.display());
        return Ok(layer);
    }
    if !rustix::process::geteuid().is_root() {
        bail!("building the base layer runs debootstrap, which needs root: run this as root once");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let rootfs = cache.join(format!("rootfs-{key}"));
    if rootfs.exists() {
        std::fs::remove_dir_all(&rootfs).with_context(|| format!("clearing {}", rootfs.display()))?;
    }
    std::fs::create_dir_all(cache)?;
    eprintln!("base layer {key}: debootstrap with {} (a few minutes)", PACKAGES.join(", "));
    let progress = Progress::default();
    let started = std::time::Instant::now();
    let reporter = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(15)).await;
            eprintln!("  debootstrap: {} s, still fetching and unpacking packages", started.elapsed().as_secs());
        }
    });
    let built = debian::bootstrap(&rootfs, PACKAGES, &progress).await;
    reporter.abort();
    built?;
    eprintln!(
        "  root filesystem done in {} s ({} MiB); writing it as a layer",
        started.elapsed().as_secs(),
        progress.bytes_done.load(Ordering::Relaxed) >> 20
    );
    let created_by = format!("debootstrap --variant=minbase --include={}", PACKAGES.join(","));
    let (out, tree) = (dir.clone(), rootfs.clone());
    let layer = tokio::task::spawn_blocking(move || layout::add_layer(&out, &tree, &created_by)).await??;
    std::fs::write(&record, serde_json::to_vec_pretty(&layer)?)?;
    std::fs::remove_dir_all(&rootfs).with_context(|| format!("removing {}", rootfs.display()))?;
    Ok(layer)
}
