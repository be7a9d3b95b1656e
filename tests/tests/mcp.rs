//! The MCP server at /mcp against `kairon up`: an MCP client session (initialize, tools/list,
//! tools/call over streamable HTTP, with the admin bearer token) claims a sandbox from a pool,
//! runs a command in it, moves a file, pauses and resumes it, reads describe_claim's usage and
//! releases the claim. Without a token /mcp answers 401.

use std::process::Command;
use std::time::Duration;

use kairon_e2e::mcp::Mcp;
use kairon_e2e::{Kairon, wait_for_sync};
use serde_json::{Value, json};

fn rest(k: &Kairon, method: &str, path: &str, body: &Value) -> Value {
    let out = Command::new("curl")
        .args(["-sS", "-X", method, "--cacert"])
        .arg(k.data_dir.path().join("tls/ca.crt"))
        .args(["-H", &format!("Authorization: Bearer {}", k.admin_token), "-H", "Content-Type: application/json"])
        .args(["-d", &body.to_string(), &format!("{}{path}", k.url)])
        .output()
        .expect("curl");
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

#[test]
fn an_mcp_session_works_in_a_claimed_sandbox_and_reads_its_usage() {
    let k = Kairon::start().expect("kairon up");
    let pool = json!({
        "metadata": { "name": "agents", "namespace": "mcp" },
        "spec": { "replicas": 1, "template": {
            "metadata": { "labels": { "kairon.zyvor.dev/sandbox": "true" } },
            "spec": { "sandbox": { "templateName": "busybox" }, "guestAgent": { "enabled": true, "console": true } } } }
    });
    let made = rest(&k, "POST", "/api/v1/machinepools/mcp", &pool);
    assert_eq!(made["metadata"]["name"], "agents", "{made}");

    // No token: refused like the REST API.
    let ca = k.data_dir.path().join("tls/ca.crt");
    let anon = Mcp::new(&k.url, &ca, None);
    let (status, head, _) = anon.post(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }));
    assert_eq!(status, 401, "{head}");

    let mut mcp = Mcp::new(&k.url, &ca, Some(k.admin_token.clone()));
    let init = mcp.request(
        "initialize",
        json!({ "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": { "name": "e2e", "version": "1" } }),
    );
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    assert!(mcp.session.is_some(), "initialize gave no Mcp-Session-Id");
    let (status, _, _) = mcp.post(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    assert!(status == 202 || status == 200, "initialized: {status}");

    let tools = mcp.request("tools/list", json!({}));
    let names: Vec<&str> =
        tools["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    for want in [
        "create_sandbox",
        "claim_sandbox",
        "run_command",
        "read_file",
        "write_file",
        "pause",
        "resume",
        "close_sandbox",
        "describe_claim",
        "list_sandboxes",
        "sandbox_metrics",
        "preview_url",
        "start_process",
        "run_code",
        "read_process",
        "kill_process",
        "fork_sandbox",
    ] {
        assert!(names.contains(&want), "tools/list lacks {want}: {names:?}");
    }
    // Each tool says what it does to the sandbox, so a client can ask before the destructive
    // ones and run the read-only ones freely.
    let hints = |name: &str| {
        let t = tools["tools"].as_array().unwrap().iter().find(|t| t["name"] == name).unwrap().clone();
        let a = &t["annotations"];
        assert!(a["title"].is_string(), "{name} has no title: {t}");
        (a["readOnlyHint"].as_bool(), a["destructiveHint"].as_bool(), a["idempotentHint"].as_bool())
    };
    for name in ["read_file", "describe_claim", "list_sandboxes", "read_process"] {
        assert_eq!(hints(name).0, Some(true), "{name} is read-only");
    }
    for name in ["run_command", "write_file", "close_sandbox", "start_process", "run_code", "kill_process"] {
        assert_eq!(hints(name).0.zip(hints(name).1), Some((false, true)), "{name} is destructive");
    }
    for name in ["create_sandbox", "claim_sandbox", "pause", "resume", "fork_sandbox", "preview_url"] {
        assert_eq!(hints(name).0.zip(hints(name).1), Some((false, false)), "{name} only adds or changes state");
    }
    assert_eq!(hints("pause").2, Some(true), "pausing twice is pausing once");
    assert_eq!(hints("create_sandbox").2, Some(false), "each create makes a new sandbox");
    // What boots follows the SDKs' rule: an OCI reference or a bare name given as `image` is
    // refused before anything is made, saying what to give instead.
    for (args, says) in [
        (json!({ "namespace": "mcp", "image": "ghcr.io/org/app:1" }), "kaironctl build template NAME"),
        (json!({ "namespace": "mcp", "image": "busybox" }), "give template 'busybox'"),
        (json!({ "namespace": "mcp", "image": "/var/lib/x.qcow2", "template": "busybox" }), "not both"),
    ] {
        let (err, text) = mcp.tool("create_sandbox", args);
        assert!(err && text.contains(says), "{text}");
    }

    // A tool that names no namespace acts in the caller's own: an operator's one namespace, else `default`.
    let listed: Value = serde_json::from_str(&mcp.ok("list_sandboxes", json!({}))).unwrap();
    assert_eq!(listed["namespace"], "default", "{listed}");
    let operator = k.token("op", "operator", &["mcp"]).unwrap();
    let own = Mcp::open(&k.url, &ca, Some(operator));
    let listed: Value = serde_json::from_str(&own.ok("list_sandboxes", json!({}))).unwrap();
    assert_eq!(listed["namespace"], "mcp", "{listed}");

    // A forgotten sandbox does not run forever: 300 s unless told (0: no deadline).
    for (args, ttl) in [
        (json!({ "namespace": "mcp", "template": "busybox", "name": "mcp-default" }), json!(300)),
        (json!({ "namespace": "mcp", "template": "busybox", "name": "mcp-open", "timeout_seconds": 0 }), Value::Null),
        (
            json!({ "namespace": "mcp", "template": "busybox", "name": "mcp-long", "max_lifetime_seconds": 7200 }),
            Value::Null,
        ),
    ] {
        let name = args["name"].as_str().unwrap().to_string();
        mcp.ok("create_sandbox", args);
        let m = rest(&k, "GET", &format!("/api/v1/machines/mcp/{name}"), &Value::Null);
        assert_eq!(m["spec"]["ttlSeconds"], ttl, "{name}: {m}");
        assert!(mcp.ok("close_sandbox", json!({ "namespace": "mcp", "name": name })).contains("deleted"));
    }

    // The network option is the SDKs' `network=`: "internet", "none" or the hosts to allow.
    for (i, (network, egress)) in [
        (json!("none"), json!({"mode": "None"})),
        (
            json!(["pypi.org", ".pythonhosted.org"]),
            json!({"mode": "Allowlist", "allow": ["pypi.org", ".pythonhosted.org"]}),
        ),
        (json!("internet"), Value::Null),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("mcp-net-{i}");
        let args = json!({ "namespace": "mcp", "template": "busybox", "name": name, "network": network });
        mcp.ok("create_sandbox", args);
        let m = rest(&k, "GET", &format!("/api/v1/machines/mcp/{name}"), &Value::Null);
        assert_eq!(m["spec"]["network"]["egress"], egress, "{network}: {m}");
        mcp.ok("close_sandbox", json!({ "namespace": "mcp", "name": name }));
    }
    let (err, text) =
        mcp.tool("create_sandbox", json!({ "namespace": "mcp", "template": "busybox", "network": "offline" }));
    assert!(err && text.contains("\"none\""), "{text}");
    // And the SDKs' secrets: references, stored as spec.secretEnv (the values are read per command).
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "openai", "labels": {"kairon.zyvor.dev/secret-env": "true"}}, "stringData": {"api-key": "s3cr3t"}});
    rest(&k, "POST", "/api/v1/namespaces/mcp/secrets", &secret);
    let args = json!({ "namespace": "mcp", "template": "busybox", "name": "mcp-secret", "secrets": {"API_KEY": "openai/api-key"} });
    mcp.ok("create_sandbox", args);
    let m = rest(&k, "GET", "/api/v1/machines/mcp/mcp-secret", &Value::Null);
    assert_eq!(m["spec"]["secretEnv"], json!({"API_KEY": {"name": "openai", "key": "api-key"}}), "{m}");
    let ran: Value = serde_json::from_str(
        &mcp.ok("run_command", json!({ "namespace": "mcp", "name": "mcp-secret", "command": "echo $API_KEY" })),
    )
    .unwrap();
    assert_eq!(ran["stdout"], "s3cr3t\n", "{ran}");
    mcp.ok("close_sandbox", json!({ "namespace": "mcp", "name": "mcp-secret" }));
    let (err, text) =
        mcp.tool("create_sandbox", json!({ "namespace": "mcp", "template": "busybox", "secrets": {"K": "openai"} }));
    assert!(err && text.contains("SECRET/KEY"), "{text}");

    let claimed: Value = serde_json::from_str(
        &mcp.ok("claim_sandbox", json!({ "namespace": "mcp", "pool": "agents", "name": "job-1", "ttl_seconds": 3600 })),
    )
    .expect("claim_sandbox answers JSON");
    let machine = claimed["name"].as_str().expect("the claimed Machine").to_string();

    let ran: Value = serde_json::from_str(&mcp.ok(
        "run_command",
        json!({ "namespace": "mcp", "name": machine, "command": "echo hello from $(hostname); exit 4" }),
    ))
    .expect("run_command answers JSON");
    assert!(ran["stdout"].as_str().unwrap_or_default().starts_with("hello from"), "{ran}");
    assert_eq!(ran["exitCode"], 4);
    // cwd, env and a timeout: the command runs where and with what it is told, and is stopped.
    let ran: Value = serde_json::from_str(&mcp.ok(
        "run_command",
        json!({ "namespace": "mcp", "name": machine, "command": "pwd; echo \"$GREETING\"",
                "cwd": "/tmp", "env": { "GREETING": "hi there" } }),
    ))
    .unwrap();
    assert_eq!(ran["stdout"], "/tmp\nhi there\n", "{ran}");
    let ran: Value = serde_json::from_str(&mcp.ok(
        "run_command",
        json!({ "namespace": "mcp", "name": machine, "command": "sleep 30", "timeout_seconds": 1 }),
    ))
    .unwrap();
    assert_eq!(ran["timedOut"], true, "{ran}");

    mcp.ok(
        "write_file",
        json!({ "namespace": "mcp", "name": machine, "path": "/tmp/note.txt", "content": "remember" }),
    );
    assert_eq!(
        mcp.ok("read_file", json!({ "namespace": "mcp", "name": machine, "path": "/tmp/note.txt" })),
        "remember"
    );
    // Bytes that are not UTF-8 travel as base64, both ways.
    let wrote = mcp.ok(
        "write_file",
        json!({ "namespace": "mcp", "name": machine, "path": "/tmp/blob", "content": "AP8BAg==", "encoding": "base64" }),
    );
    assert!(wrote.contains("wrote 4 bytes"), "{wrote}");
    let read: Value =
        serde_json::from_str(&mcp.ok("read_file", json!({ "namespace": "mcp", "name": machine, "path": "/tmp/blob" })))
            .expect("bytes that are not UTF-8 come back as JSON");
    assert_eq!((read["encoding"].as_str(), read["content"].as_str()), (Some("base64"), Some("AP8BAg==")), "{read}");
    let (err, text) =
        mcp.tool("read_file", json!({ "namespace": "mcp", "name": machine, "path": "/tmp/blob", "encoding": "text" }));
    assert!(err && text.contains("not UTF-8"), "{text}");
    let read: Value = serde_json::from_str(&mcp.ok(
        "read_file",
        json!({ "namespace": "mcp", "name": machine, "path": "/tmp/note.txt", "encoding": "base64" }),
    ))
    .unwrap();
    assert_eq!(read["content"], "cmVtZW1iZXI=", "{read}");
    let (err, text) = mcp.tool("read_file", json!({ "namespace": "mcp", "name": machine, "path": "/no/such" }));
    assert!(err && text.contains("NotFound"), "a missing file is a tool error with the reason: {text}");
    // A model's context is small: a big file comes back cut, saying so and how to read the rest.
    mcp.ok("run_command", json!({ "namespace": "mcp", "name": machine, "command": "seq 1 30000 > /tmp/big" }));
    let read: Value = serde_json::from_str(
        &mcp.ok("read_file", json!({ "namespace": "mcp", "name": machine, "path": "/tmp/big", "max_bytes": 100 })),
    )
    .unwrap();
    assert_eq!(read["content"].as_str().map(str::len), Some(100), "{read}");
    assert!(read["truncated"] == true && read["note"].as_str().unwrap().contains("tail -c +101"), "{read}");
    let big: Value =
        serde_json::from_str(&mcp.ok("read_file", json!({ "namespace": "mcp", "name": machine, "path": "/tmp/big" })))
            .unwrap();
    assert_eq!(big["content"].as_str().map(str::len), Some(64 * 1024), "the default cap is 64 KiB");
    // What it uses now: its memory against its limit, its processes.
    let used: Value =
        serde_json::from_str(&mcp.ok("sandbox_metrics", json!({ "namespace": "mcp", "name": machine }))).unwrap();
    assert!(used["memoryUsedBytes"].as_u64() > Some(0) && used["memoryLimitBytes"].as_u64() > Some(0), "{used}");
    assert!(used["cpuPercent"].is_number() && used["windowMillis"].as_u64() >= Some(500), "{used}");
    // A process's output too (its latest bytes), and kill_process sends KILL, as kill() does.
    let p: Value = serde_json::from_str(&mcp.ok(
        "start_process",
        json!({ "namespace": "mcp", "name": machine, "command": "seq 1 30000; trap '' TERM; sleep 600" }),
    ))
    .unwrap();
    let pid = p["id"].as_str().expect("the process id").to_string();
    let read = wait_for_sync("the process's output", Duration::from_secs(30), Duration::from_millis(200), || {
        let v: Value = serde_json::from_str(
            &mcp.ok("read_process", json!({ "namespace": "mcp", "name": machine, "pid": pid, "max_output_bytes": 64 })),
        )
        .unwrap();
        if v["stdout"].as_str().is_some_and(|s| s.ends_with("30000\n")) { Ok(v) } else { Err(v) }
    });
    assert!(read["truncated"] == true && read["stdout"].as_str().unwrap().len() <= 64, "{read}");
    assert!(mcp.ok("kill_process", json!({ "namespace": "mcp", "name": machine, "pid": pid })).contains("sent KILL"));
    wait_for_sync("KILL ends a process that ignores TERM", Duration::from_secs(30), Duration::from_millis(200), || {
        let p: Value =
            serde_json::from_str(&mcp.ok("read_process", json!({ "namespace": "mcp", "name": machine, "pid": pid })))
                .unwrap();
        if p["state"] == "exited" { Ok(()) } else { Err(p) }
    });

    // The namespace's sandboxes, with the claim that holds this one.
    let listed: Value = serde_json::from_str(&mcp.ok("list_sandboxes", json!({ "namespace": "mcp" }))).unwrap();
    let row = listed["sandboxes"].as_array().unwrap().iter().find(|r| r["name"] == machine.as_str()).cloned();
    assert_eq!(row.as_ref().map(|r| r["claim"].clone()), Some(json!("job-1")), "{listed}");
    assert_eq!(row.map(|r| r["pool"].clone()), Some(json!("agents")), "{listed}");

    // Background processes: started, read while and after they run, killed.
    let started: Value = serde_json::from_str(&mcp.ok(
        "start_process",
        json!({ "namespace": "mcp", "name": machine, "command": "for i in 1 2 3; do echo line $i; done; echo oops >&2; exit 3" }),
    ))
    .unwrap();
    let pid = started["id"].as_str().expect("a process id").to_string();
    let done = wait_for_sync("the process to exit", Duration::from_secs(60), Duration::from_millis(200), || {
        let p: Value =
            serde_json::from_str(&mcp.ok("read_process", json!({ "namespace": "mcp", "name": machine, "pid": pid })))
                .unwrap();
        if p["state"] == "exited" { Ok(p) } else { Err(p) }
    });
    assert_eq!(
        (done["exitCode"].clone(), done["stdout"].clone()),
        (json!(3), json!("line 1\nline 2\nline 3\n")),
        "{done}"
    );
    assert_eq!(done["stderr"], "oops\n", "{done}");
    let sleeper: Value = serde_json::from_str(
        &mcp.ok("start_process", json!({ "namespace": "mcp", "name": machine, "command": "sleep 300" })),
    )
    .unwrap();
    let pid = sleeper["id"].as_str().unwrap().to_string();
    assert!(
        mcp.ok("kill_process", json!({ "namespace": "mcp", "name": machine, "pid": pid, "signal": "KILL" }))
            .contains("KILL")
    );
    wait_for_sync("the killed process to exit", Duration::from_secs(60), Duration::from_millis(200), || {
        let p: Value =
            serde_json::from_str(&mcp.ok("read_process", json!({ "namespace": "mcp", "name": machine, "pid": pid })))
                .unwrap();
        if p["state"] == "exited" { Ok(()) } else { Err(p) }
    });
    let (err, text) = mcp.tool("read_process", json!({ "namespace": "mcp", "name": machine, "pid": "999999" }));
    assert!(err && text.contains("NotFound"), "{text}");

    // A fork carries the sandbox's filesystem into a new sandbox.
    let forked: Value = serde_json::from_str(
        &mcp.ok("fork_sandbox", json!({ "namespace": "mcp", "name": machine, "new_name": "job-1-fork" })),
    )
    .unwrap();
    assert_eq!(forked["phase"], "Running", "{forked}");
    assert_eq!(
        mcp.ok("read_file", json!({ "namespace": "mcp", "name": "job-1-fork", "path": "/tmp/note.txt" })),
        "remember"
    );
    assert!(mcp.ok("close_sandbox", json!({ "namespace": "mcp", "name": "job-1-fork" })).contains("deleted"));

    assert!(mcp.ok("pause", json!({ "namespace": "mcp", "name": machine })).contains("Paused"));
    assert!(mcp.ok("resume", json!({ "namespace": "mcp", "name": machine })).contains("Running"));

    // describe_claim: the claim and its usage, which accrues while bound (every 30 s).
    let described = wait_for_sync("usage to accrue", Duration::from_secs(180), Duration::from_secs(2), || {
        let d: Value = serde_json::from_str(&mcp.ok("describe_claim", json!({ "namespace": "mcp", "name": "job-1" })))
            .expect("describe_claim answers JSON");
        assert_eq!(d["phase"], "Bound", "{d}");
        assert_eq!(d["machine"], machine.as_str(), "{d}");
        assert_eq!(d["pool"], "agents", "{d}");
        if d["usage"]["activeSeconds"].as_i64().unwrap_or(0) > 0 { Ok(d) } else { Err(d) }
    });
    for key in ["activeSeconds", "suspendedSeconds", "vcpuSeconds", "memoryGiBSeconds"] {
        assert!(described["usage"].get(key).is_some(), "usage lacks {key}: {described}");
    }
    assert!(described["history"].is_object(), "the accrual history: {described}");

    assert!(mcp.ok("close_sandbox", json!({ "namespace": "mcp", "claim": "job-1" })).contains("released"));
    // Once it is gone, describe_claim answers from the usage history: the final usage.
    let gone =
        wait_for_sync("the released claim to be gone", Duration::from_secs(120), Duration::from_millis(500), || {
            let (err, text) = mcp.tool("describe_claim", json!({ "namespace": "mcp", "name": "job-1" }));
            assert!(!err, "a released claim is described from its history: {text}");
            let d: Value = serde_json::from_str(&text).expect("describe_claim answers JSON");
            if d["deleted"] == true { Ok(d) } else { Err(d) }
        });
    assert_eq!((gone["phase"].as_str(), gone["uid"].as_str()), (Some("Released"), described["uid"].as_str()), "{gone}");
    let final_active = gone["usage"]["activeSeconds"].as_i64().unwrap_or(0);
    assert!(final_active >= described["usage"]["activeSeconds"].as_i64().unwrap(), "{gone}");
    assert!(gone["history"]["intervals"].as_array().is_some_and(|i| !i.is_empty()), "{gone}");
    // Under the namespace rule: an operator of another namespace learns nothing of it.
    let other = k.token("other-team", "operator", &["elsewhere"]).unwrap();
    let mut outsider = Mcp::new(&k.url, &ca, Some(other));
    outsider.request(
        "initialize",
        json!({ "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": { "name": "e2e", "version": "1" } }),
    );
    outsider.post(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    let (err, text) = outsider.tool("describe_claim", json!({ "namespace": "mcp", "name": "job-1" }));
    assert!(err && !text.contains("activeSeconds"), "{text}");
    let (err, text) = mcp.tool("describe_claim", json!({ "namespace": "mcp", "name": "never-was" }));
    assert!(err && text.contains("NotFound"), "{text}");
}

/// The `mcp` Python SDK's own client (streamable HTTP, as agent frameworks use it) holds a whole
/// session: `tests/mcp/session.py` asserts every result and prints `session ok`.
#[test]
fn a_scripted_session_with_the_mcp_python_sdk() {
    let k = Kairon::start().expect("kairon up");
    let pool = json!({
        "metadata": { "name": "mcp-pool", "namespace": "mcp" },
        "spec": { "replicas": 1, "template": {
            "metadata": { "labels": { "kairon.zyvor.dev/sandbox": "true" } },
            "spec": { "sandbox": { "templateName": "busybox" }, "guestAgent": { "enabled": true, "console": true } } } }
    });
    let made = rest(&k, "POST", "/api/v1/machinepools/mcp", &pool);
    assert_eq!(made["metadata"]["name"], "mcp-pool", "{made}");
    let tools = std::env::var_os("KAIRON_SDK_TOOLS").map(std::path::PathBuf::from).unwrap_or_else(|| {
        std::path::PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/kairon-sdk-tools")
    });
    let python = tools.join("venv/bin/python");
    assert!(python.exists(), "{} is missing: run sdk-gen/setup (scripts/test does)", python.display());
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/session.py");
    let out = Command::new(python)
        .arg(script)
        .env("KAIRON_URL", &k.url)
        .env("KAIRON_TOKEN", &k.admin_token)
        .env("KAIRON_CA_FILE", k.data_dir.path().join("tls/ca.crt"))
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("session ok"),
        "the scripted session failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// run_code: a context keeps its state between calls (`x = 21`, then `x * 2` is `42`), a
/// raise comes back with its traceback, a new context shares nothing, a language the template
/// lacks is refused saying so, and a context ended by kill_process says to start another.
#[test]
fn run_code_keeps_a_context_between_calls_in_a_python_sandbox() {
    let k = Kairon::start().expect("kairon up");
    let m = json!({"metadata": {"name": "coder", "labels": {"kairon.zyvor.dev/sandbox": "true"}},
                   "spec": {"sandbox": {"templateName": "python"}, "guestAgent": {"enabled": true}}});
    let made = rest(&k, "POST", "/api/v1/machines/mcp", &m);
    assert_eq!(made["metadata"]["name"], "coder", "{made}");
    let up = rest(&k, "GET", "/api/v1/machines/mcp/coder/wait?phase=Running&timeoutSeconds=900", &Value::Null);
    assert_eq!(up["status"]["phase"], "Running", "{up}");
    let mcp = Mcp::open(&k.url, &k.data_dir.path().join("tls/ca.crt"), Some(k.admin_token.clone()));
    let run = |args: Value| -> Value {
        let mut args = args;
        args["namespace"] = json!("mcp");
        args["name"] = json!("coder");
        serde_json::from_str(&mcp.ok("run_code", args)).unwrap()
    };

    let first = run(json!({"code": "x = 21\nprint('hi')"}));
    assert_eq!((first["stdout"].as_str(), &first["text"], &first["error"]), (Some("hi\n"), &Value::Null, &Value::Null));
    let ctx = first["context"].as_str().expect("a context").to_string();
    assert_eq!(run(json!({"context": ctx, "code": "x * 2"}))["text"], "42");
    let raised = run(json!({"context": ctx, "code": "def f():\n    return x / 0\nf()"}));
    assert_eq!(raised["error"]["name"], "ZeroDivisionError", "{raised}");
    assert!(raised["error"]["traceback"].as_str().unwrap().contains("line 2, in f"), "{raised}");

    let other = run(json!({"code": "x"}));
    assert_eq!(other["error"]["name"], "NameError", "a new context shares nothing: {other}");
    assert_ne!(other["context"], ctx);

    let (err, text) =
        mcp.tool("run_code", json!({"namespace": "mcp", "name": "coder", "language": "javascript", "code": "1"}));
    assert!(err && text.contains("no node"), "{text}");

    mcp.ok("kill_process", json!({"namespace": "mcp", "name": "coder", "pid": ctx}));
    let (err, text) = mcp.tool("run_code", json!({"namespace": "mcp", "name": "coder", "context": ctx, "code": "x"}));
    assert!(err && text.contains("start another"), "{text}");
}
