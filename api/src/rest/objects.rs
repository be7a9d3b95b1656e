//! Machines, MachinePools and MachineClaims: list, get, create, replace, delete, a long-poll
//! wait, and an object's Events, all as the Kubernetes objects (`machines::objects`).

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query};
use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use kairon_model::{Machine, MachineClaim, MachinePool};

use super::{Caller, JsonBody, schema};
use crate::machines::objects::{EventList, List, WaitFor};
use crate::machines::{Error, Result};
use crate::state::AppState;

/// The namespace in the path.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct NamespacePath {
    /// The namespace.
    pub namespace: String,
}

/// An object in the path.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ObjectPath {
    /// The namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct ListQuery {
    /// A Kubernetes label selector, e.g. `kairon.zyvor.dev/pool=agents`.
    pub label_selector: Option<String>,
}

/// A list across namespaces, or with `watch=true` a watch of it.
#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct ListAllQuery {
    /// A Kubernetes label selector, e.g. `kairon.zyvor.dev/pool=agents`.
    pub label_selector: Option<String>,
    /// `true`: answer a stream of watch events (`application/x-ndjson`, one JSON object a line)
    /// instead of a list: every object as `ADDED` (unless `resourceVersion` is given), then each
    /// change as it happens, in the caller's namespaces only. The stream ends after about five
    /// minutes; resume with the last `metadata.resourceVersion` seen. An `ERROR` line carrying
    /// code 410 means that version is too old: watch again without one.
    pub watch: Option<bool>,
    /// With `watch=true`: send only the changes after this version.
    pub resource_version: Option<String>,
}

/// How long one REST watch stream lasts before the client resumes it.
pub(super) const WATCH_SECONDS: u64 = 290;

/// A watch of `K` in the caller's namespaces, as a streamed NDJSON answer; it holds one of the
/// caller's connection slots while it lasts.
async fn watch_response<K: crate::machines::objects::Mirrored + Send + 'static>(
    c: Caller,
    q: &ListAllQuery,
) -> Result<axum::response::Response> {
    let slot = c.connection_slot()?;
    let lines = c
        .machines
        .watch_all::<K>(
            &c.id,
            q.label_selector.as_deref(),
            q.resource_version.as_deref(),
            Duration::from_secs(WATCH_SECONDS),
        )
        .await?;
    stream_response(&c, lines, slot)
}

/// A streamed NDJSON answer of watch `lines`, holding the caller's connection `slot`; it ends
/// when the server drains.
pub(super) fn stream_response(
    c: &Caller,
    lines: futures::stream::BoxStream<'static, bytes::Bytes>,
    slot: Option<crate::limits::ConnectionGuard>,
) -> Result<axum::response::Response> {
    use futures::StreamExt;
    let stream = lines.take_until(c.stopping.clone().cancelled_owned()).map(move |line| {
        let _held = &slot;
        Ok::<_, std::io::Error>(line)
    });
    axum::response::Response::builder()
        .status(axum::http::StatusCode::OK)
        .header(axum::http::header::CONTENT_TYPE, "application/x-ndjson")
        .header(axum::http::header::CACHE_CONTROL, "no-store")
        .header("x-content-type-options", "nosniff")
        .body(axum::body::Body::from_stream(stream))
        .map_err(|e| Error::internal(e.to_string()))
}

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct DryRunQuery {
    /// `All`: validate and answer with the result without storing it.
    pub dry_run: Option<String>,
}

impl DryRunQuery {
    pub fn is_dry_run(&self) -> Result<bool> {
        match self.dry_run.as_deref() {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(Error::bad_request(format!("dryRun={other:?} is not supported: use dryRun=All"))),
        }
    }
}

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct WaitQuery {
    /// Wait until `status.phase` is this (e.g. `Running`, `Bound`).
    pub phase: Option<String>,
    /// Wait until the condition of this type has status `True` (e.g. `Ready`).
    pub condition: Option<String>,
    /// Wait until the object is gone.
    pub deleted: Option<bool>,
    /// How long to wait before answering 504 (default 60, at most 600).
    pub timeout_seconds: Option<u64>,
}

impl WaitQuery {
    fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds.unwrap_or(60).clamp(1, 600))
    }
}

/// The same eight routes for each kind.
macro_rules! kind_routes {
    (
        $K:ty, $doc:ty, $list_doc:ty, $watch_doc:ty, $tag:literal, $kind:literal,
        $list_all:ident = $p_all:literal,
        $list:ident, $create:ident = $p_ns:literal,
        $get:ident, $replace:ident, $delete:ident = $p_one:literal,
        $wait:ident = $p_wait:literal,
        $events:ident = $p_events:literal
    ) => {
        #[doc = concat!("List ", $kind, "s in every namespace the caller may read, or watch them (`watch=true`).")]
        #[utoipa::path(get, path = $p_all, tag = $tag, params(ListAllQuery),
            responses((status = 200, description = "The objects; with `watch=true`, a stream of watch events, one a line",
                       content(($list_doc = "application/json"), ($watch_doc = "application/x-ndjson"))),
                      (status = 400, description = "A parameter is invalid", body = super::ErrorBody),
                      (status = 401, description = "No or a bad token", body = super::ErrorBody),
                      (status = 429, description = "The caller holds as many long-lived connections as it may", body = super::ErrorBody)))]
        async fn $list_all(c: Caller, Query(q): Query<ListAllQuery>) -> Result<axum::response::Response> {
            use axum::response::IntoResponse;
            if q.watch == Some(true) {
                return watch_response::<$K>(c, &q).await;
            }
            Ok(Json(c.machines.list_all::<$K>(&c.id, q.label_selector.as_deref()).await?).into_response())
        }

        #[doc = concat!("List ", $kind, "s in a namespace.")]
        #[utoipa::path(get, path = $p_ns, tag = $tag, params(NamespacePath, ListQuery),
            responses((status = 200, description = "The objects", body = $list_doc),
                      (status = 403, description = "The caller may not read this namespace", body = super::ErrorBody)))]
        async fn $list(c: Caller, Path(p): Path<NamespacePath>, Query(q): Query<ListQuery>) -> Result<Json<List<$K>>> {
            Ok(Json(c.machines.list(&c.id, &p.namespace, q.label_selector.as_deref()).await?))
        }

        #[doc = concat!("Create a ", $kind, " (`dryRun=All` validates without storing).")]
        #[utoipa::path(post, path = $p_ns, tag = $tag, params(NamespacePath, DryRunQuery), request_body = $doc,
            responses((status = 201, description = "Created", body = $doc),
                      (status = 400, description = "The body is not a valid object", body = super::ErrorBody),
                      (status = 403, description = "The caller may not write here", body = super::ErrorBody),
                      (status = 409, description = "It already exists", body = super::ErrorBody),
                      (status = 422, description = "A field is invalid", body = super::ErrorBody)))]
        async fn $create(c: Caller, Path(p): Path<NamespacePath>, Query(d): Query<DryRunQuery>, body: JsonBody<Value>)
            -> Result<(axum::http::StatusCode, Json<$K>)> {
            let created = c.machines.create(&c.id, &p.namespace, d.is_dry_run()?, || body.parse()).await?;
            Ok((axum::http::StatusCode::CREATED, Json(created)))
        }

        #[doc = concat!("Get a ", $kind, ".")]
        #[utoipa::path(get, path = $p_one, tag = $tag, params(ObjectPath),
            responses((status = 200, description = "The object", body = $doc),
                      (status = 404, description = "Not found", body = super::ErrorBody)))]
        async fn $get(c: Caller, Path(p): Path<ObjectPath>) -> Result<Json<$K>> {
            Ok(Json(c.machines.get(&c.id, &p.namespace, &p.name).await?))
        }

        #[doc = concat!("Replace a ", $kind, " (send its `metadata.resourceVersion` to detect conflicts).")]
        #[utoipa::path(put, path = $p_one, tag = $tag, params(ObjectPath, DryRunQuery), request_body = $doc,
            responses((status = 200, description = "Replaced", body = $doc),
                      (status = 400, description = "The body is not a valid object", body = super::ErrorBody),
                      (status = 409, description = "Changed meanwhile: get it again and retry", body = super::ErrorBody),
                      (status = 422, description = "A field is invalid", body = super::ErrorBody)))]
        async fn $replace(c: Caller, Path(p): Path<ObjectPath>, Query(d): Query<DryRunQuery>, body: JsonBody<Value>)
            -> Result<Json<$K>> {
            Ok(Json(c.machines.replace(&c.id, &p.namespace, &p.name, d.is_dry_run()?, || body.parse()).await?))
        }

        #[doc = concat!("Delete a ", $kind, "; answers the object as it goes (finalizers run first).")]
        #[utoipa::path(delete, path = $p_one, tag = $tag, params(ObjectPath, DryRunQuery),
            responses((status = 200, description = "Deleting", body = $doc),
                      (status = 404, description = "Not found", body = super::ErrorBody)))]
        async fn $delete(c: Caller, Path(p): Path<ObjectPath>, Query(d): Query<DryRunQuery>) -> Result<Json<$K>> {
            Ok(Json(c.machines.delete(&c.id, &p.namespace, &p.name, d.is_dry_run()?).await?))
        }

        #[doc = concat!("Wait until a ", $kind, " reaches a phase or condition, or is deleted (504 on timeout).")]
        #[utoipa::path(get, path = $p_wait, tag = $tag, params(ObjectPath, WaitQuery),
            responses((status = 200, description = "Reached: the object", body = $doc),
                      (status = 400, description = "Give exactly one of phase, condition or deleted", body = super::ErrorBody),
                      (status = 404, description = "Not found, or deleted while waiting", body = super::ErrorBody),
                      (status = 504, description = "Not reached in time", body = super::ErrorBody)))]
        async fn $wait(c: Caller, Path(p): Path<ObjectPath>, Query(q): Query<WaitQuery>) -> Result<Json<$K>> {
            let timeout = q.timeout();
            let what = WaitFor::of(q.phase, q.condition, q.deleted)?;
            Ok(Json(c.machines.wait(&c.id, &p.namespace, &p.name, &what, timeout, &c.stopping).await?))
        }

        #[doc = concat!("The Events about a ", $kind, ", oldest first.")]
        #[utoipa::path(get, path = $p_events, tag = $tag, params(ObjectPath),
            responses((status = 200, description = "Its Events", body = schema::EventList),
                      (status = 404, description = "Not found", body = super::ErrorBody)))]
        async fn $events(c: Caller, Path(p): Path<ObjectPath>) -> Result<Json<EventList>> {
            Ok(Json(c.machines.events::<$K>(&c.id, &p.namespace, &p.name).await?))
        }
    };
}

kind_routes!(
    Machine,
    schema::Machine,
    schema::MachineList,
    schema::MachineWatchEvent,
    "Machines",
    "Machine",
    machine_list_all = "/api/v1/machines",
    machine_list,
    machine_create = "/api/v1/machines/{namespace}",
    machine_get,
    machine_replace,
    machine_delete = "/api/v1/machines/{namespace}/{name}",
    machine_wait = "/api/v1/machines/{namespace}/{name}/wait",
    machine_events = "/api/v1/machines/{namespace}/{name}/events"
);
kind_routes!(
    MachinePool,
    schema::MachinePool,
    schema::MachinePoolList,
    schema::MachinePoolWatchEvent,
    "MachinePools",
    "MachinePool",
    machinepool_list_all = "/api/v1/machinepools",
    machinepool_list,
    machinepool_create = "/api/v1/machinepools/{namespace}",
    machinepool_get,
    machinepool_replace,
    machinepool_delete = "/api/v1/machinepools/{namespace}/{name}",
    machinepool_wait = "/api/v1/machinepools/{namespace}/{name}/wait",
    machinepool_events = "/api/v1/machinepools/{namespace}/{name}/events"
);
kind_routes!(
    MachineClaim,
    schema::MachineClaim,
    schema::MachineClaimList,
    schema::MachineClaimWatchEvent,
    "MachineClaims",
    "MachineClaim",
    machineclaim_list_all = "/api/v1/machineclaims",
    machineclaim_list,
    machineclaim_create = "/api/v1/machineclaims/{namespace}",
    machineclaim_get,
    machineclaim_replace,
    machineclaim_delete = "/api/v1/machineclaims/{namespace}/{name}",
    machineclaim_wait = "/api/v1/machineclaims/{namespace}/{name}/wait",
    machineclaim_events = "/api/v1/machineclaims/{namespace}/{name}/events"
);

kind_routes!(
    kairon_model::KaironTemplate,
    schema::KaironTemplate,
    schema::KaironTemplateList,
    schema::KaironTemplateWatchEvent,
    "Templates",
    "KaironTemplate",
    kairontemplate_list_all = "/api/v1/templates",
    kairontemplate_list,
    kairontemplate_create = "/api/v1/templates/{namespace}",
    kairontemplate_get,
    kairontemplate_replace,
    kairontemplate_delete = "/api/v1/templates/{namespace}/{name}",
    kairontemplate_wait = "/api/v1/templates/{namespace}/{name}/wait",
    kairontemplate_events = "/api/v1/templates/{namespace}/{name}/events"
);

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(machine_list_all))
        .routes(routes!(machine_list, machine_create))
        .routes(routes!(machine_get, machine_replace, machine_delete))
        .routes(routes!(machine_wait))
        .routes(routes!(machine_events))
        .routes(routes!(machinepool_list_all))
        .routes(routes!(machinepool_list, machinepool_create))
        .routes(routes!(machinepool_get, machinepool_replace, machinepool_delete))
        .routes(routes!(machinepool_wait))
        .routes(routes!(machinepool_events))
        .routes(routes!(machineclaim_list_all))
        .routes(routes!(machineclaim_list, machineclaim_create))
        .routes(routes!(machineclaim_get, machineclaim_replace, machineclaim_delete))
        .routes(routes!(machineclaim_wait))
        .routes(routes!(machineclaim_events))
        .routes(routes!(kairontemplate_list_all))
        .routes(routes!(kairontemplate_list, kairontemplate_create))
        .routes(routes!(kairontemplate_get, kairontemplate_replace, kairontemplate_delete))
        .routes(routes!(kairontemplate_wait))
        .routes(routes!(kairontemplate_events))
}
