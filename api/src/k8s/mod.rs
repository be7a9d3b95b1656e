//! The Kubernetes-compatible API for the Kairon kinds, `events.k8s.io/v1` Events,
//! `coordination.k8s.io/v1` Leases, core `v1` Events and Namespaces, stored in PostgreSQL.
//! kube-rs and kubectl talk to it as they would to a real API server.

pub mod admit;
mod bind;
pub mod discovery;
pub mod events;
mod handlers;
pub mod patch;
mod quota;
pub mod registry;
pub mod selector;
pub mod status;
pub mod table;

use std::collections::HashMap;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};

use crate::auth::Identity;
use crate::state::AppState;
use admit::FieldValidation;
use status::{ApiError, ApiResult};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/version", get(|| async { axum::Json(discovery::version()) }))
        .route("/api", get(|| async { axum::Json(discovery::core_versions()) }))
        .route("/apis", get(|State(st): State<AppState>| async move { axum::Json(discovery::groups(&st.registry)) }))
        .route(
            "/openapi/v3",
            get(|State(st): State<AppState>| async move { axum::Json(discovery::openapi_index(&st.registry)) }),
        )
        .route("/openapi/v3/{*path}", get(openapi_doc))
        .route(
            "/api/v1",
            get(|State(st): State<AppState>| async move { axum::Json(discovery::resources(&st.registry, "", "v1")) }),
        )
        .route("/api/v1/namespaces", any(core))
        .route("/api/v1/namespaces/{*rest}", any(core))
        .route("/api/v1/events", any(core))
        .route("/apis/{*rest}", any(apis))
}

async fn openapi_doc(State(st): State<AppState>, Path(path): Path<String>) -> Response {
    match discovery::openapi_group_version(&st.registry, &path) {
        Some(doc) => axum::Json(doc).into_response(),
        None => ApiError::no_route(format!("no OpenAPI document for {path:?}")).into_response(),
    }
}

/// The parsed query parameters of a resource request.
#[derive(Debug, Default)]
pub struct Params {
    pub watch: bool,
    pub resource_version: Option<String>,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub timeout_seconds: Option<u64>,
    pub allow_bookmarks: bool,
    pub send_initial_events: bool,
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub force: bool,
    pub field_validation: FieldValidation,
}

impl Params {
    fn parse(q: &HashMap<String, String>) -> ApiResult<Params> {
        let flag = |k: &str| q.get(k).is_some_and(|v| v == "true" || v == "1");
        let num = |k: &str| -> ApiResult<Option<u64>> {
            q.get(k)
                .filter(|v| !v.is_empty())
                .map(|v| {
                    v.parse::<u64>().map_err(|_| ApiError::bad_request(format!("{k}={v:?} is not a whole number")))
                })
                .transpose()
        };
        let dry_run = match q.get("dryRun").map(String::as_str) {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!("dryRun={other:?}: the only supported value is All")));
            }
        };
        let field_validation = match q.get("fieldValidation").map(String::as_str) {
            None | Some("") => FieldValidation::Warn,
            Some("Strict") => FieldValidation::Strict,
            Some("Warn") => FieldValidation::Warn,
            Some("Ignore") => FieldValidation::Ignore,
            Some(other) => {
                return Err(ApiError::bad_request(format!("fieldValidation={other:?}: use Strict, Warn or Ignore")));
            }
        };
        Ok(Params {
            watch: flag("watch"),
            resource_version: q.get("resourceVersion").filter(|v| !v.is_empty()).cloned(),
            label_selector: q.get("labelSelector").filter(|v| !v.is_empty()).cloned(),
            field_selector: q.get("fieldSelector").filter(|v| !v.is_empty()).cloned(),
            limit: num("limit")?.filter(|&l| l > 0).map(|l| l as usize),
            continue_token: q.get("continue").filter(|v| !v.is_empty()).cloned(),
            timeout_seconds: num("timeoutSeconds")?,
            allow_bookmarks: flag("allowWatchBookmarks"),
            send_initial_events: flag("sendInitialEvents"),
            dry_run,
            field_manager: q.get("fieldManager").filter(|v| !v.is_empty()).cloned(),
            force: flag("force"),
            field_validation,
        })
    }
}

/// One resource request, parsed from its path.
#[derive(Debug)]
pub struct Target {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub plural: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

fn parse_target(group: &str, version: &str, rest: &[&str]) -> Option<Target> {
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, tail @ ..] => (Some(ns.to_string()), [&[*plural][..], tail].concat()),
        _ => (None, rest.to_vec()),
    };
    let (plural, name, sub) = match rest[..] {
        [p] => (p, None, None),
        [p, n] => (p, Some(n), None),
        [p, n, s] => (p, Some(n), Some(s)),
        _ => return None,
    };
    Some(Target {
        group: group.into(),
        version: version.into(),
        namespace,
        plural: plural.into(),
        name: name.map(Into::into),
        subresource: sub.map(Into::into),
    })
}

type Req = (State<AppState>, axum::Extension<Identity>, Method, HeaderMap, Query<HashMap<String, String>>, bool);

/// Whether the in-process client made this request ([`crate::loopback::InProcessRequest`]).
type InProcess = Option<axum::Extension<crate::loopback::InProcessRequest>>;

// One parameter per extractor (axum hands each in).
#[allow(clippy::too_many_arguments)]
async fn core(
    State(st): State<AppState>,
    axum::Extension(id): axum::Extension<Identity>,
    in_process: InProcess,
    method: Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let path = uri.path().trim_start_matches("/api/v1/").to_string();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    // `/api/v1/namespaces/{name}` is a Namespace; `/api/v1/namespaces/{ns}/events` are Events.
    let target = match segs[..] {
        ["namespaces"] => parse_target("", "v1", &["namespaces"]),
        ["namespaces", name] => parse_target("", "v1", &["namespaces", name]),
        _ => parse_target("", "v1", &segs),
    };
    serve((State(st), axum::Extension(id), method, headers, Query(q), in_process.is_some()), target, body).await
}

#[allow(clippy::too_many_arguments)]
async fn apis(
    State(st): State<AppState>,
    axum::Extension(id): axum::Extension<Identity>,
    in_process: InProcess,
    method: Method,
    Path(rest): Path<String>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    match segs[..] {
        [g] if method == Method::GET => match discovery::group(&st.registry, g) {
            Some(doc) => axum::Json(doc).into_response(),
            None => ApiError::no_route(format!("the server could not find the requested resource (group {g:?})"))
                .into_response(),
        },
        [g, v] if method == Method::GET => match discovery::resources(&st.registry, g, v) {
            Some(doc) => axum::Json(doc).into_response(),
            None => ApiError::no_route(format!("the server could not find the requested resource ({g}/{v})"))
                .into_response(),
        },
        [g, v, "watch", ref tail @ ..] => {
            let mut q = q;
            q.insert("watch".into(), "true".into());
            serve(
                (State(st), axum::Extension(id), method, headers, Query(q), in_process.is_some()),
                parse_target(g, v, tail),
                body,
            )
            .await
        }
        [g, v, ref tail @ ..] => {
            serve(
                (State(st), axum::Extension(id), method, headers, Query(q), in_process.is_some()),
                parse_target(g, v, tail),
                body,
            )
            .await
        }
        _ => ApiError::no_route("the server could not find the requested resource").into_response(),
    }
}

async fn serve(req: Req, target: Option<Target>, body: Bytes) -> Response {
    let (State(st), axum::Extension(id), method, headers, Query(q), in_process) = req;
    let Some(target) = target else {
        return ApiError::no_route("the server could not find the requested resource").into_response();
    };
    match handlers::handle(&st, &id, in_process, method, &headers, &q, target, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}
