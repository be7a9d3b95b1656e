//! Tenant vs node at the runtime boundary, tried as an attacker would against `kairon up` with
//! real runc sandboxes: no path parameter of a route that reaches a node's runtime, and no
//! answer of a guest's server, walks the api's runtime client out of the route it meant. Each
//! attack asserts the refusal, that the runtime's request log shows only the intended paths,
//! and that the victim's sandbox still answers.

use std::time::Duration;

use serde_json::{Value, json};

use kairon_e2e::{Flags, Kairon, Rest, eventually};

/// A guest HTTP server that redirects to the node's runtime and tries to set a cookie on the
/// API's origin.
const REDIRECT_CGI: &str = r#"#!/bin/sh
printf 'Status: 302 Found\r\nLocation: %s\r\nSet-Cookie: kairon-session=stolen; Path=/\r\nContent-Type: text/html\r\n\r\n' "$(cat /www/target)"
echo '<script>fetch("/api/v1/machines")</script>'
"#;

fn sandbox(name: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"kairon.zyvor.dev/sandbox": "true"}},
        "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true}}
    })
}

/// The paths (with their query) the runtime was asked for, from its request log
/// (`kairon_runtime::requests`). `/v1/vms` alone is the instance list; the node agent's lookup
/// by runtime name is `/v1/vms?name=…`.
fn runtime_paths(k: &Kairon) -> Vec<String> {
    // The log is written with terminal colours; the fields are read without them.
    kairon_e2e::strip_ansi(&k.logs())
        .lines()
        .filter(|l| l.contains("kairon_runtime::requests"))
        .filter_map(|l| {
            let field = |name: &str| {
                l.split(&format!(" {name}="))
                    .nth(1)
                    .map(|v| v.split_whitespace().next().unwrap_or_default().trim_matches('"'))
            };
            let path = field("path")?;
            Some(match field("query").filter(|q| !q.is_empty()) {
                Some(q) => format!("{path}?{q}"),
                None => path.to_string(),
            })
        })
        .collect()
}

async fn exec_ok(rest: &Rest, ns: &str, name: &str) {
    let out =
        rest.post(&format!("/api/v1/machines/{ns}/{name}/exec"), json!({"command": ["echo", "still here"]})).await.ok();
    assert_eq!(out["stdout"], "still here\n", "the victim's sandbox answers as before");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_path_parameter_or_guest_answer_leaves_the_route_it_meant() {
    let k = Kairon::start_with(&Flags::fast()).unwrap();
    let rest = k.rest().unwrap();
    let runtime_url = k.runtime_url.clone().expect("kairon up runs a runtime as root");
    assert_eq!(rest.post("/api/v1/machines/agents", sandbox("victim")).await.status, 201);
    rest.get("/api/v1/machines/agents/victim/wait?phase=Running&timeoutSeconds=120").await.ok();
    let base = "/api/v1/machines/agents/victim";
    let id = rest.get(base).await.ok()["status"]["runtimeID"].as_str().unwrap().to_string();
    exec_ok(&rest, "agents", "victim").await;

    // Every path parameter that reaches the runtime, with the segments that climbed out of it
    // before: the server decodes `..%2F` into `../` and `%2e%2e%2F` into `../` inside one
    // segment. (A bare `..` or `%2e%2e` segment is resolved by any URL-parsing client before
    // it is sent, so it never arrives as such.)
    let climbs =
        ["..%2F..%2F..%2F..%2F..%2Fv1%2Fvms", "..%2F", "x%2F..%2F..%2F..%2Fv1%2Fvms", "%2e%2e%2F%2e%2e%2Fv1%2Fnode"];
    let before = runtime_paths(&k).len();
    for climb in climbs {
        for (method, path) in [
            ("GET", format!("{base}/sandbox-http/8080/{climb}")),
            ("GET", format!("{base}/sandbox-http/8080/a/{climb}/b")),
            ("POST", format!("{base}/sandbox-http/8080/{climb}")),
            ("GET", format!("{base}/processes/{climb}")),
            ("GET", format!("{base}/processes/{climb}/logs")),
            ("POST", format!("{base}/processes/{climb}/wait")),
            ("POST", format!("{base}/processes/{climb}/kill")),
            ("GET", format!("/api/v1/nodes/local/templates/{climb}")),
            ("GET", format!("/api/v1/nodes/local/pools/{climb}")),
            ("DELETE", format!("/api/v1/nodes/local/pools/{climb}")),
            ("POST", format!("/api/v1/nodes/local/pools/{climb}/claim")),
        ] {
            let req = rest.request(method.parse().unwrap(), &path);
            let req = if method == "POST" { req.json(&json!({})) } else { req };
            let answer = rest.send(req).await;
            assert!(
                answer.status == 400 || answer.status == 404,
                "{method} {path}: expected a refusal, got {} {}",
                answer.status,
                answer.body
            );
            let text = answer.body.to_string();
            assert!(!text.contains(&id) && !text.contains("\"backend\""), "{method} {path} leaked the runtime: {text}");
        }
    }
    // The refusals never reached the runtime with anything but the routes they name.
    for p in &runtime_paths(&k)[before..] {
        assert!(!p.contains(".."), "the runtime was asked for {p}");
        // The instance itself is read by the node agent too, when it reconciles after the
        // activity stamp an exec writes (beside the request, so it may land in this window).
        assert!(
            *p == format!("/v1/vms/{id}")
                || p.starts_with(&format!("/v1/vms/{id}/"))
                || p.starts_with("/v1/pools/")
                || p.starts_with("/v1/templates/"),
            "the runtime was asked for {p}"
        );
        assert_ne!(p, "/v1/vms", "the runtime's instance list was asked for");
    }
    exec_ok(&rest, "agents", "victim").await;

    // A guest's server that answers with a redirect to the runtime itself, and a cookie for the
    // API's origin: the redirect is handed back, not followed with the runtime token; the cookie
    // is dropped; the content is sandboxed.
    let put = |path: &str, body: &str| {
        rest.request(reqwest::Method::PUT, &format!("{base}/files?path={path}&mode=755")).body(body.as_bytes().to_vec())
    };
    assert_eq!(rest.send(put("/www/cgi-bin/redirect", REDIRECT_CGI)).await.status, 204);
    assert_eq!(rest.send(put("/www/target", &format!("{runtime_url}/v1/vms"))).await.status, 204);
    let started =
        rest.post(&format!("{base}/processes"), json!({"command": ["httpd", "-f", "-p", "8080", "-h", "/www"]})).await;
    assert_eq!(started.status, 201, "{:?}", started.body);
    // This client hands back redirects as they come, so the test sees what the API answered.
    let ca = std::fs::read(k.data_dir.path().join("tls/ca.crt")).unwrap();
    let no_redirects = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let redirect = eventually("the guest's httpd", Duration::from_secs(30), || async {
        let r = no_redirects.get(rest.url(&format!("{base}/sandbox-http/8080/cgi-bin/redirect")));
        let r = r.bearer_auth(&rest.token).send().await.ok()?;
        (r.status() == 302).then_some(r)
    })
    .await;
    assert_eq!(redirect.headers()["location"].to_str().unwrap(), format!("{runtime_url}/v1/vms"));
    assert!(redirect.headers().get("set-cookie").is_none(), "a guest's cookie reached the client");
    assert_eq!(redirect.headers()["content-security-policy"], "sandbox");
    let body = redirect.text().await.unwrap();
    assert!(!body.contains(&id), "the redirect was followed to the runtime: {body}");
    assert!(!runtime_paths(&k).iter().any(|p| p == "/v1/vms"), "the runtime's instance list was asked for");
    exec_ok(&rest, "agents", "victim").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runtime_id_that_is_not_an_id_never_reaches_the_runtime() {
    let k = Kairon::start_with(&Flags::fast()).unwrap();
    let rest = k.rest().unwrap();
    assert_eq!(rest.post("/api/v1/machines/agents", sandbox("sb")).await.status, 201);
    rest.get("/api/v1/machines/agents/sb/wait?phase=Running&timeoutSeconds=120").await.ok();
    // Only an admin (or the node) writes status; even so, an ID that names a path is refused
    // before any runtime call, and the node agent puts the true one back.
    let client = k.client().await.unwrap();
    let api: kube::Api<kairon_model::Machine> = kube::Api::namespaced(client, "agents");
    let before = runtime_paths(&k).len();
    api.patch_status(
        "sb",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"status": {"runtimeID": "../../v1/vms"}})),
    )
    .await
    .unwrap();
    let answer = rest.post("/api/v1/machines/agents/sb/exec", json!({"command": ["true"]})).await;
    assert!(answer.status == 409 || answer.status == 200, "{answer:?}");
    for p in &runtime_paths(&k)[before..] {
        assert!(!p.contains("..") && p != "/v1/vms", "the runtime was asked for {p}");
    }
    eventually("the node agent to restore the runtime ID", Duration::from_secs(30), || async {
        let m = rest.get("/api/v1/machines/agents/sb").await.ok();
        (m["status"]["runtimeID"].as_str().is_some_and(|id| !id.contains('/'))).then_some(())
    })
    .await;
    exec_ok(&rest, "agents", "sb").await;
}
