//! The document the client generators read: openapi/openapi.json without the rules between
//! fields (`allOf` entries marked `x-kairon-cross-field-rule`, api/src/rest/contract.rs). The
//! generators drop a kind that carries them (openapi-python-client: "can't be merged"), and a
//! client's types need only the fields; the server still checks the rules, and says which.
//! Streams of JSON lines (`application/x-ndjson`, which no generator reads) are offered as bytes:
//! the SDKs read those routes line by line themselves, with the event types generated from the
//! components.

use serde_json::Value;

/// The extension that marks a rule between fields (`contract::CROSS_FIELD_RULE`).
const CROSS_FIELD_RULE: &str = "x-kairon-cross-field-rule";

/// The media type of a stream of JSON lines, and what the generators are shown instead.
const NDJSON: &str = "application/x-ndjson";
const BYTES: &str = "application/octet-stream";

/// `doc` without its rules between fields, its JSON-lines streams shown as bytes.
pub fn client_view(mut doc: Value) -> Value {
    strip(&mut doc);
    ndjson_as_bytes(&mut doc);
    doc
}

fn ndjson_as_bytes(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(Value::Object(content)) = map.get_mut("content")
                && content.remove(NDJSON).is_some()
            {
                content.insert(BYTES.into(), serde_json::json!({"schema": {"type": "string", "format": "binary"}}));
            }
            map.values_mut().for_each(ndjson_as_bytes);
        }
        Value::Array(items) => items.iter_mut().for_each(ndjson_as_bytes),
        _ => {}
    }
}

fn strip(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(Value::Array(all)) = map.get_mut("allOf") {
                all.retain(|entry| entry.get(CROSS_FIELD_RULE).is_none());
                if all.is_empty() {
                    map.remove("allOf");
                }
            }
            map.values_mut().for_each(strip);
        }
        Value::Array(items) => items.iter_mut().for_each(strip),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_lines_are_shown_as_bytes() {
        let doc = json!({"paths": {"/s": {"get": {"responses": {"200": {"content": {
            "application/x-ndjson": {"schema": {"$ref": "#/components/schemas/E"}}}}}}}}});
        assert_eq!(
            client_view(doc),
            json!({"paths": {"/s": {"get": {"responses": {"200": {"content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}}}}}})
        );
    }

    #[test]
    fn only_the_marked_entries_go() {
        let doc = json!({"components": {"schemas": {
            "A": {"type": "object", "allOf": [{"x-kairon-cross-field-rule": "r", "anyOf": []}]},
            "B": {"allOf": [{"$ref": "#/components/schemas/A"}, {"x-kairon-cross-field-rule": "r"}]},
        }}});
        assert_eq!(
            client_view(doc),
            json!({"components": {"schemas": {
                "A": {"type": "object"},
                "B": {"allOf": [{"$ref": "#/components/schemas/A"}]},
            }}})
        );
    }
}
