//! Test support shared by the runtime tests: a real registry on loopback and an image pusher.
#![allow(dead_code, unused_imports)]

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use kairon_runtime::api::ImageConfig;
use kairon_runtime::oci::{self, OciError, Progress, PulledImage, RegistryConfig, apply_layer, build_busybox_rootfs};
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use serde_json::json;
use sha2::{Digest, Sha256};

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const TAR: &str = "application/vnd.oci.image.layer.v1.tar";
pub const TAR_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const TAR_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
pub const DOCKER_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";

/// bcrypt of "kairon-secret" (cost 4), made once with Python's bcrypt; the registry's htpasswd
/// only takes bcrypt.
pub const HTPASSWD: &str = "kairon:$2b$04$2rrkUALLFcPGDq5guwTp3eaQTnCyKNIMBdFQxYX.hvYWRysbuzebW\n";

// ---------------------------------------------------------------------------------------------
// The registry

/// A docker-registry process on a free loopback port; killed on drop.
pub struct Registry {
    child: Child,
    pub host: String,
    pub dir: tempfile::TempDir,
}

impl Registry {
    pub fn start() -> Registry {
        Self::start_with(false)
    }

    pub fn start_with(htpasswd: bool) -> Registry {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
        let host = format!("127.0.0.1:{port}");
        let storage = dir.path().join("storage");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
             http:\n  addr: {host}\n  secret: kairon-test\n",
            storage.display()
        );
        if htpasswd {
            let path = dir.path().join("htpasswd");
            fs::write(&path, HTPASSWD).expect("htpasswd");
            config.push_str(&format!("auth:\n  htpasswd:\n    realm: kairon-test\n    path: {}\n", path.display()));
        }
        let config_path = dir.path().join("config.yml");
        fs::write(&config_path, config).expect("config");
        let log = fs::File::create(dir.path().join("registry.log")).expect("log");
        let child = Command::new("/usr/bin/docker-registry")
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start /usr/bin/docker-registry (Debian package docker-registry)");
        let mut registry = Registry { child, host, dir };
        registry.wait_ready();
        registry
    }

    pub fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                panic!("registry exited with {status}: {}", self.log());
            }
            // Any HTTP answer on /v2/ (200, or 401 with auth on) means it serves.
            if let Some(status) = http_status(&self.host, "/v2/")
                && (status == 200 || status == 401)
            {
                return;
            }
            assert!(Instant::now() < deadline, "registry not ready: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Where the filesystem driver keeps a blob's bytes.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("sha256 digest");
        self.dir.path().join("storage/docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data")
    }

    pub fn insecure(&self) -> RegistryConfig {
        RegistryConfig { insecure_hosts: vec![self.host.clone()], ..Default::default() }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn http_status(host: &str, path: &str) -> Option<u16> {
    let mut conn = TcpStream::connect(host).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(conn, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    conn.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

// ---------------------------------------------------------------------------------------------
// Building and pushing images

pub fn sha256(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// One tar entry. Names and link targets are written into the header verbatim, so a test can
/// make the unsafe ones the tar crate's own builder refuses.
pub enum E<'a> {
    Dir(&'a str, u32),
    File(&'a str, &'a str, u32),
    Symlink(&'a str, &'a str),
    Hardlink(&'a str, &'a str),
    Fifo(&'a str),
}

pub fn tar_of(entries: &[E<'_>]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        let (kind, name, link, mode, data): (tar::EntryType, &str, &str, u32, &[u8]) = match entry {
            E::Dir(n, m) => (tar::EntryType::Directory, n, "", *m, b""),
            E::File(n, d, m) => (tar::EntryType::Regular, n, "", *m, d.as_bytes()),
            E::Symlink(n, t) => (tar::EntryType::Symlink, n, t, 0o777, b""),
            E::Hardlink(n, t) => (tar::EntryType::Link, n, t, 0o644, b""),
            E::Fifo(n) => (tar::EntryType::Fifo, n, "", 0o600, b""),
        };
        let mut header = tar::Header::new_gnu();
        {
            let gnu = header.as_gnu_mut().expect("gnu header");
            gnu.name[..name.len()].copy_from_slice(name.as_bytes());
            gnu.linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        header.set_entry_type(kind);
        header.set_mode(mode);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(1_700_000_000);
        header.set_size(data.len() as u64);
        header.set_cksum();
        builder.append(&header, data).expect("append");
    }
    builder.into_inner().expect("tar")
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).expect("gzip");
    enc.finish().expect("gzip")
}

pub fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::encode_all(data, 3).expect("zstd")
}

/// A layer as pushed: its blob, media type, and the digest of the uncompressed tar.
pub struct Layer {
    pub blob: Vec<u8>,
    pub media_type: &'static str,
    pub diff_id: String,
}

pub fn layer(tar: Vec<u8>, media_type: &'static str) -> Layer {
    let diff_id = sha256(&tar);
    let blob = match media_type {
        TAR => tar,
        TAR_ZSTD => zstd(&tar),
        _ => gzip(&tar),
    };
    Layer { blob, media_type, diff_id }
}

pub struct Pushed {
    pub digest: String,
    pub size: usize,
    pub layer_digests: Vec<String>,
}

pub struct Pusher {
    client: Client,
    host: String,
    auth: RegistryAuth,
}

impl Pusher {
    pub fn new(registry: &Registry) -> Pusher {
        Self::with_auth(registry, RegistryAuth::Anonymous)
    }

    pub fn with_auth(registry: &Registry, auth: RegistryAuth) -> Pusher {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::new(ClientConfig { protocol: ClientProtocol::Http, ..ClientConfig::default() });
        Pusher { client, host: registry.host.clone(), auth }
    }

    pub async fn reference(&self, repo: &str, tag: &str) -> Reference {
        let reference: Reference = format!("{}/{repo}:{tag}", self.host).parse().expect("ref");
        self.client.auth(&reference, &self.auth, RegistryOperation::Push).await.expect("auth");
        reference
    }

    pub async fn blob(&self, reference: &Reference, data: &[u8]) -> String {
        let digest = sha256(data);
        self.client.push_blob(reference, data.to_vec(), &digest).await.expect("push blob");
        digest
    }

    pub async fn manifest(&self, reference: &Reference, body: Vec<u8>, media_type: &str) -> String {
        let digest = sha256(&body);
        self.client
            .push_manifest_raw(reference, body, media_type.parse().expect("content type"))
            .await
            .expect("push manifest");
        digest
    }

    pub async fn image(&self, repo: &str, tag: &str, layers: &[Layer], arch: &str, run: serde_json::Value) -> Pushed {
        let reference = self.reference(repo, tag).await;
        let config = serde_json::to_vec(&json!({
            "architecture": arch,
            "os": "linux",
            "config": run,
            "rootfs": {
                "type": "layers",
                "diff_ids": layers.iter().map(|l| l.diff_id.clone()).collect::<Vec<_>>(),
            },
        }))
        .expect("config json");
        let config_digest = self.blob(&reference, &config).await;
        let mut descriptors = Vec::new();
        let mut layer_digests = Vec::new();
        for l in layers {
            let digest = self.blob(&reference, &l.blob).await;
            descriptors.push(json!({
                "mediaType": l.media_type, "digest": digest, "size": l.blob.len(),
            }));
            layer_digests.push(digest);
        }
        let body = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": { "mediaType": OCI_CONFIG, "digest": config_digest, "size": config.len() },
            "layers": descriptors,
        }))
        .expect("manifest json");
        let size = body.len();
        let digest = self.manifest(&reference, body, OCI_MANIFEST).await;
        Pushed { digest, size, layer_digests }
    }

    /// An index of already pushed manifests, each with its (os, arch).
    pub async fn index(&self, repo: &str, tag: &str, entries: &[(&Pushed, &str)]) -> String {
        let reference = self.reference(repo, tag).await;
        let manifests: Vec<_> = entries
            .iter()
            .map(|(p, arch)| {
                json!({
                    "mediaType": OCI_MANIFEST, "digest": p.digest, "size": p.size,
                    "platform": { "os": "linux", "architecture": arch },
                })
            })
            .collect();
        let body = serde_json::to_vec(&json!({
            "schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests,
        }))
        .expect("index json");
        self.manifest(&reference, body, OCI_INDEX).await
    }
}

pub const TOKEN: &str = "test-runtime-token";

/// A runtime on `state_dir` served over HTTP on a free loopback port, its busybox template
/// ready; returns the runtime, a client, and the address.
pub async fn serve(
    state_dir: &Path,
    node: &str,
    registry: kairon_runtime::oci::RegistryConfig,
) -> (kairon_runtime::engine::Runtime, kairon_runtime_api::RuntimeClient, std::net::SocketAddr) {
    let rt = kairon_runtime::engine::Runtime::open(kairon_runtime::engine::RuntimeConfig {
        state_dir: state_dir.to_path_buf(),
        node_name: node.to_string(),
        registry,
        egress: Default::default(),
        network: Default::default(),
    })
    .await
    .expect("runtime");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = kairon_runtime::server::router(rt.clone(), TOKEN.to_string());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = kairon_runtime_api::RuntimeClient::new(&format!("http://{addr}"), TOKEN).expect("client");
    rt.wait_template("busybox", Duration::from_secs(60)).await.expect("busybox template");
    (rt, client, addr)
}
