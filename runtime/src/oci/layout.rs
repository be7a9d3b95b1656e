//! OCI image layouts (`oci-layout`, `index.json`, `blobs/sha256/…`): Kairon's own container
//! image is written as one from directory trees, with no Docker daemon, and pushed from one to a
//! registry with the same OCI client that pulls sandbox images.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use futures::TryStreamExt;
use oci_client::manifest::{
    IMAGE_CONFIG_MEDIA_TYPE, IMAGE_LAYER_GZIP_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE,
};
use serde_json::json;
use sha2::Digest as _;

use super::{OciError, RegistryConfig, error_chain};
use crate::api::ImageConfig;
use crate::sandbox::idmap::IdMap;

/// The annotation naming an image in a layout's index (its tag).
const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// A layer blob in a layout: what its manifest and config say of it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LayerBlob {
    /// The compressed blob's digest (the manifest's).
    pub digest: String,
    /// The uncompressed tar's digest (the config's `rootfs.diff_ids`).
    pub diff_id: String,
    pub size: u64,
    /// What made it, for the config's history.
    pub created_by: String,
}

/// Writes every file, directory and link under `tree` (not `tree` itself) as a gzip layer
/// blob into `layout` (created if missing), owners and modes as they are, entries sorted so the
/// same tree gives the same tar. Device nodes and sockets are left out: a container's `/dev`
/// is the runtime's.
pub fn add_layer(layout: &Path, tree: &Path, created_by: &str) -> Result<LayerBlob, OciError> {
    let blobs = blobs_dir(layout)?;
    let file = tempfile::NamedTempFile::new_in(&blobs)
        .map_err(|e| OciError::io(format!("creating a blob in {}", blobs.display()), e))?;
    let compressed = Hashing::new(BufWriter::with_capacity(1 << 20, file));
    let mut tar = Hashing::new(flate2::write::GzEncoder::new(compressed, flate2::Compression::fast()));
    // Host ids are the image's ids.
    let identity = IdMap { host_base: 0, size: u32::MAX };
    crate::sandbox::layer::write_layer(tree, &mut tar, &identity)
        .map_err(|e| OciError::io(format!("writing {} as a layer", tree.display()), e))?;
    let diff_id = tar.digest();
    let mut compressed = tar.inner.finish().map_err(|e| OciError::io("compressing a layer", e))?;
    compressed.flush().map_err(|e| OciError::io("writing a layer", e))?;
    let digest = compressed.digest();
    let size = compressed.written;
    let file = compressed.inner.into_inner().map_err(|e| OciError::io("writing a layer", e.into_error()))?;
    let path = blob_path(layout, &digest);
    file.persist(&path).map_err(|e| OciError::io(format!("storing {}", path.display()), e.error))?;
    Ok(LayerBlob { digest, diff_id, size, created_by: created_by.to_string() })
}

/// Copies a layer blob out of another layout (a cache) into `layout`, hard-linked where it can.
pub fn import_layer(layout: &Path, from: &Path, layer: &LayerBlob) -> Result<(), OciError> {
    blobs_dir(layout)?;
    let (src, dst) = (blob_path(from, &layer.digest), blob_path(layout, &layer.digest));
    if dst.exists() {
        return Ok(());
    }
    fs::hard_link(&src, &dst)
        .or_else(|_| fs::copy(&src, &dst).map(drop))
        .map_err(|e| OciError::io(format!("copying {} to {}", src.display(), dst.display()), e))
}

/// Writes the config, the manifest and `index.json` of the linux/amd64 image made of `layers`
/// (bottom first) that runs as `run`, named `tag` in the index; returns the manifest's digest.
pub fn write_image(layout: &Path, layers: &[LayerBlob], run: &ImageConfig, tag: &str) -> Result<String, OciError> {
    let mut config = json!({
        "Env": run.env,
        "Entrypoint": run.entrypoint,
        "Cmd": run.cmd,
    });
    if let Some(dir) = &run.working_dir {
        config["WorkingDir"] = json!(dir);
    }
    if let Some(user) = &run.user {
        config["User"] = json!(user);
    }
    let config = json!({
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": { "type": "layers", "diff_ids": layers.iter().map(|l| &l.diff_id).collect::<Vec<_>>() },
        "history": layers.iter().map(|l| json!({ "created_by": l.created_by })).collect::<Vec<_>>(),
    });
    let config = put_json(layout, &config)?;
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_IMAGE_MEDIA_TYPE,
        "config": { "mediaType": IMAGE_CONFIG_MEDIA_TYPE, "digest": config.0, "size": config.1 },
        "layers": layers.iter().map(|l| json!({
            "mediaType": IMAGE_LAYER_GZIP_MEDIA_TYPE, "digest": l.digest, "size": l.size,
        })).collect::<Vec<_>>(),
    });
    let (digest, size) = put_json(layout, &manifest)?;
    let index = json!({
        "schemaVersion": 2,
        "mediaType": OCI_IMAGE_INDEX_MEDIA_TYPE,
        "manifests": [{
            "mediaType": OCI_IMAGE_MEDIA_TYPE, "digest": digest, "size": size,
            "platform": { "architecture": "amd64", "os": "linux" },
            "annotations": { REF_NAME: tag },
        }],
    });
    write_file(&layout.join("index.json"), &serde_json::to_vec_pretty(&index).expect("json"))?;
    write_file(&layout.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    Ok(digest)
}

/// Pushes the image of `layout` (the one manifest of its index) to `reference`: every blob the
/// registry does not have yet, streamed from disk, then the manifest. Returns the manifest's
/// digest, which the registry now serves for `reference`.
pub async fn push(layout: &Path, reference: &str, cfg: &RegistryConfig) -> Result<String, OciError> {
    let session = super::Session::open(reference, cfg)?;
    let (client, image, auth, registry) = (&session.client, &session.image, &session.auth, &session.registry);
    let failed = |what: &str, e: &dyn std::error::Error| OciError::Registry {
        registry: registry.clone(),
        detail: format!("{what}: {}", error_chain(e)),
    };
    let (manifest_digest, manifest) = read_manifest(layout)?;
    let parsed: serde_json::Value = serde_json::from_slice(&manifest)
        .map_err(|e| OciError::BadManifest { reference: manifest_digest.clone(), detail: e.to_string() })?;
    let descriptors = std::iter::once(&parsed["config"]).chain(parsed["layers"].as_array().into_iter().flatten());
    let mut blobs = Vec::new();
    for d in descriptors {
        let digest = d["digest"].as_str().ok_or_else(|| OciError::BadManifest {
            reference: manifest_digest.clone(),
            detail: "a descriptor without a digest".into(),
        })?;
        blobs.push((digest.to_string(), d["size"].as_u64().unwrap_or(0)));
    }

    client
        .auth(image, auth, oci_client::RegistryOperation::Push)
        .await
        .map_err(|e| OciError::Auth { registry: registry.clone(), detail: error_chain(&e) })?;
    for (digest, size) in blobs {
        if client.blob_exists(image, &digest).await.unwrap_or(false) {
            tracing::info!(%digest, "the registry has this blob already");
            continue;
        }
        let path = blob_path(layout, &digest);
        let file =
            tokio::fs::File::open(&path).await.map_err(|e| OciError::io(format!("opening {}", path.display()), e))?;
        let stream = tokio_util::io::ReaderStream::with_capacity(file, 1 << 20)
            .map_err(oci_client::errors::OciDistributionError::IoError);
        tracing::info!(%digest, bytes = size, "pushing blob");
        client
            .push_blob_stream(image, stream, &digest, Some(size))
            .await
            .map_err(|e| failed(&format!("pushing blob {digest}"), &e))?;
    }
    client
        .push_manifest_raw(image, manifest, OCI_IMAGE_MEDIA_TYPE.parse().expect("media type"))
        .await
        .map_err(|e| failed("pushing the manifest", &e))?;
    Ok(manifest_digest)
}

/// The digest and bytes of the one manifest `layout`'s index names, checked against its digest.
fn read_manifest(layout: &Path) -> Result<(String, Vec<u8>), OciError> {
    let index_path = layout.join("index.json");
    let index = fs::read(&index_path).map_err(|e| OciError::io(format!("reading {}", index_path.display()), e))?;
    let index: serde_json::Value = serde_json::from_slice(&index)
        .map_err(|e| OciError::BadManifest { reference: index_path.display().to_string(), detail: e.to_string() })?;
    let manifests = index["manifests"].as_array().map(Vec::as_slice).unwrap_or_default();
    let [only] = manifests else {
        return Err(OciError::BadManifest {
            reference: index_path.display().to_string(),
            detail: format!("holds {} images; push takes a layout of one", manifests.len()),
        });
    };
    let digest = only["digest"].as_str().unwrap_or_default().to_string();
    let path = blob_path(layout, &digest);
    let bytes = fs::read(&path).map_err(|e| OciError::io(format!("reading {}", path.display()), e))?;
    let actual = format!("sha256:{}", hex::encode(sha2::Sha256::digest(&bytes)));
    if actual != digest {
        return Err(OciError::DigestMismatch { what: "manifest", expected: digest, actual });
    }
    Ok((digest, bytes))
}

fn put_json(layout: &Path, value: &serde_json::Value) -> Result<(String, u64), OciError> {
    let bytes = serde_json::to_vec(value).expect("json");
    let digest = format!("sha256:{}", hex::encode(sha2::Sha256::digest(&bytes)));
    blobs_dir(layout)?;
    write_file(&blob_path(layout, &digest), &bytes)?;
    Ok((digest, bytes.len() as u64))
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), OciError> {
    fs::write(path, bytes).map_err(|e| OciError::io(format!("writing {}", path.display()), e))
}

fn blobs_dir(layout: &Path) -> Result<PathBuf, OciError> {
    let dir = layout.join("blobs/sha256");
    fs::create_dir_all(&dir).map_err(|e| OciError::io(format!("creating {}", dir.display()), e))?;
    Ok(dir)
}

/// Where a blob lives in a layout (`blobs/<algorithm>/<hex>`).
pub fn blob_path(layout: &Path, digest: &str) -> PathBuf {
    let (algorithm, hex) = digest.split_once(':').unwrap_or(("sha256", digest));
    layout.join("blobs").join(algorithm).join(hex)
}

/// A writer that counts and hashes what passes through it.
struct Hashing<W> {
    inner: W,
    hasher: sha2::Sha256,
    written: u64,
}

impl<W: Write> Hashing<W> {
    fn new(inner: W) -> Self {
        Hashing { inner, hasher: sha2::Sha256::new(), written: 0 }
    }

    fn digest(&self) -> String {
        format!("sha256:{}", hex::encode(self.hasher.clone().finalize()))
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_layout_holds_its_layers_config_and_index_with_matching_digests() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        fs::create_dir_all(tree.join("usr/bin")).unwrap();
        fs::write(tree.join("usr/bin/tool"), b"#!/bin/sh\necho hi\n").unwrap();
        fs::set_permissions(tree.join("usr/bin/tool"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::hard_link(tree.join("usr/bin/tool"), tree.join("usr/bin/tool2")).unwrap();
        std::os::unix::fs::symlink("tool", tree.join("usr/bin/alias")).unwrap();
        let layout = dir.path().join("layout");
        let layer = add_layer(&layout, &tree, "test").unwrap();
        // The same tree gives the same blob.
        assert_eq!(add_layer(&dir.path().join("again"), &tree, "test").unwrap(), layer);
        let run = ImageConfig { entrypoint: vec!["/usr/bin/tool".into()], ..ImageConfig::default() };
        let digest = write_image(&layout, std::slice::from_ref(&layer), &run, "v1").unwrap();
        let (read, manifest) = read_manifest(&layout).unwrap();
        assert_eq!(read, digest);
        let manifest: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
        assert_eq!(manifest["layers"][0]["digest"], layer.digest.as_str());
        let config = fs::read(blob_path(&layout, manifest["config"]["digest"].as_str().unwrap())).unwrap();
        let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
        assert_eq!(config["rootfs"]["diff_ids"][0], layer.diff_id.as_str());
        assert_eq!(config["config"]["Entrypoint"][0], "/usr/bin/tool");

        // Unpacked by the pull's own layer code: the files, the link and the hard link are back.
        let blob = fs::File::open(blob_path(&layout, &layer.digest)).unwrap();
        assert_eq!(fs::metadata(blob_path(&layout, &layer.digest)).unwrap().len(), layer.size);
        let rootfs = dir.path().join("rootfs");
        super::super::layer::create_rootfs(&rootfs).unwrap();
        super::super::apply_layer(io::BufReader::new(blob), IMAGE_LAYER_GZIP_MEDIA_TYPE, &rootfs).unwrap();
        assert_eq!(fs::read(rootfs.join("usr/bin/tool2")).unwrap(), b"#!/bin/sh\necho hi\n");
        assert_eq!(fs::read_link(rootfs.join("usr/bin/alias")).unwrap(), Path::new("tool"));
        assert_eq!(fs::metadata(rootfs.join("usr/bin/tool")).unwrap().permissions().mode() & 0o777, 0o755);

        // A tampered manifest is refused before anything is pushed.
        let path = blob_path(&layout, &digest);
        fs::write(&path, b"{}").unwrap();
        assert!(matches!(read_manifest(&layout), Err(OciError::DigestMismatch { .. })));
    }
}
