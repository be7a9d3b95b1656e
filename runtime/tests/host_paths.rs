//! Host paths a Machine names, attacked through the runtime API as a tenant's Machine would
//! reach it: each refusal is a 4xx that says what to do, given before QEMU starts, and leaves
//! nothing behind (no instance, no instance directory, no file opened for writing or created).

use std::path::{Path, PathBuf};
use std::process::Command;

use kairon_model::{ImageSource, KernelSpec, Quantity, RuntimeSpec, Volume};
use kairon_runtime::api::CreateVmRequest;
use kairon_runtime::vm::VmHost;
use kairon_runtime::vm::hostpaths::{self, DiskFormat, NAMESPACE_LABEL};
use kairon_runtime_api::{ClientError, RuntimeClient};

mod common;

struct Env {
    c: RuntimeClient,
    state: PathBuf,
    images: PathBuf,
    _dir: tempfile::TempDir,
}

/// A runtime whose only configured image directory is a fresh `images/` of the test's own.
async fn env(node: &str) -> Env {
    let dir = tempfile::Builder::new().prefix("khp").tempdir_in("/tmp").unwrap();
    let state = dir.path().join("state");
    let images = dir.path().join("images");
    std::fs::create_dir_all(&images).unwrap();
    let (rt, c, _) = common::serve(&state, node, Default::default()).await;
    rt.set_image_dirs(vec![images.clone()]);
    Env { c, state, images, _dir: dir }
}

fn qemu_img(args: &[&str]) {
    let out = Command::new("qemu-img").args(args).output().expect("qemu-img");
    assert!(out.status.success(), "qemu-img {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn request(name: &str, image: &Path) -> CreateVmRequest {
    CreateVmRequest {
        name: name.into(),
        image: Some(ImageSource { path: image.to_string_lossy().into_owned() }),
        ..Default::default()
    }
}

/// Creates the VM and expects a 4xx refusal whose message contains every one of `words`;
/// then checks that the runtime kept nothing of it.
async fn refused(e: &Env, req: CreateVmRequest, words: &[&str]) -> String {
    let err = e.c.create(&req).await.expect_err("the create must be refused");
    let ClientError::Api { status, message, .. } = &err else { panic!("not an API refusal: {err}") };
    assert!((400..500).contains(status), "{status} {message}");
    for w in words {
        assert!(message.contains(w), "{message:?} should say {w:?}");
    }
    assert!(e.c.list().await.unwrap().iter().all(|v| v.name != req.name), "an instance stayed behind");
    let instances = e.state.join("instances");
    let left: Vec<_> =
        std::fs::read_dir(&instances).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    assert!(left.is_empty(), "instance directories stayed behind: {left:?}");
    eprintln!("refused ({status}): {message}");
    message.clone()
}

fn secret_untouched(path: &str, before: &std::fs::Metadata) {
    let after = std::fs::metadata(path).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!((after.mtime(), after.mtime_nsec(), after.len()), (before.mtime(), before.mtime_nsec(), before.len()));
}

#[tokio::test]
async fn a_symlink_in_the_image_dir_to_etc_shadow_is_refused() {
    let e = env("hp-symlink").await;
    let shadow = std::fs::metadata("/etc/shadow").unwrap();
    let link = e.images.join("evil.qcow2");
    std::os::unix::fs::symlink("/etc/shadow", &link).unwrap();
    refused(&e, request("evil-image", &link), &["spec.image.path", "symlink", "name the file itself"]).await;
    // A directory symlink in the path is refused the same way.
    std::os::unix::fs::symlink("/etc", e.images.join("etc")).unwrap();
    refused(&e, request("evil-dir", &e.images.join("etc/shadow")), &["symlink"]).await;
    // And as the kernel or the initrd of a direct kernel boot.
    qemu_img(&["create", "-q", "-f", "qcow2", &e.images.join("ok.qcow2").to_string_lossy(), "1M"]);
    let mut req = request("evil-kernel", &e.images.join("ok.qcow2"));
    req.runtime = Some(RuntimeSpec {
        kernel: Some(KernelSpec { path: link.to_string_lossy().into_owned(), ..Default::default() }),
        ..Default::default()
    });
    refused(&e, req.clone(), &["spec.runtime.kernel.path", "symlink"]).await;
    std::fs::write(e.images.join("k.vmlinuz"), b"not a kernel").unwrap();
    req.runtime.as_mut().unwrap().kernel = Some(KernelSpec {
        path: e.images.join("k.vmlinuz").to_string_lossy().into_owned(),
        initrd: Some(link.to_string_lossy().into_owned()),
        cmdline: None,
    });
    refused(&e, req, &["spec.runtime.kernel.initrd", "symlink"]).await;
    // A kernel found beside the image is held to the same rule.
    qemu_img(&["create", "-q", "-f", "qcow2", &e.images.join("beside.qcow2").to_string_lossy(), "1M"]);
    std::os::unix::fs::symlink("/etc/shadow", e.images.join("beside.vmlinuz")).unwrap();
    refused(&e, request("evil-beside", &e.images.join("beside.qcow2")), &["kernel", "symlink"]).await;
    secret_untouched("/etc/shadow", &shadow);
}

#[tokio::test]
async fn climbs_and_paths_outside_the_image_dirs_are_refused() {
    let e = env("hp-climb").await;
    let climb = format!("{}/../../../../etc/passwd", e.images.display());
    refused(&e, request("climb", Path::new(&climb)), &["spec.image.path", "`..`"]).await;
    refused(
        &e,
        request("outside", Path::new("/etc/passwd")),
        &["is outside the node's image directories", "put the file there"],
    )
    .await;
    refused(&e, request("relative", Path::new("etc/passwd")), &["absolute"]).await;
    // The directory itself is no image.
    refused(&e, request("dir", &e.images), &["is outside"]).await;
    // A FIFO is opened without blocking and refused.
    let fifo = e.images.join("fifo.qcow2");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    refused(&e, request("fifo", &fifo), &["not a regular file"]).await;
    // Kernel paths outside.
    qemu_img(&["create", "-q", "-f", "qcow2", &e.images.join("ok.qcow2").to_string_lossy(), "1M"]);
    let mut req = request("kernel-outside", &e.images.join("ok.qcow2"));
    req.runtime = Some(RuntimeSpec {
        kernel: Some(KernelSpec { path: "/boot/../etc/shadow".into(), ..Default::default() }),
        ..Default::default()
    });
    refused(&e, req.clone(), &["spec.runtime.kernel.path", "`..`"]).await;
    req.runtime.as_mut().unwrap().kernel = Some(KernelSpec { path: "/etc/shadow".into(), ..Default::default() });
    refused(&e, req, &["spec.runtime.kernel.path", "is outside"]).await;
}

#[tokio::test]
async fn a_backing_file_or_data_file_outside_is_refused() {
    let e = env("hp-backing").await;
    let shadow = std::fs::metadata("/etc/shadow").unwrap();
    let evil = e.images.join("evil.qcow2");
    qemu_img(&["create", "-q", "-f", "qcow2", "-F", "raw", "-b", "/etc/shadow", "-u", &evil.to_string_lossy(), "1M"]);
    refused(
        &e,
        request("backing", &evil),
        &["backing file", "/etc/shadow", "outside the image directories", "qemu-img convert"],
    )
    .await;
    // A relative backing name that climbs out.
    let rel = e.images.join("rel.qcow2");
    qemu_img(&[
        "create",
        "-q",
        "-f",
        "qcow2",
        "-F",
        "raw",
        "-b",
        "../../../../etc/shadow",
        "-u",
        &rel.to_string_lossy(),
        "1M",
    ]);
    refused(&e, request("backing-rel", &rel), &["backing file", "outside"]).await;
    // Even inside the directories a chain is refused (QEMU would open it by name).
    let base = e.images.join("base.qcow2");
    qemu_img(&["create", "-q", "-f", "qcow2", &base.to_string_lossy(), "1M"]);
    let top = e.images.join("top.qcow2");
    qemu_img(&["create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", &base.to_string_lossy(), &top.to_string_lossy()]);
    refused(&e, request("chain", &top), &["backing file", "flatten"]).await;
    // An external data file is one more path.
    let df = e.images.join("df.qcow2");
    let data = e.images.join("df.data");
    qemu_img(&[
        "create",
        "-q",
        "-f",
        "qcow2",
        "-o",
        &format!("data_file={}", data.display()),
        &df.to_string_lossy(),
        "1M",
    ]);
    refused(&e, request("datafile", &df), &["external data file"]).await;
    secret_untouched("/etc/shadow", &shadow);
}

#[tokio::test]
async fn volumes_live_in_the_runtimes_volumes_dir_of_their_namespace() {
    let e = env("hp-volumes").await;
    let shadow = std::fs::metadata("/etc/shadow").unwrap();
    let passwd = std::fs::metadata("/etc/passwd").unwrap();
    let base = e.images.join("ok.qcow2");
    qemu_img(&["create", "-q", "-f", "qcow2", &base.to_string_lossy(), "1M"]);
    let vol = |name: &str, ns: &str, path: &str| {
        let mut r = request(name, &base);
        r.labels.insert(NAMESPACE_LABEL.into(), ns.into());
        r.volumes = vec![Volume { name: "data".into(), path: Some(path.into()), ..Default::default() }];
        r
    };
    refused(
        &e,
        vol("v-abs", "a", "/etc/shadow"),
        &["spec.volumes[data].path", "is outside the volumes directory of namespace a"],
    )
    .await;
    refused(&e, vol("v-climb", "a", "../../../../etc/passwd"), &["`..`"]).await;
    // Another namespace's volume is outside this one's directory.
    let b_dir = e.state.join("volumes/b");
    std::fs::create_dir_all(&b_dir).unwrap();
    qemu_img(&["create", "-q", "-f", "qcow2", &b_dir.join("secret.qcow2").to_string_lossy(), "1M"]);
    refused(&e, vol("v-other", "a", &b_dir.join("secret.qcow2").to_string_lossy()), &["is outside"]).await;
    // A symlink planted in the namespace's own directory.
    let a_dir = e.state.join("volumes/a");
    assert!(a_dir.is_dir(), "the runtime creates volumes/<namespace>/");
    std::os::unix::fs::symlink("/etc/shadow", a_dir.join("link.raw")).unwrap();
    refused(&e, vol("v-link", "a", "link.raw"), &["symlink"]).await;
    // A qcow2 volume that names a backing file (a raw one's header is the guest's and is never read as qcow2).
    qemu_img(&[
        "create",
        "-q",
        "-f",
        "qcow2",
        "-F",
        "raw",
        "-b",
        "/etc/shadow",
        "-u",
        &a_dir.join("b.qcow2").to_string_lossy(),
        "1M",
    ]);
    refused(&e, vol("v-backing", "a", "b.qcow2"), &["backing file"]).await;
    // A namespace label that would climb.
    refused(&e, vol("v-ns", "../..", "x.raw"), &["namespace"]).await;
    secret_untouched("/etc/shadow", &shadow);
    secret_untouched("/etc/passwd", &passwd);
    assert!(!e.state.join("volumes/..").join("x.raw").exists());
}

/// The disks the runtime creates pin every format, and a good volume is taken from its own
/// directory (no QEMU started: the disks are prepared directly).
#[tokio::test]
async fn overlays_pin_the_base_format_and_volume_formats_come_from_their_names() {
    let dir = tempfile::Builder::new().prefix("khp").tempdir_in("/tmp").unwrap();
    let images = dir.path().join("images");
    std::fs::create_dir_all(&images).unwrap();
    let host = VmHost::new(&dir.path().join("state"));
    host.set_image_dirs(vec![images.clone()]);
    for (file, fmt) in [("base.qcow2", "qcow2"), ("base.img", "raw")] {
        let base = images.join(file);
        qemu_img(&["create", "-q", "-f", fmt, &base.to_string_lossy(), "2M"]);
        let mut req = request(&format!("pin-{fmt}"), &base);
        req.labels.insert(NAMESPACE_LABEL.into(), "a".into());
        let vdir = host.volumes_dir("a");
        std::fs::create_dir_all(&vdir).unwrap();
        // A raw volume whose first bytes are a qcow2 header (what a guest can write into its
        // raw disk) stays raw.
        qemu_img(&[
            "create",
            "-q",
            "-f",
            "qcow2",
            "-F",
            "raw",
            "-b",
            "/etc/shadow",
            "-u",
            &vdir.join("forged.raw").to_string_lossy(),
            "1M",
        ]);
        req.volumes = vec![
            Volume { name: "forged".into(), path: Some("forged.raw".into()), ..Default::default() },
            Volume { name: "new".into(), size: Some(Quantity::new("1Mi")), ..Default::default() },
        ];
        let mut cfg = host.plan(&req).expect("plan");
        let id = format!("pin{fmt}");
        host.prepare_disks(&id, &req, &mut cfg).await.expect("disks");
        let out = Command::new("qemu-img")
            .args(["info", "--output=json", "-f", "qcow2", "-U"])
            .arg(host.instance_dir(&id).join("disk.qcow2"))
            .output()
            .unwrap();
        let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(info["backing-filename-format"], fmt, "{info}");
        assert_eq!(info["full-backing-filename"], base.to_string_lossy().as_ref(), "{info}");
        assert_eq!(Path::new(&cfg.volumes["forged"]), vdir.join("forged.raw"));
        assert_eq!(DiskFormat::of_volume(&cfg.volumes["forged"]), DiskFormat::Raw);
        let f = std::fs::File::open(&base).unwrap();
        assert_eq!(hostpaths::inspect(&f).unwrap().format.as_str(), fmt);
    }
}

#[test]
fn the_node_config_names_the_image_dirs() {
    use kairon_runtime::egress::NodeConfig;
    let cfg = NodeConfig::parse("[vm]\nimage_dirs = [\"/srv/images\"]\n").expect("parses");
    assert_eq!(cfg.vm.image_dirs(), [PathBuf::from("/srv/images")]);
    let cfg = NodeConfig::parse("").expect("parses");
    let default: Vec<PathBuf> = hostpaths::DEFAULT_IMAGE_DIRS.iter().map(PathBuf::from).collect();
    assert_eq!(cfg.vm.image_dirs(), default);
}
