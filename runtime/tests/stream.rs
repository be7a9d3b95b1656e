//! The WebSocket streams into a real runc sandbox: the TCP port tunnel (busybox `nc` and
//! `httpd` inside the sandbox's own network namespace) and the interactive console, through
//! the runtime's HTTP server with a real WebSocket client.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use kairon_model::SandboxSpec;
use kairon_runtime::api::{CreateVmRequest, ExecRequest, PowerAction, Vm};
use kairon_runtime::engine::Runtime;
use kairon_runtime::proxy::dial_in_netns;
use kairon_runtime_api::RuntimeClient;
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

mod common;

use common::TOKEN;
/// Longest any single expectation may wait.
const WAIT: Duration = Duration::from_secs(20);

type Ws = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

async fn serve(state_dir: &Path, node: &str) -> (Runtime, RuntimeClient, SocketAddr) {
    common::serve(state_dir, node, Default::default()).await
}

async fn sandbox(c: &RuntimeClient, name: &str) -> Vm {
    c.create(&CreateVmRequest {
        name: name.into(),
        sandbox: Some(SandboxSpec { template_name: Some("busybox".into()) }),
        ..Default::default()
    })
    .await
    .unwrap()
}

fn cmd(args: &[&str]) -> ExecRequest {
    ExecRequest { command: args.iter().map(|a| a.to_string()).collect(), ..Default::default() }
}

async fn wait_listening(pid: u32, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Err(e) = dial_in_netns(pid, port).await {
        assert!(Instant::now() < deadline, "nothing started listening on port {port}: {e}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn connect_with(addr: SocketAddr, path: &str, token: &str) -> Result<Ws, tungstenite::Error> {
    let mut req = format!("ws://{addr}{path}").into_client_request().unwrap();
    req.headers_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    tokio_tungstenite::connect_async(req).await.map(|(ws, _)| ws)
}

async fn connect(addr: SocketAddr, path: &str) -> Ws {
    connect_with(addr, path, TOKEN).await.unwrap_or_else(|e| panic!("opening {path}: {e}"))
}

/// The plain HTTP answer to a WebSocket handshake that was refused.
async fn refused_with(addr: SocketAddr, path: &str, token: &str) -> (u16, serde_json::Value) {
    match connect_with(addr, path, token).await {
        Err(tungstenite::Error::Http(resp)) => {
            let body = resp.body().clone().unwrap_or_default();
            let json = serde_json::from_slice(&body)
                .unwrap_or_else(|e| panic!("{path}: not a JSON body ({e}): {}", String::from_utf8_lossy(&body)));
            (resp.status().as_u16(), json)
        }
        Ok(_) => panic!("{path} was upgraded"),
        Err(e) => panic!("{path}: {e}"),
    }
}

async fn refused(addr: SocketAddr, path: &str) -> (u16, serde_json::Value) {
    refused_with(addr, path, TOKEN).await
}

/// The next frame, within [`WAIT`].
async fn next(ws: &mut Ws) -> Option<Message> {
    tokio::time::timeout(WAIT, ws.next()).await.expect("no frame in time").map(|m| m.expect("frame"))
}

/// Data frames until their text contains `want`; the server must not close first.
async fn read_until(ws: &mut Ws, want: &str) -> String {
    let mut got = Vec::new();
    while !String::from_utf8_lossy(&got).contains(want) {
        match next(ws).await {
            Some(Message::Binary(b)) => got.extend_from_slice(&b),
            Some(Message::Ping(_) | Message::Pong(_)) => {}
            other => panic!("waiting for {want:?} after {:?}: got {other:?}", String::from_utf8_lossy(&got)),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Exactly `n` bytes of data frames.
async fn read_bytes(ws: &mut Ws, n: usize) -> Vec<u8> {
    let mut got = Vec::new();
    while got.len() < n {
        match next(ws).await {
            Some(Message::Binary(b)) => got.extend_from_slice(&b),
            other => panic!("after {got:?}: got {other:?}"),
        }
    }
    got
}

/// Everything up to the server's Close frame (answered by tungstenite), and that frame.
async fn read_to_close(ws: &mut Ws) -> (Vec<u8>, CloseFrame) {
    let mut got = Vec::new();
    loop {
        match next(ws).await {
            Some(Message::Binary(b)) => got.extend_from_slice(&b),
            Some(Message::Close(Some(frame))) => {
                // The connection ends after the close handshake.
                assert!(next(ws).await.is_none());
                return (got, frame);
            }
            other => panic!("waiting for the Close frame after {:?}: got {other:?}", String::from_utf8_lossy(&got)),
        }
    }
}

/// Closes from our side; the server answers with its own Close and the connection ends.
/// Data the server sent before it saw our Close may still arrive first.
async fn close_from_client(ws: &mut Ws) {
    ws.send(Message::Close(None)).await.unwrap();
    let mut answered = false;
    loop {
        match next(ws).await {
            Some(Message::Binary(_)) if !answered => {}
            Some(Message::Close(_)) if !answered => answered = true,
            None => return assert!(answered, "the connection ended without the server's Close"),
            Some(other) => panic!("after our Close: {other:?}"),
        }
    }
}

async fn send(ws: &mut Ws, bytes: &[u8]) {
    ws.send(Message::binary(bytes.to_vec())).await.unwrap();
}

/// `ps` inside the sandbox: every process's command line.
async fn guest_processes(c: &RuntimeClient, vm: &Vm) -> String {
    let out = c.exec(&vm.id, &cmd(&["ps", "-o", "pid,args"])).await.unwrap();
    assert_eq!(out.exit_code, 0, "{out:?}");
    out.stdout
}

/// Waits until a guest process matching `needle` runs: the shell prints what comes before it
/// and only then forks and execs it, so the listing may come first.
async fn wait_running(c: &RuntimeClient, vm: &Vm, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ps = guest_processes(c, vm).await;
        if ps.contains(needle) {
            return;
        }
        assert!(Instant::now() < deadline, "{needle:?} never ran:\n{ps}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_gone(c: &RuntimeClient, vm: &Vm, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ps = guest_processes(c, vm).await;
        if !ps.contains(needle) {
            return;
        }
        assert!(Instant::now() < deadline, "{needle:?} still runs:\n{ps}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Counts what a connection brings until end-of-file, and appends the count.
const COUNT_SCRIPT: &str = "#!/bin/sh\necho \"$(wc -c)\" >> /tmp/counted\n";

#[tokio::test(flavor = "multi_thread")]
async fn the_tunnel_is_a_plain_tcp_pipe_to_a_port_inside_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, c, addr) = serve(dir.path(), "tunnel").await;
    let vm = sandbox(&c, "kairon-default-tunnel").await;
    let pid = vm.pid.unwrap();
    c.write_file(&vm.id, "/www/index.html", b"<h1>tunnelled</h1>\n".to_vec(), 0o644).await.unwrap();
    c.write_file(&vm.id, "/usr/local/bin/count", COUNT_SCRIPT.as_bytes().to_vec(), 0o755).await.unwrap();
    // -ll: keep listening, one `-e` program per connection.
    for server in [
        &["nc", "-ll", "-p", "7000", "-e", "/bin/cat"][..],
        &["nc", "-ll", "-p", "7001", "-e", "/usr/local/bin/count"],
        &["httpd", "-f", "-p", "8080", "-h", "/www"],
    ] {
        c.start_process(&vm.id, &cmd(server)).await.unwrap();
    }
    for port in [7000, 7001, 8080] {
        wait_listening(pid, port).await;
    }
    let path = |port: u16| format!("/v1/vms/{}/tunnel/{port}", vm.id);

    // Bytes go in and come back, frame by frame.
    let mut ws = connect(addr, &path(7000)).await;
    send(&mut ws, b"hello tunnel\n").await;
    assert_eq!(read_until(&mut ws, "hello tunnel\n").await, "hello tunnel\n");
    send(&mut ws, b"\x00\xffbinary\r\n").await;
    assert_eq!(read_bytes(&mut ws, 10).await, b"\x00\xffbinary\r\n");

    // A megabyte each way at once: nothing stalls, nothing is lost, no frame over 64 KiB.
    let data: Vec<u8> = (0..1024 * 1024u32).map(|i| (i * 7 % 251) as u8).collect();
    let (mut tx, mut rx) = ws.split();
    let to_send = data.clone();
    let sender = tokio::spawn(async move {
        for chunk in to_send.chunks(16 * 1024) {
            tx.send(Message::binary(chunk.to_vec())).await.unwrap();
        }
        tx
    });
    let mut echoed = Vec::new();
    let mut largest = 0;
    while echoed.len() < data.len() {
        match tokio::time::timeout(WAIT, rx.next()).await.expect("echo stalled") {
            Some(Ok(Message::Binary(b))) => {
                largest = largest.max(b.len());
                echoed.extend_from_slice(&b);
            }
            other => panic!("after {} echoed bytes: {other:?}", echoed.len()),
        }
    }
    assert!(echoed == data, "the echo differs from what was sent");
    assert!(largest <= 64 * 1024, "a frame of {largest} bytes");
    let tx = sender.await.unwrap();
    let mut ws = tx.reunite(rx).unwrap();
    close_from_client(&mut ws).await;

    // The listener takes a second connection through a second tunnel.
    let mut ws = connect(addr, &path(7000)).await;
    send(&mut ws, b"second").await;
    assert_eq!(read_until(&mut ws, "second").await, "second");
    close_from_client(&mut ws).await;

    // The client closing ends the guest's input: the guest reads end-of-file after every byte.
    let mut ws = connect(addr, &path(7001)).await;
    for _ in 0..3 {
        send(&mut ws, &[b'x'; 100_000]).await;
    }
    close_from_client(&mut ws).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let counted = c.read_file(&vm.id, "/tmp/counted").await.unwrap_or_default();
        if String::from_utf8_lossy(&counted).lines().any(|l| l.trim() == "300000") {
            break;
        }
        assert!(Instant::now() < deadline, "the guest never saw end-of-file: {counted:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // HTTP is just bytes on the pipe; the guest closing its side sends a Close frame.
    let mut ws = connect(addr, &path(8080)).await;
    send(&mut ws, b"GET / HTTP/1.0\r\n\r\n").await;
    let (response, close) = read_to_close(&mut ws).await;
    let response = String::from_utf8(response).unwrap();
    // busybox httpd answers HTTP/1.1 (with Connection: close) even to 1.0.
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(response.ends_with("\r\n\r\n<h1>tunnelled</h1>\n"), "{response}");
    assert_eq!(close.code, CloseCode::Normal);
    assert_eq!(close.reason.as_str(), "port 8080 inside the sandbox closed the connection");

    // A closed port (even one the host listens on) is refused before any upgrade.
    let (status, err) = refused(addr, &path(7999)).await;
    assert_eq!(status, 502);
    assert_eq!(err["reason"], "GuestUnreachable");
    assert_eq!(err["message"], "nothing listens on port 7999 inside the sandbox");
    let host_port = addr.port();
    let (status, err) = refused(addr, &path(host_port)).await;
    assert_eq!((status, err["reason"].as_str()), (502, Some("GuestUnreachable")));

    // Unknown sandbox, bad port, no token.
    let (status, err) = refused(addr, "/v1/vms/nope/tunnel/7000").await;
    assert_eq!((status, err["reason"].as_str()), (404, Some("NotFound")));
    match connect_with(addr, &format!("/v1/vms/{}/tunnel/70000", vm.id), TOKEN).await {
        Err(tungstenite::Error::Http(resp)) => assert_eq!(resp.status().as_u16(), 400),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("port 70000 was upgraded"),
    }
    let (status, err) = refused_with(addr, &path(7000), "wrong-token").await;
    assert_eq!((status, err["reason"].as_str()), (401, Some("Unauthorized")));

    // A plain GET (no WebSocket handshake) to a good port is refused too.
    let mut raw = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "GET {} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n",
        path(7000)
    );
    raw.write_all(req.as_bytes()).await.unwrap();
    let mut head = vec![0u8; 12];
    tokio::io::AsyncReadExt::read_exact(&mut raw, &mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 400");

    c.delete(&vm.id).await.unwrap();
}

/// The console's pid files are gone once its sessions are.
fn console_files(rt: &Runtime, vm: &Vm) -> Vec<String> {
    std::fs::read_dir(rt.instance_dir(&vm.id))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("console-"))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_is_an_interactive_shell_that_streams_and_reports_its_exit() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, c, addr) = serve(dir.path(), "console").await;
    let vm = sandbox(&c, "kairon-default-console").await;
    let path = format!("/v1/vms/{}/console", vm.id);

    // Commands in, output back as it is produced: stdout, stderr, and a line without newline.
    let mut ws = connect(addr, &path).await;
    send(&mut ws, b"echo hello-$((6*7))\n").await;
    read_until(&mut ws, "hello-42").await;
    send(&mut ws, b"echo to-stderr >&2; echo shell=$(readlink /proc/$$/exe)\n").await;
    // stdout and stderr are separate pipes: their relative order is not kept.
    if !read_until(&mut ws, "shell=/bin/busybox").await.contains("to-stderr") {
        read_until(&mut ws, "to-stderr").await;
    }
    // Text frames are input too.
    ws.send(Message::text("printf no-newline-$((1+1))\n")).await.unwrap();
    read_until(&mut ws, "no-newline-2").await;
    // A megabyte of output, in frames of at most 64 KiB.
    send(&mut ws, b"head -c 1048576 /dev/zero | tr '\\000' x; echo; echo done-big\n").await;
    let mut got = Vec::new();
    while !String::from_utf8_lossy(&got).contains("done-big") {
        match next(&mut ws).await {
            Some(Message::Binary(b)) => {
                assert!(b.len() <= 64 * 1024, "a frame of {} bytes", b.len());
                got.extend_from_slice(&b);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(got.iter().filter(|b| **b == b'x').count(), 1024 * 1024);
    // The shell's exit code ends the session.
    send(&mut ws, b"exit 3\n").await;
    let (_, close) = read_to_close(&mut ws).await;
    assert_eq!((close.code, close.reason.as_str()), (CloseCode::Normal, "exit 3"));

    // A background job does not keep the session open after its shell exits; it ends with it.
    let mut ws = connect(addr, &path).await;
    send(&mut ws, b"sleep 2000 & echo started-$((1+1))\n").await;
    read_until(&mut ws, "started-2").await;
    wait_running(&c, &vm, "sleep 2000").await;
    let start = Instant::now();
    send(&mut ws, b"exit 4\n").await;
    let (_, close) = read_to_close(&mut ws).await;
    assert_eq!(close.reason.as_str(), "exit 4");
    assert!(start.elapsed() < Duration::from_secs(5), "the session took {:?} to end", start.elapsed());
    wait_gone(&c, &vm, "sleep 2000").await;

    // The client closing kills the shell and what it runs.
    let mut ws = connect(addr, &path).await;
    send(&mut ws, b"echo running-$((2+2)); sleep 3000\n").await;
    read_until(&mut ws, "running-4").await;
    wait_running(&c, &vm, "sleep 3000").await;
    close_from_client(&mut ws).await;
    wait_gone(&c, &vm, "sleep 3000").await;
    wait_gone(&c, &vm, "sh -i").await;

    // A client that just disconnects (no Close frame) gets the same.
    let mut ws = connect(addr, &path).await;
    send(&mut ws, b"echo running-$((3+3)); sleep 4000\n").await;
    read_until(&mut ws, "running-6").await;
    drop(ws);
    wait_gone(&c, &vm, "sleep 4000").await;
    wait_gone(&c, &vm, "sh -i").await;

    // Without /bin/sh in the sandbox, the console falls back on the sandbox tools' busybox.
    c.delete_file(&vm.id, "/bin/sh").await.unwrap();
    let mut ws = connect(addr, &path).await;
    send(&mut ws, b"echo fallback-$((1+1)) shell=$(readlink /proc/$$/exe)\n").await;
    let out = read_until(&mut ws, "fallback-2 shell=/.kairon/busybox").await;
    assert!(out.contains("fallback-2 shell=/.kairon/busybox"), "{out}");
    send(&mut ws, b"exit\n").await;
    let (_, close) = read_to_close(&mut ws).await;
    assert_eq!(close.reason.as_str(), "exit 0");

    let deadline = Instant::now() + Duration::from_secs(5);
    while !console_files(&rt, &vm).is_empty() {
        assert!(Instant::now() < deadline, "left behind: {:?}", console_files(&rt, &vm));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, err) = refused(addr, "/v1/vms/nope/console").await;
    assert_eq!((status, err["reason"].as_str()), (404, Some("NotFound")));
    c.delete(&vm.id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandbox_that_is_not_running_refuses_both_streams_before_upgrading() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, c, addr) = serve(dir.path(), "stream-paused").await;
    let vm = sandbox(&c, "kairon-default-paused").await;
    c.start_process(&vm.id, &cmd(&["nc", "-ll", "-p", "7000", "-e", "/bin/cat"])).await.unwrap();
    wait_listening(vm.pid.unwrap(), 7000).await;
    let tunnel = format!("/v1/vms/{}/tunnel/7000", vm.id);
    let console = format!("/v1/vms/{}/console", vm.id);

    c.power(&vm.id, PowerAction::Pause, false).await.unwrap();
    for path in [&tunnel, &console] {
        let (status, err) = refused(addr, path).await;
        assert_eq!(status, 409, "{path}: {err}");
        assert_eq!(err["reason"], "Conflict");
        assert_eq!(err["message"], "kairon-default-paused is paused: resume it first");
    }

    // Resumed, both work again, by id only: a runtime name never stands for an id.
    c.power(&vm.id, PowerAction::Resume, false).await.unwrap();
    let (status, err) = refused(addr, "/v1/vms/kairon-default-paused/tunnel/7000").await;
    assert_eq!((status, err["reason"].as_str()), (404, Some("NotFound")), "{err}");
    let mut ws = connect(addr, &tunnel).await;
    send(&mut ws, b"back").await;
    read_until(&mut ws, "back").await;
    close_from_client(&mut ws).await;
    let mut ws = connect(addr, &console).await;
    send(&mut ws, b"exit 0\n").await;
    assert_eq!(read_to_close(&mut ws).await.1.reason.as_str(), "exit 0");

    c.power(&vm.id, PowerAction::Stop, false).await.unwrap();
    for path in [&tunnel, &console] {
        let (status, err) = refused(addr, path).await;
        assert_eq!(status, 409, "{path}: {err}");
        assert_eq!(err["message"], "kairon-default-paused is Stopped: start it first");
    }
    c.delete(&vm.id).await.unwrap();
}
