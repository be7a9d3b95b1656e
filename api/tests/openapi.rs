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

/// The node's egress settings (allowlist, credentials, deny set, guest network) are read from
/// its config file at startup and nothing else: no route and no kind takes them. The only
/// egress route is the read-only check; the only egress fields say whether a credential would
/// be injected, and a Machine's own `spec.network.egress`, whose every mode narrows the node's
/// policy and none widens it (the node enforces it below its own: `runtime/tests/network.rs`
/// `a_machines_egress_rule_narrows_its_nodes_policy`). (On the runtime's side the policy is
/// built once into its immutable config.)
#[test]
fn no_route_or_kind_carries_the_nodes_egress_settings() {
    let looks_like_egress = |name: &str| {
        let n = name.to_ascii_lowercase();
        ["egress", "inject", "deny", "allowlist", "allowdomains", "allow_domains", "attachsandboxes", "bandwidth"]
            .iter()
            .any(|k| n.contains(k))
    };
    let doc = kairon_api::rest::openapi();
    let paths: Vec<(String, Vec<String>)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(p, _)| looks_like_egress(p))
        .map(|(p, item)| (p.clone(), item.as_object().unwrap().keys().cloned().collect()))
        .collect();
    assert_eq!(paths, vec![("/api/v1/nodes/{node}/egress-check".to_string(), vec!["post".to_string()])]);
    let mut fields = Vec::new();
    for (schema, body) in doc["components"]["schemas"].as_object().unwrap() {
        for prop in body["properties"].as_object().into_iter().flat_map(|p| p.keys()) {
            if looks_like_egress(prop) {
                fields.push(format!("{schema}.{prop}"));
            }
        }
    }
    assert_eq!(
        fields,
        ["EgressCheckResult.wouldInjectCredential", "NetworkSpec.egress"],
        "a schema takes egress settings"
    );
    let machine_rule = &doc["components"]["schemas"]["EgressSpec"];
    let mut props: Vec<&String> = machine_rule["properties"].as_object().unwrap().keys().collect();
    props.sort();
    assert_eq!(props, ["allow", "mode"], "a Machine's egress rule holds a mode and its allowlist, nothing more");
    assert_eq!(
        doc["components"]["schemas"]["EgressMode"]["enum"],
        serde_json::json!(["Internet", "None", "Allowlist"]),
        "every mode narrows the node's policy"
    );
    // The kinds (what kubectl and the Kubernetes paths write) carry none either.
    let crds = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds.yaml"))
        .expect("deploy/crds.yaml");
    let hits: Vec<&str> = crds
        .lines()
        .map(|l| l.trim())
        .filter(|l| l.ends_with(':') && looks_like_egress(l.trim_end_matches(':')))
        .collect();
    assert!(hits.iter().all(|h| *h == "egress:"), "a CRD field looks like an egress setting: {hits:?}");
    assert_eq!(
        hits.len(),
        4,
        "spec.network.egress of a Machine and of a pool's template, in each served version: {hits:?}"
    );
}

/// The document's version is the SDKs' (generated from it, they say which contract they speak).
#[test]
fn the_documents_version_is_the_sdks() {
    let doc = kairon_api::rest::openapi();
    let version = doc["info"]["version"].as_str().expect("info.version");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = std::fs::read_to_string(root.join("sdk/python/kairon/_version.py")).unwrap();
    let typescript = std::fs::read_to_string(root.join("sdk/typescript/src/version.ts")).unwrap();
    assert!(python.contains(&format!("__version__ = \"{version}\"")), "Python SDK: {python}");
    assert!(typescript.contains(&format!("VERSION = \"{version}\"")), "TypeScript SDK: {typescript}");
}
