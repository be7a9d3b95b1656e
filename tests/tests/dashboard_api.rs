//! What the dashboard needs from the API, under `kairon up` with real runc sandboxes: `whoami`,
//! watches on the REST mirror (NDJSON, the caller's namespaces only), single-use WebSocket
//! tickets and the Kubernetes bearer subprotocol (never a token in a URL), the connection budget
//! (in-process requests take no slot), and `/ui/` with its Content-Security-Policy.

use std::time::{Duration, Instant};

use base64::Engine as _;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use kairon_e2e::{Kairon, Rest};

/// A Machine pinned to a node with no agent: it is stored and watched, nothing boots.
fn parked(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"nodeName": "nowhere", "sandbox": {"templateName": "busybox"}}})
}

/// An open watch: the lines it has sent so far, read as they come.
struct Watch {
    body: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buf: Vec<u8>,
}

impl Watch {
    async fn open(rest: &Rest, path: &str) -> Result<Watch, (u16, Value)> {
        let resp = rest.request(reqwest::Method::GET, path).send().await.expect("the server answers");
        let status = resp.status().as_u16();
        if status != 200 {
            let body = resp.json().await.unwrap_or(Value::Null);
            return Err((status, body));
        }
        let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
        assert_eq!(ct, "application/x-ndjson", "{path}");
        Ok(Watch { body: Box::pin(resp.bytes_stream()), buf: Vec::new() })
    }

    /// The next line, within `timeout` (None when none came).
    async fn next(&mut self, timeout: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return Some(serde_json::from_slice(&line).expect("each line is JSON"));
            }
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Ok(Some(Ok(chunk))) => self.buf.extend_from_slice(&chunk),
                _ => return None,
            }
        }
    }

    /// Lines until one matches `want` (panics after `timeout`); every line seen on the way.
    async fn until(&mut self, what: &str, timeout: Duration, want: impl Fn(&Value) -> bool) -> Vec<Value> {
        let end = Instant::now() + timeout;
        let mut seen = Vec::new();
        while Instant::now() < end {
            if let Some(line) = self.next(end - Instant::now()).await {
                let hit = want(&line);
                seen.push(line);
                if hit {
                    return seen;
                }
            }
        }
        panic!("{what}: not seen within {timeout:?}; saw {seen:?}");
    }
}

fn name_of(line: &Value) -> String {
    format!(
        "{}/{}",
        line["object"]["metadata"]["namespace"].as_str().unwrap_or(""),
        line["object"]["metadata"]["name"].as_str().unwrap_or("")
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn whoami_watches_tickets_and_the_ui() {
    let k = Kairon::start_with(&["--max-connections-per-subject", "3"]).unwrap();
    let admin = k.rest().unwrap();
    let viewer = k.rest_as(&k.token("vera", "viewer", &["team-a"]).unwrap()).unwrap();
    let operator = k.rest_as(&k.token("otto", "operator", &["team-a"]).unwrap()).unwrap();

    // whoami: role, namespaces, the operator-exec flag.
    let me = viewer.get("/api/v1/whoami").await.ok();
    assert_eq!(
        me,
        json!({"subject": "vera", "role": "viewer", "namespaces": ["team-a"], "legacy": false, "operatorExec": false})
    );
    let me = admin.get("/api/v1/whoami").await.ok();
    assert_eq!((me["role"].as_str(), me["namespaces"].clone()), (Some("admin"), json!(["*"])));
    let bad = k.rest_as("not-a-token").unwrap().get("/api/v1/whoami").await;
    assert_eq!((bad.status, bad.reason()), (401, "Unauthorized"), "{bad:?}");

    // A ticket minted now, kept unused to check its expiry at the end.
    let shell = json!({"path": "/api/v1/machines/team-a/shell/exec/stream"});
    let stale = admin.post("/api/v1/tickets", shell.clone()).await;
    assert_eq!(stale.status, 201, "{stale:?}");
    assert_eq!(stale.body["expiresInSeconds"], 30);
    let stale = stale.body["ticket"].as_str().unwrap().to_string();
    let minted = Instant::now();

    // Watches: a viewer of team-a sees team-a's Machines only, first as ADDED, then changes.
    admin.post("/api/v1/machines/team-a", parked("before")).await.ok();
    let mut vw = Watch::open(&viewer, "/api/v1/machines?watch=true").await.unwrap();
    let first = vw.until("the existing Machine", Duration::from_secs(30), |l| name_of(l) == "team-a/before").await;
    assert_eq!(first.last().unwrap()["type"], "ADDED");
    admin.post("/api/v1/machines/team-b", parked("elsewhere")).await.ok();
    admin.post("/api/v1/machines/team-a", parked("after")).await.ok();
    let seen = vw.until("the new Machine", Duration::from_secs(30), |l| name_of(l) == "team-a/after").await;
    assert!(seen.iter().all(|l| name_of(l).starts_with("team-a/")), "a viewer of team-a saw {seen:?}");
    let rv = seen.last().unwrap()["object"]["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    assert_eq!(admin.delete("/api/v1/machines/team-a/after").await.status, 200);
    vw.until("the deletion", Duration::from_secs(60), |l| l["type"] == "DELETED" && name_of(l) == "team-a/after").await;
    // The admin's watch sees every namespace; a label selector narrows it.
    let mut aw = Watch::open(&admin, "/api/v1/machines?watch=true").await.unwrap();
    aw.until("team-b", Duration::from_secs(30), |l| name_of(l) == "team-b/elsewhere").await;
    drop(aw);
    // Resumed from a version: only what came after it (no ADDED of the old ones).
    let mut resumed = Watch::open(&viewer, &format!("/api/v1/machines?watch=true&resourceVersion={rv}")).await.unwrap();
    let lines = resumed
        .until("the deletion again", Duration::from_secs(30), |l| {
            l["type"] == "DELETED" && name_of(l) == "team-a/after"
        })
        .await;
    // `before` may change after that version (the scheduler's status write can come late on a
    // loaded host): a MODIFIED is what came after it; an ADDED would be a replay of the old.
    assert!(lines.iter().all(|l| !(l["type"] == "ADDED" && name_of(l) == "team-a/before")), "{lines:?}");
    drop(resumed);
    drop(vw);
    let bad = viewer.get("/api/v1/machines?watch=true&resourceVersion=abc").await;
    assert_eq!(bad.status, 400, "{bad:?}");
    // Pools, claims and nodes watch the same way; the node `local` is there.
    let mut nw = Watch::open(&viewer, "/api/v1/nodes?watch=true").await.unwrap();
    nw.until("the node", Duration::from_secs(30), |l| l["object"]["metadata"]["name"] == "local").await;
    drop(nw);
    admin
        .post(
            "/api/v1/machinepools/team-b",
            json!({"metadata": {"name": "hidden"}, "spec": {"replicas": 0, "template": {"spec": parked("x")["spec"]}}}),
        )
        .await
        .ok();
    admin
        .post(
            "/api/v1/machinepools/team-a",
            json!({"metadata": {"name": "shown"}, "spec": {"replicas": 0, "template": {"spec": parked("x")["spec"]}}}),
        )
        .await
        .ok();
    let mut pw = Watch::open(&viewer, "/api/v1/machinepools?watch=true").await.unwrap();
    let pools = pw.until("the pool", Duration::from_secs(30), |l| name_of(l) == "team-a/shown").await;
    assert!(pools.iter().all(|l| name_of(l).starts_with("team-a/")), "{pools:?}");
    drop(pw);
    let cw = Watch::open(&viewer, "/api/v1/machineclaims?watch=true").await;
    assert!(cw.is_ok());
    drop(cw);

    // The budget: a watch takes one of the caller's slots (3 here), and the server's own
    // in-process watch behind it takes none, so three watches of the admin (whose subject the
    // in-process client shares) open and the fourth is refused.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(Watch::open(&admin, "/api/v1/machines?watch=true").await.expect("a watch within the budget"));
    }
    let (status, body) = Watch::open(&admin, "/api/v1/machines?watch=true").await.err().expect("over the budget");
    assert_eq!((status, body["reason"].as_str()), (429, Some("TooManyConnections")), "{body}");
    drop(open);
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Tickets: a sandbox to open a shell in.
    let sb = json!({"metadata": {"name": "shell", "labels": {"kairon.zyvor.dev/sandbox": "true"}},
                    "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true}}});
    admin.post("/api/v1/machines/team-a", sb).await.ok();
    admin.running("team-a", "shell").await;
    let cmd = "%5B%22sh%22%2C%22-c%22%2C%22echo%20hi%22%5D";
    let path = "/api/v1/machines/team-a/shell/exec/stream";
    let ticket = admin.post("/api/v1/tickets", shell.clone()).await.ok()["ticket"].as_str().unwrap().to_string();
    let mut ws =
        admin.websocket_with(&format!("{path}?command={cmd}&ticket={ticket}"), &[]).await.expect("a ticket opens it");
    let mut out = Vec::new();
    while let Ok(Some(Ok(m))) = tokio::time::timeout(Duration::from_secs(30), ws.next()).await {
        match m {
            Message::Binary(b) => out.extend_from_slice(&b),
            Message::Close(_) => break,
            _ => {}
        }
    }
    assert_eq!(String::from_utf8_lossy(&out), "hi\n");
    // Used once, it opens nothing.
    let again = admin.websocket_with(&format!("{path}?command={cmd}&ticket={ticket}"), &[]).await.err().unwrap();
    assert!(again.starts_with("401") && again.contains("unknown, used or expired"), "{again}");
    // A ticket is the minter's: a viewer's ticket does not open a shell.
    let vt = viewer.post("/api/v1/tickets", shell.clone()).await.ok()["ticket"].as_str().unwrap().to_string();
    let refused = admin.websocket_with(&format!("{path}?command={cmd}&ticket={vt}"), &[]).await.err().unwrap();
    assert!(refused.starts_with("403"), "{refused}");
    // A ticket opens the one route it was minted for: not the console, not another Machine's
    // shell (and, tried there, it is spent).
    for other in ["/api/v1/machines/team-a/shell/console", "/api/v1/machines/team-a/before/exec/stream"] {
        let t = admin.post("/api/v1/tickets", shell.clone()).await.ok()["ticket"].as_str().unwrap().to_string();
        let refused = admin.websocket_with(&format!("{other}?command={cmd}&ticket={t}"), &[]).await.err().unwrap();
        assert!(
            refused.starts_with("401") && refused.contains("minted for /api/v1/machines/team-a/shell/exec/stream"),
            "{refused}"
        );
        let spent = admin.websocket_with(&format!("{path}?command={cmd}&ticket={t}"), &[]).await.err().unwrap();
        assert!(spent.starts_with("401") && spent.contains("unknown, used or expired"), "{spent}");
    }
    // It is minted for a Machine's WebSocket route in the caller's namespaces only.
    for (body, status, says) in [
        (json!({}), 422, "missing field `path`"),
        (json!({"path": "/api/v1/whoami"}), 400, "is not a WebSocket route"),
        (json!({"path": format!("{path}?command={cmd}")}), 400, "without a query"),
    ] {
        let a = admin.post("/api/v1/tickets", body.clone()).await;
        assert_eq!(a.status, status, "{body}: {a:?}");
        assert!(a.message().contains(says), "{body}: {a:?}");
    }
    let elsewhere = viewer.post("/api/v1/tickets", json!({"path": "/api/v1/machines/team-b/x/console"})).await;
    assert_eq!((elsewhere.status, elsewhere.reason()), (403, "Forbidden"), "{elsewhere:?}");
    // The token in the Kubernetes bearer subprotocol works too.
    let proto = format!(
        "kairon.v1, base64url.bearer.authorization.k8s.io.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&admin.token)
    );
    let ws = admin.websocket_with(&format!("{path}?command={cmd}"), &[("sec-websocket-protocol", &proto)]).await;
    assert!(ws.is_ok(), "{:?}", ws.err());
    drop(ws);
    // A token in the URL is refused, with a header or without, on any route.
    let in_url = admin.websocket_with(&format!("{path}?command={cmd}&access_token={}", admin.token), &[]).await;
    assert!(in_url.as_ref().is_err_and(|e| e.starts_with("401") && e.contains("never goes in a URL")), "{in_url:?}");
    let in_url = admin.get(&format!("/api/v1/whoami?token={}", admin.token)).await;
    assert_eq!((in_url.status, in_url.reason()), (401, "Unauthorized"), "{in_url:?}");
    // A token given as a ticket is no ticket.
    let as_ticket = admin.websocket_with(&format!("{path}?command={cmd}&ticket={}", admin.token), &[]).await;
    assert!(as_ticket.as_ref().is_err_and(|e| e.starts_with("401")), "{as_ticket:?}");
    // A ticket is no bearer token either.
    let t = operator.post("/api/v1/tickets", shell.clone()).await.ok()["ticket"].as_str().unwrap().to_string();
    let as_bearer = k.rest_as(&t).unwrap().get("/api/v1/whoami").await;
    assert_eq!(as_bearer.status, 401);

    // /ui/: the dashboard with a strict CSP; its fallback only under /ui/.
    let http = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(&std::fs::read(k.data_dir.path().join("tls/ca.crt")).unwrap()).unwrap(),
        )
        .build()
        .unwrap();
    for page in ["/ui/", "/ui/machines", "/ui/pools/anything"] {
        let resp = http.get(format!("{}{page}", k.url)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{page}");
        let csp = resp.headers()["content-security-policy"].to_str().unwrap().to_string();
        assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe-eval"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
        let html = resp.text().await.unwrap();
        for script in html.split("<script").skip(1) {
            let tag = &script[..script.find('>').unwrap()];
            assert!(tag.contains("src="), "an inline script in {page}: {tag}");
        }
    }
    let missing = http.get(format!("{}/ui/assets/none.js", k.url)).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    assert_eq!(missing.json::<Value>().await.unwrap()["reason"], "NotFound");
    // Any other unknown path stays the API's JSON 404 (no dashboard fallback outside /ui/).
    let elsewhere = admin.get("/dashboard/machines").await;
    assert_eq!((elsewhere.status, elsewhere.reason()), (404, "NotFound"), "{elsewhere:?}");

    // The first ticket, unused for 30 s, has expired.
    let left = Duration::from_secs(31).saturating_sub(minted.elapsed());
    tokio::time::sleep(left).await;
    let expired = admin.websocket_with(&format!("{path}?command={cmd}&ticket={stale}"), &[]).await.err().unwrap();
    assert!(expired.starts_with("401"), "{expired}");
    assert_eq!(admin.delete("/api/v1/machines/team-a/shell").await.status, 200);
}
