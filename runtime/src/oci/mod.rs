//! OCI images: pulled from a registry and unpacked into a template rootfs.
//!
//! `pull` resolves an image index to linux/amd64, downloads every layer to an unnamed temporary
//! file while checking its digest, and only when all of them verified applies them in order
//! (see `layer` for the placement rules). `build_busybox_rootfs` makes the builtin template
//! without any registry.

mod busybox;
pub mod debian;
mod guard;
mod layer;
pub mod layout;

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};
use oci_client::manifest::{
    IMAGE_CONFIG_MEDIA_TYPE, IMAGE_DOCKER_CONFIG_MEDIA_TYPE, OciDescriptor, OciImageManifest, OciManifest,
};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::Deserialize;
use sha2::Digest as _;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::api::ImageConfig;

pub use busybox::{HOST_BUSYBOX, build_busybox_rootfs};
pub use guard::PullGuard;
pub use layer::apply_layer;

/// The media type of an uncompressed layer tar.
pub const LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";

/// The platform pulled out of an image index: the only one sandboxes run on.
const PLATFORM_OS: &str = "linux";
const PLATFORM_ARCH: &str = "amd64";

/// Config blobs are small JSON; anything past this is not an image config.
const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// How to reach registries.
#[derive(Clone, Default)]
pub struct RegistryConfig {
    /// `host:port` of registries reached over plain HTTP (compared with the reference's
    /// registry, e.g. `127.0.0.1:5000`).
    pub insecure_hosts: Vec<String>,
    /// Basic auth per registry host (`ghcr.io`, `127.0.0.1:5000`; `docker.io` or
    /// `index.docker.io` for Docker Hub).
    pub auth: BTreeMap<String, (String, String)>,
    /// Every connection of a pull goes through this proxy (a tenant's pull: see [`PullGuard`]).
    pub proxy: Option<String>,
}

impl RegistryConfig {
    /// Whether `reference` names a registry this config names (an insecure host or one with
    /// credentials): the node admin's own, trusted as the admin is.
    pub fn names_registry_of(&self, reference: &str) -> bool {
        let Ok(image) = reference.parse::<Reference>() else { return false };
        let (written, resolved) = (image.registry(), image.resolve_registry());
        let named = |host: &str| host == written || host == resolved;
        self.insecure_hosts.iter().any(|h| named(h)) || self.auth.keys().any(|h| named(h))
    }
}

impl fmt::Debug for RegistryConfig {
    // Passwords stay out of logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let users: BTreeMap<&String, &String> = self.auth.iter().map(|(host, (user, _))| (host, user)).collect();
        f.debug_struct("RegistryConfig")
            .field("insecure_hosts", &self.insecure_hosts)
            .field("auth_users", &users)
            .field("proxy", &self.proxy)
            .finish()
    }
}

/// Download progress, updated while layer blobs arrive. `bytes_total` is the sum of the layer
/// sizes the manifest declares (set once the manifest is read); the config blob is not counted.
#[derive(Debug, Default)]
pub struct Progress {
    pub bytes_done: AtomicU64,
    pub bytes_total: AtomicU64,
}

/// The result of a pull.
#[derive(Clone, Debug, PartialEq)]
pub struct PulledImage {
    /// Digest of the image manifest that was unpacked (for a multi-arch reference: the
    /// linux/amd64 manifest, not the index).
    pub digest: String,
    pub config: ImageConfig,
}

#[derive(thiserror::Error, Debug)]
pub enum OciError {
    #[error("bad image reference {reference:?}: {reason}")]
    BadReference { reference: String, reason: String },
    #[error("image {reference} not found: {detail}")]
    NotFound { reference: String, detail: String },
    #[error("registry {registry} refused access ({detail}): check the credentials configured for {registry}")]
    Auth { registry: String, detail: String },
    #[error("registry {registry}: {detail}")]
    Registry { registry: String, detail: String },
    #[error("{what} {expected} has digest {actual}, expected {expected}")]
    DigestMismatch { what: &'static str, expected: String, actual: String },
    #[error("{what} {digest} is larger than the {declared} bytes its descriptor declares")]
    TooLarge { what: &'static str, digest: String, declared: u64 },
    #[error(
        "unsupported media type {media_type} for {what}: Kairon runs container images whose layers are tar, tar+gzip or tar+zstd"
    )]
    UnsupportedMediaType { what: String, media_type: String },
    #[error("image index {reference} has no linux/amd64 image (it has: {available})")]
    NoPlatform { reference: String, available: String },
    #[error("bad manifest for {reference}: {detail}")]
    BadManifest { reference: String, detail: String },
    #[error("bad image config: {0}")]
    BadConfig(String),
    #[error("unsafe path {path:?} in layer: {reason}")]
    UnsafePath { path: String, reason: String },
    #[error("malformed layer: {0}")]
    BadLayer(String),
    #[error("{0}")]
    Busybox(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

impl OciError {
    fn io(context: impl Into<String>, source: io::Error) -> Self {
        OciError::Io { context: context.into(), source }
    }
}

/// One pull's registry connection and the names its errors use.
pub(crate) struct Session {
    pub(crate) client: Client,
    pub(crate) image: Reference,
    pub(crate) auth: RegistryAuth,
    reference: String,
    pub(crate) registry: String,
}

impl Session {
    /// A client for `reference`'s registry as `cfg` says: plain HTTP for its insecure hosts, its
    /// credentials (anonymous without).
    pub(crate) fn open(reference: &str, cfg: &RegistryConfig) -> Result<Session, OciError> {
        // reqwest is built without a provider of its own (to keep aws-lc-rs out): make sure ring
        // is the process default before it builds a client. Already installed is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let image: Reference = reference
            .parse()
            .map_err(|e| OciError::BadReference { reference: reference.to_string(), reason: format!("{e}") })?;
        let registry = image.resolve_registry().to_string();
        let auth = cfg
            .auth
            .get(image.registry())
            .or_else(|| cfg.auth.get(&registry))
            .map(|(user, pass)| RegistryAuth::Basic(user.clone(), pass.clone()))
            .unwrap_or(RegistryAuth::Anonymous);
        let client = Client::try_from(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(cfg.insecure_hosts.clone()),
            // Index resolution is done here, to name the platforms on offer when amd64 is missing.
            platform_resolver: None,
            https_proxy: cfg.proxy.clone(),
            http_proxy: cfg.proxy.clone(),
            ..ClientConfig::default()
        })
        .map_err(|e| OciError::Registry {
            registry: registry.clone(),
            detail: format!("cannot build HTTP client: {}", error_chain(&e)),
        })?;
        Ok(Session { client, image, auth, reference: reference.to_string(), registry })
    }

    fn error(&self, e: OciDistributionError) -> OciError {
        let not_found = |detail: String| OciError::NotFound { reference: self.reference.clone(), detail };
        let auth = |detail: String| OciError::Auth { registry: self.registry.clone(), detail };
        let registry = |detail: String| OciError::Registry { registry: self.registry.clone(), detail };
        match e {
            OciDistributionError::AuthenticationFailure(d) => auth(d),
            OciDistributionError::UnauthorizedError { url } => auth(format!("401 on {url}")),
            OciDistributionError::ImageManifestNotFoundError(d) => not_found(d),
            OciDistributionError::RegistryError { envelope, url } => {
                let detail = envelope
                    .errors
                    .iter()
                    .map(|e| format!("{:?}: {}", e.code, e.message))
                    .collect::<Vec<_>>()
                    .join("; ");
                let detail = format!("{detail} ({url})");
                match envelope.errors.first().map(|e| &e.code) {
                    Some(
                        OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::BlobUnknown
                        | OciErrorCode::NotFound,
                    ) => not_found(detail),
                    Some(OciErrorCode::Unauthorized | OciErrorCode::Denied) => auth(detail),
                    _ => registry(detail),
                }
            }
            OciDistributionError::ServerError { code, url, message } => {
                let detail = format!("HTTP {code} on {url}: {message}");
                match code {
                    404 => not_found(detail),
                    401 | 403 => auth(detail),
                    _ => registry(detail),
                }
            }
            OciDistributionError::DigestError(DigestError::VerificationError { expected, actual }) => {
                OciError::DigestMismatch { what: "manifest", expected, actual }
            }
            OciDistributionError::UnsupportedMediaTypeError(media_type) => {
                OciError::UnsupportedMediaType { what: "manifest".into(), media_type }
            }
            OciDistributionError::UnsupportedSchemaVersionError(v) => OciError::BadManifest {
                reference: self.reference.clone(),
                detail: format!("schema version {v} is not supported (only 2)"),
            },
            OciDistributionError::ManifestParsingError(d) | OciDistributionError::VersionedParsingError(d) => {
                OciError::BadManifest { reference: self.reference.clone(), detail: d }
            }
            OciDistributionError::RequestError(e) => registry(error_chain(&e)),
            other => registry(error_chain(&other)),
        }
    }

    async fn manifest(&self, image: &Reference) -> Result<(OciManifest, String), OciError> {
        self.client.pull_manifest(image, &self.auth).await.map_err(|e| self.error(e))
    }

    /// Resolves the reference to one image manifest, picking linux/amd64 out of an index.
    async fn image_manifest(&self) -> Result<(OciImageManifest, String), OciError> {
        let index = match self.manifest(&self.image).await? {
            (OciManifest::Image(m), digest) => return Ok((m, digest)),
            (OciManifest::ImageIndex(index), _) => index,
        };
        let chosen = index.manifests.iter().find(|m| {
            m.platform
                .as_ref()
                .is_some_and(|p| p.os.to_string() == PLATFORM_OS && p.architecture.to_string() == PLATFORM_ARCH)
        });
        let Some(chosen) = chosen else {
            let available = index
                .manifests
                .iter()
                .map(|m| match &m.platform {
                    Some(p) => format!("{}/{}", p.os, p.architecture),
                    None => "no platform".to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ");
            return Err(OciError::NoPlatform { reference: self.reference.clone(), available });
        };
        let by_digest = self.image.clone_with_digest(chosen.digest.clone());
        match self.manifest(&by_digest).await? {
            (OciManifest::Image(m), digest) => Ok((m, digest)),
            (OciManifest::ImageIndex(_), _) => Err(OciError::BadManifest {
                reference: self.reference.clone(),
                detail: format!("index entry {} is itself an index", chosen.digest),
            }),
        }
    }

    /// Streams one blob into `out`, checking size and digest; layer bytes go to `counter`.
    async fn fetch_blob<W: AsyncWrite + Unpin>(
        &self,
        desc: &OciDescriptor,
        what: &'static str,
        declared: u64,
        out: &mut W,
        counter: Option<&AtomicU64>,
    ) -> Result<(), OciError> {
        let mut hasher = Hasher::for_digest(&desc.digest).ok_or_else(|| OciError::BadManifest {
            reference: self.reference.clone(),
            detail: format!("{what} digest {} uses an unsupported algorithm", desc.digest),
        })?;
        let mut stream = self.client.pull_blob_stream(&self.image, desc).await.map_err(|e| self.error(e))?;
        let mut received: u64 = 0;
        while let Some(chunk) = stream.next().await {
            let bytes = match chunk {
                Ok(bytes) => bytes,
                // oci-client checks digests too and reports a mismatch after the last byte;
                // ours below gives the message with both digests.
                Err(e) if is_digest_error(&e) => break,
                Err(e) => {
                    return Err(OciError::Registry {
                        registry: self.registry.clone(),
                        detail: format!("downloading {what} {}: {}", desc.digest, error_chain(&e)),
                    });
                }
            };
            received += bytes.len() as u64;
            if received > declared {
                return Err(OciError::TooLarge { what, digest: desc.digest.clone(), declared });
            }
            hasher.update(&bytes);
            out.write_all(&bytes).await.map_err(|e| OciError::io(format!("storing {what} {}", desc.digest), e))?;
            if let Some(counter) = counter {
                counter.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            }
        }
        out.flush().await.map_err(|e| OciError::io(format!("storing {what} {}", desc.digest), e))?;
        let actual = hasher.finish();
        if actual != desc.digest {
            return Err(OciError::DigestMismatch { what, expected: desc.digest.clone(), actual });
        }
        Ok(())
    }
}

/// Pulls `reference` (linux/amd64 out of an index) and unpacks its layers into `rootfs`
/// (created if missing; normally empty). Every layer is downloaded and verified before the
/// first is applied, so a bad blob leaves the rootfs untouched. On any error the rootfs may
/// still hold part of the image: the caller removes it.
pub async fn pull(
    reference: &str,
    rootfs: &Path,
    cfg: &RegistryConfig,
    progress: &Progress,
) -> Result<PulledImage, OciError> {
    let session = Session::open(reference, cfg)?;

    tracing::info!(reference, rootfs = %rootfs.display(), "pulling image");
    let (manifest, digest) = session.image_manifest().await?;

    let config_type = manifest.config.media_type.as_str();
    if config_type != IMAGE_CONFIG_MEDIA_TYPE && config_type != IMAGE_DOCKER_CONFIG_MEDIA_TYPE {
        return Err(OciError::UnsupportedMediaType {
            what: "image config (is this a container image?)".into(),
            media_type: config_type.to_string(),
        });
    }
    let mut total: u64 = 0;
    for desc in &manifest.layers {
        layer::compression_for(&desc.media_type)?;
        total += declared_size(&session, desc, "layer")?;
    }
    progress.bytes_done.store(0, Ordering::Relaxed);
    progress.bytes_total.store(total, Ordering::Relaxed);

    let config_size = declared_size(&session, &manifest.config, "config")?;
    if config_size > MAX_CONFIG_BYTES {
        return Err(OciError::BadConfig(format!(
            "config blob is {config_size} bytes, more than the {MAX_CONFIG_BYTES} accepted"
        )));
    }
    let mut config_bytes = Vec::new();
    session.fetch_blob(&manifest.config, "config", config_size, &mut config_bytes, None).await?;
    let config = parse_config(&config_bytes)?;

    let staging = staging_dir(rootfs);
    let mut blobs = Vec::with_capacity(manifest.layers.len());
    for desc in &manifest.layers {
        let size = declared_size(&session, desc, "layer")?;
        // Unnamed (O_TMPFILE) beside the rootfs: same disk, and gone when dropped.
        let file = tempfile::tempfile_in(&staging)
            .map_err(|e| OciError::io(format!("creating a temporary file in {}", staging.display()), e))?;
        let mut out = tokio::io::BufWriter::with_capacity(1 << 20, tokio::fs::File::from_std(file));
        session.fetch_blob(desc, "layer", size, &mut out, Some(&progress.bytes_done)).await?;
        let file = out.into_inner().into_std().await;
        blobs.push((file, desc.media_type.clone(), desc.digest.clone()));
    }

    let root = rootfs.to_path_buf();
    tokio::task::spawn_blocking(move || apply_all(blobs, &root))
        .await
        .map_err(|e| OciError::io("applying layers", io::Error::other(e)))??;
    tracing::info!(reference, %digest, "image unpacked");
    Ok(PulledImage { digest, config })
}

fn apply_all(blobs: Vec<(std::fs::File, String, String)>, rootfs: &Path) -> Result<(), OciError> {
    layer::create_rootfs(rootfs)?;
    for (mut file, media_type, digest) in blobs {
        file.seek(SeekFrom::Start(0)).map_err(|e| OciError::io(format!("rereading layer {digest}"), e))?;
        apply_layer(BufReader::with_capacity(1 << 20, file), &media_type, rootfs).map_err(|e| match e {
            // Say which layer: the entry alone does not tell a person where to look.
            OciError::BadLayer(d) => OciError::BadLayer(format!("layer {digest}: {d}")),
            OciError::UnsafePath { path, reason } => {
                OciError::UnsafePath { path, reason: format!("{reason} (layer {digest})") }
            }
            other => other,
        })?;
    }
    Ok(())
}

fn declared_size(s: &Session, desc: &OciDescriptor, what: &str) -> Result<u64, OciError> {
    u64::try_from(desc.size).map_err(|_| OciError::BadManifest {
        reference: s.reference.clone(),
        detail: format!("{what} {} has negative size {}", desc.digest, desc.size),
    })
}

fn staging_dir(rootfs: &Path) -> PathBuf {
    match rootfs.parent() {
        Some(p) if p.as_os_str().is_empty() => PathBuf::from("."),
        Some(p) if p.is_dir() => p.to_path_buf(),
        _ => std::env::temp_dir(),
    }
}

/// The run settings of an OCI or Docker image config; everything else in it is ignored.
fn parse_config(bytes: &[u8]) -> Result<ImageConfig, OciError> {
    #[derive(Deserialize)]
    struct Blob {
        #[serde(default)]
        config: Option<Run>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Run {
        #[serde(default)]
        entrypoint: Option<Vec<String>>,
        #[serde(default)]
        cmd: Option<Vec<String>>,
        #[serde(default)]
        env: Option<Vec<String>>,
        #[serde(default)]
        working_dir: Option<String>,
        #[serde(default)]
        user: Option<String>,
    }
    let blob: Blob = serde_json::from_slice(bytes).map_err(|e| OciError::BadConfig(e.to_string()))?;
    let Some(run) = blob.config else {
        return Ok(ImageConfig::default());
    };
    let non_empty = |s: Option<String>| s.filter(|s| !s.is_empty());
    Ok(ImageConfig {
        entrypoint: run.entrypoint.unwrap_or_default(),
        cmd: run.cmd.unwrap_or_default(),
        env: run.env.unwrap_or_default(),
        working_dir: non_empty(run.working_dir),
        user: non_empty(run.user),
    })
}

enum Hasher {
    Sha256(sha2::Sha256),
    Sha512(sha2::Sha512),
}

impl Hasher {
    fn for_digest(digest: &str) -> Option<Self> {
        match digest.split_once(':')?.0 {
            "sha256" => Some(Hasher::Sha256(sha2::Sha256::new())),
            "sha512" => Some(Hasher::Sha512(sha2::Sha512::new())),
            _ => None,
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Sha512(h) => h.update(bytes),
        }
    }

    fn finish(self) -> String {
        match self {
            Hasher::Sha256(h) => format!("sha256:{}", hex::encode(h.finalize())),
            Hasher::Sha512(h) => format!("sha512:{}", hex::encode(h.finalize())),
        }
    }
}

fn is_digest_error(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.downcast_ref::<DigestError>().is_some())
}

/// An error with its sources: reqwest's own message ("error sending request") says little.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let msg = s.to_string();
        if !out.contains(&msg) {
            out.push_str(": ");
            out.push_str(&msg);
        }
        source = s.source();
    }
    out
}
