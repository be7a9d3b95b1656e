//! The FluxVM v1 API types: what crosses the runtime boundary, in both directions. IDs are
//! typed, so a runtime that answers an ID that could not name a route is refused on decoding.

use std::collections::BTreeMap;

use kairon_model::{GuestAgent, ImageSource, NetworkSpec, Resources, RuntimeSpec, SandboxSpec, Volume};
use serde::{Deserialize, Serialize};

use crate::ids::{InstanceId, Pid};
use utoipa::ToSchema;

/// What to run: the runtime fields of a Machine spec. Pools take it as their template.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CreateVmRequest {
    /// The runtime name: `kairon-<namespace>-<name>` for a Machine.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_agent: Option<GuestAgent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxSpec>,
    /// Delete the instance this long after it is created (or claimed, for a pool member).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<i64>,
    /// Boot, then pause at once (not QEMU's -S: the guest runs briefly first).
    #[serde(default)]
    pub start_paused: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The UID of the Machine that owns the instance (the node agent sets it at create). The
    /// runtime moves it to `Vm::owner_uid`; a pool template, fork or clone never carries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_uid: Option<String>,
}

/// `Vm::backend` of a runc sandbox.
pub const BACKEND_RUNC: &str = "runc";
/// `Vm::backend` of a QEMU VM.
pub const BACKEND_QEMU: &str = "qemu";

/// The state of an instance.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmState {
    Creating,
    Running,
    Paused,
    Stopped,
    Hibernated,
    Halted,
    Failed,
}

impl VmState {
    /// The power state an instance in this state holds; none while it is created or after it
    /// failed.
    pub fn power_state(self) -> Option<kairon_model::PowerState> {
        use kairon_model::PowerState;
        match self {
            VmState::Running => Some(PowerState::Running),
            VmState::Paused => Some(PowerState::Paused),
            VmState::Stopped => Some(PowerState::Stopped),
            VmState::Hibernated => Some(PowerState::Hibernated),
            VmState::Halted => Some(PowerState::Halted),
            VmState::Creating | VmState::Failed => None,
        }
    }
}

/// An instance as the runtime reports it.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Vm {
    #[schema(value_type = String)]
    pub id: InstanceId,
    pub name: String,
    /// `runc` (sandbox) or `qemu`.
    pub backend: String,
    pub state: VmState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_ip: Option<String>,
    /// The VMM process (for a sandbox: its init process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the runtime deletes it (from `ttlSeconds`, counted from creation or claim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// The UID of the Machine that owns the instance; none for a pool member, a fresh fork or
    /// clone, or an instance made outside Kairon. Only an owner's node agent adopts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_uid: Option<String>,
    /// The newest Machine generation whose power state was applied to the instance: a power
    /// request for an older one is refused (409 `Stale`), so a reconcile working from a stale
    /// view cannot undo a newer wake or claim that thawed the instance directly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_generation: Option<i64>,
    pub spec: CreateVmRequest,
}

/// `POST /v1/imports`: a sandbox announced to a node, to arrive with its writable layer by
/// `PUT /v1/imports/{id}` (a cold migration).
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Import {
    pub id: String,
    /// The layer must arrive within this many seconds.
    pub expires_in_seconds: u64,
}

/// QEMU's figures of a live migration.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LiveStats {
    pub total_ms: u64,
    /// How long the guest was paused for the last pass.
    pub downtime_ms: u64,
    pub memory_bytes: u64,
    pub disk_bytes: u64,
}

/// One text frame of a live migration's two WebSockets (`GET /v1/vms/{id}/migration` on the
/// source, `GET /v1/imports/{id}/migration` on the target), which the api joins; the VM's
/// state itself travels in binary frames from source to target.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum LiveMessage {
    /// Source → target: the VM's device configuration, which the target's QEMU must match.
    Config { config: serde_json::Value },
    /// Target → source: its QEMU waits for the state.
    Ready,
    /// Source → target: all of the state was sent.
    Sent { stats: LiveStats },
    /// Target → source: the VM runs (or is paused) on the target.
    Done { vm: Box<Vm> },
    /// Either way: it failed, and why; the source's VM runs on.
    Failed { message: String },
}

/// `POST /v1/vms/{id}/owner`: sets the owner, compare-and-set. The runtime answers 409 unless
/// the current owner is `expected` (none: the instance must be unowned).
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SetOwnerRequest {
    #[serde(default)]
    pub expected: Option<String>,
    pub owner: String,
}

/// Power operations: `POST /v1/vms/{id}/{action}`.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PowerAction {
    Start,
    Stop,
    Pause,
    Resume,
    Restart,
    Hibernate,
    Halt,
}

impl PowerAction {
    /// The runtime operation (and its `paused` flag) that carries out a step of
    /// `model::power::plan`: what the node agent sends, and what the runtime's own test drives
    /// for every transition the planner allows.
    pub fn for_step(step: kairon_model::power::Step) -> (PowerAction, bool) {
        use kairon_model::power::Step;
        match step {
            Step::Start => (PowerAction::Start, false),
            Step::StartPaused => (PowerAction::Start, true),
            Step::Pause => (PowerAction::Pause, false),
            Step::Resume => (PowerAction::Resume, false),
            Step::Stop => (PowerAction::Stop, false),
            Step::Hibernate => (PowerAction::Hibernate, false),
            Step::Halt => (PowerAction::Halt, false),
        }
    }

    /// The power state this operation asks for (`paused`: a start or restart that ends paused).
    pub fn target(self, paused: bool) -> kairon_model::PowerState {
        use kairon_model::PowerState;
        match self {
            PowerAction::Pause => PowerState::Paused,
            PowerAction::Stop => PowerState::Stopped,
            PowerAction::Hibernate => PowerState::Hibernated,
            PowerAction::Halt => PowerState::Halted,
            PowerAction::Resume => PowerState::Running,
            PowerAction::Start | PowerAction::Restart if paused => PowerState::Paused,
            PowerAction::Start | PowerAction::Restart => PowerState::Running,
        }
    }

    /// The route segment of this operation (`POST /v1/vms/{id}/{action}`).
    pub fn as_str(self) -> &'static str {
        match self {
            PowerAction::Start => "start",
            PowerAction::Stop => "stop",
            PowerAction::Pause => "pause",
            PowerAction::Resume => "resume",
            PowerAction::Restart => "restart",
            PowerAction::Hibernate => "hibernate",
            PowerAction::Halt => "halt",
        }
    }
}

/// `Debug` names the environment's variables, never their values (they may be a Machine's
/// `spec.secretEnv`).
#[derive(Serialize, Deserialize, ToSchema, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExecRequest {
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// Sent to the command's standard input, then closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    /// Run as `uid[:gid]` instead of root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Background processes only: keep stdin open (after `stdin`, if given) for
    /// `POST .../processes/{pid}/stdin`, until that closes it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_stdin_open: bool,
}

impl std::fmt::Debug for ExecRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecRequest")
            .field("command", &self.command)
            .field("env", &self.env.keys().map(|k| (k.as_str(), "<redacted>")).collect::<BTreeMap<_, _>>())
            .field("cwd", &self.cwd)
            .field("timeout_seconds", &self.timeout_seconds)
            .field("stdin", &self.stdin.as_ref().map(|s| format!("<{} bytes>", s.len())))
            .field("user", &self.user)
            .field("keep_stdin_open", &self.keep_stdin_open)
            .finish()
    }
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExecResult {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    #[serde(default)]
    pub timed_out: bool,
    /// The output went past the server's limit on each stream (16 MiB by default): what is
    /// here is its beginning, and the rest was not kept.
    #[serde(default)]
    pub truncated: bool,
}

/// The largest file upload by default (the REST API's `--max-upload-bytes`). Files stream
/// through the API and the runtime, so this bounds the disk a request may fill, not memory.
pub const DEFAULT_MAX_UPLOAD_BYTES: u64 = 1024 * 1024 * 1024;

/// The most of a file a caller that takes it whole in memory (an MCP tool) reads or writes,
/// and the largest body the runtime reads whole (an exec's stdin).
pub const MAX_BUFFERED_FILE_BYTES: usize = 64 * 1024 * 1024;

/// The largest output of each exec stream a runtime keeps when the caller names no limit.
pub const DEFAULT_MAX_EXEC_OUTPUT_BYTES: u64 = 16 * 1024 * 1024;

/// The most bytes of a process's log one read returns.
pub const MAX_LOG_CHUNK_BYTES: u64 = 1024 * 1024;

impl LogChunk {
    /// The chunk of `bytes` (read from byte `offset` of a stream): at most
    /// [`MAX_LOG_CHUNK_BYTES`], ending before a character cut in half (which the next read
    /// starts with), so that no read splits a character.
    pub fn from_bytes(bytes: &[u8], offset: u64) -> LogChunk {
        let mut take = &bytes[..bytes.len().min(MAX_LOG_CHUNK_BYTES as usize)];
        if let Err(e) = std::str::from_utf8(take)
            && e.error_len().is_none()
        {
            take = &take[..e.valid_up_to()];
        }
        LogChunk { data: String::from_utf8_lossy(take).into_owned(), end: offset + take.len() as u64 }
    }
}

/// A piece of one of a process's output streams, from a byte offset.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LogChunk {
    /// The text from the offset asked for (whole characters only; at most 1 MiB).
    pub data: String,
    /// The byte offset just past `data`: where the next read starts.
    pub end: u64,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ProcessState {
    Running,
    Exited,
}

/// A background process started in an instance.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Process {
    #[schema(value_type = String)]
    pub id: Pid,
    pub command: Vec<String>,
    pub state: ProcessState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub started_at: String,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FileEntry {
    pub name: String,
    pub size: u64,
    pub mode: u32,
    pub is_dir: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_target: Option<String>,
    /// When its content last changed (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<String>,
}

/// Resource counters, sampled from /proc for the activity check and for usage.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmm_pid: Option<u32>,
    /// CPU time of every process of the instance, in nanoseconds.
    pub cpu_time_nanos: u64,
    /// Bytes read and written (buffered writes count).
    pub disk_read_bytes: u64,
    pub disk_write_bytes: u64,
    pub memory_bytes: u64,
    pub process_count: u32,
    /// Sandboxes: the `runc` processes this runtime has started for the sandbox since it
    /// started (exec, claims and wakes go through the agent and the freezer, not runc).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runc_invocations: Option<u64>,
    /// What the instance takes on the node's disk now: a sandbox's writable layer, a VM's disk
    /// overlay (its allocated blocks). Only with `?footprint=true` (it walks the layer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_used_bytes: Option<u64>,
    /// Bytes received and sent on the instance's network interfaces since they were made
    /// (sandboxes attached to a network; only with `?footprint=true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_rx_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_tx_bytes: Option<u64>,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateState {
    Pending,
    Building,
    Ready,
    Failed,
}

/// The image config a template keeps (entrypoint, env, working dir).
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageConfig {
    #[serde(default)]
    pub entrypoint: Vec<String>,
    #[serde(default)]
    pub cmd: Vec<String>,
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Template {
    pub name: String,
    /// Where it came from: an image reference, or `builtin:busybox` / `builtin:python`.
    pub image_ref: String,
    pub state: TemplateState,
    /// Progress while building.
    pub bytes_done: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_total: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default)]
    pub config: ImageConfig,
    pub created_at: String,
    /// The build steps, run in order over the image (as the build request gave them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<String>,
    /// How many steps have finished: progress while Building, and on a Failed build the step
    /// that failed is the next one.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub steps_done: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CreateTemplateRequest {
    pub name: String,
    pub image_ref: String,
    /// Shell commands (`/bin/sh -c`) run in order, as root, in a sandbox of the pulled image
    /// with the node's guest network and egress policy; what they change becomes the
    /// template's top layer. A step that exits non-zero fails the build with its output.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(max_items = 64)]
    pub steps: Vec<String>,
    /// The image reference was written by a tenant: unless its registry is one the node's config
    /// names, every connection of the pull obeys the node's egress policy (its deny set first).
    /// Set by the node agent only: the api's route is the admin's, whose pulls are trusted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schema(ignore)]
    pub tenant_source: bool,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EgressCheckRequest {
    pub host: String,
}

/// The runtime's answer. `credential` is the secret that would be injected: the node and api
/// hold it, and the api never passes it on.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EgressDecision {
    pub allow: bool,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
}

/// A guest's egress the node refused, as shown on its Machine: at most one per instance and
/// host a minute (every refusal is counted in [`EgressDenials::totals`]).
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EgressDenial {
    /// Its place in the node's sequence of denials (resume after it).
    pub seq: u64,
    /// The instance whose guest IP it came from.
    pub instance: String,
    /// The host (name or address) the guest asked for, as the guest wrote it.
    pub host: String,
    /// `NotAllowed`, `DenySet`, `DnsRefused` or `NoHost`.
    pub reason: String,
    /// Why, in words (never a credential).
    pub message: String,
    /// RFC 3339.
    pub at: String,
}

/// Denials after a sequence number, and every refusal counted since the runtime started.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct EgressDenials {
    /// The sequence number to ask after next.
    pub next: u64,
    /// Refusals by reason, all of them (also those not shown).
    pub totals: BTreeMap<String, u64>,
    pub denials: Vec<EgressDenial>,
}

/// Every error body of the runtime API.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    pub reason: String,
    pub message: String,
}

/// `POST /v1/pools`: keep `size` members booted and Paused, ready for an instant claim.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CreatePoolRequest {
    pub name: String,
    pub size: u32,
    /// What each member is made from (its `name` is replaced per member).
    pub template: CreateVmRequest,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolMemberState {
    /// Booting, or not yet paused.
    Booting,
    /// Paused and ready to be claimed.
    Ready,
    /// Handed out by a claim; no longer counted in the pool's size.
    Claimed,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PoolMember {
    #[schema(value_type = String)]
    pub id: InstanceId,
    pub name: String,
    pub state: PoolMemberState,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Pool {
    pub name: String,
    pub size: u32,
    pub template: CreateVmRequest,
    pub members: Vec<PoolMember>,
    /// The last error while filling, if the pool cannot reach its size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub created_at: String,
}

/// `POST /v1/pools/{name}/claim`: both fields optional overrides.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClaimRequest {
    /// The claimed instance's new runtime name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Delete the claimed instance this many seconds after the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<i64>,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ForkRequest {
    /// The new instance's runtime name.
    pub name: String,
}

/// A fork's result: `live` says whether memory and processes were copied too (QEMU), or only
/// the filesystem (a runc sandbox).
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ForkResult {
    pub vm: Vm,
    pub live: bool,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotRequest {
    /// Absolute path of the tar file to write on the node.
    pub path: String,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotResult {
    pub path: String,
    pub bytes: u64,
}

/// The answer to a freeze or thaw: how many guest filesystems, and until when (RFC 3339) a
/// freeze lasts before it thaws by itself.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FreezeResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thawed: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FreezeStatus {
    /// `frozen` or `thawed`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}

#[cfg(test)]
mod log_chunk_tests {
    use super::*;

    #[test]
    fn a_chunk_never_splits_a_character() {
        let text = "héllo".as_bytes();
        // Cut inside "é": the chunk ends before it, and the next read starts with it.
        let c = LogChunk::from_bytes(&text[..2], 10);
        assert_eq!(c, LogChunk { data: "h".into(), end: 11 });
        let c = LogChunk::from_bytes(&text[1..], 11);
        assert_eq!(c, LogChunk { data: "éllo".into(), end: 16 });
    }

    #[test]
    fn a_chunk_is_at_most_a_mebibyte() {
        let big = vec![b'x'; MAX_LOG_CHUNK_BYTES as usize + 5];
        let c = LogChunk::from_bytes(&big, 0);
        assert_eq!(c.end, MAX_LOG_CHUNK_BYTES);
        assert_eq!(LogChunk::from_bytes(&[], 7), LogChunk { data: String::new(), end: 7 });
    }
}
