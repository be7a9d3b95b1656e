//! The HTTP server: routes, authentication, health, the OpenAPI document and its explorer.

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tower_http::trace::TraceLayer;

use crate::auth::{Identity, Role};
use crate::k8s::status::ApiError;
use crate::machines::{Error, Reason};
use crate::state::AppState;
use crate::tickets::Redeemed;

/// Largest request body by default (objects are small; Kubernetes' own limit); `--max-body-bytes`.
pub const MAX_BODY_BYTES: usize = crate::limits::DEFAULT_MAX_BODY_BYTES;

/// Everything the embedded mode serves: the Kubernetes-compatible API and the REST API.
pub fn router(state: AppState) -> Router {
    let k8s = crate::k8s::router()
        .route("/metrics", get(metrics))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .layer(DefaultBodyLimit::disable())
        .layer(middleware::from_fn_with_state(state.clone(), limit_body_k8s));
    rest_router(state.clone())
        .merge(k8s.with_state(state.clone()))
        .layer(middleware::from_fn(json_errors))
        .layer(middleware::from_fn_with_state(state, crate::previews::serve))
        .layer(middleware::from_fn(crate::linger::linger))
}

/// The REST API alone, for a real cluster (`kairon api`): resources live in the cluster's own
/// API server, which the REST layer reaches through kube-rs.
pub fn cluster_router(state: AppState) -> Router {
    let metrics = Router::new()
        .route("/metrics", get(metrics))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate));
    rest_router(state.clone())
        .merge(metrics.with_state(state.clone()))
        .layer(middleware::from_fn(json_errors))
        .layer(middleware::from_fn_with_state(state, crate::previews::serve))
        .layer(middleware::from_fn(crate::linger::linger))
}

/// The admission webhook alone, for a listener of its own (`kairon api --webhook-listen`): a
/// cluster's API server calls it with no Kairon token (see `webhook.rs`), and the public API
/// port does not serve it.
pub fn webhook_router(state: AppState) -> Router {
    // A review carries the object twice (old and new).
    let body_limit = 2 * state.limits.max_body_bytes + 64 * 1024;
    Router::new()
        .route(crate::webhook::PATH, axum::routing::post(crate::webhook::validate))
        .route("/livez", get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

fn rest_router(state: AppState) -> Router {
    let (rest, doc) = crate::rest::routes().split_for_parts();
    let rest = rest
        .merge(crate::rest::guest::sandbox_http_router())
        .layer(middleware::from_fn_with_state(state.clone(), authenticate_rest))
        .layer(DefaultBodyLimit::disable())
        .layer(middleware::from_fn_with_state(state.clone(), limit_body_rest));
    let doc = crate::rest::contract::document(crate::rest::with_unrouted(doc));
    // MCP: the same bearer tokens; its tools call the Machines service as the caller.
    let mcp = Router::new()
        .nest_service("/mcp", crate::mcp::service(state.clone()))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate_rest))
        .layer(middleware::from_fn_with_state(state.clone(), limit_body_rest));
    let docs: Router<AppState> =
        utoipa_swagger_ui::SwaggerUi::new("/docs").external_url_unchecked("/openapi.json", doc).into();
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .merge(docs)
        .merge(crate::ui::router())
        .merge(mcp)
        .merge(rest)
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Whether a path is one of the Kubernetes-compatible API's (which answers `metav1.Status`).
fn kubernetes_path(path: &str) -> bool {
    matches!(path, "/api" | "/api/v1" | "/apis" | "/version")
        || ["/apis/", "/openapi/", "/api/v1/namespaces", "/api/v1/events"].iter().any(|p| path.starts_with(p))
}

/// The reason a client switches on for an error the router or an extractor answered itself.
fn reason_of(status: axum::http::StatusCode) -> &'static str {
    use axum::http::StatusCode as S;
    match status {
        S::BAD_REQUEST => "BadRequest",
        S::UNAUTHORIZED => "Unauthorized",
        S::FORBIDDEN => "Forbidden",
        S::NOT_FOUND => "NotFound",
        S::METHOD_NOT_ALLOWED => "MethodNotAllowed",
        S::PAYLOAD_TOO_LARGE => "PayloadTooLarge",
        S::UNSUPPORTED_MEDIA_TYPE => "UnsupportedMediaType",
        S::UNPROCESSABLE_ENTITY => "Invalid",
        S::TOO_MANY_REQUESTS => "TooManyRequests",
        S::SERVICE_UNAVAILABLE => "ServiceUnavailable",
        s if s.is_server_error() => "InternalError",
        _ => "BadRequest",
    }
}

/// Every error answers in JSON: the REST shape (`reason`, `message`) under `/api/v1`, MCP and
/// the rest, `metav1.Status` on the Kubernetes paths. Handlers answer so already; this catches
/// what the router and axum's extractors answer in plain text (an unknown path or method, a
/// WebSocket route asked without an upgrade, a malformed query). A guest's own answers through
/// the sandbox HTTP proxy pass unchanged.
async fn json_errors(req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    let resp = next.run(req).await;
    let status = resp.status();
    let json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || json || path.contains("/sandbox-http/") {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    // The router's and extractors' own texts are a line or two: read at most a little of it.
    let text = axum::body::to_bytes(body, 16 * 1024).await.map(|b| String::from_utf8_lossy(&b).trim().to_string());
    let message = match text {
        Ok(t) if !t.is_empty() => t,
        _ => match status {
            axum::http::StatusCode::NOT_FOUND => format!("no route {path}: see GET /openapi.json for the API"),
            axum::http::StatusCode::METHOD_NOT_ALLOWED => {
                let allowed = parts.headers.get(axum::http::header::ALLOW).and_then(|v| v.to_str().ok());
                format!("{method} is not allowed on {path}; allowed: {}", allowed.unwrap_or("none"))
            }
            s => format!("{s} on {method} {path}"),
        },
    };
    parts.headers.remove(axum::http::header::CONTENT_TYPE);
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    let mut answer = if kubernetes_path(&path) {
        ApiError::new(status, reason_of(status), message).into_response()
    } else {
        Error::new(Reason::for_status(status), message).into_response()
    };
    // Keep what else the answer said (`Allow` on a 405, `Retry-After`, tracing headers).
    for name in parts.headers.keys() {
        if !answer.headers().contains_key(name) {
            for value in parts.headers.get_all(name) {
                answer.headers_mut().append(name.clone(), value.clone());
            }
        }
    }
    answer
}

/// Whether a request is a file upload, which keeps its own (larger) body limit.
fn is_upload(req: &Request) -> bool {
    if req.method() != axum::http::Method::PUT {
        return false;
    }
    let segs: Vec<&str> = req.uri().path().trim_end_matches('/').split('/').collect();
    // "", "api", "v1", "machines", namespace, name, "files"
    segs.len() == 7 && segs[1] == "api" && segs[2] == "v1" && segs[3] == "machines" && segs[6] == "files"
}

/// The body limit of this request.
fn body_limit(st: &AppState, req: &Request) -> usize {
    if is_upload(req) {
        usize::try_from(st.limits.max_upload_bytes).unwrap_or(usize::MAX)
    } else {
        st.limits.max_body_bytes
    }
}

fn too_large_message(st: &AppState, limit: usize, upload: bool) -> String {
    if upload {
        return crate::limits::upload_too_large(st.limits.max_upload_bytes);
    }
    format!(
        "the request body is larger than {}, the limit on this route: send less (files go through PUT \
         …/files, up to {}), or raise --max-body-bytes (KAIRON_MAX_BODY_BYTES)",
        crate::limits::human_bytes(limit as u64),
        crate::limits::human_bytes(st.limits.max_upload_bytes)
    )
}

/// Refuses a body over the limit: at once when its length says so, else when a handler reads
/// past the limit (the body is wrapped so that nothing past it is ever read).
async fn limit_body(st: &AppState, req: Request, next: Next, k8s: bool) -> Response {
    let limit = body_limit(st, &req);
    let upload = is_upload(&req);
    // A guest's own answers through the sandbox HTTP proxy pass unchanged.
    let proxied = req.uri().path().contains("/sandbox-http/");
    let too_large = || {
        let message = too_large_message(st, limit, upload);
        if k8s {
            ApiError::new(axum::http::StatusCode::PAYLOAD_TOO_LARGE, "RequestEntityTooLarge", message).into_response()
        } else {
            Error::new(Reason::PayloadTooLarge, message).into_response()
        }
    };
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large();
    }
    let req = req.map(|b| axum::body::Body::new(http_body_util::Limited::new(b, limit)));
    let resp = next.run(req).await;
    // A handler's extractor that hit the limit answers in plain text: answer in JSON instead.
    let json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if resp.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE && !json && !proxied {
        return too_large();
    }
    resp
}

async fn limit_body_k8s(State(st): State<AppState>, req: Request, next: Next) -> Response {
    limit_body(&st, req, next, true).await
}

async fn limit_body_rest(State(st): State<AppState>, req: Request, next: Next) -> Response {
    limit_body(&st, req, next, false).await
}

async fn readyz(State(st): State<AppState>) -> Response {
    match st.store.current_rv().await {
        Ok(_) => "ok".into_response(),
        Err(e) => (axum::http::StatusCode::SERVICE_UNAVAILABLE, format!("database unavailable: {e}")).into_response(),
    }
}

fn bearer(req: &Request) -> Option<&str> {
    req.headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
}

/// Who a token belongs to: a signed JWT, or the legacy shared token (compared in constant time).
fn identify(st: &AppState, token: &str) -> Result<Identity, String> {
    if let Some(legacy) = &st.legacy_token
        && constant_time_eq(legacy.as_bytes(), token.as_bytes())
    {
        return Ok(Identity::legacy());
    }
    st.keys.verify(token).map_err(|e| e.to_string())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

const NO_TOKEN: &str = "no bearer token: send Authorization: Bearer <token> (kairon token mints one)";

/// Every Kubernetes path needs a valid bearer token; the identity rides in the request.
async fn authenticate(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    let Some(token) = bearer(&req) else {
        return ApiError::unauthorized(NO_TOKEN).into_response();
    };
    match identify(&st, token) {
        Ok(id) if !reaches(&id, &req) => ApiError::forbidden(crate::auth::metrics_only(&id.sub)).into_response(),
        Ok(id) => {
            req.extensions_mut().insert(id);
            next.run(req).await
        }
        Err(e) => ApiError::unauthorized(e).into_response(),
    }
}

/// Whether `id` may reach `req`'s path at all: a metrics token reaches `/metrics` only.
fn reaches(id: &Identity, req: &Request) -> bool {
    id.role != Role::Metrics || req.uri().path() == "/metrics"
}

/// The Prometheus counters, for an admin or a metrics scraper.
async fn metrics(State(st): State<AppState>, axum::Extension(id): axum::Extension<Identity>) -> Response {
    match crate::auth::may_scrape(&id) {
        Ok(()) => (st.metrics)().into_response(),
        Err(e) => ApiError::forbidden(e).into_response(),
    }
}

/// The subprotocol prefix a WebSocket client (a browser) carries its token in, as Kubernetes has it.
const BEARER_PROTOCOL: &str = "base64url.bearer.authorization.k8s.io.";

/// The query parameters a token must never ride in.
const TOKEN_PARAMS: [&str; 3] = ["token", "access_token", "bearer"];

/// A query parameter's raw value.
fn query_param<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.uri().query()?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then_some(v)
    })
}

fn is_websocket(req: &Request) -> bool {
    req.headers()
        .get(axum::http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// The token a WebSocket client sent as the subprotocol `base64url.bearer.authorization.k8s.io.<token>`.
fn protocol_token(req: &Request) -> Option<String> {
    use base64::Engine as _;
    let offered = req.headers().get_all(axum::http::header::SEC_WEBSOCKET_PROTOCOL);
    offered.iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).find_map(|p| {
        let encoded = p.trim().strip_prefix(BEARER_PROTOCOL)?;
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(encoded.trim_end_matches('=')).ok()?;
        String::from_utf8(raw).ok()
    })
}

/// The same for the REST paths, answering in the REST error shape. A WebSocket may instead
/// carry a single-use ticket (`?ticket=`, from `POST /api/v1/tickets`) or its token in the
/// Kubernetes bearer subprotocol; a token in the URL is always refused.
async fn authenticate_rest(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    let unauthorized = |m: String| Error::new(Reason::Unauthorized, m).into_response();
    if TOKEN_PARAMS.iter().any(|p| query_param(&req, p).is_some()) {
        return unauthorized(
            "a token never goes in a URL (it would be logged and kept in history): send it as Authorization: \
             Bearer <token>, or for a WebSocket mint a single-use ticket with POST /api/v1/tickets and give ?ticket="
                .into(),
        );
    }
    let token = match bearer(&req) {
        Some(token) => token.to_string(),
        None if is_websocket(&req) => {
            if let Some(ticket) = query_param(&req, "ticket") {
                return match st.tickets.redeem(ticket, req.uri().path()).await {
                    Ok(Redeemed::Opens(id)) => {
                        req.extensions_mut().insert(id);
                        next.run(req).await
                    }
                    Ok(Redeemed::OtherRoute(path)) => unauthorized(format!(
                        "this ticket was minted for {path}, not this route: mint one for {} (it is spent now)",
                        req.uri().path()
                    )),
                    Err(e) => Error::from(e).into_response(),
                    Ok(Redeemed::Unknown) => unauthorized(format!(
                        "this ticket is unknown, used or expired: a ticket opens one WebSocket within {:?} of \
                         POST /api/v1/tickets; mint another",
                        st.tickets.ttl()
                    )),
                };
            }
            match protocol_token(&req) {
                Some(token) => token,
                None => return unauthorized(NO_TOKEN.into()),
            }
        }
        None => return unauthorized(NO_TOKEN.into()),
    };
    match identify(&st, &token) {
        Ok(id) if !reaches(&id, &req) => {
            Error::new(Reason::Forbidden, crate::auth::metrics_only(&id.sub)).into_response()
        }
        Ok(id) => {
            req.extensions_mut().insert(id);
            next.run(req).await
        }
        Err(e) => unauthorized(e),
    }
}
