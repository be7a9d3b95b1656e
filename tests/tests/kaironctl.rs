//! kaironctl end to end: every verb against `kairon up` with its runc runtime, configured from
//! the kubeconfig `kairon up` wrote (KUBECONFIG), as a user runs it.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use kairon_e2e::{Flags, Kairon, kairon_bin, wait_for_sync};
use serde_json::Value;

fn kaironctl_bin() -> PathBuf {
    kairon_bin().with_file_name("kaironctl")
}

struct Ctl<'a> {
    k: &'a Kairon,
    ns: &'a str,
}

impl Ctl<'_> {
    fn run(&self, args: &[&str]) -> Output {
        Command::new(kaironctl_bin())
            .env("KUBECONFIG", &self.k.kubeconfig)
            .env_remove("KAIRON_TOKEN")
            .args(["-n", self.ns])
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e} (cargo build -p kaironctl)", kaironctl_bin().display()))
    }

    /// Must succeed; stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "kaironctl {args:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Must fail with `code`; stderr.
    fn fails(&self, code: i32, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "kaironctl {args:?}: want exit {code}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&a)).expect("-o json prints JSON")
    }

    fn machine(&self, name: &str) -> Value {
        self.json(&["get", "machine", name])
    }

    /// Polls `name` with `kaironctl get` until `ok` holds; a timeout shows its status.
    fn wait_machine(&self, name: &str, what: &str, ok: impl Fn(&Value) -> bool) {
        wait_for_sync(what, Duration::from_secs(180), Duration::from_millis(300), || {
            let m = self.machine(name);
            if ok(&m) { Ok(()) } else { Err(serde_json::json!({"metadata": m["metadata"], "status": m["status"]})) }
        });
    }

    fn wait_phase(&self, name: &str, phase: &str) {
        self.wait_machine(name, &format!("{name} {phase}"), |m| m["status"]["phase"] == phase);
    }
}

fn header(table: &str) -> Vec<String> {
    table.lines().next().unwrap_or_default().split_whitespace().map(String::from).collect()
}

#[test]
fn kaironctl_drives_machines_with_every_verb() {
    let k = Kairon::start().expect("kairon up");
    let ctl = Ctl { k: &k, ns: "ctl" };

    // Bad flags and values are usage errors (exit 2) naming the flag.
    assert!(ctl.fails(2, &["create", "x", "--bogus"]).contains("--bogus"));
    assert!(
        ctl.fails(2, &["create", "x", "--sandbox-template", "busybox", "--idle-timeout", "10q"])
            .contains("--idle-timeout")
    );
    assert!(ctl.fails(2, &["get", "widgets"]).contains("widgets"));
    assert!(ctl.fails(2, &["create", "x", "--idle-action", "Sleep"]).contains("--idle-action"));
    // The server's refusal: exit 1 with its reason and message.
    let err = ctl.fails(1, &["create", "bad", "--sandbox-template", "busybox", "--idle-timeout", "5s"]);
    assert!(err.contains("idleTimeoutSeconds"), "{err}");

    // create with the lifecycle flags, as the spec writes it.
    let out = ctl.ok(&[
        "create",
        "agent-42",
        "--sandbox-template",
        "busybox",
        "--sandbox",
        "--idle-timeout",
        "10m",
        "--idle-action",
        "Pause",
        "--max-lifetime",
        "24h",
        "--wake-on-connect",
    ]);
    assert_eq!(out.trim(), "machine agent-42 created");
    let m = ctl.machine("agent-42");
    assert_eq!(m["spec"]["lifecycle"]["idleTimeoutSeconds"], 600);
    assert_eq!(m["spec"]["lifecycle"]["maxLifetimeSeconds"], 86400);
    assert_eq!(m["spec"]["lifecycle"]["idleAction"], "Pause");
    assert_eq!(m["spec"]["lifecycle"]["wakeOnConnect"], true);
    // --dry-run stores nothing.
    assert!(ctl.ok(&["create", "ghost", "--sandbox-template", "busybox", "--dry-run"]).contains("dry run"));
    assert!(ctl.fails(1, &["get", "machine", "ghost"]).contains("NotFound"));

    let table = ctl.ok(&["get", "machines"]);
    assert_eq!(header(&table), ["NAME", "PHASE", "POWER", "NODE", "IP", "AGE"]);
    assert!(table.lines().any(|l| l.starts_with("agent-42 ")), "{table}");
    let yaml: Value = serde_yaml::from_str(&ctl.ok(&["get", "machines", "-o", "yaml"])).expect("-o yaml");
    assert_eq!(yaml["items"][0]["metadata"]["name"], "agent-42");
    ctl.wait_phase("agent-42", "Running");

    // describe: the Lifecycle line.
    let d = ctl.ok(&["describe", "machine", "agent-42"]);
    let line = d.lines().find(|l| l.starts_with("Lifecycle:")).unwrap_or_else(|| panic!("no Lifecycle line: {d}"));
    // Created this second or a few ago: 24h0m or 23h59m… left.
    assert!(line.contains(" of 10m0s, expires in 23h") || line.contains(" of 10m0s, expires in 24h0m"), "{line}");
    assert!(line.contains("idle "), "{line}");

    // exec passes output and the exit code through.
    let out = ctl.run(&["exec", "agent-42", "--", "sh", "-c", "echo hi; echo oops >&2; exit 3"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "oops\n");

    // cp both ways, bytes intact.
    let dir = tempfile::tempdir().expect("tempdir");
    let local = dir.path().join("up.bin");
    let data: Vec<u8> = (0..20000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&local, &data).expect("write");
    ctl.ok(&["cp", local.to_str().expect("path"), "agent-42:/tmp/up.bin"]);
    let back = dir.path().join("down.bin");
    ctl.ok(&["cp", "agent-42:/tmp/up.bin", back.to_str().expect("path")]);
    assert_eq!(std::fs::read(&back).expect("read"), data);
    assert!(ctl.fails(1, &["cp", "agent-42:/no/such", back.to_str().expect("path")]).contains("NotFound"));

    // Power verbs: --dry-run stores nothing, then for real.
    for verb in ["pause", "stop", "restart", "start"] {
        let out = ctl.ok(&[verb, "agent-42", "--dry-run"]);
        assert!(out.contains("dry run"), "{verb}: {out}");
        assert!(ctl.machine("agent-42")["spec"]["powerState"].is_null(), "{verb} --dry-run stored a change");
    }
    assert!(ctl.ok(&["pause", "agent-42"]).contains("paused"));
    ctl.wait_phase("agent-42", "Paused");
    assert!(ctl.ok(&["resume", "agent-42"]).contains("resumed"));
    ctl.wait_phase("agent-42", "Running");
    ctl.ok(&["stop", "agent-42"]);
    ctl.wait_phase("agent-42", "Stopped");
    ctl.ok(&["start", "agent-42", "--paused"]);
    assert_eq!(ctl.machine("agent-42")["spec"]["powerState"], "Paused");
    ctl.wait_phase("agent-42", "Paused");
    ctl.ok(&["start", "agent-42"]);
    ctl.wait_phase("agent-42", "Running");
    ctl.ok(&["restart", "agent-42"]);
    ctl.wait_phase("agent-42", "Running");
    // Halt and hibernate need a VM; migrate needs a second node: clear refusals, also in dry runs.
    assert!(ctl.fails(1, &["halt", "agent-42", "--dry-run"]).to_lowercase().contains("halt"));
    assert!(ctl.fails(1, &["migrate", "agent-42", "--dry-run"]).contains("NoTargetNode"));
    // Freeze needs a VM's guest agent: refused on a sandbox with the reason.
    assert!(ctl.fails(1, &["freeze", "agent-42", "--unfreeze-timeout", "5m"]).contains("FreezeUnsupported"));
    ctl.ok(&["unfreeze", "agent-42"]);

    // fork and create clone branch it.
    ctl.ok(&["exec", "agent-42", "--", "sh", "-c", "echo parent > /tmp/branch"]);
    assert!(ctl.ok(&["fork", "agent-42", "agent-42-fork"]).contains("forked from agent-42"));
    assert!(ctl.ok(&["create", "clone", "agent-42", "agent-42-clone"]).contains("cloned from agent-42"));
    for copy in ["agent-42-fork", "agent-42-clone"] {
        ctl.wait_phase(copy, "Running");
        assert_eq!(ctl.ok(&["exec", copy, "--", "cat", "/tmp/branch"]), "parent\n", "{copy}");
    }

    // Node-scoped verbs.
    let t = ctl.ok(&["get", "templates", "--node", "local"]);
    assert_eq!(header(&t), ["NAME", "STATE", "IMAGE", "BYTES", "AGE"]);
    assert!(t.lines().any(|l| l.starts_with("busybox ")), "{t}");
    let sb = ctl.ok(&["get", "sandboxes", "--node", "local"]);
    assert_eq!(header(&sb)[..4], ["ID", "NAME", "BACKEND", "STATE"]);
    assert!(sb.contains("runc"), "{sb}");
    assert_eq!(header(&ctl.ok(&["get", "pools", "--node", "local"])), ["NAME", "TEMPLATE", "SIZE", "MEMBERS", "AGE"]);
    assert!(ctl.fails(1, &["get", "templates"]).contains("--node"));
    let built = ctl.ok(&["build", "template", "tpl", "--node", "local", "--image", "127.0.0.1:9/none:latest"]);
    assert!(built.contains("template tpl building on local"), "{built}");
    assert!(ctl.json(&["get", "templates", "tpl", "--node", "local"])["name"] == "tpl");
    let eg = ctl.run(&["egress-check", "example.com", "--node", "local"]);
    let eg_out = String::from_utf8_lossy(&eg.stdout);
    assert!(eg_out.starts_with("ALLOW example.com") || eg_out.starts_with("DENY example.com"), "{eg_out}");
    assert_eq!(eg.status.success(), eg_out.starts_with("ALLOW"), "the exit code says the answer");
    let eg_json = ctl.json(&["egress-check", "example.com", "--node", "local"]);
    assert!(eg_json["allow"].is_boolean() && eg_json["reason"].is_string(), "{eg_json}");

    // usage, completion.
    assert_eq!(header(&ctl.ok(&["usage"]))[1..], ["ACTIVE", "SUSPENDED", "VCPU-S", "MEM-GIB-S"]);
    assert!(ctl.ok(&["completion", "bash"]).contains("kaironctl"));

    // delete --dry-run keeps it; delete --wait removes it.
    ctl.ok(&["delete", "machine", "agent-42-clone", "--dry-run"]);
    ctl.machine("agent-42-clone");
    for m in ["agent-42-clone", "agent-42-fork", "agent-42"] {
        assert!(ctl.ok(&["delete", "machine", m, "--wait"]).contains("deleted"));
        assert!(ctl.fails(1, &["get", "machine", m]).contains("NotFound"));
    }
}

#[test]
fn kaironctl_logs_follow_a_background_process() {
    let k = Kairon::start().expect("kairon up");
    let ctl = Ctl { k: &k, ns: "ctl-logs" };
    ctl.ok(&["create", "worker", "--sandbox-template", "busybox", "--sandbox"]);
    ctl.wait_phase("worker", "Running");
    // Start a process through the REST API (kaironctl has no `start-process`); logs read it.
    let url = format!("{}/api/v1/machines/ctl-logs/worker/processes", k.url);
    let ca = k.data_dir.path().join("tls/ca.crt");
    let out = Command::new("curl")
        .args(["-sS", "--cacert"])
        .arg(&ca)
        .args(["-H", &format!("Authorization: Bearer {}", k.admin_token), "-H", "Content-Type: application/json"])
        .args(["-d", r#"{"command":["sh","-c","echo one; sleep 1; echo two; echo err >&2"]}"#, &url])
        .output()
        .expect("curl");
    let p: Value = serde_json::from_slice(&out.stdout).expect("process JSON");
    let pid = p["id"].as_str().expect("process id").to_string();
    assert_eq!(ctl.ok(&["logs", "worker", &pid, "--follow"]), "one\ntwo\n");
    assert_eq!(ctl.ok(&["logs", "worker", &pid]), "one\ntwo\n");
    assert_eq!(ctl.ok(&["logs", "worker", &pid, "--stderr"]), "err\n");
    assert!(ctl.fails(1, &["logs", "worker", "nope"]).contains("NotFound"));
}

#[test]
fn kaironctl_pools_and_claims_with_their_columns() {
    let k = Kairon::start().expect("kairon up");
    let ctl = Ctl { k: &k, ns: "ctl-pools" };
    assert!(
        ctl.ok(&[
            "create",
            "machinepool",
            "agents",
            "--sandbox-template",
            "busybox",
            "--sandbox",
            "--replicas",
            "1",
            "--warm-power-state",
            "Paused",
            "--warmup",
            "2s",
            "--dry-run"
        ])
        .contains("dry run")
    );
    assert!(ctl.fails(1, &["get", "machinepool", "agents"]).contains("NotFound"));
    ctl.ok(&[
        "create",
        "machinepool",
        "agents",
        "--sandbox-template",
        "busybox",
        "--sandbox",
        "--replicas",
        "1",
        "--warm-power-state",
        "Paused",
        "--warmup",
        "2s",
    ]);
    let p = ctl.json(&["get", "machinepool", "agents"]);
    assert_eq!(p["spec"]["warmPowerState"], "Paused");
    assert_eq!(p["spec"]["warmupSeconds"], 2);
    let t = ctl.ok(&["get", "machinepools"]);
    assert_eq!(header(&t), ["NAME", "REPLICAS", "WARM", "CLAIMED", "WARM-STATE", "AGE"]);
    let row: Vec<&str> = t.lines().nth(1).expect("a row").split_whitespace().collect();
    assert_eq!((row[0], row[1], row[4]), ("agents", "1", "Paused"), "{t}");

    let out = ctl.ok(&["claim", "agents", "--ttl", "1h", "--name", "job-42"]);
    assert!(out.starts_with("machineclaim job-42 claimed "), "{out}");
    let c = ctl.json(&["get", "machineclaim", "job-42"]);
    assert_eq!(c["spec"]["ttlSeconds"], 3600);
    assert_eq!(c["status"]["phase"], "Bound");
    let machine = c["status"]["machineName"].as_str().expect("bound machine").to_string();
    let t = ctl.ok(&["get", "machineclaims"]);
    assert_eq!(header(&t), ["NAME", "POOL", "PHASE", "MACHINE", "LAUNCH", "ACTIVE", "SUSPENDED", "VCPU-S", "AGE"]);
    // Warm or Cold depends on whether the member had warmed up (2 s) when the claim came.
    let launch = c["status"]["launchType"].as_str().expect("a bound claim's launch type");
    assert!(["Warm", "Cold"].contains(&launch), "{c}");
    assert!(
        t.lines()
            .any(|l| l.starts_with("job-42 ") && l.contains(&machine) && l.contains("Bound") && l.contains(launch)),
        "{t}"
    );
    let d = ctl.ok(&["describe", "machineclaim", "job-42"]);
    for want in [
        "Pool:         agents",
        "Phase:        Bound",
        "Usage:",
        "Active:",
        "Suspended:",
        "vCPU-s:",
        "TTL:          1h0m",
    ] {
        assert!(d.contains(want), "describe machineclaim lacks {want:?}:\n{d}");
    }
    assert!(ctl.ok(&["claim", "nosuchpool", "--no-wait", "--name", "orphan"]).contains("orphan"));
    ctl.ok(&["delete", "machineclaim", "orphan"]);
    ctl.ok(&["delete", "machineclaim", "job-42", "--wait"]);
    ctl.ok(&["delete", "machinepool", "agents", "--wait"]);
    assert!(ctl.fails(1, &["get", "machinepool", "agents"]).contains("NotFound"));
}

/// What a kubectl user reaches for: short names (m, mp, mc), `wait --for`, labels with `-l`,
/// `--show-labels`, `-o name|wide`, `describe machinepool`, and `delete -l` / `--all`.
#[test]
fn kaironctl_speaks_kubectl_short_names_wait_labels_and_bulk_delete() {
    let k = Kairon::start().expect("kairon up");
    let ctl = Ctl { k: &k, ns: "ctl-kubectl" };
    for (name, team) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
        let label = format!("team={team}");
        let mut args = vec!["create", name, "--sandbox-template", "busybox", "--label", &label, "-L", "tier=web"];
        // a1 takes exec (its guest agent on).
        if name == "a1" {
            args.push("--sandbox");
        }
        let out = ctl.ok(&args);
        assert_eq!(out.trim(), format!("machine {name} created"));
    }
    assert!(
        ctl.fails(2, &["create", "x", "--sandbox-template", "busybox", "--label", "novalue"]).contains("KEY=VALUE")
    );

    // wait: a phase, a condition, each by the server's watch; a timeout and a missing object
    // are refusals (exit 1); a --for that is neither is a usage error (exit 2).
    assert_eq!(
        ctl.ok(&["wait", "m", "a1", "--for", "phase=Running", "--timeout", "3m"]).trim(),
        "machine/a1 phase Running"
    );
    ctl.ok(&["wait", "machine", "a2", "--for", "condition=Ready", "--timeout", "3m"]);
    ctl.ok(&["wait", "machines", "b1", "--for", "phase=Running", "--timeout", "3m"]);
    let err = ctl.fails(1, &["wait", "m", "a1", "--for", "phase=Hibernated", "--timeout", "2s"]);
    assert!(err.contains("timed out after 2s waiting for machine a1"), "{err}");
    assert!(ctl.fails(1, &["wait", "m", "nope", "--for", "phase=Running", "--timeout", "5s"]).contains("NotFound"));
    assert!(ctl.fails(2, &["wait", "m", "a1", "--for", "ready"]).contains("phase=PHASE"));
    let v: Value = serde_json::from_str(&ctl.ok(&["wait", "m", "a1", "--for", "phase=Running", "-o", "json"])).unwrap();
    assert_eq!(v["metadata"]["labels"]["team"], "a");

    // exec with its environment and user.
    let out = ctl.ok(&[
        "exec",
        "a1",
        "-e",
        "GREETING=hi there",
        "--env",
        "EMPTY=",
        "--",
        "sh",
        "-c",
        "echo \"$GREETING|$EMPTY|\"; id -u",
    ]);
    assert_eq!(out, "hi there||\n0\n");
    assert_eq!(ctl.ok(&["exec", "a1", "--user", "1000", "--", "id", "-u"]), "1000\n");
    assert!(ctl.fails(2, &["exec", "a1", "--env", "NOEQUALS", "--", "true"]).contains("KEY=VALUE"));

    // Lists by label, as names kubectl takes back, with labels and wide columns.
    assert_eq!(ctl.ok(&["get", "m", "-l", "team=a", "-o", "name"]), "machine/a1\nmachine/a2\n");
    assert_eq!(ctl.ok(&["get", "machine", "b1", "-o", "name"]), "machine/b1\n");
    let t = ctl.ok(&["get", "machines", "--show-labels", "-l", "team=b"]);
    assert_eq!(header(&t), ["NAME", "PHASE", "POWER", "NODE", "IP", "AGE", "LABELS"]);
    assert!(t.lines().nth(1).is_some_and(|l| l.starts_with("b1 ") && l.ends_with("team=b,tier=web")), "{t}");
    let t = ctl.ok(&["get", "m", "-o", "wide"]);
    assert_eq!(header(&t), ["NAME", "PHASE", "POWER", "NODE", "IP", "AGE", "SOURCE", "RUNTIME-ID", "POOL", "CLAIM"]);
    assert_eq!(t.lines().filter(|l| l.contains("template:busybox")).count(), 3, "{t}");

    // A pool by its short name; describe lists its members.
    ctl.ok(&["create", "machinepool", "web", "--sandbox-template", "busybox", "--replicas", "1", "-L", "team=c"]);
    let member = wait_for_sync("the pool's member", Duration::from_secs(180), Duration::from_millis(300), || {
        let names = ctl.ok(&["get", "m", "-l", "team=c", "-o", "name"]);
        names.lines().next().map(|n| n.trim_start_matches("machine/").to_string()).ok_or(names)
    });
    assert_eq!(ctl.ok(&["get", "mp", "-o", "name"]), "machinepool/web\n");
    let t = ctl.ok(&["get", "mp", "-o", "wide"]);
    assert_eq!(header(&t), ["NAME", "REPLICAS", "WARM", "CLAIMED", "WARM-STATE", "AGE", "SOURCE", "READY"]);
    let d = ctl.ok(&["describe", "mp", "web"]);
    let field = |key: &str| d.lines().find_map(|l| l.strip_prefix(key)).map(str::trim).unwrap_or_default().to_string();
    assert_eq!(
        (field("Name:"), field("Source:"), field("Replicas:")),
        ("web".into(), "template:busybox".into(), "1".into()),
        "{d}"
    );
    assert!(d.contains("Members:") && d.lines().any(|l| l.trim_start().starts_with(&member)), "{d}");
    assert!(ctl.ok(&["get", "mc"]).starts_with("NAME"));

    // delete by label, then --all; neither a name, -l nor --all is a usage error.
    assert!(ctl.fails(2, &["delete", "m"]).contains("--all"));
    assert!(ctl.fails(2, &["delete", "m", "a1", "--all"]).contains("--all"));
    assert!(ctl.ok(&["delete", "m", "-l", "team=a", "--dry-run"]).contains("dry run"));
    assert_eq!(ctl.ok(&["get", "m", "-l", "team=a", "-o", "name"]).lines().count(), 2);
    let out = ctl.ok(&["delete", "machines", "-l", "team=a", "--wait"]);
    assert_eq!(out, "machine a1 deleted\nmachine a2 deleted\n");
    assert_eq!(ctl.ok(&["get", "m", "-l", "team=a", "-o", "name"]), "");
    ctl.ok(&["delete", "mp", "--all", "--wait"]);
    ctl.ok(&["wait", "m", &member, "--for", "delete", "--timeout", "2m"]);
    assert_eq!(ctl.ok(&["delete", "m", "--all", "-o", "name"]), "machine/b1\n");
    assert_eq!(ctl.ok(&["wait", "m", "b1", "--for", "delete", "--timeout", "2m"]).trim(), "machine/b1 deleted");
    assert_eq!(ctl.ok(&["get", "m", "-o", "name"]), "");
}

/// The spec's CLI example verbatim on a real QEMU VM, then the verbs a VM adds: freeze and
/// unfreeze (the node confirms), halt and start, hibernate and resume.
#[test]
fn kaironctl_runs_the_spec_example_on_a_vm() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let images = kairon_runtime::vm::image::images_dir(&std::env::temp_dir().join("kairon-images"));
    let image = rt.block_on(kairon_runtime::vm::image::ensure_default_image(&images, &Default::default())).unwrap();
    let image = image.to_string_lossy().to_string();
    let k = Kairon::start_with(&Flags::fast()).expect("kairon up");
    let ctl = Ctl { k: &k, ns: "default" };
    ctl.ok(&[
        "create",
        "agent-42",
        "--image",
        &image,
        "--idle-timeout",
        "10m",
        "--idle-action",
        "Pause",
        "--max-lifetime",
        "24h",
        "--wake-on-connect",
    ]);
    ctl.wait_phase("agent-42", "Running");
    let d = ctl.ok(&["describe", "machine", "agent-42"]);
    assert!(d.lines().any(|l| l.starts_with("Lifecycle:") && l.contains("of 10m0s")), "{d}");

    ctl.ok(&["freeze", "agent-42", "--unfreeze-timeout", "5m"]);
    ctl.wait_machine("agent-42", "the node to confirm the freeze", |m| {
        m["metadata"]["annotations"].get("kairon.zyvor.dev/fs-frozen").is_some()
    });
    ctl.ok(&["unfreeze", "agent-42"]);
    ctl.wait_machine("agent-42", "the node to thaw", |m| {
        m["metadata"]["annotations"].get("kairon.zyvor.dev/fs-frozen").is_none()
    });
    for (verb, phase) in [("halt", "Halted"), ("start", "Running"), ("hibernate", "Hibernated"), ("resume", "Running")]
    {
        ctl.ok(&[verb, "agent-42"]);
        ctl.wait_phase("agent-42", phase);
    }
    ctl.ok(&["delete", "machine", "agent-42"]);
}
