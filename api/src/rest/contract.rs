//! What the OpenAPI document says beyond each route's own annotations, in one place: the
//! refusals every route of a kind can answer (a bad token, a name that is not one, a body that
//! is not JSON, an unreachable dependency, …) and the form of the path and query parameters the
//! server checks. Each rule mirrors the code that enforces it, named beside it, so the document
//! tells generated clients (and the fuzz test) the whole truth.

use serde_json::{Map, Value, json};

/// `check_name` (machines/objects.rs): lowercase letters, digits, `-` and `.`, starting and ending with
/// a letter or digit.
pub const NAME_PATTERN: &str = "^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$";
pub const NAME_MAX: usize = 253;
/// A namespace is a DNS label, as the Kubernetes API checks it (it answers 400 otherwise).
pub const NAMESPACE_PATTERN: &str = "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$";
pub const NAMESPACE_MAX: usize = 63;
/// A runtime ID segment (`kairon_runtime_api::ids`): no `/`, no control character, not `.`
/// or `..`.
const SEGMENT_PATTERN: &str = "^(?!\\.\\.?$)[^/\\u0000-\\u001f\\u007f-\\u009f]+$";
const SEGMENT_MAX: usize = 330;

/// The refusals an operation answers besides the ones its route lists, from what it is.
fn refusals(method: &str, path: &str, op: &Map<String, Value>) -> Vec<(&'static str, &'static str)> {
    let params: Vec<(&str, &str)> = op
        .get("parameters")
        .and_then(Value::as_array)
        .map(|ps| ps.iter().filter_map(|p| Some((p["name"].as_str()?, p["in"].as_str()?))).collect())
        .unwrap_or_default();
    let tag = op.get("tags").and_then(|t| t[0].as_str()).unwrap_or_default();
    let has_body = op.contains_key("requestBody");
    let relay = path.contains("/sandbox-http/");
    let mut out = vec![
        // server.rs `authenticate_rest`.
        ("401", "No bearer token, or one that is expired, not yet valid or not this server's"),
        // The Kubernetes API or the usage database did not answer (rest/error.rs).
        ("503", "A dependency (the Kubernetes API, the usage database) is unreachable: retry shortly"),
    ];
    if !params.is_empty() || has_body {
        out.push(("400", "A parameter or the body is invalid: the message says which and how"));
    }
    if params.iter().any(|(_, at)| *at == "path") {
        out.push(("404", "No such object (or node, process, file): the message names it"));
    }
    // auth.rs `may_access`, `admin_only`, `may_use_guest`: every route but the lists across
    // namespaces (which show only what the caller may read) and the node reads.
    let open_read = method == "get"
        && (matches!(path, "/api/v1/machines" | "/api/v1/machinepools" | "/api/v1/machineclaims")
            || path == "/api/v1/nodes"
            || path == "/api/v1/nodes/{node}");
    if !open_read {
        out.push(("403", "The caller may not do this here: the message names the rule"));
    }
    if has_body && !relay {
        // body.rs `JsonBody` and server.rs `limit_body`.
        out.push(("413", "The body is larger than this route takes: the message says the limit"));
        if !path.ends_with("/files") {
            out.push(("415", "The body is not JSON: send Content-Type: application/json"));
            out.push(("422", "The body is JSON but does not fit this route: the message names the field"));
        }
    }
    // Routes that reach a node's runtime: its refusals pass through, its failures are a 502.
    let reaches_runtime = matches!(tag, "Power" | "Guest")
        || (tag == "Nodes" && path.starts_with("/api/v1/nodes/{node}/"))
        || path.ends_with("/fork")
        || path.ends_with("/clone");
    if reaches_runtime {
        out.push((
            "409",
            "The Machine (or runtime object) is not in a state that allows this: the message says what to do",
        ));
        out.push(("422", "The node's runtime refused the request as invalid: the message says why"));
        out.push(("502", "The node's runtime is unreachable or failed: the message says which"));
    }
    if tag == "Guest" {
        // machines/guest.rs wake-on-connect.
        out.push(("504", "The Machine did not wake within its wakeTimeoutSeconds"));
    }
    // limits.rs: long polls, relays and log follows hold a connection slot of the caller's.
    let long_lived = path.ends_with("/wait")
        || path.ends_with("/console")
        || path.ends_with("/vnc")
        || path.ends_with("/exec/stream")
        || path.ends_with("/logs")
        || path.contains("/portforward/");
    if long_lived {
        out.push(("429", "The caller holds as many long-lived connections as it may: close one, or retry later"));
    }
    out
}

/// The form of a parameter the server checks, by name (and where it is).
fn parameter_schema(name: &str, at: &str, schema: &Value) -> Option<Value> {
    let string = |extra: Value| {
        let mut s = json!({"type": "string"});
        if let (Some(s), Some(extra)) = (s.as_object_mut(), extra.as_object()) {
            s.extend(extra.clone());
        }
        // An optional parameter stays nullable as it was.
        if schema["type"].as_array().is_some_and(|t| t.iter().any(|t| t == "null")) {
            s["type"] = json!(["string", "null"]);
        }
        s
    };
    let name_schema = || string(json!({"pattern": NAME_PATTERN, "minLength": 1, "maxLength": NAME_MAX}));
    Some(match (name, at) {
        ("namespace", _) => string(json!({"pattern": NAMESPACE_PATTERN, "minLength": 1, "maxLength": NAMESPACE_MAX})),
        ("name" | "node" | "item", _) => name_schema(),
        // guest.rs: an upload's octal mode.
        ("mode", "query") => string(json!({"pattern": "^\\+?0*[0-7]{1,4}$"})),
        // A Machine's runtime process ID (`kairon_runtime_api::Pid`).
        ("pid", "path") => string(json!({"pattern": SEGMENT_PATTERN, "maxLength": SEGMENT_MAX})),
        // `kairon_runtime_api::GuestPath`: absolute, no `.`/`..` segment, no control character.
        ("path", "query") => string(
            json!({"pattern": "^/(?!.*(^|/)\\.\\.?(/|$))[^\\u0000-\\u001f\\u007f-\\u009f]*$", "maxLength": 4096}),
        ),
        // The runtime's signal names (guest.rs `process_kill`).
        ("signal", "query") => string(json!({"enum": ["TERM", "KILL", "INT", "HUP", "QUIT", "USR1", "USR2"]})),
        // rest/objects.rs `DryRunQuery::is_dry_run`.
        ("dryRun", "query") => string(json!({"enum": ["All", ""]})),
        // usage.rs.
        ("groupBy", "query") => string(json!({"enum": ["namespace", "claim", "day"]})),
        // usage.rs `day`: `YYYY-MM-DD`; empty is the default, as absent.
        ("from" | "to", "query") => string(json!({
            "pattern": "^([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8]))?$",
            "description": "A UTC day, YYYY-MM-DD (days 29 to 31 are valid too where the month has them)"
        })),
        // k8s/selector.rs.
        ("labelSelector", "query") => string(json!({"pattern": label_selector_pattern()})),
        ("uid", "path") => string(json!({"format": "uuid"})),
        // machines/power.rs `freeze`: a positive duration (`kairon_model::duration`).
        ("unfreezeTimeout", "query") => string(json!({"pattern": "^[1-9][0-9]{0,5}[smh]$"})),
        _ => return None,
    })
}

/// A label selector as `k8s/selector.rs` reads it, in its plain forms: `k=v`, `k==v`, `k!=v`,
/// `k`, `!k`, `k in (a,b)`, `k notin (a)`, joined by commas (the parser also takes spaces
/// around them and `k>1`/`k<1`, which this pattern leaves out).
fn label_selector_pattern() -> String {
    let part = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
    let key = format!("(({part})(\\.{part})*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{{0,61}}[A-Za-z0-9])?");
    let value = "([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?";
    let requirement = format!("(!{key}|{key}((=|==|!=){value}| (in|notin) \\({value}(,{value})*\\))?)");
    format!("^({requirement}(,{requirement})*)?$")
}

/// What the server checks in the objects and bodies it reads, beyond their Rust types.
fn refine_schemas(schemas: &mut Map<String, Value>) {
    // machines/objects.rs `decode`: the route names the kind, and the group is the one version served.
    for kind in ["Machine", "MachinePool", "MachineClaim"] {
        if let Some(props) = schemas.get_mut(kind).and_then(|s| s.get_mut("properties")) {
            // The status is the controllers' and node agents': an object write keeps the stored one.
            props["status"]["readOnly"] = json!(true);
            props["kind"] =
                json!({"type": "string", "enum": [kind], "description": format!("`{kind}` (filled in when omitted).")});
            props["apiVersion"] =
                json!({"type": "string", "enum": ["kairon.zyvor.dev/v1"], "description": "Filled in when omitted."});
        }
    }
    // machines/objects.rs `decode`: the namespace is the path's; the server fills it in, and a body
    // that names another is refused.
    if let Some(meta) = schemas.get_mut("ObjectMeta").and_then(|s| s.get_mut("properties")) {
        meta["namespace"]["readOnly"] = json!(true);
        // Set by the server; read as RFC 3339 times when sent.
        for stamp in ["creationTimestamp", "deletionTimestamp"] {
            meta[stamp]["readOnly"] = json!(true);
            meta[stamp]["format"] = json!("date-time");
        }
        meta["uid"]["readOnly"] = json!(true);
        // k8s/handlers.rs `write`: a version the store gave, or none.
        meta["resourceVersion"]["pattern"] = json!("^[0-9]*$");
        meta["name"] = json!({"type": "string", "pattern": NAME_PATTERN, "minLength": 1, "maxLength": NAME_MAX});
    }
    // k8s/handlers.rs: the name of an object of these kinds is a DNS label, and a create (or a
    // replace, machines/objects.rs `decode`) names it.
    for kind in ["Machine", "MachinePool", "MachineClaim"] {
        if let Some(props) = schemas.get_mut(kind).and_then(|s| s.get_mut("properties")) {
            props["metadata"] = json!({"allOf": [{"$ref": "#/components/schemas/ObjectMeta"}, {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string", "pattern": DNS_LABEL, "maxLength": 63}},
            }]});
        }
    }
    // model/src/validate.rs: a claim names its pool.
    if let Some(pool) = schemas.get_mut("MachineClaimSpec").and_then(|s| s.pointer_mut("/properties/poolName")) {
        pool["pattern"] = json!(NAME_PATTERN);
        pool["maxLength"] = json!(NAME_MAX);
    }

    // guest.rs `check_command`: a program to run, no NUL byte in any argument.
    if let Some(command) = schemas.get_mut("ExecRequest").and_then(|s| s.pointer_mut("/properties/command")) {
        command["minItems"] = json!(1);
        command["prefixItems"] = json!([{"type": "string", "minLength": 1}]);
        command["items"] = json!({"type": "string", "pattern": "^[^\\u0000]*$"});
    }
    // nodes.rs `egress_check`: a host, not blank.
    if let Some(host) = schemas.get_mut("EgressCheckBody").and_then(|s| s.pointer_mut("/properties/host")) {
        host["pattern"] = json!("\\S");
    }
    // machines/power.rs `copy`: the new Machine's name.
    if let Some(name) = schemas.get_mut("CopyRequest").and_then(|s| s.pointer_mut("/properties/name")) {
        name["pattern"] = json!(DNS_LABEL);
        name["maxLength"] = json!(63);
    }
    machine_spec_rules(schemas);
    // What is stored holds no NUL character (PostgreSQL's jsonb: db `StoreError::Invalid`, a
    // 400), nor does a command line (guest.rs `check_command`): every string of what requests
    // send says so. Answers may carry one (a command's output), so only request schemas.
    let mut requests: Vec<String> =
        ["Machine", "MachinePool", "MachineClaim", "ExecRequest"].iter().map(|s| s.to_string()).collect();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(name) = requests.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some(schema) = schemas.get_mut(&name) else { continue };
        no_nul_in_strings(schema);
        requests.extend(refs(schema));
    }
}

/// The component schemas `schema` refers to.
fn refs(schema: &Value) -> Vec<String> {
    match schema {
        Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| match (k.as_str(), v) {
                ("$ref", Value::String(r)) => {
                    r.strip_prefix("#/components/schemas/").map(String::from).into_iter().collect()
                }
                _ => refs(v),
            })
            .collect(),
        Value::Array(items) => items.iter().flat_map(refs).collect(),
        _ => Vec::new(),
    }
}

/// A DNS-1123 label (`model::validate::is_dns_label`).
const DNS_LABEL: &str = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$";
/// A DNS-1123 subdomain (`model::validate::is_dns_subdomain`).
const DNS_SUBDOMAIN: &str = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$";
/// A quantity greater than 0 (`model::validate::quantity`), in its plain forms.
const POSITIVE_QUANTITY: &str = "^[1-9][0-9]{0,8}(\\.[0-9]{1,3})?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$";

/// `model/src/validate.rs`'s rules on single fields: bounds and forms.
fn machine_spec_rules(schemas: &mut Map<String, Value>) {
    let mut set = |schema: &str, pointer: &str, key: &str, value: Value| {
        if let Some(v) = schemas.get_mut(schema).and_then(|s| s.pointer_mut(pointer)) {
            v[key] = value;
        }
    };
    set("Lifecycle", "/properties/idleTimeoutSeconds", "minimum", json!(60));
    set("Lifecycle", "/properties/maxLifetimeSeconds", "minimum", json!(1));
    set("Lifecycle", "/properties/wakeTimeoutSeconds", "minimum", json!(1));
    set("Lifecycle", "/properties/idleCPUMillicores", "minimum", json!(0));
    set("Resources", "/properties/cpu", "pattern", json!(POSITIVE_QUANTITY));
    set("Resources", "/properties/memory", "pattern", json!(POSITIVE_QUANTITY));
    set("ImageSource", "/properties/path", "pattern", json!("^/"));
    set("KernelSpec", "/properties/path", "pattern", json!("^/"));
    set("SandboxSpec", "/properties/templateName", "pattern", json!(DNS_SUBDOMAIN));
    set("SandboxSpec", "/properties/templateName", "maxLength", json!(253));
    set("NetworkSpec", "/properties/macAddress", "pattern", json!("^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$"));
    set("Volume", "/properties/name", "pattern", json!(DNS_LABEL));
    set("Volume", "/properties/size", "pattern", json!(POSITIVE_QUANTITY));
    set("DeviceClaim", "/properties/resourceName", "minLength", json!(1));
    set("Hugepages", "/properties/pageSize", "enum", json!(["2Mi", "1Gi"]));
    set("MachineSpec", "/properties/cpuSet", "pattern", json!("^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$"));
    set("MachineSpec", "/properties/nodeName", "pattern", json!(DNS_SUBDOMAIN));
    set("MachineSpec", "/properties/nodeName", "maxLength", json!(253));
    set("MachineSpec", "/properties/ttlSeconds", "minimum", json!(1));
    set("MachinePoolSpec", "/properties/replicas", "minimum", json!(0));
    set("MachinePoolSpec", "/properties/warmupSeconds", "minimum", json!(0));
    set("MachineClaimSpec", "/properties/ttlSeconds", "minimum", json!(1));
    // Not said here: the rules between fields (a Machine boots an image or a kernel, or runs a
    // sandbox; what a sandbox may not set; a VM's whole vCPUs; a pool template's ttlSeconds;
    // a volume's size or path; a bridge's name). Written as anyOf/oneOf beside the objects,
    // the client generators drop the kinds that carry them (openapi-python-client: "can't be
    // merged"), so model/src/validate.rs and tests/tests/errors.rs keep them.
}

/// Adds "no NUL character" to every string schema under `schema`.
fn no_nul_in_strings(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let is_string = match map.get("type") {
                Some(Value::String(t)) => t == "string",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
                _ => false,
            };
            if is_string && !map.contains_key("enum") && !map.contains_key("format") {
                let pattern = match map.get("pattern").and_then(Value::as_str) {
                    // Says so already (or excludes control characters altogether).
                    Some(p) if p.contains("\\u0000") => None,
                    // The pattern as it was, after a look at the whole string first.
                    Some(p) => Some(match p.strip_prefix('^') {
                        Some(anchored) => format!("^(?![\\s\\S]*\\u0000){anchored}"),
                        None => format!("^(?![\\s\\S]*\\u0000)[\\s\\S]*?(?:{p})"),
                    }),
                    None => Some("^[^\\u0000]*$".to_string()),
                };
                if let Some(p) = pattern {
                    map.insert("pattern".into(), json!(p));
                }
            }
            for v in map.values_mut() {
                no_nul_in_strings(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(no_nul_in_strings),
        _ => {}
    }
}

/// Completes the document: every operation lists its refusals with the JSON error body, and
/// the parameters the server checks carry their form.
pub fn complete(doc: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    let Ok(mut v) = serde_json::to_value(&doc) else { return doc };
    if let Some(schemas) = v.pointer_mut("/components/schemas").and_then(Value::as_object_mut) {
        refine_schemas(schemas);
    }
    if let Some(paths) = v.get_mut("paths").and_then(Value::as_object_mut) {
        for (path, item) in paths.iter_mut() {
            let Some(item) = item.as_object_mut() else { continue };
            for (method, op) in item.iter_mut() {
                let Some(op) = op.as_object_mut() else { continue };
                if !matches!(
                    method.as_str(),
                    "get" | "put" | "post" | "delete" | "patch" | "head" | "options" | "trace"
                ) {
                    continue;
                }
                let added = refusals(method, path, op);
                let responses = op.entry("responses").or_insert_with(|| json!({}));
                for (status, description) in added {
                    if responses.get(status).is_none() {
                        responses[status] = json!({
                            "description": description,
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
                        });
                    }
                }
                if let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) {
                    for p in params {
                        let (Some(name), Some(at)) = (p["name"].as_str(), p["in"].as_str()) else { continue };
                        if let Some(s) = parameter_schema(name, at, &p["schema"]) {
                            p["schema"] = s;
                        }
                    }
                }
            }
        }
    }
    serde_json::from_value(v)
        .unwrap_or_else(|e| panic!("the completed OpenAPI document no longer reads as utoipa's: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_pattern_is_check_name() {
        let re = regex::Regex::new(NAME_PATTERN).unwrap();
        for name in
            ["a", "agents", "my-sb.2", "x1", "a-b-c", &"a".repeat(253), "é", "A", "-a", "a-", ".a", "a b", "a/b", ""]
        {
            let by_pattern = re.is_match(name) && name.len() <= NAME_MAX;
            assert_eq!(by_pattern, crate::machines::check_name("name", name).is_ok(), "{name:?}");
        }
    }

    #[test]
    fn the_namespace_pattern_is_check_namespace() {
        let re = regex::Regex::new(NAMESPACE_PATTERN).unwrap();
        for ns in ["a", "agents", "team-1", &"a".repeat(63), &"a".repeat(64), "a.b", "A", "-a", "a-", "", "é"] {
            let by_pattern = re.is_match(ns) && ns.len() <= NAMESPACE_MAX;
            assert_eq!(by_pattern, crate::machines::check_namespace(ns).is_ok(), "{ns:?}");
        }
    }

    #[test]
    fn every_operation_lists_its_refusals_with_the_error_body() {
        let v = serde_json::to_value(crate::rest::openapi()).unwrap();
        for (path, item) in v["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let r = &op["responses"];
                assert!(r.get("401").is_some(), "{method} {path}");
                if op.get("requestBody").is_some() && !path.contains("/sandbox-http/") {
                    assert!(r.get("413").is_some(), "{method} {path}");
                }
                assert!(r.get("default").is_none(), "{method} {path}: every status listed, no default");
            }
        }
        let exec = &v["paths"]["/api/v1/machines/{namespace}/{name}/exec"]["post"]["responses"];
        for s in ["400", "401", "403", "404", "409", "413", "415", "422", "502", "503", "504"] {
            assert!(exec.get(s).is_some(), "exec lists {s}");
        }
        let ns = &v["paths"]["/api/v1/machines/{namespace}"]["get"]["parameters"][0]["schema"];
        assert_eq!(ns["pattern"], NAMESPACE_PATTERN);
    }
}
