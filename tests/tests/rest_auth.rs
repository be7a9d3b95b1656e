//! Who may do what, as a table: every caller (admin, operator in the namespace, operator
//! elsewhere, viewer, the legacy shared token) against every class of route, on a
//! sandbox-labelled and an unlabelled Machine, with the operator-exec flag off and on. Each
//! cell is either allowed (anything but 401/403) or the exact refusal.
//!
//! The full table (every REST operation, Kubernetes path and MCP tool × nine callers) is
//! `tests/authz/table.csv`, checked by `tests/authz.rs` on outcome classes; this test keeps the
//! exact refusal messages and the kubectl check.

use serde_json::{Value, json};

use kairon_e2e::{Kairon, Rest};

const LEGACY: &str = "legacy-shared-token-for-the-end-to-end-tests";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Caller {
    Admin,
    Alice, // operator in `agents`
    Bob,   // operator in `other`
    Viewer,
    Legacy,
}

const CALLERS: [Caller; 5] = [Caller::Admin, Caller::Alice, Caller::Bob, Caller::Viewer, Caller::Legacy];

/// Expected outcome: allowed, or refused with a message containing this text.
#[derive(Clone, Copy, Debug)]
enum Want {
    Allow,
    Deny(&'static str),
}
use Want::{Allow, Deny};

const NS: Want = Deny("may not use namespace");
const VIEWER: Want = Deny("is a viewer");
const ADMIN: Want = Deny("admin-only");
const LEGACY_REFUSED: Want = Deny("legacy shared token");
const LABEL: Want = Deny("kairon.zyvor.dev/sandbox=true");
/// An operator's guest access on a server without operator exec: the refusal says how to open
/// it (the flag, its variable, the Helm value) and for which Machines (the label).
const GUEST_OFF: Want = Deny(
    "labelled kairon.zyvor.dev/sandbox=true by running the server with --sandbox-operator-exec (environment \
     KAIRON_UI_SANDBOX_OPERATOR_EXEC=true; Helm value ui.auth.sandboxOperatorExec=true)",
);

struct Route {
    name: &'static str,
    method: reqwest::Method,
    path: &'static str,
    body: Option<Value>,
    /// Outcomes for Admin, Alice, Bob, Viewer, Legacy with the flag off, then on.
    off: [Want; 5],
    on: [Want; 5],
}

fn routes() -> Vec<Route> {
    use reqwest::Method as M;
    let vm =
        json!({"metadata": {"name": "new-vm"}, "spec": {"image": {"path": "/var/lib/fluxvm/images/kairon-hw.qcow2"}}});
    let sb = json!({"metadata": {"name": "new-sb"}, "spec": {"sandbox": {"templateName": "busybox"}}});
    // Bob cannot even read `agents`, so that refusal comes first (and says nothing of the Machine).
    let guest_labelled_off = [Allow, GUEST_OFF, NS, VIEWER, LEGACY_REFUSED];
    let guest_labelled_on = [Allow, Allow, NS, VIEWER, LEGACY_REFUSED];
    let guest_plain_on = [Allow, LABEL, NS, VIEWER, LEGACY_REFUSED];
    let read = [Allow, Allow, NS, Allow, Allow];
    let write = [Allow, Allow, NS, VIEWER, Allow];
    let admin_only = [Allow, ADMIN, ADMIN, ADMIN, ADMIN];
    let anyone = [Allow, Allow, Allow, Allow, Allow];
    vec![
        Route {
            name: "list machines",
            method: M::GET,
            path: "/api/v1/machines/agents",
            body: None,
            off: read,
            on: read,
        },
        Route {
            name: "get machine",
            method: M::GET,
            path: "/api/v1/machines/agents/labelled",
            body: None,
            off: read,
            on: read,
        },
        Route {
            name: "create VM machine",
            method: M::POST,
            path: "/api/v1/machines/agents?dryRun=All",
            body: Some(vm),
            off: write,
            on: write,
        },
        Route {
            name: "create sandbox machine",
            method: M::POST,
            path: "/api/v1/machines/agents?dryRun=All",
            body: Some(sb),
            off: [Allow, ADMIN, NS, VIEWER, ADMIN],
            on: [Allow, ADMIN, NS, VIEWER, ADMIN],
        },
        Route {
            name: "power",
            method: M::POST,
            path: "/api/v1/machines/agents/labelled/pause?dryRun=All",
            body: Some(json!({})),
            off: write,
            on: write,
        },
        Route {
            name: "events",
            method: M::GET,
            path: "/api/v1/machines/agents/labelled/events",
            body: None,
            off: read,
            on: read,
        },
        Route {
            name: "exec on a sandbox",
            method: M::POST,
            path: "/api/v1/machines/agents/labelled/exec",
            body: Some(json!({"command": ["true"]})),
            off: guest_labelled_off,
            on: guest_labelled_on,
        },
        Route {
            name: "exec on another Machine",
            method: M::POST,
            path: "/api/v1/machines/agents/plain/exec",
            body: Some(json!({"command": ["true"]})),
            off: guest_labelled_off,
            on: guest_plain_on,
        },
        Route {
            name: "files on a sandbox",
            method: M::GET,
            path: "/api/v1/machines/agents/labelled/files?path=/etc/passwd",
            body: None,
            off: guest_labelled_off,
            on: guest_labelled_on,
        },
        Route {
            name: "files on another Machine",
            method: M::GET,
            path: "/api/v1/machines/agents/plain/files?path=/etc/passwd",
            body: None,
            off: guest_labelled_off,
            on: guest_plain_on,
        },
        Route {
            name: "sandbox-http on a sandbox",
            method: M::GET,
            path: "/api/v1/machines/agents/labelled/sandbox-http/8080/x",
            body: None,
            off: guest_labelled_off,
            on: guest_labelled_on,
        },
        Route {
            name: "snapshot",
            method: M::POST,
            path: "/api/v1/machines/agents/labelled/snapshot",
            body: Some(json!({"path": "relative"})),
            off: admin_only,
            on: admin_only,
        },
        Route { name: "nodes", method: M::GET, path: "/api/v1/nodes", body: None, off: anyone, on: anyone },
        Route {
            name: "templates",
            method: M::GET,
            path: "/api/v1/nodes/local/templates",
            body: None,
            off: anyone,
            on: anyone,
        },
        Route {
            name: "sandboxes",
            method: M::GET,
            path: "/api/v1/nodes/local/sandboxes",
            body: None,
            off: anyone,
            on: anyone,
        },
        Route {
            name: "build template",
            method: M::POST,
            path: "/api/v1/nodes/local/templates",
            body: Some(json!({"name": "Not A Name", "imageRef": "x"})),
            off: admin_only,
            on: admin_only,
        },
        Route {
            name: "create node pool",
            method: M::POST,
            path: "/api/v1/nodes/local/pools",
            body: Some(json!({"name": "Not A Name", "size": 1, "template": {"name": "x"}})),
            off: admin_only,
            on: admin_only,
        },
        Route {
            name: "delete node pool",
            method: M::DELETE,
            path: "/api/v1/nodes/local/pools/none",
            body: None,
            off: admin_only,
            on: admin_only,
        },
        Route {
            name: "egress check",
            method: M::POST,
            path: "/api/v1/nodes/local/egress-check",
            body: Some(json!({"host": "example.com"})),
            off: admin_only,
            on: admin_only,
        },
        Route { name: "usage", method: M::GET, path: "/api/v1/usage", body: None, off: anyone, on: anyone },
        Route {
            name: "usage of a namespace",
            method: M::GET,
            path: "/api/v1/usage?namespace=agents",
            body: None,
            off: read,
            on: read,
        },
    ]
}

fn client(k: &Kairon, who: Caller) -> Rest {
    let token = match who {
        Caller::Admin => k.admin_token.clone(),
        Caller::Alice => k.token("alice", "operator", &["agents"]).unwrap(),
        Caller::Bob => k.token("bob", "operator", &["other"]).unwrap(),
        Caller::Viewer => k.token("vic", "viewer", &["agents"]).unwrap(),
        Caller::Legacy => LEGACY.to_string(),
    };
    k.rest_as(&token).unwrap()
}

async fn machines(k: &Kairon) {
    let admin = k.rest().unwrap();
    for (name, labelled) in [("labelled", true), ("plain", false)] {
        let labels = if labelled { json!({"kairon.zyvor.dev/sandbox": "true"}) } else { json!({}) };
        let m = json!({"metadata": {"name": name, "labels": labels}, "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true}}});
        admin.post("/api/v1/machines/agents", m).await.ok();
        admin.get(&format!("/api/v1/machines/agents/{name}/wait?phase=Running&timeoutSeconds=120")).await.ok();
    }
}

async fn check_table(k: &Kairon, flag_on: bool) -> Vec<String> {
    let mut failures = Vec::new();
    let clients: Vec<(Caller, Rest)> = CALLERS.iter().map(|c| (*c, client(k, *c))).collect();
    for route in routes() {
        let wants = if flag_on { route.on } else { route.off };
        for ((who, rest), want) in clients.iter().zip(wants) {
            let mut req = rest.request(route.method.clone(), route.path);
            if let Some(b) = &route.body {
                req = req.json(b);
            }
            let got = rest.send(req).await;
            let ok = match want {
                Allow => got.status != 401 && got.status != 403,
                Deny(text) => got.status == 403 && got.reason() == "Forbidden" && got.message().contains(text),
            };
            if !ok {
                failures.push(format!(
                    "flag {}: {:?} {} {}: wanted {want:?}, got {} {}",
                    if flag_on { "on" } else { "off" },
                    who,
                    route.name,
                    route.path,
                    got.status,
                    got.body
                ));
            }
        }
    }
    failures
}

/// The same rules on the Kubernetes-compatible paths: an operator cannot read another namespace
/// through kube-rs or kubectl either, and a viewer cannot write.
async fn kubernetes_paths(k: &Kairon) -> Vec<String> {
    let mut failures = Vec::new();
    for (who, path, method, want) in [
        (Caller::Bob, "/apis/kairon.zyvor.dev/v1/namespaces/agents/machines", reqwest::Method::GET, 403),
        (Caller::Alice, "/apis/kairon.zyvor.dev/v1/namespaces/agents/machines", reqwest::Method::GET, 200),
        (Caller::Viewer, "/apis/kairon.zyvor.dev/v1/namespaces/agents/machines/plain", reqwest::Method::DELETE, 403),
        (Caller::Legacy, "/apis/kairon.zyvor.dev/v1/namespaces/agents/machines", reqwest::Method::GET, 200),
    ] {
        let rest = client(k, who);
        let got = rest.send(rest.request(method.clone(), path)).await;
        if got.status != want {
            failures
                .push(format!("kube path: {who:?} {method} {path}: wanted {want}, got {} {}", got.status, got.body));
        }
    }
    // Creating a sandbox-track Machine is admin-only there too.
    let alice = client(k, Caller::Alice);
    for (spec, want) in [
        (json!({"sandbox": {"templateName": "busybox"}}), 403),
        (json!({"image": {"path": "/var/lib/fluxvm/images/kairon-hw.qcow2"}}), 201),
    ] {
        let m = json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "metadata": {"name": "by-alice"}, "spec": spec});
        let req = alice
            .request(reqwest::Method::POST, "/apis/kairon.zyvor.dev/v1/namespaces/agents/machines?dryRun=All")
            .json(&m);
        let got = alice.send(req).await;
        if got.status != want || (want == 403 && !got.body.to_string().contains("admin-only")) {
            failures.push(format!("kube path: Alice creates {spec}: wanted {want}, got {} {}", got.status, got.body));
        }
    }
    let bob = client(k, Caller::Bob);
    let out = std::process::Command::new("kubectl")
        .env("KUBECONFIG", &k.kubeconfig)
        .args(["get", "machines", "-n", "agents", "--token", &bob.token])
        .output()
        .unwrap();
    if out.status.success() || !String::from_utf8_lossy(&out.stderr).contains("may not use namespace") {
        failures.push(format!("kubectl as bob read agents: {out:?}"));
    }
    failures
}

#[tokio::test(flavor = "multi_thread")]
async fn every_caller_against_every_route_class_with_the_operator_exec_flag_off() {
    let k = Kairon::start_with(&["--legacy-token", LEGACY]).unwrap();
    machines(&k).await;
    let mut failures = check_table(&k, false).await;
    failures.extend(kubernetes_paths(&k).await);
    assert!(failures.is_empty(), "{} cells differ:\n{}", failures.len(), failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn every_caller_against_every_route_class_with_the_operator_exec_flag_on() {
    let k = Kairon::start_with(&["--legacy-token", LEGACY, "--sandbox-operator-exec"]).unwrap();
    machines(&k).await;
    let failures = check_table(&k, true).await;
    assert!(failures.is_empty(), "{} cells differ:\n{}", failures.len(), failures.join("\n"));
}
