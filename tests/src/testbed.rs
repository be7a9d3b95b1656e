//! A real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager) for the tests
//! of Kairon's cluster mode, started by `scripts/k8s-testbed run DIR`, with the kubectl and helm
//! of the same build. One control plane serves every test of a test binary; each test works in
//! namespaces of its own. It stops when the test binary exits: `run` stops it when its standard
//! input, held by this process, closes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result, bail};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/k8s-testbed")
}

/// The directory of the testbed's binaries (kube-apiserver, kubectl, helm, …), built on first
/// use (`scripts/k8s-testbed bin`).
pub fn bin_dir() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = Command::new(script()).arg("bin").stderr(Stdio::inherit()).output().expect("scripts/k8s-testbed");
        assert!(out.status.success(), "scripts/k8s-testbed bin failed");
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

/// A binary of the testbed's build: `kubectl`, `helm`, …
pub fn bin(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// A running control plane.
pub struct Testbed {
    pub dir: PathBuf,
    /// The installer's credential (system:masters): nothing of Kairon's runs with it.
    pub kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
    // Held open: the control plane stops when it closes.
    _keepalive: Mutex<(Child, ChildStdin)>,
}

impl Testbed {
    /// The control plane of this test binary, started on first use.
    pub fn shared() -> &'static Testbed {
        static SHARED: OnceLock<Testbed> = OnceLock::new();
        SHARED.get_or_init(|| Testbed::start().expect("starting the Kubernetes testbed"))
    }

    pub fn start() -> Result<Testbed> {
        bin_dir();
        let dir = tempfile::Builder::new().prefix("kairon-k8s-").tempdir()?;
        let mut child = Command::new(script())
            .arg("run")
            .arg(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("scripts/k8s-testbed run")?;
        let stdin = child.stdin.take().unwrap();
        let mut kubeconfig = None;
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line?;
            if let Some(path) = line.strip_prefix("KUBECONFIG=") {
                kubeconfig = Some(PathBuf::from(path));
                break;
            }
        }
        let Some(kubeconfig) = kubeconfig else {
            let _ = child.wait();
            bail!("the testbed did not start; its logs are in {}/logs", dir.path().display());
        };
        Ok(Testbed { dir: dir.path().to_path_buf(), kubeconfig, _dir: dir, _keepalive: Mutex::new((child, stdin)) })
    }

    /// kubectl as the installer, its output whatever it is.
    pub fn kubectl_output(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.kubectl_as(&self.kubeconfig, args, stdin)
    }

    /// kubectl as the installer; its standard output, or an error with what it said.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        checked(self.kubectl_output(args, None), &format!("kubectl {}", args.join(" ")))
    }

    /// `kubectl apply -f -` of `yaml` as the installer.
    pub fn apply(&self, yaml: &str) -> Result<String> {
        checked(self.kubectl_output(&["apply", "-f", "-"], Some(yaml)), "kubectl apply")
    }

    /// helm against this control plane.
    pub fn helm(&self, args: &[&str]) -> Result<String> {
        let out = run_with_input(Command::new(bin("helm")).arg("--kubeconfig").arg(&self.kubeconfig).args(args), None);
        checked(out, &format!("helm {}", args.join(" ")))
    }

    /// A kubeconfig of client-certificate user `name` (in `group`, if any), signed by the
    /// testbed's CA: the API server knows it, RBAC gives it nothing until a binding names it.
    pub fn user(&self, name: &str, group: Option<&str>) -> Result<PathBuf> {
        let out = Command::new(script()).arg("user").arg(&self.dir).arg(name).args(group).output()?;
        let path = checked(out, &format!("k8s-testbed user {name}"))?;
        Ok(PathBuf::from(path.trim()))
    }

    /// kubectl as the user of `kubeconfig`, its output whatever it is.
    pub fn kubectl_as(&self, kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
        run_with_input(Command::new(bin("kubectl")).arg("--kubeconfig").arg(kubeconfig).args(args), stdin)
    }

    /// The apiserver's port on 127.0.0.1.
    pub fn server(&self) -> String {
        let port = std::fs::read_to_string(self.dir.join("apiserver.port")).unwrap();
        format!("https://127.0.0.1:{}", port.trim())
    }

    /// The CA the apiserver's certificate is signed by.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("pki/ca.crt")
    }

    /// The audit log's events so far (one JSON object each; `Metadata` level: who, what, the
    /// answer's code and the authorization decision in `annotations`).
    pub fn audit(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.dir.join("audit.log")).unwrap_or_default();
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    /// The audit events of requests RBAC refused, as one line each.
    pub fn forbidden(&self) -> Vec<String> {
        self.audit()
            .iter()
            .filter(|e| e["annotations"]["authorization.k8s.io/decision"] == "forbid")
            .map(|e| {
                format!(
                    "{} {} {}",
                    e["user"]["username"].as_str().unwrap_or_default(),
                    e["verb"].as_str().unwrap_or_default(),
                    e["requestURI"].as_str().unwrap_or_default()
                )
            })
            .collect()
    }

    /// Kairon's CRDs, applied once and Established.
    pub fn install_crds(&self) {
        static ONCE: OnceLock<()> = OnceLock::new();
        ONCE.get_or_init(|| {
            let crds = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds.yaml");
            self.kubectl(&["apply", "--server-side", "-f", crds.to_str().unwrap()]).unwrap();
            let names: Vec<String> =
                kairon_model::crds::all().into_iter().map(|c| format!("crd/{}", c.metadata.name.unwrap())).collect();
            let mut args = vec!["wait", "--for=condition=Established", "--timeout=60s"];
            args.extend(names.iter().map(String::as_str));
            self.kubectl(&args).unwrap();
        });
    }
}

/// A kube-rs client from a kubeconfig file.
pub async fn client(kubeconfig: &Path) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).expect("a kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.expect("its config");
    kube::Client::try_from(config).expect("a client")
}

fn run_with_input(cmd: &mut Command, stdin: Option<&str>) -> Output {
    use std::io::Write;
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawning a testbed binary");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn checked(out: Output, what: &str) -> Result<String> {
    if !out.status.success() {
        bail!("{what}: {}{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A fresh database on the test PostgreSQL, dropped with it.
pub struct Database {
    pub name: String,
    pub url: String,
}

impl Database {
    pub fn create() -> Result<Database> {
        let name = format!("kairon_k8s_{}", uuid::Uuid::new_v4().simple());
        crate::psql_query(&crate::database_url(), &format!("CREATE DATABASE {name}"))?;
        Ok(Database { url: crate::with_database(&crate::database_url(), &name), name })
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ =
            crate::psql_query(&crate::database_url(), &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
    }
}

/// The namespace Kairon's components and their ServiceAccounts live in.
pub const SYSTEM: &str = "kairon-system";

/// Kairon installed on a testbed as a user would: the kustomize base (CRDs, namespace,
/// ServiceAccounts, RBAC, webhook configuration) applied by the installer, then `kairon api`,
/// two `kairon controller`s and two nodes (`kairon runtime` + `kairon node`) as processes, each
/// with a bound token of its own ServiceAccount (TokenRequest) — no admin credential anywhere
/// but the installer's. Pods never run here (no kubelet): the processes stand for them, and the
/// webhook configuration is pointed at the api's webhook listener by URL (a Service needs
/// endpoints a kubelet-less cluster cannot give a loopback address).
pub struct Install {
    pub testbed: &'static Testbed,
    pub api: crate::Process,
    /// How the api was started, but where it listens (another replica starts the same way).
    api_args: Vec<String>,
    /// Where it listens (API, webhook): a restart listens there again.
    api_listen: [String; 2],
    pub api_url: String,
    /// The api's CA (its data dir's).
    pub api_ca: Vec<u8>,
    /// An admin token of the api (`kairon token`).
    pub admin_token: String,
    pub controllers: Vec<crate::Process>,
    controller_args: Vec<Vec<String>>,
    pub nodes: Vec<crate::SeparateNode>,
    pub database: Database,
    pub dir: tempfile::TempDir,
    pub runtime_token: String,
}

impl Install {
    /// Installs on the shared testbed with `nodes` nodes.
    pub fn start(nodes: &[&str]) -> Result<Install> {
        crate::ensure_crypto();
        let tb = Testbed::shared();
        let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/kustomize");
        tb.kubectl(&["apply", "--server-side", "-k", base.to_str().unwrap()])?;
        let dir = tempfile::Builder::new().prefix("kairon-install-").tempdir()?;
        let database = Database::create()?;
        let runtime_token = uuid::Uuid::new_v4().simple().to_string() + &uuid::Uuid::new_v4().simple().to_string();

        let api_dir = dir.path().join("api");
        let api_kubeconfig = tb.service_account_kubeconfig(dir.path(), "kairon-api", None)?;
        let client_ca = tb.ca();
        let api_args: Vec<String> = [
            "api",
            "--kubeconfig",
            api_kubeconfig.to_str().unwrap(),
            "--data-dir",
            api_dir.to_str().unwrap(),
            "--database-url",
            &database.url,
            "--runtime-token",
            &runtime_token,
            "--webhook-client-ca",
            client_ca.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec();
        // Fixed ports, so the api killed and started again is where the webhook configuration,
        // the clients and the tests look for it.
        let api_listen = [free_address()?, free_address()?];
        let (api, api_url) = start_api(&api_args, &api_listen)?;
        let webhook_url = api.line_with("webhook:")?.trim().trim_start_matches("webhook:").trim().to_string();
        let api_ca = std::fs::read(api_dir.join("tls/ca.crt"))?;
        let out = Command::new(crate::kairon_bin())
            .args(["token", "--data-dir", api_dir.to_str().unwrap(), "--sub", "ops", "--role", "admin"])
            .output()?;
        let admin_token = String::from_utf8(out.stdout)?.trim().to_string();

        // The webhook configuration of the base (Kairon's kinds, node agents' Events), pointed at
        // the api's own webhook listener.
        let ca_bundle = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &api_ca);
        let client_config = serde_json::json!({"url": webhook_url, "caBundle": ca_bundle});
        let patch = serde_json::json!([
            {"op": "replace", "path": "/webhooks/0/clientConfig", "value": client_config},
            {"op": "replace", "path": "/webhooks/1/clientConfig", "value": client_config}
        ]);
        tb.kubectl(&["patch", "validatingwebhookconfiguration", "kairon", "--type", "json", "-p", &patch.to_string()])?;

        let controller_kubeconfig = tb.service_account_kubeconfig(dir.path(), "kairon-controller", None)?;
        let controller_args: Vec<Vec<String>> = ["controller-0", "controller-1"]
            .map(|identity| {
                [
                    "controller",
                    "--kubeconfig",
                    controller_kubeconfig.to_str().unwrap(),
                    "--identity",
                    identity,
                    "--database-url",
                    &database.url,
                    // Test tunings: usage intervals every 2 s (30 s otherwise) and a 5 s Lease
                    // (15 s), so the stories take seconds.
                    "--test-usage-interval",
                    "2s",
                    "--test-lease-duration",
                    "5s",
                ]
                .map(String::from)
                .to_vec()
            })
            .to_vec();
        let controllers = controller_args.iter().map(|args| start_controller(args)).collect::<Result<Vec<_>>>()?;
        let mut separate = Vec::new();
        for node in nodes {
            let kubeconfig = tb.service_account_kubeconfig(dir.path(), "kairon-node", Some(node))?;
            let state = dir.path().join(format!("node-{node}"));
            separate.push(crate::SeparateNode::start_with(&kubeconfig, &runtime_token, node, &state, &[], false)?);
        }
        Ok(Install {
            testbed: tb,
            api,
            api_args,
            api_listen,
            api_url,
            api_ca,
            admin_token,
            controllers,
            controller_args,
            nodes: separate,
            database,
            dir,
            runtime_token,
        })
    }
}

/// `kairon api` with `args`, listening on `listen` (API, webhook): the process and the URL it
/// serves.
fn start_api(args: &[String], [api, webhook]: &[String; 2]) -> Result<(crate::Process, String)> {
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend(["--listen", api, "--webhook-listen", webhook]);
    let api = crate::Process::start(&args, "Kairon API is up at ")?;
    let url = api.ready_line.trim().trim_start_matches("Kairon API is up at ").to_string();
    Ok((api, url))
}

fn start_controller(args: &[String]) -> Result<crate::Process> {
    crate::Process::start(&args.iter().map(String::as_str).collect::<Vec<_>>(), "is up")
}

/// A loopback address no one listens on now.
fn free_address() -> Result<String> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.to_string())
}

impl Install {
    /// Another replica of the api, as the chart's Deployment runs them: the same identity,
    /// database and keys (its data dir), listening on ports of its own.
    pub fn another_api(&self) -> Result<(crate::Process, String)> {
        start_api(&self.api_args, &["127.0.0.1:0".into(), "127.0.0.1:0".into()])
    }

    /// kill -9 of the api; `after` that, the same api again, where it listened.
    pub fn restart_api(&mut self, after: Duration) -> Result<()> {
        self.api.kill9();
        std::thread::sleep(after);
        self.api = start_api(&self.api_args, &self.api_listen)?.0;
        Ok(())
    }

    /// The index in `controllers` of the one holding the Lease now.
    pub fn leading_controller(&self) -> Result<usize> {
        let leader = self.testbed.kubectl(&[
            "get",
            "lease",
            "kairon-controller",
            "-n",
            SYSTEM,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])?;
        self.controller_args
            .iter()
            .position(|args| args.contains(&leader))
            .with_context(|| format!("no controller of this install leads ({leader:?})"))
    }

    /// kill -9 of controller `index`; `after` that, the same controller again.
    pub fn restart_controller(&mut self, index: usize, after: Duration) -> Result<()> {
        self.controllers[index].kill9();
        std::thread::sleep(after);
        self.controllers[index] = start_controller(&self.controller_args[index])?;
        Ok(())
    }

    /// The kubeconfig of node `node`'s agent (a token bound to a Pod on that node).
    pub fn node_kubeconfig(&self, node: &str) -> PathBuf {
        self.dir.path().join(format!("kairon-node-{node}.kubeconfig"))
    }

    /// Waits until every node of the install registered its KaironNode.
    pub fn wait_for_nodes(&self) {
        let want: Vec<String> = self.nodes.iter().map(|n| format!("kaironnode.kairon.zyvor.dev/{}", n.name)).collect();
        crate::wait::wait_for_sync(
            "every node registered",
            Duration::from_secs(60),
            Duration::from_millis(300),
            || {
                let names = self.testbed.kubectl(&["get", "kaironnodes", "-o", "name"]).map_err(|e| e.to_string())?;
                if want.iter().all(|w| names.lines().any(|l| l == w)) { Ok(()) } else { Err(names) }
            },
        );
    }

    /// A kube-rs client as node `node`'s agent.
    pub async fn node_client(&self, node: &str) -> kube::Client {
        client(&self.node_kubeconfig(node)).await
    }

    /// A token of the api (`kairon token`) for `sub` with `role` in `namespaces`.
    pub fn token(&self, sub: &str, role: &str, namespaces: &[&str]) -> Result<String> {
        let api_dir = self.dir.path().join("api");
        let out = Command::new(crate::kairon_bin())
            .args(["token", "--data-dir", api_dir.to_str().unwrap(), "--sub", sub, "--role", role])
            .args(["--namespaces", &namespaces.join(",")])
            .output()?;
        anyhow::ensure!(out.status.success(), "kairon token: {}", String::from_utf8_lossy(&out.stderr));
        Ok(String::from_utf8(out.stdout)?.trim().to_string())
    }

    /// A REST client of the api with its admin token.
    pub fn rest(&self) -> crate::Rest {
        crate::Rest::new(&self.api_url, &self.admin_token, self.api_ca.clone()).unwrap()
    }
}

impl Testbed {
    /// A kubeconfig for ServiceAccount `account` of [`SYSTEM`] with a bound token (TokenRequest,
    /// the API server's audience, a day): bound to a Pod on node `node` when one is given, as a
    /// DaemonSet's pod's token is (the API server then names the node in the token's
    /// `authentication.kubernetes.io/node-name`).
    pub fn service_account_kubeconfig(&self, dir: &Path, account: &str, node: Option<&str>) -> Result<PathBuf> {
        let mut args = vec!["create", "token", account, "-n", SYSTEM, "--duration", "24h"];
        let pod;
        if let Some(node) = node {
            pod = format!("{account}-{node}");
            self.apply(&format!(
                "apiVersion: v1\nkind: Node\nmetadata:\n  name: {node}\n  labels: {{kairon.zyvor.dev/node: \"true\"}}\n---\n\
                 apiVersion: v1\nkind: Pod\nmetadata:\n  name: {pod}\n  namespace: {SYSTEM}\nspec:\n  nodeName: {node}\n  \
                 serviceAccountName: {account}\n  automountServiceAccountToken: false\n  containers:\n  - name: node\n    image: kairon\n"
            ))?;
            args.extend(["--bound-object-kind", "Pod", "--bound-object-name", &pod]);
        }
        let token = self.kubectl(&args)?.trim().to_string();
        let file = dir.join(format!("{account}-{}.kubeconfig", node.unwrap_or("all")));
        std::fs::write(
            &file,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: testbed\n  cluster:\n    server: {}\n    \
                 certificate-authority: {}\nusers:\n- name: {account}\n  user:\n    token: {token}\ncontexts:\n\
                 - name: testbed\n  context: {{cluster: testbed, user: {account}}}\ncurrent-context: testbed\n",
                self.server(),
                self.ca().display()
            ),
        )?;
        Ok(file)
    }
}
