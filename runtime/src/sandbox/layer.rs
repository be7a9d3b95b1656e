//! A sandbox's writable layer (the overlay's upper directory) as a tar, for a cold migration:
//! written on the source node, read into a fresh sandbox's disk on the target.
//!
//! The tar is an OCI layer: owners as the guest sees them (each node maps a template's guest ids
//! to host ids of its own), an overlay whiteout (a 0/0 character device) as `.wh.NAME`, an opaque
//! directory (`trusted.overlay.opaque`) as `DIR/.wh..wh..opq`. The overlay's other bookkeeping
//! (`trusted.overlay.origin` and the like) names the source's lower files and is left out.
//!
//! Reading trusts the tar no more than it must: names with `..` are refused, nothing is written
//! through a symlink (every parent must be a real directory the tar made), hard links must name
//! a file already read, and device nodes other than whiteouts are refused.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use tar::EntryType;

use super::idmap::IdMap;

const WHITEOUT_PREFIX: &str = ".wh.";
const OPAQUE_MARKER: &str = ".wh..wh..opq";
const OPAQUE_XATTR: &str = "trusted.overlay.opaque";
/// The id a host owner outside the template's range is given (the kernel's overflow id).
const NOBODY: u32 = 65534;

/// Writes the upper directory `upper` as a layer tar to `out`; the bytes of file data written.
pub fn write_layer(upper: &Path, out: impl Write, map: &IdMap) -> io::Result<u64> {
    let guest = |id: u32| -> u64 {
        if id >= map.host_base && id - map.host_base < map.size {
            u64::from(id - map.host_base)
        } else {
            u64::from(NOBODY)
        }
    };
    let mut builder = tar::Builder::new(out);
    builder.follow_symlinks(false);
    let mut data = 0u64;
    // The first path of each multiply-linked inode, for the later ones' hard-link entries.
    let mut linked: HashMap<(u64, u64), PathBuf> = HashMap::new();
    let mut stack: Vec<PathBuf> = list(upper)?.into_iter().rev().collect();
    while let Some(rel) = stack.pop() {
        let path = upper.join(&rel);
        let meta = fs::symlink_metadata(&path)?;
        let ft = meta.file_type();
        if ft.is_socket() || ft.is_block_device() {
            continue;
        }
        if ft.is_char_device() {
            // A whiteout (0/0) hides a lower file; no other device can be made in a sandbox.
            if meta.rdev() == 0 {
                let name = format!("{WHITEOUT_PREFIX}{}", rel.file_name().unwrap_or_default().to_string_lossy());
                empty_entry(&mut builder, &rel.with_file_name(name), &meta, guest)?;
            }
            continue;
        }
        let mut h = tar::Header::new_gnu();
        h.set_metadata_in_mode(&meta, tar::HeaderMode::Complete);
        h.set_uid(guest(meta.uid()));
        h.set_gid(guest(meta.gid()));
        if !ft.is_dir() && meta.nlink() > 1 {
            if let Some(first) = linked.get(&(meta.dev(), meta.ino())) {
                h.set_entry_type(EntryType::Link);
                h.set_size(0);
                builder.append_link(&mut h, &rel, first)?;
                continue;
            }
            linked.insert((meta.dev(), meta.ino()), rel.clone());
        }
        if ft.is_symlink() {
            builder.append_link(&mut h, &rel, fs::read_link(&path)?)?;
        } else if ft.is_file() {
            data += meta.len();
            builder.append_data(&mut h, &rel, fs::File::open(&path)?)?;
        } else {
            h.set_size(0);
            builder.append_data(&mut h, &rel, io::empty())?;
        }
        if ft.is_dir() {
            if rustix::fs::lgetxattr(&path, OPAQUE_XATTR, &mut [0u8; 8]).is_ok_and(|n| n > 0) {
                empty_entry(&mut builder, &rel.join(OPAQUE_MARKER), &meta, guest)?;
            }
            stack.extend(list(&path)?.into_iter().rev().map(|n| rel.join(n)));
        }
    }
    builder.into_inner()?.flush()?;
    Ok(data)
}

/// The names in `dir`, sorted (a stable order makes the same layer the same tar).
fn list(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut names: Vec<PathBuf> =
        fs::read_dir(dir)?.map(|e| e.map(|e| PathBuf::from(e.file_name()))).collect::<io::Result<_>>()?;
    names.sort();
    Ok(names)
}

fn empty_entry<W: Write>(
    b: &mut tar::Builder<W>,
    rel: &Path,
    meta: &fs::Metadata,
    guest: impl Fn(u32) -> u64,
) -> io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(EntryType::Regular);
    h.set_size(0);
    h.set_mode(0o600);
    h.set_mtime(meta.mtime().max(0) as u64);
    h.set_uid(guest(meta.uid()));
    h.set_gid(guest(meta.gid()));
    b.append_data(&mut h, rel, io::empty())
}

/// Reads a layer tar from `input` into the empty upper directory `upper`, giving owners the
/// host ids of `map`; the bytes of file data read.
pub fn read_layer(input: impl Read, upper: &Path, map: &IdMap) -> Result<u64, LayerError> {
    let host = |id: u64| -> u32 {
        let id = u32::try_from(id).unwrap_or(NOBODY);
        map.host_base + if id < map.size { id } else { NOBODY.min(map.size - 1) }
    };
    let mut archive = tar::Archive::new(input);
    let mut data = 0u64;
    let mut dirs: Vec<(PathBuf, u32, u64)> = Vec::new();
    for entry in archive.entries().map_err(LayerError::Read)? {
        let mut entry = entry.map_err(LayerError::Read)?;
        let raw = entry.path().map_err(LayerError::Read)?.into_owned();
        let rel = relative(&raw)?;
        let Some(name) = rel.file_name().map(OsStr::to_os_string) else { continue };
        let parent = rel.parent().unwrap_or(Path::new(""));
        real_dir(upper, parent).map_err(|why| LayerError::Unsafe(raw.display().to_string(), why))?;
        let target = upper.join(&rel);
        let name = name.to_string_lossy();
        let h = entry.header();
        let (mode, uid, gid) = (
            h.mode().map_err(LayerError::Read)? & 0o7777,
            host(h.uid().map_err(LayerError::Read)?),
            host(h.gid().map_err(LayerError::Read)?),
        );
        let mtime = h.mtime().unwrap_or(0);
        if name == OPAQUE_MARKER {
            rustix::fs::lsetxattr(upper.join(parent), OPAQUE_XATTR, b"y", rustix::fs::XattrFlags::empty())
                .map_err(|e| LayerError::write(&rel, e.into()))?;
            continue;
        }
        if let Some(hidden) = name.strip_prefix(WHITEOUT_PREFIX) {
            if hidden.is_empty() || hidden.starts_with(WHITEOUT_PREFIX) {
                return Err(LayerError::Unsafe(raw.display().to_string(), "an unknown whiteout".into()));
            }
            let at = upper.join(parent).join(hidden);
            rustix::fs::mknodat(
                rustix::fs::CWD,
                &at,
                rustix::fs::FileType::CharacterDevice,
                rustix::fs::Mode::empty(),
                0,
            )
            .map_err(|e| LayerError::write(&rel, e.into()))?;
            chown(&at, uid, gid).map_err(|e| LayerError::write(&rel, e))?;
            continue;
        }
        match h.entry_type() {
            EntryType::Directory => {
                fs::DirBuilder::new().mode(0o700).create(&target).map_err(|e| LayerError::write(&rel, e))?;
                chown(&target, uid, gid).map_err(|e| LayerError::write(&rel, e))?;
                dirs.push((rel, mode, mtime));
            }
            EntryType::Regular | EntryType::Continuous => {
                let mut file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&target)
                    .map_err(|e| LayerError::write(&rel, e))?;
                data += io::copy(&mut entry, &mut file).map_err(|e| LayerError::write(&rel, e))?;
                chown(&target, uid, gid).map_err(|e| LayerError::write(&rel, e))?;
                // After the chown, which clears set-id bits.
                fs::set_permissions(&target, fs::Permissions::from_mode(mode))
                    .map_err(|e| LayerError::write(&rel, e))?;
                let t = UNIX_EPOCH + Duration::from_secs(mtime);
                file.set_times(fs::FileTimes::new().set_modified(t).set_accessed(t))
                    .map_err(|e| LayerError::write(&rel, e))?;
            }
            EntryType::Symlink => {
                let link = entry.link_name().map_err(LayerError::Read)?.ok_or_else(|| {
                    LayerError::Unsafe(raw.display().to_string(), "a symlink without a target".into())
                })?;
                // Stored as it is: only ever resolved inside the sandbox.
                std::os::unix::fs::symlink(&link, &target).map_err(|e| LayerError::write(&rel, e))?;
                chown(&target, uid, gid).map_err(|e| LayerError::write(&rel, e))?;
            }
            EntryType::Link => {
                let link = entry.link_name().map_err(LayerError::Read)?.ok_or_else(|| {
                    LayerError::Unsafe(raw.display().to_string(), "a hard link without a target".into())
                })?;
                let source = relative(&link)?;
                real_dir(upper, source.parent().unwrap_or(Path::new("")))
                    .map_err(|why| LayerError::Unsafe(raw.display().to_string(), why))?;
                let meta = fs::symlink_metadata(upper.join(&source)).map_err(|_| {
                    LayerError::Unsafe(
                        raw.display().to_string(),
                        format!("a hard link to {} not read before", link.display()),
                    )
                })?;
                if meta.is_dir() {
                    return Err(LayerError::Unsafe(raw.display().to_string(), "a hard link to a directory".into()));
                }
                fs::hard_link(upper.join(&source), &target).map_err(|e| LayerError::write(&rel, e))?;
            }
            EntryType::Fifo => {
                rustix::fs::mknodat(
                    rustix::fs::CWD,
                    &target,
                    rustix::fs::FileType::Fifo,
                    rustix::fs::Mode::from_raw_mode(0o600),
                    0,
                )
                .map_err(|e| LayerError::write(&rel, e.into()))?;
                chown(&target, uid, gid).map_err(|e| LayerError::write(&rel, e))?;
                fs::set_permissions(&target, fs::Permissions::from_mode(mode))
                    .map_err(|e| LayerError::write(&rel, e))?;
            }
            other => {
                return Err(LayerError::Unsafe(raw.display().to_string(), format!("an entry of type {other:?}")));
            }
        }
    }
    // Directory modes and times last, deepest first: what was written into them changed both.
    for (rel, mode, mtime) in dirs.into_iter().rev() {
        let path = upper.join(&rel);
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).map_err(|e| LayerError::write(&rel, e))?;
        let t = UNIX_EPOCH + Duration::from_secs(mtime);
        if let Ok(dir) = fs::File::open(&path) {
            let _ = dir.set_times(fs::FileTimes::new().set_modified(t).set_accessed(t));
        }
    }
    Ok(data)
}

/// Why a layer could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("reading the layer: {0}")]
    Read(io::Error),
    #[error("the layer's entry {0:?} is refused: {1}")]
    Unsafe(String, String),
    #[error("writing {0}: {1}")]
    Write(String, io::Error),
}

impl LayerError {
    fn write(rel: &Path, e: io::Error) -> LayerError {
        LayerError::Write(rel.display().to_string(), e)
    }
}

/// An entry name as a relative path of plain components; `..` is refused.
fn relative(raw: &Path) -> Result<PathBuf, LayerError> {
    let mut out = PathBuf::new();
    for c in raw.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => {
                return Err(LayerError::Unsafe(raw.display().to_string(), "`..` in its name".into()));
            }
        }
    }
    Ok(out)
}

/// Whether every component of `rel` under `root` is a directory, none a symlink.
fn real_dir(root: &Path, rel: &Path) -> Result<(), String> {
    let mut cur = root.to_path_buf();
    for c in rel.iter() {
        cur.push(c);
        match fs::symlink_metadata(&cur) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(format!("{} is not a directory", rel.display())),
            Err(_) => return Err(format!("its directory {} comes later or not at all", rel.display())),
        }
    }
    Ok(())
}

fn chown(p: &Path, uid: u32, gid: u32) -> io::Result<()> {
    std::os::unix::fs::lchown(p, Some(uid), Some(gid))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a layer with every kind of entry and reads it back under another id range.
    #[test]
    fn a_layer_moves_between_id_ranges_with_its_whiteouts_and_links() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: whiteouts and owners need root");
            return;
        }
        let (src, dst) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (IdMap { host_base: 200_000, size: 65536 }, IdMap { host_base: 300_000, size: 65536 });
        let s = src.path();
        fs::create_dir_all(s.join("home/user/deep")).unwrap();
        fs::write(s.join("home/user/deep/file"), b"hello").unwrap();
        fs::set_permissions(s.join("home/user/deep/file"), fs::Permissions::from_mode(0o640)).unwrap();
        chown(&s.join("home/user/deep/file"), 201_000, 201_000).unwrap();
        chown(&s.join("home/user"), 201_000, 201_000).unwrap();
        fs::hard_link(s.join("home/user/deep/file"), s.join("home/user/link")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", s.join("home/user/sym")).unwrap();
        fs::create_dir(s.join("opaque")).unwrap();
        rustix::fs::lsetxattr(s.join("opaque"), OPAQUE_XATTR, b"y", rustix::fs::XattrFlags::empty()).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            s.join("gone"),
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::empty(),
            0,
        )
        .unwrap();
        fs::write(s.join("root-owned"), b"x").unwrap();

        let mut tar = Vec::new();
        let data = write_layer(s, &mut tar, &a).unwrap();
        assert_eq!(data, 5 + 1, "the file once (its hard link is an entry), and root-owned");
        let read = read_layer(&tar[..], dst.path(), &b).unwrap();
        assert_eq!(read, data);
        let d = dst.path();
        assert_eq!(fs::read(d.join("home/user/deep/file")).unwrap(), b"hello");
        let m = fs::metadata(d.join("home/user/deep/file")).unwrap();
        assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (301_000, 301_000, 0o640), "guest 1000 on the new range");
        assert_eq!(m.ino(), fs::metadata(d.join("home/user/link")).unwrap().ino(), "still one file");
        assert_eq!(fs::read_link(d.join("home/user/sym")).unwrap(), Path::new("/etc/passwd"));
        let mut v = [0u8; 8];
        assert_eq!(rustix::fs::lgetxattr(d.join("opaque"), OPAQUE_XATTR, &mut v).unwrap(), 1);
        let gone = fs::symlink_metadata(d.join("gone")).unwrap();
        assert!(gone.file_type().is_char_device() && gone.rdev() == 0, "the whiteout is a whiteout again");
        let r = fs::metadata(d.join("root-owned")).unwrap();
        assert_eq!(r.uid(), 300_000 + NOBODY, "a host owner outside the range is nobody");
    }

    fn tar_of(entries: &[(&str, EntryType, Option<&str>)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, kind, link) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_size(0);
            h.set_mode(0o755);
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(0);
            if name.contains("..") {
                // The tar crate refuses to write such a name: set it in the header directly.
                h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
                h.set_cksum();
                b.append(&h, io::empty()).unwrap();
                continue;
            }
            match link {
                Some(l) => b.append_link(&mut h, name, l).unwrap(),
                None => b.append_data(&mut h, name, io::empty()).unwrap(),
            }
        }
        b.into_inner().unwrap()
    }

    /// A hostile layer writes nothing outside the upper directory.
    #[test]
    fn a_layer_cannot_write_through_symlinks_or_climb_out() {
        let outside = tempfile::tempdir().unwrap();
        let o = outside.path().to_string_lossy().to_string();
        let cases: Vec<Vec<u8>> = vec![
            // A symlink to a host directory, then a file "inside" it.
            tar_of(&[("esc", EntryType::Symlink, Some(&o)), ("esc/planted", EntryType::Regular, None)]),
            // A hard link to a host file by an absolute path is read as relative, and missing.
            tar_of(&[("h", EntryType::Link, Some("/etc/passwd"))]),
            // Climbing by name.
            tar_of(&[("../planted", EntryType::Regular, None)]),
            // A file before its directory.
            tar_of(&[("nodir/planted", EntryType::Regular, None)]),
            // A device node.
            tar_of(&[("dev", EntryType::Char, None)]),
        ];
        for (i, tar) in cases.iter().enumerate() {
            let upper = tempfile::tempdir().unwrap();
            let err = read_layer(&tar[..], upper.path(), &IdMap { host_base: 0, size: 65536 });
            assert!(matches!(err, Err(LayerError::Unsafe(..))), "case {i}: {err:?}");
            assert!(!outside.path().join("planted").exists(), "case {i} wrote outside");
        }
    }
}
