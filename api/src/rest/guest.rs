//! Guest routes: exec, background processes, files, the sandbox HTTP proxy, and console and
//! port-forward relays over WebSocket. Each first checks who may use the guest, wakes a Machine
//! the controller idle-suspended (wake-on-connect), and stamps `kairon.zyvor.dev/last-activity`
//! for as long as the session is open.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::ws::{Message as AxMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, Request};
use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use utoipa::{IntoParams, OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use kairon_model::keys::{annotations, labels, reasons};
use kairon_model::{Machine, MachinePhase, PowerState};
use kairon_runtime_api::types::{ExecRequest, ExecResult, FileEntry, PowerAction, Process, VmState};
use kairon_runtime_api::{GuestPath, InstanceId, Pid, Relay, RelaySocket, RuntimeClient};

use super::objects::{ObjectPath, get_object};
use super::{Caller, ErrorBody, JsonBody, RestContext, RestError, RestResult};
use crate::auth::{self, GuestTarget};
use crate::state::AppState;

/// What a guest route needs once the caller is allowed and the Machine runs.
pub struct Session {
    pub machine: Machine,
    pub runtime: RuntimeClient,
    pub id: InstanceId,
    /// Keeps stamping last-activity while the session is open.
    _activity: ActivityGuard,
}

/// Stamps `last-activity` (throttled) every interval until dropped.
struct ActivityGuard(tokio::task::JoinHandle<()>);

impl Drop for ActivityGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn stamp(ctx: &RestContext, ns: &str, name: &str) {
    if !ctx.stamp_due(ns, name) {
        return;
    }
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let patch = json!({ "metadata": { "annotations": { annotations::LAST_ACTIVITY: now } } });
    let api: Api<Machine> = Api::namespaced(ctx.kube.clone(), ns);
    if let Err(e) = api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        tracing::debug!(error = %e, ns, name, "stamping last-activity failed");
    }
}

fn activity(ctx: Arc<RestContext>, ns: String, name: String) -> ActivityGuard {
    ActivityGuard(tokio::spawn(async move {
        loop {
            stamp(&ctx, &ns, &name).await;
            tokio::time::sleep(ctx.activity_stamp_interval.max(Duration::from_millis(100))).await;
        }
    }))
}

/// Which rule a route is under.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Needs {
    /// Exec and files: the guest agent must be enabled on the Machine.
    GuestAgent,
    /// The HTTP proxy, console and port-forward: a running instance is enough.
    Instance,
}

/// Checks the caller, wakes the Machine if it may, and opens an activity session on it.
async fn open(c: &Caller, p: &ObjectPath, needs: Needs) -> RestResult<Session> {
    let m = authorize(c, p, needs).await?;
    connect(c, p, m).await
}

/// Who may use this guest, and whether it has what the route needs: the Machine as read.
async fn authorize(c: &Caller, p: &ObjectPath, needs: Needs) -> RestResult<Machine> {
    // A caller who may use no guest here at all hears so before anything is read: first the
    // namespace (as reading the Machine would say), then the caller's role and the flag.
    super::objects::check_name("namespace", &p.namespace)?;
    c.check(auth::may_access(&c.id, auth::Verb::Read, Some(&p.namespace), false))?;
    c.check(auth::may_use_guest(
        &c.id,
        &GuestTarget { namespace: &p.namespace, sandbox_labelled: true },
        c.ctx.sandbox_operator_exec,
    ))?;
    let m: Machine = get_object(c, &p.namespace, &p.name).await?;
    let sandbox_labelled = m.metadata.labels.as_ref().and_then(|l| l.get(labels::SANDBOX)).is_some_and(|v| v == "true");
    c.check(auth::may_use_guest(
        &c.id,
        &GuestTarget { namespace: &p.namespace, sandbox_labelled },
        c.ctx.sandbox_operator_exec,
    ))?;
    if needs == Needs::GuestAgent {
        let ga = m.spec.guest_agent.clone().unwrap_or_default();
        if !ga.enabled && !ga.console {
            return Err(RestError::conflict(
                "GuestAgentDisabled",
                format!(
                    "Machine {}/{} has no guest agent: set spec.guestAgent.enabled (or spec.guestAgent.console for a sandbox) to true",
                    p.namespace, p.name
                ),
            ));
        }
    }
    Ok(m)
}

/// A session on an authorized Machine: woken if it must be, its activity stamped.
async fn connect(c: &Caller, p: &ObjectPath, m: Machine) -> RestResult<Session> {
    let (m, thawed) = wake_if_needed(c, p, m).await?;
    stamp(&c.ctx, &p.namespace, &p.name).await;
    let (runtime, id) = match thawed {
        Some(found) => found,
        None => c.ctx.machine_runtime(&m).await?,
    };
    let guard = activity(c.ctx.clone(), p.namespace.clone(), p.name.clone());
    Ok(Session { machine: m, runtime, id, _activity: guard })
}

fn phase(m: &Machine) -> Option<MachinePhase> {
    m.status.as_ref().and_then(|s| s.phase)
}

/// Wake-on-connect: an idle-suspended Machine with `wakeOnConnect` is set Running (clearing
/// idle-suspended and stamping activity in the same write) and waited for; anything else that
/// is not running is refused with what to do.
/// With the Machine, its runtime when finding it was part of the wake.
async fn wake_if_needed(
    c: &Caller,
    p: &ObjectPath,
    m: Machine,
) -> RestResult<(Machine, Option<(RuntimeClient, InstanceId)>)> {
    let desired = m.spec.desired_power_state();
    if desired == PowerState::Running && phase(&m) == Some(MachinePhase::Running) {
        return Ok((m, None));
    }
    // Running was asked for (a claim bound it, or a wake was written) and the node agent has
    // not resumed it yet: resume it here rather than wait for the next reconcile.
    if desired == PowerState::Running
        && phase(&m) == Some(MachinePhase::Paused)
        && let Some(found) = thaw_now(c, &m).await
    {
        return Ok((m, Some(found)));
    }
    let idle_suspended = m.annotations().contains_key(annotations::IDLE_SUSPENDED);
    let lifecycle = m.spec.lifecycle.clone().unwrap_or_default();
    if desired != PowerState::Running {
        if !idle_suspended {
            return Err(RestError::conflict(
                "MachineSuspended",
                format!(
                    "Machine {}/{} is {desired} by request, so it is not woken on connect: resume it first (POST /api/v1/machines/{}/{}/resume)",
                    p.namespace, p.name, p.namespace, p.name
                ),
            ));
        }
        if !lifecycle.wake_on_connect {
            return Err(RestError::conflict(
                "MachineSuspended",
                format!(
                    "Machine {}/{} was idle-suspended ({desired}) and has no spec.lifecycle.wakeOnConnect: resume it (POST .../resume) or set wakeOnConnect",
                    p.namespace, p.name
                ),
            ));
        }
    }
    let timeout = Duration::from_secs(lifecycle.wake_timeout_seconds.max(1) as u64);
    let started = Instant::now();
    let api: Api<Machine> = Api::namespaced(c.ctx.kube.clone(), &p.namespace);
    let woke_from = desired;
    if desired != PowerState::Running {
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let patch = json!({
            "metadata": { "annotations": { annotations::IDLE_SUSPENDED: null, annotations::LAST_ACTIVITY: now } },
            "spec": { "powerState": "Running" },
        });
        let woken = api.patch(&p.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        // That write stamped last-activity: the session's first stamp is due an interval on.
        let _ = c.ctx.stamp_due(&p.namespace, &p.name);
        let (ctx, note) = (c.ctx.clone(), format!("woken on connect from {woke_from} by {}", c.id.sub));
        let event_of = woken.clone();
        tokio::spawn(async move { ctx.record(&event_of, reasons::WOKEN, note).await });
        // The spec's order: the one write above, then the thaw at once.
        if woke_from == PowerState::Paused
            && let Some(found) = thaw_now(c, &woken).await
        {
            return Ok((woken, Some(found)));
        }
    }
    // The connection counts as activity while it waits: a wake slower than the idle timeout
    // would otherwise let the lifecycle controller suspend the Machine again before the
    // connection that woke it is served (seen in the soak bench as "is paused" on exec).
    let _waking =
        (woke_from != PowerState::Running).then(|| activity(c.ctx.clone(), p.namespace.clone(), p.name.clone()));
    let running = |o: Option<&Machine>| o.is_some_and(|m| phase(m) == Some(MachinePhase::Running));
    let waited =
        tokio::time::timeout(timeout, kube::runtime::wait::await_condition(api.clone(), &p.name, running)).await;
    let m = match waited {
        Ok(Ok(Some(m))) => m,
        Ok(Ok(None)) => {
            return Err(RestError::not_found(format!("Machine {}/{} was deleted while waking", p.namespace, p.name)));
        }
        Ok(Err(e)) => return Err(RestError::unavailable(format!("watching the Machine while waking it failed: {e}"))),
        Err(_) => return Err(wake_timeout(p, timeout, api.get_opt(&p.name).await.ok().flatten().as_ref())),
    };
    // A wake from anything but Paused booted or restored the guest: wait for its agent too.
    if woke_from != PowerState::Paused && woke_from != PowerState::Running {
        let (rt, id) = c.ctx.machine_runtime(&m).await?;
        loop {
            let probe = ExecRequest { command: vec!["true".into()], timeout_seconds: Some(5), ..Default::default() };
            if rt.exec(&id, &probe).await.is_ok_and(|r| r.exit_code == 0) {
                break;
            }
            if started.elapsed() >= timeout {
                return Err(wake_timeout(p, timeout, Some(&m)));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        return Ok((m, Some((rt, id))));
    }
    Ok((m, None))
}

/// Resumes a Paused instance whose Machine asks for Running, on behalf of the Machine's
/// generation (the runtime refuses a later reconcile from an older view, so a stale pause cannot
/// follow); the runtime, once the instance runs. Any failure leaves it to the node agent.
async fn thaw_now(c: &Caller, m: &Machine) -> Option<(RuntimeClient, InstanceId)> {
    let (rt, id) = c.ctx.machine_runtime(m).await.ok()?;
    match rt.power_at(&id, PowerAction::Resume, false, m.metadata.generation).await {
        Ok(vm) if vm.state == VmState::Running => Some((rt, id)),
        Ok(_) => None,
        Err(e) => {
            tracing::debug!(error = %e, "resuming directly failed; waiting for the node agent");
            None
        }
    }
}

fn wake_timeout(p: &ObjectPath, timeout: Duration, m: Option<&Machine>) -> RestError {
    let now = m.and_then(phase).map(|p| format!("{p:?}")).unwrap_or_else(|| "unknown".into());
    RestError::new(
        StatusCode::GATEWAY_TIMEOUT,
        "WakeTimeout",
        format!(
            "Machine {}/{} did not wake within wakeTimeoutSeconds ({}s; its phase is {now}): try again, or raise spec.lifecycle.wakeTimeoutSeconds",
            p.namespace,
            p.name,
            timeout.as_secs()
        ),
    )
}

/// Run a command to completion in the guest.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/exec", tag = "Guest", params(ObjectPath),
    request_body = ExecRequest,
    responses((status = 200, description = "Exit code and output", body = ExecResult),
              (status = 403, description = "Not allowed to use this guest", body = ErrorBody),
              (status = 409, description = "No guest agent, or suspended by request", body = ErrorBody),
              (status = 504, description = "The wake did not finish in wakeTimeoutSeconds", body = ErrorBody)))]
async fn machine_exec(
    c: Caller,
    Path(p): Path<ObjectPath>,
    body: JsonBody<ExecRequest>,
) -> RestResult<Json<ExecResult>> {
    let m = authorize(&c, &p, Needs::GuestAgent).await?;
    let mut req = body.parse()?;
    check_command(&req)?;
    req.timeout_seconds = Some(exec_timeout(&c.limits, req.timeout_seconds)?);
    let s = connect(&c, &p, m).await?;
    Ok(Json(s.runtime.exec_bounded(&s.id, &req, c.limits.max_exec_output_bytes).await?))
}

/// The timeout of an exec: the default when the request gives none, refused above the most.
fn exec_timeout(limits: &crate::limits::Limits, asked: Option<u64>) -> RestResult<u64> {
    let max = limits.exec_max_timeout.as_secs();
    match asked {
        None => Ok(limits.exec_default_timeout.as_secs().min(max)),
        Some(t) if t > max => Err(RestError::bad_request(format!(
            "timeoutSeconds={t} is more than the {max} s an exec may run: ask for at most {max}, run it as a \
             background process (POST …/processes) instead, or raise --exec-max-timeout (KAIRON_EXEC_MAX_TIMEOUT)"
        ))),
        Some(t) => Ok(t),
    }
}

/// A command line cannot carry NUL bytes (the kernel ends strings there), and must name a
/// program.
fn check_command(req: &ExecRequest) -> RestResult<()> {
    if req.command.is_empty() || req.command[0].is_empty() {
        return Err(RestError::bad_request("command must name a program, e.g. [\"sh\", \"-c\", \"echo hi\"]"));
    }
    let fields = req
        .command
        .iter()
        .map(|a| ("command", a.as_str()))
        .chain(req.env.iter().flat_map(|(k, v)| [("env", k.as_str()), ("env", v.as_str())]))
        .chain(req.cwd.iter().map(|c| ("cwd", c.as_str())))
        .chain(req.user.iter().map(|u| ("user", u.as_str())));
    for (field, value) in fields {
        if value.contains('\0') {
            return Err(RestError::bad_request(format!("{field} contains a NUL byte, which no program can receive")));
        }
    }
    if req.env.keys().any(|k| k.is_empty() || k.contains('=')) {
        return Err(RestError::bad_request("env names must be non-empty and contain no '='"));
    }
    Ok(())
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ProcessPath {
    pub namespace: String,
    pub name: String,
    /// The process id the start answered.
    pub pid: String,
}

/// Start a background process.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/processes", tag = "Guest", params(ObjectPath),
    request_body = ExecRequest,
    responses((status = 201, description = "Started", body = Process),
              (status = 409, description = "No guest agent, or suspended by request", body = ErrorBody)))]
async fn process_start(
    c: Caller,
    Path(p): Path<ObjectPath>,
    body: JsonBody<ExecRequest>,
) -> RestResult<(StatusCode, Json<Process>)> {
    let m = authorize(&c, &p, Needs::GuestAgent).await?;
    let req = body.parse()?;
    check_command(&req)?;
    let s = connect(&c, &p, m).await?;
    Ok((StatusCode::CREATED, Json(s.runtime.start_process(&s.id, &req).await?)))
}

/// List background processes.
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/processes", tag = "Guest", params(ObjectPath),
    responses((status = 200, description = "The processes", body = Vec<Process>)))]
async fn process_list(c: Caller, Path(p): Path<ObjectPath>) -> RestResult<Json<Vec<Process>>> {
    let s = open(&c, &p, Needs::GuestAgent).await?;
    Ok(Json(s.runtime.processes(&s.id).await?))
}

fn object(p: &ProcessPath) -> ObjectPath {
    ObjectPath { namespace: p.namespace.clone(), name: p.name.clone() }
}

/// A background process's state.
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/processes/{pid}", tag = "Guest", params(ProcessPath),
    responses((status = 200, description = "The process", body = Process),
              (status = 404, description = "No such process", body = ErrorBody)))]
async fn process_get(c: Caller, Path(p): Path<ProcessPath>) -> RestResult<Json<Process>> {
    let pid = Pid::new(p.pid.as_str())?;
    let s = open(&c, &object(&p), Needs::GuestAgent).await?;
    Ok(Json(s.runtime.process(&s.id, &pid).await?))
}

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct LogsQuery {
    /// Stream the output as it comes until the process exits.
    pub follow: Option<bool>,
    /// With `follow`: `stdout` (default) or `stderr`.
    pub stream: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct ProcessLogs {
    pub stdout: String,
    pub stderr: String,
}

/// A process's output so far, or (`follow=true`) streamed as plain text until it exits.
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/processes/{pid}/logs", tag = "Guest", params(ProcessPath, LogsQuery),
    responses((status = 200, description = "stdout and stderr (or, with follow, one stream as text/plain)", body = ProcessLogs),
              (status = 404, description = "No such process", body = ErrorBody)))]
async fn process_logs(c: Caller, Path(p): Path<ProcessPath>, Query(q): Query<LogsQuery>) -> RestResult<Response> {
    let pid = Pid::new(p.pid.as_str())?;
    if q.follow != Some(true) {
        let s = open(&c, &object(&p), Needs::GuestAgent).await?;
        let (stdout, stderr) = s.runtime.process_logs(&s.id, &pid).await?;
        return Ok(Json(ProcessLogs { stdout, stderr }).into_response());
    }
    let slot = c.connection_slot()?;
    let s = open(&c, &object(&p), Needs::GuestAgent).await?;
    // The process must exist (a 404 now, not an empty stream).
    s.runtime.process(&s.id, &pid).await?;
    let want_stderr = match q.stream.as_deref() {
        None | Some("stdout") => false,
        Some("stderr") => true,
        Some(other) => return Err(RestError::bad_request(format!("stream={other:?}: use stdout or stderr"))),
    };
    // Polls the runtime for what is new since the last byte sent; the session (and its
    // activity stamp) and the connection slot live as long as the stream.
    let body = async_stream(s, pid, want_stderr, slot);
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], Body::from_stream(body)).into_response())
}

fn async_stream(
    s: Session,
    pid: Pid,
    want_stderr: bool,
    slot: Option<crate::limits::ConnectionGuard>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    futures::stream::unfold((s, 0u64, false, slot), move |(s, offset, done, slot)| {
        let pid = pid.clone();
        async move {
            if done {
                return None;
            }
            loop {
                let finished = matches!(s.runtime.process(&s.id, &pid).await, Ok(pr) if pr.state == kairon_runtime_api::types::ProcessState::Exited);
                // Only the bytes past what was sent: a long log is never read again.
                let chunk = match s.runtime.process_log_chunk(&s.id, &pid, want_stderr, offset).await {
                    Ok(c) => c,
                    Err(e) => return Some((Err(std::io::Error::other(e.to_string())), (s, offset, true, slot))),
                };
                if chunk.end > offset {
                    // Even after the exit, read on until nothing is left (a chunk is at most 1 MiB).
                    return Some((Ok(Bytes::from(chunk.data)), (s, chunk.end, false, slot)));
                }
                if finished {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    })
}

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct WaitProcessQuery {
    /// Longest wait (default 60, at most 3600).
    pub timeout_seconds: Option<u64>,
}

/// Wait for a process to exit (answers its state when it does, or when the timeout passes).
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/processes/{pid}/wait", tag = "Guest", params(ProcessPath, WaitProcessQuery),
    responses((status = 200, description = "The process", body = Process)))]
async fn process_wait(
    c: Caller,
    Path(p): Path<ProcessPath>,
    Query(q): Query<WaitProcessQuery>,
) -> RestResult<Json<Process>> {
    let pid = Pid::new(p.pid.as_str())?;
    let _slot = c.connection_slot()?;
    let s = open(&c, &object(&p), Needs::GuestAgent).await?;
    let t = Duration::from_secs(q.timeout_seconds.unwrap_or(60).clamp(1, 3600));
    Ok(Json(s.runtime.wait_process(&s.id, &pid, t).await?))
}

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
pub struct KillQuery {
    /// `TERM` (default), `KILL`, `INT`, `HUP`…
    pub signal: Option<String>,
}

/// Send a signal to a process.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/processes/{pid}/kill", tag = "Guest", params(ProcessPath, KillQuery),
    responses((status = 204, description = "Signalled"), (status = 404, description = "No such process", body = ErrorBody)))]
async fn process_kill(c: Caller, Path(p): Path<ProcessPath>, Query(q): Query<KillQuery>) -> RestResult<StatusCode> {
    let pid = Pid::new(p.pid.as_str())?;
    let s = open(&c, &object(&p), Needs::GuestAgent).await?;
    s.runtime.kill_process(&s.id, &pid, q.signal.as_deref().unwrap_or("TERM")).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FileQuery {
    /// Absolute path in the guest.
    pub path: String,
    /// Octal mode for an upload (default 644).
    pub mode: Option<String>,
}

/// File contents, sent and received as raw bytes.
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct FileBytes(#[allow(dead_code)] Vec<u8>);

/// Largest upload.
pub const MAX_UPLOAD_BYTES: usize = kairon_runtime_api::types::MAX_UPLOAD_BYTES;

fn guest_path(path: &str) -> RestResult<()> {
    if !path.starts_with('/') {
        return Err(RestError::bad_request(format!("path {path:?} must be absolute, e.g. /tmp/task.py")));
    }
    Ok(())
}

/// Download a file.
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/files", tag = "Guest", params(ObjectPath, FileQuery),
    responses((status = 200, description = "The file's bytes", body = FileBytes, content_type = "application/octet-stream"),
              (status = 404, description = "No such file", body = ErrorBody)))]
async fn file_read(c: Caller, Path(p): Path<ObjectPath>, Query(q): Query<FileQuery>) -> RestResult<Response> {
    guest_path(&q.path)?;
    let s = open(&c, &p, Needs::GuestAgent).await?;
    let data = s.runtime.read_file(&s.id, &q.path).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], data).into_response())
}

/// Upload a file (at most 64 MiB), replacing what is there.
#[utoipa::path(put, path = "/api/v1/machines/{namespace}/{name}/files", tag = "Guest", params(ObjectPath, FileQuery),
    request_body(content = FileBytes, content_type = "application/octet-stream"),
    responses((status = 204, description = "Written"),
              (status = 400, description = "Not an absolute path or a bad mode", body = ErrorBody),
              (status = 413, description = "Larger than 64 MiB")))]
async fn file_write(
    c: Caller,
    Path(p): Path<ObjectPath>,
    Query(q): Query<FileQuery>,
    body: Bytes,
) -> RestResult<StatusCode> {
    guest_path(&q.path)?;
    let mode = match &q.mode {
        None => 0o644,
        Some(m) => u32::from_str_radix(m, 8)
            .ok()
            .filter(|m| *m <= 0o7777)
            .ok_or_else(|| RestError::bad_request(format!("mode {m:?} is not an octal file mode like 644")))?,
    };
    let s = open(&c, &p, Needs::GuestAgent).await?;
    s.runtime.write_file(&s.id, &q.path, body.to_vec(), mode).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Delete a file.
#[utoipa::path(delete, path = "/api/v1/machines/{namespace}/{name}/files", tag = "Guest", params(ObjectPath, FileQuery),
    responses((status = 204, description = "Deleted"), (status = 404, description = "No such file", body = ErrorBody)))]
async fn file_delete(c: Caller, Path(p): Path<ObjectPath>, Query(q): Query<FileQuery>) -> RestResult<StatusCode> {
    guest_path(&q.path)?;
    let s = open(&c, &p, Needs::GuestAgent).await?;
    s.runtime.delete_file(&s.id, &q.path).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DirQuery {
    /// Absolute path of a directory in the guest.
    pub path: String,
}

/// List a directory.
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/files/list", tag = "Guest", params(ObjectPath, DirQuery),
    responses((status = 200, description = "Its entries", body = Vec<FileEntry>), (status = 404, description = "No such directory", body = ErrorBody)))]
async fn file_list(
    c: Caller,
    Path(p): Path<ObjectPath>,
    Query(q): Query<DirQuery>,
) -> RestResult<Json<Vec<FileEntry>>> {
    guest_path(&q.path)?;
    let s = open(&c, &p, Needs::GuestAgent).await?;
    Ok(Json(s.runtime.list_files(&s.id, &q.path).await?))
}

// Hop-by-hop headers and the caller's credentials never reach the guest or come back.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn forwardable(name: &HeaderName) -> bool {
    let n = name.as_str();
    !HOP_BY_HOP.contains(&n) && n != "authorization" && n != "host"
}

/// Relays any HTTP request to a server in the guest on `port`, streaming both ways.
async fn sandbox_http(c: Caller, params: HashMap<String, String>, req: Request) -> RestResult<Response> {
    let (ns, name) =
        (params.get("namespace").cloned().unwrap_or_default(), params.get("name").cloned().unwrap_or_default());
    let port: u16 = params
        .get("port")
        .and_then(|p| p.parse().ok())
        .filter(|p| *p > 0)
        .ok_or_else(|| RestError::bad_request("port must be a number from 1 to 65535"))?;
    let path = GuestPath::new(params.get("path").map(String::as_str).unwrap_or_default())?;
    let p = ObjectPath { namespace: ns, name };
    let s = open(&c, &p, Needs::Instance).await?;
    let (parts, body) = req.into_parts();
    let mut headers = reqwest::header::HeaderMap::new();
    for (k, v) in parts.headers.iter().filter(|(k, _)| forwardable(k)) {
        headers.append(k.clone(), v.clone());
    }
    let request = s
        .runtime
        .guest_http(parts.method.clone(), &s.id, port, &path, parts.uri.query())
        .headers(headers)
        .body(reqwest::Body::wrap_stream(body.into_data_stream()));
    let upstream = s.runtime.send_guest_http(request).await?;
    let mut out = HeaderMap::new();
    for (k, v) in upstream.headers().iter().filter(|(k, _)| forwardable(k) && *k != header::SET_COOKIE) {
        out.append(k.clone(), v.clone());
    }
    // Guest content is served from the API's own origin: a browser must treat it as a unique,
    // script-less origin so it cannot act with the API's cookies or storage.
    out.insert(header::CONTENT_SECURITY_POLICY, header::HeaderValue::from_static("sandbox"));
    let status = upstream.status();
    // The session moves into the body so activity is stamped until the response is done.
    let stream = upstream.bytes_stream().map(move |chunk| {
        let _keep = &s;
        chunk.map_err(std::io::Error::other)
    });
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = status;
    *resp.headers_mut() = out;
    Ok(resp)
}

macro_rules! sandbox_http_route {
    ($fn:ident, $method:ident) => {
        /// Relay an HTTP request to a server in the guest on `port` (method, headers, body, status
        /// and response pass through, streaming; Authorization never reaches the guest).
        #[utoipa::path($method, path = "/api/v1/machines/{namespace}/{name}/sandbox-http/{port}/{path}", tag = "Guest",
            params(("namespace" = String, Path, description = "The namespace"),
                   ("name" = String, Path, description = "The Machine"),
                   ("port" = u16, Path, description = "The guest's port"),
                   ("path" = String, Path, description = "The path on the guest's server (may contain slashes)")),
            request_body(content = FileBytes, content_type = "application/octet-stream", description = "Passed through as is"),
            responses((status = 200, description = "The guest server's response, passed through", body = FileBytes, content_type = "application/octet-stream"),
                      (status = 403, description = "Admin-only (or a named operator on a sandbox with the operator flag)", body = ErrorBody),
                      (status = 502, description = "The guest did not answer", body = ErrorBody)))]
        #[allow(dead_code)]
        async fn $fn() {}
    };
}
sandbox_http_route!(sandbox_http_get, get);
sandbox_http_route!(sandbox_http_post, post);
sandbox_http_route!(sandbox_http_put, put);
sandbox_http_route!(sandbox_http_patch, patch);
sandbox_http_route!(sandbox_http_delete, delete);
sandbox_http_route!(sandbox_http_head, head);

/// The sandbox proxy's operations, documented here; its axum routes take a catch-all path,
/// which the document spells as `{path}`.
#[derive(OpenApi)]
#[openapi(paths(
    sandbox_http_get,
    sandbox_http_post,
    sandbox_http_put,
    sandbox_http_patch,
    sandbox_http_delete,
    sandbox_http_head
))]
pub struct SandboxHttpDoc;

async fn sandbox_http_handler(
    c: Caller,
    Path(params): Path<HashMap<String, String>>,
    req: Request,
) -> RestResult<Response> {
    sandbox_http(c, params, req).await
}

/// The axum routes of the sandbox proxy (every method; with and without a path).
pub fn sandbox_http_router() -> axum::Router<AppState> {
    use axum::routing::any;
    axum::Router::new()
        .route("/api/v1/machines/{namespace}/{name}/sandbox-http/{port}", any(sandbox_http_handler))
        .route("/api/v1/machines/{namespace}/{name}/sandbox-http/{port}/", any(sandbox_http_handler))
        .route("/api/v1/machines/{namespace}/{name}/sandbox-http/{port}/{*path}", any(sandbox_http_handler))
}

type Upstream = RelaySocket;

/// Opens the runtime's side of a relay before the client's upgrade, so a refusal there (a paused
/// sandbox, a closed port) is a plain error answer rather than a socket that closes at once.
async fn connect_upstream(s: &Session, relay: Relay) -> RestResult<Upstream> {
    Ok(s.runtime.relay(&s.id, &relay).await?)
}

/// Pumps frames between the client and the runtime until either side closes.
async fn bridge(client: WebSocket, upstream: Upstream, session: Session, slot: Option<crate::limits::ConnectionGuard>) {
    let (mut client_tx, mut client_rx) = client.split();
    let (mut up_tx, mut up_rx) = upstream.split();
    let to_guest = async {
        while let Some(Ok(m)) = client_rx.next().await {
            let m = match m {
                AxMessage::Text(t) => WsMessage::Text(t.as_str().into()),
                AxMessage::Binary(b) => WsMessage::Binary(b),
                AxMessage::Ping(b) => WsMessage::Ping(b),
                AxMessage::Pong(b) => WsMessage::Pong(b),
                AxMessage::Close(_) => break,
            };
            if up_tx.send(m).await.is_err() {
                break;
            }
        }
        let _ = up_tx.send(WsMessage::Close(None)).await;
    };
    let from_guest = async {
        while let Some(Ok(m)) = up_rx.next().await {
            let m = match m {
                WsMessage::Text(t) => AxMessage::Text(t.as_str().into()),
                WsMessage::Binary(b) => AxMessage::Binary(b),
                WsMessage::Ping(b) => AxMessage::Ping(b),
                WsMessage::Pong(b) => AxMessage::Pong(b),
                WsMessage::Close(frame) => {
                    let frame = frame.map(|f| axum::extract::ws::CloseFrame {
                        code: f.code.into(),
                        reason: f.reason.as_str().into(),
                    });
                    let _ = client_tx.send(AxMessage::Close(frame)).await;
                    return;
                }
                WsMessage::Frame(_) => continue,
            };
            if client_tx.send(m).await.is_err() {
                return;
            }
        }
        let _ = client_tx.send(AxMessage::Close(None)).await;
    };
    // Either side closing ends the session (and, with it, the activity stamps).
    tokio::select! { _ = to_guest => {}, _ = from_guest => {} }
    drop(session);
    drop(slot);
}

/// An interactive console over WebSocket (the serial console of a VM, a shell in a sandbox).
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/console", tag = "Guest", params(ObjectPath),
    responses((status = 101, description = "Switching to the WebSocket protocol"),
              (status = 403, description = "Not allowed to use this guest", body = ErrorBody),
              (status = 409, description = "Suspended by request", body = ErrorBody)))]
async fn machine_console(c: Caller, Path(p): Path<ObjectPath>, ws: WebSocketUpgrade) -> RestResult<Response> {
    let slot = c.connection_slot()?;
    let s = open(&c, &p, Needs::Instance).await?;
    let upstream = connect_upstream(&s, Relay::Console).await?;
    Ok(ws.on_upgrade(move |socket| bridge(socket, upstream, s, slot)))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExecStreamQuery {
    /// The command as a JSON array of strings, e.g. `["sh","-c","cat"]`.
    pub command: String,
}

/// Run a command with its stdin, stdout and stderr streamed over WebSocket: binary frames in
/// are its stdin (an empty frame closes stdin), frames out are its output as produced, and its
/// exit closes the socket with reason `exit <code>`. Sandboxes; on a VM use exec or a process.
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/exec/stream", tag = "Guest", params(ObjectPath, ExecStreamQuery),
    responses((status = 101, description = "Switching to the WebSocket protocol"),
              (status = 400, description = "command is not a JSON array naming a program", body = ErrorBody),
              (status = 403, description = "Not allowed to use this guest", body = ErrorBody),
              (status = 409, description = "No guest agent, suspended by request, or a VM", body = ErrorBody)))]
async fn machine_exec_stream(
    c: Caller,
    Path(p): Path<ObjectPath>,
    Query(q): Query<ExecStreamQuery>,
    ws: WebSocketUpgrade,
) -> RestResult<Response> {
    let slot = c.connection_slot()?;
    let command: Vec<String> = serde_json::from_str(&q.command)
        .map_err(|_| RestError::bad_request("command must be a JSON array of strings, e.g. [\"sh\",\"-c\",\"cat\"]"))?;
    check_command(&ExecRequest { command, ..Default::default() })?;
    let s = open(&c, &p, Needs::GuestAgent).await?;
    if s.machine.spec.sandbox.as_ref().is_none_or(|sb| sb.template_name.is_none()) {
        return Err(RestError::conflict(
            "ExecStreamUnsupported",
            "a streamed exec runs in sandboxes; on a VM use exec, or a background process and its logs with follow=true",
        ));
    }
    let upstream = connect_upstream(&s, Relay::ExecStream { command: q.command }).await?;
    Ok(ws.on_upgrade(move |socket| bridge(socket, upstream, s, slot)))
}

/// The VM's display over WebSocket: QEMU's VNC server (RFB), raw bytes both ways.
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/vnc", tag = "Guest", params(ObjectPath),
    responses((status = 101, description = "Switching to the WebSocket protocol"),
              (status = 403, description = "Not allowed to use this guest", body = ErrorBody),
              (status = 409, description = "Suspended by request, or not a VM", body = ErrorBody)))]
async fn machine_vnc(c: Caller, Path(p): Path<ObjectPath>, ws: WebSocketUpgrade) -> RestResult<Response> {
    let slot = c.connection_slot()?;
    let s = open(&c, &p, Needs::Instance).await?;
    if s.machine.spec.sandbox.as_ref().is_some_and(|sb| sb.template_name.is_some()) {
        return Err(RestError::conflict("VncUnsupported", "a template sandbox has no display: VNC needs a VM"));
    }
    let upstream = connect_upstream(&s, Relay::Vnc).await?;
    Ok(ws.on_upgrade(move |socket| bridge(socket, upstream, s, slot)))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct PortPath {
    pub namespace: String,
    pub name: String,
    /// The guest's TCP port (22 for SSH).
    pub port: u16,
}

/// Forward a TCP port of the guest over WebSocket (binary frames both ways); SSH rides on it.
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/portforward/{port}", tag = "Guest", params(PortPath),
    responses((status = 101, description = "Switching to the WebSocket protocol"),
              (status = 403, description = "Not allowed to use this guest", body = ErrorBody),
              (status = 409, description = "Suspended by request", body = ErrorBody)))]
async fn machine_portforward(c: Caller, Path(p): Path<PortPath>, ws: WebSocketUpgrade) -> RestResult<Response> {
    let slot = c.connection_slot()?;
    if p.port == 0 {
        return Err(RestError::bad_request("port must be from 1 to 65535"));
    }
    let s = open(&c, &ObjectPath { namespace: p.namespace.clone(), name: p.name.clone() }, Needs::Instance).await?;
    let upstream = connect_upstream(&s, Relay::Tunnel(p.port)).await?;
    Ok(ws.on_upgrade(move |socket| bridge(socket, upstream, s, slot)))
}

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(machine_exec))
        .routes(routes!(machine_exec_stream))
        .routes(routes!(process_start, process_list))
        .routes(routes!(process_get))
        .routes(routes!(process_logs))
        .routes(routes!(process_wait))
        .routes(routes!(process_kill))
        .routes(routes!(file_read, file_write, file_delete))
        .routes(routes!(file_list))
        .routes(routes!(machine_console))
        .routes(routes!(machine_vnc))
        .routes(routes!(machine_portforward))
}
