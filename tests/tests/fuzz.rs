//! Schemathesis drives every operation of the committed OpenAPI document against a real
//! `kairon up`, with valid and invalid input: no answer may be a 5xx, and every answer is one
//! the document lists. Its stateful phase follows the document's links from each create to the
//! get, replace and delete of the object created, on Machines that never boot. (Routes that
//! would write files on the host or pull images from the internet are left out.)

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use kairon_e2e::Kairon;

/// The longest the whole schemathesis run may take.
const CAP: Duration = Duration::from_secs(8 * 60);

#[tokio::test(flavor = "multi_thread")]
async fn fuzzing_the_document_finds_no_server_error_and_no_undocumented_answer() {
    let k = Kairon::start_with(&["--node-tick", "1s", "--heartbeat-interval", "1s"]).unwrap();
    let rest = k.rest().unwrap();
    let m = json!({"metadata": {"name": "fuzzed", "labels": {"kairon.zyvor.dev/sandbox": "true"}},
                   "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true}}});
    rest.post("/api/v1/machines/default", m).await.ok();
    rest.get("/api/v1/machines/default/fuzzed/wait?phase=Running&timeoutSeconds=120").await.ok();

    // The pool the stateful phase's claims name (tests/schemathesis/kairon_hooks.py): no warm
    // member, and its template pinned to a node that is not there, so nothing it makes boots.
    let pool = json!({"metadata": {"name": "stateful-pool"},
                      "spec": {"replicas": 0, "template": {"spec": {"sandbox": {"templateName": "busybox"},
                                                                     "nodeName": "no-such-node"}}}});
    rest.post("/api/v1/machinepools/default", pool).await.ok();

    let report = k.data_dir.path().join("schemathesis");
    let hooks = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemathesis/kairon_hooks.py");
    // Through the module, so it is found wherever pip put its scripts.
    let mut run = Command::new("python3");
    run.args(["-m", "schemathesis.cli", "--config-file"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("schemathesis.toml"))
        .arg("run")
        .arg(format!("{}/openapi.json", k.url))
        .args(["--url", &k.url])
        .args(["-H", &format!("Authorization: Bearer {}", k.admin_token)])
        .arg("--tls-verify")
        .arg(k.data_dir.path().join("tls/ca.crt"))
        // Every check (tests/schemathesis.toml): no 5xx, every status and content type the
        // document lists (and only those), schema-violating requests refused, schema-valid
        // ones accepted (with the statuses and exceptions written there), responses as
        // documented.
        // One worker: CPython 3.11's parser is not thread-safe under hypothesis' lambda
        // introspection ("AST constructor recursion depth mismatch"), a flake of two.
        .args(["--max-examples", "8", "--seed", "7", "--workers", "1", "--request-timeout", "60"])
        // A pooled keep-alive connection the server closed while idle (its header-read timeout,
        // reached on a loaded host) fails the next request at the TLS layer before it is sent:
        // the client's race, retried; an answer the server gives is never retried.
        .args(["--request-retries", "2"])
        // The stateful phase follows the document's links from each create to the get, replace
        // and delete of what it created (its creates made real by the hooks file).
        .args(["--phases", "examples,coverage,fuzzing,stateful"])
        // Host files (snapshots) and image pulls from the internet are not fuzzed. Nor are the
        // long polls and relays, whose documented answers include 502 (nothing listens in the
        // guest) and 504 (a timeout): tests/rest.rs covers those. A file watch is a stream that
        // lasts as long as its client (tests/sdk.rs and agent/tests/watch.rs drive it).
        .args(["--exclude-operation-id", "machine_snapshot"])
        .args(["--exclude-operation-id", "template_build"])
        .args(["--exclude-operation-id", "pool_create"])
        .args([
            "--exclude-operation-id-regex",
            "^(sandbox_http_|.*_wait$|machine_console|machine_portforward|file_watch)",
        ])
        .arg("--report-dir")
        .arg(&report)
        .env("SCHEMATHESIS_HOOKS", &hooks)
        // Its cache of earlier failures (replayed first) stays with this run, not in the tree.
        .current_dir(k.data_dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = run.spawn().expect("schemathesis is installed by the README's test command");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            pipe.read_to_string(&mut text).ok();
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    // The whole run, every phase, within 8 minutes: past that it is stopped and the test fails.
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > CAP {
            child.kill().ok();
            child.wait().ok();
            break None;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    println!("schemathesis ran {:.0?}:\n{stdout}", started.elapsed());
    let Some(status) = status else { panic!("schemathesis took longer than {CAP:?}:\n{stdout}\n{stderr}") };
    assert!(
        status.success(),
        "schemathesis found server errors:\n{stdout}\n{}\nserver log tail:\n{}",
        stderr,
        k.logs().lines().rev().take(40).collect::<Vec<_>>().join("\n")
    );
    assert!(stdout.contains("passed") || stdout.contains("PASSED"), "{stdout}");
}
