//! User namespaces for sandboxes. runc 1.1 here has no idmapped mounts, so each template's root
//! filesystem is chowned once into its own range of host ids (`IDS_PER_TEMPLATE` of them) and
//! every sandbox of that template maps its ids 0..65535 onto that range: guest root is an
//! unprivileged host uid that owns nothing outside its template's files.
//!
//! The range is picked when the template is first used, from a hash of the state directory and
//! the template's name (so it is the same after a rebuild), moved on past ranges other
//! templates of this runtime hold, and recorded in `idmap.json` beside the template's rootfs; a
//! restart reads it back. Sandboxes of one template share host ids.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use rustix::fs::{AtFlags, CWD, Gid, Uid};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

/// How many ids a sandbox maps (0..65535: every id a Debian system uses, `nobody` included).
pub const IDS_PER_TEMPLATE: u32 = 65536;
/// The first host id handed to templates: far above login users and the usual /etc/subuid
/// ranges (100000…), and below 2^31 so no tool mistakes an id for a negative number.
pub const FIRST_HOST_ID: u32 = 1 << 30;
/// How many template ranges fit between `FIRST_HOST_ID` and 2^31.
pub const SLOTS: u32 = ((1u64 << 31) - FIRST_HOST_ID as u64) as u32 / IDS_PER_TEMPLATE - 1;
/// Where a template records its range, beside its rootfs.
pub const FILE: &str = "idmap.json";

/// Container ids 0..size are host ids host_base..host_base+size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdMap {
    pub host_base: u32,
    pub size: u32,
}

impl IdMap {
    pub fn for_slot(slot: u32) -> IdMap {
        IdMap { host_base: FIRST_HOST_ID + slot * IDS_PER_TEMPLATE, size: IDS_PER_TEMPLATE }
    }

    fn slot(&self) -> u32 {
        (self.host_base - FIRST_HOST_ID) / IDS_PER_TEMPLATE
    }

    /// The host id of container id `id`; ids past the range become the range's `nobody`
    /// (65534), which is what the guest would see for them anyway.
    pub fn host(&self, id: u32) -> u32 {
        if id >= self.host_base && id - self.host_base < self.size {
            return id; // already shifted (a rerun after an interrupted shift, a hard link)
        }
        self.host_base + if id < self.size { id } else { 65534 }
    }

    /// Guest root, as host ids.
    pub fn root(&self) -> (u32, u32) {
        (self.host_base, self.host_base)
    }

    pub fn load(dir: &Path) -> Option<IdMap> {
        let m: IdMap = serde_json::from_slice(&fs::read(dir.join(FILE)).ok()?).ok()?;
        (m.host_base >= FIRST_HOST_ID && m.size == IDS_PER_TEMPLATE).then_some(m)
    }

    pub fn save(&self, dir: &Path) -> io::Result<()> {
        let tmp = dir.join(format!("{FILE}.tmp"));
        fs::write(&tmp, serde_json::to_vec(self).map_err(io::Error::other)?)?;
        fs::rename(tmp, dir.join(FILE))
    }
}

/// The preferred slot of a template: a hash of where the runtime keeps its state and the
/// template's name, so two runtimes on one host rarely pick the same range for their own
/// templates of the same name.
pub fn preferred_slot(state_dir: &Path, template: &str) -> u32 {
    let mut h = sha2::Sha256::new();
    h.update(state_dir.as_os_str().as_encoded_bytes());
    h.update([0]);
    h.update(template.as_bytes());
    let d = h.finalize();
    u32::from_le_bytes([d[0], d[1], d[2], d[3]]) % SLOTS
}

/// The first free slot from `preferred` on, given the ranges already taken.
pub fn pick(preferred: u32, taken: &[IdMap]) -> IdMap {
    let used: std::collections::BTreeSet<u32> = taken.iter().map(IdMap::slot).collect();
    let slot = (0..SLOTS).map(|i| (preferred + i) % SLOTS).find(|s| !used.contains(s)).unwrap_or(preferred);
    IdMap::for_slot(slot)
}

/// Moves the owner of everything under `rootfs` into the range (container id N becomes host id
/// base+N). Symlinks are changed themselves, never followed; modes (setuid and setgid bits,
/// which chown clears) are put back. Idempotent: ids already in the range stay.
pub fn shift_rootfs(rootfs: &Path, map: &IdMap) -> io::Result<u64> {
    let mut changed = 0u64;
    let mut stack = vec![rootfs.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = fs::symlink_metadata(&path)?;
        let (uid, gid) = (map.host(meta.uid()), map.host(meta.gid()));
        if (uid, gid) != (meta.uid(), meta.gid()) {
            rustix::fs::chownat(
                CWD,
                &path,
                Some(Uid::from_raw(uid)),
                Some(Gid::from_raw(gid)),
                AtFlags::SYMLINK_NOFOLLOW,
            )?;
            changed += 1;
            let mode = meta.mode() & 0o7777;
            if !meta.file_type().is_symlink() && fs::symlink_metadata(&path)?.mode() & 0o7777 != mode {
                fs::set_permissions(&path, fs::Permissions::from_mode(mode))?;
            }
        }
        if meta.is_dir() {
            for e in fs::read_dir(&path)? {
                stack.push(e?.path());
            }
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_distinct_and_stable() {
        let a = preferred_slot(Path::new("/s"), "busybox");
        assert_eq!(a, preferred_slot(Path::new("/s"), "busybox"));
        let first = pick(a, &[]);
        let second = pick(a, &[first]);
        assert_ne!(first, second);
        assert!(second.host_base >= FIRST_HOST_ID && second.host_base as u64 + 65536 <= 1 << 31);
        assert_eq!(pick(SLOTS - 1, &[IdMap::for_slot(SLOTS - 1)]), IdMap::for_slot(0), "wraps around");
        let m = IdMap::for_slot(3);
        assert_eq!(m.host(0), m.host_base);
        assert_eq!(m.host(1000), m.host_base + 1000);
        assert_eq!(m.host(m.host_base + 5), m.host_base + 5, "idempotent");
        assert_eq!(m.host(70000), m.host_base + 65534);
    }

    #[test]
    fn shifting_keeps_modes_and_does_not_follow_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        fs::create_dir(r.join("bin")).unwrap();
        fs::write(r.join("bin/su"), b"x").unwrap();
        fs::set_permissions(r.join("bin/su"), fs::Permissions::from_mode(0o4755)).unwrap();
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::os::unix::fs::symlink(outside.path(), r.join("link")).unwrap();
        let m = IdMap::for_slot(7);
        shift_rootfs(r, &m).unwrap();
        let su = fs::symlink_metadata(r.join("bin/su")).unwrap();
        assert_eq!((su.uid(), su.gid(), su.mode() & 0o7777), (m.host_base, m.host_base, 0o4755));
        assert_eq!(fs::symlink_metadata(r.join("link")).unwrap().uid(), m.host_base);
        assert_eq!(fs::metadata(outside.path()).unwrap().uid(), 0, "the symlink's target is not touched");
        assert_eq!(shift_rootfs(r, &m).unwrap(), 0, "a second pass changes nothing");
    }
}
