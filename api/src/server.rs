//! The HTTP server: routes, authentication, health.

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::trace::TraceLayer;

use crate::k8s::status::ApiError;
use crate::state::AppState;

/// Largest request body accepted (objects are small; 3 MiB matches Kubernetes' limit).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

pub fn router(state: AppState) -> Router {
    let authed = crate::k8s::router()
        .route("/metrics", get(|State(st): State<AppState>| async move { (st.metrics)() }))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate));
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .merge(authed)
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

async fn readyz(State(st): State<AppState>) -> Response {
    match st.store.current_rv().await {
        Ok(_) => "ok".into_response(),
        Err(e) => (axum::http::StatusCode::SERVICE_UNAVAILABLE, format!("database unavailable: {e}")).into_response(),
    }
}

/// Every route below needs a valid bearer token; the identity rides in the request.
async fn authenticate(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    let token = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim);
    let Some(token) = token else {
        return ApiError::unauthorized("no bearer token: send Authorization: Bearer <token> (kairon token mints one)")
            .into_response();
    };
    match st.keys.verify(token) {
        Ok(id) => {
            req.extensions_mut().insert(id);
            next.run(req).await
        }
        Err(e) => ApiError::unauthorized(e.to_string()).into_response(),
    }
}
