//! The authorization table (`tests/authz/table.csv`) against a real `kairon up`: every REST
//! operation of openapi/openapi.json, the Kubernetes paths (with /status) and every MCP tool, for
//! every caller (admin, operator and viewer on their own and a foreign namespace, node,
//! controller, the legacy token, no token), with the operator-exec flag off and on. The expected
//! outcomes are the committed table's, not computed from `api/src/auth.rs`; an operation or tool
//! without a row, or a row naming something that is gone, fails the test.

use std::collections::{BTreeMap, BTreeSet};

use futures::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};

use kairon_e2e::mcp::Mcp;
use kairon_e2e::{Kairon, Rest};

const LEGACY: &str = "legacy-shared-token-for-the-end-to-end-tests";
const OWN: &str = "agents";
const FOREIGN: &str = "other";
const VM_IMAGE: &str = "/var/lib/fluxvm/images/kairon-hw.qcow2";

const CALLERS: [&str; 9] = [
    "admin",
    "operator_own",
    "operator_foreign",
    "viewer_own",
    "viewer_foreign",
    "node",
    "controller",
    "legacy_token",
    "no_token",
];

#[derive(Clone, Debug)]
struct Row {
    line: usize,
    surface: String,
    operation: String,
    target: String,
    flag: String,
    want: Vec<String>,
}

fn table() -> Vec<Row> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/authz/table.csv");
    let text = std::fs::read_to_string(path).expect("tests/authz/table.csv");
    let mut rows = Vec::new();
    let mut header = true;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let cells: Vec<String> = line.split(',').map(|c| c.trim().to_string()).collect();
        if header {
            assert_eq!(&cells[4..13], CALLERS.map(String::from).as_slice(), "table header");
            header = false;
            continue;
        }
        assert!(cells.len() >= 13, "table.csv line {}: {} cells", i + 1, cells.len());
        for w in &cells[4..13] {
            assert!(["allow", "401", "403"].contains(&w.as_str()), "table.csv line {}: outcome {w:?}", i + 1);
        }
        assert!(["any", "off", "on"].contains(&cells[3].as_str()), "table.csv line {}: flag {:?}", i + 1, cells[3]);
        rows.push(Row {
            line: i + 1,
            surface: cells[0].clone(),
            operation: cells[1].clone(),
            target: cells[2].clone(),
            flag: cells[3].clone(),
            want: cells[4..13].to_vec(),
        });
    }
    rows
}

/// operationId → (method, path template), from the committed OpenAPI document.
fn openapi_doc() -> &'static Value {
    static DOC: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    DOC.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi/openapi.json");
        serde_json::from_str(&std::fs::read_to_string(path).expect("openapi/openapi.json"))
            .expect("openapi.json parses")
    })
}

fn openapi_ops() -> BTreeMap<String, (Method, String)> {
    let doc = openapi_doc();
    let mut out = BTreeMap::new();
    for (p, ops) in doc["paths"].as_object().unwrap() {
        for (m, op) in ops.as_object().unwrap() {
            if let Some(id) = op["operationId"].as_str() {
                out.insert(id.to_string(), (Method::from_bytes(m.to_uppercase().as_bytes()).unwrap(), p.clone()));
            }
        }
    }
    out
}

/// The Kubernetes resources the table covers: (name, collection path with {ns}, has /status).
fn kube_resources() -> Vec<(&'static str, &'static str, bool)> {
    vec![
        ("machines", "/apis/kairon.zyvor.dev/v1/namespaces/{ns}/machines", true),
        ("machinepools", "/apis/kairon.zyvor.dev/v1/namespaces/{ns}/machinepools", true),
        ("machineclaims", "/apis/kairon.zyvor.dev/v1/namespaces/{ns}/machineclaims", true),
        ("kaironnodes", "/apis/kairon.zyvor.dev/v1/kaironnodes", true),
        ("kaironquotas", "/apis/kairon.zyvor.dev/v1/namespaces/{ns}/kaironquotas", true),
        ("kairontemplates", "/apis/kairon.zyvor.dev/v1/namespaces/{ns}/kairontemplates", true),
        ("leases", "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", false),
        ("events", "/api/v1/namespaces/{ns}/events", false),
        ("secrets", "/api/v1/namespaces/{ns}/secrets", false),
        ("namespaces", "/api/v1/namespaces", false),
    ]
}

fn kube_ops() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (r, _, status) in kube_resources() {
        for v in ["get", "list", "create", "update", "patch", "delete"] {
            out.insert(format!("{r}.{v}"));
        }
        if status {
            for v in ["get", "update", "patch"] {
                out.insert(format!("{r}.status.{v}"));
            }
        }
    }
    out
}

/// Rows against what exists: every operation has a row, every row an operation.
fn coverage(rows: &[Row], mcp_tools: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    let sets: [(&str, BTreeSet<String>); 3] =
        [("rest", openapi_ops().into_keys().collect()), ("kube", kube_ops()), ("mcp", mcp_tools.clone())];
    for (surface, ops) in &sets {
        let covered: BTreeSet<String> =
            rows.iter().filter(|r| r.surface == *surface).map(|r| r.operation.clone()).collect();
        for op in ops.difference(&covered) {
            problems.push(format!("{surface} operation {op:?} has no row in tests/authz/table.csv"));
        }
        for op in covered.difference(ops) {
            problems.push(format!("tests/authz/table.csv has a {surface} row for {op:?}, which no longer exists"));
        }
    }
    for r in rows {
        if !sets.iter().any(|(s, _)| *s == r.surface) {
            problems.push(format!("table.csv line {}: unknown surface {:?}", r.line, r.surface));
        }
    }
    problems
}

struct Callers {
    tokens: Vec<Option<String>>,
}

impl Callers {
    fn new(k: &Kairon) -> Self {
        let alice = k.token("alice", "operator", &[OWN]).unwrap();
        let vic = k.token("vic", "viewer", &[OWN]).unwrap();
        let tokens = vec![
            Some(k.admin_token.clone()),
            Some(alice.clone()),
            Some(alice),
            Some(vic.clone()),
            Some(vic),
            Some(k.token("local", "node", &[]).unwrap()),
            Some(k.token("kairon-controller", "controller", &[]).unwrap()),
            Some(LEGACY.to_string()),
            None,
        ];
        Callers { tokens }
    }
}

fn ns_of(caller: usize) -> &'static str {
    if CALLERS[caller].ends_with("_foreign") { FOREIGN } else { OWN }
}

fn class(status: u16) -> String {
    match status {
        401 => "401".into(),
        403 => "403".into(),
        _ => "allow".into(),
    }
}

/// One HTTP request as a caller (no Authorization header for no_token).
async fn send(
    k: &Kairon,
    token: &Option<String>,
    method: Method,
    path: &str,
    body: Option<(&str, Vec<u8>)>,
) -> (u16, String) {
    let rest = k.rest_as(token.as_deref().unwrap_or("")).unwrap();
    let mut req = rest.http.request(method, rest.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some((ct, b)) = body {
        req = req.header("content-type", ct).body(b);
    }
    match req.send().await {
        Ok(resp) => {
            let s = resp.status().as_u16();
            (s, resp.text().await.unwrap_or_default())
        }
        Err(e) => (0, e.to_string()),
    }
}

async fn websocket(k: &Kairon, token: &Option<String>, path: &str) -> (u16, String) {
    let rest: Rest = k.rest_as(token.as_deref().unwrap_or("")).unwrap();
    match rest.websocket(path).await {
        Ok(mut ws) => {
            let _ = ws.close(None).await;
            (101, String::new())
        }
        Err(e) => (e.get(..3).and_then(|s| s.parse().ok()).unwrap_or(0), e),
    }
}

fn json_body(v: Value) -> Option<(&'static str, Vec<u8>)> {
    Some(("application/json", v.to_string().into_bytes()))
}

async fn admin_get(k: &Kairon, path: &str) -> Value {
    let a = k.rest().unwrap();
    a.get(path).await.body
}

/// The REST request of one row for one caller.
async fn rest_request(k: &Kairon, row: &Row, token: &Option<String>, ns: &str) -> (u16, String) {
    let ops = openapi_ops();
    let (method, template) = ops[&row.operation].clone();
    let op = row.operation.as_str();
    let kind = template.split('/').nth(3).unwrap_or_default().to_string();
    let name = match (kind.as_str(), row.target.as_str()) {
        ("machines", "labelled" | "plain") => row.target.clone(),
        ("machines", _) if op == "machine_snapshot" => "labelled".into(),
        ("machines", _) => "vm".into(),
        ("machinepools", _) => "pool".into(),
        ("templates", _) => "template".into(),
        _ => "claim".into(),
    };
    let item = if op == "template_get" { "busybox" } else { "none" };
    let mut path = template
        .replace("{namespace}", ns)
        .replace("{name}", &name)
        .replace("{node}", "local")
        .replace("{item}", item)
        .replace("{pid}", "999999")
        .replace("{id}", "none")
        .replace("{port}", "8080")
        .replace("{path}", "authz")
        .replace("{uid}", "00000000-0000-0000-0000-000000000000");
    let mut query: Vec<String> = Vec::new();
    let mut body = None;
    let vm = json!({"metadata": {"name": "authz-new"}, "spec": {"image": {"path": VM_IMAGE}}});
    match op {
        "machine_create" if row.target == "sandbox" => {
            body =
                json_body(json!({"metadata": {"name": "authz-new"}, "spec": {"sandbox": {"templateName": "busybox"}}}))
        }
        "machine_create" => body = json_body(vm.clone()),
        "machinepool_create" => {
            body = json_body(
                json!({"metadata": {"name": "authz-new"}, "spec": {"replicas": 0, "template": {"spec": vm["spec"]}}}),
            )
        }
        "kairontemplate_create" => {
            body = json_body(
                json!({"metadata": {"name": "authz-new"}, "spec": {"image": "docker.io/library/alpine:3.19"}}),
            )
        }
        "machineclaim_create" => {
            body = json_body(json!({"metadata": {"name": "authz-new"}, "spec": {"poolName": "pool"}}))
        }
        "machine_replace" | "machinepool_replace" | "machineclaim_replace" | "kairontemplate_replace" => {
            let mut stored = admin_get(k, &format!("/api/v1/{kind}/{ns}/{name}")).await;
            if let Some(o) = stored.as_object_mut() {
                o.remove("status");
            }
            body = json_body(stored)
        }
        "machine_clone" | "machine_fork" => body = json_body(json!({"name": "plain"})),
        "machine_exec" | "process_start" => body = json_body(json!({"command": ["true"]})),
        "machine_snapshot" => body = json_body(json!({"path": "relative"})),
        "machine_extend" | "machine_set_timeout" => body = json_body(json!({"seconds": 60})),
        "template_build" => body = json_body(json!({"name": "Not A Name", "imageRef": "x"})),
        "pool_create" => body = json_body(json!({"name": "Not A Name", "size": 1, "template": {"name": "x"}})),
        "pool_claim" => body = json_body(json!({})),
        "egress_check" => body = json_body(json!({"host": "example.com"})),
        "file_write" => body = Some(("application/octet-stream", b"x".to_vec())),
        "file_read" => query.push("path=/etc/hostname".into()),
        "file_delete" => query.push("path=/tmp/authz-none".into()),
        "file_list" => query.push("path=/".into()),
        // No such directory: past authorization a 404, and no watch is left open.
        "file_watch" => query.push("path=/no/such/dir".into()),
        "file_info" => query.push("path=/etc/hostname".into()),
        // Nothing to move: past authorization a 404, and nothing changes.
        "file_rename" => body = json_body(json!({"from": "/tmp/authz-none", "to": "/tmp/authz-none-2"})),
        // A link made for a port nothing listens on: it opens nothing until something does.
        "preview_create" => body = json_body(json!({"port": 8080, "ttlSeconds": 60})),
        "machine_freeze" => query.push("unfreezeTimeout=1s".into()),
        "usage_report" => query.push(format!("namespace={ns}")),
        _ => {}
    }
    if op == "file_write" {
        query.push("path=/tmp/authz".into());
    }
    if op.ends_with("_wait") && op != "process_wait" {
        query.push("deleted=true&timeoutSeconds=1".into());
    }
    if op == "process_wait" {
        query.push("timeoutSeconds=1".into());
    }
    if ops_with_dry_run().contains(&op) {
        query.push("dryRun=All".into());
    }
    if !query.is_empty() {
        path = format!("{path}?{}", query.join("&"));
    }
    if matches!(op, "machine_console" | "machine_vnc" | "machine_portforward") {
        return websocket(k, token, &path).await;
    }
    if op == "machine_exec_stream" {
        return websocket(k, token, &format!("{path}?command=%5B%22true%22%5D")).await;
    }
    send(k, token, method, &path, body).await
}

/// The operations that take `dryRun` (all of them get `dryRun=All`).
fn ops_with_dry_run() -> BTreeSet<&'static str> {
    let doc = openapi_doc();
    let mut out = BTreeSet::new();
    for ops in doc["paths"].as_object().unwrap().values() {
        for op in ops.as_object().unwrap().values() {
            let has = op["parameters"].as_array().into_iter().flatten().any(|p| p["name"] == "dryRun");
            if has && let Some(id) = op["operationId"].as_str() {
                out.insert(id);
            }
        }
    }
    out
}

fn kube_object_name(res: &str, ns: &str) -> String {
    match res {
        "machines" => "vm".into(),
        "machinepools" => "pool".into(),
        "machineclaims" => "claim".into(),
        "kaironnodes" => "local".into(),
        "kaironquotas" => "quota".into(),
        "kairontemplates" => "template".into(),
        "leases" => "authz-lease".into(),
        "events" => "authz-event".into(),
        "secrets" => "authz-secret".into(),
        _ => ns.into(),
    }
}

fn kube_new(res: &str, ns: &str) -> Value {
    let meta = json!({"name": "authz-new"});
    match res {
        "machines" => {
            json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "metadata": meta, "spec": {"image": {"path": VM_IMAGE}}})
        }
        "machinepools" => json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool", "metadata": meta,
            "spec": {"replicas": 0, "template": {"spec": {"image": {"path": VM_IMAGE}}}}}),
        "machineclaims" => {
            json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim", "metadata": meta, "spec": {"poolName": "pool"}})
        }
        "kaironnodes" => {
            json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "KaironNode", "metadata": meta, "spec": {"runtimeEndpoint": "https://127.0.0.1:1"}})
        }
        "leases" => {
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": {"holderIdentity": "authz"}})
        }
        "kaironquotas" => quota(meta),
        "kairontemplates" => template(meta),
        "events" => event("authz-new", ns),
        "secrets" => json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta, "stringData": {"k": "v"}}),
        _ => json!({"apiVersion": "v1", "kind": "Namespace", "metadata": meta}),
    }
}

fn template(meta: Value) -> Value {
    json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "KaironTemplate", "metadata": meta,
        "spec": {"image": "docker.io/library/python:3.12-slim", "steps": ["pip install pandas"]}})
}

fn quota(meta: Value) -> Value {
    json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "KaironQuota", "metadata": meta, "spec": {"hard": {"machines": 1000}}})
}

/// An Event about the Running sandbox of `ns` (on node `local`, so the node writes it; a node's
/// Event about another node's Machine is `isolation.rs`'s).
fn event(name: &str, ns: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": ns},
        "involvedObject": {"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "name": "labelled", "namespace": ns},
        "reason": "Authz", "message": "authorization table", "type": "Normal"})
}

fn status_change(res: &str) -> Value {
    match res {
        "machines" => json!({"status": {"phase": "Failed"}}),
        "machinepools" => json!({"status": {"replicas": 42}}),
        "machineclaims" => json!({"status": {"machineName": "authz"}}),
        "kaironquotas" => json!({"status": {"summary": "authz"}}),
        "kairontemplates" => json!({"status": {"phase": "Failed", "message": "authz"}}),
        _ => json!({"status": {"heartbeatTime": "2020-01-01T00:00:00Z"}}),
    }
}

fn merge(into: &mut Value, patch: &Value) {
    if let (Some(a), Some(b)) = (into.as_object_mut(), patch.as_object()) {
        for (k, v) in b {
            merge(a.entry(k.clone()).or_insert(Value::Null), v);
            if !v.is_object() {
                a.insert(k.clone(), v.clone());
            }
        }
    } else {
        *into = patch.clone();
    }
}

async fn kube_request(k: &Kairon, row: &Row, token: &Option<String>, ns: &str) -> (u16, String) {
    let (res, verb) = row.operation.split_once('.').unwrap();
    let (_, collection, _) = kube_resources().into_iter().find(|r| r.0 == res).unwrap();
    let collection = collection.replace("{ns}", ns);
    // A Machine's status is written by the node it runs on: those rows use a running sandbox.
    let name =
        if res == "machines" && verb.starts_with("status.") { "labelled".into() } else { kube_object_name(res, ns) };
    let item = format!("{collection}/{name}");
    let merge_ct = "application/merge-patch+json";
    match verb {
        "get" => send(k, token, Method::GET, &item, None).await,
        "list" => send(k, token, Method::GET, &collection, None).await,
        "create" => {
            send(k, token, Method::POST, &format!("{collection}?dryRun=All"), json_body(kube_new(res, ns))).await
        }
        "update" => {
            let stored = admin_get(k, &item).await;
            send(k, token, Method::PUT, &format!("{item}?dryRun=All"), json_body(stored)).await
        }
        "patch" => {
            let p = json!({"metadata": {"labels": {"authz": "x"}}}).to_string().into_bytes();
            send(k, token, Method::PATCH, &format!("{item}?dryRun=All"), Some((merge_ct, p))).await
        }
        "delete" => send(k, token, Method::DELETE, &format!("{item}?dryRun=All"), None).await,
        "status.get" => send(k, token, Method::GET, &format!("{item}/status"), None).await,
        "status.update" => {
            let mut stored = admin_get(k, &item).await;
            merge(&mut stored, &status_change(res));
            send(k, token, Method::PUT, &format!("{item}/status?dryRun=All"), json_body(stored)).await
        }
        "status.patch" => {
            let p = status_change(res).to_string().into_bytes();
            send(k, token, Method::PATCH, &format!("{item}/status?dryRun=All"), Some((merge_ct, p))).await
        }
        other => panic!("table.csv line {}: unknown Kubernetes verb {other:?}", row.line),
    }
}

async fn mcp_request(k: &Kairon, row: &Row, token: &Option<String>, ns: &str, n: usize) -> (u16, String) {
    let target = if row.target == "-" { "labelled" } else { row.target.as_str() };
    let args = match row.operation.as_str() {
        "create_sandbox" => json!({"namespace": ns, "template": "busybox", "name": "labelled"}),
        "claim_sandbox" => json!({"namespace": ns, "pool": "pool", "name": "claim"}),
        "run_command" => json!({"namespace": ns, "name": target, "command": "true"}),
        "read_file" => json!({"namespace": ns, "name": target, "path": "/etc/hostname"}),
        "write_file" => json!({"namespace": ns, "name": target, "path": "/tmp/authz-mcp", "content": "x"}),
        "pause" | "resume" => json!({"namespace": ns, "name": "labelled"}),
        "close_sandbox" => {
            // A throwaway claim per request: the ones the caller may not close stay, and go after.
            let claim = format!("authz-close-{n}");
            let body = json!({"metadata": {"name": claim}, "spec": {"poolName": "pool"}});
            k.rest().unwrap().post(&format!("/api/v1/machineclaims/{ns}"), body).await;
            json!({"namespace": ns, "claim": claim})
        }
        "describe_claim" => json!({"namespace": ns, "name": "claim"}),
        "list_sandboxes" => json!({"namespace": ns}),
        "sandbox_metrics" => json!({"namespace": ns, "name": "labelled"}),
        "preview_url" => json!({"namespace": ns, "name": target, "port": 8080, "ttl_seconds": 60}),
        "start_process" => json!({"namespace": ns, "name": target, "command": "true"}),
        // Past authorization busybox has no python3: a 400 that says so.
        "run_code" => json!({"namespace": ns, "name": target, "code": "1"}),
        // No such process: past authorization it is a NotFound, and nothing is signalled.
        "read_process" | "kill_process" => json!({"namespace": ns, "name": target, "pid": "999999"}),
        // As machine_fork: from the VM Machine into a name already taken (409 once authorized).
        "fork_sandbox" => json!({"namespace": ns, "name": "vm", "new_name": "plain"}),
        other => json!({"namespace": ns, "name": other}),
    };
    // curl is blocking: run it off the async worker.
    tokio::task::block_in_place(|| {
        Mcp::open(&k.url, &k.data_dir.path().join("tls/ca.crt"), token.clone()).call(&row.operation, args)
    })
}

async fn setup(k: &Kairon) {
    let admin = k.rest().unwrap();
    for ns in [OWN, FOREIGN] {
        let nsobj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        admin.post("/api/v1/namespaces", nsobj).await;
        for (name, labelled) in [("labelled", true), ("plain", false)] {
            let labels = if labelled { json!({"kairon.zyvor.dev/sandbox": "true"}) } else { json!({}) };
            let m = json!({"metadata": {"name": name, "labels": labels},
                "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true}}});
            let made = admin.post(&format!("/api/v1/machines/{ns}"), m).await;
            assert!(made.status < 300, "{made:?}");
        }
        let vm = json!({"metadata": {"name": "vm"}, "spec": {"image": {"path": VM_IMAGE}}});
        assert!(admin.post(&format!("/api/v1/machines/{ns}"), vm.clone()).await.status < 300);
        let pool = json!({"metadata": {"name": "pool"}, "spec": {"replicas": 0, "template": {"spec": vm["spec"]}}});
        assert!(admin.post(&format!("/api/v1/machinepools/{ns}"), pool).await.status < 300);
        let claim = json!({"metadata": {"name": "claim"}, "spec": {"poolName": "pool"}});
        assert!(admin.post(&format!("/api/v1/machineclaims/{ns}"), claim).await.status < 300);
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "authz-lease"},
            "spec": {"holderIdentity": "authz"}});
        let l = admin.post(&format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"), lease).await;
        assert!(l.status < 300, "{l:?}");
        let e = admin.post(&format!("/api/v1/namespaces/{ns}/events"), event("authz-event", ns)).await;
        assert!(e.status < 300, "{e:?}");
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "authz-secret"}, "stringData": {"k": "v"}});
        let s = admin.post(&format!("/api/v1/namespaces/{ns}/secrets"), secret).await;
        assert!(s.status < 300, "{s:?}");
        let q = admin
            .post(&format!("/apis/kairon.zyvor.dev/v1/namespaces/{ns}/kaironquotas"), quota(json!({"name": "quota"})))
            .await;
        assert!(q.status < 300, "{q:?}");
        let t = admin
            .post(
                &format!("/apis/kairon.zyvor.dev/v1/namespaces/{ns}/kairontemplates"),
                template(json!({"name": "template"})),
            )
            .await;
        assert!(t.status < 300, "{t:?}");
    }
    for ns in [OWN, FOREIGN] {
        for name in ["labelled", "plain"] {
            let w = admin.get(&format!("/api/v1/machines/{ns}/{name}/wait?phase=Running&timeoutSeconds=120")).await;
            assert_eq!(w.status, 200, "{ns}/{name} runs: {w:?}");
        }
    }
}

async fn check(flag_on: bool) {
    let flag = if flag_on { "on" } else { "off" };
    let mut args = vec!["--legacy-token", LEGACY];
    if flag_on {
        args.push("--sandbox-operator-exec");
    }
    let k = Kairon::start_with(&args).expect("kairon up");
    let rows = table();
    let admin_mcp = Mcp::open(&k.url, &k.data_dir.path().join("tls/ca.crt"), Some(k.admin_token.clone()));
    let tools = tokio::task::block_in_place(|| admin_mcp.tools());
    let mut failures = coverage(&rows, &tools);
    setup(&k).await;
    let callers = Callers::new(&k);
    let mut cells = 0;
    for (n, row) in rows.iter().enumerate() {
        if row.flag != "any" && row.flag != flag {
            continue;
        }
        let runs = (0..CALLERS.len()).map(|c| {
            let (token, ns, k, row) = (&callers.tokens[c], ns_of(c), &k, row);
            async move {
                match row.surface.as_str() {
                    "rest" => rest_request(k, row, token, ns).await,
                    "kube" => kube_request(k, row, token, ns).await,
                    _ => mcp_request(k, row, token, ns, n * 10 + c).await,
                }
            }
        });
        let got = join_all(runs).await;
        for (c, (status, body)) in got.into_iter().enumerate() {
            cells += 1;
            if class(status) != row.want[c] || status == 0 {
                failures.push(format!(
                    "line {:>3} {} {} [{}] flag {flag}: {} wanted {}, got {status} {}",
                    row.line,
                    row.surface,
                    row.operation,
                    row.target,
                    CALLERS[c],
                    row.want[c],
                    body.replace('\n', " ").chars().take(300).collect::<String>()
                ));
            }
        }
    }
    // What the outcome classes cannot say: a tenant's list and watch of Namespaces name none of
    // another tenant's (`other` was created explicitly, so it is stored).
    for path in ["/api/v1/namespaces", "/api/v1/namespaces?watch=true&timeoutSeconds=1"] {
        let (status, body) = send(&k, &callers.tokens[1], Method::GET, path, None).await;
        if status != 200 || body.contains(&format!("\"name\":\"{FOREIGN}\"")) || !body.contains(OWN) {
            failures.push(format!(
                "operator of {OWN}: GET {path} shows another tenant's namespace: {status} {}",
                body.chars().take(600).collect::<String>()
            ));
        }
    }
    eprintln!("authz: flag {flag}: {cells} cells checked, {} differ", failures.len());
    assert!(
        failures.is_empty(),
        "{} cells differ from tests/authz/table.csv:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_authorization_table_holds_with_the_operator_exec_flag_off() {
    check(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_authorization_table_holds_with_the_operator_exec_flag_on() {
    check(true).await;
}

/// Without a server: every operationId of openapi/openapi.json and every Kubernetes path has a
/// row, and every REST and Kubernetes row names something that exists (the MCP tools are
/// checked against the server's tools/list by the tests above).
#[test]
fn every_rest_operation_and_kubernetes_path_has_a_row() {
    let rows: Vec<Row> = table().into_iter().filter(|r| r.surface != "mcp").collect();
    let problems: Vec<String> = coverage(&rows, &BTreeSet::new());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
