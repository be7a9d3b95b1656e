//! Server-side `meta.k8s.io/v1` Tables, so `kubectl get` shows the printer columns.

use axum::http::HeaderMap;
use serde_json::{Value, json};

use kairon_model::duration;

use super::events;
use super::registry::ResourceType;

/// Whether the client asked for a Table (`Accept: application/json;as=Table;…`).
pub fn wanted(headers: &HeaderMap) -> bool {
    headers.get_all("accept").iter().filter_map(|v| v.to_str().ok()).any(|v| v.contains("as=Table"))
}

/// Events print as Kubernetes prints them (no leading Name; Object is `kind/name`), for both
/// core `v1` and `events.k8s.io/v1`.
fn is_event(rt: &ResourceType) -> bool {
    rt.kind == "Event"
}

const EVENT_COLUMNS: [(&str, i32, &str); 10] = [
    ("Last Seen", 0, "The time at which the most recent occurrence of this event was recorded."),
    ("Type", 0, "Type of this event (Normal, Warning)."),
    ("Reason", 0, "A short, machine understandable string that gives the reason for the event."),
    ("Object", 0, "The object that this event is about."),
    ("Subobject", 1, "The part of the object this event is about (fieldPath)."),
    ("Source", 1, "The component reporting this event."),
    ("Message", 0, "A human-readable description of the status of this operation."),
    ("First Seen", 1, "The time at which the event was first recorded."),
    ("Count", 1, "The number of times this event has occurred."),
    ("Name", 1, "The name of the Event."),
];

fn event_cells(obj: &Value, now: i64) -> Vec<Value> {
    // Read both API versions through the core shape.
    let ev = if obj["apiVersion"] == "events.k8s.io/v1" { events::to_core(obj.clone()) } else { obj.clone() };
    let str_of = |v: &Value| v.as_str().unwrap_or("").to_string();
    let since = |v: &Value| match v.as_str().map(str::parse::<k8s_openapi::jiff::Timestamp>) {
        Some(Ok(t)) => duration::human(now - t.as_second()),
        _ => "<unknown>".to_string(),
    };
    let first = if ev["firstTimestamp"].is_string() { since(&ev["firstTimestamp"]) } else { since(&ev["eventTime"]) };
    let (last, count) = match ev["series"].as_object() {
        Some(series) => (since(&series["lastObservedTime"]), ev["series"]["count"].as_i64().unwrap_or(1)),
        None => (
            if ev["lastTimestamp"].is_string() { since(&ev["lastTimestamp"]) } else { first.clone() },
            ev["count"].as_i64().filter(|c| *c > 0).unwrap_or(1),
        ),
    };
    let involved = &ev["involvedObject"];
    let kind = str_of(&involved["kind"]).to_lowercase();
    let target = match involved["name"].as_str().filter(|n| !n.is_empty()) {
        Some(name) => format!("{kind}/{name}"),
        None => kind,
    };
    let pick = |a: &Value, b: &Value| Some(str_of(a)).filter(|s| !s.is_empty()).unwrap_or_else(|| str_of(b));
    let component = pick(&ev["source"]["component"], &ev["reportingComponent"]);
    let instance = pick(&ev["source"]["host"], &ev["reportingInstance"]);
    let source = if instance.is_empty() { component } else { format!("{component}, {instance}") };
    vec![
        json!(last),
        json!(str_of(&ev["type"])),
        json!(str_of(&ev["reason"])),
        json!(target),
        json!(str_of(&involved["fieldPath"])),
        json!(source),
        json!(str_of(&ev["message"]).trim()),
        json!(first),
        json!(count),
        ev["metadata"]["name"].clone(),
    ]
}

pub fn column_definitions(rt: &ResourceType) -> Vec<Value> {
    if is_event(rt) {
        return EVENT_COLUMNS
            .iter()
            .map(|(name, priority, description)| {
                let format = if *name == "Name" { "name" } else { "" };
                let type_ = if *name == "Count" { "integer" } else { "string" };
                json!({"name": name, "type": type_, "format": format, "description": description, "priority": priority})
            })
            .collect();
    }
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
    let cells = if is_event(rt) {
        event_cells(obj, now)
    } else {
        let mut cells = vec![obj["metadata"]["name"].clone()];
        cells.extend(rt.columns.iter().map(|c| cell(lookup(obj, &c.json_path), &c.type_, now)));
        cells
    };
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
