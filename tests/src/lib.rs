//! The end-to-end harness: starts `kairon up` as a user would (its own data dir, a fresh
//! database on the test PostgreSQL, a free port) and hands out kube-rs clients and kubectl.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

pub mod day_of_work;
pub mod flags;
pub mod mcp;
pub mod objects;
pub mod registry;
pub mod rest;
pub mod testbed;
pub mod wait;
pub use flags::Flags;
pub use objects::{phase, wait_for_object, wait_gone, wait_phase};
pub use rest::{Answer, Rest};
pub use wait::{MINUTE, during, eventually, hold, hold_sync, wait_for, wait_for_and_report, wait_for_sync};

/// PostgreSQL for tests; every Kairon instance gets its own database on it.
pub fn database_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:55432/postgres".into())
}

/// The `kairon` binary built alongside the tests (or `KAIRON_BIN`).
pub fn kairon_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("KAIRON_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test executable path");
    // Beside a binary in target/<profile>/, or one level up from a test in target/<profile>/deps/.
    let dir = exe.parent().expect("target dir");
    [dir.join("kairon"), dir.parent().map(|d| d.join("kairon")).unwrap_or_default()]
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| dir.join("kairon"))
}

/// What `kairon up` logs in the tests: its requests (the isolation tests read them back).
const DEFAULT_LOG: &str = "info,sqlx=warn,kairon_runtime::requests=debug,kairon_api::requests=debug";

fn psql(db_url: &str, sql: &str) -> Result<()> {
    psql_query(db_url, sql).map(drop)
}

/// Runs one SQL statement with psql on `db_url`; its rows, one a line, fields separated by
/// commas. A failure (no psql, no server, bad SQL) is an error that says so.
pub fn psql_query(db_url: &str, sql: &str) -> Result<String> {
    let out = Command::new("psql")
        .arg(db_url)
        .args(["-v", "ON_ERROR_STOP=1", "-qAt", "-F", ",", "-c", sql])
        .output()
        .context("running psql (the e2e tests need it on PATH)")?;
    if !out.status.success() {
        bail!("psql {sql:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `url` with its database replaced by `db`.
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = url.split_once('?').map(|(b, q)| (b, Some(q))).unwrap_or((url, None));
    let base = base.rsplit_once('/').map(|(b, _)| b).unwrap_or(base);
    match query {
        Some(q) => format!("{base}/{db}?{q}"),
        None => format!("{base}/{db}"),
    }
}

/// A running `kairon up`.
pub struct Kairon {
    child: Option<Child>,
    pub url: String,
    pub data_dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    pub admin_token: String,
    /// This node's runtime (when `kairon up` started one).
    pub runtime_url: Option<String>,
    /// The admission webhook's URL (`--webhook-listen`).
    pub webhook_url: Option<String>,
    database: Option<String>,
    database_url: Option<String>,
    extra: Vec<String>,
    pub log: PathBuf,
}

impl Kairon {
    /// `kairon up` on a fresh database with the given extra flags.
    pub fn start_with(extra: &[&str]) -> Result<Kairon> {
        Self::start_logging(extra, DEFAULT_LOG)
    }

    /// The same, logging what `log` (a `KAIRON_LOG` filter) says into `self.log`.
    pub fn start_logging(extra: &[&str], log: &str) -> Result<Kairon> {
        ensure_crypto();
        let db = format!("kairon_e2e_{}", uuid::Uuid::new_v4().simple());
        // No database is no test: this fails, loudly, rather than skip.
        psql(&database_url(), &format!("CREATE DATABASE {db}")).with_context(|| {
            format!(
                "the e2e tests need PostgreSQL at {} (DATABASE_URL, else the default) and psql on PATH",
                database_url()
            )
        })?;
        let url = with_database(&database_url(), &db);
        let data_dir = tempfile::Builder::new().prefix("kairon-e2e-").tempdir()?;
        let mut k = Self::spawn(data_dir, extra, Some(url), log)?;
        k.database = Some(db);
        Ok(k)
    }

    pub fn start() -> Result<Kairon> {
        Self::start_with(&[])
    }

    /// `kairon up` with no DATABASE_URL: it runs its own private PostgreSQL.
    pub fn start_private() -> Result<Kairon> {
        ensure_crypto();
        Self::spawn(tempfile::Builder::new().prefix("kairon-e2e-").tempdir()?, &[], None, DEFAULT_LOG)
    }

    /// Stops this instance and starts it again on the same data dir and database.
    pub fn restart(self) -> Result<Kairon> {
        let extra = self.extra.clone();
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        self.restart_with(&extra)
    }

    /// The same, with other extra flags (unless it was killed, it is stopped with SIGTERM first).
    pub fn restart_with(self, extra: &[&str]) -> Result<Kairon> {
        let mut old = self;
        if old.child.is_some() {
            old.stop()?;
        }
        let data_dir = std::mem::replace(&mut old.data_dir, tempfile::tempdir()?);
        let mut k = Self::spawn(data_dir, extra, old.database_url.clone(), DEFAULT_LOG)?;
        k.database = old.database.take();
        Ok(k)
    }

    /// SIGKILL: the server gets no chance to clean up (its sandboxes and database stay).
    pub fn kill9(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else { bail!("already stopped") };
        child.kill()?;
        child.wait()?;
        Ok(())
    }

    /// The database this instance runs on (None with a private PostgreSQL).
    pub fn database_url(&self) -> Option<&str> {
        self.database_url.as_deref()
    }

    fn spawn(
        data_dir: tempfile::TempDir,
        extra: &[&str],
        database_url: Option<String>,
        log_filter: &str,
    ) -> Result<Kairon> {
        let log = data_dir.path().join("kairon.log");
        let mut cmd = Command::new(kairon_bin());
        cmd.arg("up");
        // A test may pin the address (to restart on the same one); else any free port.
        if !extra.contains(&"--listen") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        // Many instances run at once here under one node name: on the host's namespace their
        // guest networks would share one nftables table and link names. A test that attaches
        // guests gives a node config whose `[network] netns` is a test bed's.
        if !extra.contains(&"--node-config") {
            cmd.arg("--no-guest-network");
        }
        cmd.arg("--data-dir")
            .arg(data_dir.path())
            .args(extra)
            .env_remove("DATABASE_URL")
            .env("KAIRON_LOG", log_filter)
            .stdout(Stdio::piped())
            .stderr(std::fs::OpenOptions::new().create(true).append(true).open(&log)?);
        if let Some(u) = &database_url {
            cmd.env("DATABASE_URL", u);
        }
        let mut child = cmd.spawn().with_context(|| format!("starting {}", kairon_bin().display()))?;
        let stdout = child.stdout.take().context("stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut url = None;
            let mut runtime = None;
            let mut webhook = None;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(u) = line.strip_prefix("Kairon is up at ") {
                    url = Some(u.trim().to_string());
                }
                if let Some(r) = line.trim().strip_prefix("runtime:") {
                    runtime = r.split_whitespace().next().map(String::from);
                }
                if let Some(w) = line.trim().strip_prefix("webhook:") {
                    webhook = Some(w.trim().to_string());
                }
                if let Some(t) = line.trim().strip_prefix("admin token: ")
                    && let Some(u) = url.take()
                {
                    let _ = tx.send((u, t.trim().to_string(), runtime.take(), webhook.take()));
                }
            }
        });
        let (url, admin_token, runtime_url, webhook_url) = match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(v) => v,
            Err(_) => {
                let _ = child.kill();
                bail!("kairon up did not start: {}", std::fs::read_to_string(&log).unwrap_or_default());
            }
        };
        let kubeconfig = data_dir.path().join("kubeconfig");
        let extra = extra.iter().map(|s| s.to_string()).collect();
        Ok(Kairon {
            child: Some(child),
            url,
            data_dir,
            kubeconfig,
            admin_token,
            runtime_url,
            webhook_url,
            database: None,
            database_url,
            extra,
            log,
        })
    }

    /// A kube-rs client from the kubeconfig `kairon up` wrote.
    pub async fn client(&self) -> Result<kube::Client> {
        self.client_with_token(None).await
    }

    /// The same, authenticated with another token.
    pub async fn client_with_token(&self, token: Option<&str>) -> Result<kube::Client> {
        let mut kc = kube::config::Kubeconfig::read_from(&self.kubeconfig)?;
        if let Some(t) = token {
            for user in &mut kc.auth_infos {
                if let Some(auth) = user.auth_info.as_mut() {
                    auth.token = Some(t.to_string().into());
                }
            }
        }
        let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
        Ok(kube::Client::try_from(cfg)?)
    }

    /// A client of this node's runtime (the one `kairon up` runs in-process).
    pub fn runtime(&self) -> Result<kairon_runtime_api::RuntimeClient> {
        let url = self.runtime_url.as_deref().context("this kairon up runs no runtime")?;
        let token = std::fs::read_to_string(self.data_dir.path().join("runtime-token"))?;
        Ok(kairon_runtime_api::RuntimeClient::new(url, token.trim())?)
    }

    /// Runs kubectl against this instance.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .env("KUBECONFIG", &self.kubeconfig)
            .args(args)
            .output()
            .expect("kubectl must be installed (the README's test command installs it)")
    }

    /// kubectl that must succeed; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// kubectl with a manifest on stdin.
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> Output {
        use std::io::Write;
        let mut child = Command::new("kubectl")
            .env("KUBECONFIG", &self.kubeconfig)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl");
        child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write manifest");
        child.wait_with_output().expect("kubectl output")
    }

    /// `kairon token` for this instance.
    pub fn token(&self, sub: &str, role: &str, namespaces: &[&str]) -> Result<String> {
        let mut cmd = Command::new(kairon_bin());
        cmd.args(["token", "--data-dir"]).arg(self.data_dir.path()).args(["--sub", sub, "--role", role]);
        if !namespaces.is_empty() {
            cmd.args(["--namespaces", &namespaces.join(",")]);
        }
        let out = cmd.output()?;
        if !out.status.success() {
            bail!("kairon token: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8(out.stdout)?.trim().to_string())
    }

    /// Stops the server with SIGTERM (as Ctrl-C would) and waits for it.
    pub fn stop(&mut self) -> Result<std::process::ExitStatus> {
        let Some(mut child) = self.child.take() else { bail!("already stopped") };
        Command::new("kill").args(["-TERM", &child.id().to_string()]).status()?;
        // A private PostgreSQL writes a shutdown checkpoint, which a busy CI disk can make slow.
        for _ in 0..1200 {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        child.kill()?;
        bail!("kairon up did not stop within 120 s of SIGTERM")
    }

    /// The database this instance uses (unset for a private PostgreSQL).
    pub fn database(&self) -> Option<&str> {
        self.database_url.as_deref()
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `kairon node` for another node beside this `kairon up`, named `name`, with a runtime of
    /// its own on `state` (the API reaches it with its runtime token, as a cluster's Secret
    /// gives it), ticking every second; `extra` flags go after.
    pub fn second_node(&self, name: &str, state: &Path, extra: &[&str]) -> Result<Process> {
        let token = std::fs::read_to_string(self.data_dir.path().join("runtime-token"))?;
        let kubeconfig = self.kubeconfig.to_string_lossy().to_string();
        let state = state.to_string_lossy().to_string();
        let mut args = vec![
            "node",
            "--runtime-token",
            token.trim(),
            "--kubeconfig",
            &kubeconfig,
            "--node-name",
            name,
            "--state-dir",
            &state,
            "--heartbeat-interval",
            "1s",
            "--node-tick",
            "1s",
        ];
        args.extend_from_slice(extra);
        Process::start(&args, "is up")
    }
}

impl Drop for Kairon {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.stop();
        }
        // Sandboxes outlive their runtime on purpose (a restarted node adopts them); a test's
        // must not outlive the test.
        if let Ok(nodes) = std::fs::read_dir(self.data_dir.path().join("runtime")) {
            for node in nodes.flatten() {
                remove_sandboxes(&node.path());
            }
        }
        // So do VMs (QEMU processes).
        kairon_runtime::vm::kill_all_under(self.data_dir.path());
        if let Some(db) = &self.database {
            let _ = psql(&database_url(), &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"));
        }
    }
}

/// Kills and removes every runc sandbox a runtime state dir holds, and unmounts their roots.
///
/// Not `runc kill --all`: on cgroup v1 it freezes the cgroup first, and a task caught in
/// execve can keep that freeze from finishing, which hangs runc (and the test) for good. Each
/// container's cgroup is thawed and its processes are killed directly instead.
pub fn remove_sandboxes(state_dir: &Path) {
    kairon_runtime::sandbox::remove_all_under(state_dir);
}

/// Removes a runtime state dir's sandboxes and kills its VMs' QEMUs when dropped (for `kairon
/// runtime` / `kairon node` processes a test starts with `--state-dir`).
pub struct SandboxCleanup(pub PathBuf);

impl Drop for SandboxCleanup {
    fn drop(&mut self) {
        remove_sandboxes(&self.0);
        kairon_runtime::vm::kill_all_under(&self.0);
    }
}

/// A `kairon` subprocess (node agent, runtime) whose stdout is read until `ready` appears.
pub struct Process {
    pub child: Child,
    pub ready_line: String,
    /// What it printed after its ready line, as it comes.
    later: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Process {
    pub fn start(args: &[&str], ready: &str) -> Result<Process> {
        let mut child = Command::new(kairon_bin())
            .args(args)
            .env("KAIRON_LOG", "info,sqlx=warn,kube=warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
        let ready_line = loop {
            match lines.next() {
                Some(Ok(l)) if l.contains(ready) => break l,
                Some(_) => {}
                None => bail!("kairon {args:?} exited before printing {ready:?}"),
            }
        };
        let later = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = later.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Ok(Process { child, ready_line, later })
    }

    /// The first line it printed after its ready line that contains `needle`, waiting for it.
    pub fn line_with(&self, needle: &str) -> Result<String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(l) = self.later.lock().unwrap().iter().find(|l| l.contains(needle)) {
                return Ok(l.clone());
            }
            if std::time::Instant::now() > deadline {
                bail!("no line with {needle:?} after {:?}", self.ready_line);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: no chance to clean up.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A node of its own beside a `kairon up --no-runtime`: a `kairon runtime` process on a state
/// dir and a `kairon node` agent (with the scheduler, ticking every second) for it; its
/// sandboxes go when it is dropped.
pub struct SeparateNode {
    pub name: String,
    pub runtime: Process,
    pub agent: Option<Process>,
    /// The runtime's URL and token.
    pub endpoint: String,
    pub token: String,
    /// How the runtime was started, listening on the address it got the first time.
    runtime_args: Vec<String>,
    agent_args: Vec<String>,
    _cleanup: SandboxCleanup,
}

impl SeparateNode {
    /// Starts both beside `k`; `runtime_extra` goes to `kairon runtime` (`--config FILE`).
    pub fn start(k: &Kairon, name: &str, state: &Path, runtime_extra: &[&str]) -> Result<SeparateNode> {
        // The cluster's runtime token, so the api reaches this node's runtime too.
        let token = std::fs::read_to_string(k.data_dir.path().join("runtime-token"))?.trim().to_string();
        Self::start_with(&k.kubeconfig, &token, name, state, runtime_extra, true)
    }

    /// Starts both with the node agent on `kubeconfig`, the runtime with `token`; `scheduler`:
    /// the node agent runs the controllers too (a cluster runs them in `kairon controller`).
    pub fn start_with(
        kubeconfig: &Path,
        token: &str,
        name: &str,
        state: &Path,
        runtime_extra: &[&str],
        scheduler: bool,
    ) -> Result<SeparateNode> {
        let token = token.to_string();
        let cleanup = SandboxCleanup(state.to_path_buf());
        let state_dir = state.to_string_lossy().to_string();
        let mut args = vec![
            "runtime",
            "--listen",
            "127.0.0.1:0",
            "--node-name",
            name,
            "--token",
            &token,
            "--state-dir",
            &state_dir,
        ];
        args.extend_from_slice(runtime_extra);
        let runtime = Process::start(&args, "is up at")?;
        // "Kairon runtime is up at URL", then "(certificate sha256:PIN)" over TLS.
        let after = runtime.ready_line.split("is up at").nth(1).unwrap_or_default();
        let endpoint = after.split_whitespace().next().context("the runtime's URL")?.to_string();
        // A restart listens where the node agent and the KaironNode say it does.
        let address = endpoint.split("://").nth(1).context("the runtime's address")?.to_string();
        let runtime_args: Vec<String> =
            args.iter().map(|a| if *a == "127.0.0.1:0" { address.clone() } else { a.to_string() }).collect();
        let pin = after.split("sha256:").nth(1).map(|p| p.trim_end_matches(')').to_string());
        let mut agent_args: Vec<String> = [
            "node",
            "--kubeconfig",
            &kubeconfig.to_string_lossy(),
            "--node-name",
            name,
            "--runtime-endpoint",
            &endpoint,
            "--runtime-token",
            &token,
            "--heartbeat-interval",
            "1s",
            "--node-tick",
            "1s",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        if scheduler {
            agent_args.push("--scheduler".into());
        }
        if let Some(pin) = pin {
            agent_args.extend(["--runtime-certificate-sha256".to_string(), pin]);
        }
        let mut node = SeparateNode {
            name: name.to_string(),
            runtime,
            agent: None,
            endpoint,
            token,
            runtime_args,
            agent_args,
            _cleanup: cleanup,
        };
        node.start_agent()?;
        Ok(node)
    }

    /// Starts the node agent (again).
    pub fn start_agent(&mut self) -> Result<()> {
        let args: Vec<&str> = self.agent_args.iter().map(String::as_str).collect();
        self.agent = Some(Process::start(&args, "is up")?);
        Ok(())
    }

    /// kill -9 of the node agent.
    pub fn kill_agent(&mut self) {
        if let Some(mut a) = self.agent.take() {
            a.kill9();
        }
    }

    /// kill -9 of the runtime, then the same runtime again on its state dir and address.
    pub fn restart_runtime(&mut self, after: Duration) -> Result<()> {
        self.runtime.kill9();
        std::thread::sleep(after);
        let args: Vec<&str> = self.runtime_args.iter().map(String::as_str).collect();
        self.runtime = Process::start(&args, "is up at")?;
        Ok(())
    }

    /// A client of its runtime.
    pub fn runtime_client(&self) -> Result<kairon_runtime_api::RuntimeClient> {
        Ok(kairon_runtime_api::RuntimeClient::new(&self.endpoint, &self.token)?)
    }
}

/// kube-rs and rustls need one process-wide crypto provider.
pub fn ensure_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The YAML documents of the product specs (`../shared/spec/*.md`), as the user reads them.
pub fn spec_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/spec")
}

/// `text` without its ANSI escape sequences (the colours of a log line).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
