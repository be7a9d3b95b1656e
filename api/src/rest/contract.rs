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
    for kind in ["Machine", "MachinePool", "MachineClaim", "KaironTemplate"] {
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
    // replace, machines/objects.rs `decode`) names it: one schema for the three kinds.
    schemas.insert(
        "KindObjectMeta".into(),
        json!({
            "description": "The metadata of a Machine, MachinePool, MachineClaim or KaironTemplate: its name is a DNS label, and required",
            "allOf": [{"$ref": "#/components/schemas/ObjectMeta"}, {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string", "pattern": DNS_LABEL, "maxLength": 63}},
            }]
        }),
    );
    for kind in ["Machine", "MachinePool", "MachineClaim", "KaironTemplate"] {
        if let Some(props) = schemas.get_mut(kind).and_then(|s| s.get_mut("properties")) {
            props["metadata"] = json!({"$ref": "#/components/schemas/KindObjectMeta"});
        }
    }
    // model/src/validate.rs `validate_template`: an image reference without whitespace, and
    // bounded steps that are not blank.
    if let Some(spec) = schemas.get_mut("KaironTemplateSpec").and_then(|s| s.get_mut("properties")) {
        use kairon_model::template::{MAX_BUILD_STEPS, MAX_IMAGE_LEN, MAX_STEP_LEN};
        spec["image"]["pattern"] = json!("^\\S+$");
        spec["image"]["maxLength"] = json!(MAX_IMAGE_LEN);
        spec["steps"]["maxItems"] = json!(MAX_BUILD_STEPS);
        spec["steps"]["items"] = json!({"type": "string", "pattern": "\\S", "maxLength": MAX_STEP_LEN});
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
        ["Machine", "MachinePool", "MachineClaim", "KaironTemplate", "KindObjectMeta", "ExecRequest"]
            .iter()
            .map(|s| s.to_string())
            .collect();
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
    set("PoolAutoscale", "/properties/minReplicas", "minimum", json!(0));
    set("PoolAutoscale", "/properties/minReplicas", "maximum", json!(kairon_model::validate::MAX_POOL_REPLICAS));
    set("PoolAutoscale", "/properties/maxReplicas", "minimum", json!(1));
    set("PoolAutoscale", "/properties/maxReplicas", "maximum", json!(kairon_model::validate::MAX_POOL_REPLICAS));
    set("PoolAutoscale", "/properties/targetHitRate", "exclusiveMinimum", json!(0));
    set("PoolAutoscale", "/properties/targetHitRate", "maximum", json!(1));
    set("PoolAutoscale", "/properties/windowSeconds", "minimum", json!(10));
    set("PoolAutoscale", "/properties/windowSeconds", "maximum", json!(86_400));
    set("PoolAutoscale", "/properties/scaleDownDelaySeconds", "minimum", json!(0));
    set("PoolAutoscale", "/properties/scaleDownDelaySeconds", "maximum", json!(86_400));
    set("MachineSpec", "/properties/env", "maxProperties", json!(kairon_model::validate::MAX_ENV_VARS));
    set("MachineClaimSpec", "/properties/env", "maxProperties", json!(kairon_model::validate::MAX_ENV_VARS));
    // model/src/validate.rs: a Linux interface name.
    set("NetworkSpec", "/properties/bridge", "maxLength", json!(15));
    // model/src/validate.rs `validate_egress`: each entry as model/src/egress.rs reads it.
    set("EgressSpec", "/properties/allow", "maxItems", json!(kairon_model::egress::MAX_ALLOW_ENTRIES));
    set(
        "EgressSpec",
        "/properties/allow",
        "items",
        json!({"type": "string", "pattern": kairon_model::egress::ALLOW_ENTRY_PATTERN,
               "maxLength": kairon_model::egress::MAX_ALLOW_ENTRY}),
    );
    // model/src/validate.rs `validate_secret_env`: a Secret of the namespace and one of its keys.
    set("SecretKeyRef", "/properties/name", "pattern", json!(DNS_SUBDOMAIN));
    set("SecretKeyRef", "/properties/name", "maxLength", json!(NAME_MAX));
    set("SecretKeyRef", "/properties/key", "pattern", json!("^[-._a-zA-Z0-9]+$"));
    set("SecretKeyRef", "/properties/key", "maxLength", json!(253));
    set("MachineSpec", "/properties/secretEnv", "maxProperties", json!(kairon_model::validate::MAX_ENV_VARS));
    set("MachineClaimSpec", "/properties/secretEnv", "maxProperties", json!(kairon_model::validate::MAX_ENV_VARS));
    // machines/lifetime.rs `extend`.
    set("ExtendRequest", "/properties/seconds", "minimum", json!(1));
    set("ExtendRequest", "/properties/seconds", "maximum", json!(kairon_model::expiry::MAX_EXTEND_SECONDS));
    set("TimeoutRequest", "/properties/seconds", "minimum", json!(1));
    set("TimeoutRequest", "/properties/seconds", "maximum", json!(kairon_model::expiry::MAX_EXTEND_SECONDS));
}

/// The extension that marks an `allOf` entry as a rule between fields. The client generators
/// drop the kinds that carry such constructs (openapi-python-client: "can't be merged"), so
/// their input is the document without them (`sdk-gen/rust/src/client_view.rs`).
pub const CROSS_FIELD_RULE: &str = "x-kairon-cross-field-rule";

/// A whole, positive quantity (a VM's vCPUs) in the forms [`POSITIVE_QUANTITY`] takes:
/// `Quantity::is_whole` on them. A decimal suffix with at most three decimals is whole; `m`
/// needs a multiple of 1000; a binary suffix needs a fraction times 2^10 whole: eighths.
const WHOLE_QUANTITY: &str = "^([1-9][0-9]{0,8}(\\.0{1,3})?|[1-9][0-9]{0,5}000(\\.0{1,3})?m|[1-9][0-9]{0,8}(\\.[0-9]{1,3})?(k|M|G|T)|[1-9][0-9]{0,8}(\\.(0|5|00|25|50|75|000|125|250|375|500|625|750|875))?(Ki|Mi|Gi|Ti))$";

/// `properties` of one field, as a schema.
fn field(name: &str, schema: Value) -> Value {
    json!({"properties": {name: schema}})
}

/// The field is there and not null.
fn set(name: &str) -> Value {
    json!({"required": [name], "properties": {name: {"not": {"type": "null"}}}})
}

/// The field is absent or null.
fn unset(name: &str) -> Value {
    field(name, json!({"type": "null"}))
}

/// A rule between fields, as an `allOf` entry.
fn rule(name: &str, description: &str, mut schema: Value) -> Value {
    schema[CROSS_FIELD_RULE] = json!(name);
    schema["description"] = json!(description);
    schema
}

/// `model/src/validate.rs`'s rules between the fields of a Machine spec (at create: the rules
/// against the stored object are the replace's), as `allOf` entries of `MachineSpec`.
pub fn machine_spec_cross_field_rules() -> Vec<Value> {
    let template_sandbox = json!({"required": ["sandbox"], "properties": {"sandbox": {
        "type": "object", "required": ["templateName"], "properties": {"templateName": {"type": "string"}}
    }}});
    let kernel = json!({"required": ["runtime"], "properties": {"runtime": {
        "type": "object", "required": ["kernel"], "properties": {"kernel": {"type": "object"}}
    }}});
    vec![
        rule(
            "boot-source",
            "A VM boots spec.image or spec.runtime.kernel; a sandbox runs spec.sandbox.templateName or spec.image",
            json!({"anyOf": [
                set("image"),
                {"allOf": [unset("sandbox"), kernel]},
                template_sandbox.clone(),
            ]}),
        ),
        rule(
            "sandbox-has-no-qemu-options",
            "A sandbox sets no deviceClaims, numa, cpuSet or hugepages (the qemu backend's)",
            json!({"anyOf": [
                unset("sandbox"),
                {"allOf": [field("deviceClaims", json!({"maxItems": 0})), unset("numa"), unset("cpuSet"), unset("hugepages")]},
            ]}),
        ),
        rule(
            "template-sandbox-power",
            "A template sandbox runs under runc: it cannot hibernate or halt",
            json!({"anyOf": [
                {"not": template_sandbox},
                {"allOf": [
                    field("powerState", json!({"not": {"enum": ["Hibernated", "Halted"]}})),
                    field("lifecycle", json!({"anyOf": [{"type": "null"}, field("idleAction", json!({"not": {"enum": ["Hibernate", "Halt"]}}))]})),
                ]},
            ]}),
        ),
        rule(
            "vm-whole-vcpus",
            "A VM has whole vCPUs",
            json!({"anyOf": [
                set("sandbox"),
                field("resources", json!({"anyOf": [{"type": "null"}, field("cpu", json!({"pattern": WHOLE_QUANTITY}))]})),
            ]}),
        ),
    ]
}

fn cross_field_rules(schemas: &mut Map<String, Value>) {
    let mut add = |schema: &str, rules: Vec<Value>| {
        if let Some(s) = schemas.get_mut(schema).and_then(Value::as_object_mut) {
            let all = s.entry("allOf").or_insert_with(|| json!([]));
            if let Some(all) = all.as_array_mut() {
                all.extend(rules);
            }
        }
    };
    add("MachineSpec", machine_spec_cross_field_rules());
    add(
        "NetworkSpec",
        vec![rule(
            "bridge-named",
            "Mode Bridge names a host bridge",
            json!({"anyOf": [
                field("mode", json!({"not": {"const": "Bridge"}})),
                {"required": ["bridge"], "properties": {"bridge": {"type": "string", "minLength": 1}}},
            ]}),
        )],
    );
    add(
        "NetworkSpec",
        vec![rule(
            "no-egress-without-network",
            "Mode None gives the guest no network: it takes no egress rule",
            json!({"anyOf": [field("mode", json!({"not": {"const": "None"}})), unset("egress")]}),
        )],
    );
    add(
        "EgressSpec",
        vec![
            rule(
                "allow-in-allowlist-mode",
                "allow is read in mode Allowlist only",
                json!({"anyOf": [
                    {"required": ["mode"], "properties": {"mode": {"const": "Allowlist"}}},
                    field("allow", json!({"maxItems": 0})),
                ]}),
            ),
            rule(
                "allowlist-names-hosts",
                "Mode Allowlist names at least one host (for no egress at all use mode None)",
                json!({"anyOf": [
                    field("mode", json!({"not": {"const": "Allowlist"}})),
                    {"required": ["allow"], "properties": {"allow": {"minItems": 1}}},
                ]}),
            ),
        ],
    );
    add(
        "Volume",
        vec![rule(
            "volume-size-or-path",
            "A volume sets size (a new disk) or path (an existing one): exactly one",
            json!({"oneOf": [set("size"), set("path")]}),
        )],
    );
    add(
        "MachinePoolSpec",
        vec![rule(
            "pool-template-no-ttl",
            "A warm member must not expire before it is claimed: a pool's template sets no ttlSeconds",
            field("template", field("spec", unset("ttlSeconds"))),
        )],
    );
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

/// The document as served and committed: [`complete`], then the rules between fields, as JSON
/// (utoipa's types cannot hold `not`, `const` or an `allOf` beside `properties`, and drop them).
pub fn document(doc: utoipa::openapi::OpenApi) -> Value {
    let mut v = serde_json::to_value(complete(doc)).expect("the OpenAPI document serialises");
    if let Some(schemas) = v.pointer_mut("/components/schemas").and_then(Value::as_object_mut) {
        cross_field_rules(schemas);
        env_rules(schemas);
    }
    v
}

/// validate.rs `validate_env`: names as shells take them, values of bounded length and without
/// NUL (JSON only: utoipa's types cannot hold a schema for property names).
fn env_rules(schemas: &mut Map<String, Value>) {
    use kairon_model::validate::{ENV_NAME_PATTERN, MAX_ENV_NAME, MAX_ENV_VALUE};
    for schema in ["MachineSpec", "MachineClaimSpec"] {
        if let Some(env) = schemas.get_mut(schema).and_then(|s| s.pointer_mut("/properties/env")) {
            env["propertyNames"] = json!({"type": "string", "pattern": ENV_NAME_PATTERN, "maxLength": MAX_ENV_NAME});
            env["additionalProperties"] =
                json!({"type": "string", "maxLength": MAX_ENV_VALUE, "pattern": "^[^\\u0000]*$"});
        }
        if let Some(env) = schemas.get_mut(schema).and_then(|s| s.pointer_mut("/properties/secretEnv")) {
            env["propertyNames"] = json!({"type": "string", "pattern": ENV_NAME_PATTERN, "maxLength": MAX_ENV_NAME});
        }
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
    if let Some(paths) = v.get_mut("paths").and_then(Value::as_object_mut) {
        link_object_routes(paths);
    }
    serde_json::from_value(v)
        .unwrap_or_else(|e| panic!("the completed OpenAPI document no longer reads as utoipa's: {e}"))
}

/// OpenAPI links between an object's routes: what a create answers is then got, replaced and
/// deleted by its name, and what a get answers is replaced, so a client (and the fuzz test's
/// stateful phase) can follow one object through its life.
fn link_object_routes(paths: &mut Map<String, Value>) {
    const REST: &str = "/api/v1";
    for (plural, prefix) in [
        ("machines", "machine"),
        ("machinepools", "machinepool"),
        ("machineclaims", "machineclaim"),
        ("templates", "kairontemplate"),
    ] {
        let the_object = json!({"namespace": "$request.path.namespace", "name": "$response.body#/metadata/name"});
        let link = |op: &str, description: &str| json!({"operationId": format!("{prefix}_{op}"), "parameters": the_object, "description": description});
        let mut from_create = Map::new();
        from_create.insert("Get".into(), link("get", "The object created, as stored"));
        from_create.insert("Replace".into(), link("replace", "Replace the object created"));
        // A pool's delete waits on its members' finalizers and a claim's on its member's release,
        // so a delete in the middle of a chain leaves an object that a later step of the same
        // chain finds half gone: only Machines (and templates, which have no finalizer) are
        // chained to their delete.
        if prefix == "machine" || prefix == "kairontemplate" {
            from_create.insert("Delete".into(), link("delete", "Delete the object created"));
        }
        let mut from_get = Map::new();
        from_get.insert("Replace".into(), link("replace", "Replace the object read"));
        for (path, method, status, links) in [
            (format!("{REST}/{plural}/{{namespace}}"), "post", "201", from_create),
            (format!("{REST}/{plural}/{{namespace}}/{{name}}"), "get", "200", from_get),
        ] {
            if let Some(response) =
                paths.get_mut(&path).and_then(|item| item.pointer_mut(&format!("/{method}/responses/{status}")))
            {
                response["links"] = Value::Object(links);
            }
        }
    }
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

    /// Whether `v` fits `schema`, for the keywords the cross-field rules use (a test's own
    /// reading of JSON Schema: no validator crate is in the workspace).
    fn fits(schema: &Value, v: &Value) -> bool {
        let Some(s) = schema.as_object() else { return true };
        let of = |key: &str| s.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
        let type_ok = match s.get("type").and_then(Value::as_str) {
            None => true,
            Some("null") => v.is_null(),
            Some("object") => v.is_object(),
            Some("string") => v.is_string(),
            Some("array") => v.is_array(),
            Some(t) => panic!("type {t} not read here"),
        };
        let required = of("required").iter().all(|k| v.as_object().is_none_or(|o| o.contains_key(k.as_str().unwrap())));
        let properties = s.get("properties").and_then(Value::as_object).is_none_or(|ps| {
            ps.iter().all(|(k, ps)| v.as_object().and_then(|o| o.get(k)).is_none_or(|fv| fits(ps, fv)))
        });
        let not = s.get("not").is_none_or(|n| !fits(n, v));
        let enum_ok = s.get("enum").and_then(Value::as_array).is_none_or(|e| e.contains(v));
        let const_ok = s.get("const").is_none_or(|c| c == v);
        let all = of("allOf").iter().all(|a| fits(a, v));
        let any = s.get("anyOf").is_none() || of("anyOf").iter().any(|a| fits(a, v));
        let one = s.get("oneOf").is_none() || of("oneOf").iter().filter(|a| fits(a, v)).count() == 1;
        let pattern = match (s.get("pattern").and_then(Value::as_str), v.as_str()) {
            (Some(p), Some(text)) => regex::Regex::new(p).unwrap().is_match(text),
            _ => true,
        };
        let min_length = match (s.get("minLength").and_then(Value::as_u64), v.as_str()) {
            (Some(n), Some(text)) => text.chars().count() as u64 >= n,
            _ => true,
        };
        let max_items = match (s.get("maxItems").and_then(Value::as_u64), v.as_array()) {
            (Some(n), Some(items)) => items.len() as u64 <= n,
            _ => true,
        };
        type_ok
            && required
            && properties
            && not
            && enum_ok
            && const_ok
            && all
            && any
            && one
            && pattern
            && min_length
            && max_items
    }

    #[test]
    fn the_documents_rules_between_fields_are_validate_rs() {
        use kairon_model::MachineSpec;
        use kairon_model::validate::validate_machine_spec;
        let rules = json!({"allOf": machine_spec_cross_field_rules()});
        let mut schemas = Map::new();
        for kind in ["NetworkSpec", "Volume", "MachinePoolSpec"] {
            schemas.insert(kind.into(), json!({}));
        }
        cross_field_rules(&mut schemas);
        let network = &schemas["NetworkSpec"];
        let volume = &schemas["Volume"];
        let image = json!({"path": "/images/a.qcow2"});
        let kernel = json!({"kernel": {"path": "/boot/vmlinuz"}});
        let template = json!({"templateName": "busybox"});
        let mut cases = vec![
            json!({}),
            json!({"image": image}),
            json!({"image": null}),
            json!({"runtime": kernel}),
            json!({"runtime": {"backend": "qemu"}}),
            json!({"runtime": null, "image": image}),
            json!({"sandbox": {}}),
            json!({"sandbox": {"templateName": null}}),
            json!({"sandbox": {}, "image": image}),
            json!({"sandbox": template}),
            json!({"sandbox": null, "runtime": kernel}),
            json!({"sandbox": {}, "runtime": kernel}),
            json!({"sandbox": template, "deviceClaims": [{"name": "gpu", "resourceName": "nvidia.com/gpu"}]}),
            json!({"sandbox": template, "deviceClaims": []}),
            json!({"image": image, "deviceClaims": [{"name": "gpu", "resourceName": "nvidia.com/gpu"}]}),
            json!({"sandbox": template, "numa": {"node": 0}}),
            json!({"sandbox": template, "numa": null, "cpuSet": null, "hugepages": null}),
            json!({"sandbox": template, "cpuSet": "0-1"}),
            json!({"sandbox": template, "hugepages": {"pageSize": "2Mi"}}),
            json!({"image": image, "cpuSet": "0-1", "hugepages": {"pageSize": "2Mi"}}),
            json!({"sandbox": {}, "image": image, "numa": {"node": 0}}),
            json!({"sandbox": template, "powerState": null, "lifecycle": null}),
            json!({"sandbox": template, "lifecycle": {}}),
            json!({"sandbox": {}, "image": image, "powerState": "Hibernated", "lifecycle": {"idleAction": "Halt"}}),
        ];
        for ps in kairon_model::PowerState::ALL {
            cases.push(json!({"sandbox": template, "powerState": ps}));
            cases.push(json!({"image": image, "powerState": ps}));
        }
        for action in kairon_model::IdleAction::ALL {
            cases.push(json!({"sandbox": template, "lifecycle": {"idleAction": action}}));
            cases.push(json!({"image": image, "lifecycle": {"idleAction": action}}));
        }
        let positive = regex::Regex::new(POSITIVE_QUANTITY).unwrap();
        for cpu in [
            "2", "2.0", "2.000", "2.5", "1500m", "2000m", "1m", "1k", "1.5k", "1.5Ki", "1.125Ki", "1.1Ki", "1.001Gi",
            "100", "3.25",
        ] {
            // The single-field pattern takes it: what is left to decide is the rule's.
            assert!(positive.is_match(cpu), "{cpu}");
            cases.push(json!({"image": image, "resources": {"cpu": cpu, "memory": "1Gi"}}));
            cases.push(json!({"sandbox": template, "resources": {"cpu": cpu}}));
            cases.push(json!({"sandbox": {}, "image": image, "resources": {"cpu": cpu}}));
        }
        cases.push(json!({"image": image, "resources": null}));
        cases.push(json!({"image": image, "resources": {"cpu": null}}));
        for mode in ["User", "Tap", "Bridge", "None"] {
            for bridge in [json!(null), json!(""), json!("br0")] {
                cases.push(json!({"image": image, "network": {"mode": mode, "bridge": bridge}}));
            }
            cases.push(json!({"image": image, "network": {"mode": mode}}));
        }
        cases.push(json!({"image": image, "network": {"bridge": "br0"}}));
        for (size, path) in [
            (json!(null), json!(null)),
            (json!("1Gi"), json!(null)),
            (json!(null), json!("/d.img")),
            (json!("1Gi"), json!("/d.img")),
        ] {
            cases.push(json!({"image": image, "volumes": [{"name": "data", "size": size, "path": path}]}));
        }
        cases.push(json!({"image": image, "volumes": [{"name": "data", "path": "/d.img"}]}));
        cases.push(json!({"image": image, "volumes": [{"name": "data"}]}));
        for case in cases {
            let spec: MachineSpec = serde_json::from_value(case.clone()).unwrap_or_else(|e| panic!("{case}: {e}"));
            let by_server = validate_machine_spec("spec", &spec, None, Default::default()).is_empty();
            let network_ok = case.get("network").is_none_or(|n| fits(network, n));
            let volumes_ok =
                case.get("volumes").and_then(Value::as_array).is_none_or(|vs| vs.iter().all(|v| fits(volume, v)));
            let by_document = fits(&rules, &case) && network_ok && volumes_ok;
            assert_eq!(by_document, by_server, "{case}: document {by_document}, validate.rs {by_server}");
        }
        // A pool's template: no ttlSeconds.
        let pool = &schemas["MachinePoolSpec"];
        for (ttl, ok) in [(json!(null), true), (json!(60), false)] {
            let spec = json!({"replicas": 1, "template": {"spec": {"image": image, "ttlSeconds": ttl}}});
            let typed: kairon_model::MachinePoolSpec = serde_json::from_value(spec.clone()).unwrap();
            assert_eq!(kairon_model::validate::validate_pool_spec(&typed, Default::default()).is_empty(), ok, "{spec}");
            assert_eq!(fits(pool, &spec), ok, "{spec}");
        }
        assert!(fits(pool, &json!({"replicas": 1, "template": {"spec": {"image": image}}})));
    }
}
