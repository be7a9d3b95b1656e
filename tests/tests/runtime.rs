//! `kairon runtime` as a process: kill -9 and restart, and nothing is lost or made twice.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kairon_model::SandboxSpec;
use kairon_runtime_api::RuntimeClient;
use kairon_runtime_api::types::{CreateVmRequest, ExecRequest, VmState};

const TOKEN: &str = "e2e-runtime-token";

fn start(state_dir: &std::path::Path) -> (Child, String) {
    let mut child = Command::new(kairon_e2e::kairon_bin())
        .args(["runtime", "--listen", "127.0.0.1:0", "--node-name", "e2e-rt", "--token", TOKEN, "--state-dir"])
        .arg(state_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().expect("kairon runtime printed its URL").unwrap();
        if let Some(u) = line.strip_prefix("Kairon runtime is up at ") {
            break u.split_whitespace().next().unwrap_or_default().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, url)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_runtime_finds_its_sandboxes_again_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let _cleanup = kairon_e2e::SandboxCleanup(dir.path().to_path_buf());
    let (mut rt, url) = start(dir.path());
    let c = RuntimeClient::new(&url, TOKEN).unwrap();
    kairon_e2e::wait_for("the busybox template to be ready", Duration::from_secs(60), || async {
        match c.template(&"busybox".try_into().unwrap()).await {
            Ok(t) if t.state == kairon_runtime_api::types::TemplateState::Ready => Ok(()),
            Ok(t) => Err(format!("{:?}: {:?}", t.state, t.message)),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    let req = |name: &str| CreateVmRequest {
        name: name.into(),
        sandbox: Some(SandboxSpec { template_name: Some("busybox".into()) }),
        ..Default::default()
    };
    let a = c.create(&req("kairon-default-keep")).await.unwrap();
    c.exec(
        &a.id,
        &ExecRequest { command: vec!["sh".into(), "-c".into(), "echo 42 > /state".into()], ..Default::default() },
    )
    .await
    .unwrap();
    let b = c.create(&req("kairon-default-paused")).await.unwrap();
    c.power(&b.id, kairon_runtime_api::types::PowerAction::Pause, false).await.unwrap();

    rt.kill().unwrap(); // SIGKILL: no chance to clean up
    rt.wait().unwrap();

    let (mut rt, url) = start(dir.path());
    let c = RuntimeClient::new(&url, TOKEN).unwrap();
    let found = c.find_by_name("kairon-default-keep").await.unwrap().expect("found again by name");
    assert_eq!((found.id.as_str(), found.state, found.pid), (a.id.as_str(), VmState::Running, a.pid));
    let out = c
        .exec(&found.id, &ExecRequest { command: vec!["cat".into(), "/state".into()], ..Default::default() })
        .await
        .unwrap();
    assert_eq!(out.stdout, "42\n", "the same sandbox, not a new one");
    let paused = c.find_by_name("kairon-default-paused").await.unwrap().unwrap();
    assert_eq!(paused.state, VmState::Paused);
    assert_eq!(c.list().await.unwrap().len(), 2, "nothing created twice");
    for vm in c.list().await.unwrap() {
        c.delete(&vm.id).await.unwrap();
    }
    rt.kill().unwrap();
    rt.wait().unwrap();
}
