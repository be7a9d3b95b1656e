//! The runtime's operations on VMs: the engine hands every instance with `backend: qemu` here.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use super::{BACKEND, MachineConfig, VmError, hostname_for, random_mac, random_machine_id};
use crate::api::{CreateVmRequest, PowerAction, Vm, VmState};
use crate::engine::{Runtime, RuntimeError, expiry, lock, now, valid_name};

type Result<T> = std::result::Result<T, RuntimeError>;

impl From<VmError> for RuntimeError {
    fn from(e: VmError) -> Self {
        match e {
            VmError::Invalid(m) => RuntimeError::Invalid(m),
            VmError::NotFound(m) => RuntimeError::NotFound(m),
            VmError::Conflict(m) => RuntimeError::Conflict(m),
            VmError::Failed(m) => RuntimeError::Internal(m),
        }
    }
}

/// How a freeze ends by itself: the generation it was armed for.
pub(crate) struct FreezeTimer {
    pub(crate) generation: u64,
    pub(crate) until: Option<String>,
}

impl Runtime {
    fn vms(&self) -> &super::VmHost {
        &self.inner.vms
    }

    /// Registers a new instance under `req.name` (refusing a taken name); returns its locked slot.
    async fn register(&self, vm: Vm) -> Result<(Arc<Mutex<Vm>>, tokio::sync::OwnedMutexGuard<Vm>)> {
        let slot = Arc::new(Mutex::new(vm.clone()));
        let guard = slot.clone().lock_owned().await;
        lock(&self.inner.instances).insert(&vm, slot.clone())?;
        Ok((slot, guard))
    }

    fn new_record(&self, mut req: CreateVmRequest) -> Vm {
        Vm {
            id: kairon_runtime_api::InstanceId::random(),
            name: req.name.clone(),
            backend: BACKEND.into(),
            state: VmState::Creating,
            guest_ip: Some("10.0.2.15".into()),
            pid: None,
            created_at: now(),
            template: None,
            message: None,
            expires_at: None,
            owner_uid: req.owner_uid.take(),
            spec: req,
        }
    }

    async fn forget(&self, id: &str) {
        let _ = self.vms().destroy(id).await;
        lock(&self.inner.instances).remove(id);
    }

    /// Creates and boots a VM (then pauses it with `startPaused`).
    pub(crate) async fn create_vm(&self, req: CreateVmRequest) -> Result<Vm> {
        if !valid_name(&req.name) {
            return Err(RuntimeError::Invalid(format!("name {:?} must be a lowercase DNS name", req.name)));
        }
        if let Some(net) = &req.network
            && net.mode != kairon_model::NetworkMode::User
        {
            return Err(RuntimeError::NotSupported(
                "this node networks VMs with QEMU user networking only (network.mode User): reach guest services through the HTTP proxy or port-forward".into(),
            ));
        }
        let mut cfg = self.vms().plan(&req)?;
        let (_slot, mut vm) = self.register(self.new_record(req)).await?;
        let id = vm.id.clone();
        let r: Result<()> = async {
            std::fs::create_dir_all(self.vms().instance_dir(&id))?;
            self.save(&vm)?;
            self.vms().prepare_disks(&id, &vm.spec, &mut cfg).await?;
            let paused = vm.spec.start_paused;
            self.boot_vm(&mut vm, &cfg, paused).await
        }
        .await;
        if let Err(e) = r {
            drop(vm);
            self.forget(&id).await;
            return Err(e);
        }
        if let Some(ttl) = vm.spec.ttl_seconds {
            let at = expiry(ttl);
            vm.expires_at = Some(at.clone());
            self.save(&vm)?;
            self.arm_ttl(&id, &at);
        }
        Ok(vm.clone())
    }

    async fn boot_vm(&self, vm: &mut Vm, cfg: &MachineConfig, paused: bool) -> Result<()> {
        let pid = self.vms().boot(&vm.id, cfg).await?;
        vm.pid = Some(pid);
        vm.state = VmState::Running;
        if paused {
            self.vms().pause(&vm.id).await?;
            vm.state = VmState::Paused;
        }
        vm.message = None;
        self.save(vm)
    }

    pub(crate) async fn vm_delete(&self, vm: &Vm) -> Result<()> {
        self.vms().destroy(&vm.id).await?;
        lock(&self.inner.instances).remove(vm.id.as_str());
        Ok(())
    }

    pub(crate) async fn vm_power(&self, vm: &mut Vm, action: PowerAction, paused: bool) -> Result<()> {
        let vms = self.vms();
        let cfg = vms.config(&vm.id)?;
        let id = vm.id.clone();
        match (action, vm.state) {
            (PowerAction::Pause, VmState::Running) => {
                vms.pause(&id).await?;
                vm.state = VmState::Paused;
            }
            (PowerAction::Pause, VmState::Paused) | (PowerAction::Resume, VmState::Running) => {}
            (PowerAction::Resume, VmState::Paused) => {
                vms.resume(&id).await?;
                vm.state = VmState::Running;
            }
            (PowerAction::Hibernate, VmState::Hibernated) | (PowerAction::Halt, VmState::Halted) => {}
            (PowerAction::Hibernate, VmState::Running | VmState::Paused) => {
                vms.hibernate(&id).await?;
                vm.state = VmState::Hibernated;
                vm.pid = None;
            }
            (PowerAction::Halt, VmState::Running | VmState::Paused) => {
                vms.halt(&id).await?;
                vm.state = VmState::Halted;
                vm.pid = None;
            }
            (PowerAction::Stop, VmState::Stopped) => {}
            (PowerAction::Stop, _) => {
                vms.stop(&id, &cfg).await?;
                vm.state = VmState::Stopped;
                vm.pid = None;
            }
            (PowerAction::Start | PowerAction::Resume, VmState::Hibernated) => {
                let pid = vms.wake(&id, &cfg, paused).await?;
                vm.pid = Some(pid);
                vm.state = if paused { VmState::Paused } else { VmState::Running };
            }
            (PowerAction::Start, VmState::Running) if !paused => {}
            (PowerAction::Start, VmState::Paused) if paused => {}
            (PowerAction::Start, VmState::Paused) => {
                vms.resume(&id).await?;
                vm.state = VmState::Running;
            }
            (PowerAction::Start, VmState::Running) => {
                vms.pause(&id).await?;
                vm.state = VmState::Paused;
            }
            (PowerAction::Start | PowerAction::Resume, VmState::Halted | VmState::Stopped | VmState::Failed)
            | (PowerAction::Restart, _) => {
                vms.quit(&id).await;
                self.boot_vm(vm, &cfg, paused).await?;
            }
            (a, s) => {
                return Err(RuntimeError::Conflict(format!("cannot {a:?} a VM that is {s:?}")));
            }
        }
        Ok(())
    }

    /// Live fork: a copy of the VM's memory and disk, running as a new VM with its own identity.
    pub(crate) async fn vm_fork(&self, id_or_name: &str, name: &str) -> Result<Vm> {
        if !valid_name(name) {
            return Err(RuntimeError::Invalid(format!("name {name:?} must be a lowercase DNS name")));
        }
        let slot = self.slot(id_or_name)?;
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
        let mut cfg = self.vms().config(&parent.id)?;
        let mut req = parent.spec.clone();
        req.name = name.to_string();
        req.start_paused = false;
        let (_child_slot, mut child) = self.register(self.new_record(req)).await?;
        let child_id = child.id.clone();
        cfg.mac = random_mac();
        cfg.machine_id = random_machine_id();
        cfg.hostname = hostname_for(name);
        // Volumes are the parent's own disks: the copy gets copies of them.
        let r: Result<()> = async {
            std::fs::create_dir_all(self.vms().instance_dir(&child_id))?;
            let mut vols = std::collections::BTreeMap::new();
            for (vname, file) in &cfg.volumes {
                let to = self.vms().instance_dir(&child_id).join(format!("vol-{vname}.qcow2"));
                vols.insert(vname.clone(), to.to_string_lossy().into_owned());
                if file.ends_with(".qcow2") {
                    tokio::fs::copy(file, &to).await?;
                }
            }
            self.save(&child)?;
            self.vms().snapshot_into(&parent.id, &child_id, running).await?;
            // Copied volumes only after the parent flushed them (the snapshot stopped it).
            cfg.volumes = vols;
            self.vms().save_config(&child_id, &cfg)?;
            let pid = self.vms().start_copy(&child_id, &cfg).await?;
            child.pid = Some(pid);
            child.state = VmState::Running;
            self.vms().reidentify(&child_id, &cfg).await?;
            if !running {
                self.vms().pause(&child_id).await?;
                child.state = VmState::Paused;
            }
            self.save(&child)
        }
        .await;
        drop(parent);
        if let Err(e) = r {
            drop(child);
            self.forget(&child_id).await;
            return Err(e);
        }
        Ok(child.clone())
    }

    /// Clone: a new VM that boots fresh from a copy of this VM's disk.
    pub async fn clone_vm(&self, id_or_name: &str, name: &str) -> Result<Vm> {
        if !valid_name(name) {
            return Err(RuntimeError::Invalid(format!("name {name:?} must be a lowercase DNS name")));
        }
        let slot = self.slot(id_or_name)?;
        let source = slot.lock().await;
        if source.backend != BACKEND {
            return Err(RuntimeError::NotSupported(
                "clone copies a VM's disk: for a sandbox use fork, which copies its files".into(),
            ));
        }
        let mut cfg = self.vms().config(&source.id)?;
        let running = source.state == VmState::Running || source.state == VmState::Paused;
        let mut req = source.spec.clone();
        req.name = name.to_string();
        req.start_paused = false;
        req.ttl_seconds = None;
        let (_s, mut vm) = self.register(self.new_record(req)).await?;
        let id = vm.id.clone();
        cfg.mac = random_mac();
        cfg.machine_id = random_machine_id();
        cfg.hostname = hostname_for(name);
        cfg.volumes.clear();
        let r: Result<()> = async {
            self.vms().copy_disk(&source.id, &id, running && source.state == VmState::Running).await?;
            self.save(&vm)?;
            let spec = vm.spec.clone();
            // The new VM gets fresh volumes of its own; its root disk is the copy.
            let disk = self.vms().instance_dir(&id).join("disk.qcow2");
            let keep = self.vms().instance_dir(&id).join("disk.copy");
            std::fs::rename(&disk, &keep)?;
            self.vms().prepare_disks(&id, &spec, &mut cfg).await?;
            std::fs::rename(&keep, &disk)?;
            self.boot_vm(&mut vm, &cfg, false).await
        }
        .await;
        drop(source);
        if let Err(e) = r {
            drop(vm);
            self.forget(&id).await;
            return Err(e);
        }
        Ok(vm.clone())
    }

    /// After a pool claim: the member gets a new identity before anyone else may use it (the
    /// instance stays locked meanwhile, so the claimer's first exec waits for it).
    pub(crate) fn vm_reidentify_locked(&self, mut vm: tokio::sync::OwnedMutexGuard<Vm>) {
        let rt = self.clone();
        tokio::spawn(async move {
            let id = vm.id.clone();
            let r: Result<()> = async {
                let mut cfg = rt.vms().config(&id)?;
                cfg.mac = random_mac();
                cfg.machine_id = random_machine_id();
                cfg.hostname = hostname_for(&vm.name);
                rt.vms().save_config(&id, &cfg)?;
                rt.vms().reidentify(&id, &cfg).await?;
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

    pub(crate) async fn vm_adopt(&self, vm: &mut Vm) {
        match self.vms().adopt(&vm.id).await {
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
    }

    async fn running_vm(&self, id_or_name: &str) -> Result<Vm> {
        let vm = self.get(id_or_name).await?;
        match vm.state {
            VmState::Running => Ok(vm),
            VmState::Paused => Err(RuntimeError::Conflict(format!("{} is paused: resume it first", vm.name))),
            s => Err(RuntimeError::Conflict(format!("{} is {s:?}: start it first", vm.name))),
        }
    }

    /// Freezes the guest's filesystems through its agent; they thaw by themselves after
    /// `timeout` (when given) or on [`Runtime::thaw`].
    pub async fn freeze(&self, id_or_name: &str, timeout: Option<Duration>) -> Result<crate::api::FreezeResult> {
        let vm = self.running_vm(id_or_name).await?;
        if vm.backend != BACKEND {
            return Err(RuntimeError::NotSupported(
                "filesystem freeze needs a guest agent in a VM: a sandbox shares the host kernel's filesystems; pause it instead".into(),
            ));
        }
        let count = self.vms().freeze(&vm.id).await?;
        let until = timeout.map(|t| expiry(t.as_secs() as i64));
        let generation = {
            let mut timers = lock(&self.inner.freezes);
            let g = timers.get(vm.id.as_str()).map(|t| t.generation + 1).unwrap_or(1);
            timers.insert(vm.id.to_string(), FreezeTimer { generation: g, until: until.clone() });
            g
        };
        if let Some(t) = timeout {
            let rt = self.clone();
            let id = vm.id.clone();
            tokio::spawn(async move {
                tokio::time::sleep(t).await;
                let current = lock(&rt.inner.freezes).get(id.as_str()).map(|f| f.generation);
                if current == Some(generation) {
                    lock(&rt.inner.freezes).remove(id.as_str());
                    if let Err(e) = rt.vms().thaw(&id).await {
                        tracing::warn!(instance = %id, error = %e, "thawing at the freeze deadline failed");
                    }
                }
            });
        }
        Ok(crate::api::FreezeResult { frozen: Some(count), thawed: None, until })
    }

    pub async fn thaw(&self, id_or_name: &str) -> Result<crate::api::FreezeResult> {
        let vm = self.running_vm(id_or_name).await?;
        if vm.backend != BACKEND {
            return Err(RuntimeError::NotSupported("a sandbox has no frozen filesystems to thaw".into()));
        }
        lock(&self.inner.freezes).remove(vm.id.as_str());
        let count = self.vms().thaw(&vm.id).await?;
        Ok(crate::api::FreezeResult { frozen: None, thawed: Some(count), until: None })
    }

    pub async fn freeze_status(&self, id_or_name: &str) -> Result<crate::api::FreezeStatus> {
        let vm = self.running_vm(id_or_name).await?;
        if vm.backend != BACKEND {
            return Err(RuntimeError::NotSupported("a sandbox has no guest filesystems to freeze".into()));
        }
        let status = self.vms().freeze_status(&vm.id).await?;
        let until = lock(&self.inner.freezes).get(vm.id.as_str()).and_then(|f| f.until.clone());
        Ok(crate::api::FreezeStatus { status, until })
    }

    /// Where a guest port is dialled from the runtime: inside the VM's network namespace, on
    /// a forward QEMU added to its loopback.
    pub(crate) async fn vm_target(&self, vm: &Vm, port: u16) -> Result<crate::proxy::Target> {
        Ok(self.vms().target(&vm.id, port).await?)
    }

    /// The unix socket of a running VM's serial console or VNC server.
    pub async fn vm_socket(&self, id_or_name: &str, which: &str) -> Result<std::path::PathBuf> {
        let vm = self.get(id_or_name).await?;
        if vm.backend != BACKEND {
            return Err(RuntimeError::NotSupported(format!("{which} is a VM's: a sandbox has none")));
        }
        if !matches!(vm.state, VmState::Running | VmState::Paused) {
            return Err(RuntimeError::Conflict(format!("{} is {:?}: start it first", vm.name, vm.state)));
        }
        Ok(self.vms().socket(&vm.id, which))
    }

    /// The accelerator VMs get on this node, when known (the probe needs a kernel to boot).
    pub async fn acceleration(&self) -> Option<super::Accel> {
        let images = self.vms().images_dir();
        let kernel = images.join(format!("{}.vmlinuz", super::image::DEFAULT_IMAGE));
        super::accel(kernel.is_file().then_some(kernel.as_path()), &images).await
    }

    /// The default VM image's path on this node (built by [`Runtime::ensure_default_image`]).
    pub fn default_image(&self) -> std::path::PathBuf {
        self.vms().images_dir().join(format!("{}.qcow2", super::image::DEFAULT_IMAGE))
    }

    /// Builds the default VM image unless it exists; its path.
    pub async fn ensure_default_image(&self) -> Result<std::path::PathBuf> {
        let progress = crate::oci::Progress::default();
        super::image::ensure_default_image(&self.vms().images_dir(), &progress)
            .await
            .map_err(|e| RuntimeError::Internal(e.to_string()))
    }
}
