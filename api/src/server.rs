//! The HTTP server: routes, authentication, health, the OpenAPI document and its explorer.

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::trace::TraceLayer;

use crate::auth::Identity;
use crate::k8s::status::ApiError;
use crate::rest::error::RestError;
use crate::state::AppState;

/// Largest request body on the Kubernetes paths (objects are small; Kubernetes' own limit).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
/// Largest request body on the REST paths (file uploads).
pub const MAX_REST_BODY_BYTES: usize = crate::rest::guest::MAX_UPLOAD_BYTES;

/// Everything the embedded mode serves: the Kubernetes-compatible API and the REST API.
pub fn router(state: AppState) -> Router {
    let k8s = crate::k8s::router()
        .route("/metrics", get(|State(st): State<AppState>| async move { (st.metrics)() }))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES));
    rest_router(state.clone()).merge(k8s.with_state(state))
}

/// The REST API alone, for a real cluster (`kairon api`): resources live in the cluster's own
/// API server, which the REST layer reaches through kube-rs.
pub fn cluster_router(state: AppState) -> Router {
    let metrics = Router::new()
        .route("/metrics", get(|State(st): State<AppState>| async move { (st.metrics)() }))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate));
    rest_router(state.clone()).merge(metrics.with_state(state))
}

fn rest_router(state: AppState) -> Router {
    let (rest, doc) = crate::rest::routes().split_for_parts();
    let rest = rest
        .merge(crate::rest::guest::sandbox_http_router())
        .layer(middleware::from_fn_with_state(state.clone(), authenticate_rest))
        .layer(DefaultBodyLimit::max(MAX_REST_BODY_BYTES))
        .layer(RequestBodyLimitLayer::new(MAX_REST_BODY_BYTES))
        .layer(middleware::map_response(too_large_as_json));
    let doc = crate::rest::with_unrouted(doc);
    // MCP: the same bearer tokens; its tools call the REST routes in-process, as the caller.
    let mcp = Router::new()
        .nest_service("/mcp", crate::mcp::service(rest.clone().with_state(state.clone())))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate_rest));
    let docs: Router<AppState> = utoipa_swagger_ui::SwaggerUi::new("/docs").url("/openapi.json", doc).into();
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .merge(docs)
        .merge(mcp)
        .merge(rest)
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// The body limit answers in plain text; REST callers get the same JSON error as everywhere.
async fn too_large_as_json(resp: Response) -> Response {
    if resp.status() != axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        return resp;
    }
    RestError::new(
        axum::http::StatusCode::PAYLOAD_TOO_LARGE,
        "PayloadTooLarge",
        format!("the request body is larger than {} MiB", MAX_REST_BODY_BYTES / (1024 * 1024)),
    )
    .into_response()
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
        Ok(id) => {
            req.extensions_mut().insert(id);
            next.run(req).await
        }
        Err(e) => ApiError::unauthorized(e).into_response(),
    }
}

/// The same for the REST paths, answering in the REST error shape.
async fn authenticate_rest(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    let unauthorized =
        |m: String| RestError::new(axum::http::StatusCode::UNAUTHORIZED, "Unauthorized", m).into_response();
    let Some(token) = bearer(&req) else {
        return unauthorized(NO_TOKEN.into());
    };
    match identify(&st, token) {
        Ok(id) => {
            req.extensions_mut().insert(id);
            next.run(req).await
        }
        Err(e) => unauthorized(e),
    }
}
