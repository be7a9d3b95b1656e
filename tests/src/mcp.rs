//! A minimal MCP client over curl (streamable HTTP, one session per token), for the tests that
//! reach Kairon as an agent's MCP tool does: on `kairon up` and on a real cluster's api.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

pub struct Mcp {
    ca: PathBuf,
    url: String,
    token: Option<String>,
    pub session: Option<String>,
    next_id: Cell<u64>,
}

impl Mcp {
    /// A client of `{base}/mcp` that has not initialized a session yet.
    pub fn new(base: &str, ca: &Path, token: Option<String>) -> Mcp {
        Mcp { ca: ca.to_path_buf(), url: format!("{base}/mcp"), token, session: None, next_id: Cell::new(0) }
    }

    /// A client with its session initialized (when the token is accepted).
    pub fn open(base: &str, ca: &Path, token: Option<String>) -> Mcp {
        let mut m = Mcp::new(base, ca, token);
        let init = m.message(
            "initialize",
            json!({"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}),
        );
        let (status, head, _) = m.post(&init);
        if status == 200 {
            m.session = session_of(&head);
            m.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        }
        m
    }

    /// One POST: (status, headers, the JSON-RPC answer in the body or its SSE data).
    pub fn post(&self, body: &Value) -> (u16, String, Option<Value>) {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "-D", "-", "--max-time", "900", "--cacert"]).arg(&self.ca).args([
            "-H",
            "Content-Type: application/json",
            "-H",
            "Accept: application/json, text/event-stream",
        ]);
        if let Some(t) = &self.token {
            cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
        }
        if let Some(s) = &self.session {
            cmd.args(["-H", &format!("Mcp-Session-Id: {s}")]);
        }
        let out = cmd.args(["-d", &body.to_string(), &self.url]).output().expect("curl");
        if out.stdout.is_empty() {
            return (0, format!("curl: {}", String::from_utf8_lossy(&out.stderr)), None);
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let msg = rest
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .find(|v| v.get("id").is_some())
            .or_else(|| serde_json::from_str(rest.trim()).ok());
        (status, head.to_string(), msg)
    }

    /// A JSON-RPC request with the next id.
    pub fn message(&self, method: &str, params: Value) -> Value {
        self.next_id.set(self.next_id.get() + 1);
        json!({"jsonrpc": "2.0", "id": self.next_id.get(), "method": method, "params": params})
    }

    /// A request that must succeed: its result (an `initialize` also keeps the session).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let (status, head, msg) = self.post(&self.message(method, params));
        assert_eq!(status, 200, "{method}: {head}");
        if method == "initialize" {
            self.session = session_of(&head);
        }
        let msg = msg.unwrap_or_else(|| panic!("{method}: no JSON-RPC answer: {head}"));
        assert!(msg.get("error").is_none(), "{method}: {msg}");
        msg["result"].clone()
    }

    /// tools/call: (isError, the text of its content).
    pub fn tool(&self, tool: &str, args: Value) -> (bool, String) {
        let (status, head, msg) = self.post(&self.message("tools/call", json!({"name": tool, "arguments": args})));
        assert_eq!(status, 200, "{tool}: {head}");
        let r = msg.map(|m| m["result"].clone()).unwrap_or(Value::Null);
        let text = r["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect();
        (r["isError"].as_bool().unwrap_or(false), text)
    }

    /// tools/call that must succeed: the text of its content.
    pub fn ok(&self, tool: &str, args: Value) -> String {
        let (err, text) = self.tool(tool, args);
        assert!(!err, "{tool} failed: {text}");
        text
    }

    /// tools/call as a status: the HTTP status when the request itself is refused, else the
    /// REST status the tool's error names ("Forbidden (403): …"), else 400 for another error,
    /// else 200.
    pub fn call(&self, tool: &str, args: Value) -> (u16, String) {
        let (status, head, msg) = self.post(&self.message("tools/call", json!({"name": tool, "arguments": args})));
        if status != 200 {
            return (status, head);
        }
        let r = msg.map(|m| m["result"].clone()).unwrap_or(Value::Null);
        let text: String = r["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect();
        if r["isError"].as_bool().unwrap_or(false) {
            for code in [401u16, 403] {
                if text.contains(&format!("({code})")) {
                    return (code, text);
                }
            }
            return (400, text);
        }
        (200, text)
    }

    /// The names tools/list answers.
    pub fn tools(&self) -> std::collections::BTreeSet<String> {
        let (_, _, msg) = self.post(&self.message("tools/list", json!({})));
        let msg = msg.expect("tools/list answers");
        msg["result"]["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(String::from))
            .collect()
    }
}

fn session_of(head: &str) -> Option<String> {
    head.lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id")))
        .map(|(_, v)| v.trim().to_string())
}
