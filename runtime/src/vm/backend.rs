//! The QEMU host as a [`Backend`]: power through QMP (pause, hibernate, halt, boot), guest
//! operations through the guest agent, live fork and disk clone. A root-filesystem snapshot is
//! a sandbox's and refused here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::OwnedMutexGuard;

use super::{VmHost, hostname_for, random_mac, random_machine_id};
use crate::api::{ExecRequest, ExecResult, FileEntry, LogChunk, PowerAction, Process, Stats, Vm, VmState};
use crate::backend::{Backend, Footprint, Op, allocated_bytes};
use crate::engine::{Runtime, RuntimeError, require_running, valid_name};
use crate::files::{ByteStream, FileRead};
use crate::proxy::Target;

type Result<T> = std::result::Result<T, RuntimeError>;

impl VmHost {
    async fn power_vm(&self, rt: &Runtime, vm: &mut Vm, action: PowerAction, paused: bool) -> Result<()> {
        let cfg = self.config(&vm.id)?;
        let id = vm.id.clone();
        match (action, vm.state) {
            (PowerAction::Pause, VmState::Running) => {
                self.pause(&id).await?;
                vm.state = VmState::Paused;
            }
            (PowerAction::Pause, VmState::Paused) | (PowerAction::Resume, VmState::Running) => {}
            (PowerAction::Resume, VmState::Paused) => {
                self.resume(&id).await?;
                vm.state = VmState::Running;
            }
            (PowerAction::Hibernate, VmState::Hibernated) | (PowerAction::Halt, VmState::Halted) => {}
            (PowerAction::Hibernate, VmState::Running | VmState::Paused) => {
                self.hibernate(&id).await?;
                vm.state = VmState::Hibernated;
                vm.pid = None;
            }
            (PowerAction::Halt, VmState::Running | VmState::Paused) => {
                self.halt(&id).await?;
                vm.state = VmState::Halted;
                vm.pid = None;
            }
            (PowerAction::Stop, VmState::Stopped) => {}
            (PowerAction::Stop, _) => {
                self.stop(&id, &cfg).await?;
                vm.state = VmState::Stopped;
                vm.pid = None;
            }
            (PowerAction::Start | PowerAction::Resume, VmState::Hibernated) => {
                let pid = self.wake(&id, &cfg, paused).await?;
                vm.pid = Some(pid);
                vm.state = if paused { VmState::Paused } else { VmState::Running };
            }
            (PowerAction::Start, VmState::Running) if !paused => {}
            (PowerAction::Start, VmState::Paused) if paused => {}
            (PowerAction::Start, VmState::Paused) => {
                self.resume(&id).await?;
                vm.state = VmState::Running;
            }
            (PowerAction::Start, VmState::Running) => {
                self.pause(&id).await?;
                vm.state = VmState::Paused;
            }
            (PowerAction::Start | PowerAction::Resume, VmState::Halted | VmState::Stopped | VmState::Failed)
            | (PowerAction::Restart, _) => {
                self.quit(&id).await;
                rt.boot_vm(vm, &cfg, paused).await?;
            }
            (a, s) => {
                return Err(RuntimeError::Conflict(format!("cannot {a:?} a VM that is {s:?}")));
            }
        }
        Ok(())
    }

    /// Live fork: a copy of the VM's memory and disk, running as a new VM with its own identity.
    async fn fork_live(&self, rt: &Runtime, id: &str, name: &str) -> Result<Vm> {
        if !valid_name(name) {
            return Err(RuntimeError::Invalid(format!("name {name:?} must be a lowercase DNS name")));
        }
        let slot = rt.slot(id)?;
        let parent = slot.lock().await;
        let running = match parent.state {
            VmState::Running => true,
            VmState::Paused => false,
            s => {
                return Err(RuntimeError::Conflict(format!(
                    "{} is {s:?}: a live fork needs a running or paused VM",
                    parent.name
                )));
            }
        };
        let mut cfg = self.config(&parent.id)?;
        let mut req = parent.spec.clone();
        req.name = name.to_string();
        req.start_paused = false;
        let (_child_slot, mut child) = rt.register(rt.new_vm_record(req)).await?;
        let child_id = child.id.clone();
        cfg.mac = random_mac();
        cfg.machine_id = random_machine_id();
        cfg.hostname = hostname_for(name);
        // Volumes are the parent's own disks: the copy gets copies of them.
        let r: Result<()> = async {
            // Its own address on the guest network (re-identification gives it to the guest).
            if cfg.guest_net.is_some() {
                let addr = rt.lease_guest_addr(&child_id)?;
                child.guest_ip = Some(addr.ip.to_string());
                cfg.guest_net = Some(addr);
            }
            std::fs::create_dir_all(self.instance_dir(&child_id))?;
            let mut vols = std::collections::BTreeMap::new();
            for (vname, file) in &cfg.volumes {
                let to = self.instance_dir(&child_id).join(format!("vol-{vname}.qcow2"));
                vols.insert(vname.clone(), to.to_string_lossy().into_owned());
                if file.ends_with(".qcow2") {
                    tokio::fs::copy(file, &to).await?;
                }
            }
            rt.save(&child)?;
            self.snapshot_into(&parent.id, &child_id, running).await?;
            // Copied volumes only after the parent flushed them (the snapshot stopped it).
            cfg.volumes = vols;
            self.save_config(&child_id, &cfg)?;
            let pid = self.start_copy(&child_id, &cfg).await?;
            child.pid = Some(pid);
            child.state = VmState::Running;
            self.reidentify(&child_id, &cfg).await?;
            if !running {
                self.pause(&child_id).await?;
                child.state = VmState::Paused;
            }
            rt.save(&child)
        }
        .await;
        drop(parent);
        if let Err(e) = r {
            drop(child);
            rt.forget_vm(&child_id).await;
            return Err(e);
        }
        Ok(child.clone())
    }

    /// Clone: a new VM that boots fresh from a copy of `source`'s disk.
    async fn clone_from(&self, rt: &Runtime, source: &Vm, name: &str) -> Result<Vm> {
        let mut cfg = self.config(&source.id)?;
        let running = source.state == VmState::Running || source.state == VmState::Paused;
        let mut req = source.spec.clone();
        req.name = name.to_string();
        req.start_paused = false;
        req.ttl_seconds = None;
        let (_s, mut vm) = rt.register(rt.new_vm_record(req)).await?;
        let id = vm.id.clone();
        cfg.mac = random_mac();
        cfg.machine_id = random_machine_id();
        cfg.hostname = hostname_for(name);
        cfg.volumes.clear();
        let r: Result<()> = async {
            if cfg.guest_net.is_some() {
                let addr = rt.lease_guest_addr(&id)?;
                vm.guest_ip = Some(addr.ip.to_string());
                cfg.guest_net = Some(addr);
            }
            self.copy_disk(&source.id, &id, running && source.state == VmState::Running).await?;
            rt.save(&vm)?;
            let spec = vm.spec.clone();
            // The new VM gets fresh volumes of its own; its root disk is the copy.
            let disk = self.instance_dir(&id).join("disk.qcow2");
            let keep = self.instance_dir(&id).join("disk.copy");
            std::fs::rename(&disk, &keep)?;
            self.prepare_disks(&id, &spec, &mut cfg).await?;
            std::fs::rename(&keep, &disk)?;
            rt.boot_vm(&mut vm, &cfg, false).await
        }
        .await;
        if let Err(e) = r {
            drop(vm);
            rt.forget_vm(&id).await;
            return Err(e);
        }
        Ok(vm.clone())
    }

    /// After a restart: whether the VM's QEMU still runs, and whether its guest is paused.
    async fn adopt_vm(&self, vm: &mut Vm) -> Result<()> {
        match VmHost::adopt(self, &vm.id).await {
            Some((pid, running)) => {
                vm.pid = Some(pid);
                vm.state = if running { VmState::Running } else { VmState::Paused };
            }
            None => {
                vm.pid = None;
                if !matches!(vm.state, VmState::Stopped | VmState::Hibernated | VmState::Halted) {
                    vm.message = Some("the VM's QEMU was not running when the runtime restarted".into());
                    vm.state = VmState::Failed;
                }
            }
        }
        Ok(())
    }
}

impl Backend for VmHost {
    fn adopt<'a>(&'a self, vm: &'a mut Vm) -> Op<'a, ()> {
        Box::pin(self.adopt_vm(vm))
    }

    fn power<'a>(&'a self, rt: &'a Runtime, vm: &'a mut Vm, action: PowerAction, paused: bool) -> Op<'a, ()> {
        Box::pin(self.power_vm(rt, vm, action, paused))
    }

    fn destroy<'a>(&'a self, vm: &'a Vm) -> Op<'a, ()> {
        Box::pin(async move { Ok(VmHost::destroy(self, &vm.id).await?) })
    }

    fn exec<'a>(&'a self, vm: &'a Vm, req: &'a ExecRequest, max_output: u64) -> Op<'a, ExecResult> {
        Box::pin(async move { Ok(VmHost::exec(self, &vm.id, req, max_output).await?) })
    }

    fn start_process<'a>(&'a self, vm: &'a Vm, req: &'a ExecRequest) -> Op<'a, Process> {
        Box::pin(async move { Ok(VmHost::start_process(self, &vm.id, req).await?) })
    }

    fn processes<'a>(&'a self, vm: &'a Vm) -> Op<'a, Vec<Process>> {
        Box::pin(async move { Ok(VmHost::processes(self, &vm.id).await?) })
    }

    fn process<'a>(&'a self, vm: &'a Vm, pid: &'a str) -> Op<'a, Process> {
        Box::pin(async move { Ok(VmHost::process(self, &vm.id, pid).await?) })
    }

    fn logs<'a>(&'a self, vm: &'a Vm, pid: &'a str) -> Op<'a, (String, String)> {
        Box::pin(async move { Ok(VmHost::logs(self, &vm.id, pid).await?) })
    }

    fn log_chunk<'a>(&'a self, vm: &'a Vm, pid: &'a str, stderr: bool, offset: u64) -> Op<'a, LogChunk> {
        Box::pin(async move { Ok(VmHost::log_chunk(self, &vm.id, pid, stderr, offset).await?) })
    }

    fn wait_process<'a>(&'a self, vm: &'a Vm, pid: &'a str, timeout: Duration) -> Op<'a, Process> {
        Box::pin(async move { Ok(VmHost::wait_process(self, &vm.id, pid, timeout).await?) })
    }

    fn kill_process<'a>(&'a self, vm: &'a Vm, pid: &'a str, signal: &'a str) -> Op<'a, ()> {
        Box::pin(async move { Ok(VmHost::kill_process(self, &vm.id, pid, signal).await?) })
    }

    fn write_stdin<'a>(&'a self, vm: &'a Vm, pid: &'a str, data: Vec<u8>, close: bool) -> Op<'a, ()> {
        Box::pin(async move { Ok(VmHost::write_stdin(self, &vm.id, pid, data, close).await?) })
    }

    // Files go through the guest agent, so the guest must be running.

    fn read_file<'a>(&'a self, vm: &'a Vm, path: &'a str) -> Op<'a, FileRead> {
        Box::pin(async move {
            require_running(vm)?;
            Ok(FileRead { len: None, body: VmHost::read_file(self, &vm.id, path).await? })
        })
    }

    fn write_file<'a>(&'a self, vm: &'a Vm, path: &'a str, data: ByteStream, mode: Option<u32>) -> Op<'a, u64> {
        Box::pin(async move {
            require_running(vm)?;
            Ok(VmHost::write_file(self, &vm.id, path, data, mode).await?)
        })
    }

    fn list_files<'a>(&'a self, vm: &'a Vm, path: &'a str) -> Op<'a, Vec<FileEntry>> {
        Box::pin(async move {
            require_running(vm)?;
            Ok(VmHost::list_files(self, &vm.id, path).await?)
        })
    }

    fn delete_file<'a>(&'a self, vm: &'a Vm, path: &'a str, recursive: bool) -> Op<'a, ()> {
        Box::pin(async move {
            require_running(vm)?;
            Ok(VmHost::delete_file(self, &vm.id, path, recursive).await?)
        })
    }

    fn file_info<'a>(&'a self, vm: &'a Vm, path: &'a str) -> Op<'a, FileEntry> {
        Box::pin(async move {
            require_running(vm)?;
            Ok(VmHost::file_info(self, &vm.id, path).await?)
        })
    }

    fn rename_file<'a>(&'a self, vm: &'a Vm, from: &'a str, to: &'a str) -> Op<'a, ()> {
        Box::pin(async move {
            require_running(vm)?;
            Ok(VmHost::rename_file(self, &vm.id, from, to).await?)
        })
    }

    fn fork<'a>(&'a self, rt: &'a Runtime, id: &'a str, name: &'a str) -> Op<'a, Vm> {
        Box::pin(self.fork_live(rt, id, name))
    }

    fn clone_disk<'a>(&'a self, rt: &'a Runtime, source: &'a Vm, name: &'a str) -> Op<'a, Vm> {
        Box::pin(self.clone_from(rt, source, name))
    }

    fn snapshot<'a>(&'a self, _vm: &'a Vm, _target: &'a Path) -> Op<'a, u64> {
        Box::pin(async {
            Err(RuntimeError::NotSupported(
                "a snapshot exports a sandbox's root filesystem: for a VM use clone (disk) or fork (memory and disk)"
                    .into(),
            ))
        })
    }

    /// A forward on the VM's QEMU loopback, dialled in its network namespace (see
    /// [`VmHost::target`]).
    fn guest_target<'a>(&'a self, vm: &'a Vm, port: u16) -> Op<'a, Target> {
        Box::pin(async move { Ok(self.target(&vm.id, port).await?) })
    }

    fn stats<'a>(&'a self, vm: &'a Vm) -> BoxFuture<'a, Stats> {
        Box::pin(VmHost::stats(self, &vm.id))
    }

    /// Its disk overlay's allocated blocks; QEMU's user network has no interface to count on.
    fn footprint<'a>(&'a self, vm: &'a Vm) -> BoxFuture<'a, Footprint> {
        let disk = self.overlay(&vm.id);
        Box::pin(async move {
            let used = tokio::task::spawn_blocking(move || allocated_bytes(&disk)).await.ok();
            Footprint { disk_used_bytes: used, ..Footprint::default() }
        })
    }

    fn freeze<'a>(&'a self, vm: &'a Vm) -> Op<'a, i64> {
        Box::pin(async move { Ok(VmHost::freeze(self, &vm.id).await?) })
    }

    fn thaw<'a>(&'a self, vm: &'a Vm) -> Op<'a, i64> {
        Box::pin(async move { Ok(VmHost::thaw(self, &vm.id).await?) })
    }

    fn freeze_status<'a>(&'a self, vm: &'a Vm) -> Op<'a, String> {
        Box::pin(async move { Ok(VmHost::freeze_status(self, &vm.id).await?) })
    }

    fn socket(&self, vm: &Vm, which: &str) -> Result<PathBuf> {
        if !matches!(vm.state, VmState::Running | VmState::Paused) {
            return Err(RuntimeError::Conflict(format!("{} is {:?}: start it first", vm.name, vm.state)));
        }
        Ok(VmHost::socket(self, &vm.id, which))
    }

    /// A member is a copy of a booted image: it gets its own identity (MAC, machine id,
    /// hostname) before anyone else may use it; the instance stays locked meanwhile.
    fn claimed(&self, rt: &Runtime, mut vm: OwnedMutexGuard<Vm>) {
        let rt = rt.clone();
        tokio::spawn(async move {
            let vms = &rt.inner.vms;
            let id = vm.id.clone();
            let r: Result<()> = async {
                let mut cfg = vms.config(&id)?;
                cfg.mac = random_mac();
                cfg.machine_id = random_machine_id();
                cfg.hostname = hostname_for(&vm.name);
                vms.save_config(&id, &cfg)?;
                vms.reidentify(&id, &cfg).await?;
                Ok(())
            }
            .await;
            if let Err(e) = r {
                tracing::warn!(instance = %id, error = %e, "re-identifying a claimed VM failed");
                vm.message = Some(format!("re-identification after the claim failed: {e}"));
                let _ = rt.save(&vm);
            }
        });
    }
}
