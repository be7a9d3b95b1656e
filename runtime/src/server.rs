//! The FluxVM v1 HTTP API over a `Runtime`. Not open to anyone on the host: every request
//! carries the bearer token the node agent and the api hold.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use futures::StreamExt;
use tracing::Instrument;

use crate::api::EgressCheckRequest;
use crate::api::{
    ClaimRequest, CreatePoolRequest, CreateTemplateRequest, CreateVmRequest, ErrorBody, ExecRequest, PowerAction,
    SetOwnerRequest,
};
use crate::engine::{Runtime, RuntimeError};
use kairon_runtime_api::OWNER_HEADER;
use kairon_runtime_api::grant::GrantVerifier;

#[derive(Clone)]
struct AppState {
    rt: Runtime,
    auth: Arc<RuntimeAuth>,
}

/// Who may call this runtime: whoever holds its token (its own node agent; on a single node, the
/// api too), and, across a cluster, the api with a grant signed for this node.
pub struct RuntimeAuth {
    token: String,
    grants: Option<GrantVerifier>,
}

impl RuntimeAuth {
    pub fn token(token: String) -> Self {
        RuntimeAuth { token, grants: None }
    }

    /// Also accepts the api's grants for this node (see [`kairon_runtime_api::grant`]).
    pub fn with_grants(self, grants: GrantVerifier) -> Self {
        RuntimeAuth { grants: Some(grants), ..self }
    }

    fn allows(&self, bearer: &str) -> bool {
        constant_time_eq(bearer.as_bytes(), self.token.as_bytes())
            || self.grants.as_ref().is_some_and(|g| match g.verify(bearer) {
                Ok(()) => true,
                Err(e) => {
                    // A grant that fails (another node's, expired, another key's) is worth an
                    // operator's look; anything else is just a wrong token.
                    if bearer.matches('.').count() == 2 {
                        tracing::warn!("{e}");
                    }
                    false
                }
            })
    }
}

impl IntoResponse for RuntimeError {
    fn into_response(self) -> Response {
        let code = match self {
            RuntimeError::NotFound(_) => StatusCode::NOT_FOUND,
            RuntimeError::Conflict(_)
            | RuntimeError::StdinClosed(_)
            | RuntimeError::Stale(_)
            | RuntimeError::NotOwned(_) => StatusCode::CONFLICT,
            RuntimeError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            RuntimeError::NotSupported(_) => StatusCode::NOT_IMPLEMENTED,
            RuntimeError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (code, Json(ErrorBody { reason: self.reason().into(), message: self.to_string() })).into_response()
    }
}

type R<T> = Result<T, RuntimeError>;

pub fn router(rt: Runtime, token: String) -> Router {
    router_with(rt, RuntimeAuth::token(token))
}

pub fn router_with(rt: Runtime, auth: RuntimeAuth) -> Router {
    let state = AppState { rt, auth: Arc::new(auth) };
    Router::new()
        .route("/v1/node", get(node))
        .route("/v1/vms", get(list_vms).post(create_vm))
        .route("/v1/sandboxes", get(list_sandboxes).post(create_sandbox))
        .route("/v1/vms/{id}", get(get_vm).delete(delete_vm))
        .route("/v1/vms/{id}/exec", post(exec))
        .route("/v1/vms/{id}/processes", get(processes).post(start_process))
        .route("/v1/vms/{id}/processes/{pid}", get(process))
        .route("/v1/vms/{id}/processes/{pid}/logs", get(process_logs))
        .route("/v1/vms/{id}/processes/{pid}/wait", post(wait_process))
        .route("/v1/vms/{id}/processes/{pid}/kill", post(kill_process))
        .route("/v1/vms/{id}/processes/{pid}/stdin", post(process_stdin))
        .route("/v1/vms/{id}/files", get(read_file).put(write_file).delete(delete_file))
        .route("/v1/vms/{id}/files/rename", post(rename_file))
        .route("/v1/vms/{id}/stats", get(stats))
        .route("/v1/vms/{id}/proxy/{port}", any(proxy_root))
        .route("/v1/vms/{id}/proxy/{port}/", any(proxy_root))
        .route("/v1/vms/{id}/proxy/{port}/{*path}", any(proxy_path))
        .route("/v1/vms/{id}/tunnel/{port}", get(ws_tunnel))
        .route("/v1/vms/{id}/console", get(ws_console))
        .route("/v1/vms/{id}/exec-stream", get(ws_exec_stream))
        .route("/v1/vms/{id}/fork", post(fork))
        .route("/v1/vms/{id}/clone", post(clone_vm))
        .route("/v1/vms/{id}/freeze", get(freeze_status).post(freeze))
        .route("/v1/vms/{id}/thaw", post(thaw))
        .route("/v1/vms/{id}/owner", post(set_owner))
        .route("/v1/vms/{id}/vnc", get(ws_vnc))
        .route("/v1/sandboxes/{id}/snapshot", post(snapshot))
        .route("/v1/sandboxes/{id}/layer", get(export_layer))
        .route("/v1/imports", post(begin_import))
        .route("/v1/imports/{id}", axum::routing::put(import_layer))
        .route("/v1/imports/{id}/migration", get(ws_live_in))
        .route("/v1/vms/{id}/migration", get(ws_live_out))
        .route("/v1/vms/{id}/{action}", post(power))
        .route("/v1/egress-check", post(egress_check))
        .route("/v1/egress/denials", get(egress_denials))
        .route("/v1/pools", get(list_pools).post(create_pool))
        .route("/v1/pools/{name}", get(get_pool).delete(delete_pool))
        .route("/v1/pools/{name}/claim", post(claim))
        .route("/v1/templates", get(list_templates).post(create_template))
        .route("/v1/templates/{name}", get(get_template))
        .layer(middleware::from_fn_with_state(state.clone(), check_owner))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        // Its callers are the API and node agents (token-authenticated), which apply their own
        // limits: an upload the API accepts, or an exec carrying stdin, must fit here too (axum's
        // 2 MiB default refused them, and closed the connection under the next request).
        .layer(axum::extract::DefaultBodyLimit::max(4 * kairon_runtime_api::types::MAX_BUFFERED_FILE_BYTES))
        .with_state(state)
}

async fn authenticate(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let ok = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| st.auth.allows(t));
    if !ok {
        let body = ErrorBody {
            reason: "Unauthorized".into(),
            message: "the runtime API needs the node's bearer token, or the api's grant for this node".into(),
        };
        return (StatusCode::UNAUTHORIZED, Json(body)).into_response();
    }
    // What callers asked for, exactly as it arrived: the isolation tests read it back.
    tracing::debug!(
        target: "kairon_runtime::requests",
        method = %req.method(),
        path = %req.uri().path(),
        query = ?redacted_query(req.uri().query().unwrap_or_default()),
        "runtime request"
    );
    next.run(req).await
}

/// A query as logged: an `env` value (which may hold secrets) is replaced by its length.
fn redacted_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some(("env", v)) => format!("env=<{} bytes redacted>", v.len()),
            _ => pair.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// A request that names the Machine it acts for ([`OWNER_HEADER`]) reaches an instance only if
/// the instance is that Machine's: the api's guest operations need no lookup of their own, and
/// a Machine whose status names another's instance (even for a moment) never reaches it.
async fn check_owner(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let Some(owner) = req.headers().get(OWNER_HEADER) else { return next.run(req).await };
    let Ok(owner) = owner.to_str() else {
        return RuntimeError::Invalid(format!("{OWNER_HEADER} must be a Machine UID")).into_response();
    };
    let path = req.uri().path();
    let id = ["/v1/vms/", "/v1/sandboxes/"]
        .iter()
        .find_map(|prefix| path.strip_prefix(prefix))
        .map(|rest| rest.split('/').next().unwrap_or_default())
        .filter(|id| !id.is_empty());
    let Some(id) = id else {
        return RuntimeError::Invalid(format!("{OWNER_HEADER} is for requests on one instance, not {path}"))
            .into_response();
    };
    if let Err(e) = st.rt.check_owner(id, owner).await {
        return e.into_response();
    }
    next.run(req).await
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn node(State(st): State<AppState>) -> Json<serde_json::Value> {
    let vm = crate::vm::qemu_installed();
    let accel = if vm { st.rt.acceleration().await } else { None };
    let backends: Vec<&str> = if vm { vec!["sandbox", "vm"] } else { vec!["sandbox"] };
    Json(serde_json::json!({
        "name": st.rt.node_name(),
        "backends": backends,
        "acceleration": accel,
        "defaultImage": st.rt.default_image(),
        // The runc processes started so far: the hot path (claim, wake, exec) leaves it still.
        "runcInvocations": st.rt.runc_invocations(),
    }))
}

async fn list_vms(State(st): State<AppState>, Query(q): Query<HashMap<String, String>>) -> Response {
    let mut vms = st.rt.list().await;
    if let Some(name) = q.get("name") {
        vms.retain(|v| &v.name == name);
    }
    Json(vms).into_response()
}

async fn list_sandboxes(State(st): State<AppState>) -> Response {
    let vms: Vec<_> = st.rt.list().await.into_iter().filter(|v| v.spec.sandbox.is_some()).collect();
    Json(vms).into_response()
}

async fn create_vm(State(st): State<AppState>, Json(req): Json<CreateVmRequest>) -> R<Response> {
    Ok((StatusCode::CREATED, Json(st.rt.create(req).await?)).into_response())
}

async fn create_sandbox(State(st): State<AppState>, Json(mut req): Json<CreateVmRequest>) -> R<Response> {
    if req.sandbox.is_none() {
        req.sandbox = Some(Default::default());
    }
    Ok((StatusCode::CREATED, Json(st.rt.create(req).await?)).into_response())
}

/// A stopped sandbox's writable layer, as a tar streamed while it is written (cold migration).
async fn export_layer(State(st): State<AppState>, Path(id): Path<String>) -> R<Response> {
    let layer = st.rt.export_layer(&id).await?;
    Ok(([(header::CONTENT_TYPE, "application/x-tar")], Body::from_stream(layer)).into_response())
}

/// Announces a sandbox that is to arrive with its layer (cold migration onto this node).
async fn begin_import(State(st): State<AppState>, Json(req): Json<CreateVmRequest>) -> R<Response> {
    Ok((StatusCode::CREATED, Json(st.rt.begin_import(req).await?)).into_response())
}

/// Creates an announced sandbox from the layer in the body, and starts it.
async fn import_layer(State(st): State<AppState>, Path(id): Path<String>, body: Body) -> Response {
    let layer = body.into_data_stream().map(|r| r.map_err(std::io::Error::other));
    match st.rt.import_layer(&id, layer).await {
        Ok(vm) => (StatusCode::CREATED, Json(vm)).into_response(),
        // The body may be unread: this connection carries no other request.
        Err(e) => {
            let mut resp = e.into_response();
            resp.headers_mut().insert(header::CONNECTION, axum::http::HeaderValue::from_static("close"));
            resp
        }
    }
}

/// A live migration's source side: QEMU's state goes out over this WebSocket.
async fn ws_live_out(State(st): State<AppState>, Path(id): Path<String>, ws: crate::stream::Upgrade) -> Response {
    if let Err(e) = st.rt.get(&id).await {
        return e.into_response();
    }
    match ws {
        Ok(ws) => ws.on_upgrade(move |socket| async move { st.rt.live_out(&id, socket).await }),
        Err(rejection) => rejection.into_response(),
    }
}

/// A live migration's target side, for an announced import: QEMU's state comes in here.
async fn ws_live_in(State(st): State<AppState>, Path(id): Path<String>, ws: crate::stream::Upgrade) -> Response {
    match ws {
        Ok(ws) => ws.on_upgrade(move |socket| async move { st.rt.live_in(&id, socket).await }),
        Err(rejection) => rejection.into_response(),
    }
}

async fn get_vm(State(st): State<AppState>, Path(id): Path<String>) -> R<Response> {
    Ok(Json(st.rt.get(&id).await?).into_response())
}

/// Compare-and-set of the owner: 409 unless the current owner is `expected`.
async fn set_owner(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Json(req): Json<SetOwnerRequest>,
) -> R<Response> {
    Ok(Json(st.rt.set_owner(&id, req.expected.as_deref(), &req.owner).await?).into_response())
}

async fn delete_vm(State(st): State<AppState>, Path(id): Path<String>) -> R<StatusCode> {
    st.rt.delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn power(
    State(st): State<AppState>,
    Path((id, action)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> R<Response> {
    let action: PowerAction = serde_json::from_value(serde_json::Value::String(action.clone())).map_err(|_| {
        RuntimeError::NotFound(format!(
            "no operation {action:?}: use start, stop, pause, resume, restart, hibernate or halt"
        ))
    })?;
    let paused = q.get("paused").is_some_and(|v| v == "true");
    let generation = match q.get("generation") {
        None => None,
        Some(g) => Some(g.parse::<i64>().map_err(|_| {
            RuntimeError::Invalid(format!("generation={g:?} is not a Machine generation: give a whole number"))
        })?),
    };
    let power = st.rt.power_at(&id, action, paused, generation).instrument(tracing::trace_span!("hop.runtime.power"));
    Ok(Json(power.await?).into_response())
}

async fn exec(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    Json(req): Json<ExecRequest>,
) -> R<Response> {
    // The api passes its limit; a caller that names none gets the runtime's own default.
    let max_output = match q.get("maxOutputBytes") {
        None => kairon_runtime_api::types::DEFAULT_MAX_EXEC_OUTPUT_BYTES,
        Some(v) => v.parse().map_err(|_| {
            RuntimeError::Invalid(format!("maxOutputBytes={v:?} is not a byte count: give a whole number"))
        })?,
    };
    let run = st.rt.exec_bounded(&id, &req, max_output).instrument(tracing::trace_span!("hop.runtime.exec"));
    Ok(Json(run.await?).into_response())
}

async fn start_process(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Json(req): Json<ExecRequest>,
) -> R<Response> {
    Ok((StatusCode::CREATED, Json(st.rt.start_process(&id, &req).await?)).into_response())
}

async fn processes(State(st): State<AppState>, Path(id): Path<String>) -> R<Response> {
    Ok(Json(st.rt.processes(&id).await?).into_response())
}

async fn process(State(st): State<AppState>, Path((id, pid)): Path<(String, String)>) -> R<Response> {
    Ok(Json(st.rt.process(&id, &pid).await?).into_response())
}

async fn process_logs(
    State(st): State<AppState>,
    Path((id, pid)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> R<Response> {
    // `stream` and `offset`: one stream from a byte offset, only what is new (log follows).
    if q.contains_key("stream") || q.contains_key("offset") {
        let stderr = match q.get("stream").map(String::as_str) {
            None | Some("stdout") => false,
            Some("stderr") => true,
            Some(other) => return Err(RuntimeError::Invalid(format!("stream={other:?}: use stdout or stderr"))),
        };
        let offset = match q.get("offset") {
            None => 0,
            Some(v) => v.parse().map_err(|_| {
                RuntimeError::Invalid(format!("offset={v:?} is not a byte offset: give a whole number"))
            })?,
        };
        return Ok(Json(st.rt.process_log_chunk(&id, &pid, stderr, offset).await?).into_response());
    }
    let (stdout, stderr) = st.rt.process_logs(&id, &pid).await?;
    Ok(Json(serde_json::json!({"stdout": stdout, "stderr": stderr})).into_response())
}

async fn wait_process(
    State(st): State<AppState>,
    Path((id, pid)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> R<Response> {
    let secs = q.get("timeoutSeconds").and_then(|v| v.parse().ok()).unwrap_or(60u64).min(3600);
    Ok(Json(st.rt.wait_process(&id, &pid, Duration::from_secs(secs)).await?).into_response())
}

async fn kill_process(
    State(st): State<AppState>,
    Path((id, pid)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> R<StatusCode> {
    st.rt.kill_process(&id, &pid, q.get("signal").map(String::as_str).unwrap_or("TERM")).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn process_stdin(
    State(st): State<AppState>,
    Path((id, pid)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
    body: axum::body::Bytes,
) -> R<StatusCode> {
    let close = match q.get("close").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => return Err(RuntimeError::Invalid(format!("close={other:?}: use true or false"))),
    };
    st.rt.write_stdin(&id, &pid, body.to_vec(), close).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn path_param(q: &HashMap<String, String>) -> R<String> {
    q.get("path")
        .cloned()
        .filter(|p| !p.is_empty())
        .ok_or_else(|| RuntimeError::Invalid("the path query parameter is required".into()))
}

async fn read_file(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> R<Response> {
    let path = path_param(&q)?;
    if q.get("list").is_some_and(|v| v == "true") {
        return Ok(Json(st.rt.list_files(&id, &path).await?).into_response());
    }
    if q.get("info").is_some_and(|v| v == "true") {
        return Ok(Json(st.rt.file_info(&id, &path).await?).into_response());
    }
    let file = st.rt.read_file(&id, &path).await?;
    let mut resp = ([(header::CONTENT_TYPE, "application/octet-stream")], Body::from_stream(file.body)).into_response();
    if let Some(len) = file.len {
        resp.headers_mut().insert(header::CONTENT_LENGTH, len.into());
    }
    Ok(resp)
}

async fn write_file(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    body: Body,
) -> Response {
    match write_file_from(&st, &id, &q, body).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        // A refusal may come before the body was all read (a full disk): this connection
        // cannot carry another request, and the client must not send one on it.
        Err(e) => {
            let mut resp = e.into_response();
            resp.headers_mut().insert(header::CONNECTION, axum::http::HeaderValue::from_static("close"));
            resp
        }
    }
}

async fn write_file_from(st: &AppState, id: &str, q: &HashMap<String, String>, body: Body) -> R<()> {
    let path = path_param(q)?;
    let mode = match q.get("mode") {
        Some(m) => Some(
            u32::from_str_radix(m, 8)
                .ok()
                .filter(|m| *m <= 0o7777)
                .ok_or_else(|| RuntimeError::Invalid(format!("mode {m:?} must be octal, e.g. 644")))?,
        ),
        None => None,
    };
    let data = body.into_data_stream().map(|r| r.map_err(std::io::Error::other)).boxed();
    st.rt.write_file(id, &path, data, mode).await?;
    Ok(())
}

async fn delete_file(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> R<StatusCode> {
    let recursive = q.get("recursive").is_some_and(|v| v == "true");
    st.rt.delete_file(&id, &path_param(&q)?, recursive).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn rename_file(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> R<StatusCode> {
    let arg = |k: &str| {
        q.get(k)
            .cloned()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| RuntimeError::Invalid(format!("the {k} query parameter is required")))
    };
    st.rt.rename_file(&id, &arg("from")?, &arg("to")?).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn stats(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> R<Response> {
    let footprint = q.get("footprint").is_some_and(|v| v == "true");
    Ok(Json(st.rt.stats(&id, footprint).await?).into_response())
}

async fn list_templates(State(st): State<AppState>) -> Response {
    Json(st.rt.templates()).into_response()
}

async fn get_template(State(st): State<AppState>, Path(name): Path<String>) -> R<Response> {
    Ok(Json(st.rt.template(&name)?).into_response())
}

async fn create_template(State(st): State<AppState>, Json(req): Json<CreateTemplateRequest>) -> R<Response> {
    Ok((StatusCode::ACCEPTED, Json(st.rt.create_template(req)?)).into_response())
}

async fn list_pools(State(st): State<AppState>) -> Response {
    Json(st.rt.pools()).into_response()
}

async fn create_pool(State(st): State<AppState>, Json(req): Json<CreatePoolRequest>) -> R<Response> {
    Ok((StatusCode::CREATED, Json(st.rt.create_pool(req)?)).into_response())
}

async fn get_pool(State(st): State<AppState>, Path(name): Path<String>) -> R<Response> {
    Ok(Json(st.rt.pool(&name)?).into_response())
}

async fn delete_pool(State(st): State<AppState>, Path(name): Path<String>) -> R<StatusCode> {
    st.rt.delete_pool(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn claim(State(st): State<AppState>, Path(name): Path<String>, body: Bytes) -> R<Response> {
    let req: ClaimRequest = if body.is_empty() {
        ClaimRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| RuntimeError::Invalid(format!("invalid claim request: {e}")))?
    };
    Ok(Json(st.rt.claim(&name, req).await?).into_response())
}

async fn proxy_root(State(st): State<AppState>, Path((id, port)): Path<(String, u16)>, req: Request) -> R<Response> {
    relay(st, id, port, None, req).await
}

async fn proxy_path(
    State(st): State<AppState>,
    Path((id, port, path)): Path<(String, u16, String)>,
    req: Request,
) -> R<Response> {
    relay(st, id, port, Some(path), req).await
}

/// Relays a request to a server inside the sandbox, dialled in its network namespace.
async fn relay(st: AppState, id: String, port: u16, path: Option<String>, req: Request) -> R<Response> {
    let target = st.rt.guest_target(&id, port).await?;
    let path = crate::proxy::guest_path(path.as_deref(), req.uri().query());
    Ok(crate::proxy::proxy_to(target, port, req, &path).await)
}

async fn egress_check(State(st): State<AppState>, Json(req): Json<EgressCheckRequest>) -> R<Response> {
    Ok(Json(st.rt.egress_check(&req.host)?).into_response())
}

/// Refused egress after `after`, waiting up to `waitSeconds` (at most 60) for one.
async fn egress_denials(State(st): State<AppState>, Query(q): Query<HashMap<String, String>>) -> R<Response> {
    let number = |key: &str| -> Result<u64, RuntimeError> {
        q.get(key)
            .map(|v| v.parse::<u64>().map_err(|_| RuntimeError::Invalid(format!("{key} must be a whole number"))))
            .transpose()
            .map(Option::unwrap_or_default)
    };
    let (after, wait) = (number("after")?, number("waitSeconds")?.min(60));
    Ok(Json(st.rt.egress_denials_since(after, Duration::from_secs(wait)).await).into_response())
}

/// A WebSocket carrying raw TCP bytes to and from a port inside the sandbox.
async fn ws_tunnel(
    State(st): State<AppState>,
    Path((id, port)): Path<(String, u16)>,
    ws: crate::stream::Upgrade,
) -> Response {
    crate::stream::tunnel(&st.rt, &id, port, ws).await
}

/// A WebSocket bridged to an interactive shell in the sandbox.
async fn ws_console(State(st): State<AppState>, Path(id): Path<String>, ws: crate::stream::Upgrade) -> Response {
    crate::stream::console(&st.rt, &id, ws).await
}

#[derive(serde::Deserialize)]
struct ExecStreamQuery {
    /// The command as a JSON array of strings.
    command: String,
    /// Extra environment variables as a JSON object of strings.
    env: Option<String>,
    /// Run as this user (`uid[:gid]` or a name the guest knows), in this directory.
    user: Option<String>,
    cwd: Option<String>,
    /// On a terminal of `cols` x `rows` (default 80 x 24).
    tty: Option<bool>,
    cols: Option<u16>,
    rows: Option<u16>,
}

async fn ws_exec_stream(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<ExecStreamQuery>,
    headers: axum::http::HeaderMap,
    ws: crate::stream::Upgrade,
) -> Response {
    // The api sends the environment in a header (it may hold secrets); `env` in the query
    // stays for other callers.
    let from_header = match headers.get(kairon_runtime_api::client::EXEC_ENV_HEADER) {
        None => None,
        Some(v) => {
            use base64::Engine as _;
            match v.to_str().ok().and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok()) {
                Some(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
                None => {
                    return RuntimeError::Invalid(format!(
                        "{} must be the base64 of a JSON object of strings",
                        kairon_runtime_api::client::EXEC_ENV_HEADER
                    ))
                    .into_response();
                }
            }
        }
    };
    let tty = match q.tty {
        Some(true) => match crate::tty::Size::checked(q.cols.unwrap_or(80), q.rows.unwrap_or(24)) {
            Some(size) => Some(size),
            None => {
                return RuntimeError::Invalid("cols and rows must be from 1 to 1000".into()).into_response();
            }
        },
        _ => None,
    };
    match crate::stream::attached_command(&q.command, from_header.as_deref().or(q.env.as_deref()), q.user, q.cwd) {
        Ok(command) => crate::stream::exec_stream(&st.rt, &id, command, tty, ws).await,
        Err(e) => e.into_response(),
    }
}

async fn fork(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Json(req): Json<crate::api::ForkRequest>,
) -> R<Response> {
    let vm = st.rt.fork(&id, &req.name).await?;
    let live = crate::backend::BackendKind::of(&vm).forks_live();
    Ok((StatusCode::CREATED, Json(crate::api::ForkResult { vm, live })).into_response())
}

async fn clone_vm(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Json(req): Json<crate::api::ForkRequest>,
) -> R<Response> {
    Ok((StatusCode::CREATED, Json(st.rt.clone_vm(&id, &req.name).await?)).into_response())
}

async fn freeze(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> R<Response> {
    let timeout = match q.get("timeoutSeconds") {
        Some(t) => Some(Duration::from_secs(t.parse::<u64>().ok().filter(|t| *t > 0).ok_or_else(|| {
            RuntimeError::Invalid(format!("timeoutSeconds {t:?} must be a whole number of seconds above 0"))
        })?)),
        None => None,
    };
    Ok(Json(st.rt.freeze(&id, timeout).await?).into_response())
}

async fn freeze_status(State(st): State<AppState>, Path(id): Path<String>) -> R<Response> {
    Ok(Json(st.rt.freeze_status(&id).await?).into_response())
}

async fn thaw(State(st): State<AppState>, Path(id): Path<String>) -> R<Response> {
    Ok(Json(st.rt.thaw(&id).await?).into_response())
}

/// A WebSocket carrying the VM's VNC (RFB) byte stream.
async fn ws_vnc(State(st): State<AppState>, Path(id): Path<String>, ws: crate::stream::Upgrade) -> Response {
    crate::stream::unix_relay(&st.rt, &id, "vnc.sock", ws).await
}

async fn snapshot(
    State(st): State<AppState>,
    Path(id): Path<String>,
    Json(req): Json<crate::api::SnapshotRequest>,
) -> R<Response> {
    let bytes = st.rt.snapshot(&id, &req.path).await?;
    Ok(Json(crate::api::SnapshotResult { path: req.path, bytes }).into_response())
}
