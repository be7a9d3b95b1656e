//! The full life of a sandbox through the runtime's HTTP API, on real runc.

use std::path::Path;
use std::time::Duration;

use kairon_model::SandboxSpec;
use kairon_runtime::api::{
    CreateTemplateRequest, CreateVmRequest, ExecRequest, PowerAction, ProcessState, TemplateState, VmState,
};
use kairon_runtime::engine::{Runtime, TEMPLATE_BUILD_LABEL};
use kairon_runtime_api::{ClientError, RuntimeClient};

mod common;

use common::TOKEN;

async fn serve(state_dir: &Path, node: &str) -> (Runtime, RuntimeClient) {
    serve_with(state_dir, node, Default::default()).await
}

async fn serve_with(
    state_dir: &Path,
    node: &str,
    registry: kairon_runtime::oci::RegistryConfig,
) -> (Runtime, RuntimeClient) {
    let (rt, c, _) = common::serve(state_dir, node, registry).await;
    (rt, c)
}

fn sandbox(name: &str) -> CreateVmRequest {
    CreateVmRequest {
        name: name.into(),
        sandbox: Some(SandboxSpec { template_name: Some("busybox".into()) }),
        ..Default::default()
    }
}

fn sh(cmd: &str) -> ExecRequest {
    ExecRequest { command: vec!["sh".into(), "-c".into(), cmd.into()], ..Default::default() }
}

fn api_status(e: ClientError) -> (u16, String) {
    match e {
        ClientError::Api { status, message, .. } => (status, message),
        other => panic!("expected an API error, got {other}"),
    }
}

/// Pushes an image built from busybox to a real registry on loopback, for the runtime to pull.
async fn seed_registry(registry: &common::Registry) -> u64 {
    let src = tempfile::tempdir().unwrap();
    let config = kairon_runtime::oci::build_busybox_rootfs(src.path()).unwrap();
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    builder.append_dir_all(".", src.path()).unwrap();
    let layer = common::layer(builder.into_inner().unwrap(), common::TAR_GZIP);
    let size = layer.blob.len() as u64;
    let run = serde_json::json!({"Cmd": config.cmd, "Env": config.env, "WorkingDir": "/root"});
    common::Pusher::new(registry).image("agents/busybox", "1.35", &[layer], "amd64", run).await;
    size
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandbox_lives_and_leaves_nothing_behind() {
    let registry = common::Registry::start();
    let layer_bytes = seed_registry(&registry).await;
    let dir = tempfile::tempdir().unwrap();
    let insecure =
        kairon_runtime::oci::RegistryConfig { insecure_hosts: vec![registry.host.clone()], ..Default::default() };
    let (rt, c) = serve_with(dir.path(), "life", insecure).await;

    // A template pulled from the registry, with its progress visible while it builds.
    let image_ref = format!("{}/agents/busybox:1.35", registry.host);
    let building = c.create_template(&"agent-busybox".try_into().unwrap(), &image_ref).await.unwrap();
    assert_eq!(building.state, TemplateState::Building);
    let mut tries = 0;
    let template = loop {
        let t = c.template(&"agent-busybox".try_into().unwrap()).await.unwrap();
        if t.state != TemplateState::Building {
            break t;
        }
        tries += 1;
        assert!(tries < 600, "template build did not finish");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(template.state, TemplateState::Ready, "{template:?}");
    assert_eq!((template.bytes_done, template.bytes_total), (layer_bytes, Some(layer_bytes)));
    assert!(template.digest.as_deref().is_some_and(|d| d.starts_with("sha256:")));
    assert_eq!(template.config.working_dir.as_deref(), Some("/root"));
    let (code, _) = api_status(c.create_template(&"agent-busybox".try_into().unwrap(), &image_ref).await.unwrap_err());
    assert_eq!(code, 409, "a template name is taken once");

    let req = CreateVmRequest {
        sandbox: Some(SandboxSpec { template_name: Some("agent-busybox".into()) }),
        ..sandbox("kairon-default-life")
    };
    let vm = c.create(&req).await.unwrap();
    assert_eq!(c.exec(&vm.id, &sh("pwd")).await.unwrap().stdout, "/root\n", "the image's working dir");
    assert_eq!((vm.state, vm.backend.as_str()), (VmState::Running, "runc"));
    let pid = vm.pid.unwrap();

    // Exec goes through the agent that is the sandbox's init, not through runc.
    let runc_calls = || async { c.stats(&vm.id).await.unwrap().runc_invocations.unwrap() };
    let before = runc_calls().await;
    let out = c.exec(&vm.id, &sh("echo hello; uname -s; echo oops >&2; exit 3")).await.unwrap();
    assert_eq!((out.exit_code, out.stdout.as_str(), out.stderr.as_str()), (3, "hello\nLinux\n", "oops\n"));
    assert_eq!(c.exec(&vm.id, &sh("cat /proc/1/comm")).await.unwrap().stdout, "kairon-agent\n");
    // Started at a lower priority (a start yields the CPU), the sandbox then runs at the normal
    // one: its init and what it runs (field 19 of stat is the niceness).
    let nice = c.exec(&vm.id, &sh("cut -d' ' -f19 /proc/1/stat /proc/self/stat")).await.unwrap();
    assert_eq!(nice.stdout, "0\n0\n", "{nice:?}");
    // The agent's listening socket is never inherited: a command holds its stdio and nothing else.
    let fds = c.exec(&vm.id, &sh("ls /proc/self/fd")).await.unwrap();
    assert_eq!(fds.stdout.split_whitespace().filter(|fd| fd.parse::<u32>().is_ok_and(|n| n > 2)).count(), 1, "{fds:?}");
    assert_eq!(runc_calls().await, before, "no runc process for an exec");
    let missing =
        c.exec(&vm.id, &ExecRequest { command: vec!["no-such-program".into()], ..Default::default() }).await.unwrap();
    assert_eq!(missing.exit_code, 127, "{missing:?}");
    let killed = c.exec(&vm.id, &sh("kill -9 $$")).await.unwrap();
    assert_eq!(killed.exit_code, 137, "a signal is reported as a shell does: {killed:?}");
    let fed = c.exec(&vm.id, &ExecRequest { stdin: Some("fed in".into()), ..sh("cat") }).await.unwrap();
    assert_eq!(fed.stdout, "fed in");
    let env = c
        .exec(&vm.id, &ExecRequest { command: vec!["pwd".into()], cwd: Some("/tmp".into()), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(env.stdout, "/tmp\n");
    let started = std::time::Instant::now();
    let timed = c
        .exec(&vm.id, &ExecRequest { timeout_seconds: Some(1), ..sh("echo partial; sleep 30 & sleep 30") })
        .await
        .unwrap();
    assert!(timed.timed_out && started.elapsed() < Duration::from_secs(10), "{timed:?}");
    assert_eq!(timed.stdout, "partial\n", "the output so far is kept");
    // The timeout ended what the command started, the background sleep too.
    let left = c.exec(&vm.id, &sh("ps -o comm | grep -c sleep || true")).await.unwrap();
    assert_eq!(left.stdout.trim(), "0", "{left:?}");

    // Files: written from outside, seen inside, and back.
    c.write_file(&vm.id, "/work/task.py", b"print('hi')\n".to_vec(), 0o600).await.unwrap();
    // An upload as large as the API accepts (past axum's 2 MiB default) reaches the sandbox.
    let big: Vec<u8> = (0..(48u32 << 20)).map(|i| (i % 251) as u8).collect();
    c.write_file(&vm.id, "/work/big.bin", big.clone(), 0o600).await.unwrap();
    assert_eq!(c.read_file(&vm.id, "/work/big.bin").await.unwrap(), big);
    c.delete_file(&vm.id, "/work/big.bin").await.unwrap();
    assert_eq!(c.exec(&vm.id, &sh("cat /work/task.py")).await.unwrap().stdout, "print('hi')\n");
    c.exec(&vm.id, &sh("echo from-inside > /work/out.txt")).await.unwrap();
    assert_eq!(c.read_file(&vm.id, "/work/out.txt").await.unwrap(), b"from-inside\n");
    let names: Vec<_> = c.list_files(&vm.id, "/work").await.unwrap().into_iter().map(|f| f.name).collect();
    assert_eq!(names, ["out.txt", "task.py"]);
    c.delete_file(&vm.id, "/work/out.txt").await.unwrap();
    assert_eq!(api_status(c.read_file(&vm.id, "/work/out.txt").await.unwrap_err()).0, 404);

    // A background process: logs and exit code.
    let p = c.start_process(&vm.id, &sh("echo started; sleep 0.3; echo done; exit 7")).await.unwrap();
    let done = c.wait_process(&vm.id, &p.id, Duration::from_secs(10)).await.unwrap();
    assert_eq!((done.state, done.exit_code), (ProcessState::Exited, Some(7)));
    assert_eq!(c.process_logs(&vm.id, &p.id).await.unwrap().0, "started\ndone\n");

    // A busy process, then pause: CPU time stops growing; resume: it grows again.
    let busy = c.start_process(&vm.id, &sh("while :; do :; done")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = c.stats(&vm.id).await.unwrap();
    assert!(before.cpu_time_nanos > 0 && before.process_count >= 3, "{before:?}");
    let paused = c.power(&vm.id, PowerAction::Pause, false).await.unwrap();
    assert_eq!(paused.state, VmState::Paused);
    let a = c.stats(&vm.id).await.unwrap().cpu_time_nanos;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let b = c.stats(&vm.id).await.unwrap().cpu_time_nanos;
    assert_eq!(a, b, "a paused sandbox uses no CPU");
    let (code, msg) = api_status(c.exec(&vm.id, &sh("true")).await.unwrap_err());
    assert_eq!(code, 409);
    assert!(msg.contains("paused"), "{msg}");
    c.power(&vm.id, PowerAction::Resume, false).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(c.stats(&vm.id).await.unwrap().cpu_time_nanos > b);
    c.kill_process(&vm.id, &busy.id, "TERM").await.unwrap();
    let killed = c.wait_process(&vm.id, &busy.id, Duration::from_secs(10)).await.unwrap();
    assert_eq!(killed.state, ProcessState::Exited);
    // KILL reaches the command itself, not only what records its exit: nothing is left running.
    let sleeper = c.start_process(&vm.id, &sh("exec sleep 4711")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.kill_process(&vm.id, &sleeper.id, "KILL").await.unwrap();
    let killed = c.wait_process(&vm.id, &sleeper.id, Duration::from_secs(10)).await.unwrap();
    assert_eq!(killed.state, ProcessState::Exited);
    let ps = c.exec(&vm.id, &sh("ps")).await.unwrap().stdout;
    assert!(!ps.contains("sleep 4711"), "the killed command still runs:\n{ps}");

    // Power for a Machine generation: once generation 5 is applied, a request for 4 (a stale
    // reconcile racing a direct thaw) is refused and changes nothing; 5 again and 6 apply.
    let at = c.power_at(&vm.id, PowerAction::Resume, false, Some(5)).await.unwrap();
    assert_eq!((at.state, at.power_generation), (VmState::Running, Some(5)));
    let (code, msg) = api_status(c.power_at(&vm.id, PowerAction::Pause, false, Some(4)).await.unwrap_err());
    assert_eq!(code, 409, "{msg}");
    assert!(msg.contains("stale"), "{msg}");
    assert_eq!(c.get(&vm.id).await.unwrap().state, VmState::Running, "the stale pause did nothing");
    c.power_at(&vm.id, PowerAction::Resume, false, Some(5)).await.unwrap();
    let paused = c.power_at(&vm.id, PowerAction::Pause, false, Some(6)).await.unwrap();
    assert_eq!((paused.state, paused.power_generation), (VmState::Paused, Some(6)));
    c.power(&vm.id, PowerAction::Resume, false).await.unwrap();

    // The HTTP proxy route reaches a server the sandbox started (dialled in its own netns).
    c.write_file(&vm.id, "/www/index.html", b"hello from the guest\n".to_vec(), 0o644).await.unwrap();
    c.start_process(&vm.id, &sh("httpd -f -p 8080 -h /www")).await.unwrap();
    let http = reqwest::Client::new();
    let url = format!("{}/v1/vms/{}/proxy/8080/index.html", c.endpoint(), vm.id);
    let mut body = String::new();
    for _ in 0..100 {
        let resp = http.get(&url).bearer_auth(TOKEN).send().await.unwrap();
        if resp.status() == 200 {
            body = resp.text().await.unwrap();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(body, "hello from the guest\n");
    let closed =
        http.get(format!("{}/v1/vms/{}/proxy/9/", c.endpoint(), vm.id)).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(closed.status(), 502);
    assert_eq!(http.get(&url).send().await.unwrap().status(), 401, "the runtime API needs its token");

    // Fork: a new sandbox with a copy of the files (no processes: live is false).
    c.exec(&vm.id, &sh("echo parent-state > /root/state")).await.unwrap();
    let fork = c.fork(&vm.id, "kairon-default-life-fork").await.unwrap();
    assert!(!fork.live);
    assert_eq!(c.exec(&fork.vm.id, &sh("cat /root/state")).await.unwrap().stdout, "parent-state\n");
    c.exec(&fork.vm.id, &sh("echo child > /root/state")).await.unwrap();
    assert_eq!(c.exec(&vm.id, &sh("cat /root/state")).await.unwrap().stdout, "parent-state\n", "copies diverge");
    c.delete(&fork.vm.id).await.unwrap();

    // Snapshot: the root filesystem exported to a tar file on the node.
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("life.tar");
    let snap = c.snapshot(&vm.id, &target.to_string_lossy()).await.unwrap();
    assert!(snap.bytes > 0 && target.exists());
    let listing = std::process::Command::new("tar").arg("-tf").arg(&target).output().unwrap();
    assert!(String::from_utf8_lossy(&listing.stdout).lines().any(|l| l.trim_start_matches("./") == "root/state"));
    assert_eq!(api_status(c.snapshot(&vm.id, "relative.tar").await.unwrap_err()).0, 422);

    // Hibernate and Halt are refused with a reason.
    let (code, msg) = api_status(c.power(&vm.id, PowerAction::Hibernate, false).await.unwrap_err());
    assert_eq!(code, 501);
    assert!(msg.contains("cannot hibernate"), "{msg}");

    // Delete: no process, mount, cgroup, runc state or bundle left.
    c.delete(&vm.id).await.unwrap();
    assert!(c.get(&vm.id).await.unwrap_err().is_not_found());
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap().contains(") Z")
    );
    assert!(!rt.instance_dir(&vm.id).exists(), "bundle removed");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(vm.id.as_str()), "no mount left");
    assert!(!Path::new(&format!("/sys/fs/cgroup/memory/kairon-life/{}", vm.id)).exists(), "no cgroup left");
    assert!(!dir.path().join("runc").join(vm.id.as_str()).exists(), "no runc state left");
}

/// Follows a template build to its end.
async fn built(c: &RuntimeClient, name: &str) -> kairon_runtime::api::Template {
    let name = name.try_into().unwrap();
    for _ in 0..1200 {
        let t = c.template(&name).await.unwrap();
        if t.state != TemplateState::Building {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("template build did not finish");
}

#[tokio::test(flavor = "multi_thread")]
async fn build_steps_become_the_templates_top_layer() {
    let registry = common::Registry::start();
    seed_registry(&registry).await;
    let dir = tempfile::tempdir().unwrap();
    let (rt, c) = serve_with(dir.path(), "steps", registry.insecure()).await;
    let image_ref = format!("{}/agents/busybox:1.35", registry.host);

    // A tenant's reference to the registry the node's config names is pulled as the admin's.
    let req = CreateTemplateRequest {
        name: "with-steps".into(),
        image_ref: image_ref.clone(),
        steps: vec![
            "mkdir -p /opt/app && echo built > /opt/app/built.txt && chown 1000:1000 /opt/app/built.txt".into(),
            "rm /etc/group && chmod 0750 /root && test -n \"$PATH\"".into(),
        ],
        tenant_source: true,
    };
    let building = c.build_template(&req).await.unwrap();
    assert_eq!((building.state, building.steps.len()), (TemplateState::Building, 2));
    let template = built(&c, "with-steps").await;
    assert_eq!((template.state, template.steps_done), (TemplateState::Ready, 2), "{template:?}");
    assert_eq!(template.config.working_dir.as_deref(), Some("/root"), "the image's config is kept");
    assert!(
        c.list().await.unwrap().iter().all(|vm| !vm.spec.labels.contains_key(TEMPLATE_BUILD_LABEL)),
        "the build's sandbox is gone"
    );

    // Every sandbox of it has the steps' changes: a new file with its owner, a removed file (a
    // whiteout in the layer), a changed mode.
    let req = CreateVmRequest {
        sandbox: Some(SandboxSpec { template_name: Some("with-steps".into()) }),
        ..sandbox("kairon-default-stepped")
    };
    let vm = c.create(&req).await.unwrap();
    let seen = c
        .exec(&vm.id, &sh("cat /opt/app/built.txt; stat -c %u /opt/app/built.txt; stat -c %a /root; test -e /etc/group || echo no-group; cat /etc/passwd | head -1"))
        .await
        .unwrap();
    assert_eq!(seen.stdout, "built\n1000\n750\nno-group\nroot:x:0:0:root:/root:/bin/sh\n", "{seen:?}");
    c.delete(&vm.id).await.unwrap();

    // A failing step fails the build with its output, and says which step it was.
    let req = CreateTemplateRequest {
        name: "broken".into(),
        image_ref: image_ref.clone(),
        steps: vec!["echo first".into(), "echo the-reason >&2; exit 7".into(), "echo never".into()],
        tenant_source: false,
    };
    c.build_template(&req).await.unwrap();
    let failed = built(&c, "broken").await;
    assert_eq!((failed.state, failed.steps_done), (TemplateState::Failed, 1), "{failed:?}");
    let message = failed.message.unwrap_or_default();
    assert!(
        message.contains("build step 2 of 3") && message.contains("code 7") && message.contains("the-reason"),
        "{message}"
    );
    let (code, message) = api_status(
        c.build_template(&CreateTemplateRequest { steps: vec![" ".into()], ..req.clone() }).await.unwrap_err(),
    );
    assert_eq!(code, 422, "{message}");
    assert!(message.contains("build step 1 is empty"), "{message}");

    // The same registry by a name the node's config does not give: a tenant's pull goes through
    // the egress guard, and loopback is in the deny set whatever the name.
    let port = registry.host.rsplit_once(':').unwrap().1;
    let req = CreateTemplateRequest {
        name: "sneaky".into(),
        image_ref: format!("localhost:{port}/agents/busybox:1.35"),
        steps: vec![],
        tenant_source: true,
    };
    c.build_template(&req).await.unwrap();
    let refused = built(&c, "sneaky").await;
    assert_eq!(refused.state, TemplateState::Failed);
    let message = refused.message.unwrap_or_default();
    assert!(message.contains("resolves to 127.0.0.1") && message.contains("egress_deny_cidrs"), "{message}");
    assert!(
        std::fs::read_dir(dir.path().join("instances")).map(|d| d.count()).unwrap_or(0) == 0,
        "no instance left behind"
    );
    drop(rt);
}

#[tokio::test(flavor = "multi_thread")]
async fn paths_cannot_leave_the_sandbox_and_the_hardening_holds() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, c) = serve(dir.path(), "hard").await;
    let vm = c.create(&sandbox("kairon-default-hard")).await.unwrap();

    for path in ["../../etc/shadow", "/../../../etc/passwd"] {
        let (code, msg) = api_status(c.read_file(&vm.id, path).await.unwrap_err());
        assert_eq!(code, 422, "{path}: {msg}");
        assert!(msg.contains("leaves the sandbox"), "{msg}");
    }
    c.exec(&vm.id, &sh("ln -s ../../../../../etc/shadow /evil && mkdir -p /d && ln -s ../../../.. /d/up"))
        .await
        .unwrap();
    for path in ["/evil", "/d/up/etc/shadow"] {
        let (code, msg) = api_status(c.read_file(&vm.id, path).await.unwrap_err());
        assert_eq!(code, 422, "{path}: {msg}");
        assert!(msg.contains("outside the sandbox"), "{msg}");
        let (code, _) = api_status(c.write_file(&vm.id, path, b"x".to_vec(), 0o644).await.unwrap_err());
        assert_eq!(code, 422);
    }
    assert!(std::fs::read("/etc/shadow").map(|s| !s.starts_with(b"x")).unwrap_or(true));

    // From inside: each hardening item fails.
    let tries = [
        ("mount", "mkdir -p /mnt/t && mount -t tmpfs none /mnt/t"),
        ("raw socket", "ping -c 1 -W 1 127.0.0.1"),
        ("write /proc/sys", "echo 1 > /proc/sys/kernel/sysrq"),
        ("device node", "mknod /tmp/sda b 8 0"),
    ];
    for (what, cmd) in tries {
        let r = c.exec(&vm.id, &sh(cmd)).await.unwrap();
        assert_ne!(r.exit_code, 0, "{what} must fail inside a sandbox: {r:?}");
    }
    // A setuid-root binary run by an unprivileged user does not grant root (no_new_privs).
    // The kernel ignores setuid bits for every process in the sandbox:
    c.exec(&vm.id, &sh("cp /bin/busybox /tmp/id && chmod 4755 /tmp/id")).await.unwrap();
    let r = c
        .exec(
            &vm.id,
            &ExecRequest { user: Some("1000:1000".into()), ..sh("/tmp/id -u; grep NoNewPrivs /proc/self/status") },
        )
        .await
        .unwrap();
    assert_eq!(r.stdout, "1000\nNoNewPrivs:\t1\n", "{r:?}");
    c.delete(&vm.id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn clear_errors_for_what_this_node_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, c) = serve(dir.path(), "errs").await;
    let missing = CreateVmRequest {
        sandbox: Some(SandboxSpec { template_name: Some("alpine-agent".into()) }),
        ..sandbox("kairon-default-missing")
    };
    let (code, msg) = api_status(c.create(&missing).await.unwrap_err());
    assert_eq!(code, 404);
    assert!(msg.contains("template \"alpine-agent\" does not exist on node errs"), "{msg}");
    let image = CreateVmRequest {
        sandbox: Some(SandboxSpec::default()),
        image: Some(kairon_model::ImageSource { path: "/images/sandbox.qcow2".into() }),
        ..sandbox("kairon-default-image")
    };
    // The lightweight VM track (QEMU microvm) runs it, once the image exists.
    let (code, msg) = api_status(c.create(&image).await.unwrap_err());
    assert_eq!(code, 422);
    assert!(msg.contains("\"/images/sandbox.qcow2\" does not exist on this node"), "{msg}");
    let vm = c.create(&sandbox("kairon-default-dup")).await.unwrap();
    let (code, _) = api_status(c.create(&sandbox("kairon-default-dup")).await.unwrap_err());
    assert_eq!(code, 409);
    assert_eq!(c.find_by_name("kairon-default-dup").await.unwrap().unwrap().id, vm.id);
    // What a request asks of the guest that cannot be is the caller's to fix (a 4xx), never a
    // failure of the runtime's own: a user the sandbox does not have, a name longer than a
    // path may be, a path through a file.
    let nobody = ExecRequest { user: Some(String::new()), ..sh("true") };
    let (code, msg) = api_status(c.exec(&vm.id, &nobody).await.unwrap_err());
    assert_eq!(code, 422, "{msg}");
    assert!(msg.contains("no user named \"\""), "{msg}");
    let long = format!("/{}", "a".repeat(300));
    for (code, msg) in [
        api_status(c.read_file(&vm.id, &long).await.unwrap_err()),
        api_status(c.list_files(&vm.id, &long).await.unwrap_err()),
        api_status(c.delete_file(&vm.id, &long).await.unwrap_err()),
    ] {
        assert_eq!(code, 422, "{msg}");
        assert!(msg.contains("longer than a path"), "{msg}");
    }
    let (code, msg) = api_status(c.list_files(&vm.id, "/etc/passwd/x").await.unwrap_err());
    assert_eq!(code, 404, "{msg}");
    c.delete(&vm.id).await.unwrap();
    // With no node config, every host is allowed, and the reason says why.
    let d = c.egress_check("api.example.com").await.unwrap();
    assert!(d.allow && d.reason.contains("no egress allowlist"), "{d:?}");
    assert_eq!(api_status(c.egress_check("").await.unwrap_err()).0, 422);
    let bad = RuntimeClient::new(c.endpoint(), "wrong").unwrap();
    assert_eq!(api_status(bad.list().await.unwrap_err()).0, 401);
}

/// The v1 freezer can miss a task forked while it stops the others; a sandbox whose processes
/// fork and exec without pause must still freeze every time, and stay frozen.
#[tokio::test(flavor = "multi_thread")]
async fn a_sandbox_that_keeps_forking_still_freezes_every_time() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, c) = serve(dir.path(), "fork-storm").await;
    let vm = c.create(&sandbox("kairon-default-storm")).await.unwrap();
    // Bounded, so a failing run does not leave a fork storm behind for the tests after it.
    for _ in 0..2 {
        let storm = "end=$(($(date +%s) + 120)); while [ $(date +%s) -lt $end ]; do sh -c : ; done";
        c.start_process(&vm.id, &sh(storm)).await.unwrap();
    }
    // And a server that forks a child per connection, connected to just before each pause.
    c.start_process(&vm.id, &sh("nc -ll -p 7000 -e /bin/cat")).await.unwrap();
    let pid = vm.pid.unwrap();
    let dial = || kairon_runtime::proxy::dial_in_netns(pid, 7000);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while dial().await.is_err() {
        assert!(std::time::Instant::now() < deadline, "nc never listened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for round in 0..30 {
        drop(dial().await.unwrap());
        let paused = c.power(&vm.id, PowerAction::Pause, false).await.unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(paused.state, VmState::Paused, "round {round}");
        if round % 10 == 0 {
            let a = c.stats(&vm.id).await.unwrap().cpu_time_nanos;
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert_eq!(c.stats(&vm.id).await.unwrap().cpu_time_nanos, a, "round {round}: nothing runs while paused");
        }
        c.power(&vm.id, PowerAction::Resume, false).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    c.delete(&vm.id).await.unwrap();
}
