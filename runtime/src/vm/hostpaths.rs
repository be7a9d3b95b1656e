//! Host paths a Machine names (`spec.image.path`, `spec.runtime.kernel.{path,initrd}`,
//! `spec.volumes[].path`), checked before QEMU, which starts as root, opens any of them.
//!
//! * Images, kernels and initrds lie in the node's image directories (`[vm] image_dirs` in the
//!   node config, default [`DEFAULT_IMAGE_DIRS`], plus the runtime's own images directory).
//!   Volumes lie in the runtime's `volumes/<namespace>/`.
//! * The path must name its directory lexically (absolute, no `.` or `..`), and the rest is
//!   opened from a descriptor of that directory with `openat2(RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`: no component below the directory may be a
//!   symlink, and the file must be a regular file.
//! * TOCTOU: QEMU is then given the verified path (the directory joined with components that
//!   are no symlinks), not a descriptor. Between the check and QEMU's open only someone who can
//!   write into an image or volume directory could swap a component for a symlink, and tenants
//!   cannot (those directories hold what the node's admin puts there; guests write only into
//!   the contents of their disks, never the host's directory entries). Every start of QEMU
//!   (boot, wake, restore, fork) checks again.
//! * Formats are never probed: the runtime reads the header itself. A base image is qcow2 when
//!   it starts with qcow2's magic, raw otherwise (a guest never writes a base image: its writes go
//!   to its overlay). A volume is qcow2 when its name ends in `.qcow2`, raw otherwise (a guest
//!   writes into a raw volume, so its first bytes are the guest's and may forge a qcow2 header).
//!   A qcow2 with a backing file or an external data file is refused: both are more host paths
//!   QEMU would open by name.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags};

/// Where images, kernels and initrds may lie, unless the node config says otherwise.
pub const DEFAULT_IMAGE_DIRS: &[&str] = &["/var/lib/fluxvm/images", "/images"];

/// The label the node agent puts on its create requests: the Machine's namespace, which picks
/// the volumes directory.
pub const NAMESPACE_LABEL: &str = kairon_model::keys::labels::RUNTIME_NAMESPACE;

/// The namespace of a create request without [`NAMESPACE_LABEL`].
pub const DEFAULT_NAMESPACE: &str = "default";

const QCOW2_MAGIC: &[u8; 4] = b"QFI\xfb";
/// qcow2 v3 incompatible feature bit: the guest's data lives in another file.
const QCOW2_EXTERNAL_DATA_FILE: u64 = 1 << 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskFormat {
    Qcow2,
    Raw,
}

impl DiskFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            DiskFormat::Qcow2 => "qcow2",
            DiskFormat::Raw => "raw",
        }
    }

    /// A volume's format, from its name (see the module doc).
    pub fn of_volume(path: &str) -> DiskFormat {
        if path.ends_with(".qcow2") { DiskFormat::Qcow2 } else { DiskFormat::Raw }
    }
}

/// What the runtime reads from a disk's header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskInfo {
    /// qcow2 when the file starts with qcow2's magic.
    pub format: DiskFormat,
    /// The guest-visible size in bytes (qcow2's header, or the raw file's length).
    pub virtual_size: u64,
    /// The backing file named in a qcow2 header.
    pub backing: Option<String>,
    /// A qcow2 v3 with an external data file.
    pub data_file: bool,
}

/// Reads `file`'s header (never following anything it names).
pub fn inspect(file: &File) -> std::io::Result<DiskInfo> {
    let mut h = [0u8; 80];
    let n = file.read_at(&mut h, 0)?;
    let len = file.metadata()?.len();
    if n < 32 || &h[..4] != QCOW2_MAGIC {
        return Ok(DiskInfo { format: DiskFormat::Raw, virtual_size: len, backing: None, data_file: false });
    }
    let u32_at = |o: usize| u32::from_be_bytes(h[o..o + 4].try_into().unwrap_or_default());
    let u64_at = |o: usize| u64::from_be_bytes(h[o..o + 8].try_into().unwrap_or_default());
    let version = u32_at(4);
    let backing_offset = u64_at(8);
    let backing_size = u32_at(16).min(4096) as usize;
    let backing = if backing_offset != 0 && backing_size > 0 {
        let mut name = vec![0u8; backing_size];
        let got = file.read_at(&mut name, backing_offset)?;
        name.truncate(got);
        Some(String::from_utf8_lossy(&name).into_owned())
    } else {
        None
    };
    let data_file = version >= 3 && n >= 80 && u64_at(72) & QCOW2_EXTERNAL_DATA_FILE != 0;
    Ok(DiskInfo { format: DiskFormat::Qcow2, virtual_size: u64_at(24), backing, data_file })
}

/// `path` as a clean absolute path: no `.` or `..` components.
fn clean_absolute(field: &str, path: &str) -> Result<PathBuf, String> {
    if !path.starts_with('/') {
        return Err(format!("{field} {path:?} must be an absolute path on the node"));
    }
    if path.split('/').any(|c| c == ".." || c == ".") {
        return Err(format!("{field} {path:?} may not contain `.` or `..`: name the file by its own path"));
    }
    Ok(PathBuf::from(path))
}

/// Opens `rel` below `dir` without following any symlink (nor leaving `dir`), read-only.
pub fn open_beneath(dir: &Path, rel: &Path) -> std::io::Result<File> {
    let dfd = rustix::fs::open(dir, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    let fd = rustix::fs::openat2(
        &dfd,
        rel,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )?;
    Ok(File::from(fd))
}

fn list(dirs: &[PathBuf]) -> String {
    dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// Resolves `path` (named by `field`) inside one of `dirs`: returns the verified path and the
/// opened file. `what` names the directories in messages ("the node's image directories").
pub fn resolve(field: &str, path: &str, dirs: &[PathBuf], what: &str) -> Result<(PathBuf, File), String> {
    let p = clean_absolute(field, path)?;
    let Some((dir, rel)) = dirs.iter().find_map(|d| {
        let rel = p.strip_prefix(d).ok()?;
        (!rel.as_os_str().is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)))).then_some((d, rel))
    }) else {
        return Err(format!(
            "{field} {path:?} is outside {what} ({}): put the file there and name it by that path",
            list(dirs)
        ));
    };
    let file = open_beneath(dir, rel).map_err(|e| match e.raw_os_error() {
        Some(x) if x == rustix::io::Errno::LOOP.raw_os_error() => format!(
            "{field} {path:?} is or passes through a symlink below {}: symlinks are not followed there; name the file itself",
            dir.display()
        ),
        Some(x) if x == rustix::io::Errno::XDEV.raw_os_error() => {
            format!("{field} {path:?} leaves {}: name a file inside it", dir.display())
        }
        Some(x) if x == rustix::io::Errno::NOENT.raw_os_error() => {
            format!("{field} {path:?} does not exist on this node")
        }
        _ => format!("{field} {path:?}: {e}"),
    })?;
    let meta = file.metadata().map_err(|e| format!("{field} {path:?}: {e}"))?;
    if !meta.file_type().is_file() {
        return Err(format!("{field} {path:?} is not a regular file"));
    }
    Ok((dir.join(rel), file))
}

/// Checks a disk's header: a qcow2 may name no other host file. `pinned` is the format the
/// runtime decided beforehand (volumes); `None` takes the header's (base images). Returns the
/// format QEMU is told and the header.
pub fn check_disk(
    field: &str,
    path: &Path,
    file: &File,
    pinned: Option<DiskFormat>,
    dirs: &[PathBuf],
) -> Result<(DiskFormat, DiskInfo), String> {
    let info = inspect(file).map_err(|e| format!("{field} {}: reading its header: {e}", path.display()))?;
    let format = pinned.unwrap_or(info.format);
    if format == DiskFormat::Qcow2 {
        if info.format != DiskFormat::Qcow2 {
            return Err(format!(
                "{field} {} is named .qcow2 but is not a qcow2 image: rename it (a name without .qcow2 is used as raw)",
                path.display()
            ));
        }
        if let Some(b) = &info.backing {
            let target = path.parent().unwrap_or(Path::new("/")).join(b);
            let inside = dirs.iter().any(|d| target.starts_with(d))
                && !target.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir));
            let where_ = if inside { "" } else { ", which lies outside the image directories" };
            return Err(format!(
                "{field} {} names a backing file {b:?}{where_}: images with a backing chain are not accepted (QEMU \
                 would open it by name); flatten it with `qemu-img convert -f qcow2 -O qcow2 OLD NEW`",
                path.display()
            ));
        }
        if info.data_file {
            return Err(format!(
                "{field} {} keeps its data in an external data file: not accepted (QEMU would open it by name); \
                 convert it with `qemu-img convert -f qcow2 -O qcow2 OLD NEW`",
                path.display()
            ));
        }
    }
    Ok((format, info))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_rules() {
        let dirs = vec![PathBuf::from("/nonexistent-kairon/images")];
        let e = resolve("spec.image.path", "/nonexistent-kairon/images/../../etc/passwd", &dirs, "x").unwrap_err();
        assert!(e.contains("may not contain"), "{e}");
        let e = resolve("spec.image.path", "/etc/passwd", &dirs, "x").unwrap_err();
        assert!(e.contains("is outside"), "{e}");
        let e = resolve("spec.image.path", "images/a", &dirs, "x").unwrap_err();
        assert!(e.contains("absolute"), "{e}");
        let e = resolve("spec.image.path", "/nonexistent-kairon/images", &dirs, "x").unwrap_err();
        assert!(e.contains("is outside"), "{e}");
    }
}
