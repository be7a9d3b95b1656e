//! The one client of the runtime API: the node agent and the api reach a node's runtime only
//! through this.

use std::time::Duration;

use reqwest::StatusCode;
use serde::de::DeserializeOwned;

use crate::api::{
    ClaimRequest, CreatePoolRequest, CreateTemplateRequest, CreateVmRequest, ErrorBody, ExecRequest, ExecResult,
    FileEntry, Pool, PowerAction, Process, Stats, Template, Vm,
};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The runtime answered with an error (its reason and message are kept).
    #[error("{message}")]
    Api { status: u16, reason: String, message: String },
    #[error("the runtime at {endpoint} is unreachable: {source}")]
    Unreachable { endpoint: String, source: reqwest::Error },
    #[error("unexpected answer from the runtime: {0}")]
    Decode(String),
}

impl ClientError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, ClientError::Api { status: 404, .. })
    }
}

type Result<T> = std::result::Result<T, ClientError>;

#[derive(Clone)]
pub struct RuntimeClient {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl RuntimeClient {
    pub fn new(endpoint: &str, token: &str) -> Result<Self> {
        // reqwest is built without a default TLS provider: the workspace uses ring throughout.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .pool_max_idle_per_host(32)
            .build()
            .map_err(|e| ClientError::Unreachable { endpoint: endpoint.into(), source: e })?;
        Ok(RuntimeClient { base: endpoint.trim_end_matches('/').to_string(), token: token.to_string(), http })
    }

    pub fn endpoint(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        let resp = req
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| ClientError::Unreachable { endpoint: self.base.clone(), source: e })?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status();
        let body = resp.bytes().await.unwrap_or_default();
        Err(match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(e) => ClientError::Api { status: status.as_u16(), reason: e.reason, message: e.message },
            Err(_) => ClientError::Api {
                status: status.as_u16(),
                reason: status.canonical_reason().unwrap_or("Error").to_string(),
                message: String::from_utf8_lossy(&body).into_owned(),
            },
        })
    }

    async fn json<T: DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> Result<T> {
        self.send(req).await?.json().await.map_err(|e| ClientError::Decode(e.to_string()))
    }

    pub async fn node(&self) -> Result<serde_json::Value> {
        self.json(self.http.get(self.url("/v1/node"))).await
    }

    pub async fn list(&self) -> Result<Vec<Vm>> {
        self.json(self.http.get(self.url("/v1/vms"))).await
    }

    pub async fn list_sandboxes(&self) -> Result<Vec<Vm>> {
        self.json(self.http.get(self.url("/v1/sandboxes"))).await
    }

    /// Looks an instance up by its runtime name (how a restarted node adopts it).
    pub async fn find_by_name(&self, name: &str) -> Result<Option<Vm>> {
        let vms: Vec<Vm> = self.json(self.http.get(self.url("/v1/vms")).query(&[("name", name)])).await?;
        Ok(vms.into_iter().next())
    }

    pub async fn create(&self, req: &CreateVmRequest) -> Result<Vm> {
        let path = if req.sandbox.is_some() { "/v1/sandboxes" } else { "/v1/vms" };
        self.json(self.http.post(self.url(path)).json(req)).await
    }

    pub async fn get(&self, id: &str) -> Result<Vm> {
        self.json(self.http.get(self.url(&format!("/v1/vms/{id}")))).await
    }

    pub async fn delete(&self, id: &str) -> Result<()> {
        self.send(self.http.delete(self.url(&format!("/v1/vms/{id}")))).await.map(|_| ())
    }

    pub async fn power(&self, id: &str, action: PowerAction, paused: bool) -> Result<Vm> {
        let name = serde_json::to_value(action).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        let mut req = self.http.post(self.url(&format!("/v1/vms/{id}/{name}")));
        if paused {
            req = req.query(&[("paused", "true")]);
        }
        self.json(req).await
    }

    pub async fn exec(&self, id: &str, req: &ExecRequest) -> Result<ExecResult> {
        self.json(self.http.post(self.url(&format!("/v1/vms/{id}/exec"))).json(req)).await
    }

    pub async fn start_process(&self, id: &str, req: &ExecRequest) -> Result<Process> {
        self.json(self.http.post(self.url(&format!("/v1/vms/{id}/processes"))).json(req)).await
    }

    pub async fn processes(&self, id: &str) -> Result<Vec<Process>> {
        self.json(self.http.get(self.url(&format!("/v1/vms/{id}/processes")))).await
    }

    pub async fn process(&self, id: &str, pid: &str) -> Result<Process> {
        self.json(self.http.get(self.url(&format!("/v1/vms/{id}/processes/{pid}")))).await
    }

    /// (stdout, stderr) so far.
    pub async fn process_logs(&self, id: &str, pid: &str) -> Result<(String, String)> {
        let v: serde_json::Value =
            self.json(self.http.get(self.url(&format!("/v1/vms/{id}/processes/{pid}/logs")))).await?;
        Ok((v["stdout"].as_str().unwrap_or_default().to_string(), v["stderr"].as_str().unwrap_or_default().to_string()))
    }

    pub async fn wait_process(&self, id: &str, pid: &str, timeout: Duration) -> Result<Process> {
        let req = self
            .http
            .post(self.url(&format!("/v1/vms/{id}/processes/{pid}/wait")))
            .query(&[("timeoutSeconds", timeout.as_secs().to_string())]);
        self.json(req).await
    }

    pub async fn kill_process(&self, id: &str, pid: &str, signal: &str) -> Result<()> {
        let req = self.http.post(self.url(&format!("/v1/vms/{id}/processes/{pid}/kill"))).query(&[("signal", signal)]);
        self.send(req).await.map(|_| ())
    }

    pub async fn read_file(&self, id: &str, path: &str) -> Result<Vec<u8>> {
        let resp = self.send(self.http.get(self.url(&format!("/v1/vms/{id}/files"))).query(&[("path", path)])).await?;
        resp.bytes().await.map(|b| b.to_vec()).map_err(|e| ClientError::Decode(e.to_string()))
    }

    pub async fn write_file(&self, id: &str, path: &str, data: Vec<u8>, mode: u32) -> Result<()> {
        let req = self
            .http
            .put(self.url(&format!("/v1/vms/{id}/files")))
            .query(&[("path", path.to_string()), ("mode", format!("{mode:o}"))])
            .body(data);
        self.send(req).await.map(|_| ())
    }

    pub async fn list_files(&self, id: &str, path: &str) -> Result<Vec<FileEntry>> {
        self.json(self.http.get(self.url(&format!("/v1/vms/{id}/files"))).query(&[("path", path), ("list", "true")]))
            .await
    }

    pub async fn delete_file(&self, id: &str, path: &str) -> Result<()> {
        self.send(self.http.delete(self.url(&format!("/v1/vms/{id}/files"))).query(&[("path", path)])).await.map(|_| ())
    }

    pub async fn stats(&self, id: &str) -> Result<Stats> {
        self.json(self.http.get(self.url(&format!("/v1/vms/{id}/stats")))).await
    }

    pub async fn templates(&self) -> Result<Vec<Template>> {
        self.json(self.http.get(self.url("/v1/templates"))).await
    }

    pub async fn template(&self, name: &str) -> Result<Template> {
        self.json(self.http.get(self.url(&format!("/v1/templates/{name}")))).await
    }

    pub async fn create_template(&self, name: &str, image_ref: &str) -> Result<Template> {
        let req = CreateTemplateRequest { name: name.into(), image_ref: image_ref.into() };
        self.json(self.http.post(self.url("/v1/templates")).json(&req)).await
    }

    pub async fn create_pool(&self, req: &CreatePoolRequest) -> Result<Pool> {
        self.json(self.http.post(self.url("/v1/pools")).json(req)).await
    }

    pub async fn pools(&self) -> Result<Vec<Pool>> {
        self.json(self.http.get(self.url("/v1/pools"))).await
    }

    pub async fn pool(&self, name: &str) -> Result<Pool> {
        self.json(self.http.get(self.url(&format!("/v1/pools/{name}")))).await
    }

    pub async fn claim(&self, pool: &str, req: &ClaimRequest) -> Result<Vm> {
        self.json(self.http.post(self.url(&format!("/v1/pools/{pool}/claim"))).json(req)).await
    }

    pub async fn delete_pool(&self, name: &str) -> Result<()> {
        self.send(self.http.delete(self.url(&format!("/v1/pools/{name}")))).await.map(|_| ())
    }

    pub async fn egress_check(&self, host: &str) -> Result<crate::api::EgressDecision> {
        let req = crate::api::EgressCheckRequest { host: host.to_string() };
        self.json(self.http.post(self.url("/v1/egress-check")).json(&req)).await
    }

    /// A copy of an instance; see `ForkResult::live`.
    pub async fn fork(&self, id: &str, name: &str) -> Result<crate::api::ForkResult> {
        let req = crate::api::ForkRequest { name: name.to_string() };
        self.json(self.http.post(self.url(&format!("/v1/vms/{id}/fork"))).json(&req)).await
    }

    /// A new VM booting fresh from a copy of this VM's disk.
    pub async fn clone_vm(&self, id: &str, name: &str) -> Result<Vm> {
        let req = crate::api::ForkRequest { name: name.to_string() };
        self.json(self.http.post(self.url(&format!("/v1/vms/{id}/clone"))).json(&req)).await
    }

    /// Freezes a VM's guest filesystems (through its guest agent), thawing them by themselves
    /// after `timeout` when given.
    pub async fn freeze(&self, id: &str, timeout: Option<Duration>) -> Result<crate::api::FreezeResult> {
        let mut req = self.http.post(self.url(&format!("/v1/vms/{id}/freeze")));
        if let Some(t) = timeout {
            req = req.query(&[("timeoutSeconds", t.as_secs().max(1).to_string())]);
        }
        self.json(req).await
    }

    pub async fn thaw(&self, id: &str) -> Result<crate::api::FreezeResult> {
        self.json(self.http.post(self.url(&format!("/v1/vms/{id}/thaw")))).await
    }

    /// `frozen` or `thawed`, as the guest agent says, and the deadline of the freeze.
    pub async fn freeze_status(&self, id: &str) -> Result<crate::api::FreezeStatus> {
        self.json(self.http.get(self.url(&format!("/v1/vms/{id}/freeze")))).await
    }

    /// Exports a sandbox's root filesystem to a tar file on the node.
    pub async fn snapshot(&self, id: &str, path: &str) -> Result<crate::api::SnapshotResult> {
        let req = crate::api::SnapshotRequest { path: path.to_string() };
        self.json(self.http.post(self.url(&format!("/v1/sandboxes/{id}/snapshot"))).json(&req)).await
    }

    /// True when the runtime answers at all (any status).
    pub async fn reachable(&self) -> bool {
        self.http.get(self.url("/v1/node")).send().await.is_ok_and(|r| r.status() != StatusCode::BAD_GATEWAY)
    }
}
