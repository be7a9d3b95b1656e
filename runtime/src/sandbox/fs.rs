//! Files inside a sandbox, reached from the host through its root filesystem. Every path is
//! resolved as the guest would see it (`RESOLVE_IN_ROOT`: `..` and symlinks never leave the
//! root), and a request that tries to leave it — `../../etc/shadow`, or a symlink whose target
//! points above the root — is refused outright with a clear error.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};

use crate::api::FileEntry;

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("{0:?} leaves the sandbox's root: use a path inside it")]
    Escape(String),
    #[error("{path:?} is a symlink to {target:?}, which points outside the sandbox")]
    SymlinkEscape { path: String, target: String },
    #[error("{0:?} does not exist in the sandbox")]
    NotFound(String),
    #[error("{0:?} is a directory")]
    IsDir(String),
    #[error("{0:?} is a directory that is not empty: remove it with recursive=true")]
    NotEmpty(String),
    #[error("{0:?} is longer than a path (or one of its names) can be")]
    TooLong(String),
    #[error("{path:?}: {source}")]
    Io { path: String, source: std::io::Error },
}

fn io(path: &str) -> impl FnOnce(rustix::io::Errno) -> FsError + '_ {
    move |e| match e {
        // A component that is not a directory: nothing by that path exists.
        rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR => FsError::NotFound(path.to_string()),
        rustix::io::Errno::NAMETOOLONG => FsError::TooLong(path.to_string()),
        rustix::io::Errno::XDEV => FsError::Escape(path.to_string()),
        rustix::io::Errno::NOTEMPTY => FsError::NotEmpty(path.to_string()),
        other => FsError::Io { path: path.to_string(), source: other.into() },
    }
}

/// The path relative to the root, with `.` removed and `..` applied; refused if it climbs out.
pub fn clean(path: &str) -> Result<PathBuf, FsError> {
    let mut out: Vec<&std::ffi::OsStr> = Vec::new();
    for c in Path::new(path).components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                if out.pop().is_none() {
                    return Err(FsError::Escape(path.to_string()));
                }
            }
            Component::Normal(n) => out.push(n),
        }
    }
    Ok(out.iter().collect())
}

/// Walks `rel` under `root` and refuses any symlink on the way whose target climbs above the
/// root. The kernel's RESOLVE_IN_ROOT already keeps resolution inside; this turns an attempt
/// into an error the caller sees instead of a silently different file.
fn check_symlinks(root: &Path, rel: &Path, original: &str) -> Result<(), FsError> {
    let mut stack: Vec<PathBuf> = vec![rel.to_path_buf()];
    let mut hops = 0;
    while let Some(p) = stack.pop() {
        let mut cur = PathBuf::new();
        for c in p.components() {
            cur.push(c);
            let host = root.join(&cur);
            let Ok(meta) = std::fs::symlink_metadata(&host) else { break };
            if !meta.file_type().is_symlink() {
                continue;
            }
            hops += 1;
            if hops > 40 {
                return Err(FsError::Io { path: original.into(), source: std::io::Error::other("too many symlinks") });
            }
            let target = std::fs::read_link(&host).map_err(|e| FsError::Io { path: original.into(), source: e })?;
            let t = target.to_string_lossy().to_string();
            let joined = if target.is_absolute() {
                t.clone()
            } else {
                cur.parent().unwrap_or(Path::new("")).join(&target).to_string_lossy().to_string()
            };
            let resolved = clean(&joined).map_err(|_| FsError::SymlinkEscape { path: original.into(), target: t })?;
            let rest: PathBuf = p.strip_prefix(&cur).map(Path::to_path_buf).unwrap_or_default();
            stack.push(resolved.join(rest));
            break;
        }
    }
    Ok(())
}

fn root_fd(root: &Path) -> Result<OwnedFd, FsError> {
    rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(io(&root.to_string_lossy()))
}

fn resolve(root: &OwnedFd, rel: &Path, flags: OFlags, mode: Mode, original: &str) -> Result<OwnedFd, FsError> {
    let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    rustix::fs::openat2(root, rel, flags | OFlags::CLOEXEC, mode, ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS)
        .map_err(io(original))
}

fn prepare(root: &Path, path: &str) -> Result<(OwnedFd, PathBuf), FsError> {
    let rel = clean(path)?;
    check_symlinks(root, &rel, path)?;
    Ok((root_fd(root)?, rel))
}

/// Opens a guest file for reading: the file and its size.
pub fn open_read(root: &Path, path: &str) -> Result<(std::fs::File, u64), FsError> {
    let (rfd, rel) = prepare(root, path)?;
    let fd = resolve(&rfd, &rel, OFlags::RDONLY, Mode::empty(), path)?;
    let f = std::fs::File::from(fd);
    let meta = f.metadata().map_err(|e| FsError::Io { path: path.into(), source: e })?;
    if meta.is_dir() {
        return Err(FsError::IsDir(path.to_string()));
    }
    Ok((f, meta.len()))
}

pub fn read_file(root: &Path, path: &str, limit: u64) -> Result<Vec<u8>, FsError> {
    let (f, _) = open_read(root, path)?;
    let mut buf = Vec::new();
    f.take(limit).read_to_end(&mut buf).map_err(|e| FsError::Io { path: path.into(), source: e })?;
    Ok(buf)
}

/// Writes a file, creating missing parent directories. The last component is never followed
/// if it is a symlink.
pub fn write_file(root: &Path, path: &str, data: &[u8], mode: u32) -> Result<(), FsError> {
    write_file_owned(root, path, data, Some(mode), None)
}

/// [`write_file`], giving what it creates (the file, missing directories) to `owner` (host
/// uid, gid): in a sandbox with its own user namespace, guest root, so the guest can use what
/// the runtime wrote. An existing file keeps its owner (and, with no `mode`, its mode).
pub fn write_file_owned(
    root: &Path,
    path: &str,
    data: &[u8],
    mode: Option<u32>,
    owner: Option<(u32, u32)>,
) -> Result<(), FsError> {
    let (upload, mut file) = Upload::create(root, path, mode, owner)?;
    file.write_all(data).map_err(|e| FsError::Io { path: path.into(), source: e })?;
    upload.commit()
}

/// A file being written: the bytes go to a temporary file beside the target, which takes the
/// target's place on [`Upload::commit`]. An upload that fails half-way (a broken connection, a
/// full disk) leaves the old file as it was, or none; dropped uncommitted, the temporary file
/// is removed.
pub struct Upload {
    dir: OwnedFd,
    temp: std::ffi::OsString,
    name: std::ffi::OsString,
    path: String,
    committed: bool,
}

impl Upload {
    /// Creates the temporary file (and missing parent directories, given to `owner`). `mode`
    /// (default: the existing file's, else 644) and the owner (the existing file's, else
    /// `owner`) are set on it now, so the file never shows with other rights.
    pub fn create(
        root: &Path,
        path: &str,
        mode: Option<u32>,
        owner: Option<(u32, u32)>,
    ) -> Result<(Upload, std::fs::File), FsError> {
        let (rfd, rel) = prepare(root, path)?;
        let name = rel.file_name().ok_or_else(|| FsError::IsDir(path.to_string()))?.to_owned();
        let dir = make_parents(&rfd, rel.parent().unwrap_or(Path::new("")), path, owner)?;
        let existing = match rustix::fs::statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => match rustix::fs::FileType::from_raw_mode(st.st_mode) {
                rustix::fs::FileType::RegularFile => Some(st),
                rustix::fs::FileType::Directory => return Err(FsError::IsDir(path.to_string())),
                // Never written through (a symlink) or replaced (a device, a socket).
                _ => return Err(FsError::Escape(path.to_string())),
            },
            Err(rustix::io::Errno::NOENT) => None,
            Err(e) => return Err(io(path)(e)),
        };
        let temp = std::ffi::OsString::from(format!(".kairon-upload-{}", uuid::Uuid::new_v4().simple()));
        let fd = rustix::fs::openat(
            &dir,
            temp.as_os_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(io(path))?;
        let upload = Upload { dir, temp, name, path: path.to_string(), committed: false };
        // Owner first: a chown clears set-id bits, which the mode may ask for.
        let (uid, gid) = match &existing {
            Some(st) => (Some(st.st_uid), Some(st.st_gid)),
            None => (owner.map(|o| o.0), owner.map(|o| o.1)),
        };
        if uid.is_some() {
            rustix::fs::fchown(&fd, uid.map(rustix::fs::Uid::from_raw), gid.map(rustix::fs::Gid::from_raw))
                .map_err(io(path))?;
        }
        let mode = mode.or(existing.map(|st| st.st_mode)).unwrap_or(0o644) & 0o7777;
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(io(path))?;
        Ok((upload, std::fs::File::from(fd)))
    }

    /// Puts the written file in the target's place (one rename: a reader sees the old file or
    /// the new one, whole).
    pub fn commit(mut self) -> Result<(), FsError> {
        rustix::fs::renameat(&self.dir, self.temp.as_os_str(), &self.dir, self.name.as_os_str())
            .map_err(io(&self.path))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        if !self.committed {
            let _ = rustix::fs::unlinkat(&self.dir, self.temp.as_os_str(), AtFlags::empty());
        }
    }
}

/// Opens (creating what is missing, given to `owner`) the directory `parent` under the root,
/// one component at a time and never through a symlink.
fn make_parents(rfd: &OwnedFd, parent: &Path, path: &str, owner: Option<(u32, u32)>) -> Result<OwnedFd, FsError> {
    let mut dir = resolve(rfd, Path::new(""), OFlags::PATH | OFlags::DIRECTORY, Mode::empty(), path)?;
    for c in parent.components() {
        let created = match rustix::fs::mkdirat(&dir, c.as_os_str(), Mode::from_raw_mode(0o755)) {
            Ok(()) => true,
            Err(rustix::io::Errno::EXIST) => false,
            Err(e) => return Err(io(path)(e)),
        };
        let next = rustix::fs::openat(
            &dir,
            c.as_os_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            if e == rustix::io::Errno::NOTDIR || e == rustix::io::Errno::LOOP {
                FsError::Escape(path.to_string())
            } else {
                io(path)(e)
            }
        })?;
        if created && let Some((uid, gid)) = owner {
            rustix::fs::fchown(&next, Some(rustix::fs::Uid::from_raw(uid)), Some(rustix::fs::Gid::from_raw(gid)))
                .map_err(io(path))?;
        }
        dir = next;
    }
    Ok(dir)
}

pub fn list_dir(root: &Path, path: &str) -> Result<Vec<FileEntry>, FsError> {
    let (rfd, rel) = prepare(root, path)?;
    let fd = resolve(&rfd, &rel, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty(), path)?;
    let dir_for_stat = rustix::io::dup(&fd).map_err(io(path))?;
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(&fd).map_err(io(path))? {
        let entry = entry.map_err(io(path))?;
        let name = entry.file_name().to_string_lossy().to_string();
        if name == "." || name == ".." {
            continue;
        }
        if let Ok(e) = entry_at(&dir_for_stat, entry.file_name(), name) {
            out.push(e);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The entry `name` of directory `dir` as it is (a symlink is itself, with its target).
fn entry_at(dir: &OwnedFd, name: &std::ffi::CStr, shown: String) -> rustix::io::Result<FileEntry> {
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    let ft = rustix::fs::FileType::from_raw_mode(st.st_mode);
    let link_target = (ft == rustix::fs::FileType::Symlink)
        .then(|| rustix::fs::readlinkat(dir, name, Vec::new()).ok())
        .flatten()
        .map(|t| t.to_string_lossy().to_string());
    Ok(FileEntry {
        name: shown,
        size: st.st_size as u64,
        mode: st.st_mode & 0o7777,
        is_dir: ft == rustix::fs::FileType::Directory,
        link_target,
        modified: crate::files::file_time(st.st_mtime, st.st_mtime_nsec as u32),
    })
}

/// The parent directory of `path` (resolved in the root) and its last name; refused for `/`.
fn parent_of(root: &Path, path: &str) -> Result<(OwnedFd, std::ffi::OsString), FsError> {
    let (rfd, rel) = prepare(root, path)?;
    let name = rel.file_name().ok_or_else(|| FsError::Escape(path.to_string()))?.to_owned();
    let parent =
        resolve(&rfd, rel.parent().unwrap_or(Path::new("")), OFlags::PATH | OFlags::DIRECTORY, Mode::empty(), path)?;
    Ok((parent, name))
}

/// What is at `path`, not following a symlink there (its target is said).
pub fn info(root: &Path, path: &str) -> Result<FileEntry, FsError> {
    if clean(path)?.as_os_str().is_empty() {
        let fd = resolve(&root_fd(root)?, Path::new(""), OFlags::PATH | OFlags::DIRECTORY, Mode::empty(), path)?;
        return entry_at(&fd, c".", "/".into()).map_err(io(path));
    }
    let (parent, name) = parent_of(root, path)?;
    let c = std::ffi::CString::new(name.as_encoded_bytes()).map_err(|_| FsError::NotFound(path.to_string()))?;
    entry_at(&parent, &c, name.to_string_lossy().into_owned()).map_err(io(path))
}

/// Moves `from` to `to` (both in the root); a file at `to` is replaced, a directory there must be
/// empty.
pub fn rename(root: &Path, from: &str, to: &str) -> Result<(), FsError> {
    let (from_dir, from_name) = parent_of(root, from)?;
    let (to_dir, to_name) = parent_of(root, to)?;
    rustix::fs::renameat(&from_dir, from_name.as_os_str(), &to_dir, to_name.as_os_str()).map_err(|e| match e {
        rustix::io::Errno::NOENT => FsError::NotFound(from.to_string()),
        other => io(to)(other),
    })
}

/// Removes what is at `path`: a file or symlink, an empty directory, or with `recursive` a
/// directory and everything in it (symlinks inside are removed, never followed).
pub fn remove(root: &Path, path: &str, recursive: bool) -> Result<(), FsError> {
    let (parent, name) = parent_of(root, path)?;
    let st = rustix::fs::statat(&parent, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(io(path))?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Directory {
        return rustix::fs::unlinkat(&parent, name.as_os_str(), AtFlags::empty()).map_err(io(path));
    }
    if recursive {
        // The parent was opened O_PATH; the walk needs a real directory descriptor.
        let dir = rustix::fs::openat(&parent, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(io(path))?;
        empty_dir(&dir, name.as_os_str()).map_err(io(path))?;
    }
    rustix::fs::unlinkat(&parent, name.as_os_str(), AtFlags::REMOVEDIR).map_err(io(path))
}

/// Removes everything inside directory `name` of `parent`, each directory opened without
/// following a symlink (one swapped in meanwhile is refused, never walked into).
fn empty_dir(parent: &OwnedFd, name: &std::ffi::OsStr) -> rustix::io::Result<()> {
    let dir = rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let names: Vec<std::ffi::CString> = rustix::fs::Dir::read_from(&dir)?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_owned())
        .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
        .collect();
    for n in names {
        let st = rustix::fs::statat(&dir, n.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory {
            empty_dir(&dir, std::ffi::OsStr::from_bytes(n.as_bytes()))?;
            rustix::fs::unlinkat(&dir, n.as_c_str(), AtFlags::REMOVEDIR)?;
        } else {
            rustix::fs::unlinkat(&dir, n.as_c_str(), AtFlags::empty())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("etc")).unwrap();
        std::fs::write(r.join("etc/hostname"), "inside").unwrap();
        std::os::unix::fs::symlink("../../../../etc/shadow", r.join("evil")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", r.join("abs")).unwrap();
        std::os::unix::fs::symlink("../..", r.join("etc/up")).unwrap();

        assert!(matches!(read_file(r, "../../etc/shadow", 1 << 20), Err(FsError::Escape(_))));
        assert!(matches!(read_file(r, "/evil", 1 << 20), Err(FsError::SymlinkEscape { .. })));
        assert!(matches!(read_file(r, "/etc/up/x", 1 << 20), Err(FsError::SymlinkEscape { .. })));
        // An absolute symlink means the guest's own path.
        assert_eq!(read_file(r, "/abs", 1 << 20).unwrap(), b"inside");
        assert!(matches!(write_file(r, "/evil", b"x", 0o644), Err(FsError::SymlinkEscape { .. })));

        write_file(r, "/work/dir/note.txt", b"hello", 0o600).unwrap();
        // Owned: what is created goes to the owner, what exists keeps its own.
        use std::os::unix::fs::MetadataExt;
        write_file_owned(r, "/owned/a/b.txt", b"x", Some(0o644), Some((4242, 4343))).unwrap();
        for p in ["owned", "owned/a", "owned/a/b.txt"] {
            let m = std::fs::metadata(r.join(p)).unwrap();
            assert_eq!((m.uid(), m.gid()), (4242, 4343), "{p}");
        }
        write_file_owned(r, "/work/dir/note.txt", b"hello", Some(0o600), Some((4242, 4343))).unwrap();
        assert_eq!(std::fs::metadata(r.join("work/dir/note.txt")).unwrap().uid(), 0);
        assert_eq!(read_file(r, "work/dir/note.txt", 1 << 20).unwrap(), b"hello");
        let names: Vec<_> = list_dir(r, "/").unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, ["abs", "etc", "evil", "owned", "work"]);
        remove(r, "/work/dir/note.txt", false).unwrap();
        assert!(matches!(read_file(r, "/work/dir/note.txt", 10), Err(FsError::NotFound(_))));
    }

    #[test]
    fn an_upload_replaces_the_file_whole_or_not_at_all() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write_file(r, "/bin/run.sh", b"old", 0o755).unwrap();
        // Dropped half-written (a broken connection): the old file stays, no temporary file.
        let (upload, mut f) = Upload::create(r, "/bin/run.sh", None, None).unwrap();
        f.write_all(b"new, but not all of it").unwrap();
        drop(upload);
        assert_eq!(read_file(r, "/bin/run.sh", 100).unwrap(), b"old");
        assert_eq!(list_dir(r, "/bin").unwrap().len(), 1, "the temporary file is gone");
        // Committed with no mode: the content changes and the mode stays.
        write_file_owned(r, "/bin/run.sh", b"new", None, None).unwrap();
        assert_eq!(read_file(r, "/bin/run.sh", 100).unwrap(), b"new");
        assert_eq!(std::fs::metadata(r.join("bin/run.sh")).unwrap().permissions().mode() & 0o7777, 0o755);
        write_file_owned(r, "/bin/run.sh", b"x", Some(0o600), None).unwrap();
        assert_eq!(std::fs::metadata(r.join("bin/run.sh")).unwrap().permissions().mode() & 0o7777, 0o600);
        // A directory or a symlink in the file's place is refused, and left alone.
        assert!(matches!(write_file(r, "/bin", b"x", 0o644), Err(FsError::IsDir(_))));
        std::os::unix::fs::symlink("run.sh", r.join("bin/link")).unwrap();
        assert!(matches!(write_file(r, "/bin/link", b"x", 0o644), Err(FsError::Escape(_))));
        assert_eq!(read_file(r, "/bin/run.sh", 100).unwrap(), b"x");
    }

    #[test]
    fn info_rename_and_a_recursive_remove_stay_in_the_root() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write_file(r, "/d/sub/a.txt", b"hello", 0o640).unwrap();
        std::fs::create_dir_all(root.path().join("outside-target")).unwrap();
        std::os::unix::fs::symlink("/etc", r.join("d/sub/link")).unwrap();
        let i = info(r, "/d/sub/a.txt").unwrap();
        assert_eq!((i.name.as_str(), i.size, i.mode, i.is_dir), ("a.txt", 5, 0o640, false));
        assert!(i.modified.as_deref().is_some_and(|m| m.ends_with('Z')), "{i:?}");
        assert_eq!(info(r, "/d/sub/link").unwrap().link_target.as_deref(), Some("/etc"));
        assert!(info(r, "/").unwrap().is_dir);
        assert!(matches!(info(r, "/d/none"), Err(FsError::NotFound(_))));
        rename(r, "/d/sub/a.txt", "/d/b.txt").unwrap();
        assert_eq!(read_file(r, "/d/b.txt", 10).unwrap(), b"hello");
        assert!(matches!(rename(r, "/d/none", "/d/c"), Err(FsError::NotFound(_))));
        assert!(matches!(rename(r, "/d/b.txt", "/../x"), Err(FsError::Escape(_))));
        // A directory that is not empty goes only when asked to go whole.
        assert!(matches!(remove(r, "/d", false), Err(FsError::NotEmpty(_))));
        remove(r, "/d", true).unwrap();
        assert!(matches!(info(r, "/d"), Err(FsError::NotFound(_))));
        // The symlink inside went, not what it pointed at.
        assert!(root.path().join("outside-target").is_dir());
        assert!(matches!(remove(r, "/", true), Err(FsError::Escape(_))));
    }
}
