//! The runc sandbox host as a [`Backend`]: power through the cgroup freezer and runc, exec
//! through the agent inside (see `agent`), background processes and streams through `runc exec`,
//! files through the container's root filesystem. No memory image to save
//! and no guest kernel: hibernate, halt, live fork, disk clone and filesystem freeze are refused.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::OwnedMutexGuard;

use super::SandboxHost;
use crate::api::{ExecRequest, ExecResult, FileEntry, LogChunk, PowerAction, Process, Stats, Vm, VmState};
use crate::backend::{Backend, Footprint, Op, allocated_bytes, network_bytes};
use crate::engine::{BUSYBOX_TEMPLATE, Runtime, RuntimeError};
use crate::files::{self, ByteStream, FileRead};
use crate::proxy::Target;

type Result<T> = std::result::Result<T, RuntimeError>;

impl SandboxHost {
    /// The merged root of a sandbox that exists (not one still being created).
    fn root_of(&self, vm: &Vm) -> Result<PathBuf> {
        if vm.state == VmState::Creating {
            return Err(RuntimeError::Conflict(format!("{} is still being created", vm.name)));
        }
        Ok(self.rootfs(&vm.id))
    }

    /// Runs a blocking file operation on the sandbox's root.
    async fn on_root<T: Send + 'static>(
        &self,
        vm: &Vm,
        f: impl FnOnce(PathBuf) -> std::result::Result<T, super::fs::FsError> + Send + 'static,
    ) -> Result<T> {
        let root = self.root_of(vm)?;
        Ok(tokio::task::spawn_blocking(move || f(root)).await.map_err(|e| RuntimeError::Internal(e.to_string()))??)
    }

    async fn power_sandbox(&self, rt: &Runtime, vm: &mut Vm, action: PowerAction, paused: bool) -> Result<()> {
        match (action, vm.state) {
            (PowerAction::Pause, VmState::Running) => {
                self.set_frozen(&vm.id, true).await?;
                vm.state = VmState::Paused;
            }
            (PowerAction::Pause, VmState::Paused) | (PowerAction::Resume, VmState::Running) => {}
            (PowerAction::Resume, VmState::Paused) => {
                self.set_frozen(&vm.id, false).await?;
                vm.state = VmState::Running;
            }
            (PowerAction::Stop, VmState::Stopped) => {}
            (PowerAction::Stop, _) => {
                SandboxHost::stop(self, &vm.id).await?;
                vm.state = VmState::Stopped;
                vm.pid = None;
            }
            (PowerAction::Start, VmState::Running | VmState::Paused) if !paused => {}
            (PowerAction::Start | PowerAction::Restart, _) => {
                SandboxHost::stop(self, &vm.id).await?;
                let template = rt.template(vm.template.as_deref().unwrap_or(BUSYBOX_TEMPLATE))?;
                let was = vm.spec.start_paused;
                vm.spec.start_paused = paused;
                let r = rt.boot(vm, &template).await;
                vm.spec.start_paused = was;
                r?;
            }
            (a, s) => {
                return Err(RuntimeError::Conflict(format!("cannot {a:?} an instance that is {s:?}")));
            }
        }
        Ok(())
    }

    /// Copies a sandbox into a new one named `name`: its files as they are now (the source is
    /// frozen for the copy so it is consistent), in a fresh sandbox from the same template.
    /// Processes are not copied — a runc sandbox has no live fork (CRIU fails on this kernel);
    /// a live fork is the VM backend's.
    async fn fork_files(&self, rt: &Runtime, id: &str, name: &str) -> Result<Vm> {
        let slot = rt.slot(id)?;
        let source = slot.lock().await;
        let upper = self.upper_dir(&source.id);
        let staging = rt.state_dir().join("instances").join(format!(".fork-{}", uuid::Uuid::new_v4().simple()));
        let freeze = source.state == VmState::Running;
        if freeze {
            self.set_frozen(&source.id, true).await?;
        }
        let copied = copy_tree(&upper, &staging).await;
        if freeze {
            self.set_frozen(&source.id, false).await?;
        }
        copied?;
        let mut req = source.spec.clone();
        req.name = name.to_string();
        req.start_paused = false;
        drop(source);
        let result = rt.create_seeded(req, Some(crate::engine::Seed::Copy(staging.clone()))).await;
        let _ = std::fs::remove_dir_all(&staging);
        result
    }

    /// Writes the sandbox's root filesystem as it is now to a tar file at `target` (the source
    /// is frozen meanwhile, so the export is consistent). Returns the bytes written.
    async fn export(&self, vm: &Vm, target: &Path) -> Result<u64> {
        let root = self.root_of(vm)?;
        let freeze = vm.state == VmState::Running;
        if freeze {
            self.set_frozen(&vm.id, true).await?;
        }
        let tmp = target.with_extension("partial");
        let (root2, tmp2) = (root.clone(), tmp.clone());
        // Owners as the guest sees them (host ids of its range back to 0..65535), so the tar
        // makes sense as an image layer anywhere.
        let map = self.idmap(&vm.id);
        let written = tokio::task::spawn_blocking(move || -> std::io::Result<u64> {
            let file = std::fs::File::create(&tmp2)?;
            let file = super::write_tar(&root2, file, map.as_ref())?;
            file.sync_all()?;
            Ok(file.metadata()?.len())
        })
        .await
        .map_err(|e| RuntimeError::Internal(e.to_string()));
        if freeze {
            self.set_frozen(&vm.id, false).await?;
        }
        let written = written?.map_err(|e| RuntimeError::Internal(format!("writing the snapshot: {e}")))?;
        std::fs::rename(&tmp, target)?;
        Ok(written)
    }

    /// After a restart: what runc still runs of the sandbox.
    async fn adopt_sandbox(&self, vm: &mut Vm) -> Result<()> {
        let st = self.state(&vm.id).await?;
        let (state, pid) = match st {
            Some(s) if s.status == "paused" || self.is_frozen(&vm.id) => (VmState::Paused, Some(s.pid)),
            Some(s) if s.status == "running" => (VmState::Running, Some(s.pid)),
            _ if vm.state == VmState::Stopped => (VmState::Stopped, None),
            _ => {
                vm.message = Some("the sandbox was not running when the runtime restarted".into());
                (VmState::Failed, None)
            }
        };
        vm.state = state;
        vm.pid = pid;
        Ok(())
    }
}

impl Backend for SandboxHost {
    fn adopt<'a>(&'a self, vm: &'a mut Vm) -> Op<'a, ()> {
        Box::pin(self.adopt_sandbox(vm))
    }

    fn power<'a>(&'a self, rt: &'a Runtime, vm: &'a mut Vm, action: PowerAction, paused: bool) -> Op<'a, ()> {
        Box::pin(self.power_sandbox(rt, vm, action, paused))
    }

    fn destroy<'a>(&'a self, vm: &'a Vm) -> Op<'a, ()> {
        Box::pin(async move { Ok(SandboxHost::destroy(self, &vm.id).await?) })
    }

    fn exec<'a>(&'a self, vm: &'a Vm, req: &'a ExecRequest, max_output: u64) -> Op<'a, ExecResult> {
        Box::pin(async move { Ok(SandboxHost::exec(self, &vm.id, req, max_output).await?) })
    }

    fn start_process<'a>(&'a self, vm: &'a Vm, req: &'a ExecRequest) -> Op<'a, Process> {
        Box::pin(async move { Ok(SandboxHost::start_process(self, &vm.id, req).await?) })
    }

    fn processes<'a>(&'a self, vm: &'a Vm) -> Op<'a, Vec<Process>> {
        Box::pin(async move { Ok(SandboxHost::processes(self, &vm.id)?) })
    }

    fn process<'a>(&'a self, vm: &'a Vm, pid: &'a str) -> Op<'a, Process> {
        Box::pin(async move { Ok(SandboxHost::process(self, &vm.id, pid)?) })
    }

    fn logs<'a>(&'a self, vm: &'a Vm, pid: &'a str) -> Op<'a, (String, String)> {
        Box::pin(async move { Ok(SandboxHost::logs(self, &vm.id, pid)?) })
    }

    fn log_chunk<'a>(&'a self, vm: &'a Vm, pid: &'a str, stderr: bool, offset: u64) -> Op<'a, LogChunk> {
        Box::pin(async move { Ok(SandboxHost::log_chunk(self, &vm.id, pid, stderr, offset)?) })
    }

    fn wait_process<'a>(&'a self, vm: &'a Vm, pid: &'a str, timeout: Duration) -> Op<'a, Process> {
        Box::pin(async move { Ok(SandboxHost::wait_process(self, &vm.id, pid, timeout).await?) })
    }

    fn kill_process<'a>(&'a self, vm: &'a Vm, pid: &'a str, signal: &'a str) -> Op<'a, ()> {
        Box::pin(async move { Ok(SandboxHost::kill_process(self, &vm.id, pid, signal).await?) })
    }

    fn write_stdin<'a>(&'a self, vm: &'a Vm, pid: &'a str, data: Vec<u8>, close: bool) -> Op<'a, ()> {
        Box::pin(async move { Ok(SandboxHost::write_stdin(self, &vm.id, pid, data, close).await?) })
    }

    fn read_file<'a>(&'a self, vm: &'a Vm, path: &'a str) -> Op<'a, FileRead> {
        let path = path.to_string();
        Box::pin(async move {
            let (file, len) = self.on_root(vm, move |root| super::fs::open_read(&root, &path)).await?;
            // Exactly the size announced (a file that grows meanwhile is cut there; one that
            // shrinks ends the response early, which the client sees as an error).
            let file = tokio::io::AsyncReadExt::take(tokio::fs::File::from_std(file), len);
            Ok(FileRead { len: Some(len), body: files::chunks(file) })
        })
    }

    fn write_file<'a>(&'a self, vm: &'a Vm, path: &'a str, data: ByteStream, mode: Option<u32>) -> Op<'a, u64> {
        let owner = self.guest_root(&vm.id);
        Box::pin(async move {
            let p = path.to_string();
            let (upload, file) =
                self.on_root(vm, move |root| super::fs::Upload::create(&root, &p, mode, owner)).await?;
            let mut file = tokio::fs::File::from_std(file);
            // On an error the upload is dropped uncommitted: the old file stays as it was.
            let n = files::copy_in(data, &mut file, path).await?;
            drop(file);
            tokio::task::spawn_blocking(move || upload.commit())
                .await
                .map_err(|e| RuntimeError::Internal(e.to_string()))??;
            Ok(n)
        })
    }

    fn list_files<'a>(&'a self, vm: &'a Vm, path: &'a str) -> Op<'a, Vec<FileEntry>> {
        let path = path.to_string();
        Box::pin(self.on_root(vm, move |root| super::fs::list_dir(&root, &path)))
    }

    fn delete_file<'a>(&'a self, vm: &'a Vm, path: &'a str, recursive: bool) -> Op<'a, ()> {
        let path = path.to_string();
        Box::pin(self.on_root(vm, move |root| super::fs::remove(&root, &path, recursive)))
    }

    fn file_info<'a>(&'a self, vm: &'a Vm, path: &'a str) -> Op<'a, FileEntry> {
        let path = path.to_string();
        Box::pin(self.on_root(vm, move |root| super::fs::info(&root, &path)))
    }

    fn rename_file<'a>(&'a self, vm: &'a Vm, from: &'a str, to: &'a str) -> Op<'a, ()> {
        let (from, to) = (from.to_string(), to.to_string());
        Box::pin(self.on_root(vm, move |root| super::fs::rename(&root, &from, &to)))
    }

    fn fork<'a>(&'a self, rt: &'a Runtime, id: &'a str, name: &'a str) -> Op<'a, Vm> {
        Box::pin(self.fork_files(rt, id, name))
    }

    fn clone_disk<'a>(&'a self, _rt: &'a Runtime, _source: &'a Vm, _name: &'a str) -> Op<'a, Vm> {
        Box::pin(async {
            Err(RuntimeError::NotSupported(
                "clone copies a VM's disk: for a sandbox use fork, which copies its files".into(),
            ))
        })
    }

    fn snapshot<'a>(&'a self, vm: &'a Vm, target: &'a Path) -> Op<'a, u64> {
        Box::pin(self.export(vm, target))
    }

    fn guest_target<'a>(&'a self, vm: &'a Vm, _port: u16) -> Op<'a, Target> {
        Box::pin(async move {
            let pid = vm.pid.ok_or_else(|| RuntimeError::Conflict(format!("{} has no running process", vm.name)))?;
            Ok(match vm.guest_ip.as_deref().and_then(|ip| ip.parse().ok()) {
                Some(ip) => Target::Guest { pid, ip },
                None => Target::Netns(pid),
            })
        })
    }

    fn stats<'a>(&'a self, vm: &'a Vm) -> BoxFuture<'a, Stats> {
        Box::pin(async move { SandboxHost::stats(self, &vm.id, vm.pid) })
    }

    /// Its writable layer, and the interfaces of its network namespace (read through its init).
    fn footprint<'a>(&'a self, vm: &'a Vm) -> BoxFuture<'a, Footprint> {
        let upper = self.upper_dir(&vm.id);
        let pid = vm.pid;
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let net = pid
                    .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/net/dev")).ok())
                    .and_then(|text| network_bytes(&text));
                Footprint {
                    disk_used_bytes: Some(allocated_bytes(&upper)),
                    network_rx_bytes: net.map(|n| n.0),
                    network_tx_bytes: net.map(|n| n.1),
                }
            })
            .await
            .unwrap_or_default()
        })
    }

    fn freeze<'a>(&'a self, _vm: &'a Vm) -> Op<'a, i64> {
        Box::pin(async {
            Err(RuntimeError::NotSupported(
                "filesystem freeze needs a guest agent in a VM: a sandbox shares the host kernel's filesystems; pause it instead".into(),
            ))
        })
    }

    fn thaw<'a>(&'a self, _vm: &'a Vm) -> Op<'a, i64> {
        Box::pin(async { Err(RuntimeError::NotSupported("a sandbox has no frozen filesystems to thaw".into())) })
    }

    fn freeze_status<'a>(&'a self, _vm: &'a Vm) -> Op<'a, String> {
        Box::pin(async { Err(RuntimeError::NotSupported("a sandbox has no guest filesystems to freeze".into())) })
    }

    fn socket(&self, _vm: &Vm, which: &str) -> Result<PathBuf> {
        Err(RuntimeError::NotSupported(format!("{which} is a VM's: a sandbox has none")))
    }

    fn claimed(&self, _rt: &Runtime, _vm: OwnedMutexGuard<Vm>) {
        // Nothing to renew: each member is its own runc container started from the template,
        // with no guest kernel or booted image whose identity the claimer would share.
    }
}

/// `cp -a` keeps what an overlay upper dir holds: ownership, modes, xattrs (opaque markers)
/// and whiteout device nodes.
pub(crate) async fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    if !from.exists() {
        return Ok(());
    }
    let out =
        tokio::process::Command::new("cp").arg("-a").arg(format!("{}/.", from.display())).arg(to).output().await?;
    if !out.status.success() {
        return Err(RuntimeError::Internal(format!(
            "copying the sandbox's files: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}
