//! The dashboard (`web/`): its committed build is what its sources build to, its view logic's
//! unit tests pass, and in a real browser (Debian's Chromium driven by playwright-core, from
//! `web/e2e/dashboard.mjs`) it works against a real `kairon up` with runc sandboxes. The
//! README's test command installs chromium and runs `npm ci` in `web/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use futures::StreamExt;
use serde_json::json;

use kairon_e2e::{Flags, Kairon};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn run(dir: &Path, cmd: &str, args: &[&str]) {
    let out = Command::new(cmd).args(args).current_dir(dir).output().unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} in {}: {}\n{}\n{}",
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every file under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

fn copy_tree(from: &Path, to: &Path, skip: &[&str]) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if skip.iter().any(|s| name == *s) {
            continue;
        }
        let (src, dst) = (e.path(), to.join(&name));
        if src.is_dir() {
            copy_tree(&src, &dst, skip);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// A fresh `npm ci && npm run build` of the sources, apart from the repository, equals the
/// committed `web/dist` byte for byte; and the view logic's unit tests pass there.
#[test]
fn committed_dist_is_a_fresh_build_and_the_view_logic_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let web = tmp.path().join("web");
    copy_tree(&repo().join("web"), &web, &["node_modules", "dist", "test-results"]);
    // The dashboard compiles against the generated TypeScript client's types.
    let generated = tmp.path().join("sdk/typescript/src/generated");
    copy_tree(&repo().join("sdk/typescript/src/generated"), &generated, &[]);
    run(&web, "npm", &["ci", "--no-audit", "--no-fund", "--loglevel=error"]);
    run(&web, "npm", &["test"]);
    run(&web, "npm", &["run", "build"]);
    let committed = repo().join("web/dist");
    let (want, got) = (files(&committed), files(&web.join("dist")));
    assert_eq!(
        got, want,
        "web/dist lists other files than a fresh build: run `npm run build` in web/ and commit dist/"
    );
    for f in &want {
        let (a, b) = (std::fs::read(committed.join(f)).unwrap(), std::fs::read(web.join("dist").join(f)).unwrap());
        assert!(
            a == b,
            "web/dist/{} differs from a fresh build: run `npm run build` in web/ and commit dist/",
            f.display()
        );
    }
}

/// Where this test run's screenshots go: beside the test binaries (`target/debug/web-screenshots`).
fn out_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().join("web-screenshots")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_dashboard_in_a_browser() {
    let web = repo().join("web");
    assert!(
        web.join("node_modules/playwright-core").exists(),
        "web/node_modules is missing: run `npm ci` in web/ (scripts/test does)"
    );
    assert!(Path::new("/usr/bin/chromium").exists(), "Debian's chromium is missing (scripts/test installs it)");
    let flags = Flags::fast_activity("1s").activity_stamps("1s").usage_interval("1s");
    let k = Kairon::start_with(&flags).unwrap();
    let admin = k.rest().unwrap();
    let machine = json!({
        "metadata": {"name": "web-1", "labels": {"kairon.zyvor.dev/sandbox": "true"}},
        "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true}, "lifecycle": {"idleTimeoutSeconds": 600, "maxLifetimeSeconds": 86400}}
    });
    admin.post("/api/v1/machines/web", machine).await.ok();
    admin.running("web", "web-1").await;
    // A runtime pool on the node, which the Nodes view shows beside the node's templates.
    let node_pool =
        json!({"name": "web-warm", "size": 1, "template": {"name": "x", "sandbox": {"templateName": "busybox"}}});
    let created = admin.post("/api/v1/nodes/local/pools", node_pool).await;
    assert_eq!(created.status, 201, "{created:?}");
    // 1,000 Machines pinned to a node with no agent: stored and watched, nothing boots.
    const MANY: usize = 1000;
    let created: Vec<u16> = futures::stream::iter(0..MANY)
        .map(|i| {
            let admin = admin.clone();
            async move {
                let m = json!({"metadata": {"name": format!("bulk-{i:04}")},
                               "spec": {"nodeName": "nowhere", "sandbox": {"templateName": "busybox"}}});
                admin.post("/api/v1/machines/bulk", m).await.status
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(created.iter().all(|s| *s == 201), "{:?}", created.iter().find(|s| **s != 201));
    let viewer = k.token("vic", "viewer", &["web"]).unwrap();
    let out = out_dir();
    let result = tokio::task::spawn_blocking({
        let (url, token, out) = (k.url.clone(), k.admin_token.clone(), out.clone());
        move || {
            Command::new("node")
                .arg("e2e/dashboard.mjs")
                .current_dir(&web)
                .env("KAIRON_URL", url)
                .env("ADMIN_TOKEN", token)
                .env("VIEWER_TOKEN", viewer)
                .env("OUT_DIR", out)
                .env("MACHINE", "web/web-1")
                .env("NODE_POOL", "web-warm")
                .env("MANY", MANY.to_string())
                .output()
                .expect("node runs")
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&result.stdout);
    let stderr = String::from_utf8_lossy(&result.stderr);
    println!("{stdout}");
    assert!(
        result.status.success(),
        "the browser test failed ({}); screenshots in {}\n{stdout}\n{stderr}\nkairon log:\n{}",
        result.status,
        out.display(),
        k.logs().lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    );
    for view in [
        "machines",
        "machines-1000",
        "terminal",
        "files",
        "pools",
        "claims",
        "usage",
        "nodes",
        "viewer",
        "signin-bad-token",
    ] {
        assert!(out.join(format!("{view}.png")).exists(), "no screenshot of {view}");
    }
    // Clean up the sandboxes this test started.
    let _ = admin.delete("/api/v1/machinepools/web/agents").await;
    let _ = admin.delete("/api/v1/machines/web/web-1").await;
    let _ = admin.delete("/api/v1/nodes/local/pools/web-warm").await;
}
