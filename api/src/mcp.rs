//! The MCP server at `/mcp` (rmcp, streamable HTTP): the tools an agent needs to work in a
//! sandbox, and `describe_claim` (a claim with its usage, as agent-sandboxes.md says).
//!
//! The `/mcp` route takes the same bearer tokens as the REST API (the same middleware checks
//! them), and every tool calls the Machines service with the caller's identity, as the REST
//! handlers do: the same rules (roles, namespaces, the guest-exec gate, wake-on-connect,
//! activity stamps) apply to MCP unchanged.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use http::request::Parts;
use kube::ResourceExt;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use kairon_model::keys;
use kairon_model::{Machine, MachineClaim, PowerState, boot_source};
use kairon_runtime_api::types::ExecRequest;

use crate::auth::Identity;
use crate::machines::objects::{List, Mirrored, WaitFor};
use crate::machines::power::Copy;
use crate::machines::{Error, Machines, Reason};
use crate::state::AppState;

/// How long the create/claim tools wait for the sandbox to run, per long poll.
const WAIT_SECONDS: u64 = 120;

#[derive(Clone)]
pub struct KaironMcp {
    state: AppState,
    tool_router: ToolRouter<Self>,
}

#[derive(Deserialize, JsonSchema)]
pub struct CreateArgs {
    /// The namespace (default: the token's own when it names one namespace, else `default`).
    #[serde(default)]
    pub namespace: String,
    /// A sandbox template built on the node (`python`, `busybox`); or give `image`.
    pub template: Option<String>,
    /// The path, on the node, of a VM disk image (`/var/lib/fluxvm/images/kairon-hw.qcow2`); or give
    /// `template`. An OCI image is built into a template first.
    pub image: Option<String>,
    /// The Machine's name (default: sb-<random>).
    pub name: Option<String>,
    /// Suspend after this many idle seconds (at least 60).
    pub idle_timeout_seconds: Option<i64>,
    /// Delete the Machine this many seconds after creation.
    pub max_lifetime_seconds: Option<i64>,
    /// Delete the sandbox this many seconds from now: 300 when neither this nor
    /// max_lifetime_seconds is given (a forgotten sandbox does not run forever); 0 for no deadline.
    pub timeout_seconds: Option<i64>,
    /// What the sandbox reaches: "internet" (what its node allows; the default), "none", or a
    /// list of the hosts to allow (`["pypi.org", ".pythonhosted.org"]`). A refusal is an
    /// EgressDenied Event on the Machine.
    pub network: Option<NetworkArg>,
    /// Variables read from Secrets of the namespace for each command: `{"OPENAI_API_KEY":
    /// "my-secret/api-key"}` (an Opaque Secret labelled kairon.zyvor.dev/secret-env=true).
    #[serde(default)]
    pub secrets: std::collections::BTreeMap<String, String>,
}

/// `create_sandbox`'s `network`, as the SDKs' `network=`.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum NetworkArg {
    /// "internet" or "none".
    Mode(String),
    /// The hosts to allow.
    Allow(Vec<String>),
}

impl NetworkArg {
    /// The Machine's `spec.network` (`None`: the node's policy).
    fn spec(&self) -> Result<Option<Value>, String> {
        match self {
            NetworkArg::Mode(m) if m == "internet" => Ok(None),
            NetworkArg::Mode(m) if m == "none" => Ok(Some(json!({ "egress": { "mode": "None" } }))),
            NetworkArg::Mode(m) => Err(format!(
                "network {m:?}: give \"internet\", \"none\", or a list of the hosts to allow ([{m:?}] allows that one)"
            )),
            NetworkArg::Allow(hosts) => Ok(Some(json!({ "egress": { "mode": "Allowlist", "allow": hosts } }))),
        }
    }
}

/// A sandbox's deadline when its maker gives none: five minutes, as E2B's (extend it with the
/// `extend` route or the SDKs' `set_timeout`).
pub const DEFAULT_SANDBOX_TIMEOUT_SECONDS: i64 = 300;

/// The `ttlSeconds` of a new sandbox or claim: what was asked (0: none), else the default
/// unless another deadline was given.
fn ttl_seconds(asked: Option<i64>, other_deadline: bool) -> Option<i64> {
    match asked {
        Some(0) => None,
        Some(t) => Some(t),
        None if other_deadline => None,
        None => Some(DEFAULT_SANDBOX_TIMEOUT_SECONDS),
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct ClaimArgs {
    /// The namespace (default: the token's own when it names one namespace, else `default`).
    #[serde(default)]
    pub namespace: String,
    /// The MachinePool to take a warm member from.
    pub pool: String,
    /// The claim's name (default: POOL-<random>).
    pub name: Option<String>,
    /// Release the claim this many seconds after it binds: 300 when not given; 0 for no deadline.
    pub ttl_seconds: Option<i64>,
}

#[derive(Deserialize, JsonSchema)]
pub struct MachineArgs {
    /// The namespace (default: the token's own when it names one namespace, else `default`).
    #[serde(default)]
    pub namespace: String,
    /// The Machine's name.
    pub name: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct PreviewArgs {
    /// The namespace (default: the token's own when it names one namespace, else `default`).
    #[serde(default)]
    pub namespace: String,
    /// The sandbox's name.
    pub name: String,
    /// The port a server listens on in the sandbox (e.g. 8000 for `python3 -m http.server`).
    pub port: u16,
    /// How long the link lives, in seconds (default 3600, at most 604800).
    #[serde(default)]
    pub ttl_seconds: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
pub struct RunArgs {
    /// The namespace (default: the token's own when it names one namespace, else `default`).
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    /// A shell command line, run with `/bin/sh -c`.
    pub command: String,
    /// Sent to the command's standard input.
    pub stdin: Option<String>,
    /// Stop the command after this many seconds (the server's default and limit apply).
    pub timeout_seconds: Option<i64>,
    /// The working directory (absolute path in the sandbox).
    pub cwd: Option<String>,
    /// Environment variables of the command.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Keep at most this many bytes of each of stdout and stderr in the answer (default 65536,
    /// at most 1048576): a model's context is small. The answer says when it cut.
    pub max_output_bytes: Option<usize>,
}

/// The output of run_command kept by default, and at most, per stream.
const RUN_OUTPUT_DEFAULT: usize = 64 * 1024;
const RUN_OUTPUT_MAX: usize = 1024 * 1024;

/// `text` cut to at most `max` bytes at a character boundary: the kept part and how much was cut.
/// The cap a tool's `field` asks for, or the default; more than the most is refused.
fn output_cap(asked: Option<usize>, field: &str) -> Result<usize, String> {
    match asked.unwrap_or(RUN_OUTPUT_DEFAULT) {
        max if max > RUN_OUTPUT_MAX => Err(format!("{field}={max} is more than {RUN_OUTPUT_MAX}: ask for less")),
        max => Ok(max),
    }
}

/// Keeps the last `max` bytes of `text` (on a character boundary); how many were dropped.
fn cut_front(text: &mut String, max: usize) -> usize {
    if text.len() <= max {
        return 0;
    }
    let mut at = text.len() - max;
    while !text.is_char_boundary(at) {
        at += 1;
    }
    text.drain(..at);
    at
}

fn cut(text: &mut String, max: usize) -> usize {
    if text.len() <= max {
        return 0;
    }
    let mut at = max;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let dropped = text.len() - at;
    text.truncate(at);
    dropped
}

/// How a file's bytes travel in a tool's text.
#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// As text (UTF-8).
    #[default]
    Text,
    /// Base64 (any bytes).
    Base64,
}

#[derive(Deserialize, JsonSchema)]
pub struct ReadArgs {
    /// The namespace (default: the token's own when it names one namespace, else `default`).
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    /// Absolute path in the sandbox.
    pub path: String,
    /// `base64` always answers `{"encoding": "base64", "content": ...}`; by default a file that
    /// is UTF-8 text is answered as it is, and any other in that base64 form.
    pub encoding: Option<Encoding>,
    /// Answer at most this many bytes of the file (default 65536, at most 1048576): a model's
    /// context is small. The answer says when it cut.
    pub max_bytes: Option<usize>,
}

#[derive(Deserialize, JsonSchema)]
pub struct WriteArgs {
    /// The namespace (default: the token's own when it names one namespace, else `default`).
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    /// Absolute path in the sandbox.
    pub path: String,
    /// The file's new contents: text, or base64 with `encoding: base64`.
    pub content: String,
    #[serde(default)]
    pub encoding: Encoding,
}

#[derive(Deserialize, JsonSchema)]
pub struct CloseArgs {
    /// The namespace (default: the token's own when it names one namespace, else `default`).
    #[serde(default)]
    pub namespace: String,
    /// The Machine to delete (a sandbox made with create_sandbox).
    pub name: Option<String>,
    /// The claim to release (a sandbox from claim_sandbox).
    pub claim: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct NamespaceArgs {
    /// The namespace (default: the token's own when it names one namespace, else `default`).
    #[serde(default)]
    pub namespace: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct StartArgs {
    /// The namespace (default: the token's own when it names one namespace, else `default`).
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    /// A shell command line, run in the background with `/bin/sh -c`.
    pub command: String,
    /// The working directory (absolute path in the sandbox).
    pub cwd: Option<String>,
    /// Environment variables of the process.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct CodeArgs {
    /// The namespace (default: the token's own when it names one namespace, else `default`).
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    /// The code to run: its last expression's value comes back as text.
    pub code: String,
    /// `python` (default) or `javascript` (where the template has Node), for a new context.
    pub language: Option<String>,
    /// The context an earlier run_code answered, to run in its state (variables, imports);
    /// left out, a new context is started.
    pub context: Option<String>,
    /// Interrupt the run after this many seconds (default 300, at most 3600).
    pub timeout_seconds: Option<u64>,
    /// Keep at most this many bytes of each of stdout and stderr, the latest (default 65536, at
    /// most 1048576). The answer says when it cut.
    pub max_output_bytes: Option<usize>,
}

#[derive(Deserialize, JsonSchema)]
pub struct ProcessArgs {
    /// The namespace (default: the token's own when it names one namespace, else `default`).
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    /// The process id start_process answered.
    pub pid: String,
    /// read_process: keep at most this many bytes of each of stdout and stderr, the latest
    /// (default 65536, at most 1048576). The answer says when it cut.
    pub max_output_bytes: Option<usize>,
}

#[derive(Deserialize, JsonSchema)]
pub struct KillArgs {
    /// The namespace (default: the token's own when it names one namespace, else `default`).
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    /// The process id start_process answered.
    pub pid: String,
    /// `KILL` (default, as the SDKs' `kill()`), `TERM`, `INT`, `HUP`…
    pub signal: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct ForkArgs {
    /// The namespace (default: the token's own when it names one namespace, else `default`).
    #[serde(default)]
    pub namespace: String,
    /// The sandbox to fork.
    pub name: String,
    /// The new sandbox's name.
    pub new_name: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct ClaimRef {
    /// The namespace (default: the token's own when it names one namespace, else `default`).
    #[serde(default)]
    pub namespace: String,
    /// The MachineClaim's name.
    pub name: String,
}

/// A tool's arguments, which name a namespace or leave it out.
trait InNamespace {
    fn namespace_mut(&mut self) -> &mut String;
}

macro_rules! in_namespace {
    ($($args:ty),*) => {
        $(impl InNamespace for $args {
            fn namespace_mut(&mut self) -> &mut String {
                &mut self.namespace
            }
        })*
    };
}

in_namespace!(
    CreateArgs,
    ClaimArgs,
    MachineArgs,
    PreviewArgs,
    RunArgs,
    ReadArgs,
    WriteArgs,
    CloseArgs,
    NamespaceArgs,
    StartArgs,
    CodeArgs,
    ProcessArgs,
    KillArgs,
    ForkArgs,
    ClaimRef
);

/// Where a tool acts when its arguments name no namespace: the caller's own when its token names
/// exactly one, else `default` (as kubectl's).
fn own_namespace(id: &Identity) -> String {
    match id.namespaces.as_slice() {
        [only] if only != "*" => only.clone(),
        _ => "default".into(),
    }
}

fn short_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..10].to_string()
}

/// A tool's failure as its text: the service's reason, status and message.
fn failed(e: Error) -> String {
    format!("{:?} ({}): {}", e.reason, e.status().as_u16(), e.message)
}

impl KaironMcp {
    /// The caller (the auth middleware put it on the request) and the Machines service; the
    /// arguments' namespace, when left out, becomes the caller's own ([`own_namespace`]).
    fn caller_in<A: InNamespace>(&self, parts: &Parts, args: &mut A) -> Result<(Identity, &Arc<Machines>), String> {
        let id = parts.extensions.get::<Identity>().cloned().ok_or("no bearer token")?;
        let machines = self.state.machines.as_ref().ok_or("the Machines service is not configured on this server")?;
        let ns = args.namespace_mut();
        if ns.is_empty() {
            *ns = own_namespace(&id);
        }
        Ok((id, machines))
    }

    /// Waits until the object reaches `phase` (long polls of WAIT_SECONDS, up to five).
    async fn wait_phase<K: Mirrored>(
        &self,
        machines: &Machines,
        id: &Identity,
        ns: &str,
        name: &str,
        phase: &str,
    ) -> Result<K, String> {
        let what = WaitFor::Phase(phase.into());
        for _ in 0..5 {
            let timeout = Duration::from_secs(WAIT_SECONDS);
            match machines.wait::<K>(id, ns, name, &what, timeout, &self.state.stopping).await {
                Ok(k) => return Ok(k),
                Err(e) if e.reason == Reason::Timeout => continue,
                Err(e) => return Err(failed(e)),
            }
        }
        Err(format!("{} {ns}/{name} did not reach {phase} within {} s", K::kind(&()), WAIT_SECONDS * 5))
    }

    /// Waits until the guest agent answers a command (a VM's starts a moment after its VMM
    /// runs): only what may pass is tried again; any other refusal is the answer.
    async fn wait_guest_agent(
        &self,
        machines: &Arc<Machines>,
        id: &Identity,
        ns: &str,
        name: &str,
    ) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(WAIT_SECONDS * 5);
        loop {
            let probe =
                || Ok(ExecRequest { command: vec!["true".into()], timeout_seconds: Some(10), ..Default::default() });
            match machines.exec(id, ns, name, &self.state.limits, probe).await {
                Ok(r) if r.exit_code == 0 => return Ok(()),
                Ok(_) => {}
                Err(e)
                    if e.status().is_server_error() || e.status().as_u16() == 409 && e.reason == Reason::Conflict => {}
                Err(e) => return Err(failed(e)),
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "{ns}/{name} runs, but its guest agent did not answer within {} s",
                    WAIT_SECONDS * 5
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// A deleted claim as its usage history tells it; `gone` (NotFound) when none is recorded.
    async fn released_claim(&self, id: &Identity, a: &ClaimRef, gone: Error) -> Result<String, String> {
        let uid = kairon_db::usage::latest_claim_uid(self.state.store.pool(), &a.namespace, &a.name)
            .await
            .map_err(|e| format!("reading the usage history: {e}"))?
            .ok_or_else(|| failed(gone))?;
        let h = crate::rest::usage::claim_history(&self.state.store, id, &uid.to_string()).await.map_err(failed)?;
        Ok(Self::pretty(&json!({
            "name": a.name,
            "namespace": a.namespace,
            "uid": uid,
            "phase": "Released",
            "deleted": true,
            "usage": h.total,
            "history": h,
        })))
    }

    fn pretty(v: &impl serde::Serialize) -> String {
        serde_json::to_string_pretty(v).unwrap_or_default()
    }
}

#[tool_router(router = tool_router)]
impl KaironMcp {
    pub fn new(state: AppState) -> Self {
        Self { state, tool_router: Self::tool_router() }
    }

    /// Create a sandbox Machine (labelled kairon.zyvor.dev/sandbox=true, guest agent on) and wait until it runs.
    #[tool(annotations(
        title = "Create a sandbox",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn create_sandbox(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<CreateArgs>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        let name = a.name.unwrap_or_else(|| format!("sb-{}", short_id()));
        let mut spec = boot_source(a.image.as_deref(), a.template.as_deref())?;
        spec["guestAgent"] = json!({ "enabled": true, "console": true });
        if a.image.is_some() {
            spec["resources"] = json!({ "cpu": "1", "memory": "512Mi" });
        }
        let mut lc = json!({ "wakeOnConnect": true });
        if let Some(t) = a.idle_timeout_seconds {
            lc["idleTimeoutSeconds"] = json!(t);
        }
        if let Some(t) = a.max_lifetime_seconds {
            lc["maxLifetimeSeconds"] = json!(t);
        }
        spec["lifecycle"] = lc;
        if let Some(ttl) = ttl_seconds(a.timeout_seconds, a.max_lifetime_seconds.is_some()) {
            spec["ttlSeconds"] = json!(ttl);
        }
        if let Some(network) = a.network.as_ref().map(NetworkArg::spec).transpose()?.flatten() {
            spec["network"] = network;
        }
        if !a.secrets.is_empty() {
            let mut refs = serde_json::Map::new();
            for (var, r) in &a.secrets {
                let Some((name, key)) =
                    r.split_once('/').filter(|(n, k)| !n.is_empty() && !k.is_empty() && !k.contains('/'))
                else {
                    return Err(format!("secrets.{var}: {r:?}: write it as \"SECRET/KEY\""));
                };
                refs.insert(var.clone(), json!({ "name": name, "key": key }));
            }
            spec["secretEnv"] = Value::Object(refs);
        }
        let m = json!({
            "metadata": { "name": name, "namespace": a.namespace, "labels": { "kairon.zyvor.dev/sandbox": "true" } },
            "spec": spec,
        });
        machines.create::<Machine>(&id, &a.namespace, false, || Ok(m)).await.map_err(failed)?;
        self.wait_phase::<Machine>(machines, &id, &a.namespace, &name, "Running").await?;
        self.wait_guest_agent(machines, &id, &a.namespace, &name).await?;
        Ok(Self::pretty(&json!({ "namespace": a.namespace, "name": name, "phase": "Running" })))
    }

    /// Claim a warm member of a MachinePool and wait until the claim is bound and the Machine runs.
    #[tool(annotations(
        title = "Claim a warm sandbox",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn claim_sandbox(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<ClaimArgs>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        let claim = a.name.unwrap_or_else(|| format!("{}-{}", a.pool, &short_id()[..8]));
        let mut spec = json!({ "poolName": a.pool });
        if let Some(t) = ttl_seconds(a.ttl_seconds, false) {
            spec["ttlSeconds"] = json!(t);
        }
        let body = json!({ "metadata": { "name": claim, "namespace": a.namespace }, "spec": spec });
        machines.create::<MachineClaim>(&id, &a.namespace, false, || Ok(body)).await.map_err(failed)?;
        let bound: MachineClaim = self.wait_phase(machines, &id, &a.namespace, &claim, "Bound").await?;
        let machine = bound.status.and_then(|s| s.machine_name).ok_or("the claim is Bound but names no Machine")?;
        self.wait_phase::<Machine>(machines, &id, &a.namespace, &machine, "Running").await?;
        self.wait_guest_agent(machines, &id, &a.namespace, &machine).await?;
        Ok(Self::pretty(&json!({ "namespace": a.namespace, "claim": claim, "name": machine, "phase": "Running" })))
    }

    /// Run a shell command in a sandbox to completion: its stdout, stderr and exit code
    /// (`timedOut` when it was stopped, `truncated` when its output passed the server's limit).
    #[tool(annotations(
        title = "Run a command",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = true
    ))]
    async fn run_command(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<RunArgs>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        let request = || {
            let timeout_seconds = a
                .timeout_seconds
                .map(u64::try_from)
                .transpose()
                .map_err(|_| Error::new(Reason::Invalid, "timeout_seconds must not be negative"))?;
            Ok(ExecRequest {
                command: vec!["/bin/sh".into(), "-c".into(), a.command.clone()],
                stdin: a.stdin.clone(),
                timeout_seconds,
                cwd: a.cwd.clone(),
                env: a.env.clone(),
                ..Default::default()
            })
        };
        let max = output_cap(a.max_output_bytes, "max_output_bytes")?;
        let mut done = machines.exec(&id, &a.namespace, &a.name, &self.state.limits, request).await.map_err(failed)?;
        let (out_cut, err_cut) = (cut(&mut done.stdout, max), cut(&mut done.stderr, max));
        let mut answer = serde_json::to_value(&done).unwrap_or_default();
        if out_cut + err_cut > 0 {
            answer["truncated"] = json!(true);
            answer["note"] = json!(format!(
                "output cut to the first {max} bytes of each stream ({out_cut} bytes of stdout and {err_cut} of stderr not shown): \
                 redirect it to a file and read parts of it, or raise max_output_bytes"
            ));
        }
        Ok(Self::pretty(&answer))
    }

    /// Read a file from a sandbox: its text, or `{"encoding": "base64", "content"}` for bytes that are not UTF-8.
    #[tool(annotations(title = "Read a file", read_only_hint = true, open_world_hint = false))]
    async fn read_file(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<ReadArgs>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        let max = output_cap(a.max_bytes, "max_bytes")?;
        let mut bytes = machines.read_file(&id, &a.namespace, &a.name, &a.path).await.map_err(failed)?;
        let size = bytes.len();
        if size > max {
            let mut at = max;
            // Text stays text: the cut falls between characters.
            while at > 0 && at < size && (bytes[at] & 0xC0) == 0x80 {
                at -= 1;
            }
            bytes.truncate(at);
            let note = format!(
                "the first {at} of {size} bytes of {}: read the rest with `tail -c +{}` in run_command, or raise max_bytes",
                a.path,
                at + 1
            );
            let (encoding, content) = match (a.encoding, String::from_utf8(bytes)) {
                (None | Some(Encoding::Text), Ok(text)) => ("text", text),
                (Some(Encoding::Text), Err(_)) => {
                    return Err(format!("{} is not UTF-8 text: read it with encoding \"base64\"", a.path));
                }
                (_, r) => ("base64", B64.encode(r.map(String::into_bytes).unwrap_or_else(|e| e.into_bytes()))),
            };
            return Ok(Self::pretty(
                &json!({ "path": a.path, "encoding": encoding, "content": content, "truncated": true, "note": note }),
            ));
        }
        match (a.encoding, String::from_utf8(bytes)) {
            (None | Some(Encoding::Text), Ok(text)) => Ok(text),
            (Some(Encoding::Text), Err(_)) => {
                Err(format!("{} is not UTF-8 text: read it with encoding \"base64\"", a.path))
            }
            (_, r) => {
                let bytes = r.map(String::into_bytes).unwrap_or_else(|e| e.into_bytes());
                Ok(Self::pretty(&json!({ "path": a.path, "encoding": "base64", "content": B64.encode(bytes) })))
            }
        }
    }

    /// Write a file in a sandbox, replacing what is there (text, or any bytes as base64).
    #[tool(annotations(
        title = "Write a file",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn write_file(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<WriteArgs>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        let bytes = match a.encoding {
            Encoding::Text => a.content.into_bytes(),
            Encoding::Base64 => B64.decode(a.content.trim()).map_err(|e| format!("content is not base64: {e}"))?,
        };
        let n = bytes.len();
        machines.write_file(&id, &a.namespace, &a.name, &a.path, None, bytes.into()).await.map_err(failed)?;
        Ok(format!("wrote {n} bytes to {}", a.path))
    }

    /// Pause a sandbox: it keeps its memory and uses no CPU.
    #[tool(annotations(
        title = "Pause a sandbox",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn pause(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<MachineArgs>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        machines.set_power(&id, &a.namespace, &a.name, PowerState::Paused, false, false).await.map_err(failed)?;
        self.wait_phase::<Machine>(machines, &id, &a.namespace, &a.name, "Paused").await?;
        Ok(format!("{}/{} is Paused", a.namespace, a.name))
    }

    /// Resume a paused sandbox.
    #[tool(annotations(
        title = "Resume a sandbox",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn resume(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<MachineArgs>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        machines.set_power(&id, &a.namespace, &a.name, PowerState::Running, true, false).await.map_err(failed)?;
        self.wait_phase::<Machine>(machines, &id, &a.namespace, &a.name, "Running").await?;
        Ok(format!("{}/{} is Running", a.namespace, a.name))
    }

    /// Close a sandbox: delete the Machine (`name`) or release the claim (`claim`).
    #[tool(annotations(
        title = "Close a sandbox",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn close_sandbox(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<CloseArgs>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        match (a.claim, a.name) {
            (Some(c), _) => {
                machines.delete::<MachineClaim>(&id, &a.namespace, &c, false).await.map_err(failed)?;
                Ok(format!("claim {}/{c} released", a.namespace))
            }
            (None, Some(n)) => {
                machines.delete::<Machine>(&id, &a.namespace, &n, false).await.map_err(failed)?;
                Ok(format!("Machine {}/{n} deleted", a.namespace))
            }
            (None, None) => Err("give name (a Machine) or claim (a MachineClaim)".into()),
        }
    }

    /// What a sandbox uses now: CPU (percent of one core over half a second), memory against its limit, disk,
    /// network and processes. Reading them does not wake it or keep it awake.
    #[tool(annotations(title = "Sandbox metrics", read_only_hint = true, open_world_hint = false))]
    async fn sandbox_metrics(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<MachineArgs>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        let m = machines.metrics(&id, &a.namespace, &a.name, None).await.map_err(failed)?;
        Ok(Self::pretty(&m))
    }

    /// A link that opens a port of a sandbox in any browser with no header, to show a person what a server there
    /// serves (a page, an app, a chart): an origin of its own, for ttl_seconds (default an hour). It dies with the
    /// sandbox; a paused sandbox with wake-on-connect wakes when the link is opened.
    #[tool(annotations(
        title = "Preview link",
        read_only_hint = false,
        destructive_hint = false,
        open_world_hint = true
    ))]
    async fn preview_url(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<PreviewArgs>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        let target = (a.namespace.as_str(), a.name.as_str());
        let made = self.state.previews.make(machines, &id, target, a.port, a.ttl_seconds).await.map_err(failed)?;
        Ok(Self::pretty(&made))
    }

    /// The sandboxes of a namespace (Machines labelled kairon.zyvor.dev/sandbox=true): name, phase, power state, claim.
    #[tool(annotations(title = "List sandboxes", read_only_hint = true, open_world_hint = false))]
    async fn list_sandboxes(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<NamespaceArgs>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        let sel = format!("{}=true", keys::labels::SANDBOX);
        let list: List<Machine> = machines.list(&id, &a.namespace, Some(&sel)).await.map_err(failed)?;
        let rows: Vec<Value> = list
            .items
            .iter()
            .map(|m| {
                json!({
                    "name": m.metadata.name,
                    "phase": m.status.as_ref().and_then(|s| s.phase),
                    "powerState": m.spec.power_state,
                    "claim": m.labels().get(keys::labels::CLAIM),
                    "pool": m.labels().get(keys::labels::POOL),
                })
            })
            .collect();
        Ok(Self::pretty(&json!({ "namespace": a.namespace, "sandboxes": rows })))
    }

    /// Start a shell command in the background in a sandbox: its process id, for read_process and kill_process.
    #[tool(annotations(
        title = "Start a process",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = true
    ))]
    async fn start_process(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<StartArgs>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        let request = || {
            Ok(ExecRequest {
                command: vec!["/bin/sh".into(), "-c".into(), a.command.clone()],
                cwd: a.cwd.clone(),
                env: a.env.clone(),
                ..Default::default()
            })
        };
        let p = machines.start_process(&id, &a.namespace, &a.name, request).await.map_err(failed)?;
        Ok(Self::pretty(&p))
    }

    /// Run Python (or JavaScript) code in a sandbox, keeping its state between runs: the
    /// answer's `context` runs the next piece where this one left off (`x = 21`, then `x * 2`
    /// is `42`). The answer has the last expression's value as `text`, the output, and `error`
    /// (`name`, `value`, `traceback`) when the code raised. kill_process with the context ends it.
    #[tool(annotations(
        title = "Run code",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = true
    ))]
    async fn run_code(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<CodeArgs>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        let max = output_cap(a.max_output_bytes, "max_output_bytes")?;
        let timeout = match a.timeout_seconds.unwrap_or(300) {
            t @ 1..=3600 => std::time::Duration::from_secs(t),
            t => return Err(format!("timeout_seconds={t} is out of range: give 1 to 3600")),
        };
        let language = a.language.as_deref().unwrap_or("python");
        let run = machines
            .run_code(&id, &a.namespace, &a.name, language, a.context.as_deref(), &a.code, timeout)
            .await
            .map_err(failed)?;
        let mut answer = serde_json::to_value(&run).unwrap_or_default();
        let (mut stdout, mut stderr) = (run.stdout, run.stderr);
        let (out_cut, err_cut) = (cut_front(&mut stdout, max), cut_front(&mut stderr, max));
        (answer["stdout"], answer["stderr"]) = (json!(stdout), json!(stderr));
        if out_cut + err_cut > 0 {
            answer["truncated"] = json!(true);
            answer["note"] = json!(format!(
                "only the last {max} bytes of each stream ({out_cut} earlier bytes of stdout and {err_cut} of stderr not shown): \
                 raise max_output_bytes, or write the output to a file and read parts of it"
            ));
        }
        Ok(Self::pretty(&answer))
    }

    /// A background process's state, exit code and output so far.
    #[tool(annotations(title = "Read a process", read_only_hint = true, open_world_hint = false))]
    async fn read_process(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<ProcessArgs>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        let max = output_cap(a.max_output_bytes, "max_output_bytes")?;
        let p = machines.process(&id, &a.namespace, &a.name, &a.pid).await.map_err(failed)?;
        let (mut stdout, mut stderr) =
            machines.process_logs(&id, &a.namespace, &a.name, &a.pid).await.map_err(failed)?;
        let (out_cut, err_cut) = (cut_front(&mut stdout, max), cut_front(&mut stderr, max));
        let mut answer = json!({
            "pid": p.id, "state": p.state, "exitCode": p.exit_code, "stdout": stdout, "stderr": stderr,
        });
        if out_cut + err_cut > 0 {
            answer["truncated"] = json!(true);
            answer["note"] = json!(format!(
                "only the last {max} bytes of each stream ({out_cut} earlier bytes of stdout and {err_cut} of stderr not shown): \
                 raise max_output_bytes, or have the process write to a file and read parts of it"
            ));
        }
        Ok(Self::pretty(&answer))
    }

    /// Send a signal (KILL by default, as the SDKs' `kill()`) to a background process.
    #[tool(annotations(
        title = "Kill a process",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn kill_process(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<KillArgs>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        let signal = a.signal.as_deref().unwrap_or("KILL");
        machines.kill_process(&id, &a.namespace, &a.name, &a.pid, signal).await.map_err(failed)?;
        Ok(format!("sent {signal} to process {}", a.pid))
    }

    /// Fork a running sandbox into a new one (live, memory and processes, on a VM; the filesystem of a sandbox) and wait until it runs.
    #[tool(annotations(
        title = "Fork a sandbox",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn fork_sandbox(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<ForkArgs>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        let new_name = a.new_name.clone();
        let r = machines.copy(&id, &a.namespace, &a.name, Copy::Fork, || Ok(new_name)).await.map_err(failed)?;
        self.wait_phase::<Machine>(machines, &id, &a.namespace, &a.new_name, "Running").await?;
        Ok(Self::pretty(
            &json!({ "namespace": a.namespace, "name": a.new_name, "from": a.name, "live": r.live, "phase": "Running" }),
        ))
    }

    /// A MachineClaim with its usage: phase, Machine, status.usage (active and suspended seconds,
    /// vCPU-seconds, GiB-seconds) and the accrual history.
    #[tool(annotations(title = "Describe a claim and its usage", read_only_hint = true, open_world_hint = false))]
    async fn describe_claim(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(mut a): Parameters<ClaimRef>,
    ) -> Result<String, String> {
        let (id, machines) = self.caller_in(&parts, &mut a)?;
        let claim: MachineClaim = match machines.get(&id, &a.namespace, &a.name).await {
            Ok(c) => c,
            // Released and gone: its final usage is in the history, under the same namespace
            // rule (the lookup is by this namespace, which the caller may read: the get said
            // NotFound, not Forbidden).
            Err(e) if e.reason == Reason::NotFound => return self.released_claim(&id, &a, e).await,
            Err(e) => return Err(failed(e)),
        };
        let c = serde_json::to_value(&claim).unwrap_or_default();
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        let history = crate::rest::usage::claim_history(&self.state.store, &id, &uid)
            .await
            .map(|h| serde_json::to_value(h).unwrap_or_default())
            .unwrap_or(Value::Null);
        Ok(Self::pretty(&json!({
            "name": a.name,
            "namespace": a.namespace,
            "uid": uid,
            "pool": c["spec"]["poolName"],
            "phase": c["status"]["phase"],
            "machine": c["status"]["machineName"],
            "boundTime": c["status"]["boundTime"],
            "usage": c["status"]["usage"],
            "history": history,
        })))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for KaironMcp {}

/// The service mounted at `/mcp` (behind the same authentication layer as the REST API).
pub fn service(state: AppState) -> StreamableHttpService<KaironMcp, LocalSessionManager> {
    StreamableHttpService::new(
        move || Ok(KaironMcp::new(state.clone())),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    )
}

#[cfg(test)]
mod tests {
    use super::{cut, own_namespace};
    use crate::auth::{Identity, Role};

    #[test]
    fn a_tool_without_a_namespace_acts_in_the_callers_own() {
        let who = |namespaces: &[&str]| Identity {
            sub: "x".into(),
            role: Role::Operator,
            namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
            legacy: false,
        };
        assert_eq!(own_namespace(&who(&["team"])), "team");
        assert_eq!(own_namespace(&who(&["*"])), "default");
        assert_eq!(own_namespace(&who(&["a", "b"])), "default");
        assert_eq!(own_namespace(&who(&[])), "default");
    }

    #[test]
    fn output_is_cut_at_a_character_boundary_and_says_how_much() {
        let mut s = "héllo".to_string();
        assert_eq!(cut(&mut s, 2), 5);
        assert_eq!(s, "h");
        let mut s = "abc".to_string();
        assert_eq!(cut(&mut s, 3), 0);
        assert_eq!(s, "abc");
    }
}
