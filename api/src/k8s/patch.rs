//! Patch semantics for the Kubernetes-compatible API: JSON merge patch
//! (RFC 7386), JSON patch (RFC 6902) and server-side apply with
//! `metadata.managedFields` bookkeeping.
//!
//! Server-side apply follows structured-merge-diff the way it behaves for
//! CRDs without list-type markers: maps merge key by key, lists are atomic
//! leaves, scalars are leaves, and an empty map set by an applier is itself a
//! leaf. Pure functions; no I/O.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// RFC 7386 merge patch: objects merge recursively, `null` deletes, anything
/// else (including arrays) replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// How a list merges in a strategic merge patch, as the Go types of the built-in kinds served
/// here (Namespace, Event, Lease) declare it with `patchStrategy` / `patchMergeKey`: only
/// ObjectMeta has merging lists; every other list is replaced whole.
enum ListStrategy {
    Replace,
    MergePrimitive,
    MergeByKey(&'static str),
}

fn list_strategy(path: &[String]) -> ListStrategy {
    match path {
        [m, f] if m == "metadata" && f == "finalizers" => ListStrategy::MergePrimitive,
        [m, f] if m == "metadata" && f == "ownerReferences" => ListStrategy::MergeByKey("uid"),
        _ => ListStrategy::Replace,
    }
}

fn is_directive(key: &str) -> bool {
    key == "$patch"
        || key == "$retainKeys"
        || key.starts_with("$setElementOrder/")
        || key.starts_with("$deleteFromPrimitiveList/")
}

/// A patch value as it is stored when nothing is there to merge with: directives and
/// `null`s (which would delete) dropped.
fn smp_clean(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !is_directive(k) && !v.is_null())
                .map(|(k, v)| (k.clone(), smp_clean(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items.iter().filter(|i| i.get("$patch").and_then(Value::as_str) != Some("delete")).map(smp_clean).collect(),
        ),
        other => other.clone(),
    }
}

/// A strategic merge patch (`kubectl apply`, `edit` and `patch` send one for built-in
/// kinds): a merge patch, except that the lists [`list_strategy`] names merge, and the
/// `$patch`, `$retainKeys`, `$setElementOrder/…` and `$deleteFromPrimitiveList/…`
/// directives apply.
pub fn strategic_merge_patch(target: &mut Value, patch: &Value) -> Result<(), String> {
    let Some(p) = patch.as_object() else {
        return Err("a strategic merge patch must be a JSON object".into());
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else { unreachable!("made an object above") };
    smp_map(t, p, &mut Vec::new())
}

fn smp_map(target: &mut Map<String, Value>, patch: &Map<String, Value>, path: &mut Vec<String>) -> Result<(), String> {
    match patch.get("$patch").and_then(Value::as_str) {
        None => {}
        Some("replace") => {
            let Value::Object(replacement) = smp_clean(&Value::Object(patch.clone())) else { unreachable!() };
            *target = replacement;
            return Ok(());
        }
        Some(other) => return Err(format!("unsupported $patch directive {other:?} at {}", path_string(path))),
    }
    for (k, v) in patch.iter().filter(|(k, _)| !is_directive(k)) {
        path.push(k.clone());
        let delete = v.is_null() || v.get("$patch").and_then(Value::as_str) == Some("delete");
        match (target.get_mut(k), v) {
            _ if delete => {
                target.remove(k);
            }
            (Some(Value::Object(t)), Value::Object(p)) => smp_map(t, p, path)?,
            (Some(Value::Array(t)), Value::Array(p)) => smp_list(t, p, path)?,
            _ => {
                target.insert(k.clone(), smp_clean(v));
            }
        }
        path.pop();
    }
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/")
            && let (Some(Value::Array(t)), Some(gone)) = (target.get_mut(field), v.as_array())
        {
            t.retain(|item| !gone.contains(item));
        }
    }
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix("$setElementOrder/")
            && let (Some(Value::Array(t)), Some(order)) = (target.get_mut(field), v.as_array())
        {
            path.push(field.to_string());
            let key = match list_strategy(path) {
                ListStrategy::MergeByKey(key) => Some(key),
                _ => None,
            };
            path.pop();
            let rank = |item: &Value| {
                let id = key.map_or(item, |key| &item[key]);
                order.iter().position(|o| key.map_or(o, |key| &o[key]) == id).unwrap_or(order.len())
            };
            t.sort_by_key(rank);
        }
    }
    if let Some(keep) = patch.get("$retainKeys").and_then(Value::as_array) {
        target.retain(|k, _| keep.iter().any(|x| x.as_str() == Some(k)));
    }
    Ok(())
}

fn smp_list(target: &mut Vec<Value>, patch: &[Value], path: &[String]) -> Result<(), String> {
    if patch.iter().any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace")) {
        *target = patch.iter().filter(|i| i.get("$patch").is_none()).map(smp_clean).collect();
        return Ok(());
    }
    match list_strategy(path) {
        ListStrategy::Replace => *target = patch.iter().map(smp_clean).collect(),
        ListStrategy::MergePrimitive => {
            for item in patch {
                if !target.contains(item) {
                    target.push(item.clone());
                }
            }
        }
        ListStrategy::MergeByKey(key) => {
            for item in patch {
                let Some(id) = item.get(key) else {
                    return Err(format!("an item of {} has no {key:?}, its merge key", path_string(path)));
                };
                let at = target.iter().position(|t| t.get(key) == Some(id));
                let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                match (at, item.as_object()) {
                    (Some(i), _) if delete => {
                        target.remove(i);
                    }
                    (None, _) if delete => {}
                    (Some(i), Some(p)) => {
                        if let Value::Object(t) = &mut target[i] {
                            smp_map(t, p, &mut path.to_vec())?;
                        }
                    }
                    _ => target.push(smp_clean(item)),
                }
            }
        }
    }
    Ok(())
}

/// RFC 6902 JSON patch. Atomic: on error `target` is left unchanged, and the
/// message names the failing operation.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), String> {
    let Some(ops) = patch.as_array() else {
        return Err("JSON patch must be an array of operations".into());
    };
    let mut parsed = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        let op: json_patch::PatchOperation =
            serde_json::from_value(op.clone()).map_err(|e| format!("invalid JSON patch operation {i}: {e}"))?;
        parsed.push(op);
    }
    // Patch a copy and commit only on success: atomic without relying on the
    // crate's undo path (which panics if undo itself fails).
    let mut doc = target.clone();
    for (i, op) in parsed.iter().enumerate() {
        // As in Kubernetes, `test` of a missing member against null passes: kube-rs's finalizer
        // helper adds the first finalizer after testing that the list is null.
        if let json_patch::PatchOperation::Test(t) = op
            && t.value.is_null()
            && doc.pointer(t.path.as_str()).is_none()
        {
            continue;
        }
        json_patch::patch_unsafe(&mut doc, std::slice::from_ref(op))
            .map_err(|e| format!("JSON patch operation {i} ({} {}) failed: {}", op_name(op), e.path, e.kind))?;
    }
    *target = doc;
    Ok(())
}

fn op_name(op: &json_patch::PatchOperation) -> &'static str {
    use json_patch::PatchOperation as P;
    match op {
        P::Add(_) => "add",
        P::Remove(_) => "remove",
        P::Replace(_) => "replace",
        P::Move(_) => "move",
        P::Copy(_) => "copy",
        P::Test(_) => "test",
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Kubernetes-style conflict message; the caller maps it to HTTP 409.
    #[error("{0}")]
    Conflict(String),
    /// Malformed apply configuration; the caller maps it to HTTP 400/422.
    #[error("{0}")]
    Invalid(String),
}

const APPLY: &str = "Apply";
const UPDATE: &str = "Update";

/// Server-side apply of `applied` by `manager`.
///
/// Returns the new object with `metadata.managedFields` updated. With
/// `subresource == Some("status")` only `status` is merged and tracked;
/// otherwise `status` is left as it is in `live`. Server-owned metadata
/// (uid, resourceVersion, creationTimestamp, ...) is never taken from
/// `applied` when `live` exists; on create (`live == None`) only
/// apiVersion, kind, name and namespace are copied verbatim, so the caller
/// fills in uid/resourceVersion/creationTimestamp itself.
///
/// `null` values in `applied` are dropped first (as CRD pruning does for
/// non-nullable fields), so `field: null` means "not specified".
pub fn server_side_apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    now: &str,
    subresource: Option<&str>,
) -> Result<Value, ApplyError> {
    let scope = Scope::of(subresource);
    validate_applied(live, applied)?;
    let mut applied = applied.clone();
    strip_nulls(&mut applied);
    let Some(applied_map) = applied.as_object() else {
        return Err(invalid("apply configuration must be a JSON object"));
    };
    let api_version = applied_map.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();

    let (base, mut entries) = match live {
        Some(live) => (without_managed_fields(live), read_entries(live)),
        None => (skeleton(&applied), Vec::new()),
    };

    let mut applied_set = FieldSet::default();
    leaf_set(applied_map, &mut Vec::new(), scope, &mut applied_set);

    let mut merged = base.clone();
    if let Some(target) = merged.as_object_mut() {
        merge_into(target, applied_map, &mut Vec::new(), scope);
    }

    let is_own = |e: &Entry| e.is(manager, APPLY, subresource);
    let (changed, removed) = diff(&base, &merged, scope);

    // Fields this apply adds, changes or (by replacing a map with a scalar or
    // list) wipes out, that someone else owns.
    let mut touched = changed.clone();
    touched.union(&removed);
    let touched_paths = touched.paths();
    let mut conflicts = Vec::new();
    for e in entries.iter().filter(|e| !is_own(e)) {
        let Some(set) = &e.set else { continue };
        for p in touched_paths.iter().filter(|p| set.contains(p)) {
            conflicts.push((e.describe(), path_string(p)));
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(ApplyError::Conflict(conflict_message(conflicts)));
    }

    // Forced (or conflict-free) apply: others lose what we changed and what
    // no longer exists.
    for e in entries.iter_mut().filter(|e| !is_own(e)) {
        if let Some(set) = &mut e.set {
            let lost_changed = set.difference(&changed);
            let lost_removed = set.difference(&removed);
            e.dirty |= lost_changed || lost_removed;
        }
    }

    // Fields we applied last time but not now are deleted, unless someone
    // else still owns them (then we merely stop owning them).
    let own_idx = entries.iter().position(is_own);
    let previous = own_idx.and_then(|i| entries.get(i)).and_then(|e| e.set.clone()).unwrap_or_default();
    let owned_elsewhere = |p: &[String]| {
        applied_set.owns_at_or_below(p)
            || entries.iter().any(|e| !is_own(e) && e.set.as_ref().is_some_and(|s| s.owns_at_or_below(p)))
    };
    for p in previous.paths() {
        if is_ignored(&p, scope) || owned_elsewhere(&p) {
            continue;
        }
        // A map that still has children nobody tracks keeps them (Kubernetes
        // keeps such "dangling" fields rather than deleting unknown data).
        if get_path(&merged, &p).and_then(Value::as_object).is_some_and(|m| !m.is_empty()) {
            continue;
        }
        if remove_path(&mut merged, &p) {
            prune_empty_parents(&mut merged, &p, &owned_elsewhere);
        }
    }

    match own_idx.and_then(|i| entries.get_mut(i)) {
        Some(e) => {
            e.set = Some(applied_set);
            e.dirty = true;
            e.raw.insert("apiVersion".into(), Value::String(api_version));
        }
        None if !applied_set.is_empty() => {
            entries.push(Entry::new(manager, APPLY, &api_version, subresource, applied_set))
        }
        None => {}
    }
    write_entries(&mut merged, entries, now);
    Ok(merged)
}

/// Records ownership for a non-apply write (PUT, merge/JSON patch, plain
/// create): every field added or changed between `old` and `new` becomes
/// owned by (`manager`, "Update", `subresource`) and is taken from everyone
/// else; removed fields are dropped from all sets.
///
/// If `new` carries `metadata.managedFields` (e.g. a PUT body) those entries
/// are the starting point, as in Kubernetes; otherwise `old`'s are.
pub fn record_update(old: Option<&Value>, new: &mut Value, manager: &str, now: &str, subresource: Option<&str>) {
    if !new.is_object() {
        return;
    }
    let scope = Scope::of(subresource);
    let new_has_entries = new.pointer("/metadata/managedFields").is_some_and(Value::is_array);
    let mut entries = if new_has_entries { read_entries(new) } else { old.map(read_entries).unwrap_or_default() };
    let old_body = old.map_or_else(|| Value::Object(Map::new()), without_managed_fields);
    let new_body = without_managed_fields(new);
    let (changed, removed) = diff(&old_body, &new_body, scope);

    let is_own = |e: &Entry| e.is(manager, UPDATE, subresource);
    for e in entries.iter_mut().filter(|e| !is_own(e)) {
        if let Some(set) = &mut e.set {
            let lost_changed = set.difference(&changed);
            let lost_removed = set.difference(&removed);
            e.dirty |= lost_changed || lost_removed;
        }
    }

    let api_version = new.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
    match entries.iter_mut().find(|e| is_own(e)) {
        Some(e) => {
            let set = e.set.get_or_insert_with(FieldSet::default);
            let before = set.clone();
            set.union(&changed);
            set.difference(&removed);
            if *set != before || !changed.is_empty() {
                e.dirty = true;
                e.raw.insert("apiVersion".into(), Value::String(api_version));
            }
        }
        None if !changed.is_empty() => {
            entries.push(Entry::new(manager, UPDATE, &api_version, subresource, changed));
        }
        None => {}
    }
    write_entries(new, entries, now);
}

fn invalid(msg: &str) -> ApplyError {
    ApplyError::Invalid(msg.to_string())
}

fn validate_applied(live: Option<&Value>, applied: &Value) -> Result<(), ApplyError> {
    let Some(obj) = applied.as_object() else {
        return Err(invalid("apply configuration must be a JSON object"));
    };
    for key in ["apiVersion", "kind"] {
        if obj.get(key).and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(ApplyError::Invalid(format!("{key} must be set in the apply configuration")));
        }
    }
    match obj.get("metadata") {
        None | Some(Value::Object(_)) => {}
        Some(_) => return Err(invalid("metadata must be an object")),
    }
    if applied.pointer("/metadata/managedFields").is_some_and(|v| !v.is_null()) {
        return Err(invalid("metadata.managedFields must be nil"));
    }
    if let Some(live) = live {
        if !live.is_object() {
            return Err(invalid("existing object is not a JSON object"));
        }
        let (have, want) = (live.get("kind"), obj.get("kind"));
        if let (Some(Value::String(have)), Some(Value::String(want))) = (have, want)
            && have != want
        {
            return Err(ApplyError::Invalid(format!(
                "kind {want:?} does not match the existing object's kind {have:?}"
            )));
        }
    }
    Ok(())
}

fn conflict_message(mut conflicts: Vec<(String, String)>) -> String {
    conflicts.sort();
    conflicts.dedup();
    let parts: Vec<String> = conflicts.iter().map(|(who, path)| format!("conflict with {who}: {path}")).collect();
    if parts.len() == 1 {
        format!("Apply failed with 1 conflict: {}", parts.join(""))
    } else {
        format!("Apply failed with {} conflicts: {}", parts.len(), parts.join(", "))
    }
}

/// Which part of the object a write may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Main resource (and non-status subresources): everything but `status`.
    Main,
    /// The `status` subresource: only `status`.
    Status,
}

impl Scope {
    fn of(subresource: Option<&str>) -> Self {
        if subresource == Some("status") { Scope::Status } else { Scope::Main }
    }
}

/// Metadata the server owns; never merged from an applier, never tracked.
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
];

fn is_ignored(path: &[String], scope: Scope) -> bool {
    let Some(first) = path.first() else {
        return false;
    };
    if (scope == Scope::Status) != (first == "status") {
        return true;
    }
    match (first.as_str(), path.get(1)) {
        ("apiVersion" | "kind", _) => true,
        ("metadata", Some(field)) => SERVER_METADATA.contains(&field.as_str()),
        _ => false,
    }
}

/// `metadata` is a container every object has, never an owned field itself.
fn is_structural(path: &[String]) -> bool {
    path.len() == 1 && path[0] == "metadata"
}

fn path_string(path: &[String]) -> String {
    path.iter().map(|p| format!(".{p}")).collect()
}

/// A set of field paths, stored as a tree mirroring `fieldsV1`.
#[derive(Debug, Clone, Default, PartialEq)]
struct FieldSet {
    /// The path of this node itself is in the set.
    owned: bool,
    children: BTreeMap<String, FieldSet>,
    /// Non-`f:` keys (`k:`, `v:`, `i:`) from foreign writers, kept verbatim.
    extra: Map<String, Value>,
}

impl FieldSet {
    fn from_fields_v1(v: &Value) -> Option<Self> {
        let mut set = Self::parse_node(v.as_object()?);
        // The root `{}` is the empty set, not "the whole object".
        set.owned = false;
        Some(set)
    }

    fn parse_node(m: &Map<String, Value>) -> Self {
        let mut set = FieldSet { owned: m.is_empty() || m.contains_key("."), ..Default::default() };
        for (k, v) in m {
            if k == "." {
                continue;
            }
            match k.strip_prefix("f:") {
                Some(name) => {
                    let child = match v.as_object() {
                        Some(cm) => Self::parse_node(cm),
                        None => FieldSet { owned: true, ..Default::default() },
                    };
                    set.children.insert(name.to_string(), child);
                }
                None => {
                    set.extra.insert(k.clone(), v.clone());
                }
            }
        }
        set
    }

    fn to_fields_v1(&self) -> Value {
        self.render(true)
    }

    fn render(&self, root: bool) -> Value {
        let mut m = Map::new();
        let has_children = !self.children.is_empty() || !self.extra.is_empty();
        if self.owned && !root && has_children {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        for (k, child) in &self.children {
            m.insert(format!("f:{k}"), child.render(false));
        }
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }

    fn is_empty(&self) -> bool {
        !self.owned && self.children.is_empty() && self.extra.is_empty()
    }

    fn insert(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.owned = true,
            Some((head, rest)) => self.children.entry(head.clone()).or_default().insert(rest),
        }
    }

    fn node(&self, path: &[String]) -> Option<&FieldSet> {
        match path.split_first() {
            None => Some(self),
            Some((head, rest)) => self.children.get(head)?.node(rest),
        }
    }

    fn contains(&self, path: &[String]) -> bool {
        self.node(path).is_some_and(|n| n.owned)
    }

    /// True if `path` or anything beneath it is in the set.
    fn owns_at_or_below(&self, path: &[String]) -> bool {
        self.node(path).is_some_and(FieldSet::any_owned)
    }

    fn any_owned(&self) -> bool {
        self.owned || self.children.values().any(FieldSet::any_owned)
    }

    /// Removes one path; returns whether it was present. Empty nodes are
    /// pruned so that rendering never produces a spurious `{}` leaf.
    fn remove(&mut self, path: &[String]) -> bool {
        match path.split_first() {
            None => std::mem::take(&mut self.owned),
            Some((head, rest)) => {
                let Some(child) = self.children.get_mut(head) else {
                    return false;
                };
                let removed = child.remove(rest);
                if child.is_empty() {
                    self.children.remove(head);
                }
                removed
            }
        }
    }

    fn paths(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if self.owned && !prefix.is_empty() {
            out.push(prefix.clone());
        }
        for (k, child) in &self.children {
            prefix.push(k.clone());
            child.collect(prefix, out);
            prefix.pop();
        }
    }

    fn union(&mut self, other: &FieldSet) {
        for p in other.paths() {
            self.insert(&p);
        }
    }

    /// Removes every path of `other`; returns whether anything changed.
    fn difference(&mut self, other: &FieldSet) -> bool {
        let mut changed = false;
        for p in other.paths() {
            changed |= self.remove(&p);
        }
        changed
    }
}

/// One `metadata.managedFields` item. `raw` keeps unknown keys intact.
struct Entry {
    raw: Map<String, Value>,
    /// None when `fieldsV1` is missing or malformed: kept, never matched.
    set: Option<FieldSet>,
    dirty: bool,
}

impl Entry {
    fn new(manager: &str, operation: &str, api_version: &str, subresource: Option<&str>, set: FieldSet) -> Self {
        let mut raw = Map::new();
        raw.insert("manager".into(), Value::String(manager.into()));
        raw.insert("operation".into(), Value::String(operation.into()));
        raw.insert("apiVersion".into(), Value::String(api_version.into()));
        if let Some(sub) = subresource.filter(|s| !s.is_empty()) {
            raw.insert("subresource".into(), Value::String(sub.into()));
        }
        Entry { raw, set: Some(set), dirty: true }
    }

    fn str_field(&self, key: &str) -> Option<&str> {
        self.raw.get(key).and_then(Value::as_str)
    }

    fn subresource(&self) -> Option<&str> {
        self.str_field("subresource").filter(|s| !s.is_empty())
    }

    fn is(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.str_field("manager") == Some(manager)
            && self.str_field("operation") == Some(operation)
            && self.subresource() == subresource.filter(|s| !s.is_empty())
    }

    /// Manager as Kubernetes prints it in conflict messages (without the
    /// timestamp suffix).
    fn describe(&self) -> String {
        let mut s = format!("{:?}", self.str_field("manager").unwrap_or_default());
        if let Some(sub) = self.subresource() {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.str_field("operation") == Some(UPDATE) {
            s.push_str(&format!(" using {}", self.str_field("apiVersion").unwrap_or_default()));
        }
        s
    }
}

fn read_entries(obj: &Value) -> Vec<Entry> {
    let Some(items) = obj.pointer("/metadata/managedFields").and_then(Value::as_array) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(Value::as_object)
        .map(|raw| Entry {
            set: raw.get("fieldsV1").and_then(FieldSet::from_fields_v1),
            raw: raw.clone(),
            dirty: false,
        })
        .collect()
}

fn write_entries(obj: &mut Value, entries: Vec<Entry>, now: &str) {
    let mut out = Vec::with_capacity(entries.len());
    for mut e in entries {
        if e.dirty
            && let Some(set) = &e.set
        {
            if set.is_empty() {
                continue;
            }
            e.raw.insert("fieldsType".into(), Value::String("FieldsV1".into()));
            e.raw.insert("fieldsV1".into(), set.to_fields_v1());
            e.raw.insert("time".into(), Value::String(now.into()));
        }
        out.push(Value::Object(e.raw));
    }
    let Some(obj) = obj.as_object_mut() else {
        return;
    };
    let meta = obj.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    if out.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(out));
    }
}

fn without_managed_fields(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    v
}

/// Identity fields a create-by-apply takes verbatim from the configuration.
fn skeleton(applied: &Value) -> Value {
    let mut out = Map::new();
    for key in ["apiVersion", "kind"] {
        if let Some(v) = applied.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    let mut meta = Map::new();
    for key in ["name", "namespace"] {
        if let Some(v) = applied.get("metadata").and_then(|m| m.get(key)) {
            meta.insert(key.into(), v.clone());
        }
    }
    out.insert("metadata".into(), Value::Object(meta));
    Value::Object(out)
}

fn strip_nulls(v: &mut Value) {
    if let Value::Object(m) = v {
        m.retain(|_, v| !v.is_null());
        m.values_mut().for_each(strip_nulls);
    }
}

/// The applier's field set: leaves are scalars, lists and empty maps.
fn leaf_set(m: &Map<String, Value>, path: &mut Vec<String>, scope: Scope, out: &mut FieldSet) {
    for (k, v) in m {
        path.push(k.clone());
        if !is_ignored(path, scope) {
            match v {
                Value::Object(child) if !child.is_empty() => leaf_set(child, path, scope, out),
                Value::Object(_) if is_structural(path) => {}
                _ => out.insert(path),
            }
        }
        path.pop();
    }
}

/// Deep-merges maps; lists and scalars replace. Ignored paths are skipped.
fn merge_into(target: &mut Map<String, Value>, applied: &Map<String, Value>, path: &mut Vec<String>, scope: Scope) {
    for (k, v) in applied {
        path.push(k.clone());
        if !is_ignored(path, scope) {
            match v {
                Value::Object(child) => {
                    let slot = target.entry(k.clone()).or_insert_with(|| Value::Object(Map::new()));
                    if !slot.is_object() {
                        *slot = Value::Object(Map::new());
                    }
                    if let Some(t) = slot.as_object_mut() {
                        merge_into(t, child, path, scope);
                    }
                }
                other => {
                    target.insert(k.clone(), other.clone());
                }
            }
        }
        path.pop();
    }
}

/// Compares two objects within `scope`: (added or modified, removed).
/// Added maps contribute their own path as well as their contents, like
/// structured-merge-diff's compare (hence `".": {}` in Update entries).
fn diff(old: &Value, new: &Value, scope: Scope) -> (FieldSet, FieldSet) {
    let mut changed = FieldSet::default();
    let mut removed = FieldSet::default();
    diff_values(old, new, &mut Vec::new(), scope, &mut changed, &mut removed);
    (changed, removed)
}

fn diff_values(
    old: &Value,
    new: &Value,
    path: &mut Vec<String>,
    scope: Scope,
    changed: &mut FieldSet,
    removed: &mut FieldSet,
) {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            for (k, nv) in n {
                path.push(k.clone());
                if !is_ignored(path, scope) {
                    match o.get(k) {
                        Some(ov) => diff_values(ov, nv, path, scope, changed, removed),
                        None => add_all(nv, path, scope, changed),
                    }
                }
                path.pop();
            }
            for (k, ov) in o {
                if n.contains_key(k) {
                    continue;
                }
                path.push(k.clone());
                if !is_ignored(path, scope) {
                    add_all(ov, path, scope, removed);
                }
                path.pop();
            }
        }
        _ if old == new => {}
        _ => {
            if !path.is_empty() && !is_structural(path) {
                changed.insert(path);
            }
            // A type change between map and non-map drops or adds a subtree.
            if let Value::Object(o) = old {
                add_children(o, path, scope, removed);
            }
            if let Value::Object(n) = new {
                add_children(n, path, scope, changed);
            }
        }
    }
}

fn add_all(v: &Value, path: &mut Vec<String>, scope: Scope, out: &mut FieldSet) {
    if !is_structural(path) {
        out.insert(path);
    }
    if let Value::Object(m) = v {
        add_children(m, path, scope, out);
    }
}

fn add_children(m: &Map<String, Value>, path: &mut Vec<String>, scope: Scope, out: &mut FieldSet) {
    for (k, v) in m {
        path.push(k.clone());
        if !is_ignored(path, scope) {
            add_all(v, path, scope, out);
        }
        path.pop();
    }
}

fn get_path<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, seg| cur.get(seg))
}

fn get_path_mut<'a>(v: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |cur, seg| cur.get_mut(seg))
}

fn remove_path(v: &mut Value, path: &[String]) -> bool {
    let Some((last, parent)) = path.split_last() else {
        return false;
    };
    get_path_mut(v, parent).and_then(Value::as_object_mut).and_then(|m| m.remove(last)).is_some()
}

/// After deleting `path`, removes ancestors left as empty maps that nobody
/// owns, so dropping `.spec.sandbox.cpu` does not leave `sandbox: {}`
/// (which would mean something different from an absent sandbox).
fn prune_empty_parents(v: &mut Value, path: &[String], keep: &dyn Fn(&[String]) -> bool) {
    for len in (1..path.len()).rev() {
        let ancestor = &path[..len];
        if is_structural(ancestor) || keep(ancestor) {
            return;
        }
        let empty = get_path(v, ancestor).and_then(Value::as_object).is_some_and(Map::is_empty);
        if !empty {
            return;
        }
        remove_path(v, ancestor);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn test_of_a_missing_member_against_null_passes() {
        let mut obj = serde_json::json!({"metadata": {"name": "m"}});
        let patch = serde_json::json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["kairon.zyvor.dev/machine"]}
        ]);
        super::json_patch(&mut obj, &patch).unwrap();
        assert_eq!(obj["metadata"]["finalizers"][0], "kairon.zyvor.dev/machine");
        let again = serde_json::json!([{"op": "test", "path": "/metadata/finalizers", "value": null}]);
        assert!(super::json_patch(&mut obj, &again).is_err(), "present and not null: the test fails");
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_patch_merges_meta_lists_and_obeys_directives() {
        let mut ns = json!({
            "metadata": {"name": "n", "labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"],
                         "ownerReferences": [{"uid": "u1", "name": "one"}, {"uid": "u2", "name": "two"}]},
            "spec": {"finalizers": ["kubernetes"]}
        });
        let patch = json!({
            "metadata": {
                "labels": {"a": null, "c": "3"},
                "finalizers": ["z"],
                "$setElementOrder/finalizers": ["z", "x"],
                "$deleteFromPrimitiveList/finalizers": ["y"],
                "ownerReferences": [{"uid": "u1", "name": "uno"}, {"uid": "u2", "$patch": "delete"}],
                "annotations": {"k": "v", "gone": null}
            },
            "spec": {"finalizers": ["other"]},
            "status": {"$patch": "replace", "phase": "Active"}
        });
        strategic_merge_patch(&mut ns, &patch).unwrap();
        assert_eq!(
            ns,
            json!({
                "metadata": {"name": "n", "labels": {"b": "2", "c": "3"}, "finalizers": ["z", "x"],
                             "ownerReferences": [{"uid": "u1", "name": "uno"}], "annotations": {"k": "v"}},
                "spec": {"finalizers": ["other"]},
                "status": {"phase": "Active"}
            })
        );
        let mut m = json!({"spec": {"a": 1, "b": 2}});
        strategic_merge_patch(&mut m, &json!({"spec": {"$retainKeys": ["a", "c"], "c": 3}})).unwrap();
        assert_eq!(m, json!({"spec": {"a": 1, "c": 3}}));
        strategic_merge_patch(&mut m, &json!({"spec": {"$patch": "delete"}})).unwrap();
        assert_eq!(m, json!({}));
        let mut m = json!({"spec": {}});
        assert!(strategic_merge_patch(&mut m, &json!({"spec": {"$patch": "merge-ish"}})).is_err());
    }

    const T0: &str = "2024-01-01T00:00:00Z";
    const T1: &str = "2024-01-01T00:01:00Z";
    const T2: &str = "2024-01-01T00:02:00Z";

    fn obj(spec: Value) -> Value {
        json!({
            "apiVersion": "kairon.zyvor.dev/v1",
            "kind": "Agent",
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": spec
        })
    }

    fn apply(live: Option<&Value>, applied: &Value, manager: &str) -> Value {
        server_side_apply(live, applied, manager, false, T1, None).unwrap()
    }

    fn entries(o: &Value) -> Vec<Value> {
        o.pointer("/metadata/managedFields").and_then(Value::as_array).cloned().unwrap_or_default()
    }

    fn entry(o: &Value, manager: &str, operation: &str) -> Option<Value> {
        entries(o).into_iter().find(|e| e["manager"] == manager && e["operation"] == operation)
    }

    fn fields(o: &Value, manager: &str, operation: &str) -> Value {
        entry(o, manager, operation).map(|e| e["fieldsV1"].clone()).unwrap_or(Value::Null)
    }

    fn conflict(r: Result<Value, ApplyError>) -> String {
        match r {
            Err(ApplyError::Conflict(m)) => m,
            other => panic!("expected conflict, got {other:?}"),
        }
    }

    #[test]
    fn merge_patch_rfc7386() {
        let mut t = json!({"a": 1, "b": {"c": 2, "d": 3}, "l": [1, 2]});
        merge_patch(&mut t, &json!({"a": null, "b": {"c": 5}, "l": [3]}));
        assert_eq!(t, json!({"b": {"c": 5, "d": 3}, "l": [3]}));
    }

    #[test]
    fn json_patch_applies_and_names_failing_op() {
        let mut t = json!({"spec": {"replicas": 1}});
        json_patch(&mut t, &json!([{"op": "replace", "path": "/spec/replicas", "value": 2}])).unwrap();
        assert_eq!(t, json!({"spec": {"replicas": 2}}));

        let before = t.clone();
        let err = json_patch(
            &mut t,
            &json!([
                {"op": "add", "path": "/spec/x", "value": 1},
                {"op": "test", "path": "/spec/replicas", "value": 9}
            ]),
        )
        .unwrap_err();
        assert_eq!(err, "JSON patch operation 1 (test /spec/replicas) failed: value did not match");
        assert_eq!(t, before, "failed patch must not partially apply");

        let err = json_patch(&mut t, &json!([{"op": "frob", "path": "/x"}])).unwrap_err();
        assert!(err.starts_with("invalid JSON patch operation 0:"), "{err}");
        assert!(json_patch(&mut t, &json!({"op": "add"})).is_err());
    }

    #[test]
    fn create_via_apply_then_drop_field_removes_it() {
        let cfg = obj(json!({"replicas": 2, "image": "x", "sandbox": {}}));
        let created = apply(None, &cfg, "mgr");
        assert_eq!(created["spec"], json!({"replicas": 2, "image": "x", "sandbox": {}}));
        assert_eq!(created["metadata"]["name"], "a");
        let e = entry(&created, "mgr", "Apply").unwrap();
        assert_eq!(
            e,
            json!({
                "manager": "mgr", "operation": "Apply",
                "apiVersion": "kairon.zyvor.dev/v1", "time": T1,
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:replicas": {}, "f:image": {}, "f:sandbox": {}}}
            })
        );

        let cfg2 = obj(json!({"replicas": 2}));
        let out = server_side_apply(Some(&created), &cfg2, "mgr", false, T2, None).unwrap();
        assert_eq!(out["spec"], json!({"replicas": 2}));
        assert_eq!(fields(&out, "mgr", "Apply"), json!({"f:spec": {"f:replicas": {}}}));
        assert_eq!(entry(&out, "mgr", "Apply").unwrap()["time"], T2);
    }

    #[test]
    fn conflicting_managers_get_kubernetes_message() {
        let live = apply(None, &obj(json!({"replicas": 1, "image": "a"})), "alice");
        let err = conflict(server_side_apply(Some(&live), &obj(json!({"replicas": 3})), "bob", false, T2, None));
        assert_eq!(err, "Apply failed with 1 conflict: conflict with \"alice\": .spec.replicas");

        let err = conflict(server_side_apply(
            Some(&live),
            &obj(json!({"replicas": 3, "image": "b"})),
            "bob",
            false,
            T2,
            None,
        ));
        assert_eq!(
            err,
            "Apply failed with 2 conflicts: conflict with \"alice\": .spec.image, \
             conflict with \"alice\": .spec.replicas"
        );
    }

    #[test]
    fn conflict_with_update_manager_names_api_version() {
        let mut live = obj(json!({"replicas": 1}));
        live["metadata"]["managedFields"] = json!([{
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "apiVersion": "kairon.zyvor.dev/v1",
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {".": {}, "f:replicas": {}}}
        }]);
        let err = conflict(server_side_apply(Some(&live), &obj(json!({"replicas": 2})), "kubectl", false, T1, None));
        assert_eq!(
            err,
            "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" \
             using kairon.zyvor.dev/v1: .spec.replicas"
        );
    }

    #[test]
    fn force_takes_ownership() {
        let live = apply(None, &obj(json!({"replicas": 1, "image": "a"})), "alice");
        let out = server_side_apply(Some(&live), &obj(json!({"replicas": 3})), "bob", true, T2, None).unwrap();
        assert_eq!(out["spec"], json!({"replicas": 3, "image": "a"}));
        assert_eq!(fields(&out, "alice", "Apply"), json!({"f:spec": {"f:image": {}}}));
        assert_eq!(entry(&out, "alice", "Apply").unwrap()["time"], T2);
        assert_eq!(fields(&out, "bob", "Apply"), json!({"f:spec": {"f:replicas": {}}}));

        // Alice can no longer change replicas without forcing...
        let err = conflict(server_side_apply(
            Some(&out),
            &obj(json!({"replicas": 1, "image": "a"})),
            "alice",
            false,
            T2,
            None,
        ));
        assert!(err.contains("conflict with \"bob\": .spec.replicas"), "{err}");
        // ...and dropping it from her config does not delete Bob's value.
        let out = apply(Some(&out), &obj(json!({"image": "a"})), "alice");
        assert_eq!(out["spec"]["replicas"], 3);

        // Losing every field drops the entry entirely.
        let out = server_side_apply(Some(&out), &obj(json!({"image": "z"})), "bob", true, T2, None).unwrap();
        assert!(entry(&out, "alice", "Apply").is_none());
    }

    #[test]
    fn same_value_is_shared_not_conflict() {
        let live = apply(None, &obj(json!({"replicas": 2, "image": "a"})), "alice");
        let out = apply(Some(&live), &obj(json!({"replicas": 2})), "bob");
        assert_eq!(fields(&out, "alice", "Apply"), json!({"f:spec": {"f:replicas": {}, "f:image": {}}}));
        assert_eq!(fields(&out, "bob", "Apply"), json!({"f:spec": {"f:replicas": {}}}));

        // Alice stops managing replicas: Bob still owns it, so it stays.
        let out = apply(Some(&out), &obj(json!({"image": "a"})), "alice");
        assert_eq!(out["spec"]["replicas"], 2);
        // Now Bob alone owns it and can change it freely.
        let out = apply(Some(&out), &obj(json!({"replicas": 5})), "bob");
        assert_eq!(out["spec"]["replicas"], 5);
    }

    #[test]
    fn update_then_apply_conflicts() {
        let old = apply(None, &obj(json!({"replicas": 1})), "creator");
        let mut new = old.clone();
        new["spec"]["replicas"] = json!(4);
        new["metadata"]["labels"] = json!({"team": "x"});
        record_update(Some(&old), &mut new, "kubectl-edit", T1, None);

        // The editor now owns replicas; the creator lost it.
        assert_eq!(
            fields(&new, "kubectl-edit", "Update"),
            json!({
                "f:metadata": {"f:labels": {".": {}, "f:team": {}}},
                "f:spec": {"f:replicas": {}}
            })
        );
        assert!(entry(&new, "creator", "Apply").is_none());
        assert_eq!(entry(&new, "kubectl-edit", "Update").unwrap()["time"], T1);

        let err = conflict(server_side_apply(Some(&new), &obj(json!({"replicas": 2})), "other", false, T2, None));
        assert_eq!(
            err,
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using \
             kairon.zyvor.dev/v1: .spec.replicas"
        );
    }

    #[test]
    fn record_update_create_and_removal() {
        let mut created = obj(json!({"replicas": 1, "sandbox": {"cpu": 1}}));
        record_update(None, &mut created, "kubectl-create", T0, None);
        assert_eq!(
            fields(&created, "kubectl-create", "Update"),
            json!({"f:spec": {".": {}, "f:replicas": {}, "f:sandbox": {".": {}, "f:cpu": {}}}})
        );

        let mut next = created.clone();
        next["spec"].as_object_mut().unwrap().remove("sandbox");
        record_update(Some(&created), &mut next, "other", T1, None);
        // Removal drops the fields from every set; no new entry for "other".
        assert_eq!(fields(&next, "kubectl-create", "Update"), json!({"f:spec": {".": {}, "f:replicas": {}}}));
        assert_eq!(entry(&next, "kubectl-create", "Update").unwrap()["time"], T1);
        assert!(entry(&next, "other", "Update").is_none());

        // No-op update changes nothing.
        let mut same = next.clone();
        record_update(Some(&next), &mut same, "other", T2, None);
        assert_eq!(same, next);
    }

    #[test]
    fn lists_are_atomic() {
        let live = apply(None, &obj(json!({"tools": ["a", "b"], "env": [{"name": "X", "value": "1"}]})), "alice");
        assert_eq!(fields(&live, "alice", "Apply"), json!({"f:spec": {"f:tools": {}, "f:env": {}}}));
        let out = server_side_apply(Some(&live), &obj(json!({"env": [{"name": "Y"}]})), "bob", true, T2, None).unwrap();
        assert_eq!(out["spec"]["env"], json!([{"name": "Y"}]));
        assert_eq!(out["spec"]["tools"], json!(["a", "b"]));
        let err =
            conflict(server_side_apply(Some(&live), &obj(json!({"tools": ["a", "b", "c"]})), "bob", false, T2, None));
        assert!(err.ends_with(": .spec.tools"), "{err}");
    }

    #[test]
    fn nested_maps_merge_across_managers() {
        let live = apply(None, &obj(json!({"sandbox": {"cpu": 1}, "model": {"name": "m"}})), "alice");
        let out = apply(Some(&live), &obj(json!({"sandbox": {"memory": "1Gi"}})), "bob");
        assert_eq!(out["spec"], json!({"sandbox": {"cpu": 1, "memory": "1Gi"}, "model": {"name": "m"}}));
        assert_eq!(fields(&out, "bob", "Apply"), json!({"f:spec": {"f:sandbox": {"f:memory": {}}}}));
        // Alice dropping sandbox.cpu leaves Bob's sibling alone.
        let out = apply(Some(&out), &obj(json!({"model": {"name": "m"}})), "alice");
        assert_eq!(out["spec"]["sandbox"], json!({"memory": "1Gi"}));
    }

    #[test]
    fn dropping_last_child_prunes_unowned_parents() {
        let live = apply(None, &obj(json!({"sandbox": {"cpu": 1}, "replicas": 1})), "alice");
        let out = apply(Some(&live), &obj(json!({"replicas": 1})), "alice");
        assert_eq!(out["spec"], json!({"replicas": 1}));

        // An empty map the applier still lists survives as a leaf.
        let out = apply(Some(&live), &obj(json!({"sandbox": {}, "replicas": 1})), "alice");
        assert_eq!(out["spec"], json!({"sandbox": {}, "replicas": 1}));
        assert_eq!(fields(&out, "alice", "Apply"), json!({"f:spec": {"f:sandbox": {}, "f:replicas": {}}}));
    }

    #[test]
    fn replacing_a_map_conflicts_with_owners_of_its_children() {
        let live = apply(None, &obj(json!({"sandbox": {"cpu": 1}})), "alice");
        let err = conflict(server_side_apply(Some(&live), &obj(json!({"sandbox": "off"})), "bob", false, T2, None));
        assert_eq!(err, "Apply failed with 1 conflict: conflict with \"alice\": .spec.sandbox.cpu");
        let out = server_side_apply(Some(&live), &obj(json!({"sandbox": "off"})), "bob", true, T2, None).unwrap();
        assert_eq!(out["spec"]["sandbox"], "off");
        assert!(entry(&out, "alice", "Apply").is_none());
    }

    #[test]
    fn labels_are_tracked_and_pruned() {
        let mut cfg = obj(json!({"replicas": 1}));
        cfg["metadata"]["labels"] = json!({"app": "web", "app.kubernetes.io/part-of": "k"});
        let live = apply(None, &cfg, "alice");
        assert_eq!(
            fields(&live, "alice", "Apply"),
            json!({
                "f:metadata": {"f:labels": {"f:app": {}, "f:app.kubernetes.io/part-of": {}}},
                "f:spec": {"f:replicas": {}}
            })
        );
        let out = apply(Some(&live), &obj(json!({"replicas": 1})), "alice");
        assert_eq!(
            out["metadata"],
            json!({
                "name": "a", "namespace": "ns",
                "managedFields": entries(&out)
            })
        );
    }

    #[test]
    fn status_is_ignored_on_main_resource_apply() {
        let mut live = apply(None, &obj(json!({"replicas": 1})), "alice");
        live["status"] = json!({"phase": "Running"});
        live["metadata"]["uid"] = json!("u1");
        live["metadata"]["resourceVersion"] = json!("7");

        let mut cfg = obj(json!({"replicas": 2}));
        cfg["status"] = json!({"phase": "Hacked"});
        cfg["metadata"]["uid"] = json!("evil");
        let out = apply(Some(&live), &cfg, "alice");
        assert_eq!(out["status"], json!({"phase": "Running"}));
        assert_eq!(out["spec"]["replicas"], 2);
        assert_eq!(out["metadata"]["uid"], "u1");
        assert_eq!(out["metadata"]["resourceVersion"], "7");
        assert_eq!(fields(&out, "alice", "Apply"), json!({"f:spec": {"f:replicas": {}}}));

        // Create ignores status too.
        let created = apply(None, &cfg, "alice");
        assert!(created.get("status").is_none());
    }

    #[test]
    fn status_subresource_apply_touches_only_status() {
        let live = apply(None, &obj(json!({"replicas": 1})), "alice");
        let mut cfg = obj(json!({"replicas": 9}));
        cfg["status"] = json!({"phase": "Ready", "conditions": [{"type": "Ready"}]});
        let out = server_side_apply(Some(&live), &cfg, "controller", false, T2, Some("status")).unwrap();
        assert_eq!(out["spec"]["replicas"], 1);
        assert_eq!(out["status"]["phase"], "Ready");
        let e = entries(&out).into_iter().find(|e| e["manager"] == "controller").unwrap();
        assert_eq!(e["subresource"], "status");
        assert_eq!(e["fieldsV1"], json!({"f:status": {"f:phase": {}, "f:conditions": {}}}));

        // A status Update by someone else conflicts, with the subresource named.
        let mut edited = out.clone();
        edited["status"]["phase"] = json!("Failed");
        record_update(Some(&out), &mut edited, "kubectl", T2, Some("status"));
        let err = conflict(server_side_apply(Some(&edited), &cfg, "controller", false, T2, Some("status")));
        assert_eq!(
            err,
            "Apply failed with 1 conflict: conflict with \"kubectl\" with subresource \
             \"status\" using kairon.zyvor.dev/v1: .status.phase"
        );
    }

    #[test]
    fn unrelated_entries_are_preserved() {
        let mut live = apply(None, &obj(json!({"replicas": 1})), "alice");
        let mut list = entries(&live);
        let foreign = json!({
            "manager": "legacy", "operation": "Update", "apiVersion": "v1",
            "time": T0, "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:annotations": {"k:{\"x\":1}": {}}}}
        });
        list.push(foreign.clone());
        live["metadata"]["managedFields"] = Value::Array(list);
        let out = apply(Some(&live), &obj(json!({"image": "i"})), "bob");
        assert!(entries(&out).contains(&foreign));
        assert_eq!(entry(&out, "alice", "Apply").unwrap()["time"], T1);
    }

    #[test]
    fn invalid_configurations() {
        let mut cfg = obj(json!({}));
        cfg["metadata"]["managedFields"] = json!([]);
        assert!(matches!(server_side_apply(None, &cfg, "m", false, T0, None), Err(ApplyError::Invalid(_))));
        assert!(matches!(server_side_apply(None, &json!([1]), "m", false, T0, None), Err(ApplyError::Invalid(_))));
        assert!(matches!(
            server_side_apply(None, &json!({"kind": "Agent"}), "m", false, T0, None),
            Err(ApplyError::Invalid(_))
        ));
        let live = apply(None, &obj(json!({})), "m");
        let mut other_kind = obj(json!({}));
        other_kind["kind"] = json!("Other");
        assert!(matches!(
            server_side_apply(Some(&live), &other_kind, "m", false, T0, None),
            Err(ApplyError::Invalid(_))
        ));
    }

    #[test]
    fn nulls_in_apply_mean_unspecified() {
        let live = apply(None, &obj(json!({"replicas": 1, "image": "a"})), "alice");
        let out = apply(Some(&live), &obj(json!({"replicas": 1, "image": null})), "alice");
        assert_eq!(out["spec"], json!({"replicas": 1}));
    }

    #[test]
    fn field_set_round_trip() {
        let v = json!({"f:spec": {".": {}, "f:a": {}, "f:b": {"f:c": {}}, "k:{\"n\":1}": {}}});
        let set = FieldSet::from_fields_v1(&v).unwrap();
        assert!(set.contains(&["spec".to_string()]));
        assert!(!set.contains(&["spec".to_string(), "b".to_string()]));
        assert!(set.contains(&["spec".into(), "b".into(), "c".into()]));
        assert_eq!(set.to_fields_v1(), v);
        assert!(FieldSet::from_fields_v1(&json!({})).unwrap().is_empty());
    }
}
