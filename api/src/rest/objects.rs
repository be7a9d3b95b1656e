//! Machines, MachinePools and MachineClaims: list, get, create, replace, delete, a long-poll
//! wait, and an object's Events, all as the Kubernetes objects through kube-rs.

use std::fmt::Debug;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use kairon_model::{Machine, MachineClaim, MachinePool};

use super::{Caller, JsonBody, RestError, RestResult, schema};
use crate::auth::{self, Verb};
use crate::guard;
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

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct DryRunQuery {
    /// `All`: validate and answer with the result without storing it.
    pub dry_run: Option<String>,
}

impl DryRunQuery {
    pub fn is_dry_run(&self) -> RestResult<bool> {
        match self.dry_run.as_deref() {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(RestError::bad_request(format!("dryRun={other:?} is not supported: use dryRun=All"))),
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

/// Object names are DNS labels or subdomains: anything else cannot exist, so it is a 400.
pub fn check_name(what: &str, name: &str) -> RestResult<()> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    if ok {
        Ok(())
    } else {
        Err(RestError::bad_request(format!(
            "{what} {name:?} is not a valid name: use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
        )))
    }
}

/// A namespace is a DNS label (at most 63 characters, no dots), as the Kubernetes API has it.
pub fn check_namespace(ns: &str) -> RestResult<()> {
    check_name("namespace", ns)?;
    if ns.len() > 63 || ns.contains('.') {
        return Err(RestError::bad_request(format!(
            "namespace {ns:?} is not a valid namespace: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"
        )));
    }
    Ok(())
}

/// The kinds mirrored here.
pub trait Mirrored:
    Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
}
impl Mirrored for Machine {}
impl Mirrored for MachinePool {}
impl Mirrored for MachineClaim {}

pub fn api<K: Mirrored>(c: &Caller, ns: &str) -> Api<K> {
    Api::namespaced(c.ctx.kube.clone(), ns)
}

/// Gets an object the caller may read (404 with the kind and name when it is not there).
pub async fn get_object<K: Mirrored>(c: &Caller, ns: &str, name: &str) -> RestResult<K> {
    check_name("namespace", ns)?;
    check_name("name", name)?;
    c.check(auth::may_access(&c.id, Verb::Read, Some(ns), false))?;
    api::<K>(c, ns)
        .get_opt(name)
        .await?
        .ok_or_else(|| RestError::not_found(format!("{} {ns}/{name} not found", K::kind(&()))))
}

async fn list_in<K: Mirrored>(c: &Caller, ns: Option<&str>, q: &ListQuery) -> RestResult<Vec<K>> {
    let mut lp = ListParams::default();
    if let Some(sel) = &q.label_selector {
        lp = lp.labels(sel);
    }
    let api: Api<K> = match ns {
        Some(ns) => Api::namespaced(c.ctx.kube.clone(), ns),
        None => Api::all(c.ctx.kube.clone()),
    };
    Ok(api.list(&lp).await?.items)
}

async fn list_all<K: Mirrored>(c: &Caller, q: &ListQuery) -> RestResult<Vec<K>> {
    if c.id.all_namespaces() {
        return list_in(c, None, q).await;
    }
    let mut items = Vec::new();
    for ns in &c.id.namespaces {
        items.extend(list_in::<K>(c, Some(ns), q).await?);
    }
    Ok(items)
}

async fn list<K: Mirrored>(c: &Caller, ns: &str, q: &ListQuery) -> RestResult<Vec<K>> {
    check_name("namespace", ns)?;
    c.check(auth::may_access(&c.id, Verb::Read, Some(ns), false))?;
    list_in(c, Some(ns), q).await
}

/// Turns a request body into the kind, filling in apiVersion, kind and the path's namespace.
fn decode<K: Mirrored>(mut body: Value, ns: &str, name: Option<&str>) -> RestResult<K> {
    let obj = body
        .as_object_mut()
        .ok_or_else(|| RestError::bad_request(format!("the body must be a {} object", K::kind(&()))))?;
    obj.entry("apiVersion").or_insert_with(|| K::api_version(&()).into());
    obj.entry("kind").or_insert_with(|| K::kind(&()).into());
    if obj.get("kind").and_then(Value::as_str) != Some(K::kind(&()).as_ref()) {
        return Err(RestError::bad_request(format!("kind must be {} on this route", K::kind(&()))));
    }
    let meta = obj.entry("metadata").or_insert_with(|| serde_json::json!({}));
    let meta = meta.as_object_mut().ok_or_else(|| RestError::bad_request("metadata must be an object"))?;
    match meta.get("namespace").and_then(Value::as_str) {
        Some(n) if n != ns => {
            return Err(RestError::bad_request(format!(
                "metadata.namespace {n:?} does not match the namespace {ns:?} in the path"
            )));
        }
        _ => {
            meta.insert("namespace".into(), ns.into());
        }
    }
    if let Some(name) = name {
        match meta.get("name").and_then(Value::as_str) {
            Some(n) if n != name => {
                return Err(RestError::bad_request(format!(
                    "metadata.name {n:?} does not match the name {name:?} in the path"
                )));
            }
            _ => {
                meta.insert("name".into(), name.into());
            }
        }
    }
    serde_path_to_error::deserialize(body)
        .map_err(|e| RestError::bad_request(format!("invalid {} at {}: {}", K::kind(&()), e.path(), e.inner())))
}

/// Tenants never write `kairon-system` (`crate::guard::may_request`).
fn may_request<K: Mirrored>(c: &Caller, ns: &str, op: guard::Op) -> RestResult<()> {
    let plural = K::plural(&());
    let kind = guard::Kind { group: guard::KAIRON_GROUP, plural: &plural, namespaced: true };
    c.check(guard::may_request(&c.id, kind, Some(ns), op))
}

/// Who may write what (`crate::guard`): the same rule as on the Kubernetes-compatible paths,
/// checked here with the caller's identity because the write itself goes out with the server's.
/// `old` is the stored object (None for a create); the status is what the store will keep.
fn check_write<K: Mirrored>(c: &Caller, old: Option<&K>, obj: &K) -> RestResult<()> {
    let old = old.map(|o| serde_json::to_value(o).unwrap_or_default());
    let mut new = serde_json::to_value(obj).unwrap_or_default();
    guard::keep_stored_status(old.as_ref(), &mut new);
    let plural = K::plural(&());
    let kind = guard::Kind { group: guard::KAIRON_GROUP, plural: &plural, namespaced: true };
    c.check(guard::check_write(&c.id, kind, old.as_ref(), &new))
}

async fn create<K: Mirrored>(c: &Caller, ns: &str, dry: &DryRunQuery, body: JsonBody<Value>) -> RestResult<K> {
    check_name("namespace", ns)?;
    c.check(auth::may_access(&c.id, Verb::Write, Some(ns), false))?;
    may_request::<K>(c, ns, guard::Op::Write)?;
    let body = body.parse()?;
    let obj: K = decode(body, ns, None)?;
    check_write(c, None, &obj)?;
    let pp = PostParams { dry_run: dry.is_dry_run()?, field_manager: Some("kairon-api".into()) };
    Ok(api::<K>(c, ns).create(&pp, &obj).await?)
}

async fn replace<K: Mirrored>(
    c: &Caller,
    ns: &str,
    name: &str,
    dry: &DryRunQuery,
    body: JsonBody<Value>,
) -> RestResult<K> {
    check_name("namespace", ns)?;
    check_name("name", name)?;
    c.check(auth::may_access(&c.id, Verb::Write, Some(ns), false))?;
    may_request::<K>(c, ns, guard::Op::Write)?;
    let body = body.parse()?;
    let obj: K = decode(body, ns, Some(name))?;
    let current = api::<K>(c, ns).get_opt(name).await?;
    check_write(c, current.as_ref(), &obj)?;
    let pp = PostParams { dry_run: dry.is_dry_run()?, field_manager: Some("kairon-api".into()) };
    Ok(api::<K>(c, ns).replace(name, &pp, &obj).await?)
}

async fn delete<K: Mirrored>(c: &Caller, ns: &str, name: &str, dry: &DryRunQuery) -> RestResult<K> {
    let current: K = get_object(c, ns, name).await?;
    c.check(auth::may_access(&c.id, Verb::Write, Some(ns), false))?;
    may_request::<K>(c, ns, guard::Op::Delete)?;
    let dp = DeleteParams { dry_run: dry.is_dry_run()?, ..Default::default() };
    Ok(api::<K>(c, ns).delete(name, &dp).await?.left().unwrap_or(current))
}

fn phase_of(v: &Value) -> Option<&str> {
    v.pointer("/status/phase").and_then(Value::as_str)
}

fn condition_true(v: &Value, ty: &str) -> bool {
    v.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"].as_str() == Some(ty) && c["status"].as_str() == Some("True")))
}

/// Long-polls until the object reaches a phase or condition, or is gone: clients need no
/// polling loops. Answers the object (or, for `deleted`, the last one seen).
async fn wait<K: Mirrored>(c: &Caller, ns: &str, name: &str, q: &WaitQuery) -> RestResult<Value> {
    let first: K = get_object(c, ns, name).await.or_else(|e| {
        if q.deleted == Some(true) && e.status == axum::http::StatusCode::NOT_FOUND {
            Ok(serde_json::from_value(serde_json::json!({})).map_err(|_| e.clone())?)
        } else {
            Err(e)
        }
    })?;
    let goal = match (&q.phase, &q.condition, q.deleted) {
        (Some(p), None, None | Some(false)) => format!("phase {p}"),
        (None, Some(cnd), None | Some(false)) => format!("condition {cnd}=True"),
        (None, None, Some(true)) => "deletion".to_string(),
        _ => return Err(RestError::bad_request("give exactly one of phase=, condition= or deleted=true")),
    };
    let timeout = Duration::from_secs(q.timeout_seconds.unwrap_or(60).clamp(1, 600));
    let reached = |obj: Option<&K>| -> bool {
        match obj {
            None => q.deleted == Some(true),
            Some(o) => {
                let v = serde_json::to_value(o).unwrap_or_default();
                match (&q.phase, &q.condition) {
                    (Some(p), _) => phase_of(&v) == Some(p.as_str()),
                    (_, Some(cnd)) => condition_true(&v, cnd),
                    _ => false,
                }
            }
        }
    };
    let api = api::<K>(c, ns);
    let watched = tokio::time::timeout(timeout, kube::runtime::wait::await_condition(api.clone(), name, reached));
    let outcome = tokio::select! {
        biased;
        // The server is draining: its watches end, so this wait cannot finish honestly. Leave
        // the answer to the connection's end (the client waits again, elsewhere or later)
        // rather than answer a 503 of our own making.
        _ = c.stopping.cancelled() => std::future::pending().await,
        outcome = watched => outcome,
    };
    match outcome {
        Ok(Ok(obj)) => Ok(obj
            .map(|o| serde_json::to_value(o).unwrap_or_default())
            .unwrap_or_else(|| serde_json::to_value(&first).unwrap_or_default())),
        Ok(Err(e)) => Err(RestError::unavailable(format!("watching {} {ns}/{name} failed: {e}", K::kind(&())))),
        Err(_) => {
            let now = api.get_opt(name).await?.map(|o| serde_json::to_value(o).unwrap_or_default());
            let state = match now.as_ref() {
                None => "it is gone".to_string(),
                Some(v) => format!("its phase is {}", phase_of(v).unwrap_or("not set yet")),
            };
            Err(RestError::new(
                axum::http::StatusCode::GATEWAY_TIMEOUT,
                "Timeout",
                format!(
                    "waited {}s for {} {ns}/{name} to reach {goal}; {state}. Wait again, or raise timeoutSeconds",
                    timeout.as_secs(),
                    K::kind(&())
                ),
            ))
        }
    }
}

async fn events<K: Mirrored>(c: &Caller, ns: &str, name: &str) -> RestResult<Value> {
    let obj: K = get_object(c, ns, name).await?;
    let events: Api<Event> = Api::namespaced(c.ctx.kube.clone(), ns);
    let uid = obj.uid();
    let mut items: Vec<Event> = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().is_some_and(|r| {
                r.name.as_deref() == Some(name)
                    && r.kind.as_deref() == Some(K::kind(&()).as_ref())
                    && (r.uid.is_none() || uid.is_none() || r.uid == uid)
            })
        })
        .collect();
    items.sort_by_key(|e| {
        e.event_time.as_ref().map(|t| t.0).or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
    });
    Ok(serde_json::json!({ "items": items }))
}

fn json<K: Serialize>(k: K) -> Json<Value> {
    Json(serde_json::to_value(k).unwrap_or_default())
}

/// The same eight routes for each kind.
macro_rules! kind_routes {
    (
        $K:ty, $doc:ty, $list_doc:ty, $tag:literal, $kind:literal,
        $list_all:ident = $p_all:literal,
        $list:ident, $create:ident = $p_ns:literal,
        $get:ident, $replace:ident, $delete:ident = $p_one:literal,
        $wait:ident = $p_wait:literal,
        $events:ident = $p_events:literal
    ) => {
        #[doc = concat!("List ", $kind, "s in every namespace the caller may read.")]
        #[utoipa::path(get, path = $p_all, tag = $tag, params(ListQuery),
            responses((status = 200, description = "The objects", body = $list_doc),
                      (status = 401, description = "No or a bad token", body = super::ErrorBody)))]
        async fn $list_all(c: Caller, Query(q): Query<ListQuery>) -> RestResult<Json<Value>> {
            Ok(Json(serde_json::json!({ "items": list_all::<$K>(&c, &q).await? })))
        }

        #[doc = concat!("List ", $kind, "s in a namespace.")]
        #[utoipa::path(get, path = $p_ns, tag = $tag, params(NamespacePath, ListQuery),
            responses((status = 200, description = "The objects", body = $list_doc),
                      (status = 403, description = "The caller may not read this namespace", body = super::ErrorBody)))]
        async fn $list(c: Caller, Path(p): Path<NamespacePath>, Query(q): Query<ListQuery>) -> RestResult<Json<Value>> {
            Ok(Json(serde_json::json!({ "items": list::<$K>(&c, &p.namespace, &q).await? })))
        }

        #[doc = concat!("Create a ", $kind, " (`dryRun=All` validates without storing).")]
        #[utoipa::path(post, path = $p_ns, tag = $tag, params(NamespacePath, DryRunQuery), request_body = $doc,
            responses((status = 201, description = "Created", body = $doc),
                      (status = 400, description = "The body is not a valid object", body = super::ErrorBody),
                      (status = 403, description = "The caller may not write here", body = super::ErrorBody),
                      (status = 409, description = "It already exists", body = super::ErrorBody),
                      (status = 422, description = "A field is invalid", body = super::ErrorBody)))]
        async fn $create(c: Caller, Path(p): Path<NamespacePath>, Query(d): Query<DryRunQuery>, body: JsonBody<Value>)
            -> RestResult<(axum::http::StatusCode, Json<Value>)> {
            Ok((axum::http::StatusCode::CREATED, json(create::<$K>(&c, &p.namespace, &d, body).await?)))
        }

        #[doc = concat!("Get a ", $kind, ".")]
        #[utoipa::path(get, path = $p_one, tag = $tag, params(ObjectPath),
            responses((status = 200, description = "The object", body = $doc),
                      (status = 404, description = "Not found", body = super::ErrorBody)))]
        async fn $get(c: Caller, Path(p): Path<ObjectPath>) -> RestResult<Json<Value>> {
            Ok(json(get_object::<$K>(&c, &p.namespace, &p.name).await?))
        }

        #[doc = concat!("Replace a ", $kind, " (send its `metadata.resourceVersion` to detect conflicts).")]
        #[utoipa::path(put, path = $p_one, tag = $tag, params(ObjectPath, DryRunQuery), request_body = $doc,
            responses((status = 200, description = "Replaced", body = $doc),
                      (status = 400, description = "The body is not a valid object", body = super::ErrorBody),
                      (status = 409, description = "Changed meanwhile: get it again and retry", body = super::ErrorBody),
                      (status = 422, description = "A field is invalid", body = super::ErrorBody)))]
        async fn $replace(c: Caller, Path(p): Path<ObjectPath>, Query(d): Query<DryRunQuery>, body: JsonBody<Value>)
            -> RestResult<Json<Value>> {
            Ok(json(replace::<$K>(&c, &p.namespace, &p.name, &d, body).await?))
        }

        #[doc = concat!("Delete a ", $kind, "; answers the object as it goes (finalizers run first).")]
        #[utoipa::path(delete, path = $p_one, tag = $tag, params(ObjectPath, DryRunQuery),
            responses((status = 200, description = "Deleting", body = $doc),
                      (status = 404, description = "Not found", body = super::ErrorBody)))]
        async fn $delete(c: Caller, Path(p): Path<ObjectPath>, Query(d): Query<DryRunQuery>) -> RestResult<Json<Value>> {
            Ok(json(delete::<$K>(&c, &p.namespace, &p.name, &d).await?))
        }

        #[doc = concat!("Wait until a ", $kind, " reaches a phase or condition, or is deleted (504 on timeout).")]
        #[utoipa::path(get, path = $p_wait, tag = $tag, params(ObjectPath, WaitQuery),
            responses((status = 200, description = "Reached: the object", body = $doc),
                      (status = 400, description = "Give exactly one of phase, condition or deleted", body = super::ErrorBody),
                      (status = 404, description = "Not found, or deleted while waiting", body = super::ErrorBody),
                      (status = 504, description = "Not reached in time", body = super::ErrorBody)))]
        async fn $wait(c: Caller, Path(p): Path<ObjectPath>, Query(q): Query<WaitQuery>) -> RestResult<Json<Value>> {
            Ok(Json(wait::<$K>(&c, &p.namespace, &p.name, &q).await?))
        }

        #[doc = concat!("The Events about a ", $kind, ", oldest first.")]
        #[utoipa::path(get, path = $p_events, tag = $tag, params(ObjectPath),
            responses((status = 200, description = "Its Events", body = schema::EventList),
                      (status = 404, description = "Not found", body = super::ErrorBody)))]
        async fn $events(c: Caller, Path(p): Path<ObjectPath>) -> RestResult<Json<Value>> {
            Ok(Json(events::<$K>(&c, &p.namespace, &p.name).await?))
        }
    };
}

kind_routes!(
    Machine,
    schema::Machine,
    schema::MachineList,
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
}
