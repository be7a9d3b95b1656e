//! Machines, MachinePools and MachineClaims as the Kubernetes objects: list, get, create,
//! replace, delete, a wait for a phase or condition, and an object's Events. Each checks the
//! caller (role, namespace, and `crate::guard`'s rules on what is written) before kube-rs
//! writes with the server's rights.

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use kairon_model::{Machine, MachineClaim, MachinePool};

use super::{Error, Machines, Reason, Result, allowed};
use crate::auth::{self, Identity, Verb};
use crate::guard;

/// Object names are DNS labels or subdomains: anything else cannot exist, so it is a 400.
pub fn check_name(what: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    if ok {
        Ok(())
    } else {
        Err(Error::bad_request(format!(
            "{what} {name:?} is not a valid name: use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
        )))
    }
}

/// A namespace is a DNS label (at most 63 characters, no dots), as the Kubernetes API has it.
pub fn check_namespace(ns: &str) -> Result<()> {
    check_name("namespace", ns)?;
    if ns.len() > 63 || ns.contains('.') {
        return Err(Error::bad_request(format!(
            "namespace {ns:?} is not a valid namespace: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"
        )));
    }
    Ok(())
}

/// The watches of `apis` merged into one stream of NDJSON lines (see [`Machines::watch_all`]).
pub async fn watch_apis<K>(
    apis: Vec<Api<K>>,
    labels: Option<&str>,
    resource_version: Option<&str>,
    timeout: Duration,
) -> Result<futures::stream::BoxStream<'static, bytes::Bytes>>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned + Send + 'static,
{
    use futures::StreamExt;
    let rv = match resource_version {
        None | Some("") => "0",
        Some(v) if v.bytes().all(|b| b.is_ascii_digit()) && v.len() <= 19 => v,
        Some(v) => {
            return Err(Error::bad_request(format!(
                "resourceVersion={v:?} is not a resource version: give the metadata.resourceVersion of an object \
                 the watch sent, or none to start with every object"
            )));
        }
    };
    let secs = u32::try_from(timeout.as_secs().clamp(1, 290)).unwrap_or(290);
    let mut wp = kube::api::WatchParams::default().timeout(secs);
    if let Some(sel) = labels {
        wp = wp.labels(sel);
    }
    let mut streams = Vec::new();
    for api in apis {
        let events = api.watch(&wp, rv).await?;
        streams.push(events.map(|ev| watch_line(&ev)).boxed());
    }
    Ok(futures::stream::select_all(streams).boxed())
}

/// One line of a REST watch.
fn watch_line<K: Serialize>(ev: &kube::Result<kube::api::WatchEvent<K>>) -> bytes::Bytes {
    use kube::api::WatchEvent as W;
    let (kind, object) = match ev {
        Ok(W::Added(o)) => ("ADDED", serde_json::to_value(o)),
        Ok(W::Modified(o)) => ("MODIFIED", serde_json::to_value(o)),
        Ok(W::Deleted(o)) => ("DELETED", serde_json::to_value(o)),
        Ok(W::Bookmark(b)) => ("BOOKMARK", serde_json::to_value(b)),
        Ok(W::Error(status)) => ("ERROR", serde_json::to_value(status)),
        Err(e) => {
            ("ERROR", Ok(serde_json::json!({"reason": "InternalError", "message": format!("watch failed: {e}")})))
        }
    };
    let object = object.unwrap_or_else(|e| serde_json::json!({"reason": "InternalError", "message": e.to_string()}));
    let mut line = serde_json::to_vec(&serde_json::json!({"type": kind, "object": object})).unwrap_or_default();
    line.push(b'\n');
    bytes::Bytes::from(line)
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
impl Mirrored for kairon_model::KaironTemplate {}

/// A list answer: `{items: [...]}`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct List<K> {
    pub items: Vec<K>,
}

/// An object's Events, oldest first (documented as `rest::schema::EventList`).
#[derive(Serialize, Debug, Clone)]
pub struct EventList {
    pub items: Vec<Event>,
}

/// What a wait waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitFor {
    /// `status.phase` is this.
    Phase(String),
    /// The condition of this type has status `True`.
    Condition(String),
    /// The object is gone.
    Deleted,
}

impl WaitFor {
    /// From the wait query's three fields, of which exactly one is given.
    pub fn of(phase: Option<String>, condition: Option<String>, deleted: Option<bool>) -> Result<WaitFor> {
        match (phase, condition, deleted) {
            (Some(p), None, None | Some(false)) => Ok(WaitFor::Phase(p)),
            (None, Some(c), None | Some(false)) => Ok(WaitFor::Condition(c)),
            (None, None, Some(true)) => Ok(WaitFor::Deleted),
            _ => Err(Error::bad_request("give exactly one of phase=, condition= or deleted=true")),
        }
    }

    fn goal(&self) -> String {
        match self {
            WaitFor::Phase(p) => format!("phase {p}"),
            WaitFor::Condition(c) => format!("condition {c}=True"),
            WaitFor::Deleted => "deletion".into(),
        }
    }

    fn reached(&self, obj: Option<&Value>) -> bool {
        match (self, obj) {
            (WaitFor::Deleted, None) => true,
            (_, None) | (WaitFor::Deleted, Some(_)) => false,
            (WaitFor::Phase(p), Some(v)) => phase_of(v) == Some(p.as_str()),
            (WaitFor::Condition(c), Some(v)) => condition_true(v, c),
        }
    }
}

fn phase_of(v: &Value) -> Option<&str> {
    v.pointer("/status/phase").and_then(Value::as_str)
}

fn condition_true(v: &Value, ty: &str) -> bool {
    v.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"].as_str() == Some(ty) && c["status"].as_str() == Some("True")))
}

/// Turns a request body into the kind, filling in apiVersion, kind and the path's namespace.
fn decode<K: Mirrored>(mut body: Value, ns: &str, name: Option<&str>) -> Result<K> {
    let obj = body
        .as_object_mut()
        .ok_or_else(|| Error::bad_request(format!("the body must be a {} object", K::kind(&()))))?;
    obj.entry("apiVersion").or_insert_with(|| K::api_version(&()).into());
    if obj.get("apiVersion").and_then(Value::as_str) != Some(K::api_version(&()).as_ref()) {
        return Err(Error::bad_request(format!("apiVersion must be {} on this route", K::api_version(&()))));
    }
    obj.entry("kind").or_insert_with(|| K::kind(&()).into());
    if obj.get("kind").and_then(Value::as_str) != Some(K::kind(&()).as_ref()) {
        return Err(Error::bad_request(format!("kind must be {} on this route", K::kind(&()))));
    }
    let meta = obj.entry("metadata").or_insert_with(|| serde_json::json!({}));
    let meta = meta.as_object_mut().ok_or_else(|| Error::bad_request("metadata must be an object"))?;
    match meta.get("namespace").and_then(Value::as_str) {
        Some(n) if n != ns => {
            return Err(Error::bad_request(format!(
                "metadata.namespace {n:?} does not match the namespace {ns:?} in the path"
            )));
        }
        _ => {
            meta.insert("namespace".into(), ns.into());
        }
    }
    if let Some(v) = meta.get("resourceVersion").and_then(Value::as_str)
        && !v.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(Error::bad_request(format!(
            "metadata.resourceVersion {v:?} is not a resourceVersion: send the one a read answered, or none"
        )));
    }
    // A replace names the object it replaces in its body too, as Kubernetes has it.
    if let Some(name) = name {
        match meta.get("name").and_then(Value::as_str) {
            Some(n) if n == name => {}
            Some(n) => {
                return Err(Error::bad_request(format!(
                    "metadata.name {n:?} does not match the name {name:?} in the path"
                )));
            }
            None => {
                return Err(Error::bad_request(format!(
                    "metadata.name is required: send the object as read (GET it), with metadata.name {name:?}"
                )));
            }
        }
    }
    let obj: K = serde_path_to_error::deserialize(&body)
        .map_err(|e| Error::bad_request(format!("invalid {} at {}: {}", K::kind(&()), e.path(), e.inner())))?;
    // serde reads a struct from an array too; the document says object.
    if let Ok(read) = serde_json::to_value(&obj)
        && let Some(at) = crate::rest::body::array_read_as_object(&body, &read, String::new())
    {
        return Err(Error::bad_request(format!("invalid {} at {at}: expected an object, got an array", K::kind(&()))));
    }
    Ok(obj)
}

/// Tenants never write `kairon-system` (`crate::guard::may_request`).
fn may_request<K: Mirrored>(id: &Identity, ns: &str, op: guard::Op) -> Result<()> {
    let plural = K::plural(&());
    let kind = guard::Kind { group: guard::KAIRON_GROUP, plural: &plural, namespaced: true };
    allowed(guard::may_request(id, kind, Some(ns), op))
}

/// Who may write what (`crate::guard`): the same rule as on the Kubernetes-compatible paths,
/// checked here with the caller's identity because the write itself goes out with the server's.
/// `old` is the stored object (None for a create); the status is what the store will keep.
fn check_write<K: Mirrored>(id: &Identity, old: Option<&K>, obj: &K) -> Result<()> {
    let old = old.map(|o| serde_json::to_value(o).unwrap_or_default());
    let mut new = serde_json::to_value(obj).unwrap_or_default();
    guard::keep_stored_status(old.as_ref(), &mut new);
    let plural = K::plural(&());
    let kind = guard::Kind { group: guard::KAIRON_GROUP, plural: &plural, namespaced: true };
    allowed(guard::check_write(id, kind, old.as_ref(), &new))
}

fn post_params(dry_run: bool) -> PostParams {
    PostParams { dry_run, field_manager: Some("kairon-api".into()) }
}

impl Machines {
    pub fn api<K: Mirrored>(&self, ns: &str) -> Api<K> {
        Api::namespaced(self.kube.clone(), ns)
    }

    /// The requests of `K` in `ns`, for writes made by hand ([`for_caller`](Self::for_caller)).
    fn request<K: Mirrored>(ns: &str) -> kube::core::Request {
        kube::core::Request::new(K::url_path(&(), Some(ns)))
    }

    /// A write made for `id`: on a cluster, naming it (`crate::requester`), so the cluster's
    /// audit log and Kairon's webhook see the caller, not only the api.
    fn for_caller(&self, req: http::Request<Vec<u8>>, id: &Identity) -> http::Request<Vec<u8>> {
        crate::requester::name(req, self.own_user.as_deref(), id)
    }

    /// An object the caller may read (404 with the kind and name when it is not there).
    pub async fn get<K: Mirrored>(&self, id: &Identity, ns: &str, name: &str) -> Result<K> {
        check_name("namespace", ns)?;
        check_name("name", name)?;
        allowed(auth::may_access(id, Verb::Read, Some(ns), false))?;
        self.api::<K>(ns)
            .get_opt(name)
            .await?
            .ok_or_else(|| Error::not_found(format!("{} {ns}/{name} not found", K::kind(&()))))
    }

    async fn list_in<K: Mirrored>(&self, ns: Option<&str>, labels: Option<&str>) -> Result<Vec<K>> {
        let mut lp = ListParams::default();
        if let Some(sel) = labels {
            lp = lp.labels(sel);
        }
        let api: Api<K> = match ns {
            Some(ns) => Api::namespaced(self.kube.clone(), ns),
            None => Api::all(self.kube.clone()),
        };
        Ok(api.list(&lp).await?.items)
    }

    /// The objects in every namespace the caller may read.
    pub async fn list_all<K: Mirrored>(&self, id: &Identity, labels: Option<&str>) -> Result<List<K>> {
        if id.all_namespaces() {
            return Ok(List { items: self.list_in(None, labels).await? });
        }
        let mut items = Vec::new();
        for ns in &id.namespaces {
            items.extend(self.list_in::<K>(Some(ns), labels).await?);
        }
        Ok(List { items })
    }

    /// A watch of the objects in every namespace the caller may read, as newline-delimited JSON
    /// lines `{"type": "ADDED"|"MODIFIED"|"DELETED"|"ERROR", "object": …}`: with no
    /// `resource_version`, every object first as ADDED, then each change; from a version, the
    /// changes after it (an ERROR line with a 410 `Status` when it is too old: list again).
    /// It reads through kube-rs, so it is the Kubernetes API's own watch (embedded or a cluster);
    /// the stream ends after `timeout`, and the client resumes from the last version it saw.
    pub async fn watch_all<K: Mirrored + Send + 'static>(
        &self,
        id: &Identity,
        labels: Option<&str>,
        resource_version: Option<&str>,
        timeout: Duration,
    ) -> Result<futures::stream::BoxStream<'static, bytes::Bytes>> {
        let apis: Vec<Api<K>> = if id.all_namespaces() {
            vec![Api::all(self.kube.clone())]
        } else {
            id.namespaces.iter().map(|ns| Api::namespaced(self.kube.clone(), ns)).collect()
        };
        watch_apis(apis, labels, resource_version, timeout).await
    }

    /// The objects in one namespace.
    pub async fn list<K: Mirrored>(&self, id: &Identity, ns: &str, labels: Option<&str>) -> Result<List<K>> {
        check_name("namespace", ns)?;
        allowed(auth::may_access(id, Verb::Read, Some(ns), false))?;
        Ok(List { items: self.list_in(Some(ns), labels).await? })
    }

    /// Creates an object from `body`, which is read only once the caller may write here (so a
    /// caller who may not hears 403, whatever they sent).
    pub async fn create<K: Mirrored>(
        &self,
        id: &Identity,
        ns: &str,
        dry_run: bool,
        body: impl FnOnce() -> Result<Value>,
    ) -> Result<K> {
        check_name("namespace", ns)?;
        allowed(auth::may_access(id, Verb::Write, Some(ns), false))?;
        may_request::<K>(id, ns, guard::Op::Write)?;
        let obj: K = decode(body()?, ns, None)?;
        check_write(id, None, &obj)?;
        let body = serde_json::to_vec(&obj).map_err(kube::Error::SerdeError)?;
        let req = Self::request::<K>(ns).create(&post_params(dry_run), body).map_err(kube::Error::BuildRequest)?;
        Ok(self.kube.request(self.for_caller(req, id)).await?)
    }

    /// Replaces an object with `body` (read as in [`create`](Self::create)).
    pub async fn replace<K: Mirrored>(
        &self,
        id: &Identity,
        ns: &str,
        name: &str,
        dry_run: bool,
        body: impl FnOnce() -> Result<Value>,
    ) -> Result<K> {
        check_name("namespace", ns)?;
        check_name("name", name)?;
        allowed(auth::may_access(id, Verb::Write, Some(ns), false))?;
        may_request::<K>(id, ns, guard::Op::Write)?;
        let obj: K = decode(body()?, ns, Some(name))?;
        let current = self.api::<K>(ns).get_opt(name).await?;
        check_write(id, current.as_ref(), &obj)?;
        let body = serde_json::to_vec(&obj).map_err(kube::Error::SerdeError)?;
        let req =
            Self::request::<K>(ns).replace(name, &post_params(dry_run), body).map_err(kube::Error::BuildRequest)?;
        Ok(self.kube.request(self.for_caller(req, id)).await?)
    }

    /// Deletes an object; answers it as it goes (finalizers run first).
    pub async fn delete<K: Mirrored>(&self, id: &Identity, ns: &str, name: &str, dry_run: bool) -> Result<K> {
        let current: K = self.get(id, ns, name).await?;
        allowed(auth::may_access(id, Verb::Write, Some(ns), false))?;
        may_request::<K>(id, ns, guard::Op::Delete)?;
        let dp = DeleteParams { dry_run, ..Default::default() };
        let req = Self::request::<K>(ns).delete(name, &dp).map_err(kube::Error::BuildRequest)?;
        let deleted = self.kube.request_status::<K>(self.for_caller(req, id)).await?;
        Ok(deleted.left().unwrap_or(current))
    }

    /// Waits until the object reaches `what` (clients need no polling loops), for at most
    /// `timeout`; answers the object (for a deletion, the last one seen). When `stopping` is
    /// cancelled (the server drains, its watches end) the wait cannot finish honestly, so it
    /// never answers and leaves that to the connection's end.
    pub async fn wait<K: Mirrored>(
        &self,
        id: &Identity,
        ns: &str,
        name: &str,
        what: &WaitFor,
        timeout: Duration,
        stopping: &tokio_util::sync::CancellationToken,
    ) -> Result<K> {
        let first: K = match self.get(id, ns, name).await {
            Ok(k) => k,
            // Gone already: the answer is an empty object of the kind, where the kind has one.
            Err(e) if *what == WaitFor::Deleted && e.reason == Reason::NotFound => {
                serde_json::from_value(serde_json::json!({})).map_err(|_| e)?
            }
            Err(e) => return Err(e),
        };
        let reached = |obj: Option<&K>| what.reached(obj.map(|o| serde_json::to_value(o).unwrap_or_default()).as_ref());
        let api = self.api::<K>(ns);
        let watched = tokio::time::timeout(timeout, kube::runtime::wait::await_condition(api.clone(), name, reached));
        let outcome = tokio::select! {
            biased;
            _ = stopping.cancelled() => std::future::pending().await,
            outcome = watched => outcome,
        };
        match outcome {
            Ok(Ok(obj)) => Ok(obj.unwrap_or(first)),
            Ok(Err(e)) => Err(Error::unavailable(format!("watching {} {ns}/{name} failed: {e}", K::kind(&())))),
            Err(_) => {
                let now = api.get_opt(name).await?.map(|o| serde_json::to_value(o).unwrap_or_default());
                let state = match now.as_ref() {
                    None => "it is gone".to_string(),
                    Some(v) => format!("its phase is {}", phase_of(v).unwrap_or("not set yet")),
                };
                Err(Error::new(
                    Reason::Timeout,
                    format!(
                        "waited {}s for {} {ns}/{name} to reach {}; {state}. Wait again, or raise timeoutSeconds",
                        timeout.as_secs(),
                        K::kind(&()),
                        what.goal(),
                    ),
                ))
            }
        }
    }

    /// The Events about an object, oldest first.
    pub async fn events<K: Mirrored>(&self, id: &Identity, ns: &str, name: &str) -> Result<EventList> {
        let obj: K = self.get(id, ns, name).await?;
        let events: Api<Event> = Api::namespaced(self.kube.clone(), ns);
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
        Ok(EventList { items })
    }
}
