//! Applying one OCI layer (a tar, maybe compressed) onto a rootfs.
//!
//! The placement is done here rather than by `tar::Archive::unpack`, which knows nothing of
//! whiteouts and follows symlinks planted by earlier layers. Rules:
//! - Entry names are made relative (a leading `/` is dropped); a `..` component is refused.
//! - Parent directories are resolved component by component. A symlink met on the way is
//!   followed *inside* the rootfs, the way the container will see it (an absolute target is
//!   taken from the rootfs root, as under chroot); a symlink that would climb above the root
//!   is refused. The last component is never followed: whatever is there is replaced.
//! - `.wh.NAME` deletes NAME from lower layers; `.wh..wh..opq` removes everything of lower
//!   layers in its directory while keeping what this layer puts there, wherever the marker
//!   sits in the tar.
//! - Hard links must point at an existing non-directory inside the rootfs.
//! - Ownership (and `SCHILY.xattr.*` extended attributes) are applied only when running as
//!   root; otherwise files belong to the caller. Modes, including setuid bits, are kept.
//! - Character and block devices are skipped: runc creates the container's /dev itself, and
//!   mknod of devices needs root anyway. FIFOs are created.

use std::collections::{HashSet, VecDeque};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tar::EntryType;

use super::OciError;

/// How many symlinks one path may pass through before we call it a loop (Linux's limit).
const MAX_SYMLINKS: usize = 40;

const WHITEOUT_PREFIX: &str = ".wh.";
const OPAQUE_WHITEOUT: &str = ".wh..wh..opq";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compression {
    None,
    Gzip,
    Zstd,
}

/// The layer media types we can unpack, OCI and Docker spellings.
pub(crate) fn compression_for(media_type: &str) -> Result<Compression, OciError> {
    match media_type {
        "application/vnd.oci.image.layer.v1.tar"
        | "application/vnd.oci.image.layer.nondistributable.v1.tar"
        | "application/vnd.docker.image.rootfs.diff.tar"
        | "application/vnd.docker.image.rootfs.foreign.diff.tar" => Ok(Compression::None),
        "application/vnd.oci.image.layer.v1.tar+gzip"
        | "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"
        | "application/vnd.docker.image.rootfs.diff.tar.gzip"
        | "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip" => Ok(Compression::Gzip),
        "application/vnd.oci.image.layer.v1.tar+zstd"
        | "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd"
        | "application/vnd.docker.image.rootfs.diff.tar.zstd" => Ok(Compression::Zstd),
        other => Err(OciError::UnsupportedMediaType { what: "layer".into(), media_type: other.into() }),
    }
}

/// Unpacks one layer onto `rootfs` (created if missing), honouring whiteouts.
///
/// On error the rootfs holds whatever was applied before the failing entry: callers discard it.
pub fn apply_layer(reader: impl Read, media_type: &str, rootfs: &Path) -> Result<(), OciError> {
    let compression = compression_for(media_type)?;
    create_rootfs(rootfs)?;
    match compression {
        Compression::None => apply_tar(reader, rootfs),
        // Multi-member gzip streams are valid layers (pigz and some builders write them).
        Compression::Gzip => apply_tar(flate2::read::MultiGzDecoder::new(reader), rootfs),
        Compression::Zstd => {
            let decoder =
                zstd::stream::read::Decoder::new(reader).map_err(|e| OciError::io("starting zstd decoder", e))?;
            apply_tar(decoder, rootfs)
        }
    }
}

pub(crate) fn create_rootfs(rootfs: &Path) -> Result<(), OciError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(rootfs)
        .map_err(|e| OciError::io(format!("creating rootfs {}", rootfs.display()), e))
}

fn apply_tar(reader: impl Read, rootfs: &Path) -> Result<(), OciError> {
    let mut layer = LayerWriter {
        root: rootfs.to_path_buf(),
        as_root: rustix::process::geteuid().is_root(),
        touched: HashSet::new(),
        dirs: Vec::new(),
    };
    let mut archive = tar::Archive::new(reader);
    let entries = archive.entries().map_err(|e| OciError::BadLayer(format!("reading tar: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| OciError::BadLayer(format!("reading tar: {e}")))?;
        layer.apply_entry(&mut entry)?;
    }
    layer.finish()
}

/// Metadata of an entry, applied once its object exists.
struct Meta {
    mode: u32,
    uid: u64,
    gid: u64,
    mtime: u64,
    xattrs: Vec<(OsString, Vec<u8>)>,
}

struct LayerWriter {
    root: PathBuf,
    as_root: bool,
    /// Paths (relative, symlink-free) this layer wrote, and their ancestors: an opaque whiteout
    /// must keep these and whiteouts never apply to them.
    touched: HashSet<PathBuf>,
    /// Directory metadata, applied at the end so read-only modes and mtimes survive the entries
    /// written into them.
    dirs: Vec<(PathBuf, Meta)>,
}

impl LayerWriter {
    fn apply_entry<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>) -> Result<(), OciError> {
        let raw_path = entry.path().map_err(|e| OciError::BadLayer(format!("bad entry name: {e}")))?.into_owned();
        let rel = normalize(&raw_path)?;
        let Some(name) = rel.file_name().map(OsStr::to_os_string) else {
            // The layer's own root ("./"): the rootfs root is ours, leave it be.
            return Ok(());
        };
        let parent = rel.parent().unwrap_or(Path::new(""));
        let name_str = name.to_string_lossy();

        if name_str == OPAQUE_WHITEOUT {
            let dir = self.resolve_dir(parent, true, &raw_path)?.unwrap_or_default();
            return self.clear_lower(&dir);
        }
        if let Some(hidden) = name_str.strip_prefix(WHITEOUT_PREFIX) {
            if hidden.starts_with(".wh.") || hidden.is_empty() {
                // Other aufs bookkeeping (.wh..wh.plnk and the like): nothing to apply.
                return Ok(());
            }
            let Some(dir) = self.resolve_dir(parent, false, &raw_path)? else {
                return Ok(());
            };
            return self.whiteout(&dir.join(hidden));
        }

        let entry_type = entry.header().entry_type();
        let meta = self.meta(entry)?;
        let dir = self.resolve_dir(parent, true, &raw_path)?.unwrap_or_default();
        let target_rel = dir.join(&name);
        let target = self.root.join(&target_rel);

        match entry_type {
            EntryType::Directory => {
                match fs::symlink_metadata(&target) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => {
                        remove_any(&target)?;
                        mkdir(&target)?;
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => mkdir(&target)?,
                    Err(e) => return Err(OciError::io(format!("inspecting {}", rel.display()), e)),
                }
                self.chown(&target, &meta)?;
                self.touched.insert(target_rel.clone());
                self.dirs.push((target_rel, meta));
            }
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                self.replace(&target)?;
                let mut file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&target)
                    .map_err(|e| OciError::io(format!("creating {}", rel.display()), e))?;
                io::copy(entry, &mut file).map_err(|e| OciError::io(format!("writing {}", rel.display()), e))?;
                self.chown(&target, &meta)?;
                set_mode(&target, meta.mode)?;
                self.set_xattrs(&target, &meta);
                set_mtime(&file, meta.mtime)
                    .map_err(|e| OciError::io(format!("setting mtime of {}", rel.display()), e))?;
                self.touched.insert(target_rel);
            }
            EntryType::Symlink => {
                let link = entry
                    .link_name()
                    .map_err(|e| OciError::BadLayer(format!("bad symlink {}: {e}", rel.display())))?
                    .ok_or_else(|| OciError::BadLayer(format!("symlink {} has no target", rel.display())))?
                    .into_owned();
                self.replace(&target)?;
                // The target is stored verbatim; it is only ever resolved inside the rootfs.
                std::os::unix::fs::symlink(&link, &target)
                    .map_err(|e| OciError::io(format!("creating symlink {}", rel.display()), e))?;
                self.chown(&target, &meta)?;
                self.set_xattrs(&target, &meta);
                self.touched.insert(target_rel);
            }
            EntryType::Link => {
                let link_raw = entry
                    .link_name()
                    .map_err(|e| OciError::BadLayer(format!("bad hardlink {}: {e}", rel.display())))?
                    .ok_or_else(|| OciError::BadLayer(format!("hardlink {} has no target", rel.display())))?
                    .into_owned();
                let link_rel = normalize(&link_raw)?;
                let (Some(link_name), Some(link_parent)) = (link_rel.file_name(), link_rel.parent()) else {
                    return Err(OciError::UnsafePath {
                        path: raw_path.display().to_string(),
                        reason: "hardlink to the rootfs root".into(),
                    });
                };
                let link_dir = self.resolve_dir(link_parent, false, &link_raw)?.ok_or_else(|| {
                    OciError::BadLayer(format!("hardlink {} points at missing {}", rel.display(), link_raw.display()))
                })?;
                let source_rel = link_dir.join(link_name);
                let source = self.root.join(&source_rel);
                match fs::symlink_metadata(&source) {
                    Ok(m) if m.is_dir() => {
                        return Err(OciError::BadLayer(format!(
                            "hardlink {} points at directory {}",
                            rel.display(),
                            link_raw.display()
                        )));
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        return Err(OciError::BadLayer(format!(
                            "hardlink {} points at missing {}",
                            rel.display(),
                            link_raw.display()
                        )));
                    }
                    Err(e) => {
                        return Err(OciError::io(format!("inspecting {}", link_raw.display()), e));
                    }
                }
                if source_rel != target_rel {
                    self.replace(&target)?;
                    // linkat without AT_SYMLINK_FOLLOW: a symlink source is linked, not followed.
                    fs::hard_link(&source, &target)
                        .map_err(|e| OciError::io(format!("creating hardlink {}", rel.display()), e))?;
                }
                self.touched.insert(target_rel);
            }
            EntryType::Fifo => {
                self.replace(&target)?;
                rustix::fs::mknodat(
                    rustix::fs::CWD,
                    &target,
                    rustix::fs::FileType::Fifo,
                    rustix::fs::Mode::from_raw_mode(0o600),
                    0,
                )
                .map_err(|e| OciError::io(format!("creating fifo {}", rel.display()), e.into()))?;
                self.chown(&target, &meta)?;
                set_mode(&target, meta.mode)?;
                self.touched.insert(target_rel);
            }
            EntryType::Char | EntryType::Block => {
                tracing::debug!(path = %rel.display(), "skipping device node in layer");
            }
            other => {
                tracing::debug!(path = %rel.display(), kind = ?other, "skipping tar entry");
            }
        }
        Ok(())
    }

    fn meta<R: Read>(&self, entry: &mut tar::Entry<'_, R>) -> Result<Meta, OciError> {
        let header = entry.header();
        let bad = |e: io::Error| OciError::BadLayer(format!("bad tar header: {e}"));
        let mut meta = Meta {
            mode: header.mode().map_err(bad)? & 0o7777,
            uid: header.uid().map_err(bad)?,
            gid: header.gid().map_err(bad)?,
            mtime: header.mtime().unwrap_or(0),
            xattrs: Vec::new(),
        };
        // PAX records override the header (ids too large for it) and carry xattrs.
        if let Some(exts) = entry.pax_extensions().map_err(bad)? {
            for ext in exts {
                let ext = ext.map_err(bad)?;
                let Ok(key) = ext.key() else { continue };
                let value = ext.value_bytes();
                match key {
                    "uid" => meta.uid = parse_num(value).unwrap_or(meta.uid),
                    "gid" => meta.gid = parse_num(value).unwrap_or(meta.gid),
                    _ => {
                        if let Some(name) = key.strip_prefix("SCHILY.xattr.") {
                            meta.xattrs.push((name.into(), value.to_vec()));
                        }
                    }
                }
            }
        }
        Ok(meta)
    }

    /// Resolves `parent` (relative, no `..`) to a symlink-free path under the root, following
    /// symlinks only within the root. With `create`, missing directories are made (and
    /// recorded as this layer's); without it, a missing one gives `None`.
    fn resolve_dir(&mut self, parent: &Path, create: bool, entry: &Path) -> Result<Option<PathBuf>, OciError> {
        let unsafe_path = |reason: String| OciError::UnsafePath { path: entry.display().to_string(), reason };
        let mut pending: VecDeque<OsString> = parent.iter().map(OsStr::to_os_string).collect();
        let mut cur = PathBuf::new();
        let mut links = 0;
        let mut created = Vec::new();
        while let Some(comp) = pending.pop_front() {
            if comp == "." || comp.is_empty() {
                continue;
            }
            if comp == ".." {
                // Only symlink targets bring `..` here; entry names were checked already.
                if !cur.pop() {
                    return Err(unsafe_path("a symlink in its path points outside the rootfs".into()));
                }
                continue;
            }
            let next = cur.join(&comp);
            let full = self.root.join(&next);
            match fs::symlink_metadata(&full) {
                Ok(m) if m.is_dir() => cur = next,
                Ok(m) if m.file_type().is_symlink() => {
                    links += 1;
                    if links > MAX_SYMLINKS {
                        return Err(unsafe_path("too many levels of symlinks".into()));
                    }
                    let target = fs::read_link(&full)
                        .map_err(|e| OciError::io(format!("reading symlink {}", next.display()), e))?;
                    if target.is_absolute() {
                        cur = PathBuf::new();
                    }
                    let mut rest: VecDeque<OsString> = target
                        .components()
                        .filter_map(|c| match c {
                            Component::Normal(n) => Some(n.to_os_string()),
                            Component::ParentDir => Some("..".into()),
                            _ => None,
                        })
                        .collect();
                    rest.extend(pending);
                    pending = rest;
                }
                Ok(_) if create => {
                    // A non-directory where this layer needs a directory: the layer wins.
                    remove_any(&full)?;
                    mkdir(&full)?;
                    created.push(next.clone());
                    cur = next;
                }
                Ok(_) => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if !create {
                        return Ok(None);
                    }
                    mkdir(&full)?;
                    created.push(next.clone());
                    cur = next;
                }
                Err(e) => return Err(OciError::io(format!("inspecting {}", next.display()), e)),
            }
            if create {
                self.touched.insert(cur.clone());
            }
        }
        for dir in created {
            // Implicit parents: root-owned when we can, like the tar tools do.
            if self.as_root {
                let _ = std::os::unix::fs::lchown(self.root.join(&dir), Some(0), Some(0));
            }
        }
        Ok(Some(cur))
    }

    /// Deletes `rel` (a lower layer's file or tree); absent or written by this layer: no-op.
    fn whiteout(&self, rel: &Path) -> Result<(), OciError> {
        if self.touched.contains(rel) {
            return Ok(());
        }
        let full = self.root.join(rel);
        match fs::symlink_metadata(&full) {
            Ok(_) => remove_any(&full),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(OciError::io(format!("inspecting {}", rel.display()), e)),
        }
    }

    /// Opaque whiteout: drops everything under `dir` that this layer did not write.
    fn clear_lower(&self, dir: &Path) -> Result<(), OciError> {
        let full = self.root.join(dir);
        let entries = match fs::read_dir(&full) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(OciError::io(format!("listing {}", dir.display()), e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| OciError::io(format!("listing {}", dir.display()), e))?;
            let child = dir.join(entry.file_name());
            if self.touched.contains(&child) {
                let ft = entry.file_type().map_err(|e| OciError::io(format!("inspecting {}", child.display()), e))?;
                if ft.is_dir() {
                    self.clear_lower(&child)?;
                }
            } else {
                remove_any(&entry.path())?;
            }
        }
        Ok(())
    }

    /// Clears the way for a new non-directory at `path`, never following what is there.
    fn replace(&self, path: &Path) -> Result<(), OciError> {
        match fs::symlink_metadata(path) {
            Ok(_) => remove_any(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(OciError::io(format!("inspecting {}", path.display()), e)),
        }
    }

    fn chown(&self, path: &Path, meta: &Meta) -> Result<(), OciError> {
        if !self.as_root {
            return Ok(());
        }
        let id = |v: u64| u32::try_from(v).map_err(|_| OciError::BadLayer(format!("owner id {v} too large")));
        std::os::unix::fs::lchown(path, Some(id(meta.uid)?), Some(id(meta.gid)?))
            .map_err(|e| OciError::io(format!("changing owner of {}", path.display()), e))
    }

    fn set_xattrs(&self, path: &Path, meta: &Meta) {
        if !self.as_root {
            return;
        }
        for (name, value) in &meta.xattrs {
            // Best effort: the filesystem may not take them (e.g. tmpfs and security.*).
            if let Err(e) = rustix::fs::lsetxattr(path, name.as_os_str(), value, rustix::fs::XattrFlags::empty()) {
                tracing::warn!(path = %path.display(), name = ?name, error = %e, "cannot set xattr");
            }
        }
    }

    /// Whether every component of `rel` is a directory, none a symlink.
    fn is_real_dir(&self, rel: &Path) -> bool {
        let mut cur = self.root.clone();
        rel.iter().all(|comp| {
            cur.push(comp);
            fs::symlink_metadata(&cur).is_ok_and(|m| m.is_dir())
        })
    }

    fn finish(mut self) -> Result<(), OciError> {
        // Deepest last-created first, so a parent's mtime is set after its children change.
        let dirs = std::mem::take(&mut self.dirs);
        for (rel, meta) in dirs.into_iter().rev() {
            // A later entry of the layer may have replaced the directory, or one of its
            // parents, by a symlink: chmod and utimes follow links, so check the whole path.
            if !self.is_real_dir(&rel) {
                continue;
            }
            let full = self.root.join(&rel);
            set_mode(&full, meta.mode)?;
            self.set_xattrs(&full, &meta);
            let set = File::open(&full).and_then(|dir| set_mtime(&dir, meta.mtime));
            if let Err(e) = set {
                tracing::debug!(path = %rel.display(), error = %e, "cannot set directory mtime");
            }
        }
        Ok(())
    }
}

/// Makes an entry name relative; `..` anywhere is refused rather than guessed at.
fn normalize(raw: &Path) -> Result<PathBuf, OciError> {
    let mut out = PathBuf::new();
    for comp in raw.components() {
        match comp {
            Component::Normal(c) => out.push(c),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => {
                return Err(OciError::UnsafePath {
                    path: raw.display().to_string(),
                    reason: "`..` in a layer path".into(),
                });
            }
        }
    }
    Ok(out)
}

fn parse_num(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value).ok()?.trim().parse().ok()
}

fn mkdir(path: &Path) -> Result<(), OciError> {
    fs::DirBuilder::new()
        .mode(0o755)
        .create(path)
        .map_err(|e| OciError::io(format!("creating directory {}", path.display()), e))
}

fn remove_any(path: &Path) -> Result<(), OciError> {
    let res = match fs::symlink_metadata(path) {
        // remove_dir_all does not follow symlinks inside the tree.
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    };
    res.map_err(|e| OciError::io(format!("removing {}", path.display()), e))
}

fn set_mode(path: &Path, mode: u32) -> Result<(), OciError> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| OciError::io(format!("setting mode of {}", path.display()), e))
}

fn set_mtime(file: &File, mtime: u64) -> io::Result<()> {
    let t: SystemTime = UNIX_EPOCH + Duration::from_secs(mtime);
    file.set_times(fs::FileTimes::new().set_modified(t).set_accessed(t))
}
