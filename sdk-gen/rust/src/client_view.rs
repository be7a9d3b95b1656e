//! The document the client generators read: openapi/openapi.json without the rules between
//! fields (`allOf` entries marked `x-kairon-cross-field-rule`, api/src/rest/contract.rs). The
//! generators drop a kind that carries them (openapi-python-client: "can't be merged"), and a
//! client's types need only the fields; the server still checks the rules, and says which.

use serde_json::Value;

/// The extension that marks a rule between fields (`contract::CROSS_FIELD_RULE`).
const CROSS_FIELD_RULE: &str = "x-kairon-cross-field-rule";

/// `doc` without its rules between fields.
pub fn client_view(mut doc: Value) -> Value {
    strip(&mut doc);
    doc
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
