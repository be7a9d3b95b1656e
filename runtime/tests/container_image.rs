//! Kairon's own container image, end to end: `kairon container-image build` (debootstrap base +
//! the release binary + the guest agent, as an OCI image layout, no Docker daemon), `kairon
//! container-image push` to a real registry on loopback, pulled back by this runtime as a
//! template and run in a runc sandbox, where `kairon api --help` answers, the node's tools are
//! there, and `kairon api` serves `/healthz` over HTTPS while it waits for its database.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kairon_model::SandboxSpec;
use kairon_runtime::api::{CreateVmRequest, ExecRequest};
use kairon_runtime::proxy::dial_in_netns;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;

/// The cargo target directory this test was built in (`<target>/debug/deps/<test>`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.ancestors().nth(3).expect("target dir").to_path_buf()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd:?} failed ({}):\n{stderr}", out.status);
    eprintln!("{stderr}");
    String::from_utf8(out.stdout).expect("utf-8").trim().to_string()
}

fn exec(args: &[&str]) -> ExecRequest {
    ExecRequest { command: args.iter().map(|a| a.to_string()).collect(), ..Default::default() }
}

/// `GET path` over HTTPS on a port inside the sandbox of `pid`, trusting `ca`: status and body.
async fn get(pid: u32, port: u16, ca: &[u8], path: &str) -> (u16, String) {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca) {
        roots.add(cert.expect("CA certificate")).expect("CA");
    }
    let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    let tcp = dial_in_netns(pid, port).await.expect("dial");
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .expect("TLS handshake with the api's certificate");
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response).await;
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{response}"));
    (status, response)
}

/// A runtime's state dir whose sandboxes go with it, even when the test fails half-way.
struct State(tempfile::TempDir);

impl Drop for State {
    fn drop(&mut self) {
        kairon_runtime::sandbox::remove_all_under(self.0.path());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_container_image_is_built_pushed_pulled_and_runs_kairon() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The image holds the release binary of this source tree.
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    run(Command::new(env!("CARGO"))
        .args(["build", "--release", "--locked", "-p", "kairon"])
        .current_dir(workspace)
        .env("CARGO_TARGET_DIR", target_dir()));
    let kairon = target_dir().join("release/kairon");
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    let built = run(Command::new(&kairon).args(["container-image", "build", "--tag", "test", "--out"]).arg(&layout));
    assert!(built.starts_with("sha256:"), "build printed {built:?}");

    let registry = common::Registry::start();
    let reference = format!("{}/kairon/kairon:test", registry.host);
    let pushed = run(Command::new(&kairon)
        .args(["container-image", "push", "--insecure", "--layout"])
        .arg(&layout)
        .arg(&reference));
    assert_eq!(pushed, format!("{reference}@{built}"));
    // A second push finds every blob there and sends only the manifest.
    run(Command::new(&kairon).args(["container-image", "push", "--insecure", "--layout"]).arg(&layout).arg(&reference));

    let state = State(tempfile::tempdir().unwrap());
    let (rt, c, _addr) = common::serve(state.0.path(), "image", registry.insecure()).await;
    c.create_template(&"kairon".try_into().unwrap(), &reference).await.unwrap();
    let template = rt.wait_template("kairon", Duration::from_secs(600)).await.unwrap();
    assert_eq!(template.digest.as_deref(), Some(built.as_str()), "the pull unpacked the image that was built");
    assert_eq!(template.config.entrypoint, ["/usr/local/bin/kairon"]);

    let vm = c
        .create(&CreateVmRequest {
            name: "kairon-default-image".into(),
            sandbox: Some(SandboxSpec { template_name: Some("kairon".into()) }),
            ..Default::default()
        })
        .await
        .unwrap();
    let help = c.exec(&vm.id, &exec(&["kairon", "api", "--help"])).await.unwrap();
    assert_eq!(help.exit_code, 0, "{help:?}");
    assert!(help.stdout.contains("--database-url"), "{}", help.stdout);
    // What the node agent runs is there and runs (apt's tools and a mirror too: the node's
    // default VM image takes its kernel package from there, fetching apt's lists first).
    let tools = c
        .exec(
            &vm.id,
            &exec(&[
                "sh",
                "-c",
                "for t in runc qemu-system-x86_64 qemu-img ip nft mke2fs busybox tini-static debootstrap kairon-agent \
                 apt-get apt-cache dpkg-deb; do command -v $t >/dev/null || { echo missing $t; exit 1; }; done; \
                 grep -qsE '^(deb |Types: *deb)' /etc/apt/sources.list /etc/apt/sources.list.d/* || { echo no apt source; exit 1; }; \
                 runc --version && qemu-system-x86_64 --version && kairon --version",
            ]),
        )
        .await
        .unwrap();
    assert_eq!(tools.exit_code, 0, "{tools:?}");
    assert!(tools.stdout.contains("runc version") && tools.stdout.contains("QEMU emulator"), "{}", tools.stdout);

    // `kairon api` as the cluster runs it, with no database to reach: it serves at once.
    let kubeconfig = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n\
         users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n\
         current-context: c\n";
    c.write_file(&vm.id, "/etc/kairon/kubeconfig", kubeconfig.as_bytes().to_vec(), 0o600).await.unwrap();
    let keys = c.exec(&vm.id, &exec(&["kairon", "runtime-keys", "--out", "/etc/kairon/keys"])).await.unwrap();
    assert_eq!(keys.exit_code, 0, "{keys:?}");
    let mut api = exec(&[
        "kairon",
        "api",
        "--listen",
        "127.0.0.1:7445",
        "--data-dir",
        "/var/lib/kairon",
        "--kubeconfig",
        "/etc/kairon/kubeconfig",
        "--runtime-signing-key",
        "/etc/kairon/keys/runtime-signing.key",
    ]);
    api.env = [("DATABASE_URL".to_string(), "postgres://kairon@127.0.0.1:1/kairon".to_string())].into();
    let process = c.start_process(&vm.id, &api).await.unwrap();
    let pid = vm.pid.expect("sandbox pid");
    let deadline = Instant::now() + Duration::from_secs(30);
    while dial_in_netns(pid, 7445).await.is_err() {
        let logs = c.process_logs(&vm.id, &process.id).await.unwrap_or_default();
        assert!(Instant::now() < deadline, "kairon api never listened: {logs:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ca = c.read_file(&vm.id, "/var/lib/kairon/tls/ca.crt").await.unwrap();
    let (status, body) = get(pid, 7445, &ca, "/healthz").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.ends_with("ok"), "{body}");
    // Not ready, and says why; the API itself asks to be retried.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = get(pid, 7445, &ca, "/readyz").await;
        assert_eq!(status, 503, "{body}");
        if body.contains("PostgreSQL unreachable") {
            break;
        }
        assert!(Instant::now() < deadline, "/readyz never named the database: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, body) = get(pid, 7445, &ca, "/api/v1/machines").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.to_lowercase().contains("retry-after: 5"), "{body}");
    c.delete(&vm.id).await.unwrap();
}
