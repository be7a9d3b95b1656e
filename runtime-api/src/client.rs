//! The one client of the runtime API: the node agent and the api reach a node's runtime only
//! through this. Every URL is the endpoint plus percent-encoded segments built from typed IDs;
//! there is no method that takes a raw path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::grant::GrantSigner;
use crate::ids::{GuestPath, InstanceId, Pid, PoolName, TemplateName};
use crate::pin::CertificatePin;
use crate::types::{
    ClaimRequest, CreatePoolRequest, CreateTemplateRequest, CreateVmRequest, EgressCheckRequest, EgressDecision,
    EgressDenials, ErrorBody, ExecRequest, ExecResult, FileEntry, ForkRequest, ForkResult, FreezeResult, FreezeStatus,
    Import, Pool, PowerAction, Process, SetOwnerRequest, SnapshotRequest, SnapshotResult, Stats, Template, Vm,
};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The runtime answered with an error (its reason and message are kept).
    #[error("{message}")]
    Api { status: u16, reason: String, message: String },
    #[error("the runtime at {endpoint} is unreachable: {message}")]
    Unreachable { endpoint: String, message: String },
    #[error("unexpected answer from the runtime: {0}")]
    Decode(String),
    /// The endpoint of a node is not a usable base URL.
    #[error("runtime endpoint {0:?} is not an http(s) URL")]
    BadEndpoint(String),
}

impl ClientError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, ClientError::Api { status: 404, .. })
    }
}

type Result<T> = std::result::Result<T, ClientError>;

/// A WebSocket to the runtime, as `tokio-tungstenite` opens it.
pub type RelaySocket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The WebSocket relays of an instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Relay {
    /// The serial console of a VM, a shell in a sandbox.
    Console,
    /// QEMU's VNC server (RFB bytes).
    Vnc,
    /// Raw TCP to a guest port.
    Tunnel(u16),
    /// A command with stdin and output streamed; `command` is its JSON array, `env` its
    /// environment variables (the caller's over the Machine's `spec.env`), `user` and `cwd`
    /// who it runs as and where, `tty` a terminal's (columns, rows) to run it on.
    ExecStream {
        command: String,
        env: std::collections::BTreeMap<String, String>,
        user: Option<String>,
        cwd: Option<String>,
        tty: Option<(u16, u16)>,
    },
}

/// The connections shared by every client of one process: one pool for API calls and one for
/// relayed guest HTTP (which follows no redirects, so the runtime token never leaves for
/// wherever a guest points), per way of verifying runtimes: the system's roots or the runtimes'
/// CA, or a node's pinned certificate. Cheap to clone; make one per process and a client per
/// node.
#[derive(Clone)]
pub struct RuntimeConnector {
    credential: Credential,
    /// For `http` runtimes, and `https` ones verified by the CA given (or the system's roots).
    trusted: Arc<Pools>,
    /// For `https` runtimes whose node registered its certificate, by that certificate.
    pinned: Arc<Mutex<HashMap<CertificatePin, Arc<Pools>>>>,
}

struct Pools {
    http: reqwest::Client,
    relay: reqwest::Client,
    /// How WebSockets to `https` runtimes are verified, when not by the system's roots.
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl Pools {
    fn new(tls: Option<rustls::ClientConfig>) -> Result<Pools> {
        let build = || {
            let mut b = reqwest::Client::builder();
            if let Some(tls) = &tls {
                b = b.tls_backend_preconfigured(tls.clone());
            }
            b.connect_timeout(Duration::from_secs(5))
                .pool_max_idle_per_host(32)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| ClientError::Unreachable { endpoint: String::new(), message: e.to_string() })
        };
        Ok(Pools { http: build()?, relay: build()?, tls: tls.map(Arc::new) })
    }
}

/// Past this many pinned certificates (nodes, or one node's certificate changing), the pools of
/// the others are dropped and made again on use.
const PINNED_POOLS_MAX: usize = 1024;

impl RuntimeConnector {
    /// Connections to runtimes on loopback (`http`), or reached over TLS by certificates the
    /// system trusts.
    pub fn new(token: &str) -> Result<Self> {
        Self::with_ca(token, None)
    }

    /// Connections to runtimes whose certificates `ca` signs (PEM: the CA that issued the
    /// runtimes' certificates, for `https` endpoints whose node registered no certificate of
    /// its own), or as [`Self::new`].
    pub fn with_ca(token: &str, ca: Option<&[u8]>) -> Result<Self> {
        Self::with_credential(Credential::Token(token.into()), ca)
    }

    /// As [`Self::with_ca`], authenticating with `credential`.
    pub fn with_credential(credential: Credential, ca: Option<&[u8]>) -> Result<Self> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        // reqwest is built without a default TLS provider: the workspace uses ring throughout.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let bad_ca = |e: String| ClientError::BadEndpoint(format!("the runtimes' CA: {e}"));
        let tls = match ca {
            Some(pem) => {
                let mut store = rustls::RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(pem) {
                    store.add(cert.map_err(|e| bad_ca(e.to_string()))?).map_err(|e| bad_ca(e.to_string()))?;
                }
                if store.is_empty() {
                    return Err(bad_ca("no certificate in it".into()));
                }
                Some(rustls::ClientConfig::builder().with_root_certificates(store).with_no_client_auth())
            }
            None => None,
        };
        Ok(RuntimeConnector { credential, trusted: Arc::new(Pools::new(tls)?), pinned: Default::default() })
    }

    /// The client of the runtime at `endpoint` (`http://host:port`), on the shared pools, with
    /// the one runtime token.
    pub fn client(&self, endpoint: &str) -> Result<RuntimeClient> {
        if matches!(self.credential, Credential::Grants(_)) {
            return Err(ClientError::BadEndpoint(format!(
                "{endpoint}: runtimes reached with per-node grants are named by node (client_for)"
            )));
        }
        self.client_for("", endpoint, None)
    }

    /// The client of `node`'s runtime at `endpoint`: with per-node grants, each request carries
    /// a grant for that node only; with a `pin` (the certificate the node registered), an
    /// `https` runtime is trusted only if it presents that certificate.
    pub fn client_for(&self, node: &str, endpoint: &str, pin: Option<CertificatePin>) -> Result<RuntimeClient> {
        let base = Url::parse(endpoint.trim_end_matches('/')).map_err(|_| ClientError::BadEndpoint(endpoint.into()))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(ClientError::BadEndpoint(endpoint.into()));
        }
        let pools = match pin {
            Some(pin) if base.scheme() == "https" => self.pinned_pools(pin)?,
            Some(_) => {
                return Err(ClientError::BadEndpoint(format!(
                    "{endpoint}: the node registered a certificate, so its runtime is reached over https only"
                )));
            }
            None => self.trusted.clone(),
        };
        Ok(RuntimeClient { base, credential: self.credential.clone(), pools, owner: None, node: node.into() })
    }

    fn pinned_pools(&self, pin: CertificatePin) -> Result<Arc<Pools>> {
        let mut pinned = self.pinned.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pools) = pinned.get(&pin) {
            return Ok(pools.clone());
        }
        if pinned.len() >= PINNED_POOLS_MAX {
            pinned.clear();
        }
        let pools = Arc::new(Pools::new(Some(pin.client_config()))?);
        pinned.insert(pin, pools.clone());
        Ok(pools)
    }
}

/// How a process proves itself to runtimes: the one runtime token (a single node, `kairon up`,
/// a node agent to its own runtime), or grants the api signs per node (across a cluster; see
/// [`crate::grant`]).
#[derive(Clone)]
pub enum Credential {
    Token(Arc<str>),
    Grants(Arc<GrantSigner>),
}

/// The header that names the Machine (its UID) a request acts for: the runtime refuses an
/// instance-scoped request whose instance belongs to another owner (409 `NotProvisioned`), so
/// the api needs no lookup of its own before using an instance.
pub const OWNER_HEADER: &str = "kairon-owner-uid";

/// The header an exec stream's environment travels in (base64 of its JSON object): never in
/// the URL, which logs and proxies keep (it may hold a Machine's `spec.secretEnv` values).
pub const EXEC_ENV_HEADER: &str = "kairon-exec-env";

#[derive(Clone)]
pub struct RuntimeClient {
    base: Url,
    credential: Credential,
    pools: Arc<Pools>,
    /// The Machine UID every request names in [`OWNER_HEADER`], when acting for one.
    owner: Option<Arc<str>>,
    /// The node whose runtime this is (what a grant is for).
    node: Arc<str>,
}

impl RuntimeClient {
    /// A client with pools of its own; a process that talks to many nodes shares one
    /// [`RuntimeConnector`] instead.
    pub fn new(endpoint: &str, token: &str) -> Result<Self> {
        RuntimeConnector::new(token)?.client(endpoint)
    }

    pub fn endpoint(&self) -> &str {
        self.base.as_str().trim_end_matches('/')
    }

    /// This client acting for the Machine with UID `owner`: every request names it, and the
    /// runtime refuses one on an instance that is not that Machine's.
    pub fn for_owner(&self, owner: &str) -> RuntimeClient {
        RuntimeClient { owner: Some(owner.into()), ..self.clone() }
    }

    /// The bearer credential of a request to this runtime.
    fn bearer(&self) -> Arc<str> {
        match &self.credential {
            Credential::Token(token) => token.clone(),
            Credential::Grants(signer) => signer.grant(&self.node),
        }
    }

    fn authorize(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let req = req.bearer_auth(&*self.bearer());
        match &self.owner {
            Some(owner) => req.header(OWNER_HEADER, &**owner),
            None => req,
        }
    }

    /// The endpoint followed by `segments`, each percent-encoded as exactly one segment.
    fn url<'a>(&self, segments: impl IntoIterator<Item = &'a str>) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty();
            for s in segments {
                path.push(s);
            }
        }
        url
    }

    fn vm_url<'a>(&self, id: &'a InstanceId, rest: impl IntoIterator<Item = &'a str>) -> Url {
        self.url(["v1", "vms", id.as_str()].into_iter().chain(rest))
    }

    fn unreachable(&self, e: impl std::error::Error) -> ClientError {
        // reqwest's own text ("error sending request for url …") hides why: name every cause.
        let mut message = e.to_string();
        let mut source = e.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        ClientError::Unreachable { endpoint: self.endpoint().to_string(), message }
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        let resp = self.authorize(req).send().await.map_err(|e| self.unreachable(e))?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status();
        let body = resp.bytes().await.unwrap_or_default();
        Err(api_error(status.as_u16(), &body))
    }

    async fn json<T: DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> Result<T> {
        self.send(req).await?.json().await.map_err(|e| ClientError::Decode(e.to_string()))
    }

    fn get_req(&self, url: Url) -> reqwest::RequestBuilder {
        self.pools.http.get(url)
    }

    fn post_req(&self, url: Url) -> reqwest::RequestBuilder {
        self.pools.http.post(url)
    }

    pub async fn node(&self) -> Result<serde_json::Value> {
        self.json(self.get_req(self.url(["v1", "node"]))).await
    }

    pub async fn list(&self) -> Result<Vec<Vm>> {
        self.json(self.get_req(self.url(["v1", "vms"]))).await
    }

    pub async fn list_sandboxes(&self) -> Result<Vec<Vm>> {
        self.json(self.get_req(self.url(["v1", "sandboxes"]))).await
    }

    /// Looks an instance up by its runtime name (how a restarted node adopts it).
    pub async fn find_by_name(&self, name: &str) -> Result<Option<Vm>> {
        let vms: Vec<Vm> = self.json(self.get_req(self.url(["v1", "vms"])).query(&[("name", name)])).await?;
        Ok(vms.into_iter().find(|v| v.name == name))
    }

    pub async fn create(&self, req: &CreateVmRequest) -> Result<Vm> {
        let collection = if req.sandbox.is_some() { "sandboxes" } else { "vms" };
        self.json(self.post_req(self.url(["v1", collection])).json(req)).await
    }

    pub async fn get(&self, id: &InstanceId) -> Result<Vm> {
        self.json(self.get_req(self.vm_url(id, []))).await
    }

    /// Sets the instance's owner to `owner` if its owner is `expected` now (none: unowned);
    /// a 409 otherwise.
    pub async fn set_owner(&self, id: &InstanceId, expected: Option<&str>, owner: &str) -> Result<Vm> {
        let body = SetOwnerRequest { expected: expected.map(str::to_string), owner: owner.to_string() };
        self.json(self.post_req(self.vm_url(id, ["owner"])).json(&body)).await
    }

    pub async fn delete(&self, id: &InstanceId) -> Result<()> {
        self.send(self.pools.http.delete(self.vm_url(id, []))).await.map(|_| ())
    }

    pub async fn power(&self, id: &InstanceId, action: PowerAction, paused: bool) -> Result<Vm> {
        self.power_at(id, action, paused, None).await
    }

    /// A power action for the Machine at `generation`: the runtime refuses it (409 `Stale`)
    /// when it has applied a newer generation already.
    pub async fn power_at(
        &self,
        id: &InstanceId,
        action: PowerAction,
        paused: bool,
        generation: Option<i64>,
    ) -> Result<Vm> {
        let mut req = self.post_req(self.vm_url(id, [action.as_str()]));
        if paused {
            req = req.query(&[("paused", "true")]);
        }
        if let Some(g) = generation {
            req = req.query(&[("generation", g.to_string())]);
        }
        self.json(req).await
    }

    pub async fn exec(&self, id: &InstanceId, req: &ExecRequest) -> Result<ExecResult> {
        self.json(self.post_req(self.vm_url(id, ["exec"])).json(req)).await
    }

    /// Runs a command, keeping at most `max_output` bytes of each output stream (the runtime
    /// stops reading past it and sets `truncated`).
    pub async fn exec_bounded(&self, id: &InstanceId, req: &ExecRequest, max_output: u64) -> Result<ExecResult> {
        let req =
            self.post_req(self.vm_url(id, ["exec"])).query(&[("maxOutputBytes", max_output.to_string())]).json(req);
        self.json(req).await
    }

    pub async fn start_process(&self, id: &InstanceId, req: &ExecRequest) -> Result<Process> {
        self.json(self.post_req(self.vm_url(id, ["processes"])).json(req)).await
    }

    pub async fn processes(&self, id: &InstanceId) -> Result<Vec<Process>> {
        self.json(self.get_req(self.vm_url(id, ["processes"]))).await
    }

    pub async fn process(&self, id: &InstanceId, pid: &Pid) -> Result<Process> {
        self.json(self.get_req(self.vm_url(id, ["processes", pid.as_str()]))).await
    }

    /// (stdout, stderr) so far.
    pub async fn process_logs(&self, id: &InstanceId, pid: &Pid) -> Result<(String, String)> {
        let v: serde_json::Value =
            self.json(self.get_req(self.vm_url(id, ["processes", pid.as_str(), "logs"]))).await?;
        Ok((v["stdout"].as_str().unwrap_or_default().to_string(), v["stderr"].as_str().unwrap_or_default().to_string()))
    }

    /// One output stream (`stdout` or `stderr`) of a process from byte `offset`: only what is
    /// new since the last read (at most [`crate::types::MAX_LOG_CHUNK_BYTES`]).
    pub async fn process_log_chunk(
        &self,
        id: &InstanceId,
        pid: &Pid,
        stderr: bool,
        offset: u64,
    ) -> Result<crate::types::LogChunk> {
        let stream = if stderr { "stderr" } else { "stdout" };
        let req = self
            .get_req(self.vm_url(id, ["processes", pid.as_str(), "logs"]))
            .query(&[("stream", stream.to_string()), ("offset", offset.to_string())]);
        self.json(req).await
    }

    pub async fn wait_process(&self, id: &InstanceId, pid: &Pid, timeout: Duration) -> Result<Process> {
        let req = self
            .post_req(self.vm_url(id, ["processes", pid.as_str(), "wait"]))
            .query(&[("timeoutSeconds", timeout.as_secs().to_string())]);
        self.json(req).await
    }

    /// Writes `data` to a background process's stdin (one started with `keep_stdin_open`);
    /// `close` closes it afterwards (the process reads end of file).
    pub async fn process_stdin(&self, id: &InstanceId, pid: &Pid, data: Vec<u8>, close: bool) -> Result<()> {
        let req = self
            .post_req(self.vm_url(id, ["processes", pid.as_str(), "stdin"]))
            .query(&[("close", close.to_string())])
            .body(data);
        self.send(req).await.map(|_| ())
    }

    pub async fn kill_process(&self, id: &InstanceId, pid: &Pid, signal: &str) -> Result<()> {
        let req = self.post_req(self.vm_url(id, ["processes", pid.as_str(), "kill"])).query(&[("signal", signal)]);
        self.send(req).await.map(|_| ())
    }

    /// A guest file, whole.
    pub async fn read_file(&self, id: &InstanceId, path: &str) -> Result<Vec<u8>> {
        let resp = self.read_file_stream(id, path).await?;
        resp.bytes().await.map(|b| b.to_vec()).map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// A guest file as a response to read as a stream (`bytes_stream`), with its
    /// Content-Length when the runtime knows the size.
    pub async fn read_file_stream(&self, id: &InstanceId, path: &str) -> Result<reqwest::Response> {
        self.send(self.get_req(self.vm_url(id, ["files"])).query(&[("path", path)])).await
    }

    pub async fn write_file(&self, id: &InstanceId, path: &str, data: Vec<u8>, mode: u32) -> Result<()> {
        self.write_file_stream(id, path, data.into(), Some(mode)).await
    }

    /// Writes a guest file from `body` (a stream: `reqwest::Body::wrap_stream`), replacing it
    /// whole once all of it arrived; `mode` defaults to the existing file's, else 644.
    pub async fn write_file_stream(
        &self,
        id: &InstanceId,
        path: &str,
        body: reqwest::Body,
        mode: Option<u32>,
    ) -> Result<()> {
        let mut req = self.pools.http.put(self.vm_url(id, ["files"])).query(&[("path", path)]);
        if let Some(mode) = mode {
            req = req.query(&[("mode", format!("{mode:o}"))]);
        }
        self.send(req.body(body)).await.map(|_| ())
    }

    /// A stopped sandbox's writable layer, as a tar to read as a stream (`bytes_stream`): a
    /// cold migration's source.
    pub async fn export_layer(&self, id: &InstanceId) -> Result<reqwest::Response> {
        self.send(self.get_req(self.url(["v1", "sandboxes", id.as_str(), "layer"]))).await
    }

    /// Announces a sandbox that is to arrive with its layer: a cold migration's target checks
    /// that it can create it.
    pub async fn begin_import(&self, req: &CreateVmRequest) -> Result<Import> {
        self.json(self.post_req(self.url(["v1", "imports"])).json(req)).await
    }

    /// Creates the announced sandbox from `layer` (a stream: `reqwest::Body::wrap_stream`) and
    /// starts it.
    pub async fn import_layer(&self, import: &str, layer: reqwest::Body) -> Result<Vm> {
        self.json(self.pools.http.put(self.url(["v1", "imports", import])).body(layer)).await
    }

    pub async fn list_files(&self, id: &InstanceId, path: &str) -> Result<Vec<FileEntry>> {
        self.json(self.get_req(self.vm_url(id, ["files"])).query(&[("path", path), ("list", "true")])).await
    }

    /// Removes a file or an empty directory.
    pub async fn delete_file(&self, id: &InstanceId, path: &str) -> Result<()> {
        self.delete_path(id, path, false).await
    }

    /// Removes a file, or a directory: an empty one, or with `recursive` everything in it.
    pub async fn delete_path(&self, id: &InstanceId, path: &str, recursive: bool) -> Result<()> {
        let query = [("path", path), ("recursive", if recursive { "true" } else { "false" })];
        self.send(self.pools.http.delete(self.vm_url(id, ["files"])).query(&query)).await.map(|_| ())
    }

    /// What is at `path` in the guest (a symlink itself, with its target).
    pub async fn file_info(&self, id: &InstanceId, path: &str) -> Result<FileEntry> {
        self.json(self.get_req(self.vm_url(id, ["files"])).query(&[("path", path), ("info", "true")])).await
    }

    /// Moves `from` to `to` in the guest.
    pub async fn rename_file(&self, id: &InstanceId, from: &str, to: &str) -> Result<()> {
        let req = self.post_req(self.vm_url(id, ["files", "rename"])).query(&[("from", from), ("to", to)]);
        self.send(req).await.map(|_| ())
    }

    pub async fn stats(&self, id: &InstanceId) -> Result<Stats> {
        self.json(self.get_req(self.vm_url(id, ["stats"]))).await
    }

    /// [`Self::stats`] with the disk and network footprint (slower: a sandbox's layer is walked).
    pub async fn stats_with_footprint(&self, id: &InstanceId) -> Result<Stats> {
        self.json(self.get_req(self.vm_url(id, ["stats"])).query(&[("footprint", "true")])).await
    }

    pub async fn templates(&self) -> Result<Vec<Template>> {
        self.json(self.get_req(self.url(["v1", "templates"]))).await
    }

    pub async fn template(&self, name: &TemplateName) -> Result<Template> {
        self.json(self.get_req(self.url(["v1", "templates", name.as_str()]))).await
    }

    /// Starts building a template from an image alone.
    pub async fn create_template(&self, name: &TemplateName, image_ref: &str) -> Result<Template> {
        self.build_template(&CreateTemplateRequest {
            name: name.to_string(),
            image_ref: image_ref.into(),
            ..Default::default()
        })
        .await
    }

    /// Starts building a template (an image, then its steps); answers at once with progress.
    pub async fn build_template(&self, req: &CreateTemplateRequest) -> Result<Template> {
        self.json(self.post_req(self.url(["v1", "templates"])).json(req)).await
    }

    pub async fn create_pool(&self, req: &CreatePoolRequest) -> Result<Pool> {
        self.json(self.post_req(self.url(["v1", "pools"])).json(req)).await
    }

    pub async fn pools(&self) -> Result<Vec<Pool>> {
        self.json(self.get_req(self.url(["v1", "pools"]))).await
    }

    pub async fn pool(&self, name: &PoolName) -> Result<Pool> {
        self.json(self.get_req(self.url(["v1", "pools", name.as_str()]))).await
    }

    pub async fn claim(&self, pool: &PoolName, req: &ClaimRequest) -> Result<Vm> {
        self.json(self.post_req(self.url(["v1", "pools", pool.as_str(), "claim"])).json(req)).await
    }

    pub async fn delete_pool(&self, name: &PoolName) -> Result<()> {
        self.send(self.pools.http.delete(self.url(["v1", "pools", name.as_str()]))).await.map(|_| ())
    }

    pub async fn egress_check(&self, host: &str) -> Result<EgressDecision> {
        let req = EgressCheckRequest { host: host.to_string() };
        self.json(self.post_req(self.url(["v1", "egress-check"])).json(&req)).await
    }

    /// Egress denials after `after`; waits up to `wait` for one when there are none yet.
    pub async fn egress_denials(&self, after: u64, wait: Duration) -> Result<EgressDenials> {
        let req = self
            .get_req(self.url(["v1", "egress", "denials"]))
            .query(&[("after", after.to_string()), ("waitSeconds", wait.as_secs().to_string())])
            .timeout(wait + Duration::from_secs(10));
        self.json(req).await
    }

    /// A copy of an instance; see `ForkResult::live`.
    pub async fn fork(&self, id: &InstanceId, name: &str) -> Result<ForkResult> {
        let req = ForkRequest { name: name.to_string() };
        self.json(self.post_req(self.vm_url(id, ["fork"])).json(&req)).await
    }

    /// A new VM booting fresh from a copy of this VM's disk.
    pub async fn clone_vm(&self, id: &InstanceId, name: &str) -> Result<Vm> {
        let req = ForkRequest { name: name.to_string() };
        self.json(self.post_req(self.vm_url(id, ["clone"])).json(&req)).await
    }

    /// Freezes a VM's guest filesystems (through its guest agent), thawing them by themselves
    /// after `timeout` when given.
    pub async fn freeze(&self, id: &InstanceId, timeout: Option<Duration>) -> Result<FreezeResult> {
        let mut req = self.post_req(self.vm_url(id, ["freeze"]));
        if let Some(t) = timeout {
            req = req.query(&[("timeoutSeconds", t.as_secs().max(1).to_string())]);
        }
        self.json(req).await
    }

    pub async fn thaw(&self, id: &InstanceId) -> Result<FreezeResult> {
        self.json(self.post_req(self.vm_url(id, ["thaw"]))).await
    }

    /// `frozen` or `thawed`, as the guest agent says, and the deadline of the freeze.
    pub async fn freeze_status(&self, id: &InstanceId) -> Result<FreezeStatus> {
        self.json(self.get_req(self.vm_url(id, ["freeze"]))).await
    }

    /// Exports a sandbox's root filesystem to a tar file on the node.
    pub async fn snapshot(&self, id: &InstanceId, path: &str) -> Result<SnapshotResult> {
        let req = SnapshotRequest { path: path.to_string() };
        self.json(self.post_req(self.url(["v1", "sandboxes", id.as_str(), "snapshot"])).json(&req)).await
    }

    /// True when the runtime answers at all (any status).
    pub async fn reachable(&self) -> bool {
        self.get_req(self.url(["v1", "node"])).send().await.is_ok_and(|r| r.status() != StatusCode::BAD_GATEWAY)
    }

    /// A request relayed to a server in the guest on `port`: the caller adds headers and a
    /// body and sends it. The path is re-encoded segment by segment, the query passes as a
    /// query, and no redirect is followed.
    pub fn guest_http(
        &self,
        method: Method,
        id: &InstanceId,
        port: u16,
        path: &GuestPath,
        query: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let port = port.to_string();
        let mut url = self.vm_url(id, ["proxy", port.as_str()]);
        if let Ok(mut segments) = url.path_segments_mut() {
            if path.segments().next().is_none() {
                // The guest's root: `/v1/vms/{id}/proxy/{port}/`.
                segments.push("");
            } else {
                segments.extend(path.segments());
            }
        }
        url.set_query(query.filter(|q| !q.is_empty()));
        self.authorize(self.pools.relay.request(method, url))
    }

    /// Sends a request built by [`RuntimeClient::guest_http`]; an error of the runtime itself
    /// (no instance, nothing listening) comes back as `Err`, the guest's own answers as `Ok`.
    pub async fn send_guest_http(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        req.send().await.map_err(|e| self.unreachable(e))
    }

    /// Opens a WebSocket relay of an instance. A refusal of the runtime (a paused sandbox, a
    /// closed port) is an `Api` error, so callers can answer it before upgrading their client.
    pub async fn relay(&self, id: &InstanceId, relay: &Relay) -> Result<RelaySocket> {
        let port;
        let mut url = match relay {
            Relay::Console => self.vm_url(id, ["console"]),
            Relay::Vnc => self.vm_url(id, ["vnc"]),
            Relay::Tunnel(p) => {
                port = p.to_string();
                self.vm_url(id, ["tunnel", port.as_str()])
            }
            Relay::ExecStream { .. } => self.vm_url(id, ["exec-stream"]),
        };
        if let Relay::ExecStream { command, env, user, cwd, tty } = relay {
            url.query_pairs_mut().append_pair("command", command);
            for (key, value) in [("user", user), ("cwd", cwd)] {
                if let Some(v) = value {
                    url.query_pairs_mut().append_pair(key, v);
                }
            }
            if let Some((cols, rows)) = tty {
                url.query_pairs_mut()
                    .append_pair("tty", "true")
                    .append_pair("cols", &cols.to_string())
                    .append_pair("rows", &rows.to_string());
            }
            if !env.is_empty() {
                use base64::Engine as _;
                let env = serde_json::to_string(env).unwrap_or_default();
                let header = base64::engine::general_purpose::STANDARD.encode(env);
                return self.websocket(url, Some(header)).await;
            }
        }
        self.websocket(url, None).await
    }

    /// A live migration's source side: the WebSocket QEMU's state of VM `id` goes out on
    /// (`types::LiveMessage` in text frames, the state in binary ones).
    pub async fn live_out(&self, id: &InstanceId) -> Result<RelaySocket> {
        self.websocket(self.vm_url(id, ["migration"]), None).await
    }

    /// A live migration's target side, for an announced import: the WebSocket the state comes
    /// in on.
    pub async fn live_in(&self, import: &str) -> Result<RelaySocket> {
        self.websocket(self.url(["v1", "imports", import, "migration"]), None).await
    }

    /// A WebSocket to `url`, with an exec stream's environment in [`EXEC_ENV_HEADER`].
    async fn websocket(&self, mut url: Url, exec_env: Option<String>) -> Result<RelaySocket> {
        use tokio_tungstenite::tungstenite::Error as WsError;
        let scheme = if url.scheme() == "https" { "wss" } else { "ws" };
        url.set_scheme(scheme).map_err(|_| ClientError::BadEndpoint(self.endpoint().into()))?;
        let mut request =
            url.as_str().into_client_request().map_err(|e| ClientError::BadEndpoint(format!("{url}: {e}")))?;
        if let Ok(v) = format!("Bearer {}", self.bearer()).parse() {
            request.headers_mut().insert(reqwest::header::AUTHORIZATION, v);
        }
        if let Some(owner) = &self.owner
            && let Ok(v) = owner.parse()
        {
            request.headers_mut().insert(OWNER_HEADER, v);
        }
        if let Some(env) = exec_env.and_then(|e| e.parse().ok()) {
            request.headers_mut().insert(EXEC_ENV_HEADER, env);
        }
        let connector = self.pools.tls.clone().map(tokio_tungstenite::Connector::Rustls);
        match tokio_tungstenite::connect_async_tls_with_config(request, None, false, connector).await {
            Ok((ws, _)) => Ok(ws),
            Err(WsError::Http(resp)) => {
                Err(api_error(resp.status().as_u16(), resp.body().as_deref().unwrap_or_default()))
            }
            Err(e) => Err(self.unreachable(e)),
        }
    }
}

/// The runtime's error body, or the status's own words when the body is not one.
fn api_error(status: u16, body: &[u8]) -> ClientError {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(e) => ClientError::Api { status, reason: e.reason, message: e.message },
        Err(_) => ClientError::Api {
            status,
            reason: StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("Error").to_string(),
            message: String::from_utf8_lossy(body).into_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> RuntimeClient {
        RuntimeClient::new("http://127.0.0.1:7000/", "t").unwrap()
    }

    #[test]
    fn urls_are_built_from_encoded_segments() {
        let c = client();
        let id = InstanceId::new("kairon-a-b").unwrap();
        assert_eq!(c.vm_url(&id, ["exec"]).as_str(), "http://127.0.0.1:7000/v1/vms/kairon-a-b/exec");
        let odd = InstanceId::new("a%2F..%2Fb?x#y").unwrap();
        assert_eq!(c.vm_url(&odd, []).path(), "/v1/vms/a%252F..%252Fb%3Fx%23y");
        let pid = Pid::new("p 1").unwrap();
        assert_eq!(c.vm_url(&id, ["processes", pid.as_str()]).path(), "/v1/vms/kairon-a-b/processes/p%201");
        assert!(RuntimeClient::new("not a url", "t").is_err());
        assert!(RuntimeClient::new("file:///etc", "t").is_err());
    }

    #[test]
    fn guest_http_stays_under_the_proxy_prefix() {
        let c = client();
        let id = InstanceId::new("i").unwrap();
        let url = |path: &str, query: Option<&str>| {
            let p = GuestPath::new(path).unwrap();
            c.guest_http(Method::GET, &id, 8080, &p, query).build().unwrap().url().clone()
        };
        assert_eq!(url("", None).as_str(), "http://127.0.0.1:7000/v1/vms/i/proxy/8080/");
        assert_eq!(
            url("a/b.html", Some("x=1&y=%2F")).as_str(),
            "http://127.0.0.1:7000/v1/vms/i/proxy/8080/a/b.html?x=1&y=%2F"
        );
        // An encoded slash or dot stays inside its segment.
        assert_eq!(url("..%2F..%2Fv1%2Fvms", None).path(), "/v1/vms/i/proxy/8080/..%252F..%252Fv1%252Fvms");
        assert_eq!(url("%2e%2e/x", None).path(), "/v1/vms/i/proxy/8080/%252e%252e/x");
        assert!(GuestPath::new("../../v1/vms").is_err());
    }

    #[test]
    fn relays_and_power_use_fixed_route_names() {
        assert_eq!(PowerAction::Hibernate.as_str(), "hibernate");
        let c = client();
        let id = InstanceId::new("i").unwrap();
        assert_eq!(c.vm_url(&id, [PowerAction::Start.as_str()]).path(), "/v1/vms/i/start");
    }
}
