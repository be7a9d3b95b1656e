//! Moving a sandbox to another node, cold: the source sends its stopped sandbox's writable
//! layer (`export_layer`), the target is told what to create (`begin_import`) and then reads the
//! layer into a fresh sandbox from the same template (`import_layer`). The api runs the steps
//! and relays the bytes; each runtime only ever talks to it.

use std::time::{Duration, Instant};

use axum::body::Bytes;
use futures::Stream;
use kairon_runtime_api::types::{CreateVmRequest, Import, TemplateState, Vm, VmState};

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

    /// Announces a sandbox that is to arrive with its layer: checks that this node can create
    /// it (its template is built here, the name is free) and answers the import's id.
    pub async fn begin_import(&self, req: CreateVmRequest) -> Result<Import> {
        if !valid_name(&req.name) {
            return Err(RuntimeError::Invalid(format!("name {:?} must be a lowercase DNS name", req.name)));
        }
        let Some(template) = req.sandbox.as_ref().and_then(|s| s.template_name.clone()) else {
            return Err(RuntimeError::Invalid(
                "only a template sandbox moves by its layer: give spec.sandbox.templateName".into(),
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
        // A sandbox of this name left by an import that did not finish (this runtime was killed
        // mid-way: it came back Failed) goes; any other holder refuses the import.
        if let Some(old) = self.list().await.into_iter().find(|v| v.name == req.name) {
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
        let pending = lock(&self.inner.imports)
            .remove(id)
            .filter(|p| p.at.elapsed() < IMPORT_TTL)
            .ok_or_else(|| RuntimeError::NotFound(format!("no import {id:?} is announced (or it expired)")))?;
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
