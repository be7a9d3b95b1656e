//! Server-side `meta.k8s.io/v1` Tables, so `kubectl get` shows the printer columns.

use axum::http::HeaderMap;
use serde_json::{Value, json};

use kairon_model::duration;

use super::registry::ResourceType;

/// Whether the client asked for a Table (`Accept: application/json;as=Table;…`).
pub fn wanted(headers: &HeaderMap) -> bool {
    headers.get_all("accept").iter().filter_map(|v| v.to_str().ok()).any(|v| v.contains("as=Table"))
}

pub fn column_definitions(rt: &ResourceType) -> Vec<Value> {
    let mut cols = vec![json!({
        "name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": "Name must be unique within a namespace."
    })];
    cols.extend(rt.columns.iter().map(|c| {
        json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority})
    }));
    cols
}

/// Looks up a simple JSONPath (`.status.phase`) in `obj`.
fn lookup<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path.trim_start_matches('.').split('.').filter(|s| !s.is_empty()).try_fold(obj, |v, k| v.get(k))
}

fn cell(v: Option<&Value>, type_: &str, now: i64) -> Value {
    let Some(v) = v else {
        return Value::Null;
    };
    match (type_, v) {
        ("date", Value::String(s)) => match s.parse::<k8s_openapi::jiff::Timestamp>() {
            Ok(t) => Value::String(duration::human(now - t.as_second())),
            Err(_) => Value::String("<invalid>".into()),
        },
        (_, Value::Array(items)) => Value::String(
            items
                .iter()
                .map(|i| i.as_str().map(str::to_string).unwrap_or_else(|| i.to_string()))
                .collect::<Vec<_>>()
                .join(","),
        ),
        (_, Value::Object(_)) => Value::String(v.to_string()),
        _ => v.clone(),
    }
}

pub fn row(rt: &ResourceType, obj: &Value, now: i64) -> Value {
    let mut cells = vec![obj["metadata"]["name"].clone()];
    cells.extend(rt.columns.iter().map(|c| cell(lookup(obj, &c.json_path), &c.type_, now)));
    let mut meta = obj["metadata"].clone();
    if let Some(m) = meta.as_object_mut() {
        m.remove("managedFields");
    }
    json!({
        "cells": cells,
        "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
    })
}

pub fn table(rt: &ResourceType, items: &[Value], list_meta: Value, now: i64) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": column_definitions(rt),
        "rows": items.iter().map(|o| row(rt, o, now)).collect::<Vec<_>>(),
    })
}
