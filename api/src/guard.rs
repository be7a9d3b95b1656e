//! Who may write what: the isolation model of `SECURITY.md` ("Tenant against tenant at the
//! API"). Two checks, both pure:
//!
//! - [`may_request`]: before anything is read, whether this identity may use this verb on this
//!   resource type in this namespace at all (tenants never write Leases or `kairon-system`; a
//!   node deletes nothing; a controller writes nothing cluster-scoped).
//! - [`check_write`]: once the object about to be stored is computed, what changed compared to
//!   the stored one (status, the well-known labels and annotations, ownerReferences,
//!   finalizers, `spec.sandbox`) and whether this identity may change it. Every write path of
//!   the Kubernetes-compatible API (POST, PUT, merge and JSON patch, server-side apply, on the
//!   object and on its status) ends in `prepare`, which calls this; the REST API's create and
//!   replace call it too, with the caller's identity, before writing with the server's own.
//!
//! "Write" a key means add, change or remove it compared to the stored object.

use std::collections::BTreeMap;

use serde_json::Value;

use kairon_model::keys::{annotations, finalizers, labels};

use crate::auth::{self, Identity, Role, Verb, role_name};

/// The namespace of Kairon's own objects (the controllers' Lease).
pub const SYSTEM_NAMESPACE: &str = "kairon-system";

pub const KAIRON_GROUP: &str = "kairon.zyvor.dev";
const LEASE_GROUP: &str = "coordination.k8s.io";

/// What a request does, for [`may_request`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    /// Create, update or patch (the object or its status).
    Write,
    Delete,
}

/// The resource type a request is about.
#[derive(Clone, Copy, Debug)]
pub struct Kind<'a> {
    pub group: &'a str,
    pub plural: &'a str,
    pub namespaced: bool,
}

impl Kind<'_> {
    fn is(&self, group: &str, plural: &str) -> bool {
        self.group == group && self.plural == plural
    }
    fn is_event(&self) -> bool {
        self.plural == "events" && (self.group == "events.k8s.io" || self.group.is_empty())
    }
    fn is_lease(&self) -> bool {
        self.group == LEASE_GROUP
    }
}

fn who(id: &Identity) -> String {
    format!("{} is {}", id.sub, if id.legacy { "the legacy shared token" } else { role_name(id.role) })
}

/// The coarse rule of the Kubernetes-compatible paths: may `id` use `op` on `kind` in
/// `namespace` (`None`: cluster-scoped, or a list across namespaces)?
pub fn may_request(id: &Identity, kind: Kind<'_>, namespace: Option<&str>, op: Op) -> Result<(), String> {
    let verb = if op == Op::Read { Verb::Read } else { Verb::Write };
    if kind.is("", "secrets") && matches!(id.role, Role::Node | Role::Controller) {
        // One compromised node would otherwise read every tenant's secrets.
        return Err(format!(
            "{}: node agents and controllers never read Secrets (the api resolves a Machine's spec.secretEnv for the requests it relays)",
            who(id)
        ));
    }
    match id.role {
        Role::Admin if !id.legacy => Ok(()),
        Role::Metrics => Err(crate::auth::metrics_only(&id.sub)),
        Role::Node | Role::Controller if op == Op::Read => Ok(()),
        Role::Controller => {
            if kind.is(KAIRON_GROUP, "kaironquotas") && op == Op::Delete {
                return Err(format!("{}: a controller deletes no KaironQuota (an admin sets them)", who(id)));
            }
            if !kind.namespaced {
                return Err(format!(
                    "{}: a controller writes no cluster-scoped objects ({} need an admin token)",
                    who(id),
                    kind.plural
                ));
            }
            Ok(())
        }
        Role::Node => {
            if op == Op::Delete {
                return Err(format!(
                    "{}: a node agent deletes nothing (it removes its finalizer; the controllers and users delete)",
                    who(id)
                ));
            }
            if kind.is(KAIRON_GROUP, "machines")
                || kind.is(KAIRON_GROUP, "kaironnodes")
                || kind.is(KAIRON_GROUP, "kairontemplates")
                || kind.is_event()
            {
                return Ok(());
            }
            let hint = if kind.is_lease() {
                " (Leases are the controllers' leader election: run `kairon node --scheduler` with a controller token)"
            } else {
                ""
            };
            Err(format!(
                "{}: a node agent writes only Machines' status, Events and its own KaironNode, not {}{hint}",
                who(id),
                kind.plural
            ))
        }
        _ => {
            auth::may_access(id, verb, if kind.namespaced { namespace } else { None }, !kind.namespaced)?;
            if op == Op::Read {
                return Ok(());
            }
            if kind.is_lease() {
                return Err(format!(
                    "Leases (coordination.k8s.io) are written by the controllers and node agents only: {}",
                    who(id)
                ));
            }
            if kind.is(KAIRON_GROUP, "kaironquotas") {
                return Err(format!(
                    "a KaironQuota limits a namespace's tenants, so only an admin sets it: {}; read it (kaironctl get \
                     quota) and ask an admin to change it",
                    who(id)
                ));
            }
            if namespace == Some(SYSTEM_NAMESPACE) {
                return Err(format!(
                    "the namespace {SYSTEM_NAMESPACE} holds Kairon's own objects and is written by admins, controllers \
                     and node agents only: {}; use one of your namespaces ({})",
                    who(id),
                    id.namespaces.join(", ")
                ));
            }
            Ok(())
        }
    }
}

fn map_of<'a>(obj: Option<&'a Value>, pointer: &str) -> BTreeMap<&'a str, &'a Value> {
    obj.and_then(|o| o.pointer(pointer))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v))
        .collect()
}

/// Whether `key` of the map at `pointer` is added, changed or removed.
fn key_changed(old: Option<&Value>, new: &Value, pointer: &str, key: &str) -> bool {
    map_of(old, pointer).get(key) != map_of(Some(new), pointer).get(key)
}

/// Missing, null and empty read the same.
fn normalized(v: Option<&Value>) -> Value {
    match v {
        None | Some(Value::Null) => Value::Null,
        Some(Value::Array(a)) if a.is_empty() => Value::Null,
        Some(Value::Object(o)) if o.is_empty() => Value::Null,
        Some(v) => v.clone(),
    }
}

fn field_changed(old: Option<&Value>, new: &Value, pointer: &str) -> bool {
    normalized(old.and_then(|o| o.pointer(pointer))) != normalized(new.pointer(pointer))
}

fn sandbox_pointer(kind: Kind<'_>) -> Option<&'static str> {
    if kind.is(KAIRON_GROUP, "machines") {
        Some("/spec/sandbox")
    } else if kind.is(KAIRON_GROUP, "machinepools") {
        Some("/spec/template/spec/sandbox")
    } else {
        None
    }
}

/// Where a tenant's Machine may name its image, kernel and initrd, unless `kairon up` /
/// `kairon api` is told otherwise (`--image-dir`). The same default as the runtime's
/// `[vm] image_dirs`; the runtime checks its own list again (and symlinks) on the node.
pub const DEFAULT_IMAGE_DIRS: &[&str] = &["/var/lib/fluxvm/images", "/images"];

static IMAGE_DIRS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Sets the image directories the API knows (once, at start-up).
pub fn set_image_dirs(dirs: Vec<String>) {
    let _ = IMAGE_DIRS.set(dirs.into_iter().map(|d| d.trim_end_matches('/').to_string()).collect());
}

/// The image directories the API knows.
pub fn image_dirs() -> Vec<String> {
    IMAGE_DIRS.get().cloned().unwrap_or_else(|| DEFAULT_IMAGE_DIRS.iter().map(|d| d.to_string()).collect())
}

/// Where a Machine spec lies in an object of `kind`.
fn spec_pointer(kind: Kind<'_>) -> Option<&'static str> {
    if kind.is(KAIRON_GROUP, "machines") {
        Some("/spec")
    } else if kind.is(KAIRON_GROUP, "machinepools") {
        Some("/spec/template/spec")
    } else {
        None
    }
}

/// `path` has no `.`, `..` or empty component (after a leading `/`).
fn plain_components(path: &str) -> bool {
    let rest = path.strip_prefix('/').unwrap_or(path);
    !rest.is_empty() && rest.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

/// Host paths a tenant writes (adds or changes) in a Machine spec: images, kernels and
/// initrds inside the image directories, volume paths without `..`. What an admin wrote and
/// the tenant leaves alone stays.
fn tenant_host_paths(who: &str, kind: Kind<'_>, old: Option<&Value>, new: &Value) -> Result<(), String> {
    let Some(spec) = spec_pointer(kind) else { return Ok(()) };
    let field = |p: &str| format!("{}{p}", spec.trim_start_matches('/')).replace('/', ".");
    let dirs = image_dirs();
    for p in ["/image/path", "/runtime/kernel/path", "/runtime/kernel/initrd"] {
        let pointer = format!("{spec}{p}");
        let Some(path) = new.pointer(&pointer).and_then(Value::as_str) else { continue };
        if old.and_then(|o| o.pointer(&pointer)).and_then(Value::as_str) == Some(path) {
            continue;
        }
        let inside = path.starts_with('/')
            && plain_components(path)
            && dirs.iter().any(|d| path.strip_prefix(d.as_str()).is_some_and(|r| r.starts_with('/') && r.len() > 1));
        if !inside {
            return Err(format!(
                "{} {path:?} is not inside the image directories ({}): a tenant may name only a file there, by a                  path without `.` or `..`; put the image there, or ask an admin ({who})",
                field(p),
                dirs.join(", ")
            ));
        }
    }
    let volumes = |v: Option<&Value>| -> Vec<(String, String)> {
        v.and_then(|v| v.pointer(&format!("{spec}/volumes")))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| Some((v.get("name")?.as_str()?.to_string(), v.get("path")?.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let before = volumes(old);
    for (name, path) in volumes(Some(new)) {
        if before.contains(&(name.clone(), path.clone())) {
            continue;
        }
        if !plain_components(&path) {
            return Err(format!(
                "{}.volumes[{name}].path {path:?} may not contain `.` or `..` (or empty components): name a disk in                  the node's volumes directory of this namespace, e.g. data.qcow2, or ask an admin ({who})",
                spec.trim_start_matches('/').replace('/', ".")
            ));
        }
    }
    Ok(())
}

/// The fine rule: may `id` turn `old` (None: a create) into `new`?
pub fn check_write(id: &Identity, kind: Kind<'_>, old: Option<&Value>, new: &Value) -> Result<(), String> {
    match id.role {
        Role::Admin if !id.legacy => Ok(()),
        Role::Controller => controller_write(id, kind, old, new),
        Role::Node => node_write(id, kind, old, new),
        Role::Metrics => Err(crate::auth::metrics_only(&id.sub)),
        _ => tenant_write(id, kind, old, new),
    }
}

fn controller_write(id: &Identity, kind: Kind<'_>, old: Option<&Value>, new: &Value) -> Result<(), String> {
    if kind.is(KAIRON_GROUP, "kaironquotas") && old.map(without_status) != Some(without_status(new)) {
        return Err(format!("{}: a controller reports a KaironQuota's use (its status); an admin sets it", who(id)));
    }
    if key_changed(old, new, "/metadata/annotations", annotations::FS_FROZEN) {
        return Err(format!(
            "the annotation {} is the node agent's confirmation of a freeze and is written by node agents only: {}",
            annotations::FS_FROZEN,
            who(id)
        ));
    }
    Ok(())
}

/// A node agent reports its own build of a KaironTemplate: its entry of `status.nodes`, with the
/// phase and message that all the entries give (`kairon_model::template::summarize`). Nothing
/// else: not the spec, not another node's build, not a phase of its own making.
fn node_template_write(id: &Identity, old: Option<&Value>, new: &Value) -> Result<(), String> {
    use kairon_model::template::{KaironTemplateStatus, summarize};
    let Some(old) = old else {
        return Err(format!("{}: a node agent creates no KaironTemplates", who(id)));
    };
    if without_status(old) != without_status(new) {
        return Err(format!("{}: a node agent writes only a KaironTemplate's status (its build)", who(id)));
    }
    let status = |o: &Value| -> Option<KaironTemplateStatus> {
        match o.get("status") {
            None | Some(Value::Null) => Some(KaironTemplateStatus::default()),
            Some(s) => serde_json::from_value(s.clone()).ok(),
        }
    };
    let before = status(old).unwrap_or_default();
    let Some(after) = status(new) else {
        return Err(format!("{}: a KaironTemplate's status must read as one", who(id)));
    };
    let others = |s: &KaironTemplateStatus| {
        let mut v: Vec<_> = s.nodes.iter().filter(|n| n.node != id.sub).cloned().collect();
        v.sort_by(|a, b| a.node.cmp(&b.node));
        serde_json::to_value(v).unwrap_or_default()
    };
    if others(&before) != others(&after) {
        return Err(format!("{}: a node agent reports its own build of a template, not another node's", who(id)));
    }
    if after.nodes.iter().filter(|n| n.node == id.sub).count() > 1 {
        return Err(format!("{}: one entry of status.nodes per node", who(id)));
    }
    if (after.phase, after.message.clone()) != summarize(&after.nodes) {
        return Err(format!(
            "{}: a template's status.phase and status.message follow from its nodes' builds \
             (kairon_model::template::summarize), not from one node",
            who(id)
        ));
    }
    Ok(())
}

/// Server-owned metadata that every write path sets itself.
const SERVER_METADATA: [&str; 8] = [
    "managedFields",
    "resourceVersion",
    "generation",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
];

/// `obj` without its status and the metadata every write path sets itself.
fn without_status(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in SERVER_METADATA {
            meta.remove(k);
        }
    }
    v
}

/// `obj` without what a node agent may change on a Machine.
fn beyond_node_rights(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in SERVER_METADATA {
            meta.remove(k);
        }
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove(annotations::FS_FROZEN);
            a.remove(annotations::LAST_ACTIVITY);
        }
        if let Some(f) = meta.get_mut("finalizers").and_then(Value::as_array_mut) {
            f.retain(|x| x.as_str() != Some(finalizers::MACHINE));
        }
        for k in ["annotations", "finalizers", "labels", "ownerReferences"] {
            if normalized(meta.get(k)) == Value::Null {
                meta.remove(k);
            }
        }
    }
    v
}

fn node_write(id: &Identity, kind: Kind<'_>, old: Option<&Value>, new: &Value) -> Result<(), String> {
    if kind.is(KAIRON_GROUP, "kaironnodes") {
        let name = new.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        if name != id.sub {
            return Err(format!(
                "{}: a node agent writes only its own KaironNode ({:?}), not {name:?}",
                who(id),
                id.sub
            ));
        }
        if field_changed(old, new, "/spec/capacity") {
            return Err(format!(
                "{}: spec.capacity caps what the scheduler places on a node and is an admin's; a node agent reports \
                 what it offers in status.capacity",
                who(id)
            ));
        }
        return Ok(());
    }
    if kind.is_event() {
        return Ok(());
    }
    if kind.is(KAIRON_GROUP, "kairontemplates") {
        return node_template_write(id, old, new);
    }
    if !kind.is(KAIRON_GROUP, "machines") {
        return Err(format!("{}: a node agent does not write {}", who(id), kind.plural));
    }
    let Some(old) = old else {
        return Err(format!("{}: a node agent creates no Machines", who(id)));
    };
    let node_of = |o: &Value| o.pointer("/status/nodeName").and_then(Value::as_str).map(str::to_string);
    if node_of(old).as_deref() != Some(id.sub.as_str()) {
        return Err(format!(
            "{}: this Machine is not on node {:?}, so that node agent may not write it",
            who(id),
            id.sub
        ));
    }
    if node_of(new) != node_of(old) {
        return Err(format!(
            "{}: status.nodeName is the scheduler's (the controllers'): a node agent may not move a Machine",
            who(id)
        ));
    }
    if beyond_node_rights(old) != beyond_node_rights(new) {
        return Err(format!(
            "{}: a node agent writes only a Machine's status, the annotations {} and {} and the finalizer {}; \
             spec, labels and other metadata are the users' and the controllers'",
            who(id),
            annotations::FS_FROZEN,
            annotations::LAST_ACTIVITY,
            finalizers::MACHINE
        ));
    }
    Ok(())
}

/// The Machine an Event is about, as `(namespace, name)`: events.k8s.io's `regarding` or core's
/// `involvedObject`, when it names a Kairon Machine.
pub fn event_machine(event: &Value) -> Option<(String, String)> {
    let subject = event.get("regarding").filter(|v| v.is_object()).or_else(|| event.get("involvedObject"))?;
    let group_ok = subject["apiVersion"].as_str().is_none_or(|v| v.starts_with(&format!("{KAIRON_GROUP}/")));
    if subject["kind"] != "Machine" || !group_ok {
        return None;
    }
    let namespace = subject["namespace"].as_str().or_else(|| event.pointer("/metadata/namespace")?.as_str())?;
    Some((namespace.to_string(), subject["name"].as_str()?.to_string()))
}

/// Whether a node agent may write `event`, about `machine` (the Machine [`event_machine`]
/// names, as stored; `None`: it names none, or none exists): only Events about a Machine on
/// its own node, in that Machine's namespace. Anyone else: no rule here.
pub fn check_node_event(id: &Identity, event: &Value, machine: Option<&Value>) -> Result<(), String> {
    if id.role != Role::Node {
        return Ok(());
    }
    let refusal = |why: String| {
        Err(format!("{}: a node agent writes Events only about Machines on its own node ({why})", who(id)))
    };
    let Some((namespace, name)) = event_machine(event) else {
        return refusal("this Event is not about a Machine".into());
    };
    if event.pointer("/metadata/namespace").and_then(Value::as_str) != Some(namespace.as_str()) {
        return refusal(format!("an Event about Machine {namespace}/{name} lives in namespace {namespace}"));
    }
    match machine.and_then(|m| m.pointer("/status/nodeName")).and_then(Value::as_str) {
        Some(node) if node == id.sub => Ok(()),
        _ => refusal(format!("Machine {namespace}/{name} is not on node {:?}", id.sub)),
    }
}

/// A write to a `/status` subresource, decided by who asks before anything is read: tenants
/// never write status, whatever the body (so a stale resourceVersion cannot answer first).
pub fn may_write_status(id: &Identity, kind: Kind<'_>) -> Result<(), String> {
    match id.role {
        Role::Admin if !id.legacy => Ok(()),
        Role::Node | Role::Controller => Ok(()),
        _ => Err(status_refusal(id, kind)),
    }
}

fn status_refusal(id: &Identity, kind: Kind<'_>) -> String {
    format!(
        "the status of {} is written by the controllers and node agents only: {}; change spec instead (or use the \
         REST power operations)",
        kind.plural,
        who(id)
    )
}

fn tenant_write(id: &Identity, kind: Kind<'_>, old: Option<&Value>, new: &Value) -> Result<(), String> {
    let who = who(id);
    // Status: the subresource is where it changes; the object's own writes keep the stored one.
    if kind.group == KAIRON_GROUP && field_changed(old, new, "/status") {
        return Err(status_refusal(id, kind));
    }
    if let Some(p) = sandbox_pointer(kind)
        && new.pointer(p).is_some_and(|v| !v.is_null())
    {
        let what = if kind.plural == "machines" {
            "writing a sandbox-track (spec.sandbox) Machine"
        } else {
            "writing a MachinePool of sandbox-track (spec.template.spec.sandbox) Machines"
        };
        return Err(format!(
            "{what} is admin-only: use an admin token, or the REST power operations to drive it ({who})"
        ));
    }
    tenant_host_paths(&who, kind, old, new)?;
    let controller_only = |what: &str, why: &str, instead: &str| {
        Err(format!("{what} is written by the controllers only ({why}): {who}; {instead}"))
    };
    if key_changed(old, new, "/metadata/labels", labels::CLAIM) {
        return controller_only(
            &format!("the label {}", labels::CLAIM),
            "it binds a pool member to a MachineClaim",
            "create a MachineClaim to claim a pool member",
        );
    }
    if key_changed(old, new, "/metadata/labels", labels::POOL) {
        return controller_only(
            &format!("the label {}", labels::POOL),
            "it makes a Machine a member of a MachinePool",
            "create or scale a MachinePool to get pool members",
        );
    }
    if field_changed(old, new, "/metadata/ownerReferences") {
        return controller_only(
            "metadata.ownerReferences",
            "garbage collection deletes what it points at",
            "leave it as it is",
        );
    }
    if key_changed(old, new, "/metadata/annotations", annotations::LIFECYCLE_START) {
        return controller_only(
            &format!("the annotation {}", annotations::LIFECYCLE_START),
            "it is stamped when a claim binds and starts the max lifetime",
            "use spec.lifecycle.maxLifetimeSeconds",
        );
    }
    if key_changed(old, new, "/metadata/annotations", annotations::FS_FROZEN) {
        return Err(format!(
            "the annotation {} is the node agent's confirmation of a freeze and is written by node agents only: \
             {who}; write {} (or POST .../freeze) to freeze",
            annotations::FS_FROZEN,
            annotations::FS_FROZEN_UNTIL
        ));
    }
    if key_changed(old, new, "/metadata/annotations", annotations::IDLE_SUSPENDED)
        && map_of(Some(new), "/metadata/annotations").contains_key(annotations::IDLE_SUSPENDED)
    {
        return Err(format!(
            "the annotation {} is set by the controller when it suspends an idle Machine; a tenant may only remove it: \
             {who}; set spec.powerState to suspend a Machine yourself",
            annotations::IDLE_SUSPENDED
        ));
    }
    // A pool's template stamps its members: the same keys are the controllers' there too.
    if kind.is(KAIRON_GROUP, "machinepools") {
        for (map, key) in [
            ("labels", labels::CLAIM),
            ("labels", labels::POOL),
            ("annotations", annotations::LIFECYCLE_START),
            ("annotations", annotations::FS_FROZEN),
            ("annotations", annotations::IDLE_SUSPENDED),
        ] {
            if key_changed(old, new, &format!("/spec/template/metadata/{map}"), key) {
                return Err(format!(
                    "spec.template.metadata.{map} may not carry {key}: the controllers and node agents set it on \
                     members ({who})"
                ));
            }
        }
    }
    if kind.is(KAIRON_GROUP, "machines") && old.is_some() && key_changed(old, new, "/metadata/labels", labels::SANDBOX)
    {
        return Err(format!(
            "the label {} opens a Machine to operators' guest exec and is set only when the Machine is created: \
             {who}; create a new Machine with it, or ask an admin",
            labels::SANDBOX
        ));
    }
    Ok(())
}

/// Sets `new`'s status to what the store keeps on a write of the object itself (not its
/// status subresource): none on a create, the stored one otherwise.
pub fn keep_stored_status(old: Option<&Value>, new: &mut Value) {
    if let Some(o) = new.as_object_mut() {
        match old.and_then(|o| o.get("status")) {
            Some(s) => {
                o.insert("status".into(), s.clone());
            }
            None => {
                o.remove("status");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn id(role: Role, sub: &str, ns: &[&str]) -> Identity {
        Identity { sub: sub.into(), role, namespaces: ns.iter().map(|s| s.to_string()).collect(), legacy: false }
    }
    const MACHINES: Kind<'static> = Kind { group: KAIRON_GROUP, plural: "machines", namespaced: true };
    const LEASES: Kind<'static> = Kind { group: LEASE_GROUP, plural: "leases", namespaced: true };
    const NODES: Kind<'static> = Kind { group: KAIRON_GROUP, plural: "kaironnodes", namespaced: false };
    const POOLS: Kind<'static> = Kind { group: KAIRON_GROUP, plural: "machinepools", namespaced: true };

    fn machine(labels: Value, annotations: Value) -> Value {
        json!({"metadata": {"name": "m", "namespace": "a", "labels": labels, "annotations": annotations,
                            "finalizers": ["kairon.zyvor.dev/machine"]},
               "spec": {"image": {"path": "/images/x.qcow2"}}, "status": {"nodeName": "n1", "phase": "Running"}})
    }

    #[test]
    fn tenants_write_no_status_and_no_controller_keys() {
        let op = id(Role::Operator, "alice", &["a"]);
        let old = machine(json!({}), json!({}));
        let mut new = old.clone();
        new["status"]["runtimeID"] = json!("other");
        assert!(check_write(&op, MACHINES, Some(&old), &new).unwrap_err().contains("status"));
        for (ptr, key) in [
            ("labels", labels::CLAIM),
            ("labels", labels::POOL),
            ("annotations", annotations::LIFECYCLE_START),
            ("annotations", annotations::FS_FROZEN),
            ("annotations", annotations::IDLE_SUSPENDED),
            ("labels", labels::SANDBOX),
        ] {
            let mut new = old.clone();
            new["metadata"][ptr][key] = json!("x");
            assert!(check_write(&op, MACHINES, Some(&old), &new).is_err(), "{key} added");
            // And removed.
            let mut had = old.clone();
            had["metadata"][ptr][key] = json!("x");
            let r = check_write(&op, MACHINES, Some(&had), &old);
            assert_eq!(r.is_ok(), key == annotations::IDLE_SUSPENDED, "{key} removed: {r:?}");
        }
        let mut new = old.clone();
        new["metadata"]["ownerReferences"] = json!([{"uid": "u"}]);
        assert!(check_write(&op, MACHINES, Some(&old), &new).is_err());
        let mut new = old.clone();
        new["metadata"]["annotations"][annotations::FS_FROZEN_UNTIL] = json!("2030-01-01T00:00:00Z");
        new["spec"]["powerState"] = json!("Paused");
        assert!(check_write(&op, MACHINES, Some(&old), &new).is_ok());
        // The sandbox label on a new Machine is fine; spec.sandbox is not.
        let mut created = old.clone();
        created.as_object_mut().unwrap().remove("status");
        created["metadata"]["labels"][labels::SANDBOX] = json!("true");
        assert!(check_write(&op, MACHINES, None, &created).is_ok());
        created["spec"]["sandbox"] = json!({});
        assert!(check_write(&op, MACHINES, None, &created).unwrap_err().contains("admin-only"));
    }

    #[test]
    fn a_node_reports_its_own_build_of_a_template_and_nothing_else() {
        const TEMPLATES: Kind<'static> = Kind { group: KAIRON_GROUP, plural: "kairontemplates", namespaced: true };
        let node = id(Role::Node, "n1", &["*"]);
        let other = json!({"node": "n2", "phase": "Failed", "message": "step 1 failed"});
        let old = json!({"metadata": {"name": "py", "namespace": "a"}, "spec": {"image": "alpine"},
                         "status": {"phase": "Failed", "message": "step 1 failed", "nodes": [other]}});
        let mine = json!({"node": "n1", "phase": "Building", "message": "pulling alpine"});
        let mut new = old.clone();
        new["status"] = json!({"phase": "Building", "message": "pulling alpine", "nodes": [other, mine]});
        assert_eq!(check_write(&node, TEMPLATES, Some(&old), &new), Ok(()));
        let refused = |new: &Value| check_write(&node, TEMPLATES, Some(&old), new).unwrap_err();
        // A phase that does not follow from the builds.
        let mut lie = new.clone();
        lie["status"]["phase"] = json!("Ready");
        assert!(refused(&lie).contains("follow from its nodes' builds"));
        // Another node's build.
        let mut theirs = new.clone();
        theirs["status"]["nodes"][0]["phase"] = json!("Ready");
        theirs["status"]["phase"] = json!("Ready");
        theirs["status"]["message"] = json!("built on n2");
        assert!(refused(&theirs).contains("not another node's"));
        // The spec, or a new template.
        let mut spec = new.clone();
        spec["spec"]["image"] = json!("evil");
        assert!(refused(&spec).contains("only a KaironTemplate's status"));
        assert!(check_write(&node, TEMPLATES, None, &new).unwrap_err().contains("creates no"));
        let mut garbage = new.clone();
        garbage["status"]["nodes"] = json!("all of them");
        assert!(refused(&garbage).contains("must read as one"));
    }

    #[test]
    fn nodes_write_status_of_their_machines_only() {
        let node = id(Role::Node, "n1", &["*"]);
        let old = machine(json!({}), json!({}));
        let mut new = old.clone();
        new["status"]["phase"] = json!("Paused");
        new["metadata"]["annotations"][annotations::FS_FROZEN] = json!("x");
        new["metadata"]["finalizers"] = json!([]);
        new["metadata"]["managedFields"] = json!([{"manager": "kairon-node"}]);
        assert!(check_write(&node, MACHINES, Some(&old), &new).is_ok());
        let other = id(Role::Node, "n2", &["*"]);
        assert!(check_write(&other, MACHINES, Some(&old), &new).is_err());
        let mut spec = old.clone();
        spec["spec"]["powerState"] = json!("Stopped");
        assert!(check_write(&node, MACHINES, Some(&old), &spec).is_err());
        let mut moved = old.clone();
        moved["status"]["nodeName"] = json!("n2");
        assert!(check_write(&node, MACHINES, Some(&old), &moved).is_err());
        assert!(check_write(&node, MACHINES, None, &old).is_err());
        assert!(check_write(&node, NODES, None, &json!({"metadata": {"name": "n1"}})).is_ok());
        assert!(check_write(&node, NODES, None, &json!({"metadata": {"name": "n2"}})).is_err());
        assert!(may_request(&node, MACHINES, Some("a"), Op::Delete).is_err());
        // A node's Lease would stop every controller (theirs is one Lease in kairon-system).
        assert!(may_request(&node, LEASES, Some(SYSTEM_NAMESPACE), Op::Write).unwrap_err().contains("Leases"));
        // spec.capacity is an admin's cap: a node sets none and changes none; status is its own.
        let registered = json!({"metadata": {"name": "n1"}, "spec": {"runtimeEndpoint": "u"}});
        let mut lying = registered.clone();
        lying["spec"]["capacity"] = json!({"cpu": "1000", "memory": "1Pi"});
        assert!(check_write(&node, NODES, None, &lying).unwrap_err().contains("spec.capacity"));
        assert!(check_write(&node, NODES, Some(&registered), &lying).unwrap_err().contains("spec.capacity"));
        let mut capped = registered.clone();
        capped["spec"]["capacity"] = json!({"cpu": "8", "memory": "16Gi"});
        let mut reported = capped.clone();
        reported["status"]["capacity"] = json!({"cpu": "1000", "memory": "1Pi"});
        assert!(check_write(&node, NODES, Some(&capped), &reported).is_ok());
        assert!(check_write(&node, NODES, Some(&capped), &registered).is_err(), "nor removes it");
    }

    #[test]
    fn nodes_write_events_only_about_their_own_machines() {
        let node = id(Role::Node, "n1", &["*"]);
        let on = |node: &str| json!({"metadata": {"name": "m", "namespace": "a"}, "status": {"nodeName": node}});
        let event =
            |ns: &str, subject: Value| json!({"metadata": {"name": "e", "namespace": ns}, "regarding": subject});
        let about_m = json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "name": "m", "namespace": "a"});
        assert!(check_node_event(&node, &event("a", about_m.clone()), Some(&on("n1"))).is_ok());
        let core = json!({"metadata": {"name": "e", "namespace": "a"}, "involvedObject": about_m.clone()});
        assert!(check_node_event(&node, &core, Some(&on("n1"))).is_ok());
        for (ev, machine) in [
            (event("a", about_m.clone()), Some(on("n2"))),
            (event("a", about_m.clone()), None),
            (event("b", about_m.clone()), Some(on("n1"))),
            (event("a", json!({"kind": "Pod", "name": "m", "namespace": "a"})), Some(on("n1"))),
            (json!({"metadata": {"name": "e", "namespace": "a"}}), Some(on("n1"))),
        ] {
            let r = check_node_event(&node, &ev, machine.as_ref());
            assert!(r.as_ref().is_err_and(|m| m.contains("own node")), "{ev} on {machine:?}: {r:?}");
        }
        let ctl = id(Role::Controller, "c", &["*"]);
        assert!(check_node_event(&ctl, &event("b", json!({})), None).is_ok(), "a rule for nodes only");
    }

    #[test]
    fn leases_and_the_system_namespace_are_not_tenants() {
        let op = id(Role::Operator, "alice", &["*"]);
        assert!(may_request(&op, LEASES, Some("a"), Op::Write).is_err());
        assert!(may_request(&op, LEASES, Some("a"), Op::Read).is_ok());
        assert!(may_request(&op, MACHINES, Some(SYSTEM_NAMESPACE), Op::Write).is_err());
        assert!(may_request(&Identity::legacy(), MACHINES, Some(SYSTEM_NAMESPACE), Op::Delete).is_err());
        let ctl = id(Role::Controller, "c", &["*"]);
        assert!(may_request(&ctl, LEASES, Some(SYSTEM_NAMESPACE), Op::Write).is_ok());
        assert!(may_request(&ctl, NODES, None, Op::Write).is_err());
        let old = machine(json!({}), json!({}));
        let mut new = old.clone();
        new["metadata"]["labels"][labels::CLAIM] = json!("c");
        new["metadata"]["annotations"][annotations::LIFECYCLE_START] = json!("t");
        assert!(check_write(&ctl, MACHINES, Some(&old), &new).is_ok());
        new["metadata"]["annotations"][annotations::FS_FROZEN] = json!("t");
        assert!(check_write(&ctl, MACHINES, Some(&old), &new).is_err());
    }

    #[test]
    fn tenants_name_host_paths_inside_the_image_dirs_only() {
        let op = id(Role::Operator, "alice", &["a"]);
        let admin = id(Role::Admin, "root", &["*"]);
        let with = |spec: Value| json!({"metadata": {"name": "m", "namespace": "a"}, "spec": spec});
        let ok = with(json!({"image": {"path": "/var/lib/fluxvm/images/kairon-hw.qcow2"},
                             "runtime": {"kernel": {"path": "/images/k", "initrd": "/images/i"}},
                             "volumes": [{"name": "d", "path": "data.qcow2"}]}));
        assert!(check_write(&op, MACHINES, None, &ok).is_ok());
        for bad in [
            json!({"image": {"path": "/etc/shadow"}}),
            json!({"image": {"path": "/var/lib/fluxvm/images/../../../etc/shadow"}}),
            json!({"image": {"path": "/var/lib/fluxvm/images"}}),
            json!({"image": {"path": "/var/lib/fluxvm/imagesX/a"}}),
            json!({"image": {"path": "/images/./a"}}),
            json!({"runtime": {"kernel": {"path": "/boot/vmlinuz"}}}),
            json!({"runtime": {"kernel": {"path": "/images/k", "initrd": "/etc/shadow"}}}),
            json!({"volumes": [{"name": "d", "path": "../../etc/shadow"}]}),
            json!({"volumes": [{"name": "d", "path": "/var/lib/kairon/volumes/a/../b/x"}]}),
        ] {
            let m = with(bad.clone());
            let e = check_write(&op, MACHINES, None, &m).unwrap_err();
            assert!(e.contains("ask an admin"), "{bad}: {e}");
            assert!(check_write(&admin, MACHINES, None, &m).is_ok());
            let pool = json!({"metadata": {"name": "p", "namespace": "a"}, "spec": {"template": {"spec": bad}}});
            let e = check_write(&op, POOLS, None, &pool).unwrap_err();
            assert!(e.contains("spec.template.spec."), "{e}");
        }
        // What an admin wrote stays writable around it; changing it is the tenant's own write.
        let admins =
            with(json!({"image": {"path": "/srv/other.qcow2"}, "volumes": [{"name": "d", "path": "/srv/d.raw"}]}));
        let mut new = admins.clone();
        new["metadata"]["labels"] = json!({"x": "y"});
        assert!(check_write(&op, MACHINES, Some(&admins), &new).is_ok());
        new["spec"]["image"]["path"] = json!("/srv/another.qcow2");
        assert!(check_write(&op, MACHINES, Some(&admins), &new).is_err());
    }
}
