//! The verbs: get, list, watch, create, update, patch (merge, JSON, apply), delete, on the
//! main resource and its status subresource.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};

use kairon_db::{Durability, EventType, Freshness, ObjectRef, StoreError, Write};

use super::admit::{AdmitCtx, AdmitError};
use super::registry::{ResourceType, View};
use super::selector::{FieldSelector, LabelSelector};
use super::status::{ApiError, ApiResult};
use super::{Params, Target, events, patch, table};
use crate::auth::Identity;
use crate::guard::{self, Op};
use crate::state::AppState;

/// How many times a patch or an unconditional update retries on a concurrent write.
const MAX_RETRIES: usize = 16;

// The request's parts, each a different extractor of the router; one call per request.
#[allow(clippy::too_many_arguments)]
pub async fn handle(
    st: &AppState,
    id: &Identity,
    in_process: bool,
    method: Method,
    headers: &HeaderMap,
    q: &HashMap<String, String>,
    t: Target,
    body: Bytes,
) -> ApiResult<Response> {
    let rt = st.registry.get(&t.group, &t.plural).filter(|rt| rt.versions.contains(&t.version.as_str())).ok_or_else(
        || {
            ApiError::no_route(format!(
                "the server doesn't have a resource type \"{}\" in {}",
                t.plural,
                if t.group.is_empty() { t.version.clone() } else { format!("{}/{}", t.group, t.version) }
            ))
        },
    )?;
    let p = Params::parse(q)?;
    if rt.namespaced && t.name.is_some() && t.namespace.is_none() {
        return Err(ApiError::no_route(format!(
            "{} are namespaced: use /namespaces/{{namespace}}/{}",
            rt.plural, rt.plural
        )));
    }
    if !rt.namespaced && t.namespace.is_some() {
        return Err(ApiError::no_route(format!("{} are cluster-scoped: drop /namespaces/…", rt.plural)));
    }
    // As in Kubernetes, the path across all namespaces only lists and watches.
    if rt.namespaced && t.namespace.is_none() && method != Method::GET {
        return Err(ApiError::method_not_allowed(format!(
            "{method} is not supported on {} across all namespaces: {} are namespaced, use \
             /namespaces/{{namespace}}/{}",
            rt.plural, rt.plural, rt.plural
        )));
    }
    if let Some(ns) = &t.namespace
        && !kairon_model::validate::is_dns_label(ns)
    {
        return Err(ApiError::bad_request(format!("invalid namespace {ns:?}: must be a lowercase DNS label")));
    }
    let status_sub = match t.subresource.as_deref() {
        None => false,
        Some("status") if rt.status_subresource => true,
        Some(s) => return Err(ApiError::no_route(format!("{} has no subresource {s:?}", rt.plural))),
    };
    let op = match method {
        Method::GET => Op::Read,
        Method::DELETE => Op::Delete,
        _ => Op::Write,
    };
    let scope_ns = if rt.namespaced { t.namespace.as_deref() } else { None };
    guard::may_request(id, kind_of(rt), scope_ns, op).map_err(ApiError::forbidden)?;
    if status_sub && op != Op::Read {
        guard::may_write_status(id, kind_of(rt)).map_err(ApiError::forbidden)?;
    }
    let ns = t.namespace.clone().unwrap_or_default();
    // Who asked what, in RBAC's words: `tests/tests/rbac.rs` compares each component's calls
    // with its ClusterRole in deploy/kustomize.
    let verb = match (&method, t.name.is_some(), p.watch) {
        (&Method::GET, _, true) => "watch",
        (&Method::GET, true, _) => "get",
        (&Method::GET, false, _) => "list",
        (&Method::POST, ..) => "create",
        (&Method::PUT, ..) => "update",
        (&Method::PATCH, ..) => "patch",
        (&Method::DELETE, true, _) => "delete",
        (&Method::DELETE, false, _) => "deletecollection",
        _ => "other",
    };
    log_request(id, verb, rt, t.subresource.as_deref(), t.namespace.as_deref());
    let ctx = Ctx { st, rt, version: t.version.clone(), ns, id, params: p, status_sub, in_process };

    match (method, t.name) {
        (Method::GET, None) if ctx.params.watch => watch(&ctx, headers).await,
        (Method::GET, None) => list(&ctx, headers).await,
        (Method::GET, Some(name)) if ctx.params.watch => {
            // A watch on one object: kubectl's `get NAME -w` and `delete --wait` do this.
            let mut c = ctx;
            let sel = format!("metadata.name={name}");
            c.params.field_selector = Some(match c.params.field_selector.take() {
                Some(f) => format!("{f},{sel}"),
                None => sel,
            });
            watch(&c, headers).await
        }
        (Method::GET, Some(name)) => get(&ctx, &name, headers).await,
        (Method::POST, None) => create(&ctx, headers, &body).await,
        (Method::PUT, Some(name)) => update(&ctx, &name, headers, &body).await,
        (Method::PATCH, Some(name)) => patch_object(&ctx, &name, headers, &body).await,
        (Method::DELETE, Some(name)) => delete(&ctx, &name, &body).await,
        (Method::DELETE, None) => delete_collection(&ctx).await,
        (m, _) => Err(ApiError::method_not_allowed(format!("{m} is not supported on {}", rt.plural))),
    }
}

fn kind_of(rt: &ResourceType) -> guard::Kind<'_> {
    guard::Kind { group: rt.group, plural: rt.plural, namespaced: rt.namespaced }
}

pub(super) struct Ctx<'a> {
    pub(super) st: &'a AppState,
    pub(super) rt: &'a ResourceType,
    pub(super) version: String,
    pub(super) ns: String,
    pub(super) id: &'a Identity,
    pub(super) params: Params,
    pub(super) status_sub: bool,
    /// Made by the in-process client for a caller who holds their own connection slot.
    pub(super) in_process: bool,
}

impl Ctx<'_> {
    pub(super) fn key<'b>(&'b self, name: &'b str) -> ObjectRef<'b> {
        let (group, resource) = self.rt.store_key();
        ObjectRef { group, resource, namespace: &self.ns, name }
    }

    /// How fresh a read must be: `resourceVersion=0` takes the watch cache as it is, anything
    /// else sees every committed write, as Kubernetes has it.
    fn freshness(&self) -> Freshness {
        if self.params.resource_version.as_deref() == Some("0") { Freshness::Any } else { Freshness::Latest }
    }

    /// Whether stored objects are answered as they are: a native kind asked for in the version
    /// it is stored in (every write sets that apiVersion and kind).
    fn served_as_stored(&self) -> bool {
        self.rt.view == View::Native && self.version == self.rt.storage_version()
    }

    /// The object as the client asked to see it: in its requested version, through its view.
    fn present(&self, mut obj: Value) -> Value {
        if self.rt.view == View::CoreEvents {
            return events::to_core(obj);
        }
        if self.rt.view == View::Secrets {
            hide_secret_data(self.id, &mut obj);
        }
        obj["apiVersion"] = Value::String(self.rt.api_version(&self.version));
        obj["kind"] = Value::String(self.rt.kind.to_string());
        obj
    }

    fn respond(&self, code: StatusCode, obj: Value, warnings: &[String], headers: &HeaderMap) -> Response {
        let obj = self.present(obj);
        let body = if table::wanted(headers) {
            table::table(
                self.rt,
                std::slice::from_ref(&obj),
                json!({"resourceVersion": obj["metadata"]["resourceVersion"]}),
                now_secs(),
            )
        } else {
            obj
        };
        let mut resp = (code, axum::Json(body)).into_response();
        for w in warnings {
            if let Ok(v) = HeaderValue::from_str(&format!("299 - {:?}", w)) {
                resp.headers_mut().append("warning", v);
            }
        }
        resp
    }
}

fn now_secs() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The server's clock for the times it stamps (creation, deletion, managed fields), to the
/// millisecond: a claim's `status.waitSeconds` counts from its creation, and a warm claim binds
/// within milliseconds of it (whole seconds overstated it by half a second on average).
fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn rv_of(obj: &Value) -> Option<i64> {
    obj["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok())
}

fn parse_body(headers: &HeaderMap, body: &Bytes) -> ApiResult<Value> {
    let ct = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("application/json");
    // kubectl's typed clients (`kubectl create namespace`) send protobuf; say so plainly.
    if ct.contains("protobuf") || ct.contains("cbor") {
        return Err(ApiError::unsupported_media(format!(
            "the body is {ct}, but this server reads JSON and YAML only: send a manifest instead (kubectl apply -f)"
        )));
    }
    let v: Value = if ct.contains("yaml") {
        serde_yaml::from_slice(body).map_err(|e| ApiError::bad_request(format!("the body is not valid YAML: {e}")))?
    } else {
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?
    };
    if !v.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    Ok(v)
}

// ---------------------------------------------------------------------------------------
// Reads

async fn get(c: &Ctx<'_>, name: &str, headers: &HeaderMap) -> ApiResult<Response> {
    if c.rt.view == View::Namespaces {
        // As the list shows a tenant only its own namespaces, a tenant reads no other one by
        // name either: another tenant's namespace (its labels, uid, creation time) stays unseen.
        if !c.id.may_use_namespace(name) {
            return Err(ApiError::forbidden(format!(
                "{} may not use namespace {name:?} (allowed: {})",
                c.id.sub,
                c.id.namespaces.join(", ")
            )));
        }
        return Ok(c.respond(StatusCode::OK, namespace_object(c, name).await?, &[], headers));
    }
    let not_found = || ApiError::not_found(&c.rt.qualified(), name);
    if c.served_as_stored() && !table::wanted(headers) {
        // The stored text as it is: no parse and no serialisation on the busiest read.
        let text = c.st.store.get_json(c.key(name), c.freshness()).await?.ok_or_else(not_found)?;
        let json = HeaderValue::from_static("application/json");
        return Ok(
            ([(axum::http::header::CONTENT_TYPE, json)], Bytes::copy_from_slice(text.as_bytes())).into_response()
        );
    }
    let obj = c.st.store.get_with(c.key(name), c.freshness()).await?.ok_or_else(not_found)?;
    Ok(c.respond(StatusCode::OK, obj, &[], headers))
}

/// Namespaces exist implicitly: any valid name reads as an Active namespace.
async fn namespace_object(c: &Ctx<'_>, name: &str) -> ApiResult<Value> {
    if !kairon_model::validate::is_dns_label(name) {
        return Err(ApiError::not_found(&c.rt.qualified(), name));
    }
    if let Some(obj) = c.st.store.get(c.key(name)).await? {
        return Ok(obj);
    }
    Ok(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "uid": uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, name.as_bytes()).to_string(),
                     "creationTimestamp": "1970-01-01T00:00:00Z", "resourceVersion": "0"},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"}
    }))
}

struct Selection {
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
}

impl Selection {
    fn parse(p: &Params) -> ApiResult<Selection> {
        Ok(Selection {
            labels: p.label_selector.as_deref().map(LabelSelector::parse).transpose().map_err(ApiError::bad_request)?,
            fields: p.field_selector.as_deref().map(FieldSelector::parse).transpose().map_err(ApiError::bad_request)?,
        })
    }

    fn is_empty(&self) -> bool {
        self.labels.is_none() && self.fields.is_none()
    }

    fn matches(&self, obj: &Value) -> bool {
        self.labels.as_ref().is_none_or(|l| l.matches_object(obj))
            && self.fields.as_ref().is_none_or(|f| f.matches(obj))
    }
}

fn visible(c: &Ctx<'_>, obj: &Value) -> bool {
    may_see(c.id, c.rt, obj)
}

/// Whether a list or watch shows `obj` to `id`: what is in its namespaces, what is
/// cluster-scoped, and of the Namespaces only its own (a tenant learns no other tenant's).
/// A viewer sees that a Secret exists and its labels, never its data.
fn hide_secret_data(id: &Identity, obj: &mut Value) {
    if id.role == crate::auth::Role::Viewer
        && let Some(map) = obj.as_object_mut()
    {
        map.remove("stringData");
        map.remove("data");
    }
}

fn may_see(id: &Identity, rt: &ResourceType, obj: &Value) -> bool {
    if id.all_namespaces() {
        return true;
    }
    if rt.view == View::Namespaces {
        return obj["metadata"]["name"].as_str().is_some_and(|n| id.may_use_namespace(n));
    }
    !rt.namespaced || obj["metadata"]["namespace"].as_str().is_some_and(|ns| id.may_use_namespace(ns))
}

fn encode_continue(rv: i64, ns: &str, name: &str) -> String {
    hex::encode(format!("{rv}\u{1}{ns}\u{1}{name}"))
}

fn decode_continue(token: &str) -> ApiResult<(i64, String, String)> {
    let bad = || ApiError::bad_request("the continue token is invalid: start the list again without it");
    let raw = String::from_utf8(hex::decode(token).map_err(|_| bad())?).map_err(|_| bad())?;
    let mut parts = raw.split('\u{1}');
    let rv = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
    let ns = parts.next().ok_or_else(bad)?.to_string();
    let name = parts.next().ok_or_else(bad)?.to_string();
    Ok((rv, ns, name))
}

/// A list across all namespaces for a caller who may see only some: pages over those
/// namespaces only, so that a page, its size and its continue token (which names the last
/// object returned) say nothing about objects elsewhere.
async fn list_visible(
    c: &Ctx<'_>,
    group: &str,
    resource: &str,
    after: Option<(&str, &str)>,
    limit: Option<usize>,
) -> ApiResult<kairon_db::ListPage> {
    let mut namespaces: Vec<&str> =
        c.id.namespaces.iter().map(String::as_str).filter(|n| kairon_model::validate::is_dns_label(n)).collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    let mut items: Vec<Value> = Vec::new();
    let mut rv = None;
    let mut continue_after = None;
    for ns in namespaces {
        let cursor = match after {
            Some((a_ns, _)) if ns < a_ns => continue,
            Some((a_ns, a_name)) if ns == a_ns => Some((a_ns, a_name)),
            _ => None,
        };
        let room = limit.map(|l| l.saturating_sub(items.len()));
        if room == Some(0) {
            // The page is full: continue only if something visible remains.
            let peek = c.st.store.list_with(group, resource, Some(ns), cursor, Some(1), c.freshness()).await?;
            if peek.items.is_empty() {
                continue;
            }
            if let Some(last) = items.last() {
                let key = |f: &str| last["metadata"][f].as_str().unwrap_or_default().to_string();
                continue_after = Some((key("namespace"), key("name")));
            }
            break;
        }
        let page = c.st.store.list_with(group, resource, Some(ns), cursor, room, c.freshness()).await?;
        rv.get_or_insert(page.resource_version);
        items.extend(page.items);
        if page.continue_after.is_some() {
            continue_after = page.continue_after;
            break;
        }
    }
    let resource_version = match rv {
        Some(rv) => rv,
        None => c.st.store.current_rv().await?,
    };
    Ok(kairon_db::ListPage { items, resource_version, continue_after })
}

async fn list(c: &Ctx<'_>, headers: &HeaderMap) -> ApiResult<Response> {
    let sel = Selection::parse(&c.params)?;
    let (items, meta) = if c.rt.view == View::Namespaces {
        let rv = c.st.store.current_rv().await?;
        let mut names = c.st.store.namespaces().await?;
        let stored = c.st.store.list(c.rt.group, c.rt.plural, None, None, None).await?;
        names.extend(stored.items.iter().filter_map(|o| o["metadata"]["name"].as_str().map(String::from)));
        names.push("default".into());
        names.sort();
        names.dedup();
        let mut items = Vec::new();
        for n in names.iter().filter(|n| c.id.may_use_namespace(n)) {
            let ns = c.present(namespace_object(c, n).await?);
            if sel.matches(&ns) {
                items.push(ns);
            }
        }
        (items, json!({"resourceVersion": rv.to_string()}))
    } else {
        let (group, resource) = c.rt.store_key();
        let after = c.params.continue_token.as_deref().map(decode_continue).transpose()?;
        let ns = (!c.ns.is_empty()).then_some(c.ns.as_str());
        let cursor = after.as_ref().map(|(_, n, m)| (n.as_str(), m.as_str()));
        let page = if ns.is_none() && c.rt.namespaced && !c.id.all_namespaces() {
            list_visible(c, group, resource, cursor, c.params.limit).await?
        } else {
            c.st.store.list_with(group, resource, ns, cursor, c.params.limit, c.freshness()).await?
        };
        // A continued list reports the version of its first page, as Kubernetes does.
        let rv = after.as_ref().map(|(rv, _, _)| *rv).unwrap_or(page.resource_version);
        let items: Vec<Value> =
            page.items.into_iter().filter(|o| visible(c, o)).map(|o| c.present(o)).filter(|o| sel.matches(o)).collect();
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if let Some((n, m)) = page.continue_after {
            meta["continue"] = Value::String(encode_continue(rv, &n, &m));
        }
        (items, meta)
    };
    if table::wanted(headers) {
        return Ok(axum::Json(table::table(c.rt, &items, meta, now_secs())).into_response());
    }
    Ok(axum::Json(json!({
        "apiVersion": c.rt.api_version(&c.version),
        "kind": format!("{}List", c.rt.kind),
        "metadata": meta,
        "items": items,
    }))
    .into_response())
}

// ---------------------------------------------------------------------------------------
// Watch

fn watch_event(type_: &str, object: Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": type_, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

async fn watch(c: &Ctx<'_>, headers: &HeaderMap) -> ApiResult<Response> {
    // Held as long as the stream: the client closing it frees the slot. An in-process watch
    // serves a REST caller who holds a slot of their own (the server's token takes none).
    let slot = if c.in_process {
        None
    } else {
        c.st.connections.acquire_for(c.id).map_err(|e| {
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, crate::limits::TooManyConnections::REASON, e.message())
        })?
    };
    let sel = Selection::parse(&c.params)?;
    let (group, resource) = c.rt.store_key();
    let ns = (!c.ns.is_empty()).then(|| c.ns.clone());
    let as_table = table::wanted(headers);
    let explicit_rv = c.params.resource_version.as_deref().filter(|v| *v != "0");
    let send_initial = c.params.send_initial_events || explicit_rv.is_none();

    // Start: either from the client's version, or from a snapshot sent as ADDED events.
    let mut initial = Vec::new();
    let from_rv = match explicit_rv {
        Some(v) if !c.params.send_initial_events => v
            .parse::<i64>()
            .map_err(|_| ApiError::bad_request(format!("resourceVersion={v:?} is not a valid version")))?,
        _ => {
            let mut after: Option<(String, String)> = None;
            let mut snapshot_rv = None;
            loop {
                let page =
                    c.st.store
                        .list(
                            group,
                            resource,
                            ns.as_deref(),
                            after.as_ref().map(|(a, b)| (a.as_str(), b.as_str())),
                            Some(1000),
                        )
                        .await?;
                snapshot_rv.get_or_insert(page.resource_version);
                initial.extend(page.items);
                match page.continue_after {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            snapshot_rv.unwrap_or(0)
        }
    };

    let mut view = WatchView {
        rt: c.rt.clone(),
        version: c.version.clone(),
        id: c.id.clone(),
        as_table,
        sel,
        held: HashSet::new(),
        gap: None,
    };
    let mut out: Vec<Bytes> = Vec::new();
    for o in initial {
        let o = view.present(o);
        if view.may_see(&o) && view.sel.matches(&o) {
            view.held.insert(key_of(&o));
            if send_initial {
                out.push(watch_event("ADDED", view.render(o)));
            }
        }
    }
    // Resuming with a selector, the server does not know what the client held at its version
    // (what matched then). Until `gap_until` (now), each object's first event is judged against
    // its revision before that event, as Kubernetes' watch cache judges against the previous
    // object; an object with no event since holds what matches now.
    if !send_initial && !view.sel.is_empty() {
        let page = c.st.store.list(group, resource, ns.as_deref(), None, None).await?;
        let now: Vec<Value> = page.items.into_iter().map(|o| view.present(o)).collect();
        view.held.extend(now.iter().filter(|o| view.sel.matches(o)).map(key_of));
        view.gap = Some(Gap {
            until: page.resource_version,
            judged: HashSet::new(),
            store: c.st.store.clone(),
            group: group.to_string(),
            resource: resource.to_string(),
        });
    }
    if c.params.send_initial_events && c.params.allow_bookmarks {
        let mut bookmark = json!({
            "apiVersion": c.rt.api_version(&c.version), "kind": c.rt.kind,
            "metadata": {"resourceVersion": from_rv.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}}
        });
        if c.rt.view == View::CoreEvents {
            bookmark["apiVersion"] = "v1".into();
        }
        out.push(watch_event("BOOKMARK", bookmark));
    }

    let live: std::pin::Pin<Box<dyn Stream<Item = Bytes> + Send>> =
        match c.st.store.watch(group, resource, ns.as_deref(), from_rv).await {
            Ok(events) => {
                Box::pin(futures::stream::unfold((Box::pin(events), view), |(mut events, mut view)| async move {
                    loop {
                        let line = match events.next().await? {
                            Ok(ev) => view.line(ev).await,
                            Err(StoreError::Gone { compacted }) => Some(gone_event(compacted)),
                            Err(e) => {
                                tracing::warn!(error = %e, "watch stream failed");
                                Some(watch_event("ERROR", ApiError::internal(format!("watch failed: {e}")).status()))
                            }
                        };
                        if let Some(line) = line {
                            return Some((line, (events, view)));
                        }
                    }
                }))
            }
            // Too old: an ERROR event inside a 200 stream makes clients re-list (kube-rs retries
            // an HTTP 410 forever).
            Err(StoreError::Gone { compacted }) => {
                Box::pin(futures::stream::once(async move { gone_event(compacted) }))
            }
            Err(e) => return Err(e.into()),
        };
    let head = futures::stream::iter(out);
    let stream = head.chain(live).map(move |line| {
        let _held = &slot;
        Ok::<_, std::io::Error>(line)
    });
    let timeout = c.params.timeout_seconds.unwrap_or(1800).min(3600);
    let stream = tokio_stream::StreamExt::timeout(stream, Duration::from_secs(timeout.max(1)));
    // `timeout` yields an error once no item arrives in time; end the stream then instead.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    let stream = futures::StreamExt::take_until(
        futures::StreamExt::filter_map(stream, |item| futures::future::ready(item.ok())),
        tokio::time::sleep_until(deadline),
    );
    let ct = if as_table { "application/json;as=Table;v=v1;g=meta.k8s.io" } else { "application/json" };
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", ct)
        .header("transfer-encoding", "chunked")
        .body(Body::from_stream(stream))
        .map_err(|e| ApiError::internal(e.to_string()))
}

type Key = (String, String);

fn key_of(o: &Value) -> Key {
    (
        o["metadata"]["namespace"].as_str().unwrap_or("").to_string(),
        o["metadata"]["name"].as_str().unwrap_or("").to_string(),
    )
}

/// What one watch shows its client: the objects its caller may see that match its selector,
/// in the version and form it asked for, and which of them the client holds now (to tell
/// ADDED from MODIFIED, and to send DELETED once one stops matching, and only then).
struct WatchView {
    rt: ResourceType,
    version: String,
    id: Identity,
    as_table: bool,
    sel: Selection,
    held: HashSet<Key>,
    gap: Option<Gap>,
}

/// The events of a watch resumed with a selector that were written before it began.
struct Gap {
    until: i64,
    /// Objects whose holding was settled from their revision before their first event.
    judged: HashSet<Key>,
    store: kairon_db::Store,
    group: String,
    resource: String,
}

impl WatchView {
    fn present(&self, obj: Value) -> Value {
        if self.rt.view == View::CoreEvents {
            return events::to_core(obj);
        }
        let mut obj = obj;
        if self.rt.view == View::Secrets {
            hide_secret_data(&self.id, &mut obj);
        }
        obj["apiVersion"] = Value::String(self.rt.api_version(&self.version));
        obj["kind"] = Value::String(self.rt.kind.to_string());
        obj
    }

    fn render(&self, obj: Value) -> Value {
        if self.as_table { table::table(&self.rt, std::slice::from_ref(&obj), json!({}), now_secs()) } else { obj }
    }

    fn may_see(&self, obj: &Value) -> bool {
        may_see(&self.id, &self.rt, obj)
    }

    /// The line one stored event becomes for this client, if any.
    async fn line(&mut self, ev: kairon_db::WatchEvent) -> Option<Bytes> {
        let obj = match ev.object() {
            Ok(obj) => self.present(obj),
            Err(e) => {
                tracing::warn!(rv = ev.rv, error = %e, "a stored object is not JSON");
                return Some(watch_event("ERROR", ApiError::internal(format!("watch failed: {e}")).status()));
            }
        };
        if !self.may_see(&obj) {
            return None;
        }
        if self.sel.is_empty() {
            return Some(watch_event(ev.event_type.as_str(), self.render(obj)));
        }
        let key = key_of(&obj);
        if let Err(e) = self.judge(&ev, &key).await {
            // Unknown whether the client holds it: it must list again.
            tracing::warn!(error = %e, "reading an object's earlier revision for a resumed watch");
            return Some(watch_event(
                "ERROR",
                ApiError::gone(format!("the watch cannot resume here ({e}): list again")).status(),
            ));
        }
        if ev.event_type != EventType::Deleted && self.sel.matches(&obj) {
            let kind = if self.held.insert(key) { "ADDED" } else { "MODIFIED" };
            Some(watch_event(kind, self.render(obj)))
        } else {
            self.held.remove(&key).then(|| watch_event("DELETED", self.render(obj)))
        }
    }

    /// Within the gap, settles whether the client held the object before its first event: it
    /// did when the object's revision before that event matched. A revision compacted away
    /// (stores compacted before each object's last revision was kept) counts as held, so
    /// a client that held it hears that it left.
    async fn judge(&mut self, ev: &kairon_db::WatchEvent, key: &Key) -> Result<(), StoreError> {
        let Some(gap) = self.gap.as_mut() else { return Ok(()) };
        if ev.rv > gap.until {
            self.gap = None;
            return Ok(());
        }
        if !gap.judged.insert(key.clone()) {
            return Ok(());
        }
        let held = match ev.event_type {
            EventType::Added => false,
            _ => {
                let at =
                    ObjectRef { group: &gap.group, resource: &gap.resource, namespace: &ev.namespace, name: &ev.name };
                match gap.store.revision_before(at, ev.rv).await? {
                    None => true,
                    Some(before) if before.event_type == EventType::Deleted => false,
                    Some(before) => {
                        let before = before.object().map_err(|e| StoreError::Invalid(e.to_string()))?;
                        let before = self.present(before);
                        self.sel.matches(&before)
                    }
                }
            }
        };
        if held {
            self.held.insert(key.clone());
        } else {
            self.held.remove(key);
        }
        Ok(())
    }
}

fn gone_event(compacted: i64) -> Bytes {
    let status =
        ApiError::gone(format!("too old resource version: the oldest still available is {}", compacted + 1)).status();
    watch_event("ERROR", status)
}

// ---------------------------------------------------------------------------------------
// Writes

/// What a write does to the stored object.
pub(super) enum Change {
    Create(Value),
    Replace(Value),
    Merge(Value),
    Strategic(Value),
    JsonPatch(Value),
    Apply(Value),
}

async fn create(c: &Ctx<'_>, headers: &HeaderMap, body: &Bytes) -> ApiResult<Response> {
    if c.status_sub {
        return Err(ApiError::method_not_allowed("create the object itself, then write its status"));
    }
    let mut obj = parse_body(headers, body)?;
    let name = match obj["metadata"]["name"].as_str().filter(|n| !n.is_empty()) {
        Some(n) => n.to_string(),
        None => match obj["metadata"]["generateName"].as_str() {
            Some(prefix) => {
                let name = format!("{prefix}{}", &uuid::Uuid::new_v4().simple().to_string()[..5]);
                obj["metadata"]["name"] = Value::String(name.clone());
                name
            }
            None => return Err(ApiError::bad_request("metadata.name is required (or metadata.generateName)")),
        },
    };
    let (obj, warnings) = if c.rt.group == kairon_model::GROUP && c.rt.plural == "machineclaims" && !c.params.dry_run {
        super::bind::create_claim(c, &name, obj).await?
    } else {
        write(c, &name, Change::Create(obj)).await?
    };
    Ok(c.respond(StatusCode::CREATED, obj, &warnings, headers))
}

async fn update(c: &Ctx<'_>, name: &str, headers: &HeaderMap, body: &Bytes) -> ApiResult<Response> {
    let obj = parse_body(headers, body)?;
    let (obj, warnings) = write(c, name, Change::Replace(obj)).await?;
    Ok(c.respond(StatusCode::OK, obj, &warnings, headers))
}

/// Logs who asked what, in RBAC's words (`tests/tests/rbac.rs` compares each component's calls
/// with its ClusterRole in deploy/kustomize).
fn log_request(id: &Identity, verb: &str, rt: &ResourceType, subresource: Option<&str>, namespace: Option<&str>) {
    tracing::debug!(
        target: "kairon_api::requests",
        sub = %id.sub,
        role = ?id.role,
        verb,
        group = rt.group,
        resource = rt.plural,
        subresource = subresource.unwrap_or(""),
        namespace = namespace.unwrap_or(""),
        "kubernetes request"
    );
}

async fn patch_object(c: &Ctx<'_>, name: &str, headers: &HeaderMap, body: &Bytes) -> ApiResult<Response> {
    let ct =
        headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").split(';').next().unwrap_or("").trim();
    let change = match ct {
        "application/merge-patch+json" => Change::Merge(parse_body(headers, body)?),
        "application/apply-patch+yaml" | "application/apply-patch+json" => {
            if c.params.field_manager.is_none() {
                return Err(ApiError::bad_request("server-side apply needs a fieldManager query parameter"));
            }
            let mut h = headers.clone();
            h.insert("content-type", HeaderValue::from_static("application/yaml"));
            Change::Apply(parse_body(&h, body)?)
        }
        "application/json-patch+json" => {
            let v: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?;
            let max = c.st.limits.max_patch_operations;
            if let Some(ops) = v.as_array()
                && ops.len() > max
            {
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "RequestEntityTooLarge",
                    format!(
                        "this JSON patch has {} operations, more than the {max} one patch may have: split it into \
                         several patches, or raise --max-patch-operations (KAIRON_MAX_PATCH_OPERATIONS)",
                        ops.len()
                    ),
                ));
            }
            Change::JsonPatch(v)
        }
        "application/strategic-merge-patch+json" if c.rt.strategic_merge => {
            Change::Strategic(parse_body(headers, body)?)
        }
        "application/strategic-merge-patch+json" => {
            return Err(ApiError::unsupported_media(format!(
                "strategic merge patch is not supported for {}: use a merge patch (--type merge) or a JSON patch",
                c.rt.qualified().resource_group()
            )));
        }
        other => {
            return Err(ApiError::unsupported_media(format!(
                "unsupported patch type {other:?}: use application/merge-patch+json, application/json-patch+json or application/apply-patch+yaml"
            )));
        }
    };
    let (obj, warnings) = write(c, name, change).await?;
    Ok(c.respond(StatusCode::OK, obj, &warnings, headers))
}

/// A patch may not grow an object past `--max-patched-object-bytes`.
fn check_patched_size(c: &Ctx<'_>, new: &Value) -> ApiResult<()> {
    let max = c.st.limits.max_patched_object_bytes;
    let size = serde_json::to_vec(new).map(|v| v.len()).unwrap_or(usize::MAX);
    if size > max {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            format!(
                "the patched object would be {size} bytes, more than the {} an object may grow to by a patch: \
                 keep large data out of the object (e.g. in a file in the guest), or raise \
                 --max-patched-object-bytes (KAIRON_MAX_PATCHED_OBJECT_BYTES)",
                crate::limits::human_bytes(max as u64)
            ),
        ));
    }
    Ok(())
}

/// The part of an object that is neither metadata nor status: a change to it bumps generation.
fn spec_part(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        for k in ["metadata", "status", "apiVersion", "kind"] {
            m.remove(k);
        }
    }
    v
}

/// A write computed and admitted against what is stored now, not yet stored.
pub(super) struct Planned {
    /// What was stored when it was computed (None: a create).
    pub stored: Option<Value>,
    /// The object to store.
    pub new: Value,
    /// The resourceVersion the store must still hold for `new` to replace it.
    pub precondition: Option<i64>,
    pub warnings: Vec<String>,
}

/// The stored object a change applies to, read no fresher than the change needs (each read at
/// the latest revision costs a query): a create reads what the cache holds, and only an object
/// found there is confirmed at the latest (the store's insert decides the rest); a change that
/// names the resourceVersion it read needs the cache at that revision (its precondition decides
/// whether it is still the latest); anything else reads the latest.
/// A retry after a conflict (`latest`) reads the latest.
async fn read_for(c: &Ctx<'_>, name: &str, change: &Change, latest: bool) -> ApiResult<Option<Value>> {
    let named_rv = match change {
        Change::Replace(b) | Change::Merge(b) | Change::Strategic(b) => rv_of(b).filter(|&rv| rv > 0),
        Change::Create(_) | Change::JsonPatch(_) | Change::Apply(_) => None,
    };
    let fresh = match (change, named_rv) {
        _ if latest => Freshness::Latest,
        (Change::Create(_), _) if !c.params.dry_run => Freshness::Any,
        (_, Some(rv)) => Freshness::AtLeast(rv),
        _ => Freshness::Latest,
    };
    let stored = c.st.store.get_with(c.key(name), fresh).await?;
    if stored.is_some() && fresh == Freshness::Any {
        return Ok(c.st.store.get(c.key(name)).await?);
    }
    Ok(stored)
}

/// Computes `change` on the stored object and admits the result: everything a write does but
/// storing it.
pub(super) async fn plan(c: &Ctx<'_>, name: &str, change: &Change) -> ApiResult<Planned> {
    plan_at(c, name, change, false).await
}

/// [`plan`], reading the latest when `latest` (a retry after a conflict).
async fn plan_at(c: &Ctx<'_>, name: &str, change: &Change, latest: bool) -> ApiResult<Planned> {
    let q = c.rt.qualified();
    let manager = c.params.field_manager.clone().unwrap_or_else(|| "unknown".to_string());
    let sub = c.status_sub.then_some("status");
    let stored = read_for(c, name, change, latest).await?;
    // A namespace nobody created reads as Active (`namespace_object`); kubectl apply, edit
    // and patch change what they read, so the change applies to that and stores it.
    let live = match (&stored, &change) {
        (None, Change::Replace(_) | Change::Merge(_) | Change::Strategic(_) | Change::JsonPatch(_))
            if c.rt.view == View::Namespaces =>
        {
            Some(namespace_object(c, name).await?)
        }
        // Core Events are stored as events.k8s.io Events: a core patch applies to the core view.
        (Some(o), Change::Replace(_) | Change::Merge(_) | Change::Strategic(_) | Change::JsonPatch(_))
            if c.rt.view == View::CoreEvents =>
        {
            Some(events::to_core(o.clone()))
        }
        _ => stored.clone(),
    };
    let now = now_rfc3339();
    let (mut new, precondition) = match (&change, &live) {
        (Change::Create(_), Some(_)) => return Err(ApiError::already_exists(&q, name)),
        (Change::Create(body), None) => {
            let mut new = body.clone();
            patch::record_update(None, &mut new, &manager, &now, sub);
            (new, None)
        }
        (Change::Apply(body), live) => {
            if live.is_none() {
                // An apply that creates is authorized as a create too, as Kubernetes' RBAC does.
                log_request(c.id, "create", c.rt, None, Some(c.ns.as_str()).filter(|n| !n.is_empty()));
            }
            let new = patch::server_side_apply(live.as_ref(), body, &manager, c.params.force, &now, sub).map_err(
                |e| match e {
                    patch::ApplyError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "Conflict", m),
                    patch::ApplyError::Invalid(m) => ApiError::bad_request(m),
                },
            )?;
            (new, live.as_ref().and_then(rv_of))
        }
        (_, None) => return Err(ApiError::not_found(&q, name)),
        (Change::Replace(body), Some(live)) => {
            let mut new = body.clone();
            if let Some(v) = new["metadata"]["resourceVersion"].as_str()
                && !v.is_empty()
                && rv_of(&new).is_none()
            {
                return Err(ApiError::bad_request(format!(
                    "metadata.resourceVersion {v:?} is not a resourceVersion: send the one a read answered, or none"
                )));
            }
            let precondition = match rv_of(&new) {
                Some(rv) if Some(rv) != rv_of(live) => return Err(ApiError::stale(&q, name)),
                Some(rv) => Some(rv),
                None => rv_of(live),
            };
            patch::record_update(Some(live), &mut new, &manager, &now, sub);
            (new, precondition)
        }
        (Change::Merge(p) | Change::Strategic(p), Some(live)) => {
            let mut new = live.clone();
            if let Change::Strategic(_) = change {
                patch::strategic_merge_patch(&mut new, p)
                    .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", e))?;
            } else {
                patch::merge_patch(&mut new, p);
            }
            if let Some(rv) = rv_of(p)
                && Some(rv) != rv_of(live)
            {
                return Err(ApiError::stale(&q, name));
            }
            patch::record_update(Some(live), &mut new, &manager, &now, sub);
            (new, rv_of(live))
        }
        (Change::JsonPatch(p), Some(live)) => {
            let mut new = live.clone();
            patch::json_patch(&mut new, p)
                .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", e))?;
            patch::record_update(Some(live), &mut new, &manager, &now, sub);
            (new, rv_of(live))
        }
    };
    if matches!(change, Change::Merge(_) | Change::Strategic(_) | Change::JsonPatch(_) | Change::Apply(_)) {
        check_patched_size(c, &new)?;
    }
    let warnings = prepare(c, name, &mut new, stored.as_ref(), &now)?;
    if c.id.role == crate::auth::Role::Node && c.rt.plural == "events" {
        node_event(c, &new).await?;
    }
    Ok(Planned { stored, new, precondition, warnings })
}

/// A node agent's Event must be about a Machine on its node ([`guard::check_node_event`]).
async fn node_event(c: &Ctx<'_>, event: &Value) -> ApiResult<()> {
    let machine = match guard::event_machine(event) {
        Some((namespace, name)) => {
            let key =
                ObjectRef { group: kairon_model::GROUP, resource: "machines", namespace: &namespace, name: &name };
            c.st.store.get(key).await?
        }
        None => None,
    };
    guard::check_node_event(c.id, event, machine.as_ref()).map_err(ApiError::forbidden)
}

/// Status and Events are observations their writers make again (a node agent reports a phase
/// at its next reconcile, a controller its conditions): their commits do not wait for the WAL
/// flush, so they do not hold every other writer behind the revision counter for an fsync
/// (a claim and its pool's replacement made ~27 such writes, each holding it ~2 ms). Every
/// write of what someone asked for (spec, metadata, a claim's binding) is flushed.
fn durability(c: &Ctx<'_>) -> Durability {
    if c.status_sub || c.rt.plural == "events" { Durability::Relaxed } else { Durability::Flushed }
}

/// Applies `change` with optimistic concurrency: read, compute, admit, store; a concurrent
/// write makes a patch retry, and an update that named a resourceVersion fail with 409.
pub(super) async fn write(c: &Ctx<'_>, name: &str, change: Change) -> ApiResult<(Value, Vec<String>)> {
    let q = c.rt.qualified();
    for attempt in 0..MAX_RETRIES {
        let Planned { stored, new, precondition, warnings } = plan_at(c, name, &change, attempt > 0).await?;
        let guard = match (c.rt.group == kairon_model::GROUP && !c.status_sub, c.rt.plural) {
            (true, "machines") => super::quota::guard(&c.ns, name, stored.as_ref(), &new),
            (true, "kairontemplates") if stored.is_none() => Some(super::quota::template_guard(&c.ns)),
            _ => None,
        };
        if c.params.dry_run {
            // A dry run answers what the write would: a quota's refusal too.
            if let Some(guard) = guard {
                c.st.store.judge(guard).await.map_err(|e| ApiError::from_store(e, &q, name))?;
            }
            return Ok((new, warnings));
        }
        // A write that changes nothing is not stored, as Kubernetes does: no new revision, so
        // no watcher (a controller writing back what it read) reacts to its own echo. Only if
        // what it changes nothing of is still the latest (the read may have been older, for a
        // write naming its resourceVersion): else the store's precondition answers.
        if let Some(old) = &stored
            && precondition.is_none_or(|p| rv_of(old) == Some(p))
            && unchanged(old, &new)
        {
            let latest = c.st.store.get(c.key(name)).await.map_err(|e| ApiError::from_store(e, &q, name))?;
            if latest.as_ref().and_then(rv_of) == rv_of(old) {
                return Ok((old.clone(), warnings));
            }
        }
        let durability = durability(c);
        let one = match &stored {
            None => Write::Create(c.key(name), new),
            Some(_) => Write::Update(c.key(name), new, precondition),
        };
        let result = c.st.store.write_all_guarded(vec![one], durability, guard).await;
        let result = result.map(|mut stored| stored.pop().unwrap_or_default()).map_err(|e| e.error);
        match result {
            Ok(stored) => {
                // The last finalizer removed from an object being deleted: now it goes.
                let finalizers_empty = stored["metadata"]["finalizers"].as_array().is_none_or(Vec::is_empty);
                if !stored["metadata"]["deletionTimestamp"].is_null() && finalizers_empty {
                    return match c.st.store.delete(c.key(name), rv_of(&stored)).await {
                        Ok(gone) => {
                            collect_dependents(c.st, &gone);
                            Ok((gone, warnings))
                        }
                        Err(StoreError::Conflict { .. }) => continue,
                        Err(e) => Err(ApiError::from_store(e, &q, name)),
                    };
                }
                return Ok((stored, warnings));
            }
            Err(StoreError::Conflict { .. }) if !matches!(change, Change::Replace(ref b) if rv_of(b).is_some()) => {
                continue;
            }
            // Someone else stored it first (an apply, or a write to an implicit namespace).
            Err(StoreError::AlreadyExists) if !matches!(change, Change::Create(_)) => continue,
            Err(e) => return Err(ApiError::from_store(e, &q, name)),
        }
    }
    Err(ApiError::conflict(&q, name, "too many concurrent writes; try again"))
}

/// Whether `new` stores what `old` holds: equal but for the resourceVersion and the times in
/// managedFields (each write stamps its manager's entry, which alone changes nothing).
fn unchanged(old: &Value, new: &Value) -> bool {
    // Compared in place, not on copies: this runs on every update.
    let managers = |o: &Value, n: &Value| match (o.as_array(), n.as_array()) {
        (Some(o), Some(n)) => {
            o.len() == n.len() && o.iter().zip(n).all(|(o, n)| same_except(o, n, &["time"], |_, _, _| None))
        }
        _ => o == n,
    };
    let metadata = |o: &Value, n: &Value| {
        same_except(o, n, &["resourceVersion"], |k, o, n| (k == "managedFields").then(|| managers(o, n)))
    };
    same_except(old, new, &[], |k, o, n| (k == "metadata").then(|| metadata(o, n)))
}

/// Whether two objects hold the same keys, but for `ignore`, with equal values; `special`
/// compares a key's two values where it returns `Some`. Values that are not objects compare as is.
fn same_except(a: &Value, b: &Value, ignore: &[&str], special: impl Fn(&str, &Value, &Value) -> Option<bool>) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else { return a == b };
    let counted = |m: &serde_json::Map<String, Value>| m.keys().filter(|k| !ignore.contains(&k.as_str())).count();
    counted(a) == counted(b)
        && a.iter().filter(|(k, _)| !ignore.contains(&k.as_str())).all(|(k, av)| match b.get(k) {
            None => false,
            Some(bv) => special(k, av, bv).unwrap_or_else(|| av == bv),
        })
}

#[cfg(test)]
mod unchanged_tests {
    use super::unchanged;
    use serde_json::json;

    #[test]
    fn only_the_version_and_manager_times_may_differ() {
        let obj = |rv: &str, time: &str, x: i64| {
            json!({"metadata": {"name": "a", "resourceVersion": rv, "labels": {"k": "v"},
                                "managedFields": [{"manager": "m", "time": time, "fieldsV1": {"f:x": {}}}]},
                   "spec": {"x": x}})
        };
        assert!(unchanged(&obj("1", "t1", 1), &obj("2", "t2", 1)));
        assert!(!unchanged(&obj("1", "t1", 1), &obj("1", "t1", 2)), "the spec changed");
        let mut labelled = obj("1", "t1", 1);
        labelled["metadata"]["labels"]["k"] = json!("w");
        assert!(!unchanged(&obj("1", "t1", 1), &labelled), "a label changed");
        let mut more = obj("1", "t1", 1);
        more["status"] = json!({});
        assert!(!unchanged(&obj("1", "t1", 1), &more), "a key on one side only");
        let mut manager = obj("1", "t1", 1);
        manager["metadata"]["managedFields"][0]["manager"] = json!("other");
        assert!(!unchanged(&obj("1", "t1", 1), &manager), "another manager");
        let mut no_rv = obj("1", "t1", 1);
        no_rv["metadata"].as_object_mut().unwrap().remove("resourceVersion");
        assert!(unchanged(&obj("1", "t1", 1), &no_rv), "a version on one side only is still the version");
    }
}

/// Server-owned metadata, the status subresource split, and admission.
fn prepare(c: &Ctx<'_>, name: &str, new: &mut Value, live: Option<&Value>, now: &str) -> ApiResult<Vec<String>> {
    let q = c.rt.qualified();
    if kairon_db::holds_nul(new) {
        return Err(ApiError::bad_request(kairon_db::NUL_REFUSAL));
    }
    if !new["metadata"].is_object() {
        new["metadata"] = json!({});
    }
    match new["metadata"]["name"].as_str() {
        Some(n) if n != name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        _ => new["metadata"]["name"] = Value::String(name.to_string()),
    }
    let name_ok = if c.rt.group.is_empty() || c.rt.group.ends_with(".k8s.io") {
        kairon_model::validate::is_dns_subdomain(name)
    } else {
        kairon_model::validate::is_dns_label(name)
    };
    if !name_ok {
        let e = kairon_model::validate::FieldError {
            field: "metadata.name".into(),
            kind: kairon_model::validate::ErrorType::Invalid,
            value: Some(format!("{name:?}")),
            detail: "must be a lowercase DNS label: a-z, 0-9 and '-', starting and ending with a letter or digit"
                .into(),
        };
        return Err(ApiError::invalid(&q, name, &[e]));
    }
    if c.rt.namespaced {
        match new["metadata"]["namespace"].as_str() {
            Some(ns) if !ns.is_empty() && ns != c.ns => {
                return Err(ApiError::bad_request(format!(
                    "the namespace of the object ({ns}) does not match the namespace on the request ({})",
                    c.ns
                )));
            }
            _ => new["metadata"]["namespace"] = Value::String(c.ns.clone()),
        }
    } else if let Some(m) = new["metadata"].as_object_mut() {
        m.remove("namespace");
    }
    if c.rt.view != View::CoreEvents {
        let want = c.rt.kind;
        if let Some(k) = new["kind"].as_str()
            && k != want
        {
            return Err(ApiError::bad_request(format!("the body is a {k}, but this endpoint takes {want}")));
        }
        if let Some(av) = new["apiVersion"].as_str()
            && !c.rt.versions.iter().any(|v| c.rt.api_version(v) == av)
        {
            return Err(ApiError::bad_request(format!(
                "apiVersion {av:?} is not served for {want}: use {}",
                c.rt.api_version(c.rt.storage_version())
            )));
        }
        new["apiVersion"] = Value::String(c.rt.api_version(c.rt.storage_version()));
        new["kind"] = Value::String(want.to_string());
    }
    let meta = new["metadata"].as_object_mut().ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
    meta.remove("resourceVersion");
    meta.remove("selfLink");
    match live {
        None => {
            meta.insert("uid".into(), Value::String(uuid::Uuid::new_v4().to_string()));
            meta.insert("creationTimestamp".into(), Value::String(now.to_string()));
            meta.insert("generation".into(), json!(1));
            meta.remove("deletionTimestamp");
            meta.remove("deletionGracePeriodSeconds");
            if c.rt.status_subresource
                && let Some(o) = new.as_object_mut()
            {
                o.remove("status");
            }
        }
        Some(live) => {
            for k in ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"] {
                match live["metadata"].get(k) {
                    Some(v) => meta.insert(k.into(), v.clone()),
                    None => meta.remove(k),
                };
            }
            if c.rt.status_subresource {
                if c.status_sub {
                    // A status write changes status only.
                    let status = new.get("status").cloned();
                    let managed = new["metadata"]["managedFields"].clone();
                    *new = live.clone();
                    match status {
                        Some(s) => new["status"] = s,
                        None => {
                            new.as_object_mut().map(|o| o.remove("status"));
                        }
                    }
                    new["metadata"]["managedFields"] = managed;
                } else {
                    match live.get("status") {
                        Some(s) => new["status"] = s.clone(),
                        None => {
                            new.as_object_mut().map(|o| o.remove("status"));
                        }
                    }
                }
            }
            if !live["metadata"]["deletionTimestamp"].is_null() {
                let before: HashSet<&str> =
                    live["metadata"]["finalizers"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                let added = new["metadata"]["finalizers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .any(|f| !before.contains(f));
                if added {
                    return Err(ApiError::forbidden(format!(
                        "{} \"{name}\" is being deleted: finalizers may be removed, not added",
                        q.resource_group()
                    )));
                }
            }
            if spec_part(new) != spec_part(live) {
                let g = live["metadata"]["generation"].as_i64().unwrap_or(1);
                new["metadata"]["generation"] = json!(g + 1);
            }
        }
    }
    // Who may write what: one check for every write path, on the object about to be stored.
    guard::check_write(c.id, kind_of(c.rt), live, new).map_err(ApiError::forbidden)?;
    let ctx = AdmitCtx { opts: c.st.validation, field_validation: c.params.field_validation };
    let mut warnings = (c.rt.admit)(new, live, &ctx).map_err(|e| match e {
        AdmitError::Invalid(errs) => ApiError::invalid(&q, name, &errs),
        AdmitError::BadRequest(m) => ApiError::bad_request(m),
    })?;
    if c.rt.view == View::Namespaces {
        warnings.clear();
    }
    Ok(warnings)
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct DeleteOptions {
    #[serde(default)]
    preconditions: Option<Preconditions>,
    #[serde(default)]
    dry_run: Vec<String>,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Preconditions {
    resource_version: Option<String>,
    uid: Option<String>,
}

async fn delete(c: &Ctx<'_>, name: &str, body: &Bytes) -> ApiResult<Response> {
    let q = c.rt.qualified();
    let opts: DeleteOptions = if body.is_empty() {
        DeleteOptions::default()
    } else {
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
    };
    let dry_run = c.params.dry_run || opts.dry_run.iter().any(|d| d == "All");
    for _ in 0..MAX_RETRIES {
        let live = c.st.store.get(c.key(name)).await?.ok_or_else(|| ApiError::not_found(&q, name))?;
        if let Some(p) = &opts.preconditions {
            if p.uid.as_ref().is_some_and(|u| Some(u.as_str()) != live["metadata"]["uid"].as_str()) {
                return Err(ApiError::conflict(&q, name, "the UID in the precondition does not match the object's"));
            }
            if p.resource_version
                .as_ref()
                .is_some_and(|v| Some(v.as_str()) != live["metadata"]["resourceVersion"].as_str())
            {
                return Err(ApiError::stale(&q, name));
            }
        }
        let has_finalizers = live["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
        if has_finalizers {
            if !live["metadata"]["deletionTimestamp"].is_null() {
                return Ok((StatusCode::OK, axum::Json(c.present(live))).into_response());
            }
            let mut marked = live.clone();
            marked["metadata"]["deletionTimestamp"] = Value::String(now_rfc3339());
            marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            if dry_run {
                return Ok((StatusCode::OK, axum::Json(c.present(marked))).into_response());
            }
            match c.st.store.update(c.key(name), marked, rv_of(&live)).await {
                Ok(o) => return Ok((StatusCode::OK, axum::Json(c.present(o))).into_response()),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(ApiError::from_store(e, &q, name)),
            }
        }
        if dry_run {
            return Ok((StatusCode::OK, axum::Json(c.present(live))).into_response());
        }
        match c.st.store.delete(c.key(name), rv_of(&live)).await {
            Ok(o) => {
                collect_dependents(c.st, &o);
                return Ok((StatusCode::OK, axum::Json(c.present(o))).into_response());
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(ApiError::from_store(e, &q, name)),
        }
    }
    Err(ApiError::conflict(&q, name, "too many concurrent writes; try again"))
}

async fn delete_collection(c: &Ctx<'_>) -> ApiResult<Response> {
    let sel = Selection::parse(&c.params)?;
    let (group, resource) = c.rt.store_key();
    let ns = (!c.ns.is_empty()).then_some(c.ns.as_str());
    let page = c.st.store.list(group, resource, ns, None, None).await?;
    let mut deleted = Vec::new();
    for obj in page.items.into_iter().filter(|o| visible(c, o)).filter(|o| sel.matches(&c.present(o.clone()))) {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let sub = Ctx {
            st: c.st,
            rt: c.rt,
            version: c.version.clone(),
            ns: obj["metadata"]["namespace"].as_str().unwrap_or_default().to_string(),
            id: c.id,
            params: Params { dry_run: c.params.dry_run, ..Default::default() },
            status_sub: false,
            in_process: c.in_process,
        };
        match delete(&sub, &name, &Bytes::new()).await {
            Ok(_) => deleted.push(c.present(obj)),
            Err(e) if e.code == StatusCode::NOT_FOUND => {}
            Err(e) => return Err(e),
        }
    }
    Ok(axum::Json(json!({
        "apiVersion": c.rt.api_version(&c.version), "kind": format!("{}List", c.rt.kind),
        "metadata": {"resourceVersion": page.resource_version.to_string()}, "items": deleted,
    }))
    .into_response())
}

/// Garbage collection, as Kubernetes does in the background: objects whose ownerReferences
/// name a deleted object are deleted too (finalizers honoured), and so on down the chain. A
/// MachinePool's members go with it.
fn collect_dependents(st: &AppState, gone: &Value) {
    let (Some(ns), Some(uid)) = (gone["metadata"]["namespace"].as_str(), gone["metadata"]["uid"].as_str()) else {
        return;
    };
    let (st, ns, uid) = (st.clone(), ns.to_string(), uid.to_string());
    tokio::spawn(async move { delete_dependents(st, ns, uid).await });
}

fn delete_dependents(
    st: AppState,
    ns: String,
    uid: String,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(async move {
        let Ok(dependents) = st.store.owned_by(&ns, &uid).await else { return };
        for (group, resource, mut obj) in dependents {
            // Only what the API serves as itself (a view such as core Events shares its store).
            if !st
                .registry
                .types
                .iter()
                .any(|t| t.namespaced && t.view == View::Native && t.store_key() == (&group, &resource))
            {
                continue;
            }
            let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let key = ObjectRef { group: &group, resource: &resource, namespace: &ns, name: &name };
            let rv = rv_of(&obj);
            if obj["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty()) {
                if obj["metadata"]["deletionTimestamp"].is_null() {
                    obj["metadata"]["deletionTimestamp"] = Value::String(now_rfc3339());
                    let _ = st.store.update(key, obj, rv).await;
                }
            } else if let Ok(gone) = st.store.delete(key, rv).await
                && let Some(child) = gone["metadata"]["uid"].as_str()
            {
                delete_dependents(st.clone(), ns.clone(), child.to_string()).await;
            }
        }
    })
}
