//! The VM backend: one QEMU process per running VM, driven over QMP, with the guest reached
//! through the qemu-guest-agent protocol on a virtio-serial port.
//!
//! * Machine: `microvm` (virtio-mmio devices, direct kernel boot) when a kernel is given
//!   (`spec.runtime.kernel`) or lies beside the image (`X.vmlinuz`, `X.initrd`); `q35` booting
//!   the disk otherwise. KVM when `/dev/kvm` really runs a guest (probed once per host boot:
//!   on nested hosts it can exist and hang), TCG otherwise.
//! * Disk: the image is the read-only base of a per-VM qcow2 overlay; `spec.volumes` are disks
//!   of their own that survive Stop.
//! * Power: Pause = QMP `stop`/`cont`; Hibernate = migrate RAM to a file and quit (the QEMU
//!   process is gone), restore = a new QEMU with `-incoming` + `cont`; Halt = guest power-off
//!   (the overlay stays), resume = boot; Stop = quit and drop the overlay.
//! * Fork: `stop`, migrate RAM to the child's directory (this also flushes the disk), copy the
//!   overlay, `cont` the parent; the child starts from that memory on its own overlay and is then
//!   re-identified (see [`REIDENTIFY`]).
//! * Confinement: QEMU opens what it needs as root, then drops to a uid of its own with
//!   [`VM_USER`]'s group (`-runas`, see [`VM_UID_BASE`]) and runs under its seccomp filter
//!   (`-sandbox`, see `SANDBOX`).
//!   Memory state is migrated through descriptors the runtime opens and passes over QMP
//!   (`getfd`, `fd:`), never `exec:` (QEMU may not spawn anything).
//! * Network: QEMU user networking, with each QEMU in a network namespace of its own that has
//!   only a loopback (`unshare --net`; it lives and dies with that QEMU, so nothing leaks and an
//!   adopted QEMU keeps it). Slirp's "host" address 10.0.2.2 thus leads to that loopback, not
//!   the host's, and the guest has no way out. The HTTP proxy, port tunnels and SSH reach a
//!   guest port through a forward on that loopback with the guest port's number, added on
//!   demand (`hostfwd_add`) and dialled inside the namespace (see [`VmHost::target`]).
//!   A VM on the guest network (`spec.network.mode` Tap/Bridge, see `crate::net`) has `tap0`
//!   in a bridge in that namespace instead, joined by its link to the node; the guest takes its
//!   address from the kernel command line, and is dialled at it from the node side.

pub mod backend;
pub mod ga;
pub mod hostpaths;
pub mod image;
pub mod ops;
pub mod qmp;

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::api::{CreateVmRequest, ExecRequest, ExecResult, FileEntry, Process, ProcessState, Stats};
use crate::files::ByteStream;
use ga::{GaError, GuestAgent};
use kairon_runtime_api::types::{LiveStats, LogChunk};
use qmp::{Qmp, QmpError};

pub const QEMU: &str = "qemu-system-x86_64";
/// Overrides the accelerator probe: `kvm` or `tcg`.
pub const ACCEL_ENV: &str = "KAIRON_QEMU_ACCEL";
const DEFAULT_MEMORY_MIB: u64 = 256;
const MIN_MEMORY_MIB: u64 = 64;
/// How long a boot may take until the guest agent answers (TCG on a loaded 2-core host).
const BOOT_TIMEOUT: Duration = Duration::from_secs(180);
const GA_TIMEOUT: Duration = Duration::from_secs(30);
const CHUNK: usize = 1024 * 1024;
/// The name under which a migration's file descriptor is passed to QEMU (`getfd`).
const MIGRATION_FD: &str = "kairon-migration";
/// The unprivileged system user whose group every QEMU drops to (with a uid of its own, see
/// [`VM_UID_BASE`]), created by the runtime when missing.
pub const VM_USER: &str = "kairon-vm";
/// The user QEMU drops to when [`VM_USER`] cannot be created.
pub const VM_USER_FALLBACK: &str = "nobody";
/// Each running QEMU gets a uid of its own from this range (with [`VM_USER`]'s group), so one
/// VM's QEMU cannot signal or trace another's. The range lies far above the ids accounts and
/// containers use, and no file of a VM belongs to it; a uid is taken when its QEMU starts (one
/// no process on the host runs as) and given back when that QEMU is gone.
pub const VM_UID_BASE: u32 = 0x6b00_0000;
const VM_UID_COUNT: u32 = 1 << 20;
/// QEMU's seccomp filter. `elevateprivileges=deny` is left out while QEMU drops to its user
/// itself: QEMU 7.2 installs the filter before `-runas`'s setgid/setuid, so with it QEMU dies
/// of SIGSYS at start (measured: exit 159). After `-runas` QEMU has no capability left and its
/// real, effective and saved ids are all the user's, so it cannot regain root by set*id, and
/// `spawn=deny` forbids exec (no setuid binary either).
const SANDBOX: &str = "on,obsolete=deny,spawn=deny,resourcecontrol=deny";
/// Run by `unshare --net` before QEMU replaces it: the VM's own network namespace gets its
/// loopback up (slirp's 10.0.2.2 and the runtime's forwards lead there), and any port may be
/// bound in it by QEMU's unprivileged user (a forward keeps the guest port's number). Where
/// `/proc/sys` is read-only (some containers) the VM still starts; only guest ports below 1024
/// cannot be forwarded then.
///
/// With `KAIRON_TAP_UID` set (a VM on the guest network) it also makes `tap0`, owned by QEMU's
/// uid, in a bridge `br0`; the runtime then adds the namespace's end of the VM's link to `br0`.
const NETNS_SETUP: &str = "ip link set lo up || exit 125
echo 0 2>/dev/null > /proc/sys/net/ipv4/ip_unprivileged_port_start ||
  echo 'kairon: cannot allow low ports in the VM network namespace: guest ports below 1024 cannot be forwarded' >&2
if [ -n \"$KAIRON_TAP_UID\" ]; then
  ip tuntap add dev tap0 mode tap user \"$KAIRON_TAP_UID\" && ip link add br0 type bridge &&
    ip link set tap0 master br0 && ip link set tap0 up && ip link set br0 up || exit 125
fi
exec \"$@\"";

#[derive(Debug, thiserror::Error)]
pub enum VmError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// A process's stdin is not open.
    #[error("{0}")]
    StdinClosed(String),
    #[error("{0}")]
    Failed(String),
}

impl From<QmpError> for VmError {
    fn from(e: QmpError) -> Self {
        VmError::Failed(e.to_string())
    }
}

impl From<std::io::Error> for VmError {
    fn from(e: std::io::Error) -> Self {
        VmError::Failed(e.to_string())
    }
}

impl From<GaError> for VmError {
    fn from(e: GaError) -> Self {
        match &e {
            GaError::Command { desc, .. } if desc.contains("No such file") || desc.contains("not found") => {
                VmError::NotFound(e.to_string())
            }
            GaError::Command { .. } => VmError::Invalid(e.to_string()),
            GaError::Unreachable(_) => VmError::Conflict(e.to_string()),
        }
    }
}

type Result<T> = std::result::Result<T, VmError>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    Kvm,
    Tcg,
}

/// What a VM is made of, fixed at creation (`qemu.json` in its directory). A fork or a
/// hibernated VM's restore must start QEMU with the same devices, so it is all here.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfig {
    pub image: String,
    #[serde(default)]
    pub kernel: Option<String>,
    #[serde(default)]
    pub initrd: Option<String>,
    #[serde(default)]
    pub cmdline: Option<String>,
    pub vcpus: u32,
    pub memory_mib: u64,
    pub mac: String,
    pub hostname: String,
    pub machine_id: String,
    /// Volume name → its disk file.
    #[serde(default)]
    pub volumes: BTreeMap<String, String>,
    /// On the node's guest network (`spec.network.mode` Tap or Bridge): its address and
    /// gateway; else QEMU user networking.
    #[serde(default)]
    pub guest_net: Option<GuestAddr>,
}

/// A VM's address on the guest network. The guest learns it from the kernel command line
/// (`kairon.ip=`, `kairon.gw=`; Kairon's image configures `eth0` from them) and, after a fork,
/// from re-identification.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct GuestAddr {
    pub ip: std::net::Ipv4Addr,
    pub gateway: std::net::Ipv4Addr,
}

/// Attaches a started QEMU (its pid: the VM's network namespace holds `br0` with `tap0`) to
/// the guest network at an address.
pub type NetHook = Arc<
    dyn Fn(u32, std::net::Ipv4Addr) -> futures::future::BoxFuture<'static, std::result::Result<(), String>>
        + Send
        + Sync,
>;

impl MachineConfig {
    pub fn microvm(&self) -> bool {
        self.kernel.is_some()
    }
}

/// A background process started through the guest agent. Its output is only known once it
/// has exited (the qemu-guest-agent protocol hands it over then).
#[derive(Clone, Debug)]
struct ProcRecord {
    meta: Process,
    guest_pid: i64,
    stdout: String,
    stderr: String,
}

/// A running QEMU and the connections to it.
/// The host thread ids of a QEMU's vCPUs (one each, or one shared under single-threaded TCG).
async fn vcpu_thread_ids(run: &Running) -> std::result::Result<Vec<i32>, qmp::QmpError> {
    let cpus = run.qmp.lock().await.execute("query-cpus-fast", json!({})).await?;
    let mut tids: Vec<i32> = cpus
        .as_array()
        .map(|cs| cs.iter().filter_map(|c| c["thread-id"].as_i64()).filter_map(|t| i32::try_from(t).ok()).collect())
        .unwrap_or_default();
    tids.sort_unstable();
    tids.dedup();
    Ok(tids)
}

pub struct Running {
    pub pid: u32,
    /// The uid QEMU runs as, when it is one of [`VM_UID_BASE`]'s.
    uid: Option<u32>,
    /// QEMU runs in a network namespace of its own: its forwards listen on that namespace's
    /// loopback, on the guest port's own number, and are dialled inside it.
    pub netns: bool,
    qmp: Mutex<Qmp>,
    ga: Mutex<GuestAgent>,
    /// Held while a background process's state is asked of the guest and recorded: the guest
    /// agent tells a process's exit once and then forgets the process, so two callers asking at
    /// once must not both ask.
    polling: Mutex<()>,
    procs: std::sync::Mutex<BTreeMap<String, ProcRecord>>,
    /// Guest port → host port on 127.0.0.1.
    forwards: Mutex<BTreeMap<u16, u16>>,
    child: std::sync::Mutex<Option<tokio::process::Child>>,
    /// QEMU's vCPU thread ids (QMP `query-cpus-fast`), asked once: they live as long as QEMU.
    vcpu_threads: tokio::sync::OnceCell<Vec<i32>>,
}

pub struct VmHost {
    state_dir: PathBuf,
    /// Where images, kernels and initrds may lie (`[vm] image_dirs`), besides [`Self::images_dir`].
    image_dirs: std::sync::Mutex<Vec<PathBuf>>,
    /// The uids of the QEMUs that run or are starting (see [`VM_UID_BASE`]).
    uids: std::sync::Mutex<std::collections::BTreeSet<u32>>,
    running: std::sync::Mutex<BTreeMap<String, Arc<Running>>>,
    /// The largest new empty volume a VM may ask for (`[vm] max_volume_size`).
    max_volume_bytes: std::sync::atomic::AtomicU64,
    /// How a VM on the guest network gets its link (set by the runtime that owns the network).
    net_hook: std::sync::OnceLock<NetHook>,
    /// Where the node side of the guest network lives (`None`: this process's namespace), for
    /// dialling a VM's guest IP.
    node_netns: std::sync::OnceLock<Option<PathBuf>>,
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The serial console log of a running VM is kept under this (QEMU appends what the guest
/// writes to `console.log`; past it the log moves to `console.log.1`, replacing the one
/// before, and starts again), so a guest printing without end holds at most twice this.
pub const CONSOLE_LOG_CAP: u64 = 16 << 20;
/// How often the console logs are looked at.
pub const CONSOLE_LOG_CHECK: Duration = Duration::from_secs(5);
/// How much of a log's end an error message reads.
const LOG_TAIL_BYTES: u64 = 64 << 10;

/// The last `max` bytes of the file at `path` (text, lossy), reading no more; empty if it
/// cannot be read.
pub fn read_tail(path: &Path, max: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else { return String::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if f.seek(SeekFrom::Start(len.saturating_sub(max))).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    let _ = f.take(max).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Moves `path` to `path.1` and empties it when it holds more than `cap` bytes: copied, then
/// truncated in place, because its writer (QEMU, appending) keeps the file open. Whether it
/// rotated.
pub fn rotate_log(path: &Path, cap: u64) -> std::io::Result<bool> {
    if std::fs::metadata(path)?.len() <= cap {
        return Ok(false);
    }
    let mut rotated = path.as_os_str().to_owned();
    rotated.push(".1");
    std::fs::copy(path, &rotated)?;
    std::fs::OpenOptions::new().write(true).open(path)?.set_len(0)?;
    Ok(true)
}

/// The largest new empty volume a VM may ask of a node whose config sets no
/// `[vm] max_volume_size`: its disk fills as the guest writes, up to this.
pub const DEFAULT_MAX_VOLUME_BYTES: u64 = 256 << 30;

/// A locally administered, unicast MAC in QEMU's 52:54:00 range.
pub fn random_mac() -> String {
    let b: [u8; 3] = rand::random();
    format!("52:54:00:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2])
}

pub fn random_machine_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A host name from an instance name (at most 63 characters, no trailing dash).
pub fn hostname_for(name: &str) -> String {
    let h: String = name.chars().take(63).collect();
    h.trim_end_matches(['-', '.']).to_string()
}

/// The user whose group QEMU drops to: [`VM_USER`], a dedicated system user (no login, no home) created
/// with `useradd --system` the first time it is needed, so a compromised QEMU owns nothing
/// else on the host (`nobody` is shared with other daemons' unprivileged work); [`VM_USER_FALLBACK`]
/// when it cannot be created. `None` when the runtime does not run as root (QEMU then already
/// runs unprivileged, as the runtime's own user).
pub async fn qemu_user() -> Option<&'static str> {
    static USER: tokio::sync::OnceCell<Option<&'static str>> = tokio::sync::OnceCell::const_new();
    *USER
        .get_or_init(|| async {
            if !rustix::process::geteuid().is_root() {
                return None;
            }
            if user_exists(VM_USER).await {
                return Some(VM_USER);
            }
            let out = tokio::process::Command::new("useradd")
                .args(["--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent"])
                .args(["--shell", "/usr/sbin/nologin", "--comment", "Kairon QEMU VMs", VM_USER])
                .stdin(Stdio::null())
                .output()
                .await;
            // Another runtime may have created it meanwhile (useradd then fails): look again.
            if user_exists(VM_USER).await {
                tracing::info!(user = VM_USER, "created the unprivileged user QEMU runs as");
                return Some(VM_USER);
            }
            let why = match out {
                Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
                Err(e) => e.to_string(),
            };
            tracing::warn!(user = VM_USER, fallback = VM_USER_FALLBACK, error = %why, "cannot create QEMU's user");
            Some(VM_USER_FALLBACK)
        })
        .await
}

/// The group id of `name`, when it has one.
async fn group_id(name: &str) -> Option<u32> {
    let out = tokio::process::Command::new("id").args(["-g", name]).stdin(Stdio::null()).output().await.ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

async fn user_exists(name: &str) -> bool {
    tokio::process::Command::new("id")
        .args(["-u", name])
        .stdin(Stdio::null())
        .output()
        .await
        .is_ok_and(|o| o.status.success())
}

/// Whether process `pid` has a network namespace of its own (not the runtime's).
pub fn own_netns(pid: u32) -> bool {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/net")).ok();
    match (ns(&pid.to_string()), ns("self")) {
        (Some(a), Some(b)) => a != b,
        _ => false,
    }
}

/// Whether QEMU is on the PATH (the node then offers the vm backend).
pub fn qemu_installed() -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(QEMU).is_file()))
}

/// Whether a create request is for this backend: an image, and no template.
pub fn wants_vm(req: &CreateVmRequest) -> bool {
    req.image.is_some() && req.sandbox.as_ref().is_none_or(|s| s.template_name.is_none())
}

/// The accelerator this host gives QEMU: `$KAIRON_QEMU_ACCEL`, else a probe that boots
/// `kernel` under KVM and looks for its panic (no root disk) on the serial port. The probe runs
/// once per host boot; its answer is kept in `cache_dir`.
pub async fn accel(kernel: Option<&Path>, cache_dir: &Path) -> Option<Accel> {
    match std::env::var(ACCEL_ENV).ok().as_deref() {
        Some("kvm") => return Some(Accel::Kvm),
        Some("tcg") => return Some(Accel::Tcg),
        _ => {}
    }
    static PROBED: tokio::sync::OnceCell<Accel> = tokio::sync::OnceCell::const_new();
    if let Some(a) = PROBED.get() {
        return Some(*a);
    }
    if std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_err() {
        return Some(*PROBED.get_or_init(|| async { Accel::Tcg }).await);
    }
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let cache = cache_dir.join(format!(".kvm-probe-{}", boot.trim()));
    if let Ok(s) = std::fs::read_to_string(&cache) {
        let a = if s.trim() == "kvm" { Accel::Kvm } else { Accel::Tcg };
        return Some(*PROBED.get_or_init(|| async move { a }).await);
    }
    let kernel = kernel?.to_path_buf();
    let a = *PROBED
        .get_or_init(|| async move {
            let a = probe_kvm(&kernel).await;
            tracing::info!(accel = ?a, "probed KVM");
            let _ = std::fs::create_dir_all(cache.parent().unwrap_or(Path::new("/")));
            let _ = std::fs::write(&cache, if a == Accel::Kvm { "kvm" } else { "tcg" });
            a
        })
        .await;
    Some(a)
}

async fn probe_kvm(kernel: &Path) -> Accel {
    let Ok(dir) = tempfile::tempdir() else { return Accel::Tcg };
    let log = dir.path().join("serial.log");
    let child = tokio::process::Command::new(QEMU)
        .args(["-machine", "microvm,accel=kvm", "-cpu", "host", "-m", "64", "-nodefaults", "-no-user-config"])
        .args(["-display", "none", "-no-reboot", "-kernel"])
        .arg(kernel)
        .args(["-append", "console=ttyS0 panic=-1 root=/dev/nonexistent"])
        .arg("-serial")
        .arg(format!("file:{}", log.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn();
    let Ok(mut child) = child else { return Accel::Tcg };
    match tokio::time::timeout(Duration::from_secs(20), child.wait()).await {
        Ok(Ok(_)) => {
            let out = std::fs::read_to_string(&log).unwrap_or_default();
            if out.contains("Kernel panic") { Accel::Kvm } else { Accel::Tcg }
        }
        _ => {
            let _ = child.kill().await;
            Accel::Tcg
        }
    }
}

/// The default environment of a command run through the guest agent (qemu-ga replaces the
/// environment with what it is given).
fn guest_env(extra: &BTreeMap<String, String>) -> Vec<String> {
    let mut env: BTreeMap<String, String> = [
        ("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/lib/kairon"),
        ("HOME", "/root"),
        ("LANG", "C.UTF-8"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    env.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// The program and arguments for a request: `cwd` through a shell, `user` through setpriv.
/// `/bin/sh`'s arguments that send `signal` to `target` (a pid, or `-PGID` for a process group)
/// with the shell's own `kill`: a minimal Debian has no kill program (procps ships it).
fn kill_args(signal: &str, target: &str) -> Vec<String> {
    ["-c", "kill -s \"$1\" -- \"$2\"", "sh", signal, target].map(String::from).to_vec()
}

fn guest_command(req: &ExecRequest) -> Result<(String, Vec<String>)> {
    if req.command.is_empty() {
        return Err(VmError::Invalid("command must not be empty".into()));
    }
    let mut cmd = req.command.clone();
    if let Some(user) = &req.user {
        let (uid, gid) = user.split_once(':').unwrap_or((user, user));
        if uid.parse::<u32>().is_err() || gid.parse::<u32>().is_err() {
            return Err(VmError::Invalid(format!("user {user:?} must be uid[:gid], e.g. 1000:1000")));
        }
        let mut wrapped = vec![
            "setpriv".into(),
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--clear-groups".into(),
            "--".into(),
        ];
        wrapped.extend(cmd);
        cmd = wrapped;
    }
    if let Some(cwd) = &req.cwd {
        let mut args =
            vec!["-c".into(), "cd -- \"$1\" || exit 127; shift; exec \"$@\"".into(), "sh".into(), cwd.clone()];
        args.extend(cmd);
        return Ok(("/bin/sh".into(), args));
    }
    let program = cmd.remove(0);
    Ok((program, cmd))
}

/// Re-identification of a copy (fork child, claimed pool member), by guest-exec so a real
/// qemu-ga does it too: 64 bytes of host entropy into the guest's pool and a forced CRNG
/// reseed (the RNDRESEEDCRNG ioctl, through perl or python, whichever the image has), a new
/// machine id, a new host name and a new MAC on eth0.
pub const REIDENTIFY: &str = r#"head -c 64 > /dev/urandom
if command -v perl >/dev/null; then
  perl -e 'open(F, ">", "/dev/urandom") or die "open: $!"; ioctl(F, 0x5207, 0) or die "RNDRESEEDCRNG: $!"' || exit 1
elif command -v python3 >/dev/null; then
  python3 -c 'import fcntl,os; fcntl.ioctl(os.open("/dev/urandom", os.O_WRONLY), 0x5207)' || exit 1
fi
echo "$1" > /etc/machine-id
echo "$2" > /etc/hostname
hostname "$2" 2>/dev/null || echo "$2" > /proc/sys/kernel/hostname
if [ -e /sys/class/net/eth0 ]; then
  if command -v ip >/dev/null; then IP=ip; else IP="/usr/lib/kairon/busybox ip"; fi
  $IP link set dev eth0 address "$3"
  if [ -n "$4" ]; then
    $IP addr flush dev eth0 && $IP addr add "$4/32" dev eth0 &&
      $IP route replace "$5" dev eth0 scope link && $IP route replace default via "$5" dev eth0 || exit 1
  fi
fi
"#;

impl VmHost {
    pub fn new(state_dir: &Path) -> VmHost {
        VmHost {
            state_dir: state_dir.to_path_buf(),
            image_dirs: std::sync::Mutex::new(hostpaths::DEFAULT_IMAGE_DIRS.iter().map(PathBuf::from).collect()),
            uids: std::sync::Mutex::new(Default::default()),
            running: std::sync::Mutex::new(BTreeMap::new()),
            max_volume_bytes: std::sync::atomic::AtomicU64::new(DEFAULT_MAX_VOLUME_BYTES),
            net_hook: std::sync::OnceLock::new(),
            node_netns: std::sync::OnceLock::new(),
        }
    }

    /// Sets how VMs on the guest network are attached, and where its node side lives.
    pub fn set_net_hook(&self, hook: NetHook, node_netns: Option<PathBuf>) {
        let _ = self.net_hook.set(hook);
        let _ = self.node_netns.set(node_netns);
    }

    pub fn instance_dir(&self, id: &str) -> PathBuf {
        self.state_dir.join("instances").join(id)
    }

    pub fn images_dir(&self) -> PathBuf {
        image::images_dir(&self.state_dir.join("images"))
    }

    /// Sets the image directories of the node config (the runtime's own images directory is
    /// always one).
    pub fn set_image_dirs(&self, dirs: Vec<PathBuf>) {
        *lock(&self.image_dirs) = dirs;
    }

    /// The largest new empty volume a VM may ask for.
    pub fn set_max_volume_bytes(&self, bytes: u64) {
        self.max_volume_bytes.store(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// Where images, kernels and initrds may lie: the configured directories and the runtime's
    /// own images directory.
    pub fn allowed_image_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = lock(&self.image_dirs).clone();
        for own in [self.images_dir(), self.state_dir.join("images")] {
            if !dirs.contains(&own) {
                dirs.push(own);
            }
        }
        dirs
    }

    /// The directory of a namespace's volumes (`volumes/<namespace>/`).
    pub fn volumes_dir(&self, namespace: &str) -> PathBuf {
        self.state_dir.join("volumes").join(namespace)
    }

    fn image_file(&self, field: &str, path: &str) -> Result<(PathBuf, std::fs::File)> {
        let dirs = self.allowed_image_dirs();
        hostpaths::resolve(field, path, &dirs, "the node's image directories").map_err(VmError::Invalid)
    }

    /// Resolves and checks the base image: its verified path, format and size.
    fn base_image(&self, path: &str) -> Result<(PathBuf, hostpaths::DiskFormat, u64)> {
        let (p, f) = self.image_file("spec.image.path", path)?;
        let (fmt, info) = hostpaths::check_disk("spec.image.path", &p, &f, None, &self.allowed_image_dirs())
            .map_err(VmError::Invalid)?;
        Ok((p, fmt, info.virtual_size))
    }

    /// A volume named by path: inside `volumes/<namespace>/` (a relative path is taken there),
    /// no symlinks, format from its name. Returns the verified path.
    fn volume_file(&self, name: &str, path: &str, namespace: &str) -> Result<PathBuf> {
        let field = format!("spec.volumes[{name}].path");
        if !kairon_model::validate::is_dns_subdomain(namespace) {
            return Err(VmError::Invalid(format!("namespace {namespace:?} is not a DNS name")));
        }
        let dir = self.volumes_dir(namespace);
        let mut builder = std::fs::DirBuilder::new();
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.recursive(true).create(&dir)?;
        let full = if path.starts_with('/') { path.to_string() } else { format!("{}/{path}", dir.display()) };
        let dirs = [dir.clone()];
        let what = format!("the volumes directory of namespace {namespace}");
        let (p, f) = hostpaths::resolve(&field, &full, &dirs, &what).map_err(VmError::Invalid)?;
        hostpaths::check_disk(&field, &p, &f, Some(hostpaths::DiskFormat::of_volume(&full)), &dirs)
            .map_err(VmError::Invalid)?;
        Ok(p)
    }

    /// Checks again, before QEMU opens them, every host path of a VM: its image, kernel,
    /// initrd and the volumes that are not its own.
    fn recheck_paths(&self, id: &str, cfg: &MachineConfig) -> Result<()> {
        self.base_image(&cfg.image)?;
        if let Some(k) = &cfg.kernel {
            self.image_file("spec.runtime.kernel.path", k)?;
        }
        if let Some(i) = &cfg.initrd {
            self.image_file("spec.runtime.kernel.initrd", i)?;
        }
        let own = self.instance_dir(id);
        let volumes = [self.state_dir.join("volumes")];
        for (name, file) in &cfg.volumes {
            if Path::new(file).parent() == Some(own.as_path()) {
                continue;
            }
            let field = format!("spec.volumes[{name}].path");
            let (p, f) = hostpaths::resolve(&field, file, &volumes, "the runtime's volumes directory")
                .map_err(VmError::Invalid)?;
            hostpaths::check_disk(&field, &p, &f, Some(hostpaths::DiskFormat::of_volume(file)), &volumes)
                .map_err(VmError::Invalid)?;
        }
        Ok(())
    }

    fn config_path(&self, id: &str) -> PathBuf {
        self.instance_dir(id).join("qemu.json")
    }

    pub fn config(&self, id: &str) -> Result<MachineConfig> {
        let raw = std::fs::read(self.config_path(id))
            .map_err(|e| VmError::Failed(format!("reading the VM's qemu.json: {e}")))?;
        serde_json::from_slice(&raw).map_err(|e| VmError::Failed(format!("qemu.json: {e}")))
    }

    pub fn save_config(&self, id: &str, cfg: &MachineConfig) -> Result<()> {
        let raw = serde_json::to_vec_pretty(cfg).map_err(|e| VmError::Failed(e.to_string()))?;
        std::fs::write(self.config_path(id), raw)?;
        Ok(())
    }

    pub fn running(&self, id: &str) -> Option<Arc<Running>> {
        lock(&self.running).get(id).cloned()
    }

    fn running_or_err(&self, id: &str) -> Result<Arc<Running>> {
        self.running(id).ok_or_else(|| VmError::Conflict("the VM has no running QEMU".into()))
    }

    /// Checks a request and works out the machine: image, kernel, vCPUs, memory, MAC.
    pub fn plan(&self, req: &CreateVmRequest) -> Result<MachineConfig> {
        let image = req.image.as_ref().map(|i| i.path.clone()).unwrap_or_default();
        let default = self.images_dir().join(format!("{}.qcow2", image::DEFAULT_IMAGE));
        if image.is_empty() {
            return Err(VmError::Invalid(format!("spec.image.path is required, e.g. {}", default.display())));
        }
        // Inside the image directories, no symlinks, no backing chain (see `hostpaths`).
        let (path, _, _) = self.base_image(&image).map_err(|e| match e {
            VmError::Invalid(m) if m.ends_with("does not exist on this node") => VmError::Invalid(format!(
                "{m} (the default image {} is built by `kairon up` on first start)",
                default.display()
            )),
            e => e,
        })?;
        let image = path.to_string_lossy().into_owned();
        let (kernel, initrd, cmdline) = match req.runtime.as_ref().and_then(|r| r.kernel.as_ref()) {
            Some(k) => {
                let (kp, _) = self.image_file("spec.runtime.kernel.path", &k.path)?;
                let ip = match &k.initrd {
                    Some(i) => Some(self.image_file("spec.runtime.kernel.initrd", i)?.0),
                    None => None,
                };
                let s = |p: PathBuf| p.to_string_lossy().into_owned();
                (Some(s(kp)), ip.map(s), k.cmdline.clone())
            }
            None => match image::kernel_beside(&path) {
                Some((k, i)) => {
                    let k = self.image_file("spec.image.path's kernel", &k.to_string_lossy())?.0;
                    let i = match i {
                        Some(i) => Some(self.image_file("spec.image.path's initrd", &i.to_string_lossy())?.0),
                        None => None,
                    };
                    (Some(k.to_string_lossy().into_owned()), i.map(|i| i.to_string_lossy().into_owned()), None)
                }
                None => (None, None, None),
            },
        };
        let namespace =
            req.labels.get(hostpaths::NAMESPACE_LABEL).map(String::as_str).unwrap_or(hostpaths::DEFAULT_NAMESPACE);
        let max_volume = self.max_volume_bytes.load(std::sync::atomic::Ordering::Relaxed);
        for v in &req.volumes {
            let Some(size) = &v.size else { continue };
            let bytes = size.to_bytes().map_err(|e| VmError::Invalid(format!("volume {}: size: {e}", v.name)))?;
            if bytes > max_volume {
                return Err(VmError::Invalid(format!(
                    "volume {}: size {} is more than this node allows for one volume ({max_volume} bytes, [vm] max_volume_size): ask for less",
                    v.name, size.0
                )));
            }
        }
        let mut volumes = BTreeMap::new();
        for v in &req.volumes {
            if let Some(p) = &v.path {
                volumes.insert(v.name.clone(), self.volume_file(&v.name, p, namespace)?.to_string_lossy().into_owned());
            }
        }
        let res = req.resources.clone().unwrap_or_default();
        let vcpus = match &res.cpu {
            Some(q) => {
                let milli = q.to_milli().map_err(|e| VmError::Invalid(format!("spec.resources.cpu: {e}")))?;
                if milli <= 0 || milli % 1000 != 0 {
                    return Err(VmError::Invalid(format!(
                        "spec.resources.cpu {:?}: a VM takes whole vCPUs (1, 2, …)",
                        q.0
                    )));
                }
                (milli / 1000) as u32
            }
            None => 1,
        };
        let ncpu = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
        if vcpus > ncpu.max(1) * 4 {
            return Err(VmError::Invalid(format!("spec.resources.cpu {vcpus}: this node has {ncpu} CPUs")));
        }
        let memory_mib = match &res.memory {
            Some(q) => {
                let b = q.to_f64().map_err(|e| VmError::Invalid(format!("spec.resources.memory: {e}")))?;
                (b / (1024.0 * 1024.0)).ceil() as u64
            }
            None => DEFAULT_MEMORY_MIB,
        };
        if memory_mib < MIN_MEMORY_MIB {
            return Err(VmError::Invalid(format!(
                "spec.resources.memory must be at least {MIN_MEMORY_MIB}Mi for a VM"
            )));
        }
        let mac = match req.network.as_ref().and_then(|n| n.mac_address.clone()) {
            Some(m) => m.to_lowercase(),
            None => random_mac(),
        };
        Ok(MachineConfig {
            image,
            kernel,
            initrd,
            cmdline,
            vcpus,
            memory_mib,
            mac,
            hostname: hostname_for(&req.name),
            machine_id: random_machine_id(),
            volumes,
            guest_net: None,
        })
    }

    /// Creates the VM's disks: the overlay on the image, and its volumes.
    pub async fn prepare_disks(&self, id: &str, req: &CreateVmRequest, cfg: &mut MachineConfig) -> Result<()> {
        let dir = self.instance_dir(id);
        std::fs::create_dir_all(&dir)?;
        self.new_overlay(id, cfg).await?;
        for v in &req.volumes {
            let file = match &v.path {
                // Inside `volumes/<namespace>/`, no symlinks, format from its name.
                Some(p) => {
                    let ns = req.labels.get(hostpaths::NAMESPACE_LABEL).map(String::as_str);
                    self.volume_file(&v.name, p, ns.unwrap_or(hostpaths::DEFAULT_NAMESPACE))?
                        .to_string_lossy()
                        .into_owned()
                }
                None => {
                    let size = v
                        .size
                        .as_ref()
                        .ok_or_else(|| VmError::Invalid(format!("volume {}: give size (e.g. 1Gi) or path", v.name)))?;
                    let bytes = size.to_f64().map_err(|e| VmError::Invalid(format!("volume {}: {e}", v.name)))? as u64;
                    let file = dir.join(format!("vol-{}.qcow2", v.name));
                    qemu_img(&["create", "-q", "-f", "qcow2", &file.to_string_lossy(), &bytes.to_string()]).await?;
                    file.to_string_lossy().into_owned()
                }
            };
            cfg.volumes.insert(v.name.clone(), file);
        }
        self.save_config(id, cfg)
    }

    pub(crate) fn overlay(&self, id: &str) -> PathBuf {
        self.instance_dir(id).join("disk.qcow2")
    }

    async fn new_overlay(&self, id: &str, cfg: &MachineConfig) -> Result<()> {
        let overlay = self.overlay(id);
        let _ = std::fs::remove_file(&overlay);
        // The base's format is pinned in the overlay (`-F`, read by the runtime from the base's
        // header, never probed), and `-u` with its size: qemu-img does not open the base at all.
        let (base, fmt, size) = self.base_image(&cfg.image)?;
        qemu_img(&[
            "create",
            "-q",
            "-f",
            "qcow2",
            "-F",
            fmt.as_str(),
            "-b",
            &base.to_string_lossy(),
            "-u",
            &overlay.to_string_lossy(),
            &size.to_string(),
        ])
        .await
    }

    fn args(&self, id: &str, cfg: &MachineConfig, accel: Accel, incoming: bool, user: Option<&str>) -> Vec<String> {
        let dir = self.instance_dir(id);
        let p = |f: &str| dir.join(f).to_string_lossy().into_owned();
        let micro = cfg.microvm();
        let bus = if micro { "device" } else { "pci" };
        let mut a: Vec<String> =
            vec!["-name".into(), format!("kairon-vm-{id}"), "-nodefaults".into(), "-no-user-config".into()];
        // QEMU opens its disks, kernel, sockets and log as root, then drops to `user` for good
        // and runs under seccomp. Files it needs later (migration state) are opened by the
        // runtime and passed as descriptors, so nothing of the VM needs to belong to `user`.
        match user {
            Some(u) => {
                a.extend(["-runas".into(), u.into(), "-sandbox".into(), SANDBOX.into()]);
            }
            None => a.extend(["-sandbox".into(), format!("{SANDBOX},elevateprivileges=deny")]),
        }
        let machine = if micro { "microvm,pit=on,rtc=on" } else { "q35" };
        a.extend(["-machine".into(), format!("{machine},accel={}", if accel == Accel::Kvm { "kvm" } else { "tcg" })]);
        a.extend(["-cpu".into(), if accel == Accel::Kvm { "host".into() } else { "max".into() }]);
        a.extend(["-smp".into(), cfg.vcpus.to_string(), "-m".into(), format!("{}M", cfg.memory_mib)]);
        a.extend(["-display".into(), "none".into(), "-no-reboot".into()]);
        a.extend(["-vnc".into(), format!("unix:{}", p("vnc.sock"))]);
        if let Some(k) = &cfg.kernel {
            a.extend(["-kernel".into(), k.clone()]);
            if let Some(i) = &cfg.initrd {
                a.extend(["-initrd".into(), i.clone()]);
            }
            let base = cfg.cmdline.clone().unwrap_or_else(|| "console=ttyS0 root=/dev/vda rw quiet panic=-1".into());
            let mut line = format!("{base} kairon.hostname={} kairon.machine_id={}", cfg.hostname, cfg.machine_id);
            if let Some(net) = &cfg.guest_net {
                line.push_str(&format!(" kairon.ip={} kairon.gw={}", net.ip, net.gateway));
            }
            if accel == Accel::Tcg {
                // Under TCG on a loaded host the kernel's PIT calibration of the TSC can fail,
                // and the boot then hangs: give it the frequency (TCG's TSC runs at the host's).
                line.push_str(&format!(" tsc_early_khz={}", host_tsc_khz()));
            }
            a.extend(["-append".into(), line]);
        }
        // `auto-read-only=off`: each disk is opened read-write at start, as root. Else QEMU
        // opens it read-only while an incoming migration is pending and reopens it by name at
        // `cont`, which QEMU's unprivileged user may not (restore and fork failed with EACCES).
        a.extend([
            "-drive".into(),
            format!("id=root,file={},format=qcow2,if=none,discard=unmap,auto-read-only=off", p("disk.qcow2")),
        ]);
        a.extend(["-device".into(), format!("virtio-blk-{bus},drive=root")]);
        for (i, file) in cfg.volumes.values().enumerate() {
            let fmt = hostpaths::DiskFormat::of_volume(file).as_str();
            a.extend(["-drive".into(), format!("id=vol{i},file={file},format={fmt},if=none,auto-read-only=off")]);
            a.extend(["-device".into(), format!("virtio-blk-{bus},drive=vol{i}")]);
        }
        let netdev =
            if cfg.guest_net.is_some() { "tap,id=net0,ifname=tap0,script=no,downscript=no" } else { "user,id=net0" };
        a.extend(["-netdev".into(), netdev.into()]);
        a.extend(["-device".into(), format!("virtio-net-{bus},netdev=net0,mac={}", cfg.mac)]);
        a.extend(["-device".into(), format!("virtio-rng-{bus}")]);
        a.extend(["-device".into(), format!("virtio-serial-{bus}")]);
        a.extend(["-chardev".into(), format!("socket,id=ga,path={},server=on,wait=off", p("ga.sock"))]);
        a.extend(["-device".into(), "virtserialport,chardev=ga,name=org.qemu.guest_agent.0".into()]);
        a.extend([
            "-chardev".into(),
            format!(
                "socket,id=con,path={},server=on,wait=off,logfile={},logappend=on",
                p("console.sock"),
                p("console.log")
            ),
        ]);
        a.extend(["-serial".into(), "chardev:con".into()]);
        a.extend(["-qmp".into(), format!("unix:{},server=on,wait=off", p("qmp.sock"))]);
        a.extend(["-pidfile".into(), p("qemu.pid")]);
        if incoming {
            a.extend(["-incoming".into(), "defer".into()]);
        }
        a
    }

    /// Starts QEMU (booting, or waiting for an incoming migration) and connects QMP.
    pub async fn spawn(&self, id: &str, cfg: &MachineConfig, incoming: bool) -> Result<Arc<Running>> {
        let dir = self.instance_dir(id);
        self.recheck_paths(id, cfg)?;
        let kernel = cfg.kernel.as_deref().map(Path::new);
        let images = self.images_dir();
        let accel = accel(kernel, &images).await.unwrap_or(Accel::Tcg);
        for s in ["qmp.sock", "ga.sock", "console.sock", "vnc.sock", "qemu.pid"] {
            let _ = std::fs::remove_file(dir.join(s));
        }
        let longest = dir.join("console.sock").to_string_lossy().len();
        if longest > 100 {
            return Err(VmError::Failed(format!(
                "the state directory {} is too deep for QEMU's unix sockets (108 bytes): use a shorter --state-dir",
                self.state_dir.display()
            )));
        }
        let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("qemu.log"))?;
        let user = qemu_user().await;
        // A uid of its own with the VM user's group (`-runas uid:gid`); the user's name when
        // its group is unknown.
        let (runas, uid) = match user {
            Some(name) => match group_id(name).await {
                Some(gid) => {
                    let uid = self.take_uid()?;
                    (Some(format!("{uid}:{gid}")), Some(uid))
                }
                None => (Some(name.to_string()), None),
            },
            None => (None, None),
        };
        let mut r = self.spawn_as(id, cfg, accel, incoming, log, runas.as_deref(), uid).await;
        if let (Ok(run), Some(net)) = (&r, &cfg.guest_net) {
            let attached = match self.net_hook.get() {
                Some(hook) => hook(run.pid, net.ip).await,
                None => Err("this runtime has no guest network".to_string()),
            };
            if let Err(e) = attached {
                self.kill(id).await;
                r = Err(VmError::Failed(format!("attaching the VM to the guest network: {e}")));
            }
        }
        if r.is_err()
            && let Some(u) = uid
        {
            lock(&self.uids).remove(&u);
        }
        r
    }

    /// A uid no other QEMU runs as: none of this runtime's, and no process on the host (another
    /// runtime's QEMUs, e.g. in tests).
    fn take_uid(&self) -> Result<u32> {
        let range = VM_UID_BASE..VM_UID_BASE + VM_UID_COUNT;
        let mut taken = lock(&self.uids);
        let mut in_use = taken.clone();
        if let Ok(all) = procfs::process::all_processes() {
            in_use.extend(all.flatten().filter_map(|p| p.status().ok()).map(|s| s.ruid).filter(|u| range.contains(u)));
        }
        let uid = range
            .clone()
            .find(|u| !in_use.contains(u))
            .ok_or_else(|| VmError::Failed("no free uid for another QEMU".into()))?;
        taken.insert(uid);
        Ok(uid)
    }

    #[allow(clippy::too_many_arguments)]
    async fn spawn_as(
        &self,
        id: &str,
        cfg: &MachineConfig,
        accel: Accel,
        incoming: bool,
        log: std::fs::File,
        user: Option<&str>,
        uid: Option<u32>,
    ) -> Result<Arc<Running>> {
        let dir = self.instance_dir(id);
        // Its own network namespace (root only): slirp's way to the host (10.0.2.2) then ends
        // on that namespace's loopback, not the host's. `unshare` and the shell exec QEMU in
        // place, so the child's pid is QEMU's; the namespace lives and dies with it.
        let netns = user.is_some();
        if cfg.guest_net.is_some() && !netns {
            return Err(VmError::Invalid(
                "a VM on the guest network needs a runtime running as root (its QEMU gets a network namespace with a tap device)".into(),
            ));
        }
        let mut cmd = if netns {
            let mut c = tokio::process::Command::new("unshare");
            c.args(["--net", "--", "/bin/sh", "-c", NETNS_SETUP, "sh", QEMU]);
            if cfg.guest_net.is_some() {
                // QEMU opens tap0 after dropping to its uid (or by name when only that is known).
                // `-runas` is `uid:gid`, or the user's name when its group is unknown.
                c.env("KAIRON_TAP_UID", user.and_then(|u| u.split(':').next()).unwrap_or_default());
            }
            c
        } else {
            tokio::process::Command::new(QEMU)
        };
        cmd.args(self.args(id, cfg, accel, incoming, user))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Its own process group: a Ctrl-C to the runtime does not take the VMs down, and a
            // restarted runtime adopts them.
            .process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| VmError::Failed(format!("starting {QEMU}: {e} (install the qemu-system-x86 package)")))?;
        let pid = child.id().unwrap_or(0);
        let qmp_path = dir.join("qmp.sock");
        let qmp = tokio::select! {
            q = Qmp::connect(&qmp_path, Duration::from_secs(60)) => q,
            status = child.wait() => {
                return Err(VmError::Failed(format!("QEMU exited at start ({}): {}", status.map(|s| s.to_string()).unwrap_or_default(), self.log_tail(id))));
            }
        };
        let qmp = match qmp {
            Ok(q) => q,
            Err(e) => {
                let _ = child.kill().await;
                return Err(VmError::Failed(format!("QEMU's QMP socket: {e}: {}", self.log_tail(id))));
            }
        };
        let run = Arc::new(Running {
            pid,
            uid,
            netns,
            qmp: Mutex::new(qmp),
            ga: Mutex::new(GuestAgent::new(&dir.join("ga.sock"), pid)),
            polling: Mutex::new(()),
            procs: std::sync::Mutex::new(BTreeMap::new()),
            forwards: Mutex::new(BTreeMap::new()),
            child: std::sync::Mutex::new(Some(child)),
            vcpu_threads: tokio::sync::OnceCell::new(),
        });
        lock(&self.running).insert(id.to_string(), run.clone());
        Ok(run)
    }

    /// The last lines QEMU and the serial console wrote, for error messages.
    pub fn log_tail(&self, id: &str) -> String {
        let dir = self.instance_dir(id);
        let tail = |f: &str| {
            let s = read_tail(&dir.join(f), LOG_TAIL_BYTES);
            let lines: Vec<&str> = s.lines().rev().take(8).collect();
            lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
        };
        format!("qemu: {} ; console: {}", tail("qemu.log"), tail("console.log"))
    }

    /// Keeps the console log of every running VM under `cap` ([`rotate_log`]).
    pub fn rotate_console_logs(&self, cap: u64) {
        let ids: Vec<String> = lock(&self.running).keys().cloned().collect();
        for id in ids {
            let log = self.instance_dir(&id).join("console.log");
            match rotate_log(&log, cap) {
                Ok(true) => tracing::info!(vm = %id, cap, "console log rotated"),
                Ok(false) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => tracing::warn!(vm = %id, error = %e, "rotating the console log"),
            }
        }
    }

    /// Boots a VM from its overlay and waits until its guest agent answers.
    pub async fn boot(&self, id: &str, cfg: &MachineConfig) -> Result<u32> {
        let run = self.spawn(id, cfg, false).await?;
        if let Err(e) = self.wait_agent(id, &run, BOOT_TIMEOUT).await {
            self.kill(id).await;
            return Err(e);
        }
        Ok(run.pid)
    }

    /// Polls the guest agent until it answers.
    pub async fn wait_agent(&self, id: &str, run: &Running, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let r = run.ga.lock().await.ping(Duration::from_secs(2)).await;
            match r {
                Ok(()) => return Ok(()),
                Err(e) => {
                    if !crate::sandbox::pid_alive(run.pid) {
                        return Err(VmError::Failed(format!("QEMU exited during boot: {}", self.log_tail(id))));
                    }
                    if Instant::now() >= deadline {
                        return Err(VmError::Failed(format!(
                            "the guest agent did not answer within {} s ({e}): {}",
                            timeout.as_secs(),
                            self.log_tail(id)
                        )));
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    pub async fn qmp(&self, id: &str, command: &str, args: Value) -> Result<Value> {
        let run = self.running_or_err(id)?;
        let mut q = run.qmp.lock().await;
        Ok(q.execute(command, args).await?)
    }

    pub async fn pause(&self, id: &str) -> Result<()> {
        self.qmp(id, "stop", json!({})).await.map(|_| ())
    }

    pub async fn resume(&self, id: &str) -> Result<()> {
        self.qmp(id, "cont", json!({})).await.map(|_| ())
    }

    /// Waits for QEMU to exit, killing it after `grace`.
    async fn reap(&self, id: &str, run: &Running, grace: Duration) {
        let child = lock(&run.child).take();
        match child {
            Some(mut c) => {
                if tokio::time::timeout(grace, c.wait()).await.is_err() {
                    let _ = c.kill().await;
                }
            }
            None => {
                let deadline = Instant::now() + grace;
                while crate::sandbox::pid_alive(run.pid) && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                if let Some(p) = rustix::process::Pid::from_raw(run.pid as i32) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                }
                crate::sandbox::reap(run.pid);
            }
        }
        // QEMU cannot remove its pid file itself once it runs unprivileged.
        let _ = std::fs::remove_file(self.instance_dir(id).join("qemu.pid"));
        if let Some(u) = run.uid {
            lock(&self.uids).remove(&u);
        }
        lock(&self.running).remove(id);
    }

    /// Quits QEMU cleanly (disks flushed) and waits for it; kills it if it does not go.
    pub async fn quit(&self, id: &str) {
        let Some(run) = self.running(id) else { return };
        let _ = tokio::time::timeout(Duration::from_secs(10), async {
            let mut q = run.qmp.lock().await;
            let _ = q.execute("quit", json!({})).await;
        })
        .await;
        self.reap(id, &run, Duration::from_secs(20)).await;
    }

    pub async fn kill(&self, id: &str) {
        let Some(run) = self.running(id) else { return };
        if let Some(p) = rustix::process::Pid::from_raw(run.pid as i32) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
        self.reap(id, &run, Duration::from_secs(10)).await;
    }

    /// Saves the VM's memory to `file` with the VM stopped; QEMU stays (in postmigrate).
    /// QEMU writes to a descriptor the runtime opened and passed (`getfd`, then `fd:`): it may
    /// neither open the file itself (it runs unprivileged) nor spawn a shell for `exec:`
    /// (seccomp `spawn=deny`).
    async fn save_memory(&self, id: &str, file: &Path) -> Result<()> {
        let run = self.running_or_err(id)?;
        let mut q = run.qmp.lock().await;
        q.execute("stop", json!({})).await?;
        let _ = std::fs::remove_file(file);
        let out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(file)
            .map_err(|e| VmError::Failed(format!("creating {}: {e}", file.display())))?;
        q.send_fd(MIGRATION_FD, out.as_fd()).await?;
        drop(out);
        q.execute("migrate", json!({"uri": format!("fd:{MIGRATION_FD}")})).await?;
        q.wait_migration(Duration::from_secs(600)).await?;
        Ok(())
    }

    /// Starts QEMU waiting for a VM's state on `source` (a memory file, or one end of a live
    /// migration's socket pair; `block`: with the disk blocks that differ from the base). QEMU
    /// is killed again if it cannot take it.
    async fn incoming(
        &self,
        id: &str,
        cfg: &MachineConfig,
        source: std::os::fd::OwnedFd,
        block: bool,
    ) -> Result<Arc<Running>> {
        let run = self.spawn(id, cfg, true).await?;
        let r: Result<()> = async {
            let mut q = run.qmp.lock().await;
            if block {
                set_block_migration(&mut q, true).await?;
            }
            q.send_fd(MIGRATION_FD, source.as_fd()).await?;
            drop(source);
            q.execute("migrate-incoming", json!({"uri": format!("fd:{MIGRATION_FD}")})).await?;
            Ok(())
        }
        .await;
        if let Err(e) = r {
            self.kill(id).await;
            return Err(VmError::Failed(format!("waiting for the VM's state: {e}: {}", self.log_tail(id))));
        }
        Ok(run)
    }

    /// Starts QEMU from a memory file and runs it (or leaves it paused).
    async fn restore(&self, id: &str, cfg: &MachineConfig, file: &Path, run_after: bool) -> Result<Arc<Running>> {
        let input = std::fs::File::open(file)
            .map_err(|e| VmError::Failed(format!("opening the memory file {}: {e}", file.display())))?;
        let run = self.incoming(id, cfg, input.into(), false).await?;
        let r: Result<()> = async {
            let mut q = run.qmp.lock().await;
            q.wait_migration(Duration::from_secs(600)).await?;
            if run_after {
                q.execute("cont", json!({})).await?;
            }
            Ok(())
        }
        .await;
        if let Err(e) = r {
            self.kill(id).await;
            return Err(VmError::Failed(format!("restoring the VM's memory: {e}: {}", self.log_tail(id))));
        }
        Ok(run)
    }

    /// Live migration, source side: the VM's memory and its overlay's changed blocks (QEMU's
    /// incremental block migration: the base is the same image on both nodes) go out through
    /// `channel` while the VM runs; QEMU pauses it for the last pass and stays (postmigrate).
    /// QEMU's figures.
    pub async fn send_live(&self, id: &str, channel: std::os::fd::OwnedFd) -> Result<LiveStats> {
        let run = self.running_or_err(id)?;
        let mut q = run.qmp.lock().await;
        set_block_migration(&mut q, true).await?;
        let sent: Result<Value> = async {
            q.send_fd(MIGRATION_FD, channel.as_fd()).await?;
            drop(channel);
            q.execute("migrate", json!({"uri": format!("fd:{MIGRATION_FD}")})).await?;
            q.wait_migration(LIVE_TIMEOUT).await?;
            Ok(q.execute("query-migrate", json!({})).await?)
        }
        .await;
        // Hibernation and forks, later, move memory only.
        if let Err(e) = set_block_migration(&mut q, false).await {
            tracing::warn!(instance = id, error = %e, "turning block migration off again");
        }
        let v = sent?;
        let n = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
        Ok(LiveStats {
            total_ms: n("/total-time"),
            downtime_ms: n("/downtime"),
            memory_bytes: n("/ram/transferred"),
            disk_bytes: n("/disk/transferred"),
        })
    }

    /// Live migration, target side: a QEMU with the source's configuration (the devices must be
    /// the same) on a fresh overlay of the same base, waiting for the state on `channel`.
    pub async fn accept_live(&self, id: &str, cfg: &MachineConfig, channel: std::os::fd::OwnedFd) -> Result<()> {
        std::fs::create_dir_all(self.instance_dir(id))?;
        self.new_overlay(id, cfg).await?;
        self.save_config(id, cfg)?;
        self.incoming(id, cfg, channel, true).await.map(|_| ())
    }

    /// Live migration, target side, the end: waits for the whole state, then runs the VM (or
    /// leaves it paused). QEMU's pid.
    pub async fn finish_live(&self, id: &str, run_after: bool) -> Result<u32> {
        let run = self.running_or_err(id)?;
        let mut q = run.qmp.lock().await;
        q.wait_migration(LIVE_TIMEOUT).await?;
        set_block_migration(&mut q, false).await?;
        if run_after {
            q.execute("cont", json!({})).await?;
        }
        Ok(run.pid)
    }

    /// Waits for a running VM's guest agent to answer (after a live migration: the VM is not
    /// handed over before it is reachable).
    pub async fn agent_answers(&self, id: &str, timeout: Duration) -> Result<()> {
        let run = self.running_or_err(id)?;
        self.wait_agent(id, &run, timeout).await
    }

    /// After a live migration that did not end on the target: the source VM runs on, or again
    /// (QEMU resumes it by itself when the migration failed; not when the target failed after).
    pub async fn resume_after_live(&self, id: &str, run: bool) -> Result<()> {
        let running = self.running_or_err(id)?;
        let mut q = running.qmp.lock().await;
        let _ = q.execute("migrate_cancel", json!({})).await;
        if run && q.status().await? != "running" {
            q.execute("cont", json!({})).await?;
        }
        Ok(())
    }

    pub fn memory_file(&self, id: &str) -> PathBuf {
        self.instance_dir(id).join("memory.mig")
    }

    /// Hibernate: memory to a file, QEMU gone.
    pub async fn hibernate(&self, id: &str) -> Result<()> {
        let file = self.memory_file(id);
        if let Err(e) = self.save_memory(id, &file).await {
            let _ = self.resume(id).await;
            return Err(e);
        }
        self.quit(id).await;
        Ok(())
    }

    /// Restores a hibernated VM; it runs again where it stopped.
    pub async fn wake(&self, id: &str, cfg: &MachineConfig, paused: bool) -> Result<u32> {
        let file = self.memory_file(id);
        let run = self.restore(id, cfg, &file, !paused).await?;
        let _ = std::fs::remove_file(&file);
        Ok(run.pid)
    }

    /// Halt: the guest powers itself off (through its agent; ACPI as a fallback) and QEMU
    /// exits; the disk stays.
    pub async fn halt(&self, id: &str) -> Result<()> {
        let run = self.running_or_err(id)?;
        let _ = self.resume(id).await;
        let sent = run.ga.lock().await.send("guest-shutdown", json!({"mode": "powerdown"}), GA_TIMEOUT).await;
        if sent.is_ok() {
            let deadline = Instant::now() + Duration::from_secs(30);
            while crate::sandbox::pid_alive(run.pid) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        if crate::sandbox::pid_alive(run.pid) {
            // No agent, or one that could not power off: the ACPI power button, then QEMU goes.
            let _ = self.qmp(id, "system_powerdown", json!({})).await;
        }
        self.reap(id, &run, Duration::from_secs(30)).await;
        Ok(())
    }

    /// Stop: QEMU quits, and the overlay goes (the next start boots the image afresh).
    pub async fn stop(&self, id: &str, cfg: &MachineConfig) -> Result<()> {
        self.quit(id).await;
        let _ = std::fs::remove_file(self.memory_file(id));
        self.new_overlay(id, cfg).await
    }

    pub async fn destroy(&self, id: &str) -> Result<()> {
        self.kill(id).await;
        let dir = self.instance_dir(id);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        Ok(())
    }

    /// Adopts a QEMU that still runs after a runtime restart; its state (running or paused).
    pub async fn adopt(&self, id: &str) -> Option<(u32, bool)> {
        let dir = self.instance_dir(id);
        let pid: u32 = std::fs::read_to_string(dir.join("qemu.pid")).ok()?.trim().parse().ok()?;
        if !crate::sandbox::pid_alive(pid) {
            return None;
        }
        let mut qmp = Qmp::connect(&dir.join("qmp.sock"), Duration::from_secs(2)).await.ok()?;
        let status = qmp.status().await.ok()?;
        // Its uid stays taken while it runs.
        let uid = procfs::process::Process::new(pid as i32)
            .and_then(|p| p.status())
            .ok()
            .map(|s| s.ruid)
            .filter(|u| (VM_UID_BASE..VM_UID_BASE + VM_UID_COUNT).contains(u));
        if let Some(u) = uid {
            lock(&self.uids).insert(u);
        }
        let run = Arc::new(Running {
            pid,
            uid,
            netns: own_netns(pid),
            qmp: Mutex::new(qmp),
            ga: Mutex::new(GuestAgent::new(&dir.join("ga.sock"), pid)),
            polling: Mutex::new(()),
            procs: std::sync::Mutex::new(BTreeMap::new()),
            forwards: Mutex::new(BTreeMap::new()),
            child: std::sync::Mutex::new(None),
            vcpu_threads: tokio::sync::OnceCell::new(),
        });
        lock(&self.running).insert(id.to_string(), run);
        Some((pid, status == "running"))
    }

    // -------------------------------------------------------------------------------------
    // Guest operations

    async fn exec_raw(
        &self,
        id: &str,
        program: &str,
        args: &[String],
        env: &[String],
        input: Option<&[u8]>,
    ) -> Result<i64> {
        let run = self.running_or_err(id)?;
        let mut ga = run.ga.lock().await;
        Ok(ga.exec_start(program, args, env, input, true, false).await?)
    }

    async fn exec_poll(&self, id: &str, pid: i64) -> Result<ga::ExecStatus> {
        let run = self.running_or_err(id)?;
        let mut ga = run.ga.lock().await;
        Ok(ga.exec_status(pid).await?)
    }

    /// Runs a started command to its end (or `deadline`: then `None`).
    async fn collect(&self, id: &str, pid: i64, deadline: Option<Instant>) -> Result<Option<ga::ExecStatus>> {
        let mut pause = Duration::from_millis(2);
        loop {
            let st = self.exec_poll(id, pid).await?;
            if st.exited {
                return Ok(Some(st));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// Runs a command to completion in the guest. The qemu-guest-agent protocol hands the
    /// output over only at exit, whole (qemu-ga keeps at most 16 MiB of each stream itself):
    /// the runtime cuts it to `max_output` bytes then, so it does not keep more, but cannot stop
    /// the guest agent from buffering up to its own limit.
    pub async fn exec(&self, id: &str, req: &ExecRequest, max_output: u64) -> Result<ExecResult> {
        let (program, args) = guest_command(req)?;
        let env = guest_env(&req.env);
        let pid = self.exec_raw(id, &program, &args, &env, req.stdin.as_deref().map(str::as_bytes)).await?;
        let deadline = req.timeout_seconds.map(|t| Instant::now() + Duration::from_secs(t));
        match self.collect(id, pid, deadline).await? {
            Some(mut st) => {
                let cap = usize::try_from(max_output).unwrap_or(usize::MAX);
                let cut = st.stdout.len() > cap || st.stderr.len() > cap || st.truncated;
                st.stdout.truncate(cap);
                st.stderr.truncate(cap);
                Ok(ExecResult { truncated: cut, ..result_of(st) })
            }
            None => {
                let _ = self.signal(id, pid, "KILL").await;
                Ok(ExecResult {
                    exit_code: -1,
                    stdout: String::new(),
                    stderr: format!("timed out after {} s", req.timeout_seconds.unwrap_or(0)),
                    timed_out: true,
                    truncated: false,
                })
            }
        }
    }

    /// Runs a shell script as root with `args` as `$1…` and `input` on its standard input; its
    /// result (for the runtime's own chores; at most a minute).
    pub async fn script(&self, id: &str, script: &str, args: &[&str], input: Option<&[u8]>) -> Result<ExecResult> {
        let mut a = vec!["-c".to_string(), script.into(), "sh".into()];
        a.extend(args.iter().map(|s| s.to_string()));
        let pid = self.exec_raw(id, "/bin/sh", &a, &guest_env(&BTreeMap::new()), input).await?;
        match self.collect(id, pid, Some(Instant::now() + Duration::from_secs(60))).await? {
            Some(st) => Ok(result_of(st)),
            None => Err(VmError::Failed(format!("a guest chore did not finish within 60 s: {script}"))),
        }
    }

    async fn signal(&self, id: &str, pid: i64, signal: &str) -> Result<()> {
        let kill = self
            .exec_raw(id, "/bin/sh", &kill_args(signal, &pid.to_string()), &guest_env(&BTreeMap::new()), None)
            .await?;
        match self.collect(id, kill, Some(Instant::now() + Duration::from_secs(30))).await? {
            Some(st) if st.exit_code == Some(0) => Ok(()),
            Some(st) => Err(VmError::NotFound(format!(
                "signalling process {pid}: {}",
                String::from_utf8_lossy(&st.stderr).trim()
            ))),
            None => Err(VmError::Failed(format!("signalling process {pid} did not finish"))),
        }
    }

    /// A command streamed both ways (`exec -i`, `exec -it`): started through kairon-agent with
    /// its stdin kept open, on a terminal of `tty` (columns, rows) when given; its guest pid.
    pub async fn attach(&self, id: &str, req: &ExecRequest, tty: Option<(u16, u16)>) -> Result<i64> {
        let (program, args) = guest_command(req)?;
        let run = self.running_or_err(id)?;
        let mut ga = run.ga.lock().await;
        let env = guest_env(&req.env);
        let started = match tty {
            Some(size) => ga.exec_start_tty(&program, &args, &env, size).await,
            None => ga.exec_start(&program, &args, &env, None, true, true).await,
        };
        started.map_err(|e| {
            VmError::Conflict(format!("a streamed exec on a VM needs Kairon's guest agent (kairon-agent): {e}"))
        })
    }

    /// An attached command's output from the offsets given (what kairon-agent read so far).
    pub async fn attached_output(&self, id: &str, pid: i64, out: u64, err: u64) -> Result<ga::ExecOutput> {
        let run = self.running_or_err(id)?;
        Ok(run.ga.lock().await.exec_output(pid, out, err).await?)
    }

    /// Writes to an attached command's stdin (`close`: then closes it).
    pub async fn attached_input(&self, id: &str, pid: i64, data: &[u8], close: bool) -> Result<()> {
        let run = self.running_or_err(id)?;
        Ok(run.ga.lock().await.exec_input(pid, data, close).await?)
    }

    /// Resizes an attached command's terminal.
    pub async fn attached_resize(&self, id: &str, pid: i64, size: (u16, u16)) -> Result<()> {
        let run = self.running_or_err(id)?;
        Ok(run.ga.lock().await.exec_resize(pid, size).await?)
    }

    /// An attached command's state; once it exited, what it wrote that was not yet read.
    pub async fn attached_status(&self, id: &str, pid: i64) -> Result<ga::ExecStatus> {
        self.exec_poll(id, pid).await
    }

    /// Ends an attached command the client left: its process group (a terminal's session leader
    /// leads one of its own) or itself, then collects it so the guest agent forgets it.
    pub async fn detach(&self, id: &str, pid: i64, group: bool) {
        let target = if group { format!("-{pid}") } else { pid.to_string() };
        if let Ok(kill) =
            self.exec_raw(id, "/bin/sh", &kill_args("KILL", &target), &guest_env(&BTreeMap::new()), None).await
        {
            let _ = self.collect(id, kill, Some(Instant::now() + Duration::from_secs(10))).await;
        }
        let _ = self.collect(id, pid, Some(Instant::now() + Duration::from_secs(10))).await;
    }

    pub async fn start_process(&self, id: &str, req: &ExecRequest) -> Result<Process> {
        let (program, args) = guest_command(req)?;
        let input = req.stdin.as_deref().map(str::as_bytes);
        let pid = if req.keep_stdin_open {
            let run = self.running_or_err(id)?;
            let mut ga = run.ga.lock().await;
            ga.exec_start(&program, &args, &guest_env(&req.env), input, true, true).await.map_err(|e| {
                VmError::Failed(format!(
                    "a kept-open stdin needs Kairon's guest agent (kairon-agent) in the image: {e}"
                ))
            })?
        } else {
            self.exec_raw(id, &program, &args, &guest_env(&req.env), input).await?
        };
        let meta = Process {
            id: kairon_runtime_api::Pid::number(pid),
            command: req.command.clone(),
            state: ProcessState::Running,
            exit_code: None,
            started_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        };
        let run = self.running_or_err(id)?;
        lock(&run.procs).insert(
            meta.id.to_string(),
            ProcRecord { meta: meta.clone(), guest_pid: pid, stdout: String::new(), stderr: String::new() },
        );
        Ok(meta)
    }

    async fn refresh(&self, id: &str, pid: &str) -> Result<ProcRecord> {
        let run = self.running_or_err(id)?;
        let _polling = run.polling.lock().await;
        let rec = lock(&run.procs)
            .get(pid)
            .cloned()
            .ok_or_else(|| VmError::NotFound(format!("no background process {pid:?} in this VM")))?;
        if rec.meta.state == ProcessState::Exited {
            return Ok(rec);
        }
        let st = self.exec_poll(id, rec.guest_pid).await?;
        if !st.exited {
            return Ok(rec);
        }
        let mut procs = lock(&run.procs);
        let r = procs.get_mut(pid).expect("present above");
        r.meta.state = ProcessState::Exited;
        r.meta.exit_code = st.exit_code.or(st.signal.map(|s| 128 + s));
        r.stdout = String::from_utf8_lossy(&st.stdout).into_owned();
        r.stderr = String::from_utf8_lossy(&st.stderr).into_owned();
        Ok(r.clone())
    }

    pub async fn processes(&self, id: &str) -> Result<Vec<Process>> {
        let Some(run) = self.running(id) else { return Ok(vec![]) };
        let ids: Vec<String> = lock(&run.procs).keys().cloned().collect();
        let mut out = Vec::new();
        for p in ids {
            out.push(self.refresh(id, &p).await?.meta);
        }
        Ok(out)
    }

    pub async fn process(&self, id: &str, pid: &str) -> Result<Process> {
        Ok(self.refresh(id, pid).await?.meta)
    }

    /// One output stream of a background process from byte `offset`: while it runs, what
    /// kairon-agent has read so far (`kairon-exec-output`); a stock qemu-ga's only at exit.
    pub async fn log_chunk(&self, id: &str, pid: &str, stderr: bool, offset: u64) -> Result<LogChunk> {
        let r = self.refresh(id, pid).await?;
        if r.meta.state == ProcessState::Running {
            let run = self.running_or_err(id)?;
            let mut ga = run.ga.lock().await;
            let (out_from, err_from) = if stderr { (0, offset) } else { (offset, 0) };
            return Ok(match ga.exec_output(r.guest_pid, out_from, err_from).await {
                Ok(o) if stderr => LogChunk::from_bytes(&o.stderr, offset),
                Ok(o) => LogChunk::from_bytes(&o.stdout, offset),
                // A stock qemu-ga (no such command), or the process just ended: nothing new yet.
                Err(_) => LogChunk::from_bytes(&[], offset),
            });
        }
        let text = if stderr { r.stderr } else { r.stdout };
        let from = usize::try_from(offset).unwrap_or(usize::MAX).min(text.len());
        Ok(LogChunk::from_bytes(&text.as_bytes()[from..], from as u64))
    }

    /// Output of a background process: the qemu-guest-agent protocol delivers it at exit.
    pub async fn logs(&self, id: &str, pid: &str) -> Result<(String, String)> {
        let r = self.refresh(id, pid).await?;
        Ok((r.stdout, r.stderr))
    }

    pub async fn wait_process(&self, id: &str, pid: &str, timeout: Duration) -> Result<Process> {
        let deadline = Instant::now() + timeout;
        loop {
            let r = self.refresh(id, pid).await?;
            if r.meta.state == ProcessState::Exited || Instant::now() >= deadline {
                return Ok(r.meta);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Writes to a process's kept-open stdin (kairon-agent's `kairon-exec-input`).
    pub async fn write_stdin(&self, id: &str, pid: &str, data: Vec<u8>, close: bool) -> Result<()> {
        let r = self.refresh(id, pid).await?;
        if r.meta.state == ProcessState::Exited {
            return Err(VmError::StdinClosed(format!("process {pid} has exited: its stdin is closed")));
        }
        let run = self.running_or_err(id)?;
        let mut ga = run.ga.lock().await;
        ga.exec_input(r.guest_pid, &data, close).await.map_err(|e| VmError::StdinClosed(format!("process {pid}: {e}")))
    }

    pub async fn kill_process(&self, id: &str, pid: &str, signal: &str) -> Result<()> {
        let r = self.refresh(id, pid).await?;
        if r.meta.state == ProcessState::Exited {
            return Ok(());
        }
        self.signal(id, r.guest_pid, signal).await
    }

    /// Opens `path` in the guest: its bytes, read a chunk at a time as the caller takes them.
    /// The guest agent is held for one chunk at a time, so other calls go on in between.
    pub async fn read_file(&self, id: &str, path: &str) -> Result<ByteStream> {
        check_path(path)?;
        let run = self.running_or_err(id)?;
        let handle = run.ga.lock().await.file_open(path, "r").await?;
        let file = GaFile { run, handle, open: true };
        Ok(futures::stream::unfold(Some(file), |file| async move {
            let file = file?;
            let read = file.run.ga.lock().await.file_read(file.handle, CHUNK).await;
            match read {
                Ok((chunk, eof)) if eof || chunk.is_empty() => {
                    file.close().await;
                    (!chunk.is_empty()).then(|| (Ok(Bytes::from(chunk)), None))
                }
                Ok((chunk, _)) => Some((Ok(Bytes::from(chunk)), Some(file))),
                Err(e) => {
                    file.close().await;
                    Some((Err(std::io::Error::other(e.to_string())), None))
                }
            }
        })
        .boxed())
    }

    /// Writes `path` in the guest from `data` as it arrives, into a temporary file beside it
    /// that one shell step then puts in its place (`mode` when given, else the old file's, else
    /// 644): an upload that breaks off leaves the old file as it was. The bytes written.
    pub async fn write_file(&self, id: &str, path: &str, mut data: ByteStream, mode: Option<u32>) -> Result<u64> {
        check_path(path)?;
        let run = self.running_or_err(id)?;
        let parent = Path::new(path).parent().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let temp = format!("{}/.kairon-upload-{}", parent.trim_end_matches('/'), uuid::Uuid::new_v4().simple());
        let opened = run.ga.lock().await.file_open(&temp, "w").await;
        let handle = match opened {
            Ok(h) => h,
            Err(GaError::Command { desc, .. }) if desc.contains("No such file") => {
                self.script(id, "mkdir -p -- \"$1\"", &[&parent], None).await?;
                run.ga.lock().await.file_open(&temp, "w").await?
            }
            Err(e) => return Err(e.into()),
        };
        let file = GaFile { run, handle, open: true };
        let mut written = 0u64;
        let copied: Result<()> = async {
            while let Some(chunk) = data.next().await {
                let chunk = chunk.map_err(|e| VmError::Invalid(crate::files::broken(path, e).to_string()))?;
                for part in chunk.chunks(CHUNK) {
                    file.run.ga.lock().await.file_write(file.handle, part).await?;
                }
                written += chunk.len() as u64;
            }
            Ok(())
        }
        .await;
        file.close().await;
        let placed = match copied {
            Ok(()) => {
                let mode = mode.map(|m| format!("{m:o}")).unwrap_or_default();
                self.script(id, PUT_IN_PLACE, &[&temp, path, &mode], None).await
            }
            Err(e) => Err(e),
        };
        match placed {
            Ok(r) if r.exit_code == 0 => Ok(written),
            failed => {
                let _ = self.script(id, "rm -f -- \"$1\"", &[&temp], None).await;
                match failed? {
                    r if r.exit_code == 2 => Err(VmError::Invalid(r.stderr.trim().to_string())),
                    r => Err(VmError::Failed(format!("putting {path} in place: {}", r.stderr.trim()))),
                }
            }
        }
    }

    pub async fn list_files(&self, id: &str, path: &str) -> Result<Vec<FileEntry>> {
        check_path(path)?;
        let r = self
            .script(id, "test -d \"$1\" || { echo \"$1 is not a directory\" >&2; exit 2; }; find \"$1\" -mindepth 1 -maxdepth 1 -printf '%f\\0%s\\0%m\\0%y\\0%l\\0%T@\\0'", &[path], None)
            .await?;
        if r.exit_code != 0 {
            return Err(VmError::NotFound(r.stderr.trim().to_string()));
        }
        let mut out = found_entries(&r.stdout);
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// What is at `path` (a symlink itself, with its target), as `find -printf` says it.
    pub async fn file_info(&self, id: &str, path: &str) -> Result<FileEntry> {
        check_path(path)?;
        let script = "test -e \"$1\" || test -L \"$1\" || { echo \"$1: No such file or directory\" >&2; exit 2; }; \
                      find \"$1\" -maxdepth 0 -printf '%f\\0%s\\0%m\\0%y\\0%l\\0%T@\\0'";
        let r = self.script(id, script, &[path], None).await?;
        if r.exit_code != 0 {
            return Err(VmError::NotFound(r.stderr.trim().to_string()));
        }
        found_entries(&r.stdout)
            .pop()
            .ok_or_else(|| VmError::NotFound(format!("{path}: the guest said nothing about it")))
    }

    /// Moves `from` to `to` in the guest (`mv -T`: never into a directory at `to`).
    pub async fn rename_file(&self, id: &str, from: &str, to: &str) -> Result<()> {
        check_path(from)?;
        check_path(to)?;
        let script = "test -e \"$1\" || test -L \"$1\" || { echo \"$1: No such file or directory\" >&2; exit 2; }; \
                      mv -T -- \"$1\" \"$2\" || exit 3";
        let r = self.script(id, script, &[from, to], None).await?;
        match r.exit_code {
            0 => Ok(()),
            2 => Err(VmError::NotFound(r.stderr.trim().to_string())),
            _ => Err(VmError::Conflict(format!("moving {from} to {to}: {}", r.stderr.trim()))),
        }
    }

    /// Removes a file, an empty directory, or with `recursive` a directory and all in it.
    pub async fn delete_file(&self, id: &str, path: &str, recursive: bool) -> Result<()> {
        check_path(path)?;
        if path.trim_end_matches('/').is_empty() {
            return Err(VmError::Invalid("refusing to delete /".into()));
        }
        let script = "test -e \"$1\" || test -L \"$1\" || { echo \"$1: No such file or directory\" >&2; exit 2; }; \
                      if [ -d \"$1\" ] && [ ! -L \"$1\" ]; then \
                        if [ \"$2\" = recursive ]; then rm -rf -- \"$1\"; else rmdir -- \"$1\" 2>/dev/null || exit 3; fi; \
                      else rm -f -- \"$1\"; fi";
        let how = if recursive { "recursive" } else { "one" };
        let r = self.script(id, script, &[path, how], None).await?;
        match r.exit_code {
            0 => Ok(()),
            3 => Err(VmError::Conflict(format!(
                "{path:?} is a directory that is not empty: remove it with recursive=true"
            ))),
            _ => Err(VmError::NotFound(r.stderr.trim().to_string())),
        }
    }

    pub async fn stats(&self, id: &str) -> Stats {
        let Some(run) = self.running(id) else { return Stats::default() };
        let mut s = Stats { vmm_pid: Some(run.pid), process_count: 1, ..Default::default() };
        let ns_per_tick = 1_000_000_000 / procfs::ticks_per_second();
        if let Ok(p) = procfs::process::Process::new(run.pid as i32)
            && let Ok(st) = p.stat()
        {
            s.memory_bytes = st.rss * procfs::page_size();
            // The guest's own work is what its vCPU threads run. QEMU's other threads (main loop,
            // I/O, timers) cost CPU of their own, under TCG enough to make a quiet guest look
            // busy at the default idle threshold. Without the thread ids, the whole process.
            let threads = run.vcpu_threads.get_or_try_init(|| vcpu_thread_ids(&run)).await.ok();
            let vcpu_ticks: Option<u64> = threads.filter(|t| !t.is_empty()).and_then(|tids| {
                tids.iter()
                    .map(|&tid| p.task_from_tid(tid).and_then(|t| t.stat()).ok().map(|st| st.utime + st.stime))
                    .sum()
            });
            s.cpu_time_nanos = vcpu_ticks.unwrap_or(st.utime + st.stime) * ns_per_tick;
        }
        if let Ok(v) = self.qmp(id, "query-blockstats", json!({})).await
            && let Some(devs) = v.as_array()
        {
            for d in devs {
                s.disk_read_bytes += d["stats"]["rd_bytes"].as_u64().unwrap_or(0);
                s.disk_write_bytes += d["stats"]["wr_bytes"].as_u64().unwrap_or(0);
            }
        }
        s
    }

    /// Guest filesystems frozen (`guest-fsfreeze-freeze`); how many.
    pub async fn freeze(&self, id: &str) -> Result<i64> {
        let run = self.running_or_err(id)?;
        let v = run.ga.lock().await.call("guest-fsfreeze-freeze", Value::Null, Duration::from_secs(120)).await?;
        Ok(v.as_i64().unwrap_or(0))
    }

    pub async fn thaw(&self, id: &str) -> Result<i64> {
        let run = self.running_or_err(id)?;
        let v = run.ga.lock().await.call("guest-fsfreeze-thaw", Value::Null, Duration::from_secs(60)).await?;
        Ok(v.as_i64().unwrap_or(0))
    }

    pub async fn freeze_status(&self, id: &str) -> Result<String> {
        let run = self.running_or_err(id)?;
        let v = run.ga.lock().await.call("guest-fsfreeze-status", Value::Null, GA_TIMEOUT).await?;
        Ok(v.as_str().unwrap_or("unknown").to_string())
    }

    /// A port on 127.0.0.1 that QEMU forwards to `guest_port` in the guest: in the VM's own
    /// network namespace, the guest port's own number; else a free host port.
    pub async fn forward(&self, id: &str, guest_port: u16) -> Result<u16> {
        let run = self.running_or_err(id)?;
        let mut fw = run.forwards.lock().await;
        if let Some(p) = fw.get(&guest_port) {
            return Ok(*p);
        }
        if run.netns {
            let mut q = run.qmp.lock().await;
            let rule = format!("tcp:127.0.0.1:{guest_port}-:{guest_port}");
            let out =
                q.execute("human-monitor-command", json!({"command-line": format!("hostfwd_add net0 {rule}")})).await?;
            let text = out.as_str().unwrap_or("").trim().to_string();
            // Refused when it exists already: a QEMU adopted after a runtime restart keeps
            // the forwards an earlier runtime added.
            let exists = text.is_empty()
                || q.execute("human-monitor-command", json!({"command-line": "info usernet"}))
                    .await
                    .ok()
                    .and_then(|v| v.as_str().map(|s| usernet_forwards(s).contains(&guest_port)))
                    .unwrap_or(false);
            if exists {
                fw.insert(guest_port, guest_port);
                return Ok(guest_port);
            }
            return Err(VmError::Failed(format!("forwarding guest port {guest_port}: {text}")));
        }
        for _ in 0..5 {
            let host_port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let out = run
                .qmp
                .lock()
                .await
                .execute(
                    "human-monitor-command",
                    json!({"command-line": format!("hostfwd_add net0 tcp:127.0.0.1:{host_port}-:{guest_port}")}),
                )
                .await?;
            let text = out.as_str().unwrap_or("");
            if text.trim().is_empty() {
                fw.insert(guest_port, host_port);
                return Ok(host_port);
            }
            tracing::debug!(%text, "hostfwd_add refused, trying another port");
        }
        Err(VmError::Failed(format!("could not forward a host port to guest port {guest_port}")))
    }

    /// How the runtime dials `guest_port`: inside QEMU's network namespace (when it has its
    /// own) or at the forwarded port on the host's loopback.
    pub async fn target(&self, id: &str, guest_port: u16) -> Result<crate::proxy::Target> {
        if let Some(net) = self.config(id)?.guest_net {
            // On the guest network: its address, from the node side.
            let netns = self.node_netns.get().cloned().flatten();
            return Ok(crate::proxy::Target::InNetns { netns, addr: std::net::SocketAddr::from((net.ip, guest_port)) });
        }
        let port = self.forward(id, guest_port).await?;
        let run = self.running_or_err(id)?;
        Ok(if run.netns {
            crate::proxy::Target::Netns(run.pid)
        } else {
            crate::proxy::Target::Addr(std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port)))
        })
    }

    pub fn socket(&self, id: &str, name: &str) -> PathBuf {
        self.instance_dir(id).join(name)
    }

    /// Fork, first half: the parent's memory into `child_dir/memory.mig` and its overlay into
    /// `child_dir/disk.qcow2`, with the parent stopped only for that long.
    pub async fn snapshot_into(&self, id: &str, child_id: &str, was_running: bool) -> Result<()> {
        let child_dir = self.instance_dir(child_id);
        std::fs::create_dir_all(&child_dir)?;
        let file = self.memory_file(child_id);
        let saved = self.save_memory(id, &file).await;
        let copied = match &saved {
            Ok(()) => std::fs::copy(self.overlay(id), self.overlay(child_id)).map(|_| ()).map_err(VmError::from),
            Err(_) => Ok(()),
        };
        if was_running {
            self.resume(id).await?;
        }
        saved?;
        copied
    }

    /// Fork, second half: the child runs from the copied memory and disk.
    pub async fn start_copy(&self, child_id: &str, cfg: &MachineConfig) -> Result<u32> {
        let file = self.memory_file(child_id);
        let run = self.restore(child_id, cfg, &file, true).await?;
        let _ = std::fs::remove_file(&file);
        Ok(run.pid)
    }

    /// Gives a copy its own identity (see [`REIDENTIFY`]).
    pub async fn reidentify(&self, id: &str, cfg: &MachineConfig) -> Result<()> {
        let entropy: [u8; 64] = rand::random();
        let (ip, gw) = match &cfg.guest_net {
            Some(n) => (n.ip.to_string(), n.gateway.to_string()),
            None => (String::new(), String::new()),
        };
        let r =
            self.script(id, REIDENTIFY, &[&cfg.machine_id, &cfg.hostname, &cfg.mac, &ip, &gw], Some(&entropy)).await?;
        if r.exit_code != 0 {
            return Err(VmError::Failed(format!("re-identifying the guest: {} {}", r.stdout.trim(), r.stderr.trim())));
        }
        Ok(())
    }

    /// Clone: the disk as it is now (guest filesystems frozen and QEMU stopped for the copy, so
    /// it is consistent) into `child_id`'s overlay.
    pub async fn copy_disk(&self, id: &str, child_id: &str, running: bool) -> Result<()> {
        std::fs::create_dir_all(self.instance_dir(child_id))?;
        let frozen = running && self.freeze(id).await.is_ok();
        if running {
            self.pause(id).await?;
        }
        let copied = std::fs::copy(self.overlay(id), self.overlay(child_id));
        if running {
            self.resume(id).await?;
        }
        if frozen {
            let _ = self.thaw(id).await;
        }
        copied?;
        Ok(())
    }
}

/// How long a live migration may take end to end (TCG, a large guest).
const LIVE_TIMEOUT: Duration = Duration::from_secs(900);

/// Turns QEMU's (incremental) block migration on or off: with it, a migration also carries the
/// disk blocks that differ from the base image; the speed limit is lifted (QEMU 7.2 allows 32
/// MiB/s by default) and the last pass may pause the guest for up to 300 ms.
async fn set_block_migration(q: &mut Qmp, on: bool) -> std::result::Result<(), QmpError> {
    q.execute("migrate-set-capabilities", json!({"capabilities": [{"capability": "block", "state": on}]})).await?;
    let mut params = json!({"block-incremental": on});
    if on {
        params["max-bandwidth"] = json!(8u64 << 30);
        params["downtime-limit"] = json!(300);
    }
    q.execute("migrate-set-parameters", params).await?;
    Ok(())
}

/// The loopback ports of the host forwards in HMP `info usernet` output.
fn usernet_forwards(info: &str) -> Vec<u16> {
    info.lines()
        .filter(|l| l.contains("HOST_FORWARD"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let i = f.iter().position(|w| *w == "127.0.0.1")?;
            f.get(i + 1)?.parse().ok()
        })
        .collect()
}

/// The host CPU's clock in kHz (from /proc/cpuinfo), 2 GHz when unknown.
fn host_tsc_khz() -> u64 {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("cpu MHz"))
                .and_then(|l| l.split(':').nth(1))
                .and_then(|v| v.trim().parse::<f64>().ok())
        })
        .map(|mhz| (mhz * 1000.0).round() as u64)
        .filter(|k| *k > 0)
        .unwrap_or(2_000_000)
}

fn result_of(st: ga::ExecStatus) -> ExecResult {
    ExecResult {
        exit_code: st.exit_code.unwrap_or_else(|| 128 + st.signal.unwrap_or(0)),
        stdout: String::from_utf8_lossy(&st.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&st.stderr).into_owned(),
        timed_out: false,
        truncated: st.truncated,
    }
}

/// The entries `find -printf '%f\0%s\0%m\0%y\0%l\0%T@\0'` wrote.
fn found_entries(out: &str) -> Vec<FileEntry> {
    let fields: Vec<&str> = out.split('\0').collect();
    fields
        .chunks(6)
        .filter(|c| c.len() == 6)
        .map(|f| {
            let (secs, frac) = f[5].split_once('.').unwrap_or((f[5], "0"));
            let nanos = format!("{frac:0<9}").get(..9).and_then(|n| n.parse().ok()).unwrap_or(0);
            FileEntry {
                name: f[0].to_string(),
                size: f[1].parse().unwrap_or(0),
                mode: u32::from_str_radix(f[2], 8).unwrap_or(0),
                is_dir: f[3] == "d",
                link_target: (f[3] == "l").then(|| f[4].to_string()),
                modified: secs.parse().ok().and_then(|s| crate::files::file_time(s, nanos)),
            }
        })
        .collect()
}

fn check_path(path: &str) -> Result<()> {
    if !path.starts_with('/') {
        return Err(VmError::Invalid(format!("path {path:?} must be absolute inside the guest")));
    }
    Ok(())
}

async fn qemu_img(args: &[&str]) -> Result<()> {
    let out = tokio::process::Command::new("qemu-img")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| VmError::Failed(format!("running qemu-img: {e} (install the qemu-utils package)")))?;
    if !out.status.success() {
        return Err(VmError::Failed(format!(
            "qemu-img {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// Kills every QEMU whose files lie under `dir` (a runtime's state dir, or a data dir that
/// holds one): tests clean up with it.
pub fn kill_all_under(dir: &Path) {
    let needle = format!("{}/", dir.to_string_lossy().trim_end_matches('/'));
    let Ok(all) = procfs::process::all_processes() else { return };
    for p in all.flatten() {
        let Ok(cmd) = p.cmdline() else { continue };
        if cmd.first().is_some_and(|c| c.ends_with(QEMU)) && cmd.iter().any(|a| a.contains(&needle)) {
            if let Some(pid) = rustix::process::Pid::from_raw(p.pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            crate::sandbox::reap(p.pid as u32);
        }
    }
}

/// Puts an uploaded temporary file ($1) in the place of $2 with mode $3 (empty: the old file's
/// mode and owner, else 644). Exit 2: $2 is a directory.
const PUT_IN_PLACE: &str = r#"t=$1 p=$2 m=$3
if [ -d "$p" ]; then echo "$p is a directory" >&2; exit 2; fi
if [ -n "$m" ]; then chmod "$m" -- "$t" || exit 1
elif [ -e "$p" ]; then chmod --reference="$p" -- "$t" 2>/dev/null; chown --reference="$p" -- "$t" 2>/dev/null
else chmod 644 -- "$t"; fi
mv -f -- "$t" "$p""#;

/// A file the guest agent holds open: closed when done with, or (dropped early, e.g. a
/// download the client left) in the background, so the guest agent's handles do not leak.
struct GaFile {
    run: Arc<Running>,
    handle: i64,
    open: bool,
}

impl GaFile {
    async fn close(mut self) {
        self.open = false;
        let _ = self.run.ga.lock().await.file_close(self.handle).await;
    }
}

impl Drop for GaFile {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        let (run, handle) = (self.run.clone(), self.handle);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = run.ga.lock().await.file_close(handle).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_printf_entries_read_with_their_times() {
        let out = "a.txt\x005\x00640\x00f\x00\x001765100000.2500000000\x00l\x007\x00777\x00l\x00/etc\x001765100001\x00";
        let got = found_entries(out);
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].name.as_str(), got[0].size, got[0].mode, got[0].is_dir), ("a.txt", 5, 0o640, false));
        assert_eq!(got[0].modified.as_deref(), Some("2025-12-07T09:33:20.250Z"));
        assert_eq!(got[1].link_target.as_deref(), Some("/etc"));
        assert_eq!(got[1].modified.as_deref(), Some("2025-12-07T09:33:21.000Z"));
    }

    #[test]
    fn a_console_log_past_its_cap_rotates_and_tails_read_only_their_end() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("console.log");
        let cap = 1 << 20;
        std::fs::write(&log, vec![b'a'; cap as usize]).unwrap();
        assert!(!rotate_log(&log, cap).unwrap(), "at the cap: kept");
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        std::io::Write::write_all(&mut f, b"b").unwrap();
        assert!(rotate_log(&log, cap).unwrap(), "one byte past it: rotated");
        assert_eq!(std::fs::metadata(&log).unwrap().len(), 0);
        assert_eq!(std::fs::metadata(dir.path().join("console.log.1")).unwrap().len(), cap + 1);
        // The appending writer carries on at the start of the emptied file.
        std::io::Write::write_all(&mut f, b"after\n").unwrap();
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "after\n");
        let tail = read_tail(&dir.path().join("console.log.1"), 4);
        assert_eq!(tail, "aaab");
        assert_eq!(read_tail(&dir.path().join("missing"), 4), "");
    }

    #[test]
    fn usernet_forwards_reads_the_loopback_ports_of_host_forwards() {
        // `info usernet` of QEMU 7.2 with one forward and one guest connection.
        let info = "Hub -1 (net0):\r\n  Protocol[State]    FD  Source Address  Port   Dest. Address  Port RecvQ SendQ\r\n  TCP[HOST_FORWARD]  11       127.0.0.1    22       10.0.2.15    22     0     0\r\n  TCP[ESTABLISHED]   14       10.0.2.15 40000        10.0.2.2  8080     0     0\r\n";
        assert_eq!(usernet_forwards(info), vec![22]);
        assert!(usernet_forwards("Hub -1 (net0):\r\n").is_empty());
    }

    #[test]
    fn qemu_is_confined_by_its_arguments() {
        let host = VmHost::new(Path::new("/var/lib/kairon"));
        let cfg = MachineConfig {
            image: "/img.qcow2".into(),
            kernel: Some("/img.vmlinuz".into()),
            initrd: None,
            cmdline: None,
            vcpus: 1,
            memory_mib: 256,
            mac: "52:54:00:00:00:01".into(),
            hostname: "h".into(),
            machine_id: "m".into(),
            volumes: BTreeMap::new(),
            guest_net: None,
        };
        let a = host.args("id", &cfg, Accel::Tcg, true, Some(VM_USER)).join(" ");
        assert!(a.contains(" -runas kairon-vm -sandbox on,obsolete=deny,spawn=deny,resourcecontrol=deny "), "{a}");
        assert!(a.ends_with(" -incoming defer"), "the memory comes later, through a passed descriptor: {a}");
        assert!(!a.contains("exec:"), "{a}");
        // A runtime that is not root: QEMU already runs unprivileged, and set*id is denied too.
        let a = host.args("id", &cfg, Accel::Tcg, false, None).join(" ");
        assert!(!a.contains("-runas"), "{a}");
        assert!(
            a.contains(" -sandbox on,obsolete=deny,spawn=deny,resourcecontrol=deny,elevateprivileges=deny "),
            "{a}"
        );
    }
}
