//! The builtin python template: a minimal Debian root filesystem with python3, made by
//! `debootstrap --variant=minbase --include=python3-minimal,python3-pip` from the Debian mirror and release
//! the machine's apt is configured with (`KAIRON_DEBIAN_MIRROR` / `KAIRON_DEBIAN_SUITE`
//! override them). No host name is built in.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};

use super::Progress;
use crate::api::ImageConfig;

/// Overrides the mirror read from apt's configuration (e.g. `http://deb.debian.org/debian`).
pub const MIRROR_ENV: &str = "KAIRON_DEBIAN_MIRROR";
/// Overrides the release read from apt's configuration (e.g. `bookworm`).
pub const SUITE_ENV: &str = "KAIRON_DEBIAN_SUITE";

/// What a finished minbase + python3-minimal + python3-pip tree weighs, downloaded packages
/// included (they are removed only at the end); `bytes_total` while debootstrap runs.
pub const ESTIMATED_BYTES: u64 = 300_000_000;

const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const HOSTNAME: &str = "localhost\n";
const SOURCES_D: &str = "/etc/apt/sources.list.d";
const SOURCES_LIST: &str = "/etc/apt/sources.list";
const PROGRESS_EVERY: Duration = Duration::from_millis(500);
/// Lines of each debootstrap log quoted in an error.
const TAIL_LINES: usize = 20;

#[derive(thiserror::Error, Debug)]
pub enum DebianError {
    #[error("debootstrap not found (looked in PATH, /usr/sbin and /sbin): install the debootstrap package")]
    MissingDebootstrap,
    #[error(
        "no Debian {missing} found in {SOURCES_D}/*.sources, {SOURCES_D}/*.list or {SOURCES_LIST} (an entry \
         with component main for a release suite): set {MIRROR_ENV} and {SUITE_ENV}"
    )]
    NoSource { missing: &'static str },
    #[error("{rootfs} is not empty: debootstrap needs a missing or empty directory")]
    NotEmpty { rootfs: String },
    #[error("debootstrap of {suite} from {mirror} failed ({status}); full output in {log}; last lines:\n{tail}")]
    Debootstrap { suite: String, mirror: String, status: String, log: String, tail: String },
    #[error("debootstrap succeeded but {0} is missing")]
    NoPython(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

impl DebianError {
    fn io(context: impl Into<String>, source: io::Error) -> Self {
        DebianError::Io { context: context.into(), source }
    }
}

/// Builds a Debian root filesystem with python3 and pip (an agent's first command) in `rootfs` (created if missing; must be empty)
/// with debootstrap, its output going to `debootstrap.log` beside `rootfs`. While it runs,
/// `progress.bytes_total` is [`ESTIMATED_BYTES`] and `bytes_done` the tree's current size (capped
/// at the estimate, sampled every 500 ms); once done both are the final size. Downloaded packages
/// and apt lists are removed, `/tmp` is 1777 and `/etc/hostname` is neutral. Returns the image
/// config to run python3.
///
/// If the future is dropped while debootstrap runs, debootstrap's process group is killed and
/// the mounts it made under `rootfs` are detached, so the caller can remove the directory. On any
/// error the rootfs may hold part of the system: the caller removes it.
pub async fn build_python_rootfs(rootfs: &Path, progress: &Progress) -> Result<ImageConfig, DebianError> {
    bootstrap(rootfs, &["python3-minimal", "python3-pip"], progress).await?;
    let python = rootfs.join("usr/bin/python3");
    if fs::symlink_metadata(&python).is_err() {
        return Err(DebianError::NoPython(python.display().to_string()));
    }
    Ok(ImageConfig {
        cmd: vec!["/usr/bin/python3".into()],
        env: vec![PATH_ENV.into(), "LANG=C.UTF-8".into()],
        working_dir: Some("/root".into()),
        ..ImageConfig::default()
    })
}

/// [`build_python_rootfs`] with any packages: `debootstrap --variant=minbase --include=…` from
/// the configured mirror, then the same clean-up.
pub async fn bootstrap(rootfs: &Path, include: &[&str], progress: &Progress) -> Result<(), DebianError> {
    let debootstrap = find_debootstrap().ok_or(DebianError::MissingDebootstrap)?;
    let (mirror, suite) = configured_source()?;
    prepare_rootfs(rootfs)?;
    let log_path = log_path(rootfs);
    let log =
        fs::File::create(&log_path).map_err(|e| DebianError::io(format!("creating {}", log_path.display()), e))?;
    let log2 = log.try_clone().map_err(|e| DebianError::io(format!("opening {}", log_path.display()), e))?;

    progress.bytes_done.store(0, Ordering::Relaxed);
    progress.bytes_total.store(ESTIMATED_BYTES, Ordering::Relaxed);
    tracing::info!(rootfs = %rootfs.display(), %suite, %mirror, log = %log_path.display(), "debootstrapping a Debian root filesystem");
    let started = Instant::now();

    let mut child = tokio::process::Command::new(&debootstrap)
        .arg("--variant=minbase")
        .arg(format!("--include={}", include.join(",")))
        .arg(&suite)
        .arg(rootfs)
        .arg(&mirror)
        .env("PATH", search_path())
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log2))
        // Its own group, so an abandoned build can kill dpkg and friends along with it.
        .process_group(0)
        .spawn()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => DebianError::MissingDebootstrap,
            _ => DebianError::io(format!("running {}", debootstrap.display()), e),
        })?;
    let mut guard = Cleanup {
        group: child.id().and_then(|id| i32::try_from(id).ok()).and_then(Pid::from_raw),
        rootfs: rootfs.to_path_buf(),
    };

    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = tick.tick() => {
                let root = rootfs.to_path_buf();
                if let Ok(size) = tokio::task::spawn_blocking(move || tree_size(&root)).await {
                    progress.bytes_done.fetch_max(size.min(ESTIMATED_BYTES), Ordering::Relaxed);
                }
            }
        }
    };
    // Reaped (or lost): the group id is no longer ours to signal.
    guard.group = None;
    drop(guard);
    let status = status.map_err(|e| DebianError::io(format!("waiting for {}", debootstrap.display()), e))?;
    if !status.success() {
        return Err(DebianError::Debootstrap {
            suite,
            mirror,
            status: status.to_string(),
            log: log_path.display().to_string(),
            tail: failure_tail(&log_path, rootfs),
        });
    }

    let root = rootfs.to_path_buf();
    let size = tokio::task::spawn_blocking(move || finish(&root))
        .await
        .map_err(|e| DebianError::io("finishing the rootfs", io::Error::other(e)))??;
    progress.bytes_total.store(size, Ordering::Relaxed);
    progress.bytes_done.store(size, Ordering::Relaxed);
    tracing::info!(rootfs = %rootfs.display(), bytes = size, seconds = started.elapsed().as_secs_f64(), "Debian root filesystem built");
    Ok(())
}

/// The Debian mirror and release to bootstrap from, out of apt's sources: the first deb822
/// entry (`sources_d_texts`, the `*.sources` files in order) of type `deb` whose Components
/// include `main`, with its first URI and its first suite that is not -updates, -security,
/// -backports or -proposed-updates; failing that the first such `deb URI SUITE main…` line of
/// `sources_list` (one-line format, `[options]` allowed). Only http, https, ftp and file URIs
/// count (what debootstrap can fetch from); a trailing slash is dropped.
pub fn apt_source(sources_d_texts: &[String], sources_list: &str) -> Option<(String, String)> {
    sources_d_texts.iter().find_map(|text| deb822_source(text)).or_else(|| one_line_source(sources_list))
}

fn deb822_source(text: &str) -> Option<(String, String)> {
    stanzas(text).into_iter().find_map(|fields| {
        let get = |name: &str| {
            fields.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).unwrap_or("")
        };
        let words = |name: &str| get(name).split_whitespace().collect::<Vec<_>>();
        if get("Enabled").trim().eq_ignore_ascii_case("no")
            || !words("Types").contains(&"deb")
            || !words("Components").contains(&"main")
        {
            return None;
        }
        let uri = words("URIs").into_iter().find(|u| usable_uri(u))?;
        let suite = words("Suites").into_iter().find(|s| release_suite(s))?;
        Some((uri.trim_end_matches('/').to_string(), suite.to_string()))
    })
}

/// deb822 paragraphs as (field, value) lists: blank lines separate them, `#` lines are comments,
/// lines starting with white space continue the previous field.
fn stanzas(text: &str) -> Vec<Vec<(String, String)>> {
    let mut all = Vec::new();
    let mut current: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            if !current.is_empty() {
                all.push(std::mem::take(&mut current));
            }
        } else if line.starts_with('#') {
            continue;
        } else if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = current.last_mut() {
                value.push(' ');
                value.push_str(line.trim());
            }
        } else if let Some((name, value)) = line.split_once(':') {
            current.push((name.trim().to_string(), value.trim().to_string()));
        }
    }
    if !current.is_empty() {
        all.push(current);
    }
    all
}

fn one_line_source(text: &str) -> Option<(String, String)> {
    text.lines().find_map(|line| {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        if words.next() != Some("deb") {
            return None;
        }
        let mut uri = words.next()?;
        if uri.starts_with('[') {
            // Options: `[arch=amd64 signed-by=…]`, possibly spread over several words.
            while !uri.ends_with(']') {
                uri = words.next()?;
            }
            uri = words.next()?;
        }
        let suite = words.next()?;
        let main = words.any(|c| c == "main");
        (main && usable_uri(uri) && release_suite(suite))
            .then(|| (uri.trim_end_matches('/').to_string(), suite.to_string()))
    })
}

fn usable_uri(uri: &str) -> bool {
    ["http://", "https://", "ftp://", "file:/"].iter().any(|scheme| uri.starts_with(scheme))
}

/// A suite debootstrap can build a system from: not an update or backport pocket, and not a
/// flat-repository path.
fn release_suite(suite: &str) -> bool {
    const POCKETS: [&str; 4] = ["-updates", "-security", "-backports", "-proposed-updates"];
    !suite.is_empty() && !suite.contains('/') && !POCKETS.iter().any(|p| suite.ends_with(p))
}

/// Mirror and suite: the environment's overrides, else apt's configuration.
pub fn configured_source() -> Result<(String, String), DebianError> {
    let env = |name: &str| std::env::var(name).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let (mirror, suite) = (env(MIRROR_ENV), env(SUITE_ENV));
    if let (Some(mirror), Some(suite)) = (&mirror, &suite) {
        return Ok((mirror.clone(), suite.clone()));
    }
    let (deb822, one_line) = read_apt_sources();
    let apt = apt_source(&deb822, &one_line);
    let mirror = mirror.or_else(|| apt.as_ref().map(|(m, _)| m.clone()));
    let suite = suite.or_else(|| apt.map(|(_, s)| s));
    match (mirror, suite) {
        (Some(mirror), Some(suite)) => Ok((mirror, suite)),
        (None, _) => Err(DebianError::NoSource { missing: "mirror" }),
        (_, None) => Err(DebianError::NoSource { missing: "suite" }),
    }
}

/// The `*.sources` files of sources.list.d in name order, and the one-line sources
/// (sources.list, then sources.list.d/*.list) as one text. Unreadable files are skipped.
fn read_apt_sources() -> (Vec<String>, String) {
    let mut files: Vec<PathBuf> =
        fs::read_dir(SOURCES_D).map(|dir| dir.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    files.sort();
    let read = |path: &Path| match fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) => {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!(path = %path.display(), error = %e, "skipping unreadable apt source file");
            }
            None
        }
    };
    let with_ext = |ext: &'static str| files.iter().filter(move |p| p.extension().is_some_and(|x| x == ext));
    let deb822 = with_ext("sources").filter_map(|p| read(p)).collect();
    let mut one_line = read(Path::new(SOURCES_LIST)).unwrap_or_default();
    for text in with_ext("list").filter_map(|p| read(p)) {
        one_line.push('\n');
        one_line.push_str(&text);
    }
    (deb822, one_line)
}

/// debootstrap lives in /usr/sbin, which a non-login PATH may lack.
fn find_debootstrap() -> Option<PathBuf> {
    std::env::split_paths(&search_path())
        .map(|dir| dir.join("debootstrap"))
        .find(|path| fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// PATH with the sbin directories debootstrap and the tools it calls (chroot, mknod) live in.
fn search_path() -> std::ffi::OsString {
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    for dir in ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
        if !dirs.iter().any(|d| d == Path::new(dir)) {
            dirs.push(PathBuf::from(dir));
        }
    }
    std::env::join_paths(dirs).unwrap_or_else(|_| "/usr/sbin:/usr/bin:/sbin:/bin".into())
}

fn prepare_rootfs(rootfs: &Path) -> Result<(), DebianError> {
    fs::create_dir_all(rootfs).map_err(|e| DebianError::io(format!("creating rootfs {}", rootfs.display()), e))?;
    let mut entries = fs::read_dir(rootfs).map_err(|e| DebianError::io(format!("reading {}", rootfs.display()), e))?;
    if entries.next().is_some() {
        return Err(DebianError::NotEmpty { rootfs: rootfs.display().to_string() });
    }
    Ok(())
}

/// `<rootfs>/../debootstrap.log`.
fn log_path(rootfs: &Path) -> PathBuf {
    match rootfs.parent() {
        Some(p) if p.as_os_str().is_empty() => PathBuf::from("debootstrap.log"),
        Some(p) => p.join("debootstrap.log"),
        None => PathBuf::from("/debootstrap.log"),
    }
}

/// The end of debootstrap's output, and of the log it keeps inside the target (where the
/// output of a failing dpkg or apt ends up).
fn failure_tail(log: &Path, rootfs: &Path) -> String {
    let mut out = tail(&fs::read(log).unwrap_or_default(), TAIL_LINES);
    let inner = rootfs.join("debootstrap/debootstrap.log");
    if let Ok(bytes) = fs::read(&inner) {
        out.push_str(&format!("\n--- {}:\n{}", inner.display(), tail(&bytes, TAIL_LINES)));
    }
    out
}

fn tail(bytes: &[u8], lines: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Bytes of regular files under `root`, symlinks not followed and other file systems (the
/// /proc and /sys debootstrap mounts in the target) not entered. Entries that vanish while
/// debootstrap works are skipped.
fn tree_size(root: &Path) -> u64 {
    let Ok(meta) = fs::symlink_metadata(root) else {
        return 0;
    };
    let dev = meta.dev();
    let mut total: u64 = 0;
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            // DirEntry::metadata does not follow symlinks.
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.is_dir() && meta.dev() == dev {
                dirs.push(entry.path());
            } else if meta.is_file() {
                total = total.saturating_add(meta.len());
            }
        }
    }
    total
}

/// The touches after debootstrap: drop downloaded packages and apt lists, fix /tmp, write
/// /etc/hostname (debootstrap copied the host's). Returns the final size.
fn finish(rootfs: &Path) -> Result<u64, DebianError> {
    clear_dir(&rootfs.join("var/cache/apt/archives"), |name| name.ends_with(".deb"))?;
    clear_dir(&rootfs.join("var/lib/apt/lists"), |_| true)?;

    let tmp = rootfs.join("tmp");
    match fs::symlink_metadata(&tmp) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => fs::remove_file(&tmp).and_then(|()| fs::create_dir(&tmp)),
        Err(_) => fs::create_dir(&tmp),
    }
    .map_err(|e| DebianError::io(format!("creating {}", tmp.display()), e))?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o1777))
        .map_err(|e| DebianError::io(format!("setting mode of {}", tmp.display()), e))?;

    let hostname = rootfs.join("etc/hostname");
    match fs::remove_file(&hostname) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            return Err(DebianError::io(format!("removing {}", hostname.display()), e));
        }
        _ => {}
    }
    fs::write(&hostname, HOSTNAME).map_err(|e| DebianError::io(format!("writing {}", hostname.display()), e))?;
    fs::set_permissions(&hostname, fs::Permissions::from_mode(0o644))
        .map_err(|e| DebianError::io(format!("setting mode of {}", hostname.display()), e))?;
    Ok(tree_size(rootfs))
}

/// Removes the entries of `dir` whose names pass `pick` (directories with their contents).
/// A missing `dir`, or one that is a symlink, is left alone.
fn clear_dir(dir: &Path, pick: impl Fn(&str) -> bool) -> Result<(), DebianError> {
    if !fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    let entries = fs::read_dir(dir).map_err(|e| DebianError::io(format!("reading {}", dir.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| DebianError::io(format!("reading {}", dir.display()), e))?;
        if !pick(&entry.file_name().to_string_lossy()) {
            continue;
        }
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let removed = if is_dir { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
        removed.map_err(|e| DebianError::io(format!("removing {}", path.display()), e))?;
    }
    Ok(())
}

/// While armed with a group: kills debootstrap's process group (the build was abandoned).
/// Always: detaches mounts left under the rootfs (debootstrap unmounts its /proc and /sys only
/// when it exits on its own).
struct Cleanup {
    group: Option<Pid>,
    rootfs: PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            tracing::warn!(rootfs = %self.rootfs.display(), "python template build abandoned: killing debootstrap");
            let _ = kill_process_group(group, Signal::KILL);
        }
        release_mounts(&self.rootfs);
    }
}

fn release_mounts(rootfs: &Path) {
    let (Ok(root), Ok(mountinfo)) = (fs::canonicalize(rootfs), fs::read_to_string("/proc/self/mountinfo")) else {
        return;
    };
    for mount in mounts_under(&mountinfo, &root) {
        tracing::warn!(mount = %mount.display(), "detaching a mount debootstrap left behind");
        let result = std::process::Command::new("umount").arg("--lazy").arg(&mount).env("PATH", search_path()).output();
        match result {
            Ok(out) if out.status.success() => {}
            Ok(out) => tracing::warn!(
                mount = %mount.display(),
                error = %String::from_utf8_lossy(&out.stderr).trim(),
                "umount failed"
            ),
            Err(e) => tracing::warn!(mount = %mount.display(), error = %e, "cannot run umount"),
        }
    }
}

/// Mount points strictly below `root` in a /proc/self/mountinfo text, deepest first.
fn mounts_under(mountinfo: &str, root: &Path) -> Vec<PathBuf> {
    let mut mounts: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape_mountinfo(field)))
        .filter(|path| path != root && path.starts_with(root))
        .collect();
    mounts.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    mounts.dedup();
    mounts
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal escapes.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                let value = u32::from(d[0] - b'0') * 64 + u32::from(d[1] - b'0') * 8 + u32::from(d[2] - b'0');
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /etc/apt/sources.list.d/debian.sources of this kind of machine (Debian's container image).
    const MACHINE_SOURCES: &str = "\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
";

    fn pair(mirror: &str, suite: &str) -> Option<(String, String)> {
        Some((mirror.to_string(), suite.to_string()))
    }

    #[test]
    fn machine_deb822_file_gives_the_main_archive_and_release() {
        assert_eq!(apt_source(&[MACHINE_SOURCES.to_string()], ""), pair("http://deb.debian.org/debian", "bookworm"));
    }

    #[test]
    fn deb822_skips_security_updates_src_disabled_and_non_main_entries() {
        let text = "\
Types: deb
URIs: http://security.example/debian-security
Suites: trixie-security
Components: main

Types: deb-src
URIs: http://src.example/debian
Suites: trixie
Components: main

Enabled: no
Types: deb
URIs: http://off.example/debian
Suites: trixie
Components: main

Types: deb
URIs: http://contrib.example/debian
Suites: trixie
Components: contrib non-free

types: deb deb-src
uris: mirror+file:/etc/apt/mirrors.txt
  https://mirror.example/debian/
suites: trixie-updates
  trixie trixie-backports
components: main contrib
";
        assert_eq!(apt_source(&[text.to_string()], ""), pair("https://mirror.example/debian", "trixie"));
    }

    #[test]
    fn deb822_files_are_tried_in_order_before_sources_list() {
        let security_only =
            "Types: deb\nURIs: http://a.example/debian-security\nSuites: bookworm-security\nComponents: main\n";
        let second = "Types: deb\nURIs: http://b.example/debian\nSuites: bookworm\nComponents: main\n";
        let list = "deb http://c.example/debian bookworm main\n";
        let files = [security_only.to_string(), second.to_string()];
        assert_eq!(apt_source(&files, list), pair("http://b.example/debian", "bookworm"));
        assert_eq!(apt_source(&[security_only.to_string()], list), pair("http://c.example/debian", "bookworm"));
    }

    #[test]
    fn one_line_format() {
        let list = "\
# deb http://commented.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb http://security.debian.org/debian-security bookworm-security main
deb http://deb.example/debian bookworm-updates main contrib
deb http://deb.example/debian bookworm contrib
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.example/debian/ bookworm main contrib # trailing
";
        assert_eq!(apt_source(&[], list), pair("http://deb.example/debian", "bookworm"));
        assert_eq!(
            apt_source(&[], "deb [ arch=amd64 ] https://x.example/debian trixie main"),
            pair("https://x.example/debian", "trixie")
        );
        assert_eq!(apt_source(&[], "deb cdrom:[Debian]/ bookworm main"), None);
        assert_eq!(apt_source(&[], "deb http://x.example/debian bookworm"), None);
        assert_eq!(apt_source(&[], ""), None);
    }

    #[test]
    fn nothing_usable_is_none() {
        let text = "Types: deb\nURIs: http://x.example/debian-security\nSuites: bookworm-security\nComponents: main\n";
        assert_eq!(apt_source(&[text.to_string(), String::new()], "# nothing\n"), None);
    }

    #[test]
    fn mounts_below_the_rootfs_deepest_first() {
        let info = "\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
90 22 0:5 / /srv/t/rootfs rw - ext4 /dev/vdb rw
91 90 0:21 / /srv/t/rootfs/proc rw,relatime - proc proc rw
92 90 0:22 / /srv/t/rootfs/sys rw,relatime - sysfs sysfs rw
93 92 0:23 / /srv/t/rootfs/sys/fs/cgroup rw - tmpfs tmpfs rw
94 22 0:24 / /srv/t/rootfs2/proc rw - proc proc rw
95 22 0:25 / /srv/t/rootfs/my\\040dir rw - tmpfs tmpfs rw
";
        let got = mounts_under(info, Path::new("/srv/t/rootfs"));
        assert_eq!(got[0], PathBuf::from("/srv/t/rootfs/sys/fs/cgroup"));
        let mut rest: Vec<_> = got[1..].to_vec();
        rest.sort();
        assert_eq!(
            rest,
            ["/srv/t/rootfs/my dir", "/srv/t/rootfs/proc", "/srv/t/rootfs/sys"].map(PathBuf::from).to_vec()
        );
    }

    #[test]
    fn tail_keeps_the_last_non_empty_lines() {
        assert_eq!(tail(b"a\nb\n\nc\nd\n", 2), "c\nd");
        assert_eq!(tail(b"only\n", 5), "only");
        assert_eq!(tail(b"", 5), "");
    }

    #[test]
    fn tree_size_counts_files_not_symlink_targets() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::create_dir(dir.path().join("sub")).expect("mkdir");
        fs::write(dir.path().join("a"), [0u8; 100]).expect("write");
        fs::write(dir.path().join("sub/b"), [0u8; 20]).expect("write");
        std::os::unix::fs::symlink("/usr", dir.path().join("link")).expect("symlink");
        assert_eq!(tree_size(dir.path()), 120);
        assert_eq!(tree_size(&dir.path().join("missing")), 0);
    }

    #[test]
    fn log_sits_beside_the_rootfs() {
        assert_eq!(log_path(Path::new("/s/templates/py/rootfs")), PathBuf::from("/s/templates/py/debootstrap.log"));
        assert_eq!(log_path(Path::new("rootfs")), PathBuf::from("debootstrap.log"));
    }
}
