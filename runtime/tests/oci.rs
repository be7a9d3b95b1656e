//! OCI pull and layer placement against a real registry (Debian's docker-registry, the CNCF
//! distribution registry) started on 127.0.0.1 for each test. Images are built here from
//! tars of chosen files and pushed with oci-client.

mod common;

use common::*;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering;

use kairon_runtime::api::ImageConfig;
use kairon_runtime::oci::{self, OciError, Progress, PulledImage, RegistryConfig, apply_layer, build_busybox_rootfs};
use oci_client::secrets::RegistryAuth;
use serde_json::json;
async fn pull(registry: &Registry, name: &str, rootfs: &Path) -> (Result<PulledImage, OciError>, Progress) {
    let progress = Progress::default();
    let reference = format!("{}/{name}", registry.host);
    let result = oci::pull(&reference, rootfs, &registry.insecure(), &progress).await;
    (result, progress)
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).expect("stat").permissions().mode() & 0o7777
}

fn exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test]
async fn pulls_amd64_from_an_index_with_whiteouts_hardlinks_symlinks_and_zstd() {
    let registry = Registry::start();
    let pusher = Pusher::new(&registry);

    let base = layer(
        tar_of(&[
            E::Dir("etc/", 0o755),
            E::File("etc/keep.txt", "keep", 0o644),
            E::File("etc/gone.txt", "gone", 0o644),
            E::Dir("gonedir/", 0o755),
            E::File("gonedir/x", "x", 0o644),
            E::Dir("opq/", 0o755),
            E::File("opq/lower.txt", "lower", 0o644),
            E::Dir("opq/sub/", 0o755),
            E::File("opq/sub/deep.txt", "deep", 0o644),
            E::Dir("data/", 0o750),
            E::File("data/target.txt", "hello", 0o640),
            E::Hardlink("data/hard", "data/target.txt"),
            E::Symlink("link", "data/target.txt"),
            E::Symlink("abslink", "/etc/keep.txt"),
            // No entry for bin/: the parent is made implicitly.
            E::File("bin/tool", "#!/bin/sh\n", 0o4755),
            E::File("arch.txt", "amd64", 0o644),
        ]),
        DOCKER_GZIP,
    );
    let upper = layer(
        tar_of(&[
            E::File("etc/.wh.gone.txt", "", 0o644),
            E::File(".wh.gonedir", "", 0o644),
            E::Dir("opq/", 0o755),
            // Before the marker in tar order: this layer's own file must survive it.
            E::File("opq/a-first.txt", "upper-before-marker", 0o644),
            E::File("opq/.wh..wh..opq", "", 0o644),
            E::File("opq/upper.txt", "upper", 0o644),
            E::Dir("zstd/", 0o755),
            E::File("zstd/new.txt", "from zstd", 0o600),
        ]),
        TAR_ZSTD,
    );
    let top = layer(
        tar_of(&[
            // Replaces the symlink itself; its target outside this entry must stay untouched.
            E::File("abslink", "replaced", 0o644),
            E::Hardlink("keep-hard", "etc/keep.txt"),
            E::Fifo("run/fifo"),
        ]),
        TAR,
    );
    let run = json!({
        "Entrypoint": ["/bin/tool"], "Cmd": ["--flag"], "Env": ["PATH=/bin", "A=b"],
        "WorkingDir": "/data", "User": "1000:1000",
    });
    let layers = [base, upper, top];
    let layer_bytes: u64 = layers.iter().map(|l| l.blob.len() as u64).sum();
    let amd64 = pusher.image("multi", "amd64", &layers, "amd64", run).await;
    let arm_layer = layer(tar_of(&[E::File("arch.txt", "arm64", 0o644)]), TAR_GZIP);
    let arm64 = pusher.image("multi", "arm64", &[arm_layer], "arm64", json!({"Cmd": ["arm"]})).await;
    // arm64 listed first: the pick must be by platform, not position.
    pusher.index("multi", "v1", &[(&arm64, "arm64"), (&amd64, "amd64")]).await;
    pusher.index("multi", "armonly", &[(&arm64, "arm64")]).await;

    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("rootfs");
    let (result, progress) = pull(&registry, "multi:v1", &root).await;
    let pulled = result.expect("pull");

    assert_eq!(pulled.digest, amd64.digest);
    assert_eq!(
        pulled.config,
        ImageConfig {
            entrypoint: vec!["/bin/tool".into()],
            cmd: vec!["--flag".into()],
            env: vec!["PATH=/bin".into(), "A=b".into()],
            working_dir: Some("/data".into()),
            user: Some("1000:1000".into()),
        }
    );
    assert_eq!(progress.bytes_total.load(Ordering::Relaxed), layer_bytes);
    assert_eq!(progress.bytes_done.load(Ordering::Relaxed), layer_bytes);

    assert_eq!(read(&root.join("arch.txt")), "amd64");
    // Whiteouts: a file and a whole directory of the lower layer are gone.
    assert_eq!(read(&root.join("etc/keep.txt")), "keep");
    assert!(!exists(&root.join("etc/gone.txt")));
    assert!(!exists(&root.join("gonedir")));
    assert!(!exists(&root.join("etc/.wh.gone.txt")));
    // Opaque directory: only this layer's entries remain, whatever their tar order.
    let mut opq: Vec<String> = fs::read_dir(root.join("opq"))
        .expect("opq")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    opq.sort();
    assert_eq!(opq, ["a-first.txt", "upper.txt"]);
    assert_eq!(read(&root.join("opq/a-first.txt")), "upper-before-marker");
    // Hardlinks share the inode, within a layer and onto a lower layer's file.
    let target = fs::metadata(root.join("data/target.txt")).expect("target");
    let hard = fs::metadata(root.join("data/hard")).expect("hard");
    assert_eq!(target.ino(), hard.ino());
    assert_eq!(target.nlink(), 2);
    assert_eq!(
        fs::metadata(root.join("keep-hard")).expect("keep-hard").ino(),
        fs::metadata(root.join("etc/keep.txt")).expect("keep").ino()
    );
    // Symlinks stay symlinks, with their target as written.
    assert!(fs::symlink_metadata(root.join("link")).expect("link").file_type().is_symlink());
    assert_eq!(fs::read_link(root.join("link")).expect("readlink"), Path::new("data/target.txt"));
    assert!(fs::symlink_metadata(root.join("abslink")).expect("abslink").is_file());
    assert_eq!(read(&root.join("abslink")), "replaced");
    // zstd layer, modes (setuid included), implicit parents, fifos.
    assert_eq!(read(&root.join("zstd/new.txt")), "from zstd");
    assert_eq!(mode(&root.join("zstd/new.txt")), 0o600);
    assert_eq!(mode(&root.join("data/target.txt")), 0o640);
    assert_eq!(mode(&root.join("data")), 0o750);
    assert_eq!(mode(&root.join("bin/tool")), 0o4755);
    assert!(fs::metadata(root.join("bin")).expect("bin").is_dir());
    assert!(fs::symlink_metadata(root.join("run/fifo")).expect("fifo").file_type().is_fifo());
    let mtime = fs::metadata(root.join("etc/keep.txt")).expect("keep").mtime();
    assert_eq!(mtime, 1_700_000_000);

    // An index without linux/amd64 names what it has.
    let other = tmp.path().join("armonly");
    let (result, _) = pull(&registry, "multi:armonly", &other).await;
    match result {
        Err(e @ OciError::NoPlatform { .. }) => {
            assert!(e.to_string().contains("linux/arm64"), "{e}")
        }
        other => panic!("expected NoPlatform, got {other:?}"),
    }
    assert!(!exists(&other));
}

#[tokio::test]
async fn a_blob_that_does_not_match_its_digest_is_refused_and_nothing_is_applied() {
    let registry = Registry::start();
    let pusher = Pusher::new(&registry);
    let first = layer(tar_of(&[E::File("first.txt", "first", 0o644)]), TAR_GZIP);
    let second = layer(tar_of(&[E::File("second.txt", "second", 0o644)]), TAR_GZIP);
    let pushed = pusher.image("corrupt", "v1", &[first, second], "amd64", json!({})).await;

    // The registry verified the blob on upload, so a manifest cannot name a wrong digest:
    // change the stored bytes behind it (same length) to serve content that does not match.
    let wanted = pushed.layer_digests[1].clone();
    let path = registry.blob_path(&wanted);
    let corrupted: Vec<u8> = fs::read(&path).expect("blob").iter().map(|b| !b).collect();
    fs::write(&path, &corrupted).expect("corrupt blob");
    let actual = sha256(&corrupted);

    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("rootfs");
    let (result, _) = pull(&registry, "corrupt:v1", &root).await;
    let err = result.expect_err("corrupt layer must be refused");
    assert!(
        matches!(&err, OciError::DigestMismatch { what: "layer", expected, actual: got }
            if *expected == wanted && *got == actual),
        "{err:?}"
    );
    assert_eq!(err.to_string(), format!("layer {wanted} has digest {actual}, expected {wanted}"));
    // Layers are verified before any is applied: not even the good first one is there.
    assert!(!exists(&root.join("first.txt")));
    assert!(!exists(&root.join("second.txt")));
}

#[test]
fn unsafe_layers_are_refused_and_write_nothing_outside_the_rootfs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // rootfs two levels down, so `../..` from it lands in `tmp`.
    let root = tmp.path().join("a/b/rootfs");
    fs::create_dir_all(&root).expect("rootfs");
    let outside = tmp.path();
    let apply = |entries: &[E<'_>]| apply_layer(&tar_of(entries)[..], TAR, &root);
    let unsafe_path = |r: Result<(), OciError>| match r {
        Err(OciError::UnsafePath { .. }) => {}
        other => panic!("expected UnsafePath, got {other:?}"),
    };

    // `..` in a name.
    unsafe_path(apply(&[E::File("../../x", "pwned", 0o644)]));
    unsafe_path(apply(&[E::File("a/../../../../x", "pwned", 0o644)]));
    assert!(!exists(&outside.join("x")));

    // A symlink planted in an earlier layer that climbs out, then written through.
    apply(&[E::Symlink("esc", "../../..")]).expect("a symlink alone is fine");
    unsafe_path(apply(&[E::File("esc/pwned", "pwned", 0o644)]));
    unsafe_path(apply(&[E::Dir("esc/pwned-dir/", 0o755)]));
    assert!(!exists(&outside.join("pwned")));
    assert!(!exists(&outside.join("pwned-dir")));
    // The same within one layer, through a chain of two links.
    unsafe_path(apply(&[
        E::Symlink("hop1", "hop2"),
        E::Symlink("hop2", "../.."),
        E::File("hop1/chain", "pwned", 0o644),
    ]));
    assert!(!exists(&tmp.path().join("a/chain")));

    // Hardlinks to a file outside, directly or through the climbing symlink.
    fs::write(outside.join("secret"), "secret").expect("secret");
    unsafe_path(apply(&[E::Hardlink("h", "../../../secret")]));
    unsafe_path(apply(&[E::Hardlink("h", "esc/secret")]));
    assert_eq!(fs::metadata(outside.join("secret")).expect("secret").nlink(), 1);
    assert!(!exists(&root.join("h")));

    // An absolute symlink is resolved inside the rootfs, as the container sees it: the host
    // directory it names is never written.
    let host_dir = outside.join("hostdir");
    fs::create_dir(&host_dir).expect("hostdir");
    apply(&[E::Symlink("abs", host_dir.to_str().expect("utf-8"))]).expect("symlink");
    apply(&[E::File("abs/file", "inside", 0o644)]).expect("write through abs");
    assert!(!exists(&host_dir.join("file")));
    let inside = root.join(host_dir.strip_prefix("/").expect("absolute")).join("file");
    assert_eq!(read(&inside), "inside");

    // Overwriting a symlink that points outside replaces the link, not its target.
    apply(&[E::Symlink("out", "../../../secret")]).expect("symlink");
    apply(&[E::File("out", "mine", 0o644)]).expect("replace link");
    assert_eq!(read(&outside.join("secret")), "secret");
    assert_eq!(read(&root.join("out")), "mine");

    // A directory (or its parent) replaced by an outward symlink later in the same layer: the
    // directory's mode, applied at the end of the layer, must not land on the link's target.
    let outside_q = outside.join("target/q");
    fs::create_dir_all(&outside_q).expect("target/q");
    let before = (mode(outside), mode(&outside_q));
    apply(&[E::Dir("d/", 0o701), E::Symlink("d", "../../..")]).expect("dir then symlink");
    apply(&[E::Dir("p/q/", 0o702), E::Symlink("p", "../../../target")]).expect("parent then symlink");
    assert_eq!((mode(outside), mode(&outside_q)), before);

    // Absolute names are taken relative to the rootfs.
    apply(&[E::File("/abs-name.txt", "rel", 0o644)]).expect("absolute name");
    assert_eq!(read(&root.join("abs-name.txt")), "rel");

    // Whiteouts cannot delete through a climbing symlink either.
    fs::write(outside.join("victim"), "v").expect("victim");
    let _ = apply(&[E::File("esc/.wh.victim", "", 0o644)]);
    assert!(exists(&outside.join("victim")));

    // Unknown media types are refused before reading.
    match apply_layer(&b""[..], "application/vnd.wasm.content.layer.v1+wasm", &root) {
        Err(e @ OciError::UnsupportedMediaType { .. }) => {
            assert!(e.to_string().contains("wasm"), "{e}")
        }
        other => panic!("expected UnsupportedMediaType, got {other:?}"),
    }
}

#[tokio::test]
async fn busybox_rootfs_round_trips_through_the_registry() {
    let registry = Registry::start();
    let pusher = Pusher::new(&registry);
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    let config = build_busybox_rootfs(&src).expect("busybox rootfs");
    assert_eq!(config.cmd, ["/bin/sh"]);
    assert_eq!(config.env, ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]);

    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    builder.append_dir_all(".", &src).expect("tar rootfs");
    let busybox = layer(builder.into_inner().expect("tar"), TAR_GZIP);
    let size = busybox.blob.len() as u64;
    let run = json!({ "Cmd": config.cmd, "Env": config.env });
    let pushed = pusher.image("busybox", "latest", &[busybox], "amd64", run).await;

    let dst = tmp.path().join("dst");
    let (result, progress) = pull(&registry, "busybox:latest", &dst).await;
    let pulled = result.expect("pull busybox");
    assert_eq!(pulled.digest, pushed.digest);
    assert_eq!(pulled.config, config);
    assert_eq!(progress.bytes_done.load(Ordering::Relaxed), size);
    assert_eq!(progress.bytes_total.load(Ordering::Relaxed), size);

    let sh = dst.join("bin/sh");
    assert!(fs::symlink_metadata(&sh).expect("sh").file_type().is_symlink());
    assert_eq!(fs::read_link(&sh).expect("readlink"), Path::new("busybox"));
    let bb = fs::symlink_metadata(dst.join("bin/busybox")).expect("busybox");
    assert!(bb.is_file());
    assert_eq!(bb.permissions().mode() & 0o7777, 0o755);
    assert_eq!(bb.len(), fs::metadata(oci::HOST_BUSYBOX).expect("host busybox").len());
    assert_eq!(mode(&dst.join("tmp")), 0o1777);
    assert_eq!(mode(&dst.join("root")), 0o700);
    for dir in ["proc", "sys", "dev", "etc"] {
        assert!(fs::metadata(dst.join(dir)).expect(dir).is_dir(), "{dir}");
    }
    assert!(read(&dst.join("etc/passwd")).starts_with("root:x:0:0:"));
    assert!(read(&dst.join("etc/group")).starts_with("root:x:0:"));

    // As root (CI here is), the unpacked rootfs actually runs.
    if rustix_is_root() {
        let out = Command::new("chroot")
            .arg(&dst)
            .args(["/bin/sh", "-c", "echo hello from $(basename $(readlink /bin/ls))"])
            .output()
            .expect("chroot");
        assert!(out.status.success(), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hello from busybox\n");
    }
}

#[tokio::test]
async fn registry_errors_are_reported_plainly() {
    let registry = Registry::start();
    let pusher = Pusher::new(&registry);
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("rootfs");

    let (result, _) = pull(&registry, "nothing:here", &root).await;
    assert!(matches!(result, Err(OciError::NotFound { .. })), "{result:?}");

    let progress = Progress::default();
    let bad = oci::pull("Not A Reference::", &root, &RegistryConfig::default(), &progress).await;
    assert!(matches!(bad, Err(OciError::BadReference { .. })), "{bad:?}");

    // A layer type we cannot unpack is refused before anything is downloaded.
    let wasm = Layer {
        blob: b"\0asm".to_vec(),
        media_type: "application/vnd.wasm.content.layer.v1+wasm",
        diff_id: sha256(b"\0asm"),
    };
    pusher.image("wasm", "v1", &[wasm], "amd64", json!({})).await;
    let progress = Progress::default();
    let reference = format!("{}/wasm:v1", registry.host);
    let result = oci::pull(&reference, &root, &registry.insecure(), &progress).await;
    assert!(
        matches!(&result, Err(OciError::UnsupportedMediaType { media_type, .. }) if media_type.contains("wasm")),
        "{result:?}"
    );
    assert_eq!(progress.bytes_done.load(Ordering::Relaxed), 0);
    assert!(!exists(&root));
}

#[tokio::test]
async fn basic_auth_is_sent_and_a_refusal_says_so() {
    let registry = Registry::start_with(true);
    let creds = ("kairon".to_string(), "kairon-secret".to_string());
    let pusher = Pusher::with_auth(&registry, RegistryAuth::Basic(creds.0.clone(), creds.1.clone()));
    let l = layer(tar_of(&[E::File("private.txt", "private", 0o644)]), TAR_GZIP);
    pusher.image("private", "v1", &[l], "amd64", json!({})).await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let reference = format!("{}/private:v1", registry.host);

    let progress = Progress::default();
    let anonymous = oci::pull(&reference, &tmp.path().join("a"), &registry.insecure(), &progress).await;
    assert!(matches!(anonymous, Err(OciError::Auth { .. })), "{anonymous:?}");

    let mut wrong = registry.insecure();
    wrong.auth.insert(registry.host.clone(), ("kairon".into(), "wrong".into()));
    let refused = oci::pull(&reference, &tmp.path().join("b"), &wrong, &progress).await;
    assert!(matches!(refused, Err(OciError::Auth { .. })), "{refused:?}");

    let mut right = registry.insecure();
    right.auth.insert(registry.host.clone(), creds);
    let root = tmp.path().join("c");
    oci::pull(&reference, &root, &right, &progress).await.expect("pull with credentials");
    assert_eq!(read(&root.join("private.txt")), "private");
    // The password never shows in the config's Debug output.
    assert!(!format!("{right:?}").contains("kairon-secret"));
}

fn rustix_is_root() -> bool {
    fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}
