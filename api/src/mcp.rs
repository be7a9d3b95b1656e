//! The MCP server at `/mcp` (rmcp, streamable HTTP): the tools an agent needs to work in a
//! sandbox, and `describe_claim` (a claim with its usage, as agent-sandboxes.md says).
//!
//! The `/mcp` route takes the same bearer tokens as the REST API (the same middleware checks
//! them), and every tool runs as one or more REST calls made in-process with the caller's own
//! `Authorization` header: the REST API's rules (roles, namespaces, the guest-exec gate,
//! wake-on-connect, activity stamps) apply to MCP unchanged.

use std::sync::Arc;

use axum::body::Body;
use http::request::Parts;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tower::ServiceExt;

/// How long the create/claim tools wait for the sandbox to run, per long poll.
const WAIT_SECONDS: u64 = 120;

#[derive(Clone)]
pub struct KaironMcp {
    rest: axum::Router,
    tool_router: ToolRouter<Self>,
}

#[derive(Deserialize, JsonSchema)]
pub struct CreateArgs {
    /// Namespace of the new Machine.
    pub namespace: String,
    /// A sandbox template (`python`, `busybox`) or, starting with `/`, a VM image path on the node.
    pub image: String,
    /// The Machine's name (default: sb-<random>).
    pub name: Option<String>,
    /// Suspend after this many idle seconds (at least 60).
    pub idle_timeout_seconds: Option<i64>,
    /// Delete the Machine this many seconds after creation.
    pub max_lifetime_seconds: Option<i64>,
}

#[derive(Deserialize, JsonSchema)]
pub struct ClaimArgs {
    pub namespace: String,
    /// The MachinePool to take a warm member from.
    pub pool: String,
    /// The claim's name (default: POOL-<random>).
    pub name: Option<String>,
    /// Release the claim this many seconds after it binds.
    pub ttl_seconds: Option<i64>,
}

#[derive(Deserialize, JsonSchema)]
pub struct MachineArgs {
    pub namespace: String,
    /// The Machine's name.
    pub name: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct RunArgs {
    pub namespace: String,
    pub name: String,
    /// A shell command line, run with `/bin/sh -c`.
    pub command: String,
    /// Sent to the command's standard input.
    pub stdin: Option<String>,
    pub timeout_seconds: Option<i64>,
}

#[derive(Deserialize, JsonSchema)]
pub struct ReadArgs {
    pub namespace: String,
    pub name: String,
    /// Absolute path in the sandbox.
    pub path: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct WriteArgs {
    pub namespace: String,
    pub name: String,
    /// Absolute path in the sandbox.
    pub path: String,
    /// The file's new contents (text).
    pub content: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct CloseArgs {
    pub namespace: String,
    /// The Machine to delete (a sandbox made with create_sandbox).
    pub name: Option<String>,
    /// The claim to release (a sandbox from claim_sandbox).
    pub claim: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct ClaimRef {
    pub namespace: String,
    /// The MachineClaim's name.
    pub name: String,
}

fn short_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..10].to_string()
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl KaironMcp {
    /// One REST call in-process, as the caller. Errors are the REST body's `reason: message`.
    async fn call(
        &self,
        parts: &Parts,
        method: &str,
        uri: &str,
        body: Option<Body>,
        json_body: bool,
    ) -> Result<(u16, bytes::Bytes), String> {
        let mut req = http::Request::builder().method(method).uri(uri);
        if let Some(auth) = parts.headers.get(http::header::AUTHORIZATION) {
            req = req.header(http::header::AUTHORIZATION, auth);
        }
        if json_body {
            req = req.header(http::header::CONTENT_TYPE, "application/json");
        } else if body.is_some() {
            req = req.header(http::header::CONTENT_TYPE, "application/octet-stream");
        }
        let req = req.body(body.unwrap_or_else(Body::empty)).map_err(|e| e.to_string())?;
        let resp = self.rest.clone().oneshot(req).await.map_err(|e| format!("{e}"))?;
        let status = resp.status().as_u16();
        let bytes = axum::body::to_bytes(resp.into_body(), 64 * 1024 * 1024).await.map_err(|e| e.to_string())?;
        if status >= 400 {
            let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            return Err(format!(
                "{} ({status}): {}",
                v["reason"].as_str().unwrap_or("Error"),
                v["message"].as_str().map(String::from).unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned())
            ));
        }
        Ok((status, bytes))
    }

    async fn json(&self, parts: &Parts, method: &str, uri: &str, body: Option<Value>) -> Result<Value, String> {
        let has = body.is_some();
        let (_, bytes) = self.call(parts, method, uri, body.map(|b| Body::from(b.to_string())), has).await?;
        if bytes.is_empty() { Ok(Value::Null) } else { serde_json::from_slice(&bytes).map_err(|e| e.to_string()) }
    }

    /// Long-polls `.../wait?phase=` until reached (504 answers are waited through, up to 10 min).
    async fn wait_phase(&self, parts: &Parts, kind: &str, ns: &str, name: &str, phase: &str) -> Result<Value, String> {
        let uri = format!("/api/v1/{kind}/{}/{}/wait?phase={phase}&timeoutSeconds={WAIT_SECONDS}", enc(ns), enc(name));
        for _ in 0..5 {
            match self.json(parts, "GET", &uri, None).await {
                Ok(v) => return Ok(v),
                Err(e) if e.starts_with("Timeout (504)") => continue,
                Err(e) => return Err(e),
            }
        }
        Err(format!("{kind} {ns}/{name} did not reach {phase} within {} s", WAIT_SECONDS * 5))
    }

    fn pretty(v: &Value) -> String {
        serde_json::to_string_pretty(v).unwrap_or_default()
    }
}

#[tool_router(router = tool_router)]
impl KaironMcp {
    pub fn new(rest: axum::Router) -> Self {
        Self { rest, tool_router: Self::tool_router() }
    }

    /// Create a sandbox Machine (labelled kairon.zyvor.dev/sandbox=true, guest agent on) and wait until it runs.
    #[tool]
    async fn create_sandbox(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<CreateArgs>,
    ) -> Result<String, String> {
        let name = a.name.unwrap_or_else(|| format!("sb-{}", short_id()));
        let mut spec = json!({ "guestAgent": { "enabled": true, "console": true } });
        if a.image.starts_with('/') {
            spec["image"] = json!({ "path": a.image });
            spec["resources"] = json!({ "cpu": "1", "memory": "512Mi" });
        } else {
            spec["sandbox"] = json!({ "templateName": a.image });
        }
        let mut lc = json!({ "wakeOnConnect": true });
        if let Some(t) = a.idle_timeout_seconds {
            lc["idleTimeoutSeconds"] = json!(t);
        }
        if let Some(t) = a.max_lifetime_seconds {
            lc["maxLifetimeSeconds"] = json!(t);
        }
        spec["lifecycle"] = lc;
        let m = json!({
            "metadata": { "name": name, "namespace": a.namespace, "labels": { "kairon.zyvor.dev/sandbox": "true" } },
            "spec": spec,
        });
        self.json(&parts, "POST", &format!("/api/v1/machines/{}", enc(&a.namespace)), Some(m)).await?;
        self.wait_phase(&parts, "machines", &a.namespace, &name, "Running").await?;
        Ok(Self::pretty(&json!({ "namespace": a.namespace, "name": name, "phase": "Running" })))
    }

    /// Claim a warm member of a MachinePool and wait until the claim is bound and the Machine runs.
    #[tool]
    async fn claim_sandbox(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<ClaimArgs>,
    ) -> Result<String, String> {
        let claim = a.name.unwrap_or_else(|| format!("{}-{}", a.pool, &short_id()[..8]));
        let mut spec = json!({ "poolName": a.pool });
        if let Some(t) = a.ttl_seconds {
            spec["ttlSeconds"] = json!(t);
        }
        let body = json!({ "metadata": { "name": claim, "namespace": a.namespace }, "spec": spec });
        self.json(&parts, "POST", &format!("/api/v1/machineclaims/{}", enc(&a.namespace)), Some(body)).await?;
        let bound = self.wait_phase(&parts, "machineclaims", &a.namespace, &claim, "Bound").await?;
        let machine =
            bound["status"]["machineName"].as_str().ok_or("the claim is Bound but names no Machine")?.to_string();
        self.wait_phase(&parts, "machines", &a.namespace, &machine, "Running").await?;
        Ok(Self::pretty(&json!({ "namespace": a.namespace, "claim": claim, "name": machine, "phase": "Running" })))
    }

    /// Run a shell command in a sandbox to completion: its stdout, stderr and exit code.
    #[tool]
    async fn run_command(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<RunArgs>,
    ) -> Result<String, String> {
        let body =
            json!({ "command": ["/bin/sh", "-c", a.command], "stdin": a.stdin, "timeoutSeconds": a.timeout_seconds });
        let uri = format!("/api/v1/machines/{}/{}/exec", enc(&a.namespace), enc(&a.name));
        Ok(Self::pretty(&self.json(&parts, "POST", &uri, Some(body)).await?))
    }

    /// Read a text file from a sandbox.
    #[tool]
    async fn read_file(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<ReadArgs>,
    ) -> Result<String, String> {
        let uri = format!("/api/v1/machines/{}/{}/files?path={}", enc(&a.namespace), enc(&a.name), enc(&a.path));
        let (_, bytes) = self.call(&parts, "GET", &uri, None, false).await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Write a text file in a sandbox, replacing what is there.
    #[tool]
    async fn write_file(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<WriteArgs>,
    ) -> Result<String, String> {
        let uri = format!("/api/v1/machines/{}/{}/files?path={}", enc(&a.namespace), enc(&a.name), enc(&a.path));
        let n = a.content.len();
        self.call(&parts, "PUT", &uri, Some(Body::from(a.content)), false).await?;
        Ok(format!("wrote {n} bytes to {}", a.path))
    }

    /// Pause a sandbox: it keeps its memory and uses no CPU.
    #[tool]
    async fn pause(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<MachineArgs>,
    ) -> Result<String, String> {
        self.json(&parts, "POST", &format!("/api/v1/machines/{}/{}/pause", enc(&a.namespace), enc(&a.name)), None)
            .await?;
        self.wait_phase(&parts, "machines", &a.namespace, &a.name, "Paused").await?;
        Ok(format!("{}/{} is Paused", a.namespace, a.name))
    }

    /// Resume a paused sandbox.
    #[tool]
    async fn resume(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<MachineArgs>,
    ) -> Result<String, String> {
        self.json(&parts, "POST", &format!("/api/v1/machines/{}/{}/resume", enc(&a.namespace), enc(&a.name)), None)
            .await?;
        self.wait_phase(&parts, "machines", &a.namespace, &a.name, "Running").await?;
        Ok(format!("{}/{} is Running", a.namespace, a.name))
    }

    /// Close a sandbox: delete the Machine (`name`) or release the claim (`claim`).
    #[tool]
    async fn close_sandbox(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<CloseArgs>,
    ) -> Result<String, String> {
        let ns = enc(&a.namespace);
        match (a.claim, a.name) {
            (Some(c), _) => {
                self.json(&parts, "DELETE", &format!("/api/v1/machineclaims/{ns}/{}", enc(&c)), None).await?;
                Ok(format!("claim {}/{c} released", a.namespace))
            }
            (None, Some(n)) => {
                self.json(&parts, "DELETE", &format!("/api/v1/machines/{ns}/{}", enc(&n)), None).await?;
                Ok(format!("Machine {}/{n} deleted", a.namespace))
            }
            (None, None) => Err("give name (a Machine) or claim (a MachineClaim)".into()),
        }
    }

    /// A MachineClaim with its usage: phase, Machine, status.usage (active and suspended seconds,
    /// vCPU-seconds, GiB-seconds) and the accrual history.
    #[tool]
    async fn describe_claim(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<ClaimRef>,
    ) -> Result<String, String> {
        let c = self
            .json(&parts, "GET", &format!("/api/v1/machineclaims/{}/{}", enc(&a.namespace), enc(&a.name)), None)
            .await?;
        let uid = c["metadata"]["uid"].as_str().unwrap_or_default().to_string();
        let history =
            self.json(&parts, "GET", &format!("/api/v1/usage/claims/{}", enc(&uid)), None).await.unwrap_or(Value::Null);
        Ok(Self::pretty(&json!({
            "name": a.name,
            "namespace": a.namespace,
            "uid": uid,
            "pool": c["spec"]["poolName"],
            "phase": c["status"]["phase"],
            "machine": c["status"]["machineName"],
            "boundTime": c["status"]["boundTime"],
            "usage": c["status"]["usage"],
            "history": history,
        })))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for KaironMcp {}

/// The service mounted at `/mcp`: `rest` is the REST router (with its auth layer) the tools call.
pub fn service(rest: axum::Router) -> StreamableHttpService<KaironMcp, LocalSessionManager> {
    StreamableHttpService::new(
        move || Ok(KaironMcp::new(rest.clone())),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    )
}
