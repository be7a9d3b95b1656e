//! The builtin busybox template: a rootfs made from the host's static busybox, no registry.

use std::fs;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use super::OciError;
use crate::api::ImageConfig;

/// Where Debian's busybox-static puts its binary.
pub const HOST_BUSYBOX: &str = "/bin/busybox";

const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
const GROUP: &str = "root:x:0:\nnogroup:x:65534:\n";

/// Directories of the rootfs and their modes; /tmp is sticky and world-writable.
const DIRS: &[(&str, u32)] = &[
    ("bin", 0o755),
    ("sbin", 0o755),
    ("usr", 0o755),
    ("usr/bin", 0o755),
    ("usr/sbin", 0o755),
    ("etc", 0o755),
    ("root", 0o700),
    ("tmp", 0o1777),
    ("var", 0o755),
    ("proc", 0o555),
    ("sys", 0o555),
    ("dev", 0o755),
];

/// Builds a busybox rootfs in `rootfs` (created if missing): /bin/busybox copied from the
/// host's busybox-static, `/bin/<applet>` symlinks to it for every applet, /etc/passwd and
/// /etc/group with root, and the usual empty directories. Returns the image config to run it.
pub fn build_busybox_rootfs(rootfs: &Path) -> Result<ImageConfig, OciError> {
    let host = Path::new(HOST_BUSYBOX);
    ensure_static(host)?;
    let applets = list_applets(host)?;

    super::layer::create_rootfs(rootfs)?;
    for (dir, mode) in DIRS {
        let path = rootfs.join(dir);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(&path)
            .map_err(|e| OciError::io(format!("creating {}", path.display()), e))?;
        // Set explicitly: the umask would strip the sticky and write bits of /tmp.
        set_mode(&path, *mode)?;
    }

    let bin = rootfs.join("bin");
    let target = bin.join("busybox");
    remove_if_present(&target)?;
    fs::copy(host, &target)
        .map_err(|e| OciError::io(format!("copying {} to {}", host.display(), target.display()), e))?;
    set_mode(&target, 0o755)?;
    for applet in &applets {
        let link = bin.join(applet);
        remove_if_present(&link)?;
        std::os::unix::fs::symlink("busybox", &link)
            .map_err(|e| OciError::io(format!("creating {}", link.display()), e))?;
    }

    for (name, content) in [("etc/passwd", PASSWD), ("etc/group", GROUP)] {
        let path = rootfs.join(name);
        remove_if_present(&path)?;
        fs::write(&path, content).map_err(|e| OciError::io(format!("writing {}", path.display()), e))?;
        set_mode(&path, 0o644)?;
    }

    Ok(ImageConfig { cmd: vec!["/bin/sh".into()], env: vec![PATH_ENV.into()], ..ImageConfig::default() })
}

fn list_applets(host: &Path) -> Result<Vec<String>, OciError> {
    let out = Command::new(host)
        .arg("--list")
        .output()
        .map_err(|e| OciError::io(format!("running {} --list", host.display()), e))?;
    if !out.status.success() {
        return Err(OciError::Busybox(format!(
            "{} --list failed ({}): {}",
            host.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let applets: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        // A name with a slash would place a link elsewhere; busybox never lists one.
        .filter(|a| !a.is_empty() && *a != "busybox" && !a.contains('/') && *a != "..")
        .map(String::from)
        .collect();
    if !applets.iter().any(|a| a == "sh") {
        return Err(OciError::Busybox(format!("{} has no sh applet: install Debian's busybox-static", host.display())));
    }
    Ok(applets)
}

/// A dynamically linked busybox would not run in a rootfs without its libraries.
fn ensure_static(host: &Path) -> Result<(), OciError> {
    let mut file = fs::File::open(host).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            OciError::Busybox(format!("{} not found: install Debian's busybox-static", host.display()))
        } else {
            OciError::io(format!("opening {}", host.display()), e)
        }
    })?;
    let mut bytes = Vec::new();
    // Program headers sit near the start; 64 KiB covers any sane ELF.
    (&mut file)
        .take(64 << 10)
        .read_to_end(&mut bytes)
        .map_err(|e| OciError::io(format!("reading {}", host.display()), e))?;
    if has_interpreter(&bytes) {
        return Err(OciError::Busybox(format!(
            "{} is dynamically linked: install Debian's busybox-static",
            host.display()
        )));
    }
    Ok(())
}

/// Whether a little-endian ELF64 declares a PT_INTERP program header. Other layouts answer
/// false: the check is a courtesy, not a gate.
fn has_interpreter(elf: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
        return false;
    }
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| elf.get(o..o + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let phoff = elf.get(0x20..0x28).and_then(|b| <[u8; 8]>::try_from(b).ok()).map(u64::from_le_bytes);
    let (Some(phoff), Some(entsize), Some(count)) = (phoff, u16_at(0x36), u16_at(0x38)) else {
        return false;
    };
    let Ok(phoff) = usize::try_from(phoff) else {
        return false;
    };
    (0..usize::from(count)).any(|i| {
        let at = phoff.checked_add(i * usize::from(entsize));
        at.and_then(u32_at) == Some(PT_INTERP)
    })
}

fn set_mode(path: &Path, mode: u32) -> Result<(), OciError> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| OciError::io(format!("setting mode of {}", path.display()), e))
}

fn remove_if_present(path: &Path) -> Result<(), OciError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(OciError::io(format!("removing {}", path.display()), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_busybox_is_static_and_dynamic_binaries_are_seen() {
        let busybox = fs::read(HOST_BUSYBOX).expect("busybox-static installed");
        assert!(!has_interpreter(&busybox));
        let ls = fs::read("/bin/ls").expect("/bin/ls");
        assert!(has_interpreter(&ls));
    }
}
