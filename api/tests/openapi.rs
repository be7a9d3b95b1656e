//! The committed OpenAPI document is the contract the SDKs are generated from: it must be what
//! the code serves. `KAIRON_BLESS=1 cargo test -p kairon-api --test openapi` rewrites it.

use std::collections::HashSet;

fn committed_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../openapi/openapi.json")
}

#[test]
fn committed_document_matches_the_code() {
    let now = kairon_api::rest::openapi_text();
    if std::env::var_os("KAIRON_BLESS").is_some() {
        std::fs::write(committed_path(), &now).expect("writing openapi/openapi.json");
        return;
    }
    let committed = std::fs::read_to_string(committed_path()).expect("openapi/openapi.json is committed");
    assert!(
        committed == now,
        "openapi/openapi.json is stale: regenerate it with `KAIRON_BLESS=1 cargo test -p kairon-api --test openapi` \
         (then regenerate the SDK clients)"
    );
}

#[test]
fn every_operation_is_named_once_and_every_response_described() {
    let doc = kairon_api::rest::openapi();
    let mut ids = HashSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path} has no operationId"));
            assert!(ids.insert(id.to_string()), "operationId {id} is used twice");
            for (code, resp) in op["responses"].as_object().unwrap() {
                assert!(
                    resp["description"].as_str().is_some_and(|d| !d.is_empty()),
                    "{method} {path} response {code} has no description (generators reject it)"
                );
            }
            assert!(!path.contains('*'), "{path}: catch-all segments must be documented as {{name}}");
        }
    }
    assert!(ids.len() >= 70, "only {} operations: a route list lost some", ids.len());
}
