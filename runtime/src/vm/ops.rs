//! The runtime's VM-flavoured entry points: creating VMs, disk clone, filesystem freeze with
//! its deadline, console and VNC sockets, images and the accelerator. Per-instance work is the
//! instance's [`crate::backend::Backend`]'s (`vm/backend.rs`, `sandbox/backend.rs`), which
//! refuses what its backend cannot do.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use super::{MachineConfig, VmError};
use crate::api::{CreateVmRequest, Vm, VmState};
use crate::backend::BackendKind;
use crate::engine::{Runtime, RuntimeError, expiry, lock, now, valid_name};

type Result<T> = std::result::Result<T, RuntimeError>;

impl From<VmError> for RuntimeError {
    fn from(e: VmError) -> Self {
        match e {
            VmError::Invalid(m) => RuntimeError::Invalid(m),
            VmError::NotFound(m) => RuntimeError::NotFound(m),
            VmError::Conflict(m) => RuntimeError::Conflict(m),
            VmError::StdinClosed(m) => RuntimeError::StdinClosed(m),
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
    pub(crate) async fn register(&self, vm: Vm) -> Result<(Arc<Mutex<Vm>>, tokio::sync::OwnedMutexGuard<Vm>)> {
        let slot = Arc::new(Mutex::new(vm.clone()));
        let guard = slot.clone().lock_owned().await;
        lock(&self.inner.instances).insert(&vm, slot.clone())?;
        Ok((slot, guard))
    }

    pub(crate) fn new_vm_record(&self, mut req: CreateVmRequest) -> Vm {
        Vm {
            id: kairon_runtime_api::InstanceId::random(),
            name: req.name.clone(),
            backend: BackendKind::Qemu.as_str().into(),
            state: VmState::Creating,
            guest_ip: None,
            pid: None,
            created_at: now(),
            template: None,
            message: None,
            expires_at: None,
            owner_uid: req.owner_uid.take(),
            power_generation: None,
            spec: req,
        }
    }

    /// Removes a VM that never finished being made (its files and its index entry).
    pub(crate) async fn forget_vm(&self, id: &str) {
        let _ = self.vms().destroy(id).await;
        lock(&self.inner.instances).remove(id);
    }

    /// Creates and boots a VM (then pauses it with `startPaused`).
    pub(crate) async fn create_vm(&self, req: CreateVmRequest) -> Result<Vm> {
        if !valid_name(&req.name) {
            return Err(RuntimeError::Invalid(format!("name {:?} must be a lowercase DNS name", req.name)));
        }
        // Tap or Bridge: on the node's guest network; else QEMU user networking in a namespace of
        // its own (no way out, no guest IP).
        let attached = req
            .network
            .as_ref()
            .is_some_and(|n| matches!(n.mode, kairon_model::NetworkMode::Tap | kairon_model::NetworkMode::Bridge));
        let mut cfg = self.vms().plan(&req)?;
        let (_slot, mut vm) = self.register(self.new_vm_record(req)).await?;
        let id = vm.id.clone();
        let r: Result<()> = async {
            if attached {
                let addr = self.lease_guest_addr(&id)?;
                vm.guest_ip = Some(addr.ip.to_string());
                cfg.guest_net = Some(addr);
            }
            std::fs::create_dir_all(self.vms().instance_dir(&id))?;
            self.save(&vm)?;
            self.vms().prepare_disks(&id, &vm.spec, &mut cfg).await?;
            let paused = vm.spec.start_paused;
            self.boot_vm(&mut vm, &cfg, paused).await
        }
        .await;
        if let Err(e) = r {
            drop(vm);
            self.forget_vm(&id).await;
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

    pub(crate) async fn boot_vm(&self, vm: &mut Vm, cfg: &MachineConfig, paused: bool) -> Result<()> {
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

    /// Clone: a new VM that boots fresh from a copy of this VM's disk.
    pub async fn clone_vm(&self, id_or_name: &str, name: &str) -> Result<Vm> {
        if !valid_name(name) {
            return Err(RuntimeError::Invalid(format!("name {name:?} must be a lowercase DNS name")));
        }
        let slot = self.slot(id_or_name)?;
        let source = slot.lock().await;
        self.backend(&source).clone_disk(self, &source, name).await
    }

    /// Freezes the guest's filesystems through its agent; they thaw by themselves after
    /// `timeout` (when given) or on [`Runtime::thaw`].
    pub async fn freeze(&self, id_or_name: &str, timeout: Option<Duration>) -> Result<crate::api::FreezeResult> {
        let vm = self.running(id_or_name).await?;
        let count = self.backend(&vm).freeze(&vm).await?;
        let until = timeout.map(|t| expiry(t.as_secs() as i64));
        let generation = {
            let mut timers = lock(&self.inner.freezes);
            let g = timers.get(vm.id.as_str()).map(|t| t.generation + 1).unwrap_or(1);
            timers.insert(vm.id.to_string(), FreezeTimer { generation: g, until: until.clone() });
            g
        };
        if let Some(t) = timeout {
            let rt = self.clone();
            let vm = vm.clone();
            tokio::spawn(async move {
                tokio::time::sleep(t).await;
                let id = &vm.id;
                let current = lock(&rt.inner.freezes).get(id.as_str()).map(|f| f.generation);
                if current == Some(generation) {
                    lock(&rt.inner.freezes).remove(id.as_str());
                    // A guest agent that does not answer once must not leave the guest frozen:
                    // try again for a minute, unless a new freeze has been asked for meanwhile.
                    for attempt in 1..=30 {
                        match rt.backend(&vm).thaw(&vm).await {
                            Ok(n) => {
                                tracing::info!(instance = %id, filesystems = n, attempt, "thawed at the freeze deadline");
                                break;
                            }
                            Err(e) => {
                                tracing::warn!(instance = %id, error = %e, attempt, "thawing at the freeze deadline failed");
                            }
                        }
                        tokio::time::sleep(Duration::from_secs(2)).await;
                        if lock(&rt.inner.freezes).contains_key(id.as_str()) {
                            break;
                        }
                    }
                }
            });
        }
        Ok(crate::api::FreezeResult { frozen: Some(count), thawed: None, until })
    }

    pub async fn thaw(&self, id_or_name: &str) -> Result<crate::api::FreezeResult> {
        let vm = self.running(id_or_name).await?;
        // The deadline is dropped first, so it cannot thaw meanwhile (a sandbox has none).
        lock(&self.inner.freezes).remove(vm.id.as_str());
        let count = self.backend(&vm).thaw(&vm).await?;
        Ok(crate::api::FreezeResult { frozen: None, thawed: Some(count), until: None })
    }

    pub async fn freeze_status(&self, id_or_name: &str) -> Result<crate::api::FreezeStatus> {
        let vm = self.running(id_or_name).await?;
        let status = self.backend(&vm).freeze_status(&vm).await?;
        let until = lock(&self.inner.freezes).get(vm.id.as_str()).and_then(|f| f.until.clone());
        Ok(crate::api::FreezeStatus { status, until })
    }

    /// The unix socket of a running VM's serial console or VNC server.
    pub async fn vm_socket(&self, id_or_name: &str, which: &str) -> Result<std::path::PathBuf> {
        let vm = self.get(id_or_name).await?;
        self.backend(&vm).socket(&vm, which)
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
