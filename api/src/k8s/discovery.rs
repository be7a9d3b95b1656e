//! Discovery documents (`/api`, `/apis`, group versions, `/version`) and the minimal
//! `/openapi/v3` that lets `kubectl apply` validate on the server.

use serde_json::{Value, json};

use super::registry::{Registry, ResourceType};

const VERBS: [&str; 8] = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

pub fn version() -> Value {
    json!({
        "major": "1", "minor": "32",
        "gitVersion": format!("v1.32.0-kairon.{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "",
        "goVersion": "", "compiler": "rustc", "platform": "linux/amd64"
    })
}

pub fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]})
}

fn group_doc(group: &str, versions: &[&str]) -> Value {
    let vs: Vec<Value> =
        versions.iter().map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v})).collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs[0]})
}

pub fn groups(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg.groups().iter().map(|(g, vs)| group_doc(g, vs)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn group(reg: &Registry, name: &str) -> Option<Value> {
    reg.groups().into_iter().find(|(g, _)| *g == name).map(|(g, vs)| {
        let mut d = group_doc(g, &vs);
        d["kind"] = "APIGroup".into();
        d["apiVersion"] = "v1".into();
        d
    })
}

fn resource_entries(t: &ResourceType) -> Vec<Value> {
    let verbs: Vec<&str> =
        if t.plural == "namespaces" { vec!["create", "delete", "get", "list", "watch"] } else { VERBS.to_vec() };
    let mut out = vec![json!({
        "name": t.plural, "singularName": t.singular, "namespaced": t.namespaced, "kind": t.kind,
        "verbs": verbs, "shortNames": t.short_names, "categories": t.categories,
    })];
    if t.status_subresource {
        out.push(json!({
            "name": format!("{}/status", t.plural), "singularName": "", "namespaced": t.namespaced,
            "kind": t.kind, "verbs": ["get", "patch", "update"],
        }));
    }
    out
}

pub fn resources(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let list: Vec<Value> = reg.in_group_version(group, version).flat_map(resource_entries).collect();
    if list.is_empty() {
        return None;
    }
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list}))
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// `/openapi/v3`: one entry per group version.
pub fn openapi_index(reg: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    let mut gvs: Vec<(&str, &str)> =
        reg.types.iter().flat_map(|t| t.versions.iter().map(move |v| (t.group, *v))).collect();
    gvs.sort();
    gvs.dedup();
    for (g, v) in gvs {
        let p = gv_path(g, v);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", env!("CARGO_PKG_VERSION"))}),
        );
    }
    json!({"paths": paths})
}

/// The OpenAPI document of one group version: each kind's schema (tagged with its
/// group-version-kind) and its paths, whose PATCH declares `fieldValidation` so kubectl lets
/// the server validate.
pub fn openapi_group_version(reg: &Registry, path: &str) -> Option<Value> {
    let (group, version) = match path.split('/').collect::<Vec<_>>()[..] {
        ["api", v] => ("", v),
        ["apis", g, v] => (g, v),
        _ => return None,
    };
    let mut schemas = serde_json::Map::new();
    let mut paths = serde_json::Map::new();
    for t in reg.in_group_version(group, version) {
        let gvk = json!([{"group": group, "version": version, "kind": t.kind}]);
        let schema_name = if group.is_empty() {
            format!("io.k8s.api.core.v1.{}", t.kind)
        } else {
            format!("{}.{version}.{}", group.split('.').rev().collect::<Vec<_>>().join("."), t.kind)
        };
        let mut schema = t.schema.clone();
        if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            props.insert("apiVersion".into(), json!({"type": "string"}));
            props.insert("kind".into(), json!({"type": "string"}));
            props.insert("metadata".into(), json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
        }
        schema["x-kubernetes-group-version-kind"] = gvk.clone();
        schemas.insert(schema_name.clone(), schema);
        let reference = json!({"$ref": format!("#/components/schemas/{schema_name}")});
        let ok = json!({"200": {"description": "OK", "content": {"application/json": {"schema": reference}}}});
        let item = if t.namespaced {
            format!("/{}/namespaces/{{namespace}}/{}/{{name}}", gv_path(group, version), t.plural)
        } else {
            format!("/{}/{}/{{name}}", gv_path(group, version), t.plural)
        };
        let params = json!([
            {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
        ]);
        let op = |action: &str| json!({"x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk[0], "parameters": params, "responses": ok});
        let mut patch = op("patch");
        if let Some(p) = patch["parameters"].as_array_mut() {
            p.push(json!({"name": "force", "in": "query", "schema": {"type": "boolean"}}));
        }
        paths.insert(item, json!({"get": op("get"), "put": op("put"), "patch": patch, "delete": op("delete")}));
    }
    if schemas.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kairon", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}
