//! `cp` of directories: a tar stream through the exec relay, made and unpacked here as it flows
//! (nothing is held whole, on either side). The guest needs `tar` (busybox has it).
//!
//! What comes back from a guest is untrusted: the guest's `tar` may be anything. Unpacking never
//! writes outside the destination (`..` and absolute paths, and links that lead out, are refused
//! by the `tar` crate, which checks every parent it writes under), and keeps no owners, no
//! setuid/setgid bits and no extended attributes.

use std::io::Read;
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::Path;

use anyhow::{Context, Result};
use tokio::io::AsyncWriteExt;

use crate::Failure;
use crate::stream::Relays;

fn refused(msg: String) -> anyhow::Error {
    anyhow::Error::new(Failure::Refused(msg))
}

/// Copies the local directory `local` to `remote` in the guest (made if missing; files there
/// are replaced).
pub async fn upload(relays: &Relays, ns: &str, name: &str, local: &Path, remote: &str) -> Result<()> {
    let (ours, theirs) = UnixStream::pair()?;
    let src = local.to_path_buf();
    let maker = std::thread::spawn(move || -> std::io::Result<()> {
        let mut b = tar::Builder::new(theirs);
        // Links are copied as links, not followed out of the directory.
        b.follow_symlinks(false);
        b.append_dir_all(".", &src)?;
        b.into_inner()?.shutdown(Shutdown::Write)
    });
    ours.set_nonblocking(true)?;
    let input = tokio::net::UnixStream::from_std(ours)?;
    let script = "mkdir -p -- \"$1\" && exec tar -x -f - -C \"$1\"";
    let command: Vec<String> = ["sh", "-c", script, "sh", remote].map(String::from).to_vec();
    let mut said = Vec::new();
    let code = relays.exec_io(ns, name, &command, input, &mut said).await?;
    maker
        .join()
        .map_err(|_| anyhow::anyhow!("packing {} failed", local.display()))?
        .with_context(|| format!("packing {}", local.display()))?;
    if code != 0 {
        let said = String::from_utf8_lossy(&said);
        return Err(refused(format!("unpacking into {name}:{remote} failed (tar exited {code}): {}", said.trim())));
    }
    Ok(())
}

/// Copies the guest's directory `remote` to `local` (made if missing).
pub async fn download(relays: &Relays, ns: &str, name: &str, remote: &str, local: &Path) -> Result<()> {
    let (ours, theirs) = UnixStream::pair()?;
    let dst = local.to_path_buf();
    let unpacker = std::thread::spawn(move || unpack(theirs, &dst));
    ours.set_nonblocking(true)?;
    let mut out = tokio::net::UnixStream::from_std(ours)?;
    // The relay carries stdout and stderr as one stream: tar's messages would break the archive.
    let script = "exec tar -c -f - -C \"$1\" . 2>/dev/null";
    let command: Vec<String> = ["sh", "-c", script, "sh", remote].map(String::from).to_vec();
    let code = relays.exec_io(ns, name, &command, tokio::io::empty(), &mut out).await;
    out.shutdown().await.ok();
    drop(out);
    let unpacked = unpacker.join().map_err(|_| anyhow::anyhow!("unpacking into {} failed", local.display()))?;
    let code = code?;
    if code != 0 {
        return Err(refused(format!("packing {name}:{remote} failed (tar exited {code}): is it a directory?")));
    }
    unpacked.with_context(|| format!("unpacking {name}:{remote} into {}", local.display()))
}

/// Unpacks an untrusted tar stream into `dst` (made if missing), never outside it.
pub fn unpack(from: impl Read, dst: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dst)?;
    let mut archive = tar::Archive::new(from);
    archive.set_preserve_permissions(false);
    archive.set_preserve_ownerships(false);
    archive.set_unpack_xattrs(false);
    archive.set_overwrite(true);
    archive.unpack(dst)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tar entry with a raw name (the builder itself refuses `..`).
    fn entry(b: &mut tar::Builder<Vec<u8>>, kind: tar::EntryType, name: &str, link: Option<&str>, data: &[u8]) {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o4755);
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        if let Some(l) = link {
            h.as_old_mut().linkname[..l.len()].copy_from_slice(l.as_bytes());
        }
        h.set_cksum();
        b.append(&h, data).unwrap();
    }

    #[test]
    fn a_hostile_archive_writes_nothing_outside_the_destination() {
        let root = tempfile::tempdir().unwrap();
        let (dst, outside) = (root.path().join("dst"), root.path().join("outside"));
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("victim"), b"original").unwrap();
        let out = outside.to_str().unwrap();
        let mut b = tar::Builder::new(Vec::new());
        entry(&mut b, tar::EntryType::Regular, "../escape", None, b"x");
        entry(&mut b, tar::EntryType::Regular, "ok/../../escape2", None, b"x");
        entry(&mut b, tar::EntryType::Symlink, "link", Some(out), b"");
        entry(&mut b, tar::EntryType::Regular, "link/pwned", None, b"x");
        entry(&mut b, tar::EntryType::Symlink, "rel", Some("../outside"), b"");
        entry(&mut b, tar::EntryType::Regular, "rel/pwned2", None, b"x");
        entry(&mut b, tar::EntryType::Link, "hard", Some(&format!("{out}/victim")), b"");
        entry(&mut b, tar::EntryType::Regular, "hard", None, b"changed");
        entry(&mut b, tar::EntryType::Regular, "fine.txt", None, b"kept");
        let bytes = b.into_inner().unwrap();
        // Refusing the archive is fine; writing outside is not.
        let _ = unpack(&bytes[..], &dst);
        for stray in ["escape", "escape2", "outside/pwned", "outside/pwned2"] {
            assert!(!root.path().join(stray).exists(), "{stray} was written outside the destination");
        }
        assert_eq!(std::fs::read(outside.join("victim")).unwrap(), b"original");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
    }

    #[test]
    fn a_plain_archive_unpacks_with_its_tree_and_without_setuid() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let mut b = tar::Builder::new(Vec::new());
        entry(&mut b, tar::EntryType::Directory, "./sub/", None, b"");
        entry(&mut b, tar::EntryType::Regular, "./sub/a.txt", None, b"alpha");
        let bytes = b.into_inner().unwrap();
        unpack(&bytes[..], &root.path().join("d")).unwrap();
        let f = root.path().join("d/sub/a.txt");
        assert_eq!(std::fs::read(&f).unwrap(), b"alpha");
        assert_eq!(std::fs::metadata(&f).unwrap().permissions().mode() & 0o7000, 0, "no setuid");
    }
}
