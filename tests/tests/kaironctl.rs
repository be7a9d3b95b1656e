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
    /// kaironctl with `args`, configured as a user's is (the kubeconfig, the namespace).
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(kaironctl_bin());
        cmd.env("KUBECONFIG", &self.k.kubeconfig).env_remove("KAIRON_TOKEN").args(["-n", self.ns]).args(args);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args)
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
    // extend: the end moves a day later, and the Lifecycle line says so once it is recorded.
    assert!(ctl.ok(&["extend", "agent-42", "24h", "--dry-run"]).contains("dry run"));
    assert_eq!(ctl.machine("agent-42")["spec"]["lifecycle"]["maxLifetimeSeconds"], 86400);
    let out = ctl.ok(&["extend", "agent-42", "24h"]);
    assert!(out.starts_with("machine agent-42 now expires at "), "{out}");
    assert_eq!(ctl.machine("agent-42")["spec"]["lifecycle"]["maxLifetimeSeconds"], 2 * 86400);
    wait_for_sync(
        "the Lifecycle line to show the extension",
        Duration::from_secs(60),
        Duration::from_millis(300),
        || {
            let d = ctl.ok(&["describe", "machine", "agent-42"]);
            let line = d.lines().find(|l| l.starts_with("Lifecycle:")).unwrap_or_default().to_string();
            if line.contains("expires in 47h") || line.contains("expires in 2d0h") { Ok(()) } else { Err(line) }
        },
    );
    assert!(ctl.fails(2, &["extend", "agent-42", "soon"]).contains("soon"));

    // preview: a link's URL (its own host under localhost), listed without it, revoked by id.
    let url = ctl.ok(&["preview", "agent-42", "8000", "--ttl", "1h"]);
    assert!(url.trim().starts_with("https://") && url.trim().contains("-8000.localhost:"), "{url}");
    let listed = ctl.json(&["preview", "agent-42", "--list"]);
    let id = listed[0]["id"].as_str().expect("a listed link").to_string();
    assert!(listed[0].get("url").is_none(), "the URL is shown once: {listed}");
    assert!(ctl.ok(&["preview", "agent-42", "--list"]).lines().any(|l| l.starts_with(&id)));
    assert_eq!(ctl.ok(&["preview", "agent-42", "--revoke", &id]).trim(), format!("preview {id} revoked"));
    assert!(ctl.fails(1, &["preview", "agent-42", "--revoke", &id]).contains("NotFound"));
    assert!(ctl.fails(2, &["preview", "agent-42"]).contains("<PORT>"));

    // exec passes output and the exit code through.
    let out = ctl.run(&["exec", "agent-42", "--", "sh", "-c", "echo hi; echo oops >&2; exit 3"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "oops\n");
    // Its output comes as it is produced: `a` two seconds before `b`.
    let mut child = ctl
        .command(&["exec", "agent-42", "--", "sh", "-c", "echo a; sleep 2; echo b"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("kaironctl");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().expect("stdout")));
    let mut seen = Vec::new();
    let started = std::time::Instant::now();
    for line in lines.by_ref() {
        seen.push((line.expect("a line"), started.elapsed()));
    }
    assert!(child.wait().expect("kaironctl").success());
    assert_eq!(seen.iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    let gap = seen[1].1 - seen[0].1;
    assert!(gap >= Duration::from_millis(1500), "a came {gap:?} before b: not streamed");
    // Past its timeout the command is killed and kaironctl says so (exit 124).
    let out = ctl.run(&["exec", "agent-42", "--timeout", "2s", "--", "sh", "-c", "echo started; sleep 30"]);
    assert_eq!(out.status.code(), Some(124), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "started\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("timed out after 2 s"), "{out:?}");

    // cp both ways, bytes intact.
    let dir = tempfile::tempdir().expect("tempdir");
    let local = dir.path().join("up.bin");
    let data: Vec<u8> = (0..20000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&local, &data).expect("write");
    ctl.ok(&["cp", local.to_str().expect("path"), "agent-42:/tmp/up.bin"]);
    let back = dir.path().join("down.bin");
    ctl.ok(&["cp", "agent-42:/tmp/up.bin", back.to_str().expect("path")]);
    assert_eq!(std::fs::read(&back).expect("read"), data);
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&back).expect("stat").permissions());
    assert_eq!(mode & 0o777, 0o644, "a new local file is 644: {mode:o}");
    assert!(ctl.fails(1, &["cp", "agent-42:/no/such", back.to_str().expect("path")]).contains("NotFound"));
    assert_eq!(std::fs::read(&back).expect("read"), data, "a failed copy leaves the local file as it was");
    let names: Vec<_> = std::fs::read_dir(dir.path()).expect("ls").map(|e| e.expect("entry").file_name()).collect();
    assert_eq!(names.len(), 2, "nothing half-written is left: {names:?}");
    // cp of a directory, both ways, as a tar stream: nested files, bytes, modes and a link.
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("a/b")).expect("mkdir");
    std::fs::write(tree.join("a/b/deep.bin"), &data).expect("write");
    std::fs::write(tree.join("run.sh"), "#!/bin/sh\necho ran\n").expect("write");
    std::fs::set_permissions(tree.join("run.sh"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    std::os::unix::fs::symlink("a/b/deep.bin", tree.join("link")).expect("symlink");
    ctl.ok(&["cp", tree.to_str().expect("path"), "agent-42:/tmp/tree"]);
    let out = ctl.run(&[
        "exec",
        "agent-42",
        "--",
        "sh",
        "-c",
        "/tmp/tree/run.sh; readlink /tmp/tree/link; wc -c < /tmp/tree/a/b/deep.bin",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\na/b/deep.bin\n20000\n");
    let again = dir.path().join("again");
    ctl.ok(&["cp", "agent-42:/tmp/tree", again.to_str().expect("path")]);
    assert_eq!(std::fs::read(again.join("a/b/deep.bin")).expect("read"), data);
    assert_eq!(std::fs::read_link(again.join("link")).expect("readlink"), std::path::Path::new("a/b/deep.bin"));
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(again.join("run.sh")).expect("stat").permissions());
    assert_eq!(mode & 0o111, 0o111, "the executable bit came back: {mode:o}");

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
    // --wait follows the build to its end: here the registry does not answer.
    let failed =
        ctl.fails(1, &["build", "template", "tpl2", "--node", "local", "--image", "127.0.0.1:9/none:latest", "--wait"]);
    assert!(failed.contains("template tpl2 failed to build"), "{failed}");
    let eg = ctl.run(&["egress-check", "example.com", "--node", "local"]);
    let eg_out = String::from_utf8_lossy(&eg.stdout);
    assert!(eg_out.starts_with("ALLOW example.com") || eg_out.starts_with("DENY example.com"), "{eg_out}");
    assert_eq!(eg.status.success(), eg_out.starts_with("ALLOW"), "the exit code says the answer");
    let eg_json = ctl.json(&["egress-check", "example.com", "--node", "local"]);
    assert!(eg_json["allow"].is_boolean() && eg_json["reason"].is_string(), "{eg_json}");

    // usage, completion.
    assert_eq!(header(&ctl.ok(&["usage"]))[1..], ["ACTIVE", "SUSPENDED", "VCPU-S", "MEM-GIB-S"]);
    // Completion asks kaironctl, which knows the server's names (in the namespace given).
    let script = ctl.ok(&["completion", "bash"]);
    assert!(script.contains("COMPLETE=\"bash\"") && script.contains("complete -o nospace"), "{script}");
    // top: what it uses now, sampled on its node, as a table and as JSON.
    let top = ctl.ok(&["top", "machines"]);
    assert_eq!(header(&top), ["NAME", "CPU%", "CPUS", "MEMORY", "MEMORY%", "DISK", "NET-RX", "NET-TX", "PROCESSES"]);
    assert!(top.lines().any(|l| l.starts_with("agent-42 ")), "{top}");
    let one: Value =
        serde_json::from_str(&ctl.ok(&["top", "m", "agent-42", "--window-ms", "200", "-o", "json"])).unwrap();
    assert_eq!(one[0]["name"], "agent-42", "{one}");
    assert!(one[0]["metrics"]["memoryUsedBytes"].as_u64() > Some(0), "{one}");
    assert!(one[0]["metrics"]["windowMillis"].as_u64() >= Some(200), "{one}");
    let err = ctl.fails(1, &["top", "m", "agent-42", "--window-ms", "5"]);
    assert!(err.contains("windowMillis=5 is out of range"), "{err}");
    assert!(ctl.fails(1, &["top", "m", "no-such"]).contains("NotFound"));
    let complete = |words: &[&str]| {
        let out = Command::new(kaironctl_bin())
            .env("KUBECONFIG", &k.kubeconfig)
            .env_remove("KAIRON_TOKEN")
            .env("COMPLETE", "bash")
            .env("_CLAP_IFS", "\n")
            .env("_CLAP_COMPLETE_INDEX", (words.len() - 1).to_string())
            .env("_CLAP_COMPLETE_COMP_TYPE", "9")
            .env("_CLAP_COMPLETE_SPACE", "true")
            .arg("--")
            .args(words)
            .output()
            .expect("kaironctl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let got = complete(&["kaironctl", "-n", "ctl", "exec", "agent-"]);
    assert!(got.lines().any(|l| l.trim() == "agent-42"), "{got:?}");
    assert!(!complete(&["kaironctl", "-n", "ctl", "exec", "zzz"]).contains("agent-42"));
    assert!(!complete(&["kaironctl", "-n", "elsewhere", "exec", "agent-"]).contains("agent-42"));

    // delete --dry-run keeps it; delete --wait removes it.
    ctl.ok(&["delete", "machine", "agent-42-clone", "--dry-run"]);
    ctl.machine("agent-42-clone");
    for m in ["agent-42-clone", "agent-42-fork", "agent-42"] {
        assert!(ctl.ok(&["delete", "machine", m, "--wait"]).contains("deleted"));
        assert!(ctl.fails(1, &["get", "machine", m]).contains("NotFound"));
    }
}

/// Starts a background process through the REST API (kaironctl has no `start-process`); its id.
fn start_process(k: &Kairon, ns: &str, machine: &str, command: &[&str]) -> String {
    let url = format!("{}/api/v1/machines/{ns}/{machine}/processes", k.url);
    let ca = k.data_dir.path().join("tls/ca.crt");
    let body = serde_json::json!({ "command": command }).to_string();
    let out = Command::new("curl")
        .args(["-sS", "--cacert"])
        .arg(&ca)
        .args(["-H", &format!("Authorization: Bearer {}", k.admin_token), "-H", "Content-Type: application/json"])
        .args(["-d", &body, &url])
        .output()
        .expect("curl");
    let p: Value = serde_json::from_slice(&out.stdout).expect("process JSON");
    p["id"].as_str().unwrap_or_else(|| panic!("no process id: {p}")).to_string()
}

/// Runs kaironctl with `stdin` fed to it; its output.
fn with_stdin(ctl: &Ctl<'_>, args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = ctl
        .command(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kaironctl");
    child.stdin.take().expect("stdin").write_all(stdin).expect("writing stdin");
    child.wait_with_output().expect("kaironctl output")
}

/// A long-running kaironctl (`get -w`, `port-forward`) whose stdout is read line by line; killed
/// when dropped.
struct Running {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Running {
    fn start(ctl: &Ctl<'_>, args: &[&str]) -> Self {
        use std::io::BufRead;
        let mut child = ctl
            .command(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("kaironctl");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self { child, lines }
    }

    /// The lines printed until one satisfies `ok` (which is the last); a timeout shows them.
    fn until(&self, what: &str, ok: impl Fn(&str) -> bool) -> Vec<String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let done = ok(&line);
                    seen.push(line);
                    if done {
                        return seen;
                    }
                }
                Err(_) => panic!("no line with {what} in 120 s; printed: {seen:#?}"),
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// kaironctl in a real terminal: a tmux session of its own server, which ends with it.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(ctl: &Ctl<'_>, args: &[&str]) -> Self {
        // One tmux server per session: tests run at once in this process, and a server being
        // killed may still hold its socket.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = format!("kaironctl-test-{}-{n}", std::process::id());
        let mut line =
            format!("env KUBECONFIG={} {} -n {}", ctl.k.kubeconfig.display(), kaironctl_bin().display(), ctl.ns);
        for a in args {
            line.push_str(&format!(" '{a}'"));
        }
        line.push_str("; echo kaironctl exited $?; sleep 600");
        let ok = Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", &line])
            .status()
            .expect("tmux (apt-get install tmux)");
        assert!(ok.success(), "tmux new-session failed");
        Self { socket }
    }

    /// Types `text` and Enter.
    fn send(&self, text: &str) {
        let ok = Command::new("tmux").args(["-L", &self.socket, "send-keys", "-l", text]).status().expect("tmux");
        assert!(ok.success());
        let ok = Command::new("tmux").args(["-L", &self.socket, "send-keys", "Enter"]).status().expect("tmux");
        assert!(ok.success());
    }

    /// Presses a key by tmux's name for it (`C-c`).
    fn key(&self, key: &str) {
        let ok = Command::new("tmux").args(["-L", &self.socket, "send-keys", key]).status().expect("tmux");
        assert!(ok.success());
    }

    /// The pane's size as `stty size` prints it: "rows columns".
    fn pane_size(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "display-message", "-p", "#{pane_height} #{pane_width}"])
            .output()
            .expect("tmux");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn resize(&self, cols: u16, rows: u16) {
        let (x, y) = (cols.to_string(), rows.to_string());
        let ok = Command::new("tmux")
            .args(["-L", &self.socket, "resize-window", "-x", &x, "-y", &y])
            .status()
            .expect("tmux");
        assert!(ok.success());
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux").args(["-L", &self.socket, "capture-pane", "-p"]).output().expect("tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn until(&self, what: &str, ok: impl Fn(&str) -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "no {what} on the terminal in 60 s:\n{screen}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["-L", &self.socket, "kill-server"]).status();
    }
}

/// An HTTP/1.0 GET of `path` through 127.0.0.1:`port`: the whole answer.
fn http_get(port: u16, path: &str) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port))?;
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    conn.write_all(format!("GET {path} HTTP/1.0\r\nHost: guest\r\n\r\n").as_bytes())?;
    let mut got = Vec::new();
    conn.read_to_end(&mut got)?;
    Ok(String::from_utf8_lossy(&got).into_owned())
}

#[test]
fn kaironctl_streams_logs_stdin_console_port_forward_and_watches() {
    let k = Kairon::start().expect("kairon up");
    let ctl = Ctl { k: &k, ns: "ctl-logs" };
    ctl.ok(&["create", "worker", "--sandbox-template", "busybox", "--sandbox"]);
    ctl.wait_phase("worker", "Running");

    // logs of a background process, followed and after the fact.
    let pid = start_process(&k, "ctl-logs", "worker", &["sh", "-c", "echo one; sleep 1; echo two; echo err >&2"]);
    assert_eq!(ctl.ok(&["logs", "worker", &pid, "--follow"]), "one\ntwo\n");
    assert_eq!(ctl.ok(&["logs", "worker", &pid]), "one\ntwo\n");
    assert_eq!(ctl.ok(&["logs", "worker", &pid, "--stderr"]), "err\n");
    assert!(ctl.fails(1, &["logs", "worker", "nope"]).contains("NotFound"));
    // A pid with a `/` stays one path segment, followed or not: refused as a pid, no other route.
    for follow in [&[][..], &["--follow"][..]] {
        let err = ctl.fails(1, &[&["logs", "worker", "../../files?path=/etc/passwd"][..], follow].concat());
        assert!(err.contains("BadRequest") || err.contains("NotFound"), "{err}");
    }

    // -o jsonpath, as kubectl reads it.
    assert_eq!(ctl.ok(&["get", "machines", "-o", "jsonpath={.items[*].metadata.name}"]), "worker");
    assert_eq!(ctl.ok(&["get", "machine", "worker", "-o", "jsonpath={.status.phase}"]), "Running");
    let range = ctl.ok(&["get", "m", "-o", "jsonpath={range .items[*]}{.metadata.name}:{.status.phase}{\"\\n\"}{end}"]);
    assert_eq!(range, "worker:Running\n");
    assert!(ctl.fails(2, &["get", "m", "-o", "jsonpath={.items"]).contains("no closing"));

    // exec -i: stdin streamed in, output and the exit code back.
    let out = with_stdin(&ctl, &["exec", "-i", "worker", "--", "sh", "-c", "cat; echo err >&2; exit 5"], b"a\nb\n");
    assert_eq!(out.status.code(), Some(5), "{}", String::from_utf8_lossy(&out.stderr));
    // stdout and stderr share the stream, each in its own order.
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect();
    lines.sort();
    assert_eq!(lines, ["a", "b", "err"]);
    let refused = with_stdin(&ctl, &["exec", "-i", "nope", "--", "true"], b"");
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("NotFound"), "{refused:?}");

    // console: a shell, its exit code kaironctl's.
    let out = with_stdin(&ctl, &["console", "worker"], b"echo from-the-console\nexit 4\n");
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("from-the-console\n"), "{out:?}");

    // console from a real terminal (tmux): typed lines run, `exit` ends kaironctl with the code.
    let term = Tmux::start(&ctl, &["console", "worker"]);
    // The prompt (`/ # `) may share its line with what the shell says next ("can't access tty").
    term.until("the shell's prompt", |screen| screen.lines().any(|l| l.starts_with("/ #")));
    term.send("echo from-a-terminal");
    term.until("the output line", |screen| screen.lines().any(|l| l.trim_end() == "from-a-terminal"));
    term.send("exit 3");
    term.until("kaironctl's exit code", |screen| screen.contains("kaironctl exited 3"));
    drop(term);

    // exec -it: the command runs on a terminal of this one's size, ^C interrupts what runs on
    // it (the shell lives on), resizing this terminal resizes it, and the exit code is its own.
    let term = Tmux::start(&ctl, &["exec", "-it", "worker", "--", "sh"]);
    term.until("the shell's prompt", |screen| screen.lines().any(|l| l.starts_with("/ #")));
    term.send("tty; stty size");
    let size = term.pane_size();
    term.until("a terminal of the pane's size", |screen| {
        screen.contains("/dev/pts/") && screen.lines().any(|l| l.trim_end() == size)
    });
    term.send("sleep 300");
    std::thread::sleep(Duration::from_millis(500));
    term.key("C-c");
    term.send("echo after-$?");
    term.until("the sleep interrupted by ^C", |screen| screen.lines().any(|l| l.trim_end() == "after-130"));
    term.resize(100, 30);
    let resized = term.pane_size();
    assert_ne!(resized, size, "tmux resized the pane");
    term.send("clear; stty size");
    term.until("the new size inside", |screen| screen.lines().any(|l| l.trim_end() == resized));
    term.send("exit 7");
    term.until("kaironctl's exit code", |screen| screen.contains("kaironctl exited 7"));
    drop(term);

    // exec -i with the command's own environment variables, user and directory.
    let piped = with_stdin(
        &ctl,
        &["exec", "-i", "-e", "GREETING=hi", "-u", "1000", "--cwd", "/tmp", "worker", "--", "sh"],
        b"echo $GREETING-$(id -u)-$(pwd)\n",
    );
    assert_eq!(String::from_utf8_lossy(&piped.stdout), "hi-1000-/tmp\n", "{piped:?}");

    // port-forward carries HTTP to a server in the guest, a connection at a time.
    ctl.ok(&["exec", "worker", "--", "sh", "-c", "mkdir -p /www && echo hello-through-the-tunnel > /www/index.html"]);
    start_process(&k, "ctl-logs", "worker", &["httpd", "-f", "-p", "8080", "-h", "/www"]);
    let pf = Running::start(&ctl, &["port-forward", "worker", ":8080"]);
    let first = pf.until("Forwarding from", |l| l.starts_with("Forwarding from 127.0.0.1:"));
    let port: u16 = first[0]
        .trim_start_matches("Forwarding from 127.0.0.1:")
        .split(' ')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {first:?}"));
    wait_for_sync("httpd through port-forward", Duration::from_secs(60), Duration::from_millis(300), || {
        let got = http_get(port, "/index.html").map_err(|e| e.to_string())?;
        if got.starts_with("HTTP/1.") && got.contains("hello-through-the-tunnel") { Ok(()) } else { Err(got) }
    });
    let again = http_get(port, "/index.html").expect("a second connection");
    assert!(again.contains("hello-through-the-tunnel"), "{again}");
    drop(pf);
    // --stdio carries one connection over stdin and stdout (what ssh's ProxyCommand runs).
    let piped = with_stdin(
        &ctl,
        &["port-forward", "worker", "--stdio", "8080"],
        b"GET /index.html HTTP/1.0\r\nHost: g\r\n\r\n",
    );
    let answer = String::from_utf8_lossy(&piped.stdout);
    assert!(answer.starts_with("HTTP/1.") && answer.contains("hello-through-the-tunnel"), "{piped:?}");
    // ssh needs an SSH server: a sandbox has none, and is told what to use instead.
    assert!(ctl.fails(1, &["ssh", "worker"]).contains("exec -it worker"));
    // A closed guest port: the connection ends with nothing; a missing Machine: refused at once.
    let closed = Running::start(&ctl, &["port-forward", "worker", ":9"]);
    let first = closed.until("Forwarding from", |l| l.starts_with("Forwarding from 127.0.0.1:"));
    let port: u16 =
        first[0].trim_start_matches("Forwarding from 127.0.0.1:").split(' ').next().unwrap().parse().unwrap();
    assert_eq!(http_get(port, "/").unwrap_or_default(), "");
    drop(closed);
    assert!(ctl.fails(1, &["port-forward", "nope", "8080"]).contains("NotFound"));
    assert!(ctl.fails(1, &["port-forward", "worker", "80:0"]).contains("remote port"));

    // get -w: the objects, then each change as it happens.
    let w = Running::start(&ctl, &["get", "machines", "-w"]);
    let seen = w.until("worker Running", |l| l.starts_with("worker ") && l.contains(" Running "));
    assert_eq!(header(&seen[0]), ["NAME", "PHASE", "POWER", "NODE", "IP", "AGE"]);
    ctl.ok(&["pause", "worker"]);
    w.until("worker Paused", |l| l.starts_with("worker ") && l.contains(" Paused "));
    ctl.ok(&["resume", "worker"]);
    w.until("worker Running again", |l| l.starts_with("worker ") && l.contains(" Running   Running"));
    let j = Running::start(
        &ctl,
        &["get", "machine", "worker", "-w", "-o", "jsonpath={.metadata.name}={.spec.powerState}{\"\\n\"}"],
    );
    j.until("worker=", |l| l.starts_with("worker="));
    ctl.ok(&["pause", "worker"]);
    j.until("worker=Paused", |l| l == "worker=Paused");
    assert!(ctl.fails(1, &["get", "nodes", "-w"]).contains("get -w watches"));
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
        "-e",
        "FROM=pool",
    ]);
    let p = ctl.json(&["get", "machinepool", "agents"]);
    assert_eq!(p["spec"]["template"]["spec"]["env"], serde_json::json!({"FROM": "pool"}));
    assert_eq!(p["spec"]["warmPowerState"], "Paused");
    assert_eq!(p["spec"]["warmupSeconds"], 2);
    let t = ctl.ok(&["get", "machinepools"]);
    assert_eq!(header(&t), ["NAME", "REPLICAS", "WARM", "CLAIMED", "WARM-STATE", "AGE"]);
    let row: Vec<&str> = t.lines().nth(1).expect("a row").split_whitespace().collect();
    assert_eq!((row[0], row[1], row[4]), ("agents", "1", "Paused"), "{t}");

    let out = ctl.ok(&["claim", "agents", "--ttl", "1h", "--name", "job-42", "-e", "TASK=42"]);
    assert!(out.starts_with("machineclaim job-42 claimed "), "{out}");
    let c = ctl.json(&["get", "machineclaim", "job-42"]);
    assert_eq!(c["spec"]["ttlSeconds"], 3600);
    assert_eq!(c["status"]["phase"], "Bound");
    let machine = c["status"]["machineName"].as_str().expect("bound machine").to_string();
    // The pool's env and the claim's reach the claimant's commands.
    assert_eq!(ctl.ok(&["exec", &machine, "--", "sh", "-c", "echo $FROM $TASK"]), "pool 42\n");
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
    // On a terminal a wait shows a spinner with what it waits for and for how long, and clears
    // it when it ends; into a pipe (the timed-out wait above) nothing of it.
    assert!(!err.contains('\u{1b}') && !err.contains('⠋') && !err.contains("machine/a1"), "{err:?}");
    let term = Tmux::start(&ctl, &["wait", "m", "a1", "--for", "phase=Hibernated", "--timeout", "5s"]);
    term.until("the spinner", |screen| {
        screen.lines().any(|l| {
            // A braille frame (tmux without a UTF-8 locale draws it as `_`), then what and how long.
            l.contains(" waiting for machine/a1 (phase Hibernated) (")
                && "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏_".chars().any(|f| l.starts_with(f))
        })
    });
    term.until("the wait's end", |screen| screen.contains("kaironctl exited 1"));
    let screen = term.screen();
    assert!(!screen.contains("waiting for machine/a1"), "the spinner cleared its line:\n{screen}");
    assert!(screen.contains("timed out after 5s waiting for machine a1"), "{screen}");
    drop(term);
    // A pool's warm-up: how many members are warm, with a bar, until all are.
    let term = Tmux::start(
        &ctl,
        &["create", "machinepool", "warmers", "--sandbox-template", "busybox", "--replicas", "4", "--wait"],
    );
    term.until("the warm-up's progress", |screen| {
        screen.lines().any(|l| l.contains(" warming pool warmers: ") && l.contains(" of 4 warm ["))
    });
    term.until("the pool warm", |screen| screen.contains("machinepool warmers: 4 of 4 warm"));
    term.until("kaironctl's end", |screen| screen.contains("kaironctl exited 0"));
    drop(term);
    ctl.ok(&["delete", "mp", "warmers"]);
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

    // ssh: a real OpenSSH client to the image's dropbear, through port-forward (no port of the
    // guest exposed); the host key is remembered under HOME. A VM with its guest agent, to
    // install the key.
    ctl.ok(&["create", "vm-ssh", "--image", &image, "--sandbox"]);
    ctl.wait_phase("vm-ssh", "Running");
    let home = tempfile::tempdir().expect("tempdir");
    let key = home.path().join("id_ed25519");
    let made = Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-f"]).arg(&key).status();
    assert!(made.expect("ssh-keygen (apt-get install openssh-client)").success());
    let pubkey = format!("{}.pub", key.display());
    ctl.ok(&["exec", "vm-ssh", "--", "sh", "-c", "mkdir -p -m 700 /root/.ssh"]);
    ctl.ok(&["cp", &pubkey, "vm-ssh:/root/.ssh/authorized_keys", "--mode", "600"]);
    let key = key.to_string_lossy().to_string();
    let ssh_args =
        ["ssh", "vm-ssh", "--", "-i", &key, "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "echo", "via-ssh"];
    let out = ctl.command(&ssh_args).env("HOME", home.path()).output().expect("kaironctl ssh");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "via-ssh\n", "{}", String::from_utf8_lossy(&out.stderr));
    // Found under the Machine's alias (ssh may hash the names it writes).
    let known = home.path().join(".local/state/kairon/known_hosts");
    let found = Command::new("ssh-keygen").args(["-F", "kairon.default.vm-ssh", "-f"]).arg(&known).output().unwrap();
    assert!(found.status.success() && !found.stdout.is_empty(), "{found:?}");
    ctl.ok(&["delete", "machine", "vm-ssh"]);
}

/// kaironctl finds its server as the SDKs do: with only KAIRON_URL, KAIRON_TOKEN and
/// KAIRON_CA_FILE set it works; with a `~/.kube/config` of another cluster beside the kubeconfig
/// `kairon up` wrote, it uses Kairon's (the other's token and CA never go to Kairon's server);
/// `kaironctl config view` says where each setting came from.
#[test]
fn kaironctl_reads_kairon_settings_before_another_clusters_kubeconfig() {
    let k = Kairon::start().unwrap();
    let home = tempfile::tempdir().unwrap();
    let run = |envs: &[(&str, &str)], args: &[&str]| {
        let mut cmd = Command::new(kaironctl_bin());
        cmd.env("HOME", home.path());
        for var in
            ["KUBECONFIG", "KAIRONCTL_KUBECONFIG", "KAIRON_URL", "KAIRON_TOKEN", "KAIRON_CA_FILE", "KAIRON_NAMESPACE"]
        {
            cmd.env_remove(var);
        }
        let out = cmd.envs(envs.iter().copied()).args(args).output().expect("kaironctl");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    };
    let ca = k.data_dir.path().join("tls/ca.crt");
    let ca = ca.to_str().unwrap();
    let env = [("KAIRON_URL", k.url.as_str()), ("KAIRON_TOKEN", k.admin_token.as_str()), ("KAIRON_CA_FILE", ca)];
    let (ok, text) = run(&env, &["get", "machines"]);
    assert!(ok, "with KAIRON_* only: {text}");
    let (ok, view) = run(&[("KAIRON_NAMESPACE", "team"), env[0], env[1], env[2]], &["config", "view"]);
    assert!(ok, "{view}");
    for want in
        [["server", &k.url, "environment"], ["token", "(set)", "environment"], ["namespace", "team", "environment"]]
    {
        assert!(view.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == want), "{want:?} in\n{view}");
    }
    assert!(!view.contains(&k.admin_token), "config view never shows the token");

    // Another cluster's kubeconfig (kind, minikube) and Kairon's own: Kairon's is used.
    let other = "apiVersion: v1\nkind: Config\ncurrent-context: kind\nclusters: [{name: kind, cluster: {server: 'https://127.0.0.1:1'}}]\n\
                 users: [{name: kind, user: {token: kind-secret}}]\ncontexts: [{name: kind, context: {cluster: kind, user: kind}}]\n";
    std::fs::create_dir_all(home.path().join(".kube")).unwrap();
    std::fs::write(home.path().join(".kube/config"), other).unwrap();
    let own = home.path().join(".local/state/kairon/kubeconfig");
    std::fs::create_dir_all(own.parent().unwrap()).unwrap();
    std::fs::copy(&k.kubeconfig, &own).unwrap();
    let (ok, text) = run(&[], &["get", "machines"]);
    assert!(ok, "Kairon's kubeconfig before ~/.kube/config: {text}");
    let (_, view) = run(&[], &["config", "view"]);
    assert!(view.lines().any(|l| l.starts_with("server") && l.ends_with(own.to_str().unwrap())), "{view}");
    // A KAIRON_URL of another server takes nothing from the kubeconfig: no token, no CA.
    let (ok, text) = run(&[("KAIRON_URL", "https://127.0.0.1:1")], &["config", "view"]);
    assert!(
        ok && text.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["token", "(none)", "none"]),
        "{text}"
    );
}
