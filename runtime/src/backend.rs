//! The backends behind one [`Runtime`]: the runc sandbox host ([`crate::sandbox::SandboxHost`])
//! and the QEMU host ([`crate::vm::VmHost`]), each a [`Backend`].
//!
//! The wire format keeps `Vm::backend` a string (`runc` or `qemu`, FluxVM v1); the engine reads
//! it once per call into a [`BackendKind`], picks that kind's [`Backend`] with
//! [`Runtime::backend`] and calls it. What one backend cannot do, its implementation refuses
//! with the error the API answers (e.g. hibernate on runc, a filesystem freeze in a sandbox).

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::BoxFuture;
use kairon_model::PowerState;
use kairon_model::power::{self, Refusal, Track};
use tokio::sync::OwnedMutexGuard;

use crate::api::{
    BACKEND_QEMU, BACKEND_RUNC, ExecRequest, ExecResult, FileEntry, LogChunk, PowerAction, Process, Stats, Vm, VmState,
};
use crate::engine::{Runtime, RuntimeError};
use crate::files::{ByteStream, FileRead};
use crate::proxy::Target;

/// [`Backend::footprint`]: each part `None` where the backend cannot tell.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    pub disk_used_bytes: Option<u64>,
    pub network_rx_bytes: Option<u64>,
    pub network_tx_bytes: Option<u64>,
}

/// Received and sent bytes summed over the interfaces of a `/proc/<pid>/net/dev` text other
/// than loopback; `None` when there is none (a sandbox with no network).
pub fn network_bytes(net_dev: &str) -> Option<(u64, u64)> {
    let mut found = None;
    // Two header lines, then `  name: rx_bytes rx_packets … (8 receive fields) tx_bytes …`.
    for line in net_dev.lines().skip(2) {
        let Some((name, counters)) = line.split_once(':') else { continue };
        if name.trim() == "lo" {
            continue;
        }
        let fields: Vec<u64> = counters.split_whitespace().filter_map(|f| f.parse().ok()).collect();
        if let (Some(rx), Some(tx)) = (fields.first(), fields.get(8)) {
            let (r, t) = found.unwrap_or((0, 0));
            found = Some((r + rx, t + tx));
        }
    }
    found
}

/// Bytes allocated to `path` and, for a directory, everything under it (symlinks not followed;
/// what vanishes meanwhile is skipped).
pub fn allocated_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&p) else { continue };
        total += meta.blocks() * 512;
        if meta.is_dir()
            && let Ok(entries) = std::fs::read_dir(&p)
        {
            stack.extend(entries.flatten().map(|e| e.path()));
        }
    }
    total
}

/// What a backend's operation returns: a boxed future, so a [`Backend`] is usable as `dyn`.
pub type Op<'a, T> = BoxFuture<'a, Result<T, RuntimeError>>;

/// The per-instance operations the engine hands to the backend that runs the instance. The
/// engine has found the instance, holds its lock where the operation needs it, and checks
/// what is the same for every backend (e.g. that it runs, that a signal name is known); the
/// backend does the rest, or refuses.
pub trait Backend: Send + Sync {
    /// After a runtime restart: sets `vm.state` and `vm.pid` from what still runs.
    fn adopt<'a>(&'a self, vm: &'a mut Vm) -> Op<'a, ()>;

    /// One power action on the locked instance `vm` (`paused`: start or restart paused). Sets
    /// `vm.state` and `vm.pid`; the engine saves the record afterwards.
    fn power<'a>(&'a self, rt: &'a Runtime, vm: &'a mut Vm, action: PowerAction, paused: bool) -> Op<'a, ()>;

    /// Removes everything the backend holds for `vm` (processes, disks, sockets).
    fn destroy<'a>(&'a self, vm: &'a Vm) -> Op<'a, ()>;

    /// Runs a command to completion, keeping at most `max_output` bytes of each stream.
    fn exec<'a>(&'a self, vm: &'a Vm, req: &'a ExecRequest, max_output: u64) -> Op<'a, ExecResult>;
    fn start_process<'a>(&'a self, vm: &'a Vm, req: &'a ExecRequest) -> Op<'a, Process>;
    fn processes<'a>(&'a self, vm: &'a Vm) -> Op<'a, Vec<Process>>;
    fn process<'a>(&'a self, vm: &'a Vm, pid: &'a str) -> Op<'a, Process>;
    fn logs<'a>(&'a self, vm: &'a Vm, pid: &'a str) -> Op<'a, (String, String)>;
    fn log_chunk<'a>(&'a self, vm: &'a Vm, pid: &'a str, stderr: bool, offset: u64) -> Op<'a, LogChunk>;
    fn wait_process<'a>(&'a self, vm: &'a Vm, pid: &'a str, timeout: Duration) -> Op<'a, Process>;
    fn kill_process<'a>(&'a self, vm: &'a Vm, pid: &'a str, signal: &'a str) -> Op<'a, ()>;
    /// Writes to a process's kept-open stdin (`ExecRequest::keep_stdin_open`); `close` closes it.
    fn write_stdin<'a>(&'a self, vm: &'a Vm, pid: &'a str, data: Vec<u8>, close: bool) -> Op<'a, ()>;

    /// Opens a guest file: its bytes stream as the caller reads them.
    fn read_file<'a>(&'a self, vm: &'a Vm, path: &'a str) -> Op<'a, FileRead>;
    /// Writes a guest file from `data` as it arrives, replacing what is there (`mode`: default
    /// the existing file's, else 644); the bytes written.
    fn write_file<'a>(&'a self, vm: &'a Vm, path: &'a str, data: ByteStream, mode: Option<u32>) -> Op<'a, u64>;
    fn list_files<'a>(&'a self, vm: &'a Vm, path: &'a str) -> Op<'a, Vec<FileEntry>>;
    fn delete_file<'a>(&'a self, vm: &'a Vm, path: &'a str, recursive: bool) -> Op<'a, ()>;
    fn file_info<'a>(&'a self, vm: &'a Vm, path: &'a str) -> Op<'a, FileEntry>;
    fn rename_file<'a>(&'a self, vm: &'a Vm, from: &'a str, to: &'a str) -> Op<'a, ()>;

    /// A copy of instance `id` named `name`: live (memory and disk) on a VM, its files on a
    /// sandbox.
    fn fork<'a>(&'a self, rt: &'a Runtime, id: &'a str, name: &'a str) -> Op<'a, Vm>;
    /// A new instance named `name` that boots fresh from a copy of `source`'s disk (held
    /// locked by the engine meanwhile).
    fn clone_disk<'a>(&'a self, rt: &'a Runtime, source: &'a Vm, name: &'a str) -> Op<'a, Vm>;
    /// Exports the instance's root filesystem as a tar file at `target`; the bytes written.
    fn snapshot<'a>(&'a self, vm: &'a Vm, target: &'a Path) -> Op<'a, u64>;

    /// How the host reaches `port` in the running instance.
    fn guest_target<'a>(&'a self, vm: &'a Vm, port: u16) -> Op<'a, Target>;
    fn stats<'a>(&'a self, vm: &'a Vm) -> BoxFuture<'a, Stats>;
    /// What the instance takes on the node's disk and has moved over its network, measured now
    /// (slower than [`Backend::stats`]: asked for by a person, not by every tick).
    fn footprint<'a>(&'a self, vm: &'a Vm) -> BoxFuture<'a, Footprint>;

    /// Freezes the guest's filesystems; how many.
    fn freeze<'a>(&'a self, vm: &'a Vm) -> Op<'a, i64>;
    /// Thaws them; how many.
    fn thaw<'a>(&'a self, vm: &'a Vm) -> Op<'a, i64>;
    fn freeze_status<'a>(&'a self, vm: &'a Vm) -> Op<'a, String>;

    /// The unix socket of the instance's serial console (`console.sock`) or VNC server.
    fn socket(&self, vm: &Vm, which: &str) -> Result<PathBuf, RuntimeError>;

    /// After a pool claim handed `vm` over (still locked): whatever the copy needs before
    /// the claimer's first command, which waits for the lock.
    fn claimed(&self, rt: &Runtime, vm: OwnedMutexGuard<Vm>);
}

impl Runtime {
    /// The backend that runs `vm`.
    pub(crate) fn backend(&self, vm: &Vm) -> &dyn Backend {
        self.backend_of(BackendKind::of(vm))
    }

    pub(crate) fn backend_of(&self, kind: BackendKind) -> &dyn Backend {
        match kind {
            BackendKind::Runc => &self.inner.host,
            BackendKind::Qemu => &self.inner.vms,
        }
    }
}

/// The backend of an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// A runc sandbox from a template (`runtime/src/sandbox/`).
    Runc,
    /// A QEMU VM (`runtime/src/vm/`): the full track and the microvm sandbox track.
    Qemu,
}

impl BackendKind {
    /// The wire name (`Vm::backend`).
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Runc => BACKEND_RUNC,
            BackendKind::Qemu => BACKEND_QEMU,
        }
    }

    /// Reads a record's `backend`. Only QEMU VMs carry `qemu`; every other record this
    /// runtime wrote is a runc sandbox (as the engine has always read them).
    pub fn parse(backend: &str) -> BackendKind {
        match backend {
            BACKEND_QEMU => BackendKind::Qemu,
            _ => BackendKind::Runc,
        }
    }

    /// The backend of an instance record.
    pub fn of(vm: &Vm) -> BackendKind {
        BackendKind::parse(&vm.backend)
    }

    /// The power track of `model::power` this backend runs (which power states it can hold).
    pub fn track(self) -> Track {
        match self {
            BackendKind::Runc => Track::TemplateSandbox,
            BackendKind::Qemu => Track::Vm,
        }
    }

    /// Whether a fork copies the running guest (memory and disk), not only its files.
    pub fn forks_live(self) -> bool {
        self == BackendKind::Qemu
    }

    /// Whether `action` may change an instance of this backend that is `state`: what
    /// `model::power::plan` says of the states before and after, for the runtime as for the API
    /// and the node agent. A restart, and an instance still being created or failed, are the
    /// backend's to judge (no desired power state describes them).
    pub fn check_transition(self, state: VmState, action: PowerAction, paused: bool) -> Result<(), RuntimeError> {
        let Some(have) = state.power_state() else { return Ok(()) };
        if action == PowerAction::Restart {
            return Ok(());
        }
        match power::plan(action.target(paused), have, self.track()) {
            Ok(_) => Ok(()),
            Err(Refusal::NeedsVm { to }) => Err(RuntimeError::NotSupported(format!(
                "the sandbox backend (runc) cannot {}: it has no memory image to save and no guest to power off; use pause (keeps memory, uses no CPU) or stop",
                if to == PowerState::Hibernated { "hibernate" } else { "halt" }
            ))),
            Err(refusal @ Refusal::Invalid { .. }) => {
                Err(RuntimeError::Conflict(format!("cannot {action:?} this {self} instance: {refusal}")))
            }
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime refuses exactly the changes the planner refuses, on each backend's track:
    /// Hibernated and Halted on runc (NotSupported), and what no track allows (Conflict: a halt
    /// of a paused or stopped guest, a hibernate of one that is not booted).
    #[test]
    fn transitions_are_the_planners() {
        let actions = [
            PowerAction::Start,
            PowerAction::Stop,
            PowerAction::Pause,
            PowerAction::Resume,
            PowerAction::Hibernate,
            PowerAction::Halt,
        ];
        for kind in [BackendKind::Runc, BackendKind::Qemu] {
            for state in [VmState::Running, VmState::Paused, VmState::Stopped, VmState::Hibernated, VmState::Halted] {
                let have = state.power_state().unwrap();
                for action in actions {
                    for paused in [false, true] {
                        let planned = power::plan(action.target(paused), have, kind.track());
                        let checked = kind.check_transition(state, action, paused);
                        match (planned, checked) {
                            (Ok(_), Ok(())) => {}
                            (Err(Refusal::NeedsVm { .. }), Err(RuntimeError::NotSupported(_))) => {}
                            (Err(Refusal::Invalid { .. }), Err(RuntimeError::Conflict(_))) => {}
                            (p, c) => {
                                panic!("{kind} {state:?} {action:?} paused={paused}: planner {p:?}, runtime {c:?}")
                            }
                        }
                    }
                }
                assert!(kind.check_transition(state, PowerAction::Restart, false).is_ok(), "restart is the backend's");
            }
            for state in [VmState::Creating, VmState::Failed] {
                assert!(actions.iter().all(|a| kind.check_transition(state, *a, false).is_ok()), "{state:?}");
            }
        }
        assert!(matches!(
            BackendKind::Qemu.check_transition(VmState::Paused, PowerAction::Halt, false),
            Err(RuntimeError::Conflict(_))
        ));
    }

    #[test]
    fn wire_names_round_trip() {
        for kind in [BackendKind::Runc, BackendKind::Qemu] {
            assert_eq!(BackendKind::parse(kind.as_str()), kind);
            assert_eq!(kind.to_string(), kind.as_str());
        }
        assert_eq!(BackendKind::Runc.as_str(), "runc");
        assert_eq!(BackendKind::Qemu.as_str(), "qemu");
    }

    #[test]
    fn tracks_and_live_fork() {
        assert_eq!(BackendKind::Runc.track(), Track::TemplateSandbox);
        assert_eq!(BackendKind::Qemu.track(), Track::Vm);
        assert!(BackendKind::Qemu.forks_live());
        assert!(!BackendKind::Runc.forks_live());
    }

    #[test]
    fn network_bytes_sum_every_interface_but_loopback() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo:     100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0\n  \
eth0:    5000      10    0    0    0     0          0         0     7000      12    0    0    0     0       0          0\n  \
eth1:      20       1    0    0    0     0          0         0       30       1    0    0    0     0       0          0\n";
        assert_eq!(network_bytes(text), Some((5020, 7030)));
        let only_lo = text.lines().take(3).collect::<Vec<_>>().join("\n");
        assert_eq!(network_bytes(&only_lo), None);
    }

    #[test]
    fn allocated_bytes_count_a_tree() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/f"), vec![1u8; 64 * 1024]).unwrap();
        assert!(allocated_bytes(dir.path()) >= 64 * 1024);
        assert_eq!(allocated_bytes(&dir.path().join("none")), 0);
    }
}
