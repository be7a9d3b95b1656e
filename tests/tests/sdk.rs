//! The Python and TypeScript SDKs against a real `kairon up` with its runc runtime: the spec's
//! example (`sdk/python/examples/agent_sandbox.py`, and its TypeScript twin) runs unchanged but
//! for URL and token and leaves no Machine, claim or runtime instance behind; the SDKs' own test
//! suites (pytest, node's test runner) cover run/check, files, processes, pause/resume, fork and
//! typed errors. `sdk-gen/setup` (run by scripts/test) installs the tools these use.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use kairon_e2e::Kairon;

mod support;
use support::{assert_clean, built_typescript, repo, run, venv_bin, with_env};

/// What the examples run on: the template `python` (the spec's example runs `python3`), or with
/// KAIRON_SDK_EXAMPLE_IMAGE=/var/lib/fluxvm/images/kairon-hw.qcow2 the spec's VM image.
fn example_source(cmd: &mut Command) {
    match std::env::var("KAIRON_SDK_EXAMPLE_IMAGE") {
        Ok(image) => cmd.env("KAIRON_IMAGE", image),
        Err(_) => cmd.env("KAIRON_TEMPLATE", "python"),
    };
}

#[tokio::test(flavor = "multi_thread")]
async fn python_spec_example_and_terminals_run_and_clean_up() {
    let image = vm_image().await;
    let k = Kairon::start().expect("kairon up");
    let mut cmd = Command::new(venv_bin("python"));
    cmd.arg(repo().join("sdk/python/examples/agent_sandbox.py"));
    with_env(&mut cmd, &k);
    example_source(&mut cmd);
    let out = run("examples/agent_sandbox.py", &mut cmd);
    assert!(out.starts_with("Linux "), "uname -a first: {out}");
    assert!(out.lines().any(|l| l == "hi"), "the task's output: {out}");
    assert_clean(&k, "agents").await;

    // The README's "Coming from E2B" table, row by row.
    let mut cmd = Command::new(venv_bin("python"));
    cmd.arg(repo().join("sdk/python/examples/from_e2b.py"));
    with_env(&mut cmd, &k);
    let out = run("examples/from_e2b.py", &mut cmd);
    assert_eq!(out.lines().filter(|l| l.starts_with("ok ")).count(), 14, "every row ran: {out}");
    assert_clean(&k, "from-e2b").await;

    // `sb.pty()` on the python template (built above) and on a VM.
    let mut cmd = Command::new(venv_bin("python"));
    cmd.arg(repo().join("sdk/python/scripts/terminal.py"));
    with_env(&mut cmd, &k);
    cmd.env("KAIRON_IMAGE", &image);
    let out = run("scripts/terminal.py", &mut cmd);
    assert_eq!(out.lines().collect::<Vec<_>>(), ["ok sandbox", "ok vm"], "{out}");
    assert_clean(&k, "terminals").await;

    // Code contexts (`sb.code_context()`) on the python template.
    let mut cmd = Command::new(venv_bin("python"));
    cmd.arg(repo().join("sdk/python/scripts/code_context.py"));
    with_env(&mut cmd, &k);
    let out = run("scripts/code_context.py", &mut cmd);
    let steps = ["ok state", "ok traceback", "ok separate", "ok pause", "ok refused", "ok async"];
    assert_eq!(out.lines().collect::<Vec<_>>(), steps, "{out}");
    assert_clean(&k, "contexts").await;
}

/// The default VM image, built once per machine (scripts/test runs `kairon image` first).
async fn vm_image() -> PathBuf {
    let images = kairon_runtime::vm::image::images_dir(&std::env::temp_dir().join("kairon-images"));
    kairon_runtime::vm::image::ensure_default_image(&images, &Default::default()).await.unwrap()
}

/// The upload limit the SDK suites run under: their over-the-limit tests send one byte more,
/// and it leaves room for the 100 MiB streaming check.
const UPLOAD_LIMIT: &str = "120MiB";

#[tokio::test(flavor = "multi_thread")]
async fn python_sdk_is_typed_and_its_tests_pass() {
    let python = repo().join("sdk/python");
    run("mypy --strict", Command::new(venv_bin("mypy")).current_dir(&python));
    run("mypy --strict scripts", Command::new(venv_bin("mypy")).args(["--strict", "scripts"]).current_dir(&python));
    let k = Kairon::start_with(&["--max-upload-bytes", UPLOAD_LIMIT]).expect("kairon up");
    let mut cmd = Command::new(venv_bin("pytest"));
    cmd.current_dir(&python).args(["-q", "-p", "no:cacheprovider"]);
    with_env(&mut cmd, &k);
    let out = run("pytest", &mut cmd);
    assert!(out.contains(" passed"), "{out}");
    println!("pytest: {}", out.lines().last().unwrap_or_default());
    assert_clean(&k, "sdk-tests").await;

    // 100 MiB in and out through the files API, never whole in the client's memory.
    let mut cmd = Command::new(venv_bin("python"));
    cmd.arg(python.join("scripts/stream_rss.py"));
    with_env(&mut cmd, &k);
    let out = run("scripts/stream_rss.py", &mut cmd);
    assert!(out.contains("streamed 100 MiB in and out"), "{out}");
    println!("python: {}", out.trim());
}

#[tokio::test(flavor = "multi_thread")]
async fn typescript_example_and_tests_pass() {
    let ts = built_typescript();
    // A doc comment on every public name of both entry points (Node's and the browser's).
    run("check-docs", Command::new("node").arg("scripts/check-docs.mjs").current_dir(&ts));
    let k = Kairon::start_with(&["--max-upload-bytes", UPLOAD_LIMIT]).expect("kairon up");
    let mut cmd = Command::new("node");
    cmd.arg("dist/examples/agent_sandbox.js").current_dir(&ts);
    with_env(&mut cmd, &k);
    example_source(&mut cmd);
    let out = run("examples/agent_sandbox.ts", &mut cmd);
    assert!(out.starts_with("Linux "), "uname -a first: {out}");
    assert!(out.lines().any(|l| l == "hi"), "the task's output: {out}");
    assert_clean(&k, "agents").await;

    let mut cmd = Command::new("node");
    cmd.args(["--test", "--test-concurrency=1", "dist/test/"]).current_dir(&ts);
    with_env(&mut cmd, &k);
    let out = run("node --test", &mut cmd);
    assert!(out.contains("# fail 0"), "{out}");
    assert_clean(&k, "sdk-ts-tests").await;

    // 100 MiB in and out through the files API, never whole in the client's memory.
    let mut cmd = Command::new("node");
    cmd.args(["--expose-gc", "dist/examples/stream_rss.js"]).current_dir(&ts);
    with_env(&mut cmd, &k);
    let out = run("examples/stream_rss.ts", &mut cmd);
    assert!(out.contains("streamed 100 MiB in and out"), "{out}");
    println!("typescript: {}", out.trim());

    // The CommonJS build, with require(), against the same server.
    let mut cmd = Command::new("node");
    cmd.arg("examples/cjs_smoke.cjs").current_dir(&ts);
    with_env(&mut cmd, &k);
    assert!(run("examples/cjs_smoke.cjs", &mut cmd).contains("commonjs ok"));
    assert_clean(&k, "sdk-cjs").await;

    // `sb.pty()` on the python template (built by the example) and on a VM.
    let image = vm_image().await;
    let mut cmd = Command::new("node");
    cmd.arg("dist/examples/terminal.js").current_dir(&ts);
    with_env(&mut cmd, &k);
    cmd.env("KAIRON_IMAGE", &image);
    let out = run("examples/terminal.ts", &mut cmd);
    assert_eq!(out.lines().collect::<Vec<_>>(), ["ok sandbox", "ok vm"], "{out}");
    assert_clean(&k, "terminals-ts").await;

    // Code contexts (`sb.codeContext()`) on the python template.
    let mut cmd = Command::new("node");
    cmd.arg("dist/examples/code_context.js").current_dir(&ts);
    with_env(&mut cmd, &k);
    let out = run("examples/code_context.ts", &mut cmd);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["ok state", "ok traceback", "ok separate", "ok pause", "ok refused"],
        "{out}"
    );
    assert_clean(&k, "contexts-ts").await;
}

/// The browser build (`src/browser.ts`, the package's `browser` export) as a web app gets it:
/// bundled by esbuild for the browser platform, which fails on any `node:` import, then run in
/// Chromium from a page on the server's own origin (`browser-test/`): `new Kairon({ token })`,
/// create, run, a streamed run, files both ways, HTTP through a relay WebSocket opened with a
/// ticket, the Node-only parts refusing with what to use instead, typed errors, close.
#[tokio::test(flavor = "multi_thread")]
async fn typescript_sdk_works_in_a_browser() {
    let ts = built_typescript();
    let bundled = run("bundle:browser", Command::new("node").arg("scripts/bundle-browser.mjs").current_dir(&ts));
    assert!(bundled.contains("no node: imports"), "{bundled}");
    let k = Kairon::start().expect("kairon up");
    let mut cmd = Command::new("node");
    cmd.arg("browser-test/run.mjs").current_dir(&ts).env("KAIRON_NAMESPACE", "sdk-browser");
    with_env(&mut cmd, &k);
    let done = cmd.output().expect("node browser-test/run.mjs");
    let out = String::from_utf8_lossy(&done.stdout).into_owned();
    if !done.status.success() {
        // What the server said about the page's requests (a refused WebSocket says why only here).
        let logs = k.logs();
        let said: Vec<&str> = logs.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).collect();
        panic!(
            "browser-test/run.mjs failed ({}):\n{out}\n{}\n--- the server's warnings\n{}",
            done.status,
            String::from_utf8_lossy(&done.stderr),
            said.join("\n")
        );
    }
    assert!(out.contains("checks passed"), "{out}");
    println!("{}\n{}", bundled.trim(), out.trim());
    assert_clean(&k, "sdk-browser").await;
}

/// The Python SDK's `network=` on `kairon up`'s default guest network, whose node side lives in
/// a test bed (`sdk/python/scripts/network_option.py`): online by default, `"none"` and an
/// allowlist enforced by the node, each refusal readable as an EgressDenied Event.
#[tokio::test(flavor = "multi_thread")]
async fn python_sdk_network_option_is_enforced_on_the_guest_network() {
    let bed = kairon_runtime::net::testbed::Testbed::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("node.toml");
    std::fs::write(
        &config,
        format!(
            "[network]\nnetns = \"{}\"\ndns_upstream = \"{}\"\n",
            bed.node.0,
            kairon_runtime::net::testbed::RESOLVER_IP
        ),
    )
    .unwrap();
    let k = Kairon::start_with(&["--node-config", config.to_str().unwrap()]).unwrap();
    let mut cmd = Command::new(venv_bin("python"));
    cmd.arg(repo().join("sdk/python/scripts/network_option.py"));
    with_env(&mut cmd, &k);
    assert_eq!(run("network_option.py", &mut cmd).trim(), "ok");
}

/// Runs `script` (a program that prints `created`, waits for a line, then works through a
/// restart) against `kairon up` on a fixed address: stops the server, tells the script, starts
/// the server again on the same address and data; the script's `ok after N s` line says how
/// long its create waited. Only one Machine `during` exists in `namespace` after.
async fn across_a_restart(mut cmd: Command, namespace: &str) {
    use std::io::{BufRead, Write};
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let mut k = Kairon::start_with(&["--listen", &listen]).unwrap();
    with_env(&mut cmd, &k);
    let mut script = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the script starts");
    let mut out = std::io::BufReader::new(script.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "created", "the script did not make its sandbox");
    k.stop().unwrap();
    // The server is down: the script sends its create now, and retries.
    script.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let k = k.restart().unwrap();
    let done = script.wait_with_output().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(
        done.status.success() && rest.starts_with("ok after"),
        "the script failed ({}):\n--- stdout\n{rest}\n--- stderr\n{}",
        done.status,
        String::from_utf8_lossy(&done.stderr)
    );
    let waited: f64 = rest.trim().trim_start_matches("ok after ").trim_end_matches(" s").parse().unwrap();
    assert!(waited >= 1.5, "the create waited for the server to come back: {rest}");
    let machines = k.rest().unwrap().get(&format!("/api/v1/machines/{namespace}")).await.ok();
    let names: Vec<&str> =
        machines["items"].as_array().unwrap().iter().filter_map(|m| m["metadata"]["name"].as_str()).collect();
    assert_eq!(names.iter().filter(|n| **n == "during").count(), 1, "{names:?}");
}

/// The Python SDK across a restart of `kairon up` on the same address: requests that never
/// reached the server are retried until it is back (a create sent while it is down is made
/// exactly once), and the sandbox made before the restart answers after it
/// (`sdk/python/scripts/across_restart.py`).
#[tokio::test(flavor = "multi_thread")]
async fn python_sdk_retries_across_a_restart_of_kairon_up() {
    let mut cmd = Command::new(venv_bin("python"));
    cmd.arg(repo().join("sdk/python/scripts/across_restart.py"));
    across_a_restart(cmd, "restart").await;
}

/// The same with the TypeScript SDK (`sdk/typescript/examples/across_restart.ts`, compiled into
/// its own directory so it does not race the other test's build).
#[tokio::test(flavor = "multi_thread")]
async fn typescript_sdk_retries_across_a_restart_of_kairon_up() {
    let ts = repo().join("sdk/typescript");
    let out_dir = tempfile::tempdir().unwrap();
    run(
        "tsc",
        Command::new(ts.join("node_modules/.bin/tsc"))
            .args(["-p", ".", "--outDir"])
            .arg(out_dir.path())
            .current_dir(&ts),
    );
    // The compiled script imports its dependencies from the package's node_modules.
    std::os::unix::fs::symlink(ts.join("node_modules"), out_dir.path().join("node_modules")).unwrap();
    std::fs::write(out_dir.path().join("package.json"), r#"{"type": "module"}"#).unwrap();
    let mut cmd = Command::new("node");
    cmd.arg(out_dir.path().join("examples/across_restart.js"));
    across_a_restart(cmd, "restart-ts").await;
}

/// A directory tree carried by both SDKs through one sandbox: Python's `upload_dir` read back by
/// TypeScript's `downloadDir` and the other way round, each byte and the executable bit as the
/// original's.
#[tokio::test(flavor = "multi_thread")]
async fn directories_round_trip_byte_for_byte_between_the_sdks() {
    let ts = built_typescript();
    let k = Kairon::start().expect("kairon up");
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src");
    std::fs::create_dir_all(src.join("pkg/deep")).unwrap();
    let blob: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(src.join("pkg/deep/blob.bin"), &blob).unwrap();
    std::fs::write(src.join("pkg/empty.txt"), b"").unwrap();
    std::fs::write(src.join("run.sh"), b"#!/bin/sh\necho ran\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(src.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let at = |name: &str| local.path().join(name).to_string_lossy().into_owned();
    let py = |code: &str| {
        let mut cmd = Command::new(venv_bin("python"));
        cmd.args(["-c", code]);
        with_env(&mut cmd, &k);
        run("python", &mut cmd)
    };
    let head = "import os, sys\nfrom kairon import Kairon\nk = Kairon(namespace='trees')\n";
    py(&format!(
        "{head}sb = k.sandbox.create(template='busybox', name='trees', timeout=None)\n\
         sb.files.upload_dir({src:?}, '/tmp/py')\nsb.files.download_dir('/tmp/py', {back:?})\n",
        src = src.to_string_lossy(),
        back = at("py-back"),
    ));
    let mut node = Command::new("node");
    node.current_dir(&ts).args(["--input-type=module", "-e"]).arg(format!(
        "import {{ Kairon }} from './dist/src/index.js';\n\
         const k = new Kairon({{ namespace: 'trees' }});\n\
         const sb = await k.sandbox.connect('trees');\n\
         await sb.files.downloadDir('/tmp/py', {from_py:?});\n\
         await sb.files.uploadDir({src:?}, '/tmp/ts');\n\
         await sb.files.downloadDir('/tmp/ts', {back:?});\n",
        from_py = at("ts-from-py"),
        src = src.to_string_lossy(),
        back = at("ts-back"),
    ));
    with_env(&mut node, &k);
    run("node", &mut node);
    py(&format!(
        "{head}sb = k.sandbox.connect('trees')\nsb.files.download_dir('/tmp/ts', {from_ts:?})\nsb.close()\n",
        from_ts = at("py-from-ts"),
    ));
    for copy in ["py-back", "ts-from-py", "ts-back", "py-from-ts"] {
        let dir = local.path().join(copy);
        assert_eq!(std::fs::read(dir.join("pkg/deep/blob.bin")).unwrap(), blob, "{copy}");
        assert_eq!(std::fs::read(dir.join("pkg/empty.txt")).unwrap(), b"", "{copy}");
        assert_eq!(std::fs::read(dir.join("run.sh")).unwrap(), b"#!/bin/sh\necho ran\n", "{copy}");
        let mode = std::fs::metadata(dir.join("run.sh")).unwrap().permissions().mode();
        assert_eq!(mode & 0o111, 0o111, "{copy}: run.sh stays executable");
    }
    assert_clean(&k, "trees").await;
}
