//! The small bootable image Kairon builds itself, `kairon-hw.qcow2`, with its kernel and initrd
//! beside it (`kairon-hw.vmlinuz`, `kairon-hw.initrd`) for direct kernel boot:
//!
//! * kernel: Debian's `linux-image-cloud-amd64`, fetched with `apt-get download` and unpacked
//!   with `dpkg-deb -x` (installing it would run initramfs hooks for half a minute);
//! * initrd: a static busybox that loads the virtio modules the cloud kernel builds as modules
//!   (`virtio_mmio`, `virtio_blk`, `virtio_net`, `virtio_console`, `virtio-rng`, …), mounts the
//!   root disk and switches to it with the guest agent as init;
//! * root filesystem: the python template's minimal Debian (debootstrap minbase from the mirror
//!   apt is configured with) plus dropbear and qemu-guest-agent, the static `kairon-agent` as
//!   `/sbin/kairon-agent` and a static busybox; made into ext4 with `mke2fs -d`, then qcow2.
//!
//! No systemd: the guest is up and its agent answering in a few seconds under TCG.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::Command;

use crate::oci::Progress;

pub const DEFAULT_IMAGE: &str = "kairon-hw";
/// Where every example of the spec expects the image.
pub const SYSTEM_IMAGES_DIR: &str = "/var/lib/fluxvm/images";
/// Overrides where the static guest agent binary is taken from.
pub const AGENT_BIN_ENV: &str = "KAIRON_AGENT_BIN";
const KERNEL_PACKAGE: &str = "linux-image-cloud-amd64";
/// Virtio drivers in load order (dependencies first), as the cloud kernel ships them.
const MODULES: &[&str] = &[
    "virtio_ring",
    "virtio",
    "virtio_mmio",
    "virtio_pci_legacy_dev",
    "virtio_pci_modern_dev",
    "virtio_pci",
    "virtio_blk",
    "failover",
    "net_failover",
    "virtio_net",
    "virtio_console",
    "virtio-rng",
];
/// Extra packages of the root filesystem.
const PACKAGES: &[&str] = &["python3-minimal", "dropbear-bin", "qemu-guest-agent", "util-linux"];
/// The recipe's version, kept beside the image (`kairon-hw.version`): an image built by an older
/// recipe, or with an agent that needs replacing, is built again. 3: an agent that survives a
/// panic of one command and a console it cannot write to (as PID 1 it once ended its VM so).
/// 4: an agent that takes its guest network address from the kernel command line. 5: an agent
/// that hands a running process's output over as it comes (`kairon-exec-output`) and keeps its stdin open
/// (`kairon-keep-stdin`, `kairon-exec-input`). 6: an agent that runs a command on a terminal
/// (`kairon-tty`, `kairon-exec-resize`: `exec -it` on a VM). 7: an agent that watches a directory
/// (`kairon-agent watch`: `GET …/files/watch`). 8: an agent that runs code contexts (`kairon-agent
/// context`: `sb.code_context()`).
pub const IMAGE_VERSION: &str = "8";
/// Virtual size of the root disk (the qcow2 only holds what is used).
const DISK_SIZE: &str = "2G";

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("building the VM image: {0}")]
    Build(String),
    #[error(
        "the static guest agent binary was not found: build it with scripts/build-agent (or set {AGENT_BIN_ENV} to a static kairon-agent)"
    )]
    NoAgent,
    #[error("building the VM image: {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ImageError {
    let context = context.into();
    move |source| ImageError::Io { context, source }
}

/// The directory of images: `/var/lib/fluxvm/images` when it can be written, else `fallback`
/// (a runtime's `<state dir>/images`).
pub fn images_dir(fallback: &Path) -> PathBuf {
    let system = PathBuf::from(SYSTEM_IMAGES_DIR);
    if std::fs::create_dir_all(&system).is_ok() {
        let probe = system.join(format!(".probe-{}", std::process::id()));
        if std::fs::write(&probe, b"").is_ok() {
            let _ = std::fs::remove_file(&probe);
            return system;
        }
    }
    fallback.to_path_buf()
}

/// The kernel and initrd beside an image (`X.qcow2` → `X.vmlinuz`, `X.initrd`), when present.
pub fn kernel_beside(image: &Path) -> Option<(PathBuf, Option<PathBuf>)> {
    let kernel = image.with_extension("vmlinuz");
    if !kernel.is_file() {
        return None;
    }
    let initrd = image.with_extension("initrd");
    Some((kernel, initrd.is_file().then_some(initrd)))
}

/// The static guest agent: `$KAIRON_AGENT_BIN`, or a `kairon-agent` built for the explicit
/// target (`scripts/build-agent`) in a target directory above this executable, or one beside
/// it, or in `/usr/lib/kairon`.
pub fn find_agent() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(AGENT_BIN_ENV) {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let exe = std::env::current_exe().ok()?;
    let mut candidates = Vec::new();
    for dir in exe.ancestors().skip(1) {
        for profile in ["release", "debug"] {
            candidates.push(dir.join("x86_64-unknown-linux-gnu").join(profile).join("kairon-agent"));
        }
    }
    candidates.push(exe.with_file_name("kairon-agent"));
    candidates.push(PathBuf::from("/usr/lib/kairon/kairon-agent"));
    candidates.into_iter().find(|p| p.is_file() && is_static(p))
}

/// Builds the static guest agent from this binary's own source tree, as `scripts/build-agent`
/// does, so the start command alone gives VMs: with the source (a `cargo run` or a build from a
/// checkout) and cargo at hand, into the target directory this binary runs from. `NoAgent` when
/// neither is there (an installed binary: put the agent beside it or set `KAIRON_AGENT_BIN`).
async fn build_agent() -> Result<PathBuf, ImageError> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).ok_or(ImageError::NoAgent)?;
    if !workspace.join("agent/Cargo.toml").is_file() {
        return Err(ImageError::NoAgent);
    }
    // `<target>/<profile>/kairon` → `<target>`; otherwise cargo's own choice.
    let target_dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent().map(Path::to_path_buf))
        .filter(|dir| dir.join("CACHEDIR.TAG").is_file());
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    tracing::info!(workspace = %workspace.display(), "building the static guest agent for the VM image (about a minute the first time)");
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", "kairon-agent", "--release", "--locked", "--target", "x86_64-unknown-linux-gnu"])
        .current_dir(&workspace)
        // The explicit --target keeps the static flag off build scripts and proc macros.
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    if let Some(dir) = &target_dir {
        cmd.arg("--target-dir").arg(dir);
    }
    match cmd.stdin(Stdio::null()).output().await {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            return Err(ImageError::Build(format!(
                "building the guest agent failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        // No cargo here: the same advice as when no agent is found.
        Err(_) => return Err(ImageError::NoAgent),
    }
    find_agent().ok_or(ImageError::NoAgent)
}

/// No ELF interpreter means nothing to load at run time (a static or static-pie binary).
fn is_static(p: &Path) -> bool {
    let Ok(bytes) = std::fs::read(p) else { return false };
    bytes.starts_with(b"\x7fELF") && !bytes.windows(14).any(|w| w == b"/lib64/ld-linu")
}

/// Whether `dir` holds the default image as this recipe builds it.
pub fn is_current(dir: &Path) -> bool {
    let image = dir.join(format!("{DEFAULT_IMAGE}.qcow2"));
    image.is_file() && std::fs::read_to_string(image.with_extension("version")).is_ok_and(|v| v.trim() == IMAGE_VERSION)
}

/// The default image's path in `dir`, building it first if it is missing. Builds are
/// serialised by a lock file, so concurrent callers build it once.
pub async fn ensure_default_image(dir: &Path, progress: &Progress) -> Result<PathBuf, ImageError> {
    let image = dir.join(format!("{DEFAULT_IMAGE}.qcow2"));
    let current = || is_current(dir);
    if current() {
        return Ok(image);
    }
    std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    let lock_path = dir.join(format!(".{DEFAULT_IMAGE}.lock"));
    let lock = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
        let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path)?;
        rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)?;
        Ok(f)
    })
    .await
    .map_err(|e| ImageError::Build(e.to_string()))?
    .map_err(io("locking the image directory"))?;
    if current() {
        return Ok(image);
    }
    // Builds cut off earlier (their process died, so the lock is ours) leave their work dirs.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(".build-") {
                let _ = unmount_below(&e.path()).await;
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let work = dir.join(format!(".build-{}", uuid::Uuid::new_v4().simple()));
    let result = build(dir, &work, progress).await;
    let _ = unmount_below(&work).await;
    let _ = std::fs::remove_dir_all(&work);
    drop(lock);
    result.map(|()| image)
}

async fn run(what: &str, cmd: &mut Command) -> Result<String, ImageError> {
    let out = cmd.stdin(Stdio::null()).output().await.map_err(io(format!("running {what}")))?;
    if !out.status.success() {
        return Err(ImageError::Build(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

const APT_LISTS: &str = "/var/lib/apt/lists";

/// Whether apt has package lists (`*_Packages` files, compressed or not) in `lists`.
fn has_package_lists(lists: &Path) -> bool {
    std::fs::read_dir(lists)
        .map(|entries| entries.flatten().any(|e| e.file_name().to_string_lossy().contains("_Packages")))
        .unwrap_or(false)
}

/// Fetches apt's package lists when there are none: a node in Kairon's container image (a
/// debootstrap tree, which keeps no lists) finds its kernel package from the mirror apt is
/// configured with, as a host does.
async fn ensure_package_lists(lists: &Path) -> Result<(), ImageError> {
    if has_package_lists(lists) {
        return Ok(());
    }
    tracing::info!("apt has no package lists: running apt-get update to find the kernel package");
    run("apt-get update", Command::new("apt-get").args(["-q", "-o", "APT::Sandbox::User=root", "update"]))
        .await
        .map_err(|e| ImageError::Build(format!("{e} (the kernel comes from the mirror in /etc/apt/sources.list)")))?;
    if !has_package_lists(lists) {
        return Err(ImageError::Build(format!(
            "apt-get update left no package lists in {}: check /etc/apt/sources.list",
            lists.display()
        )));
    }
    Ok(())
}

async fn build(dir: &Path, work: &Path, progress: &Progress) -> Result<(), ImageError> {
    let agent = match find_agent() {
        Some(agent) => agent,
        None => build_agent().await?,
    };
    let busybox = PathBuf::from("/bin/busybox");
    std::fs::create_dir_all(work).map_err(io("creating the build directory"))?;
    tracing::info!(dir = %dir.display(), "building the default VM image {DEFAULT_IMAGE}");

    // The kernel: the package the meta-package points at, unpacked.
    ensure_package_lists(Path::new(APT_LISTS)).await?;
    let deps = run("apt-cache depends", Command::new("apt-cache").args(["depends", KERNEL_PACKAGE]))
        .await
        .map_err(|e| ImageError::Build(format!("{e} (are apt's package lists current? run apt-get update)")))?;
    let package = deps
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends:"))
        .map(str::trim)
        .find(|p| p.starts_with("linux-image-"))
        .ok_or_else(|| ImageError::Build(format!("{KERNEL_PACKAGE} depends on no linux-image package")))?
        .to_string();
    let debs = work.join("debs");
    std::fs::create_dir_all(&debs).map_err(io("creating the download directory"))?;
    run(
        "apt-get download",
        Command::new("apt-get").args(["-q", "-o", "APT::Sandbox::User=root", "download", &package]).current_dir(&debs),
    )
    .await?;
    let deb = std::fs::read_dir(&debs)
        .map_err(io("reading the download directory"))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or_else(|| ImageError::Build(format!("apt-get download {package} left no .deb")))?;
    let kpkg = work.join("kernel");
    run("dpkg-deb -x", Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&kpkg)).await?;
    let release = package.trim_start_matches("linux-image-").to_string();
    let vmlinuz = kpkg.join("boot").join(format!("vmlinuz-{release}"));
    let modules = kpkg.join("lib/modules").join(&release).join("kernel");
    if !vmlinuz.is_file() {
        return Err(ImageError::Build(format!("{package} has no boot/vmlinuz-{release}")));
    }

    // The initrd.
    let mut files: Vec<(String, Vec<u8>, u32)> = Vec::new();
    files.push(("init".into(), INIT_SCRIPT.as_bytes().to_vec(), 0o100755));
    files.push(("bin/busybox".into(), std::fs::read(&busybox).map_err(io("reading /bin/busybox"))?, 0o100755));
    for m in MODULES {
        let path =
            find_module(&modules, m).ok_or_else(|| ImageError::Build(format!("module {m}.ko is not in {package}")))?;
        files.push((format!("lib/modules/{m}.ko"), std::fs::read(&path).map_err(io("reading a module"))?, 0o100644));
    }
    let initrd = work.join("initrd");
    std::fs::write(&initrd, cpio(&files)).map_err(io("writing the initrd"))?;

    // The root filesystem.
    let rootfs = work.join("rootfs");
    crate::oci::debian::bootstrap(&rootfs, PACKAGES, progress).await.map_err(|e| ImageError::Build(e.to_string()))?;
    let put = |rel: &str, data: &[u8], mode: u32| -> Result<(), ImageError> {
        let p = rootfs.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
        }
        let _ = std::fs::remove_file(&p);
        std::fs::write(&p, data).map_err(io(format!("writing {}", p.display())))?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).map_err(io("setting a mode"))
    };
    put("usr/sbin/kairon-agent", &std::fs::read(&agent).map_err(io(format!("reading {}", agent.display())))?, 0o755)?;
    put("usr/lib/kairon/busybox", &std::fs::read(&busybox).map_err(io("reading /bin/busybox"))?, 0o755)?;
    put("etc/hostname", b"kairon\n", 0o644)?;
    put("etc/hosts", b"127.0.0.1 localhost\n::1 localhost\n", 0o644)?;
    put("etc/fstab", b"/dev/vda / ext4 rw,noatime 0 1\n", 0o644)?;
    put("etc/machine-id", b"", 0o444)?;
    std::fs::create_dir_all(rootfs.join("etc/dropbear")).map_err(io("creating /etc/dropbear"))?;
    // No init system: qemu-ga's guest-shutdown runs /sbin/shutdown, which minbase lacks.
    for cmd in ["usr/sbin/shutdown", "usr/sbin/poweroff"] {
        if std::fs::symlink_metadata(rootfs.join(cmd)).is_err() {
            put(cmd, POWEROFF_SCRIPT.as_bytes(), 0o755)?;
        }
    }
    // The root account logs in without a password on the console only (SSH needs a key).
    let shadow = std::fs::read_to_string(rootfs.join("etc/shadow")).unwrap_or_default();
    let shadow: String = shadow
        .lines()
        .map(|l| match l.strip_prefix("root:*:").or_else(|| l.strip_prefix("root:!:")) {
            Some(rest) => format!("root::{rest}\n"),
            None => format!("{l}\n"),
        })
        .collect();
    put("etc/shadow", shadow.as_bytes(), 0o640)?;
    // Services the packages would start under systemd never run here; no need for their units.
    let _ = std::fs::remove_dir_all(rootfs.join("usr/share/doc"));
    let _ = std::fs::remove_dir_all(rootfs.join("usr/share/man"));
    let _ = std::fs::remove_dir_all(rootfs.join("usr/share/locale"));

    let raw = work.join("root.ext4");
    run(
        "mke2fs",
        Command::new("mke2fs")
            .args(["-q", "-F", "-t", "ext4", "-L", "kairon-root", "-d"])
            .arg(&rootfs)
            .arg(&raw)
            .arg(DISK_SIZE),
    )
    .await?;
    let qcow = work.join("root.qcow2");
    run(
        "qemu-img convert",
        Command::new("qemu-img").args(["convert", "-q", "-f", "raw", "-O", "qcow2"]).arg(&raw).arg(&qcow),
    )
    .await?;
    let _ = std::fs::remove_file(&raw);

    // The qcow2 last: its presence says the set is complete.
    let base = dir.join(DEFAULT_IMAGE);
    std::fs::copy(&vmlinuz, base.with_extension("vmlinuz")).map_err(io("installing the kernel"))?;
    std::fs::rename(&initrd, base.with_extension("initrd")).map_err(io("installing the initrd"))?;
    // A QEMU already running from an older image keeps its open file; the new one replaces
    // the name.
    std::fs::rename(&qcow, base.with_extension("qcow2")).map_err(io("installing the image"))?;
    std::fs::write(base.with_extension("version"), IMAGE_VERSION).map_err(io("writing the image version"))?;
    tracing::info!(image = %base.with_extension("qcow2").display(), "the default VM image is ready");
    Ok(())
}

fn find_module(root: &Path, name: &str) -> Option<PathBuf> {
    let file = format!("{name}.ko");
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).ok()?.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if e.file_name().to_string_lossy() == file {
                return Some(p);
            }
        }
    }
    None
}

/// debootstrap may leave mounts (proc, sys) below the work dir when it fails.
async fn unmount_below(dir: &Path) -> std::io::Result<()> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")?;
    let dir = dir.to_string_lossy().to_string();
    let mut points: Vec<&str> =
        mounts.lines().filter_map(|l| l.split(' ').nth(1)).filter(|p| p.starts_with(&dir)).collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in points {
        let _ = Command::new("umount").arg("-l").arg(p).output().await;
    }
    Ok(())
}

/// `shutdown`/`poweroff` for an image without an init system: sync, then power off at once.
const POWEROFF_SCRIPT: &str = "#!/bin/sh\n# Kairon's test image has no init system: power off at once, after a sync.\nsync\nexec /usr/lib/kairon/busybox poweroff -f\n";

/// The initrd's /init: load the virtio drivers, mount the root disk, hand over to the agent.
const INIT_SCRIPT: &str = r#"#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /newroot /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in virtio_ring virtio virtio_mmio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_blk failover net_failover virtio_net virtio_console virtio-rng; do
  insmod /lib/modules/$m.ko 2>/dev/null
done
root=/dev/vda
init=/usr/sbin/kairon-agent
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    root=*) root="${arg#root=}" ;;
    init=*) init="${arg#init=}" ;;
  esac
done
i=0
while [ ! -b "$root" ] && [ $i -lt 1000 ]; do usleep 10000; i=$((i+1)); done
if ! mount -t ext4 -o rw,noatime "$root" /newroot; then
  echo "kairon initrd: cannot mount $root"
  poweroff -f
fi
mount --move /dev /newroot/dev
umount /proc /sys
exec switch_root /newroot "$init"
"#;

/// A newc cpio archive of regular files (parent directories are added), with /dev/console.
fn cpio(files: &[(String, Vec<u8>, u32)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ino = 1u32;
    let mut entry = |out: &mut Vec<u8>, name: &str, mode: u32, data: &[u8], rdev: (u32, u32)| {
        let namez = name.len() + 1;
        let header = format!(
            "070701{ino:08X}{mode:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{namez:08X}{:08X}",
            0,
            0,
            1,
            0,
            data.len(),
            0,
            0,
            rdev.0,
            rdev.1,
            0
        );
        ino += 1;
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
        out.extend_from_slice(data);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
    };
    let mut dirs: Vec<String> = vec!["dev".into(), "proc".into(), "sys".into(), "newroot".into()];
    for (name, _, _) in files {
        let mut p = Path::new(name).parent();
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
            dirs.push(d.to_string_lossy().into_owned());
            p = d.parent();
        }
    }
    dirs.sort();
    dirs.dedup();
    for d in &dirs {
        entry(&mut out, d, 0o040755, &[], (0, 0));
    }
    entry(&mut out, "dev/console", 0o020600, &[], (5, 1));
    for (name, data, mode) in files {
        entry(&mut out, name, *mode, data, (0, 0));
    }
    entry(&mut out, "TRAILER!!!", 0, &[], (0, 0));
    let _ = out.flush();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_lists_are_the_packages_files() {
        let lists = tempfile::tempdir().unwrap();
        assert!(!has_package_lists(lists.path()));
        assert!(!has_package_lists(&lists.path().join("missing")));
        // What a debootstrap tree keeps: a lock and an empty partial/.
        std::fs::write(lists.path().join("lock"), "").unwrap();
        std::fs::create_dir(lists.path().join("partial")).unwrap();
        assert!(!has_package_lists(lists.path()));
        let packages = lists.path().join("deb.debian.org_debian_dists_trixie_main_binary-amd64_Packages.lz4");
        std::fs::write(&packages, "").unwrap();
        assert!(has_package_lists(lists.path()), "compressed, as apt keeps them on this machine");
        std::fs::rename(&packages, packages.with_extension("")).unwrap();
        assert!(has_package_lists(lists.path()));
    }
}
