//! Moving an instance to another node. The target is told first what is to arrive
//! (`begin_import`: it checks that it can take it). A sandbox moves cold: the source sends its
//! stopped sandbox's writable layer (`export_layer`), which the target reads into a fresh
//! sandbox from the same template (`import_layer`). A VM moves live: two WebSockets, one to each
//! runtime (`live_out`, `live_in`), carry QEMU's migration stream while the VM runs. The api
//! runs the steps and relays the bytes; the runtimes never talk to each other.

use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::ws::{Message, WebSocket};
use futures::Stream;
use kairon_runtime_api::types::{CreateVmRequest, Import, LiveMessage, TemplateState, Vm, VmState};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::backend::BackendKind;
use crate::engine::{Runtime, RuntimeError, Seed, lock, valid_name};

type Result<T> = std::result::Result<T, RuntimeError>;

/// How long an announced import waits for its layer.
const IMPORT_TTL: Duration = Duration::from_secs(600);

/// An import announced by `begin_import`.
pub(crate) struct PendingImport {
    req: CreateVmRequest,
    at: Instant,
}

/// Bytes handed from the blocking tar writer to the response body in chunks of this size.
const CHUNK: usize = 256 * 1024;

impl Runtime {
    /// The writable layer of a stopped sandbox, as a layer tar streamed while it is written
    /// (see `sandbox/layer.rs`). The sandbox is held locked until the stream ends, so nothing
    /// starts it meanwhile. A failure mid-way ends the stream with an error, never early.
    pub async fn export_layer(&self, id: &str) -> Result<impl Stream<Item = std::io::Result<Bytes>> + use<>> {
        let guard = self.slot(id)?.lock_owned().await;
        if BackendKind::of(&guard) != BackendKind::Runc {
            return Err(RuntimeError::NotSupported(format!(
                "{} is a VM: a VM moves live, with its memory, not by its files",
                guard.name
            )));
        }
        if guard.state != VmState::Stopped {
            return Err(RuntimeError::Conflict(format!(
                "{} is {:?}: a cold migration copies a stopped sandbox's writable layer; stop it first",
                guard.name, guard.state
            )));
        }
        let host = &self.inner.host;
        let map = host
            .idmap(&guard.id)
            .ok_or_else(|| RuntimeError::Internal(format!("{} has no id map on this node", guard.name)))?;
        // A runtime restarted since the stop has not mounted the disk again.
        host.prepare_disk(&guard.id, &map).await?;
        let upper = host.upper_dir(&guard.id);
        let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(8);
        tokio::task::spawn_blocking(move || {
            let _held = guard;
            let mut out = ChunkWriter { tx: tx.clone(), buf: Vec::with_capacity(CHUNK) };
            let written = crate::sandbox::layer::write_layer(&upper, &mut out, &map).and_then(|n| {
                out.send()?;
                Ok(n)
            });
            if let Err(e) = written {
                tracing::warn!(error = %e, "exporting a sandbox's layer failed");
                let _ = tx.blocking_send(Err(e));
            }
        });
        Ok(tokio_stream::wrappers::ReceiverStream::new(rx))
    }

    /// Announces an instance that is to arrive, a sandbox with its layer or a VM by its
    /// migration stream: checks that this node can take it (the sandbox's template is built
    /// here, the VM's image is here and allowed, the name is free) and answers the import's id.
    pub async fn begin_import(&self, req: CreateVmRequest) -> Result<Import> {
        if !valid_name(&req.name) {
            return Err(RuntimeError::Invalid(format!("name {:?} must be a lowercase DNS name", req.name)));
        }
        if crate::vm::wants_vm(&req) {
            if !req.volumes.is_empty() {
                return Err(RuntimeError::NotSupported(
                    "a VM with volumes cannot move: its volumes are disks on its node".into(),
                ));
            }
            // Its image must be one this node has and allows.
            self.inner.vms.plan(&req)?;
            return self.announce(req).await;
        }
        let Some(template) = req.sandbox.as_ref().and_then(|s| s.template_name.clone()) else {
            return Err(RuntimeError::Invalid(
                "nothing to move: a VM names spec.image, a sandbox spec.sandbox.templateName".into(),
            ));
        };
        let t = self.template(&template).map_err(|_| {
            RuntimeError::Conflict(format!(
                "template {template:?} is not built on node {}: build it there first (POST /api/v1/nodes/{}/templates)",
                self.node_name(),
                self.node_name()
            ))
        })?;
        if t.state != TemplateState::Ready {
            return Err(RuntimeError::Conflict(format!(
                "template {template:?} is {:?} on node {}: wait until it is Ready",
                t.state,
                self.node_name()
            )));
        }
        self.announce(req).await
    }

    /// Records an import of `req`, after removing what an unfinished one of the same Machine
    /// left: an instance of this name that this runtime, killed mid-way, brought back Failed.
    /// Any other holder of the name refuses it.
    async fn announce(&self, req: CreateVmRequest) -> Result<Import> {
        // By the names index: only that instance's lock is waited for (another may be held for
        // a whole export or live migration).
        let holder = lock(&self.inner.instances).named(&req.name).cloned();
        if let Some(slot) = holder {
            let old = slot.lock().await.clone();
            let leftover = old.owner_uid.is_some()
                && old.owner_uid == req.owner_uid
                && matches!(old.state, VmState::Failed | VmState::Creating);
            if !leftover {
                return Err(RuntimeError::Conflict(format!(
                    "an instance named {:?} already runs on node {}",
                    req.name,
                    self.node_name()
                )));
            }
            tracing::info!(id = %old.id, "removing what an unfinished import left");
            self.delete(&old.id).await?;
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let mut imports = lock(&self.inner.imports);
        imports.retain(|_, p| p.at.elapsed() < IMPORT_TTL);
        imports.insert(id.clone(), PendingImport { req, at: Instant::now() });
        Ok(Import { id, expires_in_seconds: IMPORT_TTL.as_secs() })
    }

    /// Creates the sandbox of import `id` from the layer `body` as it arrives, and starts it
    /// (paused when its request says so). On any failure nothing of it remains.
    pub async fn import_layer(
        &self,
        id: &str,
        body: impl Stream<Item = std::io::Result<Bytes>> + Send + Unpin + 'static,
    ) -> Result<Vm> {
        let pending = self.take_import(id)?;
        if crate::vm::wants_vm(&pending.req) {
            return Err(RuntimeError::Invalid(format!(
                "import {id:?} is a VM's: it moves live, by its migration stream"
            )));
        }
        let reader = tokio_util::io::SyncIoBridge::new(tokio_util::io::StreamReader::new(body));
        self.create_seeded(pending.req, Some(Seed::Layer(Box::new(reader)))).await
    }
}

/// A `Write` that hands its bytes to an async channel in chunks (used from a blocking task).
struct ChunkWriter {
    tx: tokio::sync::mpsc::Sender<std::io::Result<Bytes>>,
    buf: Vec<u8>,
}

impl ChunkWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx.blocking_send(Ok(chunk)).map_err(|_| std::io::Error::other("the receiver of the layer went away"))
    }
}

impl std::io::Write for ChunkWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

/// How long a migrated VM's guest agent may take to answer on the target before the migration
/// is given up (and the VM runs on at the source).
const AGENT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long one side of a live migration waits for the other's next word (a target's QEMU to
/// start, a source's last pass under TCG).
const LIVE_WORD_TIMEOUT: Duration = Duration::from_secs(300);

impl Runtime {
    /// Live migration of a running (or paused) VM, source side, over `ws` (see
    /// [`LiveMessage`]): sends its device configuration, waits for the target to be ready,
    /// then streams QEMU's state (memory, and the disk blocks that differ from the base) while
    /// the VM runs. Once the target says it has the VM, this QEMU quits; on any failure the VM
    /// runs on here. The instance stays locked throughout, so nothing else changes it meanwhile.
    pub async fn live_out(&self, id: &str, mut ws: WebSocket) {
        if let Err(e) = self.live_out_steps(id, &mut ws).await {
            tracing::warn!(instance = id, error = %e, "live migration out failed; the VM runs on here");
            let _ = say(&mut ws, &LiveMessage::Failed { message: e.to_string() }).await;
        }
        let _ = ws.send(Message::Close(None)).await;
    }

    async fn live_out_steps(&self, id: &str, ws: &mut WebSocket) -> Result<()> {
        let slot = self.slot(id)?;
        let mut vm = slot.lock_owned().await;
        if BackendKind::of(&vm) != BackendKind::Qemu {
            return Err(RuntimeError::NotSupported(format!(
                "{} is a sandbox: a sandbox moves cold, by its writable layer",
                vm.name
            )));
        }
        let running = match vm.state {
            VmState::Running => true,
            VmState::Paused => false,
            s => {
                return Err(RuntimeError::Conflict(format!(
                    "{} is {s:?}: only a running or paused VM moves live",
                    vm.name
                )));
            }
        };
        let vms = &self.inner.vms;
        let cfg = vms.config(&vm.id)?;
        movable(&cfg)?;
        let config = serde_json::to_value(&cfg).map_err(|e| RuntimeError::Internal(e.to_string()))?;
        say(ws, &LiveMessage::Config { config }).await?;
        match hear(ws).await? {
            LiveMessage::Ready => {}
            LiveMessage::Failed { message } => {
                return Err(RuntimeError::Conflict(format!("the target refused: {message}")));
            }
            other => return Err(unexpected(&other)),
        }
        let (mut ours, theirs) = tokio::net::UnixStream::pair()?;
        let theirs = theirs.into_std()?;
        // QEMU's migration thread writes with blocking I/O.
        theirs.set_nonblocking(false)?;
        let sending = vms.send_live(&vm.id, theirs.into());
        let relaying = async {
            let mut buf = vec![0u8; CHUNK];
            loop {
                let n = ours.read(&mut buf).await?;
                if n == 0 {
                    return Ok::<(), RuntimeError>(());
                }
                ws.send(Message::Binary(Bytes::copy_from_slice(&buf[..n])))
                    .await
                    .map_err(|e| RuntimeError::Internal(format!("relaying the VM's state: {e}")))?;
            }
        };
        let (sent, relayed) = tokio::join!(sending, relaying);
        let outcome = async {
            let stats = sent?;
            relayed?;
            say(ws, &LiveMessage::Sent { stats }).await?;
            match hear(ws).await? {
                LiveMessage::Done { .. } => Ok(()),
                LiveMessage::Failed { message } => Err(RuntimeError::Internal(format!("the target failed: {message}"))),
                other => Err(unexpected(&other)),
            }
        }
        .await;
        if let Err(e) = outcome {
            if let Err(again) = vms.resume_after_live(&vm.id, running).await {
                tracing::error!(instance = id, error = %again, "resuming a VM after a failed live migration");
            }
            return Err(e);
        }
        // The VM runs on the target now: this copy of it goes (the api deletes the instance).
        vms.quit(&vm.id).await;
        vm.state = VmState::Stopped;
        vm.pid = None;
        vm.message = Some("moved to another node".into());
        self.save(&vm)
    }

    /// Live migration, target side, for announced import `import` over `ws`: starts QEMU with
    /// the source's configuration on a fresh overlay, relays the state into it, then runs the
    /// VM (paused when its request says so) and answers it. On any failure nothing of it stays.
    pub async fn live_in(&self, import: &str, mut ws: WebSocket) {
        let said = match self.live_in_steps(import, &mut ws).await {
            Ok(vm) => LiveMessage::Done { vm: Box::new(vm) },
            Err(e) => {
                tracing::warn!(import, error = %e, "live migration in failed");
                LiveMessage::Failed { message: e.to_string() }
            }
        };
        let _ = say(&mut ws, &said).await;
        let _ = ws.send(Message::Close(None)).await;
    }

    async fn live_in_steps(&self, import: &str, ws: &mut WebSocket) -> Result<Vm> {
        let pending = self.take_import(import)?;
        if !crate::vm::wants_vm(&pending.req) {
            return Err(RuntimeError::Invalid(format!("import {import:?} is a sandbox's: send its layer instead")));
        }
        let vms = &self.inner.vms;
        let mut cfg: crate::vm::MachineConfig = match hear(ws).await? {
            LiveMessage::Config { config } => serde_json::from_value(config)
                .map_err(|e| RuntimeError::Invalid(format!("the source's VM configuration: {e}")))?,
            other => return Err(unexpected(&other)),
        };
        movable(&cfg)?;
        // What the source sends is checked as a create is: it is this node's plan of the
        // Machine's request (image, kernel, sizes, host name, under this node's rules), and
        // only the identity the guest keeps (MAC, machine ID) comes from the source, typed.
        let planned = vms.plan(&pending.req)?;
        incoming_matches_plan(&cfg, &planned, &pending.req)?;
        let (_slot, mut vm) = self.register(self.new_vm_record(pending.req)).await?;
        let id = vm.id.clone();
        let made: Result<()> = async {
            std::fs::create_dir_all(vms.instance_dir(&id))?;
            // On the guest network, an address of this node's (the guest is told after).
            if cfg.guest_net.is_some() {
                let addr = self.lease_guest_addr(&id)?;
                vm.guest_ip = Some(addr.ip.to_string());
                cfg.guest_net = Some(addr);
            }
            self.save(&vm)?;
            let (mut ours, theirs) = tokio::net::UnixStream::pair()?;
            let theirs = theirs.into_std()?;
            theirs.set_nonblocking(false)?;
            vms.accept_live(&id, &cfg, theirs.into()).await?;
            say(ws, &LiveMessage::Ready).await?;
            loop {
                match ws.recv().await {
                    Some(Ok(Message::Binary(b))) => ours.write_all(&b).await?,
                    Some(Ok(Message::Text(t))) => match serde_json::from_str::<LiveMessage>(&t) {
                        Ok(LiveMessage::Sent { .. }) => break,
                        Ok(LiveMessage::Failed { message }) => {
                            return Err(RuntimeError::Internal(format!("the source failed: {message}")));
                        }
                        _ => return Err(RuntimeError::Invalid(format!("an unexpected message: {t}"))),
                    },
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                        return Err(RuntimeError::Internal("the source went away before all of the state came".into()));
                    }
                    Some(Ok(_)) => {}
                }
            }
            drop(ours);
            let paused = vm.spec.start_paused;
            vm.pid = Some(vms.finish_live(&id, !paused).await?);
            if !paused {
                vms.agent_answers(&id, AGENT_TIMEOUT).await?;
            }
            if cfg.guest_net.is_some() {
                // Its identity is the same (the same values written again); its address is new.
                if paused {
                    vms.resume(&id).await?;
                }
                vms.reidentify(&id, &cfg).await?;
                if paused {
                    vms.pause(&id).await?;
                }
            }
            vm.state = if paused { VmState::Paused } else { VmState::Running };
            self.save(&vm)
        }
        .await;
        if let Err(e) = made {
            drop(vm);
            self.forget_vm(&id).await;
            return Err(e);
        }
        Ok(vm.clone())
    }

    /// Takes an announced import (it is used once).
    fn take_import(&self, id: &str) -> Result<PendingImport> {
        lock(&self.inner.imports)
            .remove(id)
            .filter(|p| p.at.elapsed() < IMPORT_TTL)
            .ok_or_else(|| RuntimeError::NotFound(format!("no import {id:?} is announced (or it expired)")))
    }
}

/// Whether the configuration a source sent is the one this node plans for the request, but for
/// the identity the guest keeps across the move: a unicast MAC in six lowercase hex pairs (the
/// request's own when it names one: it goes into QEMU's `-device` argument, where a comma adds
/// properties) and a machine ID of 32 lowercase hex digits.
fn incoming_matches_plan(
    cfg: &crate::vm::MachineConfig,
    planned: &crate::vm::MachineConfig,
    req: &kairon_runtime_api::types::CreateVmRequest,
) -> Result<()> {
    let refuse = |field: &str, sent: String, want: &str| {
        Err(RuntimeError::Invalid(format!(
            "the source's VM configuration has {field} {sent} where this node plans {want} for the Machine's request"
        )))
    };
    let named = req.network.as_ref().and_then(|n| n.mac_address.as_deref()).map(str::to_lowercase);
    if !is_unicast_mac(&cfg.mac) || named.is_some_and(|m| m != cfg.mac) {
        return refuse(
            "mac",
            format!("{:?}", cfg.mac),
            "six lowercase hex pairs, unicast (the request's own when it names one)",
        );
    }
    if cfg.machine_id.len() != 32 || !lower_hex(&cfg.machine_id) {
        return refuse("machineId", format!("{:?}", cfg.machine_id), "32 lowercase hex digits");
    }
    let pairs = [
        ("image", format!("{:?}", cfg.image), format!("{:?}", planned.image)),
        ("kernel", format!("{:?}", cfg.kernel), format!("{:?}", planned.kernel)),
        ("initrd", format!("{:?}", cfg.initrd), format!("{:?}", planned.initrd)),
        ("cmdline", format!("{:?}", cfg.cmdline), format!("{:?}", planned.cmdline)),
        ("vcpus", cfg.vcpus.to_string(), planned.vcpus.to_string()),
        ("memoryMib", cfg.memory_mib.to_string(), planned.memory_mib.to_string()),
        ("hostname", format!("{:?}", cfg.hostname), format!("{:?}", planned.hostname)),
    ];
    if let Some((field, sent, want)) = pairs.into_iter().find(|(_, sent, want)| sent != want) {
        return refuse(field, sent, &want);
    }
    Ok(())
}

/// `aa:bb:cc:dd:ee:ff` in lowercase hex, its first octet's multicast bit clear.
fn is_unicast_mac(mac: &str) -> bool {
    let parts: Vec<&str> = mac.split(':').collect();
    parts.len() == 6
        && parts.iter().all(|p| p.len() == 2 && lower_hex(p))
        && u8::from_str_radix(parts[0], 16).is_ok_and(|first| first & 1 == 0)
}

fn lower_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// What a live migration cannot carry: a VM's volumes (disks of their own on its node).
fn movable(cfg: &crate::vm::MachineConfig) -> Result<()> {
    if !cfg.volumes.is_empty() {
        return Err(RuntimeError::NotSupported(
            "a VM with volumes cannot move: its volumes are disks on its node".into(),
        ));
    }
    Ok(())
}

async fn say(ws: &mut WebSocket, m: &LiveMessage) -> Result<()> {
    let text = serde_json::to_string(m).map_err(|e| RuntimeError::Internal(e.to_string()))?;
    ws.send(Message::Text(text.into())).await.map_err(|e| RuntimeError::Internal(format!("the api went away: {e}")))
}

/// The other side's next word.
async fn hear(ws: &mut WebSocket) -> Result<LiveMessage> {
    loop {
        let next = tokio::time::timeout(LIVE_WORD_TIMEOUT, ws.recv())
            .await
            .map_err(|_| RuntimeError::Internal(format!("no word from the other node within {LIVE_WORD_TIMEOUT:?}")))?;
        match next {
            Some(Ok(Message::Text(t))) => {
                return serde_json::from_str(&t).map_err(|e| RuntimeError::Invalid(format!("a message {t:?}: {e}")));
            }
            Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                return Err(RuntimeError::Internal("the other node went away".into()));
            }
            Some(Ok(_)) => {}
        }
    }
}

fn unexpected(m: &LiveMessage) -> RuntimeError {
    RuntimeError::Invalid(format!("an unexpected message in a live migration: {m:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned() -> crate::vm::MachineConfig {
        crate::vm::MachineConfig {
            image: "/var/lib/fluxvm/images/kairon-hw.qcow2".into(),
            kernel: Some("/var/lib/fluxvm/images/kairon-hw.vmlinuz".into()),
            initrd: None,
            cmdline: None,
            vcpus: 1,
            memory_mib: 256,
            mac: "52:54:00:12:34:56".into(),
            hostname: "vm".into(),
            machine_id: "0123456789abcdef0123456789abcdef".into(),
            volumes: Default::default(),
            guest_net: None,
        }
    }

    #[test]
    fn a_migration_target_takes_only_its_own_plan_and_a_typed_identity() {
        let req = kairon_runtime_api::types::CreateVmRequest { name: "vm".into(), ..Default::default() };
        let mut source = planned();
        source.mac = "52:54:00:ab:cd:ef".into();
        source.machine_id = "fedcba9876543210fedcba9876543210".into();
        assert!(incoming_matches_plan(&source, &planned(), &req).is_ok(), "the guest keeps its MAC and machine ID");
        type Attack = fn(&mut crate::vm::MachineConfig);
        let attacks: [(&str, Attack); 9] = [
            ("mac", |c| c.mac = "52:54:00:00:00:01,romfile=/etc/shadow".into()),
            ("mac", |c| c.mac = "53:54:00:00:00:01".into()),
            ("mac", |c| c.mac = "52:54:00:00:00:0G".into()),
            ("machineId", |c| c.machine_id = "../../etc/machine-id".into()),
            ("vcpus", |c| c.vcpus = 4096),
            ("memoryMib", |c| c.memory_mib = 1 << 30),
            ("image", |c| c.image = "/etc/shadow".into()),
            ("kernel", |c| c.kernel = Some("/root/vmlinuz".into())),
            ("cmdline", |c| c.cmdline = Some("init=/bin/sh".into())),
        ];
        for (field, attack) in attacks {
            let mut cfg = source.clone();
            attack(&mut cfg);
            let err = incoming_matches_plan(&cfg, &planned(), &req).expect_err(field).to_string();
            assert!(err.contains(field), "{field}: {err}");
        }
        // A request that names a MAC keeps that one.
        let mut named = req.clone();
        named.network =
            Some(kairon_model::NetworkSpec { mac_address: Some("52:54:00:12:34:56".into()), ..Default::default() });
        assert!(incoming_matches_plan(&source, &planned(), &named).unwrap_err().to_string().contains("mac"));
    }
}
