//! The guest boundary of runc sandboxes, attacked from inside with real runc: each test asserts
//! the refusal and that the host is untouched.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use kairon_model::SandboxSpec;
use kairon_runtime::api::{CreateVmRequest, ExecRequest, ExecResult, ProcessState, TemplateState, VmState};
use kairon_runtime::engine::RuntimeError;
use kairon_runtime_api::{InstanceId, RuntimeClient};

mod common;

fn sandbox(name: &str, template: &str) -> CreateVmRequest {
    CreateVmRequest {
        name: name.into(),
        sandbox: Some(SandboxSpec { template_name: Some(template.into()) }),
        ..Default::default()
    }
}

fn sh(cmd: &str) -> ExecRequest {
    ExecRequest { command: vec!["sh".into(), "-c".into(), cmd.into()], ..Default::default() }
}

async fn run(c: &RuntimeClient, id: &InstanceId, cmd: &str) -> ExecResult {
    c.exec(id, &sh(cmd)).await.unwrap()
}

async fn ok(c: &RuntimeClient, id: &InstanceId, cmd: &str) -> String {
    let r = run(c, id, cmd).await;
    assert_eq!(r.exit_code, 0, "{cmd}: {r:?}");
    r.stdout
}

/// The host's view of the sandbox's user namespace: (host base, size) from its init.
fn host_uid_of(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A static probe that makes raw syscalls by number (no libc wrapper hides the errno) and
/// prints `name result errno` per call; built with the host's gcc and uploaded into a sandbox.
const PROBE_C: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
static void show(const char *name, long r) { printf("%s %ld %s\n", name, r, r < 0 ? strerrorname_np(errno) : "-"); }
int main(void) {
    char params[120]; memset(params, 0, sizeof params);
    errno = 0; show("getpid", syscall(39));
    errno = 0; show("io_uring_setup", syscall(425, 8, params));
    errno = 0; show("unshare_newuser", syscall(272, 0x10000000L));
    errno = 0; show("keyctl", syscall(250, 0, -3L, 0));
    errno = 0; show("add_key", syscall(248, "user", "k", "v", 1, -3L));
    errno = 0; show("ptrace_traceme", syscall(101, 0, 0, 0, 0));
    errno = 0; show("bpf", syscall(321, 0, 0, 0));
    errno = 0; show("userfaultfd", syscall(323, 0));
    errno = 0; long r = syscall(56, 0x10000000L | 17, 0, 0, 0, 0); if (r == 0) _exit(0); show("clone_newuser", r);
    return 0;
}
"#;

/// The dangerous calls the probe makes, each of which must fail.
const MUST_FAIL: [&str; 8] =
    ["io_uring_setup", "unshare_newuser", "keyctl", "add_key", "ptrace_traceme", "bpf", "userfaultfd", "clone_newuser"];

fn build_probe(dir: &Path) -> Vec<u8> {
    let src = dir.join("probe.c");
    std::fs::write(&src, PROBE_C).unwrap();
    let bin = dir.join("probe");
    let out = std::process::Command::new("gcc").args(["-static", "-O1", "-o"]).arg(&bin).arg(&src).output().unwrap();
    assert!(out.status.success(), "gcc: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::read(bin).unwrap()
}

/// Uploads the probe, runs it, and checks every dangerous call failed with EPERM or ENOSYS
/// while the harmless control call worked.
async fn syscalls_are_refused(c: &RuntimeClient, id: &InstanceId, probe: &[u8]) {
    c.write_file(id, "/tmp/probe", probe.to_vec(), 0o755).await.unwrap();
    let out = ok(c, id, "/tmp/probe").await;
    eprintln!("syscall probe:\n{out}");
    let results: std::collections::BTreeMap<&str, (i64, &str)> = out
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0], (f[1].parse().unwrap(), f[2]))
        })
        .collect();
    assert!(results["getpid"].0 > 0, "{out}");
    for name in MUST_FAIL {
        let (r, errno) = results[name];
        assert_eq!(r, -1, "{name} must fail: {out}");
        assert!(errno == "EPERM" || errno == "ENOSYS", "{name}: {errno}");
    }
}

/// 1. Nothing the runtime reads back can be turned into a symlink (or a FIFO) to the host, and
/// a pid is signalled only if it is in the sandbox's cgroup.
#[tokio::test(flavor = "multi_thread")]
async fn process_files_cannot_point_the_runtime_at_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, c, _) = common::serve(dir.path(), "iso-files", Default::default()).await;
    let vm = c.create(&sandbox("kairon-default-iso-files", "busybox")).await.unwrap();

    // A host file outside the sandbox, shaped like what the runtime reads (an exit code).
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "42\n").unwrap();
    std::fs::set_permissions(outside.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let secret_before = std::fs::metadata(&secret).unwrap();

    let p = c.start_process(&vm.id, &sh("echo real-output; exit 3")).await.unwrap();
    let done = c.wait_process(&vm.id, &p.id, Duration::from_secs(10)).await.unwrap();
    assert_eq!((done.state, done.exit_code), (ProcessState::Exited, Some(3)));

    // The guest sees only exit codes in its writable directory: no output, no pid file.
    let listing = ok(&c, &vm.id, "ls -a /.kairon/procs").await;
    assert_eq!(
        listing.split_whitespace().filter(|n| !n.starts_with('.')).collect::<Vec<_>>(),
        [format!("{}.exit", p.id)]
    );
    // The attack: every name the runtime used to read or write there becomes a symlink to the
    // host file (the old layout's stdout, host.pid, exit), and the exit file too.
    let s = secret.display();
    ok(
        &c,
        &vm.id,
        &format!(
            "cd /.kairon/procs && mkdir -p {id} && for f in stdout stderr host.pid exit process.json; do ln -sf {s} {id}/$f; done && rm -f {id}.exit && ln -s {s} {id}.exit && ls -l",
            id = p.id
        ),
    )
    .await;
    let after = c.process(&vm.id, &p.id).await.unwrap();
    assert_eq!(after.state, ProcessState::Exited);
    assert_ne!(after.exit_code, Some(42), "the runtime read the host file through the guest's symlink");
    assert_eq!(after.exit_code, None, "a symlinked exit file is not read at all");
    let (out, err) = c.process_logs(&vm.id, &p.id).await.unwrap();
    assert_eq!((out.as_str(), err.as_str()), ("real-output\n", ""), "logs come from the host-only copy");

    // A FIFO where the exit code goes must not hang the runtime (opened non-blocking, and only
    // a regular file is read).
    let busy = c.start_process(&vm.id, &sh("sleep 30")).await.unwrap();
    ok(&c, &vm.id, &format!("mkfifo /.kairon/procs/{}.exit", busy.id)).await;
    let t = Instant::now();
    let listed = tokio::time::timeout(Duration::from_secs(5), c.processes(&vm.id)).await.expect("no hang").unwrap();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(listed.iter().any(|q| q.id == busy.id));
    let fifo = c.process(&vm.id, &busy.id).await.unwrap();
    assert_eq!(fifo.exit_code, None);

    // Process ids that name paths are refused.
    for bad in ["..", "../../..", "0123456789ab/../x", "../../../../etc"] {
        assert!(matches!(rt.process(&vm.id, bad).await, Err(RuntimeError::NotFound(_))), "{bad}");
        assert!(matches!(rt.process_logs(&vm.id, bad).await, Err(RuntimeError::NotFound(_))), "{bad}");
    }

    // A pid outside the sandbox is never signalled, even if the runtime is asked to.
    let mut host_proc = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let refused = rt.sandbox_host().signal_in_sandbox(&vm.id, host_proc.id(), rustix::process::Signal::KILL);
    assert!(refused.is_err(), "{refused:?}");
    assert!(host_proc.try_wait().unwrap().is_none(), "the host process is alive");
    let _ = host_proc.kill();
    let _ = host_proc.wait();
    // While one inside is.
    c.kill_process(&vm.id, &busy.id, "KILL").await.unwrap();
    let killed = c.wait_process(&vm.id, &busy.id, Duration::from_secs(10)).await.unwrap();
    assert_eq!(killed.state, ProcessState::Exited);

    // The host file is untouched: same content, same inode, same mtime.
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "42\n");
    let secret_after = std::fs::metadata(&secret).unwrap();
    assert_eq!((secret_after.ino(), secret_after.mtime()), (secret_before.ino(), secret_before.mtime()));
    // Deleting the sandbox follows none of the guest's symlinks either.
    c.delete(&vm.id).await.unwrap();
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "42\n");
}

/// 2. Guest root is an unprivileged host uid of the template's own range.
#[tokio::test(flavor = "multi_thread")]
async fn guest_root_is_not_host_root() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, c, _) = common::serve(dir.path(), "iso-user", Default::default()).await;
    let vm = c.create(&sandbox("kairon-default-iso-user", "busybox")).await.unwrap();

    assert_eq!(ok(&c, &vm.id, "id -u").await, "0\n");
    let map = ok(&c, &vm.id, "cat /proc/self/uid_map").await;
    let fields: Vec<u64> = map.split_whitespace().map(|f| f.parse().unwrap()).collect();
    assert_eq!(fields.len(), 3, "{map}");
    let base = fields[1] as u32;
    assert_eq!((fields[0], fields[2]), (0, 65536), "{map}");
    assert!(base >= 1 << 30, "{map}");
    assert_eq!(ok(&c, &vm.id, "cat /proc/self/gid_map").await.split_whitespace().nth(1), Some(&*base.to_string()));
    assert_eq!(host_uid_of(vm.pid.unwrap()), base, "the sandbox's init runs as the range's base on the host");

    // What guest root (and a guest user) creates belongs to the range on the host.
    ok(&c, &vm.id, "echo x > /root/by-guest-root").await;
    let user = ExecRequest { user: Some("1000:1000".into()), ..sh("echo y > /tmp/by-guest-user") };
    assert_eq!(c.exec(&vm.id, &user).await.unwrap().exit_code, 0);
    let root = rt.sandbox_host().rootfs(&vm.id);
    let m = std::fs::metadata(root.join("root/by-guest-root")).unwrap();
    assert_eq!((m.uid(), m.gid()), (base, base));
    let m = std::fs::metadata(root.join("tmp/by-guest-user")).unwrap();
    assert_eq!((m.uid(), m.gid()), (base + 1000, base + 1000));
    assert_eq!(std::fs::metadata(root.join("bin/busybox")).unwrap().uid(), base, "the template is in the range");

    // The files API writes as guest root, so the guest can use what it wrote.
    c.write_file(&vm.id, "/work/upload/note.txt", b"hello\n".to_vec(), 0o644).await.unwrap();
    assert_eq!(ok(&c, &vm.id, "stat -c %u:%g /work /work/upload /work/upload/note.txt").await, "0:0\n0:0\n0:0\n");
    ok(&c, &vm.id, "echo more >> /work/upload/note.txt").await;
    assert_eq!(c.read_file(&vm.id, "/work/upload/note.txt").await.unwrap(), b"hello\nmore\n");

    // Host-owned things stay out of reach: the read-only tools mount, and a host-owned
    // directory inside the root (guest root has no capability over ids it does not map).
    let host_dir = root.join("hostdir");
    std::fs::create_dir(&host_dir).unwrap();
    std::fs::write(host_dir.join("keep"), "host\n").unwrap();
    assert_eq!(ok(&c, &vm.id, "stat -c %u /hostdir").await, "65534\n", "unmapped ids show as nobody");
    for (what, cmd) in [
        ("write into the host-owned bind mount", "touch /.kairon/x"),
        ("replace a host-owned tool", "cp /bin/busybox /.kairon/busybox"),
        ("create in a host-owned directory", "touch /hostdir/new"),
        ("overwrite a host-owned file", "echo guest > /hostdir/keep"),
        ("chown a host-owned directory", "chown 0:0 /hostdir"),
        ("chmod a host-owned directory", "chmod 777 /hostdir"),
    ] {
        let r = run(&c, &vm.id, cmd).await;
        assert_ne!(r.exit_code, 0, "{what} must fail: {r:?}");
    }
    assert_eq!(std::fs::read_to_string(host_dir.join("keep")).unwrap(), "host\n");
    assert!(!host_dir.join("new").exists());
    let hd = std::fs::metadata(&host_dir).unwrap();
    assert_eq!((hd.uid(), hd.mode() & 0o777), (0, 0o755));
    assert!(!dir.path().join("tools/x").exists());

    // A snapshot shows owners as the guest sees them, not the host's range.
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("snap.tar");
    c.snapshot(&vm.id, &target.to_string_lossy()).await.unwrap();
    let mut owners = std::collections::BTreeMap::new();
    let mut archive = tar::Archive::new(std::fs::File::open(&target).unwrap());
    for e in archive.entries().unwrap() {
        let e = e.unwrap();
        let h = e.header();
        let name = e.path().unwrap().to_string_lossy().trim_start_matches("./").to_string();
        owners.insert(name, (h.uid().unwrap(), h.gid().unwrap()));
    }
    assert_eq!(owners["root/by-guest-root"], (0, 0));
    assert_eq!(owners["tmp/by-guest-user"], (1000, 1000));
    assert_eq!(owners["bin/busybox"], (0, 0));
    assert_eq!(owners["hostdir"], (65534, 65534), "host-owned shows as nobody");
    c.delete(&vm.id).await.unwrap();
}

/// 3 (busybox part) and 4: the allowlist lets a shell work but not make namespaces; /proc and
/// /sys are masked; the sandbox has its own cgroup namespace.
#[tokio::test(flavor = "multi_thread")]
async fn seccomp_masks_and_cgroup_namespace_hold_for_busybox() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, c, _) = common::serve(dir.path(), "iso-sec", Default::default()).await;
    let vm = c.create(&sandbox("kairon-default-iso-sec", "busybox")).await.unwrap();

    // busybox sh works under the allowlist: pipes, subshells, background jobs, files.
    let out = ok(&c, &vm.id, "for i in 1 2 3; do echo $i; done | wc -l; (sleep 0.1 &) ; wait; echo a > /tmp/f && cat /tmp/f; ls / | grep -cx bin; date +%Y >/dev/null && echo date-ok").await;
    assert_eq!(out, "3\na\n1\ndate-ok\n");
    // No new user (or any) namespace.
    let r = run(&c, &vm.id, "unshare -U id -u").await;
    assert_ne!(r.exit_code, 0, "{r:?}");
    assert!(r.stderr.contains("Operation not permitted"), "{r:?}");
    let r = run(&c, &vm.id, "unshare -n true").await;
    assert_ne!(r.exit_code, 0, "{r:?}");
    let r = run(&c, &vm.id, "nsenter -t 1 -U true").await;
    assert_ne!(r.exit_code, 0, "{r:?}");
    // Raw syscalls: io_uring, user namespaces, keyrings, ptrace, bpf, userfaultfd all refused.
    let probe_dir = tempfile::tempdir().unwrap();
    syscalls_are_refused(&c, &vm.id, &build_probe(probe_dir.path())).await;

    // Masked: every path of the list that this host has reads empty inside (files become
    // /dev/null, directories an empty read-only tmpfs); read-only ones are unwritable.
    let mut checked = Vec::new();
    for path in kairon_runtime::sandbox::spec::MASKED_PATHS {
        let Ok(meta) = std::fs::metadata(path) else { continue };
        let cmd =
            if meta.is_dir() { format!("ls -A {path} | wc -l") } else { format!("cat {path} 2>/dev/null | wc -c") };
        assert_eq!(ok(&c, &vm.id, &cmd).await.trim(), "0", "{path} is masked");
        checked.push(path);
    }
    eprintln!("masked paths present on this host and checked: {checked:?}");
    assert!(checked.contains(&"/proc/keys") || checked.contains(&"/proc/timer_list"), "{checked:?}");
    for cmd in ["echo h > /proc/sysrq-trigger", "echo 1 > /proc/sys/vm/drop_caches", "touch /sys/fs/cgroup/x"] {
        let r = run(&c, &vm.id, cmd).await;
        assert_ne!(r.exit_code, 0, "{cmd}: {r:?}");
    }

    // Its own cgroup namespace: inside the root of its cgroups; the host sees the real path.
    let inside = ok(&c, &vm.id, "cat /proc/self/cgroup").await;
    let freezer = inside.lines().find(|l| l.contains(":freezer:")).unwrap_or_else(|| panic!("{inside}"));
    assert!(freezer.ends_with(":/"), "{inside}");
    assert!(!inside.contains("kairon-iso-sec"), "{inside}");
    let host = std::fs::read_to_string(format!("/proc/{}/cgroup", vm.pid.unwrap())).unwrap();
    assert!(host.contains(&format!("/kairon-iso-sec/{}", vm.id)), "{host}");
    assert!(rt.sandbox_host().in_sandbox(&vm.id, vm.pid.unwrap()));
    assert!(!rt.sandbox_host().in_sandbox(&vm.id, std::process::id()));
    c.delete(&vm.id).await.unwrap();
}

/// 5. The writable layer and the logs have a disk limit: writing past it is ENOSPC inside, the
/// host and the runtime are fine, and the sandbox still answers.
#[tokio::test(flavor = "multi_thread")]
async fn the_disk_limit_stops_a_guest_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, c, _) = common::serve(dir.path(), "iso-disk", Default::default()).await;
    rt.set_sandbox_disk_limit(64 << 20);
    let vm = c.create(&sandbox("kairon-default-iso-disk", "busybox")).await.unwrap();
    let img = rt.instance_dir(&vm.id).join("disk.img");
    assert_eq!(std::fs::metadata(&img).unwrap().len(), 64 << 20);

    let r = run(&c, &vm.id, "dd if=/dev/zero of=/root/big bs=1M count=200").await;
    assert_ne!(r.exit_code, 0, "{r:?}");
    assert!(r.stderr.contains("No space left on device"), "{r:?}");
    let size: u64 = ok(&c, &vm.id, "stat -c %s /root/big").await.trim().parse().unwrap();
    assert!(size < 64 << 20, "{size}");
    // What the host gave the sandbox is the image's allocated blocks: never past the limit
    // (the host's own free space is not compared: other processes write to the same disk).
    assert!(std::fs::metadata(&img).unwrap().blocks() * 512 <= 64 << 20, "the image stays in its limit");

    // An upload through the files API onto the full disk fails cleanly too.
    let e = c.write_file(&vm.id, "/root/upload", vec![7u8; 4 << 20], 0o644).await;
    assert!(e.is_err(), "an upload onto a full disk fails");

    // Still answers, and frees up like any disk.
    assert_eq!(ok(&c, &vm.id, "echo alive").await, "alive\n");
    ok(&c, &vm.id, "rm /root/big && echo small > /root/small && cat /root/small").await;

    // A background process's output counts too: it stops at the limit with ENOSPC.
    let p = c.start_process(&vm.id, &sh("dd if=/dev/zero bs=1M count=200")).await.unwrap();
    let done = c.wait_process(&vm.id, &p.id, Duration::from_secs(60)).await.unwrap();
    assert_eq!(done.state, ProcessState::Exited, "{done:?}");
    assert_ne!(done.exit_code, Some(0), "{done:?}");
    let (out, err) = c.process_logs(&vm.id, &p.id).await.unwrap();
    assert!((out.len() as u64) < 64 << 20, "{}", out.len());
    assert!(err.is_empty() || err.contains("No space left"), "{err}");
    assert_eq!(ok(&c, &vm.id, "echo still-alive").await, "still-alive\n");

    // A second sandbox is not affected by the first one's full disk.
    let other = c.create(&sandbox("kairon-default-iso-disk2", "busybox")).await.unwrap();
    ok(&c, &other.id, "dd if=/dev/zero of=/root/f bs=1M count=8 2>/dev/null").await;
    c.delete(&other.id).await.unwrap();
    c.delete(&vm.id).await.unwrap();
    assert!(!img.exists());
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(vm.id.as_str()), "no mount left");
}

/// 3 (python part): in the Debian python template the allowlist refuses io_uring, user
/// namespaces, keyrings and ptrace (the raw-syscall probe) while python3 itself works. The
/// template is python3-minimal with pip: no git; what is there is tested.
#[tokio::test(flavor = "multi_thread")]
async fn python_runs_under_the_allowlist_and_the_dangerous_syscalls_fail() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, c, _) = common::serve(dir.path(), "iso-py", Default::default()).await;
    let req = sandbox("kairon-default-iso-py", "python");
    match rt.create(req.clone()).await {
        Err(RuntimeError::Conflict(_)) => {}
        other => panic!("the first use starts the build: {other:?}"),
    }
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let t = rt.template("python").unwrap();
        match t.state {
            TemplateState::Ready => break,
            TemplateState::Failed => panic!("python template failed: {:?}", t.message),
            _ => {}
        }
        assert!(Instant::now() < deadline, "python template took too long");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let vm = c.create(&req).await.unwrap();

    // The same raw-syscall probe as for busybox, in the Debian root.
    let probe_dir = tempfile::tempdir().unwrap();
    syscalls_are_refused(&c, &vm.id, &build_probe(probe_dir.path())).await;

    // python3 itself works under the allowlist: threads (clone, with clone3 answering
    // ENOSYS), fork, subprocess (fork/exec/pipes/wait), sockets and select where the module
    // exists in python3-minimal; a missing module is reported, not counted as a failure.
    let works = r#"
import os, sys, threading
res = []
t = [threading.Thread(target=lambda i=i: res.append(i * i)) for i in range(8)]
[x.start() for x in t]; [x.join() for x in t]
print("threads", sorted(res) == [i * i for i in range(8)])
pid = os.fork()
if pid == 0:
    os._exit(7)
_, status = os.waitpid(pid, 0)
print("fork", os.WEXITSTATUS(status) == 7)
r, w = os.pipe(); os.write(w, b"pipe"); print("pipe", os.read(r, 4) == b"pipe")
for mod in ["subprocess", "socket", "select", "json", "hashlib", "asyncio"]:
    try:
        __import__(mod)
    except Exception as e:
        print(mod, "missing")
        continue
    if mod == "subprocess":
        import subprocess
        out = subprocess.run(["sh", "-c", "echo from-child"], stdout=subprocess.PIPE).stdout
        print(mod, out == b"from-child\n")
    elif mod == "socket":
        import socket
        a, b = socket.socketpair(); a.sendall(b"ping")
        srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
        cli = socket.create_connection(srv.getsockname()); conn, _ = srv.accept(); cli.sendall(b"tcp")
        print(mod, b.recv(4) == b"ping" and conn.recv(3) == b"tcp")
    elif mod == "select":
        import select
        ep = select.epoll(); r2, w2 = os.pipe(); ep.register(r2, select.EPOLLIN); os.write(w2, b"x")
        print(mod, len(ep.poll(1)) == 1)
    else:
        print(mod, True)
"#;
    let r = c
        .exec(&vm.id, &ExecRequest { command: vec!["python3".into(), "-c".into(), works.into()], ..Default::default() })
        .await
        .unwrap();
    eprintln!("python3 under the allowlist:\n{}{}", r.stdout, r.stderr);
    assert_eq!(r.exit_code, 0, "{r:?}");
    for line in r.stdout.lines() {
        assert!(line.ends_with(" True") || line.ends_with(" missing"), "{line}: {}", r.stdout);
    }
    for must in ["threads True", "fork True", "pipe True", "subprocess True"] {
        assert!(r.stdout.lines().any(|l| l == must), "{must}: {}", r.stdout);
    }
    // pip is there (an agent's first command); git is not, said rather than skipped quietly.
    let r = run(&c, &vm.id, "command -v git || echo no-git; python3 -m pip --version").await;
    eprintln!("in the python template: {}", r.stdout.trim());
    assert!(r.stdout.contains("pip "), "the python template has pip: {r:?}");
    c.delete(&vm.id).await.unwrap();
}

/// 3 (pip and git): a Debian template that has them — debootstrapped with python3-pip and git,
/// pushed to a real registry on loopback and pulled as a template like any image — runs pip
/// (a local package installed with no network) and git (init, commit, log) under the
/// allowlist, in the user namespace.
#[tokio::test(flavor = "multi_thread")]
async fn pip_and_git_work_under_the_allowlist() {
    let build = tempfile::tempdir().unwrap();
    let rootfs = build.path().join("rootfs");
    let progress = kairon_runtime::oci::Progress::default();
    kairon_runtime::oci::debian::bootstrap(&rootfs, &["python3-minimal", "python3-pip", "git"], &progress)
        .await
        .unwrap_or_else(|e| panic!("debootstrap with pip and git: {e}"));
    let layer = {
        let mut builder = tar::Builder::new(Vec::new());
        builder.follow_symlinks(false);
        builder.append_dir_all(".", &rootfs).unwrap();
        common::layer(builder.into_inner().unwrap(), common::TAR)
    };
    drop(build);
    let registry = common::Registry::start();
    let run = serde_json::json!({
        "Cmd": ["/usr/bin/python3"],
        "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"],
        "WorkingDir": "/root"
    });
    common::Pusher::new(&registry).image("agents/pydev", "1", &[layer], "amd64", run).await;

    let dir = tempfile::tempdir().unwrap();
    let (rt, c, _) = common::serve(dir.path(), "iso-pip", registry.insecure()).await;
    c.create_template(&"pydev".try_into().unwrap(), &format!("{}/agents/pydev:1", registry.host)).await.unwrap();
    let t = rt.wait_template("pydev", Duration::from_secs(600)).await.unwrap();
    assert_eq!(t.state, TemplateState::Ready);
    let vm = c.create(&sandbox("kairon-default-iso-pip", "pydev")).await.unwrap();

    let probe_dir = tempfile::tempdir().unwrap();
    syscalls_are_refused(&c, &vm.id, &build_probe(probe_dir.path())).await;

    let pip = ok(
        &c,
        &vm.id,
        "set -e; cd /tmp; mkdir -p hello/hello_kairon; \
         printf 'def hi():\\n    return \"hi\"\\n' > hello/hello_kairon/__init__.py; \
         printf 'from setuptools import setup\\nsetup(name=\"hello-kairon\", version=\"1.0\", packages=[\"hello_kairon\"])\\n' > hello/setup.py; \
         python3 -m pip --version >/dev/null; \
         python3 -m pip install --quiet --no-index --no-build-isolation --break-system-packages ./hello 2>&1 | grep -v WARNING || true; \
         cd / && python3 -c 'import hello_kairon; print(hello_kairon.hi())'; python3 -m pip list 2>/dev/null | grep -c hello-kairon",
    )
    .await;
    assert_eq!(pip, "hi\n1\n", "pip installed the local package");

    let git = ok(
        &c,
        &vm.id,
        "set -e; mkdir -p /work/repo && cd /work/repo && git init -q -b main . && \
         git config user.email a@example.com && git config user.name agent && \
         echo one > f && git add f && git commit -qm first && echo two >> f && git commit -qam second && \
         git log --format=%s && git status --porcelain | wc -l",
    )
    .await;
    assert_eq!(git, "second\nfirst\n0\n");
    c.delete(&vm.id).await.unwrap();
}

/// A request that names the Machine it acts for reaches only that Machine's instance: on every
/// kind of instance route (a read, exec, files, processes, power, the guest HTTP proxy, a
/// WebSocket relay, and a migration's layer export and live socket) another owner's or no owner's instance answers 409 NotProvisioned and is
/// left untouched; the named owner's works; a request on no instance that names one is a 422.
#[tokio::test(flavor = "multi_thread")]
async fn a_request_for_one_machine_reaches_only_that_machines_instance() {
    use kairon_runtime::api::PowerAction;
    use kairon_runtime_api::{ClientError, GuestPath, Relay};

    let dir = tempfile::tempdir().unwrap();
    let (_rt, c, _) = common::serve(dir.path(), "iso-owner", Default::default()).await;
    let vm = c.create(&sandbox("kairon-default-iso-owner", "busybox")).await.unwrap();
    c.set_owner(&vm.id, None, "uid-a").await.unwrap();
    let (a, b) = (c.for_owner("uid-a"), c.for_owner("uid-b"));
    let refused = |what: &str, e: ClientError| match e {
        ClientError::Api { status: 409, reason, message } => {
            assert_eq!(reason, "NotProvisioned", "{what}: {message}");
            assert!(message.contains("uid-b"), "{what}: {message}");
        }
        other => panic!("{what}: expected 409 NotProvisioned, got {other:?}"),
    };

    refused("get", b.get(&vm.id).await.unwrap_err());
    refused("exec", b.exec(&vm.id, &sh("touch /tmp/b-was-here")).await.unwrap_err());
    refused("write a file", b.write_file(&vm.id, "/tmp/b-file", b"b".to_vec(), 0o644).await.unwrap_err());
    refused("read a file", b.read_file(&vm.id, "/etc/hostname").await.unwrap_err());
    refused("start a process", b.start_process(&vm.id, &sh("true")).await.unwrap_err());
    refused("processes", b.processes(&vm.id).await.unwrap_err());
    refused("pause", b.power(&vm.id, PowerAction::Pause, false).await.unwrap_err());
    refused("delete", b.delete(&vm.id).await.unwrap_err());
    let path = GuestPath::new("").unwrap();
    let proxied = b.send_guest_http(b.guest_http(reqwest::Method::GET, &vm.id, 8080, &path, None)).await.unwrap();
    assert_eq!(proxied.status(), 409, "the guest HTTP proxy");
    match b.relay(&vm.id, &Relay::Console).await {
        Ok(_) => panic!("the console relay of another Machine's instance opened"),
        Err(e) => refused("console relay", e),
    }
    // Nor may it take the instance away: its layer (a cold migration's source) or its live state.
    refused("export its layer", b.export_layer(&vm.id).await.unwrap_err());
    match b.live_out(&vm.id).await {
        Ok(_) => panic!("the live migration socket of another Machine's instance opened"),
        Err(e) => refused("live migration", e),
    }

    // Nothing reached the instance: it runs, unpaused, with none of B's files.
    assert_eq!(a.get(&vm.id).await.unwrap().state, VmState::Running);
    assert_eq!(ok(&a, &vm.id, "ls /tmp/b-was-here /tmp/b-file 2>&1; true").await.matches("No such file").count(), 2);
    // A request naming an owner on no instance at all is a mistake of the caller's.
    match a.list_sandboxes().await.unwrap_err() {
        ClientError::Api { status: 422, .. } => {}
        other => panic!("an owner on a request about no instance: {other:?}"),
    }
    // An unowned instance is nobody's: a request for any Machine is refused.
    let free = c.create(&sandbox("kairon-default-iso-free", "busybox")).await.unwrap();
    refused("an unowned instance", c.for_owner("uid-b").exec(&free.id, &sh("true")).await.unwrap_err());
    // Sandboxes outlive their runtime (a restarted one adopts them): remove both, or they run on
    // after the test (seen after every CI run).
    a.delete(&vm.id).await.unwrap();
    c.delete(&free.id).await.unwrap();
}

/// Keys the kernel has charged to a host uid (`/proc/key-users`), 0 when it has none.
fn keys_charged_to(uid: u32) -> u64 {
    let users = std::fs::read_to_string("/proc/key-users").unwrap();
    users
        .lines()
        .find(|l| l.split(':').next().map(str::trim) == Some(&*uid.to_string()))
        .map(|l| l.split_whitespace().nth(2).unwrap().split('/').next().unwrap().parse().unwrap())
        .unwrap_or(0)
}

/// Every sandbox of a template runs as the same host uids, and the kernel allows one uid 200 keys
/// (`kernel.keys.maxkeys`): a session keyring per sandbox, charged to that uid, refused the 201st
/// sandbox of a template on a node. Sandboxes take no key of their uid's quota.
#[tokio::test(flavor = "multi_thread")]
async fn sandboxes_take_no_key_of_their_templates_uid() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, c, _) = common::serve(dir.path(), "iso-keys", Default::default()).await;
    let first = c.create(&sandbox("kairon-default-iso-keys-0", "busybox")).await.unwrap();
    let base = host_uid_of(first.pid.unwrap());
    let before = keys_charged_to(base);
    let mut ids = vec![first.id];
    for i in 1..4 {
        ids.push(c.create(&sandbox(&format!("kairon-default-iso-keys-{i}"), "busybox")).await.unwrap().id);
    }
    for id in &ids {
        assert_eq!(ok(&c, id, "echo up").await, "up\n");
    }
    let after = keys_charged_to(base);
    assert!(after <= before, "3 more sandboxes took {} keys of uid {base}'s quota", after - before);
    for id in &ids {
        c.delete(id).await.unwrap();
    }
}
