//! Bounded work (SECURITY.md): each limit one past its value, against a real `kairon up` started
//! with small limits through its flags. Every refusal is a JSON 413, 429 or 400 whose message
//! says the limit and what to do, and the server still answers afterwards.

use std::time::Duration;

use serde_json::{Value, json};

use kairon_e2e::{Answer, Kairon, Rest, eventually, kairon_bin};

const GROUP: &str = "/apis/kairon.zyvor.dev/v1";
const IMAGE: &str = "/var/lib/fluxvm/images/kairon-hw.qcow2";

fn vm(name: &str) -> Value {
    json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
           "metadata": {"name": name}, "spec": {"image": {"path": IMAGE}}})
}

/// A refusal that names the limit and the way out.
#[track_caller]
fn refused(what: &str, got: &Answer, code: u16, reason: &str, texts: &[&str]) {
    assert_eq!((got.status, got.reason()), (code, reason), "{what}: {}", got.body);
    for t in texts {
        assert!(got.message().contains(t), "{what}: the message should say {t:?}: {}", got.message());
    }
}

async fn send(r: &Rest, method: reqwest::Method, path: &str, content_type: &str, body: Vec<u8>) -> Answer {
    r.send(r.request(method, path).header("content-type", content_type).body(body)).await
}

/// The server still serves: health, and a small write.
async fn still_fine(r: &Rest, name: &str) {
    assert_eq!(r.get("/healthz").await.status, 200);
    let created = send(
        r,
        reqwest::Method::POST,
        &format!("{GROUP}/namespaces/default/machines"),
        "application/json",
        serde_json::to_vec(&vm(name)).unwrap(),
    )
    .await;
    assert_eq!(created.status, 201, "{created:?}");
}

#[test]
fn the_documented_defaults_appear_in_kairon_up_help() {
    for cmd in ["up", "api"] {
        let out = std::process::Command::new(kairon_bin()).args([cmd, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        for (flag, env, default) in [
            ("--max-body-bytes", "KAIRON_MAX_BODY_BYTES", "3MiB"),
            ("--max-patch-operations", "KAIRON_MAX_PATCH_OPERATIONS", "10000"),
            ("--max-patched-object-bytes", "KAIRON_MAX_PATCHED_OBJECT_BYTES", "1.5MiB"),
            ("--max-exec-output-bytes", "KAIRON_MAX_EXEC_OUTPUT_BYTES", "16MiB"),
            ("--exec-default-timeout", "KAIRON_EXEC_DEFAULT_TIMEOUT", "300s"),
            ("--exec-max-timeout", "KAIRON_EXEC_MAX_TIMEOUT", "3600s"),
            ("--max-connections-per-subject", "KAIRON_MAX_CONNECTIONS_PER_SUBJECT", "32"),
        ] {
            let at = help.find(flag).unwrap_or_else(|| panic!("kairon {cmd} --help has no {flag}:\n{help}"));
            let next = help[at + flag.len()..].find("\n  -").map_or(help.len(), |i| at + flag.len() + i);
            let entry = &help[at..next];
            assert!(entry.contains(&format!("env: {env}")), "{cmd} {flag}: {entry}");
            assert!(entry.contains(&format!("default: {default}")), "{cmd} {flag}: {entry}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bodies_over_the_limit_are_refused_on_every_route_but_file_uploads() {
    let k = Kairon::start_with(&["--no-runtime", "--max-body-bytes", "64KiB"]).unwrap();
    let r = k.rest().unwrap();
    let limit = 64 * 1024;
    // A manifest of exactly the limit is read (and judged on its content), one byte more is not.
    let padded = |n: usize| {
        let mut m = vm("big");
        m["metadata"]["annotations"] = json!({"pad": ""});
        let base = serde_json::to_vec(&m).unwrap().len();
        m["metadata"]["annotations"]["pad"] = json!("x".repeat(n - base));
        let b = serde_json::to_vec(&m).unwrap();
        assert_eq!(b.len(), n);
        b
    };
    let k8s_path = format!("{GROUP}/namespaces/default/machines");
    let at = send(&r, reqwest::Method::POST, &k8s_path, "application/json", padded(limit)).await;
    assert_ne!(at.status, 413, "{at:?}");
    let over = send(&r, reqwest::Method::POST, &k8s_path, "application/json", padded(limit + 1)).await;
    refused("Kubernetes path", &over, 413, "RequestEntityTooLarge", &["64 KiB", "--max-body-bytes"]);
    assert_eq!(over.body["kind"], "Status", "{over:?}");

    let rest_path = "/api/v1/machines/default";
    let over = send(&r, reqwest::Method::POST, rest_path, "application/json", padded(limit + 1)).await;
    refused("REST path", &over, 413, "PayloadTooLarge", &["64 KiB", "--max-body-bytes"]);

    // A body with no length (chunked) is cut at the limit as it is read.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = padded(limit + 1).chunks(4096).map(|c| Ok(c.to_vec())).collect();
    let chunked = r
        .request(reqwest::Method::POST, &k8s_path)
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)));
    let over = r.send(chunked).await;
    refused("chunked body", &over, 413, "RequestEntityTooLarge", &["64 KiB"]);

    // File uploads keep their own limit (--max-upload-bytes): a body past the general limit is
    // not refused for its size (here it fails later, as there is no such Machine).
    let upload = r
        .request(reqwest::Method::PUT, "/api/v1/machines/default/nothing/files?path=/tmp/x")
        .header("content-type", "application/octet-stream")
        .body(vec![b'x'; limit + 1]);
    let upload = r.send(upload).await;
    assert_eq!(upload.status, 404, "{upload:?}");

    still_fine(&r, "after").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn json_patches_are_bounded_in_operations_and_in_what_they_produce() {
    let k =
        Kairon::start_with(&["--no-runtime", "--max-patch-operations", "10", "--max-patched-object-bytes", "16KiB"])
            .unwrap();
    let r = k.rest().unwrap();
    let coll = format!("{GROUP}/namespaces/default/machines");
    let path = format!("{coll}/p");
    let created =
        send(&r, reqwest::Method::POST, &coll, "application/json", serde_json::to_vec(&vm("p")).unwrap()).await;
    assert_eq!(created.status, 201, "{created:?}");
    let ops = |n: usize| {
        let mut v = vec![json!({"op": "add", "path": "/metadata/labels", "value": {}})];
        v.extend((1..n).map(|i| json!({"op": "add", "path": format!("/metadata/labels/l{i}"), "value": "v"})));
        serde_json::to_vec(&v).unwrap()
    };
    let ten = send(&r, reqwest::Method::PATCH, &path, "application/json-patch+json", ops(10)).await;
    assert_eq!(ten.status, 200, "{ten:?}");
    let eleven = send(&r, reqwest::Method::PATCH, &path, "application/json-patch+json", ops(11)).await;
    refused("11 operations", &eleven, 413, "RequestEntityTooLarge", &["11 operations", "10", "--max-patch-operations"]);

    // A small patch that grows the object past the limit, in every patch type.
    let big = "x".repeat(16 * 1024);
    let jp = json!([{"op": "add", "path": "/metadata/annotations", "value": {"big": big}}]);
    let grown =
        send(&r, reqwest::Method::PATCH, &path, "application/json-patch+json", serde_json::to_vec(&jp).unwrap());
    refused("JSON patch result", &grown.await, 413, "RequestEntityTooLarge", &["16 KiB", "--max-patched-object-bytes"]);
    let mp = json!({"metadata": {"annotations": {"big": big}}});
    let grown =
        send(&r, reqwest::Method::PATCH, &path, "application/merge-patch+json", serde_json::to_vec(&mp).unwrap());
    refused("merge patch result", &grown.await, 413, "RequestEntityTooLarge", &["16 KiB"]);
    let mut applied = vm("p");
    applied["metadata"]["annotations"] = json!({"big": big});
    let apply_path = format!("{path}?fieldManager=t&force=true");
    let grown = send(
        &r,
        reqwest::Method::PATCH,
        &apply_path,
        "application/apply-patch+yaml",
        serde_json::to_vec(&applied).unwrap(),
    );
    refused("apply result", &grown.await, 413, "RequestEntityTooLarge", &["16 KiB"]);

    // Nothing of the refused patches was stored; the accepted one was.
    let now = r.get(&path).await.ok();
    assert!(now["metadata"]["annotations"]["big"].is_null(), "{now}");
    assert_eq!(now["metadata"]["labels"].as_object().map(|l| l.len()), Some(9), "{now}");
    still_fine(&r, "after").await;
}

/// Opens a watch and keeps it open (the answer's headers arrive at once, the body never ends).
async fn open_watch(r: &Rest, ns: &str) -> Result<reqwest::Response, Answer> {
    let resp = r
        .request(reqwest::Method::GET, &format!("{GROUP}/namespaces/{ns}/machines?watch=true&timeoutSeconds=300"))
        .send()
        .await
        .expect("the server answers");
    if resp.status() == 200 {
        return Ok(resp);
    }
    let status = resp.status().as_u16();
    let body = serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or(Value::Null);
    Err(Answer { status, body })
}

#[tokio::test(flavor = "multi_thread")]
async fn long_lived_connections_are_counted_per_token_subject() {
    let k = Kairon::start_with(&["--no-runtime", "--max-connections-per-subject", "2"]).unwrap();
    let alice = k.rest_as(&k.token("alice", "operator", &["team-a"]).unwrap()).unwrap();
    let bob = k.rest_as(&k.token("bob", "operator", &["team-b"]).unwrap()).unwrap();

    let first = open_watch(&alice, "team-a").await.unwrap();
    let _second = open_watch(&alice, "team-a").await.unwrap();
    let third = open_watch(&alice, "team-a").await.unwrap_err();
    refused("a third watch", &third, 429, "TooManyConnections", &["2 long-lived", "close one"]);
    assert_eq!(third.body["kind"], "Status", "{third:?}");
    // The REST side counts in the same budget: a wait on a process is long-lived too.
    let wait = alice.post("/api/v1/machines/team-a/m/processes/000000000000/wait", json!({})).await;
    refused("a REST wait", &wait, 429, "TooManyConnections", &["2 long-lived"]);

    // Another subject has its own budget.
    let _bobs = open_watch(&bob, "team-b").await.unwrap();
    // Short requests are not counted.
    assert_eq!(alice.get(&format!("{GROUP}/namespaces/team-a/machines")).await.status, 200);

    // Closing a watch frees its slot.
    drop(first);
    let again = eventually("a slot comes back", Duration::from_secs(20), || {
        let alice = alice.clone();
        async move { open_watch(&alice, "team-a").await.ok() }
    })
    .await;
    drop(again);

    // The admin is not exempt.
    let admin = k.rest().unwrap();
    let _a1 = open_watch(&admin, "default").await.unwrap();
    let _a2 = open_watch(&admin, "default").await.unwrap();
    refused("the admin's third", &open_watch(&admin, "default").await.unwrap_err(), 429, "TooManyConnections", &[]);
    still_fine(&admin, "after").await;
}

/// The log without its colours.
fn plain(log: &str) -> String {
    let mut out = String::with_capacity(log.len());
    let mut rest = log;
    while let Some(i) = rest.find('\x1b') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        rest = rest.find('m').map_or("", |j| &rest[j + 1..]);
    }
    out.push_str(rest);
    out
}

fn sandbox(name: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"kairon.zyvor.dev/sandbox": "true"}},
        "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true}}
    })
}

fn sh(cmd: &str) -> Value {
    json!({"command": ["sh", "-c", cmd]})
}

/// A body sent in chunks with no length.
fn chunked(data: &[u8]) -> reqwest::Body {
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = data.chunks(64 << 10).map(|c| Ok(c.to_vec())).collect();
    reqwest::Body::wrap_stream(futures::stream::iter(chunks))
}

/// Uploads stream to the guest within their own limit (--max-upload-bytes): one cut at the
/// limit is a 413 that says it, and leaves the file it was replacing whole, with no temporary
/// file behind; a download streams with its length; a file's mode stays unless one is given.
#[tokio::test(flavor = "multi_thread")]
async fn uploads_stream_within_their_limit_and_a_cut_one_changes_nothing() {
    let k = Kairon::start_with(&["--max-upload-bytes", "8MiB"]).unwrap();
    let r = k.rest().unwrap();
    r.post("/api/v1/machines/agents", sandbox("up")).await.ok();
    r.get("/api/v1/machines/agents/up/wait?phase=Running&timeoutSeconds=120").await.ok();
    let file = "/api/v1/machines/agents/up/files?path=/work/data.bin";
    let put = |body: reqwest::Body| {
        r.send(r.request(reqwest::Method::PUT, file).header("content-type", "application/octet-stream").body(body))
    };

    // Exactly the limit, in chunks: written whole, and read back with its length.
    let data: Vec<u8> = (0..8u32 << 20).map(|i| (i % 251) as u8).collect();
    assert_eq!(put(chunked(&data)).await.status, 204);
    let got = r.request(reqwest::Method::GET, file).send().await.unwrap();
    assert_eq!(got.content_length(), Some(8 << 20));
    assert!(got.bytes().await.unwrap() == data, "the same bytes come back");

    // One byte more: with no length it is cut as it arrives, with one it is refused at once.
    let over = vec![7u8; (8 << 20) + 1];
    for (what, body) in [("chunked", chunked(&over)), ("with a length", over.clone().into())] {
        let refusal = put(body).await;
        refused(what, &refusal, 413, "PayloadTooLarge", &["8 MiB", "--max-upload-bytes"]);
        let kept = r.request(reqwest::Method::GET, file).send().await.unwrap().bytes().await.unwrap();
        assert!(kept == data, "{what}: the old file is whole");
    }
    let names =
        |v: Value| v.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(names(r.get("/api/v1/machines/agents/up/files/list?path=/work").await.ok()), ["data.bin"]);

    // The mode given is set; an upload without one keeps it.
    let script = "/api/v1/machines/agents/up/files?path=/work/run.sh";
    let put_script =
        |q: &str| r.send(r.request(reqwest::Method::PUT, &format!("{script}{q}")).body("#!/bin/sh\necho hi\n"));
    assert_eq!(put_script("&mode=750").await.status, 204);
    assert_eq!(put_script("").await.status, 204);
    let listed = r.get("/api/v1/machines/agents/up/files/list?path=/work").await.ok();
    let run = listed.as_array().unwrap().iter().find(|e| e["name"] == "run.sh").unwrap().clone();
    assert_eq!(run["mode"], 0o750, "{run}");
}

#[tokio::test(flavor = "multi_thread")]
async fn exec_output_and_timeouts_are_bounded_and_log_follows_read_only_new_bytes() {
    let k = Kairon::start_with(&[
        "--max-exec-output-bytes",
        "1KiB",
        "--exec-max-timeout",
        "60s",
        "--max-connections-per-subject",
        "2",
    ])
    .unwrap();
    let r = k.rest().unwrap();
    r.post("/api/v1/machines/agents", sandbox("sb")).await.ok();
    r.get("/api/v1/machines/agents/sb/wait?phase=Running&timeoutSeconds=120").await.ok();
    let base = "/api/v1/machines/agents/sb";

    // Exactly the limit is whole; one byte more is cut, on each stream.
    let exact = r.post(&format!("{base}/exec"), sh("head -c 1024 /dev/zero | tr '\\0' x")).await.ok();
    assert_eq!((exact["stdout"].as_str().map(str::len), &exact["truncated"]), (Some(1024), &json!(false)), "{exact}");
    let over = r.post(&format!("{base}/exec"), sh("head -c 1025 /dev/zero | tr '\\0' x >&2")).await.ok();
    assert_eq!((over["stderr"].as_str().map(str::len), &over["truncated"]), (Some(1024), &json!(true)), "{over}");
    // An endless writer ends: the runtime stops reading at the limit and the pipe closes.
    let started = std::time::Instant::now();
    let endless = r.post(&format!("{base}/exec"), json!({"command": ["yes"], "timeoutSeconds": 50})).await.ok();
    assert_eq!((endless["stdout"].as_str().map(str::len), &endless["truncated"]), (Some(1024), &json!(true)));
    assert_eq!(endless["timedOut"], false, "{endless}");
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());

    // A timeout above the most is refused; one at it runs.
    let long = r.post(&format!("{base}/exec"), json!({"command": ["true"], "timeoutSeconds": 61})).await;
    refused("timeout 61 s", &long, 400, "BadRequest", &["60 s", "--exec-max-timeout"]);
    let ok = r.post(&format!("{base}/exec"), json!({"command": ["true"], "timeoutSeconds": 60})).await.ok();
    assert_eq!(ok["exitCode"], 0);

    // A followed log gets every byte once, in order, while the runtime is asked only for new ones.
    let p = r.post(&format!("{base}/processes"), sh("for i in 1 2 3 4 5; do echo line$i; sleep 0.3; done")).await.ok();
    let pid = p["id"].as_str().unwrap().to_string();
    let followed = r.send(r.request(reqwest::Method::GET, &format!("{base}/processes/{pid}/logs?follow=true"))).await;
    assert_eq!(followed.body, json!("line1\nline2\nline3\nline4\nline5\n"));
    // The runtime's request log: reads from 0, then from past "line1\n" (6 bytes) onwards.
    let log = plain(&k.logs());
    assert!(log.contains("query=\"stream=stdout&offset=0\""), "the follow reads with offsets:\n{log}");
    assert!(log.contains("query=\"stream=stdout&offset=6\""), "the follow reads only new bytes:\n{log}");
    assert!(!log.contains(&format!("{pid}/logs query=\"\"")), "no full re-read while following:\n{log}");

    // The follow counts as a long-lived connection: with two consoles open, it is refused.
    let _c1 = r.websocket(&format!("{base}/console")).await.unwrap();
    let _c2 = r.websocket(&format!("{base}/console")).await.unwrap();
    let third = r.get(&format!("{base}/processes/{pid}/logs?follow=true")).await;
    refused("a follow past the limit", &third, 429, "TooManyConnections", &["2 long-lived"]);
    let ws = r.websocket(&format!("{base}/console")).await.unwrap_err();
    assert!(ws.contains("429") && ws.contains("TooManyConnections"), "{ws}");
    drop(_c1);
    eventually("a console slot comes back", Duration::from_secs(20), || {
        let r = r.clone();
        async move { r.websocket(&format!("{base}/console")).await.ok() }
    })
    .await;
}
