//! The REST API under `kairon up` with real runc sandboxes: the mirror of the Kubernetes
//! objects, power operations, guest relays with wake-on-connect, node routes and usage.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use kairon_e2e::{Flags, Kairon, Rest, during, eventually, hold, wait_for};
use kairon_model::Machine;

fn fast() -> Flags<'static> {
    Flags::fast_activity("1s").activity_stamps("1s").min_idle_timeout_seconds("1")
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

/// Echoes what the guest got (busybox httpd hands a CGI every header as HTTP_<NAME>).
const ECHO_CGI: &str = r#"#!/bin/sh
printf 'Status: 201 Created\r\nContent-Type: text/plain\r\nX-Guest: yes\r\n\r\n'
echo "method=$REQUEST_METHOD"
echo "query=$QUERY_STRING"
echo "x-test=$HTTP_X_TEST"
echo "auth=$HTTP_AUTHORIZATION"
echo "body=$(dd bs=1 count=${CONTENT_LENGTH:-0} 2>/dev/null)"
"#;

/// Five events with a pause between them; the second waits for a file the test writes, so the
/// first provably arrived before the rest existed.
const STREAM_CGI: &str = r#"#!/bin/sh
printf 'Content-Type: text/event-stream\r\n\r\n'
echo "data: first"; echo
while [ ! -f /tmp/go-on ]; do sleep 0.1; done
for i in 2 3 4 5; do echo "data: line$i"; echo; done
"#;

async fn start_httpd(rest: &Rest, ns: &str, name: &str) {
    let base = format!("/api/v1/machines/{ns}/{name}");
    for (file, script) in [("echo", ECHO_CGI), ("stream", STREAM_CGI)] {
        let put = rest
            .request(reqwest::Method::PUT, &format!("{base}/files?path=/www/cgi-bin/{file}&mode=755"))
            .body(script.as_bytes().to_vec());
        assert_eq!(rest.send(put).await.status, 204);
    }
    let started =
        rest.post(&format!("{base}/processes"), json!({"command": ["httpd", "-f", "-p", "8080", "-h", "/www"]})).await;
    assert_eq!(started.status, 201, "{:?}", started.body);
    eventually("httpd to listen", Duration::from_secs(30), || async {
        let r = rest.get(&format!("{base}/sandbox-http/8080/cgi-bin/echo")).await;
        (r.status == 201).then_some(())
    })
    .await;
}

/// A relay's output to its close, and the close frame's reason.
async fn to_close<S>(ws: &mut S) -> (Vec<u8>, String)
where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let mut out = Vec::new();
    while let Some(msg) = ws.next().await {
        match msg.unwrap() {
            Message::Binary(b) => out.extend_from_slice(&b),
            Message::Close(frame) => return (out, frame.map(|f| f.reason.to_string()).unwrap_or_default()),
            _ => {}
        }
    }
    (out, String::new())
}

#[tokio::test(flavor = "multi_thread")]
async fn machines_are_mirrored_as_kubernetes_objects_and_bad_input_is_a_4xx() {
    let k = Kairon::start_with(&fast()).unwrap();
    let rest = k.rest().unwrap();

    // Create, with dryRun first: nothing is stored.
    let dry = rest.post("/api/v1/machines/agents?dryRun=All", sandbox("sb")).await;
    assert_eq!(dry.status, 201, "{:?}", dry.body);
    assert_eq!(rest.get("/api/v1/machines/agents/sb").await.status, 404);
    let created = rest.post("/api/v1/machines/agents", sandbox("sb")).await.ok();
    assert_eq!(created["apiVersion"], "kairon.zyvor.dev/v1");
    assert_eq!(created["kind"], "Machine");
    assert_eq!(created["metadata"]["namespace"], "agents");

    // The same JSON as the Kubernetes object.
    let m = rest.running("agents", "sb").await;
    let kube: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "agents");
    let via_kube = serde_json::to_value(kube.get("sb").await.unwrap()).unwrap();
    assert_eq!(m["metadata"]["uid"], via_kube["metadata"]["uid"]);
    assert_eq!(m["spec"], via_kube["spec"]);

    // Lists: all namespaces, one, and by label.
    rest.post("/api/v1/machines/other", sandbox("sb2")).await.ok();
    let all = rest.get("/api/v1/machines").await.ok();
    assert_eq!(all["items"].as_array().unwrap().len(), 2);
    let one = rest.get("/api/v1/machines/agents").await.ok();
    assert_eq!(one["items"].as_array().unwrap().len(), 1);
    let none = rest.get("/api/v1/machines?labelSelector=kairon.zyvor.dev%2Fsandbox%3Dfalse").await.ok();
    assert_eq!(none["items"].as_array().unwrap().len(), 0);

    // Events of the object (the scheduler recorded one).
    let events = rest.get("/api/v1/machines/agents/sb/events").await.ok();
    assert!(events["items"].as_array().unwrap().iter().any(|e| e["reason"] == "Scheduled"), "{events}");

    // Bad input: each a 4xx that says what to fix, and nothing half-made.
    let bad_name = rest.post("/api/v1/machines/agents", json!({"metadata": {"name": "Not_A_Name"}, "spec": {}})).await;
    assert!(bad_name.status == 400 || bad_name.status == 422, "{bad_name:?}");
    let bad_path = rest.get("/api/v1/machines/agents/Bad%20Name").await;
    assert_eq!((bad_path.status, bad_path.reason()), (400, "BadRequest"), "{bad_path:?}");
    let wrong_ns = rest
        .post("/api/v1/machines/agents", json!({"metadata": {"name": "x", "namespace": "other"}, "spec": {}}))
        .await;
    assert_eq!(wrong_ns.status, 400);
    assert!(wrong_ns.message().contains("does not match"), "{wrong_ns:?}");
    let bad_field = rest
        .post("/api/v1/machines/agents", json!({"metadata": {"name": "x"}, "spec": {"powerState": "Sideways"}}))
        .await;
    assert_eq!(bad_field.status, 400, "{bad_field:?}");
    assert!(bad_field.message().contains("spec.powerState"), "{bad_field:?}");
    let min_idle = rest
        .post(
            "/api/v1/machines/agents",
            json!({"metadata": {"name": "x"}, "spec": {"lifecycle": {"idleTimeoutSeconds": 0}}}),
        )
        .await;
    assert_eq!(min_idle.status, 422, "{min_idle:?}");
    let not_json = rest.send(rest.request(reqwest::Method::POST, "/api/v1/machines/agents").body("{")).await;
    assert!((400..500).contains(&not_json.status), "{not_json:?}");
    assert_eq!(rest.get("/api/v1/machines/agents").await.ok()["items"].as_array().unwrap().len(), 1);
    let dup = rest.post("/api/v1/machines/agents", sandbox("sb")).await;
    assert_eq!(dup.status, 409);
    let wait_bad = rest.get("/api/v1/machines/agents/sb/wait").await;
    assert_eq!(wait_bad.status, 400);
    let timeout = rest.get("/api/v1/machines/agents/sb/wait?phase=Hibernated&timeoutSeconds=1").await;
    assert_eq!((timeout.status, timeout.reason()), (504, "Timeout"), "{timeout:?}");
    assert!(timeout.message().contains("phase is Running"), "{timeout:?}");
    let no_token = rest.send(rest.http.get(rest.url("/api/v1/machines"))).await;
    assert_eq!((no_token.status, no_token.reason()), (401, "Unauthorized"));

    // Replace keeps the object and checks versions.
    let mut current = rest.get("/api/v1/machines/agents/sb").await.ok();
    current["metadata"]["labels"]["team"] = json!("blue");
    let replaced = rest.put("/api/v1/machines/agents/sb", current.clone()).await.ok();
    assert_eq!(replaced["metadata"]["labels"]["team"], "blue");
    let stale = rest.put("/api/v1/machines/agents/sb", current).await;
    assert_eq!(stale.status, 409, "a stale resourceVersion is a conflict: {stale:?}");

    // Delete, and wait for it to be gone (the finalizer removes the instance first).
    let rt = k.runtime().unwrap();
    assert!(rt.find_by_name("kairon-agents-sb").await.unwrap().is_some());
    rest.delete("/api/v1/machines/agents/sb").await.ok();
    rest.wait_deleted("agents", "sb", 120).await;
    assert!(rt.find_by_name("kairon-agents-sb").await.unwrap().is_none());

    // The explorer and the document are served.
    let doc = rest.get("/openapi.json").await.ok();
    assert!(doc["paths"]["/api/v1/machines/{namespace}/{name}/exec"].is_object());
    let docs = rest.send(rest.http.get(rest.url("/docs/"))).await;
    assert_eq!(docs.status, 200);
    assert!(docs.body.as_str().unwrap_or_default().contains("swagger"), "{:?}", docs.body);
}

#[tokio::test(flavor = "multi_thread")]
async fn guest_routes_run_commands_move_files_and_relay_http() {
    let k = Kairon::start_with(&fast()).unwrap();
    let rest = k.rest().unwrap();
    rest.post("/api/v1/machines/agents", sandbox("sb")).await.ok();
    rest.running("agents", "sb").await;
    let base = "/api/v1/machines/agents/sb";

    // Exec to completion.
    let r = rest
        .post(&format!("{base}/exec"), json!({"command": ["sh", "-c", "echo out; echo err >&2; exit 3"]}))
        .await
        .ok();
    assert_eq!(
        (r["exitCode"].as_i64(), r["stdout"].as_str(), r["stderr"].as_str()),
        (Some(3), Some("out\n"), Some("err\n"))
    );
    let stdin = rest.post(&format!("{base}/exec"), json!({"command": ["cat"], "stdin": "fed"})).await.ok();
    assert_eq!(stdin["stdout"], "fed");
    let empty = rest.post(&format!("{base}/exec"), json!({"command": []})).await;
    assert_eq!(empty.status, 400);

    // Exec streamed over WebSocket: stdin in (an empty frame is end-of-file), output out as it
    // comes, the exit code in the close frame.
    let cmd = "%5B%22sh%22%2C%22-c%22%2C%22echo%20ready%3B%20tr%20a-z%20A-Z%3B%20exit%207%22%5D";
    let mut streamed = rest.websocket(&format!("{base}/exec/stream?command={cmd}")).await.unwrap();
    let mut out = Vec::new();
    while !String::from_utf8_lossy(&out).contains("ready\n") {
        match tokio::time::timeout(Duration::from_secs(60), streamed.next()).await.unwrap() {
            Some(Ok(Message::Binary(b))) => out.extend_from_slice(&b),
            other => panic!("before any input: {other:?}"),
        }
    }
    streamed.send(Message::Binary(b"shout\n".to_vec().into())).await.unwrap();
    streamed.send(Message::Binary(Vec::new().into())).await.unwrap();
    let reason = loop {
        match tokio::time::timeout(Duration::from_secs(60), streamed.next()).await.unwrap() {
            Some(Ok(Message::Binary(b))) => out.extend_from_slice(&b),
            Some(Ok(Message::Close(Some(f)))) => break f.reason.to_string(),
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(String::from_utf8_lossy(&out), "ready\nSHOUT\n");
    assert_eq!(reason, "exit 7");
    let bad = rest.websocket(&format!("{base}/exec/stream?command=sh")).await;
    assert!(bad.as_ref().is_err_and(|e| e.starts_with("400")), "{:?}", bad.err());
    // On a terminal: stdout and stderr arrive as one screen, the size given is the terminal's.
    // ["sh","-c","stty size; tty >/dev/null && echo on-a-tty; exit 2"]
    let cmd = "%5B%22sh%22%2C%22-c%22%2C%22stty%20size%3B%20tty%20%3E%2Fdev%2Fnull%20%26%26%20echo%20on-a-tty%3B%20exit%202%22%5D";
    let mut tty = rest.websocket(&format!("{base}/exec/stream?command={cmd}&tty=true&cols=132&rows=43")).await.unwrap();
    let (screen, closed) = to_close(&mut tty).await;
    // A terminal writes \r\n for each newline.
    assert_eq!(String::from_utf8_lossy(&screen), "43 132\r\non-a-tty\r\n");
    assert_eq!(closed, "exit 2");
    let too_big = rest.websocket(&format!("{base}/exec/stream?command={cmd}&tty=true&cols=5000")).await;
    assert!(too_big.as_ref().is_err_and(|e| e.starts_with("400")), "{:?}", too_big.err());
    // On a terminal too, the command's own environment variables, user and directory.
    let enc = |s: &str| s.bytes().map(|b| format!("%{b:02X}")).collect::<String>();
    let cmd = enc(r#"["sh","-c","echo $GREETING-$(id -u)-$(pwd)"]"#);
    let as_user = format!("env={}&user=1000&cwd=%2Ftmp", enc(r#"{"GREETING":"hi"}"#));
    let mut tty = rest.websocket(&format!("{base}/exec/stream?command={cmd}&{as_user}&tty=true")).await.unwrap();
    let (screen, closed) = to_close(&mut tty).await;
    assert_eq!((String::from_utf8_lossy(&screen).as_ref(), closed.as_str()), ("hi-1000-/tmp\r\n", "exit 0"));
    let bad_env = rest.websocket(&format!("{base}/exec/stream?command={cmd}&env=GREETING%3Dhi")).await;
    assert!(bad_env.as_ref().is_err_and(|e| e.starts_with("400") && e.contains("JSON object")), "{:?}", bad_env.err());

    // Files: upload, download, list, delete; bad paths are 400s.
    let put =
        rest.request(reqwest::Method::PUT, &format!("{base}/files?path=/tmp/task.py")).body(b"print('hi')".to_vec());
    assert_eq!(rest.send(put).await.status, 204);
    let got = rest.send(rest.request(reqwest::Method::GET, &format!("{base}/files?path=/tmp/task.py"))).await;
    assert_eq!(got.body, json!("print('hi')"));
    let list = rest.get(&format!("{base}/files/list?path=/tmp")).await.ok();
    assert!(list.as_array().unwrap().iter().any(|e| e["name"] == "task.py" && e["size"] == 11), "{list}");
    assert_eq!(rest.delete(&format!("{base}/files?path=/tmp/task.py")).await.status, 204);
    assert_eq!(rest.get(&format!("{base}/files?path=/tmp/task.py")).await.status, 404);
    assert_eq!(rest.get(&format!("{base}/files?path=relative")).await.status, 400);
    let bad_mode = rest.request(reqwest::Method::PUT, &format!("{base}/files?path=/tmp/x&mode=999")).body("x");
    assert_eq!(rest.send(bad_mode).await.status, 400);
    // Past the 64 MiB that once held whole uploads: files stream now (the limit is
    // --max-upload-bytes, tested in limits.rs).
    let big =
        rest.request(reqwest::Method::PUT, &format!("{base}/files?path=/tmp/big")).body(vec![7u8; 65 * 1024 * 1024]);
    assert_eq!(rest.send(big).await.status, 204);
    let list = rest.get(&format!("{base}/files/list?path=/tmp")).await.ok();
    assert!(list.as_array().unwrap().iter().any(|e| e["name"] == "big" && e["size"] == 65 << 20), "{list}");
    assert_eq!(rest.delete(&format!("{base}/files?path=/tmp/big")).await.status, 204);

    // Background processes: start, list, logs (also followed), wait, kill.
    let p = rest
        .post(&format!("{base}/processes"), sh("for i in 1 2 3; do echo line$i; sleep 0.2; done; echo bye >&2"))
        .await;
    assert_eq!(p.status, 201, "{p:?}");
    let pid = p.body["id"].as_str().unwrap().to_string();
    let followed =
        rest.send(rest.request(reqwest::Method::GET, &format!("{base}/processes/{pid}/logs?follow=true"))).await;
    assert_eq!(followed.body, json!("line1\nline2\nline3\n"));
    let done = rest.post(&format!("{base}/processes/{pid}/wait?timeoutSeconds=30"), json!({})).await.ok();
    assert_eq!(done["state"], "exited");
    assert_eq!(done["exitCode"], 0);
    let logs = rest.get(&format!("{base}/processes/{pid}/logs")).await.ok();
    assert_eq!(logs["stderr"], "bye\n");
    // One stream: stdout, stderr and the exit, each as it comes, with offsets to resume from.
    let p = rest.post(&format!("{base}/processes"), sh("echo out1; echo err1 >&2; sleep 1.5; echo out2; exit 4")).await;
    let pid = p.body["id"].as_str().unwrap().to_string();
    let events = rest.json_lines(&format!("{base}/processes/{pid}/stream")).await;
    let (first_at, exit_at) = (events[0].0, events.last().unwrap().0);
    assert!(exit_at - first_at >= Duration::from_millis(1000), "the first output came as it was produced: {events:?}");
    let text = |kind: &str| -> String {
        events.iter().filter(|(_, e)| e["type"] == kind).map(|(_, e)| e["data"].as_str().unwrap()).collect()
    };
    assert_eq!((text("stdout"), text("stderr")), ("out1\nout2\n".to_string(), "err1\n".to_string()), "{events:?}");
    assert_eq!(events.last().unwrap().1, json!({"type": "exit", "exitCode": 4}));
    assert_eq!(events.iter().filter(|(_, e)| e["type"] == "exit").count(), 1);
    let last_end = |kind: &str| events.iter().rev().find(|(_, e)| e["type"] == kind).map(|(_, e)| e["end"].clone());
    assert_eq!((last_end("stdout"), last_end("stderr")), (Some(json!(10)), Some(json!(5))));
    // Resumed from offsets: only what comes after them.
    let resumed = rest.json_lines(&format!("{base}/processes/{pid}/stream?stdoutOffset=5&stderrOffset=5")).await;
    let resumed: Vec<Value> = resumed.into_iter().map(|(_, e)| e).collect();
    assert_eq!(
        resumed,
        [json!({"type": "stdout", "data": "out2\n", "end": 10}), json!({"type": "exit", "exitCode": 4})]
    );
    assert_eq!(rest.get(&format!("{base}/processes/0123456789ab/stream")).await.status, 404);

    // A kept-open stdin: written in parts as the process runs, then closed (end of file).
    let mut req = sh("while read l; do echo got:$l; done; echo eof");
    req["keepStdinOpen"] = json!(true);
    req["stdin"] = json!("first\n");
    let p = rest.post(&format!("{base}/processes"), req).await;
    assert_eq!(p.status, 201, "{p:?}");
    let pid = p.body["id"].as_str().unwrap().to_string();
    let stdin = |data: &'static str, close: bool| {
        let req = rest
            .request(reqwest::Method::POST, &format!("{base}/processes/{pid}/stdin?close={close}"))
            .header("content-type", "application/octet-stream")
            .body(data);
        rest.send(req)
    };
    let r = stdin("second\n", false).await;
    assert_eq!(r.status, 204, "{r:?}");
    let so_far = eventually("the process to read both lines", Duration::from_secs(30), || async {
        let l = rest.get(&format!("{base}/processes/{pid}/logs")).await.ok();
        (l["stdout"] == "got:first\ngot:second\n").then_some(l)
    })
    .await;
    assert_eq!(so_far["stdout"], "got:first\ngot:second\n");
    assert_eq!(stdin("third\n", true).await.status, 204);
    let done = rest.post(&format!("{base}/processes/{pid}/wait?timeoutSeconds=30"), json!({})).await.ok();
    assert_eq!(done["state"], "exited", "closing stdin ended the loop: {done}");
    let logs = rest.get(&format!("{base}/processes/{pid}/logs")).await.ok();
    assert_eq!(logs["stdout"], "got:first\ngot:second\ngot:third\neof\n");
    let closed = stdin("more\n", false).await;
    assert_eq!((closed.status, closed.reason()), (409, "StdinClosed"), "{closed:?}");
    // A process started without it has no stdin to write; an exec cannot keep one open.
    let plain = rest.post(&format!("{base}/processes"), sh("sleep 5")).await.body["id"].as_str().unwrap().to_string();
    let r = rest.send(rest.request(reqwest::Method::POST, &format!("{base}/processes/{plain}/stdin")).body("x")).await;
    assert_eq!((r.status, r.reason()), (409, "StdinClosed"), "{r:?}");
    assert!(r.message().contains("keepStdinOpen"), "{r:?}");
    let mut bad = sh("true");
    bad["keepStdinOpen"] = json!(true);
    assert_eq!(rest.post(&format!("{base}/exec"), bad).await.status, 400);
    rest.post(&format!("{base}/processes/{plain}/kill?signal=KILL"), json!({})).await;

    let long = rest.post(&format!("{base}/processes"), sh("sleep 600")).await.body["id"].as_str().unwrap().to_string();
    let listed = rest.get(&format!("{base}/processes")).await.ok();
    assert_eq!(listed.as_array().unwrap().len(), 5, "the four above and this one: {listed}");
    assert_eq!(rest.post(&format!("{base}/processes/{long}/kill?signal=KILL"), json!({})).await.status, 204);
    let killed = rest.post(&format!("{base}/processes/{long}/wait?timeoutSeconds=30"), json!({})).await.ok();
    assert_eq!(killed["state"], "exited");

    // The sandbox HTTP proxy: method, query, headers, body in; status, headers, body out.
    start_httpd(&rest, "agents", "sb").await;
    let req = rest
        .request(reqwest::Method::POST, &format!("{base}/sandbox-http/8080/cgi-bin/echo?x=1"))
        .header("x-test", "abc")
        .body("hello body");
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    assert_eq!(resp.headers()["x-guest"], "yes");
    let text = resp.text().await.unwrap();
    // The caller's token never reaches the guest.
    assert_eq!(text, "method=POST\nquery=x=1\nx-test=abc\nauth=\nbody=hello body\n");
    let put = rest.send(rest.request(reqwest::Method::PUT, &format!("{base}/sandbox-http/8080/cgi-bin/echo"))).await;
    assert!(put.body.as_str().unwrap().starts_with("method=PUT\n"), "{put:?}");
    let missing =
        rest.send(rest.request(reqwest::Method::GET, &format!("{base}/sandbox-http/8080/nothing-here"))).await;
    assert_eq!(missing.status, 404);
    let bad_port = rest.get(&format!("{base}/sandbox-http/0/x")).await;
    assert_eq!(bad_port.status, 400);

    // The response streams: the first event arrives before the rest exists.
    let resp =
        rest.request(reqwest::Method::GET, &format!("{base}/sandbox-http/8080/cgi-bin/stream")).send().await.unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut stream = resp.bytes_stream();
    // However the guest's writes are cut into chunks, the whole first event arrives, and nothing
    // past it (the rest waits for /tmp/go-on).
    let mut first = String::new();
    while !first.ends_with("\n\n") {
        let chunk = tokio::time::timeout(Duration::from_secs(60), stream.next()).await.unwrap().unwrap().unwrap();
        first.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert_eq!(first, "data: first\n\n");
    rest.post(&format!("{base}/exec"), sh("touch /tmp/go-on")).await.ok();
    let mut rest_of = String::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(60), stream.next()).await.unwrap() {
        rest_of.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    assert_eq!(rest_of, (2..=5).map(|i| format!("data: line{i}\n\n")).collect::<String>());

    // Console and port-forward over WebSocket.
    let mut console = rest.websocket(&format!("{base}/console")).await.unwrap();
    console.send(Message::Binary(b"echo from-the-console\nexit 0\n".to_vec().into())).await.unwrap();
    let mut seen = Vec::new();
    while let Some(Ok(m)) = tokio::time::timeout(Duration::from_secs(60), console.next()).await.unwrap() {
        match m {
            Message::Binary(b) => seen.extend_from_slice(&b),
            Message::Text(t) => seen.extend_from_slice(t.as_bytes()),
            Message::Close(_) => break,
            _ => {}
        }
    }
    assert!(String::from_utf8_lossy(&seen).contains("from-the-console"), "{}", String::from_utf8_lossy(&seen));
    let mut tunnel = rest.websocket(&format!("{base}/portforward/8080")).await.unwrap();
    tunnel.send(Message::Binary(b"GET /cgi-bin/echo HTTP/1.0\r\n\r\n".to_vec().into())).await.unwrap();
    let mut got = Vec::new();
    while let Some(Ok(m)) = tokio::time::timeout(Duration::from_secs(60), tunnel.next()).await.unwrap() {
        match m {
            Message::Binary(b) => got.extend_from_slice(&b),
            Message::Close(_) => break,
            _ => {}
        }
        if String::from_utf8_lossy(&got).contains("body=") {
            break;
        }
    }
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("HTTP/1.") && got.contains("method=GET"), "{got}");
    let closed = rest.websocket(&format!("{base}/portforward/9")).await;
    assert!(closed.as_ref().is_err_and(|e| e.starts_with("502")), "a closed port is a plain error: {:?}", closed.err());

    // Snapshot (admin-only) exports the root filesystem on the node.
    let tar = k.data_dir.path().join("sb.tar");
    let snap = rest.post(&format!("{base}/snapshot"), json!({"path": tar})).await.ok();
    assert!(snap["bytes"].as_u64().unwrap() > 0);

    // Without the guest agent, exec and files are refused with what to set.
    rest.post(
        "/api/v1/machines/agents",
        json!({"metadata": {"name": "bare"}, "spec": {"sandbox": {"templateName": "busybox"}}}),
    )
    .await
    .ok();
    rest.running("agents", "bare").await;
    let refused = rest.post("/api/v1/machines/agents/bare/exec", sh("true")).await;
    assert_eq!((refused.status, refused.reason()), (409, "GuestAgentDisabled"));
    assert!(refused.message().contains("spec.guestAgent"), "{refused:?}");
    assert_eq!(rest.get("/api/v1/machines/agents/bare/files?path=/etc/passwd").await.reason(), "GuestAgentDisabled");
}

#[tokio::test(flavor = "multi_thread")]
async fn power_operations_follow_through_and_dry_run_stores_nothing() {
    let k = Kairon::start_with(&fast()).unwrap();
    let rest = k.rest().unwrap();
    rest.post("/api/v1/machines/agents", sandbox("sb")).await.ok();
    rest.running("agents", "sb").await;
    let base = "/api/v1/machines/agents/sb";
    let phase = |v: &Value| v["spec"]["powerState"].as_str().map(String::from);

    for op in ["pause", "stop", "restart", "migrate"] {
        let before = rest.get(base).await.ok();
        let r = rest.post(&format!("{base}/{op}?dryRun=All"), json!({})).await;
        if op == "migrate" {
            assert_eq!((r.status, r.reason()), (409, "NoTargetNode"), "{r:?}");
            continue;
        }
        let body = r.ok();
        let after = rest.get(base).await.ok();
        assert_eq!(
            after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
            "{op} dry run stored nothing"
        );
        if op != "restart" {
            assert_ne!(phase(&body), phase(&before), "{op} dry run answers the result");
        }
    }
    rest.post(&format!("{base}/pause"), json!({})).await.ok();
    rest.get(&format!("{base}/wait?phase=Paused&timeoutSeconds=120")).await.ok();
    let halt = rest.post(&format!("{base}/halt"), json!({})).await;
    assert_eq!(halt.status, 409, "{halt:?}");
    rest.post(&format!("{base}/resume"), json!({})).await.ok();
    rest.running("agents", "sb").await;
    let hib = rest.post(&format!("{base}/hibernate"), json!({})).await;
    assert_eq!((hib.status, hib.reason()), (409, "PowerStateUnsupported"), "{hib:?}");
    rest.post(&format!("{base}/stop"), json!({})).await.ok();
    rest.get(&format!("{base}/wait?phase=Stopped&timeoutSeconds=120")).await.ok();
    let started = rest.post(&format!("{base}/start?paused=true"), json!({})).await.ok();
    assert_eq!(phase(&started).as_deref(), Some("Paused"));
    rest.get(&format!("{base}/wait?phase=Paused&timeoutSeconds=120")).await.ok();
    rest.post(&format!("{base}/start"), json!({})).await.ok();
    rest.running("agents", "sb").await;
    rest.post(&format!("{base}/restart"), json!({})).await.ok();
    rest.running("agents", "sb").await;

    // Freeze needs a VM; on a template sandbox it is refused with the reason.
    let freeze = rest.post(&format!("{base}/freeze?unfreezeTimeout=1m"), json!({})).await;
    assert_eq!((freeze.status, freeze.reason()), (409, "FreezeUnsupported"), "{freeze:?}");
    assert_eq!(rest.post(&format!("{base}/freeze?unfreezeTimeout=soon"), json!({})).await.status, 409);

    // Fork copies the sandbox into a new Machine the node adopts (no second instance).
    rest.post(&format!("{base}/exec"), sh("echo original > /root/mark")).await.ok();
    let fork = rest.post(&format!("{base}/fork"), json!({"name": "sb-fork"})).await;
    assert_eq!(fork.status, 201, "{fork:?}");
    let forked = rest.running("agents", "sb-fork").await;
    let rt = k.runtime().unwrap();
    let copy = rt.find_by_name("kairon-agents-sb-fork").await.unwrap().unwrap();
    assert_eq!(forked["status"]["runtimeID"].as_str(), Some(copy.id.as_str()));
    let mark = rest.post("/api/v1/machines/agents/sb-fork/exec", sh("cat /root/mark")).await.ok();
    assert_eq!(mark["stdout"], "original\n");
    let again = rest.post(&format!("{base}/fork"), json!({"name": "sb-fork"})).await;
    assert_eq!((again.status, again.reason()), (409, "AlreadyExists"));
    let sandboxes = rt.list_sandboxes().await.unwrap();
    assert_eq!(sandboxes.iter().filter(|v| v.name == "kairon-agents-sb-fork").count(), 1);

    // A Machine name as long as a name may be (63): `kairon-agents-<name>` is no DNS label then,
    // and the copy is named `<name>.agents.kairon` on the node instead of being refused (422).
    let long = format!("long-{}", "x".repeat(58));
    let fork = rest.post(&format!("{base}/fork"), json!({ "name": long })).await;
    assert_eq!(fork.status, 201, "{fork:?}");
    let forked = rest.running("agents", &long).await;
    let copy = rt.find_by_name(&format!("{long}.agents.kairon")).await.unwrap().unwrap();
    assert_eq!(forked["status"]["runtimeID"].as_str(), Some(copy.id.as_str()));
    let mark = rest.post(&format!("/api/v1/machines/agents/{long}/exec"), sh("cat /root/mark")).await.ok();
    assert_eq!(mark["stdout"], "original\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn relays_wake_an_idle_suspended_machine_but_not_a_hand_paused_one() {
    let k = Kairon::start_with(&fast()).unwrap();
    let rest = k.rest().unwrap();
    let kube: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "agents");
    let mut m = sandbox("idle");
    m["spec"]["lifecycle"] =
        json!({"idleTimeoutSeconds": 3, "idleAction": "Pause", "wakeOnConnect": true, "wakeTimeoutSeconds": 60});
    rest.post("/api/v1/machines/agents", m).await.ok();
    rest.running("agents", "idle").await;
    let base = "/api/v1/machines/agents/idle";
    start_httpd(&rest, "agents", "idle").await;
    rest.post(
        &format!("{base}/processes"),
        json!({"command": ["sh", "-c", "while true; do echo hi | nc -l -p 9000; done"]}),
    )
    .await
    .ok();

    // The controller pauses it for idleness; exec wakes it.
    let idle_paused = |v: &Value| {
        v["spec"]["powerState"] == "Paused"
            && v["metadata"]["annotations"]["kairon.zyvor.dev/idle-suspended"].is_string()
            && v["status"]["phase"] == "Paused"
    };
    eventually("the controller to idle-pause the Machine", Duration::from_secs(120), || async {
        idle_paused(&rest.get(base).await.body).then_some(())
    })
    .await;
    // Keep the controller out of the rest of the test: the later suspensions are set by hand
    // exactly as the controller sets them.
    kube.patch(
        "idle",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"lifecycle": {"idleTimeoutSeconds": 86400}}})),
    )
    .await
    .unwrap();
    let r = rest.post(&format!("{base}/exec"), sh("echo awake")).await.ok();
    assert_eq!(r["stdout"], "awake\n");
    // The exec ran as soon as the wake's write was made and the instance thawed; the status is
    // the node agent's report, which follows on its watch.
    let after = eventually("the node agent to report the woken Machine Running", Duration::from_secs(10), || async {
        let m = rest.get(base).await.ok();
        (m["status"]["phase"] == "Running").then_some(m)
    })
    .await;
    assert!(after["metadata"]["annotations"].get("kairon.zyvor.dev/idle-suspended").is_none(), "{after}");
    assert!(after["metadata"]["annotations"]["kairon.zyvor.dev/last-activity"].is_string());

    let suspend = || async {
        kube.patch(
            "idle",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"powerState": "Paused"}, "metadata": {"annotations": {"kairon.zyvor.dev/idle-suspended": "Pause"}}})),
        )
        .await
        .unwrap();
        rest.get(&format!("{base}/wait?phase=Paused&timeoutSeconds=120")).await.ok();
    };
    // Files.
    suspend().await;
    assert_eq!(rest.get(&format!("{base}/files?path=/etc/passwd")).await.status, 200);
    // The sandbox HTTP proxy.
    suspend().await;
    assert_eq!(rest.get(&format!("{base}/sandbox-http/8080/cgi-bin/echo")).await.status, 201);
    // Console.
    suspend().await;
    let mut console = rest.websocket(&format!("{base}/console")).await.unwrap();
    console.send(Message::Binary(b"exit 0\n".to_vec().into())).await.unwrap();
    while let Ok(Some(Ok(m))) = tokio::time::timeout(Duration::from_secs(60), console.next()).await {
        if matches!(m, Message::Close(_)) {
            break;
        }
    }
    // Port-forward.
    suspend().await;
    let mut tunnel = rest.websocket(&format!("{base}/portforward/9000")).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(60), tunnel.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(first.into_data().as_ref(), b"hi\n");
    drop(tunnel);

    // Each wake's Event is recorded beside its reply, so the last may land just after it.
    let woken = |events: &Value| {
        events["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["reason"] == "Woken")
            .map(|e| e["series"]["count"].as_i64().unwrap_or(1))
            .sum::<i64>()
    };
    let mut events = Value::Null;
    let mut window = during(Duration::from_secs(10), Duration::from_millis(200));
    while window.tick().await {
        events = rest.get(&format!("{base}/events")).await.ok();
        if woken(&events) >= 5 {
            break;
        }
    }
    assert!(woken(&events) >= 5, "a Woken Event per wake: {events}");

    // Paused by hand: not woken, and the answer says how to resume.
    rest.post(&format!("{base}/pause"), json!({})).await.ok();
    rest.get(&format!("{base}/wait?phase=Paused&timeoutSeconds=120")).await.ok();
    let refused = rest.post(&format!("{base}/exec"), sh("true")).await;
    assert_eq!((refused.status, refused.reason()), (409, "MachineSuspended"), "{refused:?}");
    assert!(refused.message().contains("resume"), "{refused:?}");
    assert_eq!(rest.get(base).await.ok()["spec"]["powerState"], "Paused");

    // A wake that cannot finish in wakeTimeoutSeconds is a 504 (this Machine's node never runs it).
    let mut stuck = sandbox("stuck");
    stuck["spec"]["nodeName"] = json!("nowhere");
    stuck["spec"]["powerState"] = json!("Paused");
    stuck["spec"]["lifecycle"] = json!({"wakeOnConnect": true, "wakeTimeoutSeconds": 2});
    stuck["metadata"]["annotations"] = json!({"kairon.zyvor.dev/idle-suspended": "Pause"});
    rest.post("/api/v1/machines/agents", stuck).await.ok();
    let timed_out = rest.post("/api/v1/machines/agents/stuck/exec", sh("true")).await;
    assert_eq!((timed_out.status, timed_out.reason()), (504, "WakeTimeout"), "{timed_out:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn node_routes_pools_claims_and_the_egress_check() {
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        "[sandbox]\negress_allow_domains = [\"*.github.com\"]\n[sandbox.inject_authorization]\n\"api.github.com\" = \"Bearer s3cret-value\"\n",
    )
    .unwrap();
    let k = Kairon::start_with(&fast().with(&["--node-config", config.path().to_str().unwrap()])).unwrap();
    let rest = k.rest().unwrap();

    let nodes = eventually("the node to register", Duration::from_secs(60), || async {
        let n = rest.get("/api/v1/nodes").await.ok();
        (!n["items"].as_array().unwrap().is_empty()).then_some(n)
    })
    .await;
    assert_eq!(nodes["items"][0]["metadata"]["name"], "local");
    assert!(
        rest.get("/api/v1/nodes/local").await.ok()["spec"]["backends"].as_array().unwrap().contains(&json!("sandbox"))
    );
    assert_eq!(rest.get("/api/v1/nodes/elsewhere/templates").await.status, 404);

    // Templates: the builtin busybox is listed; a build of a bad reference fails clearly.
    let templates = rest.get("/api/v1/nodes/local/templates").await.ok();
    assert!(templates.as_array().unwrap().iter().any(|t| t["name"] == "busybox"), "{templates}");
    let bad = rest.post("/api/v1/nodes/local/templates", json!({"name": "x", "imageRef": " "})).await;
    assert_eq!(bad.status, 400);

    // Egress check: the decision, whether a credential would be injected, never the credential.
    let check = rest.post("/api/v1/nodes/local/egress-check", json!({"host": "api.github.com"})).await;
    let keys: Vec<&String> = check.body.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["allow", "reason", "wouldInjectCredential"]);
    assert_eq!(check.body["allow"], true);
    assert_eq!(check.body["wouldInjectCredential"], true);
    assert!(!check.body.to_string().contains("s3cret"), "{}", check.body);
    let denied = rest.post("/api/v1/nodes/local/egress-check", json!({"host": "evil.example"})).await.ok();
    assert_eq!((denied["allow"].as_bool(), denied["wouldInjectCredential"].as_bool()), (Some(false), Some(false)));

    // A node pool; its claim with createMachine gives one Machine the node adopts.
    let pool = rest
        .post("/api/v1/nodes/local/pools", json!({"name": "warm", "size": 2, "template": {"name": "x", "sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true}}}))
        .await;
    assert_eq!(pool.status, 201, "{pool:?}");
    let ready = || async {
        let p = rest.get("/api/v1/nodes/local/pools/warm").await.ok();
        let n = p["members"].as_array().unwrap().iter().filter(|m| m["state"] == "Ready").count();
        (n >= 2).then_some(())
    };
    eventually("two ready members", Duration::from_secs(120), ready).await;
    assert_eq!(rest.get("/api/v1/nodes/local/pools").await.ok().as_array().unwrap().len(), 1);

    let no_name = rest.post("/api/v1/nodes/local/pools/warm/claim", json!({"createMachine": true})).await;
    assert_eq!(no_name.status, 400);
    let claimed = rest
        .post(
            "/api/v1/nodes/local/pools/warm/claim",
            json!({"createMachine": true, "namespace": "agents", "machineName": "from-pool"}),
        )
        .await
        .ok();
    assert_eq!(claimed["vm"]["name"], "kairon-agents-from-pool");
    assert_eq!(claimed["machine"]["metadata"]["name"], "from-pool");
    let m = rest.running("agents", "from-pool").await;
    assert_eq!(m["status"]["runtimeID"], claimed["vm"]["id"], "the node adopted the claimed VM");
    let rt = k.runtime().unwrap();
    let named = rt.list_sandboxes().await.unwrap().into_iter().filter(|v| v.name == "kairon-agents-from-pool").count();
    assert_eq!(named, 1, "no duplicate instance");

    // A conflicting machineName: the claim still happened, and says what to do.
    eventually("a ready member again", Duration::from_secs(120), || async {
        let p = rest.get("/api/v1/nodes/local/pools/warm").await.ok();
        p["members"].as_array().unwrap().iter().any(|m| m["state"] == "Ready").then_some(())
    })
    .await;
    let conflict = rest
        .post(
            "/api/v1/nodes/local/pools/warm/claim",
            json!({"createMachine": true, "namespace": "agents", "machineName": "from-pool"}),
        )
        .await
        .ok();
    assert!(conflict["machine"].is_null());
    assert!(conflict["vm"]["id"].is_string());
    assert!(conflict["machineError"].as_str().unwrap().contains("already exists"), "{conflict}");

    // Sandboxes are listed node-wide; deleting the pool deletes its members.
    let listed = rest.get("/api/v1/nodes/local/sandboxes").await.ok();
    let names: Vec<&str> = listed.as_array().unwrap().iter().filter_map(|v| v["name"].as_str()).collect();
    for claimed in ["kairon-agents-from-pool", conflict["vm"]["name"].as_str().unwrap()] {
        assert!(names.contains(&claimed), "{claimed} is listed: {listed}");
    }
    assert_eq!(rest.delete("/api/v1/nodes/local/pools/warm").await.status, 204);
    assert_eq!(rest.get("/api/v1/nodes/local/pools/warm").await.status, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_queries_answer_from_the_history_of_a_real_claim() {
    let k = Kairon::start_with(&fast().usage_interval("1s")).unwrap();
    let rest = k.rest().unwrap();
    let bad = rest.get("/api/v1/usage?from=yesterday").await;
    assert_eq!(bad.status, 400);
    assert!(bad.message().contains("YYYY-MM-DD"), "{bad:?}");
    assert_eq!(rest.get("/api/v1/usage?groupBy=planet").await.status, 400);
    assert_eq!(rest.get("/api/v1/usage?from=2026-02-01&to=2026-01-01").await.status, 400);
    assert_eq!(rest.get("/api/v1/usage/claims/not-a-uid").await.status, 400);
    assert_eq!(rest.get(&format!("/api/v1/usage/claims/{}", uuid::Uuid::new_v4())).await.status, 404);

    // A pool of one warm sandbox, claimed through the REST mirror.
    let pool = json!({
        "metadata": {"name": "agents"},
        "spec": {"replicas": 1, "warmupSeconds": 0, "template": {"spec": {"sandbox": {"templateName": "busybox"}}}}
    });
    rest.post("/api/v1/machinepools/billing", pool).await.ok();
    rest.post("/api/v1/machineclaims/billing", json!({"metadata": {"name": "job"}, "spec": {"poolName": "agents"}}))
        .await
        .ok();
    let bound = rest.get("/api/v1/machineclaims/billing/job/wait?phase=Bound&timeoutSeconds=120").await.ok();
    let uid = bound["metadata"]["uid"].as_str().unwrap().to_string();
    let claim = eventually("three seconds of active usage", Duration::from_secs(120), || async {
        let c = rest.get("/api/v1/machineclaims/billing/job").await.ok();
        (c["status"]["usage"]["activeSeconds"].as_i64().unwrap_or(0) >= 3).then_some(c)
    })
    .await;
    let _ = claim;

    // One claim's history sums to what its status shows at the same moment.
    let history = eventually("history to match status", Duration::from_secs(60), || async {
        let h = rest.get(&format!("/api/v1/usage/claims/{uid}")).await.ok();
        let c = rest.get("/api/v1/machineclaims/billing/job").await.ok();
        (h["total"]["activeSeconds"] == c["status"]["usage"]["activeSeconds"]).then_some(h)
    })
    .await;
    assert_eq!(history["namespace"], "billing");
    assert_eq!(history["claimName"], "job");
    let summed: i64 =
        history["intervals"].as_array().unwrap().iter().map(|i| i["activeSeconds"].as_i64().unwrap()).sum();
    assert_eq!(summed, history["total"]["activeSeconds"].as_i64().unwrap());
    assert!(summed >= 3);

    // The billing queries see the same seconds by namespace, claim and day.
    let by_ns = rest.get("/api/v1/usage?namespace=billing").await.ok();
    assert_eq!(by_ns["rows"][0]["namespace"], "billing");
    assert!(by_ns["rows"][0]["activeSeconds"].as_i64().unwrap() >= summed);
    let by_claim = rest.get("/api/v1/usage?groupBy=claim").await.ok();
    assert_eq!(by_claim["rows"][0]["claimUid"], json!(uid));
    let by_day = rest.get("/api/v1/usage?groupBy=day").await.ok();
    assert_eq!(by_day["rows"][0]["day"], json!(chrono_today()));

    // Another namespace's operator sees none of it.
    let other = k.token("eve", "operator", &["elsewhere"]).unwrap();
    let eve = k.rest_as(&other).unwrap();
    assert_eq!(eve.get("/api/v1/usage").await.ok()["rows"], json!([]));
    assert_eq!(eve.get("/api/v1/usage?namespace=billing").await.status, 403);
    assert_eq!(eve.get(&format!("/api/v1/usage/claims/{uid}")).await.status, 404);
}

fn chrono_today() -> String {
    let out = std::process::Command::new("date").args(["-u", "+%Y-%m-%d"]).output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_open_relay_session_keeps_stamping_activity_until_it_closes() {
    let k = Kairon::start_with(&fast()).unwrap();
    let rest = k.rest().unwrap();
    rest.post("/api/v1/machines/agents", sandbox("busy")).await.ok();
    rest.running("agents", "busy").await;
    let stamp = || async {
        rest.get("/api/v1/machines/agents/busy").await.ok()["metadata"]["annotations"]["kairon.zyvor.dev/last-activity"]
            .as_str()
            .map(String::from)
    };
    let console = rest.websocket("/api/v1/machines/agents/busy/console").await.unwrap();
    // The guest is quiet and nothing is typed: only the open session stamps.
    let seen = std::cell::RefCell::new(std::collections::BTreeSet::new());
    wait_for("three stamps while the console is open", Duration::from_secs(90), || async {
        if let Some(v) = stamp().await {
            seen.borrow_mut().insert(v);
        }
        let seen = seen.borrow();
        if seen.len() >= 3 { Ok(()) } else { Err(format!("only {seen:?} stamped")) }
    })
    .await;
    drop(console);
    // Nothing says when the server has seen the close: give it the time a stamp in flight takes.
    hold(Duration::from_secs(3), "a stamp already on its way lands").await;
    let after_close = stamp().await;
    hold(Duration::from_secs(3), "a closed session must stamp no more").await;
    assert_eq!(stamp().await, after_close, "a closed session stamps no more");
}

/// `spec.env` of a Machine reaches every exec, process and streamed exec (a request's own env
/// wins); a claim's `spec.env` is written onto the member it binds, over the template's, so a
/// warm member gets it without a cold start; bad names and a changed claim env are refused.
#[tokio::test(flavor = "multi_thread")]
async fn machine_and_claim_env_reach_every_exec_process_and_stream() {
    let k = Kairon::start_with(&fast()).unwrap();
    let rest = k.rest().unwrap();
    let mut m = sandbox("envy");
    m["spec"]["env"] = json!({"A": "from-machine", "B": "machine", "SPACED": "x y"});
    rest.post("/api/v1/machines/agents", m).await.ok();
    rest.running("agents", "envy").await;
    let base = "/api/v1/machines/agents/envy";

    let mut req = sh("echo \"$A|$B|$C|$SPACED\"");
    req["env"] = json!({"B": "request", "C": "c"});
    let r = rest.post(&format!("{base}/exec"), req.clone()).await.ok();
    assert_eq!(r["stdout"], "from-machine|request|c|x y\n", "{r}");
    let p = rest.post(&format!("{base}/processes"), req).await;
    assert_eq!(p.status, 201, "{p:?}");
    let pid = p.body["id"].as_str().unwrap().to_string();
    rest.post(&format!("{base}/processes/{pid}/wait?timeoutSeconds=30"), json!({})).await.ok();
    let logs = rest.get(&format!("{base}/processes/{pid}/logs")).await.ok();
    assert_eq!(logs["stdout"], "from-machine|request|c|x y\n", "{logs}");
    // The streamed exec gets the Machine's env too.
    let cmd = "%5B%22sh%22%2C%22-c%22%2C%22echo%20%24A%20%24B%22%5D";
    let mut streamed = rest.websocket(&format!("{base}/exec/stream?command={cmd}")).await.unwrap();
    let mut out = Vec::new();
    let reason = loop {
        match tokio::time::timeout(Duration::from_secs(60), streamed.next()).await.unwrap() {
            Some(Ok(Message::Binary(b))) => out.extend_from_slice(&b),
            Some(Ok(Message::Close(Some(f)))) => break f.reason.to_string(),
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!((String::from_utf8_lossy(&out).as_ref(), reason.as_str()), ("from-machine machine\n", "exit 0"));

    // Bad names are refused with the field named; nothing is stored.
    let mut bad = sandbox("badenv");
    bad["spec"]["env"] = json!({"1BAD": "x", "OK": "y"});
    let r = rest.post("/api/v1/machines/agents", bad).await;
    assert_eq!(r.status, 422, "{r:?}");
    assert!(r.message().contains("spec.env.1BAD"), "{r:?}");
    assert_eq!(rest.get("/api/v1/machines/agents/badenv").await.status, 404);

    // A claim's env over the pool template's, on a member that was already warm.
    let pool = json!({
        "metadata": {"name": "envpool"},
        "spec": {"replicas": 1, "warmPowerState": "Paused", "warmupSeconds": 1, "template": {
            "metadata": {"labels": {"kairon.zyvor.dev/sandbox": "true"}},
            "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true},
                     "env": {"T": "template", "X": "template"}}}}
    });
    rest.post("/api/v1/machinepools/agents", pool).await.ok();
    eventually("a warm member", Duration::from_secs(120), || async {
        let p = rest.get("/api/v1/machinepools/agents/envpool").await.ok();
        (p["status"]["warm"].as_i64() == Some(1)).then_some(())
    })
    .await;
    let claim =
        json!({"metadata": {"name": "envclaim"}, "spec": {"poolName": "envpool", "env": {"X": "claim", "Y": "y"}}});
    rest.post("/api/v1/machineclaims/agents", claim).await.ok();
    let bound = rest.get("/api/v1/machineclaims/agents/envclaim/wait?phase=Bound&timeoutSeconds=60").await.ok();
    assert_eq!(bound["status"]["launchType"], "Warm", "{bound}");
    let member = bound["status"]["machineName"].as_str().unwrap().to_string();
    let r = rest.post(&format!("/api/v1/machines/agents/{member}/exec"), sh("echo \"$T|$X|$Y\"")).await.ok();
    assert_eq!(r["stdout"], "template|claim|y\n", "{r}");
    // A claim's env is immutable once made.
    let mut changed = rest.get("/api/v1/machineclaims/agents/envclaim").await.ok();
    changed["spec"]["env"]["X"] = json!("other");
    changed.as_object_mut().unwrap().remove("status");
    let r = rest.put("/api/v1/machineclaims/agents/envclaim", changed).await;
    assert_eq!(r.status, 422, "{r:?}");
    assert!(r.message().contains("spec.env"), "{r:?}");
}
