//! The guest HTTP proxy: a request relayed to a busybox httpd inside a real runc sandbox (own
//! network namespace, loopback only), and byte-level checks against a server in the test's
//! own namespace (the proxy dials `/proc/<pid>/ns/net`, so the test process's pid works too).

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use futures::{FutureExt, StreamExt};
use kairon_model::SandboxSpec;
use kairon_runtime::api::{CreateVmRequest, ExecRequest};
use kairon_runtime::engine::Runtime;
use kairon_runtime::proxy::{dial_in_netns, proxy};
use kairon_runtime_api::{InstanceId, RuntimeClient};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;

async fn serve(state_dir: &Path, node: &str) -> (Runtime, RuntimeClient) {
    let (rt, c, _) = common::serve(state_dir, node, Default::default()).await;
    (rt, c)
}

fn sh(cmd: &str) -> ExecRequest {
    ExecRequest { command: vec!["sh".into(), "-c".into(), cmd.into()], ..Default::default() }
}

/// Echoes what the guest got. busybox httpd hands a CGI every request header as HTTP_<NAME>,
/// and the body on stdin (POST only); a first `Status:` line sets the status.
const ECHO_CGI: &str = r#"#!/bin/sh
printf 'Status: 201 Created\r\nContent-Type: text/plain\r\nX-Guest: yes\r\n'
printf 'Connection: x-guest-hop\r\nX-Guest-Hop: 1\r\nKeep-Alive: timeout=5\r\n\r\n'
echo "method=$REQUEST_METHOD"
echo "query=$QUERY_STRING"
echo "x-test=$HTTP_X_TEST"
echo "auth=$HTTP_AUTHORIZATION"
echo "host=$HTTP_HOST"
echo "x-hop=$HTTP_X_HOP"
echo "body=$(dd bs=1 count=${CONTENT_LENGTH:-0} 2>/dev/null)"
"#;

/// Server-sent events, one every 0.3 s.
const STREAM_CGI: &str = r#"#!/bin/sh
printf 'Content-Type: text/event-stream\r\n\r\n'
for i in 1 2 3 4 5; do echo "data: line$i"; echo; sleep 0.3; done
"#;

/// Records the first line of the body as soon as it arrives, then reads the rest.
const UPLOAD_CGI: &str = r#"#!/bin/sh
read -r first
echo "$first" > /tmp/first-part
rest=$(dd bs=1 count=$((CONTENT_LENGTH - ${#first} - 1)) 2>/dev/null)
printf 'Content-Type: text/plain\r\n\r\n'
echo "first=$first"
echo "rest=$rest"
"#;

fn request(method: &str, uri: &str, headers: &[(&str, &str)], body: Body) -> Request {
    let mut b = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(body).unwrap()
}

async fn body_text(resp: Response) -> String {
    String::from_utf8(axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap().to_vec()).unwrap()
}

async fn error_json(resp: Response) -> (StatusCode, serde_json::Value) {
    let status = resp.status();
    (status, serde_json::from_str(&body_text(resp).await).unwrap())
}

/// Fails instead of hanging when something that should flow does not.
async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), f).await.expect("nothing arrived within 10 s")
}

/// Every thread of this process is still in the host's network namespace: the dial moved only
/// its own short-lived thread (retried briefly: such a thread may be just exiting).
fn assert_no_thread_left_the_host_netns() {
    let host = std::fs::read_link("/proc/self/ns/net").unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let strays: Vec<String> = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter(|t| std::fs::read_link(t.path().join("ns/net")).is_ok_and(|ns| ns != host))
            .map(|t| t.file_name().to_string_lossy().into_owned())
            .collect();
        if strays.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "threads {strays:?} are in another network namespace");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_reach_a_server_inside_the_sandbox_and_stream_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, c) = serve(dir.path(), "proxy").await;
    let vm = c
        .create(&CreateVmRequest {
            name: "kairon-default-proxy".into(),
            sandbox: Some(SandboxSpec { template_name: Some("busybox".into()) }),
            ..Default::default()
        })
        .await
        .unwrap();
    let pid = vm.pid.unwrap();
    // The sandbox goes away even when a check fails.
    let checks = AssertUnwindSafe(through_the_sandbox(&c, &vm.id, pid)).catch_unwind().await;
    c.delete(&vm.id).await.unwrap();
    if let Err(panic) = checks {
        std::panic::resume_unwind(panic);
    }
    let resp = proxy(pid, 8080, request("GET", "/", &[], Body::empty()), "/").await;
    let (status, err) = error_json(resp).await;
    assert_eq!((status, err["reason"].as_str()), (StatusCode::BAD_GATEWAY, Some("GuestUnreachable")));
    let msg = err["message"].as_str().unwrap();
    // The pid may linger as a zombie of this process for a moment; either way, no server.
    assert!(msg.contains("is gone") || msg.contains("nothing listens"), "{msg}");
}

async fn through_the_sandbox(c: &RuntimeClient, id: &InstanceId, pid: u32) {
    // The sandbox's own namespace has only a loopback interface, and runc brought it up.
    let links = c.exec(id, &sh("ip -o link show; ip -o addr show lo")).await.unwrap();
    assert_eq!(links.exit_code, 0, "{links:?}");
    let link_lines: Vec<&str> = links.stdout.lines().filter(|l| l.contains("link/")).collect();
    assert_eq!(link_lines.len(), 1, "{}", links.stdout);
    assert!(link_lines[0].contains(": lo: <LOOPBACK,UP,LOWER_UP>"), "{}", links.stdout);
    assert!(links.stdout.contains("inet 127.0.0.1/8"), "{}", links.stdout);

    for (name, script) in [("echo", ECHO_CGI), ("stream", STREAM_CGI), ("upload", UPLOAD_CGI)] {
        c.write_file(id, &format!("/www/cgi-bin/{name}"), script.as_bytes().to_vec(), 0o755).await.unwrap();
    }
    c.write_file(id, "/www/index.html", b"<h1>guest</h1>\n".to_vec(), 0o644).await.unwrap();
    let cmd = ["httpd", "-f", "-p", "8080", "-h", "/www"];
    c.start_process(id, &ExecRequest { command: cmd.map(String::from).to_vec(), ..Default::default() }).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Err(e) = dial_in_netns(pid, 8080).await {
        assert!(Instant::now() < deadline, "httpd did not start listening: {e}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Method, query, headers, body in; status, headers, body out.
    let headers = [
        ("authorization", "Bearer kairon-token"),
        ("x-test", "abc"),
        ("connection", "x-hop"),
        ("x-hop", "must not pass"),
        ("host", "kairon.example"),
    ];
    let req = request("POST", "/v1/vms/x/proxy/8080/cgi-bin/echo?x=1", &headers, Body::from("hello body"));
    let resp = proxy(pid, 8080, req, "/cgi-bin/echo?x=1").await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let h = resp.headers().clone();
    assert_eq!(h.get("x-guest").unwrap(), "yes");
    assert_eq!(h.get("content-type").unwrap(), "text/plain");
    for hop in ["connection", "keep-alive", "x-guest-hop"] {
        assert!(h.get(hop).is_none(), "{hop} must not come back: {h:?}");
    }
    assert_eq!(
        body_text(resp).await,
        "method=POST\nquery=x=1\nx-test=abc\nauth=\nhost=127.0.0.1:8080\nx-hop=\nbody=hello body\n"
    );

    // Other methods and plain files pass too.
    let resp = proxy(pid, 8080, request("PUT", "/", &[], Body::empty()), "/cgi-bin/echo").await;
    assert!(body_text(resp).await.starts_with("method=PUT\nquery=\n"));
    let resp = proxy(pid, 8080, request("GET", "/", &[], Body::empty()), "/").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(body_text(resp).await, "<h1>guest</h1>\n");
    let resp = proxy(pid, 8080, request("GET", "/", &[], Body::empty()), "/missing").await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);

    // The response streams: the first event arrives long before the last one is written.
    let resp = proxy(pid, 8080, request("GET", "/", &[], Body::empty()), "/cgi-bin/stream").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers().get("content-type").unwrap(), "text/event-stream");
    let start = Instant::now();
    let mut stream = resp.into_body().into_data_stream();
    let first = within(stream.next()).await.unwrap().unwrap();
    let first_at = start.elapsed();
    let mut all = String::from_utf8(first.to_vec()).unwrap();
    assert!(all.contains("data: line1") && !all.contains("line3"), "{all:?}");
    while let Some(chunk) = within(stream.next()).await {
        all.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    let end_at = start.elapsed();
    assert_eq!(all, (1..=5).map(|i| format!("data: line{i}\n\n")).collect::<String>());
    assert!(end_at >= first_at + Duration::from_millis(900), "first after {first_at:?}, end after {end_at:?}");

    // The request body streams: the guest sees its first part before the rest is even sent.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    let req = request("POST", "/", &[("content-length", "11")], body);
    let upload = tokio::spawn(async move { proxy(pid, 8080, req, "/cgi-bin/upload").await });
    tx.send(Ok(Bytes::from_static(b"part1\n"))).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = c.exec(id, &sh("cat /tmp/first-part 2>/dev/null")).await.unwrap();
        if got.stdout == "part1\n" {
            break;
        }
        assert!(Instant::now() < deadline, "the guest never saw the first part of the body");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!upload.is_finished());
    tx.send(Ok(Bytes::from_static(b"part2"))).await.unwrap();
    drop(tx);
    let resp = within(upload).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(body_text(resp).await, "first=part1\nrest=part2\n");

    // A closed port in the sandbox, even one the host listens on, and a gone sandbox: 502.
    let resp = proxy(pid, 8099, request("GET", "/", &[], Body::empty()), "/").await;
    let (status, err) = error_json(resp).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert_eq!(err["reason"], "GuestUnreachable");
    assert_eq!(err["message"], "nothing listens on port 8099 inside the sandbox");
    let host_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host_port = host_listener.local_addr().unwrap().port();
    let resp = proxy(pid, host_port, request("GET", "/", &[], Body::empty()), "/").await;
    let (status, err) = error_json(resp).await;
    assert_eq!((status, err["reason"].as_str()), (StatusCode::BAD_GATEWAY, Some("GuestUnreachable")));

    assert_no_thread_left_the_host_netns();
}

/// Reads one request head (through the blank line) from `s`.
async fn read_head(s: &mut tokio::net::TcpStream) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).await.unwrap(), 1, "connection closed mid-head: {buf:?}");
        buf.push(byte[0]);
    }
    String::from_utf8(buf).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn exactly_the_end_to_end_headers_pass_and_chunks_flow_as_written() {
    let me = std::process::id();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (got_first_tx, got_first_rx) = tokio::sync::oneshot::channel::<()>();
    let guest = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let head = read_head(&mut s).await;
        let mut body = [0u8; 3];
        s.read_exact(&mut body).await.unwrap();
        s.write_all(
            b"HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive, x-resp-hop\r\n\
              Keep-Alive: timeout=5\r\nX-Resp-Hop: 1\r\nProxy-Authenticate: Basic\r\nX-Kept: 1\r\n\r\n5\r\nfirst\r\n",
        )
        .await
        .unwrap();
        // The last chunk is only written once the client has the first one.
        got_first_rx.await.unwrap();
        s.write_all(b"4\r\nlast\r\n0\r\n\r\n").await.unwrap();
        (head, body)
    });
    let headers = [
        ("authorization", "Bearer kairon-token"),
        ("proxy-authorization", "Basic eDp5"),
        ("connection", "keep-alive, x-hop"),
        ("keep-alive", "timeout=5"),
        ("x-hop", "1"),
        ("te", "trailers"),
        ("upgrade", "websocket"),
        ("expect", "100-continue"),
        ("host", "kairon.example:443"),
        ("x-test", "abc"),
        ("cookie", "a=b"),
        ("content-type", "application/json"),
    ];
    let req = request("PATCH", "/v1/vms/x/proxy/1/hook", &headers, Body::from("{1}"));
    let resp = proxy(me, port, req, "/hook?a=1&b=%20").await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let mut h: Vec<(String, String)> =
        resp.headers().iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string())).collect();
    h.sort();
    assert_eq!(h, [("x-kept".to_string(), "1".to_string())]);
    let mut stream = resp.into_body().into_data_stream();
    assert_eq!(within(stream.next()).await.unwrap().unwrap(), "first");
    got_first_tx.send(()).unwrap();
    assert_eq!(within(stream.next()).await.unwrap().unwrap(), "last");
    assert!(stream.next().await.is_none());

    let (head, body) = guest.await.unwrap();
    assert_eq!(&body, b"{1}");
    let mut lines: Vec<&str> = head.trim_end().split("\r\n").collect();
    assert_eq!(lines.remove(0), "PATCH /hook?a=1&b=%20 HTTP/1.1");
    let mut lines: Vec<String> = lines.iter().map(|l| l.to_ascii_lowercase()).collect();
    lines.sort();
    let want = [
        "content-length: 3".to_string(),
        "content-type: application/json".into(),
        "cookie: a=b".into(),
        format!("host: 127.0.0.1:{port}"),
        "x-test: abc".into(),
    ];
    assert_eq!(lines, want, "{head}");
    assert_no_thread_left_the_host_netns();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guest_that_hangs_up_is_a_bad_gateway() {
    let me = std::process::id();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let guest = tokio::spawn(async move {
        // First connection: read the request, close without a word.
        let (mut s, _) = listener.accept().await.unwrap();
        read_head(&mut s).await;
        drop(s);
        // Second: promise 100 bytes, send 7, close.
        let (mut s, _) = listener.accept().await.unwrap();
        read_head(&mut s).await;
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial").await.unwrap();
    });
    let resp = proxy(me, port, request("GET", "/", &[], Body::empty()), "/").await;
    let (status, err) = error_json(resp).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert_eq!(err["reason"], "GuestClosed");
    let msg = err["message"].as_str().unwrap();
    assert!(msg.contains(&format!("server on port {port} closed the connection before answering")), "{msg}");

    // Once the response has begun, the status is the guest's; the body ends in an error.
    let resp = proxy(me, port, request("GET", "/", &[], Body::empty()), "/").await;
    assert_eq!(resp.status(), StatusCode::OK);
    let mut stream = resp.into_body().into_data_stream();
    assert_eq!(stream.next().await.unwrap().unwrap(), "partial");
    assert!(stream.next().await.unwrap().is_err());
    guest.await.unwrap();

    // A bad guest path and a process that does not exist.
    let resp = proxy(me, port, request("GET", "/", &[], Body::empty()), "http://elsewhere/").await;
    let (status, err) = error_json(resp).await;
    assert_eq!((status, err["reason"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("Invalid")));
    let resp = proxy(u32::MAX, 80, request("GET", "/", &[], Body::empty()), "/").await;
    let (status, err) = error_json(resp).await;
    assert_eq!((status, err["reason"].as_str()), (StatusCode::BAD_GATEWAY, Some("GuestUnreachable")));
    assert!(err["message"].as_str().unwrap().contains("process 4294967295 is gone"), "{err}");
}
