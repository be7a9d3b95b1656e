//! Guest routes: exec, background processes, files, the sandbox HTTP proxy, and console and
//! port-forward relays over WebSocket. Each first checks who may use the guest, wakes a Machine
//! the controller idle-suspended (wake-on-connect), and stamps `kairon.zyvor.dev/last-activity`
//! for as long as the session is open.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::ws::{Message as AxMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, Request};
use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use utoipa::{IntoParams, OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use kairon_model::power::Track;
use kairon_runtime_api::types::{ExecRequest, ExecResult, FileEntry, Process};
use kairon_runtime_api::{GuestPath, Pid, Relay, RelaySocket};

use super::objects::ObjectPath;
use super::{Caller, ErrorBody, JsonBody};
use crate::machines::guest::{Offsets, ProcessEvent, check_command};
use crate::machines::{Error, Needs, Reason, Result, Session};
use crate::state::AppState;

impl Caller {
    /// Opens a session on the guest of the Machine in the path.
    async fn open(&self, p: &ObjectPath, needs: Needs) -> Result<Session> {
        self.machines.open(&self.id, &p.namespace, &p.name, needs).await
    }
}

/// Run a command to completion in the guest.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/exec", tag = "Guest", params(ObjectPath),
    request_body = ExecRequest,
    responses((status = 200, description = "Exit code and output", body = ExecResult),
              (status = 403, description = "Not allowed to use this guest", body = ErrorBody),
              (status = 409, description = "No guest agent, or suspended by request", body = ErrorBody),
              (status = 504, description = "The wake did not finish in wakeTimeoutSeconds", body = ErrorBody)))]
async fn machine_exec(c: Caller, Path(p): Path<ObjectPath>, body: JsonBody<ExecRequest>) -> Result<Json<ExecResult>> {
    Ok(Json(c.machines.exec(&c.id, &p.namespace, &p.name, &c.limits, || body.parse()).await?))
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
) -> Result<(StatusCode, Json<Process>)> {
    let started = c.machines.start_process(&c.id, &p.namespace, &p.name, || body.parse()).await?;
    Ok((StatusCode::CREATED, Json(started)))
}

/// List background processes.
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/processes", tag = "Guest", params(ObjectPath),
    responses((status = 200, description = "The processes", body = Vec<Process>)))]
async fn process_list(c: Caller, Path(p): Path<ObjectPath>) -> Result<Json<Vec<Process>>> {
    Ok(Json(c.machines.processes(&c.id, &p.namespace, &p.name).await?))
}

/// A background process's state.
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/processes/{pid}", tag = "Guest", params(ProcessPath),
    responses((status = 200, description = "The process", body = Process),
              (status = 404, description = "No such process", body = ErrorBody)))]
async fn process_get(c: Caller, Path(p): Path<ProcessPath>) -> Result<Json<Process>> {
    Ok(Json(c.machines.process(&c.id, &p.namespace, &p.name, &p.pid).await?))
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
async fn process_logs(c: Caller, Path(p): Path<ProcessPath>, Query(q): Query<LogsQuery>) -> Result<Response> {
    if q.follow != Some(true) {
        let (stdout, stderr) = c.machines.process_logs(&c.id, &p.namespace, &p.name, &p.pid).await?;
        return Ok(Json(ProcessLogs { stdout, stderr }).into_response());
    }
    let slot = c.connection_slot()?;
    // The process must exist (a 404) before the query is judged (a 400).
    let events = c.machines.process_events(&c.id, &p.namespace, &p.name, &p.pid, Offsets::default()).await?;
    let want_stderr = match q.stream.as_deref() {
        None | Some("stdout") => false,
        Some("stderr") => true,
        Some(other) => return Err(Error::bad_request(format!("stream={other:?}: use stdout or stderr"))),
    };
    // One stream's text until the exit; the connection slot lives as long as the stream.
    let body = events.filter_map(move |ev| {
        let _held = &slot;
        futures::future::ready(match ev {
            Ok(ProcessEvent::Stdout { data, .. }) if !want_stderr => Some(Ok(Bytes::from(data))),
            Ok(ProcessEvent::Stderr { data, .. }) if want_stderr => Some(Ok(Bytes::from(data))),
            Ok(_) => None,
            Err(e) => Some(Err(std::io::Error::other(e.message))),
        })
    });
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], Body::from_stream(body)).into_response())
}

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct StreamQuery {
    /// Send stdout from this byte (the `end` of the last stdout event seen; default 0).
    pub stdout_offset: Option<u64>,
    /// Send stderr from this byte (likewise).
    pub stderr_offset: Option<u64>,
}

/// A process's stdout, stderr and exit as one stream, one JSON object a line
/// (`application/x-ndjson`): `{"type":"stdout","data":"…","end":N}`, the same for `stderr`, and
/// last `{"type":"exit","exitCode":0}`. Each output event's `end` is the offset to resume from:
/// a client that lost the connection asks again with `stdoutOffset`/`stderrOffset` and misses
/// nothing. Sandboxes and VMs.
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/processes/{pid}/stream", tag = "Guest", params(ProcessPath, StreamQuery),
    responses((status = 200, description = "Events, one JSON object a line, until the process exits", body = ProcessEvent, content_type = "application/x-ndjson"),
              (status = 404, description = "No such process", body = ErrorBody)))]
async fn process_stream(c: Caller, Path(p): Path<ProcessPath>, Query(q): Query<StreamQuery>) -> Result<Response> {
    let slot = c.connection_slot()?;
    let from = Offsets { stdout: q.stdout_offset.unwrap_or(0), stderr: q.stderr_offset.unwrap_or(0) };
    let events = c.machines.process_events(&c.id, &p.namespace, &p.name, &p.pid, from).await?;
    let lines = events.map(move |ev| {
        // The connection slot is held as long as the stream.
        let _held = &slot;
        let ev = ev.unwrap_or_else(|e| ProcessEvent::Error { reason: e.reason, message: e.message });
        let mut line = serde_json::to_vec(&ev).map_err(std::io::Error::other)?;
        line.push(b'\n');
        Ok::<_, std::io::Error>(Bytes::from(line))
    });
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], Body::from_stream(lines)).into_response())
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
) -> Result<Json<Process>> {
    Pid::new(p.pid.as_str())?;
    let _slot = c.connection_slot()?;
    let t = Duration::from_secs(q.timeout_seconds.unwrap_or(60).clamp(1, 3600));
    Ok(Json(c.machines.wait_process(&c.id, &p.namespace, &p.name, &p.pid, t).await?))
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
async fn process_kill(c: Caller, Path(p): Path<ProcessPath>, Query(q): Query<KillQuery>) -> Result<StatusCode> {
    let signal = q.signal.as_deref().unwrap_or("TERM");
    c.machines.kill_process(&c.id, &p.namespace, &p.name, &p.pid, signal).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
pub struct StdinQuery {
    /// Close stdin after writing the body (the process reads end of file).
    pub close: Option<bool>,
}

/// Write to a background process's stdin (one started with `keepStdinOpen`), in order with
/// earlier writes; at most 1 MiB a request; `close=true` closes it afterwards. Waits up to 30 s
/// for the process to read.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/processes/{pid}/stdin", tag = "Guest", params(ProcessPath, StdinQuery),
    request_body(content = FileBytes, content_type = "application/octet-stream"),
    responses((status = 204, description = "Written (and closed, with close=true)"),
              (status = 404, description = "No such process", body = ErrorBody),
              (status = 409, description = "The process's stdin is not open", body = ErrorBody),
              (status = 413, description = "More than 1 MiB", body = ErrorBody)))]
async fn process_stdin(
    c: Caller,
    Path(p): Path<ProcessPath>,
    Query(q): Query<StdinQuery>,
    body: Bytes,
) -> Result<StatusCode> {
    let close = q.close.unwrap_or(false);
    c.machines.write_stdin(&c.id, &p.namespace, &p.name, &p.pid, body.to_vec(), close).await?;
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

/// Download a file, streamed (with its Content-Length when the size is known up front: on
/// sandboxes).
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/files", tag = "Guest", params(ObjectPath, FileQuery),
    responses((status = 200, description = "The file's bytes", body = FileBytes, content_type = "application/octet-stream"),
              (status = 404, description = "No such file", body = ErrorBody)))]
async fn file_read(c: Caller, Path(p): Path<ObjectPath>, Query(q): Query<FileQuery>) -> Result<Response> {
    let file = c.machines.read_file_stream(&c.id, &p.namespace, &p.name, &q.path).await?;
    let mut resp = ([(header::CONTENT_TYPE, "application/octet-stream")], Body::from_stream(file.body)).into_response();
    if let Some(len) = file.len {
        resp.headers_mut().insert(header::CONTENT_LENGTH, len.into());
    }
    Ok(resp)
}

/// Upload a file, replacing what is there (at most `--max-upload-bytes`, 1 GiB by default).
/// The body streams to the guest as it arrives; the old file is replaced only once all of it
/// arrived, so a broken upload leaves it as it was. Without `mode` an existing
/// file keeps its mode, a new one gets 644.
#[utoipa::path(put, path = "/api/v1/machines/{namespace}/{name}/files", tag = "Guest", params(ObjectPath, FileQuery),
    request_body(content = FileBytes, content_type = "application/octet-stream"),
    responses((status = 204, description = "Written"),
              (status = 400, description = "Not an absolute path or a bad mode", body = ErrorBody),
              (status = 413, description = "Larger than the upload limit (the message says it)", body = ErrorBody)))]
async fn file_write(c: Caller, Path(p): Path<ObjectPath>, Query(q): Query<FileQuery>, body: Body) -> Result<Response> {
    // The body limit (server.rs) cuts a body with no length at the limit: that error, seen
    // here, becomes the 413 it is rather than a failed write.
    let over = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = over.clone();
    let data = body.into_data_stream().map(move |chunk| {
        chunk.map_err(|e| {
            let e = e.into_inner();
            if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() {
                seen.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            e
        })
    });
    let written = c
        .machines
        .write_file(&c.id, &p.namespace, &p.name, &q.path, q.mode.as_deref(), reqwest::Body::wrap_stream(data))
        .await;
    let refusal = match written {
        Ok(()) => return Ok(StatusCode::NO_CONTENT.into_response()),
        Err(_) if over.load(std::sync::atomic::Ordering::Relaxed) => {
            Error::new(Reason::PayloadTooLarge, crate::limits::upload_too_large(c.limits.max_upload_bytes))
        }
        Err(e) => e,
    };
    // A refusal may come before the body was all read: this connection cannot carry another
    // request, and the client must not send one on it.
    let mut resp = refusal.into_response();
    resp.headers_mut().insert(header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    Ok(resp)
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeleteFileQuery {
    /// Absolute path in the guest.
    pub path: String,
    /// A directory that is not empty goes with everything in it (without it: 409).
    pub recursive: Option<bool>,
}

/// Delete a file, an empty directory, or with `recursive=true` a directory and everything in it.
#[utoipa::path(delete, path = "/api/v1/machines/{namespace}/{name}/files", tag = "Guest", params(ObjectPath, DeleteFileQuery),
    responses((status = 204, description = "Deleted"), (status = 404, description = "No such file", body = ErrorBody),
              (status = 409, description = "A directory that is not empty, without recursive=true", body = ErrorBody)))]
async fn file_delete(c: Caller, Path(p): Path<ObjectPath>, Query(q): Query<DeleteFileQuery>) -> Result<StatusCode> {
    let recursive = q.recursive.unwrap_or(false);
    c.machines.delete_file(&c.id, &p.namespace, &p.name, &q.path, recursive).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// What is at a path: its size, mode, kind, modified time and a symlink's target (the symlink
/// itself, not followed).
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/files/info", tag = "Guest", params(ObjectPath, InfoQuery),
    responses((status = 200, description = "The file", body = FileEntry), (status = 404, description = "Nothing at that path", body = ErrorBody)))]
async fn file_info(c: Caller, Path(p): Path<ObjectPath>, Query(q): Query<InfoQuery>) -> Result<Json<FileEntry>> {
    Ok(Json(c.machines.file_info(&c.id, &p.namespace, &p.name, &q.path).await?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InfoQuery {
    /// Absolute path in the guest.
    pub path: String,
}

/// Where a file moves.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameRequest {
    /// Its absolute path now.
    #[schema(pattern = r"^/(?!.*(^|/)\.\.?(/|$))[^\u0000-\u001f\u007f-\u009f]*$", max_length = 4096)]
    pub from: String,
    /// Its new absolute path: a file there is replaced, a directory there must be empty.
    #[schema(pattern = r"^/(?!.*(^|/)\.\.?(/|$))[^\u0000-\u001f\u007f-\u009f]*$", max_length = 4096)]
    pub to: String,
}

/// Move (rename) a file or directory in the guest.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/files/rename", tag = "Guest", params(ObjectPath),
    request_body = RenameRequest,
    responses((status = 204, description = "Moved"), (status = 404, description = "Nothing at from", body = ErrorBody),
              (status = 409, description = "A directory that is not empty at to", body = ErrorBody)))]
async fn file_rename(c: Caller, Path(p): Path<ObjectPath>, body: JsonBody<RenameRequest>) -> Result<StatusCode> {
    let r = body.parse()?;
    GuestPath::new(&r.from)?;
    GuestPath::new(&r.to)?;
    c.machines.rename_file(&c.id, &p.namespace, &p.name, &r.from, &r.to).await?;
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
async fn file_list(c: Caller, Path(p): Path<ObjectPath>, Query(q): Query<DirQuery>) -> Result<Json<Vec<FileEntry>>> {
    Ok(Json(c.machines.list_files(&c.id, &p.namespace, &p.name, &q.path).await?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WatchQuery {
    /// Absolute path of a directory in the guest.
    pub path: String,
    /// Watch the directories below too, made later ones included.
    pub recursive: Option<bool>,
}

/// One change [`file_watch`] reports (a line of its NDJSON answer).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileEvent {
    /// `ready` (first: every watch is in place), `create`, `modify`, `remove`, `rename` (with
    /// `from`), or `error` (with `message`; the watch ends).
    #[serde(rename = "type")]
    pub kind: String,
    pub path: Option<String>,
    pub is_dir: Option<bool>,
    pub from: Option<String>,
    pub message: Option<String>,
}

/// The guest's agent that watches files: in a sandbox's tools directory, or a VM image's /sbin.
const WATCH_SCRIPT: &str = "for a in /.kairon/kairon-agent /sbin/kairon-agent; do \
    if [ -x \"$a\" ]; then exec \"$a\" watch \"$@\"; fi; done; \
    echo '{\"type\":\"error\",\"message\":\"this guest has no kairon-agent to watch files with\"}'; exit 127";

/// Watch a directory: the changes under it as they happen, one JSON object a line
/// (`application/x-ndjson`), from inotify in the guest (sandboxes, and VMs whose image runs
/// kairon-agent): first `{"type":"ready"}`, then `create`, `modify`, `remove` and `rename`
/// (with `from`). It lasts until the client goes or the directory is removed; an open watch
/// counts as activity, as an open terminal does.
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/files/watch", tag = "Guest", params(ObjectPath, WatchQuery),
    responses((status = 200, description = "The changes as they happen, one FileEvent a line", body = FileEvent, content_type = "application/x-ndjson"),
              (status = 400, description = "path is not absolute", body = ErrorBody),
              (status = 404, description = "No such directory", body = ErrorBody),
              (status = 409, description = "No guest agent (or a stock qemu-ga), or suspended by request", body = ErrorBody),
              (status = 504, description = "The node's runtime did not open the stream in time", body = ErrorBody)))]
async fn file_watch(c: Caller, Path(p): Path<ObjectPath>, Query(q): Query<WatchQuery>) -> Result<Response> {
    GuestPath::new(&q.path)?;
    let slot = c.connection_slot()?;
    let s = c.open(&p, Needs::GuestAgent).await?;
    let mut command = vec!["/bin/sh".to_string(), "-c".into(), WATCH_SCRIPT.into(), "watch".into()];
    if q.recursive == Some(true) {
        command.push("--recursive".into());
    }
    command.push(q.path.clone());
    let command = serde_json::to_string(&command).map_err(|e| Error::bad_request(e.to_string()))?;
    let relay = Relay::ExecStream { command, env: BTreeMap::new(), user: None, cwd: None, tty: None };
    let mut upstream = connect_upstream(&s, relay).await?;
    // The answer starts once the watch is in place: its first line is `ready`, or an error that
    // becomes this request's (a missing directory is a 404).
    let mut first = Vec::new();
    let rest = loop {
        let frame = match upstream.next().await {
            Some(Ok(WsMessage::Binary(b))) => b,
            Some(Ok(WsMessage::Text(t))) => Bytes::from(t.as_str().to_owned()),
            Some(Ok(WsMessage::Close(_))) | None => {
                return Err(Error::new(Reason::GuestClosed, "the guest ended the watch before it began"));
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(Error::new(Reason::GuestUnreachable, format!("watching {}: {e}", q.path))),
        };
        first.extend_from_slice(&frame);
        if let Some(nl) = first.iter().position(|&b| b == b'\n') {
            break first.split_off(nl + 1);
        }
        if first.len() > 64 * 1024 {
            return Err(Error::new(Reason::GuestClosed, "the guest's watch answered no line"));
        }
    };
    let said: serde_json::Value = serde_json::from_slice(&first).unwrap_or_default();
    if said["type"] != "ready" {
        let message = said["message"].as_str().unwrap_or("the guest could not watch it").to_string();
        return Err(if message.ends_with("is not a directory") {
            Error::not_found(format!("{message}: watch a directory that exists"))
        } else {
            Error::new(Reason::GuestClosed, message)
        });
    }
    // The session (activity, the connection slot) lasts as long as the answer is read; the
    // client going drops the stream, which closes the relay and so ends the watch in the guest.
    let held = (s, slot);
    let head = futures::stream::iter([Ok(Bytes::from(first)), Ok(Bytes::from(rest))]);
    let lines = head.chain(upstream.filter_map(move |m| {
        let _held = &held;
        std::future::ready(match m {
            Ok(WsMessage::Binary(b)) => Some(Ok::<_, std::io::Error>(b)),
            Ok(WsMessage::Text(t)) => Some(Ok(Bytes::from(t.as_str().to_owned()))),
            Ok(_) => None,
            Err(e) => Some(Err(std::io::Error::other(e))),
        })
    }));
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], Body::from_stream(lines)).into_response())
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
async fn sandbox_http(c: Caller, params: HashMap<String, String>, req: Request) -> Result<Response> {
    let (ns, name) =
        (params.get("namespace").cloned().unwrap_or_default(), params.get("name").cloned().unwrap_or_default());
    let port: u16 = params
        .get("port")
        .and_then(|p| p.parse().ok())
        .filter(|p| *p > 0)
        .ok_or_else(|| Error::bad_request("port must be a number from 1 to 65535"))?;
    let path = GuestPath::new(params.get("path").map(String::as_str).unwrap_or_default())?;
    let p = ObjectPath { namespace: ns, name };
    let s = c.open(&p, Needs::Instance).await?;
    relay_http(s, port, &path, req, Origin::Api).await
}

/// Which origin a relayed guest response is served from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The API's own (`…/sandbox-http/`): the guest's content must not act as the API's page.
    Api,
    /// A preview link's host, an origin of its own (`crate::previews`): the guest's page runs as
    /// any site does, with its own cookies.
    Preview,
}

/// Relays `req` to the guest's server on `port` at `path` (its query kept) through the session's
/// runtime, streaming both ways; the session stays open (activity stamped) until the response's
/// body is done.
pub async fn relay_http(s: Session, port: u16, path: &GuestPath, req: Request, origin: Origin) -> Result<Response> {
    let (parts, body) = req.into_parts();
    let mut headers = reqwest::header::HeaderMap::new();
    for (k, v) in parts.headers.iter().filter(|(k, _)| forwardable(k)) {
        headers.append(k.clone(), v.clone());
    }
    let request = s
        .runtime
        .guest_http(parts.method.clone(), &s.id, port, path, parts.uri.query())
        .headers(headers)
        .body(reqwest::Body::wrap_stream(body.into_data_stream()));
    let upstream = s.runtime.send_guest_http(request).await?;
    let mut out = HeaderMap::new();
    let keeps = |k: &HeaderName| forwardable(k) && (origin == Origin::Preview || *k != header::SET_COOKIE);
    for (k, v) in upstream.headers().iter().filter(|(k, _)| keeps(k)) {
        out.append(k.clone(), v.clone());
    }
    if origin == Origin::Api {
        // Guest content is served from the API's own origin: a browser must treat it as a unique,
        // script-less origin so it cannot act with the API's cookies or storage.
        out.insert(header::CONTENT_SECURITY_POLICY, header::HeaderValue::from_static("sandbox"));
    }
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
) -> Result<Response> {
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
/// How long the node's runtime may take to open a relay: a client's WebSocket waits on it
/// before it hears 101, so a runtime that stalls is answered with 504, not left hanging.
const RELAY_OPEN: Duration = Duration::from_secs(20);

async fn connect_upstream(s: &Session, relay: Relay) -> Result<Upstream> {
    match tokio::time::timeout(RELAY_OPEN, s.runtime.relay(&s.id, &relay)).await {
        Ok(upstream) => Ok(upstream?),
        Err(_) => {
            tracing::warn!(machine = ?s.machine.metadata.name, "the node's runtime did not open a relay within {RELAY_OPEN:?}");
            Err(Error::new(
                Reason::Timeout,
                format!(
                    "the node's runtime did not open this stream within {} s: try again; if it persists, see the \
                     node's runtime log",
                    RELAY_OPEN.as_secs()
                ),
            ))
        }
    }
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
              (status = 409, description = "Suspended by request", body = ErrorBody),
              (status = 504, description = "The node's runtime did not open the stream in time", body = ErrorBody)))]
async fn machine_console(c: Caller, Path(p): Path<ObjectPath>, ws: WebSocketUpgrade) -> Result<Response> {
    let slot = c.connection_slot()?;
    let s = c.open(&p, Needs::Instance).await?;
    let upstream = connect_upstream(&s, Relay::Console).await?;
    Ok(ws.protocols([WS_PROTOCOL]).on_upgrade(move |socket| bridge(socket, upstream, s, slot)))
}

/// The subprotocol the WebSocket routes answer with when a client offers it: a browser that
/// carries its token as `base64url.bearer.authorization.k8s.io.<token>` offers this one too, since
/// a server must choose one of the protocols offered.
pub const WS_PROTOCOL: &str = "kairon.v1";

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExecStreamQuery {
    /// The command as a JSON array of strings, e.g. `["sh","-c","cat"]`.
    pub command: String,
    /// Its environment variables as a JSON object of strings, e.g. `{"DEBUG":"1"}`, over
    /// the Machine's `spec.env`.
    pub env: Option<String>,
    /// Run it as this user: `uid[:gid]`, or a name the guest knows (default root).
    pub user: Option<String>,
    /// Its working directory (default the image's).
    pub cwd: Option<String>,
    /// Run it on a terminal (`kaironctl exec -it`): output is the terminal's (stdout and
    /// stderr together), an empty frame is ^D, and a text frame
    /// `{"resize":{"cols":C,"rows":R}}` resizes it.
    pub tty: Option<bool>,
    /// The terminal's width in columns (1 to 1000; default 80).
    #[param(minimum = 1, maximum = 1000)]
    pub cols: Option<u16>,
    /// The terminal's height in rows (1 to 1000; default 24).
    #[param(minimum = 1, maximum = 1000)]
    pub rows: Option<u16>,
}

/// Run a command with its stdin, stdout and stderr streamed over WebSocket: binary frames in
/// are its stdin (an empty frame closes stdin), frames out are its output as produced, and its
/// exit closes the socket with reason `exit <code>`. With `tty=true` it runs on a terminal
/// of `cols` x `rows`. Sandboxes, and VMs whose image runs kairon-agent (a stock qemu-ga
/// cannot stream: 409).
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/exec/stream", tag = "Guest", params(ObjectPath, ExecStreamQuery),
    responses((status = 101, description = "Switching to the WebSocket protocol"),
              (status = 400, description = "command is not a JSON array naming a program", body = ErrorBody),
              (status = 403, description = "Not allowed to use this guest", body = ErrorBody),
              (status = 409, description = "No guest agent (or a stock qemu-ga), or suspended by request", body = ErrorBody),
              (status = 504, description = "The node's runtime did not open the stream in time", body = ErrorBody)))]
async fn machine_exec_stream(
    c: Caller,
    Path(p): Path<ObjectPath>,
    Query(q): Query<ExecStreamQuery>,
    ws: WebSocketUpgrade,
) -> Result<Response> {
    let slot = c.connection_slot()?;
    let command: Vec<String> = serde_json::from_str(&q.command)
        .map_err(|_| Error::bad_request("command must be a JSON array of strings, e.g. [\"sh\",\"-c\",\"cat\"]"))?;
    let env: BTreeMap<String, String> = match q.env.as_deref() {
        Some(env) => serde_json::from_str(env)
            .map_err(|_| Error::bad_request("env must be a JSON object of strings, e.g. {\"DEBUG\":\"1\"}"))?,
        None => BTreeMap::new(),
    };
    let mut req = ExecRequest { command, env, user: q.user, cwd: q.cwd, ..Default::default() };
    check_command(&req)?;
    let s = c.open(&p, Needs::GuestAgent).await?;
    let tty = match q.tty {
        Some(true) => {
            let (cols, rows) = (q.cols.unwrap_or(80), q.rows.unwrap_or(24));
            if !(1..=1000).contains(&cols) || !(1..=1000).contains(&rows) {
                return Err(Error::bad_request(format!(
                    "a {cols}x{rows} terminal: cols and rows must be from 1 to 1000"
                )));
            }
            Some((cols, rows))
        }
        _ => None,
    };
    c.machines.with_machine_env(&s.machine, &mut req.env).await?;
    let relay = Relay::ExecStream { command: q.command, env: req.env, user: req.user, cwd: req.cwd, tty };
    let upstream = connect_upstream(&s, relay).await?;
    Ok(ws.protocols([WS_PROTOCOL]).on_upgrade(move |socket| bridge(socket, upstream, s, slot)))
}

/// The VM's display over WebSocket: QEMU's VNC server (RFB), raw bytes both ways.
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/vnc", tag = "Guest", params(ObjectPath),
    responses((status = 101, description = "Switching to the WebSocket protocol"),
              (status = 403, description = "Not allowed to use this guest", body = ErrorBody),
              (status = 409, description = "Suspended by request, or not a VM", body = ErrorBody),
              (status = 504, description = "The node's runtime did not open the stream in time", body = ErrorBody)))]
async fn machine_vnc(c: Caller, Path(p): Path<ObjectPath>, ws: WebSocketUpgrade) -> Result<Response> {
    let slot = c.connection_slot()?;
    let s = c.open(&p, Needs::Instance).await?;
    if s.machine.spec.track() == Track::TemplateSandbox {
        return Err(Error::conflict(Reason::VncUnsupported, "a template sandbox has no display: VNC needs a VM"));
    }
    let upstream = connect_upstream(&s, Relay::Vnc).await?;
    Ok(ws.protocols([WS_PROTOCOL]).on_upgrade(move |socket| bridge(socket, upstream, s, slot)))
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
              (status = 409, description = "Suspended by request", body = ErrorBody),
              (status = 504, description = "The node's runtime did not open the stream in time", body = ErrorBody)))]
async fn machine_portforward(c: Caller, Path(p): Path<PortPath>, ws: WebSocketUpgrade) -> Result<Response> {
    let slot = c.connection_slot()?;
    if p.port == 0 {
        return Err(Error::bad_request("port must be from 1 to 65535"));
    }
    let s = c.open(&ObjectPath { namespace: p.namespace.clone(), name: p.name.clone() }, Needs::Instance).await?;
    let upstream = connect_upstream(&s, Relay::Tunnel(p.port)).await?;
    Ok(ws.protocols([WS_PROTOCOL]).on_upgrade(move |socket| bridge(socket, upstream, s, slot)))
}

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(machine_exec))
        .routes(routes!(machine_exec_stream))
        .routes(routes!(process_stream))
        .routes(routes!(process_stdin))
        .routes(routes!(process_start, process_list))
        .routes(routes!(process_get))
        .routes(routes!(process_logs))
        .routes(routes!(process_wait))
        .routes(routes!(process_kill))
        .routes(routes!(file_read, file_write, file_delete))
        .routes(routes!(file_list))
        .routes(routes!(file_watch))
        .routes(routes!(file_info))
        .routes(routes!(file_rename))
        .routes(routes!(machine_console))
        .routes(routes!(machine_vnc))
        .routes(routes!(machine_portforward))
}
