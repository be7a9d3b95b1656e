//! Preview links against a real `kairon up`, in a test binary of their own: it runs a browser and a
//! sandbox beside `kairon up`, so it does not share the machine with the SDK suites of `sdk.rs`.

use std::process::Command;

use kairon_e2e::Kairon;

mod support;
use support::{assert_clean, built_typescript, repo, run, venv_bin, with_env};

/// Preview links (`sb.preview_url` / `sb.previewUrl`) on `kairon up`: fetched by the Python SDK's
/// script as a client with no header (`sdk/python/scripts/preview.py`), then opened in Chromium
/// (`browser-test/preview.mjs`): a page's own script runs, links are origins of their own (no
/// reads, cookies or service workers across them or onto the API's host), and a link on another
/// port, revoked, past its ttl or outliving its sandbox is refused.
#[tokio::test(flavor = "multi_thread")]
async fn preview_links_open_in_a_browser_on_origins_of_their_own() {
    let ts = built_typescript();
    let k = Kairon::start().expect("kairon up");
    let mut cmd = Command::new(venv_bin("python"));
    cmd.arg(repo().join("sdk/python/scripts/preview.py"));
    with_env(&mut cmd, &k);
    let out = run("scripts/preview.py", &mut cmd);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["ok page", "ok port", "ok revoked", "ok sandbox", "ok deleted"],
        "{out}"
    );
    assert_clean(&k, "previews-py").await;

    let mut cmd = Command::new("node");
    cmd.arg("browser-test/preview.mjs").current_dir(&ts);
    with_env(&mut cmd, &k);
    let out = run("browser-test/preview.mjs", &mut cmd);
    assert!(out.contains("checks passed"), "{out}");
    println!("{}", out.trim());
    assert_clean(&k, "previews-ts").await;
}
