//! OpenAPI 3.1 → 3.0, as much of it as utoipa emits: `type: [T, "null"]` → `type: T` +
//! `nullable`, `oneOf: [X, {type: null}]` → `allOf: [X]` + `nullable`, `const` → a one-value
//! `enum`, numeric `exclusiveMinimum/Maximum` → the 3.0 boolean form, and 3.1-only keywords
//! (`propertyNames`, `$schema`, `examples`, `contentMediaType`, `license.identifier`) dropped.

use serde_json::{Map, Value, json};

pub fn to_openapi_30(mut doc: Value) -> Value {
    if let Some(o) = doc.as_object_mut() {
        o.insert("openapi".into(), json!("3.0.3"));
        if let Some(lic) = o.get_mut("info").and_then(|i| i.get_mut("license")).and_then(Value::as_object_mut) {
            lic.remove("identifier");
        }
    }
    walk(&mut doc);
    one_error_type(&mut doc);
    plain_parameters(&mut doc);
    walk_strings(&mut doc);
    doc
}

/// The server's "no NUL character" on every request string (the API's `contract.rs`) would make
/// progenitor wrap each such field in a newtype of its own; the server refuses a NUL with a
/// 400 that says so, so the client's strings stay plain (other patterns stay as they are).
fn walk_strings(v: &mut Value) {
    match v {
        Value::Array(items) => items.iter_mut().for_each(walk_strings),
        Value::Object(o) => {
            if let Some(p) = o.get("pattern").and_then(Value::as_str) {
                if p == NO_NUL {
                    o.remove("pattern");
                } else if let Some(rest) = p.strip_prefix(NO_NUL_AHEAD) {
                    let unwrapped = match rest.strip_prefix("[\\s\\S]*?(?:").and_then(|r| r.strip_suffix(')')) {
                        Some(inner) => inner.to_string(),
                        None => format!("^{rest}"),
                    };
                    o.insert("pattern".into(), json!(unwrapped));
                }
            }
            o.values_mut().for_each(walk_strings);
        }
        _ => {}
    }
}

const NO_NUL: &str = "^[^\\u0000]*$";
const NO_NUL_AHEAD: &str = "^(?![\\s\\S]*\\u0000)";

/// progenitor makes each constrained parameter (a pattern, an enum) a newtype of its own per
/// operation (`MachineDeleteNamespace`, `MachineWaitNamespace`, …). kaironctl passes what the
/// user typed and shows the server's 400, which says what to fix: its parameters stay plain.
fn plain_parameters(doc: &mut Value) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else { return };
    for op in paths.values_mut().filter_map(Value::as_object_mut).flat_map(|item| item.values_mut()) {
        let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) else { continue };
        for schema in params.iter_mut().filter_map(|p| p.get_mut("schema")).filter_map(Value::as_object_mut) {
            for key in ["pattern", "minLength", "maxLength", "enum", "format", "anyOf"] {
                schema.remove(key);
            }
        }
    }
}

/// progenitor allows one error body type per operation: an error response that documents no
/// body (a 413 from the body limit) beside ones that do is left to its "unexpected response".
fn one_error_type(doc: &mut Value) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else { return };
    for op in paths.values_mut().filter_map(Value::as_object_mut).flat_map(|item| item.values_mut()) {
        let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else { continue };
        let is_error = |code: &str| !code.starts_with('2') && !code.starts_with('1');
        let has_body = |r: &Value| r.get("content").is_some_and(|c| c.as_object().is_some_and(|c| !c.is_empty()));
        if responses.iter().any(|(c, r)| is_error(c) && has_body(r)) {
            responses.retain(|c, r| !is_error(c) || has_body(r));
        }
    }
}

fn is_null_schema(v: &Value) -> bool {
    v.get("type").and_then(Value::as_str) == Some("null")
}

fn walk(v: &mut Value) {
    match v {
        Value::Array(items) => items.iter_mut().for_each(walk),
        Value::Object(o) => {
            convert(o);
            o.values_mut().for_each(walk);
        }
        _ => {}
    }
}

fn convert(o: &mut Map<String, Value>) {
    for key in
        ["propertyNames", "$schema", "contentMediaType", "contentEncoding", "unevaluatedProperties", "prefixItems"]
    {
        o.remove(key);
    }
    if let Some(Value::Array(ex)) = o.remove("examples")
        && let Some(first) = ex.into_iter().next()
    {
        o.insert("example".into(), first);
    }
    // `type: ["string", "null"]`
    if let Some(Value::Array(types)) = o.get("type").cloned() {
        let real: Vec<Value> = types.iter().filter(|t| t.as_str() != Some("null")).cloned().collect();
        if real.len() < types.len() {
            o.insert("nullable".into(), json!(true));
        }
        match real.len() {
            0 => {
                o.remove("type");
            }
            1 => {
                o.insert("type".into(), real[0].clone());
            }
            _ => {
                o.remove("type");
                o.insert("oneOf".into(), Value::Array(real.into_iter().map(|t| json!({ "type": t })).collect()));
            }
        }
    }
    // `oneOf: [X, {type: null}]` (an optional nested object)
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(alts)) = o.get(key).cloned()
            && alts.iter().any(is_null_schema)
        {
            let rest: Vec<Value> = alts.into_iter().filter(|a| !is_null_schema(a)).collect();
            o.remove(key);
            o.insert("nullable".into(), json!(true));
            if rest.len() == 1 {
                let mut only = rest.into_iter().next().unwrap_or_default();
                // A description beside a $ref is not allowed in 3.0: lift it out.
                if let Some(d) = only.as_object_mut().and_then(|m| m.remove("description")) {
                    o.entry("description").or_insert(d);
                }
                o.insert("allOf".into(), json!([only]));
            } else {
                o.insert(key.into(), Value::Array(rest));
            }
        }
    }
    if let Some(c) = o.remove("const") {
        o.insert("enum".into(), json!([c]));
    }
    for (num, bound) in [("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")] {
        if let Some(n) = o.get(num).filter(|v| v.is_number()).cloned() {
            o.insert(bound.into(), n);
            o.insert(num.into(), json!(true));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nullable_types_refs_and_consts_become_3_0() {
        let doc = json!({
            "openapi": "3.1.0",
            "info": {"title": "t", "version": "1", "license": {"name": "A", "identifier": "A"}},
            "components": {"schemas": {"S": {"type": "object", "properties": {
                "a": {"type": ["string", "null"]},
                "b": {"oneOf": [{"$ref": "#/components/schemas/T", "description": "d"}, {"type": "null"}]},
                "c": {"const": "x"},
                "d": {"type": "object", "propertyNames": {"type": "string"}},
                "e": {"type": "integer", "exclusiveMinimum": 0}
            }}}}
        });
        let out = to_openapi_30(doc);
        assert_eq!(out["openapi"], "3.0.3");
        assert!(out["info"]["license"].get("identifier").is_none());
        let p = &out["components"]["schemas"]["S"]["properties"];
        assert_eq!(p["a"], json!({"type": "string", "nullable": true}));
        assert_eq!(
            p["b"],
            json!({"allOf": [{"$ref": "#/components/schemas/T"}], "nullable": true, "description": "d"})
        );
        assert_eq!(p["c"], json!({"enum": ["x"]}));
        assert_eq!(p["d"], json!({"type": "object"}));
        assert_eq!(p["e"], json!({"type": "integer", "minimum": 0, "exclusiveMinimum": true}));
    }
}
