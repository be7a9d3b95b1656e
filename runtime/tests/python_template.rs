//! The python template, built for real: debootstrap from the Debian mirror apt is configured
//! with (about 80 s, 190 MB with pip; needs root and the debootstrap package).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kairon_runtime::oci::Progress;
use kairon_runtime::oci::debian::{ESTIMATED_BYTES, build_python_rootfs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debootstrapped_rootfs_runs_python_and_shows_progress() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rootfs = dir.path().join("rootfs");
    fs::create_dir(&rootfs).expect("mkdir rootfs");
    let progress = Arc::new(Progress::default());

    // Samples of (time since start, bytes_done, bytes_total) taken while the build runs.
    let started = Instant::now();
    let building = Arc::new(AtomicBool::new(true));
    let watcher = {
        let (progress, building) = (progress.clone(), building.clone());
        tokio::spawn(async move {
            let mut samples = Vec::new();
            while building.load(Ordering::SeqCst) {
                samples.push((
                    started.elapsed(),
                    progress.bytes_done.load(Ordering::Relaxed),
                    progress.bytes_total.load(Ordering::Relaxed),
                ));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            samples
        })
    };

    let result = build_python_rootfs(&rootfs, &progress).await;
    let took = started.elapsed();
    building.store(false, Ordering::SeqCst);
    let samples = watcher.await.expect("watcher");
    let config = result.unwrap_or_else(|e| panic!("build failed: {e}"));

    let final_size = progress.bytes_done.load(Ordering::Relaxed);
    let first = samples.iter().find(|s| s.1 > 0).map_or(0.0, |s| s.0.as_secs_f64());
    let peak = samples.iter().map(|s| s.1).max().unwrap_or(0);
    let at_peak = samples.iter().find(|s| s.1 == peak).map_or(0.0, |s| s.0.as_secs_f64());
    eprintln!("progress: first bytes at {first:.1} s, peak {peak} bytes at {at_peak:.1} s");
    eprintln!(
        "python template: built in {:.1} s, {} bytes ({:.0} MB) after cleanup, {} progress samples",
        took.as_secs_f64(),
        final_size,
        final_size as f64 / 1e6,
        samples.len()
    );

    // Progress moved while debootstrap ran, not just at the end.
    let early = took.saturating_sub(Duration::from_secs(2));
    assert!(
        samples.iter().any(|&(at, done, _)| at < early && done > 0),
        "no progress seen before the last 2 s of a {took:?} build: {samples:?}"
    );
    assert!(samples.windows(2).all(|w| w[0].1 <= w[1].1), "bytes_done went backwards: {samples:?}");
    assert!(
        samples
            .iter()
            .all(|&(_, done, total)| done <= total && (total == 0 || total == ESTIMATED_BYTES || total == final_size)),
        "bytes_done past bytes_total, or a total other than the estimate or the final size: {samples:?}"
    );
    let distinct: std::collections::BTreeSet<u64> = samples.iter().map(|s| s.1).filter(|&d| d > 0).collect();
    assert!(distinct.len() >= 3, "bytes_done grew in fewer than 3 steps: {distinct:?}");
    assert_eq!(progress.bytes_total.load(Ordering::Relaxed), final_size);
    assert!(final_size > 50_000_000, "final size {final_size}");

    assert_eq!(config.cmd, ["/usr/bin/python3"]);
    assert_eq!(config.env, ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"]);
    assert_eq!(config.working_dir.as_deref(), Some("/root"));
    assert!(config.entrypoint.is_empty() && config.user.is_none());

    let out = Command::new("/usr/sbin/chroot")
        .arg(&rootfs)
        .args(["/usr/bin/python3", "-c", "print(6*7)"])
        .output()
        .expect("run chroot");
    assert!(out.status.success(), "python3 in the chroot failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42");

    // The trimming after debootstrap.
    let debs = fs::read_dir(rootfs.join("var/cache/apt/archives"))
        .expect("archives dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".deb"))
        .count();
    assert_eq!(debs, 0, "downloaded packages left behind");
    let lists = rootfs.join("var/lib/apt/lists");
    assert!(!lists.exists() || fs::read_dir(&lists).expect("lists").next().is_none(), "apt lists left behind");
    let tmp_mode = fs::symlink_metadata(rootfs.join("tmp")).expect("tmp").permissions().mode() & 0o7777;
    assert_eq!(tmp_mode, 0o1777);
    assert_eq!(fs::read_to_string(rootfs.join("etc/hostname")).expect("hostname"), "localhost\n");
    let log = fs::read_to_string(dir.path().join("debootstrap.log")).expect("debootstrap.log beside the rootfs");
    assert!(log.contains("I: Base system installed successfully."), "log: {log}");

    // Nothing debootstrap mounted (proc, sys) stays attached under the rootfs.
    let root = fs::canonicalize(&rootfs).expect("canonicalize");
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let leftover: Vec<&str> = mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| std::path::Path::new(m).starts_with(&root))
        .collect();
    assert!(leftover.is_empty(), "mounts left under the rootfs: {leftover:?}");
}

/// What an agent sees: asking for the `python` template builds it on first use, with progress,
/// and then sandboxes run python3.
#[tokio::test(flavor = "multi_thread")]
async fn the_python_template_is_built_on_first_use_and_runs_python() {
    use kairon_model::SandboxSpec;
    use kairon_runtime::api::{CreateVmRequest, ExecRequest, TemplateState};
    use kairon_runtime::engine::{Runtime, RuntimeConfig, RuntimeError};

    let dir = tempfile::tempdir().expect("tempdir");
    let rt = Runtime::open(RuntimeConfig {
        state_dir: dir.path().to_path_buf(),
        node_name: "py".into(),
        registry: Default::default(),
        egress: Default::default(),
        network: Default::default(),
    })
    .await
    .expect("runtime");
    let req = CreateVmRequest {
        name: "kairon-agents-py".into(),
        sandbox: Some(SandboxSpec { template_name: Some("python".into()) }),
        ..Default::default()
    };
    match rt.create(req.clone()).await {
        Err(RuntimeError::Conflict(m)) => assert!(m.contains("being built on first use"), "{m}"),
        other => panic!("the first use must start the build and say so: {other:?}"),
    }
    let mut saw_progress = false;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let t = rt.template("python").expect("the python template is listed while it builds");
        saw_progress |= t.state == TemplateState::Building && t.bytes_done > 0;
        match t.state {
            TemplateState::Ready => break,
            TemplateState::Failed => panic!("python template failed: {:?}", t.message),
            _ => {}
        }
        assert!(Instant::now() < deadline, "python template took over 10 minutes");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(saw_progress, "progress is visible while it builds");
    let vm = rt.create(req).await.expect("a python sandbox");
    let out = rt
        .exec(
            &vm.id,
            &ExecRequest { command: vec!["python3".into(), "-c".into(), "print(6*7)".into()], ..Default::default() },
        )
        .await
        .expect("exec");
    assert_eq!(out.stdout, "42\n");
    rt.delete(&vm.id).await.expect("delete");
}
