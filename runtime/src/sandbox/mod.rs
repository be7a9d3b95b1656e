//! The sandbox backend: each sandbox is an OCI bundle run by `runc` in its own user namespace,
//! on an overlay of its template's root filesystem whose writable layer lives on the sandbox's
//! own size-limited disk. Pause and resume go through the cgroup freezer; exec through the agent
//! that is each sandbox's init (see `agent`; `runc exec` where a sandbox runs without it),
//! background processes through `runc exec`; files through the root filesystem (see `fs`).
//!
//! What the runtime (root) keeps for a sandbox and where — nothing it reads back lives where the
//! guest can write, except exit codes, which are read without following symlinks:
//!
//! ```text
//! <state>/instances/<id>/            0700 root: vm.json, config.json, runc.log, pid files,
//!                                    idmap.json (the id range it runs with), agent.sock (the
//!                                    listening socket handed to the sandbox's agent)
//!   disk.img                         the sandbox's disk: a sparse ext4 image of the disk limit
//!   disk/                            its mount point (loop): everything below counts to the limit
//!     upper/ work/                   the overlay's writable layer (owned by guest root)
//!     procs/                         guest-writable, /.kairon/procs inside: <pid>.exit files
//!     host/                          0700 root, never mounted in the guest: console.log and,
//!                                    per background process, process.json, host.pid, stdout,
//!                                    stderr (the guest holds only the open stdout/stderr fds)
//! /run/kairon/sandboxes/<id>         the merged root (its path must be searchable by guest
//!                                    root, which a state dir under /root is not)
//! ```

pub mod agent;
pub mod backend;
pub mod fs;
pub mod idmap;
pub mod layer;
pub mod spec;

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use rustix::fs::{AtFlags, Gid, Mode, OFlags, ResolveFlags, Uid};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use idmap::IdMap;

use crate::api::{ExecRequest, ExecResult, ImageConfig, Process, ProcessState, Stats};
use kairon_runtime_api::types::LogChunk;

/// The `runc` processes started since this runtime started: in all, and for each sandbox (a
/// hot path that stays off runc keeps both still).
#[derive(Debug, Default)]
struct RuncCounts {
    total: AtomicU64,
    by_sandbox: std::sync::Mutex<std::collections::HashMap<String, u64>>,
}

impl RuncCounts {
    fn count(&self, id: &str) {
        self.total.fetch_add(1, Ordering::Relaxed);
        *self.sandboxes().entry(id.to_string()).or_default() += 1;
    }

    fn of(&self, id: &str) -> u64 {
        self.sandboxes().get(id).copied().unwrap_or(0)
    }

    fn forget(&self, id: &str) {
        self.sandboxes().remove(id);
    }

    fn sandboxes(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, u64>> {
        self.by_sandbox.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Longest a runc command may take before it counts as stuck.
const RUNC_TIMEOUT: Duration = Duration::from_secs(60);

/// The disk limit of a sandbox's writable layer and logs when nothing else is configured.
pub const DEFAULT_DISK_LIMIT: u64 = 2 << 30;
/// Overrides [`DEFAULT_DISK_LIMIT`]: bytes, or with a K, M, G (or Ki, Mi, Gi) suffix.
pub const DISK_LIMIT_ENV: &str = "KAIRON_SANDBOX_DISK_LIMIT";
/// Where the sandboxes' merged roots are mounted.
pub const ROOTS_DIR: &str = "/run/kairon/sandboxes";
/// The smallest disk ext4 makes sense on.
const MIN_DISK_LIMIT: u64 = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("runc {op} failed: {message}")]
    Runc { op: &'static str, message: String },
    #[error("{0}")]
    Setup(String),
    #[error("no background process {0:?} in this sandbox")]
    NoProcess(String),
    #[error("{0}")]
    StdinClosed(String),
    #[error("process {pid} is not in sandbox {id}: refusing to signal it")]
    NotInSandbox { pid: u32, id: String },
    /// The agent inside refused the request as asked (an unknown user, a missing working
    /// directory): the caller's to fix.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

type Result<T> = std::result::Result<T, SandboxError>;

/// Host-side settings for every sandbox of one node. The runc state root and the cgroup parent
/// are per node, so several node runtimes on one host never collide.
#[derive(Clone, Debug)]
pub struct SandboxHost {
    pub state_dir: PathBuf,
    pub runc_root: PathBuf,
    pub cgroup_parent: String,
    tools_dir: PathBuf,
    /// Size of each new sandbox's disk (writable layer and logs), in bytes.
    disk_limit: Arc<AtomicU64>,
    runc_counts: Arc<RuncCounts>,
    /// The agent once installed into the tools directory: the static build does not change
    /// under a running runtime, so it is copied (and compared) once, not at every start.
    agent: Arc<OnceLock<PathBuf>>,
    /// The write ends of background processes' kept-open stdins, by `<instance>/<pid>`. Only
    /// in memory: a restarted runtime has none, and those processes read end of file.
    stdins: Arc<Mutex<HashMap<String, Stdin>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One kept-open stdin; writes to it take turns.
type Stdin = Arc<tokio::sync::Mutex<tokio::net::unix::pipe::Sender>>;

/// How long a write to a process's stdin may wait for the process to read.
const STDIN_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// What an attached sandbox gets from the node's guest network: its resolver, and the CA
/// bundle when the node terminates TLS to inject credentials.
pub struct GuestNet {
    pub resolv_conf: PathBuf,
    pub ca_bundle: Option<PathBuf>,
}

/// What runc says about a container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuncState {
    pub status: String,
    pub pid: u32,
}

fn setup_err(what: impl std::fmt::Display) -> SandboxError {
    SandboxError::Setup(what.to_string())
}

impl SandboxHost {
    /// Prepares the node's sandbox directories and the tools every sandbox gets at /.kairon
    /// (the static `kairon-agent` as init, or a static tini where the agent is not at hand, and
    /// a static busybox for the process wrapper).
    pub fn new(state_dir: &Path, node: &str) -> Result<Self> {
        let tools_dir = state_dir.join("tools");
        std::fs::create_dir_all(&tools_dir)?;
        std::fs::create_dir_all(state_dir.join("instances"))?;
        for (src, name) in [("/usr/bin/tini-static", "tini"), ("/bin/busybox", "busybox")] {
            let dst = tools_dir.join(name);
            if !dst.exists() {
                std::fs::copy(src, &dst).map_err(|e| {
                    setup_err(format!("copying {src} (install the tini and busybox-static packages): {e}"))
                })?;
            }
        }
        std::fs::create_dir_all(tools_dir.join("procs"))?;
        // The merged roots: searchable (not listable) by the guests' unprivileged host ids.
        std::fs::DirBuilder::new().recursive(true).mode(0o711).create(ROOTS_DIR)?;
        for d in ["/run/kairon", ROOTS_DIR] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o711))?;
        }
        let disk_limit = match std::env::var(DISK_LIMIT_ENV) {
            Ok(v) if !v.trim().is_empty() => parse_size(&v)
                .filter(|&b| b >= MIN_DISK_LIMIT)
                .ok_or_else(|| setup_err(format!("{DISK_LIMIT_ENV}={v:?}: give a size of at least 16M, e.g. 2G")))?,
            _ => DEFAULT_DISK_LIMIT,
        };
        Ok(SandboxHost {
            state_dir: state_dir.to_path_buf(),
            runc_root: state_dir.join("runc"),
            cgroup_parent: format!("kairon-{node}"),
            tools_dir,
            disk_limit: Arc::new(AtomicU64::new(disk_limit)),
            runc_counts: Arc::default(),
            agent: Arc::default(),
            stdins: Arc::default(),
        })
    }

    /// The agent in the tools directory, brought up to date from the static build
    /// ([`crate::vm::image::find_agent`]) when there is one: `kairon up` builds it at start, so
    /// sandboxes started before the build finishes run with tini and `runc exec`.
    fn tools_agent(&self) -> Option<PathBuf> {
        if let Some(installed) = self.agent.get() {
            return Some(installed.clone());
        }
        let dst = self.tools_dir.join(agent::BINARY);
        // Until the build is found, an agent a previous runtime installed serves.
        let Some(src) = crate::vm::image::find_agent() else { return dst.is_file().then_some(dst) };
        let fresh = std::fs::read(&src).ok()?;
        if std::fs::read(&dst).ok().as_ref() != Some(&fresh) {
            // A rename, so a sandbox starting meanwhile sees the old binary or the new, whole.
            // A temporary name of each call's own: sandboxes starting at once install it at
            // once (with one name, one's rename took the file from under the other's).
            let tmp = self.tools_dir.join(format!(".{}.{}", agent::BINARY, uuid::Uuid::new_v4().simple()));
            let copied = std::fs::write(&tmp, &fresh)
                .and_then(|()| std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)))
                .and_then(|()| std::fs::rename(&tmp, &dst));
            if let Err(e) = copied {
                tracing::warn!(error = %e, "installing the sandbox agent into {}", self.tools_dir.display());
                let _ = std::fs::remove_file(&tmp);
                return dst.is_file().then_some(dst);
            }
        }
        Some(self.agent.get_or_init(|| dst).clone())
    }

    /// Every `runc` process this host has started.
    pub fn runc_invocations(&self) -> u64 {
        self.runc_counts.total.load(Ordering::Relaxed)
    }

    /// The disk limit of sandboxes created from now on (their writable layer and logs).
    pub fn set_disk_limit(&self, bytes: u64) {
        self.disk_limit.store(bytes.max(MIN_DISK_LIMIT), Ordering::Relaxed);
    }

    pub fn disk_limit(&self) -> u64 {
        self.disk_limit.load(Ordering::Relaxed)
    }

    pub fn instance_dir(&self, id: &str) -> PathBuf {
        self.state_dir.join("instances").join(id)
    }

    /// The sandbox's root as the guest sees it (the merged overlay).
    pub fn rootfs(&self, id: &str) -> PathBuf {
        let legacy = self.instance_dir(id);
        if legacy.join("upper").is_dir() {
            // Made by a runtime before per-sandbox disks; still running from its old place.
            return legacy.join("rootfs");
        }
        Path::new(ROOTS_DIR).join(id)
    }

    fn disk_dir(&self, id: &str) -> PathBuf {
        self.instance_dir(id).join("disk")
    }

    /// The overlay's writable layer (what a fork copies).
    pub fn upper_dir(&self, id: &str) -> PathBuf {
        let legacy = self.instance_dir(id).join("upper");
        if legacy.is_dir() {
            return legacy;
        }
        self.disk_dir(id).join("upper")
    }

    /// The guest-writable directory seen as /.kairon/procs.
    fn guest_procs_dir(&self, id: &str) -> PathBuf {
        self.disk_dir(id).join("procs")
    }

    /// Host-only state of the sandbox that still counts to its disk (logs).
    fn host_dir(&self, id: &str) -> PathBuf {
        self.disk_dir(id).join("host")
    }

    /// The id range the sandbox runs with (recorded when it starts).
    pub fn idmap(&self, id: &str) -> Option<IdMap> {
        IdMap::load(&self.instance_dir(id))
    }

    /// Guest root as host ids: the owner of what the runtime writes into the sandbox.
    pub fn guest_root(&self, id: &str) -> Option<(u32, u32)> {
        self.idmap(id).map(|m| m.root())
    }

    fn cgroups_path(&self, id: &str) -> String {
        format!("/{}/{id}", self.cgroup_parent)
    }

    /// A `runc` command about sandbox `id` (counted for it).
    fn runc(&self, id: &str) -> Command {
        self.runc_counts.count(id);
        let mut c = Command::new("runc");
        c.arg("--root").arg(&self.runc_root);
        c
    }

    /// `runc run` for sandbox `id`, logging to `log`, as background work ([`yielding`]).
    fn runc_run(&self, id: &str, log: &Path) -> Command {
        self.runc_counts.count(id);
        let mut c = yielding("runc");
        c.arg("--root").arg(&self.runc_root).arg("--log").arg(log).args(["--log-format", "text", "run"]);
        c
    }

    async fn runc_ok(&self, op: &'static str, id: &str, args: &[&str]) -> Result<String> {
        // runc can block for good on a cgroup stuck FREEZING; a bounded wait turns that into an
        // error the caller sees instead of a request that never answers.
        let run = self.runc(id).args(args).stdin(Stdio::null()).kill_on_drop(true).output();
        let out = match tokio::time::timeout(RUNC_TIMEOUT, run).await {
            Ok(out) => out?,
            Err(_) => {
                return Err(SandboxError::Runc {
                    op,
                    message: format!("runc {op} did not finish within {RUNC_TIMEOUT:?}"),
                });
            }
        };
        if !out.status.success() {
            return Err(SandboxError::Runc { op, message: String::from_utf8_lossy(&out.stderr).trim().to_string() });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Makes the sandbox's disk (once: a sparse ext4 image of the disk limit, so the writable
    /// layer and the logs can never fill the host), mounts it, and lays out its directories
    /// with their owners. Idempotent; a fork copies its seed into [`Self::upper_dir`] after this.
    pub async fn prepare_disk(&self, id: &str, map: &IdMap) -> Result<()> {
        let dir = self.instance_dir(id);
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
        // Root's alone: runc's bundle, pid files and the disk image are never the guest's.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        let (img, mnt) = (dir.join("disk.img"), self.disk_dir(id));
        std::fs::create_dir_all(&mnt)?;
        if !is_mountpoint(&mnt) {
            if !img.exists() {
                let tmp = dir.join("disk.img.tmp");
                let f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
                f.set_len(self.disk_limit())?;
                drop(f);
                // No reserved blocks (guest root is no host root and could not use them), one
                // inode per 8 KiB (package trees are many small files), tables left to zero
                // lazily: the image is sparse and reads as zeros anyway.
                let out = yielding(mkfs_ext4())
                    .args(["-q", "-F", "-m", "0", "-i", "8192", "-E", "lazy_itable_init=1,lazy_journal_init=1"])
                    .arg(&tmp)
                    .stdin(Stdio::null())
                    .output()
                    .await?;
                if !out.status.success() {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(setup_err(format!(
                        "making the sandbox's disk (mkfs.ext4, package e2fsprogs): {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    )));
                }
                std::fs::rename(&tmp, &img)?;
            }
            let out = yielding("mount")
                .args(["-t", "ext4", "-o", "loop,nosuid,nodev,noinit_itable"])
                .arg(&img)
                .arg(&mnt)
                .stdin(Stdio::null())
                .output()
                .await?;
            if !out.status.success() {
                return Err(setup_err(format!(
                    "mounting the sandbox's disk: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
        }
        let (uid, gid) = map.root();
        std::fs::set_permissions(&mnt, std::fs::Permissions::from_mode(0o711))?;
        let _ = std::fs::remove_dir_all(mnt.join("lost+found"));
        // (path, owned by guest root, mode)
        for (d, guest, mode) in
            [("upper", true, 0o755), ("work", false, 0o700), ("procs", true, 0o1777), ("host", false, 0o700)]
        {
            let p = mnt.join(d);
            if std::fs::symlink_metadata(&p).is_err() {
                std::fs::create_dir(&p)?;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))?;
                if guest {
                    chown(&p, uid, gid)?;
                }
            }
        }
        std::fs::create_dir_all(self.host_dir(id).join("processes"))?;
        Ok(())
    }

    /// Mounts the overlay root filesystem (template below, the sandbox's changes above) unless
    /// it is already mounted.
    async fn mount_rootfs(&self, id: &str, template_rootfs: &Path) -> Result<()> {
        let (upper, work, merged) = (self.upper_dir(id), self.disk_dir(id).join("work"), self.rootfs(id));
        for d in [&upper, &work, &merged] {
            std::fs::create_dir_all(d)?;
        }
        if is_mountpoint(&merged) {
            return Ok(());
        }
        // The root directory the guest sees is the upper layer's: give it the template's mode.
        if let Ok(m) = std::fs::metadata(template_rootfs) {
            std::fs::set_permissions(&upper, std::fs::Permissions::from_mode(m.permissions().mode() & 0o7777))?;
        }
        let opts =
            format!("lowerdir={},upperdir={},workdir={}", template_rootfs.display(), upper.display(), work.display());
        let out = yielding("mount").args(["-t", "overlay", "overlay", "-o", &opts]).arg(&merged).output().await?;
        if !out.status.success() {
            return Err(setup_err(format!(
                "mounting the sandbox root: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    /// Creates and starts the container; returns its init's host pid.
    #[allow(clippy::too_many_arguments)]
    pub async fn start(
        &self,
        id: &str,
        template_rootfs: &Path,
        image: &ImageConfig,
        cpu_millis: i64,
        memory_bytes: u64,
        map: &IdMap,
        net: Option<&GuestNet>,
    ) -> Result<u32> {
        let dir = self.instance_dir(id);
        let legacy = dir.join("upper").is_dir();
        if !legacy {
            self.prepare_disk(id, map).await?;
        }
        self.mount_rootfs(id, template_rootfs).await?;
        map.save(&dir)?;
        let procs = if legacy { dir.join("procs") } else { self.guest_procs_dir(id) };
        std::fs::create_dir_all(&procs)?;
        let mut env = image.env.clone();
        if !env.iter().any(|e| e.starts_with("PATH=")) {
            env.push("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
        }
        env.push("HOME=/root".into());
        let ca_bundle = net.and_then(|n| n.ca_bundle.as_deref());
        if ca_bundle.is_some() {
            for var in crate::net::tls::GUEST_BUNDLE_ENV {
                env.retain(|e| !e.starts_with(&format!("{var}=")));
                env.push(format!("{var}={}", crate::net::tls::GUEST_BUNDLE_PATH));
            }
        }
        // Debian-like templates keep their system store here: it becomes the bundle too (only
        // a regular file of the template is replaced).
        let system_store = template_rootfs.join(crate::net::tls::SYSTEM_BUNDLE_PATH.trim_start_matches('/'));
        let replace_system_store =
            ca_bundle.is_some() && std::fs::symlink_metadata(&system_store).is_ok_and(|m| m.file_type().is_file());
        let hostname: String = id.chars().take(12).collect();
        let rootfs = self.rootfs(id).to_string_lossy().to_string();
        let socket = agent::socket_path(&dir);
        let _ = std::fs::remove_file(&socket);
        let with_agent = self.tools_agent().is_some();
        let cfg = spec::config(&spec::SandboxConfig {
            init: if with_agent { spec::Init::Agent } else { spec::Init::Tini },
            hostname: &hostname,
            rootfs: &rootfs,
            tools_dir: &self.tools_dir.to_string_lossy(),
            procs_dir: &procs.to_string_lossy(),
            cgroups_path: &self.cgroups_path(id),
            env: &env,
            cwd: image.working_dir.as_deref().filter(|w| !w.is_empty()).unwrap_or("/"),
            cpu_millis,
            memory_bytes,
            netns_path: None,
            resolv_conf: net.map(|n| n.resolv_conf.to_string_lossy().into_owned()).as_deref(),
            ca_bundle: ca_bundle.map(|p| p.to_string_lossy().into_owned()).as_deref(),
            replace_system_store,
            idmap: (!legacy).then_some(*map),
        });
        std::fs::write(dir.join("config.json"), serde_json::to_vec_pretty(&cfg).map_err(setup_err)?)?;
        // On the sandbox's own disk: what its init writes counts to its limit.
        let console_log = if legacy { dir.join("console.log") } else { self.host_dir(id).join("console.log") };
        let console = std::fs::OpenOptions::new().create(true).append(true).open(console_log)?;
        let pid_file = dir.join("init.pid");
        let _ = std::fs::remove_file(&pid_file);
        // Detached: the container's stdio is runc's, so both go to the console log (a pipe would
        // stay open for the container's whole life); runc's own errors go to runc.log.
        let runc_log = dir.join("runc.log");
        let _ = std::fs::remove_file(&runc_log);
        // The agent's listening socket is the init's standard input: runc hands a detached
        // container its own stdio, and the socket's path stays on the host.
        let stdin =
            if with_agent { Stdio::from(std::os::fd::OwnedFd::from(agent::listen(&socket)?)) } else { Stdio::null() };
        let mut run = self.runc_run(id, &runc_log);
        // runc would give the container a new session keyring charged to the container's root,
        // a host uid every sandbox of the template shares: the kernel's quota of 200 keys per
        // uid then refused the 201st sandbox of a template on a node. The container keeps the
        // runtime's session keyring instead, which the guest cannot use (seccomp refuses keyctl,
        // add_key and request_key; /proc/keys is masked).
        let status = run
            .args(["--no-new-keyring", "-d", "--pid-file"])
            .arg(&pid_file)
            .arg("-b")
            .arg(&dir)
            .arg(id)
            .stdin(stdin)
            .stdout(console.try_clone()?)
            .stderr(console)
            .status()
            .await?;
        if !status.success() {
            let _ = std::fs::remove_file(&socket);
            let log = std::fs::read_to_string(&runc_log).unwrap_or_default();
            let last = log.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no error message").to_string();
            return Err(SandboxError::Runc { op: "run", message: last });
        }
        let pid = std::fs::read_to_string(&pid_file)?.trim().parse::<u32>().map_err(setup_err)?;
        // `runc run -d` returns once it has told the init to go, before the init (runc's own
        // multi-threaded Go process) has exec'd tini. A freeze in that window deadlocks: the
        // exec waits for threads the freezer has stopped (seen for one paused start in ten in
        // a user namespace). Wait for the exec, briefly.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.starts_with("runc:"))
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        restore_priority(&self.freezer_state_file(id).with_file_name("tasks"), pid);
        Ok(pid)
    }

    pub async fn state(&self, id: &str) -> Result<Option<RuncState>> {
        let out = self.runc(id).args(["state", id]).stdin(Stdio::null()).output().await?;
        if !out.status.success() {
            return Ok(None);
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(setup_err)?;
        Ok(Some(RuncState {
            status: v["status"].as_str().unwrap_or("unknown").to_string(),
            pid: v["pid"].as_u64().unwrap_or(0) as u32,
        }))
    }

    fn freezer_state_file(&self, id: &str) -> PathBuf {
        PathBuf::from(format!("/sys/fs/cgroup/freezer{}/freezer.state", self.cgroups_path(id)))
    }

    /// Freezes (or thaws) every process of the sandbox. Writing the cgroup v1 freezer directly
    /// takes ~0.1 ms against ~10 ms for spawning `runc pause`.
    pub async fn set_frozen(&self, id: &str, frozen: bool) -> Result<()> {
        let file = self.freezer_state_file(id);
        if !file.exists() {
            let op = if frozen { "pause" } else { "resume" };
            self.runc_ok(op, id, &[op, id]).await?;
            return Ok(());
        }
        if !frozen {
            std::fs::write(&file, "THAWED")?;
            return Ok(());
        }
        // The v1 freezer asks each task to stop only when FROZEN is written, so a task forked
        // in that moment (a shell's pipeline, a server forking per connection) can be missed and
        // leave the cgroup FREEZING for good. Each write asks again; a thaw now and then lets a
        // task caught in execve finish it. runc's own v1 freezer does the same.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut pause = Duration::from_micros(50);
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            std::fs::write(&file, "FROZEN")?;
            if std::fs::read_to_string(&file)?.trim() == "FROZEN" {
                if attempt > 1 {
                    tracing::debug!(sandbox = id, attempt, "frozen after asking again");
                }
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                // A sandbox must not stay FREEZING: that blocks every later runc call on it.
                let _ = std::fs::write(&file, "THAWED");
                return Err(setup_err("the sandbox did not freeze within 10 s; try again"));
            }
            if attempt.is_multiple_of(50) {
                std::fs::write(&file, "THAWED")?;
                tokio::time::sleep(Duration::from_millis(10)).await;
            } else {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(5));
            }
        }
    }

    /// Kills every process of the sandbox. Not `runc kill --all`: on cgroup v1 that freezes the
    /// cgroup first, and a task caught in execve (e.g. a `runc exec` starting) can keep the
    /// freeze from ever completing, which hangs runc for good. Thawing first and signalling each
    /// process directly cannot deadlock.
    async fn kill_all(&self, id: &str) {
        let cgroup = PathBuf::from(format!("/sys/fs/cgroup/freezer{}", self.cgroups_path(id)));
        let state = cgroup.join("freezer.state");
        if std::fs::read_to_string(&state).is_ok_and(|s| s.trim() != "THAWED") {
            let _ = std::fs::write(&state, "THAWED");
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let pids: Vec<i32> = std::fs::read_to_string(cgroup.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            if pids.is_empty() || tokio::time::Instant::now() >= deadline {
                break;
            }
            for pid in pids {
                // Through a pidfd after the cgroup check: a pid that exited since the listing
                // and was reused outside the sandbox is left alone.
                let _ = self.signal_in_sandbox(id, pid as u32, rustix::process::Signal::KILL);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn is_frozen(&self, id: &str) -> bool {
        std::fs::read_to_string(self.freezer_state_file(id)).map(|s| s.trim() == "FROZEN").unwrap_or(false)
    }

    /// Stops the container and removes it from runc; the sandbox's files stay for a restart.
    pub async fn stop(&self, id: &str) -> Result<()> {
        let Some(pid) = self.state(id).await?.map(|s| s.pid) else { return Ok(()) };
        let pid = Some(pid);
        self.kill_all(id).await;
        // Background processes (`runc exec -d`) are re-parented to this process, the subreaper:
        // their zombies keep the sandbox's init from exiting until they are collected.
        if let Ok(procs) = std::fs::read_dir(self.host_dir(id).join("processes")) {
            for p in procs.flatten() {
                if let Some(host) =
                    std::fs::read_to_string(p.path().join("host.pid")).ok().and_then(|s| s.trim().parse().ok())
                {
                    reap(host);
                }
            }
        }
        self.runc_ok("delete", id, &["delete", "--force", id]).await?;
        let _ = std::fs::remove_file(agent::socket_path(&self.instance_dir(id)));
        if let Some(pid) = pid {
            reap(pid);
        }
        Ok(())
    }

    /// Removes everything the sandbox had: container, cgroup, mount and files.
    pub async fn destroy(&self, id: &str) -> Result<()> {
        self.stop(id).await?;
        self.runc_counts.forget(id);
        let mine = format!("{id}/");
        lock(&self.stdins).retain(|k, _| !k.starts_with(&mine));
        let dir = self.instance_dir(id);
        let merged = self.rootfs(id);
        // The root first (it sits on the disk), then the disk (its loop device goes with it).
        self.unmount_root(id).await?;
        unmount(&self.disk_dir(id)).await?;
        if merged.starts_with(ROOTS_DIR) {
            let _ = std::fs::remove_dir(&merged);
        }
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        Ok(())
    }

    /// Unmounts the sandbox's root (the overlay) of a stopped sandbox, leaving its disk and
    /// upper directory in place.
    pub async fn unmount_root(&self, id: &str) -> Result<()> {
        unmount(&self.rootfs(id)).await
    }

    fn exec_command(&self, id: &str, req: &ExecRequest, detach_pid_file: Option<&Path>) -> Command {
        let mut c = self.runc(id);
        c.arg("exec");
        if let Some(p) = detach_pid_file {
            c.arg("-d").arg("--pid-file").arg(p);
        }
        if let Some(cwd) = &req.cwd {
            c.args(["--cwd", cwd]);
        }
        if let Some(user) = &req.user {
            c.args(["--user", user]);
        }
        for (k, v) in &req.env {
            c.arg("--env").arg(format!("{k}={v}"));
        }
        c.arg(id);
        c
    }

    /// Runs a command to completion, keeping at most `max_output` bytes of each output stream:
    /// past it the pipe is closed (the command's next write there fails with EPIPE/SIGPIPE, as
    /// under `| head -c`), so the runtime never reads nor keeps more.
    pub async fn exec(&self, id: &str, req: &ExecRequest, max_output: u64) -> Result<ExecResult> {
        if req.command.is_empty() {
            return Err(setup_err("exec needs a command"));
        }
        let socket = agent::socket_path(&self.instance_dir(id));
        if socket.exists() {
            return agent::exec(&socket, req, max_output).await;
        }
        let mut cmd = self.exec_command(id, req, None);
        cmd.args(&req.command).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        cmd.stdin(if req.stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take().zip(req.stdin.clone()).map(|(mut stdin, input)| {
            tokio::spawn(async move {
                // A command that exits without reading its input is not an error.
                let _ = stdin.write_all(input.as_bytes()).await;
            })
        });
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(setup_err("exec: runc's output pipes are missing"));
        };
        let run = async {
            let (out, err, status) =
                tokio::join!(read_capped(stdout, max_output), read_capped(stderr, max_output), child.wait());
            Ok::<_, std::io::Error>((out?, err?, status?))
        };
        let result = match req.timeout_seconds {
            Some(t) => match tokio::time::timeout(Duration::from_secs(t), run).await {
                Ok(r) => r?,
                Err(_) => {
                    if let Some(h) = stdin {
                        h.abort();
                    }
                    return Ok(ExecResult {
                        exit_code: -1,
                        stdout: String::new(),
                        stderr: format!("timed out after {t} s"),
                        timed_out: true,
                        truncated: false,
                    });
                }
            },
            None => run.await?,
        };
        if let Some(h) = stdin {
            h.abort();
        }
        let ((stdout, out_cut), (stderr, err_cut), status) = result;
        Ok(ExecResult {
            exit_code: status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            timed_out: false,
            truncated: out_cut || err_cut,
        })
    }

    /// The host-only directory of a background process (its record, host pid and output).
    fn proc_dir(&self, id: &str, pid: &str) -> Result<PathBuf> {
        // Ids are ours (12 hex digits): anything else names no process, and never a path.
        if pid.len() != 12 || !pid.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(SandboxError::NoProcess(pid.to_string()));
        }
        Ok(self.host_dir(id).join("processes").join(pid))
    }

    /// Starts a background process; its output goes to log files and its exit code is kept.
    pub async fn start_process(&self, id: &str, req: &ExecRequest) -> Result<Process> {
        if req.command.is_empty() {
            return Err(setup_err("a process needs a command"));
        }
        let pid = kairon_runtime_api::Pid::random();
        let dir = self.proc_dir(id, &pid)?;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
        let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let meta = Process {
            id: pid.clone(),
            command: req.command.clone(),
            state: ProcessState::Running,
            exit_code: None,
            started_at,
        };
        std::fs::write(dir.join("process.json"), serde_json::to_vec(&meta).map_err(setup_err)?)?;
        // The wrapper records the exit code and passes TERM on, inside the sandbox; the exit
        // file is the only thing of a process the guest can write, and it is read as a number
        // without following symlinks.
        // A shell gives a command it starts in the background /dev/null as stdin, so the
        // process's own (a kept-open pipe, or /dev/null) is handed over on fd 3; the wrapper
        // keeps no copy, so a write after the process is gone fails at once.
        let script = format!(
            "trap 'kill -TERM $c 2>/dev/null' TERM; exec 3<&0 0</dev/null; \"$@\" 0<&3 3<&- & c=$!; exec 3<&-; wait $c; s=$?; echo $s > /.kairon/procs/{pid}.tmp; mv -f /.kairon/procs/{pid}.tmp /.kairon/procs/{pid}.exit"
        );
        // Opened here, in a directory the guest cannot reach: it gets only the descriptors.
        let stdout = std::fs::File::create(dir.join("stdout"))?;
        let stderr = std::fs::File::create(dir.join("stderr"))?;
        let mut cmd = self.exec_command(id, req, Some(&dir.join("host.pid")));
        // A kept-open stdin is a pipe whose write end only this runtime holds.
        let (stdin, writer) = if req.keep_stdin_open {
            let (tx, rx) = tokio::net::unix::pipe::pipe()?;
            (Stdio::from(rx.into_blocking_fd()?), Some(tx))
        } else {
            (Stdio::null(), None)
        };
        cmd.args(["/.kairon/busybox", "sh", "-c", &script, "sh"])
            .args(&req.command)
            .stdin(stdin)
            .stdout(stdout)
            .stderr(stderr);
        let status = cmd.status().await?;
        if !status.success() {
            let err = std::fs::read_to_string(dir.join("stderr")).unwrap_or_default();
            return Err(SandboxError::Runc { op: "exec", message: err.trim().to_string() });
        }
        if let Some(tx) = writer {
            let key = format!("{id}/{pid}");
            lock(&self.stdins).insert(key, Arc::new(tokio::sync::Mutex::new(tx)));
            if let Some(first) = &req.stdin {
                self.write_stdin(id, pid.as_str(), first.clone().into_bytes(), false).await?;
            }
        }
        Ok(meta)
    }

    /// The exit code the wrapper left in the guest-writable directory: opened beneath it with
    /// no symlink (nor magic link, nor mount crossing) anywhere, non-blocking (a FIFO cannot
    /// stall the runtime), only if it is a regular file, and at most 32 bytes of it read.
    fn exit_code(&self, id: &str, pid: &str) -> Option<Option<i32>> {
        let dir = rustix::fs::open(
            self.guest_procs_dir(id),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let fd = rustix::fs::openat2(
            &dir,
            format!("{pid}.exit"),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_XDEV,
        )
        .ok()?;
        let st = rustix::fs::fstat(&fd).ok()?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
            return Some(None);
        }
        let mut buf = [0u8; 32];
        let n = rustix::io::read(&fd, &mut buf).ok()?;
        Some(std::str::from_utf8(&buf[..n]).ok().and_then(|s| s.trim().parse().ok()))
    }

    pub fn process(&self, id: &str, pid: &str) -> Result<Process> {
        let dir = self.proc_dir(id, pid)?;
        let raw = std::fs::read(dir.join("process.json")).map_err(|_| SandboxError::NoProcess(pid.to_string()))?;
        let mut p: Process = serde_json::from_slice(&raw).map_err(setup_err)?;
        if let Some(code) = self.exit_code(id, pid) {
            p.state = ProcessState::Exited;
            p.exit_code = code;
        } else if !self.host_pid(id, pid).is_some_and(pid_alive) {
            // Killed with the sandbox (or by a signal the wrapper could not catch).
            p.state = ProcessState::Exited;
        }
        Ok(p)
    }

    /// The host pid runc recorded for a background process (host-only file).
    fn host_pid(&self, id: &str, pid: &str) -> Option<u32> {
        std::fs::read_to_string(self.proc_dir(id, pid).ok()?.join("host.pid")).ok()?.trim().parse().ok()
    }

    pub fn processes(&self, id: &str) -> Result<Vec<Process>> {
        let mut out = Vec::new();
        let Ok(entries) = std::fs::read_dir(self.host_dir(id).join("processes")) else { return Ok(out) };
        for e in entries.flatten() {
            if let Ok(p) = self.process(id, &e.file_name().to_string_lossy()) {
                out.push(p);
            }
        }
        out.sort_by(|a, b| a.started_at.cmp(&b.started_at).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    /// The process's output so far.
    pub fn logs(&self, id: &str, pid: &str) -> Result<(String, String)> {
        self.process(id, pid)?;
        let dir = self.proc_dir(id, pid)?;
        let read =
            |f: &str| std::fs::read(dir.join(f)).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
        Ok((read("stdout"), read("stderr")))
    }

    /// One output stream of a process from byte `offset` (only what is new; at most 1 MiB).
    pub fn log_chunk(&self, id: &str, pid: &str, stderr: bool, offset: u64) -> Result<LogChunk> {
        use std::io::{Read, Seek, SeekFrom};
        self.process(id, pid)?;
        let path = self.proc_dir(id, pid)?.join(if stderr { "stderr" } else { "stdout" });
        let mut buf = Vec::new();
        if let Ok(mut f) = std::fs::File::open(path) {
            f.seek(SeekFrom::Start(offset))?;
            f.take(kairon_runtime_api::types::MAX_LOG_CHUNK_BYTES).read_to_end(&mut buf)?;
        }
        Ok(LogChunk::from_bytes(&buf, offset))
    }

    /// Whether host process `pid` belongs to sandbox `id` (its freezer cgroup is the sandbox's,
    /// or below it).
    pub fn in_sandbox(&self, id: &str, pid: u32) -> bool {
        let want = self.cgroups_path(id);
        std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|s| {
            s.lines().any(|l| {
                let mut f = l.splitn(3, ':');
                let (_, ctrl, path) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or(""));
                // cgroup v1's freezer hierarchy (runc's cgroupsPath), or v2's unified one.
                (ctrl.split(',').any(|c| c == "freezer") || ctrl.is_empty())
                    && (path == want || path.strip_prefix(want.as_str()).is_some_and(|r| r.starts_with('/')))
            })
        })
    }

    /// Sends `signal` to host process `pid` only if it is in sandbox `id`: the check and the
    /// signal go through one pidfd, so a recycled pid is never signalled by mistake.
    pub fn signal_in_sandbox(&self, id: &str, pid: u32, signal: rustix::process::Signal) -> Result<()> {
        let Some(p) = rustix::process::Pid::from_raw(pid as i32) else {
            return Err(SandboxError::NotInSandbox { pid, id: id.to_string() });
        };
        let Ok(fd) = rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()) else {
            return Ok(()); // gone already
        };
        if !self.in_sandbox(id, pid) {
            return Err(SandboxError::NotInSandbox { pid, id: id.to_string() });
        }
        match rustix::process::pidfd_send_signal(&fd, signal) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
            Err(e) => Err(SandboxError::Io(e.into())),
        }
    }

    /// Kills every process of sandbox `id` in process group `pgid` (host ids): the members
    /// are taken from the sandbox's cgroup and each is signalled through a pidfd after the
    /// cgroup check, so nothing outside the sandbox is ever hit.
    pub fn kill_group_in_sandbox(&self, id: &str, pgid: u32) {
        let procs = format!("/sys/fs/cgroup/freezer{}/cgroup.procs", self.cgroups_path(id));
        let pids: Vec<u32> =
            std::fs::read_to_string(procs).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect();
        for pid in pids {
            let in_group =
                procfs::process::Process::new(pid as i32).and_then(|p| p.stat()).is_ok_and(|st| st.pgrp == pgid as i32);
            if in_group {
                let _ = self.signal_in_sandbox(id, pid, rustix::process::Signal::KILL);
            }
        }
    }

    /// Writes `data` to a background process's kept-open stdin, waiting at most
    /// [`STDIN_WRITE_TIMEOUT`] for the process to read; `close` closes it afterwards.
    pub async fn write_stdin(&self, id: &str, pid: &str, data: Vec<u8>, close: bool) -> Result<()> {
        use tokio::io::AsyncWriteExt;
        self.process(id, pid)?;
        let key = format!("{id}/{pid}");
        let Some(stdin) = lock(&self.stdins).get(&key).cloned() else {
            return Err(SandboxError::StdinClosed(format!(
                "process {pid} has no open stdin: start it with keepStdinOpen; it may have been closed, or the runtime restarted since"
            )));
        };
        let written = tokio::time::timeout(STDIN_WRITE_TIMEOUT, async {
            let mut w = stdin.lock().await;
            w.write_all(&data).await?;
            w.flush().await
        })
        .await;
        let gone = |why: String| {
            lock(&self.stdins).remove(&key);
            SandboxError::StdinClosed(why)
        };
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                return Err(gone(format!("process {pid} no longer reads its stdin (it exited or closed it)")));
            }
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => {
                return Err(SandboxError::StdinClosed(format!(
                    "process {pid} did not read its stdin within {} s: nothing more was written",
                    STDIN_WRITE_TIMEOUT.as_secs()
                )));
            }
        }
        if close {
            lock(&self.stdins).remove(&key);
        }
        Ok(())
    }

    pub async fn kill_process(&self, id: &str, pid: &str, signal: &str) -> Result<()> {
        self.process(id, pid)?;
        use rustix::process::Signal;
        let sig = match signal {
            "TERM" => Signal::TERM,
            "KILL" => Signal::KILL,
            "INT" => Signal::INT,
            "HUP" => Signal::HUP,
            "QUIT" => Signal::QUIT,
            "USR1" => Signal::USR1,
            "USR2" => Signal::USR2,
            other => return Err(setup_err(format!("unknown signal {other:?}"))),
        };
        if let Some(host) = self.host_pid(id, pid)
            && pid_alive(host)
        {
            // The signal is the command's: the wrapper (see start_process) started it as its
            // child. KILL on the wrapper alone would leave the command running, orphaned.
            let children = std::fs::read_to_string(format!("/proc/{host}/task/{host}/children")).unwrap_or_default();
            let commands: Vec<u32> = children.split_whitespace().filter_map(|p| p.parse().ok()).collect();
            if commands.is_empty() {
                self.signal_in_sandbox(id, host, sig)?;
            }
            for command in commands {
                self.signal_in_sandbox(id, command, sig)?;
            }
        }
        Ok(())
    }

    pub async fn wait_process(&self, id: &str, pid: &str, timeout: Duration) -> Result<Process> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let p = self.process(id, pid)?;
            if p.state == ProcessState::Exited || tokio::time::Instant::now() >= deadline {
                return Ok(p);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Counters for the whole sandbox: CPU of every process that ever ran in it (cpuacct),
    /// memory, and the I/O of its live processes (`/proc/<pid>/io` counts buffered writes).
    pub fn stats(&self, id: &str, init_pid: Option<u32>) -> Stats {
        let cg = self.cgroups_path(id);
        let read_u64 = |p: String| std::fs::read_to_string(p).ok().and_then(|s| s.trim().parse::<u64>().ok());
        let pids: Vec<u32> = std::fs::read_to_string(format!("/sys/fs/cgroup/pids{cg}/cgroup.procs"))
            .or_else(|_| std::fs::read_to_string(format!("/sys/fs/cgroup/memory{cg}/cgroup.procs")))
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default();
        let mut cpu = read_u64(format!("/sys/fs/cgroup/cpuacct{cg}/cpuacct.usage"));
        let (mut rd, mut wr) = (0u64, 0u64);
        let mut proc_cpu = 0u64;
        for pid in &pids {
            if let Ok(p) = procfs::process::Process::new(*pid as i32) {
                if let Ok(io) = p.io() {
                    rd += io.read_bytes.max(io.rchar.min(io.read_bytes));
                    wr += io.write_bytes;
                }
                if let Ok(st) = p.stat() {
                    proc_cpu += (st.utime + st.stime) * (1_000_000_000 / procfs::ticks_per_second());
                }
            }
        }
        if cpu.is_none() {
            cpu = Some(proc_cpu);
        }
        Stats {
            vmm_pid: init_pid,
            cpu_time_nanos: cpu.unwrap_or(0),
            disk_read_bytes: rd,
            disk_write_bytes: wr,
            memory_bytes: read_u64(format!("/sys/fs/cgroup/memory{cg}/memory.usage_in_bytes")).unwrap_or(0),
            process_count: pids.len() as u32,
            runc_invocations: Some(self.runc_counts.of(id)),
            ..Stats::default()
        }
    }

    /// A `runc exec` of `command` in sandbox `id` that stays attached (runc relays the
    /// process's stdio and exits with its status), writing the process's host pid to
    /// `pid_file`. The interactive console streams over it.
    pub(crate) fn attached_exec(&self, id: &str, pid_file: &Path, command: &AttachedCommand) -> Command {
        let mut c = self.runc(id);
        c.arg("exec").arg("--pid-file").arg(pid_file);
        if let Some(cwd) = &command.cwd {
            c.args(["--cwd", cwd]);
        }
        if let Some(user) = &command.user {
            c.args(["--user", user]);
        }
        for (k, v) in &command.env {
            c.arg("--env").arg(format!("{k}={v}"));
        }
        c.arg(id).args(&command.argv);
        c
    }

    /// [`Self::attached_exec`] on a terminal of the container's own, `cols`×`rows` before the
    /// command runs: runc's `--tty` flag sizes it only after starting the command (a quick
    /// `stty size` found 0x0), a process spec's `consoleSize` before. The spec is the sandbox's
    /// own process (capabilities, no new privileges) with the command's argv, environment
    /// (after the image's, as `--env` adds it), user and directory; it is written beside
    /// `pid_file` (`*.process.json`). runc's own stdio must be a terminal ([`crate::tty`]).
    pub(crate) fn attached_exec_on_tty(
        &self,
        id: &str,
        pid_file: &Path,
        command: &AttachedCommand,
        (cols, rows): (u16, u16),
    ) -> io::Result<Command> {
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(self.instance_dir(id).join("config.json"))?)?;
        let mut process = config["process"].clone();
        process["terminal"] = true.into();
        process["consoleSize"] = serde_json::json!({"width": cols, "height": rows});
        process["args"] = serde_json::json!(command.argv);
        let env = process["env"].as_array_mut().ok_or_else(|| io::Error::other("config.json has no process env"))?;
        env.extend(command.env.iter().map(|(k, v)| format!("{k}={v}").into()));
        if let Some(cwd) = &command.cwd {
            process["cwd"] = cwd.as_str().into();
        }
        if let Some(user) = &command.user {
            let id =
                |s: &str| s.parse::<u32>().map_err(|_| io::Error::other(format!("user {user:?} is not uid[:gid]")));
            let (uid, gid) = user.split_once(':').unwrap_or((user, "0"));
            process["user"] = serde_json::json!({"uid": id(uid)?, "gid": id(gid)?});
        }
        let spec = process_spec_path(pid_file);
        std::fs::write(&spec, serde_json::to_vec(&process)?)?;
        self.runc_counts.count(id);
        // In a session of its own whose controlling terminal is its stdin, so the terminal's
        // signals (SIGWINCH on a resize) reach runc.
        let mut c = Command::new("setsid");
        c.args(["--ctty", "runc", "--root"]).arg(&self.runc_root).args(["exec", "--pid-file"]).arg(pid_file);
        c.arg("--process").arg(&spec).arg(id);
        Ok(c)
    }
}

/// Where [`SandboxHost::attached_exec_on_tty`] writes the process spec of the exec whose pid
/// goes to `pid_file`.
pub(crate) fn process_spec_path(pid_file: &Path) -> PathBuf {
    pid_file.with_extension("process.json")
}

/// A command `runc exec` runs attached (a console, `exec -i`/`-it`): its argv, environment,
/// user (`uid[:gid]` or a name the guest knows; default root) and working directory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AttachedCommand {
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub user: Option<String>,
    pub cwd: Option<String>,
}

/// Collects a container init that was re-parented to this process (the runtime is a child
/// subreaper, since the host's PID 1 may not reap). Harmless when it is not our child.
/// Unmounts `m` if something is mounted there (lazily when it is busy).
async fn unmount(m: &Path) -> Result<()> {
    if is_mountpoint(m) {
        let out = Command::new("umount").arg(m).output().await?;
        if !out.status.success() {
            let _ = Command::new("umount").arg("-l").arg(m).output().await;
        }
    }
    Ok(())
}

pub fn reap(pid: u32) {
    if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
        for _ in 0..50 {
            match rustix::process::waitpid(Some(p), rustix::process::WaitOptions::NOHANG) {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    }
}

pub fn pid_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit_once(')').map(|(_, rest)| !rest.trim_start().starts_with('Z')).unwrap_or(false))
        .unwrap_or(false)
}

fn is_mountpoint(p: &Path) -> bool {
    let Ok(canon) = p.canonicalize() else { return false };
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|m| m.lines().any(|l| l.split(' ').nth(4).is_some_and(|mp| Path::new(mp) == canon)))
        .unwrap_or(false)
}

/// Environment as a map, for merging an image's env with a request's.
pub fn env_map(env: &[String]) -> BTreeMap<String, String> {
    env.iter().filter_map(|e| e.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Writes the tree at `root` as a tar into `out` (symlinks as symlinks, entries in name order),
/// with owners as the guest sees them: host ids in `map`'s range become 0..65535, any other
/// host id `nobody` (65534). Sockets are skipped.
pub fn write_tar(root: &Path, out: std::fs::File, map: Option<&IdMap>) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let guest = |id: u32| -> u64 {
        match map {
            Some(m) if id >= m.host_base && id - m.host_base < m.size => u64::from(id - m.host_base),
            Some(_) => 65534,
            None => u64::from(id),
        }
    };
    let mut builder = tar::Builder::new(out);
    builder.follow_symlinks(false);
    let mut stack = vec![PathBuf::from(".")];
    while let Some(rel) = stack.pop() {
        let path = root.join(&rel);
        let meta = std::fs::symlink_metadata(&path)?;
        let ft = meta.file_type();
        if ft.is_socket() {
            continue;
        }
        let mut h = tar::Header::new_gnu();
        h.set_metadata_in_mode(&meta, tar::HeaderMode::Complete);
        h.set_uid(guest(meta.uid()));
        h.set_gid(guest(meta.gid()));
        if ft.is_symlink() {
            builder.append_link(&mut h, &rel, std::fs::read_link(&path)?)?;
        } else if ft.is_file() {
            builder.append_data(&mut h, &rel, std::fs::File::open(&path)?)?;
        } else {
            h.set_size(0);
            builder.append_data(&mut h, &rel, std::io::empty())?;
        }
        if ft.is_dir() {
            let mut names: Vec<_> =
                std::fs::read_dir(&path)?.map(|e| e.map(|e| e.file_name())).collect::<std::io::Result<_>>()?;
            names.sort();
            stack.extend(names.into_iter().rev().map(|n| rel.join(n)));
        }
    }
    builder.into_inner()
}

fn chown(p: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
    rustix::fs::chownat(
        rustix::fs::CWD,
        p,
        Some(Uid::from_raw(uid)),
        Some(Gid::from_raw(gid)),
        AtFlags::SYMLINK_NOFOLLOW,
    )
    .map_err(Into::into)
}

/// The niceness of a sandbox's start: its disk, its mounts and `runc run` (runc's own setup of
/// the container, the most CPU a start takes). On a small node a pool's refill starts just as
/// the claim that took a member makes its first calls (the thaw, an exec); at this niceness the
/// refill yields the CPU to them instead of sharing it evenly.
const START_NICENESS: &str = "10";

/// `program` run as a sandbox's start runs it ([`START_NICENESS`]).
fn yielding(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new("nice");
    c.args(["-n", START_NICENESS]).arg(program);
    c
}

/// Gives a started sandbox's tasks (every thread in its cgroup, `tasks`: its init and what the
/// init started, niced like the rest of the start) the normal priority back, so what runs in
/// it, and what they fork later, is not niced.
fn restore_priority(tasks: &Path, init: u32) {
    let listed: Vec<String> = match std::fs::read_to_string(tasks) {
        Ok(tasks) => tasks.split_whitespace().map(str::to_string).collect(),
        // No v1 cgroup file: the init's own threads.
        Err(_) => std::fs::read_dir(format!("/proc/{init}/task"))
            .map(|d| d.flatten().filter_map(|t| t.file_name().into_string().ok()).collect())
            .unwrap_or_default(),
    };
    for tid in listed.iter().filter_map(|t| t.parse::<i32>().ok()) {
        let Some(tid) = rustix::process::Pid::from_raw(tid) else { continue };
        if let Err(e) = rustix::process::setpriority_process(Some(tid), 0) {
            tracing::debug!(init, error = %e, "restoring a sandbox task's priority failed");
        }
    }
}

/// mkfs.ext4 lives in /usr/sbin (or /sbin), which a daemon's PATH may lack.
fn mkfs_ext4() -> PathBuf {
    ["/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("mkfs.ext4"))
}

/// `1073741824`, `512M`, `2G`, `2Gi`, `64k`: bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n: u64 = s[..digits].parse().ok()?;
    let unit: u64 = match s[digits..].trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "ki" | "kib" => 1 << 10,
        "m" | "mi" | "mib" => 1 << 20,
        "g" | "gi" | "gib" => 1 << 30,
        "t" | "ti" | "tib" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(unit)
}

/// Reads `r` to its end or to `cap` bytes, whichever comes first; at the cap it stops reading
/// and drops (closes) `r`. The bool says whether there was more.
async fn read_capped<R: tokio::io::AsyncRead + Unpin>(r: R, cap: u64) -> std::io::Result<(Vec<u8>, bool)> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    // One byte past the cap tells "exactly cap" from "more than cap".
    let mut limited = r.take(cap.saturating_add(1));
    limited.read_to_end(&mut buf).await?;
    let cut = buf.len() as u64 > cap;
    buf.truncate(cap as usize);
    Ok((buf, cut))
}

/// Kills and removes every sandbox of the runtime state dir `state_dir`, and unmounts their
/// roots and disks: what a test (or an operator retiring a node's state) does after a runtime
/// that will not come back. Sandboxes outlive their runtime on purpose otherwise.
pub fn remove_all_under(state_dir: &Path) {
    let root = state_dir.join("runc");
    for entry in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        let id = entry.file_name().to_string_lossy().to_string();
        let state: serde_json::Value = std::fs::read(entry.path().join("state.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        if let Some(freezer) = state["cgroup_paths"]["freezer"].as_str() {
            kill_cgroup(Path::new(freezer));
        }
        let mut delete = std::process::Command::new("runc");
        delete.arg("--root").arg(&root).args(["delete", "--force", &id]);
        run_bounded(delete, Duration::from_secs(30));
    }
    // The sandboxes' overlay roots are mounted outside the state dir (under
    // /run/kairon/sandboxes) with their layers inside it: unmount every mount whose line names
    // the state dir, the roots before the disks they sit on (so the loop devices go too).
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let prefix = format!("{}/", state_dir.to_string_lossy());
    let ours: Vec<&str> = mounts.lines().filter(|l| l.contains(&prefix)).filter_map(|l| l.split(' ').nth(4)).collect();
    let (roots, disks): (Vec<&str>, Vec<&str>) = ours.into_iter().partition(|mp| !mp.starts_with(&prefix));
    for mp in roots.iter().chain(&disks) {
        let _ = std::process::Command::new("umount").arg("-l").arg(mp).output();
    }
    for root in roots.iter().filter(|mp| mp.starts_with(ROOTS_DIR)) {
        let _ = std::fs::remove_dir(root);
    }
}

fn kill_cgroup(freezer: &Path) {
    let _ = std::fs::write(freezer.join("freezer.state"), "THAWED");
    for _ in 0..100 {
        let procs = std::fs::read_to_string(freezer.join("cgroup.procs")).unwrap_or_default();
        let pids: Vec<&str> = procs.lines().filter(|l| !l.trim().is_empty()).collect();
        if pids.is_empty() {
            return;
        }
        let _ =
            std::process::Command::new("kill").arg("-KILL").args(&pids).stderr(std::process::Stdio::null()).status();
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a command, killing it if it takes longer than `limit`.
fn run_bounded(mut cmd: std::process::Command, limit: Duration) {
    let Ok(mut child) = cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn() else {
        return;
    };
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("512Mi"), Some(512 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("1.5G"), None);
        assert_eq!(parse_size("lots"), None);
    }

    #[tokio::test]
    async fn output_is_read_up_to_the_cap_and_no_further() {
        let (out, cut) = read_capped(&b"0123456789"[..], 4).await.unwrap();
        assert_eq!((out.as_slice(), cut), (&b"0123"[..], true));
        let (out, cut) = read_capped(&b"0123"[..], 4).await.unwrap();
        assert_eq!((out.as_slice(), cut), (&b"0123"[..], false));
        // An endless writer: the read stops at the cap instead of waiting for the end.
        let (mut w, r) = tokio::io::duplex(64);
        let writer = tokio::spawn(async move {
            let mut n = 0u64;
            while w.write_all(&[b'y'; 16]).await.is_ok() {
                n += 16;
            }
            n
        });
        let (out, cut) = read_capped(r, 100).await.unwrap();
        assert_eq!((out.len(), cut), (100, true));
        // The reader was dropped at the cap: the writer saw its pipe close.
        let written = writer.await.unwrap();
        assert!(written < 100 + 64 + 16, "{written}");
    }
}
