//! The VM backend on real QEMU (TCG here): the project's own image boots, runs commands, keeps
//! and loses what it should across Pause, Hibernate, Halt and Stop, forks live with a new
//! identity, clones, pools, freezes, and serves its console, VNC and ports.
//!
//! VM tests run one at a time (a TCG boot takes a whole core of the two), each on VMs it shares
//! across its assertions, and kill whatever QEMU they started even when they fail.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kairon_model::{ImageSource, Quantity, Resources, Volume};
use kairon_runtime::api::{CreateVmRequest, ExecRequest, PowerAction, Vm, VmState};
use kairon_runtime::engine::Runtime;
use kairon_runtime_api::{InstanceId, RuntimeClient};

mod common;

/// One VM test at a time in this binary.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Kills every QEMU of the test's runtime when the test ends, passed or not.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        kairon_runtime::vm::kill_all_under(&self.0);
    }
}

struct Env {
    rt: Runtime,
    c: RuntimeClient,
    addr: std::net::SocketAddr,
    image: PathBuf,
    _cleanup: Cleanup,
    _dir: tempfile::TempDir,
}

async fn env(node: &str) -> Env {
    let dir = tempfile::Builder::new().prefix("kvm").tempdir_in("/tmp").unwrap();
    let (rt, c, addr) = common::serve(dir.path(), node, Default::default()).await;
    // Built once per machine (a couple of minutes), then reused by every test and `kairon up`.
    let image = rt.ensure_default_image().await.expect("the default VM image");
    Env { rt, c, addr, image, _cleanup: Cleanup(dir.path().to_path_buf()), _dir: dir }
}

fn vm_request(name: &str, image: &Path) -> CreateVmRequest {
    CreateVmRequest {
        name: name.into(),
        image: Some(ImageSource { path: image.to_string_lossy().into_owned() }),
        ..Default::default()
    }
}

async fn sh(c: &RuntimeClient, id: &InstanceId, script: &str) -> String {
    let r = c
        .exec(id, &ExecRequest { command: vec!["sh".into(), "-c".into(), script.into()], ..Default::default() })
        .await
        .unwrap_or_else(|e| panic!("exec {script:?}: {e}"));
    assert_eq!(r.exit_code, 0, "{script:?}: {r:?}");
    r.stdout
}

fn alive(pid: u32) -> bool {
    kairon_runtime::sandbox::pid_alive(pid)
}

async fn cpu(c: &RuntimeClient, id: &InstanceId) -> u64 {
    c.stats(id).await.unwrap().cpu_time_nanos
}

/// Polls until `f` holds (up to two minutes on a loaded host).
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, mut f: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_vm_boots_runs_commands_and_keeps_or_loses_state_across_power_changes() {
    let _one = SERIAL.lock().await;
    let e = env("vm-power").await;
    let c = &e.c;
    let mut req = vm_request("kairon-default-power", &e.image);
    req.resources = Some(Resources { cpu: Some(Quantity::new("1")), memory: Some(Quantity::new("256Mi")) });
    req.volumes = vec![Volume { name: "data".into(), size: Some(Quantity::new("64Mi")), ..Default::default() }];
    let t = Instant::now();
    let vm: Vm = c.create(&req).await.expect("create the VM");
    println!("boot to agent ready: {:?}", t.elapsed());
    assert_eq!((vm.state, vm.backend.as_str()), (VmState::Running, "qemu"));
    let pid = vm.pid.expect("QEMU pid");
    assert!(alive(pid));

    // Commands, files, stats.
    let uname = sh(c, &vm.id, "uname -a").await;
    assert!(uname.starts_with("Linux kairon-default-power "), "{uname}");
    assert!(uname.contains("cloud-amd64"), "the Debian cloud kernel: {uname}");
    let r = c
        .exec(
            &vm.id,
            &ExecRequest { command: vec!["cat".into()], stdin: Some("from stdin".into()), ..Default::default() },
        )
        .await
        .unwrap();
    assert_eq!(r.stdout, "from stdin");
    let r = c
        .exec(
            &vm.id,
            &ExecRequest {
                command: vec!["sh".into(), "-c".into(), "echo err >&2; exit 3".into()],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!((r.exit_code, r.stderr.as_str()), (3, "err\n"));
    let r = c
        .exec(&vm.id, &ExecRequest { command: vec!["pwd".into()], cwd: Some("/usr".into()), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(r.stdout, "/usr\n");
    let r = c
        .exec(
            &vm.id,
            &ExecRequest {
                command: vec!["id".into(), "-u".into()],
                user: Some("1000:1000".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(r.stdout, "1000\n");
    let r = c
        .exec(
            &vm.id,
            &ExecRequest { command: vec!["sleep".into(), "30".into()], timeout_seconds: Some(1), ..Default::default() },
        )
        .await
        .unwrap();
    assert!(r.timed_out, "{r:?}");
    let data: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    c.write_file(&vm.id, "/root/deep/dir/blob.bin", data.clone(), 0o600).await.unwrap();
    assert_eq!(c.read_file(&vm.id, "/root/deep/dir/blob.bin").await.unwrap(), data);
    let listing = c.list_files(&vm.id, "/root/deep/dir").await.unwrap();
    assert_eq!(listing.len(), 1);
    assert_eq!((listing[0].name.as_str(), listing[0].size, listing[0].mode), ("blob.bin", 300_000, 0o600));
    // An upload that breaks off leaves the old file whole, and nothing beside it.
    let broken = futures::stream::iter(vec![Ok(vec![1u8; 4096]), Err(std::io::Error::other("the client went away"))]);
    let cut = c.write_file_stream(&vm.id, "/root/deep/dir/blob.bin", reqwest::Body::wrap_stream(broken), None).await;
    assert!(cut.is_err(), "{cut:?}");
    assert_eq!(c.read_file(&vm.id, "/root/deep/dir/blob.bin").await.unwrap(), data);
    assert_eq!(c.list_files(&vm.id, "/root/deep/dir").await.unwrap().len(), 1, "no temporary file is left");
    // One written with no mode keeps the old file's.
    c.write_file_stream(&vm.id, "/root/deep/dir/blob.bin", b"new".to_vec().into(), None).await.unwrap();
    let listing = c.list_files(&vm.id, "/root/deep/dir").await.unwrap();
    assert_eq!((listing[0].size, listing[0].mode), (3, 0o600));
    c.delete_file(&vm.id, "/root/deep/dir/blob.bin").await.unwrap();
    assert!(c.read_file(&vm.id, "/root/deep/dir/blob.bin").await.is_err());
    let py = sh(c, &vm.id, "python3 -c 'print(6*7)'").await;
    assert_eq!(py, "42\n");
    let stats = c.stats(&vm.id).await.unwrap();
    assert_eq!(stats.vmm_pid, Some(pid));
    assert!(stats.cpu_time_nanos > 0 && stats.memory_bytes > 50 * 1024 * 1024, "{stats:?}");
    assert!(stats.disk_read_bytes > 0, "query-blockstats counts the guest's reads: {stats:?}");

    // A value only guest memory holds (tmpfs), kept by a process that keeps running.
    sh(c, &vm.id, "head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \\n' > /run/secret").await;
    let secret = sh(c, &vm.id, "cat /run/secret").await;
    let bg = c
        .start_process(
            &vm.id,
            &ExecRequest {
                command: vec!["sh".into(), "-c".into(), "while :; do sleep 1; done".into()],
                ..Default::default()
            },
        )
        .await
        .unwrap();

    // Pause: the VM's CPU time stands still.
    let vm = c.power(&vm.id, PowerAction::Pause, false).await.unwrap();
    assert_eq!(vm.state, VmState::Paused);
    let before = cpu(c, &vm.id).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = cpu(c, &vm.id).await;
    assert!(after - before < 100_000_000, "paused CPU grew {} ms", (after - before) / 1_000_000);
    assert!(c.exec(&vm.id, &ExecRequest { command: vec!["true".into()], ..Default::default() }).await.is_err());
    let vm = c.power(&vm.id, PowerAction::Resume, false).await.unwrap();
    assert_eq!(vm.state, VmState::Running);
    assert_eq!(sh(c, &vm.id, "echo up").await, "up\n");

    // Hibernate: QEMU is gone (RAM freed); restore: the memory is back as it was.
    let vm = c.power(&vm.id, PowerAction::Hibernate, false).await.unwrap();
    assert_eq!((vm.state, vm.pid), (VmState::Hibernated, None));
    assert!(!alive(pid), "QEMU still runs after hibernate");
    assert_eq!(c.stats(&vm.id).await.unwrap().memory_bytes, 0);
    let vm = c.power(&vm.id, PowerAction::Resume, false).await.unwrap();
    assert_eq!(vm.state, VmState::Running);
    assert_eq!(sh(c, &vm.id, "cat /run/secret").await, secret, "tmpfs content survives hibernate");
    let p = c.process(&vm.id, &bg.id).await;
    // The process table of the runtime is per QEMU; the guest process itself lives on.
    let still = sh(c, &vm.id, &format!("kill -0 {} && echo alive", bg.id)).await;
    assert_eq!(still, "alive\n", "the background process outlived hibernate ({p:?})");

    // Halt: the guest powers off; the disk stays, memory does not.
    sh(c, &vm.id, "echo kept > /root/on-disk && sync").await;
    let pid = c.get(&vm.id).await.unwrap().pid.unwrap();
    let vm = c.power(&vm.id, PowerAction::Halt, false).await.unwrap();
    assert_eq!(vm.state, VmState::Halted);
    assert!(!alive(pid));
    let vm = c.power(&vm.id, PowerAction::Start, false).await.unwrap();
    assert_eq!(vm.state, VmState::Running);
    assert_eq!(sh(c, &vm.id, "cat /root/on-disk").await, "kept\n");
    assert_eq!(sh(c, &vm.id, "test -e /run/secret || echo gone").await, "gone\n");

    // Stop: a change to the image's disk is lost, one on a volume is kept.
    sh(c, &vm.id, "echo volume-data | dd of=/dev/vdb conv=fsync 2>/dev/null; sync").await;
    let vm = c.power(&vm.id, PowerAction::Stop, false).await.unwrap();
    assert_eq!((vm.state, vm.pid), (VmState::Stopped, None));
    let vm = c.power(&vm.id, PowerAction::Start, false).await.unwrap();
    assert_eq!(sh(c, &vm.id, "test -e /root/on-disk || echo lost").await, "lost\n");
    assert_eq!(sh(c, &vm.id, "head -c 11 /dev/vdb").await, "volume-data");

    // Start paused: booted, then paused.
    let vm = c.power(&vm.id, PowerAction::Restart, true).await.unwrap();
    assert_eq!(vm.state, VmState::Paused);

    let pid = vm.pid.unwrap();
    c.delete(&vm.id).await.unwrap();
    assert!(!alive(pid));
    assert!(!e.rt.instance_dir(&vm.id).exists());
}

async fn value(c: &RuntimeClient, id: &InstanceId, file: &str) -> u64 {
    sh(c, id, &format!("cat {file}")).await.trim().parse().unwrap_or_else(|e| panic!("{file} in {id}: {e}"))
}

async fn identity(c: &RuntimeClient, id: &InstanceId) -> (String, String, String, String) {
    let out = sh(c, id, "cat /etc/machine-id; hostname; cat /sys/class/net/eth0/address; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'").await;
    let l: Vec<String> = out.lines().map(str::to_string).collect();
    assert_eq!(l.len(), 4, "{out}");
    (l[0].clone(), l[1].clone(), l[2].clone(), l[3].clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_vm_forks_live_into_a_new_identity_clones_boot_fresh_and_pools_claim_paused_members() {
    let _one = SERIAL.lock().await;
    let e = env("vm-fork").await;
    let c = &e.c;
    let parent = c.create(&vm_request("kairon-default-parent", &e.image)).await.expect("create the parent");
    sh(c, &parent.id, "echo from-parent > /root/disk-file && sync").await;
    // A counter that lives in one guest process's memory, ticking every 200 ms.
    c.start_process(
        &parent.id,
        &ExecRequest {
            command: vec![
                "sh".into(),
                "-c".into(),
                "i=0; while :; do i=$((i+1)); echo $i > /run/counter; sleep 0.2; done".into(),
            ],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    eventually("the counter to tick", || async { value(c, &parent.id, "/run/counter").await >= 3 }).await;
    let before = value(c, &parent.id, "/run/counter").await;

    let t = Instant::now();
    let fork = c.fork(&parent.id, "kairon-default-child").await.expect("fork");
    println!("live fork: {:?}", t.elapsed());
    assert!(fork.live, "a VM fork copies memory");
    let child = fork.vm;
    assert_eq!((child.state, child.name.as_str()), (VmState::Running, "kairon-default-child"));
    // The child's QEMU (started from a passed memory descriptor) is confined like any other, in
    // a network namespace of its own, not its parent's.
    let (ppid, cpid) = (parent.pid.unwrap(), child.pid.unwrap());
    assert_ne!(qemu_uid(cpid), qemu_uid(ppid), "parent and child QEMUs run as uids of their own");
    assert_eq!(proc_status(cpid, "Seccomp:"), ["2"]);
    let netns = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    assert!(kairon_runtime::vm::own_netns(cpid) && kairon_runtime::vm::own_netns(ppid));
    assert_ne!(netns(cpid), netns(ppid), "parent and child share no network namespace");
    let (p_now, c_now) = (value(c, &parent.id, "/run/counter").await, value(c, &child.id, "/run/counter").await);
    assert!(p_now >= before && c_now >= before, "both continue from {before}: parent {p_now}, child {c_now}");
    eventually("both counters to go on", || async {
        value(c, &parent.id, "/run/counter").await > p_now && value(c, &child.id, "/run/counter").await > c_now
    })
    .await;
    let (pi, ci) = (identity(c, &parent.id).await, identity(c, &child.id).await);
    assert_ne!(pi.0, ci.0, "machine id");
    assert_eq!((pi.1.as_str(), ci.1.as_str()), ("kairon-default-parent", "kairon-default-child"), "host names");
    assert_ne!(pi.2, ci.2, "MAC");
    assert_ne!(pi.3, ci.3, "urandom output");
    assert_eq!(sh(c, &child.id, "cat /root/disk-file").await, "from-parent\n", "the disk is copied too");
    // Disks are separate from now on.
    sh(c, &child.id, "echo child-only > /root/child-file && sync").await;
    assert_eq!(sh(c, &parent.id, "test -e /root/child-file || echo absent").await, "absent\n");

    // Clone: the parent's disk, a fresh boot (no counter), its own identity.
    let clone = c.clone_vm(&parent.id, "kairon-default-clone").await.expect("clone");
    assert_eq!(clone.state, VmState::Running);
    assert_eq!(sh(c, &clone.id, "cat /root/disk-file").await, "from-parent\n");
    assert_eq!(sh(c, &clone.id, "test -e /run/counter || echo fresh").await, "fresh\n");
    let cl = identity(c, &clone.id).await;
    assert_eq!(cl.1, "kairon-default-clone");
    assert_ne!(cl.0, pi.0);
    for id in [&parent.id, &child.id, &clone.id] {
        c.delete(id).await.unwrap();
    }

    // A pool of Paused VMs: a claim resumes one at once and re-identifies it.
    let template = vm_request("", &e.image);
    c.create_pool(&kairon_runtime::api::CreatePoolRequest { name: "vms".into(), size: 1, template }).await.unwrap();
    let ready = || async {
        c.pool(&"vms".try_into().unwrap())
            .await
            .unwrap()
            .members
            .iter()
            .any(|m| m.state == kairon_runtime::api::PoolMemberState::Ready)
    };
    eventually("a Paused pool member", ready).await;
    let member = c.pool(&"vms".try_into().unwrap()).await.unwrap().members[0].clone();
    assert_eq!(c.get(&member.id).await.unwrap().state, VmState::Paused);
    let t = Instant::now();
    let vm = c
        .claim(
            &"vms".try_into().unwrap(),
            &kairon_runtime::api::ClaimRequest { name: Some("kairon-default-claimed".into()), ttl_seconds: None },
        )
        .await
        .expect("claim");
    println!("pool claim: {:?}", t.elapsed());
    assert_eq!((vm.state, vm.id.as_str()), (VmState::Running, member.id.as_str()));
    let first = identity(c, &vm.id).await;
    println!("claim to first exec (re-identified): {:?}", t.elapsed());
    assert_eq!(first.1, "kairon-default-claimed");
    // The next member is claimed the same way and is a different machine.
    eventually("the pool to refill", ready).await;
    let vm2 =
        c.claim(&"vms".try_into().unwrap(), &kairon_runtime::api::ClaimRequest::default()).await.expect("second claim");
    let second = identity(c, &vm2.id).await;
    assert_ne!(first.0, second.0, "machine ids of two claimed members");
    assert_ne!(first.2, second.2, "MACs of two claimed members");
    c.delete_pool(&"vms".try_into().unwrap()).await.unwrap();
    assert!(c.get(&vm.id).await.is_err() && c.get(&vm2.id).await.is_err());
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn ws(addr: std::net::SocketAddr, path: &str) -> Ws {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = format!("ws://{addr}{path}").into_client_request().unwrap();
    req.headers_mut().insert("authorization", format!("Bearer {}", common::TOKEN).parse().unwrap());
    tokio_tungstenite::connect_async(req).await.unwrap_or_else(|e| panic!("websocket {path}: {e}")).0
}

/// Reads binary frames until their bytes contain `needle`; what was read.
async fn read_until(ws: &mut Ws, needle: &[u8]) -> Vec<u8> {
    use futures::StreamExt;
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !got.windows(needle.len()).any(|w| w == needle) {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, ws.next()).await {
            Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Binary(b)))) => got.extend_from_slice(&b),
            Ok(Some(Ok(_))) => {}
            other => panic!(
                "waiting for {:?}: {other:?}; got {:?}",
                String::from_utf8_lossy(needle),
                String::from_utf8_lossy(&got)
            ),
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread")]
async fn guest_filesystems_freeze_until_a_deadline_and_console_vnc_proxy_and_ssh_reach_the_guest() {
    use futures::SinkExt;
    let _one = SERIAL.lock().await;
    let e = env("vm-guest").await;
    let c = &e.c;
    // The lightweight track: spec.sandbox with an image boots the same way (microvm, direct kernel).
    let mut req = vm_request("kairon-default-guest", &e.image);
    req.sandbox = Some(kairon_model::SandboxSpec { template_name: None });
    let vm = c.create(&req).await.expect("create");
    assert_eq!(vm.backend, "qemu");

    // Freeze and thaw by hand.
    let f = c.freeze(&vm.id, None).await.unwrap();
    assert!(f.frozen.unwrap_or(0) >= 1, "{f:?}");
    assert_eq!(c.freeze_status(&vm.id).await.unwrap().status, "frozen");
    let t = c.thaw(&vm.id).await.unwrap();
    assert!(t.thawed.unwrap_or(0) >= 1, "{t:?}");
    assert_eq!(c.freeze_status(&vm.id).await.unwrap().status, "thawed");
    sh(c, &vm.id, "echo writable > /root/after-thaw && sync").await;
    // A freeze with a deadline thaws by itself.
    let f = c.freeze(&vm.id, Some(Duration::from_secs(3))).await.unwrap();
    assert!(f.until.is_some());
    assert_eq!(c.freeze_status(&vm.id).await.unwrap().status, "frozen");
    eventually("the freeze to expire", || async { c.freeze_status(&vm.id).await.unwrap().status == "thawed" }).await;
    sh(c, &vm.id, "echo again > /root/after-expiry && sync").await;
    // A sandbox has no guest filesystems to freeze: a clear refusal.
    let sb = c
        .create(&CreateVmRequest {
            name: "plain-sandbox".into(),
            sandbox: Some(kairon_model::SandboxSpec { template_name: Some("busybox".into()) }),
            ..Default::default()
        })
        .await
        .unwrap();
    match c.freeze(&sb.id, None).await {
        Err(kairon_runtime_api::ClientError::Api { status: 501, message, .. }) => {
            assert!(message.contains("VM"), "{message}")
        }
        other => panic!("freeze of a sandbox: {other:?}"),
    }
    c.delete(&sb.id).await.unwrap();

    // The serial console is a shell.
    let mut con = ws(e.addr, &format!("/v1/vms/{}/console", vm.id)).await;
    con.send(tokio_tungstenite::tungstenite::Message::Binary("echo console-$((6*7))\n".as_bytes().to_vec().into()))
        .await
        .unwrap();
    read_until(&mut con, b"console-42").await;
    drop(con);

    // VNC answers with an RFB greeting.
    let mut vnc = ws(e.addr, &format!("/v1/vms/{}/vnc", vm.id)).await;
    let hello = read_until(&mut vnc, b"RFB 003.").await;
    assert!(hello.starts_with(b"RFB 003."), "{hello:?}");
    drop(vnc);

    // The HTTP proxy reaches a server in the guest (through a forwarded loopback port).
    c.write_file(&vm.id, "/root/www/hello.txt", b"hello from the guest".to_vec(), 0o644).await.unwrap();
    c.start_process(
        &vm.id,
        &ExecRequest {
            command: vec![
                "/usr/lib/kairon/busybox".into(),
                "httpd".into(),
                "-f".into(),
                "-p".into(),
                "8080".into(),
                "-h".into(),
                "/root/www".into(),
            ],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let http = reqwest::Client::new();
    let url = format!("http://{}/v1/vms/{}/proxy/8080/hello.txt", e.addr, vm.id);
    eventually("the guest's HTTP server", || async {
        match http.get(&url).bearer_auth(common::TOKEN).send().await {
            Ok(r) if r.status() == 200 => r.text().await.unwrap_or_default() == "hello from the guest",
            _ => false,
        }
    })
    .await;

    // A port tunnel reaches dropbear: the SSH banner.
    let mut ssh = ws(e.addr, &format!("/v1/vms/{}/tunnel/22", vm.id)).await;
    let banner = read_until(&mut ssh, b"\r\n").await;
    assert!(banner.starts_with(b"SSH-2.0-dropbear"), "{:?}", String::from_utf8_lossy(&banner));
    drop(ssh);
    c.delete(&vm.id).await.unwrap();

    // The same operations against the real qemu-ga of the image (kairon-agent stays init only).
    let kernel = e.image.with_extension("vmlinuz").to_string_lossy().into_owned();
    let initrd = e.image.with_extension("initrd").to_string_lossy().into_owned();
    let mut req = vm_request("kairon-default-qemu-ga", &e.image);
    req.runtime = Some(kairon_model::RuntimeSpec {
        backend: None,
        kernel: Some(kairon_model::KernelSpec {
            path: kernel,
            initrd: Some(initrd),
            cmdline: Some("console=ttyS0 root=/dev/vda rw quiet panic=-1 kairon.agent=qemu-ga".into()),
        }),
    });
    let vm = c.create(&req).await.expect("create with qemu-ga");
    let agents = sh(c, &vm.id, "cat /proc/[0-9]*/comm 2>/dev/null | grep -c qemu-ga").await;
    assert_eq!(agents.trim(), "1", "qemu-ga answers, not kairon-agent");
    assert!(sh(c, &vm.id, "uname -r").await.contains("cloud-amd64"));
    c.write_file(&vm.id, "/root/ga.txt", b"through qemu-ga".to_vec(), 0o644).await.unwrap();
    assert_eq!(c.read_file(&vm.id, "/root/ga.txt").await.unwrap(), b"through qemu-ga");
    let p = c
        .start_process(
            &vm.id,
            &ExecRequest {
                command: vec!["sh".into(), "-c".into(), "echo bg-out; exit 5".into()],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let done = c.wait_process(&vm.id, &p.id, Duration::from_secs(60)).await.unwrap();
    assert_eq!(done.exit_code, Some(5));
    assert_eq!(c.process_logs(&vm.id, &p.id).await.unwrap().0, "bg-out\n");
    assert!(c.freeze(&vm.id, None).await.unwrap().frozen.unwrap_or(0) >= 1);
    assert_eq!(c.freeze_status(&vm.id).await.unwrap().status, "frozen");
    c.thaw(&vm.id).await.unwrap();
    assert_eq!(c.freeze_status(&vm.id).await.unwrap().status, "thawed");
    let vm = c.power(&vm.id, PowerAction::Halt, false).await.unwrap();
    assert_eq!(vm.state, VmState::Halted, "qemu-ga powers the guest off");
    c.delete(&vm.id).await.unwrap();
}

/// The first line a guest's SSH server sends on port 22.
async fn ssh_banner(target: kairon_runtime::proxy::Target) -> String {
    use tokio::io::AsyncBufReadExt;
    let s = kairon_runtime::proxy::dial(target, 22).await.expect("dial the guest's port 22");
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(60), tokio::io::BufReader::new(s).read_line(&mut line))
        .await
        .expect("the SSH banner within a minute")
        .unwrap();
    line
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_runtime_adopts_the_vms_that_still_run() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::Builder::new().prefix("kvm").tempdir_in("/tmp").unwrap();
    let _cleanup = Cleanup(dir.path().to_path_buf());
    let open = || {
        Runtime::open(kairon_runtime::engine::RuntimeConfig {
            state_dir: dir.path().to_path_buf(),
            node_name: "vm-adopt".into(),
            registry: Default::default(),
            egress: Default::default(),
            network: Default::default(),
        })
    };
    let rt = open().await.unwrap();
    let image = rt.ensure_default_image().await.unwrap();
    let vm = rt.create(vm_request("kairon-default-adopted", &image)).await.unwrap();
    let paused = rt
        .create(CreateVmRequest { start_paused: true, ..vm_request("kairon-default-adopted-paused", &image) })
        .await
        .unwrap();
    assert_eq!(paused.state, VmState::Paused);
    let pid = vm.pid.unwrap();
    // A forward to dropbear, dialled inside QEMU's network namespace.
    let target = rt.guest_target(&vm.id, 22).await.unwrap();
    assert_eq!(target, kairon_runtime::proxy::Target::Netns(pid));
    assert!(ssh_banner(target).await.starts_with("SSH-2.0-dropbear"));
    // The runtime goes away (its connections close); the VMs' QEMUs keep running.
    drop(rt);
    assert!(alive(pid));
    let rt = open().await.unwrap();
    // By its ID: the runtime resolves no names where an ID is expected.
    let again = rt.get(&vm.id).await.unwrap();
    assert_eq!((again.name.as_str(), again.state, again.pid), ("kairon-default-adopted", VmState::Running, Some(pid)));
    // The adopted QEMU keeps its namespace and the forward an earlier runtime added.
    assert!(kairon_runtime::vm::own_netns(pid));
    let target = rt.guest_target(&vm.id, 22).await.unwrap();
    assert_eq!(target, kairon_runtime::proxy::Target::Netns(pid));
    assert!(ssh_banner(target).await.starts_with("SSH-2.0-dropbear"));
    assert_eq!(rt.get(&paused.id).await.unwrap().state, VmState::Paused);
    let out = rt.exec(&vm.id, &ExecRequest { command: vec!["hostname".into()], ..Default::default() }).await.unwrap();
    assert_eq!(out.stdout, "kairon-default-adopted\n");
    rt.power(&paused.id, PowerAction::Resume, false).await.unwrap();
    for id in [&vm.id, &paused.id] {
        rt.delete(id).await.unwrap();
    }
    assert!(!alive(pid));
}

/// The fields of a `/proc/<pid>/status` line, e.g. `Uid:` → real, effective, saved, fs.
fn proc_status(pid: u32, key: &str) -> Vec<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(key)).unwrap_or_else(|| panic!("no {key} in {status}"));
    line.split_whitespace().skip(1).map(str::to_string).collect()
}

/// The uid QEMU `pid` runs as, checked to be one of the per-VM uids.
fn qemu_uid(pid: u32) -> u32 {
    let uid: u32 = proc_status(pid, "Uid:")[0].parse().unwrap();
    assert!(uid >= kairon_runtime::vm::VM_UID_BASE, "QEMU {pid} runs as uid {uid}, not a per-VM uid");
    uid
}

/// A TCP server on 127.0.0.1:`port` in the network namespace of `netns_pid` (the host's when
/// `None`) that greets every connection with `greeting`; killed on drop.
struct Greeter(std::process::Child);

impl Greeter {
    fn start(netns_pid: Option<u32>, port: u16, greeting: &str) -> Greeter {
        let server = format!(
            "import socket\ns=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
             s.bind(('127.0.0.1', {port})); s.listen(8); print('listening', flush=True)\n\
             while True:\n    c, _ = s.accept(); c.sendall(b'{greeting}\\n'); c.close()\n"
        );
        let mut cmd = match netns_pid {
            Some(pid) => {
                let mut c = std::process::Command::new("nsenter");
                c.arg(format!("--net=/proc/{pid}/ns/net")).arg("python3");
                c
            }
            None => std::process::Command::new("python3"),
        };
        let mut child =
            cmd.args(["-c", &server]).stdout(std::process::Stdio::piped()).spawn().expect("python3 on the host");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        assert_eq!(line.trim(), "listening");
        Greeter(child)
    }
}

impl Drop for Greeter {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn qemu_runs_unprivileged_under_seccomp_and_its_guest_cannot_reach_the_hosts_loopback() {
    let _one = SERIAL.lock().await;
    let e = env("vm-boundary").await;
    let c = &e.c;
    let vm = c.create(&vm_request("kairon-default-boundary", &e.image)).await.expect("create");
    let pid = vm.pid.unwrap();

    // QEMU dropped for good to a uid of its own (real, effective, saved and fs ids) with the
    // kairon-vm group the runtime created, kept no capability, and runs under its seccomp filter
    // (mode 2).
    let out = std::process::Command::new("id").args(["-g", kairon_runtime::vm::VM_USER]).output().unwrap();
    let gid = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(!gid.is_empty() && gid != "0", "the runtime creates {}: {gid:?}", kairon_runtime::vm::VM_USER);
    let uid = qemu_uid(pid);
    assert_eq!(proc_status(pid, "Uid:"), vec![uid.to_string(); 4], "QEMU's uids");
    assert_eq!(proc_status(pid, "Gid:"), vec![gid.clone(); 4], "QEMU's gids");
    assert_eq!(proc_status(pid, "Groups:"), vec![gid.clone()], "QEMU's supplementary groups");
    assert_eq!(proc_status(pid, "CapEff:"), ["0000000000000000"], "QEMU's capabilities");
    assert_eq!(proc_status(pid, "Seccomp:"), ["2"], "QEMU's seccomp mode (filter)");
    let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap().replace('\0', " ");
    assert!(cmdline.contains(" -sandbox on,obsolete=deny,spawn=deny,resourcecontrol=deny"), "{cmdline}");
    assert!(!cmdline.contains("exec:"), "no exec: migration: {cmdline}");

    // The guest's way to "the host" (slirp's 10.0.2.2) leads to the loopback of QEMU's own
    // network namespace: a server there answers; the same port on the host's loopback does not.
    assert!(kairon_runtime::vm::own_netns(pid), "QEMU has a network namespace of its own");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let _host = Greeter::start(None, port, "host-loopback-secret");
    let probe = format!(
        "python3 -c 'import socket; s = socket.create_connection((\"10.0.2.2\", {port}), timeout=10); print(s.recv(64).decode().strip())' 2>&1; echo exit=$?"
    );
    let out = sh(c, &vm.id, &probe).await;
    assert!(!out.contains("host-loopback-secret"), "the guest reached the host's loopback: {out}");
    assert!(out.contains("exit=1"), "the connection fails: {out}");
    let inside = Greeter::start(Some(pid), port, "vm-netns-loopback");
    assert_eq!(sh(c, &vm.id, &probe).await, "vm-netns-loopback\nexit=0\n", "10.0.2.2 is the namespace's loopback");
    drop(inside);

    // The runtime still reaches guest ports (dialled inside QEMU's namespace): a port tunnel to
    // dropbear and the HTTP proxy to a server in the guest.
    let mut ssh = ws(e.addr, &format!("/v1/vms/{}/tunnel/22", vm.id)).await;
    let banner = read_until(&mut ssh, b"\r\n").await;
    assert!(banner.starts_with(b"SSH-2.0-dropbear"), "{:?}", String::from_utf8_lossy(&banner));
    drop(ssh);
    c.write_file(&vm.id, "/root/www/hello.txt", b"through the namespace".to_vec(), 0o644).await.unwrap();
    c.start_process(
        &vm.id,
        &ExecRequest {
            command: ["/usr/lib/kairon/busybox", "httpd", "-f", "-p", "8080", "-h", "/root/www"]
                .map(String::from)
                .to_vec(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let http = reqwest::Client::new();
    let url = format!("http://{}/v1/vms/{}/proxy/8080/hello.txt", e.addr, vm.id);
    eventually("the guest's HTTP server through the proxy", || async {
        match http.get(&url).bearer_auth(common::TOKEN).send().await {
            Ok(r) if r.status() == 200 => r.text().await.unwrap_or_default() == "through the namespace",
            _ => false,
        }
    })
    .await;

    // Hibernate and restore pass the memory file as a descriptor; the new QEMU is confined the
    // same way, in a namespace of its own, and its forwards are added again on demand.
    let vm = c.power(&vm.id, PowerAction::Hibernate, false).await.unwrap();
    assert_eq!(vm.state, VmState::Hibernated);
    assert!(!alive(pid));
    let vm = c.power(&vm.id, PowerAction::Resume, false).await.unwrap();
    let pid = vm.pid.unwrap();
    let uid = qemu_uid(pid);
    assert_eq!(proc_status(pid, "Uid:"), vec![uid.to_string(); 4]);
    assert_eq!(proc_status(pid, "Seccomp:"), ["2"]);
    assert!(kairon_runtime::vm::own_netns(pid));
    let mut ssh = ws(e.addr, &format!("/v1/vms/{}/tunnel/22", vm.id)).await;
    let banner = read_until(&mut ssh, b"\r\n").await;
    assert!(banner.starts_with(b"SSH-2.0-dropbear"), "{:?}", String::from_utf8_lossy(&banner));
    drop(ssh);
    let out = sh(c, &vm.id, &probe).await;
    assert!(!out.contains("host-loopback-secret") && out.contains("exit=1"), "after restore: {out}");

    c.delete(&vm.id).await.unwrap();
    assert!(!alive(pid));
}

/// A live migration's target takes the source's VM configuration only as its own plan of the
/// Machine's request would make it: a MAC carrying `,romfile=…` (a QEMU device property, read
/// as root before `-runas`) is refused before any QEMU starts, and nothing of it stays.
#[tokio::test(flavor = "multi_thread")]
async fn a_migration_target_refuses_a_forged_configuration() {
    use futures::{SinkExt, StreamExt};
    use kairon_runtime_api::types::LiveMessage;
    use tokio_tungstenite::tungstenite::Message;

    let e = env("kairon-forged-target").await;
    let req = vm_request("kairon-default-forged", &e.image);
    let import = e.c.begin_import(&req).await.expect("the target announces the import");
    let mut ws = e.c.live_in(&import.id).await.expect("the target's migration socket");
    let config = serde_json::json!({
        "image": e.image, "vcpus": 1, "memoryMib": 256, "hostname": "kairon-default-forged",
        "mac": "52:54:00:00:00:01,romfile=/etc/shadow", "machineId": "0123456789abcdef0123456789abcdef",
    });
    let said = serde_json::to_string(&LiveMessage::Config { config }).unwrap();
    ws.send(Message::Text(said.into())).await.unwrap();
    let answer = loop {
        match tokio::time::timeout(Duration::from_secs(30), ws.next()).await.expect("an answer") {
            Some(Ok(Message::Text(t))) => break serde_json::from_str::<LiveMessage>(&t).unwrap(),
            Some(Ok(_)) => continue,
            other => panic!("the target closed without a word: {other:?}"),
        }
    };
    match answer {
        LiveMessage::Failed { message } => assert!(
            message.contains("has mac") && message.contains("romfile") && message.contains("where this node plans"),
            "{message}"
        ),
        other => panic!("the target took a forged configuration: {other:?}"),
    }
    assert!(
        e.c.list().await.unwrap().iter().all(|vm| vm.name != "kairon-default-forged"),
        "nothing of the forged VM stays"
    );
}

/// A VM's new empty volume may not be larger than its node allows (`[vm] max_volume_size`):
/// one byte past it is refused before anything is made.
#[tokio::test(flavor = "multi_thread")]
async fn a_volume_past_the_nodes_limit_is_refused_before_anything_is_made() {
    let e = env("kairon-volume-limit").await;
    e.rt.set_max_volume_bytes(1 << 30);
    let mut req = vm_request("kairon-default-bigvolume", &e.image);
    req.volumes = vec![Volume {
        name: "data".into(),
        size: Some(Quantity(((1u64 << 30) + 1).to_string())),
        ..Default::default()
    }];
    let err = e.c.create(&req).await.expect_err("one byte past the limit").to_string();
    assert!(err.contains("max_volume_size") && err.contains("ask for less"), "{err}");
    assert!(e.c.list().await.unwrap().iter().all(|vm| vm.name != "kairon-default-bigvolume"), "nothing was made");
}
