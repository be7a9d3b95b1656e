//! kubectl (1.32) against `kairon up`: the commands a user types, with the kubeconfig
//! `kairon up` writes, asserting on what kubectl prints. These are about the API alone, so
//! `kairon up` runs without node agent and controllers (`--no-runtime`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::{Value, json};

use kairon_e2e::{Kairon, hold_sync, wait_for_sync};
use kairon_model::{Machine, MachineClaim};

/// How long any one step may take: the machine may be busy with other work.
const STEP: Duration = Duration::from_secs(30);

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/spec")
}

/// Which part of a fixture the spec document shows.
enum Shown {
    /// Everything after the fixture's leading comment lines.
    Whole,
    /// The lines from this one on: the spec shows a fragment, the fixture wraps it.
    From(&'static str),
}

/// The spec examples: (fixture, spec document, what of it the spec shows, Machine name).
const SPEC_EXAMPLES: [(&str, &str, Shown, &str); 3] = [
    ("agent-sandboxes-lifecycle.yaml", "agent-sandboxes.md", Shown::Whole, "agent-42"),
    ("sandbox-track-agent-run.yaml", "sandbox-track.md", Shown::Whole, "agent-run"),
    ("sandbox-track-template.yaml", "sandbox-track.md", Shown::From("spec:"), "agent-template"),
];

/// A line with its indentation kept, inner runs of whitespace collapsed and the end trimmed.
fn normalise(line: &str) -> String {
    let indent = line.len() - line.trim_start().len();
    format!("{}{}", " ".repeat(indent), line.split_whitespace().collect::<Vec<_>>().join(" "))
}

fn normalised_lines(text: &str) -> Vec<String> {
    text.lines().filter(|l| !l.trim().is_empty()).map(normalise).collect()
}

/// The YAML body of a fixture that the spec document must still contain, line by line.
fn shown_body(fixture: &str, shown: &Shown) -> Vec<String> {
    let lines: Vec<String> =
        normalised_lines(fixture).into_iter().skip_while(|l| l.trim_start().starts_with('#')).collect();
    match shown {
        Shown::Whole => lines,
        Shown::From(first) => {
            let at = lines.iter().position(|l| l == first).unwrap_or_else(|| panic!("no {first:?} line in fixture"));
            lines[at..].to_vec()
        }
    }
}

/// Whether `body` appears as consecutive lines of `doc`.
fn contains_lines(doc: &[String], body: &[String]) -> bool {
    !body.is_empty() && doc.windows(body.len()).any(|w| w == body)
}

/// The cell under `column` in the row whose first cell is `row`, from kubectl's aligned table
/// output (cells may be empty, so columns are found by the header's offsets).
fn cell(table: &str, row: &str, column: &str) -> String {
    cell_where(table, |l| l.split_whitespace().next() == Some(row), column)
}

/// The same, in the first row that `pick` chooses.
fn cell_where(table: &str, pick: impl Fn(&str) -> bool, column: &str) -> String {
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default();
    let starts: Vec<usize> = header
        .char_indices()
        .filter(|&(i, c)| c != ' ' && (i == 0 || header.as_bytes()[i - 1] == b' '))
        .map(|(i, _)| i)
        .collect();
    let names: Vec<&str> = header.split_whitespace().collect();
    let idx = names.iter().position(|n| *n == column).unwrap_or_else(|| panic!("no column {column} in:\n{table}"));
    let line = lines.find(|l| pick(l)).unwrap_or_else(|| panic!("no such row in:\n{table}"));
    let end = starts.get(idx + 1).copied().unwrap_or(line.len()).min(line.len());
    line.get(starts[idx].min(end)..end).unwrap_or_default().trim().to_string()
}

/// Every field of `want` is in `got` with the same value (`got` may have more: defaults).
fn assert_subset(want: &Value, got: &Value, path: &str) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, v) in w {
                let p = format!("{path}.{k}");
                assert_subset(v, g.get(k).unwrap_or_else(|| panic!("{p} missing from {got}")), &p);
            }
        }
        _ => assert_eq!(want, got, "{path}"),
    }
}

/// A kubectl running in the background, killed if a failing test leaves it running.
struct Spawned(Child);

impl std::ops::Deref for Spawned {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Spawned {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn spawn_kubectl(k: &Kairon, args: &[&str]) -> Spawned {
    let child = Command::new("kubectl")
        .env("KUBECONFIG", &k.kubeconfig)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl");
    Spawned(child)
}

/// What an exited background command printed: (stdout, stderr).
fn printed(child: &mut Child) -> (String, String) {
    use std::io::Read;
    let (mut out, mut err) = (String::new(), String::new());
    if let Some(mut o) = child.stdout.take() {
        o.read_to_string(&mut out).expect("stdout");
    }
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).expect("stderr");
    }
    (out, err)
}

/// The lines a spawned command prints, as they come.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let out = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Reads lines until one satisfies `pred`; returns everything read so far.
fn read_until(rx: &mpsc::Receiver<String>, what: &str, pred: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = Instant::now() + STEP;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let done = pred(&line);
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(e) => panic!("waiting for {what}: {e:?}; read so far:\n{}", seen.join("\n")),
        }
    }
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn spec_fixtures_still_match_the_spec_documents() {
    for (fixture, doc, shown, _) in &SPEC_EXAMPLES {
        let text = std::fs::read_to_string(fixtures().join(fixture)).unwrap();
        let spec = std::fs::read_to_string(kairon_e2e::spec_dir().join(doc))
            .unwrap_or_else(|e| panic!("reading {doc} from {}: {e}", kairon_e2e::spec_dir().display()));
        let body = shown_body(&text, shown);
        assert!(body.len() >= 3, "{fixture}: too little YAML to compare: {body:?}");
        assert!(
            contains_lines(&normalised_lines(&spec), &body),
            "{fixture} has drifted from {doc}: these lines are no longer in it, in this order:\n{}",
            body.join("\n")
        );
    }
}

#[test]
fn spec_examples_apply_list_and_read_back() {
    let k = Kairon::start_with(&["--no-runtime"]).unwrap();
    for (fixture, _, _, name) in &SPEC_EXAMPLES {
        let path = fixtures().join(fixture);
        let file = path.to_str().unwrap();
        let out = k.kubectl_ok(&["apply", "-f", file]);
        assert_eq!(out.trim(), format!("machine.kairon.zyvor.dev/{name} created"));
        // Applying the same file again changes nothing: defaults filled in by the server do
        // not count as drift.
        let again = k.kubectl_ok(&["apply", "-f", file]);
        assert_eq!(again.trim(), format!("machine.kairon.zyvor.dev/{name} unchanged"));

        // Everything the example says is what the server keeps.
        let want: Value = serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let got: Value = serde_json::from_str(&k.kubectl_ok(&["get", "-f", file, "-o", "json"])).unwrap();
        assert_subset(&want["spec"], &got["spec"], "spec");
        assert_subset(&want["metadata"], &got["metadata"], "metadata");
        assert_eq!(got["apiVersion"], want["apiVersion"], "read in the version the file names");
    }

    let list = k.kubectl_ok(&["get", "machines", "-A"]);
    let header: Vec<&str> = list.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAMESPACE", "NAME", "PHASE", "POWER", "NODE", "AGE"], "{list}");
    for (_, _, _, name) in &SPEC_EXAMPLES {
        assert!(
            list.lines().any(|l| l.split_whitespace().take(2).eq(["default", *name])),
            "{name} in default:\n{list}"
        );
    }
    assert_eq!(list.lines().count(), 1 + SPEC_EXAMPLES.len(), "{list}");

    // The v1alpha1 example reads back, in the preferred version and in the one it was written in.
    let yaml = k.kubectl_ok(&["get", "machine", "agent-run", "-o", "yaml"]);
    let v: Value = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(v["apiVersion"], "kairon.zyvor.dev/v1");
    assert_eq!(v["metadata"]["name"], "agent-run");
    assert_eq!(v["spec"]["ttlSeconds"], 900);
    assert_eq!(v["spec"]["sandbox"], json!({}));
    assert_eq!(v["spec"]["guestAgent"]["console"], true);
    assert_eq!(v["spec"]["image"]["path"], "/images/sandbox.qcow2");
    assert_eq!(v["spec"]["resources"], json!({"cpu": "1", "memory": "512Mi"}));
    let old: Value =
        serde_yaml::from_str(&k.kubectl_ok(&["get", "machines.v1alpha1.kairon.zyvor.dev", "agent-run", "-o", "yaml"]))
            .unwrap();
    assert_eq!(old["apiVersion"], "kairon.zyvor.dev/v1alpha1");
    assert_eq!(old["spec"], v["spec"]);

    let template: Value =
        serde_json::from_str(&k.kubectl_ok(&["get", "machine", "agent-template", "-o", "json"])).unwrap();
    assert_eq!(template["spec"]["sandbox"]["templateName"], "alpine-agent");
    assert!(template["spec"].get("image").is_none(), "a template sandbox needs no image: {template}");
}

const POOL: &str = r#"
apiVersion: kairon.zyvor.dev/v1
kind: MachinePool
metadata: {name: agents, namespace: agents}
spec:
  replicas: 20
  warmPowerState: Paused
  warmupSeconds: 45
  template:
    spec:
      image: {path: /var/lib/fluxvm/images/kairon-hw.qcow2}
      lifecycle: {idleTimeoutSeconds: 600}
---
apiVersion: kairon.zyvor.dev/v1
kind: MachinePool
metadata: {name: running, namespace: agents}
spec:
  replicas: 2
  template:
    spec:
      image: {path: /var/lib/fluxvm/images/kairon-hw.qcow2}
---
apiVersion: kairon.zyvor.dev/v1
kind: MachineClaim
metadata: {name: job-42, namespace: agents}
spec:
  poolName: agents
  ttlSeconds: 3600
"#;

#[tokio::test]
async fn pools_and_claims_show_their_printer_columns() {
    let k = Kairon::start_with(&["--no-runtime"]).unwrap();
    let out = k.kubectl_stdin(&["apply", "-f", "-"], POOL);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).lines().collect::<Vec<_>>(),
        [
            "machinepool.kairon.zyvor.dev/agents created",
            "machinepool.kairon.zyvor.dev/running created",
            "machineclaim.kairon.zyvor.dev/job-42 created"
        ]
    );

    let pools = k.kubectl_ok(&["get", "machinepools", "-n", "agents"]);
    let header: Vec<&str> = pools.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "REPLICAS", "WARM", "CLAIMED", "WARM-STATE", "AGE"], "{pools}");
    assert_eq!(cell(&pools, "agents", "WARM-STATE"), "Paused", "{pools}");
    assert_eq!(cell(&pools, "agents", "REPLICAS"), "20", "{pools}");
    assert_eq!(cell(&pools, "agents", "WARM"), "", "no status yet: {pools}");
    // The default warm state is filled in, so it shows too.
    assert_eq!(cell(&pools, "running", "WARM-STATE"), "Running", "{pools}");
    // The short name and -A.
    let all = k.kubectl_ok(&["get", "mpool", "-A"]);
    assert!(all.lines().next().unwrap().contains("WARM-STATE"), "{all}");
    assert_eq!(cell(&all, "agents", "NAME"), "agents", "{all}");

    let claims = k.kubectl_ok(&["get", "machineclaims", "-n", "agents"]);
    let header: Vec<&str> = claims.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "POOL", "PHASE", "MACHINE", "LAUNCH", "ACTIVE", "SUSPENDED", "VCPU-S", "AGE"],
        "{claims}"
    );
    assert_eq!(cell(&claims, "job-42", "POOL"), "agents");
    assert_eq!(cell(&claims, "job-42", "ACTIVE"), "", "{claims}");

    // What the controller writes as the claim accrues usage.
    let api: Api<MachineClaim> = Api::namespaced(k.client().await.unwrap(), "agents");
    api.patch_status(
        "job-42",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Bound", "machineName": "agents-7x2kq", "launchType": "Cold", "waitSeconds": 2.5,
            "usage": {"activeSeconds": 1234, "suspendedSeconds": 56, "vcpuSeconds": 2468.5, "memoryGiBSeconds": 2468.0}
        }})),
    )
    .await
    .unwrap();
    let claims = k.kubectl_ok(&["get", "machineclaims", "-n", "agents"]);
    for (column, want) in [
        ("PHASE", "Bound"),
        ("MACHINE", "agents-7x2kq"),
        ("LAUNCH", "Cold"),
        ("ACTIVE", "1234"),
        ("SUSPENDED", "56"),
        ("VCPU-S", "2468.5"),
    ] {
        assert_eq!(cell(&claims, "job-42", column), want, "{column} in:\n{claims}");
    }
    // A later accrual shows too, through the watch kubectl's -w uses as well as a plain get.
    api.patch_status(
        "job-42",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"usage": {"activeSeconds": 1264, "vcpuSeconds": 2528.5}}})),
    )
    .await
    .unwrap();
    let claims = k.kubectl_ok(&["get", "mclaim", "job-42", "-n", "agents"]);
    assert_eq!(cell(&claims, "job-42", "ACTIVE"), "1264", "{claims}");
    assert_eq!(cell(&claims, "job-42", "SUSPENDED"), "56", "{claims}");
    assert_eq!(cell(&claims, "job-42", "VCPU-S"), "2528.5", "{claims}");
}

#[tokio::test]
async fn describe_machine_shows_spec_and_recorded_events() {
    let k = Kairon::start_with(&["--no-runtime"]).unwrap();
    let fixture = fixtures().join("agent-sandboxes-lifecycle.yaml");
    k.kubectl_ok(&["apply", "-f", fixture.to_str().unwrap()]);

    let client = k.client().await.unwrap();
    let machines: Api<Machine> = Api::namespaced(client.clone(), "default");
    let m = machines.get("agent-42").await.unwrap();
    let recorder = Recorder::new(
        client,
        Reporter { controller: "kairon-controller".into(), instance: Some("kairon-controller-e2e".into()) },
    );
    let idle = Event {
        type_: EventType::Normal,
        reason: "IdleSuspended".into(),
        note: Some("idle for 10m0s: paused".into()),
        action: "Pause".into(),
        secondary: None,
    };
    let reference = m.object_ref(&());
    recorder.publish(&idle, &reference).await.unwrap();
    // The same event again within minutes: the Recorder merge-patches it into a series.
    recorder.publish(&idle, &reference).await.unwrap();
    let warning = Event {
        type_: EventType::Warning,
        reason: "WakeTimeout".into(),
        note: Some("not Running within 60s of a console connection".into()),
        action: "Wake".into(),
        secondary: None,
    };
    recorder.publish(&warning, &reference).await.unwrap();

    let out = k.kubectl_ok(&["describe", "machine", "agent-42"]);
    let flat = squash(&out);
    for want in [
        "Name: agent-42",
        "Namespace: default",
        "Labels: kairon.zyvor.dev/sandbox=true",
        "API Version: kairon.zyvor.dev/v1",
        "Kind: Machine",
        "Path: /var/lib/fluxvm/images/kairon-hw.qcow2",
        "Cpu: 2",
        "Memory: 2Gi",
        "Idle Action: Pause",
        "Idle CPU Millicores: 50",
        "Idle Timeout Seconds: 600",
        "Max Lifetime Seconds: 86400",
        "Wake On Connect: true",
        "Wake Timeout Seconds: 60",
    ] {
        assert!(flat.contains(want), "{want:?} in:\n{out}");
    }
    let events = out.split("\nEvents:").nth(1).unwrap_or_else(|| panic!("an Events section in:\n{out}"));
    assert!(!events.contains("<none>"), "{out}");
    let rows: Vec<&str> = events.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(squash(rows[0]), "Type Reason Age From Message", "{out}");
    let idle_row = rows.iter().find(|r| r.contains("IdleSuspended")).unwrap_or_else(|| panic!("{out}"));
    assert!(squash(idle_row).starts_with("Normal IdleSuspended"), "{idle_row}");
    assert!(idle_row.contains("(x2 over"), "a series of two: {idle_row}");
    assert!(idle_row.contains("kairon-controller"), "{idle_row}");
    assert!(idle_row.trim_end().ends_with("idle for 10m0s: paused"), "{idle_row}");
    let warn_row = rows.iter().find(|r| r.contains("WakeTimeout")).unwrap_or_else(|| panic!("{out}"));
    assert!(squash(warn_row).starts_with("Warning WakeTimeout"), "{warn_row}");
    assert!(warn_row.trim_end().ends_with("not Running within 60s of a console connection"), "{warn_row}");

    // kubectl get events prints the columns Kubernetes prints, in both API versions.
    for resource in ["events", "events.v1.events.k8s.io"] {
        let table = k.kubectl_ok(&["get", resource]);
        assert_eq!(squash(table.lines().next().unwrap()), "LAST SEEN TYPE REASON OBJECT MESSAGE", "{table}");
        let row = table.lines().find(|l| l.contains("IdleSuspended")).unwrap_or_else(|| panic!("{table}"));
        assert!(squash(row).ends_with("Normal IdleSuspended machine/agent-42 idle for 10m0s: paused"), "{row}");
        let wide = k.kubectl_ok(&["get", resource, "-o", "wide"]);
        let idle = |l: &str| l.contains("IdleSuspended");
        assert_eq!(cell_where(&wide, idle, "COUNT"), "2", "{wide}");
        assert_eq!(cell_where(&wide, idle, "SOURCE"), "kairon-controller, kairon-controller-e2e", "{wide}");
        assert!(cell_where(&wide, idle, "NAME").starts_with("agent-42."), "{wide}");
    }
    let table = k.kubectl_ok(&["events", "--for", "machine/agent-42"]);
    assert!(table.contains("IdleSuspended") && table.contains("WakeTimeout"), "{table}");

    // A core Event patched through kubectl keeps what it says (it is stored as events.k8s.io).
    let names = k.kubectl_ok(&["get", "events", "-o", "name"]);
    assert_eq!(names.lines().count(), 2, "{names}");
    for name in names.lines() {
        k.kubectl_ok(&["annotate", name, "reviewed=yes"]);
    }
    let out = k.kubectl_ok(&["describe", "machine", "agent-42"]);
    assert!(out.contains("idle for 10m0s: paused") && out.contains("(x2 over"), "{out}");
    let reviewed =
        k.kubectl_ok(&["get", "events.events.k8s.io", "-o", "jsonpath={.items[*].metadata.annotations.reviewed}"]);
    assert_eq!(reviewed, "yes yes");

    // The events are about that object (by uid), not about whatever has its name later.
    k.kubectl_ok(&["delete", "machine", "agent-42"]);
    k.kubectl_ok(&["apply", "-f", fixture.to_str().unwrap()]);
    let out = k.kubectl_ok(&["describe", "machine", "agent-42"]);
    assert!(squash(&out).contains("Events: <none>"), "{out}");
}

#[test]
fn delete_waits_for_the_finalizer() {
    let k = Kairon::start_with(&["--no-runtime"]).unwrap();
    let manifest = r#"
apiVersion: kairon.zyvor.dev/v1
kind: Machine
metadata:
  name: guarded
  finalizers: [kairon.zyvor.dev/machine]
spec:
  image: {path: /var/lib/fluxvm/images/kairon-hw.qcow2}
"#;
    let out = k.kubectl_stdin(&["apply", "-f", "-"], manifest);
    assert!(out.status.success(), "{}", stderr(&out));

    // `kubectl delete` waits for the object to go; the finalizer holds it.
    let mut del = spawn_kubectl(&k, &["delete", "machine", "guarded"]);
    let ts = wait_for_sync("kubectl delete to set a deletionTimestamp", STEP, Duration::from_millis(200), || {
        let ts = k.kubectl_ok(&["get", "machine", "guarded", "-o", "jsonpath={.metadata.deletionTimestamp}"]);
        if ts.is_empty() { Err(ts) } else { Ok(ts) }
    });
    assert!(ts.parse::<k8s_openapi::jiff::Timestamp>().is_ok(), "a deletionTimestamp: {ts:?}");
    hold_sync(Duration::from_secs(2), "kubectl delete must go on waiting while the finalizer holds the Machine");
    assert!(del.try_wait().unwrap().is_none(), "kubectl delete returned while the finalizer was still there");
    let fins = k.kubectl_ok(&["get", "machine", "guarded", "-o", "jsonpath={.metadata.finalizers}"]);
    assert_eq!(fins, r#"["kairon.zyvor.dev/machine"]"#);
    // Still shown by get while it waits.
    let list = k.kubectl_ok(&["get", "machines"]);
    assert_eq!(cell(&list, "guarded", "NAME"), "guarded");
    // A finalizer cannot be added to an object being deleted.
    let add = k.kubectl(&[
        "patch",
        "machine",
        "guarded",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":["kairon.zyvor.dev/machine","other.example/x"]}}"#,
    ]);
    assert!(!add.status.success(), "adding a finalizer while deleting must fail");
    assert!(stderr(&add).contains("being deleted"), "{}", stderr(&add));
    assert!(del.try_wait().unwrap().is_none(), "kubectl delete is still waiting");

    k.kubectl_ok(&["patch", "machine", "guarded", "--type", "merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
    // (On a timeout, dropping `del` kills it.)
    let status =
        wait_for_sync("kubectl delete to return once the finalizer went", STEP, Duration::from_millis(100), || {
            del.try_wait().expect("try_wait").ok_or("kubectl delete still running")
        });
    let (out, err) = printed(&mut del);
    assert!(status.success(), "kubectl delete: {out}{err}");
    assert_eq!(out.trim(), "machine.kairon.zyvor.dev \"guarded\" deleted");

    let gone = k.kubectl(&["get", "machine", "guarded"]);
    assert!(!gone.status.success());
    assert!(stderr(&gone).contains("machines.kairon.zyvor.dev \"guarded\" not found"), "{}", stderr(&gone));
    assert_eq!(k.kubectl_ok(&["get", "machines", "-o", "name"]), "");
}

#[test]
fn get_watch_sees_later_changes() {
    let k = Kairon::start_with(&["--no-runtime"]).unwrap();
    let fixture = fixtures().join("agent-sandboxes-lifecycle.yaml");
    k.kubectl_ok(&["apply", "-f", fixture.to_str().unwrap()]);

    let mut watch = spawn_kubectl(&k, &["get", "machines", "-w"]);
    let rx = lines_of(&mut watch);
    let first = read_until(&rx, "the initial listing", |l| l.starts_with("agent-42"));
    assert_eq!(first[0].split_whitespace().collect::<Vec<_>>(), ["NAME", "PHASE", "POWER", "NODE", "AGE"], "{first:?}");

    k.kubectl_ok(&["patch", "machine", "agent-42", "--type", "merge", "-p", r#"{"spec":{"powerState":"Paused"}}"#]);
    let seen = read_until(&rx, "agent-42 Paused", |l| l.starts_with("agent-42") && l.contains("Paused"));
    assert_eq!(squash(seen.last().unwrap()).split(' ').take(2).collect::<Vec<_>>(), ["agent-42", "Paused"]);

    // A new object shows up too.
    let other = std::fs::read_to_string(&fixture).unwrap().replace("name: agent-42", "name: agent-43");
    let out = k.kubectl_stdin(&["apply", "-f", "-"], &other);
    assert!(out.status.success(), "{}", stderr(&out));
    read_until(&rx, "agent-43", |l| l.starts_with("agent-43"));

    assert!(watch.try_wait().unwrap().is_none(), "the watch is still open");
    watch.kill().unwrap();
    watch.wait().unwrap();

    // With the event types, a label change arrives as MODIFIED.
    let mut watch = spawn_kubectl(&k, &["get", "machines", "-w", "--output-watch-events", "-L", "team"]);
    let rx = lines_of(&mut watch);
    read_until(&rx, "the initial listing", |l| l.starts_with("ADDED") && l.contains("agent-43"));
    k.kubectl_ok(&["label", "machine", "agent-43", "team=blue"]);
    let seen = read_until(&rx, "MODIFIED agent-43", |l| l.starts_with("MODIFIED") && l.contains("agent-43"));
    assert!(seen.last().unwrap().trim_end().ends_with("blue"), "{seen:?}");
    watch.kill().unwrap();
    watch.wait().unwrap();
}

const SSA_MANIFEST: &str = r#"
apiVersion: kairon.zyvor.dev/v1
kind: Machine
metadata:
  name: shared
  labels: {team: a}
spec:
  image: {path: /var/lib/fluxvm/images/kairon-hw.qcow2}
  ttlSeconds: 600
"#;

#[test]
fn server_side_apply_and_field_manager_conflicts() {
    let k = Kairon::start_with(&["--no-runtime"]).unwrap();
    let out = k.kubectl_stdin(&["apply", "--server-side", "-f", "-"], SSA_MANIFEST);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "machine.kairon.zyvor.dev/shared serverside-applied");
    let managers = k.kubectl_ok(&["get", "machine", "shared", "-o", "jsonpath={.metadata.managedFields[*].manager}"]);
    assert_eq!(managers, "kubectl");
    // Re-applying the same manifest is a no-op for the owner.
    let out = k.kubectl_stdin(&["apply", "--server-side", "-f", "-"], SSA_MANIFEST);
    assert!(out.status.success(), "{}", stderr(&out));

    // Another manager setting the same field to another value: a conflict naming the owner.
    let theirs = SSA_MANIFEST.replace("ttlSeconds: 600", "ttlSeconds: 900").replace("  labels: {team: a}\n", "");
    let out = k.kubectl_stdin(&["apply", "--server-side", "--field-manager", "other", "-f", "-"], &theirs);
    assert!(!out.status.success(), "a conflict: {}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("Apply failed with 1 conflict"), "{err}");
    assert!(err.contains(r#"conflict with "kubectl": .spec.ttlSeconds"#), "{err}");
    assert!(err.contains("--force-conflicts"), "kubectl explains how to resolve it: {err}");
    let ttl = k.kubectl_ok(&["get", "machine", "shared", "-o", "jsonpath={.spec.ttlSeconds}"]);
    assert_eq!(ttl, "600", "nothing changed");

    // Agreeing on the value is fine: the field is co-owned.
    let same = SSA_MANIFEST.replace("  labels: {team: a}\n", "");
    let out = k.kubectl_stdin(&["apply", "--server-side", "--field-manager", "agreeing", "-f", "-"], &same);
    assert!(out.status.success(), "{}", stderr(&out));

    // Forced: the other manager takes the field.
    let out = k.kubectl_stdin(
        &["apply", "--server-side", "--field-manager", "other", "--force-conflicts", "-f", "-"],
        &theirs,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let ttl = k.kubectl_ok(&["get", "machine", "shared", "-o", "jsonpath={.spec.ttlSeconds}"]);
    assert_eq!(ttl, "900");
    let managed: Value =
        serde_json::from_str(&k.kubectl_ok(&["get", "machine", "shared", "-o", "jsonpath={.metadata.managedFields}"]))
            .unwrap();
    let owns_ttl = |manager: &str| {
        managed
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["manager"] == manager)
            .is_some_and(|f| f["fieldsV1"]["f:spec"].get("f:ttlSeconds").is_some())
    };
    assert!(owns_ttl("other") && !owns_ttl("kubectl") && !owns_ttl("agreeing"), "{managed}");

    // The first manager's next apply now conflicts in turn.
    let out = k.kubectl_stdin(&["apply", "--server-side", "-f", "-"], SSA_MANIFEST);
    assert!(!out.status.success());
    assert!(stderr(&out).contains(r#"conflict with "other": .spec.ttlSeconds"#), "{}", stderr(&out));

    // A dry run goes through the same checks and stores nothing.
    let out = k.kubectl_stdin(
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--dry-run=server",
            "-o",
            "jsonpath={.spec.ttlSeconds}",
            "-f",
            "-",
        ],
        SSA_MANIFEST,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "600");
    assert_eq!(k.kubectl_ok(&["get", "machine", "shared", "-o", "jsonpath={.spec.ttlSeconds}"]), "900");
}

#[test]
fn invalid_machines_are_refused_naming_the_field() {
    let k = Kairon::start_with(&["--no-runtime"]).unwrap();
    let machine = |name: &str, lifecycle: &str| {
        format!(
            "apiVersion: kairon.zyvor.dev/v1\nkind: Machine\nmetadata: {{name: {name}}}\nspec:\n  image: {{path: /var/lib/fluxvm/images/kairon-hw.qcow2}}\n  lifecycle: {lifecycle}\n"
        )
    };
    let cases = [
        (
            "too-eager",
            "{idleTimeoutSeconds: 30}",
            r#"The Machine "too-eager" is invalid: spec.lifecycle.idleTimeoutSeconds: Invalid value: 30: must be greater than or equal to 60"#,
        ),
        (
            "sleepy",
            "{idleTimeoutSeconds: 600, idleAction: Sleep}",
            r#"The Machine "sleepy" is invalid: spec.lifecycle.idleAction: Unsupported value: "Sleep": supported values: "Pause", "Hibernate", "Halt", "Stop", "Delete""#,
        ),
    ];
    for (name, lifecycle, want) in cases {
        let manifest = machine(name, lifecycle);
        for mode in [&["apply", "-f", "-"][..], &["apply", "--server-side", "-f", "-"], &["create", "-f", "-"]] {
            let out = k.kubectl_stdin(mode, &manifest);
            assert!(!out.status.success(), "{mode:?} {name}: {}", stdout(&out));
            let err = stderr(&out);
            assert!(err.contains(want), "{mode:?}: {want:?} in {err:?}");
        }
        let get = k.kubectl(&["get", "machine", name]);
        assert!(!get.status.success(), "{name} was stored");
        assert!(stderr(&get).contains("not found"), "{}", stderr(&get));
    }
    assert_eq!(k.kubectl_ok(&["get", "machines", "-A", "-o", "name"]), "", "nothing stored");

    // Fixed, the same Machine goes in.
    let out = k.kubectl_stdin(&["apply", "-f", "-"], &machine("too-eager", "{idleTimeoutSeconds: 60}"));
    assert!(out.status.success(), "{}", stderr(&out));
    // And an update into an invalid state is refused too, leaving the stored one alone.
    let out = k.kubectl_stdin(&["apply", "-f", "-"], &machine("too-eager", "{idleTimeoutSeconds: 59}"));
    assert!(!out.status.success());
    assert!(stderr(&out).contains("spec.lifecycle.idleTimeoutSeconds: Invalid value: 59"), "{}", stderr(&out));
    let t = k.kubectl_ok(&["get", "machine", "too-eager", "-o", "jsonpath={.spec.lifecycle.idleTimeoutSeconds}"]);
    assert_eq!(t, "60");
}

#[test]
fn namespaces_in_use_are_listed_and_readable() {
    let k = Kairon::start_with(&["--no-runtime"]).unwrap();
    // Any namespace reads as Active without being created first.
    let ns = k.kubectl_ok(&["get", "ns", "agents"]);
    assert_eq!(cell(&ns, "agents", "STATUS"), "Active", "{ns}");
    let before = k.kubectl_ok(&["get", "namespaces", "-o", "name"]);
    assert_eq!(before.lines().collect::<Vec<_>>(), ["namespace/default"], "{before}");

    let fixture = fixtures().join("agent-sandboxes-lifecycle.yaml");
    let out = k.kubectl(&["apply", "-n", "agents", "-f", fixture.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // A Namespace manifest applies to the namespace that already reads as Active.
    let manifest = "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-b, labels: {team: b}}\n";
    let out = k.kubectl_stdin(&["apply", "-f", "-"], manifest);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "namespace/team-b configured");
    let out = k.kubectl_stdin(&["apply", "-f", "-"], manifest);
    assert_eq!(stdout(&out).trim(), "namespace/team-b unchanged", "{}", stderr(&out));
    assert_eq!(k.kubectl_ok(&["get", "ns", "-l", "team=b", "-o", "name"]).trim(), "namespace/team-b");

    let list = k.kubectl_ok(&["get", "namespaces"]);
    let names: Vec<&str> = list.lines().skip(1).filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(names, ["agents", "default", "team-b"], "{list}");
    for n in &names {
        assert_eq!(cell(&list, n, "STATUS"), "Active", "{list}");
    }
    let ns: Value = serde_json::from_str(&k.kubectl_ok(&["get", "ns", "agents", "-o", "json"])).unwrap();
    assert_eq!((ns["kind"].as_str(), ns["status"]["phase"].as_str()), (Some("Namespace"), Some("Active")));
    assert_eq!(ns["metadata"]["name"], "agents");
    // The Machine is there, in its namespace.
    let machines = k.kubectl_ok(&["get", "machines", "-n", "agents", "-o", "name"]);
    assert_eq!(machines.trim(), "machine.kairon.zyvor.dev/agent-42");
    let invalid = k.kubectl(&["get", "ns", "Not_A_Namespace"]);
    assert!(!invalid.status.success());
    assert!(stderr(&invalid).contains("not found"), "{}", stderr(&invalid));
}

#[test]
fn built_in_kinds_take_kubectls_strategic_merge_patches() {
    let k = Kairon::start_with(&["--no-runtime"]).unwrap();
    let lease = |holder: &str, finalizer: &str| {
        format!(
            "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: leader, namespace: kairon-system, finalizers: [{finalizer}]}}\nspec: {{holderIdentity: {holder}, leaseDurationSeconds: 15}}\n"
        )
    };
    let out = k.kubectl_stdin(&["apply", "-f", "-"], &lease("node-a", "example.com/a"));
    assert_eq!(stdout(&out).trim(), "lease.coordination.k8s.io/leader created", "{}", stderr(&out));
    // The second apply of a built-in kind is a strategic merge patch, with list directives.
    let out = k.kubectl_stdin(&["apply", "-f", "-"], &lease("node-b", "example.com/b"));
    assert_eq!(stdout(&out).trim(), "lease.coordination.k8s.io/leader configured", "{}", stderr(&out));
    let got: Value =
        serde_json::from_str(&k.kubectl_ok(&["get", "lease", "leader", "-n", "kairon-system", "-o", "json"])).unwrap();
    assert_eq!(got["spec"]["holderIdentity"], "node-b");
    assert_eq!(got["metadata"]["finalizers"], json!(["example.com/b"]), "the dropped finalizer is deleted");
    // kubectl patch defaults to a strategic merge patch too.
    k.kubectl_ok(&["patch", "lease", "leader", "-n", "kairon-system", "-p", r#"{"spec":{"leaseDurationSeconds":30}}"#]);
    let table = k.kubectl_ok(&["get", "leases", "-n", "kairon-system"]);
    assert_eq!(squash(table.lines().next().unwrap()), "NAME HOLDER AGE", "{table}");
    assert_eq!(cell(&table, "leader", "HOLDER"), "node-b", "{table}");
    let d =
        k.kubectl_ok(&["get", "lease", "leader", "-n", "kairon-system", "-o", "jsonpath={.spec.leaseDurationSeconds}"]);
    assert_eq!(d, "30");
    // A CRD takes no strategic merge patch, as in Kubernetes; kubectl says what to use.
    let fixture = fixtures().join("agent-sandboxes-lifecycle.yaml");
    k.kubectl_ok(&["apply", "-f", fixture.to_str().unwrap()]);
    let smp = k.kubectl(&["patch", "machine", "agent-42", "-p", r#"{"spec":{"ttlSeconds":60}}"#]);
    assert!(!smp.status.success());
    assert!(stderr(&smp).contains("use a merge patch (--type merge)"), "{}", stderr(&smp));

    // kubectl's typed commands send protobuf, which this server does not read: a clear 415.
    let out = k.kubectl(&["create", "namespace", "typed"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("(UnsupportedMediaType)") && stderr(&out).contains("kubectl apply -f"),
        "{}",
        stderr(&out)
    );
}
