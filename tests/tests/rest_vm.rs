//! The REST relays against a real QEMU VM (TCG is fine) booted from the default image: exec,
//! SSH through port-forward to the image's dropbear, the VNC display's RFB greeting, a
//! filesystem freeze the node confirms, and a wake from Hibernate that waits for the guest agent.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use kairon_e2e::{Flags, Kairon, eventually};
use kairon_model::Machine;

/// Reads until `until` has arrived, sends each of `inputs` (an empty one: end of input), then
/// reads to the close: all the output, and the close frame's reason.
async fn session<S>(ws: &mut S, until: &[u8], inputs: &[&[u8]]) -> (Vec<u8>, String)
where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + futures::Sink<Message> + Unpin,
    <S as futures::Sink<Message>>::Error: std::fmt::Debug,
{
    let mut out = if until.is_empty() { Vec::new() } else { first_bytes(ws, until).await };
    for input in inputs {
        ws.send(Message::Binary(input.to_vec().into())).await.unwrap();
    }
    loop {
        match tokio::time::timeout(Duration::from_secs(60), ws.next()).await.expect("the session ends in time") {
            Some(Ok(Message::Binary(b))) => out.extend_from_slice(&b),
            Some(Ok(Message::Close(Some(f)))) => return (out, f.reason.to_string()),
            Some(Ok(_)) => {}
            other => panic!("after {:?}: {other:?}", String::from_utf8_lossy(&out)),
        }
    }
}

async fn first_bytes<S>(ws: &mut S, until: &[u8]) -> Vec<u8>
where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let mut got = Vec::new();
    while !got.windows(until.len()).any(|w| w == until) {
        match tokio::time::timeout(Duration::from_secs(60), ws.next()).await {
            Ok(Some(Ok(Message::Binary(b)))) => got.extend_from_slice(&b),
            Ok(Some(Ok(Message::Text(t)))) => got.extend_from_slice(t.as_bytes()),
            Ok(Some(Ok(_))) => {}
            other => panic!("the relay ended before {until:?}: {other:?} after {:?}", String::from_utf8_lossy(&got)),
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread")]
async fn relays_reach_a_real_vm_ssh_vnc_exec_freeze_and_a_wake_from_hibernate() {
    // The default image, built once per machine (scripts/test runs `kairon image` first).
    let images = kairon_runtime::vm::image::images_dir(&std::env::temp_dir().join("kairon-images"));
    let image = kairon_runtime::vm::image::ensure_default_image(&images, &Default::default()).await.unwrap();
    let k = Kairon::start_with(&Flags::fast().activity_stamps("1s")).unwrap();
    let rest = k.rest().unwrap();
    let m = json!({
        "metadata": {"name": "vm", "labels": {"kairon.zyvor.dev/sandbox": "true"}},
        "spec": {"image": {"path": image}, "resources": {"cpu": "1", "memory": "256Mi"}, "guestAgent": {"enabled": true},
                 "lifecycle": {"idleTimeoutSeconds": 86400, "wakeOnConnect": true, "wakeTimeoutSeconds": 240}}
    });
    rest.post("/api/v1/machines/default", m).await.ok();
    let base = "/api/v1/machines/default/vm";
    rest.get(&format!("{base}/wait?phase=Running&timeoutSeconds=300")).await.ok();
    let exec = |cmd: &'static str| {
        let rest = rest.clone();
        async move {
            eventually("the guest agent to answer", Duration::from_secs(120), || async {
                let r = rest.post(&format!("{base}/exec"), json!({"command": ["sh", "-c", cmd]})).await;
                (r.status == 200).then_some(r.body)
            })
            .await
        }
    };
    let uname = exec("uname -s").await;
    assert_eq!(uname["stdout"], "Linux\n", "{uname}");

    // A process's one stream on a VM (kairon-agent): output as produced, then the exit.
    let p = rest
        .post(
            &format!("{base}/processes"),
            json!({"command": ["sh", "-c", "echo a; echo b >&2; sleep 2; echo c; exit 3"]}),
        )
        .await;
    assert_eq!(p.status, 201, "{p:?}");
    let pid = p.body["id"].as_str().unwrap().to_string();
    let events = rest.json_lines(&format!("{base}/processes/{pid}/stream")).await;
    let (first_at, exit_at) = (events[0].0, events.last().unwrap().0);
    assert!(exit_at - first_at >= Duration::from_millis(1000), "output came before the exit: {events:?}");
    let text = |kind: &str| -> String {
        events.iter().filter(|(_, e)| e["type"] == kind).map(|(_, e)| e["data"].as_str().unwrap()).collect()
    };
    assert_eq!((text("stdout"), text("stderr")), ("a\nc\n".to_string(), "b\n".to_string()), "{events:?}");
    assert_eq!(events.last().unwrap().1, json!({"type": "exit", "exitCode": 3}));

    // A kept-open stdin on a VM (kairon-agent): written while it runs, then closed.
    let p = rest
        .post(
            &format!("{base}/processes"),
            json!({"command": ["sh", "-c", "while read l; do echo got:$l; done; echo eof"], "keepStdinOpen": true}),
        )
        .await;
    assert_eq!(p.status, 201, "{p:?}");
    let pid = p.body["id"].as_str().unwrap().to_string();
    for (data, close) in [("one\n", false), ("two\n", true)] {
        let req =
            rest.request(reqwest::Method::POST, &format!("{base}/processes/{pid}/stdin?close={close}")).body(data);
        assert_eq!(rest.send(req).await.status, 204);
    }
    let done = rest.post(&format!("{base}/processes/{pid}/wait?timeoutSeconds=60"), json!({})).await.ok();
    assert_eq!(done["state"], "exited", "{done}");
    let logs = rest.get(&format!("{base}/processes/{pid}/logs")).await.ok();
    assert_eq!(logs["stdout"], "got:one\ngot:two\neof\n", "{logs}");

    // Exec streamed over WebSocket, as in a sandbox: stdin in (an empty frame is end-of-file),
    // output out as it comes, the exit code in the close frame.
    let enc = |s: &str| s.bytes().map(|b| format!("%{b:02X}")).collect::<String>();
    let cmd = enc(r#"["sh","-c","echo ready; tr a-z A-Z; exit 7"]"#);
    let mut streamed = rest.websocket(&format!("{base}/exec/stream?command={cmd}")).await.unwrap();
    let (screen, reason) = session(&mut streamed, b"ready\n", &[b"shout\n", b""]).await;
    assert_eq!((String::from_utf8_lossy(&screen).as_ref(), reason.as_str()), ("ready\nSHOUT\n", "exit 7"));
    // On a terminal (exec -it): of the size asked, resized on request, as the given user, in
    // the given directory, with the given environment; ^C interrupts, and the exit code is its own.
    let cmd = enc(r#"["sh"]"#);
    let as_user = format!("env={}&user=1000&cwd=%2Ftmp", enc(r#"{"GREETING":"hi"}"#));
    let url = format!("{base}/exec/stream?command={cmd}&{as_user}&tty=true&cols=132&rows=43");
    let mut tty = rest.websocket(&url).await.unwrap();
    tty.send(Message::Binary(b"tty; stty size; echo $GREETING-$(id -u)-$(pwd)\n".to_vec().into())).await.unwrap();
    let first = first_bytes(&mut tty, b"hi-1000-/tmp\r\n").await;
    let first = String::from_utf8_lossy(&first);
    assert!(first.contains("/dev/pts/") && first.contains("43 132\r\n"), "{first}");
    tty.send(Message::Text(r#"{"resize":{"cols":100,"rows":30}}"#.into())).await.unwrap();
    // ^C once the sleep runs (its line's output says the shell got there; TCG is slow).
    tty.send(Message::Binary(b"echo sleep-starts; sleep 300\n".to_vec().into())).await.unwrap();
    first_bytes(&mut tty, b"sleep-starts\r\n").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    tty.send(Message::Binary(b"\x03".to_vec().into())).await.unwrap();
    tty.send(Message::Binary(b"echo after-$?; stty size\n".to_vec().into())).await.unwrap();
    let (screen, reason) = session(&mut tty, b"", &[b"exit 3\n"]).await;
    let screen = String::from_utf8_lossy(&screen);
    assert!(screen.contains("after-130") && screen.contains("30 100\r\n"), "{screen}");
    assert_eq!(reason, "exit 3");

    // SSH through port-forward: the image's dropbear greets.
    let mut ssh = rest.websocket(&format!("{base}/portforward/22")).await.unwrap();
    let banner = first_bytes(&mut ssh, b"\r\n").await;
    assert!(banner.starts_with(b"SSH-2.0-dropbear"), "{:?}", String::from_utf8_lossy(&banner));
    ssh.send(Message::Close(None)).await.ok();

    // VNC: QEMU's display server greets with its protocol version.
    let mut vnc = rest.websocket(&format!("{base}/vnc")).await.unwrap();
    let greeting = first_bytes(&mut vnc, b"\n").await;
    assert!(greeting.starts_with(b"RFB 003."), "{:?}", String::from_utf8_lossy(&greeting));
    vnc.send(Message::Close(None)).await.ok();

    // Freeze through the REST route: the node freezes and confirms; unfreeze thaws.
    let frozen = rest.post(&format!("{base}/freeze?unfreezeTimeout=10m"), json!({})).await.ok();
    assert!(frozen["metadata"]["annotations"]["kairon.zyvor.dev/fs-frozen-until"].is_string());
    let confirmed = |want: bool| {
        let rest = rest.clone();
        async move {
            let m = rest.get(base).await.ok();
            (m["metadata"]["annotations"].get("kairon.zyvor.dev/fs-frozen").is_some() == want).then_some(())
        }
    };
    eventually("the node to confirm the freeze", Duration::from_secs(60), || confirmed(true)).await;
    rest.post(&format!("{base}/unfreeze"), json!({})).await.ok();
    eventually("the node to thaw", Duration::from_secs(60), || confirmed(false)).await;

    // Idle-suspended by Hibernate (as the controller does it): an exec wakes it, waiting for the
    // restored guest's agent, and answers.
    let kube: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "default");
    exec("echo remembered > /tmp/mark").await;
    let patch = json!({"spec": {"powerState": "Hibernated"}, "metadata": {"annotations": {"kairon.zyvor.dev/idle-suspended": "Hibernate"}}});
    kube.patch("vm", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    rest.get(&format!("{base}/wait?phase=Hibernated&timeoutSeconds=300")).await.ok();
    let woke = rest.post(&format!("{base}/exec"), json!({"command": ["cat", "/tmp/mark"]})).await;
    assert_eq!(woke.status, 200, "{woke:?}");
    assert_eq!(woke.body["stdout"], "remembered\n", "memory survived the hibernate: {}", woke.body);
    let after: Value = rest.get(base).await.ok();
    assert_eq!(after["status"]["phase"], "Running");
    assert!(after["metadata"]["annotations"].get("kairon.zyvor.dev/idle-suspended").is_none());
}
